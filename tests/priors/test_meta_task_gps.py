r"""cm-BO Stage 1: the meta-task GPs, their frozen posteriors and the one Matern
product kernel both use, against the float64 reference of ``reference.py``."""

import copy
import math
import pickle

import pytest
import torch
from botorch.optim.closures import get_loss_closure
from botorch.optim.utils import get_parameters
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.priors import LogNormalPrior

from botorch_transfer import TaskData
from botorch_transfer.priors import (
    ProductMaternKernel,
    fit_meta_task_gps,
    meta_task_kernel,
    meta_task_model,
    meta_task_posteriors,
    product_matern,
)
from botorch_transfer.priors.meta_task_gps import (
    MEMO_SIZE,
    _neg_mll_per_task,
    _squared_differences,
)
from tests.priors.reference import F64, D, matern32x12, task_posterior

UNIT = torch.tensor([[0.0] * D, [1.0] * D], dtype=F64)
#: Largest shortfall, in nats per data point, of a task's MLL at the batched fit's
#: optimum below the MLL of the task's own fit. The two run the same L-BFGS-B on the
#: same objective; only rounding differs (measured: at most ~1e-6).
MLL_SHORTFALL = 1e-4


def _task_mlls(fitted):
    r"""Each task's exact MLL / n (with priors) at its fitted hyperparameters."""
    out = {}
    for idx, model in fitted:
        mll = ExactMarginalLogLikelihood(model.likelihood, model)
        mll.train()
        with torch.no_grad():
            values = -get_loss_closure(mll)()
        out.update(zip(idx, values.reshape(-1).tolist()))
        mll.eval()
    return out


def _reference_posterior(model, g, X_train, Y_train, X):
    r"""Posterior mean and covariance of batch ``g`` of a fitted batched meta-task GP
    (user units) by a dense float64 solve from its hyperparameters (eqs. 1-2)."""
    base = model.covar_module.base_kernel
    ls32, ls12 = base.lengthscale_32[g, 0], base.lengthscale_12[g, 0]
    s2 = model.covar_module.outputscale[g]

    def k(A, B):
        return matern32x12(A, B, ls32, ls12, s2, UNIT)

    if isinstance(model.likelihood, FixedNoiseGaussianLikelihood):
        noise = model.likelihood.noise_covar.noise[g]
    else:
        noise = model.likelihood.noise[g].expand(X_train.shape[0])
    offset = model.outcome_transform.means[g, 0, 0]
    scale = model.outcome_transform.stdvs[g, 0, 0]
    z = (Y_train[:, 0] - offset) / scale
    c = model.mean_module.constant[g]
    Kn = k(X_train, X_train) + torch.diag(noise)
    mean = offset + scale * (c + k(X, X_train) @ torch.linalg.solve(Kn, z - c))
    cov = k(X, X) - k(X, X_train) @ torch.linalg.solve(Kn, k(X_train, X))
    return mean, scale**2 * cov


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


@pytest.mark.parametrize("fixed_noise", [False, True])
def test_batched_objective_equals_botorch_mll(fixed_noise):
    r"""The batched fit's objective on a subset of tasks is BoTorch's loss closure
    (exact MLL / n with priors) of those tasks: values and gradients."""
    gen = torch.Generator().manual_seed(3)
    X = torch.rand(5, 9, D, generator=gen, dtype=F64)
    Y = torch.randn(5, 9, 1, generator=gen, dtype=F64)
    Yvar = torch.full_like(Y, 0.01) if fixed_noise else None
    tasks = [TaskData(X[j], Y[j], None if Yvar is None else Yvar[j]) for j in range(5)]
    model = meta_task_model(tasks, UNIT)
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    mll.train()
    params = get_parameters(mll, requires_grad=True)
    with torch.no_grad():  # away from the (shared) initial values
        for name, p in params.items():
            if "noise" in name:  # no transform: keep it positive
                p.mul_(torch.exp(torch.randn(p.shape, generator=gen, dtype=F64)))
            else:
                p.add_(0.5 * torch.randn(p.shape, generator=gen, dtype=F64))
    idx = torch.tensor([3, 0, 4])
    noise = model.likelihood.noise_covar.noise if fixed_noise else None
    loss = _neg_mll_per_task(model, _squared_differences(model), idx, noise)
    loss.sum().backward()
    grads = {name: p.grad.clone() for name, p in params.items()}
    mll.zero_grad()
    expected = get_loss_closure(mll)()[idx]
    expected.sum().backward()
    torch.testing.assert_close(loss, expected, rtol=1e-12, atol=1e-12)
    for name, p in params.items():
        torch.testing.assert_close(grads[name], p.grad, rtol=1e-9, atol=1e-12)


def test_batched_fit_posteriors_equal_dense_reference(meta):
    r"""(a) Each task of a batched fit has the exact GP posterior of its own fitted
    hyperparameters: BoTorch's posterior of the batched model and the frozen bank
    both equal a dense float64 solve."""
    tasks = meta[0]
    fitted = fit_meta_task_gps(tasks, UNIT, progress=False)
    assert any(len(idx) > 1 for idx, _ in fitted)
    post = meta_task_posteriors(tasks, UNIT, fitted=fitted)
    X = torch.rand(7, D, dtype=F64)
    means, covs = post.means(X), post.covariances(X, X)
    for idx, model in fitted:
        p = model.posterior(X.unsqueeze(0).expand(len(idx), -1, -1))
        for g, j in enumerate(idx):
            mean, cov = _reference_posterior(model, g, tasks[j].X, tasks[j].Y, X)
            torch.testing.assert_close(p.mean[g, :, 0], mean, rtol=1e-8, atol=1e-10)
            torch.testing.assert_close(
                p.distribution.covariance_matrix[g], cov, rtol=1e-8, atol=1e-10
            )
            torch.testing.assert_close(means[j], mean, rtol=1e-8, atol=1e-10)
            torch.testing.assert_close(covs[j], cov, rtol=1e-8, atol=1e-10)


def test_batched_fit_mll_no_worse_than_per_task_fits(meta):
    r"""(b) At the batched fit's hyperparameters each task's MLL is at least that of
    its own fit minus ``MLL_SHORTFALL`` nats per point."""
    tasks = meta[0]
    batched = fit_meta_task_gps(tasks, UNIT, progress=False)
    single = fit_meta_task_gps(tasks, UNIT, progress=False, batched=False)
    assert [idx for idx, _ in single] == [[j] for j in range(len(tasks))]
    mll_batched, mll_single = _task_mlls(batched), _task_mlls(single)
    assert sorted(mll_batched) == list(range(len(tasks)))
    for j in range(len(tasks)):
        assert mll_batched[j] >= mll_single[j] - MLL_SHORTFALL, j


def test_batched_fit_groups_by_size_and_keeps_input_order(meta):
    r"""Tasks of two sizes (and with / without known noise) are fitted in one batched
    model per kind; the frozen bank keeps the input order, and a group's fit does not
    depend on the other groups."""
    tasks = meta[0]
    fitted = fit_meta_task_gps(tasks, UNIT, progress=False)
    indices = [j for idx, _ in fitted for j in idx]
    assert sorted(indices) == list(range(len(tasks)))
    kinds = {(t.n, t.Yvar is None) for t in tasks}
    assert len(kinds) == 4 and len(fitted) == 4
    for idx, model in fitted:
        assert idx == sorted(idx) and model.batch_shape == torch.Size([len(idx)])
        assert len({(tasks[j].n, tasks[j].Yvar is None) for j in idx}) == 1
        for g, j in enumerate(idx):
            torch.testing.assert_close(
                model.train_inputs[0][g], tasks[j].X, rtol=0, atol=0
            )
    post = meta_task_posteriors(tasks, UNIT, fitted=fitted)
    for j, task in enumerate(tasks):
        torch.testing.assert_close(post.X[j, : task.n], task.X, rtol=0, atol=0)
        assert int(post.mask[j].sum()) == task.n
        torch.testing.assert_close(post.y_offset[j], task.Y.mean(), rtol=1e-12, atol=0)
    # one group fitted on its own: the same hyperparameters as in the mixed call
    idx, model = fitted[1]
    (alone_idx, alone), *rest = fit_meta_task_gps(
        [tasks[j] for j in idx], UNIT, progress=False
    )
    assert not rest and alone_idx == list(range(len(idx)))
    for (name, a), (_, b) in zip(alone.named_parameters(), model.named_parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_batched_objective_isolates_invalid_tasks():
    r"""A task stepped to a zero lengthscale gets a NaN loss and NaN-free gradients
    for the others (BoTorch's closure would fail or return NaN for the whole batch)."""
    gen = torch.Generator().manual_seed(4)
    X = torch.rand(3, 6, D, generator=gen, dtype=F64)
    Y = torch.randn(3, 6, 1, generator=gen, dtype=F64)
    model = meta_task_model([TaskData(X[j], Y[j]) for j in range(3)], UNIT)
    model.train()
    base = model.covar_module.base_kernel
    with torch.no_grad():
        base.raw_lengthscale_32[1] = -1000.0  # softplus underflows to 0
    loss = _neg_mll_per_task(model, _squared_differences(model), torch.arange(3))
    assert loss[1].isnan() and loss[[0, 2]].isfinite().all()
    loss[[0, 2]].sum().backward()
    assert base.raw_lengthscale_32.grad[[0, 2]].isfinite().all()


def test_batched_optimizer_needs_the_meta_task_kernel():
    from botorch.models import SingleTaskGP

    from botorch_transfer.priors import fit_meta_task_mll_batched

    X = torch.rand(2, 5, D, dtype=F64)
    model = SingleTaskGP(X, torch.randn(2, 5, 1, dtype=F64))
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    with pytest.raises(ValueError, match="meta_task_kernel"):
        fit_meta_task_mll_batched(mll)


def test_means_and_features_are_memoized_for_inputs_without_gradient(prior):
    # a posterior call asks for them at its test points several times, and a discrete
    # search at the same candidates in every iteration, by a new model whose copy of
    # the prior shares the memo
    post = prior.posteriors
    X = torch.rand(6, D, generator=torch.Generator().manual_seed(5), dtype=F64)
    cross = post._cross(X)
    direct_means = post._means_from_cross(cross)
    direct_features = post._features_from_cross(cross)
    features = post.features(X)
    torch.testing.assert_close(features, direct_features, rtol=0, atol=0)
    torch.testing.assert_close(post.means(X), direct_means, rtol=0, atol=0)
    assert post.features(X.clone()) is features  # found by content
    assert copy.deepcopy(post).features(X) is features  # copies share the memo
    unpickled = pickle.loads(pickle.dumps(post))
    assert len(unpickled._memo) == 0  # pickles leave it behind
    torch.testing.assert_close(unpickled.features(X), features, rtol=0, atol=0)
    # in float32 the same input is another entry
    single = copy.deepcopy(post).to(torch.float32).features(X.float())
    assert single.dtype == torch.float32
    torch.testing.assert_close(single, features.float(), rtol=1e-4, atol=1e-5)
    # an input that needs gradients is never kept
    X_grad = X.clone().requires_grad_(True)
    assert post.features(X_grad).requires_grad
    assert all(not v[1].requires_grad for v in post._memo.values())
    # both at once: the memo's pair, or one cross-covariance under a gradient
    assert post.means_and_features(X)[1] is features
    means_grad, features_grad = post.means_and_features(X_grad)
    assert means_grad.requires_grad and features_grad.requires_grad
    torch.testing.assert_close(means_grad, direct_means, rtol=0, atol=0)
    torch.testing.assert_close(features_grad, direct_features, rtol=0, atol=0)
    # the least recently used input goes first
    for seed in range(MEMO_SIZE):
        generator = torch.Generator().manual_seed(seed)
        post.features(torch.rand(3, D, generator=generator, dtype=F64))
    assert post.features(X) is not features
