r"""Divergences between multivariate Gaussians ``N(m, S)``.

Implements the distances of the cm-BO paper (Nguyen et al., *Clustering-based
Meta Bayesian Optimization with Theoretical Guarantee*, Sec. 2.1):

- :func:`gaussian_kl`: the Kullback-Leibler divergence, eq. 3;
- :func:`jeffreys_divergence`: its symmetrization ``KL(P||Q) + KL(Q||P)``, eq. 4;
- :func:`wasserstein_distance`: the 2-Wasserstein distance, eq. 6;
- :func:`pairwise_divergence`: any of them for all pairs of two sets of Gaussians,
  batched so that per-Gaussian work (factorizations, square roots) is done once.

All functions broadcast over leading batch dimensions: means are ``... x n`` and
covariances ``... x n x n``. Covariances must be symmetric positive definite for the
KL/Jeffreys divergences (they invert them) and positive semi-definite for the
Wasserstein distance. Covariances of GP posteriors discretized on many points are
numerically singular; add a small diagonal jitter before calling these functions
(``build_cluster_prior`` does).
"""

from __future__ import annotations

import torch
from torch import Tensor

DISTANCES = ("wasserstein", "jeffreys")


def symmetric_sqrtm(A: Tensor) -> Tensor:
    r"""Principal square root of symmetric positive semi-definite matrices.

    Uses the symmetric eigendecomposition ``A = V diag(l) V^T`` and returns
    ``V diag(sqrt(max(l, 0))) V^T``. Clamping the eigenvalues at zero makes it
    stable for PSD matrices whose tiny eigenvalues come out slightly negative in
    floating point (a generic ``sqrtm`` would return complex values there).

    Args:
        A: ``... x n x n`` symmetric PSD matrices (only the lower triangle is read).

    Returns:
        ``... x n x n`` symmetric square roots ``R`` with ``R @ R = A``.

    Example:
        >>> A = torch.tensor([[4.0, 0.0], [0.0, 9.0]], dtype=torch.float64)
        >>> symmetric_sqrtm(A)
        tensor([[2., 0.],
                [0., 3.]], dtype=torch.float64)
    """
    eigvals, eigvecs = torch.linalg.eigh(A)
    root = eigvals.clamp_min(0).sqrt()
    return (eigvecs * root.unsqueeze(-2)) @ eigvecs.transpose(-1, -2)


def _check(mean: Tensor, cov: Tensor, name: str) -> None:
    if cov.dim() < 2 or cov.shape[-1] != cov.shape[-2]:
        raise ValueError(
            f"`cov_{name}` must have shape ... x n x n, got {tuple(cov.shape)}."
        )
    if mean.shape[-1] != cov.shape[-1]:
        raise ValueError(
            f"`mean_{name}` has {mean.shape[-1]} entries but `cov_{name}` is "
            f"{cov.shape[-1]} x {cov.shape[-1]}."
        )


def _cholesky(cov: Tensor, name: str) -> Tensor:
    L, info = torch.linalg.cholesky_ex(cov)
    if (info != 0).any():
        raise ValueError(
            f"`cov_{name}` is not positive definite (Cholesky failed); KL and Jeffreys "
            "divergences need non-singular covariances. Add a diagonal jitter."
        )
    return L


def gaussian_kl(mean_p: Tensor, cov_p: Tensor, mean_q: Tensor, cov_q: Tensor) -> Tensor:
    r"""``KL(P || Q)`` for ``P = N(mean_p, cov_p)``, ``Q = N(mean_q, cov_q)`` (eq. 3).

    ``KL = 1/2 (tr(S_q^-1 S_p) + dm^T S_q^-1 dm - n + log det S_q - log det S_p)``
    with ``dm = mean_q - mean_p``, computed with Cholesky factors.

    Args:
        mean_p: ``... x n`` mean of ``P``.
        cov_p: ``... x n x n`` positive definite covariance of ``P``.
        mean_q: ``... x n`` mean of ``Q``.
        cov_q: ``... x n x n`` positive definite covariance of ``Q``.

    Returns:
        The divergences, shape: the broadcast batch shape.

    Example:
        >>> I = torch.eye(2, dtype=torch.float64)
        >>> gaussian_kl(
        ...     torch.zeros(2, dtype=torch.float64),
        ...     I,
        ...     torch.ones(2, dtype=torch.float64),
        ...     I,
        ... )
        tensor(1., dtype=torch.float64)
    """
    _check(mean_p, cov_p, "p")
    _check(mean_q, cov_q, "q")
    L_p, L_q = _cholesky(cov_p, "p"), _cholesky(cov_q, "q")
    n = cov_p.shape[-1]
    batch = torch.broadcast_shapes(
        mean_p.shape[:-1], cov_p.shape[:-2], mean_q.shape[:-1], cov_q.shape[:-2]
    )
    L_q = L_q.expand(*batch, n, n)
    # tr(S_q^-1 S_p) = ||L_q^-1 L_p||_F^2
    M = torch.linalg.solve_triangular(L_q, L_p.expand(*batch, n, n), upper=False)
    dm = (mean_q - mean_p).expand(*batch, n).unsqueeze(-1)
    z = torch.linalg.solve_triangular(L_q, dm, upper=False)
    logdet_p = 2 * torch.diagonal(L_p, dim1=-2, dim2=-1).log().sum(-1)
    logdet_q = 2 * torch.diagonal(L_q, dim1=-2, dim2=-1).log().sum(-1)
    return 0.5 * (
        M.pow(2).sum((-2, -1)) + z.pow(2).sum((-2, -1)) - n + logdet_q - logdet_p
    )


def jeffreys_divergence(
    mean_p: Tensor, cov_p: Tensor, mean_q: Tensor, cov_q: Tensor
) -> Tensor:
    r"""Jeffreys divergence ``KL(P||Q) + KL(Q||P)`` (eq. 4).

    The log-determinants cancel, leaving
    ``1/2 (tr(S_q^-1 S_p) + tr(S_p^-1 S_q) + dm^T (S_p^-1 + S_q^-1) dm) - n``.

    Args:
        mean_p: ``... x n`` mean of ``P``.
        cov_p: ``... x n x n`` positive definite covariance of ``P``.
        mean_q: ``... x n`` mean of ``Q``.
        cov_q: ``... x n x n`` positive definite covariance of ``Q``.

    Returns:
        The (symmetric, non-negative) divergences, shape: the broadcast batch shape.

    Example:
        >>> I = torch.eye(3, dtype=torch.float64)
        >>> jeffreys_divergence(
        ...     torch.zeros(3, dtype=torch.float64),
        ...     I,
        ...     torch.ones(3, dtype=torch.float64),
        ...     I,
        ... )
        tensor(3., dtype=torch.float64)
    """
    _check(mean_p, cov_p, "p")
    _check(mean_q, cov_q, "q")
    P_inv = torch.cholesky_inverse(_cholesky(cov_p, "p"))
    Q_inv = torch.cholesky_inverse(_cholesky(cov_q, "q"))
    n = cov_p.shape[-1]
    dm = (mean_q - mean_p).unsqueeze(-1)
    trace = (Q_inv * cov_p).sum((-2, -1)) + (P_inv * cov_q).sum(
        (-2, -1)
    )  # tr(A B) for symmetric B
    maha = (dm.transpose(-1, -2) @ (P_inv + Q_inv) @ dm).squeeze(-1).squeeze(-1)
    return 0.5 * (trace + maha) - n


def wasserstein_distance(
    mean_p: Tensor, cov_p: Tensor, mean_q: Tensor, cov_q: Tensor, squared: bool = False
) -> Tensor:
    r"""2-Wasserstein distance between Gaussians (eq. 6).

    ``W2^2 = ||m_p - m_q||^2 + tr(S_p + S_q - 2 (S_q^1/2 S_p S_q^1/2)^1/2)``. The
    trace of the inner square root is the sum of the square roots of the (clamped)
    eigenvalues of the symmetric PSD matrix ``S_q^1/2 S_p S_q^1/2``
    (:func:`symmetric_sqrtm` for ``S_q^1/2``), so no non-symmetric square root is
    ever taken.

    Args:
        mean_p: ``... x n`` mean of ``P``.
        cov_p: ``... x n x n`` PSD covariance of ``P``.
        mean_q: ``... x n`` mean of ``Q``.
        cov_q: ``... x n x n`` PSD covariance of ``Q``.
        squared: Return ``W2^2`` (eq. 6 as written) instead of the metric ``W2``.

    Returns:
        The distances, shape: the broadcast batch shape.

    Example:
        >>> I = torch.eye(2, dtype=torch.float64)
        >>> wasserstein_distance(
        ...     torch.zeros(2, dtype=torch.float64),
        ...     I,
        ...     torch.tensor([3.0, 4.0], dtype=torch.float64),
        ...     I,
        ... )
        tensor(5., dtype=torch.float64)
    """
    _check(mean_p, cov_p, "p")
    _check(mean_q, cov_q, "q")
    root_q = symmetric_sqrtm(cov_q)
    return _wasserstein_from_root(mean_p, cov_p, mean_q, cov_q, root_q, squared)


def _wasserstein_from_root(
    mean_p: Tensor,
    cov_p: Tensor,
    mean_q: Tensor,
    cov_q: Tensor,
    root_q: Tensor,
    squared: bool,
) -> Tensor:
    inner = root_q @ cov_p @ root_q
    inner = 0.5 * (inner + inner.transpose(-1, -2))  # symmetric up to rounding
    cross = torch.linalg.eigvalsh(inner).clamp_min(0).sqrt().sum(-1)
    trace = torch.diagonal(cov_p, dim1=-2, dim2=-1).sum(-1) + torch.diagonal(
        cov_q, dim1=-2, dim2=-1
    ).sum(-1)
    sq = (mean_p - mean_q).pow(2).sum(-1) + trace - 2 * cross
    sq = sq.clamp_min(
        0
    )  # rounding can make W2^2 of (near-)identical Gaussians negative
    return sq if squared else sq.sqrt()


def divergence(
    mean_p: Tensor,
    cov_p: Tensor,
    mean_q: Tensor,
    cov_q: Tensor,
    distance: str = "wasserstein",
) -> Tensor:
    r"""Dispatch to :func:`wasserstein_distance` (``W2``) or
    :func:`jeffreys_divergence`.

    Args:
        mean_p, cov_p, mean_q, cov_q: See :func:`wasserstein_distance`.
        distance: ``"wasserstein"`` or ``"jeffreys"``.

    Returns:
        The distances, shape: the broadcast batch shape.
    """
    distance = check_distance(distance)
    if distance == "wasserstein":
        return wasserstein_distance(mean_p, cov_p, mean_q, cov_q)
    return jeffreys_divergence(mean_p, cov_p, mean_q, cov_q)


def check_distance(distance: str, argument: str = "distance") -> str:
    r"""Validate a distance name (``"wasserstein"`` or ``"jeffreys"``)."""
    if distance not in DISTANCES:
        raise ValueError(f"`{argument}` must be one of {DISTANCES}, got {distance!r}.")
    return distance


def pairwise_divergence(
    means_a: Tensor,
    covs_a: Tensor,
    means_b: Tensor | None = None,
    covs_b: Tensor | None = None,
    distance: str = "wasserstein",
    chunk_size: int = 256,
) -> Tensor:
    r"""Divergences between every Gaussian of set ``A`` and every one of set ``B``.

    Per-Gaussian work is done once: for Jeffreys the inverses (then every pair costs
    ``O(n^2)``), for Wasserstein the square roots ``S_b^1/2`` (then every pair costs
    one ``n x n`` symmetric eigenvalue problem). Wasserstein pairs are processed in
    chunks of ``chunk_size`` to bound memory.

    Args:
        means_a: ``A x n`` means.
        covs_a: ``A x n x n`` covariances.
        means_b: ``B x n`` means (default: set ``A``).
        covs_b: ``B x n x n`` covariances (default: set ``A``).
        distance: ``"wasserstein"`` (the metric ``W2``) or ``"jeffreys"``.
        chunk_size: Number of pairs per batched eigenvalue problem (Wasserstein).

    Returns:
        ``A x B`` matrix ``D[i, j] = distance(P_a[i], P_b[j])``. With ``B`` omitted the
        diagonal is exactly zero.

    Example:
        >>> means = torch.randn(5, 3, dtype=torch.float64)
        >>> covs = torch.eye(3, dtype=torch.float64).expand(5, 3, 3)
        >>> pairwise_divergence(means, covs).shape
        torch.Size([5, 5])
    """
    distance = check_distance(distance)
    same = means_b is None and covs_b is None
    if same:
        means_b, covs_b = means_a, covs_a
    elif means_b is None or covs_b is None:
        raise ValueError("Give both `means_b` and `covs_b`, or neither.")
    for name, mean, cov in (("a", means_a, covs_a), ("b", means_b, covs_b)):
        if mean.dim() != 2 or cov.dim() != 3 or cov.shape[0] != mean.shape[0]:
            raise ValueError(
                f"`means_{name}` must be k x n and `covs_{name}` k x n x n, got "
                f"{tuple(mean.shape)} and {tuple(cov.shape)}."
            )
        _check(mean, cov, name)
    if means_a.shape[-1] != means_b.shape[-1]:
        raise ValueError(
            f"Sets `a` and `b` have dimensions {means_a.shape[-1]} and "
            f"{means_b.shape[-1]}."
        )
    A, B = means_a.shape[0], means_b.shape[0]
    if distance == "jeffreys":
        inv_a = torch.cholesky_inverse(_cholesky(covs_a, "a"))
        inv_b = inv_a if same else torch.cholesky_inverse(_cholesky(covs_b, "b"))
        n = covs_a.shape[-1]
        # tr(S_b^-1 S_a) + tr(S_a^-1 S_b) as Frobenius products of flattened matrices
        trace = (
            covs_a.reshape(A, -1) @ inv_b.reshape(B, -1).T
            + inv_a.reshape(A, -1) @ covs_b.reshape(B, -1).T
        )
        # dm^T (S_a^-1 + S_b^-1) dm expanded into per-set quadratic forms
        Pa_ma = inv_a @ means_a.unsqueeze(-1)  # A x n x 1
        Pb_mb = inv_b @ means_b.unsqueeze(-1)
        Pa_mb = torch.einsum("aij,bj->abi", inv_a, means_b)  # A x B x n
        Pb_ma = torch.einsum("bij,aj->abi", inv_b, means_a)
        quad_a = (means_a.unsqueeze(-2) @ Pa_ma).reshape(A, 1)  # m_a^T P_a m_a
        quad_b = (means_b.unsqueeze(-2) @ Pb_mb).reshape(1, B)
        maha = (
            quad_a
            + (Pa_mb * means_b.unsqueeze(0)).sum(-1)
            - 2 * (Pa_mb * means_a.unsqueeze(1)).sum(-1)
            + quad_b
            + (Pb_ma * means_a.unsqueeze(1)).sum(-1)
            - 2 * (Pb_ma * means_b.unsqueeze(0)).sum(-1)
        )
        D = (0.5 * (trace + maha) - n).clamp_min(0)
    elif not covs_a.any() or not covs_b.any():
        # a point mass against a Gaussian: S_b^1/2 S_a S_b^1/2 = 0, so eq. 6 is
        # ||m_a - m_b||^2 + tr(S_a) + tr(S_b) with no square root (Euclidean k-means,
        # e.g. pretrain_clustered_prior's, then costs what plain k-means costs)
        squared = torch.cdist(
            means_a, means_b, compute_mode="donot_use_mm_for_euclid_dist"
        ).pow(2)
        trace_a = torch.diagonal(covs_a, dim1=-2, dim2=-1).sum(-1)
        trace_b = torch.diagonal(covs_b, dim1=-2, dim2=-1).sum(-1)
        D = (squared + trace_a.unsqueeze(-1) + trace_b).clamp_min(0).sqrt()
    else:
        root_b = symmetric_sqrtm(covs_b)
        if same:  # only the upper triangle, mirrored (W2 is symmetric)
            i, j = torch.triu_indices(A, A, offset=1, device=means_a.device)
        else:
            i, j = torch.meshgrid(
                torch.arange(A, device=means_a.device),
                torch.arange(B, device=means_a.device),
                indexing="ij",
            )
            i, j = i.reshape(-1), j.reshape(-1)
        values = torch.empty(i.numel(), dtype=means_a.dtype, device=means_a.device)
        for start in range(0, i.numel(), chunk_size):
            ii, jj = i[start : start + chunk_size], j[start : start + chunk_size]
            values[start : start + chunk_size] = _wasserstein_from_root(
                means_a[ii],
                covs_a[ii],
                means_b[jj],
                covs_b[jj],
                root_b[jj],
                squared=False,
            )
        D = torch.zeros(A, B, dtype=means_a.dtype, device=means_a.device)
        D[i, j] = values
        if same:
            D[j, i] = values
    if same:
        D.fill_diagonal_(0)
    return D
