r"""The cm-BO meta prior (Nguyen et al.): clustering of Gaussians and the prior.

Mirrors :mod:`botorch_transfer.pretraining` (HyperBO's prior): a prior object with
GPyTorch mean/kernel modules and save/load, and a builder function.

- Math: divergences between Gaussians (KL, Jeffreys, 2-Wasserstein), the
  Wasserstein barycenter, k-means over Gaussians and the paper's cluster-quality
  criteria (Sec. 2.1 and Sec. 3).
- Stage 1 (``stage1``): one GP per meta-task and their frozen posteriors.
- The prior (``prior``, ``weights``): :class:`ClusterMetaPrior`, its prototypes,
  cluster weights and mean/kernel modules.
- The builder (``build``): :func:`build_cluster_prior`.
"""

from botorch_transfer.clustering.barycenter import (
    Barycenter,
    BarycenterConvergenceWarning,
    wasserstein_barycenter,
)
from botorch_transfer.clustering.build import build_cluster_prior
from botorch_transfer.clustering.divergences import (
    DISTANCES,
    divergence,
    gaussian_kl,
    jeffreys_divergence,
    pairwise_divergence,
    symmetric_sqrtm,
    wasserstein_distance,
)
from botorch_transfer.clustering.kernels import (
    ProductMaternKernel,
    meta_task_kernel,
    product_matern,
)
from botorch_transfer.clustering.kmeans import (
    ClusterCountSelection,
    GaussianKMeansResult,
    gaussian_kmeans,
    inter_cluster_separation,
    intra_cluster_entropy,
    select_n_clusters,
    silhouette_score,
)
from botorch_transfer.clustering.prior import (
    ClusterMetaPrior,
    ClusterPriorKernel,
    ClusterPriorMean,
    ClusterPrototype,
)
from botorch_transfer.clustering.stage1 import (
    MetaTaskPosteriors,
    fit_meta_task_gps,
    fit_meta_task_mll_batched,
    meta_task_model,
    meta_task_posteriors,
)
from botorch_transfer.clustering.weights import (
    check_weights,
    cluster_weights_from_distances,
)

__all__ = [
    "DISTANCES",
    "Barycenter",
    "BarycenterConvergenceWarning",
    "ClusterCountSelection",
    "ClusterMetaPrior",
    "ClusterPriorKernel",
    "ClusterPriorMean",
    "ClusterPrototype",
    "GaussianKMeansResult",
    "MetaTaskPosteriors",
    "ProductMaternKernel",
    "build_cluster_prior",
    "check_weights",
    "cluster_weights_from_distances",
    "divergence",
    "fit_meta_task_gps",
    "fit_meta_task_mll_batched",
    "gaussian_kl",
    "gaussian_kmeans",
    "inter_cluster_separation",
    "intra_cluster_entropy",
    "jeffreys_divergence",
    "meta_task_kernel",
    "meta_task_model",
    "meta_task_posteriors",
    "pairwise_divergence",
    "product_matern",
    "select_n_clusters",
    "silhouette_score",
    "symmetric_sqrtm",
    "wasserstein_barycenter",
    "wasserstein_distance",
]
