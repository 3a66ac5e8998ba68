r"""Full-batch L-BFGS that keeps the best point it evaluated.

The empirical priors' base GPs are fitted by torch's L-BFGS with a strong-Wolfe line
search. A trial point of the line search can leave the region where the covariance is
positive definite (its Cholesky factorization fails): the fit then ends at the best
point evaluated before, rather than failing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor


def minimize_keeping_best(
    loss_fn: Callable[[], Tensor], params: Sequence[Tensor], max_iter: int
) -> float:
    r"""Minimize ``loss_fn`` over ``params`` in place with L-BFGS.

    Args:
        loss_fn: The scalar loss at the current values of ``params``.
        params: The tensors to optimize; they must require gradients.
        max_iter: L-BFGS iterations.

    Returns:
        The lowest finite loss evaluated (``inf`` if none was); ``params`` hold the
        point where it was evaluated.
    """
    params = list(params)
    optimizer = torch.optim.LBFGS(
        params, lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe"
    )
    best_loss, best_values = math.inf, None

    def closure() -> Tensor:
        nonlocal best_loss, best_values
        optimizer.zero_grad()
        loss = loss_fn()
        loss.backward()
        if loss.item() < best_loss:  # NaN compares False: never kept
            best_loss = loss.item()
            best_values = [p.detach().clone() for p in params]
        return loss

    with torch.enable_grad():
        try:
            optimizer.step(closure)
        except torch.linalg.LinAlgError:
            pass  # a line-search point left the positive-definite region
    if best_values is not None:  # the best point evaluated, not the last
        with torch.no_grad():
            for p, value in zip(params, best_values):
                p.copy_(value)
    return best_loss
