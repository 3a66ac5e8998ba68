r"""Timed BO iterations of one registered method, each configuration in a fresh
process: the data of the timing pair, the iterations' medians and peak memory,
and where an iteration's time goes (fit and acquisition evaluations)."""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import statistics
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any

import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models.model import Model
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor

from benchmarks.context import (
    torch_run_context,
    wait_for,
)
from benchmarks.methods import (
    TRANSFER,
    Method,
    TransferData,
    get_method,
)
from benchmarks.timing_problem import (
    SOURCE_NOISE,
    T_TARGET,
    TARGET_NOISE,
    source_function,
    target_function,
    timing_problem,
)
from benchmarks.transfer_methods import hyperparameters
from benchmarks.transfer_protocol import AcquisitionMethod, TransferState, maximize
from botorch_transfer.data import TaskData
from botorch_transfer.models.source_posterior import GPSourcePosterior
from botorch_transfer.test_functions.base import TransferProblem

#: Methods timed by default; the first is the baseline of the ratio columns.
METHODS = (
    "gp-ucb-fitted",
    "deltabo-fitted",
    "deltabo-fitted-source-gp",
    "pooled-gp-fitted",
    "envgp-fitted",
    "diffgp-fitted",
    "envgp-fitted-low-rank",
    "diffgp-fitted-low-rank",
)
#: Source points the hyperparameters of large models are fitted with.
SUBSET_N = 1000


def n_train(model: Model) -> int:
    train_inputs = getattr(model, "train_inputs", None)
    return 0 if not train_inputs else train_inputs[0].shape[-2]


def frozen_if_large(
    method: Method, state: TransferState, X: Tensor, Y: Tensor, max_fit_n: int
) -> Method | None:
    r"""If ``method`` fits a model of more than ``max_fit_n`` training points every
    iteration: the same method with hyperparameters fitted once with a
    ``SUBSET_N``-point source subset and loaded every iteration (else ``None``).

    A model whose kernel is frozen (``kernel_is_frozen``, e.g. a kernel fitted once on
    the source) is re-fitted at any size, as a user would run it: its fit moves the
    transfer parameters only, and keeping that affordable at large ``N`` is its
    point."""
    if not (isinstance(method, AcquisitionMethod) and method.fit):
        return None
    model = method.model(state, X, Y)
    if n_train(model) <= max_fit_n or getattr(model, "kernel_is_frozen", False):
        return None
    source = state.source
    subset = torch.randperm(source.X.shape[0])[:SUBSET_N]
    small = TaskData(source.X[subset], source.Y[subset], source.Yvar[subset])
    model = method.model(replace(state, source=small), X, Y)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    parameters = hyperparameters(model)

    def loaded(state: TransferState, X: Tensor, Y: Tensor) -> Model:
        m = method.model(state, X, Y)
        m.load_state_dict(parameters, strict=False)
        return m

    return AcquisitionMethod(loaded, method.acquisition, fit=False)


def device_clock(device: torch.device) -> float:
    r"""``time.perf_counter()`` once the device's queued work is done (CUDA kernels
    run asynchronously)."""
    wait_for(device)
    return time.perf_counter()


def timing_data(
    dim: int, n_source: int, seed: int, device: torch.device, n_sources: int = 1
) -> tuple[TransferProblem, TransferData, Tensor, Tensor]:
    r"""The timing pair's problem, ``n_sources`` sources of ``n_source`` observations
    each and ``T_TARGET`` initial target observations (drawn on the CPU from torch's
    global RNG, so a seed gives the same data on every device). The ``k``-th further
    source is the source function shifted by ``0.1 k`` along its first input."""
    problem = timing_problem(dim, n_source).with_domain_on(device)
    sources = []
    for k in range(n_sources):
        X_s = torch.rand(n_source, dim, dtype=torch.float64)
        noise = SOURCE_NOISE**0.5 * torch.randn(n_source, 1, dtype=torch.float64)
        shift = torch.zeros(dim, dtype=torch.float64)
        shift[0] = 0.1 * k
        Y_s = (source_function(X_s + shift) + noise).to(device)
        sources.append(
            TaskData(
                X_s.to(device),
                Y_s,
                torch.full_like(Y_s, SOURCE_NOISE),
                name=f"source-{k}",
            )
        )
    X = torch.rand(T_TARGET, dim, dtype=torch.float64)
    noise = TARGET_NOISE**0.5 * torch.randn(T_TARGET, 1, dtype=torch.float64)
    Y = target_function(X) + noise
    X, Y = X.to(device), Y.to(device)
    data = TransferData(
        sources[0],
        torch.Generator().manual_seed(seed + 20_000),
        extra_sources=tuple(sources[1:]),
    )
    return problem, data, X, Y


def run_config(
    method: str,
    dim: int,
    n_source: int,
    iterations: int,
    seed: int,
    max_fit_n: int,
    frozen_iterations: int | None = None,
    device: str = "cpu",
    n_sources: int = 1,
) -> dict:
    r"""Time BO iterations of one registered method in this (fresh) process.

    Args:
        method: A registered ``"transfer"`` method name.
        dim: Input dimension.
        n_source: Number of source points.
        iterations: BO iterations to time.
        seed: Seed of the data and of torch's global RNG.
        max_fit_n: Largest training set a model is re-fitted on every iteration.
        frozen_iterations: Iterations to time for a model that is not re-fitted
            (default: ``iterations``).
        device: Where the data, the models and the acquisition live (the data are
            drawn on the CPU, so a seed gives the same data everywhere).
        n_sources: Number of sources, each of ``n_source`` points (a method that
            takes one source uses the first).

    Returns:
        ``{"method", "dim", "N", "sources", "device", "refit", "setup_s",
        "first_iteration_s", "iteration_s", "peak_rss_mb", "rss_increase_mb",
        "peak_device_mb", "source_rank"}``
        (``iteration_s``: the median; ``peak_device_mb``: CUDA memory, else
        ``None``).
    """
    warnings.filterwarnings("ignore")
    policy = get_method(method, TRANSFER)
    device = torch.device(device)

    clock = partial(device_clock, device)
    with torch_run_context(num_threads=2, seed=seed):
        problem, data, X, Y = timing_data(dim, n_source, seed, device, n_sources)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        result = {
            "method": method,
            "dim": dim,
            "N": n_source,
            "sources": n_sources,
            "device": device.type,
            "refit": True,
        }
        baseline_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

        start = clock()
        state = policy.setup(problem, data)
        result["setup_s"] = clock() - start
        source_model = getattr(state, "source_model", None)
        is_gp = isinstance(source_model, GPSourcePosterior)
        result["source_rank"] = source_model.rank if is_gp else None

        frozen = frozen_if_large(policy, state, X, Y, max_fit_n)
        if frozen is not None:
            policy, result["refit"] = frozen, False
            iterations = iterations if frozen_iterations is None else frozen_iterations

        times = []
        for _ in range(iterations):
            start = clock()
            candidate = policy.propose(state, X, Y)
            times.append(clock() - start)
            X = torch.cat([X, candidate])
            Y = torch.cat([Y, target_function(candidate)])
    # the first iteration may fit what a method keeps (a source GP per source)
    result["first_iteration_s"] = times[0]
    # median: one iteration's L-BFGS fit can take several times another's
    result["iteration_s"] = sorted(times)[len(times) // 2]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result["peak_rss_mb"] = peak / 1024
    result["rss_increase_mb"] = (peak - baseline_rss) / 1024
    result["peak_device_mb"] = (
        torch.cuda.max_memory_allocated(device) / 2**20
        if device.type == "cuda"
        else None
    )
    return result


def run_breakdown(
    method: str, dim: int, n_source: int, iterations: int, seed: int, device: str
) -> dict:
    r"""Where the BO iterations of a re-fitted acquisition method spend their time:
    the hyperparameter fit and the acquisition's maximization, each with its
    number of evaluations (of the marginal likelihood, of the acquisition function).

    The iterations are those of :func:`run_config` (same data, same steps as the
    method's ``propose``), timed phase by phase; the first is left out of the
    medians (it warms up caches and kernels).

    Args:
        method: A registered ``"transfer"`` method that builds a model, fits it with
            ``fit_gpytorch_mll`` and maximizes an acquisition (no guard).
        dim: Input dimension.
        n_source: Number of source points.
        iterations: BO iterations to run (at least 2).
        seed: Seed of the data and of torch's global RNG.
        device: Where the data, the models and the acquisition live.

    Returns:
        ``{"method", "fit_s", "fit_evaluations", "acquisition_s",
        "acquisition_evaluations", "iteration_s"}``: medians per iteration
        (``iteration_s`` includes building the model).
    """
    policy = get_method(method, TRANSFER)
    if not (isinstance(policy, AcquisitionMethod) and policy.fit and not policy.guard):
        raise ValueError(
            f"`method` must be a re-fitted acquisition method without a guard; "
            f"{method!r} is not."
        )
    if iterations < 2:
        raise ValueError(f"`iterations` must be at least 2, got {iterations}.")
    warnings.filterwarnings("ignore")
    device = torch.device(device)

    clock = partial(device_clock, device)

    def counted(module: torch.nn.Module, counter: list) -> None:
        # wraps the instance's forward: GPyTorch's modules skip torch's call hooks
        forward = module.forward

        def counting(*args: Any, **kwargs: Any) -> Any:
            counter.append(None)
            return forward(*args, **kwargs)

        module.forward = counting

    phases = []
    with torch_run_context(num_threads=2, seed=seed):
        problem, data, X, Y = timing_data(dim, n_source, seed, device)
        state = policy.setup(problem, data)
        for _ in range(iterations):
            fit_calls, acquisition_calls = [], []
            start = clock()
            model = policy.model(state, X, Y)
            mll = ExactMarginalLogLikelihood(model.likelihood, model)
            counted(mll, fit_calls)
            fit_start = clock()
            fit_gpytorch_mll(mll)
            fitted = clock()
            acqf = policy.acquisition(model, state.problem, X, Y)
            counted(acqf, acquisition_calls)
            candidate = maximize(state.problem, acqf)
            done = clock()
            phases.append(
                {
                    "fit_s": fitted - fit_start,
                    "fit_evaluations": len(fit_calls),
                    "acquisition_s": done - fitted,
                    "acquisition_evaluations": len(acquisition_calls),
                    "iteration_s": done - start,
                }
            )
            X = torch.cat([X, candidate])
            Y = torch.cat([Y, target_function(candidate)])
        phases = phases[1:]
    return {
        "method": method,
        **{key: statistics.median(p[key] for p in phases) for key in phases[0]},
    }


def at_baseline_cost(method: dict, baseline: dict) -> float:
    r"""The per-iteration ratio ``method`` / ``baseline`` if each of ``method``'s
    evaluations cost what one of ``baseline``'s does (results of
    :func:`run_breakdown`): its fit evaluations at the baseline's cost per fit
    evaluation, its acquisition evaluations at the baseline's cost per acquisition
    evaluation. What is left of the ratio when only the number of optimizer steps
    differs: a floor for any implementation of ``method``'s model on these data
    whose evaluations are no cheaper than the baseline's.

    Args:
        method: The breakdown of the method.
        baseline: The breakdown of the baseline.

    Returns:
        The ratio.
    """

    def per_evaluation(phase: str) -> float:
        return baseline[f"{phase}_s"] / max(baseline[f"{phase}_evaluations"], 1)

    cost = sum(
        method[f"{phase}_evaluations"] * per_evaluation(phase)
        for phase in ("fit", "acquisition")
    )
    return cost / baseline["iteration_s"]


def in_process(function: callable, *args: Any) -> Any:
    r"""``function(*args)`` in a fresh (spawned) process: timings and peak memory
    of one configuration are not affected by another."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(function, *args).result()


def config_in_process(
    args: argparse.Namespace,
    method: str,
    dim: int,
    n: int,
    max_fit_n: int | None = None,
    n_sources: int = 1,
) -> dict:
    r""":func:`run_config` with the command line's settings, in a fresh process."""
    return in_process(
        run_config,
        method,
        dim,
        n,
        args.iterations,
        args.seed,
        args.max_fit_n if max_fit_n is None else max_fit_n,
        args.large_n_iterations,
        str(args.device),
        n_sources,
    )
