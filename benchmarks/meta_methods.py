r"""The method classes of the leave-tasks-out (``"meta"``) protocol (registered
by name in :mod:`~benchmarks.meta_registry`): each queries points of the split's
candidate pool (``MetaData.pool``)."""

from __future__ import annotations

import hashlib
import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from botorch.acquisition import (
    AcquisitionFunction,
    ProbabilityOfImprovement,
    UpperConfidenceBound,
)
from botorch.fit import fit_gpytorch_mll
from botorch.models import MultiTaskGP, SingleTaskGP
from botorch.models.transforms import Standardize
from botorch.models.utils.gpytorch_modules import (
    get_gaussian_likelihood_with_lognormal_prior,
)
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor

from benchmarks.methods import META, MetaData, Method
from benchmarks.transfer_methods import with_task_column
from botorch_transfer import (
    ClusterMetaPrior,
    ClusterMetaPriorGP,
    PretrainedPrior,
    PretrainedPriorGP,
    PretrainedPriorMixture,
    RankWeightedPriorGP,
    TaskData,
    build_cluster_prior,
    hyperbo_probability_of_improvement,
    pretrain_clustered_prior,
    pretrain_prior,
)
from botorch_transfer.models.frozen_source import source_posterior_from_model
from botorch_transfer.models.meta_task_mixture import (
    MetaTaskMixtureGP,
    fit_default_meta_task_gps,
)
from botorch_transfer.models.rgpe import RGPE
from botorch_transfer.models.source_posterior import SourcePosterior
from botorch_transfer.priors import MetaTaskPosteriors, meta_task_posteriors

if TYPE_CHECKING:
    from benchmarks.meta import MetaProblem

#: cm-BO GP-UCB: ``mu + xi sigma`` with ``xi = 3`` (Sec. 4.1, following HyperBO);
#: BoTorch's ``beta`` multiplies the variance, so ``beta = xi^2``.
CMBO_UCB_XI = 3.0
#: Known target noise variance floor of the cm-BO GP (user units). A learned noise
#: level soaks up the misfit of the prior and the weights then barely move, so
#: the GP gets ``max(observation_noise, CMBO_NOISE_FLOOR)`` as known noise.
CMBO_NOISE_FLOOR = 1e-6
#: UCB weight of ``stbo-ucb``: ``1.8^2`` as HyperBO's STBOH.
STBO_UCB_BETA = 1.8**2
#: UCB weight of the PretrainedPriorGP loops ``hyperbo``, ``hyperbo-skip`` and their
#: variants: stbo-ucb's.
README_UCB_BETA = STBO_UCB_BETA
#: UCB weight of the README's PretrainedPriorGP loop
#: (``hyperbo-clustered-ucb1-skip``): chosen on the meta track among 0.25, 1, 3.24
#: and 9 (docs/decisions.md, "The README's PretrainedPriorGP loop").
PRETRAINED_PRIOR_UCB_BETA = 1.0
#: UCB weight of the README's ClusterMetaPriorGP loop (``cmbo``).
README_CMBO_BETA = 3.0


def queried_on_pool(pool: Tensor, queried: Tensor | None) -> Tensor:
    r"""Which rows of ``pool`` (``n x d``) are among the ``queried`` points
    (``m x d``, or ``None`` for none): an ``n`` boolean mask.

    Raises:
        RuntimeError: If every pool point was queried.
    """
    if queried is None:
        taken = torch.zeros(pool.shape[0], dtype=torch.bool, device=pool.device)
    else:
        taken = (pool.unsqueeze(-2) == queried).all(-1).any(-1)
    if taken.all():
        raise RuntimeError(
            "Every pool point was queried; increase `pool_size` or lower `iterations`."
        )
    return taken


def maximize_on_pool(
    acqf: AcquisitionFunction, pool: Tensor, queried: Tensor | None = None
) -> Tensor:
    r"""Maximize ``acqf`` over the rows of ``pool`` (batches of 2048).

    Args:
        acqf: The acquisition function.
        pool: ``n x d`` candidates.
        queried: Optional ``m x d`` points already evaluated: the best row among the
            others. The acquisition is still evaluated on the whole pool, the same
            candidates every iteration, which the cm-BO prior's memo of its
            meta-task posteriors at the candidates reuses.

    Returns:
        The ``1 x d`` best row.

    Raises:
        RuntimeError: If every pool point was queried.
    """
    taken = queried_on_pool(pool, queried)
    with torch.no_grad():  # as BoTorch's optimize_acqf_discrete (it has no mask)
        values = torch.cat([acqf(c.unsqueeze(-2)) for c in pool.split(2048)])
    values = values.masked_fill(taken, -math.inf)
    return pool[values.argmax()].unsqueeze(0)


def _single_task_gp(X: Tensor, Y: Tensor) -> SingleTaskGP:
    model = SingleTaskGP(X, Y)  # BoTorch defaults: Standardize, dim-scaled priors
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


class SingleTaskBO(Method):
    r"""A single-task GP with BoTorch's default priors, re-fitted every iteration.

    Args:
        acquisition: ``"pi"`` (HyperBO's PI, threshold ``max(y) + 0.1`` in
            standardized units) or ``"ucb"``.
        skip_queried: Search only the pool points not yet queried.
        beta: UCB weight (default ``STBO_UCB_BETA``).
    """

    protocols = (META,)

    def __init__(
        self,
        acquisition: str = "pi",
        skip_queried: bool = False,
        beta: float = STBO_UCB_BETA,
    ) -> None:
        if acquisition not in ("pi", "ucb"):
            raise ValueError(
                f"`acquisition` must be 'pi' or 'ucb', got {acquisition!r}."
            )
        self.acquisition = acquisition
        self.skip_queried = skip_queried
        self.beta = beta

    def setup(self, problem: MetaProblem, data: MetaData) -> Tensor:
        return data.pool

    def propose(self, state: Tensor, X: Tensor, Y: Tensor) -> Tensor:
        model = _single_task_gp(X, Y)
        queried = X if self.skip_queried else None
        if self.acquisition == "ucb":
            acqf = UpperConfidenceBound(model, beta=self.beta)
            return maximize_on_pool(acqf, state, queried=queried)
        if Y.shape[0] > 1:
            scale = Y.std().clamp_min(1e-6)
        else:
            scale = torch.ones((), dtype=Y.dtype, device=Y.device)
        acqf = ProbabilityOfImprovement(model, best_f=Y.max() + 0.1 * scale)
        return maximize_on_pool(acqf, state, queried=queried)


@dataclass
class HyperBOState:
    r"""A split's pre-trained prior and candidate pool."""

    prior: PretrainedPrior | PretrainedPriorMixture
    pool: Tensor


class HyperBO(Method):
    r"""HyperBO: :class:`~botorch_transfer.PretrainedPriorGP` on a prior pre-trained
    once per split, then frozen.

    Args:
        objective: ``"nll"`` (Adam, lr 5e-3, ``problem.pretrain_steps`` steps),
            ``"ekl"`` (L-BFGS), or ``None``: ``pretrain_prior``'s default (the
            empirical prior on the meta-tasks' shared inputs), as the README loop.
        acquisition: ``"pi"`` (the paper's: PI with threshold ``max(y) + 0.1`` in the
            prior's units) or ``"ucb"`` (UCB with ``beta``; it also runs from zero
            target points).
        fine_tune: Fit the prior's copy to the target's data every iteration
            (``PretrainedPriorGP(fine_tune=True)`` and ``fit_gpytorch_mll``).
        skip_queried: Search only the pool points not yet queried.
        prior_scale_dof: ``PretrainedPriorGP``'s ``prior_scale_dof`` (``None``:
            the pre-trained scale, HyperBO).
        clustered: Pre-train one prior per cluster of meta-tasks
            (``pretrain_clustered_prior``, the default objective) and mix them
            with the clusters' posterior probabilities.
        beta: UCB's weight (default ``README_UCB_BETA``, stbo-ucb's).
        ranked: Weigh the prior against a target-only GP by leave-one-out ranking
            (:class:`~botorch_transfer.RankWeightedPriorGP`, fitted every
            iteration; the prior alone before the first target point).
    """

    protocols = (META,)

    def __init__(
        self,
        objective: str | None,
        acquisition: str = "pi",
        fine_tune: bool = False,
        skip_queried: bool = False,
        prior_scale_dof: float | None = None,
        clustered: bool = False,
        beta: float = README_UCB_BETA,
        ranked: bool = False,
    ) -> None:
        if clustered and objective is not None:
            raise ValueError("`clustered` pre-trains the default objective only.")
        if ranked and (fine_tune or prior_scale_dof is not None):
            raise ValueError(
                "`ranked` weighs the frozen prior: no `fine_tune` or `prior_scale_dof`."
            )
        self.ranked = ranked
        self.clustered = clustered
        self.objective = objective
        self.acquisition = acquisition
        self.fine_tune = fine_tune
        self.skip_queried = skip_queried
        self.prior_scale_dof = prior_scale_dof
        self.beta = beta

    def setup(self, problem: MetaProblem, data: MetaData) -> HyperBOState:
        kwargs: dict[str, Any] = {"seed": data.seed, "progress": False}
        if self.objective is not None:
            kwargs["objective"] = self.objective
        if self.objective == "nll":
            kwargs.update(num_steps=problem.pretrain_steps, lr=5e-3)
        if self.clustered:
            prior = pretrain_clustered_prior(data.history, **kwargs)
        else:
            prior = pretrain_prior(data.history, **kwargs)
        return HyperBOState(prior, data.pool)

    def propose(self, state: HyperBOState, X: Tensor, Y: Tensor) -> Tensor:
        if self.ranked and X.shape[-2] > 0:
            model = RankWeightedPriorGP(X, Y, prior=state.prior)
        else:
            model = PretrainedPriorGP(
                X,
                Y,
                prior=state.prior,
                fine_tune=self.fine_tune,
                prior_scale_dof=self.prior_scale_dof,
            )
        if self.fine_tune or isinstance(model, RankWeightedPriorGP):
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        if self.acquisition == "ucb":
            acqf = UpperConfidenceBound(model, beta=self.beta)
        else:  # the default margin, 0.1 in the prior's standardized units
            acqf = hyperbo_probability_of_improvement(model)
        queried = X if self.skip_queried else None
        return maximize_on_pool(acqf, state.pool, queried=queried)


@dataclass
class RGPEState:
    r"""A split's frozen base posteriors (one per meta-task) and candidate pool."""

    sources: list[SourcePosterior]
    pool: Tensor


class RGPEMeta(Method):
    r"""RGPE with every meta-training task as one base model: a ``SingleTaskGP`` with
    BoTorch's defaults fitted once per task and split (frozen), the target GP with
    standardized outcomes fitted every iteration, UCB with ``stbo-ucb``'s weight.

    Args:
        skip_queried: Search only the pool points not yet queried. Without it the
            ensemble can propose a point it has observed again and again: the base
            models' variance there does not shrink with the target's observation.
    """

    protocols = (META,)

    def __init__(self, skip_queried: bool = False) -> None:
        self.skip_queried = skip_queried

    def setup(self, problem: MetaProblem, data: MetaData) -> RGPEState:
        sources = [
            source_posterior_from_model(_single_task_gp(task.X, task.Y))
            for task in data.history
        ]
        return RGPEState(sources, data.pool)

    def propose(self, state: RGPEState, X: Tensor, Y: Tensor) -> Tensor:
        model = RGPE(X, Y, outcome_transform=Standardize(m=1), source=state.sources)
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        acqf = UpperConfidenceBound(model, beta=STBO_UCB_BETA)
        queried = X if self.skip_queried else None
        return maximize_on_pool(acqf, state.pool, queried=queried)


@dataclass
class MetaTaskMixtureState:
    r"""A split's fitted meta-task GPs and candidate pool."""

    meta_tasks: MetaTaskPosteriors
    pool: Tensor


class MetaTaskMixtureMeta(Method):
    r""":class:`~botorch_transfer.MetaTaskMixtureGP`: the meta-task GPs (BoTorch's
    default ``SingleTaskGP``) fitted once per split on the unit cube, the model
    rebuilt from the target's data every iteration, UCB with the README
    ``PretrainedPriorGP`` loop's weight on the pool points not yet queried.

    Args:
        options: Keyword arguments of ``MetaTaskMixtureGP`` (default: none, its
            defaults).
    """

    protocols = (META,)

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = dict(options or {})

    def setup(self, problem: MetaProblem, data: MetaData) -> MetaTaskMixtureState:
        bounds = torch.stack([torch.zeros(problem.dim), torch.ones(problem.dim)])
        bounds = bounds.to(data.pool)
        return MetaTaskMixtureState(
            fit_default_meta_task_gps(data.history, bounds), data.pool
        )

    def propose(self, state: MetaTaskMixtureState, X: Tensor, Y: Tensor) -> Tensor:
        model = MetaTaskMixtureGP(X, Y, meta_tasks=state.meta_tasks, **self.options)
        acqf = UpperConfidenceBound(model, beta=PRETRAINED_PRIOR_UCB_BETA)
        return maximize_on_pool(acqf, state.pool, queried=X)


def normalized_regrets(values: Tensor) -> Tensor:
    r"""``(max - f) / (max - min)`` per row of ``values`` (``tasks x n``): each
    task's regrets on ``[0, 1]``, so that every task counts alike."""
    low = values.min(-1, keepdim=True).values
    high = values.max(-1, keepdim=True).values
    return (high - values) / (high - low).clamp_min(1e-12)


def greedy_portfolio(regrets: Tensor) -> Tensor:
    r"""An order of candidates by the greedy portfolio construction of Feurer et al.
    (2015) / Wistuba et al. (2015): each step takes the candidate that most lowers
    the mean over tasks of the best regret among the candidates taken so far; once
    no candidate lowers it, the rest follow by their mean regret.

    Args:
        regrets: ``tasks x n`` regrets of the ``n`` candidates on each task (e.g.
            normalized to ``[0, 1]`` per task, so that every task counts alike).

    Returns:
        A permutation of ``range(n)`` (``long``), the portfolio first.

    Example:
        >>> regrets = torch.tensor([[0.0, 0.1, 0.5], [0.5, 0.45, 0.1]])
        >>> greedy_portfolio(regrets).tolist()  # the consensus order is [0, 1, 2]
        [0, 2, 1]
    """
    if regrets.dim() != 2 or regrets.shape[0] == 0 or regrets.shape[1] == 0:
        raise ValueError(
            "`regrets` must be a non-empty tasks x n matrix, got shape "
            f"{tuple(regrets.shape)}."
        )
    n = regrets.shape[1]
    taken = torch.zeros(n, dtype=torch.bool, device=regrets.device)
    best = regrets.max(-1).values  # as good as nothing: every candidate helps
    chosen = []
    for _ in range(n):
        score = torch.minimum(best.unsqueeze(-1), regrets).mean(0)
        score = score.masked_fill(taken, math.inf)
        i = int(score.argmin())
        if not score[i] < best.mean():
            break
        chosen.append(i)
        taken[i] = True
        best = torch.minimum(best, regrets[:, i])
    rest = (~taken).nonzero().squeeze(-1)
    rest = rest[regrets.mean(0)[rest].argsort(stable=True)]
    chosen = torch.tensor(chosen, dtype=torch.long, device=regrets.device)
    return torch.cat([chosen, rest])


@dataclass
class PortfolioState:
    r"""A split's candidate pool and the order in which the portfolio queries it."""

    pool: Tensor
    order: Tensor


class GreedyPortfolioMeta(Method):
    r"""A greedy portfolio of the meta-training tasks (Feurer et al. 2015), queried in
    order, the classic zero-shot warm start of hyperparameter optimization.

    Each meta-training task's values on the pool are predicted from its data by
    ``pretrain_prior``'s default prior conditioned on that task
    (:class:`~botorch_transfer.PretrainedPriorGP`'s posterior mean), min-max
    normalized per task into regrets, and ordered by :func:`greedy_portfolio`.
    Every query is the first pool point of that order not yet queried: the target's
    observations are not used.
    """

    protocols = (META,)

    def setup(self, problem: MetaProblem, data: MetaData) -> PortfolioState:
        prior = pretrain_prior(data.history, seed=data.seed, progress=False)
        with torch.no_grad():
            predicted = torch.stack(
                [
                    PretrainedPriorGP(task.X, task.Y, prior=prior)
                    .posterior(data.pool)
                    .mean.squeeze(-1)
                    for task in data.history
                ]
            )
        return PortfolioState(
            data.pool, greedy_portfolio(normalized_regrets(predicted))
        )

    def propose(self, state: PortfolioState, X: Tensor, Y: Tensor) -> Tensor:
        ordered = state.pool[state.order]
        return ordered[(~queried_on_pool(ordered, X)).nonzero()[0]]


#: Points per meta-training task that ``mtgp-meta`` gives its ``MultiTaskGP`` (a
#: fixed random subset per split): an exact ICM GP on all of them (LCBench: 27
#: tasks x 100 points) costs ``O((M n)^3)`` per fit step, every iteration.
MTGP_META_POINTS_PER_TASK = 30


@dataclass
class MultiTaskMetaState:
    r"""A split's meta-training data with a task column (tasks ``0..M-1``), and the
    candidate pool."""

    X: Tensor
    Y: Tensor
    n_tasks: int
    pool: Tensor


class MultiTaskMeta(Method):
    r"""BoTorch's ``MultiTaskGP`` (ICM) with the meta-training tasks as tasks
    ``0..M-1`` (``MTGP_META_POINTS_PER_TASK`` random points of each) and the target
    as task ``M``, BoTorch's defaults, fitted every iteration; UCB with
    ``stbo-ucb``'s weight on the target task's posterior.

    Args:
        skip_queried: Search only the pool points not yet queried.
    """

    protocols = (META,)

    def __init__(self, skip_queried: bool = False) -> None:
        self.skip_queried = skip_queried

    def setup(self, problem: MetaProblem, data: MetaData) -> MultiTaskMetaState:
        generator = torch.Generator().manual_seed(data.seed)
        X, Y = [], []
        for task_index, task in enumerate(data.history):
            n = task.X.shape[0]
            rows = torch.randperm(n, generator=generator)[:MTGP_META_POINTS_PER_TASK]
            X.append(with_task_column(task.X[rows], task_index))
            Y.append(task.Y[rows])
        n_tasks = len(data.history)
        return MultiTaskMetaState(torch.cat(X), torch.cat(Y), n_tasks, data.pool)

    def propose(self, state: MultiTaskMetaState, X: Tensor, Y: Tensor) -> Tensor:
        target = state.n_tasks
        model = MultiTaskGP(
            torch.cat([state.X, with_task_column(X, target)]),
            torch.cat([state.Y, Y]),
            task_feature=-1,
            output_tasks=[target],
        )
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        acqf = UpperConfidenceBound(model, beta=STBO_UCB_BETA)
        queried = X if self.skip_queried else None
        return maximize_on_pool(acqf, state.pool, queried=queried)


class _Stage1Cache:
    r"""cm-BO Stage-1 fits (one GP per meta-task) by a stable key: the problem name,
    the split's seed, the data's device and a digest of the meta-training data. The
    fits do not depend on the cm-BO variant, so the variants run in one process
    share them."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._entries: OrderedDict[
            tuple[str, int, str, str], tuple[MetaTaskPosteriors, float]
        ] = OrderedDict()

    @staticmethod
    def key(
        problem: MetaProblem, history: list[TaskData], seed: int
    ) -> tuple[str, int, str, str]:
        digest = hashlib.sha256()
        for task in history:
            for tensor in (task.X, task.Y):
                digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return problem.name, seed, str(history[0].X.device), digest.hexdigest()

    def get(
        self, problem: MetaProblem, history: list[TaskData], seed: int
    ) -> tuple[MetaTaskPosteriors, float, bool]:
        r"""The split's meta-task posteriors, their fit time and whether cached."""
        key = self.key(problem, history, seed)
        if key in self._entries:
            posteriors, fit_s = self._entries[key]
            return posteriors, fit_s, True
        start = time.perf_counter()
        bounds = torch.stack([torch.zeros(problem.dim), torch.ones(problem.dim)])
        posteriors = meta_task_posteriors(
            history, bounds.to(history[0].X), progress=False
        )
        fit_s = time.perf_counter() - start
        if len(self._entries) >= self.size:
            self._entries.popitem(last=False)
        self._entries[key] = (posteriors, fit_s)
        return posteriors, fit_s, False


_STAGE1 = _Stage1Cache()


@dataclass
class ClusterMetaBOState:
    r"""A split's cm-BO prior, pool, known noise and timings."""

    prior: ClusterMetaPrior
    pool: Tensor
    noise_var: float
    info: dict[str, Any]
    weight_update_s: list[float] = field(default_factory=list)


@dataclass
class ClusterMetaBOTaskState:
    r"""One test task's cluster weights (``None``: uniform) and their history."""

    split: ClusterMetaBOState
    weights: Tensor | None = None
    weight_history: list[list[float]] = field(default_factory=list)


class ClusterMetaBO(Method):
    r"""cm-BO (Alg. 1): Stages 1-2 once per split (:meth:`build_prior`), then every
    iteration a :class:`~botorch_transfer.ClusterMetaPriorGP` with the current
    cluster weights (uniform at first, line 13) and known noise
    ``max(observation_noise, CMBO_NOISE_FLOOR)``, GP-UCB with ``xi = 3`` (Sec. 4.1)
    over the pool points not yet queried (a confident prior would otherwise re-pick
    the same point), then the weight update of lines 19-21 with the variant's
    distance after the new observation.

    Args:
        prototype: ``"center"`` or ``"barycenter"``.
        distance: ``"wasserstein"`` or ``"jeffreys"``, for clustering and weights.
    """

    protocols = (META,)

    def __init__(self, prototype: str, distance: str) -> None:
        self.prototype = prototype
        self.distance = distance

    def build_prior(
        self, problem: MetaProblem, history: list[TaskData], pool: Tensor, seed: int
    ) -> tuple[ClusterMetaPrior, dict[str, Any]]:
        r"""Stages 1-2 of cm-BO (Alg. 1 lines 3-11) for one split.

        Index points: 100 scrambled Sobol points for the ``center`` prototype (Sec.
        4.1: "the number of observed locations for the finite index space is set to
        100"); the candidate pool for the ``barycenter`` prototype, which only
        exists on its index points and must cover every point BO may query
        (deviation: the paper does not say which locations its barycenter uses).

        Args:
            problem: The meta problem (``cmbo_n_clusters``: ``C`` or ``None`` to
                select it in ``2..6`` by eqs. 10-11).
            history: The meta-training tasks.
            pool: The split's candidate pool.
            seed: Seed of the index points and k-means.

        Returns:
            The prior and timings ``{"fit_s", "clustering_s", "stage1_cached"}``
            (``clustering_s``: discretization, k-means and prototypes).
        """
        posteriors, fit_s, cached = _STAGE1.get(problem, history, seed)
        start = time.perf_counter()
        prior = build_cluster_prior(
            history,
            index_points=pool if self.prototype == "barycenter" else None,
            n_clusters=problem.cmbo_n_clusters,
            distance=self.distance,
            prototype=self.prototype,
            seed=seed,
            posteriors=posteriors,
        )
        clustering_s = time.perf_counter() - start
        return prior, {
            "fit_s": fit_s,
            "clustering_s": clustering_s,
            "stage1_cached": cached,
        }

    def setup(self, problem: MetaProblem, data: MetaData) -> ClusterMetaBOState:
        prior, info = self.build_prior(problem, data.history, data.pool, data.seed)
        noise_var = max(problem.observation_noise, CMBO_NOISE_FLOOR)
        return ClusterMetaBOState(prior, data.pool, noise_var, info)

    def start_task(
        self, state: ClusterMetaBOState, generator: torch.Generator
    ) -> ClusterMetaBOTaskState:
        return ClusterMetaBOTaskState(state)

    def propose(self, state: ClusterMetaBOTaskState, X: Tensor, Y: Tensor) -> Tensor:
        split = state.split
        model = ClusterMetaPriorGP(
            X,
            Y,
            prior=split.prior,
            weights=state.weights,
            train_Yvar=torch.full_like(Y, split.noise_var),
        )
        acqf = UpperConfidenceBound(model, beta=CMBO_UCB_XI**2)
        best = maximize_on_pool(acqf, split.pool, queried=X)
        # Alg. 1 lines 19-21: distances of GP^(tau) (this model) to the prototypes (the
        # methods are the paper's distance variants; the package default is
        # method="likelihood")
        start = time.perf_counter()
        state.weights = model.updated_weights(method="paper")
        split.weight_update_s.append(time.perf_counter() - start)
        state.weight_history.append(state.weights.tolist())
        return best

    def run_info(self, state: ClusterMetaBOState) -> dict[str, Any]:
        r"""``pretrain_s = fit_s + clustering_s`` (``fit_s`` measured once per split
        and process, see ``stage1_cached``), the clusters and the weight updates."""
        return {
            "pretrain_s": state.info["fit_s"] + state.info["clustering_s"],
            **state.info,
            "n_clusters": state.prior.n_clusters,
            "cluster_sizes": state.prior.cluster_sizes.tolist(),
            "weight_update_s": state.weight_update_s,
        }

    def task_info(self, state: ClusterMetaBOTaskState) -> dict[str, Any]:
        return {"weights": state.weight_history}

    def settings(self, problem: MetaProblem) -> dict[str, Any]:
        return {
            "ucb_xi": CMBO_UCB_XI,
            "noise_var": max(problem.observation_noise, CMBO_NOISE_FLOOR),
            "n_clusters_setting": problem.cmbo_n_clusters,
        }


class ClusterMetaBOReadme(ClusterMetaBO):
    r"""cm-BO as the README loop runs it: ``build_cluster_prior`` with its defaults
    (``C`` chosen by the silhouette, W2 distance, center prototypes, the mixture
    prior covariance); every iteration a ``ClusterMetaPriorGP`` whose target noise
    is fitted by ``fit_gpytorch_mll``, UCB with ``beta = README_CMBO_BETA`` over the
    pool points not yet queried, then ``updated_weights()`` (its default, the
    clusters' posterior probabilities).

    Args:
        raw_unit_noise: Give the model BoTorch's default noise model in raw outcome
            units instead of its default,
            the same model in the prior's units.
    """

    def __init__(self, raw_unit_noise: bool = False) -> None:
        super().__init__("center", "wasserstein")
        self.raw_unit_noise = raw_unit_noise

    def build_prior(
        self, problem: MetaProblem, history: list[TaskData], pool: Tensor, seed: int
    ) -> tuple[ClusterMetaPrior, dict[str, Any]]:
        posteriors, fit_s, cached = _STAGE1.get(problem, history, seed)
        start = time.perf_counter()
        prior = build_cluster_prior(history, seed=seed, posteriors=posteriors)
        clustering_s = time.perf_counter() - start
        return prior, {
            "fit_s": fit_s,
            "clustering_s": clustering_s,
            "stage1_cached": cached,
        }

    def propose(self, state: ClusterMetaBOTaskState, X: Tensor, Y: Tensor) -> Tensor:
        split = state.split
        # BoTorch's noise model in raw outcome units, for the comparison
        likelihood = (
            get_gaussian_likelihood_with_lognormal_prior()
            if self.raw_unit_noise
            else None
        )
        model = ClusterMetaPriorGP(
            X, Y, prior=split.prior, weights=state.weights, likelihood=likelihood
        )
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        acqf = UpperConfidenceBound(model, beta=README_CMBO_BETA)
        best = maximize_on_pool(acqf, split.pool, queried=X)
        start = time.perf_counter()
        state.weights = model.updated_weights()
        split.weight_update_s.append(time.perf_counter() - start)
        state.weight_history.append(state.weights.tolist())
        return best

    def settings(self, problem: MetaProblem) -> dict[str, Any]:
        return {"ucb_beta": README_CMBO_BETA, "n_clusters_setting": None}
