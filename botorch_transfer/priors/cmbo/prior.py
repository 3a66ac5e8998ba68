r"""The cm-BO meta prior (Nguyen et al., Algorithm 1 Stage 2 and line 15): cluster
prototypes, cluster weights, GPyTorch mean/kernel modules, saving/loading.

A :class:`ClusterMetaPrior` holds the frozen Stage-1 meta-task posteriors
(:class:`~botorch_transfer.priors.meta_task_gps.MetaTaskPosteriors`), their clustering
and one prototype per cluster. For cluster weights ``w`` it gives the prior mean
``sum_i w_i mu_Ci`` and kernel (the moment-matched mixture covariance, or
``sum_i w_i^2 k_Ci``, Theorem 3.1, with ``prior_covariance="paper"``), as plain tensors
(:meth:`ClusterMetaPrior.mean` / :meth:`ClusterMetaPrior.covariance`) or as GPyTorch
modules (:class:`ClusterPriorMean` / :class:`ClusterPriorKernel`, in model units).
The weights are updated from the clusters' likelihoods of the target data
(:meth:`ClusterMetaPrior.cluster_log_likelihoods`) or, as in the paper, from distances
to the prototypes with
:func:`~botorch_transfer.priors.cluster_weights_from_distances` (Alg. 1 lines
19-21). Build a prior with
:func:`~botorch_transfer.priors.cmbo.build_cluster_prior`; use it with
:class:`~botorch_transfer.models.ClusterMetaPriorGP`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
from gpytorch.kernels import Kernel
from gpytorch.means import Mean
from torch import Tensor
from torch.nn import Module

from botorch_transfer.priors.cmbo.weights import check_weights
from botorch_transfer.priors.divergences import (
    check_distance,
    jeffreys_divergence,
    wasserstein_distance,
)
from botorch_transfer.priors.io import (
    PathLike,
    PriorFileError,
    check_keys,
    check_tensors,
    describe_path,
    load_prior,
    save_prior,
)
from botorch_transfer.priors.meta_task_gps import MetaTaskPosteriors

PROTOTYPES = ("center", "barycenter")
#: Forms of the prior covariance (see :class:`ClusterMetaPrior`).
PRIOR_COVARIANCES = ("mixture", "paper")
_TENSORS = (
    "index_points",
    "assignments",
    "prototype_means",
    "prototype_covs",
    "task_means",
    "task_covs",
)
#: Shapes of a saved prior's tensors: K meta-tasks of at most n points in d
#: dimensions, m index points, C clusters.
_SHAPES = {
    "posteriors.X": ("K", "n", "d"),
    "posteriors.Z_targets": ("K", "n"),
    "posteriors.mask": ("K", "n"),
    "posteriors.noise": ("K", "n"),
    "posteriors.lengthscale_32": ("K", "d"),
    "posteriors.lengthscale_12": ("K", "d"),
    "posteriors.outputscale": ("K",),
    "posteriors.constant": ("K",),
    "posteriors.y_offset": ("K",),
    "posteriors.y_scale": ("K",),
    "posteriors.bounds": (2, "d"),
    "index_points": ("m", "d"),
    "assignments": ("K",),
    "prototype_means": ("C", "m"),
    "prototype_covs": ("C", "m", "m"),
    "task_means": ("K", "m"),
    "task_covs": ("K", "m", "m"),
}
_KINDS = {"posteriors.mask": "bool", "assignments": "integer"}
_POSITIVE = (
    "posteriors.noise",
    "posteriors.lengthscale_32",
    "posteriors.lengthscale_12",
    "posteriors.outputscale",
    "posteriors.y_scale",
)
_CONFIG = ("distance", "prototype", "jitter", "task_names", "info")


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

    Built by :func:`~botorch_transfer.priors.cmbo.build_cluster_prior`; used by
    :class:`~botorch_transfer.models.ClusterMetaPriorGP`. For
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
        task_covs: ``K x m x m`` discretized meta-task posterior covariances (with
            jitter).
        distance: ``"wasserstein"`` or ``"jeffreys"`` (clustering and weight updates).
        prototype: ``"center"`` or ``"barycenter"``.
        jitter: Relative diagonal jitter of the discretized covariances.
        prior_covariance: ``"mixture"`` (default) or ``"paper"`` (see
            :meth:`covariance`).
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
        prior_covariance: str = "mixture",
        task_names: list[str | None] | None = None,
        info: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.posteriors = posteriors
        for name, value in (
            ("index_points", index_points),
            ("assignments", assignments),
            ("prototype_means", prototype_means),
            ("prototype_covs", prototype_covs),
            ("task_means", task_means),
            ("task_covs", task_covs),
        ):
            self.register_buffer(name, value, persistent=False)
        self.distance = check_distance(distance)
        if prototype not in PROTOTYPES:
            raise ValueError(
                f"`prototype` must be one of {PROTOTYPES}, got {prototype!r}."
            )
        self.prototype = prototype
        self.jitter = float(jitter)
        if prior_covariance not in PRIOR_COVARIANCES:
            raise ValueError(
                f"`prior_covariance` must be one of {PRIOR_COVARIANCES}, got "
                f"{prior_covariance!r}."
            )
        self.prior_covariance = prior_covariance
        self.task_names = (
            list(task_names)
            if task_names is not None
            else [None] * posteriors.num_tasks
        )
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
            ClusterPrototype(
                self.prototype_means[c],
                self.prototype_covs[c],
                (self.assignments == c).nonzero().flatten().tolist(),
            )
            for c in range(self.n_clusters)
        ]

    def check_weights(self, weights: Tensor | Sequence[float] | None) -> Tensor:
        r"""See :func:`~botorch_transfer.priors.cmbo.weights.check_weights`."""
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
                "prototype='barycenter' defines the prior only on the prior's "
                f"{V.shape[0]} index points, but {missing} input point(s) are not "
                "index points. Use the model on `prior.index_points` only (e.g. "
                "optimize_acqf_discrete(acqf, q, choices=prior.index_points) and "
                "target data observed there), or build the prior with "
                "prototype='center', which is defined on the whole domain."
            )
        return hit.to(torch.uint8).argmax(-1)

    def _task_coefficients(self, weights: Tensor, power: int) -> Tensor:
        r"""Per-task coefficients ``w_c(j)^power / |C_c(j)|`` (center prototype)."""
        sizes = self.cluster_sizes.to(weights)
        return (weights.pow(power) / sizes)[self.assignments]

    # ------------------------------------------------------------------ evaluation
    def mean(self, X: Tensor, weights: Tensor) -> Tensor:
        r"""Prior mean ``sum_i w_i mu_Ci(X)`` at ``... x n x d`` raw ``X``:
        ``... x n``."""
        if self.prototype == "barycenter":
            return (weights @ self.prototype_means)[self.index_of(X)]
        flat = X.reshape(-1, X.shape[-1])
        means = self.posteriors.means(flat)  # K x N
        return (self._task_coefficients(weights, 1) @ means).reshape(X.shape[:-1])

    def covariance(
        self, X1: Tensor, X2: Tensor, weights: Tensor, diag: bool = False
    ) -> Tensor:
        r"""Prior kernel for cluster weights ``w``.

        - ``prior_covariance="paper"``: ``sum_i w_i^2 k_Ci(X1, X2)`` (Theorem 3.1).
        - ``prior_covariance="mixture"``: the covariance of the mixture of the
          meta-task posteriors with weights ``zeta_j = w_c(j) / |C_c(j)|`` (the
          paper's ``zeta``), moment-matched:
          ``sum_j zeta_j (k_j(X1, X2) + r_j(X1) r_j(X2)^T)``, ``r_j = mu_j - mu_0``.
          The paper's form has ``1/C`` of a cluster's variance at uniform weights
          and only the members' posterior variances (near 0 where they were
          observed), so it misses how much tasks differ from each other and its
          intervals are far too narrow for a held-out task.

        Args:
            X1: ``batch1 x n1 x d`` raw inputs.
            X2: ``batch2 x n2 x d`` raw inputs (broadcastable batch).
            weights: ``C`` cluster weights.
            diag: Return only the diagonal (``X1`` and ``X2`` must be the same points).

        Returns:
            ``batch x n1 x n2`` (or ``batch x n1`` with ``diag``).
        """
        mixture = self.prior_covariance == "mixture"
        if self.prototype == "barycenter":
            power = 1 if mixture else 2
            cov_V = torch.einsum("c,cij->ij", weights.pow(power), self.prototype_covs)
            if mixture:
                zeta = self._task_coefficients(weights, 1)
                R = self.task_means - zeta @ self.task_means  # K x m
                cov_V = cov_V + (R.T * zeta) @ R
            i1 = self.index_of(X1)
            if diag:
                return torch.diagonal(cov_V)[i1]
            return cov_V[i1.unsqueeze(-1), self.index_of(X2).unsqueeze(-2)]
        zeta = self._task_coefficients(weights, 1)
        coef = self._task_coefficients(weights, 1 if mixture else 2)
        coef = coef * self.posteriors.y_scale.pow(2)  # K
        post = self.posteriors

        def means_and_features(x: Tensor) -> tuple[Tensor | None, Tensor]:
            # K x N means (for the mixture's spread) and K x n x N features at flat
            # x from one cross-kernel evaluation (under a gradient nothing is memoized)
            flat = x.reshape(-1, x.shape[-1])
            if mixture:
                return post.means_and_features(flat)
            return None, post.features(flat)

        def spread(means: Tensor) -> Tensor:  # r_j(x) = mu_j(x) - mu_0(x): K x N
            return means - zeta @ means

        if diag:
            means, v = means_and_features(X1)  # K x N, K x n x N
            var = coef @ (post.outputscale.unsqueeze(-1) - v.pow(2).sum(-2))
            if mixture:
                var = var + zeta @ spread(means).pow(2)
            return var.reshape(X1.shape[:-1])
        out_shape = torch.broadcast_shapes(X1.shape[:-2], X2.shape[:-2]) + (
            X1.shape[-2],
            X2.shape[-2],
        )
        X1, X2 = _collapse_batch(X1), _collapse_batch(X2)
        K, n = post.chol.shape[:2]

        def scaled_features(v: Tensor, x: Tensor, scale: Tensor) -> Tensor:
            # K x n x (B q) features of x (batch x q x d) -> batch x (K n) x q
            batch, q = x.shape[:-2], x.shape[-2]
            v = (v * scale.reshape(K, 1, 1)).reshape(K, n, -1, q).permute(2, 0, 1, 3)
            return v.reshape(*batch, K * n, q)

        # sum_j c_j (k_j(x1, x2) - v_j(x1)^T v_j(x2)): the feature products of all tasks
        # in one matmul over the stacked (task, point) dimension
        means2, v2 = means_and_features(X2)
        f2 = scaled_features(v2, X2, torch.ones_like(coef))
        if X1.shape == X2.shape and torch.equal(X1, X2):  # test-test block: once
            means1, f1 = means2, f2 * coef.repeat_interleave(n).unsqueeze(-1)
        else:
            means1, v1 = means_and_features(X1)
            f1 = scaled_features(v1, X1, coef)
        prior = torch.einsum("k,k...->...", coef, post.prior_kernel(X1, X2))
        cov = prior - f1.transpose(-1, -2) @ f2
        if mixture:  # + sum_j zeta_j r_j(x1) r_j(x2)^T, batched over x1's/x2's batch
            # ... x n1 x K and ... x K x n2
            r1 = spread(means1).reshape(K, *X1.shape[:-1]).movedim(0, -1)
            r2 = spread(means2).reshape(K, *X2.shape[:-1]).movedim(0, -2)
            cov = cov + (r1 * zeta) @ r2
        return cov.expand(out_shape)

    def prototype_means_at(self, X: Tensor) -> Tensor:
        r"""Each prototype's mean ``mu_Ci`` at ``... x n x d`` raw ``X``:
        ``C x ... x n``."""
        eye = torch.eye(
            self.n_clusters,
            dtype=self.index_points.dtype,
            device=self.index_points.device,
        )
        return torch.stack([self.mean(X, eye[c]) for c in range(self.n_clusters)])

    def prototype_distances(
        self, mean: Tensor, cov: Tensor, distance: str | None = None
    ) -> Tensor:
        r"""Distances from ``N(mean, cov)`` on the index points to every prototype.

        Alg. 1 line 19.

        Args:
            mean: ``m`` mean on the index points.
            cov: ``m x m`` covariance on the index points (add jitter as for the
                prototypes;
                :meth:`~botorch_transfer.models.ClusterMetaPriorGP.updated_weights`
                does).
            distance: ``"wasserstein"`` or ``"jeffreys"`` (default: the prior's).

        Returns:
            ``C`` distances (``W2`` or the Jeffreys divergence), computed in float64 and
            returned in ``mean``'s dtype.
        """
        distance = check_distance(distance if distance is not None else self.distance)
        fn = wasserstein_distance if distance == "wasserstein" else jeffreys_divergence
        # in float64: the discretized covariances are ill-conditioned (that is why they
        # carry a jitter), too much so for float32 Cholesky factors / eigenvalues
        f64 = {"dtype": torch.float64}
        d = fn(
            mean.to(**f64),
            cov.to(**f64),
            self.prototype_means.to(**f64),
            self.prototype_covs.to(**f64),
        )
        return d.to(mean.dtype)

    def cluster_log_likelihoods(
        self, X: Tensor, Y: Tensor, noise: Tensor, spread: bool = True
    ) -> Tensor:
        r"""Log marginal likelihood of target data under each cluster's prototype.

        ``log N(Y; mu_Ci(X), k_Ci(X, X) + B_Ci(X) + diag(noise))``, where ``B_Ci`` is
        the covariance of the cluster members' posterior means at ``X`` (with
        ``spread``; the ``"mixture"`` prior covariance holds it already): the
        prototype moment-matched to the mixture of its members, so
        that a target that differs from the members as much as they differ from each
        other is not ruled out by the members' small posterior variances.

        Args:
            X: ``n x d`` raw target inputs.
            Y: ``n`` target observations.
            noise: ``n`` noise variances (user units).
            spread: Add the members' between-task covariance ``B_Ci``.

        Returns:
            ``C`` log likelihoods (float64).
        """
        f64 = {"dtype": torch.float64, "device": X.device}
        C, n = self.n_clusters, X.shape[-2]
        if n == 0:
            return torch.zeros(C, **f64)
        eye = torch.eye(C, dtype=X.dtype, device=X.device)
        if self.prototype == "barycenter":
            idx = self.index_of(X)
            member_means = self.task_means[:, idx]  # K x n
        else:
            member_means = self.posteriors.means(X)
        out = []
        for c in range(C):
            mean = self.mean(X, eye[c]).to(**f64)
            cov = self.covariance(X, X, eye[c]).to(**f64)
            # the mixture covariance with w = e_c already holds the spread
            if spread and self.prior_covariance == "paper":
                M = member_means[self.assignments == c].to(**f64)
                R = M - M.mean(0)
                cov = cov + R.T @ R / M.shape[0]
            cov = 0.5 * (cov + cov.T) + torch.diag(noise.to(**f64))
            cov = self.add_jitter(cov)
            dist = torch.distributions.MultivariateNormal(mean, cov)
            out.append(dist.log_prob(Y.to(**f64)))
        return torch.stack(out)

    def add_jitter(self, cov: Tensor) -> Tensor:
        r"""``cov + jitter * mean(diag(cov)) * I`` (the discretization jitter)."""
        diag = torch.diagonal(cov, dim1=-2, dim2=-1)
        level = self.jitter * diag.mean(-1, keepdim=True).clamp_min(
            torch.finfo(cov.dtype).tiny
        )
        return cov + torch.diag_embed(level.expand_as(diag))

    # ------------------------------------------------------------------ save / load
    def save(self, path: PathLike) -> None:
        r"""Save to ``path`` in the shared prior format.

        See :mod:`botorch_transfer.priors.io`.

        The payload holds the config and the tensors (Stage-1 data and
        hyperparameters, clustering, prototypes); the Stage-1 factorizations are
        recomputed on loading.

        Args:
            path: File path or writable binary file object.

        Example:
            >>> prior.save("prior.pt")
            >>> same = ClusterMetaPrior.load("prior.pt")
        """
        state = {f"posteriors.{k}": v for k, v in self.posteriors.state().items()}
        state.update({name: getattr(self, name) for name in _TENSORS})
        config = {
            "distance": self.distance,
            "prototype": self.prototype,
            "jitter": self.jitter,
            "prior_covariance": self.prior_covariance,
            "n_clusters": self.n_clusters,
            "task_names": self.task_names,
            "info": self.info,
        }
        save_prior(self, {"config": config, "state": state}, path)

    @classmethod
    def load(
        cls, path: PathLike, map_location: str | torch.device | None = None
    ) -> ClusterMetaPrior:
        r"""Load a prior written by :meth:`save`.

        Args:
            path: File path or readable binary file object.
            map_location: Passed to ``torch.load`` (e.g. ``"cpu"``).

        Returns:
            The prior; its posteriors are identical to the saved one's.

        Raises:
            ~botorch_transfer.priors.io.PriorFileError: If the file is not a readable
                saved ``ClusterMetaPrior`` (see
                :func:`~botorch_transfer.priors.io.load_prior`: header, checksum,
                finite tensors of one dtype), its tensors do not fit together
                (shapes, kinds, positive scales, cluster indices) or its config is
                invalid.
        """
        name = cls.__name__
        where = describe_path(path)
        payload = load_prior(path, name, ("config", "state"), map_location)
        state, config = payload["state"], payload["config"]
        fields = [f"posteriors.{k}" for k in MetaTaskPosteriors.FIELDS]
        check_keys(state, fields + list(_TENSORS), path, name, "state")
        check_keys(config, _CONFIG, path, name, "config")
        sizes = check_tensors(state, _SHAPES, path, name, _KINDS, _POSITIVE)
        assignments, C = state["assignments"], sizes["C"]
        if not ((assignments >= 0) & (assignments < C)).all():
            raise PriorFileError(
                f"{where}: state tensor 'assignments' must hold cluster indices in "
                f"[0, {C}) (one per prototype), got {assignments.tolist()}."
            )
        bounds = state["posteriors.bounds"]
        if not (bounds[1] > bounds[0]).all():
            raise PriorFileError(
                f"{where}: state tensor 'posteriors.bounds' must have lower < upper."
            )
        try:
            posteriors = MetaTaskPosteriors(
                **{k: state[f"posteriors.{k}"] for k in MetaTaskPosteriors.FIELDS}
            )
            return cls(
                posteriors,
                *(state[k] for k in _TENSORS),
                distance=config["distance"],
                prototype=config["prototype"],
                jitter=config["jitter"],
                # files written before the option hold the paper's form
                prior_covariance=config.get("prior_covariance", "paper"),
                task_names=config["task_names"],
                info=config["info"],
            )
        except (TypeError, ValueError, RuntimeError) as e:  # incl. a failed Cholesky
            raise PriorFileError(
                f"{where}: could not rebuild the saved {name} from its config and "
                f"tensors: {e}"
            ) from e


# --------------------------------------------------------------------------- modules
class ClusterPriorMean(Mean):
    r"""GPyTorch mean ``(sum_i w_i mu_Ci(x) - offset) / scale`` (model units).

    Alg. 1 line 15.

    Args:
        prior: The :class:`ClusterMetaPrior` (shared, frozen).
        weights: ``C`` cluster weights.
        output_scale: Scale of the model's outcome map (``y = scale * z + offset``).
        output_offset: Offset of the outcome map.
    """

    def __init__(
        self,
        prior: ClusterMetaPrior,
        weights: Tensor,
        output_scale: Tensor,
        output_offset: Tensor,
    ) -> None:
        super().__init__()
        self.prior = prior
        # constructor data (like training data), not state: left out of state_dict
        self.register_buffer("weights", weights, persistent=False)
        self.register_buffer("output_scale", output_scale, persistent=False)
        self.register_buffer("output_offset", output_offset, persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        return (
            self.prior.mean(x, self.weights) - self.output_offset
        ) / self.output_scale


class ClusterPriorKernel(Kernel):
    r"""GPyTorch kernel ``sum_i w_i^2 k_Ci(x, x') / scale^2`` (model units).

    Alg. 1 line 15.

    Has no hyperparameters. Supports ``batch x q x d`` inputs (joint covariances over
    the ``q`` points) and ``diag=True``. With a ``"barycenter"`` prior it is defined on
    the index points only and raises ``ValueError`` elsewhere.

    Args:
        prior: The :class:`ClusterMetaPrior` (shared, frozen).
        weights: ``C`` cluster weights.
        output_scale: Scale of the model's outcome map.
    """

    has_lengthscale = False

    def __init__(
        self, prior: ClusterMetaPrior, weights: Tensor, output_scale: Tensor
    ) -> None:
        super().__init__()
        self.prior = prior
        self.register_buffer("weights", weights, persistent=False)
        self.register_buffer("output_scale", output_scale, persistent=False)

    def forward(
        self, x1: Tensor, x2: Tensor, diag: bool = False, **params: Any
    ) -> Tensor:
        return self.prior.covariance(
            x1, x2, self.weights, diag=diag
        ) / self.output_scale.pow(2)
