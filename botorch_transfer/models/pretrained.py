r"""``PretrainedPriorGP``: BO with a GP prior pre-trained on related tasks
(HyperBO, Wang et al., Sec. 6, Algorithm 1).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from botorch.acquisition import ProbabilityOfImprovement
from botorch.acquisition.objective import PosteriorTransform
from botorch.fit import _fit_fallback
from botorch.models import SingleTaskGP
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from botorch.utils.datasets import SupervisedDataset
from gpytorch.constraints import GreaterThan
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.mlls import MarginalLogLikelihood
from torch import Tensor

from botorch_transfer.models.base import MovableExactGPMixin
from botorch_transfer.pretraining.prior import MIN_NOISE, PretrainedPrior
from botorch_transfer.validation import validate_training_data


class PretrainedPriorGP(MovableExactGPMixin, SingleTaskGP):
    r"""An exact GP whose mean, kernel and noise are a pre-trained prior (HyperBO).

    HyperBO (Wang et al., Algorithm 1) fixes the pre-trained ``GP(mu, k o sigma^2)``
    for the whole BO run: target observations are used for posterior inference only,
    never to re-fit the prior. So by default the model has no free hyperparameters
    (``fit_gpytorch_mll`` leaves it unchanged); ``fine_tune=True`` makes the copied
    prior's weights, kernel and noise trainable, e.g. by ``fit_gpytorch_mll``. The
    user's prior object is never modified.

    The prior works in the units of its pre-training data, so target outcomes must be
    in those units: the prior's own fixed affine normalization replaces an outcome
    transform (``outcome_transform`` must be ``None``). An ``input_transform`` is
    applied before the prior, as ``SingleTaskGP`` does; use one only if the prior was
    pre-trained on equally transformed inputs.

    Args:
        train_X: ``batch_shape x n x d`` target inputs (``n`` may be 0: the prior).
        train_Y: ``batch_shape x n x 1`` target observations.
        train_Yvar: Known observation noise variances (``batch_shape x n x 1``);
            default: the prior's noise.
        prior: A :class:`~botorch_transfer.pretraining.PretrainedPrior` (keyword).
        fine_tune: Make the prior's parameters trainable.
        input_transform: Optional input transform.
        outcome_transform: Must be ``None`` (see above).

    Example:
        >>> prior = pretrain_prior(related_tasks)
        >>> model = PretrainedPriorGP(train_X, train_Y, prior=prior)
        >>> acqf = hyperbo_probability_of_improvement(model)
        >>> candidate, _ = optimize_acqf(
        ...     acqf, bounds, q=1, num_restarts=5, raw_samples=256
        ... )
    """

    transfer_argument = "prior"
    # the prior normalizes outcomes with its pre-training statistics
    fixes_outcome_units = True

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        train_Yvar: Tensor | None = None,
        outcome_transform: OutcomeTransform | None = None,
        input_transform: InputTransform | None = None,
        *,
        prior: PretrainedPrior,
        fine_tune: bool = False,
    ) -> None:
        validate_training_data(train_X, train_Y, train_Yvar)
        if not isinstance(prior, PretrainedPrior):
            raise TypeError(
                f"`prior` must be a PretrainedPrior, got {type(prior).__name__}."
            )
        if outcome_transform is not None:
            raise ValueError(
                "`outcome_transform` must be None: the pre-trained prior fixes the "
                "output units (it normalizes outcomes with the statistics of its "
                "pre-training tasks); "
                "give train_Y in the units of the pre-training data."
            )
        d_model = train_X.shape[-1] if input_transform is None else None
        if d_model is not None and d_model != prior.dim:
            raise ValueError(
                f"`train_X` has d={d_model} but `prior` was pre-trained on "
                f"d={prior.dim} inputs."
            )
        prior = copy.deepcopy(prior).to(train_X)
        prior.requires_grad_(bool(fine_tune))
        if train_Yvar is None:
            scale2 = prior.mean_module.scale.pow(2).item()
            likelihood = GaussianLikelihood(
                noise_constraint=GreaterThan(MIN_NOISE * scale2),
                batch_shape=train_X.shape[:-2],
            ).to(train_X)
            likelihood.noise = prior.noise.detach().clamp_min(2 * MIN_NOISE * scale2)
            likelihood.requires_grad_(bool(fine_tune))
        else:
            likelihood = FixedNoiseGaussianLikelihood(
                noise=train_Yvar.squeeze(-1), batch_shape=train_X.shape[:-2]
            )
        super().__init__(
            train_X,
            train_Y,
            train_Yvar=None,
            likelihood=likelihood,
            covar_module=prior.covar_module,
            mean_module=prior.mean_module,
            outcome_transform=None,
            input_transform=input_transform,
        )
        self.fine_tune = bool(fine_tune)
        self._known_noise = train_Yvar is not None
        # the noise at a new point when the training noise was given per point
        self.register_buffer("prior_noise", prior.noise.detach().clone())
        self.to(train_X)

    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: PosteriorTransform | None = None,
        **kwargs: Any,
    ):
        r"""The GP posterior at ``X`` (``batch_shape x q x d``), joint over ``q``.

        With known training noise (``train_Yvar``) and ``observation_noise=True``
        the prior's noise is added at ``X``; pass a tensor for other noise levels.
        """
        if X.dim() < 2:
            raise ValueError(
                f"`X` must have shape batch_shape x q x d, got {tuple(X.shape)}."
            )
        if observation_noise is True and self._known_noise:
            observation_noise = self.prior_noise.expand(X.shape[:-1] + torch.Size([1]))
        return super().posterior(
            X,
            output_indices=output_indices,
            observation_noise=observation_noise,
            posterior_transform=posterior_transform,
            **kwargs,
        )

    def custom_fit(
        self, mll: MarginalLogLikelihood, **kwargs: Any
    ) -> MarginalLogLikelihood:
        r"""Called by ``fit_gpytorch_mll``: a no-op for a frozen prior (HyperBO never
        re-fits it), BoTorch's default fit when ``fine_tune=True``."""
        if not any(p.requires_grad for p in mll.parameters()):
            return mll.eval()
        return _fit_fallback(mll=mll, **kwargs)

    @classmethod
    def construct_inputs(
        cls, training_data: SupervisedDataset, *, prior: PretrainedPrior, **kwargs: Any
    ) -> dict[str, Any]:
        r"""Inputs for ``__init__`` from a BoTorch dataset (used by Ax)."""
        inputs = super().construct_inputs(training_data=training_data)
        inputs["prior"] = prior
        inputs.update(kwargs)
        return inputs


def hyperbo_probability_of_improvement(
    model: PretrainedPriorGP, margin: float = 0.1, best_f: float | Tensor | None = None
) -> ProbabilityOfImprovement:
    r"""The paper's default acquisition: PI with threshold ``max(y) + margin``
    (Sec. 7.2).

    Args:
        model: The model (any single-output BoTorch model works).
        margin: Added to the best observation (paper: 0.1, in the units of ``y``).
        best_f: The best observation (default: the model's best training target).

    Returns:
        BoTorch's ``ProbabilityOfImprovement`` with ``best_f = max(y) + margin``.
    """
    if best_f is None:
        targets = model.train_targets
        if targets.shape[-1] == 0:
            raise ValueError(
                "The model has no training data; "
                "pass `best_f` (e.g. the prior mean's maximum)."
            )
        best_f = targets.max(dim=-1).values
    return ProbabilityOfImprovement(model, best_f=torch.as_tensor(best_f) + margin)
