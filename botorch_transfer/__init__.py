r"""botorch_transfer: Bayesian optimization with knowledge transfer for BoTorch."""

from botorch_transfer.acquisition import beta_t
from botorch_transfer.data import TaskData
from botorch_transfer.models import DeltaBOModel, DiffGP, EnvGP

__version__ = "0.1.0"

__all__ = ["DeltaBOModel", "DiffGP", "EnvGP", "TaskData", "beta_t", "__version__"]
