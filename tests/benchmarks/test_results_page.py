r"""The results page's real-track tables are what the committed records give."""

from pathlib import Path

import pytest

from botorch_transfer.benchmarks.real_pairs import CONFIRMATION, DEVELOPMENT
from botorch_transfer.benchmarks.report import real_track_half_table, with_regret
from botorch_transfer.benchmarks.runner import read_results

BENCHMARKS = Path(__file__).parents[2] / "botorch_transfer" / "benchmarks"
RECORDS = BENCHMARKS / "real_track_records.jsonl.gz"


@pytest.mark.parametrize("half", [DEVELOPMENT, CONFIRMATION], ids=["dev", "conf"])
def test_real_track_tables_regenerate_from_the_committed_records(half):
    records, skipped = read_results(RECORDS)
    assert not skipped
    records = with_regret(records)
    table = real_track_half_table(records, half)
    if not table:
        pytest.skip("no committed records of this half")
    page = (BENCHMARKS / "RESULTS.md").read_text()
    assert table in page
