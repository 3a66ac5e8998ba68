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
iterate). Cost: ``O(N^3)`` per correction and an ``(N + T)``-sized exact GP;
``O((N + T) m^2)`` with ``inference="low_rank"``, whose kernel factors are computed
once per model when the kernel is frozen (fitted once on the source,
:func:`~botorch_transfer.models.pooled.source_fitted_kernel`, as the paper keeps its
kernel fixed): N=2,000, about 0.2 s an iteration on 2 cores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import torch
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import Likelihood
from gpytorch.means import Mean
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from botorch_transfer._deprecation import renamed_keywords
from botorch_transfer.data import TaskData
from botorch_transfer.models.base import TrainingData
from botorch_transfer.models.likelihoods import (
    TaskIndexedGaussianLikelihood,
    TaskIndexedNoise,
    learned_noise,
)
from botorch_transfer.models.pooled import LowRankInference, PooledTransferGP
from botorch_transfer.models.task_column import TaskColumn
from botorch_transfer.models.utils.low_rank import fitc_predictive_weights, nystrom_root

# slots of the learned noise levels: sigma'^2 (sources without Yvar), sigma_a^2
SOURCE, TARGET = 0, 1


class DiffGP(PooledTransferGP):
    r"""Difference-modelling transfer GP with bias-corrected source data.

    ``train_inputs``/``train_targets`` are the final GP's data: ``(X, noise_index)``
    and outcomes of the corrected source points followed by the target points (model
    units). The target data in the user's units are ``target_X``, ``target_Y`` and
    ``target_Yvar``; give BoTorch's acquisition functions
    ``best_f=model.target_Y.max()`` and ``X_baseline=model.target_X``.

    Args:
        train_X: ``batch_shape x n x d`` target inputs (``n`` may be 0).
        train_Y: ``batch_shape x n x 1`` target observations.
        train_Yvar: Optional known target noise variances; else ``sigma_a^2`` is
            learned.
        source: A ``TaskData`` or a list of them (keyword; pooled into one source
            data set).
        likelihood: Default: a task-indexed likelihood with a learned ``sigma'^2``
            for sources without known noise and the target noise ``sigma_a^2``.
        covar_module: The kernel ``k`` shared by source, target and difference
            (default: a scaled RBF kernel with BoTorch's lengthscale prior). A frozen
            kernel (no parameter requires a gradient, e.g. from
            :func:`~botorch_transfer.models.pooled.source_fitted_kernel`) is the
            paper's fixed kernel: the fit then moves the mean and unknown noise
            levels only, and ``"low_rank"`` factors the kernel once per model.
        mean_module: Prior mean of ``f'`` and ``f`` (default ``ConstantMean``; the
            paper uses zero). The difference has zero mean.
        input_transform: Input transform, applied as ``SingleTaskGP`` applies it.
        outcome_transform: ``None`` or ``Standardize(m=1)``, fitted on source and
            target outcomes together and applied to both.
        source_noise: Known source noise variance ``sigma'^2`` (user units) for all
            source points. Default: the sources' ``TaskData.Yvar``; where a source
            has none, ``sigma'^2`` is learned. (``source_Yvar``, its old name, is
            deprecated.)
        task_column: The layout of Ax's transfer-learning queries (see
            :class:`~botorch_transfer.models.task_column.TaskColumn`; set by
            ``construct_inputs``).
        inference: ``"exact"`` (default): exact GPs, ``O(N^3)`` per correction and
            ``O((N + T)^3)`` per fit step. A
            :class:`~botorch_transfer.models.pooled.LowRankInference`
            (``"low_rank"``: its defaults): FITC inference for the source posterior
            of step 1 and the final GP, with ``num_inducing`` source points
            (farthest-point selected) and all target points as inducing inputs:
            ``O((N + T) m^2)``; exact when ``N <= num_inducing`` (see
            :mod:`~botorch_transfer.models.utils.low_rank`). (``num_inducing`` as a
            keyword is deprecated.)

    Example:
        >>> model = DiffGP(train_X, train_Y, source=TaskData(X_src, Y_src))
        >>> mll = ExactMarginalLogLikelihood(model.likelihood, model)
        >>> mll = fit_gpytorch_mll(mll)
        >>> acqf = UpperConfidenceBound(model, beta=0.3)
    """

    #: Old keyword names the constructor still takes, with their new names.
    renamed_arguments: ClassVar[dict[str, str]] = {
        **PooledTransferGP.renamed_arguments,
        "source_Yvar": "source_noise",
    }

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
        source_noise: float | None = None,
        task_column: TaskColumn | None = None,
        inference: Literal["exact", "low_rank"] | LowRankInference = "exact",
        **deprecated: Any,
    ) -> None:
        # its own old name; the rest goes to the base class
        own = (
            {"source_Yvar": deprecated.pop("source_Yvar")}
            if "source_Yvar" in deprecated
            else {}
        )
        renamed = renamed_keywords("DiffGP", own, {"source_Yvar": "source_noise"})
        if "source_noise" in renamed:
            if source_noise is not None:
                raise TypeError(
                    "Give `source_noise` only (`source_Yvar` is its old name)."
                )
            source_noise = renamed["source_noise"]
        self._set_inference(inference, deprecated)
        if source_noise is not None and not (
            isinstance(source_noise, (int, float))
            and math.isfinite(source_noise)
            and source_noise >= 0
        ):
            raise ValueError(
                "`source_noise` must be a non-negative finite float, got "
                f"{source_noise!r}."
            )
        self.source_noise = source_noise
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

    def _learns_source_noise(self, sources: Sequence[TaskData]) -> list[bool]:
        r"""Per source task: is ``sigma'^2`` learned (no known noise)?"""
        if self.source_noise is not None:
            return [False] * len(sources)
        return [s.Yvar is None for s in sources]

    def _default_likelihood(
        self, train_X: Tensor, train_Yvar: Tensor | None, transfer: list[TaskData]
    ) -> TaskIndexedGaussianLikelihood:
        r"""Slot 0: one ``sigma'^2`` shared by the sources without known noise; slot
        1: the target noise ``sigma_a^2`` (when ``train_Yvar`` is not known)."""
        batch_shape = train_X.shape[:-2]
        learns_source = self._learns_source_noise(transfer)
        learned = [
            learned_noise(batch_shape) if any(learns_source) else None,
            learned_noise(batch_shape) if train_Yvar is None else None,
        ]
        task_level = [SOURCE if learns else None for learns in learns_source]
        task_level.append(TARGET if train_Yvar is None else None)
        return TaskIndexedGaussianLikelihood(TaskIndexedNoise(learned, task_level))

    def _build_modules(
        self,
        transfer: list[TaskData],
        train_X: Tensor,
        input_transform: InputTransform | None,
        **kwargs,
    ) -> None:
        super()._build_modules(
            transfer, train_X=train_X, input_transform=input_transform, **kwargs
        )
        if self.source_noise is not None:
            override = self.source_noise / self.output_scale**2
            self.source_Yvar = torch.full_like(self.source_Y, float(override))
        self.register_buffer(
            "source_known_noise",
            torch.nan_to_num(self.source_Yvar, nan=0.0),
            persistent=False,
        )
        learns = torch.tensor(
            self._learns_source_noise(transfer), device=train_X.device
        )
        # points whose sigma'^2 is learned (no Yvar) get the learned source level
        self.register_buffer(
            "source_noise_learned", learns[self.source_task], persistent=False
        )
        if input_transform is not None:
            # learn a data-dependent transform (e.g. Normalize) on the pooled inputs
            # before the first correction evaluates the kernel on transformed inputs
            input_transform.train()
            with torch.no_grad():
                input_transform(
                    torch.cat([self.source_X, train_X.reshape(-1, train_X.shape[-1])])
                )

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
        if not noise.is_learned[SOURCE]:
            return self.source_known_noise
        level = noise.learned[SOURCE].noise
        return self.source_known_noise + level * self.source_noise_learned.to(level)

    def _target_noise_per_point(self) -> Tensor:
        r"""``sigma_a^2`` at each target point (``batch x T``)."""
        if self.learns_target_noise:
            level = self.likelihood.noise_covar.learned[TARGET].noise
            return level.expand(*self._target_Y.shape)
        return self._target_Yvar

    def corrected_source(self) -> tuple[Tensor, Tensor]:
        r"""The bias-corrected source data of the current target data and
        hyperparameters.

        Returns:
            ``(y_cs, sigma^2_D(x_s))``: the corrected source outcomes
            ``y_s + mu_D(x_s)`` and the difference GP's variance at the source
            points (``batch x N``, model units).
        """
        X_s, y_s = self.source_X, self.source_Y
        X_a, y_a = self._target_X, self._target_Y
        Xs_t, Xa_t = self._transform_eval(X_s), self._transform_eval(X_a)
        k = self.covar_module
        m_s, m_a = self.mean_module(Xs_t), self.mean_module(Xa_t)
        prior_var_s = k(Xs_t, diag=True)
        if X_a.shape[-2] == 0:  # no target data: mu_D = 0, sigma^2_D = k(x, x)
            batch = X_a.shape[:-2]
            return y_s.expand(*batch, -1) + 0 * m_s, prior_var_s.expand(*batch, -1)
        # 1. source posterior at the target points (noise sigma'^2)
        K_sa = k(Xs_t, Xa_t).to_dense()  # N x T (batched)
        source_noise = self._source_noise().expand(*prior_var_s.shape)
        if self.low_rank:  # the FITC predictive of the source GP (Woodbury solves)
            Z = Xs_t[..., self.source_inducing, :]
            root, L = self.kernel_cached(
                "source_nystrom",
                Xs_t,
                lambda: nystrom_root(k(Xs_t, Z).to_dense(), k(Z).to_dense()),
            )
            mean_weights, covariance_weights = fitc_predictive_weights(
                root, prior_var_s, source_noise, y_s - m_s, L
            )
            K_aZ = k(Xa_t, Z).to_dense()
            mu_S = m_a + (K_aZ @ mean_weights.unsqueeze(-1)).squeeze(-1)
            reduction = ((K_aZ @ covariance_weights) * K_aZ).sum(-1)
        else:
            L_S = psd_safe_cholesky(k(Xs_t).to_dense() + torch.diag_embed(source_noise))
            V = torch.linalg.solve_triangular(L_S, K_sa, upper=False)
            alpha_s = torch.cholesky_solve((y_s - m_s).unsqueeze(-1), L_S)
            mu_S = m_a + (K_sa.transpose(-1, -2) @ alpha_s).squeeze(-1)
            reduction = V.pow(2).sum(-2)
        var_S = k(Xa_t, diag=True) - reduction
        # 2. difference GP on Delta y with noise sigma_a^2 + sigma^2_S(x_a)
        K_D = k(Xa_t).to_dense() + torch.diag_embed(
            self._target_noise_per_point() + var_S
        )
        L_D = psd_safe_cholesky(K_D)
        W = torch.linalg.solve_triangular(
            L_D, K_sa.transpose(-1, -2), upper=False
        )  # T x N
        alpha_d = torch.cholesky_solve((y_a - mu_S).unsqueeze(-1), L_D)
        mu_D = (K_sa @ alpha_d).squeeze(-1)
        var_D = (prior_var_s - W.pow(2).sum(-2)).clamp_min(0.0)
        # 3. corrected source data
        return y_s + mu_D, var_D

    def _training_data(self, X: Tensor, Y: Tensor, Yvar: Tensor) -> TrainingData:
        r"""Recompute the correction and pool ``[corrected source; target]``.

        Source points carry ``sigma'^2`` (known part fixed, unknown part learned
        through their task's level) plus ``sigma^2_D(x_s)``.
        """
        with torch.no_grad():
            y_cs, var_D = self.corrected_source()
        self._hyperparameter_state = self._hyperparameters()
        return self._pooled_training_data(y_cs, self.source_known_noise + var_D)

    def train(self, mode: bool = True) -> DiffGP:
        r"""Eval mode re-derives the correction if the hyperparameters changed (e.g. by
        ``fit_gpytorch_mll``); train mode keeps it fixed."""
        result = super().train(mode)
        state = getattr(self, "_hyperparameter_state", None)
        if not mode and state is not None and self._hyperparameters_changed(state):
            self._set_target_data(self._target_X, self._target_Y, self._target_Yvar)
        return result
