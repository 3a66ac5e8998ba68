r"""Benchmarks: ``python -m benchmarks {run,summarize,plot,list}``.

Importing the package registers the built-in methods
(:mod:`~benchmarks.transfer_methods`, :mod:`~benchmarks.heterogeneous_methods`,
:mod:`~benchmarks.meta_registry`) in the one registry of :mod:`~benchmarks.methods`.
"""

# registration order is the order `list` shows: transfer methods (and `random`) first
# isort: off
from benchmarks import transfer_methods  # noqa: F401
from benchmarks import heterogeneous_methods  # noqa: F401
from benchmarks import meta_registry  # noqa: F401
# isort: on
