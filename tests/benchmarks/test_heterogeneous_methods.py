r"""The heterogeneous track's methods: how each maps a source on other parameters,
and a run of each through the harness."""

import pytest
import torch
from botorch.models.heterogeneous_mtgp import HeterogeneousMTGP

from benchmarks.heterogeneous_methods import (
    AlignedSource,
    TargetTask,
    aligned_sources,
    heterogeneous_mtgp,
    imputed_multitask_gp,
)
from benchmarks.methods import TransferData
from benchmarks.runner import run_experiment
from benchmarks.tracks import HETERO_METHODS
from benchmarks.transfer_protocol import RandomSearch, TransferState
from botorch_transfer import TaskData
from botorch_transfer.test_functions.problems import make_problem

LACKS = "hetero-forest-breast_cancer-to-wine-lacks-max_features"
UNKNOWN = "hetero-mlp-digits_low-to-digits_high-unknown-hidden"
EXTRA = "hetero-forest-wine-to-iris-extra-min_samples_leaf"
SUBRANGE = "hetero-mlp-wine-to-digits_high-subrange-log10_lr"


def _source(name: str, n: int = 40) -> tuple:
    problem = make_problem(name)
    space = problem.source_space
    generator = torch.Generator().manual_seed(0)
    X = space.sample(n, generator)
    Y = problem.observe_source(X, generator)
    source = TaskData(
        X, Y, torch.full_like(Y, problem.source_noise), "s", space.feature_names
    )
    return problem, source


def _column(data: TaskData, name: str) -> torch.Tensor:
    return data.X[:, data.feature_names.index(name)]


@pytest.mark.parametrize("knowledge", ["known", "filled", "ignored"])
def test_a_lacking_parameter_is_filled_at_the_value_the_knowledge_gives(knowledge):
    problem, source = _source(LACKS)
    (aligned,) = aligned_sources(problem, source, knowledge)
    assert aligned.feature_names == problem.source_space.target_feature_names
    value = {"known": 0.4, "filled": 0.4, "ignored": 0.5}[knowledge]
    torch.testing.assert_close(
        _column(aligned, "max_features"), torch.full((40,), value).double()
    )
    for name in source.feature_names:
        torch.testing.assert_close(_column(aligned, name), _column(source, name))
    torch.testing.assert_close(aligned.Y, source.Y, rtol=0, atol=0)


def test_an_unknown_value_gives_one_source_per_candidate_when_known_else_the_middle():
    problem, source = _source(UNKNOWN)
    candidates = aligned_sources(problem, source, "known")
    assert [_column(s, "hidden").unique().tolist() for s in candidates] == [
        [0.0],
        [0.5],
        [1.0],
    ]
    assert len({s.name for s in candidates}) == 3
    for knowledge in ("filled", "ignored"):
        (aligned,) = aligned_sources(problem, source, knowledge)
        assert _column(aligned, "hidden").unique().tolist() == [0.5]


def test_an_extra_parameter_is_conditioned_when_known_else_dropped():
    problem, source = _source(EXTRA)
    names = problem.source_space.target_feature_names
    (conditioned,) = aligned_sources(problem, source, "known")
    assert conditioned.feature_names == names
    # the source GP's predictions at the distinct shared points, not the data
    assert (
        conditioned.X.shape[0]
        == torch.unique(
            source.X[:, [source.feature_names.index(n) for n in names]], dim=0
        ).shape[0]
    )
    assert (conditioned.Yvar > 0).all()
    for knowledge in ("filled", "ignored"):
        (dropped,) = aligned_sources(problem, source, knowledge)
        assert dropped.feature_names == names
        torch.testing.assert_close(dropped.Y, source.Y, rtol=0, atol=0)
        for name in names:
            torch.testing.assert_close(_column(dropped, name), _column(source, name))


@pytest.mark.parametrize("knowledge", ["known", "filled", "ignored"])
def test_a_source_on_a_subrange_is_used_as_it_is(knowledge):
    problem, source = _source(SUBRANGE)
    (aligned,) = aligned_sources(problem, source, knowledge)
    torch.testing.assert_close(aligned.X, source.X, rtol=0, atol=0)
    torch.testing.assert_close(aligned.Y, source.Y, rtol=0, atol=0)


def test_bad_knowledge_and_a_problem_without_a_source_space_are_errors():
    problem, source = _source(LACKS)
    with pytest.raises(ValueError, match="`knowledge` must be one of"):
        aligned_sources(problem, source, "guessed")
    with pytest.raises(ValueError, match="`knowledge` must be one of"):
        AlignedSource(RandomSearch(), "guessed")
    plain = make_problem("forest-breast_cancer-to-wine")
    with pytest.raises(
        ValueError, match="methods need a problem with a `source_space`"
    ):
        aligned_sources(plain, source, "known")


def _state(name: str) -> tuple[TransferState, torch.Tensor, torch.Tensor]:
    problem, source = _source(name)
    generator = torch.Generator().manual_seed(1)
    X = problem.sample(6, generator)
    Y = problem.observe_target(X, generator)
    return TransferState(problem, source, generator), X, Y


def test_the_heterogeneous_mtgp_predicts_the_target_task_on_the_target_inputs():
    state, X, Y = _state(EXTRA)
    wrapped = heterogeneous_mtgp(state, X, Y)
    assert isinstance(wrapped, TargetTask)
    model = wrapped.model
    assert isinstance(model, HeterogeneousMTGP)
    # the target's two parameters first, then the source's extra one
    assert model.feature_indices == [[0, 1], [0, 2, 1]]
    test_X = torch.rand(5, 2, dtype=torch.float64)
    ours = wrapped.posterior(test_X)
    theirs = model.posterior(torch.cat([test_X, torch.zeros(5, 1).double()], -1))
    torch.testing.assert_close(ours.mean, theirs.mean, rtol=0, atol=0)
    torch.testing.assert_close(ours.variance, theirs.variance, rtol=0, atol=0)


def test_learned_imputation_replaces_only_the_sources_missing_columns():
    state, X, Y = _state(LACKS)
    (aligned,) = aligned_sources(state.problem, state.source, "filled")
    state = TransferState(state.problem, aligned, state.generator)
    model = imputed_multitask_gp(state, X, Y)
    impute = model.input_transform["impute"]
    with torch.no_grad():
        impute.raw_imputation_values.fill_(0.3)  # a value no row has
    rows = torch.tensor([[0.2, 0.6, 0.4, 0.0], [0.2, 0.6, 0.4, 1.0]]).double()
    out = impute(rows)
    # the source (task 0) lacks max_features (column 2); the target has it
    assert out[0, 2] != rows[0, 2]
    torch.testing.assert_close(out[0, [0, 1, 3]], rows[0, [0, 1, 3]])
    torch.testing.assert_close(out[1], rows[1])


@pytest.mark.parametrize("name", [UNKNOWN, EXTRA])
@pytest.mark.parametrize("method", HETERO_METHODS)
def test_every_method_runs_on_a_source_on_other_parameters(method, name):
    record = run_experiment(name, method, seed=0, iterations=2)
    problem = make_problem(name)
    assert len(record["queries"]) == 2
    assert all(len(q) == problem.dim for q in record["queries"])
    if method == "rank-weighted-aligned" and name == UNKNOWN:
        # the three candidate sources are weighed
        weights = record["diagnostics"]["source_weights"]
        assert len(weights) == 2 and all(len(w) == 3 for w in weights)


def test_the_aligned_method_hands_the_inner_method_the_aligned_sources():
    class Recorder(RandomSearch):
        def setup(self, problem, data):
            self.data = data
            return super().setup(problem, data)

    problem, source = _source(UNKNOWN)
    inner = Recorder()
    AlignedSource(inner, "known").setup(
        problem, TransferData(source, torch.Generator().manual_seed(0))
    )
    expected = aligned_sources(problem, source, "known")
    assert [s.name for s in inner.data.sources] == [s.name for s in expected]
    for got, want in zip(inner.data.sources, expected):
        torch.testing.assert_close(got.X, want.X)
