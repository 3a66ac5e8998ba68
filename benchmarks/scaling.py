r"""Sweeps on a dask cluster: the wall time of one sweep with 1, 2, ... workers.

The same sweep (``problem`` x ``methods`` x ``seeds`` runs through the CLI's
``run --dask-scheduler``) goes to a fresh ``dask.distributed.LocalCluster`` of each
size (one thread per worker process, as the runs use one torch thread), each into
its own results directory, so no run is reused. Printed: the wall time per worker
count and the speed-up over the first count. Needs the ``[dask]`` extra.

Run (40 runs: 2 methods x 20 seeds, on 1 and 2 workers)::

    python -m benchmarks.scaling --workers 1 2 --seeds 20 \
        --methods gp-ucb-fitted deltabo-fitted --problem bohachevsky
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.__main__ import main as cli_main
from benchmarks.context import parse_device


def sweep_wall_time(
    workers: int,
    problem: str,
    methods: Sequence[str],
    seeds: int,
    iterations: int | None = None,
    device: str = "cpu",
) -> float:
    r"""Seconds one sweep takes on a new ``LocalCluster`` of ``workers`` processes
    (the cluster's start excluded).

    Args:
        workers: Worker processes, one thread each.
        problem: A registered transfer problem.
        methods: Registered methods.
        seeds: Seeds per method (``len(methods) * seeds`` runs).
        iterations: BO iterations per run (the problem's default if ``None``).
        device: The runs' ``--device``.

    Returns:
        The sweep's wall time in seconds.
    """
    from dask.distributed import LocalCluster

    args = ["run", "--problems", problem, "--methods", *methods]
    args += ["--seeds", str(seeds), "--device", str(device)]
    if iterations is not None:
        args += ["--iterations", str(iterations)]
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        ) as cluster,
        tempfile.TemporaryDirectory() as out,
    ):
        start = time.perf_counter()
        # the CLI's table and plot are not the point here
        with contextlib.redirect_stdout(io.StringIO()):
            cli_main(
                [
                    *args,
                    "--out",
                    str(Path(out) / "sweep"),
                    "--dask-scheduler",
                    cluster.scheduler_address,
                ]
            )
        return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> list[tuple[int, float, float]]:
    r"""Command line: print the wall time and speed-up per worker count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--problem", default="bohachevsky")
    parser.add_argument(
        "--methods", nargs="+", default=["gp-ucb-fitted", "deltabo-fitted"]
    )
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=None)
    parser.add_argument(
        "--device", type=parse_device, default="cpu", help="the runs' device"
    )
    args = parser.parse_args(argv)
    runs = len(args.methods) * args.seeds
    rows = []
    for workers in args.workers:
        seconds = sweep_wall_time(
            workers,
            args.problem,
            args.methods,
            args.seeds,
            args.iterations,
            str(args.device),
        )
        rows.append((workers, seconds, rows[0][1] / seconds if rows else 1.0))
    print(f"{runs} runs of {', '.join(args.methods)} on {args.problem}")
    print(f"{'workers':>8} {'wall s':>8} {'speed-up':>9}")
    for workers, seconds, speedup in rows:
        print(f"{workers:>8} {seconds:>8.1f} {speedup:>9.2f}")
    return rows


if __name__ == "__main__":  # pragma: no cover
    main()
