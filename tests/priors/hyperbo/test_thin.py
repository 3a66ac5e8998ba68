r"""pretrain_prior on small or odd meta-data: few tasks, tasks of few points,
near-identical inputs. The default takes no network training, the prior is never
narrower than the data, and a warning says what is thin."""

import warnings

import pytest
import torch

from botorch_transfer.data import TaskData
from botorch_transfer.priors.hyperbo import ThinMetaDataWarning, pretrain_prior

F64 = torch.float64


def f(X):
    return torch.sin(6 * X[:, :1]) + X[:, 1:2]


def one_task_of_ten():
    X = torch.rand(10, 2, generator=torch.Generator().manual_seed(0), dtype=F64)
    return [TaskData(X, 1.3 * f(X))]


def four_tasks_of_one_point():
    gen = torch.Generator().manual_seed(1)
    tasks = []
    for _ in range(4):
        X = torch.rand(1, 2, generator=gen, dtype=F64)
        tasks.append(TaskData(X, f(X) + 0.5 * torch.randn(1, 1, generator=gen)))
    return tasks


def two_tasks_of_five():
    gen = torch.Generator().manual_seed(2)
    return [
        TaskData(X, f(X) + 0.2 * i)
        for i, X in enumerate(torch.rand(2, 5, 2, generator=gen, dtype=F64))
    ]


def three_tasks_on_one_design(perturbation=0.0):
    X = torch.rand(8, 2, generator=torch.Generator().manual_seed(3), dtype=F64)
    return [TaskData(X + perturbation * i, f(X) + 0.1 * i) for i in range(3)]


THIN = {
    "one task of ten points": (one_task_of_ten, "only 1 meta-task"),
    "four tasks of one point": (four_tasks_of_one_point, "4 of 4 meta-tasks have"),
    "two tasks of five points": (two_tasks_of_five, "only 2 meta-tasks"),
    "three tasks on one design": (three_tasks_on_one_design, "only 3 meta-tasks"),
}


def pretrain_recording(tasks, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prior = pretrain_prior(tasks, progress=False, **kwargs)
    thin = [w for w in caught if issubclass(w.category, ThinMetaDataWarning)]
    return prior, thin


@pytest.mark.parametrize("case", sorted(THIN))
def test_thin_meta_data_give_a_prior_no_narrower_than_the_data(case):
    make, _ = THIN[case]
    tasks = make()
    prior, _ = pretrain_recording(tasks)
    # no network trained (the NLL network took 50,000 steps here: about a minute)
    assert prior.config["objective"].startswith("empirical")
    Y = torch.cat([t.Y for t in tasks])
    X_data = torch.cat([t.X for t in tasks])
    X_elsewhere = torch.rand(200, 2, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        for X in (X_data, X_elsewhere.to(F64)):
            sd = prior.covariance(X, observation_noise=True).diagonal().sqrt()
            # the prior's sd (before: 0.014-0.1 where the data's was ~1)
            assert sd.min() >= 0.9 * Y.std()


@pytest.mark.parametrize("case", sorted(THIN))
def test_thin_meta_data_warn_and_say_what_is_thin(case):
    make, expected = THIN[case]
    _, thin = pretrain_recording(make())
    assert len(thin) == 1
    message = str(thin[0].message)
    assert expected in message and "pretrain_prior" in message


def test_the_network_on_few_tasks_warns_that_nothing_is_held_out():
    # on its default schedule (50,000 steps); the warning comes before training
    with warnings.catch_warnings():
        warnings.simplefilter("error", ThinMetaDataWarning)
        with pytest.raises(ThinMetaDataWarning, match="holds out no task"):
            pretrain_prior(two_tasks_of_five(), objective="nll", progress=False)
    # a budget the caller chose is not questioned
    _, thin = pretrain_recording(two_tasks_of_five(), objective="nll", num_steps=2)
    assert thin == []


def test_enough_meta_data_give_no_warning():
    gen = torch.Generator().manual_seed(4)
    tasks = [
        TaskData(X, f(X) + 0.3 * torch.randn(()))
        for X in torch.rand(6, 12, 2, generator=gen, dtype=F64)
    ]
    _, thin = pretrain_recording(tasks)
    assert thin == []


def test_near_identical_inputs_are_one_design():
    exact, _ = pretrain_recording(three_tasks_on_one_design())
    # differences of round-off size: the same design as the exact one
    near, _ = pretrain_recording(three_tasks_on_one_design(1e-12))
    assert near.config["objective"] == "empirical"
    X = torch.rand(5, 2, generator=torch.Generator().manual_seed(5), dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(near.mean(X), exact.mean(X))
        torch.testing.assert_close(near.covariance(X), exact.covariance(X))


def test_inputs_apart_by_more_than_the_tolerance_are_different_designs():
    far, _ = pretrain_recording(three_tasks_on_one_design(1e-3))
    assert far.config["objective"] == "empirical-posterior"
