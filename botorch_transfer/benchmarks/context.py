r"""The torch process state one benchmark run owns: thread count and global seed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def torch_run_context(
    num_threads: int | None = 1, seed: int | None = None
) -> Iterator[None]:
    r"""Scope torch's global state to one run and restore it on exit.

    The functions that own a run (``run_experiment``, ``run_meta_experiment``, the
    timing worker) enter this context; library code they call never sets threads
    or seeds.

    Args:
        num_threads: Intra-op threads for the run (``torch.set_num_threads``);
            ``None`` keeps the current setting.
        seed: Seed of torch's global RNG for the run (used, e.g., by the raw samples
            of ``optimize_acqf``); the RNG state is restored on exit. ``None`` leaves
            the global RNG alone.

    Example:
        >>> with torch_run_context(num_threads=1, seed=0):
        ...     candidate = policy(X, Y)
    """
    previous = torch.get_num_threads()
    with torch.random.fork_rng(devices=[], enabled=seed is not None):
        if seed is not None:
            torch.manual_seed(seed)
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        try:
            yield
        finally:
            torch.set_num_threads(previous)
