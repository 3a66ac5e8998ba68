r"""The sources a transfer model takes: one or a list of ``TaskData``, fitted BoTorch
models or ``SourcePosterior`` objects, checked against the target's inputs."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import torch
from botorch.models.model import Model
from gpytorch.module import Module as GPyTorchModule
from torch import Tensor

from botorch_transfer.data import TaskData
from botorch_transfer.models.source_posterior import (
    GPSourcePosterior,
    ModelSourcePosterior,
    SourcePosterior,
    SumSourcePosterior,
)
from botorch_transfer.validation import UntrainedSourceWarning

#: What to do with a source on other parameters than the target's.
OTHER_PARAMETERS_HINT = (
    "For a source with other parameters, name its columns (`TaskData.feature_names`) "
    "and map them onto the target's with `align_source`."
)

__all__ = [
    "OTHER_PARAMETERS_HINT",
    "as_source_list",
    "check_source",
    "looks_untrained",
    "own_copy",
    "source_input_dim",
]


def as_source_list(source: Any, train_X: Tensor, allow_models: bool = True) -> list:
    r"""Normalize ``source`` to a non-empty list and check it against the target.

    Args:
        source: One source or a list/tuple of them.
        train_X: The target inputs (for ``d``, dtype).
        allow_models: Whether the first source may be a fitted ``Model`` or a
            ``SourcePosterior`` (otherwise only ``TaskData`` are accepted).

    Returns:
        The list of sources (``TaskData`` copied, see :func:`own_copy`).
    """
    if source is None:
        raise TypeError(
            "`source` is required: a TaskData, a fitted model or a list of them."
        )
    sources = list(source) if isinstance(source, (list, tuple)) else [source]
    if len(sources) == 0:
        raise ValueError(
            "`source` must contain at least one source, got an empty list."
        )
    allowed = (TaskData, Model, SourcePosterior) if allow_models else (TaskData,)
    for i, s in enumerate(sources):
        if not isinstance(s, allowed):
            expected = (
                "a TaskData, a fitted BoTorch Model or a SourcePosterior"
                if allow_models
                else "a TaskData"
            )
            raise TypeError(
                f"`source[{i}]` must be {expected}, got {type(s).__name__}."
            )
        if i > 0 and not isinstance(s, TaskData):
            raise TypeError(
                f"`source[{i}]` is a {type(s).__name__}: only the first source may be "
                "a fitted model; later sources are TaskData modelled as residuals of "
                "the stack before them. To stack fitted models, pass a fitted "
                "DeltaBOModel."
            )
        check_source(s, train_X, f"source[{i}]")
    return [own_copy(s) for s in sources]


def own_copy(source: Any) -> Any:
    r"""A ``TaskData`` with its own tensors (its data changed in place later stay
    out of a model built on it); other sources as they are."""
    return dataclasses.replace(source) if isinstance(source, TaskData) else source


def check_source(source: Any, train_X: Tensor, name: str = "source") -> None:
    r"""Check one source against the target inputs.

    A ``TaskData`` must have observations and ``train_X``'s ``d``, dtype and device.
    A model or ``SourcePosterior`` must have ``train_X``'s ``d`` where its training
    inputs tell it; a model whose hyperparameters are all still at their initial
    values triggers an :class:`UntrainedSourceWarning` (it would be used as is).

    Args:
        source: A ``TaskData``, BoTorch ``Model`` or ``SourcePosterior``.
        train_X: The target inputs.
        name: The source's name in messages (e.g. ``"source[0]"``).
    """
    dim = train_X.shape[-1]
    if isinstance(source, TaskData):
        if source.n == 0:
            raise ValueError(
                f"`{name}` has no observations (n=0); a source task needs at least "
                "one. Leave it out of `source`."
            )
        if source.d != dim:
            raise ValueError(
                f"`{name}` has input dimension d={source.d} but `train_X` has "
                f"d={dim}; source and target must share the input space. "
                f"{OTHER_PARAMETERS_HINT}"
            )
        if source.X.dtype != train_X.dtype:
            raise TypeError(
                f"`{name}` has dtype {source.X.dtype} but `train_X` has "
                f"{train_X.dtype}; use one dtype for source and target data."
            )
        if source.X.device != train_X.device:
            raise ValueError(
                f"`{name}` is on {source.X.device} but `train_X` on {train_X.device}."
            )
        return
    source_dim = source_input_dim(source)
    if source_dim is not None and source_dim != dim:
        raise ValueError(
            f"`{name}` is a {type(source).__name__} on d={source_dim} inputs but "
            f"`train_X` has d={dim}; source and target must share the input space."
        )
    if isinstance(source, Model) and looks_untrained(source):
        warnings.warn(
            f"`{name}` ({type(source).__name__}) looks untrained: all its "
            "hyperparameters are at their initial values. It is used as is (frozen); "
            "fit it first (e.g. fit_gpytorch_mll), or pass its data as a TaskData "
            "to have it fitted.",
            UntrainedSourceWarning,
            stacklevel=3,
        )


def source_input_dim(source: Any) -> int | None:
    r"""The raw input dimension of a source model or posterior, or ``None`` where
    its training inputs do not tell it."""
    if isinstance(source, GPSourcePosterior):
        return source.train_inputs.shape[-1]
    if isinstance(source, ModelSourcePosterior):
        return source_input_dim(source.model)
    if isinstance(source, SumSourcePosterior):
        return source_input_dim(source.components[0])
    if hasattr(source, "models"):  # ModelListGP and other model lists
        dims = {source_input_dim(m) for m in source.models} - {None}
        return dims.pop() if len(dims) == 1 else None
    # BoTorch keeps the raw inputs aside while `train_inputs` hold transformed ones
    raw = getattr(source, "_original_train_inputs", None)
    if raw is None:
        train_inputs = getattr(source, "train_inputs", None)
        if isinstance(train_inputs, (tuple, list)) and train_inputs:
            raw = train_inputs[0]
        elif isinstance(train_inputs, Tensor):
            raw = train_inputs
    if raw is None:
        raw = getattr(source, "train_X", None)
    if isinstance(raw, Tensor) and raw.dim() >= 2:
        return raw.shape[-1]
    return None


def looks_untrained(model: torch.nn.Module) -> bool:
    r"""Whether every GPyTorch hyperparameter of ``model`` is at its initial value.

    The initial value of a raw hyperparameter is its constraint's ``initial_value``
    (BoTorch's priors' modes) or 0 (GPyTorch's default). A fitted model, or one whose
    hyperparameters were set by hand, has some other value. Models without such
    hyperparameters (e.g. neural networks) are never reported.
    """
    found = False
    for module in model.modules():
        if not isinstance(module, GPyTorchModule):
            continue
        for name, param in module.named_parameters(recurse=False):
            constraint = module._constraints.get(f"{name}_constraint")
            initial = None if constraint is None else constraint.initial_value
            if initial is None:
                initial = torch.zeros((), dtype=param.dtype, device=param.device)
            try:
                at_initial = torch.equal(
                    param.detach(), initial.to(param).expand_as(param)
                )
            except RuntimeError:  # an initial value of another shape
                return False
            if not at_initial:
                return False
            found = True
    return found
