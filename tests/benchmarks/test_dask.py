r"""Sweeps on a dask.distributed cluster: the CLI's ``--dask-scheduler`` against a
real ``LocalCluster`` (skipped without the ``[dask]`` extra)."""

import json

import pytest

pytest.importorskip("dask.distributed")

from dask.distributed import LocalCluster  # noqa: E402

from botorch_transfer.benchmarks.__main__ import main  # noqa: E402
from botorch_transfer.benchmarks.runner import run_experiment  # noqa: E402


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
