r"""The zero-start problems and the Sobol design they are compared with."""

import pytest
import torch

from benchmarks.runner import run_experiment
from benchmarks.tracks import TRACKS
from botorch_transfer.test_functions.problems import PROBLEMS, make_problem
from botorch_transfer.test_functions.real_multi import (
    MULTI_CONFIRMATION,
    MULTI_DEVELOPMENT,
    MULTI_SOURCE_CONTROLS,
)
from botorch_transfer.test_functions.real_pairs import (
    CONFIRMATION,
    DEVELOPMENT,
    REAL_CONTROLS,
)
from botorch_transfer.test_functions.zero_start import (
    ZERO_CONFIRMATION,
    ZERO_DEVELOPMENT,
    ZERO_START_BASES,
    zero_start_problem,
)


def test_every_related_problem_has_a_zero_start_variant_in_its_half():
    controls = REAL_CONTROLS + MULTI_SOURCE_CONTROLS
    for zero, base in (
        (ZERO_DEVELOPMENT, DEVELOPMENT + MULTI_DEVELOPMENT),
        (ZERO_CONFIRMATION, CONFIRMATION + MULTI_CONFIRMATION),
    ):
        related = [n for n in base if n not in controls]
        assert zero == [f"{n}-from-zero" for n in related]
    assert set(ZERO_DEVELOPMENT).isdisjoint(ZERO_CONFIRMATION)
    assert set(ZERO_START_BASES) == set(ZERO_DEVELOPMENT) | set(ZERO_CONFIRMATION)
    assert set(ZERO_START_BASES) <= set(PROBLEMS)
    assert TRACKS["zero-development"].problems == tuple(ZERO_DEVELOPMENT)
    assert TRACKS["zero-confirmation"].problems == tuple(ZERO_CONFIRMATION)
    methods = {"rank-weighted", "sobol", "random"}
    assert set(TRACKS["zero-confirmation"].methods) == methods


def test_a_zero_start_problem_is_its_base_without_initial_points():
    name = "multi-forest-wine-from-zero"
    problem, base = make_problem(name, seed=3), make_problem("multi-forest-wine", 3)
    assert problem.name == name and problem.n_init == 0 and problem.iterations == 5
    assert problem.n_source == base.n_source
    assert [s.name for s in problem.extra_sources] == [
        s.name for s in base.extra_sources
    ]
    torch.testing.assert_close(problem.target(base.grid), base.target(base.grid))
    with pytest.raises(ValueError, match="Unknown zero-start problem 'nope'"):
        zero_start_problem("nope")


def test_sobol_queries_distinct_grid_points_of_a_scrambled_sequence():
    problem = "svm-digit3-to-digit8-from-zero"
    record = run_experiment(problem, "sobol", seed=0, iterations=5)
    queries = torch.tensor(record["queries"], dtype=torch.float64)
    grid = make_problem(problem).grid
    assert torch.cdist(queries, grid).min(-1).values.max() < 1e-12  # grid points
    assert len({tuple(q) for q in queries.tolist()}) == 5
    again = run_experiment(problem, "sobol", seed=0, iterations=5)
    assert again["queries"] == record["queries"]
    other = run_experiment(problem, "sobol", seed=1, iterations=5)
    assert other["queries"] != record["queries"]  # a new scramble per seed


@pytest.mark.parametrize("method", TRACKS["zero-confirmation"].methods)
def test_every_zero_start_method_runs(method):
    record = run_experiment("svm-digit3-to-digit8-from-zero", method, seed=0)
    assert len(record["queries"]) == 5 and all(r >= 0 for r in record["regret"])


def test_the_recommended_model_runs_from_no_target_point():
    record = run_experiment("multi-svm-digit9-from-zero", "rank-weighted", seed=0)
    assert record["settings"]["n_init"] == 0
    assert len(record["queries"]) == 5
    assert all(r >= 0 for r in record["regret"])
    weights = record["diagnostics"]["source_weights"]
    assert len(weights) == 5
    # no target point: the informative sources share the weight equally
    assert sum(weights[0].values()) == pytest.approx(1.0)
