r"""Clustering of Gaussians for meta-learning (cm-BO paper, Sec. 2.1 and Sec. 3).

Divergences between Gaussians (KL, Jeffreys, 2-Wasserstein), the Wasserstein
barycenter, k-means over Gaussians and the paper's cluster-quality criteria.
"""

from botorch_transfer.clustering.barycenter import (
    Barycenter,
    BarycenterConvergenceWarning,
    wasserstein_barycenter,
)
from botorch_transfer.clustering.divergences import (
    DISTANCES,
    divergence,
    gaussian_kl,
    jeffreys_divergence,
    pairwise_divergence,
    symmetric_sqrtm,
    wasserstein_distance,
)
from botorch_transfer.clustering.kmeans import (
    ClusterCountSelection,
    GaussianKMeansResult,
    gaussian_kmeans,
    inter_cluster_separation,
    intra_cluster_entropy,
    select_n_clusters,
)

__all__ = [
    "Barycenter",
    "BarycenterConvergenceWarning",
    "ClusterCountSelection",
    "DISTANCES",
    "GaussianKMeansResult",
    "divergence",
    "gaussian_kl",
    "gaussian_kmeans",
    "inter_cluster_separation",
    "intra_cluster_entropy",
    "jeffreys_divergence",
    "pairwise_divergence",
    "select_n_clusters",
    "symmetric_sqrtm",
    "wasserstein_barycenter",
    "wasserstein_distance",
]
