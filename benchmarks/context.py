r"""The torch process state one benchmark run owns: thread count, global seed and
device (``parse_device`` is the benchmark scripts' ``--device`` type), and the
environment a run records (:func:`run_environment`)."""

from __future__ import annotations

import argparse
import platform
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import torch

#: Distributions whose versions a run record keeps.
RECORDED_PACKAGES = (
    "botorch-transfer",
    "torch",
    "botorch",
    "gpytorch",
    "linear_operator",
    "numpy",
    "scipy",
)


@contextmanager
def torch_run_context(
    num_threads: int | None = 1,
    seed: int | None = None,
    device: torch.device | str = "cpu",
) -> Iterator[None]:
    r"""Scope torch's global state to one run and restore it on exit.

    The functions that own a run (``run_experiment``, ``run_meta_experiment``, the
    timing worker) enter this context; library code they call never sets threads
    or seeds. Sparse tensor invariant checks are off inside it, as torch's default.

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
    # torch's default (no sparse invariant checks), chosen explicitly: implicit,
    # it warns from inside MultiTaskGP's posterior, which a run cannot act on
    with (
        torch.random.fork_rng(devices=cuda, enabled=seed is not None),
        torch.sparse.check_sparse_tensor_invariants(enable=False),
    ):
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
        >>> action = parser.add_argument("--device", type=parse_device, default="cpu")
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


@lru_cache(maxsize=1)
def run_environment() -> dict[str, str | None]:
    r"""What a run's numbers depend on besides its code and seed: the package
    versions, the git commit of the package (``None`` outside a git checkout), the
    CPU and torch's CPU kernel level.

    A run reproduces bit for bit only in the environment that wrote it: another
    BLAS code path or library version changes the round-off, and on real HPO
    problems a BO path can split after a few iterations on it. Records keep this
    so that a rerun can tell a code change from an environment change.

    Returns:
        A JSON-serializable dict (computed once per process).
    """
    versions = {}
    for name in RECORDED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    # torch's build tag (+cpu, +cu130) selects other kernels; a distribution's
    # metadata can lack it (a CUDA image's torch reports 2.11.0, not 2.11.0+cu130)
    versions["torch"] = torch.__version__
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {
        **versions,
        "git_commit": commit or None,
        "cpu": _cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        # the CUDA toolkit torch was built with (None for a CPU build); asking for
        # the GPU itself would initialize CUDA in a process that may fork workers
        "cuda": torch.version.cuda,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
