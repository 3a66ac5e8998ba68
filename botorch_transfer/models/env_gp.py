r"""Env-GP: envelope-stretching transfer (Shilton et al. 2017, Sec. 3.1, eq. 5).

One exact GP with one kernel over pooled source and target data. Source points
are treated as observations of the *target* function with a larger ("stretched")
noise ``sigma_s^2 >= sigma'^2`` that absorbs the source/target difference; target
points carry their own noise ``sigma_a^2``::

    Q = [[K_S + sigma_s^2 I, K_SA], [K_AS, K_A + sigma_a^2 I]]
    mu(x) = m(x) + [k_S(x); k_A(x)]^T Q^{-1} ([y_S; y_A] - m)
    sigma^2(x) = k(x, x) - [k_S(x); k_A(x)]^T Q^{-1} [k_S(x); k_A(x)]

By default each source task ``k`` is also read through a learned affine map,
``y_S = a_k f(x_S) + c_k + eps`` (scale ``a_k``, offset ``c_k``; the target keeps
``a = 1, c = 0``), so the blocks above become ``a_k a_l K_S``, ``a_k K_SA`` and the
source mean ``a_k m + c_k``. This is ours, not the paper's: without it, a source that
is the target plus a constant cannot be absorbed by white stretch noise, and fitting
explains the target's own observations away as target noise (the posterior was off by
the offset at the target's data with sd <= 0.06). A scale near 0 lets the fit ignore
an unrelated source. ``source_map="identity"`` is the paper's eq. 5 exactly.

Cost: an ``(N + T)``-sized exact GP, re-fitted every BO iteration; with
``inference="low_rank"`` FITC over ``num_inducing`` source points, and with a kernel
fitted once on the source and frozen (Shilton et al. keep theirs fixed;
:func:`~botorch_transfer.models.pooled.source_fitted_kernel`) a fit that moves only the
stretch, the map and the mean (N=2,000: about 0.5 s an iteration on 2 cores).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import torch
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import Likelihood
from gpytorch.means import Mean
from torch import Tensor

from botorch_transfer.data import TaskData
from botorch_transfer.models.base import TrainingData
from botorch_transfer.models.likelihoods import (
    TaskIndexedGaussianLikelihood,
    TaskIndexedNoise,
    learned_noise,
)
from botorch_transfer.models.pooled import LowRankInference, PooledTransferGP
from botorch_transfer.models.task_column import TaskColumn


class EnvGP(PooledTransferGP):
    r"""Envelope-stretching transfer GP over pooled source and target data.

    Each source task ``k`` gets a noise level ``sigma_s,k^2``: learned by
    ``fit_gpytorch_mll`` (with the kernel and the target noise) as the source's own
    noise (``TaskData.Yvar``, or 0 when unknown) plus a learned stretch, so it can
    never fall below the source's noise; or fixed by ``source_noise``.

    ``train_inputs``/``train_targets`` are the pooled GP's data: ``(X, noise_index)``
    and outcomes of the source points followed by the target points (model units).
    The target data in the user's units are ``target_X``, ``target_Y`` and
    ``target_Yvar``; give BoTorch's acquisition functions
    ``best_f=model.target_Y.max()`` and ``X_baseline=model.target_X``.

    Args:
        train_X: ``batch_shape x n x d`` target inputs (``n`` may be 0).
        train_Y: ``batch_shape x n x 1`` target observations.
        train_Yvar: Optional known target noise variances; else ``sigma_a^2`` is
            learned.
        source: A ``TaskData`` or a list of them (keyword; one stretched noise per
            task).
        likelihood: Default: a task-indexed likelihood with one learned stretch per
            source task and the target noise (see ``source_noise``).
        covar_module: The kernel ``k`` shared by source and target data (default: a
            scaled RBF kernel with BoTorch's lengthscale prior). A frozen kernel
            (no parameter requires a gradient, e.g. from
            :func:`~botorch_transfer.models.pooled.source_fitted_kernel`) is the
            paper's fixed kernel: the fit then moves the stretch, the source map,
            the mean and the target noise only, and ``"low_rank"`` factors the
            kernel once per model.
        mean_module: Prior mean (default ``ConstantMean``; the paper uses zero).
        input_transform: Input transform, applied as ``SingleTaskGP`` applies it.
        outcome_transform: ``None`` or ``Standardize(m=1)``, fitted on source and
            target outcomes together and applied to both.
        source_noise: ``None`` (learn ``sigma_s^2``) or a float (or one per source
            task) fixing ``sigma_s^2`` in the user's units; it must not be below the
            task's own ``Yvar``.
        source_map: ``"affine"`` (default): each source task is the target function
            through a learned scale and offset (``source_scale``,
            ``source_offset``, initialized at 1 and 0, fitted with the kernel), so a
            source in other units or with an offset is used, and an unrelated one
            can be weighted down. ``"identity"``: Shilton et al.'s Env-GP (eq. 5),
            the source observes the target function itself.
        task_column: The layout of Ax's transfer-learning queries (see
            :class:`~botorch_transfer.models.task_column.TaskColumn`; set by
            ``construct_inputs``).
        inference: ``"exact"`` (default): an exact GP, ``O((N + T)^3)`` per fit
            step. A :class:`~botorch_transfer.models.pooled.LowRankInference`
            (``"low_rank"``: its defaults): FITC inference with ``num_inducing``
            source points (farthest-point selected) and all target points as
            inducing inputs, ``O((N + T) m^2)`` per step; exact when ``N <=
            num_inducing`` (see :mod:`~botorch_transfer.models.utils.low_rank`).
            (``num_inducing`` as a keyword is deprecated.)

    Example:
        >>> model = EnvGP(train_X, train_Y, source=TaskData(X_src, Y_src))
        >>> fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        >>> acqf = UpperConfidenceBound(model, beta=0.3)
    """

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        train_Yvar: Tensor | None = None,
        likelihood: Likelihood | None = None,
        covar_module: Kernel | None = None,
        mean_module: Mean | None = None,
        outcome_transform: OutcomeTransform | None = None,
        input_transform: InputTransform | None = None,
        *,
        source: TaskData | Sequence[TaskData],
        source_noise: float | Sequence[float] | None = None,
        source_map: Literal["affine", "identity"] = "affine",
        task_column: TaskColumn | None = None,
        inference: Literal["exact", "low_rank"] | LowRankInference = "exact",
        **deprecated: Any,
    ) -> None:
        self._set_inference(inference, deprecated)
        if source_map not in ("affine", "identity"):
            raise ValueError(
                f"`source_map` must be 'affine' or 'identity', got {source_map!r}."
            )
        self.source_noise = source_noise
        self.source_map = source_map
        super().__init__(
            train_X,
            train_Y,
            train_Yvar,
            transfer=source,
            task_column=task_column,
            **deprecated,
            likelihood=likelihood,
            covar_module=covar_module,
            mean_module=mean_module,
            input_transform=input_transform,
            outcome_transform=outcome_transform,
        )

    def _prepare_transfer(self, transfer: Any, train_X: Tensor) -> list[TaskData]:
        sources = super()._prepare_transfer(transfer, train_X)
        if self.source_noise is None:
            return sources
        levels = self.source_noise
        n_tasks = len(sources)
        if isinstance(levels, (int, float)):
            levels = [levels] * n_tasks
        levels = list(levels)
        if len(levels) != n_tasks:
            raise ValueError(
                "`source_noise` must be one float or one per source task "
                f"({n_tasks}), got {len(levels)}."
            )
        for k, (level, s) in enumerate(zip(levels, sources)):
            if not (
                isinstance(level, (int, float)) and math.isfinite(level) and level > 0
            ):
                raise ValueError(
                    f"`source_noise` must be positive finite floats, got {level!r}."
                )
            if s.Yvar is not None and level < float(s.Yvar.max()):
                raise ValueError(
                    f"`source_noise` ({level}) for source {k} is below that task's own "
                    f"noise (max Yvar {float(s.Yvar.max()):.3g}); the envelope can "
                    "only be stretched."
                )
        self._source_noise_levels = levels
        return sources

    def _default_likelihood(
        self, train_X: Tensor, train_Yvar: Tensor | None, transfer: list[TaskData]
    ) -> TaskIndexedGaussianLikelihood:
        r"""One learned stretch per source task (none when ``source_noise`` fixes it)
        and the learned target noise (none when ``train_Yvar`` is known)."""
        batch_shape = train_X.shape[:-2]
        learned = [
            None
            if self.source_noise is not None
            else learned_noise(batch_shape, prior=False)
            for _ in transfer
        ]
        learned.append(learned_noise(batch_shape) if train_Yvar is None else None)
        return TaskIndexedGaussianLikelihood(TaskIndexedNoise(learned))

    def _build_modules(
        self, transfer: list[TaskData], train_X: Tensor, **kwargs
    ) -> None:
        super()._build_modules(transfer, train_X=train_X, **kwargs)
        if self.source_noise is not None:
            levels = torch.tensor(
                self._source_noise_levels, dtype=train_X.dtype, device=train_X.device
            )
            fixed = levels[self.source_task] / self.output_scale**2
        else:  # the source's own noise; the learned stretch sits on top
            fixed = torch.nan_to_num(self.source_Yvar, nan=0.0)
        self.register_buffer("source_fixed_noise", fixed, persistent=False)
        if self.source_map == "affine":
            shape = (*train_X.shape[:-2], len(transfer))
            like = dict(dtype=train_X.dtype, device=train_X.device)
            self.source_scale = torch.nn.Parameter(torch.ones(shape, **like))
            self.source_offset = torch.nn.Parameter(torch.zeros(shape, **like))

    def _row_affine(self, noise_index: Tensor) -> tuple[Tensor, Tensor] | None:
        r"""``a_k f + c_k`` at points of source task ``k`` (``source_map="affine"``)."""
        if self.source_map == "identity":
            return None
        return self._task_affine(noise_index[..., 0])

    def _task_affine(self, task: Tensor) -> tuple[Tensor, Tensor]:
        r"""Each point's scale and offset by its task index (the target: 1, 0)."""
        scale = torch.cat(
            [self.source_scale, torch.ones_like(self.source_scale[..., :1])], dim=-1
        )
        offset = torch.cat(
            [self.source_offset, torch.zeros_like(self.source_offset[..., :1])],
            dim=-1,
        )
        batch = torch.broadcast_shapes(scale.shape[:-1], task.shape[:-1])
        index = task.expand(*batch, task.shape[-1])
        return (
            scale.expand(*batch, scale.shape[-1]).gather(-1, index),
            offset.expand(*batch, offset.shape[-1]).gather(-1, index),
        )

    def _training_data(self, X: Tensor, Y: Tensor, Yvar: Tensor) -> TrainingData:
        r"""Pool ``[source; target]`` with per-point noise
        ``[sigma_s^2; sigma_a^2]``."""
        return self._pooled_training_data(self.source_Y, self.source_fixed_noise)
