import pytest
import torch

from botorch_transfer import TaskData
from botorch_transfer.data import validate_task_set


def test_valid_task(device):
    X = torch.rand(5, 3, dtype=torch.float64, device=device)
    task = TaskData(
        X,
        X.sum(-1, keepdim=True),
        torch.full((5, 1), 0.1, dtype=torch.float64, device=device),
        name="a",
    )
    assert (task.n, task.d, task.name) == (5, 3, "a")
    moved = task.to(torch.float32)
    assert moved.X.dtype == moved.Y.dtype == moved.Yvar.dtype == torch.float32


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(X=torch.rand(5), Y=torch.rand(5, 1)), ValueError, "`X` must be a 2-D"),
        (
            dict(X=torch.rand(5, 2), Y=torch.rand(5)),
            ValueError,
            "`Y` must have shape n x 1",
        ),
        (
            dict(X=torch.rand(5, 2), Y=torch.rand(4, 1)),
            ValueError,
            "`X` has 5 rows but `Y` has 4",
        ),
        (
            dict(X=torch.rand(5, 2), Y=torch.tensor([[float("nan")]] * 5)),
            ValueError,
            "`Y` contains NaN",
        ),
        (
            dict(X=torch.rand(5, 2), Y=torch.rand(5, 1), Yvar=-torch.rand(5, 1)),
            ValueError,
            "`Yvar` must be non-negative",
        ),
        (
            dict(X=torch.rand(5, 2), Y=torch.rand(5, 1), Yvar=torch.rand(5)),
            ValueError,
            "`Yvar` must have the shape",
        ),
        (
            dict(X=torch.rand(5, 2), Y=torch.rand(5, 1, dtype=torch.float64)),
            TypeError,
            "`Y` has dtype torch.float64",
        ),
        (
            dict(X=torch.ones(5, 2, dtype=torch.long), Y=torch.rand(5, 1)),
            TypeError,
            "`X` must have a floating",
        ),
        (dict(X=[[0.0]], Y=torch.rand(1, 1)), TypeError, "`X` must be a torch.Tensor"),
    ],
)
def test_invalid_task(kwargs, error, match):
    with pytest.raises(error, match=match):
        TaskData(**kwargs)


def test_validate_task_set():
    a = TaskData(torch.rand(3, 2), torch.rand(3, 1))
    assert validate_task_set([a, a]) == [a, a]
    with pytest.raises(ValueError, match="at least one"):
        validate_task_set([])
    with pytest.raises(ValueError, match=r"`tasks\[1\]` has input dimension d=3"):
        validate_task_set([a, TaskData(torch.rand(3, 3), torch.rand(3, 1))])
    with pytest.raises(TypeError, match=r"`tasks\[1\]` must be a TaskData"):
        validate_task_set([a, (a.X, a.Y)])


def test_task_data_keeps_copies_of_its_tensors():
    X, Y, Yvar = torch.rand(4, 2), torch.rand(4, 1), torch.rand(4, 1)
    task = TaskData(X, Y, Yvar)
    X[0, 0], Y[0, 0], Yvar[0, 0] = float("nan"), float("inf"), -1.0
    for value in (task.X, task.Y, task.Yvar):
        assert torch.isfinite(value).all() and (value >= 0).all()


def test_feature_names_name_the_columns_and_travel_with_the_task():
    X = torch.rand(4, 2, dtype=torch.float64)
    task = TaskData(X, X[:, :1], name="old", feature_names=["lr", "depth"])
    assert task.feature_names == ("lr", "depth")
    assert task.to(torch.float32).feature_names == ("lr", "depth")


@pytest.mark.parametrize(
    "names, error, match",
    [
        (["lr"], ValueError, "has 1 names but `X` has 2 columns"),
        (["lr", "lr"], ValueError, r"names \['lr'\] more than once"),
        ("lr", TypeError, "must be a sequence of strings"),
        (["lr", 3], TypeError, "must be non-empty strings, got 3"),
    ],
)
def test_bad_feature_names_are_named(names, error, match):
    X = torch.rand(4, 2, dtype=torch.float64)
    with pytest.raises(error, match=match):
        TaskData(X, X[:, :1], feature_names=names)
