import math
import pickle

import pytest
import torch
from botorch.acquisition import UpperConfidenceBound, qLogNoisyExpectedImprovement
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms import Standardize
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.mlls import ExactMarginalLogLikelihood

import botorch_transfer.models.guard as guard_module
from botorch_transfer import DeltaBOModel, DiffGP, EnvGP, TaskData
from botorch_transfer.models.guard import (
    TransferGuard,
    single_task_loo_log_density,
    single_task_sequential_log_density,
    transfer_loo_log_density,
)
from tests.models.test_delta import F64, TARGET_NOISE, make_source, make_target
from tests.models.test_env_gp import kernel_ref, make_env


def normal_log_density(y, mean, var):
    return -0.5 * (math.log(2 * math.pi) + torch.log(var) + (y - mean) ** 2 / var)


def test_transfer_loo_matches_closed_form_on_the_pooled_gp():
    # Env-GP (eq. 5) has nothing derived from the target data, so its LOO predictive
    # is Rasmussen & Williams eq. 5.12 on the target rows of the pooled covariance
    source = make_source()
    X, Y = make_target()
    model = make_env(source, X, Y, source_noise=0.05, source_map="identity")
    X_all = torch.cat([source.X, X])
    noise = torch.cat(
        [torch.full((40,), 0.05, dtype=F64), torch.full((7,), TARGET_NOISE, dtype=F64)]
    )
    K = kernel_ref(X_all, X_all) + torch.diag(noise)
    K_inv = torch.linalg.inv(K)
    y = torch.cat([source.Y, Y]).squeeze(-1)
    alpha = K_inv @ y
    precision = K_inv.diagonal()
    expected = normal_log_density(y, y - alpha / precision, 1 / precision)[40:]
    torch.testing.assert_close(
        transfer_loo_log_density(model), expected, rtol=1e-8, atol=1e-10
    )
    # the model is left as it was
    torch.testing.assert_close(model.target_X, X)
    assert model.train_inputs[0].shape[-2] == 47


def fitted_scaled_target_gp(standardize):
    r"""9 target points in user units (3 y + 5), a fitted ``SingleTaskGP`` on them
    (optionally standardizing) and its outcome map ``(mean, std)``."""
    X, Y = make_target(n=9)
    Y = 3.0 * Y + 5.0
    model = SingleTaskGP(
        X, Y, outcome_transform=Standardize(m=1) if standardize else None
    )
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    if standardize:
        mean, std = model.outcome_transform.means, model.outcome_transform.stdvs
    else:
        mean, std = torch.zeros(1, 1, dtype=F64), torch.ones(1, 1, dtype=F64)
    return X, Y, model, mean, std


@pytest.mark.parametrize("standardize", [False, True])
def test_single_task_loo_matches_refits_with_fixed_hyperparameters(standardize):
    X, Y, model, mean, std = fitted_scaled_target_gp(standardize)
    Z = (Y - mean) / std
    expected = []
    for i in range(9):
        keep = torch.arange(9) != i
        fold = SingleTaskGP(X[keep], Z[keep], outcome_transform=None)
        fold.load_state_dict(
            {k: v for k, v in model.state_dict().items() if "outcome" not in k},
            strict=False,
        )
        post = fold.posterior(X[i : i + 1], observation_noise=True)
        density = normal_log_density(
            Z[i, 0], post.mean.squeeze(), post.variance.squeeze()
        )
        expected.append(density - std.log().squeeze())
    torch.testing.assert_close(
        single_task_loo_log_density(model), torch.stack(expected), rtol=1e-7, atol=1e-9
    )


@pytest.mark.parametrize("standardize", [False, True])
def test_single_task_sequential_matches_prefix_gps_with_fixed_hyperparameters(
    standardize,
):
    X, Y, model, mean, std = fitted_scaled_target_gp(standardize)
    # reference: point i predicted by the GP on points 0..i-1, plain linear algebra
    Z = (Y[:, 0] - mean[0, 0]) / std[0, 0]
    kernel, c = model.covar_module, model.mean_module.constant.detach()
    noise = model.likelihood.noise.detach().squeeze()
    expected = []
    with torch.no_grad():
        for i in range(3, 9):
            K = kernel(X[:i]).to_dense() + noise * torch.eye(i, dtype=F64)
            k = kernel(X[i : i + 1], X[:i]).to_dense()[0]
            mu = c + k @ torch.linalg.solve(K, Z[:i] - c)
            var = kernel(X[i : i + 1], diag=True)[0] - k @ torch.linalg.solve(K, k)
            density = normal_log_density(Z[i], mu, var + noise)
            expected.append(density - std.log().squeeze())
    torch.testing.assert_close(
        single_task_sequential_log_density(model, start=3),
        torch.stack(expected),
        rtol=1e-7,
        atol=1e-9,
    )
    # and with the first point's prior density they add up to the log marginal
    # likelihood (the chain rule; hyperparameter priors left out)
    with torch.no_grad():
        model.train()
        marginal = model.likelihood(model(*model.train_inputs))
        total = marginal.log_prob(model.train_targets).item()
        model.eval()
    first = single_task_sequential_log_density(model, start=1)
    K0 = kernel(X[:1]).to_dense().detach()[0, 0] + noise
    first_point = normal_log_density(Z[0], c, K0) - std.log().squeeze()
    assert (first.sum() + first_point).item() == pytest.approx(
        total - 9 * std.log().item(), rel=1e-8
    )
    with pytest.raises(ValueError, match="`start` must be an int >= 1"):
        single_task_sequential_log_density(model, start=0)


def sine(Z):
    return torch.sin(6 * Z[..., :1]) + torch.cos(5 * Z[..., 1:])


def fitted(model):
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


def sine_target_and_sources():
    r"""12 target points of ``sine``, and 40-point sources: ``sine`` itself and an
    unrelated one (a different, rougher function with a large offset)."""
    generator = torch.Generator().manual_seed(0)
    X_s = torch.rand(40, 2, generator=generator, dtype=F64)
    X = torch.rand(12, 2, generator=generator, dtype=F64)
    related = TaskData(X_s, sine(X_s))
    unrelated = TaskData(X_s, 2 * torch.sin(17 * X_s.sum(-1, keepdim=True)) - 3.0)
    return X, sine(X), related, unrelated


@pytest.mark.parametrize("cls", [DeltaBOModel, EnvGP, DiffGP])
def test_guard_keeps_a_related_source_and_drops_an_unrelated_one(cls):
    X, Y, related, unrelated = sine_target_and_sources()
    guards = {}
    for name, source in (("related", related), ("unrelated", unrelated)):
        guards[name] = TransferGuard(fitted(cls(X, Y, source=source)))
    assert guards["related"].uses_transfer
    assert guards["related"].model is guards["related"].transfer_model
    loo = guards["unrelated"].loo_log_density
    if cls is EnvGP:
        # Env-GP's learned source scale already ignores the unrelated source, so the
        # transfer model predicts as well as the target-only GP and is kept
        assert abs(guards["unrelated"].transfer_model.source_scale.item()) < 0.5
        assert guards["unrelated"].uses_transfer
        assert loo["transfer"] >= loo["target"]
    else:
        assert not guards["unrelated"].uses_transfer
        assert guards["unrelated"].model is guards["unrelated"].target_model
        assert loo["target"] > loo["transfer"]
    # the guard's posterior is the acting model's
    X_test = torch.rand(4, 2, dtype=F64)
    for guard in guards.values():
        torch.testing.assert_close(
            guard.posterior(X_test).mean, guard.model.posterior(X_test).mean
        )


def test_guard_works_with_acquisition_functions_and_fantasies():
    source = make_source()
    X, Y = make_target()
    guard = TransferGuard(fitted(DeltaBOModel(X, Y, source=source)))
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=F64)
    for acqf in (
        UpperConfidenceBound(guard, beta=2.0),
        qLogNoisyExpectedImprovement(guard, X_baseline=guard.target_X),
    ):
        candidate, _ = optimize_acqf(acqf, bounds, q=1, num_restarts=2, raw_samples=16)
        assert candidate.shape == (1, 2)
    sampler = SobolQMCNormalSampler(torch.Size([3]))
    fantasy = guard.fantasize(torch.rand(2, 2, dtype=F64), sampler)
    assert fantasy.posterior(torch.rand(5, 2, dtype=F64)).mean.shape == (3, 5, 1)
    conditioned = guard.condition_on_observations(
        torch.rand(1, 2, dtype=F64), torch.rand(1, 1, dtype=F64)
    )
    assert conditioned.target_X.shape[-2] == X.shape[-2] + 1


def test_guard_keeps_transfer_below_min_points_and_checks_arguments():
    source = make_source()
    X, Y = make_target(n=2)
    model = DeltaBOModel(X, Y, source=source)
    guard = TransferGuard(model)
    assert guard.uses_transfer and guard.loo_log_density == {}
    with pytest.raises(TypeError, match="`model` must be a source-conditioned"):
        TransferGuard(SingleTaskGP(X, Y))
    with pytest.raises(ValueError, match="`margin` must be a finite float"):
        TransferGuard(model, margin=float("nan"))
    with pytest.raises(ValueError, match="`min_points` must be an int >= 2"):
        TransferGuard(model, min_points=1)
    with pytest.raises(NotImplementedError, match="single output"):
        guard.subset_output([0])


def test_query_inputs_are_checked_whichever_model_acts():
    X, Y = make_target(n=2)
    target_model = SingleTaskGP(X, Y)
    guard = TransferGuard(DeltaBOModel(X, Y, source=make_source()), target_model)
    nan_X = torch.rand(3, 2, dtype=F64)
    nan_X[1, 0] = float("nan")
    for uses_transfer in (True, False):
        guard.uses_transfer = uses_transfer  # the target-only GP would give NaNs
        with pytest.raises(ValueError, match="`X` contains NaN or infinite values"):
            guard.posterior(nan_X)
        with pytest.raises(ValueError, match="`X` must have d=2 columns"):
            guard.posterior(torch.rand(3, 3, dtype=F64))


def test_guard_as_a_model_class_equals_the_guard_of_a_fitted_model():

    X, _, _, unrelated = sine_target_and_sources()
    guarded_class = TransferGuard.of(DeltaBOModel)
    assert guarded_class.__name__ == "GuardedDeltaBOModel"
    assert pickle.loads(pickle.dumps(guarded_class)) is guarded_class
    # the class is made by the call, not found as a module attribute
    assert not hasattr(guard_module, "GuardedDeltaBOModel")
    guarded = guarded_class(X, sine(X), source=unrelated)
    restored = pickle.loads(pickle.dumps(guarded))
    assert type(restored) is guarded_class
    # built from DeltaBOModel's arguments, unfitted: acts as the transfer model
    assert guarded.uses_transfer and guarded.loo_log_density == {}
    assert guarded.fit() is guarded
    by_hand = TransferGuard(fitted(DeltaBOModel(X, sine(X), source=unrelated)))
    assert not guarded.uses_transfer and not by_hand.uses_transfer
    for key in ("transfer", "target"):
        assert guarded.loo_log_density[key] == pytest.approx(
            by_hand.loo_log_density[key], rel=1e-6
        )
    # a state dict loaded into a guard on fewer points: it chooses on its own data
    fold = guarded_class(X[:8], sine(X[:8]), source=unrelated)
    fold.load_state_dict(guarded.state_dict())
    expected = TransferGuard(
        DeltaBOModel(X[:8], sine(X[:8]), source=unrelated),
        target_model=SingleTaskGP(X[:8], sine(X[:8]), outcome_transform=Standardize(1)),
    )
    # each model loads its part with its own load_state_dict, then the guard chooses
    expected.transfer_model.load_state_dict(guarded.transfer_model.state_dict())
    expected.target_model.load_state_dict(guarded.target_model.state_dict())
    expected._choose()
    torch.testing.assert_close(fold.target_Y, sine(X[:8]), rtol=0, atol=1e-12)
    assert fold.uses_transfer == expected.uses_transfer
    assert fold.loo_log_density == pytest.approx(expected.loo_log_density, rel=1e-9)
    with pytest.raises(TypeError, match="`model_class` must be a source-conditioned"):
        TransferGuard.of(SingleTaskGP)
    # Ax keeps no previous guard: the prequential criterion is refused by name,
    # the sequential one (the same score from the current fit) is taken
    with pytest.raises(ValueError, match="`criterion='prequential'` needs the prev"):
        guarded_class(X, sine(X), source=unrelated, criterion="prequential")
    sequential = guarded_class(X, sine(X), source=unrelated, criterion="sequential")
    assert sequential.uses_transfer and sequential.sequential_log_density == {}
    sequential.fit()
    assert not sequential.uses_transfer
    assert sequential.sequential_log_density["gain"] > 0


# ------------------------------------------------------------ prequential criterion


def guards_along(cls, source, X, Y, start=3, **kwargs):
    r"""The guards of a run that observes ``X`` one point at a time from ``start``."""
    guard, guards = None, []
    for n in range(start, X.shape[0] + 1):
        model = fitted(cls(X[:n], Y[:n], source=source, **kwargs))
        guard = TransferGuard(model, criterion="prequential", previous=guard)
        guards.append(guard)
    return guards


def test_prequential_sums_are_the_previous_models_predictive_densities():
    generator = torch.Generator().manual_seed(1)
    X_s = torch.rand(30, 2, generator=generator, dtype=F64)
    X = torch.rand(8, 2, generator=generator, dtype=F64)
    Y = 5.0 * sine(X) + 2.0  # user units: the target GP standardizes
    Yvar = torch.full_like(Y, 0.01)
    source = TaskData(X_s, 5.0 * sine(X_s) + 2.0)
    first = TransferGuard(
        fitted(DeltaBOModel(X[:5], Y[:5], Yvar[:5], source=source)),
        criterion="prequential",
        prequential_clip=math.inf,
    )
    # the default clip is 3 nats (the leave-one-out criterion has none)
    assert (
        TransferGuard(first.transfer_model, criterion="prequential").prequential_clip
        == 3.0
    )
    assert TransferGuard(first.transfer_model).prequential_clip is None
    # the target-only GP predicts from 2 points under "prequential", 3 under "loo"
    assert TransferGuard(first.transfer_model, criterion="prequential").min_points == 2
    assert TransferGuard(first.transfer_model).min_points == 3
    # the run's first guard has no evidence: the transfer model acts
    assert first.prequential_log_density == {
        "transfer": 0.0,
        "target": 0.0,
        "gain": 0.0,
    }
    assert first.uses_transfer
    second = TransferGuard(
        fitted(DeltaBOModel(X, Y, Yvar, source=source)),
        criterion="prequential",
        previous=first,
        prequential_clip=math.inf,
    )
    # reference: the first guard's target-only GP, by plain linear algebra in its
    # standardized units, predicts the 3 new points (plus their known noise)
    gp = first.target_model
    mean_y, std_y = gp.outcome_transform.means, gp.outcome_transform.stdvs
    Z = gp.input_transform(X) if hasattr(gp, "input_transform") else X
    kernel = gp.covar_module
    with torch.no_grad():
        K = kernel(Z[:5]).to_dense() + torch.diag(Yvar[:5, 0] / std_y[0, 0] ** 2)
        k = kernel(Z[5:], Z[:5]).to_dense()
        c = gp.mean_module.constant
        z = (Y[:5, 0] - mean_y[0, 0]) / std_y[0, 0]
        mu = c + k @ torch.linalg.solve(K, z - c)
        var = kernel(Z[5:], diag=True) - (k * torch.linalg.solve(K, k.T).T).sum(-1)
    mu_user, var_user = mu * std_y[0, 0] + mean_y[0, 0], var * std_y[0, 0] ** 2
    expected_target = normal_log_density(Y[5:, 0], mu_user, var_user + 0.01)
    # the transfer model's densities from its own posterior at the new points
    post = first.transfer_model.posterior(X[5:])
    expected_transfer = normal_log_density(
        Y[5:, 0], post.mean[:, 0], post.variance[:, 0] + 0.01
    )
    sums = second.prequential_log_density
    assert sums["target"] == pytest.approx(expected_target.sum().item(), rel=1e-9)
    assert sums["transfer"] == pytest.approx(expected_transfer.sum().item(), rel=1e-9)
    gains = expected_target - expected_transfer
    assert sums["gain"] == pytest.approx(gains.sum().item(), rel=1e-9)
    assert second.uses_transfer == (gains.sum().item() <= 0.0)
    # clipped: each point moves the sum by at most `prequential_clip` nats; the
    # clip sits inside the per-point gains' range, so it binds
    clip = 0.5 * gains.abs().max().item()
    assert (gains.abs() > clip).any() and (gains.abs() < clip).any()
    first_clipped = TransferGuard(  # the same two fitted models predict
        first.transfer_model,
        target_model=first.target_model,
        criterion="prequential",
        prequential_clip=clip,
    )
    clipped = TransferGuard(
        second.transfer_model,
        criterion="prequential",
        previous=first_clipped,
        prequential_clip=clip,
    )
    expected_gain = gains.clamp(-clip, clip).sum().item()
    assert clipped.prequential_log_density["gain"] == pytest.approx(
        expected_gain, rel=1e-9
    )
    # the models' own totals stay unclipped
    assert clipped.prequential_log_density["target"] == pytest.approx(
        sums["target"], rel=1e-9
    )
    assert clipped.uses_transfer == (expected_gain <= 0.0)


def test_prequential_guard_keeps_a_related_source_and_drops_an_unrelated_one():
    X, Y, related, unrelated = sine_target_and_sources()
    kept = guards_along(DeltaBOModel, related, X, Y)
    dropped = guards_along(DeltaBOModel, unrelated, X, Y)
    assert all(guard.uses_transfer for guard in kept)
    last = dropped[-1].prequential_log_density
    assert last["target"] > last["transfer"]
    assert not dropped[-1].uses_transfer
    assert dropped[-1].model is dropped[-1].target_model
    # the sums only grow by the new points' densities: a guard holds no chain
    assert not any(isinstance(v, TransferGuard) for v in vars(dropped[-1]).values())


def test_prequential_arguments_are_checked():
    source = make_source()
    X, Y = make_target(n=6)
    guard = TransferGuard(fitted(DeltaBOModel(X, Y, source=source)))
    with pytest.raises(ValueError, match="`criterion` must be one of"):
        TransferGuard(guard.transfer_model, criterion="holdout")
    with pytest.raises(ValueError, match="`previous` applies to `criterion="):
        TransferGuard(guard.transfer_model, previous=guard)
    with pytest.raises(TypeError, match="`previous` must be a TransferGuard"):
        TransferGuard(guard.transfer_model, criterion="prequential", previous=object())
    later = TransferGuard(
        DeltaBOModel(X, Y, source=source), criterion="prequential", previous=None
    )
    other = DeltaBOModel(X.flip(0), Y.flip(0), source=source)
    with pytest.raises(ValueError, match="`previous` must be a guard on a prefix"):
        TransferGuard(other, criterion="prequential", previous=later)
    shorter = DeltaBOModel(X[:4], Y[:4], source=source)
    with pytest.raises(ValueError, match="`previous` must be a guard on a prefix"):
        TransferGuard(shorter, criterion="prequential", previous=later)
    with pytest.raises(ValueError, match="`prequential_clip` applies to"):
        TransferGuard(guard.transfer_model, prequential_clip=3.0)
    for clip in (0.0, -1.0, math.nan, "3", True):
        with pytest.raises(ValueError, match="`prequential_clip` must be a positive"):
            TransferGuard(
                guard.transfer_model, criterion="prequential", prequential_clip=clip
            )


# ------------------------------------------------------------- sequential criterion


def test_sequential_guard_sums_each_points_clipped_gain_from_scratch():
    X, Y, related, unrelated = sine_target_and_sources()
    Y = 5.0 * Y + 2.0  # user units: the target GP standardizes
    Yvar = torch.full_like(Y, 0.01)
    source = TaskData(unrelated.X, 5.0 * unrelated.Y + 2.0)
    model = fitted(DeltaBOModel(X, Y, Yvar, source=source))
    guard = TransferGuard(model, criterion="sequential", prequential_clip=math.inf)
    # the defaults are the prequential guard's: 3-nat clip, scored from 2 points
    default = TransferGuard(model, criterion="sequential")
    assert default.prequential_clip == 3.0 and default.min_points == 2
    # reference: the guard's target-only GP on the points before each scored one,
    # by plain linear algebra in its standardized units (plus the known noise)
    gp = guard.target_model
    mean_y, std_y = gp.outcome_transform.means[0, 0], gp.outcome_transform.stdvs[0, 0]
    Z = gp.input_transform(X) if hasattr(gp, "input_transform") else X
    kernel, c = gp.covar_module, gp.mean_module.constant.detach()
    z = (Y[:, 0] - mean_y) / std_y
    target = []
    with torch.no_grad():
        for i in range(2, 12):
            K = kernel(Z[:i]).to_dense() + torch.diag(Yvar[:i, 0] / std_y**2)
            k = kernel(Z[i : i + 1], Z[:i]).to_dense()[0]
            mu = c + k @ torch.linalg.solve(K, z[:i] - c)
            var = kernel(Z[i : i + 1], diag=True)[0] - k @ torch.linalg.solve(K, k)
            target.append(
                normal_log_density(Y[i, 0], mu * std_y + mean_y, var * std_y**2 + 0.01)
            )
    target = torch.stack(target)
    transfer = model.sequential_log_density(start=2)  # checked in test_base
    sums = guard.sequential_log_density
    assert sums["target"] == pytest.approx(target.sum().item(), rel=1e-9)
    assert sums["transfer"] == pytest.approx(transfer.sum().item(), rel=1e-9)
    gains = target - transfer
    assert sums["gain"] == pytest.approx(gains.sum().item(), rel=1e-9)
    # an unrelated source: the target-only GP predicted the run better
    assert sums["gain"] > 0 and not guard.uses_transfer
    # clipped: each point moves the sum by at most `prequential_clip` nats
    clip = 0.5 * gains.abs().max().item()
    assert (gains.abs() > clip).any() and (gains.abs() < clip).any()
    clipped = TransferGuard(
        model,
        target_model=guard.target_model,
        criterion="sequential",
        prequential_clip=clip,
    )
    expected_gain = gains.clamp(-clip, clip).sum().item()
    assert clipped.sequential_log_density["gain"] == pytest.approx(
        expected_gain, rel=1e-9
    )
    assert clipped.uses_transfer == (expected_gain <= 0.0)
    # a margin in total nats: a larger one keeps the transfer model
    assert TransferGuard(
        model, criterion="sequential", margin=sums["gain"] + 1.0
    ).uses_transfer


def test_sequential_guard_keeps_a_related_source_and_drops_an_unrelated_one():
    cls = DeltaBOModel
    X, Y, related, unrelated = sine_target_and_sources()
    kept = TransferGuard(fitted(cls(X, Y, source=related)), criterion="sequential")
    dropped = TransferGuard(fitted(cls(X, Y, source=unrelated)), criterion="sequential")
    assert kept.uses_transfer and kept.model is kept.transfer_model
    assert not dropped.uses_transfer and dropped.model is dropped.target_model
    # with too few points to score, nothing is summed and the transfer model acts
    few = TransferGuard(
        fitted(cls(X[:2], Y[:2], source=unrelated)), criterion="sequential"
    )
    assert few.uses_transfer and few.sequential_log_density == {}


def test_sequential_arguments_are_checked():
    source = make_source()
    X, Y = make_target(n=6)
    model = fitted(DeltaBOModel(X, Y, source=source))
    first = TransferGuard(model, criterion="prequential")
    with pytest.raises(ValueError, match="`previous` applies to `criterion="):
        TransferGuard(model, criterion="sequential", previous=first)
    for clip in (0.0, -1.0, math.nan, "3", True):
        with pytest.raises(ValueError, match="`prequential_clip` must be a positive"):
            TransferGuard(model, criterion="sequential", prequential_clip=clip)


def target_and_rough_unrelated_source(n: int):
    r"""``n`` target points of a smooth sine with noise variance 0.01, and 30 source
    points of an unrelated, rougher one."""
    generator = torch.Generator().manual_seed(1)
    X_s = torch.rand(30, 2, generator=generator, dtype=F64)
    X = torch.rand(n, 2, generator=generator, dtype=F64)
    Y = 5.0 * sine(X) + 2.0
    source = TaskData(X_s, 2 * torch.sin(17 * X_s.sum(-1, keepdim=True)) - 3.0)
    return X, Y, torch.full_like(Y, 0.01), source


def test_first_prequential_guard_can_score_the_initial_design():
    X, Y, Yvar, source = target_and_rough_unrelated_source(6)
    model = fitted(DeltaBOModel(X[:5], Y[:5], Yvar[:5], source=source))
    options = {"criterion": "prequential", "prequential_clip": math.inf}
    first = TransferGuard(model, score_initial_design=True, **options)
    # reference: the guards of a run that started from 2 points, each model refitted
    # on the points before the one it predicts (from the fitted hyperparameters)
    expected = {"transfer": 0.0, "target": 0.0}
    for i in range(2, 5):
        before = DeltaBOModel(X[:i], Y[:i], Yvar[:i], source=source)
        before.load_state_dict(model.state_dict())
        fitted(before)
        target = fitted(
            SingleTaskGP(X[:i], Y[:i], Yvar[:i], outcome_transform=Standardize(1))
        )
        for key, m in (("transfer", before), ("target", target)):
            post = m.posterior(X[i : i + 1])
            expected[key] += normal_log_density(
                Y[i, 0], post.mean[0, 0], post.variance[0, 0] + 0.01
            ).item()
    sums = first.prequential_log_density
    assert sums["transfer"] == pytest.approx(expected["transfer"], rel=1e-6)
    assert sums["target"] == pytest.approx(expected["target"], rel=1e-6)
    gain = expected["target"] - expected["transfer"]
    assert sums["gain"] == pytest.approx(gain, rel=1e-6)
    # the unrelated source predicted the initial design worse: the target-only GP
    # acts from the first query on, where a guard without the initial design has
    # no evidence and acts as the transfer model
    assert gain > 0 and not first.uses_transfer
    assert TransferGuard(model, **options).uses_transfer
    # the next guard adds its new point to these sums (hand_back=True: the point
    # is the target-only GP's pick, which a final hand-over would not score)
    nxt = TransferGuard(
        fitted(DeltaBOModel(X, Y, Yvar, source=source)),
        previous=first,
        hand_back=True,
        **options,
    )
    new = nxt.prequential_log_density["transfer"] - sums["transfer"]
    post = model.posterior(X[5:])
    assert new == pytest.approx(
        normal_log_density(Y[5, 0], post.mean[0, 0], post.variance[0, 0] + 0.01).item(),
        rel=1e-9,
    )
    # the model itself is left as it was
    torch.testing.assert_close(model.target_X, X[:5])
    # nothing to score at min_points target points; clipped like every other point
    few = fitted(DeltaBOModel(X[:2], Y[:2], Yvar[:2], source=source))
    assert TransferGuard(
        few, score_initial_design=True, **options
    ).prequential_log_density == {"transfer": 0.0, "target": 0.0, "gain": 0.0}
    clipped = TransferGuard(
        model, score_initial_design=True, criterion="prequential", prequential_clip=0.1
    )
    assert abs(clipped.prequential_log_density["gain"]) <= 3 * 0.1 + 1e-12
    with pytest.raises(TypeError, match="`score_initial_design` must be a bool"):
        TransferGuard(model, score_initial_design=1, criterion="prequential")
    with pytest.raises(ValueError, match="`score_initial_design` applies to"):
        TransferGuard(model, score_initial_design=True, criterion="sequential")


@pytest.fixture(scope="module")
def rough_source_run():
    r"""``target_and_rough_unrelated_source(7)`` and DeltaBO fitted on its first 5 and
    6 points (a guard leaves its transfer model as it is, so the tests share them)."""
    X, Y, Yvar, source = target_and_rough_unrelated_source(7)
    models = {
        n: fitted(DeltaBOModel(X[:n], Y[:n], Yvar[:n], source=source)) for n in (5, 6)
    }
    return X, Y, models


def test_a_final_hand_over_stops_scoring_the_target_only_gps_picks(rough_source_run):
    X, Y, models = rough_source_run
    options = {"criterion": "prequential", "prequential_clip": math.inf}

    def guard(n, previous, **kwargs):
        return TransferGuard(models[n], previous=previous, **options, **kwargs)

    # the unrelated source predicted the initial design worse: the target-only GP
    # acts at the first query, so point 5 is its pick
    first = guard(5, None, score_initial_design=True)
    assert not first.uses_transfer
    final = guard(6, first, hand_back=False)
    scored = guard(6, first, hand_back=True)
    # not scored: the sums and the choice stay the previous guard's
    assert final.prequential_log_density == first.prequential_log_density
    assert not final.uses_transfer and final.model is final.target_model
    # scored with hand_back=True: point 5's densities under the previous guard's
    # two models
    post = first.transfer_model.posterior(X[5:6])
    new = normal_log_density(Y[5, 0], post.mean[0, 0], post.variance[0, 0] + 0.01)
    added = scored.prequential_log_density["transfer"]
    assert added - first.prequential_log_density["transfer"] == pytest.approx(
        new.item(), rel=1e-9
    )
    # a guard under which the transfer model acted has its next point scored as usual
    start = guard(5, None)
    assert start.uses_transfer
    assert (
        guard(6, start, hand_back=False).prequential_log_density
        == guard(6, start, hand_back=True).prequential_log_density
    )
    model = start.transfer_model
    with pytest.raises(TypeError, match="`hand_back` must be a bool or None"):
        TransferGuard(model, criterion="prequential", hand_back=0)
    for criterion in ("loo", "sequential"):
        for hand_back in (False, True):
            with pytest.raises(ValueError, match="`hand_back` applies to"):
                TransferGuard(model, criterion=criterion, hand_back=hand_back)


def test_a_prequential_guards_hand_over_is_final_by_default(rough_source_run):
    # the default (docs/decisions.md, "TransferGuard's hand-over under the
    # prequential criterion"): a reversible guard scores the target-only GP's own pick
    _, _, models = rough_source_run

    def guard(n, previous, **kwargs):
        return TransferGuard(
            models[n], criterion="prequential", previous=previous, **kwargs
        )

    first = guard(5, None, score_initial_design=True)
    assert not first.uses_transfer and first.hand_back is False
    default = guard(6, first)
    assert default.hand_back is False
    assert default.prequential_log_density == first.prequential_log_density
    assert (
        default.prequential_log_density
        != guard(6, first, hand_back=True).prequential_log_density
    )
    assert not default.uses_transfer
    # the other criteria have no hand-over to make
    assert TransferGuard(first.transfer_model).hand_back is None


def test_a_batched_model_is_refused_by_name():
    X, Y = make_target(n=6, batch=(2,))
    model = DeltaBOModel(X, Y, source=make_source())
    with pytest.raises(ValueError, match=r"`model` must not be batched.*\(2,\)"):
        TransferGuard(model)


def test_previous_from_a_guard_on_other_sources_is_refused():
    X, Y = make_target(n=6)
    first = TransferGuard(
        DeltaBOModel(X[:5], Y[:5], source=make_source(seed=1)), criterion="prequential"
    )
    other_source = DeltaBOModel(X, Y, source=make_source(seed=3))
    with pytest.raises(ValueError, match="`previous` guards a DeltaBOModel on other"):
        TransferGuard(other_source, criterion="prequential", previous=first)
    other_class = EnvGP(X, Y, source=make_source(seed=1))
    with pytest.raises(ValueError, match="`previous` guards a DeltaBOModel on other"):
        TransferGuard(other_class, criterion="prequential", previous=first)
    # the same source, another copy of it: accepted
    same = DeltaBOModel(X, Y, source=make_source(seed=1))
    TransferGuard(same, criterion="prequential", previous=first)


def test_previous_on_other_inputs_is_refused_for_its_dimension():
    X, Y = make_target(n=6)
    first = TransferGuard(
        DeltaBOModel(X[:5], Y[:5], source=make_source()), criterion="prequential"
    )
    X3 = torch.cat([X, X[:, :1]], dim=-1)
    source3 = make_source()
    source3 = TaskData(torch.cat([source3.X, source3.X[:, :1]], -1), source3.Y)
    wider = DeltaBOModel(X3, Y, source=source3)
    with pytest.raises(ValueError, match=r"d=2 inputs but `model` has d=3"):
        TransferGuard(wider, criterion="prequential", previous=first)


def test_previous_on_a_model_rebuilt_from_the_frozen_source_is_accepted():
    # the README's loop: the first model from the data, the next ones from its
    # frozen source posterior; the guards' evidence is about the same sources
    X, Y, related, unrelated = sine_target_and_sources()
    first = fitted(DeltaBOModel(X[:3], Y[:3], source=related))
    guard = TransferGuard(first, criterion="prequential")
    rebuilt = fitted(DeltaBOModel(X[:4], Y[:4], source=first.frozen_source()))
    again = TransferGuard(rebuilt, criterion="prequential", previous=guard)
    assert again.prequential_log_density["transfer"] != 0.0
    # ... and from that one's, still the same sources
    third = fitted(DeltaBOModel(X[:5], Y[:5], source=rebuilt.frozen_source()))
    TransferGuard(third, criterion="prequential", previous=again)
    # a frozen source of another model's sources is still refused
    other = fitted(DeltaBOModel(X[:3], Y[:3], source=unrelated))
    foreign = fitted(DeltaBOModel(X[:4], Y[:4], source=other.frozen_source()))
    with pytest.raises(ValueError, match="`previous` guards a DeltaBOModel on other"):
        TransferGuard(foreign, criterion="prequential", previous=guard)
