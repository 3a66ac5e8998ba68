r"""The sources a transfer model takes, checked against the target's inputs."""

import warnings

import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import ModelListGP, SingleTaskGP
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer import TaskData
from botorch_transfer.models.frozen_source import source_posterior_from_model
from botorch_transfer.models.utils.sources import as_source_list
from botorch_transfer.validation import UntrainedSourceWarning

F64 = torch.float64


def data(n=4, d=2):
    X = torch.rand(n, d, dtype=F64)
    return X, X.sum(-1, keepdim=True)


def test_source_list():
    X, Y = data()
    source = TaskData(*data(n=6))
    # TaskData come back as copies, with their own tensors
    for sources, n in (
        (as_source_list(source, X), 1),
        (as_source_list((source,) * 2, X), 2),
    ):
        assert len(sources) == n
        for copy in sources:
            assert isinstance(copy, TaskData) and copy is not source
            assert copy.X is not source.X
            torch.testing.assert_close(copy.X, source.X)
            torch.testing.assert_close(copy.Y, source.Y)
    gp = SingleTaskGP(*data(n=6))
    with pytest.warns(UntrainedSourceWarning):  # on purpose: an unfitted model
        assert as_source_list([gp, source], X)[0] is gp
    with pytest.raises(
        TypeError, match=r"`source\[1\]` is a SingleTaskGP: only the first"
    ):
        as_source_list([source, gp], X)
    with pytest.raises(
        TypeError, match=r"`source\[0\]` must be a TaskData, got SingleTaskGP"
    ):
        as_source_list(gp, X, allow_models=False)
    with pytest.raises(ValueError, match=r"`source\[0\]` has input dimension d=3"):
        as_source_list(TaskData(*data(d=3)), X)
    with pytest.raises(ValueError, match="at least one source"):
        as_source_list([], X)
    with pytest.raises(TypeError, match="`source` is required"):
        as_source_list(None, X)


def fitted_gp(d=2, n=6):
    gp = SingleTaskGP(*data(n=n, d=d))
    fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp))
    return gp


def test_an_empty_source_task_is_a_clear_error():
    X, _ = data()
    empty = TaskData(*data(n=0))
    with pytest.raises(ValueError, match=r"`source\[1\]` has no observations"):
        as_source_list([TaskData(*data(n=6)), empty], X)
    with pytest.raises(ValueError, match=r"`source\[0\]` has no observations"):
        as_source_list(empty, X, allow_models=False)


def test_a_source_model_of_another_dimension_is_a_clear_error():
    X, _ = data(d=2)
    gp = fitted_gp(d=3)
    pattern = r"`source\[0\]` is a {} on d=3 inputs but `train_X` has d=2"
    with pytest.raises(ValueError, match=pattern.format("SingleTaskGP")):
        as_source_list(gp, X)
    with pytest.raises(ValueError, match=pattern.format("ModelListGP")):
        as_source_list(ModelListGP(gp), X)
    with pytest.raises(ValueError, match=pattern.format("GPSourcePosterior")):
        as_source_list(source_posterior_from_model(gp), X)
    as_source_list(fitted_gp(d=2), X)  # the right dimension passes


def test_an_untrained_source_model_warns():
    X, _ = data()
    with pytest.warns(UntrainedSourceWarning, match=r"`source\[0\]` .*SingleTaskGP"):
        as_source_list(SingleTaskGP(*data(n=6)), X)
    with pytest.warns(UntrainedSourceWarning):
        as_source_list(ModelListGP(SingleTaskGP(*data(n=6))), X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UntrainedSourceWarning)
        as_source_list(fitted_gp(), X)  # fitted: no warning
        configured = SingleTaskGP(*data(n=6))
        configured.covar_module.lengthscale = 0.3  # set by hand: trusted
        as_source_list(configured, X)
        as_source_list(source_posterior_from_model(configured), X)


def test_the_source_checks_are_deprecated_in_validation():
    from botorch_transfer import validation

    with pytest.warns(
        DeprecationWarning, match="botorch_transfer.models.utils.sources"
    ):
        assert validation.as_source_list is as_source_list
