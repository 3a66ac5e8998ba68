r"""How well a source GP predicts its own data at inputs it has not seen.

A source helps a target through what it says between its observations: a GP that
cannot predict its own observations at a left-out input (e.g. a table whose
results were joined to the wrong configurations, or pure noise) has learned no
structure that a transfer model could carry over, however many points it has.
:func:`source_skill` measures this as the leave-input-out predictive ``R^2`` of the
source GP on its data (replicates at one input left out together:
:func:`~botorch_transfer.models.utils.loo.leave_input_out_shift`), with the GP's fitted
hyperparameters: 1 for a perfect prediction, about 0 for none.
"""

from __future__ import annotations

import math

import torch
from botorch.models import SingleTaskGP

from botorch_transfer.models.frozen_source import FIT_MAX_POINTS, fit_subset_rows
from botorch_transfer.models.utils.loo import leave_input_out_shift


class UninformativeSourceWarning(UserWarning):
    r"""A source GP predicts its own observations at left-out inputs no better than
    their mean: the source carries no structure to transfer."""


#: Fewest distinct source inputs for which the skill is measured (below it, one
#: left-out input says too little; :func:`source_skill` returns NaN).
MIN_DISTINCT_INPUTS = 10


def source_skill(source_gp: SingleTaskGP) -> float:
    r"""The leave-input-out predictive ``R^2`` of a fitted source GP on its own data.

    ``1 - sum_i (t_i - m_i)^2 / sum_i (t_i - mean(t))^2``, where ``m_i`` is the
    GP's prediction of observation ``t_i`` from the observations at the other
    inputs (same hyperparameters, no refit). Above 1,000 observations it is
    measured on the fixed random subset that source GPs are fitted on. A
    :class:`~botorch_transfer.models.source_gp.FittedSourceGP` keeps its value
    (its ``skill``).

    Example:
        >>> from botorch.fit import fit_gpytorch_mll
        >>> from botorch.models import SingleTaskGP
        >>> from gpytorch.mlls import ExactMarginalLogLikelihood
        >>> X = torch.rand(40, 2, dtype=torch.float64)
        >>> Y = torch.sin(6 * X).sum(-1, keepdim=True)
        >>> gp = SingleTaskGP(X, Y)
        >>> _ = fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp))
        >>> source_skill(gp) > 0.9
        True

    Args:
        source_gp: A fitted, single-output, non-batched ``SingleTaskGP``.

    Returns:
        The skill (at most 1; near 0 or below for a source without structure), or
        NaN with fewer than ``MIN_DISTINCT_INPUTS`` distinct inputs.
    """
    (X,) = source_gp.train_inputs  # transformed inputs, as the kernel sees them
    t = source_gp.train_targets.detach()
    if X.dim() != 2 or t.dim() != 1:
        raise ValueError(
            "`source_gp` must be a single-output, non-batched SingleTaskGP, got "
            f"training inputs of shape {tuple(X.shape)}."
        )
    noise = source_gp.likelihood.noise.detach().expand(t.shape)
    rows = fit_subset_rows(t.shape[-1], FIT_MAX_POINTS, t.device)
    if rows is not None:
        X, t, noise = X[rows], t[rows], noise[rows]
    if torch.unique(X, dim=0).shape[0] < MIN_DISTINCT_INPUTS:
        skill = math.nan
    else:
        # the kernel and mean on the stored (transformed) inputs: no mode switch,
        # so the model's prediction caches stay as they are
        with torch.no_grad():
            K = source_gp.covar_module(X).to_dense() + torch.diag_embed(noise)
            residual = t - source_gp.mean_module(X)
            shift = leave_input_out_shift(K, residual, X)
        total = (t - t.mean()).square().sum()
        skill = float(1.0 - shift.square().sum() / total) if total > 0 else math.nan
    return skill
