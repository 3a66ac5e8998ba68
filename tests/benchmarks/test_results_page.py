r"""The results page's real-track tables are what the committed records give."""

from pathlib import Path

import pytest

from botorch_transfer.benchmarks.real_pairs import (
    CONFIRMATION,
    DEVELOPMENT,
    REAL_CONTROLS,
    pair_rank_correlation,
)
from botorch_transfer.benchmarks.report import (
    RECOMMENDED,
    real_track_table,
    with_regret,
)
from botorch_transfer.benchmarks.runner import read_results

BENCHMARKS = Path(__file__).parents[2] / "botorch_transfer" / "benchmarks"
RECORDS = BENCHMARKS / "real_track_records.jsonl.gz"


@pytest.mark.parametrize("half", [DEVELOPMENT, CONFIRMATION], ids=["dev", "conf"])
def test_real_track_tables_regenerate_from_the_committed_records(half):
    records, skipped = read_results(RECORDS)
    assert not skipped
    records = with_regret(records)
    present = [p for p in half if any(r["problem"] == p for r in records)]
    if not present:
        pytest.skip("no committed records of this half")
    table = real_track_table(
        records,
        present,
        RECOMMENDED,
        controls=REAL_CONTROLS,
        rank_correlations={p: pair_rank_correlation(p) for p in present},
    )
    page = (BENCHMARKS / "RESULTS.md").read_text()
    assert table in page
