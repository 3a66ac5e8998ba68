r"""Per-iteration cost of DeltaBOModel against target-only and pooled GPs.

One BO iteration = fit the model's hyperparameters with ``fit_gpytorch_mll`` and
maximize ``UpperConfidenceBound`` with ``optimize_acqf`` (q=1, 10 restarts, 512 raw
samples), with T=30 target points. For each input dimension and number of source
points N it reports, side by side in one run:

- ``deltabo``: ``DeltaBOModel`` rebuilt every iteration on the frozen source
  posterior (built once; its one-time cost is reported separately);
- ``target-only``: ``SingleTaskGP`` on the T target points;
- ``pooled``: ``SingleTaskGP`` on the N + T pooled points (skipped above
  ``--pooled-max-n``: it re-fits an (N+T)-sized GP every iteration);

plus peak resident memory of each configuration (each runs in its own process) and
the accuracy of the cached source variance against an exact dense computation.

Run: ``python -m botorch_transfer.benchmarks.timing_deltabo [--dims 2 8] [--sizes 400 2000 10000]``
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import torch

T_TARGET = 30


def source_function(X: torch.Tensor) -> torch.Tensor:
    return torch.sin(3 * X).sum(-1, keepdim=True) + (X - 0.5).pow(2).sum(-1, keepdim=True)


def target_function(X: torch.Tensor) -> torch.Tensor:
    return source_function(X) + 0.3 * torch.cos(2 * X[..., :1]) - 0.1


def _fit(model) -> None:
    from botorch.fit import fit_gpytorch_mll
    from gpytorch.mlls import ExactMarginalLogLikelihood

    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))


def _optimize_ucb(model, dim: int) -> torch.Tensor:
    from botorch.acquisition import UpperConfidenceBound
    from botorch.optim import optimize_acqf

    bounds = torch.stack([torch.zeros(dim), torch.ones(dim)]).double()
    candidate, _ = optimize_acqf(
        UpperConfidenceBound(model, beta=0.2), bounds=bounds, q=1, num_restarts=10, raw_samples=512
    )
    return candidate


def run_config(method: str, dim: int, n_source: int, iterations: int, seed: int) -> dict:
    r"""Time ``iterations`` BO iterations of one method in this (fresh) process."""
    from botorch.models import SingleTaskGP

    from botorch_transfer.models import DeltaBOModel
    from botorch_transfer.models.source_posterior import (
        GPSourcePosterior,
        source_posterior_from_model,
    )

    warnings.filterwarnings("ignore")
    torch.set_num_threads(2)
    torch.manual_seed(seed)
    X_s = torch.rand(n_source, dim, dtype=torch.float64)
    Y_s = source_function(X_s) + 0.1 * torch.randn(n_source, 1, dtype=torch.float64)
    X = torch.rand(T_TARGET, dim, dtype=torch.float64)
    Y = target_function(X) + 0.05 * torch.randn(T_TARGET, 1, dtype=torch.float64)
    result = {"method": method, "dim": dim, "N": n_source}
    baseline_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    source = None
    if method == "deltabo":
        # One-time source cost: hyperparameters on a subset (an exact fit on all N
        # points is O(N^3) per optimizer step), then the cached posterior on all N.
        start = time.perf_counter()
        subset = torch.randperm(n_source)[: min(n_source, 1000)]
        gp = SingleTaskGP(X_s[subset], Y_s[subset], outcome_transform=None)
        _fit(gp)
        result["source_hyperparameter_fit_s"] = time.perf_counter() - start
        full = SingleTaskGP(X_s, Y_s, covar_module=gp.covar_module, mean_module=gp.mean_module,
                            likelihood=gp.likelihood, outcome_transform=None)
        start = time.perf_counter()
        source = source_posterior_from_model(full)
        result["source_cache_build_s"] = time.perf_counter() - start
        result["source_rank"] = source.rank if isinstance(source, GPSourcePosterior) else None
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        if method == "deltabo":
            model = DeltaBOModel(X, Y, source=source)
        elif method == "target-only":
            model = SingleTaskGP(X, Y)
        elif method == "pooled":
            model = SingleTaskGP(torch.cat([X_s, X]), torch.cat([Y_s, Y]))
        else:
            raise ValueError(method)
        _fit(model)
        candidate = _optimize_ucb(model, dim)
        times.append(time.perf_counter() - start)
        X = torch.cat([X, candidate])
        Y = torch.cat([Y, target_function(candidate)])
    # median: one iteration's L-BFGS fit can take several times another's
    result["iteration_s"] = sorted(times)[len(times) // 2]
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["rss_increase_mb"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - baseline_rss) / 1024
    if method == "deltabo":
        # accuracy of the cached variance against dense linear algebra (after the
        # timing, so that this dense check does not count in the peak memory)
        X_test = torch.rand(200, dim, dtype=torch.float64)
        with torch.no_grad():
            K = full.covar_module(X_s).to_dense() + full.likelihood.noise * torch.eye(n_source, dtype=torch.float64)
            L = torch.linalg.cholesky(K)
            k_star = full.covar_module(X_s, X_test).to_dense()
            v = torch.linalg.solve_triangular(L, k_star, upper=False)
            exact_var = full.covar_module(X_test, diag=True) - v.pow(2).sum(0)
            result["source_var_max_abs_err"] = float((source.variance(X_test) - exact_var).abs().max())
            result["source_var_scale"] = float(exact_var.max())
            del K, L, k_star, v
    return result


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--sizes", type=int, nargs="+", default=[400, 2000, 10000])
    parser.add_argument("--iterations", type=int, default=5, help="BO iterations timed per config (median reported)")
    parser.add_argument("--pooled-max-n", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    context = multiprocessing.get_context("spawn")
    rows = []
    header = (
        f"{'d':>2} {'N':>6} | {'deltabo s/it':>12} {'target s/it':>11} {'pooled s/it':>11} | "
        f"{'delta/target':>12} {'pooled/target':>13} | {'src fit s':>9} {'cache s':>7} {'rank':>5} "
        f"{'var err':>8} | {'peak MB d/t/p':>17}"
    )
    print(header)
    print("-" * len(header))
    for dim in args.dims:
        for n in args.sizes:
            res = {}
            for method in ("target-only", "deltabo", "pooled"):
                if method == "pooled" and n > args.pooled_max_n:
                    continue
                with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
                    res[method] = pool.submit(run_config, method, dim, n, args.iterations, args.seed).result()
                rows.append(res[method])
            d, t, p = res["deltabo"], res["target-only"], res.get("pooled")
            pooled_s = f"{p['iteration_s']:11.2f}" if p else f"{'skipped':>11}"
            pooled_ratio = f"{p['iteration_s'] / t['iteration_s']:13.2f}" if p else f"{'-':>13}"
            peak = f"{d['peak_rss_mb']:.0f}/{t['peak_rss_mb']:.0f}/{p['peak_rss_mb']:.0f}" if p else f"{d['peak_rss_mb']:.0f}/{t['peak_rss_mb']:.0f}/-"
            print(
                f"{dim:>2} {n:>6} | {d['iteration_s']:12.2f} {t['iteration_s']:11.2f} {pooled_s} | "
                f"{d['iteration_s'] / t['iteration_s']:12.2f} {pooled_ratio} | "
                f"{d['source_hyperparameter_fit_s']:9.1f} {d['source_cache_build_s']:7.1f} {d['source_rank']:>5} "
                f"{d['source_var_max_abs_err'] / d['source_var_scale']:8.1e} | {peak:>17}",
                flush=True,
            )
    print(
        "\nvar err: max |cached - exact| source posterior variance on 200 random points, "
        "relative to the largest exact variance (0 up to round-off when rank = numerical rank)."
    )
    return rows


if __name__ == "__main__":
    main()
