r"""The randomized policy of
:class:`~botorch_transfer.models.randomized_nn.RandomizedNNEnsemble` (Oliveira 2026,
eq. 8 with eq. 10): train one fresh member on the data and query
its maximizer, approximate Thompson sampling (``loss="squared"``) or randomized
LFBO (``loss="cross_entropy"``).
"""

from __future__ import annotations

from typing import Any

import torch
from botorch.acquisition.acquisition import AcquisitionFunction
from botorch.optim import optimize_acqf
from torch import Tensor

from botorch_transfer.models.randomized_nn import RandomizedNNEnsemble


class _MemberOutput(AcquisitionFunction):
    r"""The raw output of one trained member (eq. 8's acquisition ``g_t``)."""

    def __init__(self, model: RandomizedNNEnsemble, member: int = 0) -> None:
        super().__init__(model=model)
        self.member = member

    def forward(self, X: Tensor) -> Tensor:
        X = self.model.transform_inputs(X)
        return self.model.member_outputs(X, raw=True)[..., self.member, :, 0].sum(-1)


def randomized_nn_thompson_candidate(
    train_X: Tensor,
    train_Y: Tensor,
    bounds: Tensor | None = None,
    choices: Tensor | None = None,
    num_restarts: int = 5,
    raw_samples: int = 256,
    max_batch_size: int = 4096,
    **model_kwargs: Any,
) -> Tensor:
    r"""One step of the randomized policy (eq. 8 with eq. 10): train one fresh member
    on the data and return its maximizer.

    With ``loss="squared"`` this is approximate Thompson sampling (Sec. 4.3); with
    ``loss="cross_entropy"`` it is the randomized LFBO policy (Sec. 4.4). The member
    is maximized on its raw output (the logit for LFBO: same maximizer as the class
    probability, but without vanishing gradients).

    Args:
        train_X: ``n x d`` inputs.
        train_Y: ``n x 1`` observations.
        bounds: ``2 x d`` box of a continuous domain (maximized with ``optimize_acqf``).
        choices: ``N x d`` candidates of a finite domain (maximized by enumeration).
            Exactly one of ``bounds`` and ``choices``.
        num_restarts: ``optimize_acqf`` restarts (continuous domains).
        raw_samples: ``optimize_acqf`` raw samples (continuous domains).
        max_batch_size: Candidates evaluated at once (finite domains).
        **model_kwargs: Passed to
            :class:`~botorch_transfer.models.randomized_nn.RandomizedNNEnsemble`
            (``num_members`` is fixed to 1). Pass ``seed`` for a reproducible
            step; when no ``input_transform`` is given and ``bounds`` is,
            ``Normalize(d, bounds)`` is used.

    Returns:
        The ``1 x d`` candidate.

    Example:
        >>> bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
        >>> X = torch.rand(5, 2, dtype=torch.float64)
        >>> Y = X.sum(-1, keepdim=True)
        >>> x_next = randomized_nn_thompson_candidate(X, Y, bounds=bounds, seed=0)
    """
    from botorch.models.transforms import Normalize

    if (bounds is None) == (choices is None):
        raise ValueError(
            "Pass exactly one of `bounds` (continuous domain) "
            "and `choices` (finite domain)."
        )
    d = train_X.shape[-1]
    if bounds is not None and (
        not isinstance(bounds, Tensor) or bounds.shape != (2, d)
    ):
        raise ValueError(
            f"`bounds` must be a 2 x d tensor with d={d}, got "
            f"{getattr(bounds, 'shape', bounds)}."
        )
    if choices is not None and (
        not isinstance(choices, Tensor)
        or choices.dim() != 2
        or choices.shape[-1] != d
        or choices.shape[0] == 0
    ):
        raise ValueError(
            f"`choices` must be a non-empty N x d tensor with d={d}, got "
            f"{getattr(choices, 'shape', choices)}."
        )
    if "num_members" in model_kwargs:
        raise ValueError("`num_members` is fixed to 1: one fresh member per step.")
    if model_kwargs.get("input_transform") is None:
        box = (
            bounds
            if bounds is not None
            else torch.stack([choices.min(0).values, choices.max(0).values])
        )
        model_kwargs["input_transform"] = Normalize(d, bounds=box.to(train_X))
    model = RandomizedNNEnsemble(train_X, train_Y, num_members=1, **model_kwargs)
    acqf = _MemberOutput(model)
    if choices is not None:
        with torch.no_grad():
            values = torch.cat(
                [acqf(c.unsqueeze(-2)) for c in choices.split(max_batch_size)]
            )
        return choices[values.argmax()].unsqueeze(0).clone()
    candidate, _ = optimize_acqf(
        acqf, bounds=bounds, q=1, num_restarts=num_restarts, raw_samples=raw_samples
    )
    return candidate.detach()
