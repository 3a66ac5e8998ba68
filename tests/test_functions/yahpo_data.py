r"""Whether the YAHPO surrogates' data are here (the tests that need them skip
otherwise)."""

import pytest


def yahpo_available(scenario: str = "lcbench") -> None:
    r"""Skip the calling test unless ONNX Runtime and the ``scenario``'s data are
    here."""
    pytest.importorskip("onnxruntime")
    from botorch_transfer.test_functions.yahpo import default_data_dir

    if not (default_data_dir() / scenario / "model.onnx").exists():
        pytest.skip(f"the YAHPO {scenario} data folder is not here")
