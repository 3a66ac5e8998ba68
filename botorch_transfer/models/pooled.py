r"""What GPs over pooled ``[source; target]`` data share (Env-GP, Diff-GP)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import gpytorch
import torch
from botorch.models import SingleTaskGP
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import Standardize
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.means import ConstantMean, Mean
from gpytorch.mlls import ExactMarginalLogLikelihood
from linear_operator.operators import DenseLinearOperator
from torch import Tensor
from torch.nn import Module

from botorch_transfer._deprecation import renamed_keywords
from botorch_transfer.data import TaskData
from botorch_transfer.models.base import SourceConditionedGP, TrainingData
from botorch_transfer.models.frozen_source import FIT_MAX_POINTS, fit_subset_rows
from botorch_transfer.models.likelihoods import TaskIndexedGaussianLikelihood
from botorch_transfer.models.utils.assorted import (
    default_transfer_kernel,
    refuse_pathwise_sampling,
)
from botorch_transfer.models.utils.caching import same_tensors
from botorch_transfer.models.utils.low_rank import (
    FITCMultivariateNormal,
    farthest_point_indices,
    fitc_covariance,
    fitc_predictive_weights,
    nystrom_root,
)
from botorch_transfer.models.utils.sources import as_source_list
from botorch_transfer.progress import fit_mll_with_progress
from botorch_transfer.validation import check_integer

#: How a pooled GP does its linear algebra (see ``PooledTransferGP``).
INFERENCE_MODES = ("exact", "low_rank")
#: Default number of source points used as inducing inputs by ``"low_rank"``.
DEFAULT_NUM_INDUCING = 256


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


def source_fitted_kernel(
    source: TaskData | Sequence[TaskData],
    input_transform: InputTransform | None = None,
    covar_module: Kernel | None = None,
    fit_max_points: int | None = FIT_MAX_POINTS,
    progress: bool = True,
) -> Kernel:
    r"""A pooled model's kernel fitted once on the source data, then frozen.

    Shilton et al. keep the kernel fixed while the target data arrive. Passed as
    ``covar_module`` of :class:`~botorch_transfer.models.env_gp.EnvGP` or
    :class:`~botorch_transfer.models.diff_gp.DiffGP`, this kernel makes
    ``fit_gpytorch_mll`` fit only what the target data inform (stretch noise, source
    map, prior mean, target noise) and lets ``inference="low_rank"`` factor the kernel
    once per model instead of at every optimizer step (an order of magnitude less
    time per BO iteration at a few thousand source points). The same kernel object
    can serve every model of a BO loop.

    The kernel is that of a ``SingleTaskGP`` with ``Standardize(m=1)`` outcomes,
    fitted with BoTorch's defaults on the pooled source points: its outputscale is in
    standardized source units, which matches a transfer model with
    ``outcome_transform=Standardize(m=1)`` while the target points are few against
    the source's (the model standardizes source and target outcomes together).

    Args:
        source: A ``TaskData`` or a list of them (pooled; sources on one scale; the
            noise is learned unless every source has its ``Yvar``).
        input_transform: The transfer model's input transform (a copy is used).
        covar_module: The kernel to fit (a copy; default: the pooled models'
            :func:`~botorch_transfer.models.base.default_transfer_kernel`).
        fit_max_points: Fit on a fixed random subset of this many source points (an
            exact fit costs ``O(N^3)`` per step); ``None`` fits on all.
        progress: Show a progress bar over the fit when it takes a few seconds.

    Returns:
        A fitted copy of the kernel whose parameters do not require gradients.

    Example:
        >>> kernel = source_fitted_kernel(TaskData(X_src, Y_src, Yvar_src))
        >>> model = EnvGP(X, Y, source=TaskData(X_src, Y_src, Yvar_src),
        ...               covar_module=kernel, inference="low_rank",
        ...               outcome_transform=Standardize(m=1))
        >>> mll = ExactMarginalLogLikelihood(model.likelihood, model)
        >>> mll = fit_gpytorch_mll(mll)
    """
    first = source[0] if isinstance(source, (list, tuple)) and source else source
    reference = first.X if isinstance(first, TaskData) else None
    sources = as_source_list(source, reference, allow_models=False)
    X = torch.cat([s.X for s in sources])
    Y = torch.cat([s.Y for s in sources])
    known = all(s.Yvar is not None for s in sources)
    Yvar = torch.cat([s.Yvar for s in sources]) if known else None
    rows = fit_subset_rows(X.shape[0], fit_max_points, X.device)
    if rows is not None:
        X, Y = X[rows], Y[rows]
        Yvar = None if Yvar is None else Yvar[rows]
    kernel = (
        default_transfer_kernel(X.shape[-1])
        if covar_module is None
        else copy.deepcopy(covar_module)
    )
    gp = SingleTaskGP(
        X,
        Y,
        Yvar,
        covar_module=kernel.to(X),
        input_transform=copy.deepcopy(input_transform),
        outcome_transform=Standardize(m=1),
    )
    fit_mll_with_progress(
        ExactMarginalLogLikelihood(gp.likelihood, gp),
        progress=progress,
        desc="source kernel fit",
    )
    return copy.deepcopy(gp.covar_module).requires_grad_(False)


@dataclass(frozen=True)
class LowRankInference:
    r"""FITC inference for a pooled GP (see
    :mod:`~botorch_transfer.models.utils.low_rank`): ``num_inducing`` source points
    (farthest-point selected) and all target points as inducing inputs, ``O((N +
    T) m^2)`` per fit step; exact when ``N <= num_inducing``.
    ``inference="low_rank"`` is ``LowRankInference()``.

    Args:
        num_inducing: Source points used as inducing inputs (default 256).
    """

    num_inducing: int = DEFAULT_NUM_INDUCING

    def __post_init__(self) -> None:
        check_integer("num_inducing", self.num_inducing)


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

    inference: str = "exact"
    num_inducing: int = DEFAULT_NUM_INDUCING
    #: Old keyword names the constructor still takes (deprecated), with what
    #: replaces them.
    renamed_arguments: ClassVar[dict[str, str]] = {
        **SourceConditionedGP.renamed_arguments,
        "num_inducing": "inference",
    }

    def _set_inference(
        self, inference: str | LowRankInference, given: dict[str, Any]
    ) -> None:
        r"""Validate and store the ``inference`` argument, or the one its deprecated
        ``num_inducing`` keyword in ``given`` (the constructor's ``**kwargs``) fills
        (called by subclasses before ``__init__`` of the base)."""
        if "num_inducing" in given:
            num_inducing = given.pop("num_inducing")
            if inference != "low_rank":
                raise ValueError(
                    "`num_inducing` (deprecated) applies to low-rank inference only: "
                    f"pass `inference=LowRankInference(num_inducing=...)`, got "
                    f"`inference={inference!r}`."
                )
            renamed_keywords(
                type(self).__name__,
                {"num_inducing": num_inducing},
                {"num_inducing": "inference=LowRankInference(num_inducing=...)"},
            )
            inference = LowRankInference(num_inducing=num_inducing)
        if inference == "low_rank":
            inference = LowRankInference()
        if isinstance(inference, LowRankInference):
            self.inference = "low_rank"
            self.num_inducing = inference.num_inducing
        elif inference == "exact":
            self.inference = "exact"
        else:
            raise ValueError(
                f"`inference` must be one of {INFERENCE_MODES} or a LowRankInference, "
                f"got {inference!r}."
            )

    @property
    def low_rank(self) -> bool:
        r"""Whether the GP uses FITC inference (``inference="low_rank"``)."""
        return self.inference == "low_rank"

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
        # the source points that are inducing inputs of "low_rank" (all targets are)
        self.register_buffer(
            "source_inducing",
            farthest_point_indices(X_s, self.num_inducing),
            persistent=False,
        )
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

    def _row_affine(self, noise_index: Tensor) -> tuple[Tensor, Tensor] | None:
        r"""Per-point scale ``a_i`` and offset ``c_i`` of the prior (the prior of a
        point is that of ``a_i f + c_i``), or ``None`` for ``a = 1, c = 0``.
        Override in a subclass (EnvGP's source map)."""
        return None

    def forward(
        self, x: Tensor, noise_index: Tensor | None = None
    ) -> MultivariateNormal:
        r"""The prior at ``x`` (each point through its task's affine map, see
        ``_row_affine``); the noise index otherwise only enters the likelihood.

        With ``inference="low_rank"`` the prior of the training points is the FITC
        approximation (see :mod:`~botorch_transfer.models.utils.low_rank`).
        """
        if self.training:
            x = self.transform_inputs(x)
        affine = None if noise_index is None else self._row_affine(noise_index)
        if self.training and self.low_rank:
            mean, root, _, _, prior_diagonal, scale = self._fitc_parts(x, affine)
            covar = fitc_covariance(root, prior_diagonal, row_scale=scale)
            return FITCMultivariateNormal(mean, covar)
        if affine is None:
            return MultivariateNormal(self.mean_module(x), self.covar_module(x))
        scale, offset = affine
        batch = torch.broadcast_shapes(x.shape[:-2], scale.shape[:-1])
        # each point's scale travels as a last input column, so the covariance stays
        # a lazily evaluated kernel: GPyTorch's predictions then compute only the
        # blocks they need (test x train), never the joint matrix per test batch
        x_scaled = torch.cat(
            [x.expand(*batch, *x.shape[-2:]), scale.expand(*batch, -1).unsqueeze(-1)],
            dim=-1,
        )
        covar = _RowScaledKernel(self.covar_module)(x_scaled)
        return MultivariateNormal(self.mean_module(x) * scale + offset, covar)

    # -------------------------------------------------------- low-rank (FITC)
    def _fitc_parts(
        self, x: Tensor, affine: tuple[Tensor, Tensor] | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor | None]:
        r"""Prior mean (through the rows' affine map), the kernel's Nystrom root,
        ``K_ZZ``'s factor, inducing inputs and prior variances of ``f`` at the pooled
        training inputs ``x`` (transformed), and the rows' scales (``None``: 1)."""
        n_source = self.source_X.shape[0]
        if x.shape[-2] < n_source:
            raise RuntimeError(
                "Low-rank inference evaluates the prior of the pooled training data "
                f"only ({n_source} source + target points), got {x.shape[-2]} points."
            )
        targets = torch.arange(n_source, x.shape[-2], device=x.device)
        inducing = torch.cat([self.source_inducing, targets])
        root, L, Z, prior_diagonal = self.kernel_cached(
            "fitc_root", x, lambda: self._nystrom_parts(x, inducing)
        )
        mean, scale = self.mean_module(x), None
        if affine is not None:
            scale, offset = affine
            mean = mean * scale + offset
        return mean, root, L, Z, prior_diagonal, scale

    def _nystrom_parts(
        self, x: Tensor, inducing: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        r"""Nystrom root, ``K_ZZ``'s factor, inducing inputs ``x[inducing]`` and prior
        variances of the (transformed) inputs ``x``: the kernel's part of FITC."""
        Z = x[..., inducing, :]
        K_XZ = self.covar_module(x, Z).to_dense()
        root, L = nystrom_root(K_XZ, self.covar_module(Z).to_dense())
        return root, L, Z, self.covar_module(x, diag=True)

    @property
    def kernel_is_frozen(self) -> bool:
        r"""Whether no kernel hyperparameter is trained (all ``requires_grad=False``,
        e.g. a kernel from :func:`source_fitted_kernel`): ``fit_gpytorch_mll`` then
        fits the transfer parameters only, and the low-rank path computes its
        kernel factors once (see :meth:`kernel_cached`)."""
        return not any(p.requires_grad for p in self.covar_module.parameters())

    def kernel_cached(self, name: str, x: Tensor, compute: Callable[[], Any]) -> Any:
        r"""``compute()``, a function of the kernel at the inputs ``x`` only, kept
        while the kernel is frozen (:attr:`kernel_is_frozen`) and unchanged and ``x``
        holds the same values: a fit of the transfer parameters then factors the
        kernel once, not at every step.

        Args:
            name: The cached quantity (one entry per name).
            x: The (transformed) inputs ``compute`` evaluates the kernel at.
            compute: Returns tensors (or a tuple of them); called without gradient
                when its result is kept.

        Returns:
            ``compute()``'s result (a kept one, or fresh).
        """
        if not self.kernel_is_frozen or x.requires_grad:
            return compute()
        kernel = self.covar_module
        return self._kept(name, [*kernel.parameters(), *kernel.buffers(), x], compute)

    def _kept(self, name: str, state: list[Tensor], compute: Callable[[], Any]) -> Any:
        r"""``compute()`` (without gradient), kept under ``name`` while the tensors
        ``state`` hold the same values. Compared by value, not by version: GPyTorch's
        hyperparameter setters write through ``.data``, which leaves a tensor's
        version counter unchanged (and ``train()``/``eval()`` touch neither)."""
        state = [t.detach() for t in state]
        hit = getattr(self, "_value_caches", {}).get(name)
        if hit is not None and same_tensors(hit[0], state):
            return hit[1]
        with torch.no_grad():
            value = compute()
        # read again: ``compute`` may keep values of its own (nested names)
        caches = getattr(self, "_value_caches", {})
        self._value_caches = {**caches, name: ([t.clone() for t in state], value)}
        return value

    def _fitc_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        r"""``(mean_weights, covariance_weights, Z)`` of the FITC predictive, kept
        while the model's parameters, buffers and training data hold the same
        values (:meth:`_kept`)."""

        def weights() -> tuple[Tensor, Tensor, Tensor]:
            x, noise_index = self.train_inputs
            mean, root, L, Z, prior_diagonal, scale = self._fitc_parts(
                x, self._row_affine(noise_index)
            )
            if scale is not None:
                root = root * scale.unsqueeze(-1)
                prior_diagonal = prior_diagonal * scale.pow(2)
            mean_weights, covariance_weights = fitc_predictive_weights(
                root,
                prior_diagonal,
                self.likelihood.noise,
                self.train_targets - mean,
                L,
            )
            return mean_weights, covariance_weights, Z

        data = [*self.train_inputs, self.train_targets]
        state = [*self.parameters(), *self.buffers(), *data]
        return self._kept("fitc_weights", state, weights)

    def _fitc_posterior(self, x: Tensor, noise_index: Tensor) -> MultivariateNormal:
        r"""The FITC predictive at transformed inputs ``x`` (see the module)."""
        mean_weights, covariance_weights, Z = self._fitc_weights()
        batch = torch.broadcast_shapes(x.shape[:-2], Z.shape[:-2])
        x = x.expand(*batch, *x.shape[-2:])
        K_xZ = self.covar_module(x, Z.expand(*batch, *Z.shape[-2:])).to_dense()
        mean = self.mean_module(x) + (K_xZ @ mean_weights.unsqueeze(-1)).squeeze(-1)
        covar = self.covar_module(x).to_dense() - K_xZ @ covariance_weights @ (
            K_xZ.transpose(-1, -2)
        )
        affine = self._row_affine(noise_index)
        if affine is not None:
            scale, offset = affine
            mean = mean * scale + offset
            covar = covar * scale.unsqueeze(-1) * scale.unsqueeze(-2)
        # lazily: BoTorch factorizes (with jitter where needed) only when it samples
        return MultivariateNormal(mean, DenseLinearOperator(covar))

    def __call__(self, *args: Any, **kwargs: Any) -> MultivariateNormal:
        r"""GPyTorch's call; in eval mode with ``inference="low_rank"`` the FITC
        predictive (GPyTorch's prediction strategies would factor ``n x n``)."""
        if self.training or not self.low_rank or gpytorch.settings.prior_mode.on():
            return super().__call__(*args, **kwargs)
        inputs = args[0] if len(args) == 1 and isinstance(args[0], list) else args
        return self._fitc_posterior(*inputs)


class _RowScaledKernel(Kernel):
    r"""``a_i a_j k(x_i, x_j)`` for inputs ``[x, a]`` (the scale as a last column)."""

    def __init__(self, base_kernel: Kernel) -> None:
        super().__init__()
        self.base_kernel = base_kernel
        self.batch_shape = base_kernel.batch_shape

    def forward(
        self, x1: Tensor, x2: Tensor, diag: bool = False, **params: Any
    ) -> Tensor:
        k = self.base_kernel(x1[..., :-1], x2[..., :-1], diag=diag, **params)
        k = k.to_dense() if hasattr(k, "to_dense") else k
        a1, a2 = x1[..., -1], x2[..., -1]
        return k * a1 * a2 if diag else k * a1.unsqueeze(-1) * a2.unsqueeze(-2)


# BoTorch's posterior sampler reads one input tensor and the training noise by
# position; kernel-feature prior paths are left to BoTorch, as before
refuse_pathwise_sampling(
    PooledTransferGP, "its inputs carry a noise index", prior_paths=False
)
