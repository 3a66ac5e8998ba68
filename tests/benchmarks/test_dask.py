r"""Sweeps on a dask.distributed cluster: the CLI's ``--dask-scheduler`` against a
real ``LocalCluster`` (skipped without the ``[dask]`` extra)."""

import json

import pytest

pytest.importorskip("dask.distributed")

from dask.distributed import LocalCluster  # noqa: E402

from benchmarks.__main__ import main  # noqa: E402
from benchmarks.runner import run_experiment  # noqa: E402


@pytest.fixture(scope="module")
def scheduler():
    # worker processes, as on a real cluster (runs are pickled to them)
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address


def test_a_sweep_runs_on_a_local_cluster(tmp_path, scheduler, capsys):
    out = tmp_path / "dask"
    args = ["run", "--out", str(out), "--problems", "bohachevsky"]
    args += ["--methods", "random", "gp-ucb", "--seeds", "2", "--iterations", "3"]
    main([*args, "--dask-scheduler", scheduler])
    records = [json.loads(line) for line in (out / "results.jsonl").open()]
    assert sorted((r["method"], r["seed"]) for r in records) == [
        ("gp-ucb", 0),
        ("gp-ucb", 1),
        ("random", 0),
        ("random", 1),
    ]
    assert all("error" not in r for r in records)
    # the cluster's runs are the runs of this process, seed for seed
    for r in records:
        local = run_experiment("bohachevsky", r["method"], seed=r["seed"], iterations=3)
        assert r["queries"] == local["queries"] and r["values"] == local["values"]
    assert "gp-ucb" in capsys.readouterr().out  # the summary table
    # a second run finds every run recorded and resumes with nothing to do
    main([*args, "--dask-scheduler", scheduler])
    assert len((out / "results.jsonl").read_text().splitlines()) == 4


def test_the_scaling_benchmark_times_each_cluster_size(capsys):
    from benchmarks.scaling import main as scaling_main

    rows = scaling_main(
        ["--workers", "1", "2", "--methods", "random", "--seeds", "2"]
        + ["--iterations", "2"]
    )
    assert [workers for workers, _, _ in rows] == [1, 2]
    assert rows[0][2] == 1.0 and rows[1][2] == pytest.approx(rows[0][1] / rows[1][1])
    assert "2 runs of random on bohachevsky" in capsys.readouterr().out
