r"""Tables of the transfer tracks: ratios to the no-transfer GP, ranks against the
peers, the guard, the targets, the default-settings track and the Ax track."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from benchmarks.regret_tables import (
    average_ranks,
    geometric_mean,
    group_runs,
    is_simple_regret,
    mean_ci,
)
from botorch_transfer.test_functions.hpo_pairs import UNHELPFUL_PAIRS

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
    finals = final_cumulative_regret(records)
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


def final_cumulative_regret(records: list[dict]) -> dict[tuple[str, str], np.ndarray]:
    r"""Per (problem, method): each run's R_T at the group's shortest horizon."""
    finals = {}
    for key, runs in group_runs(
        [r for r in records if not is_simple_regret(r)]
    ).items():
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
        for method, rank in zip(methods, average_ranks(means)[:, 0]):
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
    finals = final_cumulative_regret(records)
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
    finals = final_cumulative_regret(records)
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
    finals = final_cumulative_regret(records)
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
        geometric = geometric_mean(ratios)
        lines.append(
            f"4. a real gain: mean ratio to {reference} over {len(gains)} related "
            f"problems {average:.2f} (geometric {geometric:.2f}; goal <= 0.70: "
            f"{'met' if average <= 0.7 else 'MISSED'})"
        )
    return "\n".join(lines)


def seed_range(seeds: set[int]) -> str:
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
    finals = final_cumulative_regret(
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
