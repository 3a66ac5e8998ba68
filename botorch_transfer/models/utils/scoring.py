r"""What the guard's comparison of a transfer model with a target-only GP rests on.

:class:`~botorch_transfer.models.guard.TransferGuard` scores models by the log
predictive density of the target's observations (:func:`normal_log_density`), and
carries a previous guard's prequential scores over only to a model that transfers
from the same data: :func:`transfer_fingerprint` summarizes the data behind a
model's ``source`` or ``prior`` argument (every source-conditioned GP keeps it),
:func:`same_fingerprint` compares two summaries. :class:`TargetLogDensityMixin`
gives a model the leave-one-out and one-step-ahead log densities of its target
observations, each predicted by the model rebuilt without it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor
from torch.nn import Module

from botorch_transfer.data import TaskData


def normal_log_density(y: Tensor, mean: Tensor, variance: Tensor) -> Tensor:
    r"""Log density of ``N(mean, variance)`` at ``y`` (elementwise)."""
    return -0.5 * (
        math.log(2 * math.pi) + variance.log() + (y - mean).pow(2) / variance
    )


def transfer_fingerprint(transfer: Any) -> list[tuple[tuple[int, ...], float, float]]:
    r"""A summary of the data behind a transfer input, to tell whether two models
    transfer from the same sources or prior.

    Each tensor of the input (a ``TaskData``'s ``X``, ``Y``, ``Yvar``; a model's or
    prior's state and training data) gives its shape, sum and sum of squares.

    Args:
        transfer: A model's ``source`` (one or a list) or ``prior`` argument.

    Returns:
        One ``(shape, sum, sum of squares)`` per tensor.
    """
    items = transfer if isinstance(transfer, (list, tuple)) else [transfer]
    tensors: list[Tensor] = []
    summary: list[tuple[tuple[int, ...], float, float]] = []
    for item in items:
        origin = getattr(item, "origin_fingerprint", None)
        if origin is not None:
            # a model's frozen source (``frozen_source()``) stands for the sources
            # that model was built from: a rebuilt model transfers from the same
            summary += origin
        elif isinstance(item, TaskData):
            tensors += [t for t in (item.X, item.Y, item.Yvar) if t is not None]
        elif isinstance(item, Module):
            tensors += [t for t in item.state_dict().values() if isinstance(t, Tensor)]
            # an exact GP holds a tuple of inputs; a source posterior a tensor
            inputs = getattr(item, "train_inputs", None)
            data = [inputs] if isinstance(inputs, Tensor) else [*(inputs or ())]
            data.append(getattr(item, "train_targets", None))
            tensors += [t for t in data if isinstance(t, Tensor)]
    with torch.no_grad():
        return summary + [
            (tuple(t.shape), t.double().sum().item(), t.double().pow(2).sum().item())
            for t in tensors
            if t.is_floating_point()
        ]


def same_fingerprint(a: list[tuple], b: list[tuple], rtol: float = 1e-5) -> bool:
    r"""Whether two :func:`transfer_fingerprint` summaries are of the same data (up
    to a change of dtype)."""
    if len(a) != len(b):
        return False
    for (shape_a, *values_a), (shape_b, *values_b) in zip(a, b, strict=True):
        if shape_a != shape_b:
            return False
        for x, y in zip(values_a, values_b, strict=True):
            if not math.isclose(x, y, rel_tol=rtol, abs_tol=rtol):
                return False
    return True


class TargetLogDensityMixin:
    r"""Log predictive densities of a model's target observations, each from the
    model rebuilt on other target points with the same hyperparameters.

    For models that rebuild everything derived from their target data in
    ``_set_target_data(X, Y, Yvar)`` (internal target data ``_target_X``,
    ``_target_Y``, ``_target_Yvar`` in model units) and predict with ``posterior``
    (the source-conditioned GPs).
    """

    def loo_log_density(self) -> Tensor:
        r"""Leave-one-out log predictive density of each target observation, in the
        user's units.

        Each point ``i`` is predicted (with its observation noise) by the model
        rebuilt on the other target points with the same hyperparameters: everything
        derived from the target data (residuals, corrections, ensemble weights) is
        rebuilt without it, so no target observation predicts itself. The model is
        restored afterwards.

        Returns:
            ``n`` log densities (a non-batched model with at least 2 target points).

        Example:
            >>> mll = ExactMarginalLogLikelihood(model.likelihood, model)
            >>> mll = fit_gpytorch_mll(mll)
            >>> score = model.loo_log_density().mean()  # compare with a target-only GP
        """
        n = self._target_X.shape[-2]
        if n < 2:
            raise ValueError(f"Leave-one-out needs >= 2 target points, got {n}.")
        index = torch.arange(n, device=self._target_X.device)
        return self._log_densities_rebuilt((index != i, i) for i in range(n))

    def sequential_log_density(self, start: int = 1) -> Tensor:
        r"""One-step-ahead log predictive density of each target observation from
        ``start`` on, in the user's units and in the order of the target data.

        Point ``i`` is predicted (with its observation noise) by the model rebuilt on
        the target points before it, ``0 ... i - 1``, with the same hyperparameters:
        the prequential score of the run as the model is fitted now (in a BO loop the
        data are in query order, so each query is scored by how well the points
        observed before it predicted it). The model is restored afterwards.

        Args:
            start: The first point scored (>= 1: a transfer model predicts from at
                least one target point).

        Returns:
            ``n - start`` log densities (a non-batched model with more than
            ``start`` target points; an empty tensor otherwise).

        Example:
            >>> mll = ExactMarginalLogLikelihood(model.likelihood, model)
            >>> mll = fit_gpytorch_mll(mll)
            >>> score = model.sequential_log_density(start=2).sum()
        """
        if isinstance(start, bool) or not isinstance(start, int) or start < 1:
            raise ValueError(f"`start` must be an int >= 1, got {start!r}.")
        index = torch.arange(self._target_X.shape[-2], device=self._target_X.device)
        return self._log_densities_rebuilt(
            (index[:i], i) for i in range(start, len(index))
        )

    def _log_densities_rebuilt(self, folds: Iterable[tuple[Tensor, int]]) -> Tensor:
        r"""Log predictive density of target point ``i`` under the model rebuilt on
        the target points ``kept`` (same hyperparameters), for each ``(kept, i)`` of
        ``folds``; the model is restored afterwards."""
        if len(self.batch_shape) > 0:
            raise ValueError(
                "Predicting target points from the others needs a non-batched "
                f"model, got batch_shape {tuple(self.batch_shape)}."
            )
        # the internal target data (model units) are what the model rebuilds from
        X, Y, Yvar = self._target_X, self._target_Y, self._target_Yvar
        y_user = self.target_Y.squeeze(-1)
        densities = []
        try:
            with torch.no_grad():
                for kept, i in folds:
                    self._set_target_data(X[kept], Y[kept], Yvar[kept])
                    known = not torch.isnan(Yvar[i])
                    noise = Yvar[i].reshape(1, 1) if known else True
                    post = self.posterior(X[i : i + 1], observation_noise=noise)
                    densities.append(
                        normal_log_density(
                            y_user[i], post.mean.squeeze(), post.variance.squeeze()
                        )
                    )
        finally:
            self._set_target_data(X, Y, Yvar)
        if not densities:
            return y_user.new_empty(0)
        return torch.stack(densities)
