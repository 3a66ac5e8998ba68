r"""A mixture over meta-tasks: the target as an affine map of one meta-task's GP plus a
residual, weighted by how well each explains the target's points.

:class:`MetaTaskMixtureGP` holds no pre-trained prior: one GP per meta-task (a
``SingleTaskGP`` with BoTorch's defaults, fitted once by
:func:`fit_default_meta_task_gps`; cm-BO's Stage 1 GPs,
:class:`~botorch_transfer.priors.MetaTaskPosteriors`, work too) and, on the
target's outcomes standardized by their own mean and standard deviation, one mixture
component per (meta-task ``j``, scale ``a``, residual variance ``rho^2``)::

    y(x) = c + a g_j(x) + a e_j(x) + r(x) + eps,

- ``g_j``: meta-task ``j``'s posterior mean, standardized by that task's outcomes;
- ``e_j ~ GP(0, G_j)``: its posterior covariance in the same units (where the
  meta-task has no data, the target inherits its prior uncertainty);
- ``r ~ GP(0, rho^2 R_j^(1/f^2))``: a residual with the correlation ``R_j`` of the
  task's own prior kernel at lengthscales ``f`` times the task's (how the target
  differs from the task);
- ``eps ~ N(0, sigma^2)``: observation noise (``noise_variance``, or the known
  ``train_Yvar`` in standardized units);
- ``c``: an offset, by generalized least squares given the other terms.

One more candidate, the *average meta-task* ``j = K``, has the meta-tasks' averages
``g_K = mean_j g_j``, ``G_K = mean_j G_j`` and ``R_K = mean_j R_j``: a target like
what the meta-tasks share, rather than like any one of them (with few target points
a single meta-task can fit them by chance).

So component ``k = (j, a, rho^2, f)`` is a GP with mean ``c + a g_j`` and covariance
``C_k = a^2 G_j + rho^2 R_j^(1/f^2)`` (plus noise at observations). The scale ``a``
takes the grid's values and their negations (a target that rises where a meta-task
falls). One more candidate is the *target alone*: a ``SingleTaskGP`` with BoTorch's
defaults fitted to the target's points (``target_model``), for a target unlike every
meta-task.

Each candidate's weight is its marginal likelihood of the target's points (at the
least-squares ``c``; the target model's at its fitted hyperparameters) times its
prior: ``target_alone_prior`` on the target alone; of the rest, ``average_task_prior``
on the average meta-task and the remainder shared equally by the meta-tasks;
``log |a| ~ N(0, 1)`` over the grid of scales with ``negative_scale_prior`` on the
negations; uniform over residual settings. The ``max_components`` heaviest meta-task
components and the target model are conditioned on the target's points and the
mixture is moment-matched to one Gaussian (mean ``sum_k w_k m_k``, covariance
``sum_k w_k (S_k + (m_k - m)(m_k - m)^T)``), so that every BoTorch acquisition
function that does not fantasize takes it. A target like one meta-task follows it
(rescaled, shifted, or negated); a target unlike all of them follows its own GP.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from botorch.acquisition.objective import PosteriorTransform
from botorch.exceptions.errors import UnsupportedError
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.model import Model
from botorch.models.transforms.input import Normalize
from botorch.models.transforms.outcome import Standardize
from botorch.posteriors.gpytorch import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal
from gpytorch.mlls import ExactMarginalLogLikelihood
from linear_operator.operators import DenseLinearOperator
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor
from torch.nn import Module

from botorch_transfer._deprecation import options_argument, renamed_keywords
from botorch_transfer.data import TaskData, validate_task_set
from botorch_transfer.priors import MetaTaskPosteriors
from botorch_transfer.priors.meta_task_gps import padded_meta_task_fields, task_groups
from botorch_transfer.validation import (
    check_bounds,
    check_query_inputs,
    validate_training_data,
    warn_if_below_standardize_floor,
)

#: Scales ``a`` of a meta-task's standardized posterior mean (a grid with
#: ``log a ~ N(0, 1)`` over it).
DEFAULT_SCALES = tuple(math.exp(v) for v in torch.linspace(-1.5, 1.5, 7).tolist())
#: Variances ``rho^2`` of the residual GP, in units of the target's outcome variance.
DEFAULT_RESIDUAL_VARIANCES = (0.02, 0.1, 0.5)
#: Lengthscales of the residual GP relative to the meta-task's own (a target unlike
#: every meta-task may vary faster than they do).
DEFAULT_RESIDUAL_LENGTHSCALE_FACTORS = (1.0, 0.5, 0.25)
#: Observation noise variance of the target, in units of its outcome variance, when
#: ``train_Yvar`` is not given.
DEFAULT_NOISE_VARIANCE = 0.01
#: Components conditioned on the target's points (the heaviest ones).
DEFAULT_MAX_COMPONENTS = 64
#: Prior probability of the average meta-task (the meta-tasks share the rest): as
#: likely that the target is like what the meta-tasks share as like one of them.
DEFAULT_AVERAGE_TASK_PRIOR = 0.5
#: Prior probability that the target follows a meta-task with its sign flipped
#: (a negative scale ``a``).
DEFAULT_NEGATIVE_SCALE_PRIOR = 0.1
#: Prior probability that the target is unlike every meta-task: its own GP.
DEFAULT_TARGET_ALONE_PRIOR = 0.1


def _positive_grid(values: Sequence[float] | Tensor, name: str, strict: bool) -> Tensor:
    grid = torch.as_tensor(values, dtype=torch.float64).reshape(-1)
    bad = (grid <= 0) if strict else (grid < 0)
    if grid.numel() == 0 or not torch.isfinite(grid).all() or bad.any():
        kind = "positive" if strict else "non-negative"
        raise ValueError(
            f"`{name}` must be a non-empty sequence of finite {kind} numbers, got "
            f"{values!r}."
        )
    return grid


@dataclass(frozen=True)
class ComponentGrid:
    r"""The grid of the mixture's components: each meta-task (and the average one)
    at every scale ``a``, residual variance ``rho^2`` and residual lengthscale
    factor ``f``.

    Args:
        scales: The scales ``a`` of a meta-task's standardized posterior (positive).
        residual_variances: The residual variances ``rho^2``, in units of the
            target's outcome variance (non-negative).
        residual_lengthscale_factors: The residual's lengthscales relative to the
            meta-task's own (positive): the residual correlation is ``R_j`` raised
            to the power ``1 / f^2`` elementwise (for an RBF kernel, the kernel at
            lengthscales ``f`` times the task's; for other kernels a valid
            correlation where ``1 / f^2`` is an integer).
    """

    scales: Sequence[float] | Tensor = DEFAULT_SCALES
    residual_variances: Sequence[float] | Tensor = DEFAULT_RESIDUAL_VARIANCES
    residual_lengthscale_factors: Sequence[float] | Tensor = (
        DEFAULT_RESIDUAL_LENGTHSCALE_FACTORS
    )

    def __post_init__(self) -> None:
        # stored as tuples of floats: comparable, and the same on every device
        for name, strict in (
            ("scales", True),
            ("residual_variances", False),
            ("residual_lengthscale_factors", True),
        ):
            grid = _positive_grid(getattr(self, name), name, strict=strict)
            object.__setattr__(self, name, tuple(grid.tolist()))


class DefaultMetaTaskPosteriors(MetaTaskPosteriors):
    r"""Frozen posteriors of ``K`` meta-task GPs with BoTorch's default kernel.

    As :class:`~botorch_transfer.priors.MetaTaskPosteriors` (cm-BO's Stage 1
    bank: padded tasks, posterior means, features and prior kernels of every task in
    one call), with the kernel of a default ``SingleTaskGP``: an ARD RBF kernel with
    unit variance on inputs normalized by ``bounds``, ``k_j(x, x') = exp(-|x - x'|^2_j
    / 2)`` with ``|z|^2_j = sum_i (z_i / l_ji)^2``. Built by
    :func:`fit_default_meta_task_gps`.

    Args:
        X: ``K x n_max x d`` raw training inputs (padded).
        Z_targets: ``K x n_max`` standardized training outcomes (padded with 0).
        mask: ``K x n_max`` bool, True for real points.
        noise: ``K x n_max`` noise variances in standardized units (padding: any).
        lengthscale: ``K x d`` RBF lengthscales (normalized inputs).
        constant: ``K`` constant prior means (standardized units).
        y_offset: ``K`` outcome offsets (user units).
        y_scale: ``K`` outcome scales (user units).
        bounds: ``2 x d`` input bounds used for normalization.
    """

    FIELDS: ClassVar[tuple[str, ...]] = (
        "X",
        "Z_targets",
        "mask",
        "noise",
        "lengthscale",
        "outputscale",
        "constant",
        "y_offset",
        "y_scale",
        "bounds",
    )

    def __init__(
        self,
        X: Tensor,
        Z_targets: Tensor,
        mask: Tensor,
        noise: Tensor,
        lengthscale: Tensor,
        constant: Tensor,
        y_offset: Tensor,
        y_scale: Tensor,
        bounds: Tensor,
    ) -> None:
        Module.__init__(self)
        outputscale = torch.ones_like(constant)  # BoTorch's default has no scale
        values = (X, Z_targets, mask, noise, lengthscale, outputscale, constant)
        values += (y_offset, y_scale, bounds)
        self._store(values)

    def _kernel(self, Z1: Tensor, Z2: Tensor, batch_dims: int = 0) -> Tensor:
        view = (self.num_tasks,) + (1,) * batch_dims + (1, self.X.shape[-1])
        ls = self.lengthscale.reshape(view)
        A, B = Z1 / ls, Z2 / ls
        # |a - b|^2 expanded: no K x n1 x n2 x d tensor of differences
        sq = (
            A.pow(2).sum(-1).unsqueeze(-1)
            + B.pow(2).sum(-1).unsqueeze(-2)
            - 2 * A @ B.transpose(-1, -2)
        )
        return torch.exp(-0.5 * sq.clamp_min(0))


def fit_default_meta_task_gps(
    tasks: Sequence[TaskData], bounds: Tensor
) -> DefaultMetaTaskPosteriors:
    r"""Fit a ``SingleTaskGP`` with BoTorch's defaults to every meta-task and freeze
    their posteriors.

    Tasks with the same number of points and kind of noise (known ``Yvar`` or not)
    are fitted together as one batched ``SingleTaskGP`` (``fit_gpytorch_mll``; the
    batched marginal likelihood is a sum of independent per-task terms).

    Args:
        tasks: The meta-tasks.
        bounds: ``2 x d`` input bounds (inputs are normalized with them, as
            ``Normalize(d, bounds=bounds)`` does).

    Returns:
        The frozen posteriors, in the order of ``tasks``.
    """
    d, fitted = tasks[0].d, []
    for idx in task_groups(tasks):
        group = [tasks[j] for j in idx]
        unknown_noise = group[0].Yvar is None
        model = SingleTaskGP(
            torch.stack([t.X for t in group]),
            torch.stack([t.Y for t in group]),
            None if unknown_noise else torch.stack([t.Yvar for t in group]),
            input_transform=Normalize(d, bounds=bounds),
            outcome_transform=Standardize(m=1, batch_shape=torch.Size([len(idx)])),
        )
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        fitted.append((idx, model))

    def kernel_hyperparameters(model: SingleTaskGP, g: int) -> dict[str, Tensor]:
        return {"lengthscale": model.covar_module.lengthscale[g].reshape(d)}

    fields = padded_meta_task_fields(tasks, fitted, kernel_hyperparameters)
    return DefaultMetaTaskPosteriors(**fields, bounds=bounds)


class MetaTaskMixtureGP(Model):
    r"""The target as one of the meta-tasks, rescaled, shifted and corrected by a
    residual GP: a mixture weighted by each component's marginal likelihood of the
    target's points (see the module docstring for the model).

    Build it every BO iteration from the target's data: the only fit is the target
    model's (the meta-tasks' GPs are fitted once, by :func:`fit_default_meta_task_gps`).
    Give the fitted meta-tasks to the next iteration's model
    (``meta_tasks=model.meta_tasks``) instead of refitting them.

    Args:
        train_X: ``n x d`` target inputs (``n >= 1``: with no target point there is
            nothing to weigh the meta-tasks by; start from a point of the best
            meta-task configurations or a space-filling design).
        train_Y: ``n x 1`` target observations.
        train_Yvar: Optional ``n x 1`` known observation noise variances (otherwise
            ``noise_variance`` times the target's outcome variance).
        meta_tasks: The meta-tasks (keyword): a sequence of ``TaskData`` (a
            ``SingleTaskGP`` with BoTorch's defaults is fitted to each, inputs
            normalized by ``bounds``) or the ``MetaTaskPosteriors`` of fitted GPs
            (``model.meta_tasks`` of an earlier model, or cm-BO's Stage 1 GPs).
        bounds: ``2 x d`` bounds of the input space, used to normalize inputs when
            ``meta_tasks`` are ``TaskData`` (default: the unit cube).
        grid: The grid of components (a :class:`ComponentGrid`: scales, residual
            variances and residual lengthscale factors; default
            ``ComponentGrid()``). (``scales``, ``residual_variances`` and
            ``residual_lengthscale_factors``, its fields as keywords, are
            deprecated.)
        noise_variance: The target's observation noise variance in units of its
            outcome variance, when ``train_Yvar`` is not given.
        max_components: How many of the heaviest components form the posterior.
        average_task_prior: Prior probability of the average meta-task among the
            meta-task candidates (``0``: the meta-tasks alone; the meta-tasks share
            ``1 - average_task_prior``).
        negative_scale_prior: Prior probability that the target follows a
            meta-task with its sign flipped (``0``: positive scales only).
        target_alone_prior: Prior probability of the target alone, its own
            ``SingleTaskGP`` (``0``: the meta-task candidates only, no fit).

    Example:
        >>> model = MetaTaskMixtureGP(train_X, train_Y, meta_tasks=related_tasks)
        >>> acqf = UpperConfidenceBound(model, beta=1.0)
        >>> model.task_weights  # how much each meta-task (and their average) explains
        >>> model.target_alone_weight  # how much the target's own GP explains
        >>> next_model = MetaTaskMixtureGP(X, Y, meta_tasks=model.meta_tasks)
    """

    #: Old keyword names the constructor still takes (deprecated), with what
    #: replaces them.
    renamed_arguments: ClassVar[dict[str, str]] = dict.fromkeys(
        ("scales", "residual_variances", "residual_lengthscale_factors"), "grid"
    )

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        train_Yvar: Tensor | None = None,
        *,
        meta_tasks: Sequence[TaskData] | MetaTaskPosteriors,
        bounds: Tensor | None = None,
        grid: ComponentGrid | None = None,
        noise_variance: float = DEFAULT_NOISE_VARIANCE,
        max_components: int = DEFAULT_MAX_COMPONENTS,
        average_task_prior: float = DEFAULT_AVERAGE_TASK_PRIOR,
        negative_scale_prior: float = DEFAULT_NEGATIVE_SCALE_PRIOR,
        target_alone_prior: float = DEFAULT_TARGET_ALONE_PRIOR,
        **deprecated: Any,
    ) -> None:
        grid = self._grid_argument(grid, deprecated)
        super().__init__()
        validate_training_data(train_X, train_Y, train_Yvar)
        if train_X.dim() != 2:
            raise ValueError(
                "`train_X` must be an n x d tensor (one target task), got shape "
                f"{tuple(train_X.shape)}."
            )
        if train_X.shape[0] == 0:
            raise ValueError(
                "`train_X` has no points: MetaTaskMixtureGP weighs the meta-tasks by "
                "the target's observations; evaluate a first point (e.g. the best "
                "configuration of the meta-tasks) before building it."
            )
        if not isinstance(noise_variance, (int, float)) or not noise_variance > 0:
            raise ValueError(
                f"`noise_variance` must be a positive number, got {noise_variance!r}."
            )
        if (
            not isinstance(max_components, int)
            or isinstance(max_components, bool)
            or max_components < 1
        ):
            raise ValueError(
                f"`max_components` must be a positive int, got {max_components!r}."
            )
        for name, value, rest in (
            ("average_task_prior", average_task_prior, "the meta-tasks share the rest"),
            (
                "negative_scale_prior",
                negative_scale_prior,
                "positive scales have the rest",
            ),
            ("target_alone_prior", target_alone_prior, "the meta-tasks have the rest"),
        ):
            if (
                not isinstance(value, (int, float))
                or isinstance(value, bool)
                or not 0 <= value < 1
            ):
                raise ValueError(
                    f"`{name}` must be a number in [0, 1) ({rest}), got {value!r}."
                )
        like = {"dtype": train_X.dtype, "device": train_X.device}
        self.grid = grid
        self._register(
            "_scales", torch.tensor(grid.scales, dtype=torch.float64).to(**like)
        )
        factors = torch.tensor(grid.residual_lengthscale_factors, dtype=torch.float64)
        # an RBF correlation at lengthscales l * f is the correlation's power 1 / f^2
        self._register("_residual_powers", factors.pow(-2).to(**like))
        self._register(
            "_residual_variances",
            torch.tensor(grid.residual_variances, dtype=torch.float64).to(**like),
        )
        self.noise_variance = float(noise_variance)
        self.max_components = max_components
        self.average_task_prior = float(average_task_prior)
        self.negative_scale_prior = float(negative_scale_prior)
        self.target_alone_prior = float(target_alone_prior)
        self.meta_tasks = self._meta_task_posteriors(meta_tasks, bounds, train_X)
        # buffers (moved by `.to()`), derived from the data, not state
        self._register("train_X", train_X)
        self._register("train_Y", train_Y)
        self._register("train_Yvar", train_Yvar)
        # the target's own standardization (BoTorch's: std 1 for a single point)
        self.outcome_transform = Standardize(m=1)
        warn_if_below_standardize_floor(self.outcome_transform, train_Y)
        y, yvar = self.outcome_transform(train_Y, train_Yvar)
        self.outcome_transform.eval()
        y = y.squeeze(-1)
        noise = (
            torch.full_like(y, self.noise_variance)
            if yvar is None
            else yvar.squeeze(-1)
        )
        self._register("_noise", noise)
        self.target_model = (
            self._fit_target_model(train_X, y, yvar) if target_alone_prior > 0 else None
        )
        with torch.no_grad():
            self._fit_components(train_X, y, noise)

    # ------------------------------------------------------------------ set-up
    @staticmethod
    def _grid_argument(
        grid: ComponentGrid | None, given: dict[str, Any]
    ) -> ComponentGrid:
        r"""``grid``, or the grid its deprecated keywords in ``given`` fill."""
        grid = options_argument("MetaTaskMixtureGP", "grid", grid, ComponentGrid, given)
        renamed_keywords("MetaTaskMixtureGP", given, {})  # names any other keyword
        return grid

    @staticmethod
    def _meta_task_posteriors(
        meta_tasks: Sequence[TaskData] | MetaTaskPosteriors,
        bounds: Tensor | None,
        train_X: Tensor,
    ) -> MetaTaskPosteriors:
        d = train_X.shape[-1]
        if isinstance(meta_tasks, MetaTaskPosteriors):
            if bounds is not None:
                raise ValueError(
                    "`bounds` applies to meta-tasks given as TaskData; fitted "
                    "MetaTaskPosteriors keep the bounds they were fitted with."
                )
            posteriors = meta_tasks
        elif isinstance(meta_tasks, (list, tuple)):
            tasks = validate_task_set(meta_tasks, "meta_tasks")
            if tasks[0].X.dtype != train_X.dtype:
                raise TypeError(
                    f"`meta_tasks` have dtype {tasks[0].X.dtype} but `train_X` has "
                    f"{train_X.dtype}; use one dtype."
                )
            if tasks[0].d != d:
                raise ValueError(
                    f"`meta_tasks` have d={tasks[0].d} inputs but `train_X` has d={d}."
                )
            if bounds is None:
                bounds = torch.stack([torch.zeros(d), torch.ones(d)]).to(train_X)
            bounds = check_bounds(bounds, d, train_X)
            posteriors = fit_default_meta_task_gps(tasks, bounds)
        else:
            raise TypeError(
                "`meta_tasks` must be a list of TaskData or MetaTaskPosteriors, got "
                f"{type(meta_tasks).__name__}."
            )
        if posteriors.X.shape[-1] != d:
            raise ValueError(
                f"`meta_tasks` have d={posteriors.X.shape[-1]} inputs but `train_X` "
                f"has d={d}."
            )
        if posteriors.X.dtype != train_X.dtype or posteriors.X.device != (
            train_X.device
        ):
            raise ValueError(
                f"`meta_tasks` are {posteriors.X.dtype} on {posteriors.X.device} but "
                f"`train_X` is {train_X.dtype} on {train_X.device}."
            )
        return posteriors

    def _fit_target_model(
        self, X: Tensor, y: Tensor, yvar: Tensor | None
    ) -> SingleTaskGP:
        r"""The target alone: a ``SingleTaskGP`` with BoTorch's defaults on the
        standardized outcomes (so no outcome transform of its own), inputs normalized
        by the meta-tasks' bounds, fitted by ``fit_gpytorch_mll`` and frozen."""
        model = SingleTaskGP(
            X,
            y.unsqueeze(-1),
            yvar,
            input_transform=Normalize(X.shape[-1], bounds=self.meta_tasks.bounds),
            outcome_transform=None,
        )
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        model.requires_grad_(False)
        return model.eval()

    def _target_model_log_likelihood(self, X: Tensor, y: Tensor) -> Tensor:
        r"""The target model's log marginal likelihood of the (standardized)
        target points at its fitted hyperparameters."""
        model = self.target_model
        inputs = model.input_transform(X)
        prior = model.likelihood(model.forward(inputs), inputs)
        return prior.log_prob(y)

    def standardized_means(self, X: Tensor) -> Tensor:
        r"""Every meta-task's posterior mean ``g_j`` at flat ``N x d`` inputs,
        standardized by its own outcomes: ``K x N``."""
        return self._standardized(self.meta_tasks.means(X))

    def _standardized(self, means: Tensor) -> Tensor:
        post = self.meta_tasks
        return (means - post.y_offset.unsqueeze(-1)) / post.y_scale.unsqueeze(-1)

    @staticmethod
    def _with_average(per_task: Tensor) -> Tensor:
        r"""``K x ...`` per meta-task to ``(K + 1) x ...``, their average last."""
        return torch.cat([per_task, per_task.mean(0, keepdim=True)])

    def _covariances(
        self, X1: Tensor, X2: Tensor, features1: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        r"""``(G_j, R_j)`` between flat ``N1 x d`` and ``N2 x d`` inputs, each
        ``K x N1 x N2``: the standardized posterior covariance and the prior
        kernel's correlation (``features1``: the bank's features at ``X1``, where
        already computed)."""
        post = self.meta_tasks
        features1 = post.features(X1) if features1 is None else features1
        prior = post.prior_kernel(X1, X2)
        G = prior - features1.transpose(-1, -2) @ post.features(X2)
        return G, prior / post.outputscale.reshape(-1, 1, 1)

    def _fit_components(self, X: Tensor, y: Tensor, noise: Tensor) -> None:
        r"""Every component's marginal likelihood (one residual setting at a time, to
        bound the memory); the heaviest components conditioned."""
        K = self.meta_tasks.num_tasks + 1  # the meta-tasks and their average
        signed = torch.cat([self._scales, -self._scales])  # scales, then negations
        A, P = signed.numel(), self._residual_variances.numel()
        F = self._residual_powers.numel()
        g = self._with_average(self.standardized_means(X))  # K x n
        G, R = (self._with_average(M) for M in self._covariances(X, X))  # K x n x n
        tasks = torch.arange(K, device=X.device).repeat_interleave(A)
        scales = signed.repeat(K)
        like = {"dtype": X.dtype, "device": X.device}
        loglik = torch.empty(P, F, K * A, **like)
        for r, rho2 in enumerate(self._residual_variances):
            for f, power in enumerate(self._residual_powers):
                loglik[r, f] = self._components(
                    g, G, R, y, noise, tasks, scales, rho2.expand(K * A), power
                )[0]
        # K x A x P x F, the order of `component_weights`
        loglik = loglik.reshape(P, F, K, A).permute(2, 3, 0, 1)
        # normalized priors: the meta-tasks' evidence is weighed against the
        # target model's
        p = self.average_task_prior
        task_prior = torch.full((K,), (1 - p) / (K - 1), **like)
        task_prior[-1] = p
        magnitude = -0.5 * self._scales.log().pow(2)  # log |a| ~ N(0, 1) on the grid
        magnitude = magnitude - magnitude.logsumexp(0)
        negative = torch.tensor(self.negative_scale_prior, **like)
        sign = torch.cat(
            [(1 - negative).log().expand(A // 2), negative.log().expand(A // 2)]
        )
        log_prior = (
            task_prior.log().reshape(K, 1, 1, 1)
            + (magnitude.repeat(2) + sign).reshape(1, A, 1, 1)
            - math.log(P * F)
        )
        log_joint = (loglik + log_prior).reshape(-1)
        weights = torch.softmax(log_joint, dim=-1)  # given a meta-task component
        alone = torch.zeros((), **like)
        if self.target_model is not None:
            log_alone = self._target_model_log_likelihood(X, y) + math.log(
                self.target_alone_prior
            )
            evidence = log_joint.logsumexp(0) + math.log1p(-self.target_alone_prior)
            alone = torch.sigmoid(log_alone - evidence)
        top = weights.argsort(descending=True)[: self.max_components]
        task, rest = top // (A * P * F), top % (A * P * F)
        scale = signed[rest // (P * F)]
        rho2 = self._residual_variances[(rest // F) % P]
        power = self._residual_powers[rest % F]
        _, offset, alpha, chol = self._components(
            g, G, R, y, noise, task, scale, rho2, power
        )
        derived = {
            "_log_likelihoods": loglik,
            "_component_weights": (1 - alone) * weights.reshape(K, A, P, F),
            "_target_alone_weight": alone,
            "_top_task": task,
            "_top_scale": scale,
            "_top_rho2": rho2,
            "_top_power": power,
            "_top_weight": (1 - alone) * weights[top] / weights[top].sum(),
            "_top_offset": offset,
            "_top_alpha": alpha,
            "_top_chol": chol,
        }
        for name, value in derived.items():
            self._register(name, value)

    @staticmethod
    def _components(
        g: Tensor,
        G: Tensor,
        R: Tensor,
        y: Tensor,
        noise: Tensor,
        task: Tensor,
        scale: Tensor,
        rho2: Tensor,
        power: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        r"""Components ``(task, scale, rho2, power)`` (``M`` each) at the target's
        points: log marginal likelihood at the least-squares offset ``c``, ``c``,
        ``C^-1 (y - a g - c)`` and the Cholesky factor of ``C`` (``M``, ``M``,
        ``M x n``, ``M x n x n``)."""
        n = y.shape[-1]
        a = scale.reshape(-1, 1, 1)
        C = a.pow(2) * G[task] + rho2.reshape(-1, 1, 1) * R[task].pow(
            power.reshape(-1, 1, 1) if power.dim() else power
        )
        L = psd_safe_cholesky(C + torch.diag_embed(noise))
        shifted = y - a.squeeze(-1) * g[task]  # y - a g_j: M x n
        ones = torch.ones_like(shifted)
        solve = torch.cholesky_solve(torch.stack([shifted, ones], -1), L)
        # c by generalized least squares: (1' C^-1 (y - a g)) / (1' C^-1 1)
        c = solve[..., 0].sum(-1) / solve[..., 1].sum(-1)
        alpha = solve[..., 0] - c.unsqueeze(-1) * solve[..., 1]  # C^-1 (y - a g - c)
        quad = ((shifted - c.unsqueeze(-1)) * alpha).sum(-1)
        logdet = 2 * L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        loglik = -0.5 * (quad + logdet + n * math.log(2 * math.pi))
        return loglik, c, alpha, L

    def _register(self, name: str, value: Tensor | None) -> None:
        self.register_buffer(name, value, persistent=False)

    # ------------------------------------------------------------- properties
    @property
    def num_outputs(self) -> int:
        return 1

    @property
    def batch_shape(self) -> torch.Size:
        return torch.Size([])

    @property
    def target_X(self) -> Tensor:
        r"""The target inputs (``X_baseline`` of noisy acquisition functions)."""
        return self.train_X

    @property
    def target_Y(self) -> Tensor:
        r"""The target observations in the user's units (``best_f``'s source)."""
        return self.train_Y

    @property
    def task_weights(self) -> Tensor:
        r"""``K + 1`` posterior probabilities of the meta-tasks and, last, of their
        average (over all components, summed over scales and residual settings; the
        rest, ``target_alone_weight``, is the target model's)."""
        return self._component_weights.sum(dim=(-1, -2, -3))

    @property
    def component_weights(self) -> Tensor:
        r"""``(K + 1) x 2 len(scales) x len(residual_variances) x
        len(residual_lengthscale_factors)`` posterior probabilities of the
        components (the average meta-task last; the scales, then their negations)."""
        return self._component_weights

    @property
    def target_alone_weight(self) -> Tensor:
        r"""Posterior probability that the target is unlike every meta-task (its
        own GP, ``target_model``; 0 with ``target_alone_prior=0``)."""
        return self._target_alone_weight

    # -------------------------------------------------------------- posterior
    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: PosteriorTransform | None = None,
    ) -> GPyTorchPosterior:
        r"""The moment-matched mixture at ``batch_shape x q x d`` inputs.

        Args:
            X: The inputs.
            output_indices: ``None`` or ``[0]`` (one output).
            observation_noise: Add the noise of a new observation (``True``: the
                model's noise variance, the mean of ``train_Yvar`` where given), or
                a ``batch_shape x q x 1`` tensor of noise variances (user units).
            posterior_transform: Applied to the posterior.

        Returns:
            A ``GPyTorchPosterior`` (user units).
        """
        check_query_inputs(X, self.train_X.shape[-1])
        if output_indices not in (None, [0]):
            raise ValueError(
                f"`output_indices` must be None or [0] (one output), got "
                f"{output_indices!r}."
            )
        if X.dtype != self.train_X.dtype or X.device != self.train_X.device:
            raise ValueError(
                f"`X` is {X.dtype} on {X.device} but the model's data are "
                f"{self.train_X.dtype} on {self.train_X.device}."
            )
        mean, cov = self._mixture(X)
        if observation_noise is True:
            noise = self._noise.mean() * torch.ones_like(mean)
            cov = cov + torch.diag_embed(noise)
        elif isinstance(observation_noise, Tensor):
            stdvs_sq = self.outcome_transform.stdvs.pow(2).squeeze()
            noise = observation_noise.squeeze(-1) / stdvs_sq
            cov = cov + torch.diag_embed(noise.expand_as(mean))
        # lazy: a joint covariance at observed points can be singular to rounding;
        # sampling factorizes it with jitter (psd_safe_cholesky), as for BoTorch's GPs
        posterior = GPyTorchPosterior(
            MultivariateNormal(mean, DenseLinearOperator(cov))
        )
        posterior = self.outcome_transform.untransform_posterior(posterior)
        if posterior_transform is not None:
            posterior = posterior_transform(posterior)
        return posterior

    def condition_on_observations(self, X: Tensor, Y: Tensor, **kwargs: Any) -> Model:
        r"""Not supported: the mixture's components and weights are chosen from one
        target data set, and a batch of fantasy data sets has no one choice."""
        raise UnsupportedError(
            "MetaTaskMixtureGP cannot be conditioned on fantasy observations, so "
            "acquisition functions that fantasize (qKnowledgeGradient, "
            "qMaxValueEntropy, qJointEntropySearch) do not apply; use qLogNEI, qUCB, "
            "UCB or LogEI, or build a new model on the new data."
        )

    def fantasize(self, X: Tensor, *args: Any, **kwargs: Any) -> Model:
        r"""Not supported (see :meth:`condition_on_observations`)."""
        return self.condition_on_observations(X, None)

    def _mixture(self, X: Tensor) -> tuple[Tensor, Tensor]:
        r"""Mean ``batch x q`` and covariance ``batch x q x q`` of the moment-matched
        mixture (standardized units)."""
        batch, q, d = X.shape[:-2], X.shape[-2], X.shape[-1]
        Xb = X.reshape(-1, q, d)  # b x q x d
        b, n = Xb.shape[0], self.train_X.shape[0]
        flat = Xb.reshape(-1, d)
        post = self.meta_tasks
        task, a, rho2 = self._top_task, self._top_scale, self._top_rho2
        # one evaluation of the bank's cross-covariance for the means and features
        means_flat, features = post.means_and_features(flat)
        g = self._with_average(self._standardized(means_flat))[task]
        g = g.reshape(-1, b, q)  # M x b x q
        G_cross, R_cross = (
            self._with_average(M)
            for M in self._covariances(flat, self.train_X, features)
        )  # (K + 1) x bq x n
        power = self._top_power
        K_cross = a.reshape(-1, 1, 1).pow(2) * G_cross[task] + rho2.reshape(
            -1, 1, 1
        ) * R_cross[task].pow(power.reshape(-1, 1, 1))  # M x bq x n
        # the q x q blocks of each batch: prior kernel minus the explained part
        prior = post.prior_kernel(Xb, Xb)  # K x b x q x q
        v = features.reshape(post.num_tasks, -1, b, q)
        G_own = self._with_average(prior - torch.einsum("kmbq,kmbp->kbqp", v, v))
        R_own = self._with_average(prior / post.outputscale.reshape(-1, 1, 1, 1))
        K_own = a.reshape(-1, 1, 1, 1).pow(2) * G_own[task] + rho2.reshape(
            -1, 1, 1, 1
        ) * R_own[task].pow(power.reshape(-1, 1, 1, 1))  # M x b x q x q
        means = (
            self._top_offset.reshape(-1, 1, 1)
            + a.reshape(-1, 1, 1) * g
            + (K_cross @ self._top_alpha.unsqueeze(-1)).reshape(-1, b, q)
        )
        W = torch.linalg.solve_triangular(
            self._top_chol, K_cross.transpose(-1, -2), upper=False
        ).reshape(-1, n, b, q)  # L^-1 K_X*
        covs = K_own - torch.einsum("mnbq,mnbp->mbqp", W, W)
        w = self._top_weight
        if self.target_model is not None:
            alone = self.target_model.posterior(Xb)  # standardized units
            means = torch.cat([means, alone.mean.squeeze(-1).unsqueeze(0)])
            covs = torch.cat([covs, alone.distribution.covariance_matrix.unsqueeze(0)])
            w = torch.cat([w, self._target_alone_weight.reshape(1)])
        mean = torch.einsum("m,mbq->bq", w, means)
        spread = means - mean
        cov = torch.einsum("m,mbqp->bqp", w, covs) + torch.einsum(
            "m,mbq,mbp->bqp", w, spread, spread
        )
        return mean.reshape(*batch, q), cov.reshape(*batch, q, q)
