r"""RGPE's ranking evidence (Feurer, Letham and Bakshy 2018): how well a model's
leave-one-out draws order the target's observations, the weights it gives each
model, and the weighted sum of independent GPs they combine into.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from botorch.models.model import Model
from botorch.posteriors import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal
from torch import Tensor

from botorch_transfer.models.utils.loo import exact_loo_posterior


def ranking_loss(samples: Tensor, y: Tensor, pairs: Tensor | None = None) -> Tensor:
    r"""Misranked ordered pairs ``sum_{j,k} 1[(f_j < f_k) xor (y_j < y_k)]``.

    Args:
        samples: ``... x n`` function values at the target inputs.
        y: ``... x n`` observations (broadcastable with ``samples``).
        pairs: Optional ``n x n`` booleans: the ordered pairs ``(j, k)`` counted
            (default: all).

    Returns:
        ``...`` loss counts.
    """
    f_less = samples.unsqueeze(-1) < samples.unsqueeze(-2)
    y_less = y.unsqueeze(-1) < y.unsqueeze(-2)
    misranked = f_less ^ y_less
    if pairs is not None:
        misranked = misranked & pairs
    return misranked.sum(dim=(-1, -2))


def ranking_weights(
    losses: Tensor,
    generator: torch.Generator | None = None,
    excluded: Tensor | None = None,
) -> Tensor:
    r"""RGPE weights from loss samples, with weight dilution prevention.

    Args:
        losses: ``... x M x S`` losses of ``M`` models (the target model last) in
            ``S`` draws.
        generator: Breaks ties at random.
        excluded: Optional ``M`` booleans: base models given weight 0 whatever
            their losses (e.g. sources too small to rank anything).

    Returns:
        ``... x M`` weights: the fraction of draws in which each model has the
        smallest loss, among the models not discarded (a base model is discarded
        when its median loss exceeds the target model's 95th percentile, or when
        ``excluded``).
    """
    losses = losses.to(torch.float64)  # exact for integer counts
    target_q95 = torch.quantile(losses[..., -1, :], 0.95, dim=-1, keepdim=True)
    median = torch.quantile(losses, 0.5, dim=-1)
    discarded = median > target_q95
    if excluded is not None:
        discarded = discarded | excluded.to(discarded.device)
    discarded[..., -1] = False  # the target model is never discarded
    # losses are integers: a uniform offset below 1 breaks ties uniformly at random
    jitter = torch.rand(losses.shape, generator=generator, dtype=losses.dtype)
    jitter = jitter.to(losses.device)  # the generator lives on the CPU
    jittered = (losses + 0.5 * jitter).masked_fill(discarded.unsqueeze(-1), torch.inf)
    best = jittered.argmin(dim=-2)  # ... x S
    counts = torch.nn.functional.one_hot(best, losses.shape[-2]).to(losses.dtype)
    return counts.mean(dim=-2)


def loo_ranking_losses(
    parts: Sequence[tuple[Model, Tensor]],
    num_samples: int,
    seed: int,
    pairs: Tensor | None = None,
) -> Tensor:
    r"""Ranking losses of leave-one-out draws of exact GPs on the same target points.

    Each model's closed-form leave-one-out posteriors at its training points
    (:func:`~botorch_transfer.models.utils.loo.exact_loo_posterior`) are drawn
    ``num_samples`` times (one generator seeded with ``seed``, drawn on the CPU for
    every model in turn, so that a seed gives the same losses on every device), and
    each draw's misordered pairs of the observations are counted
    (:func:`ranking_loss`).

    Args:
        parts: ``(model, y)`` pairs: an exact GP and its ``n`` observations in the
            units of its training targets (for a residual model, the observations,
            not the residuals).
        num_samples: Draws per model.
        seed: Seed of the draws.
        pairs: Optional ``n x n`` booleans: the ordered pairs of observations
            counted (default: all).

    Returns:
        ``len(parts) x num_samples`` losses.
    """
    generator = torch.Generator().manual_seed(seed)
    losses = []
    for model, y in parts:
        shift, variance, _ = exact_loo_posterior(model)
        z = torch.randn(num_samples, y.shape[-1], generator=generator, dtype=y.dtype)
        draws = (y - shift) + variance.sqrt() * z.to(y.device)
        losses.append(ranking_loss(draws, y, pairs))
    return torch.stack(losses)


def distinguishable_pairs(y: Tensor, noise_variance: Tensor, margin: float) -> Tensor:
    r"""The ordered pairs of observations whose order is more than noise: ``|y_j -
    y_k| > margin * sqrt(noise_j + noise_k)``, ``margin`` standard deviations of
    their difference.

    Args:
        y: ``n`` observations.
        noise_variance: Their noise variances (``n``, or one for all), in the units
            of ``y``.
        margin: Standard deviations of the difference.

    Returns:
        ``n x n`` booleans (``False`` on the diagonal).
    """
    noise = noise_variance.expand_as(y)
    gap = (y.unsqueeze(-1) - y.unsqueeze(-2)).abs()
    return gap > margin * (noise.unsqueeze(-1) + noise.unsqueeze(-2)).sqrt()


def weighted_combination(
    parts: Sequence[GPyTorchPosterior], weights: Sequence[float]
) -> GPyTorchPosterior:
    r"""RGPE's combination of single-output posteriors over the same points: mean
    ``sum_k w_k mu_k``, covariance ``sum_k w_k^2 Sigma_k`` (the weighted sum of
    independent GPs). A part without weight adds nothing (not even a NaN).

    The covariance stays a lazy sum of the parts' linear operators: nothing is
    factorized here, and a sample or log density factorizes the sum with
    linear_operator's jitter policy (``psd_safe_cholesky``), as for any BoTorch GP
    posterior. A dense sum handed to ``torch.distributions`` is factorized at once
    without jitter, which fails where the points crowd together."""
    mean, covariance = None, None
    for weight, part in zip(weights, parts, strict=True):
        if weight == 0.0:
            continue
        part_mean = weight * part.mean.squeeze(-1)
        part_covariance = part.distribution.lazy_covariance_matrix * weight**2
        if mean is None:
            mean, covariance = part_mean, part_covariance
        else:
            mean, covariance = mean + part_mean, covariance + part_covariance
    if mean is None:
        raise ValueError("`weights` must give at least one part a nonzero weight.")
    return GPyTorchPosterior(MultivariateNormal(mean, covariance))
