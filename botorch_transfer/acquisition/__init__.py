r"""Acquisition helpers that BoTorch does not provide."""

from botorch_transfer.acquisition.beta import beta_t
from botorch_transfer.acquisition.hyperbo import hyperbo_probability_of_improvement
from botorch_transfer.acquisition.randomized_nn import randomized_nn_thompson_candidate

__all__ = [
    "beta_t",
    "hyperbo_probability_of_improvement",
    "randomized_nn_thompson_candidate",
]
