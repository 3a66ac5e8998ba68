r"""The meta track's oracles (``benchmarks.meta_ceilings``) against numpy
references, and the CLI against the records it reads."""

import dataclasses
import json

import numpy as np
import pytest

from benchmarks import meta_ceilings
from benchmarks.meta import (
    _split,
    initial_points,
    run_meta_experiment,
    split_pool,
    task_generator,
)
from tests.benchmarks.test_meta import _greedy_portfolio_reference, small_gp_tasks


def _reference_oracles(problem, seed, T):
    train, test = _split(problem, seed)
    pool = split_pool(problem, seed)
    F = np.stack(
        [problem.evaluate(i, pool)[:, 0].numpy() for i in range(problem.n_tasks)]
    )
    R = np.array([(f.max() - f) / (f.max() - f.min()) for f in F])
    greedy = _greedy_portfolio_reference(R[train].tolist())
    consensus = list(np.argsort(R[train].mean(0), kind="stable"))
    out = {"greedy": {}, "consensus": {}, "best task": {}}
    for task in test:
        regret = R[task] if problem.normalize_regret else F[task].max() - F[task]
        start = initial_points(problem, task_generator(seed, task))
        for name, order in (("greedy", greedy), ("consensus", consensus)):
            queries = [i for i in order if i not in start][:T]
            out[name][task] = sum(
                min(regret[j] for j in start + queries[: t + 1]) for t in range(T)
            )
        optima = [int(np.argmax(F[i])) for i in train]
        out["best task"][task] = min(regret[j] for j in start + optima)
    return out


@pytest.mark.parametrize("normalize", [False, True])
def test_oracles_against_a_numpy_reference(normalize):
    problem = dataclasses.replace(
        small_gp_tasks(), normalize_regret=normalize, n_init=2
    )
    for seed in (0, 1):
        found = meta_ceilings.oracle_regrets(problem, seed, iterations=4)
        expected = _reference_oracles(problem, seed, 4)
        assert found.keys() == expected.keys()
        for name in expected:
            assert found[name].keys() == expected[name].keys()
            for task, value in expected[name].items():
                assert found[name][task] == pytest.approx(value, rel=1e-12, abs=1e-12)


def test_cli_compares_the_oracles_with_the_reference_records(
    tmp_path, monkeypatch, capsys
):
    problem = small_gp_tasks()
    monkeypatch.setattr(meta_ceilings, "make_meta_problem", lambda name: problem)
    records = tmp_path / "results.jsonl"
    runs = [
        run_meta_experiment(problem, "random", seed=s, iterations=3) for s in (0, 1)
    ]
    records.write_text(
        "".join(json.dumps({**r, "problem": "gp-tasks"}) + "\n" for r in runs)
    )
    (row,) = meta_ceilings.main(
        ["--problems", "gp-tasks", "--seeds", "2", "--records", str(records)]
        + ["--reference", "random"]
    )
    reference = [sum(t["simple_regret"][1:4]) for r in runs for t in r["tasks"]]
    oracles = [meta_ceilings.oracle_regrets(problem, s, 3) for s in (0, 1)]
    greedy = [v for o in oracles for v in o["greedy"].values()]
    assert row[:3] == ("gp-tasks", len(reference), 3)
    assert row[3] == pytest.approx(np.mean(reference))
    assert row[4] == pytest.approx(np.mean(greedy) / np.mean(reference))
    assert "gp-tasks" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        meta_ceilings.main(["--problems", "gp-tasks", "--records", str(records)])
