r"""Transfer-learning models for BoTorch."""

from botorch_transfer.models.delta import DeltaBOModel
from botorch_transfer.models.source_posterior import (
    GPSourcePosterior,
    ModelSourcePosterior,
    SourcePosterior,
    SumSourcePosterior,
    source_posterior_from_model,
)

__all__ = [
    "DeltaBOModel",
    "GPSourcePosterior",
    "ModelSourcePosterior",
    "SourcePosterior",
    "SumSourcePosterior",
    "source_posterior_from_model",
]
