r"""The source-posterior approximation benchmark."""

from benchmarks.source_error import main, source_posterior_error


def test_full_rank_is_exact_and_a_low_rank_is_not(device):
    rows = source_posterior_error(150, 2, [150, 5], n_test=40, device=device)
    full = [r for r in rows if r["max_rank"] == 150]
    low = [r for r in rows if r["max_rank"] == 5]
    assert [r["mean"] for r in rows] == ["exact", "dtc", "exact", "dtc"]
    # at full rank the factor and the DTC mean are exact (within roundoff)
    for r in full:
        assert r["mean_max"] < 1e-7 and r["sd_rel_max"] < 1e-6
    # rank 5 on a 2-d source: the covariance and the DTC mean are approximations,
    # while the solved mean stays exact
    assert all(r["rank"] == 5 for r in low)
    exact_mean, dtc_mean = low
    assert exact_mean["mean_max"] < 1e-7 and dtc_mean["mean_max"] > 1e-4
    assert exact_mean["sd_rel_max"] > 1e-3


def test_the_cli_prints_a_row_per_rank_and_mean(capsys):
    args = ["--sizes", "60", "--ranks", "10", "--dim", "2", "--test-points", "5"]
    rows = main([*args, "--device", "cpu"])
    assert len(rows) == 2
    assert capsys.readouterr().out.count("\n") == 3
