r"""cm-BO Stage 1: one GP per meta-task and its frozen posterior (Alg. 1 line 6).

Every meta-task gets an exact GP with the kernel of Sec. 4.1, outputscale x
Matern-3/2 x Matern-1/2 (ARD), on inputs normalized by shared bounds and with
standardized outcomes. :func:`fit_meta_task_gps` fits them with BoTorch;
:class:`MetaTaskPosteriors` freezes their posteriors and evaluates all ``K`` of them
in bulk. Both go through one kernel implementation, :func:`product_matern`: the
fitted GPs through the GPyTorch module :class:`ProductMaternKernel`, the frozen
posteriors by calling it directly with a task batch dimension on the lengthscales.

The fit is batched: equal-sized tasks form one batched ``SingleTaskGP`` whose tasks
are optimized by independent L-BFGS-B runs in bulk
(:func:`fit_meta_task_mll_batched`, on an objective that writes the kernel out over
precomputed input differences for cheap gradients).
"""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms.input import Normalize
from botorch.models.transforms.outcome import Standardize
from botorch.optim.batched_lbfgs_b import fmin_l_bfgs_b_batched
from botorch.optim.closures import BatchedNDarrayOptimizationClosure
from botorch.optim.core import OptimizationResult, OptimizationStatus
from botorch.optim.utils import get_parameters_and_bounds
from botorch.optim.utils.numpy_utils import as_ndarray, get_per_element_bounds
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor
from torch.nn import Module

from botorch_transfer.data import TaskData
from botorch_transfer.priors.kernels import (
    ProductMaternKernel,
    meta_task_kernel,
    product_matern,
)
from botorch_transfer.progress import progress_bar

#: How many inputs' posterior means and features ``MetaTaskPosteriors`` keeps, and
#: the largest feature tensor (elements) it keeps for one input.
MEMO_SIZE = 2
MEMO_MAX_ELEMENTS = 2**24


class _SharedMemo(dict):
    r"""A memo that deep copies share and pickles leave behind (it can hold large
    tensors, all derived from frozen buffers)."""

    def __deepcopy__(self, memo: dict) -> _SharedMemo:
        return self

    def __reduce__(self) -> tuple:
        return (_SharedMemo, ())


class MetaTaskPosteriors(Module):
    r"""Frozen exact GP posteriors of ``K`` meta-tasks (Alg. 1 line 6), in bulk.

    Task ``j`` has a constant mean ``c_j``, kernel
    ``s_j^2 M32(x, x'; l32_j) M12(x, x'; l12_j)`` on inputs normalized by ``bounds``,
    per-point noise, and standardized outcomes ``y = y_offset_j + y_scale_j * z``. Its
    posterior (eqs. 1-2) in user units is
    ``mu_j(x) = y_offset_j + y_scale_j (c_j + k_j(x, X_j) alpha_j)`` and
    ``k_j(x, x') = y_scale_j^2 (k_j(x, x') - v_j(x)^T v_j(x'))`` with
    ``v_j(x) = L_j^-1 k_j(X_j, x)``, ``L_j L_j^T = k_j(X_j, X_j) + diag(noise_j)``.

    The kernel is :func:`product_matern` with a leading task dimension on the
    lengthscales, so all tasks are evaluated in one call. Tasks with fewer than
    ``n_max`` points are padded (``mask``); padded points have zero cross-covariance,
    an identity block in ``L`` and zero ``alpha``, so they do not change anything.
    All tensors are buffers (frozen, moved by ``.to()``), left out of ``state_dict``;
    the factorizations are recomputed from the stored data and hyperparameters on
    construction.

    Args:
        X: ``K x n_max x d`` raw training inputs (padded).
        Z_targets: ``K x n_max`` standardized training outcomes (padded with 0).
        mask: ``K x n_max`` bool, True for real points.
        noise: ``K x n_max`` noise variances in standardized units (padding: any).
        lengthscale_32: ``K x d`` Matern-3/2 lengthscales (normalized inputs).
        lengthscale_12: ``K x d`` Matern-1/2 lengthscales.
        outputscale: ``K`` signal variances (standardized units).
        constant: ``K`` constant prior means (standardized units).
        y_offset: ``K`` outcome offsets (user units).
        y_scale: ``K`` outcome scales (user units).
        bounds: ``2 x d`` input bounds used for normalization.
    """

    #: The constructor's tensors, in its order (the keys of :meth:`state`).
    FIELDS: ClassVar[tuple[str, ...]] = (
        "X",
        "Z_targets",
        "mask",
        "noise",
        "lengthscale_32",
        "lengthscale_12",
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
        lengthscale_32: Tensor,
        lengthscale_12: Tensor,
        outputscale: Tensor,
        constant: Tensor,
        y_offset: Tensor,
        y_scale: Tensor,
        bounds: Tensor,
    ) -> None:
        super().__init__()
        values = (X, Z_targets, mask, noise, lengthscale_32, lengthscale_12)
        values += (outputscale, constant, y_offset, y_scale, bounds)
        self._store(values)

    def _store(self, values: Sequence[Tensor]) -> None:
        r"""Keep ``values`` as the buffers named by ``FIELDS`` (in that order) and
        factorize every task."""
        for name, value in zip(self.FIELDS, values, strict=True):
            self.register_buffer(name, value, persistent=False)
        self._factorize()

    def _factorize(self) -> None:
        r"""The Cholesky factors and ``alpha`` of every task from the stored data and
        hyperparameters (and a fresh memo)."""
        X, mask, noise = self.X, self.mask, self.noise
        with torch.no_grad():
            m = mask.to(X)
            K = self._kernel(self.normalize(X), self.normalize(X))
            K = K * (m.unsqueeze(-1) * m.unsqueeze(-2))
            # padded rows/columns are zero: a unit diagonal there makes L block-identity
            K = K + torch.diag_embed(torch.where(mask, noise, torch.ones_like(noise)))
            chol = torch.linalg.cholesky(K)
            resid = (self.Z_targets - self.constant.unsqueeze(-1)) * m
            alpha = torch.cholesky_solve(resid.unsqueeze(-1), chol).squeeze(-1) * m
        self.register_buffer("chol", chol, persistent=False)
        self.register_buffer("alpha", alpha, persistent=False)
        # copies (the models copy their prior) keep the identity and share the memo
        self._identity = uuid.uuid4().hex
        self._memo = _SharedMemo()

    @property
    def num_tasks(self) -> int:
        return self.X.shape[0]

    def normalize(self, X: Tensor) -> Tensor:
        r"""Map raw inputs to the unit cube of ``bounds``."""
        return (X - self.bounds[0]) / (self.bounds[1] - self.bounds[0])

    def state(self) -> dict[str, Tensor]:
        r"""The constructor's tensors (for saving)."""
        return {name: getattr(self, name) for name in self.FIELDS}

    def _kernel(self, Z1: Tensor, Z2: Tensor, batch_dims: int = 0) -> Tensor:
        r"""``s_j^2 M32 M12`` of every task at normalized inputs.

        The task dimension leads: ``Z1``/``Z2`` with ``batch_dims`` batch dimensions
        broadcast against ``K x 1^batch_dims x 1 x d`` lengthscales, so task-aligned
        ``K x n x d`` inputs (``batch_dims=0``) pair task ``j``'s points with task
        ``j``'s lengthscales and shared inputs get every task's kernel.

        Returns:
            ``K x batch x n1 x n2``.
        """
        view = (self.num_tasks,) + (1,) * batch_dims + (1, self.X.shape[-1])
        corr = product_matern(
            Z1, Z2, self.lengthscale_32.reshape(view), self.lengthscale_12.reshape(view)
        )
        return self.outputscale.reshape((-1,) + (1,) * (corr.dim() - 1)) * corr

    def _cross(self, x: Tensor) -> Tensor:
        r"""``k_j(X_j, x)`` for flat ``N x d`` raw ``x``: ``K x n_max x N`` (masked)."""
        kx = self._kernel(self.normalize(self.X), self.normalize(x).unsqueeze(0))
        return kx * self.mask.to(kx).unsqueeze(-1)

    def means(self, x: Tensor) -> Tensor:
        r"""Posterior means at flat ``N x d`` raw ``x``: ``K x N`` (user units)."""
        return self._memoized(x, 0)

    def features(self, x: Tensor) -> Tensor:
        r"""``v_j(x) = L_j^-1 k_j(X_j, x)`` at flat ``N x d`` raw ``x``:
        ``K x n_max x N``."""
        return self._memoized(x, 1)

    def means_and_features(self, x: Tensor) -> tuple[Tensor, Tensor]:
        r"""``(means(x), features(x))`` from one evaluation of ``k_j(X_j, x)`` (under a
        gradient, where nothing is memoized, the two calls would evaluate it twice)."""
        return self._memoized(x, None)

    def _means_from_cross(self, kx: Tensor) -> Tensor:
        z = self.constant.unsqueeze(-1) + (self.alpha.unsqueeze(-1) * kx).sum(-2)
        return self.y_offset.unsqueeze(-1) + self.y_scale.unsqueeze(-1) * z

    def _features_from_cross(self, kx: Tensor) -> Tensor:
        return torch.linalg.solve_triangular(self.chol, kx, upper=False)

    def _memoized(self, x: Tensor, which: int | None) -> Tensor | tuple[Tensor, Tensor]:
        r"""``means(x)`` (``which=0``), ``features(x)`` (1) or both (``None``), kept for
        the last ``MEMO_SIZE`` inputs without gradient: a posterior call asks for them
        at its test points several times (mean, covariance blocks, the mixture's
        spread), and a discrete search at the same candidates in every BO iteration
        (by a new model, whose copy of the prior shares the memo)."""
        parts = (self._means_from_cross, self._features_from_cross)
        size = x.shape[0] * self.chol[..., 0].numel()
        if x.requires_grad or size > MEMO_MAX_ELEMENTS:
            kx = self._cross(x)
            if which is None:
                return tuple(part(kx) for part in parts)
            return parts[which](kx)
        key = (
            self._identity,
            self.chol.dtype,
            self.chol.device,
            x.shape,
            x.dtype,
            x.device,
            hashlib.sha1(x.detach().cpu().contiguous().numpy().tobytes()).digest(),
        )
        memo = self._memo
        if key in memo:
            memo[key] = memo.pop(key)  # now the most recently used
        else:
            while len(memo) >= MEMO_SIZE:
                memo.pop(next(iter(memo)))  # the least recently used
            kx = self._cross(x)
            memo[key] = tuple(part(kx) for part in parts)
        return memo[key] if which is None else memo[key][which]

    def prior_kernel(self, x1: Tensor, x2: Tensor) -> Tensor:
        r"""Prior kernels ``k_j(x1, x2)`` (standardized units) for broadcastable
        ``... x n1 x d`` and ``... x n2 x d``: ``K x ... x n1 x n2``."""
        batch_dims = max(x1.dim(), x2.dim()) - 2
        return self._kernel(self.normalize(x1), self.normalize(x2), batch_dims)

    def covariances(self, x1: Tensor, x2: Tensor) -> Tensor:
        r"""Posterior covariances ``K x n1 x n2`` of every task (user units), flat
        inputs."""
        v1, v2 = self.features(x1), self.features(x2)
        cov = self.prior_kernel(x1, x2) - v1.transpose(-1, -2) @ v2
        return self.y_scale.reshape(-1, 1, 1).pow(2) * cov


def meta_task_model(tasks: Sequence[TaskData], bounds: Tensor) -> SingleTaskGP:
    r"""An unfitted batched GP of meta-tasks with equal ``n`` (batch ``g``: task ``g``).

    Args:
        tasks: Meta-tasks with the same number of points, all with known ``Yvar``
            (fixed noise) or all without (inferred noise).
        bounds: ``2 x d`` input bounds (inputs are normalized with them).

    Returns:
        A ``SingleTaskGP`` with ``batch_shape = [len(tasks)]``, the kernel of
        :func:`meta_task_kernel`, normalized inputs and standardized outcomes.
    """
    batch, d = torch.Size([len(tasks)]), tasks[0].d
    Yvar = None if tasks[0].Yvar is None else torch.stack([t.Yvar for t in tasks])
    return SingleTaskGP(
        torch.stack([t.X for t in tasks]),
        torch.stack([t.Y for t in tasks]),
        Yvar,
        covar_module=meta_task_kernel(d, batch),
        input_transform=Normalize(d, bounds=bounds),
        outcome_transform=Standardize(m=1, batch_shape=batch),
    )


class _MetaTaskNLL(torch.autograd.Function):
    r"""``0.5 r^T K^-1 r + 0.5 log det K`` per task for the Sec. 4.1 kernel, with
    closed-form gradients.

    ``K = s (1 + sqrt(3) r_32) exp(-sqrt(3) r_32 - r_12) + diag(noise)`` with
    ``r_c^2 = sum_k w_ck sq_k`` (``w_c = l_c^-2``, ``sq`` the squared input
    differences). With ``G = dNLL/dK = 0.5 (K^-1 - alpha alpha^T)``, ``alpha = K^-1 r``,
    the lengthscale gradients are ``sum_ij G_ij dK_ij/dw_ck`` with
    ``dK/dw_32k = -1.5 s exp(.) sq_k`` and ``dK/dw_12k = -s M32 M12 sq_k / (2 r_12)``:
    one matrix product with ``sq``, instead of differentiating a dozen ``n x n``
    operations and the Cholesky factor. ``K`` and ``G`` are symmetric and the
    diagonal's distances are 0 (``K_ii = s + noise_i``), so the kernel is evaluated
    on the ``n (n - 1) / 2`` pairs ``i < j`` only and their terms are counted twice:
    half the elementwise work of the full ``n x n`` form. Tasks whose ``K`` has NaNs
    get a NaN loss and zero gradients.
    """

    @staticmethod
    def forward(
        ctx: Any, sq: Tensor, w: Tensor, scale: Tensor, noise: Tensor, r: Tensor
    ) -> Tensor:
        n = r.shape[-1]
        rows, cols = _pairs(n, r.device)
        # ``g x 2 x pairs`` scaled distances; clamped at 1e-300 (distance 1e-150,
        # where ``sq`` is 0) so that ``sq / dist`` stays finite
        dist = (w @ sq.transpose(-1, -2)).clamp_min(1e-300).sqrt()
        r32, r12 = math.sqrt(3) * dist[:, 0], dist[:, 1]
        E = torch.exp(-r32 - r12)
        C = (1 + r32) * E
        off_diagonal = scale.unsqueeze(-1) * C
        K = torch.diag_embed(scale.unsqueeze(-1) + noise)
        K[:, rows, cols] = off_diagonal
        K[:, cols, rows] = off_diagonal
        # a step to extreme hyperparameters can give NaNs (BoTorch's closure then
        # returns NaN): only for the tasks concerned, the others go on
        bad = K.isnan().flatten(-2).any(-1)
        if bad.any():
            K = torch.where(bad.view(-1, 1, 1), torch.eye(n).to(K), K)
        chol = psd_safe_cholesky(K)  # jitter where needed, like GPyTorch
        alpha = torch.cholesky_solve(r.unsqueeze(-1), chol)
        ctx.save_for_backward(sq, scale, r12, E, C, chol, alpha, bad)
        log_det = torch.diagonal(chol, dim1=-2, dim2=-1).log().sum(-1)
        nll = 0.5 * (r.unsqueeze(-1) * alpha).sum((-2, -1)) + log_det
        return torch.where(bad, torch.full_like(nll, math.nan), nll)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        sq, scale, r12, E, C, chol, alpha, bad = ctx.saved_tensors
        rows, cols = _pairs(alpha.shape[-2], alpha.device)
        grad = torch.where(bad, torch.zeros_like(grad), grad).view(-1, 1, 1)
        G = (
            grad
            * 0.5
            * (torch.cholesky_inverse(chol) - alpha @ alpha.transpose(-1, -2))
        )
        G_pairs, G_diagonal = G[:, rows, cols], torch.diagonal(G, dim1=-2, dim2=-1)
        GC = G_pairs * C
        grad_scale = G_diagonal.sum(-1) + 2 * GC.sum(-1)  # C is 1 on the diagonal
        # per-task factors applied after the products with ``sq`` (g x 1 x d); each
        # pair stands for (i, j) and (j, i), the diagonal's ``sq`` is 0
        s = scale.view(-1, 1, 1)
        grad_w = torch.cat(
            [
                -3.0 * s * ((G_pairs * E).unsqueeze(-2) @ sq),
                -1.0 * s * ((GC / r12).unsqueeze(-2) @ sq),
            ],
            dim=-2,
        )
        return None, grad_w, grad_scale, G_diagonal, (grad * alpha).squeeze(-1)


def _pairs(n: int, device: torch.device) -> Tensor:
    r"""Row and column indices of the pairs ``i < j`` of ``n`` points: the order of
    :func:`_squared_differences` that :class:`_MetaTaskNLL` relies on."""
    return torch.triu_indices(n, n, 1, device=device)


def _squared_differences(model: SingleTaskGP) -> Tensor:
    r"""``G x n (n - 1) / 2 x d`` squared differences of a batched GP's normalized
    training inputs over the pairs ``i < j`` (:func:`_pairs`; fixed during the
    fit)."""
    with torch.no_grad():
        Z = model.input_transform(model.train_inputs[0])
        rows, cols = _pairs(Z.shape[-2], Z.device)
        return (Z[..., rows, :] - Z[..., cols, :]).pow(2)


def _neg_mll_per_task(
    model: SingleTaskGP, sq_diff: Tensor, idx: Tensor, noise: Tensor | None = None
) -> Tensor:
    r"""Negative exact MLL / ``n`` of the tasks ``idx`` of a batched meta-task GP.

    The same objective as BoTorch's loss closure of ``ExactMarginalLogLikelihood``
    (per batch element: Gaussian log density of the standardized targets, plus the
    log priors of that element's hyperparameters, divided by ``n``), written out so
    that only ``idx`` is evaluated. The kernel is :func:`product_matern`'s formula on
    squared input differences computed once per fit (the inputs are fixed), which
    makes its gradient several times cheaper; the tests check values and gradients
    against BoTorch's closure.

    Args:
        model: A batched ``SingleTaskGP`` of :func:`fit_meta_task_gps` (train mode).
        sq_diff: ``G x n (n - 1) / 2 x d`` squared differences of the normalized
            training inputs of all ``G`` tasks (see :func:`_squared_differences`).
        idx: Indices of the tasks to evaluate.
        noise: ``G x n`` fixed noise variances (standardized units), or ``None`` for
            the model's inferred homoskedastic noise.

    Returns:
        ``len(idx)`` losses (NaN where the covariance has NaNs or a
        hyperparameter is outside its prior's support).
    """
    kernel = model.covar_module
    base = kernel.base_kernel
    ls = torch.cat([base.lengthscale_32[idx], base.lengthscale_12[idx]], dim=-2)
    noise = model.likelihood.noise[idx] if noise is None else noise[idx]
    resid = model.train_targets[idx] - model.mean_module.constant[idx].unsqueeze(-1)
    n = resid.shape[-1]
    # all tasks running (the first rounds): no copy of the pairs' differences
    everyone = torch.equal(idx, torch.arange(sq_diff.shape[0], device=idx.device))
    sq = sq_diff if everyone else sq_diff[idx]
    nll = _MetaTaskNLL.apply(
        sq,
        ls.pow(-2),
        kernel.outputscale[idx],
        noise.expand(resid.shape),
        resid,
    )
    nll = nll + 0.5 * n * math.log(2 * math.pi)
    bad = nll.isnan()
    # priors on the whole batch (elementwise and cheap), then the rows of ``idx``; a
    # value outside a prior's support (e.g. a lengthscale underflowing to 0) is a NaN
    # loss for its task rather than an error for all
    G = sq_diff.shape[0]
    for _, module, prior, closure, _ in model.named_priors():
        value = closure(module)
        ok = prior.support.check(value)
        log_prob = prior.log_prob(torch.where(ok, value, prior.mean.to(value)))
        nll = nll - log_prob.reshape(G, -1).sum(-1)[idx]
        bad = bad | ~ok.reshape(G, -1).all(-1)[idx]
    return torch.where(bad, torch.full_like(nll, math.nan), nll / n)


def fit_meta_task_mll_batched(
    mll: ExactMarginalLogLikelihood,
    closure: Any = None,
    options: dict[str, Any] | None = None,
) -> OptimizationResult:
    r"""Fit every task of a batched meta-task GP by its own L-BFGS-B run, in bulk.

    The optimizer of :func:`fit_meta_task_gps` for ``fit_gpytorch_mll(mll,
    optimizer=...)``. Like BoTorch's fit of batched models
    (``fit_gpytorch_mll_scipy`` on a batched multi-output model), it runs BoTorch's
    batched L-BFGS-B (``fmin_l_bfgs_b_batched``): one L-BFGS-B state and stopping
    test per task on that task's own objective, so each task ends where a fit of
    that task alone would (up to rounding). Unlike it, each round evaluates only the
    tasks still running: the slowest task needs several times the median number of
    steps, and evaluating the whole batch every round made the batched fit slower
    than the per-task loop.

    Args:
        mll: ``ExactMarginalLogLikelihood`` of a batched (``batch_shape = [G]``)
            ``SingleTaskGP`` with the kernel of :func:`meta_task_kernel`, in train
            mode.
        closure: Ignored (accepted for ``fit_gpytorch_mll``, which passes ``None``).
        options: Options of ``fmin_l_bfgs_b_batched`` (e.g. ``maxiter``, ``pgtol``).

    Returns:
        An ``OptimizationResult`` (``fval``: the sum of the per-task losses; ``step``:
        the largest number of iterations).
    """
    model = mll.model
    if not isinstance(
        getattr(model.covar_module, "base_kernel", None), ProductMaternKernel
    ):
        raise ValueError("`mll.model` must have the kernel of `meta_task_kernel`.")
    G = model.batch_shape.numel()
    params, bounds = get_parameters_and_bounds(mll)
    params = {name: p for name, p in params.items() if p.requires_grad}
    state = BatchedNDarrayOptimizationClosure(lambda: None, params, model.batch_shape)
    sq_diff = _squared_differences(model)
    fixed = isinstance(model.likelihood, FixedNoiseGaussianLikelihood)
    noise = model.likelihood.noise_covar.noise if fixed else None

    def func(x: np.ndarray, batch_indices: list[int]) -> tuple[np.ndarray, np.ndarray]:
        full = state.state
        full[batch_indices] = x
        state.state = full
        idx = torch.as_tensor(batch_indices, device=sq_diff.device)
        with torch.enable_grad():
            for p in params.values():
                p.grad = None
            loss = _neg_mll_per_task(model, sq_diff, idx, noise)
            loss.sum().backward()
        grads = [
            (torch.zeros_like(p) if p.grad is None else p.grad).reshape(G, -1)
            for p in params.values()
        ]
        grad = torch.cat(grads, dim=-1)[idx]
        grad[loss.isnan()] = math.nan
        return as_ndarray(loss.detach(), dtype=np.float64), as_ndarray(
            grad, dtype=np.float64
        )

    xs, fs, results = fmin_l_bfgs_b_batched(
        func,
        state.state,
        bounds=get_per_element_bounds(params, bounds, model.batch_shape),
        pass_batch_indices=True,
        **(options or {}),
    )
    state.state = xs
    for p in params.values():
        p.grad = None
    converged = sum(r.get("warnflag", 2) == 0 for r in results)
    if converged == G:
        status = OptimizationStatus.SUCCESS
    elif any(r.get("warnflag", 0) == 1 for r in results):
        status = OptimizationStatus.STOPPED
    else:
        status = OptimizationStatus.FAILURE
    return OptimizationResult(
        fval=float(fs.sum()),
        step=max(r.get("nit", 0) for r in results),
        status=status,
        message=f"Batched L-BFGS-B: {converged}/{G} tasks converged.",
    )


def task_groups(tasks: Sequence[TaskData]) -> list[list[int]]:
    r"""Indices of the tasks that share a batched model: same ``n`` and the same kind
    of noise (known ``Yvar`` or inferred), in order of first appearance."""
    groups: dict[tuple[int, bool], list[int]] = {}
    for j, task in enumerate(tasks):
        groups.setdefault((task.n, task.Yvar is None), []).append(j)
    return list(groups.values())


def fit_meta_task_gps(
    tasks: Sequence[TaskData],
    bounds: Tensor,
    progress: bool = True,
    batched: bool = True,
) -> list[tuple[list[int], SingleTaskGP]]:
    r"""Fit one GP per meta-task (Alg. 1 line 6).

    Each task gets a GP with the Sec. 4.1 kernel (:func:`meta_task_kernel`), inputs
    normalized by ``bounds`` and standardized outcomes (known ``Yvar`` is used as
    fixed noise), and its own hyperparameters, fitted by ``fit_gpytorch_mll``.

    With ``batched=True`` (default), tasks with the same number of points and the
    same kind of noise are stacked into one ``SingleTaskGP`` with ``batch_shape =
    [G]``, fitted once with :func:`fit_meta_task_mll_batched` (per-task L-BFGS-B runs
    in bulk; the batched MLL is a sum of independent per-task terms), so a task's
    fitted hyperparameters depend on the other tasks only through rounding. With
    ``batched=False``, each task is fitted alone by BoTorch's default optimizer (the
    former, several times slower path).

    Args:
        tasks: The meta-tasks.
        bounds: ``2 x d`` input bounds (inputs are normalized with them).
        progress: Show a progress bar over the fits when they take more than a few
            seconds (see :mod:`botorch_transfer.progress`).
        batched: Fit groups of equal-sized tasks as batched models.

    Returns:
        A list of ``(task indices, fitted batched SingleTaskGP)``, the model's batch
        ``g`` being task ``indices[g]`` (one task per model if not ``batched``).
    """
    groups = task_groups(tasks) if batched else [[j] for j in range(len(tasks))]
    bar = progress_bar(
        groups,
        progress=progress,
        desc="cm-BO stage 1: meta-task GPs",
        unit="group" if batched else "task",
    )
    fitted = []
    for idx in bar:
        model = meta_task_model([tasks[j] for j in idx], bounds)
        if tasks[idx[0]].n > 1:
            mll = ExactMarginalLogLikelihood(model.likelihood, model)
            if batched:
                fit_gpytorch_mll(mll, optimizer=fit_meta_task_mll_batched)
            else:
                fit_gpytorch_mll(mll)
        model.eval()
        fitted.append((idx, model))
    return fitted


def meta_task_posteriors(
    tasks: Sequence[TaskData],
    bounds: Tensor,
    fitted: list[tuple[list[int], SingleTaskGP]] | None = None,
    progress: bool = True,
) -> MetaTaskPosteriors:
    r"""Fit the meta-task GPs and freeze their posteriors.

    Args:
        tasks: The meta-tasks.
        bounds: ``2 x d`` input bounds.
        fitted: Optional output of :func:`fit_meta_task_gps` (otherwise it is called).
        progress: Show a progress bar over the fits (see :func:`fit_meta_task_gps`).

    Returns:
        The frozen posteriors (see :class:`MetaTaskPosteriors`).
    """
    if fitted is None:
        fitted = fit_meta_task_gps(tasks, bounds, progress=progress)

    def kernel_hyperparameters(model: SingleTaskGP, g: int) -> dict[str, Tensor]:
        kernel = model.covar_module.base_kernel
        return {
            "lengthscale_32": kernel.lengthscale_32[g, 0],
            "lengthscale_12": kernel.lengthscale_12[g, 0],
            "outputscale": model.covar_module.outputscale[g],
        }

    fields = padded_meta_task_fields(tasks, fitted, kernel_hyperparameters)
    return MetaTaskPosteriors(**fields, bounds=bounds)


def padded_meta_task_fields(
    tasks: Sequence[TaskData],
    fitted: list[tuple[list[int], SingleTaskGP]],
    kernel_hyperparameters: Callable[[SingleTaskGP, int], dict[str, Tensor]],
) -> dict[str, Tensor]:
    r"""The tensors a bank of frozen meta-task posteriors is built from, collected
    from fitted batched GPs: the padded data (``X``, standardized ``Z_targets``,
    ``mask``), the noise in standardized units, the constant mean, the outcome
    offsets and scales, and the kernel's hyperparameters.

    Args:
        tasks: The meta-tasks.
        fitted: ``(task indices, fitted batched SingleTaskGP)`` pairs covering every
            task (e.g. :func:`fit_meta_task_gps`'s output).
        kernel_hyperparameters: ``(model, g) -> {name: value}``, the kernel's
            hyperparameters of the model's batch ``g``; each name becomes a ``K x
            value.shape`` field.

    Returns:
        The fields by name (``bounds`` aside).
    """
    K, d = len(tasks), tasks[0].d
    n_max = max(t.n for t in tasks)
    opts = {"dtype": tasks[0].X.dtype, "device": tasks[0].X.device}
    fields = {
        "X": torch.zeros(K, n_max, d, **opts),
        "Z_targets": torch.zeros(K, n_max, **opts),
        "mask": torch.zeros(K, n_max, dtype=torch.bool, device=opts["device"]),
        "noise": torch.ones(K, n_max, **opts),
        "constant": torch.zeros(K, **opts),
        "y_offset": torch.zeros(K, **opts),
        "y_scale": torch.zeros(K, **opts),
    }
    with torch.no_grad():
        for idx, model in fitted:
            n = tasks[idx[0]].n
            ot = model.outcome_transform
            Y_std = (torch.stack([tasks[j].Y for j in idx]) - ot.means) / ot.stdvs
            if isinstance(model.likelihood, FixedNoiseGaussianLikelihood):
                task_noise = model.likelihood.noise_covar.noise  # G x n, standardized
            else:
                task_noise = model.likelihood.noise.reshape(len(idx), 1)
                task_noise = task_noise.expand(len(idx), n)
            for g, j in enumerate(idx):
                fields["X"][j, :n] = tasks[j].X
                fields["Z_targets"][j, :n] = Y_std[g, :, 0]
                fields["mask"][j, :n] = True
                fields["noise"][j, :n] = task_noise[g]
                fields["constant"][j] = model.mean_module.constant[g]
                fields["y_offset"][j] = ot.means[g, 0, 0]
                fields["y_scale"][j] = ot.stdvs[g, 0, 0]
                for name, value in kernel_hyperparameters(model, g).items():
                    if name not in fields:
                        fields[name] = torch.ones(K, *value.shape, **opts)
                    fields[name][j] = value
    return fields
