r"""NLL and EKL (HyperBO eqs. 4-14) against plain numpy references."""

import numpy as np
import pytest
import torch

from botorch_transfer.data import TaskData
from botorch_transfer.priors.hyperbo import (
    EKLGroup,
    PretrainedPrior,
    ekl_objective,
    matching_input_groups,
    nll_objective,
)
from tests.priors.hyperbo import reference as ref

F64 = torch.float64


def make_prior(
    mean="mlp", kernel="matern52_on_features", d=2, dtype=F64, device="cpu", seed=3
):
    torch.manual_seed(seed)
    prior = PretrainedPrior(
        torch.tensor([-1.0, 0.0][:d] + [0.0] * (d - 2), dtype=dtype),
        torch.tensor([2.0, 5.0][:d] + [1.0] * (d - 2), dtype=dtype),
        torch.tensor(0.7, dtype=dtype),
        torch.tensor(2.5, dtype=dtype),
        mean=mean,
        kernel=kernel,
        hidden=(8, 6),
    )
    # move every hyperparameter away from its initial value
    with torch.no_grad():
        base = prior.covar_module.base_kernel
        base.outputscale = torch.tensor(1.7, dtype=dtype)
        base.base_kernel.lengthscale = torch.linspace(
            0.4, 1.3, base.base_kernel.lengthscale.numel(), dtype=dtype
        )
        prior.noise_relative = torch.tensor(0.03, dtype=dtype)
        if mean == "constant":
            prior.mean_module.head.constant.fill_(-0.4)
    return prior.to(device=device, dtype=dtype)


def make_tasks(n_tasks=5, M=9, d=2, shared=True, dtype=F64, device="cpu", yvar=False):
    gen = torch.Generator().manual_seed(1)
    X_shared = torch.rand(M, d, generator=gen, dtype=dtype) * torch.tensor(
        [3.0, 5.0][:d], dtype=dtype
    )
    tasks = []
    for i in range(n_tasks):
        X = X_shared if shared else torch.rand(M + i, d, generator=gen, dtype=dtype) * 3
        Y = torch.sin(X.sum(-1, keepdim=True) + i) + 0.1 * torch.randn(
            X.shape[0], 1, generator=gen, dtype=dtype
        )
        Yvar = torch.full_like(Y, 0.02) if yvar else None
        tasks.append(
            TaskData(
                X.to(device), Y.to(device), None if Yvar is None else Yvar.to(device)
            )
        )
    return tasks


@pytest.mark.parametrize(
    "mean, kernel",
    [
        ("mlp", "matern52_on_features"),
        ("constant", "matern52"),
        ("zero", "matern52_on_features"),
    ],
)
@pytest.mark.parametrize("yvar", [False, True])
def test_nll_equals_reference(mean, kernel, yvar):
    prior = make_prior(mean, kernel)
    tasks = make_tasks(shared=False, yvar=yvar)  # different sizes: several buckets
    p = ref.prior_parts(prior)
    expected = np.mean(
        [
            ref.task_nll(
                p,
                t.X.numpy(),
                t.Y[:, 0].numpy(),
                None if t.Yvar is None else t.Yvar[:, 0].numpy(),
            )
            for t in tasks
        ]
    )
    actual = nll_objective(prior, tasks)
    assert actual.item() == pytest.approx(expected, rel=1e-10, abs=1e-10)


def test_nll_minibatch_is_the_likelihood_of_the_drawn_subsets():
    prior = make_prior()
    tasks = make_tasks(shared=False, M=12)
    gen = torch.Generator().manual_seed(5)
    actual = nll_objective(prior, tasks, batch_size=7, generator=gen)
    gen = torch.Generator().manual_seed(5)
    p = ref.prior_parts(prior)
    values = []
    for t in tasks:  # the same draws, in task order
        idx = torch.randperm(t.n, generator=gen)[:7].numpy()
        values.append(ref.task_nll(p, t.X.numpy()[idx], t.Y[:, 0].numpy()[idx]))
    assert actual.item() == pytest.approx(np.mean(values), rel=1e-10)


@pytest.mark.parametrize(
    "n_tasks, M", [(12, 6), (4, 9), (2, 5)]
)  # full rank; rank 3; rank 1
def test_ekl_equals_reference_full_and_rank_deficient(n_tasks, M):
    prior = make_prior()
    tasks = make_tasks(n_tasks=n_tasks, M=M)
    groups = matching_input_groups(tasks)
    assert len(groups) == 1 and groups[0].Y.shape == (M, n_tasks)
    g = EKLGroup(groups[0])
    assert g.rank == min(M, n_tasks - 1)
    p = ref.prior_parts(prior)
    expected = ref.ekl(p, groups[0].X.numpy(), groups[0].Y.numpy())
    assert ekl_objective(prior, groups).item() == pytest.approx(expected, rel=1e-9)


def test_ekl_full_rank_is_eq7():
    prior = make_prior()
    tasks = make_tasks(n_tasks=15, M=5)
    group = matching_input_groups(tasks)[0]
    p = ref.prior_parts(prior)
    Y = group.Y.numpy()
    mu_t = Y.mean(1)
    S_t = (Y - mu_t[:, None]) @ (Y - mu_t[:, None]).T / Y.shape[1]
    X = group.X.numpy()
    expected = ref.gaussian_kl(
        mu_t, S_t, ref.mean(p, X), ref.kernel(p, X, X) + p["noise"] * np.eye(5)
    )
    assert ekl_objective(prior, [group]).item() == pytest.approx(expected, rel=1e-9)


def test_matching_input_groups_partition_by_task_sets():
    gen = torch.Generator().manual_seed(0)
    A, B, C = (torch.rand(k, 2, generator=gen, dtype=F64) for k in (4, 3, 2))
    y = lambda X: X.sum(-1, keepdim=True)  # noqa: E731
    t0 = TaskData(torch.cat([A, B, C]), y(torch.cat([A, B, C])))
    t1 = TaskData(torch.cat([B, A]), y(torch.cat([B, A])) + 1)
    t2 = TaskData(
        torch.cat([A, A[:1]]), torch.cat([y(A) + 2, y(A[:1]) + 4])
    )  # repeat: averaged
    t3 = TaskData(
        torch.rand(3, 2, generator=gen, dtype=F64), torch.zeros(3, 1, dtype=F64)
    )
    groups = matching_input_groups([t0, t1, t2, t3])
    assert [g.task_indices for g in groups] == [[0, 1, 2], [0, 1]]
    g_all, g_01 = groups
    assert g_all.X.shape == (4, 2) and g_01.X.shape == (3, 2)
    row = (g_all.X == A[0]).all(-1).nonzero().item()
    assert g_all.Y[row].tolist() == pytest.approx(
        [y(A[:1]).item(), y(A[:1]).item() + 1, y(A[:1]).item() + 3]
    )
    assert matching_input_groups([t3]) == []


def test_bad_inputs():
    prior = make_prior()
    with pytest.raises(ValueError, match="groups"):
        ekl_objective(prior, [])
    with pytest.raises(ValueError, match="tasks"):
        nll_objective(prior, [])
    X = torch.rand(4, 2, dtype=F64)
    same = [TaskData(X, torch.ones(4, 1, dtype=F64)) for _ in range(3)]
    with pytest.raises(ValueError, match="zero empirical covariance"):
        EKLGroup(matching_input_groups(same)[0])
    with pytest.raises(ValueError, match="input dimension"):
        prior.mean(torch.rand(3, 5, dtype=F64))


def test_objectives_on_device_and_float32(device):
    prior = make_prior(dtype=torch.float32, device=device)
    tasks = make_tasks(dtype=torch.float32, device=device)
    nll = nll_objective(prior, tasks)
    ekl = ekl_objective(prior, matching_input_groups(tasks))
    p = ref.prior_parts(prior)
    expected = np.mean(
        [
            ref.task_nll(
                p, t.X.cpu().double().numpy(), t.Y[:, 0].cpu().double().numpy()
            )
            for t in tasks
        ]
    )
    assert nll.device.type == device.type and torch.isfinite(ekl)
    assert nll.item() == pytest.approx(expected, rel=1e-4)
