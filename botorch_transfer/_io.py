r"""Atomic file writes: everything the package saves (priors, results exports, plots)
is written through :func:`atomic_write`.

A write goes to a temporary file in the destination's folder, is flushed and
synced to disk, and then renamed over the destination (``os.replace``, atomic on
POSIX and Windows within one file system). A reader sees the previous file or the
new one, never a half-written one, and a write that fails (a full disk, an error
while serializing, an interrupt) leaves the previous file as it was and no
temporary file behind. A process killed outright (``kill -9``, a power cut) cannot
remove its temporary file; its name carries the writer's process id, and the next
write of the same file removes the temporary files of writers that are no longer
running (on this machine).
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO


def _sync_folder(folder: str) -> None:
    r"""Sync a folder's entries to disk, so that a rename in it survives a crash
    (POSIX; a no-op where folders cannot be opened, e.g. on Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _process_running(pid: int) -> bool:
    r"""Whether a process with this id runs on this machine (True where unknown)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, ValueError):
        return True  # another user's process, or no such check on this platform
    return True


def _remove_stale_temporaries(target: str) -> None:
    r"""Remove the temporary files of earlier writes of ``target`` whose writer no
    longer runs (killed before it could clean up)."""
    folder, name = os.path.split(target)
    prefix = f".{name}."
    try:
        entries = os.listdir(folder or ".")
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(prefix) and entry.endswith(".tmp")):
            continue
        pid, _, token = entry[len(prefix) : -len(".tmp")].partition("-")
        if not (pid.isdigit() and token) or _process_running(int(pid)):
            continue
        try:
            os.unlink(os.path.join(folder, entry))
        except OSError:
            pass


def _create_temporary(target: str) -> tuple[str, int]:
    r"""A new, empty hidden file beside ``target``: its path and an open descriptor.

    Created with the default permissions (``0o666`` less the umask), as ``open``
    creates files, rather than ``tempfile``'s private ``0o600``.
    """
    folder, name = os.path.split(target)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        token = f"{os.getpid()}-{secrets.token_hex(4)}"
        temporary = os.path.join(folder, f".{name}.{token}.tmp")
        try:
            return temporary, os.open(temporary, flags, 0o666)
        except FileExistsError:  # another writer's temporary file: draw again
            continue


@contextmanager
def atomic_write(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    r"""Write a file atomically: a binary file object whose content replaces
    ``path`` when the ``with`` block ends without an exception.

    The file object writes to a temporary file in ``path``'s folder; on success it
    is flushed, synced (``os.fsync``) and renamed over ``path`` (keeping the
    permissions of a file it replaces). On an exception the temporary file is
    removed, ``path`` is left as it was, and the exception propagates. A symbolic
    link at ``path`` is written through (its target is replaced).

    Args:
        path: The destination file. Its folder must exist.

    Yields:
        A writable binary file object (``torch.save``, ``savefig`` and ``write``
        accept it).

    Example:
        >>> with atomic_write("prior.pt") as fh:
        ...     torch.save(blob, fh)
    """
    target = os.path.realpath(os.fspath(path))
    if os.path.isdir(target):
        raise IsADirectoryError(
            f"Cannot write {os.fspath(path)!r}: it is a directory, expected a file "
            "path."
        )
    _remove_stale_temporaries(target)
    temporary, fd = _create_temporary(target)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        try:  # a replaced file keeps its permissions
            os.chmod(temporary, stat.S_IMODE(os.stat(target).st_mode))
        except FileNotFoundError:
            pass
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
    _sync_folder(os.path.dirname(target))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    r"""Replace the file ``path`` with ``data`` atomically (see :func:`atomic_write`).

    Args:
        path: The destination file. Its folder must exist.
        data: The file's new content.
    """
    with atomic_write(path) as fh:
        fh.write(data)
