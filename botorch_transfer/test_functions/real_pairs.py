r"""Transfer pairs of real tuning data with real replicate noise.

A pair is two tasks of one family of :mod:`~botorch_transfer.test_functions.real_tables`
(the same hyperparameter grid tuned on two data sets, or on two classes of one data
set). A query returns ONE replicate (one cross-validation fold, one training seed),
drawn at random; regret is measured on the replicate mean, so a method is not
rewarded for finding a lucky fold. The source data are ``n_source`` random grid
points of the source task, one replicate each. The candidates are the grid.

Negative controls are built from the pairs: ``*-permuted`` scrambles the source
table over the grid with a new permutation per seed (the same values, no relation to
the target's inputs). A source from another family is no control here: on these
grids the tables of different families are positively rank-correlated (0.22 to 0.69
between the forest and network tables: on both, larger values of the first and last
hyperparameters tend to be better).

The problems are split once, before any default was chosen on them, into a
development half (``DEVELOPMENT``: defaults are chosen there) and a confirmation
half (``CONFIRMATION``: claims are made there). The development half has
permuted controls of six of its seven pairs, and two more whose tasks are a
confirmation pair's reversed (the forest and network tables tuned on the digits: the
source is scrambled, so only its values carry over); the confirmation half has
permuted controls of three of its seven pairs.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

from botorch_transfer.test_functions.base import TransferProblem, fixed_kernel
from botorch_transfer.test_functions.hpo_pairs import rank_correlation
from botorch_transfer.test_functions.real_tables import FAMILIES, load_table

#: ``name: (source family, source task, target family, target task, control)``;
#: ``control`` is ``None`` (a related pair) or ``"permuted"``.
_DEFINITIONS: dict[str, tuple[str, str, str, str, str | None]] = {}
DEVELOPMENT: list[str] = []
CONFIRMATION: list[str] = []


def _define(
    half: list[str],
    family: str,
    source: str,
    target: str,
    control: str | None = None,
) -> None:
    name = f"{family}-{source}-to-{target}"
    if control is not None:
        name += f"-{control}"
    _DEFINITIONS[name] = (family, source, family, target, control)
    half.append(name)


# related pairs: each family's pairs alternate between the halves
_define(DEVELOPMENT, "svm", "digit1", "digit7")
_define(CONFIRMATION, "svm", "digit3", "digit8")
_define(DEVELOPMENT, "svm", "digit5", "digit9")
_define(CONFIRMATION, "svm", "digit4", "digit9")
_define(DEVELOPMENT, "svm", "digit0", "digit6")
_define(CONFIRMATION, "svm", "digit2", "digit3")
_define(DEVELOPMENT, "forest", "breast_cancer", "wine")
_define(CONFIRMATION, "forest", "digits_low", "digits_high")
_define(DEVELOPMENT, "forest", "wine", "iris")
_define(CONFIRMATION, "forest", "iris", "breast_cancer")
_define(DEVELOPMENT, "mlp", "digits_low", "digits_high")
_define(CONFIRMATION, "mlp", "breast_cancer", "wine")
_define(DEVELOPMENT, "mlp", "wine", "digits_high")
_define(CONFIRMATION, "mlp", "digits_high", "breast_cancer")
# negative controls
_define(DEVELOPMENT, "svm", "digit1", "digit7", "permuted")
_define(CONFIRMATION, "svm", "digit3", "digit8", "permuted")
_define(DEVELOPMENT, "forest", "breast_cancer", "wine", "permuted")
_define(CONFIRMATION, "mlp", "breast_cancer", "wine", "permuted")
_define(DEVELOPMENT, "mlp", "digits_low", "digits_high", "permuted")
_define(CONFIRMATION, "forest", "digits_low", "digits_high", "permuted")
_define(DEVELOPMENT, "forest", "wine", "iris", "permuted")
_define(DEVELOPMENT, "mlp", "wine", "digits_high", "permuted")
_define(DEVELOPMENT, "svm", "digit5", "digit9", "permuted")
_define(DEVELOPMENT, "forest", "digits_high", "digits_low", "permuted")
_define(DEVELOPMENT, "mlp", "digits_high", "digits_low", "permuted")

#: Every pair: ``name: (source family, source task, target family, target task,
#: control)``.
REAL_PAIRS = dict(_DEFINITIONS)
#: The negative controls among them.
REAL_CONTROLS = tuple(name for name, d in REAL_PAIRS.items() if d[-1] is not None)


def _grid_rows(X: Tensor, grid_size: int) -> np.ndarray:
    r"""Rows of the tables (row-major grid order) of unit-cube grid points ``X``."""
    index = (X.detach().cpu().double() * (grid_size - 1)).round().long().numpy()
    index = index.reshape(-1, X.shape[-1])
    return np.ravel_multi_index(tuple(index.T), (grid_size,) * X.shape[-1])


def table_means(table: np.ndarray, grid_size: int):
    r"""``X -> n x 1`` replicate means of ``table`` at unit-cube grid points."""
    means = table.mean(1)

    def evaluate(X: Tensor) -> Tensor:
        values = torch.from_numpy(means[_grid_rows(X, grid_size)])
        return values.to(X).reshape(*X.shape[:-1], 1)

    return evaluate


def table_replicates(table: np.ndarray, grid_size: int):
    r"""``(X, generator) -> n x 1``: one random replicate of ``table`` per grid
    point."""

    def draw(X: Tensor, generator: torch.Generator) -> Tensor:
        rows = _grid_rows(X, grid_size)
        cols = torch.randint(table.shape[1], (len(rows),), generator=generator)
        values = torch.from_numpy(table[rows, cols.numpy()])
        return values.to(X).reshape(*X.shape[:-1], 1)

    return draw


def table_problem(
    name: str,
    source_table: np.ndarray,
    target_table: np.ndarray,
    grid_size: int,
    dim: int,
    description: str,
    **settings,
) -> TransferProblem:
    r"""The real-table protocol's problem: 100 source observations, 3 initial target
    points, T = 30, UCB's ``beta`` = 2, one replicate per query, the known noise
    variances the tables' mean replicate variances.

    Args:
        name: The problem's name.
        source_table: The (first) source's ``n_configs x n_replicates`` table.
        target_table: The target's table.
        grid_size: Points per dimension of both grids.
        dim: The target's input dimension.
        description: The problem's one-line summary.
        **settings: Further ``TransferProblem`` fields (``source_name``,
            ``extra_sources``, ``source_space``).
    """
    kernels = {
        key: (lambda d: fixed_kernel("matern52", 0.3, 25.0, d))
        for key in ("source", "target", "delta")
    }
    return TransferProblem(
        name=name,
        bounds=torch.stack([torch.zeros(dim), torch.ones(dim)]).double(),
        target=table_means(target_table, grid_size),
        source=table_means(source_table, grid_size),
        n_source=100,
        source_noise=float(source_table.var(1, ddof=1).mean()),
        target_noise=float(target_table.var(1, ddof=1).mean()),
        kernels=kernels,
        grid_size=grid_size,
        n_init=3,
        iterations=30,
        beta=2.0,
        noisy_observations=True,
        observe_source=table_replicates(source_table, grid_size),
        observe_target=table_replicates(target_table, grid_size),
        description=description,
        **settings,
    )


@lru_cache
def _tables(name: str) -> tuple[np.ndarray, np.ndarray]:
    source_family, source_task, family, target_task, _ = REAL_PAIRS[name]
    return load_table(source_family, source_task), load_table(family, target_task)


def _permuted(table: np.ndarray, seed: int) -> np.ndarray:
    return table[np.random.default_rng(seed).permutation(table.shape[0])]


def pair_rank_correlation(name: str, seed: int = 0) -> float:
    r"""Spearman rank correlation of the source and target replicate means over the
    grid, the source as the problem of ``seed`` has it (a control's permuted)."""
    source, target = _tables(name)
    if REAL_PAIRS[name][-1] == "permuted":
        source = _permuted(source, seed)
    return rank_correlation(
        torch.from_numpy(source.mean(1)), torch.from_numpy(target.mean(1))
    )


def real_pair(name: str, seed: int = 0) -> TransferProblem:
    r"""The real transfer pair ``name`` (a key of :data:`REAL_PAIRS`).

    100 source observations, 3 initial target points, T = 30, UCB's ``beta`` = 2;
    the known noise variances are the tables' mean replicate variances.

    Args:
        name: The pair.
        seed: The replicate (a ``*-permuted`` control draws a new permutation per
            seed; the others ignore it).
    """
    if name not in REAL_PAIRS:
        raise ValueError(f"Unknown real pair {name!r}; choose from {list(REAL_PAIRS)}.")
    source_family, source_task, family, target_task, control = REAL_PAIRS[name]
    fam = FAMILIES[family]
    g = fam.grid_size
    source_table, target_table = _tables(name)
    if source_table.shape != target_table.shape:
        raise ValueError(f"{name}: the source and target grids differ.")
    if control == "permuted":
        source_table = _permuted(source_table, seed)

    rho = pair_rank_correlation(name, seed)
    kind = {None: "pair", "permuted": "control (source permuted over the grid)"}
    return table_problem(
        name,
        source_table,
        target_table,
        g,
        fam.dim,
        f"real {kind[control]}: {fam.description}; source "
        f"{source_family}/{source_task}, target {family}/{target_task}, rank "
        f"correlation {rho:.2f}",
    )
