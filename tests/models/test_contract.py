r"""The BoTorch contract, checked the same way for every source-conditioned GP."""

import functools
import itertools
import pickle

import pytest
import torch
from botorch.acquisition import LogExpectedImprovement, qLogNoisyExpectedImprovement
from botorch.fit import fit_gpytorch_mll
from botorch.models.transforms import Normalize, Standardize
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP

from botorch_transfer import (
    RGPE,
    ClusterMetaPriorGP,
    DeltaBOModel,
    DiffGP,
    EnvGP,
    PretrainedPriorGP,
    TaskData,
    build_cluster_prior,
)
from botorch_transfer.models import IdentityMap, LowRankInference
from botorch_transfer.models.source_posterior import SourcePosterior
from tests.models.test_delta import F64, TARGET_NOISE, f, make_source, make_target
from tests.priors.hyperbo.test_objectives import make_prior

KINDS = [
    "deltabo",
    "deltabo-full",
    "deltabo-affine",
    "deltabo-marginal-affine",
    "envgp",
    "diffgp",
    "envgp-low-rank",
    "diffgp-low-rank",
    "rgpe",
    "cmbo",
    "hyperbo",
]


@functools.lru_cache
def cmbo_prior():
    r"""A small cm-BO prior on the contract's input space (two families of tasks)."""
    gen = torch.Generator().manual_seed(0)
    families = [f, lambda X: X.sum(-1, keepdim=True) - 1]
    tasks = []
    for fn in families:
        for _ in range(3):
            X = torch.rand(10, 2, generator=gen, dtype=F64)
            Y = fn(X) + 0.01 * torch.randn(10, 1, generator=gen, dtype=F64)
            tasks.append(TaskData(X, Y))
    return build_cluster_prior(tasks, n_clusters=2, n_index_points=16, n_init=2)


def build(kind, X, Y, source, **kwargs):
    if kind == "deltabo":  # the paper's diagonal residual noise
        return DeltaBOModel(
            X,
            Y,
            source=source,
            source_map=IdentityMap(residual_covariance="diagonal"),
            **kwargs,
        )
    if kind == "deltabo-full":  # the default
        return DeltaBOModel(X, Y, source=source, **kwargs)
    if kind == "deltabo-affine":  # learned source scale and offset
        return DeltaBOModel(X, Y, source=source, source_map="affine", **kwargs)
    if kind == "deltabo-marginal-affine":  # source scale and offset integrated out
        return DeltaBOModel(X, Y, source=source, source_map="marginal-affine", **kwargs)
    if kind == "rgpe":
        return RGPE(X, Y, source=source, **kwargs)
    if kind == "cmbo":  # the meta prior takes the place of the source
        return ClusterMetaPriorGP(X, Y, prior=cmbo_prior(), **kwargs)
    if kind == "hyperbo":
        # a prior in its pre-training units takes no outcome transform (by design)
        assert PretrainedPriorGP.fixes_outcome_units
        kwargs.pop("outcome_transform", None)
        return PretrainedPriorGP(X, Y, prior=make_prior(), **kwargs)
    if kind.endswith("-low-rank"):  # FITC with fewer inducing inputs than sources
        kwargs.update(inference=LowRankInference(num_inducing=12))
    model_class = EnvGP if kind.startswith("envgp") else DiffGP
    return model_class(X, Y, source=source, **kwargs)


@pytest.mark.parametrize(
    "kind, dtype, transforms, batch",
    list(itertools.product(KINDS, [torch.float32, F64], [False, True], [(), (2,)])),
)
def test_shapes_dtypes_devices_transforms(device, kind, dtype, transforms, batch):
    source = make_source(dtype=dtype, device=device)
    X, Y = make_target(dtype=dtype, device=device, batch=batch)
    options = (
        dict(input_transform=Normalize(2), outcome_transform=Standardize(m=1))
        if transforms
        else {}
    )
    model = build(kind, X, Y, source, **options)
    assert model.batch_shape == torch.Size(batch) and model.num_outputs == 1
    for test_shape in (
        [(3, 2), (4, 3, 2), (2, 4, 3, 2)] if not batch else [(3, 2), (4, 1, 3, 2)]
    ):
        X_test = torch.rand(*test_shape, dtype=dtype, device=device)
        post = model.posterior(X_test)
        out_batch = torch.broadcast_shapes(
            torch.Size(test_shape[:-2]), model.batch_shape
        )
        assert post.mean.shape == out_batch + torch.Size([test_shape[-2], 1])
        assert post.mean.dtype == dtype and post.mean.device.type == device.type
        assert post.distribution.covariance_matrix.shape == out_batch + torch.Size(
            [test_shape[-2]] * 2
        )
        assert torch.isfinite(post.variance).all() and (post.variance > 0).all()
        noisy = model.posterior(X_test, observation_noise=True)
        assert (noisy.variance > post.variance).all()
    X_new = torch.rand(*batch, 2, 2, dtype=dtype, device=device)
    cond = model.condition_on_observations(X_new, f(X_new))
    assert cond.num_train == model.num_train + 2
    fantasy = model.fantasize(
        torch.rand(*batch, 1, 2, dtype=dtype, device=device),
        SobolQMCNormalSampler(torch.Size([3])),
    )
    assert fantasy.batch_shape == torch.Size([3, *batch])
    fantasy_post = fantasy.posterior(
        torch.rand(5, 1, *batch, 1, 2, dtype=dtype, device=device)
    )
    assert fantasy_post.mean.shape == torch.Size([5, 3, *batch, 1, 1])


@pytest.mark.parametrize("kind", KINDS)
def test_condition_on_observations_equals_rebuild(kind):
    source = make_source()
    X, Y = make_target(n=9)
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=F64)
    Yvar = torch.full_like(Y, TARGET_NOISE)
    model = build(
        kind,
        X[:6],
        Y[:6],
        source,
        train_Yvar=Yvar[:6],
        input_transform=Normalize(2, bounds=bounds),
    )
    cond = model.condition_on_observations(X[6:], Y[6:], noise=Yvar[6:])
    direct = build(
        kind, X, Y, source, train_Yvar=Yvar, input_transform=Normalize(2, bounds=bounds)
    )
    direct.load_state_dict(model.state_dict())  # same hyperparameters
    X_test = torch.rand(3, 2, 2, dtype=F64)
    torch.testing.assert_close(
        cond.posterior(X_test).mean,
        direct.posterior(X_test).mean,
        rtol=1e-8,
        atol=1e-10,
    )
    torch.testing.assert_close(
        cond.posterior(X_test).distribution.covariance_matrix,
        direct.posterior(X_test).distribution.covariance_matrix,
        rtol=1e-8,
        atol=1e-10,
    )
    assert model.num_train == 6  # the original is unchanged


@pytest.mark.parametrize("kind", KINDS)
def test_state_dict_round_trip_and_pickle(kind):
    torch.manual_seed(0)
    source = make_source()
    X, Y = make_target()
    options = dict(outcome_transform=Standardize(1), input_transform=Normalize(2))
    model = build(kind, X, Y, source, **options)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    torch.manual_seed(0)
    clone = build(
        kind,
        X,
        Y,
        source,
        outcome_transform=Standardize(1),
        input_transform=Normalize(2),
    )
    clone.load_state_dict(model.state_dict())
    X_test = torch.rand(4, 3, 2, dtype=F64)
    torch.testing.assert_close(
        clone.posterior(X_test).mean,
        model.posterior(X_test).mean,
        rtol=1e-10,
        atol=1e-10,
    )
    restored = pickle.loads(pickle.dumps(model))
    torch.testing.assert_close(
        restored.posterior(X_test).variance,
        model.posterior(X_test).variance,
        rtol=1e-12,
        atol=1e-12,
    )


@pytest.mark.parametrize("kind", KINDS)
def test_to_moves_everything(device, kind):
    model = build(kind, *make_target(), make_source())
    model.posterior(
        torch.rand(2, 2, dtype=F64)
    )  # caches a prediction strategy in float64
    moved = model.to(device=device, dtype=torch.float32)
    post = moved.posterior(torch.rand(2, 2, device=device))
    assert post.mean.dtype == torch.float32 and post.mean.device.type == device.type
    assert all(b.device.type == device.type for b in moved.buffers())


def _prediction_caches(model):
    r"""Ids of the prediction caches anywhere in ``model``: GPyTorch's prediction
    strategies and the source posteriors' kept covariances."""
    caches = {}
    for name, module in model.named_modules():
        if isinstance(module, ExactGP):
            value = module.prediction_strategy
        elif isinstance(module, SourcePosterior):
            value = module._covariance_cache
        else:
            continue
        if value is not None:
            caches[name] = id(value)
    return caches


@pytest.mark.parametrize("kind", KINDS)
def test_a_to_that_moves_nothing_keeps_the_prediction_caches(kind):
    # BoTorch's analytic acquisition functions call model.to(X) at every
    # evaluation: dropping the caches there rebuilt them at every evaluation
    model = build(kind, *make_target(), make_source())
    acqf = LogExpectedImprovement(model, best_f=model.target_Y.max())
    X = torch.rand(4, 1, 2, dtype=F64)
    first = acqf(X)
    caches = _prediction_caches(model)
    torch.testing.assert_close(acqf(X), first, rtol=0, atol=0)
    assert _prediction_caches(model) == caches
    model.to(torch.float64)
    assert _prediction_caches(model) == caches
    # a real move drops them (the next posterior rebuilds them in float32)
    model.to(torch.float32)
    assert not set(_prediction_caches(model).items()) & set(caches.items())
    assert model.posterior(X.float()).mean.dtype == torch.float32


@pytest.mark.parametrize("kind", KINDS)
def test_subset_output_says_why_and_what_to_do(kind):
    model = build(kind, *make_target(), make_source())
    with pytest.raises(NotImplementedError, match="single outcome") as error:
        model.subset_output([0])
    assert "ModelListGP" in str(error.value)


@pytest.mark.parametrize(
    "kind, transforms", list(itertools.product(KINDS, [False, True]))
)
def test_botorch_incumbent_idioms_see_the_target_data(kind, transforms):
    # train_targets/train_inputs are the GP's derived data (residuals, pooled source
    # points, model units); target_Y/target_X are the user's, whatever the model
    source = make_source()
    X, Y = make_target()
    Y = 10 * Y + 3  # far from standardized units
    options = (
        dict(input_transform=Normalize(2), outcome_transform=Standardize(m=1))
        if transforms
        else {}
    )
    model = build(kind, X, Y, source, **options)
    assert torch.equal(model.target_X, X)
    torch.testing.assert_close(model.target_Y, Y)
    assert model.target_Yvar is None  # learned
    # the documented idioms
    acqf = LogExpectedImprovement(model, best_f=model.target_Y.max())
    torch.testing.assert_close(acqf.best_f, Y.max())
    acqf = qLogNoisyExpectedImprovement(model, X_baseline=model.target_X)
    # pruned to the target points likely to be best: rows of train_X
    assert (acqf.X_baseline.unsqueeze(-2) == X).all(-1).any(-1).all()
    assert torch.isfinite(acqf(torch.rand(3, 1, 2, dtype=F64))).all()
    acqf = qLogNoisyExpectedImprovement(
        model, X_baseline=model.target_X, prune_baseline=False
    )
    assert torch.equal(acqf.X_baseline, X)
    # the view follows new observations
    X_new = torch.rand(2, 2, dtype=F64)
    cond = model.condition_on_observations(X_new, 10 * f(X_new) + 3)
    assert torch.equal(cond.target_X, torch.cat([X, X_new]))
    torch.testing.assert_close(cond.target_Y, torch.cat([Y, 10 * f(X_new) + 3]))
    # known noise comes back in the user's units
    Yvar = torch.full_like(Y, 0.5)
    model = build(kind, X, Y, source, train_Yvar=Yvar, **options)
    torch.testing.assert_close(model.target_Yvar, Yvar)
