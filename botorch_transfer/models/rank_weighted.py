r"""A transfer model and a target-only GP, weighted by how well each ranks the target.

:class:`RankWeightedTransferGP` is built like a ``SingleTaskGP`` plus ``source=`` and
fitted with ``fit_gpytorch_mll``. Inside are two GPs on the same target data:

- the transfer model: ``f = a g + c + delta`` (a :class:`DeltaBOModel` with the exact
  Gaussian conditional and a fitted source scale ``a`` and offset ``c``), where ``g``
  is a GP fitted once on the source and frozen, and ``delta`` shares ``g``'s kernel
  (its shape: lengthscales fitted on the source) with its own fitted amplitude, and
  a lengthscale of its own, fitted on the target, along each input the source never
  varied (a parameter it ran at one value:
  :func:`~botorch_transfer.models.utils.difference_kernel.difference_kernel`). With
  ``a`` and the amplitude fitted on the target this is an intrinsic coregionalization
  model (``MultiTaskGP``'s) whose kernel was learned from the many source points, at
  the cost of a target-only GP;
- a target-only ``SingleTaskGP`` with BoTorch's defaults.

The posterior combines the two as RGPE combines its models (Feurer, Letham and
Bakshy 2018), as if ``f = w f_transfer + (1 - w) f_target`` with the two independent:
mean ``w mu_transfer + (1 - w) mu_target``, covariance ``w^2 Sigma_transfer + (1 -
w)^2 Sigma_target``. The weight ``w`` is RGPE's ranking evidence between the two:
each model's leave-one-out posteriors at the target points are drawn
``num_samples`` times, each draw's ranking loss (misordered pairs of target
observations) is counted, and ``w`` is the fraction of draws in which the transfer
model ranks better (ties split at random); the transfer model gets weight 0 when its
median loss is above the target-only GP's 95th percentile (RGPE's weight-dilution
rule). The weight is recomputed from all target data at every fit: nothing a few
noisy points decide is final, and nothing carries over from one iteration to the
next.

A source whose GP cannot predict its own observations at left-out inputs (its
leave-input-out ``R^2``,
:func:`~botorch_transfer.models.utils.source_skill.source_skill`, below
``min_source_skill``) carries no structure to transfer: the transfer model
then gets weight 0 at every fit, and the model warns once
(``UninformativeSourceWarning``). The ranking cannot see this from a few target
points: a transfer model with its own fitted difference ranks them about as well
as the target-only GP, while away from them it follows a source that says
nothing.

With several sources (``source=[a, b, ...]``) each has its own transfer model and the
weights are RGPE's over all of them and the target-only GP (:attr:`source_weights`,
by name); a source without structure is named in a warning, gets weight 0 and is not
fitted. The transfer models of several sources are fitted and evaluated together,
as one batched GP (:mod:`~botorch_transfer.models.utils.stacking`): each source's
hyperparameters are those its own fit gives, at about the cost of one source.
Before the first target point the informative sources' GPs, each standardized by
its own outcomes, are averaged: the first queries come from the sources.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

import torch
from botorch.exceptions.errors import UnsupportedError
from botorch.models import SingleTaskGP
from botorch.models.model import Model
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform, Standardize
from botorch.posteriors.gpytorch import GPyTorchPosterior
from botorch.utils.datasets import MultiTaskDataset, SupervisedDataset
from botorch.utils.types import DEFAULT
from gpytorch.distributions import MultivariateNormal
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor
from torch.nn import ModuleList

from botorch_transfer._deprecation import options_argument, user_stacklevel
from botorch_transfer.data import TaskData
from botorch_transfer.models.delta import DeltaBOModel, stacked_delta_models
from botorch_transfer.models.rank_combination import (
    RankingOptions,
    RankWeightedCombination,
)
from botorch_transfer.models.source_gp import FittedSourceGP, fit_source_gp
from botorch_transfer.models.source_options import (
    AffineMap,
    MarginalAffineMap,
    SourceOptions,
    resolved_source_map,
)
from botorch_transfer.models.source_posterior import outcome_affine
from botorch_transfer.models.task_column import (
    OLD_TASK_COLUMN_ARGUMENTS,
    TaskColumn,
    construct_transfer_inputs,
    task_column_argument,
)
from botorch_transfer.models.utils.difference_kernel import difference_kernel
from botorch_transfer.models.utils.source_skill import (
    MIN_DISTINCT_INPUTS,
    UninformativeSourceWarning,
    source_skill,
)
from botorch_transfer.models.utils.sources import OTHER_PARAMETERS_HINT
from botorch_transfer.models.utils.stacking import (
    fit_batch_entries,
    unstack_parameters,
)
from botorch_transfer.progress import progress_bars


def fitted_source_gp(
    source: TaskData, input_transform: InputTransform | None = None
) -> FittedSourceGP:
    r"""Deprecated: :func:`~botorch_transfer.models.source_gp.fit_source_gp` (which
    fits anew at every call: hold its result across iterations)."""
    warnings.warn(
        "`fitted_source_gp` is deprecated and no longer keeps fitted GPs by value: "
        "call `botorch_transfer.models.source_gp.fit_source_gp` once and pass its "
        "result as `source=` every iteration.",
        DeprecationWarning,
        stacklevel=user_stacklevel(),
    )
    return fit_source_gp(source, input_transform)


class _StackedParts(NamedTuple):
    r"""The transfer models held as one batched GP: the models, their parameters
    and those parameters' values when it was built or fitted, and the GP."""

    models: tuple[DeltaBOModel, ...]
    parameters: tuple[Tensor, ...]
    values: Tensor
    stacked: DeltaBOModel | None


def _checked_min_skill(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`min_source_skill` must be a float or None, got {value!r}.")
    if math.isnan(value) or value > 1.0:
        raise ValueError(
            f"`min_source_skill` must be at most 1 (an R^2), got {value!r}."
        )
    return float(value)


class RankWeightedTransferGP(RankWeightedCombination):
    r"""A source-kernel transfer GP and a target-only GP, weighted by ranking evidence.

    See the module docstring for the model. Build it every BO iteration as you build a
    ``SingleTaskGP`` and fit it with ``fit_gpytorch_mll``: the fit fits both GPs and
    recomputes the weight. Fit each source's GP once with
    :func:`~botorch_transfer.models.source_gp.fit_source_gp` and pass it: a
    ``TaskData`` is fitted anew by every model built on it.

    Args:
        train_X: ``n x d`` target inputs. With ``n = 0`` (no target point yet) the
            posterior is the average of the informative sources' GPs, each in its
            own standardized units, to choose the first queries with an acquisition
            function that needs no incumbent or noise (``UpperConfidenceBound``,
            ``qUpperConfidenceBound``, ``PosteriorMean``); nothing is fitted.
        train_Y: ``n x 1`` target observations.
        train_Yvar: Optional ``n x 1`` known target noise variances; else learned.
        outcome_transform: The outcome transform of both GPs (default
            ``Standardize(m=1)``, which BoTorch's default priors assume; for the
            transfer model it is fitted on the source and target outcomes together).
            ``None`` keeps the outcomes as they are.
        input_transform: Input transform of both GPs and of the source GP (e.g.
            ``Normalize(d, bounds=bounds)``: the kernels' default priors assume the
            unit cube).
        source: The source task (keyword): a fitted single-output
            ``SingleTaskGP`` (its kernel's shape is shared with the difference;
            from :func:`~botorch_transfer.models.source_gp.fit_source_gp`, which
            keeps its posterior factor and skill across iterations) or a
            ``TaskData`` (a ``SingleTaskGP`` with BoTorch's defaults is fitted on it
            by this model, with its input transform); or a sequence of them, one
            per source task (each at its own inputs, sizes and units), each with
            its own transfer model.
        source_map: How the source enters the transfer model (see
            :class:`DeltaBOModel`): ``"affine"`` (default: ``a`` and ``c`` fitted;
            or an :class:`~botorch_transfer.models.source_options.AffineMap`) or
            ``"marginal-affine"`` (integrated out; or a
            :class:`~botorch_transfer.models.source_options.MarginalAffineMap`).
        source_tolerance: Relative residual prior variance at which the cached
            factor of the source posterior stops growing (the ``tolerance`` of
            ``DeltaBOModel``'s ``source_options``; default ``1e-6``): the
            covariance it leaves out is a millionth of the source GP's prior
            variance, far below its noise, and a smaller factor makes each
            acquisition evaluation cheaper on large sources. ``1e-10`` gives the
            factor of the exact posterior's numerical rank.
        min_source_skill: The source GP's leave-input-out ``R^2`` on its own data
            below which the source is taken to carry no structure and the transfer
            model gets weight 0 (default ``0.1``); ``None`` never does this. The
            skill is not measured with fewer than 10 distinct source inputs.
        ranking: How the ranking weights are drawn (a
            :class:`~botorch_transfer.models.rank_combination.RankingOptions`:
            the number of leave-one-out draws, and whether pairs of target
            observations within the noise count; default ``RankingOptions()``,
            RGPE's). (``num_samples`` and ``pair_margin``, its fields as keywords,
            are deprecated.)
        seed: Seed of the draws (the weight is a deterministic function of the data
            and the hyperparameters).
        task_column: The layout of Ax's transfer-learning queries (a
            :class:`~botorch_transfer.models.task_column.TaskColumn`): its extra
            columns are dropped from every ``X`` given to :meth:`posterior` and
            :meth:`condition_on_observations`, and an input transform built over
            that layout (Ax's ``Normalize``) is restricted to the ``d`` inputs.
            ``train_X`` has the ``d`` inputs only (see :meth:`construct_inputs`).
            (``task_feature``, ``target_task_value`` and ``source_only_features``,
            its parts' old names, are deprecated.)

    Attributes:
        source_names: The sources' names, in order (``TaskData.name``, else
            ``"source i"``).
        source_skills: Per source name, its GP's leave-input-out ``R^2`` on its
            own data (:func:`~botorch_transfer.models.utils.source_skill.source_skill`;
            NaN with fewer than 10 distinct source inputs).
        transfer_models: One transfer model per source, in order.

    Example:
        >>> transform = Normalize(d, bounds=bounds)
        >>> source_gp = fit_source_gp(TaskData(X_src, Y_src), transform)  # once
        >>> model = RankWeightedTransferGP(  # every iteration
        ...     train_X, train_Y, source=source_gp, input_transform=transform
        ... )
        >>> mll = ExactMarginalLogLikelihood(model.likelihood, model)
        >>> mll = fit_gpytorch_mll(mll)
        >>> w = model.transfer_weight  # how much the transfer model acts, in [0, 1]
        >>> acqf = LogExpectedImprovement(model, best_f=train_Y.max())

        Several past experiments, each with its own weight:

        >>> last_month = TaskData(X1, Y1, name="last month")
        >>> the_month_before = TaskData(X2, Y2, name="the month before")
        >>> sources = [
        ...     fit_source_gp(s, transform) for s in (last_month, the_month_before)
        ... ]
        >>> model = RankWeightedTransferGP(
        ...     train_X, train_Y, source=sources, input_transform=transform
        ... )
        >>> mll = fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        >>> weights = model.source_weights  # {"last month": ..., ...}
    """

    #: The transfer input's argument (what Ax's ``model_options`` must give when
    #: the training data hold no source task).
    transfer_argument: ClassVar[str] = "source"
    knowledge_model_name: ClassVar[str] = "transfer_models"
    #: Old keyword names the constructor still takes (deprecated), with the
    #: arguments that replace them.
    renamed_arguments: ClassVar[dict[str, str]] = {
        **dict.fromkeys(OLD_TASK_COLUMN_ARGUMENTS, "task_column"),
        **{
            name: f"ranking=RankingOptions({name}=...)"
            for name in ("num_samples", "pair_margin")
        },
    }

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        train_Yvar: Tensor | None = None,
        outcome_transform: OutcomeTransform | None | Any = DEFAULT,
        input_transform: InputTransform | None = None,
        *,
        source: TaskData | SingleTaskGP | Sequence[TaskData | SingleTaskGP],
        source_map: str | AffineMap | MarginalAffineMap = "affine",
        source_tolerance: float = 1e-6,
        min_source_skill: float | None = 0.1,
        ranking: RankingOptions | None = None,
        seed: int = 0,
        task_column: TaskColumn | None = None,
        **deprecated: Any,
    ) -> None:
        ranking = self._ranking_argument(ranking, deprecated)
        task_column = task_column_argument(type(self).__name__, task_column, deprecated)
        super().__init__(
            num_samples=ranking.num_samples,
            seed=seed,
            pair_margin=ranking.pair_margin,
        )
        source_map = resolved_source_map(source_map, ("affine", "marginal-affine"))
        self._check_train_X(train_X, None)
        if outcome_transform is DEFAULT:
            outcome_transform = Standardize(m=1)
        if outcome_transform is not None and not isinstance(
            outcome_transform, Standardize
        ):
            raise TypeError(
                "`outcome_transform` must be None or Standardize(m=1), got "
                f"{type(outcome_transform).__name__}."
            )
        if task_column is not None:
            # a transform over Ax's query layout acts on the d inputs here, in all
            # three GPs (as in the transfer model, which also checks the layout)
            input_transform = task_column.on_target_inputs(
                input_transform, train_X.shape[-1]
            )
        sources = self._source_list(source)
        self.source_names = self._names_of(sources)
        source_gps = [self._source_gp(s, train_X, input_transform) for s in sources]
        self.source_skills = {
            name: gp.skill if isinstance(gp, FittedSourceGP) else source_skill(gp)
            for name, gp in zip(self.source_names, source_gps, strict=True)
        }
        self.min_source_skill = _checked_min_skill(min_source_skill)
        self._warn_about_sources()
        if (
            torch.is_tensor(train_X)
            and train_X.shape[-2] == 0
            and all(self._excluded())
        ):
            raise ValueError(
                "`train_X` has no points and no source carries structure to transfer "
                f"(uninformative: {list(self.uninformative_sources)}): there is "
                "nothing to choose a first query from; evaluate an initial design "
                "(e.g. Sobol points) first."
            )
        # with no target point the source GPs choose the first query (the target's
        # units are unknown), and the target-only GP has weight 0
        empty = torch.is_tensor(train_X) and train_X.shape[-2] == 0
        self._source_gps = tuple(source_gps)  # shared, frozen: not submodules
        # each difference shares its source kernel's shape, with its own amplitude
        # (the source GPs are fitted: no bars while the parts are built)
        with progress_bars(False):
            self.transfer_models = ModuleList(
                DeltaBOModel(
                    train_X,
                    train_Y,
                    train_Yvar,
                    outcome_transform=None
                    if empty
                    else copy.deepcopy(outcome_transform),
                    input_transform=copy.deepcopy(input_transform),
                    source=source_gp,
                    covar_module=difference_kernel(source_gp, train_X.shape[-1]),
                    source_map=source_map,
                    source_options=SourceOptions(tolerance=source_tolerance),
                    task_column=task_column,
                )
                for source_gp in source_gps
            )
        self.target_model = SingleTaskGP(
            train_X,
            train_Y,
            train_Yvar,
            outcome_transform=None if empty else copy.deepcopy(outcome_transform),
            input_transform=copy.deepcopy(input_transform),
        )
        # the transfer models as one batched GP (see _stacked_transfer_model)
        self._stacked: _StackedParts | None = None

    @staticmethod
    def _ranking_argument(
        ranking: RankingOptions | None, given: dict[str, Any]
    ) -> RankingOptions:
        r"""``ranking``, or the options its deprecated keywords in ``given`` fill."""
        return options_argument(
            "RankWeightedTransferGP", "ranking", ranking, RankingOptions, given
        )

    @staticmethod
    def _source_list(source: Any) -> list[Any]:
        if isinstance(source, (TaskData, SingleTaskGP)):
            return [source]
        if isinstance(source, Sequence) and not isinstance(source, str):
            if len(source) == 0:
                raise ValueError(
                    "`source` is an empty sequence: give at least one TaskData or "
                    "fitted SingleTaskGP (a target-only model is a SingleTaskGP)."
                )
            return list(source)
        raise TypeError(
            "`source` must be a TaskData, a fitted SingleTaskGP or a sequence of "
            f"them, got {type(source).__name__}."
        )

    @staticmethod
    def _names_of(sources: list[Any]) -> tuple[str, ...]:
        # a TaskData's name, or that of the GP fitted on it (fit_source_gp)
        named = [getattr(s, "name", None) for s in sources]
        names = tuple(
            name if isinstance(name, str) else f"source {i}"
            for i, name in enumerate(named)
        )
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(
                f"`source` has several tasks named {repeated}: give each TaskData "
                "its own `name` (the weights are read by name)."
            )
        return names

    def _warn_about_sources(self) -> None:
        r"""One warning per source that cannot be checked or carries no structure,
        naming it."""
        several = len(self.source_names) > 1
        for name, skill in self.source_skills.items():
            label = f"The source {name!r}" if several else "The source"
            if self.min_source_skill is not None and math.isnan(skill):
                warnings.warn(
                    f"{label} cannot be checked for structure to transfer "
                    "(`min_source_skill`: whether its GP predicts its own "
                    "observations at left-out inputs): it has fewer than "
                    f"{MIN_DISTINCT_INPUTS} distinct inputs or constant outcomes. It "
                    "is used unchecked, weighted by the target's ranking alone; add "
                    "source points, or pass min_source_skill=None to use a source "
                    "you trust without this warning.",
                    UninformativeSourceWarning,
                    stacklevel=3,
                )
            elif name in self.uninformative_sources:
                acts = (
                    "its transfer model gets weight 0"
                    if several
                    else "the model acts as its target-only GP (transfer_weight 0)"
                )
                warnings.warn(
                    f"{label}'s GP predicts its own observations at left-out inputs "
                    f"with R^2 = {skill:.3f}, below `min_source_skill` = "
                    f"{self.min_source_skill}: the source carries no structure to "
                    f"transfer, and {acts}. Check that the source's inputs and "
                    "outcomes belong together.",
                    UninformativeSourceWarning,
                    stacklevel=3,
                )

    @staticmethod
    def _source_gp(
        source: Any, train_X: Tensor, input_transform: InputTransform | None
    ) -> SingleTaskGP:
        if isinstance(source, TaskData):
            if source.n == 0:
                raise ValueError(
                    "`source` has no observations (n=0): there is nothing to "
                    "transfer. Use a SingleTaskGP on the target data alone."
                )
            label = "`source`" if source.name is None else f"`source` {source.name!r}"
            if torch.is_tensor(train_X) and source.X.shape[-1] != train_X.shape[-1]:
                raise ValueError(
                    f"{label} has {source.X.shape[-1]} input dimensions, `train_X` "
                    f"has {train_X.shape[-1]}. {OTHER_PARAMETERS_HINT}"
                )
            if torch.is_tensor(train_X) and source.X.dtype != train_X.dtype:
                raise ValueError(
                    f"{label} is {source.X.dtype}, `train_X` is {train_X.dtype}: "
                    "give both in one dtype."
                )
            return fit_source_gp(source, input_transform)
        if isinstance(source, SingleTaskGP):
            if source.num_outputs != 1 or len(source.batch_shape) > 0:
                raise ValueError(
                    "`source` must be a single-output, non-batched SingleTaskGP."
                )
            return source
        raise TypeError(
            "`source` must be a TaskData or a fitted SingleTaskGP (or a sequence of "
            f"them), got {type(source).__name__}."
        )

    @classmethod
    def construct_inputs(
        cls, training_data: SupervisedDataset | MultiTaskDataset, **kwargs: Any
    ) -> dict[str, Any]:
        r"""Constructor arguments from the training data plus the model's options.

        As ``SourceConditionedGP.construct_inputs`` (whose dataset splitting this
        uses):

        - a ``SupervisedDataset`` of the target task, with ``source=`` in
          ``kwargs`` (e.g. from Ax's ``model_options``);
        - a ``MultiTaskDataset`` as Ax's ``TransferLearningAdapter`` builds it from
          the experiments attached as ``TRANSFERABLE_EXPERIMENT``: the task column
          is dropped from all inputs, each source task becomes one ``TaskData``
          (``source=``: one, or a list of several, named after their tasks), and
          ``task_column`` lets the model accept Ax's queries.

        Args:
            training_data: The target data, or the target and source data.
            kwargs: ``source`` (unless ``training_data`` holds it) and further
                constructor options.

        Returns:
            Keyword arguments for ``cls(**inputs)``.

        Raises:
            ValueError: If no source is given.

        Example:
            >>> inputs = RankWeightedTransferGP.construct_inputs(mt_dataset)
            >>> model = RankWeightedTransferGP(**inputs)
        """
        # the source-conditioned models' routes (for a MultiTaskDataset: target,
        # sources as TaskData, task column, source-only parameters), for this class
        from_dataset = kwargs.get(cls.transfer_argument) is None
        inputs = construct_transfer_inputs(cls, training_data, **kwargs)
        if from_dataset and len(inputs["source"]) == 1:  # a MultiTaskDataset's
            inputs["source"] = inputs["source"][0]
        return inputs

    # ------------------------------------------------------------------- hooks
    def _ranked_targets(self, model: Model) -> Tensor:
        # a transfer model's targets are residuals: rank its draws of the
        # observations
        return model._target_Y

    @property
    def _no_target_points(self) -> bool:
        return self.target_model.train_targets.shape[-1] == 0

    def _models_to_fit(self) -> tuple[Model, ...]:
        if self._no_target_points:  # no target data to fit anything to
            return ()
        # several sources: their transfer models' hyperparameters are fitted as one
        # batched GP (one fit instead of one per source), then copied back
        stacked = self._stacked_transfer_model()
        if stacked is not None:
            return (stacked, self.target_model)
        # a transfer model without weight whatever the ranking is not fitted
        return (*self._kept_transfer_models(), self.target_model)

    def _fit_part(self, model: Model, **kwargs: Any) -> None:
        held = self._stacked
        if held is None or model is not held.stacked:
            return super()._fit_part(model, **kwargs)
        # each source's hyperparameters by their own L-BFGS-B run, all sources
        # evaluated together; then each transfer model takes its entry's
        stacked = held.stacked
        fit_batch_entries(ExactMarginalLogLikelihood(stacked.likelihood, stacked))
        unstack_parameters(stacked, held.models)
        for part in held.models:
            part.prediction_strategy = None  # caches of the old hyperparameters
        self._stacked = held._replace(values=self._snapshot(held.parameters))

    def _kept_transfer_models(self) -> tuple[DeltaBOModel, ...]:
        return tuple(
            model
            for model, out in zip(self.transfer_models, self._excluded(), strict=True)
            if not out
        )

    @staticmethod
    def _snapshot(parameters: Sequence[Tensor]) -> Tensor:
        return torch.cat([p.detach().reshape(-1) for p in parameters])

    def _stacked_transfer_model(self) -> DeltaBOModel | None:
        r"""The transfer models that are fitted (not excluded) as one batched
        :class:`DeltaBOModel`
        (:func:`~botorch_transfer.models.delta.stacked_delta_models`: entry ``k`` is
        the ``k``-th of them, with its hyperparameters), built when first needed and
        kept while they and their hyperparameters stay the same; ``None`` with fewer
        than two of them or where they cannot be stacked (then each is fitted and
        evaluated on its own)."""
        models = self._kept_transfer_models()
        if len(models) < 2:
            return None
        held = self._stacked
        same_models = held is not None and len(held.models) == len(models)
        if same_models and all(a is b for a, b in zip(held.models, models)):
            # the parameters' values now against then (the parameters are kept as
            # a list: walking the modules at every posterior call costs more)
            values = self._snapshot(held.parameters)
            if (
                held.values.shape == values.shape
                and held.values.dtype == values.dtype
                and held.values.device == values.device
                and torch.equal(held.values, values)
            ):
                return held.stacked
        parameters = tuple(p for model in models for p in model.parameters())
        stacked = stacked_delta_models(models)
        self._stacked = _StackedParts(
            models, parameters, self._snapshot(parameters), stacked
        )
        return stacked

    def _excluded(self) -> list[bool]:
        return [name in self.uninformative_sources for name in self.source_names]

    def _query_inputs(self, X: Tensor) -> Tensor:
        return self.transfer_models[0].strip_task_feature(X)

    def _condition_knowledge_model(
        self, model: Model, X: Tensor, Y: Tensor, noise: Tensor | None
    ) -> Model:
        # DeltaBOModel takes raw inputs and conditions its residual GP itself
        return model.condition_on_observations(X, Y, noise=noise)

    def _part_posterior(
        self, model: Model, X: Tensor, observation_noise: bool | Tensor
    ) -> GPyTorchPosterior:
        if not self._no_target_points:
            return model.posterior(X, observation_noise=observation_noise)
        # no target units yet: each source GP's posterior in its own standardized
        # units, so that sources in other units average fairly
        index = next(k for k, m in enumerate(self.transfer_models) if m is model)
        source_gp = self._source_gps[index]
        posterior = source_gp.posterior(X, observation_noise=observation_noise)
        affine = outcome_affine(getattr(source_gp, "outcome_transform", None))
        if affine is None:  # outcomes kept as they are: no units to take out
            return posterior
        scale, offset = affine
        mvn = posterior.distribution
        return GPyTorchPosterior(
            MultivariateNormal(
                (mvn.mean - offset) / scale, mvn.lazy_covariance_matrix / scale**2
            )
        )

    def _part_posteriors(
        self, models: list[Model], X: Tensor, observation_noise: bool | Tensor
    ) -> list[GPyTorchPosterior]:
        transfer = [m for m in models if m is not self.target_model]
        stacked = None
        if len(transfer) > 1 and observation_noise is False:
            stacked = self._stacked_transfer_model()
        if stacked is None:
            return super()._part_posteriors(models, X, observation_noise)
        # every transfer model with weight in one call of the batched GP (model
        # units), each entry mapped to the user's units as its model maps it
        entry = {id(m): k for k, m in enumerate(self._stacked.models)}
        batched = stacked.posterior(X.unsqueeze(-3)).distribution
        scale, offset = transfer[0].output_scale, transfer[0].output_offset
        parts = []
        for model in models:
            if model is self.target_model:
                parts.append(self._part_posterior(model, X, observation_noise))
                continue
            k = entry[id(model)]
            mean = batched.mean[..., k, :]
            covariance = batched.lazy_covariance_matrix[..., k, :, :]
            parts.append(
                GPyTorchPosterior(
                    MultivariateNormal(scale * mean + offset, covariance * scale**2)
                )
            )
        return parts

    def condition_on_observations(
        self, X: Tensor, Y: Tensor, noise: Tensor | None = None, **kwargs: Any
    ) -> RankWeightedTransferGP:
        r"""Every GP conditioned on ``(X, Y)`` (raw inputs, user units), the weights
        kept; not before the first target point (the target's units are unknown:
        build the model on the first observations instead)."""
        if self._no_target_points:
            raise UnsupportedError(
                "RankWeightedTransferGP with no target point cannot be conditioned "
                "on fantasy observations (the target's units are unknown); use an "
                "acquisition function that does not fantasize (UCB, qUCB, "
                "PosteriorMean) for the first query."
            )
        return super().condition_on_observations(X, Y, noise=noise, **kwargs)

    def target_noise_variance(self) -> Tensor:
        if self._no_target_points:
            raise UnsupportedError(
                "RankWeightedTransferGP has no target point, so the noise of a target "
                "observation is unknown: `observation_noise=True` needs at least one; "
                "use UCB, qUCB or PosteriorMean for the first query."
            )
        return super().target_noise_variance()

    # ----------------------------------------------------------------- sources
    @property
    def transfer_model(self) -> DeltaBOModel:
        r"""The transfer model of the one source (with several, see
        :attr:`transfer_models`)."""
        if len(self.transfer_models) != 1:
            raise ValueError(
                f"The model has {len(self.transfer_models)} sources "
                f"{list(self.source_names)}: use `transfer_models` (in that order)."
            )
        return self.transfer_models[0]

    @property
    def source_skill(self) -> float:
        r"""The one source's skill (with several, see :attr:`source_skills`)."""
        if len(self.source_names) != 1:
            raise ValueError(
                f"The model has {len(self.source_names)} sources: use "
                "`source_skills` (by name)."
            )
        return self.source_skills[self.source_names[0]]

    @property
    def uninformative_sources(self) -> tuple[str, ...]:
        r"""The sources whose skill (:attr:`source_skills`, their GP's
        leave-input-out ``R^2``) is below ``min_source_skill``: their transfer
        models have weight 0 and are not fitted."""
        if self.min_source_skill is None:
            return ()
        return tuple(
            name
            for name, skill in self.source_skills.items()
            if not math.isnan(skill) and skill < self.min_source_skill
        )

    @property
    def source_uninformative(self) -> bool:
        r"""Whether every source is uninformative (:attr:`uninformative_sources`):
        the model is then its target-only GP."""
        return len(self.uninformative_sources) == len(self.source_names)

    # ----------------------------------------------------------------- weights
    @property
    def source_weights(self) -> dict[str, float]:
        r"""Per source name, its transfer model's weight (the target-only GP has
        the rest, ``1 - transfer_weight``); computed from the current
        hyperparameters if not yet fitted."""
        return {
            name: float(w)
            for name, w in zip(self.source_names, self.weights[:-1], strict=True)
        }

    @property
    def transfer_weight(self) -> float:
        r"""The transfer models' total weight ``w`` in ``[0, 1]`` (the target-only
        GP has ``1 - w``); computed from the current hyperparameters if not yet
        fitted. An uninformative source's transfer model
        (:attr:`uninformative_sources`) has weight 0 and is not fitted."""
        return self.weight
