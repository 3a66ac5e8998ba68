r"""Meta-learning benchmarks: leave-tasks-out BO on a family of related tasks.

The protocol of HyperBO (Wang et al., Secs. 7.3-7.4) and cm-BO (Nguyen et al.,
Sec. 4.1): the tasks of a problem are split by the seed into meta-training tasks
(``1 - test_fraction``) and test tasks; every meta-training task comes with
``n_history`` noisy evaluations on one shared set of random inputs (a
matching-input dataset, so EKL applies); a method may learn from them once per
split (pre-training time is recorded) and then runs BO on every test task over a
finite candidate pool, starting from the same ``n_init`` random points. The metric
is the simple regret ``max_pool f - max_{tau <= t} f(x_tau)`` (noise-free values),
averaged over the split's test tasks (Sec. 7.3), so each (problem, method, seed)
record is one point of the regret curve's distribution over seeds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import torch
from botorch.acquisition import ProbabilityOfImprovement, UpperConfidenceBound
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.optim import optimize_acqf_discrete
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor

from botorch_transfer.data import TaskData
from botorch_transfer.models.pretrained import PretrainedPriorGP, hyperbo_probability_of_improvement
from botorch_transfer.pretraining import pretrain_prior


@dataclass
class MetaProblem:
    r"""A family of related maximization tasks on the unit cube ``[0, 1]^dim``.

    Attributes:
        name: Registry name.
        description: One line for ``list``.
        dim: Input dimension.
        n_tasks: Number of tasks.
        evaluate: ``(task index, n x dim inputs) -> n x 1`` noise-free values.
        n_history: Evaluations per meta-training task (on shared inputs).
        observation_noise: Variance of the noise added to every observation.
        pool_size: Size of the finite candidate pool of each split.
        iterations: BO iterations per test task.
        n_init: Random initial points per test task.
        test_fraction: Fraction of tasks held out for BO.
        pretrain_steps: Adam steps for HyperBO-NLL pre-training.
    """

    name: str
    description: str
    dim: int
    n_tasks: int
    evaluate: Callable[[int, Tensor], Tensor]
    n_history: int = 100
    observation_noise: float = 0.0
    pool_size: int = 2000
    iterations: int = 50
    n_init: int = 1
    test_fraction: float = 0.2
    pretrain_steps: int = 3000


def gp_tasks(n_tasks: int = 40, dim: int = 2, seed: int = 1234, num_features: int = 2048) -> MetaProblem:
    r"""Synthetic tasks i.i.d. from one GP (HyperBO Assumption 1, Sec. 6.3 style).

    ``f_i = mu + g_i`` with the shared non-zero mean ``mu(x) = 2 exp(-4 ||x - c||^2)``
    (``c = (0.7, 0.3, ...)``) and ``g_i`` a sample of GP(0, 0.25 Matern-5/2, lengthscale
    0.2) drawn with random Fourier features; observations carry noise 0.01. The
    family is fixed by ``seed``; the split and all BO randomness come from the
    run's seed.
    """
    from botorch.sampling.pathwise.features.generators import gen_kernel_features

    from botorch_transfer.benchmarks.problems import fixed_kernel

    center = torch.tensor([0.7, 0.3] * dim, dtype=torch.float64)[:dim]
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        features = gen_kernel_features(fixed_kernel("matern52", 0.2, 0.25, dim), num_inputs=dim, num_outputs=num_features)
        weights = torch.randn(num_features, n_tasks, dtype=torch.float64)

    def evaluate(task: int, X: Tensor) -> Tensor:
        with torch.no_grad():
            mean = 2.0 * torch.exp(-4.0 * (X - center).pow(2).sum(-1, keepdim=True))
            return mean + features(X) @ weights[:, task : task + 1]

    return MetaProblem(
        name="gp-tasks",
        description=f"{n_tasks} GP-sampled tasks with a shared non-zero mean on [0,1]^{dim} (HyperBO Sec. 6.3 style)",
        dim=dim, n_tasks=n_tasks, evaluate=evaluate, n_history=50, observation_noise=0.01,
        pool_size=1000, iterations=50, n_init=1,
    )


def lcbench(target: str = "val_accuracy") -> MetaProblem:
    r"""LCBench (YAHPO Gym surrogate): 34 OpenML datasets, 7 hyperparameters of a
    funnel MLP at the final epoch (52), objective ``val_accuracy`` (percent)."""
    from botorch_transfer.benchmarks.yahpo import YahpoSurrogate

    bench = YahpoSurrogate("lcbench", target)

    def evaluate(task: int, X: Tensor) -> Tensor:
        return bench(bench.instances[task], X)

    return MetaProblem(
        name="lcbench",
        description="LCBench (YAHPO surrogate): 34 tasks, 7 MLP hyperparameters, val_accuracy at epoch 52",
        dim=bench.dim, n_tasks=len(bench.instances), evaluate=evaluate, n_history=100,
        observation_noise=0.0, pool_size=2000, iterations=50, n_init=1,
    )


META_PROBLEMS: dict[str, Callable[[], MetaProblem]] = {"gp-tasks": gp_tasks, "lcbench": lcbench}
META_METHODS = ("random", "stbo", "gp-ucb", "hyperbo-nll", "hyperbo-ekl")


@lru_cache(maxsize=4)
def make_meta_problem(name: str) -> MetaProblem:
    if name not in META_PROBLEMS:
        raise ValueError(f"Unknown meta problem {name!r}; choose from {sorted(META_PROBLEMS)}.")
    return META_PROBLEMS[name]()


def _split(problem: MetaProblem, seed: int) -> tuple[list[int], list[int]]:
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(problem.n_tasks, generator=gen).tolist()
    n_test = max(1, math.ceil(problem.test_fraction * problem.n_tasks))
    return sorted(order[n_test:]), sorted(order[:n_test])


def meta_training_data(problem: MetaProblem, train_tasks: list[int], seed: int) -> list[TaskData]:
    r"""``n_history`` noisy evaluations of each meta-training task on shared random inputs."""
    gen = torch.Generator().manual_seed(seed + 1)
    X = torch.rand(problem.n_history, problem.dim, generator=gen, dtype=torch.float64)
    tasks = []
    for i in train_tasks:
        Y = problem.evaluate(i, X)
        Y = Y + math.sqrt(problem.observation_noise) * torch.randn(Y.shape, generator=gen, dtype=torch.float64)
        tasks.append(TaskData(X, Y, name=str(i)))
    return tasks


def _single_task_gp(X: Tensor, Y: Tensor) -> SingleTaskGP:
    model = SingleTaskGP(X, Y)  # BoTorch defaults: Standardize, dim-scaled priors
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


def run_meta_experiment(
    problem_name: str | MetaProblem, method: str, seed: int, iterations: int | None = None
) -> dict:
    r"""Leave-tasks-out BO of ``method`` on every test task of the ``seed``'s split.

    Methods: ``random``; ``stbo`` (single-task GP with BoTorch's default priors,
    hyperparameters fitted every iteration, the HyperBO PI acquisition: threshold
    ``max(y) + 0.1`` in standardized units); ``gp-ucb`` (the same GP with UCB,
    ``beta = 1.8^2`` as HyperBO's STBOH); ``hyperbo-nll`` / ``hyperbo-ekl``
    (:class:`PretrainedPriorGP` on a prior pre-trained once per split with that
    objective, PI with threshold ``max(y) + 0.1`` in the prior's standardized units).

    Args:
        problem_name: A registered meta problem name, or a ``MetaProblem``.
        method: One of ``META_METHODS``.
        seed: Seed of the task split, the meta-training data, the pool and the BO runs.
        iterations: BO iterations per test task (default: the problem's).

    Returns:
        A JSON-serializable record: per test task the queries and values, the mean
        simple regret over test tasks per iteration, timings and settings.
    """
    if method not in META_METHODS:
        raise ValueError(f"Unknown meta-learning method {method!r}; choose from {list(META_METHODS)}.")
    torch.set_num_threads(1)
    problem = make_meta_problem(problem_name) if isinstance(problem_name, str) else problem_name
    T = problem.iterations if iterations is None else iterations
    train_tasks, test_tasks = _split(problem, seed)
    pool = torch.rand(problem.pool_size, problem.dim, generator=torch.Generator().manual_seed(seed + 2), dtype=torch.float64)

    start = time.perf_counter()
    prior = None
    if method.startswith("hyperbo"):
        history = meta_training_data(problem, train_tasks, seed)
        objective = method.split("-")[1]
        prior = pretrain_prior(
            history, objective=objective, num_steps=problem.pretrain_steps if objective == "nll" else None,
            lr=5e-3, seed=seed, progress=False,
        )
    pretrain_s = time.perf_counter() - start

    per_task, times = [], []
    for task in test_tasks:
        gen = torch.Generator().manual_seed(seed * 1000 + task)
        f_pool = problem.evaluate(task, pool)
        f_star = f_pool.max().item()
        idx = torch.randint(problem.pool_size, (problem.n_init,), generator=gen).tolist()

        def observe(i: int) -> float:
            noise = math.sqrt(problem.observation_noise) * torch.randn((), generator=gen, dtype=torch.float64)
            return f_pool[i, 0].item() + noise.item()

        ys = [observe(i) for i in idx]
        policy_gen = torch.Generator().manual_seed(seed * 1000 + task + 500)
        for _ in range(T):
            t0 = time.perf_counter()
            X, Y = pool[idx], torch.tensor(ys, dtype=torch.float64).unsqueeze(-1)
            if method == "random":
                nxt = int(torch.randint(problem.pool_size, (1,), generator=policy_gen))
            else:
                if method == "stbo":
                    model = _single_task_gp(X, Y)
                    scale = Y.std().clamp_min(1e-6) if Y.shape[0] > 1 else torch.ones((), dtype=Y.dtype)
                    acqf = ProbabilityOfImprovement(model, best_f=Y.max() + 0.1 * scale)
                elif method == "gp-ucb":
                    acqf = UpperConfidenceBound(_single_task_gp(X, Y), beta=1.8**2)
                else:
                    model = PretrainedPriorGP(X, Y, prior)
                    acqf = hyperbo_probability_of_improvement(model, margin=0.1 * prior.mean_module.scale.item())
                best, _ = optimize_acqf_discrete(acqf, q=1, choices=pool, max_batch_size=2048)
                nxt = int(((pool - best).abs().sum(-1)).argmin())
            times.append(time.perf_counter() - t0)
            idx.append(nxt)
            ys.append(observe(nxt))
        values = f_pool[idx, 0]
        best_so_far = values.cummax(0).values[problem.n_init - 1 :]  # after init, then after each iteration
        per_task.append({
            "task": task, "optimum": f_star, "queries": idx, "observations": ys, "values": values.tolist(),
            "simple_regret": (f_star - best_so_far).tolist(),
        })
    regret = torch.tensor([t["simple_regret"] for t in per_task]).mean(0).tolist()
    return {
        "problem": problem.name, "method": method, "seed": seed, "iterations": T,
        "metric": "simple_regret",
        "simple_regret": regret,  # index t: after t BO iterations (0 = initial points only)
        "tasks": per_task, "train_tasks": train_tasks, "test_tasks": test_tasks,
        "pretrain_s": pretrain_s, "iteration_s": times,
        "settings": {
            "description": problem.description, "n_history": problem.n_history, "n_init": problem.n_init,
            "pool_size": problem.pool_size, "observation_noise": problem.observation_noise,
            "pretrain_steps": problem.pretrain_steps,
        },
    }
