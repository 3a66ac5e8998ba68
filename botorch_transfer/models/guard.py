r"""A guard against negative transfer: use a transfer model only while it predicts the
target's own data at least as well as a target-only GP.

Transfer helps when the source is related and hurts when it is not, and with few
target points a fitted transfer model cannot always tell (an unrelated source can look
plausible to its marginal likelihood). :class:`TransferGuard` decides by the data the
user cares about: the leave-one-out (LOO) log predictive density of the target's
observations, in the user's units, under the transfer model and under a plain
``SingleTaskGP`` on the target data. It then acts as the better of the two. Ax's
transfer learning protects itself the same way (cross-validated selection against a
single-task GP).

The LOO predictions of the transfer model keep its fitted hyperparameters and rebuild
everything derived from the target data without the left-out point (residuals,
corrections, ensemble weights), so no target observation predicts itself.

``criterion="prequential"`` judges instead by how well each model, as fitted before a
query was observed, predicted it (Dawid's prequential principle): the guard of the
previous BO iteration is passed as ``previous``, its two models score the new
observations, and the sums accumulate along the run. Leave-one-out measures how well
a model interpolates where BO has already been; the prequential score measures how
well it predicted where BO went next, which is what the acquisition relies on.
``prequential_clip`` bounds each observation's contribution: a GP that is confidently
wrong at one point (a short fitted lengthscale) scores tens of nats there, and one
such point should not decide the run.

``criterion="sequential"`` computes the same sum from scratch, with the models as
fitted now: each target point is predicted by the two models rebuilt on the points
before it (in the order of the target data, i.e. query order in a BO loop) with
today's hyperparameters. It needs no ``previous`` guard, so a guard built anew every
iteration, or by Ax from model arguments, has the run's evidence; the price is that
hyperparameters fitted on all points score the early ones (for the target-only GP
without clipping, the sum is its log marginal likelihood by the chain rule).
"""

from __future__ import annotations

import copy
import copyreg
import math
from collections.abc import Mapping
from typing import Any

import torch
from botorch.acquisition.objective import PosteriorTransform
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.model import Model
from botorch.models.transforms.outcome import Standardize
from botorch.posteriors import Posterior
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor

from botorch_transfer.models.base import SourceConditionedGP
from botorch_transfer.models.utils.assorted import SingleOutputTargetMixin
from botorch_transfer.models.utils.loo import exact_loo_log_density, training_marginal
from botorch_transfer.models.utils.scoring import normal_log_density, same_fingerprint


def transfer_loo_log_density(model: SourceConditionedGP) -> Tensor:
    r"""Leave-one-out log predictive density of each target observation under a
    source-conditioned model, in the user's units (``model.loo_log_density()``).

    Each point ``i`` is predicted (with its observation noise) by the model rebuilt on
    the other target points with the same hyperparameters.

    Args:
        model: A non-batched ``SourceConditionedGP`` with at least 2 target points.

    Returns:
        ``n`` log densities.
    """
    if not isinstance(model, SourceConditionedGP):
        raise TypeError(
            f"`model` must be a SourceConditionedGP, got {type(model).__name__}."
        )
    if len(model.batch_shape) > 0:
        raise ValueError(
            f"`model` must not be batched, got batch_shape {tuple(model.batch_shape)}."
        )
    return model.loo_log_density()


def single_task_loo_log_density(model: SingleTaskGP) -> Tensor:
    r"""Closed-form leave-one-out log predictive density of each training observation
    of a single-output, non-batched ``SingleTaskGP``, in the user's units.

    With ``K`` the training covariance plus noise, ``r`` the centred targets and
    ``alpha = K^{-1} r``: point ``i``'s LOO predictive has mean ``y_i - alpha_i /
    [K^{-1}]_ii`` and variance ``1 / [K^{-1}]_ii`` (Rasmussen & Williams, eq. 5.12;
    :func:`~botorch_transfer.models.utils.loo.exact_loo_log_density`).

    Args:
        model: A fitted ``SingleTaskGP`` (optionally with a ``Standardize`` outcome
            transform).

    Returns:
        ``n`` log densities.
    """
    if model.num_outputs != 1 or len(model.batch_shape) > 0:
        raise ValueError("`model` must be a single-output, non-batched SingleTaskGP.")
    log_scale = _log_outcome_scale(model)
    # Standardize: y_user = y * std + mean, so densities shrink by log(std)
    return exact_loo_log_density(model) - log_scale


def single_task_sequential_log_density(model: SingleTaskGP, start: int = 1) -> Tensor:
    r"""One-step-ahead log predictive density of each training observation of a
    single-output, non-batched ``SingleTaskGP`` from ``start`` on, in the user's
    units and in the order of the training data, with the fitted hyperparameters.

    With ``K = L L^T`` the training covariance plus noise and ``r`` the centred
    targets, ``z = L^{-1} r``: point ``i`` given the points before it has mean
    ``y_i - L_ii z_i`` and variance ``L_ii^2`` (the chain rule of the marginal
    likelihood, whose sum over all points these densities are).

    Args:
        model: A fitted ``SingleTaskGP`` (optionally with a ``Standardize`` outcome
            transform).
        start: The first point scored (>= 1).

    Returns:
        ``n - start`` log densities.
    """
    if isinstance(start, bool) or not isinstance(start, int) or start < 1:
        raise ValueError(f"`start` must be an int >= 1, got {start!r}.")
    if model.num_outputs != 1 or len(model.batch_shape) > 0:
        raise ValueError("`model` must be a single-output, non-batched SingleTaskGP.")
    log_scale = _log_outcome_scale(model)
    mean, K, _ = training_marginal(model)
    L = torch.linalg.cholesky(K)
    residual = (model.train_targets - mean).unsqueeze(-1)
    z = torch.linalg.solve_triangular(L, residual, upper=False).squeeze(-1)
    sd = L.diagonal()
    log_density = -0.5 * (math.log(2 * math.pi) + z**2) - sd.log() - log_scale
    return log_density[start:]


def _log_outcome_scale(model: SingleTaskGP) -> Tensor | float:
    r"""The log of ``model``'s outcome scale (user units = model units times the
    ``Standardize`` scale; 0 without an outcome transform)."""
    transform = getattr(model, "outcome_transform", None)
    if isinstance(transform, Standardize):
        return transform.stdvs.squeeze().log()
    if transform is None:
        return 0.0
    raise ValueError(
        "`model` may only have a Standardize outcome transform, got "
        f"{type(transform).__name__}."
    )


def predictive_log_density(
    model: Model, X: Tensor, Y: Tensor, Yvar: Tensor | None = None
) -> Tensor:
    r"""Log predictive density of observations ``Y`` at ``X`` under ``model``, in the
    user's units.

    Args:
        model: A single-output, non-batched model.
        X: ``n x d`` raw inputs.
        Y: ``n x 1`` observations.
        Yvar: ``n x 1`` known observation noise variances (user units), or ``None``
            to add the model's own noise (``observation_noise=True``).

    Returns:
        ``n`` log densities.
    """
    with torch.no_grad():
        if Yvar is None:
            posterior = model.posterior(X, observation_noise=True)
            variance = posterior.variance
        else:
            posterior = model.posterior(X)
            variance = posterior.variance + Yvar
    return normal_log_density(Y, posterior.mean, variance).squeeze(-1)


CRITERIA = ("loo", "prequential", "sequential")
#: The criteria that sum clipped per-point gains over the run.
SUMMED_CRITERIA = ("prequential", "sequential")
#: Nats one observation can move a prequential or sequential guard's sum.
DEFAULT_PREQUENTIAL_CLIP = 3.0


def _same_data(A: Tensor, B: Tensor) -> bool:
    r"""Whether ``A`` and ``B`` are the same data up to round-off (the user-unit
    outcomes of two models pass through each model's own fitted outcome map)."""
    tolerance = 1e3 * torch.finfo(A.dtype).eps
    return torch.allclose(A, B, rtol=tolerance, atol=tolerance * B.abs().max())


class TransferGuard(SingleOutputTargetMixin, Model):
    r"""Act as the transfer model while it predicts the target's data at least as
    well as a target-only GP (leave-one-out), else as the target-only GP.

    The comparison is the mean LOO log predictive density per target point, in the
    user's units; the transfer model is kept unless the target-only GP is better by
    more than ``margin`` nats per point, and always with fewer than ``min_points``
    target points (too few to judge). Build a new guard after each refit, as you
    build the model itself.

    With ``criterion="prequential"`` the comparison is the sum, over the target
    points observed since the first guard of the run, of each point's log predictive
    density under the two models of the guard built just before it was observed
    (pass that guard as ``previous``); the transfer model acts unless the target-only
    GP's sum is higher by more than ``margin`` nats in total. Without ``previous``
    (the run's first guard) there is no evidence yet and the transfer model acts.
    With ``criterion="sequential"`` the sum is the same, over the target points from
    ``min_points`` on, but each point is predicted by the current two models rebuilt
    on the target points before it (no ``previous``; see the module docstring).
    Each point's gain (target-only minus transfer log density) is clipped to
    ``[-prequential_clip, prequential_clip]`` (default 3 nats) before it is summed,
    so that the sum counts points won rather than a few heavy-tailed ones.

    Which to use: in a BO loop, the prequential guard with its defaults (pass each
    iteration's guard as ``previous``; the hand-over to the target-only GP is final,
    see ``docs/decisions.md``, "TransferGuard's hand-over under the prequential
    criterion"). Where no previous guard is at hand (a guard built anew every
    iteration, or by Ax), ``"sequential"``, or ``"loo"`` (the default), which is
    as safe and keeps less of a related source's gain.

    Args:
        model: A fitted, non-batched source-conditioned model (``DeltaBOModel``,
            ``EnvGP``, ``DiffGP``, ``RGPE``, ...).
        target_model: The no-transfer alternative (default: a ``SingleTaskGP`` on the
            model's target data, with BoTorch's defaults, a copy of the model's
            input transform, and fitted here with ``fit_gpytorch_mll``).
        margin: Nats the target-only GP must gain before it is used: per point
            under ``"loo"``, in total under ``"prequential"`` and ``"sequential"``.
        min_points: Fewest target points at which the guard compares; under
            ``"prequential"``, at which the target-only GP is fitted so that it
            predicts the next observations; under ``"sequential"``, the first point
            scored is the one after ``min_points``. Default (``None``): 3 under
            ``"loo"``, 2 under ``"prequential"`` and ``"sequential"`` (so that a BO
            run's initial design already predicts its first query).
        criterion: ``"loo"`` (default), ``"prequential"`` or ``"sequential"`` (see
            above).
        previous: Under ``"prequential"``, the guard of the previous BO iteration,
            on a prefix of this model's target data (``None`` at the first).
        prequential_clip: Under ``"prequential"`` and ``"sequential"``, the most
            nats one observation can move the sum either way (``None``: the
            default, 3 nats; ``math.inf``: no clipping).
        score_initial_design: Under ``"prequential"``, let the run's first guard
            (no ``previous``) score the target points after the first
            ``min_points``: each predicted by both models refitted (from the
            current hyperparameters) on the points before it, as the guards of a
            run started from ``min_points`` points would have. With an initial
            design of more points the first query then has evidence too; it costs
            ``n - min_points`` refits of each model, once.
        hand_back: Under ``"prequential"``, whether the transfer model can act
            again after the target-only GP has acted (``None``: the default,
            ``False``; not applicable to the other criteria). With ``False`` the
            points observed while the target-only GP acted are not scored, so a
            hand-over is final. Those points are the target-only GP's own
            acquisition picks, where it was most optimistic: scoring them weighs
            against it, and lets a transfer model with a wide predictive win the
            run back without predicting better.

    Example:
        >>> model = EnvGP(train_X, train_Y, source=TaskData(X_src, Y_src))
        >>> mll = fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        >>> guarded = TransferGuard(model)
        >>> acqf = LogExpectedImprovement(guarded, best_f=train_Y.max())
        >>> acting = guarded.uses_transfer  # which model acts
        >>> # prequential: each iteration's guard takes the previous one
        >>> guarded = TransferGuard(model, criterion="prequential", previous=guarded)
    """

    def __init__(
        self,
        model: SourceConditionedGP,
        target_model: SingleTaskGP | None = None,
        margin: float = 0.0,
        min_points: int | None = None,
        criterion: str = "loo",
        previous: TransferGuard | None = None,
        prequential_clip: float | None = None,
        score_initial_design: bool = False,
        hand_back: bool | None = None,
    ) -> None:
        super().__init__()
        if criterion not in CRITERIA:
            raise ValueError(
                f"`criterion` must be one of {CRITERIA}, got {criterion!r}."
            )
        if previous is not None and criterion != "prequential":
            raise ValueError(
                "`previous` applies to `criterion='prequential'` only, got "
                f"{criterion!r}."
            )
        if previous is not None and not isinstance(previous, TransferGuard):
            raise TypeError(
                f"`previous` must be a TransferGuard, got {type(previous).__name__}."
            )
        if not isinstance(model, SourceConditionedGP):
            raise TypeError(
                "`model` must be a source-conditioned model of this package, got "
                f"{type(model).__name__}."
            )
        if len(model.batch_shape) > 0:
            raise ValueError(
                "`model` must not be batched (the guard compares one model's "
                f"predictions of one target's data), got batch_shape "
                f"{tuple(model.batch_shape)}; guard each batch member's model."
            )
        if not (isinstance(margin, (int, float)) and math.isfinite(margin)):
            raise ValueError(f"`margin` must be a finite float, got {margin!r}.")
        if min_points is None:
            min_points = 2 if criterion in SUMMED_CRITERIA else 3
        if not isinstance(min_points, int) or min_points < 2:
            raise ValueError(f"`min_points` must be an int >= 2, got {min_points!r}.")
        if prequential_clip is not None:
            if criterion not in SUMMED_CRITERIA:
                raise ValueError(
                    "`prequential_clip` applies to `criterion='prequential'` or "
                    f"'sequential' only, got {criterion!r}."
                )
            if not (
                isinstance(prequential_clip, (int, float))
                and not isinstance(prequential_clip, bool)
                and not math.isnan(prequential_clip)
                and prequential_clip > 0
            ):
                raise ValueError(
                    "`prequential_clip` must be a positive float (math.inf: no "
                    f"clipping) or None, got {prequential_clip!r}."
                )
        elif criterion in SUMMED_CRITERIA:
            prequential_clip = DEFAULT_PREQUENTIAL_CLIP
        if not isinstance(score_initial_design, bool):
            raise TypeError(
                "`score_initial_design` must be a bool, got "
                f"{type(score_initial_design).__name__}."
            )
        if score_initial_design and criterion != "prequential":
            raise ValueError(
                "`score_initial_design` applies to `criterion='prequential'` only, "
                f"got {criterion!r}."
            )
        if hand_back is not None:
            if not isinstance(hand_back, bool):
                raise TypeError(
                    "`hand_back` must be a bool or None, got "
                    f"{type(hand_back).__name__}."
                )
            if criterion != "prequential":
                raise ValueError(
                    "`hand_back` applies to `criterion='prequential'` only, got "
                    f"{criterion!r}."
                )
        elif criterion == "prequential":
            hand_back = False
        self.score_initial_design = score_initial_design
        self.hand_back = hand_back
        self.prequential_clip = (
            None if prequential_clip is None else float(prequential_clip)
        )
        self.transfer_model = model
        self.margin, self.min_points = float(margin), min_points
        self.criterion = criterion
        if target_model is None and model.target_X.shape[-2] >= min_points:
            target_model = self._fit_target_model(model)
        self.target_model = target_model
        # the run's evidence so far (only floats are kept: no chain of guards)
        self.prequential_log_density = self._prequential_sums(previous)
        self._choose()

    def _prequential_sums(self, previous: TransferGuard | None) -> dict[str, float]:
        r"""``previous``'s sums plus its models' log predictive densities of the
        target points observed since it was built: ``"transfer"`` and ``"target"``
        (each model's total) and ``"gain"`` (the sum of each point's target-only
        minus transfer density, clipped by ``prequential_clip``)."""
        if previous is None:
            if self.score_initial_design and self.target_model is not None:
                return self._initial_design_sums()
            return {"transfer": 0.0, "target": 0.0, "gain": 0.0}
        X, Y = self.transfer_model.target_X, self.transfer_model.target_Y
        m = previous.target_X.shape[-2]
        if previous.target_X.shape[-1] != X.shape[-1]:
            raise ValueError(
                f"`previous` is a guard on d={previous.target_X.shape[-1]} inputs but "
                f"`model` has d={X.shape[-1]}; `previous` must be the previous BO "
                "iteration's guard of this run."
            )
        model, before = self.transfer_model, previous.transfer_model
        if type(before) is not type(model) or not same_fingerprint(
            before._transfer_fingerprint, model._transfer_fingerprint
        ):
            # its evidence is about other sources (or another model)
            raise ValueError(
                f"`previous` guards a {type(before).__name__} on other sources (or "
                f"another prior) than this {type(model).__name__}; `previous` must "
                "be the previous BO iteration's guard of this run, on the same "
                "source data."
            )
        if (
            previous.target_X.shape[-2] > X.shape[-2]
            or not _same_data(previous.target_X, X[:m])
            or not _same_data(previous.target_Y, Y[:m])
        ):
            raise ValueError(
                "`previous` must be a guard on a prefix of this model's target data "
                f"(the previous BO iteration's), got one on {m} points that are not "
                f"the first {m} of these {X.shape[-2]}."
            )
        sums = dict(previous.prequential_log_density)
        if previous.target_model is None or m == X.shape[-2]:
            return sums  # nothing new, or no target-only GP to predict it yet
        if self.hand_back is False and not previous.uses_transfer:
            return sums  # the target-only GP's own picks: the hand-over is final
        Yvar = self.transfer_model.target_Yvar
        new = (X[m:], Y[m:], None if Yvar is None else Yvar[m:])
        transfer = predictive_log_density(previous.transfer_model, *new)
        target = predictive_log_density(previous.target_model, *new)
        return self._summed(transfer, target, sums)

    def _summed(
        self, transfer: Tensor, target: Tensor, sums: dict[str, float] | None = None
    ) -> dict[str, float]:
        r"""``sums`` plus the per-point log densities of the two models: each
        model's total, and the gains (target-only minus transfer) clipped by
        ``prequential_clip`` and summed."""
        sums = dict(sums or {"transfer": 0.0, "target": 0.0, "gain": 0.0})
        # clamping to +-inf (no clipping) leaves the gains as they are
        gains = (target - transfer).clamp(-self.prequential_clip, self.prequential_clip)
        sums["transfer"] += transfer.sum().item()
        sums["target"] += target.sum().item()
        sums["gain"] += gains.sum().item()
        return sums

    def _initial_design_sums(self) -> dict[str, float]:
        r"""The run's first guard: each target point ``i`` from ``min_points`` on is
        predicted by both models refitted on the points before it, as the guards of
        a run that had started from ``min_points`` points would have (each refit
        starts from the current hyperparameters)."""
        model = self.transfer_model
        X, Y, Yvar = model.target_X, model.target_Y, model.target_Yvar
        transfer, target = [], []
        for i in range(self.min_points, X.shape[-2]):
            before = copy.deepcopy(model)
            before._set_target_data(
                model._target_X[:i], model._target_Y[:i], model._target_Yvar[:i]
            )
            fit_gpytorch_mll(ExactMarginalLogLikelihood(before.likelihood, before))
            target_gp = self._target_model_for(model, n=i)
            fit_gpytorch_mll(
                ExactMarginalLogLikelihood(target_gp.likelihood, target_gp)
            )
            new = (
                X[i : i + 1],
                Y[i : i + 1],
                None if Yvar is None else Yvar[i : i + 1],
            )
            transfer.append(predictive_log_density(before, *new))
            target.append(predictive_log_density(target_gp, *new))
        if not transfer:
            return self._summed(Y.new_empty(0), Y.new_empty(0))
        return self._summed(torch.cat(transfer), torch.cat(target))

    def _choose(self) -> None:
        r"""Compare the two models by the guard's criterion and set
        ``uses_transfer``."""
        self.loo_log_density: dict[str, float] = {}
        self.sequential_log_density: dict[str, float] = {}
        n = self.transfer_model.target_X.shape[-2]
        if self.criterion == "sequential":
            self._choose_sequential()
            return
        if self.criterion == "prequential":
            gain = self.prequential_log_density["gain"]
            self.uses_transfer = self.target_model is None or gain <= self.margin
            return
        if n < self.min_points or self.target_model is None:
            self.uses_transfer = True  # too few points to judge
            return
        self.loo_log_density = {
            "transfer": transfer_loo_log_density(self.transfer_model).mean().item(),
            "target": single_task_loo_log_density(self.target_model).mean().item(),
        }
        gain = self.loo_log_density["target"] - self.loo_log_density["transfer"]
        self.uses_transfer = gain <= self.margin

    def _choose_sequential(self) -> None:
        r"""Score each target point from ``min_points`` on by both models rebuilt on
        the points before it (today's hyperparameters), sum the clipped gains and
        choose."""
        n = self.transfer_model.target_X.shape[-2]
        if self.target_model is None or n <= self.min_points:
            self.uses_transfer = True  # nothing scored yet
            return
        transfer = self.transfer_model.sequential_log_density(start=self.min_points)
        target = single_task_sequential_log_density(
            self.target_model, start=self.min_points
        )
        self.sequential_log_density = self._summed(transfer, target)
        self.uses_transfer = self.sequential_log_density["gain"] <= self.margin

    def fit(self) -> TransferGuard:
        r"""Fit both models' hyperparameters (``fit_gpytorch_mll``, BoTorch's
        defaults) and choose again; what Ax's surrogate calls (``import
        botorch_transfer.ax`` registers it with Ax's ``fit_botorch_model``).

        Returns:
            The guard itself.
        """
        if self.target_model is None:
            self.target_model = self._target_model_for(self.transfer_model)
        for model in (self.transfer_model, self.target_model):
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        self._choose()
        return self

    def load_state_dict(
        self,
        state_dict: Mapping[str, Any],
        strict: bool = True,
        keep_transforms: bool = True,
        assign: bool = False,
    ) -> None:
        r"""Each model loads its part with its own ``load_state_dict`` (so its data
        stay in the user's units, expressed in the loaded outcome transform, as
        BoTorch does), then the guard chooses again on its own data.

        Args:
            state_dict: A guard's state (``transfer_model.*``, ``target_model.*``).
            strict: Whether the keys must match exactly.
            keep_transforms: Passed to the target-only ``SingleTaskGP``.
            assign: As in ``torch.nn.Module.load_state_dict``.
        """
        parts: dict[str, dict[str, Any]] = {"transfer_model": {}, "target_model": {}}
        unexpected = []
        for key, value in state_dict.items():
            head, _, rest = key.partition(".")
            if head in parts:
                parts[head][rest] = value
            else:
                unexpected.append(key)
        if self.target_model is None and parts["target_model"]:
            unexpected += [f"target_model.{k}" for k in parts["target_model"]]
        if strict and unexpected:
            raise RuntimeError(
                f"Unexpected key(s) in the state dict of {type(self).__name__}: "
                f"{unexpected} (a guard without a target-only GP has none)."
            )
        self.transfer_model.load_state_dict(
            parts["transfer_model"], strict=strict, assign=assign
        )
        if self.target_model is not None:
            self.target_model.load_state_dict(
                parts["target_model"],
                strict=strict,
                keep_transforms=keep_transforms,
                assign=assign,
            )
        self._loaded()

    def _loaded(self) -> None:
        self._choose()

    @classmethod
    def of(cls, model_class: type[SourceConditionedGP]) -> type[TransferGuard]:
        r"""A model class that builds a ``model_class`` from its constructor
        arguments and guards it: the guard as Ax's ``botorch_model_class``.

        Its constructor takes ``model_class``'s arguments (``train_X``, ``train_Y``,
        ..., the sources) plus ``margin``, ``min_points``, ``criterion`` (``"loo"``
        or ``"sequential"``: Ax refits every trial and keeps no previous guard, so
        not ``"prequential"``) and ``prequential_clip``, builds the transfer
        model and a target-only ``SingleTaskGP`` unfitted (acting as the transfer
        model); :meth:`fit` fits both and chooses. ``construct_inputs`` is
        ``model_class``'s (a ``MultiTaskDataset`` from Ax's transfer-learning
        adapter works). After ``load_state_dict`` (Ax's cross-validation loads the
        fitted hyperparameters into each fold's model) the guard chooses again on
        its own data.

        Args:
            model_class: A source-conditioned model class, e.g. ``DeltaBOModel``.

        Returns:
            The class ``Guarded<model_class name>`` (one per ``model_class``).

        Example:
            >>> from botorch_transfer.ax import transfer_learning_generation_strategy
            >>> strategy = transfer_learning_generation_strategy(
            ...     TransferGuard.of(DeltaBOModel)
            ... )
        """
        if not (
            isinstance(model_class, type)
            and issubclass(model_class, SourceConditionedGP)
        ):
            raise TypeError(
                "`model_class` must be a source-conditioned model class of this "
                f"package (e.g. DeltaBOModel), got {model_class!r}."
            )
        if model_class not in _GUARDED_CLASSES:
            name = f"Guarded{model_class.__name__}"
            _GUARDED_CLASSES[model_class] = _GuardedClassType(
                name,
                (GuardedTransferModel,),
                {
                    "transfer_model_class": model_class,
                    "transfer_argument": model_class.transfer_argument,
                    "__qualname__": name,
                    "__module__": __name__,
                    "__doc__": f"``TransferGuard.of({model_class.__name__})``.",
                },
            )
        return _GUARDED_CLASSES[model_class]

    @staticmethod
    def _target_model_for(
        model: SourceConditionedGP, n: int | None = None
    ) -> SingleTaskGP:
        r"""The target-only GP on ``model``'s target data (its first ``n`` points)."""
        transform = getattr(model, "input_transform", None)
        Yvar = model.target_Yvar
        return SingleTaskGP(
            model.target_X[:n],
            model.target_Y[:n],
            None if Yvar is None else Yvar[:n],
            input_transform=copy.deepcopy(transform),
            outcome_transform=Standardize(m=1),
        )

    @classmethod
    def _fit_target_model(cls, model: SourceConditionedGP) -> SingleTaskGP:
        target = cls._target_model_for(model)
        fit_gpytorch_mll(ExactMarginalLogLikelihood(target.likelihood, target))
        return target

    @property
    def model(self) -> Model:
        r"""The model that acts: the transfer model or the target-only GP."""
        return self.transfer_model if self.uses_transfer else self.target_model

    @property
    def num_outputs(self) -> int:
        return 1

    @property
    def batch_shape(self) -> torch.Size:
        return self.model.batch_shape

    @property
    def target_X(self) -> Tensor:
        r"""The target inputs, raw (``X_baseline`` of noisy acquisition functions)."""
        return self.transfer_model.target_X

    @property
    def target_Y(self) -> Tensor:
        r"""The target observations in the user's units (``best_f``'s source)."""
        return self.transfer_model.target_Y

    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: PosteriorTransform | None = None,
        **kwargs: Any,
    ) -> Posterior:
        r"""The acting model's posterior at ``X`` (see ``uses_transfer``), ``X``
        checked as the package's models check it whichever model acts (a task
        column that Ax appends, see the model's ``task_column``, is dropped first:
        the target-only GP has none)."""
        X = self.transfer_model.strip_task_feature(X)
        self._check_X(X)
        return self.model.posterior(
            X,
            output_indices=output_indices,
            observation_noise=observation_noise,
            posterior_transform=posterior_transform,
            **kwargs,
        )

    def condition_on_observations(self, X: Tensor, Y: Tensor, **kwargs: Any) -> Model:
        r"""The acting model conditioned on ``(X, Y)`` (the choice is kept)."""
        return self.model.condition_on_observations(X, Y, **kwargs)

    def fantasize(self, X: Tensor, sampler: Any, **kwargs: Any) -> Model:
        r"""The acting model's fantasy model (the choice is kept)."""
        return self.model.fantasize(X, sampler, **kwargs)

    def subset_output(self, idcs: list[int]) -> Model:
        raise NotImplementedError(
            "TransferGuard has a single output; subset_output does not apply. Guard "
            "one model per outcome and combine them in a ModelListGP."
        )


#: The classes :meth:`TransferGuard.of` made, one per transfer model class (a
#: registry of types, so that the same call returns the same class).
_GUARDED_CLASSES: dict[type, type] = {}


class _GuardedClassType(type(TransferGuard)):
    r"""The type of the classes :meth:`TransferGuard.of` makes: they pickle as the
    call that makes them (they are not module attributes)."""


def _reduce_guarded_class(cls: _GuardedClassType) -> tuple[Any, tuple[type]]:
    return TransferGuard.of, (cls.transfer_model_class,)


copyreg.pickle(_GuardedClassType, _reduce_guarded_class)


class GuardedTransferModel(TransferGuard):
    r"""Base of the classes :meth:`TransferGuard.of` makes: a guard constructed from
    the transfer model's own arguments (what Ax's surrogate constructs)."""

    transfer_model_class: type[SourceConditionedGP]
    # before `fit` (or a loaded state dict) there are no hyperparameters to compare
    _fitted: bool = False

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        train_Yvar: Tensor | None = None,
        likelihood: Any = None,
        covar_module: Any = None,
        mean_module: Any = None,
        outcome_transform: Any = None,
        input_transform: Any = None,
        *,
        margin: float = 0.0,
        min_points: int | None = None,
        criterion: str = "loo",
        prequential_clip: float | None = None,
        **kwargs: Any,
    ) -> None:
        if criterion == "prequential":
            raise ValueError(
                "`criterion='prequential'` needs the previous iteration's guard, "
                "which a guard built from model arguments (Ax) does not have; use "
                "'sequential' (the same score from the current fit) or 'loo'."
            )
        model = self.transfer_model_class(
            train_X,
            train_Y,
            train_Yvar,
            likelihood,
            covar_module,
            mean_module,
            outcome_transform,
            input_transform,
            **kwargs,
        )
        # both models exist (unfitted) from the start, so that every guard of this
        # class has the same state dict; `fit` fits them and chooses
        super().__init__(
            model,
            target_model=self._target_model_for(model),
            margin=margin,
            min_points=min_points,
            criterion=criterion,
            prequential_clip=prequential_clip,
        )

    def _choose(self) -> None:
        if not self._fitted:  # acts as the transfer model until fitted
            self.loo_log_density, self.sequential_log_density = {}, {}
            self.uses_transfer = True
            return
        super()._choose()

    def fit(self) -> GuardedTransferModel:
        self._fitted = True
        return super().fit()

    def _loaded(self) -> None:
        self._fitted = True  # the loaded hyperparameters are the fitted ones
        self._choose()

    @classmethod
    def construct_inputs(
        cls,
        training_data: Any,
        *,
        margin: float = 0.0,
        min_points: int | None = None,
        criterion: str = "loo",
        prequential_clip: float | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        r"""The transfer model's ``construct_inputs`` plus the guard's arguments
        (``margin``, ``min_points``, ``criterion``, ``prequential_clip``)."""
        inputs = cls.transfer_model_class.construct_inputs(training_data, **kwargs)
        guard = {
            "margin": margin,
            "min_points": min_points,
            "criterion": criterion,
            "prequential_clip": prequential_clip,
        }
        return {**inputs, **guard}
