r"""One file format for every saved meta prior (HyperBO's and cm-BO's).

A prior file is one ``torch.save`` of the dict::

    {
        "format": "botorch_transfer.prior",
        "format_version": 1,
        "class": "PretrainedPrior",  # or "ClusterMetaPrior"
        "payload": {...},  # the class's own data: config dicts, tensors
    }

Prior classes build their payload and call :func:`save_prior`; their ``load``
calls :func:`load_prior`, which checks the header and the payload's top-level keys
and raises :class:`PriorFileError` (a ``ValueError``) naming the file and what was
expected. Files written before this format (``{"format": <class name>,
"version": 1, ...payload}``) still load.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import IO, Any

import torch

FORMAT = "botorch_transfer.prior"
FORMAT_VERSION = 1
#: Version of the files written before the shared format (header keys inline).
_LEGACY_VERSION = 1

PathLike = str | os.PathLike | IO[bytes]


class PriorFileError(ValueError):
    r"""A file is not a readable saved prior of the expected class."""


def describe_path(path: PathLike) -> str:
    r"""``path`` for error messages: quoted file names, ``repr`` of file objects."""
    if isinstance(path, (str, os.PathLike)):
        return f"'{os.fspath(path)}'"
    return repr(path)


def save_prior(prior: object, payload: dict[str, Any], path: PathLike) -> None:
    r"""Write ``payload`` of ``prior`` to ``path`` in the shared prior format.

    Args:
        prior: The prior object (its class name goes into the header).
        payload: The class's data (``torch.load(weights_only=True)``-safe: tensors,
            numbers, strings, lists and dicts).
        path: File path or writable binary file object.
    """
    header = {"format": FORMAT, "format_version": FORMAT_VERSION}
    torch.save({**header, "class": type(prior).__name__, "payload": payload}, path)


def load_prior(
    path: PathLike,
    class_name: str,
    required: Iterable[str] = (),
    map_location: str | torch.device | None = None,
) -> dict[str, Any]:
    r"""Read the payload of a ``class_name`` prior written by :func:`save_prior`.

    Args:
        path: File path or readable binary file object.
        class_name: The class the file must hold (e.g. ``"ClusterMetaPrior"``).
        required: Keys the payload must have.
        map_location: Passed to ``torch.load``.

    Returns:
        The payload dict.

    Raises:
        PriorFileError: If the file cannot be read by ``torch.load`` (truncated or
            corrupted), is not a prior file, holds another class, has an unsupported
            format version or lacks a ``required`` key.
        FileNotFoundError: If ``path`` does not exist.
    """
    where = describe_path(path)
    expected = f"a saved {class_name} (not a file written by {class_name}.save())"
    try:
        blob = torch.load(path, map_location=map_location, weights_only=True)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except Exception as e:  # torch raises RuntimeError, UnpicklingError, EOFError ...
        reason = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        raise PriorFileError(
            f"Could not read {where} as a saved {class_name}: torch.load failed "
            f"({type(e).__name__}: {reason}). The file is truncated, corrupted or not "
            "a torch.save file."
        ) from e
    if not isinstance(blob, dict):
        raise PriorFileError(
            f"{where} is not {expected}: it holds a {type(blob).__name__}, not a dict."
        )
    if blob.get("format") == FORMAT:
        found = blob.get("class")
        if found != class_name:
            raise PriorFileError(f"{where} is not {expected}: it holds a {found}.")
        version = blob.get("format_version")
        if version != FORMAT_VERSION:
            raise PriorFileError(
                f"{where} has prior file format version {version!r}; this version of "
                f"botorch_transfer reads version {FORMAT_VERSION}. Save the prior "
                "again with a matching botorch_transfer version."
            )
        payload = blob.get("payload")
        if not isinstance(payload, dict):
            raise PriorFileError(f"{where} has no 'payload' dict; expected {expected}.")
    elif "format_version" not in blob and blob.get("format") == class_name:
        # written before the shared format: header and payload in one dict
        if blob.get("version") != _LEGACY_VERSION:
            raise PriorFileError(
                f"{where} is a {class_name} file of the old format with version "
                f"{blob.get('version')!r}; only version {_LEGACY_VERSION} is supported."
            )
        payload = {k: v for k, v in blob.items() if k not in ("format", "version")}
    else:
        fmt = blob.get("format", "<missing>")
        raise PriorFileError(
            f"{where} is not {expected}: its 'format' is {fmt!r}, expected {FORMAT!r}."
        )
    check_keys(payload, required, path, class_name, "payload")
    return payload


def check_keys(
    mapping: Mapping[str, Any],
    keys: Iterable[str],
    path: PathLike,
    class_name: str,
    what: str,
) -> None:
    r"""Raise :class:`PriorFileError` if ``mapping`` lacks any of ``keys``.

    Args:
        mapping: A dict read from the file (the payload or a part of it).
        keys: The keys it must have.
        path: The file (for the message).
        class_name: The expected prior class (for the message).
        what: Which part of the file ``mapping`` is (for the message).
    """
    if not isinstance(mapping, Mapping):
        raise PriorFileError(
            f"{describe_path(path)}: the {what} of a saved {class_name} must be a "
            f"dict, got {type(mapping).__name__}."
        )
    missing = [k for k in keys if k not in mapping]
    if missing:
        raise PriorFileError(
            f"{describe_path(path)} is missing {what} key(s) {missing} of a saved "
            f"{class_name}; the file is damaged or was not written by "
            f"{class_name}.save()."
        )
