r"""The results page (``RESULTS.md``): each table printed from the committed
records by ``python -m benchmarks.report NAME``."""

from __future__ import annotations

from pathlib import Path

from benchmarks.meta_tables import meta_track_table
from benchmarks.real_track_tables import (
    cost_table,
    hetero_track_tables,
    multi_track_tables,
    real_track_methods_table,
    real_track_protocols_table,
)
from benchmarks.regret_tables import with_regret
from benchmarks.results_io import read_results
from benchmarks.transfer_tables import (
    TRANSFER_TRACK_SEEDS,
    ax_track_table,
    transfer_track_table,
    transfer_track_targets,
)
from botorch_transfer.test_functions.real_heterogeneous import (
    HETERO_CONFIRMATION,
    HETERO_DEVELOPMENT,
)
from botorch_transfer.test_functions.real_multi import MULTI_CONFIRMATION
from botorch_transfer.test_functions.real_pairs import (
    CONFIRMATION,
)

#: The committed records next to this module, by track.
RECORDS_DIR = Path(__file__).parent


def committed_records(track: str, development: bool = False) -> list[dict]:
    r"""The committed records of a track (``"real"``, ``"default"``, ``"meta"``:
    ``<track>_track_records.jsonl.gz`` next to this module; with ``development``,
    its development half's, ``<track>_development_records.jsonl.gz``), with regret
    filled in (:func:`with_regret`)."""
    kind = "development" if development else "track"
    records, skipped = read_results(RECORDS_DIR / f"{track}_{kind}_records.jsonl.gz")
    if skipped:
        raise ValueError(f"unreadable lines in the {track} track's records: {skipped}")
    return with_regret(records)


def results_page_table(name: str) -> str:
    r"""A table of ``RESULTS.md``, from the committed records: ``python -m
    benchmarks.report NAME`` prints it.

    Args:
        name: ``"real-methods"`` (:func:`real_track_methods_table`, confirmation
            half), ``"real-protocols"`` (:func:`real_track_protocols_table`,
            confirmation half), ``"transfer"`` (:func:`transfer_track_table`,
            seeds 0-19),
            ``"transfer-targets"`` (:func:`transfer_track_targets`, seeds 0-19),
            ``"ax"`` (:func:`ax_track_table` of ``ax_transfer_20seeds.csv``),
            ``"meta"`` (:func:`meta_track_table`), ``"multi"``
            (:func:`multi_track_tables`, confirmation half), ``"hetero"``
            (:func:`hetero_track_tables`, confirmation half),
            ``"hetero-development"`` (the same, development half) or ``"cost"``
            (:func:`cost_table` of the real track).
    """
    if name not in RESULTS_PAGE_TABLES:
        raise ValueError(
            f"unknown table {name!r}; choose from {', '.join(RESULTS_PAGE_TABLES)}"
        )
    if name in ("real-methods", "real-protocols", "cost"):
        records = committed_records("real")
        if name == "cost":
            return cost_table(records)
        if name == "real-protocols":
            return real_track_protocols_table(records, list(CONFIRMATION))
        return real_track_methods_table(records, list(CONFIRMATION))
    if name == "meta":
        return meta_track_table(committed_records("meta"))
    if name == "multi":
        return multi_track_tables(committed_records("multi"), list(MULTI_CONFIRMATION))
    if name == "hetero":
        return hetero_track_tables(
            committed_records("hetero"), list(HETERO_CONFIRMATION)
        )
    if name == "hetero-development":
        return hetero_track_tables(
            committed_records("hetero", development=True), list(HETERO_DEVELOPMENT)
        )
    if name == "ax":
        return ax_track_table(RECORDS_DIR / "ax_transfer_20seeds.csv")
    records = [
        r for r in committed_records("default") if r["seed"] < TRANSFER_TRACK_SEEDS
    ]
    if name == "transfer":
        return transfer_track_table(records)
    return transfer_track_targets(records)


#: The names :func:`results_page_table` takes.
RESULTS_PAGE_TABLES = (
    "real-methods",
    "real-protocols",
    "transfer",
    "transfer-targets",
    "ax",
    "meta",
    "multi",
    "hetero",
    "hetero-development",
    "cost",
)


def main(argv: list[str] | None = None) -> None:
    r"""Command line: ``python -m benchmarks.report NAME`` prints a
    results-page table (:func:`results_page_table`) from the committed records."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.report",
        description="print a table of RESULTS.md from the committed records",
    )
    parser.add_argument("name", choices=RESULTS_PAGE_TABLES)
    print(results_page_table(parser.parse_args(argv).name))


if __name__ == "__main__":  # pragma: no cover
    main()
