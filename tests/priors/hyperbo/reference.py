r"""Plain numpy float64 references for the HyperBO prior, written from the paper
(Wang et al., Sec. 7.2 model; eqs. 4, 6, 7, 14, 17, 18) and the prior's weights."""

from __future__ import annotations

import numpy as np
import scipy.linalg


def _np(t):
    return t.detach().cpu().double().numpy()


def prior_parts(prior):
    r"""The prior's parameters as numpy arrays (read from its modules)."""
    s = {k: _np(v) for k, v in prior.state_dict().items()}
    base = prior.covar_module.base_kernel
    parts = {
        "lower": s["features.lower"],
        "range": s["features.range"],
        "offset": float(s["mean_module.offset"]),
        "scale": float(s["mean_module.scale"]),
        "outputscale": float(_np(base.outputscale)),
        "lengthscale": _np(base.base_kernel.lengthscale).reshape(-1),
        "noise": float(_np(prior.noise)),
        "layers": [],
        "mean": prior.config["mean"],
        "kernel": prior.config["kernel"],
    }
    if prior.features.mlp is not None:
        linears = [m for m in prior.features.mlp if hasattr(m, "weight")]
        parts["layers"] = [(_np(m.weight), _np(m.bias)) for m in linears]
    if parts["mean"] == "mlp":
        parts["head"] = (
            _np(prior.mean_module.head.weight),
            _np(prior.mean_module.head.bias),
        )
    elif parts["mean"] == "constant":
        parts["constant"] = float(_np(prior.mean_module.head.constant))
    elif parts["mean"] == "empirical":
        parts.update(empirical_parts(prior))
    return parts


def features(p, X):
    Z = (X - p["lower"]) / p["range"]
    H = Z
    for W, b in p["layers"]:
        H = np.tanh(H @ W.T + b)
    return Z, H


def mean(p, X):
    Z, H = features(p, X)
    if p["mean"] == "mlp":
        W, b = p["head"]
        m = (H @ W.T + b)[:, 0]
    elif p["mean"] == "constant":
        m = np.full(X.shape[0], p["constant"])
    elif p["mean"] == "empirical":
        if "S" in p:  # from the statistics: c + k(x, V) (K + s^2 I)^{-1} (mu_hat - c)
            m = p["c"] + _interpolation_weights(p, Z) @ (p["mu_hat"] - p["c"])
        else:
            k = matern52(Z, p["V"], p["lengthscale"], p["outputscale"])
            m = p["c"] + k @ p["alpha"]
    else:
        m = np.zeros(X.shape[0])
    return p["offset"] + p["scale"] * m


def kernel(p, X1, X2):
    Z1, H1 = features(p, X1)
    Z2, H2 = features(p, X2)
    if p["kernel"] == "empirical":
        ls, os_ = p["lengthscale"], p["outputscale"]
        K = matern52(Z1, Z2, ls, os_)
        if "S" in p:  # + k(x, V) Kn^{-1} (S - Kn) Kn^{-1} k(V, x'), Kn = K + s^2 I
            W1, W2 = _interpolation_weights(p, Z1), _interpolation_weights(p, Z2)
            K = K + W1 @ (p["S"] - p["Kn"]) @ W2.T
        else:
            k1, k2 = matern52(Z1, p["V"], ls, os_), matern52(Z2, p["V"], ls, os_)
            K = K + k1 @ p["B"] @ k2.T
        return p["scale"] ** 2 * K
    A, B = (H1, H2) if p["kernel"] == "matern52_on_features" else (Z1, Z2)
    diff = (A[:, None, :] - B[None, :, :]) / p["lengthscale"]
    r = np.sqrt((diff**2).sum(-1))
    matern = (1 + np.sqrt(5) * r + 5.0 / 3.0 * r**2) * np.exp(-np.sqrt(5) * r)
    return p["scale"] ** 2 * p["outputscale"] * matern


def task_nll(p, X, y, yvar=None):
    r"""Eq. 14 (negated): one task's negative log marginal likelihood."""
    Sigma = kernel(p, X, X) + p["noise"] * np.eye(len(y))
    if yvar is not None:
        Sigma = Sigma + np.diag(yvar)
    r = y - mean(p, X)
    sign, logdet = np.linalg.slogdet(Sigma)
    assert sign > 0
    return 0.5 * (r @ np.linalg.solve(Sigma, r) + logdet + len(y) * np.log(2 * np.pi))


def gaussian_kl(m0, S0, m1, S1):
    r"""Eq. 7: KL(N(m0, S0) || N(m1, S1)) for non-degenerate Gaussians."""
    k = len(m0)
    S1_inv = np.linalg.inv(S1)
    d = m1 - m0
    return 0.5 * (
        np.trace(S1_inv @ S0)
        + d @ S1_inv @ d
        + np.linalg.slogdet(S1)[1]
        - np.linalg.slogdet(S0)[1]
        - k
    )


def ekl(p, X, Y):
    r"""Eqs. 4 and 6: EKL of a matching-input group (``Y`` is ``M x N``).

    Rank-deficient empirical covariances are handled by restricting both Gaussians to
    an orthonormal basis of the empirical covariance's range (``scipy.linalg.orth``
    of the centered data) and using eq. 7 there: by the invariance argument below
    eq. 6 this equals eq. 6 for any valid factor ``A``.
    """
    N = Y.shape[1]
    mu_t = Y.mean(1)
    C = Y - mu_t[:, None]
    S_t = C @ C.T / N
    U = scipy.linalg.orth(C)
    mu = mean(p, X)
    S = kernel(p, X, X) + p["noise"] * np.eye(len(mu))
    return gaussian_kl(U.T @ mu_t, U.T @ S_t @ U, U.T @ mu, U.T @ S @ U)


def posterior(p, X_train, y, X_test, yvar=None):
    r"""Eqs. 17-18: the GP posterior mean and covariance with the prior ``p``."""
    noise = p["noise"] * np.ones(len(y)) if yvar is None else yvar
    K = kernel(p, X_train, X_train) + np.diag(noise)
    Ks = kernel(p, X_test, X_train)
    Kss = kernel(p, X_test, X_test)
    m = mean(p, X_test) + Ks @ np.linalg.solve(K, y - mean(p, X_train))
    S = Kss - Ks @ np.linalg.solve(K, Ks.T)
    return m, S


# --- the empirical prior (HyperBO eq. 4, shrunk and kernel-interpolated) -------------


def matern52(Z1, Z2, lengthscale, outputscale):
    diff = (Z1[:, None, :] - Z2[None, :, :]) / lengthscale
    r = np.sqrt((diff**2).sum(-1))
    return (
        outputscale * (1 + np.sqrt(5) * r + 5.0 / 3.0 * r**2) * np.exp(-np.sqrt(5) * r)
    )


def empirical_statistics(Y, yvar, V, lengthscale, outputscale, noise, lam):
    r"""The empirical prior's statistics from the meta-tasks' values ``Y`` (``M x N``,
    standardized) at the unit-cube index points ``V``: ``mu_hat``,
    ``S = (1 - lam) Sigma_hat + lam (K + s^2 I)`` with the unbiased sample covariance
    ``Sigma_hat`` (eq. 4, shrunk), and ``Kn = K + s^2 I``."""
    N = Y.shape[1]
    Kn = matern52(V, V, lengthscale, outputscale) + np.diag(noise + yvar)
    mu_hat = Y.mean(1)
    C = Y - mu_hat[:, None]
    S = (1 - lam) * (C @ C.T / (N - 1)) + lam * Kn
    return {"V": V, "mu_hat": mu_hat, "S": S, "Kn": Kn}


def _interpolation_weights(p, Z):
    r"""``k(Z, V) (K + s^2 I)^{-1}``, solved for before it meets ``mu_hat`` or ``S``:
    through ``alpha`` and ``B`` (``B`` holds ``(K + s^2 I)^{-2}``) the same formula
    loses ~1e-8 in float64 when ``K + s^2 I`` at ``V`` has a condition number of 1e6
    (noiseless meta-tasks), the weights stay accurate to ~1e-13."""
    k = matern52(Z, p["V"], p["lengthscale"], p["outputscale"])
    return np.linalg.solve(p["Kn"], k.T).T


def empirical_construction(Y, yvar, V, lengthscale, outputscale, c, noise, lam):
    r"""``alpha`` and ``B`` of the empirical prior from its statistics
    (:func:`empirical_statistics`): ``alpha = (K + s^2 I)^{-1} (mu_hat - c)``,
    ``B = (K + s^2 I)^{-1} (S - K - s^2 I) (K + s^2 I)^{-1}``."""
    s = empirical_statistics(Y, yvar, V, lengthscale, outputscale, noise, lam)
    Kn_inv = np.linalg.inv(s["Kn"])
    return Kn_inv @ (s["mu_hat"] - c), Kn_inv @ (s["S"] - s["Kn"]) @ Kn_inv


def empirical_loo_nll(Y, yvar, V, lengthscale, outputscale, c, noise, lam):
    r"""The mean leave-one-task-out NLL per point: task ``i``'s values under the
    empirical prior built from the other tasks, plus the noise."""
    M, N = Y.shape
    K = matern52(V, V, lengthscale, outputscale)
    total = 0.0
    for i in range(N):
        others = np.delete(Y, i, axis=1)
        alpha, B = empirical_construction(
            others, yvar, V, lengthscale, outputscale, c, noise, lam
        )
        m = c + K @ alpha
        Sigma = K + K @ B @ K + np.diag(noise + yvar)
        r = Y[:, i] - m
        logdet = np.linalg.slogdet(Sigma)[1]
        total += 0.5 * (r @ np.linalg.solve(Sigma, r) + logdet + M * np.log(2 * np.pi))
    return total / N / M


def empirical_parts(prior):
    r"""The evaluation parts of an empirical prior in the formula's own coordinates:
    ``alpha = (K + s^2 I)^{-1} (mu_hat - c)`` and ``B``, un-whitened from the buffers
    (which hold ``L^{-1} (mu_hat - c)`` and ``L^{-1} S L^{-T} - I``)."""
    e = prior.empirical
    L = _np(e.index_cholesky)
    alpha = scipy.linalg.solve_triangular(L, _np(e.alpha), lower=True, trans="T")
    half = scipy.linalg.solve_triangular(L, _np(e.correction), lower=True, trans="T")
    B = scipy.linalg.solve_triangular(L, half.T, lower=True, trans="T").T
    return {
        "V": _np(e.index_points),
        "alpha": alpha,
        "B": B,
        "c": float(_np(e.constant)),
    }
