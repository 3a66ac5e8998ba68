r"""RGPE against plain float64 linear algebra: the ranking loss, the leave-one-out
posteriors, the weights (same draws, independent means and covariances) and the
weighted posterior; then a BoTorch loop."""

import copy

import numpy as np
import pytest
import torch
from botorch.acquisition import UpperConfidenceBound, qLogNoisyExpectedImprovement
from botorch.exceptions.errors import UnsupportedError
from botorch.fit import _fit_fallback, fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms import Standardize
from botorch.optim import optimize_acqf
from botorch.sampling.pathwise import draw_matheron_paths
from gpytorch.means import ZeroMean
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP

from botorch_transfer import TaskData
from botorch_transfer.models.rgpe import RGPE, ranking_loss, ranking_weights
from tests.models.reference import gp_posterior, matern52, rbf
from tests.models.test_delta import (
    DELTA_LS,
    DELTA_OS,
    F64,
    SRC_LS,
    SRC_OS,
    TARGET_NOISE,
    delta_kernel,
    f,
    g,
    make_source,
    make_target,
    source_kernel,
)

RTOL, ATOL = 1e-8, 1e-10


def np_ranking_loss(samples, y):
    n = len(y)
    return sum(
        (samples[j] < samples[k]) != (y[j] < y[k]) for j in range(n) for k in range(n)
    )


def test_ranking_loss_counts_misranked_ordered_pairs():
    gen = torch.Generator().manual_seed(0)
    samples, y = torch.randn(6, 9, generator=gen), torch.randn(9, generator=gen)
    expected = [np_ranking_loss(s.numpy(), y.numpy()) for s in samples]
    assert ranking_loss(samples, y).tolist() == expected
    assert ranking_loss(y, y).item() == 0
    assert ranking_loss(-y, y).item() == 9 * 8  # every ordered pair misranked


def np_weights(losses):
    r"""Argmin counts over draws (no ties) after dropping base models whose median
    exceeds the target's 95th percentile (the target model is the last row)."""
    M, S = losses.shape
    keep = np.median(losses, axis=1) <= np.percentile(losses[-1], 95)
    keep[-1] = True
    masked = np.where(keep[:, None], losses, np.inf)
    return np.bincount(masked.argmin(axis=0), minlength=M) / S


def test_weights_without_ties_and_weight_dilution():
    rng = np.random.default_rng(0)
    # distinct non-integer losses: no ties, so the weights are deterministic
    losses = rng.permutation(400).reshape(4, 100).astype(float) + 0.25
    losses[1] += 1000  # a model far worse than the target: discarded
    weights = ranking_weights(torch.as_tensor(losses))
    np.testing.assert_allclose(weights.numpy(), np_weights(losses))
    assert weights[1] == 0 and weights.sum() == pytest.approx(1.0)


def test_ties_are_broken_uniformly():
    losses = torch.zeros(3, 6000)
    weights = ranking_weights(losses, torch.Generator().manual_seed(1))
    torch.testing.assert_close(
        weights, torch.full((3,), 1 / 3, dtype=F64), atol=0.03, rtol=0
    )


def fixed_source_gp(task):
    gp = SingleTaskGP(
        task.X, task.Y, task.Yvar, covar_module=source_kernel(),
        mean_module=ZeroMean(), outcome_transform=None,
    )  # fmt: skip
    return gp


def make_rgpe(sources, X, Y, **kwargs):
    return RGPE(
        X, Y, torch.full_like(Y, TARGET_NOISE), covar_module=delta_kernel(),
        mean_module=ZeroMean(), source=[fixed_source_gp(s) for s in sources], **kwargs,
    )  # fmt: skip


def references(sources, X, Y):
    def src_kernel(A, B):
        return matern52(A, B, SRC_LS, SRC_OS)

    def tgt_kernel(A, B):
        return rbf(A, B, DELTA_LS, DELTA_OS)

    parts = [
        gp_posterior(src_kernel, s.X, s.Y.squeeze(-1), s.Yvar.squeeze(-1))
        for s in sources
    ]
    noise = torch.full((X.shape[0],), TARGET_NOISE, dtype=F64)
    parts.append(gp_posterior(tgt_kernel, X, Y.squeeze(-1), noise))
    return parts, tgt_kernel


def test_leave_one_out_posteriors_equal_refits():
    sources = [make_source()]
    X, Y = make_target(n=7)
    model = make_rgpe(sources, X, Y)
    _, kernel = references(sources, X, Y)
    loo_mean, loo_var = model.loo_posterior()
    for j in range(7):
        rest = torch.arange(7) != j
        noise = torch.full((6,), TARGET_NOISE, dtype=F64)
        mean, cov = gp_posterior(kernel, X[rest], Y[rest].squeeze(-1), noise)
        x = X[j : j + 1]
        torch.testing.assert_close(loo_mean[j], mean(x)[0], rtol=RTOL, atol=ATOL)
        torch.testing.assert_close(loo_var[j], cov(x, x)[0, 0], rtol=1e-7, atol=ATOL)


def test_weights_and_posterior_equal_reference():
    related = make_source(n=30)
    unrelated = make_source(n=30, seed=5, fn=lambda Z: -g(Z))
    sources = [related, unrelated]
    X, Y = make_target(n=8)
    model = make_rgpe(sources, X, Y, num_samples=300, seed=4)
    parts, _ = references(sources, X, Y)
    # the same draws from independently computed means and covariances
    generator = torch.Generator().manual_seed(4)
    losses = []
    for mean, cov in parts[:-1]:
        C = cov(X, X) + 1e-8 * torch.eye(8, dtype=F64)
        z = torch.randn(300, 8, generator=generator).to(F64)
        draws = mean(X) + z @ torch.linalg.cholesky(C).T
        losses.append(ranking_loss(draws, Y.squeeze(-1)))
    loo_mean, loo_var = [], []
    for j in range(8):
        rest = torch.arange(8) != j
        noise = torch.full((7,), TARGET_NOISE, dtype=F64)
        kernel = references(sources, X, Y)[1]
        mean, cov = gp_posterior(kernel, X[rest], Y[rest].squeeze(-1), noise)
        loo_mean.append(mean(X[j : j + 1])[0])
        loo_var.append(cov(X[j : j + 1], X[j : j + 1])[0, 0])
    z = torch.randn(300, 8, generator=generator).to(F64)
    draws = torch.stack(loo_mean) + torch.stack(loo_var).sqrt() * z
    losses.append(ranking_loss(draws, Y.squeeze(-1)))
    expected = ranking_weights(torch.stack(losses), generator)
    torch.testing.assert_close(model.weights, expected, rtol=0, atol=1e-12)
    assert model.weights[0] > 0.5 and model.weights[1] < 0.05  # sanity
    # the posterior: N(sum_i w_i mu_i, sum_i w_i^2 Sigma_i), joint over q points
    w = model.weights
    X_test = torch.rand(3, 4, 2, dtype=F64)
    ref_mean = sum(w[i] * m(X_test) for i, (m, _) in enumerate(parts))
    ref_cov = sum(w[i] ** 2 * c(X_test, X_test) for i, (_, c) in enumerate(parts))
    post = model.posterior(X_test)
    torch.testing.assert_close(post.mean.squeeze(-1), ref_mean, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(
        post.distribution.covariance_matrix, ref_cov, rtol=RTOL, atol=ATOL
    )


def test_weights_follow_the_data_and_the_hyperparameters():
    X, Y = make_target(n=10)
    model = RGPE(X, Y, source=[make_source(n=30)])
    assert model.weights.shape == (2,) and model.weights.sum() == pytest.approx(1)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    # recomputed lazily with the fitted hyperparameters: equal to a fresh computation
    fitted = model.weights.clone()
    torch.testing.assert_close(model.update_weights(), fitted)
    cond = model.condition_on_observations(X[:3] + 0.01, f(X[:3]))
    rebuilt = RGPE(
        torch.cat([X, X[:3] + 0.01]),
        torch.cat([Y, f(X[:3])]),
        source=[make_source(n=30)],
    )
    rebuilt.load_state_dict(model.state_dict())
    torch.testing.assert_close(cond.weights, rebuilt.weights)
    # fewer than two target points: no pairs to rank, uniform weights
    few = RGPE(X[:1], Y[:1], source=[make_source(n=30)])
    torch.testing.assert_close(few.weights, torch.full((2,), 0.5, dtype=F64))


def test_bad_inputs():
    X, Y = make_target()
    with pytest.raises(TypeError, match=r"`source\[1\]` must be a TaskData"):
        RGPE(X, Y, source=[make_source(), "data"])
    with pytest.raises(ValueError, match="at least one source"):
        RGPE(X, Y, source=[])
    with pytest.raises(ValueError, match="`num_samples` must be a positive int"):
        RGPE(X, Y, source=make_source(), num_samples=0)
    with pytest.raises(ValueError, match=r"`source\[0\]` has input dimension d=3"):
        RGPE(
            X,
            Y,
            source=TaskData(torch.rand(5, 3, dtype=F64), torch.rand(5, 1, dtype=F64)),
        )


@pytest.mark.parametrize("acquisition", ["ucb", "qlognei"])
def test_bo_loop(acquisition):
    source = TaskData(make_source(n=25).X, make_source(n=25).Y)
    X, Y = make_target(n=3)
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=F64)
    for _ in range(3):
        model = RGPE(X, Y, source=[source])
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        acqf = (
            UpperConfidenceBound(model, beta=0.3)
            if acquisition == "ucb"
            else qLogNoisyExpectedImprovement(model, X_baseline=X)
        )
        x, _ = optimize_acqf(acqf, bounds, q=1, num_restarts=2, raw_samples=32)
        X, Y = torch.cat([X, x]), torch.cat([Y, f(x)])
    assert X.shape == (6, 2) and torch.isfinite(Y).all()


def test_pathwise_sampling_is_refused_not_silently_wrong():
    X, Y = make_target()
    model = RGPE(X, Y, source=make_source())
    with pytest.raises(UnsupportedError, match="omit the weighted base models"):
        draw_matheron_paths(model, sample_shape=torch.Size([2]))


def target_gp_mean(model, X):
    r"""The ensemble's target GP alone at ``X``, in the user's units."""
    with torch.no_grad():
        model.eval()
        mvn = ExactGP.__call__(model, model.transform_inputs(X))
        return mvn.mean * model.output_scale + model.output_offset


def test_the_target_gp_is_fitted_as_without_the_sources():
    gen = torch.Generator().manual_seed(3)
    X = torch.rand(6, 2, generator=gen, dtype=F64)
    Y = torch.sin(6 * X).sum(-1, keepdim=True)
    X_test = torch.rand(5, 2, generator=gen, dtype=F64)
    means = []
    for shift in (0.0, 30.0):  # sources in other places and scales
        Xs = torch.rand(8, 2, generator=gen, dtype=F64)
        source = TaskData(Xs, shift + (1 + shift) * torch.sin(6 * Xs).sum(-1, True))
        model = RGPE(X, Y, source=source, outcome_transform=Standardize(m=1))
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        means.append(target_gp_mean(model, X_test))
    torch.testing.assert_close(means[0], means[1], rtol=1e-6, atol=1e-6)


def test_a_source_of_one_point_warns_and_gets_no_weight():
    gen = torch.Generator().manual_seed(3)
    X = torch.rand(3, 2, generator=gen, dtype=F64)
    Y = torch.sin(6 * X).sum(-1, keepdim=True)
    tiny = TaskData(torch.rand(1, 2, generator=gen, dtype=F64), Y[:1] + 5.0)
    with pytest.warns(UserWarning, match=r"`source\[1\]` has 1 observation"):
        model = RGPE(X, Y, source=[make_source(), tiny])
    assert model.weights[1] == 0.0
    torch.testing.assert_close(model.weights.sum(), torch.tensor(1.0, dtype=F64))
    # also before the target can be ranked (uniform over the other models)
    with pytest.warns(UserWarning, match="too few to rank"):
        model = RGPE(X[:1], Y[:1], source=[make_source(), tiny])
    torch.testing.assert_close(model.weights, torch.tensor([0.5, 0.0, 0.5], dtype=F64))


def test_the_fit_leaves_the_base_models_in_place():
    gen = torch.Generator().manual_seed(4)
    X = torch.rand(6, 2, generator=gen, dtype=F64)
    Y = torch.sin(6 * X).sum(-1, keepdim=True)
    sources = [
        TaskData(Xs, torch.cos(5 * Xs).sum(-1, True))
        for Xs in torch.rand(2, 8, 2, generator=gen, dtype=F64)
    ]
    model = RGPE(X, Y, source=sources, outcome_transform=Standardize(m=1))
    keys = list(model.state_dict())
    reference = copy.deepcopy(model)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    # BoTorch's fit of the whole module tree, base models included
    _fit_fallback(mll=ExactMarginalLogLikelihood(reference.likelihood, reference))
    assert list(model.state_dict()) == keys
    assert len(model.base_posteriors) == len(sources)
    for (name, p), (_, p_ref) in zip(
        model.named_parameters(), reference.named_parameters(), strict=True
    ):
        torch.testing.assert_close(p, p_ref, msg=name)
    torch.testing.assert_close(model.weights, reference.weights)

    def failing_optimizer(*args, **kwargs):
        raise ValueError("the optimizer failed")

    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    with pytest.raises(ValueError, match="the optimizer failed"):
        fit_gpytorch_mll(mll, optimizer=failing_optimizer)
    assert list(model.state_dict()) == keys
