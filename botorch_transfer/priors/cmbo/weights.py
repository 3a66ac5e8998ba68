r"""cm-BO cluster weights (Nguyen et al., Algorithm 1 lines 13 and 19-21).

The prior mean and kernel of cm-BO are weighted sums over the cluster prototypes.
The weights start uniform (line 13) and after every query are recomputed from the
distances between the target posterior and the prototypes (lines 19-21).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def check_weights(
    weights: Tensor | Sequence[float] | None, n_clusters: int, like: Tensor
) -> Tensor:
    r"""Validate cluster weights: ``C`` finite non-negative values summing to 1.

    Weights are *not* silently normalized: a sum off 1 by more than ``1e-6`` raises.
    Within that tolerance they are divided by their sum (to remove rounding).

    Args:
        weights: ``C`` weights, or ``None`` for the uniform ``1/C`` (Alg. 1 line 13).
        n_clusters: ``C``.
        like: A tensor whose dtype and device the weights take.

    Returns:
        The weights as a ``C`` tensor.
    """
    if weights is None:
        return torch.full(
            (n_clusters,), 1.0 / n_clusters, dtype=like.dtype, device=like.device
        )
    # Python floats straight to the target dtype (not through float32)
    w = (
        weights.to(like)
        if isinstance(weights, Tensor)
        else torch.tensor(weights, dtype=like.dtype, device=like.device)
    )
    if w.shape != (n_clusters,):
        raise ValueError(
            f"`weights` must have one entry per cluster, shape ({n_clusters},), got "
            f"{tuple(w.shape)}."
        )
    if not torch.isfinite(w).all() or (w < 0).any():
        raise ValueError(
            f"`weights` must be finite and non-negative, got {w.tolist()}."
        )
    total = w.sum().item()
    if abs(total - 1) > 1e-6:
        raise ValueError(
            "`weights` must sum to 1 (they are not normalized for you), got sum "
            f"{total:.6g}."
        )
    return w / w.sum()


def cluster_weights_from_distances(distances: Tensor) -> Tensor:
    r"""Prototype weights from distances (Alg. 1 lines 20-21).

    ``w_i = exp(1 - d_i / d_max) / sum_j exp(1 - d_j / d_max)``: the nearest prototype
    gets the largest weight, the farthest ``exp(-1)`` times the weight it would get at
    distance 0. If all distances are 0 the weights are uniform.

    Args:
        distances: ``C`` non-negative distances.

    Returns:
        ``C`` weights summing to 1.

    Example:
        >>> cluster_weights_from_distances(torch.tensor([0.0, 1.0]))
        tensor([0.7311, 0.2689])
    """
    d_max = distances.max()
    if d_max <= 0:
        return torch.full_like(distances, 1.0 / distances.numel())
    return torch.softmax(1 - distances / d_max, dim=-1)
