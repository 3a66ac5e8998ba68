r"""pretrain_prior: recovery of a known GP prior, determinism, persistence, errors."""

import math

import pytest
import torch
from botorch.models.utils.gpytorch_modules import (
    get_covar_module_with_dim_scaled_prior,
    get_gaussian_likelihood_with_lognormal_prior,
)
from gpytorch.kernels import MaternKernel, ScaleKernel

from botorch_transfer.data import TaskData
from botorch_transfer.priors.hyperbo import (
    PretrainedPrior,
    nll_objective,
    pretrain_prior,
)

F64 = torch.float64
TRUE_MEAN, TRUE_LENGTHSCALE, TRUE_VAR, TRUE_NOISE = 1.5, (0.25, 0.5), 1.0, 0.01


def true_covariance(X):
    k = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=2)).to(F64)
    k.base_kernel.lengthscale = torch.tensor(TRUE_LENGTHSCALE, dtype=F64)
    k.outputscale = torch.tensor(TRUE_VAR, dtype=F64)
    return k(X).to_dense().detach() + TRUE_NOISE * torch.eye(X.shape[0], dtype=F64)


def sample_tasks(n_tasks, M, gen, shared):
    X_shared = torch.rand(M, 2, generator=gen, dtype=F64)
    tasks = []
    for _ in range(n_tasks):
        X = X_shared if shared else torch.rand(M, 2, generator=gen, dtype=F64)
        L = torch.linalg.cholesky(true_covariance(X))
        Y = TRUE_MEAN + L @ torch.randn(M, 1, generator=gen, dtype=F64)
        tasks.append(TaskData(X, Y))
    return tasks


def gaussian_nll(mean, cov, y):
    return -torch.distributions.MultivariateNormal(mean, cov).log_prob(y).item()


@pytest.fixture(scope="module")
def recovery_data():
    gen = torch.Generator().manual_seed(0)
    return sample_tasks(30, 25, gen, shared=True), sample_tasks(
        10, 25, gen, shared=False
    )


def held_out_nll(tasks, mean_fn, cov_fn):
    return sum(gaussian_nll(mean_fn(t.X), cov_fn(t.X), t.Y[:, 0]) for t in tasks) / len(
        tasks
    )


@pytest.mark.parametrize("objective, steps", [("nll", 1500), ("ekl", 100)])
def test_recovers_a_known_gp_prior(recovery_data, objective, steps):
    train, held_out = recovery_data
    prior = pretrain_prior(
        train,
        objective=objective,
        mean="constant",
        kernel="matern52",
        num_steps=steps,
        lr=0.02,
        validation_fraction=0.0,
        progress=False,
        seed=0,
    )
    truth = held_out_nll(
        held_out,
        lambda X: torch.full((X.shape[0],), TRUE_MEAN, dtype=F64),
        true_covariance,
    )
    with torch.no_grad():
        learned = held_out_nll(
            held_out, prior.mean, lambda X: prior.covariance(X, observation_noise=True)
        )
    # BoTorch's default GP: zero mean, dim-scaled RBF prior's mode, default noise
    k = get_covar_module_with_dim_scaled_prior(ard_num_dims=2).to(F64)
    noise = get_gaussian_likelihood_with_lognormal_prior().noise.item()
    default = held_out_nll(
        held_out,
        lambda X: torch.zeros(X.shape[0], dtype=F64),
        lambda X: k(X).to_dense().detach() + noise * torch.eye(X.shape[0], dtype=F64),
    )
    # per 25-point task: within 0.25 nats of the true prior, and > 10 nats better than
    # the default
    assert learned < truth + 0.25, (learned, truth)
    assert learned < default - 10.0, (learned, default)
    # and the recovered hyperparameters are close to the truth
    assert prior.mean(train[0].X[:1]).item() == pytest.approx(TRUE_MEAN, abs=0.4)
    assert prior.noise.item() == pytest.approx(TRUE_NOISE, rel=0.3)
    lengthscale = (
        prior.covar_module.base_kernel.base_kernel.lengthscale * prior.features.range
    )
    assert lengthscale.reshape(-1).tolist() == pytest.approx(TRUE_LENGTHSCALE, rel=0.15)


def test_deterministic_with_seed_and_history():
    gen = torch.Generator().manual_seed(1)
    tasks = sample_tasks(8, 12, gen, shared=False)
    kwargs = dict(
        num_steps=30,
        eval_every=10,
        validation_fraction=0.25,
        progress=False,
        hidden=(8, 8),
    )
    a = pretrain_prior(tasks, seed=3, **kwargs)
    b = pretrain_prior(tasks, seed=3, **kwargs)
    c = pretrain_prior(tasks, seed=4, **kwargs)
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k
    assert any(not torch.equal(v, c.state_dict()[k]) for k, v in a.state_dict().items())
    assert [h["step"] for h in a.training_history] == [10, 20, 30]
    assert all(math.isfinite(h["validation_nll"]) for h in a.training_history)
    assert len(a.config["validation_tasks"]) == 2


def test_early_stopping_keeps_the_best_validation_prior():
    gen = torch.Generator().manual_seed(2)
    tasks = sample_tasks(10, 10, gen, shared=False)
    # a huge learning rate makes the validation loss get worse quickly
    prior = pretrain_prior(
        tasks,
        num_steps=400,
        lr=0.5,
        eval_every=5,
        patience=3,
        progress=False,
        hidden=(8, 8),
    )
    history = prior.training_history
    assert history[-1]["step"] < 400  # stopped early
    best = min(h["validation_nll"] for h in history)
    val_tasks = [tasks[i] for i in prior.config["validation_tasks"]]
    with torch.no_grad():
        assert nll_objective(prior, val_tasks).item() == pytest.approx(best, rel=1e-9)


def test_save_load_round_trip(tmp_path, device):
    gen = torch.Generator().manual_seed(3)
    tasks = [
        TaskData(t.X.to(device), t.Y.to(device))
        for t in sample_tasks(6, 10, gen, shared=True)
    ]
    prior = pretrain_prior(
        {f"task{i}": t for i, t in enumerate(tasks)},
        objective="nll+ekl",
        num_steps=20,
        progress=False,
        hidden=(8, 8),
    )
    path = tmp_path / "prior.pt"
    prior.save(path)
    loaded = PretrainedPrior.load(path, map_location=device)
    X = torch.rand(7, 2, dtype=F64, device=device)
    with torch.no_grad():
        assert torch.equal(loaded.mean(X), prior.mean(X))
        assert torch.equal(
            loaded.covariance(X, observation_noise=True),
            prior.covariance(X, observation_noise=True),
        )
    assert (
        loaded.config == prior.config
        and loaded.training_history == prior.training_history
    )
    assert not loaded.training
    torch.save({"something": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a file written by PretrainedPrior"):
        PretrainedPrior.load(tmp_path / "other.pt")


def test_bad_inputs():
    X = torch.rand(5, 2, dtype=F64)
    task = TaskData(X, X.sum(-1, keepdim=True))
    with pytest.raises(ValueError, match="at least one TaskData"):
        pretrain_prior([], progress=False)
    with pytest.raises(ValueError, match="input dimension"):
        pretrain_prior(
            [task, TaskData(torch.rand(4, 3, dtype=F64), torch.rand(4, 1, dtype=F64))],
            progress=False,
        )
    with pytest.raises(ValueError, match="objective"):
        pretrain_prior([task, task], objective="kl", progress=False)
    with pytest.raises(ValueError, match="no input is shared"):
        pretrain_prior(
            [task, TaskData(torch.rand(5, 2, dtype=F64), torch.rand(5, 1, dtype=F64))],
            objective="ekl",
            progress=False,
        )
    with pytest.raises(ValueError, match="`mean`"):
        pretrain_prior([task, task], mean="linear", num_steps=1, progress=False)
    with pytest.raises(ValueError, match="`bounds`"):
        pretrain_prior(
            [task, task], bounds=torch.zeros(2, 3, dtype=F64), progress=False
        )
    with pytest.raises(ValueError, match="no observations"):
        pretrain_prior(
            [
                task,
                TaskData(torch.zeros(0, 2, dtype=F64), torch.zeros(0, 1, dtype=F64)),
            ],
            progress=False,
        )


def test_bad_bounds_are_clear_errors():
    X = torch.rand(5, 2, dtype=F64)
    tasks = [TaskData(X, X.sum(-1, keepdim=True))] * 2
    nan = float("nan")
    for bounds, match in [
        ([[1.0, 0.0], [0.0, 1.0]], r"`bounds` must have lower < upper.*\[0\]"),
        ([[0.0, 0.5], [1.0, 0.5]], r"`bounds` must have lower < upper.*\[1\]"),
        ([[nan, 0.0], [1.0, 1.0]], "`bounds` contains NaN or infinite values"),
        ([[0.0, 0.0], [1.0, float("inf")]], "`bounds` contains NaN or infinite"),
    ]:
        with pytest.raises(ValueError, match=match):
            pretrain_prior(
                tasks,
                bounds=torch.tensor(bounds, dtype=F64),
                num_steps=1,
                progress=False,
            )
    # integer bounds are bounds: cast to the tasks' dtype
    prior = pretrain_prior(
        tasks, bounds=torch.tensor([[0, 0], [2, 2]]), num_steps=1, progress=False
    )
    assert prior.features.range.dtype == F64
    torch.testing.assert_close(prior.features.range, torch.full((2,), 2.0, dtype=F64))


def test_bounds_that_leave_out_the_inputs_are_a_clear_error():
    gen = torch.Generator().manual_seed(0)
    tasks = [
        TaskData(torch.rand(10, 2, generator=gen), torch.rand(10, 1, generator=gen))
        for _ in range(4)
    ]
    small = torch.tensor([[0.0, 0.0], [0.1, 0.1]])
    with pytest.raises(ValueError, match=r"`tasks\[0\]` has inputs outside `bounds`"):
        pretrain_prior(tasks, bounds=small)


@pytest.mark.parametrize("objective", ["empirical", "empirical-posterior"])
def test_network_options_with_an_empirical_objective_are_a_clear_error(objective):
    gen = torch.Generator().manual_seed(0)
    X = torch.rand(10, 2, generator=gen)
    shared = objective == "empirical"
    tasks = [
        TaskData(X if shared else torch.rand(10, 2, generator=gen), torch.rand(10, 1))
        for _ in range(4)
    ]
    with pytest.raises(ValueError, match="`num_steps`, `lr` would be ignored"):
        pretrain_prior(tasks, objective=objective, num_steps=10, lr=0.1)
