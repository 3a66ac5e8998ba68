r"""Ax's multi-task training data as the target's data and the source tasks.

:func:`split_multitask_dataset` turns a ``MultiTaskDataset`` (as Ax's
``TransferLearningAdapter`` builds it from the auxiliary experiments) into what the
source-conditioned models take: the target's ``SupervisedDataset`` and one
:class:`~botorch_transfer.data.TaskData` per source task, without the task column.
"""

from __future__ import annotations

import warnings

from botorch.utils.datasets import MultiTaskDataset, SupervisedDataset

from botorch_transfer.data import TaskData


def split_multitask_dataset(
    dataset: MultiTaskDataset,
) -> tuple[SupervisedDataset, list[TaskData], int, float | None]:
    r"""Split a ``MultiTaskDataset`` into the target data and the source tasks.

    The target is the dataset named ``target_outcome_name``; every other task value
    of the task column (in any of the datasets) is one source task. The task column
    is dropped from all inputs.

    Args:
        dataset: E.g. the dataset Ax's ``TransferLearningAdapter`` builds (task
            column last, target task value 0, one dataset per source experiment).

    Returns:
        The target ``SupervisedDataset`` (without the task column), the sources as
        ``TaskData`` named after their dataset (and task value if a dataset holds
        several), the non-negative index of the task column, and the target's task
        value (``None`` when the target has no observations).

    A source with parameters the target does not have (in Ax: a source
    experiment's parameter without a ``backfill_value``, so that Ax hands over
    per-task feature sets) is used on the target's parameters only: its variation
    in the others is averaged over, i.e. counts as noise of the source. A
    ``UserWarning`` names those parameters. (Ax's ``MultiTaskGP`` instead imputes a
    learned value for them on the target, ``LearnedFeatureImputation``.)

    Raises:
        ValueError: If the dataset has no task column, a source lacks one of the
            target's parameters, or a source row has the target's task value.

    Example:
        >>> target, sources, column, value = split_multitask_dataset(mt_dataset)
    """
    if dataset.task_feature_index is None:
        raise ValueError(
            "`training_data` is a MultiTaskDataset without a task column "
            "(`task_feature_index` is None); cannot tell target from sources."
        )
    name = dataset.target_outcome_name
    target_full = dataset.datasets[name]
    column = dataset.task_feature_index % len(target_full.feature_names)
    values = target_full.X[:, column].unique()
    if values.numel() > 1:
        raise ValueError(
            f"`training_data`: the target dataset {name!r} has several task values "
            f"{values.tolist()} in its task column {column}."
        )
    target_value = float(values[0]) if values.numel() == 1 else None
    target = dataset.get_dataset_without_task_feature(name)
    target_names = [n for i, n in enumerate(target_full.feature_names) if i != column]
    sources = []
    for source_name, data in dataset.datasets.items():
        if source_name == name:
            continue
        task = dataset.task_feature_index % len(data.feature_names)
        keep = _target_columns(source_name, data.feature_names, task, target_names)
        task_values = data.X[:, task].unique()
        for value in task_values.tolist():
            if value == target_value:
                raise ValueError(
                    f"`training_data`: dataset {source_name!r} has rows with the "
                    f"target's task value {value}."
                )
            rows = data.X[:, task] == value
            label = source_name if len(task_values) == 1 else f"{source_name}[{value}]"
            sources.append(
                TaskData(
                    X=data.X[rows][:, keep],
                    Y=data.Y[rows],
                    Yvar=None if data.Yvar is None else data.Yvar[rows],
                    name=label,
                )
            )
    return target, sources, column, target_value


def _target_columns(
    source_name: str, names: list[str], column: int, target_names: list[str]
) -> list[int]:
    r"""The columns of a source dataset (feature ``names``, task column ``column``)
    that hold the target's parameters, in the target's order."""
    source_names = [n for i, n in enumerate(names) if i != column]
    missing = [n for n in target_names if n not in source_names]
    if missing:
        raise ValueError(
            f"`training_data`: source task {source_name!r} lacks the target's "
            f"parameter(s) {missing}; the source-conditioned models need every "
            "source on the target's parameters. In Ax, give them a `backfill_value` "
            "(or the experiments a status quo) so that FillMissingParameters fills "
            "them."
        )
    extra = [n for n in source_names if n not in target_names]
    if extra:
        warnings.warn(
            f"Source task {source_name!r} has parameter(s) {extra} that the target "
            "does not have; it is used on the target's parameters, averaging over "
            f"{extra} (their effect counts as source noise).",
            UserWarning,
            stacklevel=3,
        )
    return [names.index(n) for n in target_names]
