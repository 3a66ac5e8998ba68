r"""Validation of the target data and sources every model receives.

Every failure raises at construction with a message that names the argument and
says what was expected, so that nothing is silently dropped or broadcast into a
wrong answer.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from botorch.models.transforms.input import AffineInputTransform, InputTransform
from torch import Tensor

from botorch_transfer._deprecation import moved_names
from botorch_transfer.data import TaskData


class UntrainedSourceWarning(UserWarning):
    r"""A source model passed to a transfer model looks untrained: all its
    hyperparameters are still at their initial values."""


class OutcomeScaleWarning(UserWarning):
    r"""Outcomes on a scale the model cannot represent as given: a spread below
    ``Standardize``'s floor, or target outcomes in other units than a meta prior's
    data."""


def check_integer(name: str, value: Any, minimum: int = 1) -> int:
    r"""``value`` if it is an ``int`` of at least ``minimum``.

    Args:
        name: The argument's name (for the messages).
        value: The value given.
        minimum: The smallest value allowed.

    Returns:
        ``value``.

    Raises:
        TypeError: If ``value`` is no ``int`` (a ``bool`` is none).
        ValueError: If ``value`` is below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"`{name}` must be an int, got {value!r}.")
    if value < minimum:
        kind = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ValueError(f"`{name}` must be {kind}, got {value!r}.")
    return value


def check_number(
    name: str,
    value: Any,
    minimum: float = 0.0,
    maximum: float = math.inf,
    include_maximum: bool = True,
) -> float:
    r"""``value`` as a float if it is a finite real number in ``[minimum,
    maximum]`` (``[minimum, maximum)`` with ``include_maximum=False``).

    Args:
        name: The argument's name (for the messages).
        value: The value given.
        minimum: The smallest value allowed.
        maximum: The upper end of the allowed range.
        include_maximum: Whether ``maximum`` itself is allowed.

    Returns:
        ``float(value)``.

    Raises:
        ValueError: If ``value`` is no finite real number (a ``bool`` is none, NaN
            is none) or lies outside the range; the message names ``name``.
    """
    number = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
    )
    above = number and (value > maximum or (value == maximum and not include_maximum))
    if not number or value < minimum or above:
        if maximum == math.inf:
            allowed = f">= {minimum:g}"
        else:
            closing = "]" if include_maximum else ")"
            allowed = f"in [{minimum:g}, {maximum:g}{closing}"
        raise ValueError(f"`{name}` must be a finite number {allowed}, got {value!r}.")
    return float(value)


def warn_if_below_standardize_floor(
    outcome_transform: Any, Y: Tensor, name: str = "`train_Y`", stacklevel: int = 3
) -> None:
    r"""Warn when ``Standardize`` leaves outcomes unscaled because their spread is
    below its floor.

    ``Standardize`` replaces a standard deviation below its ``min_stdv`` (1e-8 by
    default) by 1, so outcomes at 1e-9 scale stay at 1e-9 in model units, where
    the GP's priors expect O(1): posterior variances come out many orders of
    magnitude too large.

    Args:
        outcome_transform: The model's outcome transform (only a ``Standardize``
            is checked).
        Y: ``... x n x 1`` outcomes it was fitted on.
        name: The outcomes' name in messages (e.g. ``"`train_Y`"``).
        stacklevel: Passed to ``warnings.warn``.
    """
    # imported here: botorch's transforms import this package's models lazily
    from botorch.models.transforms.outcome import Standardize

    if not isinstance(outcome_transform, Standardize) or Y.shape[-2] < 2:
        return
    floor = outcome_transform._min_stdv
    std = Y.detach().std(dim=-2)
    below = (std > 0) & (std < floor)
    if below.any():
        spread = std[below].max().item()
        warnings.warn(
            f"{name} have a standard deviation of {spread:.3g}, below "
            f"Standardize's floor min_stdv={floor:.3g}: Standardize does not scale "
            "outcomes this small (it divides by 1), so the model sees them at this "
            "scale and its posterior variances come out far too large. Rescale the "
            f"outcomes (e.g. multiply them by {1 / spread:.3g}) or pass "
            f"Standardize(m=1, min_stdv={spread / 10:.1g}).",
            OutcomeScaleWarning,
            stacklevel=stacklevel,
        )


#: A meta prior warns when the target outcomes lie further than this many prior
#: standard deviations from its mean on average (root mean square).
PRIOR_SCALE_MAX_SD = 100.0
#: ... or when they vary less than this fraction of what the prior expects.
PRIOR_SCALE_MIN_SPREAD = 1e-3


def warn_if_off_prior_scale(
    Y: Tensor,
    mean: Tensor,
    covariance: Any,
    prior: str,
    advice: str,
    stacklevel: int = 3,
) -> None:
    r"""Warn when target outcomes look like other units than a meta prior's.

    A prior learned on O(1) outcomes given a target at 1e6 (or at 1e-6) conditions
    on it without complaint and predicts variances in its own units at unobserved
    points, far off the target's. Two checks, per batch member:

    - the root mean square of ``(y - mean) / sd`` (``sd`` the prior's marginal
      standard deviation, noise included) above ``PRIOR_SCALE_MAX_SD``;
    - with at least 2 points, the outcomes' spread around their average below
      ``PRIOR_SCALE_MIN_SPREAD`` times the spread the prior expects there (its
      mean's and covariance's), unless they are constant.

    Args:
        Y: ``batch x n`` target outcomes (the prior's units).
        mean: ``batch x n`` prior mean at the target inputs.
        covariance: ``batch x n x n`` prior covariance with noise (tensor or
            ``LinearOperator``).
        prior: The prior, in words (for the message).
        advice: What to do about it (ends the message).
        stacklevel: Passed to ``warnings.warn``.
    """
    n = Y.shape[-1]
    if n == 0:
        return
    with torch.no_grad():
        C = covariance if isinstance(covariance, Tensor) else covariance.to_dense()
        variance = C.diagonal(dim1=-2, dim2=-1)
        rms = ((Y - mean).pow(2) / variance).mean(-1).sqrt().max().item()
        spread = math.inf
        if n >= 2:
            observed = (Y - Y.mean(-1, keepdim=True)).pow(2).sum(-1)
            expected = (
                (mean - mean.mean(-1, keepdim=True)).pow(2).sum(-1)
                + variance.sum(-1)
                - C.sum((-2, -1)) / n
            )
            ratio = (observed / expected).sqrt()
            # constant outcomes say nothing about their units
            spread = ratio[observed > 0].min().item() if (observed > 0).any() else 1.0
    if rms > PRIOR_SCALE_MAX_SD:
        found = (
            f"they lie {rms:.3g} prior standard deviations from the prior's mean "
            "(root mean square)"
        )
    elif spread < PRIOR_SCALE_MIN_SPREAD:
        found = f"they vary {1 / spread:.3g} times less than the prior expects"
    else:
        return
    warnings.warn(
        f"`train_Y` looks like other units than {prior}: {found}, so the prior's "
        "variances at unobserved points are not in the target's units. "
        f"{advice}",
        OutcomeScaleWarning,
        stacklevel=stacklevel,
    )


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


def check_query_inputs(X: Any, d: int, name: str = "X") -> None:
    r"""Check inputs at which a model is queried (``posterior``, conditioning), as
    BoTorch's input checks do: a floating point tensor ``batch_shape x q x d`` with
    the model's ``d`` and finite values (a NaN input would give a NaN posterior).

    Args:
        X: The inputs.
        d: The model's input dimension.
        name: The argument's name in messages.
    """
    if not isinstance(X, Tensor) or not X.is_floating_point():
        got = X.dtype if isinstance(X, Tensor) else type(X).__name__
        raise TypeError(f"`{name}` must be a floating point torch.Tensor, got {got}.")
    if X.dim() < 2:
        raise ValueError(
            f"`{name}` must have shape batch_shape x q x d (d={d}), got "
            f"{tuple(X.shape)}; use `{name}.unsqueeze(0)` for a single point."
        )
    if X.shape[-1] != d:
        raise ValueError(
            f"`{name}` must have d={d} columns (its last dimension), got shape "
            f"{tuple(X.shape)}."
        )
    if not torch.isfinite(X).all():
        raise ValueError(f"`{name}` contains NaN or infinite values.")


def check_bounds(bounds: Any, d: int, like: Tensor, name: str = "bounds") -> Tensor:
    r"""Check a box of inputs: a ``2 x d`` tensor of finite bounds, lower < upper.

    Args:
        bounds: The ``2 x d`` lower and upper bounds.
        d: The input dimension.
        like: A tensor whose dtype and device the bounds get (integer bounds are
            cast).
        name: The argument's name in messages.

    Returns:
        The bounds on ``like``'s dtype and device.
    """
    if not isinstance(bounds, Tensor):
        raise TypeError(
            f"`{name}` must be a 2 x d torch.Tensor, got {type(bounds).__name__}."
        )
    if tuple(bounds.shape) != (2, d):
        raise ValueError(
            f"`{name}` must have shape (2, {d}) (lower and upper bounds of the d={d} "
            f"inputs), got {tuple(bounds.shape)}."
        )
    bounds = bounds.to(dtype=like.dtype, device=like.device)
    if not torch.isfinite(bounds).all():
        raise ValueError(f"`{name}` contains NaN or infinite values.")
    empty = (bounds[1] <= bounds[0]).nonzero().flatten().tolist()
    if empty:
        raise ValueError(
            f"`{name}` must have lower < upper in every dimension (bounds[0] < "
            f"bounds[1]); dimension(s) {empty} have lower >= upper."
        )
    return bounds


#: Inputs may lie outside ``bounds`` by this fraction of the bounds' width (round-off).
BOUNDS_RTOL = 1e-6


def check_inputs_within_bounds(
    tasks: Sequence[TaskData],
    bounds: Tensor,
    names: Sequence[Any] | None = None,
    name: str = "bounds",
) -> None:
    r"""Raise when a task's inputs lie outside ``bounds`` (``2 x d``): a map of the
    bounds to the unit cube would put them outside it, where nothing was learned.

    Args:
        tasks: The tasks whose inputs must lie within the bounds.
        bounds: ``2 x d`` lower and upper bounds.
        names: Optional task names for messages (default: their positions).
        name: The bounds' argument name in messages.
    """
    slack = BOUNDS_RTOL * (bounds[1] - bounds[0])
    for i, task in enumerate(tasks):
        X = task.X.to(bounds)
        outside = (X < bounds[0] - slack) | (X > bounds[1] + slack)
        if outside.any():
            label = names[i] if names else i
            dims = sorted(set(outside.nonzero()[:, -1].tolist()))
            raise ValueError(
                f"`tasks[{label!r}]` has inputs outside `{name}` in dimension(s) "
                f"{dims} (inputs from {_rounded(X.min(0).values)} to "
                f"{_rounded(X.max(0).values)}; `{name}` {_rounded(bounds)}): give "
                "bounds that contain every task's inputs."
            )


def _rounded(values: Tensor) -> list:
    return torch.round(values.detach().cpu(), decimals=4).tolist()


def learns_from_data(input_transform: InputTransform) -> bool:
    r"""Whether ``input_transform`` (or one in a chain) learns its coefficients from
    the training inputs, e.g. ``Normalize(d)`` without ``bounds``."""
    return any(
        isinstance(t, AffineInputTransform) and t.learn_coefficients
        for t in input_transform.modules()
    )


def check_invertible_input_transform(
    input_transform: InputTransform, train_X: Tensor, reason: str
) -> None:
    r"""Raise unless ``input_transform.untransform`` inverts it on ``train_X``.

    Args:
        input_transform: The transform.
        train_X: Raw inputs to check on.
        reason: Why the model needs an invertible transform (for the message).
    """
    if train_X.shape[-2] == 0:
        return  # nothing to check on (and nothing a learned transform could learn)
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


# source checks that moved to the models (they know the source types)
__getattr__ = moved_names(
    __name__,
    {
        name: "botorch_transfer.models.utils.sources"
        for name in (
            "as_source_list",
            "check_source",
            "looks_untrained",
            "own_copy",
            "source_input_dim",
        )
    },
)
