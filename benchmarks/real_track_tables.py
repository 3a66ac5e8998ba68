r"""Tables of the real tracks (one source, several sources, a source on other
parameters): the recommended model against its peers, through a user's loop, on
each half, and the cost per iteration."""

from __future__ import annotations

import math

import numpy as np

from benchmarks.meta_tables import seconds_per_iteration
from benchmarks.regret_tables import (
    failed_run,
    geometric_mean,
    group_runs,
    is_simple_regret,
    mean_ci,
)
from benchmarks.transfer_tables import (
    NO_TRANSFER,
    PEERS,
    RECOMMENDED,
    final_cumulative_regret,
    seed_range,
)
from botorch_transfer.test_functions.real_heterogeneous import (
    HETERO_CONTROLS,
    HETERO_PAIRS,
    hetero_rank_correlation,
)
from botorch_transfer.test_functions.real_multi import (
    MULTI_SOURCE_CONTROLS,
    multi_source_rank_correlations,
)
from botorch_transfer.test_functions.real_pairs import (
    REAL_CONTROLS,
    pair_rank_correlation,
)


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
        unit: What a related problem is called in the header.
        rank_correlations: Per problem, the source-target rank correlation to show.

    Returns:
        The table and the targets, or ``""`` when no problem has runs of
        ``recommended`` and ``reference``.
    """
    finals = final_cumulative_regret(records)
    groups = group_runs(records)
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
        g = geometric_mean(related_peer)
        lines.append(
            f"at or below the better peer (or inside its 95% CI) on {sum(wins)}/"
            f"{len(wins)} related problems ({share:.0%}); geometric-mean ratio to it "
            f"{g:.2f}"
        )
    if related_gp:
        g = geometric_mean(related_gp)
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
    controls: tuple[str, ...] = REAL_CONTROLS,
    unit: str = "pairs",
) -> str:
    r"""Every method of a real-track half against the no-transfer GP: the
    geometric mean over the related pairs of the ratio of mean ``R_T`` to
    ``reference``'s, and the ratio on each control.

    Args:
        records: Run records.
        problems: The problems of the half.
        methods: The methods shown (those without records are left out).
        reference: The no-transfer GP.
        controls: Which of ``problems`` are negative controls.

    Returns:
        A markdown table, or ``""`` when ``reference`` has no records here.
    """
    finals = final_cumulative_regret(records)
    present = [p for p in problems if (p, reference) in finals]
    related = [p for p in present if p not in controls]
    shown_controls = [p for p in present if p in controls]
    rows = []
    for method in methods:
        if not any((p, method) in finals for p in present):
            continue

        def ratio(problem: str) -> float:
            ref = finals[(problem, reference)].mean()
            value = finals[(problem, method)].mean()
            return value / ref if ref > 0 else math.inf

        cells = [p for p in related if (p, method) in finals]
        geometric = geometric_mean([ratio(p) for p in cells]) if cells else math.nan
        rows.append(
            [f"`{method}`", f"{geometric:.2f} ({len(cells)})"]
            + [
                f"{ratio(p):.2f}" if (p, method) in finals else "-"
                for p in shown_controls
            ]
        )
    if not rows:
        return ""
    header = ["method", f"related {unit}: geometric mean ({unit})"] + [
        f"`{p}`" for p in shown_controls
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
        if r["problem"] in problems and r["method"] in methods and not failed_run(r):
            seeds_of.setdefault(r["method"], set()).add(r["seed"])
    rows_present = [
        row for row in protocols if row[0] in seeds_of and row[2] in seeds_of
    ]
    if not rows_present:
        return ""
    shown = {m for row in rows_present for m in (row[0], row[2])}
    seeds = set.intersection(*(seeds_of[m] for m in shown))
    kept = [r for r in records if r["seed"] in seeds and r["method"] in shown]
    finals = final_cumulative_regret(kept)
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
        geometric = geometric_mean([ratio(p, method, reference) for p in related])
        cells = [f"`{method}`", acquisition, f"`{reference}`", f"{geometric:.2f}"]
        cells += [f"{ratio(p, method, reference):.2f}" for p in controls]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        f"{len(seeds)} seeds ({seed_range(seeds)}), {len(related)} related pairs, "
        f"{len(controls)} controls"
    )
    return "\n".join(lines)


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
        [r for r in records if not is_simple_regret(r)], lambda r: r["method"]
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


#: The peers of the multi-source track: the models a user would pick for several
#: past experiments.
MULTI_PEERS = ("mtgp", "rgpe", "meta-task-mixture")
#: The multi-source track's methods compared in :func:`multi_track_tables`.
MULTI_TRACK_METHODS = (RECOMMENDED, "rgpe", "meta-task-mixture", "mtgp", "random")


def multi_track_tables(records: list[dict], problems: list[str]) -> str:
    r"""The multi-source track's half ``problems``: every method against the
    no-transfer GP (:func:`real_track_methods_table`), then the recommended model
    against the better of the peers that take several sources
    (:func:`real_track_table`; rho: the most related source's rank correlation with
    the target)."""
    present = [p for p in problems if any(r["problem"] == p for r in records)]
    methods = real_track_methods_table(
        records,
        present,
        MULTI_TRACK_METHODS,
        controls=MULTI_SOURCE_CONTROLS,
        unit="problems",
    )
    versus_peers = real_track_table(
        records,
        present,
        RECOMMENDED,
        peers=MULTI_PEERS,
        controls=MULTI_SOURCE_CONTROLS,
        rank_correlations={
            p: max(multi_source_rank_correlations(p).values()) for p in present
        },
    )
    return f"{methods}\n\n```\n{versus_peers}\n```" if methods else ""


#: The peers of the heterogeneous track: the models that take a source on other
#: parameters (or filled onto the target's).
HETERO_PEERS = ("hetero-mtgp", "mtgp-filled", "mtgp-imputed")
#: The recommended model on the source mapped with what the user knows.
HETERO_RECOMMENDED = "rank-weighted-aligned"
#: The heterogeneous track's methods compared in :func:`hetero_track_tables`.
HETERO_TRACK_METHODS = (
    HETERO_RECOMMENDED,
    "rank-weighted-ignored",
    *HETERO_PEERS,
    "random",
)


def hetero_track_tables(records: list[dict], problems: list[str]) -> str:
    r"""The heterogeneous track's half ``problems``: every method against the
    no-transfer GP (:func:`real_track_methods_table`), then the recommended model
    on the aligned source against the better peer (:func:`real_track_table`; rho:
    the rank correlation on the points both tasks ran), its ratio to the
    no-transfer GP where the source's fixed values are known (the ``lacks``
    pairs), and the cost per iteration (:func:`cost_table`)."""
    present = [p for p in problems if any(r["problem"] == p for r in records)]
    methods = real_track_methods_table(
        records,
        present,
        HETERO_TRACK_METHODS,
        controls=HETERO_CONTROLS,
        unit="problems",
    )
    versus_peers = real_track_table(
        records,
        present,
        HETERO_RECOMMENDED,
        peers=HETERO_PEERS,
        controls=HETERO_CONTROLS,
        rank_correlations={p: hetero_rank_correlation(p) for p in present},
    )
    finals = final_cumulative_regret(records)
    known = [
        finals[(p, HETERO_RECOMMENDED)].mean() / finals[(p, NO_TRANSFER)].mean()
        for p in present
        if HETERO_PAIRS[p].kind == "lacks"
        and p not in HETERO_CONTROLS
        and (p, HETERO_RECOMMENDED) in finals
        and (p, NO_TRANSFER) in finals
    ]
    if known:
        versus_peers += (
            f"\nwhere the source's fixed values are known ({len(known)} "
            f"problem{'s' if len(known) > 1 else ''}): "
            f"geometric-mean ratio to {NO_TRANSFER} {geometric_mean(known):.2f}"
        )
    if not methods:
        return ""
    cost = cost_table([r for r in records if r["problem"] in present])
    return f"{methods}\n\n```\n{versus_peers}\n```\n\n{cost}"
