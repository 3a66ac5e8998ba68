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
record is one point of the regret curve's distribution over seeds. Problems with
``normalize_regret=True`` (``rbv2-xgboost``, cm-BO Sec. 4.1) report the normalized
simple regret ``(max_pool f - best so far) / (max_pool f - min_pool f)`` instead;
:func:`botorch_transfer.benchmarks.report.rank_and_solved` adds cm-BO's average rank
and fraction of runs with regret below 0.005.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
from botorch.acquisition import ProbabilityOfImprovement, UpperConfidenceBound
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.optim import optimize_acqf_discrete
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor

from botorch_transfer.data import TaskData
from botorch_transfer.clustering import (
    ClusterMetaPrior,
    MetaTaskPosteriors,
    build_cluster_prior,
    meta_task_posteriors,
)
from botorch_transfer.models.cluster_meta import ClusterMetaPriorGP
from botorch_transfer.models.pretrained import (
    PretrainedPriorGP,
    hyperbo_probability_of_improvement,
)
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
        normalize_regret: Report the normalized simple regret
            ``(max_pool f - best so far) / (max_pool f - min_pool f)`` (cm-BO Sec. 4.1)
            instead of the plain simple regret.
        cmbo_n_clusters: Number of cm-BO clusters ``C``; ``None`` selects it in
            ``2..6`` by the paper's inter/intra criterion (eqs. 10-11).
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
    :class:`~botorch_transfer.benchmarks.yahpo.YahpoSurrogate`. The candidate pool
    has 300 points, the size of the grid of the paper's timing report (Sec. 4.1), which
    keeps the Wasserstein barycenter on it affordable. The surrogate is noise-free.

    cm-BO uses ``C = 3`` clusters (deviation: the paper tunes ``C`` in ``2..6``
    per search space by eqs. 10-11; that selection, ``cmbo_n_clusters=None``, took
    16 s with Jeffreys but over 4 minutes with the Wasserstein distance on ~100
    meta-tasks, per split and variant, on one shared CPU core).
    """
    from botorch_transfer.benchmarks.yahpo import YahpoSurrogate

    bench = YahpoSurrogate("rbv2_xgboost", target)

    def evaluate(task: int, X: Tensor) -> Tensor:
        return bench(bench.instances[task], X)

    return MetaProblem(
        name="rbv2-xgboost",
        description=f"rbv2_xgboost (YAHPO surrogate): {len(bench.instances)} tasks, booster + 12 XGBoost hyperparameters, {target}",
        dim=bench.dim, n_tasks=len(bench.instances), evaluate=evaluate, n_history=50,
        observation_noise=0.0, pool_size=300, iterations=50, n_init=5, test_fraction=0.15,
        normalize_regret=True, cmbo_n_clusters=3,
    )


META_PROBLEMS: dict[str, Callable[[], MetaProblem]] = {
    "gp-tasks": gp_tasks, "lcbench": lcbench, "rbv2-xgboost": rbv2_xgboost,
}
#: cm-BO variants: ``cmbo-{prototype}-{distance}``; the distance is used both for
#: clustering and for the weight updates (the paper's JefClus_JefCMP,
#: WssClus_WssCMP and WssClus_WssCMP_Bary; the barycenter with Jeffreys is an extra).
CMBO_METHODS = {
    "cmbo-center-w2": ("center", "wasserstein"),
    "cmbo-center-jeffreys": ("center", "jeffreys"),
    "cmbo-barycenter-w2": ("barycenter", "wasserstein"),
    "cmbo-barycenter-jeffreys": ("barycenter", "jeffreys"),
}
META_METHODS = ("random", "stbo", "gp-ucb", "hyperbo-nll", "hyperbo-ekl", *CMBO_METHODS)

#: cm-BO GP-UCB: ``mu + xi sigma`` with ``xi = 3`` (Sec. 4.1, following HyperBO);
#: BoTorch's ``beta`` multiplies the variance, so ``beta = xi^2``.
CMBO_UCB_XI = 3.0
#: Known target noise variance floor of the cm-BO GP (user units). A learned noise
#: level soaks up the misfit of the prior and the weights then barely move, so
#: the GP gets ``max(observation_noise, CMBO_NOISE_FLOOR)`` as known noise.
CMBO_NOISE_FLOOR = 1e-6


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


# Stage-1 fits (one GP per meta-task) do not depend on the cm-BO variant: reuse them
# across the variants run in one process. Key: (id of the problem's evaluate, seed);
# the value keeps ``evaluate`` alive so that its id is not reused.
_STAGE1_CACHE: dict[tuple[int, int], tuple[Callable, MetaTaskPosteriors, float]] = {}
_STAGE1_CACHE_SIZE = 8


def _stage1_posteriors(problem: MetaProblem, history: list[TaskData], seed: int) -> tuple[MetaTaskPosteriors, float, bool]:
    r"""Meta-task posteriors of the split (cached), their fit time and whether cached."""
    key = (id(problem.evaluate), seed)
    if key in _STAGE1_CACHE:
        _, posteriors, fit_s = _STAGE1_CACHE[key]
        return posteriors, fit_s, True
    start = time.perf_counter()
    bounds = torch.stack([torch.zeros(problem.dim), torch.ones(problem.dim)]).to(torch.float64)
    posteriors = meta_task_posteriors(history, bounds)
    fit_s = time.perf_counter() - start
    if len(_STAGE1_CACHE) >= _STAGE1_CACHE_SIZE:
        _STAGE1_CACHE.pop(next(iter(_STAGE1_CACHE)))
    _STAGE1_CACHE[key] = (problem.evaluate, posteriors, fit_s)
    return posteriors, fit_s, False


def cmbo_prior(problem: MetaProblem, method: str, history: list[TaskData], pool: Tensor, seed: int) -> tuple[ClusterMetaPrior, dict[str, Any]]:
    r"""Stages 1-2 of cm-BO (Alg. 1 lines 3-11) for one split.

    Index points: 100 scrambled Sobol points for the ``center`` prototype (Sec. 4.1:
    "the number of observed locations for the finite index space is set to 100");
    the candidate pool for the ``barycenter`` prototype, which only exists on its
    index points and must cover every point BO may query (deviation: the paper does
    not say which locations its barycenter uses).

    Args:
        problem: The meta problem (``cmbo_n_clusters``: ``C`` or ``None`` to select
            it in ``2..6`` by eqs. 10-11).
        method: A key of ``CMBO_METHODS``.
        history: The meta-training tasks.
        pool: The split's candidate pool.
        seed: Seed of the index points and k-means.

    Returns:
        The prior and timings ``{"fit_s", "clustering_s", "stage1_cached"}``
        (``clustering_s``: discretization, k-means and prototypes).
    """
    if method not in CMBO_METHODS:
        raise ValueError(f"`method` must be one of {list(CMBO_METHODS)}, got {method!r}.")
    prototype, distance = CMBO_METHODS[method]
    posteriors, fit_s, cached = _stage1_posteriors(problem, history, seed)
    start = time.perf_counter()
    prior = build_cluster_prior(
        history, index_points=pool if prototype == "barycenter" else None, n_clusters=problem.cmbo_n_clusters,
        distance=distance, prototype=prototype, seed=seed, posteriors=posteriors,
    )
    return prior, {"fit_s": fit_s, "clustering_s": time.perf_counter() - start, "stage1_cached": cached}


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
    objective, PI with threshold ``max(y) + 0.1`` in the prior's standardized units);
    ``cmbo-{center,barycenter}-{w2,jeffreys}`` (cm-BO, Alg. 1: :func:`cmbo_prior` once
    per split, then every iteration a :class:`ClusterMetaPriorGP` with the current
    cluster weights (uniform at first, line 13) and known noise
    ``max(observation_noise, CMBO_NOISE_FLOOR)``, GP-UCB with ``xi = 3`` (Sec. 4.1)
    over the pool points not yet queried (a confident prior would otherwise re-pick
    the same point), then the weight update of lines 19-21 with the variant's
    distance after the new observation).

    Args:
        problem_name: A registered meta problem name, or a ``MetaProblem``.
        method: One of ``META_METHODS``.
        seed: Seed of the task split, the meta-training data, the pool and the BO runs.
        iterations: BO iterations per test task (default: the problem's).

    Returns:
        A JSON-serializable record: per test task the queries and values, the mean
        simple regret over test tasks per iteration (normalized if the problem says
        so), timings and settings. cm-BO records add ``clustering_s`` (Stage 1-2
        time without the meta-task GP fits), ``fit_s`` (meta-task GP fits; measured
        once per split and process, see ``stage1_cached``), ``weight_update_s`` (one
        entry per weight update) and per task the ``weights`` after each update;
        ``pretrain_s`` is ``fit_s + clustering_s`` for them.
    """
    if method not in META_METHODS:
        raise ValueError(f"Unknown meta-learning method {method!r}; choose from {list(META_METHODS)}.")
    torch.set_num_threads(1)
    problem = make_meta_problem(problem_name) if isinstance(problem_name, str) else problem_name
    T = problem.iterations if iterations is None else iterations
    train_tasks, test_tasks = _split(problem, seed)
    pool = torch.rand(problem.pool_size, problem.dim, generator=torch.Generator().manual_seed(seed + 2), dtype=torch.float64)

    start = time.perf_counter()
    prior = cluster_prior = None
    cmbo_info: dict[str, Any] = {}
    if method.startswith("hyperbo"):
        history = meta_training_data(problem, train_tasks, seed)
        objective = method.split("-")[1]
        prior = pretrain_prior(
            history, objective=objective, num_steps=problem.pretrain_steps if objective == "nll" else None,
            lr=5e-3, seed=seed, progress=False,
        )
    pretrain_s = time.perf_counter() - start
    if method in CMBO_METHODS:
        history = meta_training_data(problem, train_tasks, seed)
        cluster_prior, cmbo_info = cmbo_prior(problem, method, history, pool, seed)
        pretrain_s = cmbo_info["fit_s"] + cmbo_info["clustering_s"]
        cmbo_info["n_clusters"] = cluster_prior.n_clusters
        cmbo_info["cluster_sizes"] = cluster_prior.cluster_sizes.tolist()
        cmbo_info["weight_update_s"] = []
    noise_var = max(problem.observation_noise, CMBO_NOISE_FLOOR)

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
        weights = None  # cm-BO: uniform 1/C (Alg. 1 line 13)
        weight_history = []
        for _ in range(T):
            t0 = time.perf_counter()
            X, Y = pool[idx], torch.tensor(ys, dtype=torch.float64).unsqueeze(-1)
            if method == "random":
                nxt = int(torch.randint(problem.pool_size, (1,), generator=policy_gen))
            elif method in CMBO_METHODS:
                model = ClusterMetaPriorGP(X, Y, torch.full_like(Y, noise_var), prior=cluster_prior, weights=weights)
                free = torch.ones(problem.pool_size, dtype=torch.bool)
                free[idx] = False
                if not free.any():
                    raise RuntimeError("cm-BO queried every pool point; increase `pool_size` or lower `iterations`.")
                acqf = UpperConfidenceBound(model, beta=CMBO_UCB_XI**2)
                best, _ = optimize_acqf_discrete(acqf, q=1, choices=pool[free], max_batch_size=2048)
                nxt = int(((pool - best).abs().sum(-1)).argmin())
                # Alg. 1 lines 19-21: distances of GP^(tau) (this model) to the prototypes
                t1 = time.perf_counter()
                weights = model.updated_weights()
                cmbo_info["weight_update_s"].append(time.perf_counter() - t1)
                weight_history.append(weights.tolist())
            else:
                if method == "stbo":
                    model = _single_task_gp(X, Y)
                    scale = Y.std().clamp_min(1e-6) if Y.shape[0] > 1 else torch.ones((), dtype=Y.dtype)
                    acqf = ProbabilityOfImprovement(model, best_f=Y.max() + 0.1 * scale)
                elif method == "gp-ucb":
                    acqf = UpperConfidenceBound(_single_task_gp(X, Y), beta=1.8**2)
                else:
                    model = PretrainedPriorGP(X, Y, prior=prior)
                    acqf = hyperbo_probability_of_improvement(model, margin=0.1 * prior.mean_module.scale.item())
                best, _ = optimize_acqf_discrete(acqf, q=1, choices=pool, max_batch_size=2048)
                nxt = int(((pool - best).abs().sum(-1)).argmin())
            times.append(time.perf_counter() - t0)
            idx.append(nxt)
            ys.append(observe(nxt))
        values = f_pool[idx, 0]
        best_so_far = values.cummax(0).values[problem.n_init - 1 :]  # after init, then after each iteration
        regret = f_star - best_so_far
        f_min = f_pool.min().item()
        if problem.normalize_regret:
            regret = regret / max(f_star - f_min, 1e-12)
        entry = {
            "task": task, "optimum": f_star, "pool_min": f_min, "queries": idx, "observations": ys,
            "values": values.tolist(), "simple_regret": regret.tolist(),
        }
        if method in CMBO_METHODS:
            entry["weights"] = weight_history
        per_task.append(entry)
    regret = torch.tensor([t["simple_regret"] for t in per_task]).mean(0).tolist()
    return {
        "problem": problem.name, "method": method, "seed": seed, "iterations": T,
        "metric": "simple_regret", "normalized_regret": problem.normalize_regret,
        "simple_regret": regret,  # index t: after t BO iterations (0 = initial points only)
        "tasks": per_task, "train_tasks": train_tasks, "test_tasks": test_tasks,
        "pretrain_s": pretrain_s, "iteration_s": times, **cmbo_info,
        "settings": {
            "description": problem.description, "n_history": problem.n_history, "n_init": problem.n_init,
            "pool_size": problem.pool_size, "observation_noise": problem.observation_noise,
            "pretrain_steps": problem.pretrain_steps, "test_fraction": problem.test_fraction,
            **({"ucb_xi": CMBO_UCB_XI, "noise_var": noise_var, "n_clusters_setting": problem.cmbo_n_clusters}
               if method in CMBO_METHODS else {}),
        },
    }
