r"""The wheel holds the library only: no benchmark harness, run records or figures."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_the_wheel_is_the_library_alone(tmp_path):
    # built from a copy of what the wheel is made of: no build/ left by another build
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "botorch_transfer",
        source / "botorch_transfer",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
        + ["--no-build-isolation", "--wheel-dir", str(tmp_path), str(source)],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.stat().st_size < 2_000_000
    names = zipfile.ZipFile(wheel).namelist()
    packages = {name.split("/")[0] for name in names}
    assert {p for p in packages if not p.endswith(".dist-info")} == {"botorch_transfer"}
    assert not [n for n in names if n.endswith((".jsonl", ".jsonl.gz", ".png", ".csv"))]
    # the test problems' tuning tables ship: the tutorials build problems from them
    assert "botorch_transfer/test_functions/data/svm.npz" in names
