r"""cm-BO Stage 1: the meta-task GPs, their frozen posteriors and the one Matern
product kernel both use, against the float64 reference of ``reference.py``."""

import math

import pytest
import torch
from gpytorch.priors import LogNormalPrior

from botorch_transfer.clustering import (
    ProductMaternKernel,
    fit_meta_task_gps,
    meta_task_kernel,
    meta_task_posteriors,
    product_matern,
)
from tests.clustering.reference import F64, D, matern32x12, task_posterior


def test_meta_task_posteriors_equal_botorch_gps(meta):
    tasks = meta[0]
    bounds = torch.tensor([[0.0] * D, [1.0] * D], dtype=F64)
    fitted = fit_meta_task_gps(tasks, bounds)
    post = meta_task_posteriors(tasks, bounds, fitted=fitted)
    X = torch.rand(7, D, dtype=F64)
    means, covs = post.means(X), post.covariances(X, X)
    for idx, model in fitted:
        p = model.posterior(X.unsqueeze(0).expand(len(idx), -1, -1))
        # the fitted GPs evaluate the same product_matern (exact distances)
        torch.testing.assert_close(means[idx], p.mean.squeeze(-1), rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(
            covs[idx], p.distribution.covariance_matrix, rtol=1e-5, atol=1e-7
        )
    # and the bank is exactly eqs. 1-2 with its hyperparameters
    for j in range(len(tasks)):
        mean, cov = task_posterior(post, j)
        torch.testing.assert_close(means[j], mean(X), rtol=1e-9, atol=1e-10)
        torch.testing.assert_close(covs[j], cov(X, X), rtol=1e-8, atol=1e-10)


def test_product_matern_equals_reference_and_is_batched():
    gen = torch.Generator().manual_seed(1)
    K, d = 3, 2
    ls32 = 0.2 + torch.rand(K, 1, d, generator=gen, dtype=F64)
    ls12 = 0.2 + torch.rand(K, 1, d, generator=gen, dtype=F64)
    X1 = torch.rand(K, 5, d, generator=gen, dtype=F64)
    X2 = torch.rand(4, d, generator=gen, dtype=F64)
    bounds = torch.tensor([[0.0] * d, [1.0] * d], dtype=F64)
    out = product_matern(
        X1, X2, ls32, ls12
    )  # task j's inputs with task j's lengthscales
    assert out.shape == (K, 5, 4)
    for j in range(K):
        expected = matern32x12(X1[j], X2, ls32[j, 0], ls12[j, 0], 1.0, bounds)
        torch.testing.assert_close(out[j], expected, rtol=1e-12, atol=1e-14)
    diag = product_matern(X1, X1, ls32, ls12, diag=True)
    torch.testing.assert_close(diag, torch.ones(K, 5, dtype=F64), rtol=0, atol=0)
    assert product_matern(X1[:, :0], X2, ls32, ls12).shape == (K, 0, 4)


def test_product_matern_has_finite_gradients_at_zero_distance():
    X = torch.rand(4, D, dtype=F64)
    ls = torch.full((1, D), 0.3, dtype=F64, requires_grad=True)
    product_matern(X, X, ls, ls).sum().backward()
    assert torch.isfinite(ls.grad).all()


def test_meta_task_kernel_module():
    kernel = meta_task_kernel(D, torch.Size([2])).to(F64)
    base = kernel.base_kernel
    assert isinstance(base, ProductMaternKernel)
    # both lengthscales start like MaternKernel's (softplus(0)) with their own prior
    torch.testing.assert_close(
        base.lengthscale_32, torch.full((2, 1, D), math.log(2), dtype=F64)
    )
    priors = {name: prior for name, _, prior, _, _ in base.named_priors()}
    assert set(priors) == {"lengthscale_32_prior", "lengthscale_12_prior"}
    assert all(isinstance(p, LogNormalPrior) for p in priors.values())
    assert priors["lengthscale_32_prior"] is not priors["lengthscale_12_prior"]
    base.lengthscale_12 = (
        torch.tensor([0.5, 2.0], dtype=F64).reshape(2, 1, 1).expand(2, 1, D)
    )
    X = torch.rand(2, 6, D, dtype=F64)
    expected = kernel.outputscale.reshape(2, 1, 1) * product_matern(
        X, X, base.lengthscale_32, base.lengthscale_12
    )
    torch.testing.assert_close(kernel(X).to_dense(), expected, rtol=0, atol=0)
    torch.testing.assert_close(
        kernel(X, diag=True), torch.diagonal(expected, dim1=-2, dim2=-1)
    )


@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
def test_frozen_prior_kernel_shapes(meta, batch):
    tasks = meta[0][:4]
    post = meta_task_posteriors(tasks, torch.tensor([[0.0] * D, [1.0] * D], dtype=F64))
    x1, x2 = torch.rand(*batch, 5, D, dtype=F64), torch.rand(6, D, dtype=F64)
    out = post.prior_kernel(x1, x2)
    assert out.shape == (4, *batch, 5, 6)
    flat1 = x1.reshape(-1, 5, D)
    for j in range(4):
        for b in range(flat1.shape[0]):
            expected = matern32x12(
                flat1[b],
                x2,
                post.lengthscale_32[j],
                post.lengthscale_12[j],
                post.outputscale[j],
                post.bounds,
            )
            torch.testing.assert_close(
                out[j].reshape(-1, 5, 6)[b], expected, rtol=1e-12, atol=1e-14
            )
