r"""The kernel of a transfer model's difference ``delta``, shaped by the source GP.

A difference ``delta = f - (a g + c)`` shares the source kernel's shape (its
lengthscales, fitted on the many source points) and fits its own amplitude on the
target. Along an input the source never varied (a parameter it ran at one value,
e.g. a source aligned onto the target's parameters with that parameter filled in),
the source's data say nothing about the lengthscale: its fit leaves it where the
prior puts it. There the difference gets a lengthscale of its own, fitted on the
target with BoTorch's prior for the target's dimension.
"""

from __future__ import annotations

import copy
import math

from botorch.models import SingleTaskGP
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import Kernel, MaternKernel, RBFKernel, ScaleKernel
from gpytorch.priors import GammaPrior, LogNormalPrior
from torch import Tensor


def constant_columns(train_X: Tensor) -> list[int]:
    r"""The columns of ``n x d`` inputs that hold one value (none for ``n < 2``)."""
    if train_X.shape[-2] < 2:
        return []
    flat = train_X.reshape(-1, train_X.shape[-1])
    return [j for j in range(flat.shape[-1]) if bool((flat[:, j] == flat[0, j]).all())]


def _frozen(kernel: Kernel) -> Kernel:
    for p in kernel.parameters():
        p.requires_grad_(False)
    return kernel


def _restricted(kernel: Kernel, dims: list[int]) -> Kernel | None:
    r"""A frozen copy of an ARD RBF or Matern ``kernel`` on ``dims`` of its inputs
    only (its lengthscales there); ``None`` for another kernel."""
    stationary = isinstance(kernel, (RBFKernel, MaternKernel))
    if stationary and kernel.active_dims is not None:
        if set(kernel.active_dims.tolist()) <= set(dims):  # already off the others
            return _frozen(copy.deepcopy(kernel))
        return None
    if not stationary:
        return None
    lengthscale = kernel.lengthscale.detach()
    if lengthscale.shape[-1] == 1 or lengthscale.dim() > 2:  # not ARD, or batched
        return None
    if isinstance(kernel, MaternKernel):
        shape = MaternKernel(nu=kernel.nu, ard_num_dims=len(dims), active_dims=dims)
    else:
        shape = RBFKernel(ard_num_dims=len(dims), active_dims=dims)
    shape = shape.to(lengthscale)
    shape.lengthscale = lengthscale[..., dims]
    return _frozen(shape)


def difference_kernel(source_gp: SingleTaskGP, dim: int) -> ScaleKernel:
    r"""The difference's kernel: ``s^2 k_shape``, ``k_shape`` the source kernel
    frozen, ``s^2`` fitted (prior ``Gamma(2, 4)``).

    Where the source's inputs hold one value in some columns and its kernel is an
    ARD RBF or Matern kernel (BoTorch's default), ``k_shape`` is the source kernel
    on the other columns times an RBF kernel on those, whose lengthscales are
    fitted on the target (BoTorch's prior for ``dim`` inputs).

    Args:
        source_gp: The fitted source GP (its kernel and training inputs).
        dim: The number of target inputs.

    Returns:
        The kernel, on the source GP's device and dtype.
    """
    train_X = source_gp.train_inputs[0]
    constant = constant_columns(train_X)
    varying = [j for j in range(train_X.shape[-1]) if j not in constant]
    shape = None
    if constant and varying:
        shape = _restricted(source_gp.covar_module, varying)
    if shape is None:
        shape = _frozen(copy.deepcopy(source_gp.covar_module))
    else:
        # BoTorch's dim-scaled lengthscale prior (as the target-only GP's), started
        # at its mode
        prior = LogNormalPrior(math.sqrt(2) + math.log(dim) / 2, math.sqrt(3))
        own = RBFKernel(
            ard_num_dims=len(constant),
            active_dims=constant,
            lengthscale_prior=prior,
            lengthscale_constraint=GreaterThan(
                2.5e-2, transform=None, initial_value=prior.mode
            ),
        ).to(train_X)
        shape = shape * own
    return ScaleKernel(shape, outputscale_prior=GammaPrior(2.0, 4.0)).to(train_X)
