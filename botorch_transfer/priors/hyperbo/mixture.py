r"""A clustered HyperBO prior: one pre-trained prior per cluster of related tasks,
mixed with the clusters' posterior probabilities given the target's data.

HyperBO (Wang et al.) pre-trains one prior on all related tasks. When the tasks fall
into groups (cm-BO's premise: Nguyen et al., *Clustering-based Meta Bayesian
Optimization*), one prior averages the groups and is too sure between them. Here the
tasks are clustered by their values on their shared inputs, or, for tasks observed
at their own inputs, by their posterior means at common index points under one prior
pre-trained on all of them (the 2-Wasserstein k-means of
:mod:`botorch_transfer.priors` with point masses, i.e. Euclidean k-means, and its
silhouette rule for the number of clusters), a prior is pre-trained on each cluster
(:func:`~botorch_transfer.priors.hyperbo.pretrain_prior`), and the target's GP prior is
the moment-matched mixture of the cluster priors:

``mu(x) = sum_c w_c mu_c(x)``,
``k(x, x') = sum_c w_c [k_c(x, x') + (mu_c(x) - mu(x)) (mu_c(x') - mu(x'))]``,
noise ``sum_c w_c sigma_c^2``, with ``w_c = p(c | target data)``
``propto pi_c N(y | mu_c(X), k_c(X, X) + sigma_c^2 I)`` and ``pi_c`` the cluster's
share of the tasks (cm-BO's mixture with its posterior-probability weights, its
components HyperBO priors instead of meta-task posteriors).
:class:`~botorch_transfer.models.PretrainedPriorGP` takes the mixture as its
``prior`` and computes the weights from its training data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from gpytorch.kernels import Kernel
from gpytorch.means import Mean
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor
from torch.nn import Module, ModuleList

from botorch_transfer.data import TaskData, validate_task_set
from botorch_transfer.priors.hyperbo.empirical import gaussian_log_likelihood
from botorch_transfer.priors.hyperbo.posterior_empirical import choose_index_points
from botorch_transfer.priors.hyperbo.pretrain import pretrain_prior
from botorch_transfer.priors.hyperbo.prior import PretrainedPrior
from botorch_transfer.priors.io import (
    PathLike,
    PriorFileError,
    check_tensors,
    describe_path,
    load_prior,
    save_prior,
)
from botorch_transfer.priors.kmeans import select_n_clusters

#: Smallest number of tasks in a cluster: the empirical prior of a cluster estimates
#: a covariance from its tasks (and leaves one out to shrink it), so a clustering
#: with a smaller cluster is refused and one prior is pre-trained on all tasks.
MIN_CLUSTER_SIZE = 5


class PretrainedPriorMixture(Module):
    r"""Pre-trained priors of clusters of related tasks, and the clusters' shares.

    Build one with :func:`pretrain_clustered_prior`; give it to
    :class:`~botorch_transfer.models.PretrainedPriorGP` as ``prior``. Evaluations are
    in the units of the pre-training data. With one component it is that prior.

    Args:
        components: The clusters' :class:`PretrainedPrior` s (same input dimension).
        cluster_sizes: The number of tasks in each cluster (the prior weights
            ``pi_c`` are their shares).
        assignments: Optional cluster index of each pre-training task (kept for
            inspection).

    Example:
        >>> mixture = PretrainedPriorMixture([prior_a, prior_b], cluster_sizes=[12, 7])
        >>> weights = mixture.posterior_weights(X, Y.squeeze(-1))  # p(cluster | X, Y)
        >>> mixture.mean(X_test, weights).shape
        torch.Size([5])
    """

    def __init__(
        self,
        components: Sequence[PretrainedPrior],
        cluster_sizes: Sequence[int] | Tensor,
        assignments: Tensor | None = None,
    ) -> None:
        super().__init__()
        components = list(components)
        if not components or not all(
            isinstance(c, PretrainedPrior) for c in components
        ):
            raise TypeError(
                "`components` must be a non-empty sequence of PretrainedPrior, got "
                f"{[type(c).__name__ for c in components]}."
            )
        dims = {c.dim for c in components}
        if len(dims) > 1:
            raise ValueError(
                f"`components` must share one input dimension, got {sorted(dims)}."
            )
        sizes = torch.as_tensor(cluster_sizes, dtype=torch.float64).reshape(-1)
        if sizes.numel() != len(components) or not (sizes > 0).all():
            raise ValueError(
                f"`cluster_sizes` must hold one positive count per component "
                f"({len(components)}), got {sizes.tolist()}."
            )
        self.components = ModuleList(components)
        # on the components' device and dtype (a mixture of priors pre-trained on a
        # GPU keeps its shares there too)
        ref = components[0].mean_module.offset
        self.register_buffer("log_prior_weights", (sizes / sizes.sum()).log().to(ref))
        self.register_buffer(
            "assignments",
            torch.empty(0, dtype=torch.long) if assignments is None else assignments,
        )
        self.eval()

    @property
    def n_clusters(self) -> int:
        return len(self.components)

    @property
    def dim(self) -> int:
        return self.components[0].dim

    # --- persistence -----------------------------------------------------------------
    def save(self, path: PathLike) -> None:
        r"""Save the mixture (every cluster's prior, the clusters' shares and the
        tasks' assignments) to ``path``.

        One ``torch.save`` file in the shared prior format
        (:mod:`botorch_transfer.priors.io`); each component is stored as
        :meth:`PretrainedPrior.save` stores it.

        Args:
            path: File path or writable binary file object.

        Example:
            >>> mixture.save("mixture.pt")
            >>> same = PretrainedPriorMixture.load("mixture.pt")
        """
        payload = {
            "components": [c.payload() for c in self.components],
            "log_prior_weights": self.log_prior_weights.detach().cpu(),
            "assignments": self.assignments.detach().cpu(),
        }
        save_prior(self, payload, path)

    @classmethod
    def load(
        cls, path: PathLike, map_location: str | torch.device | None = None
    ) -> PretrainedPriorMixture:
        r"""Load a mixture written by :meth:`save`.

        Args:
            path: File path or readable binary file object.
            map_location: Device to load onto (as in ``torch.load``).

        Returns:
            The mixture, in eval mode.

        Raises:
            ~botorch_transfer.priors.io.PriorFileError: If the file is not a readable
                saved ``PretrainedPriorMixture`` (see
                :func:`~botorch_transfer.priors.io.load_prior`), a component is not a
                valid saved :class:`PretrainedPrior`, or the shares do not match the
                components.
        """
        name = cls.__name__
        keys = ("components", "log_prior_weights", "assignments")
        blob = load_prior(path, name, keys, map_location="cpu")
        components = blob["components"]
        if not isinstance(components, list) or not components:
            raise PriorFileError(
                f"{describe_path(path)}: the 'components' of a saved {name} must be a "
                f"non-empty list of saved PretrainedPrior payloads, got "
                f"{type(components).__name__}."
            )
        check_tensors(
            blob,
            {"log_prior_weights": ("C",), "assignments": ("n",)},
            path,
            name,
            kinds={"assignments": "integer"},
        )
        if blob["log_prior_weights"].numel() != len(components):
            raise PriorFileError(
                f"{describe_path(path)}: the saved {name} has "
                f"{blob['log_prior_weights'].numel()} cluster shares for "
                f"{len(components)} components."
            )
        priors = []
        for i, component in enumerate(components):
            try:  # from_payload checks the component (a dict with its keys) itself
                priors.append(PretrainedPrior.from_payload(component, path))
            except PriorFileError as e:
                raise PriorFileError(
                    f"Component {i} of the saved {name} is not a valid saved "
                    f"PretrainedPrior: {e}"
                ) from e
        try:
            mixture = cls(priors, blob["log_prior_weights"].exp(), blob["assignments"])
        except (TypeError, ValueError) as e:
            raise PriorFileError(
                f"{describe_path(path)}: invalid components of the saved {name}: {e}"
            ) from e
        with torch.no_grad():  # the saved shares exactly, not exp then log
            mixture.log_prior_weights.copy_(blob["log_prior_weights"])
        if map_location is not None:
            mixture.to(map_location)
        return mixture.eval()

    def prior_weights(self) -> Tensor:
        r"""``pi_c``, the clusters' shares of the pre-training tasks (``C``)."""
        return self.log_prior_weights.exp()

    def log_likelihoods(
        self, X: Tensor, Y: Tensor, Yvar: Tensor | None = None
    ) -> Tensor:
        r"""``log N(y | mu_c(X), k_c(X, X) + noise)`` per cluster.

        Args:
            X: ``batch_shape x n x d`` inputs (in the prior's input space).
            Y: ``batch_shape x n`` outcomes.
            Yvar: Optional ``batch_shape x n`` known noise variances (default: each
                cluster prior's own noise).

        Returns:
            ``batch_shape x C`` log marginal likelihoods (0 for ``n = 0``).

        Raises:
            ValueError: If ``Y`` (or ``Yvar``) is not shaped like ``X`` without its
                last dimension (e.g. an ``n x 1`` ``train_Y``, which would
                broadcast into ``n`` batches).
        """
        for name, value in (("Y", Y), ("Yvar", Yvar)):
            if value is not None and value.shape != X.shape[:-1]:
                raise ValueError(
                    f"`{name}` must have shape {tuple(X.shape[:-1])} (`X`'s without "
                    f"its last dimension; squeeze an n x 1 `train_Y`), got "
                    f"{tuple(value.shape)}."
                )
        values = []
        eye = torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
        for component in self.components:
            K = component.covariance(X)
            K = K + (component.noise * eye if Yvar is None else torch.diag_embed(Yvar))
            values.append(gaussian_log_likelihood(Y, component.mean(X), K))
        return torch.stack(values, dim=-1)

    def posterior_weights(
        self, X: Tensor, Y: Tensor, Yvar: Tensor | None = None
    ) -> Tensor:
        r"""``w_c = p(c | X, Y)``, proportional to ``pi_c`` times the cluster prior's
        marginal likelihood of the data (see :meth:`log_likelihoods`); ``pi`` for
        ``n = 0``. Returns ``batch_shape x C``."""
        logits = self.log_prior_weights.to(X) + self.log_likelihoods(X, Y, Yvar)
        return torch.softmax(logits, dim=-1)

    def _component_means(self, X: Tensor) -> Tensor:
        return torch.stack([c.mean(X) for c in self.components], dim=-1)

    def mean(self, X: Tensor, weights: Tensor) -> Tensor:
        r"""``sum_c w_c mu_c(X)`` (``batch x n``); ``weights`` is ``... x C``."""
        return (self._component_means(X) * weights.unsqueeze(-2)).sum(-1)

    def covariance(
        self, X1: Tensor, X2: Tensor, weights: Tensor, diag: bool = False
    ) -> Tensor:
        r"""The mixture's covariance ``k(X1, X2)`` (module docstring); with
        ``diag=True`` its diagonal for ``X1 = X2``."""
        if self.n_clusters == 1:  # the prior itself (w = 1): no mean terms to add
            (component,) = self.components
            if diag:
                return component.covar_module(X1, X1, diag=True)
            return component.covariance(X1, X2)
        w = weights.unsqueeze(-2)  # ... x 1 x C
        m1 = self._component_means(X1)
        d1 = m1 - (m1 * w).sum(-1, keepdim=True)  # mu_c - mu: ... x n x C
        if diag:
            K = torch.stack(
                [c.covar_module(X1, X1, diag=True) for c in self.components], -1
            )
            return (w * (K + d1.pow(2))).sum(-1)
        m2 = m1 if X2 is X1 else self._component_means(X2)
        d2 = d1 if X2 is X1 else m2 - (m2 * w).sum(-1, keepdim=True)
        K = sum(
            weights[..., c, None, None] * component.covariance(X1, X2)
            for c, component in enumerate(self.components)
        )
        return K + (d1 * w) @ d2.transpose(-1, -2)

    def noise(self, weights: Tensor) -> Tensor:
        r"""``sum_c w_c sigma_c^2`` (``weights.shape[:-1]``)."""
        noises = torch.stack([c.noise for c in self.components]).to(weights)
        return (weights * noises).sum(-1)

    def outcome_scale(self, weights: Tensor) -> Tensor:
        r"""The mixture's outcome scale ``sqrt(sum_c w_c s_c^2)`` from the clusters'
        pre-training scales (``weights.shape[:-1]``)."""
        scales = torch.stack([c.mean_module.scale for c in self.components])
        return (weights * scales.to(weights).pow(2)).sum(-1).sqrt()


class MixturePriorMean(Mean):
    r"""The mixture's mean at fixed cluster weights (``batch_shape x C``)."""

    def __init__(self, mixture: PretrainedPriorMixture, weights: Tensor) -> None:
        super().__init__()
        self.mixture = mixture
        self.register_buffer("weights", weights)

    @property
    def scale(self) -> Tensor:
        r"""The outcome scale at the current weights (PI's margin uses it)."""
        return self.mixture.outcome_scale(self.weights)

    def forward(self, x: Tensor) -> Tensor:
        return self.mixture.mean(x, self.weights)


class MixturePriorKernel(Kernel):
    r"""The mixture's moment-matched covariance at fixed cluster weights."""

    has_lengthscale = False

    def __init__(self, mixture: PretrainedPriorMixture, weights: Tensor) -> None:
        super().__init__()
        self.mixture = mixture
        self.register_buffer("weights", weights)

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, **params: Any):
        return self.mixture.covariance(x1, x2, self.weights, diag=diag)


def pretrain_clustered_prior(
    tasks: Sequence[TaskData] | Mapping[str, TaskData],
    n_clusters: int | None = None,
    max_clusters: int = 6,
    min_cluster_size: int = MIN_CLUSTER_SIZE,
    seed: int = 0,
    **pretrain_options: Any,
) -> PretrainedPriorMixture:
    r"""Cluster related tasks and pre-train one prior per cluster.

    Each task is a vector of outcomes at common inputs: its observations where the
    tasks share their inputs; otherwise its posterior mean at the index points of
    :func:`~botorch_transfer.priors.hyperbo.posterior_empirical.choose_index_points`
    (inputs the tasks observed) under ``pretrain_prior(tasks)``, one prior
    pre-trained on all of them (which is also the mixture's only component when
    ``C = 1``). The vectors are standardized over all tasks; k-means on them
    (:func:`~botorch_transfer.priors.select_n_clusters` with point masses: the
    2-Wasserstein distance is then the Euclidean one) picks ``C`` by the mean
    silhouette, or ``C = 1`` below a silhouette of 0.5. A clustering with a cluster
    of fewer than ``min_cluster_size`` tasks falls back to ``C = 1``.

    Args:
        tasks: Related tasks (a list, or a dict name -> TaskData).
        n_clusters: The number of clusters; default ``None``: chosen as above among
            ``1..max_clusters``.
        max_clusters: The largest ``C`` tried when ``n_clusters`` is ``None``.
        min_cluster_size: See above.
        seed: Seed of the index points, of k-means and of ``pretrain_prior``.
        pretrain_options: Passed to :func:`pretrain_prior` for every cluster
            (default ``bounds``: the range of all tasks' inputs, for every
            component).

    Returns:
        A :class:`PretrainedPriorMixture` (one component when ``C = 1``).

    Example:
        >>> mixture = pretrain_clustered_prior(related_tasks)
        >>> model = PretrainedPriorGP(train_X, train_Y, prior=mixture)
    """
    if isinstance(tasks, Mapping):
        tasks = list(tasks.values())
    tasks = validate_task_set(tasks, "tasks")
    if n_clusters is not None and not 1 <= n_clusters <= len(tasks):
        raise ValueError(
            f"`n_clusters` must be between 1 and the number of tasks ({len(tasks)}), "
            f"got {n_clusters}."
        )
    pretrain_options.setdefault("progress", False)
    X0 = tasks[0].X
    pooled: PretrainedPrior | None = None
    if all(t.X.shape == X0.shape and torch.equal(t.X, X0) for t in tasks):
        values = torch.cat([t.Y.detach() for t in tasks], dim=-1).T
    else:
        pooled = pretrain_prior(tasks, seed=seed, **pretrain_options)
        if n_clusters == 1:
            return PretrainedPriorMixture([pooled], [len(tasks)])
        # every component on the pooled prior's unit cube (one cluster's own
        # range of inputs would be narrower than the target's search space)
        lower, range_ = pooled.features.lower, pooled.features.range
        if "bounds" not in pretrain_options and bool((range_ > 0).all()):
            pretrain_options["bounds"] = torch.stack([lower, lower + range_])
        index_points = choose_index_points(tasks, seed=seed)
        values = torch.stack(
            [posterior_mean(pooled, t.X, t.Y, index_points, t.Yvar) for t in tasks]
        )
    values = values.to(torch.float64)
    values = (values - values.mean()) / values.std().clamp_min(1e-12)
    point_masses = values.new_zeros(len(tasks), values.shape[-1], values.shape[-1])
    candidates = [n_clusters] if n_clusters is not None else range(1, max_clusters + 1)
    selection = select_n_clusters(
        values.cpu(), point_masses.cpu(), candidates=candidates, seed=seed
    )
    result = selection.results[selection.candidates.index(selection.n_clusters)]
    assignments = result.assignments
    sizes = torch.bincount(assignments, minlength=selection.n_clusters)
    if n_clusters is None and int(sizes.min()) < min_cluster_size:
        assignments, sizes = torch.zeros_like(assignments), sizes.sum().reshape(1)
    if sizes.numel() == 1 and pooled is not None:
        return PretrainedPriorMixture([pooled], sizes, assignments)
    components = [
        pretrain_prior(
            [t for t, a in zip(tasks, assignments.tolist()) if a == c],
            seed=seed,
            **pretrain_options,
        )
        for c in range(sizes.numel())
    ]
    return PretrainedPriorMixture(components, sizes, assignments)


def posterior_mean(
    prior: PretrainedPrior, X: Tensor, Y: Tensor, at: Tensor, Yvar: Tensor | None = None
) -> Tensor:
    r"""The mean at ``at`` of ``prior``'s GP conditioned on one task's observations:
    ``mu(at) + k(at, X) (k(X, X) + D)^{-1} (y - mu(X))``, ``D`` the prior's noise
    variance or the task's known ones.

    Args:
        prior: A pre-trained prior (mean, kernel and noise in the user's units).
        X: ``n x d`` inputs of the task.
        Y: ``n x 1`` outcomes of the task.
        at: ``m x d`` inputs where the mean is wanted.
        Yvar: Optional ``n x 1`` known noise variances of ``Y``.

    Returns:
        The ``m`` posterior means.
    """
    with torch.no_grad():
        if Yvar is None:
            K = prior.covariance(X, observation_noise=True)
        else:
            K = prior.covariance(X) + torch.diag_embed(Yvar.squeeze(-1))
        L = psd_safe_cholesky(K)
        residual = (Y.squeeze(-1) - prior.mean(X)).unsqueeze(-1)
        weights = torch.cholesky_solve(residual, L).squeeze(-1)
        return prior.mean(at) + prior.covariance(at, X) @ weights
