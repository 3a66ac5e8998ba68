r"""MetaTaskMixtureGP: its weights and posterior against the mixture written out with
dense float64 algebra from the model's equations, what it does with targets like
and unlike the meta-tasks, a BO loop, bad input."""

import functools
import math

import pytest
import torch
from botorch.acquisition import UpperConfidenceBound, qLogNoisyExpectedImprovement
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer import MetaTaskMixtureGP, TaskData
from botorch_transfer.clustering import meta_task_posteriors
from botorch_transfer.models.meta_task_mixture import (
    DEFAULT_NOISE_VARIANCE,
    DEFAULT_RESIDUAL_VARIANCES,
    DEFAULT_SCALES,
)
from tests.clustering.reference import matern32x12, task_posterior

F64 = torch.float64
UNIT = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=F64)
SHIFTS = (0.0, 1.5, 3.0, 4.5)


def family(X, shift):
    r"""The meta-tasks' functions: a sine ridge at a task-specific phase."""
    return torch.sin(5 * X[..., :1] + shift) + 0.5 * X[..., 1:]


@functools.lru_cache
def meta():
    r"""Four meta-tasks of 15 noisy points and their fitted GPs."""
    gen = torch.Generator().manual_seed(0)
    tasks = []
    for shift in SHIFTS:
        X = torch.rand(15, 2, generator=gen, dtype=F64)
        Y = family(X, shift) + 0.01 * torch.randn(15, 1, generator=gen, dtype=F64)
        tasks.append(TaskData(X, Y))
    return tasks, meta_task_posteriors(tasks, UNIT, progress=False)


def target(n, fn, seed=1, noise=0.0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=gen, dtype=F64)
    return X, fn(X) + noise * torch.randn(n, 1, generator=gen, dtype=F64)


def reference_mixture(
    post, X, Y, Xq, Yvar=None, max_components=None, noise=DEFAULT_NOISE_VARIANCE
):
    r"""The model's equations, one component at a time, with dense solves.

    Returns the component weights (``K x A x P``) and the moment-matched mean and
    covariance at ``Xq`` (``q x d``, user units).
    """
    y_mean = Y.mean()
    y_std = Y.std() if Y.shape[0] > 1 else torch.tensor(1.0, dtype=F64)
    y = (Y[:, 0] - y_mean) / y_std
    n = y.shape[0]
    nvar = torch.full((n,), noise, dtype=F64) if Yvar is None else Yvar[:, 0] / y_std**2
    Z = torch.cat([X, Xq])
    comps, log_w = [], []
    for j in range(post.num_tasks):
        mean_j, cov_j = task_posterior(post, j)
        off, scale = post.y_offset[j], post.y_scale[j]
        g = (mean_j(Z) - off) / scale  # standardized posterior mean
        G = cov_j(Z, Z) / scale**2  # standardized posterior covariance
        R = matern32x12(
            Z, Z, post.lengthscale_32[j], post.lengthscale_12[j], 1.0, post.bounds
        )  # the prior kernel's correlation
        for a in DEFAULT_SCALES:
            for rho2 in DEFAULT_RESIDUAL_VARIANCES:
                Kz = a**2 * G + rho2 * R
                C = Kz[:n, :n] + torch.diag(nvar)
                ones = torch.ones(n, dtype=F64)
                r0 = y - a * g[:n]
                c = (ones @ torch.linalg.solve(C, r0)) / (
                    ones @ torch.linalg.solve(C, ones)
                )
                res = r0 - c
                quad = res @ torch.linalg.solve(C, res)
                loglik = -0.5 * (quad + torch.logdet(C) + n * math.log(2 * math.pi))
                log_w.append(loglik - 0.5 * math.log(a) ** 2)
                m = c + a * g[n:] + Kz[n:, :n] @ torch.linalg.solve(C, res)
                S = Kz[n:, n:] - Kz[n:, :n] @ torch.linalg.solve(C, Kz[:n, n:])
                comps.append((m, S))
    log_w = torch.stack(log_w)
    w = torch.exp(log_w - log_w.max())
    w = w / w.sum()
    order = torch.argsort(w, descending=True)[:max_components]
    wt = w[order] / w[order].sum()
    mean = sum(wt[i] * comps[k][0] for i, k in enumerate(order.tolist()))
    cov = sum(
        wt[i] * (comps[k][1] + torch.outer(comps[k][0] - mean, comps[k][0] - mean))
        for i, k in enumerate(order.tolist())
    )
    shape = (post.num_tasks, len(DEFAULT_SCALES), len(DEFAULT_RESIDUAL_VARIANCES))
    return w.reshape(shape), mean * y_std + y_mean, cov * y_std**2


@pytest.mark.parametrize("max_components", [None, 5])
@pytest.mark.parametrize("known_noise", [False, True])
def test_posterior_and_weights_equal_reference(max_components, known_noise):
    tasks, post = meta()
    X, Y = target(6, lambda X: 2.0 * family(X, 1.5) + 3.0 + 0.2 * X[..., :1])
    Yvar = torch.full_like(Y, 0.05) if known_noise else None
    total = post.num_tasks * len(DEFAULT_SCALES) * len(DEFAULT_RESIDUAL_VARIANCES)
    model = MetaTaskMixtureGP(
        X, Y, Yvar, meta_tasks=post, max_components=max_components or total
    )
    Xq = torch.rand(2, 3, 2, generator=torch.Generator().manual_seed(5), dtype=F64)
    p = model.posterior(Xq)
    assert p.mean.shape == (2, 3, 1)
    for b in range(2):
        w, mean, cov = reference_mixture(post, X, Y, Xq[b], Yvar, max_components)
        torch.testing.assert_close(model.component_weights, w, rtol=1e-8, atol=1e-12)
        torch.testing.assert_close(p.mean[b, :, 0], mean, rtol=1e-8, atol=1e-10)
        torch.testing.assert_close(
            p.distribution.covariance_matrix[b], cov, rtol=1e-7, atol=1e-10
        )
    torch.testing.assert_close(model.task_weights, w.sum((-1, -2)))


def test_one_target_point_equals_reference():
    _, post = meta()
    X, Y = target(1, lambda X: family(X, 3.0))
    model = MetaTaskMixtureGP(X, Y, meta_tasks=post)
    Xq = torch.rand(4, 2, generator=torch.Generator().manual_seed(6), dtype=F64)
    w, mean, cov = reference_mixture(post, X, Y, Xq, max_components=64)
    p = model.posterior(Xq)
    torch.testing.assert_close(model.component_weights, w, rtol=1e-8, atol=1e-12)
    torch.testing.assert_close(p.mean[:, 0], mean, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(
        p.distribution.covariance_matrix, cov, rtol=1e-7, atol=1e-10
    )


def test_observation_noise_adds_the_noise_of_a_new_observation():
    _, post = meta()
    X, Y = target(6, lambda X: family(X, 0.0))
    model = MetaTaskMixtureGP(X, Y, meta_tasks=post)
    Xq = torch.rand(3, 2, dtype=F64)
    f = model.posterior(Xq).distribution.covariance_matrix
    y = model.posterior(Xq, observation_noise=True).distribution.covariance_matrix
    noise = DEFAULT_NOISE_VARIANCE * Y.var()  # in the user's units
    torch.testing.assert_close(y - f, noise * torch.eye(3, dtype=F64))
    given = torch.tensor([[0.1], [0.2], [0.3]], dtype=F64)
    y = model.posterior(Xq, observation_noise=given).distribution.covariance_matrix
    torch.testing.assert_close(y - f, torch.diag(given[:, 0]))


def test_follows_the_meta_task_the_target_is_a_scaled_copy_of():
    _, post = meta()
    X, Y = target(8, lambda X: 4.0 * family(X, 3.0) - 10.0)
    model = MetaTaskMixtureGP(X, Y, meta_tasks=post)
    assert model.task_weights.argmax() == SHIFTS.index(3.0)
    assert model.task_weights.max() > 0.95
    # it predicts the target far better than a GP on the target's points alone
    Xq = torch.rand(200, 2, generator=torch.Generator().manual_seed(3), dtype=F64)
    truth = (4.0 * family(Xq, 3.0) - 10.0).squeeze(-1)
    alone = SingleTaskGP(X, Y)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(alone.likelihood, alone))
    with torch.no_grad():
        rmse = (model.posterior(Xq).mean.squeeze(-1) - truth).pow(2).mean().sqrt()
        rmse_alone = (alone.posterior(Xq).mean.squeeze(-1) - truth).pow(2).mean().sqrt()
    assert rmse < 0.5 * rmse_alone


def test_gives_way_to_a_target_unlike_every_meta_task():
    _, post = meta()
    unlike = lambda X: torch.cos(9 * X[..., 1:]) * X[..., :1]  # noqa: E731
    X, Y = target(12, unlike)
    model = MetaTaskMixtureGP(X, Y, meta_tasks=post)
    # the weight goes to the largest residual variance: the target's own points
    by_residual = model.component_weights.sum((0, 1))
    assert by_residual.argmax() == len(DEFAULT_RESIDUAL_VARIANCES) - 1
    p = model.posterior(X.unsqueeze(-2))
    # it interpolates the target's points within its noise, not a meta-task's values
    resid = (p.mean.squeeze() - Y.squeeze()) / Y.std()
    assert resid.abs().max() < 3 * math.sqrt(DEFAULT_NOISE_VARIANCE)


def test_reuses_fitted_meta_tasks_and_fits_them_from_task_data():
    tasks, post = meta()
    X, Y = target(5, lambda X: family(X, 1.5))
    from_data = MetaTaskMixtureGP(X, Y, meta_tasks=tasks, bounds=UNIT, progress=False)
    reused = MetaTaskMixtureGP(X, Y, meta_tasks=from_data.meta_tasks)
    assert reused.meta_tasks is from_data.meta_tasks
    Xq = torch.rand(4, 1, 2, dtype=F64)
    torch.testing.assert_close(from_data.posterior(Xq).mean, reused.posterior(Xq).mean)
    # the same data and bounds give the same fit as meta_task_posteriors'
    torch.testing.assert_close(
        from_data.posterior(Xq).mean,
        MetaTaskMixtureGP(X, Y, meta_tasks=post).posterior(Xq).mean,
        rtol=1e-6,
        atol=1e-8,
    )


def test_posterior_gradient_equals_finite_differences():
    _, post = meta()
    X, Y = target(6, lambda X: family(X, 4.5))
    model = MetaTaskMixtureGP(X, Y, meta_tasks=post)
    x = torch.tensor([[0.3, 0.6]], dtype=F64, requires_grad=True)

    def value(z):
        p = model.posterior(z)
        return p.mean.sum() + p.variance.sqrt().sum()

    value(x).backward()
    eps = 1e-6
    for i in range(2):
        step = torch.zeros_like(x)
        step[0, i] = eps
        with torch.no_grad():
            fd = (value(x + step) - value(x - step)) / (2 * eps)
        torch.testing.assert_close(x.grad[0, i], fd, rtol=1e-5, atol=1e-7)


def test_bo_loop_with_ucb_and_qlognei_finds_the_optimum_of_a_copied_meta_task():
    _, post = meta()

    def objective(X):
        return 2.0 * family(X, 1.5) + 1.0

    grid = torch.stack(
        torch.meshgrid(*[torch.linspace(0, 1, 101, dtype=F64)] * 2, indexing="ij"), -1
    ).reshape(-1, 2)
    best = objective(grid).max()
    span = best - objective(grid).min()
    X, Y = target(2, objective, seed=4)
    model = None
    for t in range(6):
        model = MetaTaskMixtureGP(
            X, Y, meta_tasks=post if model is None else model.meta_tasks
        )
        if t % 2 == 0:
            acqf = UpperConfidenceBound(model, beta=1.0)
            q = 1
        else:
            sampler = SobolQMCNormalSampler(torch.Size([64]), seed=t)
            acqf = qLogNoisyExpectedImprovement(model, X, sampler=sampler)
            q = 2
        x, _ = optimize_acqf(acqf, UNIT, q=q, num_restarts=4, raw_samples=64)
        assert x.shape == (q, 2) and ((x >= 0) & (x <= 1)).all()
        X, Y = torch.cat([X, x]), torch.cat([Y, objective(x)])
    assert best - Y.max() < 0.01 * span  # within 1% of the range in 8 evaluations


def test_bad_input_is_refused_with_the_argument_named():
    tasks, post = meta()
    X, Y = target(4, lambda X: family(X, 0.0))
    with pytest.raises(ValueError, match="`train_X` has no points"):
        MetaTaskMixtureGP(X[:0], Y[:0], meta_tasks=post)
    with pytest.raises(ValueError, match="`train_X` must be an n x d tensor"):
        MetaTaskMixtureGP(X.unsqueeze(0), Y.unsqueeze(0), meta_tasks=post)
    with pytest.raises(ValueError, match="`meta_tasks` have d=2"):
        MetaTaskMixtureGP(torch.cat([X, X], -1), Y, meta_tasks=post)
    with pytest.raises(TypeError, match="`meta_tasks` must be a list of TaskData"):
        MetaTaskMixtureGP(X, Y, meta_tasks=tasks[0])
    with pytest.raises(ValueError, match="`meta_tasks` must contain at least one"):
        MetaTaskMixtureGP(X, Y, meta_tasks=[])
    with pytest.raises(ValueError, match="`bounds` applies to meta-tasks given as"):
        MetaTaskMixtureGP(X, Y, meta_tasks=post, bounds=UNIT)
    with pytest.raises(ValueError, match="`meta_tasks` are torch.float64"):
        MetaTaskMixtureGP(X.float(), Y.float(), meta_tasks=post)
    with pytest.raises(ValueError, match="`scales` must be a non-empty sequence"):
        MetaTaskMixtureGP(X, Y, meta_tasks=post, scales=[1.0, 0.0])
    with pytest.raises(ValueError, match="`residual_variances` must be"):
        MetaTaskMixtureGP(X, Y, meta_tasks=post, residual_variances=[-0.1])
    with pytest.raises(ValueError, match="`noise_variance` must be a positive"):
        MetaTaskMixtureGP(X, Y, meta_tasks=post, noise_variance=0.0)
    with pytest.raises(ValueError, match="`max_components` must be a positive int"):
        MetaTaskMixtureGP(X, Y, meta_tasks=post, max_components=0)
    with pytest.raises(ValueError, match="`train_Y` must have shape"):
        MetaTaskMixtureGP(X, Y[:-1], meta_tasks=post)
    model = MetaTaskMixtureGP(X, Y, meta_tasks=post)
    with pytest.raises(ValueError, match="`X` must have d=2 columns"):
        model.posterior(torch.rand(3, 3, dtype=F64))
    with pytest.raises(ValueError, match="`output_indices` must be None or"):
        model.posterior(torch.rand(3, 2, dtype=F64), output_indices=[1])


def test_on_the_device_of_its_data(device):
    tasks, post = meta()
    X, Y = target(5, lambda X: family(X, 1.5))
    on_device = [TaskData(t.X.to(device), t.Y.to(device)) for t in tasks]
    model = MetaTaskMixtureGP(
        X.to(device),
        Y.to(device),
        meta_tasks=on_device,
        bounds=UNIT.to(device),
        progress=False,
    )
    Xq = torch.rand(3, 1, 2, dtype=F64)
    p = model.posterior(Xq.to(device))
    assert p.mean.device.type == device.type
    cpu = MetaTaskMixtureGP(X, Y, meta_tasks=post).posterior(Xq)
    torch.testing.assert_close(p.mean.cpu(), cpu.mean, rtol=1e-5, atol=1e-6)
