r"""Every table of the results page is what the committed records give, printed by
the command right above it."""

import re
from pathlib import Path

import pytest

from benchmarks.real_track_tables import real_track_half_table
from benchmarks.regret_tables import with_regret
from benchmarks.report import RESULTS_PAGE_TABLES, main, results_page_table
from benchmarks.results_io import read_results
from botorch_transfer.test_functions.real_pairs import CONFIRMATION, DEVELOPMENT

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
RECORDS = BENCHMARKS / "real_track_records.jsonl.gz"
DEVELOPMENT_RECORDS = BENCHMARKS / "real_development_records.jsonl.gz"
PAGE = BENCHMARKS / "RESULTS.md"


@pytest.mark.parametrize(
    "half, path",
    [(DEVELOPMENT, DEVELOPMENT_RECORDS), (CONFIRMATION, RECORDS)],
    ids=["dev", "conf"],
)
def test_real_track_tables_regenerate_from_the_committed_records(half, path):
    records, skipped = read_results(path)
    assert not skipped
    table = real_track_half_table(with_regret(records), half)
    assert table
    assert f"```\n{table}\n```" in PAGE.read_text()


def _block(name: str, table: str) -> str:
    r"""The page's command and table: a markdown table as it is, a text table in a
    code block."""
    command = f"```bash\npython -m benchmarks.report {name}\n```\n\n"
    return command + (table if table.startswith("|") else f"```\n{table}\n```")


@pytest.mark.parametrize("name", RESULTS_PAGE_TABLES)
def test_each_table_is_its_command_s_output_on_the_committed_records(name):
    table = results_page_table(name)
    assert table
    assert _block(name, table) + "\n" in PAGE.read_text()


def test_the_command_prints_the_table(capsys):
    main(["cost"])
    assert capsys.readouterr().out == results_page_table("cost") + "\n"


def test_every_table_on_the_page_comes_with_its_command():
    r"""No table without one of the checked commands above it: the markdown tables
    and the code blocks of output are the checked ones, the real track's (printed by
    ``summarize``) or the command blocks themselves."""
    page = PAGE.read_text()
    checked = [_block(n, results_page_table(n)) for n in RESULTS_PAGE_TABLES]
    real = [
        real_track_half_table(with_regret(read_results(path)[0]), half)
        for half, path in ((CONFIRMATION, RECORDS), (DEVELOPMENT, DEVELOPMENT_RECORDS))
    ]
    rest = page
    for block in checked:
        rest = rest.replace(block, "")
    for table in real:
        rest = rest.replace(f"```\n{table}\n```", "")
    assert not re.search(r"^\|", rest, flags=re.M), "a markdown table is unchecked"
    # the remaining code blocks are commands
    blocks = re.findall(r"^```(\w*)\n", rest, flags=re.M)
    assert set(blocks) <= {"bash", ""}
    assert all(lang == "bash" for lang in blocks[::2]), "an unchecked output block"


def test_the_images_on_the_page_exist():
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", PAGE.read_text()):
        assert (BENCHMARKS / image).is_file(), image
