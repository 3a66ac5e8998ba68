r"""Per-iteration cost of registered benchmark methods as the source grows.

Every method is resolved by name in the benchmark registry
(:mod:`~benchmarks.methods`) and runs exactly as the transfer
protocol runs it: ``setup`` once (e.g. the source posterior of ``deltabo-fitted``;
timed separately), then one ``propose`` per BO iteration (build the model, fit its
hyperparameters, maximize the acquisition), on a synthetic source/target pair on
``[0, 1]^d`` with T=30 target points. The defaults compare, side by side in one
run (each configuration in its own process, median over iterations):

- ``gp-ucb-fitted``: ``SingleTaskGP`` on the T target points;
- ``deltabo-fitted``: ``DeltaBOModel`` on the frozen source posterior (the paper's
  identity map; ``deltabo-marginal-fitted`` times the class default);
- ``deltabo-fitted-source-gp``: ``DeltaBOModel`` given the fitted source GP itself
  every iteration (its posterior is cached per model);
- ``pooled-gp-fitted``: ``SingleTaskGP`` on the N + T pooled points;
- ``envgp-fitted`` / ``diffgp-fitted``: ``EnvGP`` / ``DiffGP`` (an (N+T)-sized GP;
  DiffGP also re-derives its source correction, O(N^3));
- ``envgp-fitted-low-rank`` / ``diffgp-fitted-low-rank``: the same with FITC
  inference (``inference="low_rank"``, 256 source inducing points).

A model trained on more than ``--max-fit-n`` points is not re-fitted every
iteration (an exact fit is O(n^3) per optimizer step): its hyperparameters are
fitted once with a 1000-point source subset and loaded, marked ``*`` in the table,
and it runs ``--large-n-iterations`` iterations; unless its kernel is frozen (the
``*-source-kernel-*`` methods: the fit moves the transfer parameters only).

With ``--stage1`` it times cm-BO's Stage 1 instead (the meta-task GPs of
:func:`~botorch_transfer.priors.fit_meta_task_gps`): ``--stage1-tasks`` meta-tasks
of ``--stage1-points`` points on shared inputs, the batched fit against the per-task
loop (``batched=False``, optionally on the first ``--stage1-loop-tasks`` tasks only and
scaled up linearly), each in its own single-threaded process; with ``--stage2``
its Stage 2 (:func:`~botorch_transfer.build_cluster_prior` on the fitted posteriors:
k-means restarts for every candidate ``C`` and the silhouette) against one pairwise
2-Wasserstein matrix of the same posteriors.

Run: ``python -m benchmarks.timing [--methods ...] [--dims 2 8]
[--sizes 400 2000 10000]`` or ``python -m benchmarks.timing --stage1
[--stage1-tasks 100] [--stage1-points 50] [--dims 4]`` or, for HyperBO's
pre-training (the default prior against NLL pre-training with the meta track's
budget, on the same kind of meta-data, with each prior's NLL on held-out tasks),
``python -m benchmarks.timing --pretrain --stage1-tasks 34
--stage1-points 100 --dims 7``.

``python -m benchmarks.timing --targets`` measures every cost target
of the package in one run and prints each with its goal: the recommended
``RankWeightedTransferGP`` against the target-only GP with one source of 200 and of
2,000 points and with five sources of 200 (``--recommended`` measures these
alone), DeltaBO against the
target-only GP at ``--target-n`` source points (both rebuild paths) and at
``--large-n`` (construction time, peak memory, per iteration; the source posterior's
error against the exact one on an ``--error-n``-point subsample), the low-rank
EnvGP/DiffGP against DeltaBO at ``--pooled-n``, cm-BO's Stage 1, and HyperBO's default
pre-training (time, and its held-out NLL against ``--pretrain-steps`` of NLL
pre-training). Each ratio is the median of ``--repeats`` runs of its baseline and
its methods side by side (the range is printed with it): on a shared machine the
speed drifts between runs. Under each DeltaBO ratio it prints where the iterations go
(:func:`~benchmarks.timing_runs.run_breakdown`: evaluations of the marginal
likelihood and of the acquisition, and the cost of each) and the ratio the step
counts alone would give (:func:`~benchmarks.timing_runs.at_baseline_cost`).
"""

from __future__ import annotations

import argparse
import statistics
from functools import partial

from benchmarks.context import (
    parse_device,
)
from benchmarks.methods import (
    TRANSFER,
    available_methods,
)
from benchmarks.source_error import source_posterior_error
from benchmarks.timing_meta import (
    main_pretrain,
    main_stage1,
    main_stage2,
    print_header,
    run_pretrain,
    run_stage1,
)
from benchmarks.timing_runs import (
    METHODS,
    SUBSET_N,
    at_baseline_cost,
    config_in_process,
    in_process,
    run_breakdown,
)


def _source_error_on_subsample(n_source: int, dim: int, rank: int) -> dict:
    rows = source_posterior_error(n_source, dim, [rank])
    return next(r for r in rows if r["mean"] == "dtc")


def _report(
    rows: list[dict],
    what: str,
    value: float | list[float],
    goal: float,
    unit: str = "x",
) -> None:
    r"""Print one cost target's line (a list: one value per repeat, reported by its
    median and range) and append its row to ``rows``."""
    values = value if isinstance(value, list) else [value]
    value = statistics.median(values)
    met = "yes" if value <= goal else "no"
    spread = (
        f"  ({min(values):.2f}-{max(values):.2f}, {len(values)} repeats)"
        if len(values) > 1
        else ""
    )
    print(
        f"{what:<72} {value:>9.2f}{unit:<2} {'<= ' + f'{goal:g}':>9} {met:>4}{spread}",
        flush=True,
    )
    rows.append(
        {
            "target": what,
            "value": value,
            "goal": goal,
            "met": met == "yes",
            "repeats": values,
        }
    )


def _side_by_side(
    args: argparse.Namespace,
    baseline: str,
    methods: list[str],
    dim: int,
    n: int,
    n_sources: int = 1,
) -> tuple[dict[str, list[float]], dict[str, list[dict]]]:
    r"""Per-iteration ratios of ``methods`` to ``baseline`` (every model re-fitted
    every iteration, as in a BO loop): the baseline and then each method,
    ``--repeats`` times. A ratio takes its numerator and denominator from the same
    repeat, so that a slow spell of the machine does not land on one side only."""
    ratios: dict[str, list[float]] = {m: [] for m in methods}
    results: dict[str, list[dict]] = {m: [] for m in methods}
    for _ in range(args.repeats):
        base = config_in_process(args, baseline, dim, n, 10**9, n_sources)
        for method in methods:
            result = config_in_process(args, method, dim, n, 10**9, n_sources)
            ratios[method].append(result["iteration_s"] / base["iteration_s"])
            results[method].append(result)
    return ratios, results


def recommended_configurations(args: argparse.Namespace) -> list[tuple[int, int]]:
    r"""The recommended model's cost targets as ``(sources, points per source)``:
    one source of each of ``--recommended-n``, and ``--recommended-sources`` of the
    first (defaults: one of 200, one of 2,000, five of 200)."""
    sizes = args.recommended_n
    return [(1, n) for n in sizes] + [(args.recommended_sources, sizes[0])]


def recommended_targets(args: argparse.Namespace, rows: list[dict]) -> None:
    r"""``RankWeightedTransferGP`` (``rank-weighted``) against the target-only GP per
    iteration, in each of :func:`recommended_configurations`, at d=4. The source GPs
    are fitted in the first iteration and kept (its time is printed apart)."""
    dim = 4
    for n_sources, n in recommended_configurations(args):
        ratios, results = _side_by_side(
            args, "gp-ucb-fitted", ["rank-weighted"], dim, n, n_sources
        )
        label = f"{n_sources} source{'s' if n_sources > 1 else ''} of {n}"
        _report(
            rows,
            f"RankWeightedTransferGP/target-only per iteration, {label}, d={dim}",
            ratios["rank-weighted"],
            3.0,
        )
        first = [r["first_iteration_s"] for r in results["rank-weighted"]]
        print(
            f"  first iteration (fits the source GPs): "
            f"{statistics.median(first):.2f} s",
            flush=True,
        )


def main_targets(args: argparse.Namespace) -> list[dict]:
    r"""The ``--targets`` table: every cost target of the package, measured in
    this run, each configuration in its own process, with its ratio and goal."""
    rows: list[dict] = []
    report = partial(_report, rows)
    side_by_side = partial(_side_by_side, args)

    def breakdown(dim: int, n: int) -> None:
        # where DeltaBO's extra time goes: more optimizer steps, or dearer ones
        base, delta = (
            in_process(
                run_breakdown,
                method,
                dim,
                n,
                args.iterations + 1,
                args.seed,
                str(args.device),
            )
            for method in ("gp-ucb-fitted", "deltabo-fitted")
        )
        for row in (base, delta):
            print(
                f"  {row['method']:<15} fit {row['fit_evaluations']:>4.0f} "
                f"evaluations x {1e3 * row['fit_s'] / row['fit_evaluations']:.2f} ms,"
                f" acquisition {row['acquisition_evaluations']:>3.0f} evaluations x "
                f"{1e3 * row['acquisition_s'] / row['acquisition_evaluations']:.2f}"
                f" ms; iteration {row['iteration_s']:.3f} s"
            )
        floor = at_baseline_cost(delta, base)
        print(
            f"  deltabo-fitted/target-only at the target-only GP's cost per "
            f"evaluation (the step counts alone): {floor:.2f}x"
        )
        rows.append(
            {
                "target": f"DeltaBO breakdown N={n}, d={dim}",
                "baseline": base,
                "deltabo": delta,
                "at_baseline_cost": floor,
            }
        )

    print(f"{'target':<72} {'measured':>11} {'goal':>9} {'met':>4}")
    recommended_targets(args, rows)
    n, d = args.target_n, 4
    paths = {
        "deltabo-fitted": "frozen source",
        "deltabo-fitted-source-gp": "source GP again",
        # the class default: the source's scale and offset
        # integrated out (a rank-2 update of the source block)
        "deltabo-marginal-fitted": "frozen source, default source map",
    }
    ratios, _ = side_by_side("gp-ucb-fitted", list(paths), d, n)
    for method, path in paths.items():
        report(
            f"DeltaBO/target-only per iteration, N={n}, d={d}, {path}",
            ratios[method],
            1.5,
        )
    breakdown(d, n)
    n, d = args.large_n, 8
    ratios, results = side_by_side("gp-ucb-fitted", ["deltabo-fitted"], d, n)
    large = results["deltabo-fitted"]
    report(
        f"DeltaBO N={n}, d={d}: construction (s)",
        [r["setup_s"] for r in large],
        60,
        "s",
    )
    report(
        f"DeltaBO N={n}, d={d}: peak memory (GB)",
        [r["peak_rss_mb"] / 1024 for r in large],
        4,
        "GB",
    )
    report(
        f"DeltaBO/target-only per iteration, N={n}, d={d}",
        ratios["deltabo-fitted"],
        2.0,
    )
    breakdown(d, n)
    error = in_process(_source_error_on_subsample, args.error_n, d, 1000)
    print(
        f"  source posterior on a {args.error_n}-point subsample (rank {error['rank']},"
        f" DTC mean): mean error max {error['mean_max']:.2e} (outcome sd), sd error "
        f"max {error['sd_rel_max']:.2e} (relative)"
    )
    rows.append({"target": "source posterior error", **error})
    n, d = args.pooled_n, 4
    pooled = [
        "envgp-fitted-low-rank",  # the kernel fitted with the rest every iteration
        "diffgp-fitted-low-rank",
        "envgp-source-kernel-low-rank",  # the kernel fitted once on the source
        "diffgp-source-kernel-low-rank",
    ]
    ratios, _ = side_by_side("deltabo-fitted", pooled, d, n)
    for method in pooled:
        report(f"{method}/DeltaBO per iteration, N={n}, d={d}", ratios[method], 5.0)
    stage1 = in_process(
        run_stage1, args.stage1_tasks, args.stage1_points, 4, True, args.seed
    )
    report(
        f"cm-BO stage 1, {args.stage1_tasks} tasks x {args.stage1_points} points, "
        "d=4 (s)",
        stage1["fit_s"],
        15,
        "s",
    )
    tasks, points = args.pretrain_tasks, args.pretrain_points
    default = in_process(run_pretrain, tasks, points, 7, None, 0, args.seed)
    long_run = in_process(
        run_pretrain,
        tasks,
        points,
        7,
        args.pretrain_objective,
        args.pretrain_steps,
        args.seed,
    )
    report(
        f"HyperBO pre-training, {tasks} tasks x {points} points, d=7 (s)",
        default["fit_s"],
        60,
        "s",
    )
    report(
        f"HyperBO held-out NLL/point minus {args.pretrain_steps}-step "
        f"{args.pretrain_objective} run's",
        default["heldout_nll"] - long_run["heldout_nll"],
        0.05,
        "",
    )
    return rows


#: Methods of the ``--scaling`` sweep, and the exact pooled ones among them (an
#: ``(N + T)``-sized Cholesky even with frozen hyperparameters: skipped above
#: ``--max-exact-n``).
SCALING_METHODS = (
    "gp-ucb-fitted",
    "deltabo-fitted",
    "deltabo-fitted-source-gp",
    "envgp-fitted",
    "diffgp-fitted",
    "envgp-fitted-low-rank",
    "diffgp-fitted-low-rank",
    "envgp-source-kernel-low-rank",
    "diffgp-source-kernel-low-rank",
    "mtgp",
)
EXACT_POOLED = ("envgp-fitted", "diffgp-fitted", "mtgp", "pooled-gp-fitted")


def main_scaling(args: argparse.Namespace) -> list[dict]:
    r"""The ``--scaling`` sweep: seconds per iteration and peak memory against ``N``
    for each method (``d`` = the first of ``--dims``), as a table and a plot."""
    dim = args.dims[0]
    methods = list(dict.fromkeys(args.methods or SCALING_METHODS))
    print(f"d={dim}; * hyperparameters fitted once on {SUBSET_N} source points")
    print(f"{'method':<26} {'N':>7} {'s/iteration':>12} {'peak MB':>9}")
    rows = []
    for method in methods:
        for n in args.sizes:
            if method in EXACT_POOLED and n > args.max_exact_n:
                print(f"{method:<26} {n:>7} {'skipped':>12}", flush=True)
                continue
            row = config_in_process(args, method, dim, n)
            rows.append(row)
            mark = "" if row["refit"] else "*"
            print(
                f"{method:<26} {n:>7} {row['iteration_s']:>11.2f}{mark:1} "
                f"{row['peak_rss_mb']:>9.0f}",
                flush=True,
            )
    if args.plot:
        plot_scaling(rows, args.plot)
        print(f"scaling plot written to {args.plot}")
    return rows


def plot_scaling(rows: list[dict], path: str) -> None:
    r"""Seconds per iteration and peak memory against ``N``, one line per method
    (hollow markers: hyperparameters not re-fitted).

    Args:
        rows: Results of :func:`run_config`.
        path: Where to write the figure (format from the suffix).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8))
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["N"])
        N = [r["N"] for r in mine]
        for ax, key in zip(axes, ("iteration_s", "peak_rss_mb")):
            (line,) = ax.plot(N, [r[key] for r in mine], label=method)
            for r in mine:
                ax.plot(
                    r["N"],
                    r[key],
                    "o",
                    color=line.get_color(),
                    mfc=line.get_color() if r["refit"] else "none",
                )
    for ax, label in zip(axes, ("seconds per BO iteration", "peak memory (MB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("source points N")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    # below both panels: ten methods' lines cross the middle of either panel
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=7)
    fig.suptitle("Cost per iteration against the source size (hollow: not re-fitted)")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--methods",
        nargs="+",
        default=None,
        choices=available_methods(TRANSFER),
        help="registered transfer methods; the first is the baseline of the ratios "
        "(default: the per-iteration table's, or --scaling's)",
    )
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--sizes", type=int, nargs="+", default=[400, 2000, 10000])
    parser.add_argument(
        "--iterations",
        type=int,
        default=5,
        help="BO iterations timed per config (median)",
    )
    parser.add_argument(
        "--max-fit-n",
        type=int,
        default=2000,
        help="largest training set a model is re-fitted on every iteration",
    )
    parser.add_argument("--large-n-iterations", type=int, default=1)
    parser.add_argument(
        "--device",
        type=parse_device,
        default="cpu",
        help="where the per-iteration, --scaling and --targets models run (e.g. "
        "cuda; the data are drawn on the CPU)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--stage1",
        action="store_true",
        help="time cm-BO's stage 1 (batched vs per-task fits) instead",
    )
    parser.add_argument(
        "--stage2",
        action="store_true",
        help="time cm-BO's stage 2 (the clustering, on fitted stage 1 posteriors) "
        "against one pairwise Wasserstein matrix instead",
    )
    parser.add_argument("--stage1-tasks", type=int, default=100)
    parser.add_argument("--stage1-points", type=int, default=50)
    parser.add_argument(
        "--stage1-loop-tasks",
        type=int,
        default=None,
        help="time the per-task loop on this many tasks and scale it up (default: all)",
    )
    parser.add_argument(
        "--pretrain",
        action="store_true",
        help="time pretrain_prior (the default prior vs NLL) on --stage1-tasks x "
        "--stage1-points meta-data instead",
    )
    parser.add_argument("--pretrain-steps", type=int, default=3000)
    parser.add_argument(
        "--pretrain-objective",
        choices=("nll", "nll-paper"),
        default="nll",
        help="the NLL pre-training the default prior is compared with: the meta "
        "track's (lr 5e-3, early stopping) or the paper's (lr 1e-3, all "
        "--pretrain-steps steps; the paper's reference is 50,000)",
    )
    parser.add_argument(
        "--targets",
        action="store_true",
        help="measure every cost target of the package in one run and print "
        "each with its ratio and goal",
    )
    parser.add_argument(
        "--recommended",
        action="store_true",
        help="measure the recommended model's cost targets only (one source of 200 "
        "and of 2,000 points, five sources of 200)",
    )
    parser.add_argument(
        "--recommended-n",
        type=int,
        nargs="+",
        default=[200, 2000],
        help="--recommended/--targets: one source of each size",
    )
    parser.add_argument(
        "--recommended-sources",
        type=int,
        default=5,
        help="--recommended/--targets: this many sources of the first size",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="--targets: runs of each ratio's baseline and methods, side by side "
        "(median and range reported)",
    )
    parser.add_argument("--target-n", type=int, default=10_000)
    parser.add_argument("--large-n", type=int, default=100_000)
    parser.add_argument("--error-n", type=int, default=10_000)
    parser.add_argument("--pooled-n", type=int, default=2000)
    parser.add_argument("--pretrain-tasks", type=int, default=34)
    parser.add_argument("--pretrain-points", type=int, default=100)
    parser.add_argument(
        "--scaling",
        action="store_true",
        help="sweep --sizes for the scaling methods (or --methods) at the first of "
        "--dims: seconds per iteration and peak memory, a table and --plot",
    )
    parser.add_argument("--plot", default=None, help="where --scaling writes its plot")
    parser.add_argument(
        "--max-exact-n",
        type=int,
        default=10_000,
        help="--scaling skips exact pooled models above this many source points",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}.")
    if args.targets:
        return main_targets(args)
    if args.recommended:
        rows: list[dict] = []
        print(f"{'target':<72} {'measured':>11} {'goal':>9} {'met':>4}")
        recommended_targets(args, rows)
        return rows
    if args.scaling:
        return main_scaling(args)
    if args.stage1:
        return main_stage1(args)
    if args.stage2:
        return main_stage2(args)
    if args.pretrain:
        return main_pretrain(args)

    rows = []
    methods = list(dict.fromkeys(args.methods or METHODS))
    base, others = methods[0], methods[1:]
    width = max(15, *(len(m) + 5 for m in methods))
    header = f"{'d':>2} {'N':>6} | " + " ".join(
        f"{m + ' s/it':>{width}}" for m in methods
    )
    if others:
        header += " | " + " ".join(f"{m + '/base':>{width}}" for m in others)
    print(f"base: {base}")
    print_header(header)
    extra = []
    for dim in args.dims:
        for n in args.sizes:
            res = {}
            for method in methods:
                res[method] = config_in_process(args, method, dim, n)
                rows.append(res[method])
            cells = [
                f"{res[m]['iteration_s']:.3f}{'' if res[m]['refit'] else '*'}"
                for m in methods
            ]
            line = f"{dim:>2} {n:>6} | " + " ".join(f"{c:>{width}}" for c in cells)
            if others:
                ratios = (
                    res[m]["iteration_s"] / res[base]["iteration_s"] for m in others
                )
                line += " | " + " ".join(f"{r:{width}.2f}" for r in ratios)
            print(line, flush=True)
            extra.append(
                f"{dim:>2} {n:>6} | setup s: "
                + ", ".join(f"{m} {res[m]['setup_s']:.1f}" for m in methods)
                + "; source rank: "
                + ", ".join(
                    f"{m} {res[m]['source_rank']}"
                    for m in methods
                    if res[m]["source_rank"]
                )
                + "; peak MB: "
                + ", ".join(f"{m} {res[m]['peak_rss_mb']:.0f}" for m in methods)
                + (
                    "; peak GPU MB: "
                    + ", ".join(f"{m} {res[m]['peak_device_mb']:.0f}" for m in methods)
                    if res[base]["peak_device_mb"] is not None
                    else ""
                )
            )
    print(
        f"\n* model trained on more than {args.max_fit_n} points: hyperparameters "
        f"fitted once with a {SUBSET_N}-point source subset and loaded (not re-fitted)."
    )
    print("\n".join(extra))
    return rows


if __name__ == "__main__":
    main()
