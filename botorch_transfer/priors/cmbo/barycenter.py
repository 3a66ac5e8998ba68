r"""Wasserstein barycenter of Gaussians (cm-BO paper, Sec. 2.1 and Stage 2).

The 2-Wasserstein barycenter of ``N(m_i, S_i)`` with weights ``l_i`` is
``N(m_bar, S_bar)`` with ``m_bar = sum_i l_i m_i`` and ``S_bar`` the unique positive
definite root of ``S = sum_i l_i (S^1/2 S_i S^1/2)^1/2``. It is computed with the
fixed-point iteration of Alvarez-Esteban, del Barrio, Cuesta-Albertos and Matran
(2016), which converges for positive definite ``S_i``:

``S <- S^-1/2 (sum_i l_i (S^1/2 S_i S^1/2)^1/2)^2 S^-1/2``.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import torch
from torch import Tensor

from botorch_transfer.priors.divergences import symmetric_sqrtm


class BarycenterConvergenceWarning(RuntimeWarning):
    r"""The barycenter iteration stopped at its iteration cap before converging."""


class Barycenter(NamedTuple):
    r"""Result of :func:`wasserstein_barycenter`.

    Attributes:
        mean: ``n`` barycenter mean.
        covariance: ``n x n`` barycenter covariance.
        n_iter: Number of fixed-point iterations run.
        converged: Whether the relative change fell below ``tol`` before ``max_iter``.
        change: Relative Frobenius change of the covariance in the last iteration.
    """

    mean: Tensor
    covariance: Tensor
    n_iter: int
    converged: bool
    change: float


def wasserstein_barycenter(
    means: Tensor,
    covs: Tensor,
    weights: Tensor | None = None,
    tol: float = 1e-10,
    max_iter: int = 500,
) -> Barycenter:
    r"""2-Wasserstein barycenter of Gaussians by the fixed-point iteration.

    Starts from the weighted arithmetic mean of the covariances and stops when the
    relative Frobenius change ``||S_new - S|| / ||S||`` is below ``tol``. If
    ``max_iter`` is reached first, a :class:`BarycenterConvergenceWarning` is issued and
    the result has ``converged=False`` (the last iterate is returned).

    Args:
        means: ``k x n`` means.
        covs: ``k x n x n`` symmetric positive definite covariances.
        weights: ``k`` non-negative barycentric weights summing to 1 (default uniform).
        tol: Relative convergence tolerance on the covariance.
        max_iter: Iteration cap.

    Returns:
        A :class:`Barycenter` (mean, covariance, iterations, convergence flag).

    Example:
        >>> covs = torch.stack([torch.eye(2), 4 * torch.eye(2)]).double()
        >>> wasserstein_barycenter(torch.zeros(2, 2).double(), covs).covariance
        tensor([[2.2500, 0.0000],
                [0.0000, 2.2500]], dtype=torch.float64)
    """
    if (
        means.dim() != 2
        or covs.dim() != 3
        or covs.shape != means.shape[:1] + means.shape[-1:] * 2
    ):
        raise ValueError(
            f"`means` must be k x n and `covs` k x n x n, got {tuple(means.shape)} and "
            f"{tuple(covs.shape)}."
        )
    k = means.shape[0]
    if k == 0:
        raise ValueError("`means` must contain at least one Gaussian, got none.")
    if weights is None:
        weights = torch.full((k,), 1.0 / k, dtype=means.dtype, device=means.device)
    if weights.shape != (k,):
        raise ValueError(
            f"`weights` must have shape ({k},), got {tuple(weights.shape)}."
        )
    if (weights < 0).any() or not torch.isclose(
        weights.sum(), weights.new_tensor(1.0), atol=1e-6
    ):
        raise ValueError("`weights` must be non-negative and sum to 1.")
    if max_iter < 1:
        raise ValueError(f"`max_iter` must be at least 1, got {max_iter}.")
    mean = weights @ means
    S = torch.einsum("k,kij->ij", weights, covs)
    converged, change, it = False, float("inf"), 0
    for it in range(1, max_iter + 1):
        eigvals, eigvecs = torch.linalg.eigh(S)
        root_vals = eigvals.clamp_min(torch.finfo(S.dtype).tiny).sqrt()
        root = (eigvecs * root_vals) @ eigvecs.T
        inv_root = (eigvecs / root_vals) @ eigvecs.T
        T = torch.einsum("k,kij->ij", weights, symmetric_sqrtm(root @ covs @ root))
        S_new = inv_root @ T @ T @ inv_root
        S_new = 0.5 * (S_new + S_new.T)
        change = (
            torch.linalg.matrix_norm(S_new - S) / torch.linalg.matrix_norm(S)
        ).item()
        S = S_new
        if change < tol:
            converged = True
            break
    if not converged:
        warnings.warn(
            f"wasserstein_barycenter stopped at max_iter={max_iter} with relative "
            f"change {change:.2e} > tol={tol:.1e}; returning the last iterate.",
            BarycenterConvergenceWarning,
            stacklevel=2,
        )
    return Barycenter(
        mean=mean, covariance=S, n_iter=it, converged=converged, change=change
    )
