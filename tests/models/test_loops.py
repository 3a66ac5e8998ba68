r"""End-to-end BoTorch loops with every transfer model: each acquisition function a
user would reach for, through unchanged BoTorch optimizers."""

import pytest
import torch
from botorch.acquisition import (
    LogExpectedImprovement,
    ProbabilityOfImprovement,
    UpperConfidenceBound,
    qKnowledgeGradient,
    qLogNoisyExpectedImprovement,
    qMaxValueEntropy,
    qUpperConfidenceBound,
)
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.optim import optimize_acqf, optimize_acqf_discrete
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer import DeltaBOModel, DiffGP, EnvGP, TaskData, beta_t
from botorch_transfer.models import LowRankInference

F64 = torch.float64
BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=F64)
NOISE = 1e-4


def g(X):
    return torch.sin(5 * X[..., :1]) + torch.cos(4 * X[..., 1:])


def f(X):
    return g(X) + 0.3 * X[..., :1] - 0.2


F_MAX = f(
    torch.tensor([[0.3206, 0.0]], dtype=F64)
).item()  # sin(5x)+0.3x peaks at x=0.3206


@pytest.fixture(scope="module")
def source_data():
    gen = torch.Generator().manual_seed(0)
    X = torch.rand(60, 2, generator=gen, dtype=F64)
    return TaskData(X, g(X), torch.full((60, 1), NOISE, dtype=F64))


@pytest.fixture(scope="module")
def source_model(source_data):
    gp = SingleTaskGP(source_data.X, source_data.Y, source_data.Yvar)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp))
    return gp


MODELS = ["deltabo", "envgp", "diffgp"]
#: EnvGP/DiffGP with FITC inference on 20 of the 60 source points
LOW_RANK = ["envgp-low-rank", "diffgp-low-rank"]


def build(kind, X, Y, source_data, source_model):
    Yvar = torch.full_like(Y, NOISE)
    if kind == "deltabo":  # the fitted source model is used as is
        return DeltaBOModel(X, Y, source=source_model, train_Yvar=Yvar)
    cls = EnvGP if kind.startswith("envgp") else DiffGP
    options = (
        dict(inference=LowRankInference(num_inducing=20)) if kind in LOW_RANK else {}
    )
    return cls(X, Y, source=source_data, train_Yvar=Yvar, **options)


def acquisition(name, model, X, Y):
    if name == "ucb":
        return UpperConfidenceBound(model, beta=0.3)
    if name == "logei":
        return LogExpectedImprovement(model, best_f=Y.max())
    if name == "pi":
        return ProbabilityOfImprovement(model, best_f=Y.max())
    if name == "qlognei":
        return qLogNoisyExpectedImprovement(model, X_baseline=X)
    if name == "qucb":
        return qUpperConfidenceBound(model, beta=0.3)
    if name == "qkg":
        return qKnowledgeGradient(model, num_fantasies=4)
    if name == "qmes":
        return qMaxValueEntropy(
            model, candidate_set=torch.rand(256, 2, dtype=F64), num_fantasies=4
        )
    raise ValueError(name)


def run_loop(kind, source_data, source_model, name, n_init, iterations=10):
    gen = torch.Generator().manual_seed(1)
    X = torch.rand(n_init, 2, generator=gen, dtype=F64)
    Y = f(X)
    for _ in range(iterations):
        model = build(kind, X, Y, source_data, source_model)
        if model.num_train >= 2:
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        acqf = acquisition(name, model, X, Y)
        options = dict(num_restarts=2, raw_samples=16 if name == "qkg" else 64)
        candidate, value = optimize_acqf(acqf, bounds=BOUNDS, q=1, **options)
        assert candidate.shape == (1, 2) and torch.isfinite(value).all()
        assert ((candidate >= 0) & (candidate <= 1)).all()
        X, Y = torch.cat([X, candidate]), torch.cat([Y, f(candidate)])
    assert X.shape == (n_init + iterations, 2)
    return X, Y


def acquisition_cases():
    r"""Every model with every acquisition; Env-GP (an exact GP on N + T points refit
    every step, the slowest) runs qUCB by default (its qLogNEI loop is the user
    loop of tests/models/test_user_loops.py), its low-rank form qKG, the other
    low-rank model qLogNEI and qKG, and the rest with ``-m slow`` (to keep CI under
    its time budget)."""
    default = {"envgp": ("qucb",), "envgp-low-rank": ("qkg",)}
    for name in ["logei", "pi", "qlognei", "qucb", "qkg", "qmes"]:
        for kind in MODELS + LOW_RANK:
            if kind in default:
                slow = name not in default[kind]
            else:
                slow = kind in LOW_RANK and name not in ("qlognei", "qkg")
            yield pytest.param(
                kind, name, id=f"{name}-{kind}", marks=pytest.mark.slow if slow else ()
            )


@pytest.mark.parametrize("kind, name", list(acquisition_cases()))
def test_bo_loop_with_acquisition(kind, source_data, source_model, name):
    run_loop(kind, source_data, source_model, name, n_init=3)


@pytest.mark.parametrize(
    "kind",
    # the low-rank Env-GP is the slowest here; the exact one runs by default
    [
        k if k != "envgp-low-rank" else pytest.param(k, marks=pytest.mark.slow)
        for k in MODELS + LOW_RANK
    ],
)
def test_ucb_loop_from_zero_target_points_finds_optimum(
    kind, source_data, source_model
):
    # T=0: the first query comes from the source data alone (the transfer).
    X, Y = run_loop(kind, source_data, source_model, "ucb", n_init=0)
    assert F_MAX - Y.max() < 0.05


@pytest.mark.parametrize("kind", MODELS)
def test_discrete_loop_q2_on_grid(kind, source_data, source_model):
    grid = torch.stack(
        torch.meshgrid(*[torch.linspace(0, 1, 25, dtype=F64)] * 2, indexing="ij"), -1
    ).reshape(-1, 2)
    X, Y = grid[[0, 300]], f(grid[[0, 300]])
    for t in range(1, 11):
        model = build(kind, X, Y, source_data, source_model)
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        acqf = qUpperConfidenceBound(
            model, beta=beta_t(t, domain_size=grid.shape[0], rho=0.1)
        )
        candidates, _ = optimize_acqf_discrete(acqf, q=2, choices=grid)
        assert candidates.shape == (2, 2)
        assert all((grid == c).all(-1).any() for c in candidates)  # on the grid
        X, Y = torch.cat([X, candidates]), torch.cat([Y, f(candidates)])
    assert X.shape == (22, 2)
    assert F_MAX - Y.max() < 0.1
