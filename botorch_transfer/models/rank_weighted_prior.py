r"""A meta-learned prior GP and a target-only GP, weighted by how well each ranks
the target.

:class:`RankWeightedPriorGP` is built like a ``PretrainedPriorGP`` (the same
``prior=``) and fitted with ``fit_gpytorch_mll``. Inside are two GPs on the same
target data:

- the prior model: a :class:`~botorch_transfer.PretrainedPriorGP` on the
  pre-trained prior (a ``PretrainedPrior`` or a ``PretrainedPriorMixture``), frozen;
- a target-only ``SingleTaskGP`` with BoTorch's defaults.

The posterior combines the two as :class:`~botorch_transfer.RankWeightedTransferGP`
combines its transfer and target-only GPs (RGPE's combination, Feurer, Letham and
Bakshy 2018): mean ``w mu_prior + (1 - w) mu_target``, covariance ``w^2
Sigma_prior + (1 - w)^2 Sigma_target``, with ``w`` the fraction of leave-one-out
draws in which the prior model ranks the target observations better (RGPE's
weight-dilution rule included). When the target's points disagree with what the
meta-tasks taught the prior, the weight moves to the target-only GP; it is
recomputed from all target data at every fit.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from botorch.acquisition.objective import PosteriorTransform
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.model import FantasizeMixin, Model
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import Standardize
from botorch.posteriors import GPyTorchPosterior
from gpytorch.mlls import ExactMarginalLogLikelihood, MarginalLogLikelihood
from gpytorch.models import GP
from torch import Tensor

from botorch_transfer.models.pretrained import PretrainedPriorGP
from botorch_transfer.models.rank_weighted import (
    loo_ranking_losses,
    weighted_combination,
)
from botorch_transfer.models.rgpe import ranking_weights
from botorch_transfer.pretraining.mixture import PretrainedPriorMixture
from botorch_transfer.pretraining.prior import PretrainedPrior


class RankWeightedPriorGP(Model, GP, FantasizeMixin):
    r"""A pre-trained prior GP and a target-only GP, weighted by ranking evidence.

    See the module docstring for the model. Build it every BO iteration as you build
    a ``PretrainedPriorGP`` and fit it with ``fit_gpytorch_mll`` (which fits the
    target-only GP and recomputes the weight; the prior stays frozen).

    Args:
        train_X: ``n x d`` target inputs (``n >= 1``: the target-only GP needs a
            point; before the first observation use ``PretrainedPriorGP``).
        train_Y: ``n x 1`` target observations, in the units of the pre-training data
            (as ``PretrainedPriorGP`` takes them).
        train_Yvar: Optional ``n x 1`` known target noise variances; else each GP
            has its own noise (the prior's pre-trained noise, the target-only GP's
            learned one).
        input_transform: Input transform of both GPs (e.g. ``Normalize(d,
            bounds=bounds)`` when the prior was pre-trained on the unit cube).
        prior: The pre-trained prior (keyword): a ``PretrainedPrior`` or a
            ``PretrainedPriorMixture``.
        num_samples: Draws of the leave-one-out ranking losses.
        seed: Seed of the draws (the weight is a deterministic function of the data
            and the hyperparameters).

    Example:
        >>> prior = pretrain_prior(related_tasks)
        >>> model = RankWeightedPriorGP(train_X, train_Y, prior=prior)
        >>> mll = fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        >>> w = model.prior_weight  # how much the prior acts, in [0, 1]
        >>> acqf = UpperConfidenceBound(model, beta=1.0)
    """

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        train_Yvar: Tensor | None = None,
        input_transform: InputTransform | None = None,
        *,
        prior: PretrainedPrior | PretrainedPriorMixture,
        num_samples: int = 256,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not isinstance(num_samples, int) or isinstance(num_samples, bool):
            raise TypeError(f"`num_samples` must be an int, got {num_samples!r}.")
        if num_samples < 1:
            raise ValueError(f"`num_samples` must be positive, got {num_samples}.")
        if not isinstance(prior, (PretrainedPrior, PretrainedPriorMixture)):
            raise TypeError(
                "`prior` must be a PretrainedPrior or a PretrainedPriorMixture (from "
                f"pretrain_prior or pretrain_clustered_prior), got "
                f"{type(prior).__name__}."
            )
        if torch.is_tensor(train_X) and train_X.dim() != 2:
            raise ValueError(
                "`train_X` must have shape n x d (batched training data are not "
                f"supported), got {tuple(train_X.shape)}."
            )
        if torch.is_tensor(train_X) and train_X.shape[-2] == 0:
            raise ValueError(
                "`train_X` must hold at least one target point (the target-only GP "
                "needs one); before the first observation, use PretrainedPriorGP "
                "(the prior alone)."
            )
        self.num_samples, self.seed = num_samples, seed
        self.prior_model = PretrainedPriorGP(
            train_X,
            train_Y,
            train_Yvar,
            input_transform=copy.deepcopy(input_transform),
            prior=prior,
        )
        self.target_model = SingleTaskGP(
            train_X,
            train_Y,
            train_Yvar,
            outcome_transform=Standardize(m=1),
            input_transform=copy.deepcopy(input_transform),
        )
        self._weight: float | None = None

    # ----------------------------------------------------------------- fitting
    @property
    def likelihood(self):
        r"""The target-only GP's likelihood (what ``ExactMarginalLogLikelihood``
        is built with; :meth:`custom_fit` fits that GP)."""
        return self.target_model.likelihood

    def custom_fit(
        self, mll: MarginalLogLikelihood, **kwargs: Any
    ) -> MarginalLogLikelihood:
        r"""Called by ``fit_gpytorch_mll``: fits the target-only GP by its exact
        marginal likelihood (with ``fit_gpytorch_mll``'s keyword arguments), then
        recomputes the weight. The prior model is pre-trained and stays frozen."""
        kwargs.pop("closure", None)  # a closure of the outer mll fits neither GP
        model = self.target_model
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model), **kwargs)
        self.update_weight()
        return mll.eval()

    def load_state_dict(self, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
        r"""Loads the target-only GP's hyperparameters; the weight is recomputed on
        use."""
        result = super().load_state_dict(state_dict, *args, **kwargs)
        self._weight = None
        return result

    # ------------------------------------------------------------------ weight
    @property
    def prior_weight(self) -> float:
        r"""The prior model's weight ``w`` in ``[0, 1]`` (the target-only GP has
        ``1 - w``); computed from the current hyperparameters if not yet fitted."""
        if self._weight is None:
            self.update_weight()
        return self._weight

    def ranking_losses(self) -> Tensor:
        r"""``2 x num_samples`` ranking losses of leave-one-out draws of the prior
        model (first) and the target-only GP (second)."""
        parts = (
            (self.prior_model, self.prior_model.train_targets),
            (self.target_model, self.target_model.train_targets),
        )
        return loo_ranking_losses(parts, self.num_samples, self.seed)

    def update_weight(self) -> float:
        r"""Recompute :attr:`prior_weight` from the target data (0.5 with fewer than
        2 target points: no pair to rank)."""
        if self.target_model.train_targets.shape[-1] < 2:
            self._weight = 0.5
            return self._weight
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
        covariance ``w^2 S_1 + (1 - w)^2 S_2``."""
        if output_indices is not None and list(output_indices) != [0]:
            raise ValueError(
                f"`output_indices` must be None or [0] (one output), got "
                f"{output_indices!r}."
            )
        w = self.prior_weight
        parts = [
            model.posterior(X, observation_noise=observation_noise)
            for model in (self.prior_model, self.target_model)
        ]
        posterior = weighted_combination(parts, (w, 1.0 - w))
        if posterior_transform is not None:
            return posterior_transform(posterior)
        return posterior

    def condition_on_observations(
        self, X: Tensor, Y: Tensor, noise: Tensor | None = None, **kwargs: Any
    ) -> RankWeightedPriorGP:
        r"""Both GPs conditioned on ``(X, Y)`` (raw inputs, user units), the weight
        kept (as a fantasy model keeps its hyperparameters)."""
        noise_kwargs = {} if noise is None else {"noise": noise}
        conditioned = []
        for model in (self.prior_model, self.target_model):
            if model.prediction_strategy is None:
                model.posterior(X)  # GPyTorch conditions on its caches
            conditioned.append(
                model.condition_on_observations(
                    model.transform_inputs(X), Y, **noise_kwargs
                )
            )
        new = copy.copy(self)
        new._modules = dict(self._modules)
        new._modules["prior_model"], new._modules["target_model"] = conditioned
        new._weight = self.prior_weight
        return new
