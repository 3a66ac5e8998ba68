r"""Ax's task column on the inputs of the source-conditioned GPs.

Ax's transfer-learning path (``TransferLearningAdapter``) hands a model a
``MultiTaskDataset`` whose inputs carry a task column, and queries the model in that
layout: the target's ``d`` inputs, the parameters only source experiments have
(those without a ``backfill_value``) and the task column. The models themselves work
on the target's ``d`` inputs. :class:`TaskColumnMixin` gives
:class:`~botorch_transfer.models.base.SourceConditionedGP` what it needs for Ax's
layout: the layout's width and task column, the reduction of query inputs to the
``d`` inputs, and the ``construct_inputs`` route for a ``MultiTaskDataset``;
:func:`on_target_inputs` restricts an input transform Ax built over the layout to
the ``d`` inputs. :class:`TaskColumn` is that layout as a model's constructor takes
it (``construct_inputs`` builds it from a ``MultiTaskDataset``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from botorch.models.model import Model
from botorch.models.transforms.input import (
    ChainedInputTransform,
    InputTransform,
    LearnedFeatureImputation,
    Normalize,
)
from botorch.utils.datasets import MultiTaskDataset, SupervisedDataset
from torch import Tensor

from botorch_transfer._deprecation import user_stacklevel
from botorch_transfer.models.utils.datasets import split_multitask_dataset

#: The constructor arguments :class:`TaskColumn` replaces (deprecated).
OLD_TASK_COLUMN_ARGUMENTS = (
    "task_feature",
    "target_task_value",
    "source_only_features",
)


@dataclass(frozen=True)
class TaskColumn:
    r"""Where query inputs on Ax's transfer-learning path carry a task column, and
    what else they carry besides the target's ``d`` inputs.

    A model given one drops the extra columns from every ``X`` of ``posterior`` and
    ``condition_on_observations``, and restricts an input transform built over the
    whole layout (Ax's ``Normalize``) to the ``d`` inputs; ``train_X`` has the ``d``
    inputs only. ``construct_inputs`` builds it from a ``MultiTaskDataset``.

    Attributes:
        index: The task column's index in a query (``-1``: the last column).
        target_value: The target task's value in that column: queries with another
            value are refused (``None``: not checked).
        source_only_features: How many columns for parameters that only the source
            experiments have (Ax puts them after the target's inputs, before the
            task column, which is then last: ``index=-1``).

    Example:
        >>> column = TaskColumn(index=-1, target_value=0.0)
        >>> source = TaskData(X_src, Y_src)
        >>> model = DeltaBOModel(X, Y, source=source, task_column=column)
        >>> queries = torch.cat([X_test, torch.zeros(5, 1, dtype=X_test.dtype)], -1)
        >>> post = model.posterior(queries)  # at the target task's d inputs
    """

    index: int
    target_value: float | None = None
    source_only_features: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.index, bool) or not isinstance(self.index, int):
            raise TypeError(f"`index` must be an int, got {self.index!r}.")
        extra = self.source_only_features
        if isinstance(extra, bool) or not isinstance(extra, int) or extra < 0:
            raise ValueError(
                f"`source_only_features` must be an int >= 0, got {extra!r}."
            )

    def on_target_inputs(
        self, input_transform: InputTransform | None, d: int
    ) -> InputTransform | None:
        r"""``input_transform``, built over this query layout (Ax's ``Normalize``),
        on the target's ``d`` inputs (see
        :func:`~botorch_transfer.models.task_column.on_target_inputs`)."""
        if input_transform is None:
            return None
        width = d + self.source_only_features + 1
        columns = [i for i in range(width) if i != self.index % width][:d]
        return on_target_inputs(input_transform, columns, width)


def task_column_argument(
    owner: str, task_column: TaskColumn | None, given: Mapping[str, Any]
) -> TaskColumn | None:
    r"""A constructor's ``task_column``, taking the deprecated ``task_feature``,
    ``target_task_value`` and ``source_only_features`` (with a
    ``DeprecationWarning``) from ``given``, its further keyword arguments.

    Args:
        owner: The class whose constructor it is (for the messages).
        task_column: Its ``task_column`` argument.
        given: Its ``**kwargs``.

    Returns:
        The task column.

    Raises:
        TypeError: For a keyword in ``given`` that is none of the old ones.
    """
    rest = sorted(k for k in given if k not in OLD_TASK_COLUMN_ARGUMENTS)
    if rest:
        raise TypeError(f"{owner}() got unexpected keyword arguments {rest}.")
    old = dict(given)
    if not old:
        if task_column is not None and not isinstance(task_column, TaskColumn):
            raise TypeError(
                f"`task_column` must be a TaskColumn or None, got {task_column!r}."
            )
        return task_column
    warnings.warn(
        f"{', '.join(f'`{k}`' for k in old)} of {owner} "
        f"{'is' if len(old) == 1 else 'are'} deprecated and will be removed in the "
        "next release: pass task_column=TaskColumn(index, target_value, "
        "source_only_features).",
        DeprecationWarning,
        stacklevel=user_stacklevel(),
    )
    if task_column is not None:
        raise TypeError(f"Give `task_column` only, not also {sorted(old)}.")
    if old.get("task_feature") is None:
        if old.get("source_only_features", 0):
            raise ValueError(
                "`source_only_features` needs a task column last in the query "
                "layout (`task_feature=-1`)."
            )
        return None
    column = TaskColumn(
        old["task_feature"],
        old.get("target_task_value"),
        old.get("source_only_features", 0),
    )
    return column


class TaskColumnMixin:
    r"""Ax's query layout on a model over the target's ``d`` inputs.

    A class using it calls :meth:`_set_task_column` in its ``__init__`` (with the
    ``task_feature``, ``target_task_value`` and ``source_only_features`` arguments
    of :class:`~botorch_transfer.models.base.SourceConditionedGP`), passes query
    inputs through :meth:`strip_task_feature`, and routes a ``MultiTaskDataset``
    in ``construct_inputs`` to :func:`construct_inputs_from_multitask`.
    """

    @classmethod
    def construct_inputs(
        cls, training_data: SupervisedDataset | MultiTaskDataset, **kwargs: Any
    ) -> dict[str, Any]:
        r"""Constructor arguments from the training data plus the model's options.

        Two routes:

        - a ``SupervisedDataset`` of the target task, with the transfer input in
          ``kwargs`` (``source=`` or ``prior=``, see ``transfer_argument``), e.g. from
          Ax's ``model_options``;
        - a ``MultiTaskDataset`` as Ax's ``TransferLearningAdapter`` builds it from
          the auxiliary experiments: the dataset named ``target_outcome_name`` is
          the target, every other task value of the task column is a source. The
          task column is dropped from all inputs, the sources become ``TaskData``
          (``source=[...]``), and ``task_feature``/``target_task_value`` let the
          model accept Ax's queries, which carry the task column.

        Args:
            training_data: The target data, or the target and source data.
            kwargs: The transfer input and further constructor options.

        Returns:
            Keyword arguments for ``cls(**inputs)``.

        Example:
            >>> inputs = DeltaBOModel.construct_inputs(mt_dataset)
            >>> model = DeltaBOModel(**inputs)
        """
        return construct_transfer_inputs(cls, training_data, **kwargs)

    def _set_task_column(
        self, d: int, task_column: TaskColumn | None, input_transform: Any
    ) -> InputTransform | None:
        r"""Store the query layout and restrict an input transform built over it.

        Args:
            d: The number of the target's inputs.
            task_column: The layout (``None``: queries have the ``d`` inputs).
            input_transform: The model's input transform, or ``None``.

        Returns:
            ``input_transform`` on the ``d`` inputs (see :func:`on_target_inputs`).
        """
        self.task_column = task_column
        if task_column is None:
            self._task_feature, self._target_task_value = None, None
            self._query_width, self._extra_columns = d + 1, 0
            return input_transform
        extra = task_column.source_only_features
        width = d + extra + 1
        index = task_column.index
        if not -width <= index < width:
            raise ValueError(
                f"`task_column.index` {index} is outside the query layout of {width} "
                f"columns ({d} inputs, {extra} source-only, the task column)."
            )
        if extra and index not in (-1, width - 1):
            raise ValueError(
                "`task_column.source_only_features` needs the task column last in "
                f"the query layout (index -1); got index {index}."
            )
        self._task_feature = index
        self._target_task_value = task_column.target_value
        self._query_width = width
        self._extra_columns = extra
        return task_column.on_target_inputs(input_transform, d)

    def strip_task_feature(self, X: Tensor, name: str = "X") -> Tensor:
        r"""Reduce query inputs in Ax's layout to the ``d`` inputs (Ax's
        transfer-learning path appends a task column, and for parameters only the
        sources have, columns that it fills when it predicts, but not when it
        generates; see :class:`TaskColumn`)."""
        d = self._query_width - 1 - self._extra_columns
        if self._task_feature is None or X.dim() < 2:
            return X
        if X.shape[-1] not in (d + 1, self._query_width):
            return X
        column = self._task_feature % X.shape[-1]
        if self._target_task_value is not None:
            task = X[..., column]
            if not (task == self._target_task_value).all():
                raise ValueError(
                    f"`{name}` has task values {task.unique().tolist()} in its task "
                    f"column {column}; {type(self).__name__} predicts the target task "
                    f"({self._target_task_value}) only."
                )
        others = [i for i in range(X.shape[-1]) if i != column]
        return X[..., others[:d]]


def construct_inputs_from_multitask(
    model_class: type, training_data: MultiTaskDataset, **kwargs: Any
) -> dict[str, Any]:
    r"""``construct_inputs`` of a source-conditioned model class for a
    ``MultiTaskDataset`` (Ax's transfer-learning path): the target's dataset goes to
    ``model_class.construct_inputs``, the source tasks become its transfer argument
    (``model_class.transfer_argument``) as ``TaskData``, and the task column and the
    source-only parameters set the query layout (see :class:`TaskColumnMixin`).

    Args:
        model_class: The model class whose inputs are built.
        training_data: The target and source tasks.
        kwargs: Further constructor options (not the sources again).

    Returns:
        Keyword arguments for ``model_class(**inputs)``.
    """
    cls = model_class
    target, sources, column, target_value = split_multitask_dataset(training_data)
    if sources and cls.transfer_argument != "source":
        raise ValueError(
            f"{cls.__name__} transfers through `{cls.transfer_argument}=`, not "
            f"source tasks; got a MultiTaskDataset with {len(sources)} source "
            "task(s). Use a source-conditioned model (e.g. DeltaBOModel) or a "
            "SupervisedDataset of the target."
        )
    if sources and kwargs.get(cls.transfer_argument) is not None:
        raise ValueError(
            f"{cls.__name__} got source tasks twice: in the MultiTaskDataset "
            f"`training_data` ({len(sources)} source task(s)) and as "
            f"`{cls.transfer_argument}=`. Give them one way: attach the sources "
            "to the Ax experiment, or pass them in `model_options`."
        )
    if sources:
        kwargs[cls.transfer_argument] = sources
    inputs = cls.construct_inputs(training_data=target, **kwargs)
    if inputs.get("task_column") is None:
        extra = 0
        if training_data.has_heterogeneous_features:
            names = {
                n for ds in training_data.datasets.values() for n in ds.feature_names
            }
            # the union of all parameters, less the target's and the task column
            extra = len(names) - len(target.feature_names) - 1
            # Ax's layout: the target's inputs, the source-only ones, the task last
            column = -1
        inputs["task_column"] = TaskColumn(column, target_value, extra)
    return inputs


def construct_transfer_inputs(
    model_class: type,
    training_data: SupervisedDataset | MultiTaskDataset,
    **kwargs: Any,
) -> dict[str, Any]:
    r"""``construct_inputs`` of a source-conditioned model class, by the kind of
    ``training_data``:

    - a ``SupervisedDataset`` of the target task: BoTorch's ``train_X``,
      ``train_Y`` (and ``train_Yvar``) plus ``kwargs``, which must hold the transfer
      input (``model_class.transfer_argument``, e.g. from Ax's ``model_options``);
    - a ``MultiTaskDataset`` (Ax's transfer-learning path): see
      :func:`construct_inputs_from_multitask`.

    Args:
        model_class: The model class whose inputs are built.
        training_data: The target data, or the target and source data.
        kwargs: The transfer input and further constructor options.

    Returns:
        Keyword arguments for ``model_class(**inputs)``.

    Raises:
        ValueError: If ``training_data`` is a ``SupervisedDataset`` and ``kwargs``
            has no transfer input.
    """
    if isinstance(training_data, MultiTaskDataset):
        return construct_inputs_from_multitask(model_class, training_data, **kwargs)
    argument = model_class.transfer_argument
    if kwargs.get(argument) is None:
        raise ValueError(
            f"{model_class.__name__} needs `{argument}=`, and its training data "
            "hold the target task only. Through Ax's transfer-learning strategy "
            "this means that no attached experiment contributed data: each "
            "auxiliary experiment needs completed trials with data for the "
            "target's objective metric (the same metric name). Outside it, pass "
            f"`{argument}=` in Ax's `model_options`."
        )
    return {**Model.construct_inputs(training_data=training_data), **kwargs}


def on_target_inputs(
    transform: InputTransform, columns: list[int], width: int
) -> InputTransform | None:
    r"""An input transform over the target's ``d`` inputs from one Ax built over its
    query layout (``width`` columns; the target's inputs are ``columns``).

    Ax builds a ``Normalize`` over the layout (all columns but the task column); it
    is restricted to ``columns``. With source-only parameters Ax adds a
    ``LearnedFeatureImputation`` for them, which has nothing to do here (the
    sources are used on the target's parameters) and is dropped. Other transforms
    are returned unchanged.
    """
    if isinstance(transform, ChainedInputTransform):
        kept = [
            on_target_inputs(t, columns, width)
            for t in transform.values()
            if not isinstance(t, LearnedFeatureImputation)
        ]
        if len(kept) == 1:
            return kept[0]
        return ChainedInputTransform(**{f"tf{i}": t for i, t in enumerate(kept)})
    if not isinstance(transform, Normalize) or transform._d != width:
        return transform
    # a Normalize over all inputs has no `indices` attribute at all
    given = getattr(transform, "indices", None)
    indices = list(range(width)) if given is None else given.tolist()
    kept = [p for p, i in enumerate(indices) if i in columns]
    new_indices = [columns.index(indices[p]) for p in kept]
    d = len(columns)
    # undo the centre shift Normalize folds into its offset
    coefficient = transform.coefficient.detach()
    lower = transform.offset.detach() - (0.5 - transform.center) * coefficient
    bounds = torch.cat([lower, lower + coefficient], dim=-2)
    restricted = Normalize(
        d=d,
        # all inputs: no indices, as a plain `Normalize(d)` (same state_dict keys)
        indices=None if new_indices == list(range(d)) else new_indices,
        bounds=bounds[..., kept].clone(),
        batch_shape=transform.batch_shape,
        transform_on_train=transform.transform_on_train,
        transform_on_eval=transform.transform_on_eval,
        transform_on_fantasize=transform.transform_on_fantasize,
        reverse=transform.reverse,
        min_range=transform.min_range,
        learn_bounds=transform.learn_coefficients,
        center=transform.center,
    )
    return restricted.to(bounds)
