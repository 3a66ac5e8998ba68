r"""Rebuild the shipped tables of real tuning evaluations
(:mod:`botorch_transfer.test_functions.real_tables`): every grid point of a family
evaluated once per replicate on each of its tasks, with scikit-learn.

Run ``python -m benchmarks.real_tables [family ...]`` (a few minutes per family on
one core); the tables are written atomically to the package's ``data/`` folder.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from botorch_transfer._io import atomic_write
from botorch_transfer.test_functions.real_tables import (
    DATA_DIR,
    FAMILIES,
    N_REPLICATES,
    SPLIT_SEED,
)


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.real_tables",
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
