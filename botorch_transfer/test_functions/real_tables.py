r"""Tables of real hyperparameter-tuning evaluations with their replicate noise.

Each family tunes one scikit-learn model on a grid of hyperparameters over several
tasks (data sets bundled with scikit-learn); every grid point is evaluated once per
replicate, so a table is ``n_configs x n_replicates`` and the spread across a row is
the real noise a tuning run sees (a cross-validation fold, a training seed):

- ``svm``: an RBF support-vector classifier on the digits, one task per digit (that
  digit against the rest), ``log10 C`` in ``[-2, 4]`` x ``log10 gamma`` in
  ``[-5, 1]`` on a 16 x 16 grid; balanced accuracy (percent) on each of 5
  stratified cross-validation folds.
- ``forest``: a random forest of 16 trees, ``max_depth`` x ``min_samples_leaf`` x
  ``max_features`` on a 6 x 6 x 6 grid, on breast cancer, wine, iris and the two
  halves of the digits (classes 0-4 and 5-9); accuracy (percent) on each of 5
  cross-validation folds, each fold with its own forest seed.
- ``mlp``: a one-hidden-layer network trained by Adam for 50 epochs,
  ``log10`` learning rate x ``log10`` weight decay x hidden units on a 6 x 6 x 6
  grid, on breast cancer, wine and the two halves of the digits; validation
  accuracy (percent) on one fixed split for 5 training seeds.

The tables ship with the package (``data/<family>.npz``, about 300 kB in all); the
repository's ``python -m benchmarks.real_tables`` rebuilds them (a few minutes per
family on one core). Grid points are in row-major (``"ij"``) order over the unit
cube, the order :attr:`~botorch_transfer.test_functions.base.TransferProblem.grid`
enumerates.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).parent / "data"
N_REPLICATES = 5
SPLIT_SEED = 0


@dataclass(frozen=True)
class Family:
    r"""A tuning family: a grid of hyperparameters and the tasks it was run on.

    Attributes:
        name: Family name (the table file's stem).
        levels: One tuple of hyperparameter values per grid axis.
        tasks: Task names.
        description: What is tuned, on what, and what is measured.
        parameters: The hyperparameters' names, one per grid axis (the grid's
            unit-cube columns, in order).
    """

    name: str
    levels: tuple[tuple, ...]
    tasks: tuple[str, ...]
    description: str
    parameters: tuple[str, ...]

    @property
    def grid_size(self) -> int:
        return len(self.levels[0])

    @property
    def dim(self) -> int:
        return len(self.levels)

    def configs(self) -> list[tuple]:
        r"""Hyperparameter values of every grid point, in the grid's order."""
        return list(product(*self.levels))


FAMILIES = {
    "svm": Family(
        "svm",
        (
            tuple(np.linspace(-2.0, 4.0, 16).round(6)),
            tuple(np.linspace(-5.0, 1.0, 16).round(6)),
        ),
        tuple(f"digit{k}" for k in range(10)),
        "RBF SVM on the digits (one digit against the rest), log10 C x log10 gamma, "
        "balanced accuracy per cross-validation fold",
        ("log10_C", "log10_gamma"),
    ),
    "forest": Family(
        "forest",
        (
            (1, 2, 3, 5, 8, 13),
            (1, 2, 4, 8, 16, 32),
            (0.05, 0.1, 0.2, 0.35, 0.6, 1.0),
        ),
        ("breast_cancer", "wine", "iris", "digits_low", "digits_high"),
        "random forest, max_depth x min_samples_leaf x max_features, accuracy per "
        "cross-validation fold",
        ("max_depth", "min_samples_leaf", "max_features"),
    ),
    "mlp": Family(
        "mlp",
        (
            tuple(np.linspace(-4.0, -0.5, 6).round(6)),
            tuple(np.linspace(-5.0, 1.0, 6).round(6)),
            (2, 4, 8, 16, 32, 64),
        ),
        ("breast_cancer", "wine", "digits_low", "digits_high"),
        "one-hidden-layer network (Adam, 50 epochs), log10 learning rate x log10 "
        "weight decay x hidden units, validation accuracy per training seed",
        ("log10_lr", "log10_weight_decay", "hidden"),
    ),
}


@lru_cache
def load_table(family: str, task: str) -> np.ndarray:
    r"""The shipped ``n_configs x n_replicates`` table of ``task`` in ``family``."""
    fam = FAMILIES.get(family)
    if fam is None:
        raise ValueError(f"`family` must be one of {tuple(FAMILIES)}, got {family!r}.")
    if task not in fam.tasks:
        raise ValueError(f"`task` must be one of {fam.tasks}, got {task!r}.")
    with np.load(DATA_DIR / f"{family}.npz") as tables:
        return tables[task].astype(np.float64)
