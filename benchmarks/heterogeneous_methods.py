r"""Methods for a source that ran on other parameters than the target.

A problem with a :class:`~botorch_transfer.test_functions.base.SourceSpace` hands
the methods its source in the source's own columns, named. The package's model and
``MultiTaskGP`` need the source on the target's parameters: :class:`AlignedSource`
maps it there with :func:`~botorch_transfer.align_source` before the method's
setup, with what the user knows (``"known"``), as Ax fills it (``"filled"``), or
ignoring what differs (``"ignored"``):

- ``"known"``: a parameter the source lacks at the value it ran at (one aligned
  source per candidate value where that value is unknown); a parameter only the
  source has conditioned on the target's value;
- ``"filled"``: a parameter the source lacks at the value it ran at, or at the
  middle of its range where unknown; a parameter only the source has dropped
  (marginalized);
- ``"ignored"``: every parameter the source lacks at the middle of its range; a
  parameter only the source has dropped.

``HeterogeneousMTGP`` (Deshwal et al. 2024) takes the source as it is, and
``MultiTaskGP`` with ``LearnedFeatureImputation`` learns the missing values.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import MultiTaskGP
from botorch.models.heterogeneous_mtgp import HeterogeneousMTGP
from botorch.models.model import Model
from botorch.models.transforms import Normalize, Standardize
from botorch.models.transforms.input import (
    ChainedInputTransform,
    LearnedFeatureImputation,
)
from botorch.posteriors import Posterior
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor

from benchmarks.methods import Method, TransferData, register_method
from benchmarks.transfer_methods import (
    fitted_source_model,
    multitask_gp,
    rank_weighted_model,
    with_task_column,
)
from benchmarks.transfer_protocol import AcquisitionMethod, TransferState
from botorch_transfer import TaskData, align_source, align_source_candidates
from botorch_transfer.test_functions.base import SourceSpace, TransferProblem

#: How :class:`AlignedSource` maps a source (see the module docstring).
KNOWLEDGE = ("known", "filled", "ignored")


def _check_knowledge(knowledge: str) -> None:
    if knowledge not in KNOWLEDGE:
        raise ValueError(f"`knowledge` must be one of {KNOWLEDGE}, got {knowledge!r}.")


def _space(problem: TransferProblem) -> SourceSpace:
    if problem.source_space is None:
        raise ValueError(
            f"{problem.name}: its source runs on the target's parameters; the "
            "heterogeneous methods need a problem with a `source_space`."
        )
    return problem.source_space


def aligned_sources(
    problem: TransferProblem, source: TaskData, knowledge: str
) -> list[TaskData]:
    r"""The run's source on the target's parameters.

    Args:
        problem: The problem (its ``source_space`` and bounds).
        source: The source in its own columns (``feature_names`` set).
        knowledge: One of :data:`KNOWLEDGE`.

    Returns:
        One aligned source, or one per candidate value (``"known"`` with a value
        the user does not know).
    """
    _check_knowledge(knowledge)
    space = _space(problem)
    names = space.target_feature_names
    lo, hi = problem.bounds
    middle = {n: float((lo[i] + hi[i]) / 2) for i, n in enumerate(names)}
    lacking = [n for n in names if n not in space.feature_names]
    extra = [n for n in space.feature_names if n not in names]
    marginalized = dict.fromkeys(extra)
    if knowledge == "ignored":
        fills = {n: middle[n] for n in lacking}
    else:
        fills = {n: space.source_values.get(n, middle[n]) for n in lacking}
    if knowledge != "known":
        return [align_source(source, names, fills, marginalized, problem.bounds)]
    conditions = {n: space.target_values.get(n) for n in extra}
    if space.candidates:
        candidates = {n: list(v) for n, v in space.candidates.items()}
        return align_source_candidates(
            source, names, candidates, space.source_values, conditions, problem.bounds
        )
    return [align_source(source, names, fills, conditions, problem.bounds)]


class AlignedSource(Method):
    r"""Run ``method`` on the run's source mapped onto the target's parameters.

    Args:
        method: A ``"transfer"`` method that needs the source on the target's
            parameters.
        knowledge: How the source is mapped, one of :data:`KNOWLEDGE`.
    """

    def __init__(self, method: Method, knowledge: str) -> None:
        _check_knowledge(knowledge)
        self.method = method
        self.knowledge = knowledge

    def setup(self, problem: TransferProblem, data: TransferData) -> Any:
        sources = aligned_sources(problem, data.source, self.knowledge)
        aligned = replace(data, source=sources[0], extra_sources=tuple(sources[1:]))
        return self.method.setup(problem, aligned)

    def propose(self, state: Any, X: Tensor, Y: Tensor) -> Tensor:
        return self.method.propose(state, X, Y)


def imputed_multitask_gp(state: TransferState, X: Tensor, Y: Tensor) -> MultiTaskGP:
    r"""``multitask_gp`` whose source task's missing parameters are learned by
    BoTorch's ``LearnedFeatureImputation`` (fitted with the GP's hyperparameters);
    the source (aligned, its fill values overwritten) is task 0, the target task
    1."""
    space = _space(state.problem)
    names, d = space.target_feature_names, state.problem.dim
    observed = [i for i, n in enumerate(names) if n in space.feature_names]
    source = state.source
    bounds = torch.cat([state.problem.bounds, torch.tensor([[0.0], [1.0]]).to(X)], -1)
    transform = ChainedInputTransform(
        normalize=Normalize(d + 1, indices=list(range(d)), bounds=bounds),
        impute=LearnedFeatureImputation(
            {0: observed, 1: list(range(d))},
            d=d,
            target_task=1,
            bounds=torch.stack([torch.zeros(d), torch.ones(d)]).to(X),
            dtype=X.dtype,
            device=X.device,
        ),
    )
    return MultiTaskGP(
        torch.cat([with_task_column(source.X, 0), with_task_column(X, 1)]),
        torch.cat([source.Y, Y]),
        task_feature=-1,
        train_Yvar=torch.cat([source.Yvar, state.target_noise(Y)]),
        output_tasks=[1],
        input_transform=transform,
    )


class TargetTask(Model):
    r"""A ``HeterogeneousMTGP``'s target task (task 0) on the target's inputs: the
    posterior of ``X`` is the model's at ``X`` with the task column appended.

    Args:
        model: The fitted ``HeterogeneousMTGP``.
    """

    def __init__(self, model: HeterogeneousMTGP) -> None:
        super().__init__()
        self.model = model

    @property
    def num_outputs(self) -> int:
        return 1

    @property
    def batch_shape(self) -> torch.Size:
        return torch.Size()

    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: Any = None,
        **kwargs: Any,
    ) -> Posterior:
        return self.model.posterior(
            torch.cat([X, torch.zeros_like(X[..., :1])], dim=-1),
            output_indices=output_indices,
            observation_noise=observation_noise,
            posterior_transform=posterior_transform,
            **kwargs,
        )


def heterogeneous_mtgp(state: TransferState, X: Tensor, Y: Tensor) -> TargetTask:
    r"""BoTorch's ``HeterogeneousMTGP`` with its defaults (SAAS priors, the
    combinatorial kernel over the tasks' feature sets), fitted: the target is task
    0 on its parameters, the source task 1 on its own (the union of both is the
    model's feature space); outcomes standardized as ``MultiTaskGP`` does by
    default (the model itself standardizes nothing)."""
    space = _space(state.problem)
    names = list(space.target_feature_names)
    full = names + [n for n in space.feature_names if n not in names]
    source = state.source
    model = HeterogeneousMTGP(
        train_Xs=[X, source.X],
        train_Ys=[Y, source.Y],
        train_Yvars=[state.target_noise(Y), source.Yvar],
        feature_indices=[
            list(range(len(names))),
            [full.index(n) for n in space.feature_names],
        ],
        full_feature_dim=len(full),
        outcome_transform=Standardize(m=1),
    )
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return TargetTask(model)


def _aligned(model, knowledge: str, **options: Any) -> AlignedSource:
    return AlignedSource(AcquisitionMethod(model, fit=True, **options), knowledge)


#: The methods registered here: they need a problem with a ``source_space``.
SOURCE_SPACE_METHODS = (
    "rank-weighted-aligned",
    "rank-weighted-ignored",
    "mtgp-filled",
    "mtgp-imputed",
    "hetero-mtgp",
)

register_method(
    "rank-weighted-aligned",
    _aligned(rank_weighted_model, "known", source_model=fitted_source_model),
    "rank-weighted on the source mapped by name with what the user knows "
    "(align_source: the values it ran at, one source per candidate where unknown, "
    "retired parameters conditioned on the target's value); UCB",
)
register_method(
    "rank-weighted-ignored",
    _aligned(rank_weighted_model, "ignored", source_model=fitted_source_model),
    "rank-weighted on the source with what differs ignored (its missing "
    "parameters at the middle of their range, its extra ones dropped); UCB",
)
register_method(
    "mtgp-filled",
    _aligned(multitask_gp, "filled"),
    "peer: mtgp on the source filled Ax's way (missing parameters at the value it "
    "ran at, or the middle where unknown; extra ones dropped); UCB",
)
register_method(
    "mtgp-imputed",
    _aligned(imputed_multitask_gp, "filled"),
    "peer: mtgp with BoTorch's LearnedFeatureImputation for the source's missing "
    "parameters (extra ones dropped); UCB",
)
register_method(
    "hetero-mtgp",
    AcquisitionMethod(heterogeneous_mtgp),
    "peer: BoTorch's HeterogeneousMTGP (Deshwal et al. 2024) with its defaults, "
    "the source on its own parameters, fitted every iteration; UCB",
)
