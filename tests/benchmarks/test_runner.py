import json
import re

import pytest
import torch

from benchmarks.__main__ import main
from benchmarks.heterogeneous_methods import SOURCE_SPACE_METHODS
from benchmarks.methods import TRANSFER, available_methods
from benchmarks.results_io import load_results
from benchmarks.runner import run_experiment, safe_run_experiment, warning_causes
from benchmarks.summary import summary_table
from botorch_transfer.test_functions.hpo_pairs import HPO_PAIRS
from botorch_transfer.test_functions.problems import PROBLEMS, make_problem
from botorch_transfer.test_functions.real_heterogeneous import HETERO_PAIRS
from botorch_transfer.test_functions.real_multi import MULTI_SOURCE_PROBLEMS
from botorch_transfer.test_functions.real_pairs import REAL_PAIRS
from botorch_transfer.test_functions.zero_start import ZERO_START_BASES
from tests.test_functions.yahpo_data import yahpo_available

# the shilton-bumps-s* problems differ only in the shift, and the controls only in
# their source: one of each kind stands for all
SMOKE_PROBLEMS = sorted(
    p
    for p in PROBLEMS
    if not (
        p.startswith("shilton-bumps-")
        or p.endswith(("-unrelated", "-affine", "-identical"))
    )
    or p in ("shilton-bumps-s0.5", "gaussian-bumps-unrelated", "bohachevsky-affine")
    # the real HPO pairs need the [yahpo] extra: test_problems runs them when present
    if p not in HPO_PAIRS
    # one real tuning pair (test_real_pairs runs a loop on each family)
    and (p not in REAL_PAIRS or p == "svm-digit3-to-digit8")
    # one multi-source problem (test_real_multi checks the others' data)
    and (p not in MULTI_SOURCE_PROBLEMS or p == "multi-svm-digit9")
    # the zero-start problems are for methods that start from no target point
    # (test_zero_start runs them)
    and p not in ZERO_START_BASES
    # a source on other parameters is for the methods that map it
    # (test_heterogeneous_methods runs them)
    and p not in HETERO_PAIRS
)

#: The problems every method runs on by default: a continuous one and a grid one
#: with several sources.
COVERING_PROBLEMS = ("gaussian-bumps", "multi-svm-digit9")
#: The method every smoke problem runs with by default (the recommended model).
COVERING_METHOD = "rank-weighted"


def smoke_cases():
    r"""Every method on every smoke problem. By default every method runs on
    ``COVERING_PROBLEMS`` and every problem with ``COVERING_METHOD``; a guarded method
    (its fitted model inside TransferGuard, tested in tests/models/test_guard.py)
    runs one problem. The rest of the matrix runs with ``-m slow`` (to keep CI under
    its time budget)."""
    for method in available_methods(TRANSFER):
        if method in SOURCE_SPACE_METHODS:
            continue
        for problem in SMOKE_PROBLEMS:
            if method.endswith("-guarded"):
                slow = problem != "gaussian-bumps"
            else:
                slow = problem not in COVERING_PROBLEMS and method != COVERING_METHOD
            yield pytest.param(
                problem,
                method,
                id=f"{method}-{problem}",
                marks=pytest.mark.slow if slow else (),
            )


@pytest.mark.parametrize("problem, method", list(smoke_cases()))
def test_every_problem_and_method_runs(problem, method, device):
    record = run_experiment(problem, method, seed=0, iterations=2, device=device)
    assert record["device"] == device.type
    assert record["environment"]["torch"] == torch.__version__
    assert (
        len(record["queries"])
        == len(record["values"])
        == len(record["iteration_s"])
        == 2
    )
    if (
        record["optimum"] is None
    ):  # HPO: regret against the best value found, at report time
        assert record["regret"] is None and not record["optimum_is_exact"]
    else:
        assert len(record["regret"]) == 2
        assert record["cumulative_regret"][-1] == pytest.approx(sum(record["regret"]))
    if record["optimum_is_exact"]:
        assert all(r >= -1e-12 for r in record["regret"])  # exact optimum on the grid
    if method.endswith("-guarded"):  # which model the guard used, every iteration
        trace = record["diagnostics"]
        # a prequential or sequential guard keeps its summed gain, a leave-one-out
        # one its LOO gain
        summed = ("guard_prequential_gain", "guard_sequential_gain")
        key = next((k for k in summed if k in trace), "guard_loo_gain")
        assert len(trace["guard_uses_transfer"]) == len(trace[key]) == 2
        if key == "guard_prequential_gain":
            assert trace[key][0] == 0.0  # the run's first guard has no evidence
        for uses, gain in zip(trace["guard_uses_transfer"], trace[key]):
            # margin 0: the transfer model acts unless the target-only GP gains
            assert uses is (gain is None or gain <= 0.0)
    elif method.startswith("rank-weighted"):  # the transfer weight, every iteration
        weights = record["diagnostics"]["transfer_weight"]
        assert len(weights) == 2 and all(0.0 <= w <= 1.0 for w in weights)
    else:
        assert "diagnostics" not in record
    json.dumps(record)  # serializable


def test_same_seed_same_run():
    a = run_experiment("gaussian-bumps", "deltabo", seed=3, iterations=2)
    b = run_experiment("gaussian-bumps", "deltabo", seed=3, iterations=2)
    assert a["queries"] == b["queries"] and a["observations"] == b["observations"]


def test_failures_are_recorded():
    record = safe_run_experiment("bohachevsky", "no-such-method", seed=0, iterations=1)
    assert "Unknown method" in record["error"]


def test_a_run_keeps_its_warnings_and_a_sweep_reports_each_cause_once():
    # the scrambled source of the permuted pair is uninformative: the recommended
    # model warns about it in every run, with that run's R^2
    records = [
        safe_run_experiment("mlp-breast_cancer-to-wine-permuted", "rank-weighted", s, 1)
        for s in range(2)
    ]
    messages = [w["message"] for r in records for w in r["warnings"]]
    assert any("min_source_skill" in m for m in messages)
    causes = [c for c in warning_causes(records) if "min_source_skill" in c[2]]
    assert [(category, runs) for category, runs, _ in causes] == [
        ("UninformativeSourceWarning", 2)
    ]


def test_cli_runs_resumes_and_reports(tmp_path, capsys):
    args = [
        "--out",
        str(tmp_path),
        "--seeds",
        "2",
        "--iterations",
        "2",
        "--problems",
        "bohachevsky",
        "--methods",
        "deltabo",
        "random",
        "--workers",
        "1",
    ]
    main(["run", *args])
    records, corrupt = load_results(tmp_path / "results.jsonl")
    assert len(records) == 4 and corrupt == 0
    assert (tmp_path / "regret.png").stat().st_size > 0
    # an interrupted write leaves a corrupt last line: tolerated, reported, nothing
    # rerun
    with open(tmp_path / "results.jsonl", "a") as fh:
        fh.write('{"problem": "boha')
    capsys.readouterr()
    main(["run", *args])
    out = capsys.readouterr()
    assert "resuming: 4 finished run(s)" in out.out and "corrupt" in out.err
    records, corrupt = load_results(tmp_path / "results.jsonl")
    assert len(records) == 4 and corrupt == 1
    # new runs after the corrupt line are written intact
    main(["run", *args[:-5], "--methods", "gp-ucb", "--workers", "1"])
    records, corrupt = load_results(tmp_path / "results.jsonl")
    assert len(records) == 6 and corrupt == 1
    table = summary_table(records)
    assert "deltabo" in table and "random" in table and "R_T" in table
    (tmp_path / "regret.png").unlink()
    main(["plot", "--out", str(tmp_path), "--log-y", "--dpi", "60"])
    assert (tmp_path / "regret.png").stat().st_size > 0


def test_cli_runs_on_a_dask_cluster(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        main(
            [
                "run",
                "--out",
                str(tmp_path),
                "--seeds",
                "2",
                "--iterations",
                "2",
                "--problems",
                "bohachevsky",
                "--methods",
                "random",
                "--dask-scheduler",
                cluster.scheduler_address,
            ]
        )
    records, corrupt = load_results(tmp_path / "results.jsonl")
    assert sorted(r["seed"] for r in records) == [0, 1] and corrupt == 0
    assert records[0] == {
        **records[0],
        **run_experiment("bohachevsky", "random", records[0]["seed"], 2),
        "iteration_s": records[0]["iteration_s"],
        "setup_s": records[0]["setup_s"],
    }


def test_a_registered_method_runs_from_the_cli(tmp_path, capsys):
    main(
        [
            "run",
            "--out",
            str(tmp_path),
            "--seeds",
            "2",
            "--iterations",
            "2",
            "--problems",
            "bohachevsky",
            "--methods",
            "mhgp",
            "--workers",
            "1",
            "--plugin",
            "tests.benchmarks.plugin_example",
        ]
    )
    records, _ = load_results(tmp_path / "results.jsonl")
    assert sorted((r["method"], r["seed"]) for r in records) == [
        ("mhgp", 0),
        ("mhgp", 1),
    ]
    assert all("error" not in r and len(r["queries"]) == 2 for r in records)
    from benchmarks.methods import register_method
    from benchmarks.transfer_protocol import RandomSearch

    with pytest.raises(ValueError, match="already registered"):
        register_method("deltabo", RandomSearch())


def test_a_killed_sweep_resumes_without_duplicates_or_losses(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    options = [
        "--out",
        str(tmp_path),
        "--seeds",
        "10",
        "--iterations",
        "3",
        "--problems",
        "gaussian-bumps",
        "--methods",
        "random",
        "gp-ucb",
        "--workers",
        "1",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")]),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks", "run", *options],
        cwd=repo,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    results = tmp_path / "results.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and process.poll() is None:
        if results.exists() and len(results.read_text().splitlines()) >= 3:
            break
        time.sleep(0.02)
    assert process.poll() is None, "the sweep ended before it could be killed"
    os.killpg(
        process.pid, signal.SIGKILL
    )  # the CLI and its worker processes, mid-sweep
    process.wait()
    before, _ = load_results(results)
    assert 3 <= len(before) < 20
    main(["run", *options])
    records, corrupt = load_results(results)
    keys = [(r["problem"], r["method"], r["seed"]) for r in records]
    assert len(keys) == len(set(keys)) == 20  # nothing run twice, nothing lost
    assert all(r in records for r in before)  # finished runs kept as they were


# ------------------------------------------------------------ proposals


@pytest.fixture
def faulty_methods():
    r"""The misbehaving methods of ``faulty_plugin`` (registered once per process)."""
    import importlib

    importlib.import_module("tests.benchmarks.faulty_plugin")


@pytest.mark.parametrize(
    "method, message",
    [
        ("nan-proposal", "NaN or infinite coordinates"),
        (
            "outside-proposal",
            r"outside the domain of bohachevsky .* dimension\(s\) \[0, 1\]",
        ),
        ("two-proposals", "proposed 2 points \\(a 2 x 2 tensor\\) where one was asked"),
    ],
)
def test_a_bad_proposal_fails_the_run(faulty_methods, method, message):
    with pytest.raises(ValueError, match=f"Method '{method}' proposed"):
        run_experiment("bohachevsky", method, seed=0, iterations=1)
    record = safe_run_experiment("bohachevsky", method, seed=0, iterations=1)
    assert set(record) >= {"error", "traceback"} and "values" not in record
    assert re.search(message, record["error"])


def test_check_proposal_by_hand():
    from benchmarks.runner import DOMAIN_TOLERANCE, check_proposal
    from botorch_transfer.test_functions.problems import make_problem

    grid = make_problem("bohachevsky")  # a 120 x 120 grid of [-2, 2]^2
    point = grid.grid[1234].unsqueeze(0)
    assert torch.equal(check_proposal(point, grid, "m"), point)
    # float32 rounding: moved onto the grid point
    rounded = check_proposal(point.float(), grid, "m")
    assert rounded.dtype == torch.float64 and torch.equal(rounded, point)
    edge = torch.tensor([[2.0 + 4 * DOMAIN_TOLERANCE / 2, -2.0]])
    assert check_proposal(edge, grid, "m").tolist() == [[2.0, -2.0]]
    with pytest.raises(ValueError, match="not a point of bohachevsky's candidate grid"):
        check_proposal(point + 0.01, grid, "m")
    with pytest.raises(ValueError, match=r"shape \(2,\); `propose` returns .* 1 x 2"):
        check_proposal(point.squeeze(0), grid, "m")
    with pytest.raises(ValueError, match=r"shape \(1, 3\)"):
        check_proposal(torch.zeros(1, 3), grid, "m")
    with pytest.raises(TypeError, match="proposed list"):
        check_proposal([[0.0, 0.0]], grid, "m")
    with pytest.raises(ValueError, match="NaN or infinite"):
        check_proposal(torch.tensor([[float("inf"), 0.0]]), grid, "m")
    box = make_problem("gaussian-bumps")  # continuous, [-5, 5]^2
    inside = torch.tensor([[0.123456789, -4.9]])
    assert torch.equal(check_proposal(inside, box, "m"), inside)
    with pytest.raises(ValueError, match=r"outside the domain .* dimension\(s\) \[1\]"):
        check_proposal(torch.tensor([[0.0, -5.1]]), box, "m")
    # a fixed input (lower bound = upper bound) takes its value only
    from dataclasses import replace

    fixed = replace(box, bounds=torch.tensor([[-5.0, 1.0], [5.0, 1.0]]))
    assert check_proposal(torch.tensor([[0.5, 1.0]]), fixed, "m").tolist() == [
        [0.5, 1.0]
    ]
    with pytest.raises(ValueError, match=r"dimension\(s\) \[1\]"):
        check_proposal(torch.tensor([[0.5, 1.1]]), fixed, "m")


def test_a_non_finite_objective_value_fails_the_run():
    from dataclasses import replace

    from botorch_transfer.test_functions.problems import make_problem

    problem = make_problem("gaussian-bumps")
    broken = replace(problem, target=lambda X: problem.target(X) * float("nan"))
    with pytest.raises(ValueError, match="The target of gaussian-bumps at the query"):
        run_experiment(broken, "random", seed=0, iterations=1)


def test_a_failed_run_is_recorded_as_failed_and_rerun(
    tmp_path, capsys, monkeypatch, faulty_methods
):
    run = ["run", "--out", str(tmp_path), "--problems", "bohachevsky", "--seeds", "1"]
    run += ["--iterations", "2", "--workers", "1", "--methods", "nan-proposal"]
    run += ["--plugin", "tests.benchmarks.faulty_plugin"]
    monkeypatch.delenv("FAULTY_PLUGIN_FIXED", raising=False)
    with pytest.raises(SystemExit, match="no finished run"):
        main(run)  # the plot of a sweep without a finished run
    assert "proposed [nan, nan], which has NaN" in capsys.readouterr().out
    (failed,), _ = load_results(tmp_path / "results.jsonl")
    assert "NaN or infinite" in failed["error"] and "values" not in failed
    monkeypatch.setenv("FAULTY_PLUGIN_FIXED", "1")  # the workers see it at start-up
    main(run)
    assert "resuming" not in capsys.readouterr().out
    records, _ = load_results(tmp_path / "results.jsonl")
    assert [("error" in r) for r in records] == [True, False]
    assert len(records[1]["values"]) == 2


def test_a_sweep_renews_a_pool_that_broke_between_runs(monkeypatch):
    # the pool refuses a run (a worker was lost while no run was in progress): it is
    # renewed and every run is recorded once
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from benchmarks import runner

    class Pool:
        def __init__(self):
            self.threads, self.renewed, self.refuse = ThreadPoolExecutor(1), 0, True

        def submit(self, fn, *args):
            if self.refuse:
                self.refuse = False
                raise BrokenProcessPool("broken")
            return self.threads.submit(fn, *args)

        def renew(self):
            self.renewed += 1
            return "a worker process ended abruptly"

    def record(problem, method, seed, *options):
        return {"problem": problem, "method": method, "seed": seed}

    monkeypatch.setattr(runner, "safe_run_experiment", record)
    pool = Pool()
    runs = [("p", "m", 0), ("p", "m", 1)]
    records = list(runner.sweep(pool, runs, (None, (), "cpu"), window=1))
    assert sorted(r["seed"] for r in records) == [0, 1] and pool.renewed == 1


@pytest.mark.parametrize(
    # MultiTaskGP on the YAHPO pairs takes a minute and more: with -m slow
    "method",
    [pytest.param("mtgp", marks=pytest.mark.slow), "rgpe", "gp-ucb-fitted"],
)
@pytest.mark.parametrize("pair", ["lcbench-pair-weak", "xgboost-pair-strong"])
def test_the_peers_and_the_no_transfer_gp_run_a_real_pair(pair, method):
    yahpo_available(HPO_PAIRS[pair])
    record = run_experiment(pair, method, 0, 2)
    assert "error" not in record and len(record["queries"]) == 2
    dim = make_problem(pair).dim
    assert all(len(x) == dim for x in record["queries"])
