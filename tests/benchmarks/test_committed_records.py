r"""A committed run record is reproduced value for value by the code that ships with
it: the same queries' values and the same regret trace."""

import gzip
import json
from pathlib import Path

import pytest

from benchmarks.runner import run_experiment

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.mark.parametrize(
    "records, problem, method, seed",
    [
        ("multi_track", "multi-mlp-wine", "rank-weighted", 0),
        ("multi_track", "multi-svm-digit8-scrambled", "gp-ucb-fitted", 3),
        # a source that lacks a parameter: its difference's own lengthscale
        (
            "hetero_track",
            "hetero-forest-iris-to-breast_cancer-lacks-max_depth",
            "rank-weighted-aligned",
            2,
        ),
    ],
)
def test_a_committed_record_reproduces(records, problem, method, seed):
    with gzip.open(BENCHMARKS / f"{records}_records.jsonl.gz", "rt") as lines:
        (recorded,) = [
            record
            for record in map(json.loads, lines)
            if (record["problem"], record["method"], record["seed"])
            == (problem, method, seed)
        ]
    run = run_experiment(problem, method, seed, recorded["iterations"])
    assert run["values"] == recorded["values"]
    assert run["regret"] == recorded["regret"]
