r"""A benchmark plugin of misbehaving methods: the runner's and the CLI's tests check
that each one's runs are recorded as failed runs, with a clear error, and rerun.

Set ``FAULTY_PLUGIN_FIXED=1`` (before the workers start) to make every method here
behave as random search: a resumed sweep then finishes the runs that failed.
"""

import os

import torch

from benchmarks.methods import register_method
from benchmarks.transfer_protocol import RandomSearch


def _fixed() -> bool:
    return os.environ.get("FAULTY_PLUGIN_FIXED") == "1"


class NaNProposal(RandomSearch):
    r"""Proposes a point with a NaN coordinate."""

    def propose(self, state, X, Y):
        x = super().propose(state, X, Y)
        return x if _fixed() else torch.full_like(x, float("nan"))


class OutsideProposal(RandomSearch):
    r"""Proposes a point beyond the upper bounds."""

    def propose(self, state, X, Y):
        x = super().propose(state, X, Y)
        return x if _fixed() else x + 1e3


class TwoProposals(RandomSearch):
    r"""Proposes two points where one is asked."""

    def propose(self, state, X, Y):
        x = super().propose(state, X, Y)
        return x if _fixed() else torch.cat([x, x])


class DyingWorker(RandomSearch):
    r"""Kills its own process (as the out-of-memory killer does) at the first step."""

    def propose(self, state, X, Y):
        if not _fixed():
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        return super().propose(state, X, Y)


register_method("nan-proposal", NaNProposal())
register_method("outside-proposal", OutsideProposal())
register_method("two-proposals", TwoProposals())
register_method("dying-worker", DyingWorker())
