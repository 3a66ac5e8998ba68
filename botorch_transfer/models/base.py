r"""What every source-conditioned GP of the package shares.

A *source-conditioned GP* is an exact GP over a target task whose prior, data or
noise is built from one or several related source tasks. Concretely it shares:

- validation of the target data and of the sources (``TaskData`` or fitted models)
  with errors that name the argument;
- one affine outcome map for source and target outcomes (a relation such as
  ``f = g + delta`` only survives a transform both sides share);
- the *target-data pattern*: the user's target data (raw inputs, outcomes in model
  units, known noise or ``NaN`` for learned) are stored as buffers, and a subclass's
  ``_set_target_data`` (re)builds the GP's training data from them and the frozen
  source parts. Construction, ``condition_on_observations`` and ``fantasize`` all go
  through it, so derived quantities (residuals, bias corrections, per-point noise)
  are always consistent with the target data;
- ``posterior`` (with an optional hook adding source terms), fantasies whose
  noise is the target noise, and ``construct_inputs``.

Subclasses implement ``_set_target_data`` and, where needed, ``_source_terms``.
:class:`PooledTransferGP` adds what the pooled-data models (Env-GP, Diff-GP) share:
one mean and kernel over ``[source; target]`` and per-point :class:`GroupedNoise`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from botorch import settings as botorch_settings
from botorch.acquisition.objective import PosteriorTransform
from botorch.models.gpytorch import GPyTorchModel
from botorch.models.model import FantasizeMixin, Model
from botorch.models.transforms.outcome import OutcomeTransform, Standardize
from botorch.models.utils.assorted import fantasize as fantasize_flag
from botorch.models.utils.assorted import gpt_posterior_settings
from botorch.models.utils.gpytorch_modules import get_covar_module_with_dim_scaled_prior
from botorch.posteriors.gpytorch import GPyTorchPosterior
from botorch.sampling.base import MCSampler
from botorch.utils.datasets import SupervisedDataset
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.likelihoods.gaussian_likelihood import _GaussianLikelihoodBase
from gpytorch.likelihoods.noise_models import HomoskedasticNoise, Noise
from gpytorch.means import ConstantMean, Mean
from gpytorch.models import ExactGP
from linear_operator.operators import DenseLinearOperator, DiagLinearOperator
from torch import Tensor
from torch.nn import Module

from botorch_transfer.data import TaskData
from botorch_transfer.models.source_posterior import SourcePosterior, outcome_affine


def validate_training_data(train_X: Tensor, train_Y: Tensor, train_Yvar: Tensor | None) -> None:
    r"""Check target data: shapes ``batch x n x d`` / ``batch x n x 1``, one dtype and
    device, finite values, non-negative ``train_Yvar``. Errors name the argument."""
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


def as_source_list(source: Any, train_X: Tensor, allow_models: bool = True) -> list:
    r"""Normalize ``source`` to a non-empty list and check it against the target.

    Args:
        source: One source or a list/tuple of them.
        train_X: The target inputs (for ``d``, dtype).
        allow_models: Whether the first source may be a fitted ``Model`` or a
            ``SourcePosterior`` (otherwise only ``TaskData`` are accepted).

    Returns:
        The list of sources.
    """
    sources = list(source) if isinstance(source, (list, tuple)) else [source]
    if len(sources) == 0:
        raise ValueError("`source` must contain at least one source, got an empty list.")
    dim = train_X.shape[-1]
    for i, s in enumerate(sources):
        allowed = (TaskData, Model, SourcePosterior) if allow_models else (TaskData,)
        if not isinstance(s, allowed):
            expected = (
                "a TaskData, a fitted BoTorch Model or a SourcePosterior"
                if allow_models
                else "a TaskData"
            )
            raise TypeError(f"`source[{i}]` must be {expected}, got {type(s).__name__}.")
        if i > 0 and not isinstance(s, TaskData):
            raise TypeError(
                f"`source[{i}]` is a {type(s).__name__}: only the first source may be a "
                "fitted model; later sources are TaskData modelled as residuals of the "
                "stack before them. To stack fitted models, pass a fitted DeltaBOModel."
            )
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
            if s.X.device != train_X.device:
                raise ValueError(f"`source[{i}]` is on {s.X.device} but `train_X` on {train_X.device}.")
    return sources


def fit_shared_outcome_affine(
    outcome_transform: OutcomeTransform | None, sources: Sequence, train_Y: Tensor
) -> tuple[Tensor, Tensor]:
    r"""Fit the outcome transform on all source ``TaskData`` and target outcomes.

    Returns:
        ``(scale, offset)`` with ``y_user = scale * y_model + offset`` (``(1, 0)`` for
        no transform), on ``train_Y``'s dtype and device.
    """
    scale = torch.ones((), dtype=train_Y.dtype, device=train_Y.device)
    offset = torch.zeros((), dtype=train_Y.dtype, device=train_Y.device)
    if outcome_transform is None:
        return scale, offset
    if not isinstance(outcome_transform, Standardize):
        outcome_affine(outcome_transform)  # raises the explanatory TypeError
    pooled = [s.Y for s in sources if isinstance(s, TaskData)] + [train_Y.reshape(-1, 1)]
    pooled = torch.cat(pooled, dim=0)
    if pooled.shape[0] == 0:
        raise ValueError(
            "`outcome_transform` cannot be fitted: there are no target observations "
            "and no source TaskData outcomes."
        )
    outcome_transform.train()
    outcome_transform(pooled)
    outcome_transform.eval()
    scale, offset = outcome_affine(outcome_transform)
    return scale.to(train_Y), offset.to(train_Y)


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


class GroupedNoise(Noise):
    r"""Per-point noise ``fixed_i + learned[group_i]`` for pooled training data.

    Each training point belongs to a group (e.g. one per source task and one for
    the target). A group either learns a homoscedastic noise level (its own
    ``HomoskedasticNoise`` with prior and constraint) added to the points' fixed
    noise, or uses the fixed noise alone. At inputs other than the training inputs
    (new points) the target group's noise applies.

    Args:
        group: ``n`` long tensor of group indices.
        fixed: ``batch x n`` fixed noise variances.
        learned: One entry per group: a ``HomoskedasticNoise`` that is learned, or
            ``None`` for a group with fixed noise only.
        target_group: The group whose noise applies at new points.
    """

    def __init__(
        self,
        group: Tensor,
        fixed: Tensor,
        learned: Sequence[HomoskedasticNoise | None],
        target_group: int,
    ) -> None:
        super().__init__()
        self.register_buffer("group", group, persistent=False)
        self.register_buffer("fixed", fixed, persistent=False)
        self.learned = torch.nn.ModuleList([m if m is not None else torch.nn.Identity() for m in learned])
        self.is_learned = [m is not None for m in learned]
        self.target_group = target_group

    def group_noise(self, g: int) -> Tensor | None:
        r"""The learned noise of group ``g`` (``batch x 1``), or ``None`` if fixed."""
        return self.learned[g].noise if self.is_learned[g] else None

    def training_noise(self) -> Tensor:
        r"""The per-point noise of the training points, ``batch x n``."""
        noise = self.fixed
        for g, learned in enumerate(self.is_learned):
            if learned:
                noise = noise + self.learned[g].noise * (self.group == g).to(noise)
        return noise

    def target_noise(self) -> Tensor:
        r"""Noise at new target points: the learned level, or the mean fixed noise of
        the target group's training points (as BoTorch's fixed-noise models do)."""
        if self.is_learned[self.target_group]:
            return self.learned[self.target_group].noise.squeeze(-1)
        mask = self.group == self.target_group
        if not mask.any():
            raise RuntimeError("No known target noise: the model has no target training data.")
        return self.fixed[..., mask].mean(dim=-1)

    def forward(self, *params: Any, shape: torch.Size | None = None, **kwargs: Any) -> DiagLinearOperator:
        if shape is None:
            shape = params[0].shape[:-1] if params and torch.is_tensor(params[0]) else self.fixed.shape
        if shape[-1] == self.group.numel():
            noise = self.training_noise()
        else:
            noise = self.target_noise().unsqueeze(-1)
        return DiagLinearOperator(noise.expand(shape))


class GroupedNoiseGaussianLikelihood(_GaussianLikelihoodBase):
    r"""A Gaussian likelihood with :class:`GroupedNoise`."""

    def __init__(self, noise_covar: GroupedNoise) -> None:
        super().__init__(noise_covar=noise_covar)

    @property
    def noise(self) -> Tensor:
        r"""Per-point noise variances of the training points."""
        return self.noise_covar.training_noise()


class MovableExactGPMixin:
    r"""For ``ExactGP`` models: ``.to()``/``.double()``/``.cuda()`` drop GPyTorch's cached
    prediction strategy, whose tensors keep the old dtype/device, so the next
    posterior rebuilds it."""

    def _apply(self, fn, *args, **kwargs):
        self.prediction_strategy = None
        return super()._apply(fn, *args, **kwargs)


class SourceConditionedGP(MovableExactGPMixin, ExactGP, GPyTorchModel, FantasizeMixin):
    r"""Base class of exact GPs conditioned on source tasks (see the module docs).

    Subclasses call ``ExactGP.__init__`` (placeholder training data), set their
    modules, call ``_finish_init`` at the end of their constructor, and implement:

    - ``_set_target_data(X, Y, Yvar)``: (re)build the GP's training inputs, targets
      and likelihood noise from target data (``X`` raw, ``Y`` in model units,
      ``Yvar`` in model units or ``NaN`` where the target noise is learned), keeping
      the batch shape of ``X``;
    - ``_source_terms(X)`` (optional): mean and covariance added to the GP
      posterior at raw ``X`` (e.g. a frozen source posterior);
    - ``target_noise()`` (optional): the target noise level at new points (model
      units; the default covers GPyTorch's Gaussian and fixed-noise likelihoods);
    - ``_frozen_modules()`` (optional): submodules shared, not copied, by
      conditioned models.
    """

    _num_outputs = 1

    # ----------------------------------------------------------- subclass API
    def _set_target_data(self, X: Tensor, Y: Tensor, Yvar: Tensor) -> None:
        raise NotImplementedError

    def _source_terms(self, X: Tensor) -> tuple[Tensor | None, Tensor | None]:
        return None, None

    def target_noise(self) -> Tensor:
        r"""The target noise variance at new points (model units), ``batch_shape``.

        Default: the learned level of a ``GaussianLikelihood`` (or the learned part
        of a ``FixedNoiseGaussianLikelihood`` with ``learn_additional_noise``), else
        the mean of the known training ``train_Yvar`` (as BoTorch's fixed-noise
        models use for new points). Override for other noise models.
        """
        if isinstance(self.likelihood, GaussianLikelihood):
            return self.likelihood.noise.squeeze(-1).expand(self.batch_shape)
        if self.learns_target_noise:
            return self.likelihood.second_noise.squeeze(-1).expand(self.batch_shape)
        if self.num_train == 0:
            raise RuntimeError("No known target noise: the model has no training data.")
        return self.target_Yvar.mean(dim=-1)

    def _frozen_modules(self) -> list[torch.nn.Module]:
        return []

    # ---------------------------------------------------------------- helpers
    def _init_target_data(
        self, train_X: Tensor, train_Y: Tensor, train_Yvar: Tensor | None, scale: Tensor, offset: Tensor
    ) -> None:
        r"""Store the output map and the target data (model units) as buffers."""
        self.register_buffer("output_scale", scale)
        self.register_buffer("output_offset", offset)
        Y = ((train_Y - offset) / scale).squeeze(-1)
        Yvar = torch.full_like(Y, float("nan")) if train_Yvar is None else (train_Yvar / scale**2).squeeze(-1)
        self._learns_noise = train_Yvar is None
        # data, not state: moved by .to(), left out of state_dict (so hyperparameters
        # load into a model built on other data, as with SingleTaskGP)
        self.register_buffer("target_X", train_X, persistent=False)
        self.register_buffer("target_Y", Y, persistent=False)
        self.register_buffer("target_Yvar", Yvar, persistent=False)

    def _finish_init(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        train_Yvar: Tensor | None,
        scale: Tensor,
        offset: Tensor,
        input_transform: Module | None,
        outcome_transform: Module | None,
    ) -> None:
        r"""Attach the transforms, store the target data and build the training data."""
        if outcome_transform is not None:
            self.outcome_transform = outcome_transform
        if input_transform is not None:
            self.input_transform = input_transform
        self._init_target_data(train_X, train_Y, train_Yvar, scale, offset)
        self.to(train_X)
        self._set_target_data(self.target_X, self.target_Y, self.target_Yvar)

    def _store_target_data(self, X: Tensor, Y: Tensor, Yvar: Tensor) -> None:
        self.target_X, self.target_Y, self.target_Yvar = X, Y, Yvar

    def _set_raw_train_inputs(self, inputs: Tensor, targets: Tensor) -> None:
        r"""Set raw training inputs; transformed right away when in eval mode."""
        self.set_train_data(inputs=inputs, targets=targets, strict=False)
        self._has_transformed_inputs = False
        if not self.training:
            self._set_transformed_inputs()

    @property
    def num_train(self) -> int:
        r"""Number of target training points (per batch)."""
        return self.target_Y.shape[-1]

    @property
    def learns_target_noise(self) -> bool:
        r"""Whether the target noise is learned (no ``train_Yvar``)."""
        return self._learns_noise

    def _raw_inputs(self, X: Tensor) -> Tensor:
        r"""Map transformed inputs back to raw inputs."""
        if hasattr(self, "input_transform"):
            return self.input_transform.untransform(X)
        return X

    def _check_X(self, X: Tensor, name: str = "X") -> None:
        d = self.target_X.shape[-1]
        if X.shape[-1] != d:
            raise ValueError(f"`{name}` must have d={d} columns, got {tuple(X.shape)}.")

    # ---------------------------------------------------------------- BoTorch
    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: PosteriorTransform | None = None,
        **kwargs: Any,
    ) -> GPyTorchPosterior:
        r"""Posterior of the target function at ``X`` (``batch_shape x q x d``), joint
        over the ``q`` points.

        Args:
            X: Raw inputs.
            output_indices: ``None`` or ``[0]`` (single output).
            observation_noise: ``True`` adds the target noise at ``X``; a tensor
                (``... x q x 1``, in transformed units) adds that noise.
            posterior_transform: Optional transform applied at the end.

        Returns:
            A ``GPyTorchPosterior`` in the user's output units.
        """
        if output_indices is not None and list(output_indices) != [0]:
            raise ValueError(
                f"{type(self).__name__} has one output; got output_indices={output_indices}."
            )
        self._check_X(X)
        self.eval()
        X_raw = X
        X = self.transform_inputs(X)
        with gpt_posterior_settings():
            mvn = self.forward(X) if self.train_inputs[0].shape[-2] == 0 else self(X)
            mean, covar = mvn.mean, mvn.covariance_matrix
            source_mean, source_covar = self._source_terms(X_raw)
            if source_mean is not None:
                mean = mean + source_mean
            if source_covar is not None:
                covar = covar + source_covar
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
    ) -> SourceConditionedGP:
        r"""A new model conditioned on extra target observations ``(X, Y)``.

        The model's derived training data (residuals, corrections, per-point noise)
        are rebuilt from all target data, so the result equals constructing the
        model on the concatenated data with the same hyperparameters. Frozen source
        parts are shared, not copied.

        Args:
            X: ``batch_shape x n' x d`` raw inputs.
            Y: ``batch_shape' x n' x 1`` observations in user units (batch shape
                broadcastable with ``X``'s and the model's).
            noise: Optional target noise variances of ``Y``, in transformed units
                (as BoTorch's ``fantasize`` passes them); only for a model with known
                target noise. If ``None`` there, the mean training noise is used.

        Returns:
            The conditioned model.
        """
        if Y.dim() < 2 or Y.shape[-1] != 1:
            raise ValueError(f"`Y` must have shape batch_shape x n' x 1, got {tuple(Y.shape)}.")
        self._check_X(X)
        if self.learns_target_noise and noise is not None:
            raise ValueError(
                f"`noise` can only be given to a {type(self).__name__} with known target "
                "noise (`train_Yvar`); this model learns its target noise."
            )
        self.eval()
        Y_new = ((Y - self.output_offset) / self.output_scale).squeeze(-1)
        if self.learns_target_noise:
            Yvar_new = torch.full_like(Y_new, float("nan"))
        else:
            Yvar_new = (noise.squeeze(-1) if noise is not None else self.target_noise().unsqueeze(-1)).expand_as(Y_new)
        batch = torch.broadcast_shapes(self.target_X.shape[:-2], X.shape[:-2], Y_new.shape[:-1])
        X_all = torch.cat([self.target_X.expand(*batch, *self.target_X.shape[-2:]), X.expand(*batch, *X.shape[-2:])], dim=-2)
        Y_all = torch.cat([self.target_Y.expand(*batch, -1), Y_new.expand(*batch, -1)], dim=-1)
        Yvar_all = torch.cat([self.target_Yvar.expand(*batch, -1), Yvar_new.expand(*batch, -1)], dim=-1)
        memo = {id(m): m for m in self._frozen_modules()}
        conditioned = copy.deepcopy(self, memo=memo)
        with torch.no_grad():
            conditioned._set_target_data(X_all.detach(), Y_all.detach(), Yvar_all.detach())
        return conditioned

    def fantasize(
        self,
        X: Tensor,
        sampler: MCSampler,
        observation_noise: Tensor | None = None,
        **kwargs: Any,
    ) -> SourceConditionedGP:
        r"""Fantasy model: sample ``y = f(X) + eps`` and condition on it.

        ``eps`` has the target noise (learned, or the mean known ``train_Yvar``).

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
        cls, training_data: SupervisedDataset, source: Any, **kwargs: Any
    ) -> dict[str, Any]:
        r"""Constructor arguments from a ``SupervisedDataset`` plus the source(s).

        Args:
            training_data: The target data.
            source: See the constructor.
            kwargs: Further constructor options, passed through.

        Returns:
            Keyword arguments for ``cls(**inputs)``.
        """
        inputs = super().construct_inputs(training_data=training_data)
        return {**inputs, "source": source, **kwargs}


def pool_source_tasks(
    sources: Sequence[TaskData], scale: Tensor, offset: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""Concatenate source tasks in model units.

    Args:
        sources: The source ``TaskData``.
        scale: Output scale of the shared outcome map.
        offset: Output offset of the shared outcome map.

    Returns:
        ``(X, Y, Yvar, task)``: ``N x d`` inputs, ``N`` outcomes and ``N`` noise
        variances in model units (``NaN`` where a task has no ``Yvar``), and the ``N``
        task index of each point.
    """
    X = torch.cat([s.X for s in sources])
    Y = torch.cat([((s.Y - offset) / scale).squeeze(-1) for s in sources])
    Yvar = torch.cat(
        [
            (s.Yvar / scale**2).squeeze(-1) if s.Yvar is not None else torch.full((s.n,), float("nan"), dtype=s.X.dtype, device=s.X.device)
            for s in sources
        ]
    )
    task = torch.cat([torch.full((s.n,), i, dtype=torch.long, device=s.X.device) for i, s in enumerate(sources)])
    return X, Y, Yvar, task


def learned_noise(
    batch_shape: torch.Size, prior: bool = True, initial_value: float | None = None
) -> HomoskedasticNoise:
    r"""A learned homoscedastic noise level with BoTorch's defaults.

    Args:
        batch_shape: Batch shape of the level.
        prior: Use BoTorch's ``LogNormal(-4, 1)`` noise prior (off for levels that
            may legitimately be large, such as an Env-GP stretch).
        initial_value: Initial level (default: the prior's mode, or 0.1).

    Returns:
        A ``HomoskedasticNoise`` constrained to ``>= 1e-4``.
    """
    from botorch.models.utils.gpytorch_modules import MIN_INFERRED_NOISE_LEVEL
    from gpytorch.constraints import GreaterThan
    from gpytorch.priors import LogNormalPrior

    noise_prior = LogNormalPrior(loc=-4.0, scale=1.0) if prior else None
    if initial_value is None:
        initial_value = noise_prior.mode if prior else 0.1
    return HomoskedasticNoise(
        noise_prior=noise_prior,
        noise_constraint=GreaterThan(MIN_INFERRED_NOISE_LEVEL, transform=None, initial_value=initial_value),
        batch_shape=batch_shape,
    )


class PooledTransferGP(SourceConditionedGP):
    r"""A source-conditioned GP over pooled ``[source; target]`` data: one prior mean,
    one kernel, and per-point :class:`GroupedNoise` (the Env-GP/Diff-GP family).

    Subclasses call ``_init_pooled`` in their constructor and, in
    ``_set_target_data``, ``_set_pooled_training_data`` with their source targets and
    noise.
    """

    def _init_pooled(
        self,
        source_X: Tensor,
        source_Y: Tensor,
        noise: GroupedNoise,
        mean_module: Mean | None,
        covar_module: Module | None,
        batch_shape: torch.Size,
    ) -> None:
        ExactGP.__init__(
            self, train_inputs=source_X, train_targets=source_Y,
            likelihood=GroupedNoiseGaussianLikelihood(noise),
        )
        self.register_buffer("source_X", source_X, persistent=False)
        self.register_buffer("source_Y", source_Y, persistent=False)
        self.mean_module = mean_module if mean_module is not None else ConstantMean(batch_shape=batch_shape)
        self.covar_module = (
            covar_module
            if covar_module is not None
            else default_transfer_kernel(source_X.shape[-1], batch_shape=batch_shape)
        )

    def _set_pooled_training_data(
        self, source_targets: Tensor, source_fixed_noise: Tensor, source_group: Tensor
    ) -> None:
        r"""Pool ``[source; target]`` inputs, targets and per-point noise.

        Args:
            source_targets: ``batch x N`` targets of the source points.
            source_fixed_noise: ``batch x N`` fixed noise of the source points.
            source_group: ``N`` noise groups of the source points (-1: fixed only).
        """
        X, Y, Yvar = self.target_X, self.target_Y, self.target_Yvar
        batch = torch.broadcast_shapes(X.shape[:-2], source_targets.shape[:-1], source_fixed_noise.shape[:-1])
        n_source, n_target = self.source_X.shape[0], Y.shape[-1]
        inputs = torch.cat(
            [self.source_X.expand(*batch, *self.source_X.shape), X.expand(*batch, *X.shape[-2:])], dim=-2
        )
        targets = torch.cat([source_targets.expand(*batch, n_source), Y.expand(*batch, n_target)], dim=-1)
        target_fixed = torch.zeros_like(Y) if self.learns_target_noise else Yvar
        noise = self.likelihood.noise_covar
        noise.fixed = torch.cat(
            [source_fixed_noise.expand(*batch, n_source), target_fixed.expand(*batch, n_target)], dim=-1
        )
        noise.group = torch.cat(
            [source_group, torch.full((n_target,), noise.target_group, dtype=torch.long, device=Y.device)]
        )
        self._set_raw_train_inputs(inputs, targets)

    def target_noise(self) -> Tensor:
        r"""The target noise ``sigma_a^2`` at new points (model units)."""
        return self.likelihood.noise_covar.target_noise()

    def forward(self, x: Tensor) -> MultivariateNormal:
        if self.training:
            x = self.transform_inputs(x)
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))
