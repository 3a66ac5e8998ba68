r"""What GPs over pooled ``[source; target]`` data share (Env-GP, Diff-GP)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from botorch.models.transforms.input import InputTransform
from gpytorch.distributions import MultivariateNormal
from gpytorch.means import ConstantMean, Mean
from torch import Tensor
from torch.nn import Module

from botorch_transfer.data import TaskData
from botorch_transfer.models.base import (
    SourceConditionedGP,
    TrainingData,
    default_transfer_kernel,
    refuse_pathwise_sampling,
)
from botorch_transfer.models.likelihoods import TaskIndexedGaussianLikelihood
from botorch_transfer.validation import as_source_list


def pool_source_tasks(
    sources: Sequence[TaskData], scale: Tensor, offset: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""Concatenate source tasks in model units.

    Args:
        sources: The source ``TaskData``.
        scale: Output scale of the shared outcome map.
        offset: Output offset of the shared outcome map.

    Returns:
        ``(X, Y, Yvar, task)``: ``N x d`` inputs, ``N`` outcomes and ``N`` noise
        variances in model units (``NaN`` where a task has no ``Yvar``), and the ``N``
        task index of each point.
    """
    nan = float("nan")
    X = torch.cat([s.X for s in sources])
    Y = torch.cat([((s.Y - offset) / scale).squeeze(-1) for s in sources])
    Yvar = torch.cat(
        [
            (s.Yvar / scale**2).squeeze(-1)
            if s.Yvar is not None
            else torch.full((s.n,), nan, dtype=s.X.dtype, device=s.X.device)
            for s in sources
        ]
    )
    task = torch.cat(
        [
            torch.full((s.n,), i, dtype=torch.long, device=s.X.device)
            for i, s in enumerate(sources)
        ]
    )
    return X, Y, Yvar, task


class PooledTransferGP(SourceConditionedGP):
    r"""A source-conditioned GP over pooled ``[source; target]`` data: one prior
    mean, one kernel, and task-indexed noise (the Env-GP/Diff-GP family).

    The GP's inputs are ``(X, noise_index)``: each point carries its task index
    (source tasks ``0 .. K-1``, the target ``K``) and its row in the table of fixed
    per-point noise; the likelihood
    (:class:`~botorch_transfer.models.likelihoods.TaskIndexedNoise`) adds each
    task's learned level. A subclass builds the noise model in
    ``_default_likelihood`` and returns :meth:`_pooled_training_data` from
    ``_training_data``.
    """

    def _prepare_transfer(self, transfer: Any, train_X: Tensor) -> list[TaskData]:
        return as_source_list(transfer, train_X, allow_models=False)

    def _build_modules(
        self,
        transfer: list[TaskData],
        train_X: Tensor,
        covar_module: Module | None,
        mean_module: Mean | None,
        input_transform: InputTransform | None,
    ) -> None:
        if not isinstance(self.likelihood, TaskIndexedGaussianLikelihood):
            raise TypeError(
                f"`likelihood` of a {type(self).__name__} must be a "
                "TaskIndexedGaussianLikelihood (noise per source task and target), got "
                f"{type(self.likelihood).__name__}."
            )
        X_s, Y_s, Yvar_s, task = pool_source_tasks(
            transfer, self.output_scale, self.output_offset
        )
        batch_shape = train_X.shape[:-2]
        self.register_buffer("source_X", X_s, persistent=False)
        self.register_buffer("source_Y", Y_s, persistent=False)
        self.register_buffer("source_Yvar", Yvar_s, persistent=False)
        self.register_buffer("source_task", task, persistent=False)
        self.target_task = len(transfer)
        self.mean_module = (
            mean_module
            if mean_module is not None
            else ConstantMean(batch_shape=batch_shape)
        )
        self.covar_module = (
            covar_module
            if covar_module is not None
            else default_transfer_kernel(X_s.shape[-1], batch_shape=batch_shape)
        )

    def _remap_outcomes(self, old_scale: Tensor, old_offset: Tensor) -> None:
        self.source_Y, self.source_Yvar = self._remapped(
            self.source_Y, self.source_Yvar, old_scale, old_offset
        )

    def _pooled_training_data(
        self, source_targets: Tensor, source_fixed_noise: Tensor
    ) -> TrainingData:
        r"""Pool ``[source; target]`` inputs, targets, task indices and fixed noise.

        Args:
            source_targets: ``batch x N`` targets of the source points.
            source_fixed_noise: ``batch x N`` fixed noise of the source points.

        Returns:
            The pooled training data with inputs ``(X, noise_index)``.
        """
        X, Y, Yvar = self._target_X, self._target_Y, self._target_Yvar
        batch = torch.broadcast_shapes(
            X.shape[:-2], source_targets.shape[:-1], source_fixed_noise.shape[:-1]
        )
        n_source, n_target = self.source_X.shape[0], Y.shape[-1]
        inputs = torch.cat(
            [
                self.source_X.expand(*batch, *self.source_X.shape),
                X.expand(*batch, *X.shape[-2:]),
            ],
            dim=-2,
        )
        targets = torch.cat(
            [source_targets.expand(*batch, n_source), Y.expand(*batch, n_target)],
            dim=-1,
        )
        target_fixed = torch.zeros_like(Y) if self.learns_target_noise else Yvar
        fixed = torch.cat(
            [
                source_fixed_noise.expand(*batch, n_source),
                target_fixed.expand(*batch, n_target),
            ],
            dim=-1,
        )
        target_task = torch.full(
            (n_target,), self.target_task, dtype=torch.long, device=Y.device
        )
        task = torch.cat([self.source_task, target_task])
        index = self.likelihood.noise_covar.set_training_points(task, fixed)
        index = index.expand(*batch, n_source + n_target, 2)
        return TrainingData(inputs=(inputs, index), targets=targets)

    def _test_inputs(self, X: Tensor) -> tuple[Tensor, Tensor]:
        # new target points: the target's task and no fixed noise (row -1)
        index = torch.tensor([self.target_task, -1], device=X.device)
        return X, index.expand(*X.shape[:-1], 2)

    def target_noise(self) -> Tensor:
        r"""The target noise ``sigma_a^2`` at new points (model units)."""
        noise = self.likelihood.noise_covar
        level = noise.level(self.target_task)
        if level is not None:
            return level.squeeze(-1).expand(self.batch_shape)
        if self.num_train == 0:
            raise RuntimeError("No known target noise: the model has no target data.")
        return self._target_Yvar.mean(dim=-1)

    def forward(
        self, x: Tensor, noise_index: Tensor | None = None
    ) -> MultivariateNormal:
        r"""The prior at ``x``; the noise index only enters the likelihood."""
        return super().forward(x)


# BoTorch's posterior sampler reads one input tensor and the training noise by
# position; kernel-feature prior paths are left to BoTorch, as before
refuse_pathwise_sampling(
    PooledTransferGP, "its inputs carry a noise index", prior_paths=False
)
