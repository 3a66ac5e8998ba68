r"""The shared prior file format: header, payload, and one clear error per bad file.

``bad_prior_files`` builds every kind of bad file from a good one; the prior
classes' tests (``tests/pretraining/test_prior.py``, ``tests/clustering/test_prior.py``)
run their ``load`` over all of them.
"""

import re
from pathlib import Path

import pytest
import torch

from botorch_transfer.priors_io import (
    FORMAT,
    FORMAT_VERSION,
    PriorFileError,
    load_prior,
    save_prior,
)


def bad_prior_files(
    good: Path, class_name: str, other_class: str, state_key: str
) -> dict[str, tuple[Path, str]]:
    r"""Bad variants of the good prior file ``good``: ``case -> (path, message regex)``.

    Args:
        good: A file written by ``class_name.save``.
        class_name: The class that wrote it.
        other_class: Another prior class (for the wrong-class case).
        state_key: A key of the payload's ``state`` dict that ``load`` needs.
    """
    blob = torch.load(good, weights_only=True)
    raw = good.read_bytes()
    name = re.escape(class_name)
    not_ours = rf"is not a saved {name} \(not a file written by {name}\.save\(\)\)"
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
    }
    files = {}
    for case, (content, pattern) in cases.items():
        path = good.with_name(f"{case}.pt")
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            torch.save(content, path)
        files[case] = (path, pattern)
    return files


class Dummy:
    pass


def test_header_and_round_trip(tmp_path):
    path = tmp_path / "dummy.pt"
    save_prior(Dummy(), {"config": {"a": 1}, "state": {"x": torch.ones(2)}}, path)
    blob = torch.load(path, weights_only=True)
    assert blob["format"] == FORMAT and blob["format_version"] == FORMAT_VERSION
    assert blob["class"] == "Dummy" and set(blob["payload"]) == {"config", "state"}
    payload = load_prior(path, "Dummy", required=("config", "state"))
    assert payload["config"] == {"a": 1} and torch.equal(
        payload["state"]["x"], torch.ones(2)
    )


def test_every_bad_file_raises_a_clear_error(tmp_path):
    good = tmp_path / "dummy.pt"
    save_prior(Dummy(), {"config": {}, "state": {"x": torch.ones(2)}}, good)
    for case, (path, pattern) in bad_prior_files(good, "Dummy", "Other", "x").items():
        with pytest.raises(PriorFileError, match=pattern) as info:
            payload = load_prior(path, "Dummy", required=("config", "state"))
            if case == "missing_state_key":  # the class checks its own nested keys
                from botorch_transfer.priors_io import check_keys

                check_keys(payload["state"], ("x",), path, "Dummy", "state")
        assert str(path) in str(info.value), case
    with pytest.raises(FileNotFoundError):
        load_prior(tmp_path / "absent.pt", "Dummy")


def test_files_written_before_the_shared_format_load(tmp_path):
    path = tmp_path / "old.pt"
    torch.save({"format": "Dummy", "version": 1, "config": {"a": 2}}, path)
    assert load_prior(path, "Dummy", required=("config",)) == {"config": {"a": 2}}
