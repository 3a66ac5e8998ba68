r"""Confidence schedules for UCB-type acquisition functions."""

from __future__ import annotations

import math
import operator
from typing import Any

import torch


def _integer(value: Any, name: str) -> int:
    r"""``value`` as an ``int`` >= 1: a Python or NumPy integer or a 0-d integer
    tensor (not a bool, a float or an array)."""
    if (
        isinstance(value, (bool, str, bytes))
        or getattr(value, "ndim", 0) != 0
        or getattr(value, "dtype", None) == torch.bool
    ):
        index = None
    else:
        try:
            index = operator.index(value)
        except TypeError:
            index = None
    if index is None or index < 1:
        raise ValueError(f"`{name}` must be an integer >= 1, got {value!r}.")
    return index


def beta_t(t: int, domain_size: int, rho: float = 0.1) -> float:
    r"""The DeltaBO exploration weight of Theorem 1 / Lemma 1.

    ``beta_t = 2 log(|D| t^2 pi^2 / (6 rho))`` makes the confidence bounds
    ``mu_t(x) +- sqrt(beta_t) sigma_t(x)`` hold for all ``t`` and all ``x`` in a finite
    domain ``D`` with probability at least ``1 - rho``. BoTorch's
    ``UpperConfidenceBound(model, beta=...)`` uses the same convention
    (``mean + sqrt(beta) * std``). The paper's experiments use a fixed ``beta``
    (0.2 or 0.3) instead; pass that number directly to the acquisition function.

    Args:
        t: The iteration, ``t >= 1`` (an ``int``, a NumPy integer or a 0-d integer
            tensor).
        domain_size: ``|D|``, the number of candidate points (``>= 1``, an integer
            like ``t``; any size, the formula is evaluated in logs). For a
            continuous domain use the size of a discretization.
        rho: Failure probability in ``(0, 1)``.

    Returns:
        ``beta_t`` as a float.

    Example:
        >>> beta_t(1, domain_size=120 * 120, rho=0.1)  # doctest: +ELLIPSIS
        24.75...
    """
    t, domain_size = _integer(t, "t"), _integer(domain_size, "domain_size")
    try:
        rho_value = float(rho) if not isinstance(rho, (bool, str, bytes)) else None
    except (TypeError, ValueError):
        rho_value = None
    if rho_value is None or not 0.0 < rho_value < 1.0:
        raise ValueError(f"`rho` must be a number in (0, 1), got {rho!r}.")
    # in logs: |D| may be too large for a float (e.g. 2^d for d binary inputs)
    return 2.0 * (
        math.log(domain_size)
        + 2.0 * math.log(t)
        + math.log(math.pi**2 / (6.0 * rho_value))
    )
