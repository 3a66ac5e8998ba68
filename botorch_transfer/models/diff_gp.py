r"""Diff-GP: difference modelling with bias-corrected source data (Shilton et al. 2017,
Sec. 3.2, eq. 6).

One kernel ``k`` (and prior mean ``m``) is shared by the source ``f'``, the target
``f`` and their difference ``g = f - f'`` (zero mean), as in the paper:

1. source posterior ``mu_S, sigma^2_S`` from the source data (noise ``sigma'^2``);
2. difference GP on ``Delta y_i = y_i - mu_S(x_i)`` with per-point noise
   ``sigma_a^2 + sigma^2_S(x_i)``, giving ``mu_D, sigma^2_D``;
3. bias-corrected source data ``y_cs = y_s + mu_D(x_s)`` with per-point noise
   ``sigma'^2 + sigma^2_D(x_s)``;
4. the target GP on ``[corrected source; target]`` (eq. 6), which is the model's
   posterior.

Steps 1-3 are recomputed whenever the target data or the hyperparameters change:
at construction, in ``condition_on_observations``/``fantasize`` (fantasies get
corrections consistent with the fantasized points) and when the model returns to
eval mode with changed hyperparameters (the end of ``fit_gpytorch_mll``).
``fit_gpytorch_mll`` maximizes the marginal likelihood of step 4 with the
correction held at its current value (one block-coordinate step; fit again to
iterate). Cost: ``O(N^3)`` per correction and an ``(N + T)``-sized exact GP.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from gpytorch.kernels import Kernel
from gpytorch.means import Mean
from linear_operator.utils.cholesky import psd_safe_cholesky
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

SOURCE, TARGET = 0, 1


class DiffGP(PooledTransferGP):
    r"""Difference-modelling transfer GP with bias-corrected source data.

    Args:
        train_X: ``batch_shape x n x d`` target inputs (``n`` may be 0).
        train_Y: ``batch_shape x n x 1`` target observations.
        source: A ``TaskData`` or a list of them (pooled into one source data set).
        train_Yvar: Optional known target noise variances; else ``sigma_a^2`` is learned.
        covar_module: The kernel ``k`` shared by source, target and difference
            (default: a scaled RBF kernel with BoTorch's lengthscale prior).
        source_Yvar: Known source noise ``sigma'^2`` (user units) for all source
            points. Default: the sources' ``TaskData.Yvar``; where a source has none,
            ``sigma'^2`` is learned.
        mean_module: Prior mean of ``f'`` and ``f`` (default ``ConstantMean``; the
            paper uses zero). The difference has zero mean.
        input_transform: Input transform, applied as ``SingleTaskGP`` applies it.
        outcome_transform: ``None`` or ``Standardize(m=1)``, fitted on source and
            target outcomes together and applied to both.

    Example:
        >>> model = DiffGP(train_X, train_Y, source=TaskData(X_src, Y_src))
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
        source_Yvar: float | None = None,
        mean_module: Mean | None = None,
        input_transform: InputTransform | None = None,
        outcome_transform: OutcomeTransform | None = None,
    ) -> None:
        validate_training_data(train_X, train_Y, train_Yvar)
        sources = as_source_list(source, train_X, allow_models=False)
        scale, offset = fit_shared_outcome_affine(outcome_transform, sources, train_Y)
        X_s, Y_s, Yvar_s, _ = pool_source_tasks(sources, scale, offset)
        if source_Yvar is not None:
            if not (isinstance(source_Yvar, (int, float)) and math.isfinite(source_Yvar) and source_Yvar >= 0):
                raise ValueError(f"`source_Yvar` must be a non-negative finite float, got {source_Yvar!r}.")
            Yvar_s = torch.full_like(Y_s, source_Yvar) / scale**2
        known_source_noise = torch.nan_to_num(Yvar_s, nan=0.0)
        learn_source_noise = bool(torch.isnan(Yvar_s).any())
        batch_shape = train_X.shape[:-2]
        noise = GroupedNoise(
            group=torch.zeros(X_s.shape[0], dtype=torch.long, device=X_s.device),
            fixed=known_source_noise.clone(),
            learned=[
                learned_noise(batch_shape) if learn_source_noise else None,
                learned_noise(batch_shape) if train_Yvar is None else None,
            ],
            target_group=TARGET,
        )
        self._init_pooled(X_s, Y_s, noise, mean_module, covar_module, batch_shape)
        self.register_buffer("source_known_noise", known_source_noise, persistent=False)
        # points whose sigma'^2 is learned (no Yvar) get the learned source level
        self.register_buffer("source_noise_learned", torch.isnan(Yvar_s), persistent=False)
        if input_transform is not None:
            # learn a data-dependent transform (e.g. Normalize) on the pooled inputs
            # before the first correction evaluates the kernel on transformed inputs
            input_transform.train()
            with torch.no_grad():
                input_transform(torch.cat([X_s, train_X.reshape(-1, train_X.shape[-1])]))
        self._finish_init(train_X, train_Y, train_Yvar, scale, offset, input_transform, outcome_transform)

    # -------------------------------------------------------------- correction
    def _transform_eval(self, X: Tensor) -> Tensor:
        r"""Apply the input transform without letting it re-learn coefficients."""
        if not hasattr(self, "input_transform"):
            return X
        was_training = self.input_transform.training
        self.input_transform.eval()
        try:
            return self.input_transform(X)
        finally:
            self.input_transform.train(was_training)

    def _source_noise(self) -> Tensor:
        r"""``sigma'^2`` per source point (``batch x N``), known or learned."""
        noise = self.likelihood.noise_covar
        level = noise.group_noise(SOURCE)
        if level is None:
            return self.source_known_noise
        return self.source_known_noise + level * self.source_noise_learned.to(level)

    def _target_noise_per_point(self) -> Tensor:
        r"""``sigma_a^2`` at each target point (``batch x T``)."""
        if self.learns_target_noise:
            return self.likelihood.noise_covar.group_noise(TARGET).expand(*self.target_Y.shape)
        return self.target_Yvar

    def corrected_source(self) -> tuple[Tensor, Tensor]:
        r"""The bias-corrected source data of the current target data and hyperparameters.

        Returns:
            ``(y_cs, sigma^2_D(x_s))``: the corrected source outcomes
            ``y_s + mu_D(x_s)`` and the difference GP's variance at the source
            points (``batch x N``, model units).
        """
        X_s, y_s = self.source_X, self.source_Y
        X_a, y_a = self.target_X, self.target_Y
        Xs_t, Xa_t = self._transform_eval(X_s), self._transform_eval(X_a)
        k = self.covar_module
        m_s, m_a = self.mean_module(Xs_t), self.mean_module(Xa_t)
        prior_var_s = k(Xs_t, diag=True)
        if X_a.shape[-2] == 0:  # no target data: mu_D = 0, sigma^2_D = k(x, x)
            batch = X_a.shape[:-2]
            return y_s.expand(*batch, -1) + 0 * m_s, prior_var_s.expand(*batch, -1)
        # 1. source posterior at the target points (noise sigma'^2)
        K_S = k(Xs_t).to_dense() + torch.diag_embed(self._source_noise().expand(*prior_var_s.shape))
        L_S = psd_safe_cholesky(K_S)
        K_sa = k(Xs_t, Xa_t).to_dense()  # N x T (batched)
        V = torch.linalg.solve_triangular(L_S, K_sa, upper=False)
        alpha_s = torch.cholesky_solve((y_s - m_s).unsqueeze(-1), L_S)
        mu_S = m_a + (K_sa.transpose(-1, -2) @ alpha_s).squeeze(-1)
        var_S = k(Xa_t, diag=True) - V.pow(2).sum(-2)
        # 2. difference GP on Delta y with noise sigma_a^2 + sigma^2_S(x_a)
        K_D = k(Xa_t).to_dense() + torch.diag_embed(self._target_noise_per_point() + var_S)
        L_D = psd_safe_cholesky(K_D)
        W = torch.linalg.solve_triangular(L_D, K_sa.transpose(-1, -2), upper=False)  # T x N
        alpha_d = torch.cholesky_solve((y_a - mu_S).unsqueeze(-1), L_D)
        mu_D = (K_sa @ alpha_d).squeeze(-1)
        var_D = (prior_var_s - W.pow(2).sum(-2)).clamp_min(0.0)
        # 3. corrected source data
        return y_s + mu_D, var_D

    def _set_target_data(self, X: Tensor, Y: Tensor, Yvar: Tensor) -> None:
        r"""Recompute the correction and pool ``[corrected source; target]``."""
        self._store_target_data(X, Y, Yvar)
        self._refresh_correction()

    def _refresh_correction(self) -> None:
        with torch.no_grad():
            y_cs, var_D = self.corrected_source()
        # source: sigma'^2 (known part fixed, unknown part learned) + sigma^2_D(x_s)
        group = torch.where(self.source_noise_learned, SOURCE, -1)  # -1: no learned level
        self._hyperparameter_state = self._hyperparameters()
        self._set_pooled_training_data(y_cs, self.source_known_noise + var_D, group)

    def _hyperparameters(self) -> Tensor:
        return torch.cat([p.detach().flatten() for p in self.parameters()]).clone()

    def train(self, mode: bool = True) -> DiffGP:
        r"""Eval mode re-derives the correction if the hyperparameters changed (e.g. by
        ``fit_gpytorch_mll``); train mode keeps it fixed."""
        result = super().train(mode)
        state = getattr(self, "_hyperparameter_state", None)
        if not mode and state is not None:
            current = self._hyperparameters()
            if current.shape != state.shape or not torch.equal(current, state):
                self._refresh_correction()
        return result
