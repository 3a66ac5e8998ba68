r"""A source task's GP, fitted once and held by the user across BO iterations.

A BO loop rebuilds its model every iteration on the new target data; the source
data do not change. :func:`fit_source_gp` fits a ``SingleTaskGP`` with BoTorch's
defaults on a source once and returns it as a :class:`FittedSourceGP`, which the
loop passes as ``source=`` to every model it builds. The fitted GP keeps what the
transfer models derive from it (its frozen posterior factor, its skill), computed
on first use and recomputed only if its hyperparameters or data change: nothing is
kept anywhere else, and a ``TaskData`` passed as ``source=`` is fitted anew by each
model built on it.

Example:
    >>> transform = Normalize(d, bounds=bounds)
    >>> source_gp = fit_source_gp(TaskData(X_src, Y_src), transform)  # once
    >>> for _ in range(2):  # each BO iteration
    ...     model = RankWeightedTransferGP(
    ...         train_X, train_Y, source=source_gp, input_transform=transform
    ...     )
"""

from __future__ import annotations

import copy
from typing import Any

from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms.input import InputTransform
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor

from botorch_transfer.data import TaskData
from botorch_transfer.models.frozen_source import (
    FIT_MAX_POINTS,
    exact_gp_source_posterior,
    exact_gp_state,
    fit_subset_rows,
)
from botorch_transfer.models.source_posterior import SourcePosterior
from botorch_transfer.models.utils.caching import same_tensors
from botorch_transfer.models.utils.source_skill import source_skill


class FittedSourceGP(SingleTaskGP):
    r"""A ``SingleTaskGP`` fitted on a source task and frozen (built by
    :func:`fit_source_gp`), which keeps what transfer models derive from it.

    Its frozen posterior (:meth:`as_source_posterior`, a low-rank factor of ``O(N
    r^2)`` cost) and its leave-input-out skill (:attr:`skill`) are computed on first
    use and kept on this object while its parameters, buffers and training data hold
    the same values; copies and pickles leave them behind.

    Attributes:
        name: The source's name (``TaskData.name``), by which models that take
            several sources report its weight; ``None`` if unnamed.
    """

    name: str | None = None

    def _kept(self, key: Any, compute: Any) -> Any:
        r"""``compute()``, kept under ``key`` while the GP's state is unchanged."""
        state = exact_gp_state(self)
        kept = self.__dict__.get("_kept_values", {})
        hit = kept.get(key)
        if hit is not None and same_tensors(hit[0], state):
            return hit[1]
        value = compute()
        self.__dict__["_kept_values"] = {
            **kept,
            key: ([t.clone() for t in state], value),
        }
        return value

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_kept_values", None)  # derived, possibly large: rebuilt on use
        return state

    @property
    def skill(self) -> float:
        r"""The GP's leave-input-out ``R^2`` on its own data
        (:func:`~botorch_transfer.models.utils.source_skill.source_skill`), kept."""
        return self._kept("skill", lambda: source_skill(self))

    def as_source_posterior(
        self, max_rank: int = 1000, tolerance: float = 1e-10, progress: bool = True
    ) -> SourcePosterior:
        r"""The GP's posterior as a frozen source in its user units (a copy of the
        one kept for these settings; see
        :func:`~botorch_transfer.models.source_posterior.exact_gp_source_posterior`).

        Args:
            max_rank: See :class:`~botorch_transfer.models.GPSourcePosterior`.
            tolerance: See :class:`~botorch_transfer.models.GPSourcePosterior`.
            progress: See :class:`~botorch_transfer.models.GPSourcePosterior`.

        Returns:
            The source posterior (the caller may set its output map).
        """
        posterior = self._kept(
            ("posterior", max_rank, tolerance),
            lambda: exact_gp_source_posterior(
                self, max_rank=max_rank, tolerance=tolerance, progress=progress
            ),
        )
        return copy.deepcopy(posterior)


def fit_source_gp(
    source: TaskData, input_transform: InputTransform | None = None
) -> FittedSourceGP:
    r"""A ``SingleTaskGP`` with BoTorch's defaults fitted on ``source``, frozen.

    Above ``FIT_MAX_POINTS`` (1,000) points the hyperparameters are fitted on a
    fixed random subset of that many points (an exact fit costs ``O(N^3)`` per
    optimizer step) and the GP conditions on all points. The same data give the
    same fit.

    Args:
        source: The source observations (noise learned when ``Yvar`` is ``None``).
        input_transform: The input transform of the models it will be passed to
            (e.g. ``Normalize(d, bounds=bounds)``; a copy is used).

    Returns:
        The fitted source GP, in eval mode, its parameters frozen: pass it as
        ``source=`` to the models of every BO iteration.

    Example:
        >>> source_gp = fit_source_gp(TaskData(X_src, Y_src, name="last month"))
        >>> model = RankWeightedTransferGP(train_X, train_Y, source=source_gp)
    """
    if not isinstance(source, TaskData):
        raise TypeError(f"`source` must be a TaskData, got {type(source).__name__}.")
    if source.n == 0:
        raise ValueError("`source` has no observations (n=0): there is nothing to fit.")

    def build(rows: Tensor | None) -> FittedSourceGP:
        pick = slice(None) if rows is None else rows
        Yvar = None if source.Yvar is None else source.Yvar[pick]
        return FittedSourceGP(
            source.X[pick],
            source.Y[pick],
            Yvar,
            input_transform=copy.deepcopy(input_transform),
        )

    rows = fit_subset_rows(source.X.shape[-2], FIT_MAX_POINTS, source.X.device)
    model = build(rows)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    if rows is not None:  # the fitted hyperparameters on all points
        full = build(None)
        parameters = dict(model.named_parameters())
        state = {k: v for k, v in model.state_dict().items() if k in parameters}
        full.load_state_dict(state, strict=False)
        model = full
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    model.name = source.name
    return model
