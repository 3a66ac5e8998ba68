r"""botorch_transfer: Bayesian optimization with knowledge transfer for BoTorch."""

from botorch_transfer.acquisition import beta_t
from botorch_transfer.data import TaskData
from botorch_transfer.models import (
    DeltaBOModel,
    DiffGP,
    EnvGP,
    LogPowerSchedule,
    RandomizedNNEnsemble,
    randomized_nn_thompson_candidate,
)

__version__ = "0.1.0"

__all__ = [
    "DeltaBOModel",
    "DiffGP",
    "EnvGP",
    "LogPowerSchedule",
    "RandomizedNNEnsemble",
    "TaskData",
    "beta_t",
    "randomized_nn_thompson_candidate",
    "__version__",
]
