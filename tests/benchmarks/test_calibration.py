r"""The leave-one-task-out calibration benchmark of the meta priors."""

import pytest
import torch

from benchmarks import calibration
from benchmarks.meta import (
    _split,
    make_meta_problem,
    meta_training_data,
)


def test_coverage_is_the_fraction_of_left_out_values_inside_the_interval(
    monkeypatch, device
):
    seen = []

    def fixed_prior(tasks, X, problem):  # mean 1, sd 0.5: interval 1 +- 0.822
        assert X.device.type == device.type  # the data were moved to the device
        seen.append(len(tasks))
        return torch.ones(X.shape[0], dtype=X.dtype, device=X.device), torch.full(
            (X.shape[0],), 0.25, dtype=X.dtype, device=X.device
        )

    monkeypatch.setitem(calibration.PRIORS, "fixed", fixed_prior)
    row = calibration.leave_one_task_out_coverage(
        "gp-tasks", "fixed", left_out=3, device=device
    )
    problem = make_meta_problem("gp-tasks")
    tasks = meta_training_data(problem, _split(problem, 0)[0], 0)
    expected = [
        ((t.Y - 1).abs() <= calibration.Z90 * 0.5).double().mean().item()
        for t in tasks[:3]
    ]
    assert row["tasks"] == 3 and seen == [len(tasks) - 1] * 3
    assert abs(row["coverage"] - sum(expected) / 3) < 1e-12
    assert row["min"] == min(expected) and row["max"] == max(expected)


# cm-BO's Stage 1 fits a GP per meta-task (about a minute here): slow suite
@pytest.mark.parametrize(
    "prior",
    ["hyperbo", "hyperbo-clustered", pytest.param("cmbo", marks=pytest.mark.slow)],
)
def test_the_cli_prints_a_row_per_problem_and_prior(capsys, device, prior):
    rows = calibration.main(
        ["--problems", "gp-tasks", "--priors", prior, "--left-out", "1"]
        + ["--device", str(device)]
    )
    assert len(rows) == 1 and 0.0 <= rows[0]["coverage"] <= 1.0
    assert "gp-tasks" in capsys.readouterr().out


def test_the_clustered_prior_predicts_with_the_mixtures_moments(monkeypatch):
    from botorch_transfer import PretrainedPriorMixture, pretrain_prior
    from tests.priors.hyperbo.test_mixture import two_groups

    a, b = two_groups()
    first, second = pretrain_prior(a, progress=False), pretrain_prior(b, progress=False)
    mixture = PretrainedPriorMixture([first, second], cluster_sizes=[3, 1])
    monkeypatch.setattr(calibration, "_prior_of", lambda *args: mixture)
    X = torch.rand(6, 2, generator=torch.Generator().manual_seed(0)).double()
    mean, variance = calibration.PRIORS["hyperbo-clustered"](a, X, None)
    # second-moment form: E[y] and E[y^2] - E[y]^2 with y ~ N(mu_c, k_c + s_c^2)
    # drawn from cluster c with probability 3/4, 1/4
    moments = [
        (p.mean(X), p.covariance(X).diagonal() + p.noise) for p in (first, second)
    ]
    expected_mean = 0.75 * moments[0][0] + 0.25 * moments[1][0]
    second_moment = sum(w * (v + m**2) for w, (m, v) in zip((0.75, 0.25), moments))
    torch.testing.assert_close(mean, expected_mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(
        variance, second_moment - expected_mean**2, rtol=1e-10, atol=1e-12
    )
