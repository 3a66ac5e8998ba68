r"""The source/target (``"transfer"``) protocol: run one (problem, method, seed) BO
experiment and record its full trace; the CLI's worker entry point; results files.

A results file holds one JSON record per line. A run is identified by its
:func:`run_key`: the problem, the method, the seed and the settings that change
its outcome (:data:`RUN_SETTINGS`). :class:`ResultsWriter` appends records safely
next to other writers of the same file; :func:`read_results` skips the lines that
are not run records and :func:`deduplicate` keeps one record per run.
"""

from __future__ import annotations

import gzip
import importlib
import json
import math
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

try:
    import fcntl
except ImportError:  # not POSIX: no advisory locks, one writer per results file
    fcntl = None

import torch
from torch import Tensor

from botorch_transfer.benchmarks.context import (
    run_environment,
    torch_run_context,
    wait_for,
)
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
    device: torch.device | str = "cpu",
) -> dict:
    r"""Run ``iterations`` BO steps of ``method`` on ``problem_name`` with ``seed``.

    The source data, the initial target points and all observation noise depend on
    ``seed`` only (not on the method or the device: they are drawn on the CPU), so
    methods are compared on the same draws. The run seeds torch's global RNG with
    ``seed`` and uses ``num_threads`` threads; both are restored afterwards.

    Args:
        problem_name: A registered problem name, or a ``TransferProblem``.
        method: A registered ``"transfer"`` method name (see
            :func:`~botorch_transfer.benchmarks.methods.available_methods`).
        seed: Random seed.
        iterations: Number of BO iterations (the problem's default if ``None``).
        num_threads: torch threads for the run.
        device: Where the method's data, models and acquisition live (the
            objective is evaluated on the CPU; an iteration's time includes moving
            the query back).

    Returns:
        A JSON-serializable record with the query/observation trace, the
        instantaneous and cumulative regret, timings and settings, and the
        method's per-iteration ``diagnostics`` where it keeps any (e.g. which
        model a ``TransferGuard`` used).
    """
    if iterations is not None and iterations < 1:  # an empty run reports nothing
        raise ValueError(f"`iterations` must be positive, got {iterations}.")
    policy = get_method(method, TRANSFER)
    device = torch.device(device)
    with torch_run_context(num_threads=num_threads, seed=seed, device=device):
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
            source.to(device), generator=torch.Generator().manual_seed(seed + 20_000)
        )
        domain = problem.with_domain_on(device)

        start = time.perf_counter()
        state = policy.setup(domain, data)
        wait_for(device)
        setup_s = time.perf_counter() - start
        f_star = problem.optimum()

        queries, observations, values, times = [], [], [], []
        for _ in range(T):
            start = time.perf_counter()
            # `.cpu()` waits for the device, so the time is the step's
            x = policy.propose(state, X.to(device), Y.to(device)).cpu()
            times.append(time.perf_counter() - start)
            f_x = problem.target(x)
            y = observe(f_x, problem.target_noise, noise_gen)
            X, Y = torch.cat([X, x]), torch.cat([Y, y])
            queries.append(x.squeeze(0).tolist())
            observations.append(float(y))
            values.append(float(f_x))
    diagnostics = getattr(state, "diagnostics", None)
    # unknown optimum (HPO): regret is computed at report time from the best value
    # any run found
    regret = None if f_star is None else [f_star - v for v in values]
    cumulative = None if regret is None else torch.tensor(regret).cumsum(0).tolist()
    record = {
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
        "device": device.type,
        "environment": run_environment(),
        "settings": {
            "description": problem.description,
            "n_source": problem.n_source,
            "n_init": problem.n_init,
            "beta": problem.beta,
            "source_noise": problem.source_noise,
            "target_noise": problem.target_noise,
        },
    }
    if diagnostics:
        record["diagnostics"] = diagnostics
    return record


def safe_run_experiment(
    problem_name: str,
    method: str,
    seed: int,
    iterations: int | None = None,
    plugins: Sequence[str] = (),
    device: str = "cpu",
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
        device: The run's device (see :func:`run_experiment`).

    Returns:
        The run's record, or ``{"problem", "method", "seed", "iterations", "error",
        "traceback"}`` (``iterations`` as requested: ``None`` for the default).
    """
    try:
        for module in plugins:
            importlib.import_module(module)
        if problem_name in META_PROBLEMS:
            return run_meta_experiment(
                problem_name, method, seed, iterations, device=device
            )
        return run_experiment(problem_name, method, seed, iterations, device=device)
    except Exception as e:  # a failed run is recorded; the sweep goes on
        return {
            "problem": problem_name,
            "method": method,
            "seed": seed,
            "iterations": iterations,
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
        path: The results file (a missing file has no records); gzipped if its name
            ends in ``.gz``, as ``export`` writes the shipped records.

    Returns:
        The records in file order (duplicates included, see :func:`deduplicate`)
        and one ``"PATH:LINE: why"`` message per skipped line.
    """
    records, skipped = [], []
    if not path.is_file():
        return records, skipped
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
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
    skipped and counted, never fatal; see :func:`read_results` for the reasons and
    :func:`deduplicate` to keep one record per run.
    """
    records, skipped = read_results(path)
    return records, len(skipped)


#: Settings besides (problem, method, seed) that change a run's outcome: records
#: that differ in one of them are different runs (a rerun does not reuse them).
RUN_SETTINGS = ("iterations",)

RunKey = tuple[Any, ...]


def run_key(record: dict) -> RunKey:
    r"""``(problem, method, seed, *settings)`` of a run record (see
    :data:`RUN_SETTINGS`; a failure's ``iterations`` is ``None`` when the run asked
    for the problem's default)."""
    return (
        record["problem"],
        record["method"],
        record["seed"],
        *(record.get(name) for name in RUN_SETTINGS),
    )


def deduplicate(records: list[dict]) -> tuple[list[dict], int]:
    r"""Keep one record per run (:func:`run_key`).

    A finished run recorded twice (two sweeps into one file) keeps its first record.
    A failure is kept only if the run never finished (a failure with the default
    ``iterations`` counts as finished by a finished run of any ``iterations``), and
    then only its last record.

    Args:
        records: Run records in file order.

    Returns:
        The records in file order and the number of finished-run duplicates dropped.
    """
    first: dict[RunKey, dict] = {}
    for r in records:
        if "error" not in r:
            first.setdefault(run_key(r), r)
    finished = {key[:3] for key in first}
    last_failure = {run_key(r): i for i, r in enumerate(records) if "error" in r}
    kept, dropped = [], 0
    for i, r in enumerate(records):
        key = run_key(r)
        if "error" in r:
            default = all(v is None for v in key[3:])
            rerun = key in first or (default and key[:3] in finished)
            if not rerun and last_failure[key] == i:
                kept.append(r)
        elif first[key] is r:
            kept.append(r)
        else:
            dropped += 1
    return kept, dropped


def _lock(fh: IO[bytes]) -> None:
    if fcntl is not None:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)


def _unlock(fh: IO[bytes]) -> None:
    if fcntl is not None:
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


class ResultsWriter:
    r"""Append run records to a JSONL results file next to other writers of it.

    Every append holds an exclusive ``fcntl.flock`` on the file (POSIX; elsewhere
    keep to one writer per file), so lines never interleave; it first ends a line a
    killed writer left unfinished, and skips a finished run that another writer
    recorded since this one last looked, so that two sweeps into one directory
    record each run once.

    Args:
        path: The results file (created on the first append).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0  # the bytes of the file this writer has read
        self._finished: set[RunKey] = set()

    def append(self, record: dict) -> bool:
        r"""Append ``record`` as one line.

        Args:
            record: A run record (a finished run or a failure).

        Returns:
            ``False`` if the run had finished in the file already (nothing written).
        """
        line = (json.dumps(record) + "\n").encode()
        with open(self.path, "a+b") as fh:
            _lock(fh)
            try:
                if fh.seek(0, 2) < self._offset:  # replaced or truncated: reread
                    self._offset, self._finished = 0, set()
                fh.seek(self._offset)
                new = fh.read()
                for raw in new.splitlines():
                    r, _ = parse_line(raw)
                    if r is not None and "error" not in r:
                        self._finished.add(run_key(r))
                key = run_key(record)
                written = "error" in record or key not in self._finished
                if written:
                    if new and not new.endswith(b"\n"):
                        line = b"\n" + line  # keep the new record off a torn line
                    fh.write(line)
                    fh.flush()
                    if "error" not in record:
                        self._finished.add(key)
                self._offset = fh.seek(0, 2)
            finally:
                _unlock(fh)
        return written
