r"""Hyperparameter-tuning transfer problems on scikit-learn's breast-cancer data
(DeltaBO paper, Sec. 6.2 and App. C.1).

The data are split once (fixed seed): 60% shared, the remaining 40% split evenly into
a source-only and a target-only part, so the source and target data sets each hold 80%
of the samples. Each is split 75/25 (stratified) into training and validation data; a
task's objective is the validation accuracy of a classifier trained with the given
hyperparameters. Hyperparameters live in ``[0, 10]^d``: continuous ones are scaled
linearly, integers rounded, and a categorical one takes equal sub-intervals
(App. C.1.2).
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

from botorch_transfer.test_functions.base import TransferProblem, fixed_kernel

SPLIT_SEED = 0


@lru_cache(maxsize=1)
def task_splits() -> dict[str, tuple[np.ndarray, ...]]:
    r"""``{"source": (X_train, y_train, X_val, y_val), "target": (...)}``."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)
    X_shared, X_rest, y_shared, y_rest = train_test_split(
        X, y, train_size=0.6, random_state=SPLIT_SEED, stratify=y
    )
    X_s, X_t, y_s, y_t = train_test_split(
        X_rest, y_rest, train_size=0.5, random_state=SPLIT_SEED, stratify=y_rest
    )
    splits = {}
    for name, (Xd, yd) in {"source": (X_s, y_s), "target": (X_t, y_t)}.items():
        Xd, yd = np.concatenate([X_shared, Xd]), np.concatenate([y_shared, yd])
        splits[name] = tuple(
            train_test_split(
                Xd, yd, test_size=0.25, random_state=SPLIT_SEED, stratify=yd
            )
        )
    # train_test_split returns X_train, X_val, y_train, y_val; reorder
    return {k: (v[0], v[2], v[1], v[3]) for k, v in splits.items()}


def _choice(x: float, options: tuple) -> object:
    return options[min(int(x / 10.0 * len(options)), len(options) - 1)]


def _integer(x: float, low: int, high: int) -> int:
    return int(round(low + x / 10.0 * (high - low)))


def _real(x: float, low: float, high: float, eps: float = 0.0) -> float:
    return float(np.clip(low + x / 10.0 * (high - low), low + eps, high - eps))


def gboost_params(x: np.ndarray) -> dict:
    r"""The 11 gradient-boosting hyperparameters of App. C.1.2 from ``x`` in
    ``[0, 10]^11``."""
    return {
        "loss": _choice(x[0], ("log_loss", "exponential")),
        "learning_rate": _real(x[1], 0.0, 1.0, eps=1e-3),
        "n_estimators": _integer(x[2], 20, 200),
        "subsample": _real(x[3], 0.0, 1.0, eps=1e-2),
        "criterion": _choice(x[4], ("friedman_mse", "squared_error")),
        "min_samples_split": _integer(x[5], 2, 10),
        "min_samples_leaf": _integer(x[6], 1, 10),
        "min_weight_fraction_leaf": _real(x[7], 0.0, 0.5),
        "max_depth": _integer(x[8], 1, 10),
        "max_features": _choice(x[9], ("sqrt", "log2")),
        "max_leaf_nodes": _integer(x[10], 2, 10),
    }


def mlp_params(x: np.ndarray) -> dict:
    r"""The 8 MLP hyperparameters of App. C.1.2 from ``x`` in ``[0, 10]^8``."""
    return {
        "activation": _choice(x[0], ("identity", "logistic", "tanh", "relu")),
        "alpha": _real(x[1], 1e-6, 1e-2),
        "learning_rate_init": _real(x[2], 1e-6, 1e-2),
        "max_iter": _integer(x[3], 100, 300),
        "shuffle": _choice(x[4], (True, False)),
        "beta_1": _real(x[5], 0.0, 1.0, eps=1e-6),
        "beta_2": _real(x[6], 0.0, 1.0, eps=1e-6),
        "n_iter_no_change": _integer(x[7], 1, 10),
    }


@lru_cache(maxsize=100_000)
def _accuracy(kind: str, task: str, x: tuple[float, ...]) -> float:
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X_train, y_train, X_val, y_val = task_splits()[task]
    x = np.asarray(x)
    if kind == "gboost":
        clf = GradientBoostingClassifier(random_state=0, **gboost_params(x))
    else:
        clf = make_pipeline(
            StandardScaler(),
            MLPClassifier(random_state=0, solver="adam", **mlp_params(x)),
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        # scikit-learn >= 1.9 deprecates GradientBoosting's `criterion` ("has no
        # effect"): the paper's 11 dimensions are kept, the 5th is then inactive
        warnings.simplefilter("ignore", FutureWarning)
        clf.fit(X_train, y_train)
    return float(clf.score(X_val, y_val))


def _objective(kind: str, task: str):
    def evaluate(X: Tensor) -> Tensor:
        flat = X.detach().reshape(-1, X.shape[-1]).cpu().double().numpy()
        values = [_accuracy(kind, task, tuple(np.round(row, 10))) for row in flat]
        return torch.tensor(values, dtype=X.dtype, device=X.device).reshape(
            *X.shape[:-1], 1
        )

    return evaluate


def breast_cancer(
    kind: str, n_source: int = 90, n_init: int = 6, iterations: int = 30
) -> TransferProblem:
    r"""``breast-cancer-gboost`` (11 HPs) or ``breast-cancer-mlp`` (8 HPs).

    Settings of App. C.1.1: Matern-5/2 source and target kernels (lengthscales 1.8 and
    1.0 for gradient boosting, 2.0 and 1.0 for the MLP), SE difference kernel
    (lengthscale 1.2 / 1.0) with ``tau^2 = 0.2^2``, ``sigma_0 = 0.02``,
    ``sigma = 0.01``, fixed ``beta = 0.2`` (gradient boosting) / ``0.3`` (MLP); N=90,
    T=30, 6 initial points.
    The optimum is unknown: regret is measured against the best value any run found.

    Args:
        kind: ``"gboost"`` or ``"mlp"``.
        n_source: Number of source evaluations.
        n_init: Initial target points.
        iterations: Default BO iterations.
    """
    if kind not in ("gboost", "mlp"):
        raise ValueError(f"`kind` must be 'gboost' or 'mlp', got {kind!r}.")
    dim = 11 if kind == "gboost" else 8
    source_ls, delta_ls, beta = (1.8, 1.2, 0.2) if kind == "gboost" else (2.0, 1.0, 0.3)
    return TransferProblem(
        name=f"breast-cancer-{kind}",
        bounds=torch.tensor([[0.0] * dim, [10.0] * dim], dtype=torch.float64),
        target=_objective(kind, "target"),
        source=_objective(kind, "source"),
        n_source=n_source,
        source_noise=0.02**2,
        target_noise=0.01**2,
        kernels={
            "source": lambda d: fixed_kernel("matern52", source_ls, 1.0, d),
            "target": lambda d: fixed_kernel("matern52", 1.0, 1.0, d),
            "delta": lambda d: fixed_kernel("rbf", delta_ls, 0.2**2, d),
        },
        n_init=n_init,
        iterations=iterations,
        beta=beta,
        optimum_known=False,
        noisy_observations=False,
        description=f"DeltaBO Sec. 6.2: {dim} {kind} hyperparameters on "
        f"breast-cancer data (validation accuracy), N={n_source}",
    )
