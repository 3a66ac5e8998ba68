import importlib

import pytest

import botorch_transfer
from botorch_transfer import acquisition


@pytest.mark.parametrize(
    "name, model_module",
    [
        ("hyperbo_probability_of_improvement", "pretrained"),
        ("randomized_nn_thompson_candidate", "randomized_nn"),
    ],
)
def test_importable_from_the_package_and_the_models(name, model_module):
    function = getattr(acquisition, name)
    module = importlib.import_module(f"botorch_transfer.models.{model_module}")
    assert getattr(botorch_transfer, name) is function
    assert getattr(botorch_transfer.models, name) is function
    assert getattr(module, name) is function
