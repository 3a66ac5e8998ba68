import pytest
import torch


@pytest.fixture(autouse=True, scope="package")
def _one_thread():
    r"""Many small eigenvalue problems: on the shared 2-core machine oversubscribed BLAS
    threads make them ~10x slower. Restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="package")
def meta():
    r"""Meta-tasks of three families (interleaved) and each task's family."""
    from tests.priors.reference import make_tasks

    return make_tasks()


@pytest.fixture(scope="package")
def prior(meta):
    r"""A cm-BO prior with center prototypes on 24 index points (the paper's prior
    covariance, Theorem 3.1, which the references implement)."""
    from botorch_transfer.priors import build_cluster_prior

    return build_cluster_prior(
        meta[0], n_clusters=3, n_index_points=24, n_init=3, prior_covariance="paper"
    )


@pytest.fixture(scope="package")
def bary_prior(meta, prior):
    r"""The same clustering with barycenter prototypes (Stage 1 reused)."""
    from botorch_transfer.priors import build_cluster_prior

    return build_cluster_prior(
        meta[0],
        n_clusters=3,
        n_index_points=24,
        n_init=3,
        prototype="barycenter",
        posteriors=prior.posteriors,
        prior_covariance="paper",
    )
