r"""Transfer models on Ax's native transfer-learning path, side by side.

A small comparison of BoTorch's ``MultiTaskGP`` (Ax's default transfer model, with
Ax's default transforms) and the package's source-conditioned models (through
:func:`~botorch_transfer.ax.transfer_learning_generation_strategy`) on one
:class:`~botorch_transfer.test_functions.base.TransferProblem`: the source observations
become a finished Ax experiment attached to the target experiment, and every method
runs the same Sobol start and the same number of trials. Continuous optimization
over the problem's box (a grid problem's grid is not used). Needs the ``[ax]``
extra.

Run from the command line (a few minutes per seed on 2 cores)::

    python -m benchmarks.ax_transfer --problems bohachevsky \
        gaussian-bumps --methods MultiTaskGP DeltaBOModel --trials 15 --seeds 3
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import pandas as pd
import torch
from botorch.models.model import Model
from botorch.models.multitask import MultiTaskGP

from benchmarks.context import parse_device
from botorch_transfer.test_functions.base import TransferProblem
from botorch_transfer.test_functions.problems import make_problem

try:
    from ax.adapter.transfer_learning.adapter import (
        transfer_learning_generator_specs_constructor,
    )
    from ax.api.client import Client
    from ax.api.configs import RangeParameterConfig
    from ax.core.auxiliary import AuxiliaryExperimentPurpose
    from ax.core.auxiliary_source import AuxiliarySource
    from ax.generation_strategy.generation_node import GenerationNode
    from ax.generation_strategy.generation_strategy import GenerationStrategy
except ImportError as e:  # pragma: no cover - exercised only without Ax
    raise ImportError(
        "benchmarks.ax_transfer needs Ax: pip install 'botorch_transfer[ax]'"
    ) from e

from botorch_transfer import RGPE, DeltaBOModel, DiffGP, EnvGP, TransferGuard
from botorch_transfer.ax import (
    device_generator_kwargs,
    transfer_learning_generation_strategy,
    with_sobol_initialization,
)


def _client(problem: TransferProblem, name: str, seed: int) -> Client:
    client = Client(random_seed=seed)
    client.configure_experiment(
        name=name,
        parameters=[
            RangeParameterConfig(
                name=f"x{i}", parameter_type="float", bounds=(float(lo), float(hi))
            )
            for i, (lo, hi) in enumerate(problem.bounds.T.tolist())
        ],
    )
    client.configure_optimization(objective="y")
    return client


def _axs_multitask_strategy(
    initialization_trials: int, seed: int, device: torch.device
) -> GenerationStrategy:
    r"""Sobol, then Ax's own transfer-learning specs with ``MultiTaskGP``."""
    specs, _ = transfer_learning_generator_specs_constructor(
        model_class=MultiTaskGP, use_model_selection=False
    )
    for spec in specs:
        spec.generator_kwargs.update(device_generator_kwargs(device))
    tl = GenerationNode(name="TL-MultiTaskGP", generator_specs=specs)
    # the same Sobol start as `transfer_learning_generation_strategy` (seeded Sobol
    # points do not repeat, so its deduplication never redraws them)
    return with_sobol_initialization(
        tl, initialization_trials, seed, "Sobol+TL-MultiTaskGP"
    )


def ax_transfer_comparison(
    problem: str | TransferProblem = "bohachevsky",
    model_classes: Sequence[type[Model]] = (MultiTaskGP,),
    trials: int = 10,
    initialization_trials: int = 3,
    n_source: int | None = 60,
    seeds: Sequence[int] = (0,),
    device: torch.device | str = "cpu",
    model_options: dict[str, Any] | None = None,
    label: str = "",
) -> pd.DataFrame:
    r"""Simple regret of transfer models through Ax, per trial.

    Args:
        problem: A registered problem name or a ``TransferProblem``.
        model_classes: ``MultiTaskGP`` (run with Ax's own transfer-learning specs)
            and/or the package's source-conditioned models.
        trials: Target trials per run (Sobol ones included).
        initialization_trials: Sobol trials before the model.
        n_source: Source observations (default: 60; ``None``: the problem's).
        seeds: Replicates; the Sobol points, the source sample and the
            observation noise depend on the seed only, not on the method.
        device: Where Ax fits the models and optimizes the acquisition (Ax's
            ``torch_device``); the data are drawn on the CPU.
        model_options: Keyword arguments of the package's model classes (Ax's
            ``model_options``, e.g. ``{"criterion": "sequential"}`` for a
            ``TransferGuard.of(...)`` class); not for ``MultiTaskGP``.
        label: Appended to each package model's name in the ``method`` column
            (to tell runs with other ``model_options`` apart).

    Returns:
        A DataFrame with columns ``method``, ``seed``, ``trial`` and ``regret``
        (``problem.optimum()`` minus the best noise-free target value of the trials
        so far; on a grid problem that optimum is the grid's best, which continuous
        trials can beat slightly).

    Example:
        >>> from botorch_transfer import DeltaBOModel
        >>> df = ax_transfer_comparison("bohachevsky", [MultiTaskGP, DeltaBOModel])
        >>> df.groupby("method").regret.last()
    """
    if isinstance(problem, str):
        problem = make_problem(problem)
    if trials <= initialization_trials:
        raise ValueError(
            f"`trials` ({trials}) must exceed `initialization_trials` "
            f"({initialization_trials}) for the model to run."
        )
    device = torch.device(device)
    optimum = problem.optimum()
    n = problem.n_source if n_source is None else n_source
    rows = []
    for seed in seeds:
        gen = torch.Generator().manual_seed(seed)
        X_src = problem.sample(n, gen)
        Y_src = problem.source(X_src)
        if problem.noisy_observations:
            noise = torch.randn(Y_src.shape, generator=gen, dtype=Y_src.dtype)
            Y_src = Y_src + problem.source_noise**0.5 * noise
        source = _client(problem, "source", seed)
        for x, y in zip(X_src.tolist(), Y_src.squeeze(-1).tolist(), strict=True):
            index = source.attach_trial({f"x{i}": v for i, v in enumerate(x)})
            source.complete_trial(index, raw_data={"y": y})
        for model_class in model_classes:
            client = _client(problem, "target", seed)
            client._experiment.add_auxiliary_experiment(
                AuxiliaryExperimentPurpose.TRANSFERABLE_EXPERIMENT,
                AuxiliarySource(experiment=source._experiment),
            )
            if model_class is MultiTaskGP:
                strategy = _axs_multitask_strategy(initialization_trials, seed, device)
            else:
                strategy = transfer_learning_generation_strategy(
                    model_class,
                    initialization_trials=initialization_trials,
                    use_model_selection=False,
                    model_options=model_options,
                    seed=seed,
                    torch_device=device,
                )
            client.set_generation_strategy(strategy)
            noise_gen = torch.Generator().manual_seed(10_000 + seed)
            best = -float("inf")
            for trial in range(trials):
                for index, p in client.get_next_trials(max_trials=1).items():
                    x = torch.tensor(
                        [[p[f"x{i}"] for i in range(problem.dim)]], dtype=torch.float64
                    )
                    value = float(problem.target(x))
                    eps = float(torch.randn(1, generator=noise_gen, dtype=x.dtype))
                    y = value + (
                        problem.target_noise**0.5 * eps
                        if problem.noisy_observations
                        else 0.0
                    )
                    client.complete_trial(index, raw_data={"y": y})
                    best = max(best, value)
                name = model_class.__name__
                rows.append(
                    {
                        "method": name if model_class is MultiTaskGP else name + label,
                        "seed": seed,
                        "trial": trial,
                        "regret": optimum - best,
                    }
                )
    return pd.DataFrame(rows)


def summary_table(df: pd.DataFrame, baseline: str = "MultiTaskGP") -> pd.DataFrame:
    r"""Per problem and method: mean final simple regret, mean cumulative regret
    (the sum of the per-trial simple regret) with its standard error, and the
    cumulative regret relative to ``baseline`` (same problem, same seeds).

    Args:
        df: Rows of :func:`ax_transfer_comparison`, with a ``problem`` column.
        baseline: The method the ratio is taken against.

    Returns:
        A DataFrame indexed by ``problem`` and ``method``.
    """
    per_run = df.groupby(["problem", "method", "seed"]).agg(
        final=("regret", "last"), cumulative=("regret", "sum")
    )
    grouped = per_run.groupby(["problem", "method"])
    table = pd.DataFrame(
        {
            "seeds": grouped.size(),
            "final_regret": grouped.final.mean(),
            "cumulative_regret": grouped.cumulative.mean(),
            "cumulative_se": grouped.cumulative.sem(),
        }
    )
    if baseline in df.method.unique():
        reference = table.xs(baseline, level="method").cumulative_regret
        problems = table.index.get_level_values("problem")
        table[f"vs_{baseline}"] = (
            table.cumulative_regret.to_numpy() / reference.loc[problems].to_numpy()
        )
    return table


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    r"""Command line: print regret per problem and method (see ``summary_table``)."""
    models = (MultiTaskGP, DeltaBOModel, EnvGP, DiffGP, RGPE)
    guarded = tuple(TransferGuard.of(c) for c in (DeltaBOModel, EnvGP, DiffGP))
    classes = {c.__name__: c for c in models + guarded}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", "--problems", nargs="+", default=["bohachevsky"])
    parser.add_argument(
        "--methods", nargs="+", default=["MultiTaskGP", "DeltaBOModel"], choices=classes
    )
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument("--init", type=int, default=3)
    parser.add_argument("--n-source", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--output", help="CSV file for the per-trial regret rows")
    parser.add_argument(
        "--guard-criterion",
        choices=("loo", "sequential"),
        help="criterion of the Guarded* classes (TransferGuard.of); their method "
        "name gets it as a suffix, e.g. GuardedDeltaBOModel[sequential]",
    )
    parser.add_argument(
        "--device",
        type=parse_device,
        default="cpu",
        help="Ax's torch_device: cpu (default) or cuda",
    )
    args = parser.parse_args(argv)
    guard_options = {}
    if args.guard_criterion is not None:
        if any(not m.startswith("Guarded") for m in args.methods if m != "MultiTaskGP"):
            parser.error("--guard-criterion needs the Guarded* methods only")
        guard_options = {
            "model_options": {"criterion": args.guard_criterion},
            "label": f"[{args.guard_criterion}]",
        }
    frames = []
    for problem in args.problem:
        frame = ax_transfer_comparison(
            problem,
            [classes[m] for m in args.methods],
            trials=args.trials,
            initialization_trials=args.init,
            n_source=args.n_source,
            seeds=range(args.seeds),
            device=args.device,
            **guard_options,
        )
        frames.append(frame.assign(problem=problem))
        df = pd.concat(frames, ignore_index=True)
        if args.output:
            df.to_csv(args.output, index=False)
    with pd.option_context("display.float_format", "{:.3f}".format):
        print(summary_table(df).to_string())
    return df


if __name__ == "__main__":  # pragma: no cover
    main()
