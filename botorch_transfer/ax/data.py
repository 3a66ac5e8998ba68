r"""Past evaluations (a DataFrame, a finished Ax experiment) as source tasks."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch
from ax.core.experiment import Experiment

from botorch_transfer.data import TaskData


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
        A ``TaskData`` whose ``feature_names`` are ``parameter_names``.

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
    return TaskData(X, Y, Yvar, name=name, feature_names=parameter_names)


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
        A ``TaskData`` named after the experiment, its ``feature_names`` the
        parameters' names.

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
