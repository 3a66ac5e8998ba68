r"""The torch process state one benchmark run owns: thread count, global seed and
device (``parse_device`` is the benchmark scripts' ``--device`` type)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def torch_run_context(
    num_threads: int | None = 1,
    seed: int | None = None,
    device: torch.device | str = "cpu",
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
        device: The run's device: a CUDA device's RNG is seeded and restored too.

    Example:
        >>> with torch_run_context(num_threads=1, seed=0):
        ...     candidate = policy(X, Y)
    """
    previous = torch.get_num_threads()
    device = torch.device(device)
    cuda = []
    if device.type == "cuda":
        cuda = [torch.cuda.current_device() if device.index is None else device.index]
    with torch.random.fork_rng(devices=cuda, enabled=seed is not None):
        if seed is not None:
            torch.manual_seed(seed)
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        try:
            yield
        finally:
            torch.set_num_threads(previous)


def parse_device(text: str) -> torch.device:
    r"""``argparse`` type of the benchmark scripts' ``--device``: a device that
    runs here.

    Args:
        text: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Returns:
        The ``torch.device``.

    Raises:
        argparse.ArgumentTypeError: Not a CPU or CUDA device name, or a CUDA
            device this machine does not have.

    Example:
        >>> parser.add_argument("--device", type=parse_device, default="cpu")
    """
    try:
        device = torch.device(text)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(
            f"expected cpu, cuda or cuda:N (the benchmarks run in float64), got "
            f"{text!r}"
        )
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (device.index or 0) >= count:
            raise argparse.ArgumentTypeError(
                f"{text!r}: this machine has {count} CUDA device(s) "
                f"(torch.cuda.is_available() is {torch.cuda.is_available()})"
            )
    return device


def wait_for(device: torch.device) -> None:
    r"""Wait for the work queued on ``device`` (CUDA runs asynchronously), so that a
    clock read next times it; nothing to wait for on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
