r"""Transfer-learning models for BoTorch."""

from botorch_transfer._deprecation import moved_names
from botorch_transfer.models.base import SourceConditionedGP, TrainingData
from botorch_transfer.models.cluster_meta import ClusterMetaPriorGP
from botorch_transfer.models.delta import DeltaBOModel
from botorch_transfer.models.diff_gp import DiffGP
from botorch_transfer.models.env_gp import EnvGP
from botorch_transfer.models.frozen_source import source_posterior_from_model
from botorch_transfer.models.guard import TransferGuard
from botorch_transfer.models.likelihoods import (
    TaskIndexedGaussianLikelihood,
    TaskIndexedNoise,
)
from botorch_transfer.models.meta_task_mixture import (
    ComponentGrid,
    DefaultMetaTaskPosteriors,
    MetaTaskMixtureGP,
    fit_default_meta_task_gps,
)
from botorch_transfer.models.pooled import (
    LowRankInference,
    PooledTransferGP,
    source_fitted_kernel,
)
from botorch_transfer.models.pretrained import PretrainedPriorGP
from botorch_transfer.models.randomized_nn import RandomizedNNEnsemble
from botorch_transfer.models.randomized_nn_options import (
    FunctionSpaceRegularizer,
    LFBOLoss,
    LogPowerSchedule,
    NetworkOptions,
    TrainingOptions,
)
from botorch_transfer.models.rank_combination import RankingOptions
from botorch_transfer.models.rank_weighted import RankWeightedTransferGP
from botorch_transfer.models.rank_weighted_prior import (
    PriorMisfitWarning,
    RankWeightedPriorGP,
)
from botorch_transfer.models.rgpe import RGPE
from botorch_transfer.models.source_gp import FittedSourceGP, fit_source_gp
from botorch_transfer.models.source_options import (
    AffineMap,
    IdentityMap,
    MarginalAffineMap,
    SourceOptions,
)
from botorch_transfer.models.source_posterior import (
    GPSourcePosterior,
    MarginalAffineSourcePosterior,
    ModelSourcePosterior,
    SourcePosterior,
    SumSourcePosterior,
)
from botorch_transfer.models.source_space import (
    align_source,
    align_source_candidates,
    parameter_roles,
)
from botorch_transfer.models.task_column import TaskColumn
from botorch_transfer.models.utils.assorted import default_transfer_kernel

__all__ = [
    "ComponentGrid",
    "LowRankInference",
    "RankingOptions",
    "SourceOptions",
    "MarginalAffineMap",
    "IdentityMap",
    "AffineMap",
    "ClusterMetaPriorGP",
    "DefaultMetaTaskPosteriors",
    "DeltaBOModel",
    "DiffGP",
    "EnvGP",
    "FittedSourceGP",
    "FunctionSpaceRegularizer",
    "GPSourcePosterior",
    "LFBOLoss",
    "LogPowerSchedule",
    "MetaTaskMixtureGP",
    "MarginalAffineSourcePosterior",
    "ModelSourcePosterior",
    "NetworkOptions",
    "PooledTransferGP",
    "PretrainedPriorGP",
    "PriorMisfitWarning",
    "RGPE",
    "RandomizedNNEnsemble",
    "RankWeightedPriorGP",
    "RankWeightedTransferGP",
    "SourceConditionedGP",
    "SourcePosterior",
    "SumSourcePosterior",
    "TaskColumn",
    "TaskIndexedGaussianLikelihood",
    "TaskIndexedNoise",
    "TrainingOptions",
    "TrainingData",
    "TransferGuard",
    "align_source",
    "align_source_candidates",
    "default_transfer_kernel",
    "fit_default_meta_task_gps",
    "fit_source_gp",
    "parameter_roles",
    "source_fitted_kernel",
    "source_posterior_from_model",
]

# acquisition functions that used to be importable from here
__getattr__ = moved_names(
    __name__,
    {
        "hyperbo_probability_of_improvement": ("botorch_transfer.acquisition.hyperbo"),
        "randomized_nn_thompson_candidate": (
            "botorch_transfer.acquisition.randomized_nn"
        ),
    },
)
