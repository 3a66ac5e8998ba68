r"""Two exact GPs on the same target data, combined by leave-one-out ranking evidence.

RGPE (Feurer, Letham and Bakshy 2018) weighs models by how well their leave-one-out
predictions order the target's observations and combines them as a weighted sum of
independent GPs. :class:`RankWeightedCombination` does this for two GPs built on
the same target data: a model that brings outside knowledge (a transfer GP, a
meta-learned prior) and a target-only ``SingleTaskGP``. It is the base of
:class:`~botorch_transfer.RankWeightedTransferGP` and
:class:`~botorch_transfer.RankWeightedPriorGP`, which say what the first model is.

The weight ``w`` of the first model is the fraction of ``num_samples`` leave-one-out
draws in which it ranks the target observations better (ties split at random), and
0 when its median ranking loss is above the target-only GP's 95th percentile
(RGPE's weight-dilution rule); the posterior has mean ``w mu_1 + (1 - w) mu_2`` and
covariance ``w^2 Sigma_1 + (1 - w)^2 Sigma_2``. The weight is recomputed from all
target data at every fit.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from botorch.acquisition.objective import PosteriorTransform
from botorch.fit import fit_gpytorch_mll
from botorch.models.model import FantasizeMixin, Model
from botorch.posteriors import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood, MarginalLogLikelihood
from gpytorch.models import GP
from linear_operator.operators import DiagLinearOperator
from torch import Tensor

from botorch_transfer.models.base import check_single_output
from botorch_transfer.models.loo import exact_loo_posterior
from botorch_transfer.models.rgpe import ranking_loss, ranking_weights


def loo_ranking_losses(
    parts: Sequence[tuple[Model, Tensor]], num_samples: int, seed: int
) -> Tensor:
    r"""Ranking losses of leave-one-out draws of exact GPs on the same target points.

    Each model's closed-form leave-one-out posteriors at its training points
    (:func:`~botorch_transfer.models.loo.exact_loo_posterior`) are drawn
    ``num_samples`` times (one generator seeded with ``seed``, drawn on the CPU for
    every model in turn, so that a seed gives the same losses on every device), and
    each draw's misordered pairs of the observations are counted
    (:func:`~botorch_transfer.models.rgpe.ranking_loss`).

    Args:
        parts: ``(model, y)`` pairs: an exact GP and its ``n`` observations in the
            units of its training targets (for a residual model, the observations,
            not the residuals).
        num_samples: Draws per model.
        seed: Seed of the draws.

    Returns:
        ``len(parts) x num_samples`` losses.
    """
    generator = torch.Generator().manual_seed(seed)
    losses = []
    for model, y in parts:
        shift, variance, _ = exact_loo_posterior(model)
        z = torch.randn(num_samples, y.shape[-1], generator=generator, dtype=y.dtype)
        draws = (y - shift) + variance.sqrt() * z.to(y.device)
        losses.append(ranking_loss(draws, y))
    return torch.stack(losses)


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


class RankWeightedCombination(Model, GP, FantasizeMixin):
    r"""Base class: a GP with outside knowledge and a target-only GP on the same
    target data, combined by RGPE's ranking weight (see the module docstring).

    A subclass builds both GPs in its ``__init__`` (after this class's), registered
    under the attribute named by :attr:`knowledge_model_name` and as
    ``target_model``, and may override the hooks :meth:`_ranked_targets`,
    :meth:`_models_to_fit`, :meth:`_forced_weight`, :meth:`_query_inputs` and
    :meth:`_condition_knowledge_model`.

    Args:
        num_samples: Draws of the leave-one-out ranking losses.
        seed: Seed of the draws (the weight is a deterministic function of the data
            and the hyperparameters).
    """

    #: The attribute under which the subclass registers its first GP.
    knowledge_model_name: ClassVar[str]

    def __init__(self, num_samples: int = 256, seed: int = 0) -> None:
        super().__init__()
        if not isinstance(num_samples, int) or isinstance(num_samples, bool):
            raise TypeError(f"`num_samples` must be an int, got {num_samples!r}.")
        if num_samples < 1:
            raise ValueError(f"`num_samples` must be positive, got {num_samples}.")
        self.num_samples, self.seed = num_samples, seed
        self._weight: float | None = None

    @staticmethod
    def _check_train_X(train_X: Tensor, before_first_point: str) -> None:
        r"""Raise unless ``train_X`` is ``n x d`` with ``n >= 1``
        (``before_first_point``: what to do before the first observation)."""
        if torch.is_tensor(train_X) and train_X.dim() != 2:
            raise ValueError(
                "`train_X` must have shape n x d (batched training data are not "
                f"supported), got {tuple(train_X.shape)}."
            )
        if torch.is_tensor(train_X) and train_X.shape[-2] == 0:
            raise ValueError(
                "`train_X` must hold at least one target point (the target-only GP "
                f"needs one); before the first observation, {before_first_point}."
            )

    @property
    def knowledge_model(self) -> Model:
        r"""The GP with outside knowledge (the first of the two)."""
        return self._modules[self.knowledge_model_name]

    @property
    def target_X(self) -> Tensor:
        r"""The target inputs, raw (``X_baseline`` of noisy acquisition functions)."""
        return self.knowledge_model.target_X

    @property
    def target_Y(self) -> Tensor:
        r"""The target observations in the user's units (``best_f``'s source)."""
        return self.knowledge_model.target_Y

    # ------------------------------------------------------------------- hooks
    def _ranked_targets(self) -> Tensor:
        r"""The observations the knowledge model's LOO draws are ranked against,
        in the units of its training targets."""
        return self.knowledge_model.train_targets

    def _models_to_fit(self) -> tuple[Model, ...]:
        r"""The GPs :meth:`custom_fit` fits (default: the target-only GP)."""
        return (self.target_model,)

    def _forced_weight(self) -> float | None:
        r"""A weight that the ranking does not decide, or ``None``."""
        return None

    def _query_inputs(self, X: Tensor) -> Tensor:
        r"""Query inputs as both GPs take them."""
        return X

    def _condition_knowledge_model(
        self, X: Tensor, Y: Tensor, noise: Tensor | None
    ) -> Model:
        r"""The knowledge model conditioned on ``(X, Y)`` (raw inputs, user units)."""
        return _condition_exact_gp(self.knowledge_model, X, Y, noise)

    # ----------------------------------------------------------------- fitting
    @property
    def likelihood(self):
        r"""The target-only GP's likelihood (what ``ExactMarginalLogLikelihood``
        is built with; :meth:`custom_fit` fits the GPs)."""
        return self.target_model.likelihood

    def custom_fit(
        self, mll: MarginalLogLikelihood, **kwargs: Any
    ) -> MarginalLogLikelihood:
        r"""Called by ``fit_gpytorch_mll``: fits the GPs that are fitted (each by its
        exact marginal likelihood, with ``fit_gpytorch_mll``'s keyword arguments),
        then recomputes the weight."""
        kwargs.pop("closure", None)  # a closure of the outer mll fits neither GP
        for model in self._models_to_fit():
            fit_gpytorch_mll(
                ExactMarginalLogLikelihood(model.likelihood, model), **kwargs
            )
        self.update_weight()
        return mll.eval()

    def load_state_dict(self, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
        r"""Loads both GPs' hyperparameters; the weight is recomputed on use."""
        result = super().load_state_dict(state_dict, *args, **kwargs)
        self._weight = None
        return result

    # ------------------------------------------------------------------ weight
    @property
    def weight(self) -> float:
        r"""The knowledge model's weight ``w`` in ``[0, 1]`` (the target-only GP has
        ``1 - w``); computed from the current hyperparameters if not yet fitted."""
        if self._weight is None:
            self.update_weight()
        return self._weight

    def ranking_losses(self) -> Tensor:
        r"""``2 x num_samples`` ranking losses of leave-one-out draws of the
        knowledge model (first) and the target-only GP (second)."""
        parts = (
            (self.knowledge_model, self._ranked_targets()),
            (self.target_model, self.target_model.train_targets),
        )
        return loo_ranking_losses(parts, self.num_samples, self.seed)

    def update_weight(self) -> float:
        r"""Recompute the weight from the target data (0.5 with fewer than 2 target
        points: no pair to rank)."""
        forced = self._forced_weight()
        if forced is not None:
            self._weight = forced
        elif self.target_model.train_targets.shape[-1] < 2:
            self._weight = 0.5
        else:
            losses = self.ranking_losses()
            generator = torch.Generator().manual_seed(self.seed + 1)
            self._weight = float(ranking_weights(losses, generator)[0])
        return self._weight

    # --------------------------------------------------------------- posterior
    @property
    def num_outputs(self) -> int:
        return 1

    @property
    def batch_shape(self) -> torch.Size:
        return self.target_model.batch_shape

    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: PosteriorTransform | None = None,
        **kwargs: Any,
    ) -> GPyTorchPosterior:
        r"""RGPE's combination of the two GPs over the ``q`` points of ``X``
        (``batch x q x d``), in the user's units: mean ``w mu_1 + (1 - w) mu_2``,
        covariance ``w^2 S_1 + (1 - w)^2 S_2``. A GP without weight is not
        evaluated.

        Args:
            X: Raw inputs.
            output_indices: ``None`` or ``[0]`` (single output).
            observation_noise: ``True`` adds the target's noise at ``X`` (the
                target-only GP's learned noise, or the mean of the known
                ``train_Yvar``), whole, as ``RGPE`` does: a new observation is
                noisy however the two GPs are weighted. A tensor (``... x q x 1``)
                is passed to both GPs, each in its own model units (as
                ``fantasize`` passes the training noise).
            posterior_transform: Optional transform applied at the end.
        """
        X = self._query_inputs(X)
        check_single_output(self, output_indices)
        w = self.weight
        weighted = [(w, self.knowledge_model), (1.0 - w, self.target_model)]
        weighted = [(weight, model) for weight, model in weighted if weight > 0.0]
        tensor_noise = isinstance(observation_noise, Tensor)
        part_noise = observation_noise if tensor_noise else False
        parts = [
            model.posterior(X, observation_noise=part_noise) for _, model in weighted
        ]
        posterior = weighted_combination(parts, [weight for weight, _ in weighted])
        if observation_noise is True:
            mvn = posterior.distribution
            noise = self.target_noise_variance().expand(mvn.mean.shape)
            covariance = mvn.lazy_covariance_matrix + DiagLinearOperator(noise)
            posterior = GPyTorchPosterior(MultivariateNormal(mvn.mean, covariance))
        if posterior_transform is not None:
            return posterior_transform(posterior)
        return posterior

    def target_noise_variance(self) -> Tensor:
        r"""The noise variance of a new target observation in the user's units,
        ``batch_shape x 1``: the target-only GP's learned noise, or the mean of its
        known training noise (BoTorch's convention for fixed-noise GPs)."""
        target = self.target_model
        noise = target.likelihood.noise
        if isinstance(target.likelihood, FixedNoiseGaussianLikelihood):
            noise = noise.mean(dim=-1, keepdim=True)
        outcome_transform = getattr(target, "outcome_transform", None)
        if outcome_transform is None:
            return noise
        # an outcome transform maps a variance to the user's units with its mean
        _, noise = outcome_transform.untransform(
            torch.zeros_like(noise).unsqueeze(-1), noise.unsqueeze(-1)
        )
        return noise.squeeze(-1)

    def condition_on_observations(
        self, X: Tensor, Y: Tensor, noise: Tensor | None = None, **kwargs: Any
    ) -> RankWeightedCombination:
        r"""Both GPs conditioned on ``(X, Y)`` (raw inputs, user units), the weight
        kept (as a fantasy model keeps its hyperparameters)."""
        X = self._query_inputs(X)
        knowledge = self._condition_knowledge_model(X, Y, noise)
        target = _condition_exact_gp(self.target_model, X, Y, noise)
        new = copy.copy(self)
        new._modules = dict(self._modules)
        new._modules[self.knowledge_model_name] = knowledge
        new._modules["target_model"] = target
        new._weight = self.weight
        return new


def _condition_exact_gp(
    model: Model, X: Tensor, Y: Tensor, noise: Tensor | None
) -> Model:
    r"""An exact BoTorch GP conditioned on raw inputs ``X`` and observations ``Y``
    (its ``condition_on_observations`` takes transformed inputs)."""
    if model.prediction_strategy is None:
        model.posterior(X)  # GPyTorch conditions on its caches
    noise_kwargs = {} if noise is None else {"noise": noise}
    return model.condition_on_observations(model.transform_inputs(X), Y, **noise_kwargs)
