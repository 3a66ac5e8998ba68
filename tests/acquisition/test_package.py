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
def test_importable_from_the_package_and_deprecated_from_the_models(name, model_module):
    function = getattr(acquisition, name)
    assert getattr(botorch_transfer, name) is function
    module = importlib.import_module(f"botorch_transfer.models.{model_module}")
    for old in (botorch_transfer.models, module):
        with pytest.warns(DeprecationWarning, match="botorch_transfer.acquisition"):
            assert getattr(old, name) is function


def test_other_missing_names_still_raise():
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        botorch_transfer.models.nothing  # noqa: B018
