r"""L-BFGS that keeps the best point it evaluated."""

import torch

from botorch_transfer.priors.hyperbo.lbfgs import minimize_keeping_best


def test_minimizes_a_quadratic_to_its_minimum():
    x = torch.tensor([3.0, -2.0], dtype=torch.float64, requires_grad=True)
    target = torch.tensor([1.0, 0.5], dtype=torch.float64)
    loss = minimize_keeping_best(lambda: (x - target).pow(2).sum(), [x], max_iter=50)
    torch.testing.assert_close(x.detach(), target, atol=1e-8, rtol=0)
    assert 0.0 <= loss < 1e-14


def test_a_failed_factorization_ends_at_the_best_point_evaluated():
    x = torch.tensor([3.0], dtype=torch.float64, requires_grad=True)
    calls = []

    def loss_fn():
        calls.append(x.detach().clone())
        if len(calls) > 1:  # the line search's first trial point is not PD
            torch.linalg.cholesky(-torch.eye(2, dtype=torch.float64))
        return (x - 1.0).pow(2).sum()

    loss = minimize_keeping_best(loss_fn, [x], max_iter=20)
    assert len(calls) == 2
    torch.testing.assert_close(x.detach(), calls[0], atol=0, rtol=0)
    assert loss == 4.0
