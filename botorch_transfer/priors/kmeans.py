r"""k-means over Gaussians and the cluster-quality criteria of the cm-BO paper.

Each meta-task is a Gaussian ``N(m_j, S_j)`` (its GP posterior discretized on shared
index points). :func:`gaussian_kmeans` clusters them with the 2-Wasserstein distance or
the Jeffreys divergence; cluster centers are updated by eq. 7 (the mean of the
members' means and the mean of their covariances). :func:`intra_cluster_entropy`
(eq. 10), :func:`inter_cluster_separation` (eq. 11), :func:`silhouette_score` and
:func:`select_n_clusters` help choosing the number of clusters ``C``.

The k-means *cost* of a point is ``W2^2`` for the Wasserstein distance and the
Jeffreys divergence itself for Jeffreys (already a squared-distance-like quantity:
for equal covariances it is a squared Mahalanobis distance). It is used for the
k-means++ seeding probabilities and the inertia; assignments go to the nearest
center either way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import torch
from torch import Tensor

from botorch_transfer.priors.divergences import check_distance, pairwise_divergence


class GaussianKMeansResult(NamedTuple):
    r"""Result of :func:`gaussian_kmeans`.

    Attributes:
        assignments: ``k`` cluster index of each Gaussian (in input order), clusters
            numbered ``0..C-1`` in order of their first member.
        center_means: ``C x n`` center means (eq. 7).
        center_covs: ``C x n x n`` center covariances (eq. 7).
        inertia: Sum of the k-means costs of the members to their centers.
        n_iter: Iterations of the best restart.
        converged: Whether the best restart stopped because assignments stopped
            changing (rather than at ``max_iter``).
    """

    assignments: Tensor
    center_means: Tensor
    center_covs: Tensor
    inertia: float
    n_iter: int
    converged: bool


def _check_set(means: Tensor, covs: Tensor) -> None:
    if (
        means.dim() != 2
        or covs.dim() != 3
        or covs.shape != means.shape[:1] + means.shape[-1:] * 2
    ):
        raise ValueError(
            f"`means` must be k x n and `covs` k x n x n, got {tuple(means.shape)} and "
            f"{tuple(covs.shape)}."
        )


def _cost(D: Tensor, distance: str) -> Tensor:
    return D.pow(2) if distance == "wasserstein" else D


def _centers(means: Tensor, covs: Tensor, members: Tensor) -> tuple[Tensor, Tensor]:
    r"""Eq. 7: ``m_C = mean of m_j``, ``S_C = mean of S_j`` over the members ``j`` of
    each cluster of a ``k x C`` 0/1 membership matrix."""
    counts = members.sum(0)
    mean_c = (members.T @ means) / counts.unsqueeze(-1)
    cov_c = torch.einsum("kc,kij->cij", members, covs) / counts.reshape(-1, 1, 1)
    return mean_c, cov_c


def _relabel(labels: Tensor, C: int) -> Tensor:
    r"""Number clusters by their first member so that results are comparable."""
    order = []
    for lab in labels.tolist():
        if lab not in order:
            order.append(lab)
    order += [c for c in range(C) if c not in order]
    mapping = torch.empty(C, dtype=torch.long, device=labels.device)
    mapping[torch.tensor(order, device=labels.device)] = torch.arange(
        C, device=labels.device
    )
    return mapping[labels]


class _CenterDivergences:
    r"""Divergences of every Gaussian to cluster centers, kept per cluster membership.

    A center (eq. 7, or a seed: one Gaussian) depends on its members alone, and
    k-means restarts, its iterations near convergence and the candidate counts of
    :func:`select_n_clusters` meet the same clusters again and again, so each
    membership's column of divergences is computed once. A pair's 2-Wasserstein
    distance does not depend on which other pairs share its batch, so the clustering
    is the one that computing every column anew gives (the Jeffreys divergence's
    batched matrix products may round differently in the last bit).
    """

    def __init__(self, means: Tensor, covs: Tensor, distance: str) -> None:
        self.means, self.covs, self.distance = means, covs, distance
        self._columns: dict[tuple[int, ...], Tensor] = {}

    def __call__(self, members: list[tuple[int, ...]]) -> Tensor:
        r"""``k x C`` divergences to the centers of ``C`` clusters, each given by its
        members' sorted indices."""
        missing = [m for m in dict.fromkeys(members) if m not in self._columns]
        if missing:
            onehot = self.means.new_zeros(self.means.shape[0], len(missing))
            for c, m in enumerate(missing):
                onehot[list(m), c] = 1
            center_means, center_covs = _centers(self.means, self.covs, onehot)
            D = pairwise_divergence(
                self.means, self.covs, center_means, center_covs, self.distance
            )
            self._columns.update(zip(missing, D.unbind(-1)))
        return torch.stack([self._columns[m] for m in members], dim=-1)


def _memberships(labels: Tensor, C: int) -> list[tuple[int, ...]]:
    r"""The sorted member indices of each of the ``C`` clusters."""
    return [tuple((labels == c).nonzero().flatten().tolist()) for c in range(C)]


def _seed_plus_plus(
    divergences: _CenterDivergences, C: int, generator: torch.Generator
) -> list[int]:
    r"""k-means++ seeding: the first center uniformly, each next one with probability
    proportional to its cost to the nearest chosen center."""
    k, distance = divergences.means.shape[0], divergences.distance
    first = torch.randint(k, (1,), generator=generator).item()
    chosen = [first]
    nearest = _cost(divergences([(first,)]), distance)[:, 0]
    for _ in range(1, C):
        probs = nearest.clamp_min(0).cpu()
        probs[chosen] = 0
        if probs.sum() <= 0:  # all remaining points coincide with chosen centers
            probs = torch.ones(k, dtype=probs.dtype)
            probs[chosen] = 0
        nxt = torch.multinomial(probs, 1, generator=generator).item()
        chosen.append(nxt)
        cost = _cost(divergences([(nxt,)]), distance)[:, 0]
        nearest = torch.minimum(nearest, cost)
    return chosen


def gaussian_kmeans(
    means: Tensor,
    covs: Tensor,
    n_clusters: int,
    distance: str = "wasserstein",
    n_init: int = 10,
    max_iter: int = 100,
    seed: int = 0,
) -> GaussianKMeansResult:
    r"""k-means over Gaussians ``N(means[j], covs[j])`` (cm-BO Algorithm 1, line 9).

    Lloyd iterations: assign each Gaussian to its nearest center (by ``distance``),
    then recompute the centers by eq. 7. Seeding is k-means++ style; ``n_init``
    restarts are run and the one with the smallest inertia is kept. A cluster that
    becomes empty is re-seeded with the Gaussian farthest from its center. With the
    same ``seed`` the result is deterministic.

    Args:
        means: ``k x n`` means.
        covs: ``k x n x n`` covariances (positive definite for Jeffreys).
        n_clusters: Number of clusters ``C`` (``1 <= C <= k``).
        distance: ``"wasserstein"`` (2-Wasserstein, eq. 6) or ``"jeffreys"`` (eq. 4).
        n_init: Number of restarts.
        max_iter: Iteration cap per restart.
        seed: Seed of the restarts' random seeding.

    Returns:
        A :class:`GaussianKMeansResult`.

    Example:
        >>> result = gaussian_kmeans(means, covs, n_clusters=3, distance="wasserstein")
        >>> assignments = result.assignments  # cluster index of each Gaussian
    """
    _check_set(means, covs)
    divergences = _CenterDivergences(means, covs, check_distance(distance))
    return _kmeans_with(divergences, n_clusters, n_init, max_iter, seed)


def _kmeans_with(
    divergences: _CenterDivergences,
    n_clusters: int,
    n_init: int = 10,
    max_iter: int = 100,
    seed: int = 0,
) -> GaussianKMeansResult:
    r""":func:`gaussian_kmeans` with the divergences to every cluster seen so far
    (:func:`select_n_clusters` shares them between its candidates)."""
    k = divergences.means.shape[0]
    if k == 0:
        raise ValueError("`means` must contain at least one Gaussian, got none.")
    if not isinstance(n_clusters, int) or not 1 <= n_clusters <= k:
        raise ValueError(
            "`n_clusters` must be an integer between 1 and the number of Gaussians "
            f"({k}), got {n_clusters!r}."
        )
    if n_init < 1 or max_iter < 1:
        raise ValueError(
            f"`n_init` and `max_iter` must be at least 1, got {n_init}, {max_iter}."
        )
    means, covs, distance = divergences.means, divergences.covs, divergences.distance
    generator = torch.Generator().manual_seed(seed)
    best = None
    for _ in range(n_init):
        members = [(j,) for j in _seed_plus_plus(divergences, n_clusters, generator)]
        labels, converged, it = None, False, 0
        for it in range(1, max_iter + 1):
            D = divergences(members)
            new_labels = D.argmin(-1)
            counts = torch.bincount(new_labels, minlength=n_clusters)
            for c in (
                (counts == 0).nonzero().flatten().tolist()
            ):  # re-seed empty clusters
                far = D.gather(-1, new_labels.unsqueeze(-1)).squeeze(-1)
                far[counts[new_labels] <= 1] = -1  # never empty another cluster
                j = far.argmax().item()
                counts[new_labels[j]] -= 1
                new_labels[j] = c
                counts[c] = 1
            if labels is not None and torch.equal(new_labels, labels):
                converged = True
                break
            labels = new_labels
            members = _memberships(labels, n_clusters)
        D = divergences(members)
        inertia = _cost(D.gather(-1, labels.unsqueeze(-1)), distance).sum().item()
        if best is None or inertia < best[0] - 1e-12 * abs(best[0]):
            best = (inertia, labels, it, converged)
    inertia, labels, it, converged = best
    onehot = torch.nn.functional.one_hot(labels, n_clusters).to(means)
    center_means, center_covs = _centers(means, covs, onehot)
    relabeled = _relabel(labels, n_clusters)
    perm = torch.empty(n_clusters, dtype=torch.long, device=labels.device)
    perm[relabeled] = labels  # new index -> old index
    return GaussianKMeansResult(
        assignments=relabeled,
        center_means=center_means[perm],
        center_covs=center_covs[perm],
        inertia=inertia,
        n_iter=it,
        converged=converged,
    )


def _check_labels(D: Tensor, assignments: Tensor) -> None:
    if D.dim() != 2 or D.shape[0] != D.shape[1] or assignments.shape != D.shape[:1]:
        raise ValueError(
            "`D` must be a k x k distance matrix and `assignments` have k entries, got "
            f"{tuple(D.shape)} and {tuple(assignments.shape)}."
        )


def intra_cluster_entropy(D: Tensor, assignments: Tensor) -> float:
    r"""Intra-cluster entropy (eq. 10): the mean over clusters of the members' mean
    pairwise distance, ``1/C sum_i 2 sum_{j<k in C_i} D_jk / (|C_i| (|C_i| - 1))``.

    A singleton cluster has no pairs (its term is 0/0) and is left out of the mean;
    ``nan`` when every cluster is a singleton. Smaller is better.

    Args:
        D: ``k x k`` symmetric pairwise distance matrix (e.g. from
            :func:`pairwise_divergence`).
        assignments: ``k`` cluster indices.

    Returns:
        The criterion.
    """
    _check_labels(D, assignments)
    terms = []
    for c in assignments.unique().tolist():
        idx = (assignments == c).nonzero().flatten()
        size = idx.numel()
        if size > 1:  # sum over ordered pairs = 2 x sum over unordered pairs
            terms.append((D[idx][:, idx].sum() / (size * (size - 1))).item())
    return sum(terms) / len(terms) if terms else float("nan")


def inter_cluster_separation(D: Tensor, assignments: Tensor) -> float:
    r"""Inter-cluster separation (eq. 11): the mean distance over pairs of Gaussians in
    different clusters,
    ``sum_{i != j} sum_{k in C_i, l in C_j} D_kl / sum_{i != j} |C_i||C_j|``.

    Larger is better. ``nan`` for a single cluster (there are no such pairs).

    Args:
        D: ``k x k`` symmetric pairwise distance matrix.
        assignments: ``k`` cluster indices.

    Returns:
        The criterion.
    """
    _check_labels(D, assignments)
    different = assignments.unsqueeze(0) != assignments.unsqueeze(1)
    if not different.any():
        return float("nan")
    return (D[different].sum() / different.sum()).item()


def silhouette_score(D: Tensor, assignments: Tensor) -> float:
    r"""Mean silhouette (Rousseeuw, 1987) of a clustering from its distance matrix.

    For Gaussian ``j`` with mean distance ``a_j`` to the other members of its cluster
    and smallest mean distance ``b_j`` to the members of another cluster,
    ``s_j = (b_j - a_j) / max(a_j, b_j)``; a singleton has ``s_j = 0``. Unlike the
    paper's ratio (eqs. 10-11) it does not grow by splitting off single tasks.

    Args:
        D: ``k x k`` symmetric pairwise distance matrix.
        assignments: ``k`` cluster indices.

    Returns:
        The mean of ``s_j`` over all Gaussians, in ``[-1, 1]``; ``nan`` for a single
        cluster (there is no ``b_j``).
    """
    _check_labels(D, assignments)
    labels = assignments.unique()
    if labels.numel() < 2:
        return float("nan")
    onehot = (assignments.unsqueeze(-1) == labels).to(D)  # k x C
    sizes = onehot.sum(0)
    sums = D @ onehot  # k x C: summed distance of each Gaussian to each cluster
    own = onehot.bool()
    own_size = (onehot * sizes).sum(-1)
    a = (sums * onehot).sum(-1) / (own_size - 1).clamp_min(1)
    b = (sums / sizes).masked_fill(own, float("inf")).min(-1).values
    s = (b - a) / torch.maximum(a, b).clamp_min(torch.finfo(D.dtype).tiny)
    s = torch.where(own_size > 1, s, torch.zeros_like(s))
    return s.mean().item()


#: Criteria of :func:`select_n_clusters`.
CLUSTER_COUNT_CRITERIA = ("silhouette", "paper")


class ClusterCountSelection(NamedTuple):
    r"""Result of :func:`select_n_clusters`.

    Attributes:
        n_clusters: The chosen ``C``.
        candidates: The candidate values tried.
        intra: Eq. 10 for each candidate.
        inter: Eq. 11 for each candidate.
        scores: The criterion of each candidate: the mean silhouette
            (``criterion="silhouette"``, ``nan`` for ``C = 1``) or ``inter / intra``
            (``criterion="paper"``; ``inf`` where ``intra == 0``, ``nan`` where
            undefined: one cluster, or only singletons).
        results: The :class:`GaussianKMeansResult` of each candidate.
        criterion: ``"silhouette"`` or ``"paper"``.
    """

    n_clusters: int
    candidates: list[int]
    intra: list[float]
    inter: list[float]
    scores: list[float]
    results: list[GaussianKMeansResult]
    criterion: str = "silhouette"


def select_n_clusters(
    means: Tensor,
    covs: Tensor,
    candidates: Iterable[int] = range(1, 7),
    distance: str = "wasserstein",
    criterion_distance: str = "wasserstein",
    pairwise: Tensor | None = None,
    criterion: str = "silhouette",
    min_silhouette: float = 0.5,
    **kmeans_options,
) -> ClusterCountSelection:
    r"""Choose the number of clusters ``C``.

    For each candidate ``C`` runs :func:`gaussian_kmeans` and scores the clustering on
    the pairwise matrix of ``criterion_distance`` (computed once for all candidates):

    - ``criterion="silhouette"`` (default): the ``C >= 2`` with the largest mean
      silhouette (:func:`silhouette_score`), or ``C = 1`` (if a candidate) when that
      silhouette is below ``min_silhouette``: no split then shows clear structure
      (Kaufman and Rousseeuw read ``> 0.5`` as "reasonable structure"). On synthetic
      meta-data with 1, 2, 3 or 5 known clusters this recovers ``C`` in most draws.
    - ``criterion="paper"``: ``inter_cluster_separation / intra_cluster_entropy``
      (eqs. 10-11, "the larger interCS and the smaller intraCE, the better",
      Sec. 4.1). It is undefined for ``C = 1`` (never chosen) and tends to grow with
      ``C`` (splitting off single tasks lowers the intra-cluster term), so it often
      picks the largest candidate.

    A score is ``nan`` (never chosen) where undefined; if all are, the smallest
    candidate is returned.

    Args:
        means: ``k x n`` means.
        covs: ``k x n x n`` covariances.
        candidates: Values of ``C`` to try; those above ``k`` are dropped.
        distance: Distance used by k-means.
        criterion_distance: Distance of the criteria's pairwise matrix.
        pairwise: Optional precomputed ``k x k`` matrix for the criteria.
        criterion: ``"silhouette"`` or ``"paper"``.
        min_silhouette: Smallest mean silhouette that favours ``C >= 2`` over
            ``C = 1`` (silhouette criterion only).
        kmeans_options: Passed to :func:`gaussian_kmeans` (``n_init``, ``seed``, ...).

    Returns:
        A :class:`ClusterCountSelection`.

    Example:
        >>> selection = select_n_clusters(means, covs, candidates=range(1, 7))
        >>> n_clusters, scores = selection.n_clusters, selection.scores
    """
    _check_set(means, covs)
    if criterion not in CLUSTER_COUNT_CRITERIA:
        raise ValueError(
            f"`criterion` must be one of {CLUSTER_COUNT_CRITERIA}, got {criterion!r}."
        )
    k = means.shape[0]
    given = sorted(set(int(c) for c in candidates))
    cands = [c for c in given if 1 <= c <= k]
    if not cands:
        raise ValueError(
            f"No candidate number of clusters in {given} is between 1 and the number "
            f"of Gaussians ({k})."
        )
    D = (
        pairwise
        if pairwise is not None
        else pairwise_divergence(
            means,
            covs,
            distance=check_distance(criterion_distance, "criterion_distance"),
        )
    )
    intra, inter, scores, results = [], [], [], []
    divergences = _CenterDivergences(means, covs, check_distance(distance))
    for C in cands:
        result = _kmeans_with(divergences, C, **kmeans_options)
        a, b = (
            intra_cluster_entropy(D, result.assignments),
            inter_cluster_separation(D, result.assignments),
        )
        intra.append(a)
        inter.append(b)
        if criterion == "silhouette":
            scores.append(silhouette_score(D, result.assignments))
        else:
            scores.append(
                float("nan") if a != a or b != b else (b / a if a > 0 else float("inf"))
            )
        results.append(result)
    valid = [i for i, s in enumerate(scores) if s == s]
    best = max(valid, key=lambda i: (scores[i], -cands[i])) if valid else 0
    if criterion == "silhouette" and 1 in cands and valid:
        if scores[best] < min_silhouette:
            best = cands.index(1)
    return ClusterCountSelection(
        cands[best], cands, intra, inter, scores, results, criterion
    )
