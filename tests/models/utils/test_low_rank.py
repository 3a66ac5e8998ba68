import warnings

import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models.transforms import Normalize, Standardize
from gpytorch.means import ZeroMean
from gpytorch.mlls import ExactMarginalLogLikelihood
from linear_operator.operators import DiagLinearOperator

from botorch_transfer import DiffGP, EnvGP, TaskData
from botorch_transfer.models import (
    LowRankInference,
    PooledTransferGP,
    source_fitted_kernel,
)
from botorch_transfer.models.utils.low_rank import (
    NYSTROM_JITTER,
    FITCMultivariateNormal,
    farthest_point_indices,
    fitc_covariance,
    fitc_predictive_weights,
    nystrom_root,
    woodbury_log_density,
)
from tests.models.reference import fitc_posterior, rbf
from tests.models.test_delta import (
    DELTA_LS,
    DELTA_OS,
    F64,
    TARGET_NOISE,
    assert_posterior_matches,
    delta_kernel,
    make_source,
    make_target,
)


def kernel_ref(A, B):
    return rbf(A, B, DELTA_LS, DELTA_OS)


def test_farthest_point_indices_are_greedy_max_min_and_all_for_small_sets():
    X = torch.rand(200, 3, dtype=F64) * torch.tensor([1.0, 10.0, 100.0], dtype=F64)
    chosen = farthest_point_indices(X, 12)
    assert chosen.unique().numel() == 12
    U = (X - X.min(0).values) / (X.max(0).values - X.min(0).values)
    for k in range(1, 12):  # each pick is farthest (unit-scaled) from those before
        distance = torch.cdist(U, U[chosen[:k]]).min(dim=-1).values
        assert distance[chosen[k]] == distance.max()
    assert torch.equal(farthest_point_indices(X[:5], 12), torch.arange(5))


def test_fitc_log_likelihood_and_predictive_weights_match_dense_algebra():
    X = torch.rand(30, 2, dtype=F64)
    Z = X[:8]
    K_XZ, K_ZZ = kernel_ref(X, Z), kernel_ref(Z, Z)
    root, L = nystrom_root(K_XZ, K_ZZ)
    # the documented jitter is part of the method
    K_ZZ = K_ZZ + NYSTROM_JITTER[F64] * DELTA_OS * torch.eye(8, dtype=F64)
    prior = torch.diagonal(kernel_ref(X, X))
    noise = 0.01 + 0.05 * torch.rand(30, dtype=F64)
    Q = K_XZ @ torch.linalg.solve(K_ZZ, K_XZ.T)
    dense = Q + torch.diag(prior - torch.diagonal(Q)) + torch.diag(noise)
    covar = fitc_covariance(root, prior) + torch.diag_embed(noise)
    y = torch.randn(30, dtype=F64)
    mean = torch.zeros(30, dtype=F64)
    expected = torch.distributions.MultivariateNormal(mean, dense).log_prob(y)
    structured = fitc_covariance(root, prior)
    got = FITCMultivariateNormal(mean, structured + DiagLinearOperator(noise))
    torch.testing.assert_close(got.log_prob(y), expected, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(covar.to_dense(), dense, rtol=1e-8, atol=1e-9)
    # predictive weights: mean k(x, Z) w and covariance reduction k(x, Z) W k(Z, x)
    w, W = fitc_predictive_weights(root, prior, noise, y, L)
    A = torch.rand(5, 2, dtype=F64)
    Q_AX = kernel_ref(A, Z) @ torch.linalg.solve(K_ZZ, K_XZ.T)
    torch.testing.assert_close(
        kernel_ref(A, Z) @ w, Q_AX @ torch.linalg.solve(dense, y), rtol=1e-8, atol=1e-9
    )
    torch.testing.assert_close(
        kernel_ref(A, Z) @ W @ kernel_ref(Z, A),
        Q_AX @ torch.linalg.solve(dense, Q_AX.T),
        rtol=1e-8,
        atol=1e-9,
    )


@pytest.mark.parametrize(
    "shapes",
    [((), (), ()), ((3,), (3,), (3,)), ((4, 1), (), (1,))],
    ids=["plain", "batched", "broadcast"],
)
def test_woodbury_log_density_and_its_gradient_match_dense_algebra(shapes, device):
    residual_batch, root_batch, diagonal_batch = shapes
    like = dict(dtype=F64, device=device)
    R = torch.randn(*root_batch, 20, 4, **like).requires_grad_()
    D = (0.05 + torch.rand(*diagonal_batch, 20, **like)).requires_grad_()
    r = torch.randn(*residual_batch, 20, **like).requires_grad_()
    got = woodbury_log_density(r, R, D)
    S = R @ R.transpose(-1, -2) + torch.diag_embed(D)
    expected = torch.distributions.MultivariateNormal(
        torch.zeros_like(r), S.expand(*got.shape, 20, 20)
    ).log_prob(r)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)
    # the written-out gradient against autograd through the dense density
    weights = torch.randn_like(got)
    ours = torch.autograd.grad((got * weights).sum(), (r, R, D))
    dense = torch.autograd.grad((expected * weights).sum(), (r, R, D))
    for a, b in zip(ours, dense):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)
    # without a gradient for the root (a frozen kernel's) the others are unchanged
    d_r, d_D = torch.autograd.grad(
        (woodbury_log_density(r, R.detach(), D) * weights).sum(), (r, D)
    )
    torch.testing.assert_close(d_r, dense[0], rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(d_D, dense[2], rtol=1e-8, atol=1e-10)


def test_fitc_density_with_row_scales_matches_dense_algebra(device):
    # a source map scales rows: S (R R^T + diag(k - rowsum R^2)) S + noise; the
    # density takes the scale through the residuals and the diagonal only
    like = dict(dtype=F64, device=device)
    R = torch.randn(25, 5, **like).requires_grad_()
    prior = (R.detach().pow(2).sum(-1) + 0.5 * torch.rand(25, **like)).requires_grad_()
    scale = torch.cat([-0.7 * torch.ones(20, **like), torch.ones(5, **like)])
    scale.requires_grad_()
    noise = (0.01 + 0.1 * torch.rand(25, **like)).requires_grad_()
    mean, y = torch.randn(25, **like), torch.randn(25, **like)
    covar = fitc_covariance(R, prior, row_scale=scale) + DiagLinearOperator(noise)
    got = FITCMultivariateNormal(mean, covar).log_prob(y)
    S = torch.diag(scale)
    dense = S @ (R @ R.T + torch.diag(prior - R.pow(2).sum(-1))) @ S + torch.diag(noise)
    expected = torch.distributions.MultivariateNormal(mean, dense).log_prob(y)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)
    for a, b in zip(
        torch.autograd.grad(got, (R, prior, scale, noise)),
        torch.autograd.grad(expected, (R, prior, scale, noise)),
    ):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(covar.to_dense(), dense, rtol=1e-12, atol=1e-12)


def test_woodbury_quadratic_form_is_smooth_where_the_prior_explains_the_data():
    # a large prior amplitude over few directions and small noise: r^T S^{-1} r is a
    # small difference of large terms; along a line its second differences must be
    # those of the smooth function, not rounding noise (it stalled L-BFGS)
    gen = torch.Generator().manual_seed(3)
    R = 40.0 * torch.randn(400, 30, generator=gen, dtype=F64)
    r = R @ torch.randn(30, generator=gen, dtype=F64)
    r = r + 0.05 * torch.randn(400, generator=gen, dtype=F64)
    D = torch.full((400,), 0.006, dtype=F64)
    steps = torch.arange(8, dtype=F64) * 1e-7
    values = torch.stack([woodbury_log_density(r, R, D * (1 + t)) for t in steps])
    second = values[2:] - 2 * values[1:-1] + values[:-2]
    # the curvature term is ~1e-10 here; rounding of the unrefined form was ~1e-7
    assert second.abs().max() < 1e-8


def fixed_kernel(kernel):
    r"""The kernel with no parameter requiring a gradient (a fixed kernel)."""
    return kernel.requires_grad_(False)


@pytest.mark.parametrize("cls", [EnvGP, DiffGP])
def test_a_frozen_kernel_is_factored_once_and_gives_the_same_fit(cls, monkeypatch):
    source, (X, Y) = make_source(n=30), make_target()
    kwargs = dict(
        source=source,
        inference=LowRankInference(num_inducing=10),
        input_transform=Normalize(2, bounds=torch.tensor([[0.0, 0.0], [1.0, 1.0]])),
        outcome_transform=Standardize(m=1),
    )
    calls = []
    factor = PooledTransferGP._nystrom_parts
    monkeypatch.setattr(
        PooledTransferGP,
        "_nystrom_parts",
        lambda self, *args: calls.append(1) or factor(self, *args),
    )
    free = cls(X, Y, covar_module=delta_kernel(), **kwargs)
    frozen = cls(X, Y, covar_module=fixed_kernel(delta_kernel()), **kwargs)
    assert frozen.kernel_is_frozen and not free.kernel_is_frozen
    # the marginal likelihood and the gradient of what both fit (the prior mean)
    values = []
    for model in (free, frozen):
        model.train()
        mll = ExactMarginalLogLikelihood(model.likelihood, model)
        for _ in range(3):
            model.zero_grad()
            calls.clear()
            value = mll(
                model(*model.train_inputs), model.train_targets, *model.train_inputs
            )
            value.backward()
        values.append((value.detach(), model.mean_module.raw_constant.grad.clone()))
        # the free kernel is factored at every evaluation, the frozen one once
        assert len(calls) == (1 if model is free else 0)
    torch.testing.assert_close(values[1][0], values[0][0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(values[1][1], values[0][1], rtol=1e-10, atol=1e-12)
    # a fit moves the transfer parameters only; the kept factor is the current one
    fit_gpytorch_mll(ExactMarginalLogLikelihood(frozen.likelihood, frozen))
    torch.testing.assert_close(
        frozen.covar_module.base_kernel.lengthscale,
        delta_kernel().base_kernel.lengthscale,
    )
    X_test = torch.rand(4, 2, 2, dtype=F64)
    rebuilt = cls(X, Y, covar_module=fixed_kernel(delta_kernel()), **kwargs)
    rebuilt.load_state_dict(frozen.state_dict())
    torch.testing.assert_close(
        frozen.posterior(X_test).mean, rebuilt.posterior(X_test).mean
    )
    # changing the frozen kernel in place drops the kept factor
    with torch.no_grad():
        frozen.covar_module.base_kernel.lengthscale = torch.tensor([0.5, 0.8])
        rebuilt.covar_module.base_kernel.lengthscale = torch.tensor([0.5, 0.8])
    frozen.train(), rebuilt.train()
    calls.clear()
    values = [
        ExactMarginalLogLikelihood(m.likelihood, m)(
            m(*m.train_inputs), m.train_targets, *m.train_inputs
        )
        for m in (frozen, rebuilt)
    ]
    assert len(calls) == 2
    torch.testing.assert_close(values[0], values[1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cls", [EnvGP, DiffGP])
def test_low_rank_predictive_follows_hyperparameters_set_in_eval_mode(cls):
    # GPyTorch's setters write through ``.data`` (no version change): the kept FITC
    # weights must still notice
    source, (X, Y) = make_source(n=30), make_target()
    model = cls(X, Y, source=source, inference=LowRankInference(num_inducing=10))
    model.eval()
    X_test = torch.rand(3, 1, 2, dtype=F64)
    before = model.posterior(X_test).mean
    with torch.no_grad():
        model.covar_module.base_kernel.lengthscale = torch.tensor([0.3, 0.9])
        model.covar_module.outputscale = 2.0
    model.train(), model.eval()  # DiffGP re-derives its correction here
    rebuilt = cls(X, Y, source=source, inference=LowRankInference(num_inducing=10))
    rebuilt.load_state_dict(model.state_dict())
    after = model.posterior(X_test).mean
    assert not torch.allclose(after, before)
    torch.testing.assert_close(after, rebuilt.posterior(X_test).mean)


def test_source_fitted_kernel_is_a_frozen_single_task_gp_kernel(device):
    from botorch.models import SingleTaskGP

    source = make_source(n=30, device=device)
    transform = Normalize(2, bounds=torch.tensor([[0.0, 0.0], [1.0, 1.0]]))
    kernel = source_fitted_kernel(source, input_transform=transform, progress=False)
    assert all(not p.requires_grad for p in kernel.parameters())
    by_hand = SingleTaskGP(
        source.X,
        source.Y,
        source.Yvar,
        covar_module=delta_kernel().to(device),
        input_transform=transform,
        outcome_transform=Standardize(m=1),
    )
    fitted = source_fitted_kernel(
        source, input_transform=transform, covar_module=delta_kernel(), progress=False
    )
    fit_gpytorch_mll(ExactMarginalLogLikelihood(by_hand.likelihood, by_hand))
    torch.testing.assert_close(
        fitted.base_kernel.lengthscale, by_hand.covar_module.base_kernel.lengthscale
    )
    torch.testing.assert_close(fitted.outputscale, by_hand.covar_module.outputscale)
    # a subset of the source: fixed rows, so the same data give the same kernel
    again = [
        source_fitted_kernel(source, fit_max_points=20, progress=False)
        for _ in range(2)
    ]
    torch.testing.assert_close(
        again[0].base_kernel.lengthscale, again[1].base_kernel.lengthscale
    )
    # a model with it fits only the transfer parameters, and runs on the device
    X, Y = make_target(device=device)
    model = EnvGP(
        X,
        Y,
        source=source,
        covar_module=kernel,
        inference=LowRankInference(num_inducing=8),
    )
    before = kernel.base_kernel.lengthscale.clone()
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    assert torch.equal(kernel.base_kernel.lengthscale, before)
    assert (
        model.posterior(torch.rand(3, 1, 2, dtype=F64, device=device))
        .mean.isfinite()
        .all()
    )


def test_source_fitted_kernel_refuses_bad_arguments():
    source = make_source(n=10)
    with pytest.raises(ValueError, match="`fit_max_points` must be None or an int"):
        source_fitted_kernel(source, fit_max_points=1)
    with pytest.raises(TypeError, match=r"`source\[0\]` must be a TaskData"):
        source_fitted_kernel(torch.rand(10, 2))
    with pytest.raises(ValueError, match="at least one source"):
        source_fitted_kernel([])
    other = TaskData(torch.rand(5, 3, dtype=F64), torch.rand(5, 1, dtype=F64))
    with pytest.raises(ValueError):
        source_fitted_kernel([source, other])


def test_low_rank_envgp_is_the_dense_fitc_posterior():
    # few, well separated inducing inputs: K_ZZ well conditioned (float64 agreement)
    source, (X, Y) = make_source(), make_target(n=3)

    model = EnvGP(
        X,
        Y,
        train_Yvar=torch.full_like(Y, TARGET_NOISE),
        source=source,
        covar_module=delta_kernel(),
        mean_module=ZeroMean(),
        source_noise=0.05,
        source_map="identity",
        inference=LowRankInference(num_inducing=5),
    )
    pooled_X = torch.cat([source.X, X])
    Z = torch.cat([source.X[model.source_inducing], X])
    noise = torch.cat(
        [torch.full((source.n,), 0.05, dtype=F64), torch.full((3,), TARGET_NOISE)]
    )
    ref_mean, ref_cov = fitc_posterior(
        kernel_ref,
        pooled_X,
        torch.cat([source.Y, Y]).squeeze(-1),
        noise,
        Z,
        jitter=NYSTROM_JITTER[F64],
    )
    assert model.source_inducing.numel() == 5
    assert_posterior_matches(model, ref_mean, ref_cov, torch.rand(3, 4, 2, dtype=F64))


@pytest.mark.parametrize("cls", [EnvGP, DiffGP])
def test_low_rank_with_every_source_point_inducing_is_exact(cls, device):
    source = make_source(n=25, device=device)
    X, Y = make_target(device=device)
    kwargs = dict(
        source=source,
        input_transform=Normalize(2),
        outcome_transform=Standardize(m=1),
    )
    exact = cls(X, Y, **kwargs)
    low_rank = cls(X, Y, inference=LowRankInference(num_inducing=25), **kwargs)
    with torch.no_grad():
        exact.covar_module.base_kernel.lengthscale = torch.tensor([0.4, 0.6])
        exact.covar_module.outputscale = 1.7
    state = exact.state_dict()
    for model in (exact, low_rank):  # DiffGP re-derives its correction on loading
        model.load_state_dict(state)
    # the marginal likelihood and its gradient
    values = []
    for model in (exact, low_rank):
        model.train()
        mll = ExactMarginalLogLikelihood(model.likelihood, model)
        inputs = model.train_inputs
        value = mll(model(*inputs), model.train_targets, *inputs)
        value.backward()
        grad = model.covar_module.raw_outputscale.grad
        values.append((value.detach(), grad.clone()))
    torch.testing.assert_close(values[1][0], values[0][0], rtol=1e-8, atol=1e-9)
    torch.testing.assert_close(values[1][1], values[0][1], rtol=1e-6, atol=1e-8)
    exact.eval(), low_rank.eval()
    X_test = torch.rand(3, 4, 2, dtype=F64, device=device)
    post_exact, post_low = exact.posterior(X_test), low_rank.posterior(X_test)
    torch.testing.assert_close(post_low.mean, post_exact.mean, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(
        post_low.distribution.covariance_matrix,
        post_exact.distribution.covariance_matrix,
        rtol=1e-6,
        atol=1e-7,
    )


@pytest.mark.parametrize("cls", [EnvGP, DiffGP])
def test_low_rank_fits_fantasizes_and_conditions(cls):
    source = make_source(n=60)
    X, Y = make_target()
    model = cls(X, Y, source=source, inference=LowRankInference(num_inducing=12))
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    X_new = torch.rand(2, 2, dtype=F64)
    Y_new = torch.randn(2, 1, dtype=F64)
    conditioned = model.condition_on_observations(X_new, Y_new)
    rebuilt = cls(
        torch.cat([X, X_new]),
        torch.cat([Y, Y_new]),
        source=source,
        inference=LowRankInference(num_inducing=12),
    )
    rebuilt.load_state_dict(model.state_dict())
    X_test = torch.rand(5, 1, 2, dtype=F64)
    torch.testing.assert_close(
        conditioned.posterior(X_test).mean,
        rebuilt.posterior(X_test).mean,
        rtol=1e-8,
        atol=1e-9,
    )
    from botorch.sampling import SobolQMCNormalSampler

    fantasy = model.fantasize(X_new, SobolQMCNormalSampler(torch.Size([3])))
    post = fantasy.posterior(torch.rand(4, 1, 2, 2, dtype=F64))
    assert post.mean.shape == (4, 3, 2, 1)
    assert torch.isfinite(post.variance).all() and (post.variance > 0).all()
    # a q-batch posterior is a valid joint Gaussian with a gradient to the inputs
    X_q = torch.rand(4, 3, 2, dtype=F64, requires_grad=True)
    post = model.posterior(X_q)
    torch.linalg.cholesky(post.distribution.covariance_matrix)
    post.variance.sum().backward()
    assert X_q.grad is not None and torch.isfinite(X_q.grad).all()


@pytest.mark.parametrize("cls", [EnvGP, DiffGP])
def test_bad_inference_arguments(cls):
    source, (X, Y) = make_source(), make_target()
    with pytest.raises(ValueError, match="`inference` must be one of"):
        cls(X, Y, source=source, inference="sparse")
    with pytest.raises(ValueError, match="`num_inducing` must be a positive int"):
        LowRankInference(num_inducing=0)
    with pytest.raises(TypeError, match="`num_inducing` must be an int"):
        LowRankInference(num_inducing=2.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ValueError, match="applies to low-rank inference only"):
            cls(X, Y, source=source, num_inducing=12)
        with pytest.raises(ValueError, match="applies to low-rank inference only"):
            cls(X, Y, source=source, inference=LowRankInference(), num_inducing=12)


@pytest.mark.parametrize("cls", [EnvGP, DiffGP])
def test_num_inducing_keyword_warns_and_builds_the_same_model(cls):
    source, (X, Y) = make_source(), make_target()
    with pytest.warns(DeprecationWarning, match="`num_inducing` is deprecated") as w:
        old = cls(X, Y, source=source, inference="low_rank", num_inducing=10)
    assert {record.filename for record in w} == {__file__}
    new = cls(X, Y, source=source, inference=LowRankInference(num_inducing=10))
    assert old.num_inducing == new.num_inducing == 10 and old.low_rank
    X_test = torch.rand(5, X.shape[-1], dtype=X.dtype)
    old_post, new_post = old.posterior(X_test), new.posterior(X_test)
    torch.testing.assert_close(old_post.mean, new_post.mean, rtol=0, atol=0)
    torch.testing.assert_close(old_post.variance, new_post.variance, rtol=0, atol=0)
