r"""The results file of a sweep: one JSON record per line, appended whole under a
file lock by concurrent workers, read back line by line (a torn or foreign line is
reported, not fatal), and runs told apart by their key."""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path
from typing import IO, Any

try:
    import fcntl
except ImportError:  # not POSIX: no advisory locks, one writer per results file
    fcntl = None


#: The traces of a run record that the reports compute from.
REPORTED_TRACES = ("values", "regret", "cumulative_regret", "simple_regret")


def non_finite_traces(record: dict) -> str | None:
    r"""The traces of a finished run record (and of its meta-learning ``tasks``)
    that hold NaN or infinite values.

    Args:
        record: A run record.

    Returns:
        Their names, joined for a message (e.g. ``"values, regret"``), or ``None``
        if every trace is finite (or the record is a failure).
    """
    if "error" in record:
        return None
    parts = [("", record)]
    tasks = record.get("tasks")
    if isinstance(tasks, list):
        parts += [
            (f"tasks[{i}].", t) for i, t in enumerate(tasks) if isinstance(t, dict)
        ]
    bad = [
        prefix + name
        for prefix, part in parts
        for name in REPORTED_TRACES
        if isinstance(part.get(name), list)
        and not all(
            isinstance(v, (int, float)) and math.isfinite(v) for v in part[name]
        )
    ]
    return ", ".join(bad) or None


def _not_a_record(value: Any) -> str | None:
    r"""Why a parsed line is not a run record that the reports can use (``None``
    if it is one)."""
    if not isinstance(value, dict):
        return f"not a run record: {json.dumps(value)[:40]}"
    if not (
        isinstance(value.get("problem"), str)
        and isinstance(value.get("method"), str)
        and type(value.get("seed")) is int
    ):
        return "not a run record (it needs a problem, a method and an integer seed)"
    if "error" in value:
        return None
    T = value.get("iterations", 1)
    if type(T) is not int or T < 1:
        return f"a run of {T!r} iterations (nothing to report)"
    trace = (
        value.get("simple_regret")
        if value.get("metric") == "simple_regret"
        # HPO runs: regret against the best value found, filled in at report time
        else value.get("cumulative_regret") or value.get("values")
    )
    if not (isinstance(trace, list) and trace) or not isinstance(
        value.get("iteration_s"), list
    ):
        return "an incomplete run record (no regret trace or timings)"
    return None


def parse_line(line: bytes) -> tuple[dict | None, str | None]:
    r"""Parse one line of a results file.

    Args:
        line: The line's bytes.

    Returns:
        ``(record, None)``, or ``(None, why)`` for a line that is not a run record
        (invalid UTF-8 or JSON, JSON that is not a record, an empty run);
        ``(None, None)`` for a blank line. A finished run whose traces hold NaN or
        infinite values comes back as a failure (with an ``"error"``), so that the
        reports leave it out and a resumed sweep runs it again.
    """
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    if not text.strip():
        return None, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None, "malformed JSON (e.g. the last line of an interrupted sweep)"
    why = _not_a_record(value)
    if why:
        return None, why
    bad = non_finite_traces(value)
    if bad:
        # the run finished but its trace is unusable (a NaN proposal or objective
        # value, recorded before proposals were checked): a failure, run again
        value = {
            **value,
            "error": f"non-finite (NaN or infinite) entries in its recorded {bad}; "
            "the run is counted as failed and `run` runs it again",
        }
    return value, None


def read_results(path: Path) -> tuple[list[dict], list[str]]:
    r"""Read a JSONL results file, skipping the lines that are not run records.

    Args:
        path: The results file (a missing file has no records); gzipped if its name
            ends in ``.gz``, as ``export`` writes the shipped records.

    Returns:
        The records in file order (duplicates included, see :func:`deduplicate`)
        and one ``"PATH:LINE: why"`` message per skipped line.
    """
    records, skipped = [], []
    if not path.is_file():
        return records, skipped
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            record, why = parse_line(line)
            if record is not None:
                records.append(record)
            elif why is not None:
                skipped.append(f"{path}:{number}: {why}")
    return records, skipped


def load_results(path: Path) -> tuple[list[dict], int]:
    r"""Read a JSONL results file; returns ``(records, n_skipped_lines)``.

    A line that is not a run record (e.g. the last line of an interrupted sweep) is
    skipped and counted, never fatal; see :func:`read_results` for the reasons and
    :func:`deduplicate` to keep one record per run.
    """
    records, skipped = read_results(path)
    return records, len(skipped)


#: Settings besides (problem, method, seed) that change a run's outcome: records
#: that differ in one of them are different runs (a rerun does not reuse them).
RUN_SETTINGS = ("iterations",)

RunKey = tuple[Any, ...]


def run_key(record: dict) -> RunKey:
    r"""``(problem, method, seed, *settings)`` of a run record (see
    :data:`RUN_SETTINGS`; a failure's ``iterations`` is ``None`` when the run asked
    for the problem's default)."""
    return (
        record["problem"],
        record["method"],
        record["seed"],
        *(record.get(name) for name in RUN_SETTINGS),
    )


def deduplicate(records: list[dict]) -> tuple[list[dict], int]:
    r"""Keep one record per run (:func:`run_key`).

    A finished run recorded twice (two sweeps into one file) keeps its first record.
    A failure is kept only if the run never finished (a failure with the default
    ``iterations`` counts as finished by a finished run of any ``iterations``), and
    then only its last record.

    Args:
        records: Run records in file order.

    Returns:
        The records in file order and the number of finished-run duplicates dropped.
    """
    first: dict[RunKey, dict] = {}
    for r in records:
        if "error" not in r:
            first.setdefault(run_key(r), r)
    finished = {key[:3] for key in first}
    last_failure = {run_key(r): i for i, r in enumerate(records) if "error" in r}
    kept, dropped = [], 0
    for i, r in enumerate(records):
        key = run_key(r)
        if "error" in r:
            default = all(v is None for v in key[3:])
            rerun = key in first or (default and key[:3] in finished)
            if not rerun and last_failure[key] == i:
                kept.append(r)
        elif first[key] is r:
            kept.append(r)
        else:
            dropped += 1
    return kept, dropped


def _lock(fh: IO[bytes]) -> None:
    if fcntl is not None:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)


def _unlock(fh: IO[bytes]) -> None:
    if fcntl is not None:
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _append_whole(fh: IO[bytes], line: bytes) -> None:
    r"""Append ``line`` to the locked file ``fh`` and sync it to disk; if that fails
    (a full disk, an interrupt), cut the file back to where it ended, so that no
    part of the line is left, and re-raise.

    A results file is appended to by several writers under one lock, so it cannot
    be replaced by a rename as the package's other files are; this is its atomic
    write.
    """
    # unbuffered: a failed write leaves no bytes in a buffer for `close` to add
    fd = fh.fileno()
    end = os.lseek(fd, 0, os.SEEK_END)
    try:
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        try:
            os.ftruncate(fd, end)
        except OSError:  # the torn line stays; readers skip it, writers end it
            pass
        raise


class ResultsWriter:
    r"""Append run records to a JSONL results file next to other writers of it.

    Every append holds an exclusive ``fcntl.flock`` on the file (POSIX; elsewhere
    keep to one writer per file), so lines never interleave; it first ends a line a
    killed writer left unfinished, and skips a finished run that another writer
    recorded since this one last looked, so that two sweeps into one directory
    record each run once. A line is written whole and synced to disk, or not at
    all: an append that fails (a full disk) leaves the file as it was.

    Args:
        path: The results file (created on the first append).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0  # the bytes of the file this writer has read
        self._finished: set[RunKey] = set()

    def append(self, record: dict) -> bool:
        r"""Append ``record`` as one line.

        Args:
            record: A run record (a finished run or a failure).

        Returns:
            ``False`` if the run had finished in the file already (nothing written).
        """
        line = (json.dumps(record) + "\n").encode()
        with open(self.path, "a+b") as fh:
            _lock(fh)
            try:
                if fh.seek(0, 2) < self._offset:  # replaced or truncated: reread
                    self._offset, self._finished = 0, set()
                fh.seek(self._offset)
                new = fh.read()
                for raw in new.splitlines():
                    r, _ = parse_line(raw)
                    if r is not None and "error" not in r:
                        self._finished.add(run_key(r))
                key = run_key(record)
                written = "error" in record or key not in self._finished
                if written:
                    if new and not new.endswith(b"\n"):
                        line = b"\n" + line  # keep the new record off a torn line
                    _append_whole(fh, line)
                    if "error" not in record:
                        self._finished.add(key)
                self._offset = fh.seek(0, 2)
            finally:
                _unlock(fh)
        return written
