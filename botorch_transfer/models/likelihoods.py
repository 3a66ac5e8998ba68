r"""The likelihoods of the package's models, built in one place from BoTorch's helpers.

Two kinds of noise occur:

- *target noise* of a single-task GP (DeltaBO's residual GP, cm-BO's target GP):
  learned with BoTorch's default ``LogNormal(-4, 1)`` prior, known per point
  (``train_Yvar``), or both (a learned level on top of known per-point variances,
  e.g. DeltaBO's source variance at the target points);
- *task-indexed noise* of a GP over pooled ``[source; target]`` data (Env-GP,
  Diff-GP): each point's noise is a fixed per-point part plus the learned level of
  its task. As in BoTorch's ``MultiTaskGP`` (GPyTorch's
  ``HadamardGaussianLikelihood``), the task index travels *with the data*: the
  pooled GP's inputs are ``(X, noise_index)``, so a likelihood call on any points
  gets each point's own noise, never one decided by counting points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from botorch.models.utils.gpytorch_modules import (
    MIN_INFERRED_NOISE_LEVEL,
    get_gaussian_likelihood_with_lognormal_prior,
)
from gpytorch.constraints import GreaterThan
from gpytorch.likelihoods import (
    FixedNoiseGaussianLikelihood,
    GaussianLikelihood,
    _GaussianLikelihoodBase,
)
from gpytorch.likelihoods.noise_models import HomoskedasticNoise, Noise
from gpytorch.priors import LogNormalPrior
from linear_operator.operators import DiagLinearOperator
from torch import Tensor


def learned_noise(
    batch_shape: torch.Size, prior: bool = True, initial_value: float = 0.1
) -> HomoskedasticNoise:
    r"""A learned homoscedastic noise level.

    Args:
        batch_shape: Batch shape of the level.
        prior: Use BoTorch's default noise model (``LogNormal(-4, 1)`` prior, its
            mode as initial value). ``False`` for levels that may legitimately be
            large, such as an Env-GP stretch: no prior, ``initial_value``.
        initial_value: Initial level when ``prior=False``.

    Returns:
        A ``HomoskedasticNoise`` constrained to ``>= 1e-4``.
    """
    if prior:
        return get_gaussian_likelihood_with_lognormal_prior(batch_shape).noise_covar
    return HomoskedasticNoise(
        noise_constraint=GreaterThan(
            MIN_INFERRED_NOISE_LEVEL, transform=None, initial_value=initial_value
        ),
        batch_shape=batch_shape,
    )


def scaled_noise_likelihood(
    batch_shape: torch.Size, scale2: float | Tensor
) -> GaussianLikelihood:
    r"""BoTorch's default noise model for outcomes in units of ``sqrt(scale2)``.

    ``noise / scale2`` gets BoTorch's ``LogNormal(-4, 1)`` prior and lower bound
    ``1e-4`` (its mode as initial value), as BoTorch gives standardized outcomes:
    the model of ``y / sqrt(scale2)``. The raw parameter is ``log(noise - bound)``,
    so that fitting it takes the same steps in any units. For a GP whose prior sets
    the outcomes' scale and which does not standardize them (cm-BO's target GP), so
    that the noise model does not depend on the outcomes' units.

    Example:
        >>> likelihood = scaled_noise_likelihood(torch.Size(), scale2=0.01)
        >>> round(likelihood.noise.item() / 0.01, 4)  # exp(-5), the prior's mode
        0.0067

    Args:
        batch_shape: Batch shape of the likelihood.
        scale2: The outcomes' variance scale (positive).

    Returns:
        A ``GaussianLikelihood``.
    """
    scale2 = float(scale2)
    if not math.isfinite(scale2) or scale2 <= 0:
        raise ValueError(f"`scale2` must be positive and finite, got {scale2}.")
    noise_prior = LogNormalPrior(loc=-4.0 + math.log(scale2), scale=1.0)
    return GaussianLikelihood(
        noise_prior=noise_prior,
        batch_shape=batch_shape,
        # raw = log(noise - bound): a change of units shifts it and leaves the
        # fit's steps as they are (BoTorch's raw = noise would scale them by scale2)
        noise_constraint=GreaterThan(
            MIN_INFERRED_NOISE_LEVEL * scale2,
            transform=torch.exp,
            inv_transform=torch.log,
            initial_value=noise_prior.mode,
        ),
    )


def target_likelihood(
    train_X: Tensor, known_noise: bool, per_point_noise: bool
) -> GaussianLikelihood | FixedNoiseGaussianLikelihood:
    r"""The likelihood of a single-task (target) GP, with BoTorch's defaults.

    Args:
        train_X: ``batch_shape x n x d`` inputs (batch shape, dtype and device).
        known_noise: Whether the target noise is known (``train_Yvar``).
        per_point_noise: Whether the model adds known per-point variances of its
            own (e.g. a source posterior's variance at the target points).

    Returns:
        ``GaussianLikelihood`` with BoTorch's noise prior when the noise is learned
        and nothing is known per point; a ``FixedNoiseGaussianLikelihood`` for
        per-point variances (with a learned level on top when the target noise is
        learned). The per-point variances are set with the training data.
    """
    batch_shape = train_X.shape[:-2]
    if not known_noise and not per_point_noise:
        return get_gaussian_likelihood_with_lognormal_prior(batch_shape)
    placeholder = torch.ones(
        train_X.shape[:-1], dtype=train_X.dtype, device=train_X.device
    )
    if known_noise:
        return FixedNoiseGaussianLikelihood(noise=placeholder, batch_shape=batch_shape)
    level = learned_noise(batch_shape)
    return FixedNoiseGaussianLikelihood(
        noise=placeholder,
        learn_additional_noise=True,
        batch_shape=batch_shape,
        noise_prior=level.noise_prior,
        noise_constraint=level.raw_noise_constraint,
    )


def noise_index_input(params: tuple[Any, ...]) -> Tensor:
    r"""The noise index (``... x n x 2``) from a likelihood call's inputs
    ``(X, index)``.

    GPyTorch passes the inputs unpacked (marginal log likelihood) or as one list
    (prediction strategy); both are accepted.
    """
    inputs = (
        params[0]
        if len(params) == 1 and isinstance(params[0], (list, tuple))
        else params
    )
    if len(inputs) != 2 or inputs[1].is_floating_point() or inputs[1].shape[-1] != 2:
        raise ValueError(
            "Task-indexed noise needs the inputs (X, noise_index) of the points, with "
            "an integer noise_index of shape ... x n x 2 (task, training row)."
        )
    return inputs[1]


class TaskIndexedNoise(Noise):
    r"""Per-point noise ``fixed[row_i] + level[task_i]``, indexed by the data.

    Each point carries a *noise index* ``(task_i, row_i)``: its task, and its row in
    the table of fixed per-point noise of the training points (``-1`` for a new
    point, which has none). Each task either has a learned homoscedastic level,
    added to its points' fixed noise, or none; several tasks may share one level.
    The model registers its training points with :meth:`set_training_points`.

    Args:
        learned: The learned levels (``HomoskedasticNoise``), or ``None`` for a slot
            without one (kept so that slot indices are stable).
        task_level: For each task index, the slot in ``learned`` of its level, or
            ``None`` for a task with fixed noise only. Default: task ``k`` uses
            slot ``k``.
    """

    def __init__(
        self,
        learned: Sequence[HomoskedasticNoise | None],
        task_level: Sequence[int | None] | None = None,
    ) -> None:
        super().__init__()
        self.learned = torch.nn.ModuleList(
            [m if m is not None else torch.nn.Identity() for m in learned]
        )
        self.is_learned = [m is not None for m in learned]
        if task_level is None:
            task_level = [
                k if self.is_learned[k] else None for k in range(len(learned))
            ]
        for slot in task_level:
            if slot is not None and not self.is_learned[slot]:
                raise ValueError(
                    f"`task_level` points at slot {slot}, which has no level."
                )
        self.task_level = list(task_level)
        # the training points' fixed noise (batch x n) and tasks (n): data, not state
        self.register_buffer("fixed", torch.zeros(0), persistent=False)
        self.register_buffer(
            "row_task", torch.zeros(0, dtype=torch.long), persistent=False
        )

    @property
    def num_tasks(self) -> int:
        return len(self.task_level)

    def level(self, task: int) -> Tensor | None:
        r"""The learned level (``batch x 1``) of task ``task``, or ``None``."""
        slot = self.task_level[task]
        return None if slot is None else self.learned[slot].noise

    def set_training_points(self, task: Tensor, fixed: Tensor) -> Tensor:
        r"""Register the training points' tasks and fixed noise.

        Args:
            task: ``n`` task indices.
            fixed: ``batch x n`` fixed noise variances.

        Returns:
            The training points' noise index, ``n x 2``.
        """
        self.row_task, self.fixed = task, fixed
        rows = torch.arange(task.shape[-1], device=task.device)
        return torch.stack([task, rows], dim=-1)

    def noise_at(self, index: Tensor) -> Tensor:
        r"""Noise variances of points with noise index ``index`` (``... x m x 2``):
        ``batch x m``."""
        task, row = index[..., 0], index[..., 1]
        n = self.fixed.shape[-1]
        # row -1 (a new point) reads the appended zero
        table = torch.cat([self.fixed, torch.zeros_like(self.fixed[..., :1])], dim=-1)
        batch = torch.broadcast_shapes(row.shape[:-1], table.shape[:-1])
        row = torch.where(row < 0, n, row).expand(*batch, row.shape[-1])
        noise = table.expand(*batch, n + 1).gather(-1, row)
        for k in range(self.num_tasks):
            level = self.level(k)
            if level is not None:
                noise = noise + level * (task == k).to(noise)
        return noise

    def training_noise(self) -> Tensor:
        r"""Noise variances of the registered training points, ``batch x n``."""
        return self.noise_at(self.set_training_points(self.row_task, self.fixed))

    def forward(
        self, *params: Any, shape: torch.Size | None = None, **kwargs: Any
    ) -> DiagLinearOperator:
        noise = self.noise_at(noise_index_input(params))
        return DiagLinearOperator(noise if shape is None else noise.expand(shape))


# GPyTorch's base of Gaussian likelihoods with a custom noise model (exported by
# gpytorch.likelihoods; BoTorch's own such likelihoods subclass it)
class TaskIndexedGaussianLikelihood(_GaussianLikelihoodBase):
    r"""A Gaussian likelihood with :class:`TaskIndexedNoise`: the noise applied in a
    call is computed from that call's own noise index."""

    def __init__(self, noise_covar: TaskIndexedNoise) -> None:
        super().__init__(noise_covar=noise_covar)

    @property
    def noise(self) -> Tensor:
        r"""Per-point noise variances of the training points."""
        return self.noise_covar.training_noise()
