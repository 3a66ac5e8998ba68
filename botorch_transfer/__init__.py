r"""botorch_transfer: Bayesian optimization with knowledge transfer for BoTorch."""

from botorch_transfer.acquisition import (
    beta_t,
    hyperbo_probability_of_improvement,
    randomized_nn_thompson_candidate,
)
from botorch_transfer.data import TaskData
from botorch_transfer.models import (
    RGPE,
    ClusterMetaPriorGP,
    DeltaBOModel,
    DiffGP,
    EnvGP,
    LogPowerSchedule,
    MetaTaskMixtureGP,
    PretrainedPriorGP,
    RandomizedNNEnsemble,
    RankWeightedPriorGP,
    RankWeightedTransferGP,
    SourceConditionedGP,
    TaskColumn,
    TransferGuard,
    align_source,
    align_source_candidates,
    fit_default_meta_task_gps,
    fit_source_gp,
    parameter_roles,
)
from botorch_transfer.priors import (
    ClusterMetaPrior,
    build_cluster_prior,
    cluster_weights_from_distances,
)
from botorch_transfer.priors.hyperbo import (
    PretrainedPrior,
    PretrainedPriorMixture,
    pretrain_clustered_prior,
    pretrain_prior,
)

__version__ = "0.1.0"

__all__ = [
    "ClusterMetaPrior",
    "ClusterMetaPriorGP",
    "DeltaBOModel",
    "DiffGP",
    "EnvGP",
    "LogPowerSchedule",
    "MetaTaskMixtureGP",
    "PretrainedPrior",
    "PretrainedPriorGP",
    "PretrainedPriorMixture",
    "RGPE",
    "RandomizedNNEnsemble",
    "RankWeightedPriorGP",
    "RankWeightedTransferGP",
    "SourceConditionedGP",
    "TaskColumn",
    "TaskData",
    "TransferGuard",
    "beta_t",
    "build_cluster_prior",
    "cluster_weights_from_distances",
    "fit_default_meta_task_gps",
    "align_source",
    "align_source_candidates",
    "fit_source_gp",
    "parameter_roles",
    "hyperbo_probability_of_improvement",
    "pretrain_clustered_prior",
    "pretrain_prior",
    "randomized_nn_thompson_candidate",
    "__version__",
]
