r"""HyperBO's acquisition: probability of improvement over the best observation plus
a margin (Wang et al., Sec. 7.2), for
:class:`~botorch_transfer.models.pretrained.PretrainedPriorGP` and the package's
other models.
"""

from __future__ import annotations

import math

import torch
from botorch.acquisition import ProbabilityOfImprovement
from botorch.models.model import Model
from torch import Tensor

from botorch_transfer.models.pretrained import PretrainedPriorGP


def hyperbo_probability_of_improvement(
    model: PretrainedPriorGP,
    margin: float = 0.1,
    best_f: float | Tensor | None = None,
    scale_margin: bool = True,
) -> ProbabilityOfImprovement:
    r"""The paper's default acquisition: PI with threshold ``max(y) + margin``
    (Sec. 7.2).

    The paper's margin, 0.1, is in the units of its (normalized) outcomes. Here it is
    by default in the prior's standardized units (``margin`` times the prior's
    outcome scale), so the same data in other units give the same search; a margin
    of 0.1 in raw units was negligible for outcomes in the thousands and huge for
    outcomes near 0.01.

    Args:
        model: The model (any single-output BoTorch model works).
        margin: Added to the best observation, in standardized units (see
            ``scale_margin``).
        best_f: The best observation (default: the model's best target observation,
            ``model.target_Y.max()``, or ``model.train_targets.max()`` for a model
            without ``target_Y``).
        scale_margin: Multiply ``margin`` by the model's outcome scale: the
            pre-trained prior's scale for a ``PretrainedPriorGP``, the shared outcome
            map's scale for the package's other models, 1 for other models.
            ``False``: the margin is in the units of ``y`` (the paper's setting).

    Returns:
        BoTorch's ``ProbabilityOfImprovement`` with ``best_f = max(y) + margin``.
    """
    if best_f is None:
        # train_targets are derived data on most models of the package (residuals)
        target_Y = getattr(model, "target_Y", None)
        targets = model.train_targets if target_Y is None else target_Y.squeeze(-1)
        if targets.shape[-1] == 0:
            raise ValueError(
                "The model has no training data; "
                "pass `best_f` (e.g. the prior mean's maximum)."
            )
        best_f = targets.max(dim=-1).values
    best_f = torch.as_tensor(best_f)
    if not torch.isfinite(best_f).all():
        raise ValueError(f"`best_f` must be finite, got {best_f.tolist()}.")
    if not math.isfinite(margin):
        raise ValueError(f"`margin` must be finite, got {margin!r}.")
    if scale_margin:
        margin = margin * _outcome_scale(model).to(best_f)
    return ProbabilityOfImprovement(model, best_f=best_f + margin)


def _outcome_scale(model: Model) -> Tensor:
    r"""The scale of a model's standardized outcome units (1 if it has none)."""
    if isinstance(model, PretrainedPriorGP):
        return model.mean_module.scale.detach().squeeze()
    scale = getattr(model, "output_scale", None)
    return torch.ones(()) if scale is None else scale.detach().squeeze()
