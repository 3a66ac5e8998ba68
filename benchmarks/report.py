r"""Summaries and regret plots of benchmark results (DeltaBO paper, Sec. 6.1
metrics)."""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Callable, Hashable
from pathlib import Path

import numpy as np

from benchmarks.runner import non_finite_traces, read_results
from botorch_transfer._io import atomic_write
from botorch_transfer.test_functions.hpo_pairs import UNHELPFUL_PAIRS
from botorch_transfer.test_functions.real_pairs import (
    CONFIRMATION,
    REAL_CONTROLS,
    pair_rank_correlation,
)


def _geometric_mean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(np.maximum(values, 1e-12)))))


def _optimum_unknown(record: dict) -> bool:
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
        if _optimum_unknown(r) or _optimum_estimated(r):
            key = (r["problem"], r["optimum"])
            best[key] = max(best.get(key, -np.inf), max(r["values"]))
    out = []
    for r in records:
        unknown = _optimum_unknown(r)
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


def _failed(record: dict) -> bool:
    r"""A failed run, or a finished one whose traces are not finite (the reports
    leave both out and name them)."""
    return "error" in record or non_finite_traces(record) is not None


def _group(records: list[dict]) -> dict[tuple[str, str], list[dict]]:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in with_regret([r for r in records if not _failed(r)]):
        groups[(r["problem"], r["method"])].append(r)
    return groups


def mean_ci(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Mean and 95% half-width ``1.96 * sd / sqrt(n)`` over the first axis (0 for
    a single run, which has no interval: tables print it as ``n/a``)."""
    n = values.shape[0]
    sd = values.std(axis=0, ddof=1) if n > 1 else np.zeros(values.shape[1:])
    return values.mean(axis=0), 1.96 * sd / np.sqrt(n)


def _ci_cell(ci: float, n: int, width: int, precision: int) -> str:
    r"""``"+- <ci>"`` for a table, or ``"+- n/a"`` for a single run (``n=1``), whose
    interval is undefined (see :data:`SINGLE_RUN_NOTE`)."""
    if n < 2:
        return f"+- {'n/a':<{width}}"
    return f"+- {ci:<{width}.{precision}f}"


#: The note under a table with a single-run cell.
SINGLE_RUN_NOTE = (
    "+- n/a: a single run (n=1), whose 95% CI is undefined; run more seeds for one"
)


def _is_simple_regret(record: dict) -> bool:
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
    groups = _group([r for r in records if _is_simple_regret(r)])
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
            line += f" {mean[0]:>9.4f} {_ci_cell(ci[0], len(values), 6, 4)}"
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


def _average_ranks(values: np.ndarray) -> np.ndarray:
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
    records = [r for r in records if "error" not in r and _is_simple_regret(r)]
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
            _average_ranks(values.reshape(len(methods), -1))
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
    meta = [r for r in records if "error" not in r and _is_simple_regret(r)]
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


#: The no-transfer reference of the default-settings track.
NO_TRANSFER = "gp-ucb-fitted"


def _near_reference(mean: float, reference: np.ndarray) -> bool:
    r"""Is ``mean`` within 10% of the reference's mean ``R_T`` or inside its 95% CI
    (the robustness target for negative-transfer controls)?"""
    ref_mean, ref_ci = mean_ci(reference[:, None])
    return bool(mean <= 1.1 * ref_mean[0] or mean <= ref_mean[0] + ref_ci[0])


def no_transfer_ratio_table(records: list[dict], reference: str = NO_TRANSFER) -> str:
    r"""Each method's final cumulative regret relative to the no-transfer GP's.

    Per problem on which ``reference`` ran: ``ratio = mean R_T / mean R_T of the
    reference`` and whether the method is within 10% of the reference or inside its
    95% CI (``ok``), the robustness target for negative-transfer controls.

    Args:
        records: Run records (failed runs and meta-learning records are ignored).
        reference: The no-transfer method.

    Returns:
        The table, or ``""`` when ``reference`` has no runs.
    """
    finals = _final_cumulative_regret(records)
    problems = sorted({p for p, m in finals if m == reference})
    rows = []
    for problem in problems:
        ref = finals[(problem, reference)]
        for (p, method), values in sorted(finals.items()):
            if p != problem or method == reference:
                continue
            mean = values.mean()
            within = _near_reference(mean, ref)
            ratio = mean / ref.mean() if ref.mean() > 0 else float("inf")
            rows.append((problem, method, ratio, "ok" if within else "WORSE"))
    if not rows:
        return ""
    pw = max(len("problem"), *(len(r[0]) for r in rows))
    mw = max(len("method"), *(len(r[1]) for r in rows))
    lines = [
        f"R_T relative to the no-transfer GP ({reference}); ok: within 10% or "
        "inside its 95% CI",
        f"{'problem':<{pw}} {'method':<{mw}} {'ratio':>7}",
    ]
    lines += [f"{p:<{pw}} {m:<{mw}} {r:>7.2f}  {flag}" for p, m, r, flag in rows]
    return "\n".join(lines)


def _final_cumulative_regret(records: list[dict]) -> dict[tuple[str, str], np.ndarray]:
    r"""Per (problem, method): each run's R_T at the group's shortest horizon."""
    finals = {}
    for key, runs in _group([r for r in records if not _is_simple_regret(r)]).items():
        T = min(len(r["cumulative_regret"]) for r in runs)
        finals[key] = np.array([r["cumulative_regret"][T - 1] for r in runs])
    return finals


#: The peers a BoTorch user would pick instead of our models.
PEERS = ("mtgp", "rgpe")


def _ranks_by_method(
    finals: dict[tuple[str, str], np.ndarray], problems: list[str]
) -> dict[str, list[float]]:
    r"""Each method's rank by mean ``R_T`` (1: lowest; ties share the mean of their
    ranks) on each of ``problems`` where at least two methods ran."""
    ranks: dict[str, list[float]] = defaultdict(list)
    for problem in problems:
        methods = sorted(m for p, m in finals if p == problem)
        if len(methods) < 2:
            continue
        means = np.array([[finals[(problem, m)].mean()] for m in methods])
        for method, rank in zip(methods, _average_ranks(means)[:, 0]):
            ranks[method].append(float(rank))
    return ranks


def _better_peer_mean(
    finals: dict[tuple[str, str], np.ndarray], problem: str, peers: tuple[str, ...]
) -> float | None:
    r"""The lower mean ``R_T`` of the peers that ran on ``problem`` (``None``: none)."""
    means = [finals[(problem, q)].mean() for q in peers if (problem, q) in finals]
    return float(min(means)) if means else None


def average_rank_table(records: list[dict], peers: tuple[str, ...] = PEERS) -> str:
    r"""Average rank of each method across problems, by mean final cumulative regret.

    On each problem the methods that ran are ranked by their mean ``R_T`` (1: lowest;
    ties share the mean of their ranks); a method's average rank is over the
    problems on which it ran, so compare methods that ran on the same problems.
    ``<= best peer`` counts the problems where the method's mean ``R_T`` is at most
    the better of the ``peers``'.

    Args:
        records: Run records (failed runs and meta-learning records are ignored).
        peers: The peer methods.

    Returns:
        The table, or ``""`` when fewer than two methods ran on any problem.
    """
    finals = _final_cumulative_regret(records)
    problems = sorted({p for p, _ in finals})
    ranks = _ranks_by_method(finals, problems)
    peer_wins: dict[str, list[bool]] = defaultdict(list)
    for problem in problems:
        methods = sorted(m for p, m in finals if p == problem)
        best = _better_peer_mean(finals, problem, peers)
        if len(methods) < 2 or best is None:
            continue
        for method in methods:
            peer_wins[method].append(bool(finals[(problem, method)].mean() <= best))
    if not ranks:
        return ""
    mw = max(len("method"), *(len(m) for m in ranks))
    lines = [
        "Average rank across problems by mean R_T (1 = best)",
        f"{'method':<{mw}} {'problems':>8} {'avg rank':>9} {'<= best peer':>13}",
    ]
    for method in sorted(ranks, key=lambda m: (np.mean(ranks[m]), m)):
        wins = peer_wins.get(method, [])
        lines.append(
            f"{method:<{mw}} {len(ranks[method]):>8} {np.mean(ranks[method]):>9.2f}"
            f" {f'{sum(wins)}/{len(wins)}':>13}"
        )
    return "\n".join(lines)


def peer_comparison_table(
    records: list[dict],
    reference: str = NO_TRANSFER,
    peers: tuple[str, ...] = PEERS,
) -> str:
    r"""Where each model of ours beats the better peer and where it loses: per
    problem on which a peer ran, the ratio of its mean ``R_T`` to the lower of the
    peers' mean ``R_T`` (``<= 1``: at or below the better peer).

    Args:
        records: Run records of the default-settings track.
        reference: The no-transfer GP (not one of ours).
        peers: The peer methods.

    Returns:
        One line per model of ours, or ``""`` when no peer ran.
    """
    finals = _final_cumulative_regret(records)
    ours = sorted({m for _, m in finals if _is_ours(m, reference, peers)})
    lines = []
    for model in ours:
        wins, losses = [], []
        for problem in sorted({p for p, m in finals if m == model}):
            best = _better_peer_mean(finals, problem, peers)
            if best is None:
                continue
            mean = finals[(problem, model)].mean()
            ratio = mean / best if best > 0 else float("inf")
            (wins if mean <= best else losses).append(f"{problem} {ratio:.2f}")
        if wins or losses:
            lines.append(
                f"{model}: at or below on {len(wins)}/{len(wins) + len(losses)} ("
                + (", ".join(wins) or "none")
                + "); above on "
                + (", ".join(losses) or "none")
            )
    if not lines:
        return ""
    header = (
        f"Mean R_T relative to the better peer ({' or '.join(peers)}) per problem "
        "(<= 1: at or below it)"
    )
    return "\n".join([header, *lines])


#: The guard traces that are sums over the run (nats in total), not LOO means.
SUMMED_GAINS = ("guard_prequential_gain", "guard_sequential_gain")


def guard_table(records: list[dict]) -> str:
    r"""How often each guarded method's ``TransferGuard`` acted as the target-only GP,
    per problem, from the runs' ``diagnostics`` (runs without them are left out).

    Columns: the runs, the share of the iterations at which the guard compared the
    two models (it needs ``min_points`` target points) and chose the target-only GP,
    and the mean leave-one-out gain of the target-only GP over the transfer model at
    those comparisons (nats per point; > 0: the target-only GP predicted the
    target's own data better). A prequential or sequential guard
    (``guard_prequential_gain``, ``guard_sequential_gain``) decides at every
    iteration; its gain is the target-only GP's summed gain at the run's last
    iteration (nats in total), averaged over
    runs, marked ``(sum)``.

    Args:
        records: Run records.

    Returns:
        The table, or ``""`` when no run has a guard trace.
    """
    groups: dict[tuple[str, str], list[dict]] = {}
    for record in records:
        trace = record.get("diagnostics", {}).get("guard_uses_transfer")
        if "error" not in record and trace:
            groups.setdefault((record["problem"], record["method"]), []).append(record)
    if not groups:
        return ""
    pw = max([len("problem")] + [len(p) for p, _ in groups])
    mw = max([len("method")] + [len(m) for _, m in groups])
    lines = [
        "TransferGuard: share of the compared iterations at which the target-only GP "
        "acted, and the mean LOO gain of the target-only GP (nats/point)",
        f"{'problem':<{pw}} {'method':<{mw}} {'runs':>4} {'target GP':>10} "
        f"{'LOO gain':>9}",
    ]
    for (problem, method), runs in sorted(groups.items()):
        chosen, gains, summed = [], [], False
        for run in runs:
            trace = run["diagnostics"]
            key = next((k for k in SUMMED_GAINS if k in trace), None)
            if key is not None:  # decides at every iteration
                summed = True
                chosen.extend(not uses for uses in trace["guard_uses_transfer"])
                gains.append(trace[key][-1])
                continue
            steps = zip(trace["guard_uses_transfer"], trace["guard_loo_gain"])
            for uses, gain in steps:
                if gain is not None:  # compared (enough target points)
                    chosen.append(not uses)
                    gains.append(gain)
        share = f"{np.mean(chosen):.0%}" if chosen else "-"
        gain = f"{np.mean(gains):+.2f}" if gains else "-"
        lines.append(
            f"{problem:<{pw}} {method:<{mw}} {len(runs):>4} {share:>10} {gain:>9}"
            + (" (sum)" if summed else "")
        )
    return "\n".join(lines)


#: The model the default-settings track holds to its targets: the marginal-affine
#: DeltaBO in a prequential TransferGuard with its defaults (see docs/decisions.md).
GUARDED_LOOP = "deltabo-marginal-final-guarded"
#: The recommended model, held to the real track's targets (see docs/decisions.md).
RECOMMENDED = "rank-weighted"

#: Methods that are neither the package's transfer models nor peers.
NOT_TRANSFER_MODELS = ("random", "pooled-gp-fitted")


def problem_kind(problem: str) -> str:
    r"""The role of a default-track problem in the transfer targets
    (:func:`transfer_targets_table`).

    Returns:
        ``"unhelpful"`` (a negative-transfer control: ``-unrelated`` sources and the
        LCBench pairs of rank correlation <= 0), ``"affine"`` (the source in other
        units), ``"identical"`` (its reference: the source is the target) or
        ``"related"`` (the paper settings, Shilton's shifts, the related pairs).
    """
    if problem.endswith("-unrelated") or problem in UNHELPFUL_PAIRS:
        return "unhelpful"
    for kind in ("affine", "identical"):
        if problem.endswith(f"-{kind}"):
            return kind
    return "related"


def _is_ours(method: str, reference: str, peers: tuple[str, ...]) -> bool:
    return not (
        method in peers
        or method == reference
        or method in NOT_TRANSFER_MODELS
        or method.startswith("gp-")
    )


def transfer_targets_table(
    records: list[dict],
    recommended: str = GUARDED_LOOP,
    reference: str = NO_TRANSFER,
    peers: tuple[str, ...] = PEERS,
) -> str:
    r"""The four transfer targets, checked on the default-settings track's records.

    1. On the related problems, ``recommended`` has a mean ``R_T`` at most the better
       peer's on >= 75% of them, and the best average rank across them.
    2. Every model of ours stays within 10% of ``reference`` (or inside its 95% CI)
       on every negative-transfer control, and at or below it on every related
       problem.
    3. On each ``-affine`` control, each model's ``R_T`` is within noise of its
       ``R_T`` on the ``-identical`` reference (the difference of the means inside
       its 95% interval, ``1.96 sqrt(se_1^2 + se_2^2)``).
    4. On the related problems, ``recommended``'s ``R_T`` is on average (the mean of
       its ratios to ``reference``) at least 30% lower than ``reference``'s.

    Models of ours are the methods that are not peers, not the reference, not
    ``gp-*`` and not in :data:`NOT_TRANSFER_MODELS`.

    Args:
        records: Run records of the default-settings track.
        recommended: The model held to targets 1 and 4.
        reference: The no-transfer GP.
        peers: The peer methods.

    Returns:
        The check, one line per target with the cells that miss, or ``""`` when
        ``reference`` has no runs on a related or control problem.
    """
    finals = _final_cumulative_regret(records)
    problems = sorted({p for p, m in finals if m == reference})
    if not problems:
        return ""
    kinds = {p: problem_kind(p) for p in problems}
    related = [p for p in problems if kinds[p] == "related"]
    ours = sorted(
        {m for p, m in finals if p in kinds and _is_ours(m, reference, peers)}
    )

    def mean(problem: str, method: str) -> float:
        return float(finals[(problem, method)].mean())

    lines = [
        f"Transfer targets (model held to them: {recommended}; no transfer: "
        f"{reference}; peers: {', '.join(peers)})"
    ]
    # 1. ahead of the peers on the related problems
    better_peer = {p: _better_peer_mean(finals, p, peers) for p in related}
    with_peers = [
        p for p in related if (p, recommended) in finals and better_peer[p] is not None
    ]
    if with_peers:
        wins = [p for p in with_peers if mean(p, recommended) <= better_peer[p]]
        share = len(wins) / len(with_peers)
        ranks = _ranks_by_method(finals, with_peers)
        average = {m: float(np.mean(r)) for m, r in ranks.items()}
        best = min(average.values())
        lost = ", ".join(p for p in with_peers if p not in wins) or "none"
        lines.append(
            f"1. ahead of the peers: <= the better peer on {len(wins)}/"
            f"{len(with_peers)} related problems ({share:.0%}, goal >= 75%: "
            f"{'met' if share >= 0.75 else 'MISSED'}; behind on: {lost}); average "
            f"rank {average[recommended]:.2f}, best {best:.2f} "
            f"({'met' if average[recommended] <= best else 'MISSED'})"
        )
    # 2. never much worse than no transfer
    misses = []
    for p in problems:
        ref = finals[(p, reference)]
        for m in ours:
            if (p, m) not in finals:
                continue
            value = mean(p, m)
            ratio = value / ref.mean() if ref.mean() > 0 else float("inf")
            if kinds[p] == "related":
                bad = value > ref.mean()
            elif kinds[p] == "identical":
                continue
            else:
                bad = not _near_reference(value, ref)
            if bad:
                misses.append(f"{m} on {p} ({ratio:.2f}x)")
    lines.append(
        "2. never much worse than no transfer (controls: within 10% or its 95% CI; "
        f"related: at or below it): {'met' if not misses else 'MISSED'}"
        + (f"; misses: {', '.join(misses)}" if misses else "")
    )
    # 3. units do not matter
    pairs = [
        (p, p[: -len("-affine")] + "-identical")
        for p in problems
        if kinds[p] == "affine"
    ]
    pairs = [(a, i) for a, i in pairs if any(q == i for q, _ in finals)]
    if pairs:
        differs, checked = [], 0
        for affine, identical in pairs:
            for m in ours:
                if (affine, m) not in finals or (identical, m) not in finals:
                    continue
                a, b = finals[(affine, m)], finals[(identical, m)]
                se2 = sum(v.var(ddof=1) / len(v) if len(v) > 1 else 0.0 for v in (a, b))
                checked += 1
                if abs(a.mean() - b.mean()) > 1.96 * np.sqrt(se2):
                    differs.append(
                        f"{m} on {affine} ({a.mean():.3g} vs {b.mean():.3g})"
                    )
        lines.append(
            f"3. units do not matter (-affine within noise of -identical, {checked} "
            f"cells): {'met' if not differs else 'MISSED'}"
            + (f"; differ: {', '.join(differs)}" if differs else "")
        )
    # 4. a real gain on the related problems
    gains = [p for p in related if (p, recommended) in finals]
    if gains:
        ratios = [mean(p, recommended) / mean(p, reference) for p in gains]
        average = float(np.mean(ratios))
        geometric = _geometric_mean(ratios)
        lines.append(
            f"4. a real gain: mean ratio to {reference} over {len(gains)} related "
            f"problems {average:.2f} (geometric {geometric:.2f}; goal <= 0.70: "
            f"{'met' if average <= 0.7 else 'MISSED'})"
        )
    return "\n".join(lines)


#: The no-meta reference of the meta track's ratio table.
NO_META = "stbo-ucb"
#: The no-meta reference of the methods that search only the pool points not yet
#: queried (cm-BO's pool protocol), and the methods compared with it: the README
#: HyperBO loop, HyperBO's loop with the unclustered prior and cm-BO's README loop.
NO_META_SKIPPING = "stbo-ucb-skip"
META_MODELS_SKIPPING = ("hyperbo-clustered-ucb1-skip", "hyperbo-skip", "cmbo")
#: The no-meta reference at the README HyperBO loop's UCB weight (``beta = 1``), and
#: the loop held to it: the two differ only in the prior, not in the weight.
NO_META_SKIPPING_BETA1 = "stbo-ucb1-skip"
META_MODELS_SKIPPING_BETA1 = ("hyperbo-clustered-ucb1-skip",)


def meta_cumulative_regret(
    records: list[dict],
) -> dict[str, dict[str, dict[tuple[int, int], float]]]:
    r"""Meta track: per problem and method, each (seed, test task)'s cumulative
    simple regret ``sum_{t=1..T} r_t``, at the problem's shortest ``T``.

    Args:
        records: Run records of the meta track (those without simple regrets or
            per-task results are skipped).

    Returns:
        ``{problem: {method: {(seed, task): cumulative simple regret}}}``.
    """
    groups = _group([r for r in records if _is_simple_regret(r) and r.get("tasks")])
    out: dict[str, dict[str, dict[tuple[int, int], float]]] = {}
    for problem in sorted({p for p, _ in groups}):
        runs_of = {m: runs for (p, m), runs in groups.items() if p == problem}
        T = min(len(r["simple_regret"]) for runs in runs_of.values() for r in runs) - 1
        out[problem] = {
            method: {
                (r["seed"], t["task"]): float(np.sum(t["simple_regret"][1 : T + 1]))
                for r in runs
                for t in r["tasks"]
            }
            for method, runs in runs_of.items()
        }
    return out


_meta_cumulative = meta_cumulative_regret  # the private name, for existing imports


def _meta_ratios(
    values: dict[tuple[int, int], float], ref: dict[tuple[int, int], float]
) -> tuple[int, float, dict[int, float]] | None:
    r"""Over the (seed, task) pairs both ran: the pair count, the ratio of the mean
    cumulative regrets and the ratio per test task (sums over its seeds)."""
    keys = sorted(set(values) & set(ref))
    if not keys:
        return None
    ratio = np.mean([values[k] for k in keys]) / np.mean([ref[k] for k in keys])
    per_task = {}
    for task in sorted({k[1] for k in keys}):
        ks = [k for k in keys if k[1] == task]
        denominator = sum(ref[k] for k in ks)
        numerator = sum(values[k] for k in ks)
        per_task[task] = numerator / denominator if denominator > 0 else np.inf
    return len(keys), float(ratio), per_task


#: Resamples of the seeds behind a family ratio's interval (fixed generator: a
#: summary is the same every time it is printed).
SEED_BOOTSTRAP_DRAWS = 2000


def _seed_bootstrap_interval(
    values: dict[tuple[int, int], float], ref: dict[tuple[int, int], float]
) -> tuple[float, float] | None:
    r"""95% interval of a family's ratio of summed cumulative regrets, resampling
    its seeds (splits) with replacement, each with all its test tasks (the pairs of
    one seed share a split and are not independent).

    Returns:
        ``(low, high)``, or ``None`` with fewer than two seeds.
    """
    keys = set(values) & set(ref)
    seeds = sorted({k[0] for k in keys})
    if len(seeds) < 2:
        return None
    a = np.array([sum(values[k] for k in keys if k[0] == s) for s in seeds])
    b = np.array([sum(ref[k] for k in keys if k[0] == s) for s in seeds])
    draws = np.random.default_rng(0).integers(
        len(seeds), size=(SEED_BOOTSTRAP_DRAWS, len(seeds))
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = a[draws].sum(-1) / b[draws].sum(-1)
    low, high = np.quantile(ratios, [0.025, 0.975])
    return float(low), float(high)


def _targets_above_from_seed_noise(
    values: dict[tuple[int, int], float], ref: dict[tuple[int, int], float]
) -> float | None:
    r"""How many test tasks would have a ratio above 1 from the seeds' spread alone,
    were every task at the family's ratio.

    A normal model of the paired log ratio ``l = log(value / ref)`` of each
    (seed, task) pair (pairs where either regret is 0 left out): each task's mean log
    ratio is the family's, ``g``, and pairs scatter about their task's mean with the
    within-task sd ``s`` pooled over tasks. A task with ``n`` pairs is then above 1
    with probability ``Phi(g sqrt(n) / s)``; the sum over tasks is returned. With a
    few seeds per task (the rbv2 families have about 3 pairs per task) an ``s`` of
    1-1.5 puts a tenth to a fifth of a family's tasks above 1 at a family ratio of 0.5,
    whatever the method.

    Returns:
        The expected count, or ``None`` where no task has two pairs (no ``s``).
    """
    logs: dict[int, list[float]] = defaultdict(list)
    for key in set(values) & set(ref):
        if values[key] > 0 and ref[key] > 0:
            logs[key[1]].append(float(np.log(values[key] / ref[key])))
    spread = [np.asarray(v) - np.mean(v) for v in logs.values() if len(v) > 1]
    dof = sum(len(d) - 1 for d in spread)
    if dof == 0:
        return None
    s = float(np.sqrt(sum(np.square(d).sum() for d in spread) / dof))
    g = float(np.mean([x for v in logs.values() for x in v]))
    if s == 0.0:
        return float(sum(g > 0 for _ in logs))
    # Phi(z) = erfc(-z / sqrt 2) / 2
    return float(
        sum(
            0.5 * math.erfc(-g * math.sqrt(len(v)) / (s * math.sqrt(2)))
            for v in logs.values()
        )
    )


def meta_cumulative_regret_ratio_table(
    records: list[dict], reference: str = NO_META
) -> str:
    r"""Meta track: each method's cumulative simple regret relative to the no-meta
    GP's, per problem.

    Per test task and seed, the cumulative regret is ``sum_{t=1..T} r_t`` (the simple
    regret after each BO iteration, at the group's shortest ``T``). Over the
    (seed, test task) pairs both the method and ``reference`` ran: ``ratio`` is the
    ratio of the means; per test task (means over its seeds) ``worst`` is the
    largest ratio and ``> 1`` counts the tasks where the method is worse. ``s/iter``
    is the method's seconds per BO iteration (the median over its runs of each run's
    mean) and ``cost`` its ratio to ``reference``'s.

    Args:
        records: Run records (transfer records are ignored).
        reference: The no-meta method.

    Returns:
        The table, or ``""`` without meta records of ``reference``.
    """
    seconds = {
        k: median
        for k, (median, _) in seconds_per_iteration(
            [r for r in records if _is_simple_regret(r)],
            lambda r: (r["problem"], r["method"]),
        ).items()
    }
    rows = []
    for problem, methods in meta_cumulative_regret(records).items():
        if reference not in methods:
            continue
        reference_s = seconds.get((problem, reference), float("nan"))
        for method, values in sorted(methods.items()):
            if method == reference:
                continue
            found = _meta_ratios(values, methods[reference])
            if found is None:
                continue
            n, ratio, per_task = found
            worst = max(per_task.values())
            worse = sum(r > 1 for r in per_task.values())
            method_s = seconds.get((problem, method), float("nan"))
            cost = method_s / reference_s if reference_s > 0 else float("nan")
            rows.append(
                (problem, method, n, ratio, worst, worse, len(per_task), method_s, cost)
            )
    if not rows:
        return ""
    pw = max(len("problem"), *(len(r[0]) for r in rows))
    mw = max(len("method"), *(len(r[1]) for r in rows))
    lines = [
        f"cumulative simple regret sum_t r_t relative to {reference} (same seeds and "
        "test tasks); worst: largest per-task ratio; > 1: tasks where worse; "
        "s/iter: seconds per iteration (median over runs); cost: s/iter vs "
        f"{reference}",
        f"{'problem':<{pw}} {'method':<{mw}} {'pairs':>5} {'ratio':>6} {'worst':>7} "
        f"{'> 1':>6} {'s/iter':>7} {'cost':>6}",
    ]
    lines += [
        f"{p:<{pw}} {m:<{mw}} {n:>5} {r:>6.3f} {w:>7.2f} {k:>3}/{t:<2} "
        f"{sec:>7.3f} {c:>6.2f}"
        for p, m, n, r, w, k, t, sec, c in rows
    ]
    return "\n".join(lines)


def seconds_per_iteration(
    records: list[dict], key: Callable[[dict], Hashable]
) -> dict[Hashable, tuple[float, int]]:
    r"""Seconds per BO iteration (model fit and acquisition) per group of runs: the
    median over the group's runs of each run's mean, and the number of runs.

    Args:
        records: Run records (failed runs and runs without timings are left out).
        key: The group of a record, e.g. its method or its (problem, method).

    Returns:
        ``{group: (median seconds, runs)}``.
    """
    runs: dict[Hashable, list[float]] = defaultdict(list)
    for r in records:
        if not _failed(r) and r.get("iteration_s"):
            runs[key(r)].append(float(np.mean(r["iteration_s"])))
    return {k: (float(np.median(v)), len(v)) for k, v in runs.items()}


#: The meta models whose README loops the meta track runs.
META_MODELS = ("hyperbo", "cmbo")
#: The peers of the meta track: every meta-task as a source (RGPE) or a task (MTGP).
META_PEERS = ("rgpe-meta", "mtgp-meta")
#: The peers searching only the pool points not yet queried, as
#: :data:`NO_META_SKIPPING` and the README loops do.
META_PEERS_SKIPPING = ("rgpe-meta-skip", "mtgp-meta-skip")
#: How many of a family's targets above the no-meta GP the target-1 line names.
WORST_TARGETS_SHOWN = 3


def meta_targets_table(
    records: list[dict],
    models: tuple[str, ...] = META_MODELS,
    reference: str = NO_META,
    peers: tuple[str, ...] = META_PEERS,
    random: str = "random",
) -> str:
    r"""The meta-learning target, checked on the meta track's records, per meta model:
    cumulative regret ``<= 0.5x`` the no-meta GP's on each family and ``<= 1.0x`` on
    every target task, never above random search's (per family), and at or below
    both peers on ``>= 75%`` of the families (the measure of
    :func:`meta_cumulative_regret_ratio_table`: ratios of mean cumulative simple
    regret over the (seed, task) pairs both methods ran).

    Args:
        records: Run records of the meta track.
        models: The meta models held to the target.
        reference: The no-meta GP.
        peers: The peers (a family where none of them ran is not counted).
        random: Random search.

    Returns:
        One line per model that ran with ``reference``, or ``""``.
    """
    table = meta_cumulative_regret(records)
    lines = []
    for model in models:
        families, targets_above, vs_random, vs_peers = [], [], [], []
        for problem, methods in table.items():
            if model not in methods or reference not in methods:
                continue
            _, ratio, per_task = _meta_ratios(methods[model], methods[reference])
            interval = _seed_bootstrap_interval(methods[model], methods[reference])
            families.append(
                f"{problem} {ratio:.2f}{'' if ratio <= 0.5 else '*'}"
                + (
                    ""
                    if interval is None
                    else f" [{interval[0]:.2f}-{interval[1]:.2f}]"
                )
            )
            above = sorted(
                ((r, task) for task, r in per_task.items() if r > 1.0),
                key=lambda pair: pair[0],
                reverse=True,
            )
            if above:
                # a family has up to ~100 targets: their count and the worst few
                worst = ", ".join(
                    f"task {task} {r:.2f}" for r, task in above[:WORST_TARGETS_SHOWN]
                )
                more = ", ..." if len(above) > WORST_TARGETS_SHOWN else ""
                # a target where the no-meta GP had no regret at all cannot be
                # beaten, only tied: the count says how many misses are of that kind
                unbeatable = sum(np.isinf(r) for r, _ in above)
                notes = []
                if unbeatable:
                    notes.append(f"{unbeatable} where {reference} had none")
                # with a few seeds per target, many are above 1 by chance: how many
                expected = _targets_above_from_seed_noise(
                    methods[model], methods[reference]
                )
                if expected is not None:
                    notes.append(f"~{expected:.0f} from the seeds' spread alone")
                noted = f" ({'; '.join(notes)})" if notes else ""
                targets_above.append(
                    f"{problem} {len(above)}/{len(per_task)} above{noted} "
                    f"[{worst}{more}]"
                )
            if random in methods:
                found = _meta_ratios(methods[model], methods[random])
                if found is not None and found[1] > 1.0:
                    vs_random.append(f"{problem} ({found[1]:.2f}x random)")
            ran = [q for q in peers if q in methods]
            if ran:
                vs_peers.append(
                    all(_meta_ratios(methods[model], methods[q])[1] <= 1.0 for q in ran)
                )
        if not families:
            continue
        share = sum(vs_peers) / len(vs_peers) if vs_peers else float("nan")
        lines.append(
            f"{model}: family ratio <= 0.5 (* misses; [95% over seeds]): "
            f"{', '.join(families)}; "
            f"every target <= 1.0: "
            + ("met" if not targets_above else f"MISSED ({', '.join(targets_above)})")
            + "; never worse than random: "
            + ("met" if not vs_random else f"MISSED ({', '.join(vs_random)})")
            + (
                f"; <= every peer that ran on {sum(vs_peers)}/{len(vs_peers)} "
                f"families ({'met' if share >= 0.75 else 'MISSED'})"
                if vs_peers
                else "; no peer ran"
            )
        )
    if not lines:
        return ""
    header = (
        f"Meta-learning target (cumulative simple regret; no meta: {reference}; "
        f"peers: {', '.join(peers)})"
    )
    return "\n".join([header, *lines])


def summary_table(records: list[dict]) -> str:
    r"""Method x problem table: final cumulative regret R_T (mean +- 95% CI),
    time/iteration and simple regret r_T (the gap of the best query); meta-learning
    problems get :func:`simple_regret_table` below it."""
    meta = simple_regret_table(records)
    if meta:
        ranks = rank_solved_table(records)
        if any(r.get("normalized_regret") for r in records if _is_simple_regret(r)):
            meta += (
                "\n(problems with normalized regret: "
                + ", ".join(
                    sorted(
                        {r["problem"] for r in records if r.get("normalized_regret")}
                    )
                )
                + ")"
            )
        meta += "\n\n" + ranks if ranks else ""
        # per pool protocol (re-querying, then skipping queried points, where it ran)
        for reference, models, peers in (
            (NO_META, META_MODELS, META_PEERS),
            (NO_META_SKIPPING, META_MODELS_SKIPPING, META_PEERS_SKIPPING),
            (NO_META_SKIPPING_BETA1, META_MODELS_SKIPPING_BETA1, META_PEERS_SKIPPING),
        ):
            ratios = meta_cumulative_regret_ratio_table(records, reference)
            meta += "\n\n" + ratios if ratios else ""
            targets = meta_targets_table(
                records, models=models, reference=reference, peers=peers
            )
            meta += "\n\n" + targets if targets else ""
    records = [r for r in records if not _is_simple_regret(r)]
    groups = _group(records)
    if not groups and meta:
        return meta
    pw = max([len("problem")] + [len(p) for p, _ in groups])
    mw = max([len("method")] + [len(m) for _, m in groups])
    lines = [
        f"{'problem':<{pw}} {'method':<{mw}} {'runs':>4}"
        f" {'R_T (mean +- 95% CI)':>24} {'R_T/T':>8} {'s/iter':>8}"
        f" {'r_T (mean +- 95% CI)':>24}"
    ]
    lines.append("-" * len(lines[0]))
    for (problem, method), runs in sorted(groups.items()):
        T = min(len(r["cumulative_regret"]) for r in runs)
        cumulative = np.array([r["cumulative_regret"][:T] for r in runs])
        mean, ci = mean_ci(cumulative[:, -1:])
        # simple regret: the gap of the best of the T queries (Shilton et al.'s
        # Fig. 2 metric)
        instantaneous = np.diff(cumulative, axis=1, prepend=0.0)
        simple_mean, simple_ci = mean_ci(instantaneous.min(axis=1, keepdims=True))
        per_iter = np.mean([np.mean(r["iteration_s"]) for r in runs])
        lines.append(
            f"{problem:<{pw}} {method:<{mw}} {len(runs):>4}"
            f" {mean[0]:>14.3f} {_ci_cell(ci[0], len(runs), 7, 3)}"
            f" {mean[0] / T:>8.3f} {per_iter:>8.3f}"
            f" {simple_mean[0]:>14.4f} {_ci_cell(simple_ci[0], len(runs), 7, 4)}"
        )
    lines.append(
        "R_T: cumulative regret after the T iterations; r_T: simple regret (the gap "
        "of the best query); s/iter: seconds per iteration"
    )
    if any(len(runs) == 1 for runs in groups.values()):
        lines.append(SINGLE_RUN_NOTE)
    failures = [r for r in records if _failed(r)]
    if failures:
        lines.append(f"\n{len(failures)} run(s) failed, left out above:")
        lines += [f"  {_failure_line(r)}" for r in failures[:MAX_LISTED_FAILURES]]
        if len(failures) > MAX_LISTED_FAILURES:
            lines.append(
                f"  ... and {len(failures) - MAX_LISTED_FAILURES} more (see their "
                "'error' field in the results file)"
            )
    unknown = sorted({r["problem"] for r in records if _optimum_unknown(r)})
    inexact = sorted(
        {
            r["problem"]
            for r in records
            if "error" not in r and not r.get("optimum_is_exact", True)
        }
        - set(unknown)
    )
    if inexact:
        lines.append(
            f"Regret on {', '.join(inexact)} is against a dense-sample estimate "
            "of the optimum (raised to the best value any run found where a run "
            "beat it)."
        )
    if unknown:
        lines.append(
            f"Regret on {', '.join(unknown)} is against the best value any run "
            "found (optimum unknown)."
        )
    ratios = no_transfer_ratio_table(records)
    if ratios:
        lines += ["", ratios]
    ranks = average_rank_table(records)
    if ranks and len({r["problem"] for r in records if "error" not in r}) > 1:
        lines += ["", ranks]
    peers = peer_comparison_table(records)
    lines += ["", peers] if peers else []
    if GUARDED_LOOP in {r["method"] for r in records}:
        targets = transfer_targets_table(records)
        lines += ["", targets] if targets else []
    guards = guard_table(records)
    lines += ["", guards] if guards else []
    if meta:
        lines += [
            "",
            (
                "Meta-learning problems (simple regret r@t after t iterations, "
                "vs. the best of the candidate pool):"
            ),
            meta,
        ]
    return "\n".join(lines)


#: Failed runs the summary names one by one; the rest are counted.
MAX_LISTED_FAILURES = 10


def _failure_line(record: dict) -> str:
    r"""``"problem/method/seed N: <first line of the error>"`` of a failed run."""
    name = f"{record['problem']}/{record['method']}/seed {record['seed']}"
    if "error" in record:
        lines = str(record["error"]).strip().splitlines() or ["(no message)"]
        return f"{name}: {lines[0][:160]}"
    return f"{name}: non-finite (NaN or infinite) {non_finite_traces(record)}"


def regret_figure(records: list[dict], log_y: bool = False):
    r"""The regret plot of :func:`plot_regret` as a matplotlib ``Figure`` (close it
    with ``matplotlib.pyplot.close`` when done).

    Args:
        records: Run records (failed runs are skipped).
        log_y: Log-scale the regret axes.

    Returns:
        The figure: a column per problem; transfer problems show the cumulative
        regret ``R_t`` and the average regret ``R_t / t``, meta-learning problems
        the simple regret ``r_t`` (mean and 95% CI; median and 20-80th percentile).

    Raises:
        ValueError: If no run in ``records`` finished.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    groups = _group(records)
    if not groups:
        raise ValueError("`records` has no finished run to plot.")
    problems = sorted({p for p, _ in groups})
    # one color per method across all panels
    colors = {m: f"C{i % 10}" for i, m in enumerate(sorted({m for _, m in groups}))}
    fig, axes = plt.subplots(
        2, len(problems), figsize=(5 * len(problems), 7), squeeze=False
    )
    for col, problem in enumerate(problems):
        axes[0, col].set_title(problem)
        if all(
            _is_simple_regret(r)
            for m in {m for p, m in groups if p == problem}
            for r in groups[(problem, m)]
        ):
            _plot_simple_regret(
                axes[:, col],
                {m: runs for (p, m), runs in groups.items() if p == problem},
                colors,
            )
            continue
        for method in sorted({m for p, m in groups if p == problem}):
            runs = groups[(problem, method)]
            T = min(len(r["cumulative_regret"]) for r in runs)
            cum = np.array([r["cumulative_regret"][:T] for r in runs])
            t = np.arange(1, T + 1)
            for row, values in enumerate((cum, cum / t)):
                mean, ci = mean_ci(values)
                ax = axes[row, col]
                ax.plot(
                    t, mean, color=colors[method], label=f"{method} (n={len(runs)})"
                )
                ax.fill_between(
                    t, mean - ci, mean + ci, color=colors[method], alpha=0.2
                )
        axes[0, col].set_ylabel("cumulative regret $R_t$")
        axes[1, col].set_ylabel("average regret $R_t / t$")
        axes[1, col].set_xlabel("iteration $t$")
        axes[0, col].legend(fontsize=8)
    linear = []
    for ax in axes.flat:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # iterations count
        if not log_y:
            continue
        values = [np.asarray(line.get_ydata(), dtype=float) for line in ax.lines]
        if any((v > 0).any() for v in values):
            ax.set_yscale("log")  # bands below zero are clipped
        else:  # e.g. every run found the optimum at once: nothing to log-scale
            linear.append(ax.get_title() or ax.get_ylabel().splitlines()[0])
    if linear:
        warnings.warn(
            "`log_y`: kept a linear scale for the regret axes without a positive "
            f"value ({'; '.join(linear)}); a log scale cannot show them.",
            stacklevel=2,
        )
    fig.tight_layout()
    return fig


def plot_regret(
    records: list[dict], path: Path, log_y: bool = False, dpi: int = 120
) -> Path:
    r"""Write the regret plot (:func:`regret_figure`) to a PNG.

    Args:
        records: Run records (failed runs are skipped).
        path: Where to write the PNG.
        log_y: Log-scale the regret axes, so that methods whose regret differs by
            orders of magnitude (transfer methods next to random search) stay readable.
        dpi: Resolution of the PNG.

    Returns:
        ``path``.

    Raises:
        ValueError: If no run in ``records`` finished.
    """
    import matplotlib.pyplot as plt

    fig = regret_figure(records, log_y=log_y)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a reader (or an interrupted run) never sees half a PNG
    try:
        with atomic_write(path) as fh:
            fig.savefig(fh, dpi=dpi, format=path.suffix[1:] or "png")
    finally:
        plt.close(fig)
    return path


def _plot_simple_regret(
    axes, runs_by_method: dict[str, list[dict]], colors: dict[str, str]
) -> None:
    for method, runs in sorted(runs_by_method.items()):
        T = min(len(r["simple_regret"]) for r in runs)
        values = np.array([r["simple_regret"][:T] for r in runs])
        mean, ci = mean_ci(values)
        t = np.arange(T)
        axes[0].plot(t, mean, color=colors[method], label=f"{method} (n={len(runs)})")
        axes[0].fill_between(t, mean - ci, mean + ci, color=colors[method], alpha=0.2)
        # HyperBO Sec. 7.3: median and 20/80 percentiles over seeds, here on a log scale
        low, median, high = np.percentile(values, [20, 50, 80], axis=0)
        axes[1].plot(t, median, color=colors[method])
        axes[1].fill_between(t, low, high, color=colors[method], alpha=0.2)
    axes[0].set_ylabel(
        "simple regret $r_t$ (best so far)\nmean over test tasks, 95% CI"
    )
    axes[1].set_yscale("symlog", linthresh=1e-3)
    axes[1].set_ylabel(
        "simple regret $r_t$ (best so far)\nmedian, 20-80th percentile over seeds"
    )
    axes[1].set_xlabel("iteration $t$")
    axes[0].legend(fontsize=8)


def _transfer_acted(runs: list[dict]) -> tuple[float, float] | None:
    r"""Over the runs' iterations: the mean transfer weight and the share of
    iterations in which the transfer part had the larger weight (``None``: the
    method records no weight)."""
    weights = [
        w for r in runs for w in r.get("diagnostics", {}).get("transfer_weight", [])
    ]
    if not weights:
        return None
    w = np.asarray(weights, dtype=float)
    return float(w.mean()), float((w > 0.5).mean())


def real_track_table(
    records: list[dict],
    problems: list[str],
    recommended: str,
    reference: str = NO_TRANSFER,
    peers: tuple[str, ...] = PEERS,
    controls: tuple[str, ...] = (),
    rank_correlations: dict[str, float] | None = None,
) -> str:
    r"""The recommended model against the peers and the no-transfer GP on a set of
    problems, with its targets.

    Per problem: the mean final cumulative regret ``R_T`` of ``recommended`` as a
    ratio to ``reference``'s and to the better peer's, whether it is at or below the
    better peer (or inside that peer's 95% CI), and how much the transfer part acted
    (its mean weight, and the share of iterations in which it outweighed the
    target-only GP). Then the targets: at or below the better peer on at least 75% of
    the related problems with a geometric-mean ratio to it of at most 0.9; a
    geometric-mean ratio to ``reference`` of at most 0.6 on the related problems; at
    most 1.1x ``reference`` on every control.

    Args:
        records: Run records.
        problems: The problems to report (e.g. one half of the real track).
        recommended: The method held to the targets.
        reference: The no-transfer GP.
        peers: The methods a user would pick instead.
        controls: Which of ``problems`` are negative controls.
        rank_correlations: Per problem, the source-target rank correlation to show.

    Returns:
        The table and the targets, or ``""`` when no problem has runs of
        ``recommended`` and ``reference``.
    """
    finals = _final_cumulative_regret(records)
    groups = _group(records)
    rows, related_gp, related_peer, wins, control_misses = [], [], [], [], []
    controls_seen = 0
    for problem in problems:
        if (problem, recommended) not in finals or (problem, reference) not in finals:
            continue
        ours, ref = finals[(problem, recommended)], finals[(problem, reference)]
        ratio_gp = ours.mean() / ref.mean() if ref.mean() > 0 else math.inf
        peer_cells = {q: finals[(problem, q)] for q in peers if (problem, q) in finals}
        ratio_peer, at_or_below = math.nan, None
        if peer_cells:
            best = min(peer_cells, key=lambda q: peer_cells[q].mean())
            values = peer_cells[best]
            mean, ci = mean_ci(values[:, None])
            ratio_peer = ours.mean() / mean[0] if mean[0] > 0 else math.inf
            at_or_below = bool(ours.mean() <= mean[0] + ci[0])
        acted = _transfer_acted(groups[(problem, recommended)])
        control = problem in controls
        if control:
            controls_seen += 1
            if ratio_gp > 1.1:
                control_misses.append(f"{problem} ({ratio_gp:.2f}x)")
        else:
            related_gp.append(ratio_gp)
            if peer_cells:
                related_peer.append(ratio_peer)
                wins.append(at_or_below)
        rho = (rank_correlations or {}).get(problem)
        rows.append(
            (
                problem + (" (control)" if control else ""),
                "" if rho is None else f"{rho:.2f}",
                len(ours),
                f"{ratio_gp:.2f}",
                "" if math.isnan(ratio_peer) else f"{ratio_peer:.2f}",
                "" if at_or_below is None else ("yes" if at_or_below else "no"),
                "" if acted is None else f"{acted[0]:.2f} / {acted[1]:.0%}",
            )
        )
    if not rows:
        return ""
    header = (
        "problem",
        "rho",
        "seeds",
        f"vs {reference}",
        "vs better peer",
        "<= peer",
        "transfer weight / acted",
    )
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    lines = [
        f"{recommended}: R_T ratios (mean over seeds) to the no-transfer GP and to "
        f"the better of {', '.join(peers)}; rho: the source-target rank correlation",
        "  ".join(f"{h:<{w}}" for h, w in zip(header, widths)).rstrip(),
    ]
    lines += [
        "  ".join(f"{c!s:<{w}}" for c, w in zip(row, widths)).rstrip() for row in rows
    ]

    if wins:
        share = sum(wins) / len(wins)
        g = _geometric_mean(related_peer)
        lines.append(
            f"at or below the better peer (or inside its 95% CI) on {sum(wins)}/"
            f"{len(wins)} related problems ({share:.0%}); geometric-mean ratio to it "
            f"{g:.2f}"
        )
    if related_gp:
        g = _geometric_mean(related_gp)
        lines.append(
            f"geometric-mean ratio to {reference} on the related problems {g:.2f}"
        )
    if controls_seen:
        lines.append(
            f"controls at most 1.1x {reference}: "
            f"{controls_seen - len(control_misses)} of {controls_seen}"
            + (f" (above: {', '.join(control_misses)})" if control_misses else "")
        )
    return "\n".join(lines)


def real_track_half_table(records: list[dict], problems: list[str]) -> str:
    r""":func:`real_track_table` of the recommended model on those of ``problems``
    (one half of the real track) that have records, with their rank correlations
    and the real track's controls; ``""`` when none has records."""
    present = [p for p in problems if any(r["problem"] == p for r in records)]
    return real_track_table(
        records,
        present,
        RECOMMENDED,
        controls=REAL_CONTROLS,
        rank_correlations={p: pair_rank_correlation(p) for p in present},
    )


#: The real track's methods compared in :func:`real_track_methods_table`.
REAL_TRACK_METHODS = (RECOMMENDED, "mtgp", "rgpe", "random")


def real_track_methods_table(
    records: list[dict],
    problems: list[str],
    methods: tuple[str, ...] = REAL_TRACK_METHODS,
    reference: str = NO_TRANSFER,
) -> str:
    r"""Every method of a real-track half against the no-transfer GP: the
    geometric mean over the related pairs of the ratio of mean ``R_T`` to
    ``reference``'s, and the ratio on each control.

    Args:
        records: Run records.
        problems: The problems of the half.
        methods: The methods shown (those without records are left out).
        reference: The no-transfer GP.

    Returns:
        A markdown table, or ``""`` when ``reference`` has no records here.
    """
    finals = _final_cumulative_regret(records)
    present = [p for p in problems if (p, reference) in finals]
    related = [p for p in present if p not in REAL_CONTROLS]
    controls = [p for p in present if p in REAL_CONTROLS]
    rows = []
    for method in methods:
        if not any((p, method) in finals for p in present):
            continue

        def ratio(problem: str) -> float:
            ref = finals[(problem, reference)].mean()
            value = finals[(problem, method)].mean()
            return value / ref if ref > 0 else math.inf

        cells = [p for p in related if (p, method) in finals]
        geometric = _geometric_mean([ratio(p) for p in cells]) if cells else math.nan
        rows.append(
            [f"`{method}`", f"{geometric:.2f} ({len(cells)})"]
            + [f"{ratio(p):.2f}" if (p, method) in finals else "-" for p in controls]
        )
    if not rows:
        return ""
    header = ["method", "related pairs: geometric mean (pairs)"] + [
        f"`{p}`" for p in controls
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


#: The real track's methods under both acquisition protocols, in
#: :func:`real_track_protocols_table`: ``(method, acquisition, no-transfer GP)``.
REAL_TRACK_PROTOCOLS = (
    (RECOMMENDED, "UCB", NO_TRANSFER),
    ("rank-weighted-qlognei", "qLogNEI", "gp-qlognei-fitted"),
    ("rgpe", "UCB", NO_TRANSFER),
    ("rgpe-qlognei", "qLogNEI", "gp-qlognei-fitted"),
    ("mtgp", "UCB", NO_TRANSFER),
    ("mtgp-qlognei", "qLogNEI", "gp-qlognei-fitted"),
    ("gp-qlognei-fitted", "qLogNEI", NO_TRANSFER),
)


def real_track_protocols_table(
    records: list[dict],
    problems: list[str],
    protocols: tuple[tuple[str, str, str], ...] = REAL_TRACK_PROTOCOLS,
) -> str:
    r"""The real track's methods through two loops on the same seeds: UCB on the
    candidate grid (the track's protocol) and ``qLogNoisyExpectedImprovement`` with
    the target's points as ``X_baseline`` (a BoTorch user's loop). Each method's
    ratio of mean ``R_T`` to the no-transfer GP with the same acquisition (the
    geometric mean over the related pairs, and each control), on the seeds every
    method shown has run on every problem.

    Args:
        records: Run records.
        problems: The problems of the half.
        protocols: ``(method, acquisition, reference)`` rows; a row whose method or
            reference has no records is left out.

    Returns:
        A markdown table, or ``""`` when no row has records.
    """
    methods = {m for row in protocols for m in (row[0], row[2])}
    seeds_of: dict[str, set[int]] = {}
    for r in records:
        if r["problem"] in problems and r["method"] in methods and not _failed(r):
            seeds_of.setdefault(r["method"], set()).add(r["seed"])
    rows_present = [
        row for row in protocols if row[0] in seeds_of and row[2] in seeds_of
    ]
    if not rows_present:
        return ""
    shown = {m for row in rows_present for m in (row[0], row[2])}
    seeds = set.intersection(*(seeds_of[m] for m in shown))
    kept = [r for r in records if r["seed"] in seeds and r["method"] in shown]
    finals = _final_cumulative_regret(kept)
    present = [p for p in problems if all((p, m) in finals for m in shown)]
    related = [p for p in present if p not in REAL_CONTROLS]
    controls = [p for p in present if p in REAL_CONTROLS]

    def ratio(problem: str, method: str, reference: str) -> float:
        ref = finals[(problem, reference)].mean()
        return finals[(problem, method)].mean() / ref if ref > 0 else math.inf

    header = ["method", "acquisition", "vs", "related pairs: geometric mean"] + [
        f"`{p}`" for p in controls
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for method, acquisition, reference in rows_present:
        geometric = _geometric_mean([ratio(p, method, reference) for p in related])
        cells = [f"`{method}`", acquisition, f"`{reference}`", f"{geometric:.2f}"]
        cells += [f"{ratio(p, method, reference):.2f}" for p in controls]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        f"{len(seeds)} seeds ({_seed_range(seeds)}), {len(related)} related pairs, "
        f"{len(controls)} controls"
    )
    return "\n".join(lines)


def _seed_range(seeds: set[int]) -> str:
    ordered = sorted(seeds)
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"seeds {ordered[0]}-{ordered[-1]}"
    return "seeds " + ", ".join(map(str, ordered))


#: The default-settings track's models in :func:`transfer_track_table`: each
#: transfer model of the package with its defaults, the guarded loop, the peers and
#: random search.
TRANSFER_TRACK_METHODS = (
    GUARDED_LOOP,
    "deltabo-marginal-fitted",
    "envgp-fitted",
    "diffgp-fitted",
    "mtgp",
    "rgpe",
    "random",
)
#: The default-settings track's seeds on the results page (seeds 0 to 19).
TRANSFER_TRACK_SEEDS = 20


def transfer_track_table(
    records: list[dict],
    methods: tuple[str, ...] = TRANSFER_TRACK_METHODS,
    reference: str = NO_TRANSFER,
    peers: tuple[str, ...] = PEERS,
) -> str:
    r"""The default-settings track as a markdown table: per problem (with its
    :func:`problem_kind`) the seeds, ``reference``'s mean ``R_T`` and each method's
    mean ``R_T`` as a ratio to it; ``*`` marks a cell that misses transfer target 2
    (above ``reference`` on a related problem; beyond 10% and its 95% CI on a
    control). The last row is each method's average rank by mean ``R_T`` among the
    methods shown and ``reference``.

    Args:
        records: Run records of the default-settings track.
        methods: The methods shown.
        reference: The no-transfer GP.
        peers: The peers (their cells are marked as any other's).

    Returns:
        The table, or ``""`` when ``reference`` has no records.
    """
    finals = _final_cumulative_regret(
        [r for r in records if r["method"] in (*methods, reference)]
    )
    order = {"affine": 0, "identical": 1, "related": 2, "unhelpful": 3}
    problems = sorted(
        {p for p, m in finals if m == reference},
        key=lambda p: (order[problem_kind(p)], p),
    )
    shown = [m for m in methods if any((p, m) in finals for p in problems)]
    if not problems or not shown:
        return ""
    header = ["problem (kind)", "seeds", f"{reference} R_T"] + [f"`{m}`" for m in shown]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for problem in problems:
        ref = finals[(problem, reference)]
        kind = problem_kind(problem)
        cells = []
        for method in shown:
            if (problem, method) not in finals:
                cells.append("-")
                continue
            mean = finals[(problem, method)].mean()
            ratio = mean / ref.mean() if ref.mean() > 0 else math.inf
            miss = (
                mean > ref.mean()
                if kind == "related"
                else kind == "unhelpful" and not _near_reference(mean, ref)
            )
            cells.append(f"{ratio:.2f}" + ("*" if miss else ""))
        lines.append(
            f"| {problem} ({kind}) | {len(ref)} | {ref.mean():.3g} | "
            + " | ".join(cells)
            + " |"
        )
    ranks = _ranks_by_method(finals, problems)
    lines.append(
        f"| average rank (of {len(shown) + 1}) | | {np.mean(ranks[reference]):.2f} | "
        + " | ".join(f"{np.mean(ranks[m]):.2f}" for m in shown)
        + " |"
    )
    return "\n".join(lines)


def transfer_track_targets(records: list[dict]) -> str:
    r""":func:`transfer_targets_table` of the guarded loop on the default-settings
    track's problems that the no-transfer GP ran, among the methods of
    :func:`transfer_track_table`."""
    kept = (*TRANSFER_TRACK_METHODS, NO_TRANSFER)
    return transfer_targets_table([r for r in records if r["method"] in kept])


#: The meta track's methods on the results page, against the no-meta GP that
#: searches the same pool points (:data:`NO_META_SKIPPING`): the README loops of
#: PretrainedPriorGP and ClusterMetaPriorGP, the greedy portfolio, the RGPE peer and
#: random search.
META_TRACK_METHODS = (
    "hyperbo-clustered-ucb1-skip",
    "cmbo",
    "meta-task-mixture-ucb1-skip",
    "portfolio-skip",
    "rgpe-meta-skip",
    "random",
)
#: The meta-learning loops held to the meta-learning target: the README's
#: ``PretrainedPriorGP`` and ``ClusterMetaPriorGP`` loops and ``MetaTaskMixtureGP``'s.
META_TARGET_LOOPS = (
    "hyperbo-clustered-ucb1-skip",
    "cmbo",
    "meta-task-mixture-ucb1-skip",
)


def meta_track_table(records: list[dict]) -> str:
    r"""The meta track on the results page: :func:`meta_cumulative_regret_ratio_table`
    of :data:`META_TRACK_METHODS` against :data:`NO_META_SKIPPING`, then the
    :func:`meta_targets_table` of :data:`META_TARGET_LOOPS`."""
    kept = [
        r for r in records if r["method"] in (*META_TRACK_METHODS, NO_META_SKIPPING)
    ]
    ratios = meta_cumulative_regret_ratio_table(kept, NO_META_SKIPPING)
    targets = meta_targets_table(
        kept,
        models=META_TARGET_LOOPS,
        reference=NO_META_SKIPPING,
        peers=META_PEERS_SKIPPING,
    )
    return "\n\n".join(t for t in (ratios, targets) if t)


def cost_table(records: list[dict], reference: str = NO_TRANSFER) -> str:
    r"""Seconds per BO iteration (model fit and acquisition) per method: the median
    over runs of each run's mean, and its ratio to ``reference``'s.

    Args:
        records: Transfer run records (failed runs are left out).
        reference: The method the ratio is taken against.

    Returns:
        A markdown table, or ``""`` without finished runs.
    """
    seconds = seconds_per_iteration(
        [r for r in records if not _is_simple_regret(r)], lambda r: r["method"]
    )
    if not seconds:
        return ""
    ref = seconds[reference][0] if reference in seconds else None
    lines = [
        f"| method | runs | s/iter (median) | vs `{reference}` |",
        "|---|---|---|---|",
    ]
    for method in sorted(seconds, key=lambda m: (seconds[m][0], m)):
        median, runs = seconds[method]
        ratio = f"{median / ref:.2f}" if ref else "-"
        lines.append(f"| `{method}` | {runs} | {median:.3f} | {ratio} |")
    return "\n".join(lines)


#: The methods of the Ax comparison's table, in column order.
AX_METHODS = ("MultiTaskGP", "DeltaBOModel", "EnvGP", "DiffGP", "RGPE")


def ax_track_table(path: Path, baseline: str = "MultiTaskGP") -> str:
    r"""The Ax comparison (:mod:`~benchmarks.ax_transfer`'s per-trial
    CSV) as a markdown table: per problem and method, the mean over seeds of the
    cumulative regret (the sum over trials of the simple regret), its standard error
    and the ratio of the means to ``baseline``'s.

    Args:
        path: The CSV (columns ``problem, method, seed, trial, regret``).
        baseline: The method of the ratios.

    Returns:
        The table, or ``""`` for a CSV without rows.
    """
    import csv

    sums: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            seeds = sums[(row["problem"], row["method"])]
            seed = int(row["seed"])
            seeds[seed] = seeds.get(seed, 0.0) + float(row["regret"])
    if not sums:
        return ""
    methods = [m for m in AX_METHODS if any(m == k[1] for k in sums)]
    methods += sorted({m for _, m in sums} - set(methods))
    problems = list(dict.fromkeys(p for p, _ in sums))
    lines = [
        "| problem | " + " | ".join(f"`{m}`" for m in methods) + " |",
        "|" + "---|" * (len(methods) + 1),
    ]
    for problem in problems:
        base = sums.get((problem, baseline))
        base_mean = float(np.mean(list(base.values()))) if base else None
        cells = []
        for method in methods:
            values = np.array(list(sums.get((problem, method), {}).values()))
            if not len(values):
                cells.append("-")
                continue
            se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0.0
            cell = f"{values.mean():.2f} ({se:.2f})"
            if base_mean and method != baseline:
                cell += f" {values.mean() / base_mean:.2f}"
            cells.append(cell)
        lines.append(f"| {problem} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: The committed records next to this module, by track.
RECORDS_DIR = Path(__file__).parent


def committed_records(track: str) -> list[dict]:
    r"""The committed records of a track (``"real"``, ``"default"``, ``"meta"``:
    ``<track>_track_records.jsonl.gz`` next to this module), with regret filled in
    (:func:`with_regret`)."""
    records, skipped = read_results(RECORDS_DIR / f"{track}_track_records.jsonl.gz")
    if skipped:
        raise ValueError(f"unreadable lines in the {track} track's records: {skipped}")
    return with_regret(records)


def results_page_table(name: str) -> str:
    r"""A table of ``RESULTS.md``, from the committed records: ``python -m
    benchmarks.report NAME`` prints it.

    Args:
        name: ``"real-methods"`` (:func:`real_track_methods_table`, confirmation
            half), ``"real-protocols"`` (:func:`real_track_protocols_table`,
            confirmation half), ``"transfer"`` (:func:`transfer_track_table`,
            seeds 0-19),
            ``"transfer-targets"`` (:func:`transfer_track_targets`, seeds 0-19),
            ``"ax"`` (:func:`ax_track_table` of ``ax_transfer_20seeds.csv``),
            ``"meta"`` (:func:`meta_track_table`) or ``"cost"`` (:func:`cost_table`
            of the real track).
    """
    if name not in RESULTS_PAGE_TABLES:
        raise ValueError(
            f"unknown table {name!r}; choose from {', '.join(RESULTS_PAGE_TABLES)}"
        )
    if name in ("real-methods", "real-protocols", "cost"):
        records = committed_records("real")
        if name == "cost":
            return cost_table(records)
        if name == "real-protocols":
            return real_track_protocols_table(records, list(CONFIRMATION))
        return real_track_methods_table(records, list(CONFIRMATION))
    if name == "meta":
        return meta_track_table(committed_records("meta"))
    if name == "ax":
        return ax_track_table(RECORDS_DIR / "ax_transfer_20seeds.csv")
    records = [
        r for r in committed_records("default") if r["seed"] < TRANSFER_TRACK_SEEDS
    ]
    if name == "transfer":
        return transfer_track_table(records)
    return transfer_track_targets(records)


#: The names :func:`results_page_table` takes.
RESULTS_PAGE_TABLES = (
    "real-methods",
    "real-protocols",
    "transfer",
    "transfer-targets",
    "ax",
    "meta",
    "cost",
)


def main(argv: list[str] | None = None) -> None:
    r"""Command line: ``python -m benchmarks.report NAME`` prints a
    results-page table (:func:`results_page_table`) from the committed records."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.report",
        description="print a table of RESULTS.md from the committed records",
    )
    parser.add_argument("name", choices=RESULTS_PAGE_TABLES)
    print(results_page_table(parser.parse_args(argv).name))


if __name__ == "__main__":  # pragma: no cover
    main()
