r"""The names the docstring examples use, for ``pytest --doctest-modules``.

The examples are fragments of a user's script: they use its data (``train_X``,
``X_src``, ``related_tasks``, ...) and its imports. This fixture provides small,
deterministic float64 data under those names (``d = 2`` inputs in the unit cube)
and runs every example in a temporary directory (some save files). The normal
tests under ``tests/`` are left alone (the fixture acts on doctests only).
"""

import argparse
from pathlib import Path

import pytest
import torch
from botorch.acquisition import (
    LogExpectedImprovement,
    UpperConfidenceBound,
    qLogNoisyExpectedImprovement,
)
from botorch.fit import fit_gpytorch_mll
from botorch.models.transforms import Normalize, Standardize
from botorch.optim import optimize_acqf
from botorch.utils.datasets import MultiTaskDataset, SupervisedDataset
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.mlls import ExactMarginalLogLikelihood

import botorch_transfer
from botorch_transfer import (
    DeltaBOModel,
    TaskData,
)
from botorch_transfer.models.source_posterior import GPSourcePosterior

F64 = torch.float64
PACKAGE = Path(botorch_transfer.__file__).resolve().parent


def _f(X):
    r"""The target: a smooth function on the unit square, maximum near (0.6, 0.4)."""
    return -(X - torch.tensor([0.6, 0.4], dtype=X.dtype)).pow(2).sum(-1, keepdim=True)


def _shifted(X, shift):
    return _f(X) + 0.1 * shift * X[..., :1]


def _best_observed(X, Y):
    r"""A policy: the best observed input."""
    return X[Y.squeeze(-1).argmax()].unsqueeze(0)


def _multitask_dataset(gen):
    names = ["x0", "x1", "task"]

    def task(n, value, outcome):
        X = torch.rand(n, 2, generator=gen, dtype=F64)
        X_task = torch.cat([X, torch.full((n, 1), value, dtype=F64)], dim=-1)
        return SupervisedDataset(
            X=X_task, Y=_f(X), feature_names=names, outcome_names=[outcome]
        )

    return MultiTaskDataset(
        datasets=[task(4, 0.0, "y"), task(8, 1.0, "a_y")],
        target_outcome_name="y",
        task_feature_index=-1,
    )


@pytest.fixture(autouse=True)
def _example_namespace(request, doctest_namespace):
    if PACKAGE not in Path(request.node.path).resolve().parents:
        return  # the tests (under tests/) do not use it: doctests are the package's
    request.getfixturevalue("monkeypatch").chdir(request.getfixturevalue("tmp_path"))
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    d = 2
    bounds = torch.tensor([[0.0] * d, [1.0] * d], dtype=F64)
    train_X = torch.rand(6, d, generator=gen, dtype=F64)
    train_Y = _f(train_X)
    X_src = torch.rand(20, d, generator=gen, dtype=F64)
    Y_src = _shifted(X_src, 1.0)
    Yvar_src = torch.full_like(Y_src, 1e-4)
    X1 = torch.rand(12, d, generator=gen, dtype=F64)
    X2 = torch.rand(12, d, generator=gen, dtype=F64)
    # related tasks on shared inputs: shifted and scaled copies of the target
    X_shared = torch.rand(16, d, generator=gen, dtype=F64)
    related_tasks = [
        TaskData(X_shared, (1.0 + 0.1 * i) * _shifted(X_shared, i - 3.0))
        for i in range(6)
    ]
    means = torch.cat([torch.zeros(3, d), torch.full((3, d), 3.0)]).to(F64)
    means = means + 0.1 * torch.rand(6, d, generator=gen, dtype=F64)
    covs = torch.eye(d, dtype=F64).expand(6, d, d) * 0.1
    namespace = {
        "torch": torch,
        "d": d,
        "bounds": bounds,
        "train_X": train_X,
        "train_Y": train_Y,
        "X": train_X,
        "Y": train_Y,
        "X_test": torch.rand(5, d, generator=gen, dtype=F64),
        "f": _f,
        "T": 2,
        "t": 1,
        "domain_size": 100,
        "X_src": X_src,
        "Y_src": Y_src,
        "Yvar_src": Yvar_src,
        "X1": X1,
        "Y1": _shifted(X1, 1.0),
        "X2": X2,
        "Y2": _shifted(X2, -1.0),
        "related_tasks": related_tasks,
        "tasks": related_tasks,
        "meta_tasks": related_tasks,
        "means": means,
        "covs": covs,
        "mt_dataset": _multitask_dataset(gen),
        "parser": argparse.ArgumentParser(),
        "policy": _best_observed,
        "blob": {"weights": torch.ones(3, dtype=F64)},
        "fit_gpytorch_mll": fit_gpytorch_mll,
        "ExactMarginalLogLikelihood": ExactMarginalLogLikelihood,
        "Normalize": Normalize,
        "Standardize": Standardize,
        "ScaleKernel": ScaleKernel,
        "RBFKernel": RBFKernel,
        "UpperConfidenceBound": UpperConfidenceBound,
        "LogExpectedImprovement": LogExpectedImprovement,
        "qLogNoisyExpectedImprovement": qLogNoisyExpectedImprovement,
        "optimize_acqf": optimize_acqf,
    }
    namespace.update(
        {name: getattr(botorch_transfer, name) for name in botorch_transfer.__all__}
    )
    # the fitted objects only where an example uses them
    name = request.node.name
    if ".models.base." in name:
        namespace["model"] = DeltaBOModel(
            train_X, train_Y, source=TaskData(X_src, Y_src)
        )
    if ".source_posterior." in name:
        noise = torch.full((len(X_src),), 0.01, dtype=F64)
        kernel = ScaleKernel(RBFKernel())
        namespace["source"] = GPSourcePosterior(X_src, Y_src, noise, kernel)
    if ".priors.hyperbo.mixture." in name:
        prior_a = botorch_transfer.pretrain_prior(related_tasks[:4])
        prior_b = botorch_transfer.pretrain_prior(related_tasks[2:])
        namespace.update(prior_a=prior_a, prior_b=prior_b)
        namespace["mixture"] = botorch_transfer.PretrainedPriorMixture(
            [prior_a, prior_b], cluster_sizes=[4, 4]
        )
    doctest_namespace.update(namespace)
