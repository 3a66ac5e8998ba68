r"""Built-in methods of the source/target (``"transfer"``) protocol.

Fixed-setting methods use the papers' kernels and noise levels of the problem
(``problem.kernels``, ``problem.target_noise``) and UCB with the problem's fixed
``beta``; ``*-fitted`` variants use BoTorch's default kernels and priors, inputs
normalized to the unit cube, and fit their hyperparameters with
``fit_gpytorch_mll`` every iteration; ``pooled-gp-fitted`` is a GP on the pooled
source and target data.

A new model joins the comparison with one registration, e.g.

    >>> register_method("mhgp", AcquisitionMethod(lambda state, X, Y: MeanTransferGP(
    ...     X, Y, source=state.source, train_Yvar=state.target_noise(Y))))
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import torch
from botorch.models import MultiTaskGP, SingleTaskGP
from botorch.models.model import Model
from botorch.models.transforms import Normalize, Standardize
from gpytorch.kernels import Kernel
from gpytorch.means import ZeroMean
from torch import Tensor

from benchmarks.methods import (
    register_method,
)
from benchmarks.transfer_protocol import (
    AcquisitionMethod,
    PathwiseThompsonSampling,
    RandomizedNNThompsonSampling,
    RandomSearch,
    SobolDesign,
    TransferState,
    log_ei,
    pi,
    qlog_nei,
    target_gp,
)
from botorch_transfer import (
    RGPE,
    DeltaBOModel,
    DiffGP,
    EnvGP,
    MetaTaskMixtureGP,
    RankWeightedTransferGP,
    TaskData,
    fit_default_meta_task_gps,
)
from botorch_transfer.models.frozen_source import (
    FIT_MAX_POINTS,
    source_posterior_from_model,
)
from botorch_transfer.models.pooled import source_fitted_kernel
from botorch_transfer.models.rank_combination import RankingOptions
from botorch_transfer.models.source_gp import fit_source_gp
from botorch_transfer.models.source_options import IdentityMap
from botorch_transfer.models.source_posterior import GPSourcePosterior, SourcePosterior
from botorch_transfer.test_functions.base import TransferProblem

#: Largest number of source points ``deltabo-fitted`` fits its source GP on.
SOURCE_FIT_MAX_N = FIT_MAX_POINTS


# ------------------------------------------------- fixed-setting models (papers)


def fixed_source_posterior(
    problem: TransferProblem, source: TaskData
) -> GPSourcePosterior:
    r"""DeltaBO's source posterior with the problem's source kernel and noise."""
    X_s, Y_s = source.X, source.Y
    noise = torch.full_like(Y_s.squeeze(-1), problem.source_noise)
    kernel = problem.kernels["source"](problem.dim)
    return GPSourcePosterior(X_s, Y_s, noise=noise, covar_module=kernel)


def deltabo_model(
    state: TransferState, X: Tensor, Y: Tensor, residual_covariance: str = "diagonal"
) -> DeltaBOModel:
    r"""DeltaBO on the fixed source posterior with the problem's delta kernel."""
    problem = state.problem
    return DeltaBOModel(
        X,
        Y,
        train_Yvar=state.target_noise(Y),
        source=state.source_model,
        covar_module=problem.kernels["delta"](problem.dim),
        # the paper's f = g + delta
        source_map=IdentityMap(residual_covariance=residual_covariance),
    )


def envgp_model(state: TransferState, X: Tensor, Y: Tensor) -> EnvGP:
    r"""Env-GP as in the paper: fixed target kernel, the source observing the target
    function itself (``source_map="identity"``; the stretched source noise is learned,
    so the method fits)."""
    problem = state.problem
    return EnvGP(
        X,
        Y,
        train_Yvar=state.target_noise(Y),
        source=state.source,
        covar_module=problem.kernels["target"](problem.dim),
        mean_module=ZeroMean(),
        source_map="identity",
    )


def diffgp_model(state: TransferState, X: Tensor, Y: Tensor) -> DiffGP:
    r"""Diff-GP with the paper's fixed target kernel."""
    problem = state.problem
    return DiffGP(
        X,
        Y,
        train_Yvar=state.target_noise(Y),
        source=state.source,
        covar_module=problem.kernels["target"](problem.dim),
        mean_module=ZeroMean(),
    )


# ------------------------------------------------- fitted models (BoTorch defaults)


def _unit_cube(problem: TransferProblem) -> Normalize:
    # BoTorch's recommended setup for its default priors: inputs to the unit cube
    return Normalize(problem.dim, bounds=problem.bounds)


def fitted_source_model(problem: TransferProblem, source: TaskData) -> SingleTaskGP:
    r"""The source GP of ``deltabo-fitted``: BoTorch defaults, fitted once per run.

    :func:`~botorch_transfer.models.source_gp.fit_source_gp` on the unit
    cube: above ``SOURCE_FIT_MAX_N`` points the hyperparameters are fitted on a
    fixed random subset of that size (an exact fit costs O(N^3) per optimizer
    step), then the GP on all points uses them.

    Args:
        problem: The problem (its bounds).
        source: The source observations with their noise variances.

    Returns:
        The fitted ``FittedSourceGP`` on all source points (it keeps its posterior
        factor and skill for the run's iterations).
    """
    return fit_source_gp(source, _unit_cube(problem))


def fitted_source_posterior(
    problem: TransferProblem, source: TaskData
) -> SourcePosterior:
    r"""The frozen posterior of :func:`fitted_source_model`, built once per run."""
    return source_posterior_from_model(fitted_source_model(problem, source))


def hyperparameters(model: Model) -> dict[str, Tensor]:
    r"""The model's parameters (no data-sized buffers or outcome-transform
    statistics), to load into the same model built on other data."""
    parameters = dict(model.named_parameters())
    return {k: v for k, v in model.state_dict().items() if k in parameters}


def pooled_gp(state: TransferState, X: Tensor, Y: Tensor) -> SingleTaskGP:
    r"""``SingleTaskGP`` on the pooled source and target data (no transfer model:
    the source is treated as target data with its own noise), BoTorch defaults."""
    source = state.source
    return SingleTaskGP(
        torch.cat([source.X, X]),
        torch.cat([source.Y, Y]),
        train_Yvar=torch.cat([source.Yvar, state.target_noise(Y)]),
        input_transform=_unit_cube(state.problem),
    )


def fitted_target_gp(state: TransferState, X: Tensor, Y: Tensor) -> SingleTaskGP:
    r"""Target-only ``SingleTaskGP`` with BoTorch's defaults and known noise."""
    return SingleTaskGP(
        X,
        Y,
        train_Yvar=state.target_noise(Y),
        input_transform=_unit_cube(state.problem),
    )


def default_settings_model(
    model_class: type, state: TransferState, X: Tensor, Y: Tensor, source: Any
) -> Model:
    r"""A model as its docstring tells a user to build it: inputs to the unit cube,
    outcomes standardized (one map for source and target), default kernels."""
    return model_class(
        X,
        Y,
        train_Yvar=state.target_noise(Y),
        source=source,
        input_transform=_unit_cube(state.problem),
        outcome_transform=Standardize(m=1),
    )


def fitted_deltabo_model(state: TransferState, X: Tensor, Y: Tensor) -> DeltaBOModel:
    r"""DeltaBO on the fitted source GP, default delta kernel, standardized outcomes
    (the delta kernel's default prior amplitude is then on the scale of the data),
    the paper's identity map (``source_map="identity"``, the class default until the
    track chose ``"marginal-affine"``: ``deltabo-marginal-fitted``)."""
    builder = partial(DeltaBOModel, source_map="identity")
    return default_settings_model(builder, state, X, Y, state.source_model)


def affine_deltabo_model(state: TransferState, X: Tensor, Y: Tensor) -> DeltaBOModel:
    r"""``fitted_deltabo_model`` with a learned source scale and offset
    (``source_map="affine"``: ``f = a g + c + delta``)."""
    builder = partial(DeltaBOModel, source_map="affine")
    return default_settings_model(builder, state, X, Y, state.source_model)


def marginal_affine_deltabo_model(
    state: TransferState, X: Tensor, Y: Tensor
) -> DeltaBOModel:
    r"""``fitted_deltabo_model`` with the source scale and offset integrated out
    (``source_map="marginal-affine"``: ``a ~ N(1, 0.5^2)``, ``c ~ N(0, 1)``)."""
    builder = partial(DeltaBOModel, source_map="marginal-affine")
    return default_settings_model(builder, state, X, Y, state.source_model)


def fitted_rgpe_model(state: TransferState, X: Tensor, Y: Tensor) -> RGPE:
    r"""RGPE with the fitted source GP as its base model (built once per run), the
    default target GP, standardized outcomes."""
    return default_settings_model(RGPE, state, X, Y, list(state.source_models))


def fitted_envgp_model(state: TransferState, X: Tensor, Y: Tensor) -> EnvGP:
    r"""Env-GP with BoTorch's default kernel, standardized outcomes."""
    return default_settings_model(EnvGP, state, X, Y, state.source)


def fitted_diffgp_model(state: TransferState, X: Tensor, Y: Tensor) -> DiffGP:
    r"""Diff-GP with BoTorch's default kernel, standardized outcomes."""
    return default_settings_model(DiffGP, state, X, Y, state.source)


def low_rank_envgp_model(state: TransferState, X: Tensor, Y: Tensor) -> EnvGP:
    r"""``fitted_envgp_model`` with FITC inference (``inference="low_rank"``)."""
    builder = partial(EnvGP, inference="low_rank")
    return default_settings_model(builder, state, X, Y, state.source)


def low_rank_diffgp_model(state: TransferState, X: Tensor, Y: Tensor) -> DiffGP:
    r"""``fitted_diffgp_model`` with FITC inference (``inference="low_rank"``)."""
    builder = partial(DiffGP, inference="low_rank")
    return default_settings_model(builder, state, X, Y, state.source)


def source_kernel(problem: TransferProblem, source: TaskData) -> Kernel:
    r"""The pooled models' default kernel fitted once on the source and frozen
    (:func:`~botorch_transfer.models.pooled.source_fitted_kernel`), built once per
    run."""
    return source_fitted_kernel(
        source,
        input_transform=_unit_cube(problem),
        fit_max_points=SOURCE_FIT_MAX_N,
        progress=False,
    )


def source_kernel_envgp_model(state: TransferState, X: Tensor, Y: Tensor) -> EnvGP:
    r"""``low_rank_envgp_model`` with Shilton et al.'s fixed kernel (the run's
    source-fitted, frozen one) and zero prior mean: the fit moves the stretch and the
    source map only (with a fitted constant mean it took twice the optimizer steps,
    the constant drifting along the fixed kernel's flat directions)."""
    builder = partial(
        EnvGP,
        inference="low_rank",
        covar_module=state.source_model,
        mean_module=ZeroMean(),
    )
    return default_settings_model(builder, state, X, Y, state.source)


def source_kernel_diffgp_model(state: TransferState, X: Tensor, Y: Tensor) -> DiffGP:
    r"""``low_rank_diffgp_model`` with the run's source-fitted, frozen kernel."""
    builder = partial(DiffGP, inference="low_rank", covar_module=state.source_model)
    return default_settings_model(builder, state, X, Y, state.source)


def rank_weighted_model(
    state: TransferState, X: Tensor, Y: Tensor, **options: Any
) -> RankWeightedTransferGP:
    r"""``RankWeightedTransferGP`` as its docstring tells a user to build it:
    inputs to the unit cube, its default outcome scaling, each source's GP fitted
    once per run (:func:`fitted_source_model`, at setup) and passed every
    iteration, and ``options``."""
    gps = state.source_models
    return RankWeightedTransferGP(
        X,
        Y,
        train_Yvar=state.target_noise(Y),
        source=gps[0] if len(gps) == 1 else list(gps),
        input_transform=_unit_cube(state.problem),
        **options,
    )


def meta_task_mixture_model(
    state: TransferState, X: Tensor, Y: Tensor
) -> MetaTaskMixtureGP:
    r"""``MetaTaskMixtureGP`` with its defaults, the sources as its meta-tasks (their
    GPs fitted at the first iteration and reused, as its docstring advises)."""
    if "meta_tasks" not in state.built:
        state.built["meta_tasks"] = fit_default_meta_task_gps(
            list(state.sources), state.problem.bounds
        )
    return MetaTaskMixtureGP(
        X, Y, state.target_noise(Y), meta_tasks=state.built["meta_tasks"]
    )


def with_task_column(Z: Tensor, task: int) -> Tensor:
    r"""``Z`` with a last column holding ``task`` (``MultiTaskGP``'s task feature)."""
    return torch.cat([Z, torch.full_like(Z[:, :1], task)], dim=-1)


def multitask_gp(state: TransferState, X: Tensor, Y: Tensor) -> MultiTaskGP:
    r"""BoTorch's ``MultiTaskGP`` (ICM) with its defaults: the sources are tasks
    ``0..S-1`` and the target task ``S`` of a task feature column; it predicts the
    target task."""
    sources, d = state.sources, state.problem.dim
    S = len(sources)
    bounds = torch.cat([state.problem.bounds, torch.tensor([[0.0], [S]]).to(X)], -1)
    return MultiTaskGP(
        torch.cat(
            [with_task_column(s.X, k) for k, s in enumerate(sources)]
            + [with_task_column(X, S)]
        ),
        torch.cat([s.Y for s in sources] + [Y]),
        task_feature=-1,
        train_Yvar=torch.cat([s.Yvar for s in sources] + [state.target_noise(Y)]),
        output_tasks=[S],
        # the unit cube for the features; the task column stays 0/1
        input_transform=Normalize(d + 1, indices=list(range(d)), bounds=bounds),
    )


# one line each for `list`: model, acquisition, fixed or fitted hyperparameters, paper
register_method(
    "deltabo",
    AcquisitionMethod(deltabo_model, source_model=fixed_source_posterior),
    "DeltaBOModel (Lin et al., DeltaBO): the problem's fixed source, delta kernels "
    "and noise, nothing fitted, diagonal source error; UCB with the problem's beta",
)
register_method(
    "deltabo-full",
    AcquisitionMethod(
        partial(deltabo_model, residual_covariance="full"),
        source_model=fixed_source_posterior,
    ),
    "deltabo with the exact source-error covariance (IdentityMap('full'), "
    "this package's extension of DeltaBO); fixed kernels; UCB",
)
register_method(
    "envgp",
    AcquisitionMethod(envgp_model, fit=True),
    "EnvGP (Shilton et al. 2017, Sec. 3.1): the paper's fixed target kernel, the "
    "stretched source noise fitted every iteration; UCB with the problem's beta",
)
register_method(
    "diffgp",
    AcquisitionMethod(diffgp_model),
    "DiffGP (Shilton et al. 2017, Sec. 3.2): the paper's fixed target kernel, "
    "nothing fitted; UCB with the problem's beta",
)
register_method(
    "gp-ucb",
    AcquisitionMethod(target_gp),
    "no transfer: target-only GP with the problem's fixed kernel and known noise; "
    "UCB with the problem's beta (GP-UCB, Srinivas et al. 2010)",
)
register_method(
    "gp-ei",
    AcquisitionMethod(target_gp, acquisition=log_ei),
    "no transfer: gp-ucb's fixed-kernel target GP; log expected improvement",
)
register_method(
    "gp-pi",
    AcquisitionMethod(target_gp, acquisition=pi),
    "no transfer: gp-ucb's fixed-kernel target GP; probability of improvement",
)
register_method(
    "gp-ts",
    PathwiseThompsonSampling(),
    "no transfer: Thompson sampling, one pathwise (Matheron) sample of gp-ucb's "
    "fixed-kernel target GP maximized on the grid or 4096 random points",
)
register_method(
    "rnn-ts",
    RandomizedNNThompsonSampling(loss="squared"),
    "no transfer, no GP: randomized regularized MLP regression retrained every "
    "iteration, approximate Thompson sampling (Oliveira 2026, eq. 10)",
)
register_method(
    "rnn-lfbo",
    RandomizedNNThompsonSampling(loss="cross_entropy"),
    "no transfer, no GP: randomized regularized MLP classifier (LFBO loss) "
    "retrained every iteration, approximate Thompson sampling (Oliveira 2026)",
)
register_method(
    "random",
    RandomSearch(),
    "uniform random search over the domain (transfer) or the candidate pool (meta)",
)
register_method(
    "sobol",
    SobolDesign(),
    "a scrambled Sobol design over the domain (grid problems: the nearest grid point "
    "not yet queried), no model",
)
register_method(
    "deltabo-fitted",
    AcquisitionMethod(
        fitted_deltabo_model, fit=True, source_model=fitted_source_posterior
    ),
    "DeltaBOModel with the paper's identity map and our full residual covariance: "
    "source SingleTaskGP fitted once, default delta kernel fitted every iteration, "
    "standardized outcomes; UCB",
)
register_method(
    "deltabo-fitted-source-gp",
    AcquisitionMethod(fitted_deltabo_model, fit=True, source_model=fitted_source_model),
    "deltabo-fitted given the fitted source SingleTaskGP itself every iteration "
    "(the natural BoTorch loop; the GP's source posterior is cached per model)",
)
register_method(
    "envgp-fitted",
    AcquisitionMethod(fitted_envgp_model, fit=True),
    "EnvGP with BoTorch's default kernel and priors and a learned affine map per "
    "source, fitted every iteration, standardized outcomes; UCB",
)
register_method(
    "diffgp-fitted",
    AcquisitionMethod(fitted_diffgp_model, fit=True),
    "DiffGP with BoTorch's default kernel and priors fitted every iteration, "
    "standardized outcomes; UCB",
)
register_method(
    "envgp-fitted-low-rank",
    AcquisitionMethod(low_rank_envgp_model, fit=True),
    "envgp-fitted with FITC inference (256 farthest-point source points and all "
    "target points inducing): O((N + T) m^2) per fit step; UCB",
)
register_method(
    "diffgp-fitted-low-rank",
    AcquisitionMethod(low_rank_diffgp_model, fit=True),
    "diffgp-fitted with FITC inference (256 farthest-point source points and all "
    "target points inducing): O((N + T) m^2) per fit step; UCB",
)
register_method(
    "envgp-source-kernel-low-rank",
    AcquisitionMethod(source_kernel_envgp_model, fit=True, source_model=source_kernel),
    "envgp-fitted-low-rank with Shilton et al.'s fixed kernel (fitted once on at "
    "most 1,000 source points, frozen) and zero prior mean: the stretch and the "
    "source map fitted every iteration; UCB",
)
register_method(
    "diffgp-source-kernel-low-rank",
    AcquisitionMethod(source_kernel_diffgp_model, fit=True, source_model=source_kernel),
    "diffgp-fitted-low-rank with the kernel fitted once on the source and frozen: "
    "the prior mean (and unknown noise levels) fitted every iteration; UCB",
)
register_method(
    "gp-ucb-fitted",
    AcquisitionMethod(fitted_target_gp, fit=True),
    "no transfer (the default track's reference): target-only SingleTaskGP, "
    "BoTorch's defaults fitted every iteration, known noise; UCB",
)
register_method(
    "gp-ei-fitted",
    AcquisitionMethod(fitted_target_gp, log_ei, fit=True),
    "no transfer: gp-ucb-fitted's fitted target GP; log expected improvement",
)
register_method(
    "gp-pi-fitted",
    AcquisitionMethod(fitted_target_gp, pi, fit=True),
    "no transfer: gp-ucb-fitted's fitted target GP; probability of improvement",
)
register_method(
    "pooled-gp-fitted",
    AcquisitionMethod(pooled_gp, fit=True),
    "no transfer model: SingleTaskGP on the pooled source and target data (each "
    "with its noise), BoTorch's defaults fitted every iteration; UCB",
)
# the default-settings models, guarded against negative transfer (TransferGuard)
register_method(
    "deltabo-guarded",
    AcquisitionMethod(
        fitted_deltabo_model,
        fit=True,
        source_model=fitted_source_posterior,
        guard=True,
    ),
    "deltabo-fitted inside a TransferGuard: acts as a target-only SingleTaskGP "
    "while that predicts the target's data better (leave-one-out); UCB",
)
register_method(
    "deltabo-affine-fitted",
    AcquisitionMethod(
        affine_deltabo_model, fit=True, source_model=fitted_source_posterior
    ),
    "deltabo-fitted with a learned source scale and offset (source_map='affine': "
    "f = a g + c + delta, a and c fitted with the delta kernel); UCB",
)
register_method(
    "deltabo-affine-guarded",
    AcquisitionMethod(
        affine_deltabo_model,
        fit=True,
        source_model=fitted_source_posterior,
        guard=True,
    ),
    "deltabo-affine-fitted inside a TransferGuard (leave-one-out against a target-only "
    "SingleTaskGP); UCB",
)
register_method(
    "deltabo-marginal-fitted",
    AcquisitionMethod(
        marginal_affine_deltabo_model, fit=True, source_model=fitted_source_posterior
    ),
    "deltabo-fitted with the source scale and offset integrated out "
    "(source_map='marginal-affine': f = a g + c + delta, a ~ N(1, 0.5^2), c ~ N(0, 1) "
    "in standardized units); UCB",
)
register_method(
    "deltabo-marginal-guarded",
    AcquisitionMethod(
        marginal_affine_deltabo_model,
        fit=True,
        source_model=fitted_source_posterior,
        guard=True,
    ),
    "deltabo-marginal-fitted inside a TransferGuard (leave-one-out against a "
    "target-only SingleTaskGP); UCB",
)


def prequential_guarded_marginal_deltabo(
    criterion: str = "prequential", **guard_options: Any
) -> AcquisitionMethod:
    r"""``deltabo-marginal-fitted`` in a prequential (or sequential)
    ``TransferGuard`` with ``guard_options`` (e.g. ``prequential_clip``,
    ``min_points``)."""
    return AcquisitionMethod(
        marginal_affine_deltabo_model,
        fit=True,
        source_model=fitted_source_posterior,
        guard=criterion,
        guard_options=guard_options,
    )


register_method(
    "deltabo-marginal-preq-guarded",
    prequential_guarded_marginal_deltabo(
        prequential_clip=math.inf, min_points=3, hand_back=True
    ),
    "deltabo-marginal-fitted inside a prequential TransferGuard, unclipped (the "
    "target-only GP acts once it predicted the run's new observations better, "
    "summed); UCB",
)
register_method(
    "deltabo-marginal-preqclip-guarded",
    prequential_guarded_marginal_deltabo(
        prequential_clip=3.0, min_points=3, hand_back=True
    ),
    "deltabo-marginal-preq-guarded with each observation's gain clipped to +-3 nats "
    "(prequential_clip=3: the sum counts points won, not a few heavy-tailed ones); "
    "UCB",
)
register_method(
    "deltabo-marginal-preqclip2-guarded",
    prequential_guarded_marginal_deltabo(
        prequential_clip=3.0, min_points=2, hand_back=True
    ),
    "deltabo-marginal-preqclip-guarded with the target-only GP fitted from 2 points "
    "(min_points=2: the initial design's next query is scored too; the target-only "
    "GP's picks are scored, so transfer can win the run back); UCB",
)
register_method(
    "deltabo-marginal-preqinit-guarded",
    prequential_guarded_marginal_deltabo(
        prequential_clip=3.0,
        min_points=2,
        score_initial_design=True,
        hand_back=True,
    ),
    "deltabo-marginal-preqclip2-guarded whose first guard scores the initial design "
    "(score_initial_design=True: each initial point after the second predicted by "
    "both models refitted on the points before it); UCB",
)
register_method(
    "deltabo-marginal-seqclip2-guarded",
    prequential_guarded_marginal_deltabo(
        "sequential", prequential_clip=3.0, min_points=2
    ),
    "deltabo-marginal-preqclip2-guarded scored from scratch at every iteration "
    "(criterion='sequential': each target point predicted from the points before "
    "it with today's hyperparameters; no previous guard); UCB",
)
register_method(
    "deltabo-marginal-final-guarded",
    prequential_guarded_marginal_deltabo(
        prequential_clip=3.0, min_points=2, hand_back=False
    ),
    "deltabo-marginal-preqclip2-guarded whose hand-over is final (hand_back=False: "
    "the target-only GP's own picks are not scored, so the transfer model cannot "
    "win the run back; a prequential TransferGuard's default and the README's "
    "guarded loop); UCB",
)
register_method(
    "envgp-guarded",
    AcquisitionMethod(fitted_envgp_model, fit=True, guard=True),
    "envgp-fitted inside a TransferGuard (leave-one-out against a target-only "
    "SingleTaskGP); UCB",
)
register_method(
    "diffgp-guarded",
    AcquisitionMethod(fitted_diffgp_model, fit=True, guard=True),
    "diffgp-fitted inside a TransferGuard (leave-one-out against a target-only "
    "SingleTaskGP); UCB",
)
register_method(
    "rank-weighted",
    AcquisitionMethod(rank_weighted_model, fit=True, source_model=fitted_source_model),
    "RankWeightedTransferGP with its defaults: a source-kernel transfer GP (f = a g "
    "+ c + delta) mixed with a target-only GP by leave-one-out ranking evidence, "
    "fitted every iteration; UCB",
)
for margin in (1, 2):
    register_method(
        f"rank-weighted-pairs{margin}",
        AcquisitionMethod(
            partial(
                rank_weighted_model,
                ranking=RankingOptions(pair_margin=float(margin)),
            ),
            fit=True,
            source_model=fitted_source_model,
        ),
        f"rank-weighted whose ranking counts only the pairs of target observations "
        f"more than {margin} noise sd of a difference apart; UCB",
    )
# the peers a BoTorch user would pick (default settings, fitted every iteration)
register_method(
    "mtgp",
    AcquisitionMethod(multitask_gp, fit=True),
    "peer: BoTorch's MultiTaskGP (ICM; source task 0, target task 1), its defaults "
    "fitted every iteration; UCB",
)
register_method(
    "meta-task-mixture",
    AcquisitionMethod(meta_task_mixture_model),
    "peer: MetaTaskMixtureGP with its defaults, the sources as its meta-tasks (their "
    "GPs fitted once per run); UCB",
)
register_method(
    "rgpe",
    AcquisitionMethod(
        fitted_rgpe_model, fit=True, source_model=fitted_source_posterior
    ),
    "peer: RGPE (Feurer et al. 2018): source SingleTaskGP fitted once, default "
    "target GP fitted every iteration, ranking-loss weights; UCB",
)

# the real track's methods through the loop a BoTorch user writes: qLogNEI with the
# target's points as X_baseline (the models' joint posteriors over them and a candidate)
register_method(
    "rank-weighted-qlognei",
    AcquisitionMethod(
        rank_weighted_model,
        acquisition=qlog_nei,
        fit=True,
        source_model=fitted_source_model,
    ),
    "rank-weighted with qLogNoisyExpectedImprovement (X_baseline: the target's "
    "points) instead of UCB",
)
register_method(
    "mtgp-qlognei",
    AcquisitionMethod(multitask_gp, acquisition=qlog_nei, fit=True),
    "peer: mtgp with qLogNoisyExpectedImprovement (X_baseline: the target's points)",
)
register_method(
    "rgpe-qlognei",
    AcquisitionMethod(
        fitted_rgpe_model,
        acquisition=qlog_nei,
        fit=True,
        source_model=fitted_source_posterior,
    ),
    "peer: rgpe with qLogNoisyExpectedImprovement (X_baseline: the target's points)",
)
register_method(
    "gp-qlognei-fitted",
    AcquisitionMethod(fitted_target_gp, acquisition=qlog_nei, fit=True),
    "no transfer: gp-ucb-fitted with qLogNoisyExpectedImprovement (X_baseline: the "
    "target's points)",
)
