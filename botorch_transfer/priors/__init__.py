r"""Priors learned from many related tasks, and the parts they share.

- :mod:`~botorch_transfer.priors.hyperbo`: HyperBO's pre-trained GP prior (Wang et
  al.): :func:`pretrain_prior`, :class:`PretrainedPrior`, and a mixture of them over
  clusters of tasks.
- :mod:`~botorch_transfer.priors.cmbo`: cm-BO's clustered meta prior (Nguyen et
  al.): :func:`build_cluster_prior`, :class:`ClusterMetaPrior`.
- Shared: one GP per meta-task and their frozen posteriors
  (:mod:`~botorch_transfer.priors.meta_task_gps`, with their kernel in
  :mod:`~botorch_transfer.priors.kernels`), divergences between Gaussians
  (:mod:`~botorch_transfer.priors.divergences`), k-means over Gaussians and the
  cluster-count criteria (:mod:`~botorch_transfer.priors.kmeans`), and the one file
  format of every saved prior (:mod:`~botorch_transfer.priors.io`).

The models built on them are :class:`~botorch_transfer.models.PretrainedPriorGP`,
:class:`~botorch_transfer.models.ClusterMetaPriorGP` and
:class:`~botorch_transfer.models.MetaTaskMixtureGP`.
"""

from botorch_transfer.priors.cmbo import (
    Barycenter,
    BarycenterConvergenceWarning,
    ClusterMetaPrior,
    ClusterPriorKernel,
    ClusterPriorMean,
    ClusterPrototype,
    build_cluster_prior,
    check_weights,
    cluster_weights_from_distances,
    wasserstein_barycenter,
)
from botorch_transfer.priors.divergences import (
    DISTANCES,
    divergence,
    gaussian_kl,
    jeffreys_divergence,
    pairwise_divergence,
    symmetric_sqrtm,
    wasserstein_distance,
)
from botorch_transfer.priors.hyperbo import (
    EKLGroup,
    MatchingInputGroup,
    PretrainedPrior,
    PretrainedPriorMixture,
    ThinMetaDataWarning,
    ekl_objective,
    matching_input_groups,
    nll_objective,
    pretrain_clustered_prior,
    pretrain_prior,
)
from botorch_transfer.priors.kernels import (
    ProductMaternKernel,
    meta_task_kernel,
    product_matern,
)
from botorch_transfer.priors.kmeans import (
    ClusterCountSelection,
    GaussianKMeansResult,
    gaussian_kmeans,
    inter_cluster_separation,
    intra_cluster_entropy,
    select_n_clusters,
    silhouette_score,
)
from botorch_transfer.priors.meta_task_gps import (
    MetaTaskPosteriors,
    fit_meta_task_gps,
    fit_meta_task_mll_batched,
    meta_task_model,
    meta_task_posteriors,
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
    "EKLGroup",
    "GaussianKMeansResult",
    "MatchingInputGroup",
    "MetaTaskPosteriors",
    "PretrainedPrior",
    "PretrainedPriorMixture",
    "ProductMaternKernel",
    "ThinMetaDataWarning",
    "build_cluster_prior",
    "check_weights",
    "cluster_weights_from_distances",
    "divergence",
    "ekl_objective",
    "fit_meta_task_gps",
    "fit_meta_task_mll_batched",
    "gaussian_kl",
    "gaussian_kmeans",
    "inter_cluster_separation",
    "intra_cluster_entropy",
    "jeffreys_divergence",
    "matching_input_groups",
    "meta_task_kernel",
    "meta_task_model",
    "meta_task_posteriors",
    "nll_objective",
    "pairwise_divergence",
    "pretrain_clustered_prior",
    "pretrain_prior",
    "product_matern",
    "select_n_clusters",
    "silhouette_score",
    "symmetric_sqrtm",
    "wasserstein_barycenter",
    "wasserstein_distance",
]
