r"""Deprecated: moved to :mod:`botorch_transfer.priors.hyperbo.mixture`."""

from botorch_transfer._deprecation import moved_module

__getattr__ = moved_module(__name__, "botorch_transfer.priors.hyperbo.mixture")
