r"""What the guard's comparison of a transfer model with a target-only GP rests on.

:class:`~botorch_transfer.models.guard.TransferGuard` scores models by the log
predictive density of the target's observations (:func:`normal_log_density`), and
carries a previous guard's prequential scores over only to a model that transfers
from the same data: :func:`transfer_fingerprint` summarizes the data behind a
model's ``source`` or ``prior`` argument (every source-conditioned GP keeps it),
:func:`same_fingerprint` compares two summaries.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor
from torch.nn import Module

from botorch_transfer.data import TaskData


def normal_log_density(y: Tensor, mean: Tensor, variance: Tensor) -> Tensor:
    r"""Log density of ``N(mean, variance)`` at ``y`` (elementwise)."""
    return -0.5 * (
        math.log(2 * math.pi) + variance.log() + (y - mean).pow(2) / variance
    )


def transfer_fingerprint(transfer: Any) -> list[tuple[tuple[int, ...], float, float]]:
    r"""A summary of the data behind a transfer input, to tell whether two models
    transfer from the same sources or prior.

    Each tensor of the input (a ``TaskData``'s ``X``, ``Y``, ``Yvar``; a model's or
    prior's state and training data) gives its shape, sum and sum of squares.

    Args:
        transfer: A model's ``source`` (one or a list) or ``prior`` argument.

    Returns:
        One ``(shape, sum, sum of squares)`` per tensor.
    """
    items = transfer if isinstance(transfer, (list, tuple)) else [transfer]
    tensors: list[Tensor] = []
    summary: list[tuple[tuple[int, ...], float, float]] = []
    for item in items:
        origin = getattr(item, "origin_fingerprint", None)
        if origin is not None:
            # a model's frozen source (``frozen_source()``) stands for the sources
            # that model was built from: a rebuilt model transfers from the same
            summary += origin
        elif isinstance(item, TaskData):
            tensors += [t for t in (item.X, item.Y, item.Yvar) if t is not None]
        elif isinstance(item, Module):
            tensors += [t for t in item.state_dict().values() if isinstance(t, Tensor)]
            # an exact GP holds a tuple of inputs; a source posterior a tensor
            inputs = getattr(item, "train_inputs", None)
            data = [inputs] if isinstance(inputs, Tensor) else [*(inputs or ())]
            data.append(getattr(item, "train_targets", None))
            tensors += [t for t in data if isinstance(t, Tensor)]
    with torch.no_grad():
        return summary + [
            (tuple(t.shape), t.double().sum().item(), t.double().pow(2).sum().item())
            for t in tensors
            if t.is_floating_point()
        ]


def same_fingerprint(a: list[tuple], b: list[tuple], rtol: float = 1e-5) -> bool:
    r"""Whether two :func:`transfer_fingerprint` summaries are of the same data (up
    to a change of dtype)."""
    if len(a) != len(b):
        return False
    for (shape_a, *values_a), (shape_b, *values_b) in zip(a, b, strict=True):
        if shape_a != shape_b:
            return False
        for x, y in zip(values_a, values_b, strict=True):
            if not math.isclose(x, y, rel_tol=rtol, abs_tol=rtol):
                return False
    return True
