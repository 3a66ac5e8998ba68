r"""cm-BO Stage 2 and the prior object: prototypes on the domain and on the index
points, and saving/loading in the shared prior format."""

import io

import pytest
import torch

from botorch_transfer import ClusterMetaPrior, ClusterMetaPriorGP
from botorch_transfer.priors.io import FORMAT, FORMAT_VERSION, PriorFileError
from tests.priors.reference import F64, family
from tests.priors.test_io import bad_prior_files, write_blob


def test_center_prototype_on_domain_matches_discretization(prior):
    V = prior.index_points
    eye = torch.eye(3, dtype=F64)
    torch.testing.assert_close(
        prior.prototype_means_at(V), prior.prototype_means, rtol=1e-10, atol=1e-10
    )
    for c in range(3):
        cov = prior.covariance(V, V, eye[c])
        jitter = prior.prototype_covs[c] - cov  # only the documented diagonal jitter
        assert torch.allclose(
            jitter - torch.diag(torch.diagonal(jitter)),
            torch.zeros_like(jitter),
            atol=1e-10,
        )
        levels = [
            prior.jitter
            * torch.diagonal(prior.task_covs[j]).mean()
            / (1 + prior.jitter)
            for j in prior.prototypes[c].members
        ]
        torch.testing.assert_close(
            torch.diagonal(jitter),
            torch.stack(levels).mean().expand(V.shape[0]),
            rtol=1e-6,
            atol=1e-12,
        )


def test_barycenter_prototypes(meta, bary_prior):
    from botorch_transfer.priors import wasserstein_barycenter

    assert bary_prior.prototype == "barycenter"
    for proto in bary_prior.prototypes:
        expected = wasserstein_barycenter(
            bary_prior.task_means[proto.members], bary_prior.task_covs[proto.members]
        )
        torch.testing.assert_close(proto.mean, expected.mean)
        torch.testing.assert_close(proto.covariance, expected.covariance)


@pytest.mark.parametrize("which", ["center", "barycenter"])
def test_save_load_round_trip(prior, bary_prior, which, tmp_path):
    p = prior if which == "center" else bary_prior
    path = tmp_path / "prior.pt"
    p.save(path)
    payload = torch.load(path, weights_only=True)
    assert payload["format"] == FORMAT and payload["format_version"] == FORMAT_VERSION
    assert payload["class"] == "ClusterMetaPrior"
    loaded = ClusterMetaPrior.load(path, map_location="cpu")
    assert torch.equal(loaded.assignments, p.assignments) and loaded.prototype == which
    V = p.index_points
    X, Y = V[:5], family(1, V[:5])
    a, b = (
        ClusterMetaPriorGP(X, Y, prior=p, train_Yvar=torch.full_like(Y, 1e-3)),
        ClusterMetaPriorGP(X, Y, prior=loaded, train_Yvar=torch.full_like(Y, 1e-3)),
    )
    assert torch.equal(a.posterior(V).mean, b.posterior(V).mean)
    assert torch.equal(
        a.posterior(V).distribution.covariance_matrix,
        b.posterior(V).distribution.covariance_matrix,
    )
    assert torch.equal(a.updated_weights(), b.updated_weights())
    buffer = io.BytesIO()
    torch.save({"format": "PretrainedPrior", "version": 1}, buffer)
    buffer.seek(0)
    with pytest.raises(ValueError, match="not a saved ClusterMetaPrior"):
        ClusterMetaPrior.load(buffer)


@pytest.mark.parametrize("which", ["center", "barycenter"])
def test_load_of_the_previous_file_format(prior, bary_prior, which, tmp_path):
    # files written before the shared format: {"format": class, "version": 1, ...}
    p = prior if which == "center" else bary_prior
    p.save(tmp_path / "new.pt")
    payload = torch.load(tmp_path / "new.pt", weights_only=True)["payload"]
    torch.save(
        {"format": "ClusterMetaPrior", "version": 1, **payload}, tmp_path / "old.pt"
    )
    loaded = ClusterMetaPrior.load(tmp_path / "old.pt")
    assert (
        torch.equal(loaded.prototype_covs, p.prototype_covs)
        and loaded.prototype == which
    )
    V = p.index_points
    w = torch.tensor([0.2, 0.3, 0.5], dtype=F64)
    assert torch.equal(
        loaded.covariance(V[:4], V[:4], w), p.covariance(V[:4], V[:4], w)
    )


def test_bad_files_raise_clear_errors(prior, tmp_path):
    good = tmp_path / "prior.pt"
    prior.save(good)
    cases = bad_prior_files(good, "ClusterMetaPrior", "PretrainedPrior", "posteriors.X")
    for case, (path, pattern) in cases.items():
        with pytest.raises(PriorFileError, match=pattern) as info:
            ClusterMetaPrior.load(path)
        assert str(path) in str(info.value), case
    config_less = torch.load(good, weights_only=True)
    del config_less["payload"]["config"]["distance"]
    write_blob(config_less, tmp_path / "no_distance.pt")
    with pytest.raises(PriorFileError, match=r"missing config key\(s\) \['distance'\]"):
        ClusterMetaPrior.load(tmp_path / "no_distance.pt")


def test_inconsistent_saved_tensors_raise_clear_errors(prior, tmp_path):
    good = tmp_path / "prior.pt"
    prior.save(good)
    state = torch.load(good, weights_only=True)["payload"]["state"]
    K, m = prior.n_tasks, prior.index_points.shape[0]

    def edited(name, **tensors):
        blob = torch.load(good, weights_only=True)
        blob["payload"]["state"].update(tensors)
        write_blob(blob, tmp_path / name)
        return tmp_path / name

    for path, match in [
        (
            edited("means.pt", prototype_means=state["prototype_means"][:, :-1]),
            rf"'prototype_means' has shape \(3, {m - 1}\), expected \(C, m\) "
            rf"with C=3, m={m}",
        ),
        (
            edited("mask.pt", **{"posteriors.mask": state["posteriors.mask"].double()}),
            r"'posteriors.mask' has dtype torch.float64, expected a bool tensor",
        ),
        (
            edited("assignments.pt", assignments=torch.full((K,), 5)),
            r"'assignments' must hold cluster indices in \[0, 3\)",
        ),
        (
            edited(
                "ls.pt",
                **{"posteriors.lengthscale_32": -state["posteriors.lengthscale_32"]},
            ),
            r"'posteriors.lengthscale_32' must be positive",
        ),
    ]:
        with pytest.raises(PriorFileError, match=match) as info:
            ClusterMetaPrior.load(path)
        assert str(path) in str(info.value)
