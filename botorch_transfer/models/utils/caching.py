r"""Keeping values derived from tensors while the tensors hold: keys by identity
and version, comparison by value, and a module ``_apply`` that drops its caches
only when it replaced or changed what they derive from."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor


def state_key(tensors: Iterable[Tensor]) -> tuple:
    r"""Identifies tensors and their contents' versions: it changes when one is
    modified in place or replaced (a cache key for values derived from them)."""
    return tuple((t.data_ptr(), t.device, t._version) for t in tensors)


def apply_keeping_caches(
    tensors: Callable[[], Iterable[Tensor]],
    apply: Callable[[], Any],
    clear: Callable[[], None],
) -> Any:
    r"""``apply()`` (a module's ``_apply``), then ``clear()`` its caches only if one
    of ``tensors()`` (what the caches derive from) was replaced or changed.

    BoTorch's analytic acquisition functions call ``model.to(X)`` at every
    evaluation; with ``X``'s dtype and device that replaces nothing, and dropping
    the caches there rebuilt them at every evaluation. Within one ``_apply`` a
    replaced tensor never shares its predecessor's address (the new one is made
    while the old one is alive), so comparing :func:`state_key` before and after
    is exact.
    """
    before = state_key(tensors())
    result = apply()
    if state_key(tensors()) != before:
        clear()
    return result


def same_tensors(cached: list[Tensor], current: list[Tensor]) -> bool:
    r"""Whether both lists hold tensors of equal shapes, dtypes, devices, values."""
    return len(cached) == len(current) and all(
        a.shape == b.shape
        and a.dtype == b.dtype
        and a.device == b.device
        and torch.equal(a, b)
        for a, b in zip(cached, current)
    )
