r"""Transfer-learning models for BoTorch."""

from botorch_transfer.models.cluster_meta import (
    ClusterMetaPrior,
    ClusterMetaPriorGP,
    build_cluster_prior,
    cluster_weights_from_distances,
)
from botorch_transfer.models.delta import DeltaBOModel
from botorch_transfer.models.diff_gp import DiffGP
from botorch_transfer.models.env_gp import EnvGP
from botorch_transfer.models.source_posterior import (
    GPSourcePosterior,
    ModelSourcePosterior,
    SourcePosterior,
    SumSourcePosterior,
    source_posterior_from_model,
)

__all__ = [
    "ClusterMetaPrior",
    "ClusterMetaPriorGP",
    "build_cluster_prior",
    "cluster_weights_from_distances",
    "DeltaBOModel",
    "DiffGP",
    "EnvGP",
    "GPSourcePosterior",
    "ModelSourcePosterior",
    "SourcePosterior",
    "SumSourcePosterior",
    "source_posterior_from_model",
]
