import math

import pytest
import torch

from botorch_transfer.benchmarks.problems import PROBLEMS, SHILTON_SHIFTS, make_problem


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
