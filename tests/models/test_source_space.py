import math

import pytest
import torch
from botorch.acquisition.logei import qLogNoisyExpectedImprovement
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms.input import Normalize
from botorch.optim import optimize_acqf
from gpytorch.kernels import RBFKernel
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer import TaskData
from botorch_transfer.models import (
    RGPE,
    DeltaBOModel,
    EnvGP,
    RankWeightedTransferGP,
    align_source,
    align_source_candidates,
    parameter_roles,
)
from tests.models.reference import gp_posterior, rbf

DOUBLE = dict(dtype=torch.float64)


def _source(n: int = 12, seed: int = 0) -> TaskData:
    X = torch.rand(n, 3, generator=torch.Generator().manual_seed(seed), **DOUBLE)
    Y = torch.sin(3 * X[:, :1]) + X[:, 1:2] * X[:, 2:3]
    # the source's columns in its own order: "width" is a target parameter it
    # also has, "momentum" is its own, "lr" is shared
    return TaskData(X, Y, name="last month", feature_names=["width", "momentum", "lr"])


def test_shared_parameters_are_reordered_and_missing_ones_filled():
    source = _source()
    aligned = align_source(
        source, ["lr", "depth", "width"], {"depth": 4.0}, {"momentum": None}
    )
    assert aligned.feature_names == ("lr", "depth", "width")
    assert aligned.name == "last month"
    torch.testing.assert_close(aligned.X[:, 0], source.X[:, 2], rtol=0, atol=0)
    torch.testing.assert_close(aligned.X[:, 2], source.X[:, 0], rtol=0, atol=0)
    assert (aligned.X[:, 1] == 4.0).all()
    # marginalized: the same observations, the column's effect left to the noise
    torch.testing.assert_close(aligned.Y, source.Y, rtol=0, atol=0)
    assert aligned.Yvar is None


def test_known_noise_travels_with_filled_and_marginalized_sources():
    source = _source()
    Yvar = torch.full_like(source.Y, 0.01)
    source = TaskData(source.X, source.Y, Yvar, feature_names=source.feature_names)
    aligned = align_source(source, ["lr", "width"], target_values={"momentum": None})
    torch.testing.assert_close(aligned.Yvar, Yvar, rtol=0, atol=0)


def test_conditioning_on_the_targets_value_is_the_source_gps_posterior():
    source = _source()
    # a GP in the source's own columns with hyperparameters set by hand
    model = SingleTaskGP(
        source.X,
        source.Y,
        train_Yvar=torch.full_like(source.Y, 0.05),
        covar_module=RBFKernel(ard_num_dims=3),
        outcome_transform=None,
    )
    lengthscale = torch.tensor([0.3, 0.5, 0.7], **DOUBLE)
    model.covar_module.lengthscale = lengthscale
    model.mean_module.constant.data.fill_(0.2)
    model.eval()
    aligned = align_source(
        source, ["lr", "width"], target_values={"momentum": 0.25}, source_model=model
    )
    # the reference: eq. 5 at the source's points with momentum set to 0.25
    query = source.X.clone()
    query[:, 1] = 0.25
    mean, cov = gp_posterior(
        lambda A, B: rbf(A, B, lengthscale, 1.0),
        source.X,
        source.Y.squeeze(-1),
        torch.full((source.n,), 0.05, **DOUBLE),
        prior_mean=lambda A: torch.full(A.shape[:-1], 0.2, **DOUBLE),
    )
    torch.testing.assert_close(aligned.Y.squeeze(-1), mean(query))
    torch.testing.assert_close(aligned.Yvar.squeeze(-1), cov(query, query).diagonal())
    torch.testing.assert_close(aligned.X, query[:, [2, 0]], rtol=0, atol=0)


def test_conditioning_keeps_each_distinct_point_once_in_order():
    source = _source()
    X = torch.cat([source.X, source.X[:3]])  # three points run twice
    X[-3:, 1] = 0.9  # ... at another momentum
    source = TaskData(
        X, torch.cat([source.Y, source.Y[:3]]), feature_names=source.feature_names
    )
    aligned = align_source(source, ["lr", "width"], target_values={"momentum": 0.5})
    assert aligned.n == 12
    torch.testing.assert_close(aligned.X, source.X[:12][:, [2, 0]], rtol=0, atol=0)


def test_the_default_source_gp_is_fitted_on_the_kept_columns():
    source = _source(n=20)
    aligned = align_source(source, ["lr", "width"], target_values={"momentum": 0.5})
    # one prediction per source point, with its (positive) posterior variance as
    # the known noise; the prediction depends on the value conditioned on
    assert aligned.Y.shape == (20, 1) and (aligned.Yvar > 0).all()
    shifted = align_source(source, ["lr", "width"], target_values={"momentum": 0.0})
    assert not torch.allclose(aligned.Y, shifted.Y)


def test_parameter_roles_say_what_each_parameter_became():
    roles = parameter_roles(
        _source(), ["lr", "depth", "width"], {"depth": 4}, {"momentum": 0.9}
    )
    assert roles == {
        "lr": "shared",
        "depth": "filled at 4.0",
        "width": "shared",
        "momentum": "conditioned at 0.9",
    }
    roles = parameter_roles(
        _source(), ["lr", "width"], target_values={"momentum": None}
    )
    assert roles["momentum"] == "marginalized"


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(), ValueError, r"`source_values`: the source has no column \['depth'\]"),
        (
            dict(source_values={"depth": 1.0}),
            ValueError,
            r"`target_values`: the target has no parameter \['momentum'\]",
        ),
        (
            dict(
                source_values={"depth": 1.0, "lr": 0.1},
                target_values={"momentum": None},
            ),
            ValueError,
            r"`source_values\['lr'\]`: both the source and the target have 'lr'",
        ),
        (
            dict(
                source_values={"depth": 1.0, "batch": 8},
                target_values={"momentum": None},
            ),
            ValueError,
            r"`source_values\['batch'\]`: 'batch' is neither",
        ),
        (
            dict(source_values={"depth": 1.0, "momentum": 0.9}),
            ValueError,
            r"`source_values\['momentum'\]`: only the source has 'momentum'",
        ),
        (
            dict(source_values={"depth": 1.0}, target_values={"depth": 2.0}),
            ValueError,
            r"`target_values\['depth'\]`: only the target has 'depth'",
        ),
        (
            dict(source_values={"depth": None}, target_values={"momentum": None}),
            ValueError,
            r"`source_values\['depth'\]` is None",
        ),
        (
            dict(source_values={"depth": "4"}, target_values={"momentum": None}),
            TypeError,
            r"`source_values\['depth'\]` must be a number",
        ),
        (
            dict(source_values={"depth": math.inf}, target_values={"momentum": None}),
            ValueError,
            "must be finite",
        ),
        (
            dict(
                source_values={"depth": 9.0},
                target_values={"momentum": None},
                bounds=torch.tensor([[0.0, 1.0, 0.0], [1.0, 8.0, 1.0]], **DOUBLE),
            ),
            ValueError,
            r"`source_values\['depth'\]` = 9.0 is outside the target's bounds "
            r"\[1.0, 8.0\]",
        ),
        (
            dict(
                source_values={"depth": 2.0},
                target_values={"momentum": None},
                bounds=torch.zeros(2, 2, **DOUBLE),
            ),
            ValueError,
            "`bounds` must be a 2 x 3 tensor",
        ),
        (
            dict(
                source_values={"depth": 2.0},
                target_values={"momentum": 0.5},
                source_model=object(),
            ),
            ValueError,
            "`source_model`: with marginalized parameters",
        ),
    ],
)
def test_a_mapping_that_cannot_be_right_is_an_error_naming_it(kwargs, error, match):
    source = _source()
    if "source_model" in kwargs:  # a marginalized column beside a conditioned one
        X = torch.cat([source.X, source.X[:, :1]], dim=-1)
        source = TaskData(X, source.Y, feature_names=[*source.feature_names, "seed"])
        kwargs["target_values"]["seed"] = None
    with pytest.raises(error, match=match):
        align_source(source, ["lr", "depth", "width"], **kwargs)


def test_other_misuse_is_named():
    source = _source()
    unnamed = TaskData(source.X, source.Y)
    with pytest.raises(ValueError, match="`source` has no `feature_names`"):
        align_source(unnamed, ["lr", "width", "momentum"])
    with pytest.raises(ValueError, match=r"names \['lr'\] more than once"):
        align_source(source, ["lr", "lr", "width"], target_values={"momentum": None})
    with pytest.raises(ValueError, match="share no parameter"):
        align_source(
            source,
            ["depth"],
            {"depth": 1.0},
            {"momentum": None, "lr": None, "width": None},
        )
    with pytest.raises(ValueError, match="conditions on none"):
        align_source(
            source,
            ["lr", "width"],
            target_values={"momentum": None},
            source_model=object(),
        )


def test_a_source_on_other_parameters_is_refused_with_the_way_to_map_it():
    source = _source()
    train_X = torch.rand(4, 2, **DOUBLE)
    for model_class in (DeltaBOModel, RankWeightedTransferGP):
        with pytest.raises(ValueError, match="`TaskData.feature_names`.*`align"):
            model_class(train_X, train_X[:, :1], source=source)


@pytest.mark.parametrize(
    "model_class", [DeltaBOModel, RankWeightedTransferGP, RGPE, EnvGP]
)
def test_every_source_model_takes_an_aligned_source(model_class):
    aligned = align_source(_source(), ["lr", "width"], target_values={"momentum": 0.5})
    train_X = torch.rand(5, 2, **DOUBLE)
    model = model_class(train_X, train_X.sum(-1, keepdim=True), source=aligned)
    posterior = model.posterior(torch.rand(3, 2, **DOUBLE))
    assert posterior.mean.shape == (3, 1) and torch.isfinite(posterior.variance).all()


def test_a_bo_loop_with_a_source_that_lacked_a_parameter():
    # last month's runs had two parameters and ran the new one at 0.5; the target
    # has all three. The recommended model runs qLogNEI with q=2 on the box.
    generator = torch.Generator().manual_seed(3)

    def f(X):
        return -((X - 0.4) ** 2).sum(-1, keepdim=True)

    X_old = torch.rand(30, 2, generator=generator, **DOUBLE)
    Y_old = f(torch.cat([X_old, torch.full_like(X_old[:, :1], 0.5)], dim=-1))
    source = TaskData(X_old, Y_old, name="old", feature_names=["a", "b"])
    aligned = align_source(source, ["a", "b", "c"], source_values={"c": 0.5})
    bounds = torch.stack([torch.zeros(3, **DOUBLE), torch.ones(3, **DOUBLE)])
    train_X = torch.rand(4, 3, generator=generator, **DOUBLE)
    train_Y = f(train_X)
    for _ in range(2):
        model = RankWeightedTransferGP(
            train_X,
            train_Y,
            source=aligned,
            input_transform=Normalize(3, bounds=bounds),
        )
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        acqf = qLogNoisyExpectedImprovement(model, X_baseline=train_X)
        candidates, _ = optimize_acqf(
            acqf, bounds, q=2, num_restarts=2, raw_samples=32, options={"maxiter": 20}
        )
        assert candidates.shape == (2, 3)
        train_X = torch.cat([train_X, candidates])
        train_Y = torch.cat([train_Y, f(candidates)])
    assert train_X.shape == (8, 3)


def test_candidates_are_the_source_filled_at_each_value():
    source = _source()
    kwargs = dict(target_values={"momentum": None})
    aligned = align_source_candidates(
        source,
        ["lr", "depth", "width", "seed"],
        {"depth": [2, 4], "seed": [0.5]},
        **kwargs,
    )
    assert [s.name for s in aligned] == [
        "last month (depth=2, seed=0.5)",
        "last month (depth=4, seed=0.5)",
    ]
    for candidate, depth in zip(aligned, (2.0, 4.0)):
        expected = align_source(
            source,
            ["lr", "depth", "width", "seed"],
            {"depth": depth, "seed": 0.5},
            **kwargs,
        )
        torch.testing.assert_close(candidate.X, expected.X, rtol=0, atol=0)
        torch.testing.assert_close(candidate.Y, expected.Y, rtol=0, atol=0)
        assert candidate.feature_names == expected.feature_names


def test_candidates_share_one_conditioning():
    source = _source()
    aligned = align_source_candidates(
        source,
        ["lr", "width", "depth"],
        {"depth": [1.0, 3.0]},
        target_values={"momentum": 0.5},
    )
    expected = align_source(
        source, ["lr", "width", "depth"], {"depth": 3.0}, {"momentum": 0.5}
    )
    torch.testing.assert_close(aligned[1].X, expected.X, rtol=0, atol=0)
    torch.testing.assert_close(aligned[1].Y, expected.Y)
    torch.testing.assert_close(aligned[1].Yvar, expected.Yvar)
    torch.testing.assert_close(aligned[0].Y, aligned[1].Y, rtol=0, atol=0)


@pytest.mark.parametrize(
    "candidates, kwargs, error, match",
    [
        ({}, {}, TypeError, "`candidates` must map each parameter"),
        ({"depth": 2.0}, {}, TypeError, r"`candidates\['depth'\]` must be a sequence"),
        ({"depth": []}, {}, ValueError, r"`candidates\['depth'\]` is empty"),
        ({"depth": [1, 1]}, {}, ValueError, "names a value twice"),
        (
            {"depth": [1, "2"]},
            {},
            TypeError,
            r"`candidates\['depth'\]` must be a number",
        ),
        ({"depth": [math.nan]}, {}, ValueError, "must be finite"),
        (
            {"depth": [1.0]},
            {"source_values": {"depth": 1.0}},
            ValueError,
            r"`candidates\['depth'\]`: 'depth' has a known value",
        ),
        ({"lr": [1.0]}, {}, ValueError, "both the source and the target have 'lr'"),
        (
            {"depth": [1.0, 9.0]},
            {"bounds": torch.tensor([[0.0, 1.0, 0.0], [1.0, 8.0, 1.0]], **DOUBLE)},
            ValueError,
            r"`candidates\['depth'\]` = 9.0 is outside the target's bounds",
        ),
    ],
)
def test_bad_candidates_are_named(candidates, kwargs, error, match):
    kwargs = {"target_values": {"momentum": None}, **kwargs}
    with pytest.raises(error, match=match):
        align_source_candidates(
            _source(), ["lr", "depth", "width"], candidates, **kwargs
        )


def test_an_unknown_fill_value_points_to_the_candidates():
    with pytest.raises(ValueError, match="`align_source_candidates`"):
        align_source(
            _source(), ["lr", "depth", "width"], {"depth": None}, {"momentum": None}
        )


def test_the_targets_data_take_the_weight_from_a_candidate_far_from_the_truth():
    # the source ran c at 0.8 (not recorded); candidates 0, 0.4 and 0.8
    def f(X):
        return torch.exp(
            -4
            * (X - torch.tensor([0.3, 0.6, 0.8], **DOUBLE)).pow(2).sum(-1, keepdim=True)
        )

    generator = torch.Generator().manual_seed(0)
    X_old = torch.rand(80, 2, generator=generator, **DOUBLE)
    Y_old = f(torch.cat([X_old, torch.full_like(X_old[:, :1], 0.8)], -1))
    source = TaskData(X_old, Y_old, name="old", feature_names=["a", "b"])
    candidates = align_source_candidates(
        source, ["a", "b", "c"], {"c": [0.0, 0.4, 0.8]}
    )
    train_X = torch.rand(15, 3, generator=generator, **DOUBLE)
    train_Y = f(train_X) + 0.01 * torch.randn(15, 1, generator=generator, **DOUBLE)
    bounds = torch.stack([torch.zeros(3, **DOUBLE), torch.ones(3, **DOUBLE)])
    model = RankWeightedTransferGP(
        train_X, train_Y, source=candidates, input_transform=Normalize(3, bounds=bounds)
    )
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    weights = model.source_weights
    assert min(weights, key=weights.get) == "old (c=0)"
    assert weights["old (c=0.8)"] > weights["old (c=0)"] + 0.2
