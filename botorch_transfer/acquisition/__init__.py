r"""Acquisition helpers that BoTorch does not provide."""

from botorch_transfer.acquisition.beta import beta_t

__all__ = ["beta_t"]
