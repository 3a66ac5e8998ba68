r"""botorch_transfer: Bayesian optimization with knowledge transfer for BoTorch."""

from botorch_transfer.acquisition import beta_t
from botorch_transfer.data import TaskData
from botorch_transfer.models import DeltaBOModel

__version__ = "0.1.0"

__all__ = ["DeltaBOModel", "TaskData", "beta_t", "__version__"]
