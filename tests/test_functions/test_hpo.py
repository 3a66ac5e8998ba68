import numpy as np
import pytest

from botorch_transfer.test_functions.hpo import (
    breast_cancer,
    gboost_params,
    mlp_params,
    task_splits,
)


def test_splits_follow_the_paper():
    splits = task_splits()
    n_total = 569  # scikit-learn's breast-cancer data
    for task in ("source", "target"):
        X_train, y_train, X_val, y_val = splits[task]
        assert X_train.shape[0] + X_val.shape[0] == round(
            0.8 * n_total
        )  # 60% shared + half of 40%
    # the shared 60% appears in both tasks, the rest in one only
    rows = lambda t: {tuple(r) for part in (splits[t][0], splits[t][2]) for r in part}  # noqa: E731
    shared = rows("source") & rows("target")
    assert len(shared) == pytest.approx(0.6 * n_total, abs=2)


def test_hyperparameter_maps_cover_app_c12():
    low, high = gboost_params(np.zeros(11)), gboost_params(np.full(11, 10.0))
    assert (low["loss"], high["loss"]) == ("log_loss", "exponential")
    assert (low["n_estimators"], high["n_estimators"]) == (20, 200)
    assert (low["max_depth"], high["max_depth"]) == (1, 10) and high[
        "min_weight_fraction_leaf"
    ] == 0.5
    assert 0 < low["learning_rate"] and high["subsample"] <= 1.0
    assert gboost_params(np.full(11, 4.99))["criterion"] == "friedman_mse"
    assert gboost_params(np.full(11, 5.0))["criterion"] == "squared_error"
    acts = [mlp_params(np.full(8, x))["activation"] for x in (0.0, 2.6, 5.1, 10.0)]
    assert acts == ["identity", "logistic", "tanh", "relu"]
    m = mlp_params(np.full(8, 10.0))
    assert (m["max_iter"], m["n_iter_no_change"], m["shuffle"]) == (
        300,
        10,
        False,
    ) and m["beta_1"] < 1


def test_objective_is_validation_accuracy_and_deterministic():
    problem = breast_cancer("gboost", n_source=2)
    import torch

    X = torch.full((2, 11), 5.0, dtype=torch.float64)
    a, b = problem.target(X), problem.target(X)
    assert torch.equal(a, b) and ((a > 0.5) & (a <= 1)).all()
    assert problem.optimum() is None and problem.dim == 11 and problem.beta == 0.2
    with pytest.raises(ValueError, match="`kind` must be"):
        breast_cancer("svm")
