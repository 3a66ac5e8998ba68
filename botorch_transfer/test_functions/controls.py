r"""Negative-transfer controls: problem variants whose source does not help as is.

- ``unrelated``: the source is an independent function of the same smoothness (a
  sample of the problem's own source kernel, drawn per seed, with its component
  along the target removed so that the two are uncorrelated over the domain) with
  the original source's mean and standard deviation. A transfer model should do no
  worse than the no-transfer GP here.
- ``affine``: the source is the target in other units, ``a f + b`` with
  ``a = 2^u``, ``u ~ U(-1, 1)`` and ``b = +-`` one standard deviation of ``f`` over the
  domain (drawn per seed). Real sources are often in other units; a model whose
  transfer survives a change of units does as well here as on identical tasks.
- ``identical``: the source is the target itself (``a = 1, b = 0``): the ``affine``
  control's reference in the same units, not a negative-transfer control.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
from torch import Tensor

from botorch_transfer.test_functions.base import TransferProblem

#: Uniform points used to estimate a function's mean and standard deviation.
_MOMENT_POINTS = 4096


def _domain_sample(problem: TransferProblem, seed: int) -> Tensor:
    r"""Uniform points of the domain on which a control's constants are measured."""
    gen = torch.Generator().manual_seed(10_000 + seed)
    return problem.sample(_MOMENT_POINTS, gen)


def unrelated_source(problem: TransferProblem, seed: int = 0) -> TransferProblem:
    r"""``problem`` with a source independent of the target (see the module docs).

    Args:
        problem: The original problem.
        seed: The replicate: a new independent source per seed.

    Returns:
        The control problem, named ``<name>-unrelated``.
    """
    from botorch.sampling.pathwise.features.generators import gen_kernel_features

    with torch.random.fork_rng():
        torch.manual_seed(20_000 + seed)
        features = gen_kernel_features(
            problem.kernels["source"](problem.dim),
            num_inputs=problem.dim,
            num_outputs=2048,
        )
        weights = torch.randn(2048, 1, dtype=torch.float64)

    def draw(X: Tensor) -> Tensor:
        with torch.no_grad():
            return features(X) @ weights

    # remove the draw's component along the target over a sample of the domain: a
    # smooth sample on a small domain is otherwise correlated with the target by
    # chance (|r| up to 0.7), and the control would not be one
    X = _domain_sample(problem, seed)
    target_values = problem.target(X)
    t_mean = target_values.mean()
    d, t = draw(X).squeeze(-1), target_values.squeeze(-1)
    d, t = d - d.mean(), t - t.mean()
    slope = (d @ t) / (t @ t)

    def decorrelated(Z: Tensor) -> Tensor:
        return draw(Z) - slope * (problem.target(Z) - t_mean)

    values, source_values = decorrelated(X), problem.source(X)
    draw_mean, draw_std = values.mean(), values.std()
    source_mean, source_std = source_values.mean(), source_values.std()

    def source(X: Tensor) -> Tensor:
        return source_mean + source_std * (decorrelated(X) - draw_mean) / draw_std

    return replace(
        problem,
        name=f"{problem.name}-unrelated",
        source=source,
        description=f"{problem.description}; CONTROL: source replaced by a "
        f"GP sample of the source kernel uncorrelated with the target (draw {seed})",
    )


def affine_source(problem: TransferProblem, seed: int = 0) -> TransferProblem:
    r"""``problem`` with the source ``a f + b`` (see the module docs).

    Args:
        problem: The original problem.
        seed: The replicate: a new ``(a, b)`` per seed.

    Returns:
        The control problem, named ``<name>-affine``; its description states
        ``(a, b)``.
    """
    gen = torch.Generator().manual_seed(30_000 + seed)
    u = 2 * torch.rand(1, generator=gen, dtype=torch.float64).item() - 1
    sign = 1.0 if torch.rand(1, generator=gen).item() < 0.5 else -1.0
    target_std = problem.target(_domain_sample(problem, seed)).std()
    a, b = 2.0**u, sign * target_std.item()
    target = problem.target
    return replace(
        problem,
        name=f"{problem.name}-affine",
        source=lambda X: a * target(X) + b,
        description=f"{problem.description}; CONTROL: source = {a:.3f} f + "
        f"({b:.3f}), the target in other units",
    )


def identical_source(problem: TransferProblem, seed: int = 0) -> TransferProblem:
    r"""``problem`` with the target itself as the source (the reference of
    :func:`affine_source`: the same source in the target's units).

    Args:
        problem: The original problem.
        seed: Unused (the source is the target for every seed); kept for the
            :data:`CONTROLS` signature.

    Returns:
        The reference problem, named ``<name>-identical``.
    """
    return replace(
        problem,
        name=f"{problem.name}-identical",
        source=problem.target,
        description=f"{problem.description}; REFERENCE of -affine: source = f, "
        "the target in its own units",
    )


#: The control variants, by suffix.
CONTROLS: dict[str, Callable[[TransferProblem, int], TransferProblem]] = {
    "unrelated": unrelated_source,
    "affine": affine_source,
    "identical": identical_source,
}
