r"""Atomic writes: the new content or the old one, never a part, and no leftovers."""

import os
import stat

import pytest

from botorch_transfer._io import atomic_write, atomic_write_bytes


def test_a_write_replaces_the_file(tmp_path):
    path = tmp_path / "f.txt"
    atomic_write_bytes(path, b"first")
    atomic_write_bytes(path, b"second")
    assert path.read_bytes() == b"second"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_a_failing_write_leaves_the_previous_file_and_no_temporary(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"previous")
    with pytest.raises(OSError, match="No space"):
        with atomic_write(path) as fh:
            fh.write(b"half of the new")
            raise OSError(28, "No space left on device")
    assert path.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]
    # an interrupt too
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(path) as fh:
            fh.write(b"x")
            raise KeyboardInterrupt
    assert path.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_a_failing_sync_leaves_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "f.txt"
    path.write_bytes(b"previous")

    def fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="Input/output"):
        atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_permissions_follow_the_umask_or_the_replaced_file(tmp_path):
    umask = os.umask(0o022)
    try:
        new = tmp_path / "new.txt"
        atomic_write_bytes(new, b"x")
        assert stat.S_IMODE(new.stat().st_mode) == 0o644  # not a private 0o600
        kept = tmp_path / "kept.txt"
        kept.write_bytes(b"x")
        kept.chmod(0o640)
        atomic_write_bytes(kept, b"y")
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    finally:
        os.umask(umask)


@pytest.mark.skipif(os.name != "posix", reason="symbolic links")
def test_a_symbolic_link_is_written_through(tmp_path):
    target = tmp_path / "target.txt"
    target.write_bytes(b"old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    atomic_write_bytes(link, b"new")
    assert link.is_symlink() and target.read_bytes() == b"new"


def test_a_directory_is_not_replaced(tmp_path):
    folder = tmp_path / "results.jsonl"
    folder.mkdir()
    with pytest.raises(IsADirectoryError, match="is a directory"):
        atomic_write_bytes(folder, b"x")
    assert folder.is_dir() and list(tmp_path.iterdir()) == [folder]


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path):
    import signal
    import subprocess
    import sys
    import textwrap

    target = tmp_path / "prior.pt"
    # a writer killed outright (SIGKILL) in the middle of its write
    code = textwrap.dedent(
        f"""
        import time
        from botorch_transfer._io import atomic_write
        with atomic_write({str(target)!r}) as fh:
            fh.write(b"partial")
            fh.flush()
            print("writing", flush=True)
            time.sleep(60)
        """
    )
    writer = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert writer.stdout.readline().strip() == b"writing"
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".prior.pt.")  # it could not clean
    # a running writer's temporary file is kept
    running = tmp_path / f".prior.pt.{os.getpid()}-0000.tmp"
    running.write_bytes(b"")
    atomic_write_bytes(target, b"complete")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["prior.pt", running.name]
    )
    assert target.read_bytes() == b"complete"
