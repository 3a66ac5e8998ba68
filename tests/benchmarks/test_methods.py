r"""The one registry of benchmark methods, and that every consumer resolves names
through it: the CLI, the transfer and meta protocols and the timing script."""

import argparse
import dataclasses
import math

import pytest
import torch

from benchmarks import (
    timing,
    timing_meta,
    timing_problem,
    timing_runs,
    transfer_methods,
)
from benchmarks.__main__ import main
from benchmarks.meta import MetaProblem, gp_tasks, run_meta_experiment
from benchmarks.meta_methods import ClusterMetaBO
from benchmarks.methods import (
    META,
    PROTOCOLS,
    TRANSFER,
    Method,
    available_methods,
    get_method,
    register_method,
    unregister_method,
)
from benchmarks.runner import run_experiment
from benchmarks.transfer_methods import prequential_guarded_marginal_deltabo
from benchmarks.transfer_protocol import AcquisitionMethod, RandomSearch, target_gp


@pytest.fixture
def register():
    r"""``register(name, method)``; the names are unregistered after the test."""
    names = []

    def _register(name, method):
        names.append(name)
        return register_method(name, method)

    yield _register
    for name in set(names) & set(available_methods()):
        unregister_method(name)


class RecordingRandomSearch(RandomSearch):
    r"""Random search that records how the protocol drives it."""

    def __init__(self):
        self.setups, self.tasks, self.sizes, self.threads = 0, 0, [], []

    def setup(self, problem, data):
        self.setups += 1
        return super().setup(problem, data)

    def start_task(self, state, generator):
        self.tasks += 1
        return super().start_task(state, generator)

    def propose(self, state, X, Y):
        assert X.shape[0] == Y.shape[0] and Y.shape[-1] == 1
        self.sizes.append(X.shape[0])
        self.threads.append(torch.get_num_threads())
        return super().propose(state, X, Y)

    def run_info(self, state):
        return {"recorded_setups": self.setups}

    def task_info(self, state):
        return {"recorded_sizes": list(self.sizes)}

    def settings(self, problem):
        return {"recorded": True}


def test_register_get_list_and_unregister(register):
    method = RecordingRandomSearch()
    assert register("test-recorder", method) is method
    assert get_method("test-recorder") is method
    assert get_method("test-recorder", TRANSFER) is get_method("test-recorder", META)
    assert available_methods()[-1] == "test-recorder"
    for protocol in PROTOCOLS:
        assert "test-recorder" in available_methods(protocol)
    ucb_only = AcquisitionMethod(target_gp)
    register("test-ucb", ucb_only)
    assert "test-ucb" in available_methods(TRANSFER)
    assert "test-ucb" not in available_methods(META)
    assert unregister_method("test-ucb") is ucb_only
    assert "test-ucb" not in available_methods()


def test_builtin_names_are_unique_per_protocol():
    assert set(available_methods()) == set(available_methods(TRANSFER)) | set(
        available_methods(META)
    )
    # one name, one method: `random` is the only built-in shared by both protocols
    shared = set(available_methods(TRANSFER)) & set(available_methods(META))
    assert shared == {"random"}
    assert get_method("gp-ucb").protocols == (TRANSFER,)
    assert get_method("stbo-ucb").protocols == (META,)
    assert all(isinstance(get_method(name), Method) for name in available_methods())


def test_unknown_name_names_the_available_methods():
    with pytest.raises(ValueError, match="Unknown method 'no-such'") as info:
        get_method("no-such")
    assert all(name in str(info.value) for name in available_methods())
    with pytest.raises(ValueError, match="Unknown method 'no-such'") as info:
        get_method("no-such", META)
    assert "stbo" in str(info.value) and "deltabo" not in str(info.value)


def test_wrong_protocol_is_an_error():
    with pytest.raises(
        ValueError, match="'stbo' applies to .*'meta'.*not to 'transfer'"
    ):
        get_method("stbo", TRANSFER)
    with pytest.raises(ValueError, match="not to 'transfer'"):
        run_experiment("bohachevsky", "stbo", seed=0, iterations=1)
    with pytest.raises(ValueError, match="not to 'meta'"):
        run_meta_experiment(gp_tasks(n_tasks=5), "deltabo", seed=0, iterations=1)
    with pytest.raises(ValueError, match="`protocol`"):
        get_method("random", "no-such-protocol")


def test_duplicate_and_invalid_registrations(register):
    register("test-dup", RandomSearch())
    with pytest.raises(ValueError, match="'test-dup' is already registered"):
        register_method("test-dup", RandomSearch())
    with pytest.raises(ValueError, match="already registered"):
        register_method("deltabo", RandomSearch())  # built-ins too
    for name in ("", "Upper", "with space"):
        with pytest.raises(ValueError, match="lower case without spaces"):
            register_method(name, RandomSearch())
    with pytest.raises(TypeError, match="must be a Method"):
        register_method("test-factory", lambda problem, source: None)

    class NoProtocol(RandomSearch):
        protocols = ("bandit",)

    with pytest.raises(ValueError, match="protocols"):
        register_method("test-bad-protocol", NoProtocol())
    assert not {"test-factory", "test-bad-protocol"} & set(available_methods())


def test_transfer_protocol_resolves_and_drives_registered_methods(register):
    method = register("test-recorder", RecordingRandomSearch())
    threads = torch.get_num_threads()
    rng = torch.get_rng_state()
    record = run_experiment("bohachevsky", "test-recorder", seed=4, iterations=3)
    # setup once, then one proposal per iteration on the growing target data
    assert method.setups == 1 and method.sizes == [2, 3, 4]
    # the run owns the thread count and the global seed, and restores both
    assert method.threads == [1, 1, 1] and torch.get_num_threads() == threads
    assert torch.equal(torch.get_rng_state(), rng)
    # the same policy as the built-in `random`: the same run
    builtin = run_experiment("bohachevsky", "random", seed=4, iterations=3)
    assert record["method"] == "test-recorder"
    assert record["queries"] == builtin["queries"]
    assert record["values"] == builtin["values"]


def test_guard_options_reach_the_guard(register):
    register("test-preq", prequential_guarded_marginal_deltabo())
    register(
        "test-preq-clipped", prequential_guarded_marginal_deltabo(prequential_clip=1e-3)
    )
    runs = {
        name: run_experiment("gaussian-bumps", name, seed=1, iterations=4)
        for name in ("test-preq", "test-preq-clipped")
    }
    plain = runs["test-preq"]["diagnostics"]["guard_prequential_gain"]
    clipped = runs["test-preq-clipped"]["diagnostics"]["guard_prequential_gain"]
    # the first gain is 0 (no evidence); then one new point per iteration, each
    # moving the clipped sum by at most 1e-3 nats
    steps = [b - a for a, b in zip(clipped, clipped[1:])]
    assert clipped[0] == 0.0 and all(abs(step) <= 1e-3 + 1e-12 for step in steps)
    assert any(abs(b - a) > 1e-3 for a, b in zip(plain, plain[1:]))  # the clip binds
    with pytest.raises(ValueError, match="`guard_options` needs a `guard`"):
        AcquisitionMethod(target_gp, guard_options={"prequential_clip": 3.0})


def test_prequential_methods_name_their_hand_over():
    # the guard's default is a final hand-over: the earlier prequential methods pass
    # hand_back=True, so their records keep their meaning
    for name in (
        "deltabo-marginal-preq-guarded",
        "deltabo-marginal-preqclip-guarded",
        "deltabo-marginal-preqclip2-guarded",
        "deltabo-marginal-preqinit-guarded",
    ):
        assert get_method(name, TRANSFER).guard_options["hand_back"] is True, name
    final = get_method("deltabo-marginal-final-guarded", TRANSFER)
    assert final.guard == "prequential"
    assert final.guard_options["hand_back"] is False


def linear_tasks():
    return MetaProblem(
        name="linear",
        description="",
        dim=2,
        n_tasks=5,
        evaluate=lambda i, X: X[:, :1] + i,
        pool_size=50,
        iterations=3,
        n_init=2,
    )


def test_meta_protocol_resolves_and_drives_registered_methods(register):
    method = register("test-recorder", RecordingRandomSearch())
    threads = torch.get_num_threads()
    record = run_meta_experiment(linear_tasks(), "test-recorder", seed=1)
    n_test = len(record["test_tasks"])
    # setup once per split, one task state per test task, 3 proposals per task
    assert method.setups == 1 and method.tasks == n_test
    assert method.sizes == [2, 3, 4] * n_test
    assert method.threads == [1] * 3 * n_test and torch.get_num_threads() == threads
    # the method's record hooks
    assert record["recorded_setups"] == 1 and record["settings"]["recorded"]
    assert record["tasks"][0]["recorded_sizes"] == [2, 3, 4]
    builtin = run_meta_experiment(linear_tasks(), "random", seed=1)
    assert [t["queries"] for t in record["tasks"]] == [
        t["queries"] for t in builtin["tasks"]
    ]
    assert record["simple_regret"] == builtin["simple_regret"]


class GlobalRNGSearch(RandomSearch):
    r"""Draws its queries from torch's global RNG (as BoTorch's raw samples or a
    plugin's own draws would)."""

    def propose(self, state, X, Y):
        return torch.rand(1, X.shape[-1], dtype=X.dtype)


def test_meta_runs_own_the_global_seed(register):
    register("test-global-rng", GlobalRNGSearch())
    rng = torch.get_rng_state()
    first = run_meta_experiment(linear_tasks(), "test-global-rng", seed=1)
    torch.rand(7)  # another global RNG state: the same run
    second = run_meta_experiment(linear_tasks(), "test-global-rng", seed=1)
    assert [t["queries"] for t in first["tasks"]] == [
        t["queries"] for t in second["tasks"]
    ]
    other = run_meta_experiment(linear_tasks(), "test-global-rng", seed=2)
    assert other["tasks"][0]["queries"] != first["tasks"][0]["queries"]
    torch.rand(7)
    state = torch.get_rng_state()
    run_meta_experiment(linear_tasks(), "test-global-rng", seed=1)
    assert torch.equal(torch.get_rng_state(), state)  # restored on exit
    assert not torch.equal(state, rng)


def test_cli_resolves_names_through_the_registry(register, capsys, tmp_path):
    register("test-transfer-only", AcquisitionMethod(target_gp))
    register("test-both", RandomSearch())
    main(["list", "--out", str(tmp_path)])
    sections: dict[str, list[str]] = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("  "):  # "  name  description" under its section's title
            sections[list(sections)[-1]].append(line.split()[0])
        else:
            sections[line] = []
    assert sections["methods:"] == list(available_methods(TRANSFER))
    assert sections["meta-learning methods:"] == list(available_methods(META))
    assert "test-transfer-only" not in sections["meta-learning methods:"]
    assert "test-both" in sections["meta-learning methods:"]
    with pytest.raises(SystemExit) as info:
        main(["run", "--out", str(tmp_path), "--methods", "nope"])
    assert info.value.code == 2  # a usage error
    err = capsys.readouterr().err
    assert "unknown method(s) 'nope'; choose from" in err
    assert ", ".join(available_methods()) in " ".join(err.split())


def test_timing_resolves_names_through_the_registry(register):
    assert set(timing_runs.METHODS) <= set(available_methods(TRANSFER))
    register("test-recorder", RecordingRandomSearch())
    result = timing_runs.run_config(
        "test-recorder", dim=2, n_source=20, iterations=2, seed=0, max_fit_n=2000
    )
    assert result["method"] == "test-recorder" and result["refit"]
    assert get_method("test-recorder").sizes == [30, 31]
    with pytest.raises(ValueError, match="Unknown method 'nope'"):
        timing_runs.run_config(
            "nope", dim=2, n_source=20, iterations=1, seed=0, max_fit_n=1
        )
    with pytest.raises(SystemExit):  # argparse: not a registered transfer method
        timing.main(["--methods", "stbo"])


def test_timing_gives_the_recommended_model_every_source():
    args = argparse.Namespace(recommended_n=[200, 2000], recommended_sources=5)
    assert timing.recommended_configurations(args) == [(1, 200), (1, 2000), (5, 200)]
    _, data, X, _ = timing_runs.timing_data(2, 25, 0, torch.device("cpu"), n_sources=3)
    assert [s.name for s in data.sources] == ["source-0", "source-1", "source-2"]
    assert all(s.X.shape == (25, 2) for s in data.sources)
    assert X.shape == (timing_problem.T_TARGET, 2)
    state = get_method("rank-weighted").setup(
        timing_problem.timing_problem(2, 25), data
    )
    model = transfer_methods.rank_weighted_model(state, X, X.sum(-1, keepdim=True))
    assert model.source_names == ("source-0", "source-1", "source-2")


def test_timing_freezes_hyperparameters_of_large_models():
    result = timing_runs.run_config(
        "pooled-gp-fitted", dim=2, n_source=40, iterations=1, seed=0, max_fit_n=50
    )
    assert not result["refit"] and result["iteration_s"] > 0
    result = timing_runs.run_config(
        "gp-ucb-fitted", dim=2, n_source=40, iterations=1, seed=0, max_fit_n=50
    )
    assert result["refit"]  # a target-only model is small: re-fitted every iteration
    # a frozen kernel: only the transfer parameters are fitted, at any size
    result = timing_runs.run_config(
        "diffgp-source-kernel-low-rank",
        dim=2,
        n_source=40,
        iterations=1,
        seed=0,
        max_fit_n=50,
    )
    assert result["refit"]


def test_timing_stage1_case_runs_both_fits():
    tasks = timing_meta.stage1_tasks(n_tasks=3, n_points=6, dim=2, seed=0)
    assert len(tasks) == 3 and all(t.X.shape == (6, 2) for t in tasks)
    assert torch.equal(tasks[0].X, tasks[2].X)  # shared inputs
    for batched in (True, False):
        result = timing.run_stage1(3, 6, 2, batched=batched, seed=0)
        assert result["batched"] is batched and result["fit_s"] > 0


def test_timing_stage2_case_times_the_clustering_and_its_unit(monkeypatch, capsys):
    monkeypatch.setattr(timing, "in_process", lambda function, *args: function(*args))
    rows = timing.main(
        ["--stage2", "--stage1-tasks", "6", "--stage1-points", "8", "--dims", "2"]
    )
    assert len(rows) == 1 and rows[0]["n_tasks"] == 6
    assert rows[0]["stage2_s"] > 0 and rows[0]["pairwise_s"] > 0
    assert 1 <= rows[0]["n_clusters"] <= 6
    assert "stage 2/pairwise" in capsys.readouterr().out


def test_timing_pretrain_case_runs_both_priors():
    for objective in (None, "nll"):
        result = timing.run_pretrain(6, 8, 2, objective, steps=3, seed=0)
        assert result["objective"] == (objective or "default")
        assert result["fit_s"] > 0 and math.isfinite(result["heldout_nll"])


def test_cmbo_stage1_cache_is_keyed_on_the_data_not_on_object_ids():
    def problem(family_seed):
        return dataclasses.replace(
            gp_tasks(n_tasks=8, seed=family_seed),
            n_history=10,
            pool_size=60,
            cmbo_n_clusters=2,
        )

    assert isinstance(get_method("cmbo-center-jeffreys"), ClusterMetaBO)
    a = run_meta_experiment(problem(11), "cmbo-center-jeffreys", seed=7, iterations=1)
    # an equal problem built anew (new objects, same data): the fits are reused
    b = run_meta_experiment(problem(11), "cmbo-center-w2", seed=7, iterations=1)
    # same name and seed, other data: fitted anew
    c = run_meta_experiment(problem(12), "cmbo-center-jeffreys", seed=7, iterations=1)
    assert not a["stage1_cached"] and b["stage1_cached"] and not c["stage1_cached"]
    assert b["fit_s"] == a["fit_s"]


@pytest.mark.slow  # every target of the timing script, end to end (minutes)
def test_timing_targets_measure_every_target_in_one_run(monkeypatch, capsys):
    monkeypatch.setattr(timing, "in_process", lambda function, *args: function(*args))
    rows = timing.main(
        ["--targets", "--target-n", "40", "--large-n", "60", "--error-n", "50"]
        + ["--pooled-n", "40", "--iterations", "1", "--stage1-tasks", "3"]
        + ["--stage1-points", "6", "--pretrain-tasks", "6", "--pretrain-points", "8"]
        + ["--pretrain-steps", "3", "--repeats", "2"]
        + ["--recommended-n", "20", "40", "--recommended-sources", "3"]
    )
    goals = [r for r in rows if "goal" in r]
    assert len(goals) == 16
    assert [r["target"] for r in goals[:3]] == [
        "RankWeightedTransferGP/target-only per iteration, 1 source of 20, d=4",
        "RankWeightedTransferGP/target-only per iteration, 1 source of 40, d=4",
        "RankWeightedTransferGP/target-only per iteration, 3 sources of 20, d=4",
    ]
    # a ratio is the median over the repeats, each taken side by side
    ratio = goals[0]
    assert len(ratio["repeats"]) == 2
    assert ratio["value"] == pytest.approx(sum(ratio["repeats"]) / 2)
    with pytest.raises(SystemExit):  # argparse: --repeats must be at least 1
        timing.main(["--targets", "--repeats", "0"])
    assert all(
        math.isfinite(r["value"]) and r["met"] == (r["value"] <= r["goal"])
        for r in goals
    )
    out = capsys.readouterr().out
    assert "envgp-fitted-low-rank/DeltaBO" in out and "50-point subsample" in out
    assert "envgp-source-kernel-low-rank/DeltaBO" in out
    assert "diffgp-source-kernel-low-rank/DeltaBO" in out
    assert "default source map" in out
    # where DeltaBO's iterations go, at both source sizes
    breakdowns = [r for r in rows if r["target"].startswith("DeltaBO breakdown")]
    assert [r["target"] for r in breakdowns] == [
        "DeltaBO breakdown N=40, d=4",
        "DeltaBO breakdown N=60, d=8",
    ]
    assert out.count("at the target-only GP's cost per evaluation") == 2
    for row in breakdowns:
        assert row["at_baseline_cost"] > 0


def test_timing_breakdown_splits_an_iteration_into_fit_and_acquisition():
    # two iterations: the first warms up, the second is the result
    row = timing.run_breakdown(
        "deltabo-fitted", dim=2, n_source=40, iterations=2, seed=0, device="cpu"
    )
    assert row["method"] == "deltabo-fitted"
    for phase in ("fit", "acquisition"):
        count = row[f"{phase}_evaluations"]
        assert count >= 1 and count == int(count) and row[f"{phase}_s"] > 0
    # the raw-sample evaluation, then at least one of L-BFGS-B
    assert row["acquisition_evaluations"] >= 2
    # the phases are parts of the iteration (which also builds the model)
    assert row["fit_s"] + row["acquisition_s"] < row["iteration_s"]
    with pytest.raises(ValueError, match="`iterations` must be at least 2"):
        timing.run_breakdown("gp-ucb-fitted", 2, 40, 1, 0, "cpu")
    for method in ("gp-ucb", "deltabo-marginal-guarded"):  # not fitted / a guard
        with pytest.raises(ValueError, match="`method` must be a re-fitted"):
            timing.run_breakdown(method, 2, 40, 2, 0, "cpu")


def test_at_baseline_cost_prices_the_methods_evaluations_at_the_baselines():
    baseline = {
        "fit_s": 0.05,
        "fit_evaluations": 10,
        "acquisition_s": 0.04,
        "acquisition_evaluations": 8,
        "iteration_s": 0.1,
    }
    method = {
        "fit_s": 0.2,
        "fit_evaluations": 30,
        "acquisition_s": 0.3,
        "acquisition_evaluations": 4,
        "iteration_s": 0.5,
    }
    # 30 fits at 5 ms and 4 acquisitions at 5 ms: 0.17 s against 0.1 s
    assert timing.at_baseline_cost(method, baseline) == pytest.approx(1.7)
    assert timing.at_baseline_cost(baseline, baseline) == pytest.approx(0.9)


def test_timing_scaling_sweep_skips_exact_pooled_models_and_plots(
    monkeypatch, tmp_path, capsys
):
    monkeypatch.setattr(timing, "in_process", lambda function, *args: function(*args))
    path = tmp_path / "scaling.png"
    rows = timing.main(
        ["--scaling", "--methods", "gp-ucb-fitted", "diffgp-fitted-low-rank"]
        + ["diffgp-fitted", "--sizes", "20", "40", "--max-exact-n", "30"]
        + ["--dims", "2", "--iterations", "1", "--plot", str(path)]
    )
    ran = {(r["method"], r["N"]) for r in rows}
    assert ran == {
        ("gp-ucb-fitted", 20),
        ("gp-ucb-fitted", 40),
        ("diffgp-fitted-low-rank", 20),
        ("diffgp-fitted-low-rank", 40),
        ("diffgp-fitted", 20),
    }
    assert all(r["iteration_s"] > 0 and r["peak_rss_mb"] > 0 for r in rows)
    assert "skipped" in capsys.readouterr().out and path.stat().st_size > 0


@pytest.mark.parametrize(
    "method",
    [
        "gp-ucb-fitted",
        "deltabo-fitted",
        "envgp-fitted-low-rank",
        "envgp-source-kernel-low-rank",
    ],
)
def test_timing_runs_on_the_requested_device(device, method):
    result = timing_runs.run_config(
        method,
        dim=2,
        n_source=40,
        iterations=1,
        seed=0,
        max_fit_n=2000,
        device=str(device),
    )
    assert result["device"] == torch.device(device).type and result["refit"]
    assert result["iteration_s"] > 0 and result["setup_s"] >= 0
    if torch.device(device).type == "cuda":
        assert result["peak_device_mb"] > 0
    else:
        assert result["peak_device_mb"] is None
