import pytest
import torch
from botorch.models.transforms import Normalize

from botorch_transfer import RandomizedNNEnsemble
from botorch_transfer.acquisition import randomized_nn_thompson_candidate
from botorch_transfer.models.randomized_nn_options import (
    NetworkOptions,
    TrainingOptions,
)
from tests.models.test_randomized_nn import BOUNDS, F64, data, f


@pytest.mark.parametrize("loss", ["squared", "cross_entropy"])
def test_thompson_sampling_loop(loss):
    X, Y = data(n=4, seed=2)
    for t in range(10):
        x = randomized_nn_thompson_candidate(
            X,
            Y,
            bounds=BOUNDS,
            network=NetworkOptions(hidden=(32, 32)),
            training_options=TrainingOptions(num_steps=200),
            seed=t,
            loss=loss,
            num_restarts=2,
            raw_samples=64,
        )
        assert x.shape == (1, 2) and ((x >= 0) & (x <= 1)).all()
        X, Y = torch.cat([X, x]), torch.cat([Y, f(x)])
    assert Y.max() > 1.9 > Y[:4].max()


def test_thompson_sampling_on_a_finite_domain():
    X, Y = data(n=5, seed=2)
    choices = torch.rand(300, 2, dtype=F64, generator=torch.Generator().manual_seed(9))
    x = randomized_nn_thompson_candidate(
        X,
        Y,
        choices=choices,
        network=NetworkOptions(hidden=(16,)),
        training_options=TrainingOptions(num_steps=50),
        seed=0,
        max_batch_size=64,
    )
    # the maximizer of the trained member over the finite domain, by brute force
    model = RandomizedNNEnsemble(
        X,
        Y,
        num_members=1,
        network=NetworkOptions(hidden=(16,)),
        training_options=TrainingOptions(num_steps=50),
        seed=0,
        input_transform=Normalize(
            2, bounds=torch.stack([choices.min(0).values, choices.max(0).values])
        ),
    )
    best = choices[model.posterior(choices).values.reshape(-1).argmax()]
    assert torch.equal(x, best.unsqueeze(0))
