r"""Real HPO transfer pairs from the YAHPO Gym surrogates (needs the ``[yahpo]``
extra and the YAHPO data folder, see :mod:`.yahpo`).

A pair is two OpenML tasks of one surrogate: a few hundred random evaluations of the
source task, BO on the target task, over the unit cube of the tunable
hyperparameters, accuracy in percent maximized (LCBench: validation accuracy at the
last epoch, 7 hyperparameters; rbv2_xgboost: accuracy at the full training set,
13 hyperparameters with the booster). The pairs span the range of source-target
agreement; each problem's description reports the Spearman rank correlation of the
two tasks over 2000 uniform points.
"""

from __future__ import annotations

from functools import lru_cache

import torch
from torch import Tensor

from botorch_transfer.test_functions.base import TransferProblem, fixed_kernel
from botorch_transfer.test_functions.yahpo import YahpoSurrogate

#: ``name: (source task, target task)``; the rank correlation measured on 2000
#: uniform points is in the comment (and in the problem's description).
LCBENCH_PAIRS = {
    "lcbench-pair-strong": ("167149", "189865"),  # rho = 0.99
    "lcbench-pair-medium": ("7593", "189865"),  # rho = 0.60
    "lcbench-pair-weak": ("146212", "167184"),  # rho = 0.30
    "lcbench-pair-none": ("168868", "168910"),  # rho = 0.00
    "lcbench-pair-negative": ("189873", "34539"),  # rho = -0.44
}
#: rbv2_xgboost pairs, chosen among the 119 tasks (targets whose accuracy sd over the
#: cube is at least 12 points, so that there is something to optimize).
XGBOOST_PAIRS = {
    "xgboost-pair-strong": ("1497", "375"),  # rho = 0.95
    "xgboost-pair-weak": ("40685", "40981"),  # rho = 0.30
}
#: ``scenario: (pairs, surrogate output, factor to percent)``
_SCENARIOS = {
    "lcbench": (LCBENCH_PAIRS, "val_accuracy", 1.0),
    "rbv2_xgboost": (XGBOOST_PAIRS, "acc", 100.0),
}
#: Every real pair: ``name: scenario``.
HPO_PAIRS = {name: sc for sc, (pairs, _, _) in _SCENARIOS.items() for name in pairs}
#: The pairs whose source does not help (rank correlation <= 0): negative-transfer
#: controls of real data.
UNHELPFUL_PAIRS = ("lcbench-pair-none", "lcbench-pair-negative")


@lru_cache
def _surrogate(scenario: str):

    return YahpoSurrogate(scenario, _SCENARIOS[scenario][1])


def rank_correlation(a: Tensor, b: Tensor) -> float:
    r"""Spearman rank correlation of two ``n`` vectors (no ties expected)."""
    ra = a.argsort().argsort().double()
    rb = b.argsort().argsort().double()
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float((ra @ rb) / (ra.norm() * rb.norm()))


def hpo_pair(name: str) -> TransferProblem:
    r"""The real HPO transfer pair ``name`` (see :data:`HPO_PAIRS`).

    300 source evaluations with noise variance 0.01 (percent^2), 3 initial target
    points, T = 30, candidates from the continuous unit cube. The fixed kernels
    (Matern-5/2, lengthscale 0.3) only serve the papers' track methods; the
    default-settings track fits its own.

    Args:
        name: A key of :data:`HPO_PAIRS` (``lcbench-pair-*``, ``xgboost-pair-*``).
    """
    scenario = HPO_PAIRS[name]
    pairs, output, to_percent = _SCENARIOS[scenario]
    source_task, target_task = pairs[name]
    bench = _surrogate(scenario)

    def source(X: Tensor) -> Tensor:
        return to_percent * bench(source_task, X)

    def target(X: Tensor) -> Tensor:
        return to_percent * bench(target_task, X)

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
        description=f"{scenario} (YAHPO) pair: source task {source_task}, target "
        f"task {target_task}, {output} (%), rank correlation {rho:.2f}",
    )
