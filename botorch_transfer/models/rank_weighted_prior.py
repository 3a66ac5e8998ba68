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

The ranking sees only the order of a few points, and a prior that orders them by
chance keeps weight while it predicts them badly. A prior whose leave-one-out
predictions of the target's observations miss them by more than
``PRIOR_MISFIT_MAX_RMS_Z`` of its own predictive standard deviations (root mean
square) is confidently wrong about this target (unlike its tasks, or in other
units): it gets weight 0 and the model warns (``PriorMisfitWarning``).
"""

from __future__ import annotations

import copy
import math
import warnings
from typing import ClassVar

from botorch.models import SingleTaskGP
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import Standardize
from torch import Tensor

from botorch_transfer.models.pretrained import PretrainedPriorGP
from botorch_transfer.models.rank_combination import RankWeightedCombination
from botorch_transfer.models.utils.loo import exact_loo_posterior
from botorch_transfer.priors.hyperbo.mixture import PretrainedPriorMixture
from botorch_transfer.priors.hyperbo.prior import PretrainedPrior

#: The prior gets weight 0 when its leave-one-out predictions of the target's
#: observations miss by more than this many of its predictive standard deviations
#: (root mean square; 1 for a calibrated prior). Chosen on a synthetic family (see
#: docs/decisions.md): related and sign-flipped targets stay below 8, unrelated ones
#: mostly lie at 20-80.
PRIOR_MISFIT_MAX_RMS_Z = 10.0


class PriorMisfitWarning(UserWarning):
    r"""A pre-trained prior predicts the target's observations far outside its own
    uncertainty, so a model gives it no weight."""


class RankWeightedPriorGP(RankWeightedCombination):
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

    knowledge_model_name: ClassVar[str] = "prior_model"

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
        super().__init__(num_samples=num_samples, seed=seed)
        if not isinstance(prior, (PretrainedPrior, PretrainedPriorMixture)):
            raise TypeError(
                "`prior` must be a PretrainedPrior or a PretrainedPriorMixture (from "
                f"pretrain_prior or pretrain_clustered_prior), got "
                f"{type(prior).__name__}."
            )
        self._check_train_X(train_X, "use PretrainedPriorGP (the prior alone)")
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

    @property
    def prior_misfit(self) -> float:
        r"""Root mean square of the prior model's standardized leave-one-out errors
        at the target's observations (about 1 for a prior that fits; NaN with
        fewer than 2 points)."""
        if self.target_model.train_targets.shape[-1] < 2:
            return math.nan
        shift, variance, _ = exact_loo_posterior(
            self.prior_model, observation_noise=True
        )
        return (shift.pow(2) / variance).mean().sqrt().item()

    def _excluded(self) -> list[bool]:
        misfit = self.prior_misfit
        if not misfit > PRIOR_MISFIT_MAX_RMS_Z:
            return [False]
        warnings.warn(
            "The pre-trained prior's leave-one-out predictions of `train_Y` miss by "
            f"{misfit:.3g} of its own standard deviations (root mean square; above "
            f"{PRIOR_MISFIT_MAX_RMS_Z:g}): the target looks unlike the prior's tasks "
            "or is in other units than their data, so the prior gets weight 0 and "
            "the model is the target-only GP.",
            PriorMisfitWarning,
            stacklevel=2,
        )
        return [True]

    @property
    def prior_weight(self) -> float:
        r"""The prior model's weight ``w`` in ``[0, 1]`` (the target-only GP has
        ``1 - w``); computed from the current hyperparameters if not yet fitted."""
        return self.weight
