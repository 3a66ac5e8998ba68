import math

import numpy as np
import pytest
from scipy.stats import norm

from benchmarks.meta_tables import (
    _targets_above_from_seed_noise,
    meta_cumulative_regret,
    meta_cumulative_regret_ratio_table,
    meta_targets_table,
    seconds_per_iteration,
)
from benchmarks.regret_tables import (
    budget_to_target,
    mean_ci,
    simple_regret_table,
    with_regret,
)
from benchmarks.summary import plot_regret, regret_figure, summary_table
from benchmarks.transfer_tables import (
    average_rank_table,
    guard_table,
    no_transfer_ratio_table,
    peer_comparison_table,
    problem_kind,
    transfer_targets_table,
)


def test_mean_ci_by_hand():
    values = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 9.0]])
    mean, ci = mean_ci(values)
    assert mean.tolist() == pytest.approx([3.0, 5.0])
    sd = [2.0, math.sqrt(((2 - 5) ** 2 + (4 - 5) ** 2 + (9 - 5) ** 2) / 2)]  # ddof=1
    assert ci.tolist() == pytest.approx([1.96 * s / math.sqrt(3) for s in sd])
    _, ci_one = mean_ci(values[:1])
    assert ci_one.tolist() == [0.0, 0.0]  # a single run has no interval


def test_a_dense_sample_optimum_is_raised_to_the_best_value_found():
    def record(method, values, optimum=1.0, exact=False, problem="p"):
        regret = [optimum - v for v in values]
        return {
            "problem": problem,
            "method": method,
            "seed": 0,
            "values": values,
            "regret": regret,
            "cumulative_regret": np.cumsum(regret).tolist(),
            "optimum": optimum,
            "optimum_is_exact": exact,
        }

    # b beat the estimate 1.0 by 0.5: both runs' regret is against 1.5
    filled = with_regret([record("a", [0.5, 1.0]), record("b", [1.5, 0.0])])
    assert [r["optimum"] for r in filled] == [1.5, 1.5]
    assert filled[0]["regret"] == pytest.approx([1.0, 0.5])
    assert filled[1]["cumulative_regret"] == pytest.approx([0.0, 1.5])
    assert all(r["optimum_is_best_found"] for r in filled)
    # an estimate nobody beat, an exact optimum, and another problem stay as they are
    kept = [
        record("a", [0.2, 0.9]),
        record("a", [1.5, 0.0], exact=True, problem="grid"),
        record("a", [0.1], optimum=0.5, problem="other"),
    ]
    assert with_regret(kept) == kept


def test_summary_and_plot(tmp_path):
    records = [
        {
            "problem": "p",
            "method": m,
            "seed": s,
            "cumulative_regret": [1.0 * s, 2.0 * s + k],
            "iteration_s": [0.1, 0.3],
            "optimum_is_exact": True,
        }
        for k, m in enumerate(["a", "b"])
        for s in range(1, 4)
    ]
    records.append({"problem": "p", "method": "a", "seed": 9, "error": "boom"})
    table = summary_table(records)
    # method a: final R_T = 2, 4, 6 -> mean 4, CI 1.96 * 2 / sqrt(3);
    # time 0.2 s/iteration
    assert f"{4.0:>14.3f} +- {1.96 * 2 / math.sqrt(3):<7.3f}" in table
    assert "1 run(s) failed" in table and "0.200" in table
    # simple regret r_T = min instantaneous regret: a: [s, s] -> 2 (mean of 1, 2, 3),
    # b: [s, s + 1] -> 2 as well; CI 1.96 * 1 / sqrt(3)
    assert table.count(f"{2.0:>14.4f} +- {1.96 / math.sqrt(3):<7.4f}") == 2
    assert plot_regret(records, tmp_path / "r.png").stat().st_size > 0
    assert plot_regret(records, tmp_path / "log.png", log_y=True).stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.png", "r.png"]


def test_an_interrupted_plot_leaves_the_previous_one(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    records = [
        {
            "problem": "p",
            "method": "a",
            "seed": s,
            "cumulative_regret": [1.0, 1.5],
            "optimum_is_exact": True,
        }
        for s in range(2)
    ]
    path = tmp_path / "regret.png"
    path.write_bytes(b"previous plot")

    def half_written(self, fname, **kwargs):
        fname.write(b"\x89PNG half")
        raise KeyboardInterrupt

    monkeypatch.setattr(Figure, "savefig", half_written)
    with pytest.raises(KeyboardInterrupt):
        plot_regret(records, path)
    assert path.read_bytes() == b"previous plot"
    assert [p.name for p in tmp_path.iterdir()] == ["regret.png"]


def test_a_single_run_has_no_interval_in_the_tables():
    runs = _runs("p", "one", [2.0]) + _runs("p", "two", [1.0, 3.0])
    table = summary_table(runs)
    rows = {line.split()[1]: line for line in table.splitlines() if line[:2] == "p "}
    assert "+- n/a" in rows["one"] and "0.000" not in rows["one"]
    assert "n/a" not in rows["two"]
    assert "a single run (n=1), whose 95% CI is undefined" in table
    assert "n=1" not in summary_table(_runs("p", "two", [1.0, 3.0]))
    task = {"task": 1, "simple_regret": [1.0, 0.5]}
    meta = [_meta_record("m", 0, [task], n_init=1, normalized=False)]
    table = simple_regret_table(meta, checkpoints=(1,))
    assert "0.5000 +- n/a" in " ".join(table.split())
    assert "n=1" in table


def test_failed_and_non_finite_runs_are_named_and_left_out():
    nan = {**_runs("p", "a", [1.0])[0], "seed": 7}
    nan["cumulative_regret"] = [0.5, float("nan")]
    failed = {
        "problem": "p",
        "method": "b",
        "seed": 3,
        "error": "ValueError('x')\nmore",
    }
    table = summary_table(_runs("p", "a", [1.0, 3.0]) + [nan, failed])
    row = next(line for line in table.splitlines() if line.startswith("p "))
    assert row.split()[2] == "2" and "nan" not in row  # the two finite runs
    assert "2 run(s) failed, left out above:" in table
    assert "p/a/seed 7: non-finite (NaN or infinite) cumulative_regret" in table
    assert "p/b/seed 3: ValueError('x')" in table and "more" not in table


def test_log_y_keeps_axes_without_positive_values_linear(tmp_path):
    import matplotlib.pyplot as plt

    zero = _runs("p", "a", [0.0, 0.0])  # every run found the optimum at once
    with pytest.warns(UserWarning, match="kept a linear scale .* p"):
        fig = regret_figure(zero + _runs("q", "a", [1.0, 2.0]), log_y=True)
    assert [ax.get_yscale() for ax in fig.axes] == ["linear", "log", "linear", "log"]
    plt.close(fig)
    with pytest.warns(UserWarning, match="kept a linear scale"):
        assert plot_regret(zero, tmp_path / "r.png", log_y=True).stat().st_size > 0


def test_non_finite_runs_cannot_be_plotted_alone():
    nan = _runs("p", "a", [1.0])[0]
    nan["cumulative_regret"] = [float("nan")] * 2
    with pytest.raises(ValueError, match="no finished run"):
        regret_figure([nan], log_y=True)


def _runs(problem, method, finals):
    r"""Transfer records of ``method`` on ``problem``, one per seed, with the given
    final cumulative regrets (two iterations)."""
    return [
        {
            "problem": problem,
            "method": method,
            "seed": seed,
            "cumulative_regret": [0.5 * final, final],
            "iteration_s": [0.1, 0.1],
            "optimum_is_exact": True,
        }
        for seed, final in enumerate(finals)
    ]


def test_ratio_to_the_no_transfer_gp_by_hand():
    def runs(method, finals):
        return _runs("ctl", method, finals)

    reference = runs("gp-ucb-fitted", [10.0, 12.0, 14.0])  # mean 12
    records = reference + runs("good", [12.0, 13.0, 14.0]) + runs("bad", [30, 36, 42])
    table = no_transfer_ratio_table(records)
    # "good" (mean 13) is inside the reference's CI 12 +- 2.26
    assert "good" in table and f"{13 / 12:>7.2f}  ok" in table
    assert f"{36 / 12:>7.2f}  WORSE" in table
    assert "gp-ucb-fitted" not in table.splitlines()[2:][0]  # no self-ratio row
    assert "R_T relative to the no-transfer GP" in summary_table(records)
    assert no_transfer_ratio_table(runs("good", [1.0])) == ""  # no reference runs
    # a reference without spread: only the 10% rule can pass a method
    flat = runs("gp-ucb-fitted", [10.0, 10.0])
    table = no_transfer_ratio_table(flat + runs("near", [10.8]) + runs("far", [11.5]))
    assert f"{1.08:>7.2f}  ok" in table and f"{1.15:>7.2f}  WORSE" in table


def test_average_rank_across_problems_by_hand():
    def runs(problem, method, final):  # one seed
        return _runs(problem, method, [final])

    finals = {  # problem -> method -> R_T
        "a": {"ours": 1.0, "mtgp": 2.0, "rgpe": 3.0, "gp": 4.0},  # ranks 1 2 3 4
        "b": {"ours": 5.0, "mtgp": 1.0, "rgpe": 5.0, "gp": 2.0},  # 3.5 1 3.5 2
        "c": {"ours": 1.0, "gp": 2.0},  # no peers ran: ranks 1 2
    }
    records = [
        r for p, row in finals.items() for m, v in row.items() for r in runs(p, m, v)
    ]
    rows = {
        line.split()[0]: line.split()[1:]
        for line in average_rank_table(records).splitlines()[2:]
    }
    assert rows["ours"] == ["3", f"{(1 + 3.5 + 1) / 3:.2f}", "1/2"]
    assert rows["mtgp"] == ["2", "1.50", "2/2"]
    assert rows["rgpe"] == ["2", "3.25", "0/2"]
    assert rows["gp"] == ["3", f"{(4 + 2 + 2) / 3:.2f}", "0/2"]
    # best average rank first
    assert average_rank_table(records).splitlines()[2].split()[0] == "mtgp"
    assert "Average rank across problems" in summary_table(records)
    assert average_rank_table(runs("a", "ours", 1.0)) == ""


def test_regret_plot_says_what_it_shows():
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    transfer = [
        {
            "problem": "p",
            "method": "a",
            "seed": s,
            "cumulative_regret": [1.0, 1.5],
            "iteration_s": [0.1, 0.1],
        }
        for s in range(2)
    ]
    meta = [
        {
            "problem": "m",
            "method": "a",
            "seed": s,
            "metric": "simple_regret",
            "simple_regret": [1.0, 0.5, 0.1],
            "iteration_s": [0.1, 0.1],
            "pretrain_s": 0.0,
        }
        for s in range(2)
    ]
    fig = regret_figure(transfer + meta)
    try:
        # plt.subplots(2, n) is row-major: a column per problem, m before p
        (meta_top, top, meta_bottom, bottom) = fig.axes
        assert top.get_ylabel() == "cumulative regret $R_t$"
        assert bottom.get_ylabel() == "average regret $R_t / t$"
        for ax in (meta_top, meta_bottom):
            assert ax.get_ylabel().startswith("simple regret $r_t$ (best so far)\n")
        for ax in fig.axes:
            locator = ax.xaxis.get_major_locator()
            assert isinstance(locator, MaxNLocator)  # whole iterations only
            assert all(float(t).is_integer() for t in locator.tick_values(0, 3))
        assert bottom.get_xlabel() == meta_bottom.get_xlabel() == "iteration $t$"
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="no finished run"):
        regret_figure([{"problem": "p", "method": "a", "seed": 0, "error": "x"}])


def _meta_record(method, seed, tasks, n_init, normalized):
    r"""A meta-learning record with hand-made per-task regret curves."""
    curves = [t["simple_regret"] for t in tasks]
    return {
        "problem": "m",
        "method": method,
        "seed": seed,
        "metric": "simple_regret",
        "normalized_regret": normalized,
        "simple_regret": [sum(c) / len(c) for c in zip(*curves)],
        "tasks": tasks,
        "pretrain_s": 0.0,
        "iteration_s": [0.1] * 3,
        "settings": {"n_init": n_init},
    }


def test_budget_to_target_by_hand():
    records = [
        # normalized regret, n_init 5: the target is regret <= 0.01
        _meta_record(
            "a",
            0,
            [
                {"task": 1, "simple_regret": [0.5, 0.02, 0.01, 0.0]},  # t=2: 5 + 2
                {"task": 2, "simple_regret": [0.005, 0.0, 0.0, 0.0]},  # initial: 5
            ],
            n_init=5,
            normalized=True,
        ),
        _meta_record(  # never within 1%: censored at 5 + 3
            "a", 1, [{"task": 3, "simple_regret": [0.3, 0.2, 0.1, 0.05]}], 5, True
        ),
        # plain regret, n_init 1: the target is regret <= 0.01 (optimum - pool_min)
        _meta_record(
            "b",
            0,
            [  # 0.01 * (10 - 0) = 0.1, met at t=1 (the bound counts): 1 + 1
                {
                    "task": 1,
                    "optimum": 10.0,
                    "pool_min": 0.0,
                    "simple_regret": [2.0, 0.1, 0.0, 0.0],
                },
                {  # 0.01 * (3 - 1) = 0.02, never met: censored at 1 + 3
                    "task": 2,
                    "optimum": 3.0,
                    "pool_min": 1.0,
                    "simple_regret": [0.5, 0.03, 0.025, 0.021],
                },
            ],
            n_init=1,
            normalized=False,
        ),
        _meta_record(  # 0.01 * (1 - (-1)) = 0.02, never met: censored at 4
            "b",
            1,
            [
                {
                    "task": 3,
                    "optimum": 1.0,
                    "pool_min": -1.0,
                    "simple_regret": [0.05, 0.04, 0.03, 0.03],
                }
            ],
            n_init=1,
            normalized=False,
        ),
    ]
    assert budget_to_target(records[0]) == [(7, False), (5, False)]
    assert budget_to_target(records[1]) == [(8, True)]
    assert budget_to_target(records[2]) == [(2, False), (4, True)]
    assert budget_to_target(records[3]) == [(4, True)]
    assert budget_to_target(records[1], fraction=0.2) == [(6, False)]  # t=1
    # old records: no pool minimum on a plain regret, or no settings -> no budget
    old = _meta_record(
        "c",
        0,
        [{"task": 1, "optimum": 1.0, "simple_regret": [0.5, 0.0, 0.0, 0.0]}],
        n_init=1,
        normalized=False,
    )
    del old["normalized_regret"]
    assert budget_to_target(old) is None
    assert budget_to_target({**records[0], "settings": {}}) is None
    # a group with one old record shows n/a rather than a budget over part of it
    mixed = {**records[3], "method": "d"}, {**old, "method": "d", "seed": 1}
    table = simple_regret_table(records + [old, *mixed])
    rows = {
        line.split()[1]: line.split()
        for line in table.splitlines()
        if line.startswith("m ")
    }
    # problem method seeds r@3 +- CI evals censored pretrain s/iter
    assert rows["a"][6:8] == ["7", "1/3"]  # budgets 7, 5, 8: median 7
    # budgets 2, 4, 4: two of three censored, so the median 4 is a lower bound
    assert rows["b"][6:8] == [">4", "2/3"]
    assert rows["c"][6:8] == ["n/a", "n/a"] and rows["d"][6:8] == ["n/a", "n/a"]
    assert "evals to 1%" in table.splitlines()[0] and "censored" in table
    assert "median number of evaluations (the initial points included)" in table
    assert "evals to 1%" in summary_table(records)


def test_meta_cumulative_regret_ratios_by_hand():
    def run(method, seed, curves, iteration_s):
        tasks = [{"task": k, "simple_regret": c} for k, c in curves.items()]
        record = _meta_record(method, seed, tasks, n_init=1, normalized=False)
        return {**record, "iteration_s": iteration_s}

    records = [
        # reference: cumulative (t = 1..3) 3 on task 1 and 6 on task 2, both seeds;
        # each run's mean seconds per iteration 1 and 3: median 2
        run("stbo-ucb", 0, {1: [9, 1, 1, 1], 2: [9, 2, 2, 2]}, [1, 1, 1]),
        run("stbo-ucb", 1, {1: [9, 1, 1, 1], 2: [9, 2, 2, 2]}, [2, 3, 4]),
        # method: 1.5 on task 1 (both seeds), 9 on task 2 (seed 0 only); run means
        # 2 and 5 s per iteration: median 3.5
        run("meta", 0, {1: [0, 0.5, 0.5, 0.5], 2: [0, 3, 3, 3]}, [1, 3]),
        run("meta", 1, {1: [0, 0.5, 0.5, 0.5]}, [5, 5, 5]),
        # failed: neither its regret nor its seconds count
        {**run("meta", 2, {1: [0, 0, 0, 0]}, [100]), "error": "boom"},
    ]
    table = meta_cumulative_regret_ratio_table(records)
    row = next(line for line in table.splitlines() if " meta " in line).split()
    # pairs: (0,1), (0,2), (1,1); means 12/3 = 4 vs 12/3 = 4 for the reference
    assert row[2] == "3" and float(row[3]) == pytest.approx((1.5 + 9 + 1.5) / 12)
    # per task: 3/6 = 0.5 on task 1, 9/6 = 1.5 on task 2
    assert float(row[4]) == pytest.approx(1.5) and row[5] == "1/2"
    # s/iter and its ratio to the reference's
    assert float(row[6]) == pytest.approx(3.5) and float(row[7]) == pytest.approx(1.75)
    assert meta_cumulative_regret_ratio_table(records[2:]) == ""


def test_seconds_per_iteration_by_hand():
    def record(method, problem, iteration_s, **extra):
        return {
            "method": method,
            "problem": problem,
            "iteration_s": iteration_s,
            **extra,
        }

    records = [
        record("a", "p", [1.0, 3.0]),  # mean 2
        record("a", "p", [4.0]),  # mean 4
        record("a", "p", [10.0]),  # mean 10: the median of 2, 4, 10 is 4
        record("a", "q", [7.0]),
        record("a", "p", [], seed=1),  # no timings: left out
        record("a", "p", [99.0], error="boom"),  # failed: left out
        record("b", "p", [0.5, 1.5]),
    ]
    by_method = seconds_per_iteration(records, lambda r: r["method"])
    # method a over both problems: run means 2, 4, 10, 7 -> median 5.5
    assert by_method == {"a": (pytest.approx(5.5), 4), "b": (pytest.approx(1.0), 1)}
    by_pair = seconds_per_iteration(records, lambda r: (r["problem"], r["method"]))
    assert by_pair[("p", "a")] == (pytest.approx(4.0), 3)
    assert by_pair[("q", "a")] == (pytest.approx(7.0), 1)


def test_problem_kinds_of_the_default_track():
    assert problem_kind("bohachevsky-unrelated") == "unhelpful"
    assert problem_kind("lcbench-pair-negative") == "unhelpful"
    assert problem_kind("lcbench-pair-none") == "unhelpful"
    assert problem_kind("gaussian-bumps-affine") == "affine"
    assert problem_kind("gaussian-bumps-identical") == "identical"
    for related in ("bohachevsky", "breast-cancer-mlp", "lcbench-pair-weak"):
        assert problem_kind(related) == "related"


def test_transfer_targets_by_hand():
    # R_T per seed: "rec" the recommended model, "other" another model of ours
    table = {
        # related: rec 0.4x the GP and best; other above the GP (a target-2 miss)
        "bohachevsky": {
            "rec": [1, 1], "other": [5, 5], "mtgp": [2, 2], "rgpe": [3, 3],
            "gp-ucb-fitted": [2.5, 2.5],
        },
        # related: rec behind mtgp (target 1 on 1 of 2 problems), 0.8x the GP
        "lcbench-pair-weak": {
            "rec": [4, 4], "other": [4, 4], "mtgp": [1, 1], "rgpe": [6, 6],
            "gp-ucb-fitted": [5, 5],
        },
        # control: "other" 1.5x and outside the GP's CI; rec 1.05x (within 10%)
        "bohachevsky-unrelated": {
            "rec": [2.1, 2.1], "other": [3, 3], "gp-ucb-fitted": [2, 2],
        },
        # units: rec equal on both; other differs beyond noise
        "gaussian-bumps-affine": {
            "rec": [1, 2], "other": [9, 9.2], "gp-ucb-fitted": [10, 10],
        },
        "gaussian-bumps-identical": {
            "rec": [1.5, 1.5], "other": [1, 1.2], "gp-ucb-fitted": [10, 10],
        },
        "random-only": {"random": [1, 1]},  # no reference: not checked
    }  # fmt: skip
    records = [
        r for p, row in table.items() for m, v in row.items() for r in _runs(p, m, v)
    ]
    lines = transfer_targets_table(records, recommended="rec").splitlines()
    assert lines[0].startswith("Transfer targets (model held to them: rec")
    # 1: 1 of 2 related problems at or below the better peer; average ranks over
    # the 2 related problems: rec (1 + 2.5) / 2 (tied with other on the second),
    # mtgp (2 + 1) / 2 = 1.5 the best
    assert "on 1/2 related problems (50%, goal >= 75%: MISSED" in lines[1]
    assert "behind on: lcbench-pair-weak" in lines[1]
    assert "average rank 1.75, best 1.50 (MISSED)" in lines[1]
    # 2: other on the related bohachevsky (2x) and on the control (1.5x); rec's
    # 1.05x on the control is within 10%; the -identical reference is not a control
    assert lines[2].endswith(
        "MISSED; misses: other on bohachevsky (2.00x), "
        "other on bohachevsky-unrelated (1.50x)"
    )
    # 3: rec's means 1.5 vs 1.5 agree; other's 9.1 vs 1.1 differ
    assert "(-affine within noise of -identical, 2 cells): MISSED" in lines[3]
    assert lines[3].endswith("differ: other on gaussian-bumps-affine (9.1 vs 1.1)")
    # 4: rec's ratios 0.4 and 0.8 on the related problems: mean 0.6, geometric
    # sqrt(0.32)
    assert (
        "over 2 related problems 0.60 (geometric 0.57; goal <= 0.70: met)" in (lines[4])
    )
    assert len(lines) == 5


def _meta_run(method, curves, problem="m", seed=0):
    r"""One seed of ``method`` on meta problem ``problem``: per-task regret curves."""
    tasks = [{"task": k, "simple_regret": c} for k, c in curves.items()]
    return {**_meta_record(method, seed, tasks, 1, False), "problem": problem}


def _flat(value):
    r"""A regret curve whose cumulative regret over t = 1..3 is ``3 * value``."""
    return [9, value, value, value]


#: The family cell of the meta-learning target line, up to the families.
FAMILIES = "family ratio <= 0.5 (* misses; [95% over seeds]):"


def test_meta_target_by_hand():
    records = [
        # family a: hyperbo 0.25x the GP over both tasks, task 2 at 1.2x
        _meta_run("stbo-ucb", {1: _flat(4), 2: _flat(1)}, "a"),
        _meta_run("hyperbo", {1: _flat(0), 2: _flat(1.25)}, "a"),
        _meta_run("random", {1: _flat(0.5), 2: _flat(0.5)}, "a"),  # mean 1.5 < 1.875
        _meta_run("rgpe-meta", {1: _flat(1), 2: _flat(1)}, "a"),
        # family b: hyperbo 0.5x, below random and both peers
        _meta_run("stbo-ucb", {1: _flat(2)}, "b"),
        _meta_run("hyperbo", {1: _flat(1)}, "b"),
        _meta_run("random", {1: _flat(5)}, "b"),
        _meta_run("rgpe-meta", {1: _flat(1)}, "b"),
        _meta_run("mtgp-meta", {1: _flat(3)}, "b"),
        # family c: no peer ran; cmbo 0.75x
        _meta_run("stbo-ucb", {1: _flat(4)}, "c"),
        _meta_run("hyperbo", {1: _flat(1)}, "c"),
        _meta_run("cmbo", {1: _flat(3)}, "c"),
    ]
    lines = meta_targets_table(records).splitlines()
    assert lines[0].startswith("Meta-learning target (")
    hyperbo, cmbo = lines[1], lines[2]
    assert hyperbo.startswith(f"hyperbo: {FAMILIES} a 0.25, b 0.50,")
    assert "every target <= 1.0: MISSED (a 1/2 above [task 2 1.25])" in hyperbo
    # a: hyperbo's mean (0 + 3.75) / 2 against random's 1.5
    assert "never worse than random: MISSED (a (1.25x random))" in hyperbo
    # a: 1.875 against rgpe-meta's 3; b: 3 against 3 (rgpe-meta) and 9 (mtgp-meta)
    assert hyperbo.endswith("<= every peer that ran on 2/2 families (met)")
    assert cmbo == (
        f"cmbo: {FAMILIES} c 0.75*; every target <= 1.0: met; "
        "never worse than random: met; no peer ran"
    )


@pytest.mark.parametrize(
    "gp, hyperbo, expected",
    [
        pytest.param(
            # tasks 1-5 at 1.1x, 1.5x, 3x, 2x, 1.2x the no-meta GP; task 6 at 0.5x
            {k: _flat(2) for k in range(1, 7)},
            dict(zip(range(1, 7), map(_flat, [2.2, 3, 6, 4, 2.4, 1]))),
            "every target <= 1.0: MISSED (m 5/6 above "
            "[task 3 3.00, task 4 2.00, task 2 1.50, ...])",
            id="names-the-worst-and-counts-the-rest",
        ),
        pytest.param(
            # task 1: the GP had no regret at all (ratio inf); task 2 at 2x; task 3
            # below
            {1: [0, 0, 0, 0], 2: _flat(1), 3: _flat(2)},
            {1: _flat(0.5), 2: _flat(2), 3: _flat(1)},
            "every target <= 1.0: MISSED (m 2/3 above (1 where stbo-ucb had none) "
            "[task 1 inf, task 2 2.00])",
            id="counts-the-targets-the-no-meta-gp-never-missed",
        ),
    ],
)
def test_meta_target_per_target_line(gp, hyperbo, expected):
    line = meta_targets_table(
        [_meta_run("stbo-ucb", gp), _meta_run("hyperbo", hyperbo)]
    )
    assert expected in line


def test_meta_target_says_how_many_targets_seed_noise_puts_above():
    # two seeds per task, paired log ratios 0.75 and -1.25 on both tasks: the family
    # mean log ratio is -0.25 and the within-task sd sqrt(4 / 2); both tasks are
    # above 1 ((e^0.75 + e^-1.25) / 2 = 1.20), and noise alone would put
    # 2 Phi(-0.25 sqrt(2) / sqrt(2)) = 0.80 of them there
    records = [
        run
        for seed, log_ratio in ((0, 0.75), (1, -1.25))
        for run in (
            _meta_run("stbo-ucb", {1: _flat(2), 2: _flat(2)}, seed=seed),
            _meta_run(
                "hyperbo",
                {k: _flat(2 * math.exp(log_ratio)) for k in (1, 2)},
                seed=seed,
            ),
        )
    ]
    line = meta_targets_table(records)
    assert "every target <= 1.0: MISSED (m 2/2 above (~1 from the seeds' spread" in line
    cumulative = meta_cumulative_regret(records)["m"]
    expected = _targets_above_from_seed_noise(
        cumulative["hyperbo"], cumulative["stbo-ucb"]
    )
    assert expected == pytest.approx(2 * norm.cdf(-0.25), rel=1e-12)
    # one seed: no within-task spread to go by, no count
    one = meta_cumulative_regret([r for r in records if r["seed"] == 0])["m"]
    assert _targets_above_from_seed_noise(one["hyperbo"], one["stbo-ucb"]) is None


def test_meta_family_ratio_has_an_interval_over_seeds():
    # seed 0 at 0.25x, seed 1 at 0.75x: resampled seeds give 0.25, 0.5 or 0.75, each
    # pure draw a quarter of the time, so the 95% interval is [0.25, 0.75]
    records = [
        _meta_run(method, {1: _flat(value)}, seed=seed)
        for seed, gp, hyperbo in ((0, 4, 1), (1, 4, 3))
        for method, value in (("stbo-ucb", gp), ("hyperbo", hyperbo))
    ]
    line = meta_targets_table(records).splitlines()[1]
    assert line.startswith(f"hyperbo: {FAMILIES} m 0.50 [0.25-0.75];")
    # one seed: no interval
    one = meta_targets_table([r for r in records if r["seed"] == 0]).splitlines()[1]
    assert one.startswith(f"hyperbo: {FAMILIES} m 0.25;")


def test_summary_compares_skipping_loops_with_the_skipping_no_meta_gp():
    records = [
        _meta_run("stbo-ucb", {1: _flat(4)}),
        _meta_run("hyperbo", {1: _flat(1)}),  # 0.25x stbo-ucb
        _meta_run("stbo-ucb-skip", {1: _flat(2)}),
        _meta_run("hyperbo-skip", {1: _flat(1)}),  # 0.5x stbo-ucb-skip
        # 0.75x stbo-ucb (the other protocol), 1.5x its own
        _meta_run("cmbo", {1: _flat(3)}),
    ]
    text = summary_table(records)
    assert f"hyperbo: {FAMILIES} m 0.25;" in text
    assert f"cmbo: {FAMILIES} m 0.75*;" in text
    skipping = text[text.index("relative to stbo-ucb-skip") :]
    assert "Meta-learning target (cumulative simple regret; no meta: stbo-ucb-skip" in (
        skipping
    )
    assert f"hyperbo-skip: {FAMILIES} m 0.50;" in skipping
    assert f"cmbo: {FAMILIES} m 1.50*;" in skipping
    # the skipping protocol's targets name only the skipping loops
    assert "\nhyperbo: " not in skipping


def test_summary_compares_the_readme_hyperbo_loop_at_its_own_weight():
    records = [
        _meta_run("stbo-ucb-skip", {1: _flat(2)}),
        _meta_run("stbo-ucb1-skip", {1: _flat(4)}),
        _meta_run("hyperbo-clustered-ucb1-skip", {1: _flat(1)}),  # 0.5x / 0.25x
        _meta_run("cmbo", {1: _flat(3)}),
    ]
    text = summary_table(records)
    skipping = text[text.index("relative to stbo-ucb-skip") :]
    assert f"hyperbo-clustered-ucb1-skip: {FAMILIES} m 0.50;" in (skipping)
    same_weight = text[text.index("relative to stbo-ucb1-skip") :]
    assert "no meta: stbo-ucb1-skip" in same_weight
    assert f"hyperbo-clustered-ucb1-skip: {FAMILIES} m 0.25;" in same_weight
    # only the loop at that weight is held to it
    assert "\ncmbo: " not in same_weight


def test_peer_comparison_by_hand():
    def runs(problem, method, final):  # one seed
        return _runs(problem, method, [final])

    table = {
        "a": {"ours": 1.0, "mtgp": 2.0, "rgpe": 4.0, "gp-ucb-fitted": 9.0},
        "b": {"ours": 6.0, "mtgp": 5.0, "rgpe": 3.0, "random": 1.0},
        "c": {"ours": 1.0, "gp-ucb-fitted": 2.0},  # no peer: not compared
    }
    records = [
        r for p, row in table.items() for m, v in row.items() for r in runs(p, m, v)
    ]
    lines = peer_comparison_table(records).splitlines()
    assert lines[0].startswith("Mean R_T relative to the better peer (mtgp or rgpe)")
    # ours only: random, the peers and the no-transfer GP are not models of ours
    assert lines[1:] == ["ours: at or below on 1/2 (a 0.50); above on b 2.00"]
    assert peer_comparison_table(records, peers=("none",)) == ""


def test_guard_table_by_hand():
    runs = _runs("ctl", "x-guarded", [1.0, 2.0])
    # run 0: too few points, then the target GP (gain 0.5), then the transfer model
    runs[0]["diagnostics"] = {
        "guard_uses_transfer": [True, False, True],
        "guard_loo_gain": [None, 0.5, -0.1],
    }
    runs[1]["diagnostics"] = {
        "guard_uses_transfer": [False, False],
        "guard_loo_gain": [1.0, 0.2],
    }
    unguarded = _runs("ctl", "plain", [1.0])
    table = guard_table(runs + unguarded)
    row = next(line for line in table.splitlines() if "x-guarded" in line)
    # 3 of the 4 compared iterations used the target GP; mean gain 1.6 / 4
    assert row.split()[-3:] == ["2", "75%", "+0.40"]
    assert "plain" not in table
    # a prequential guard decides at every iteration; its gain is the final sum
    preq = _runs("ctl", "x-preq-guarded", [1.0, 2.0])
    preq[0]["diagnostics"] = {
        "guard_uses_transfer": [True, False, False],
        "guard_prequential_gain": [0.0, 2.0, 3.0],
    }
    preq[1]["diagnostics"] = {
        "guard_uses_transfer": [True, True],
        "guard_prequential_gain": [0.0, -1.0],
    }
    row = next(line for line in guard_table(preq).splitlines() if "x-preq" in line)
    assert row.split()[-4:] == ["2", "40%", "+1.00", "(sum)"]
    # so does a sequential one
    for run in preq:
        trace = run["diagnostics"]
        trace["guard_sequential_gain"] = trace.pop("guard_prequential_gain")
    row = next(line for line in guard_table(preq).splitlines() if "x-preq" in line)
    assert row.split()[-4:] == ["2", "40%", "+1.00", "(sum)"]
    assert "TransferGuard" in summary_table(runs + unguarded)
    assert guard_table(unguarded) == ""


def _real_record(problem, method, seed, total, weights=None):
    record = {
        "problem": problem,
        "method": method,
        "seed": seed,
        "iterations": 2,
        "values": [0.0, 0.0],
        "regret": [total / 2, total / 2],
        "cumulative_regret": [total / 2, total],
        "optimum": 1.0,
        "optimum_is_exact": True,
        "iteration_s": [0.1, 0.1],
    }
    if weights is not None:
        record["diagnostics"] = {"transfer_weight": weights}
    return record


def test_real_track_table_ratios_targets_and_transfer_weights():
    from benchmarks.real_track_tables import real_track_table

    records = []
    for seed in range(2):
        # related pair: ours 2, GP 10, peers 4 and 3 -> 0.20 and 0.67
        records += [
            _real_record("a", "ours", seed, 2.0, [0.9, 0.2]),
            _real_record("a", "gp", seed, 10.0),
            _real_record("a", "mtgp", seed, 4.0),
            _real_record("a", "rgpe", seed, 3.0 + seed),  # mean 3.5
            # control: ours 12 against the GP's 10 -> 1.20, missed
            _real_record("c", "ours", seed, 12.0, [0.1, 0.1]),
            _real_record("c", "gp", seed, 10.0),
        ]
    table = real_track_table(
        records,
        ["a", "c"],
        "ours",
        reference="gp",
        peers=("mtgp", "rgpe"),
        controls=("c",),
        rank_correlations={"a": 0.5},
    )
    lines = table.splitlines()
    row_a = next(line for line in lines if line.startswith("a "))
    assert row_a.split()[1:6] == ["0.50", "2", "0.20", "0.57", "yes"]
    assert "0.55 / 50%" in row_a  # mean weight, share of iterations above 0.5
    row_c = next(line for line in lines if line.startswith("c (control)"))
    assert "1.20" in row_c and "0.10 / 0%" in row_c
    assert "on 1/1 related problems (100%); geometric-mean ratio to it 0.57" in table
    assert "to gp on the related problems 0.20" in table
    assert "controls at most 1.1x gp: 0 of 1 (above: c (1.20x))" in table
    # the results, not the project's goals
    assert "goal" not in table and "MISSED" not in table
    # nothing to report: no runs of the method and the reference
    assert real_track_table(records, ["b"], "ours", reference="gp") == ""


def test_regret_against_best_found_by_hand():
    records = [
        {
            "problem": "hpo",
            "method": "a",
            "seed": 0,
            "values": [0.9, 0.95],
            "optimum": None,
        },
        {
            "problem": "hpo",
            "method": "b",
            "seed": 0,
            "values": [0.97, 0.96],
            "optimum": None,
        },
    ]
    filled = {r["method"]: r for r in with_regret(records)}
    assert filled["a"]["regret"] == pytest.approx([0.07, 0.02])
    assert filled["a"]["cumulative_regret"] == pytest.approx([0.07, 0.09])
    assert filled["b"]["cumulative_regret"] == pytest.approx([0.0, 0.01])
