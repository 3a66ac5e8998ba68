import copy
import itertools
import warnings

import pytest
import torch
from botorch.acquisition import (
    LogExpectedImprovement,
    UpperConfidenceBound,
    qLogNoisyExpectedImprovement,
    qUpperConfidenceBound,
)
from botorch.exceptions.errors import UnsupportedError
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize
from botorch.optim import optimize_acqf
from botorch.posteriors import GPyTorchPosterior
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.kernels import MaternKernel
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer import RankWeightedTransferGP, TaskColumn, TaskData
from botorch_transfer.models import RankingOptions
from botorch_transfer.models.source_gp import fit_source_gp
from botorch_transfer.models.utils.loo import exact_loo_posterior
from botorch_transfer.models.utils.ranking import ranking_loss, ranking_weights
from botorch_transfer.models.utils.source_skill import (
    UninformativeSourceWarning,
    source_skill,
)

BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)


def objective(X):
    return torch.sin(6 * X[..., :1]) + X[..., 1:] ** 2


def make_data(n=8, n_source=40, seed=0, scale=3.0, offset=1.0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    Xs = torch.rand(n_source, 2, generator=gen, dtype=dtype)
    Ys = objective(Xs) + 0.05 * torch.randn(n_source, 1, generator=gen, dtype=dtype)
    X = torch.rand(n, 2, generator=gen, dtype=dtype)
    Y = scale * objective(X) + offset
    Y = Y + 0.05 * torch.randn(n, 1, generator=gen, dtype=dtype)
    return TaskData(Xs, Ys), X, Y


def fitted(model):
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


def plain_source_gp(source, lengthscale=(0.3, 0.5), noise=1e-3):
    r"""A source GP with known hyperparameters in the user's units (no transforms)."""
    gp = SingleTaskGP(
        source.X,
        source.Y,
        torch.full_like(source.Y, noise),
        covar_module=MaternKernel(nu=2.5, ard_num_dims=2),
        outcome_transform=None,
    ).to(source.X)
    gp.covar_module.lengthscale = torch.tensor(lengthscale).to(source.X)
    gp.mean_module.constant.data.fill_(0.2)
    gp.eval()
    return gp


def test_transfer_part_is_the_exact_joint_conditional_of_the_coregionalized_model():
    # f_target = a g + c + delta, g ~ GP(m0, k), delta ~ GP(0, s2 k), both observed
    # with known noise: the posterior at test points, written as one Gaussian
    # conditional on the source and target data together
    source, X, Y = make_data()
    gp = plain_source_gp(source)
    Yvar = torch.full_like(Y, 0.01)
    model = RankWeightedTransferGP(X, Y, Yvar, outcome_transform=None, source=gp)
    transfer = model.transfer_model
    with torch.no_grad():
        transfer.source_scale.fill_(1.7)
        transfer.source_offset.fill_(0.4)
        transfer.delta_covar_module.outputscale = torch.tensor(0.3).to(X)
    a, c, s2, m0 = 1.7, 0.4, 0.3, 0.2
    k = lambda A, B: gp.covar_module(A, B).to_dense().detach()  # noqa: E731
    Xs, ys = source.X, source.Y.squeeze(-1)
    Xt = torch.rand(5, 2, generator=torch.Generator().manual_seed(9)).to(X)
    K = torch.cat(
        [
            torch.cat([k(Xs, Xs) + 1e-3 * torch.eye(len(Xs)), a * k(Xs, X)], 1),
            torch.cat(
                [a * k(X, Xs), (a * a + s2) * k(X, X) + 0.01 * torch.eye(len(X))], 1
            ),
        ]
    ).to(X)
    data = torch.cat([ys - m0, Y.squeeze(-1) - (a * m0 + c)])
    cross = torch.cat([a * k(Xt, Xs), (a * a + s2) * k(Xt, X)], 1)
    mean = a * m0 + c + cross @ torch.linalg.solve(K, data)
    covariance = (a * a + s2) * k(Xt, Xt) - cross @ torch.linalg.solve(K, cross.T)
    posterior = transfer.posterior(Xt)
    torch.testing.assert_close(posterior.mean.squeeze(-1), mean, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(
        posterior.distribution.covariance_matrix, covariance, rtol=1e-5, atol=1e-6
    )


def test_default_source_factor_leaves_out_less_than_its_tolerance():
    # the default factor stops at a residual prior variance of 1e-6 (the kernel's
    # variance is 1 here): the posterior moves by about that much, at a lower rank
    source, X, Y = make_data(n_source=400)
    gp = plain_source_gp(source)
    Yvar = torch.full_like(Y, 0.01)
    exact, default = (
        RankWeightedTransferGP(
            X, Y, Yvar, outcome_transform=None, source=gp, **tolerance
        ).transfer_model
        for tolerance in ({"source_tolerance": 1e-10}, {})  # the exact factor
    )
    assert default.source_posterior.rank < exact.source_posterior.rank
    Xt = torch.rand(6, 2, generator=torch.Generator().manual_seed(3)).to(X)
    with torch.no_grad():
        a, b = exact.posterior(Xt), default.posterior(Xt)
    torch.testing.assert_close(b.mean, a.mean, rtol=0, atol=1e-5)
    torch.testing.assert_close(
        b.distribution.covariance_matrix,
        a.distribution.covariance_matrix,
        rtol=0,
        atol=1e-5,
    )


def test_loo_posterior_equals_refitting_without_each_point():
    source, X, Y = make_data(n=6)
    gp = plain_source_gp(source)
    model = RankWeightedTransferGP(X, Y, torch.full_like(Y, 0.01), source=gp)
    target = model.target_model
    shift, variance, noise = exact_loo_posterior(target)
    stdv = target.outcome_transform.stdvs.squeeze()
    torch.testing.assert_close(noise, torch.full_like(noise, 0.01) / stdv**2)
    y = target.train_targets
    for i in range(6):
        keep = torch.arange(6) != i
        # the target GP in model units: the same kernel, mean and noise
        Ks = target.covar_module(X[keep]).to_dense() + torch.diag(noise[keep])
        kx = target.covar_module(X[i : i + 1], X[keep]).to_dense()
        m = target.mean_module(X).detach()
        mean = m[i] + (kx @ torch.linalg.solve(Ks, (y[keep] - m[keep]).unsqueeze(-1)))
        var = target.covar_module(X[i : i + 1]).to_dense() - kx @ torch.linalg.solve(
            Ks, kx.T
        )
        torch.testing.assert_close(y[i] - shift[i], mean.squeeze().detach())
        torch.testing.assert_close(variance[i], var.squeeze().detach())


def test_transfer_loo_equals_the_model_rebuilt_without_each_point():
    source, X, Y = make_data(n=6)
    model = RankWeightedTransferGP(
        X, Y, torch.full_like(Y, 0.01), source=plain_source_gp(source)
    )
    transfer = model.transfer_model
    shift, variance, _ = exact_loo_posterior(transfer)
    tX, tY, tYvar = transfer._target_X, transfer._target_Y, transfer._target_Yvar
    try:
        for i in range(6):
            keep = torch.arange(6) != i
            transfer._set_target_data(tX[keep], tY[keep], tYvar[keep])
            transfer.eval()
            with torch.no_grad():
                post = transfer.posterior(X[i : i + 1])
            scale = transfer.output_scale
            mean = (post.mean.squeeze() - transfer.output_offset) / scale
            torch.testing.assert_close(tY[i] - shift[i], mean)
            torch.testing.assert_close(variance[i], post.variance.squeeze() / scale**2)
    finally:
        transfer._set_target_data(tX, tY, tYvar)


def test_posterior_is_rgpes_weighted_combination():
    source, X, Y = make_data()
    model = fitted(RankWeightedTransferGP(X, Y, source=source))
    w = model.transfer_weight
    assert 0.0 < w < 1.0
    Xt = torch.rand(3, 4, 2, dtype=torch.float64)
    post = model.posterior(Xt)
    assert isinstance(post, GPyTorchPosterior)
    assert post.mean.shape == (3, 4, 1)
    p1, p2 = model.transfer_model.posterior(Xt), model.target_model.posterior(Xt)
    mean = w * p1.mean + (1 - w) * p2.mean
    cov = (
        w**2 * p1.distribution.covariance_matrix
        + (1 - w) ** 2 * p2.distribution.covariance_matrix
    )
    torch.testing.assert_close(post.mean, mean)
    torch.testing.assert_close(post.distribution.covariance_matrix, cov)
    # observation noise: the target's whole noise (the target-only GP's, learned)
    noisy = model.posterior(Xt, observation_noise=True)
    target_noise = model.target_model.likelihood.noise.item() * (
        model.target_model.outcome_transform.stdvs.item() ** 2
    )
    torch.testing.assert_close(
        noisy.distribution.covariance_matrix,
        cov + target_noise * torch.eye(4, dtype=torch.float64),
    )
    # no weight: the target-only GP's posterior exactly
    model._weights = torch.tensor([0.0, 1.0], dtype=torch.float64)
    torch.testing.assert_close(model.posterior(Xt).mean, p2.mean)
    torch.testing.assert_close(model.posterior(Xt).variance, p2.variance)


def test_observation_noise_is_the_known_target_noise():
    source, X, Y = make_data()
    Yvar = torch.full_like(Y, 0.04)
    model = fitted(RankWeightedTransferGP(X, Y, Yvar, source=source))
    Xt = torch.rand(5, 2, dtype=torch.float64)
    added = model.posterior(Xt, observation_noise=True).variance
    torch.testing.assert_close(added - model.posterior(Xt).variance, Yvar[:5])


def loo_draws(model, num_samples):
    r"""``(draws, targets)`` of the transfer GP and the target-only GP, in that
    order: their closed-form LOO posteriors drawn as the model draws them (one
    generator seeded with the model's seed)."""
    generator = torch.Generator().manual_seed(model.seed)
    parts = []
    for part, targets in (
        (model.transfer_model, model.transfer_model._target_Y),
        (model.target_model, model.target_model.train_targets),
    ):
        shift, variance, _ = exact_loo_posterior(part)
        n = targets.shape[-1]
        z = torch.randn(num_samples, n, generator=generator, dtype=targets.dtype)
        parts.append(((targets - shift) + variance.sqrt() * z, targets))
    return parts


def test_weight_is_the_ranking_evidence_of_the_loo_draws():
    source, X, Y = make_data(n=10)
    model = fitted(
        RankWeightedTransferGP(X, Y, source=source, ranking=RankingOptions(64))
    )
    losses = model.ranking_losses()
    assert losses.shape == (2, 64)
    # recomputed by hand from the closed-form LOO posteriors and the same draws
    expected = [ranking_loss(draws, y) for draws, y in loo_draws(model, 64)]
    torch.testing.assert_close(losses, torch.stack(expected))
    w = ranking_weights(losses, torch.Generator().manual_seed(model.seed + 1))[0]
    assert model.transfer_weight == pytest.approx(float(w))


def test_a_pair_margin_counts_only_pairs_that_differ_beyond_the_noise():
    source, X, Y = make_data(n=10)
    Y[3] = Y[4] + 0.01  # a pair inside the noise
    model = fitted(
        RankWeightedTransferGP(
            X,
            Y,
            train_Yvar=torch.full_like(Y, 0.05**2),
            source=source,
            ranking=RankingOptions(num_samples=64, pair_margin=2.0),
        )
    )
    # by hand: (j, k) counts when |y_j - y_k| > 2 sd of a difference, 2 sqrt(2) 0.05
    y = Y.squeeze(-1)
    threshold = 2.0 * (2 * 0.05**2) ** 0.5
    counted = torch.tensor(
        [[abs(float(y[j] - y[k])) > threshold for k in range(10)] for j in range(10)]
    )
    assert not counted[3, 4] and not counted.diagonal().any()
    assert 0 < counted.sum() < 90
    torch.testing.assert_close(model.ranked_pairs(), counted)
    expected = []
    for draws, _ in loo_draws(model, 64):
        loss = torch.zeros(64, dtype=torch.long)
        for j, k in itertools.product(range(10), range(10)):
            if counted[j, k]:
                misranked = (draws[:, j] < draws[:, k]) != bool(y[j] < y[k])
                loss += misranked.long()
        expected.append(loss)
    torch.testing.assert_close(model.ranking_losses(), torch.stack(expected))
    w = ranking_weights(
        torch.stack(expected), torch.Generator().manual_seed(model.seed + 1)
    )[0]
    assert model.transfer_weight == pytest.approx(float(w))
    # every pair of distinct observations is counted at margin 0, as by default
    noise = torch.full_like(Y, 0.05**2)
    loose = RankWeightedTransferGP(
        X, Y, noise, source=source, ranking=RankingOptions(pair_margin=0.0)
    )
    loose.load_state_dict(model.state_dict())
    default = RankWeightedTransferGP(X, Y, noise, source=source)
    default.load_state_dict(model.state_dict())
    torch.testing.assert_close(loose.ranking_losses(), default.ranking_losses())
    for bad in (-1.0, float("nan"), "2", True):
        with pytest.raises(ValueError, match="`pair_margin`"):
            RankingOptions(pair_margin=bad)


def test_related_source_gets_weight_and_a_scrambled_one_loses_it():
    source, X, Y = make_data(n=12, n_source=60)
    related = fitted(RankWeightedTransferGP(X, Y, source=source))
    perm = torch.randperm(60, generator=torch.Generator().manual_seed(1))
    scrambled = TaskData(source.X, source.Y[perm])
    # the ranking alone (the skill check off) weights the scrambled source down
    unrelated = fitted(
        RankWeightedTransferGP(X, Y, source=scrambled, min_source_skill=None)
    )
    assert related.transfer_weight > 0.6
    assert unrelated.transfer_weight < related.transfer_weight
    assert not related.source_uninformative and related.source_skill > 0.9


def test_a_source_without_structure_gets_no_weight_and_a_warning():
    # a scrambled source predicts none of its own left-out inputs: weight 0 at every
    # fit, and the posterior is the target-only GP's
    source, X, Y = make_data(n=12, n_source=60)
    perm = torch.randperm(60, generator=torch.Generator().manual_seed(1))
    scrambled = TaskData(source.X, source.Y[perm])
    transform = Normalize(2, bounds=BOUNDS)
    with pytest.warns(UninformativeSourceWarning, match="R\\^2 = .*`min_source_skill`"):
        model = RankWeightedTransferGP(
            X, Y, source=scrambled, input_transform=transform
        )
    assert model.source_uninformative
    gp = fit_source_gp(scrambled, transform)
    assert model.source_skill == source_skill(gp) < 0.1
    fitted(model)
    assert model.transfer_weight == 0.0
    target_only = fitted(
        SingleTaskGP(X, Y, input_transform=Normalize(2, bounds=BOUNDS))
    )
    Xt = torch.rand(4, 2, generator=torch.Generator().manual_seed(3), dtype=X.dtype)
    expected = target_only.posterior(Xt)
    posterior = model.posterior(Xt)
    torch.testing.assert_close(posterior.mean, expected.mean)
    torch.testing.assert_close(posterior.variance, expected.variance)
    # a threshold below its skill, or none, leaves the weight to the ranking
    for threshold in (None, -1.0):
        kept = fitted(
            RankWeightedTransferGP(
                X,
                Y,
                source=scrambled,
                input_transform=transform,
                min_source_skill=threshold,
            )
        )
        assert not kept.source_uninformative
        generator = torch.Generator().manual_seed(kept.seed + 1)
        ranked = ranking_weights(kept.ranking_losses(), generator)[0]
        assert kept.transfer_weight == pytest.approx(float(ranked))


def test_too_few_points_to_rank_split_evenly():
    source, X, Y = make_data(n=1)
    model = fitted(RankWeightedTransferGP(X, Y, source=source))
    assert model.transfer_weight == 0.5
    assert model.posterior(X).mean.shape == (1, 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_condition_on_observations_and_fantasize(dtype):
    source, X, Y = make_data(dtype=dtype)
    # no outcome scaling: a rebuild would refit it on the new data
    options = dict(
        source=source,
        outcome_transform=None,
        input_transform=Normalize(2, bounds=BOUNDS.to(dtype)),
    )
    model = fitted(RankWeightedTransferGP(X, Y, **options))
    Xn = torch.rand(2, 2, dtype=dtype)
    Yn = objective(Xn)
    conditioned = model.condition_on_observations(Xn, Yn)
    assert conditioned.transfer_weight == model.transfer_weight
    assert conditioned.target_X.shape[-2] == X.shape[-2] + 2
    # the same as both GPs rebuilt on all data with the same hyperparameters
    rebuilt = RankWeightedTransferGP(torch.cat([X, Xn]), torch.cat([Y, Yn]), **options)
    rebuilt.load_state_dict(model.state_dict())
    rebuilt._weights = model.weights
    Xt = torch.rand(4, 2, dtype=dtype)
    tol = dict(rtol=1e-3, atol=1e-3) if dtype == torch.float32 else {}
    torch.testing.assert_close(
        conditioned.posterior(Xt).mean, rebuilt.posterior(Xt).mean, **tol
    )
    sampler = SobolQMCNormalSampler(torch.Size([3]))
    fantasy = model.fantasize(torch.rand(1, 2, dtype=dtype), sampler)
    assert fantasy.posterior(Xt).mean.shape == (3, 4, 1)


def test_state_dict_round_trip_recomputes_the_weight():
    source, X, Y = make_data()
    model = fitted(RankWeightedTransferGP(X, Y, source=source))
    fresh = RankWeightedTransferGP(X, Y, source=source)
    fresh.load_state_dict(model.state_dict())
    assert fresh.transfer_weight == pytest.approx(model.transfer_weight)
    Xt = torch.rand(3, 2, dtype=torch.float64)
    torch.testing.assert_close(fresh.posterior(Xt).mean, model.posterior(Xt).mean)


def test_bad_input_names_the_argument():
    source, X, Y = make_data()
    with pytest.raises(ValueError, match="`train_X`"):
        RankWeightedTransferGP(X.unsqueeze(0), Y.unsqueeze(0), source=source)
    with pytest.raises(ValueError, match="`source` is an empty sequence"):
        RankWeightedTransferGP(X, Y, source=[])
    with pytest.raises(TypeError, match="`source` must be a TaskData"):
        RankWeightedTransferGP(X, Y, source=[source, source.X])
    named = TaskData(source.X, source.Y, name="last month")
    with pytest.raises(ValueError, match="several tasks named \\['last month'\\]"):
        RankWeightedTransferGP(X, Y, source=[named, named])
    with pytest.raises(ValueError, match="`source` 'last month' has 2 input"):
        RankWeightedTransferGP(X[:, :1], Y, source=[named])
    with pytest.raises(TypeError, match="`source`"):
        RankWeightedTransferGP(X, Y, source=source.X)
    with pytest.raises(ValueError, match="`source`"):
        RankWeightedTransferGP(X[:, :1], Y, source=source)
    with pytest.raises(ValueError, match="`num_samples`"):
        RankWeightedTransferGP(
            X, Y, source=source, ranking=RankingOptions(num_samples=0)
        )
    with pytest.raises(TypeError, match="`outcome_transform`"):
        RankWeightedTransferGP(X, Y, source=source, outcome_transform=Normalize(1))
    with pytest.raises(ValueError, match="`min_source_skill`"):
        RankWeightedTransferGP(X, Y, source=source, min_source_skill=1.5)
    with pytest.raises(TypeError, match="`min_source_skill`"):
        RankWeightedTransferGP(X, Y, source=source, min_source_skill="0.1")
    model = RankWeightedTransferGP(X, Y, source=source)
    with pytest.raises(ValueError, match="`output_indices`"):
        model.posterior(X, output_indices=[1])


def test_end_to_end_bo_loop():
    source, X, Y = make_data(n=3, scale=1.0, offset=0.0)
    weights = []
    for _ in range(4):
        model = fitted(
            RankWeightedTransferGP(
                X, Y, source=source, input_transform=Normalize(2, bounds=BOUNDS)
            )
        )
        weights.append(model.transfer_weight)
        acqf = (
            UpperConfidenceBound(model, beta=2.0)
            if len(weights) % 2
            else LogExpectedImprovement(model, best_f=model.target_Y.max())
        )
        candidate, _ = optimize_acqf(
            acqf, bounds=BOUNDS, q=1, num_restarts=2, raw_samples=32
        )
        X = torch.cat([X, candidate])
        Y = torch.cat([Y, objective(candidate)])
    acqf = qLogNoisyExpectedImprovement(model, X_baseline=model.target_X)
    candidates, _ = optimize_acqf(
        acqf, bounds=BOUNDS, q=2, num_restarts=2, raw_samples=32
    )
    assert candidates.shape == (2, 2)
    assert all(0.0 <= w <= 1.0 for w in weights)
    assert X.shape == (7, 2)


def test_copy_is_independent():
    source, X, Y = make_data()
    model = fitted(RankWeightedTransferGP(X, Y, source=source))
    twin = copy.deepcopy(model)
    assert twin.transfer_weight == model.transfer_weight
    for (_, a), (_, b) in itertools.product(
        twin.named_parameters(), model.named_parameters()
    ):
        assert a is not b


def test_an_empty_source_is_a_clear_error():
    _, X, Y = make_data()
    empty = TaskData(torch.empty(0, 2, dtype=X.dtype), torch.empty(0, 1, dtype=X.dtype))
    with pytest.raises(ValueError, match="`source` has no observations"):
        RankWeightedTransferGP(X, Y, source=empty)


def test_a_source_too_small_to_check_warns():
    gen = torch.Generator().manual_seed(4)
    Xs = torch.rand(9, 2, generator=gen, dtype=torch.float64)
    noise = TaskData(Xs, torch.randn(9, 1, generator=gen, dtype=torch.float64))
    _, X, Y = make_data()
    with pytest.warns(UninformativeSourceWarning, match="cannot be checked"):
        RankWeightedTransferGP(X, Y, source=noise)


def test_a_task_column_with_a_plain_normalize_over_the_query_layout():
    source, X, Y = make_data()
    model = fitted(
        RankWeightedTransferGP(
            X, Y, source=source, task_column=TaskColumn(2), input_transform=Normalize(3)
        )
    )
    queries = torch.cat([X, torch.ones(X.shape[0], 1, dtype=X.dtype)], dim=-1)
    # the same model as on the d inputs alone, with a Normalize over them
    plain = fitted(
        RankWeightedTransferGP(X, Y, source=source, input_transform=Normalize(2))
    )
    expected = plain.posterior(X)
    torch.testing.assert_close(model.posterior(queries).mean, expected.mean)
    torch.testing.assert_close(model.posterior(queries).variance, expected.variance)


# ---------------------------------------------------------------- several sources
def several_sources(n_source=40):
    r"""A related source (the target's shape), a second related one (shifted and
    rescaled) and a scrambled one, named."""
    related, X, Y = make_data(n=10, n_source=n_source)
    gen = torch.Generator().manual_seed(5)
    Xb = torch.rand(n_source, 2, generator=gen, dtype=torch.float64)
    Yb = 2.0 * objective(Xb) - 1.0 + 0.05 * torch.randn(n_source, 1, generator=gen)
    perm = torch.randperm(n_source, generator=torch.Generator().manual_seed(1))
    return (
        [
            TaskData(related.X, related.Y, name="last month"),
            TaskData(Xb, Yb, name="simulator"),
            TaskData(related.X, related.Y[perm], name="scrambled"),
        ],
        X,
        Y,
    )


def test_several_sources_posterior_is_rgpes_combination_of_every_part():
    sources, X, Y = several_sources()
    with pytest.warns(UninformativeSourceWarning, match="'scrambled'"):
        model = RankWeightedTransferGP(X, Y, source=sources)
    fitted(model)
    assert model.source_names == ("last month", "simulator", "scrambled")
    assert model.uninformative_sources == ("scrambled",)
    weights = model.source_weights
    assert weights["scrambled"] == 0.0
    assert sum(weights.values()) == pytest.approx(model.transfer_weight)
    assert model.transfer_weight > 0.5
    Xt = torch.rand(2, 4, 2, generator=torch.Generator().manual_seed(4)).double()
    parts = [m.posterior(Xt) for m in (*model.transfer_models, model.target_model)]
    w = model.weights
    mean = sum(wk * p.mean for wk, p in zip(w, parts))
    cov = sum(wk**2 * p.distribution.covariance_matrix for wk, p in zip(w, parts))
    post = model.posterior(Xt)
    torch.testing.assert_close(post.mean, mean)
    torch.testing.assert_close(post.distribution.covariance_matrix, cov)
    with pytest.raises(ValueError, match="use `transfer_models`"):
        model.transfer_model
    with pytest.raises(ValueError, match="use `source_skills`"):
        model.source_skill


def test_several_sources_weights_are_the_ranking_evidence_of_the_kept_models():
    sources, X, Y = several_sources()
    with pytest.warns(UninformativeSourceWarning):
        model = fitted(
            RankWeightedTransferGP(X, Y, source=sources, ranking=RankingOptions(64))
        )
    # written out: the LOO draws of the kept transfer models and the target-only
    # GP, in that order from one generator, and RGPE's weights over them
    generator = torch.Generator().manual_seed(model.seed)
    kept = [model.transfer_models[0], model.transfer_models[1]]
    losses = []
    for part, y in [(m, m._target_Y) for m in kept] + [
        (model.target_model, model.target_model.train_targets)
    ]:
        shift, variance, _ = exact_loo_posterior(part)
        z = torch.randn(64, 10, generator=generator, dtype=y.dtype)
        losses.append(ranking_loss((y - shift) + variance.sqrt() * z, y))
    w = ranking_weights(torch.stack(losses), torch.Generator().manual_seed(1))
    expected = torch.cat([w[:2], torch.zeros(1, dtype=w.dtype), w[2:]])
    torch.testing.assert_close(model.weights, expected.double())


def test_each_source_part_is_the_single_source_models_transfer_part():
    sources, X, Y = several_sources()
    with pytest.warns(UninformativeSourceWarning):
        model = fitted(RankWeightedTransferGP(X, Y, source=sources))
    Xt = torch.rand(5, 2, generator=torch.Generator().manual_seed(2)).double()
    for source, part in zip(sources[:2], model.transfer_models[:2]):
        alone = RankWeightedTransferGP(X, Y, source=source)
        alone.transfer_model.load_state_dict(part.state_dict())
        torch.testing.assert_close(
            alone.transfer_model.posterior(Xt).mean, part.posterior(Xt).mean
        )


def test_several_sources_are_fitted_each_as_its_transfer_model_alone():
    # one batched fit of the kept transfer models: each source's hyperparameters are
    # those its own fit gives
    sources, X, Y = several_sources()
    with pytest.warns(UninformativeSourceWarning):
        model = fitted(RankWeightedTransferGP(X, Y, source=sources))
        alone = RankWeightedTransferGP(X, Y, source=sources)
    for part, own in zip(model.transfer_models[:2], alone.transfer_models[:2]):
        fit_gpytorch_mll(ExactMarginalLogLikelihood(own.likelihood, own))
        for name, value in own.named_parameters():
            torch.testing.assert_close(
                dict(part.named_parameters())[name], value, rtol=1e-9, atol=1e-12
            )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_several_sources_posterior_follows_the_parts_hyperparameters(dtype):
    sources, X, Y = several_sources()
    sources = [TaskData(s.X.to(dtype), s.Y.to(dtype), name=s.name) for s in sources]
    with pytest.warns(UninformativeSourceWarning):
        model = fitted(RankWeightedTransferGP(X.to(dtype), Y.to(dtype), source=sources))
    Xt = torch.rand(3, 2, 2, generator=torch.Generator().manual_seed(8)).to(dtype)
    model.posterior(Xt)
    with torch.no_grad():  # a part's hyperparameters changed after the fit
        part = model.transfer_models[1]
        part.delta_covar_module.outputscale = 3 * part.delta_covar_module.outputscale
        part.source_scale.mul_(0.5)
    part.prediction_strategy = None
    parts = [m.posterior(Xt) for m in (*model.transfer_models[:2], model.target_model)]
    w = model.weights[[0, 1, 3]]
    mean = sum(wk * p.mean for wk, p in zip(w, parts))
    cov = sum(wk**2 * p.distribution.covariance_matrix for wk, p in zip(w, parts))
    post = model.posterior(Xt)
    torch.testing.assert_close(post.mean, mean)
    torch.testing.assert_close(post.distribution.covariance_matrix, cov)


def test_one_source_in_a_list_is_the_one_source_model():
    source, X, Y = make_data()
    one = fitted(RankWeightedTransferGP(X, Y, source=source))
    listed = fitted(RankWeightedTransferGP(X, Y, source=[source]))
    assert listed.transfer_weight == one.transfer_weight
    Xt = torch.rand(4, 2, dtype=torch.float64)
    torch.testing.assert_close(listed.posterior(Xt).mean, one.posterior(Xt).mean)
    assert listed.source_weights == {"source 0": one.transfer_weight}


def test_several_sources_with_too_few_points_to_rank_share_half():
    sources, X, Y = several_sources()
    with pytest.warns(UninformativeSourceWarning):
        model = fitted(RankWeightedTransferGP(X[:1], Y[:1], source=sources))
    assert model.source_weights == {
        "last month": 0.25,
        "simulator": 0.25,
        "scrambled": 0.0,
    }


def test_several_sources_bo_loop_with_qlognei_batches_and_fantasies():
    sources, X, Y = several_sources()
    X, Y = X[:3], Y[:3]
    for _ in range(3):
        with pytest.warns(UninformativeSourceWarning):
            model = fitted(
                RankWeightedTransferGP(
                    X, Y, source=sources, input_transform=Normalize(2, bounds=BOUNDS)
                )
            )
        acqf = qLogNoisyExpectedImprovement(model, X_baseline=model.target_X)
        candidates, _ = optimize_acqf(
            acqf, bounds=BOUNDS, q=2, num_restarts=2, raw_samples=32
        )
        assert candidates.shape == (2, 2)
        X, Y = torch.cat([X, candidates]), torch.cat([Y, objective(candidates)])
    sampler = SobolQMCNormalSampler(torch.Size([4]), seed=0)
    fantasy = model.fantasize(candidates, sampler)
    assert fantasy.posterior(X[:3]).mean.shape == (4, 3, 1)
    assert torch.equal(fantasy.weights, model.weights)


# ------------------------------------------------------------ no target point yet
def test_with_no_target_point_the_posterior_is_the_sources_standardized_average():
    sources, X, Y = several_sources()
    with pytest.warns(UninformativeSourceWarning):
        model = fitted(RankWeightedTransferGP(X[:0], Y[:0], source=sources))
    assert model.source_weights == {
        "last month": 0.5,
        "simulator": 0.5,
        "scrambled": 0.0,
    }
    assert model.transfer_weight == 1.0
    # written out: each informative source's GP, standardized by its own outcomes
    Xt = torch.rand(6, 2, generator=torch.Generator().manual_seed(8)).double()
    means, covariances = [], []
    for source in sources[:2]:
        gp = fit_source_gp(source)
        p = gp.posterior(Xt)
        mu, sd = source.Y.mean(), source.Y.std()
        means.append((p.mean.squeeze(-1) - mu) / sd)
        covariances.append(p.distribution.covariance_matrix / sd**2)
    post = model.posterior(Xt)
    torch.testing.assert_close(post.mean.squeeze(-1), 0.5 * (means[0] + means[1]))
    torch.testing.assert_close(
        post.distribution.covariance_matrix,
        0.25 * (covariances[0] + covariances[1]),
    )


def test_from_no_target_point_the_first_queries_come_from_the_sources():
    source, X, Y = make_data()
    model = fitted(
        RankWeightedTransferGP(
            X[:0], Y[:0], source=source, input_transform=Normalize(2, bounds=BOUNDS)
        )
    )
    x, _ = optimize_acqf(
        UpperConfidenceBound(model, beta=0.1),
        BOUNDS,
        q=1,
        num_restarts=4,
        raw_samples=128,
    )
    grid = torch.stack(
        torch.meshgrid(
            *[torch.linspace(0, 1, 101, dtype=torch.float64)] * 2, indexing="ij"
        ),
        -1,
    ).reshape(-1, 2)
    best, worst = objective(grid).max(), objective(grid).min()
    # the source is the target's shape: the first query is near the optimum
    assert best - objective(x).squeeze() < 0.05 * (best - worst)
    batch, _ = optimize_acqf(
        qUpperConfidenceBound(model, beta=1.0),
        BOUNDS,
        q=3,
        num_restarts=2,
        raw_samples=64,
    )
    assert batch.shape == (3, 2)
    # then the loop goes on with the first observations
    X1, Y1 = torch.cat([x, batch]), scale_objective(torch.cat([x, batch]))
    following = fitted(RankWeightedTransferGP(X1, Y1, source=source))
    assert 0.0 <= following.transfer_weight <= 1.0


def scale_objective(X):
    return 3.0 * objective(X) + 1.0


def test_with_no_target_point_what_needs_one_says_so():
    source, X, Y = make_data(n=12, n_source=60)
    model = RankWeightedTransferGP(X[:0], Y[:0], source=source)
    Xt = torch.rand(2, 2, dtype=torch.float64)
    with pytest.raises(UnsupportedError, match="noise of a target observation"):
        model.posterior(Xt, observation_noise=True)
    with pytest.raises(UnsupportedError, match="cannot be conditioned"):
        model.condition_on_observations(Xt, Xt[:, :1])
    perm = torch.randperm(60, generator=torch.Generator().manual_seed(1))
    scrambled = TaskData(source.X, source.Y[perm])
    with pytest.warns(UninformativeSourceWarning):
        with pytest.raises(ValueError, match="`train_X` has no points and no source"):
            RankWeightedTransferGP(X[:0], Y[:0], source=scrambled)


def test_old_ranking_keywords_warn_and_give_the_same_weights():
    source, X, Y = make_data(n=10)
    Yvar = torch.full_like(Y, 0.05**2)
    new = fitted(
        RankWeightedTransferGP(
            X, Y, Yvar, source=source, ranking=RankingOptions(64, pair_margin=1.0)
        )
    )
    with pytest.warns(DeprecationWarning) as caught:
        old = RankWeightedTransferGP(
            X, Y, Yvar, source=source, num_samples=64, pair_margin=1.0
        )
    assert [str(w.message).split("`")[1] for w in caught] == [
        "num_samples",
        "pair_margin",
    ]
    assert {w.filename for w in caught} == {__file__}
    old.load_state_dict(new.state_dict())
    torch.testing.assert_close(old.ranking_losses(), new.ranking_losses())
    assert old.transfer_weight == new.transfer_weight
    with pytest.raises(ValueError, match="in `ranking`, not beside it"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            RankWeightedTransferGP(
                X, Y, source=source, ranking=RankingOptions(), num_samples=8
            )
