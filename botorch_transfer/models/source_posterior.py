r"""Frozen source-task posteriors, computed once and cheap to evaluate.

A transfer model asks its source for the posterior mean and (joint) covariance at
many candidate points in every acquisition optimization. Evaluating a stock exact
GP there costs ``O(N^2)`` per point (or tries to allocate a batch of ``N x N``
matrices on ``b x q x d`` inputs). A :class:`SourcePosterior` instead computes the
Gaussian conditional once and stores it in a form whose per-point cost does not
depend on ``N``:

- :class:`GPSourcePosterior` conditions a GP prior on ``N`` noisy observations. The
  mean ``m(x) + k(x, X) alpha`` uses the exact ``alpha = (K + D)^{-1} (y - m(X))``
  (one Cholesky factorization, ``O(N^3)`` once; ``O(N)`` per point). The covariance
  uses a pivoted Cholesky factor ``P`` of the noise-free prior covariance
  (``K ~ P P^T``, rank ``r``, pivots ``Z``): with ``w_x = L_Z^{-1} k(Z, x)`` and
  ``G = P^T D^{-1} P`` (``D`` the per-point noise variances)::

      cov(x, x') = k(x, x') - w_x^T G (I + G)^{-1} w_x'

  which is the exact conditional (eq. 5 of the DeltaBO paper) once the factor reaches
  the numerical rank of ``K`` (the residual diagonal falls below ``tolerance``), and
  the Nystrom (DTC) approximation when ``max_rank`` truncates it. It costs
  ``O(N r^2)`` once and ``O(r^2)`` per point. Above ``EXACT_MEAN_MAX_POINTS``
  observations, or from ``DTC_MEAN_MIN_POINTS`` on when the factor is complete, the
  mean uses the same factor (the DTC mean
  ``k(x, Z) (K_ZZ + K_ZN D^{-1} K_NZ)^{-1} K_ZN D^{-1} y``, exact when the factor is),
  so no ``N x N`` matrix is ever formed: ``O(N r)`` memory, ``O(r)`` per point.
- :class:`ModelSourcePosterior` wraps any other single-output BoTorch ``Model`` and
  simply calls its ``posterior`` (correct, but as costly as that model is).
- :class:`SumSourcePosterior` adds independent components (a stack of sources).

Inputs are always in the user's raw input space; outputs are mapped into the
consumer model's (outcome-transformed) space by an affine map set with
:meth:`SourcePosterior.set_output_affine`.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence

import gpytorch
import torch
from botorch.models.model import Model
from botorch.models.transforms.outcome import Standardize
from gpytorch.means import Mean
from gpytorch.module import Module
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from botorch_transfer._deprecation import moved_names
from botorch_transfer.data import TaskData
from botorch_transfer.models.utils.caching import (
    apply_keeping_caches,
    same_tensors,
    state_key,
)
from botorch_transfer.progress import progress_bar
from botorch_transfer.validation import check_number

#: Smallest per-point noise variance used when conditioning (noise-free data).
MIN_SOURCE_NOISE = 1e-10
#: Most source observations for which the posterior mean is solved exactly (one
#: ``N x N`` Cholesky: 0.8 GB at N=10,000); beyond, the low-rank factor's DTC mean.
EXACT_MEAN_MAX_POINTS = 10_000
#: The factor's (DTC) mean replaces the exact one when the prior variance the
#: factor leaves out is at most this fraction of the smallest noise variance (its
#: error is then of that relative order: 5e-8 outcome sd at N=10,000, d=4, rank 574
#: in ``benchmarks/source_error.py``) ...
DTC_MEAN_MAX_NEGLECTED_TO_NOISE = 1e-6
#: ... for sources of at least this many observations: below, the exact solve is
#: cheap (BoTorch's own ``max_cholesky_size``) and keeps the mean exact to rounding.
DTC_MEAN_MIN_POINTS = 4096


def _freeze(module: torch.nn.Module | None) -> torch.nn.Module | None:
    r"""Fixes ``module`` (the posterior's own copy): eval mode, no gradients, and no
    prior terms. A frozen module's priors would add a constant to the marginal
    likelihood of every model that holds it (``ExactMarginalLogLikelihood`` sums the
    priors of all submodules): nothing to fit, but they are evaluated at every
    optimizer step (RGPE's 100 sources: most of the fit's time) and the constant
    moves the optimizer's relative stopping test. The prior modules stay (the
    state dict's keys do not change)."""
    if module is not None:
        module.eval()
        for parameter in module.parameters():
            parameter.requires_grad_(False)
        for submodule in module.modules():
            if isinstance(submodule, gpytorch.Module):
                submodule._priors.clear()
    return module


def _flatten(X: Tensor) -> tuple[Tensor, torch.Size]:
    r"""Flatten ``batch x n x d`` to ``(batch * n) x d`` (never a batch of N x N
    solves)."""
    return X.reshape(-1, X.shape[-1]), X.shape[:-1]


def pivoted_cholesky(
    diagonal: Tensor,
    row: callable,
    max_rank: int,
    tolerance: float,
    progress: bool = True,
) -> tuple[Tensor, Tensor, float]:
    r"""Greedy pivoted Cholesky of a PSD matrix given by its diagonal and rows.

    Unlike ``linear_operator``'s version this never needs the matrix: ``row(i)``
    evaluates one kernel row on demand, and each step is a single matrix-vector
    product, so the factorization costs ``O(N r^2)`` time and ``O(N r)`` memory.

    Args:
        diagonal: ``N`` diagonal of the matrix.
        row: Callable returning row ``i`` (an ``N`` tensor).
        max_rank: Largest rank of the factor.
        tolerance: Stop when the largest residual diagonal is at most
            ``tolerance`` times the largest diagonal entry (or ``N`` times the
            dtype's machine epsilon, below which residuals are round-off).
        progress: Count the steps (the rank) on a progress bar when the
            factorization takes more than a few seconds (see
            :mod:`botorch_transfer.progress`).

    Returns:
        ``(P, pivots, residual)``: the ``N x r`` factor with ``P P^T ~ K``, the ``r``
        pivot indices, and the largest residual diagonal relative to the largest
        diagonal entry (0 when the factor is exact).
    """
    n = diagonal.shape[0]
    max_rank = min(max_rank, n)
    factor = diagonal.new_zeros(max_rank, n)
    residual = diagonal.clone()
    scale = residual.max().clamp_min(torch.finfo(diagonal.dtype).tiny)
    # below n * eps of the largest entry a residual is round-off: pivoting on it
    # makes the factor's pivot block singular (NaN covariances at tolerance=0)
    stop = max(tolerance, n * torch.finfo(diagonal.dtype).eps) * scale
    pivots = []
    bar = progress_bar(
        total=max_rank,
        progress=progress,
        desc="source posterior: pivoted Cholesky",
        unit="rank",
    )
    with bar:
        for m in range(max_rank):
            i = int(torch.argmax(residual))
            pivot_value = residual[i]
            if pivot_value <= stop:
                break
            new_row = row(i) - factor[:m].T @ factor[:m, i]
            new_row = new_row / pivot_value.sqrt()
            factor[m] = new_row
            residual = residual - new_row**2
            pivots.append(i)
            residual[pivots] = 0.0  # exactly zero on the pivots (guards round-off)
            bar.update(1)
        bar.total = bar.n  # stopping at the numerical rank completes the factor
    rank = len(pivots)
    rel_residual = float(residual.clamp_min(0).max() / scale) if rank < n else 0.0
    return (
        factor[:rank].T.contiguous(),
        torch.tensor(pivots, dtype=torch.long, device=diagonal.device),
        rel_residual,
    )


class SourcePosterior(Module):
    r"""A fixed Gaussian process posterior of a source function.

    Subclasses implement ``_mean``, ``_covariance`` and ``_variance`` in their own
    output space; the public methods apply the affine output map
    ``out = output_scale * own + output_offset`` that places the source in the
    consumer's (outcome-transformed) space.

    All methods take raw inputs ``X`` of shape ``batch x n x d``.
    """

    #: Largest fixed point set whose covariance (and features) are kept for the next
    #: call (see ``_cached``).
    COVARIANCE_CACHE_MAX_POINTS = 2048

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("output_scale", torch.tensor(1.0))
        self.register_buffer("output_offset", torch.tensor(0.0))
        self._covariance_cache = None

    def _apply(self, fn, *args, **kwargs):
        # new dtype/device or new buffer tensors: nothing kept is valid
        return apply_keeping_caches(
            self.buffers,
            lambda: super(SourcePosterior, self)._apply(fn, *args, **kwargs),
            lambda: setattr(self, "_covariance_cache", None),
        )

    def _load_from_state_dict(self, *args, **kwargs) -> None:
        self._covariance_cache = None
        super()._load_from_state_dict(*args, **kwargs)

    def train(self, mode: bool = True) -> SourcePosterior:
        r"""A source posterior is frozen: it stays in eval mode (its input transform
        must never re-learn coefficients while a consumer model trains)."""
        return super().train(False)

    def set_output_affine(self, scale: Tensor | float, offset: Tensor | float) -> None:
        r"""Compose the output map with ``out -> scale * out + offset``."""
        scale, offset = torch.as_tensor(scale), torch.as_tensor(offset)
        # never lose precision to the (float32 by default) initial buffers
        dtype = torch.promote_types(
            self.output_scale.dtype, torch.promote_types(scale.dtype, offset.dtype)
        )
        device = self.output_scale.device
        scale, offset = (
            scale.to(device=device, dtype=dtype),
            offset.to(device=device, dtype=dtype),
        )
        self.output_offset = scale * self.output_offset.to(dtype) + offset
        self.output_scale = scale * self.output_scale.to(dtype)

    def mean(self, X: Tensor) -> Tensor:
        r"""Posterior mean, shape ``batch x n``."""
        return self.output_scale * self._mean(X) + self.output_offset

    def covariance(self, X1: Tensor, X2: Tensor | None = None) -> Tensor:
        r"""Posterior covariance ``batch x n1 x n2`` between ``X1`` and ``X2``.

        The batch shapes of ``X1`` and ``X2`` broadcast (e.g. ``b x t x d`` test
        points against ``n x d`` training points). ``X2=None`` returns the joint
        covariance of ``X1`` with itself.
        """
        if X2 is not None:
            return self.output_scale**2 * self._covariance(X1, X2)
        return self.output_scale**2 * self._joint_covariance(X1)

    def _joint_covariance(self, X: Tensor) -> Tensor:
        r"""``_covariance(X, X)``, reused for a fixed point set: a model's training
        block is asked for at every step of its hyperparameter fit and in every
        posterior call, with the same inputs."""
        return self._cached("covariance", X, lambda: self._covariance(X, X))

    def _cached(self, name: str, X: Tensor | None, compute: callable) -> Tensor:
        r"""``compute()``, a function of this posterior's buffers and of the fixed
        set ``X`` (``n x d``; ``None``: of the buffers alone), kept per ``name``
        until the buffers change or ``X`` differs.

        Nothing is kept for a batch of sets, for sets larger than
        ``COVARIANCE_CACHE_MAX_POINTS``, or where a gradient with respect to ``X`` is
        needed (test points in an acquisition).
        """
        if X is not None and (
            X.dim() != 2
            or X.shape[0] > self.COVARIANCE_CACHE_MAX_POINTS
            or (torch.is_grad_enabled() and X.requires_grad)
        ):
            return compute()
        key = state_key(self.buffers())
        cache = self._covariance_cache or {}
        hit = cache.get(name)
        if (
            hit is not None
            and hit[1] == key
            and (X is None or same_tensors([hit[0]], [X]))
        ):
            return hit[2]
        value = compute()
        kept = None if X is None else X.detach().clone()
        self._covariance_cache = {**cache, name: (kept, key, value.detach())}
        return value

    def joint_covariance(self, X_fixed: Tensor, X: Tensor) -> Tensor:
        r"""Joint covariance of ``[X_fixed; X]`` for a fixed set and a batch of points.

        GPyTorch evaluates a model's prior on ``[train; test]`` for every batch of
        test points. Evaluating the source covariance on that joint set would repeat
        the ``n x n`` training block once per batch entry; here it is computed once
        (and kept for the next call), and only the cross and test blocks are
        evaluated per batch entry.

        Args:
            X_fixed: ``n x d`` raw inputs shared by all batch entries (e.g. the
                training inputs; a batch of sets broadcastable with ``X`` works, but
                is not kept).
            X: ``batch x m x d`` raw inputs.

        Returns:
            The ``batch x (n + m) x (n + m)`` covariance.
        """
        batch, n = X.shape[:-2], X_fixed.shape[-2]
        fixed = self.covariance(X_fixed).expand(*batch, n, n)
        cross, own = self.query_covariances(X_fixed, X)
        top = torch.cat([fixed, cross.transpose(-1, -2)], dim=-1)
        return torch.cat([top, torch.cat([cross, own], dim=-1)], dim=-2)

    def query_covariances(self, X_fixed: Tensor, X: Tensor) -> tuple[Tensor, Tensor]:
        r"""The query blocks of :meth:`joint_covariance`: the covariance of ``X``
        with the fixed set and with itself (what a GP's prediction at ``X`` needs).

        Args:
            X_fixed: ``n x d`` raw inputs shared by all batch entries.
            X: ``batch x m x d`` raw inputs.

        Returns:
            ``(batch x m x n, batch x m x m)``.
        """
        cross, own = self._cross_and_own(X_fixed, X)
        return self.output_scale**2 * cross, self.output_scale**2 * own

    def _cross_and_own(self, X_fixed: Tensor, X: Tensor) -> tuple[Tensor, Tensor]:
        r"""``(_covariance(X, X_fixed), _covariance(X, X))``."""
        return self._covariance(X, X_fixed), self._covariance(X, X)

    def variance(self, X: Tensor) -> Tensor:
        r"""Posterior variance, shape ``batch x n`` (no ``n x n`` matrix is formed)."""
        return self.output_scale**2 * self._variance(X)

    def _mean(self, X: Tensor) -> Tensor:
        raise NotImplementedError

    def _covariance(self, X1: Tensor, X2: Tensor) -> Tensor:
        raise NotImplementedError

    def _variance(self, X: Tensor) -> Tensor:
        raise NotImplementedError


#: What the source-conditioned models take as one source: observations, a fitted
#: single-output model, or a frozen ``SourcePosterior`` (see
#: ``frozen_source_posterior``).
SourceLike = TaskData | Model | SourcePosterior


class GPSourcePosterior(SourcePosterior):
    r"""The cached posterior of a GP conditioned on noisy observations.

    The covariance is exact up to ``tolerance`` while the numerical rank of the prior
    covariance at the data is at most ``max_rank``, and a Nystrom (DTC)
    approximation of rank ``max_rank`` beyond (a warning says so). The mean is exact
    up to ``EXACT_MEAN_MAX_POINTS`` observations (see ``exact_mean``) and the DTC
    mean of the same factor beyond, or from ``DTC_MEAN_MIN_POINTS`` on wherever the
    factor is complete (then both agree), so that no ``N x N`` matrix is formed: a
    source of 100,000 points needs ``O(N max_rank)`` memory.

    The GP prior is ``m(x) = mean_module(T(x)) [+ prior_source.mean(x)]`` and
    ``k(x, x') = covar_module(T(x), T(x')) [+ prior_source.covariance(x, x')]``,
    with ``T`` the optional ``input_transform``. It is conditioned on
    ``train_Y`` observed at ``train_X`` with per-point noise variances ``noise``.
    Every module is deep-copied and frozen: later changes to the originals do
    not affect this posterior.

    Args:
        train_X: ``N x d`` raw training inputs.
        train_Y: ``N`` (or ``N x 1``) training targets.
        noise: ``N`` (or ``N x 1``) observation noise variances.
        covar_module: The prior kernel on transformed inputs.
        mean_module: Optional prior mean on transformed inputs (zero if ``None``).
        input_transform: Optional input transform applied to raw inputs (in eval
            mode) before ``mean_module`` and ``covar_module``.
        prior_source: Optional source posterior whose mean and covariance are added
            to the prior (used for exact stacked conditionals).
        max_rank: Largest rank of the cached factor (per-point cost is
            ``O(max_rank^2)``); at most ``N``.
        tolerance: Relative residual variance at which the factor stops growing.
        progress: Show a progress bar over the factorization when it takes more
            than a few seconds (see :mod:`botorch_transfer.progress`).
        exact_mean: Solve the mean weights exactly (an ``N x N`` Cholesky) or take
            the DTC mean of the low-rank factor (``O(N max_rank)``); default
            ``None``: exact up to ``EXACT_MEAN_MAX_POINTS`` points, unless
            ``N >= DTC_MEAN_MIN_POINTS`` and the factor is smaller than ``N`` and
            leaves out a prior variance below ``DTC_MEAN_MAX_NEGLECTED_TO_NOISE``
            times the smallest noise (then the two means agree to about that
            relative order, and the factor's costs ``O(r)`` per point instead of
            ``O(N)``).

    Example:
        >>> kernel = ScaleKernel(RBFKernel())
        >>> source = GPSourcePosterior(X, Y, torch.full((len(X),), 0.01), kernel)
        >>> source.mean(torch.rand(5, 1, X.shape[-1])).shape
        torch.Size([5, 1])
    """

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        noise: Tensor,
        covar_module: Module,
        mean_module: Mean | None = None,
        input_transform: Module | None = None,
        prior_source: SourcePosterior | None = None,
        max_rank: int = 1000,
        tolerance: float = 1e-10,
        progress: bool = True,
        exact_mean: bool | None = None,
    ) -> None:
        super().__init__()
        if train_X.dim() != 2:
            raise ValueError(
                "`train_X` must be N x d for a source posterior, got "
                f"{tuple(train_X.shape)}."
            )
        n = train_X.shape[0]
        for name, value in (("train_Y", train_Y), ("noise", noise)):
            if value.numel() != n:
                raise ValueError(
                    f"`{name}` must have {n} entries (one per row of `train_X`), got "
                    f"{tuple(value.shape)}."
                )
        for name, value in (
            ("train_X", train_X),
            ("train_Y", train_Y),
            ("noise", noise),
        ):
            if not torch.isfinite(value).all():
                raise ValueError(f"`{name}` contains NaN or infinite values.")
        if (noise < 0).any():
            raise ValueError("`noise` must be non-negative (it holds variances).")
        dtype, device = train_X.dtype, train_X.device
        self.covar_module = _freeze(copy.deepcopy(covar_module))
        self.mean_module = _freeze(copy.deepcopy(mean_module))
        self.input_transform = _freeze(copy.deepcopy(input_transform))
        self.prior_source = _freeze(copy.deepcopy(prior_source))
        # The one-time factorization runs in float64 whatever the model dtype.
        self.to(dtype=torch.float64, device=device)
        X = train_X.detach().to(torch.float64)
        y = train_Y.detach().reshape(-1).to(torch.float64)
        D = noise.detach().reshape(-1).to(torch.float64).clamp_min(MIN_SOURCE_NOISE)
        with torch.no_grad():
            y_centered = y - self._prior_mean(X)
            Xt = self._transform(X)

            def row(i: int) -> Tensor:
                r = self.covar_module(Xt[i : i + 1], Xt).to_dense()[0]
                if self.prior_source is not None:
                    r = r + self.prior_source.covariance(X[i : i + 1], X)[0]
                return r

            prior_variance = self._prior_variance(X)
            P, pivots, residual = pivoted_cholesky(
                prior_variance,
                row,
                max_rank=max_rank,
                tolerance=tolerance,
                progress=progress,
            )
            L_Z = P[pivots]  # lower-triangular r x r (rows in pivot order)
            G = P.T @ (P / D.unsqueeze(-1))
            evals, evecs = torch.linalg.eigh(G)
            evals = evals.clamp_min(0.0)
            if exact_mean is None:
                # the factor's mean is the exact one when the prior variance it
                # leaves out is negligible against the noise, at O(r) per point
                # instead of O(N) (and no N x N Cholesky)
                neglected = residual * float(prior_variance.max())
                complete = neglected <= DTC_MEAN_MAX_NEGLECTED_TO_NOISE * float(D.min())
                exact_mean = n <= EXACT_MEAN_MAX_POINTS and not (
                    complete and pivots.numel() < n and n >= DTC_MEAN_MIN_POINTS
                )
            if exact_mean:  # one Cholesky solve of (K + D)
                K = self._prior_covariance(X, X) + torch.diag(D)
                mean_weights = torch.cholesky_solve(
                    y_centered.unsqueeze(-1), psd_safe_cholesky(K)
                ).squeeze(-1)
                del K
                mean_inputs = X
            else:  # DTC: L_Z^{-T} (I + G)^{-1} P^T D^{-1} y, weights on the pivots
                b = evecs.T @ (P.T @ (y_centered / D))
                mean_weights = torch.linalg.solve_triangular(
                    L_Z.T, (evecs @ (b / (1.0 + evals))).unsqueeze(-1), upper=True
                ).squeeze(-1)
                mean_inputs = X[pivots]
            del P
            S = evecs * (evals / (1.0 + evals)).sqrt()
            feature_map = torch.linalg.solve_triangular(L_Z.T, S, upper=True)
        self.rank = int(pivots.numel())
        self.relative_residual = residual
        if residual > 1e-6:
            warnings.warn(
                f"Source posterior approximated with rank {self.rank} < "
                f"N={X.shape[0]}: the largest neglected prior variance is "
                f"{residual:.2e} of the largest. "
                "Increase `max_rank` for a closer (up to exact) posterior.",
                stacklevel=2,
            )
        self.exact_mean = bool(exact_mean)
        # the inputs the mean weights act on: all observations, or the pivots (DTC)
        self.register_buffer("train_inputs", mean_inputs)
        self.register_buffer("inducing_points", X[pivots])
        self.register_buffer("mean_weights", mean_weights)
        self.register_buffer("feature_map", feature_map)
        self.to(dtype=dtype, device=device)

    def _transform(self, X: Tensor) -> Tensor:
        if self.input_transform is None:
            return X
        Xt = self.input_transform(X)
        if Xt.shape != X.shape:
            raise ValueError(
                "Source input transforms must preserve the input shape, but "
                f"{type(self.input_transform).__name__} maps {tuple(X.shape)} to "
                f"{tuple(Xt.shape)}."
            )
        return Xt

    def _prior_mean(self, X: Tensor) -> Tensor:
        mean = torch.zeros(X.shape[:-1], dtype=X.dtype, device=X.device)
        if self.mean_module is not None:
            mean = mean + self.mean_module(self._transform(X))
        if self.prior_source is not None:
            mean = mean + self.prior_source.mean(X)
        return mean

    def _prior_covariance(self, X1: Tensor, X2: Tensor) -> Tensor:
        cov = self.covar_module(self._transform(X1), self._transform(X2)).to_dense()
        if self.prior_source is not None:
            cov = cov + self.prior_source.covariance(X1, X2)
        return cov

    def _prior_covariance_to(self, X: Tensor, name: str) -> Tensor:
        r"""``k(X, points)`` for the stored point set ``name`` (the pivots or the mean's
        inputs), whose transformed inputs are kept between calls."""
        if self.prior_source is not None or self.input_transform is None:
            return self._prior_covariance(X, getattr(self, name))
        transformed = self._transformed_points(name)
        return self.covar_module(self._transform(X), transformed).to_dense()

    def _transformed_points(self, name: str) -> Tensor:
        r"""The stored point set ``name`` (a buffer) through the input transform, kept
        while the buffers' versions are unchanged (they identify it)."""
        return self._cached(name, None, lambda: self._transform(getattr(self, name)))

    def _prior_variance(self, X: Tensor) -> Tensor:
        var = self.covar_module(self._transform(X), diag=True)
        if self.prior_source is not None:
            var = var + self.prior_source.variance(X)
        return var

    def _cross_to_inducing(self, X: Tensor) -> Tensor:
        r"""``k(X, Z)`` for flattened ``X``: ``n x r``."""
        return self._prior_covariance_to(X, "inducing_points")

    def _features(self, X: Tensor) -> Tensor:
        X_flat, shape = _flatten(X)
        features = self._cross_to_inducing(X_flat) @ self.feature_map
        return features.reshape(*shape, self.feature_map.shape[-1])

    def _mean(self, X: Tensor) -> Tensor:
        X_flat, shape = _flatten(X)
        mean = (
            self._prior_mean(X_flat)
            + self._prior_covariance_to(X_flat, "train_inputs") @ self.mean_weights
        )
        return mean.reshape(shape)

    def _covariance(self, X1: Tensor, X2: Tensor) -> Tensor:
        prior = self._prior_covariance(X1, X2)
        features1 = self._features(X1)
        # the joint covariance of X1 with itself (every posterior call) needs one pass
        features2 = features1 if X2 is X1 else self._features(X2)
        return prior - features1 @ features2.transpose(-1, -2)

    def _variance(self, X: Tensor) -> Tensor:
        X_flat, shape = _flatten(X)
        prior = self._prior_variance(X_flat).reshape(shape)
        return (prior - self._features(X).pow(2).sum(-1)).clamp_min(0.0)

    def _cross_and_own(self, X_fixed: Tensor, X: Tensor) -> tuple[Tensor, Tensor]:
        # the test points' features once, the fixed set's from the cache
        fixed = self._cached("features", X_fixed, lambda: self._features(X_fixed))
        if self.prior_source is not None or X_fixed.dim() != 2:
            features = self._features(X)
            cross = self._prior_covariance(X, X_fixed)
            own = self._prior_covariance(X, X)
        else:
            # the test points transformed once for their three kernel blocks (an
            # acquisition's every evaluation comes here); the fixed set's and the
            # inducing points' transformed inputs are kept
            X_flat, shape = _flatten(X)
            Xt = self._transform(X_flat)
            inducing = self._transformed_points("inducing_points")
            fixed_t = self._cached(
                "transformed", X_fixed, lambda: self._transform(X_fixed)
            )
            to_inducing = self.covar_module(Xt, inducing).to_dense()
            features = (to_inducing @ self.feature_map).reshape(*shape, -1)
            cross = self.covar_module(Xt, fixed_t).to_dense().reshape(*shape, -1)
            own = self.covar_module(Xt.reshape(*shape, X.shape[-1])).to_dense()
        cross = cross - features @ fixed.transpose(-1, -2)
        own = own - features @ features.transpose(-1, -2)
        return cross, own


class ModelSourcePosterior(SourcePosterior):
    r"""Any fitted single-output BoTorch ``Model`` used as a frozen source.

    Evaluates the wrapped model's ``posterior``; per-point cost is that model's.
    Prefer passing exact GPs (``SingleTaskGP``), which are converted to a cached
    :class:`GPSourcePosterior` instead.

    Args:
        model: A fitted single-output, non-batched BoTorch model (a frozen copy is
            kept; the model itself is left as it is).
    """

    def __init__(self, model: Model) -> None:
        super().__init__()
        self.model = _freeze(copy.deepcopy(model))

    def _mean(self, X: Tensor) -> Tensor:
        X_flat, shape = _flatten(X)
        # one point per t-batch: marginal means without an n x n joint
        post = self.model.posterior(X_flat.unsqueeze(-2))
        return post.mean.reshape(shape)

    def _variance(self, X: Tensor) -> Tensor:
        X_flat, shape = _flatten(X)
        post = self.model.posterior(X_flat.unsqueeze(-2))
        return post.variance.reshape(shape)

    def _covariance(self, X1: Tensor, X2: Tensor) -> Tensor:
        batch = torch.broadcast_shapes(X1.shape[:-2], X2.shape[:-2])
        X1 = X1.expand(*batch, *X1.shape[-2:])
        X2 = X2.expand(*batch, *X2.shape[-2:])
        n1 = X1.shape[-2]
        joint = self.model.posterior(torch.cat([X1, X2], dim=-2)).mvn.covariance_matrix
        return joint[..., :n1, n1:]


class SumSourcePosterior(SourcePosterior):
    r"""The sum of independent source posteriors (a stack of residual layers).

    Args:
        components: The summed posteriors, each already in this sum's output space.
    """

    def __init__(self, components: Sequence[SourcePosterior]) -> None:
        super().__init__()
        self.components = torch.nn.ModuleList(components)
        self.to(components[0].output_scale)

    def _mean(self, X: Tensor) -> Tensor:
        return sum(c.mean(X) for c in self.components)

    def _covariance(self, X1: Tensor, X2: Tensor) -> Tensor:
        return sum(c.covariance(X1, X2) for c in self.components)

    def _variance(self, X: Tensor) -> Tensor:
        return sum(c.variance(X) for c in self.components)


def marginal_affine_covariance(
    covariance: Tensor,
    mean1: Tensor,
    mean2: Tensor,
    scale_sd: float,
    offset_sd: float,
) -> Tensor:
    r"""Covariance of ``a g + c`` between two point sets, for a Gaussian process
    ``g`` and independent ``a ~ N(1, scale_sd^2)``, ``c ~ N(0, offset_sd^2)``:
    ``(1 + s_a^2) Sigma_g + s_a^2 mu_g mu_g'^T + s_c^2``.

    Args:
        covariance: ``batch x n1 x n2`` covariance ``Sigma_g`` of ``g``.
        mean1: ``batch x n1`` mean ``mu_g`` at the first set.
        mean2: ``batch x n2`` mean at the second set.
        scale_sd: ``s_a``.
        offset_sd: ``s_c``.

    Returns:
        The ``batch x n1 x n2`` covariance.
    """
    outer = mean1.unsqueeze(-1) * mean2.unsqueeze(-2)
    return (1 + scale_sd**2) * covariance + scale_sd**2 * outer + offset_sd**2


class MarginalAffineSourcePosterior(SourcePosterior):
    r"""A source whose scale and offset are unknown: the Gaussian process with the
    first two moments of ``a g + c``, for the source posterior ``g`` and independent
    ``a ~ N(1, scale_sd^2)`` and ``c ~ N(0, offset_sd^2)`` integrated out.

    Its mean is ``mu_g`` and its covariance ``(1 + s_a^2) Sigma_g + s_a^2 mu_g
    mu_g^T + s_c^2`` (:func:`marginal_affine_covariance`). The rank-one term keeps
    the scale uncertain where data do not fix it: two points with different source
    means stay uncertain relative to each other until both are observed. (``a g`` is
    not Gaussian; a GP with its moments takes its place, as in the explicit-basis
    GPs of Rasmussen & Williams, Sec. 2.7, with ``mu_g`` and 1 as the basis.)

    Args:
        source: The source posterior ``g`` (in this posterior's output space).
        scale_sd: Standard deviation ``s_a`` of the scale ``a`` around 1.
        offset_sd: Standard deviation ``s_c`` of the offset ``c`` around 0.

    Example:
        >>> prior = MarginalAffineSourcePosterior(source, scale_sd=0.5, offset_sd=1.0)
        >>> variance = prior.variance(X)  # (1.25) var_g + 0.25 mu_g^2 + 1
    """

    def __init__(
        self, source: SourcePosterior, scale_sd: float, offset_sd: float
    ) -> None:
        super().__init__()
        self.source = source
        self.scale_sd = check_number("scale_sd", scale_sd)
        self.offset_sd = check_number("offset_sd", offset_sd)
        self.to(source.output_scale)

    def _mean(self, X: Tensor) -> Tensor:
        return self.source.mean(X)

    def _covariance(self, X1: Tensor, X2: Tensor) -> Tensor:
        return marginal_affine_covariance(
            self.source.covariance(X1, X2),
            self.source.mean(X1),
            self.source.mean(X2),
            self.scale_sd,
            self.offset_sd,
        )

    def _variance(self, X: Tensor) -> Tensor:
        s_a2 = self.scale_sd**2
        return (
            (1 + s_a2) * self.source.variance(X)
            + s_a2 * self.source.mean(X) ** 2
            + self.offset_sd**2
        )

    def _cross_and_own(self, X_fixed: Tensor, X: Tensor) -> tuple[Tensor, Tensor]:
        # the source's own blocks (its cached fixed-set features), in its output space
        source = self.source
        cross, own = source._cross_and_own(X_fixed, X)
        squared_scale = source.output_scale**2
        mean, mean_fixed = source.mean(X), source.mean(X_fixed)
        return (
            marginal_affine_covariance(
                squared_scale * cross, mean, mean_fixed, self.scale_sd, self.offset_sd
            ),
            marginal_affine_covariance(
                squared_scale * own, mean, mean, self.scale_sd, self.offset_sd
            ),
        )


def outcome_affine(outcome_transform: Module | None) -> tuple[Tensor, Tensor] | None:
    r"""The affine map ``y_user = scale * y_model + offset`` of an outcome transform.

    Args:
        outcome_transform: ``None`` or a fitted single-output ``Standardize``.

    Returns:
        ``(scale, offset)`` as scalar tensors, or ``None`` for no transform.

    Raises:
        TypeError: For transforms that are not affine (e.g. ``Log``), under which a
            relation ``f = g + delta`` between source and target would not hold.
    """
    if outcome_transform is None:
        return None
    if not isinstance(outcome_transform, Standardize):
        raise TypeError(
            "Source and target outputs must share one affine outcome transform; "
            f"got {type(outcome_transform).__name__}. Use `Standardize(m=1)` or None."
        )
    if outcome_transform._m != 1 or outcome_transform.stdvs.numel() != 1:
        raise ValueError(
            "The outcome transform must be a single-output, non-batched `Standardize`."
        )
    return outcome_transform.stdvs.reshape(()), outcome_transform.means.reshape(())


__getattr__ = moved_names(
    __name__,
    {
        name: "botorch_transfer.models.frozen_source"
        for name in (
            "FIT_MAX_POINTS",
            "exact_gp_source_posterior",
            "exact_gp_state",
            "fit_subset_rows",
            "frozen_source_posterior",
            "source_posterior_from_model",
        )
    },
)
