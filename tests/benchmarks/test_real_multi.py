r"""The multi-source real problems: the halves, the sources' relatedness, and what a
method receives in a run."""

import pytest
import torch

from benchmarks.methods import register_method, unregister_method
from benchmarks.runner import run_experiment
from benchmarks.tracks import TRACKS
from benchmarks.transfer_protocol import RandomSearch
from botorch_transfer.test_functions.problems import PROBLEMS, make_problem
from botorch_transfer.test_functions.real_multi import (
    MULTI_CONFIRMATION,
    MULTI_DEVELOPMENT,
    MULTI_SOURCE_CONTROLS,
    MULTI_SOURCE_PROBLEMS,
    multi_source_rank_correlations,
)


def test_the_halves_split_the_problems_by_family_with_controls_in_each():
    assert set(MULTI_DEVELOPMENT).isdisjoint(MULTI_CONFIRMATION)
    assert set(MULTI_DEVELOPMENT) | set(MULTI_CONFIRMATION) == set(
        MULTI_SOURCE_PROBLEMS
    )
    assert set(MULTI_SOURCE_PROBLEMS) <= set(PROBLEMS)
    for half in (MULTI_DEVELOPMENT, MULTI_CONFIRMATION):
        problems = [n for n in half if n not in MULTI_SOURCE_CONTROLS]
        families = {MULTI_SOURCE_PROBLEMS[n][0] for n in problems}
        assert families == {"svm", "forest", "mlp"}
        assert len(problems) >= 6
        assert sum(n in MULTI_SOURCE_CONTROLS for n in half) == 2
        # some targets have a scrambled source among related ones
        assert any(MULTI_SOURCE_PROBLEMS[n][3] for n in problems)
        for name in problems:
            _, target, sources, _ = MULTI_SOURCE_PROBLEMS[name]
            assert 2 <= len(sources) <= 6 and target not in sources
    assert TRACKS["multi-development"].problems == tuple(MULTI_DEVELOPMENT)
    assert TRACKS["multi-confirmation"].problems == tuple(MULTI_CONFIRMATION)


@pytest.mark.parametrize("name", sorted(MULTI_SOURCE_PROBLEMS))
def test_scrambled_sources_are_unrelated_and_the_others_related(name):
    _, _, _, scrambled = MULTI_SOURCE_PROBLEMS[name]
    for seed in (0, 1):
        for task, rho in multi_source_rank_correlations(name, seed).items():
            if task in scrambled:
                assert abs(rho) < 0.25, (task, rho)
            else:
                assert rho > 0.4, (task, rho)


class SourceRecorder(RandomSearch):
    def setup(self, problem, data):
        self.sources = data.sources
        return super().setup(problem, data)


def test_a_run_gives_the_method_every_source_named_with_its_noise():
    recorder = register_method("test-source-recorder", SourceRecorder())
    try:
        run_experiment("multi-svm-digit7", "test-source-recorder", seed=3, iterations=1)
        unregister_method("test-source-recorder")
        again = register_method("test-source-recorder", SourceRecorder())
        run_experiment("multi-svm-digit7", "test-source-recorder", seed=3, iterations=1)
    finally:
        unregister_method("test-source-recorder")
    problem = make_problem("multi-svm-digit7", seed=3)
    names = [s.name for s in recorder.sources]
    assert names == ["digit1", "digit2", "digit4", "digit9"]
    noises = [problem.source_noise] + [e.noise for e in problem.extra_sources]
    for source, noise in zip(recorder.sources, noises):
        assert source.X.shape == (100, 2)
        torch.testing.assert_close(source.Yvar, torch.full_like(source.Y, noise))
    # the same seed gives the same sources
    for a, b in zip(recorder.sources, again.sources):
        torch.testing.assert_close(a.X, b.X)
        torch.testing.assert_close(a.Y, b.Y)


def test_a_one_source_problem_still_gives_one_source():
    recorder = register_method("test-source-recorder", SourceRecorder())
    try:
        run_experiment("svm-digit1-to-digit7", "test-source-recorder", 0, 1)
    finally:
        unregister_method("test-source-recorder")
    assert len(recorder.sources) == 1
