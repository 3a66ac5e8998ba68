r"""Problems that start from no target point: the first queries come from the sources.

A user with past experiments and no observation of the new task yet asks the model
for the first query. Each related problem of the real tracks (the single-source pairs
of :mod:`~botorch_transfer.test_functions.real_pairs` and the multi-source problems of
:mod:`~botorch_transfer.test_functions.real_multi`, not their scrambled controls) has a
``<name>-from-zero`` variant: the same sources and replicate noise, no initial target
point, and ``T = 5`` queries, so a run's cumulative regret ``R_5`` is the cost of the
first five queries. A method is compared with a Sobol design of five points
(``sobol``: the design a user evaluates before any model). The halves are those of
the problems they come from (``ZERO_DEVELOPMENT``, ``ZERO_CONFIRMATION``).
"""

from __future__ import annotations

from dataclasses import replace

from botorch_transfer.test_functions.base import TransferProblem
from botorch_transfer.test_functions.real_multi import (
    MULTI_CONFIRMATION,
    MULTI_DEVELOPMENT,
    MULTI_SOURCE_CONTROLS,
    multi_source_problem,
)
from botorch_transfer.test_functions.real_pairs import (
    CONFIRMATION,
    DEVELOPMENT,
    REAL_CONTROLS,
    real_pair,
)

#: The queries a zero-start run makes.
ZERO_START_QUERIES = 5
SUFFIX = "-from-zero"


def _related(names: list[str], controls: tuple[str, ...]) -> list[str]:
    return [name for name in names if name not in controls]


_BASES = {
    **{name: real_pair for name in _related(DEVELOPMENT + CONFIRMATION, REAL_CONTROLS)},
    **{
        name: multi_source_problem
        for name in _related(
            MULTI_DEVELOPMENT + MULTI_CONFIRMATION, MULTI_SOURCE_CONTROLS
        )
    },
}
#: The zero-start problems of each half.
ZERO_DEVELOPMENT = [
    name + SUFFIX
    for name in _related(DEVELOPMENT, REAL_CONTROLS)
    + _related(MULTI_DEVELOPMENT, MULTI_SOURCE_CONTROLS)
]
ZERO_CONFIRMATION = [
    name + SUFFIX
    for name in _related(CONFIRMATION, REAL_CONTROLS)
    + _related(MULTI_CONFIRMATION, MULTI_SOURCE_CONTROLS)
]
#: Every zero-start problem's base problem.
ZERO_START_BASES = {name + SUFFIX: name for name in _BASES}


def zero_start_problem(name: str, seed: int = 0) -> TransferProblem:
    r"""The zero-start variant ``name`` (``<base>-from-zero``) of a related problem.

    Args:
        name: A key of :data:`ZERO_START_BASES`.
        seed: The replicate (as for the base problem: the scrambled sources' shuffle).

    Returns:
        The base problem with no initial target point and ``T = 5``.
    """
    if name not in ZERO_START_BASES:
        raise ValueError(
            f"Unknown zero-start problem {name!r}; choose from "
            f"{sorted(ZERO_START_BASES)}."
        )
    base = ZERO_START_BASES[name]
    problem = _BASES[base](base, seed=seed)
    return replace(
        problem,
        name=name,
        n_init=0,
        iterations=ZERO_START_QUERIES,
        description=f"{problem.description}; no initial target point, "
        f"{ZERO_START_QUERIES} queries",
    )
