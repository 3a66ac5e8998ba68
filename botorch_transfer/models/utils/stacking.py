r"""Several GPs of one structure on the same target data, as one batched GP.

A model that holds one transfer GP per source (``RankWeightedTransferGP`` with
``source=[...]``) fits and evaluates them one after another: with a few dozen target
points each fit and each posterior call is mostly fixed overhead, paid once per
source. Stacked along a leading batch dimension of size ``K`` (one entry per source,
as BoTorch batches independent GPs), the ``K`` GPs share one fit and one posterior
call. The math of each entry is unchanged:

- :class:`StackedSourcePosterior` evaluates ``K`` frozen source posteriors, entry
  ``k`` of the batch on source ``k``;
- :func:`stacked_module` builds a module whose parameters are those of ``K``
  modules of one structure, stacked (e.g. the sources' difference kernels, each
  with its own lengthscales);
- :func:`fit_batch_entries` fits each entry's hyperparameters on its own (BoTorch's
  batched L-BFGS-B: one run per entry, as a separate fit of that model runs, with
  all entries evaluated in one call);
- :func:`load_stacked_parameters` and :func:`unstack_parameters` copy
  hyperparameters between the ``K`` models and the batched one (entry ``k`` is
  model ``k``), so that the separate models stay the ones users read, condition
  and rank.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from botorch.optim.batched_lbfgs_b import fmin_l_bfgs_b_batched
from botorch.optim.closures import BatchedNDarrayOptimizationClosure, get_loss_closure
from botorch.optim.utils import get_parameters_and_bounds
from botorch.optim.utils.numpy_utils import get_per_element_bounds
from gpytorch.kernels import Kernel
from gpytorch.means import Mean
from gpytorch.mlls import MarginalLogLikelihood
from torch import Tensor
from torch.nn import Module, Parameter

from botorch_transfer.models.source_posterior import SourcePosterior

#: The modules whose ``batch_shape`` says how their parameters are batched.
_BATCHED = (Kernel, Mean)


class StackedSourcePosterior(SourcePosterior):
    r"""``K`` frozen source posteriors as one, batched along the third-to-last
    dimension of the inputs: entry ``k`` is evaluated on source ``k``.

    Inputs are raw, ``... x K x n x d`` (an entry of size 1 there, or no such
    dimension, is broadcast to ``K``); means come back ``... x K x n`` and
    covariances ``... x K x n x n``. The sources are shared, not copied (they are
    frozen, and belong to the models they come from): a copy of this posterior
    evaluates the same ones. Its own output map (:meth:`set_output_affine`) acts on
    top of theirs.

    Args:
        components: The ``K`` source posteriors, in batch order.
    """

    def __init__(self, components: Sequence[SourcePosterior]) -> None:
        super().__init__()
        if len(components) == 0:
            raise ValueError("`components` must hold at least one source posterior.")
        # a tuple, not a ModuleList: shared with the models they belong to, not
        # part of this posterior's state
        self._components = tuple(components)
        first = self._components[0].output_scale
        self.to(dtype=first.dtype, device=first.device)

    def __deepcopy__(self, memo: dict[int, Any]) -> StackedSourcePosterior:
        for component in self._components:
            memo[id(component)] = component
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new

    @property
    def components(self) -> tuple[SourcePosterior, ...]:
        r"""The source posteriors, in batch order."""
        return self._components

    def _entries(self, X: Tensor) -> list[Tensor]:
        r"""``X`` split into the ``K`` entries of its third-to-last dimension."""
        K = len(self._components)
        if X.dim() == 2:
            X = X.unsqueeze(0)
        if X.shape[-3] not in (1, K):
            raise ValueError(
                f"Inputs of a stack of {K} source posteriors need a dimension of "
                f"size {K} (or 1) before the last two, got shape {tuple(X.shape)}."
            )
        X = X.expand(*X.shape[:-3], K, *X.shape[-2:])
        return list(X.unbind(-3))

    # the base class applies this posterior's own output map to what these give
    def _mean(self, X: Tensor) -> Tensor:
        means = [c.mean(x) for c, x in zip(self._components, self._entries(X))]
        return torch.stack(means, dim=-2)

    def _covariance(self, X1: Tensor, X2: Tensor) -> Tensor:
        parts = [
            c.covariance(x1, x2)
            for c, x1, x2 in zip(self._components, self._entries(X1), self._entries(X2))
        ]
        return torch.stack(parts, dim=-3)

    def _joint_covariance(self, X: Tensor) -> Tensor:
        # each source keeps its own training block (a set of n x d inputs)
        parts = [c.covariance(x) for c, x in zip(self._components, self._entries(X))]
        return torch.stack(parts, dim=-3)

    def _cross_and_own(self, X_fixed: Tensor, X: Tensor) -> tuple[Tensor, Tensor]:
        parts = [
            c.query_covariances(fixed, x)
            for c, fixed, x in zip(
                self._components, self._entries(X_fixed), self._entries(X)
            )
        ]
        cross = torch.stack([cross for cross, _ in parts], dim=-3)
        return cross, torch.stack([own for _, own in parts], dim=-3)

    def _variance(self, X: Tensor) -> Tensor:
        parts = [c.variance(x) for c, x in zip(self._components, self._entries(X))]
        return torch.stack(parts, dim=-2)


def _same_structure(modules: Sequence[Module]) -> bool:
    r"""Whether the modules have one class tree and the same parameter names,
    shapes and trainability (what stacking them needs)."""
    first = modules[0]
    tree = [type(m) for m in first.modules()]
    shapes = [(n, p.shape, p.requires_grad) for n, p in first.named_parameters()]
    return all(
        [type(m) for m in other.modules()] == tree
        and [(n, p.shape, p.requires_grad) for n, p in other.named_parameters()]
        == shapes
        for other in modules[1:]
    )


def stacked_module(modules: Sequence[Module]) -> Module | None:
    r"""A copy of the first module whose parameters are the ``K`` modules'
    stacked along a new leading batch dimension, or ``None`` where the modules do
    not share one structure.

    Every GPyTorch kernel and mean in the copy gets the new dimension in front of
    its ``batch_shape``. The modules must not be batched themselves, and must hold
    no buffer that differs between them (stationary kernels with their priors and
    constraints qualify).

    Args:
        modules: ``K`` modules of one structure (e.g. the sources' difference
            kernels, each with its own lengthscales).

    Returns:
        The batched module, or ``None``.
    """
    if not modules or not _same_structure(modules):
        return None
    buffers = dict(modules[0].named_buffers())
    for module in modules:
        for sub in module.modules():
            if isinstance(sub, _BATCHED) and len(sub.batch_shape) > 0:
                return None
        for name, buffer in module.named_buffers():
            if not torch.equal(buffer, buffers[name]):
                return None
    stacked = copy.deepcopy(modules[0])
    K = len(modules)
    for sub in stacked.modules():
        if isinstance(sub, _BATCHED):
            sub.batch_shape = torch.Size([K, *sub.batch_shape])
    per_module = [dict(m.named_parameters()) for m in modules]
    for name, parameter in list(stacked.named_parameters()):
        owner_name, _, attribute = name.rpartition(".")
        owner = stacked.get_submodule(owner_name) if owner_name else stacked
        values = torch.stack([p[name].detach() for p in per_module])
        owner._parameters[attribute] = Parameter(
            values, requires_grad=parameter.requires_grad
        )
    return stacked


def load_stacked_parameters(batched: Module, models: Sequence[Module]) -> None:
    r"""Set entry ``k`` of every parameter of ``batched`` to model ``k``'s
    parameter of that name (shapes: ``K x s`` against ``s``)."""
    per_model = [dict(m.named_parameters()) for m in models]
    with torch.no_grad():
        for name, parameter in batched.named_parameters():
            parameter.copy_(torch.stack([p[name].detach() for p in per_model]))


def unstack_parameters(batched: Module, models: Sequence[Module]) -> None:
    r"""Set model ``k``'s parameter of each name ``batched`` has to entry ``k`` of
    ``batched``'s (the inverse of :func:`load_stacked_parameters`; a model's other
    parameters, e.g. of a frozen source posterior, are not touched)."""
    per_model = [dict(m.named_parameters()) for m in models]
    with torch.no_grad():
        for name, values in batched.named_parameters():
            for k, parameters in enumerate(per_model):
                parameters[name].copy_(values[k])


def fit_batch_entries(mll: MarginalLogLikelihood) -> list[dict[str, Any]]:
    r"""Fit the hyperparameters of each entry of a batched model on its own.

    Each entry's negative marginal log likelihood is minimized by its own L-BFGS-B
    run with scipy's default settings (those of ``fit_gpytorch_mll`` on one model),
    all entries' values and gradients evaluated in one call of the batched model
    (BoTorch's ``fmin_l_bfgs_b_batched``). Every trainable parameter must be
    batched along the model's ``batch_shape`` (its leading dimensions).

    Args:
        mll: The marginal likelihood of the batched model; left in eval mode.

    Returns:
        Per entry, the L-BFGS-B result (``success``, ``nit``, ``message``, ...).
    """
    parameters, bounds = get_parameters_and_bounds(mll)
    parameters = {n: p for n, p in parameters.items() if p.requires_grad}
    batch_shape = mll.model.batch_shape
    mll.train()
    closure = BatchedNDarrayOptimizationClosure(
        forward=get_loss_closure(mll), parameters=parameters, batch_shape=batch_shape
    )
    x, _, results = fmin_l_bfgs_b_batched(
        func=closure,
        x0=closure.state,
        bounds=get_per_element_bounds(parameters, bounds, batch_shape),
        pass_batch_indices=True,
    )
    closure.state = x
    mll.eval()
    return results
