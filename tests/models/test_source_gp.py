import copy
import pickle

import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms.input import Normalize
from gpytorch.mlls import ExactMarginalLogLikelihood

import botorch_transfer.models.frozen_source as frozen_source_module
from botorch_transfer import RankWeightedTransferGP, TaskData
from botorch_transfer.models.frozen_source import source_posterior_from_model
from botorch_transfer.models.source_gp import FittedSourceGP, fit_source_gp
from botorch_transfer.models.utils.source_skill import source_skill

F64 = torch.float64
BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=F64)


def source_data(n: int = 30, seed: int = 0, name: str | None = None) -> TaskData:
    X = torch.rand(n, 2, generator=torch.Generator().manual_seed(seed), dtype=F64)
    return TaskData(X, torch.sin(4 * X).sum(-1, keepdim=True), name=name)


@pytest.fixture
def counted_builds(monkeypatch):
    builds = []

    class CountingPosterior(frozen_source_module.GPSourcePosterior):
        def __init__(self, *args, **kwargs):
            builds.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(frozen_source_module, "GPSourcePosterior", CountingPosterior)
    return builds


def test_fit_source_gp_fits_botorch_defaults_and_freezes():
    source = source_data(name="last month")
    gp = fit_source_gp(source, Normalize(2, bounds=BOUNDS))
    assert isinstance(gp, FittedSourceGP) and isinstance(gp, SingleTaskGP)
    assert gp.name == "last month" and not gp.training
    assert not any(p.requires_grad for p in gp.parameters())
    # the same fit as a SingleTaskGP with BoTorch's defaults fitted by hand
    by_hand = SingleTaskGP(
        source.X, source.Y, input_transform=Normalize(2, bounds=BOUNDS)
    )
    fit_gpytorch_mll(ExactMarginalLogLikelihood(by_hand.likelihood, by_hand))
    X = torch.rand(5, 2, generator=torch.Generator().manual_seed(1), dtype=F64)
    torch.testing.assert_close(gp.posterior(X).mean, by_hand.posterior(X).mean)
    # nothing is kept between calls: a new, equal fit
    again = fit_source_gp(source, Normalize(2, bounds=BOUNDS))
    assert again is not gp
    torch.testing.assert_close(again.posterior(X).mean, gp.posterior(X).mean)


def test_fit_source_gp_rejects_what_is_not_source_data():
    with pytest.raises(TypeError, match="`source` must be a TaskData"):
        fit_source_gp(torch.rand(3, 2))
    empty = TaskData(torch.rand(0, 2, dtype=F64), torch.rand(0, 1, dtype=F64))
    with pytest.raises(ValueError, match="`source` has no observations"):
        fit_source_gp(empty)


def test_the_posterior_factor_is_kept_on_the_gp_while_its_state_holds(counted_builds):
    gp = fit_source_gp(source_data())
    X = torch.rand(5, 2, generator=torch.Generator().manual_seed(2), dtype=F64)
    first = source_posterior_from_model(gp)
    second = source_posterior_from_model(gp)
    assert len(counted_builds) == 1
    torch.testing.assert_close(second.covariance(X), first.covariance(X))
    # each call returns its own copy: changing one leaves the kept one intact
    second.set_output_affine(2.0, 1.0)
    torch.testing.assert_close(source_posterior_from_model(gp).mean(X), first.mean(X))
    # other settings, new hyperparameters or new data build it again
    source_posterior_from_model(gp, max_rank=10)
    assert len(counted_builds) == 2
    gp.covar_module.lengthscale = gp.covar_module.lengthscale * 1.5
    changed = source_posterior_from_model(gp)
    assert len(counted_builds) == 3
    # BoTorch's exact posterior of the changed GP, in user units
    torch.testing.assert_close(changed.mean(X), gp.posterior(X).mean.squeeze(-1))
    assert not torch.allclose(changed.mean(X), first.mean(X))


def test_a_plain_exact_gp_passed_again_is_factored_again(counted_builds):
    # nothing is kept between calls for a plain GP (a FittedSourceGP keeps it)
    X = torch.rand(30, 2, generator=torch.Generator().manual_seed(0), dtype=F64)
    gp = SingleTaskGP(X, torch.sin(4 * X).sum(-1, keepdim=True))
    source_posterior_from_model(gp)
    source_posterior_from_model(gp)
    assert len(counted_builds) == 2


def test_the_skill_is_kept_and_copies_and_pickles_leave_the_kept_values_behind(
    counted_builds,
):
    gp = fit_source_gp(source_data(n=40))
    assert gp.skill == source_skill(gp) > 0.9
    source_posterior_from_model(gp)
    for copied in (copy.deepcopy(gp), pickle.loads(pickle.dumps(gp))):
        assert "_kept_values" not in copied.__dict__
        assert copied.skill == gp.skill and copied.name is None
    source_posterior_from_model(gp)
    assert len(counted_builds) == 1


def test_the_rank_weighted_model_takes_fitted_source_gps_by_name():
    transform = Normalize(2, bounds=BOUNDS)
    sources = [source_data(seed=3, name="last month"), source_data(seed=4, name="sim")]
    X = torch.rand(6, 2, generator=torch.Generator().manual_seed(5), dtype=F64)
    Y = 2.0 * torch.sin(4 * X).sum(-1, keepdim=True)
    from_data = RankWeightedTransferGP(X, Y, source=sources, input_transform=transform)
    from_gps = RankWeightedTransferGP(
        X,
        Y,
        source=[fit_source_gp(s, transform) for s in sources],
        input_transform=transform,
    )
    assert from_gps.source_names == ("last month", "sim")
    assert from_gps.source_skills == from_data.source_skills
    Xt = torch.rand(4, 2, generator=torch.Generator().manual_seed(6), dtype=F64)
    torch.testing.assert_close(
        from_gps.posterior(Xt).mean, from_data.posterior(Xt).mean
    )


def test_the_old_name_warns_and_fits():
    from botorch_transfer.models.rank_weighted import fitted_source_gp

    with pytest.warns(DeprecationWarning, match="fit_source_gp"):
        gp = fitted_source_gp(source_data())
    assert isinstance(gp, FittedSourceGP)
