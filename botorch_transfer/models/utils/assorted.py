r"""Helpers the package's models share: the outcome map fitted on source and target
outcomes, the default transfer kernel, single-output checks and errors, the refusal
of BoTorch's pathwise samplers, and moving an exact GP without dropping its caches
needlessly (as ``botorch.models.utils.assorted`` is BoTorch's)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from botorch.exceptions.errors import UnsupportedError
from botorch.models.model import Model
from botorch.models.transforms.outcome import OutcomeTransform, Standardize
from botorch.models.utils.gpytorch_modules import get_covar_module_with_dim_scaled_prior
from botorch.sampling.pathwise.posterior_samplers import DrawMatheronPaths
from botorch.sampling.pathwise.prior_samplers import DrawKernelFeaturePaths
from gpytorch.kernels import ScaleKernel
from torch import Tensor

from botorch_transfer.data import TaskData
from botorch_transfer.models.source_posterior import outcome_affine
from botorch_transfer.models.utils.caching import apply_keeping_caches
from botorch_transfer.validation import (
    check_query_inputs,
    warn_if_below_standardize_floor,
)


def fit_shared_outcome_affine(
    outcome_transform: OutcomeTransform | None,
    sources: Sequence,
    train_Y: Tensor,
) -> tuple[Tensor, Tensor]:
    r"""Fit the outcome transform on all source ``TaskData`` and target outcomes.

    Returns:
        ``(scale, offset)`` with ``y_user = scale * y_model + offset`` (``(1, 0)`` for
        no transform), on ``train_Y``'s dtype and device.
    """
    scale = torch.ones((), dtype=train_Y.dtype, device=train_Y.device)
    offset = torch.zeros((), dtype=train_Y.dtype, device=train_Y.device)
    if outcome_transform is None:
        return scale, offset
    if not isinstance(outcome_transform, Standardize):
        outcome_affine(outcome_transform)  # raises the explanatory TypeError
    pooled = [s.Y for s in sources if isinstance(s, TaskData)]
    pooled = torch.cat(pooled + [train_Y.reshape(-1, 1)], dim=0)
    if pooled.shape[0] == 0:
        raise ValueError(
            "`outcome_transform` cannot be fitted: there are no target observations "
            "and no source TaskData outcomes."
        )
    name = "`train_Y` and the sources' outcomes" if len(pooled) > 1 else "`train_Y`"
    warn_if_below_standardize_floor(outcome_transform, pooled, name, stacklevel=5)
    outcome_transform.train()
    outcome_transform(pooled)
    outcome_transform.eval()
    scale, offset = outcome_affine(outcome_transform)
    return scale.to(train_Y), offset.to(train_Y)


def default_transfer_kernel(
    dim: int, batch_shape: torch.Size | None = None
) -> ScaleKernel:
    r"""A scaled RBF kernel with BoTorch's dimension-scaled lengthscale prior.

    The outputscale is the amplitude (``tau^2`` for a difference kernel).

    Args:
        dim: Input dimension (one lengthscale per dimension).
        batch_shape: Batch shape of the hyperparameters.

    Returns:
        ``ScaleKernel(RBFKernel(ard_num_dims=dim))`` with BoTorch's priors.
    """
    return ScaleKernel(
        get_covar_module_with_dim_scaled_prior(
            ard_num_dims=dim, batch_shape=batch_shape
        ),
        batch_shape=batch_shape,
    )


def refuse_pathwise_sampling(
    model_class: type, reason: str, prior_paths: bool = True
) -> None:
    r"""Make BoTorch's pathwise samplers refuse ``model_class`` with a clear error.

    BoTorch dispatches pathwise (Matheron) sampling on ``ExactGP`` (used e.g. by
    ``get_optimal_samples`` / ``qJointEntropySearch``); for a model whose posterior
    is not its GP's alone that would silently sample the wrong process.

    Args:
        model_class: The model class.
        reason: Why its paths would be wrong (completes the error message).
        prior_paths: Also refuse kernel-feature prior paths.
    """

    def refuse_posterior_paths(model: Any, **kwargs: Any) -> None:
        raise UnsupportedError(
            "Pathwise (Matheron) posterior samples are not implemented for "
            f"{type(model).__name__}: {reason}. Use Monte-Carlo acquisition "
            "functions (qLogNoisyExpectedImprovement, qUpperConfidenceBound, "
            "qKnowledgeGradient, qMaxValueEntropy with a candidate set), which "
            "sample the full posterior."
        )

    def refuse_prior_paths(model: Any, **kwargs: Any) -> None:
        raise UnsupportedError(
            "Kernel-feature prior paths are not implemented for "
            f"{type(model).__name__}: {reason}."
        )

    DrawMatheronPaths.register(model_class)(refuse_posterior_paths)
    if prior_paths:
        DrawKernelFeaturePaths.register(model_class)(refuse_prior_paths)


def single_output_subset_error(model: Any, idcs: Sequence[int]) -> NotImplementedError:
    r"""The error ``subset_output`` raises on a single-output model of the package.

    BoTorch's ``Model.subset_output`` raises a bare ``NotImplementedError``; this one
    says why and what to use instead.

    Args:
        model: The model.
        idcs: The requested output indices.

    Returns:
        The ``NotImplementedError`` to raise.
    """
    return NotImplementedError(
        f"{type(model).__name__} models a single outcome (num_outputs=1), so it has "
        f"no outputs to subset (got idcs={list(idcs)}): use the model itself for its "
        "one output. For several outcomes, build one model per outcome and combine "
        "them with BoTorch's `ModelListGP(model_1, model_2, ...)` (or `ModelList` "
        "for non-GP models), whose `subset_output` selects among them."
    )


def check_single_output(model: Model, output_indices: list[int] | None) -> None:
    r"""Raise unless ``output_indices`` asks a single-output ``model`` for its
    output (``None`` or ``[0]``)."""
    if output_indices is not None and list(output_indices) != [0]:
        raise ValueError(
            f"`output_indices` must be None or [0] ({type(model).__name__} has one "
            f"output), got {output_indices!r}."
        )


class SingleOutputTargetMixin:
    r"""What the package's single-output models share around their target data:
    the source-conditioned GPs, ``RandomizedNNEnsemble`` and ``TransferGuard``.

    A class using it (listed before BoTorch's ``Model`` in its bases) provides
    ``target_X`` (``batch_shape x n x d`` raw target inputs) and ``target_Y`` (user
    units); the mixin checks query inputs against the target's ``d`` (``_check_X``,
    before ``posterior`` passes them on) and refuses ``subset_output`` with an
    explanation.
    """

    def _check_X(self, X: Tensor, name: str = "X") -> None:
        r"""Check query inputs ``X`` (``batch_shape x q x d``, finite, the target's
        ``d``) as every model of the package checks them."""
        check_query_inputs(X, self.target_X.shape[-1], name)

    def subset_output(self, idcs: list[int]) -> Any:
        r"""Not available: the model has a single output.

        Raises:
            NotImplementedError: Always, saying what to do instead (one model per
                outcome in a ``ModelListGP``, or a ``ModelList`` for non-GP models).
        """
        raise single_output_subset_error(self, idcs)


class MovableExactGPMixin:
    r"""For ``ExactGP`` models: ``.to()``/``.double()``/``.cuda()`` drop GPyTorch's
    cached prediction strategy, whose tensors keep the old dtype/device, so the next
    posterior rebuilds it. A ``.to()`` that replaces no tensor (BoTorch's analytic
    acquisition functions call ``model.to(X)`` at every evaluation) keeps it."""

    def _apply(self, fn, *args, **kwargs):
        def tensors() -> list[Tensor]:
            data = [*(self.train_inputs or ()), self.train_targets]
            return [
                *self.parameters(),
                *self.buffers(),
                *(t for t in data if t is not None),
            ]

        return apply_keeping_caches(
            tensors,
            lambda: super(MovableExactGPMixin, self)._apply(fn, *args, **kwargs),
            lambda: setattr(self, "prediction_strategy", None),
        )
