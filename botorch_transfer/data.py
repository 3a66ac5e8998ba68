r"""Observations of one task, validated once so that models can trust them.

A :class:`TaskData` holds what was observed on one related (source or meta) task:
inputs ``X`` (``n x d``), outcomes ``Y`` (``n x 1``) and optionally the known
observation noise variances ``Yvar`` (``n x 1``). Validation happens on
construction and every failure names the offending field and what was expected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class TaskData:
    r"""Observations of one task.

    Args:
        X: ``n x d`` tensor of inputs.
        Y: ``n x 1`` tensor of observed outcomes.
        Yvar: Optional ``n x 1`` tensor of known, non-negative observation noise
            variances. ``None`` means the noise is unknown (a model learns it).
        name: Optional human-readable name of the task.
        feature_names: Optional names of the columns of ``X``, in order (one per
            column, each once). A source whose parameters differ from the
            target's is mapped into the target's space by name with
            :func:`~botorch_transfer.models.align_source`.

    Example:
        >>> X = torch.rand(20, 2, dtype=torch.float64)
        >>> source = TaskData(X, X.sum(dim=-1, keepdim=True), name="last month")
        >>> source.n, source.d
        (20, 2)
    """

    X: Tensor
    Y: Tensor
    Yvar: Tensor | None = None
    name: str | None = None
    feature_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        label = f"TaskData{'' if self.name is None else f' {self.name!r}'}"
        for field in ("X", "Y", "Yvar"):
            value = getattr(self, field)
            if value is None and field == "Yvar":
                continue
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"{label}: `{field}` must be a torch.Tensor, got "
                    f"{type(value).__name__}."
                )
            if not value.is_floating_point():
                raise TypeError(
                    f"{label}: `{field}` must have a floating point dtype, got "
                    f"{value.dtype}."
                )
        if self.X.dim() != 2:
            raise ValueError(
                f"{label}: `X` must be a 2-D tensor of shape n x d, got shape "
                f"{tuple(self.X.shape)}."
            )
        if self.Y.dim() != 2 or self.Y.shape[-1] != 1:
            raise ValueError(
                f"{label}: `Y` must have shape n x 1 (one outcome per row), got shape "
                f"{tuple(self.Y.shape)}. Use `Y.unsqueeze(-1)` for a 1-D tensor."
            )
        if self.Y.shape[0] != self.X.shape[0]:
            raise ValueError(
                f"{label}: `X` has {self.X.shape[0]} rows but `Y` has "
                f"{self.Y.shape[0]}; they must match."
            )
        if self.Yvar is not None and self.Yvar.shape != self.Y.shape:
            raise ValueError(
                f"{label}: `Yvar` must have the shape of `Y` {tuple(self.Y.shape)}, "
                f"got {tuple(self.Yvar.shape)}."
            )
        for field in ("X", "Y", "Yvar"):
            value = getattr(self, field)
            if value is None:
                continue
            if value.dtype != self.X.dtype:
                raise TypeError(
                    f"{label}: `{field}` has dtype {value.dtype} but `X` has "
                    f"{self.X.dtype}; all fields must share one dtype."
                )
            if value.device != self.X.device:
                raise ValueError(
                    f"{label}: `{field}` is on {value.device} but `X` is on "
                    f"{self.X.device}; all fields must be on one device."
                )
            if not torch.isfinite(value).all():
                raise ValueError(f"{label}: `{field}` contains NaN or infinite values.")
        if self.Yvar is not None and (self.Yvar < 0).any():
            raise ValueError(
                f"{label}: `Yvar` must be non-negative (it is a variance)."
            )
        if self.feature_names is not None:
            object.__setattr__(
                self,
                "feature_names",
                checked_feature_names(self.feature_names, self.d, label),
            )
        # copies: the caller's tensors changed in place later must not change (and
        # bypass the checks on) the task's data
        for field in ("X", "Y", "Yvar"):
            value = getattr(self, field)
            if value is not None:
                object.__setattr__(self, field, value.clone())

    @property
    def n(self) -> int:
        r"""Number of observations."""
        return self.X.shape[0]

    @property
    def d(self) -> int:
        r"""Input dimension."""
        return self.X.shape[1]

    def to(self, *args, **kwargs) -> TaskData:
        r"""Return a copy with every tensor moved/cast by
        ``Tensor.to(*args, **kwargs)``."""
        return TaskData(
            X=self.X.to(*args, **kwargs),
            Y=self.Y.to(*args, **kwargs),
            Yvar=None if self.Yvar is None else self.Yvar.to(*args, **kwargs),
            name=self.name,
            feature_names=self.feature_names,
        )


def checked_feature_names(names: object, d: int, label: str) -> tuple[str, ...]:
    r"""``names`` as a tuple of ``d`` distinct strings, or a ``ValueError``/
    ``TypeError`` naming what is wrong."""
    if isinstance(names, str) or not hasattr(names, "__iter__"):
        raise TypeError(
            f"{label}: `feature_names` must be a sequence of strings (one per column "
            f"of `X`), got {type(names).__name__}."
        )
    names = tuple(names)
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"{label}: `feature_names` must be non-empty strings, got {name!r}."
            )
    if len(names) != d:
        raise ValueError(
            f"{label}: `feature_names` has {len(names)} names but `X` has {d} "
            "columns; give one name per column."
        )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(
            f"{label}: `feature_names` names {repeated} more than once; each column "
            "needs its own name."
        )
    return names


def validate_task_set(
    tasks: Sequence[TaskData], argument: str = "tasks"
) -> list[TaskData]:
    r"""Check that a set of tasks can be used together.

    Args:
        tasks: The tasks (a non-empty sequence of :class:`TaskData`).
        argument: The argument name to use in error messages.

    Returns:
        The tasks as a list.

    Raises:
        TypeError: If an element is not a ``TaskData`` or dtypes differ.
        ValueError: If the set is empty, or input dimensions or devices differ.
    """
    tasks = list(tasks)
    if len(tasks) == 0:
        raise ValueError(f"`{argument}` must contain at least one TaskData, got none.")
    for i, task in enumerate(tasks):
        if not isinstance(task, TaskData):
            raise TypeError(
                f"`{argument}[{i}]` must be a TaskData, got {type(task).__name__}."
            )
    first = tasks[0]
    for i, task in enumerate(tasks[1:], start=1):
        if task.d != first.d:
            raise ValueError(
                f"`{argument}[{i}]` has input dimension d={task.d} but `{argument}[0]` "
                f"has d={first.d}; all tasks must share the input space."
            )
        if task.X.dtype != first.X.dtype:
            raise TypeError(
                f"`{argument}[{i}]` has dtype {task.X.dtype} but `{argument}[0]` has "
                f"{first.X.dtype}."
            )
        if task.X.device != first.X.device:
            raise ValueError(
                f"`{argument}[{i}]` is on {task.X.device} but `{argument}[0]` is on "
                f"{first.X.device}."
            )
    return tasks
