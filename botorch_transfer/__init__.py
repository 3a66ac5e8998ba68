r"""botorch_transfer: Bayesian optimization with knowledge transfer for BoTorch."""

from botorch_transfer.acquisition import beta_t
from botorch_transfer.data import TaskData
from botorch_transfer.models import (
    DeltaBOModel,
    DiffGP,
    EnvGP,
    PretrainedPriorGP,
    hyperbo_probability_of_improvement,
)
from botorch_transfer.pretraining import PretrainedPrior, pretrain_prior

__version__ = "0.1.0"

__all__ = [
    "DeltaBOModel",
    "DiffGP",
    "EnvGP",
    "PretrainedPrior",
    "PretrainedPriorGP",
    "TaskData",
    "beta_t",
    "hyperbo_probability_of_improvement",
    "pretrain_prior",
    "__version__",
]
