r"""Transfer test problems: a source task and a target task (or several sources),
all runnable offline, as :mod:`botorch.test_functions` is for single tasks.

:func:`~botorch_transfer.test_functions.problems.make_problem` builds any of them by
name (:data:`~botorch_transfer.test_functions.problems.PROBLEMS`): the papers'
synthetic settings, negative controls, tuning pairs and multi-source problems of
real tuning tables with replicate noise
(:mod:`~botorch_transfer.test_functions.real_pairs`,
:mod:`~botorch_transfer.test_functions.real_multi`), pairs whose source ran on other
parameters (:mod:`~botorch_transfer.test_functions.real_heterogeneous`), and the
problems that start from no target point
(:mod:`~botorch_transfer.test_functions.zero_start`). The benchmark harness that
runs methods on them lives outside the package, in the repository's
``benchmarks/``.
"""

from botorch_transfer.test_functions.base import TransferProblem
from botorch_transfer.test_functions.problems import PROBLEMS, make_problem

__all__ = ["PROBLEMS", "TransferProblem", "make_problem"]
