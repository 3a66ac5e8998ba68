import math

import numpy as np
import pytest
import torch

from botorch_transfer import beta_t


def test_beta_t_matches_theorem_1():
    # beta_t = 2 log(|D| t^2 pi^2 / (6 rho))
    for t, size, rho in [(1, 14400, 0.1), (7, 100, 0.05), (30, 1, 0.5)]:
        assert beta_t(t, size, rho) == pytest.approx(
            2 * math.log(size * t * t * math.pi**2 / (6 * rho))
        )
    assert beta_t(2, 100) > beta_t(1, 100)  # grows with t


@pytest.mark.parametrize(
    "args, match",
    [
        ((0, 10, 0.1), "`t`"),
        ((1.5, 10, 0.1), "`t`"),
        ((1, 0, 0.1), "`domain_size`"),
        ((1, 10, 1.0), "`rho`"),
        ((1, 10, 0.0), "`rho`"),
    ],
)
def test_beta_t_rejects_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        beta_t(*args)


def test_beta_t_accepts_integer_like_scalars():
    expected = beta_t(3, 100, 0.1)
    for t, size in [
        (np.int64(3), np.int32(100)),
        (torch.tensor(3), torch.tensor(100)),
        (np.array(3), 100),
    ]:
        assert beta_t(t, size, 0.1) == pytest.approx(expected, rel=1e-15)
    assert beta_t(3, 100, np.float32(0.1)) == pytest.approx(expected, rel=1e-6)
    assert beta_t(3, 100, torch.tensor(0.1, dtype=torch.float64)) == expected
    for t in (True, 3.0, torch.tensor(3.0), torch.tensor([3]), "3"):
        with pytest.raises((TypeError, ValueError), match="`t` must be an integer"):
            beta_t(t, 100)


def test_beta_t_of_a_huge_domain_is_computed_with_logs():
    # |D| = 2^2000 (e.g. 2000 binary inputs) overflows a float
    size = 2**2000
    expected = 2 * (2000 * math.log(2) + math.log(9 * math.pi**2 / (6 * 0.1)))
    assert beta_t(3, size, 0.1) == pytest.approx(expected, rel=1e-12)
    assert beta_t(10**6, 10**300, 0.1) == pytest.approx(
        2 * (300 * math.log(10) + 12 * math.log(10) + math.log(math.pi**2 / 0.6))
    )
