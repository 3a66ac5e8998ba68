r"""Meta-learning benchmarks: leave-tasks-out BO on a family of related tasks.

The protocol of HyperBO (Wang et al., Secs. 7.3-7.4) and cm-BO (Nguyen et al.,
Sec. 4.1): the tasks of a problem are split by the seed into meta-training tasks
(``1 - test_fraction``) and test tasks; every meta-training task comes with
``n_history`` noisy evaluations on one shared set of random inputs (a
matching-input dataset, so EKL applies; the ``-own-inputs`` problems give each
task its own random inputs instead, see :func:`own_inputs`); a method may learn
from them once per split (pre-training time is recorded) and then runs BO on every
test task over a finite candidate pool, starting from the same ``n_init`` random
points. The metric is the simple regret ``max_pool f - max_{tau <= t} f(x_tau)``
(noise-free values: for ``rbv2-rpart-replicates``, the mean over the replicates),
averaged over the split's test tasks (Sec. 7.3), so each (problem, method, seed)
record is one point of the regret curve's distribution over seeds. Problems with
``normalize_regret=True`` (``rbv2-xgboost``, ``rbv2-rpart``; cm-BO Sec. 4.1) report
the normalized simple regret ``(max_pool f - best so far) / (max_pool f - min_pool
f)`` instead; :func:`benchmarks.regret_tables.rank_and_solved` adds cm-BO's
average rank and fraction of runs with regret below 0.005, and
:func:`~benchmarks.regret_tables.budget_to_target` the evaluations until the
simple regret is within 1% of the task's pool range (right-censored), since a low
regret curve can still belong to a method that never finds the optimum.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

import torch
from torch import Tensor

from benchmarks.context import (
    run_environment,
    torch_run_context,
    wait_for,
)
from benchmarks.methods import META, MetaData, Method, get_method
from botorch_transfer.data import TaskData
from botorch_transfer.test_functions.base import fixed_kernel
from botorch_transfer.test_functions.yahpo import YahpoSurrogate


@dataclass
class MetaProblem:
    r"""A family of related maximization tasks on the unit cube ``[0, 1]^dim``.

    Attributes:
        name: Registry name.
        description: One line for ``list``.
        dim: Input dimension.
        n_tasks: Number of tasks.
        evaluate: ``(task index, n x dim inputs) -> n x 1`` noise-free values.
        n_history: Evaluations per meta-training task.
        observation_noise: Variance of the Gaussian noise added to every
            observation (problems without ``observe``).
        pool_size: Size of the finite candidate pool of each split.
        iterations: BO iterations per test task.
        n_init: Random initial points per test task.
        test_fraction: Fraction of tasks held out for BO.
        pretrain_steps: Adam steps for HyperBO-NLL pre-training.
        normalize_regret: Report the normalized simple regret
            ``(max_pool f - best so far) / (max_pool f - min_pool f)`` (cm-BO Sec. 4.1)
            instead of the plain simple regret.
        cmbo_n_clusters: Number of cm-BO clusters ``C``; ``None`` selects it in
            ``2..6`` by the paper's inter/intra criterion (eqs. 10-11).
        shared_inputs: The meta-training tasks are observed on one shared set of
            random inputs (``True``), or each at its own random inputs.
        observe: ``(task index, n x dim inputs, generator) -> n x 1`` noisy
            observations drawn with ``generator`` (the noise of the data itself, e.g.
            a random resampling replicate); ``None``: ``evaluate`` plus Gaussian noise
            of variance ``observation_noise``.
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
    normalize_regret: bool = False
    cmbo_n_clusters: int | None = None
    shared_inputs: bool = True
    observe: Callable[[int, Tensor, torch.Generator], Tensor] | None = None

    def observations(self, task: int, X: Tensor, generator: torch.Generator) -> Tensor:
        r"""Noisy observations of ``task`` at ``X`` (``n x dim``), drawn with
        ``generator``: ``observe``'s, or ``evaluate``'s values plus Gaussian noise
        of variance ``observation_noise`` (drawn even where it is zero, so that the
        generator's stream does not depend on it)."""
        if self.observe is not None:
            return self.observe(task, X, generator)
        Y = self.evaluate(task, X)
        return Y + math.sqrt(self.observation_noise) * torch.randn(
            Y.shape, generator=generator, dtype=torch.float64
        )


def gp_tasks(
    n_tasks: int = 40, dim: int = 2, seed: int = 1234, num_features: int = 2048
) -> MetaProblem:
    r"""Synthetic tasks i.i.d. from one GP (HyperBO Assumption 1, Sec. 6.3 style).

    ``f_i = mu + g_i`` with the shared non-zero mean ``mu(x) = 2 exp(-4 ||x - c||^2)``
    (``c = (0.7, 0.3, ...)``) and ``g_i`` a sample of GP(0, 0.25 Matern-5/2, lengthscale
    0.2) drawn with random Fourier features; observations carry noise 0.01. The
    family is fixed by ``seed``; the split and all BO randomness come from the
    run's seed.
    """
    from botorch.sampling.pathwise.features.generators import gen_kernel_features

    center = torch.tensor([0.7, 0.3] * dim, dtype=torch.float64)[:dim]
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        features = gen_kernel_features(
            fixed_kernel("matern52", 0.2, 0.25, dim),
            num_inputs=dim,
            num_outputs=num_features,
        )
        weights = torch.randn(num_features, n_tasks, dtype=torch.float64)

    def evaluate(task: int, X: Tensor) -> Tensor:
        with torch.no_grad():
            mean = 2.0 * torch.exp(-4.0 * (X - center).pow(2).sum(-1, keepdim=True))
            return mean + features(X) @ weights[:, task : task + 1]

    return MetaProblem(
        name="gp-tasks",
        description=f"{n_tasks} GP-sampled tasks with a shared non-zero mean on "
        f"[0,1]^{dim} (HyperBO Sec. 6.3 style)",
        dim=dim,
        n_tasks=n_tasks,
        evaluate=evaluate,
        n_history=50,
        observation_noise=0.01,
        pool_size=1000,
        iterations=50,
        n_init=1,
    )


def lcbench(target: str = "val_accuracy") -> MetaProblem:
    r"""LCBench (YAHPO Gym surrogate): 34 OpenML datasets, 7 hyperparameters of a
    funnel MLP at the final epoch (52), objective ``val_accuracy`` (percent)."""
    bench = YahpoSurrogate("lcbench", target)

    def evaluate(task: int, X: Tensor) -> Tensor:
        return bench(bench.instances[task], X)

    return MetaProblem(
        name="lcbench",
        description="LCBench (YAHPO surrogate): 34 tasks, 7 MLP hyperparameters, "
        "val_accuracy at epoch 52",
        dim=bench.dim,
        n_tasks=len(bench.instances),
        evaluate=evaluate,
        n_history=100,
        observation_noise=0.0,
        pool_size=2000,
        iterations=50,
        n_init=1,
    )


def rbv2_xgboost(target: str = "acc") -> MetaProblem:
    r"""rbv2_xgboost (YAHPO Gym surrogate): 119 OpenML tasks, XGBoost booster + 12
    hyperparameters, accuracy at full fidelity (cm-BO Sec. 4.1 protocol).

    Settings from cm-BO Sec. 4.1: 85/15 train/test task split, 50 uniformly random
    historical observations per meta-task, 5 random initial target observations, 50
    queries, normalized simple regret. The search space (13-D unit cube) is the
    booster (equal sub-intervals: gblinear, gbtree, dart) and the 12 XGBoost
    hyperparameters; parameters inactive for the chosen booster are imputed as
    yahpo-gym does. ``num.impute.selected.cpo`` is fixed to ``impute.mean`` and the
    fidelities to their maxima (``trainsize=1``, ``repl=10``); see
    :class:`~botorch_transfer.test_functions.yahpo.YahpoSurrogate`. The candidate pool
    has 300 points, the size of the grid of the paper's timing report (Sec. 4.1), which
    keeps the Wasserstein barycenter on it affordable. The surrogate is noise-free.

    cm-BO uses ``C = 3`` clusters (deviation: the paper tunes ``C`` in ``2..6``
    per search space by eqs. 10-11; that selection, ``cmbo_n_clusters=None``, took
    16 s with Jeffreys but over 4 minutes with the Wasserstein distance on ~100
    meta-tasks, per split and variant, on one shared CPU core).
    """
    return _rbv2_problem("rbv2_xgboost", target, "booster + 12 XGBoost hyperparameters")


def rbv2_rpart(target: str = "acc") -> MetaProblem:
    r"""rbv2_rpart (YAHPO Gym surrogate): 117 OpenML tasks, rpart's 4 hyperparameters
    + the imputation method, accuracy at full fidelity (cm-BO Sec. 4.1 protocol).

    The settings of :func:`rbv2_xgboost` (85/15 task split, 50 historical points per
    meta-task, 5 initial points, 50 queries, a 300-point pool, normalized simple
    regret, ``C = 3`` cm-BO clusters). The search space (5-D unit cube) is
    ``num.impute.selected.cpo`` (equal sub-intervals: impute.mean, impute.median,
    impute.hist), then ``cp`` (log scale), ``maxdepth``, ``minbucket`` and
    ``minsplit`` (integers); the imputation method is tuned here, not fixed as for
    rbv2_xgboost, since rpart alone has only four hyperparameters. Fidelities at
    their maxima (``trainsize=1``, ``repl=10``); no parameter is conditional. The
    surrogate is noise-free.
    """
    return _rbv2_problem("rbv2_rpart", target, "imputation + 4 rpart hyperparameters")


def rbv2_rpart_replicates(target: str = "acc") -> MetaProblem:
    r"""rbv2_rpart with the noise of its resampling replicates.

    rbv2's surrogate predicts each of the ten resampling replicates (``repl``,
    ``1..10``) of a configuration's evaluation: the ones it was fitted to differ by
    the split of the data, as repeated evaluations of one configuration do. Every
    observation here (meta-training data and target) is the surrogate at a
    replicate drawn uniformly at random; the value that the regret measures is the
    mean over the ten replicates. The replicates' standard deviation at one
    configuration is about 0.006 in accuracy (median), against 0.014 to 0.05
    across configurations of a task. Otherwise :func:`rbv2_rpart`'s protocol.
    """
    return _rbv2_problem(
        "rbv2_rpart",
        target,
        "imputation + 4 rpart hyperparameters",
        replicates=True,
    )


#: rbv2's resampling replicates: the values of the surrogate's ``repl`` fidelity.
RBV2_REPLICATES = tuple(range(1, 11))


def _rbv2_problem(
    scenario: str, target: str, space: str, replicates: bool = False
) -> MetaProblem:
    r"""A YAHPO rbv2 scenario under the cm-BO Sec. 4.1 protocol (see
    :func:`rbv2_xgboost`); ``space`` describes its search space; ``replicates``
    observes a random resampling replicate (see :func:`rbv2_rpart_replicates`)."""
    bench = YahpoSurrogate(scenario, target)

    def evaluate(task: int, X: Tensor) -> Tensor:
        if not replicates:
            return bench(bench.instances[task], X)
        values = [bench(bench.instances[task], X, {"repl": r}) for r in RBV2_REPLICATES]
        return torch.stack(values).mean(0)

    def observe(task: int, X: Tensor, generator: torch.Generator) -> Tensor:
        index = torch.randint(len(RBV2_REPLICATES), (X.shape[0],), generator=generator)
        repl = torch.tensor(RBV2_REPLICATES)[index].numpy()
        return bench(bench.instances[task], X, {"repl": repl})

    name = scenario.replace("_", "-") + ("-replicates" if replicates else "")
    noise = ", a random resampling replicate observed" if replicates else ""
    return MetaProblem(
        name=name,
        description=f"{scenario} (YAHPO surrogate): {len(bench.instances)} tasks, "
        f"{space}, {target}{noise}",
        observe=observe if replicates else None,
        dim=bench.dim,
        n_tasks=len(bench.instances),
        evaluate=evaluate,
        n_history=50,
        observation_noise=0.0,
        pool_size=300,
        iterations=50,
        n_init=5,
        test_fraction=0.15,
        normalize_regret=True,
        cmbo_n_clusters=3,
    )


def own_inputs(problem: MetaProblem) -> MetaProblem:
    r"""``problem`` with every meta-training task at its own random inputs (history
    as it comes: past tuning runs rarely share configurations), named
    ``{name}-own-inputs``."""
    return dataclasses.replace(
        problem,
        name=f"{problem.name}-own-inputs",
        description=f"{problem.description}; each meta-task at its own random inputs",
        shared_inputs=False,
    )


META_PROBLEMS: dict[str, Callable[[], MetaProblem]] = {
    "gp-tasks": gp_tasks,
    "lcbench": lcbench,
    "rbv2-xgboost": rbv2_xgboost,
    "rbv2-rpart": rbv2_rpart,
    "rbv2-rpart-replicates": rbv2_rpart_replicates,
}


def _own_inputs_factory(
    factory: Callable[[], MetaProblem],
) -> Callable[[], MetaProblem]:
    r"""The registry's factory of ``factory``'s problem with every meta-task at its own
    inputs, described as ``factory`` is (``list`` prints its first paragraph)."""

    def make() -> MetaProblem:
        return own_inputs(factory())

    summary = (factory.__doc__ or "").split("\n\n")[0].strip().rstrip(".")
    make.__doc__ = f"{summary}; each meta-task at its own random inputs."
    return make


META_PROBLEMS.update(
    {
        f"{name}-own-inputs": _own_inputs_factory(factory)
        for name, factory in list(META_PROBLEMS.items())
    }
)


@lru_cache(maxsize=4)
def make_meta_problem(name: str) -> MetaProblem:
    if name not in META_PROBLEMS:
        raise ValueError(
            f"Unknown meta problem {name!r}; choose from {sorted(META_PROBLEMS)}."
        )
    return META_PROBLEMS[name]()


def split_tasks(problem: MetaProblem, seed: int) -> tuple[list[int], list[int]]:
    r"""The meta-training and the test tasks of ``problem`` for ``seed``: a random
    ``test_fraction`` of the task indices (at least one) is held out for testing.

    Returns:
        The sorted indices of the meta-training tasks and of the test tasks.
    """
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(problem.n_tasks, generator=gen).tolist()
    n_test = max(1, math.ceil(problem.test_fraction * problem.n_tasks))
    return sorted(order[n_test:]), sorted(order[:n_test])


#: :func:`split_tasks`, also importable under this name
_split = split_tasks


def meta_training_data(
    problem: MetaProblem,
    train_tasks: list[int],
    seed: int,
    device: torch.device | str = "cpu",
) -> list[TaskData]:
    r"""``n_history`` noisy evaluations of each meta-training task at random inputs
    (shared by the tasks, or each task's own: ``problem.shared_inputs``), drawn on
    the CPU and returned on ``device``."""
    gen = torch.Generator().manual_seed(seed + 1)

    def random_inputs() -> Tensor:
        return torch.rand(
            problem.n_history, problem.dim, generator=gen, dtype=torch.float64
        )

    X = random_inputs() if problem.shared_inputs else None
    tasks = []
    for i in train_tasks:
        X_task = X if problem.shared_inputs else random_inputs()
        Y = problem.observations(i, X_task, gen)
        tasks.append(TaskData(X_task, Y, name=str(i)).to(device))
    return tasks


def task_generator(seed: int, task: int) -> torch.Generator:
    r"""The generator of one test task's initial points and observation noise."""
    return torch.Generator().manual_seed(seed * 1000 + task)


def initial_points(problem: MetaProblem, generator: torch.Generator) -> list[int]:
    r"""The pool indices of a test task's ``n_init`` random initial points (drawn
    first from :func:`task_generator`; every method starts from them)."""
    return torch.randint(
        problem.pool_size, (problem.n_init,), generator=generator
    ).tolist()


def split_pool(problem: MetaProblem, seed: int) -> Tensor:
    r"""The candidate pool of the ``seed``'s split (on the CPU)."""
    pool_gen = torch.Generator().manual_seed(seed + 2)
    return torch.rand(
        problem.pool_size, problem.dim, generator=pool_gen, dtype=torch.float64
    )


def _bo_on_test_task(
    problem: MetaProblem,
    policy: Method,
    state: Any,
    pool: Tensor,
    task: int,
    seed: int,
    iterations: int,
    times: list[float],
    device: torch.device,
) -> dict[str, Any]:
    r"""``iterations`` BO steps of ``policy`` on one test task (the pool and the
    objective on the CPU, the method's data on ``device``); appends the time of
    each step to ``times`` and returns the task's record entry."""
    gen = task_generator(seed, task)
    f_pool = problem.evaluate(task, pool)
    f_star = f_pool.max().item()
    idx = initial_points(problem, gen)
    noise_sd = math.sqrt(problem.observation_noise)

    def observe(i: int) -> float:
        if problem.observe is not None:
            return problem.observe(task, pool[i : i + 1], gen)[0, 0].item()
        noise = noise_sd * torch.randn((), generator=gen, dtype=torch.float64)
        return f_pool[i, 0].item() + noise.item()

    ys = [observe(i) for i in idx]
    policy_gen = torch.Generator().manual_seed(seed * 1000 + task + 500)
    task_state = policy.start_task(state, policy_gen)
    for _ in range(iterations):
        start = time.perf_counter()
        X, Y = pool[idx], torch.tensor(ys, dtype=torch.float64).unsqueeze(-1)
        # `.cpu()` waits for the device, so the time is the step's
        x = policy.propose(task_state, X.to(device), Y.to(device)).cpu()
        nxt = int((pool - x).abs().sum(-1).argmin())  # the pool point proposed
        times.append(time.perf_counter() - start)
        idx.append(nxt)
        ys.append(observe(nxt))
    values = f_pool[idx, 0]
    # after the initial points, then after each iteration
    best_so_far = values.cummax(0).values[problem.n_init - 1 :]
    regret = f_star - best_so_far
    f_min = f_pool.min().item()
    if problem.normalize_regret:
        regret = regret / max(f_star - f_min, 1e-12)
    return {
        "task": task,
        "optimum": f_star,
        "pool_min": f_min,
        "queries": idx,
        "observations": ys,
        "values": values.tolist(),
        "simple_regret": regret.tolist(),
        **policy.task_info(task_state),
    }


def run_meta_experiment(
    problem_name: str | MetaProblem,
    method: str,
    seed: int,
    iterations: int | None = None,
    *,
    num_threads: int = 1,
    device: torch.device | str = "cpu",
) -> dict:
    r"""Leave-tasks-out BO of ``method`` on every test task of the ``seed``'s split.

    The method (any registered method whose ``protocols`` include ``"meta"``, see
    :mod:`~benchmarks.meta_methods`) is set up once on the split's
    meta-training data (``pretrain_s``), then runs ``iterations`` steps on every
    test task from the same random initial pool points; each query is the pool
    point it proposes.

    Args:
        problem_name: A registered meta problem name, or a ``MetaProblem``.
        method: A registered ``"meta"`` method name.
        seed: Seed of the task split, the meta-training data, the pool, the BO runs
            and torch's global RNG (restored afterwards).
        iterations: BO iterations per test task (default: the problem's).
        num_threads: torch threads for the run (restored afterwards).
        device: Where the method's data, models and acquisition live; the pool,
            the meta-training data and the observations are drawn and evaluated on
            the CPU (the same for every device) and moved there.

    Returns:
        A JSON-serializable record: per test task the queries and values, the
        pool's max and min (``optimum``, ``pool_min``) and the simple regret curve;
        their mean over test tasks per iteration (normalized if the problem says
        so), timings and settings, plus the method's own fields. cm-BO records add
        ``clustering_s`` (Stage 1-2 time without the meta-task GP fits), ``fit_s``
        (meta-task GP fits; measured once per split and process, see
        ``stage1_cached``), ``weight_update_s`` (one entry per weight update) and per
        task the ``weights`` after each update; ``pretrain_s`` is
        ``fit_s + clustering_s`` for them.
    """
    if iterations is not None and iterations < 1:  # an empty run reports nothing
        raise ValueError(f"`iterations` must be positive, got {iterations}.")
    policy = get_method(method, META)
    device = torch.device(device)
    # the run owns torch's global RNG too (BoTorch's fit retries and plugins draw
    # from it), so a record depends on the seed alone
    with torch_run_context(num_threads=num_threads, seed=seed, device=device):
        problem = (
            make_meta_problem(problem_name)
            if isinstance(problem_name, str)
            else problem_name
        )
        T = problem.iterations if iterations is None else iterations
        train_tasks, test_tasks = split_tasks(problem, seed)
        pool = split_pool(problem, seed)
        data = MetaData(
            pool.to(device),
            seed,
            partial(meta_training_data, problem, train_tasks, seed, device=device),
        )

        start = time.perf_counter()
        state = policy.setup(problem, data)
        wait_for(device)
        pretrain_s = time.perf_counter() - start

        per_task, times = [], []
        for task in test_tasks:
            per_task.append(
                _bo_on_test_task(
                    problem, policy, state, pool, task, seed, T, times, device
                )
            )
    regret = torch.tensor([t["simple_regret"] for t in per_task]).mean(0).tolist()
    return {
        "problem": problem.name,
        "method": method,
        "seed": seed,
        "iterations": T,
        "metric": "simple_regret",
        "normalized_regret": problem.normalize_regret,
        # index t: after t BO iterations (0 = initial points only)
        "simple_regret": regret,
        "tasks": per_task,
        "train_tasks": train_tasks,
        "test_tasks": test_tasks,
        "pretrain_s": pretrain_s,
        "iteration_s": times,
        "device": device.type,
        "environment": run_environment(),
        **policy.run_info(state),
        "settings": {
            "description": problem.description,
            "n_history": problem.n_history,
            "n_init": problem.n_init,
            "pool_size": problem.pool_size,
            "observation_noise": problem.observation_noise,
            "pretrain_steps": problem.pretrain_steps,
            "test_fraction": problem.test_fraction,
            **policy.settings(problem),
        },
    }
