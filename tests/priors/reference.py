r"""Plain float64 references for cm-BO, written from the paper (Nguyen et al.,
Algorithm 1 line 15, Theorem 3.1, eqs. 1-2), and the meta-task data of the tests.

Nothing here uses GPyTorch or the package's kernels: the Matern product is written
out and every posterior is a dense solve, so the tests compare the prior and
``ClusterMetaPriorGP`` against an independent derivation.
"""

import math

import torch

from botorch_transfer import TaskData

F64 = torch.float64
D = 2
NOISE = 1e-4
FAMILIES = 3


def family(c, X):
    r"""Three visibly different response surfaces on [0, 1]^2."""
    if c == 0:
        return (torch.sin(6 * X[..., :1]) + torch.sin(6 * X[..., 1:])) / 2
    if c == 1:
        return X[..., :1] + X[..., 1:] - 1
    return 1.0 - 2 * ((X - 0.7) ** 2).sum(-1, keepdim=True) * 3


def make_tasks(per_family=4, n=14, seed=0):
    gen = torch.Generator().manual_seed(seed)
    tasks, truth = [], []
    for c in range(FAMILIES):
        for k in range(per_family):
            X = torch.rand(
                n - 3 * (k % 2), D, generator=gen, dtype=F64
            )  # unequal sizes: padding
            amp = 1 + 0.05 * torch.randn(1, generator=gen, dtype=F64)
            Y = amp * family(c, X) + 0.01 * torch.randn(
                X.shape[0], 1, generator=gen, dtype=F64
            )
            tasks.append(
                TaskData(
                    X, Y, torch.full_like(Y, NOISE) if c == 1 else None, name=f"f{c}"
                )
            )
            truth.append(c)
    # interleave families so that cluster numbering is not the input order
    order = [i for k in range(per_family) for i in range(k, len(tasks), per_family)]
    return [tasks[i] for i in order], torch.tensor([truth[i] for i in order])


def same_partition(a, b):
    return bool(
        ((a.unsqueeze(0) == a.unsqueeze(1)) == (b.unsqueeze(0) == b.unsqueeze(1))).all()
    )


def matern32x12(X1, X2, ls32, ls12, outputscale, bounds):
    r"""``s^2 (1 + sqrt3 r) exp(-sqrt3 r) exp(-r')`` on inputs normalized by
    ``bounds``."""
    Z1, Z2 = (
        (X1 - bounds[0]) / (bounds[1] - bounds[0]),
        (X2 - bounds[0]) / (bounds[1] - bounds[0]),
    )
    diff = Z1.unsqueeze(-2) - Z2.unsqueeze(-3)
    r = (diff / ls32).pow(2).sum(-1).sqrt()
    r12 = (diff / ls12).pow(2).sum(-1).sqrt()
    return (
        outputscale
        * (1 + math.sqrt(3) * r)
        * torch.exp(-math.sqrt(3) * r)
        * torch.exp(-r12)
    )


def task_posterior(post, j):
    r"""Eqs. 1-2 for meta-task ``j`` from its stored data and hyperparameters (user
    units)."""
    m = post.mask[j]
    X, z, noise = post.X[j, m], post.Z_targets[j, m], post.noise[j, m]
    ls32, ls12 = post.lengthscale_32[j], post.lengthscale_12[j]

    def k(A, B):
        return matern32x12(A, B, ls32, ls12, post.outputscale[j], post.bounds)

    Kn = k(X, X) + torch.diag(noise)
    c, a, s = post.constant[j], post.y_offset[j], post.y_scale[j]
    alpha = torch.linalg.solve(Kn, z - c)

    def mean(A):
        return a + s * (c + k(A, X) @ alpha)

    def cov(A, B):
        return s**2 * (k(A, B) - k(A, X) @ torch.linalg.solve(Kn, k(X, B)))

    return mean, cov


def reference_prior(prior, weights):
    r"""Alg. 1 line 15 with center prototypes: ``mu0 = sum_i w_i mean_{j in C_i} mu_j``,
    ``k0 = sum_i w_i^2 mean_{j in C_i} k_j``."""
    parts = [task_posterior(prior.posteriors, j) for j in range(prior.n_tasks)]
    sizes = torch.bincount(prior.assignments)

    def mean(A):
        return sum(
            weights[c] / sizes[c] * parts[j][0](A)
            for j, c in enumerate(prior.assignments.tolist())
        )

    def cov(A, B):
        return sum(
            weights[c] ** 2 / sizes[c] * parts[j][1](A, B)
            for j, c in enumerate(prior.assignments.tolist())
        )

    return mean, cov


def gp_posterior(mean0, cov0, X, y, noise):
    r"""Eqs. 1-2."""
    Kn = cov0(X, X) + torch.diag(noise)
    alpha = torch.linalg.solve(Kn, y - mean0(X))
    return (
        lambda A: mean0(A) + cov0(A, X) @ alpha,
        lambda A, B: cov0(A, B) - cov0(A, X) @ torch.linalg.solve(Kn, cov0(X, B)),
    )
