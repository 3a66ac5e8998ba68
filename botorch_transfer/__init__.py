r"""botorch_transfer: Bayesian optimization with knowledge transfer for BoTorch."""

from botorch_transfer.acquisition import beta_t
from botorch_transfer.data import TaskData
from botorch_transfer.models import (
    ClusterMetaPrior,
    ClusterMetaPriorGP,
    DeltaBOModel,
    DiffGP,
    EnvGP,
    build_cluster_prior,
)

__version__ = "0.1.0"

__all__ = [
    "ClusterMetaPrior",
    "ClusterMetaPriorGP",
    "build_cluster_prior",
    "DeltaBOModel", "DiffGP", "EnvGP", "TaskData", "beta_t", "__version__"]
