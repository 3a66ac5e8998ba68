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

Source experiments may have other parameters than the target: a target parameter
a source lacks is filled with its ``backfill_value`` (Ax's ``FillMissingParameters``),
a parameter only the source has is marginalized, and each trial's
``gen_metadata["source_parameters"]`` says which (:func:`source_parameter_roles`).
Outside Ax, :func:`~botorch_transfer.models.align_source` does the same by name and
can also condition a source on the target's value of its own parameter.

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

import importlib.util

if importlib.util.find_spec("ax") is None:  # pragma: no cover - only without Ax
    raise ImportError(
        "botorch_transfer.ax needs Ax: pip install 'botorch_transfer[ax]'"
    )

from botorch_transfer.ax import fitting  # noqa: F401  (registers the models' fits)
from botorch_transfer.ax.data import task_data_from_dataframe, task_data_from_experiment
from botorch_transfer.ax.nodes import (
    TransferGenerationNode,
    TransferGeneratorSpec,
    TransferModelUnusedError,
    TransferModelUnusedWarning,
)
from botorch_transfer.ax.parameters import source_parameter_roles
from botorch_transfer.ax.strategies import (
    check_model_options,
    device_generator_kwargs,
    transfer_generation_strategy,
    transfer_learning_generation_strategy,
    transfer_model_config,
    with_sobol_initialization,
)

__all__ = [
    "TransferGenerationNode",
    "TransferGeneratorSpec",
    "TransferModelUnusedError",
    "TransferModelUnusedWarning",
    "check_model_options",
    "device_generator_kwargs",
    "source_parameter_roles",
    "task_data_from_dataframe",
    "task_data_from_experiment",
    "transfer_generation_strategy",
    "transfer_learning_generation_strategy",
    "transfer_model_config",
    "with_sobol_initialization",
]
