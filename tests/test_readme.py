r"""Every ```python block of README.md runs as written, each in a fresh namespace.

A block that cannot run on its own (external data, a dask cluster) is marked on
purpose by a ``<!-- readme-test: skip (reason) -->`` line right before its fence and
is reported as skipped with that reason. Blocks that import Ax need the ``[ax]``
extra.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
SKIP = re.compile(r"<!--\s*readme-test:\s*skip\s*\((?P<reason>.*)\)\s*-->")


def python_blocks(text: str) -> list[tuple[str, int, str, str | None]]:
    r"""``(id, first line, code, skip reason)`` of every ```python block."""
    lines = text.splitlines()
    blocks, heading, seen = [], "top", {}
    i = 0
    while i < len(lines):
        if lines[i].startswith("#"):
            heading = re.sub(r"\W+", "-", lines[i].lstrip("#").strip()).strip("-")
        if lines[i].strip() == "```python":
            end = lines.index("```", i + 1)
            before = [line for line in lines[:i] if line.strip()]
            marker = SKIP.fullmatch(before[-1].strip()) if before else None
            seen[heading] = seen.get(heading, 0) + 1
            name = heading if seen[heading] == 1 else f"{heading}-{seen[heading]}"
            code = "\n".join(lines[i + 1 : end])
            blocks.append((name, i + 2, code, marker and marker["reason"]))
            i = end
        i += 1
    return blocks


BLOCKS = python_blocks(README.read_text())


def install_commands(text: str) -> tuple[list[str], list[set[str]]]:
    r"""The pinned torch versions and the extras of every ``pip install -e``."""
    torch = re.findall(r"pip install (?:--quiet )?torch==(\S+)", text)
    extras = re.findall(r'pip install (?:--quiet )?-e "\.\[([\w,-]+)\]"', text)
    return torch, [set(e.split(",")) for e in extras]


def test_ci_installs_what_the_readme_says_with_every_extra():
    quick_start = README.read_text().split("## Quick start", 1)[1].split("```")[1]
    readme = install_commands(quick_start)
    ci = install_commands((ROOT / ".ci" / "run").read_text())
    # torch pinned (a plain `pip install torch` downloads several GB), then the
    # package with the same extras
    assert readme == ci and len(ci[0]) == len(ci[1]) == 1
    assert quick_start.index("torch==") < quick_start.index("-e ")
    tomllib = pytest.importorskip("tomllib", reason="Python >= 3.11")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert ci[1][0] == set(config["project"]["optional-dependencies"])


def test_the_readme_is_a_short_users_guide():
    # details live in the docstrings (API reference), RESULTS.md and decisions.md
    assert len(README.read_text().splitlines()) <= 300


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 5


def test_a_marked_block_is_skipped_with_its_reason():
    text = (
        "## Runs\n```python\nx = 1\n```\n## Needs a cluster\n"
        "<!-- readme-test: skip (needs a dask scheduler) -->\n\n```python\ny\n```\n"
    )
    assert python_blocks(text) == [
        ("Runs", 3, "x = 1", None),
        ("Needs-a-cluster", 9, "y", "needs a dask scheduler"),
    ]


@pytest.mark.parametrize(
    "line, code, skip", [b[1:] for b in BLOCKS], ids=[b[0] for b in BLOCKS]
)
def test_readme_block_defines_what_it_uses(line, code, skip):
    # running a block misses names used only in code it does not call (a lambda)
    if skip:
        pytest.skip(f"README.md line {line}: {skip}")
    pytest.importorskip("ruff", reason="needs the [test] extra")
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F821,F401"]
        + ["--output-format", "concise", "--stdin-filename", "readme_block.py", "-"],
        input="\n" * (line - 1) + code,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, f"README.md block at line {line}:\n{result.stdout}"


@pytest.mark.parametrize(
    "line, code, skip", [b[1:] for b in BLOCKS], ids=[b[0] for b in BLOCKS]
)
def test_readme_block_runs(line, code, skip, tmp_path, monkeypatch):
    if skip:
        pytest.skip(f"README.md line {line}: {skip}")
    if re.search(r"^\s*(from|import) ax\b", code, flags=re.M):
        pytest.importorskip("ax", reason="needs the [ax] extra")
    monkeypatch.chdir(tmp_path)  # the examples save priors to the working directory
    # the plugin example registers a benchmark method: keep the registry unchanged
    from benchmarks import methods

    monkeypatch.setattr(methods, "_REGISTRY", dict(methods._REGISTRY))
    # padded so that tracebacks name the README's line numbers
    source = "\n" * (line - 1) + code
    exec(compile(source, str(README), "exec"), {"__name__": "__readme__"})
