r"""GPs over pooled ``[source; target]`` data: the task index travels with the
inputs (noise per task), through input transforms and to new points."""

import pytest
import torch
from botorch.exceptions.errors import UnsupportedError
from botorch.models.transforms import Normalize
from botorch.sampling.pathwise import draw_matheron_paths

from botorch_transfer import DiffGP, EnvGP, TaskData
from tests.models.test_delta import F64, make_source, make_target


def test_training_inputs_carry_task_and_row():
    source = make_source(n=20)
    X, Y = make_target(n=5)
    model = EnvGP(X, Y, source=[source, make_source(n=10, seed=4)])
    X_train, index = model.train_inputs
    assert X_train.shape == (35, 2) and index.shape == (35, 2)
    expected_task = torch.cat([torch.zeros(20), torch.ones(10), torch.full((5,), 2.0)])
    assert torch.equal(index[:, 0], expected_task.long())
    assert torch.equal(index[:, 1], torch.arange(35))
    assert model.target_task == 2


def test_integer_inputs_pass_through_input_transforms():
    model = EnvGP(*make_target(), source=make_source(), input_transform=Normalize(2))
    index = model.train_inputs[1]
    assert not index.is_floating_point()
    assert model.transform_inputs(index) is index


def test_a_new_point_gets_target_noise_whatever_the_number_of_points():
    # regression: noise used to be decided by counting points (N + T points got the
    # source noise); it is now decided by the task index carried with the inputs
    source = TaskData(make_source(n=20).X, make_source(n=20).Y)
    X, Y = make_target(n=5)
    model = EnvGP(X, Y, source=source)
    noise = model.likelihood.noise_covar
    noise.learned[0].noise = torch.tensor(0.5, dtype=F64)  # source stretch
    noise.learned[1].noise = torch.tensor(0.003, dtype=F64)  # target noise
    X_new = torch.rand(25, 2, dtype=F64)  # exactly N + T new points
    mvn = model.posterior(X_new).distribution
    _, index = model._test_inputs(X_new)
    noisy = model.likelihood(mvn, X_new, index)
    added = noisy.covariance_matrix.diagonal() - mvn.covariance_matrix.diagonal()
    torch.testing.assert_close(added, torch.full((25,), 0.003, dtype=F64))
    # the training points keep their own noise
    expected = torch.cat(
        [torch.full((20,), 0.5, dtype=F64), torch.full((5,), 0.003, dtype=F64)]
    )
    torch.testing.assert_close(model.likelihood.noise, expected)


@pytest.mark.parametrize("cls", [EnvGP, DiffGP])
def test_pathwise_sampling_is_refused_clearly(cls):
    model = cls(*make_target(), source=make_source())
    with pytest.raises(UnsupportedError, match=f"not implemented for {cls.__name__}"):
        draw_matheron_paths(model, sample_shape=torch.Size([2]))
