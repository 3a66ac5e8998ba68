r"""Generation strategies for Ax's ``Client`` whose BO node is one of the package's
transfer models: with the source data as model options, or on Ax's native
transfer-learning path."""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any, Literal

import torch
from ax.adapter.registry import Generators, MBM_X_trans
from ax.adapter.transfer_learning.adapter import (
    transfer_learning_generator_specs_constructor,
)
from ax.adapter.transforms.metadata_to_task import MetadataToTask
from ax.core.trial_status import TrialStatus
from ax.generation_strategy.generation_node import GenerationNode
from ax.generation_strategy.generation_strategy import GenerationStrategy
from ax.generation_strategy.generator_spec import GeneratorSpec
from ax.generation_strategy.transition_criterion import MinTrials
from ax.generators.torch.botorch_modular.surrogate import ModelConfig, SurrogateSpec
from botorch.models.model import Model
from botorch.models.transforms.outcome import Standardize

from botorch_transfer.ax.nodes import TransferGenerationNode
from botorch_transfer.data import TaskData
from botorch_transfer.models.rank_weighted import RankWeightedTransferGP


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
    # a **kwargs that only takes old names (the class's renamed_arguments) takes
    # nothing else
    renamed = getattr(botorch_model_class, "renamed_arguments", None)
    takes_kwargs = renamed is None and any(
        p.kind is p.VAR_KEYWORD for p in parameters.values()
    )
    known = set(parameters) | set(renamed or ())
    unknown = sorted(k for k in model_options if k not in known)
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
    on_transfer_failure: Literal["warn", "raise"] = "warn",
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
        on_transfer_failure: When Ax falls back from the transfer model to
            another generator (e.g. Sobol, when the model proposes only points
            already tried): ``"warn"`` (``TransferModelUnusedWarning``, with the
            cause) or ``"raise"`` (``TransferModelUnusedError``). A model that
            cannot be built raises in either case.

    Returns:
        A ``GenerationStrategy``; pass it to ``Client.set_generation_strategy``.
    """
    _check_on_transfer_failure(on_transfer_failure)
    if not isinstance(initialization_trials, int) or initialization_trials < 1:
        # with no data Ax's MapKeyToFloat transform fails ("requires non-empty data")
        raise ValueError(
            "`initialization_trials` must be an int >= 1 (Ax's transforms need one "
            f"observed trial), got {initialization_trials!r}."
        )
    config = transfer_model_config(botorch_model_class, model_options)
    transfer_node = TransferGenerationNode(
        name=config.name,
        generator_specs=[
            GeneratorSpec(
                generator_enum=Generators.BOTORCH_MODULAR,
                generator_kwargs={
                    "surrogate_spec": SurrogateSpec(model_configs=[config]),
                    # input-space transforms only: outcomes must stay in the
                    # source's units
                    "transforms": MBM_X_trans,
                    **device_generator_kwargs(torch_device),
                },
            )
        ],
        should_deduplicate=True,
        on_transfer_failure=on_transfer_failure,
    )
    return with_sobol_initialization(
        transfer_node, initialization_trials, seed, name or f"Sobol+{config.name}"
    )


def _check_on_transfer_failure(on_transfer_failure: Any) -> None:
    if on_transfer_failure not in ("warn", "raise"):
        raise ValueError(
            "`on_transfer_failure` must be 'warn' or 'raise', got "
            f"{on_transfer_failure!r}."
        )


def device_generator_kwargs(torch_device: torch.device | None) -> dict[str, Any]:
    r"""The generator kwargs that put Ax's model on a torch device.

    Args:
        torch_device: The device (``None``: Ax's default, the CPU).

    Returns:
        ``{"torch_device": torch_device}``, or ``{}`` for ``None``; update a
        ``GeneratorSpec``'s ``generator_kwargs`` with it.
    """
    return {} if torch_device is None else {"torch_device": torch.device(torch_device)}


def with_sobol_initialization(
    node: GenerationNode, initialization_trials: int, seed: int | None, name: str
) -> GenerationStrategy:
    r"""A generation strategy that runs ``node`` after a Sobol initialization.

    Args:
        node: The model's generation node.
        initialization_trials: Sobol trials before ``node`` (0: ``node`` only).
            Failed and abandoned trials do not count.
        seed: Seed of the Sobol generator.
        name: Name of the generation strategy.

    Returns:
        A ``GenerationStrategy`` of the Sobol node (if any) and ``node``.
    """
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
    botorch_model_class: type[Model] = RankWeightedTransferGP,
    initialization_trials: int = 3,
    use_model_selection: bool = True,
    model_options: dict[str, Any] | None = None,
    seed: int | None = None,
    name: str | None = None,
    torch_device: torch.device | None = None,
    on_transfer_failure: Literal["warn", "raise"] = "warn",
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
        botorch_model_class: A source-conditioned model. Default
            ``RankWeightedTransferGP``, the package's recommended model, which
            transfers from one or several source experiments, each weighted by
            its evidence; also ``RGPE``, ``DeltaBOModel``, ``EnvGP`` or ``DiffGP``
            (Ax's default is ``MultiTaskGP``).
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
        on_transfer_failure: What happens when a trial would not come from the
            transfer model because it cannot be built (e.g. no source experiment
            attached, a source without data or lacking a parameter) or Ax fell
            back to another generator: ``"warn"`` generates from the other
            generator (with model selection, Ax's target-only GP) and warns with
            the cause and that generator (``TransferModelUnusedWarning``);
            ``"raise"`` raises ``TransferModelUnusedError`` instead. Model
            selection's choice of the target-only GP by cross-validation is a
            decision, not a failure: it warns either way. Each trial's
            ``gen_metadata["transfer_model_used"]`` records which it was; a trial
            from ``RankWeightedTransferGP`` also records each source
            experiment's weight (``"source_weights"``, by name), the target-only
            GP's (``"target_only_weight"``) and the sources given no weight for
            lack of structure (``"uninformative_sources"``); a trial from any
            transfer model records what it did with each source experiment's
            parameters (``"source_parameters"``, see
            :func:`source_parameter_roles`).

    Returns:
        A ``GenerationStrategy``; pass it to ``Client.set_generation_strategy``.

    Example:
        >>> experiment.add_auxiliary_experiment(
        ...     AuxiliaryExperimentPurpose.TRANSFERABLE_EXPERIMENT,
        ...     AuxiliarySource(experiment=last_months_experiment),
        ... )
        >>> client.set_generation_strategy(
        ...     transfer_learning_generation_strategy()  # RankWeightedTransferGP
        ... )
    """
    _check_on_transfer_failure(on_transfer_failure)
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
        spec.generator_kwargs.update(device_generator_kwargs(torch_device))
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
    node = TransferGenerationNode(
        name=node_name,
        generator_specs=specs,
        best_model_selector=selector,
        should_deduplicate=True,
        on_transfer_failure=on_transfer_failure,
    )
    return with_sobol_initialization(
        node, initialization_trials, seed, name or f"Sobol+{node_name}"
    )
