r"""A source whose parameters differ from the target's, mapped into the target's space.

Search spaces drift between experiments: a parameter is added (the past runs used
its default), one is retired, a range is widened. Every transfer model here takes
sources on the target's inputs; :func:`align_source` maps a ``TaskData`` with named
columns (``TaskData.feature_names``) onto the target's parameters by name, so the
result can be passed as ``source=`` to any of them. Each parameter gets one role:

- **shared**: both have it. The source's values are used as they are; a source run
  on a sub-range (or a wider range) of it needs nothing more, as both are in the
  same units.
- **filled**: only the target has it, and the source ran at a known value
  (``source_values``): a column of that value, as Ax's ``FillMissingParameters``
  does. The transfer model then learns from the target data how far from that
  value the source still applies.
- **conditioned**: only the source has it, and the target runs at a known value
  (``target_values``): a GP on the source's own parameters predicts at each of the
  source's points with that value instead. The predictions are the aligned source's
  observations and their posterior variances its known noise (``Yvar``); the
  correlation between the predictions' errors is left out.
- **marginalized**: only the source has it, and its value in the target does not
  matter or is not fixed (``target_values[name] = None``): the column is dropped
  and its effect on the outcome becomes noise of the source.

When the value a source ran a missing parameter at is not known,
:func:`align_source_candidates` fills it at each of several candidate values, one
aligned source each; ``RankWeightedTransferGP`` given all of them weighs the
candidates by the target's evidence.

Example:
    >>> X_old = torch.rand(10, 1, dtype=torch.float64)  # last month: one parameter
    >>> source = TaskData(X_old, X_old**2, feature_names=["lr"])
    >>> aligned = align_source(source, ["lr", "width"], source_values={"width": 0.5})
    >>> aligned.X.shape
    torch.Size([10, 2])
    >>> model = RankWeightedTransferGP(train_X, train_Y, source=aligned)
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import torch
from botorch.models.model import Model
from botorch.models.transforms.input import Normalize
from torch import Tensor

from botorch_transfer.data import TaskData
from botorch_transfer.models.source_gp import fit_source_gp
from botorch_transfer.models.utils.parameters import (
    check_fills_in_bounds,
    checked_parameter_plan,
    checked_value,
    describe_roles,
)

__all__ = ["align_source", "align_source_candidates", "parameter_roles"]


def parameter_roles(
    source: TaskData,
    feature_names: Sequence[str],
    source_values: Mapping[str, float] | None = None,
    target_values: Mapping[str, float | None] | None = None,
    bounds: Tensor | None = None,
) -> dict[str, str]:
    r"""What :func:`align_source` does with each parameter, checked.

    Args: as for :func:`align_source`.

    Returns:
        For each parameter of the target, then each of the source only, its role:
        ``"shared"``, ``"filled at v"``, ``"conditioned at v"`` or
        ``"marginalized"``.

    Example:
        >>> X_old = torch.rand(10, 2, dtype=torch.float64)
        >>> source = TaskData(X_old, X_old[:, :1], feature_names=["lr", "seed"])
        >>> parameter_roles(source, ["lr", "width"], {"width": 64}, {"seed": None})
        {'lr': 'shared', 'width': 'filled at 64.0', 'seed': 'marginalized'}
    """
    fills, conditions = _checked_plan(
        source, feature_names, source_values, target_values, bounds
    )
    return describe_roles(source.feature_names, feature_names, fills, conditions)


def align_source(
    source: TaskData,
    feature_names: Sequence[str],
    source_values: Mapping[str, float] | None = None,
    target_values: Mapping[str, float | None] | None = None,
    bounds: Tensor | None = None,
    source_model: Model | None = None,
) -> TaskData:
    r"""The source's observations on the target's parameters, by name.

    Args:
        source: The source, with ``feature_names`` naming its columns.
        feature_names: The target's parameters, in the order of its inputs (the
            columns of ``train_X``).
        source_values: For each target parameter the source lacks, the value the
            source ran at (in the target's units).
        target_values: For each parameter only the source has, the value the
            target runs at (the source is conditioned on it), or ``None`` to
            marginalize it.
        bounds: Optional ``2 x d`` bounds of the target's parameters; a value of
            ``source_values`` outside them is an error.
        source_model: Optional single-output GP fitted on ``source`` in its own
            columns, used to condition on ``target_values``. Default: a
            ``SingleTaskGP`` with BoTorch's defaults fitted on the source's shared
            and conditioned columns (see :func:`fit_source_gp`).

    Returns:
        A ``TaskData`` on the target's parameters (``feature_names`` set), named as
        the source.

    Raises:
        ValueError: If a parameter's role is missing or contradicts the data (a
            value for a parameter both have, a name in neither space, a name given
            twice, a value outside ``bounds``, or no parameter shared).
    """
    fills, conditions = _checked_plan(
        source, feature_names, source_values, target_values, bounds
    )
    fixed = {name: value for name, value in conditions.items() if value is not None}
    column = {name: i for i, name in enumerate(source.feature_names)}
    X, Y, Yvar = source.X, source.Y, source.Yvar
    if fixed:
        kept = [n for n in source.feature_names if n in feature_names or n in fixed]
        if source_model is None:
            source_model = _fitted_on(source, kept, fixed)
        elif len(kept) != source.d:
            raise ValueError(
                "`source_model`: with marginalized parameters the source model must "
                "be fitted on the other columns, so it cannot be passed; leave it "
                "out to have one fitted."
            )
        rows = X[:, [column[n] for n in kept]]
        for name, value in fixed.items():
            rows[:, kept.index(name)] = value
        rows = _distinct_rows(rows)
        with torch.no_grad():
            posterior = source_model.posterior(rows)
        X, column = rows, {name: i for i, name in enumerate(kept)}
        Y = posterior.mean.reshape(-1, 1)
        Yvar = posterior.variance.reshape(-1, 1).clamp_min(0.0)
    elif source_model is not None:
        raise ValueError(
            "`source_model` is used to condition on `target_values` only; this "
            "alignment conditions on none."
        )
    columns = [
        X[:, column[name]]
        if name not in fills
        else torch.full_like(X[:, 0], fills[name])
        for name in feature_names
    ]
    return TaskData(
        torch.stack(columns, dim=-1),
        Y,
        Yvar,
        name=source.name,
        feature_names=tuple(feature_names),
    )


def align_source_candidates(
    source: TaskData,
    feature_names: Sequence[str],
    candidates: Mapping[str, Sequence[float]],
    source_values: Mapping[str, float] | None = None,
    target_values: Mapping[str, float | None] | None = None,
    bounds: Tensor | None = None,
    source_model: Model | None = None,
) -> list[TaskData]:
    r"""The source aligned at each candidate value of a parameter it ran at an
    unknown value.

    When the source lacks a target parameter and the value it ran at is not
    known (a default that changed, a setting nobody recorded), each candidate
    value gives one aligned source, as :func:`align_source` fills it. Pass them
    together as ``source=[...]`` to ``RankWeightedTransferGP`` (or ``RGPE``): the
    ranking weighs each by how well it ranks the target's observations, so the
    target's data choose among the values (``model.source_weights``, by name).
    Neighbouring candidates share their weight; what the evidence does quickly is
    to take it from values far from the one the source ran at.

    Args:
        source: The source, with ``feature_names`` naming its columns.
        feature_names: The target's parameters, in the order of its inputs.
        candidates: For each target parameter the source ran at an unknown value,
            the values it may have run at (e.g. a grid over the target's range).
            Several parameters give one source per combination.
        source_values: The known values of the other parameters the source lacks.
        target_values: As for :func:`align_source`.
        bounds: As for :func:`align_source`; candidates outside are an error.
        source_model: As for :func:`align_source` (conditioning is done once and
            shared by every candidate).

    Returns:
        One ``TaskData`` per combination of candidate values, each named as the
        source with its values, e.g. ``"last month (warmup=0.5)"``.

    Example:
        >>> X_old = torch.rand(10, 1, dtype=torch.float64)
        >>> source = TaskData(X_old, X_old**2, name="old", feature_names=["lr"])
        >>> aligned = align_source_candidates(source, ["lr", "w"], {"w": [0.0, 1.0]})
        >>> [s.name for s in aligned]
        ['old (w=0)', 'old (w=1)']
    """
    known = dict(source_values or {})
    candidates = _checked_candidates(candidates, known)
    if bounds is not None:  # each candidate within the target's bounds, once
        for name, values in candidates.items():
            for value in values:
                check_fills_in_bounds(
                    {name: value}, feature_names, bounds, "candidates"
                )
    first = {name: values[0] for name, values in candidates.items()}
    base = align_source(
        source, feature_names, {**known, **first}, target_values, bounds, source_model
    )
    label = "source" if source.name is None else source.name
    aligned = []
    for combination in itertools.product(*candidates.values()):
        values = dict(zip(candidates, combination))
        X = base.X.clone()
        for name, value in values.items():
            X[:, base.feature_names.index(name)] = value
        described = ", ".join(f"{name}={value:g}" for name, value in values.items())
        aligned.append(
            TaskData(
                X,
                base.Y,
                base.Yvar,
                name=f"{label} ({described})",
                feature_names=base.feature_names,
            )
        )
    return aligned


def _checked_candidates(
    candidates: Mapping[str, Sequence[float]], known: Mapping[str, float]
) -> dict[str, list[float]]:
    if not isinstance(candidates, Mapping) or not candidates:
        raise TypeError(
            "`candidates` must map each parameter the source ran at an unknown value "
            "to its candidate values, e.g. {'warmup': [0.1, 0.5, 0.9]}."
        )
    checked = {}
    for name, values in candidates.items():
        if name in known:
            raise ValueError(
                f"`candidates[{name!r}]`: {name!r} has a known value in "
                "`source_values`; give it in one of them."
            )
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise TypeError(
                f"`candidates[{name!r}]` must be a sequence of values, got "
                f"{type(values).__name__}."
            )
        if len(values) == 0:
            raise ValueError(
                f"`candidates[{name!r}]` is empty; give at least one value."
            )
        values = [checked_value(f"candidates[{name!r}]", value) for value in values]
        if len(set(values)) != len(values):
            raise ValueError(f"`candidates[{name!r}]` names a value twice: {values}.")
        checked[name] = values
    return checked


def _distinct_rows(rows: Tensor) -> Tensor:
    r"""The distinct rows of ``rows``, in the order they first appear."""
    _, inverse = torch.unique(rows, dim=0, return_inverse=True)
    order = torch.arange(len(rows), device=rows.device)
    first = torch.full_like(inverse[: int(inverse.max()) + 1], len(rows))
    first = first.scatter_reduce(0, inverse, order, reduce="amin")
    return rows[first.sort().values]


def _fitted_on(source: TaskData, kept: list[str], fixed: Mapping[str, float]) -> Model:
    r"""A GP on ``source``'s ``kept`` columns, its inputs normalized over the data
    and the values it will be conditioned on."""
    X = source.X[:, [source.feature_names.index(name) for name in kept]]
    low, high = X.min(dim=0).values, X.max(dim=0).values
    for name, value in fixed.items():
        i = kept.index(name)
        low[i], high[i] = min(low[i], value), max(high[i], value)
    flat = high - low <= 0  # a constant column: any unit range
    low, high = torch.where(flat, low - 0.5, low), torch.where(flat, high + 0.5, high)
    subset = TaskData(X, source.Y, source.Yvar, name=source.name)
    return fit_source_gp(subset, Normalize(len(kept), bounds=torch.stack([low, high])))


def _checked_plan(
    source: TaskData,
    feature_names: Sequence[str],
    source_values: Mapping[str, float] | None,
    target_values: Mapping[str, float | None] | None,
    bounds: Tensor | None,
) -> tuple[dict[str, float], dict[str, float | None]]:
    if not isinstance(source, TaskData):
        raise TypeError(f"`source` must be a TaskData, got {type(source).__name__}.")
    if source.feature_names is None:
        raise ValueError(
            "`source` has no `feature_names`: name its columns "
            "(TaskData(..., feature_names=[...])) to map them by name."
        )
    return checked_parameter_plan(
        source.feature_names, feature_names, source_values, target_values, bounds
    )
