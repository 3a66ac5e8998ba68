r"""Multi-source problems of real tuning data with real replicate noise.

A problem is a target task of one family of
:mod:`~botorch_transfer.test_functions.real_tables` with two to five source tasks of the
same family (the same hyperparameter grid tuned on other data sets or classes), as a
user's history of past experiments is: some closely related, some less. A source
marked scrambled is its task's table permuted over the grid with a new permutation
per seed (the same values, no relation to the target's inputs); the ``*-scrambled``
controls scramble every source. Each source has 100 random grid points, one
replicate each; queries return one replicate (as in
:mod:`~botorch_transfer.test_functions.real_pairs`); regret is measured on the replicate
means.

The problems were split once, before any default was chosen on them, into a
development half (``MULTI_DEVELOPMENT``: kept for choosing defaults) and a
confirmation half (``MULTI_CONFIRMATION``: claims are made there): each family's
problems alternate between the halves, and each half has two all-scrambled
controls. :func:`multi_source_rank_correlations` gives every source's rank
correlation with its target.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from botorch_transfer.test_functions.base import (
    ExtraSource,
    TransferProblem,
)
from botorch_transfer.test_functions.hpo_pairs import rank_correlation
from botorch_transfer.test_functions.real_pairs import table_problem, table_replicates
from botorch_transfer.test_functions.real_tables import FAMILIES, load_table

#: ``name: (family, target task, source tasks, scrambled source tasks)``.
_DEFINITIONS: dict[str, tuple[str, str, tuple[str, ...], tuple[str, ...]]] = {}
MULTI_DEVELOPMENT: list[str] = []
MULTI_CONFIRMATION: list[str] = []


def _define(
    half: list[str],
    family: str,
    target: str,
    sources: tuple[str, ...],
    scrambled: tuple[str, ...] = (),
    control: bool = False,
) -> None:
    name = f"multi-{family}-{target}" + ("-scrambled" if control else "")
    if control:
        scrambled = sources
    _DEFINITIONS[name] = (family, target, sources, scrambled)
    half.append(name)


# each family's problems alternate between the halves
_define(
    MULTI_DEVELOPMENT,
    "svm",
    "digit7",
    ("digit1", "digit2", "digit4", "digit9"),
    ("digit9",),
)
_define(
    MULTI_CONFIRMATION,
    "svm",
    "digit8",
    ("digit3", "digit5", "digit0", "digit6"),
    ("digit6",),
)
_define(MULTI_DEVELOPMENT, "svm", "digit9", ("digit4", "digit5"))
_define(
    MULTI_CONFIRMATION,
    "svm",
    "digit3",
    ("digit2", "digit8", "digit5", "digit1", "digit7"),
)
_define(
    MULTI_DEVELOPMENT,
    "forest",
    "wine",
    ("breast_cancer", "iris", "digits_low"),
    ("digits_low",),
)
_define(
    MULTI_CONFIRMATION,
    "forest",
    "breast_cancer",
    ("iris", "wine", "digits_low", "digits_high"),
)
_define(MULTI_DEVELOPMENT, "forest", "digits_high", ("digits_low", "breast_cancer"))
_define(
    MULTI_CONFIRMATION,
    "forest",
    "iris",
    ("wine", "breast_cancer", "digits_high"),
    ("digits_high",),
)
_define(
    MULTI_DEVELOPMENT,
    "mlp",
    "digits_high",
    ("digits_low", "wine", "breast_cancer"),
    ("breast_cancer",),
)
_define(MULTI_CONFIRMATION, "mlp", "wine", ("breast_cancer", "digits_high"))
_define(
    MULTI_DEVELOPMENT, "mlp", "breast_cancer", ("wine", "digits_low", "digits_high")
)
_define(
    MULTI_CONFIRMATION,
    "mlp",
    "digits_low",
    ("digits_high", "breast_cancer", "wine"),
    ("wine",),
)
# controls: every source scrambled
_define(
    MULTI_DEVELOPMENT, "svm", "digit7", ("digit1", "digit2", "digit4"), control=True
)
_define(MULTI_DEVELOPMENT, "forest", "wine", ("breast_cancer", "iris"), control=True)
_define(
    MULTI_CONFIRMATION, "svm", "digit8", ("digit3", "digit5", "digit0"), control=True
)
_define(
    MULTI_CONFIRMATION, "mlp", "wine", ("breast_cancer", "digits_high"), control=True
)

#: Every multi-source problem, by name.
MULTI_SOURCE_PROBLEMS = dict(_DEFINITIONS)
#: The controls among them (every source scrambled).
MULTI_SOURCE_CONTROLS = tuple(
    n for n in MULTI_SOURCE_PROBLEMS if n.endswith("-scrambled")
)


def _scrambled(table: np.ndarray, seed: int, k: int) -> np.ndarray:
    # a permutation per seed and source (two scrambled sources are not alike)
    generator = np.random.default_rng([seed, k])
    return table[generator.permutation(table.shape[0])]


@lru_cache
def _table(family: str, task: str) -> np.ndarray:
    return load_table(family, task)


def _source_tables(name: str, seed: int) -> list[tuple[str, np.ndarray, bool]]:
    family, _, sources, scrambled = MULTI_SOURCE_PROBLEMS[name]
    tables = []
    for k, task in enumerate(sources):
        table = _table(family, task)
        if task in scrambled:
            table = _scrambled(table, seed, k)
        tables.append((task, table, task in scrambled))
    return tables


def multi_source_rank_correlations(name: str, seed: int = 0) -> dict[str, float]:
    r"""Spearman rank correlation of each source's replicate means with the
    target's over the grid, the sources as the problem of ``seed`` has them."""
    family, target, _, _ = MULTI_SOURCE_PROBLEMS[name]
    target_means = torch.from_numpy(_table(family, target).mean(1))
    return {
        task: rank_correlation(torch.from_numpy(table.mean(1)), target_means)
        for task, table, _ in _source_tables(name, seed)
    }


def multi_source_problem(name: str, seed: int = 0) -> TransferProblem:
    r"""The multi-source problem ``name`` (a key of :data:`MULTI_SOURCE_PROBLEMS`).

    100 observations per source, 3 initial target points, T = 30, UCB's ``beta`` =
    2; the known noise variances are the tables' mean replicate variances.

    Args:
        name: The problem.
        seed: The replicate (scrambled sources draw a new permutation per seed).
    """
    if name not in MULTI_SOURCE_PROBLEMS:
        raise ValueError(
            f"Unknown multi-source problem {name!r}; choose from "
            f"{list(MULTI_SOURCE_PROBLEMS)}."
        )
    family_name, target_task, _, _ = MULTI_SOURCE_PROBLEMS[name]
    family = FAMILIES[family_name]
    g = family.grid_size
    target_table = _table(family_name, target_task)
    tables = _source_tables(name, seed)
    rho = multi_source_rank_correlations(name, seed)

    def label(task: str, scrambled: bool) -> str:
        kind = "scrambled " if scrambled else ""
        return f"{kind}{family_name}/{task} (rank correlation {rho[task]:.2f})"

    (first, first_table, first_scrambled), *rest = tables
    extra = tuple(
        ExtraSource(
            name=task,
            observe=table_replicates(table, g),
            noise=float(table.var(1, ddof=1).mean()),
            description=label(task, scrambled),
        )
        for task, table, scrambled in rest
    )
    control = name in MULTI_SOURCE_CONTROLS
    sources = ", ".join(label(t, s) for t, _, s in tables)
    return table_problem(
        name,
        first_table,
        target_table,
        g,
        family.dim,
        f"real multi-source {'control' if control else 'problem'}: "
        f"{family.description}; target {family_name}/{target_task}; sources "
        f"{sources}",
        source_name=first,
        extra_sources=extra,
    )
