r"""How a source's parameters relate to the target's, by name.

One plan for both routes: :func:`~botorch_transfer.models.align_source` (a
``TaskData`` with named columns) and Ax's auxiliary experiments. Each target
parameter is *shared* (the source has it too) or *filled* (the source ran it at a
known value); each parameter only the source has is *conditioned* (the target runs
it at a known value) or *marginalized* (its effect counts as the source's noise).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from torch import Tensor

from botorch_transfer.data import checked_feature_names

__all__ = [
    "check_fills_in_bounds",
    "checked_parameter_plan",
    "checked_value",
    "describe_roles",
]


def checked_parameter_plan(
    source_names: Sequence[str],
    feature_names: Sequence[str],
    source_values: Mapping[str, float] | None = None,
    target_values: Mapping[str, float | None] | None = None,
    bounds: Tensor | None = None,
) -> tuple[dict[str, float], dict[str, float | None]]:
    r"""The fill and conditioning values, each checked against both spaces.

    Args:
        source_names: The source's parameters (its columns' names).
        feature_names: The target's parameters, in the order of its inputs.
        source_values: For each target parameter the source lacks, the value the
            source ran at.
        target_values: For each parameter only the source has, the value the
            target runs at, or ``None`` to marginalize it.
        bounds: Optional ``2 x d`` bounds of the target's parameters; a fill value
            outside them is an error.

    Returns:
        ``(fills, conditions)``: the values of ``source_values`` and
        ``target_values`` as floats (``None`` kept).

    Raises:
        ValueError: If a parameter's role is missing or contradicts the names (a
            value for a parameter both have, a name in neither space, a name given
            twice, a value outside ``bounds``, or no parameter shared).
        TypeError: If an argument or value has the wrong type.
    """
    if isinstance(feature_names, str) or not hasattr(feature_names, "__iter__"):
        raise TypeError(
            "`feature_names` must be a sequence of the target's parameter names, "
            f"got {type(feature_names).__name__}."
        )
    feature_names = tuple(feature_names)
    checked_feature_names(feature_names, len(feature_names), "target")
    target, own = set(feature_names), set(source_names)
    fills = _checked_values(source_values, "source_values", target, own)
    conditions = _checked_values(target_values, "target_values", target, own)
    lacking = [name for name in feature_names if name not in own and name not in fills]
    if lacking:
        raise ValueError(
            f"`source_values`: the source has no column {lacking}; give the value the "
            "source ran each at (e.g. the parameter's default then)."
        )
    extra = [n for n in source_names if n not in target and n not in conditions]
    if extra:
        raise ValueError(
            f"`target_values`: the target has no parameter {extra}; give the value "
            "the target runs each at, or None to marginalize it."
        )
    if not target & own:
        raise ValueError(
            "The source and the target share no parameter (`feature_names`): the "
            "source says nothing about how the target's outcome varies."
        )
    if bounds is not None:
        check_fills_in_bounds(fills, feature_names, bounds)
    return fills, conditions


def describe_roles(
    source_names: Sequence[str],
    feature_names: Sequence[str],
    fills: Mapping[str, float],
    conditions: Mapping[str, float | None],
) -> dict[str, str]:
    r"""Each parameter's role in words: the target's parameters first, then the
    source's own (``"shared"``, ``"filled at v"``, ``"conditioned at v"``,
    ``"marginalized"``; ``"missing"`` for a target parameter the source lacks that
    nothing fills, which :func:`checked_parameter_plan` refuses)."""
    roles = {}
    for name in feature_names:
        if name in fills:
            roles[name] = f"filled at {fills[name]}"
        else:
            roles[name] = "shared" if name in source_names else "missing"
    for name in source_names:
        if name not in roles:
            value = conditions.get(name)
            roles[name] = "marginalized" if value is None else f"conditioned at {value}"
    return roles


def _checked_values(
    values: Mapping[str, float | None] | None,
    argument: str,
    target: set[str],
    own: set[str],
) -> dict[str, float | None]:
    r"""``values`` checked: ``source_values`` name target-only parameters and are
    numbers; ``target_values`` name source-only ones and are numbers or ``None``."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise TypeError(
            f"`{argument}` must map parameter names to values, got "
            f"{type(values).__name__}."
        )
    fills = argument == "source_values"
    checked = {}
    for name, value in values.items():
        if name in target and name in own:
            raise ValueError(
                f"`{argument}[{name!r}]`: both the source and the target have "
                f"{name!r}; its values are used as they are."
            )
        if name not in target and name not in own:
            raise ValueError(
                f"`{argument}[{name!r}]`: {name!r} is neither a target parameter "
                "(`feature_names`) nor a source column (`source.feature_names`)."
            )
        if fills and name in own:
            raise ValueError(
                f"`source_values[{name!r}]`: only the source has {name!r}; give "
                "the value the target runs it at in `target_values`."
            )
        if not fills and name in target:
            raise ValueError(
                f"`target_values[{name!r}]`: only the target has {name!r}; give "
                "the value the source ran it at in `source_values`."
            )
        if value is None and not fills:
            checked[name] = None
            continue
        if value is None:
            raise ValueError(
                f"`source_values[{name!r}]` is None: the value the source ran "
                f"{name!r} at must be known to fill it in; if it is not, give "
                "candidate values to `align_source_candidates`."
            )
        checked[name] = checked_value(f"{argument}[{name!r}]", value)
    return checked


def checked_value(label: str, value: object) -> float:
    r"""``value`` as a float if it is a finite real number; a ``TypeError`` or
    ``ValueError`` naming ``label`` (e.g. ``"source_values['lr']"``) otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{label}` must be a number, got {type(value).__name__}.")
    if not math.isfinite(value):
        raise ValueError(f"`{label}` must be finite, got {value}.")
    return float(value)


def check_fills_in_bounds(
    fills: Mapping[str, float],
    feature_names: Sequence[str],
    bounds: Tensor,
    argument: str = "source_values",
) -> None:
    r"""Raise a ``ValueError`` naming ``argument`` if a fill value lies outside
    the target's ``bounds`` (or ``bounds`` is not ``2 x len(feature_names)``)."""
    feature_names = tuple(feature_names)
    if not isinstance(bounds, Tensor) or bounds.shape != (2, len(feature_names)):
        raise ValueError(
            f"`bounds` must be a 2 x {len(feature_names)} tensor (one column per "
            f"name of `feature_names`), got "
            f"{tuple(bounds.shape) if isinstance(bounds, Tensor) else bounds!r}."
        )
    for name, value in fills.items():
        low, high = bounds[:, feature_names.index(name)].tolist()
        if not low <= value <= high:
            raise ValueError(
                f"`{argument}[{name!r}]` = {value} is outside the target's bounds "
                f"[{low}, {high}] for {name!r}."
            )
