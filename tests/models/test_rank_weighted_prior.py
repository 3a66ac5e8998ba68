r"""RankWeightedPriorGP: its parts against plain linear algebra, the combination,
the weight against brute-force leave-one-out ranking, giving way to a target unlike
the meta-tasks, fantasies, bad input and a BO loop."""

import warnings

import pytest
import torch
from botorch.acquisition import UpperConfidenceBound
from botorch.fit import fit_gpytorch_mll
from botorch.optim import optimize_acqf
from botorch.posteriors import GPyTorchPosterior
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer import (
    PretrainedPriorGP,
    RankWeightedPriorGP,
    TaskData,
    pretrain_prior,
)
from botorch_transfer.models.rank_weighted_prior import (
    PRIOR_MISFIT_MAX_RMS_Z,
    PriorMisfitWarning,
)
from botorch_transfer.models.utils.ranking import ranking_weights

F64 = torch.float64


def task(X, a):
    r"""A family of related 1-d functions, one per ``a``."""
    return torch.sin(6 * X + a) + a * X


@pytest.fixture(scope="module")
def prior():
    X = torch.rand(20, 1, generator=torch.Generator().manual_seed(0), dtype=F64)
    tasks = [TaskData(X, task(X, a)) for a in torch.linspace(-1, 1, 8, dtype=F64)]
    return pretrain_prior(tasks, progress=False)


def target_data(n=8, unlike=False, seed=1):
    X = torch.rand(n, 1, generator=torch.Generator().manual_seed(seed), dtype=F64)
    Y = task(X, 0.3)
    if unlike:  # upside down, shifted and rougher than any meta-task
        Y = -3 * Y + 5 + torch.cos(20 * X)
    return X, Y


def fitted(model):
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


def plain_posterior(model, X_train, y, Xt, noise):
    r"""``N(m_t + C_tX (C_XX + N)^-1 (y - m_X), C_tt - C_tX (C_XX + N)^-1 C_Xt)``
    from the GP's prior (its ``forward``) at the training and test points."""
    model.train()
    with torch.no_grad():
        joint = model.forward(torch.cat([X_train, Xt]))
    model.eval()
    n = X_train.shape[0]
    m, C = joint.mean, joint.covariance_matrix
    K = C[:n, :n] + torch.diag(noise)
    A = torch.linalg.solve(K, C[:n, n:]).T
    return m[n:] + A @ (y - m[:n]), C[n:, n:] - A @ C[:n, n:]


def test_parts_are_the_plain_gaussian_conditionals(prior):
    X, Y = target_data()
    model = fitted(RankWeightedPriorGP(X, Y, prior=prior))
    Xt = torch.rand(5, 1, generator=torch.Generator().manual_seed(2), dtype=F64)
    # the prior model: the pre-trained GP conditioned on the target data
    part = model.prior_model
    noise = part.likelihood.noise.detach().expand(X.shape[0])
    mean, cov = plain_posterior(part, X, Y.squeeze(-1), Xt, noise)
    post = part.posterior(Xt)
    torch.testing.assert_close(post.mean.squeeze(-1), mean)
    torch.testing.assert_close(post.distribution.covariance_matrix, cov)
    # the target-only GP, in standardized units, then mapped back
    part = model.target_model
    s, mu = part.outcome_transform.stdvs.squeeze(), part.outcome_transform.means
    z = ((Y - mu) / s).squeeze(-1)
    noise = part.likelihood.noise.detach().expand(X.shape[0])
    mean, cov = plain_posterior(part, X, z, Xt, noise)
    post = part.posterior(Xt)
    torch.testing.assert_close(post.mean.squeeze(-1), mu.squeeze() + s * mean)
    torch.testing.assert_close(post.distribution.covariance_matrix, s**2 * cov)


def test_posterior_is_rgpes_weighted_combination(prior):
    X, Y = target_data()
    model = fitted(RankWeightedPriorGP(X, Y, prior=prior))
    w = model.prior_weight
    assert 0.0 < w < 1.0
    Xt = torch.rand(3, 4, 1, dtype=F64)
    post = model.posterior(Xt)
    assert isinstance(post, GPyTorchPosterior)
    assert post.mean.shape == (3, 4, 1)
    p1, p2 = model.prior_model.posterior(Xt), model.target_model.posterior(Xt)
    torch.testing.assert_close(post.mean, w * p1.mean + (1 - w) * p2.mean)
    cov = (
        w**2 * p1.distribution.covariance_matrix
        + (1 - w) ** 2 * p2.distribution.covariance_matrix
    )
    torch.testing.assert_close(post.distribution.covariance_matrix, cov)
    model._weights = torch.tensor(
        [0.0, 1.0], dtype=torch.float64
    )  # no weight: the target-only GP's posterior exactly
    torch.testing.assert_close(model.posterior(Xt).mean, p2.mean)
    torch.testing.assert_close(model.posterior(Xt).variance, p2.variance)


@pytest.mark.parametrize("known_noise", [False, True])
def test_observation_noise_is_the_target_noise(prior, known_noise):
    X, Y = target_data()
    Yvar = torch.full_like(Y, 0.04) if known_noise else None
    model = fitted(RankWeightedPriorGP(X, Y, Yvar, prior=prior))
    Xt = torch.rand(5, 1, dtype=F64)
    added = (
        model.posterior(Xt, observation_noise=True).variance
        - model.posterior(Xt).variance
    )
    if known_noise:
        expected = torch.full_like(added, 0.04)
    else:  # the target-only GP's learned noise in the user's units
        target = model.target_model
        scale = target.outcome_transform.stdvs.item() ** 2
        expected = torch.full_like(added, target.likelihood.noise.item() * scale)
    torch.testing.assert_close(added, expected)


def brute_force_loo_losses(model, num_samples, seed):
    r"""Each model's LOO posterior by conditioning on the other points (plain linear
    algebra on its prior), the same draws, misordered pairs counted pair by pair."""
    generator = torch.Generator().manual_seed(seed)
    losses = []
    for part in (model.prior_model, model.target_model):
        part.train()
        with torch.no_grad():
            X = part.train_inputs[0]
            prior = part.forward(X)
            noise = part.likelihood.noise.detach().expand(X.shape[0])
        part.eval()
        y, n = part.train_targets, X.shape[0]
        m, C = prior.mean, prior.covariance_matrix
        means, variances = [], []
        for i in range(n):
            rest = [j for j in range(n) if j != i]
            K = C[rest][:, rest] + torch.diag(noise[rest])
            a = torch.linalg.solve(K, C[rest, i])
            means.append(m[i] + a @ (y[rest] - m[rest]))
            variances.append(C[i, i] - a @ C[rest, i])
        mean, variance = torch.stack(means), torch.stack(variances)
        z = torch.randn(num_samples, n, generator=generator, dtype=y.dtype)
        draws = mean + variance.sqrt() * z
        counts = []
        for draw in draws.tolist():
            counts.append(
                sum(
                    (draw[j] < draw[k]) != (float(y[j]) < float(y[k]))
                    for j in range(n)
                    for k in range(n)
                )
            )
        losses.append(torch.tensor(counts))
    return torch.stack(losses)


def test_weight_is_the_ranking_evidence_of_brute_force_loo_draws(prior):
    X, Y = target_data(n=9)
    model = fitted(RankWeightedPriorGP(X, Y, prior=prior, num_samples=32))
    expected = brute_force_loo_losses(model, 32, model.seed)
    torch.testing.assert_close(model.ranking_losses(), expected, check_dtype=False)
    w = ranking_weights(expected, torch.Generator().manual_seed(model.seed + 1))[0]
    assert model.prior_weight == pytest.approx(float(w))


def test_the_prior_gives_way_to_a_target_unlike_the_meta_tasks(prior):
    # one design can rank either way by chance: the mean over five designs
    weights = {}
    for unlike in (False, True):
        weights[unlike] = (
            sum(
                fitted(
                    RankWeightedPriorGP(*target_data(12, unlike, seed), prior=prior)
                ).prior_weight
                for seed in range(1, 6)
            )
            / 5
        )
    assert weights[False] > 0.6
    assert weights[True] < 0.5 * weights[False]


def unrelated_data(n, seed):
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 1, generator=gen, dtype=F64)
    Y = 1.5 * torch.cos(13 * X + seed) + X**2
    return X, Y + 0.05 * torch.randn(n, 1, generator=gen, dtype=F64)


@pytest.mark.parametrize("n", [5, 15])
def test_a_prior_that_does_not_fit_gets_no_weight_and_a_warning(prior, n):
    for seed in range(3):
        X, Y = unrelated_data(n, seed)
        with pytest.warns(PriorMisfitWarning, match="weight 0"):
            model = fitted(RankWeightedPriorGP(X, Y, prior=prior))
        assert model.prior_weight == 0.0
        assert model.prior_misfit > PRIOR_MISFIT_MAX_RMS_Z
        # the posterior is the target-only GP's
        Xt = torch.rand(4, 1, dtype=F64)
        expected = model.target_model.posterior(Xt)
        torch.testing.assert_close(model.posterior(Xt).mean, expected.mean)


def test_prior_misfit_is_the_rms_of_brute_force_loo_z_scores(prior):
    X, Y = target_data(n=6)
    model = fitted(RankWeightedPriorGP(X, Y, prior=prior))
    part = model.prior_model
    part.train()
    with torch.no_grad():
        joint = part.forward(X)
        noise = part.likelihood.noise.detach().expand(6)
    part.eval()
    m, C = joint.mean, joint.covariance_matrix + torch.diag(noise)
    y, z = part.train_targets, []
    for i in range(6):
        rest = [j for j in range(6) if j != i]
        a = torch.linalg.solve(C[rest][:, rest], C[rest, i])
        mean, variance = m[i] + a @ (y[rest] - m[rest]), C[i, i] - a @ C[rest, i]
        z.append((y[i] - mean) / variance.sqrt())
    expected = torch.stack(z).pow(2).mean().sqrt().item()
    assert model.prior_misfit == pytest.approx(expected, rel=1e-6)


def test_a_related_target_keeps_the_prior_and_no_misfit_warning(prior):
    with warnings.catch_warnings():
        warnings.simplefilter("error", PriorMisfitWarning)
        for n in (5, 15):
            model = fitted(RankWeightedPriorGP(*target_data(n), prior=prior))
            assert model.prior_weight > 0.0


def test_a_target_in_other_units_than_the_prior_gets_no_weight(prior):
    X, Y = target_data(n=8)
    with pytest.warns(PriorMisfitWarning, match="other units"):
        model = fitted(RankWeightedPriorGP(X, 1000 * Y, prior=prior))
    assert model.prior_weight == 0.0


def test_too_few_points_to_rank_split_evenly(prior):
    X, Y = target_data(n=1)
    model = fitted(RankWeightedPriorGP(X, Y, prior=prior))
    assert model.prior_weight == 0.5
    assert model.posterior(X).mean.shape == (1, 1)


def test_bad_input_names_the_argument(prior):
    X, Y = target_data()
    with pytest.raises(ValueError, match="at least one target point"):
        RankWeightedPriorGP(X[:0], Y[:0], prior=prior)
    with pytest.raises(TypeError, match="`prior` must be"):
        RankWeightedPriorGP(X, Y, prior=TaskData(X, Y))
    with pytest.raises(ValueError, match="`num_samples` must be a positive int"):
        RankWeightedPriorGP(X, Y, prior=prior, num_samples=0)
    with pytest.raises(TypeError, match="`num_samples` must be an int"):
        RankWeightedPriorGP(X, Y, prior=prior, num_samples=2.0)
    with pytest.raises(ValueError, match="`train_X` must have shape n x d"):
        RankWeightedPriorGP(X.unsqueeze(0), Y.unsqueeze(0), prior=prior)
    model = fitted(RankWeightedPriorGP(X, Y, prior=prior))
    with pytest.raises(ValueError, match="`output_indices`"):
        model.posterior(X, output_indices=[1])


def test_condition_on_observations_keeps_the_weight(prior):
    X, Y = target_data()
    model = fitted(RankWeightedPriorGP(X, Y, prior=prior))
    w = model.prior_weight
    Xn, Yn = target_data(n=2, seed=5)
    new = model.condition_on_observations(Xn, Yn)
    assert new.prior_weight == w and model.prior_model is not new.prior_model
    Xt = torch.rand(4, 1, dtype=F64)
    parts = [
        part.posterior(Xt)
        for part in (
            PretrainedPriorGP(torch.cat([X, Xn]), torch.cat([Y, Yn]), prior=prior),
            new.target_model,
        )
    ]
    mean = w * parts[0].mean + (1 - w) * parts[1].mean
    torch.testing.assert_close(new.posterior(Xt).mean, mean)
    # the original model is unchanged
    assert model.target_model.train_targets.shape[-1] == X.shape[0]


def test_state_dict_round_trip_recomputes_the_weight(prior):
    X, Y = target_data()
    model = fitted(RankWeightedPriorGP(X, Y, prior=prior))
    other = RankWeightedPriorGP(X, Y, prior=prior)
    other.load_state_dict(model.state_dict())
    assert other.prior_weight == model.prior_weight


def test_end_to_end_bo_loop(prior):
    bounds = torch.tensor([[0.0], [1.0]], dtype=F64)
    X, Y = target_data(n=2)
    for _ in range(4):
        model = fitted(RankWeightedPriorGP(X, Y, prior=prior))
        assert 0.0 <= model.prior_weight <= 1.0
        x, _ = optimize_acqf(
            UpperConfidenceBound(model, beta=1.0),
            bounds,
            q=1,
            num_restarts=4,
            raw_samples=64,
        )
        assert ((x >= 0) & (x <= 1)).all()
        X, Y = torch.cat([X, x]), torch.cat([Y, task(x, 0.3)])
    assert Y[2:].max() >= Y[:2].max()
