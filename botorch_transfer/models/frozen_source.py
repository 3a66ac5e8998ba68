r"""A source as a frozen source posterior, in the units of the model that holds it.

Transfer models take a source as observations (``TaskData``: a GP is fitted on
them), as a fitted BoTorch model, or as a source posterior;
:func:`frozen_source_posterior` turns each into a frozen posterior in the model's
units, :func:`source_posterior_from_model` a fitted model into one in the model's
user units (an exact GP's as a cached low-rank :class:`GPSourcePosterior`).
"""

from __future__ import annotations

import copy
import warnings

import torch
from botorch.exceptions.warnings import InputDataWarning
from botorch.models import SingleTaskGP
from botorch.models.gpytorch import GPyTorchModel
from botorch.models.model import Model
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP
from gpytorch.module import Module
from torch import Tensor

from botorch_transfer.data import TaskData
from botorch_transfer.models.source_posterior import (
    GPSourcePosterior,
    ModelSourcePosterior,
    SourcePosterior,
    outcome_affine,
)
from botorch_transfer.progress import fit_mll_with_progress

#: Above this many source points, hyperparameters are fitted on a fixed subset: an
#: exact fit costs O(n^3) per step (1,000 points: ~7 s; 2,000: ~8x that), and the
#: posterior conditions on all points anyway (N=100,000, d=8: 68 s CPU, 2 GB).
FIT_MAX_POINTS = 1000


def exact_gp_state(model: Model) -> list[Tensor]:
    r"""What an exact GP's posterior depends on: its state (hyperparameters,
    transform statistics, fixed noise) and its raw training data (compare two with
    :func:`same_tensors`)."""
    inputs = getattr(model, "_original_train_inputs", None)
    if inputs is None:
        inputs = model.train_inputs[0]
    return [
        *(t.detach() for t in model.state_dict().values()),
        inputs.detach(),
        model.train_targets.detach(),
    ]


def source_posterior_from_model(
    model: Model,
    max_rank: int = 1000,
    tolerance: float = 1e-10,
    progress: bool = True,
) -> SourcePosterior:
    r"""Turn a fitted single-output BoTorch model into a frozen
    :class:`SourcePosterior`.

    Exact GPs with a Gaussian likelihood (e.g. ``SingleTaskGP``) become a cached
    :class:`GPSourcePosterior` (their input and ``Standardize`` outcome transforms
    honoured); models that know how to (``as_source_posterior``, e.g.
    ``DeltaBOModel``) convert themselves; any other model is wrapped as is.

    The returned posterior is in the model's *user* output units. It is built at
    every call (its factor costs ``O(N r^2)``); a source GP from
    :func:`~botorch_transfer.models.source_gp.fit_source_gp` builds it once and
    keeps it (its ``as_source_posterior``).

    Args:
        model: The fitted model. It is not modified.
        max_rank: See :class:`GPSourcePosterior`.
        tolerance: See :class:`GPSourcePosterior`.
        progress: See :class:`GPSourcePosterior`.

    Returns:
        A source posterior in the model's output units.
    """
    if not isinstance(model, Model):
        raise TypeError(
            f"A source model must be a BoTorch Model, got {type(model).__name__}."
        )
    if model.num_outputs != 1:
        raise ValueError(
            "A source model must have a single output, got "
            f"num_outputs={model.num_outputs}."
        )
    if len(model.batch_shape) != 0:
        raise ValueError(
            "A source model must not be batched, got batch_shape="
            f"{tuple(model.batch_shape)}."
        )
    if hasattr(model, "as_source_posterior"):
        return model.as_source_posterior(
            max_rank=max_rank, tolerance=tolerance, progress=progress
        )
    likelihood = getattr(model, "likelihood", None)
    if not (
        isinstance(model, ExactGP)
        and isinstance(model, GPyTorchModel)
        and isinstance(likelihood, (GaussianLikelihood, FixedNoiseGaussianLikelihood))
    ):
        return ModelSourcePosterior(model)
    return exact_gp_source_posterior(
        model, max_rank=max_rank, tolerance=tolerance, progress=progress
    )


def exact_gp_source_posterior(
    model: ExactGP,
    max_rank: int = 1000,
    tolerance: float = 1e-10,
    progress: bool = True,
) -> GPSourcePosterior:
    r"""The :class:`GPSourcePosterior` of a fitted exact BoTorch GP with a Gaussian
    likelihood (its input and ``Standardize`` outcome transforms honoured), in its
    user output units.

    Args:
        model: The fitted GP. It is not modified.
        max_rank: See :class:`GPSourcePosterior`.
        tolerance: See :class:`GPSourcePosterior`.
        progress: See :class:`GPSourcePosterior`.

    Returns:
        The GP's posterior as a frozen source.
    """
    was_training = model.training
    model.eval()  # stores transformed training inputs; raw ones kept aside
    try:
        input_transform = getattr(model, "input_transform", None)
        if input_transform is not None and hasattr(model, "_original_train_inputs"):
            train_X = model._original_train_inputs
        else:
            train_X = model.train_inputs[0]
        train_Y = model.train_targets
        posterior = GPSourcePosterior(
            train_X=train_X,
            train_Y=train_Y,
            noise=model.likelihood.noise.expand(train_Y.shape),
            covar_module=model.covar_module,
            mean_module=getattr(model, "mean_module", None),
            input_transform=input_transform,
            max_rank=max_rank,
            tolerance=tolerance,
            progress=progress,
        )
        affine = outcome_affine(getattr(model, "outcome_transform", None))
        if affine is not None:
            posterior.set_output_affine(*affine)
    finally:
        model.train(was_training)
    return posterior


def fit_subset_rows(
    n: int, fit_max_points: int | None, device: torch.device
) -> Tensor | None:
    r"""The rows of ``n`` observations that hyperparameters are fitted on: a fixed
    random subset of ``fit_max_points`` (the same data give the same fit), or
    ``None`` for all of them (``fit_max_points`` is ``None`` or at least ``n``).

    Raises:
        ValueError: If ``fit_max_points`` is neither ``None`` nor an int >= 2.
    """
    if fit_max_points is not None and (
        not isinstance(fit_max_points, int) or fit_max_points < 2
    ):
        raise ValueError(
            f"`fit_max_points` must be None or an int >= 2, got {fit_max_points!r}."
        )
    if fit_max_points is None or n <= fit_max_points:
        return None
    generator = torch.Generator().manual_seed(0)
    return torch.randperm(n, generator=generator)[:fit_max_points].to(device)


def frozen_source_posterior(
    source: TaskData | Model | SourcePosterior,
    scale: Tensor,
    offset: Tensor,
    input_transform: Module | None = None,
    covar_module: Module | None = None,
    fit: bool = True,
    max_rank: int = 1000,
    tolerance: float = 1e-10,
    progress: bool = True,
    fit_max_points: int | None = FIT_MAX_POINTS,
) -> SourcePosterior:
    r"""One source as a frozen posterior in a model's units ``(y - offset) / scale``.

    Args:
        source: Observations (a ``SingleTaskGP`` is built on them, in model units),
            a fitted single-output model, or a ``SourcePosterior`` in user units
            (copied).
        scale: Output scale of the model's outcome map.
        offset: Output offset of the model's outcome map.
        input_transform: For ``TaskData``: the GP's input transform (a copy is used).
        covar_module: For ``TaskData``: the GP's kernel (a copy is used; default:
            ``SingleTaskGP``'s).
        fit: For ``TaskData``: fit the GP's hyperparameters with
            ``fit_gpytorch_mll``.
        max_rank: See :class:`GPSourcePosterior`.
        tolerance: See :class:`GPSourcePosterior`.
        progress: Show progress bars over the GP fit (its optimizer steps) and the
            cached factorization when they take more than a few seconds (see
            :mod:`botorch_transfer.progress`).
        fit_max_points: For ``TaskData`` of more points: the hyperparameters are
            fitted on a fixed random subset of this many points (an exact marginal
            likelihood fit costs ``O(N^3)`` per step; at N=10,000 it ran for more
            than 20 minutes), and the posterior then conditions on all points with
            them. ``None`` fits on all points.

    Returns:
        The source's posterior in the model's units.
    """
    if isinstance(source, TaskData):
        rows = fit_subset_rows(source.n, fit_max_points, source.X.device)

        def source_gp(rows: Tensor | None = None) -> SingleTaskGP:
            X, Y, Yvar = source.X, source.Y, source.Yvar
            if rows is not None:
                X, Y = X[rows], Y[rows]
                Yvar = None if Yvar is None else Yvar[rows]
            with warnings.catch_warnings():
                # the source is in the model's units (the target's scaling), on
                # purpose not standardized on its own: BoTorch's scaling check
                # would warn about what the user cannot change
                warnings.simplefilter("ignore", InputDataWarning)
                return SingleTaskGP(
                    X,
                    (Y - offset) / scale,
                    None if Yvar is None else Yvar / scale**2,
                    covar_module=copy.deepcopy(covar_module),
                    input_transform=copy.deepcopy(input_transform),
                    outcome_transform=None,
                )

        gp = source_gp()
        if fit:
            subset = rows is not None
            fitted = source_gp(rows) if subset else gp
            fit_mll_with_progress(
                ExactMarginalLogLikelihood(fitted.likelihood, fitted),
                progress=progress,
                desc="source GP fit",
            )
            if subset:  # hyperparameters only, not the subset's data-sized state
                names = dict(fitted.named_parameters())
                gp.load_state_dict(
                    {k: v for k, v in fitted.state_dict().items() if k in names},
                    strict=False,
                )
        return source_posterior_from_model(
            gp, max_rank=max_rank, tolerance=tolerance, progress=progress
        )
    if isinstance(source, SourcePosterior):
        posterior = copy.deepcopy(source)
    else:
        posterior = source_posterior_from_model(
            source, max_rank=max_rank, tolerance=tolerance, progress=progress
        )
    posterior.set_output_affine(1.0 / scale, -offset / scale)  # user -> model units
    return posterior
