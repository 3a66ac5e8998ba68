r"""The product says what things are, not how they came to be: no development rounds
or sessions, no issue numbers and no "the default until ..." in the README, the
docs, the package's code and results page, the tutorials or the test names."""

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]

#: Development history in prose: issue numbers, sessions, rounds, former defaults.
HISTORY = re.compile(
    r"\bissues? ?#?\d+"  # "issue 16", "issue #45", "issues 16"
    r"|(?<![\w&/])#\d{2,5}(?![\w-])"  # "#45" (not "&#39;", a URL's anchor or a color)
    r"|\bsessions?\b"  # "session 45", "(session of 2026-11-24)"
    r"|\brounds? \d+"  # "round 3" (not "round(x, 2)" or "rounding")
    r"|\b(?:until|up to|since|before) (?:session|issue|round)s?\b(?!-)"
    r"|\bthe default (?:until|since|up to)\b"
    r"|\bpreviously\b",
    re.IGNORECASE,
)
#: The same in a test function's name.
HISTORY_IN_NAMES = re.compile(r"issue_?\d+|session|round_?\d+", re.IGNORECASE)


def _product_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "benchmarks/RESULTS.md"]
    files += sorted((ROOT / "docs").glob("*.md"))
    files += sorted((ROOT / "botorch_transfer").rglob("*.py"))
    files += sorted((ROOT / "tutorials").rglob("*.ipynb"))
    return [f for f in files if f.is_file() and ".ipynb_checkpoints" not in f.parts]


def test_the_pattern_finds_history_and_spares_ordinary_words():
    for text in (
        "see issue 16",
        "Issue #45's target",
        "fixed in #45",
        "(session 45)",
        "round 3 of tuning",
        "the default until the new guard",
        "previously the identity map",
        "up to session 42",
    ):
        assert HISTORY.search(text), text
    for text in (
        "round(x, 2)",
        "rounding to 3 digits",
        "around 1",
        "onnxruntime.InferenceSession(path)",
        "self._session.run(None)",
        "&#39;",
        "color #1f77b4",
        "https://github.com/org/repo/issues",
        "until the simple regret is within 1%",
        "sessions_dir",
        "the same data up to round-off",
    ):
        assert not HISTORY.search(text), text


def _history(paths: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}"
        for path in paths
        for number, line in enumerate(
            path.read_text(encoding="utf-8").splitlines(), start=1
        )
        if HISTORY.search(line)
    ]


def test_no_development_history_in_the_product():
    found = _history(_product_files())
    assert not found, "development history:\n" + "\n".join(found)


def test_no_development_history_in_test_names():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {match.group(1)}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for number, line in enumerate(
            path.read_text(encoding="utf-8").splitlines(), start=1
        )
        if (match := re.match(r"\s*(?:async\s+)?def (test\w*)", line))
        and HISTORY_IN_NAMES.search(match.group(1))
    ]
    assert not found, "development history in test names:\n" + "\n".join(found)
