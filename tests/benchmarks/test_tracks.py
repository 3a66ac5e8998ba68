r"""The named tracks of ``run --track``: every name is registered, and explicit
``--methods``/``--problems`` still win."""

import pytest

from benchmarks.__main__ import main
from benchmarks.meta import META_PROBLEMS
from benchmarks.methods import META, TRANSFER, available_methods
from benchmarks.results_io import load_results
from benchmarks.tracks import TRACKS
from botorch_transfer.test_functions.problems import PROBLEMS


@pytest.mark.parametrize("name", sorted(TRACKS))
def test_every_track_names_registered_methods_and_problems(name):
    track = TRACKS[name]
    protocol, problems = (
        (META, META_PROBLEMS) if name == "meta" else (TRANSFER, PROBLEMS)
    )
    assert set(track.methods) <= set(available_methods(protocol))
    assert set(track.problems) <= set(problems)


def test_meta_track_has_both_meta_models_the_peers_and_the_no_meta_gp(tmp_path):
    track = TRACKS["meta"]
    assert {
        "hyperbo-clustered-ucb1-skip",
        "cmbo",
        "rgpe-meta-skip",
        "mtgp-meta-skip",
        "stbo-ucb-skip",
    } <= set(track.methods)
    families = ("lcbench", "rbv2-xgboost", "rbv2-rpart", "rbv2-rpart-replicates")
    # both designs of every family: meta-tasks on shared inputs and at their own
    assert {f"{f}{d}" for f in families for d in ("", "-own-inputs")} == set(
        track.problems
    )
    # the track's T applies when --iterations is not given (here on the small
    # synthetic family: the YAHPO ones need the data)
    main(
        ["run", "--track", "meta", "--out", str(tmp_path), "--seeds", "1",
         "--problems", "gp-tasks", "--methods", "random", "--workers", "1"]
    )  # fmt: skip
    records, _ = load_results(tmp_path / "results.jsonl")
    assert [r["iterations"] for r in records] == [track.iterations] == [30]


def test_default_track_has_peers_controls_and_no_transfer_reference():
    track = TRACKS["default"]
    assert {"mtgp", "rgpe", "gp-ucb-fitted"} <= set(track.methods)
    assert all(
        m.endswith(("-fitted", "-guarded")) or m in ("mtgp", "rgpe", "random")
        for m in track.methods
    )
    assert sum(p.endswith(("-unrelated", "-affine")) for p in track.problems) >= 3
    assert "mtgp" in TRACKS["quick"].methods  # the main job shows the peers


def test_explicit_methods_and_problems_override_the_track(tmp_path):
    main(
        ["run", "--track", "default", "--out", str(tmp_path), "--seeds", "1",
         "--iterations", "1", "--problems", "gaussian-bumps-unrelated",
         "--methods", "random", "--workers", "1"]
    )  # fmt: skip
    records, _ = load_results(tmp_path / "results.jsonl")
    assert [(r["problem"], r["method"]) for r in records] == [
        ("gaussian-bumps-unrelated", "random")
    ]


def test_main_job_runs_the_recommended_model_on_real_pairs_a_control_and_many_sources():
    from benchmarks.transfer_tables import RECOMMENDED
    from botorch_transfer.test_functions.real_multi import (
        MULTI_CONFIRMATION,
        MULTI_SOURCE_PROBLEMS,
    )
    from botorch_transfer.test_functions.real_pairs import REAL_CONTROLS, REAL_PAIRS

    track = TRACKS["quick"]
    assert {RECOMMENDED, "mtgp", "rgpe", "gp-ucb-fitted", "random"} <= set(
        track.methods
    )
    pairs = [p for p in track.problems if p in REAL_PAIRS]
    multi = [p for p in track.problems if p in MULTI_SOURCE_PROBLEMS]
    assert len(pairs) + len(multi) == len(track.problems)
    assert any(p in REAL_CONTROLS for p in pairs)
    assert sum(p not in REAL_CONTROLS for p in pairs) >= 2
    # the multi-source case beside them: a claim-half problem, several sources
    (problem,) = multi
    assert problem in MULTI_CONFIRMATION
    assert len(MULTI_SOURCE_PROBLEMS[problem][2]) >= 3
    # what the track leaves out it leaves out for a stated reason
    assert ("mtgp", problem) in track.left_out
    assert all(reason for reason in track.left_out.values())
    assert all(m in track.methods and p in track.problems for m, p in track.left_out)


def test_a_track_says_what_it_leaves_out_and_explicit_methods_run_it(tmp_path, capsys):
    from dataclasses import replace

    from benchmarks import __main__ as cli

    track = replace(
        TRACKS["quick"],
        problems=("gaussian-bumps-unrelated",),
        methods=("random", "gp-ucb"),
        left_out={("gp-ucb", "gaussian-bumps-unrelated"): "a stated reason"},
        seeds=1,
        iterations=1,
    )
    tracks = {**cli.TRACKS, "quick": track}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli, "TRACKS", tracks)
        main(["run", "--out", str(tmp_path / "a"), "--workers", "1"])
        out = capsys.readouterr().out
        assert "not run in this track: gp-ucb on gaussian-bumps-unrelated " in out
        assert "(a stated reason)" in out
        records, _ = load_results(tmp_path / "a" / "results.jsonl")
        assert [r["method"] for r in records] == ["random"]
        main(
            ["run", "--out", str(tmp_path / "b"), "--workers", "1", "--methods",
             "random", "gp-ucb"]
        )  # fmt: skip
        records, _ = load_results(tmp_path / "b" / "results.jsonl")
        assert sorted(r["method"] for r in records) == ["gp-ucb", "random"]


def test_real_track_halves_are_the_split():
    from botorch_transfer.test_functions.real_pairs import CONFIRMATION, DEVELOPMENT

    assert TRACKS["real-development"].problems == tuple(DEVELOPMENT)
    assert TRACKS["real-confirmation"].problems == tuple(CONFIRMATION)
    assert TRACKS["real-confirmation"].seeds == 20
