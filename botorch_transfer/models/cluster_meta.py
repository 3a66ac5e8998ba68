r"""Clustering-based meta-BO (cm-BO): a meta prior built from clusters of meta-tasks.

Implements Nguyen, Huynh, Tran, Pham, Huynh and Nguyen, *Clustering-based Meta
Bayesian Optimization with Theoretical Guarantee* (Algorithm 1, eqs. 3-8,
Theorem 3.1):

- Stage 1 (:func:`build_cluster_prior`, Alg. 1 lines 3-9): one GP per meta-task
  (kernel: outputscale x Matern-3/2 x Matern-1/2, ARD, as in Sec. 4.1; hyperparameters
  fitted per task), its posterior discretized on shared index points ``V`` as
  ``N(m_j, S_j)``, and k-means over these Gaussians (Jeffreys or 2-Wasserstein).
- Stage 2 (lines 10-11): one prototype per cluster, ``"center"`` (the GP with the
  mean of the members' posterior means and the mean of their posterior kernels,
  defined on the whole domain) or ``"barycenter"`` (the Wasserstein barycenter of the
  members' discretized posteriors, defined on ``V`` only).
- Stage 3 (lines 12-22, :class:`ClusterMetaPriorGP`): an exact GP on the target task
  with prior mean ``sum_i w_i mu_Ci`` and prior kernel ``sum_i w_i^2 k_Ci`` (line 15,
  eq. 8, Theorem 3.1); after each query the weights are updated from the distances
  between the target posterior and every prototype on ``V``:
  ``w_i = exp(1 - d_i / d_max) / sum_j exp(1 - d_j / d_max)`` (lines 19-21).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
from botorch.exceptions.errors import UnsupportedError
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.gpytorch import GPyTorchModel
from botorch.models.transforms.input import InputTransform, Normalize
from botorch.models.transforms.outcome import OutcomeTransform, Standardize
from botorch.models.utils.gpytorch_modules import MIN_INFERRED_NOISE_LEVEL
from botorch.sampling.pathwise.posterior_samplers import DrawMatheronPaths
from botorch.sampling.pathwise.prior_samplers import DrawKernelFeaturePaths
from botorch.utils.datasets import SupervisedDataset
from gpytorch.constraints import GreaterThan
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel, MaternKernel, ProductKernel, ScaleKernel
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, Likelihood
from gpytorch.means import Mean
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP
from gpytorch.priors import LogNormalPrior
from torch import Tensor
from torch.nn import Module

from botorch_transfer.clustering.barycenter import wasserstein_barycenter
from botorch_transfer.clustering.divergences import (
    check_distance,
    jeffreys_divergence,
    wasserstein_distance,
)
from botorch_transfer.clustering.kmeans import gaussian_kmeans, select_n_clusters
from botorch_transfer.data import TaskData, validate_task_set
from botorch_transfer.models.base import SourceConditionedGP, TrainingData

PROTOTYPES = ("center", "barycenter")
FORMAT_VERSION = 1


# --------------------------------------------------------------------------- stage 1
def _product_matern(Z1: Tensor, Z2: Tensor, ls32: Tensor, ls12: Tensor, aligned: bool = False) -> Tensor:
    r"""Per-task correlation ``M32(r_32) * M12(r_12)`` between normalized inputs.

    ``Z1``: ``... x n1 x d`` and ``Z2``: ``... x n2 x d`` (broadcastable batch);
    ``ls32``, ``ls12``: ``K x d`` lengthscales. Returns ``K x ... x n1 x n2``; with
    ``aligned=True`` the inputs' leading batch dimension is the task dimension
    (task ``j``'s inputs with task ``j``'s lengthscales) and the result is
    ``broadcast batch x n1 x n2``.

    Distances come from ``torch.cdist`` without the matrix-product shortcut: exact in
    float64 (unlike ``||a||^2 + ||b||^2 - 2ab``), fast, and with finite gradients at
    ``r = 0`` (the test-test diagonal).
    """
    K, d = ls32.shape
    if not aligned:
        Z1, Z2 = Z1.unsqueeze(0), Z2.unsqueeze(0)
    batch = torch.broadcast_shapes(Z1.shape[:-2], Z2.shape[:-2], (K,) + (1,) * (max(Z1.dim(), Z2.dim()) - 3))
    n1, n2 = Z1.shape[-2], Z2.shape[-2]
    if n1 == 0 or n2 == 0:
        return torch.zeros(*batch, n1, n2, dtype=Z1.dtype, device=Z1.device)
    view = (K,) + (1,) * (len(batch) - 1) + (1, d)

    def dist(ls: Tensor) -> Tensor:
        A = (Z1 / ls.reshape(view)).expand(*batch, n1, d)
        B = (Z2 / ls.reshape(view)).expand(*batch, n2, d)
        return torch.cdist(A, B, compute_mode="donot_use_mm_for_euclid_dist")

    r32 = math.sqrt(3) * dist(ls32)
    return (1 + r32) * torch.exp(-r32 - dist(ls12))


class MetaTaskPosteriors(Module):
    r"""Frozen exact GP posteriors of ``K`` meta-tasks (Alg. 1 line 6), evaluated in bulk.

    Task ``j`` has a constant mean ``c_j``, kernel
    ``s_j^2 M32(x, x'; l32_j) M12(x, x'; l12_j)`` on inputs normalized by ``bounds``,
    per-point noise, and standardized outcomes ``y = y_offset_j + y_scale_j * z``. Its
    posterior (eqs. 1-2) in user units is
    ``mu_j(x) = y_offset_j + y_scale_j (c_j + k_j(x, X_j) alpha_j)`` and
    ``k_j(x, x') = y_scale_j^2 (k_j(x, x') - v_j(x)^T v_j(x'))`` with
    ``v_j(x) = L_j^-1 k_j(X_j, x)``, ``L_j L_j^T = k_j(X_j, X_j) + diag(noise_j)``.

    Tasks with fewer than ``n_max`` points are padded (``mask``); padded points have
    zero cross-covariance, an identity block in ``L`` and zero ``alpha``, so they do
    not change anything. All tensors are buffers (frozen, moved by ``.to()``), left out
    of ``state_dict``; the factorizations are recomputed from the stored data and
    hyperparameters on construction.

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

    _FIELDS = (
        "X", "Z_targets", "mask", "noise", "lengthscale_32", "lengthscale_12",
        "outputscale", "constant", "y_offset", "y_scale", "bounds",
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
        values = dict(zip(self._FIELDS, (X, Z_targets, mask, noise, lengthscale_32, lengthscale_12, outputscale, constant, y_offset, y_scale, bounds)))
        for name, value in values.items():
            self.register_buffer(name, value, persistent=False)
        with torch.no_grad():
            Z = self.normalize(X)
            m = mask.to(X)
            K = outputscale.reshape(-1, 1, 1) * _product_matern(Z, Z, lengthscale_32, lengthscale_12, aligned=True)
            K = K * (m.unsqueeze(-1) * m.unsqueeze(-2))
            # padded rows/columns are zero: a unit diagonal there makes L block-identity
            K = K + torch.diag_embed(torch.where(mask, noise, torch.ones_like(noise)))
            chol = torch.linalg.cholesky(K)
            resid = (Z_targets - constant.unsqueeze(-1)) * m
            alpha = torch.cholesky_solve(resid.unsqueeze(-1), chol).squeeze(-1) * m
        self.register_buffer("chol", chol, persistent=False)
        self.register_buffer("alpha", alpha, persistent=False)

    @property
    def num_tasks(self) -> int:
        return self.X.shape[0]

    def normalize(self, X: Tensor) -> Tensor:
        r"""Map raw inputs to the unit cube of ``bounds``."""
        return (X - self.bounds[0]) / (self.bounds[1] - self.bounds[0])

    def state(self) -> dict[str, Tensor]:
        r"""The constructor's tensors (for saving)."""
        return {name: getattr(self, name) for name in self._FIELDS}

    def _cross(self, x: Tensor) -> Tensor:
        r"""``k_j(X_j, x)`` for flat ``N x d`` raw ``x``: ``K x n_max x N`` (masked)."""
        corr = _product_matern(
            self.normalize(self.X), self.normalize(x).unsqueeze(0), self.lengthscale_32, self.lengthscale_12, aligned=True
        )
        kx = self.outputscale.reshape(-1, 1, 1) * corr
        return kx * self.mask.to(kx).unsqueeze(-1)

    def means(self, x: Tensor) -> Tensor:
        r"""Posterior means of every task at flat ``N x d`` raw ``x``: ``K x N`` (user units)."""
        kx = self._cross(x)
        z = self.constant.unsqueeze(-1) + (self.alpha.unsqueeze(-1) * kx).sum(-2)
        return self.y_offset.unsqueeze(-1) + self.y_scale.unsqueeze(-1) * z

    def features(self, x: Tensor) -> Tensor:
        r"""``v_j(x) = L_j^-1 k_j(X_j, x)`` at flat ``N x d`` raw ``x``: ``K x n_max x N``."""
        return torch.linalg.solve_triangular(self.chol, self._cross(x), upper=False)

    def prior_kernel(self, x1: Tensor, x2: Tensor) -> Tensor:
        r"""Prior kernels ``k_j(x1, x2)`` (standardized units) for broadcastable
        ``... x n1 x d`` and ``... x n2 x d``: ``K x ... x n1 x n2``."""
        corr = _product_matern(self.normalize(x1), self.normalize(x2), self.lengthscale_32, self.lengthscale_12)
        return self.outputscale.reshape((-1,) + (1,) * (corr.dim() - 1)) * corr

    def covariances(self, x1: Tensor, x2: Tensor) -> Tensor:
        r"""Posterior covariances ``K x n1 x n2`` of every task (user units), flat inputs."""
        v1, v2 = self.features(x1), self.features(x2)
        cov = self.prior_kernel(x1, x2) - v1.transpose(-1, -2) @ v2
        return self.y_scale.reshape(-1, 1, 1).pow(2) * cov


def _meta_task_kernel(d: int, batch_shape: torch.Size) -> ScaleKernel:
    r"""Sec. 4.1: outputscale x Matern-3/2 x Matern-1/2 (ARD), BoTorch's dimension-scaled
    lengthscale prior on both factors."""
    def matern(nu: float) -> MaternKernel:
        return MaternKernel(
            nu=nu, ard_num_dims=d, batch_shape=batch_shape,
            lengthscale_prior=LogNormalPrior(loc=math.sqrt(2) + 0.5 * math.log(d), scale=math.sqrt(3)),
        )
    return ScaleKernel(ProductKernel(matern(1.5), matern(0.5)), batch_shape=batch_shape)


def fit_meta_task_gps(tasks: Sequence[TaskData], bounds: Tensor) -> list[tuple[list[int], SingleTaskGP]]:
    r"""Fit one GP per meta-task (Alg. 1 line 6).

    Each task gets a ``SingleTaskGP`` with the Sec. 4.1 kernel, inputs normalized by
    ``bounds`` and standardized outcomes, fitted by ``fit_gpytorch_mll`` (known
    ``Yvar`` is used as fixed noise). Tasks are fitted one by one: a batched model over
    equal-sized tasks was measured ~3x slower with BoTorch's batched L-BFGS.

    Args:
        tasks: The meta-tasks.
        bounds: ``2 x d`` input bounds (inputs are normalized with them).

    Returns:
        A list of ``(task indices, fitted batched SingleTaskGP)`` (batch shape
        ``len(indices)``; currently one task per model).
    """
    fitted = []
    d = tasks[0].d
    batch = torch.Size([1])
    for j, task in enumerate(tasks):
        model = SingleTaskGP(
            task.X.unsqueeze(0), task.Y.unsqueeze(0), None if task.Yvar is None else task.Yvar.unsqueeze(0),
            covar_module=_meta_task_kernel(d, batch),
            input_transform=Normalize(d, bounds=bounds), outcome_transform=Standardize(m=1, batch_shape=batch),
        )
        if task.n > 1:
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        model.eval()
        fitted.append(([j], model))
    return fitted


def meta_task_posteriors(
    tasks: Sequence[TaskData], bounds: Tensor, fitted: list[tuple[list[int], SingleTaskGP]] | None = None
) -> MetaTaskPosteriors:
    r"""Fit the meta-task GPs and freeze their posteriors (see :class:`MetaTaskPosteriors`).

    Args:
        tasks: The meta-tasks.
        bounds: ``2 x d`` input bounds.
        fitted: Optional output of :func:`fit_meta_task_gps` (otherwise it is called).

    Returns:
        The frozen posteriors.
    """
    K, d = len(tasks), tasks[0].d
    n_max = max(t.n for t in tasks)
    opts = dict(dtype=tasks[0].X.dtype, device=tasks[0].X.device)
    X = torch.zeros(K, n_max, d, **opts)
    Zt = torch.zeros(K, n_max, **opts)
    mask = torch.zeros(K, n_max, dtype=torch.bool, device=opts["device"])
    noise = torch.ones(K, n_max, **opts)
    ls32, ls12 = torch.ones(K, d, **opts), torch.ones(K, d, **opts)
    outputscale, constant, y_offset, y_scale = (torch.zeros(K, **opts) for _ in range(4))
    fitted = fit_meta_task_gps(tasks, bounds) if fitted is None else fitted
    with torch.no_grad():
        for idx, model in fitted:
            n = tasks[idx[0]].n
            ot = model.outcome_transform
            Y_std = (torch.stack([tasks[j].Y for j in idx]) - ot.means) / ot.stdvs
            kernels = model.covar_module.base_kernel.kernels
            if isinstance(model.likelihood, FixedNoiseGaussianLikelihood):
                task_noise = model.likelihood.noise_covar.noise  # G x n, standardized
            else:
                task_noise = model.likelihood.noise.reshape(len(idx), 1).expand(len(idx), n)
            for g, j in enumerate(idx):
                X[j, :n], Zt[j, :n], mask[j, :n], noise[j, :n] = tasks[j].X, Y_std[g, :, 0], True, task_noise[g]
                ls32[j], ls12[j] = kernels[0].lengthscale[g, 0], kernels[1].lengthscale[g, 0]
                outputscale[j], constant[j] = model.covar_module.outputscale[g], model.mean_module.constant[g]
                y_offset[j], y_scale[j] = ot.means[g, 0, 0], ot.stdvs[g, 0, 0]
    return MetaTaskPosteriors(X, Zt, mask, noise, ls32, ls12, outputscale, constant, y_offset, y_scale, bounds)


# --------------------------------------------------------------------------- weights
def check_weights(weights: Tensor | Sequence[float] | None, n_clusters: int, like: Tensor) -> Tensor:
    r"""Validate cluster weights: ``C`` finite non-negative values summing to 1.

    Weights are *not* silently normalized: a sum off 1 by more than ``1e-6`` raises.
    Within that tolerance they are divided by their sum (to remove rounding).

    Args:
        weights: ``C`` weights, or ``None`` for the uniform ``1/C`` (Alg. 1 line 13).
        n_clusters: ``C``.
        like: A tensor whose dtype and device the weights take.

    Returns:
        The weights as a ``C`` tensor.
    """
    if weights is None:
        return torch.full((n_clusters,), 1.0 / n_clusters, dtype=like.dtype, device=like.device)
    # Python floats straight to the target dtype (not through float32)
    w = weights.to(like) if isinstance(weights, Tensor) else torch.tensor(weights, dtype=like.dtype, device=like.device)
    if w.shape != (n_clusters,):
        raise ValueError(
            f"`weights` must have one entry per cluster, shape ({n_clusters},), got "
            f"{tuple(w.shape)}."
        )
    if not torch.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"`weights` must be finite and non-negative, got {w.tolist()}.")
    total = w.sum().item()
    if abs(total - 1) > 1e-6:
        raise ValueError(
            f"`weights` must sum to 1 (they are not normalized for you), got sum {total:.6g}."
        )
    return w / w.sum()


def cluster_weights_from_distances(distances: Tensor) -> Tensor:
    r"""Prototype weights from distances (Alg. 1 lines 20-21).

    ``w_i = exp(1 - d_i / d_max) / sum_j exp(1 - d_j / d_max)``: the nearest prototype
    gets the largest weight, the farthest ``exp(-1)`` times the weight it would get at
    distance 0. If all distances are 0 the weights are uniform.

    Args:
        distances: ``C`` non-negative distances.

    Returns:
        ``C`` weights summing to 1.

    Example:
        >>> cluster_weights_from_distances(torch.tensor([0.0, 1.0]))
        tensor([0.7311, 0.2689])
    """
    d_max = distances.max()
    if d_max <= 0:
        return torch.full_like(distances, 1.0 / distances.numel())
    return torch.softmax(1 - distances / d_max, dim=-1)


# --------------------------------------------------------------------------- the prior
class ClusterPrototype(NamedTuple):
    r"""One cluster's prototype on the index points.

    Attributes:
        mean: ``m`` prototype mean on the index points.
        covariance: ``m x m`` prototype covariance on the index points (with the
            prior's jitter).
        members: Indices of the cluster's meta-tasks (input order).
    """

    mean: Tensor
    covariance: Tensor
    members: list[int]


def _collapse_batch(x: Tensor) -> Tensor:
    r"""``x`` without its batch dimensions when all batch members are equal.

    GPyTorch evaluates the test-train covariance with the training inputs repeated
    for every test batch; this evaluates them once (results broadcast back).
    """
    if x.dim() <= 2:
        return x
    first = x.reshape(-1, *x.shape[-2:])[0]
    return first if torch.equal(x, first.expand_as(x)) else x


class ClusterMetaPrior(Module):
    r"""The cm-BO meta prior: clustered meta-task posteriors and cluster prototypes.

    Built by :func:`build_cluster_prior`; used by :class:`ClusterMetaPriorGP`. For
    weights ``w`` (one per cluster) it gives the prior mean ``sum_i w_i mu_Ci`` and
    kernel ``sum_i w_i^2 k_Ci`` (Alg. 1 line 15):

    - ``prototype="center"``: ``mu_Ci`` / ``k_Ci`` are the means of the members'
      posterior means / posterior kernels (Stage 2 (1)), evaluated anywhere.
    - ``prototype="barycenter"``: the prototype is the Wasserstein barycenter of the
      members' discretized posteriors (Stage 2 (2)) and exists only on the index points
      ``V``; inputs are looked up in ``V`` and any other input raises ``ValueError``.

    Everything is a frozen buffer (moved by ``.to()``). ``save``/``load`` round-trip it.

    Attributes:
        posteriors: The :class:`MetaTaskPosteriors` of the meta-tasks.
        index_points: ``m x d`` shared index points ``V``.
        assignments: ``K`` cluster index of each meta-task (input order).
        prototype_means: ``C x m`` prototype means on ``V``.
        prototype_covs: ``C x m x m`` prototype covariances on ``V`` (with jitter).
        task_means: ``K x m`` discretized meta-task posterior means.
        task_covs: ``K x m x m`` discretized meta-task posterior covariances (with jitter).
        distance: ``"wasserstein"`` or ``"jeffreys"`` (clustering and weight updates).
        prototype: ``"center"`` or ``"barycenter"``.
        jitter: Relative diagonal jitter of the discretized covariances.
    """

    def __init__(
        self,
        posteriors: MetaTaskPosteriors,
        index_points: Tensor,
        assignments: Tensor,
        prototype_means: Tensor,
        prototype_covs: Tensor,
        task_means: Tensor,
        task_covs: Tensor,
        distance: str = "wasserstein",
        prototype: str = "center",
        jitter: float = 1e-6,
        task_names: list[str | None] | None = None,
        info: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.posteriors = posteriors
        for name, value in (
            ("index_points", index_points), ("assignments", assignments),
            ("prototype_means", prototype_means), ("prototype_covs", prototype_covs),
            ("task_means", task_means), ("task_covs", task_covs),
        ):
            self.register_buffer(name, value, persistent=False)
        self.distance = check_distance(distance)
        if prototype not in PROTOTYPES:
            raise ValueError(f"`prototype` must be one of {PROTOTYPES}, got {prototype!r}.")
        self.prototype = prototype
        self.jitter = float(jitter)
        self.task_names = list(task_names) if task_names is not None else [None] * posteriors.num_tasks
        self.info = dict(info or {})

    # ------------------------------------------------------------------ structure
    @property
    def n_clusters(self) -> int:
        return self.prototype_means.shape[0]

    @property
    def n_tasks(self) -> int:
        return self.assignments.shape[0]

    @property
    def dim(self) -> int:
        return self.index_points.shape[-1]

    @property
    def cluster_sizes(self) -> Tensor:
        return torch.bincount(self.assignments, minlength=self.n_clusters)

    @property
    def prototypes(self) -> list[ClusterPrototype]:
        r"""The ``C`` prototypes on the index points, with their members."""
        return [
            ClusterPrototype(self.prototype_means[c], self.prototype_covs[c], (self.assignments == c).nonzero().flatten().tolist())
            for c in range(self.n_clusters)
        ]

    def check_weights(self, weights: Tensor | Sequence[float] | None) -> Tensor:
        r"""See :func:`check_weights`."""
        return check_weights(weights, self.n_clusters, self.index_points)

    def index_of(self, X: Tensor) -> Tensor:
        r"""Indices of ``X`` (``... x d``) in the index points.

        A point matches an index point when every coordinate agrees to within
        ``1000 * eps * (1 + |v|)`` (so that ``Normalize`` round trips still match).

        Raises:
            ValueError: If a point is not an index point.
        """
        V = self.index_points
        diff = (X.unsqueeze(-2) - V).abs()  # ... x m x d
        tol = 1000 * torch.finfo(V.dtype).eps * (1 + V.abs())
        hit = (diff <= tol).all(-1)
        found = hit.any(-1)
        if not found.all():
            missing = int((~found).sum())
            raise ValueError(
                f"prototype='barycenter' defines the prior only on the prior's {V.shape[0]} "
                f"index points, but {missing} input point(s) are not index points. Use the "
                "model on `prior.index_points` only (e.g. optimize_acqf_discrete(acqf, q, "
                "choices=prior.index_points) and target data observed there), or build the "
                "prior with prototype='center', which is defined on the whole domain."
            )
        return hit.to(torch.uint8).argmax(-1)

    def _task_coefficients(self, weights: Tensor, power: int) -> Tensor:
        r"""Per-task coefficients ``w_c(j)^power / |C_c(j)|`` of the center prototype."""
        sizes = self.cluster_sizes.to(weights)
        return (weights.pow(power) / sizes)[self.assignments]

    # ------------------------------------------------------------------ evaluation
    def mean(self, X: Tensor, weights: Tensor) -> Tensor:
        r"""Prior mean ``sum_i w_i mu_Ci(X)`` at ``... x n x d`` raw ``X``: ``... x n``."""
        if self.prototype == "barycenter":
            return (weights @ self.prototype_means)[self.index_of(X)]
        flat = X.reshape(-1, X.shape[-1])
        means = self.posteriors.means(flat)  # K x N
        return (self._task_coefficients(weights, 1) @ means).reshape(X.shape[:-1])

    def covariance(self, X1: Tensor, X2: Tensor, weights: Tensor, diag: bool = False) -> Tensor:
        r"""Prior kernel ``sum_i w_i^2 k_Ci(X1, X2)`` (Theorem 3.1).

        Args:
            X1: ``batch1 x n1 x d`` raw inputs.
            X2: ``batch2 x n2 x d`` raw inputs (broadcastable batch).
            weights: ``C`` cluster weights.
            diag: Return only the diagonal (``X1`` and ``X2`` must be the same points).

        Returns:
            ``batch x n1 x n2`` (or ``batch x n1`` with ``diag``).
        """
        if self.prototype == "barycenter":
            cov_V = torch.einsum("c,cij->ij", weights.pow(2), self.prototype_covs)
            i1 = self.index_of(X1)
            if diag:
                return torch.diagonal(cov_V)[i1]
            return cov_V[i1.unsqueeze(-1), self.index_of(X2).unsqueeze(-2)]
        coef = self._task_coefficients(weights, 2) * self.posteriors.y_scale.pow(2)  # K
        post = self.posteriors
        if diag:
            flat = X1.reshape(-1, X1.shape[-1])
            v = post.features(flat)  # K x n x N
            var = post.outputscale.unsqueeze(-1) - v.pow(2).sum(-2)
            return (coef @ var).reshape(X1.shape[:-1])
        out_shape = torch.broadcast_shapes(X1.shape[:-2], X2.shape[:-2]) + (X1.shape[-2], X2.shape[-2])
        X1, X2 = _collapse_batch(X1), _collapse_batch(X2)
        K, n = post.chol.shape[:2]

        def scaled_features(x: Tensor, scale: Tensor) -> Tensor:  # batch x (K n) x q
            batch, q = x.shape[:-2], x.shape[-2]
            v = post.features(x.reshape(-1, x.shape[-1])) * scale.reshape(K, 1, 1)  # K x n x (B q)
            v = v.reshape(K, n, -1, q).permute(2, 0, 1, 3)  # B x K x n x q
            return v.reshape(*batch, K * n, q)

        # sum_j c_j (k_j(x1, x2) - v_j(x1)^T v_j(x2)): the feature products of all tasks
        # in one matmul over the stacked (task, point) dimension
        f2 = scaled_features(X2, torch.ones_like(coef))
        same = X1.shape == X2.shape and torch.equal(X1, X2)  # test-test block: features once
        f1 = f2 * coef.repeat_interleave(n).unsqueeze(-1) if same else scaled_features(X1, coef)
        prior = torch.einsum("k,k...->...", coef, post.prior_kernel(X1, X2))
        return (prior - f1.transpose(-1, -2) @ f2).expand(out_shape)

    def prototype_means_at(self, X: Tensor) -> Tensor:
        r"""Each prototype's mean ``mu_Ci`` at ``... x n x d`` raw ``X``: ``C x ... x n``."""
        eye = torch.eye(self.n_clusters, dtype=self.index_points.dtype, device=self.index_points.device)
        return torch.stack([self.mean(X, eye[c]) for c in range(self.n_clusters)])

    def prototype_distances(self, mean: Tensor, cov: Tensor, distance: str | None = None) -> Tensor:
        r"""Distances from ``N(mean, cov)`` on the index points to every prototype (Alg. 1 line 19).

        Args:
            mean: ``m`` mean on the index points.
            cov: ``m x m`` covariance on the index points (add jitter as for the
                prototypes; :meth:`ClusterMetaPriorGP.updated_weights` does).
            distance: ``"wasserstein"`` or ``"jeffreys"`` (default: the prior's).

        Returns:
            ``C`` distances (``W2`` or the Jeffreys divergence), computed in float64 and
            returned in ``mean``'s dtype.
        """
        distance = check_distance(distance if distance is not None else self.distance)
        fn = wasserstein_distance if distance == "wasserstein" else jeffreys_divergence
        # in float64: the discretized covariances are ill-conditioned (that is why they
        # carry a jitter), too much so for float32 Cholesky factors / eigenvalues
        f64 = dict(dtype=torch.float64)
        d = fn(mean.to(**f64), cov.to(**f64), self.prototype_means.to(**f64), self.prototype_covs.to(**f64))
        return d.to(mean.dtype)

    def add_jitter(self, cov: Tensor) -> Tensor:
        r"""``cov + jitter * mean(diag(cov)) * I`` (the documented discretization jitter)."""
        diag = torch.diagonal(cov, dim1=-2, dim2=-1)
        level = self.jitter * diag.mean(-1, keepdim=True).clamp_min(torch.finfo(cov.dtype).tiny)
        return cov + torch.diag_embed(level.expand_as(diag))

    # ------------------------------------------------------------------ save / load
    def save(self, path) -> None:
        r"""Save to ``path`` (``torch.save`` of format, version, config and tensors).

        Example:
            >>> prior.save("prior.pt")
            >>> same = ClusterMetaPrior.load("prior.pt")
        """
        state = {f"posteriors.{k}": v for k, v in self.posteriors.state().items()}
        for name in ("index_points", "assignments", "prototype_means", "prototype_covs", "task_means", "task_covs"):
            state[name] = getattr(self, name)
        config = {
            "distance": self.distance, "prototype": self.prototype, "jitter": self.jitter,
            "n_clusters": self.n_clusters, "task_names": self.task_names, "info": self.info,
        }
        torch.save({"format": type(self).__name__, "version": FORMAT_VERSION, "config": config, "state": state}, path)

    @classmethod
    def load(cls, path, map_location=None) -> ClusterMetaPrior:
        r"""Load a prior written by :meth:`save`.

        Args:
            path: File path (or file-like object).
            map_location: Passed to ``torch.load`` (e.g. ``"cpu"``).

        Returns:
            The prior; its posteriors are identical to the saved one's.
        """
        payload = torch.load(path, map_location=map_location, weights_only=True)
        if not isinstance(payload, dict) or payload.get("format") != cls.__name__:
            raise ValueError(f"{path!r} is not a saved {cls.__name__}.")
        if payload.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"{path!r} has format version {payload.get('version')}; this version of "
                f"botorch_transfer reads version {FORMAT_VERSION}."
            )
        state, config = payload["state"], payload["config"]
        posteriors = MetaTaskPosteriors(**{k: state[f"posteriors.{k}"] for k in MetaTaskPosteriors._FIELDS})
        return cls(
            posteriors, state["index_points"], state["assignments"], state["prototype_means"],
            state["prototype_covs"], state["task_means"], state["task_covs"],
            distance=config["distance"], prototype=config["prototype"], jitter=config["jitter"],
            task_names=config["task_names"], info=config["info"],
        )


def build_cluster_prior(
    tasks: Sequence[TaskData],
    index_points: Tensor | None = None,
    n_clusters: int | None = None,
    distance: str = "wasserstein",
    prototype: str = "center",
    bounds: Tensor | None = None,
    n_index_points: int = 100,
    n_clusters_range: tuple[int, int] = (2, 6),
    jitter: float = 1e-6,
    seed: int = 0,
    n_init: int = 10,
    max_iter: int = 100,
    barycenter_tol: float = 1e-10,
    barycenter_max_iter: int = 500,
    posteriors: MetaTaskPosteriors | None = None,
) -> ClusterMetaPrior:
    r"""Build the cm-BO meta prior from meta-tasks (Algorithm 1, Stages 1-2).

    1. Fits a GP per meta-task (outputscale x Matern-3/2 x Matern-1/2, ARD, on inputs
       normalized by ``bounds``, standardized outcomes; Sec. 4.1) and discretizes each
       posterior on the index points as ``N(m_j, S_j + jitter)``.
    2. Clusters them by k-means with ``distance`` (eq. 7 centers); with
       ``n_clusters=None`` the count in ``n_clusters_range`` with the best
       inter/intra ratio (eqs. 10-11) is chosen.
    3. Builds one prototype per cluster (``"center"`` or ``"barycenter"``).

    Args:
        tasks: The meta-tasks (``TaskData``, one input space, at least one point each).
        index_points: ``m x d`` shared index points ``V``. Default: ``n_index_points``
            scrambled Sobol points in ``bounds`` (seeded by ``seed``).
        n_clusters: Number of clusters ``C`` (``1 <= C <= len(tasks)``), or ``None``.
        distance: ``"wasserstein"`` (eq. 6) or ``"jeffreys"`` (eq. 4); also the
            default for the weight updates.
        prototype: ``"center"`` (the whole domain) or ``"barycenter"`` (``V`` only).
        bounds: ``2 x d`` bounds of the input space (default: the unit cube).
        n_index_points: Number of default index points.
        n_clusters_range: Inclusive range of ``C`` tried when ``n_clusters=None``.
        jitter: Relative diagonal jitter: every discretized covariance gets
            ``jitter * mean(diag(S))`` added, since GP posterior covariances on many
            points are numerically singular (the Jeffreys divergence inverts them).
        seed: Seed of the index points and of k-means.
        n_init: k-means restarts.
        max_iter: k-means iteration cap.
        barycenter_tol: Convergence tolerance of the barycenter iteration.
        barycenter_max_iter: Iteration cap of the barycenter iteration.
        posteriors: Stage-1 posteriors of these tasks to reuse (e.g. ``other_prior.posteriors``),
            to try other clusterings, distances or prototypes without refitting the
            meta-task GPs. Their ``bounds`` replace ``bounds``.

    Returns:
        The :class:`ClusterMetaPrior`.

    Example:
        >>> prior = build_cluster_prior(tasks, n_clusters=3, distance="wasserstein")
        >>> prior.assignments  # cluster of each meta-task
        >>> model = ClusterMetaPriorGP(train_X, train_Y, prior)
    """
    tasks = validate_task_set(tasks, "tasks")
    distance = check_distance(distance)
    if prototype not in PROTOTYPES:
        raise ValueError(f"`prototype` must be one of {PROTOTYPES}, got {prototype!r}.")
    K, d = len(tasks), tasks[0].d
    opts = dict(dtype=tasks[0].X.dtype, device=tasks[0].X.device)
    for j, t in enumerate(tasks):
        if t.n < 1:
            raise ValueError(f"`tasks[{j}]` has no observations; every meta-task needs at least one.")
    if n_clusters is not None and (isinstance(n_clusters, bool) or not isinstance(n_clusters, int) or not 1 <= n_clusters <= K):
        raise ValueError(
            f"`n_clusters` must be None or an integer between 1 and the number of tasks "
            f"({K}), got {n_clusters!r}."
        )
    if not jitter >= 0:
        raise ValueError(f"`jitter` must be non-negative, got {jitter}.")
    if posteriors is not None:
        if not isinstance(posteriors, MetaTaskPosteriors) or posteriors.num_tasks != K or posteriors.X.shape[-1] != d:
            raise ValueError(
                f"`posteriors` must be the MetaTaskPosteriors of these {K} tasks (d={d})."
            )
        posteriors = posteriors.to(**opts)
        bounds = posteriors.bounds
    if bounds is None:
        bounds = torch.stack([torch.zeros(d, **opts), torch.ones(d, **opts)])
    bounds = bounds.to(**opts)
    if bounds.shape != (2, d) or not (bounds[1] > bounds[0]).all():
        raise ValueError(f"`bounds` must be 2 x d={d} with lower < upper, got {tuple(bounds.shape)}.")
    if index_points is None:
        sobol = torch.quasirandom.SobolEngine(d, scramble=True, seed=seed).draw(n_index_points, dtype=torch.float64).to(**opts)
        index_points = bounds[0] + (bounds[1] - bounds[0]) * sobol
    if not isinstance(index_points, Tensor) or index_points.dim() != 2 or index_points.shape[-1] != d or index_points.shape[0] < 1:
        shape = tuple(index_points.shape) if isinstance(index_points, Tensor) else type(index_points).__name__
        raise ValueError(f"`index_points` must be an m x d tensor with d={d} (the tasks' dimension), got {shape}.")
    index_points = index_points.to(**opts)

    # Stage 1: meta-task posteriors, discretized on V
    if posteriors is None:
        posteriors = meta_task_posteriors(tasks, bounds)
    with torch.no_grad():
        task_means = posteriors.means(index_points)
        task_covs = posteriors.covariances(index_points, index_points)
        task_covs = 0.5 * (task_covs + task_covs.transpose(-1, -2))
        diag = torch.diagonal(task_covs, dim1=-2, dim2=-1)
        task_covs = task_covs + torch.diag_embed(jitter * diag.mean(-1, keepdim=True).expand_as(diag))

    # clustering (Alg. 1 line 9)
    info: dict[str, Any] = {}
    kmeans_options = dict(n_init=n_init, max_iter=max_iter, seed=seed)
    if n_clusters is None:
        lo, hi = n_clusters_range
        selection = select_n_clusters(
            task_means, task_covs, candidates=range(lo, min(hi, K) + 1) if lo <= K else [K],
            distance=distance, **kmeans_options,
        )
        result = selection.results[selection.candidates.index(selection.n_clusters)]
        info["selection"] = {"candidates": selection.candidates, "scores": selection.scores, "intra": selection.intra, "inter": selection.inter}
    else:
        result = gaussian_kmeans(task_means, task_covs, n_clusters, distance=distance, **kmeans_options)
    assignments = result.assignments
    C = int(assignments.max()) + 1

    # Stage 2: prototypes on V
    proto_means, proto_covs = [], []
    for c in range(C):
        members = assignments == c
        if prototype == "center":  # eq. 7
            proto_means.append(task_means[members].mean(0))
            proto_covs.append(task_covs[members].mean(0))
        else:
            bary = wasserstein_barycenter(
                task_means[members], task_covs[members], tol=barycenter_tol, max_iter=barycenter_max_iter
            )
            proto_means.append(bary.mean)
            proto_covs.append(bary.covariance)
            info.setdefault("barycenter_iterations", []).append(bary.n_iter)
    return ClusterMetaPrior(
        posteriors, index_points, assignments, torch.stack(proto_means), torch.stack(proto_covs),
        task_means, task_covs, distance=distance, prototype=prototype, jitter=jitter,
        task_names=[t.name for t in tasks], info=info,
    )


# --------------------------------------------------------------------------- stage 3
class ClusterPriorMean(Mean):
    r"""GPyTorch mean ``(sum_i w_i mu_Ci(x) - offset) / scale`` (Alg. 1 line 15, model units).

    Args:
        prior: The :class:`ClusterMetaPrior` (shared, frozen).
        weights: ``C`` cluster weights.
        output_scale: Scale of the model's outcome map (``y = scale * z + offset``).
        output_offset: Offset of the outcome map.
    """

    def __init__(self, prior: ClusterMetaPrior, weights: Tensor, output_scale: Tensor, output_offset: Tensor) -> None:
        super().__init__()
        self.prior = prior
        # constructor data (like training data), not state: left out of state_dict
        self.register_buffer("weights", weights, persistent=False)
        self.register_buffer("output_scale", output_scale, persistent=False)
        self.register_buffer("output_offset", output_offset, persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        return (self.prior.mean(x, self.weights) - self.output_offset) / self.output_scale


class ClusterPriorKernel(Kernel):
    r"""GPyTorch kernel ``sum_i w_i^2 k_Ci(x, x') / scale^2`` (Alg. 1 line 15, model units).

    Has no hyperparameters. Supports ``batch x q x d`` inputs (joint covariances over
    the ``q`` points) and ``diag=True``. With a ``"barycenter"`` prior it is defined on
    the index points only and raises ``ValueError`` elsewhere.

    Args:
        prior: The :class:`ClusterMetaPrior` (shared, frozen).
        weights: ``C`` cluster weights.
        output_scale: Scale of the model's outcome map.
    """

    has_lengthscale = False

    def __init__(self, prior: ClusterMetaPrior, weights: Tensor, output_scale: Tensor) -> None:
        super().__init__()
        self.prior = prior
        self.register_buffer("weights", weights, persistent=False)
        self.register_buffer("output_scale", output_scale, persistent=False)

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, **params: Any) -> Tensor:
        return self.prior.covariance(x1, x2, self.weights, diag=diag) / self.output_scale.pow(2)


class ClusterMetaPriorGP(SourceConditionedGP):
    r"""Exact GP on the target task with the cm-BO meta prior (Alg. 1 lines 15-16).

    Prior mean ``mu_0 = sum_i w_i mu_Ci`` and prior kernel ``k_0 = sum_i w_i^2 k_Ci``
    (Theorem 3.1) from the frozen :class:`ClusterMetaPrior`; the posterior is eqs. 1-2.
    The only free hyperparameter is the target noise (when ``train_Yvar`` is not
    given): ``fit_gpytorch_mll`` never touches the prior.

    The GP is trained on ``y - mu_0(X)`` with a zero mean and the prior mean is added
    back at prediction (identical posterior; the prior mean at the training points is
    then not recomputed for every test batch). After each BO query,
    :meth:`updated_weights` gives the next weights (Alg. 1 lines 19-21); rebuild the
    model with them.

    Args:
        train_X: ``batch_shape x n x d`` target inputs (``n`` may be 0).
        train_Y: ``batch_shape x n x 1`` target observations.
        train_Yvar: Optional known target noise variances; else the noise is learned.
        prior: The :class:`ClusterMetaPrior` (keyword; a copy on ``train_X``'s
            dtype/device is used; the original is not modified).
        weights: ``C`` non-negative cluster weights summing to 1 (not normalized for
            you); default ``1/C`` (Alg. 1 line 13).
        likelihood: Default: BoTorch's noise model, or the known ``train_Yvar``.
        input_transform: Optional input transform; it must be invertible (the prior
            is defined on raw inputs).
        outcome_transform: ``None`` or ``Standardize(m=1)``, fitted once on the target
            outcomes together with the prior mean on the index points (so that it works
            with 0 or 1 target points); the prior is mapped by the same affine map.

    Example:
        >>> prior = build_cluster_prior(meta_tasks, n_clusters=3)
        >>> weights = None
        >>> for t in range(T):
        ...     model = ClusterMetaPriorGP(X, Y, prior=prior, weights=weights)
        ...     fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        ...     x_next, _ = optimize_acqf(UpperConfidenceBound(model, beta=3.0), bounds, q=1, ...)
        ...     weights = model.updated_weights()  # Alg. 1 lines 19-21
        ...     X, Y = torch.cat([X, x_next]), torch.cat([Y, f(x_next)])
    """

    transfer_argument = "prior"
    # the prior is defined on raw inputs
    needs_invertible_input_transform = True

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        train_Yvar: Tensor | None = None,
        likelihood: Likelihood | None = None,
        outcome_transform: OutcomeTransform | None = None,
        input_transform: InputTransform | None = None,
        *,
        prior: ClusterMetaPrior,
        weights: Tensor | Sequence[float] | None = None,
    ) -> None:
        self._initial_weights = weights
        super().__init__(
            train_X,
            train_Y,
            train_Yvar,
            transfer=prior,
            likelihood=likelihood,
            input_transform=input_transform,
            outcome_transform=outcome_transform,
        )

    def _prepare_transfer(
        self, transfer: Any, train_X: Tensor
    ) -> tuple[ClusterMetaPrior, Tensor]:
        r"""A copy of the prior on ``train_X``'s dtype/device, and checked weights."""
        if not isinstance(transfer, ClusterMetaPrior):
            raise TypeError(
                f"`prior` must be a ClusterMetaPrior, got {type(transfer).__name__}."
            )
        if train_X.shape[-1] != transfer.dim:
            raise ValueError(
                f"`train_X` has d={train_X.shape[-1]} columns but `prior` was built on "
                f"d={transfer.dim}; the target must share the meta-tasks' input space."
            )
        prior = copy.deepcopy(transfer).to(device=train_X.device, dtype=train_X.dtype)
        return prior, prior.check_weights(self._initial_weights)

    def _outcome_reference(
        self, transfer: tuple[ClusterMetaPrior, Tensor]
    ) -> list[TaskData]:
        r"""The prior mean on the index points (so that ``Standardize`` works with 0
        or 1 target points)."""
        prior, weights = transfer
        with torch.no_grad():
            prior_mean_V = (weights @ prior.prototype_means).unsqueeze(-1)
        return [TaskData(prior.index_points, prior_mean_V)]

    def _build_modules(
        self,
        transfer: tuple[ClusterMetaPrior, Tensor],
        train_X: Tensor,
        covar_module: Module | None,
        mean_module: Mean | None,
        input_transform: InputTransform | None,
    ) -> None:
        prior, weights = transfer
        self.prior = prior
        # the weights shape the training targets (y - mu_0(X)): constructor data like
        # train_X, not state, so they are left out of state_dict
        self.register_buffer("weights", weights, persistent=False)
        self.prior_mean = ClusterPriorMean(
            prior, weights, self.output_scale, self.output_offset
        )
        self.covar_module = ClusterPriorKernel(prior, weights, self.output_scale)

    def _training_data(self, X: Tensor, Y: Tensor, Yvar: Tensor) -> TrainingData:
        r"""Targets ``Y - mu_0(X)`` (model units) and the known noise, if any."""
        with torch.no_grad():
            residuals = Y - self.prior_mean(X) if X.shape[-2] > 0 else Y
        return TrainingData(X, residuals, None if self.learns_target_noise else Yvar)

    def _combine_posterior(
        self, gp_posterior: MultivariateNormal, X: Tensor
    ) -> MultivariateNormal:
        r"""Add the prior mean back (the GP is trained on ``y - mu_0(X)``)."""
        return MultivariateNormal(
            gp_posterior.mean + self.prior_mean(X), gp_posterior.lazy_covariance_matrix
        )

    def _frozen_modules(self) -> list[Module]:
        return [self.prior]

    def forward(self, x: Tensor) -> MultivariateNormal:
        if self.training:
            x = self.transform_inputs(x)
        mean = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
        return MultivariateNormal(mean, self.covar_module(self._raw_inputs(x)))

    def updated_weights(self, distance: str | None = None) -> Tensor:
        r"""Next cluster weights from this model's posterior (Alg. 1 lines 19-21).

        The latent posterior on the prior's index points, ``N(m, S + jitter)``, is
        compared with every prototype (``W2`` or Jeffreys, default: the prior's
        distance); ``w_i = exp(1 - d_i/d_max) / sum_j exp(1 - d_j/d_max)``.

        Args:
            distance: ``"wasserstein"`` or ``"jeffreys"`` (default: ``prior.distance``).

        Returns:
            ``C`` weights summing to 1 (pass them to the next model).
        """
        return cluster_weights_from_distances(self.prototype_distances(distance))

    def prototype_distances(self, distance: str | None = None) -> Tensor:
        r"""Distances ``d_i`` from the posterior on the index points to each prototype
        (Alg. 1 line 19); see :meth:`updated_weights`."""
        if len(self.batch_shape) != 0:
            raise UnsupportedError("Weight updates need a non-batched ClusterMetaPriorGP.")
        with torch.no_grad():
            post = self.posterior(self.prior.index_points)
            mean = post.mean.squeeze(-1)
            cov = post.distribution.covariance_matrix
            cov = self.prior.add_jitter(0.5 * (cov + cov.transpose(-1, -2)))
            return self.prior.prototype_distances(mean, cov, distance)


# BoTorch dispatches pathwise (Matheron) sampling on ExactGP; here it would miss the
# prior mean (the GP is trained on residuals). Refuse clearly instead.
@DrawMatheronPaths.register(ClusterMetaPriorGP)
def _draw_matheron_paths_cluster(model: ClusterMetaPriorGP, **kwargs: Any) -> None:
    raise UnsupportedError(
        "Pathwise (Matheron) posterior samples are not implemented for ClusterMetaPriorGP "
        "(its prior is a frozen meta-task posterior). Use Monte-Carlo acquisition functions "
        "(qLogNoisyExpectedImprovement, qUpperConfidenceBound, qKnowledgeGradient, "
        "qMaxValueEntropy with a candidate set)."
    )


@DrawKernelFeaturePaths.register(ClusterMetaPriorGP)
def _draw_kernel_feature_paths_cluster(model: ClusterMetaPriorGP, **kwargs: Any) -> None:
    raise UnsupportedError("Kernel-feature prior paths are not implemented for ClusterMetaPriorGP.")
