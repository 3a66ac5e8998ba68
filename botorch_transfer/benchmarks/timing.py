r"""Per-iteration cost of the transfer models against target-only and pooled GPs.

One BO iteration = build the model on the current data, fit its hyperparameters
with ``fit_gpytorch_mll`` and maximize ``UpperConfidenceBound`` with
``optimize_acqf`` (q=1, 10 restarts, 512 raw samples), with T=30 target points.
For each input dimension and number of source points N it reports, side by side in
one run (each configuration in its own process, median over iterations):

- ``target-only``: ``SingleTaskGP`` on the T target points;
- ``deltabo``: ``DeltaBOModel`` rebuilt every iteration on the frozen source
  posterior (built once; that one-time cost is reported separately, with the
  accuracy of the cached source variance against an exact dense computation);
- ``pooled``: ``SingleTaskGP`` on the N + T pooled points;
- ``envgp`` / ``diffgp``: ``EnvGP`` / ``DiffGP`` (an (N+T)-sized GP; DiffGP also
  re-derives its source correction, O(N^3)).

Above ``--max-fit-n`` source points the (N+T)-sized models are not re-fitted every
iteration (an exact fit is O((N+T)^3) per optimizer step): their hyperparameters are
fitted once on a 1000-point source subset and loaded, marked ``*`` in the table, and
they run ``--large-n-iterations`` iterations.

Run: ``python -m botorch_transfer.benchmarks.timing [--methods ...] [--dims 2 8] [--sizes 400 2000 10000]``
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
METHODS = ("target-only", "deltabo", "pooled", "envgp", "diffgp")
POOLED = ("pooled", "envgp", "diffgp")


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


def _build(method: str, X_s, Y_s, X, Y, source):
    from botorch.models import SingleTaskGP

    from botorch_transfer import DeltaBOModel, DiffGP, EnvGP, TaskData

    if method == "target-only":
        return SingleTaskGP(X, Y)
    if method == "deltabo":
        return DeltaBOModel(X, Y, source=source)
    if method == "pooled":
        return SingleTaskGP(torch.cat([X_s, X]), torch.cat([Y_s, Y]))
    cls = EnvGP if method == "envgp" else DiffGP
    return cls(X, Y, source=TaskData(X_s, Y_s))


def run_config(method: str, dim: int, n_source: int, iterations: int, seed: int, max_fit_n: int) -> dict:
    r"""Time BO iterations of one method in this (fresh) process."""
    from botorch.models import SingleTaskGP

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
    result = {"method": method, "dim": dim, "N": n_source, "refit": True}
    baseline_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    subset = torch.randperm(n_source)[: min(n_source, 1000)]

    source, full = None, None
    if method == "deltabo":
        # One-time source cost: hyperparameters on a subset (an exact fit on all N
        # points is O(N^3) per optimizer step), then the cached posterior on all N.
        start = time.perf_counter()
        gp = SingleTaskGP(X_s[subset], Y_s[subset], outcome_transform=None)
        _fit(gp)
        result["source_hyperparameter_fit_s"] = time.perf_counter() - start
        full = SingleTaskGP(X_s, Y_s, covar_module=gp.covar_module, mean_module=gp.mean_module,
                            likelihood=gp.likelihood, outcome_transform=None)
        start = time.perf_counter()
        source = source_posterior_from_model(full)
        result["source_cache_build_s"] = time.perf_counter() - start
        result["source_rank"] = source.rank if isinstance(source, GPSourcePosterior) else None

    hyperparameters = None
    if method in POOLED and n_source > max_fit_n:
        small = _build(method, X_s[subset], Y_s[subset], X, Y, None)
        _fit(small)
        hyperparameters = small.state_dict()
        result["refit"] = False

    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        model = _build(method, X_s, Y_s, X, Y, source)
        if hyperparameters is None:
            _fit(model)
        else:
            model.load_state_dict(hyperparameters)
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
            v = torch.linalg.solve_triangular(L, full.covar_module(X_s, X_test).to_dense(), upper=False)
            exact_var = full.covar_module(X_test, diag=True) - v.pow(2).sum(0)
            err = (source.variance(X_test) - exact_var).abs().max()
            result["source_var_rel_err"] = float(err / exact_var.max())
    return result


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--sizes", type=int, nargs="+", default=[400, 2000, 10000])
    parser.add_argument("--iterations", type=int, default=5, help="BO iterations timed per config (median reported)")
    parser.add_argument("--max-fit-n", type=int, default=2000, help="largest N at which (N+T)-sized models are re-fitted")
    parser.add_argument("--large-n-iterations", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    context = multiprocessing.get_context("spawn")
    rows = []
    methods = [m for m in METHODS if m in args.methods]
    header = f"{'d':>2} {'N':>6} | " + " ".join(f"{m + ' s/it':>15}" for m in methods)
    if "target-only" in methods:
        header += " | " + " ".join(f"{m + '/target':>14}" for m in methods if m != "target-only")
    print(header)
    print("-" * len(header))
    extra = []
    for dim in args.dims:
        for n in args.sizes:
            res = {}
            for method in methods:
                iterations = args.iterations if not (method in POOLED and n > args.max_fit_n) else args.large_n_iterations
                with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
                    res[method] = pool.submit(run_config, method, dim, n, iterations, args.seed, args.max_fit_n).result()
                rows.append(res[method])
            cells = [f"{res[m]['iteration_s']:.2f}{'' if res[m]['refit'] else '*'}" for m in methods]
            line = f"{dim:>2} {n:>6} | " + " ".join(f"{c:>15}" for c in cells)
            if "target-only" in methods:
                base = res["target-only"]["iteration_s"]
                line += " | " + " ".join(f"{res[m]['iteration_s'] / base:14.2f}" for m in methods if m != "target-only")
            print(line, flush=True)
            if "deltabo" in res:
                d = res["deltabo"]
                extra.append(
                    f"{dim:>2} {n:>6} | deltabo source: hyperparameter fit {d['source_hyperparameter_fit_s']:.1f} s, "
                    f"cache build {d['source_cache_build_s']:.1f} s, rank {d['source_rank']}, "
                    f"variance rel. error {d['source_var_rel_err']:.1e}; peak MB "
                    + ", ".join(f"{m} {res[m]['peak_rss_mb']:.0f}" for m in methods)
                )
    print("\n* hyperparameters fitted once on a 1000-point source subset and loaded (not re-fitted per iteration).")
    print("\n".join(extra))
    return rows


if __name__ == "__main__":
    main()
