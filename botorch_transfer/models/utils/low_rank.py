r"""Low-rank (FITC) inference for GPs over many pooled source points.

An exact GP over ``N`` source and ``T`` target points costs ``O((N + T)^3)`` per
step of its hyperparameter fit. With inducing inputs ``Z`` (``m`` of them), the
prior covariance of the training points is replaced by the FITC approximation
(Snelson & Ghahramani, 2006; Quinonero-Candela & Rasmussen, 2005)::

    K ~ R R^T + diag(K - R R^T),    R = K_XZ L^{-T},    L L^T = K_ZZ

which is exact on the diagonal and in every row of a point in ``Z``, and exact
everywhere when ``Z`` holds all training inputs. With per-point noise ``D`` the
training covariance is ``R R^T + Lambda`` (``Lambda`` diagonal), whose solves and
log determinant cost ``O(n m^2)`` by the Woodbury identity and the matrix
determinant lemma (``linear_operator``'s ``LowRankRootAddedDiagLinearOperator``).
Predictions at test points ``x`` use the exact prior ``k(x, x)``::

    G = R^T Lambda^{-1} R
    mean(x) = m(x) + k(x, Z) L^{-T} (I + G)^{-1} R^T Lambda^{-1} (y - m)
    cov(x, x') = k(x, x') - k(x, Z) L^{-T} (I + G)^{-1} G L^{-1} k(Z, x')

which costs ``O(m^2)`` per test point after an ``O(n m^2)`` cache.
"""

from __future__ import annotations

import math

import gpytorch
import torch
from gpytorch.distributions import MultivariateNormal
from linear_operator.operators import (
    DiagLinearOperator,
    LowRankRootAddedDiagLinearOperator,
    LowRankRootLinearOperator,
)
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

#: Relative jitter added to ``K_ZZ`` (of its mean diagonal) before its Cholesky
#: factorization: inducing inputs may nearly coincide (a BO loop samples close to its
#: incumbent). The FITC diagonal restores the exact prior variances.
NYSTROM_JITTER = {torch.float64: 1e-10, torch.float32: 1e-5}


def farthest_point_indices(X: Tensor, num_points: int) -> Tensor:
    r"""Greedy farthest-point selection (max-min distance), on inputs scaled to the
    unit cube per dimension.

    Space-filling and free of hyperparameters, so the same points serve every
    lengthscale a fit visits.

    Args:
        X: ``n x d`` inputs.
        num_points: How many to select; all ``n`` (in order) if ``n <= num_points``.

    Returns:
        The ``min(n, num_points)`` selected row indices, the first the point
        nearest the centre of the data.
    """
    n = X.shape[0]
    if n <= num_points:
        return torch.arange(n, device=X.device)
    low, high = X.min(dim=0).values, X.max(dim=0).values
    U = (X - low) / (high - low).clamp_min(torch.finfo(X.dtype).tiny)
    distance = (U - U.mean(dim=0)).pow(2).sum(-1)
    chosen = [int(torch.argmin(distance))]
    distance = (U - U[chosen[0]]).pow(2).sum(-1)
    for _ in range(num_points - 1):
        i = int(torch.argmax(distance))
        chosen.append(i)
        distance = torch.minimum(distance, (U - U[i]).pow(2).sum(-1))
    return torch.tensor(chosen, dtype=torch.long, device=X.device)


def nystrom_root(K_XZ: Tensor, K_ZZ: Tensor) -> tuple[Tensor, Tensor]:
    r"""The Nystrom root ``R = K_XZ L^{-T}`` with ``L L^T = K_ZZ + jitter``.

    Args:
        K_XZ: ``batch x n x m`` cross-covariance to the inducing inputs.
        K_ZZ: ``batch x m x m`` covariance of the inducing inputs.

    Returns:
        ``(R, L)``: the ``batch x n x m`` root and the ``batch x m x m`` factor.
    """
    jitter = NYSTROM_JITTER.get(K_ZZ.dtype, 1e-6)
    scale = torch.diagonal(K_ZZ, dim1=-2, dim2=-1).mean(-1, keepdim=True)
    eye = torch.eye(K_ZZ.shape[-1], dtype=K_ZZ.dtype, device=K_ZZ.device)
    L = torch.linalg.cholesky(K_ZZ + jitter * scale.unsqueeze(-1) * eye)
    R = torch.linalg.solve_triangular(L, K_XZ.transpose(-1, -2), upper=False)
    return R.transpose(-1, -2), L


class FITCMultivariateNormal(MultivariateNormal):
    r"""A ``MultivariateNormal`` whose ``log_prob`` is exact through the low-rank
    structure of its covariance (:func:`woodbury_log_density`; any other covariance:
    its own ``inv_quad_logdet``).

    BoTorch turns GPyTorch's fast ``log_prob`` off globally (its default, iterative
    path is not robust in BO loops), and the exact fallback factors the dense
    ``n x n`` matrix, which is what the low-rank structure avoids.
    """

    def log_prob(self, value: Tensor) -> Tensor:
        covar = self.lazy_covariance_matrix
        if not isinstance(covar, LowRankRootAddedDiagLinearOperator):
            with gpytorch.settings.fast_computations.log_prob(True):
                return super().log_prob(value)
        residuals = value - self.mean
        diagonal = covar._diag_tensor.diagonal()
        scaled = getattr(covar._linear_op, "row_scaled_root", None)
        if scaled is not None and bool((scaled[1] != 0).all()):
            # S R R^T S + D = S (R R^T + S^{-2} D) S: the density of r / a
            root, scale = scaled
            return woodbury_log_density(
                residuals / scale, root, diagonal / scale.pow(2)
            ) - scale.abs().log().sum(-1)
        root = covar._linear_op.root.to_dense()
        return woodbury_log_density(residuals, root, diagonal)


def woodbury_log_density(residuals: Tensor, root: Tensor, diagonal: Tensor) -> Tensor:
    r"""``log N(residuals; 0, R R^T + diag(diagonal))`` by the Woodbury identity and
    the matrix determinant lemma, with ``C = I + R^T D^{-1} R``::

        log N = -(r^T D^{-1} r - b^T C^{-1} b + log det C + sum log D + n log 2 pi) / 2

    where ``b = R^T D^{-1} r`` (the quadratic form is evaluated as ``r^T a`` with
    ``a = S^{-1} r``, ``S = R R^T + D``, refined once). Its gradient is written
    out::

        d/dr = -a,    d/dR = a a^T R - D^{-1} R C^{-1},
        d/dD_i = (a_i^2 - (S^{-1})_ii) / 2,
        (S^{-1})_ii = (1 - (R C^{-1} R^T)_ii / D_i) / D_i

    so that a step costs two ``n x m x m`` products, one forward and one backward
    (autograd through the forward took three; ``linear_operator``'s generic
    operator about ten).

    Args:
        residuals: ``batch x n`` observations minus the mean.
        root: ``batch x n x m`` low-rank root ``R``.
        diagonal: ``batch x n`` positive diagonal ``D``.

    Returns:
        The ``batch`` log densities.
    """
    batch = torch.broadcast_shapes(
        residuals.shape[:-1], root.shape[:-2], diagonal.shape[:-1]
    )
    n, m = root.shape[-2:]
    return _WoodburyLogDensity.apply(
        residuals.expand(*batch, n),
        root.expand(*batch, n, m),
        diagonal.expand(*batch, n),
    )


class _WoodburyLogDensity(torch.autograd.Function):
    r"""The forward and the written-out gradient of :func:`woodbury_log_density`."""

    @staticmethod
    def forward(ctx, residuals: Tensor, root: Tensor, diagonal: Tensor) -> Tensor:
        scaled = root / diagonal.unsqueeze(-1)
        eye = torch.eye(root.shape[-1], dtype=root.dtype, device=root.device)
        C = psd_safe_cholesky(eye + root.transpose(-1, -2) @ scaled)

        def solve(rhs: Tensor) -> Tensor:  # S^{-1} rhs = D^{-1} (rhs - R C^{-1} b)
            b = (scaled.transpose(-1, -2) @ rhs.unsqueeze(-1)).squeeze(-1)
            v = torch.cholesky_solve(b.unsqueeze(-1), C).squeeze(-1)
            return (rhs - (root @ v.unsqueeze(-1)).squeeze(-1)) / diagonal

        # a = S^{-1} r with one step of iterative refinement: r^T S^{-1} r is a
        # small difference of large terms where the prior explains the data well,
        # and its rounding noise (1e-8 nats on ~400) stalled L-BFGS line searches
        a = solve(residuals)
        Sa = (root @ (root.transpose(-1, -2) @ a.unsqueeze(-1))).squeeze(-1)
        a = a + solve(residuals - Sa - diagonal * a)
        quad = (residuals * a).sum(-1)
        logdet = 2 * torch.diagonal(C, dim1=-2, dim2=-1).log().sum(-1)
        logdet = logdet + diagonal.log().sum(-1)
        ctx.save_for_backward(root, diagonal, C, a)
        return -0.5 * (quad + logdet + residuals.shape[-1] * math.log(2 * math.pi))

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:
        root, diagonal, C, a = ctx.saved_tensors
        # V = L^{-1} R^T (C = L L^T): (R C^{-1} R^T)_ii = |V_i|^2, and R C^{-1} = V^T
        # L^{-1}; a triangular solve is half the work of R @ C^{-1}
        V = torch.linalg.solve_triangular(C, root.transpose(-1, -2), upper=False)
        g = grad.unsqueeze(-1)
        d_root = None
        if ctx.needs_input_grad[1]:  # a frozen kernel's root needs none
            W = torch.linalg.solve_triangular(C.transpose(-1, -2), V, upper=True)
            d_root = a.unsqueeze(-1) * (a.unsqueeze(-2) @ root)
            d_root = (
                d_root - W.transpose(-1, -2) / diagonal.unsqueeze(-1)
            ) * g.unsqueeze(-1)
        inverse_diagonal = (1 - V.pow(2).sum(-2) / diagonal) / diagonal
        d_diagonal = 0.5 * (a.pow(2) - inverse_diagonal) * g
        return -a * g, d_root, d_diagonal


def fitc_covariance(
    root: Tensor, prior_diagonal: Tensor, row_scale: Tensor | None = None
) -> LowRankRootAddedDiagLinearOperator:
    r"""``S (R R^T + diag(k(x, x) - rowsum(R^2))) S``: the FITC prior covariance of
    the points ``a_i f(x_i)`` (``S = diag(row_scale)``; ``S = I`` by default).

    With a row scale, the low-rank part keeps the unscaled root and the scale as
    ``row_scaled_root``, which :class:`FITCMultivariateNormal` uses: the scale then
    enters the density through the residuals and the diagonal only, and a frozen
    kernel's root needs no gradient.

    Args:
        root: ``batch x n x m`` Nystrom root.
        prior_diagonal: ``batch x n`` exact prior variances of ``f``.
        row_scale: Optional ``batch x n`` scales ``a_i``.

    Returns:
        The covariance as a low-rank-plus-diagonal operator (Woodbury solves).
    """
    diagonal = _fitc_diagonal(root, prior_diagonal)
    if row_scale is None:
        return LowRankRootAddedDiagLinearOperator(
            LowRankRootLinearOperator(root), DiagLinearOperator(diagonal)
        )
    low_rank = LowRankRootLinearOperator(root * row_scale.unsqueeze(-1))
    low_rank.row_scaled_root = (root, row_scale)
    return LowRankRootAddedDiagLinearOperator(
        low_rank, DiagLinearOperator(diagonal * row_scale.pow(2))
    )


def _fitc_diagonal(root: Tensor, prior_diagonal: Tensor) -> Tensor:
    r"""``diag(K - R R^T)``: the prior variance the Nystrom root misses."""
    return (prior_diagonal - root.pow(2).sum(-1)).clamp_min(0.0)


def fitc_predictive_weights(
    root: Tensor, prior_diagonal: Tensor, noise: Tensor, residuals: Tensor, L: Tensor
) -> tuple[Tensor, Tensor]:
    r"""The weights of the FITC predictive mean and covariance (see the module).

    Args:
        root: ``batch x n x m`` Nystrom root ``R`` of the training points.
        prior_diagonal: ``batch x n`` exact prior variances of the training points.
        noise: ``batch x n`` noise variances; ``Lambda`` is the FITC diagonal plus
            the noise.
        residuals: ``batch x n`` ``y - m`` at the training points.
        L: ``batch x m x m`` Cholesky factor of ``K_ZZ``.

    Returns:
        ``(mean_weights, covariance_weights)``: ``batch x m`` and ``batch x m x m``,
        so that ``mean(x) = m(x) + k(x, Z) mean_weights`` and
        ``cov(x, x') = k(x, x') - k(x, Z) covariance_weights k(Z, x')``.
    """
    diagonal = _fitc_diagonal(root, prior_diagonal) + noise
    scaled = root / diagonal.unsqueeze(-1)
    G = root.transpose(-1, -2) @ scaled
    eye = torch.eye(G.shape[-1], dtype=G.dtype, device=G.device)
    C = torch.linalg.cholesky(eye + G)
    b = (scaled.transpose(-1, -2) @ residuals.unsqueeze(-1)).squeeze(-1)
    w = torch.cholesky_solve(b.unsqueeze(-1), C)  # (I + G)^{-1} b
    A = torch.cholesky_solve(G, C)  # (I + G)^{-1} G (symmetric)
    A = 0.5 * (A + A.transpose(-1, -2))
    mean_weights = torch.linalg.solve_triangular(L.transpose(-1, -2), w, upper=True)
    left = torch.linalg.solve_triangular(L.transpose(-1, -2), A, upper=True)
    covariance_weights = torch.linalg.solve_triangular(
        L.transpose(-1, -2), left.transpose(-1, -2), upper=True
    )
    return mean_weights.squeeze(-1), covariance_weights
