r"""Divergences and the barycenter against closed forms computed independently
(1-D formulas by hand, identity/diagonal covariances, numpy/scipy linear algebra)."""

import math
import warnings

import numpy as np
import pytest
import scipy.linalg
import torch

from botorch_transfer.priors import (
    BarycenterConvergenceWarning,
    gaussian_kl,
    jeffreys_divergence,
    pairwise_divergence,
    symmetric_sqrtm,
    wasserstein_barycenter,
    wasserstein_distance,
)

F64 = torch.float64


def random_spd(n, gen, scale=1.0):
    A = torch.randn(n, n, generator=gen, dtype=F64)
    return scale * (A @ A.T / n + 0.3 * torch.eye(n, dtype=F64))


def kl_numpy(m0, S0, m1, S1):
    m0, S0, m1, S1 = (np.asarray(t) for t in (m0, S0, m1, S1))
    S1_inv = np.linalg.inv(S1)
    dm = m1 - m0
    return 0.5 * (
        np.trace(S1_inv @ S0)
        + dm @ S1_inv @ dm
        - len(m0)
        + np.linalg.slogdet(S1)[1]
        - np.linalg.slogdet(S0)[1]
    )


def w2_scipy(m0, S0, m1, S1):
    m0, S0, m1, S1 = (np.asarray(t) for t in (m0, S0, m1, S1))
    r1 = scipy.linalg.sqrtm(S1)
    cross = np.real(scipy.linalg.sqrtm(r1 @ S0 @ r1))
    return math.sqrt(max(np.sum((m0 - m1) ** 2) + np.trace(S0 + S1 - 2 * cross), 0.0))


def test_one_dimensional_by_hand(device):
    m0, s0, m1, s1 = 0.3, 0.5, -1.2, 2.0
    t = lambda v: torch.tensor([v], dtype=F64, device=device)  # noqa: E731
    c = lambda v: torch.tensor([[v]], dtype=F64, device=device)  # noqa: E731
    kl = math.log(s1 / s0) + (s0**2 + (m0 - m1) ** 2) / (2 * s1**2) - 0.5
    kl_rev = math.log(s0 / s1) + (s1**2 + (m0 - m1) ** 2) / (2 * s0**2) - 0.5
    assert gaussian_kl(t(m0), c(s0**2), t(m1), c(s1**2)).item() == pytest.approx(
        kl, rel=1e-12
    )
    assert jeffreys_divergence(
        t(m0), c(s0**2), t(m1), c(s1**2)
    ).item() == pytest.approx(kl + kl_rev, rel=1e-12)
    w2 = math.sqrt((m0 - m1) ** 2 + (s0 - s1) ** 2)
    assert wasserstein_distance(
        t(m0), c(s0**2), t(m1), c(s1**2)
    ).item() == pytest.approx(w2, rel=1e-12)
    assert wasserstein_distance(
        t(m0), c(s0**2), t(m1), c(s1**2), squared=True
    ).item() == pytest.approx(w2**2, rel=1e-12)


def test_identity_covariances():
    gen = torch.Generator().manual_seed(1)
    m0, m1 = (
        torch.randn(7, generator=gen, dtype=F64),
        torch.randn(7, generator=gen, dtype=F64),
    )
    eye = torch.eye(7, dtype=F64)
    sq = (m0 - m1).pow(2).sum().item()
    assert gaussian_kl(m0, eye, m1, eye).item() == pytest.approx(sq / 2, rel=1e-12)
    assert jeffreys_divergence(m0, eye, m1, eye).item() == pytest.approx(sq, rel=1e-12)
    assert wasserstein_distance(m0, eye, m1, eye).item() == pytest.approx(
        math.sqrt(sq), rel=1e-12
    )
    # scaled identities: W2^2 = |dm|^2 + n (a - b)^2 for covariances a^2 I, b^2 I
    w2 = wasserstein_distance(m0, 4 * eye, m1, 0.25 * eye, squared=True).item()
    assert w2 == pytest.approx(sq + 7 * (2 - 0.5) ** 2, rel=1e-12)


def test_diagonal_and_rotated_covariances():
    # commuting covariances: W2^2 = |dm|^2 + sum (sqrt(a_i) - sqrt(b_i))^2; the same for
    # both Gaussians rotated by one orthogonal Q (W2 is rotation invariant)
    gen = torch.Generator().manual_seed(2)
    n = 6
    a, b = (
        torch.rand(n, generator=gen, dtype=F64) + 0.1,
        torch.rand(n, generator=gen, dtype=F64) + 0.1,
    )
    m0, m1 = (
        torch.randn(n, generator=gen, dtype=F64),
        torch.randn(n, generator=gen, dtype=F64),
    )
    expected = (m0 - m1).pow(2).sum() + (a.sqrt() - b.sqrt()).pow(2).sum()
    kl = 0.5 * (a / b + (m1 - m0).pow(2) / b - 1 + (b / a).log()).sum()
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=F64))
    for R in (torch.eye(n, dtype=F64), Q):
        S0, S1 = R @ torch.diag(a) @ R.T, R @ torch.diag(b) @ R.T
        got = wasserstein_distance(R @ m0, S0, R @ m1, S1, squared=True)
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(
            gaussian_kl(R @ m0, S0, R @ m1, S1), kl, rtol=1e-10, atol=1e-12
        )


def test_general_covariances_against_numpy_scipy():
    gen = torch.Generator().manual_seed(3)
    for n in (2, 5, 12):
        m0, m1 = (
            torch.randn(n, generator=gen, dtype=F64),
            torch.randn(n, generator=gen, dtype=F64),
        )
        S0, S1 = random_spd(n, gen), random_spd(n, gen, scale=2.0)
        assert gaussian_kl(m0, S0, m1, S1).item() == pytest.approx(
            kl_numpy(m0, S0, m1, S1), rel=1e-10
        )
        assert wasserstein_distance(m0, S0, m1, S1).item() == pytest.approx(
            w2_scipy(m0, S0, m1, S1), rel=1e-8
        )
        # W2 is symmetric although the formula treats P and Q differently
        torch.testing.assert_close(
            wasserstein_distance(m0, S0, m1, S1),
            wasserstein_distance(m1, S1, m0, S0),
            rtol=1e-10,
            atol=1e-12,
        )
        # Jeffreys = KL(P||Q) + KL(Q||P), and it is symmetric
        jef = jeffreys_divergence(m0, S0, m1, S1)
        torch.testing.assert_close(
            jef,
            gaussian_kl(m0, S0, m1, S1) + gaussian_kl(m1, S1, m0, S0),
            rtol=1e-10,
            atol=1e-12,
        )
        torch.testing.assert_close(
            jef, jeffreys_divergence(m1, S1, m0, S0), rtol=1e-10, atol=1e-12
        )
        # identical Gaussians are at distance 0
        assert wasserstein_distance(m0, S0, m0, S0).item() == pytest.approx(
            0.0, abs=1e-6
        )
        assert jeffreys_divergence(m0, S0, m0, S0).item() == pytest.approx(
            0.0, abs=1e-10
        )


def test_batched_broadcasting(device):
    gen = torch.Generator().manual_seed(4)
    means = torch.randn(3, 4, 5, generator=gen, dtype=F64).to(device)
    covs = torch.stack([random_spd(5, gen) for _ in range(4)]).to(
        device
    )  # 4 x 5 x 5, broadcast over 3
    ref_m, ref_S = means[0, 0], covs[0]
    for fn in (gaussian_kl, jeffreys_divergence, wasserstein_distance):
        out = fn(means, covs, ref_m, ref_S)
        assert out.shape == (3, 4) and out.device.type == device.type
        for i in range(3):
            for j in range(4):
                torch.testing.assert_close(
                    out[i, j],
                    fn(means[i, j], covs[j], ref_m, ref_S),
                    rtol=1e-10,
                    atol=1e-12,
                )


@pytest.mark.parametrize("distance", ["wasserstein", "jeffreys"])
def test_pairwise_matches_single_calls(distance):
    gen = torch.Generator().manual_seed(5)
    A, B, n = 6, 4, 5
    means_a, means_b = (
        torch.randn(A, n, generator=gen, dtype=F64),
        torch.randn(B, n, generator=gen, dtype=F64),
    )
    covs_a = torch.stack([random_spd(n, gen) for _ in range(A)])
    covs_b = torch.stack([random_spd(n, gen) for _ in range(B)])
    fn = wasserstein_distance if distance == "wasserstein" else jeffreys_divergence
    D = pairwise_divergence(
        means_a, covs_a, means_b, covs_b, distance=distance, chunk_size=5
    )
    expected = torch.stack(
        [
            torch.stack(
                [fn(means_a[i], covs_a[i], means_b[j], covs_b[j]) for j in range(B)]
            )
            for i in range(A)
        ]
    )
    torch.testing.assert_close(D, expected, rtol=1e-9, atol=1e-12)
    D_self = pairwise_divergence(means_a, covs_a, distance=distance)
    expected_self = torch.stack(
        [
            torch.stack(
                [fn(means_a[i], covs_a[i], means_a[j], covs_a[j]) for j in range(A)]
            )
            for i in range(A)
        ]
    )
    expected_self.fill_diagonal_(0)
    torch.testing.assert_close(D_self, expected_self, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(D_self, D_self.T)


def test_pairwise_wasserstein_with_point_masses_against_scipy(device):
    # point masses (zero covariances, as pretrain_clustered_prior clusters) take a
    # path without square roots; against scipy's sqrtm of the general formula
    gen = torch.Generator().manual_seed(6)
    A, B, n = 5, 3, 4
    means_a = torch.randn(A, n, generator=gen, dtype=F64)
    means_b = torch.randn(B, n, generator=gen, dtype=F64)
    zeros_a = torch.zeros(A, n, n, dtype=F64)
    covs_b = torch.stack([random_spd(n, gen) for _ in range(B)])
    expected = torch.tensor(
        [
            [w2_scipy(means_a[i], zeros_a[i], means_b[j], covs_b[j]) for j in range(B)]
            for i in range(A)
        ],
        dtype=F64,
    )
    on = {"device": device}
    D = pairwise_divergence(*(t.to(**on) for t in (means_a, zeros_a, means_b, covs_b)))
    assert D.device.type == device.type
    torch.testing.assert_close(D.cpu(), expected, rtol=1e-10, atol=1e-12)
    D_t = pairwise_divergence(
        *(t.to(**on) for t in (means_b, covs_b, means_a, zeros_a))
    )
    torch.testing.assert_close(D_t.cpu(), expected.T, rtol=1e-10, atol=1e-12)
    # point masses among themselves: the Euclidean distances, zero diagonal
    D_self = pairwise_divergence(means_a.to(**on), zeros_a.to(**on)).cpu()
    euclid = (means_a.unsqueeze(1) - means_a.unsqueeze(0)).pow(2).sum(-1).sqrt()
    torch.testing.assert_close(D_self, euclid, rtol=1e-12, atol=0)


def test_symmetric_sqrtm_clamps_rounding_negative_eigenvalues():
    gen = torch.Generator().manual_seed(6)
    V = torch.randn(8, 3, generator=gen, dtype=F64)
    A = V @ V.T  # rank 3: eigenvalues ~ +-1e-16 besides three positive ones
    R = symmetric_sqrtm(A)
    assert torch.isfinite(R).all()
    torch.testing.assert_close(R @ R, A, rtol=1e-7, atol=1e-7)
    torch.testing.assert_close(R, R.T)
    torch.testing.assert_close(
        R,
        torch.from_numpy(np.real(scipy.linalg.sqrtm(A.numpy()))),
        rtol=1e-6,
        atol=1e-6,
    )


def test_bad_inputs():
    eye = torch.eye(3, dtype=F64)
    singular = torch.zeros(3, 3, dtype=F64)
    with pytest.raises(ValueError, match="cov_q"):
        gaussian_kl(torch.zeros(3, dtype=F64), eye, torch.zeros(3, dtype=F64), singular)
    with pytest.raises(ValueError, match="mean_p"):
        wasserstein_distance(
            torch.zeros(2, dtype=F64), eye, torch.zeros(3, dtype=F64), eye
        )
    with pytest.raises(ValueError, match="distance"):
        pairwise_divergence(
            torch.zeros(2, 3, dtype=F64), eye.expand(2, 3, 3), distance="kl"
        )


# --------------------------------------------------------------------------- barycenter
def test_barycenter_of_identical_gaussians_is_that_gaussian(device):
    gen = torch.Generator().manual_seed(7)
    m, S = torch.randn(5, generator=gen, dtype=F64), random_spd(5, gen)
    result = wasserstein_barycenter(
        m.expand(4, 5).to(device), S.expand(4, 5, 5).to(device)
    )
    assert result.converged and result.n_iter <= 2
    torch.testing.assert_close(result.mean, m.to(device))
    torch.testing.assert_close(result.covariance, S.to(device), rtol=1e-10, atol=1e-12)


def test_barycenter_of_commuting_covariances_closed_form():
    # S_i = Q D_i Q^T commute: S_bar = (sum_i l_i S_i^1/2)^2, m_bar = sum_i l_i m_i
    gen = torch.Generator().manual_seed(8)
    n, k = 6, 4
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=F64))
    D = torch.rand(k, n, generator=gen, dtype=F64) * 3 + 0.1
    covs = Q @ torch.diag_embed(D) @ Q.T
    means = torch.randn(k, n, generator=gen, dtype=F64)
    weights = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=F64)
    result = wasserstein_barycenter(means, covs, weights)
    root_mean = (weights.unsqueeze(-1) * D.sqrt()).sum(0)
    torch.testing.assert_close(
        result.covariance, Q @ torch.diag(root_mean**2) @ Q.T, rtol=1e-9, atol=1e-11
    )
    torch.testing.assert_close(result.mean, weights @ means)
    assert result.converged


def test_barycenter_satisfies_fixed_point_equation():
    # non-commuting covariances: check S = sum_i l_i (S^1/2 S_i S^1/2)^1/2 with scipy
    gen = torch.Generator().manual_seed(9)
    covs = torch.stack([random_spd(5, gen) for _ in range(3)])
    result = wasserstein_barycenter(torch.zeros(3, 5, dtype=F64), covs)
    S = result.covariance.numpy()
    r = np.real(scipy.linalg.sqrtm(S))
    rhs = sum(np.real(scipy.linalg.sqrtm(r @ C @ r)) for C in covs.numpy()) / 3
    np.testing.assert_allclose(S, rhs, rtol=1e-8, atol=1e-10)


def test_barycenter_iteration_cap_is_reported():
    gen = torch.Generator().manual_seed(10)
    covs = torch.stack([random_spd(5, gen) for _ in range(3)])
    with pytest.warns(BarycenterConvergenceWarning, match="max_iter=1"):
        result = wasserstein_barycenter(torch.zeros(3, 5, dtype=F64), covs, max_iter=1)
    assert not result.converged and result.n_iter == 1 and result.change > 1e-10
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert wasserstein_barycenter(torch.zeros(3, 5, dtype=F64), covs).converged
    with pytest.raises(ValueError, match="weights"):
        wasserstein_barycenter(
            torch.zeros(3, 5, dtype=F64),
            covs,
            torch.tensor([0.5, 0.6, -0.1], dtype=F64),
        )
