r"""Transfer-learning models for BoTorch."""

from botorch_transfer.models.delta import DeltaBOModel
from botorch_transfer.models.diff_gp import DiffGP
from botorch_transfer.models.env_gp import EnvGP
from botorch_transfer.models.pretrained import PretrainedPriorGP, hyperbo_probability_of_improvement
from botorch_transfer.models.source_posterior import (
    GPSourcePosterior,
    ModelSourcePosterior,
    SourcePosterior,
    SumSourcePosterior,
    source_posterior_from_model,
)

__all__ = [
    "DeltaBOModel",
    "DiffGP",
    "EnvGP",
    "GPSourcePosterior",
    "ModelSourcePosterior",
    "PretrainedPriorGP",
    "SourcePosterior",
    "SumSourcePosterior",
    "hyperbo_probability_of_improvement",
    "source_posterior_from_model",
]
