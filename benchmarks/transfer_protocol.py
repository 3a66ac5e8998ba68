r"""How the source/target (``"transfer"``) protocol runs a method: its state built
once per run, the method kinds (a model with an acquisition function, Thompson
sampling, random search, a Sobol design), the acquisition functions, and the
acquisition's maximization over the problem's domain."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from botorch.acquisition import (
    AcquisitionFunction,
    LogExpectedImprovement,
    ProbabilityOfImprovement,
    UpperConfidenceBound,
    qLogNoisyExpectedImprovement,
)
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.model import Model
from botorch.models.transforms import Normalize, Standardize
from botorch.optim import optimize_acqf, optimize_acqf_discrete
from botorch.sampling.pathwise import draw_matheron_paths
from gpytorch.means import ZeroMean
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor
from torch.quasirandom import SobolEngine

from benchmarks.methods import (
    META,
    TRANSFER,
    MetaData,
    Method,
    TransferData,
)
from botorch_transfer import (
    TaskData,
    randomized_nn_thompson_candidate,
)
from botorch_transfer.models.guard import TransferGuard
from botorch_transfer.test_functions.base import TransferProblem


def maximize(problem: TransferProblem, acqf: AcquisitionFunction) -> Tensor:
    r"""Maximize ``acqf`` over the problem's domain.

    Args:
        problem: The problem: ``optimize_acqf_discrete`` on its grid if it has one,
            else ``optimize_acqf`` (5 restarts, 256 raw samples) on its box.
        acqf: The acquisition function.

    Returns:
        The ``1 x d`` maximizer (detached).
    """
    if problem.grid is not None:
        candidate, _ = optimize_acqf_discrete(
            acqf, q=1, choices=problem.grid, max_batch_size=4096
        )
    else:
        candidate, _ = optimize_acqf(
            acqf, bounds=problem.bounds, q=1, num_restarts=5, raw_samples=256
        )
    return candidate.detach()


@dataclass
class TransferState:
    r"""The state of a ``"transfer"`` run.

    Attributes:
        problem: The problem.
        source: The source observations.
        generator: The run's policy generator.
        source_model: What the method built from the source data at setup (e.g. a
            source posterior), or ``None``.
        diagnostics: Per-iteration traces a method keeps for the run record (e.g.
            ``guard_uses_transfer``), one list per name, one entry per iteration.
        guard: The previous iteration's ``TransferGuard`` (a prequential guard
            builds on it), or ``None``.
        extra_sources: Further sources of a multi-source problem.
        source_models: What the method built from each source at setup (the
            first is ``source_model``).
        built: What a model builder made once in the run and reuses (e.g. the
            meta-task GPs of a mixture), by name.
    """

    problem: TransferProblem
    source: TaskData
    generator: torch.Generator
    source_model: Any = None
    diagnostics: dict[str, list] = field(default_factory=dict)
    guard: Any = None
    extra_sources: tuple[TaskData, ...] = ()
    source_models: tuple[Any, ...] = ()
    built: dict[str, Any] = field(default_factory=dict)

    @property
    def sources(self) -> tuple[TaskData, ...]:
        r"""Every source, the first one first."""
        return (self.source, *self.extra_sources)

    def target_noise(self, Y: Tensor) -> Tensor:
        r"""The known target noise variance, shaped like ``Y``."""
        return torch.full_like(Y, self.problem.target_noise)


SourceBuilder = Callable[[TransferProblem, TaskData], Any]
ModelBuilder = Callable[[TransferState, Tensor, Tensor], Model]
AcquisitionBuilder = Callable[
    [Model, TransferProblem, Tensor, Tensor], AcquisitionFunction
]


class TransferMethod(Method):
    r"""A ``"transfer"`` method whose setup builds an optional source model once.

    Args:
        source_model: ``source_model(problem, source) -> model``, called once per
            source of the run (timed as the run's setup), or ``None``.
    """

    protocols = (TRANSFER,)

    def __init__(self, source_model: SourceBuilder | None = None) -> None:
        self.source_model = source_model

    def setup(self, problem: TransferProblem, data: TransferData) -> TransferState:
        r"""Build the source model (if any).

        Args:
            problem: The problem.
            data: The source observations and the run's policy generator.

        Returns:
            The run's :class:`TransferState`.
        """
        source_models = (
            ()
            if self.source_model is None
            else tuple(self.source_model(problem, s) for s in data.sources)
        )
        return TransferState(
            problem,
            data.source,
            data.generator,
            source_models[0] if source_models else None,
            extra_sources=data.extra_sources,
            source_models=source_models,
        )


class AcquisitionMethod(TransferMethod):
    r"""Build a model on the target data, optionally fit it, maximize an acquisition.

    Args:
        model: ``model(state, X, Y) -> Model``, called every iteration.
        acquisition: ``acquisition(model, problem, X, Y) -> AcquisitionFunction``
            with the target's inputs ``X`` and observations ``Y`` (default: UCB
            with the problem's ``beta``).
        fit: Fit the model's hyperparameters with ``fit_gpytorch_mll`` every
            iteration (when there are target data).
        source_model: See :class:`TransferMethod`.
        guard: Wrap the (fitted) model in a
            :class:`~botorch_transfer.models.guard.TransferGuard`: ``True`` or
            ``"loo"`` (its default criterion), ``"prequential"`` (each
            iteration's guard builds on the previous one's) or ``"sequential"``
            (each guard scores the run from scratch with today's fit).
        guard_options: More keyword arguments of the ``TransferGuard`` (e.g.
            ``{"prequential_clip": 3.0}``).
    """

    def __init__(
        self,
        model: ModelBuilder,
        acquisition: AcquisitionBuilder | None = None,
        fit: bool = False,
        source_model: SourceBuilder | None = None,
        guard: bool | str = False,
        guard_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(source_model=source_model)
        if guard is True:
            guard = "loo"
        if guard_options and not guard:
            raise ValueError("`guard_options` needs a `guard`.")
        self.model = model
        self.acquisition = ucb if acquisition is None else acquisition
        self.fit = fit
        self.guard = guard
        self.guard_options = dict(guard_options or {})

    def propose(self, state: TransferState, X: Tensor, Y: Tensor) -> Tensor:
        r"""Maximize the acquisition of the model on ``(X, Y)`` over the domain.

        Args:
            state: The run's state.
            X: ``n x d`` target inputs.
            Y: ``n x 1`` target observations.

        Returns:
            The ``1 x d`` next query.
        """
        model = self.model(state, X, Y)
        if self.fit and X.shape[0] > 0:
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        weight = getattr(model, "transfer_weight", None)
        if weight is not None:  # how much a weighted model's transfer part acted
            state.diagnostics.setdefault("transfer_weight", []).append(float(weight))
        source_weights = getattr(model, "source_weights", None)
        if source_weights is not None and len(source_weights) > 1:  # each source's
            state.diagnostics.setdefault("source_weights", []).append(source_weights)
        if self.guard:
            prequential = self.guard == "prequential"
            model = TransferGuard(
                model,
                criterion=self.guard,
                previous=state.guard if prequential else None,
                **self.guard_options,
            )
            # which model acted and by how much the target-only GP beat the
            # transfer model: its prequential or sequential sum so far (nats), or
            # its LOO density (nats per point; None: too few points)
            if prequential:
                state.guard = model
                key = "guard_prequential_gain"
                gain = model.prequential_log_density["gain"]
            elif self.guard == "sequential":
                key = "guard_sequential_gain"
                gain = model.sequential_log_density.get("gain", 0.0)
            else:
                loo = model.loo_log_density
                key = "guard_loo_gain"
                gain = loo["target"] - loo["transfer"] if loo else None
            state.diagnostics.setdefault("guard_uses_transfer", []).append(
                model.uses_transfer
            )
            state.diagnostics.setdefault(key, []).append(gain)
        return maximize(state.problem, self.acquisition(model, state.problem, X, Y))


def target_gp(state: TransferState, X: Tensor, Y: Tensor) -> SingleTaskGP:
    r"""Target-only GP with the problem's target kernel, zero mean, known noise."""
    problem = state.problem
    return SingleTaskGP(
        X,
        Y,
        train_Yvar=state.target_noise(Y),
        covar_module=problem.kernels["target"](problem.dim),
        mean_module=ZeroMean(),
        outcome_transform=None,
    )


class PathwiseThompsonSampling(TransferMethod):
    r"""GP-TS: maximize one posterior sample path (pathwise / Matheron) of the
    fixed-kernel target GP over the grid, or over 4096 uniform candidates of a
    continuous domain."""

    def propose(self, state: TransferState, X: Tensor, Y: Tensor) -> Tensor:
        problem = state.problem
        path = draw_matheron_paths(target_gp(state, X, Y), sample_shape=torch.Size([1]))
        candidates = (
            problem.grid
            if problem.grid is not None
            else problem.sample(4096, state.generator)
        )
        with torch.no_grad():
            values = path(candidates).reshape(-1)
        return candidates[values.argmax()].unsqueeze(0)


class RandomizedNNThompsonSampling(TransferMethod):
    r"""Randomized regularized NN (eqs. 8 and 10 of the paper): one freshly
    initialized, regularized MLP trained per step, maximized over the grid or box.

    Args:
        loss: ``"squared"`` (regression, ``rnn-ts``) or ``"cross_entropy"``
            (the LFBO classifier, ``rnn-lfbo``).
    """

    def __init__(self, loss: str = "squared") -> None:
        super().__init__()
        self.loss = loss

    def propose(self, state: TransferState, X: Tensor, Y: Tensor) -> Tensor:
        problem = state.problem
        if problem.grid is not None:
            domain = {"choices": problem.grid}
        else:
            domain = {"bounds": problem.bounds}
        return randomized_nn_thompson_candidate(
            X,
            Y,
            **domain,
            loss=self.loss,
            seed=int(torch.randint(2**31, (1,), generator=state.generator)),
            input_transform=Normalize(problem.dim, bounds=problem.bounds),
            outcome_transform=Standardize(m=1) if self.loss == "squared" else None,
        )


class RandomSearch(Method):
    r"""Uniform random search: a uniform point of the domain (``"transfer"``) or of
    the candidate pool (``"meta"``), drawn from the run's (task's) generator."""

    protocols = (TRANSFER, META)

    def setup(self, problem: Any, data: TransferData | MetaData) -> Any:
        if isinstance(data, MetaData):
            return data.pool
        return partial(problem.sample, 1, data.generator)

    def start_task(self, state: Tensor, generator: torch.Generator) -> Any:
        pool = state

        def sample() -> Tensor:
            i = int(torch.randint(pool.shape[0], (1,), generator=generator))
            return pool[i].unsqueeze(0)

        return sample

    def propose(self, state: Callable[[], Tensor], X: Tensor, Y: Tensor) -> Tensor:
        return state()


class SobolDesign(Method):
    r"""A scrambled Sobol sequence over the domain (its seed drawn from the run's
    generator); on a grid problem each point snaps to the nearest grid point not
    yet queried. The design a user evaluates before any model."""

    def setup(self, problem: TransferProblem, data: TransferData) -> Any:
        seed = int(torch.randint(2**31, (1,), generator=data.generator))
        engine = SobolEngine(problem.dim, scramble=True, seed=seed)
        return problem, engine

    def propose(
        self, state: tuple[TransferProblem, SobolEngine], X: Tensor, Y: Tensor
    ) -> Tensor:
        problem, engine = state
        lower, upper = problem.bounds
        u = engine.draw(1, dtype=torch.float64).to(lower)
        x = lower + (upper - lower) * u
        grid = problem.grid
        if grid is None:
            return x
        scale = upper - lower
        distance = ((grid - x) / scale).pow(2).sum(-1)
        if X.shape[0] > 0:  # a grid point already queried is not drawn again
            queried = torch.cdist(grid, X.to(grid)).min(-1).values < 1e-9
            distance = distance.masked_fill(queried, torch.inf)
        return grid[distance.argmin()].unsqueeze(0)


# ---------------------------------------------------------------- acquisitions


def ucb(
    model: Model, problem: TransferProblem, X: Tensor, Y: Tensor
) -> AcquisitionFunction:
    r"""``UpperConfidenceBound`` with the problem's fixed ``beta``."""
    return UpperConfidenceBound(model, beta=problem.beta)


def log_ei(
    model: Model, problem: TransferProblem, X: Tensor, Y: Tensor
) -> AcquisitionFunction:
    r"""``LogExpectedImprovement`` over the best observation."""
    return LogExpectedImprovement(model, best_f=Y.max())


def pi(
    model: Model, problem: TransferProblem, X: Tensor, Y: Tensor
) -> AcquisitionFunction:
    r"""``ProbabilityOfImprovement`` over the best observation."""
    return ProbabilityOfImprovement(model, best_f=Y.max())


def qlog_nei(
    model: Model, problem: TransferProblem, X: Tensor, Y: Tensor
) -> AcquisitionFunction:
    r"""``qLogNoisyExpectedImprovement`` with the target's inputs as ``X_baseline``
    (the user's path: draws of the joint posterior over the baseline and each
    candidate, from BoTorch's default quasi-Monte Carlo sampler)."""
    return qLogNoisyExpectedImprovement(model, X_baseline=X, prune_baseline=True)
