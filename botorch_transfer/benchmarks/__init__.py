r"""Benchmarks: ``python -m botorch_transfer.benchmarks {run,summarize,plot,list}``.

Importing the package registers the built-in methods
(:mod:`~botorch_transfer.benchmarks.transfer_methods`,
:mod:`~botorch_transfer.benchmarks.meta_methods`) in the one registry of
:mod:`~botorch_transfer.benchmarks.methods`.
"""

# registration order is the order `list` shows: transfer methods (and `random`) first
# isort: off
from botorch_transfer.benchmarks import transfer_methods  # noqa: F401
from botorch_transfer.benchmarks import meta_methods  # noqa: F401
# isort: on
