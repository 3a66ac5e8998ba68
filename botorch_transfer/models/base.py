r"""The base class of every source-conditioned GP of the package.

A *source-conditioned GP* is an exact GP over a target task whose prior, data or
noise is built from one or several related source tasks (or from a prior learned
on them). :class:`SourceConditionedGP` does everything these models share, in one
template ``__init__`` with BoTorch's argument names and order:

1. validate the target data and the transfer input (sources or prior), with errors
   that name the argument;
2. fit one affine outcome map on source and target outcomes (a relation such as
   ``f = g + delta`` only survives a transform both sides share);
3. build the likelihood (BoTorch's defaults,
   :mod:`~botorch_transfer.models.likelihoods`);
4. let the subclass build its modules (:meth:`~SourceConditionedGP._build_modules`);
5. store the target data (raw inputs, outcomes in model units, known noise or
   ``NaN`` where learned) and derive the GP's training data from them
   (:meth:`~SourceConditionedGP._training_data`).

The GP's ``train_inputs``/``train_targets`` are therefore the *derived* data
(residuals, pooled source points, ...), not the user's. Users read the target data in
their own units from ``target_X``, ``target_Y`` and ``target_Yvar``, e.g. for
BoTorch's incumbents: ``best_f=model.target_Y.max()``,
``X_baseline=model.target_X``.

Construction, ``condition_on_observations`` and ``fantasize`` all go through step 5,
so derived quantities (residuals, bias corrections, per-point noise) are always
consistent with the target data. ``posterior`` evaluates the GP and lets the
subclass combine it with its source parts
(:meth:`~SourceConditionedGP._combine_posterior`), lazily where BoTorch is lazy.

Who overrides what:

- required: ``_build_modules`` (kernels, source posteriors, priors) and
  ``_training_data`` (the GP's inputs, targets and per-point noise);
- optional: ``_prepare_transfer`` (validate/normalize ``source``/``prior``),
  ``_outcome_reference`` (outcomes that join the shared outcome map),
  ``_default_likelihood``, ``_combine_posterior``, ``target_noise``,
  ``_frozen_modules``, ``forward`` (default: ``mean_module``, ``covar_module``).

:class:`~botorch_transfer.models.pooled.PooledTransferGP` adds what GPs over pooled
``[source; target]`` data share (Env-GP, Diff-GP): one mean and kernel, and
task-indexed noise whose task index travels with the inputs. The meta-prior models
(``PretrainedPriorGP``, ``ClusterMetaPriorGP``) are built on the base class the same
way, with their prior as the transfer input (``prior=``).

Around the base class: Ax's task column on query inputs and its ``MultiTaskDataset``
route in ``construct_inputs`` (:mod:`~botorch_transfer.models.task_column`), the
split of that dataset into target and sources
(:mod:`~botorch_transfer.models.utils.datasets`), and the log densities and transfer
fingerprints the guard scores with (:mod:`~botorch_transfer.models.utils.scoring`).
"""

from __future__ import annotations

import copy
import functools
import types
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import torch
from botorch import settings as botorch_settings
from botorch.acquisition.objective import PosteriorTransform
from botorch.fit import fit_gpytorch_mll
from botorch.models.gpytorch import GPyTorchModel
from botorch.models.model import FantasizeMixin
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from botorch.models.utils.assorted import fantasize as fantasize_flag
from botorch.models.utils.assorted import gpt_posterior_settings
from botorch.posteriors.gpytorch import GPyTorchPosterior
from botorch.sampling.base import MCSampler
from gpytorch.distributions import MultivariateNormal
from gpytorch.likelihoods import (
    FixedNoiseGaussianLikelihood,
    GaussianLikelihood,
    Likelihood,
)
from gpytorch.means import Mean
from gpytorch.mlls import MarginalLogLikelihood
from gpytorch.models import ExactGP
from linear_operator.operators import DiagLinearOperator
from torch import Tensor
from torch.nn import Module

from botorch_transfer._deprecation import moved_names
from botorch_transfer.data import TaskData
from botorch_transfer.models.likelihoods import (
    target_likelihood,
)
from botorch_transfer.models.task_column import (
    OLD_TASK_COLUMN_ARGUMENTS,
    TaskColumn,
    TaskColumnMixin,
    on_target_inputs,
    task_column_argument,
)
from botorch_transfer.models.utils.assorted import (
    MovableExactGPMixin,
    SingleOutputTargetMixin,
    check_single_output,
    fit_shared_outcome_affine,
)
from botorch_transfer.models.utils.datasets import (
    split_multitask_dataset as split_multitask_dataset,
)
from botorch_transfer.models.utils.scoring import (
    TargetLogDensityMixin,
    transfer_fingerprint,
)
from botorch_transfer.models.utils.scoring import same_fingerprint as same_fingerprint
from botorch_transfer.models.utils.sources import as_source_list
from botorch_transfer.validation import (
    check_invertible_input_transform,
    learns_from_data,
    validate_training_data,
    warn_if_off_prior_scale,
)

#: :func:`~botorch_transfer.models.task_column.on_target_inputs`, also importable
#: from here under this name
_on_target_inputs = on_target_inputs


class _FitHook:
    r"""A model's ``custom_fit``, which ``fit_gpytorch_mll`` calls instead of its
    own fit; hidden while the model runs BoTorch's default fit of itself
    (:meth:`SourceConditionedGP.custom_fit`), so that ``fit_gpytorch_mll`` then
    takes its default path (retries and warning handling included)."""

    def __init__(self, function: Any) -> None:
        self.function = function
        functools.update_wrapper(self, function)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self.function
        if instance.__dict__.get("_in_default_fit", False):
            raise AttributeError("custom_fit")
        return types.MethodType(self.function, instance)


class TrainingData(NamedTuple):
    r"""The GP's training data derived from the target data by a subclass.

    Attributes:
        inputs: Raw training inputs: a tensor ``batch x n x d``, or a tuple whose
            first entry is that tensor (e.g. ``(X, noise_index)`` for
            task-indexed noise).
        targets: ``batch x n`` training targets (model units).
        noise: ``batch x n`` per-point noise variances for a
            ``FixedNoiseGaussianLikelihood``, or ``None``.
    """

    inputs: Tensor | tuple[Tensor, ...]
    targets: Tensor
    noise: Tensor | None = None


# ------------------------------------------------------------------- base class
class SourceConditionedGP(
    SingleOutputTargetMixin,
    MovableExactGPMixin,
    TaskColumnMixin,
    TargetLogDensityMixin,
    ExactGP,
    GPyTorchModel,
    FantasizeMixin,
):
    r"""Base class of exact GPs conditioned on source tasks (see the module docs).

    A subclass writes its own math only: it stores its options, calls
    ``super().__init__`` and implements the hooks. Its target data are always
    available as ``_target_X`` (raw inputs), ``_target_Y`` and ``_target_Yvar``
    (``batch x n``, model units, ``NaN`` where the noise is learned).

    What a user sees: ``target_X``, ``target_Y`` and ``target_Yvar`` are the target
    data in the user's units (as given to the constructor and
    ``condition_on_observations``). ``train_inputs`` and ``train_targets`` are the
    GP's training data, derived from the target data by the subclass (residuals,
    pooled source points, model units), so BoTorch's usual
    ``best_f=model.train_targets.max()`` and ``X_baseline=model.train_inputs[0]`` are
    wrong here; use ``best_f=model.target_Y.max()`` and
    ``X_baseline=model.target_X``.

    Args:
        train_X: ``batch_shape x n x d`` target inputs (``n`` may be 0).
        train_Y: ``batch_shape x n x 1`` target observations.
        train_Yvar: Optional ``batch_shape x n x 1`` known target noise variances;
            if ``None`` the target noise is learned.
        transfer: What the model transfers from: the subclass's ``source`` or
            ``prior`` argument, validated by ``_prepare_transfer``.
        likelihood: A likelihood (default: ``_default_likelihood``).
        covar_module: The kernel of the trainable GP (the subclass says which).
        mean_module: The prior mean of the trainable GP.
        input_transform: Input transform, applied as ``SingleTaskGP`` applies it.
        outcome_transform: ``None`` or ``Standardize(m=1)``, fitted once on the
            target outcomes and ``_outcome_reference`` (e.g. the source outcomes)
            and applied to both.
        task_column: The layout of Ax's transfer-learning queries (a
            :class:`~botorch_transfer.models.task_column.TaskColumn`: the task
            column and the columns of parameters only the sources have, dropped
            from every query; ``train_X`` and the sources come without them). Set
            by ``construct_inputs`` from a ``MultiTaskDataset``. (``task_feature``,
            ``target_task_value`` and ``source_only_features``, its parts' old
            names, are deprecated.)

    Class attributes a subclass may set:
        transfer_argument: The keyword that carries the transfer input
            (``"source"`` or ``"prior"``), used by ``construct_inputs`` and Ax.
        fixes_outcome_units: ``True`` when the model must not get an outcome
            transform (a prior fixed in its pre-training units).
        needs_invertible_input_transform: ``True`` when source parts are evaluated
            at raw inputs recovered from transformed ones.
    """

    _num_outputs = 1
    transfer_argument: ClassVar[str] = "source"
    fixes_outcome_units: ClassVar[bool] = False
    needs_invertible_input_transform: ClassVar[bool] = False
    #: Old keyword names the constructor still takes (deprecated), with the
    #: arguments that replace them.
    renamed_arguments: ClassVar[dict[str, str]] = dict.fromkeys(
        OLD_TASK_COLUMN_ARGUMENTS, "task_column"
    )

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        train_Yvar: Tensor | None = None,
        likelihood: Likelihood | None = None,
        covar_module: Module | None = None,
        mean_module: Mean | None = None,
        outcome_transform: OutcomeTransform | None = None,
        input_transform: InputTransform | None = None,
        *,
        transfer: Any,
        task_column: TaskColumn | None = None,
        **deprecated: Any,
    ) -> None:
        task_column = task_column_argument(type(self).__name__, task_column, deprecated)
        validate_training_data(train_X, train_Y, train_Yvar)
        # copies: the caller's tensors changed in place later must not change (and
        # bypass the checks on) the model's data
        train_X, train_Y = train_X.clone(), train_Y.clone()
        train_Yvar = None if train_Yvar is None else train_Yvar.clone()
        input_transform = self._set_task_column(
            train_X.shape[-1], task_column, input_transform
        )
        # what the model transfers from, to tell models on other sources apart
        self._transfer_fingerprint = transfer_fingerprint(transfer)
        transfer = self._prepare_transfer(transfer, train_X)
        if input_transform is not None and self.needs_invertible_input_transform:
            check_invertible_input_transform(
                input_transform,
                train_X,
                f"{type(self).__name__} evaluates its source parts at raw inputs",
            )
        # one affine outcome map shared by source and target (y_model = (y - o) / s)
        scale, offset = fit_shared_outcome_affine(
            outcome_transform, self._outcome_reference(transfer), train_Y
        )
        if likelihood is None:
            likelihood = self._default_likelihood(train_X, train_Yvar, transfer)
        placeholder = torch.zeros(
            train_X.shape[:-1], dtype=train_X.dtype, device=train_X.device
        )
        ExactGP.__init__(
            self, train_inputs=train_X, train_targets=placeholder, likelihood=likelihood
        )
        self._learns_noise = train_Yvar is None
        self.register_buffer("output_scale", scale)
        self.register_buffer("output_offset", offset)
        self._build_modules(
            transfer,
            train_X=train_X,
            covar_module=covar_module,
            mean_module=mean_module,
            input_transform=input_transform,
        )
        if outcome_transform is not None:
            self.outcome_transform = outcome_transform
        if input_transform is not None:
            self.input_transform = input_transform
        Y = self._to_model_units(train_Y).squeeze(-1)
        if train_Yvar is None:
            Yvar = torch.full_like(Y, float("nan"))
        else:
            Yvar = (train_Yvar / scale**2).squeeze(-1)
        # data, not state: moved by .to(), left out of state_dict (so hyperparameters
        # load into a model built on other data, as with SingleTaskGP)
        self.register_buffer("_target_X", train_X, persistent=False)
        self.register_buffer("_target_Y", Y, persistent=False)
        self.register_buffer("_target_Yvar", Yvar, persistent=False)
        self.to(train_X)
        self._set_target_data(self._target_X, self._target_Y, self._target_Yvar)
        if input_transform is not None and self.train_inputs[0].shape[-2] > 0:
            # as SingleTaskGP: a data-dependent transform (Normalize without bounds)
            # learns from the GP's training inputs now, not at the first training
            # call, so unfitted and state_dict-loaded models use the fitted transform
            with torch.no_grad():
                self.transform_inputs(self.train_inputs[0])
        elif input_transform is not None and learns_from_data(input_transform):
            raise ValueError(
                f"`input_transform` ({type(input_transform).__name__}) learns its "
                f"bounds from the training inputs, and {type(self).__name__} has none "
                "here (0 target points): pass the bounds, e.g. "
                "`Normalize(d, bounds=bounds)`."
            )

    # ------------------------------------------------------------------ hooks
    def _prepare_transfer(self, transfer: Any, train_X: Tensor) -> Any:
        r"""Validate and normalize the transfer input (default: a list of sources).

        Args:
            transfer: The ``source``/``prior`` argument.
            train_X: The target inputs.

        Returns:
            What ``_outcome_reference``, ``_default_likelihood`` and
            ``_build_modules`` receive.
        """
        return as_source_list(transfer, train_X)

    def _outcome_reference(self, transfer: Any) -> list[TaskData]:
        r"""Outcomes fitted together with the target's by the outcome transform
        (default: the ``TaskData`` among the sources)."""
        return [s for s in transfer if isinstance(s, TaskData)]

    def _default_likelihood(
        self, train_X: Tensor, train_Yvar: Tensor | None, transfer: Any
    ) -> Likelihood:
        r"""The likelihood when none is given (default: target noise, learned with
        BoTorch's prior or known per point)."""
        return target_likelihood(
            train_X, known_noise=train_Yvar is not None, per_point_noise=False
        )

    def _build_modules(
        self,
        transfer: Any,
        train_X: Tensor,
        covar_module: Module | None,
        mean_module: Mean | None,
        input_transform: InputTransform | None,
    ) -> None:
        r"""Build the model's modules (kernels, source posteriors, priors).

        Called once by ``__init__``, after the outcome map (``output_scale``,
        ``output_offset``) and the likelihood exist and before the target data are
        set. Modules built here are moved to ``train_X``'s dtype and device.
        """
        raise NotImplementedError

    def _training_data(self, X: Tensor, Y: Tensor, Yvar: Tensor) -> TrainingData:
        r"""The GP's training data derived from the target data.

        Args:
            X: ``batch x n x d`` raw target inputs.
            Y: ``batch x n`` target outcomes (model units).
            Yvar: ``batch x n`` known target noise (model units), ``NaN`` where the
                target noise is learned.

        Returns:
            The GP's raw inputs, targets and per-point noise; keep ``X``'s batch shape.
        """
        raise NotImplementedError

    def _combine_posterior(
        self, gp_posterior: MultivariateNormal, X: Tensor
    ) -> MultivariateNormal:
        r"""Combine the GP's posterior with the model's source parts at raw ``X``.

        The default returns the GP's posterior: the model is the GP. Add a frozen
        source posterior (DeltaBO), a prior mean (cm-BO) or weight several parts
        (ensembles). Keep covariances lazy (``LinearOperator``) where possible.

        Args:
            gp_posterior: The trainable GP's posterior at ``X`` (model units).
            X: ``batch x q x d`` raw inputs.

        Returns:
            The model's latent posterior at ``X`` (model units).
        """
        return gp_posterior

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
        return self._target_Yvar.mean(dim=-1)

    def _frozen_modules(self) -> list[Module]:
        r"""Submodules shared, not copied, by conditioned models."""
        return []

    def _test_inputs(self, X: Tensor) -> tuple[Tensor, ...]:
        r"""The GP's inputs at new target points ``X`` (transformed)."""
        return (X,)

    def forward(self, x: Tensor) -> MultivariateNormal:
        r"""The GP prior ``N(mean_module(x), covar_module(x))`` (override for
        others)."""
        if self.training:
            x = self.transform_inputs(x)
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))

    # ---------------------------------------------------------------- helpers
    def _warn_if_off_prior_scale(self, prior: str, advice: str) -> None:
        r"""Warn when the target outcomes look like other units than the model's
        prior (see :func:`~botorch_transfer.validation.warn_if_off_prior_scale`):
        for the meta priors, which are not fitted to the target."""
        if self.num_train == 0:
            return
        with torch.no_grad():
            was_training = self.training
            self.train()  # the prior at the training inputs, transformed as in a fit
            marginal = self.likelihood(
                self.forward(self.train_inputs[0]), *self.train_inputs
            )
            self.train(was_training)
            # the GP's targets may have a part of the prior mean taken out
            mean = marginal.mean + (self._target_Y - self.train_targets)
        warn_if_off_prior_scale(
            self._target_Y,
            mean,
            marginal.lazy_covariance_matrix,
            prior,
            advice,
            stacklevel=4,
        )

    def _to_model_units(self, Y: Tensor) -> Tensor:
        return (Y - self.output_offset) / self.output_scale

    def _set_target_data(self, X: Tensor, Y: Tensor, Yvar: Tensor) -> None:
        r"""Store the target data and (re)build the GP's training data from them."""
        self._target_X, self._target_Y, self._target_Yvar = X, Y, Yvar
        data = self._training_data(X, Y, Yvar)
        if data.noise is not None:
            if not isinstance(self.likelihood, FixedNoiseGaussianLikelihood):
                raise TypeError(
                    f"{type(self).__name__} sets per-point noise and needs a "
                    "FixedNoiseGaussianLikelihood `likelihood`, got "
                    f"{type(self.likelihood).__name__}."
                )
            self.likelihood.noise_covar.noise = data.noise
        self.set_train_data(inputs=data.inputs, targets=data.targets, strict=False)
        self._has_transformed_inputs = False
        if not self.training:
            self._set_transformed_inputs()

    def load_state_dict(
        self,
        state_dict: Mapping[str, Any],
        strict: bool = True,
        keep_transforms: bool = True,
        assign: bool = False,
    ) -> Any:
        r"""Load a state, e.g. one fitted on other data (Ax's cross-validation loads
        the full-data model's state into each fold's model).

        As BoTorch's GPs do, the state's outcome map (``output_scale``,
        ``output_offset``, the outcome transform) is loaded with everything else,
        and this model's data are expressed in it: the target observations (and,
        in pooled models, the source observations, see :meth:`_remap_outcomes`)
        are kept in the user's units and mapped again, and the GP's training data
        are derived again. The target data in the user's units do not change.

        Args:
            state_dict: The state to load.
            strict: Whether the keys must match exactly.
            keep_transforms: Accepted for BoTorch's signature; the data are always
                expressed in the loaded map (BoTorch's ``keep_transforms=True``).
            assign: As in ``torch.nn.Module.load_state_dict``.

        Returns:
            torch's named tuple of missing and unexpected keys.
        """
        old_scale, old_offset = self.output_scale.clone(), self.output_offset.clone()
        result = Module.load_state_dict(self, state_dict, strict=strict, assign=assign)
        self._remap_outcomes(old_scale, old_offset)
        self.prediction_strategy = None
        Y, Yvar = self._remapped(
            self._target_Y, self._target_Yvar, old_scale, old_offset
        )
        self._set_target_data(self._target_X, Y, Yvar)
        return result

    def _remapped(
        self, Y: Tensor, Yvar: Tensor, old_scale: Tensor, old_offset: Tensor
    ) -> tuple[Tensor, Tensor]:
        r"""Outcomes and their noise variances in model units of the map
        ``(old_scale, old_offset)``, in model units of the current map."""
        Y = (old_scale * Y + old_offset - self.output_offset) / self.output_scale
        return Y, Yvar * (old_scale / self.output_scale) ** 2

    def _remap_outcomes(self, old_scale: Tensor, old_offset: Tensor) -> None:
        r"""Hook: express stored outcomes other than the target's (in model units of
        the old map) in the current map, after ``load_state_dict`` loaded another
        map. Nothing by default (a source posterior's copy of the map is part of
        the state)."""

    def set_train_data(
        self,
        inputs: Tensor | Sequence[Tensor] | None = None,
        targets: Tensor | None = None,
        strict: bool = True,
    ) -> None:
        r"""GPyTorch's ``set_train_data``; a lone tensor replaces the features
        ``train_inputs[0]`` and keeps the other inputs (e.g. task indices), as
        BoTorch's input-transform handling expects."""
        if (
            isinstance(inputs, Tensor)
            and self.train_inputs
            and len(self.train_inputs) > 1
        ):
            inputs = (inputs, *self.train_inputs[1:])
        super().set_train_data(inputs=inputs, targets=targets, strict=strict)

    def transform_inputs(
        self, X: Tensor, input_transform: Module | None = None
    ) -> Tensor:
        r"""BoTorch's ``transform_inputs``; integer inputs (noise indices) pass
        through unchanged, since BoTorch transforms every training input."""
        if not X.is_floating_point():
            return X
        return super().transform_inputs(X, input_transform=input_transform)

    def _hyperparameters(self) -> Tensor:
        r"""A flat copy of the model's parameters (to notice a fit)."""
        return torch.cat([p.detach().flatten() for p in self.parameters()])

    def _hyperparameters_changed(self, since: Tensor | None) -> bool:
        r"""Whether the parameters differ from the snapshot ``since`` (also after
        ``.to()`` moved them, or when there is no snapshot)."""
        current = self._hyperparameters()
        if since is None or since.shape != current.shape:
            return True
        if since.dtype != current.dtype or since.device != current.device:
            return True
        return not torch.equal(since, current)

    @property
    def num_train(self) -> int:
        r"""Number of target training points (per batch)."""
        return self._target_Y.shape[-1]

    @property
    def learns_target_noise(self) -> bool:
        r"""Whether the target noise is learned (no ``train_Yvar``)."""
        return self._learns_noise

    @property
    def target_X(self) -> Tensor:
        r"""``batch_shape x n x d`` target inputs, raw (before any input transform).

        The baseline of BoTorch's noisy acquisition functions:
        ``qLogNoisyExpectedImprovement(model, X_baseline=model.target_X)``
        (``train_inputs`` hold the GP's derived inputs, e.g. pooled source points).
        """
        return self._target_X

    @property
    def target_Y(self) -> Tensor:
        r"""``batch_shape x n x 1`` target observations in the user's units (the
        outcome transform undone).

        The incumbent of BoTorch's improvement-based acquisition functions:
        ``LogExpectedImprovement(model, best_f=model.target_Y.max())``
        (``train_targets`` hold the GP's derived targets, e.g. residuals, in model
        units).
        """
        return (self.output_scale * self._target_Y + self.output_offset).unsqueeze(-1)

    @property
    def target_Yvar(self) -> Tensor | None:
        r"""``batch_shape x n x 1`` known target noise variances in the user's units,
        or ``None`` when the target noise is learned (no ``train_Yvar``)."""
        if self.learns_target_noise:
            return None
        return (self.output_scale**2 * self._target_Yvar).unsqueeze(-1)

    def _raw_inputs(self, X: Tensor) -> Tensor:
        r"""Map transformed inputs back to raw inputs."""
        if hasattr(self, "input_transform"):
            return self.input_transform.untransform(X)
        return X

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
        check_single_output(self, output_indices)
        X = self.strip_task_feature(X)
        self._check_X(X)
        self.eval()
        X_transformed = self.transform_inputs(X)
        with gpt_posterior_settings():
            inputs = self._test_inputs(X_transformed)
            no_data = self.train_inputs[0].shape[-2] == 0
            mvn = self.forward(*inputs) if no_data else self(*inputs)
            mvn = self._combine_posterior(mvn, X)
            mean, covar = mvn.mean, mvn.lazy_covariance_matrix
            if observation_noise is True:
                noise = self.target_noise().unsqueeze(-1)
            elif isinstance(observation_noise, Tensor):
                noise = observation_noise.squeeze(-1)
            else:
                noise = None
            if noise is not None:
                noise = noise.expand(*covar.shape[:-2], covar.shape[-1])
                covar = covar + DiagLinearOperator(noise)
            batch = torch.broadcast_shapes(mean.shape[:-1], covar.shape[:-2])
            if mean.shape[:-1] != batch:
                mean = mean.expand(*batch, mean.shape[-1])
            if covar.shape[:-2] != batch:
                covar = covar.expand(*batch, *covar.shape[-2:])
            mvn = MultivariateNormal(mean, covar)
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
                (as BoTorch's ``fantasize`` passes them); only for a model with
                known target noise. If ``None`` there, the mean training noise is
                used.

        Returns:
            The conditioned model.
        """
        if Y.dim() < 2 or Y.shape[-1] != 1:
            raise ValueError(
                f"`Y` must have shape batch_shape x n' x 1, got {tuple(Y.shape)}."
            )
        X = self.strip_task_feature(X)
        self._check_X(X)
        if not torch.isfinite(Y).all():
            raise ValueError("`Y` contains NaN or infinite values.")
        if self.learns_target_noise and noise is not None:
            raise ValueError(
                f"`noise` can only be given to a {type(self).__name__} with known "
                "target noise (`train_Yvar`); this model learns its target noise."
            )
        self.eval()
        Y_new = self._to_model_units(Y).squeeze(-1)
        if self.learns_target_noise:
            Yvar_new = torch.full_like(Y_new, float("nan"))
        elif noise is not None:
            Yvar_new = noise.squeeze(-1).expand_as(Y_new)
        else:
            Yvar_new = self.target_noise().unsqueeze(-1).expand_as(Y_new)
        batch = torch.broadcast_shapes(
            self._target_X.shape[:-2], X.shape[:-2], Y_new.shape[:-1]
        )

        def extend(old: Tensor, new: Tensor, event_dims: int) -> Tensor:
            old = old.expand(*batch, *old.shape[old.dim() - event_dims :])
            new = new.expand(*batch, *new.shape[new.dim() - event_dims :])
            return torch.cat([old, new], dim=-event_dims).detach()

        memo = {id(m): m for m in self._frozen_modules()}
        conditioned = copy.deepcopy(self, memo=memo)
        with torch.no_grad():
            conditioned._set_target_data(
                extend(self._target_X, X, 2),
                extend(self._target_Y, Y_new, 1),
                extend(self._target_Yvar, Yvar_new, 1),
            )
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
            observation_noise: Optional ``... x n' x 1`` noise (transformed units)
                for a model with known target noise.
            kwargs: Passed to ``condition_on_observations``.

        Returns:
            The fantasy model, batch shape ``sample_shape x batch_shape``.
        """
        propagate_grads = kwargs.pop("propagate_grads", False)
        with fantasize_flag(), botorch_settings.propagate_grads(propagate_grads):
            post_X = self.posterior(
                X,
                observation_noise=True
                if observation_noise is None
                else observation_noise,
            )
            Y_fantasized = sampler(post_X)
            noise = None
            if observation_noise is not None:
                noise = observation_noise.expand(Y_fantasized.shape[1:])
            return self.condition_on_observations(
                X=X, Y=Y_fantasized, noise=noise, **kwargs
            )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # a subclass's own custom_fit, hidden like this class's during the default fit
        function = cls.__dict__.get("custom_fit")
        if function is not None and not isinstance(function, _FitHook):
            cls.custom_fit = _FitHook(function)

    @_FitHook
    def custom_fit(
        self, mll: MarginalLogLikelihood, **kwargs: Any
    ) -> MarginalLogLikelihood:
        r"""Called by ``fit_gpytorch_mll``: BoTorch's default fit, and a no-op when
        the GP has no training points (the model is then its prior, and a marginal
        likelihood of no data has nothing to fit) or nothing trainable (e.g. a
        frozen meta-learned prior with known target noise)."""
        no_data = self.train_inputs[0].shape[-2] == 0
        if no_data or not any(p.requires_grad for p in mll.parameters()):
            return mll.eval()
        self.__dict__["_in_default_fit"] = True  # fit_gpytorch_mll's own path
        try:
            return fit_gpytorch_mll(mll, **kwargs)
        finally:
            del self.__dict__["_in_default_fit"]


__getattr__ = moved_names(
    __name__,
    {
        name: "botorch_transfer.models.utils.assorted"
        for name in (
            "default_transfer_kernel",
            "refuse_pathwise_sampling",
            "single_output_subset_error",
        )
    },
)
