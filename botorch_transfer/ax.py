r"""Using the package's models through Ax.

Needs the optional extra: ``pip install "botorch_transfer[ax]"``.

Ax builds BoTorch models from a
``ModelConfig(botorch_model_class=..., model_options=...)`` by calling
``botorch_model_class.construct_inputs(training_data, **model_options)``; the source
data of a transfer model (``source=TaskData(...)``, a fitted source model) or a
pre-trained prior (``prior=...``) travel as ``model_options``.

One thing needs care: by default Ax transforms the target outcomes before they reach
the model (``Winsorize``, ``BilogY``, ``StandardizeY``), so they would no longer be in
the units of the source data, and the relation ``f = g + delta`` (or the pre-trained
prior's units) breaks. :func:`transfer_generation_strategy` therefore keeps Ax's
input-space transforms but no outcome transforms; the model's own outcome transform
(BoTorch ``Standardize``, fitted on source and target outcomes together) scales the
data instead. Give the source inputs in the units of the Ax parameters (for
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

from typing import Any

from botorch.models.model import Model
from botorch.models.transforms.outcome import Standardize

try:
    from ax.adapter.registry import Generators, MBM_X_trans
    from ax.core.trial_status import TrialStatus
    from ax.generation_strategy.generation_node import GenerationNode
    from ax.generation_strategy.generation_strategy import GenerationStrategy
    from ax.generation_strategy.generator_spec import GeneratorSpec
    from ax.generation_strategy.transition_criterion import MinTrials
    from ax.generators.torch.botorch_modular.surrogate import ModelConfig, SurrogateSpec
except ImportError as e:  # pragma: no cover - exercised only without Ax
    raise ImportError(
        "botorch_transfer.ax needs Ax: pip install 'botorch_transfer[ax]'"
    ) from e


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
) -> GenerationStrategy:
    r"""Sobol initialization, then BO with a transfer model, for Ax's ``Client``.

    Args:
        botorch_model_class: The model class (see :func:`transfer_model_config`).
        model_options: Its constructor options (the source data / prior).
        initialization_trials: Sobol trials before the model takes over (0: start
            with the model; transfer models can act on source data alone).
        seed: Seed of the Sobol sequence.
        name: Name of the strategy.

    Returns:
        A ``GenerationStrategy``; pass it to ``Client.set_generation_strategy``.
    """
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
                },
            )
        ],
        should_deduplicate=True,
    )
    nodes = [transfer_node]
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
                    transition_to=config.name,
                    not_in_statuses=[TrialStatus.FAILED, TrialStatus.ABANDONED],
                )
            ],
            should_deduplicate=True,
        )
        nodes = [sobol, transfer_node]
    return GenerationStrategy(name=name or f"Sobol+{config.name}", nodes=nodes)
