r"""Tables of the meta track: cumulative regret against the no-meta loops, seed
bootstrap intervals and the targets."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable

import numpy as np

from benchmarks.regret_tables import failed_run, group_runs, is_simple_regret

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
    groups = group_runs([r for r in records if is_simple_regret(r) and r.get("tasks")])
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
            [r for r in records if is_simple_regret(r)],
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
        if not failed_run(r) and r.get("iteration_s"):
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
