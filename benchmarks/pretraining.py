r"""A small benchmark of ``pretrain_prior`` on meta-tasks observed at their own inputs:
pre-training time, held-out log likelihood and 90% interval coverage of left-out
tasks, per objective, side by side.

Run ``python -m benchmarks.pretraining`` (``--help`` for options).
The NLL network's pre-training dominates its time (minutes per problem and seed;
``--skip-nll`` leaves it out).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from benchmarks.meta import gp_tasks, lcbench
from botorch_transfer.data import TaskData
from botorch_transfer.priors.hyperbo.pretrain import pretrain_prior
from botorch_transfer.priors.hyperbo.prior import PretrainedPrior

#: ``Phi^{-1}(0.95)``: the half-width of a central 90% interval in sds.
Z90 = 1.6448536269514722


def own_input_tasks(
    evaluate: Callable[[int, Tensor], Tensor],
    n_tasks: int,
    dim: int,
    n_points: int | Sequence[int] = 100,
    noise_sd: float = 0.1,
    replicate_fraction: float = 0.2,
    seed: int = 0,
) -> list[TaskData]:
    r"""Meta-tasks at their own random inputs in ``[0, 1]^dim``, with replicates.

    Each task observes ``n_points`` inputs of which ``replicate_fraction`` repeat an
    earlier input of the same task; every observation gets independent noise of
    standard deviation ``noise_sd`` times the task's spread.

    Args:
        evaluate: ``(task index, n x dim inputs) -> n x 1`` noise-free values.
        n_tasks: Number of tasks.
        dim: Input dimension.
        n_points: Points per task (one number, or one per task).
        noise_sd: Noise standard deviation relative to each task's spread.
        replicate_fraction: Fraction of each task's points that repeat an input.
        seed: Seed of the inputs and the noise.

    Returns:
        The tasks (float64).
    """
    gen = torch.Generator().manual_seed(seed)
    sizes = [n_points] * n_tasks if isinstance(n_points, int) else list(n_points)
    tasks = []
    for j, n in enumerate(sizes):
        n_rep = int(replicate_fraction * n) if n > 1 else 0
        X = torch.rand(n - n_rep, dim, generator=gen, dtype=torch.float64)
        if n_rep:
            X = torch.cat([X, X[torch.randint(n - n_rep, (n_rep,), generator=gen)]])
        f = evaluate(j, X).to(torch.float64)
        spread = f.std() if n > 1 else f.new_ones(())
        Y = f + noise_sd * spread * torch.randn(f.shape, generator=gen, dtype=f.dtype)
        tasks.append(TaskData(X, Y, name=str(j)))
    return tasks


def held_out_scores(
    prior: PretrainedPrior, tasks: Sequence[TaskData]
) -> dict[str, float]:
    r"""Held-out log likelihood (per point, averaged over tasks) of the tasks'
    observations under the prior (with its noise), and the fraction of observations
    inside the prior's marginal 90% intervals.

    Args:
        prior: The pre-trained prior.
        tasks: Left-out tasks.

    Returns:
        ``{"loglik", "coverage90"}``.
    """
    logliks, inside, total = [], 0, 0
    with torch.no_grad():
        for t in tasks:
            X, y = t.X.to(prior.raw_noise), t.Y[:, 0].to(prior.raw_noise)
            mean = prior.mean(X)
            cov = prior.covariance(X, observation_noise=True)
            cov = (cov + cov.T) / 2
            mvn = torch.distributions.MultivariateNormal(mean, cov)
            logliks.append(float(mvn.log_prob(y)) / t.n)
            sd = torch.diagonal(cov).clamp_min(0).sqrt()
            inside += int(((y - mean).abs() <= Z90 * sd).sum())
            total += t.n
    return {"loglik": sum(logliks) / len(logliks), "coverage90": inside / total}


def compare(
    tasks: Sequence[TaskData],
    test_fraction: float = 0.2,
    objectives: Sequence[str | None] = ("empirical-posterior", "nll"),
    seed: int = 0,
    objective_options: dict[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    r"""Pre-train on a random ``1 - test_fraction`` of the tasks with each objective
    and score the left-out tasks.

    Args:
        tasks: The meta-tasks.
        test_fraction: Fraction of tasks left out.
        objectives: ``pretrain_prior`` objectives (``None``: its default).
        seed: Seed of the split and of the pre-training.
        objective_options: Options of ``pretrain_prior`` per objective (e.g.
            ``{"nll": {"num_steps": 3000}}``).

    Returns:
        One row per objective: ``objective``, ``seconds`` (wall), ``cpu_seconds``
        (this process's CPU time, all threads: a measure that other load on the
        machine does not inflate), ``loglik``, ``coverage90``.
    """
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(tasks), generator=gen).tolist()
    n_test = max(1, round(test_fraction * len(tasks)))
    test = [tasks[i] for i in order[:n_test]]
    train = [tasks[i] for i in sorted(order[n_test:])]
    rows = []
    for objective in objectives:
        start, cpu = time.perf_counter(), time.process_time()
        options = (objective_options or {}).get(str(objective), {})
        prior = pretrain_prior(
            train, objective=objective, seed=seed, progress=False, **options
        )
        rows.append(
            {
                "objective": prior.config["objective"],
                "seconds": time.perf_counter() - start,
                "cpu_seconds": time.process_time() - cpu,
                **held_out_scores(prior, test),
            }
        )
    return rows


def time_pretraining(
    tasks: Sequence[TaskData], objective: str | None
) -> tuple[float, float]:
    r"""Wall and CPU seconds of ``pretrain_prior(tasks, objective=objective)``."""
    start, cpu = time.perf_counter(), time.process_time()
    pretrain_prior(tasks, objective=objective, progress=False)
    return time.perf_counter() - start, time.process_time() - cpu


def _problems(dim: int) -> dict[str, tuple[Callable[[int, Tensor], Tensor], int]]:

    problems: dict[str, tuple[Callable[[int, Tensor], Tensor], int]] = {}
    try:
        problem = lcbench()
        problems["lcbench (7-d, 34 tasks)"] = (problem.evaluate, problem.dim)
    except Exception as e:  # the YAHPO surrogate is optional
        print(f"lcbench unavailable: {e}")
    problem = gp_tasks(n_tasks=34, dim=dim)
    problems[f"gp-tasks ({dim}-d, 34 tasks)"] = (problem.evaluate, problem.dim)
    return problems


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--skip-nll", action="store_true")
    parser.add_argument("--problem", default=None, help="only problems starting so")
    parser.add_argument("--nll-steps", type=int, default=None, help="default: 50,000")
    parser.add_argument("--nll-lr", type=float, default=1e-3)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    objectives: tuple[str, ...] = ("empirical-posterior",)
    if not args.skip_nll:
        objectives += ("nll",)
    print(f"torch threads: {torch.get_num_threads()}")
    header = f"{'problem':28s} {'seed':>4s} {'objective':20s} {'wall s':>7s}"
    print(header + f" {'cpu s':>7s} {'loglik':>8s} {'cov90':>6s}")
    for name, (evaluate, dim) in _problems(7).items():
        if args.problem and not name.startswith(args.problem):
            continue
        for seed in range(args.seeds):
            tasks = own_input_tasks(evaluate, 34, dim, seed=seed)
            if seed == 0:
                wall, cpu = time_pretraining(tasks, "empirical-posterior")
                print(
                    f"{name:28s} all 34 tasks: empirical-posterior {wall:.2f} s "
                    f"wall, {cpu:.2f} s cpu"
                )
            nll = {"lr": args.nll_lr, "num_steps": args.nll_steps}
            rows = compare(
                tasks, objectives=objectives, seed=seed, objective_options={"nll": nll}
            )
            for row in rows:
                print(
                    f"{name:28s} {seed:4d} {row['objective']:20s} "
                    f"{row['seconds']:7.2f} {row['cpu_seconds']:7.2f} "
                    f"{row['loglik']:8.3f} "
                    f"{row['coverage90']:6.3f}"
                )
    # mixed sizes (5 to 500 points) and thin meta-data
    evaluate, dim = next(iter(_problems(7).values()))
    gen = torch.Generator().manual_seed(0)
    sizes = torch.randint(5, 501, (34,), generator=gen).tolist()
    tasks = own_input_tasks(evaluate, 34, dim, n_points=sizes)
    row = compare(tasks, objectives=("empirical-posterior",))[0]
    print(
        f"mixed sizes 5-500: {row['seconds']:.2f} s wall, {row['cpu_seconds']:.2f} s "
        f"cpu, loglik {row['loglik']:.3f}, "
        f"cov90 {row['coverage90']:.3f}"
    )


if __name__ == "__main__":
    main()
