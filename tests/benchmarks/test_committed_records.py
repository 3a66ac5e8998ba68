r"""A committed run record is reproduced value for value by the code that ships with
it: the same queries' values and the same regret trace."""

import gzip
import json
from pathlib import Path

import pytest

from benchmarks.runner import run_experiment

RECORDS = Path(__file__).parents[2] / "benchmarks" / "multi_track_records.jsonl.gz"


@pytest.mark.parametrize(
    "problem, method, seed",
    [
        ("multi-mlp-wine", "rank-weighted", 0),
        ("multi-svm-digit8-scrambled", "gp-ucb-fitted", 3),
    ],
)
def test_a_multi_source_record_reproduces(problem, method, seed):
    with gzip.open(RECORDS, "rt") as lines:
        (recorded,) = [
            record
            for record in map(json.loads, lines)
            if (record["problem"], record["method"], record["seed"])
            == (problem, method, seed)
        ]
    run = run_experiment(problem, method, seed, recorded["iterations"])
    assert run["values"] == recorded["values"]
    assert run["regret"] == recorded["regret"]
