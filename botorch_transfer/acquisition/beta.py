r"""Confidence schedules for UCB-type acquisition functions."""

from __future__ import annotations

import math


def beta_t(t: int, domain_size: int, rho: float = 0.1) -> float:
    r"""The DeltaBO exploration weight of Theorem 1 / Lemma 1.

    ``beta_t = 2 log(|D| t^2 pi^2 / (6 rho))`` makes the confidence bounds
    ``mu_t(x) +- sqrt(beta_t) sigma_t(x)`` hold for all ``t`` and all ``x`` in a finite
    domain ``D`` with probability at least ``1 - rho``. BoTorch's
    ``UpperConfidenceBound(model, beta=...)`` uses the same convention
    (``mean + sqrt(beta) * std``). The paper's experiments use a fixed ``beta``
    (0.2 or 0.3) instead; pass that number directly to the acquisition function.

    Args:
        t: The iteration, ``t >= 1``.
        domain_size: ``|D|``, the number of candidate points (``>= 1``). For a
            continuous domain use the size of a discretization.
        rho: Failure probability in ``(0, 1)``.

    Returns:
        ``beta_t`` as a float.

    Example:
        >>> beta_t(1, domain_size=120 * 120, rho=0.1)  # doctest: +ELLIPSIS
        24.75...
    """
    if isinstance(t, bool) or not isinstance(t, int) or t < 1:
        raise ValueError(f"`t` must be an integer >= 1, got {t!r}.")
    if (
        isinstance(domain_size, bool)
        or not isinstance(domain_size, int)
        or domain_size < 1
    ):
        raise ValueError(f"`domain_size` must be an integer >= 1, got {domain_size!r}.")
    if not 0.0 < rho < 1.0:
        raise ValueError(f"`rho` must lie in (0, 1), got {rho!r}.")
    return 2.0 * math.log(domain_size * t**2 * math.pi**2 / (6.0 * rho))
