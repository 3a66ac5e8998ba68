r"""Every tutorial notebook runs top to bottom (``SMOKE_TEST=1``, reduced sizes)."""

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).parents[1] / "tutorials").rglob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_tutorial_runs(path, monkeypatch):
    monkeypatch.setenv("SMOKE_TEST", "1")
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    outputs = [
        o
        for cell in notebook.cells
        if cell.cell_type == "code"
        for o in cell.get("outputs", [])
    ]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), (
        "a tutorial shows a plot"
    )
    printed = "".join(o.get("text", "") for o in outputs if o.get("name") == "stdout")
    assert "notebook runtime:" in printed, "a tutorial prints its runtime"


def test_there_are_tutorials():
    assert any(p.stem == "deltabo" for p in NOTEBOOKS)
