r"""The Ax transfer-learning comparison (skipped when Ax is not installed)."""

import pytest

pytest.importorskip("ax")

from botorch.models import MultiTaskGP  # noqa: E402

from botorch_transfer import DeltaBOModel  # noqa: E402
from botorch_transfer.benchmarks.ax_transfer import ax_transfer_comparison  # noqa: E402


def test_multitask_gp_and_delta_bo_through_ax():
    df = ax_transfer_comparison(
        "bohachevsky",
        [MultiTaskGP, DeltaBOModel],
        trials=3,
        initialization_trials=2,
        n_source=10,
    )
    assert list(df.method.unique()) == ["MultiTaskGP", "DeltaBOModel"]
    assert len(df) == 6
    # same seed: the same Sobol start for both methods
    first = df[df.trial < 2].groupby("trial").regret.nunique()
    assert (first == 1).all()
    # regret is non-increasing within a run
    for _, run in df.groupby("method"):
        assert run.regret.is_monotonic_decreasing


def test_trials_must_exceed_the_initialization():
    with pytest.raises(ValueError, match="trials"):
        ax_transfer_comparison(trials=2, initialization_trials=2)
