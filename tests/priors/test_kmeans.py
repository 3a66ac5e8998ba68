r"""k-means over Gaussians, eq. 7 centers and the eqs. 10-11 criteria."""

import pytest
import torch

from botorch_transfer.priors import (
    gaussian_kmeans,
    inter_cluster_separation,
    intra_cluster_entropy,
    pairwise_divergence,
    select_n_clusters,
)

F64 = torch.float64


def three_families(per_family=(5, 4, 6), n=8, seed=0, device="cpu"):
    r"""Gaussians from three well-separated families, shuffled; returns the truth."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.linspace(0, 1, n, dtype=F64)
    shapes = [torch.sin(6 * x), 2 * x - 1, -torch.cos(3 * x) + 0.5]
    K = torch.exp(-0.5 * (x.unsqueeze(0) - x.unsqueeze(1)).pow(2) / 0.2**2)
    means, covs, truth = [], [], []
    for family, count in enumerate(per_family):
        for _ in range(count):
            means.append(
                shapes[family] + 0.05 * torch.randn(n, generator=gen, dtype=F64)
            )
            scale = 0.01 * (1 + torch.rand(1, generator=gen, dtype=F64))
            covs.append(scale * K + 1e-4 * torch.eye(n, dtype=F64))
            truth.append(family)
    perm = torch.randperm(len(truth), generator=gen)
    return (
        torch.stack(means)[perm].to(device),
        torch.stack(covs)[perm].to(device),
        torch.tensor(truth)[perm].to(device),
    )


def same_partition(a, b):
    return bool(
        ((a.unsqueeze(0) == a.unsqueeze(1)) == (b.unsqueeze(0) == b.unsqueeze(1))).all()
    )


@pytest.mark.parametrize("distance", ["wasserstein", "jeffreys"])
def test_recovers_three_families(device, distance):
    means, covs, truth = three_families(device=device)
    result = gaussian_kmeans(
        means, covs, n_clusters=3, distance=distance, seed=0, n_init=3
    )
    assert same_partition(result.assignments, truth)
    assert result.converged and result.assignments.device.type == device.type
    # clusters are numbered by their first member
    first = [result.assignments.tolist().index(c) for c in range(3)]
    assert first == sorted(first)
    # centers are eq. 7: the mean of the members' means and of their covariances
    for c in range(3):
        members = result.assignments == c
        torch.testing.assert_close(result.center_means[c], means[members].mean(0))
        torch.testing.assert_close(result.center_covs[c], covs[members].mean(0))
    # inertia: W2^2 (or Jeffreys) of every member to its center
    D = pairwise_divergence(
        means, covs, result.center_means, result.center_covs, distance
    )
    cost = D.gather(-1, result.assignments.unsqueeze(-1))
    expected = (cost.pow(2) if distance == "wasserstein" else cost).sum().item()
    assert result.inertia == pytest.approx(expected, rel=1e-9)


def test_deterministic_with_seed_and_restarts_pick_lowest_inertia():
    means, covs, _ = three_families(per_family=(4, 4, 4), seed=3)
    a = gaussian_kmeans(means, covs, 4, seed=11, n_init=3)
    b = gaussian_kmeans(means, covs, 4, seed=11, n_init=3)
    assert torch.equal(a.assignments, b.assignments) and a.inertia == b.inertia
    # the first restart of a multi-restart run is the single run with the same seed,
    # so keeping the best restart can only lower the inertia
    for seed in range(2):
        single = gaussian_kmeans(means, covs, 4, seed=seed, n_init=1).inertia
        assert gaussian_kmeans(means, covs, 4, seed=seed, n_init=5).inertia <= single


def test_one_cluster_and_one_per_gaussian():
    means, covs, _ = three_families(per_family=(2, 2, 2))
    one = gaussian_kmeans(means, covs, 1, n_init=1)
    assert (one.assignments == 0).all()
    torch.testing.assert_close(one.center_means[0], means.mean(0))
    each = gaussian_kmeans(means, covs, 6, n_init=2)
    assert sorted(each.assignments.tolist()) == list(
        range(6)
    ) and each.inertia == pytest.approx(0, abs=1e-8)


def test_criteria_by_hand():
    # four points, clusters {0, 1} and {2, 3}, distances written out
    D = torch.tensor(
        [
            [0.0, 1.0, 5.0, 6.0],
            [1.0, 0.0, 4.0, 7.0],
            [5.0, 4.0, 0.0, 3.0],
            [6.0, 7.0, 3.0, 0.0],
        ],
        dtype=F64,
    )
    labels = torch.tensor([0, 0, 1, 1])
    # eq. 10: mean over clusters of the mean pairwise distance: (1 + 3) / 2
    assert intra_cluster_entropy(D, labels) == pytest.approx(2.0)
    # eq. 11: mean over cross pairs: (5 + 6 + 4 + 7) / 4
    assert inter_cluster_separation(D, labels) == pytest.approx(5.5)
    # a singleton cluster has no pairs and is left out of eq. 10
    assert intra_cluster_entropy(D, torch.tensor([0, 0, 0, 1])) == pytest.approx(
        (1 + 5 + 4) / 3
    )
    assert inter_cluster_separation(D, torch.tensor([0, 0, 0, 1])) == pytest.approx(
        (6 + 7 + 3) / 3
    )
    assert inter_cluster_separation(
        D, torch.zeros(4, dtype=torch.long)
    ) != inter_cluster_separation(D, torch.zeros(4, dtype=torch.long))  # nan


def test_select_n_clusters_finds_three():
    means, covs, truth = three_families(per_family=(4, 5, 4), seed=2)
    selection = select_n_clusters(
        means, covs, candidates=range(2, 7), n_init=3, criterion="paper"
    )
    assert selection.candidates == [2, 3, 4, 5, 6]
    assert select_n_clusters(means, covs, n_init=3).n_clusters == 3  # silhouette
    assert selection.n_clusters == 3
    best = selection.results[selection.candidates.index(3)]
    assert same_partition(best.assignments, truth)
    D = pairwise_divergence(means, covs)
    for C, intra, inter, score, result in zip(
        selection.candidates,
        selection.intra,
        selection.inter,
        selection.scores,
        selection.results,
    ):
        assert intra == pytest.approx(intra_cluster_entropy(D, result.assignments))
        assert inter == pytest.approx(inter_cluster_separation(D, result.assignments))
        assert score == pytest.approx(inter / intra)


def test_bad_inputs():
    means, covs, _ = three_families(per_family=(1, 1, 1))
    with pytest.raises(ValueError, match="n_clusters"):
        gaussian_kmeans(means, covs, 4)
    with pytest.raises(ValueError, match="n_clusters"):
        gaussian_kmeans(means, covs, 0)
    with pytest.raises(ValueError, match="distance"):
        gaussian_kmeans(means, covs, 2, distance="kl")
    with pytest.raises(ValueError, match="means"):
        gaussian_kmeans(means[:, :-1], covs, 2)
    with pytest.raises(ValueError, match="candidate"):
        select_n_clusters(means, covs, candidates=[5, 6])


def test_each_cluster_divergences_computed_once(monkeypatch):
    # a center depends on its members alone: restarts and candidate counts that meet
    # a cluster again reuse its divergences instead of computing them again
    from botorch_transfer.priors import kmeans

    computed = []

    def counting(means_a, covs_a, means_b=None, covs_b=None, distance="wasserstein"):
        if means_b is not None:  # (not the criteria's matrix of the Gaussians)
            computed.extend(tuple(row.tolist()) for row in means_b)
        return pairwise_divergence(means_a, covs_a, means_b, covs_b, distance)

    monkeypatch.setattr(kmeans, "pairwise_divergence", counting)
    means, covs, truth = three_families(per_family=(4, 4, 4), seed=1)
    result = gaussian_kmeans(means, covs, 3, n_init=10)
    assert same_partition(result.assignments, truth)
    assert len(computed) == len(set(computed))
    # ten restarts evaluate at least 10 x 3 seeds and 10 x 3 centers; with reuse the
    # twelve singletons and the three true clusters (plus the paths between) remain
    assert len(computed) < 30
    computed.clear()
    selection = select_n_clusters(means, covs, candidates=range(1, 5), n_init=10)
    assert selection.n_clusters == 3
    assert len(computed) == len(set(computed))
