r"""The base class itself: a model written on its hooks alone, against a float64
reference; BoTorch's argument order; the posterior-combination hook (a weighted
posterior); laziness; errors that name the argument."""

import inspect
import warnings

import pytest
import torch
from botorch.acquisition import qUpperConfidenceBound
from botorch.fit import fit_gpytorch_mll
from botorch.models.transforms import Normalize, Standardize
from botorch.sampling import SobolQMCNormalSampler
from botorch.utils.datasets import SupervisedDataset
from gpytorch.distributions import MultivariateNormal
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from linear_operator.operators import DenseLinearOperator

from botorch_transfer import (
    ClusterMetaPriorGP,
    DeltaBOModel,
    DiffGP,
    EnvGP,
    PretrainedPriorGP,
    TaskData,
    build_cluster_prior,
)
from botorch_transfer.models import IdentityMap
from botorch_transfer.models.base import SourceConditionedGP, TrainingData
from botorch_transfer.models.utils.assorted import default_transfer_kernel
from botorch_transfer.validation import OutcomeScaleWarning
from tests.models.reference import gp_posterior, rbf
from tests.models.test_delta import (
    ATOL,
    F64,
    RTOL,
    TARGET_NOISE,
    delta_kernel,
    make_source,
    make_target,
)

LS, OS = torch.tensor([0.5, 0.7], dtype=F64), 0.09
SOURCE_WEIGHT = 0.7


class WeightedOffsetGP(SourceConditionedGP):
    r"""A toy model written on the hooks only: a GP on ``y - c`` (``c`` the mean of
    the source outcomes), predicted as ``c + w * GP`` (a *weighted* part, as an
    ensemble would weight its members)."""

    def _build_modules(
        self, transfer, train_X, covar_module, mean_module, input_transform
    ):
        Y = torch.cat([self._to_model_units(s.Y) for s in transfer])
        self.register_buffer("offset", Y.mean())
        self.covar_module = covar_module or default_transfer_kernel(train_X.shape[-1])

    def _training_data(self, X, Y, Yvar):
        noise = None if self.learns_target_noise else Yvar
        return TrainingData(X, Y - self.offset, noise)

    def _combine_posterior(self, gp_posterior, X):
        w = SOURCE_WEIGHT
        return MultivariateNormal(
            self.offset + w * gp_posterior.mean,
            gp_posterior.lazy_covariance_matrix * w**2,
        )

    def forward(self, x):
        if self.training:
            x = self.transform_inputs(x)
        mean = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
        return MultivariateNormal(mean, self.covar_module(x))


def kernel():
    return delta_kernel()


def reference(source, X, Y):
    c = source.Y.mean()
    k = lambda A, B: rbf(A, B, LS, OS)  # noqa: E731
    mean, cov = gp_posterior(
        k, X, Y.squeeze(-1) - c, torch.full((X.shape[0],), TARGET_NOISE, dtype=F64)
    )
    w = SOURCE_WEIGHT
    return (lambda A: c + w * mean(A)), (lambda A, B: w**2 * cov(A, B))


def test_a_model_written_on_the_hooks_matches_its_reference():
    source = make_source()
    X, Y = make_target()
    model = WeightedOffsetGP(
        X, Y, torch.full_like(Y, TARGET_NOISE), covar_module=kernel(), transfer=source
    )
    ref_mean, ref_cov = reference(source, X, Y)
    X_test = torch.rand(3, 4, 2, dtype=F64)
    post = model.posterior(X_test)
    torch.testing.assert_close(
        post.mean.squeeze(-1), ref_mean(X_test), rtol=RTOL, atol=ATOL
    )
    torch.testing.assert_close(
        post.distribution.covariance_matrix,
        ref_cov(X_test, X_test),
        rtol=RTOL,
        atol=ATOL,
    )
    # the template stored the target data and derived the training data from them
    torch.testing.assert_close(model.target_Y, Y)
    torch.testing.assert_close(model.train_targets, Y.squeeze(-1) - source.Y.mean())
    # ... and conditioning goes through the same hook
    X_new, Y_new = make_target(n=3, seed=7)
    cond = model.condition_on_observations(X_new, Y_new)
    ref_mean, ref_cov = reference(source, torch.cat([X, X_new]), torch.cat([Y, Y_new]))
    torch.testing.assert_close(
        cond.posterior(X_test).mean.squeeze(-1), ref_mean(X_test), rtol=RTOL, atol=ATOL
    )
    # and works with BoTorch's MC acquisition functions (q-batch joint posterior)
    acqf = qUpperConfidenceBound(
        model, beta=0.2, sampler=SobolQMCNormalSampler(torch.Size([16]))
    )
    assert acqf(X_test).shape == (3,)


def test_loo_log_density_predicts_each_target_point_from_the_others():
    source = make_source()
    X, Y = make_target()
    Yvar = torch.full_like(Y, TARGET_NOISE)
    model = WeightedOffsetGP(X, Y, Yvar, covar_module=kernel(), transfer=source)
    loo = model.loo_log_density()
    assert loo.shape == (7,)
    for i in range(7):
        keep = torch.arange(7) != i
        ref_mean, ref_cov = reference(source, X[keep], Y[keep])
        x = X[i : i + 1]
        variance = ref_cov(x, x).squeeze() + TARGET_NOISE
        expected = torch.distributions.Normal(
            ref_mean(x).squeeze(), variance.sqrt()
        ).log_prob(Y[i].squeeze())
        torch.testing.assert_close(loo[i], expected, rtol=RTOL, atol=ATOL)
    # the model is left as it was
    torch.testing.assert_close(model.target_X, X)
    torch.testing.assert_close(model.train_targets, Y.squeeze(-1) - source.Y.mean())
    with pytest.raises(ValueError, match=">= 2 target points"):
        WeightedOffsetGP(
            X[:1], Y[:1], Yvar[:1], covar_module=kernel(), transfer=source
        ).loo_log_density()
    batched = WeightedOffsetGP(
        X.expand(2, 7, 2), Y.expand(2, 7, 1), covar_module=kernel(), transfer=source
    )
    with pytest.raises(ValueError, match="non-batched"):
        batched.loo_log_density()


def test_sequential_log_density_predicts_each_target_point_from_those_before():
    source = make_source()
    X, Y = make_target()
    Yvar = torch.full_like(Y, TARGET_NOISE)
    model = WeightedOffsetGP(X, Y, Yvar, covar_module=kernel(), transfer=source)
    sequential = model.sequential_log_density(start=2)
    assert sequential.shape == (5,)
    for i in range(2, 7):
        ref_mean, ref_cov = reference(source, X[:i], Y[:i])
        x = X[i : i + 1]
        variance = ref_cov(x, x).squeeze() + TARGET_NOISE
        expected = torch.distributions.Normal(
            ref_mean(x).squeeze(), variance.sqrt()
        ).log_prob(Y[i].squeeze())
        torch.testing.assert_close(sequential[i - 2], expected, rtol=RTOL, atol=ATOL)
    # start=1 scores one more point; nothing to score is an empty result
    torch.testing.assert_close(model.sequential_log_density()[1:], sequential)
    assert model.sequential_log_density(start=7).shape == (0,)
    # the model is left as it was
    torch.testing.assert_close(model.target_X, X)
    torch.testing.assert_close(model.train_targets, Y.squeeze(-1) - source.Y.mean())
    for start in (0, 1.5, True):
        with pytest.raises(ValueError, match="`start` must be an int >= 1"):
            model.sequential_log_density(start=start)
    batched = WeightedOffsetGP(
        X.expand(2, 7, 2), Y.expand(2, 7, 1), covar_module=kernel(), transfer=source
    )
    with pytest.raises(ValueError, match="non-batched"):
        batched.sequential_log_density()


def test_shared_outcome_map_and_transforms():
    source = make_source()
    X, Y = make_target()
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=F64)
    model = WeightedOffsetGP(
        X,
        Y,
        torch.full_like(Y, TARGET_NOISE),
        covar_module=kernel(),
        outcome_transform=Standardize(m=1),
        input_transform=Normalize(2, bounds=bounds),
        transfer=source,
    )
    pooled = torch.cat([source.Y, Y])
    o, s = pooled.mean(), pooled.std()
    torch.testing.assert_close(model.output_offset, o)
    torch.testing.assert_close(model.output_scale, s)
    # the model works in standardized units: the offset is the standardized source mean
    torch.testing.assert_close(model.offset, ((source.Y - o) / s).mean())
    assert model.posterior(torch.rand(4, 2, dtype=F64)).mean.shape == (4, 1)


def test_posterior_keeps_the_gp_covariance_object(monkeypatch):
    # the base class neither densifies nor re-wraps what the GP and the hook return
    source = make_source()
    X, Y = make_target()
    model = DeltaBOModel(
        X,
        Y,
        torch.full_like(Y, TARGET_NOISE),
        source=source,
    )
    seen = []
    combine = model._combine_posterior

    def spy(gp_posterior, X):
        seen.append(gp_posterior.lazy_covariance_matrix)
        return combine(gp_posterior, X)

    monkeypatch.setattr(model, "_combine_posterior", spy)
    mvn = model.posterior(torch.rand(5, 2, dtype=F64)).distribution
    assert mvn.lazy_covariance_matrix is seen[0]
    # with the source covariance added (diagonal mode) the sum stays a lazy operator
    diag = DeltaBOModel(X, Y, torch.full_like(Y, TARGET_NOISE), source=source)
    noisy = diag.posterior(
        torch.rand(5, 2, dtype=F64), observation_noise=True
    ).distribution
    assert not isinstance(noisy.lazy_covariance_matrix, DenseLinearOperator)


@pytest.mark.parametrize("cls", [DeltaBOModel, EnvGP, DiffGP])
def test_botorch_positional_order(cls):
    source = make_source()
    X, Y = make_target()
    Yvar = torch.full_like(Y, TARGET_NOISE)
    model = cls(X, Y, Yvar, source=source)  # SingleTaskGP's order
    torch.testing.assert_close(model.target_Yvar, Yvar)
    # Ax inspects the positional-or-keyword arguments for its submodules
    args = inspect.getfullargspec(cls).args
    for name in (
        "train_Yvar",
        "likelihood",
        "covar_module",
        "mean_module",
        "outcome_transform",
        "input_transform",
    ):
        assert name in args


@pytest.mark.parametrize("cls", [ClusterMetaPriorGP, PretrainedPriorGP])
def test_meta_models_take_train_yvar_third_and_prior_by_keyword(cls):
    args = inspect.getfullargspec(cls)
    assert args.args[1:4] == ["train_X", "train_Y", "train_Yvar"]
    assert "prior" in args.kwonlyargs and "input_transform" in args.args
    assert cls.transfer_argument == "prior"


def test_a_source_passed_positionally_is_a_clear_error():
    source = make_source()
    X, Y = make_target()
    with pytest.raises(TypeError, match="keyword-only argument: 'source'"):
        DeltaBOModel(X, Y, source)
    with pytest.raises(
        TypeError, match="`train_Yvar` must be a floating point.*source="
    ):
        DeltaBOModel(X, Y, source, source=source)
    with pytest.raises(TypeError, match="`source` is required"):
        DeltaBOModel(X, Y, source=None)


def test_a_second_output_is_a_clear_error():
    model = DeltaBOModel(*make_target(), source=make_source())
    with pytest.raises(ValueError, match=r"`output_indices` must be None or \[0\]"):
        model.posterior(model.target_X, output_indices=[1])
    assert model.posterior(model.target_X, output_indices=[0]).mean.shape[-1] == 1


def test_likelihoods_that_cannot_carry_the_noise_are_rejected():
    source = make_source()
    X, Y = make_target()
    with pytest.raises(TypeError, match="FixedNoiseGaussianLikelihood `likelihood`"):
        DeltaBOModel(
            X,
            Y,
            source=source,
            likelihood=GaussianLikelihood(),
            # per-point source variance as noise
            source_map=IdentityMap(residual_covariance="diagonal"),
        )
    with pytest.raises(
        TypeError,
        match="`likelihood` of a EnvGP must be a TaskIndexedGaussianLikelihood",
    ):
        EnvGP(X, Y, source=source, likelihood=GaussianLikelihood())
    with pytest.raises(ValueError, match="`covar_module`.*`delta_covar_module`"):
        DeltaBOModel(
            X,
            Y,
            source=source,
            covar_module=delta_kernel(),
            delta_covar_module=delta_kernel(),
        )


def test_construct_inputs_needs_the_transfer_argument():
    X, Y = make_target()
    data = SupervisedDataset(X, Y, feature_names=["a", "b"], outcome_names=["y"])
    with pytest.raises(ValueError, match="needs `source=`"):
        DeltaBOModel.construct_inputs(data)
    inputs = DeltaBOModel.construct_inputs(data, source=make_source())
    assert set(inputs) == {"train_X", "train_Y", "source"}
    with pytest.raises(ValueError, match="needs `prior=`"):
        ClusterMetaPriorGP.construct_inputs(data)
    assert (
        PretrainedPriorGP.fixes_outcome_units and not DeltaBOModel.fixes_outcome_units
    )


def query_model(kind):
    source = make_source()
    X, Y = make_target()
    if kind == "toy":  # written on the hooks only: the checks are the base class's
        return WeightedOffsetGP(X, Y, covar_module=kernel(), transfer=source)
    if kind == "hyperbo":
        from tests.priors.hyperbo.test_objectives import make_prior

        return PretrainedPriorGP(X, Y, prior=make_prior())
    return {"deltabo": DeltaBOModel, "envgp": EnvGP}[kind](X, Y, source=source)


@pytest.mark.parametrize("kind", ["toy", "deltabo", "envgp", "hyperbo"])
def test_query_inputs_are_checked_once_for_all_models(kind):
    model = query_model(kind)
    nan_X = torch.rand(4, 3, 2, dtype=F64)
    nan_X[1, 2, 0] = float("nan")
    cases = [
        (torch.rand(2, dtype=F64), ValueError, r"`X` must have shape .* x q x d"),
        (torch.rand(4, 3, 3, dtype=F64), ValueError, r"`X` must have d=2 columns"),
        (nan_X, ValueError, r"`X` contains NaN or infinite values"),
        (nan_X.nan_to_num(posinf=1.0, nan=float("inf")), ValueError, "infinite"),
        (torch.ones(3, 2, dtype=torch.long), TypeError, "`X` must be a floating"),
    ]
    for X, error, match in cases:
        with pytest.raises(error, match=match):
            model.posterior(X)
    X_new, Y_new = torch.rand(2, 2, dtype=F64), torch.rand(2, 1, dtype=F64)
    with pytest.raises(ValueError, match=r"`X` contains NaN"):
        model.condition_on_observations(X_new * float("nan"), Y_new)
    with pytest.raises(ValueError, match=r"`Y` contains NaN"):
        model.condition_on_observations(X_new, Y_new * float("nan"))
    assert torch.isfinite(model.posterior(nan_X.nan_to_num(0.5)).mean).all()


@pytest.mark.parametrize("kind", ["deltabo", "deltabo-full", "cmbo", "hyperbo"])
def test_fit_without_target_data_is_a_no_op(kind):
    # with no target points the model is its prior: nothing to fit, nothing changes
    from tests.models.test_contract import build

    X, Y = make_target()
    X, Y = X[:0], Y[:0]
    if kind == "cmbo":  # a small prior: one cluster of two tasks
        gen = torch.Generator().manual_seed(0)
        X_meta = torch.rand(2, 6, 2, generator=gen, dtype=F64)
        tasks = [
            TaskData(x, (i + 1) * x.sum(-1, keepdim=True)) for i, x in enumerate(X_meta)
        ]
        prior = build_cluster_prior(tasks, n_clusters=1, n_index_points=8, n_init=1)
        model = ClusterMetaPriorGP(X, Y, prior=prior)
    else:
        options = {"fine_tune": True} if kind == "hyperbo" else {}
        model = build(kind, X, Y, make_source(), **options)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    X_test = torch.rand(4, 1, 2, dtype=F64)
    expected = model.posterior(X_test)
    mll = fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    assert not mll.training
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key
    post = model.posterior(X_test)
    torch.testing.assert_close(post.mean, expected.mean)
    torch.testing.assert_close(post.variance, expected.variance)


@pytest.mark.parametrize("kind", ["cmbo", "hyperbo"])
def test_fit_with_nothing_trainable_is_a_no_op(kind):
    # a frozen meta prior with known target noise has no parameters to fit
    # (fit_gpytorch_mll would raise "No parameters to get state from.")
    from tests.models.test_contract import build

    X, Y = make_target()
    model = build(kind, X, Y, make_source(), train_Yvar=torch.full_like(Y, 0.01))
    assert not any(p.requires_grad for p in model.parameters())
    X_test = torch.rand(4, 1, 2, dtype=F64)
    expected = model.posterior(X_test)
    mll = fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    assert not mll.training
    post = model.posterior(X_test)
    torch.testing.assert_close(post.mean, expected.mean)
    torch.testing.assert_close(post.variance, expected.variance)


def test_the_fit_is_botorchs_default_fit_of_the_model():
    # custom_fit hands the model to fit_gpytorch_mll's own path (the reference is
    # the function that path calls), and is visible again afterwards
    import copy

    from botorch.fit import _fit_fallback

    X, Y = make_target()
    model = DeltaBOModel(X, Y, source=make_source())
    reference = copy.deepcopy(model)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    _fit_fallback(ExactMarginalLogLikelihood(reference.likelihood, reference))
    for (name, p), (_, p_ref) in zip(
        model.named_parameters(), reference.named_parameters(), strict=True
    ):
        torch.testing.assert_close(p, p_ref, msg=name)
    assert hasattr(model, "custom_fit") and "_in_default_fit" not in model.__dict__

    def failing_optimizer(*args, **kwargs):
        raise RuntimeError("the optimizer failed")

    with pytest.raises(RuntimeError, match="the optimizer failed"):
        fit_gpytorch_mll(
            ExactMarginalLogLikelihood(model.likelihood, model),
            optimizer=failing_optimizer,
        )
    assert hasattr(model, "custom_fit") and "_in_default_fit" not in model.__dict__


@pytest.mark.parametrize("name", ["DeltaBOModel", "EnvGP", "DiffGP", "RGPE"])
def test_a_state_fitted_on_other_data_loads_with_this_models_data(name):
    # Ax's cross-validation loads the full-data model's state (its outcome map
    # included) into a model built on a fold: the fold's data must be expressed in
    # the loaded map, not left in the units of its own (a shift of 0.57 in target_Y
    # before)
    import copy

    import botorch_transfer

    cls = getattr(botorch_transfer, name)
    gen = torch.Generator().manual_seed(0)
    X_s = torch.rand(40, 2, generator=gen, dtype=F64)
    X = torch.rand(12, 2, generator=gen, dtype=F64)

    def f(Z):
        return torch.sin(6 * Z[:, :1]) + torch.cos(5 * Z[:, 1:])

    source = TaskData(X_s, f(X_s) + 0.3)
    Y = f(X) + 2.0 * X[:, :1] + 3.0 * (X[:, 1:] > 0.5)
    full = cls(X, Y, source=source, outcome_transform=Standardize(m=1))
    fit_gpytorch_mll(ExactMarginalLogLikelihood(full.likelihood, full))
    fold = cls(X[:8], Y[:8], source=source, outcome_transform=Standardize(m=1))
    assert not torch.equal(fold.output_offset, full.output_offset)
    fold.load_state_dict(full.state_dict())
    torch.testing.assert_close(fold.target_Y, Y[:8], rtol=0, atol=1e-12)
    # the reference: the full model itself with the fold's target data
    reference = copy.deepcopy(full)
    reference._set_target_data(
        X[:8],
        reference._to_model_units(Y[:8]).squeeze(-1),
        torch.full((8,), float("nan"), dtype=F64),
    )
    reference.prediction_strategy = None
    X_test = torch.rand(5, 2, generator=gen, dtype=F64)
    a, b = fold.posterior(X_test), reference.posterior(X_test)
    torch.testing.assert_close(a.mean, b.mean, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(a.variance, b.variance, rtol=1e-10, atol=1e-10)


def test_outcomes_below_the_standardize_floor_warn():
    source = make_source()
    X, Y = make_target()
    tiny = TaskData(source.X, 1e-9 * source.Y)
    with pytest.warns(OutcomeScaleWarning, match=r"below Standardize's floor"):
        DeltaBOModel(X, 1e-9 * Y, source=tiny, outcome_transform=Standardize(m=1))
    # ordinary scales, and a floor set below the spread, do not warn
    with warnings.catch_warnings():
        warnings.simplefilter("error", OutcomeScaleWarning)
        DeltaBOModel(X, Y, source=source, outcome_transform=Standardize(m=1))
        DeltaBOModel(
            X, 1e-9 * Y, source=tiny, outcome_transform=Standardize(m=1, min_stdv=1e-12)
        )


def test_a_learned_normalize_without_training_inputs_is_a_clear_error():
    source = make_source()
    X, Y = torch.empty(0, 2, dtype=F64), torch.empty(0, 1, dtype=F64)
    with pytest.raises(ValueError, match=r"`input_transform` \(Normalize\) learns"):
        DeltaBOModel(X, Y, source=source, input_transform=Normalize(2))
    # with bounds it works, and a pooled model learns them from the source inputs
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=F64)
    DeltaBOModel(X, Y, source=source, input_transform=Normalize(2, bounds=bounds))
    EnvGP(X, Y, source=source, input_transform=Normalize(2))


def test_inputs_changed_in_place_after_construction_do_not_reach_the_model():
    source = make_source()
    X, Y = make_target()
    Yvar = torch.full_like(Y, TARGET_NOISE)
    model = DeltaBOModel(X, Y, Yvar, source=source)
    X_test = torch.rand(3, 2, dtype=F64)
    before = model.posterior(X_test)
    expected = (X.clone(), Y.clone(), Yvar.clone())
    X.fill_(float("nan")), Y.mul_(100.0), Yvar.fill_(-1.0)
    source.X.add_(1.0)
    for got, want in zip(
        (model.target_X, model.target_Y, model.target_Yvar), expected, strict=True
    ):
        torch.testing.assert_close(got, want)
    model.prediction_strategy = None  # nothing cached: recomputed from its own data
    after = model.posterior(X_test)
    torch.testing.assert_close(after.mean, before.mean)
    torch.testing.assert_close(after.variance, before.variance)
