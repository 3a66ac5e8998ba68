r"""A benchmark plugin whose runs take minutes (a step sleeps): the CLI's tests stop a
sweep in the middle of a run with it.

With ``SLOW_PLUGIN_MARKERS=DIR`` set, every step first writes an empty file named
after its process id into ``DIR``: a test knows then that the run has started.
"""

import os
import time
from pathlib import Path

from benchmarks.methods import register_method
from benchmarks.transfer_protocol import RandomSearch


class SleepingRandomSearch(RandomSearch):
    r"""Random search that sleeps ``SECONDS`` before every step."""

    SECONDS = 300.0

    def propose(self, state, X, Y):
        markers = os.environ.get("SLOW_PLUGIN_MARKERS")
        if markers:
            (Path(markers) / str(os.getpid())).touch()
        time.sleep(self.SECONDS)
        return super().propose(state, X, Y)


register_method("sleeping-random", SleepingRandomSearch())
