r"""Timings of the meta-learning steps: cm-BO's Stage 1 (batched meta-task GP fits
against the per-task loop) and Stage 2, and HyperBO's pre-training."""

from __future__ import annotations

import argparse
import time
import warnings

import torch

from benchmarks.context import (
    torch_run_context,
)
from benchmarks.timing_runs import in_process
from botorch_transfer import build_cluster_prior, pretrain_prior
from botorch_transfer.data import TaskData
from botorch_transfer.priors import (
    fit_meta_task_gps,
    meta_task_posteriors,
    pairwise_divergence,
)
from botorch_transfer.priors.hyperbo.objectives import nll_objective


def print_header(header: str) -> None:
    r"""A table's header line and its rule."""
    print(header)
    print("-" * len(header))


def stage1_tasks(n_tasks: int, n_points: int, dim: int, seed: int) -> list[TaskData]:
    r"""Meta-tasks on shared inputs in ``[0, 1]^dim``: random sums of sines
    (frequencies and phases per task) with noise sd 0.05, noise not given.

    Args:
        n_tasks: Number of meta-tasks.
        n_points: Points per task (the same inputs for all tasks).
        dim: Input dimension.
        seed: Seed of the data.

    Returns:
        The meta-tasks.
    """
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n_points, dim, generator=gen, dtype=torch.float64)
    tasks = []
    for _ in range(n_tasks):
        freq = 1 + 4 * torch.rand(dim, generator=gen, dtype=torch.float64)
        phase = 6 * torch.rand(dim, generator=gen, dtype=torch.float64)
        noise = torch.randn(n_points, 1, generator=gen, dtype=torch.float64)
        Y = torch.sin(freq * X + phase).sum(-1, keepdim=True) + 0.05 * noise
        tasks.append(TaskData(X, Y))
    return tasks


def run_stage1(n_tasks: int, n_points: int, dim: int, batched: bool, seed: int) -> dict:
    r"""Time cm-BO's Stage 1 (``fit_meta_task_gps``) in this (fresh) process.

    Args:
        n_tasks: Number of meta-tasks.
        n_points: Points per task.
        dim: Input dimension.
        batched: Fit batched (else the per-task loop).
        seed: Seed of the data.

    Returns:
        ``{"n_tasks", "n_points", "dim", "batched", "fit_s"}``.
    """
    warnings.filterwarnings("ignore")
    tasks = stage1_tasks(n_tasks, n_points, dim, seed)
    bounds = torch.stack([torch.zeros(dim), torch.ones(dim)]).to(torch.float64)
    with torch_run_context(num_threads=1, seed=seed):
        start = time.perf_counter()
        fit_meta_task_gps(tasks, bounds, progress=False, batched=batched)
        fit_s = time.perf_counter() - start
    return {
        "n_tasks": n_tasks,
        "n_points": n_points,
        "dim": dim,
        "batched": batched,
        "fit_s": fit_s,
    }


def main_stage1(args: argparse.Namespace) -> list[dict]:
    r"""The ``--stage1`` table: batched fit, per-task loop and their ratio per ``d``."""
    M, n = args.stage1_tasks, args.stage1_points
    loop_M = min(args.stage1_loop_tasks or M, M)
    print(f"cm-BO stage 1: {M} meta-tasks x {n} points (1 thread)")
    if loop_M < M:
        print(f"per-task loop timed on {loop_M} tasks, scaled x{M / loop_M:g}")
    header = f"{'d':>2} | {'batched s':>10} {'loop s':>10} | {'loop/batched':>12}"
    print_header(header)
    rows = []
    for dim in args.dims:
        res = {}
        for batched, tasks in ((True, M), (False, loop_M)):
            res[batched] = in_process(run_stage1, tasks, n, dim, batched, args.seed)
            rows.append(res[batched])
        loop_s = res[False]["fit_s"] * M / loop_M
        batched_s = res[True]["fit_s"]
        print(
            f"{dim:>2} | {batched_s:>10.1f} {loop_s:>10.1f} | "
            f"{loop_s / batched_s:>12.1f}",
            flush=True,
        )
    return rows


def run_stage2(n_tasks: int, n_points: int, dim: int, seed: int) -> dict:
    r"""Time cm-BO's Stage 2 (``build_cluster_prior`` with its defaults, on fitted
    Stage 1 posteriors: the choice of ``C`` by k-means restarts and the silhouette)
    in this (fresh) process, and one pairwise 2-Wasserstein matrix of the same
    discretized posteriors as its unit.

    Args:
        n_tasks: Number of meta-tasks.
        n_points: Points per task.
        dim: Input dimension.
        seed: Seed of the data.

    Returns:
        ``{"n_tasks", "n_points", "dim", "stage2_s", "pairwise_s", "n_clusters"}``.
    """
    warnings.filterwarnings("ignore")
    tasks = stage1_tasks(n_tasks, n_points, dim, seed)
    bounds = torch.stack([torch.zeros(dim), torch.ones(dim)]).to(torch.float64)
    with torch_run_context(num_threads=1, seed=seed):
        posteriors = meta_task_posteriors(tasks, bounds, progress=False)
        start = time.perf_counter()
        prior = build_cluster_prior(tasks, seed=seed, posteriors=posteriors)
        stage2_s = time.perf_counter() - start
        start = time.perf_counter()
        pairwise_divergence(prior.task_means, prior.task_covs)
        pairwise_s = time.perf_counter() - start
    return {
        "n_tasks": n_tasks,
        "n_points": n_points,
        "dim": dim,
        "stage2_s": stage2_s,
        "pairwise_s": pairwise_s,
        "n_clusters": prior.prototype_means.shape[0],
    }


def main_stage2(args: argparse.Namespace) -> list[dict]:
    r"""The ``--stage2`` table: Stage 2 against one pairwise matrix, per ``d``."""
    M, n = args.stage1_tasks, args.stage1_points
    print(f"cm-BO stage 2: {M} meta-tasks x {n} points (1 thread)")
    header = (
        f"{'d':>2} | {'stage 2 s':>10} {'pairwise s':>11} | "
        f"{'stage 2/pairwise':>16} | {'C':>2}"
    )
    print_header(header)
    rows = []
    for dim in args.dims:
        row = in_process(run_stage2, M, n, dim, args.seed)
        rows.append(row)
        print(
            f"{dim:>2} | {row['stage2_s']:>10.1f} {row['pairwise_s']:>11.2f} | "
            f"{row['stage2_s'] / row['pairwise_s']:>16.1f} | {row['n_clusters']:>2}",
            flush=True,
        )
    return rows


def run_pretrain(
    n_tasks: int, n_points: int, dim: int, objective: str | None, steps: int, seed: int
) -> dict:
    r"""Time ``pretrain_prior`` in this (fresh) process on :func:`stage1_tasks` data
    (shared inputs), and score the prior on 5 held-out tasks of the same family.

    Args:
        n_tasks: Number of meta-tasks.
        n_points: Points per task.
        dim: Input dimension.
        objective: ``None`` (the default: the empirical prior on shared inputs),
            ``"nll"`` (the meta track's setting: lr 5e-3, early stopping on held-out
            tasks) or ``"nll-paper"`` (the paper's: lr 1e-3, every one of ``steps``
            steps, no early stopping).
        steps: Adam steps of ``"nll"`` / ``"nll-paper"``.
        seed: Seed of the data.

    Returns:
        ``{"objective", "dim", "fit_s", "heldout_nll"}`` (held-out NLL per point).
    """
    warnings.filterwarnings("ignore")
    tasks = stage1_tasks(n_tasks + 5, n_points, dim, seed)
    kwargs = {"progress": False}
    if objective == "nll":
        kwargs.update(objective="nll", num_steps=steps, lr=5e-3)
    elif objective == "nll-paper":
        kwargs.update(objective="nll", num_steps=steps, lr=1e-3, validation_fraction=0)
    elif objective is not None:
        raise ValueError(
            f"objective must be None, 'nll' or 'nll-paper', got {objective!r}"
        )
    with torch_run_context(num_threads=1, seed=seed):
        start = time.perf_counter()
        prior = pretrain_prior(tasks[:n_tasks], **kwargs)
        fit_s = time.perf_counter() - start
        with torch.no_grad():
            heldout = float(nll_objective(prior, tasks[n_tasks:])) / n_points
    return {
        "objective": objective or "default",
        "dim": dim,
        "fit_s": fit_s,
        "heldout_nll": heldout,
    }


def main_pretrain(args: argparse.Namespace) -> list[dict]:
    r"""The ``--pretrain`` table: the default prior against NLL pre-training."""
    M, n = args.stage1_tasks, args.stage1_points
    print(
        f"pretrain_prior: {M} meta-tasks x {n} points on shared inputs (1 thread); "
        f"nll: {args.pretrain_steps} Adam steps"
    )
    header = (
        f"{'d':>2} | {'default s':>10} {'nll s':>10} | {'nll/default':>11} | "
        f"{'held-out NLL/pt: default':>24} {'nll':>8}"
    )
    print_header(header)
    rows = []
    for dim in args.dims:
        res = {}
        for objective in (None, args.pretrain_objective):
            res[objective] = in_process(
                run_pretrain, M, n, dim, objective, args.pretrain_steps, args.seed
            )
            rows.append(res[objective])
        default, nll = res[None], res[args.pretrain_objective]
        print(
            f"{dim:>2} | {default['fit_s']:>10.1f} {nll['fit_s']:>10.1f} | "
            f"{nll['fit_s'] / default['fit_s']:>11.1f} | "
            f"{default['heldout_nll']:>24.3f} {nll['heldout_nll']:>8.3f}",
            flush=True,
        )
    return rows
