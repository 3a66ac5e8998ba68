r"""Meta-learning (leave-tasks-out) benchmarks: every method runs, the regret arithmetic."""

import dataclasses
import json

import pytest
import torch

from botorch_transfer.benchmarks.__main__ import main
from botorch_transfer.benchmarks.meta import META_METHODS, MetaProblem, gp_tasks, run_meta_experiment
from botorch_transfer.benchmarks.report import simple_regret_table
from botorch_transfer.benchmarks.runner import load_results


def small_gp_tasks():
    return dataclasses.replace(gp_tasks(n_tasks=10), n_history=12, pool_size=200, pretrain_steps=20)


@pytest.mark.parametrize("method", META_METHODS)
def test_every_meta_method_runs(method):
    record = run_meta_experiment(small_gp_tasks(), method, seed=0, iterations=2)
    assert record["test_tasks"] and set(record["test_tasks"]).isdisjoint(record["train_tasks"])
    assert sorted(record["test_tasks"] + record["train_tasks"]) == list(range(10))
    assert len(record["simple_regret"]) == 3 and len(record["iteration_s"]) == 2 * len(record["test_tasks"])
    json.dumps(record)


def test_simple_regret_arithmetic():
    # f_task(x) = x_0 + task: the pool optimum and the best-so-far are easy to recompute
    problem = MetaProblem(
        name="linear", description="", dim=2, n_tasks=5, evaluate=lambda i, X: X[:, :1] + i,
        pool_size=500, iterations=6, n_init=2,
    )
    record = run_meta_experiment(problem, "random", seed=1)
    regrets = []
    for task in record["tasks"]:
        values = torch.tensor(task["values"], dtype=torch.float64)
        assert task["optimum"] == pytest.approx(max(task["values"] + [task["optimum"]]))
        expected = [task["optimum"] - values[: k + 2].max().item() for k in range(7)]
        assert task["simple_regret"] == pytest.approx(expected)
        assert task["values"] == pytest.approx([v for v in task["observations"]])  # noise-free problem
        regrets.append(expected)
    assert record["simple_regret"] == pytest.approx(torch.tensor(regrets, dtype=torch.float64).mean(0).tolist())
    assert record["simple_regret"][0] > 0
    table = simple_regret_table([record, {**record, "seed": 2, "simple_regret": [0.0] * 7}])
    mean_final = (record["simple_regret"][6] + 0.0) / 2
    assert f"{mean_final:.4f}" in table and "r@6" in table


def test_same_seed_same_meta_run():
    a = run_meta_experiment(small_gp_tasks(), "hyperbo-ekl", seed=3, iterations=2)
    b = run_meta_experiment(small_gp_tasks(), "hyperbo-ekl", seed=3, iterations=2)
    assert [t["queries"] for t in a["tasks"]] == [t["queries"] for t in b["tasks"]]


def test_cli_mixes_transfer_and_meta_problems(tmp_path, capsys):
    main(["run", "--out", str(tmp_path), "--seeds", "1", "--iterations", "2", "--problems", "gp-tasks",
          "bohachevsky", "--methods", "random", "deltabo", "--workers", "1"])
    out = capsys.readouterr().out
    assert "skipping combinations that do not apply: deltabo on gp-tasks" in out
    records, _ = load_results(tmp_path / "results.jsonl")
    assert sorted((r["problem"], r["method"]) for r in records) == [
        ("bohachevsky", "deltabo"), ("bohachevsky", "random"), ("gp-tasks", "random")]
    assert "Meta-learning problems" in out and (tmp_path / "regret.png").stat().st_size > 0


def test_lcbench_surrogate():
    pytest.importorskip("onnxruntime")
    from botorch_transfer.benchmarks.yahpo import YahpoSurrogate, default_data_dir

    if not (default_data_dir() / "lcbench" / "model.onnx").exists():
        pytest.skip("YAHPO lcbench data not available")
    bench = YahpoSurrogate("lcbench", "val_accuracy")
    assert bench.dim == 7 and len(bench.instances) == 34
    U = torch.rand(20, 7, dtype=torch.float64)
    y = bench(bench.instances[0], U)
    assert y.shape == (20, 1) and ((y >= 0) & (y <= 100)).all()
    assert torch.equal(y, bench(bench.instances[0], U))
    raw = bench.decode(torch.tensor([[0.0] * 7, [1.0] * 7]))
    assert raw["batch_size"].tolist() == [16, 512] and raw["learning_rate"][0] == pytest.approx(1e-4)
    with pytest.raises(ValueError, match="target"):
        YahpoSurrogate("lcbench", "accuracy")
