r"""The summary of a benchmark run and its regret plots: what ``python -m
benchmarks run`` prints and draws."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from benchmarks.meta_tables import (
    META_MODELS,
    META_MODELS_SKIPPING,
    META_MODELS_SKIPPING_BETA1,
    META_PEERS,
    META_PEERS_SKIPPING,
    NO_META,
    NO_META_SKIPPING,
    NO_META_SKIPPING_BETA1,
    meta_cumulative_regret_ratio_table,
    meta_targets_table,
)
from benchmarks.regret_tables import (
    SINGLE_RUN_NOTE,
    ci_cell,
    failed_run,
    group_runs,
    is_simple_regret,
    mean_ci,
    optimum_unknown,
    rank_solved_table,
    simple_regret_table,
)
from benchmarks.results_io import non_finite_traces
from benchmarks.transfer_tables import (
    GUARDED_LOOP,
    average_rank_table,
    guard_table,
    no_transfer_ratio_table,
    peer_comparison_table,
    transfer_targets_table,
)
from botorch_transfer._io import atomic_write


def summary_table(records: list[dict]) -> str:
    r"""Method x problem table: final cumulative regret R_T (mean +- 95% CI),
    time/iteration and simple regret r_T (the gap of the best query); meta-learning
    problems get :func:`simple_regret_table` below it."""
    meta = simple_regret_table(records)
    if meta:
        ranks = rank_solved_table(records)
        if any(r.get("normalized_regret") for r in records if is_simple_regret(r)):
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
    records = [r for r in records if not is_simple_regret(r)]
    groups = group_runs(records)
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
            f" {mean[0]:>14.3f} {ci_cell(ci[0], len(runs), 7, 3)}"
            f" {mean[0] / T:>8.3f} {per_iter:>8.3f}"
            f" {simple_mean[0]:>14.4f} {ci_cell(simple_ci[0], len(runs), 7, 4)}"
        )
    lines.append(
        "R_T: cumulative regret after the T iterations; r_T: simple regret (the gap "
        "of the best query); s/iter: seconds per iteration"
    )
    if any(len(runs) == 1 for runs in groups.values()):
        lines.append(SINGLE_RUN_NOTE)
    failures = [r for r in records if failed_run(r)]
    if failures:
        lines.append(f"\n{len(failures)} run(s) failed, left out above:")
        lines += [f"  {_failure_line(r)}" for r in failures[:MAX_LISTED_FAILURES]]
        if len(failures) > MAX_LISTED_FAILURES:
            lines.append(
                f"  ... and {len(failures) - MAX_LISTED_FAILURES} more (see their "
                "'error' field in the results file)"
            )
    unknown = sorted({r["problem"] for r in records if optimum_unknown(r)})
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

    groups = group_runs(records)
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
            is_simple_regret(r)
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
