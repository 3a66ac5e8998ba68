import pytest
import torch
from botorch.models.transforms import Standardize

from botorch_transfer import DeltaBOModel, PretrainedPriorGP
from botorch_transfer.acquisition import hyperbo_probability_of_improvement
from tests.models.test_delta import make_source, make_target
from tests.models.test_pretrained import data
from tests.priors.hyperbo.test_objectives import make_prior


def test_hyperbo_pi_takes_the_incumbent_from_the_target_data():
    # on a model whose train_targets are residuals, best_f is still max(y) + margin
    X, Y = make_target()
    model = DeltaBOModel(X, Y, source=make_source())
    assert not torch.allclose(model.train_targets.max(), Y.max())
    acqf = hyperbo_probability_of_improvement(model, margin=0.1, scale_margin=False)
    torch.testing.assert_close(acqf.best_f, Y.max() + 0.1)


def test_hyperbo_pi_margin_is_in_the_prior_standardized_units():
    # a raw-unit margin of 0.1 is nothing for outcomes in the thousands and
    # huge for outcomes near 0.01; by default it scales with the prior's outcome scale
    prior = make_prior()
    X, Y = data()
    model = PretrainedPriorGP(X, Y, prior=prior)
    scale = prior.mean_module.scale.item()
    assert abs(scale - 1.0) > 1e-3  # the check below can tell the two apart
    acqf = hyperbo_probability_of_improvement(model)
    torch.testing.assert_close(acqf.best_f, Y.max() + 0.1 * scale)
    paper = hyperbo_probability_of_improvement(model, scale_margin=False)
    torch.testing.assert_close(paper.best_f, Y.max() + 0.1)
    # the package's other models: the shared outcome map's scale
    source = make_source()
    X, Y = make_target()
    delta = DeltaBOModel(X, Y, source=source, outcome_transform=Standardize(m=1))
    acqf = hyperbo_probability_of_improvement(delta, margin=0.5)
    torch.testing.assert_close(
        acqf.best_f, Y.max() + 0.5 * delta.output_scale.squeeze()
    )


def test_best_f_and_margin_must_be_finite():
    model = PretrainedPriorGP(*data(), prior=make_prior("mlp", "matern52_on_features"))
    with pytest.raises(ValueError, match="`best_f` must be finite"):
        hyperbo_probability_of_improvement(model, best_f=float("nan"))
    with pytest.raises(ValueError, match="`margin` must be finite"):
        hyperbo_probability_of_improvement(model, margin=float("inf"))
