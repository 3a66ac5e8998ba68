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

The default ``residual_covariance="full"`` replaces the paper's per-point (diagonal)
treatment of the source error at the target points (``"diagonal"``) by the exact
Gaussian conditional: prior mean ``mu_g,N`` and prior kernel ``k_g,N + k_delta``, so
that source errors at nearby target points are correlated with each other and with the
test points.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any, ClassVar

import torch
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import Likelihood
from gpytorch.means import Mean, ZeroMean
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.priors import NormalPrior
from linear_operator.operators import DenseLinearOperator
from torch import Tensor
from torch.nn import Module

from botorch_transfer._deprecation import moved_names, renamed_keywords
from botorch_transfer.data import TaskData
from botorch_transfer.models.base import SourceConditionedGP, TrainingData
from botorch_transfer.models.frozen_source import (
    frozen_source_posterior,
    source_posterior_from_model,
)
from botorch_transfer.models.likelihoods import target_likelihood
from botorch_transfer.models.source_options import (
    DEFAULT_SOURCE_SCALE_PRIOR_SD,
    OLD_MAP_OPTIONS,
    OLD_SOURCE_OPTIONS,
    AffineMap,
    IdentityMap,
    MarginalAffineMap,
    SourceMap,
    SourceOptions,
    options_from_old_keywords,
)
from botorch_transfer.models.source_posterior import (
    GPSourcePosterior,
    MarginalAffineSourcePosterior,
    ModelSourcePosterior,
    SourceLike,
    SourcePosterior,
    SumSourcePosterior,
    marginal_affine_covariance,
)
from botorch_transfer.models.task_column import TaskColumn
from botorch_transfer.models.utils.assorted import (
    default_transfer_kernel,
    refuse_pathwise_sampling,
)
from botorch_transfer.models.utils.stacking import (
    StackedSourcePosterior,
    load_stacked_parameters,
    stacked_module,
)
from botorch_transfer.progress import (
    fit_mll_with_progress,
    progress_argument,
    progress_bars,
)


class DeltaBOModel(SourceConditionedGP):
    r"""DeltaBO residual GP: ``f = g + delta`` with a frozen source posterior of ``g``.

    The trainable part is the delta GP (``covar_module``) and, when
    ``train_Yvar`` is not given, the target noise ``sigma^2``;
    ``fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))`` fits
    exactly those. The source posterior is a frozen buffer (moved by ``.to()``).

    ``train_inputs``/``train_targets`` are the delta GP's data: the target inputs and
    the residuals ``y_i - mu_g,N(x_i)`` (model units). The target data in the user's
    units are ``target_X``, ``target_Y`` and ``target_Yvar``; give BoTorch's
    acquisition functions ``best_f=model.target_Y.max()`` and
    ``X_baseline=model.target_X``.

    Args:
        train_X: ``batch_shape x n x d`` target inputs (``n`` may be 0).
        train_Y: ``batch_shape x n x 1`` target observations.
        train_Yvar: Optional ``batch_shape x n x 1`` known target noise variances.
            If ``None``, a homoscedastic target noise ``sigma^2`` is learned.
        source: The source task(s) (keyword): a ``TaskData`` (a ``SingleTaskGP`` is
            built and fitted on it once, here; above 1,000 points its
            hyperparameters are fitted on a fixed random subset of 1,000 and the
            posterior conditions on all points), a fitted single-output BoTorch
            ``Model`` (used as is, frozen; exact GPs are cached for fast
            evaluation, and passing the same unchanged model again, e.g. when
            rebuilding every BO iteration, reuses that cache; one whose
            hyperparameters are all still at their initial values triggers an
            ``UntrainedSourceWarning``), a ``SourcePosterior``
            in user units (e.g. ``model.frozen_source()`` of a previous model, to
            rebuild without touching the source), or a list of these stacked in
            order: each later ``TaskData`` is modelled as the residual of the stack
            before it (a DeltaBO layer), as in the paper's footnote on several
            sources.
        likelihood: Likelihood of the residual GP. Default: BoTorch's noise model;
            under ``IdentityMap("diagonal")`` a ``FixedNoiseGaussianLikelihood``
            carrying the source variance at each target point (plus a learned
            ``sigma^2``).
        covar_module: Kernel ``k_delta`` of the difference GP (stored as the
            ``delta_covar_module`` attribute). Defaults to a scaled RBF kernel with
            BoTorch's priors, whose outputscale is ``tau^2``.
        mean_module: Prior mean of the difference GP (default: zero, the paper's).
        input_transform: Input transform (e.g. ``Normalize``), applied as
            ``SingleTaskGP`` applies it; a copy is given to sources built from
            ``TaskData``. Unless the map is ``IdentityMap("diagonal")`` it must be
            invertible.
        outcome_transform: ``None`` (default, so that hyperparameters mean what they
            say in your units) or ``Standardize(m=1)``. It is fitted once on all
            source ``TaskData`` and target outcomes and applied to both: ``f = g +
            delta`` only holds when source and target share one affine map.
        source_map: How the source enters the target (see
            :mod:`~botorch_transfer.models.source_options`):
            :class:`~botorch_transfer.models.source_options.IdentityMap` (the
            paper's ``f = g + delta``; ``IdentityMap(residual_covariance=
            "diagonal")`` is the paper's model exactly),
            :class:`~botorch_transfer.models.source_options.AffineMap` (``f = a g +
            c + delta`` with ``a`` and ``c``, ``source_scale`` and
            ``source_offset``, fitted with the delta kernel) or
            :class:`~botorch_transfer.models.source_options.MarginalAffineMap`
            (the same map with ``a`` and ``c`` integrated out; pass
            ``Standardize(m=1)`` with it), or the name of one with its defaults
            (``"identity"``, ``"affine"``, ``"marginal-affine"``). Default
            (``None``): ``MarginalAffineMap()`` (see ``docs/decisions.md``,
            "DeltaBOModel's default source map"). (``residual_covariance``,
            ``source_scale_prior``, ``source_scale_sd`` and ``source_offset_sd``,
            the maps' settings as keywords, are deprecated.)
        source_options: The kernel and fit of source GPs built from ``TaskData``
            and the size of the cached source posterior (a
            :class:`~botorch_transfer.models.source_options.SourceOptions`;
            default ``SourceOptions()``). (``source_covar_module``,
            ``fit_source``, ``source_max_rank`` and ``source_tolerance``, its
            fields as keywords, are deprecated; so is ``delta_covar_module``, an
            alias of ``covar_module``.)
        task_column: The layout of Ax's transfer-learning queries (see
            :class:`~botorch_transfer.models.task_column.TaskColumn`; set by
            ``construct_inputs``).

    Example:
        >>> source = TaskData(X_src, Y_src)
        >>> model = DeltaBOModel(train_X, train_Y, source=source)
        >>> mll = ExactMarginalLogLikelihood(model.likelihood, model)
        >>> mll = fit_gpytorch_mll(mll)
        >>> UCB = UpperConfidenceBound(model, beta=beta_t(t, domain_size, rho=0.1))
    """

    #: Old keyword names the constructor still takes (deprecated), with what
    #: replaces them.
    renamed_arguments: ClassVar[dict[str, str]] = {
        **SourceConditionedGP.renamed_arguments,
        "progress": "progress_bars",
        "delta_covar_module": "covar_module",
        **OLD_MAP_OPTIONS,
        **{old: "source_options" for old in OLD_SOURCE_OPTIONS},
    }

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        train_Yvar: Tensor | None = None,
        likelihood: Likelihood | None = None,
        covar_module: Kernel | None = None,
        mean_module: Mean | None = None,
        outcome_transform: OutcomeTransform | None = None,
        input_transform: InputTransform | None = None,
        *,
        source: SourceLike | Sequence[SourceLike],
        source_map: str | SourceMap | None = None,
        source_options: SourceOptions | None = None,
        task_column: TaskColumn | None = None,
        **deprecated: Any,
    ) -> None:
        if "delta_covar_module" in deprecated:
            if covar_module is not None:
                raise ValueError(
                    "Give the difference GP's kernel once, as `covar_module`: "
                    "`delta_covar_module` is its deprecated alias, not both."
                )
            covar_module = renamed_keywords(
                type(self).__name__,
                {"delta_covar_module": deprecated.pop("delta_covar_module")},
                {"delta_covar_module": "covar_module"},
            )["covar_module"]
        source_map, source_options = options_from_old_keywords(
            type(self).__name__, source_map, source_options, deprecated
        )
        self.source_map = source_map
        self.residual_covariance = source_map.residual_covariance
        # a tuple: a Module cannot be assigned before Module.__init__
        self._source_scale_prior = (getattr(source_map, "scale_prior", None),)
        if isinstance(source_map, MarginalAffineMap):
            self._marginal_map = (source_map.scale_sd, source_map.offset_sd)
        self.source_options = source_options
        with progress_argument(type(self).__name__, deprecated):
            super().__init__(
                train_X,
                train_Y,
                train_Yvar,
                transfer=source,
                task_column=task_column,
                **deprecated,
                likelihood=likelihood,
                covar_module=covar_module,
                mean_module=mean_module,
                input_transform=input_transform,
                outcome_transform=outcome_transform,
            )
        if isinstance(source_map, AffineMap):
            self._initialize_source_map()

    def _initialize_source_map(self) -> None:
        r"""Start the fit of ``a`` and ``c`` at the least-squares line of the target
        on the source mean (else at 1 and 0): from 1, a source that is the target
        turned upside down would have to pass ``a = 0``, a local optimum of the
        marginal likelihood."""
        if self.num_train < 3:
            return
        with torch.no_grad():
            mu = self._training_source_mean
            y = self._target_Y  # model units, batch x n
            mu_c = mu - mu.mean(-1, keepdim=True)
            y_c = y - y.mean(-1, keepdim=True)
            var = (mu_c**2).mean(-1)
            spread = (y_c**2).mean(-1)
            informative = var > 1e-8 * spread.clamp_min(torch.finfo(mu.dtype).tiny)
            slope = torch.where(
                informative, (mu_c * y_c).mean(-1) / var.clamp_min(1e-300), 1.0
            )
            slope = slope.expand(self.source_scale.shape)
            self.source_scale.copy_(slope)
            offset = y.mean(-1) - slope * mu.mean(-1)
            self.source_offset.copy_(torch.where(informative, offset, 0.0))

    @property
    def needs_invertible_input_transform(self) -> bool:
        r"""The full residual covariance evaluates the source at raw inputs."""
        return self.residual_covariance == "full"

    def _default_likelihood(
        self, train_X: Tensor, train_Yvar: Tensor | None, transfer: Any
    ) -> Likelihood:
        # diagonal: the source variance at each target point is per-point noise
        return target_likelihood(
            train_X,
            known_noise=train_Yvar is not None,
            per_point_noise=self.residual_covariance == "diagonal",
        )

    def _build_modules(
        self,
        transfer: list[SourceLike],
        train_X: Tensor,
        covar_module: Module | None,
        mean_module: Mean | None,
        input_transform: InputTransform | None,
    ) -> None:
        self.source_posterior = self._build_source_posterior(
            transfer,
            scale=self.output_scale,
            offset=self.output_offset,
            input_transform=input_transform,
            options=self.source_options,
            residual_covariance=self.residual_covariance,
        ).to(train_X)
        batch_shape = train_X.shape[:-2]
        # the paper's delta GP has zero mean (a ZeroMean adds no hyperparameter)
        self.mean_module = mean_module if mean_module is not None else ZeroMean()
        self.delta_covar_module = (
            covar_module
            if covar_module is not None
            else default_transfer_kernel(train_X.shape[-1], batch_shape=batch_shape)
        )
        if isinstance(self.source_map, AffineMap):
            like = dict(dtype=train_X.dtype, device=train_X.device)
            self.source_scale = torch.nn.Parameter(torch.ones(batch_shape, **like))
            self.source_offset = torch.nn.Parameter(torch.zeros(batch_shape, **like))
            (prior,) = self._source_scale_prior
            if prior is None:
                prior = NormalPrior(1.0, DEFAULT_SOURCE_SCALE_PRIOR_SD)
            # bound methods, not the closures a parameter name would make: picklable
            self.register_prior(
                "source_scale_prior",
                prior.to(**like),
                self._source_scale_of,
                self._set_source_scale_of,
            )

    def _training_data(self, X: Tensor, Y: Tensor, Yvar: Tensor) -> TrainingData:
        r"""Residuals ``Y - mu_g,N(X)`` with noise ``[sigma^2_g,N(X)] + Yvar``
        (Alg. 1, l. 4-5)."""
        with torch.no_grad():
            residuals = Y - self.source_posterior.mean(X)
            fixed = torch.zeros_like(residuals)
            if self.residual_covariance == "diagonal":
                fixed = fixed + self.source_posterior.variance(X)
            if not self.learns_target_noise:
                fixed = fixed + Yvar
        per_point = (
            self.residual_covariance == "diagonal" or not self.learns_target_noise
        )
        return TrainingData(X, residuals, fixed if per_point else None)

    def _combine_posterior(
        self, gp_posterior: MultivariateNormal, X: Tensor
    ) -> MultivariateNormal:
        r"""``f = g + delta``: add the frozen source posterior (eq. 7). Under
        ``"full"`` the source covariance is already in the GP's prior."""
        mean = gp_posterior.mean + self.source_posterior.mean(X)
        covar = gp_posterior.lazy_covariance_matrix
        if self.residual_covariance == "diagonal":
            covar = covar + DenseLinearOperator(self.source_posterior.covariance(X))
        return MultivariateNormal(mean, covar)

    def _frozen_modules(self) -> list[torch.nn.Module]:
        return [self.source_posterior]

    # ------------------------------------------------------------------ sources
    @staticmethod
    def _build_source_posterior(
        sources: list[SourceLike],
        scale: Tensor,
        offset: Tensor,
        input_transform: InputTransform | None,
        options: SourceOptions,
        residual_covariance: str,
    ) -> SourcePosterior:
        r"""Build the frozen posterior of the (stacked) source in model units (later
        sources are DeltaBO layers with the model's ``residual_covariance``)."""
        stack: SourcePosterior | None = None
        for s in sources:
            kernel = None  # k_g of a source given as data
            if isinstance(s, TaskData):
                kernel = (
                    options.covar_module
                    if options.covar_module is not None
                    else default_transfer_kernel(s.d)
                )
            if stack is None or kernel is None:  # the first source, or a fitted one
                # bars while the source posterior is built (the source GP's fit,
                # the cached factor) follow botorch_transfer.progress.progress_bars
                stack = frozen_source_posterior(
                    s, scale, offset, input_transform, kernel, options.fit,
                    max_rank=options.max_rank, tolerance=options.tolerance,
                    progress=True,
                )  # fmt: skip
                continue
            # a later source: a DeltaBO layer on the residuals of the stack
            layer = DeltaBOModel(
                s.X,
                (s.Y - offset) / scale,
                None if s.Yvar is None else s.Yvar / scale**2,
                source=stack,
                covar_module=copy.deepcopy(kernel),
                input_transform=copy.deepcopy(input_transform),
                # each layer is the paper's residual of the stack below it; the
                # model's own source map applies to the whole stack
                source_map=IdentityMap(residual_covariance=residual_covariance),
                source_options=replace(options, covar_module=None),
            )
            if options.fit:
                fit_mll_with_progress(
                    ExactMarginalLogLikelihood(layer.likelihood, layer),
                    progress=True,
                    desc="source layer fit",
                )
            stack = source_posterior_from_model(
                layer,
                max_rank=options.max_rank,
                tolerance=options.tolerance,
                progress=True,
            )
        return stack

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
        # a model rebuilt on it transfers from this model's sources (TransferGuard
        # compares them across iterations)
        source.origin_fingerprint = list(self._transfer_fingerprint)
        return source

    def as_source_posterior(
        self, max_rank: int = 1000, tolerance: float = 1e-10, progress: bool = True
    ) -> SourcePosterior:
        r"""This model's posterior of ``f`` as a frozen source (in user units).

        Used when a fitted ``DeltaBOModel`` is passed as the source of another model.

        Args:
            max_rank: See :class:`GPSourcePosterior`.
            tolerance: See :class:`GPSourcePosterior`.
            progress: See :class:`GPSourcePosterior`.

        Returns:
            A :class:`SourcePosterior` equal to this model's latent posterior.
        """
        if len(self.batch_shape) != 0:
            raise ValueError("Only a non-batched DeltaBOModel can be used as a source.")
        self.eval()
        if self.num_train == 0:
            # the prior of f (source, its map and the delta prior): no data to cache
            # a factor of, so the model's own posterior is the source
            return ModelSourcePosterior(self)
        source = copy.deepcopy(self.source_posterior)
        noise = self.likelihood.noise.expand(self.train_targets.shape)
        # the delta GP's kernel and mean, conditioned on the target inputs
        conditioned = partial(
            GPSourcePosterior,
            self._target_X,
            noise=noise,
            covar_module=self.delta_covar_module,
            mean_module=self._delta_mean(),
            input_transform=getattr(self, "input_transform", None),
            max_rank=max_rank,
            tolerance=tolerance,
            progress=progress,
        )
        if self.residual_covariance == "diagonal":
            source = SumSourcePosterior([source, conditioned(self.train_targets)])
        else:
            if isinstance(self.source_map, AffineMap):  # the prior a g + c
                source.set_output_affine(
                    self.source_scale.detach(), self.source_offset.detach()
                )
            elif isinstance(self.source_map, MarginalAffineMap):
                source = MarginalAffineSourcePosterior(source, *self._marginal_map)
            # residuals plus mu_g,N: the target data, under the prior of f
            source = conditioned(self._target_Y, prior_source=source)
        source.set_output_affine(self.output_scale, self.output_offset)
        return source

    def _delta_mean(self) -> Mean | None:
        return None if isinstance(self.mean_module, ZeroMean) else self.mean_module

    def forward(self, x: Tensor) -> MultivariateNormal:
        # the fit evaluates the prior at the training inputs only (a prediction asks
        # for the query blocks alone: _get_test_prior_mean_and_covariances)
        at_training_inputs = self.training and self._is_training_input(x)
        if self.training:
            x = self.transform_inputs(x)
        mean = self.mean_module(x)
        covar = self.delta_covar_module(x)
        if self.residual_covariance == "full":
            source_covar = self.source_posterior.covariance(self._raw_inputs(x))
            source_mean = None
            if self._map_uses_source_mean:
                source_mean = self._source_mean(x, at_training_inputs)
            mean = self._mapped_mean(mean, source_mean)
            source_covar = self._mapped_covariance(
                source_covar, source_mean, source_mean
            )
            # the source block is dense, so the sum is too: one dense matrix for
            # GPyTorch to factor (cheaper than a sum with a lazy kernel)
            covar = DenseLinearOperator(covar.to_dense() + source_covar)
        return MultivariateNormal(mean, covar)

    def _get_test_prior_mean_and_covariances(
        self, train_inputs: Sequence[Tensor], test_inputs: Sequence[Tensor], **kwargs
    ) -> tuple[Tensor, Tensor, Tensor, torch.Size, torch.Size, type]:
        r"""The prior at the query points and between them and the training points
        (GPyTorch's hook for its prediction). Under the full residual covariance only
        these blocks are built: the joint prior over ``[train; query]`` repeats the
        training block for every query batch entry, and the prediction never reads
        it."""
        if self.residual_covariance != "full":
            return super()._get_test_prior_mean_and_covariances(
                train_inputs, test_inputs, **kwargs
            )
        (train_x,), (x,) = train_inputs, test_inputs
        batch = torch.broadcast_shapes(train_x.shape[:-2], x.shape[:-2])
        x = x.expand(*batch, *x.shape[-2:])
        mean = self.mean_module(x).expand(*batch, x.shape[-2])
        own = self.delta_covar_module(x).to_dense()
        cross = self.delta_covar_module(x, train_x.expand(*batch, *train_x.shape[-2:]))
        raw = self._raw_inputs(x)
        source_cross, source_own = self.source_posterior.query_covariances(
            self._raw_inputs(train_x), raw
        )
        source_mean = None
        if self._map_uses_source_mean:
            source_mean = self.source_posterior.mean(raw)
        mean = self._mapped_mean(mean, source_mean)
        source_cross = self._mapped_covariance(
            source_cross, source_mean, self._training_source_mean
        )
        source_own = self._mapped_covariance(source_own, source_mean, source_mean)
        test_test = DenseLinearOperator(own + source_own)
        test_train = DenseLinearOperator(cross.to_dense() + source_cross)
        return (
            mean,
            test_test,
            test_train,
            test_test.shape[:-2],
            torch.Size([x.shape[-2]]),
            MultivariateNormal,
        )

    @property
    def _map_uses_source_mean(self) -> bool:
        return isinstance(self.source_map, (AffineMap, MarginalAffineMap))

    def _mapped_mean(self, mean: Tensor, source_mean: Tensor | None) -> Tensor:
        r"""The residuals' prior mean under the source map: ``mean`` plus
        ``(a - 1) mu_g,N + c`` for ``f = a g + c + delta`` (the residuals are
        ``y - mu_g,N``); as it is otherwise."""
        if not isinstance(self.source_map, AffineMap):
            return mean
        scale = self.source_scale.unsqueeze(-1)
        return mean + (scale - 1) * source_mean + self.source_offset[..., None]

    def _mapped_covariance(
        self, covariance: Tensor, mean1: Tensor | None, mean2: Tensor | None
    ) -> Tensor:
        r"""A block of ``Sigma_g,N`` (between sets where ``mu_g,N`` is ``mean1`` and
        ``mean2``) under the source map: ``a^2 Sigma_g,N`` (affine), the covariance
        with ``a`` and ``c`` integrated out (marginal affine), as it is (identity)."""
        if isinstance(self.source_map, AffineMap):
            return self.source_scale.unsqueeze(-1).unsqueeze(-1) ** 2 * covariance
        if isinstance(self.source_map, MarginalAffineMap):
            return marginal_affine_covariance(
                covariance, mean1, mean2, *self._marginal_map
            )
        return covariance

    @staticmethod
    def _source_scale_of(model: DeltaBOModel) -> Tensor:
        return model.source_scale

    @staticmethod
    def _set_source_scale_of(model: DeltaBOModel, value: Tensor) -> None:
        with torch.no_grad():
            model.source_scale.copy_(
                torch.as_tensor(value).expand_as(model.source_scale)
            )

    def _is_training_input(self, x: Tensor) -> bool:
        train_x = self.train_inputs[0]
        return x.shape == train_x.shape and torch.equal(x, train_x)

    @property
    def _training_source_mean(self) -> Tensor:
        r"""``mu_g,N`` at the target inputs (model units, ``batch x n``): ``y - r``,
        since the residuals ``r`` were built from it."""
        return self._target_Y - self.train_targets

    def _source_mean(self, x: Tensor, at_training_inputs: bool) -> Tensor:
        r"""``mu_g,N`` at the (transformed) inputs ``x``; at the training inputs from
        :attr:`_training_source_mean`, so that the fit does not evaluate the source."""
        if at_training_inputs:
            return self._training_source_mean
        return self.source_posterior.mean(self._raw_inputs(x))


refuse_pathwise_sampling(DeltaBOModel, "they would omit the source posterior")


def stacked_delta_models(models: Sequence[DeltaBOModel]) -> DeltaBOModel | None:
    r"""``K`` DeltaBO models on the same target data as one model of batch shape
    ``K``: entry ``k`` has model ``k``'s source posterior, kernel and
    hyperparameters (see :mod:`~botorch_transfer.models.utils.stacking`), so its
    marginal likelihood and posterior are model ``k``'s.

    The batched model works in the models' units (no outcome transform: its data
    are their target data in model units), with their input transform and query
    inputs without Ax's task column.

    Args:
        models: Non-batched ``DeltaBOModel``\ s on the same target data and outcome
            map, with the full residual covariance, one source map and kernels of
            one structure (e.g. each a source GP's difference kernel).

    Returns:
        The batched model, or ``None`` where the models cannot be stacked.
    """
    first = models[0]
    if len(models) < 2 or first.num_train == 0:
        return None
    same = all(
        len(m.batch_shape) == 0
        and m.residual_covariance == "full"
        and m.source_map == first.source_map
        and m.learns_target_noise == first.learns_target_noise
        and torch.equal(m.output_scale, first.output_scale)
        and torch.equal(m.output_offset, first.output_offset)
        and torch.equal(m._target_X, first._target_X)
        and torch.equal(m._target_Y, first._target_Y)
        and torch.equal(m._target_Yvar.nan_to_num(), first._target_Yvar.nan_to_num())
        for m in models
    )
    if not same:
        return None
    covar_module = stacked_module([m.delta_covar_module for m in models])
    mean_module = stacked_module([m.mean_module for m in models])
    if covar_module is None or mean_module is None:
        return None
    K, X = len(models), first._target_X
    Y, Yvar = first._target_Y.unsqueeze(-1), first._target_Yvar.unsqueeze(-1)
    input_transform = getattr(first, "input_transform", None)
    with progress_bars(False):
        stacked = DeltaBOModel(
            X.expand(K, *X.shape),
            Y.expand(K, *Y.shape),
            None if first.learns_target_noise else Yvar.expand(K, *Yvar.shape),
            covar_module=covar_module,
            mean_module=mean_module,
            input_transform=copy.deepcopy(input_transform),
            source=StackedSourcePosterior([m.source_posterior for m in models]),
            source_map=first.source_map,
            source_options=first.source_options,
        )
    load_stacked_parameters(stacked, models)
    return stacked


# the maps' constants, now beside the maps
__getattr__ = moved_names(
    __name__,
    dict.fromkeys(
        ("DEFAULT_SOURCE_OFFSET_SD", "RESIDUAL_COVARIANCES", "SOURCE_MAPS"),
        "botorch_transfer.models.source_options",
    ),
)
