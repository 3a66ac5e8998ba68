r"""The command line's checks and messages: counts, names, results directories,
descriptions (``list``, ``run --help``)."""

import argparse
import json

import pytest
import torch

from benchmarks import __main__ as cli
from benchmarks.__main__ import main
from benchmarks.meta import META_PROBLEMS, run_meta_experiment
from benchmarks.methods import available_methods, describe_method
from benchmarks.runner import run_experiment
from botorch_transfer.test_functions.problems import PROBLEMS

RUN = ["--problems", "bohachevsky", "--methods", "random", "--workers", "1"]


def write_records(out, records: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


# ------------------------------------------------------------ counts


@pytest.mark.parametrize(
    "option",
    [
        ["--iterations", "0"],
        ["--iterations", "-3"],
        ["--seeds", "0"],
        ["--seeds", "-1"],
        ["--workers", "0"],
        ["--seeds", "two"],
    ],
)
def test_run_rejects_counts_below_one(tmp_path, capsys, option):
    with pytest.raises(SystemExit) as e:
        main(["run", "--out", str(tmp_path), *RUN, *option])
    assert e.value.code == 2
    assert "positive integer" in capsys.readouterr().err
    assert not (tmp_path / "results.jsonl").exists()


def test_plot_rejects_a_nonpositive_dpi(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["plot", "--out", str(tmp_path), "--dpi", "0"])
    assert e.value.code == 2 and "positive integer" in capsys.readouterr().err


def test_runs_need_an_iteration():
    with pytest.raises(ValueError, match="`iterations` must be positive"):
        run_experiment("bohachevsky", "random", seed=0, iterations=0)
    with pytest.raises(ValueError, match="`iterations` must be positive"):
        run_meta_experiment("gp-tasks", "random", seed=0, iterations=-1)


# ------------------------------------------------------------ names


@pytest.mark.parametrize(
    "option, known", [("--problems", "bohachevsky"), ("--methods", "deltabo")]
)
def test_unknown_names_list_the_available_ones(tmp_path, capsys, option, known):
    args = ["run", "--out", str(tmp_path), *RUN, option, "no-such-name"]
    with pytest.raises(SystemExit) as e:
        main(args)
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert "no-such-name" in err and known in err and "`list`" in err


# ------------------------------------------------------------ results directories


@pytest.mark.parametrize("command", ["summarize", "plot"])
def test_summarize_and_plot_need_results(tmp_path, command):
    for out in (tmp_path / "missing", tmp_path):  # a missing and an empty directory
        with pytest.raises(SystemExit) as e:
            main([command, "--out", str(out)])
        assert "no results" in str(e.value.code)  # exits non-zero with the message
    (tmp_path / "results.jsonl").write_text("\n")
    with pytest.raises(SystemExit) as e:
        main([command, "--out", str(tmp_path)])
    assert "no results" in str(e.value.code)


def test_summarize_selects_problems_and_methods(tmp_path, capsys):
    def record(problem, method, values):
        return {
            "problem": problem,
            "method": method,
            "seed": 0,
            "values": values,
            "iteration_s": [0.1] * len(values),
            "optimum": 1.0,
            "optimum_is_exact": False,
        }

    # b's 2.0 beats the estimate 1.0 on p: a's regret is against 2.0 even without b
    write_records(
        tmp_path,
        [record("p", "a", [0.5, 1.0]), record("p", "b", [2.0]), record("q", "a", [1])],
    )
    main(["summarize", "--out", str(tmp_path), "--problems", "p", "--methods", "a"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    table = [row for row in rows if row[:1] in (["p"], ["q"])]
    assert [row[:3] for row in table] == [["p", "a", "1"]]
    assert float(table[0][3]) == pytest.approx(1.5 + 1.0)  # R_T against 2.0
    with pytest.raises(SystemExit) as e:
        main(["summarize", "--out", str(tmp_path), "--methods", "a", "zz"])
    assert e.value.code == 2 and "--methods: no record" in capsys.readouterr().err


def test_summarize_selects_seeds(tmp_path, capsys):
    def record(seed, values):
        return {
            "problem": "p",
            "method": "a",
            "seed": seed,
            "values": values,
            "iteration_s": [0.1] * len(values),
            "optimum": 1.0,
            "optimum_is_exact": False,
        }

    # seed 2 found 3.0: the seeds kept are scored against it all the same
    write_records(tmp_path, [record(0, [1.0]), record(1, [0.0]), record(2, [3.0])])
    main(["summarize", "--out", str(tmp_path), "--seeds", "2"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    table = [row for row in rows if row[:1] == ["p"]]
    assert [row[:3] for row in table] == [["p", "a", "2"]]
    assert float(table[0][3]) == pytest.approx((2.0 + 3.0) / 2)
    write_records(tmp_path, [record(3, [1.0])])
    with pytest.raises(SystemExit) as e:
        main(["summarize", "--out", str(tmp_path), "--seeds", "1"])
    assert e.value.code == 2 and "--seeds: no record" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["summarize", "--out", str(tmp_path), "--seeds", "0"])
    assert e.value.code == 2 and "--seeds" in capsys.readouterr().err


def test_plot_needs_a_finished_run(tmp_path):
    write_records(tmp_path, [{"problem": "p", "method": "a", "seed": 0, "error": "x"}])
    with pytest.raises(SystemExit) as e:
        main(["plot", "--out", str(tmp_path)])
    assert "no finished run" in str(e.value.code)  # exits non-zero with the message


@pytest.mark.parametrize("command", ["run", "summarize", "plot"])
def test_out_must_be_a_directory(tmp_path, capsys, command):
    write_records(tmp_path, [{"problem": "p", "method": "a", "seed": 0, "error": "x"}])
    path = tmp_path / "results.jsonl"
    args = [command, "--out", str(path)] + (RUN if command == "run" else [])
    with pytest.raises(SystemExit) as e:
        main(args)
    err = " ".join(capsys.readouterr().err.split())
    assert e.value.code == 2
    assert "--out must be a results directory (holding results.jsonl), got" in err
    assert f"the file {path}" in err
    assert f"its directory is {tmp_path}" in err


def test_a_results_file_that_is_a_directory_fails_before_any_run(
    tmp_path, capsys, monkeypatch
):
    (tmp_path / "results.jsonl").mkdir()

    def no_runs(*args, **kwargs):
        raise AssertionError("runs were started")

    monkeypatch.setattr(cli, "sweep", no_runs)
    with pytest.raises(SystemExit) as e:
        main(["run", "--out", str(tmp_path), *RUN, "--seeds", "1"])
    err = " ".join(capsys.readouterr().err.split())
    assert e.value.code == 2
    assert f"--out: {tmp_path / 'results.jsonl'} is a directory, not a results" in err
    for command in ("summarize", "plot"):
        with pytest.raises(SystemExit, match="results.jsonl is not a file"):
            main([command, "--out", str(tmp_path)])


def test_a_results_directory_named_like_the_results_file_is_used_with_a_warning(
    tmp_path, capsys
):
    out = tmp_path / "results.jsonl"
    main(["run", "--out", str(out), *RUN, "--seeds", "1", "--iterations", "1"])
    err = " ".join(capsys.readouterr().err.split())
    assert f"--out {out} is named like the results file" in err
    assert (out / "results.jsonl").is_file()


def test_an_unwritable_out_fails_before_any_run(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as e:
        main(["run", "--out", str(blocker / "sub"), *RUN, "--seeds", "1"])
    assert e.value.code == 2
    assert "--out: cannot create the results directory" in capsys.readouterr().err


def test_plot_log_y_with_non_finite_regrets(tmp_path, capsys):
    def record(seed, regret):
        return {
            "problem": "p",
            "method": "a",
            "seed": seed,
            "iterations": 2,
            "values": [0.0, 0.0],
            "cumulative_regret": regret,
            "optimum": 1.0,
            "iteration_s": [0.1, 0.1],
        }

    nan = float("nan")
    write_records(tmp_path, [record(0, [nan, nan]), record(1, [1.0, nan])])
    with pytest.raises(SystemExit) as e:
        main(["plot", "--out", str(tmp_path), "--log-y"])
    assert "no finished run" in str(e.value.code) and "2 run(s) failed" in str(
        e.value.code
    )
    write_records(tmp_path, [record(0, [nan, nan]), record(2, [1.0, 2.0])])
    main(["plot", "--out", str(tmp_path), "--log-y"])
    assert (tmp_path / "regret.png").stat().st_size > 0
    main(["summarize", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "1 run(s) failed" in out and "p/a/seed 0: non-finite" in out


def test_a_failed_export_leaves_the_previous_file(tmp_path, monkeypatch):
    import os

    write_records(tmp_path / "sweep", [{"problem": "p", "method": "a", "seed": 0}])
    (tmp_path / "sweep" / "results.jsonl").write_text(
        json.dumps({"problem": "p", "method": "a", "seed": 0, "error": "x"}) + "\n"
    )
    exported = tmp_path / "records.jsonl"
    exported.write_text("previous\n")

    def fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="No space left"):
        main(["export", "--out", str(tmp_path / "sweep"), str(exported)])
    assert exported.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records.jsonl", "sweep"]


def test_export_onto_the_results_file_it_reads_is_refused(tmp_path, capsys):
    write_records(tmp_path, [{"problem": "p", "method": "a", "seed": 0}])
    results = tmp_path / "results.jsonl"
    before = results.read_bytes()
    with pytest.raises(SystemExit):
        main(["export", "--out", str(tmp_path), str(results)])
    assert "the results file that `export` reads" in capsys.readouterr().err
    assert results.read_bytes() == before


# ------------------------------------------------------------ descriptions


def test_list_describes_every_method_and_problem(capsys, monkeypatch):
    from types import SimpleNamespace

    # building every problem takes seconds; test_problems checks their descriptions
    monkeypatch.setattr(
        cli, "make_problem", lambda name: SimpleNamespace(description=f"about {name}")
    )
    main(["list"])
    out = capsys.readouterr().out
    rows = [line.split(maxsplit=1) for line in out.splitlines() if line[:2] == "  "]
    for name in available_methods():
        description = describe_method(name)
        assert len(description) > 20 and "\n" not in description
        assert [name, description] in rows
    for name in PROBLEMS:
        assert [name, f"about {name}"] in rows
    for name in META_PROBLEMS:
        assert any(row[0] == name and len(row[1]) > 20 for row in rows)


def test_run_help_names_the_problems_and_methods(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    words = set(out.replace(",", " ").split())  # names are never split by wrapping
    assert set(PROBLEMS) | set(META_PROBLEMS) | set(available_methods()) <= words
    assert "`list`" in words


# ------------------------------------------------------------ interruption


def _lines(path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_sigterm_stops_the_workers_too(tmp_path):
    # a sweep of quick runs; after SIGTERM to `run` no worker may go on appending
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    command = [sys.executable, "-m", "benchmarks", "run", *RUN]
    command += ["--seeds", "400", "--iterations", "2", "--out", str(out)]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    results = out / "results.jsonl"
    deadline = time.monotonic() + 120
    while _lines(results) < 3 and time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read()
        time.sleep(0.2)
    assert _lines(results) >= 3, "the sweep did not start"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode != 0 and "interrupted" in stderr
    stopped = _lines(results)
    assert stopped < 400
    time.sleep(3)  # a surviving worker would append a run every few milliseconds
    assert _lines(results) == stopped


def test_sigterm_in_the_middle_of_long_runs_ends_the_sweep_at_once(tmp_path):
    # the workers were left running their current runs (minutes here): `run` waited
    # for them at exit, and a second SIGTERM left them behind as orphans
    import signal
    import subprocess
    import sys
    import time

    command = [sys.executable, "-m", "benchmarks", "run"]
    command += ["--plugin", "tests.benchmarks.slow_plugin", "--problems"]
    command += ["bohachevsky", "--methods", "sleeping-random", "--seeds", "2"]
    command += ["--workers", "2", "--iterations", "1", "--out", str(tmp_path)]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    time.sleep(15)  # the workers have started their (300 s) runs
    assert process.poll() is None, process.stderr.read()
    start = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode != 0 and "interrupted" in stderr
    assert time.monotonic() - start < 30


def _children(pid: int) -> list:
    psutil = pytest.importorskip("psutil")
    return psutil.Process(pid).children(recursive=True)


def _ended(process) -> bool:
    import psutil

    try:
        return process.status() == psutil.STATUS_ZOMBIE  # ended, not yet reaped
    except psutil.NoSuchProcess:
        return True


def test_a_killed_sweep_ends_its_workers(tmp_path):
    # the main process killed (SIGKILL: nothing of it runs) while its workers are in
    # the middle of their (300 s) runs: the workers end at once, not 300 s later
    import os
    import subprocess
    import sys
    import time

    markers = tmp_path / "started"
    markers.mkdir()
    command = [sys.executable, "-m", "benchmarks", "run"]
    command += ["--plugin", "tests.benchmarks.slow_plugin", "--problems"]
    command += ["bohachevsky", "--methods", "sleeping-random", "--seeds", "2"]
    command += ["--workers", "2", "--iterations", "1", "--out", str(tmp_path)]
    env = {**os.environ, "SLOW_PLUGIN_MARKERS": str(markers)}
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 180
        while len(list(markers.iterdir())) < 2 and time.monotonic() < deadline:
            assert process.poll() is None, process.stderr.read()
            time.sleep(0.2)
        assert len(list(markers.iterdir())) == 2, "the runs did not start"
        children = _children(process.pid)  # the workers and the resource tracker
        assert {int(p.name) for p in markers.iterdir()} <= {c.pid for c in children}
        process.kill()
        process.wait()
        deadline = time.monotonic() + 30
        while not all(map(_ended, children)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert all(map(_ended, children)), [c.pid for c in children if not _ended(c)]
    finally:
        for child in _children(process.pid) if process.poll() is None else []:
            child.kill()
        process.kill()


def test_a_lost_worker_fails_its_run_by_name_and_the_sweep_goes_on(tmp_path, capsys):
    # the first run's worker is killed (as by the out-of-memory killer); the pool is
    # renewed and the second run finishes
    from benchmarks.results_io import load_results

    run = ["run", "--out", str(tmp_path), "--problems", "bohachevsky"]
    run += ["--methods", "dying-worker", "random", "--seeds", "1", "--workers", "1"]
    run += ["--iterations", "1", "--plugin", "tests.benchmarks.faulty_plugin"]
    main(run)
    out = capsys.readouterr().out
    assert "run bohachevsky/dying-worker/seed 0 failed: BrokenProcessPool" in out
    records, _ = load_results(tmp_path / "results.jsonl")
    lost, finished = records
    assert (lost["method"], finished["method"]) == ("dying-worker", "random")
    assert "killed by SIGKILL (e.g. by the out-of-memory killer)" in lost["error"]
    assert "error" not in finished and len(finished["values"]) == 1


# ------------------------------------------------------------ devices


@pytest.mark.parametrize(
    "text, message",
    [
        ("tpu", "expected cpu, cuda or cuda:N"),
        ("meta", "expected cpu, cuda or cuda:N"),
        ("cuda:99", "this machine has"),
    ],
)
def test_run_rejects_a_device_it_cannot_use(tmp_path, capsys, text, message):
    with pytest.raises(SystemExit) as e:
        main(["run", "--out", str(tmp_path), *RUN, "--device", text])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--device" in err and message in err


def test_parse_device_names_cpu_and_cuda():
    assert cli.parse_device("cpu") == torch.device("cpu")
    with pytest.raises(argparse.ArgumentTypeError, match="got 'gpu'"):
        cli.parse_device("gpu")


def test_one_results_directory_holds_one_device(tmp_path, capsys, device):
    out = tmp_path / "sweep"
    run = ["run", "--out", str(out), *RUN, "--seeds", "1", "--iterations", "1"]
    main([*run, "--device", str(device)])
    path = out / "results.jsonl"
    (record,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert record["device"] == device.type
    # records written before runs had a device were CPU runs: resuming reuses them
    if device.type == "cpu":
        del record["device"]
        write_records(out, [record])
        main([*run, "--seeds", "2"])
        assert "resuming: 1 finished run(s)" in capsys.readouterr().out
    # a sweep on another device refuses the directory instead of mixing wall times
    other = "cuda" if device.type == "cpu" else "cpu"
    record["device"] = other
    write_records(out, [record])
    with pytest.raises(SystemExit) as e:
        main([*run, "--device", str(device)])
    assert e.value.code == 2
    assert f"has runs on {other}" in capsys.readouterr().err


# ------------------------------------------------------------ export


@pytest.mark.parametrize("name", ["records.jsonl.gz", "records.jsonl"])
def test_export_keeps_what_the_reports_and_a_resumed_run_read(tmp_path, capsys, name):
    import gzip

    out = tmp_path / "sweep"
    run = ["run", *RUN, "--seeds", "2", "--iterations", "2"]
    main([*run, "--out", str(out)])
    capsys.readouterr()
    main(["summarize", "--out", str(out)])
    table = capsys.readouterr().out
    exported = tmp_path / "kept" / name
    main(["export", "--out", str(out), str(exported)])
    assert "2 record(s)" in capsys.readouterr().out
    data = exported.read_bytes()
    text = (gzip.decompress(data) if name.endswith(".gz") else data).decode()
    records = [json.loads(line) for line in text.splitlines()]
    assert len(records) == 2 and not any("queries" in r for r in records)
    assert all(len(r["values"]) == 2 for r in records)
    # unpacked into a results directory: the same table, and a run resumes from it
    again = tmp_path / "again"
    write_records(again, records)
    main(["summarize", "--out", str(again)])
    assert capsys.readouterr().out == table
    main([*run, "--out", str(again)])
    assert "resuming: 2 finished run(s)" in capsys.readouterr().out
    # the same records give the same bytes (a re-export changes nothing in git)
    main(["export", "--out", str(out), str(exported)])
    assert exported.read_bytes() == data


def test_run_environment_names_versions_commit_and_cpu():
    from importlib import metadata

    from benchmarks.context import run_environment

    environment = run_environment()
    assert environment["torch"] == torch.__version__
    assert environment["botorch"] == metadata.version("botorch")
    assert environment["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert environment["cuda"] == torch.version.cuda
    assert environment["cpu"]
    # a git checkout names its commit (CI installs from a clone); elsewhere None
    commit = environment["git_commit"]
    assert commit is None or (len(commit) == 40 and int(commit, 16) >= 0)


def test_summarize_says_few_seeds_of_the_real_track_vary(tmp_path, capsys):
    # the committed confirmation records, seeds 0-2
    import gzip
    from pathlib import Path

    records = Path(cli.__file__).parent / "real_track_records.jsonl.gz"
    with gzip.open(records, "rt") as lines:
        kept = [line for line in lines if json.loads(line)["seed"] < 3]
    (tmp_path / "results.jsonl").write_text("".join(kept))
    main(["summarize", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "Real track, confirmation half:" in out
    assert (
        "(3 seeds: single runs on these noisy problems vary a lot; the 20-seed" in out
    )
