r"""A benchmark plugin whose runs take minutes (a step sleeps): the CLI's tests stop a
sweep in the middle of a run with it."""

import time

from botorch_transfer.benchmarks.methods import register_method
from botorch_transfer.benchmarks.transfer_methods import RandomSearch


class SleepingRandomSearch(RandomSearch):
    r"""Random search that sleeps ``SECONDS`` before every step."""

    SECONDS = 300.0

    def propose(self, state, X, Y):
        time.sleep(self.SECONDS)
        return super().propose(state, X, Y)


register_method("sleeping-random", SleepingRandomSearch())
