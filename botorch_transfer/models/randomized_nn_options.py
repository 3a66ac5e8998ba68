r"""The options of :class:`~botorch_transfer.models.randomized_nn.RandomizedNNEnsemble`.

The model's constructor takes the settings a user changes most (``num_members``,
``loss``, ``regularizer``, ``lambda_schedule``, ``seed``, the transforms) directly
and the rest as small option objects, each checked when it is built:

- :class:`NetworkOptions`: the members' architecture and the scales of the
  whitened parameters' prior ``Pi_0``;
- :class:`TrainingOptions` (``training_options=``): how eq. 10 is minimized;
- :class:`LFBOLoss`: ``loss=LFBOLoss(gamma)``, the cross-entropy loss on the LFBO
  labels with a fraction ``gamma`` labelled positive (``loss="cross_entropy"`` is
  ``LFBOLoss()``);
- :class:`FunctionSpaceRegularizer`: ``regularizer=FunctionSpaceRegularizer(...)``,
  the function-space distance over the training inputs and anchor points
  (``regularizer="function"`` is ``FunctionSpaceRegularizer()``);
- :class:`LogPowerSchedule`: the default ``lambda_schedule``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch
from torch import Tensor

from botorch_transfer._deprecation import renamed_keywords
from botorch_transfer.validation import check_integer, check_number

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "tanh": torch.tanh,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "softplus": torch.nn.functional.softplus,
    "gelu": torch.nn.functional.gelu,
    "silu": torch.nn.functional.silu,
    "sin": torch.sin,
}
LOSSES = ("squared", "cross_entropy")
REGULARIZERS = ("parameter", "function")
OPTIMIZERS = ("adam", "lbfgs")


@dataclass(frozen=True)
class NetworkOptions:
    r"""The members' architecture and the scales of their parameters' prior.

    Layer ``l`` of a member computes ``a((s_l / sqrt(fan_in)) W_l h + bias_scale *
    b_l)`` with all entries of ``W_l`` and ``b_l`` drawn ``N(0, 1)``, ``s_1 =
    input_scale`` and ``s_l = weight_scale`` afterwards (no activation on the
    linear output layer).

    Args:
        hidden: Hidden layer widths; ``()`` for a model linear in its parameters
            (on the inputs, or on the fixed features of ``feature_map``).
        activation: One of ``"tanh"`` (the analysis of Sec. 3 wants smooth
            activations), ``"relu"``, ``"sigmoid"``, ``"softplus"``, ``"gelu"``,
            ``"silu"``, ``"sin"``.
        feature_map: Optional fixed map ``... x d -> ... x F`` applied to the
            (transformed) inputs before the network.
        input_scale: Weight scale ``s_1`` of the first layer (an inverse
            lengthscale in the model's input units).
        weight_scale: Weight scale of the later layers.
        bias_scale: Scale of all biases.

    Example:
        >>> network = NetworkOptions(hidden=(32, 32), activation="relu")
    """

    hidden: Sequence[int] = (64, 64)
    activation: str = "tanh"
    feature_map: Callable[[Tensor], Tensor] | None = None
    input_scale: float = 3.0
    weight_scale: float = 1.0
    bias_scale: float = 1.0

    def __post_init__(self) -> None:
        hidden = tuple(self.hidden)
        if any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in hidden):
            raise ValueError(
                f"`hidden` must be a sequence of positive integers, got {hidden!r}."
            )
        object.__setattr__(self, "hidden", hidden)
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"Unknown `activation` {self.activation!r}; choose from "
                f"{sorted(ACTIVATIONS)}."
            )
        for name in ("input_scale", "weight_scale", "bias_scale"):
            check_number(name, getattr(self, name))


@dataclass(frozen=True)
class TrainingOptions:
    r"""How each member's eq. 10 is minimized.

    Args:
        optimizer: ``"adam"`` (per-coordinate, so members are trained exactly as if
            separately) or ``"lbfgs"`` (full batch, SciPy's L-BFGS-B on all members
            at once; for small or convex problems trained to high precision).
        num_steps: Adam steps, or the L-BFGS iteration budget.
        lr: Adam learning rate (default ``3e-2``; not used by L-BFGS).

    Example:
        >>> training = TrainingOptions(optimizer="lbfgs", num_steps=200)
    """

    optimizer: str = "adam"
    num_steps: int = 500
    lr: float | None = None

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"Unknown `optimizer` {self.optimizer!r}; choose from "
                f"{list(OPTIMIZERS)}."
            )
        check_integer("num_steps", self.num_steps, 1)
        if self.lr is not None:
            check_number("lr", self.lr)


@dataclass(frozen=True)
class LFBOLoss:
    r"""The cross-entropy loss on LFBO labels (eq. 2): ``z_i = 1[y_i >= tau_t]``
    with ``tau_t`` the empirical ``(1 - gamma)``-quantile of the observations
    (Sec. 2.3, BORE); the model then predicts the class probability.

    Args:
        gamma: The fraction of observations labelled positive, in ``(0, 1)``.

    Example:
        >>> loss = LFBOLoss(gamma=0.2)
    """

    gamma: float = 0.25

    def __post_init__(self) -> None:
        if not (
            isinstance(self.gamma, (int, float))
            and not isinstance(self.gamma, bool)
            and 0 < self.gamma < 1
        ):
            raise ValueError(
                f"`gamma` must lie in the open interval (0, 1), got {self.gamma!r}."
            )


@dataclass(frozen=True)
class FunctionSpaceRegularizer:
    r"""The function-space regularizer ``sum_{z in Z} (g_theta(z) -
    g_theta_0(z))^2`` over the training inputs and anchor points ``Z``
    (pseudo-observations of the initial function with weight ``lambda_t``): not the
    paper's norm (eq. 11) but an often-used practical surrogate for it.

    Args:
        anchors: ``k x d`` anchor points in the user's input space. Default:
            ``num_anchors`` uniform points of the unit cube of the *model's* input
            space (the domain, if ``input_transform`` is ``Normalize(d,
            bounds=bounds)``).
        num_anchors: Number of default anchors.

    Example:
        >>> regularizer = FunctionSpaceRegularizer(num_anchors=128)
    """

    anchors: Tensor | None = field(default=None, compare=False)
    num_anchors: int = 64

    def __post_init__(self) -> None:
        check_integer("num_anchors", self.num_anchors, 0)
        anchors = self.anchors
        if anchors is not None and (
            not isinstance(anchors, Tensor) or anchors.dim() != 2
        ):
            raise ValueError(
                "`anchors` must be a k x d tensor, got "
                f"{getattr(anchors, 'shape', anchors)}."
            )
        if anchors is not None and not torch.isfinite(anchors).all():
            raise ValueError("`anchors` contains NaN or infinite values.")


class LogPowerSchedule:
    r"""The regularization schedule ``lambda_t = c * log(t + e)^q`` (Theorem 4.2).

    Theorem 4.2 asks for ``lambda_t ~ log^q t`` with ``q > 1``; the ``+ e`` keeps
    ``lambda_0 = c > 0`` when there is no data yet.

    Args:
        c: Scale, ``lambda_0 = c``. It plays the part of a noise-to-prior variance
            ratio (eq. 10 with eq. 3 is the MAP problem of a Gaussian prior of
            precision ``lambda_t`` around ``theta_0`` and unit noise variance): with
            standardized outcomes, the default ``1e-3`` fits the data closely.
        q: Exponent, ``> 1`` for the guarantee of Theorem 4.2 (any ``q > 0`` accepted).

    Example:
        >>> schedule = LogPowerSchedule(c=1e-3, q=1.5)
        >>> schedule(0)  # lambda_0 = c
        0.001
    """

    def __init__(self, c: float = 1e-3, q: float = 1.5) -> None:
        if not (isinstance(c, (int, float)) and math.isfinite(c) and c > 0):
            raise ValueError(f"`c` must be a positive finite number, got {c!r}.")
        if not (isinstance(q, (int, float)) and math.isfinite(q) and q > 0):
            raise ValueError(f"`q` must be a positive finite number, got {q!r}.")
        self.c, self.q = float(c), float(q)

    def __call__(self, t: int) -> float:
        return self.c * math.log(t + math.e) ** self.q

    def __repr__(self) -> str:
        return f"LogPowerSchedule(c={self.c}, q={self.q})"


def lambda_value(schedule: float | Callable[[int], float] | None, t: int) -> float:
    r"""``lambda_t`` of a schedule (a positive number, a callable ``t ->
    lambda_t``, or ``None`` for :class:`LogPowerSchedule`'s default) at ``t``
    observations."""
    if schedule is None:
        schedule = LogPowerSchedule()
    value = schedule(t) if callable(schedule) else schedule
    if isinstance(value, Tensor):
        value = value.item()
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(
            f"`lambda_schedule` must be a positive number or a callable t -> positive "
            f"number; it gave {value!r} at t={t}."
        )
    return float(value)


#: The constructor's old keywords (deprecated), with the option that replaces each.
OLD_OPTION_ARGUMENTS: dict[str, str] = {
    **{f.name: "network" for f in fields(NetworkOptions)},
    **{f.name: "training_options" for f in fields(TrainingOptions)},
    "gamma": "loss",
    "anchors": "regularizer",
    "num_anchors": "regularizer",
}
OPTION_CLASSES: dict[str, type] = {
    "network": NetworkOptions,
    "training_options": TrainingOptions,
    "loss": LFBOLoss,
    "regularizer": FunctionSpaceRegularizer,
}


def resolved_options(
    owner: str,
    loss: str | LFBOLoss,
    regularizer: str | FunctionSpaceRegularizer,
    network: NetworkOptions | None,
    training: TrainingOptions | None,
    deprecated: Mapping[str, Any],
) -> tuple[
    LFBOLoss | None, FunctionSpaceRegularizer | None, NetworkOptions, TrainingOptions
]:
    r"""The option objects of a constructor call, the old keywords folded in.

    Args:
        owner: The class (for the messages).
        loss: ``"squared"``, ``"cross_entropy"`` or an :class:`LFBOLoss`.
        regularizer: ``"parameter"``, ``"function"`` or a
            :class:`FunctionSpaceRegularizer`.
        network: The network options (``None``: the defaults).
        training: The training options, ``training_options`` (``None``: the
            defaults).
        deprecated: Keywords not in the signature: only the old names of the
            options' fields (each with a ``DeprecationWarning``).

    Returns:
        ``(lfbo, function_space, network, training)``: ``lfbo`` and
        ``function_space`` are ``None`` under the squared loss and the parameter
        regularizer.

    Raises:
        TypeError: For an unknown keyword.
        ValueError: For an unknown loss or regularizer, an option given both as an
            object and by its old keyword, or an old keyword of a mode not chosen.
    """
    hints = {
        old: f"{new}={OPTION_CLASSES[new].__name__}({old}=...)"
        for old, new in OLD_OPTION_ARGUMENTS.items()
    }
    # warns (at the caller of the model's constructor), or raises on unknown names
    renamed_keywords(owner, deprecated, hints)
    if isinstance(loss, LFBOLoss):
        lfbo = loss
    elif loss in LOSSES:
        lfbo = LFBOLoss() if loss == "cross_entropy" else None
    else:
        raise ValueError(f"Unknown `loss` {loss!r}; choose from {list(LOSSES)}.")
    if isinstance(regularizer, FunctionSpaceRegularizer):
        function_space = regularizer
    elif regularizer in REGULARIZERS:
        function_space = (
            FunctionSpaceRegularizer() if regularizer == "function" else None
        )
    else:
        raise ValueError(
            f"Unknown `regularizer` {regularizer!r}; choose from {list(REGULARIZERS)}."
        )
    # (given as an object, the value the old keywords would change, the mode
    # they need)
    options = {
        "network": (network, network or NetworkOptions(), None),
        "training_options": (training, training or TrainingOptions(), None),
        "loss": (None if isinstance(loss, str) else loss, lfbo, "loss='cross_entropy'"),
        "regularizer": (
            None if isinstance(regularizer, str) else regularizer,
            function_space,
            "regularizer='function'",
        ),
    }
    resolved = {name: value for name, (_, value, _) in options.items()}
    for name, (as_object, value, mode) in options.items():
        values = {
            k: v for k, v in deprecated.items() if OLD_OPTION_ARGUMENTS[k] == name
        }
        if not values:
            continue
        if as_object is not None:
            raise ValueError(
                f"{owner} got {sorted(values)} and `{name}`: give them once, in "
                f"`{name}`."
            )
        if value is None:
            raise ValueError(f"{sorted(values)} apply to {mode} only.")
        resolved[name] = replace(value, **values)
    for name in ("network", "training_options"):
        kind = OPTION_CLASSES[name]
        if not isinstance(resolved[name], kind):
            raise TypeError(
                f"`{name}` must be a {kind.__name__}, got "
                f"{type(resolved[name]).__name__}."
            )
    return (
        resolved["loss"],
        resolved["regularizer"],
        resolved["network"],
        resolved["training_options"],
    )
