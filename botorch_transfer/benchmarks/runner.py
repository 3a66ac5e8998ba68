r"""Run one (problem, method, seed) BO experiment and record its full trace."""

from __future__ import annotations

import importlib
import json
import math
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from botorch.acquisition import (
    LogExpectedImprovement,
    ProbabilityOfImprovement,
    UpperConfidenceBound,
)
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize, Standardize
from botorch.optim import optimize_acqf, optimize_acqf_discrete
from botorch.sampling.pathwise import draw_matheron_paths
from gpytorch.means import ZeroMean
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor

from botorch_transfer.benchmarks.problems import TransferProblem, make_problem
from botorch_transfer.data import TaskData
from botorch_transfer.models import DeltaBOModel, DiffGP, EnvGP, randomized_nn_thompson_candidate
from botorch_transfer.models.source_posterior import GPSourcePosterior


def _target_gp(problem: TransferProblem, X: Tensor, Y: Tensor) -> SingleTaskGP:
    return SingleTaskGP(
        X, Y, torch.full_like(Y, problem.target_noise), covar_module=problem.kernels["target"](problem.dim),
        mean_module=ZeroMean(), outcome_transform=None,
    )


def _maximize(problem: TransferProblem, acqf) -> Tensor:
    if problem.grid is not None:
        candidate, _ = optimize_acqf_discrete(acqf, q=1, choices=problem.grid, max_batch_size=4096)
    else:
        candidate, _ = optimize_acqf(acqf, bounds=problem.bounds, q=1, num_restarts=5, raw_samples=256)
    return candidate.detach()


def _policy(
    method: str, problem: TransferProblem, source_task: TaskData, source_posterior
) -> Callable[[Tensor, Tensor, torch.Generator], Tensor]:
    noise = problem.target_noise

    def deltabo(X, Y, gen, residual_covariance="diagonal"):
        model = DeltaBOModel(
            X, Y, source=source_posterior, train_Yvar=torch.full_like(Y, noise),
            delta_covar_module=problem.kernels["delta"](problem.dim),
            residual_covariance=residual_covariance,
        )
        return _maximize(problem, UpperConfidenceBound(model, beta=problem.beta))

    def deltabo_full(X, Y, gen):
        return deltabo(X, Y, gen, residual_covariance="full")

    def env_gp(X, Y, gen):
        # the paper's fixed kernel; the stretched source noise is learned
        model = EnvGP(
            X, Y, source=source_task, train_Yvar=torch.full_like(Y, noise),
            covar_module=problem.kernels["target"](problem.dim), mean_module=ZeroMean(),
        )
        if X.shape[0] > 0:
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        return _maximize(problem, UpperConfidenceBound(model, beta=problem.beta))

    def diff_gp(X, Y, gen):
        model = DiffGP(
            X, Y, source=source_task, train_Yvar=torch.full_like(Y, noise),
            covar_module=problem.kernels["target"](problem.dim), mean_module=ZeroMean(),
        )
        return _maximize(problem, UpperConfidenceBound(model, beta=problem.beta))

    def gp_ucb(X, Y, gen):
        return _maximize(problem, UpperConfidenceBound(_target_gp(problem, X, Y), beta=problem.beta))

    def gp_ei(X, Y, gen):
        return _maximize(problem, LogExpectedImprovement(_target_gp(problem, X, Y), best_f=Y.max()))

    def gp_pi(X, Y, gen):
        return _maximize(problem, ProbabilityOfImprovement(_target_gp(problem, X, Y), best_f=Y.max()))

    def gp_ts(X, Y, gen):
        # one posterior sample path (pathwise/Matheron), maximized over the grid or
        # over 4096 uniform candidates of a continuous domain
        path = draw_matheron_paths(_target_gp(problem, X, Y), sample_shape=torch.Size([1]))
        candidates = problem.grid if problem.grid is not None else problem.sample(4096, gen)
        with torch.no_grad():
            values = path(candidates).reshape(-1)
        return candidates[values.argmax()].unsqueeze(0)

    def randomized_nn(X, Y, gen, loss="squared"):
        # the paper's randomized policy (eq. 8 + eq. 10): one freshly initialized,
        # regularized MLP trained per step, maximized over the grid or the box
        domain = {"choices": problem.grid} if problem.grid is not None else {"bounds": problem.bounds}
        return randomized_nn_thompson_candidate(
            X, Y, **domain, loss=loss, seed=int(torch.randint(2**31, (1,), generator=gen)),
            input_transform=Normalize(problem.dim, bounds=problem.bounds),
            outcome_transform=Standardize(m=1) if loss == "squared" else None,
        )

    def randomized_nn_lfbo(X, Y, gen):
        return randomized_nn(X, Y, gen, loss="cross_entropy")

    def random(X, Y, gen):
        return problem.sample(1, gen)

    policies = {
        "deltabo": deltabo, "deltabo-full": deltabo_full, "envgp": env_gp, "diffgp": diff_gp,
        "gp-ucb": gp_ucb, "gp-ei": gp_ei, "gp-pi": gp_pi, "gp-ts": gp_ts,
        "rnn-ts": randomized_nn, "rnn-lfbo": randomized_nn_lfbo, "random": random,
    }
    if method in REGISTERED_METHODS:
        return REGISTERED_METHODS[method](problem, source_task)
    if method in FITTED_METHODS:
        return _fitted_policy(method, problem, source_task, source_posterior)
    if method not in policies:
        raise ValueError(f"Unknown method {method!r}; choose from {sorted(available_methods())}.")
    return policies[method]


#: Variants with BoTorch's default kernels and priors whose hyperparameters are fitted
#: by ``fit_gpytorch_mll`` every iteration (instead of the papers' fixed settings).
FITTED_METHODS = ("deltabo-fitted", "envgp-fitted", "diffgp-fitted", "gp-ucb-fitted", "gp-ei-fitted", "gp-pi-fitted")

METHODS = (
    "deltabo", "deltabo-full", "envgp", "diffgp", "gp-ucb", "gp-ei", "gp-pi", "gp-ts",
    "rnn-ts", "rnn-lfbo", "random", *FITTED_METHODS,
)


def _fitted_source_model(problem: TransferProblem, source_task: TaskData) -> SingleTaskGP:
    r"""The source GP of ``deltabo-fitted``: BoTorch defaults, fitted once per run."""
    model = SingleTaskGP(
        source_task.X, source_task.Y, source_task.Yvar, input_transform=Normalize(problem.dim, bounds=problem.bounds)
    )
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


def _fitted_policy(
    method: str, problem: TransferProblem, source_task: TaskData, source_model
) -> Callable[[Tensor, Tensor, torch.Generator], Tensor]:
    r"""``*-fitted`` methods: default kernels/priors, ``fit_gpytorch_mll`` every iteration,
    the same acquisition as the fixed-setting method (UCB with the problem's beta,
    LogEI, PI)."""
    base = method.removesuffix("-fitted")

    def policy(X, Y, gen):
        Yvar = torch.full_like(Y, problem.target_noise)
        # BoTorch's recommended setup for its default priors: inputs to the unit cube
        inputs = {"input_transform": Normalize(problem.dim, bounds=problem.bounds)}
        if base == "deltabo":
            # standardized like the other fitted models (BoTorch's default): the delta
            # GP's default kernel then has a prior amplitude on the scale of the data
            model = DeltaBOModel(
                X, Y, source=source_model, train_Yvar=Yvar, outcome_transform=Standardize(m=1), **inputs
            )
        elif base == "envgp":
            model = EnvGP(X, Y, source=source_task, train_Yvar=Yvar, outcome_transform=Standardize(m=1), **inputs)
        elif base == "diffgp":
            model = DiffGP(X, Y, source=source_task, train_Yvar=Yvar, outcome_transform=Standardize(m=1), **inputs)
        else:
            model = SingleTaskGP(X, Y, Yvar, **inputs)
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        if base == "gp-ei":
            acqf = LogExpectedImprovement(model, best_f=Y.max())
        elif base == "gp-pi":
            acqf = ProbabilityOfImprovement(model, best_f=Y.max())
        else:
            acqf = UpperConfidenceBound(model, beta=problem.beta)
        return _maximize(problem, acqf)

    return policy

#: Methods added with :func:`register_method` (name -> policy factory).
REGISTERED_METHODS: dict[str, Callable[[TransferProblem, TaskData], Callable[[Tensor, Tensor, torch.Generator], Tensor]]] = {}


def register_method(
    name: str,
    factory: Callable[[TransferProblem, TaskData], Callable[[Tensor, Tensor, torch.Generator], Tensor]],
) -> None:
    r"""Add a method to the source/target benchmarks (one line per new model).

    Args:
        name: The method's name on the command line (lower case, hyphens).
        factory: ``factory(problem, source_task) -> policy``, called once per run;
            ``policy(X, Y, generator)`` returns the next ``1 x d`` query given the
            target data so far. :func:`maximize` optimizes an acquisition function
            the way the built-in methods do (grid or continuous domain).

    Example:
        >>> register_method("mhgp", lambda problem, source: lambda X, Y, gen: maximize(
        ...     problem, UpperConfidenceBound(MeanTransferGP(X, Y, source=source), beta=problem.beta)))

    To use a registered method from the command line, put the registration in an
    importable module and pass ``--plugin MODULE`` (it is imported in every worker).
    """
    if not name or name != name.lower() or " " in name:
        raise ValueError(f"`name` must be lower case without spaces, got {name!r}.")
    if name in METHODS:
        raise ValueError(f"`name` {name!r} is a built-in method.")
    REGISTERED_METHODS[name] = factory


def available_methods() -> tuple[str, ...]:
    r"""Built-in and registered source/target methods."""
    return METHODS + tuple(m for m in REGISTERED_METHODS if m not in METHODS)


def maximize(problem: TransferProblem, acqf) -> Tensor:
    r"""Maximize ``acqf`` over the problem's domain: ``optimize_acqf_discrete`` on a grid
    problem, ``optimize_acqf`` (5 restarts, 256 raw samples) on a continuous one."""
    return _maximize(problem, acqf)


def run_experiment(
    problem_name: str | TransferProblem, method: str, seed: int, iterations: int | None = None
) -> dict:
    r"""Run ``iterations`` BO steps of ``method`` on ``problem_name`` with ``seed``.

    The source data, the initial target points and all observation noise depend on
    ``seed`` only (not on the method), so methods are compared on the same draws.

    Args:
        problem_name: A registered problem name, or a ``TransferProblem``.
        method: One of ``METHODS``.
        seed: Random seed.
        iterations: Number of BO iterations (the problem's default if ``None``).

    Returns:
        A JSON-serializable record with the query/observation trace, the
        instantaneous and cumulative regret, timings and settings.
    """
    torch.set_num_threads(1)
    problem = make_problem(problem_name, seed) if isinstance(problem_name, str) else problem_name
    problem_name = problem.name
    T = problem.iterations if iterations is None else iterations
    gen = torch.Generator().manual_seed(seed)
    noise_gen = torch.Generator().manual_seed(seed + 10_000)

    def observe(f_x: Tensor, noise: float, generator: torch.Generator) -> Tensor:
        if not problem.noisy_observations:
            return f_x
        return f_x + math.sqrt(noise) * torch.randn(f_x.shape, generator=generator, dtype=torch.float64)

    X_s = problem.sample(problem.n_source, gen)
    Y_s = observe(problem.source(X_s), problem.source_noise, gen)
    X = problem.sample(problem.n_init, gen)
    Y = observe(problem.target(X), problem.target_noise, gen)
    policy_gen = torch.Generator().manual_seed(seed + 20_000)
    torch.manual_seed(seed)

    start = time.perf_counter()
    source_posterior = None
    if method == "deltabo-fitted":
        source_posterior = _fitted_source_model(
            problem, TaskData(X_s, Y_s, torch.full_like(Y_s, problem.source_noise))
        )
    elif method.startswith("deltabo"):
        source_posterior = GPSourcePosterior(
            X_s, Y_s, torch.full((X_s.shape[0],), problem.source_noise, dtype=torch.float64),
            problem.kernels["source"](problem.dim),
        )
    setup_s = time.perf_counter() - start
    source_task = TaskData(X_s, Y_s, torch.full_like(Y_s, problem.source_noise))
    policy = _policy(method, problem, source_task, source_posterior)
    f_star = problem.optimum()

    queries, observations, values, times = [], [], [], []
    for _ in range(T):
        start = time.perf_counter()
        x = policy(X, Y, policy_gen)
        times.append(time.perf_counter() - start)
        f_x = problem.target(x)
        y = observe(f_x, problem.target_noise, noise_gen)
        X, Y = torch.cat([X, x]), torch.cat([Y, y])
        queries.append(x.squeeze(0).tolist())
        observations.append(float(y))
        values.append(float(f_x))
    # unknown optimum (HPO): regret is computed at report time from the best value any run found
    regret = None if f_star is None else [f_star - v for v in values]
    cumulative = None if regret is None else torch.tensor(regret).cumsum(0).tolist()
    return {
        "problem": problem_name,
        "method": method,
        "seed": seed,
        "iterations": T,
        "queries": queries,
        "observations": observations,
        "values": values,
        "regret": regret,
        "cumulative_regret": cumulative,
        "optimum": f_star,
        "optimum_is_exact": problem.grid is not None and f_star is not None,
        "setup_s": setup_s,
        "iteration_s": times,
        "settings": {
            "description": problem.description,
            "n_source": problem.n_source,
            "n_init": problem.n_init,
            "beta": problem.beta,
            "source_noise": problem.source_noise,
            "target_noise": problem.target_noise,
        },
    }


def safe_run_experiment(
    problem_name: str, method: str, seed: int, iterations: int | None = None, plugins: Sequence[str] = ()
) -> dict:
    r"""``run_experiment`` (or, for a meta-learning problem, ``run_meta_experiment``),
    but a failure is returned as a record with its error. ``plugins`` are modules
    imported first (they register methods; imported here so that every worker
    process has them)."""
    from botorch_transfer.benchmarks.meta import META_PROBLEMS, run_meta_experiment

    try:
        for module in plugins:
            importlib.import_module(module)
        if problem_name in META_PROBLEMS:
            return run_meta_experiment(problem_name, method, seed, iterations)
        return run_experiment(problem_name, method, seed, iterations)
    except Exception as e:  # a failed run is recorded; the sweep goes on
        return {
            "problem": problem_name, "method": method, "seed": seed,
            "error": repr(e), "traceback": traceback.format_exc(),
        }


def load_results(path: Path) -> tuple[list[dict], int]:
    r"""Read a JSONL results file; returns ``(records, n_corrupt_lines)``.

    A corrupt line (e.g. the last line of an interrupted sweep) is skipped and
    counted, never fatal.
    """
    records, corrupt = [], 0
    if not path.exists():
        return records, corrupt
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            corrupt += 1
    return records, corrupt
