r"""build_cluster_prior (Algorithm 1 Stages 1-2): clustering of meta-tasks of three
families, the automatic number of clusters, and input validation."""

import pytest
import torch

from botorch_transfer import TaskData, build_cluster_prior
from tests.priors.reference import F64, same_partition


@pytest.mark.parametrize("distance", ["wasserstein", "jeffreys"])
def test_clustering_recovers_three_families(meta, prior, distance):
    tasks, truth = meta
    if distance != prior.distance:  # reuse the fitted meta-task GPs
        prior = build_cluster_prior(
            tasks,
            n_clusters=3,
            distance=distance,
            n_index_points=24,
            n_init=3,
            posteriors=prior.posteriors,
        )
    assert same_partition(prior.assignments, truth)
    assert prior.assignments.shape == (len(tasks),) and prior.n_clusters == 3
    for c, proto in enumerate(prior.prototypes):  # eq. 7 centers on V
        assert proto.members == (prior.assignments == c).nonzero().flatten().tolist()
        torch.testing.assert_close(proto.mean, prior.task_means[proto.members].mean(0))
        torch.testing.assert_close(
            proto.covariance, prior.task_covs[proto.members].mean(0)
        )


def test_automatic_number_of_clusters(meta, prior):
    tasks, truth = meta
    prior = build_cluster_prior(
        tasks,
        n_clusters=None,
        n_clusters_range=(2, 4),
        n_index_points=24,
        n_init=3,
        posteriors=prior.posteriors,
    )
    assert prior.info["selection"]["candidates"] == [2, 3, 4]
    scores = prior.info["selection"]["scores"]
    assert prior.n_clusters == [2, 3, 4][max(range(3), key=lambda i: scores[i])]


def test_bad_inputs(meta, prior):
    tasks, _ = meta
    with pytest.raises(ValueError, match="`tasks`"):
        build_cluster_prior([])
    other = TaskData(torch.rand(5, 3, dtype=F64), torch.rand(5, 1, dtype=F64))
    with pytest.raises(ValueError, match=r"tasks\[1\]"):
        build_cluster_prior([tasks[0], other])
    with pytest.raises(ValueError, match="n_clusters"):
        build_cluster_prior(tasks[:2], n_clusters=3)
    with pytest.raises(ValueError, match="distance"):
        build_cluster_prior(tasks[:2], distance="kl")
    with pytest.raises(ValueError, match="prototype"):
        build_cluster_prior(tasks[:2], prototype="median")
    with pytest.raises(ValueError, match="index_points"):
        build_cluster_prior(tasks[:2], index_points=torch.rand(10, 3, dtype=F64))
    V = torch.rand(10, 2, dtype=F64)
    V[3, 1] = float("nan")
    with pytest.raises(ValueError, match="`index_points` contains NaN or infinite"):
        build_cluster_prior(tasks[:2], index_points=V)
    for bounds, match in [
        ([[0.0, float("nan")], [1.0, 1.0]], "`bounds` contains NaN"),
        ([[0.0, 1.0], [1.0, 0.0]], r"`bounds` must have lower < upper.*\[1\]"),
    ]:
        with pytest.raises(ValueError, match=match):
            build_cluster_prior(tasks[:2], bounds=torch.tensor(bounds, dtype=F64))
    with pytest.raises(ValueError, match="posteriors"):
        build_cluster_prior(tasks[:2], posteriors=prior.posteriors)


@pytest.mark.parametrize("n_index_points", [0, -3, 2.5, True])
def test_n_index_points_must_be_a_positive_integer(n_index_points):
    task = TaskData(torch.rand(4, 2, dtype=F64), torch.rand(4, 1, dtype=F64))
    with pytest.raises(ValueError, match="`n_index_points` must be a positive integer"):
        build_cluster_prior([task, task], n_index_points=n_index_points)
