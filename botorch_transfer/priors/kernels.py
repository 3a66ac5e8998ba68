r"""The kernel of cm-BO's meta-task GPs (Sec. 4.1): outputscale x Matern-3/2 x
Matern-1/2 with ARD lengthscales, as one function (:func:`product_matern`) that the
GPyTorch module :class:`ProductMaternKernel` and the frozen posteriors both call."""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from gpytorch.constraints import Interval, Positive
from gpytorch.kernels import Kernel, ScaleKernel
from gpytorch.priors import LogNormalPrior, Prior
from torch import Tensor
from torch.nn import Parameter


def product_matern(
    x1: Tensor,
    x2: Tensor,
    lengthscale_32: Tensor,
    lengthscale_12: Tensor,
    diag: bool = False,
) -> Tensor:
    r"""Correlation ``M32(r_32) * M12(r_12)`` of the Sec. 4.1 meta-task kernel.

    ``M32(r) = (1 + sqrt(3) r) exp(-sqrt(3) r)`` and ``M12(r) = exp(-r)``, with
    ``r_32`` / ``r_12`` the Euclidean distances of the inputs divided by the
    respective ARD lengthscales. This is the only implementation of the kernel: the
    fitted GPs (:class:`ProductMaternKernel`) and the frozen posteriors
    (:class:`MetaTaskPosteriors`) both call it.

    Distances come from ``torch.cdist`` without the matrix-product shortcut: exact in
    float64 (unlike ``||a||^2 + ||b||^2 - 2ab``, which GPyTorch's Matern kernels
    use), fast, and with finite gradients at ``r = 0`` (the test-test diagonal).

    Args:
        x1: ``batch1 x n1 x d`` inputs.
        x2: ``batch2 x n2 x d`` inputs.
        lengthscale_32: ``batch3 x 1 x d`` Matern-3/2 lengthscales (GPyTorch's
            layout: a leading task dimension here evaluates every task at once).
        lengthscale_12: Matern-1/2 lengthscales, shaped like ``lengthscale_32``.
        diag: Return only the diagonal (``x1`` and ``x2`` hold the same number of
            points).

    Returns:
        ``batch x n1 x n2`` (``batch x n1`` with ``diag``), ``batch`` the broadcast
        of the three batch shapes.
    """

    def dist(lengthscale: Tensor) -> Tensor:
        a, b = x1 / lengthscale, x2 / lengthscale
        if diag:
            return torch.linalg.vector_norm(a - b, dim=-1)
        batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a, b = a.expand(*batch, *a.shape[-2:]), b.expand(*batch, *b.shape[-2:])
        if a.shape[-2] == 0 or b.shape[-2] == 0:
            return a.new_zeros(*batch, a.shape[-2], b.shape[-2])
        return torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")

    r32 = math.sqrt(3) * dist(lengthscale_32)
    return (1 + r32) * torch.exp(-r32 - dist(lengthscale_12))


def _get_lengthscale_32(module: ProductMaternKernel) -> Tensor:
    return module.lengthscale_32


def _set_lengthscale_32(module: ProductMaternKernel, value: Tensor) -> None:
    module._set_lengthscale("lengthscale_32", value)


def _get_lengthscale_12(module: ProductMaternKernel) -> Tensor:
    return module.lengthscale_12


def _set_lengthscale_12(module: ProductMaternKernel, value: Tensor) -> None:
    module._set_lengthscale("lengthscale_12", value)


class ProductMaternKernel(Kernel):
    r"""GPyTorch kernel ``M32(x, x'; l_32) * M12(x, x'; l_12)`` with ARD lengthscales.

    A thin module around :func:`product_matern` (one implementation for fitting and
    for the frozen posteriors). Each lengthscale has GPyTorch's default ``Positive``
    (softplus) constraint, starts at ``softplus(0)`` like ``MaternKernel`` and gets
    its own copy of ``lengthscale_prior``.

    Args:
        ard_num_dims: Input dimension ``d``.
        batch_shape: Batch shape of the hyperparameters (default: none).
        lengthscale_prior: Optional prior on both lengthscales.
        lengthscale_constraint: Constraint of both lengthscales (default
            ``Positive()``).
    """

    has_lengthscale = False

    def __init__(
        self,
        ard_num_dims: int,
        batch_shape: torch.Size | None = None,
        lengthscale_prior: Prior | None = None,
        lengthscale_constraint: Interval | None = None,
    ) -> None:
        batch_shape = torch.Size() if batch_shape is None else torch.Size(batch_shape)
        super().__init__(batch_shape=batch_shape)
        accessors = {
            "lengthscale_32": (_get_lengthscale_32, _set_lengthscale_32),
            "lengthscale_12": (_get_lengthscale_12, _set_lengthscale_12),
        }
        for name, (getter, setter) in accessors.items():
            raw = Parameter(torch.zeros(*batch_shape, 1, ard_num_dims))
            self.register_parameter(f"raw_{name}", raw)
            # each lengthscale gets its own constraint / prior module (as with two
            # MaternKernels)
            constraint = copy.deepcopy(lengthscale_constraint or Positive())
            self.register_constraint(f"raw_{name}", constraint)
            if lengthscale_prior is not None:
                prior = copy.deepcopy(lengthscale_prior)
                self.register_prior(f"{name}_prior", prior, getter, setter)

    @property
    def lengthscale_32(self) -> Tensor:
        r"""Matern-3/2 lengthscales, ``batch_shape x 1 x d``."""
        return self.raw_lengthscale_32_constraint.transform(self.raw_lengthscale_32)

    @lengthscale_32.setter
    def lengthscale_32(self, value: Tensor | float) -> None:
        self._set_lengthscale("lengthscale_32", value)

    @property
    def lengthscale_12(self) -> Tensor:
        r"""Matern-1/2 lengthscales, ``batch_shape x 1 x d``."""
        return self.raw_lengthscale_12_constraint.transform(self.raw_lengthscale_12)

    @lengthscale_12.setter
    def lengthscale_12(self, value: Tensor | float) -> None:
        self._set_lengthscale("lengthscale_12", value)

    def _set_lengthscale(self, name: str, value: Tensor | float) -> None:
        raw = getattr(self, f"raw_{name}")
        value = torch.as_tensor(value).to(raw)
        constraint = getattr(self, f"raw_{name}_constraint")
        self.initialize(**{f"raw_{name}": constraint.inverse_transform(value)})

    def forward(
        self, x1: Tensor, x2: Tensor, diag: bool = False, **params: Any
    ) -> Tensor:
        return product_matern(
            x1, x2, self.lengthscale_32, self.lengthscale_12, diag=diag
        )


def meta_task_kernel(d: int, batch_shape: torch.Size) -> ScaleKernel:
    r"""The Sec. 4.1 kernel: outputscale x Matern-3/2 x Matern-1/2 (ARD).

    Both lengthscales get BoTorch's dimension-scaled log-normal prior.

    Args:
        d: Input dimension.
        batch_shape: Batch shape of the hyperparameters.

    Returns:
        ``ScaleKernel(ProductMaternKernel)``.
    """
    prior = LogNormalPrior(loc=math.sqrt(2) + 0.5 * math.log(d), scale=math.sqrt(3))
    base = ProductMaternKernel(d, batch_shape=batch_shape, lengthscale_prior=prior)
    return ScaleKernel(base, batch_shape=batch_shape)
