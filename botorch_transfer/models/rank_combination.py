r"""Exact GPs on the same target data, combined by leave-one-out ranking evidence.

RGPE (Feurer, Letham and Bakshy 2018) weighs models by how well their leave-one-out
predictions order the target's observations and combines them as a weighted sum of
independent GPs. :class:`RankWeightedCombination` does this for GPs built on the
same target data: one or more models that bring outside knowledge (a transfer GP
per source, a meta-learned prior) and a target-only ``SingleTaskGP``. It is the base
of :class:`~botorch_transfer.RankWeightedTransferGP` and
:class:`~botorch_transfer.RankWeightedPriorGP`, which say what the knowledge models
are.

The weight ``w_k`` of each model is the fraction of ``num_samples`` leave-one-out
draws in which it ranks the target observations best (ties split at random), and
0 for a knowledge model whose median ranking loss is above the target-only GP's 95th
percentile (RGPE's weight-dilution rule); the posterior has mean ``sum_k w_k mu_k``
and covariance ``sum_k w_k^2 Sigma_k``. The weights are recomputed from all target
data at every fit.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
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
from torch.nn import ModuleList

from botorch_transfer.models.utils.assorted import check_single_output
from botorch_transfer.models.utils.ranking import (
    distinguishable_pairs,
    loo_ranking_losses,
    ranking_weights,
    weighted_combination,
)
from botorch_transfer.validation import check_integer, check_number


@dataclass(frozen=True)
class RankingOptions:
    r"""How the ranking weights are drawn.

    Args:
        num_samples: Draws of the leave-one-out ranking losses (default 256).
        pair_margin: If given, the ranking losses count only the pairs of target
            observations whose difference exceeds ``pair_margin`` standard
            deviations of the target noise of a difference (see
            :func:`~botorch_transfer.models.utils.ranking.distinguishable_pairs`):
            the order of two observations within the noise says nothing about the
            models. ``None`` (default): every pair, as RGPE.
    """

    num_samples: int = 256
    pair_margin: float | None = None

    def __post_init__(self) -> None:
        check_integer("num_samples", self.num_samples)
        if self.pair_margin is not None:
            margin = check_number("pair_margin", self.pair_margin)
            object.__setattr__(self, "pair_margin", margin)


class RankWeightedCombination(Model, GP, FantasizeMixin):
    r"""Base class: GPs with outside knowledge and a target-only GP on the same
    target data, combined by RGPE's ranking weights (see the module docstring).

    A subclass builds the GPs in its ``__init__`` (after this class's): the
    knowledge model (or a ``ModuleList`` of them) under the attribute named by
    :attr:`knowledge_model_name`, the target-only GP as ``target_model``; it may
    override the hooks :meth:`_ranked_targets`, :meth:`_models_to_fit`,
    :meth:`_excluded`, :meth:`_query_inputs` and :meth:`_condition_knowledge_model`.

    Args:
        num_samples: Draws of the leave-one-out ranking losses.
        seed: Seed of the draws (the weight is a deterministic function of the data
            and the hyperparameters).
        pair_margin: If given, the ranking losses count only the pairs of target
            observations whose difference exceeds ``pair_margin`` standard
            deviations of the target noise of a difference (see
            :class:`RankingOptions`). ``None``: every pair, as RGPE.
    """

    #: The attribute under which the subclass registers its knowledge model (or a
    #: ``ModuleList`` of them).
    knowledge_model_name: ClassVar[str]

    def __init__(
        self, num_samples: int = 256, seed: int = 0, pair_margin: float | None = None
    ) -> None:
        super().__init__()
        ranking = RankingOptions(num_samples=num_samples, pair_margin=pair_margin)
        num_samples, pair_margin = ranking.num_samples, ranking.pair_margin
        self.num_samples, self.seed, self.pair_margin = num_samples, seed, pair_margin
        self._weights: Tensor | None = None

    @staticmethod
    def _check_train_X(train_X: Tensor, before_first_point: str | None) -> None:
        r"""Raise unless ``train_X`` is ``n x d`` with ``n >= 1``
        (``before_first_point``: what to do before the first observation; ``None``:
        ``n = 0`` is allowed)."""
        if torch.is_tensor(train_X) and train_X.dim() != 2:
            raise ValueError(
                "`train_X` must have shape n x d (batched training data are not "
                f"supported), got {tuple(train_X.shape)}."
            )
        if before_first_point is None:
            return
        if torch.is_tensor(train_X) and train_X.shape[-2] == 0:
            raise ValueError(
                "`train_X` must hold at least one target point (the target-only GP "
                f"needs one); before the first observation, {before_first_point}."
            )

    @property
    def knowledge_models(self) -> tuple[Model, ...]:
        r"""The GPs with outside knowledge, in order (the target-only GP is not
        among them)."""
        held = self._modules[self.knowledge_model_name]
        return tuple(held) if isinstance(held, ModuleList) else (held,)

    @property
    def knowledge_model(self) -> Model:
        r"""The GP with outside knowledge, where there is one."""
        models = self.knowledge_models
        if len(models) != 1:
            raise AttributeError(
                f"{type(self).__name__} holds {len(models)} knowledge models; use "
                "`knowledge_models`."
            )
        return models[0]

    @property
    def target_X(self) -> Tensor:
        r"""The target inputs, raw (``X_baseline`` of noisy acquisition functions)."""
        return self.knowledge_models[0].target_X

    @property
    def target_Y(self) -> Tensor:
        r"""The target observations in the user's units (``best_f``'s source)."""
        return self.knowledge_models[0].target_Y

    # ------------------------------------------------------------------- hooks
    def _ranked_targets(self, model: Model) -> Tensor:
        r"""The observations a knowledge model's LOO draws are ranked against, in
        the units of its training targets."""
        return model.train_targets

    def _models_to_fit(self) -> tuple[Model, ...]:
        r"""The GPs :meth:`custom_fit` fits (default: the target-only GP)."""
        return (self.target_model,)

    def _excluded(self) -> list[bool]:
        r"""Per knowledge model, whether it gets weight 0 whatever the ranking
        (default: none)."""
        return [False] * len(self.knowledge_models)

    def _query_inputs(self, X: Tensor) -> Tensor:
        r"""Query inputs as all GPs take them."""
        return X

    def _condition_knowledge_model(
        self, model: Model, X: Tensor, Y: Tensor, noise: Tensor | None
    ) -> Model:
        r"""A knowledge model conditioned on ``(X, Y)`` (raw inputs, user units)."""
        return _condition_exact_gp(model, X, Y, noise)

    def _part_posterior(
        self, model: Model, X: Tensor, observation_noise: bool | Tensor
    ) -> GPyTorchPosterior:
        r"""One GP's posterior at ``X`` as the combination takes it (default: the
        GP's own, in the user's units)."""
        return model.posterior(X, observation_noise=observation_noise)

    def _part_posteriors(
        self, models: list[Model], X: Tensor, observation_noise: bool | Tensor
    ) -> list[GPyTorchPosterior]:
        r"""The posteriors at ``X`` of the GPs ``models`` (those with weight), in
        order (default: :meth:`_part_posterior` of each)."""
        return [self._part_posterior(model, X, observation_noise) for model in models]

    def _fit_part(self, model: Model, **kwargs: Any) -> None:
        r"""Fit one GP of :meth:`_models_to_fit` (default: ``fit_gpytorch_mll`` on
        its exact marginal likelihood, with ``fit_gpytorch_mll``'s keyword
        arguments)."""
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model), **kwargs)

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
        then recomputes the weights."""
        kwargs.pop("closure", None)  # a closure of the outer mll fits neither GP
        for model in self._models_to_fit():
            self._fit_part(model, **kwargs)
        self.update_weights()
        return mll.eval()

    def load_state_dict(self, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
        r"""Loads the GPs' hyperparameters; the weights are recomputed on use."""
        result = super().load_state_dict(state_dict, *args, **kwargs)
        self._weights = None
        return result

    # ----------------------------------------------------------------- weights
    @property
    def weights(self) -> Tensor:
        r"""The weights of the knowledge models and, last, of the target-only GP
        (they sum to 1); computed from the current hyperparameters if not yet
        fitted."""
        if self._weights is None:
            self.update_weights()
        return self._weights

    @property
    def weight(self) -> float:
        r"""The knowledge models' total weight ``w`` in ``[0, 1]`` (the target-only
        GP has ``1 - w``)."""
        return float(self.weights[:-1].sum())

    def ranking_losses(self) -> Tensor:
        r"""``(K + 1) x num_samples`` ranking losses of leave-one-out draws of the
        ``K`` knowledge models (in order) and, last, the target-only GP."""
        parts = [
            (model, self._ranked_targets(model)) for model in self.knowledge_models
        ]
        parts.append((self.target_model, self.target_model.train_targets))
        return loo_ranking_losses(
            parts, self.num_samples, self.seed, self.ranked_pairs()
        )

    def ranked_pairs(self) -> Tensor | None:
        r"""The ordered pairs of target observations the ranking losses count
        (``n x n`` booleans), or ``None`` for all (``pair_margin=None``)."""
        if self.pair_margin is None:
            return None
        # the noise of a new observation (with known noise levels, their mean)
        noise = self.target_noise_variance().reshape(-1)
        return distinguishable_pairs(
            self.target_Y.squeeze(-1), noise.to(self.target_Y), self.pair_margin
        )

    def update_weights(self) -> Tensor:
        r"""Recompute the weights from the target data. With fewer than 2 target
        points there is no pair to rank: the knowledge models not excluded share
        half the weight equally, or all of it with no target point (the target-only
        GP has nothing to predict from)."""
        excluded = self._excluded()
        kept = [k for k, out in enumerate(excluded) if not out]
        weights = torch.zeros(len(excluded) + 1, dtype=torch.float64)
        n = self.target_model.train_targets.shape[-1]
        if not kept:
            weights[-1] = 1.0
        elif n == 0:
            weights[kept] = 1.0 / len(kept)
        elif n < 2:
            weights[kept] = 0.5 / len(kept)
            weights[-1] = 0.5
        else:
            models = self.knowledge_models
            parts = [(models[k], self._ranked_targets(models[k])) for k in kept]
            parts.append((self.target_model, self.target_model.train_targets))
            losses = loo_ranking_losses(
                parts, self.num_samples, self.seed, self.ranked_pairs()
            )
            generator = torch.Generator().manual_seed(self.seed + 1)
            ranked = ranking_weights(losses, generator).cpu().to(torch.float64)
            weights[kept] = ranked[:-1]
            weights[-1] = ranked[-1]
        self._weights = weights
        return weights

    def update_weight(self) -> float:
        r"""Recompute the weights (:meth:`update_weights`); the knowledge models'
        total."""
        self.update_weights()
        return self.weight

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
        r"""RGPE's combination of the GPs over the ``q`` points of ``X``
        (``batch x q x d``), in the user's units: mean ``sum_k w_k mu_k``,
        covariance ``sum_k w_k^2 S_k``. A GP without weight is not evaluated.

        Args:
            X: Raw inputs.
            output_indices: ``None`` or ``[0]`` (single output).
            observation_noise: ``True`` adds the target's noise at ``X`` (the
                target-only GP's learned noise, or the mean of the known
                ``train_Yvar``), whole, as ``RGPE`` does: a new observation is
                noisy however the GPs are weighted. A tensor (``... x q x 1``)
                is passed to every GP, each in its own model units (as
                ``fantasize`` passes the training noise).
            posterior_transform: Optional transform applied at the end.
        """
        X = self._query_inputs(X)
        check_single_output(self, output_indices)
        models = (*self.knowledge_models, self.target_model)
        weighted = [
            (float(weight), model)
            for weight, model in zip(self.weights, models, strict=True)
            if weight > 0.0
        ]
        tensor_noise = isinstance(observation_noise, Tensor)
        part_noise = observation_noise if tensor_noise else False
        parts = self._part_posteriors([model for _, model in weighted], X, part_noise)
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
        r"""Every GP conditioned on ``(X, Y)`` (raw inputs, user units), the weights
        kept (as a fantasy model keeps its hyperparameters)."""
        X = self._query_inputs(X)
        weights = self.weights
        knowledge = [
            self._condition_knowledge_model(model, X, Y, noise)
            for model in self.knowledge_models
        ]
        target = _condition_exact_gp(self.target_model, X, Y, noise)
        new = copy.copy(self)
        new._modules = dict(self._modules)
        held = self._modules[self.knowledge_model_name]
        new._modules[self.knowledge_model_name] = (
            ModuleList(knowledge) if isinstance(held, ModuleList) else knowledge[0]
        )
        new._modules["target_model"] = target
        new._weights = weights
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
