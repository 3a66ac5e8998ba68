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

The tables ship with the package (``data/<family>.npz``, about 300 kB in all);
``python -m botorch_transfer.test_functions.real_tables`` rebuilds them (a few minutes
per family on one core). Grid points are in row-major (``"ij"``) order over the unit
cube, the order :attr:`~botorch_transfer.test_functions.base.TransferProblem.grid`
enumerates.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from pathlib import Path

import numpy as np

from botorch_transfer._io import atomic_write

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
    """

    name: str
    levels: tuple[tuple, ...]
    tasks: tuple[str, ...]
    description: str

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
    ),
}


def _dataset(task: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn import datasets

    if task.startswith("digit"):
        X, y = datasets.load_digits(return_X_y=True)
        X = X / 16.0
        if task == "digits_low":
            keep = y < 5
            return X[keep], y[keep]
        if task == "digits_high":
            keep = y >= 5
            return X[keep], y[keep]
        return X, (y == int(task.removeprefix("digit"))).astype(int)
    loader = {
        "breast_cancer": datasets.load_breast_cancer,
        "wine": datasets.load_wine,
        "iris": datasets.load_iris,
    }[task]
    X, y = loader(return_X_y=True)
    return X, y


def _svm_row(X, y, config) -> list[float]:
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.model_selection import StratifiedKFold
    from sklearn.svm import SVC

    log_c, log_gamma = config
    folds = StratifiedKFold(N_REPLICATES, shuffle=True, random_state=SPLIT_SEED)
    scores = []
    for train, test in folds.split(X, y):
        clf = SVC(C=10.0**log_c, gamma=10.0**log_gamma).fit(X[train], y[train])
        scores.append(100.0 * balanced_accuracy_score(y[test], clf.predict(X[test])))
    return scores


def _forest_row(X, y, config) -> list[float]:
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import StratifiedKFold

    depth, leaf, features = config
    folds = StratifiedKFold(N_REPLICATES, shuffle=True, random_state=SPLIT_SEED)
    scores = []
    for seed, (train, test) in enumerate(folds.split(X, y)):
        clf = RandomForestClassifier(
            n_estimators=16,
            max_depth=depth,
            min_samples_leaf=leaf,
            max_features=features,
            random_state=seed,
        ).fit(X[train], y[train])
        scores.append(100.0 * clf.score(X[test], y[test]))
    return scores


def _mlp_row(X, y, config) -> list[float]:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    log_lr, log_alpha, units = config
    X_tr, X_va, y_tr, y_va = train_test_split(
        X, y, test_size=0.3, random_state=SPLIT_SEED, stratify=y
    )
    scaler = StandardScaler().fit(X_tr)
    X_tr, X_va = scaler.transform(X_tr), scaler.transform(X_va)
    scores = []
    for seed in range(N_REPLICATES):
        clf = MLPClassifier(
            hidden_layer_sizes=(units,),
            learning_rate_init=10.0**log_lr,
            alpha=10.0**log_alpha,
            max_iter=50,
            random_state=seed,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(X_tr, y_tr)
        scores.append(100.0 * clf.score(X_va, y_va))
    return scores


_ROWS: dict[str, Callable] = {"svm": _svm_row, "forest": _forest_row, "mlp": _mlp_row}


def build_table(family: str, task: str) -> np.ndarray:
    r"""Evaluate every grid point of ``family`` on ``task`` once per replicate.

    Args:
        family: A key of :data:`FAMILIES`.
        task: One of the family's tasks.

    Returns:
        The ``n_configs x n_replicates`` table (percent).
    """
    fam = FAMILIES[family]
    if task not in fam.tasks:
        raise ValueError(f"`task` must be one of {fam.tasks}, got {task!r}.")
    X, y = _dataset(task)
    row = _ROWS[family]
    return np.array([row(X, y, c) for c in fam.configs()], dtype=np.float32)


def write_tables(family: str, path: Path | None = None) -> Path:
    r"""Build every task's table of ``family`` and save them (atomically).

    Args:
        family: A key of :data:`FAMILIES`.
        path: Where to write (default ``data/<family>.npz`` in the package).

    Returns:
        The path written.
    """
    path = DATA_DIR / f"{family}.npz" if path is None else Path(path)
    tables = {task: build_table(family, task) for task in FAMILIES[family].tasks}
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as fh:
        np.savez_compressed(fh, **tables)
    return path


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m botorch_transfer.test_functions.real_tables",
        description="Rebuild the shipped tables of real tuning evaluations.",
    )
    parser.add_argument("families", nargs="*", default=list(FAMILIES))
    args = parser.parse_args(argv)
    for family in args.families:
        if family not in FAMILIES:
            parser.error(f"unknown family {family!r}; choose from {tuple(FAMILIES)}")
        print(f"{family}: wrote {write_tables(family)}")


if __name__ == "__main__":
    main()
