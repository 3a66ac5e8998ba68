r"""Using the package's models through Ax.

Needs the optional extra: ``pip install "botorch_transfer[ax]"``.

Ax builds BoTorch models from a
``ModelConfig(botorch_model_class=..., model_options=...)`` by calling
``botorch_model_class.construct_inputs(training_data, **model_options)``; the source
data of a transfer model (``source=TaskData(...)``, a fitted source model) or a
pre-trained prior (``prior=...``) travel as ``model_options``.

There are two routes:

- **Ax's native transfer learning** (recommended): attach the past experiments to the
  target experiment as ``AuxiliarySource``\ s with purpose
  ``AuxiliaryExperimentPurpose.TRANSFERABLE_EXPERIMENT`` and use
  :func:`transfer_learning_generation_strategy`. Ax's ``TransferLearningAdapter``
  builds a ``MultiTaskDataset`` (target and sources, with a task column) and the
  models' ``construct_inputs`` turn it into ``source=[TaskData, ...]``. Ax's model
  selection by cross-validation (transfer model vs. a plain GP on the target) works
  on top.
- **Source data as model options** (low level): :func:`transfer_generation_strategy`
  with ``model_options={"source": TaskData(...)}`` (also for fitted source models and
  for pre-trained priors, ``prior=...``).

One thing needs care on both routes: by default Ax transforms the target outcomes
before they reach the model (``Winsorize``, ``BilogY``, ``StandardizeY``), so they
would no longer be in the units of the source data, and the relation
``f = g + delta`` (or the pre-trained prior's units) breaks; on the native route Ax
even standardizes each source experiment separately. Both strategies here therefore
keep Ax's input-space transforms but no outcome transforms; the model's own outcome
transform (BoTorch ``Standardize``, fitted on source and target outcomes together)
scales the data instead. Give source inputs in the units of the Ax parameters (for
log-scaled parameters Ax's ``Log`` transform passes ``log10`` of the value).

Example:
    >>> from ax.api.client import Client
    >>> client = Client()
    >>> client.configure_experiment(
    ...     parameters=[RangeParameterConfig("x", "float", (0.0, 1.0))]
    ... )
    >>> client.configure_optimization(objective="y")
    >>> client.set_generation_strategy(
    ...     transfer_generation_strategy(
    ...         DeltaBOModel, {"source": TaskData(X_src, Y_src)}
    ...     )
    ... )
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
from botorch.models.model import Model
from botorch.models.transforms.outcome import Standardize

from botorch_transfer.data import TaskData
from botorch_transfer.models.guard import TransferGuard
from botorch_transfer.models.randomized_nn import RandomizedNNEnsemble

try:
    import pandas as pd
    from ax.adapter.registry import Generators, MBM_X_trans
    from ax.adapter.transfer_learning.adapter import (
        transfer_learning_generator_specs_constructor,
    )
    from ax.adapter.transforms.metadata_to_task import MetadataToTask
    from ax.core.experiment import Experiment
    from ax.core.trial_status import TrialStatus
    from ax.generation_strategy.generation_node import GenerationNode
    from ax.generation_strategy.generation_strategy import GenerationStrategy
    from ax.generation_strategy.generator_spec import GeneratorSpec
    from ax.generation_strategy.transition_criterion import MinTrials
    from ax.generators.torch.botorch_modular.surrogate import ModelConfig, SurrogateSpec
    from ax.generators.torch.botorch_modular.utils import fit_botorch_model
except ImportError as e:  # pragma: no cover - exercised only without Ax
    raise ImportError(
        "botorch_transfer.ax needs Ax: pip install 'botorch_transfer[ax]'"
    ) from e


@fit_botorch_model.register(RandomizedNNEnsemble)
@fit_botorch_model.register(TransferGuard)
def _fit_with_the_models_own_fit(
    model: RandomizedNNEnsemble | TransferGuard,
    mll_class: type | None = None,
    mll_options: dict[str, Any] | None = None,
) -> None:
    r"""How Ax's surrogate fits the package's models that are not one GPyTorch GP
    (``mll_class`` is not used): a ``RandomizedNNEnsemble`` trains its members on
    eq. 10, a guard (``TransferGuard.of(DeltaBOModel)``) fits its two GPs by
    marginal likelihood and chooses (their ``fit``)."""
    model.fit()


def check_model_options(
    botorch_model_class: type[Model], model_options: dict[str, Any]
) -> None:
    r"""Check a model class and its options when a strategy is built, not at the
    first model trial after the Sobol budget is spent.

    Args:
        botorch_model_class: A BoTorch ``Model`` class (not a name).
        model_options: Its constructor options: a dict holding the class's transfer
            input (``source=`` or ``prior=``, see ``transfer_argument``) and only
            arguments its constructor takes.

    Raises:
        TypeError: A class that is not a BoTorch model, or options that are not a
            dict.
        ValueError: A missing or empty transfer input, or an option the class does
            not take (e.g. a misspelled ``source``).
    """
    if not (
        isinstance(botorch_model_class, type) and issubclass(botorch_model_class, Model)
    ):
        raise TypeError(
            "`botorch_model_class` must be a BoTorch Model class (e.g. DeltaBOModel), "
            f"got {botorch_model_class!r}."
        )
    name = botorch_model_class.__name__
    if not isinstance(model_options, dict):
        raise TypeError(
            "`model_options` must be a dict of constructor options (e.g. "
            f"{{'source': TaskData(...)}}), got {type(model_options).__name__}."
        )
    parameters = inspect.signature(botorch_model_class.__init__).parameters
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    unknown = sorted(k for k in model_options if k not in parameters)
    if unknown and not takes_kwargs:
        accepted = sorted(k for k in parameters if k != "self")
        raise ValueError(
            f"`model_options` has {unknown}, which {name} does not take; it takes "
            f"{accepted}."
        )
    transfer = getattr(botorch_model_class, "transfer_argument", None)
    if transfer is None:
        return
    value = model_options.get(transfer)
    if value is None:
        raise ValueError(
            f"`model_options` must give `{transfer}` for {name} (e.g. "
            f"{{'{transfer}': ...}}); got keys {sorted(model_options)}."
        )
    tasks = value if isinstance(value, (list, tuple)) else [value]
    if len(tasks) == 0 or any(isinstance(t, TaskData) and t.n == 0 for t in tasks):
        raise ValueError(
            f"`model_options['{transfer}']` must not be empty: give at least one "
            "source with observations."
        )


def transfer_model_config(
    botorch_model_class: type[Model],
    model_options: dict[str, Any],
    name: str | None = None,
) -> ModelConfig:
    r"""An Ax ``ModelConfig`` for one of the package's models.

    Args:
        botorch_model_class: E.g. ``DeltaBOModel``, ``EnvGP``, ``DiffGP``,
            ``PretrainedPriorGP``.
        model_options: Constructor options, e.g. ``{"source": TaskData(...)}`` or
            ``{"prior": prior}``.
        name: Name of the config (default: the class name).

    Returns:
        A ``ModelConfig`` with Ax's default ``Normalize`` input transform and a
        ``Standardize`` outcome transform (none for a model whose class sets
        ``fixes_outcome_units``, e.g. ``PretrainedPriorGP``: its prior fixes the
        units).
    """
    check_model_options(botorch_model_class, model_options)
    # a model whose prior fixes the output units takes no outcome transform
    fixed_units = getattr(botorch_model_class, "fixes_outcome_units", False)
    outcome = None if fixed_units else [Standardize]
    return ModelConfig(
        botorch_model_class=botorch_model_class,
        model_options=dict(model_options),
        outcome_transform_classes=outcome,
        name=name or botorch_model_class.__name__,
    )


def transfer_generation_strategy(
    botorch_model_class: type[Model],
    model_options: dict[str, Any],
    initialization_trials: int = 5,
    seed: int | None = None,
    name: str | None = None,
    torch_device: torch.device | None = None,
) -> GenerationStrategy:
    r"""Sobol initialization, then BO with a transfer model, for Ax's ``Client``.

    Args:
        botorch_model_class: The model class (see :func:`transfer_model_config`).
        model_options: Its constructor options (the source data / prior).
        initialization_trials: Sobol trials before the model takes over (at least
            1: Ax's transforms need one observed trial).
        seed: Seed of the Sobol sequence.
        name: Name of the strategy.
        torch_device: Where Ax fits the model and optimizes the acquisition
            (Ax's ``torch_device``; default: the CPU).

    Returns:
        A ``GenerationStrategy``; pass it to ``Client.set_generation_strategy``.
    """
    if not isinstance(initialization_trials, int) or initialization_trials < 1:
        # with no data Ax's MapKeyToFloat transform fails ("requires non-empty data")
        raise ValueError(
            "`initialization_trials` must be an int >= 1 (Ax's transforms need one "
            f"observed trial), got {initialization_trials!r}."
        )
    config = transfer_model_config(botorch_model_class, model_options)
    transfer_node = GenerationNode(
        name=config.name,
        generator_specs=[
            GeneratorSpec(
                generator_enum=Generators.BOTORCH_MODULAR,
                generator_kwargs={
                    "surrogate_spec": SurrogateSpec(model_configs=[config]),
                    # input-space transforms only: outcomes must stay in the
                    # source's units
                    "transforms": MBM_X_trans,
                    **_device_kwargs(torch_device),
                },
            )
        ],
        should_deduplicate=True,
    )
    return _with_sobol(
        transfer_node, initialization_trials, seed, name or f"Sobol+{config.name}"
    )


def _device_kwargs(torch_device: torch.device | None) -> dict[str, Any]:
    r"""The generator kwargs that put Ax's model on ``torch_device`` (none: Ax's
    default, the CPU)."""
    return {} if torch_device is None else {"torch_device": torch.device(torch_device)}


def _with_sobol(
    node: GenerationNode, initialization_trials: int, seed: int | None, name: str
) -> GenerationStrategy:
    r"""``node`` after ``initialization_trials`` Sobol trials (if any)."""
    nodes = [node]
    if initialization_trials > 0:
        sobol = GenerationNode(
            name="Sobol",
            generator_specs=[
                GeneratorSpec(
                    generator_enum=Generators.SOBOL, generator_kwargs={"seed": seed}
                )
            ],
            transition_criteria=[
                MinTrials(
                    threshold=initialization_trials,
                    transition_to=node.name,
                    not_in_statuses=[TrialStatus.FAILED, TrialStatus.ABANDONED],
                )
            ],
            should_deduplicate=True,
        )
        nodes = [sobol, node]
    return GenerationStrategy(name=name, nodes=nodes)


def transfer_learning_generation_strategy(
    botorch_model_class: type[Model],
    initialization_trials: int = 3,
    use_model_selection: bool = True,
    model_options: dict[str, Any] | None = None,
    seed: int | None = None,
    name: str | None = None,
    torch_device: torch.device | None = None,
) -> GenerationStrategy:
    r"""Sobol initialization, then BO with a transfer model on Ax's native
    transfer-learning path (``TransferLearningAdapter``).

    The source data come from the experiments attached to the target experiment
    with purpose ``AuxiliaryExperimentPurpose.TRANSFERABLE_EXPERIMENT``; Ax hands
    them to the model as a ``MultiTaskDataset`` (see
    ``SourceConditionedGP.construct_inputs``). This is Ax's
    ``transfer_learning_generator_specs_constructor`` with one change: no outcome
    transforms in the adapter (Ax would standardize each source experiment on its
    own, so target and sources would no longer share units); the model's
    ``Standardize``, fitted on source and target outcomes together, scales them.

    Args:
        botorch_model_class: A source-conditioned model: ``DeltaBOModel``,
            ``EnvGP``, ``DiffGP`` or ``RGPE`` (Ax's default is ``MultiTaskGP``).
        initialization_trials: Sobol trials before the model takes over (at
            least 1: Ax's transfer-learning adapter cannot generate without target
            data, for ``MultiTaskGP`` neither; for a start from the source data
            alone use :func:`transfer_generation_strategy`).
        use_model_selection: As in Ax: also fit a plain GP on the target and
            generate with whichever cross-validates better (rank correlation),
            a guard against negative transfer. Needs a few target trials.
        model_options: Further constructor options of the model (not the sources).
        seed: Seed of the Sobol sequence.
        name: Name of the strategy.
        torch_device: Where Ax fits the models and optimizes the acquisition
            (Ax's ``torch_device``; default: the CPU).

    Returns:
        A ``GenerationStrategy``; pass it to ``Client.set_generation_strategy``.

    Example:
        >>> experiment.add_auxiliary_experiment(
        ...     AuxiliaryExperimentPurpose.TRANSFERABLE_EXPERIMENT,
        ...     AuxiliarySource(experiment=last_months_experiment),
        ... )
        >>> client.set_generation_strategy(
        ...     transfer_learning_generation_strategy(DeltaBOModel)
        ... )
    """
    if initialization_trials < 1:
        raise ValueError(
            "`initialization_trials` must be at least 1 (Ax's transfer-learning "
            "adapter needs target data before it can generate), got "
            f"{initialization_trials}. To start from the source data alone, pass "
            "them as model options: `transfer_generation_strategy`."
        )
    specs, selector = transfer_learning_generator_specs_constructor(
        model_class=botorch_model_class,
        # input-space transforms only: outcomes must stay in the sources' units
        transforms=[*MBM_X_trans, MetadataToTask],
        use_model_selection=use_model_selection,
        botorch_model_kwargs=dict(model_options or {}),
    )
    # Ax's config sets no outcome transform for the model; ours standardizes source
    # and target outcomes together (as `transfer_model_config`)
    for spec in specs:
        spec.generator_kwargs.update(_device_kwargs(torch_device))
    kwargs = specs[0].generator_kwargs
    fixed_units = getattr(botorch_model_class, "fixes_outcome_units", False)
    kwargs["surrogate_spec"] = replace(
        kwargs["surrogate_spec"],
        model_configs=[
            replace(c, outcome_transform_classes=None if fixed_units else [Standardize])
            for c in kwargs["surrogate_spec"].model_configs
        ],
    )
    node_name = f"TL-{botorch_model_class.__name__}"
    node = GenerationNode(
        name=node_name,
        generator_specs=specs,
        best_model_selector=selector,
        should_deduplicate=True,
    )
    return _with_sobol(node, initialization_trials, seed, name or f"Sobol+{node_name}")


def task_data_from_dataframe(
    df: pd.DataFrame,
    parameter_names: Sequence[str],
    metric_name: str,
    noise_column: str | None = None,
    name: str | None = None,
    dtype: torch.dtype = torch.float64,
) -> TaskData:
    r"""Past evaluations in a DataFrame as a source task, for use outside Ax.

    Rows whose metric is missing (e.g. failed trials in ``Client.summarize()``)
    are dropped.

    Args:
        df: One row per evaluation.
        parameter_names: The input columns, in the order of the model's inputs
            (numeric; give log-scaled parameters as the model sees them).
        metric_name: The outcome column.
        noise_column: Optional column of known observation noise *variances*
            (``TaskData.Yvar``); ``None``: the noise is unknown.
        name: Name of the task.
        dtype: Dtype of the tensors.

    Returns:
        A ``TaskData``.

    Example:
        >>> source = task_data_from_dataframe(
        ...     old_client.summarize(), ["x0", "x1"], "y", name="last month"
        ... )
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"`df` must be a pandas DataFrame, got {type(df).__name__}.")
    if isinstance(parameter_names, str):
        raise TypeError(
            "`parameter_names` must be a sequence of column names, got the string "
            f"{parameter_names!r}; use [{parameter_names!r}]."
        )
    parameter_names = list(parameter_names)
    if not parameter_names:
        raise ValueError("`parameter_names` must name at least one column.")
    for argument, columns in (
        ("parameter_names", parameter_names),
        ("metric_name", [metric_name]),
        ("noise_column", [] if noise_column is None else [noise_column]),
    ):
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise ValueError(
                f"`{argument}`: column(s) {missing} not in `df` (columns: "
                f"{list(df.columns)})."
            )
    for column in (*parameter_names, metric_name, *filter(None, [noise_column])):
        if not pd.api.types.is_numeric_dtype(df[column]):
            raise TypeError(
                f"`df[{column!r}]` must be numeric, got dtype {df[column].dtype} "
                "(encode choice parameters as numbers first)."
            )
    df = df[df[metric_name].notna()]
    if len(df) == 0:
        raise ValueError(f"`df` has no rows with a value of {metric_name!r}.")
    X = torch.tensor(df[parameter_names].to_numpy(dtype=float), dtype=dtype)
    Y = torch.tensor(df[[metric_name]].to_numpy(dtype=float), dtype=dtype)
    Yvar = None
    if noise_column is not None:
        Yvar = torch.tensor(df[[noise_column]].to_numpy(dtype=float), dtype=dtype)
    return TaskData(X, Y, Yvar, name=name)


def task_data_from_experiment(
    experiment: Experiment,
    metric_name: str,
    parameter_names: Sequence[str] | None = None,
    dtype: torch.dtype = torch.float64,
) -> TaskData:
    r"""A finished Ax experiment's observations of one metric as a source task.

    One row per arm and trial with data (the last step of map data). The known
    noise is used when every observation has one (Ax's ``sem``, squared); otherwise
    it is left to the model to learn.

    Args:
        experiment: The Ax experiment, e.g. ``client._experiment`` of a past run.
        metric_name: The metric to transfer.
        parameter_names: The inputs, in the order of the model's inputs (default:
            the experiment's parameters in search-space order). Values are taken
            as stored (raw units, not Ax's transformed ones).
        dtype: Dtype of the tensors.

    Returns:
        A ``TaskData`` named after the experiment.

    Example:
        >>> source = task_data_from_experiment(old_client._experiment, "y")
        >>> model = DeltaBOModel(train_X, train_Y, source=source)
    """
    if not isinstance(experiment, Experiment):
        raise TypeError(
            f"`experiment` must be an Ax Experiment, got {type(experiment).__name__}."
        )
    data = experiment.lookup_data().df
    if data.empty or metric_name not in set(data["metric_name"]):
        known = sorted(set(data["metric_name"])) if not data.empty else []
        raise ValueError(
            f"`metric_name`: experiment {experiment.name!r} has no data for "
            f"{metric_name!r} (metrics with data: {known})."
        )
    data = data[data["metric_name"] == metric_name]
    if "step" in data.columns and data["step"].notna().any():
        data = data.sort_values("step")
    data = data.drop_duplicates(["trial_index", "arm_name"], keep="last")
    if parameter_names is None:
        parameter_names = list(experiment.search_space.parameters)
    rows = []
    for arm_name in data["arm_name"]:
        parameters = experiment.arms_by_name[arm_name].parameters
        missing = [p for p in parameter_names if p not in parameters]
        if missing:
            raise ValueError(
                f"`parameter_names`: arm {arm_name!r} of experiment "
                f"{experiment.name!r} has no value for {missing}."
            )
        rows.append([parameters[p] for p in parameter_names])
    frame = pd.DataFrame(rows, columns=list(parameter_names), index=data.index)
    frame[metric_name] = data["mean"]
    noise_column = None
    if data["sem"].notna().all():
        noise_column = "__yvar__"
        frame[noise_column] = data["sem"] ** 2
    return task_data_from_dataframe(
        frame,
        parameter_names,
        metric_name,
        noise_column=noise_column,
        name=experiment.name,
        dtype=dtype,
    )
