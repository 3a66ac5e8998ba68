r"""Meta-learning (leave-tasks-out) benchmarks: every method runs, the regret
arithmetic."""

import dataclasses
import json

import pytest
import torch
from botorch.fit import fit_gpytorch_mll

from benchmarks.__main__ import main
from benchmarks.meta import (
    META_PROBLEMS,
    MetaProblem,
    _split,
    gp_tasks,
    meta_training_data,
    own_inputs,
    run_meta_experiment,
)
from benchmarks.meta_methods import ClusterMetaBO, greedy_portfolio
from benchmarks.methods import (
    META,
    MetaData,
    available_methods,
    get_method,
)
from benchmarks.regret_tables import (
    budget_to_target,
    rank_and_solved,
    rank_solved_table,
    simple_regret_table,
)
from benchmarks.results_io import load_results
from benchmarks.summary import summary_table
from botorch_transfer import PretrainedPriorGP, pretrain_prior
from tests.benchmarks.test_cli import write_records


def small_gp_tasks():
    return dataclasses.replace(
        gp_tasks(n_tasks=10), n_history=12, pool_size=200, pretrain_steps=20
    )


#: BoTorch's MultiTaskGP fit crawls along a ridge of its per-task means and task
#: covariance (thousands of L-BFGS steps with its defaults, minutes here): its run
#: is in the slow suite; the test below checks its data and proposal.
SLOW_META_METHODS = {"mtgp-meta", "mtgp-meta-skip"}


@pytest.mark.parametrize(
    "method",
    [
        pytest.param(m, marks=pytest.mark.slow) if m in SLOW_META_METHODS else m
        for m in available_methods(META)
    ],
)
def test_every_meta_method_runs(method, device):
    record = run_meta_experiment(
        small_gp_tasks(), method, seed=0, iterations=2, device=device
    )
    assert record["device"] == device.type
    assert record["environment"]["torch"] == torch.__version__
    assert record["test_tasks"] and set(record["test_tasks"]).isdisjoint(
        record["train_tasks"]
    )
    assert sorted(record["test_tasks"] + record["train_tasks"]) == list(range(10))
    assert len(record["simple_regret"]) == 3 and len(record["iteration_s"]) == 2 * len(
        record["test_tasks"]
    )
    json.dumps(record)


def test_simple_regret_arithmetic():
    # f_task(x) = x_0 + task: the pool optimum and the best-so-far are easy to recompute
    problem = MetaProblem(
        name="linear",
        description="",
        dim=2,
        n_tasks=5,
        evaluate=lambda i, X: X[:, :1] + i,
        pool_size=500,
        iterations=6,
        n_init=2,
    )
    record = run_meta_experiment(problem, "random", seed=1)
    regrets = []
    for task in record["tasks"]:
        values = torch.tensor(task["values"], dtype=torch.float64)
        assert task["optimum"] == pytest.approx(max(task["values"] + [task["optimum"]]))
        expected = [task["optimum"] - values[: k + 2].max().item() for k in range(7)]
        assert task["simple_regret"] == pytest.approx(expected)
        assert task["values"] == pytest.approx(
            [v for v in task["observations"]]
        )  # noise-free problem
        regrets.append(expected)
    assert record["simple_regret"] == pytest.approx(
        torch.tensor(regrets, dtype=torch.float64).mean(0).tolist()
    )
    assert record["simple_regret"][0] > 0
    table = simple_regret_table(
        [record, {**record, "seed": 2, "simple_regret": [0.0] * 7}]
    )
    mean_final = (record["simple_regret"][6] + 0.0) / 2
    assert f"{mean_final:.4f}" in table and "r@6" in table


def test_same_seed_same_meta_run():
    a = run_meta_experiment(small_gp_tasks(), "hyperbo-ekl", seed=3, iterations=2)
    b = run_meta_experiment(small_gp_tasks(), "hyperbo-ekl", seed=3, iterations=2)
    assert [t["queries"] for t in a["tasks"]] == [t["queries"] for t in b["tasks"]]


def test_export_drops_each_test_tasks_trace_and_keeps_the_summary(tmp_path, capsys):
    out = tmp_path / "sweep"
    run = ["run", "--problems", "gp-tasks", "--methods", "random", "hyperbo"]
    main(
        [*run, "--seeds", "1", "--iterations", "2", "--workers", "1", "--out", str(out)]
    )
    capsys.readouterr()
    main(["summarize", "--out", str(out)])
    table = capsys.readouterr().out
    exported = tmp_path / "meta.jsonl"
    main(["export", "--out", str(out), str(exported)])
    assert "2 record(s)" in capsys.readouterr().out
    records = [json.loads(line) for line in exported.read_text().splitlines()]
    tasks = [t for r in records for t in r["tasks"]]
    assert tasks and not any("queries" in t or "observations" in t for t in tasks)
    assert all(len(t["simple_regret"]) == 3 for t in tasks)
    again = tmp_path / "again"
    write_records(again, records)
    main(["summarize", "--out", str(again)])
    assert capsys.readouterr().out.replace(str(again), str(out)) == table


def test_cli_mixes_transfer_and_meta_problems(tmp_path, capsys):
    main(
        [
            "run",
            "--out",
            str(tmp_path),
            "--seeds",
            "1",
            "--iterations",
            "2",
            "--problems",
            "gp-tasks",
            "bohachevsky",
            "--methods",
            "random",
            "deltabo",
            "--workers",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert "skipping combinations that do not apply: deltabo on gp-tasks" in out
    records, _ = load_results(tmp_path / "results.jsonl")
    assert sorted((r["problem"], r["method"]) for r in records) == [
        ("bohachevsky", "deltabo"),
        ("bohachevsky", "random"),
        ("gp-tasks", "random"),
    ]
    assert (
        "Meta-learning problems" in out and (tmp_path / "regret.png").stat().st_size > 0
    )


def test_lcbench_surrogate():
    pytest.importorskip("onnxruntime")
    from botorch_transfer.test_functions.yahpo import YahpoSurrogate, default_data_dir

    if not (default_data_dir() / "lcbench" / "model.onnx").exists():
        pytest.skip("YAHPO lcbench data not available")
    bench = YahpoSurrogate("lcbench", "val_accuracy")
    assert bench.dim == 7 and len(bench.instances) == 34
    U = torch.rand(20, 7, dtype=torch.float64)
    y = bench(bench.instances[0], U)
    assert y.shape == (20, 1) and ((y >= 0) & (y <= 100)).all()
    assert torch.equal(y, bench(bench.instances[0], U))
    raw = bench.decode(torch.tensor([[0.0] * 7, [1.0] * 7]))
    assert raw["batch_size"].tolist() == [16, 512] and raw["learning_rate"][
        0
    ] == pytest.approx(1e-4)
    with pytest.raises(ValueError, match="target"):
        YahpoSurrogate("lcbench", "accuracy")


def small_cmbo_problem():
    return dataclasses.replace(
        gp_tasks(n_tasks=10), n_history=12, pool_size=100, cmbo_n_clusters=2
    )


#: the paper's variants (the README loop, ``cmbo``, is tested on its own)
CMBO_METHODS = [
    m for m in available_methods(META) if type(get_method(m)) is ClusterMetaBO
]


def test_cmbo_readme_loop_chooses_its_clusters_and_updates_its_weights():
    record = run_meta_experiment(small_cmbo_problem(), "cmbo", seed=0, iterations=3)
    assert record["settings"]["ucb_beta"] == 3.0
    assert record["settings"]["n_clusters_setting"] is None
    assert 1 <= record["n_clusters"] <= 6  # chosen, not the problem's C = 2
    for task in record["tasks"]:
        assert len(task["weights"]) == 3
        for w in task["weights"]:
            assert len(w) == record["n_clusters"] and sum(w) == pytest.approx(1.0)
    json.dumps(record)


@pytest.mark.parametrize("method", CMBO_METHODS)
def test_cmbo_methods_record_weights_and_timings(method):
    record = run_meta_experiment(small_cmbo_problem(), method, seed=0, iterations=3)
    n_test = len(record["test_tasks"])
    assert record["n_clusters"] == 2 and sum(record["cluster_sizes"]) == len(
        record["train_tasks"]
    )
    assert len(record["weight_update_s"]) == 3 * n_test and all(
        t >= 0 for t in record["weight_update_s"]
    )
    assert record["pretrain_s"] == pytest.approx(
        record["fit_s"] + record["clustering_s"]
    )
    assert record["settings"]["ucb_xi"] == 3.0
    for task in record["tasks"]:
        assert len(task["weights"]) == 3
        for w in task["weights"]:
            assert len(w) == 2 and sum(w) == pytest.approx(1.0) and min(w) > 0
        # already-queried pool points are excluded from the candidates
        assert len(set(task["queries"][1:])) == 3 and not set(task["queries"][1:]) & {
            task["queries"][0]
        }
    json.dumps(record)


def test_cmbo_reuses_stage1_fits_and_weights_move():
    problem = small_cmbo_problem()
    a = run_meta_experiment(problem, "cmbo-center-jeffreys", seed=5, iterations=2)
    b = run_meta_experiment(problem, "cmbo-barycenter-w2", seed=5, iterations=2)
    assert not a["stage1_cached"] and b["stage1_cached"] and b["fit_s"] == a["fit_s"]
    # uniform at first (Alg. 1 line 13), then data-dependent
    assert any(abs(w[0] - 0.5) > 1e-6 for t in a["tasks"] for w in t["weights"])
    table = simple_regret_table([a, b])
    row = next(
        line
        for line in table.split("cm-BO timings")[1].splitlines()
        if "cmbo-center-jeffreys" in line
    )
    assert row.split()[2:4] == [f"{a['fit_s']:.1f}", f"{a['clustering_s']:.2f}"]


def test_normalized_simple_regret_arithmetic():
    problem = MetaProblem(
        name="linear",
        description="",
        dim=2,
        n_tasks=5,
        evaluate=lambda i, X: X[:, :1] * (i + 1),
        pool_size=50,
        iterations=4,
        n_init=3,
        normalize_regret=True,
    )
    record = run_meta_experiment(problem, "random", seed=2)
    pool = torch.rand(
        50, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64
    )
    assert record["normalized_regret"]
    regrets = []
    for task in record["tasks"]:
        f = pool[:, :1] * (task["task"] + 1)
        assert task["optimum"] == pytest.approx(f.max().item()) and task[
            "pool_min"
        ] == pytest.approx(f.min().item())
        values = torch.tensor(task["values"], dtype=torch.float64)
        span = f.max().item() - f.min().item()
        expected = [
            (f.max().item() - values[: k + 3].max().item()) / span for k in range(5)
        ]
        assert task["simple_regret"] == pytest.approx(expected)
        regrets.append(expected)
    assert record["simple_regret"] == pytest.approx(
        torch.tensor(regrets).mean(0).tolist()
    )
    plain = run_meta_experiment(
        dataclasses.replace(problem, normalize_regret=False), "random", seed=2
    )
    assert not plain["normalized_regret"]
    for t_norm, t_plain in zip(record["tasks"], plain["tasks"]):
        span = t_plain["optimum"] - t_plain["pool_min"]
        assert t_norm["simple_regret"] == pytest.approx(
            [r / span for r in t_plain["simple_regret"]]
        )
    # budget-to-target from the values trace: the first k >= n_init evaluations
    # whose best is within 1% of the pool range, else censored at all 3 + 4
    expected = []
    for task in plain["tasks"]:
        tolerance = 0.01 * (task["optimum"] - task["pool_min"])
        hits = [
            k
            for k in range(3, 8)
            if task["optimum"] - max(task["values"][:k]) <= tolerance
        ]
        expected.append((hits[0], False) if hits else (7, True))
    assert budget_to_target(plain) == expected == budget_to_target(record)


def _fake(method, seed, curves):
    return {
        "problem": "p",
        "method": method,
        "seed": seed,
        "metric": "simple_regret",
        "pretrain_s": 0.0,
        "iteration_s": [0.0],
        "simple_regret": [sum(c) / len(c) for c in zip(*curves.values())],
        "tasks": [{"task": k, "simple_regret": v} for k, v in curves.items()],
    }


def test_rank_and_solved_hand_computed():
    records = [
        _fake("a", 0, {1: [0.5, 0.004], 2: [0.2, 0.2]}),
        _fake("b", 0, {1: [0.5, 0.1], 2: [0.1, 0.001]}),
        _fake("c", 0, {1: [0.3, 0.0], 2: [0.3, 0.3]}),
        _fake("a", 1, {3: [0.01, 0.0]}),
        _fake("b", 1, {3: [0.02, 0.0]}),
        _fake("c", 1, {3: [0.03, 0.0]}),
    ]
    stats = rank_and_solved(records)
    # t=0: run (0,1): a,b tie at 0.5 -> 2.5, c 1; run (0,2): b 1, a 2, c 3;
    #      run (1,3): a 1, b 2, c 3
    # t=1: run (0,1): c 1, a 2, b 3; run (0,2): b 1, a 2, c 3; run (1,3): all tie -> 2
    assert stats["a"]["rank"].tolist() == pytest.approx(
        [(2.5 + 2 + 1) / 3, (2 + 2 + 2) / 3]
    )
    assert stats["b"]["rank"].tolist() == pytest.approx(
        [(2.5 + 1 + 2) / 3, (3 + 1 + 2) / 3]
    )
    assert stats["c"]["rank"].tolist() == pytest.approx(
        [(1 + 3 + 3) / 3, (1 + 3 + 2) / 3]
    )
    # regret < 0.005: a solves (0,1) and (1,3) at t=1; b (0,2) and (1,3);
    # c (0,1) and (1,3)
    assert stats["a"]["solved"].tolist() == pytest.approx([0.0, 2 / 3])
    assert stats["b"]["solved"].tolist() == pytest.approx([0.0, 2 / 3])
    assert rank_and_solved(records, threshold=0.0015)["a"][
        "solved"
    ].tolist() == pytest.approx([0.0, 1 / 3])
    table = rank_solved_table(records, checkpoints=(0, 1))
    row_a = next(line for line in table.splitlines() if line.split()[0] == "a")
    assert "rank@0" in table and "solved@1" in table
    assert row_a.split()[1:] == [f"{(2.5 + 2 + 1) / 3:.2f}", "2.00", "0.000", "0.667"]
    assert "Average rank" in summary_table(records)
    with pytest.raises(ValueError, match="one problem"):
        rank_and_solved(records + [{**records[0], "problem": "q"}])


def _rbv2_bench(scenario="rbv2_xgboost"):
    pytest.importorskip("onnxruntime")
    from botorch_transfer.test_functions.yahpo import YahpoSurrogate, default_data_dir

    if not (default_data_dir() / scenario / "model.onnx").exists():
        pytest.skip(f"YAHPO {scenario} data not available")
    return YahpoSurrogate(scenario, "acc")


def test_rbv2_surrogate_imputes_inactive_parameters_like_yahpo_gym():
    bench = _rbv2_bench()
    assert (
        bench.dim == 13
        and len(bench.instances) == 119
        and bench.params[0].name == "booster"
    )
    u = [0.5] * 13
    U = torch.tensor([[0.1] + u[1:], [0.5] + u[1:], [0.9] + u[1:]], dtype=torch.float64)
    cat, cont = bench.surrogate_inputs("16", U)
    enc = bench.encoding
    assert cat.tolist() == [
        [
            enc["task_id"]["16"],
            enc["booster"][b],
            enc["num.impute.selected.cpo"]["impute.mean"],
        ]
        for b in ("gblinear", "gbtree", "dart")
    ]
    # the yahpo-gym rule: drop the inactive hyperparameters, then a missing continuous
    # one becomes 0; fidelities trainsize=1, repl=10
    mid = {  # decoded u = 0.5 (log scales: geometric mean; integers rounded)
        "nrounds": round((7 * 2981) ** 0.5),
        "eta": 0.0009118819655545162**0.5,
        "gamma": (4.5399929762484854e-05 * 7.38905609893065) ** 0.5,
        "lambda": 1.0,
        "alpha": 1.0,
        "subsample": 0.55,
        "max_depth": 8.0,
        "min_child_weight": (2.718281828459045 * 148.4131591025766) ** 0.5,
        "colsample_bytree": 0.505,
        "colsample_bylevel": 0.505,
        "rate_drop": 0.5,
        "skip_drop": 0.5,
    }
    tree = {
        "eta",
        "gamma",
        "max_depth",
        "min_child_weight",
        "colsample_bytree",
        "colsample_bylevel",
    }
    active = {"gblinear": {"nrounds", "lambda", "alpha", "subsample"}}
    active["gbtree"] = active["gblinear"] | tree
    active["dart"] = active["gbtree"] | {"rate_drop", "skip_drop"}
    for row, booster in enumerate(("gblinear", "gbtree", "dart")):
        config = {k: v for k, v in mid.items() if k in active[booster]}
        expected = [config.get(c, 0.0) for c in bench.spec["cont"][:-2]] + [1.0, 10.0]
        assert cont[row].tolist() == pytest.approx(expected, rel=1e-6)
    # inactive coordinates do not change the value; active ones do
    V = U.clone()
    V[:, 2] = 0.9  # eta: inactive for gblinear only
    assert torch.equal(bench("16", V)[0], bench("16", U)[0]) and not torch.equal(
        bench("16", V)[1], bench("16", U)[1]
    )


def test_rbv2_surrogate_values_and_determinism():
    bench = _rbv2_bench()
    U = torch.rand(
        30, 13, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    )
    y = bench(bench.instances[3], U)
    assert y.shape == (30, 1) and ((y >= 0) & (y <= 1)).all() and y.std() > 0
    assert torch.equal(y, bench(bench.instances[3], U))
    assert not torch.equal(y, bench(bench.instances[4], U))
    with pytest.raises(ValueError, match="instance"):
        bench("not-a-task", U)
    problem = META_PROBLEMS["rbv2-xgboost"]()
    assert (problem.n_tasks, problem.n_history, problem.n_init, problem.iterations) == (
        119,
        50,
        5,
        50,
    )
    assert problem.test_fraction == 0.15 and problem.normalize_regret


def test_rbv2_rpart_surrogate_inputs_and_values():
    bench = _rbv2_bench("rbv2_rpart")
    assert bench.dim == 5 and len(bench.instances) == 117
    assert [p.name for p in bench.params] == [
        "num.impute.selected.cpo",
        "cp",
        "maxdepth",
        "minbucket",
        "minsplit",
    ]
    U = torch.tensor([[0.0] * 5, [0.5] * 5, [1.0] * 5], dtype=torch.float64)
    cat, cont = bench.surrogate_inputs("16", U)
    enc = bench.encoding
    assert cat.tolist() == [
        [enc["task_id"]["16"], enc["num.impute.selected.cpo"][m]]
        for m in ("impute.mean", "impute.median", "impute.hist")
    ]
    # cp on a log scale in [0.000912, 1], the integers rounded; trainsize=1, repl=10
    cp_low = 0.0009118819655545162
    assert cont.ravel().tolist() == pytest.approx(
        [cp_low, 1, 1, 1, 1.0, 10.0]
        + [cp_low**0.5, 16, 50, 50, 1.0, 10.0]  # 15.5, 50.5 round half to even
        + [1.0, 30, 100, 100, 1.0, 10.0],
        rel=1e-6,
    )
    X = torch.rand(
        30, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    )
    y = bench(bench.instances[3], X)
    assert y.shape == (30, 1) and ((y >= 0) & (y <= 1)).all() and y.std() > 0
    assert torch.equal(y, bench(bench.instances[3], X))
    assert not torch.equal(y, bench(bench.instances[4], X))
    problem = META_PROBLEMS["rbv2-rpart"]()
    assert (problem.name, problem.dim, problem.n_tasks) == ("rbv2-rpart", 5, 117)
    assert (problem.n_history, problem.n_init, problem.iterations) == (50, 5, 50)
    assert problem.test_fraction == 0.15 and problem.normalize_regret
    assert problem.pool_size == 300 and problem.cmbo_n_clusters == 3


def test_rbv2_rpart_meta_run_from_the_cli(tmp_path, capsys):
    _rbv2_bench("rbv2_rpart")
    main(["list"])
    assert "rbv2-rpart" in capsys.readouterr().out
    main(
        [
            "run",
            "--out",
            str(tmp_path),
            "--seeds",
            "1",
            "--iterations",
            "2",
            "--problems",
            "rbv2-rpart",
            "--methods",
            "random",
            "--workers",
            "1",
        ]
    )
    out = capsys.readouterr().out
    (record,), _ = load_results(tmp_path / "results.jsonl")
    assert record["problem"] == "rbv2-rpart" and record["normalized_regret"]
    assert len(record["test_tasks"]) == 18 and len(record["simple_regret"]) == 3
    for task in record["tasks"]:
        assert len(task["queries"]) == 5 + 2
        assert all(0 <= r <= 1 for r in task["simple_regret"])
    assert "rbv2-rpart" in out and "normalized regret: rbv2-rpart" in out


def test_mtgp_meta_gives_every_meta_task_its_own_task_and_predicts_the_target(
    monkeypatch,
):
    from benchmarks import meta_methods
    from benchmarks.meta_methods import (
        MTGP_META_POINTS_PER_TASK,
        MultiTaskMeta,
    )
    from benchmarks.methods import MetaData
    from botorch_transfer.data import TaskData

    fits = []

    def bounded_fit(mll):  # BoTorch's fit, with a bounded number of steps
        fits.append(type(mll.model).__name__)
        return fit_gpytorch_mll(mll, optimizer_kwargs={"options": {"maxiter": 30}})

    monkeypatch.setattr(meta_methods, "fit_gpytorch_mll", bounded_fit)
    gen = torch.Generator().manual_seed(0)
    history = [
        TaskData(X, X.sum(-1, keepdim=True) + i)
        for i, X in enumerate(torch.rand(3, 40, 2, generator=gen, dtype=torch.float64))
    ]
    pool = torch.rand(50, 2, generator=gen, dtype=torch.float64)
    method = MultiTaskMeta()
    state = method.setup(
        None, MetaData(pool=pool, seed=0, load_history=lambda: history)
    )
    assert state.n_tasks == 3
    for i, task in enumerate(history):
        rows = state.X[state.X[:, -1] == i, :-1]
        assert rows.shape[0] == MTGP_META_POINTS_PER_TASK  # a subset of its rows
        assert (rows.unsqueeze(1) == task.X).all(-1).any(-1).all()
        torch.testing.assert_close(
            state.Y[state.X[:, -1] == i], rows.sum(-1, keepdim=True) + i
        )
    X = pool[:2]
    candidate = method.propose(state, X, X.sum(-1, keepdim=True) + 5)
    assert candidate.shape == (1, 2) and (candidate == pool).all(-1).any()
    assert fits == ["MultiTaskGP"]


def test_maximize_on_pool_skips_queried_points_as_a_search_of_the_others():
    from botorch.optim import optimize_acqf_discrete

    from benchmarks.meta_methods import maximize_on_pool

    gen = torch.Generator().manual_seed(0)
    pool = torch.rand(50, 2, generator=gen, dtype=torch.float64)
    X = pool[[3, 17, 40]]

    def closest_to_17(X_batch):  # b x 1 x d -> b: highest at pool point 17
        return -(X_batch[..., 0, :] - pool[17]).norm(dim=-1)

    others = pool[[i for i in range(50) if i not in (3, 17, 40)]]
    expected, _ = optimize_acqf_discrete(closest_to_17, q=1, choices=others)
    best = maximize_on_pool(closest_to_17, pool, queried=X)
    torch.testing.assert_close(best, expected)
    assert not torch.equal(best, pool[17:18])  # the best point overall was queried
    torch.testing.assert_close(maximize_on_pool(closest_to_17, pool), pool[17:18])
    # with every point queried there is nothing left to search
    with pytest.raises(RuntimeError, match="Every pool point was queried"):
        maximize_on_pool(closest_to_17, pool[:3], queried=pool[:3])


@pytest.mark.parametrize(
    "method, skipping",
    [
        ("hyperbo", "hyperbo-skip"),
        ("stbo-ucb", "stbo-ucb-skip"),
        ("rgpe-meta", "rgpe-meta-skip"),
    ],
)
def test_skip_variants_differ_only_where_the_loop_re_proposes_a_point(method, skipping):
    # a small noise-free pool, so that the loops that may re-propose do
    problem = dataclasses.replace(small_gp_tasks(), pool_size=12, observation_noise=0.0)
    records = [
        run_meta_experiment(problem, m, seed=0, iterations=9)
        for m in (method, skipping)
    ]
    repeated = 0
    for plain, skipped in zip(*(r["tasks"] for r in records)):
        n_init = len(plain["queries"]) - 9
        for i in range(n_init, len(skipped["queries"])):
            assert skipped["queries"][i] not in skipped["queries"][:i]
        # the same queries up to the plain loop's first re-proposed point
        first = next(
            (
                i
                for i in range(n_init, len(plain["queries"]))
                if plain["queries"][i] in plain["queries"][:i]
            ),
            len(plain["queries"]),
        )
        repeated += first < len(plain["queries"])
        assert skipped["queries"][:first] == plain["queries"][:first]
    assert repeated > 0  # the plain loop did re-propose somewhere


def test_single_task_bo_maximizes_ucb_with_its_beta():
    from types import SimpleNamespace

    from botorch.acquisition import UpperConfidenceBound
    from botorch.models import SingleTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

    from benchmarks.meta_methods import (
        PRETRAINED_PRIOR_UCB_BETA,
        SingleTaskBO,
        maximize_on_pool,
    )

    gen = torch.Generator().manual_seed(0)
    pool = torch.rand(200, 2, generator=gen, dtype=torch.float64)
    X = 0.5 * pool[:8]  # data in one corner: a large weight explores the far one
    Y = torch.sin(6 * X).sum(-1, keepdim=True)
    proposals = []
    for beta in (1.0, 25.0):
        method = SingleTaskBO("ucb", skip_queried=True, beta=beta)
        state = method.setup(None, SimpleNamespace(pool=pool))
        proposals.append(method.propose(state, X, Y))
        model = SingleTaskGP(X, Y)
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        acqf = UpperConfidenceBound(model, beta=beta)
        torch.testing.assert_close(proposals[-1], maximize_on_pool(acqf, pool, X))
    assert not torch.equal(*proposals)  # the weight matters here
    # the README loop's no-meta reference runs at the README loop's weight
    assert get_method("stbo-ucb1-skip", META).beta == PRETRAINED_PRIOR_UCB_BETA
    assert get_method("stbo-ucb-skip", META).beta == 1.8**2


def test_clustered_hyperbo_is_hyperbo_where_the_tasks_form_one_cluster():
    # 8 meta-training tasks cannot form two clusters of MIN_CLUSTER_SIZE: one prior
    problem = small_gp_tasks()
    plain, clustered = (
        run_meta_experiment(problem, m, seed=1, iterations=3)
        for m in ("hyperbo-skip", "hyperbo-clustered-skip")
    )
    for a, b in zip(plain["tasks"], clustered["tasks"]):
        assert a["queries"] == b["queries"]


def _greedy_portfolio_reference(regrets):
    r"""Feurer et al.'s greedy portfolio, written out with lists: add the candidate
    that lowers ``mean_tasks min_{chosen} regret`` most (the first such on ties)
    while one lowers it; then the others by mean regret (stable)."""
    tasks, n = len(regrets), len(regrets[0])
    best = [max(row) for row in regrets]
    chosen = []
    while True:
        scores = {
            j: sum(min(best[t], regrets[t][j]) for t in range(tasks)) / tasks
            for j in range(n)
            if j not in chosen
        }
        if not scores:
            break
        j = min(scores, key=lambda k: (scores[k], k))
        if not scores[j] < sum(best) / tasks:
            break
        chosen.append(j)
        best = [min(best[t], regrets[t][j]) for t in range(tasks)]
    rest = sorted(
        (j for j in range(n) if j not in chosen),
        key=lambda j: (sum(regrets[t][j] for t in range(tasks)) / tasks, j),
    )
    return chosen + rest


def test_greedy_portfolio_against_a_plain_reference():
    # by hand: 0 is best on average; then 2 covers task 2 (0.05 against 1's 0.225);
    # then 1 lowers nothing, so it comes by its mean
    regrets = torch.tensor([[0.0, 0.1, 0.5], [0.5, 0.45, 0.1]], dtype=torch.float64)
    assert greedy_portfolio(regrets).tolist() == [0, 2, 1]
    gen = torch.Generator().manual_seed(3)
    for tasks, n in ((1, 5), (4, 30), (9, 50)):
        regrets = torch.rand(tasks, n, generator=gen, dtype=torch.float64)
        order = greedy_portfolio(regrets)
        assert order.tolist() == _greedy_portfolio_reference(regrets.tolist())
        assert sorted(order.tolist()) == list(range(n))
    with pytest.raises(ValueError, match="`regrets` must be a non-empty tasks x n"):
        greedy_portfolio(torch.rand(5))


def test_portfolio_queries_its_order_and_skips_what_was_queried():
    problem = small_gp_tasks()
    train, _ = _split(problem, 0)
    pool = torch.rand(problem.pool_size, problem.dim, dtype=torch.float64)
    tasks = meta_training_data(problem, train, seed=0)
    method = get_method("portfolio-skip", META)
    state = method.setup(problem, MetaData(pool, 0, lambda: tasks))
    assert sorted(state.order.tolist()) == list(range(problem.pool_size))
    # the order is the greedy portfolio of the tasks' predicted, normalized values
    prior = pretrain_prior(tasks, seed=0, progress=False)
    with torch.no_grad():
        predicted = torch.stack(
            [
                PretrainedPriorGP(t.X, t.Y, prior=prior).posterior(pool).mean[:, 0]
                for t in tasks
            ]
        )
    low, high = predicted.min(-1, keepdim=True).values, predicted.max(-1).values
    regrets = 1 - (predicted - low) / (high.unsqueeze(-1) - low)
    reference = _greedy_portfolio_reference(regrets.tolist())
    assert state.order.tolist() == reference
    # the target's data do not matter, only which points were queried
    queried = [7, reference[0], 11]
    expected = next(i for i in reference if i not in queried)
    for Y in (torch.zeros(3, 1), torch.randn(3, 1)):
        proposal = method.propose(state, pool[queried], Y.to(pool))
        torch.testing.assert_close(proposal, pool[[expected]])


def test_meta_tasks_at_their_own_inputs():
    shared, own = small_gp_tasks(), own_inputs(small_gp_tasks())
    assert own.name == "gp-tasks-own-inputs" and not own.shared_inputs
    train, _ = _split(shared, 0)
    # the shared design draws the inputs once, then each task's noise, in order
    gen = torch.Generator().manual_seed(0 + 1)
    X = torch.rand(shared.n_history, shared.dim, generator=gen, dtype=torch.float64)
    expected = []
    for i in train:
        noise = torch.randn(shared.n_history, 1, generator=gen, dtype=torch.float64)
        expected.append(shared.evaluate(i, X) + 0.1 * noise)  # variance 0.01
    for task, Y in zip(meta_training_data(shared, train, 0), expected):
        assert torch.equal(task.X, X)
        torch.testing.assert_close(task.Y, Y, rtol=1e-12, atol=1e-12)
    tasks = meta_training_data(own, train, 0)
    for a, b in zip(tasks, tasks[1:]):
        assert not torch.isin(a.X, b.X).any()  # no input shared
    for i, task in zip(train, tasks):
        assert task.X.shape == (own.n_history, own.dim)
        assert (task.Y - own.evaluate(i, task.X)).std() < 0.2  # noise sd 0.1
    assert "gp-tasks-own-inputs" in META_PROBLEMS


@pytest.mark.parametrize(
    "method", ["hyperbo-clustered-ucb1-skip", "cmbo", "rgpe-meta-skip"]
)
def test_readme_loops_and_rgpe_run_on_meta_tasks_at_their_own_inputs(method):
    record = run_meta_experiment(
        own_inputs(small_gp_tasks()), method, seed=0, iterations=2
    )
    assert record["problem"] == "gp-tasks-own-inputs"
    assert len(record["simple_regret"]) == 3


def test_rbv2_surrogate_at_other_fidelities():
    bench = _rbv2_bench("rbv2_rpart")
    X = torch.rand(
        6, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64
    )
    task = bench.instances[2]
    assert torch.equal(bench(task, X, {"repl": 10}), bench(task, X))
    per_replicate = torch.cat([bench(task, X, {"repl": r}) for r in range(1, 11)], -1)
    assert per_replicate.std(-1).max() > 0  # the replicates differ
    # one replicate per point picks that replicate's value
    repl = torch.tensor([1, 4, 10, 2, 2, 7])
    torch.testing.assert_close(
        bench(task, X, {"repl": repl.numpy()}),
        per_replicate.gather(-1, (repl - 1).unsqueeze(-1)),
        rtol=0,
        atol=0,
    )
    with pytest.raises(ValueError, match="`fidelity` names \\['epoch'\\]"):
        bench(task, X, {"epoch": 3})
    with pytest.raises(ValueError, match="`fidelity\\['repl'\\]` must be a number"):
        bench(task, X, {"repl": [1, 2]})


def test_replicate_noise_observes_random_replicates_of_the_mean():
    bench = _rbv2_bench("rbv2_rpart")
    problem = META_PROBLEMS["rbv2-rpart-replicates"]()
    assert problem.name == "rbv2-rpart-replicates" and problem.shared_inputs
    X = torch.rand(
        8, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64
    )
    task = 5
    per_replicate = torch.cat(
        [bench(bench.instances[task], X, {"repl": r}) for r in range(1, 11)], -1
    )
    torch.testing.assert_close(
        problem.evaluate(task, X), per_replicate.mean(-1, keepdim=True)
    )
    seen = set()
    for seed in range(5):
        Y = problem.observations(task, X, torch.Generator().manual_seed(seed))
        # each observation is one of its point's ten replicates
        match = (per_replicate == Y).nonzero()
        assert match[:, 0].tolist() == list(range(8))
        seen.update(match[:, 1].tolist())
    assert len(seen) > 5  # the replicates are drawn, not fixed
    # a run's observations are replicates of the queried points; regret on the mean
    record = run_meta_experiment("rbv2-rpart-replicates", "random", 0, iterations=2)
    entry = record["tasks"][0]
    pool_values = [entry["values"][i] for i in range(len(entry["queries"]))]
    assert pool_values != entry["observations"]
    assert max(abs(v - o) for v, o in zip(pool_values, entry["observations"])) < 0.1
