r"""Results files: concurrent writers, one record per run, the resume key, lines
that are not run records."""

import gzip
import json
import multiprocessing
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from benchmarks import __main__ as cli
from benchmarks.__main__ import main
from benchmarks.results_io import load_results, read_results


def record(seed: int, method: str = "a", iterations: int = 2, **extra) -> dict:
    r"""A finished transfer run record with a hand-made trace."""
    return {
        "problem": "p",
        "method": method,
        "seed": seed,
        "iterations": iterations,
        "values": [0.0] * iterations,
        "regret": [1.0 + seed] * iterations,
        "cumulative_regret": [(1.0 + seed) * (t + 1) for t in range(iterations)],
        "optimum": 1.0,
        "optimum_is_exact": True,
        "iteration_s": [0.1] * iterations,
        **extra,
    }


def write_lines(path: Path, lines: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        for line in lines:
            fh.write(line if isinstance(line, bytes) else json.dumps(line).encode())
            fh.write(b"\n")
    return path


@pytest.fixture
def in_process(monkeypatch):
    r"""Run the CLI's runs in a thread of this process (no worker start-up) and skip
    drawing its plot (seconds; tested on its own)."""

    @contextmanager
    def executor(args):
        with ThreadPoolExecutor(max_workers=1) as pool:
            yield pool

    monkeypatch.setattr(cli, "_executor", executor)
    monkeypatch.setattr(cli, "plot_regret", lambda records, path, **options: path)


RUN = ["--problems", "bohachevsky", "--methods", "random", "--workers", "1"]


# ------------------------------------------------------------ concurrent writers


def _append_all(path: str, n: int, barrier) -> None:
    from benchmarks.results_io import ResultsWriter

    writer = ResultsWriter(Path(path))
    barrier.wait()
    for seed in range(n):
        # long lines: a torn or interleaved write would show as a corrupt line
        writer.append(record(seed, payload="x" * 200_000))


def test_concurrent_writers_record_each_run_once(tmp_path):
    path = tmp_path / "results.jsonl"
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(2)
    writers = [
        context.Process(target=_append_all, args=(str(path), 20, barrier))
        for _ in range(2)
    ]
    for w in writers:
        w.start()
    for w in writers:
        w.join(timeout=60)
    assert [w.exitcode for w in writers] == [0, 0]
    records, corrupt = load_results(path)
    assert corrupt == 0
    assert sorted(r["seed"] for r in records) == list(range(20))


def test_readers_keep_one_record_per_run(tmp_path, capsys):
    runs = [record(s) for s in range(3)]
    write_lines(tmp_path / "results.jsonl", runs + runs)  # two sweeps, same runs
    main(["summarize", "--out", str(tmp_path)])
    out = capsys.readouterr()
    row = next(line for line in out.out.splitlines() if line.startswith("p "))
    assert row.split()[2] == "3"  # runs
    assert "3 duplicate record(s)" in out.err and "results.jsonl" in out.err
    # a failure followed by a successful rerun of the same run: the run counts once
    # and not as failed
    failed = {k: runs[0][k] for k in ("problem", "method", "seed", "iterations")}
    write_lines(tmp_path / "results.jsonl", [{**failed, "error": "boom"}, *runs])
    main(["summarize", "--out", str(tmp_path)])
    out = capsys.readouterr()
    assert "failed" not in out.out and "duplicate" not in out.err


# ------------------------------------------------------------ the resume key


def test_gzipped_results_read_as_the_plain_file(tmp_path):
    # the shipped records are `export`'s gzipped JSONL; the same lines, bad one too
    lines = [record(0), b'{"problem": "bo', record(1)]
    plain = write_lines(tmp_path / "results.jsonl", lines)
    gzipped = tmp_path / "results.jsonl.gz"
    gzipped.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_results(gzipped)[0] == read_results(plain)[0] == [record(0), record(1)]
    assert [why.split(":", 1)[1] for why in read_results(gzipped)[1]] == [
        why.split(":", 1)[1] for why in read_results(plain)[1]
    ]


def test_a_rerun_with_other_iterations_does_not_reuse_runs(
    tmp_path, capsys, in_process
):
    main(["run", "--out", str(tmp_path), "--seeds", "2", "--iterations", "2", *RUN])
    capsys.readouterr()
    main(["run", "--out", str(tmp_path), "--seeds", "2", "--iterations", "3", *RUN])
    out = capsys.readouterr().out
    records, _ = load_results(tmp_path / "results.jsonl")
    assert sorted((r["seed"], r["iterations"]) for r in records) == [
        (0, 2),
        (0, 3),
        (1, 2),
        (1, 3),
    ]
    assert "2 finished run(s)" in out and "iterations=2" in out
    assert "not reused" in out
    # the same settings again: everything is reused, nothing is rerun
    main(["run", "--out", str(tmp_path), "--seeds", "2", "--iterations", "3", *RUN])
    assert "resuming: 2 finished run(s)" in capsys.readouterr().out
    assert len(load_results(tmp_path / "results.jsonl")[0]) == 4


# ------------------------------------------------------------ bad lines


def test_lines_that_are_not_records_are_skipped_by_line(tmp_path, capsys, in_process):
    path = write_lines(
        tmp_path / "results.jsonl",
        [
            record(0),
            b"42",
            b"null",
            b"[1, 2]",
            b"{}",
            b'{"problem": "p", "method": "a", "seed": "zero"}',
            b"\xff\xfe not utf-8",
            b'{"problem": "bo',
            record(1, iterations=0),  # the empty "finished" run of --iterations 0
            record(2),
        ],
    )
    main(["summarize", "--out", str(tmp_path)])
    out = capsys.readouterr()
    row = next(line for line in out.out.splitlines() if line.startswith("p "))
    assert row.split()[2] == "2"
    for line in range(2, 10):
        assert f"{path}:{line}:" in out.err
    assert f"{path}:1:" not in out.err and f"{path}:10:" not in out.err
    records, skipped = load_results(path)
    assert [r["seed"] for r in records] == [0, 2] and skipped == 8
    # `run` resumes from the same file and appends intact lines after the bad ones
    main(["run", "--out", str(tmp_path), "--seeds", "1", "--iterations", "2", *RUN])
    records, skipped = load_results(path)
    assert [r["problem"] for r in records] == ["p", "p", "bohachevsky"]
    assert skipped == 8


def test_a_finished_run_with_non_finite_traces_counts_as_failed_and_reruns(
    tmp_path, capsys, in_process
):
    # a record with a NaN in its trace (a NaN proposal recorded as a finished run)
    nan = record(0, iterations=2)
    nan["values"][1] = float("nan")
    nan["cumulative_regret"][1] = float("inf")
    path = write_lines(tmp_path / "results.jsonl", [nan, record(1)])
    (failed, finished), skipped = read_results(path)
    assert skipped == [] and "error" not in finished
    assert (
        "non-finite (NaN or infinite) entries in its recorded values, "
        in (failed["error"])
    )
    main(["summarize", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("p "))
    assert row.split()[2] == "1" and "nan" not in row and "inf" not in row
    assert "1 run(s) failed" in out and "p/a/seed 0: non-finite" in out
    # `run` runs it again, and the rerun's record is written and counted
    from benchmarks.results_io import ResultsWriter

    assert ResultsWriter(path).append(record(0))
    records, _ = load_results(path)
    assert [("error" in r, r["seed"]) for r in records] == [
        (True, 0),
        (False, 1),
        (False, 0),
    ]


def test_a_failed_append_leaves_no_part_of_the_line(tmp_path, monkeypatch):
    import os

    from benchmarks import results_io

    path = write_lines(tmp_path / "results.jsonl", [record(0)])
    before = path.read_bytes()
    writer = results_io.ResultsWriter(path)
    real_write = os.write

    def half_then_full_disk(fd, data):
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full_disk)
    with pytest.raises(OSError, match="No space left"):
        writer.append(record(1, payload="x" * 10_000))
    monkeypatch.undo()
    assert path.read_bytes() == before
    # the writer goes on: the next append is a whole line
    assert writer.append(record(2))
    records, skipped = load_results(path)
    assert [r["seed"] for r in records] == [0, 2] and skipped == 0


def test_a_run_that_cannot_be_recorded_ends_the_sweep_with_a_message(
    tmp_path, in_process, monkeypatch
):
    from benchmarks import results_io

    def full_disk(self, record):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(results_io.ResultsWriter, "append", full_disk)
    with pytest.raises(SystemExit) as e:
        main(["run", "--out", str(tmp_path), "--seeds", "1", "--iterations", "1", *RUN])
    message = str(e.value.code)
    assert "could not record run bohachevsky/random/seed 0" in message
    assert "No space left on device" in message and "resumes" in message
