r"""The Ax transfer-learning comparison (skipped when Ax is not installed)."""

import pytest

pytest.importorskip("ax")

import pandas as pd  # noqa: E402
from botorch.models import MultiTaskGP  # noqa: E402

from benchmarks.ax_transfer import (  # noqa: E402
    ax_transfer_comparison,
    main,
    summary_table,
)
from botorch_transfer import DeltaBOModel  # noqa: E402


def test_multitask_gp_and_delta_bo_through_ax(device):
    df = ax_transfer_comparison(
        "bohachevsky",
        [MultiTaskGP, DeltaBOModel],
        trials=3,
        initialization_trials=2,
        n_source=10,
        device=device,
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


def test_summary_table_cumulative_regret_and_ratio():
    rows = [
        ("p", method, seed, trial, regret)
        for method, scale in (("MultiTaskGP", 1.0), ("DeltaBOModel", 0.5))
        for seed in (0, 1)
        for trial, regret in enumerate([3.0 * scale, (1.0 + seed) * scale])
    ]
    df = pd.DataFrame(rows, columns=["problem", "method", "seed", "trial", "regret"])
    table = summary_table(df)
    mtgp, delta = table.loc[("p", "MultiTaskGP")], table.loc[("p", "DeltaBOModel")]
    # cumulative regret per seed: 4 and 5 (mean 4.5); final regret 1 and 2
    assert mtgp.cumulative_regret == 4.5 and mtgp.final_regret == 1.5
    assert mtgp.cumulative_se == pytest.approx(0.5) and mtgp.seeds == 2
    assert delta.cumulative_regret == 2.25 and delta.vs_MultiTaskGP == 0.5


def test_the_cli_runs_a_guarded_model_class(capsys):
    df = main(
        ["--methods", "GuardedDeltaBOModel", "--trials", "3", "--init", "2"]
        + ["--n-source", "10", "--seeds", "1"]
    )
    assert list(df.method.unique()) == ["GuardedDeltaBOModel"] and len(df) == 3
    assert "GuardedDeltaBOModel" in capsys.readouterr().out


def test_the_cli_passes_the_guard_criterion_to_the_guarded_classes(capsys):
    df = main(
        ["--methods", "GuardedDeltaBOModel", "--trials", "4", "--init", "2"]
        + ["--n-source", "10", "--seeds", "1", "--guard-criterion", "sequential"]
    )
    assert list(df.method.unique()) == ["GuardedDeltaBOModel[sequential]"]
    assert "GuardedDeltaBOModel[sequential]" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--methods", "DeltaBOModel", "--guard-criterion", "sequential"])
