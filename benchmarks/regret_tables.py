r"""Regret of benchmark runs and the tables every track shares: simple regret, the
budget to a target, average ranks (DeltaBO paper, Sec. 6.1 metrics)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from benchmarks.results_io import non_finite_traces


def geometric_mean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(np.maximum(values, 1e-12)))))


def optimum_unknown(record: dict) -> bool:
    return "error" not in record and "optimum" in record and record["optimum"] is None


def _optimum_estimated(record: dict) -> bool:
    return (
        "error" not in record
        and record.get("optimum") is not None
        and not record.get("optimum_is_exact", True)
    )


def with_regret(records: list[dict]) -> list[dict]:
    r"""Fill in the regret of runs whose problem optimum is unknown (HPO problems),
    against the best value any run of that problem found; where a run beat a
    dense-sample estimate of the optimum (the best of 200,000 uniform points, low in
    7 or 13 dimensions), raise the estimate to the best value found, so that no
    simple regret is negative and the cumulative regrets of all methods are against
    one optimum that is a lower bound of the true one."""
    # records of one problem with the same estimate share one target function
    best: dict[tuple, float] = {}
    for r in records:
        if optimum_unknown(r) or _optimum_estimated(r):
            key = (r["problem"], r["optimum"])
            best[key] = max(best.get(key, -np.inf), max(r["values"]))
    out = []
    for r in records:
        unknown = optimum_unknown(r)
        if unknown or _optimum_estimated(r):
            optimum = best[(r["problem"], r["optimum"])]
            if unknown or optimum > r["optimum"]:
                regret = [optimum - v for v in r["values"]]
                r = {
                    **r,
                    "optimum": optimum,
                    "regret": regret,
                    "cumulative_regret": np.cumsum(regret).tolist(),
                    "optimum_is_best_found": True,
                }
        out.append(r)
    return out


def failed_run(record: dict) -> bool:
    r"""A failed run, or a finished one whose traces are not finite (the reports
    leave both out and name them)."""
    return "error" in record or non_finite_traces(record) is not None


def group_runs(records: list[dict]) -> dict[tuple[str, str], list[dict]]:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in with_regret([r for r in records if not failed_run(r)]):
        groups[(r["problem"], r["method"])].append(r)
    return groups


def mean_ci(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Mean and 95% half-width ``1.96 * sd / sqrt(n)`` over the first axis (0 for
    a single run, which has no interval: tables print it as ``n/a``)."""
    n = values.shape[0]
    sd = values.std(axis=0, ddof=1) if n > 1 else np.zeros(values.shape[1:])
    return values.mean(axis=0), 1.96 * sd / np.sqrt(n)


def ci_cell(ci: float, n: int, width: int, precision: int) -> str:
    r"""``"+- <ci>"`` for a table, or ``"+- n/a"`` for a single run (``n=1``), whose
    interval is undefined (see :data:`SINGLE_RUN_NOTE`)."""
    if n < 2:
        return f"+- {'n/a':<{width}}"
    return f"+- {ci:<{width}.{precision}f}"


#: The note under a table with a single-run cell.
SINGLE_RUN_NOTE = (
    "+- n/a: a single run (n=1), whose 95% CI is undefined; run more seeds for one"
)


def is_simple_regret(record: dict) -> bool:
    return record.get("metric") == "simple_regret"


#: Budget-to-target tolerance, as a fraction of the objective's range over the pool.
TARGET_FRACTION = 0.01


def budget_to_target(
    record: dict, fraction: float = TARGET_FRACTION
) -> list[tuple[int, bool]] | None:
    r"""Evaluations until the simple regret is within ``fraction`` of the objective's
    range, per test task of one meta-learning record.

    The target of a test task is ``simple regret <= fraction * (max_pool f -
    min_pool f)`` (on a normalized regret simply ``<= fraction``). The budget counts
    every evaluation, the ``n_init`` initial points included: a target met by the
    initial design costs ``n_init`` (the design is one batch), one met after ``t``
    BO iterations ``n_init + t``. A run that never meets it is right-censored at its
    total number of evaluations ``n_init + T``. Unlike the cumulative regret, this
    does not credit a method that stays close to, but never finds, the optimum.

    Args:
        record: A meta-learning record (``metric == "simple_regret"``).
        fraction: The tolerance as a fraction of the pool range.

    Returns:
        ``[(evaluations, censored)]`` in the order of ``record["tasks"]``, or ``None``
        when the record lacks what it takes: ``settings["n_init"]``, the per-task
        ``simple_regret`` curves, and on an unnormalized regret each task's
        ``optimum`` and ``pool_min`` (records written before the pool minimum was
        stored).
    """
    n_init = record.get("settings", {}).get("n_init")
    tasks = record.get("tasks")
    if n_init is None or not tasks:
        return None
    out = []
    for task in tasks:
        curve = task.get("simple_regret")
        if not curve:
            return None
        if record.get("normalized_regret"):
            tolerance = fraction  # the regret is already in units of the range
        elif task.get("optimum") is not None and task.get("pool_min") is not None:
            tolerance = fraction * (task["optimum"] - task["pool_min"])
        else:
            return None
        # curve[t]: after n_init + t evaluations
        hit = next((t for t, r in enumerate(curve) if r <= tolerance), None)
        out.append(
            (n_init + len(curve) - 1, True) if hit is None else (n_init + hit, False)
        )
    return out


def _budget_cells(runs: list[dict], width: int) -> str:
    r"""The median budget-to-target over the (seed, test task) runs of a group and
    ``censored k/n``; ``n/a`` unless every record has what the budget takes."""
    budgets = [budget_to_target(r) for r in runs]
    if any(b is None for b in budgets):
        return f" {'n/a':>{width}} {'n/a':>9}"
    evals = np.array([e for b in budgets for e, _ in b], dtype=float)
    censored = sum(c for b in budgets for _, c in b)
    median = f"{np.median(evals):g}"
    if 2 * censored >= len(evals):  # the median involves censored runs
        median = ">" + median
    return f" {median:>{width}} {f'{censored}/{len(evals)}':>9}"


def simple_regret_table(
    records: list[dict], checkpoints: tuple[int, ...] | None = None
) -> str:
    r"""Meta-learning problems: simple regret after t iterations (mean +- 95% CI over
    seeds, each seed's value the mean over its test tasks), the budget-to-target
    (:func:`budget_to_target`: the median over test tasks x seeds, since censored
    runs make a mean meaningless, and how many runs were censored), pre-training
    and per-iteration wall time. Default checkpoints: 10, 25, 50 (those reached)
    and the last iteration."""
    groups = group_runs([r for r in records if is_simple_regret(r)])
    if not groups:
        return ""
    if checkpoints is None:
        T = min(len(r["simple_regret"]) - 1 for runs in groups.values() for r in runs)
        checkpoints = tuple(sorted({t for t in (10, 25, 50) if t <= T} | {T}))
    pw = max([len("problem")] + [len(p) for p, _ in groups])
    mw = max([len("method")] + [len(m) for _, m in groups])
    head = f"{'problem':<{pw}} {'method':<{mw}} {'seeds':>5}"
    budget = f"evals to {TARGET_FRACTION:.0%}"
    head += (
        "".join(f" {f'r@{t} (+- CI)':>18}" for t in checkpoints)
        + f" {budget} {'censored':>9} {'pretrain s':>10} {'s/iter':>7}"
    )
    lines = [head, "-" * len(head)]
    for (problem, method), runs in sorted(groups.items()):
        line = f"{problem:<{pw}} {method:<{mw}} {len(runs):>5}"
        for t in checkpoints:
            values = [
                r["simple_regret"][t] for r in runs if len(r["simple_regret"]) > t
            ]
            if len(values) < len(runs):
                line += f" {'-':>18}"
                continue
            mean, ci = mean_ci(np.array(values)[:, None])
            line += f" {mean[0]:>9.4f} {ci_cell(ci[0], len(values), 6, 4)}"
        line += _budget_cells(runs, len(budget))
        line += f" {np.mean([r['pretrain_s'] for r in runs]):>10.1f}"
        line += f" {np.mean([np.mean(r['iteration_s']) for r in runs]):>7.3f}"
        lines.append(line)
    if any(len(runs) == 1 for runs in groups.values()):
        lines.append(SINGLE_RUN_NOTE)
    lines += [
        f"{budget}: median number of evaluations (the initial points included) until "
        f"the simple regret is within {TARGET_FRACTION:.0%} of the task's pool range,",
        "over test tasks x seeds; censored: runs that never got there, counted at "
        "their total evaluations",
        "('>': the median is a lower bound; n/a: records without the pool minimum)",
    ]
    timed = {
        k: runs
        for k, runs in groups.items()
        if all("weight_update_s" in r for r in runs)
    }
    if timed:
        lines += [
            "",
            (
                "cm-BO timings (mean over seeds; "
                "weight update: mean and max over all updates):"
            ),
        ]
        lines.append(
            f"{'problem':<{pw}} {'method':<{mw}} {'GP fits s':>10}"
            f" {'clustering s':>12} {'update s':>9} {'max s':>7} {'C':>3}"
        )
        for (problem, method), runs in sorted(timed.items()):
            updates = np.concatenate(
                [np.asarray(r["weight_update_s"], dtype=float) for r in runs]
            )
            lines.append(
                f"{problem:<{pw}} {method:<{mw}}"
                f" {np.mean([r['fit_s'] for r in runs]):>10.1f}"
                f" {np.mean([r['clustering_s'] for r in runs]):>12.2f}"
                f" {updates.mean():>9.4f} {updates.max():>7.3f}"
                f" {'/'.join(str(r['n_clusters']) for r in runs):>3}"
            )
    return "\n".join(lines)


def average_ranks(values: np.ndarray) -> np.ndarray:
    r"""Ranks ``1..m`` along the first axis (smaller value, better rank), ties sharing
    the mean of their ranks."""
    order = values.argsort(axis=0, kind="stable")
    ranks = np.empty_like(values, dtype=float)
    np.put_along_axis(
        ranks, order, np.arange(1, values.shape[0] + 1, dtype=float)[:, None], axis=0
    )
    for j in range(values.shape[1]):  # average ties
        _, inverse, counts = np.unique(
            values[:, j], return_inverse=True, return_counts=True
        )
        if (counts > 1).any():
            sums = np.bincount(inverse, weights=ranks[:, j])
            ranks[:, j] = sums[inverse] / counts[inverse]
    return ranks


def rank_and_solved(
    records: list[dict], threshold: float = 0.005
) -> dict[str, dict[str, np.ndarray]]:
    r"""cm-BO's (Sec. 4.1, Fig. 2) average rank and fraction of solved BO runs.

    A BO run is one (seed, test task) pair of a method (its per-task ``simple_regret``
    curve). At every iteration ``t`` the methods are ranked on each (seed, test task)
    that all of them ran (rank 1: lowest regret; ties get the mean of their ranks) and
    the ranks are averaged over these runs. The fraction of solved runs at ``t`` is
    the share of a method's runs with regret ``< threshold``.

    Args:
        records: Successful meta-learning records of one problem (``metric ==
            "simple_regret"``), any methods and seeds.
        threshold: Regret threshold ``C`` of a solved run (the paper: 0.005 on the
            normalized simple regret).

    Returns:
        ``{method: {"rank": (T+1,) array, "solved": (T+1,) array}}`` over the
        iterations all runs reached (index 0: initial points only).
    """
    records = [r for r in records if "error" not in r and is_simple_regret(r)]
    if not records:
        return {}
    problems = {r["problem"] for r in records}
    if len(problems) != 1:
        raise ValueError(
            f"`records` must come from one problem, got {sorted(problems)}."
        )
    runs: dict[str, dict[tuple[int, int], list[float]]] = defaultdict(dict)
    for r in records:
        for task in r["tasks"]:
            runs[r["method"]][(r["seed"], task["task"])] = task["simple_regret"]
    methods = sorted(runs)
    T = min(len(curve) for m in methods for curve in runs[m].values())
    common = sorted(set.intersection(*(set(runs[m]) for m in methods)))
    out = {}
    if common:
        # (method, run, t) regrets on the runs every method did
        values = np.array(
            [[runs[m][k][:T] for k in common] for m in methods], dtype=float
        )
        ranks = (
            average_ranks(values.reshape(len(methods), -1))
            .reshape(values.shape)
            .mean(axis=1)
        )
    for i, m in enumerate(methods):
        curves = np.array([curve[:T] for curve in runs[m].values()], dtype=float)
        out[m] = {
            "rank": ranks[i] if common else np.full(T, np.nan),
            "solved": (curves < threshold).mean(axis=0),
        }
    return out


def rank_solved_table(
    records: list[dict],
    checkpoints: tuple[int, ...] | None = None,
    threshold: float = 0.005,
) -> str:
    r"""Per meta-learning problem: :func:`rank_and_solved` at checkpoints (default: 10,
    25, 50 reached and the last iteration)."""
    lines = []
    meta = [r for r in records if "error" not in r and is_simple_regret(r)]
    for problem in sorted({r["problem"] for r in meta}):
        stats = rank_and_solved([r for r in meta if r["problem"] == problem], threshold)
        T = len(next(iter(stats.values()))["solved"]) - 1
        cps = (
            tuple(t for t in checkpoints if t <= T)
            if checkpoints
            else tuple(sorted({t for t in (10, 25, 50) if t <= T} | {T}))
        )
        mw = max([len("method")] + [len(m) for m in stats])
        head = f"{problem}: {'method':<{mw}}" + "".join(
            f" {f'rank@{t}':>8}" for t in cps
        )
        head += "".join(f" {f'solved@{t}':>10}" for t in cps)
        lines += [head, "-" * len(head)]
        for m, st in stats.items():
            line = f"{' ' * (len(problem) + 2)}{m:<{mw}}" + "".join(
                f" {st['rank'][t]:>8.2f}" for t in cps
            )
            line += "".join(f" {st['solved'][t]:>10.3f}" for t in cps)
            lines.append(line)
    if lines:
        lines.insert(
            0,
            (
                "Average rank (1 = best) per (seed, test task) and fraction of runs "
                f"with regret < {threshold}:"
            ),
        )
    return "\n".join(lines)
