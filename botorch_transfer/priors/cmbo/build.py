r"""``build_cluster_prior``: the cm-BO meta prior from meta-tasks (Nguyen et al.,
Algorithm 1 Stages 1-2).

Stage 1 fits one GP per meta-task (:mod:`botorch_transfer.priors.meta_task_gps`) and
discretizes every posterior on shared index points ``V``; the Gaussians are
clustered by k-means (:mod:`botorch_transfer.priors.kmeans`); Stage 2 builds one
prototype per cluster (center or Wasserstein barycenter). The result is a
:class:`~botorch_transfer.priors.ClusterMetaPrior`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from botorch_transfer.data import TaskData, validate_task_set
from botorch_transfer.priors.cmbo.barycenter import wasserstein_barycenter
from botorch_transfer.priors.cmbo.prior import PROTOTYPES, ClusterMetaPrior
from botorch_transfer.priors.divergences import check_distance
from botorch_transfer.priors.kmeans import (
    CLUSTER_COUNT_CRITERIA,
    gaussian_kmeans,
    select_n_clusters,
)
from botorch_transfer.priors.meta_task_gps import (
    MetaTaskPosteriors,
    meta_task_posteriors,
)
from botorch_transfer.validation import check_bounds


def build_cluster_prior(
    tasks: Sequence[TaskData],
    index_points: Tensor | None = None,
    n_clusters: int | None = None,
    distance: str = "wasserstein",
    prototype: str = "center",
    bounds: Tensor | None = None,
    n_index_points: int = 100,
    n_clusters_range: tuple[int, int] = (1, 6),
    n_clusters_criterion: str = "silhouette",
    jitter: float = 1e-6,
    prior_covariance: str = "mixture",
    seed: int = 0,
    n_init: int = 10,
    max_iter: int = 100,
    barycenter_tol: float = 1e-10,
    barycenter_max_iter: int = 500,
    posteriors: MetaTaskPosteriors | None = None,
    progress: bool = True,
) -> ClusterMetaPrior:
    r"""Build the cm-BO meta prior from meta-tasks (Algorithm 1, Stages 1-2).

    1. Fits a GP per meta-task (outputscale x Matern-3/2 x Matern-1/2, ARD, on inputs
       normalized by ``bounds``, standardized outcomes; Sec. 4.1) and discretizes each
       posterior on the index points as ``N(m_j, S_j + jitter)``.
    2. Clusters them by k-means with ``distance`` (eq. 7 centers); with
       ``n_clusters=None`` the count in ``n_clusters_range`` is chosen by
       ``n_clusters_criterion`` (see :func:`select_n_clusters`).
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
        n_clusters_criterion: ``"silhouette"`` (default: the best mean silhouette
            of the 2-Wasserstein distance matrix, or one cluster when no split has a
            silhouette of at least 0.5) or ``"paper"`` (the paper's inter/intra
            ratio, eqs. 10-11, undefined for one cluster and prone to choose the
            largest ``C``: it chose 6 of 2..6 for 7 and 13 meta-tasks with four
            singleton clusters).
        jitter: Relative diagonal jitter: every discretized covariance gets
            ``jitter * mean(diag(S))`` added, since GP posterior covariances on many
            points are numerically singular (the Jeffreys divergence inverts them).
        prior_covariance: ``"mixture"`` (default: the moment-matched covariance of
            the mixture of meta-task posteriors, calibrated) or ``"paper"``
            (``sum_i w_i^2 k_Ci``, Theorem 3.1, far too confident); see
            :meth:`ClusterMetaPrior.covariance`.
        seed: Seed of the index points and of k-means.
        n_init: k-means restarts.
        max_iter: k-means iteration cap.
        barycenter_tol: Convergence tolerance of the barycenter iteration.
        barycenter_max_iter: Iteration cap of the barycenter iteration.
        posteriors: Stage-1 posteriors of these tasks to reuse (e.g.
            ``other_prior.posteriors``),
            to try other clusterings, distances or prototypes without refitting the
            meta-task GPs. Their ``bounds`` replace ``bounds``.
        progress: Show a progress bar over Stage 1's GP fits (one per meta-task)
            when they take more than a few seconds (see
            :mod:`botorch_transfer.progress`).

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
    opts = {"dtype": tasks[0].X.dtype, "device": tasks[0].X.device}
    for j, t in enumerate(tasks):
        if t.n < 1:
            raise ValueError(
                f"`tasks[{j}]` has no observations; every meta-task needs at least one."
            )
    if n_clusters is not None and (
        isinstance(n_clusters, bool)
        or not isinstance(n_clusters, int)
        or not 1 <= n_clusters <= K
    ):
        raise ValueError(
            "`n_clusters` must be None or an integer between 1 and the number of "
            f"tasks "
            f"({K}), got {n_clusters!r}."
        )
    if n_clusters_criterion not in CLUSTER_COUNT_CRITERIA:
        raise ValueError(
            f"`n_clusters_criterion` must be one of {CLUSTER_COUNT_CRITERIA}, got "
            f"{n_clusters_criterion!r}."
        )
    if not jitter >= 0:
        raise ValueError(f"`jitter` must be non-negative, got {jitter}.")
    if posteriors is not None:
        if (
            not isinstance(posteriors, MetaTaskPosteriors)
            or posteriors.num_tasks != K
            or posteriors.X.shape[-1] != d
        ):
            raise ValueError(
                "`posteriors` must be the MetaTaskPosteriors of these "
                f"{K} tasks (d={d})."
            )
        posteriors = posteriors.to(**opts)
        bounds = posteriors.bounds
    if bounds is None:
        bounds = torch.stack([torch.zeros(d, **opts), torch.ones(d, **opts)])
    bounds = check_bounds(bounds, d, tasks[0].X)
    if index_points is None:
        if (
            isinstance(n_index_points, bool)
            or not isinstance(n_index_points, int)
            or n_index_points < 1
        ):
            raise ValueError(
                "`n_index_points` must be a positive integer (the number of shared "
                f"index points V), got {n_index_points!r}."
            )
        sobol = (
            torch.quasirandom.SobolEngine(d, scramble=True, seed=seed)
            .draw(n_index_points, dtype=torch.float64)
            .to(**opts)
        )
        index_points = bounds[0] + (bounds[1] - bounds[0]) * sobol
    if (
        not isinstance(index_points, Tensor)
        or index_points.dim() != 2
        or index_points.shape[-1] != d
        or index_points.shape[0] < 1
    ):
        shape = (
            tuple(index_points.shape)
            if isinstance(index_points, Tensor)
            else type(index_points).__name__
        )
        raise ValueError(
            f"`index_points` must be an m x d tensor with d={d} (the tasks' "
            f"dimension), got {shape}."
        )
    index_points = index_points.to(**opts)
    if not torch.isfinite(index_points).all():
        raise ValueError("`index_points` contains NaN or infinite values.")

    # Stage 1: meta-task posteriors, discretized on V
    if posteriors is None:
        posteriors = meta_task_posteriors(tasks, bounds, progress=progress)
    with torch.no_grad():
        task_means = posteriors.means(index_points)
        task_covs = posteriors.covariances(index_points, index_points)
        task_covs = 0.5 * (task_covs + task_covs.transpose(-1, -2))
        diag = torch.diagonal(task_covs, dim1=-2, dim2=-1)
        task_covs = task_covs + torch.diag_embed(
            jitter * diag.mean(-1, keepdim=True).expand_as(diag)
        )

    # clustering (Alg. 1 line 9)
    info: dict[str, Any] = {}
    kmeans_options = {"n_init": n_init, "max_iter": max_iter, "seed": seed}
    if n_clusters is None:
        lo, hi = n_clusters_range
        selection = select_n_clusters(
            task_means,
            task_covs,
            candidates=range(lo, min(hi, K) + 1) if lo <= K else [K],
            distance=distance,
            criterion=n_clusters_criterion,
            **kmeans_options,
        )
        result = selection.results[selection.candidates.index(selection.n_clusters)]
        info["selection"] = {
            "criterion": selection.criterion,
            "candidates": selection.candidates,
            "scores": selection.scores,
            "intra": selection.intra,
            "inter": selection.inter,
        }
    else:
        result = gaussian_kmeans(
            task_means, task_covs, n_clusters, distance=distance, **kmeans_options
        )
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
                task_means[members],
                task_covs[members],
                tol=barycenter_tol,
                max_iter=barycenter_max_iter,
            )
            proto_means.append(bary.mean)
            proto_covs.append(bary.covariance)
            info.setdefault("barycenter_iterations", []).append(bary.n_iter)
    return ClusterMetaPrior(
        posteriors,
        index_points,
        assignments,
        torch.stack(proto_means),
        torch.stack(proto_covs),
        task_means,
        task_covs,
        distance=distance,
        prototype=prototype,
        jitter=jitter,
        prior_covariance=prior_covariance,
        task_names=[t.name for t in tasks],
        info=info,
    )
