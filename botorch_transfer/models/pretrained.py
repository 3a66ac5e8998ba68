r"""``PretrainedPriorGP``: BO with a GP prior pre-trained on related tasks
(HyperBO, Wang et al., Sec. 6, Algorithm 1).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from botorch.exceptions.errors import UnsupportedError
from botorch.models.transforms.input import InputTransform, Normalize
from botorch.models.transforms.outcome import OutcomeTransform
from gpytorch.constraints import GreaterThan
from gpytorch.distributions import MultivariateNormal
from gpytorch.likelihoods import GaussianLikelihood, Likelihood
from gpytorch.means import Mean
from gpytorch.mlls import MarginalLogLikelihood
from gpytorch.priors import LogNormalPrior
from torch import Tensor
from torch.nn import Module

from botorch_transfer._deprecation import moved_names
from botorch_transfer.models.base import SourceConditionedGP, TrainingData
from botorch_transfer.priors.hyperbo.mixture import (
    MixturePriorKernel,
    MixturePriorMean,
    PretrainedPriorMixture,
)
from botorch_transfer.priors.hyperbo.prior import MIN_NOISE, PretrainedPrior

#: Standard deviation of the log of a fine-tuned empirical prior's lengthscales,
#: outputscale and noise around their pre-trained values (``LogNormalPrior``s): a
#: factor ``e`` either way is one sd. Without them, marginal-likelihood fits on a
#: few target points sent the lengthscales and outputscale to 1e4-1e6 and failed.
FINE_TUNE_LOG_SD = 1.0
#: Degrees of freedom of the inverse-gamma prior on the prior's overall scale
#: (``prior_scale_dof``): 2 is weak, one "pseudo-observation" per unit.
PRIOR_SCALE_DOF = 2.0
#: The default likelihood's noise is kept at least this multiple of its
#: constraint's lower bound (GPyTorch refuses a noise below the bound, and at it the
#: raw value is infinite), both when it is built from the prior's noise and when
#: ``prior_scale_dof`` scales it.
NOISE_BOUND_MARGIN = 2.0


class PretrainedPriorGP(SourceConditionedGP):
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

    ``train_targets`` are the target outcomes as given (there is no outcome
    transform); as on every model of the package, ``target_X``, ``target_Y`` and
    ``target_Yvar`` are the target data in the user's units, e.g. for
    ``best_f=model.target_Y.max()`` and ``X_baseline=model.target_X``.

    Args:
        train_X: ``batch_shape x n x d`` target inputs (``n`` may be 0: the prior).
        train_Y: ``batch_shape x n x 1`` target observations.
        train_Yvar: Known observation noise variances (``batch_shape x n x 1``);
            default: the prior's noise.
        likelihood: Default: a ``GaussianLikelihood`` at the prior's noise (frozen
            unless ``fine_tune``), or the known ``train_Yvar``.
        outcome_transform: Must be ``None`` (see above).
        input_transform: Optional input transform.
        prior: A :class:`~botorch_transfer.priors.hyperbo.PretrainedPrior` (keyword),
            or a :class:`~botorch_transfer.priors.hyperbo.PretrainedPriorMixture` of
            cluster priors (``pretrain_clustered_prior``): the GP's prior is then
            their moment-matched mixture, weighted by the clusters' posterior
            probabilities given this model's training data (``cluster_weights``;
            the clusters' shares with no data), fixed thereafter
            (``condition_on_observations`` and ``fantasize`` keep them; rebuild
            the model to update them, as in a BO loop).
        fine_tune: Make the prior's parameters trainable. For the empirical prior
            (``pretrain_prior``'s default on shared inputs) these are its base
            kernel's lengthscales and outputscale: its mean and covariance are
            re-derived from the meta-tasks' statistics with the current kernel
            (:class:`~botorch_transfer.priors.hyperbo.prior.EmpiricalStructure`), so
            the target's data decide how far the prior interpolates between and
            beyond the meta-tasks' inputs. Log-normal priors centred on the
            pre-trained kernel and noise (``FINE_TUNE_LOG_SD``) keep a fit on a few
            points from running away.
        prior_scale_dof: ``nu`` of an inverse-gamma prior ``IG(nu / 2, nu / 2)`` on
            one scale ``s^2`` of the prior's covariance and noise, updated by the
            target data: ``s^2 = (nu + r^T C^{-1} r) / (nu + n)``, with ``r`` the
            target outcomes minus the prior mean and ``C`` the prior covariance
            plus noise at the target inputs (the scale of the Student-t predictive
            this hierarchy gives; the posterior mean is unchanged). A target
            the meta-tasks describe badly widens the prior, one they describe well
            narrows it. A noise given as ``train_Yvar`` or ``likelihood`` is not
            scaled. ``None``: the pre-trained scale as it is (HyperBO). Not with
            ``fine_tune`` (which fits the kernel's outputscale). With a mixture
            prior, ``s^2`` is computed after the cluster weights.

    Example:
        >>> prior = pretrain_prior(related_tasks)
        >>> model = PretrainedPriorGP(train_X, train_Y, prior=prior)  # n may be 0
        >>> acqf = UpperConfidenceBound(model, beta=1.0)  # the README's loop
        >>> # the paper's acquisition: hyperbo_probability_of_improvement(model)
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
        likelihood: Likelihood | None = None,
        outcome_transform: OutcomeTransform | None = None,
        input_transform: InputTransform | None = None,
        *,
        prior: PretrainedPrior | PretrainedPriorMixture,
        fine_tune: bool = False,
        prior_scale_dof: float | None = None,
    ) -> None:
        if outcome_transform is not None:
            raise ValueError(
                "`outcome_transform` must be None: the pre-trained prior fixes the "
                "output units (it normalizes outcomes with the statistics of its "
                "pre-training tasks); "
                "give train_Y in the units of the pre-training data."
            )
        self.fine_tune = bool(fine_tune)
        self._default_noise = likelihood is None and train_Yvar is None
        if prior_scale_dof is not None:
            if fine_tune:
                raise ValueError(
                    "`prior_scale_dof` and `fine_tune=True` both set the prior's "
                    "scale; use one of them."
                )
            if not prior_scale_dof > 0:  # also refuses NaN
                raise ValueError(
                    "`prior_scale_dof` must be positive or None, got "
                    f"{prior_scale_dof}."
                )
        # the prior sees transformed inputs: their d is train_X's unless the
        # transform changes it (Normalize, Ax's default, keeps it)
        self._checks_prior_dim = input_transform is None or isinstance(
            input_transform, Normalize
        )
        super().__init__(
            train_X,
            train_Y,
            train_Yvar,
            likelihood=likelihood,
            input_transform=input_transform,
            transfer=prior,
        )
        self.prior_scale_dof = prior_scale_dof
        self.register_buffer("prior_scale", self._target_Y.new_ones(self.batch_shape))
        if self.is_mixture and self.num_train > 0:
            self._set_cluster_weights()
        if prior_scale_dof is not None and self.num_train > 0:
            self._set_prior_scale()
        self._warn_if_off_prior_scale(
            "the pre-trained prior's data",
            "Give `train_Y` in the units of the pre-training data (the same metric "
            "and transformation)"
            + (
                "."
                if prior_scale_dof is not None
                else ", or pass `prior_scale_dof` (e.g. 2.0) to let the target "
                "data rescale the prior."
            ),
        )

    @property
    def is_mixture(self) -> bool:
        r"""Whether the prior is a :class:`PretrainedPriorMixture`."""
        return isinstance(self.mean_module, MixturePriorMean)

    @property
    def cluster_weights(self) -> Tensor:
        r"""A mixture prior's cluster weights ``p(c | training data)``
        (``batch_shape x C``)."""
        if not self.is_mixture:  # (an AttributeError would be masked by Module)
            raise UnsupportedError("`cluster_weights` needs a PretrainedPriorMixture.")
        return self.mean_module.weights

    def _set_cluster_weights(self) -> None:
        r"""The clusters' posterior probabilities given the training data, and the
        mixture's noise at them."""
        mixture = self.mean_module.mixture
        with torch.no_grad():
            was_training = self.training
            self.train()  # the training inputs, transformed as in a fit
            X = self.transform_inputs(self.train_inputs[0])
            self.train(was_training)
            Yvar = None if self.learns_target_noise else self._target_Yvar
            weights = mixture.posterior_weights(X, self.train_targets, Yvar)
        self.mean_module.weights = weights
        self.covar_module.weights = weights
        self.prior_noise = mixture.noise(weights)
        if self._default_noise:
            bound = self.likelihood.noise_covar.raw_noise_constraint.lower_bound
            noise = self.prior_noise.unsqueeze(-1).clamp_min(NOISE_BOUND_MARGIN * bound)
            self.likelihood.noise = noise

    def _set_prior_scale(self) -> None:
        r"""``s^2`` (``prior_scale``, ``batch_shape``) from the target data."""
        n = self.num_train
        nu = self.prior_scale_dof
        with torch.no_grad():
            was_training = self.training
            self.train()  # the prior at the training inputs, transformed as in a fit
            prior = self.forward(self.train_inputs[0])
            marginal = self.likelihood(prior, *self.train_inputs)
            self.train(was_training)
            residual = (self.train_targets - marginal.mean).unsqueeze(-1)
            q = marginal.lazy_covariance_matrix.inv_quad(residual)
        scale = (nu + q) / (nu + n)
        self.prior_scale = scale
        # s^2 scales the prior's noise too (the posterior mean stays the prior's);
        # a noise the user gave (train_Yvar, a likelihood) stays as given
        if self._default_noise:
            noise = self.likelihood.noise * scale.unsqueeze(-1)
            bound = self.likelihood.noise_covar.raw_noise_constraint.lower_bound
            self.likelihood.noise = noise.clamp_min(NOISE_BOUND_MARGIN * bound)
        self.prior_noise = self.prior_noise * scale

    def forward(self, x: Tensor) -> MultivariateNormal:
        r"""The prior ``N(mu(x), s^2 k(x, x))`` (``s^2 = 1`` unless
        ``prior_scale_dof``)."""
        prior = super().forward(x)
        if self.prior_scale_dof is None:
            return prior
        scale = self.prior_scale.unsqueeze(-1).unsqueeze(-1)
        return MultivariateNormal(prior.mean, prior.lazy_covariance_matrix.mul(scale))

    def _prepare_transfer(
        self, transfer: Any, train_X: Tensor
    ) -> PretrainedPrior | PretrainedPriorMixture:
        r"""A copy of the prior on ``train_X``'s dtype/device, trainable only when
        fine-tuned (the user's prior is never modified)."""
        if not isinstance(transfer, (PretrainedPrior, PretrainedPriorMixture)):
            raise TypeError(
                "`prior` must be a PretrainedPrior or a PretrainedPriorMixture, got "
                f"{type(transfer).__name__}."
            )
        if isinstance(transfer, PretrainedPriorMixture) and self.fine_tune:
            raise ValueError(
                "`fine_tune=True` is not supported with a PretrainedPriorMixture "
                "(its cluster priors stay frozen); use fine_tune=False."
            )
        # with an input transform, the prior sees transformed inputs of its own d
        if self._checks_prior_dim and train_X.shape[-1] != transfer.dim:
            raise ValueError(
                f"`train_X` has d={train_X.shape[-1]} but `prior` was pre-trained on "
                f"d={transfer.dim} inputs."
            )
        empirical = getattr(transfer, "empirical", None)
        if self.fine_tune and empirical is not None and not empirical.has_statistics:
            # its mean and covariance are tied to the base kernel at the fit: without
            # the statistics they were derived from, a re-fitted kernel would leave
            # them inconsistent and the covariance indefinite
            raise ValueError(
                "`fine_tune=True` needs the empirical prior's meta-task statistics, "
                "which this prior was saved without (before they were kept); "
                "pre-train it again with pretrain_prior, or use fine_tune=False."
            )
        prior = copy.deepcopy(transfer).to(train_X)
        prior.requires_grad_(self.fine_tune)
        if empirical is not None and self.fine_tune:
            # the base kernel is trained: mean and covariance follow it, held near
            # the pre-trained kernel by log-normal priors
            prior.empirical.adaptive = True
            _anchor_to_pretrained_values(prior.empirical.base_kernel)
        return prior

    def _outcome_reference(self, transfer: Any) -> list:
        return []  # no outcome transform: the prior fixes the units

    def _default_likelihood(
        self,
        train_X: Tensor,
        train_Yvar: Tensor | None,
        transfer: PretrainedPrior | PretrainedPriorMixture,
    ) -> Likelihood:
        r"""The prior's noise (frozen unless fine-tuned), or the known
        ``train_Yvar``."""
        if train_Yvar is not None:
            return super()._default_likelihood(train_X, train_Yvar, transfer)
        if isinstance(transfer, PretrainedPriorMixture):
            # the bound of the smallest-scale cluster; the noise at the prior
            # weights until the data's weights are set
            scale2 = min(c.mean_module.scale.pow(2).item() for c in transfer.components)
            noise = transfer.noise(transfer.prior_weights())
        else:
            scale2 = transfer.mean_module.scale.pow(2).item()
            noise = transfer.noise
        bound = MIN_NOISE * scale2
        noise = noise.detach().clamp_min(NOISE_BOUND_MARGIN * bound)
        noise = noise.to(train_X)
        noise_prior = None
        if self.fine_tune and getattr(transfer, "empirical", None) is not None:
            noise_prior = LogNormalPrior(noise.log(), FINE_TUNE_LOG_SD)
        likelihood = GaussianLikelihood(
            noise_prior=noise_prior,
            noise_constraint=GreaterThan(bound),
            batch_shape=train_X.shape[:-2],
        ).to(train_X)
        likelihood.noise = noise
        likelihood.requires_grad_(self.fine_tune)
        return likelihood

    def _build_modules(
        self,
        transfer: PretrainedPrior | PretrainedPriorMixture,
        train_X: Tensor,
        covar_module: Module | None,
        mean_module: Mean | None,
        input_transform: InputTransform | None,
    ) -> None:
        if isinstance(transfer, PretrainedPriorMixture):
            # the prior weights; the data's are set once the model holds its data
            weights = transfer.prior_weights().expand(
                *train_X.shape[:-2], transfer.n_clusters
            )
            self.mean_module = MixturePriorMean(transfer, weights.clone())
            self.covar_module = MixturePriorKernel(transfer, weights.clone())
            noise = transfer.noise(weights)
        else:
            self.mean_module = transfer.mean_module
            self.covar_module = transfer.covar_module
            noise = transfer.noise
        # the noise at a new point before any target point with a known noise
        self.register_buffer("prior_noise", noise.detach().clone())

    def _training_data(self, X: Tensor, Y: Tensor, Yvar: Tensor) -> TrainingData:
        r"""The target data as they are: the prior is the GP's mean and kernel."""
        return TrainingData(X, Y, None if self.learns_target_noise else Yvar)

    def target_noise(self) -> Tensor:
        r"""The noise at a new point: the (prior's) learned level, or the mean of
        the known training noise (BoTorch's fixed-noise convention); the prior's
        noise while no target point with a known noise is there."""
        if self.learns_target_noise or self.num_train > 0:
            return super().target_noise()
        return self.prior_noise.expand(self.batch_shape)

    def custom_fit(
        self, mll: MarginalLogLikelihood, **kwargs: Any
    ) -> MarginalLogLikelihood:
        r"""Called by ``fit_gpytorch_mll``: a no-op for a frozen prior (HyperBO never
        re-fits it) and without target data, BoTorch's default fit when
        ``fine_tune=True``."""
        if not any(p.requires_grad for p in mll.parameters()):
            return mll.eval()
        return super().custom_fit(mll, **kwargs)


def _anchor_to_pretrained_values(kernel: Module) -> None:
    r"""Log-normal priors (sd ``FINE_TUNE_LOG_SD``) on a ``ScaleKernel(Matern)``'s
    lengthscales and outputscale, centred on their current (pre-trained) values."""
    for module, name in ((kernel.base_kernel, "lengthscale"), (kernel, "outputscale")):
        value = getattr(module, name).detach().clone()
        module.register_prior(
            f"{name}_prior",
            LogNormalPrior(value.log(), torch.full_like(value, FINE_TUNE_LOG_SD)),
            getattr(module, f"_{name}_param"),
            getattr(module, f"_{name}_closure"),
        )


# the acquisition function that used to be importable from here
__getattr__ = moved_names(
    __name__,
    {
        "hyperbo_probability_of_improvement": ("botorch_transfer.acquisition.hyperbo"),
    },
)
