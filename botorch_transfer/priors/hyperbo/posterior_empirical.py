r"""The empirical prior for meta-tasks observed at their own inputs: HyperBO's
estimate of the task distribution (Wang et al., eq. 4), taken from the meta-tasks'
GP posteriors on a shared set of index points (one step of EM for a hierarchical GP).

With no input shared by all meta-tasks, eq. 4 has no columns to average. Here

- a base GP ``GP(c, k) + s^2`` (constant mean, ARD Matern-5/2 with an outputscale,
  noise; the empirical prior's base kernel) is fitted to all meta-tasks at once by
  the task-summed marginal likelihood of their own observations (L-BFGS on one
  padded batch: one batched Cholesky per step, a few dozen parameters);
- index points ``V`` are drawn from the pooled inputs (where the meta-tasks were
  observed), and every meta-task's posterior under the base GP is taken at ``V``
  in one batched solve: means ``m_j`` and covariances ``C_j`` (the E-step);
- the task distribution at ``V`` is estimated by the law of total covariance:
  ``mu_hat = mean_j m_j`` and ``Sigma_hat = cov_j(m_j) + mean_j C_j + s^2 I`` (the
  M-step, maximum likelihood; the posterior means alone are shrunk toward ``c``
  and would understate the spread between tasks). This is one step of EM for the
  hierarchical model started at the base GP; further steps are available
  (``em_iter``) but are not the default (:func:`fit_posterior_empirical_prior`);
- the prior is the empirical prior's hierarchical GP on these statistics
  (:class:`~botorch_transfer.priors.hyperbo.prior.EmpiricalStructure`), with the
  shrinkage ``lam`` of ``Sigma_hat`` toward ``K + s^2 I`` chosen by the
  leave-one-task-out log likelihood of each meta-task's *own observations* under the
  prior built from the other tasks: the held-out data calibrate it.

Where the meta-data are too thin to estimate the spread between tasks (fewer than
three tasks, or as ``pretrain_prior`` decides), the covariance is the base kernel's
(``lam = 1``; the mean still follows the tasks'), its variance at least the pooled
outcomes' (:func:`~botorch_transfer.priors.hyperbo.empirical.floor_prior_variance`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from botorch_transfer.data import TaskData
from botorch_transfer.priors.hyperbo.empirical import (
    MIN_EMPIRICAL_NOISE,
    SHRINKAGE_GRID,
    floor_prior_variance,
)
from botorch_transfer.priors.hyperbo.lbfgs import minimize_keeping_best
from botorch_transfer.priors.hyperbo.prior import PretrainedPrior

#: Most index points ``V`` of the prior (fewer when there are fewer distinct inputs).
NUM_INDEX_POINTS = 128
#: Most points per task in the base GP's fit and in the leave-one-task-out scores (a
#: random subset of larger tasks: the cost is cubic in it, per step).
MAX_FIT_POINTS = 64
#: Most points per task in the EM for the statistics at ``V`` (a random subset).
MAX_POSTERIOR_POINTS = 200


class _Padded:
    r"""Meta-tasks in standardized units, padded to one batch.

    Each task's rows are randomly permuted before padding, so the first ``n`` columns
    hold a random subset of every task's points (``mask`` marks the real ones).
    """

    def __init__(
        self,
        tasks: Sequence[TaskData],
        prior: PretrainedPrior,
        max_points: int,
        generator: torch.Generator,
    ) -> None:
        structure = prior.empirical
        offset, scale = prior.mean_module.offset, prior.mean_module.scale
        ref = prior.raw_noise
        sizes = [min(t.n, max_points) for t in tasks]
        N, n, d = len(tasks), max(sizes), prior.dim
        self.Z = ref.new_zeros(N, n, d)
        self.y = ref.new_zeros(N, n)
        self.var = ref.new_zeros(N, n)
        self.mask = torch.zeros(N, n, dtype=torch.bool, device=ref.device)
        for j, (t, size) in enumerate(zip(tasks, sizes)):
            rows = torch.randperm(t.n, generator=generator)[:size].to(ref.device)
            X = t.X.to(ref)[rows]
            self.Z[j, :size] = structure.unit(X)
            self.y[j, :size] = (t.Y.to(ref)[rows, 0] - offset) / scale
            if t.Yvar is not None:
                self.var[j, :size] = t.Yvar.to(ref)[rows, 0] / scale.pow(2)
            self.mask[j, :size] = True
        self.sizes = torch.tensor(sizes, dtype=ref.dtype, device=ref.device)

    def head(self, n: int) -> _Padded:
        r"""The first ``n`` columns (a random subset of at most ``n`` points per
        task)."""
        out = _Padded.__new__(_Padded)
        out.Z, out.y, out.var = self.Z[:, :n], self.y[:, :n], self.var[:, :n]
        out.mask = self.mask[:, :n]
        out.sizes = out.mask.sum(-1).to(self.y)
        return out

    def noisy_covariance(self, K: Tensor, noise: Tensor) -> Tensor:
        r"""``K + diag(noise + Yvar)`` on the real points, the identity on padding
        (so padding adds nothing to a log likelihood with zero residuals)."""
        m = self.mask.to(K)
        pair = m.unsqueeze(-1) * m.unsqueeze(-2)
        if pair.dim() < K.dim():
            pair = pair.expand_as(K)
        diagonal = torch.where(self.mask, noise + self.var, torch.ones_like(self.var))
        return K * pair + torch.diag_embed(diagonal.expand(*K.shape[:-1]))


class _GaussianNLL(torch.autograd.Function):
    r"""``0.5 r^T K^{-1} r + 0.5 log det K`` per batch element, with the closed-form
    gradients ``0.5 (K^{-1} - alpha alpha^T)`` (``alpha = K^{-1} r``) and ``alpha``:
    one batched inverse from the Cholesky factor instead of differentiating through
    the factor and the triangular solves (several times slower for a batch of
    tasks)."""

    @staticmethod
    def forward(ctx: Any, K: Tensor, r: Tensor) -> Tensor:
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(r.unsqueeze(-1), L)
        ctx.save_for_backward(L, alpha)
        logdet = torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        return 0.5 * (r.unsqueeze(-1) * alpha).sum((-2, -1)) + logdet

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor]:
        L, alpha = ctx.saved_tensors
        grad = grad.reshape(*grad.shape, 1, 1)
        # K^{-1} = L^{-T} L^{-1}: a batched triangular solve (torch.cholesky_inverse
        # loops over the batch, several times slower)
        eye = torch.eye(L.shape[-1], dtype=L.dtype, device=L.device)
        L_inv = torch.linalg.solve_triangular(L, eye.expand_as(L), upper=False)
        K_inv = L_inv.transpose(-1, -2) @ L_inv
        dK = 0.5 * grad * (K_inv - alpha @ alpha.transpose(-1, -2))
        return dK, (grad * alpha).squeeze(-1)


def _padded_nll(y: Tensor, mean: Tensor, cov: Tensor, mask: Tensor) -> Tensor:
    r"""Negative Gaussian log likelihood of each padded task's real points (padding:
    zero residual, unit variance, no contribution)."""
    r = (y - mean) * mask.to(y)
    n = mask.sum(-1).to(y)
    return _GaussianNLL.apply(cov, r) + 0.5 * n * math.log(2 * math.pi)


def matern52(Z1: Tensor, Z2: Tensor, kernel: torch.nn.Module) -> Tensor:
    r"""The base kernel (``ScaleKernel(MaternKernel(nu=2.5))``) at unit-cube inputs,
    by ``torch.cdist`` on the scaled inputs: the same values as GPyTorch's, several
    times cheaper to differentiate for a batch of tasks."""
    lengthscale = kernel.base_kernel.lengthscale
    r = torch.cdist(
        Z1 / lengthscale, Z2 / lengthscale, compute_mode="donot_use_mm_for_euclid_dist"
    )
    s = math.sqrt(5) * r
    outputscale = kernel.outputscale.reshape(*kernel.outputscale.shape, 1, 1)
    return outputscale * (1 + s + s.pow(2) / 3) * torch.exp(-s)


def choose_index_points(
    tasks: Sequence[TaskData],
    num_index_points: int = NUM_INDEX_POINTS,
    seed: int = 0,
) -> Tensor:
    r"""Index points of the prior: a random subset of the meta-tasks' distinct pooled
    inputs (the prior is informed where the meta-tasks were observed).

    Args:
        tasks: The meta-tasks.
        num_index_points: Most index points.
        seed: Seed of the subset.

    Returns:
        ``M x d`` inputs, ``M = min(num_index_points, distinct inputs)``.
    """
    pooled = torch.unique(torch.cat([t.X.detach() for t in tasks]), dim=0)
    gen = torch.Generator().manual_seed(seed)
    pick = torch.randperm(pooled.shape[0], generator=gen)[:num_index_points]
    return pooled[pick.to(pooled.device)]


def fit_posterior_empirical_prior(
    prior: PretrainedPrior,
    tasks: Sequence[TaskData],
    index_points: Tensor,
    seed: int = 0,
    max_iter: int = 100,
    em_iter: int = 1,
    estimate_spread: bool = True,
) -> list[dict[str, float]]:
    r"""Set an empirical prior's base kernel, noise and statistics from meta-tasks at
    their own inputs (module docstring).

    Args:
        prior: A :class:`PretrainedPrior` built with ``mean="empirical"``,
            ``kernel="empirical"`` and ``num_index_points = M``; its input bounds and
            outcome offset/scale define the standardized units the fit works in.
        tasks: The meta-tasks (any inputs, at least one point each).
        index_points: ``M x d`` index points (:func:`choose_index_points`).
        seed: Seed of the subsets of large tasks.
        max_iter: L-BFGS iterations of the base GP's fit.
        em_iter: Most EM iterations for the statistics at the index points (1: the
            tasks' posteriors under the base GP; more raise the meta-tasks' own
            likelihood, but lowered the left-out tasks' on 7-d meta-data: ``S`` has
            ``M (M + 1) / 2`` entries).
        estimate_spread: Whether the meta-data can estimate the spread between tasks
            (``False`` for thin meta-data: the covariance is then the base kernel's,
            ``lam = 1``, as with fewer than three tasks).

    Returns:
        The selection's history: ``{"shrinkage", "loo_nll"}`` per grid value (the mean
        leave-one-task-out negative log likelihood per point of the left-out tasks'
        observations; with at least three tasks), then ``{"shrinkage", "base_nll"}``.
    """
    structure = prior.empirical
    gen = torch.Generator().manual_seed(seed)
    data = _Padded(tasks, prior, MAX_POSTERIOR_POINTS, gen)
    fit = data.head(MAX_FIT_POINTS)
    N = len(tasks)
    jitter = 1e-8 if data.y.dtype == torch.float64 else 1e-5
    # --- the base GP, shared by all tasks, on their own observations --------------
    kernel = structure.base_kernel
    y_real = fit.y[fit.mask]
    constant = torch.nn.Parameter(y_real.mean().detach().clone())
    kernel.base_kernel.lengthscale = 0.5
    counts = fit.sizes.clamp_min(2)
    task_means = (fit.y * fit.mask).sum(-1) / fit.sizes
    within_var = ((fit.y - task_means.unsqueeze(-1)) * fit.mask).pow(2).sum(-1)
    within_var = within_var / (counts - 1)
    kernel.outputscale = within_var.mean().clamp_min(0.1).detach()
    prior.noise_relative = torch.tensor(0.1)
    params = [constant, prior.raw_noise, *kernel.parameters()]
    for p in params:
        p.requires_grad_(True)
    total = fit.sizes.sum()

    def base_nll() -> Tensor:
        K = matern52(fit.Z, fit.Z, kernel)
        cov = fit.noisy_covariance(K, prior.noise_relative + jitter)
        return _padded_nll(fit.y, constant, cov, fit.mask).sum() / total

    minimize_keeping_best(base_nll, params, max_iter)
    for p in params:
        p.requires_grad_(False)
    prior.raw_noise.requires_grad_(True)  # the prior's parameters stay trainable
    kernel.requires_grad_(True)

    history: list[dict[str, float]] = []
    with torch.no_grad():
        c = constant.detach()
        prior.noise_relative = prior.noise_relative.clamp_min(MIN_EMPIRICAL_NOISE)
        noise = prior.noise_relative
        estimate_spread = estimate_spread and N >= 3
        if not estimate_spread:  # the base kernel's covariance: never below the data
            floor_prior_variance(prior)
        V = structure.unit(index_points.to(data.y))
        M = V.shape[0]
        K_V = matern52(V, V, kernel)
        index_noise = (noise + jitter).expand(M).clone()
        L_V = torch.linalg.cholesky(K_V + torch.diag_embed(index_noise))
        # --- EM for the task distribution of z = f(V) + noise, from the base GP ---
        means, covs, mean_hat, cov_hat = _expectation_maximization(
            data,
            V,
            L_V,
            kernel,
            c,
            noise + jitter,
            em_iter if estimate_spread else 1,
            history,
        )
        # --- shrinkage by the left-out tasks' own observations (>= 3 tasks) ---------
        if estimate_spread:
            lam = _select_shrinkage(
                fit, V, L_V, kernel, c, means, covs, noise + jitter, history
            )
        else:  # one task left out of two leaves no spread between tasks to estimate
            lam = 1.0
        structure.index_points.copy_(V)
        structure.constant.copy_(c)
        structure.index_mean.copy_(mean_hat)
        structure.index_covariance.copy_(cov_hat)
        structure.index_noise.copy_(index_noise)
        structure.shrinkage.fill_(lam)
        for buffer, value in zip(
            (structure.index_cholesky, structure.alpha, structure.correction),
            structure.derive(),
        ):
            buffer.copy_(value)
        history.append({"shrinkage": lam, "base_nll": float(base_nll())})
    return history


def _expectation_maximization(
    data: _Padded,
    V: Tensor,
    L_V: Tensor,
    kernel: torch.nn.Module,
    c: Tensor,
    noise: Tensor,
    max_iter: int,
    history: list[dict[str, float]],
    tol: float = 1e-4,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""EM for the distribution ``N(mu, S)`` of ``z = f(V) + e`` (``e`` of variance
    ``noise``), with ``f`` given ``z`` the base GP's conditional, from every task's
    own observations.

    Task ``j`` observes ``y_j = c + H_j (z_j - c) + r_j``, ``H_j = k(X_j, V) A^{-1}``
    (``A = K_V + noise I = L_V L_V^T``), ``r_j ~ N(0, R_j)``,
    ``R_j = k(X_j, X_j) - H_j k(V, X_j) + noise I``. E-step: the posterior of each
    ``z_j`` (``z_hat_j``, ``P_j``) by the linear-Gaussian formulas, all tasks in one
    batch; M-step: ``mu = mean_j z_hat_j``, ``S = cov_j(z_hat_j) + mean_j P_j``
    (maximum likelihood). It starts from the base GP (``mu = c``, ``S = A``), whose
    first E-step gives each task's plain GP posterior at ``V``, and stops when the
    marginal log likelihood per point gains less than ``tol``.

    Returns:
        The last E-step's ``z_hat`` (``N x M``) and ``P`` (``N x M x M``), and the
        M-step's ``mu`` and ``S``.
    """
    N, M = data.y.shape[0], V.shape[0]
    m = data.mask.to(V)
    K_VX = matern52(V, data.Z, kernel) * m.unsqueeze(-2)  # N x M x n
    W = torch.linalg.solve_triangular(L_V, K_VX, upper=False)
    H = torch.cholesky_solve(K_VX, L_V).transpose(-1, -2)  # N x n x M
    R = data.noisy_covariance(
        matern52(data.Z, data.Z, kernel) - W.transpose(-1, -2) @ W, noise
    )
    total = data.sizes.sum()
    mu = c.expand(M).clone()
    S = L_V @ L_V.transpose(-1, -2)
    previous = -math.inf
    for step in range(1, max_iter + 1):
        HS = H @ S  # N x n x M
        L = torch.linalg.cholesky(HS @ H.transpose(-1, -2) + R)
        resid = (data.y - c - H @ (mu - c)) * m
        u = torch.linalg.solve_triangular(L, resid.unsqueeze(-1), upper=False)
        G = torch.linalg.solve_triangular(L, HS, upper=False)
        z_hat = mu + (G.transpose(-1, -2) @ u).squeeze(-1)
        P = S - G.transpose(-1, -2) @ G
        loglik = (
            -(
                0.5 * u.pow(2).sum()
                + torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum()
                + 0.5 * total * math.log(2 * math.pi)
            )
            / total
        )
        history.append({"em_step": step, "loglik": float(loglik)})
        mu = z_hat.mean(0)
        centered = z_hat - mu
        S = centered.T @ centered / N + P.mean(0)
        S = (S + S.T) / 2
        if float(loglik) - previous < tol:
            break
        previous = float(loglik)
    return z_hat, P, mu, S


def _select_shrinkage(
    fit: _Padded,
    V: Tensor,
    L_V: Tensor,
    kernel: torch.nn.Module,
    c: Tensor,
    means: Tensor,
    covs: Tensor,
    noise: Tensor,
    history: list[dict[str, float]],
) -> float:
    r"""The shrinkage of the grid whose prior, built from the other tasks (their
    posteriors at ``V``: ``means``, ``covs``), gives each task's own observations
    the highest likelihood (mean per point over tasks)."""
    N, M = means.shape
    others = (~torch.eye(N, dtype=torch.bool, device=V.device)).to(V)
    mean_loo = (others @ means) / (N - 1)  # N x M
    centered = (means.unsqueeze(0) - mean_loo.unsqueeze(1)) * others.unsqueeze(-1)
    spread = centered.transpose(-1, -2) @ centered / (N - 1)
    cov_loo = spread + (covs.sum(0) - covs) / (N - 1)
    # in the coordinates whitened by L_V (as EmpiricalStructure evaluates the prior)
    inner = torch.linalg.solve_triangular(L_V, cov_loo, upper=False)
    inner = torch.linalg.solve_triangular(L_V, inner.transpose(-1, -2), upper=False)
    inner = (inner + inner.transpose(-1, -2)) / 2 - torch.eye(M).to(V)
    alpha = torch.linalg.solve_triangular(
        L_V, (mean_loo - c).unsqueeze(-1), upper=False
    )  # N x M x 1
    K_VX = matern52(V, fit.Z, kernel) * fit.mask.to(V).unsqueeze(-2)  # N x M x n
    q = torch.linalg.solve_triangular(L_V, K_VX, upper=False)
    mean = c + (q.transpose(-1, -2) @ alpha).squeeze(-1)  # N x n
    spread_X = q.transpose(-1, -2) @ inner @ q  # N x n x n
    K_X = matern52(fit.Z, fit.Z, kernel)
    scores = []
    for lam in SHRINKAGE_GRID:
        cov = fit.noisy_covariance(K_X + (1 - lam) * spread_X, noise)
        try:
            nll = _padded_nll(fit.y, mean, cov, fit.mask) / fit.sizes
            score = float(nll.mean())
        except torch.linalg.LinAlgError:  # an indefinite shrunk covariance
            score = math.inf
        scores.append(score)
        history.append({"shrinkage": lam, "loo_nll": score})
    best = min(range(len(scores)), key=lambda i: (scores[i], -i))
    return SHRINKAGE_GRID[best]
