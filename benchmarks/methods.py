r"""The benchmark ``Method`` protocol and the one registry of method names.

A method is a BO policy. Every benchmark protocol drives it the same way:

1. ``state = method.setup(problem, data)``: everything the method learns before BO
   (a source posterior, a pre-trained prior); its time is the run's setup time.
2. ``x = method.propose(state, X, Y)``: the next ``1 x d`` query given the target
   data ``X`` (``n x d``) and ``Y`` (``n x 1``) observed so far.

Two protocols use it:

- ``"transfer"`` (:mod:`~benchmarks.runner`): one source task and one
  target task; ``data`` is a :class:`TransferData`, ``setup`` runs once per run.
- ``"meta"`` (:mod:`~benchmarks.meta`): leave-tasks-out BO; ``data``
  is a :class:`MetaData`, ``setup`` runs once per meta-training split, then
  ``task_state = method.start_task(state, generator)`` once per test task, and
  ``propose`` returns one of the split's candidate pool points.

Each name in the registry means one method everywhere (the CLI, plugins, both
protocols and the timing script resolve names here); a method lists the protocols
it applies to in ``protocols``.

Example:
    >>> register_method("my-model", AcquisitionMethod(my_model_builder))
    >>> get_method("my-model", TRANSFER).setup(problem, data)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import torch
from torch import Tensor

from botorch_transfer.data import TaskData

#: The source/target protocol (``runner.run_experiment``).
TRANSFER = "transfer"
#: The leave-tasks-out protocol (``meta.run_meta_experiment``).
META = "meta"
PROTOCOLS = (TRANSFER, META)


@dataclass(frozen=True)
class TransferData:
    r"""What a ``"transfer"`` method gets at setup.

    Attributes:
        source: The source observations, with their noise variances.
        generator: The run's policy generator (random search, Thompson draws);
            the methods' only source of randomness besides torch's global RNG,
            which the protocol seeds.
        extra_sources: Further sources of a multi-source problem.
    """

    source: TaskData
    generator: torch.Generator
    extra_sources: tuple[TaskData, ...] = ()

    @property
    def sources(self) -> tuple[TaskData, ...]:
        r"""Every source, the first one first."""
        return (self.source, *self.extra_sources)


@dataclass
class MetaData:
    r"""What a ``"meta"`` method gets at setup (once per meta-training split).

    Attributes:
        pool: ``pool_size x d`` candidate pool of the split; every query is a row.
        seed: The run's seed (for pre-training and clustering).
        load_history: Builds the meta-training tasks; called on first access of
            :attr:`history` (methods that learn nothing never pay for it).
    """

    pool: Tensor
    seed: int
    load_history: Callable[[], list[TaskData]]

    @cached_property
    def history(self) -> list[TaskData]:
        r"""The meta-training tasks (noisy evaluations on shared inputs)."""
        return self.load_history()


class Method(ABC):
    r"""A benchmark BO policy (see the module docstring for the call sequence).

    Subclasses implement :meth:`setup` and :meth:`propose`; ``"meta"`` methods may
    override :meth:`start_task` and the record hooks :meth:`run_info`,
    :meth:`task_info` and :meth:`settings`.

    Attributes:
        protocols: The protocols the method applies to (``TRANSFER``, ``META``).
    """

    protocols: ClassVar[tuple[str, ...]] = (TRANSFER,)

    @abstractmethod
    def setup(self, problem: Any, data: TransferData | MetaData) -> Any:
        r"""Learn what the method needs before BO.

        Args:
            problem: A ``TransferProblem`` or a ``MetaProblem``.
            data: The protocol's data: :class:`TransferData` or :class:`MetaData`.

        Returns:
            The method's state, passed back to :meth:`propose`.
        """

    @abstractmethod
    def propose(self, state: Any, X: Tensor, Y: Tensor) -> Tensor:
        r"""The next query.

        Args:
            state: The state from :meth:`setup` (``"meta"``: from :meth:`start_task`).
            X: ``n x d`` target inputs observed so far.
            Y: ``n x 1`` target observations.

        Returns:
            A ``1 x d`` point (``"meta"``: a row of the candidate pool).
        """

    def start_task(self, state: Any, generator: torch.Generator) -> Any:
        r"""Start BO on one test task (``"meta"`` only).

        Args:
            state: The split's state from :meth:`setup`.
            generator: The test task's policy generator.

        Returns:
            The task's state for :meth:`propose` (default: ``state``).
        """
        return state

    def run_info(self, state: Any) -> dict[str, Any]:
        r"""Extra fields of a ``"meta"`` run record (e.g. timings of the prior)."""
        return {}

    def task_info(self, state: Any) -> dict[str, Any]:
        r"""Extra fields of a ``"meta"`` record's per-task entry."""
        return {}

    def settings(self, problem: Any) -> dict[str, Any]:
        r"""Extra entries of a ``"meta"`` record's ``settings``."""
        return {}


_REGISTRY: dict[str, Method] = {}
_DESCRIPTIONS: dict[str, str] = {}


def register_method(
    name: str, method: Method, description: str | None = None
) -> Method:
    r"""Add a method to the benchmarks under ``name``.

    To use a method from the command line, register it in an importable module and
    pass ``--plugin MODULE`` (the CLI imports it in every worker process).

    Args:
        name: The method's name on the command line (lower case, no spaces).
        method: The :class:`Method`; its ``protocols`` say where it runs.
        description: One line for ``list``: the model, the acquisition, fixed or
            fitted hyperparameters, the paper (default: the first paragraph of the
            method's class docstring).

    Returns:
        ``method``.

    Raises:
        ValueError: If ``name`` is not lower case without spaces or is taken.
        TypeError: If ``method`` is not a :class:`Method`.

    Example:
        >>> register_method("mhgp", AcquisitionMethod(mean_transfer_gp))
    """
    if not name or name != name.lower() or " " in name:
        raise ValueError(f"`name` must be lower case without spaces, got {name!r}.")
    if not isinstance(method, Method):
        raise TypeError(f"`method` must be a Method, got {type(method).__name__}.")
    if name in _REGISTRY:
        raise ValueError(
            f"A method named {name!r} is already registered; registered methods: "
            f"{sorted(_REGISTRY)}."
        )
    unknown = set(method.protocols) - set(PROTOCOLS)
    if not method.protocols or unknown:
        raise ValueError(
            f"`method.protocols` must be a non-empty subset of {PROTOCOLS}, "
            f"got {method.protocols!r}."
        )
    _REGISTRY[name] = method
    if description is not None:
        _DESCRIPTIONS[name] = " ".join(description.split())
    return method


def unregister_method(name: str) -> Method:
    r"""Remove a registered method (e.g. a test's or a notebook's own).

    Args:
        name: A registered method name.

    Returns:
        The removed :class:`Method`.
    """
    method = get_method(name)
    del _REGISTRY[name]
    _DESCRIPTIONS.pop(name, None)
    return method


def get_method(name: str, protocol: str | None = None) -> Method:
    r"""The method registered as ``name``.

    Args:
        name: A registered method name.
        protocol: If given, the method must apply to this protocol.

    Returns:
        The registered :class:`Method`.

    Raises:
        ValueError: If ``name`` is unknown or (with ``protocol``) does not apply to
            that protocol; the message names the methods that do.
    """
    if protocol is not None and protocol not in PROTOCOLS:
        raise ValueError(f"`protocol` must be one of {PROTOCOLS}, got {protocol!r}.")
    if name not in _REGISTRY:
        raise ValueError(
            f"Unknown method {name!r}; choose from "
            f"{sorted(available_methods(protocol))}."
        )
    method = _REGISTRY[name]
    if protocol is not None and protocol not in method.protocols:
        raise ValueError(
            f"Method {name!r} applies to {method.protocols}, not to {protocol!r}; "
            f"choose from {sorted(available_methods(protocol))}."
        )
    return method


def describe_method(name: str) -> str:
    r"""The one-line description of a registered method.

    Args:
        name: A registered method name.

    Returns:
        The description given at registration, else the first paragraph of the
        method's class docstring on one line.
    """
    method = get_method(name)
    if name in _DESCRIPTIONS:
        return _DESCRIPTIONS[name]
    doc = (type(method).__doc__ or "").strip()
    return " ".join(doc.split("\n\n")[0].split()) or "(no description)"


def available_methods(protocol: str | None = None) -> tuple[str, ...]:
    r"""Registered method names in registration order.

    Args:
        protocol: Only the methods that apply to this protocol (all if ``None``).

    Returns:
        The names.
    """
    return tuple(
        name
        for name, method in _REGISTRY.items()
        if protocol is None or protocol in method.protocols
    )
