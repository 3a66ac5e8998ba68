r"""Synthetic meta-data with a known number of clusters.

Each cluster is a random smooth function (a few random cosine features); each member
task is its cluster's function plus a small task-specific smooth perturbation, a small
offset and observation noise.
"""

import math

import torch

from botorch_transfer import TaskData

F64 = torch.float64


def random_function(d, gen, n_features=6, lengthscale=0.25, amplitude=1.0):
    r"""A random smooth function on ``[0, 1]^d`` (random cosine features)."""
    W = torch.randn(n_features, d, generator=gen, dtype=F64) / lengthscale
    b = 2 * math.pi * torch.rand(n_features, generator=gen, dtype=F64)
    a = torch.randn(n_features, generator=gen, dtype=F64) * math.sqrt(2 / n_features)

    def f(X):
        return amplitude * (torch.cos(X @ W.T + b) @ a).unsqueeze(-1)

    return f


def clustered_tasks(
    n_clusters,
    seed,
    d=None,
    tasks_per_cluster=(3, 8),
    points=(10, 30),
    perturbation=0.1,
    offset=0.05,
    noise=0.01,
    separation=0.6,
    shared_inputs=False,
):
    r"""Meta-tasks from ``n_clusters`` clusters.

    With ``shared_inputs`` every task is observed at the same ``points[1]`` inputs
    (as the empirical and the clustered HyperBO priors need), drawn after the
    cluster functions; the draws of the tasks' functions are those of the default.

    Returns:
        The tasks, each task's cluster, the cluster functions and ``d``.
    """
    gen = torch.Generator().manual_seed(seed)
    if d is None:
        d = 1 + seed % 2
    # clusters well apart (RMS difference >= separation, 6x the perturbation): else
    # two random functions can nearly coincide and the "true" count is ambiguous
    grid = torch.rand(256, d, generator=gen, dtype=F64)
    centers = []
    while len(centers) < n_clusters:
        f = random_function(d, gen)
        if all((f(grid) - g(grid)).pow(2).mean().sqrt() >= separation for g in centers):
            centers.append(f)
    tasks, truth = [], []
    shared = None
    if shared_inputs:
        shared = torch.rand(points[1], d, generator=torch.Generator().manual_seed(seed))
        shared = shared.to(F64)
    for c, f in enumerate(centers):
        k = int(
            torch.randint(
                tasks_per_cluster[0], tasks_per_cluster[1] + 1, (1,), generator=gen
            )
        )
        for _ in range(k):
            g = random_function(d, gen, amplitude=perturbation)
            shift = offset * torch.randn(1, generator=gen, dtype=F64)
            n = int(torch.randint(points[0], points[1] + 1, (1,), generator=gen))
            X = torch.rand(n, d, generator=gen, dtype=F64)
            if shared is not None:  # the draw above keeps the functions' draws
                X, n = shared, shared.shape[0]
            Y = (
                f(X)
                + g(X)
                + shift
                + noise * torch.randn(n, 1, generator=gen, dtype=F64)
            )
            tasks.append(TaskData(X, Y))
            truth.append(c)
    return tasks, torch.tensor(truth), centers, d


def fixed_posteriors(tasks, lengthscale=0.3, noise=1e-3):
    r"""Stage-1 posteriors of ``tasks`` with fixed hyperparameters (no fitting: fast).

    Standardized outcomes, unit outputscale, Matern-3/2 lengthscale ``lengthscale``
    and a long Matern-1/2 lengthscale, the same for every task.
    """
    from botorch_transfer.priors import MetaTaskPosteriors

    K, d = len(tasks), tasks[0].d
    n_max = max(t.n for t in tasks)
    X = torch.zeros(K, n_max, d, dtype=F64)
    Z = torch.zeros(K, n_max, dtype=F64)
    mask = torch.zeros(K, n_max, dtype=torch.bool)
    offset, scale = torch.zeros(K, dtype=F64), torch.ones(K, dtype=F64)
    for j, t in enumerate(tasks):
        y = t.Y.squeeze(-1)
        offset[j], scale[j] = y.mean(), y.std()
        X[j, : t.n], Z[j, : t.n], mask[j, : t.n] = t.X, (y - offset[j]) / scale[j], True
    return MetaTaskPosteriors(
        X,
        Z,
        mask,
        torch.full((K, n_max), noise, dtype=F64),
        torch.full((K, d), lengthscale, dtype=F64),
        torch.full((K, d), 10.0, dtype=F64),
        torch.ones(K, dtype=F64),
        torch.zeros(K, dtype=F64),
        offset,
        scale,
        torch.stack([torch.zeros(d, dtype=F64), torch.ones(d, dtype=F64)]),
    )
