r"""The clustered HyperBO prior (``pretrain_clustered_prior``,
``PretrainedPriorMixture``) and ``PretrainedPriorGP`` on it: cluster weights, the
moment-matched mixture and the posterior against numpy references, the clustering,
units, the BoTorch contract and bad input."""

import copy

import numpy as np
import pytest
import torch
from botorch.acquisition import UpperConfidenceBound
from botorch.exceptions.errors import UnsupportedError
from botorch.fit import fit_gpytorch_mll
from botorch.models.transforms import Normalize
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.mlls import ExactMarginalLogLikelihood
from scipy.stats import multivariate_normal

from botorch_transfer import (
    PretrainedPriorGP,
    PretrainedPriorMixture,
    pretrain_clustered_prior,
    pretrain_prior,
)
from botorch_transfer.data import TaskData
from botorch_transfer.priors.hyperbo.mixture import posterior_mean
from tests.priors.hyperbo import reference as ref
from tests.priors.hyperbo.test_empirical import family

F64 = torch.float64


def two_groups(n_each=8, offset=3.0, scale=1.0):
    r"""Two groups of related tasks on the same inputs: ``family``'s tasks, and the
    same tasks mirrored and shifted by ``offset`` (in units of ``scale``)."""
    a = family(n_tasks=n_each, seed=0, scale=scale)
    b = family(n_tasks=n_each, seed=0, scale=scale)
    b = [TaskData(t.X, scale * offset - t.Y) for t in b]
    return a, b


@pytest.fixture(scope="module")
def mixture():
    a, b = two_groups()
    return PretrainedPriorMixture(
        [pretrain_prior(a, progress=False), pretrain_prior(b[:5], progress=False)],
        cluster_sizes=[8, 5],
    )


def reference_mixture(mixture, X, y, X_test):
    r"""Cluster weights ``pi_c N(y | mu_c, K_c + s_c^2 I)``, normalized; the mixture
    ``mu = sum w_c mu_c`` and ``k = sum w_c (k_c + mu_c mu_c^T) - mu mu^T`` (the
    second-moment form), noise ``sum w_c s_c^2``; then eqs. 17-18."""
    parts = [ref.prior_parts(c) for c in mixture.components]
    pi = mixture.prior_weights().numpy()
    logw = np.log(pi)
    if len(y):
        logw = logw + [
            multivariate_normal.logpdf(
                y, ref.mean(p, X), ref.kernel(p, X, X) + p["noise"] * np.eye(len(y))
            )
            for p in parts
        ]
    w = np.exp(logw - logw.max())
    w = w / w.sum()
    Z = np.concatenate([X, X_test])
    means = [ref.mean(p, Z) for p in parts]
    m = sum(wc * mc for wc, mc in zip(w, means))
    K = sum(
        wc * (ref.kernel(p, Z, Z) + np.outer(mc, mc))
        for wc, p, mc in zip(w, parts, means)
    ) - np.outer(m, m)
    noise = sum(wc * p["noise"] for wc, p in zip(w, parts))
    n = len(y)
    C = K[:n, :n] + noise * np.eye(n)
    mean = m[n:] + K[n:, :n] @ np.linalg.solve(C, y - m[:n])
    cov = K[n:, n:] - K[n:, :n] @ np.linalg.solve(C, K[:n, n:])
    return w, mean, cov


@pytest.mark.parametrize("n", [0, 1, 6])
def test_posterior_equals_reference(mixture, n):
    gen = torch.Generator().manual_seed(4)
    X = torch.rand(n, 2, generator=gen, dtype=F64) * torch.tensor([3.0, 5.0]) - 1
    y = 3.0 - torch.exp(-((X[:, 0] - 0.5) ** 2))  # a task of the second group
    X_test = torch.rand(5, 2, generator=gen, dtype=F64) * 2
    model = PretrainedPriorGP(X, y.unsqueeze(-1), prior=mixture)
    w, mean, cov = reference_mixture(mixture, X.numpy(), y.numpy(), X_test.numpy())
    np.testing.assert_allclose(model.cluster_weights.numpy(), w, rtol=1e-9, atol=1e-12)
    post = model.posterior(X_test)
    np.testing.assert_allclose(post.mean[:, 0].detach().numpy(), mean, rtol=1e-8)
    np.testing.assert_allclose(
        post.distribution.covariance_matrix.detach().numpy(), cov, rtol=1e-7, atol=1e-9
    )
    if n == 6:  # the target's group carries the weight
        assert model.cluster_weights[1] > 0.99


def test_one_component_is_the_prior():
    tasks = family()
    prior = pretrain_prior(tasks, progress=False)
    X = tasks[0].X[:4]
    Y = tasks[0].Y[:4] + 0.1
    X_test = torch.rand(6, 2, dtype=F64)
    single = PretrainedPriorGP(X, Y, prior=prior, prior_scale_dof=2.0)
    mixed = PretrainedPriorGP(
        X, Y, prior=PretrainedPriorMixture([prior], [8]), prior_scale_dof=2.0
    )
    assert mixed.cluster_weights.tolist() == [1.0]
    a, b = single.posterior(X_test), mixed.posterior(X_test)
    torch.testing.assert_close(b.mean, a.mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(
        b.distribution.covariance_matrix,
        a.distribution.covariance_matrix,
        rtol=1e-10,
        atol=1e-12,
    )
    torch.testing.assert_close(mixed.prior_scale, single.prior_scale)


def test_clustering_finds_the_groups():
    a, b = two_groups()
    mixture = pretrain_clustered_prior(a + b)
    assert mixture.n_clusters == 2
    assignments = mixture.assignments.tolist()
    assert len(set(assignments[:8])) == len(set(assignments[8:])) == 1
    assert assignments[0] != assignments[8]
    torch.testing.assert_close(
        mixture.prior_weights(), torch.full((2,), 0.5, dtype=F64)
    )
    # one group: one prior, pre-trained on all tasks (as pretrain_prior)
    single = pretrain_clustered_prior(a)
    assert single.n_clusters == 1 and single.assignments.tolist() == [0] * 8
    X = torch.rand(4, 2, dtype=F64)
    torch.testing.assert_close(
        single.components[0].mean(X), pretrain_prior(a, progress=False).mean(X)
    )
    # a cluster smaller than MIN_CLUSTER_SIZE: one prior on all tasks
    assert pretrain_clustered_prior(a + b[:3]).n_clusters == 1
    assert pretrain_clustered_prior(a + b, n_clusters=3).n_clusters == 3


def own_inputs(tasks, seed):
    r"""``tasks`` with each task at its own random inputs in ``family``'s box (the
    same function of the inputs: the bump, offset and slope of each task refitted by
    least squares on its shared-input values)."""
    gen = torch.Generator().manual_seed(seed)
    moved = []
    for t in tasks:
        X = t.X
        design = torch.cat(
            [torch.exp(-((X[:, :1] - 0.5) ** 2)), torch.ones_like(X[:, :1]), X[:, 1:]],
            dim=-1,
        )
        coef = torch.linalg.lstsq(design, t.Y).solution
        Xn = torch.rand(X.shape, generator=gen, dtype=F64) * 3 * torch.tensor(
            [1.0, 5.0 / 3]
        ) - torch.tensor([1.0, 0.0])
        fn = torch.cat(
            [
                torch.exp(-((Xn[:, :1] - 0.5) ** 2)),
                torch.ones_like(Xn[:, :1]),
                Xn[:, 1:],
            ],
            dim=-1,
        )
        moved.append(TaskData(Xn, fn @ coef))
    return moved


def test_clustering_finds_the_groups_of_tasks_at_their_own_inputs():
    a, b = two_groups()
    tasks = own_inputs(a + b, seed=1)
    assert not torch.equal(tasks[0].X, tasks[1].X)
    mixture = pretrain_clustered_prior(tasks)
    assert mixture.n_clusters == 2
    assignments = mixture.assignments.tolist()
    assert len(set(assignments[:8])) == len(set(assignments[8:])) == 1
    assert assignments[0] != assignments[8]
    # every component on the unit cube of all tasks' inputs
    X_all = torch.cat([t.X for t in tasks])
    for component in mixture.components:
        torch.testing.assert_close(component.features.lower, X_all.min(0).values)
        torch.testing.assert_close(
            component.features.lower + component.features.range, X_all.max(0).values
        )
    # one cluster asked for: the prior pre-trained on all tasks
    single = pretrain_clustered_prior(tasks, n_clusters=1)
    X = torch.rand(4, 2, dtype=F64)
    torch.testing.assert_close(
        single.components[0].mean(X), pretrain_prior(tasks, progress=False).mean(X)
    )
    # a cluster smaller than MIN_CLUSTER_SIZE: one prior on all tasks
    assert pretrain_clustered_prior(own_inputs(a + b[:3], seed=1)).n_clusters == 1


def test_posterior_mean_equals_reference():
    tasks = family()
    prior = pretrain_prior(tasks, progress=False)
    gen = torch.Generator().manual_seed(2)
    X = torch.rand(7, 2, generator=gen, dtype=F64) * 3
    Y = torch.randn(7, 1, generator=gen, dtype=F64)
    at = torch.rand(5, 2, generator=gen, dtype=F64) * 3
    p = ref.prior_parts(prior)
    expected, _ = ref.posterior(p, X.numpy(), Y[:, 0].numpy(), at.numpy())
    np.testing.assert_allclose(
        posterior_mean(prior, X, Y, at).numpy(), expected, rtol=1e-9, atol=1e-12
    )
    # known noise variances of the task's observations instead of the prior's
    Yvar = 0.05 + torch.rand(7, 1, generator=gen, dtype=F64)
    expected, _ = ref.posterior(
        p, X.numpy(), Y[:, 0].numpy(), at.numpy(), yvar=Yvar[:, 0].numpy()
    )
    np.testing.assert_allclose(
        posterior_mean(prior, X, Y, at, Yvar).numpy(), expected, rtol=1e-9, atol=1e-12
    )


def test_a_mixture_pretrained_on_a_device_keeps_its_shares_there(device):
    # the shares were made on the CPU whatever the components' device: the prior
    # predictive at the shares failed on CUDA (found by the calibration CLI's test)
    a, b = two_groups()
    moved = [TaskData(t.X.to(device), t.Y.to(device)) for t in a + b]
    mixture = pretrain_clustered_prior(moved)
    assert mixture.n_clusters == 2
    assert mixture.prior_weights().device == moved[0].X.device
    X = torch.rand(4, 2, dtype=F64).to(device)
    weights = mixture.prior_weights()
    on_cpu = copy.deepcopy(mixture).cpu()
    torch.testing.assert_close(
        mixture.mean(X, weights).cpu(), on_cpu.mean(X.cpu(), on_cpu.prior_weights())
    )
    # the prior alone (no target points) on the device
    empty = X[:0]
    model = PretrainedPriorGP(empty, empty[:, :1], prior=mixture)
    assert model.posterior(X).mean.device == X.device


def test_units_do_not_matter():
    X = torch.rand(5, 2, generator=torch.Generator().manual_seed(1), dtype=F64)
    X_test = torch.rand(7, 2, generator=torch.Generator().manual_seed(2), dtype=F64)
    results = []
    for scale in (1.0, 1e3, 1e-3):
        a, b = two_groups(scale=scale)
        mixture = pretrain_clustered_prior(a + b)
        y = scale * (3.0 - torch.exp(-((X[:, :1] - 0.5) ** 2)))
        model = PretrainedPriorGP(X, y, prior=mixture)
        post = model.posterior(X_test)
        results.append(
            (model.cluster_weights, post.mean / scale, post.variance / scale**2)
        )
    for other in results[1:]:
        for a, b in zip(results[0], other):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_contract(mixture, device, dtype):
    mixture = mixture.to(device=device, dtype=dtype)
    gen = torch.Generator().manual_seed(5)
    X = torch.rand(2, 4, 2, generator=gen, dtype=F64).to(device=device, dtype=dtype)
    Y = 3.0 - X[..., :1].sub(0.5).pow(2).neg().exp()
    Y[1] = -Y[1]  # the second batch looks like the first group
    model = PretrainedPriorGP(X, Y, prior=mixture)
    assert model.batch_shape == torch.Size([2])
    assert model.cluster_weights.shape == (2, 2)
    assert model.cluster_weights[0, 1] > model.cluster_weights[1, 1]
    # each batch is the model built on that batch's data
    alone = PretrainedPriorGP(X[1], Y[1], prior=mixture)
    X_test = torch.rand(3, 5, 2, dtype=F64).to(device=device, dtype=dtype)
    post = model.posterior(X_test.unsqueeze(-3))  # 3 x 2 x 5 x 2
    assert post.mean.shape == (3, 2, 5, 1) and post.mean.dtype == dtype
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}
    torch.testing.assert_close(post.mean[:, 1], alone.posterior(X_test).mean, **tol)
    # the weights see the inputs the prior sees: 2 X mapped back to X
    halve = Normalize(2, bounds=torch.tensor([[0.0, 0.0], [2.0, 2.0]]).to(X))
    transformed = PretrainedPriorGP(2 * X, Y, prior=mixture, input_transform=halve)
    torch.testing.assert_close(transformed.cluster_weights, model.cluster_weights)
    # conditioning and fantasies keep the weights
    fantasy = model.fantasize(
        X_test[0, :2].expand(2, 2, 2), SobolQMCNormalSampler(torch.Size([4]))
    )
    assert fantasy.cluster_weights.shape == (2, 2)
    torch.testing.assert_close(fantasy.cluster_weights, model.cluster_weights)
    conditioned = model.condition_on_observations(X[:, :1], Y[:, :1])
    torch.testing.assert_close(conditioned.cluster_weights, model.cluster_weights)
    # nothing to fit: fit_gpytorch_mll leaves it unchanged
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    torch.testing.assert_close(model.posterior(X_test.unsqueeze(-3)).mean, post.mean)


def test_known_noise_weights_use_it(mixture):
    X = torch.rand(4, 2, generator=torch.Generator().manual_seed(6), dtype=F64)
    y = 3.0 - torch.exp(-((X[:, 0] - 0.5) ** 2))
    yvar = torch.full((4,), 0.05, dtype=F64)
    model = PretrainedPriorGP(X, y.unsqueeze(-1), yvar.unsqueeze(-1), prior=mixture)
    parts = [ref.prior_parts(c) for c in mixture.components]
    logw = np.log(mixture.prior_weights().numpy()) + [
        multivariate_normal.logpdf(
            y.numpy(),
            ref.mean(p, X.numpy()),
            ref.kernel(p, X.numpy(), X.numpy()) + np.diag(yvar.numpy()),
        )
        for p in parts
    ]
    w = np.exp(logw - logw.max())
    np.testing.assert_allclose(model.cluster_weights.numpy(), w / w.sum(), rtol=1e-9)


def test_bo_loop_from_zero_points():
    a, b = two_groups()
    mixture = pretrain_clustered_prior(a + b)
    X, Y = torch.empty(0, 2, dtype=F64), torch.empty(0, 1, dtype=F64)
    bounds = torch.tensor([[-1.0, 0.0], [2.0, 5.0]], dtype=F64)

    def f(x):  # the second group's shape
        return 3.0 - torch.exp(-((x[:, :1] - 0.5) ** 2))

    for _ in range(4):
        model = PretrainedPriorGP(X, Y, prior=mixture)
        x, _ = optimize_acqf(
            UpperConfidenceBound(model, beta=1.8**2),
            bounds,
            q=1,
            num_restarts=4,
            raw_samples=64,
        )
        X, Y = torch.cat([X, x]), torch.cat([Y, f(x)])
    assert X.shape == (4, 2) and torch.isfinite(Y).all()
    assert model.cluster_weights[mixture.assignments[8]] > 0.5


def test_bad_input(mixture):
    a, b = two_groups()
    with pytest.raises(ValueError, match="n_clusters"):
        pretrain_clustered_prior(a, n_clusters=0)
    with pytest.raises(TypeError, match="components"):
        PretrainedPriorMixture([], [])
    with pytest.raises(ValueError, match="cluster_sizes"):
        PretrainedPriorMixture(list(mixture.components), [3])
    two_d = pretrain_prior(family(n_tasks=4), progress=False)
    X1 = torch.rand(10, 1, generator=torch.Generator().manual_seed(0), dtype=F64)
    one_d = pretrain_prior(
        [TaskData(X1, torch.sin(3 * X1 + k)) for k in range(4)], progress=False
    )
    with pytest.raises(ValueError, match="input dimension"):
        PretrainedPriorMixture([two_d, one_d], [4, 4])
    X, Y = torch.rand(3, 2, dtype=F64), torch.rand(3, 1, dtype=F64)
    with pytest.raises(ValueError, match="fine_tune"):
        PretrainedPriorGP(X, Y, prior=mixture, fine_tune=True)
    with pytest.raises(UnsupportedError, match="PretrainedPriorMixture"):
        PretrainedPriorGP(X, Y, prior=two_d).cluster_weights
    # an n x 1 train_Y would broadcast into n batches of weights
    X2 = torch.rand(3, 2, dtype=F64)
    with pytest.raises(ValueError, match="`Y` must have shape"):
        mixture.posterior_weights(X2, Y)
    with pytest.raises(ValueError, match="`Yvar` must have shape"):
        mixture.log_likelihoods(X2, Y.squeeze(-1), torch.ones(3, 1, dtype=F64))


def test_save_and_load(mixture, tmp_path):
    path = tmp_path / "mixture.pt"
    mixture.save(path)
    blob = torch.load(path, weights_only=True)  # the shared prior format
    assert blob["format"] == "botorch_transfer.prior"
    assert blob["class"] == "PretrainedPriorMixture"
    loaded = PretrainedPriorMixture.load(path)
    assert not loaded.training and loaded.n_clusters == 2
    assert torch.equal(loaded.log_prior_weights, mixture.log_prior_weights)
    assert torch.equal(loaded.assignments, mixture.assignments)
    X = torch.rand(6, 2, generator=torch.Generator().manual_seed(7), dtype=F64)
    y = 3.0 - torch.exp(-((X[:, :1] - 0.5) ** 2))
    X_test = torch.rand(4, 2, generator=torch.Generator().manual_seed(8), dtype=F64)
    a = PretrainedPriorGP(X, y, prior=mixture)
    b = PretrainedPriorGP(X, y, prior=loaded)
    assert torch.equal(b.cluster_weights, a.cluster_weights)
    pa, pb = a.posterior(X_test), b.posterior(X_test)
    assert torch.equal(pb.mean, pa.mean)
    assert torch.equal(
        pb.distribution.covariance_matrix, pa.distribution.covariance_matrix
    )
    # a clustered prior as pretrain_clustered_prior returns it, assignments included
    first, second = two_groups()
    clustered = pretrain_clustered_prior(first + second)
    clustered.save(tmp_path / "clustered.pt")
    again = PretrainedPriorMixture.load(tmp_path / "clustered.pt")
    assert torch.equal(again.assignments, clustered.assignments)
    torch.testing.assert_close(
        again.mean(X_test, again.prior_weights()),
        clustered.mean(X_test, clustered.prior_weights()),
        rtol=0,
        atol=0,
    )


def test_bad_saved_mixtures_raise_clear_errors(mixture, tmp_path):
    from botorch_transfer import PretrainedPrior
    from botorch_transfer.priors.io import PriorFileError, save_prior

    good = tmp_path / "good.pt"
    mixture.save(good)
    with pytest.raises(PriorFileError, match="it holds a PretrainedPriorMixture"):
        PretrainedPrior.load(good)
    mixture.components[0].save(tmp_path / "one.pt")
    with pytest.raises(PriorFileError, match="it holds a PretrainedPrior"):
        PretrainedPriorMixture.load(tmp_path / "one.pt")

    def broken(change):
        payload = torch.load(good, weights_only=True)["payload"]
        change(payload)
        path = tmp_path / "broken.pt"
        save_prior(mixture, payload, path)  # a valid checksum: the content is wrong
        return path

    def drop_weight(p):
        p["log_prior_weights"] = p["log_prior_weights"][:1]

    def empty(p):
        p["components"] = []

    def no_state(p):
        del p["components"][1]["state"]

    def not_a_dict(p):
        p["components"][0] = 3

    def wrong_dim(p):
        state = p["components"][1]["state"]
        state["features.lower"] = state["features.lower"][:1]

    for change, message in (
        (drop_weight, "1 cluster shares for 2 components"),
        (empty, "non-empty list"),
        (no_state, r"Component 1 .* missing payload key\(s\) \['state'\]"),
        (wrong_dim, r"Component 1 .* 'features.range' has shape \(2,\)"),
        (not_a_dict, r"Component 0 .* must be a dict, got int"),
    ):
        with pytest.raises(PriorFileError, match=message):
            PretrainedPriorMixture.load(broken(change))


@pytest.mark.parametrize("n_clusters", [1, 2, 3, 5])
def test_the_default_finds_the_number_of_clusters(n_clusters):
    r"""The cluster count on cm-BO's synthetic meta-data observed at shared
    inputs, with 5 to 8 tasks per cluster (at least ``MIN_CLUSTER_SIZE``: smaller
    clusters are merged into one prior by design). Measured over 10 draws per count
    (RESULTS.md): the count is right in 40 of 40, and the right cluster carries the
    largest weight after 2 target points in 100 of 100 targets."""
    from tests.priors.synthetic import clustered_tasks, random_function

    for seed in range(2):
        tasks, truth, functions, d = clustered_tasks(
            n_clusters, seed, tasks_per_cluster=(5, 8), shared_inputs=True
        )
        mixture = pretrain_clustered_prior(tasks)
        assert mixture.n_clusters == n_clusters
        for c in range(n_clusters if n_clusters > 1 else 0):
            cluster = mixture.assignments[truth == c].mode().values.item()
            assert (mixture.assignments[truth == c] == cluster).all()
            gen = torch.Generator().manual_seed(100 + 3 * seed + c)
            perturbation = random_function(d, gen, amplitude=0.1)  # a new member
            X = torch.rand(5, d, generator=gen, dtype=F64)
            Y = functions[c](X) + perturbation(X)
            model = PretrainedPriorGP(X, Y, prior=mixture)
            assert model.cluster_weights.argmax().item() == cluster


def test_tasks_on_different_inputs_give_pretrain_priors_prior():
    a, b = two_groups(n_each=3)
    tasks = a + [TaskData(t.X + 0.1, t.Y) for t in b]
    options = {"num_steps": 20, "seed": 3}
    mixture = pretrain_clustered_prior(tasks, **options)
    assert mixture.n_clusters == 1 and mixture.prior_weights().tolist() == [1.0]
    prior = pretrain_prior(tasks, progress=False, **options)
    assert mixture.components[0].config == prior.config  # the same (NLL) default
    X = torch.rand(5, 2, generator=torch.Generator().manual_seed(9), dtype=F64)
    torch.testing.assert_close(mixture.components[0].mean(X), prior.mean(X))
    torch.testing.assert_close(mixture.components[0].covariance(X), prior.covariance(X))
