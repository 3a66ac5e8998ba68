r"""The empirical prior: HyperBO's matching-input estimate (Wang et al., eq. 4) of
the meta-tasks' mean and covariance, shrunk toward a fitted kernel and interpolated
by it away from the observed inputs.

Where every meta-task observed the same inputs ``V`` (``M`` points, ``N`` tasks), the
columns of ``Y`` (``M x N``) are ``N`` draws of the unknown task distribution at
``V``: their sample mean ``mu_hat`` and covariance ``Sigma_hat`` estimate it (eq. 4).
``Sigma_hat`` has rank at most ``N - 1`` and says nothing off ``V``, so the prior here

- fits a base GP ``GP(c, k) + s^2`` (constant mean, ARD Matern-5/2 with an
  outputscale, noise) with hyperparameters shared by all meta-tasks, by the
  task-summed marginal likelihood (L-BFGS, a few dozen parameters at most);
- shrinks the covariance toward that kernel,
  ``S = (1 - lam) Sigma_hat + lam (K + s^2 I)``, with ``lam`` chosen by the
  leave-one-task-out log likelihood of each meta-task under the prior built from
  the others (a grid over ``[0, 1]``): the data decide how far the meta-tasks'
  covariance is trusted, and the left-out tasks calibrate it;
- is the hierarchical model ``f(V) ~ N(mu_hat, S)`` (as noisy values), ``f`` given
  ``f(V)`` the base GP's conditional: mean
  ``c + k(x, V) (K + s^2 I)^{-1} (mu_hat - c)`` and covariance
  ``k(x, x') + k(x, V) B k(V, x')`` with
  ``B = (K + s^2 I)^{-1} (S - K - s^2 I) (K + s^2 I)^{-1}``, computed in the
  coordinates whitened by the Cholesky factor of ``K + s^2 I`` (see
  :class:`~botorch_transfer.priors.hyperbo.prior.EmpiricalStructure`).
  Far from ``V`` it reverts to ``GP(c, k)``; with ``lam = 1`` its covariance is ``k``.

The statistics (``mu_hat``, ``Sigma_hat``, the noise at ``V`` and ``lam``) are kept
with the prior, so a fine-tuned ``PretrainedPriorGP`` re-derives the mean and
covariance from them with its re-fitted base kernel.

No network is trained, so it takes seconds (the NLL objective's Adam takes minutes).
The paper's ``N / (N - t)`` variance rescaling (its Sec. 6, Fig. 4) is not applied:
the cross-validated shrinkage plays that role here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from botorch_transfer.data import TaskData
from botorch_transfer.priors.hyperbo.lbfgs import minimize_keeping_best
from botorch_transfer.priors.hyperbo.objectives import (
    MatchingInputGroup,
    matching_input_groups,
)
from botorch_transfer.priors.hyperbo.prior import PretrainedPrior

#: Smallest noise variance of the empirical prior, relative to the outcome variance:
#: BoTorch's floor for an inferred noise level (noise-free meta-data would otherwise
#: give near-singular posteriors once the target repeats a point).
MIN_EMPIRICAL_NOISE = 1e-4
#: Shrinkage values tried by the leave-one-task-out selection.
SHRINKAGE_GRID = tuple(i / 20 for i in range(21))


def floor_prior_variance(prior: PretrainedPrior) -> None:
    r"""Raise the base kernel's outputscale so that the prior variance with noise is
    at least 1, the variance of the pooled outcomes in the prior's standardized units.

    For meta-data too thin to estimate the spread between tasks (the prior is then
    the base GP): a marginal likelihood fit to one or two tasks can explain their
    points with a small signal variance, and the prior would be narrower than the
    data it came from.
    """
    with torch.no_grad():
        kernel = prior.empirical.base_kernel
        floor = (1 - prior.noise_relative).clamp_min(MIN_EMPIRICAL_NOISE)
        kernel.outputscale = torch.maximum(kernel.outputscale, floor)


def shared_inputs(tasks: Sequence[TaskData]) -> MatchingInputGroup:
    r"""The inputs observed by every task, with each task's values there.

    Args:
        tasks: The meta-tasks (at least two).

    Returns:
        The matching-input group of all tasks (``X``: ``M x d``, ``Y``: ``M x N``).

    Raises:
        ValueError: If fewer than two inputs are shared by all tasks.
    """
    groups = [
        g
        for g in matching_input_groups(tasks, min_tasks=len(tasks))
        if len(g.task_indices) == len(tasks)
    ]
    if len(tasks) < 2 or not groups or groups[0].X.shape[0] < 2:
        raise ValueError(
            "objective='empirical' needs at least two tasks that all observed at "
            "least two common inputs (HyperBO's matching-input data, eq. 4); "
            f"{'none are' if not groups else 'fewer than two are'} shared by all "
            f"{len(tasks)} tasks. Use objective='nll', which takes any inputs."
        )
    return groups[0]


def gaussian_log_likelihood(y: Tensor, mean: Tensor, cov: Tensor) -> Tensor:
    r"""``log N(y | mean, cov)`` over the last dimension (batched), by Cholesky."""
    L = torch.linalg.cholesky(cov)
    z = torch.linalg.solve_triangular(L, (y - mean).unsqueeze(-1), upper=False)
    logdet = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    return -0.5 * (
        z.pow(2).sum((-2, -1)) + logdet + y.shape[-1] * math.log(2 * math.pi)
    )


def fit_empirical_prior(
    prior: PretrainedPrior,
    group: MatchingInputGroup,
    max_iter: int = 200,
    estimate_spread: bool = True,
) -> list[dict[str, float]]:
    r"""Set the empirical prior's base kernel, noise, mean and covariance from the
    meta-tasks' values on their shared inputs (module docstring).

    Args:
        prior: A :class:`PretrainedPrior` built with ``mean="empirical"``,
            ``kernel="empirical"`` and ``num_index_points = M``; its input bounds and
            outcome offset/scale define the standardized units the fit works in.
        group: The shared inputs and values, from :func:`shared_inputs`.
        max_iter: L-BFGS iterations of the base-kernel fit.
        estimate_spread: Whether the meta-data can estimate the spread between tasks
            (``False`` for thin meta-data: ``lam = 1``, as with two tasks, and the
            prior variance at least the pooled outcomes', see
            :func:`floor_prior_variance`).

    Returns:
        The selection's history: ``{"shrinkage", "loo_nll"}`` per grid value (the
        mean leave-one-task-out negative log likelihood per point), then
        ``{"shrinkage", "base_nll"}`` for the chosen value.
    """
    structure = prior.empirical
    dtype, device = prior.raw_noise.dtype, prior.raw_noise.device
    scale = prior.mean_module.scale
    V = structure.unit(group.X.to(dtype=dtype, device=device))
    Y = ((group.Y.to(V) - prior.mean_module.offset) / scale).transpose(0, 1)  # N x M
    Yvar = group.Yvar.to(V) / scale.pow(2)
    N, M = Y.shape
    eye = torch.eye(M, dtype=dtype, device=device)
    # --- the base GP, shared by all tasks (one Cholesky: the tasks share V) ---------
    constant = torch.nn.Parameter(Y.mean().detach().clone())
    kernel = structure.base_kernel
    kernel.base_kernel.lengthscale = 0.5
    kernel.outputscale = Y.var(dim=1).mean().clamp_min(1e-3).detach()
    prior.noise_relative = torch.tensor(0.1)
    params = [constant, prior.raw_noise, *kernel.parameters()]
    for p in params:
        p.requires_grad_(True)

    def base_nll() -> Tensor:
        K_noisy = kernel(V).to_dense() + (prior.noise_relative + Yvar) * eye
        return -gaussian_log_likelihood(Y, constant, K_noisy).sum() / (N * M)

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
        K = kernel(V).to_dense()
        jitter = 1e-8 if dtype == torch.float64 else 1e-5
        K_noisy = K + (noise + Yvar + jitter) * eye
        L = torch.linalg.cholesky(K_noisy)
        # the hierarchical GP at V: given f(V) ~ N(m, S), its mean is c + P (m - c)
        # and its covariance K + P (S - K_noisy) P^T, with P = K (K + s^2 I)^{-1}
        P = torch.cholesky_solve(K, L).transpose(-1, -2)
        # --- shrinkage by leave-one-task-out likelihood (needs >= 2 tasks left) ---
        if N >= 3 and estimate_spread:
            others = (~torch.eye(N, dtype=torch.bool, device=device)).float().to(Y)
            mean_loo = (others @ Y) / (N - 1)  # N x M
            centered = Y.unsqueeze(0) - mean_loo.unsqueeze(1)  # N(left out) x N x M
            centered = centered * others.unsqueeze(-1)
            cov_loo = centered.transpose(-1, -2) @ centered / (N - 2)
            mean = c + (mean_loo - c) @ P.transpose(-1, -2)
            # S - K_noisy = (1 - lam) (cov_loo - K_noisy): one product for all lam
            spread = P @ (cov_loo - K_noisy) @ P.transpose(-1, -2)
            scores = []
            for lam in SHRINKAGE_GRID:
                cov = K + (1 - lam) * spread + (noise + Yvar + jitter) * eye
                loo = -gaussian_log_likelihood(Y, mean, cov).mean() / M
                scores.append(float(loo))
                history.append({"shrinkage": lam, "loo_nll": scores[-1]})
            best = min(range(len(scores)), key=lambda i: (scores[i], -i))
            lam = SHRINKAGE_GRID[best]
        else:  # one task left out of two leaves no covariance to estimate
            lam = 1.0
            floor_prior_variance(prior)
        mean_hat = Y.mean(0)
        cov_hat = (Y - mean_hat).transpose(0, 1) @ (Y - mean_hat) / max(N - 1, 1)
        # the statistics are kept, the evaluation parts derived from them (in the
        # coordinates whitened by L: no (K + s^2 I)^{-2}), as a fine-tuned prior
        # re-derives them from its current kernel
        structure.index_points.copy_(V)
        structure.constant.copy_(c)
        structure.index_mean.copy_(mean_hat)
        structure.index_covariance.copy_(cov_hat)
        structure.index_noise.copy_(noise + Yvar + jitter)
        structure.shrinkage.fill_(lam)
        for buffer, value in zip(
            (structure.index_cholesky, structure.alpha, structure.correction),
            structure.derive(),
        ):
            buffer.copy_(value)
        history.append({"shrinkage": lam, "base_nll": float(base_nll())})
    return history
