r"""Real HPO transfer pairs from the YAHPO Gym LCBench surrogate (needs the
``[yahpo]`` extra and the YAHPO data folder, see :mod:`.yahpo`).

A pair is two OpenML tasks of LCBench: a few hundred random evaluations of the
source task, BO on the target task, over the 7 tunable hyperparameters of the
unit cube (validation accuracy in percent at the last epoch, maximized). The
pairs span the range of source-target agreement; each problem's description
reports the Spearman rank correlation of the two tasks over 2000 uniform points.
"""

from __future__ import annotations

from functools import lru_cache

import torch
from torch import Tensor

from botorch_transfer.benchmarks.base import TransferProblem, fixed_kernel

#: ``name: (source task, target task)``; the rank correlation measured on 2000
#: uniform points is in the comment (and in the problem's description).
LCBENCH_PAIRS = {
    "lcbench-pair-strong": ("167149", "189865"),  # rho = 0.99
    "lcbench-pair-medium": ("7593", "189865"),  # rho = 0.60
    "lcbench-pair-weak": ("146212", "167184"),  # rho = 0.30
    "lcbench-pair-none": ("168868", "168910"),  # rho = 0.00
    "lcbench-pair-negative": ("189873", "34539"),  # rho = -0.44
}
#: The pairs whose source does not help (rank correlation <= 0): negative-transfer
#: controls of real data.
UNHELPFUL_PAIRS = ("lcbench-pair-none", "lcbench-pair-negative")


@lru_cache
def _lcbench():
    from botorch_transfer.benchmarks.yahpo import YahpoSurrogate

    return YahpoSurrogate("lcbench", "val_accuracy")


def rank_correlation(a: Tensor, b: Tensor) -> float:
    r"""Spearman rank correlation of two ``n`` vectors (no ties expected)."""
    ra = a.argsort().argsort().double()
    rb = b.argsort().argsort().double()
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float((ra @ rb) / (ra.norm() * rb.norm()))


def lcbench_pair(name: str) -> TransferProblem:
    r"""The LCBench transfer pair ``name`` (see :data:`LCBENCH_PAIRS`).

    300 source evaluations with noise variance 0.01 (percent^2), 3 initial target
    points, T = 30, candidates from the continuous unit cube. The fixed kernels
    (Matern-5/2, lengthscale 0.3) only serve the papers' track methods; the
    default-settings track fits its own.

    Args:
        name: A key of :data:`LCBENCH_PAIRS`.
    """
    source_task, target_task = LCBENCH_PAIRS[name]
    bench = _lcbench()

    def source(X: Tensor) -> Tensor:
        return bench(source_task, X)

    def target(X: Tensor) -> Tensor:
        return bench(target_task, X)

    U = torch.rand(
        2000, bench.dim, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    )
    rho = rank_correlation(source(U).squeeze(-1), target(U).squeeze(-1))
    kernel = {
        key: (lambda d: fixed_kernel("matern52", 0.3, 100.0, d))
        for key in ("source", "target")
    }
    kernel["delta"] = lambda d: fixed_kernel("matern52", 0.3, 25.0, d)
    return TransferProblem(
        name=name,
        bounds=torch.stack([torch.zeros(bench.dim), torch.ones(bench.dim)]).to(
            torch.float64
        ),
        target=target,
        source=source,
        n_source=300,
        source_noise=0.01,
        target_noise=0.01,
        kernels=kernel,
        n_init=3,
        iterations=30,
        beta=0.3,
        description=f"LCBench (YAHPO) pair: source task {source_task}, target task "
        f"{target_task}, val_accuracy (%), rank correlation {rho:.2f}",
    )
