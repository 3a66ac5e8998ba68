r"""RGPE: the ranking-weighted Gaussian process ensemble (Feurer, Letham and Bakshy,
2018, *Scalable Meta-Learning for Bayesian Optimization using Ranking-Weighted
Gaussian Process Ensembles*).

The paper's model:

- one GP per source task (base models) and one GP on the target task;
- the ensemble's prediction ``f(x) ~ N(sum_i w_i mu_i(x), sum_i w_i^2 sigma_i^2(x))``
  (the models are treated as independent);
- weights from the ranking loss ``L(f, D) = sum_{j,k} 1[(f(x_j) < f(x_k)) xor
  (y_j < y_k)]`` over ordered pairs of target observations: with ``S`` joint
  posterior draws of every model at the target inputs (the target model's drawn
  from its leave-one-out posteriors ``f^{-j}(x_j)``), ``w_i`` is the fraction of
  draws in which model ``i`` has the smallest loss, ties broken at random;
- weight dilution prevention: a base model whose median loss exceeds the 95th
  percentile of the target model's losses gets weight 0.

Ours: the leave-one-out posteriors are the exact closed-form ones of the fitted
target GP; the draws use a seeded generator, so the weights are a deterministic
function of the target data and hyperparameters (``condition_on_observations``
equals a rebuild); the weights are recomputed whenever the target data change and
when the model returns to eval mode with new hyperparameters (after
``fit_gpytorch_mll``); discarded base models are excluded before the argmin; the
joint covariance over ``q`` points is ``sum_i w_i^2 Sigma_i`` (the paper states the
marginal variance); source and target outcomes share one affine outcome map, as in
every model of the package, fitted on the target's outcomes (the sources do not
change the target GP's fit); a source of fewer than ``MIN_SOURCE_POINTS`` points
gets weight 0 (its draws are its prior's), with a warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from botorch.models.model import Model
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import Likelihood
from gpytorch.means import ConstantMean, Mean
from gpytorch.mlls import MarginalLogLikelihood
from linear_operator.operators import DenseLinearOperator
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor
from torch.nn import Module, ModuleList

from botorch_transfer.data import TaskData
from botorch_transfer.models.base import SourceConditionedGP, TrainingData
from botorch_transfer.models.frozen_source import frozen_source_posterior
from botorch_transfer.models.source_posterior import SourceLike, SourcePosterior
from botorch_transfer.models.task_column import TaskColumn
from botorch_transfer.models.utils.assorted import (
    default_transfer_kernel,
    refuse_pathwise_sampling,
)
from botorch_transfer.models.utils.loo import exact_loo_posterior
from botorch_transfer.models.utils.ranking import ranking_loss, ranking_weights
from botorch_transfer.models.utils.sources import check_source, own_copy
from botorch_transfer.progress import progress_argument

#: Fewest observations of a source ``TaskData`` (or source model) that RGPE
#: weighs: with fewer, its ranking of the target's points is its prior's.
MIN_SOURCE_POINTS = 2


def _source_size(source: SourceLike) -> int | None:
    r"""How many observations a source holds, or ``None`` where it does not say."""
    if isinstance(source, TaskData):
        return source.n
    inputs = getattr(source, "train_inputs", None)
    if isinstance(inputs, (tuple, list)) and inputs and isinstance(inputs[0], Tensor):
        inputs = inputs[0]
    return (
        inputs.shape[-2] if isinstance(inputs, Tensor) and inputs.dim() >= 2 else None
    )


class RGPE(SourceConditionedGP):
    r"""Ranking-weighted GP ensemble (see the module docs for what is the paper's).

    The trainable part is the target GP (``covar_module``, ``mean_module`` and the
    target noise): ``fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood,
    model))`` fits it, and the weights are recomputed with the fitted
    hyperparameters. The base models are frozen source posteriors.

    ``train_inputs``/``train_targets`` are the target GP's data (outcomes in model
    units, i.e. standardized under an outcome transform), not the ensemble's. The
    target data in the user's units are ``target_X``, ``target_Y`` and
    ``target_Yvar``; give BoTorch's acquisition functions
    ``best_f=model.target_Y.max()`` and ``X_baseline=model.target_X``.

    Args:
        train_X: ``batch_shape x n x d`` target inputs (``n`` may be 0).
        train_Y: ``batch_shape x n x 1`` target observations.
        train_Yvar: Optional known target noise variances; else learned.
        likelihood: Likelihood of the target GP (default: BoTorch's).
        covar_module: Kernel of the target GP (default: a scaled RBF kernel with
            BoTorch's priors).
        mean_module: Prior mean of the target GP (default ``ConstantMean``).
        outcome_transform: ``None`` or ``Standardize(m=1)``, applied to source and
            target outcomes alike; fitted on the target outcomes (so that the
            target GP is fitted as a target-only GP would be, whatever the
            sources), or, below 2 target points, on them and the source
            ``TaskData`` outcomes together.
        input_transform: Input transform, applied as ``SingleTaskGP`` applies it; a
            copy is given to base GPs built from ``TaskData``.
        source: The base models (keyword), one per source task: a list of
            ``TaskData``, fitted single-output BoTorch models or ``SourcePosterior``
            objects, each taken as a single ``source`` of
            :class:`~botorch_transfer.models.delta.DeltaBOModel` is (see there; a
            ``TaskData`` gets a ``SingleTaskGP`` with BoTorch's defaults, fitted
            here).
        num_samples: Draws ``S`` of the ranking loss (the paper: 1000; the BoTorch
            tutorial: 256).
        seed: Seed of the draws (the weights are deterministic given it).
        task_column: The layout of Ax's transfer-learning queries (see
            :class:`~botorch_transfer.models.task_column.TaskColumn`; set by
            ``construct_inputs``).

    Example:
        >>> model = RGPE(train_X, train_Y, source=[TaskData(X1, Y1), TaskData(X2, Y2)])
        >>> fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        >>> model.weights  # one per source, the target's last
        >>> acqf = qLogNoisyExpectedImprovement(model, X_baseline=model.target_X)
    """

    #: Old keyword names the constructor still takes (deprecated), with what
    #: replaces them.
    renamed_arguments: ClassVar[dict[str, str]] = {
        **SourceConditionedGP.renamed_arguments,
        "progress": "progress_bars",
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
        source: SourceLike | Sequence[SourceLike],
        num_samples: int = 256,
        seed: int = 0,
        task_column: TaskColumn | None = None,
        **deprecated: Any,
    ) -> None:
        if not isinstance(num_samples, int) or num_samples < 1:
            raise ValueError(
                f"`num_samples` must be a positive int, got {num_samples!r}."
            )
        self.num_samples = num_samples
        self.seed = seed
        # bars while base models are built from large TaskData (GP fit, cached
        # factor) follow botorch_transfer.progress.progress_bars
        self._progress = True
        self._num_target = train_X.shape[-2] if isinstance(train_X, Tensor) else 0
        with progress_argument(type(self).__name__, deprecated):
            super().__init__(
                train_X,
                train_Y,
                train_Yvar,
                likelihood=likelihood,
                covar_module=covar_module,
                mean_module=mean_module,
                outcome_transform=outcome_transform,
                input_transform=input_transform,
                transfer=source,
                task_column=task_column,
                **deprecated,
            )

    def _prepare_transfer(self, transfer: Any, train_X: Tensor) -> list[SourceLike]:
        sources = list(transfer) if isinstance(transfer, (list, tuple)) else [transfer]
        if not sources:
            raise ValueError("`source` must contain at least one source, got none.")
        for i, s in enumerate(sources):
            if not isinstance(s, (TaskData, Model, SourcePosterior)):
                raise TypeError(
                    f"`source[{i}]` must be a TaskData, a fitted BoTorch Model or a "
                    f"SourcePosterior, got {type(s).__name__}."
                )
            # the shared checks (d, dtype, device, data, an untrained model)
            check_source(s, train_X, f"source[{i}]")
        sources = [own_copy(s) for s in sources]
        sizes = [_source_size(s) for s in sources]
        # one point cannot rank two: its GP's draws at the target inputs are its
        # prior's, and would win ranking draws at random against a target model
        # that itself ranks poorly
        self._too_small = [n is not None and n < MIN_SOURCE_POINTS for n in sizes]
        for i, n in enumerate(sizes):
            if self._too_small[i]:
                warnings.warn(
                    f"`source[{i}]` has {n} observation(s), too few to rank the "
                    f"target's points (RGPE needs at least {MIN_SOURCE_POINTS}): it "
                    "gets weight 0. Give it more observations or leave it out.",
                    UserWarning,
                    stacklevel=4,
                )
        return sources

    def _outcome_reference(self, transfer: list[SourceLike]) -> list[TaskData]:
        r"""The target's outcomes alone once they have a spread (``n >= 2``): the
        target GP is then standardized, and fitted, as a target-only GP would be
        (the base models are mapped by the same affine map, so the ensemble does
        not depend on it); with fewer, the source outcomes too."""
        if self._num_target >= 2:
            return []
        return super()._outcome_reference(transfer)

    def _build_modules(
        self,
        transfer: list[SourceLike],
        train_X: Tensor,
        covar_module: Module | None,
        mean_module: Mean | None,
        input_transform: InputTransform | None,
    ) -> None:
        scale, offset = self.output_scale, self.output_offset
        base = [
            frozen_source_posterior(
                s, scale, offset, input_transform, progress=self._progress
            ).to(train_X)
            for s in transfer
        ]
        self.base_posteriors = ModuleList(base)
        batch_shape = train_X.shape[:-2]
        # derived from the data (recomputed, see `weights`), not state
        uniform = torch.full((*batch_shape, len(base) + 1), 1.0 / (len(base) + 1))
        self.register_buffer("_weights", uniform.to(train_X), persistent=False)
        self.mean_module = (
            mean_module
            if mean_module is not None
            else ConstantMean(batch_shape=batch_shape)
        )
        self.covar_module = (
            covar_module
            if covar_module is not None
            else default_transfer_kernel(train_X.shape[-1], batch_shape=batch_shape)
        )

    def _frozen_modules(self) -> list[Module]:
        return list(self.base_posteriors)

    def custom_fit(
        self, mll: MarginalLogLikelihood, **kwargs: Any
    ) -> MarginalLogLikelihood:
        r"""Called by ``fit_gpytorch_mll``: the target GP's fit, with the frozen base
        models outside the module tree meanwhile. The target's marginal likelihood
        does not use them, but every evaluation of it walks the tree for priors and
        added loss terms, which with many base models cost most of the fit."""
        modules = dict(self._modules)
        del self._modules["base_posteriors"]
        try:
            return super().custom_fit(mll, **kwargs)
        finally:  # back in their place (the order of the state dict's keys)
            self._modules.clear()
            self._modules.update(modules)

    def _training_data(self, X: Tensor, Y: Tensor, Yvar: Tensor) -> TrainingData:
        r"""The target GP's data; the weights follow the new data (see
        :meth:`update_weights`)."""
        self._weights_stale = True
        return TrainingData(X, Y, None if self.learns_target_noise else Yvar)

    # ----------------------------------------------------------------- weights
    @property
    def weights(self) -> Tensor:
        r"""``batch_shape x (K + 1)`` weights: the ``K`` sources, the target last."""
        fitted_with = getattr(self, "_weights_hyperparameters", None)
        if getattr(self, "_weights_stale", True) or self._hyperparameters_changed(
            fitted_with
        ):
            self.update_weights()
        return self._weights

    def loo_posterior(self) -> tuple[Tensor, Tensor]:
        r"""Leave-one-out posteriors of the target GP's ``f`` at its own inputs.

        With ``K_y = K + Sigma_noise`` and ``a = K_y^-1 (y - m)``:
        ``mu_{-j} = y_j - a_j / [K_y^-1]_jj`` and
        ``sigma^2_{-j} = 1 / [K_y^-1]_jj - noise_j`` (the latent ``f``, not ``y``;
        :func:`~botorch_transfer.models.utils.loo.exact_loo_posterior`).

        Returns:
            ``(mean, variance)``, each ``batch x n`` (model units).
        """
        shift, variance, _ = exact_loo_posterior(self)
        return self._target_Y - shift, variance

    def ranking_losses(self, generator: torch.Generator) -> Tensor:
        r"""``batch x (K + 1) x S`` ranking losses of every model's draws."""
        X, y, S = self._target_X, self._target_Y, self.num_samples
        losses = []
        for posterior in self.base_posteriors:
            mean = posterior.mean(X)
            cov = posterior.covariance(X)
            L = psd_safe_cholesky(cov + 1e-8 * torch.eye(X.shape[-2]).to(cov))
            z = torch.randn(S, *mean.shape, generator=generator).to(mean)
            draws = mean + (L @ z.unsqueeze(-1)).squeeze(-1)  # S x batch x n
            losses.append(ranking_loss(draws, y))
        loo_mean, loo_var = self.loo_posterior()
        z = torch.randn(S, *loo_mean.shape, generator=generator).to(loo_mean)
        losses.append(ranking_loss(loo_mean + loo_var.sqrt() * z, y))
        return torch.stack(losses, dim=-1).movedim(0, -1)  # batch x (K+1) x S

    def update_weights(self) -> Tensor:
        r"""Recompute the weights from the target data and current hyperparameters.

        Returns:
            The weights (also stored; see :attr:`weights`).
        """
        generator = torch.Generator().manual_seed(self.seed)
        excluded = torch.tensor([*self._too_small, False])
        with torch.no_grad():
            if self.num_train < 2:  # no pairs to rank: every draw is a tie
                batch = self._target_Y.shape[:-1]
                weights = (~excluded).to(self._target_Y) / (~excluded).sum()
                weights = weights.expand(*batch, -1).clone()
            else:
                losses = self.ranking_losses(generator)
                weights = ranking_weights(losses, generator, excluded)
                weights = weights.to(self._target_Y)
        self._weights = weights
        self._weights_stale = False
        self._weights_hyperparameters = self._hyperparameters()
        return weights

    def _combine_posterior(
        self, gp_posterior: MultivariateNormal, X: Tensor
    ) -> MultivariateNormal:
        r"""``N(sum_i w_i mu_i, sum_i w_i^2 Sigma_i)`` over the base models and the
        target GP (the target's covariance stays lazy)."""
        weights = self.weights
        w_target = weights[..., -1]
        mean = w_target.unsqueeze(-1) * gp_posterior.mean
        covar = gp_posterior.lazy_covariance_matrix
        covar = covar * w_target.pow(2).expand(covar.shape[:-2]).unsqueeze(
            -1
        ).unsqueeze(-1)
        base_cov = 0
        for i, posterior in enumerate(self.base_posteriors):
            w = weights[..., i]
            mean = mean + w.unsqueeze(-1) * posterior.mean(X)
            base_cov = base_cov + w.pow(2)[..., None, None] * posterior.covariance(X)
        return MultivariateNormal(mean, covar + DenseLinearOperator(base_cov))


refuse_pathwise_sampling(RGPE, "they would omit the weighted base models")
