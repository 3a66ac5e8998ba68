r"""cm-BO Stage 3: :class:`ClusterMetaPriorGP`, an exact GP on the target task with
the clustering-based meta prior.

Implements Nguyen, Huynh, Tran, Pham, Huynh and Nguyen, *Clustering-based Meta
Bayesian Optimization with Theoretical Guarantee* (Algorithm 1 lines 12-22, eq. 8,
Theorem 3.1): prior mean ``sum_i w_i mu_Ci`` and prior kernel ``sum_i w_i^2 k_Ci``
(line 15); after each query the weights are updated from the distances between the
target posterior and every prototype on the index points ``V``:
``w_i = exp(1 - d_i / d_max) / sum_j exp(1 - d_j / d_max)`` (lines 19-21).

The prior itself (Stages 1-2: meta-task GPs, clustering, prototypes, weights, the
mean/kernel modules, save/load) lives in :mod:`botorch_transfer.clustering`; build it
with :func:`~botorch_transfer.clustering.build_cluster_prior`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from botorch.exceptions.errors import UnsupportedError
from botorch.models.gpytorch import GPyTorchModel
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from botorch.models.utils.gpytorch_modules import MIN_INFERRED_NOISE_LEVEL
from botorch.sampling.pathwise.posterior_samplers import DrawMatheronPaths
from botorch.sampling.pathwise.prior_samplers import DrawKernelFeaturePaths
from botorch.utils.datasets import SupervisedDataset
from gpytorch.constraints import GreaterThan
from gpytorch.distributions import MultivariateNormal
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.models import ExactGP
from gpytorch.priors import LogNormalPrior
from torch import Tensor
from torch.nn import Module

# MetaTaskPosteriors, build_cluster_prior and meta_task_posteriors are re-exported
# for code that still imports them from here (botorch_transfer.benchmarks.meta).
from botorch_transfer.clustering import (  # noqa: F401
    ClusterMetaPrior,
    ClusterPriorKernel,
    ClusterPriorMean,
    MetaTaskPosteriors,
    build_cluster_prior,
    cluster_weights_from_distances,
    meta_task_posteriors,
)
from botorch_transfer.data import TaskData
from botorch_transfer.models.base import (
    SourceConditionedGP,
    fit_shared_outcome_affine,
    validate_training_data,
)


class ClusterMetaPriorGP(SourceConditionedGP):
    r"""Exact GP on the target task with the cm-BO meta prior (Alg. 1 lines 15-16).

    Prior mean ``mu_0 = sum_i w_i mu_Ci`` and prior kernel ``k_0 = sum_i w_i^2 k_Ci``
    (Theorem 3.1) from the frozen :class:`ClusterMetaPrior`; the posterior is eqs. 1-2.
    The only free hyperparameter is the target noise (when ``train_Yvar`` is not
    given): ``fit_gpytorch_mll`` never touches the prior.

    The GP is trained on ``y - mu_0(X)`` with a zero mean and the prior mean is added
    back at prediction (identical posterior; the prior mean at the training points is
    then not recomputed for every test batch). After each BO query,
    :meth:`updated_weights` gives the next weights (Alg. 1 lines 19-21); rebuild the
    model with them.

    Args:
        train_X: ``batch_shape x n x d`` target inputs (``n`` may be 0).
        train_Y: ``batch_shape x n x 1`` target observations.
        prior: The :class:`ClusterMetaPrior` (a copy on ``train_X``'s dtype/device is
            used; the original is not modified).
        weights: ``C`` non-negative cluster weights summing to 1 (not normalized for
            you); default ``1/C`` (Alg. 1 line 13).
        train_Yvar: Optional known target noise variances; else the noise is learned.
        input_transform: Optional input transform; it must be invertible (the prior
            is defined on raw inputs).
        outcome_transform: ``None`` or ``Standardize(m=1)``, fitted once on the target
            outcomes together with the prior mean on the index points (so that it works
            with 0 or 1 target points); the prior is mapped by the same affine map.

    Example:
        >>> prior = build_cluster_prior(meta_tasks, n_clusters=3)
        >>> weights = None
        >>> for t in range(T):
        ...     model = ClusterMetaPriorGP(X, Y, prior, weights=weights)
        ...     fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        ...     x_next, _ = optimize_acqf(UpperConfidenceBound(model, beta=3.0), bounds, q=1, ...)
        ...     weights = model.updated_weights()  # Alg. 1 lines 19-21
        ...     X, Y = torch.cat([X, x_next]), torch.cat([Y, f(x_next)])
    """

    _num_outputs = 1

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        prior: ClusterMetaPrior,
        weights: Tensor | Sequence[float] | None = None,
        train_Yvar: Tensor | None = None,
        input_transform: InputTransform | None = None,
        outcome_transform: OutcomeTransform | None = None,
    ) -> None:
        validate_training_data(train_X, train_Y, train_Yvar)
        if not isinstance(prior, ClusterMetaPrior):
            raise TypeError(f"`prior` must be a ClusterMetaPrior, got {type(prior).__name__}.")
        if train_X.shape[-1] != prior.dim:
            raise ValueError(
                f"`train_X` has d={train_X.shape[-1]} columns but `prior` was built on "
                f"d={prior.dim}; the target must share the meta-tasks' input space."
            )
        prior = copy.deepcopy(prior).to(device=train_X.device, dtype=train_X.dtype)
        weights = prior.check_weights(weights)
        if input_transform is not None:
            with torch.no_grad():
                transformed = input_transform.transform(train_X)
                try:
                    recovered = input_transform.untransform(transformed)
                except NotImplementedError as e:
                    raise ValueError(
                        "ClusterMetaPriorGP evaluates its prior at raw inputs and needs an "
                        f"invertible `input_transform` (e.g. Normalize); {type(input_transform).__name__} is not."
                    ) from e
            if not torch.allclose(recovered, train_X, rtol=1e-4, atol=1e-6):
                raise ValueError("`input_transform.untransform` does not invert it.")
        with torch.no_grad():
            prior_mean_V = (weights @ prior.prototype_means).unsqueeze(-1)
        scale, offset = fit_shared_outcome_affine(
            outcome_transform, [TaskData(prior.index_points, prior_mean_V)], train_Y
        )
        batch_shape = train_X.shape[:-2]
        placeholder = torch.zeros(train_X.shape[:-1], dtype=train_X.dtype, device=train_X.device)
        if train_Yvar is not None:
            likelihood = FixedNoiseGaussianLikelihood(noise=placeholder + 1, batch_shape=batch_shape)
        else:
            noise_prior = LogNormalPrior(loc=-4.0, scale=1.0)
            likelihood = GaussianLikelihood(
                batch_shape=batch_shape, noise_prior=noise_prior,
                noise_constraint=GreaterThan(MIN_INFERRED_NOISE_LEVEL, transform=None, initial_value=noise_prior.mode),
            )
        ExactGP.__init__(self, train_inputs=train_X, train_targets=placeholder, likelihood=likelihood)
        self.prior = prior
        # the weights shape the training targets (y - mu_0(X)): constructor data like
        # train_X, not state, so they are left out of state_dict
        self.register_buffer("weights", weights, persistent=False)
        self.prior_mean = ClusterPriorMean(prior, weights, scale, offset)
        self.covar_module = ClusterPriorKernel(prior, weights, scale)
        self._finish_init(train_X, train_Y, train_Yvar, scale, offset, input_transform, outcome_transform)

    def _set_target_data(self, X: Tensor, Y: Tensor, Yvar: Tensor) -> None:
        r"""Targets ``Y - mu_0(X)`` (model units) and the known noise, if any."""
        self._store_target_data(X, Y, Yvar)
        with torch.no_grad():
            residuals = Y - self.prior_mean(X) if X.shape[-2] > 0 else Y
        if not self.learns_target_noise:
            self.likelihood.noise_covar.noise = Yvar
        self._set_raw_train_inputs(X, residuals)

    def _source_terms(self, X: Tensor) -> tuple[Tensor, None]:
        return self.prior_mean(X), None

    def _frozen_modules(self) -> list[Module]:
        return [self.prior]

    def forward(self, x: Tensor) -> MultivariateNormal:
        if self.training:
            x = self.transform_inputs(x)
        mean = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
        return MultivariateNormal(mean, self.covar_module(self._raw_inputs(x)))

    def updated_weights(self, distance: str | None = None) -> Tensor:
        r"""Next cluster weights from this model's posterior (Alg. 1 lines 19-21).

        The latent posterior on the prior's index points, ``N(m, S + jitter)``, is
        compared with every prototype (``W2`` or Jeffreys, default: the prior's
        distance); ``w_i = exp(1 - d_i/d_max) / sum_j exp(1 - d_j/d_max)``.

        Args:
            distance: ``"wasserstein"`` or ``"jeffreys"`` (default: ``prior.distance``).

        Returns:
            ``C`` weights summing to 1 (pass them to the next model).
        """
        return cluster_weights_from_distances(self.prototype_distances(distance))

    def prototype_distances(self, distance: str | None = None) -> Tensor:
        r"""Distances ``d_i`` from the posterior on the index points to each prototype
        (Alg. 1 line 19); see :meth:`updated_weights`."""
        if len(self.batch_shape) != 0:
            raise UnsupportedError("Weight updates need a non-batched ClusterMetaPriorGP.")
        with torch.no_grad():
            post = self.posterior(self.prior.index_points)
            mean = post.mean.squeeze(-1)
            cov = post.distribution.covariance_matrix
            cov = self.prior.add_jitter(0.5 * (cov + cov.transpose(-1, -2)))
            return self.prior.prototype_distances(mean, cov, distance)

    @classmethod
    def construct_inputs(cls, training_data: SupervisedDataset, prior: ClusterMetaPrior, **kwargs: Any) -> dict[str, Any]:
        r"""Constructor arguments from a ``SupervisedDataset`` plus the prior.

        Args:
            training_data: The target data.
            prior: The :class:`ClusterMetaPrior`.
            kwargs: Further constructor options (``weights``, transforms), passed through.

        Returns:
            Keyword arguments for ``cls(**inputs)``.
        """
        inputs = GPyTorchModel.construct_inputs(training_data=training_data)
        return {**inputs, "prior": prior, **kwargs}


# BoTorch dispatches pathwise (Matheron) sampling on ExactGP; here it would miss the
# prior mean (the GP is trained on residuals). Refuse clearly instead.
@DrawMatheronPaths.register(ClusterMetaPriorGP)
def _draw_matheron_paths_cluster(model: ClusterMetaPriorGP, **kwargs: Any) -> None:
    raise UnsupportedError(
        "Pathwise (Matheron) posterior samples are not implemented for ClusterMetaPriorGP "
        "(its prior is a frozen meta-task posterior). Use Monte-Carlo acquisition functions "
        "(qLogNoisyExpectedImprovement, qUpperConfidenceBound, qKnowledgeGradient, "
        "qMaxValueEntropy with a candidate set)."
    )


@DrawKernelFeaturePaths.register(ClusterMetaPriorGP)
def _draw_kernel_feature_paths_cluster(model: ClusterMetaPriorGP, **kwargs: Any) -> None:
    raise UnsupportedError("Kernel-feature prior paths are not implemented for ClusterMetaPriorGP.")
