r"""The empirical prior from meta-tasks at their own inputs
(``pretrain_prior(objective="empirical-posterior")``): its statistics, shrinkage
selection, mean and covariance against plain float64 numpy, the batched pieces it is
built from, calibration on left-out tasks, and what selects it by default."""

import io
import math
import warnings

import numpy as np
import pytest
import torch
from gpytorch.kernels import MaternKernel, ScaleKernel

from benchmarks.pretraining import held_out_scores
from botorch_transfer.data import TaskData
from botorch_transfer.priors.hyperbo import PretrainedPrior, pretrain_prior
from botorch_transfer.priors.hyperbo.empirical import SHRINKAGE_GRID
from botorch_transfer.priors.hyperbo.posterior_empirical import (
    MAX_FIT_POINTS,
    _GaussianNLL,
    fit_posterior_empirical_prior,
    matern52,
)

F64 = torch.float64
JITTER = 1e-8


def family(n_tasks=10, sizes=(8, 12, 20), d=2, seed=0, noise=0.05):
    r"""Related tasks, each at its own random inputs in [-1, 2] x [0, 5]: a shared
    bump, a random amplitude, offset and slope per task, observation noise."""
    gen = torch.Generator().manual_seed(seed)
    low = torch.tensor([-1.0, 0.0][:d], dtype=F64)
    width = torch.tensor([3.0, 5.0][:d], dtype=F64)
    tasks = []
    for i in range(n_tasks):
        n = sizes[i % len(sizes)]
        X = low + width * torch.rand(n, d, generator=gen, dtype=F64)
        a, b, s = torch.randn(3, generator=gen, dtype=F64)
        Y = (
            torch.exp(-((X[:, :1] - 0.5) ** 2)) * (1 + 0.3 * a)
            + 0.3 * b
            + 0.2 * s * X[:, -1:] / 5
            + noise * torch.randn(n, 1, generator=gen, dtype=F64)
        )
        tasks.append(TaskData(X, Y))
    return tasks


def np_matern52(A, B, lengthscale, outputscale):
    r = np.sqrt((((A[:, None, :] - B[None, :, :]) / lengthscale) ** 2).sum(-1))
    s = math.sqrt(5) * r
    return outputscale * (1 + s + s**2 / 3) * np.exp(-s)


def np_gaussian_nll(y, mean, cov):
    L = np.linalg.cholesky(cov)
    z = np.linalg.solve(L, y - mean)
    return 0.5 * z @ z + np.log(np.diag(L)).sum() + 0.5 * len(y) * math.log(2 * math.pi)


class Reference:
    r"""The prior of ``posterior_empirical``'s module docstring in float64 numpy,
    from the fitted base GP's hyperparameters and index points."""

    def __init__(self, prior, tasks):
        e = prior.empirical
        self.lower = prior.features.lower.numpy()
        self.range = prior.features.range.numpy()
        self.off = float(prior.mean_module.offset)
        self.sc = float(prior.mean_module.scale)
        self.ls = e.base_kernel.base_kernel.lengthscale.detach().numpy().ravel()
        self.os = float(e.base_kernel.outputscale.detach())
        self.c = float(e.constant)
        self.noise = float(prior.noise_relative.detach())
        self.lam = float(e.shrinkage)
        self.V = e.index_points.numpy()
        self.Z = [(t.X.numpy() - self.lower) / self.range for t in tasks]
        self.y = [(t.Y.numpy()[:, 0] - self.off) / self.sc for t in tasks]
        self.s2 = self.noise + JITTER
        M = self.V.shape[0]
        self.A = self.k(self.V, self.V) + self.s2 * np.eye(M)
        means, covs = [], []
        for Z, y in zip(self.Z, self.y):
            Kn = self.k(Z, Z) + self.s2 * np.eye(len(y))
            kVZ = self.k(self.V, Z)
            means.append(self.c + kVZ @ np.linalg.solve(Kn, y - self.c))
            covs.append(self.k(self.V, self.V) - kVZ @ np.linalg.solve(Kn, kVZ.T))
        self.means, self.covs = np.array(means), np.array(covs)
        self.mu_hat = self.means.mean(0)
        self.Sigma_hat = self.statistics(range(len(tasks)))[1]

    def k(self, A, B):
        return np_matern52(A, B, self.ls, self.os)

    def statistics(self, tasks):
        tasks = list(tasks)
        m = self.means[tasks]
        spread = np.cov(m, rowvar=False, ddof=0) if len(tasks) > 1 else 0.0
        cov = spread + self.covs[tasks].mean(0) + self.s2 * np.eye(len(self.V))
        return m.mean(0), cov

    def prior_at(self, Z1, Z2, mu, Sigma, lam):
        k1, k2 = self.k(Z1, self.V), self.k(Z2, self.V)
        mean = self.c + k1 @ np.linalg.solve(self.A, mu - self.c)
        S = (1 - lam) * Sigma + lam * self.A
        B = np.linalg.solve(self.A, np.linalg.solve(self.A, S - self.A).T)
        return mean, self.k(Z1, Z2) + k1 @ B @ k2.T

    def loo_nll(self, lam):
        scores = []
        N = len(self.Z)
        for j in range(N):
            mu, Sigma = self.statistics([i for i in range(N) if i != j])
            Z, y = self.Z[j], self.y[j]
            mean, cov = self.prior_at(Z, Z, mu, Sigma, lam)
            cov = cov + self.s2 * np.eye(len(y))
            scores.append(np_gaussian_nll(y, mean, cov) / len(y))
        return float(np.mean(scores))

    def base_nll(self):
        total = sum(
            np_gaussian_nll(y, self.c, self.k(Z, Z) + self.s2 * np.eye(len(y)))
            for Z, y in zip(self.Z, self.y)
        )
        return total / sum(len(y) for y in self.y)


@pytest.fixture(scope="module")
def fitted():
    tasks = family()
    assert max(t.n for t in tasks) <= MAX_FIT_POINTS  # every point in the fit
    prior = pretrain_prior(tasks, progress=False)
    return tasks, prior, Reference(prior, tasks)


def test_own_inputs_default_to_the_posterior_empirical_prior(fitted):
    _, prior, _ = fitted
    assert prior.config["objective"] == "empirical-posterior"
    assert prior.config["mean"] == prior.config["kernel"] == "empirical"


def test_statistics_equal_the_reference(fitted):
    _, prior, ref = fitted
    e = prior.empirical
    np.testing.assert_allclose(e.index_mean.numpy(), ref.mu_hat, atol=1e-8)
    np.testing.assert_allclose(e.index_covariance.numpy(), ref.Sigma_hat, atol=1e-8)
    np.testing.assert_allclose(e.index_noise.numpy(), ref.s2, rtol=1e-12)
    # the index points are pooled inputs of the tasks
    Z = np.concatenate(ref.Z)
    gaps = np.abs(ref.V[:, None, :] - Z[None]).max(-1).min(-1)
    assert gaps.max() < 1e-12


def test_base_fit_and_shrinkage_selection_equal_the_reference(fitted):
    _, prior, ref = fitted
    history = prior.training_history
    loo = [h for h in history if "loo_nll" in h]
    assert [h["shrinkage"] for h in loo] == list(SHRINKAGE_GRID)
    for h in loo[::5]:
        assert h["loo_nll"] == pytest.approx(ref.loo_nll(h["shrinkage"]), rel=1e-8)
    best = min(loo, key=lambda h: h["loo_nll"])
    assert ref.lam == best["shrinkage"]
    assert history[-1]["base_nll"] == pytest.approx(ref.base_nll(), rel=1e-8)


def test_mean_and_covariance_equal_the_reference(fitted):
    tasks, prior, ref = fitted
    X = torch.rand(7, 2, generator=torch.Generator().manual_seed(1), dtype=F64)
    X = X * torch.tensor([3.0, 5.0], dtype=F64) - torch.tensor([1.0, 0.0], dtype=F64)
    X = torch.cat([X, tasks[0].X[:3]])
    Z = (X.numpy() - ref.lower) / ref.range
    mean, cov = ref.prior_at(Z, Z, ref.mu_hat, ref.Sigma_hat, ref.lam)
    with torch.no_grad():
        np.testing.assert_allclose(
            prior.mean(X).numpy(), ref.off + ref.sc * mean, atol=1e-7
        )
        np.testing.assert_allclose(
            prior.covariance(X).numpy(), ref.sc**2 * cov, atol=1e-7
        )
        assert float(prior.noise) == pytest.approx(ref.noise * ref.sc**2)


def test_em_steps_raise_the_meta_tasks_likelihood():
    tasks = family(n_tasks=8)
    prior = pretrain_prior(tasks, progress=False)
    V = prior.empirical.index_points * prior.features.range + prior.features.lower
    history = fit_posterior_empirical_prior(prior, tasks, V, em_iter=8)
    loglik = [h["loglik"] for h in history if "em_step" in h]
    assert len(loglik) > 2
    assert all(b >= a - 1e-9 for a, b in zip(loglik, loglik[1:]))
    # the first step is the base GP's marginal likelihood of the tasks
    assert -loglik[0] == pytest.approx(Reference(prior, tasks).base_nll(), rel=1e-8)


def test_matern52_equals_gpytorch():
    kernel = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=3)).to(F64)
    kernel.base_kernel.lengthscale = torch.tensor([0.3, 1.0, 2.0], dtype=F64)
    kernel.outputscale = torch.tensor(1.7, dtype=F64)
    gen = torch.Generator().manual_seed(0)
    A = torch.rand(4, 5, 3, generator=gen, dtype=F64)
    B = torch.rand(6, 3, generator=gen, dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(matern52(A, B, kernel), kernel(A, B).to_dense())
        torch.testing.assert_close(matern52(A, A, kernel), kernel(A).to_dense())


def test_gaussian_nll_values_and_gradients_equal_autograd_through_cholesky():
    gen = torch.Generator().manual_seed(0)
    G = torch.randn(3, 5, 5, generator=gen, dtype=F64)
    K = (G @ G.transpose(-1, -2) + 0.5 * torch.eye(5, dtype=F64)).requires_grad_()
    r = torch.randn(3, 5, generator=gen, dtype=F64).requires_grad_()
    weights = torch.tensor([1.0, -2.0, 0.5], dtype=F64)

    def plain(K, r):
        L = torch.linalg.cholesky(K)
        z = torch.linalg.solve_triangular(L, r.unsqueeze(-1), upper=False)
        logdet = torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        return 0.5 * z.pow(2).sum((-2, -1)) + logdet

    ours = _GaussianNLL.apply(K, r)
    expected = plain(K, r)
    torch.testing.assert_close(ours, expected)
    grads = torch.autograd.grad((weights * ours).sum(), (K, r))
    expected_grads = torch.autograd.grad((weights * expected).sum(), (K, r))
    # the closed form is symmetric in K (autograd's Cholesky gradient is its
    # lower-triangular part): compare the symmetrized gradients
    torch.testing.assert_close(grads[0], (grads[0] + grads[0].mT) / 2)
    sym = (expected_grads[0] + expected_grads[0].mT) / 2
    torch.testing.assert_close(grads[0], sym)
    torch.testing.assert_close(grads[1], expected_grads[1])


def test_left_out_tasks_are_covered_by_the_prior_interval():
    tasks = family(n_tasks=60, sizes=(10, 25, 40), seed=5, noise=0.1)
    train, held_out = tasks[:40], tasks[40:]
    prior = pretrain_prior(train, progress=False)
    scores = held_out_scores(prior, held_out)
    assert 0.8 <= scores["coverage90"] <= 0.97
    # the meta-tasks' spread beats the base kernel alone (shrinkage 1)
    base = pretrain_prior(train, progress=False)
    base.empirical.shrinkage.fill_(1.0)
    for buffer, value in zip(
        (
            base.empirical.index_cholesky,
            base.empirical.alpha,
            base.empirical.correction,
        ),
        base.empirical.derive(),
    ):
        buffer.copy_(value.detach())
    assert scores["loglik"] > held_out_scores(base, held_out)["loglik"]


def test_large_tasks_are_subsampled_in_the_fit():
    # a task of 400 points: a random subset in the base fit and the selection, all
    # points in its posterior at the index points
    tasks = family(n_tasks=6, sizes=(400, 10, 30), seed=4)
    prior = pretrain_prior(tasks, progress=False)
    assert prior.empirical.index_points.shape[0] == 128
    Y = torch.cat([t.Y for t in tasks])
    with torch.no_grad():
        assert prior.mean(tasks[0].X).sub(tasks[0].Y[:, 0]).abs().mean() < Y.std()


def test_options_of_the_network_select_it():
    tasks = family(n_tasks=5)
    prior = pretrain_prior(tasks, num_steps=2, progress=False)
    assert prior.config["objective"] == "nll"
    prior = pretrain_prior(tasks, objective="empirical-posterior", progress=False)
    assert prior.config["objective"] == "empirical-posterior"
    with pytest.raises(ValueError, match="`kernel`"):
        pretrain_prior(tasks, objective="empirical-posterior", kernel="matern52")


def test_save_load_and_float32():
    tasks = family(n_tasks=6)
    prior = pretrain_prior(tasks, progress=False)
    buffer = io.BytesIO()
    prior.save(buffer)
    buffer.seek(0)
    loaded = PretrainedPrior.load(buffer)
    X = tasks[0].X[:4]
    with torch.no_grad():
        torch.testing.assert_close(loaded.covariance(X), prior.covariance(X))
    tasks32 = [TaskData(t.X.float(), t.Y.float()) for t in tasks]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning for healthy float32 meta-data
        prior32 = pretrain_prior(tasks32, progress=False)
    assert prior32.raw_noise.dtype == torch.float32
    with torch.no_grad():
        cov = prior32.covariance(X.float(), observation_noise=True)
    assert torch.linalg.eigvalsh(cov.double()).min() > 0
