r"""What the transfer models do with each parameter of a source experiment
attached to an Ax experiment."""

from __future__ import annotations

from typing import Any

from ax.core.auxiliary import AuxiliaryExperimentPurpose
from ax.core.experiment import Experiment
from ax.core.parameter import ChoiceParameter, RangeParameter

from botorch_transfer.models.utils.parameters import describe_roles


def source_parameter_roles(experiment: Experiment) -> dict[str, dict[str, str]]:
    r"""What the transfer models do with each parameter of each source experiment.

    For every experiment attached to ``experiment`` as a
    ``TRANSFERABLE_EXPERIMENT``, each parameter's role (as
    :func:`~botorch_transfer.models.parameter_roles` says it): ``"shared"``;
    ``"filled at v"`` for a target parameter the source lacks (Ax fills it with
    the target parameter's ``backfill_value``); ``"marginalized"`` for a parameter
    only the source has (its effect counts as the source's noise); ``"missing"``
    for a target parameter the source lacks that has no ``backfill_value`` (the
    transfer model cannot be built). A shared parameter on another range or with
    other levels says so (e.g. ``"shared (source range [0.0, 0.5])"``): the source's
    points are used where they are. Each trial from the transfer model records
    it as ``gen_metadata["source_parameters"]``.

    Args:
        experiment: The target experiment.

    Returns:
        Per source experiment (by name), its parameters' roles.

    Example:
        >>> source_parameter_roles(client._experiment)
        {'last month': {'lr': 'shared', 'width': 'filled at 64.0'}}
    """
    target = experiment.search_space.parameters
    roles = {}
    attached = experiment.auxiliary_experiments_by_purpose.get(
        AuxiliaryExperimentPurpose.TRANSFERABLE_EXPERIMENT, []
    )
    for auxiliary in attached:
        own = auxiliary.experiment.search_space.parameters
        fills = {
            name: p.backfill_value
            for name, p in target.items()
            if name not in own and p.backfill_value is not None
        }
        described = describe_roles(list(own), list(target), fills, {})
        roles[auxiliary.experiment.name] = {
            name: _described_role(role, target.get(name), own.get(name))
            for name, role in described.items()
        }
    return roles


def _described_role(role: str, target: Any, source: Any) -> str:
    r"""``role``, with what differs between the target's and the source's versions
    of a shared parameter (its range, its levels)."""
    if role != "shared":
        return role
    if isinstance(target, RangeParameter) and isinstance(source, RangeParameter):
        if (source.lower, source.upper) != (target.lower, target.upper):
            return f"shared (source range [{source.lower}, {source.upper}])"
    if isinstance(target, ChoiceParameter) and isinstance(source, ChoiceParameter):
        if list(source.values) != list(target.values):
            return f"shared (source levels {list(source.values)})"
    return role
