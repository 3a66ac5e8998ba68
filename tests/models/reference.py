r"""Plain float64 linear algebra written straight from the DeltaBO paper (eqs. 5-7).

Nothing here uses GPyTorch or the package: kernels are written out and every
posterior is a dense solve, so the tests compare the models against an
independent derivation.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def rbf(X1: Tensor, X2: Tensor, lengthscale: Tensor, outputscale: float) -> Tensor:
    r"""``s * exp(-||x - x'||^2 / (2 l^2))`` with per-dimension lengthscales."""
    diff = (X1.unsqueeze(-2) - X2.unsqueeze(-3)) / lengthscale
    return outputscale * torch.exp(-0.5 * diff.pow(2).sum(-1))


def matern52(X1: Tensor, X2: Tensor, lengthscale: Tensor, outputscale: float) -> Tensor:
    r"""``s * (1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r)``, ``r = ||(x - x') / l||``."""
    diff = (X1.unsqueeze(-2) - X2.unsqueeze(-3)) / lengthscale
    r = diff.pow(2).sum(-1).clamp_min(0).sqrt()
    return (
        outputscale
        * (1 + math.sqrt(5) * r + 5.0 / 3.0 * r**2)
        * torch.exp(-math.sqrt(5) * r)
    )


def gp_posterior(kernel, X: Tensor, y: Tensor, noise: Tensor, prior_mean=None):
    r"""Exact GP posterior (mean function, covariance function) of eq. 5 / eq. 6.

    ``kernel(A, B)`` is the prior covariance, ``noise`` the per-point noise variances
    (a diagonal, as in the paper), ``prior_mean(A)`` an optional prior mean.
    """
    m = (
        prior_mean
        if prior_mean is not None
        else (lambda A: torch.zeros(A.shape[:-1], dtype=A.dtype))
    )
    K = kernel(X, X) + torch.diag(noise)
    alpha = torch.linalg.solve(K, y - m(X))

    def mean(A: Tensor) -> Tensor:
        return m(A) + kernel(A, X) @ alpha

    def cov(A: Tensor, B: Tensor) -> Tensor:
        return kernel(A, B) - kernel(A, X) @ torch.linalg.solve(K, kernel(X, B))

    return mean, cov


def deltabo_posterior(
    source_mean,
    source_cov,
    delta_kernel,
    X: Tensor,
    y: Tensor,
    sigma2: Tensor,
    mode: str,
):
    r"""DeltaBO posterior of ``f`` (mean and covariance functions).

    ``"diagonal"``: residuals ``y - mu_g(X)`` observe ``delta`` with noise
    ``sigma^2 + sigma^2_g(x_i)`` (Algorithm 1 line 5); ``f = mu_g + mu_delta`` with
    covariance ``Sigma_g + Sigma_delta`` (eq. 7). ``"full"``: exact conditional with
    prior mean ``mu_g`` and kernel ``Sigma_g + k_delta`` and noise ``sigma^2``.
    """
    if mode == "diagonal":
        noise = sigma2 + torch.diagonal(source_cov(X, X))
        delta_mean, delta_cov = gp_posterior(delta_kernel, X, y - source_mean(X), noise)
        return (
            lambda A: source_mean(A) + delta_mean(A),
            lambda A, B: source_cov(A, B) + delta_cov(A, B),
        )
    return gp_posterior(
        lambda A, B: source_cov(A, B) + delta_kernel(A, B),
        X,
        y,
        sigma2,
        prior_mean=source_mean,
    )


def explicit_basis_posterior(
    kernel, basis, prior_coef: Tensor, prior_cov: Tensor, X: Tensor, y: Tensor, noise
):
    r"""Posterior of ``f(x) = h(x)^T b + e(x)``, ``e ~ GP(0, kernel)``, with Gaussian
    coefficients ``b ~ N(prior_coef, prior_cov)`` integrated out (Rasmussen &
    Williams, Sec. 2.7, eqs. 2.41-2.42; ``basis(A)`` is ``H``, ``p x n``).

    ``beta = (B^-1 + H K^-1 H^T)^-1 (H K^-1 y + B^-1 b)``; mean ``H_*^T beta + K_*^T
    K^-1 (y - H^T beta)``; covariance ``K_** - K_*^T K^-1 K_* + R^T (B^-1 + H K^-1
    H^T)^-1 R`` with ``R = H_* - H K^-1 K_*``.
    """
    K = kernel(X, X) + torch.diag(noise)
    H = basis(X)
    B_inv = torch.linalg.inv(prior_cov)
    A = B_inv + H @ torch.linalg.solve(K, H.T)
    beta = torch.linalg.solve(A, H @ torch.linalg.solve(K, y) + B_inv @ prior_coef)

    def mean(Z: Tensor) -> Tensor:
        return basis(Z).transpose(-1, -2) @ beta + kernel(Z, X) @ torch.linalg.solve(
            K, y - H.T @ beta
        )

    def cov(Z1: Tensor, Z2: Tensor) -> Tensor:
        def R(Z):
            return basis(Z) - H @ torch.linalg.solve(K, kernel(X, Z))

        gp = kernel(Z1, Z2) - kernel(Z1, X) @ torch.linalg.solve(K, kernel(X, Z2))
        return gp + R(Z1).transpose(-1, -2) @ torch.linalg.solve(A, R(Z2))

    return mean, cov


# GPyTorch computes distances by expanding ||a - b||^2 = ||a||^2 + ||b||^2 - 2 a.b,
# which loses ~1e-8 relative precision for nearby points even in float64. The
# reference tests check the model's algebra to 1e-8, so they use these kernels,
# which differ from GPyTorch's only in computing distances from differences.
from gpytorch.kernels import MaternKernel, RBFKernel  # noqa: E402


class _DirectDistance:
    def covar_dist(
        self, x1, x2, diag=False, last_dim_is_batch=False, square_dist=False, **params
    ):
        diff = x1 - x2 if diag else x1.unsqueeze(-2) - x2.unsqueeze(-3)
        sq = diff.pow(2).sum(-1)
        return sq if square_dist else sq.clamp_min(0).sqrt()


class DirectRBFKernel(_DirectDistance, RBFKernel):
    r"""``RBFKernel`` with distances computed from differences (exact in float64)."""


class DirectMaternKernel(_DirectDistance, MaternKernel):
    r"""``MaternKernel`` with distances computed from differences (exact in float64)."""


def env_gp_posterior(
    kernel,
    X_s: Tensor,
    y_s: Tensor,
    sigma_s2: Tensor,
    X_a: Tensor,
    y_a: Tensor,
    sigma_a2: Tensor,
    scale: float = 1.0,
    offset: float = 0.0,
):
    r"""Env-GP (Shilton et al. eq. 5): one GP on ``[X_S; X_A]`` with noise
    ``diag(sigma_s^2 I, sigma_a^2 I)`` (zero prior mean). With ``scale``/``offset``
    the source observes ``scale * f + offset``: the source rows of the prior
    covariance are multiplied by ``scale`` and the source prior mean is ``offset``."""
    X = torch.cat([X_s, X_a])
    a = torch.cat(
        [
            torch.full((len(X_s),), scale, dtype=X.dtype),
            torch.ones(len(X_a), dtype=X.dtype),
        ]
    )
    K = kernel(X, X) * a[:, None] * a[None, :] + torch.diag(
        torch.cat([sigma_s2, sigma_a2])
    )
    residual = torch.cat([y_s - offset, y_a])

    def mean(A: Tensor) -> Tensor:
        return (kernel(A, X) * a) @ torch.linalg.solve(K, residual)

    def cov(A: Tensor, B: Tensor) -> Tensor:
        k_BX = kernel(B, X) * a
        return kernel(A, B) - (kernel(A, X) * a) @ torch.linalg.solve(K, k_BX.mT)

    return mean, cov


def diff_gp_posterior(
    kernel,
    X_s: Tensor,
    y_s: Tensor,
    sigma_src2: Tensor,
    X_a: Tensor,
    y_a: Tensor,
    sigma_a2: Tensor,
):
    r"""Diff-GP (Shilton et al. Sec. 3.2, eq. 6), zero prior mean, one kernel for all.

    Source posterior ``mu_S, sigma^2_S``; difference GP on ``y_a - mu_S(X_a)`` with
    noise ``sigma_a^2 + sigma^2_S(x)``; corrected source ``y_s + mu_D(X_s)`` with noise
    ``sigma'^2 + sigma^2_D(X_s)``; final GP on ``[X_S; X_A]`` with R of eq. 6.
    """
    mu_S, cov_S = gp_posterior(kernel, X_s, y_s, sigma_src2)
    if X_a.shape[0] == 0:
        y_cs, noise_cs = y_s, sigma_src2 + torch.diagonal(kernel(X_s, X_s))
    else:
        noise_D = sigma_a2 + torch.diagonal(cov_S(X_a, X_a))
        mu_D, cov_D = gp_posterior(kernel, X_a, y_a - mu_S(X_a), noise_D)
        y_cs = y_s + mu_D(X_s)
        noise_cs = sigma_src2 + torch.diagonal(cov_D(X_s, X_s))
    X = torch.cat([X_s, X_a])
    return gp_posterior(
        kernel, X, torch.cat([y_cs, y_a]), torch.cat([noise_cs, sigma_a2])
    )


def fitc_posterior(
    kernel, X: Tensor, y: Tensor, noise: Tensor, Z: Tensor, jitter: float = 0.0
):
    r"""The FITC posterior (Snelson & Ghahramani 2006) written densely: the training
    prior ``Q + diag(K - Q)`` with ``Q = K_XZ (K_ZZ + jitter)^{-1} K_ZX``, cross
    covariances ``Q_*X`` and the exact test prior ``k(x, x')``; zero prior mean.
    ``jitter`` is relative to the mean diagonal of ``K_ZZ``.

    Returns ``(mean(A), cov(A, B))`` as functions of test inputs.
    """
    K_ZZ = kernel(Z, Z)
    K_ZZ = K_ZZ + jitter * torch.diagonal(K_ZZ).mean() * torch.eye(len(Z)).to(K_ZZ)

    def nystrom(A, B):
        return kernel(A, Z) @ torch.linalg.solve(K_ZZ, kernel(Z, B))

    Q = nystrom(X, X)
    K_train = Q + torch.diag(torch.diagonal(kernel(X, X) - Q)) + torch.diag(noise)
    alpha = torch.linalg.solve(K_train, y)

    def mean(A):
        return nystrom(A, X) @ alpha

    def cov(A, B):
        return kernel(A, B) - nystrom(A, X) @ torch.linalg.solve(K_train, nystrom(X, B))

    return mean, cov
