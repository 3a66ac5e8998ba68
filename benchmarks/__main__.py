r"""Command line: ``python -m benchmarks {run,summarize,plot,list}``.

``run`` with no further arguments (``--track quick``) compares the recommended model
(``RankWeightedTransferGP``) with the peers a BoTorch user would pick (``MultiTaskGP``,
RGPE), the no-transfer GP and random search on three real tuning pairs with replicate
noise and one negative control (a few minutes on 2 cores), appends one JSON line per
finished run to ``OUT/results.jsonl`` (a rerun skips finished runs), prints the
summary and the ratio tables and writes ``OUT/regret.png``. ``--track
real-development`` and ``--track real-confirmation`` run the two halves of the real
track; ``--track papers``, ``--track default`` and ``--track meta`` run the papers',
the default-settings and the meta-learning comparisons; ``export FILE`` writes a
sweep's records without their query traces (small enough to commit; unpack to
``DIR/results.jsonl`` to go on).

A run is identified by its problem, method, seed and ``--iterations``: a rerun
with another T runs again instead of reusing the finished runs. ``--device cuda``
runs the methods' models on a GPU (one device per ``--out``). Several ``run``
processes may write to one ``OUT`` (every append locks the file; a run recorded
twice is kept once), and ``summarize``/``plot`` skip, with a warning, lines that
are not run records and duplicate records of a run.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import signal
import sys
import textwrap
from collections import defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from pathlib import Path

from tqdm.auto import tqdm

from benchmarks.context import parse_device
from benchmarks.meta import META_PROBLEMS, make_meta_problem
from benchmarks.methods import (
    META,
    TRANSFER,
    available_methods,
    describe_method,
)
from benchmarks.real_track_tables import real_track_half_table
from benchmarks.regret_tables import with_regret
from benchmarks.results_io import ResultsWriter, deduplicate, read_results, run_key
from benchmarks.runner import WorkerPool, run_name, sweep, warning_causes
from benchmarks.summary import plot_regret, summary_table
from benchmarks.tracks import TRACKS
from botorch_transfer._io import atomic_write_bytes
from botorch_transfer.test_functions.problems import PROBLEMS, make_problem
from botorch_transfer.test_functions.real_pairs import CONFIRMATION, DEVELOPMENT

RESULTS = "results.jsonl"
#: Skipped lines reported one by one; the rest are counted.
MAX_REPORTED_LINES = 10


class UsageError(Exception):
    r"""A bad command line found after parsing; ``main`` reports it as argparse
    reports its own errors (usage, message, exit status 2)."""


def positive_int(text: str) -> int:
    r"""``argparse`` type of the counts (seeds, iterations, workers, dpi)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _joined(values: Iterable) -> str:
    r"""``"2, 10"``: distinct values in numeric order for messages."""
    return ", ".join(sorted({str(v) for v in values}, key=lambda v: (len(v), v)))


def _load(out: Path, required: bool = True, warn: bool = True) -> list[dict]:
    r"""The records of ``out``'s results file, one per run, with a warning for every
    skipped line, dropped duplicate and mix of settings.

    Args:
        out: The results directory.
        required: Exit with a message if there is no record (``summarize``,
            ``plot``); ``run`` starts from an empty file.
        warn: Print the warnings.
    """
    path = out / RESULTS
    records, skipped = read_results(path)
    records, dropped = deduplicate(records)
    if warn:
        _report(path, records, skipped, dropped)
    if required and not records:
        state = (
            "has no run records"
            if path.is_file()
            else "is not a file"
            if path.exists()
            else "does not exist"
        )
        raise SystemExit(
            f"error: no results in {out}: {path} {state}; run "
            f"`python -m benchmarks run --out {out}` first"
        )
    return records


def _report(path: Path, records: list[dict], skipped: list[str], dropped: int) -> None:
    r"""Warn about a results file's skipped lines, duplicates and mixed settings."""
    for message in skipped[:MAX_REPORTED_LINES]:
        _warn(f"skipped corrupt line {message}")
    if len(skipped) > MAX_REPORTED_LINES:
        _warn(f"skipped {len(skipped) - MAX_REPORTED_LINES} more corrupt line(s)")
    if dropped:
        # e.g. two `run`s into one directory before results files were locked
        _warn(
            f"dropped {dropped} duplicate record(s) of runs recorded more than once "
            f"in {path} (kept the first record of each run)"
        )
    lengths = defaultdict(set)
    for r in records:
        if "error" not in r:
            lengths[(r["problem"], r["method"])].add(r.get("iterations"))
    mixed = [
        f"{m} on {p} (iterations {_joined(T)})"
        for (p, m), T in lengths.items()
        if len(T) > 1
    ]
    if mixed:
        _warn(
            f"runs with different iterations in {path}: {'; '.join(mixed)}; the "
            "summary and plot cut every run of a method to its shortest (use one "
            "--out directory per setting)"
        )


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def _executor(args: argparse.Namespace) -> Iterator[Executor | WorkerPool]:
    r"""A local process pool (:class:`WorkerPool`), or a dask.distributed cluster's
    executor."""
    if args.dask_scheduler is None:
        pool = WorkerPool(args.workers)
        # SIGTERM (e.g. `kill`, a job scheduler) ends the sweep as Ctrl-C does
        previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        try:
            yield pool
        except BaseException:
            pool.stop()
            raise
        else:
            pool.shutdown()
        finally:
            signal.signal(signal.SIGTERM, previous)
        return
    try:
        from dask.distributed import Client
    except ImportError as e:
        raise SystemExit(
            "`--dask-scheduler` needs dask.distributed: "
            "pip install 'botorch_transfer[dask]'"
        ) from e
    with Client(args.dask_scheduler) as client:
        yield client.get_executor()


def _methods_for(problem: str) -> tuple[str, ...]:
    r"""The registered methods of the problem's protocol (meta or transfer)."""
    return available_methods(META if problem in META_PROBLEMS else TRANSFER)


def _check_names(problems: list[str], methods: list[str]) -> None:
    r"""Refuse unknown problem and method names, listing the available ones."""
    unknown = [p for p in problems if p not in PROBLEMS and p not in META_PROBLEMS]
    if unknown:
        raise UsageError(
            f"unknown problem(s) {', '.join(map(repr, unknown))}; choose from "
            f"{', '.join(PROBLEMS)} or the meta-learning problems "
            f"{', '.join(META_PROBLEMS)} (`list` describes them)"
        )
    unknown = [m for m in methods if m not in available_methods()]
    if unknown:
        raise UsageError(
            f"unknown method(s) {', '.join(map(repr, unknown))}; choose from "
            f"{', '.join(available_methods())} (`list` describes them; --plugin "
            "MODULE registers more)"
        )


def _default_iterations(problem: str) -> int:
    r"""The problem's default T; exits with a message if it cannot be built here."""
    try:
        if problem in META_PROBLEMS:
            return make_meta_problem(problem).iterations
        return make_problem(problem).iterations
    except (ImportError, FileNotFoundError) as e:  # optional data / extras
        raise SystemExit(f"Problem {problem!r} is unavailable here: {e}") from e


def _writable_results(out: Path) -> Path:
    r"""``out``'s results file, checked before any run: the directory is created and
    the file opened for appending, so that a sweep never computes runs it cannot
    record. Exits with a usage error naming ``--out`` if that fails."""
    if out.name == RESULTS:
        _warn(
            f"--out {out} is named like the results file; it is the results "
            f"directory, so the results go to {out / RESULTS}"
        )
    path = out / RESULTS
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(
            f"--out: cannot create the results directory {out}: {e.strerror or e}"
        ) from e
    if path.exists() and not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise UsageError(
            f"--out: {path} is {kind}, not a results file; choose another --out or "
            f"move {path} away"
        )
    try:
        with open(path, "ab"):
            pass
    except OSError as e:
        raise UsageError(
            f"--out: cannot write the results file {path}: {e.strerror or e}"
        ) from e
    return path


def cmd_run(args: argparse.Namespace) -> None:
    track = TRACKS[args.track]
    left_out = track.left_out if args.methods is None else {}
    if args.problems is None:
        args.problems = list(track.problems)
    if args.methods is None:
        args.methods = list(track.methods)
    if args.seeds is None:
        args.seeds = track.seeds
    if args.iterations is None:
        args.iterations = track.iterations
    for module in args.plugin:
        importlib.import_module(module)
    _check_names(args.problems, args.methods)
    # T is part of a run's key. Building the transfer problems also fails fast on
    # missing extras; a meta problem is built for its default T only if the file
    # has runs of it (below)
    iterations = {
        p: args.iterations or _default_iterations(p)
        for p in args.problems
        if args.iterations is not None or p not in META_PROBLEMS
    }
    pairs = [
        (p, m)
        for p in args.problems
        for m in args.methods
        if m in _methods_for(p) and (m, p) not in left_out
    ]
    for reason in dict.fromkeys(left_out.values()):
        combinations = [
            f"{m} on {p}"
            for (m, p), why in left_out.items()
            if why == reason and p in args.problems
        ]
        if combinations:
            print(f"not run in this track: {', '.join(combinations)} ({reason})")
    skipped = [
        f"{m} on {p}"
        for p in args.problems
        for m in args.methods
        if m not in _methods_for(p)
    ]
    if skipped:
        print(f"skipping combinations that do not apply: {', '.join(skipped)}")
    if not pairs:
        raise UsageError("none of the methods applies to these problems")
    path = _writable_results(args.out)
    finished = [r for r in _load(args.out, required=False) if "error" not in r]
    # wall times (and rounding) differ by device: one results file, one device
    others = {r.get("device", "cpu") for r in finished} - {args.device.type}
    if others:
        raise UsageError(
            f"{path} has runs on {_joined(others)}; a --device "
            f"{args.device.type} sweep needs its own --out directory"
        )
    for p in {r["problem"] for r in finished} & (set(args.problems) - set(iterations)):
        iterations[p] = _default_iterations(p)
    # the runs asked for, by run key (see results_io.RUN_SETTINGS)
    wanted = [(p, m, s, iterations.get(p)) for p, m in pairs for s in range(args.seeds)]
    done = {run_key(r) for r in finished}
    todo = [key[:3] for key in wanted if key not in done]
    if len(todo) < len(wanted):
        print(f"resuming: {len(wanted) - len(todo)} finished run(s) found in {path}")
    # finished runs of the same (problem, method, seed) with other settings
    asked = set(wanted)
    triples = {key[:3] for key in asked}
    other = [
        r for r in finished if run_key(r)[:3] in triples and run_key(r) not in asked
    ]
    if other:
        theirs = _joined(r.get("iterations") for r in other)
        ours = _joined(iterations[r["problem"]] for r in other)
        print(
            f"note: {len(other)} finished run(s) of these problems, methods and "
            f"seeds in {path} ran with other settings (iterations={theirs}; this "
            f"run: iterations={ours}) and are not reused; "
            "`summarize` and `plot` will show both (use one --out per setting)"
        )
    writer = ResultsWriter(path)
    recorded_elsewhere = 0
    options = (args.iterations, tuple(args.plugin), str(args.device))
    # a local pool holds one run per worker: a lost worker then takes only the runs
    # in progress with it (the others wait here, not in the pool's queue)
    window = len(todo) if args.dask_scheduler else args.workers
    with _executor(args) as pool:
        runs = sweep(pool, todo, options, window)
        finished = []
        for record in tqdm(runs, total=len(todo), desc="runs"):
            finished.append(record)
            try:
                recorded_elsewhere += not writer.append(record)
            except OSError as e:  # e.g. a full disk: the line was not written
                raise SystemExit(
                    f"error: could not record run {run_name(record)} in {path}: "
                    f"{e}; the runs recorded before are kept (the same command "
                    "resumes)"
                ) from e
            if "error" in record:
                tqdm.write(f"run {run_name(record)} failed: {record['error']}")
    for category, count, message in warning_causes(finished):
        print(f"{category} in {count} of the {len(finished)} runs, e.g.: {message}")
    if recorded_elsewhere:
        print(
            f"{recorded_elsewhere} run(s) had been recorded meanwhile by another "
            f"process writing to {path}; their first records are kept"
        )
    # the file's problems were reported before the runs
    records = _load(args.out, warn=False)
    cmd_summarize(args, records)
    # log-scaled: random search's regret would flatten the models' curves
    cmd_plot(argparse.Namespace(**vars(args), log_y=True), records)


def _selected(args: argparse.Namespace) -> list[dict]:
    r"""The records of ``args.out``, restricted to ``--problems``/``--methods`` and
    to the seeds below ``--seeds`` where given (e.g. the problems that have all their
    seeds, or a table's seeds after more were run for some cells). Regret is filled
    in before the selection, so that it is against the best value found by any
    run."""
    records = with_regret(_load(args.out))
    seeds = getattr(args, "seeds", None)
    if seeds is not None:
        records = [r for r in records if r["seed"] < seeds]
        if not records:
            raise UsageError(
                f"--seeds: no record in {args.out / RESULTS} below {seeds}"
            )
    for field in ("problems", "methods"):
        wanted = getattr(args, field, None)
        if wanted:
            missing = set(wanted) - {r[field[:-1]] for r in records}
            if missing:
                raise UsageError(
                    f"--{field}: no record in {args.out / RESULTS} of "
                    f"{_joined(missing)}"
                )
            records = [r for r in records if r[field[:-1]] in wanted]
    return records


#: Seeds behind the real track's published claims (RESULTS.md).
CLAIM_SEEDS = 20


def cmd_summarize(args: argparse.Namespace, records: list[dict] | None = None) -> None:
    records = _selected(args) if records is None else records
    print(summary_table(records))
    # the real track's pairs: the recommended model's ratios and how much it
    # transferred, one table per half
    for half, problems in (
        ("development", DEVELOPMENT),
        ("confirmation", CONFIRMATION),
    ):
        table = real_track_half_table(records, problems)
        if table:
            print(f"\nReal track, {half} half:\n{table}")
            seeds = len({r["seed"] for r in records if r["problem"] in problems})
            if seeds < CLAIM_SEEDS:
                print(
                    f"({seeds} seeds: single runs on these noisy problems vary a "
                    f"lot; the {CLAIM_SEEDS}-seed results are in "
                    "benchmarks/RESULTS.md)"
                )


def cmd_plot(args: argparse.Namespace, records: list[dict] | None = None) -> None:
    # `run` ends with a plot too; options not given keep plot_regret's defaults
    options = {
        name: getattr(args, name) for name in ("log_y", "dpi") if hasattr(args, name)
    }
    records = _selected(args) if records is None else records
    if all("error" in r for r in records):
        raise SystemExit(
            f"error: no finished run in {args.out / RESULTS} to plot; "
            f"{len(records)} run(s) failed (see their 'error' field)"
        )
    path = plot_regret(records, args.out / "regret.png", **options)
    print(f"regret plot written to {path}")


def _first_paragraph(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].replace("``", "").split())


#: Record fields ``export`` leaves out: the per-step traces no report reads.
TRACE_FIELDS = ("queries", "observations")


def _without_traces(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in TRACE_FIELDS}


def cmd_export(args: argparse.Namespace) -> None:
    r"""Write ``OUT``'s records, one per run, without the query traces, to a JSONL
    file (gzipped if its name ends in ``.gz``): a sweep's results small enough to keep
    in the repository; unpacked to ``DIR/results.jsonl`` it is a results directory
    that ``summarize``, ``plot`` and a resumed ``run`` read."""
    target = args.file
    if target.resolve() == (args.out / RESULTS).resolve():
        raise UsageError(
            f"FILE: {target} is the results file that `export` reads (`--out` "
            f"{args.out}); writing it would replace the records with trace-less "
            "copies. Name another file."
        )
    records = _load(args.out)
    lines = []
    for record in records:
        kept = _without_traces(record)
        if "tasks" in kept:  # a meta-track run: one trace per test task
            kept["tasks"] = [_without_traces(task) for task in kept["tasks"]]
        lines.append(json.dumps(kept) + "\n")
    data = "".join(lines).encode()
    target = args.file
    if target.suffix == ".gz":
        data = gzip.compress(data, mtime=0)  # the same records, the same bytes
    if target.is_dir():
        raise UsageError(f"FILE: {target} is a directory; expected a file name")
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, data)  # a failed export leaves the previous file
    print(f"{len(records)} record(s) of {args.out / RESULTS} written to {target}")


def cmd_list(args: argparse.Namespace) -> None:
    def show(title: str, rows: dict[str, str]) -> None:
        print(title)
        width = max(len(name) for name in rows)
        for name, description in rows.items():
            print(f"  {name:<{width}}  {description}")

    problems = {}
    for name in PROBLEMS:
        try:
            problems[name] = make_problem(name).description
        except (ImportError, FileNotFoundError) as e:  # optional data / extras
            problems[name] = f"(unavailable here: {e})"
    show("problems:", problems)
    show(
        "methods:",
        {name: describe_method(name) for name in available_methods(TRANSFER)},
    )
    show(
        "meta-learning problems (leave-tasks-out; need their data, see "
        "`benchmarks.meta`):",
        {name: _first_paragraph(f.__doc__) for name, f in META_PROBLEMS.items()},
    )
    show(
        "meta-learning methods:",
        {name: describe_method(name) for name in available_methods(META)},
    )


def _names_epilog() -> str:
    r"""The problem and method names for ``run --help``, wrapped between names."""

    def names(title: str, values: Iterable[str]) -> str:
        return textwrap.fill(
            f"{title}: {', '.join(values)}",
            width=79,
            subsequent_indent="  ",
            break_on_hyphens=False,
            break_long_words=False,
        )

    return "\n".join(
        [
            names("problems", PROBLEMS),
            names("methods", available_methods(TRANSFER)),
            names("meta-learning problems", META_PROBLEMS),
            names("meta-learning methods", available_methods(META)),
            "`list` describes them; --plugin MODULE registers more methods.",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__.split("\n\n")[0],
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="run a comparison (defaults: a quick one)",
        epilog=_names_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keep names whole
    )
    run.add_argument(
        "--track",
        choices=sorted(TRACKS),
        default="quick",
        help="the methods and problems run when --methods/--problems are not given "
        "(quick: the main job; real-development / real-confirmation: the real "
        "track's halves; papers: the papers' settings; default: every model "
        "with its defaults against MultiTaskGP and RGPE, with controls; meta: the "
        "meta-learned priors against the no-meta GP and the peers)",
    )
    run.add_argument(
        "--problems",
        nargs="+",
        default=None,
        metavar="NAME",
        help="problems listed below (default: the track's)",
    )
    run.add_argument(
        "--methods",
        nargs="+",
        default=None,
        metavar="NAME",
        help="methods listed below (default: the track's)",
    )
    run.add_argument(
        "--seeds",
        type=positive_int,
        default=None,
        help="seeds 0..N-1 (default: the track's, 10 for quick, 5 otherwise)",
    )
    run.add_argument(
        "--iterations",
        type=positive_int,
        default=None,
        help="BO iterations T (default: the track's, 30 for meta, else the "
        "problem's); part of a run's key, so a rerun with another T does not reuse "
        "finished runs",
    )
    run.add_argument(
        "--workers", type=positive_int, default=2, help="local worker processes"
    )
    run.add_argument(
        "--device",
        type=parse_device,
        default=parse_device("cpu"),
        help="where the methods' models and acquisition run: cpu (default) or cuda "
        "(the data are drawn and the objectives evaluated on the CPU, so a seed "
        "gives the same problem on every device); one device per --out",
    )
    run.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help=(
            "import MODULE first (it registers methods with "
            "methods.register_method); repeatable"
        ),
    )
    run.add_argument(
        "--dask-scheduler",
        default=None,
        metavar="ADDRESS",
        help="run on a dask.distributed cluster (e.g. tcp://host:8786) "
        "instead of local processes",
    )
    run.set_defaults(func=cmd_run)
    for name, func in (("summarize", cmd_summarize), ("plot", cmd_plot)):
        p = sub.add_parser(name)
        p.set_defaults(func=func)
        for field in ("problems", "methods"):
            p.add_argument(
                f"--{field}",
                nargs="+",
                default=None,
                metavar=field[:-1].upper(),
                help=f"only the records of these {field} (default: all)",
            )
        p.add_argument(
            "--seeds",
            type=positive_int,
            default=None,
            metavar="K",
            help="only seeds 0 to K-1, the seeds `run --seeds K` runs (default: all)",
        )
    plot = sub.choices["plot"]
    plot.add_argument(
        "--log-y",
        action="store_true",
        default=argparse.SUPPRESS,
        help="log-scale the regret axes",
    )
    plot.add_argument(
        "--dpi",
        type=positive_int,
        default=argparse.SUPPRESS,
        help="resolution of the PNG (default 120)",
    )
    export = sub.add_parser(
        "export",
        help="write the results, one record per run without query traces, to FILE "
        "(.jsonl or .jsonl.gz)",
    )
    export.add_argument("file", type=Path, metavar="FILE")
    export.set_defaults(func=cmd_export)
    sub.add_parser("list").set_defaults(func=cmd_list)
    for p in sub.choices.values():
        p.add_argument(
            "--out", type=Path, default=Path("bench_out"), help="results directory"
        )
    args = parser.parse_args(argv)
    command = sub.choices[args.command]
    if args.command != "list" and args.out.exists() and not args.out.is_dir():
        command.error(
            f"--out must be a results directory (holding {RESULTS}), got the file "
            f"{args.out}; its directory is {args.out.parent}"
        )
    try:
        args.func(args)
    except UsageError as e:
        command.error(str(e))
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: the workers are stopped; finished runs stay recorded
        raise SystemExit(
            f"interrupted; the finished runs are in {args.out / RESULTS} (the same "
            "command resumes)"
        ) from None


if __name__ == "__main__":
    main()
