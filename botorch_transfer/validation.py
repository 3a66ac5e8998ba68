r"""Validation of the target data and sources every model receives.

Every failure raises at construction with a message that names the argument and
says what was expected, so that nothing is silently dropped or broadcast into a
wrong answer.
"""

from __future__ import annotations

from typing import Any

import torch
from botorch.models.model import Model
from botorch.models.transforms.input import InputTransform
from torch import Tensor

from botorch_transfer.data import TaskData
from botorch_transfer.models.source_posterior import SourcePosterior


def validate_training_data(
    train_X: Tensor, train_Y: Tensor, train_Yvar: Tensor | None
) -> None:
    r"""Check target data: shapes ``batch x n x d`` / ``batch x n x 1``, one dtype and
    device, finite values, non-negative ``train_Yvar``. Errors name the argument."""
    for name, value in (
        ("train_X", train_X),
        ("train_Y", train_Y),
        ("train_Yvar", train_Yvar),
    ):
        if value is None:
            continue
        if not isinstance(value, Tensor) or not value.is_floating_point():
            hint = ""
            if name == "train_Yvar":
                hint = (
                    " Sources and priors are keyword arguments: "
                    "Model(train_X, train_Y, source=...) or (..., prior=...)."
                )
            raise TypeError(
                f"`{name}` must be a floating point torch.Tensor, got "
                f"{type(value).__name__}.{hint}"
            )
        if value.dtype != train_X.dtype:
            raise TypeError(
                f"`{name}` has dtype {value.dtype} but `train_X` has {train_X.dtype}; "
                "use one dtype for all inputs."
            )
        if value.device != train_X.device:
            raise ValueError(
                f"`{name}` is on {value.device} but `train_X` on {train_X.device}."
            )
        if not torch.isfinite(value).all():
            raise ValueError(f"`{name}` contains NaN or infinite values.")
    if train_X.dim() < 2:
        raise ValueError(
            "`train_X` must have shape batch_shape x n x d, got "
            f"{tuple(train_X.shape)}."
        )
    expected = train_X.shape[:-1] + torch.Size([1])
    if train_Y.shape != expected:
        raise ValueError(
            f"`train_Y` must have shape {tuple(expected)} (batch_shape x n x 1, "
            f"matching `train_X`), got {tuple(train_Y.shape)}."
        )
    if train_Yvar is not None:
        if train_Yvar.shape != expected:
            raise ValueError(
                f"`train_Yvar` must have the shape of `train_Y` {tuple(expected)}, "
                f"got {tuple(train_Yvar.shape)}."
            )
        if (train_Yvar < 0).any():
            raise ValueError("`train_Yvar` must be non-negative (it is a variance).")


def as_source_list(source: Any, train_X: Tensor, allow_models: bool = True) -> list:
    r"""Normalize ``source`` to a non-empty list and check it against the target.

    Args:
        source: One source or a list/tuple of them.
        train_X: The target inputs (for ``d``, dtype).
        allow_models: Whether the first source may be a fitted ``Model`` or a
            ``SourcePosterior`` (otherwise only ``TaskData`` are accepted).

    Returns:
        The list of sources.
    """
    if source is None:
        raise TypeError(
            "`source` is required: a TaskData, a fitted model or a list of them."
        )
    sources = list(source) if isinstance(source, (list, tuple)) else [source]
    if len(sources) == 0:
        raise ValueError(
            "`source` must contain at least one source, got an empty list."
        )
    dim = train_X.shape[-1]
    allowed = (TaskData, Model, SourcePosterior) if allow_models else (TaskData,)
    for i, s in enumerate(sources):
        if not isinstance(s, allowed):
            expected = (
                "a TaskData, a fitted BoTorch Model or a SourcePosterior"
                if allow_models
                else "a TaskData"
            )
            raise TypeError(
                f"`source[{i}]` must be {expected}, got {type(s).__name__}."
            )
        if i > 0 and not isinstance(s, TaskData):
            raise TypeError(
                f"`source[{i}]` is a {type(s).__name__}: only the first source may be "
                "a fitted model; later sources are TaskData modelled as residuals of "
                "the stack before them. To stack fitted models, pass a fitted "
                "DeltaBOModel."
            )
        if isinstance(s, TaskData):
            if s.d != dim:
                raise ValueError(
                    f"`source[{i}]` has input dimension d={s.d} but `train_X` has "
                    f"d={dim}; source and target must share the input space."
                )
            if s.X.dtype != train_X.dtype:
                raise TypeError(
                    f"`source[{i}]` has dtype {s.X.dtype} but `train_X` has "
                    f"{train_X.dtype}; use one dtype for source and target data."
                )
            if s.X.device != train_X.device:
                raise ValueError(
                    f"`source[{i}]` is on {s.X.device} but `train_X` on "
                    f"{train_X.device}."
                )
    return sources


def check_invertible_input_transform(
    input_transform: InputTransform, train_X: Tensor, reason: str
) -> None:
    r"""Raise unless ``input_transform.untransform`` inverts it on ``train_X``.

    Args:
        input_transform: The transform.
        train_X: Raw inputs to check on.
        reason: Why the model needs an invertible transform (for the message).
    """
    with torch.no_grad():
        transformed = input_transform.transform(train_X)
        try:
            recovered = input_transform.untransform(transformed)
        except NotImplementedError as e:
            raise ValueError(
                f"{reason} and needs an invertible `input_transform` (e.g. Normalize); "
                f"{type(input_transform).__name__} is not."
            ) from e
    if not torch.allclose(recovered, train_X, rtol=1e-4, atol=1e-6):
        raise ValueError("`input_transform.untransform` does not invert it.")
