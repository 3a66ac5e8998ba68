r"""cm-BO Stage 3: :class:`ClusterMetaPriorGP`, an exact GP on the target task with
the clustering-based meta prior.

Implements Nguyen, Huynh, Tran, Pham, Huynh and Nguyen, *Clustering-based Meta
Bayesian Optimization with Theoretical Guarantee* (Algorithm 1 lines 12-22, eq. 8,
Theorem 3.1): prior mean ``sum_i w_i mu_Ci`` and prior kernel ``sum_i w_i^2 k_Ci``
(line 15); after each query the weights are updated from the distances between the
target posterior and every prototype on the index points ``V``:
``w_i = exp(1 - d_i / d_max) / sum_j exp(1 - d_j / d_max)`` (lines 19-21).

The prior itself (Stages 1-2: meta-task GPs, clustering, prototypes, weights, the
mean/kernel modules, save/load) lives in :mod:`botorch_transfer.priors`; build it
with :func:`~botorch_transfer.priors.cmbo.build_cluster_prior`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from botorch.exceptions.errors import UnsupportedError
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from gpytorch.distributions import MultivariateNormal
from gpytorch.likelihoods import Likelihood
from gpytorch.means import Mean
from torch import Tensor
from torch.nn import Module

from botorch_transfer.data import TaskData
from botorch_transfer.models.base import SourceConditionedGP, TrainingData
from botorch_transfer.models.likelihoods import scaled_noise_likelihood
from botorch_transfer.models.utils.assorted import refuse_pathwise_sampling
from botorch_transfer.priors import (
    ClusterMetaPrior,
    ClusterPriorKernel,
    ClusterPriorMean,
    cluster_weights_from_distances,
)


class ClusterMetaPriorGP(SourceConditionedGP):
    r"""Exact GP on the target task with the cm-BO meta prior (Alg. 1 lines 15-16).

    Prior mean ``mu_0 = sum_i w_i mu_Ci`` and prior kernel from the frozen
    :class:`ClusterMetaPrior`: by default the moment-matched covariance of the
    mixture of meta-task posteriors, or ``k_0 = sum_i w_i^2 k_Ci`` (Theorem 3.1)
    with ``prior_covariance="paper"`` (see :meth:`ClusterMetaPrior.covariance`); the
    posterior is eqs. 1-2.
    The only free hyperparameter is the target noise (when ``train_Yvar`` is not
    given): ``fit_gpytorch_mll`` never touches the prior.

    The GP is trained on ``y - mu_0(X)`` with a zero mean and the prior mean is added
    back at prediction (identical posterior; the prior mean at the training points is
    then not recomputed for every test batch). After each BO query,
    :meth:`updated_weights` gives the next weights (by default the clusters'
    posterior probabilities; Alg. 1 lines 19-21 with ``method="paper"``); rebuild
    the model with them.

    So ``train_targets`` are ``y - mu_0(X)`` (model units). The target data in the
    user's units are ``target_X``, ``target_Y`` and ``target_Yvar``; give BoTorch's
    acquisition functions ``best_f=model.target_Y.max()`` and
    ``X_baseline=model.target_X``.

    Args:
        train_X: ``batch_shape x n x d`` target inputs (``n`` may be 0).
        train_Y: ``batch_shape x n x 1`` target observations.
        train_Yvar: Optional known target noise variances; else the noise is learned.
        prior: The :class:`ClusterMetaPrior` (keyword; a copy on ``train_X``'s
            dtype/device is used; the original is not modified).
        weights: ``C`` non-negative cluster weights summing to 1 (not normalized for
            you); default ``1/C`` (Alg. 1 line 13).
        likelihood: Default: the known ``train_Yvar``, or BoTorch's noise model in
            the prior's units (``noise / s^2`` with BoTorch's prior and bound,
            ``s^2`` the prior's mean variance on its index points at ``weights``,
            in model units; :func:`~botorch_transfer.models.likelihoods.
            scaled_noise_likelihood`): the outcomes are not standardized, so a noise
            model in raw units would make the search depend on them.
        input_transform: Optional input transform; it must be invertible (the prior
            is defined on raw inputs).
        outcome_transform: ``None`` or ``Standardize(m=1)``, fitted once on the target
            outcomes together with the prior mean on the index points (so that it works
            with 0 or 1 target points); the prior is mapped by the same affine map.

    Example:
        >>> prior = build_cluster_prior(meta_tasks, n_clusters=3)
        >>> weights = None
        >>> for t in range(T):
        ...     model = ClusterMetaPriorGP(X, Y, prior=prior, weights=weights)
        ...     mll = ExactMarginalLogLikelihood(model.likelihood, model)
        ...     mll = fit_gpytorch_mll(mll)
        ...     x_next, _ = optimize_acqf(
        ...         UpperConfidenceBound(model, beta=3.0), bounds, q=1,
        ...         num_restarts=4, raw_samples=128,
        ...     )
        ...     weights = model.updated_weights()  # p(cluster | target data)
        ...     X, Y = torch.cat([X, x_next]), torch.cat([Y, f(x_next)])
    """

    transfer_argument = "prior"
    # the prior is defined on raw inputs
    needs_invertible_input_transform = True

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        train_Yvar: Tensor | None = None,
        likelihood: Likelihood | None = None,
        outcome_transform: OutcomeTransform | None = None,
        input_transform: InputTransform | None = None,
        *,
        prior: ClusterMetaPrior,
        weights: Tensor | Sequence[float] | None = None,
    ) -> None:
        self._initial_weights = weights
        self._noise_in_prior_units = likelihood is None and train_Yvar is None
        super().__init__(
            train_X,
            train_Y,
            train_Yvar,
            transfer=prior,
            likelihood=likelihood,
            input_transform=input_transform,
            outcome_transform=outcome_transform,
        )
        self._warn_if_off_prior_scale(
            "the meta-tasks the prior was built from",
            "Give `train_Y` in the meta-tasks' units (an `outcome_transform` maps "
            "prior and target by the same affine map, so it cannot reconcile them).",
        )

    def _prepare_transfer(
        self, transfer: Any, train_X: Tensor
    ) -> tuple[ClusterMetaPrior, Tensor]:
        r"""A copy of the prior on ``train_X``'s dtype/device, and checked weights."""
        if not isinstance(transfer, ClusterMetaPrior):
            raise TypeError(
                f"`prior` must be a ClusterMetaPrior, got {type(transfer).__name__}."
            )
        if train_X.shape[-1] != transfer.dim:
            raise ValueError(
                f"`train_X` has d={train_X.shape[-1]} columns but `prior` was built on "
                f"d={transfer.dim}; the target must share the meta-tasks' input space."
            )
        prior = copy.deepcopy(transfer).to(device=train_X.device, dtype=train_X.dtype)
        return prior, prior.check_weights(self._initial_weights)

    def _outcome_reference(
        self, transfer: tuple[ClusterMetaPrior, Tensor]
    ) -> list[TaskData]:
        r"""The prior mean on the index points (so that ``Standardize`` works with 0
        or 1 target points)."""
        prior, weights = transfer
        with torch.no_grad():
            prior_mean_V = (weights @ prior.prototype_means).unsqueeze(-1)
        return [TaskData(prior.index_points, prior_mean_V)]

    def _build_modules(
        self,
        transfer: tuple[ClusterMetaPrior, Tensor],
        train_X: Tensor,
        covar_module: Module | None,
        mean_module: Mean | None,
        input_transform: InputTransform | None,
    ) -> None:
        prior, weights = transfer
        self.prior = prior
        # the weights shape the training targets (y - mu_0(X)): constructor data like
        # train_X, not state, so they are left out of state_dict
        self.register_buffer("weights", weights, persistent=False)
        self.prior_mean = ClusterPriorMean(
            prior, weights, self.output_scale, self.output_offset
        )
        self.covar_module = ClusterPriorKernel(prior, weights, self.output_scale)
        if self._noise_in_prior_units:
            # BoTorch's noise model assumes standardized outcomes: put it in the
            # prior's units (a noise bound of 1e-4 in raw units can exceed the whole
            # signal of a target whose values span 0.01, or vanish for one in 1000s)
            with torch.no_grad():
                V = prior.index_points
                scale2 = prior.covariance(V, V, weights, diag=True).mean()
                scale2 = scale2 / self.output_scale.pow(2)
            if not scale2 > 0:
                raise ValueError(
                    "The prior's variance on its index points is 0, so it sets no "
                    "scale for the target noise; pass `train_Yvar` or a `likelihood`."
                )
            self.likelihood = scaled_noise_likelihood(train_X.shape[:-2], scale2)

    def _training_data(self, X: Tensor, Y: Tensor, Yvar: Tensor) -> TrainingData:
        r"""Targets ``Y - mu_0(X)`` (model units) and the known noise, if any."""
        with torch.no_grad():
            residuals = Y - self.prior_mean(X) if X.shape[-2] > 0 else Y
        return TrainingData(X, residuals, None if self.learns_target_noise else Yvar)

    def _combine_posterior(
        self, gp_posterior: MultivariateNormal, X: Tensor
    ) -> MultivariateNormal:
        r"""Add the prior mean back (the GP is trained on ``y - mu_0(X)``)."""
        return MultivariateNormal(
            gp_posterior.mean + self.prior_mean(X), gp_posterior.lazy_covariance_matrix
        )

    def _frozen_modules(self) -> list[Module]:
        return [self.prior]

    def forward(self, x: Tensor) -> MultivariateNormal:
        if self.training:
            x = self.transform_inputs(x)
        mean = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
        return MultivariateNormal(mean, self.covar_module(self._raw_inputs(x)))

    def updated_weights(
        self, distance: str | None = None, method: str = "likelihood"
    ) -> Tensor:
        r"""Next cluster weights from the target data.

        - ``method="likelihood"`` (default): the posterior probability of each
          cluster having generated the target data, with equal prior probabilities:
          ``w_i ~ p(y | cluster i)``, the marginal likelihood of the target data under
          the prototype GP moment-matched to the cluster's members
          (:meth:`ClusterMetaPrior.cluster_log_likelihoods`) and the target noise.
        - ``method="paper"``: Alg. 1 lines 19-21. The latent posterior on the
          prior's index points, ``N(m, S + jitter)``, is compared with every
          prototype (``W2`` or Jeffreys, default: the prior's distance);
          ``w_i = exp(1 - d_i/d_max) / sum_j exp(1 - d_j/d_max)``. No weight can
          exceed ``e`` times another, however strong the evidence, and with the
          paper's prior covariance the posterior on ``V`` stays close to the prior
          at a few target points, so the weights hardly move.

        With ``"likelihood"`` the target's own cluster gets the largest weight from
        fewer target points, and a larger weight, than with ``"paper"``.

        Args:
            distance: ``"wasserstein"`` or ``"jeffreys"`` (``method="paper"``;
                default: ``prior.distance``).
            method: ``"likelihood"`` or ``"paper"``.

        Returns:
            ``C`` weights summing to 1 (pass them to the next model).
        """
        if method == "paper":
            return cluster_weights_from_distances(self.prototype_distances(distance))
        if method != "likelihood":
            raise ValueError(
                f"`method` must be 'likelihood' or 'paper', got {method!r}."
            )
        if len(self.batch_shape) != 0:
            raise UnsupportedError(
                "Weight updates need a non-batched ClusterMetaPriorGP."
            )
        with torch.no_grad():
            X, Y = self.target_X, self.target_Y.squeeze(-1)
            if self.learns_target_noise:
                noise = self.likelihood.noise.reshape(-1).expand(Y.shape)
                noise = noise * self.output_scale.pow(2)
            else:
                noise = self.target_Yvar.squeeze(-1)
            loglik = self.prior.cluster_log_likelihoods(X, Y, noise)
            return torch.softmax(loglik, -1).to(self.weights)

    def prototype_distances(self, distance: str | None = None) -> Tensor:
        r"""Distances ``d_i`` from the posterior on the index points to each prototype
        (Alg. 1 line 19); see :meth:`updated_weights`."""
        if len(self.batch_shape) != 0:
            raise UnsupportedError(
                "Weight updates need a non-batched ClusterMetaPriorGP."
            )
        with torch.no_grad():
            post = self.posterior(self.prior.index_points)
            mean = post.mean.squeeze(-1)
            cov = post.distribution.covariance_matrix
            cov = self.prior.add_jitter(0.5 * (cov + cov.transpose(-1, -2)))
            return self.prior.prototype_distances(mean, cov, distance)


# the GP is trained on y - mu_0(X): its paths would miss the prior mean
refuse_pathwise_sampling(
    ClusterMetaPriorGP, "its prior is a frozen meta-task posterior"
)
