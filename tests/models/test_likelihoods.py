r"""The shared likelihood builder and the task-indexed noise."""

import math

import pytest
import torch
from botorch.models.utils.gpytorch_modules import (
    MIN_INFERRED_NOISE_LEVEL,
    get_gaussian_likelihood_with_lognormal_prior,
)
from gpytorch.distributions import MultivariateNormal
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood

from botorch_transfer.models.likelihoods import (
    TaskIndexedGaussianLikelihood,
    TaskIndexedNoise,
    learned_noise,
    scaled_noise_likelihood,
    target_likelihood,
)

F64 = torch.float64


def test_target_likelihood_is_botorchs_default():
    X = torch.rand(2, 5, 3, dtype=F64)
    learned = target_likelihood(X, known_noise=False, per_point_noise=False)
    reference = get_gaussian_likelihood_with_lognormal_prior(torch.Size([2]))
    assert isinstance(learned, GaussianLikelihood)
    assert learned.noise_covar.raw_noise.shape == reference.noise_covar.raw_noise.shape
    torch.testing.assert_close(learned.noise.double(), reference.noise.double())
    assert type(learned.noise_covar.noise_prior) is type(
        reference.noise_covar.noise_prior
    )
    known = target_likelihood(X, known_noise=True, per_point_noise=False)
    assert (
        isinstance(known, FixedNoiseGaussianLikelihood)
        and known.second_noise_covar is None
    )
    both = target_likelihood(X, known_noise=False, per_point_noise=True)
    assert isinstance(both, FixedNoiseGaussianLikelihood)
    assert both.second_noise_covar.noise_prior is not None  # learned level on top
    torch.testing.assert_close(both.second_noise.double(), reference.noise.double())


@pytest.mark.parametrize("scale2", [1.0, 1e-6, 250.0])
def test_scaled_noise_likelihood_is_botorchs_on_scaled_outcomes(scale2):
    # noise / scale2 has BoTorch's prior, bound and starting value
    scaled = scaled_noise_likelihood(torch.Size([3]), scale2).double()
    reference = get_gaussian_likelihood_with_lognormal_prior(torch.Size([3])).double()
    torch.testing.assert_close(scaled.noise / scale2, reference.noise)
    bound = scaled.noise_covar.raw_noise_constraint.lower_bound
    torch.testing.assert_close(bound.item(), MIN_INFERRED_NOISE_LEVEL * scale2)
    prior = scaled.noise_covar.noise_prior
    ref_prior = reference.noise_covar.noise_prior
    # densities of noise and noise / scale2: the Jacobian 1 / scale2 (the priors keep
    # float32 parameters, as BoTorch's)
    noise = torch.tensor([1e-5, 3e-3, 0.4])
    torch.testing.assert_close(
        prior.log_prob(scale2 * noise),
        ref_prior.log_prob(noise) - torch.log(torch.tensor(scale2)),
    )
    # raw = log(noise - bound): the same raw steps in any units (built in float32)
    one = scaled_noise_likelihood(torch.Size([3]), 1.0)
    shifted = scaled_noise_likelihood(torch.Size([3]), scale2)
    torch.testing.assert_close(
        shifted.noise_covar.raw_noise - one.noise_covar.raw_noise,
        torch.full((3, 1), math.log(scale2)),
    )
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="`scale2` must be positive and finite"):
            scaled_noise_likelihood(torch.Size(), bad)


def test_learned_noise_without_prior_starts_at_initial_value():
    level = learned_noise(torch.Size(), prior=False, initial_value=0.3)
    assert not list(level.named_priors())
    torch.testing.assert_close(level.noise.item(), 0.3)
    torch.testing.assert_close(
        level.raw_noise_constraint.lower_bound.item(), MIN_INFERRED_NOISE_LEVEL
    )


def make_noise():
    # tasks 0 and 1 share slot 0, task 2 (the target) has slot 2, slot 1 is empty
    levels = [
        learned_noise(torch.Size(), prior=False),
        None,
        learned_noise(torch.Size()),
    ]
    noise = TaskIndexedNoise(levels, task_level=[0, 0, 2]).double()
    noise.learned[0].noise = torch.tensor(0.5, dtype=F64)
    noise.learned[2].noise = torch.tensor(0.01, dtype=F64)
    return noise


def test_noise_is_fixed_part_plus_the_level_of_each_points_task():
    noise = make_noise()
    task = torch.tensor([0, 1, 2, 2])
    fixed = torch.tensor([0.1, 0.2, 0.0, 0.03], dtype=F64)
    index = noise.set_training_points(task, fixed)
    expected = torch.tensor([0.6, 0.7, 0.01, 0.04], dtype=F64)
    torch.testing.assert_close(noise.noise_at(index), expected)
    torch.testing.assert_close(noise.training_noise(), expected)
    # a new point (row -1) has no fixed part, whatever the number of points
    new = torch.tensor([[2, -1]] * 4)
    torch.testing.assert_close(noise.noise_at(new), torch.full((4,), 0.01, dtype=F64))
    torch.testing.assert_close(
        noise.noise_at(torch.tensor([[0, -1]])), torch.tensor([0.5], dtype=F64)
    )


def test_likelihood_reads_the_index_from_the_inputs_both_ways():
    noise = make_noise()
    likelihood = TaskIndexedGaussianLikelihood(noise)
    index = noise.set_training_points(
        torch.tensor([0, 2]), torch.tensor([0.1, 0.0], dtype=F64)
    )
    X = torch.rand(2, 1, dtype=F64)
    mvn = MultivariateNormal(torch.zeros(2, dtype=F64), torch.eye(2, dtype=F64))
    unpacked = likelihood(mvn, X, index).covariance_matrix.diagonal()
    as_list = likelihood(
        mvn, [X, index]
    ).covariance_matrix.diagonal()  # prediction strategy
    torch.testing.assert_close(unpacked, torch.tensor([1.6, 1.01], dtype=F64))
    torch.testing.assert_close(as_list, unpacked)
    torch.testing.assert_close(likelihood.noise, torch.tensor([0.6, 0.01], dtype=F64))
    with pytest.raises(ValueError, match="noise_index"):
        likelihood(mvn, X)


def test_bad_task_levels():
    with pytest.raises(ValueError, match="slot 1"):
        TaskIndexedNoise([learned_noise(torch.Size()), None], task_level=[0, 1])
