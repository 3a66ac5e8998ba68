r"""PretrainedPriorGP: posterior against eqs. 17-18, the BoTorch contract, a BO loop."""

import itertools
import pickle
import warnings

import numpy as np
import pytest
import torch
from botorch.acquisition import UpperConfidenceBound, qLogNoisyExpectedImprovement
from botorch.fit import fit_gpytorch_mll
from botorch.models.transforms import Normalize, Standardize
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer import (
    PretrainedPriorGP,
    hyperbo_probability_of_improvement,
)
from botorch_transfer.data import TaskData
from botorch_transfer.priors.hyperbo import pretrain_prior
from botorch_transfer.validation import OutcomeScaleWarning
from tests.priors.hyperbo import reference as ref
from tests.priors.hyperbo.test_empirical import rbv2_rpart_split
from tests.priors.hyperbo.test_objectives import make_prior

F64 = torch.float64


def target(X):
    return torch.sin(X[..., :1] * 1.3) + 0.2 * X[..., 1:2]


def data(n=6, dtype=F64, device="cpu", batch=()):
    gen = torch.Generator().manual_seed(11)
    X = torch.rand(*batch, n, 2, generator=gen, dtype=F64) * torch.tensor(
        [2.0, 5.0], dtype=F64
    ) - torch.tensor([1.0, 0.0], dtype=F64)
    return X.to(device=device, dtype=dtype), target(X).to(device=device, dtype=dtype)


@pytest.mark.parametrize(
    "mean, kernel, known_noise",
    [
        ("mlp", "matern52_on_features", False),
        ("constant", "matern52", False),
        ("mlp", "matern52_on_features", True),
    ],
)
def test_posterior_equals_reference(mean, kernel, known_noise):
    prior = make_prior(mean, kernel)
    X, Y = data()
    Yvar = (
        torch.linspace(0.01, 0.05, X.shape[0], dtype=F64).unsqueeze(-1)
        if known_noise
        else None
    )
    model = PretrainedPriorGP(X, Y, prior=prior, train_Yvar=Yvar)
    X_test = torch.rand(5, 2, dtype=F64) * 3 - 1
    post = model.posterior(X_test)
    p = ref.prior_parts(prior)
    m, S = ref.posterior(
        p,
        X.numpy(),
        Y[:, 0].numpy(),
        X_test.numpy(),
        None if Yvar is None else Yvar[:, 0].numpy(),
    )
    np.testing.assert_allclose(
        post.mean[:, 0].detach().numpy(), m, rtol=1e-8, atol=1e-10
    )
    np.testing.assert_allclose(
        post.distribution.covariance_matrix.detach().numpy(), S, rtol=1e-8, atol=1e-10
    )
    # observation noise at X: the prior's noise, or the mean of the given noise
    noisy = model.posterior(X_test, observation_noise=True)
    expected = p["noise"] if Yvar is None else Yvar.mean().item()
    np.testing.assert_allclose(
        (noisy.variance - post.variance).detach().numpy(), expected, rtol=1e-10
    )


def test_zero_target_points_is_the_prior():
    prior = make_prior()
    X, Y = data(n=0)
    model = PretrainedPriorGP(X, Y, prior=prior)
    X_test = torch.rand(4, 2, dtype=F64)
    post = model.posterior(X_test)
    p = ref.prior_parts(prior)
    np.testing.assert_allclose(
        post.mean[:, 0].detach().numpy(), ref.mean(p, X_test.numpy()), rtol=1e-10
    )
    np.testing.assert_allclose(
        post.distribution.covariance_matrix.detach().numpy(),
        ref.kernel(p, X_test.numpy(), X_test.numpy()),
        rtol=1e-8,
    )


@pytest.mark.parametrize(
    "dtype, batch, normalize",
    list(itertools.product([torch.float32, F64], [(), (2,)], [False, True])),
)
def test_shapes_dtypes_devices(device, dtype, batch, normalize):
    prior = make_prior(dtype=dtype, device=device)
    X, Y = data(dtype=dtype, device=device, batch=batch)
    # an input transform with fixed bounds equal to the identity keeps the prior's units
    tf = (
        Normalize(
            2, bounds=torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=dtype, device=device)
        )
        if normalize
        else None
    )
    model = PretrainedPriorGP(X, Y, prior=prior, input_transform=tf)
    assert model.batch_shape == torch.Size(batch) and model.num_outputs == 1
    for shape in [(3, 2), (4, 3, 2)] if not batch else [(3, 2), (4, 1, 3, 2)]:
        X_test = torch.rand(*shape, dtype=dtype, device=device)
        post = model.posterior(X_test)
        out_batch = torch.broadcast_shapes(torch.Size(shape[:-2]), model.batch_shape)
        assert post.mean.shape == out_batch + torch.Size([3, 1])
        assert post.mean.dtype == dtype and post.mean.device.type == device.type
        assert post.distribution.covariance_matrix.shape == out_batch + torch.Size(
            [3, 3]
        )


def readme_meta_tasks():
    X_meta = torch.rand(20, 1, generator=torch.Generator().manual_seed(0)).double()
    return [
        TaskData(X_meta, torch.sin(6 * X_meta + a) + a * X_meta)
        for a in torch.linspace(-1, 1, 10).double()
    ]


def test_fine_tune_re_derives_the_empirical_prior_from_its_statistics(device):
    # the empirical prior's mean and covariance were derived from the base kernel at
    # the fit: fine-tuned, they are derived again from the meta-tasks' statistics
    # with the re-fitted kernel (before, a re-fitted kernel left them inconsistent
    # and fit_gpytorch_mll failed with NotPSDError, even on the README's example)
    tasks = readme_meta_tasks()
    prior = pretrain_prior(tasks, progress=False).to(device)
    X, Y = tasks[0].X[:5], torch.sin(6 * tasks[0].X[:5] + 0.3)
    X_test = torch.rand(6, 1, generator=torch.Generator().manual_seed(3)).double()
    X, Y, X_test = X.to(device), Y.to(device), X_test.to(device)
    frozen = PretrainedPriorGP(X, Y, prior=prior)
    tuned = PretrainedPriorGP(X, Y, prior=prior, fine_tune=True)
    # with the pre-trained kernel, the derived prior is the frozen one
    torch.testing.assert_close(
        tuned.posterior(X_test).mean, frozen.posterior(X_test).mean, rtol=1e-9, atol=0
    )
    fit_gpytorch_mll(ExactMarginalLogLikelihood(tuned.likelihood, tuned))
    kernel = tuned.covar_module.empirical.base_kernel
    assert not torch.allclose(
        kernel.base_kernel.lengthscale,
        prior.empirical.base_kernel.base_kernel.lengthscale,
    )
    assert not prior.empirical.adaptive  # the user's prior is left as it was
    # reference: the empirical prior (HyperBO eq. 4, shrunk and kernel-interpolated)
    # built from the meta-tasks' values with the fitted kernel, then eqs. 17-18
    p = ref.prior_parts(prior)
    p["lengthscale"] = ref._np(kernel.base_kernel.lengthscale).reshape(-1)
    p["outputscale"] = float(ref._np(kernel.outputscale))
    p["noise"] = ref._np(tuned.likelihood.noise).item()
    meta_Y = (torch.cat([t.Y for t in tasks], -1).numpy() - p["offset"]) / p["scale"]
    V = (tasks[0].X.numpy() - p["lower"]) / p["range"]
    order = [int(np.abs(V - v).sum(1).argmin()) for v in p["V"]]
    e = prior.empirical
    del p["alpha"], p["B"]  # the reference evaluates the statistics directly
    p |= ref.empirical_statistics(
        meta_Y[order],
        ref._np(e.index_noise),  # the meta noise at V (with the fit's jitter)
        V[order],
        p["lengthscale"],
        p["outputscale"],
        0.0,
        float(e.shrinkage),
    )
    mean, cov = ref.posterior(p, ref._np(X), ref._np(Y)[:, 0], ref._np(X_test))
    post = tuned.posterior(X_test)
    # outcomes of order 1 (K + s^2 I at V has condition number ~1e6 here: see
    # reference._interpolation_weights for why the reference solves for the weights)
    np.testing.assert_allclose(ref._np(post.mean[:, 0]), mean, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(
        ref._np(post.distribution.covariance_matrix),
        cov,
        rtol=1e-6,
        atol=1e-10,
    )
    again = pickle.loads(pickle.dumps(tuned))  # the kernel's priors pickle too
    torch.testing.assert_close(again.posterior(X_test).mean, post.mean)
    # a BO step on it
    acqf = UpperConfidenceBound(tuned, beta=1.8**2)
    bounds = torch.tensor([[0.0], [1.0]], dtype=F64, device=device)
    x, _ = optimize_acqf(acqf, bounds, q=1, num_restarts=2, raw_samples=32)
    assert x.shape == (1, 1) and bool(((x >= 0) & (x <= 1)).all())


def test_fine_tuning_on_rbv2_rpart_keeps_the_kernel_near_the_pretrained_one():
    # without the log-normal priors on the kernel and the noise, this fit on 21
    # points of an rbv2-rpart test task sent the lengthscales and the outputscale
    # to 1e5-4e6 (pre-trained: 0.3-13 and 0.59), and others failed (NotPSDError)
    problem, test, prior = rbv2_rpart_split(0)
    pool = torch.rand(300, 5, generator=torch.Generator().manual_seed(2), dtype=F64)
    generator = torch.Generator().manual_seed(0)
    for _ in range(2):  # the second draw is the one that diverged
        n = int(torch.randint(5, 30, (1,), generator=generator))
        rows = torch.randint(300, (n,), generator=generator)
    X, Y = pool[rows], problem.evaluate(test[1], pool)[rows]
    model = PretrainedPriorGP(X, Y, prior=prior, fine_tune=True)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    fitted = model.covar_module.empirical.base_kernel
    pretrained = prior.empirical.base_kernel
    for ratio in (
        fitted.outputscale / pretrained.outputscale,
        fitted.base_kernel.lengthscale / pretrained.base_kernel.lengthscale,
    ):
        assert bool((ratio.log().abs() < 4).all()), ratio


def test_fine_tune_refuses_an_empirical_prior_saved_without_its_statistics():
    import io

    from botorch_transfer.priors.hyperbo import PretrainedPrior
    from botorch_transfer.priors.io import save_prior

    prior = pretrain_prior(readme_meta_tasks(), progress=False)
    statistics = ("index_mean", "index_covariance", "index_noise", "shrinkage")
    state = {k: v for k, v in prior.state_dict().items() if not k.endswith(statistics)}
    buffer = io.BytesIO()
    save_prior(prior, {"config": dict(prior.config), "state": state}, buffer)
    buffer.seek(0)
    old = PretrainedPrior.load(buffer)
    assert not old.empirical.has_statistics
    X, Y = old.empirical.index_points[:4], torch.zeros(4, 1, dtype=F64)
    with pytest.raises(ValueError, match="`fine_tune=True`.*statistics"):
        PretrainedPriorGP(X, Y, prior=old, fine_tune=True)
    PretrainedPriorGP(X, Y, prior=old)  # frozen, as the README loop runs it


def test_frozen_by_default_fit_is_a_no_op_and_fine_tune_trains_a_copy():
    prior = make_prior()
    X, Y = data()
    model = PretrainedPriorGP(X, Y, prior=prior)
    assert not any(p.requires_grad for p in model.parameters())
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    prior_state = {k: v.clone() for k, v in prior.state_dict().items()}
    tuned = PretrainedPriorGP(X, Y, prior=prior, fine_tune=True)
    mll = ExactMarginalLogLikelihood(tuned.likelihood, tuned)
    mll.train()
    loss_before = -mll(tuned(*tuned.train_inputs), tuned.train_targets).item()
    fit_gpytorch_mll(mll)
    mll.train()
    loss_after = -mll(tuned(*tuned.train_inputs), tuned.train_targets).item()
    assert loss_after < loss_before
    assert all(
        torch.equal(v, prior_state[k]) for k, v in prior.state_dict().items()
    )  # the user's prior


def test_condition_on_observations_equals_rebuilding_and_fantasize():
    prior = make_prior()
    X, Y = data(n=8)
    model = PretrainedPriorGP(X[:5], Y[:5], prior=prior)
    model.posterior(X[:1])  # build the caches conditioning reuses
    conditioned = model.condition_on_observations(X[5:], Y[5:])
    rebuilt = PretrainedPriorGP(X, Y, prior=prior)
    X_test = torch.rand(4, 2, dtype=F64)
    a, b = conditioned.posterior(X_test), rebuilt.posterior(X_test)
    torch.testing.assert_close(a.mean, b.mean, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(
        a.distribution.covariance_matrix,
        b.distribution.covariance_matrix,
        rtol=1e-7,
        atol=1e-10,
    )
    fantasy = model.fantasize(
        torch.rand(3, 1, 2, dtype=F64), sampler=SobolQMCNormalSampler(torch.Size([2]))
    )
    assert fantasy.posterior(X_test).mean.shape == torch.Size([2, 3, 4, 1])


def test_state_dict_and_pickle_round_trip():
    prior = make_prior()
    X, Y = data()
    model = PretrainedPriorGP(X, Y, prior=prior, fine_tune=True)
    with torch.no_grad():
        model.mean_module.head.bias.add_(0.3)
    other = PretrainedPriorGP(X, Y, prior=make_prior(seed=9), fine_tune=True)
    other.load_state_dict(model.state_dict())
    X_test = torch.rand(3, 2, dtype=F64)
    torch.testing.assert_close(
        other.posterior(X_test).mean, model.posterior(X_test).mean
    )
    again = pickle.loads(pickle.dumps(model))
    torch.testing.assert_close(
        again.posterior(X_test).mean, model.posterior(X_test).mean
    )


def test_bad_inputs():
    prior = make_prior()
    X, Y = data()
    with pytest.raises(TypeError, match="`prior`"):
        PretrainedPriorGP(X, Y, prior=None)
    with pytest.raises(ValueError, match="outcome_transform"):
        PretrainedPriorGP(X, Y, prior=prior, outcome_transform=Standardize(m=1))
    with pytest.raises(ValueError, match="d=3"):
        PretrainedPriorGP(
            torch.rand(4, 3, dtype=F64), torch.rand(4, 1, dtype=F64), prior=prior
        )
    with pytest.raises(ValueError, match="train_Y"):
        PretrainedPriorGP(X, Y[:, 0], prior=prior)
    with pytest.raises(ValueError, match="NaN"):
        PretrainedPriorGP(X, Y * float("nan"), prior=prior)
    with pytest.raises(ValueError, match="no training data"):
        hyperbo_probability_of_improvement(PretrainedPriorGP(X[:0], Y[:0], prior=prior))


@pytest.mark.parametrize("acquisition", ["hyperbo-pi", "ucb", "qlognei"])
def test_bo_loop_from_a_pretrained_prior(acquisition):
    # related tasks: shifted and scaled copies of the target family
    gen = torch.Generator().manual_seed(0)

    tasks = []
    for i in range(12):
        X = torch.rand(20, 2, generator=gen, dtype=F64)
        tasks.append(TaskData(X, (1 + 0.1 * i) * target(X * 3 - 1) + 0.05 * i))
    prior = pretrain_prior(
        tasks,
        num_steps=200,
        lr=0.01,
        hidden=(16, 16),
        progress=False,
        validation_fraction=0,
    )
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=F64)
    f = lambda X: target(X * 3 - 1)  # noqa: E731
    X = torch.rand(2, 2, generator=gen, dtype=F64)
    Y = f(X)
    for _ in range(10):
        model = PretrainedPriorGP(X, Y, prior=prior)
        if acquisition == "hyperbo-pi":
            acqf = hyperbo_probability_of_improvement(model)
        elif acquisition == "ucb":
            acqf = UpperConfidenceBound(model, beta=2.0)
        else:
            acqf = qLogNoisyExpectedImprovement(
                model, X_baseline=X, sampler=SobolQMCNormalSampler(torch.Size([32]))
            )
        x, _ = optimize_acqf(acqf, bounds=bounds, q=1, num_restarts=4, raw_samples=64)
        assert x.shape == (1, 2) and ((x >= 0) & (x <= 1)).all()
        X, Y = torch.cat([X, x]), torch.cat([Y, f(x)])
    grid = torch.stack(
        torch.meshgrid(
            torch.linspace(0, 1, 50, dtype=F64),
            torch.linspace(0, 1, 50, dtype=F64),
            indexing="ij",
        ),
        -1,
    ).reshape(-1, 2)
    assert Y.max().item() > f(grid).max().item() - 0.15


def test_to_after_a_posterior_call(device):
    prior = make_prior()
    X, Y = data()
    model = PretrainedPriorGP(X, Y, prior=prior)
    model.posterior(torch.rand(2, 2, dtype=F64))  # caches a float64 prediction strategy
    moved = model.to(device=device, dtype=torch.float32)
    post = moved.posterior(torch.rand(3, 2, device=device))
    assert post.mean.dtype == torch.float32 and post.mean.device.type == device.type


def empirical_family(scale=1.0, n_tasks=8, M=30):
    r"""Related 2-d tasks on shared inputs (matching-input meta-data), the target
    among them in spirit: a bump whose height and location shift per task."""

    gen = torch.Generator().manual_seed(5)
    X = torch.rand(M, 2, generator=gen, dtype=F64)
    shifts = 0.15 * torch.randn(n_tasks + 1, 2, generator=gen, dtype=F64)

    def f(X, i):
        c = torch.tensor([0.6, 0.4], dtype=F64) + shifts[i]
        return (
            scale * (1 + 0.1 * i) * torch.exp(-4 * ((X - c) ** 2).sum(-1, keepdim=True))
        )

    tasks = [TaskData(X, f(X, i)) for i in range(n_tasks)]
    return tasks, (lambda X: f(X, n_tasks))


def test_posterior_with_the_empirical_prior_equals_reference():
    tasks, f = empirical_family()
    prior = pretrain_prior(tasks, progress=False)
    assert prior.config["objective"] == "empirical"  # the default on shared inputs
    X = torch.rand(5, 2, generator=torch.Generator().manual_seed(1), dtype=F64)
    model = PretrainedPriorGP(X, f(X), prior=prior)
    X_test = torch.rand(4, 2, dtype=F64)
    post = model.posterior(X_test)
    p = ref.prior_parts(prior)
    m, S = ref.posterior(p, X.numpy(), f(X)[:, 0].numpy(), X_test.numpy())
    np.testing.assert_allclose(
        post.mean[:, 0].detach().numpy(), m, rtol=1e-8, atol=1e-10
    )
    np.testing.assert_allclose(
        post.distribution.covariance_matrix.detach().numpy(), S, rtol=1e-7, atol=1e-10
    )


def readme_loop(tasks, f, steps, pool, **pretrain_kwargs):
    r"""The README's PretrainedPriorGP loop (UCB from zero target points), on a pool."""
    prior = pretrain_prior(tasks, progress=False, **pretrain_kwargs)
    X = torch.empty(0, 2, dtype=F64)
    Y = torch.empty(0, 1, dtype=F64)
    picked = []
    for _ in range(steps):
        model = PretrainedPriorGP(X, Y, prior=prior)
        acqf = UpperConfidenceBound(model, beta=1.8**2)
        with torch.no_grad():
            i = int(acqf(pool.unsqueeze(-2)).argmax())
        picked.append(i)
        X, Y = torch.cat([X, pool[i : i + 1]]), torch.cat([Y, f(pool[i : i + 1])])
    return picked, prior


def test_readme_loop_starts_from_zero_target_points():
    tasks, f = empirical_family()
    pool = torch.rand(300, 2, generator=torch.Generator().manual_seed(2), dtype=F64)
    picked, prior = readme_loop(tasks, f, 4, pool)
    # the first query is the prior's own UCB maximizer
    with torch.no_grad():
        sd = prior.covar_module(pool, diag=True).sqrt()
        assert picked[0] == int((prior.mean(pool) + 1.8 * sd).argmax())
    # and the loop, with optimize_acqf as in the README, runs from no data
    model = PretrainedPriorGP(
        torch.empty(0, 2, dtype=F64), torch.empty(0, 1, dtype=F64), prior=prior
    )
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=F64)
    x, _ = optimize_acqf(
        UpperConfidenceBound(model, beta=1.8**2),
        bounds,
        q=1,
        num_restarts=4,
        raw_samples=64,
    )
    assert x.shape == (1, 2)
    # a useful prior: within 4 queries, near the target's optimum on the pool
    values = f(pool)[:, 0]
    assert values[picked].max() >= values.max() - 0.05 * (values.max() - values.min())


@pytest.mark.parametrize("objective", [None, "nll"])
def test_queries_do_not_depend_on_units(objective):
    pool = torch.rand(200, 2, generator=torch.Generator().manual_seed(3), dtype=F64)
    kwargs = (
        {}
        if objective is None
        else {
            "objective": "nll",
            "num_steps": 30,
            "hidden": (8, 8),
            "lr": 0.01,
        }
    )
    runs = []
    for scale in (1.0, 1e3, 1e-3):
        tasks, f = empirical_family(scale=scale)
        runs.append(readme_loop(tasks, f, 6, pool, **kwargs)[0])
    assert runs[0] == runs[1] == runs[2]


def reference_scaled_posterior(p, X, y, X_test, nu, yvar=None):
    r"""The inverse-gamma scale ``s^2 ~ IG(nu / 2, nu / 2)`` of the prior's covariance
    and noise (known noise: the prior's noise at new points only), conditioned on
    ``y``: ``s^2 = (nu + r^T C^{-1} r) / (nu + n)`` (``C``: prior covariance plus
    noise at ``X``, ``r``: ``y`` minus the prior mean), the posterior mean of eq. 17
    and ``s^2`` times eq. 18's covariance."""
    noise = p["noise"] * np.ones(len(y)) if yvar is None else yvar
    C = ref.kernel(p, X, X) + np.diag(noise)
    r = y - ref.mean(p, X)
    s2 = (nu + r @ np.linalg.solve(C, r)) / (nu + len(y))
    if yvar is None:  # the noise scales with the covariance: the mean is eq. 17's
        m, S = ref.posterior(p, X, y, X_test)
        return s2, m, s2 * S
    # known noise stays as given: eqs. 17-18 with the scaled prior covariance
    K = s2 * ref.kernel(p, X, X) + np.diag(yvar)
    Ks = s2 * ref.kernel(p, X_test, X)
    m = ref.mean(p, X_test) + Ks @ np.linalg.solve(K, r)
    S = s2 * ref.kernel(p, X_test, X_test) - Ks @ np.linalg.solve(K, Ks.T)
    return s2, m, S


@pytest.mark.parametrize("known_noise", [False, True])
@pytest.mark.parametrize("offset", [0.0, 10.0])
def test_prior_scale_posterior_equals_reference(known_noise, offset, device):
    prior = make_prior("constant", "matern52").to(device)
    X, Y = data(device=device)
    Y = Y + offset  # 10: far from the prior mean (offset 0.7, scale 2.5): s^2 > 1
    Yvar = (
        torch.linspace(0.01, 0.05, X.shape[0], dtype=F64, device=device).unsqueeze(-1)
        if known_noise
        else None
    )
    nu = 2.0
    model = PretrainedPriorGP(X, Y, Yvar, prior=prior, prior_scale_dof=nu)
    X_test = torch.rand(5, 2, dtype=F64) * 3 - 1
    post = model.posterior(X_test.to(device))
    p = ref.prior_parts(prior.cpu())
    s2, m, S = reference_scaled_posterior(
        p,
        X.cpu().numpy(),
        Y[:, 0].cpu().numpy(),
        X_test.numpy(),
        nu,
        None if Yvar is None else Yvar[:, 0].cpu().numpy(),
    )
    assert (s2 > 1.0) == (offset > 0)
    np.testing.assert_allclose(model.prior_scale.item(), s2, rtol=1e-10)
    np.testing.assert_allclose(post.mean[:, 0].cpu().numpy(), m, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(
        post.distribution.covariance_matrix.detach().cpu().numpy(),
        S,
        rtol=1e-8,
        atol=1e-10,
    )
    # a new observation's noise: the prior's, scaled, or the given noise's mean
    noisy = model.posterior(X_test.to(device), observation_noise=True)
    expected = s2 * p["noise"] if Yvar is None else Yvar.mean().item()
    np.testing.assert_allclose(
        (noisy.variance - post.variance).cpu().numpy(), expected, rtol=1e-8
    )


def test_prior_scale_batches_conditioning_and_zero_points():
    prior = make_prior("constant", "matern52")
    X, Y = data(n=6, batch=(3,))
    Y = Y + torch.tensor([0.0, 1.0, 4.0], dtype=F64).view(3, 1, 1)
    model = PretrainedPriorGP(X, Y, prior=prior, prior_scale_dof=2.0)
    assert model.prior_scale.shape == torch.Size([3])
    # each batch member is the model of its own data
    X_test = torch.rand(4, 2, dtype=F64)
    post = model.posterior(X_test)
    for i in range(3):
        alone = PretrainedPriorGP(X[i], Y[i], prior=prior, prior_scale_dof=2.0)
        torch.testing.assert_close(model.prior_scale[i], alone.prior_scale[()])
        torch.testing.assert_close(
            post.variance[i], alone.posterior(X_test).variance, rtol=1e-8, atol=1e-12
        )
    assert model.prior_scale[2] > model.prior_scale[1] > model.prior_scale[0]
    # conditioning keeps the scale the model was built with
    conditioned = model.condition_on_observations(X[:, :2] + 0.1, Y[:, :2])
    torch.testing.assert_close(conditioned.prior_scale, model.prior_scale)
    # no target data: the prior as pre-trained
    empty = PretrainedPriorGP(X[0, :0], Y[0, :0], prior=prior, prior_scale_dof=2.0)
    assert empty.prior_scale.item() == 1.0
    plain = PretrainedPriorGP(X[0, :0], Y[0, :0], prior=prior)
    torch.testing.assert_close(
        empty.posterior(X_test).variance, plain.posterior(X_test).variance
    )


def test_prior_scale_bad_inputs():
    prior = make_prior()
    X, Y = data()
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="`prior_scale_dof` must be positive"):
            PretrainedPriorGP(X, Y, prior=prior, prior_scale_dof=bad)
    with pytest.raises(ValueError, match="`prior_scale_dof` and `fine_tune=True`"):
        PretrainedPriorGP(X, Y, prior=prior, prior_scale_dof=2.0, fine_tune=True)


def test_prior_scale_leaves_a_given_likelihood_alone_and_keeps_the_noise_bound():
    from gpytorch.constraints import GreaterThan
    from gpytorch.likelihoods import GaussianLikelihood

    prior = make_prior("constant", "matern52")
    X, Y = data()  # a target the prior describes well: s^2 < 1
    likelihood = GaussianLikelihood(noise_constraint=GreaterThan(1e-4)).double()
    likelihood.noise = 2e-4
    model = PretrainedPriorGP(
        X, Y, likelihood=likelihood, prior=prior, prior_scale_dof=2.0
    )
    assert model.prior_scale.item() < 0.5
    # the user's likelihood is neither modified nor scaled
    torch.testing.assert_close(likelihood.noise, torch.full((1,), 2e-4, dtype=F64))
    torch.testing.assert_close(model.likelihood.noise, likelihood.noise)
    # the default likelihood at its lower bound: scaled down to the bound, not below
    default = PretrainedPriorGP(X, Y, prior=prior)
    bound = default.likelihood.noise_covar.raw_noise_constraint.lower_bound
    with torch.no_grad():
        prior.raw_noise.fill_(-30.0)  # the prior's noise at its floor
    floor = PretrainedPriorGP(X, Y, prior=prior, prior_scale_dof=2.0)
    assert floor.prior_scale.item() < 0.5
    assert torch.all(floor.likelihood.noise >= 2 * bound)


@pytest.mark.parametrize("scale", [1e6, 1e-6])
def test_a_target_in_other_units_than_the_prior_warns(scale):
    prior = make_prior("mlp", "matern52_on_features")
    X, Y = data()
    with pytest.warns(OutcomeScaleWarning, match="pre-trained prior's data.*dof"):
        PretrainedPriorGP(X, scale * Y, prior=prior)
    with warnings.catch_warnings():
        warnings.simplefilter("error", OutcomeScaleWarning)
        PretrainedPriorGP(X, Y, prior=prior)
        if scale > 1:  # the target data rescale the prior: nothing to warn about
            PretrainedPriorGP(X, scale * Y, prior=prior, prior_scale_dof=2.0)
    if scale < 1:  # a rescaled prior still has its mean far off the target's
        with pytest.warns(OutcomeScaleWarning, match="vary"):
            PretrainedPriorGP(X, scale * Y, prior=prior, prior_scale_dof=2.0)
