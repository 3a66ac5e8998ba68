r"""Env-GP: envelope-stretching transfer (Shilton et al. 2017, Sec. 3.1, eq. 5).

One exact GP with one kernel over pooled source and target data. Source points
are treated as observations of the *target* function with a larger ("stretched")
noise ``sigma_s^2 >= sigma'^2`` that absorbs the source/target difference; target
points carry their own noise ``sigma_a^2``::

    Q = [[K_S + sigma_s^2 I, K_SA], [K_AS, K_A + sigma_a^2 I]]
    mu(x) = m(x) + [k_S(x); k_A(x)]^T Q^{-1} ([y_S; y_A] - m)
    sigma^2(x) = k(x, x) - [k_S(x); k_A(x)]^T Q^{-1} [k_S(x); k_A(x)]

Cost: an ``(N + T)``-sized exact GP, re-fitted every BO iteration.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from gpytorch.kernels import Kernel
from gpytorch.means import Mean
from torch import Tensor

from botorch_transfer.data import TaskData
from botorch_transfer.models.base import (
    GroupedNoise,
    PooledTransferGP,
    as_source_list,
    fit_shared_outcome_affine,
    learned_noise,
    pool_source_tasks,
    validate_training_data,
)


class EnvGP(PooledTransferGP):
    r"""Envelope-stretching transfer GP over pooled source and target data.

    Each source task ``k`` gets a noise level ``sigma_s,k^2``: learned by
    ``fit_gpytorch_mll`` (with the kernel and the target noise) as the source's own
    noise (``TaskData.Yvar``, or 0 when unknown) plus a learned stretch, so it can
    never fall below the source's noise; or fixed by ``source_noise``.

    Args:
        train_X: ``batch_shape x n x d`` target inputs (``n`` may be 0).
        train_Y: ``batch_shape x n x 1`` target observations.
        source: A ``TaskData`` or a list of them (one stretched noise per task).
        train_Yvar: Optional known target noise variances; else ``sigma_a^2`` is learned.
        covar_module: The kernel ``k`` shared by source and target data (default: a
            scaled RBF kernel with BoTorch's lengthscale prior).
        source_noise: ``None`` (learn ``sigma_s^2``) or a float (or one per source
            task) fixing ``sigma_s^2`` in the user's units; it must not be below the
            task's own ``Yvar``.
        mean_module: Prior mean (default ``ConstantMean``; the paper uses zero).
        input_transform: Input transform, applied as ``SingleTaskGP`` applies it.
        outcome_transform: ``None`` or ``Standardize(m=1)``, fitted on source and
            target outcomes together and applied to both.

    Example:
        >>> model = EnvGP(train_X, train_Y, source=TaskData(X_src, Y_src))
        >>> fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        >>> acqf = UpperConfidenceBound(model, beta=0.3)
    """

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        source: TaskData | Sequence[TaskData],
        train_Yvar: Tensor | None = None,
        covar_module: Kernel | None = None,
        source_noise: float | Sequence[float] | None = None,
        mean_module: Mean | None = None,
        input_transform: InputTransform | None = None,
        outcome_transform: OutcomeTransform | None = None,
    ) -> None:
        validate_training_data(train_X, train_Y, train_Yvar)
        sources = as_source_list(source, train_X, allow_models=False)
        scale, offset = fit_shared_outcome_affine(outcome_transform, sources, train_Y)
        X_s, Y_s, Yvar_s, task = pool_source_tasks(sources, scale, offset)
        n_tasks = len(sources)
        if source_noise is not None:
            levels = [source_noise] * n_tasks if isinstance(source_noise, (int, float)) else list(source_noise)
            if len(levels) != n_tasks:
                raise ValueError(f"`source_noise` must be one float or one per source task ({n_tasks}), got {len(levels)}.")
            for k, (level, s) in enumerate(zip(levels, sources)):
                if not (isinstance(level, (int, float)) and math.isfinite(level) and level > 0):
                    raise ValueError(f"`source_noise` must be positive finite floats, got {level!r}.")
                if s.Yvar is not None and level < float(s.Yvar.max()):
                    raise ValueError(
                        f"`source_noise` ({level}) for source {k} is below that task's own noise "
                        f"(max Yvar {float(s.Yvar.max()):.3g}); the envelope can only be stretched."
                    )
            fixed_s = torch.tensor(levels, dtype=train_X.dtype, device=train_X.device)[task] / scale**2
        else:
            fixed_s = torch.nan_to_num(Yvar_s, nan=0.0)
        batch_shape = train_X.shape[:-2]
        learned = [
            None if source_noise is not None else learned_noise(batch_shape, prior=False)
            for _ in range(n_tasks)
        ]
        learned.append(learned_noise(batch_shape) if train_Yvar is None else None)
        noise = GroupedNoise(group=task, fixed=fixed_s, learned=learned, target_group=n_tasks)
        self._init_pooled(X_s, Y_s, noise, mean_module, covar_module, batch_shape)
        self.register_buffer("source_fixed_noise", fixed_s, persistent=False)
        self.register_buffer("source_task", task, persistent=False)
        self._finish_init(train_X, train_Y, train_Yvar, scale, offset, input_transform, outcome_transform)

    def _set_target_data(self, X: Tensor, Y: Tensor, Yvar: Tensor) -> None:
        r"""Pool ``[source; target]`` with per-point noise ``[sigma_s^2; sigma_a^2]``."""
        self._store_target_data(X, Y, Yvar)
        self._set_pooled_training_data(self.source_Y, self.source_fixed_noise, self.source_task)
