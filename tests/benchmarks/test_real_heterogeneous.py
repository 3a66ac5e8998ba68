r"""The heterogeneous real problems: the halves, the tables each side ran on, and
what a method receives in a run."""

import numpy as np
import pytest
import torch

from benchmarks.methods import register_method, unregister_method
from benchmarks.runner import run_experiment
from benchmarks.tracks import TRACKS
from benchmarks.transfer_protocol import RandomSearch
from botorch_transfer.test_functions.problems import PROBLEMS, make_problem
from botorch_transfer.test_functions.real_heterogeneous import (
    HETERO_CONFIRMATION,
    HETERO_CONTROLS,
    HETERO_DEVELOPMENT,
    HETERO_PAIRS,
    UNKNOWN_VALUE_CANDIDATES,
    hetero_pair,
    hetero_rank_correlation,
)
from botorch_transfer.test_functions.real_tables import FAMILIES, load_table

KINDS = {"lacks", "unknown", "extra", "subrange"}


def test_each_half_has_every_kind_and_a_control():
    assert set(HETERO_DEVELOPMENT).isdisjoint(HETERO_CONFIRMATION)
    assert set(HETERO_DEVELOPMENT) | set(HETERO_CONFIRMATION) == set(HETERO_PAIRS)
    assert set(HETERO_PAIRS) <= set(PROBLEMS)
    for half in (HETERO_DEVELOPMENT, HETERO_CONFIRMATION):
        related = [n for n in half if n not in HETERO_CONTROLS]
        assert {HETERO_PAIRS[n].kind for n in related} == KINDS
        assert {HETERO_PAIRS[n].family for n in related} == {"svm", "forest", "mlp"}
        assert sum(n in HETERO_CONTROLS for n in half) == 1
    assert TRACKS["hetero-development"].problems == tuple(HETERO_DEVELOPMENT)
    assert TRACKS["hetero-confirmation"].problems == tuple(HETERO_CONFIRMATION)


def _rows_at(family: str, parameter: str, level: int) -> np.ndarray:
    r"""The grid rows where ``parameter`` is at ``level``, from the configurations
    (not from a reshape of the table)."""
    fam = FAMILIES[family]
    axis, value = (
        fam.parameters.index(parameter),
        fam.levels[fam.parameters.index(parameter)][level],
    )
    return np.array([i for i, c in enumerate(fam.configs()) if c[axis] == value])


def _unit_points(X: torch.Tensor, family: str, names: tuple[str, ...]) -> list[tuple]:
    fam = FAMILIES[family]
    g = fam.grid_size
    index = (X * (g - 1)).round().long().tolist()
    return [
        tuple(fam.levels[fam.parameters.index(n)][k] for n, k in zip(names, row))
        for row in index
    ]


@pytest.mark.parametrize("name", sorted(HETERO_PAIRS))
def test_each_side_observes_its_own_table_on_its_own_parameters(name):
    pair = HETERO_PAIRS[name]
    fam = FAMILIES[pair.family]
    problem = hetero_pair(name, seed=1)
    space = problem.source_space
    source_table = load_table(pair.family, pair.source)
    target_table = load_table(pair.family, pair.target)
    configs = {c: i for i, c in enumerate(fam.configs())}
    fixed = fam.levels[fam.parameters.index(pair.parameter)][pair.levels[0]]

    def full_config(point, names):
        values = dict(zip(names, point))
        values.setdefault(pair.parameter, fixed)
        return configs[tuple(values[p] for p in fam.parameters)]

    generator = torch.Generator().manual_seed(0)
    X_s = space.sample(50, generator)
    assert X_s.shape == (50, len(space.feature_names))
    points = _unit_points(X_s, pair.family, space.feature_names)
    if pair.kind == "subrange":
        levels = fam.levels[fam.parameters.index(pair.parameter)]
        lo, hi = levels[pair.levels[0]], levels[pair.levels[-1]]
        column = space.feature_names.index(pair.parameter)
        assert all(lo <= p[column] <= hi for p in points)
    if not pair.permuted:
        rows = [full_config(p, space.feature_names) for p in points]
        torch.testing.assert_close(
            problem.source(X_s).squeeze(-1),
            torch.from_numpy(source_table[rows].mean(1)),
            rtol=0,
            atol=0,
        )
        Y_s = problem.observe_source(X_s, torch.Generator().manual_seed(2))
        for y, row in zip(Y_s.squeeze(-1).tolist(), rows):
            assert y in source_table[row]
    grid = problem.grid
    assert grid.shape[-1] == len(space.target_feature_names)
    rows = [
        full_config(p, space.target_feature_names)
        for p in _unit_points(grid, pair.family, space.target_feature_names)
    ]
    torch.testing.assert_close(
        problem.target(grid).squeeze(-1),
        torch.from_numpy(target_table[rows].mean(1)),
        rtol=0,
        atol=0,
    )
    if pair.kind in ("lacks", "unknown"):
        assert pair.parameter not in space.feature_names
        assert set(space.feature_names) < set(space.target_feature_names)
    if pair.kind == "extra":
        assert set(space.target_feature_names) < set(space.feature_names)
        assert space.target_values == {
            pair.parameter: pair.levels[0] / (fam.grid_size - 1)
        }
    # what a user knows: the fixed value, or candidates where it is unknown
    if pair.kind == "lacks":
        assert space.source_values == {
            pair.parameter: pair.levels[0] / (fam.grid_size - 1)
        }
    else:
        assert space.source_values == {}
    expected = (
        {pair.parameter: UNKNOWN_VALUE_CANDIDATES} if pair.kind == "unknown" else {}
    )
    assert space.candidates == expected


def test_the_fixed_slice_is_the_grid_at_that_level():
    # a `lacks` source is the full table at one level of the missing parameter
    name = "hetero-forest-breast_cancer-to-wine-lacks-max_features"
    pair = HETERO_PAIRS[name]
    problem = hetero_pair(name)
    grid = problem.source_space.sample(10_000, torch.Generator().manual_seed(0))
    rows = _rows_at(pair.family, pair.parameter, pair.levels[0])
    expected = load_table(pair.family, pair.source)[rows].mean(1)
    assert sorted(set(problem.source(grid).squeeze(-1).tolist())) == sorted(
        set(expected.tolist())
    )


@pytest.mark.parametrize("name", sorted(HETERO_PAIRS))
def test_controls_are_unrelated_and_the_pairs_related(name):
    for seed in (0, 1):
        rho = hetero_rank_correlation(name, seed)
        if name in HETERO_CONTROLS:
            assert abs(rho) < 0.3, rho
        else:
            assert rho > 0.4, rho


class SourceRecorder(RandomSearch):
    def setup(self, problem, data):
        self.source = data.source
        return super().setup(problem, data)


def test_a_run_gives_the_method_the_source_in_its_own_named_columns():
    name = "hetero-mlp-digits_high-to-breast_cancer-extra-hidden"
    recorder = register_method("test-source-recorder", SourceRecorder())
    try:
        record = run_experiment(name, "test-source-recorder", seed=3, iterations=2)
    finally:
        unregister_method("test-source-recorder")
    problem = make_problem(name, seed=3)
    source = recorder.source
    assert source.feature_names == ("log10_lr", "log10_weight_decay", "hidden")
    assert source.X.shape == (100, 3)
    assert source.name == "digits_high"
    torch.testing.assert_close(
        source.Yvar, torch.full_like(source.Y, problem.source_noise)
    )
    assert all(len(q) == 2 for q in record["queries"])
