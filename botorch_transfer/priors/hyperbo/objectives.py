r"""HyperBO's pre-training objectives (Wang et al., Sec. 5): NLL (eqs. 10, 13, 14)
and the empirical KL divergence EKL on matching-input task groups (eqs. 4-8).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from botorch_transfer.data import TaskData
from botorch_transfer.priors.hyperbo.prior import PretrainedPrior


@dataclass
class MatchingInputGroup:
    r"""Tasks observed on the same inputs (a "matching-input" dataset, Sec. 5.2.4).

    Attributes:
        X: ``M x d`` shared inputs.
        Y: ``M x N_q`` observations, one column per task (eq. 4's matrix ``Y``).
        Yvar: ``M`` mean known observation variance of the tasks at each input
            (zeros when the tasks have none); the model's covariance gets it on its
            diagonal, since the columns of ``Y`` carry that noise.
        task_indices: Indices (into the task list) of the ``N_q`` tasks.
    """

    X: Tensor
    Y: Tensor
    Yvar: Tensor
    task_indices: list[int]

    def empirical_gaussian(self) -> tuple[Tensor, Tensor]:
        r"""MLE mean and covariance of eq. 4: ``Y 1/N`` and
        ``(Y - mu 1^T)(Y - mu 1^T)^T / N``."""
        mu = self.Y.mean(dim=-1)
        centered = self.Y - mu.unsqueeze(-1)
        return mu, centered @ centered.transpose(-1, -2) / self.Y.shape[-1]


def matching_input_groups(
    tasks: Sequence[TaskData], min_tasks: int = 2
) -> list[MatchingInputGroup]:
    r"""Find the matching-input datasets of Sec. 5.2.4 among ``tasks``.

    Every distinct input (exact match of all coordinates) is labelled with the set
    of tasks that observed it; inputs with the same set of at least ``min_tasks``
    tasks form one group. Repeated observations of one input within a task are
    averaged (the estimator of eq. 4 takes one value per task and input).

    Args:
        tasks: The tasks.
        min_tasks: Smallest number of tasks a group must contain.

    Returns:
        The groups (possibly empty), largest first.

    Example:
        >>> X = torch.rand(10, 2)
        >>> groups = matching_input_groups(
        ...     [TaskData(X, torch.rand(10, 1)) for _ in range(3)]
        ... )
        >>> groups[0].Y.shape
        torch.Size([10, 3])
    """
    if len(tasks) == 0:
        return []
    X_all = torch.cat([t.X for t in tasks])
    task_of_row = torch.cat(
        [torch.full((t.n,), i, dtype=torch.long) for i, t in enumerate(tasks)]
    )
    unique_X, inverse = torch.unique(X_all, dim=0, return_inverse=True)
    inverse = inverse.cpu()
    Y_all = torch.cat([t.Y.reshape(-1) for t in tasks])
    Yvar_all = torch.cat(
        [
            t.Yvar.reshape(-1)
            if t.Yvar is not None
            else torch.zeros_like(t.Y.reshape(-1))
            for t in tasks
        ]
    )
    # (input, task) -> rows of that task at that input
    rows_of: dict[tuple[int, int], list[int]] = {}
    for row, (u, i) in enumerate(zip(inverse.tolist(), task_of_row.tolist())):
        rows_of.setdefault((u, i), []).append(row)
    tasks_of_input: dict[int, set[int]] = {}
    for u, i in rows_of:
        tasks_of_input.setdefault(u, set()).add(i)
    inputs_of_taskset: dict[tuple[int, ...], list[int]] = {}
    for u, ts in tasks_of_input.items():
        if len(ts) >= min_tasks:
            inputs_of_taskset.setdefault(tuple(sorted(ts)), []).append(u)
    groups = []
    for task_indices, inputs in inputs_of_taskset.items():
        inputs = sorted(inputs)
        Y = torch.stack(
            [
                torch.stack([Y_all[rows_of[(u, i)]].mean() for i in task_indices])
                for u in inputs
            ]
        )
        Yvar = torch.stack(
            [
                torch.stack(
                    [Yvar_all[rows_of[(u, i)]].mean() for i in task_indices]
                ).mean()
                for u in inputs
            ]
        )
        groups.append(MatchingInputGroup(unique_X[inputs], Y, Yvar, list(task_indices)))
    groups.sort(key=lambda g: (-g.Y.numel(), g.task_indices))
    return groups


class EKLGroup:
    r"""A matching-input group with its SVD projection precomputed (eq. 6).

    ``Sigma~ = V Lambda V^T`` keeps the eigenvalues above ``rank_tolerance`` times the
    largest; ``A = V Lambda^{1/2}`` and ``A^+ = Lambda^{-1/2} V^T`` map observations to
    the ``r``-dimensional support of the empirical Gaussian.
    """

    def __init__(
        self, group: MatchingInputGroup, rank_tolerance: float = 1e-10
    ) -> None:
        self.group = group
        mu_tilde, Sigma_tilde = group.empirical_gaussian()
        evals, evecs = torch.linalg.eigh(Sigma_tilde)
        keep = evals > rank_tolerance * evals.max().clamp_min(0)
        if not keep.any() or evals.max() <= 0:
            raise ValueError(
                f"The matching-input group of tasks {group.task_indices} has a zero "
                "empirical covariance (identical observations); "
                "it carries no EKL information."
            )
        self.rank = int(keep.sum())
        self.A_pinv = (evecs[:, keep] / evals[keep].sqrt()).transpose(-1, -2)
        self.mu_tilde = mu_tilde

    def kl(self, prior: PretrainedPrior) -> Tensor:
        r"""Eq. 6: ``KL(N(mu~, Sigma~) || N(mu, Sigma))`` on the support of
        ``N(mu~, Sigma~)``."""
        X = self.group.X
        mu = prior.mean(X)
        Sigma = prior.covariance(X, observation_noise=True) + torch.diag(
            self.group.Yvar
        )
        diff = self.A_pinv @ (mu - self.mu_tilde)
        Sigma_p = self.A_pinv @ Sigma @ self.A_pinv.transpose(-1, -2)
        L = torch.linalg.cholesky(Sigma_p)
        L_inv = torch.linalg.solve_triangular(
            L, torch.eye(self.rank, dtype=L.dtype, device=L.device), upper=False
        )
        trace = L_inv.pow(2).sum()
        quad = (L_inv @ diff).pow(2).sum()
        logdet = 2 * torch.log(torch.diagonal(L)).sum()
        return 0.5 * (trace + quad + logdet - self.rank)


def ekl_objective(
    prior: PretrainedPrior, groups: Sequence[MatchingInputGroup | EKLGroup]
) -> Tensor:
    r"""Eq. 8: the EKL (eq. 6) averaged over matching-input groups.

    Args:
        prior: The prior being trained.
        groups: Matching-input groups (from :func:`matching_input_groups`), or
            prepared :class:`EKLGroup` objects (the projection is then not recomputed).

    Returns:
        A scalar.
    """
    if len(groups) == 0:
        raise ValueError(
            "`groups` is empty: EKL needs at least one matching-input group."
        )
    prepared = [g if isinstance(g, EKLGroup) else EKLGroup(g) for g in groups]
    return torch.stack([g.kl(prior) for g in prepared]).mean()


def nll_objective(
    prior: PretrainedPrior,
    tasks: Sequence[TaskData],
    batch_size: int | None = None,
    generator: torch.Generator | None = None,
    jitter: float = 0.0,
) -> Tensor:
    r"""Eq. 13: the negative log marginal likelihood (eq. 14) averaged over tasks.

    With ``batch_size``, each task contributes the likelihood of ``batch_size``
    of its points drawn uniformly without replacement (all of them when it has
    fewer), as in the paper's Adam training. Tasks with equally many points are
    evaluated as one batch. A task's known ``Yvar`` is added to the diagonal on
    top of the prior's noise.

    Args:
        prior: The prior being trained.
        tasks: The tasks.
        batch_size: Points per task and step (``None``: all points).
        generator: Random generator for the minibatches.
        jitter: Diagonal jitter relative to the outcome variance.

    Returns:
        A scalar: ``-1/N sum_i log p(D_i | mu, k o sigma^2)``.
    """
    if len(tasks) == 0:
        raise ValueError("`tasks` is empty: the NLL needs at least one task.")
    buckets: dict[int, list[tuple[Tensor, Tensor, Tensor]]] = {}
    for t in tasks:
        X, Y = t.X, t.Y.reshape(-1)
        Yvar = t.Yvar.reshape(-1) if t.Yvar is not None else torch.zeros_like(Y)
        if batch_size is not None and t.n > batch_size:
            idx = torch.randperm(t.n, generator=generator)[:batch_size].to(X.device)
            X, Y, Yvar = X[idx], Y[idx], Yvar[idx]
        buckets.setdefault(X.shape[0], []).append((X, Y, Yvar))
    total = 0.0
    for items in buckets.values():
        X = torch.stack([x for x, _, _ in items])
        Y = torch.stack([y for _, y, _ in items])
        Yvar = torch.stack([v for _, _, v in items])
        total = total + _log_likelihood(prior, X, Y, Yvar, jitter).sum()
    return -total / len(tasks)


def _log_likelihood(
    prior: PretrainedPrior, X: Tensor, Y: Tensor, Yvar: Tensor, jitter: float
) -> Tensor:
    M = X.shape[-2]
    Sigma = prior.covariance(X, observation_noise=True) + torch.diag_embed(Yvar)
    if jitter > 0:
        Sigma = Sigma + jitter * prior.mean_module.scale.pow(2) * torch.eye(
            M, dtype=X.dtype, device=X.device
        )
    L = torch.linalg.cholesky(Sigma)
    r = (Y - prior.mean(X)).unsqueeze(-1)
    z = torch.linalg.solve_triangular(L, r, upper=False)
    logdet = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    return -0.5 * (z.pow(2).sum(dim=(-2, -1)) + logdet + M * math.log(2 * math.pi))
