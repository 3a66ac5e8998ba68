import math

import pytest

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
