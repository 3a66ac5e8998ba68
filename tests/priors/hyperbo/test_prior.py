r"""PretrainedPrior persistence in the shared prior format: round trip, files of the
previous format, and one clear error per bad file."""

import pytest
import torch

from botorch_transfer.priors.hyperbo import PretrainedPrior
from botorch_transfer.priors.io import FORMAT, FORMAT_VERSION, PriorFileError
from tests.priors.test_io import bad_prior_files, write_blob

F64 = torch.float64


def make_prior(**kwargs):
    lower, upper = (
        torch.tensor([-1.0, 0.0], dtype=F64),
        torch.tensor([1.0, 5.0], dtype=F64),
    )
    offset, scale = torch.tensor(0.3, dtype=F64), torch.tensor(2.0, dtype=F64)
    prior = PretrainedPrior(lower, upper, offset, scale, hidden=(4, 3), **kwargs)
    with torch.no_grad():  # non-default weights, so that the round trip means something
        gen = torch.Generator().manual_seed(0)
        for p in prior.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=F64))
    prior.training_history = [{"step": 1.0, "loss": 2.5}]
    return prior.eval()


def assert_same(a, b):
    X = torch.rand(6, 2, dtype=F64) * torch.tensor(
        [2.0, 5.0], dtype=F64
    ) - torch.tensor([1.0, 0.0], dtype=F64)
    with torch.no_grad():
        assert torch.equal(a.mean(X), b.mean(X))
        assert torch.equal(
            a.covariance(X, observation_noise=True),
            b.covariance(X, observation_noise=True),
        )
    assert a.config == b.config and a.training_history == b.training_history


@pytest.mark.parametrize(
    "mean, kernel", [("mlp", "matern52_on_features"), ("constant", "matern52")]
)
def test_round_trip(tmp_path, mean, kernel):
    prior = make_prior(mean=mean, kernel=kernel)
    path = tmp_path / "prior.pt"
    prior.save(path)
    blob = torch.load(path, weights_only=True)
    assert blob["format"] == FORMAT and blob["format_version"] == FORMAT_VERSION
    assert blob["class"] == "PretrainedPrior"
    assert set(blob["payload"]) == {"config", "state", "training_history"}
    loaded = PretrainedPrior.load(path)
    assert not loaded.training
    assert_same(loaded, prior)


def test_load_of_the_previous_file_format(tmp_path):
    # what PretrainedPrior.save wrote before the shared format
    prior = make_prior()
    state = {k: v.detach().cpu() for k, v in prior.state_dict().items()}
    old = {
        "format": "PretrainedPrior",
        "version": 1,
        "config": dict(prior.config),
        "state": state,
        "training_history": list(prior.training_history),
    }
    torch.save(old, tmp_path / "old.pt")
    assert_same(PretrainedPrior.load(tmp_path / "old.pt"), prior)


def test_bad_files_raise_clear_errors(tmp_path):
    good = tmp_path / "prior.pt"
    make_prior().save(good)
    cases = bad_prior_files(
        good, "PretrainedPrior", "ClusterMetaPrior", "features.lower"
    )
    for case, (path, pattern) in cases.items():
        with pytest.raises(PriorFileError, match=pattern) as info:
            PretrainedPrior.load(path)
        assert str(path) in str(info.value), case
    # a state that does not fit the config (here: other hidden widths)
    blob = torch.load(good, weights_only=True)
    blob["payload"]["config"]["hidden"] = [5, 3]
    write_blob(blob, tmp_path / "mismatch.pt")
    with pytest.raises(PriorFileError, match="does not match its config"):
        PretrainedPrior.load(tmp_path / "mismatch.pt")
    del blob["payload"]["config"]["kernel"]
    write_blob(blob, tmp_path / "no_kernel.pt")
    with pytest.raises(PriorFileError, match=r"missing config key\(s\) \['kernel'\]"):
        PretrainedPrior.load(tmp_path / "no_kernel.pt")


def test_invalid_saved_values_raise_clear_errors(tmp_path):
    good = tmp_path / "prior.pt"
    make_prior().save(good)

    def edited(name, config=None, state=None):
        blob = torch.load(good, weights_only=True)
        blob["payload"]["config"].update(config or {})
        blob["payload"]["state"].update(state or {})
        write_blob(blob, tmp_path / name)
        return tmp_path / name

    F = torch.float64
    for path, match in [
        (edited("mean.pt", config={"mean": "cubic"}), r"invalid config.*`mean`"),
        (edited("dim.pt", config={"dim": 3}), r"config 'dim' is 3 but .* d=2"),
        (
            edited("scale.pt", state={"mean_module.scale": torch.tensor(0.0, dtype=F)}),
            r"'mean_module.scale' must be positive",
        ),
        (
            edited(
                "range.pt", state={"features.range": torch.tensor([1.0, -2.0], dtype=F)}
            ),
            r"'features.range' must be positive",
        ),
        (
            edited("range3.pt", state={"features.range": torch.ones(3, dtype=F)}),
            r"'features.range' has shape \(3,\), expected \(d,\) with d=2",
        ),
    ]:
        with pytest.raises(PriorFileError, match=match) as info:
            PretrainedPrior.load(path)
        assert str(path) in str(info.value)
