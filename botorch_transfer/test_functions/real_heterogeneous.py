r"""Transfer pairs of real tuning data whose source ran on other parameters.

Each problem is a pair of tasks of one family of
:mod:`~botorch_transfer.test_functions.real_tables` (the same grid tuned on two data
sets or two classes), with the search space changed between them as real histories
change:

- ``lacks``: the source lacks one of the target's parameters; it ran at a fixed,
  known value (the source's table is the grid's slice at that level);
- ``unknown``: the same, but the value it ran at is not known to the user (who
  tries a few candidates over the parameter's range);
- ``extra``: the source has a parameter the target no longer tunes; the target
  runs at a known value of it (the target's table is the slice);
- ``subrange``: the source ran on part of one parameter's range (its points lie
  there), the target on the whole range;
- ``*-permuted``: a negative control, a ``lacks`` pair whose source table is
  scrambled over its grid with a new permutation per seed.

The fixed values are the scikit-learn defaults a past run would have used, at the
nearest grid level (``max_features="sqrt"``, ``max_depth=None``, ``hidden=100``,
``weight_decay=1e-4``, ``C=1``, ``min_samples_leaf=1``), chosen before any method
ran. A query returns one replicate, regret is measured on the replicate means, and
the source's 100 observations are random points of its own grid, one replicate
each (as in :mod:`~botorch_transfer.test_functions.real_pairs`).

The problems are split once, before any default was chosen on them, into a
development half (``HETERO_DEVELOPMENT``) and a confirmation half
(``HETERO_CONFIRMATION``), each with every kind and one control.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

from botorch_transfer.test_functions.base import (
    SourceSpace,
    TransferProblem,
)
from botorch_transfer.test_functions.hpo_pairs import rank_correlation
from botorch_transfer.test_functions.real_pairs import table_problem
from botorch_transfer.test_functions.real_tables import FAMILIES, load_table

#: The values a user tries for a parameter whose source value is unknown: the two
#: ends and the middle of its (unit) range.
UNKNOWN_VALUE_CANDIDATES = (0.0, 0.5, 1.0)


@dataclass(frozen=True)
class HeterogeneousPair:
    r"""How one heterogeneous pair was made.

    Attributes:
        family: The tuning family.
        source: The source task.
        target: The target task.
        kind: ``"lacks"``, ``"unknown"``, ``"extra"`` or ``"subrange"``.
        parameter: The parameter that differs.
        levels: The grid levels of ``parameter`` the differing side ran at: one
            level (``lacks``, ``unknown``, ``extra``) or the first and last of the
            source's sub-range.
        permuted: The source table is scrambled over its grid (a control).
    """

    family: str
    source: str
    target: str
    kind: str
    parameter: str
    levels: tuple[int, ...]
    permuted: bool = False


HETERO_PAIRS: dict[str, HeterogeneousPair] = {}
HETERO_DEVELOPMENT: list[str] = []
HETERO_CONFIRMATION: list[str] = []


def _define(half: list[str], pair: HeterogeneousPair) -> None:
    name = (
        f"hetero-{pair.family}-{pair.source}-to-{pair.target}-{pair.kind}-"
        f"{pair.parameter}" + ("-permuted" if pair.permuted else "")
    )
    HETERO_PAIRS[name] = pair
    half.append(name)


_D, _C = HETERO_DEVELOPMENT, HETERO_CONFIRMATION
_P = HeterogeneousPair
_define(_D, _P("forest", "breast_cancer", "wine", "lacks", "max_features", (2,)))
_define(_D, _P("svm", "digit1", "digit7", "lacks", "log10_C", (5,)))
_define(_D, _P("mlp", "digits_low", "digits_high", "unknown", "hidden", (5,)))
_define(_D, _P("forest", "wine", "iris", "extra", "min_samples_leaf", (0,)))
_define(_D, _P("mlp", "wine", "digits_high", "subrange", "log10_lr", (0, 2)))
_define(_D, _P("forest", "breast_cancer", "wine", "lacks", "max_features", (2,), True))
_define(_C, _P("forest", "iris", "breast_cancer", "lacks", "max_depth", (5,)))
_define(_C, _P("mlp", "breast_cancer", "wine", "lacks", "log10_weight_decay", (1,)))
_define(_C, _P("forest", "digits_low", "digits_high", "unknown", "max_features", (1,)))
_define(_C, _P("mlp", "digits_high", "breast_cancer", "extra", "hidden", (5,)))
_define(_C, _P("svm", "digit3", "digit8", "subrange", "log10_gamma", (0, 7)))
_define(
    _C,
    _P("mlp", "breast_cancer", "wine", "lacks", "log10_weight_decay", (1,), True),
)
del _D, _C, _P

#: The negative controls among the pairs.
HETERO_CONTROLS = tuple(name for name, p in HETERO_PAIRS.items() if p.permuted)


def _slice(table: np.ndarray, grid_size: int, axis: int, level: int) -> np.ndarray:
    r"""The rows of a full-grid table at one level of one axis, in row-major order
    over the other axes."""
    d = round(np.log(table.shape[0]) / np.log(grid_size))
    cube = table.reshape((grid_size,) * d + (table.shape[1],))
    return np.take(cube, level, axis=axis).reshape(-1, table.shape[1])


@lru_cache
def _tables(name: str) -> tuple[np.ndarray, np.ndarray]:
    r"""The source's and the target's tables, each on its own grid (unscrambled)."""
    pair = HETERO_PAIRS[name]
    family = FAMILIES[pair.family]
    g, axis = family.grid_size, family.parameters.index(pair.parameter)
    source = load_table(pair.family, pair.source)
    target = load_table(pair.family, pair.target)
    if pair.kind in ("lacks", "unknown"):
        source = _slice(source, g, axis, pair.levels[0])
    elif pair.kind == "extra":
        target = _slice(target, g, axis, pair.levels[0])
    return source, target


def _source_table(name: str, seed: int) -> np.ndarray:
    table = _tables(name)[0]
    if HETERO_PAIRS[name].permuted:
        table = table[np.random.default_rng(seed).permutation(table.shape[0])]
    return table


def _grid(dim: int, grid_size: int) -> Tensor:
    axes = [torch.linspace(0, 1, grid_size, dtype=torch.float64)] * dim
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), -1).reshape(-1, dim)


def hetero_rank_correlation(name: str, seed: int = 0) -> float:
    r"""Spearman rank correlation between the source and the target replicate means
    on the points both ran (the source's grid, the target at the source's fixed
    values; a sub-range pair on the sub-range), the source as the problem of
    ``seed`` has it (a control's permuted)."""
    pair = HETERO_PAIRS[name]
    family = FAMILIES[pair.family]
    g, axis = family.grid_size, family.parameters.index(pair.parameter)
    source, target = _source_table(name, seed), _tables(name)[1]
    if pair.kind in ("lacks", "unknown"):
        target = _slice(target, g, axis, pair.levels[0])
    elif pair.kind == "extra":
        source = _slice(source, g, axis, pair.levels[0])
    elif pair.kind == "subrange":
        inside = _subrange_rows(family.dim, g, axis, pair.levels)
        source, target = source[inside], target[inside]
    return rank_correlation(
        torch.from_numpy(source.mean(1)), torch.from_numpy(target.mean(1))
    )


def _subrange_rows(dim: int, grid_size: int, axis: int, levels: tuple[int, ...]):
    index = np.indices((grid_size,) * dim).reshape(dim, -1)[axis]
    return np.flatnonzero((index >= levels[0]) & (index <= levels[-1]))


def _space(name: str) -> SourceSpace:
    pair = HETERO_PAIRS[name]
    family = FAMILIES[pair.family]
    g, names = family.grid_size, family.parameters
    value = pair.levels[0] / (g - 1)  # the level's unit-cube value
    others = tuple(n for n in names if n != pair.parameter)
    source_names = others if pair.kind in ("lacks", "unknown") else names
    grid = _grid(len(source_names), g)
    if pair.kind == "subrange":
        grid = grid[
            _subrange_rows(family.dim, g, names.index(pair.parameter), pair.levels)
        ]

    def sample(n: int, generator: torch.Generator) -> Tensor:
        return grid[torch.randint(grid.shape[0], (n,), generator=generator)]

    return SourceSpace(
        feature_names=source_names,
        target_feature_names=others if pair.kind == "extra" else names,
        sample=sample,
        source_values={pair.parameter: value} if pair.kind == "lacks" else {},
        target_values={pair.parameter: value} if pair.kind == "extra" else {},
        candidates=(
            {pair.parameter: UNKNOWN_VALUE_CANDIDATES} if pair.kind == "unknown" else {}
        ),
    )


_KIND = {
    "lacks": "the source lacks {p}, run at {v}",
    "unknown": "the source lacks {p}, run at an unknown value ({v})",
    "extra": "the source has {p}, which the target runs at {v}",
    "subrange": "the source ran {p} on [{lo}, {hi}] only",
}


def hetero_pair(name: str, seed: int = 0) -> TransferProblem:
    r"""The heterogeneous pair ``name`` (a key of :data:`HETERO_PAIRS`).

    100 source observations in the source's own columns
    (:attr:`~botorch_transfer.test_functions.base.TransferProblem.source_space`), 3
    initial target points, T = 30, UCB's ``beta`` = 2; the known noise variances
    are the tables' mean replicate variances.

    Args:
        name: The pair.
        seed: The replicate (a ``*-permuted`` control draws a new permutation per
            seed; the others ignore it).
    """
    if name not in HETERO_PAIRS:
        raise ValueError(
            f"Unknown heterogeneous pair {name!r}; choose from {list(HETERO_PAIRS)}."
        )
    pair = HETERO_PAIRS[name]
    family = FAMILIES[pair.family]
    g = family.grid_size
    source_table, target_table = _source_table(name, seed), _tables(name)[1]
    space = _space(name)
    levels = family.levels[family.parameters.index(pair.parameter)]
    what = _KIND[pair.kind].format(
        p=pair.parameter,
        v=levels[pair.levels[0]],
        lo=levels[pair.levels[0]],
        hi=levels[pair.levels[-1]],
    )
    kind = "control (source permuted over its grid)" if pair.permuted else "pair"
    return table_problem(
        name,
        source_table,
        target_table,
        g,
        len(space.target_feature_names),
        f"real heterogeneous {kind}: {family.description}; source "
        f"{pair.family}/{pair.source}, target {pair.family}/{pair.target}; {what}; "
        f"rank correlation {hetero_rank_correlation(name, seed):.2f}",
        source_name=pair.source,
        source_space=space,
    )
