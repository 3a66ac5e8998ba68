r"""Validation of target data and sources: every error names the argument."""

import pytest
import torch
from botorch.models.transforms import Normalize
from botorch.models.transforms.input import InputPerturbation

from botorch_transfer import TaskData
from botorch_transfer.validation import (
    check_invertible_input_transform,
    validate_training_data,
)

F64 = torch.float64


def data(n=4, d=2):
    X = torch.rand(n, d, dtype=F64)
    return X, X.sum(-1, keepdim=True)


@pytest.mark.parametrize(
    "case, error, match",
    [
        ("Y wrong shape", ValueError, r"`train_Y` must have shape \(4, 1\)"),
        ("Yvar negative", ValueError, "`train_Yvar` must be non-negative"),
        ("Yvar wrong shape", ValueError, "`train_Yvar` must have the shape"),
        (
            "Yvar not a tensor",
            TypeError,
            "`train_Yvar` must be a floating point.*source=",
        ),
        ("X 1-d", ValueError, "`train_X` must have shape batch_shape x n x d"),
        ("Y inf", ValueError, "`train_Y` contains NaN or infinite"),
        ("dtype mix", TypeError, "`train_Y` has dtype torch.float32"),
    ],
)
def test_training_data_errors_name_the_argument(case, error, match):
    X, Y = data()
    Yvar = torch.full_like(Y, 0.1)
    args = {
        "Y wrong shape": (X, Y.squeeze(-1), None),
        "Yvar negative": (X, Y, -Yvar),
        "Yvar wrong shape": (X, Y, Yvar[:2]),
        "Yvar not a tensor": (X, Y, TaskData(X, Y)),
        "X 1-d": (X[:, 0], Y[:, 0], None),
        "Y inf": (X, Y / 0, None),
        "dtype mix": (X, Y.float(), None),
    }[case]
    with pytest.raises(error, match=match):
        validate_training_data(*args)


def test_invertible_input_transform():
    X, _ = data()
    check_invertible_input_transform(Normalize(2), X, "M needs raw inputs")
    perturbation = InputPerturbation(torch.zeros(2, 2, dtype=F64))
    with pytest.raises(
        ValueError, match="M needs raw inputs and needs an invertible `input_transform`"
    ):
        check_invertible_input_transform(perturbation, X, "M needs raw inputs")
