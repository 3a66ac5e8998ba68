r"""The empirical prior (``pretrain_prior(objective="empirical")``): its construction
and shrinkage selection against numpy references, evaluation, units, calibration."""

import io

import numpy as np
import pytest
import torch

from botorch_transfer.data import TaskData
from botorch_transfer.priors.hyperbo import PretrainedPrior, pretrain_prior
from botorch_transfer.priors.hyperbo.empirical import SHRINKAGE_GRID
from tests.priors.hyperbo import reference as ref

F64 = torch.float64


def family(n_tasks=8, M=15, d=2, seed=0, scale=1.0, yvar=False):
    r"""Related tasks on shared inputs in [-1, 2] x [0, 5]: a shared bump, a random
    amplitude, offset and slope per task."""
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(M, d, generator=gen, dtype=F64) * torch.tensor(
        [3.0, 5.0][:d], dtype=F64
    ) - torch.tensor([1.0, 0.0][:d], dtype=F64)
    tasks = []
    for _ in range(n_tasks):
        a, b, s = torch.randn(3, generator=gen, dtype=F64)
        bump = torch.exp(-((X[:, :1] - 0.5) ** 2)) * (1 + 0.3 * a)
        noise = 0.02 * torch.randn(M, 1, generator=gen, dtype=F64)
        Y = scale * (bump + 0.3 * b + 0.2 * s * X[:, 1:2] / 5 + noise)
        Yvar = torch.full_like(Y, 1e-3 * scale**2) if yvar else None
        tasks.append(TaskData(X, Y, Yvar))
    return tasks


def fitted_parts(prior):
    e = prior.empirical
    return {
        "lengthscale": e.base_kernel.base_kernel.lengthscale.detach().numpy().ravel(),
        "outputscale": float(e.base_kernel.outputscale.detach()),
        "c": float(e.constant),
        "noise": float(prior.noise_relative),
    }


def standardized(prior, tasks):
    Y = torch.cat([t.Y for t in tasks], dim=-1).numpy()
    off, sc = float(prior.mean_module.offset), float(prior.mean_module.scale)
    return (Y - off) / sc


@pytest.mark.parametrize("yvar", [False, True])
def test_construction_and_shrinkage_equal_the_reference(yvar):
    tasks = family(yvar=yvar)
    prior = pretrain_prior(tasks, objective="empirical", progress=False)
    h = fitted_parts(prior)
    V = ((tasks[0].X - prior.features.lower) / prior.features.range).numpy()
    sc = float(prior.mean_module.scale)
    Y = standardized(prior, tasks)
    yv = (
        np.zeros(len(V)) if not yvar else tasks[0].Yvar[:, 0].numpy() / sc**2
    ) + 1e-8  # the fit's jitter
    args = (Y, yv, V, h["lengthscale"], h["outputscale"], h["c"], h["noise"])
    # the leave-one-task-out score of every shrinkage value, and the choice
    loo = [ref.empirical_loo_nll(*args, lam) for lam in SHRINKAGE_GRID]
    got = [r["loo_nll"] for r in prior.training_history if "loo_nll" in r]
    np.testing.assert_allclose(got, loo, rtol=1e-8, atol=1e-10)
    lam = prior.training_history[-1]["shrinkage"]
    assert lam == SHRINKAGE_GRID[int(np.argmin(loo))]
    # the index points are in the fit's order (sorted); the reference takes it
    e = ref.empirical_parts(prior)
    perm = [int(np.abs(V - v).sum(1).argmin()) for v in e["V"]]
    np.testing.assert_allclose(e["V"], V[perm], rtol=0, atol=1e-14)
    args = (Y[perm], yv[perm], V[perm]) + args[3:]
    alpha, B = ref.empirical_construction(*args, lam)
    np.testing.assert_allclose(e["alpha"], alpha, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(e["B"], B, rtol=1e-7, atol=1e-9)


def test_the_kept_statistics_equal_the_reference_and_give_the_fitted_parts():
    # the meta-tasks' mean and unbiased covariance at V (eq. 4), the noise at V and
    # the shrinkage are kept; the evaluation parts are derived from them
    tasks = family(yvar=True)
    prior = pretrain_prior(tasks, objective="empirical", progress=False)
    e = prior.empirical
    V = ((tasks[0].X - prior.features.lower) / prior.features.range).numpy()
    order = [int(np.abs(V - v).sum(1).argmin()) for v in e.index_points.numpy()]
    Y = standardized(prior, tasks)[order]
    C = Y - Y.mean(1, keepdims=True)
    np.testing.assert_allclose(e.index_mean.numpy(), Y.mean(1), rtol=1e-12)
    np.testing.assert_allclose(
        e.index_covariance.numpy(), C @ C.T / (Y.shape[1] - 1), rtol=1e-10, atol=1e-14
    )
    sc2 = float(prior.mean_module.scale) ** 2
    yvar = tasks[0].Yvar[order, 0].numpy() / sc2
    np.testing.assert_allclose(
        e.index_noise.numpy(), fitted_parts(prior)["noise"] + yvar + 1e-8, rtol=1e-12
    )
    assert float(e.shrinkage) == prior.training_history[-1]["shrinkage"]
    L, alpha, D = e.derive()  # the same formula again, to round-off
    torch.testing.assert_close(L, e.index_cholesky, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(alpha, e.alpha, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(D, e.correction, rtol=1e-12, atol=1e-13)


def test_mean_and_covariance_equal_the_reference_off_the_index_points():
    tasks = family()
    prior = pretrain_prior(tasks, objective="empirical", progress=False)
    p = ref.prior_parts(prior)
    X = torch.rand(7, 2, generator=torch.Generator().manual_seed(4), dtype=F64) * 4 - 1
    np.testing.assert_allclose(
        prior.mean(X).detach().numpy(), ref.mean(p, X.numpy()), rtol=1e-10
    )
    np.testing.assert_allclose(
        prior.covariance(X).detach().numpy(),
        ref.kernel(p, X.numpy(), X.numpy()),
        rtol=1e-9,
        atol=1e-12,
    )
    diag = prior.covar_module(X, diag=True).detach()
    np.testing.assert_allclose(
        diag.numpy(), np.diag(ref.kernel(p, X.numpy(), X.numpy())), rtol=1e-9
    )
    # far from the index points it is the base GP: constant mean, base kernel
    far = torch.tensor([[40.0, 90.0]], dtype=F64)
    np.testing.assert_allclose(
        prior.mean(far).item(),
        p["offset"] + p["scale"] * p["c"],
        rtol=1e-8,
    )


def test_smooth_noise_free_meta_data_give_a_positive_semidefinite_covariance():
    # 2-d tasks smooth in both inputs and observed without noise: the fitted
    # lengthscales are long (8 and 580 unit-cube widths) and K + s^2 I is nearly
    # singular. Formed with (K + s^2 I)^{-1} twice, the covariance at 8 new points had
    # a smallest eigenvalue of -0.19 against variances of at most 0.09.
    gen = torch.Generator().manual_seed(0)
    X = torch.rand(20, 2, generator=gen, dtype=F64)
    tasks = [
        TaskData(X, torch.sin(5 * X[:, :1] + a) + X[:, 1:])
        for a in torch.linspace(0, 1, 8, dtype=F64)
    ]
    prior = pretrain_prior(tasks, objective="empirical", progress=False)
    X_new = torch.rand(8, 2, generator=gen, dtype=F64)
    with torch.no_grad():
        K = prior.covariance(X_new)
    eigenvalues = torch.linalg.eigvalsh(K)
    assert eigenvalues.min() >= -1e-9 * K.diagonal().max()
    # the GP on it takes the Cholesky of the noisy covariance without jitter
    torch.linalg.cholesky(prior.covariance(X_new, observation_noise=True).detach())


@pytest.mark.parametrize("failing_call", [1, 8])
def test_a_line_search_step_outside_the_positive_definite_region_keeps_the_best_point(
    monkeypatch, failing_call
):
    # the base-kernel fit's L-BFGS line search tried a point whose covariance has no
    # Cholesky factor on rbv2_rpart meta-data (seeds 3 and 4) and the prior failed
    import botorch_transfer.priors.hyperbo.empirical as empirical

    likelihood, calls = empirical.gaussian_log_likelihood, []

    def failing(y, mean, cov):
        calls.append(None)
        if len(calls) == failing_call:
            raise torch.linalg.LinAlgError("not positive-definite")
        return likelihood(y, mean, cov)

    with monkeypatch.context() as m:
        m.setattr(empirical, "gaussian_log_likelihood", failing)
        prior = pretrain_prior(family(), objective="empirical", progress=False)
    # the fit ends where it failed: the best point evaluated before (or the
    # starting point), and the prior is built from it
    assert len(calls) > failing_call
    X = torch.rand(5, 2, dtype=F64)
    with torch.no_grad():
        torch.linalg.cholesky(prior.covariance(X, observation_noise=True))
        assert torch.isfinite(prior.mean(X)).all()
    if failing_call == 1:  # nothing evaluated: the starting values
        e = prior.empirical.base_kernel
        assert float(e.base_kernel.lengthscale.mean()) == pytest.approx(0.5)
    else:  # some progress kept; the complete fit gets at least as far
        complete = pretrain_prior(family(), objective="empirical", progress=False)
        assert (
            complete.training_history[-1]["base_nll"]
            <= prior.training_history[-1]["base_nll"]
        )


def rbv2_rpart_split(seed):
    r"""The meta track's rbv2-rpart problem and the ``seed``'s split: meta-training
    and test task indices and the empirical prior on the meta-training data (skips
    without the YAHPO data)."""
    pytest.importorskip("onnxruntime")
    from benchmarks.meta import (
        META_PROBLEMS,
        _split,
        meta_training_data,
    )
    from botorch_transfer.test_functions.yahpo import default_data_dir

    if not (default_data_dir() / "rbv2_rpart" / "model.onnx").exists():
        pytest.skip("YAHPO rbv2_rpart data not available")
    problem = META_PROBLEMS["rbv2-rpart"]()
    train, test = _split(problem, seed)
    prior = pretrain_prior(meta_training_data(problem, train, seed), progress=False)
    return problem, test, prior


def test_rbv2_rpart_meta_data_that_broke_the_base_fit():
    _, _, prior = rbv2_rpart_split(3)
    X = torch.rand(10, 5, generator=torch.Generator().manual_seed(0), dtype=F64)
    with torch.no_grad():
        torch.linalg.cholesky(prior.covariance(X, observation_noise=True))


def test_units_do_not_matter():
    small, large = family(scale=1e-3), family(scale=1e3)
    p_small = pretrain_prior(small, objective="empirical", progress=False)
    p_large = pretrain_prior(large, objective="empirical", progress=False)
    assert (
        p_small.training_history[-1]["shrinkage"]
        == (p_large.training_history[-1]["shrinkage"])
    )
    X = torch.rand(6, 2, dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(
            p_large.mean(X), 1e6 * p_small.mean(X), rtol=1e-6, atol=0
        )
        torch.testing.assert_close(
            p_large.covariance(X), 1e12 * p_small.covariance(X), rtol=1e-5, atol=0
        )


def test_left_out_tasks_are_covered_by_the_prior_interval():
    r"""Calibration: tasks drawn from one GP (random-feature samples around a shared
    mean); the central 90% interval of the prior built from the other tasks covers
    80-97% of a left-out task's values, at new inputs."""
    from botorch.sampling.pathwise.features.generators import gen_kernel_features

    from botorch_transfer.test_functions.base import fixed_kernel

    torch.manual_seed(0)
    features = gen_kernel_features(
        fixed_kernel("matern52", 0.3, 0.25, 1), num_inputs=1, num_outputs=1024
    )
    n_tasks = 16
    W = torch.randn(1024, n_tasks, dtype=F64)
    X = torch.linspace(0, 1, 25, dtype=F64).unsqueeze(-1)
    X_new = torch.rand(40, 1, generator=torch.Generator().manual_seed(2), dtype=F64)

    def f(X, i):
        with torch.no_grad():
            return torch.sin(6 * X) + features(X) @ W[:, i : i + 1]

    covered = []
    for i in range(n_tasks):
        tasks = [TaskData(X, f(X, j)) for j in range(n_tasks) if j != i]
        prior = pretrain_prior(tasks, objective="empirical", progress=False)
        with torch.no_grad():
            sd = (prior.covar_module(X_new, diag=True) + prior.noise).sqrt()
            z = (f(X_new, i).squeeze(-1) - prior.mean(X_new)) / sd
        covered.append((z.abs() <= 1.6449).double().mean())
    coverage = torch.stack(covered).mean().item()
    assert 0.8 <= coverage <= 0.97, coverage


def test_save_and_load_round_trip():
    prior = pretrain_prior(family(), objective="empirical", progress=False)
    buffer = io.BytesIO()
    prior.save(buffer)
    buffer.seek(0)
    loaded = PretrainedPrior.load(buffer)
    assert loaded.config["num_index_points"] == prior.config["num_index_points"]
    X = torch.rand(5, 2, dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(loaded.mean(X), prior.mean(X), rtol=0, atol=0)
        torch.testing.assert_close(
            loaded.covariance(X), prior.covariance(X), rtol=0, atol=0
        )


def test_a_prior_saved_before_the_whitened_form_loads_as_it_was():
    # priors saved before `index_cholesky` hold alpha and B of the plain formula
    # (module docstring); with L = I they evaluate it unchanged
    from botorch_transfer.priors.io import save_prior

    prior = pretrain_prior(family(), objective="empirical", progress=False)
    parts = ref.empirical_parts(prior)  # alpha and B un-whitened
    state = {k: v.detach().clone() for k, v in prior.state_dict().items()}
    for key in list(state):  # the shared structure appears under three names
        if key.endswith("empirical.index_cholesky"):
            del state[key]
        elif key.endswith("empirical.alpha"):
            state[key] = torch.as_tensor(parts["alpha"])
        elif key.endswith("empirical.correction"):
            state[key] = torch.as_tensor(parts["B"])
    payload = {"config": dict(prior.config), "state": state, "training_history": []}
    buffer = io.BytesIO()
    save_prior(prior, payload, buffer)
    buffer.seek(0)
    loaded = PretrainedPrior.load(buffer)
    torch.testing.assert_close(
        loaded.empirical.index_cholesky, torch.eye(15, dtype=F64), rtol=0, atol=0
    )
    X = torch.rand(5, 2, generator=torch.Generator().manual_seed(1), dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(loaded.mean(X), prior.mean(X), rtol=1e-9, atol=0)
        torch.testing.assert_close(
            loaded.covariance(X), prior.covariance(X), rtol=1e-7, atol=1e-10
        )


def test_bad_inputs_give_clear_errors():
    tasks = family()
    # no inputs shared by all tasks
    moved = [tasks[0]] + [
        TaskData(t.X + 0.01 * (i + 1), t.Y) for i, t in enumerate(tasks[1:])
    ]
    with pytest.raises(ValueError, match="objective='nll'"):
        pretrain_prior(moved, objective="empirical", progress=False)
    with pytest.raises(ValueError, match="at least two tasks"):
        pretrain_prior(tasks[:1], objective="empirical", progress=False)
    with pytest.raises(ValueError, match="`mean`='mlp'"):
        pretrain_prior(tasks, objective="empirical", mean="mlp", progress=False)
    with pytest.raises(ValueError, match="objective='empirical' only"):
        pretrain_prior(
            tasks, objective="nll", mean="empirical", progress=False, num_steps=1
        )
    with pytest.raises(ValueError, match="go together"):
        PretrainedPrior(
            torch.zeros(2),
            torch.ones(2),
            torch.tensor(0.0),
            torch.tensor(1.0),
            mean="empirical",
            num_index_points=3,
        )
    with pytest.raises(ValueError, match="num_index_points"):
        PretrainedPrior(
            torch.zeros(2),
            torch.ones(2),
            torch.tensor(0.0),
            torch.tensor(1.0),
            mean="empirical",
            kernel="empirical",
        )


def test_tasks_with_extra_inputs_use_the_shared_ones():
    tasks = family()
    gen = torch.Generator().manual_seed(9)
    extra = torch.rand(3, 2, generator=gen, dtype=F64)
    first = TaskData(
        torch.cat([tasks[0].X, extra]),
        torch.cat([tasks[0].Y, torch.zeros(3, 1, dtype=F64)]),
    )
    prior = pretrain_prior([first] + tasks[1:], objective="empirical", progress=False)
    assert prior.config["num_index_points"] == tasks[0].n


def test_float32_meta_data_give_a_float32_prior():
    tasks = [
        TaskData(t.X.float(), t.Y.float(), None if t.Yvar is None else t.Yvar.float())
        for t in family()
    ]
    prior = pretrain_prior(tasks, objective="empirical", progress=False)
    X = torch.rand(5, 2)
    with torch.no_grad():
        mean, cov = prior.mean(X), prior.covariance(X)
    assert mean.dtype == cov.dtype == torch.float32
    assert torch.isfinite(mean).all() and torch.isfinite(cov).all()
    # the same prior as from float64 data, up to float32 rounding of the fit
    prior64 = pretrain_prior(family(), objective="empirical", progress=False)
    with torch.no_grad():
        torch.testing.assert_close(
            mean.double(), prior64.mean(X.double()), rtol=1e-2, atol=1e-2
        )
