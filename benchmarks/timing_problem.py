r"""The synthetic source/target pair that the cost benchmarks
(:mod:`~benchmarks.timing`, :mod:`~benchmarks.source_error`) time the models on."""

from __future__ import annotations

import torch
from torch import Tensor

from botorch_transfer.test_functions.base import TransferProblem, fixed_kernel

#: Initial target observations of a timed run.
T_TARGET = 30
SOURCE_NOISE, TARGET_NOISE = 0.1**2, 0.05**2


def source_function(X: Tensor) -> Tensor:
    return torch.sin(3 * X).sum(-1, keepdim=True) + (X - 0.5).pow(2).sum(
        -1, keepdim=True
    )


def target_function(X: Tensor) -> Tensor:
    return source_function(X) + 0.3 * torch.cos(2 * X[..., :1]) - 0.1


def timing_problem(dim: int, n_source: int) -> TransferProblem:
    r"""The synthetic source/target pair on ``[0, 1]^dim`` (noise sd 0.1 / 0.05).

    Args:
        dim: Input dimension.
        n_source: Number of source points ``N``.

    Returns:
        A continuous problem with UCB ``beta = 0.2`` and Matern-5/2 kernels
        (lengthscale 0.5) for methods with fixed settings.
    """
    return TransferProblem(
        name=f"timing-d{dim}-n{n_source}",
        bounds=torch.stack([torch.zeros(dim), torch.ones(dim)]).to(torch.float64),
        target=target_function,
        source=source_function,
        n_source=n_source,
        source_noise=SOURCE_NOISE,
        target_noise=TARGET_NOISE,
        kernels={
            "source": lambda d: fixed_kernel("matern52", 0.5, 1.0, d),
            "target": lambda d: fixed_kernel("matern52", 0.5, 1.0, d),
            "delta": lambda d: fixed_kernel("matern52", 0.5, 0.1, d),
        },
        n_init=T_TARGET,
        beta=0.2,
        description="timing: synthetic pair on the unit cube",
    )
