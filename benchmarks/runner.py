r"""The source/target (``"transfer"``) protocol: run one (problem, method, seed) BO
experiment and record its full trace; the CLI's worker entry point; results files.

A results file holds one JSON record per line. A run is identified by its
:func:`run_key`: the problem, the method, the seed and the settings that change
its outcome (:data:`RUN_SETTINGS`). :class:`ResultsWriter` appends records safely
next to other writers of the same file; :func:`read_results` skips the lines that
are not run records and :func:`deduplicate` keeps one record per run.

A sweep (:func:`sweep`) runs on a :class:`WorkerPool`: its workers end with the
main process, and a lost worker fails the runs in progress by name while the
sweep goes on. Every proposal is checked (:func:`check_proposal`); a run that fails
is recorded as a failure, which a resumed sweep runs again.
"""

from __future__ import annotations

import ctypes
import importlib
import math
import multiprocessing
import os
import re
import signal
import sys
import threading
import time
import traceback
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    ProcessPoolExecutor,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from typing import Any

try:
    import fcntl
except ImportError:  # not POSIX: no advisory locks, one writer per results file
    fcntl = None

import torch
from torch import Tensor

from benchmarks.context import (
    run_environment,
    torch_run_context,
    wait_for,
)
from benchmarks.meta import META_PROBLEMS, run_meta_experiment
from benchmarks.methods import TRANSFER, TransferData, get_method
from botorch_transfer.data import TaskData
from botorch_transfer.test_functions.problems import TransferProblem, make_problem


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
            :func:`~benchmarks.methods.available_methods`).
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

        def observe_target(x: Tensor, f_x: Tensor, generator: torch.Generator):
            if problem.observe_target is not None:  # one real replicate
                return problem.observe_target(x, generator)
            return observe(f_x, problem.target_noise, generator)

        space = problem.source_space  # a source on other parameters: its own columns
        if space is None:
            X_s = problem.sample(problem.n_source, gen)
        else:
            X_s = space.sample(problem.n_source, gen)
        if problem.observe_source is not None:
            Y_s = problem.observe_source(X_s, gen)
        else:
            Y_s = observe(problem.source(X_s), problem.source_noise, gen)
        X = problem.sample(problem.n_init, gen)
        Y = observe_target(X, problem.target(X), gen)
        source = TaskData(
            X_s,
            Y_s,
            torch.full_like(Y_s, problem.source_noise),
            problem.source_name,
            feature_names=None if space is None else space.feature_names,
        )
        extra_sources = []
        for extra in problem.extra_sources:  # after the target's: one-source runs stay
            X_e = problem.sample(problem.n_source, gen)
            Y_e = extra.observe(X_e, gen)
            Yvar_e = torch.full_like(Y_e, extra.noise)
            extra_sources.append(TaskData(X_e, Y_e, Yvar_e, extra.name).to(device))
        data = TransferData(
            source.to(device),
            generator=torch.Generator().manual_seed(seed + 20_000),
            extra_sources=tuple(extra_sources),
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
            x = policy.propose(state, X.to(device), Y.to(device))
            x = x.cpu() if isinstance(x, Tensor) else x
            times.append(time.perf_counter() - start)
            # a bad proposal fails the run: it is recorded as failed, and rerun
            x = check_proposal(x, problem, method)
            f_x = _checked_value(problem.target(x), x, problem, "target")
            y = _checked_value(
                observe_target(x, f_x, noise_gen), x, problem, "observation"
            )
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


#: How far, relative to the width of the box, a proposal may lie outside it and still
#: count as inside: the rounding of a float32 model's candidate. Such a proposal is
#: moved onto the box (onto the nearest grid point of a grid problem).
DOMAIN_TOLERANCE = 1e-6


def check_proposal(x: Any, problem: TransferProblem, method: str) -> Tensor:
    r"""Check a method's proposal: one point of the problem's domain.

    Args:
        x: What ``method``'s ``propose`` returned (on the CPU).
        problem: The run's problem.
        method: The method's name (for the message).

    Returns:
        ``x`` as a ``1 x d`` float64 tensor inside ``problem.bounds``; on a grid
        problem, the grid point it is (a proposal within :data:`DOMAIN_TOLERANCE` of
        the box or of a grid point is moved onto it).

    Raises:
        TypeError: If ``x`` is not a real-valued tensor.
        ValueError: If ``x`` is not ``1 x d`` (e.g. several points where one was
            asked), has NaN or infinite values, lies outside the box, or, on a grid
            problem, is not a grid point.
    """
    d = problem.dim
    expected = f"`propose` returns the next query, a 1 x {d} tensor"
    if not isinstance(x, Tensor) or x.is_complex() or x.dtype == torch.bool:
        kind = f"a {x.dtype} tensor" if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"Method {method!r} proposed {kind}; {expected} of reals.")
    if x.dim() != 2 or x.shape[-1] != d:
        raise ValueError(
            f"Method {method!r} proposed a tensor of shape {tuple(x.shape)}; "
            f"{expected} (one point of the {d}-dimensional domain)."
        )
    if x.shape[0] != 1:
        raise ValueError(
            f"Method {method!r} proposed {x.shape[0]} points (a {x.shape[0]} x {d} "
            f"tensor) where one was asked; {expected}."
        )
    x = x.detach().to(torch.float64)
    if not torch.isfinite(x).all():
        raise ValueError(
            f"Method {method!r} proposed {x.squeeze(0).tolist()}, which has NaN or "
            "infinite coordinates; a proposal must be a point of the domain."
        )
    lo, hi = problem.bounds.cpu()
    width = torch.where(hi > lo, hi - lo, torch.ones_like(lo))  # a fixed input: 1
    tolerance = DOMAIN_TOLERANCE * width
    outside = ((x < lo - tolerance) | (x > hi + tolerance)).squeeze(0)
    if outside.any():
        dims = outside.nonzero().squeeze(-1).tolist()
        raise ValueError(
            f"Method {method!r} proposed {x.squeeze(0).tolist()}, outside the domain "
            f"of {problem.name} (lower bounds {lo.tolist()}, upper bounds "
            f"{hi.tolist()}) in dimension(s) {dims}."
        )
    x = torch.minimum(torch.maximum(x, lo), hi)
    grid = problem.grid
    if grid is not None:
        grid = grid.cpu()
        gap, row = ((grid - x).abs() / width).amax(dim=-1).min(dim=0)
        if gap > DOMAIN_TOLERANCE:
            raise ValueError(
                f"Method {method!r} proposed {x.squeeze(0).tolist()}, which is not a "
                f"point of {problem.name}'s candidate grid ({problem.grid_size} "
                "points per dimension); a grid problem's proposal is one of "
                "`problem.grid`'s rows."
            )
        x = grid[row].unsqueeze(0)
    return x


def _checked_value(
    value: Tensor, x: Tensor, problem: TransferProblem, what: str
) -> Tensor:
    r"""The ``what`` (target value or observation) at the query ``x``, refused if it
    is not one finite number (a regret computed from it would be NaN)."""
    if value.numel() != 1 or not torch.isfinite(value).all():
        raise ValueError(
            f"The {what} of {problem.name} at the query {x.squeeze(0).tolist()} is "
            f"{value.tolist()}; expected one finite value."
        )
    return value


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
    # the warnings go into the record: the sweep's main process reports each cause
    # once instead of every worker printing it for every run
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for module in plugins:
                importlib.import_module(module)
            if problem_name in META_PROBLEMS:
                record = run_meta_experiment(
                    problem_name, method, seed, iterations, device=device
                )
            else:
                record = run_experiment(
                    problem_name, method, seed, iterations, device=device
                )
        except Exception as e:  # a failed run is recorded; the sweep goes on
            record = {
                "problem": problem_name,
                "method": method,
                "seed": seed,
                "iterations": iterations,
                "error": repr(e),
                "traceback": traceback.format_exc(),
            }
    raised = {(w.category.__name__, str(w.message)): None for w in caught}
    if raised:
        record["warnings"] = [
            {"category": category, "message": message} for category, message in raised
        ]
    return record


#: A number in a warning's message (left out when warnings are grouped by cause).
NUMBER = re.compile(r"[-+]?\d[\d.]*(e[-+]?\d+)?")


def warning_causes(records: Iterable[dict]) -> list[tuple[str, int, str]]:
    r"""The warnings the runs of ``records`` raised, one entry per cause.

    Two warnings have one cause when they share their category and their message up
    to its numbers (a source's R^2 differs from run to run).

    Args:
        records: Run records (see :func:`safe_run_experiment`'s ``"warnings"``).

    Returns:
        ``(category, runs, message)`` per cause, in the order first raised:
        ``runs`` counts the records that raised it, ``message`` is its first text.
    """
    causes: dict[tuple[str, str], list] = {}
    for record in records:
        seen = set()
        for w in record.get("warnings", ()):
            key = (w["category"], NUMBER.sub("#", w["message"]))
            entry = causes.setdefault(key, [w["category"], 0, w["message"]])
            if key not in seen:
                entry[1] += 1
                seen.add(key)
    return [tuple(entry) for entry in causes.values()]


def end_with_parent(parent_pid: int) -> None:
    r"""Initializer of the CLI's worker processes: end this process as soon as the
    process ``parent_pid`` (the sweep's main process) ends, however it ends.

    A worker blocks on its task queue, which it holds both ends of, so it would
    outlive a killed main process (with its memory, and with nobody to take its
    run's record). On Linux the kernel sends the worker ``SIGKILL`` when its parent
    ends (``prctl(PR_SET_PDEATHSIG)``); everywhere, a daemon thread checks once a
    second whether the worker's parent is still ``parent_pid``.

    Args:
        parent_pid: The process id of the main process (``os.getpid()`` there).
    """
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the thread below suffices
            pass

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)  # the parent is gone: nobody can take this worker's results

    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


#: ``prctl`` option: the signal a process gets when its parent ends (linux/prctl.h).
_PR_SET_PDEATHSIG = 1


class WorkerPool:
    r"""The local process pool of a sweep.

    Its workers end when the main process ends, however it ends
    (:func:`~benchmarks.runner.end_with_parent`), and a pool
    broken by a lost worker (e.g. one the out-of-memory killer ended) is replaced
    by :meth:`renew`, so that the sweep goes on.

    Args:
        workers: The number of worker processes.
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool = self._start()
        # every worker process the pool started (`shutdown` forgets them): to stop
        # them on an interrupt and to say how a lost one ended
        self._processes: dict[int, multiprocessing.process.BaseProcess] = {}

    def _start(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=end_with_parent,
            initargs=(os.getpid(),),
        )

    def submit(self, fn: Callable, /, *args) -> Future:
        future = self._pool.submit(fn, *args)
        self._processes.update(self._pool._processes or {})
        return future

    def renew(self) -> str:
        r"""Replace the broken pool with a new one.

        Returns:
            How the pool's lost worker process(es) ended, for the failed runs'
            records (e.g. ``"worker process 123 was killed by SIGKILL (e.g. by the
            out-of-memory killer)"``).
        """
        # a broken pool's manager thread fails the futures first and then reaps its
        # workers: waiting for it means no two threads reap one worker (the loser
        # of that race would read no exit status)
        self._pool.shutdown(wait=True, cancel_futures=True)
        lost = []
        for pid, process in self._processes.items():
            # a killed process closes its pipes before its exit status is known
            process.join(timeout=10)
            code = process.exitcode
            # the broken pool terminates (SIGTERM) the workers that were left
            if code is None or code == 0 or code == -signal.SIGTERM:
                continue
            if code < 0:
                name = signal.Signals(-code).name
                why = " (e.g. by the out-of-memory killer)" if name == "SIGKILL" else ""
                lost.append(f"worker process {pid} was killed by {name}{why}")
            else:
                lost.append(f"worker process {pid} exited with status {code}")
        self._processes.clear()
        self._pool = self._start()
        return "; ".join(lost) or "a worker process ended abruptly"

    def stop(self) -> None:
        r"""End the pool and its workers now (on an interrupt): left alone, they
        would finish their runs (the interpreter's exit waits for them)."""
        self._processes.update(self._pool._processes or {})
        self._pool.shutdown(wait=False, cancel_futures=True)
        for process in self._processes.values():
            process.terminate()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)


def run_name(run: dict | tuple) -> str:
    r"""``"problem/method/seed N"``: a run for messages (a record or a run tuple)."""
    if isinstance(run, dict):
        run = (run["problem"], run["method"], run["seed"])
    return f"{run[0]}/{run[1]}/seed {run[2]}"


def sweep(
    pool: Executor | WorkerPool,
    runs: list[tuple[str, str, int]],
    options: tuple,
    window: int,
) -> Iterator[dict]:
    r"""Run ``runs`` on ``pool``, at most ``window`` at a time; yield each run's
    record as it ends.

    A worker process that is lost (killed, e.g. by the out-of-memory killer) breaks
    a process pool, and with it every run in progress: each of those runs is
    yielded as a failure naming the run, the lost worker and the runs lost with it;
    the pool is renewed and the sweep goes on (a resumed sweep runs them again).

    Args:
        pool: Where the runs go (``submit``; a :class:`WorkerPool` is renewed when
            broken).
        runs: ``(problem, method, seed)`` of each run.
        options: ``safe_run_experiment``'s further arguments (iterations, plugins,
            device).
        window: Most runs submitted at once.
    """
    pending = deque(runs)
    running: dict[Future, tuple[str, str, int]] = {}
    renew = getattr(pool, "renew", None)
    while pending or running:
        while pending and len(running) < window:
            try:
                future = pool.submit(safe_run_experiment, *pending[0], *options)
            except BrokenProcessPool:
                # broken since the last look: its runs in progress end below; with
                # none in progress (a worker lost between runs), renew it now
                if renew is None:
                    raise
                if not running:
                    renew()
                    continue
                break
            running[future] = pending.popleft()
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        if any(isinstance(f.exception(), BrokenProcessPool) for f in done):
            wait(running)  # a broken pool ends every run in progress at once
            done = set(running)
        lost = []
        for future in done:
            run = running.pop(future)
            error = future.exception()
            if isinstance(error, BrokenProcessPool):
                lost.append(run)
            elif error is not None:  # e.g. a dask worker's failure to return it
                yield _failure(run, options[0], f"{type(error).__name__}: {error}")
            else:
                yield future.result()
        if not lost:
            continue
        cause = renew() if renew is not None else "a worker process ended abruptly"
        for run in lost:
            others = [run_name(r) for r in lost if r != run]
            error = (
                f"BrokenProcessPool: the sweep lost a worker process while this run "
                f"was in progress ({cause})"
                + (f"; lost with it: {', '.join(others)}" if others else "")
                + "; `run` runs it again"
            )
            yield _failure(run, options[0], error)


def _failure(run: tuple[str, str, int], iterations: int | None, error: str) -> dict:
    r"""The failure record of a run that returned no record of its own (as
    ``safe_run_experiment`` writes one)."""
    problem, method, seed = run
    return {
        "problem": problem,
        "method": method,
        "seed": seed,
        "iterations": iterations,
        "error": error,
        "traceback": "",
    }
