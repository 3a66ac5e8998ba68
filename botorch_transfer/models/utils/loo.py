r"""Closed-form leave-one-out (LOO) predictions of an exact GP at its training inputs.

With ``K`` the training targets' marginal covariance (noise included), ``r`` the
targets minus the prior mean and ``alpha = K^{-1} r``, training point ``i``
predicted from the other points, with the same hyperparameters, has mean ``t_i -
alpha_i / [K^{-1}]_ii``, observation variance ``1 / [K^{-1}]_ii`` and latent
variance ``1 / [K^{-1}]_ii - noise_i`` (Rasmussen and Williams 2006, eq. 5.12): one
Cholesky factor of ``K`` gives all ``n`` predictions, no refit and no rebuild.

:func:`exact_loo_posterior` takes them from BoTorch's
``botorch.cross_validation.efficient_loo_cv`` as shifts of the training targets
(what carries over to a residual model's observations);
:func:`exact_loo_log_density` scores the training targets with them. What is new
here: :func:`leave_input_out_shift`, the block form that leaves out all replicates
at one input together, and :func:`training_marginal`, the prior marginal of the
training targets that the guard's sequential scores start from. Every model of the
package that needs LOO predictions of an exact GP (the target-only GP of
:class:`~botorch_transfer.models.guard.TransferGuard`, both parts of
:class:`~botorch_transfer.models.rank_weighted.RankWeightedTransferGP`, the target
GP of :class:`~botorch_transfer.models.rgpe.RGPE`) uses these functions.
"""

from __future__ import annotations

import torch
from botorch.cross_validation import efficient_loo_cv
from botorch.models.model import Model
from gpytorch.models import ExactGP
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from botorch_transfer.models.utils.scoring import normal_log_density

#: Floor of the latent LOO variance (round-off can take ``1 / [K^{-1}]_ii - noise_i``
#: to zero or below when the noise dominates).
MIN_LOO_VARIANCE = 1e-12


def training_marginal(model: Model) -> tuple[Tensor, Tensor, Tensor]:
    r"""The prior marginal of an exact GP's training targets, noise included.

    The model is evaluated in train mode (the prior at its training inputs, inputs
    transformed as in a fit) under ``torch.no_grad()``, and put back in its mode
    with its prediction caches.

    Args:
        model: An exact GP (``train_inputs``, ``train_targets``, a Gaussian
            likelihood) with its current hyperparameters, batched or not.

    Returns:
        ``(mean, covariance, noise)``: the ``batch x n`` prior mean, the ``batch x n
        x n`` covariance of the training targets (noise included) and the ``batch x
        n`` noise variances (the covariance's diagonal minus the prior's: the noise
        as it enters the rounded covariance), in the model's units.
    """
    was_training = model.training
    # neither the data nor the hyperparameters change: a model in eval mode keeps
    # its prediction caches, which train() would drop (an acquisition function
    # evaluating the model would otherwise rebuild them)
    strategies = {}
    if not was_training:
        strategies = {
            name: module.prediction_strategy
            for name, module in model.named_modules()
            if isinstance(module, ExactGP)
        }
    model.train()
    try:
        with torch.no_grad():
            inputs = model.train_inputs
            prior = model(*inputs)
            marginal = model.likelihood(prior, *inputs)
            K = marginal.covariance_matrix
            prior_variance = prior.covariance_matrix.diagonal(dim1=-2, dim2=-1)
            noise = K.diagonal(dim1=-2, dim2=-1) - prior_variance
            mean = marginal.mean
    finally:
        model.train(was_training)
        for name, module in model.named_modules():
            if name in strategies:
                module.prediction_strategy = strategies[name]
    return mean, K, noise


def _inverse_and_weights(covariance: Tensor, residual: Tensor) -> tuple[Tensor, Tensor]:
    r"""``K^{-1}`` (``K`` factored by ``psd_safe_cholesky``) and ``alpha = K^{-1} r``
    for ``batch x n x n`` ``covariance`` and ``batch x n`` ``residual``."""
    K_inv = torch.cholesky_inverse(psd_safe_cholesky(covariance))
    return K_inv, (K_inv @ residual.unsqueeze(-1)).squeeze(-1)


def exact_loo_posterior(
    model: Model, observation_noise: bool = False
) -> tuple[Tensor, Tensor, Tensor]:
    r"""Closed-form leave-one-out posteriors of an exact GP at its training inputs,
    from BoTorch's ``efficient_loo_cv``, as shifts of the training targets.

    With ``K`` the training targets' marginal covariance (noise included), ``r`` the
    targets minus the prior mean and ``alpha = K^{-1} r``, point ``i`` predicted from
    the others has mean ``t_i - alpha_i / [K^{-1}]_ii`` and latent variance ``1 /
    [K^{-1}]_ii - noise_i`` (Rasmussen and Williams, eq. 5.12). For a residual model
    (targets ``t = y - m(x)`` with ``m`` fixed by the source) the same shift applies
    to ``y``, so the predictions of the observations are ``y_i - alpha_i /
    [K^{-1}]_ii``: the shift, not the mean, is what carries over.

    Example:
        >>> from botorch.models import SingleTaskGP
        >>> model = SingleTaskGP(train_X, train_Y)
        >>> shift, variance, noise = exact_loo_posterior(model)
        >>> loo_mean = model.train_targets - shift  # point i without point i
        >>> shift.shape == variance.shape == noise.shape == (train_X.shape[0],)
        True

    Args:
        model: An exact GP (``train_inputs``, ``train_targets``, a Gaussian
            likelihood whose ``forward`` gives the noise) with its current
            hyperparameters; batched models give batched results.
        observation_noise: If ``True``, ``variance`` is the predictive variance of
            the left-out observation, ``1 / [K^{-1}]_ii`` (noise included), instead
            of the latent variance.

    Returns:
        ``(shift, variance, noise)``, each ``batch x n`` (model units): the LOO
        prediction of observation ``i`` is the observation (in the model's units)
        minus ``shift_i``, with variance ``variance_i``; ``noise_i`` is its noise
        variance. The latent variance is floored at ``MIN_LOO_VARIANCE``.
    """
    with torch.no_grad():
        # model units: the shift of a residual model applies to its observations
        loo = efficient_loo_cv(model, observation_noise=True, untransform=False)
        targets = model.train_targets
        shift = targets - loo.posterior.mean.reshape(targets.shape)
        variance = loo.posterior.variance.reshape(targets.shape)
        # the noise as the likelihood adds it at the training points
        noise = model.likelihood.forward(torch.zeros_like(targets)).variance
        if not observation_noise:
            variance = (variance - noise).clamp_min(MIN_LOO_VARIANCE)
    return shift, variance, noise.expand_as(targets)


def exact_loo_log_density(model: Model) -> Tensor:
    r"""Leave-one-out log predictive density of each training target of an exact GP.

    Target ``i`` is scored under its LOO predictive ``N(t_i - shift_i, 1 /
    [K^{-1}]_ii)`` (:func:`exact_loo_posterior` with ``observation_noise=True``),
    in the model's units: for densities of outcomes in other units, subtract the
    log of the outcome scale.

    Example:
        >>> from botorch.models import SingleTaskGP
        >>> model = SingleTaskGP(train_X, train_Y, outcome_transform=None)
        >>> score = exact_loo_log_density(model).mean()  # higher is better

    Args:
        model: An exact GP (see :func:`exact_loo_posterior`).

    Returns:
        ``batch x n`` log densities.
    """
    shift, variance, _ = exact_loo_posterior(model, observation_noise=True)
    targets = model.train_targets
    return normal_log_density(targets, targets - shift, variance)


def leave_input_out_shift(
    covariance: Tensor, residual: Tensor, inputs: Tensor
) -> Tensor:
    r"""Closed-form leave-input-out predictions: all observations at one input
    predicted from the observations at the other inputs.

    Replicates at one input predict each other, so plain LOO credits a GP that
    explains only its replicates. Leaving out the group ``G`` of observations at
    one input, with ``alpha = K^{-1} r``, the group's prediction is ``t_G -
    ([K^{-1}]_GG)^{-1} alpha_G`` (the block form of Rasmussen and Williams, eq.
    5.12; at an input without replicates, plain LOO).

    Args:
        covariance: ``n x n`` marginal covariance of the targets (noise included).
        residual: ``n`` targets minus the prior mean.
        inputs: ``n x d`` inputs; rows that are exactly equal form one group.

    Returns:
        ``n`` shifts: the leave-input-out prediction of target ``i`` is the target
        minus ``shift_i``.
    """
    if covariance.dim() != 2 or residual.dim() != 1 or inputs.dim() != 2:
        raise ValueError(
            "`covariance`, `residual` and `inputs` must be n x n, n and n x d "
            f"(not batched), got {tuple(covariance.shape)}, {tuple(residual.shape)} "
            f"and {tuple(inputs.shape)}."
        )
    K_inv, alpha = _inverse_and_weights(covariance, residual)
    shift = alpha / K_inv.diagonal()
    _, group, counts = torch.unique(
        inputs, dim=0, return_inverse=True, return_counts=True
    )
    for g in torch.nonzero(counts > 1).flatten().tolist():
        rows = torch.nonzero(group == g).flatten()
        block = K_inv[rows][:, rows]
        shift[rows] = torch.linalg.solve(block, alpha[rows])
    return shift
