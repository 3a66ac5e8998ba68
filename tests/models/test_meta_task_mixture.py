r"""MetaTaskMixtureGP: its weights and posterior against the mixture written out with
dense float64 algebra from the model's equations, what it does with targets like
and unlike the meta-tasks, a BO loop, bad input."""

import functools
import math
import warnings

import pytest
import torch
from botorch.acquisition import UpperConfidenceBound, qLogNoisyExpectedImprovement
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer import MetaTaskMixtureGP, TaskData
from botorch_transfer.models.meta_task_mixture import (
    DEFAULT_AVERAGE_TASK_PRIOR,
    DEFAULT_NEGATIVE_SCALE_PRIOR,
    DEFAULT_NOISE_VARIANCE,
    DEFAULT_RESIDUAL_LENGTHSCALE_FACTORS,
    DEFAULT_RESIDUAL_VARIANCES,
    DEFAULT_SCALES,
    DEFAULT_TARGET_ALONE_PRIOR,
    ComponentGrid,
    fit_default_meta_task_gps,
)
from botorch_transfer.priors import meta_task_posteriors
from tests.priors.reference import matern32x12, task_posterior

F64 = torch.float64
UNIT = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=F64)
SHIFTS = (0.0, 1.5, 3.0, 4.5)


def family(X, shift):
    r"""The meta-tasks' functions: a sine ridge at a task-specific phase."""
    return torch.sin(5 * X[..., :1] + shift) + 0.5 * X[..., 1:]


@functools.lru_cache
def meta_tasks():
    r"""Four meta-tasks of 15 noisy points."""
    gen = torch.Generator().manual_seed(0)
    tasks = []
    for shift in SHIFTS:
        X = torch.rand(15, 2, generator=gen, dtype=F64)
        Y = family(X, shift) + 0.01 * torch.randn(15, 1, generator=gen, dtype=F64)
        tasks.append(TaskData(X, Y))
    return tuple(tasks)


@functools.lru_cache
def meta(bank="default"):
    r"""The meta-tasks and their fitted GPs: BoTorch's defaults (the model's own
    fit) or cm-BO's Stage 1 GPs."""
    tasks = list(meta_tasks())
    if bank == "default":
        return tasks, fit_default_meta_task_gps(tasks, UNIT)
    return tasks, meta_task_posteriors(tasks, UNIT, progress=False)


def botorch_gp(post, j):
    r"""A ``SingleTaskGP`` on meta-task ``j``'s data with the bank's hyperparameters
    (BoTorch's own posterior code, independent of the bank's)."""
    m = post.mask[j]
    X, Y = post.X[j, m], post.y_offset[j] + post.y_scale[j] * post.Z_targets[j, m]
    gp = SingleTaskGP(X, Y.unsqueeze(-1), input_transform=Normalize(2, bounds=UNIT))
    gp.covar_module.lengthscale = post.lengthscale[j]
    gp.mean_module.constant = post.constant[j]
    gp.likelihood.noise = post.noise[j, 0]
    gp.eval()
    return gp


def task_parts(post, j):
    r"""Meta-task ``j``'s standardized posterior mean ``g``, covariance ``G`` and the
    residual's correlation ``R`` (lengthscales ``f`` times the task's) at a point
    set, written out per bank."""
    off, scale = post.y_offset[j], post.y_scale[j]
    if hasattr(post, "lengthscale"):  # BoTorch's default GP: an RBF kernel
        gp = botorch_gp(post, j)

        def g_and_G(Z):
            with torch.no_grad():
                p = gp.posterior(Z)
            return (p.mean[:, 0] - off) / scale, p.distribution.covariance_matrix / (
                scale**2
            )

        def R(Z, f):
            D = (Z.unsqueeze(-2) - Z.unsqueeze(-3)) / (f * post.lengthscale[j])
            return torch.exp(-0.5 * D.pow(2).sum(-1))

        return g_and_G, R
    mean_j, cov_j = task_posterior(post, j)

    def g_and_G(Z):
        return (mean_j(Z) - off) / scale, cov_j(Z, Z) / scale**2

    def R(Z, f):  # the correlation's elementwise power 1 / f^2
        return matern32x12(
            Z, Z, post.lengthscale_32[j], post.lengthscale_12[j], 1.0, post.bounds
        ) ** (1 / f**2)

    return g_and_G, R


def target(n, fn, seed=1, noise=0.0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=gen, dtype=F64)
    return X, fn(X) + noise * torch.randn(n, 1, generator=gen, dtype=F64)


def rmse(model, Xq, truth):
    r"""Root mean squared error of the model's posterior mean at ``Xq``."""
    with torch.no_grad():
        mean = model.posterior(Xq).mean.squeeze(-1)
    return (mean - truth).pow(2).mean().sqrt()


def target_alone(target_model, X, y, nvar, Xq, bounds):
    r"""The target model (a default ``SingleTaskGP``: constant mean, RBF kernel on
    inputs normalized by ``bounds``, Gaussian noise or the known ``nvar``) at its
    fitted hyperparameters: log marginal likelihood of ``y`` and the posterior mean
    and covariance at ``Xq``, written out."""
    c = target_model.mean_module.constant.detach()
    ls = target_model.covar_module.lengthscale.detach().reshape(-1)
    if nvar is None:
        nvar = target_model.likelihood.noise.detach().reshape(()).expand(y.shape[0])

    def k(A, B):
        A, B = (
            (A - bounds[0]) / (bounds[1] - bounds[0]),
            (B - bounds[0]) / (bounds[1] - bounds[0]),
        )
        D = (A.unsqueeze(-2) - B.unsqueeze(-3)) / ls
        return torch.exp(-0.5 * D.pow(2).sum(-1))

    C = k(X, X) + torch.diag(nvar)
    r = y - c
    loglik = -0.5 * (
        r @ torch.linalg.solve(C, r)
        + torch.logdet(C)
        + y.shape[0] * math.log(2 * math.pi)
    )
    Kq = k(Xq, X)
    mean = c + Kq @ torch.linalg.solve(C, r)
    cov = k(Xq, Xq) - Kq @ torch.linalg.solve(C, Kq.T)
    return loglik, mean, cov


def reference_mixture(
    post,
    X,
    Y,
    Xq,
    Yvar=None,
    max_components=None,
    noise=DEFAULT_NOISE_VARIANCE,
    average_task_prior=DEFAULT_AVERAGE_TASK_PRIOR,
    negative_scale_prior=DEFAULT_NEGATIVE_SCALE_PRIOR,
    target_alone_prior=DEFAULT_TARGET_ALONE_PRIOR,
    target_model=None,
):
    r"""The model's equations, one component at a time, with dense solves.

    Returns the component weights (``(K + 1) x 2A x P x F``, the average meta-task
    last, the scales then their negations) and the moment-matched mean and
    covariance at ``Xq`` (``q x d``, user units). ``target_model``: the model's
    fitted target GP, whose hyperparameters the target-alone candidate takes.
    """
    y_mean = Y.mean()
    y_std = Y.std() if Y.shape[0] > 1 else torch.tensor(1.0, dtype=F64)
    y = (Y[:, 0] - y_mean) / y_std
    n = y.shape[0]
    nvar = torch.full((n,), noise, dtype=F64) if Yvar is None else Yvar[:, 0] / y_std**2
    Z = torch.cat([X, Xq])
    K = post.num_tasks
    parts = [task_parts(post, j) for j in range(K)]
    g_G = [g_and_G(Z) for g_and_G, _ in parts]
    # the average meta-task: the average mean, covariance and correlation
    g_G.append(tuple(torch.stack(t).mean(0) for t in zip(*g_G)))
    R_average = torch.stack([R_of(Z, 1.0) for _, R_of in parts]).mean(0)
    R_ofs = [R_of for _, R_of in parts] + [lambda Z, f: R_average ** (1 / f**2)]
    p = average_task_prior
    log_task_prior = [math.log((1 - p) / K)] * K
    log_task_prior.append(math.log(p) if p > 0 else -math.inf)
    # log |a| ~ N(0, 1) normalized over the grid; the sign's prior; uniform residual
    z = sum(math.exp(-0.5 * math.log(a) ** 2) for a in DEFAULT_SCALES)
    signed = [(a, math.log(1 - negative_scale_prior)) for a in DEFAULT_SCALES] + [
        (-a, math.log(negative_scale_prior) if negative_scale_prior else -math.inf)
        for a in DEFAULT_SCALES
    ]
    n_residual = len(DEFAULT_RESIDUAL_VARIANCES) * len(
        DEFAULT_RESIDUAL_LENGTHSCALE_FACTORS
    )
    comps, log_w = [], []
    for (g, G), R_of, log_p in zip(g_G, R_ofs, log_task_prior):
        for a, log_sign in signed:
            log_scale = log_sign - 0.5 * math.log(abs(a)) ** 2 - math.log(z)
            for rho2 in DEFAULT_RESIDUAL_VARIANCES:
                for f in DEFAULT_RESIDUAL_LENGTHSCALE_FACTORS:
                    Kz = a**2 * G + rho2 * R_of(Z, f)
                    C = Kz[:n, :n] + torch.diag(nvar)
                    ones = torch.ones(n, dtype=F64)
                    r0 = y - a * g[:n]
                    c = (ones @ torch.linalg.solve(C, r0)) / (
                        ones @ torch.linalg.solve(C, ones)
                    )
                    res = r0 - c
                    quad = res @ torch.linalg.solve(C, res)
                    loglik = -0.5 * (quad + torch.logdet(C) + n * math.log(2 * math.pi))
                    log_w.append(loglik + log_p + log_scale - math.log(n_residual))
                    m = c + a * g[n:] + Kz[n:, :n] @ torch.linalg.solve(C, res)
                    S = Kz[n:, n:] - Kz[n:, :n] @ torch.linalg.solve(C, Kz[:n, n:])
                    comps.append((m, S))
    log_w = torch.stack(log_w) + math.log(1 - target_alone_prior)
    order = torch.argsort(log_w, descending=True)[:max_components]
    chosen = [comps[k] for k in order.tolist()]
    log_chosen = log_w[order]
    if target_alone_prior > 0:
        # the target alone is one more candidate with its prior and evidence
        loglik, m, S = target_alone(
            target_model, X, y, None if Yvar is None else nvar, Xq, post.bounds
        )
        alone = torch.sigmoid(
            loglik + math.log(target_alone_prior) - log_w.logsumexp(0)
        )
        chosen.append((m, S))
    else:
        alone = torch.zeros((), dtype=F64)
    w = (1 - alone) * torch.softmax(log_w, 0)
    wt = torch.cat([(1 - alone) * torch.softmax(log_chosen, 0), alone.reshape(1)])
    wt = wt[: len(chosen)]
    mean = sum(wt[i] * m for i, (m, _) in enumerate(chosen))
    cov = sum(
        wt[i] * (S + torch.outer(m - mean, m - mean)) for i, (m, S) in enumerate(chosen)
    )
    shape = (
        K + 1,
        2 * len(DEFAULT_SCALES),
        len(DEFAULT_RESIDUAL_VARIANCES),
        len(DEFAULT_RESIDUAL_LENGTHSCALE_FACTORS),
    )
    return w.reshape(shape), mean * y_std + y_mean, cov * y_std**2


@pytest.mark.parametrize("max_components", [None, 5])
@pytest.mark.parametrize("known_noise", [False, True])
@pytest.mark.parametrize("bank", ["default", "cmbo"])
def test_posterior_and_weights_equal_reference(max_components, known_noise, bank):
    tasks, post = meta(bank)
    X, Y = target(6, lambda X: 2.0 * family(X, 1.5) + 3.0 + 0.2 * X[..., :1])
    Yvar = torch.full_like(Y, 0.05) if known_noise else None
    total = (post.num_tasks + 1) * 2 * len(DEFAULT_SCALES)
    total *= len(DEFAULT_RESIDUAL_VARIANCES)
    total *= len(DEFAULT_RESIDUAL_LENGTHSCALE_FACTORS)  # every component
    model = MetaTaskMixtureGP(
        X, Y, Yvar, meta_tasks=post, max_components=max_components or total
    )
    Xq = torch.rand(2, 3, 2, generator=torch.Generator().manual_seed(5), dtype=F64)
    p = model.posterior(Xq)
    assert p.mean.shape == (2, 3, 1)
    for b in range(2):
        w, mean, cov = reference_mixture(
            post, X, Y, Xq[b], Yvar, max_components, target_model=model.target_model
        )
        torch.testing.assert_close(model.component_weights, w, rtol=1e-8, atol=1e-12)
        torch.testing.assert_close(p.mean[b, :, 0], mean, rtol=1e-7, atol=1e-9)
        torch.testing.assert_close(
            p.distribution.covariance_matrix[b], cov, rtol=1e-6, atol=1e-9
        )
    torch.testing.assert_close(model.task_weights, w.sum((-1, -2, -3)))


def test_one_target_point_equals_reference():
    _, post = meta()
    X, Y = target(1, lambda X: family(X, 3.0))
    model = MetaTaskMixtureGP(X, Y, meta_tasks=post)
    Xq = torch.rand(4, 2, generator=torch.Generator().manual_seed(6), dtype=F64)
    w, mean, cov = reference_mixture(
        post, X, Y, Xq, max_components=64, target_model=model.target_model
    )
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
    assert rmse(model, Xq, truth) < 0.5 * rmse(alone, Xq, truth)


@pytest.mark.parametrize("average_task_prior", [0.0, 0.2])
def test_other_average_task_priors_equal_reference(average_task_prior):
    _, post = meta()
    X, Y = target(5, lambda X: 2.0 * family(X, 1.5) + 3.0 + 0.2 * X[..., :1])
    model = MetaTaskMixtureGP(
        X, Y, meta_tasks=post, average_task_prior=average_task_prior
    )
    Xq = torch.rand(3, 2, generator=torch.Generator().manual_seed(7), dtype=F64)
    w, mean, cov = reference_mixture(
        post,
        X,
        Y,
        Xq,
        max_components=64,
        average_task_prior=average_task_prior,
        target_model=model.target_model,
    )
    torch.testing.assert_close(model.component_weights, w, rtol=1e-8, atol=1e-12)
    p = model.posterior(Xq)
    torch.testing.assert_close(p.mean[:, 0], mean, rtol=1e-7, atol=1e-9)
    torch.testing.assert_close(
        p.distribution.covariance_matrix, cov, rtol=1e-6, atol=1e-9
    )
    if average_task_prior == 0:
        assert model.task_weights[-1] == 0


def test_follows_what_the_meta_tasks_share_with_the_average_meta_task():
    _, post = meta()

    def like_the_average(X):  # rescaled and shifted; no single meta-task is like it
        return 3.0 * torch.stack([family(X, s) for s in SHIFTS]).mean(0) + 1.0

    X, Y = target(8, like_the_average)
    model = MetaTaskMixtureGP(X, Y, meta_tasks=post)
    # of the meta-task candidates, the average explains the target (the target
    # alone, a near-linear function, explains it as well)
    assert model.task_weights[-1] > 0.95 * model.task_weights.sum()
    without = MetaTaskMixtureGP(
        X, Y, meta_tasks=post, average_task_prior=0.0, target_alone_prior=0.0
    )
    Xq = torch.rand(200, 2, generator=torch.Generator().manual_seed(3), dtype=F64)
    truth = like_the_average(Xq).squeeze(-1)
    assert rmse(model, Xq, truth) < 0.5 * rmse(without, Xq, truth)


def test_gives_way_to_a_target_unlike_every_meta_task():
    _, post = meta()
    unlike = lambda X: torch.cos(9 * X[..., 1:]) * X[..., :1]  # noqa: E731
    X, Y = target(12, unlike)
    model = MetaTaskMixtureGP(X, Y, meta_tasks=post)
    # the weight goes to the target alone: its own GP
    assert model.target_alone_weight > 0.99
    torch.testing.assert_close(
        model.task_weights.sum(), 1 - model.target_alone_weight, rtol=0, atol=1e-12
    )
    p = model.posterior(X.unsqueeze(-2))
    # it interpolates the target's points within its noise, not a meta-task's values
    resid = (p.mean.squeeze() - Y.squeeze()) / Y.std()
    assert resid.abs().max() < 3 * math.sqrt(DEFAULT_NOISE_VARIANCE)
    # without the target-alone candidate the weight goes to the largest, shortest
    # residual
    within = MetaTaskMixtureGP(X, Y, meta_tasks=post, target_alone_prior=0.0)
    by_residual = within.component_weights.sum((0, 1))
    assert by_residual.sum(-1).argmax() == len(DEFAULT_RESIDUAL_VARIANCES) - 1
    assert by_residual.sum(0).argmax() == len(DEFAULT_RESIDUAL_LENGTHSCALE_FACTORS) - 1


def test_follows_a_meta_task_with_its_sign_flipped():
    _, post = meta()
    flipped = lambda X: -2.0 * family(X, 3.0) + 1.0  # noqa: E731
    X, Y = target(8, flipped)
    model = MetaTaskMixtureGP(X, Y, meta_tasks=post)
    assert model.task_weights.argmax() == SHIFTS.index(3.0)
    negations = model.component_weights[:, len(DEFAULT_SCALES) :]
    assert negations.sum() > 0.95
    Xq = torch.rand(200, 2, generator=torch.Generator().manual_seed(3), dtype=F64)
    truth = flipped(Xq).squeeze(-1)
    alone = SingleTaskGP(X, Y)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(alone.likelihood, alone))
    assert rmse(model, Xq, truth) < 0.5 * rmse(alone, Xq, truth)


@pytest.mark.slow
@pytest.mark.parametrize("n", [5, 15])
def test_error_on_unlike_targets_at_most_the_target_only_gps(n):
    r"""Over 10 seeds, a negated meta-task and an unrelated function: the mean RMSE
    at most 1.1x a ``SingleTaskGP``'s on the target's points alone."""
    _, post = meta()
    unlike = {
        "negated": lambda X: -family(X, 1.5),
        "unrelated": lambda X: torch.cos(9 * X[..., 1:]) * X[..., :1],
    }
    Xq = torch.rand(300, 2, generator=torch.Generator().manual_seed(99), dtype=F64)
    for name, fn in unlike.items():
        errors = []
        for seed in range(10):
            X, Y = target(n, fn, seed=100 + seed, noise=0.05)
            alone = SingleTaskGP(X, Y)
            fit_gpytorch_mll(ExactMarginalLogLikelihood(alone.likelihood, alone))
            model = MetaTaskMixtureGP(X, Y, meta_tasks=post)
            truth = fn(Xq).squeeze(-1)
            errors.append((rmse(model, Xq, truth), rmse(alone, Xq, truth)))
        mixture, gp = (torch.stack(e).mean() for e in zip(*errors))
        assert mixture <= 1.1 * gp, (name, float(mixture / gp))


def test_reuses_fitted_meta_tasks_and_fits_them_from_task_data():
    tasks, post = meta()
    X, Y = target(5, lambda X: family(X, 1.5))
    from_data = MetaTaskMixtureGP(X, Y, meta_tasks=tasks, bounds=UNIT)
    reused = MetaTaskMixtureGP(X, Y, meta_tasks=from_data.meta_tasks)
    assert reused.meta_tasks is from_data.meta_tasks
    Xq = torch.rand(4, 1, 2, dtype=F64)
    torch.testing.assert_close(from_data.posterior(Xq).mean, reused.posterior(Xq).mean)
    # TaskData are fitted as fit_default_meta_task_gps fits them
    torch.testing.assert_close(
        from_data.posterior(Xq).mean,
        MetaTaskMixtureGP(X, Y, meta_tasks=post).posterior(Xq).mean,
        rtol=1e-6,
        atol=1e-8,
    )


def test_default_bank_equals_botorch_gps_and_its_own_fits():
    r"""Every task of the bank has BoTorch's posterior at its hyperparameters, which
    are those of a default SingleTaskGP fitted to that task alone (to the
    optimizer's tolerance), for tasks of two sizes, with and without known noise."""
    gen = torch.Generator().manual_seed(7)
    tasks = list(meta_tasks())
    for n, known in ((9, False), (9, True), (6, True)):
        X = torch.rand(n, 2, generator=gen, dtype=F64)
        Yvar = torch.full((n, 1), 1e-3, dtype=F64) if known else None
        tasks.append(TaskData(X, family(X, 0.7), Yvar))
    post = fit_default_meta_task_gps(tasks, UNIT)
    Xq = torch.rand(5, 2, generator=gen, dtype=F64)
    means, covs = post.means(Xq), post.covariances(Xq, Xq)
    for j, task in enumerate(tasks):
        alone = SingleTaskGP(
            task.X, task.Y, task.Yvar, input_transform=Normalize(2, bounds=UNIT)
        )
        fit_gpytorch_mll(ExactMarginalLogLikelihood(alone.likelihood, alone))
        with torch.no_grad():
            p = alone.posterior(Xq)
        # the batched fit reaches the task's own optimum up to the optimizer's
        # tolerance: compare the predictions, not the hyperparameters
        torch.testing.assert_close(means[j], p.mean[:, 0], rtol=0, atol=2e-3)
        if task.Yvar is None:
            exact = botorch_gp(post, j)
            with torch.no_grad():
                q = exact.posterior(Xq)
            torch.testing.assert_close(means[j], q.mean[:, 0], rtol=1e-9, atol=1e-10)
            torch.testing.assert_close(
                covs[j], q.distribution.covariance_matrix, rtol=1e-8, atol=1e-10
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
    with pytest.raises(ValueError, match="`bounds` must have shape \\(2, 2\\)"):
        MetaTaskMixtureGP(X, Y, meta_tasks=tasks, bounds=UNIT[:, :1])
    with pytest.raises(ValueError, match="`bounds` must have lower < upper"):
        MetaTaskMixtureGP(X, Y, meta_tasks=tasks, bounds=UNIT.flip(0))
    with pytest.raises(ValueError, match="`bounds` applies to meta-tasks given as"):
        MetaTaskMixtureGP(X, Y, meta_tasks=post, bounds=UNIT)
    with pytest.raises(ValueError, match="`meta_tasks` are torch.float64"):
        MetaTaskMixtureGP(X.float(), Y.float(), meta_tasks=post)
    with pytest.raises(ValueError, match="`scales` must be a non-empty sequence"):
        ComponentGrid(scales=[1.0, 0.0])
    with pytest.raises(ValueError, match="`residual_variances` must be"):
        ComponentGrid(residual_variances=[-0.1])
    with pytest.raises(ValueError, match="`residual_lengthscale_factors` must be"):
        ComponentGrid(residual_lengthscale_factors=[])
    with pytest.raises(TypeError, match="`grid` must be a ComponentGrid"):
        MetaTaskMixtureGP(X, Y, meta_tasks=post, grid=(1.0,))
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        MetaTaskMixtureGP(X, Y, meta_tasks=post, scale=[1.0])
    with pytest.raises(ValueError, match="`noise_variance` must be a positive"):
        MetaTaskMixtureGP(X, Y, meta_tasks=post, noise_variance=0.0)
    with pytest.raises(ValueError, match="`max_components` must be a positive int"):
        MetaTaskMixtureGP(X, Y, meta_tasks=post, max_components=0)
    for name in ("average_task_prior", "negative_scale_prior", "target_alone_prior"):
        for bad in (1.0, -0.1, True, "half"):
            with pytest.raises(ValueError, match=f"`{name}` must be a number"):
                MetaTaskMixtureGP(X, Y, meta_tasks=post, **{name: bad})
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
    )
    Xq = torch.rand(3, 1, 2, dtype=F64)
    p = model.posterior(Xq.to(device))
    assert p.mean.device.type == device.type
    cpu = MetaTaskMixtureGP(X, Y, meta_tasks=post).posterior(Xq)
    torch.testing.assert_close(p.mean.cpu(), cpu.mean, rtol=1e-5, atol=1e-6)


def test_outcomes_below_standardizes_floor_warn():
    from botorch_transfer.validation import OutcomeScaleWarning

    X = torch.rand(6, 2, generator=torch.Generator().manual_seed(3), dtype=F64)
    with pytest.warns(OutcomeScaleWarning, match="below Standardize's floor"):
        MetaTaskMixtureGP(X, 1e-9 * family(X, 0.2), meta_tasks=meta_tasks())


def test_old_grid_keywords_warn_and_build_the_same_mixture():
    _, post = meta()
    X, Y = target(4, lambda X: family(X, 0.0))
    grid = dict(
        scales=[0.5, 1.0, 2.0],
        residual_variances=[0.1],
        residual_lengthscale_factors=[1.0, 0.5],
    )
    with pytest.warns(DeprecationWarning) as caught:
        old = MetaTaskMixtureGP(X, Y, meta_tasks=post, **grid)
    assert len(caught) == 3 and {w.filename for w in caught} == {__file__}
    new = MetaTaskMixtureGP(X, Y, meta_tasks=post, grid=ComponentGrid(**grid))
    assert old.grid == new.grid
    X_test = torch.rand(5, X.shape[-1], dtype=X.dtype)
    old_post, new_post = old.posterior(X_test), new.posterior(X_test)
    torch.testing.assert_close(old_post.mean, new_post.mean, rtol=0, atol=0)
    torch.testing.assert_close(old_post.variance, new_post.variance, rtol=0, atol=0)
    with pytest.raises(ValueError, match="in `grid`, not beside it"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            MetaTaskMixtureGP(X, Y, meta_tasks=post, grid=ComponentGrid(), scales=[1.0])
