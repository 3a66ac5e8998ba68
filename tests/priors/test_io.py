r"""The shared prior file format: header, payload, and one clear error per bad file.

``bad_prior_files`` builds every kind of bad file from a good one; the prior
classes' tests (``tests/priors/hyperbo/test_prior.py``,
``tests/priors/cmbo/test_prior.py``) run their ``load`` over all of them.
"""

import re
from pathlib import Path

import pytest
import torch

from botorch_transfer.priors.io import (
    FORMAT,
    FORMAT_VERSION,
    PriorFileError,
    load_prior,
    payload_checksum,
    save_prior,
)


def write_blob(blob: object, path: Path) -> None:
    r"""``torch.save`` a prior file's dict with the checksum of its (edited) payload:
    a file that is intact, but wrong in the way a test case says."""
    if isinstance(blob, dict) and "checksum" in blob:
        blob = {**blob, "checksum": payload_checksum(blob["payload"])}
    torch.save(blob, path)


def flip_a_byte_of(raw: bytes, tensor: torch.Tensor) -> bytes:
    r"""``raw`` with the lowest byte of ``tensor``'s first entry flipped: the file
    still loads, with a slightly changed value."""
    data = tensor.detach().cpu().contiguous().numpy().tobytes()
    start = raw.find(data)
    assert start >= 0 and raw.find(data, start + 1) < 0, "tensor bytes not unique"
    flipped = bytearray(raw)
    flipped[start] ^= 0x01
    return bytes(flipped)


def bad_prior_files(
    good: Path, class_name: str, other_class: str, state_key: str
) -> dict[str, tuple[Path, str]]:
    r"""Bad variants of the good prior file ``good``: ``case -> (path, message regex)``.

    Args:
        good: A file written by ``class_name.save``.
        class_name: The class that wrote it.
        other_class: Another prior class (for the wrong-class case).
        state_key: A key of the payload's ``state`` dict that ``load`` needs (a
            floating point tensor).
    """
    blob = torch.load(good, weights_only=True)
    raw = good.read_bytes()
    name = re.escape(class_name)
    not_ours = rf"is not a saved {name} \(not a file written by {name}\.save\(\)\)"
    state = blob["payload"]["state"]
    tensor = state[state_key]
    other_dtype = torch.float32 if tensor.dtype == torch.float64 else torch.float64

    def with_state_tensor(value: torch.Tensor) -> dict:
        payload = {**blob["payload"], "state": {**state, state_key: value}}
        return {**blob, "payload": payload}

    key = re.escape(f"['state']['{state_key}']")
    cases: dict[str, tuple[object, str]] = {
        "not_a_prior": ({"something": 1}, not_ours + r".*'format' is '<missing>'"),
        "not_a_dict": ([1, 2], not_ours + ": it holds a list"),
        "other_class": ({**blob, "class": other_class}, not_ours + f".*{other_class}"),
        "future_version": (
            {**blob, "format_version": FORMAT_VERSION + 98},
            rf"format version {FORMAT_VERSION + 98}; .* reads version {FORMAT_VERSION}",
        ),
        "old_format_other_version": (
            {"format": class_name, "version": 7, **blob["payload"]},
            "old format with version 7",
        ),
        "missing_payload_key": (
            {
                **blob,
                "payload": {k: v for k, v in blob["payload"].items() if k != "state"},
            },
            r"missing payload key\(s\) \['state'\]",
        ),
        "missing_state_key": (
            {
                **blob,
                "payload": {
                    **blob["payload"],
                    "state": {
                        k: v
                        for k, v in blob["payload"]["state"].items()
                        if k != state_key
                    },
                },
            },
            rf"missing state key\(s\) \['{re.escape(state_key)}'\]",
        ),
        "truncated": (raw[: len(raw) // 2], "torch.load failed.*truncated, corrupted"),
        "corrupted": (b"\x00garbage" * 64, "torch.load failed.*truncated, corrupted"),
        "empty": (b"", "torch.load failed.*truncated, corrupted"),
        "text": (b"a text file\n", "torch.load failed.*truncated, corrupted"),
        "flipped_byte": (
            flip_a_byte_of(raw, tensor),
            "checksum of its payload does not match.*changed after it was saved",
        ),
        "no_checksum": (
            {k: v for k, v in blob.items() if k != "checksum"},
            f"format version {FORMAT_VERSION} but has no 'checksum'",
        ),
        "unknown_header_key": (
            {**blob, "version": 99},
            r"unexpected header key\(s\) \['version'\]",
        ),
        "nan_tensor": (
            with_state_tensor(torch.full_like(tensor, float("nan"))),
            f"{key} contains NaN or infinite values",
        ),
        "mixed_dtypes": (
            with_state_tensor(tensor.to(other_dtype)),
            f"different floating point dtypes.*{key} has {other_dtype}",
        ),
    }
    files = {}
    for case, (content, pattern) in cases.items():
        path = good.with_name(f"{case}.pt")
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            write_blob(content, path)
        files[case] = (path, pattern)
    return files


class Dummy:
    pass


def test_header_and_round_trip(tmp_path):
    path = tmp_path / "dummy.pt"
    save_prior(Dummy(), {"config": {"a": 1}, "state": {"x": torch.ones(2)}}, path)
    blob = torch.load(path, weights_only=True)
    assert blob["format"] == FORMAT and blob["format_version"] == FORMAT_VERSION == 2
    assert blob["class"] == "Dummy" and set(blob["payload"]) == {"config", "state"}
    assert blob["checksum"] == payload_checksum(blob["payload"])
    assert blob["checksum"].startswith("sha256:")
    payload = load_prior(path, "Dummy", required=("config", "state"))
    assert payload["config"] == {"a": 1} and torch.equal(
        payload["state"]["x"], torch.ones(2)
    )


def test_every_bad_file_raises_a_clear_error(tmp_path):
    good = tmp_path / "dummy.pt"
    state = {"x": torch.arange(2.0, 4.0), "y": torch.ones(3), "n": torch.tensor([1])}
    save_prior(Dummy(), {"config": {}, "state": state}, good)
    for case, (path, pattern) in bad_prior_files(good, "Dummy", "Other", "x").items():
        with pytest.raises(PriorFileError, match=pattern) as info:
            payload = load_prior(path, "Dummy", required=("config", "state"))
            if case == "missing_state_key":  # the class checks its own nested keys
                from botorch_transfer.priors.io import check_keys

                check_keys(payload["state"], ("x",), path, "Dummy", "state")
        assert str(path) in str(info.value), case
    with pytest.raises(FileNotFoundError):
        load_prior(tmp_path / "absent.pt", "Dummy")


def test_files_written_before_the_shared_format_load(tmp_path):
    path = tmp_path / "old.pt"
    torch.save({"format": "Dummy", "version": 1, "config": {"a": 2}}, path)
    assert load_prior(path, "Dummy", required=("config",)) == {"config": {"a": 2}}


def test_files_of_format_version_1_load_without_a_checksum(tmp_path):
    # version 1 (the shared format before checksums) is read, without a checksum check
    path = tmp_path / "v1.pt"
    payload = {"config": {"a": 3}, "state": {"x": torch.ones(2)}}
    torch.save(
        {"format": FORMAT, "format_version": 1, "class": "Dummy", "payload": payload},
        path,
    )
    assert load_prior(path, "Dummy", required=("config",))["config"] == {"a": 3}
    # its tensors are still checked
    payload["state"]["x"] = torch.tensor([1.0, float("inf")])
    torch.save(
        {"format": FORMAT, "format_version": 1, "class": "Dummy", "payload": payload},
        path,
    )
    with pytest.raises(PriorFileError, match="contains NaN or infinite"):
        load_prior(path, "Dummy")


def test_checksum_covers_values_dtypes_shapes_and_structure():
    x = torch.arange(6.0).reshape(2, 3)

    def payload(x=x, y=2.5, c=(1,), key="c"):
        return {"a": {"x": x, "y": [1, "b", None, y]}, key: c}

    base = payload_checksum(payload())
    # canonical: the order of dict keys does not matter
    assert base == payload_checksum(
        {"c": (1,), "a": {"y": [1, "b", None, 2.5], "x": x}}
    )
    changed_x = x.clone()
    changed_x[0, 0] = 9.0
    for changed in (
        payload(x=changed_x),
        payload(x=x.double()),
        payload(x=x.reshape(3, 2)),
        payload(y=2.25),
        payload(c=[1]),
        payload(key="d"),
    ):
        assert payload_checksum(changed) != base
    # a non-contiguous view has the checksum of its values
    assert payload_checksum({"x": x.T}) == payload_checksum({"x": x.T.contiguous()})


def _fail_mid_write(monkeypatch) -> None:
    r"""Make ``torch.save`` write part of a file and then fail, as on a full disk."""
    real_save = torch.save

    def save(obj, f, *args, **kwargs):
        real_save(obj, f, *args, **kwargs)
        f.seek(0)
        f.truncate(10)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", save)


def test_a_failed_save_leaves_the_previous_prior(tmp_path, monkeypatch):
    path = tmp_path / "dummy.pt"
    save_prior(Dummy(), {"config": {"a": 1}, "state": {"x": torch.ones(2)}}, path)
    before = path.read_bytes()
    _fail_mid_write(monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        save_prior(Dummy(), {"config": {"a": 2}, "state": {"x": torch.zeros(2)}}, path)
    assert path.read_bytes() == before
    assert load_prior(path, "Dummy")["config"] == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["dummy.pt"]  # no temporary file


def test_a_save_writes_through_a_file_object(tmp_path):
    import io

    buffer = io.BytesIO()
    save_prior(Dummy(), {"config": {"a": 1}}, buffer)
    buffer.seek(0)
    assert load_prior(buffer, "Dummy")["config"] == {"a": 1}
