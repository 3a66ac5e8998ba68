r"""A batch of MLPs in the NTK parameterization, all parameters in one flat tensor.

Layer ``l`` computes ``a((s_l / sqrt(fan_in)) W_l h + s_b b_l)`` with every entry of
``W_l`` and ``b_l`` an entry of the flat parameter vector ``theta``, so that a standard
Gaussian ``theta ~ N(0, I)`` is the network's prior (the scales live in the forward
pass, ``theta`` itself is isotropic). Many networks (one row of ``theta`` each) are
evaluated together with batched matrix products.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class WhitenedMLP:
    r"""The architecture of the networks; ``theta`` holds their parameters.

    Args:
        layout: ``(fan_out, fan_in)`` of each layer, input layer first, the last one
            the linear output layer (no activation).
        input_scale: Weight scale ``s_1`` of the first layer.
        weight_scale: Weight scale of the later layers.
        bias_scale: Scale ``s_b`` of all biases.
        activation: The hidden layers' activation.

    Example:
        >>> mlp = WhitenedMLP.of_widths((2, 16, 1), 3.0, 1.0, 1.0, torch.tanh)
        >>> theta = torch.randn(5, mlp.num_parameters)  # 5 networks
        >>> mlp(theta, torch.rand(10, 2)).shape
        torch.Size([5, 10])
    """

    layout: tuple[tuple[int, int], ...]
    input_scale: float
    weight_scale: float
    bias_scale: float
    activation: Callable[[Tensor], Tensor]

    @classmethod
    def of_widths(
        cls,
        widths: Sequence[int],
        input_scale: float,
        weight_scale: float,
        bias_scale: float,
        activation: Callable[[Tensor], Tensor],
    ) -> WhitenedMLP:
        r"""The networks with layer widths ``widths`` (input first, output last)."""
        layout = tuple((widths[i + 1], widths[i]) for i in range(len(widths) - 1))
        return cls(layout, input_scale, weight_scale, bias_scale, activation)

    @property
    def num_parameters(self) -> int:
        r"""The length of one network's flat parameter vector."""
        return sum(fan_out * fan_in + fan_out for fan_out, fan_in in self.layout)

    def __call__(self, theta: Tensor, h: Tensor) -> Tensor:
        r"""The outputs of every network.

        Args:
            theta: ``batch x s x P`` parameters of ``s`` networks (``batch`` may be
                empty).
            h: ``batch' x N x F`` inputs, ``batch'`` broadcastable with ``batch``.

        Returns:
            ``broadcast(batch, batch') x s x N`` outputs.
        """
        s = theta.shape[-2]
        batch = torch.broadcast_shapes(theta.shape[:-2], h.shape[:-2])
        # (batch * s) x N x F and (batch * s) x P: batched matrix products below
        h = h.unsqueeze(-3)
        h = h.expand(*batch, s, *h.shape[-2:]).reshape(-1, *h.shape[-2:])
        theta = theta.expand(*batch, *theta.shape[-2:]).reshape(-1, theta.shape[-1])
        offset, last = 0, len(self.layout) - 1
        for layer, (fan_out, fan_in) in enumerate(self.layout):
            W = theta[:, offset : offset + fan_out * fan_in].reshape(
                -1, fan_out, fan_in
            )
            offset += fan_out * fan_in
            b = theta[:, offset : offset + fan_out]
            offset += fan_out
            scale = (self.input_scale if layer == 0 else self.weight_scale) / math.sqrt(
                fan_in
            )
            h = torch.baddbmm(
                (self.bias_scale * b).unsqueeze(-2), h, W.transpose(-1, -2), alpha=scale
            )
            if layer < last:
                h = self.activation(h)
        return h.reshape(*batch, s, -1)
