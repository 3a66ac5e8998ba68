r"""The loops users run, with every public model: BoTorch's acquisition functions
through ``optimize_acqf`` on the continuous box, 30 iterations of a noisy problem
whose queries crowd near the optimum, and posteriors on a plotting grid.

One case per model runs by default (``qLogNoisyExpectedImprovement`` with
``X_baseline=model.target_X``, the joint posterior over the baseline and a batch);
the rest of the matrix runs with ``-m slow``. A failure names the model and the
acquisition function in the test id.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from botorch.acquisition import (
    LogExpectedImprovement,
    UpperConfidenceBound,
    qKnowledgeGradient,
    qLogNoisyExpectedImprovement,
    qUpperConfidenceBound,
)
from botorch.exceptions.errors import UnsupportedError
from botorch.fit import fit_gpytorch_mll
from botorch.models.transforms import Normalize, Standardize
from botorch.optim import optimize_acqf
from botorch.sampling.index_sampler import IndexSampler
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer import (
    RGPE,
    ClusterMetaPriorGP,
    DeltaBOModel,
    DiffGP,
    EnvGP,
    MetaTaskMixtureGP,
    PretrainedPriorGP,
    RandomizedNNEnsemble,
    RankWeightedPriorGP,
    RankWeightedTransferGP,
    TaskData,
    TransferGuard,
    build_cluster_prior,
    pretrain_clustered_prior,
)

F64 = torch.float64
BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=F64)
NOISE_SD = 0.05
ITERATIONS = 30


def family(X: torch.Tensor, shift: float) -> torch.Tensor:
    r"""A smooth bump near ``(0.3 + shift, 0.6)`` on a tilt: queries crowd there."""
    center = torch.tensor([0.3 + shift, 0.6], dtype=X.dtype)
    bump = torch.exp(-((X - center) ** 2).sum(-1, keepdim=True) / 0.08)
    return 2.0 * bump + 0.3 * X[..., :1]


def objective(X: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    noise = torch.randn(X.shape[0], 1, generator=generator, dtype=X.dtype)
    return family(X, 0.05) + NOISE_SD * noise


@pytest.fixture(scope="module")
def tasks() -> list[TaskData]:
    r"""Related tasks: two past experiments (the sources) and six meta-tasks."""
    gen = torch.Generator().manual_seed(0)
    out = []
    for shift in (0.0, 0.1, -0.1, 0.15, -0.05, 0.2, 0.08, -0.15):
        X = torch.rand(30, 2, generator=gen, dtype=F64)
        noise = NOISE_SD * torch.randn(30, 1, generator=gen, dtype=F64)
        out.append(TaskData(X, family(X, shift) + noise, name=f"shift {shift}"))
    return out


@pytest.fixture(scope="module")
def priors(tasks):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "pretrained": pretrain_clustered_prior(tasks[2:]),
            "cluster": build_cluster_prior(tasks[2:]),
        }


def build(kind: str, X, Y, tasks, priors):
    r"""Each model built as its README section builds it, fitted where it fits."""
    normalize = Normalize(2, bounds=BOUNDS)
    if kind == "RankWeightedTransferGP":
        model = RankWeightedTransferGP(X, Y, source=tasks[0], input_transform=normalize)
    elif kind == "RGPE":
        model = RGPE(X, Y, source=tasks[:2])
    elif kind == "DeltaBOModel":
        model = DeltaBOModel(X, Y, source=tasks[0], outcome_transform=Standardize(m=1))
    elif kind == "TransferGuard":
        inner = DeltaBOModel(X, Y, source=tasks[0], outcome_transform=Standardize(m=1))
        fit_gpytorch_mll(ExactMarginalLogLikelihood(inner.likelihood, inner))
        return TransferGuard(inner)
    elif kind == "EnvGP":
        model = EnvGP(X, Y, source=tasks[0])
    elif kind == "DiffGP":
        model = DiffGP(X, Y, source=tasks[0])
    elif kind == "PretrainedPriorGP":
        return PretrainedPriorGP(X, Y, prior=priors["pretrained"])
    elif kind == "RankWeightedPriorGP":
        model = RankWeightedPriorGP(X, Y, prior=priors["pretrained"])
    elif kind == "ClusterMetaPriorGP":
        model = ClusterMetaPriorGP(X, Y, prior=priors["cluster"])
    elif kind == "MetaTaskMixtureGP":
        return MetaTaskMixtureGP(X, Y, meta_tasks=tasks[2:])
    elif kind == "RandomizedNNEnsemble":
        return RandomizedNNEnsemble(X, Y, num_members=8, input_transform=normalize)
    else:
        raise ValueError(kind)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


MODELS = [
    "RankWeightedTransferGP",
    "RGPE",
    "DeltaBOModel",
    "TransferGuard",
    "EnvGP",
    "DiffGP",
    "PretrainedPriorGP",
    "RankWeightedPriorGP",
    "ClusterMetaPriorGP",
    "MetaTaskMixtureGP",
    "RandomizedNNEnsemble",
]
#: Models that cannot fantasize: ``qKnowledgeGradient`` must fail clearly.
NO_FANTASIES = {"MetaTaskMixtureGP"}
ACQUISITIONS = ["ucb", "logei", "qlognei", "qucb", "qkg"]


def acquisition(name: str, model):
    if name == "ucb":
        return UpperConfidenceBound(model, beta=2.0), 1
    if name == "logei":
        return LogExpectedImprovement(model, best_f=model.target_Y.max()), 1
    if name == "qlognei":
        return qLogNoisyExpectedImprovement(model, X_baseline=model.target_X), 2
    if name == "qucb":
        return qUpperConfidenceBound(model, beta=2.0), 3
    if name == "qkg":
        if isinstance(model, RandomizedNNEnsemble):  # fantasies are its members'
            sampler = IndexSampler(torch.Size([4]))
            return qKnowledgeGradient(model, num_fantasies=4, sampler=sampler), 1
        return qKnowledgeGradient(model, num_fantasies=4), 1
    raise ValueError(name)


def run_loop(kind, name, tasks, priors, iterations=ITERATIONS):
    gen = torch.Generator().manual_seed(1)
    X = torch.rand(3, 2, generator=gen, dtype=F64)
    Y = objective(X, gen)
    for _ in range(iterations):
        with warnings.catch_warnings():
            # the warnings a model gives about its data are tested elsewhere
            warnings.simplefilter("ignore")
            model = build(kind, X, Y, tasks, priors)
            acqf, q = acquisition(name, model)
            restarts = dict(num_restarts=2, raw_samples=16 if name == "qkg" else 64)
            candidate, value = optimize_acqf(acqf, bounds=BOUNDS, q=q, **restarts)
        assert candidate.shape == (q, 2), (kind, name)
        assert torch.isfinite(value).all(), (kind, name)
        assert ((candidate >= 0) & (candidate <= 1)).all(), (kind, name)
        X, Y = torch.cat([X, candidate]), torch.cat([Y, objective(candidate, gen)])
    return model, X, Y


def matrix():
    for kind in MODELS:
        for name in ACQUISITIONS:
            if name == "qkg" and kind in NO_FANTASIES:
                continue
            marks = () if name == "qlognei" else pytest.mark.slow
            yield pytest.param(kind, name, id=f"{kind}-{name}", marks=marks)


@pytest.mark.parametrize("kind, name", list(matrix()))
def test_user_loop(kind, name, tasks, priors):
    model, X, Y = run_loop(kind, name, tasks, priors)
    # the loop reached the bump (its top is about 2.1; a random point scores ~0.3)
    assert Y.max() > 1.5, (kind, name, Y.max().item())
    if name != "qkg":  # the knowledge gradient explores; the others exploit
        # the queries crowded: some pair closer than 0.02 (where dense sums broke)
        assert torch.pdist(X).min() < 0.02, (kind, name)


@pytest.mark.parametrize("kind", sorted(NO_FANTASIES))
def test_knowledge_gradient_is_a_clear_error_without_fantasies(kind, tasks, priors):
    gen = torch.Generator().manual_seed(1)
    X = torch.rand(5, 2, generator=gen, dtype=F64)
    model = build(kind, X, objective(X, gen), tasks, priors)
    acqf = qKnowledgeGradient(model, num_fantasies=4)
    with pytest.raises(UnsupportedError, match=kind):
        optimize_acqf(acqf, bounds=BOUNDS, q=1, num_restarts=2, raw_samples=16)


def grid(n: int, dtype=F64) -> torch.Tensor:
    axis = torch.linspace(0, 1, n, dtype=dtype)
    return torch.stack(torch.meshgrid(axis, axis, indexing="ij"), -1).reshape(-1, 2)


@pytest.mark.parametrize("kind", MODELS)
def test_posterior_on_plotting_grid_and_crowded_batches(kind, tasks, priors):
    r"""After queries crowd near the optimum: the 30 x 30 grid's marginals, and
    joint draws over 200 points closer than 1e-3 and over the duplicated target
    points with a candidate batch (qLogNEI's joint posterior), float64 and float32."""
    gen = torch.Generator().manual_seed(2)
    X = torch.cat(
        [
            torch.rand(4, 2, generator=gen, dtype=F64),
            0.35 + 0.01 * (torch.rand(12, 2, generator=gen, dtype=F64)),
        ]
    )
    Y = objective(X, gen)
    for dtype in (F64, torch.float32):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = build(
                kind,
                X.to(dtype),
                Y.to(dtype),
                tasks_as(tasks, dtype),
                priors_as(priors, dtype),
            )
        with torch.no_grad():
            posterior = model.posterior(grid(30, dtype))
            mean, variance = posterior.mean, posterior.variance
            assert mean.shape == (900, 1) and variance.shape == (900, 1), kind
            assert torch.isfinite(mean).all() and (variance >= 0).all(), (kind, dtype)
            crowded = 0.35 + 1e-3 * torch.rand(200, 2, generator=gen).to(dtype)
            joint = torch.cat([model.target_X, model.target_X, crowded[:3]])
            for points in (crowded, joint):
                draws = model.posterior(points).rsample(torch.Size([8]))
                assert draws.shape == (8, points.shape[0], 1), kind
                assert torch.isfinite(draws).all(), (kind, dtype)


def tasks_as(tasks, dtype):
    return [TaskData(t.X.to(dtype), t.Y.to(dtype), name=t.name) for t in tasks]


def priors_as(priors, dtype):
    return {key: prior.to(dtype) for key, prior in priors.items()}
