import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize, Standardize
from gpytorch.means import ZeroMean
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer import EnvGP, TaskData
from tests.models.reference import env_gp_posterior, rbf
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


def env_reference(
    sources,
    X,
    Y,
    source_noise,
    target_noise=TARGET_NOISE,
    scale=1.0,
    offset=0.0,
    outcome_offset=0.0,
    outcome_scale=1.0,
):
    r"""Eq. 5's posterior (``env_gp_posterior`` with ``kernel_ref``) for the sources
    (a ``TaskData`` or a list, pooled) and the target ``(X, Y)``.

    Noises are floats or per-point tensors in user units; the source observes
    ``scale * f + offset``; outcomes and noises enter in model units,
    ``(y - outcome_offset) / outcome_scale``.
    """
    sources = sources if isinstance(sources, list) else [sources]
    X_s = torch.cat([s.X for s in sources])
    Y_s = torch.cat([s.Y for s in sources]).squeeze(-1)

    def noise(value, n):
        return torch.as_tensor(value, dtype=F64).expand(n) / outcome_scale**2

    return env_gp_posterior(
        kernel_ref,
        X_s,
        (Y_s - outcome_offset) / outcome_scale,
        noise(source_noise, len(Y_s)),
        X,
        (Y.squeeze(-1) - outcome_offset) / outcome_scale,
        noise(target_noise, X.shape[-2]),
        scale=scale,
        offset=offset,
    )


def make_env(source, X, Y, **kwargs):
    kwargs.setdefault("train_Yvar", torch.full_like(Y, TARGET_NOISE))
    return EnvGP(
        X,
        Y,
        source=source,
        covar_module=delta_kernel(),
        mean_module=ZeroMean(),
        **kwargs,
    )


def test_posterior_matches_eq5_with_fixed_stretch():
    source = make_source()
    X, Y = make_target()
    model = make_env(source, X, Y, source_noise=0.05)
    ref_mean, ref_cov = env_reference(source, X, Y, 0.05)
    assert_posterior_matches(model, ref_mean, ref_cov, torch.rand(3, 4, 2, dtype=F64))


def test_posterior_matches_reference_with_source_scale_and_offset():
    source = make_source()
    X, Y = make_target()
    model = make_env(source, X, Y, source_noise=0.05)
    with torch.no_grad():
        model.source_scale.fill_(0.6)
        model.source_offset.fill_(-0.4)
    ref_mean, ref_cov = env_reference(source, X, Y, 0.05, scale=0.6, offset=-0.4)
    assert_posterior_matches(model, ref_mean, ref_cov, torch.rand(3, 4, 2, dtype=F64))


def offset_pair(seed: int, n_source: int = 20, n_target: int = 5):
    generator = torch.Generator().manual_seed(seed)

    def f(Z):
        return torch.sin(3 * Z).sum(-1, keepdim=True)

    X_s = torch.rand(n_source, 2, generator=generator, dtype=F64)
    X = torch.rand(n_target, 2, generator=generator, dtype=F64)
    return TaskData(X_s, f(X_s) + 1.0), X, f(X)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_source_with_an_offset_is_not_explained_away_as_target_noise(seed):
    # with the paper's map (identity) the stretch stays at its floor and the
    # target noise absorbs the offset: the posterior at the target's own data is off
    # by 1.0 with sd <= 0.06. The learned offset keeps it at the data.
    source, X, Y = offset_pair(seed)
    errors = {}
    for source_map in ("identity", "affine"):
        model = EnvGP(X, Y, source=source, source_map=source_map)
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        post = model.posterior(X)
        errors[source_map] = ((post.mean - Y).abs() / post.variance.sqrt()).max()
    assert errors["identity"] > 10  # the paper's model is confidently wrong here
    assert errors["affine"] < 3
    assert abs(model.source_offset.item() - 1.0) < 0.1


def test_learned_stretch_sits_on_top_of_source_noise_per_task():
    first, second = make_source(n=20, seed=3), make_source(n=15, seed=4, noise=0.03)
    X, Y = make_target()
    model = make_env([first, second], X, Y, train_Yvar=None)
    noise = model.likelihood.noise_covar
    stretch = [torch.tensor(0.2, dtype=F64), torch.tensor(0.5, dtype=F64)]
    for k in range(2):
        noise.learned[k].noise = stretch[k]
    noise.learned[2].noise = torch.tensor(0.007, dtype=F64)  # target sigma_a^2
    sigma_s2 = torch.cat([first.Yvar.squeeze(-1) + 0.2, second.Yvar.squeeze(-1) + 0.5])
    ref_mean, ref_cov = env_reference([first, second], X, Y, sigma_s2, 0.007)
    assert_posterior_matches(model, ref_mean, ref_cov, torch.rand(2, 3, 2, dtype=F64))
    # the per-point training noise is exactly [sigma_s^2; sigma_a^2]
    torch.testing.assert_close(
        model.likelihood.noise,
        torch.cat([sigma_s2, torch.full((7,), 0.007, dtype=F64)]),
    )


def test_no_target_data_and_standardize():
    source = make_source()
    X, Y = make_target(n=0)
    model = make_env(source, X, Y, source_noise=0.05)
    ref_mean, ref_cov = env_reference(source, X, Y, 0.05)
    assert_posterior_matches(model, ref_mean, ref_cov, torch.rand(4, 2, dtype=F64))
    # Standardize: one map fitted on source and target outcomes, applied to both
    X, Y = make_target()
    model = make_env(source, X, Y, source_noise=0.05, outcome_transform=Standardize(1))
    pooled = torch.cat([source.Y, Y])
    o, s = pooled.mean(), pooled.std()
    ref_mean, ref_cov = env_reference(
        source, X, Y, 0.05, outcome_offset=o, outcome_scale=s
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


def test_fit_stretches_envelope_for_a_dissimilar_source():
    # identical source: little stretch; a shifted source needs a wider envelope
    X, Y = make_target(n=15)
    similar = make_source(
        n=30,
        fn=lambda Z: (
            torch.sin(5 * Z[..., :1])
            + torch.cos(4 * Z[..., 1:])
            + 0.3 * Z[..., :1]
            - 0.2
        ),
    )
    different = make_source(n=30, fn=lambda Z: -torch.sin(5 * Z[..., :1]) + 1.5)
    stretches = []
    for source in (similar, different):
        model = EnvGP(
            X,
            Y,
            source=source,
            train_Yvar=torch.full_like(Y, TARGET_NOISE),
            source_map="identity",  # the paper's envelope: only the stretch adapts
        )
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        sigma_s2 = model.likelihood.noise[: source.n]
        assert (
            sigma_s2 >= source.Yvar.squeeze(-1)
        ).all()  # never below the source's own noise
        stretches.append(model.likelihood.noise_covar.learned[0].noise.item())
    assert stretches[1] > 10 * stretches[0]


def test_with_identical_source_noise_equals_pooled_singletaskgp():
    # EnvGP with sigma_s^2 = sigma_a^2 is a plain GP on the pooled data
    source = make_source()
    X, Y = make_target()
    model = make_env(
        source, X, Y, source_noise=0.01, train_Yvar=torch.full_like(Y, 0.01)
    )
    pooled = SingleTaskGP(
        torch.cat([source.X, X]),
        torch.cat([source.Y, Y]),
        torch.full((47, 1), 0.01, dtype=F64),
        covar_module=delta_kernel(),
        mean_module=ZeroMean(),
        outcome_transform=None,
    )
    X_test = torch.rand(5, 2, dtype=F64)
    torch.testing.assert_close(
        model.posterior(X_test).mean,
        pooled.posterior(X_test).mean,
        rtol=1e-9,
        atol=1e-10,
    )


def test_bad_inputs():
    source = make_source()
    X, Y = make_target()
    with pytest.raises(ValueError, match="below that task's own noise"):
        EnvGP(X, Y, source=source, source_noise=0.001)
    with pytest.raises(ValueError, match="one float or one per source task"):
        EnvGP(X, Y, source=[source, source], source_noise=[0.1])
    with pytest.raises(ValueError, match="positive finite"):
        EnvGP(X, Y, source=source, source_noise=float("nan"))
    with pytest.raises(ValueError, match="`source_map` must be 'affine' or"):
        EnvGP(X, Y, source=source, source_map="scaled")
    with pytest.raises(TypeError, match=r"`source\[0\]` must be a TaskData"):
        EnvGP(X, Y, source=SingleTaskGP(source.X, source.Y))
    with pytest.raises(ValueError, match=r"`source\[0\]` has input dimension d=3"):
        EnvGP(
            X,
            Y,
            source=TaskData(torch.rand(4, 3, dtype=F64), torch.rand(4, 1, dtype=F64)),
        )
    with pytest.raises(ValueError, match="`train_Y` must have shape"):
        EnvGP(X, Y.squeeze(-1), source=source)


def test_input_transform_is_learned_at_construction_and_survives_state_dict():
    # as SingleTaskGP (and DiffGP): Normalize learns its bounds from the GP's training
    # inputs (here the pooled source and target inputs) when the model is built
    source = make_source()
    X, Y = make_target()
    X, source = 3 * X + 1, TaskData(3 * source.X + 1, source.Y, source.Yvar)
    model = EnvGP(X, Y, source=source, input_transform=Normalize(2))
    pooled = torch.cat([source.X, X])
    reference = SingleTaskGP(
        pooled, torch.cat([source.Y, Y]), input_transform=Normalize(2)
    )
    torch.testing.assert_close(
        model.input_transform.bounds, reference.input_transform.bounds
    )
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    clone = EnvGP(X, Y, source=source, input_transform=Normalize(2))
    X_test = 3 * torch.rand(4, 3, 2, dtype=F64) + 1
    clone.posterior(X_test)  # in eval mode before the state is loaded
    clone.load_state_dict(model.state_dict())
    torch.testing.assert_close(
        clone.posterior(X_test).mean, model.posterior(X_test).mean, rtol=0, atol=1e-10
    )
    torch.testing.assert_close(
        clone.posterior(X_test).variance,
        model.posterior(X_test).variance,
        rtol=0,
        atol=1e-10,
    )
