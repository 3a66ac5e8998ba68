r"""``pretrain_prior``: learn a GP prior from related tasks (HyperBO, Wang et al.)."""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from botorch_transfer.data import TaskData, validate_task_set
from botorch_transfer.priors.hyperbo.empirical import (
    fit_empirical_prior,
    shared_inputs,
)
from botorch_transfer.priors.hyperbo.objectives import (
    EKLGroup,
    ekl_objective,
    matching_input_groups,
    nll_objective,
)
from botorch_transfer.priors.hyperbo.posterior_empirical import (
    choose_index_points,
    fit_posterior_empirical_prior,
)
from botorch_transfer.priors.hyperbo.prior import PretrainedPrior
from botorch_transfer.progress import progress_bar
from botorch_transfer.validation import check_bounds, check_inputs_within_bounds

OBJECTIVES = ("nll", "ekl", "nll+ekl", "empirical", "empirical-posterior")
#: Inputs closer than this fraction of the pooled input range (in every coordinate)
#: count as the same input when deciding whether the tasks share one design.
SHARED_INPUT_RTOL = 1e-6
#: Fewest meta-tasks from which the spread between tasks is estimated (the
#: leave-one-task-out covariance then has at least two degrees of freedom).
MIN_TASKS = 4
#: Fewest points per meta-task below which the meta-data are called thin.
MIN_TASK_POINTS = 5


class ThinMetaDataWarning(UserWarning):
    r"""The meta-data are thin (few tasks, or tasks of few points): the prior says
    little more than the pooled data's range, and ``pretrain_prior`` says why."""


def pretrain_prior(
    tasks: Sequence[TaskData] | Mapping[str, TaskData],
    objective: str | None = None,
    mean: str | None = None,
    kernel: str | None = None,
    hidden: tuple[int, ...] = (32, 32),
    num_steps: int | None = None,
    lr: float = 1e-3,
    batch_size: int | None = 50,
    validation_fraction: float = 0.1,
    eval_every: int = 100,
    patience: int = 20,
    bounds: torch.Tensor | None = None,
    seed: int = 0,
    progress: bool = True,
) -> PretrainedPrior:
    r"""Pre-train a GP prior on related tasks (HyperBO, Wang et al., Secs. 5 and 7.2).

    Objectives:

    - ``"empirical"`` (the default for matching-input data, i.e. when every task
      observed the same inputs): HyperBO's estimate of the tasks' mean and
      covariance on those inputs (eq. 4), shrunk toward a kernel fitted to all tasks
      by the leave-one-task-out likelihood and interpolated by it elsewhere
      (:mod:`botorch_transfer.priors.hyperbo.empirical`). No network is trained: it
      takes seconds, and the left-out tasks calibrate its uncertainty. ``mean``,
      ``kernel``, ``hidden``, ``num_steps``, ``lr``, ``batch_size``,
      ``validation_fraction``, ``eval_every`` and ``patience`` do not apply.
    - ``"empirical-posterior"`` (the default when the tasks' inputs differ): the
      same prior from meta-tasks at their own inputs: a base GP fitted to all tasks
      at once, every task's posterior under it on index points drawn from the
      pooled inputs, their mean and total covariance there, and the shrinkage chosen
      by the left-out tasks' own observations
      (:mod:`botorch_transfer.priors.hyperbo.posterior_empirical`). Seconds for dozens
      of tasks of hundreds of points; the same options do not apply.
    - ``"nll"`` (H-NLL; the default when the tasks' inputs differ and an option
      that only it takes is given: ``mean``, ``kernel``, ``hidden``, ``num_steps``,
      ``lr``, ``batch_size``, ``validation_fraction``, ``eval_every`` or
      ``patience``): eq. 13, the
      task-averaged negative log marginal likelihood, minimized with Adam (``lr``,
      ``num_steps`` steps, default 50,000 as in the paper) on minibatches of
      ``batch_size`` points per task and step.
    - ``"ekl"`` (H-EKL): eq. 8, the empirical KL divergence (eq. 6, with the SVD
      projection when the empirical covariance is rank-deficient) averaged over the
      matching-input task groups found in ``tasks`` (:func:`matching_input_groups`),
      minimized with L-BFGS (``num_steps`` iterations, default 100 as in the paper).
    - ``"nll+ekl"``: the sum of both, with Adam.

    A ``validation_fraction`` of the tasks (at least one, when there are at least
    five tasks) is held out: every ``eval_every`` steps the full-data NLL of the
    held-out tasks is computed, the best prior so far is kept, and training stops
    after ``patience`` evaluations without improvement. Training is deterministic
    given ``seed`` (task split, initial weights, minibatches).

    Tasks share a design when every task observed the same inputs up to a millionth
    of the pooled input range (``SHARED_INPUT_RTOL``): round-off does not make
    designs differ. Thin meta-data (fewer than ``MIN_TASKS`` tasks, or tasks of
    fewer than ``MIN_TASK_POINTS`` points) give a :class:`ThinMetaDataWarning` that
    says what is thin (the network objectives: on their default ``num_steps``).
    With fewer than ``MIN_TASKS`` tasks, or mostly such small ones, the empirical
    priors do not estimate the spread between tasks: their covariance is the base
    kernel's, with a variance no smaller than the pooled outcomes'.

    Args:
        tasks: Related tasks (a list, or a dict name -> TaskData), each with at
            least one observation; all with the same input dimension.
        objective: ``"empirical"``, ``"empirical-posterior"``, ``"nll"``,
            ``"ekl"`` or ``"nll+ekl"``; default ``None``: ``"nll"`` (the paper's
            H-NLL) when an option of the network is given, else ``"empirical"``
            when every task observed the same inputs and ``"empirical-posterior"``
            when they differ. An empirical objective with an option of the network
            is an error (the option would be ignored).
        mean: ``"mlp"`` (paper; the default), ``"constant"`` or ``"zero"``.
        kernel: ``"matern52_on_features"`` (paper; the default) or ``"matern52"``.
        hidden: MLP hidden widths (paper: (32, 32)).
        num_steps: Optimizer steps (default: 50,000 for Adam, 100 for L-BFGS).
        lr: Adam learning rate (paper: 1e-3).
        batch_size: Points per task per Adam step (paper: 50; ``None``: all).
        validation_fraction: Fraction of tasks held out for early stopping
            (0 disables it).
        eval_every: Steps between validation checks (and progress updates).
        patience: Validation checks without improvement before stopping.
        bounds: ``2 x d`` input bounds for the prior's unit-cube map, finite with
            lower < upper (default: the range of the pre-training inputs).
        seed: Random seed.
        progress: Show a progress bar with the losses when training takes more
            than a few seconds (see :mod:`botorch_transfer.progress`).

    Returns:
        The trained :class:`PretrainedPrior` (eval mode). Its ``training_history``
        lists ``{"step", "train_loss", "validation_nll"}`` at every check.

    Example:
        >>> prior = pretrain_prior(tasks)  # matching inputs: the empirical prior
        >>> prior = pretrain_prior(tasks, objective="nll", num_steps=2000)
        >>> prior.save("prior.pt")
        >>> model = PretrainedPriorGP(
        ...     train_X, train_Y, prior=PretrainedPrior.load("prior.pt")
        ... )
    """
    names = None
    if isinstance(tasks, Mapping):
        names, tasks = list(tasks.keys()), list(tasks.values())
    tasks = validate_task_set(tasks, "tasks")
    for i, t in enumerate(tasks):
        if t.n == 0:
            label = names[i] if names else i
            raise ValueError(
                f"`tasks[{label!r}]` has no observations; "
                "every task needs at least one."
            )
    # the prior is fitted to the data, never through it
    tasks = [
        TaskData(
            t.X.detach(),
            t.Y.detach(),
            None if t.Yvar is None else t.Yvar.detach(),
            t.name,
        )
        for t in tasks
    ]
    shared = _shared_design(tasks)
    # the options only the network takes that differ from their defaults
    given = _network_options_given(
        hidden=hidden,
        num_steps=num_steps,
        lr=lr,
        batch_size=batch_size,
        validation_fraction=validation_fraction,
        eval_every=eval_every,
        patience=patience,
    )
    if objective is None:
        if given or _network_options_given(mean=mean, kernel=kernel):
            objective = "nll"  # options that only the network takes ask for it
        elif shared is not None:
            objective = "empirical"
        else:
            objective = "empirical-posterior"
    if shared is not None and objective in ("empirical", "ekl", "nll+ekl"):
        tasks = shared  # near-identical inputs are one input of the shared design
    if objective not in OBJECTIVES:
        raise ValueError(f"`objective` must be one of {OBJECTIVES}, got {objective!r}.")
    if not 0 <= validation_fraction < 1:
        raise ValueError(
            f"`validation_fraction` must be in [0, 1), got {validation_fraction}."
        )
    if batch_size is not None and batch_size < 2:
        raise ValueError(f"`batch_size` must be >= 2 or None, got {batch_size}.")
    if num_steps is not None and num_steps < 1:
        raise ValueError(f"`num_steps` must be positive, got {num_steps}.")
    X0 = tasks[0].X
    d = X0.shape[-1]
    if bounds is not None:
        bounds = check_bounds(bounds, d, X0)
        check_inputs_within_bounds(tasks, bounds, names)
    thin = _warn_if_thin(tasks, names, objective, validation_fraction, num_steps)

    if objective.startswith("empirical"):
        if given:
            raise ValueError(
                f"objective={objective!r} trains no network, so "
                f"{', '.join(f'`{k}`' for k in given)} would be ignored; leave "
                "them at their defaults, or use objective='nll' to train the "
                "network they configure."
            )
        for name, value in (("mean", mean), ("kernel", kernel)):
            if value not in (None, "empirical"):
                raise ValueError(
                    f"objective={objective!r} builds its own mean and kernel; got "
                    f"`{name}`={value!r} (leave it None)."
                )
        if objective == "empirical":
            return _empirical_prior(tasks, bounds, seed, thin)
        return _posterior_empirical_prior(tasks, bounds, seed, thin)
    mean = "mlp" if mean is None else mean
    kernel = "matern52_on_features" if kernel is None else kernel
    if "empirical" in (mean, kernel):
        raise ValueError(
            "mean/kernel 'empirical' are set by objective='empirical' only."
        )

    gen = torch.Generator().manual_seed(seed)
    n_val = int(math.floor(validation_fraction * len(tasks))) if len(tasks) >= 5 else 0
    if validation_fraction > 0 and n_val == 0 and len(tasks) >= 5:
        n_val = 1
    order = torch.randperm(len(tasks), generator=gen).tolist()
    val_tasks = [tasks[i] for i in order[:n_val]]
    train_idx = sorted(order[n_val:])
    train_tasks = [tasks[i] for i in train_idx]

    groups: list[EKLGroup] = []
    if "ekl" in objective:
        raw_groups = matching_input_groups(train_tasks)
        if not raw_groups:
            raise ValueError(
                "objective='ekl' needs matching-input task groups (inputs observed by "
                "two or more tasks), but no input is shared by the training tasks; use "
                "objective='nll'."
            )
        for g in raw_groups:
            try:
                groups.append(EKLGroup(g))
            except ValueError as e:  # a zero-covariance group carries nothing
                warnings.warn(str(e), stacklevel=2)
        if not groups:
            raise ValueError(
                "No matching-input group has a non-zero empirical covariance."
            )

    lower, upper, offset, scale = _prior_maps(train_tasks, bounds)
    with torch.random.fork_rng(devices=[X0.device] if X0.device.type == "cuda" else []):
        torch.manual_seed(seed)
        prior = PretrainedPrior(
            lower, upper, offset, scale, mean=mean, kernel=kernel, hidden=hidden
        )
    prior = prior.to(X0)
    prior.train()

    use_lbfgs = objective == "ekl"
    if num_steps is None:
        num_steps = 100 if use_lbfgs else 50_000
    jitter = 1e-6 if X0.dtype == torch.float32 else 0.0

    def loss_fn() -> torch.Tensor:
        loss = torch.zeros((), dtype=X0.dtype, device=X0.device)
        if "nll" in objective:
            loss = loss + nll_objective(
                prior, train_tasks, batch_size=batch_size, generator=gen, jitter=jitter
            )
        if groups:
            loss = loss + ekl_objective(prior, groups)
        return loss

    def validation_nll() -> float:
        with torch.no_grad():
            return float(nll_objective(prior, val_tasks, jitter=jitter))

    params = [p for p in prior.parameters() if p.requires_grad]
    if use_lbfgs:
        optimizer: torch.optim.Optimizer = torch.optim.LBFGS(
            params, lr=1.0, max_iter=1, line_search_fn="strong_wolfe"
        )
    else:
        optimizer = torch.optim.Adam(params, lr=lr)

    best_state, best_val, bad_checks = None, math.inf, 0
    history: list[dict[str, float]] = []
    bar = progress_bar(
        total=num_steps, progress=progress, desc=f"pretrain ({objective})"
    )
    for step in range(1, num_steps + 1):
        if use_lbfgs:

            def closure() -> torch.Tensor:
                optimizer.zero_grad()
                loss = loss_fn()
                loss.backward()
                return loss

            loss = optimizer.step(closure)
        else:
            optimizer.zero_grad()
            loss = loss_fn()
            loss.backward()
            optimizer.step()
        bar.update(1)
        if step % eval_every == 0 or step == num_steps:
            record = {"step": step, "train_loss": float(loss.detach())}
            if val_tasks:
                val = validation_nll()
                record["validation_nll"] = val
                if val < best_val - 1e-6 * abs(
                    best_val if math.isfinite(best_val) else 1.0
                ):
                    best_val, bad_checks = val, 0
                    best_state = copy.deepcopy(prior.state_dict())
                else:
                    bad_checks += 1
            history.append(record)
            bar.set_postfix({k: f"{v:.4g}" for k, v in record.items() if k != "step"})
            if val_tasks and bad_checks >= patience:
                bar.total = bar.n  # an early stop is a finished run, not a failure
                break
    bar.close()
    if best_state is not None:
        prior.load_state_dict(best_state)
    prior.training_history = history
    prior.config["objective"] = objective
    prior.config["validation_tasks"] = [names[i] if names else i for i in order[:n_val]]
    return prior.eval()


#: ``pretrain_prior``'s defaults of the options that only the NLL network takes.
_NETWORK_DEFAULTS = {
    "mean": None,
    "kernel": None,
    "hidden": (32, 32),
    "num_steps": None,
    "lr": 1e-3,
    "batch_size": 50,
    "validation_fraction": 0.1,
    "eval_every": 100,
    "patience": 20,
}


def _network_options_given(**options: Any) -> list[str]:
    r"""The names of the options that only the NLL network takes and that differ
    from their defaults."""
    return [
        k
        for k, v in options.items()
        if (tuple(v) if k == "hidden" else v) != _NETWORK_DEFAULTS[k]
    ]


def _shared_design(tasks: Sequence[TaskData]) -> list[TaskData] | None:
    r"""The tasks on one shared design, or ``None`` if they do not share one.

    Tasks share a design (HyperBO's matching-input data, Sec. 5.2.4) when there are
    at least two of them and every task observed the same set of at least two
    inputs, up to ``SHARED_INPUT_RTOL`` of the pooled input range in every
    coordinate (inputs that differ by round-off are one input). Each task's inputs
    are then replaced by the first task's inputs they match, so that the exact
    matching of the empirical prior finds them.
    """
    if len(tasks) < 2:
        return None
    first = torch.unique(tasks[0].X, dim=0)
    if first.shape[0] < 2:
        return None
    X_all = torch.cat([t.X for t in tasks])
    span = X_all.max(0).values - X_all.min(0).values
    span = torch.where(span > 0, span, torch.ones_like(span))
    tol = SHARED_INPUT_RTOL
    snapped = [tasks[0]]
    for t in tasks[1:]:
        if torch.equal(torch.unique(t.X, dim=0), first):
            snapped.append(t)
            continue
        gap = ((t.X.unsqueeze(-2) - first) / span).abs().amax(-1)  # n x M
        nearest_gap, nearest = gap.min(-1)
        if not bool((nearest_gap <= tol).all()):
            return None
        if torch.unique(nearest).numel() != first.shape[0]:
            return None
        snapped.append(TaskData(first[nearest], t.Y, t.Yvar, t.name))
    return snapped


def _warn_if_thin(
    tasks: Sequence[TaskData],
    names: list | None,
    objective: str,
    validation_fraction: float,
    num_steps: int | None,
) -> bool:
    r"""Warn (:class:`ThinMetaDataWarning`) about what is thin in the meta-data.

    The network objectives warn on their default schedule (``num_steps=None``:
    50,000 Adam steps), not on a budget the caller chose.

    Returns:
        Whether the meta-data are too thin to estimate the spread between tasks:
        fewer than ``MIN_TASKS`` tasks, or at least half of them with fewer than
        ``MIN_TASK_POINTS`` points.
    """
    reasons = []
    if len(tasks) < MIN_TASKS:
        reasons.append(
            f"only {len(tasks)} meta-task{'s' if len(tasks) > 1 else ''}: the spread "
            "between tasks cannot be estimated"
        )
    small = [i for i, t in enumerate(tasks) if t.n < MIN_TASK_POINTS]
    if small:
        labels = [names[i] if names else i for i in small]
        shown = ", ".join(repr(label) for label in labels[:5])
        more = f" and {len(small) - 5} more" if len(small) > 5 else ""
        reasons.append(
            f"{len(small)} of {len(tasks)} meta-tasks have fewer than "
            f"{MIN_TASK_POINTS} points ({shown}{more}; smallest: "
            f"{min(tasks[i].n for i in small)})"
        )
    if objective in ("nll", "nll+ekl") and validation_fraction > 0 and len(tasks) < 5:
        reasons.append(
            f"objective={objective!r} holds out no task for early stopping with "
            "fewer than 5 tasks (it trains for all `num_steps` and can overfit)"
        )
    thin = len(tasks) < MIN_TASKS or 2 * len(small) >= len(tasks)
    if not reasons or (not objective.startswith("empirical") and num_steps is not None):
        return thin
    if objective.startswith("empirical") and thin:
        effect = (
            "the prior's mean follows the tasks, but its covariance is one kernel "
            "fitted to the pooled data, with a variance no smaller than the data's"
        )
    else:
        effect = "the prior says little more than the range of the data"
    warnings.warn(
        f"Thin meta-data for pretrain_prior: {'; '.join(reasons)}. So {effect}; "
        "more meta-tasks, or more points per task, make it informative.",
        ThinMetaDataWarning,
        stacklevel=3,
    )
    return thin


def _prior_maps(
    tasks: Sequence[TaskData], bounds: Tensor | None
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""The prior's fixed maps: input bounds (``bounds``, or the range of all
    inputs), and the mean and standard deviation of all outcomes (1 when they are
    constant)."""
    Y_all = torch.cat([t.Y.reshape(-1) for t in tasks])
    X_all = torch.cat([t.X for t in tasks])
    offset = Y_all.mean()
    scale = Y_all.std() if Y_all.numel() > 1 else torch.ones_like(offset)
    if not scale > 0:
        scale = torch.ones_like(offset)
    if bounds is None:
        return X_all.min(0).values, X_all.max(0).values, offset, scale
    return bounds[0], bounds[1], offset, scale


def _empirical_prior(
    tasks: list[TaskData], bounds: Tensor | None, seed: int, thin: bool = False
) -> PretrainedPrior:
    r"""``objective="empirical"``: see
    :mod:`botorch_transfer.priors.hyperbo.empirical`."""
    group = shared_inputs(tasks)
    lower, upper, offset, scale = _prior_maps(tasks, bounds)
    prior = PretrainedPrior(
        lower,
        upper,
        offset,
        scale,
        mean="empirical",
        kernel="empirical",
        num_index_points=group.X.shape[0],
    ).to(group.X)
    with torch.random.fork_rng(devices=[group.X.device] if group.X.is_cuda else []):
        torch.manual_seed(seed)
        history = fit_empirical_prior(prior, group, estimate_spread=not thin)
    prior.training_history = history
    prior.config["objective"] = "empirical"
    prior.config["validation_tasks"] = []
    return prior.eval()


def _posterior_empirical_prior(
    tasks: list[TaskData], bounds: Tensor | None, seed: int, thin: bool = False
) -> PretrainedPrior:
    r"""``objective="empirical-posterior"``: see
    :mod:`botorch_transfer.priors.hyperbo.posterior_empirical`."""
    V = choose_index_points(tasks, seed=seed)
    lower, upper, offset, scale = _prior_maps(tasks, bounds)
    prior = PretrainedPrior(
        lower,
        upper,
        offset,
        scale,
        mean="empirical",
        kernel="empirical",
        num_index_points=V.shape[0],
    ).to(V)
    with torch.random.fork_rng(devices=[V.device] if V.is_cuda else []):
        torch.manual_seed(seed)
        history = fit_posterior_empirical_prior(
            prior, tasks, V, seed=seed, estimate_spread=not thin
        )
    prior.training_history = history
    prior.config["objective"] = "empirical-posterior"
    prior.config["validation_tasks"] = []
    return prior.eval()
