import dataclasses
import math

import pytest
import torch

from botorch_transfer.test_functions.problems import (
    PROBLEMS,
    SHILTON_SHIFTS,
    make_problem,
)
from tests.test_functions.yahpo_data import yahpo_available


def test_bohachevsky_pair_matches_paper():
    p = make_problem("bohachevsky")
    origin = torch.zeros(1, 2, dtype=torch.float64)
    # both Bohachevsky functions are 0 at the origin (negated for maximization)
    assert p.target(origin).item() == pytest.approx(0.0, abs=1e-12)
    assert p.source(origin).item() == pytest.approx(0.0, abs=1e-12)
    x = torch.tensor([[1.0, -0.5]], dtype=torch.float64)
    f = 1 + 2 * 0.25 - 0.3 * math.cos(3 * math.pi) * math.cos(-2 * math.pi) + 0.3
    g = 1 + 2 * 0.25 - 0.3 * math.cos(3 * math.pi) - 0.4 * math.cos(-2 * math.pi) + 0.7
    assert p.target(x).item() == pytest.approx(-f) and p.source(
        x
    ).item() == pytest.approx(-g)
    assert p.grid.shape == (120 * 120, 2) and p.n_source == 400
    assert p.optimum() == pytest.approx(float(p.target(p.grid).max()))


def test_gaussian_bumps_shift():
    p = make_problem("gaussian-bumps")
    assert p.target(torch.zeros(1, 2, dtype=torch.float64)).item() == pytest.approx(
        1.0
    )  # mu = 0
    shifted = torch.full((1, 2), 1 / math.sqrt(2), dtype=torch.float64)  # s = 1
    assert p.source(shifted).item() == pytest.approx(1.0)
    assert p.optimum() == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("shift", SHILTON_SHIFTS)
def test_shilton_fig2_problems(shift):
    p = make_problem(f"shilton-bumps-s{shift:g}")
    assert (p.n_source, p.n_init, p.iterations) == (20, 3, 20)  # Shilton et al. Sec. 4
    assert p.source_noise == p.target_noise == pytest.approx(0.1**2)
    source_peak = torch.full(
        (1, 2), shift / math.sqrt(2), dtype=torch.float64
    )  # mu' = mu + s / sqrt(n)
    assert p.source(source_peak).item() == pytest.approx(1.0)
    assert p.target(torch.zeros(1, 2, dtype=torch.float64)).item() == pytest.approx(1.0)
    if shift == 0:  # identical tasks
        X = torch.rand(5, 2, dtype=torch.float64)
        torch.testing.assert_close(p.source(X), p.target(X))


def test_unknown_problem():
    with pytest.raises(ValueError, match="Unknown problem 'nope'"):
        make_problem("nope")
    assert set(PROBLEMS) >= {"bohachevsky", "gaussian-bumps"}


def test_assumption_gp_draws_a_pair_per_seed():
    a, a_again, b = (
        make_problem("assumption-gp", seed=0),
        make_problem("assumption-gp", seed=0),
        make_problem("assumption-gp", seed=1),
    )
    grid = a.grid[::97]
    torch.testing.assert_close(a.target(grid), a_again.target(grid))  # reproducible
    assert not torch.allclose(a.target(grid), b.target(grid))  # a new draw per seed
    delta = a.target(a.grid) - a.source(a.grid)
    # delta ~ GP(0, 0.8 SE(1.0)): sample variance over the grid of the order of tau^2
    assert 0.05 < delta.var().item() < 4 * 0.8
    assert (
        a.grid.shape == (14400, 2) and a.source_noise == 0.1 and a.target_noise == 0.01
    )


@pytest.mark.parametrize("base", ["bohachevsky", "gaussian-bumps", "assumption-gp"])
def test_unrelated_controls_are_uncorrelated_with_the_target(base):
    for seed in range(3):
        problem = make_problem(f"{base}-unrelated", seed=seed)
        original = make_problem(base, seed=seed)
        X = problem.sample(3000, torch.Generator().manual_seed(123))
        source, target = problem.source(X).squeeze(-1), problem.target(X).squeeze(-1)
        assert abs(torch.corrcoef(torch.stack([source, target]))[0, 1]) < 0.1
        torch.testing.assert_close(target, original.target(X).squeeze(-1))
        # the original source's scale, another function: not the original source
        Y = original.source(X).squeeze(-1)
        assert 0.8 < source.std() / Y.std() < 1.25
        assert not torch.allclose(source, Y)


@pytest.mark.parametrize("base", ["bohachevsky", "gaussian-bumps", "assumption-gp"])
def test_affine_controls_are_exactly_affine(base):
    for seed in range(3):
        problem = make_problem(f"{base}-affine", seed=seed)
        X = problem.sample(500, torch.Generator().manual_seed(7))
        f, s = problem.target(X).squeeze(-1), problem.source(X).squeeze(-1)
        design = torch.stack([f, torch.ones_like(f)], dim=-1)
        a, b = torch.linalg.lstsq(design, s.unsqueeze(-1)).solution.squeeze(-1)
        torch.testing.assert_close(a * f + b, s, rtol=1e-10, atol=1e-10)
        assert 0.5 <= a.item() <= 2.0
        big = problem.sample(4096, torch.Generator().manual_seed(10_000 + seed))
        f_std = problem.target(big).std()
        torch.testing.assert_close(b.abs(), f_std, rtol=1e-8, atol=1e-10)
        assert problem.name == f"{base}-affine" and "CONTROL" in problem.description


@pytest.mark.parametrize("base", ["bohachevsky", "gaussian-bumps", "assumption-gp"])
def test_identical_references_have_the_target_as_their_source(base):
    for seed in range(2):
        problem = make_problem(f"{base}-identical", seed=seed)
        original = make_problem(base, seed=seed)
        X = problem.sample(200, torch.Generator().manual_seed(5))
        assert torch.equal(problem.source(X), problem.target(X))
        assert torch.equal(problem.target(X), original.target(X))
        # the affine control of the same seed is this source in other units
        affine = make_problem(f"{base}-affine", seed=seed)
        assert torch.equal(affine.target(X), problem.target(X))
        assert problem.n_source == affine.n_source == original.n_source
        assert problem.name == f"{base}-identical"
        assert "REFERENCE" in problem.description


def _pair_correlations(pairs, dim):
    from botorch_transfer.test_functions.hpo_pairs import rank_correlation

    rhos = {}
    for name in pairs:
        problem = make_problem(name)
        U = problem.sample(500, torch.Generator().manual_seed(3))
        s, t = problem.source(U).squeeze(-1), problem.target(U).squeeze(-1)
        rhos[name] = rank_correlation(s, t)
        stated = float(problem.description.rsplit("rank correlation ", 1)[1])
        assert abs(stated - rhos[name]) < 0.1  # the description's 2000-point value
        assert problem.dim == dim and problem.n_source == 300
    return rhos


def test_lcbench_pairs_span_the_range_of_agreement():
    yahpo_available()
    from botorch_transfer.test_functions.hpo_pairs import LCBENCH_PAIRS

    rhos = _pair_correlations(LCBENCH_PAIRS, dim=7)
    assert rhos["lcbench-pair-strong"] > 0.9 and abs(rhos["lcbench-pair-none"]) < 0.15
    assert rhos["lcbench-pair-negative"] < -0.2


def test_xgboost_pairs_are_strongly_and_weakly_related_in_percent():
    yahpo_available("rbv2_xgboost")
    from botorch_transfer.test_functions.hpo_pairs import XGBOOST_PAIRS
    from botorch_transfer.test_functions.yahpo import YahpoSurrogate

    rhos = _pair_correlations(XGBOOST_PAIRS, dim=13)
    assert rhos["xgboost-pair-strong"] > 0.9
    assert 0.15 < rhos["xgboost-pair-weak"] < 0.45
    # the objective is the surrogate's accuracy in percent, the target task's
    problem = make_problem("xgboost-pair-weak")
    U = problem.sample(5, torch.Generator().manual_seed(4))
    raw = YahpoSurrogate("rbv2_xgboost", "acc")("40981", U)
    assert torch.allclose(problem.target(U), 100 * raw, rtol=0, atol=1e-12)
    assert "rbv2_xgboost" in problem.description


@pytest.mark.parametrize("name", ["bohachevsky", "gaussian-bumps"])  # grid, box
def test_a_problem_on_a_device_draws_the_same_points_there(name, device):
    problem = make_problem(name)
    on_device = problem.with_domain_on(device)
    assert on_device.bounds.device.type == device.type
    assert problem.bounds.device.type == "cpu"  # the original is left alone
    drawn = on_device.sample(7, torch.Generator().manual_seed(3))
    assert drawn.device.type == device.type and drawn.dtype == torch.float64
    assert torch.equal(drawn.cpu(), problem.sample(7, torch.Generator().manual_seed(3)))
    if problem.grid is not None:
        assert on_device.grid.device.type == device.type
        assert torch.equal(on_device.grid.cpu(), problem.grid)
        # a grid not built yet is built on the device
        unbuilt = dataclasses.replace(problem, _grid=None).with_domain_on(device)
        assert unbuilt.grid.device.type == device.type
        assert torch.equal(unbuilt.grid.cpu(), problem.grid)
    assert on_device.target is problem.target  # the objectives stay on the CPU
