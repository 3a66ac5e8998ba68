r"""The source/target (``"transfer"``) protocol: run one (problem, method, seed) BO
experiment and record its full trace; the CLI's worker entry point; results files.

A results file holds one JSON record per line; :func:`read_results` skips the lines
that are not run records.
"""

from __future__ import annotations

import importlib
import json
import math
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from botorch_transfer.benchmarks.context import torch_run_context
from botorch_transfer.benchmarks.meta import META_PROBLEMS, run_meta_experiment
from botorch_transfer.benchmarks.methods import TRANSFER, TransferData, get_method
from botorch_transfer.benchmarks.problems import TransferProblem, make_problem
from botorch_transfer.data import TaskData


def run_experiment(
    problem_name: str | TransferProblem,
    method: str,
    seed: int,
    iterations: int | None = None,
    *,
    num_threads: int = 1,
) -> dict:
    r"""Run ``iterations`` BO steps of ``method`` on ``problem_name`` with ``seed``.

    The source data, the initial target points and all observation noise depend on
    ``seed`` only (not on the method), so methods are compared on the same draws.
    The run seeds torch's global RNG with ``seed`` and uses ``num_threads`` threads;
    both are restored afterwards.

    Args:
        problem_name: A registered problem name, or a ``TransferProblem``.
        method: A registered ``"transfer"`` method name (see
            :func:`~botorch_transfer.benchmarks.methods.available_methods`).
        seed: Random seed.
        iterations: Number of BO iterations (the problem's default if ``None``).
        num_threads: torch threads for the run.

    Returns:
        A JSON-serializable record with the query/observation trace, the
        instantaneous and cumulative regret, timings and settings.
    """
    policy = get_method(method, TRANSFER)
    with torch_run_context(num_threads=num_threads, seed=seed):
        problem = (
            make_problem(problem_name, seed)
            if isinstance(problem_name, str)
            else problem_name
        )
        T = problem.iterations if iterations is None else iterations
        gen = torch.Generator().manual_seed(seed)
        noise_gen = torch.Generator().manual_seed(seed + 10_000)

        def observe(f_x: Tensor, noise: float, generator: torch.Generator) -> Tensor:
            if not problem.noisy_observations:
                return f_x
            return f_x + math.sqrt(noise) * torch.randn(
                f_x.shape, generator=generator, dtype=torch.float64
            )

        X_s = problem.sample(problem.n_source, gen)
        Y_s = observe(problem.source(X_s), problem.source_noise, gen)
        X = problem.sample(problem.n_init, gen)
        Y = observe(problem.target(X), problem.target_noise, gen)
        source = TaskData(X_s, Y_s, torch.full_like(Y_s, problem.source_noise))
        data = TransferData(
            source, generator=torch.Generator().manual_seed(seed + 20_000)
        )

        start = time.perf_counter()
        state = policy.setup(problem, data)
        setup_s = time.perf_counter() - start
        f_star = problem.optimum()

        queries, observations, values, times = [], [], [], []
        for _ in range(T):
            start = time.perf_counter()
            x = policy.propose(state, X, Y)
            times.append(time.perf_counter() - start)
            f_x = problem.target(x)
            y = observe(f_x, problem.target_noise, noise_gen)
            X, Y = torch.cat([X, x]), torch.cat([Y, y])
            queries.append(x.squeeze(0).tolist())
            observations.append(float(y))
            values.append(float(f_x))
    # unknown optimum (HPO): regret is computed at report time from the best value
    # any run found
    regret = None if f_star is None else [f_star - v for v in values]
    cumulative = None if regret is None else torch.tensor(regret).cumsum(0).tolist()
    return {
        "problem": problem.name,
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
    problem_name: str,
    method: str,
    seed: int,
    iterations: int | None = None,
    plugins: Sequence[str] = (),
) -> dict:
    r"""``run_experiment`` (or, for a meta-learning problem, ``run_meta_experiment``),
    but a failure is returned as a record with its error.

    This is the function a worker process runs for the CLI.

    Args:
        problem_name: A transfer or meta-learning problem name.
        method: A registered method name.
        seed: Random seed.
        iterations: BO iterations (the problem's default if ``None``).
        plugins: Modules imported first (they call ``register_method``; imported
            here so that every worker process has them).

    Returns:
        The run's record, or ``{"problem", "method", "seed", "error", "traceback"}``.
    """
    try:
        for module in plugins:
            importlib.import_module(module)
        if problem_name in META_PROBLEMS:
            return run_meta_experiment(problem_name, method, seed, iterations)
        return run_experiment(problem_name, method, seed, iterations)
    except Exception as e:  # a failed run is recorded; the sweep goes on
        return {
            "problem": problem_name,
            "method": method,
            "seed": seed,
            "error": repr(e),
            "traceback": traceback.format_exc(),
        }


def _not_a_record(value: Any) -> str | None:
    r"""Why a parsed line is not a run record that the reports can use (``None``
    if it is one)."""
    if not isinstance(value, dict):
        return f"not a run record: {json.dumps(value)[:40]}"
    if not (
        isinstance(value.get("problem"), str)
        and isinstance(value.get("method"), str)
        and type(value.get("seed")) is int
    ):
        return "not a run record (it needs a problem, a method and an integer seed)"
    if "error" in value:
        return None
    T = value.get("iterations", 1)
    if type(T) is not int or T < 1:
        return f"a run of {T!r} iterations (nothing to report)"
    trace = (
        value.get("simple_regret")
        if value.get("metric") == "simple_regret"
        # HPO runs: regret against the best value found, filled in at report time
        else value.get("cumulative_regret") or value.get("values")
    )
    if not (isinstance(trace, list) and trace) or not isinstance(
        value.get("iteration_s"), list
    ):
        return "an incomplete run record (no regret trace or timings)"
    return None


def parse_line(line: bytes) -> tuple[dict | None, str | None]:
    r"""Parse one line of a results file.

    Args:
        line: The line's bytes.

    Returns:
        ``(record, None)``, or ``(None, why)`` for a line that is not a run record
        (invalid UTF-8 or JSON, JSON that is not a record, an empty run);
        ``(None, None)`` for a blank line.
    """
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    if not text.strip():
        return None, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None, "malformed JSON (e.g. the last line of an interrupted sweep)"
    why = _not_a_record(value)
    return (None, why) if why else (value, None)


def read_results(path: Path) -> tuple[list[dict], list[str]]:
    r"""Read a JSONL results file, skipping the lines that are not run records.

    Args:
        path: The results file (a missing file has no records).

    Returns:
        The records in file order and one ``"PATH:LINE: why"`` message per skipped
        line.
    """
    records, skipped = [], []
    if not path.is_file():
        return records, skipped
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            record, why = parse_line(line)
            if record is not None:
                records.append(record)
            elif why is not None:
                skipped.append(f"{path}:{number}: {why}")
    return records, skipped


def load_results(path: Path) -> tuple[list[dict], int]:
    r"""Read a JSONL results file; returns ``(records, n_skipped_lines)``.

    A line that is not a run record (e.g. the last line of an interrupted sweep) is
    skipped and counted, never fatal; see :func:`read_results` for the reasons.
    """
    records, skipped = read_results(path)
    return records, len(skipped)
