r"""What following the meta-tasks could give at most on the meta track: oracles.

For each split (seed) of a meta problem, the meta-training tasks' *true* values on
the split's candidate pool are evaluated (no method sees them: the methods get
``n_history`` points per task) and min-max normalized per task. On each test task,
from the meta track's own initial points, three oracles query the pool:

- ``greedy``: the greedy portfolio of those values (Feurer et al. 2015,
  :func:`~benchmarks.meta_methods.greedy_portfolio`), in order;
- ``consensus``: the pool by the meta-tasks' mean normalized value;
- ``best task``: after one query, the best of the meta-tasks' optima for this test
  task (an oracle also of which meta-task the target resembles; its one-step
  regret).

The first two are reported as the meta track reports methods: cumulative simple
regret ``sum_{t=1..T} r_t`` relative to a reference method's records on the same
(seed, test task) pairs (default: the no-meta GP ``stbo-ucb-skip``). A ratio above
0.5 for ``greedy`` says that the meta-tasks, even known exactly on the pool, do not
point a non-adaptive search to half the no-meta GP's regret.

Run: ``python -m benchmarks.meta_ceilings --problems rbv2-rpart
rbv2-xgboost --seeds 20``
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import torch

from benchmarks.meta import (
    MetaProblem,
    initial_points,
    make_meta_problem,
    split_pool,
    split_tasks,
    task_generator,
)
from benchmarks.meta_methods import (
    greedy_portfolio,
    normalized_regrets,
)
from benchmarks.meta_tables import meta_cumulative_regret
from benchmarks.results_io import load_results

#: The meta track's records shipped with the package (``export``).
SHIPPED_RECORDS = Path(__file__).with_name("meta_track_records.jsonl.gz")


def _cumulative_regret(
    regret: torch.Tensor, start: list[int], order: list[int]
) -> float:
    r"""``sum_{t=1..T}`` of the best-so-far regret after the ``start`` points and
    then the points of ``order`` (``T = len(order)``)."""
    best = regret[start].min()
    total = 0.0
    for i in order:
        best = torch.minimum(best, regret[i])
        total += float(best)
    return total


def oracle_regrets(
    problem: MetaProblem, seed: int, iterations: int
) -> dict[str, dict[int, float]]:
    r"""The oracles' regrets on each test task of the ``seed``'s split.

    Args:
        problem: The meta problem.
        seed: The split's seed (as the meta track's).
        iterations: ``T``, the queries after the initial points.

    Returns:
        Regrets in the problem's units (normalized where the track normalizes
        them), as ``{"greedy": {task: cumulative regret}, "consensus": {...},
        "best task": {task: regret after one query}}``.
    """
    train, test = split_tasks(problem, seed)
    pool = split_pool(problem, seed)
    values = torch.stack(
        [problem.evaluate(i, pool).squeeze(-1) for i in range(problem.n_tasks)]
    )
    normalized = normalized_regrets(values)
    greedy = greedy_portfolio(normalized[train]).tolist()
    consensus = normalized[train].mean(0).argsort(stable=True).tolist()
    optima = values[train].argmax(-1).tolist()
    out: dict[str, dict[int, float]] = {"greedy": {}, "consensus": {}, "best task": {}}
    for task in test:
        regret = (
            normalized[task]
            if problem.normalize_regret
            else values[task].max() - values[task]
        )
        start = initial_points(problem, task_generator(seed, task))
        for name, order in (("greedy", greedy), ("consensus", consensus)):
            order = [i for i in order if i not in start][:iterations]
            out[name][task] = _cumulative_regret(regret, start, order)
        out["best task"][task] = float(
            torch.minimum(regret[start].min(), regret[optima].min())
        )
    return out


def main(argv: Sequence[str] | None = None) -> list[tuple]:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.meta_ceilings",
        description="Oracle portfolios of the meta-tasks against a method's records.",
    )
    parser.add_argument("--problems", nargs="+", required=True)
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0..K-1")
    parser.add_argument(
        "--records",
        type=Path,
        default=SHIPPED_RECORDS,
        help="meta-track records (.jsonl or .jsonl.gz; default: the shipped ones)",
    )
    parser.add_argument("--reference", default="stbo-ucb-skip")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be positive, got {args.seeds}.")
    records = [
        r
        for r in load_results(args.records)[0]
        if r["method"] == args.reference and r.get("seed", 0) < args.seeds
    ]
    # the reference's own shortest T (other methods' records may be shorter)
    cumulative = meta_cumulative_regret(records)
    rows = []
    print(
        f"{'problem':<13} {'pairs':>5} {'T':>3} {'reference':>10} {'greedy':>7} "
        f"{'consensus':>9} {'best task r_1':>13}"
    )
    for name in args.problems:
        problem = make_meta_problem(name)
        reference = cumulative.get(name, {}).get(args.reference)
        if not reference:
            parser.error(
                f"no {args.reference!r} records of {name!r} in {args.records}."
            )
        T = min(len(r["simple_regret"]) for r in records if r["problem"] == name) - 1
        sums = {"reference": 0.0, "greedy": 0.0, "consensus": 0.0, "best task": 0.0}
        pairs = 0
        for seed in range(args.seeds):
            oracles = oracle_regrets(problem, seed, T)
            for task in oracles["greedy"]:
                if (seed, task) not in reference:
                    continue
                pairs += 1
                sums["reference"] += reference[(seed, task)]
                for key in ("greedy", "consensus", "best task"):
                    sums[key] += oracles[key][task]
        if pairs == 0:
            parser.error(
                f"no {args.reference!r} records of {name!r} at seeds < {args.seeds}."
            )
        ref = sums["reference"] / pairs
        row = (
            name,
            pairs,
            T,
            ref,
            sums["greedy"] / pairs / ref,
            sums["consensus"] / pairs / ref,
            sums["best task"] / pairs,
        )
        rows.append(row)
        print(
            f"{name:<13} {pairs:>5} {T:>3} {ref:>10.4f} {row[4]:>6.3f}x "
            f"{row[5]:>8.3f}x {row[6]:>13.4f}"
        )
    return rows


if __name__ == "__main__":
    main()
