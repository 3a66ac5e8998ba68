import numpy as np
import pytest
import torch

from benchmarks.runner import run_experiment
from botorch_transfer.test_functions.problems import PROBLEMS, make_problem
from botorch_transfer.test_functions.real_pairs import (
    CONFIRMATION,
    DEVELOPMENT,
    REAL_CONTROLS,
    REAL_PAIRS,
    pair_rank_correlation,
    real_pair,
)
from botorch_transfer.test_functions.real_tables import FAMILIES, load_table


def test_halves_split_every_pair_once():
    assert set(DEVELOPMENT).isdisjoint(CONFIRMATION)
    assert set(DEVELOPMENT) | set(CONFIRMATION) == set(REAL_PAIRS)
    assert all(name in PROBLEMS for name in REAL_PAIRS)


def test_track_shape_related_pairs_families_controls():
    related = [n for n in REAL_PAIRS if n not in REAL_CONTROLS]
    assert len(related) >= 10
    assert len({REAL_PAIRS[n][2] for n in related}) >= 3
    assert len(REAL_CONTROLS) >= 4
    for half in (DEVELOPMENT, CONFIRMATION):
        assert any(n in REAL_CONTROLS for n in half)
        assert any(n not in REAL_CONTROLS for n in half)


@pytest.mark.parametrize("name", ["svm-digit1-to-digit7", "forest-wine-to-iris"])
def test_objectives_are_replicate_means_in_grid_order(name):
    problem = real_pair(name)
    _, source_task, family, target_task, _ = REAL_PAIRS[name]
    table = load_table(family, target_task)
    values = problem.target(problem.grid).squeeze(-1).numpy()
    np.testing.assert_allclose(values, table.mean(1))
    source = load_table(family, source_task)
    np.testing.assert_allclose(
        problem.source(problem.grid).squeeze(-1).numpy(), source.mean(1)
    )
    # the grid's first axis is the slowest (row-major over the hyperparameters)
    fam = FAMILIES[family]
    assert problem.grid.shape == (fam.grid_size**fam.dim, fam.dim)
    assert torch.equal(problem.grid[1, :-1], problem.grid[0, :-1])
    assert problem.optimum() == pytest.approx(table.mean(1).max())


def test_observations_are_one_replicate_of_the_queried_row():
    problem = real_pair("mlp-breast_cancer-to-wine")
    table = load_table("mlp", "wine")
    rows = torch.tensor([0, 17, 17, 215])
    X = problem.grid[rows]
    gen = torch.Generator().manual_seed(3)
    draws = torch.stack([problem.observe_target(X, gen) for _ in range(50)])
    assert draws.shape == (50, 4, 1)
    for j, row in enumerate(rows.tolist()):
        seen = set(np.round(draws[:, j, 0].numpy(), 4))
        assert seen <= set(np.round(table[row], 4))
        assert len(seen) > 1 or np.ptp(table[row]) == 0  # replicates, not one value


def test_permuted_control_scrambles_the_source_per_seed():
    name = "svm-digit1-to-digit7-permuted"
    a, b = real_pair(name, seed=0), real_pair(name, seed=1)
    grid = a.grid
    sa, sb = a.source(grid).squeeze(-1), b.source(grid).squeeze(-1)
    assert not torch.equal(sa, sb)
    assert torch.equal(sa.sort().values, sb.sort().values)
    # the target is untouched
    assert torch.equal(a.target(grid), real_pair("svm-digit1-to-digit7").target(grid))


def test_rank_correlation_is_reported():
    for name in REAL_PAIRS:
        rho = pair_rank_correlation(name)
        assert -1.0 <= rho <= 1.0
        assert f"rank correlation {rho:.2f}" in real_pair(name).description
        if name in REAL_CONTROLS:
            assert abs(rho) < 0.25  # a scrambled source


def test_unknown_pair_names_the_choices():
    with pytest.raises(ValueError, match="Unknown real pair"):
        real_pair("svm-digit1-to-digit99")


@pytest.mark.parametrize(
    "name",
    [
        "svm-digit3-to-digit8",
        "forest-breast_cancer-to-wine",
        "mlp-digits_low-to-digits_high",
        "mlp-breast_cancer-to-wine-permuted",
    ],
)
def test_two_iteration_loop_on_each_family(name):
    record = run_experiment(name, "gp-ucb-fitted", seed=0, iterations=2)
    problem = make_problem(name)
    assert len(record["observations"]) == 2
    # each observation is one replicate of the queried grid point's row
    _, _, family, task, _ = REAL_PAIRS[name]
    table = load_table(family, task)
    for x, y, value in zip(
        record["queries"], record["observations"], record["values"], strict=True
    ):
        row = int(
            np.ravel_multi_index(
                tuple(np.round(np.asarray(x) * (problem.grid_size - 1)).astype(int)),
                (problem.grid_size,) * problem.dim,
            )
        )
        assert np.isclose(table[row], y).any()
        assert value == pytest.approx(table[row].mean())
    assert all(r >= -1e-9 for r in record["regret"])
