import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize, Standardize
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.means import ZeroMean
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer import DiffGP, TaskData
from tests.models.reference import diff_gp_posterior, gp_posterior, rbf
from tests.models.test_delta import (
    ATOL,
    DELTA_LS,
    DELTA_OS,
    F64,
    RTOL,
    TARGET_NOISE,
    assert_posterior_matches,
    delta_kernel,
    make_source,
    make_target,
)


def kernel_ref(A, B):
    return rbf(A, B, DELTA_LS, DELTA_OS)


def make_diff(source, X, Y, **kwargs):
    kwargs.setdefault("train_Yvar", torch.full_like(Y, TARGET_NOISE))
    return DiffGP(
        X,
        Y,
        source=source,
        covar_module=delta_kernel(),
        mean_module=ZeroMean(),
        **kwargs,
    )


def reference(source, X, Y, sigma_src2, sigma_a2):
    return diff_gp_posterior(
        kernel_ref,
        source.X,
        source.Y.squeeze(-1),
        sigma_src2,
        X,
        Y.squeeze(-1),
        sigma_a2,
    )


def test_posterior_matches_eq6():
    source = make_source()
    X, Y = make_target()
    model = make_diff(source, X, Y)
    ref_mean, ref_cov = reference(
        source, X, Y, source.Yvar.squeeze(-1), torch.full((7,), TARGET_NOISE, dtype=F64)
    )
    assert_posterior_matches(model, ref_mean, ref_cov, torch.rand(3, 4, 2, dtype=F64))


def test_corrected_source_data_are_the_papers():
    source = make_source()
    X, Y = make_target()
    model = make_diff(source, X, Y)
    mu_S, cov_S = gp_posterior(
        kernel_ref, source.X, source.Y.squeeze(-1), source.Yvar.squeeze(-1)
    )
    noise_D = TARGET_NOISE + torch.diagonal(cov_S(X, X))
    mu_D, cov_D = gp_posterior(kernel_ref, X, Y.squeeze(-1) - mu_S(X), noise_D)
    y_cs, var_D = model.corrected_source()
    torch.testing.assert_close(
        y_cs, source.Y.squeeze(-1) + mu_D(source.X), rtol=RTOL, atol=ATOL
    )
    torch.testing.assert_close(
        var_D, torch.diagonal(cov_D(source.X, source.X)), rtol=RTOL, atol=ATOL
    )
    # and the final GP's per-point noise is [sigma'^2 + sigma^2_D(x_s); sigma_a^2]
    expected = torch.cat(
        [source.Yvar.squeeze(-1) + var_D, torch.full((7,), TARGET_NOISE, dtype=F64)]
    )
    torch.testing.assert_close(model.likelihood.noise, expected, rtol=RTOL, atol=ATOL)


def test_learned_noises_and_no_target_data():
    source = TaskData(make_source().X, make_source().Y)  # sigma'^2 unknown: learned
    X, Y = make_target()
    model = make_diff(source, X, Y, train_Yvar=None)
    noise = model.likelihood.noise_covar
    noise.learned[0].noise = torch.tensor(0.02, dtype=F64)
    noise.learned[1].noise = torch.tensor(0.006, dtype=F64)
    model.train()
    model.eval()  # hyperparameters changed by hand: eval mode re-derives the correction
    ref_mean, ref_cov = reference(
        source,
        X,
        Y,
        torch.full((40,), 0.02, dtype=F64),
        torch.full((7,), 0.006, dtype=F64),
    )
    assert_posterior_matches(model, ref_mean, ref_cov, torch.rand(2, 3, 2, dtype=F64))
    # T = 0: mu_D = 0 and sigma^2_D = k(x, x) (the source is heavily discounted)
    full_source = make_source()
    X0, Y0 = make_target(n=0)
    model = make_diff(full_source, X0, Y0)
    ref_mean, ref_cov = reference(
        full_source, X0, Y0, full_source.Yvar.squeeze(-1), Y0.squeeze(-1)
    )
    assert_posterior_matches(model, ref_mean, ref_cov, torch.rand(3, 2, dtype=F64))


def test_standardize_maps_source_and_target_alike():
    source = make_source()
    X, Y = make_target()
    model = make_diff(source, X, Y, outcome_transform=Standardize(1))
    pooled = torch.cat([source.Y, Y])
    o, s = pooled.mean(), pooled.std()
    scaled = TaskData(source.X, (source.Y - o) / s, source.Yvar / s**2)
    ref_mean, ref_cov = reference(
        scaled,
        X,
        (Y - o) / s,
        scaled.Yvar.squeeze(-1),
        torch.full((7,), TARGET_NOISE, dtype=F64) / s**2,
    )
    X_test = torch.rand(4, 2, dtype=F64)
    post = model.posterior(X_test)
    torch.testing.assert_close(
        post.mean.squeeze(-1), ref_mean(X_test) * s + o, rtol=RTOL, atol=ATOL
    )
    torch.testing.assert_close(
        post.distribution.covariance_matrix,
        ref_cov(X_test, X_test) * s**2,
        rtol=RTOL,
        atol=ATOL,
    )


def test_correction_follows_conditioning_and_fantasies():
    source = make_source()
    X, Y = make_target(n=9)
    model = make_diff(source, X[:6], Y[:6])
    cond = model.condition_on_observations(
        X[6:], Y[6:], noise=torch.full_like(Y[6:], TARGET_NOISE)
    )
    direct = make_diff(source, X, Y)
    torch.testing.assert_close(
        cond.corrected_source()[0], direct.corrected_source()[0], rtol=RTOL, atol=ATOL
    )
    X_test = torch.rand(3, 2, dtype=F64)
    torch.testing.assert_close(
        cond.posterior(X_test).mean, direct.posterior(X_test).mean, rtol=RTOL, atol=ATOL
    )
    # each fantasy carries the correction of its own fantasized observation
    fantasy = model.fantasize(X[6:7], SobolQMCNormalSampler(torch.Size([3])))
    assert fantasy.batch_shape == torch.Size([3])
    for i in range(3):
        y_i = fantasy.target_Y[i, -1:]
        rebuilt = make_diff(source, X[:7], torch.cat([Y[:6], y_i]))
        torch.testing.assert_close(
            fantasy.train_targets[i, : source.n],
            rebuilt.corrected_source()[0],
            rtol=RTOL,
            atol=ATOL,
        )


def test_fit_rederives_the_correction():
    source = make_source()
    X, Y = make_target(n=12)
    model = DiffGP(
        X,
        Y,
        source=source,
        input_transform=Normalize(2),
        outcome_transform=Standardize(1),
    )
    before = model.corrected_source()[0].clone()
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    after, _ = model.corrected_source()
    assert not torch.allclose(before, after)
    # the stored training targets are the correction under the fitted hyperparameters
    torch.testing.assert_close(
        model.train_targets[: source.n], after, rtol=1e-12, atol=1e-12
    )


def test_bad_inputs():
    source = make_source()
    X, Y = make_target()
    with pytest.raises(ValueError, match="`source_noise` must be a non-negative"):
        DiffGP(X, Y, source=source, source_noise=-1.0)
    with pytest.raises(TypeError, match=r"`source\[0\]` must be a TaskData"):
        DiffGP(X, Y, source=SingleTaskGP(source.X, source.Y))
    with pytest.raises(TypeError, match="`train_Y` has dtype torch.float32"):
        DiffGP(X, Y.float(), source=source)
    with pytest.raises(ValueError, match="`train_Yvar` must be non-negative"):
        DiffGP(X, Y, source=source, train_Yvar=-torch.ones_like(Y))


def test_the_old_name_of_source_noise_warns_and_acts_the_same():
    X, Y = make_target()
    source = make_source()
    new = DiffGP(X, Y, source=source, source_noise=0.02)
    with pytest.warns(DeprecationWarning, match="`source_Yvar` is deprecated"):
        old = DiffGP(X, Y, source=source, source_Yvar=0.02)
    torch.testing.assert_close(old.train_targets, new.train_targets)
    torch.testing.assert_close(old.likelihood.noise, new.likelihood.noise)
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['nosie'\\]"):
        DiffGP(X, Y, source=source, nosie=0.02)
    with pytest.raises(TypeError, match="Give `source_noise` only"):
        DiffGP(X, Y, source=source, source_noise=0.02, source_Yvar=0.02)
