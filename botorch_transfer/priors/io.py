r"""One file format for every saved meta prior (HyperBO's and cm-BO's).

A prior file is one ``torch.save`` of the dict::

    {
        "format": "botorch_transfer.prior",
        "format_version": 2,
        "class": "PretrainedPrior",  # or "ClusterMetaPrior"
        "payload": {...},  # the class's own data: config dicts, tensors
        "checksum": "sha256:...",  # of the payload, see payload_checksum
    }

Prior classes build their payload and call :func:`save_prior`; their ``load``
calls :func:`load_prior`, which checks the header, the checksum, the payload's
top-level keys and its tensors (finite values, one floating point dtype), and
raises :class:`PriorFileError` (a ``ValueError``) naming the file and what is wrong.
The classes then check their own keys, shapes and values with :func:`check_keys`
and :func:`check_tensors`.

Older files still load: format version 1 (the same dict without ``"checksum"``)
and the files written before the shared format (``{"format": <class name>,
"version": 1, ...payload}``). They have no checksum, so a changed byte in their
tensor data cannot be detected; every other check applies to them.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

import torch
from torch import Tensor

from botorch_transfer._io import atomic_write

FORMAT = "botorch_transfer.prior"
FORMAT_VERSION = 2
#: Format versions this version of botorch_transfer reads (1: without checksum).
READ_VERSIONS = (1, 2)
#: Version of the files written before the shared format (header keys inline).
_LEGACY_VERSION = 1
_HEADER_KEYS = {"format", "format_version", "class", "payload", "checksum"}

PathLike = str | os.PathLike | IO[bytes]


class PriorFileError(ValueError):
    r"""A file is not a readable saved prior of the expected class."""


def describe_path(path: PathLike) -> str:
    r"""``path`` for error messages: quoted file names, ``repr`` of file objects."""
    if isinstance(path, (str, os.PathLike)):
        return f"'{os.fspath(path)}'"
    return repr(path)


def payload_checksum(payload: Any) -> str:
    r"""SHA-256 of a payload, canonical and independent of how it was stored.

    The payload is walked in a fixed order (dict entries sorted by key) and every
    entry contributes its type and value; a tensor its dtype, shape and the bytes
    of its values (contiguous, on the CPU). So a changed value, dtype, shape or key
    changes the checksum, while the order of dict entries, a tensor's memory layout
    and its device do not.

    Args:
        payload: Nested dicts, lists and tuples of tensors, numbers, strings and
            ``None`` (what :func:`save_prior` accepts).

    Returns:
        ``"sha256:<hex digest>"``.
    """
    digest = hashlib.sha256()
    for chunk in _canonical_chunks(payload):
        digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def _canonical_chunks(value: Any) -> Iterator[bytes]:
    if isinstance(value, Tensor):
        # a fresh dense copy: the bytes of the values whatever the tensor's strides
        flat = torch.empty(value.numel(), dtype=value.dtype)
        flat.copy_(value.detach().reshape(-1))
        yield f"tensor:{value.dtype}:{tuple(value.shape)}:".encode()
        yield flat.view(torch.uint8).numpy().tobytes()
    elif isinstance(value, Mapping):
        yield f"dict:{len(value)}:".encode()
        for key in sorted(value, key=repr):
            yield from _canonical_chunks(key)
            yield from _canonical_chunks(value[key])
    elif isinstance(value, (list, tuple)):
        yield f"{type(value).__name__}:{len(value)}:".encode()
        for item in value:
            yield from _canonical_chunks(item)
    else:  # numbers, strings, None: their repr is exact (floats round-trip)
        yield f"{type(value).__name__}:{value!r};".encode()


def save_prior(prior: object, payload: dict[str, Any], path: PathLike) -> None:
    r"""Write ``payload`` of ``prior`` to ``path`` in the shared prior format.

    A file path is written atomically (see :func:`~botorch_transfer._io.atomic_write`):
    a save that fails part way (a full disk, an unserializable payload) leaves the
    file that was there before intact. A file object is written as it is.

    Args:
        prior: The prior object (its class name goes into the header).
        payload: The class's data (``torch.load(weights_only=True)``-safe: tensors,
            numbers, strings, lists and dicts).
        path: File path or writable binary file object.
    """
    header = {"format": FORMAT, "format_version": FORMAT_VERSION}
    blob = {**header, "class": type(prior).__name__, "payload": payload}
    blob["checksum"] = payload_checksum(payload)
    if not isinstance(path, (str, os.PathLike)):
        torch.save(blob, path)
        return
    with atomic_write(path) as fh:
        torch.save(blob, fh)


def load_prior(
    path: PathLike,
    class_name: str,
    required: Iterable[str] = (),
    map_location: str | torch.device | None = None,
) -> dict[str, Any]:
    r"""Read the payload of a ``class_name`` prior written by :func:`save_prior`.

    Files of format version 1 (no checksum) and of the format before (see the module
    docs) are accepted without a checksum check.

    Args:
        path: File path or readable binary file object.
        class_name: The class the file must hold (e.g. ``"ClusterMetaPrior"``).
        required: Keys the payload must have.
        map_location: Passed to ``torch.load`` (always with ``weights_only=True``).

    Returns:
        The payload dict.

    Raises:
        PriorFileError: If the file cannot be read by ``torch.load`` (truncated,
            corrupted, not a torch file), is not a prior file, holds another class,
            has an unsupported format version or unknown header keys, lacks its
            checksum or does not match it, lacks a ``required`` key, or holds a
            tensor with NaN or infinite values or of another floating point dtype
            than the others.
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
        payload = _read_header(blob, where, class_name, expected)
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
    _check_payload_tensors(payload, where, class_name)
    return payload


def _read_header(
    blob: dict[str, Any], where: str, class_name: str, expected: str
) -> dict[str, Any]:
    r"""The payload of a file in the shared format, its header and checksum checked."""
    found = blob.get("class")
    if found != class_name:
        raise PriorFileError(f"{where} is not {expected}: it holds a {found}.")
    version = blob.get("format_version")
    if version not in READ_VERSIONS:
        raise PriorFileError(
            f"{where} has prior file format version {version!r}; this version of "
            f"botorch_transfer reads version {FORMAT_VERSION} (and older: "
            f"{list(READ_VERSIONS)}). Save the prior again with a matching "
            "botorch_transfer version."
        )
    unknown = sorted(set(blob) - _HEADER_KEYS, key=repr)
    if unknown:
        raise PriorFileError(
            f"{where} has unexpected header key(s) {unknown} (a saved {class_name} "
            f"has {sorted(_HEADER_KEYS)}; its version is 'format_version'). The file "
            "was changed or not written by botorch_transfer."
        )
    payload = blob.get("payload")
    if not isinstance(payload, dict):
        raise PriorFileError(f"{where} has no 'payload' dict; expected {expected}.")
    if version >= 2:
        stored = blob.get("checksum")
        if stored is None:
            raise PriorFileError(
                f"{where} has format version {version} but has no 'checksum'; the "
                "file is damaged or was not written by botorch_transfer."
            )
        computed = payload_checksum(payload)
        if stored != computed:
            raise PriorFileError(
                f"{where}: the checksum of its payload does not match the stored one "
                f"({computed} != {stored!r}); the file is corrupted (changed after it "
                "was saved)."
            )
    return payload


def _tensors(value: Any, at: str = "") -> Iterator[tuple[str, Tensor]]:
    r"""``(location, tensor)`` of every tensor in a nested payload."""
    if isinstance(value, Tensor):
        yield at, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _tensors(item, f"{at}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _tensors(item, f"{at}[{i}]")


def _check_payload_tensors(payload: dict[str, Any], where: str, class_name: str):
    r"""Every floating point tensor of the payload is finite and of one dtype (only
    GPyTorch's constraint bounds, ``..._constraint.upper_bound``, may be infinite)."""
    dtype, first = None, None
    for at, tensor in _tensors(payload):
        bound = at.endswith(("lower_bound']", "upper_bound']"))
        if not tensor.is_floating_point():
            continue
        if dtype is None:
            dtype, first = tensor.dtype, at
        elif tensor.dtype != dtype:
            raise PriorFileError(
                f"{where}: the saved {class_name} has tensors of different floating "
                f"point dtypes: payload{first} has {dtype}, payload{at} has "
                f"{tensor.dtype}; all floating point tensors of a saved prior share "
                "one dtype."
            )
        if tensor.isnan().any() or not (bound or torch.isfinite(tensor).all()):
            raise PriorFileError(
                f"{where}: the saved {class_name}'s tensor payload{at} contains NaN "
                "or infinite values."
            )


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


def check_tensors(
    state: Mapping[str, Any],
    shapes: Mapping[str, tuple[int | str, ...]],
    path: PathLike,
    class_name: str,
    kinds: Mapping[str, str] | None = None,
    positive: Iterable[str] = (),
) -> dict[str, int]:
    r"""Check the tensors of a saved prior's state: shapes, kinds and signs.

    Shapes are given with named sizes (e.g. ``("K", "n", "d")``): the first tensor
    with a name fixes its size and every later one must agree.

    Args:
        state: The state dict read from the file (with all keys of ``shapes``).
        shapes: Key -> expected shape (ints or names of sizes), in checking order.
        path: The file (for the message).
        class_name: The expected prior class (for the message).
        kinds: Key -> ``"bool"`` or ``"integer"`` for tensors that are not floating
            point (default: floating point).
        positive: Keys whose values must all be positive.

    Returns:
        The named sizes.
    """
    where = f"{describe_path(path)}: the saved {class_name}'s state tensor"
    kinds = kinds or {}
    sizes: dict[str, int] = {}
    for key, pattern in shapes.items():
        tensor = state[key]
        if not isinstance(tensor, Tensor):
            raise PriorFileError(
                f"{where} '{key}' is a {type(tensor).__name__}, not a tensor."
            )
        kind = kinds.get(key, "floating point")
        if kind == "bool":
            ok = tensor.dtype == torch.bool
        elif kind == "integer":
            ok = not (tensor.is_floating_point() or tensor.is_complex())
            ok = ok and tensor.dtype != torch.bool
        else:
            ok = tensor.is_floating_point()
        if not ok:
            raise PriorFileError(
                f"{where} '{key}' has dtype {tensor.dtype}, expected a {kind} tensor."
            )
        fits = tensor.dim() == len(pattern)
        for p, size in zip(pattern, tensor.shape) if fits else ():
            if (sizes.setdefault(p, size) if isinstance(p, str) else p) != size:
                fits = False
        if not fits:
            names = [p for p in pattern if isinstance(p, str) and p in sizes]
            known = ", ".join(f"{p}={sizes[p]}" for p in names)
            text = ", ".join(str(p) for p in pattern) + (
                "," if len(pattern) == 1 else ""
            )
            raise PriorFileError(
                f"{where} '{key}' has shape {tuple(tensor.shape)}, expected ({text})"
                + (f" with {known} (as in its other tensors)." if known else ".")
            )
    for key in positive:
        if not (state[key] > 0).all():
            raise PriorFileError(f"{where} '{key}' must be positive.")
    return sizes
