r"""Error of the low-rank source posterior against the exact one.

Large sources are cached by :class:`~botorch_transfer.models.source_posterior.
GPSourcePosterior` as a pivoted-Cholesky factor of at most ``max_rank`` columns (the
covariance is then a Nystrom/DTC approximation) and, above
``EXACT_MEAN_MAX_POINTS`` observations, with the DTC mean of that factor. This
script measures what that costs in accuracy where the exact posterior can still be
computed: the synthetic source of :mod:`benchmarks.timing` with
``N`` noisy observations, one set of hyperparameters (a ``SingleTaskGP`` fitted on
1,000 of the points, as the models fit large sources), the exact posterior by a
dense Cholesky of the ``N x N`` kernel matrix (a plain reference, not the package's
code), and the cached posterior at each ``max_rank`` with the exact and the DTC
mean. Errors are over random test points in the unit cube, relative to the
outcomes' standard deviation (mean) and to the exact posterior standard deviation.

Run: ``python -m benchmarks.source_error --sizes 2000 10000
--ranks 250 500 1000 2000 --dim 8`` (``--device cuda`` on a GPU)
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from gpytorch.mlls import ExactMarginalLogLikelihood

from benchmarks.context import parse_device
from benchmarks.timing_problem import SOURCE_NOISE, source_function
from botorch_transfer.models.frozen_source import FIT_MAX_POINTS
from botorch_transfer.models.source_posterior import GPSourcePosterior


def _exact_posterior(
    model: SingleTaskGP, X: torch.Tensor, y: torch.Tensor, X_test: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Mean and standard deviation of the GP conditioned on all of ``(X, y)``, by
    a dense Cholesky (the reference)."""
    kernel, noise = model.covar_module, model.likelihood.noise.squeeze()
    constant = model.mean_module(X_test[:1]).squeeze()
    with torch.no_grad():
        eye = torch.eye(len(X), dtype=X.dtype, device=X.device)
        K = kernel(X).to_dense() + noise * eye
        L = torch.linalg.cholesky(K)
        del K
        K_star = kernel(X, X_test).to_dense()  # N x n_test
        alpha = torch.cholesky_solve((y - constant).unsqueeze(-1), L)
        mean = constant + (K_star.transpose(0, 1) @ alpha).squeeze(-1)
        V = torch.linalg.solve_triangular(L, K_star, upper=False)
        prior_var = kernel(X_test, diag=True)
        var = (prior_var - V.pow(2).sum(0)).clamp_min(0)
    return mean, var.sqrt()


def source_posterior_error(
    n_source: int,
    dim: int,
    ranks: Sequence[int],
    n_test: int = 500,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> list[dict]:
    r"""The cached source posterior's error at each rank, against the exact one.

    Args:
        n_source: Source observations ``N``.
        dim: Input dimension.
        ranks: ``max_rank`` values to try (capped at ``N``).
        n_test: Random test points in ``[0, 1]^dim``.
        seed: Seed of the data, the fit subset and the test points.
        device: Where the fit, the exact reference and the cached posterior run
            (the data are drawn on the CPU, so a seed gives the same data
            everywhere).

    Returns:
        One row per rank and mean kind (``"exact"``: solved weights; ``"dtc"``: the
        factor's DTC mean): ``mean_rmse`` and ``mean_max`` (relative to the
        outcomes' standard deviation), ``sd_rel_rmse`` and ``sd_rel_max`` (relative
        to the exact posterior standard deviation), ``rank`` (the factor's actual
        columns) and ``seconds`` (building the cached posterior).

    Example:
        >>> rows = source_posterior_error(2000, 8, [250, 1000])
    """
    gen = torch.Generator().manual_seed(seed)
    dtype = torch.float64
    X = torch.rand(n_source, dim, generator=gen, dtype=dtype)
    noise = torch.randn(n_source, 1, generator=gen, dtype=dtype)
    Y = source_function(X) + SOURCE_NOISE**0.5 * noise
    X_test = torch.rand(n_test, dim, generator=gen, dtype=dtype)
    rows = torch.randperm(n_source, generator=gen)[:FIT_MAX_POINTS]
    X, Y, X_test = (t.to(device) for t in (X, Y, X_test))
    model = SingleTaskGP(X[rows], Y[rows], outcome_transform=None)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    model.eval()
    y = Y.squeeze(-1)
    start = time.perf_counter()
    mean_ref, sd_ref = _exact_posterior(model, X, y, X_test)
    exact_s = time.perf_counter() - start
    scale = y.std()
    noise_var = model.likelihood.noise.detach().squeeze().expand(n_source)
    results = []
    for max_rank in ranks:
        for kind in ("exact", "dtc"):
            start = time.perf_counter()
            cached = GPSourcePosterior(
                X,
                y,
                noise_var,
                model.covar_module,
                mean_module=model.mean_module,
                max_rank=min(max_rank, n_source),
                progress=False,
                exact_mean=kind == "exact",
            )
            seconds = time.perf_counter() - start
            with torch.no_grad():
                mean = cached.mean(X_test.unsqueeze(-2)).reshape(-1)
                sd = cached.variance(X_test.unsqueeze(-2)).reshape(-1).sqrt()
            mean_err = (mean - mean_ref).abs() / scale
            sd_err = (sd - sd_ref).abs() / sd_ref.clamp_min(1e-12)
            results.append(
                {
                    "n_source": n_source,
                    "dim": dim,
                    "max_rank": max_rank,
                    "rank": cached.rank,
                    "mean": kind,
                    "mean_rmse": mean_err.pow(2).mean().sqrt().item(),
                    "mean_max": mean_err.max().item(),
                    "sd_rel_rmse": sd_err.pow(2).mean().sqrt().item(),
                    "sd_rel_max": sd_err.max().item(),
                    "seconds": seconds,
                    "exact_seconds": exact_s,
                }
            )
    return results


def main(argv: Sequence[str] | None = None) -> list[dict]:
    r"""Command line: print one row per size, rank and mean kind."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.source_error",
        description="Error of the low-rank source posterior against the exact one.",
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000])
    parser.add_argument("--ranks", type=int, nargs="+", default=[250, 500, 1000, 2000])
    parser.add_argument("--dim", type=int, default=8)
    parser.add_argument("--test-points", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--device",
        type=parse_device,
        default="cpu",
        help="torch device, e.g. cuda (default: cpu)",
    )
    args = parser.parse_args(argv)
    print(
        f"{'N':>6} {'d':>2} {'max_rank':>8} {'rank':>5} {'mean':>5} "
        f"{'mean rmse':>9} {'mean max':>8} {'sd rmse':>8} {'sd max':>8} "
        f"{'build s':>7} {'exact s':>7}"
    )
    rows = []
    for n in args.sizes:
        for row in source_posterior_error(
            n, args.dim, args.ranks, args.test_points, args.seed, args.device
        ):
            rows.append(row)
            print(
                f"{n:6d} {args.dim:2d} {row['max_rank']:8d} {row['rank']:5d} "
                f"{row['mean']:>5} {row['mean_rmse']:9.2e} {row['mean_max']:8.2e} "
                f"{row['sd_rel_rmse']:8.2e} {row['sd_rel_max']:8.2e} "
                f"{row['seconds']:7.1f} {row['exact_seconds']:7.1f}",
                flush=True,
            )
    return rows


if __name__ == "__main__":  # pragma: no cover
    main()
