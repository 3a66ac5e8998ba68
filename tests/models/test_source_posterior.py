import pytest
import torch
from gpytorch.kernels import ScaleKernel

from botorch_transfer.models.source_posterior import (
    GPSourcePosterior,
    SumSourcePosterior,
    pivoted_cholesky,
)
from tests.models.reference import DirectRBFKernel, gp_posterior, rbf

F64 = torch.float64


def kernel(ls=0.3, os=1.5):
    k = ScaleKernel(DirectRBFKernel()).to(F64)
    k.base_kernel.lengthscale = torch.tensor(ls, dtype=F64)
    k.outputscale = torch.tensor(os, dtype=F64)
    return k


def test_pivoted_cholesky_is_exact_at_full_rank_and_greedy():
    X = torch.rand(30, 2, dtype=F64)
    K = rbf(X, X, torch.tensor(0.5, dtype=F64), 1.0) + 1e-3 * torch.eye(30, dtype=F64)
    P, piv, residual = pivoted_cholesky(
        torch.diagonal(K).clone(), lambda i: K[i], max_rank=30, tolerance=0.0
    )
    torch.testing.assert_close(P @ P.T, K, rtol=1e-10, atol=1e-12)
    assert residual == 0.0 and sorted(piv.tolist()) == list(range(30))
    P5, _, residual5 = pivoted_cholesky(
        torch.diagonal(K).clone(), lambda i: K[i], max_rank=5, tolerance=0.0
    )
    assert P5.shape == (30, 5) and 0 < residual5 < 1
    assert (
        torch.diagonal(K - P5 @ P5.T) >= -1e-12
    ).all()  # residual stays PSD on the diagonal


def test_gp_source_posterior_matches_dense_reference_with_heteroscedastic_noise():
    X = torch.rand(25, 2, dtype=F64)
    y = torch.sin(4 * X).sum(-1)
    noise = 0.01 + 0.05 * torch.rand(25, dtype=F64)
    source = GPSourcePosterior(X, y, noise, kernel())
    ref_mean, ref_cov = gp_posterior(
        lambda A, B: rbf(A, B, torch.tensor(0.3, dtype=F64), 1.5), X, y, noise
    )
    X_test = torch.rand(3, 4, 2, dtype=F64)
    torch.testing.assert_close(
        source.mean(X_test), ref_mean(X_test), rtol=1e-8, atol=1e-10
    )
    torch.testing.assert_close(
        source.covariance(X_test), ref_cov(X_test, X_test), rtol=1e-8, atol=1e-10
    )
    torch.testing.assert_close(
        source.variance(X_test),
        torch.diagonal(ref_cov(X_test, X_test), dim1=-2, dim2=-1),
        rtol=1e-8,
        atol=1e-10,
    )
    X2 = torch.rand(3, 2, 2, dtype=F64)
    torch.testing.assert_close(
        source.covariance(X_test, X2), ref_cov(X_test, X2), rtol=1e-8, atol=1e-10
    )


def test_output_affine_and_sum():
    X = torch.rand(10, 1, dtype=F64)
    a = GPSourcePosterior(
        X, X.squeeze(-1), torch.full((10,), 0.01, dtype=F64), kernel()
    )
    b = GPSourcePosterior(
        X, -(X.squeeze(-1) ** 2), torch.full((10,), 0.02, dtype=F64), kernel(ls=0.5)
    )
    X_test = torch.rand(4, 1, dtype=F64)
    total = SumSourcePosterior([a, b])
    torch.testing.assert_close(total.mean(X_test), a.mean(X_test) + b.mean(X_test))
    torch.testing.assert_close(
        total.covariance(X_test), a.covariance(X_test) + b.covariance(X_test)
    )
    mean, cov = total.mean(X_test), total.covariance(X_test)
    total.set_output_affine(2.0, -1.0)
    torch.testing.assert_close(total.mean(X_test), 2 * mean - 1)
    torch.testing.assert_close(total.covariance(X_test), 4 * cov)
    total.train()
    assert not total.training  # frozen: stays in eval mode


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            dict(train_X=torch.rand(5), train_Y=torch.rand(5), noise=torch.ones(5)),
            "`train_X` must be N x d",
        ),
        (
            dict(train_X=torch.rand(5, 1), train_Y=torch.rand(4), noise=torch.ones(5)),
            "`train_Y` must have 5 entries",
        ),
        (
            dict(train_X=torch.rand(5, 1), train_Y=torch.rand(5), noise=-torch.ones(5)),
            "`noise` must be non-negative",
        ),
        (
            dict(
                train_X=torch.rand(5, 1),
                train_Y=torch.full((5,), float("nan")),
                noise=torch.ones(5),
            ),
            "`train_Y` contains NaN",
        ),
    ],
)
def test_bad_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GPSourcePosterior(covar_module=kernel(), **kwargs)


def test_a_large_source_fits_its_hyperparameters_on_a_fixed_subset():
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

    from botorch_transfer import TaskData
    from botorch_transfer.models.frozen_source import frozen_source_posterior

    gen = torch.Generator().manual_seed(3)
    X = torch.rand(60, 2, generator=gen, dtype=torch.float64)
    Y = torch.sin(4 * X).sum(-1, keepdim=True)
    one, zero = torch.ones(()), torch.zeros(())
    post = frozen_source_posterior(
        TaskData(X, Y), one, zero, fit_max_points=20, progress=False
    )
    # by hand: fit on the documented subset, condition on all 60 points
    rows = torch.randperm(60, generator=torch.Generator().manual_seed(0))[:20]
    sub = SingleTaskGP(X[rows], Y[rows], outcome_transform=None)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(sub.likelihood, sub))
    full = SingleTaskGP(X, Y, outcome_transform=None)
    full.load_state_dict(sub.state_dict())
    X_test = torch.rand(5, 2, generator=gen, dtype=torch.float64)
    expected = full.posterior(X_test)
    torch.testing.assert_close(post.mean(X_test), expected.mean.squeeze(-1))
    torch.testing.assert_close(
        post.covariance(X_test), expected.distribution.covariance_matrix
    )
    # below the threshold, all points are fitted
    small = frozen_source_posterior(
        TaskData(X[:20], Y[:20]), one, zero, fit_max_points=20, progress=False
    )
    assert small.mean(X_test).shape == (5,)
    with pytest.raises(ValueError, match="`fit_max_points` must be None or an int"):
        frozen_source_posterior(TaskData(X, Y), one, zero, fit_max_points=1)


def test_the_low_rank_mean_is_the_dtc_mean_and_exact_at_full_rank():
    gen = torch.Generator().manual_seed(3)
    X = torch.rand(40, 2, generator=gen, dtype=F64)
    y = torch.sin(4 * X).sum(-1)
    noise = 0.01 + 0.05 * torch.rand(40, generator=gen, dtype=F64)
    X_test = torch.rand(6, 2, generator=gen, dtype=F64)
    k = lambda A, B: rbf(A, B, torch.tensor(0.3, dtype=F64), 1.5)  # noqa: E731
    # truncated: the DTC mean on the chosen pivots Z, written from its formula
    with pytest.warns(UserWarning, match="rank 6"):
        low = GPSourcePosterior(X, y, noise, kernel(), max_rank=6, exact_mean=False)
    Z = low.inducing_points
    K_zn = k(Z, X)
    A = k(Z, Z) + K_zn @ (K_zn.T / noise.unsqueeze(-1))
    dtc = k(X_test, Z) @ torch.linalg.solve(A, K_zn @ (y / noise))
    torch.testing.assert_close(low.mean(X_test), dtc, rtol=1e-8, atol=1e-10)
    assert low.train_inputs.shape == (6, 2)  # nothing of size N kept for the mean
    # full rank: the exact posterior mean
    full = GPSourcePosterior(X, y, noise, kernel(), exact_mean=False, tolerance=0.0)
    ref_mean, _ = gp_posterior(k, X, y, noise)
    torch.testing.assert_close(
        full.mean(X_test), ref_mean(X_test), rtol=1e-8, atol=1e-10
    )


def test_the_mean_is_low_rank_above_the_exact_mean_limit(monkeypatch):
    from botorch_transfer.models import source_posterior as module

    monkeypatch.setattr(module, "EXACT_MEAN_MAX_POINTS", 30)
    X = torch.rand(31, 2, dtype=F64)
    source = GPSourcePosterior(
        X, X.sum(-1), torch.full((31,), 0.01, dtype=F64), kernel()
    )
    assert not source.exact_mean
    source = GPSourcePosterior(
        X[:30], X[:30].sum(-1), torch.full((30,), 0.01, dtype=F64), kernel()
    )
    assert source.exact_mean


def test_a_complete_factor_gives_the_mean_at_its_own_cost(monkeypatch):
    # 200 points on a line: the factor is complete at a small rank, and its mean is
    # the exact one at O(rank) per point instead of O(N) (for large sources only:
    # the limit is lowered to 200 here)
    from botorch_transfer.models import source_posterior as module

    gen = torch.Generator().manual_seed(4)
    X = torch.rand(200, 1, generator=gen, dtype=F64)
    y = torch.sin(6 * X).sum(-1)
    noise = torch.full((200,), 0.01, dtype=F64)
    X_test = torch.rand(7, 1, generator=gen, dtype=F64)
    k = lambda A, B: rbf(A, B, torch.tensor(0.3, dtype=F64), 1.5)  # noqa: E731
    ref_mean, _ = gp_posterior(k, X, y, noise)
    assert GPSourcePosterior(X, y, noise, kernel()).exact_mean  # below the limit
    monkeypatch.setattr(module, "DTC_MEAN_MIN_POINTS", 200)
    source = GPSourcePosterior(X, y, noise, kernel())
    assert source.rank < 200 and not source.exact_mean
    assert source.train_inputs.shape == (source.rank, 1)
    torch.testing.assert_close(source.mean(X_test), ref_mean(X_test), rtol=0, atol=1e-8)
    # a near noise-free source: what the factor leaves out is not negligible
    # against the noise, so the mean is solved exactly
    tiny = torch.full((200,), 1e-9, dtype=F64)
    assert GPSourcePosterior(X, y, tiny, kernel()).exact_mean
    # a truncated factor: exact mean (below EXACT_MEAN_MAX_POINTS)
    with pytest.warns(UserWarning, match="rank 5"):
        assert GPSourcePosterior(X, y, noise, kernel(), max_rank=5).exact_mean


def test_a_zero_tolerance_factors_to_round_off_not_past_it():
    # 300 noisy points: at tolerance 0 the factorization used to go on pivoting on
    # round-off residuals (~1e-16), its pivot block became singular and the
    # covariance NaN; it now stops at N * eps and is the reference's to round-off
    gen = torch.Generator().manual_seed(5)
    X = torch.rand(300, 2, generator=gen, dtype=F64)
    y = torch.sin(4 * X).sum(-1)
    noise = 0.05 + 0.1 * torch.rand(300, generator=gen, dtype=F64)
    k = lambda A, B: rbf(A, B, torch.tensor(0.3, dtype=F64), 1.5)  # noqa: E731
    ref_mean, ref_cov = gp_posterior(k, X, y, noise)
    X_test = torch.rand(20, 2, generator=gen, dtype=F64)
    source = GPSourcePosterior(X, y, noise, kernel(), tolerance=0.0)
    assert source.rank < 300
    torch.testing.assert_close(
        source.covariance(X_test), ref_cov(X_test, X_test), rtol=1e-8, atol=1e-10
    )
    torch.testing.assert_close(
        source.mean(X_test), ref_mean(X_test), rtol=1e-8, atol=1e-10
    )


def _source_with_transform(rank=40):
    from botorch.models.transforms.input import Normalize

    X = torch.rand(40, 2, dtype=F64) * 4
    transform = Normalize(d=2, bounds=torch.tensor([[0.0, 0.0], [4.0, 4.0]]).to(X))
    noise = torch.full((40,), 0.01, dtype=F64)
    return GPSourcePosterior(
        X,
        torch.sin(X).sum(-1),
        noise,
        kernel(),
        input_transform=transform,
        max_rank=rank,
    )


@pytest.mark.filterwarnings("ignore:Source posterior approximated")
@pytest.mark.parametrize("rank", [40, 15])
def test_joint_covariance_equals_the_covariance_of_the_stacked_points(rank):
    source = _source_with_transform(rank)
    source.set_output_affine(2.0, 1.0)
    X_fixed = torch.rand(6, 2, dtype=F64) * 4
    X = torch.rand(3, 2, 4, 2, dtype=F64) * 4
    stacked = torch.cat([X_fixed.expand(3, 2, 6, 2), X], dim=-2)
    for _ in range(2):  # the second call takes the fixed block from the cache
        torch.testing.assert_close(
            source.joint_covariance(X_fixed, X),
            source.covariance(stacked),
            rtol=1e-10,
            atol=1e-12,
        )


def test_a_cached_covariance_follows_the_posterior_state():
    source = _source_with_transform()
    X = torch.rand(5, 2, dtype=F64) * 4
    calls = []
    compute = source._covariance
    source._covariance = lambda *a: calls.append(1) or compute(*a)
    first = source.covariance(X)
    torch.testing.assert_close(source.covariance(X.clone()), first, rtol=0, atol=0)
    assert len(calls) == 1  # computed once for equal points
    del source._covariance
    # the output map applies to a cached result
    source.set_output_affine(3.0, 0.0)
    torch.testing.assert_close(source.covariance(X), 9 * first, rtol=1e-14, atol=0)
    # new buffers loaded (in place) into the same module: no stale covariance
    other = _source_with_transform()
    expected = other.covariance(X)
    source.load_state_dict(other.state_dict())
    torch.testing.assert_close(source.covariance(X), expected, rtol=1e-12, atol=0)
    # an in-place change of a buffer (not through load_state_dict) is seen too
    source.feature_map.mul_(0.5)
    fresh = _source_with_transform()
    fresh.load_state_dict(source.state_dict())
    fresh._covariance_cache = None
    torch.testing.assert_close(
        source.covariance(X), fresh.covariance(X), rtol=1e-12, atol=0
    )
    # a different dtype recomputes rather than returning float64 values
    assert source.to(torch.float32).covariance(X.float()).dtype == torch.float32


def test_points_that_need_a_gradient_get_one_through_the_covariance():
    source = _source_with_transform()
    X = (torch.rand(5, 2, dtype=F64) * 4).requires_grad_(True)
    source.covariance(X.detach())  # cached without a gradient
    source.covariance(X).sum().backward()
    assert X.grad is not None and X.grad.abs().sum() > 0


def test_a_frozen_source_adds_no_prior_terms_and_leaves_the_given_model_as_it_is():
    from botorch.models import SingleTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

    from botorch_transfer.models.frozen_source import source_posterior_from_model
    from botorch_transfer.models.source_posterior import ModelSourcePosterior

    gen = torch.Generator().manual_seed(0)
    X = torch.rand(12, 2, generator=gen, dtype=F64)
    Y = torch.sin(5 * X).sum(-1, keepdim=True)
    gp = SingleTaskGP(X, Y)
    prior_names = [name for name, *_ in gp.named_priors()]
    assert prior_names  # BoTorch's default kernel and noise have priors
    state = {k: v.clone() for k, v in gp.state_dict().items()}
    for source in (source_posterior_from_model(gp), ModelSourcePosterior(gp)):
        # the source's parameters are fixed: a prior on them is a constant in any
        # marginal likelihood of a model holding it, evaluated at every step
        assert not list(source.named_priors())
        assert not any(p.requires_grad for p in source.parameters())
    # the user's model keeps its priors, gradients and values
    assert [name for name, *_ in gp.named_priors()] == prior_names
    assert all(p.requires_grad for p in gp.parameters())
    for key, value in gp.state_dict().items():
        torch.testing.assert_close(value, state[key], rtol=0, atol=0)
    # a model holding frozen sources has the target's prior terms only
    plain = SingleTaskGP(X[:5], Y[:5])
    holder = SingleTaskGP(X[:5], Y[:5])
    holder.sources = torch.nn.ModuleList([source_posterior_from_model(gp)])
    names = [
        [
            name
            for name, *_ in ExactMarginalLogLikelihood(m.likelihood, m).named_priors()
        ]
        for m in (plain, holder)
    ]
    assert names[0] == names[1]
