r"""The cm-BO meta prior (Nguyen et al.): clustered meta-task posteriors and their
cluster prototypes.

Mirrors :mod:`botorch_transfer.priors.hyperbo` (HyperBO's prior): a prior object with
GPyTorch mean/kernel modules and save/load, and a builder function. The parts it
shares with the other meta priors (the meta-task GPs, divergences between Gaussians,
k-means over Gaussians) are in :mod:`botorch_transfer.priors`.

- The Wasserstein barycenter (``barycenter``, Stage 2 (2)).
- The prior (``prior``, ``weights``): :class:`ClusterMetaPrior`, its prototypes,
  cluster weights and mean/kernel modules.
- The builder (``build``): :func:`build_cluster_prior`.
"""

from botorch_transfer.priors.cmbo.barycenter import (
    Barycenter,
    BarycenterConvergenceWarning,
    wasserstein_barycenter,
)
from botorch_transfer.priors.cmbo.build import build_cluster_prior
from botorch_transfer.priors.cmbo.prior import (
    ClusterMetaPrior,
    ClusterPriorKernel,
    ClusterPriorMean,
    ClusterPrototype,
)
from botorch_transfer.priors.cmbo.weights import (
    check_weights,
    cluster_weights_from_distances,
)

__all__ = [
    "Barycenter",
    "BarycenterConvergenceWarning",
    "ClusterMetaPrior",
    "ClusterPriorKernel",
    "ClusterPriorMean",
    "ClusterPrototype",
    "build_cluster_prior",
    "check_weights",
    "cluster_weights_from_distances",
    "wasserstein_barycenter",
]
