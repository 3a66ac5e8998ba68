r"""DeltaBO: a residual GP on top of a frozen source posterior.

Implements the model of Lin, Zhao, Kolar and Liu, *Provable Accelerated Bayesian
Optimization with Knowledge Transfer* (Algorithm 1, eqs. 5-7). The target is
``f = g + delta`` with ``g ~ GP(0, k_g)`` (the source, observed through ``N``
noisy points) and ``delta ~ GP(0, k_delta)`` independent of it:

1. The source posterior ``mu_g,N``, ``sigma^2_g,N`` (eq. 5) is computed once and frozen.
2. Target observations become residuals ``r_i = y_i - mu_g,N(x_i)``: noisy
   observations of ``delta`` with per-point (heteroscedastic) noise variance
   ``sigma^2 + sigma^2_g,N(x_i)``.
3. The delta GP (eq. 6) is an exact GP with zero prior mean and its own kernel;
   ``f`` is predicted with mean ``mu_g,N + mu_delta`` and joint covariance
   ``Sigma_g,N(X, X) + Sigma_delta(X, X)`` (eq. 7).

``residual_covariance="full"`` replaces the paper's per-point (diagonal) treatment
of the source error at the target points by the exact Gaussian conditional: prior
mean ``mu_g,N`` and prior kernel ``k_g,N + k_delta``, so that source errors at
nearby target points are correlated with each other and with the test points.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from botorch.acquisition.objective import PosteriorTransform
from botorch.exceptions.errors import UnsupportedError
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.gpytorch import GPyTorchModel
from botorch.models.model import FantasizeMixin, Model
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform, Standardize
from botorch.models.utils.assorted import fantasize as fantasize_flag
from botorch.models.utils.assorted import gpt_posterior_settings
from botorch.models.utils.gpytorch_modules import (
    MIN_INFERRED_NOISE_LEVEL,
    get_covar_module_with_dim_scaled_prior,
)
from botorch.posteriors.gpytorch import GPyTorchPosterior
from botorch.sampling.base import MCSampler
from botorch.sampling.pathwise.posterior_samplers import DrawMatheronPaths
from botorch.sampling.pathwise.prior_samplers import DrawKernelFeaturePaths
from botorch.utils.datasets import SupervisedDataset
from botorch import settings as botorch_settings
from gpytorch.constraints import GreaterThan
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel, ScaleKernel
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP
from gpytorch.priors import LogNormalPrior
from linear_operator.operators import DenseLinearOperator
from torch import Tensor

from botorch_transfer.data import TaskData
from botorch_transfer.models.source_posterior import (
    GPSourcePosterior,
    SourcePosterior,
    SumSourcePosterior,
    outcome_affine,
    source_posterior_from_model,
)

SourceLike = TaskData | Model | SourcePosterior

RESIDUAL_COVARIANCES = ("diagonal", "full")


def default_transfer_kernel(
    dim: int, batch_shape: torch.Size | None = None
) -> ScaleKernel:
    r"""A scaled RBF kernel with BoTorch's dimension-scaled lengthscale prior.

    The outputscale is the amplitude (``tau^2`` for a difference kernel).

    Args:
        dim: Input dimension (one lengthscale per dimension).
        batch_shape: Batch shape of the hyperparameters.

    Returns:
        ``ScaleKernel(RBFKernel(ard_num_dims=dim))`` with BoTorch's priors.
    """
    return ScaleKernel(
        get_covar_module_with_dim_scaled_prior(ard_num_dims=dim, batch_shape=batch_shape),
        batch_shape=batch_shape,
    )


def _validate_training_data(
    train_X: Tensor, train_Y: Tensor, train_Yvar: Tensor | None
) -> None:
    for name, value in (("train_X", train_X), ("train_Y", train_Y), ("train_Yvar", train_Yvar)):
        if value is None:
            continue
        if not isinstance(value, Tensor) or not value.is_floating_point():
            raise TypeError(f"`{name}` must be a floating point torch.Tensor.")
        if value.dtype != train_X.dtype:
            raise TypeError(
                f"`{name}` has dtype {value.dtype} but `train_X` has {train_X.dtype}; "
                "use one dtype for all inputs."
            )
        if value.device != train_X.device:
            raise ValueError(f"`{name}` is on {value.device} but `train_X` on {train_X.device}.")
        if not torch.isfinite(value).all():
            raise ValueError(f"`{name}` contains NaN or infinite values.")
    if train_X.dim() < 2:
        raise ValueError(
            f"`train_X` must have shape batch_shape x n x d, got {tuple(train_X.shape)}."
        )
    expected = train_X.shape[:-1] + torch.Size([1])
    if train_Y.shape != expected:
        raise ValueError(
            f"`train_Y` must have shape {tuple(expected)} (batch_shape x n x 1, matching "
            f"`train_X`), got {tuple(train_Y.shape)}."
        )
    if train_Yvar is not None:
        if train_Yvar.shape != expected:
            raise ValueError(
                f"`train_Yvar` must have the shape of `train_Y` {tuple(expected)}, got "
                f"{tuple(train_Yvar.shape)}."
            )
        if (train_Yvar < 0).any():
            raise ValueError("`train_Yvar` must be non-negative (it is a variance).")


def _as_source_list(source: Any) -> list[SourceLike]:
    sources = list(source) if isinstance(source, (list, tuple)) else [source]
    if len(sources) == 0:
        raise ValueError("`source` must contain at least one source, got an empty list.")
    for i, s in enumerate(sources):
        if not isinstance(s, (TaskData, Model, SourcePosterior)):
            raise TypeError(
                f"`source[{i}]` must be a TaskData, a fitted BoTorch Model or a "
                f"SourcePosterior, got {type(s).__name__}."
            )
        if i > 0 and not isinstance(s, TaskData):
            raise TypeError(
                f"`source[{i}]` is a {type(s).__name__}: only the first source may be a "
                "fitted model; later sources are TaskData modelled as residuals of the "
                "stack before them. To stack fitted models, pass a fitted DeltaBOModel."
            )
    return sources


class DeltaBOModel(ExactGP, GPyTorchModel, FantasizeMixin):
    r"""DeltaBO residual GP: ``f = g + delta`` with a frozen source posterior of ``g``.

    The trainable part is the delta GP (``delta_covar_module``) and, when
    ``train_Yvar`` is not given, the target noise ``sigma^2``;
    ``fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))`` fits
    exactly those. The source posterior is a frozen buffer (moved by ``.to()``).

    Args:
        train_X: ``batch_shape x n x d`` target inputs (``n`` may be 0).
        train_Y: ``batch_shape x n x 1`` target observations.
        source: The source task(s): a ``TaskData`` (a ``SingleTaskGP`` is built and
            fitted on it once, here), a fitted single-output BoTorch ``Model`` (used
            as is, frozen; exact GPs are cached for fast evaluation), a
            ``SourcePosterior`` in user units (e.g. ``model.frozen_source()`` of a
            previous model, to rebuild without touching the source), or a list of
            these stacked in order: each later ``TaskData`` is modelled as the
            residual of the stack before it (a DeltaBO layer), as in the paper's
            footnote on several sources.
        train_Yvar: Optional ``batch_shape x n x 1`` known target noise variances.
            If ``None``, a homoscedastic target noise ``sigma^2`` is learned.
        source_covar_module: Kernel ``k_g`` for sources given as ``TaskData`` (the
            first source; later stacked sources use it for their difference layer).
            Defaults to a scaled RBF kernel. Its hyperparameters are fitted when
            ``fit_source=True``.
        delta_covar_module: Kernel ``k_delta`` of the difference GP. Defaults to a
            scaled RBF kernel whose outputscale is ``tau^2``.
        input_transform: Input transform (e.g. ``Normalize``), applied as
            ``SingleTaskGP`` applies it; a copy is given to sources built from
            ``TaskData``. With ``residual_covariance="full"`` it must be invertible.
        outcome_transform: ``None`` (default, so that hyperparameters mean what they
            say in your units) or ``Standardize(m=1)``. It is fitted once on all
            source ``TaskData`` and target outcomes and applied to both: ``f = g +
            delta`` only holds when source and target share one affine map.
        residual_covariance: ``"diagonal"`` (the paper): the source error at each
            target point is independent noise of variance ``sigma^2_g,N(x_i)``.
            ``"full"``: the exact conditional with prior mean ``mu_g,N`` and prior
            kernel ``k_g,N + k_delta``.
        fit_source: Fit the hyperparameters of sources built from ``TaskData``
            (otherwise they are used with the kernel's current values).
        source_max_rank: Largest rank of the cached source posterior (its per-point
            cost is ``O(rank^2)``); the posterior is exact when the source's
            numerical rank is below it. See :class:`GPSourcePosterior`.
        source_tolerance: Relative residual variance at which the cached factor
            stops growing.

    Example:
        >>> source = TaskData(X_src, Y_src)
        >>> model = DeltaBOModel(train_X, train_Y, source=source)
        >>> fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        >>> UCB = UpperConfidenceBound(model, beta=beta_t(t, domain_size, rho=0.1))
    """

    _num_outputs = 1

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        source: SourceLike | Sequence[SourceLike],
        train_Yvar: Tensor | None = None,
        source_covar_module: Kernel | None = None,
        delta_covar_module: Kernel | None = None,
        input_transform: InputTransform | None = None,
        outcome_transform: OutcomeTransform | None = None,
        residual_covariance: str = "diagonal",
        fit_source: bool = True,
        source_max_rank: int = 1000,
        source_tolerance: float = 1e-10,
    ) -> None:
        _validate_training_data(train_X, train_Y, train_Yvar)
        if residual_covariance not in RESIDUAL_COVARIANCES:
            raise ValueError(
                f"`residual_covariance` must be one of {RESIDUAL_COVARIANCES}, got "
                f"{residual_covariance!r}."
            )
        sources = _as_source_list(source)
        dim = train_X.shape[-1]
        for i, s in enumerate(sources):
            if isinstance(s, TaskData):
                if s.d != dim:
                    raise ValueError(
                        f"`source[{i}]` has input dimension d={s.d} but `train_X` has "
                        f"d={dim}; source and target must share the input space."
                    )
                if s.X.dtype != train_X.dtype:
                    raise TypeError(
                        f"`source[{i}]` has dtype {s.X.dtype} but `train_X` has "
                        f"{train_X.dtype}; use one dtype for source and target data."
                    )
        if outcome_transform is not None and not isinstance(outcome_transform, Standardize):
            outcome_affine(outcome_transform)  # raises the explanatory TypeError

        # One affine outcome map shared by source and target (y_model = (y - o) / s).
        scale, offset = torch.ones((), dtype=train_X.dtype), torch.zeros((), dtype=train_X.dtype)
        if outcome_transform is not None:
            pooled = [s.Y for s in sources if isinstance(s, TaskData)]
            pooled.append(train_Y.reshape(-1, 1))
            pooled = torch.cat(pooled, dim=0)
            if pooled.shape[0] == 0:
                raise ValueError(
                    "`outcome_transform` cannot be fitted: there are no target "
                    "observations and no source TaskData outcomes."
                )
            outcome_transform.train()
            outcome_transform(pooled)
            outcome_transform.eval()
            scale, offset = outcome_affine(outcome_transform)
        scale, offset = scale.to(train_X), offset.to(train_X)

        with torch.no_grad():
            transformed_X = self.transform_inputs(X=train_X, input_transform=input_transform)
        if residual_covariance == "full" and input_transform is not None:
            try:
                recovered = input_transform.untransform(transformed_X)
            except NotImplementedError as e:
                raise ValueError(
                    "`residual_covariance='full'` evaluates the source covariance at "
                    "raw inputs and needs an invertible `input_transform` (e.g. "
                    f"Normalize); {type(input_transform).__name__} is not."
                ) from e
            if not torch.allclose(recovered, train_X, rtol=1e-4, atol=1e-6):
                raise ValueError("`input_transform.untransform` does not invert it.")

        source_posterior = self._build_source_posterior(
            sources,
            scale=scale,
            offset=offset,
            source_covar_module=source_covar_module,
            input_transform=input_transform,
            fit_source=fit_source,
            max_rank=source_max_rank,
            tolerance=source_tolerance,
        ).to(train_X)

        Y_model = (train_Y - offset) / scale
        Yvar_model = None if train_Yvar is None else train_Yvar / scale**2
        with torch.no_grad():
            residuals = Y_model.squeeze(-1) - source_posterior.mean(train_X)
            fixed_noise = self._residual_noise(source_posterior, train_X, Yvar_model, residual_covariance)
        batch_shape = train_X.shape[:-2]
        if train_Yvar is not None:
            likelihood = FixedNoiseGaussianLikelihood(noise=fixed_noise, batch_shape=batch_shape)
        else:
            noise_prior = LogNormalPrior(loc=-4.0, scale=1.0)
            noise_options = dict(
                batch_shape=batch_shape,
                noise_prior=noise_prior,
                noise_constraint=GreaterThan(
                    MIN_INFERRED_NOISE_LEVEL, transform=None, initial_value=noise_prior.mode
                ),
            )
            if residual_covariance == "diagonal":
                # per-point source variance (fixed) + learned homoscedastic sigma^2
                likelihood = FixedNoiseGaussianLikelihood(
                    noise=fixed_noise, learn_additional_noise=True, **noise_options
                )
            else:
                likelihood = GaussianLikelihood(**noise_options)
        ExactGP.__init__(self, train_inputs=train_X, train_targets=residuals, likelihood=likelihood)
        self.source_posterior = source_posterior
        self.delta_covar_module = (
            delta_covar_module
            if delta_covar_module is not None
            else default_transfer_kernel(dim, batch_shape=batch_shape)
        )
        self.residual_covariance = residual_covariance
        self.register_buffer("output_scale", scale)
        self.register_buffer("output_offset", offset)
        # Target part of the training noise (transformed units); NaN means "learned".
        self.register_buffer(
            "target_Yvar",
            torch.full_like(residuals, float("nan")) if Yvar_model is None else Yvar_model.squeeze(-1),
        )
        if outcome_transform is not None:
            self.outcome_transform = outcome_transform
        if input_transform is not None:
            self.input_transform = input_transform
        self.to(train_X)

    # ------------------------------------------------------------------ sources
    @staticmethod
    def _build_source_posterior(
        sources: list[SourceLike],
        scale: Tensor,
        offset: Tensor,
        source_covar_module: Kernel | None,
        input_transform: InputTransform | None,
        fit_source: bool,
        max_rank: int,
        tolerance: float,
    ) -> SourcePosterior:
        r"""Build the frozen posterior of the (stacked) source in model units."""
        stack: SourcePosterior | None = None
        for s in sources:
            if isinstance(s, (Model, SourcePosterior)):
                stack = (
                    copy.deepcopy(s)
                    if isinstance(s, SourcePosterior)
                    else source_posterior_from_model(s, max_rank=max_rank, tolerance=tolerance)
                )
                stack.set_output_affine(1.0 / scale, -offset / scale)  # user -> model units
                continue
            Y = (s.Y - offset) / scale
            Yvar = None if s.Yvar is None else s.Yvar / scale**2
            kernel = (
                copy.deepcopy(source_covar_module)
                if source_covar_module is not None
                else default_transfer_kernel(s.d)
            )
            transform = copy.deepcopy(input_transform)
            if stack is None:
                layer = SingleTaskGP(
                    s.X, Y, Yvar, covar_module=kernel,
                    input_transform=transform, outcome_transform=None,
                )
            else:
                layer = DeltaBOModel(
                    s.X, Y, source=stack, train_Yvar=Yvar, delta_covar_module=kernel,
                    input_transform=transform, source_max_rank=max_rank,
                    source_tolerance=tolerance,
                )
            if fit_source:
                fit_gpytorch_mll(ExactMarginalLogLikelihood(layer.likelihood, layer))
            stack = source_posterior_from_model(layer, max_rank=max_rank, tolerance=tolerance)
        return stack

    @staticmethod
    def _residual_noise(
        source_posterior: SourcePosterior,
        X: Tensor,
        Yvar: Tensor | None,
        residual_covariance: str,
    ) -> Tensor:
        r"""Fixed part of the residual noise at raw ``X`` (``batch x n``)."""
        noise = torch.zeros(X.shape[:-1], dtype=X.dtype, device=X.device)
        if residual_covariance == "diagonal":
            noise = noise + source_posterior.variance(X)
        if Yvar is not None:
            noise = noise + Yvar.squeeze(-1)
        return noise

    def frozen_source(self) -> SourcePosterior:
        r"""The frozen source posterior in user units.

        Pass it as ``source`` to rebuild the model on new target data without
        re-fitting or re-factorizing the source:
        ``DeltaBOModel(X, Y, source=model.frozen_source())``.

        Returns:
            A copy of ``source_posterior`` mapped back to the user's output units.
        """
        source = copy.deepcopy(self.source_posterior)
        source.set_output_affine(self.output_scale, self.output_offset)
        return source

    def as_source_posterior(
        self, max_rank: int = 1000, tolerance: float = 1e-10
    ) -> SourcePosterior:
        r"""This model's posterior of ``f`` as a frozen source (in user units).

        Used when a fitted ``DeltaBOModel`` is passed as the source of another model.

        Args:
            max_rank: See :class:`GPSourcePosterior`.
            tolerance: See :class:`GPSourcePosterior`.

        Returns:
            A :class:`SourcePosterior` equal to this model's latent posterior.
        """
        if len(self.batch_shape) != 0:
            raise ValueError("Only a non-batched DeltaBOModel can be used as a source.")
        self.eval()
        source = copy.deepcopy(self.source_posterior)
        if self.num_train > 0:
            X = self._raw_train_inputs()
            noise = self.likelihood.noise.expand(self.train_targets.shape)
            if self.residual_covariance == "diagonal":
                delta = GPSourcePosterior(
                    X, self.train_targets, noise, self.delta_covar_module,
                    input_transform=getattr(self, "input_transform", None),
                    max_rank=max_rank, tolerance=tolerance,
                )
                source = SumSourcePosterior([source, delta])
            else:
                source = GPSourcePosterior(
                    X, self.train_targets + source.mean(X), noise, self.delta_covar_module,
                    input_transform=getattr(self, "input_transform", None),
                    prior_source=source, max_rank=max_rank, tolerance=tolerance,
                )
        source.set_output_affine(self.output_scale, self.output_offset)
        return source

    # ---------------------------------------------------------------- helpers
    @property
    def num_train(self) -> int:
        r"""Number of target training points (per batch)."""
        return self.train_targets.shape[-1]

    @property
    def learns_target_noise(self) -> bool:
        r"""Whether the target noise ``sigma^2`` is learned (no ``train_Yvar``)."""
        return not isinstance(self.likelihood, FixedNoiseGaussianLikelihood) or (
            self.likelihood.second_noise_covar is not None
        )

    def _raw_train_inputs(self) -> Tensor:
        if hasattr(self, "input_transform") and getattr(self, "_has_transformed_inputs", False):
            return self._original_train_inputs
        return self.train_inputs[0]

    def _raw_inputs(self, X: Tensor) -> Tensor:
        r"""Map transformed inputs back to raw inputs (where the source lives)."""
        if hasattr(self, "input_transform"):
            return self.input_transform.untransform(X)
        return X

    def target_noise(self) -> Tensor:
        r"""The target noise variance ``sigma^2`` (model units), ``batch_shape`` tensor.

        The learned level, or the mean of the known training ``train_Yvar`` (as
        BoTorch's fixed-noise models use for new points).
        """
        if isinstance(self.likelihood, GaussianLikelihood):
            return self.likelihood.noise.squeeze(-1).expand(self.batch_shape)
        if self.learns_target_noise:
            return self.likelihood.second_noise.squeeze(-1).expand(self.batch_shape)
        if self.num_train == 0:
            raise RuntimeError("No known target noise: the model has no training data.")
        return self.target_Yvar.mean(dim=-1)

    # ----------------------------------------------------------------- GPyTorch
    def forward(self, x: Tensor) -> MultivariateNormal:
        if self.training:
            x = self.transform_inputs(x)
        mean = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
        covar = self.delta_covar_module(x)
        if self.residual_covariance == "full":
            covar = covar + DenseLinearOperator(
                self.source_posterior.covariance(self._raw_inputs(x))
            )
        return MultivariateNormal(mean, covar)

    # ------------------------------------------------------------------ BoTorch
    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: PosteriorTransform | None = None,
        **kwargs: Any,
    ) -> GPyTorchPosterior:
        r"""Posterior of ``f`` at ``X`` (``batch_shape x q x d``), joint over ``q``.

        Args:
            X: Raw inputs.
            output_indices: ``None`` or ``[0]`` (single output).
            observation_noise: ``True`` adds the target noise ``sigma^2`` at ``X``;
                a tensor (``... x q x 1``, in transformed units) adds that noise.
            posterior_transform: Optional transform applied at the end.

        Returns:
            A ``GPyTorchPosterior`` in the user's output units.
        """
        if output_indices is not None and list(output_indices) != [0]:
            raise ValueError(f"DeltaBOModel has one output; got output_indices={output_indices}.")
        if X.shape[-1] != self.train_inputs[0].shape[-1]:
            raise ValueError(
                f"`X` must have d={self.train_inputs[0].shape[-1]} columns, got "
                f"{tuple(X.shape)}."
            )
        self.eval()
        X_raw = X
        X = self.transform_inputs(X)
        with gpt_posterior_settings():
            if self.num_train == 0:
                mvn = self.forward(X)  # prior of delta (+ source, "full")
            else:
                mvn = self(X)
            mean = mvn.mean + self.source_posterior.mean(X_raw)
            covar = mvn.covariance_matrix
            if self.residual_covariance == "diagonal":
                covar = covar + self.source_posterior.covariance(X_raw)
            if observation_noise is True:
                noise = self.target_noise().unsqueeze(-1).expand(covar.shape[:-2] + covar.shape[-1:])
                covar = covar + torch.diag_embed(noise)
            elif isinstance(observation_noise, Tensor):
                covar = covar + torch.diag_embed(observation_noise.squeeze(-1).expand(covar.shape[:-1]))
            mean, covar = torch.broadcast_tensors(mean.unsqueeze(-1), covar)
            # lazy: factorized (with jitter if needed) only when sampling
            mvn = MultivariateNormal(mean[..., 0], DenseLinearOperator(covar))
        posterior = GPyTorchPosterior(distribution=mvn)
        if hasattr(self, "outcome_transform"):
            posterior = self.outcome_transform.untransform_posterior(posterior, X=X)
        if posterior_transform is not None:
            return posterior_transform(posterior)
        return posterior

    def condition_on_observations(
        self, X: Tensor, Y: Tensor, noise: Tensor | None = None, **kwargs: Any
    ) -> DeltaBOModel:
        r"""A new model conditioned on extra target observations ``(X, Y)``.

        The residuals and their noise are formed as at construction (``Y`` minus the
        source mean; plus the source variance for ``"diagonal"``), so fantasies are
        consistent with the model. The source posterior is shared, not copied.

        Args:
            X: ``batch_shape x n' x d`` raw inputs.
            Y: ``batch_shape' x n' x 1`` observations in user units (batch shape
                broadcastable with ``X``'s and the model's).
            noise: Optional target noise variances of ``Y``, in transformed units
                (as BoTorch's ``fantasize`` passes them); only for a model with known
                target noise. If ``None`` there, the mean training noise is used.

        Returns:
            The conditioned ``DeltaBOModel``.
        """
        if Y.dim() < 2 or Y.shape[-1] != 1:
            raise ValueError(f"`Y` must have shape batch_shape x n' x 1, got {tuple(Y.shape)}.")
        if X.shape[-1] != self.train_inputs[0].shape[-1]:
            raise ValueError(
                f"`X` must have d={self.train_inputs[0].shape[-1]} columns, got {tuple(X.shape)}."
            )
        if self.learns_target_noise and noise is not None:
            raise ValueError(
                "`noise` can only be given to a DeltaBOModel with known target noise "
                "(`train_Yvar`); this model learns its target noise."
            )
        self.eval()
        Y_model = ((Y - self.output_offset) / self.output_scale).squeeze(-1)
        with torch.no_grad():
            residuals = Y_model - self.source_posterior.mean(X)
            fixed = torch.zeros_like(residuals)
            if self.residual_covariance == "diagonal":
                fixed = fixed + self.source_posterior.variance(X)
            if self.learns_target_noise:
                target = torch.full_like(residuals, float("nan"))
            else:
                target = (
                    noise.squeeze(-1) if noise is not None else self.target_noise().unsqueeze(-1)
                ).expand_as(residuals)
                fixed = fixed + target
        batch = torch.broadcast_shapes(self.batch_shape, X.shape[:-2], residuals.shape[:-1])

        def cat_points(old: Tensor, new: Tensor) -> Tensor:
            return torch.cat([old.expand(*batch, *old.shape[-1:]), new.expand(*batch, *new.shape[-1:])], dim=-1)

        def cat_inputs(old: Tensor, new: Tensor) -> Tensor:
            return torch.cat(
                [old.expand(*batch, *old.shape[-2:]), new.expand(*batch, *new.shape[-2:])], dim=-2
            )

        fantasy = copy.deepcopy(self, memo={id(self.source_posterior): self.source_posterior})
        fantasy.set_train_data(
            inputs=cat_inputs(self.train_inputs[0], self.transform_inputs(X)),
            targets=cat_points(self.train_targets, residuals),
            strict=False,
        )
        if hasattr(self, "input_transform") and getattr(self, "_has_transformed_inputs", False):
            fantasy._original_train_inputs = cat_inputs(self._original_train_inputs, X).detach()
        if isinstance(self.likelihood, FixedNoiseGaussianLikelihood):
            fantasy.likelihood.noise_covar.noise = cat_points(
                self.likelihood.noise_covar.noise, fixed
            )
        fantasy.target_Yvar = cat_points(self.target_Yvar, target)
        return fantasy

    def fantasize(
        self,
        X: Tensor,
        sampler: MCSampler,
        observation_noise: Tensor | None = None,
        **kwargs: Any,
    ) -> DeltaBOModel:
        r"""Fantasy model: sample ``y = f(X) + eps`` and condition on it.

        ``eps`` has the target noise ``sigma^2`` (learned, or the mean known
        ``train_Yvar``), not the residual noise: the source uncertainty at ``X`` is
        part of ``f``'s posterior already.

        Args:
            X: ``batch_shape x n' x d`` raw inputs.
            sampler: Sampler of the fantasized observations.
            observation_noise: Optional ``... x n' x 1`` noise (transformed units) for
                a model with known target noise.
            kwargs: Passed to ``condition_on_observations``.

        Returns:
            The fantasy model, batch shape ``sample_shape x batch_shape``.
        """
        propagate_grads = kwargs.pop("propagate_grads", False)
        with fantasize_flag(), botorch_settings.propagate_grads(propagate_grads):
            post_X = self.posterior(
                X, observation_noise=True if observation_noise is None else observation_noise
            )
            Y_fantasized = sampler(post_X)
            noise = None
            if observation_noise is not None:
                noise = observation_noise.expand(Y_fantasized.shape[1:])
            return self.condition_on_observations(X=X, Y=Y_fantasized, noise=noise, **kwargs)

    @classmethod
    def construct_inputs(
        cls,
        training_data: SupervisedDataset,
        source: SourceLike | Sequence[SourceLike],
        **kwargs: Any,
    ) -> dict[str, Any]:
        r"""Constructor arguments from a ``SupervisedDataset`` plus the source(s).

        Args:
            training_data: The target data.
            source: See the constructor.
            kwargs: Further constructor options, passed through.

        Returns:
            Keyword arguments for ``DeltaBOModel(**inputs)``.
        """
        inputs = super().construct_inputs(training_data=training_data)
        return {**inputs, "source": source, **kwargs}


# BoTorch dispatches pathwise (Matheron) sampling on ExactGP; for DeltaBOModel that
# would sample the residual process alone and silently miss the source posterior.
# Refuse clearly instead (used e.g. by get_optimal_samples / qJointEntropySearch).
@DrawMatheronPaths.register(DeltaBOModel)
def _draw_matheron_paths_deltabo(model: DeltaBOModel, **kwargs: Any) -> None:
    raise UnsupportedError(
        "Pathwise (Matheron) posterior samples are not implemented for DeltaBOModel: "
        "they would omit the source posterior. Use Monte-Carlo acquisition functions "
        "(qLogNoisyExpectedImprovement, qUpperConfidenceBound, qKnowledgeGradient, "
        "qMaxValueEntropy with a candidate set), which sample the full posterior."
    )


@DrawKernelFeaturePaths.register(DeltaBOModel)
def _draw_kernel_feature_paths_deltabo(model: DeltaBOModel, **kwargs: Any) -> None:
    raise UnsupportedError(
        "Kernel-feature prior paths are not implemented for DeltaBOModel (its prior "
        "includes the frozen source posterior)."
    )
