r"""The difference's kernel: the source kernel's shape, and a lengthscale of its own
along the inputs the source never varied; values against the RBF written out."""

import math

import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer import RankWeightedTransferGP, TaskData
from botorch_transfer.models.utils.difference_kernel import (
    constant_columns,
    difference_kernel,
)

F64 = torch.float64


def _source_gp(X, seed=0):
    gen = torch.Generator().manual_seed(seed)
    Y = torch.sin(3 * X[:, :1]) + 0.1 * torch.randn(len(X), 1, generator=gen, dtype=F64)
    gp = SingleTaskGP(X, Y)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp))
    return gp


def _source_inputs(n=30, constant=(), value=0.3, seed=0):
    X = torch.rand(n, 3, generator=torch.Generator().manual_seed(seed), dtype=F64)
    for j in constant:
        X[:, j] = value
    return X


def _rbf(x1, x2, lengthscales):
    r"""``exp(-sum_i (x1_i - x2_i)^2 / (2 l_i^2))``, one pair at a time."""
    out = torch.empty(len(x1), len(x2), dtype=F64)
    for a in range(len(x1)):
        for b in range(len(x2)):
            z = sum(((x1[a, i] - x2[b, i]) / ls) ** 2 for i, ls in lengthscales.items())
            out[a, b] = math.exp(-0.5 * float(z))
    return out


def test_constant_columns_are_those_with_one_value():
    X = _source_inputs(constant=(0, 2))
    assert constant_columns(X) == [0, 2]
    assert constant_columns(_source_inputs()) == []
    assert constant_columns(X[:1]) == []  # one point: nothing is known to be fixed


def test_without_a_constant_column_it_is_the_source_kernel_frozen_and_scaled():
    gp = _source_gp(_source_inputs())
    kernel = difference_kernel(gp, 3)
    assert isinstance(kernel, ScaleKernel)
    assert [n for n, p in kernel.named_parameters() if p.requires_grad] == [
        "raw_outputscale"
    ]
    torch.testing.assert_close(
        kernel.base_kernel.lengthscale, gp.covar_module.lengthscale, atol=0, rtol=0
    )
    assert kernel.base_kernel is not gp.covar_module  # the source GP is left alone


def test_a_constant_column_gets_a_lengthscale_of_its_own():
    gp = _source_gp(_source_inputs(constant=(1,)))
    kernel = difference_kernel(gp, 3)
    trainable = sorted(n for n, p in kernel.named_parameters() if p.requires_grad)
    assert trainable == ["base_kernel.kernels.1.raw_lengthscale", "raw_outputscale"]
    own = kernel.base_kernel.kernels[1]
    # BoTorch's dim-scaled prior for 3 inputs, started at its mode
    loc, scale = math.sqrt(2) + math.log(3) / 2, math.sqrt(3)
    assert own.lengthscale.item() == pytest.approx(math.exp(loc - scale**2))
    with torch.no_grad():
        own.lengthscale = torch.tensor(0.7, dtype=F64)
        kernel.outputscale = torch.tensor(1.9, dtype=F64)
        x1, x2 = torch.rand(4, 3, dtype=F64), torch.rand(5, 3, dtype=F64)
        source_ls = gp.covar_module.lengthscale.squeeze(0)
        expected = 1.9 * _rbf(
            x1, x2, {0: source_ls[0], 2: source_ls[2], 1: torch.tensor(0.7, dtype=F64)}
        )
        torch.testing.assert_close(
            kernel(x1, x2).to_dense(), expected, atol=1e-12, rtol=0
        )
    assert kernel.base_kernel.kernels[0].lengthscale.data_ptr() != (
        gp.covar_module.lengthscale.data_ptr()
    )


def test_a_matern_source_kernel_keeps_its_smoothness_on_the_other_columns():
    X = _source_inputs(constant=(0,))
    Y = torch.cos(2 * X[:, 1:2])
    gp = SingleTaskGP(X, Y, covar_module=MaternKernel(nu=1.5, ard_num_dims=3))
    shape = difference_kernel(gp, 3).base_kernel.kernels[0]
    assert isinstance(shape, MaternKernel) and shape.nu == 1.5
    assert shape.active_dims.tolist() == [1, 2]


def test_another_source_kernel_is_kept_whole():
    X = _source_inputs(constant=(0,))
    gp = SingleTaskGP(X, torch.cos(2 * X[:, 1:2]), covar_module=RBFKernel())
    kernel = difference_kernel(gp, 3)  # one lengthscale for all inputs: not split
    assert isinstance(kernel.base_kernel, RBFKernel)
    assert not any(p.requires_grad for p in kernel.base_kernel.parameters())


def test_the_recommended_model_learns_the_lengthscale_the_source_could_not():
    # the source ran at x1 = 0.3; the target varies fast along x1
    X_src = _source_inputs(n=60, constant=(1,))
    Y_src = torch.sin(3 * X_src[:, :1])
    gen = torch.Generator().manual_seed(1)
    X = torch.rand(25, 3, generator=gen, dtype=F64)
    Y = torch.sin(3 * X[:, :1]) + torch.sin(12 * X[:, 1:2])
    model = RankWeightedTransferGP(X, Y, source=TaskData(X_src, Y_src))
    own = model.transfer_model.delta_covar_module.base_kernel.kernels[1]
    start = own.lengthscale.item()
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    assert own.lengthscale.item() < 0.7 * start  # shorter: the fit moved it
