r"""The source-conditioned models on Ax's native transfer-learning path
(``TransferLearningAdapter``, source experiments attached to the target experiment).
Skipped when Ax is not installed."""

import math
import warnings

import pandas as pd
import pytest
import torch

pytest.importorskip("ax")

from ax.adapter.transfer_learning.adapter import TransferLearningAdapter  # noqa: E402
from ax.api.client import Client  # noqa: E402
from ax.api.configs import ChoiceParameterConfig, RangeParameterConfig  # noqa: E402
from ax.core.auxiliary import AuxiliaryExperimentPurpose  # noqa: E402
from ax.core.auxiliary_source import AuxiliarySource  # noqa: E402
from ax.generation_strategy.best_model_selector import (  # noqa: E402
    SingleDiagnosticBestModelSelector,
)
from botorch.fit import fit_gpytorch_mll  # noqa: E402
from botorch.models.transforms import Normalize, Standardize  # noqa: E402
from botorch.models.transforms.input import (  # noqa: E402
    ChainedInputTransform,
    LearnedFeatureImputation,
)
from botorch.utils.datasets import MultiTaskDataset, SupervisedDataset  # noqa: E402
from gpytorch.mlls import ExactMarginalLogLikelihood  # noqa: E402

from botorch_transfer import (  # noqa: E402
    RGPE,
    DeltaBOModel,
    DiffGP,
    EnvGP,
    TaskColumn,
    TaskData,
)
from botorch_transfer.ax import (  # noqa: E402
    TransferModelUnusedError,
    TransferModelUnusedWarning,
    source_parameter_roles,
    task_data_from_dataframe,
    task_data_from_experiment,
    transfer_generation_strategy,
    transfer_learning_generation_strategy,
)

F64 = torch.float64
BOUNDS = torch.tensor([[0.0, -1.0], [1.0, 2.0]], dtype=F64)
TL = AuxiliaryExperimentPurpose.TRANSFERABLE_EXPERIMENT


def f(p, shift=0.0):
    return math.sin(6 * p["x0"]) + p["x1"] + shift + 0.3 * p.get("z", 0.0)


def parameters(extra=False):
    params = [
        RangeParameterConfig(name="x0", parameter_type="float", bounds=(0.0, 1.0)),
        RangeParameterConfig(name="x1", parameter_type="float", bounds=(-1.0, 2.0)),
    ]
    if extra:
        params.append(
            RangeParameterConfig(name="z", parameter_type="float", bounds=(0.0, 1.0))
        )
    return params


def source_experiment(name, shift, n=8, seed=1, extra=False):
    client = Client(random_seed=seed)
    client.configure_experiment(name=name, parameters=parameters(extra))
    client.configure_optimization(objective="y")
    for index, p in client.get_next_trials(max_trials=n).items():
        client.complete_trial(index, raw_data={"y": f(p, shift)})
    return client._experiment


def run_target(
    model_class,
    sources,
    trials=5,
    init=2,
    use_model_selection=False,
    model_options=None,
    on_transfer_failure="warn",
):
    client = Client(random_seed=0)
    client.configure_experiment(name="target", parameters=parameters())
    client.configure_optimization(objective="y")
    for source in sources:
        client._experiment.add_auxiliary_experiment(TL, AuxiliarySource(source))
    client.set_generation_strategy(
        transfer_learning_generation_strategy(
            model_class,
            initialization_trials=init,
            use_model_selection=use_model_selection,
            model_options=model_options,
            seed=0,
            on_transfer_failure=on_transfer_failure,
        )
    )
    for _ in range(trials):
        for index, p in client.get_next_trials(max_trials=1).items():
            client.complete_trial(index, raw_data={"y": f(p)})
    return client


def target_data(client, n):
    df = client.summarize().sort_values("trial_index")
    data = task_data_from_dataframe(df, ["x0", "x1"], "y")
    return data.X[:n], data.Y[:n]


def with_task_column(X, value=0.0):
    return torch.cat([X, torch.full_like(X[..., :1], value)], dim=-1)


def fitted_by_hand(model_class, X, Y, sources):
    r"""``model_class`` on the target data with the source experiments and the
    transforms Ax gives it, fitted."""
    model = model_class(
        X,
        Y,
        source=[task_data_from_experiment(s, "y") for s in sources],
        input_transform=Normalize(2, bounds=BOUNDS),
        outcome_transform=Standardize(m=1),
    )
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


def check_against_model_by_hand(client, model_class):
    r"""The model Ax fitted is ours, and equals one built and fitted by hand."""
    # in Ax's order: the experiment lists the last attached source first
    sources = [
        a.experiment for a in client._experiment.auxiliary_experiments_by_purpose[TL]
    ]
    adapter = client._generation_strategy.adapter
    assert isinstance(adapter, TransferLearningAdapter)
    model = adapter.generator.surrogate.model
    assert type(model) is model_class
    n = model.target_X.shape[-2]
    X, Y = target_data(client, n)
    torch.testing.assert_close(model.target_X, X)
    by_hand = fitted_by_hand(model_class, X, Y, sources)
    X_test = (
        torch.rand(6, 2, generator=torch.Generator().manual_seed(3), dtype=F64)
        * (BOUNDS[1] - BOUNDS[0])
        + BOUNDS[0]
    )
    # Ax queries with the task column (target task 0) appended
    a, b = model.posterior(with_task_column(X_test)), by_hand.posterior(X_test)
    torch.testing.assert_close(a.mean, b.mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(a.variance, b.variance, rtol=1e-5, atol=1e-5)
    # and Ax's predictions (in the user's units) are the model's
    point = {"x0": float(X_test[0, 0]), "x1": float(X_test[0, 1])}
    prediction = client.predict([point])[0]["y"]
    assert prediction[0] == pytest.approx(b.mean[0, 0].item(), rel=1e-5, abs=1e-5)
    return model


@pytest.mark.parametrize("model_class", [DeltaBOModel, EnvGP, DiffGP, RGPE])
def test_one_source_experiment_through_the_transfer_learning_adapter(model_class):
    sources = [source_experiment("source_a", shift=0.5)]
    client = run_target(model_class, sources)
    assert len(client._experiment.trials) == 5
    check_against_model_by_hand(client, model_class)


@pytest.mark.parametrize(
    "model_class",
    # Env-GP's exact GP on both sources' points is the slowest: with -m slow
    [DeltaBOModel, pytest.param(EnvGP, marks=pytest.mark.slow), DiffGP, RGPE],
)
def test_two_source_experiments(model_class):
    sources = [
        source_experiment("source_a", shift=0.5),
        source_experiment("source_b", shift=-0.5, n=6, seed=2),
    ]
    client = run_target(model_class, sources)
    assert len(client._experiment.trials) == 5
    model = check_against_model_by_hand(client, model_class)
    assert model._target_task_value == 0.0


def test_cross_validation_model_selection_runs_on_the_transfer_model():
    sources = [source_experiment("source_a", shift=0.5)]
    client = run_target(
        DeltaBOModel, sources, trials=6, init=3, use_model_selection=True
    )
    node = client._generation_strategy._curr
    assert node.best_model_selector is not None
    botl, plain = node.generator_specs
    assert type(botl.fitted_adapter.generator.surrogate.model) is DeltaBOModel
    for spec in (botl, plain):
        # leave-one-out over the target trials, compared by rank correlation
        assert spec.cv_results is not None and len(spec.cv_results) == 5
        assert "Rank correlation" in spec.diagnostics
    assert node.generator_spec_to_gen_from in (botl, plain)


def source_lacking_x1():
    client = Client(random_seed=1)
    client.configure_experiment(name="source_x0", parameters=parameters()[:1])
    client.configure_optimization(objective="y")
    for index, p in client.get_next_trials(max_trials=6).items():
        client.complete_trial(index, raw_data={"y": f({"x1": 0.5, **p}, shift=0.5)})
    return client._experiment


def source_without_data():
    client = Client(random_seed=1)
    client.configure_experiment(name="source_empty", parameters=parameters())
    client.configure_optimization(objective="y")
    client.get_next_trials(max_trials=2)
    return client._experiment


def model_trials(client):
    r"""The generator runs of the trials after the Sobol ones."""
    runs = [t.generator_runs[0] for t in client._experiment.trials.values()]
    return [gr for gr in runs if gr._generation_node_name != "Sobol"]


@pytest.mark.parametrize(
    "sources, cause",
    [
        ("none", "auxiliary sources"),
        ("lacking", r"lacks the target's parameter\(s\) \['x1'\]"),
        ("empty", "no attached experiment contributed data"),
    ],
)
def test_model_selection_says_when_the_transfer_model_cannot_be_built(sources, cause):
    make = {"none": list, "lacking": source_lacking_x1, "empty": source_without_data}
    sources = make[sources]()
    sources = sources if isinstance(sources, list) else [sources]
    with pytest.warns(TransferModelUnusedWarning, match=cause) as record:
        client = run_target(
            DeltaBOModel, sources, trials=4, init=3, use_model_selection=True
        )
    # the warning names the generator the trial really came from
    messages = [str(w.message) for w in record]
    assert any("`BoTorch` (Ax's GP on the target trials alone" in m for m in messages)
    (run,) = model_trials(client)
    assert run._generator_key == "BoTorch"
    assert run.gen_metadata["transfer_model_used"] is False
    assert "could not be built" in run.gen_metadata["transfer_model_unused_reason"]


def test_the_strategy_can_fail_when_the_transfer_model_cannot_be_built():
    with pytest.raises(TransferModelUnusedError, match="lacks the target's parameter"):
        run_target(
            DeltaBOModel,
            [source_lacking_x1()],
            trials=4,
            init=3,
            use_model_selection=True,
            on_transfer_failure="raise",
        )
    with pytest.raises(ValueError, match="on_transfer_failure"):
        transfer_learning_generation_strategy(DeltaBOModel, on_transfer_failure="no")


def test_a_trial_from_the_transfer_model_is_recorded_as_such():
    sources = [source_experiment("source_a", shift=0.5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", TransferModelUnusedWarning)
        client = run_target(DeltaBOModel, sources, trials=4, init=3)
    (run,) = model_trials(client)
    assert run._generator_key == "BOTL"
    assert run.gen_metadata["transfer_model_used"] is True


class _PreferTheLast(SingleDiagnosticBestModelSelector):
    r"""Picks the last spec after cross-validating all (the target-only GP)."""

    def best_model(self, generator_specs):
        super().best_model(generator_specs)
        return generator_specs[-1]


def test_model_selection_choosing_the_target_only_gp_is_said_not_raised():
    sources = [source_experiment("source_a", shift=0.5)]
    client = Client(random_seed=0)
    client.configure_experiment(name="target", parameters=parameters())
    client.configure_optimization(objective="y")
    client._experiment.add_auxiliary_experiment(TL, AuxiliarySource(sources[0]))
    strategy = transfer_learning_generation_strategy(
        DeltaBOModel, initialization_trials=3, seed=0, on_transfer_failure="raise"
    )
    node = strategy._nodes[-1]
    selector = node.best_model_selector
    node.best_model_selector = _PreferTheLast(
        diagnostic=selector.diagnostic,
        metric_aggregation=selector.metric_aggregation,
        criterion=selector.criterion,
        cv_kwargs=selector.cv_kwargs,
    )
    client.set_generation_strategy(strategy)
    for _ in range(3):
        for index, p in client.get_next_trials(max_trials=1).items():
            client.complete_trial(index, raw_data={"y": f(p)})
    with pytest.warns(
        TransferModelUnusedWarning, match="model selection preferred `BoTorch`"
    ):
        client.get_next_trials(max_trials=1)
    (run,) = model_trials(client)
    assert run.gen_metadata["transfer_model_used"] is False
    assert "Rank correlation" in run.gen_metadata["transfer_model_unused_reason"]


def test_source_parameter_roles_name_a_parameter_that_cannot_be_filled():
    client = Client(random_seed=1)
    client.configure_experiment(name="target", parameters=parameters())
    client.configure_optimization(objective="y")
    client._experiment.add_auxiliary_experiment(
        TL, AuxiliarySource(source_lacking_x1())
    )
    (roles,) = source_parameter_roles(client._experiment).values()
    assert roles == {"x0": "shared", "x1": "missing"}


def test_a_source_on_a_sub_range_and_with_fewer_levels_is_used_as_it_is():
    # last month: x0 on [0, 0.5] only and the choice `opt` without the level "c"
    def configured(name, x0_upper, levels):
        client = Client(random_seed=1)
        client.configure_experiment(
            name=name,
            parameters=[
                RangeParameterConfig(
                    name="x0", parameter_type="float", bounds=(0.0, x0_upper)
                ),
                ChoiceParameterConfig(
                    name="opt", parameter_type="str", values=levels, is_ordered=False
                ),
            ],
        )
        client.configure_optimization(objective="y")
        return client

    def g(p):
        return math.sin(6 * p["x0"]) + (0.3 if p["opt"] == "b" else 0.0)

    source = configured("narrow", 0.5, ["a", "b"])
    for index, p in source.get_next_trials(max_trials=8).items():
        source.complete_trial(index, raw_data={"y": g(p)})
    target = configured("target", 1.0, ["a", "b", "c"])
    target._experiment.add_auxiliary_experiment(TL, AuxiliarySource(source._experiment))
    roles = {
        "narrow": {
            "x0": "shared (source range [0.0, 0.5])",
            "opt": "shared (source levels ['a', 'b'])",
        }
    }
    assert source_parameter_roles(target._experiment) == roles
    target.set_generation_strategy(
        transfer_learning_generation_strategy(
            initialization_trials=2, use_model_selection=False, seed=0
        )
    )
    for _ in range(3):
        for index, p in target.get_next_trials(max_trials=1).items():
            target.complete_trial(index, raw_data={"y": g(p)})
    (run,) = model_trials(target)
    assert run.gen_metadata["transfer_model_used"] is True
    assert run.gen_metadata["source_parameters"] == roles


def test_transfer_learning_strategy_needs_an_initial_target_trial():
    with pytest.raises(ValueError, match="initialization_trials"):
        transfer_learning_generation_strategy(DeltaBOModel, initialization_trials=0)


def test_source_experiment_missing_a_parameter():
    # the source never varied `x1`; as Ax defines it, the target parameter's
    # backfill value (0.5) fills the source's column (FillMissingParameters)
    client = Client(random_seed=1)
    client.configure_experiment(name="source_x0", parameters=parameters()[:1])
    client.configure_optimization(objective="y")
    for index, p in client.get_next_trials(max_trials=6).items():
        client.complete_trial(index, raw_data={"y": f({"x1": 0.5, **p}, shift=0.5)})
    source = client._experiment

    target = Client(random_seed=0)
    target.configure_experiment(name="target", parameters=parameters())
    target.configure_optimization(objective="y")
    target._experiment.search_space.parameters["x1"]._backfill_value = 0.5
    target._experiment.add_auxiliary_experiment(TL, AuxiliarySource(source))
    target.set_generation_strategy(
        transfer_learning_generation_strategy(
            EnvGP, initialization_trials=2, use_model_selection=False, seed=0
        )
    )
    for _ in range(4):
        for index, p in target.get_next_trials(max_trials=1).items():
            target.complete_trial(index, raw_data={"y": f(p)})
    model = target._generation_strategy.adapter.generator.surrogate.model
    assert type(model) is EnvGP
    roles = {"source_x0": {"x0": "shared", "x1": "filled at 0.5"}}
    assert source_parameter_roles(target._experiment) == roles
    assert all(
        run.gen_metadata["source_parameters"] == roles for run in model_trials(target)
    )
    n = model.target_X.shape[-2]
    X, Y = target_data(target, n)
    df = client.summarize().assign(x1=0.5)
    by_hand = EnvGP(
        X,
        Y,
        source=task_data_from_dataframe(df, ["x0", "x1"], "y"),
        input_transform=Normalize(2, bounds=BOUNDS),
        outcome_transform=Standardize(m=1),
    )
    by_hand.load_state_dict(model.state_dict())
    X_test = torch.rand(4, 2, generator=torch.Generator().manual_seed(4), dtype=F64)
    torch.testing.assert_close(
        model.posterior(with_task_column(X_test)).mean, by_hand.posterior(X_test).mean
    )


@pytest.mark.parametrize("use_model_selection", [False, True])
def test_source_experiment_with_an_extra_parameter(use_model_selection):
    # `z` has no backfill value: Ax hands over per-task feature sets (the source's
    # with `z`). Ours use the source on the target's parameters, averaging over `z`
    # (Ax's MultiTaskGP imputes a learned `z` for the target instead).
    source = source_experiment("source_z", shift=0.5, extra=True)
    with pytest.warns(UserWarning, match=r"\['z'\]"):
        client = run_target(
            DeltaBOModel, [source], trials=5, use_model_selection=use_model_selection
        )
    assert len(client._experiment.trials) == 5
    if use_model_selection:
        # Ax 1.3's cross-validation cannot run on per-task feature sets (for its
        # MultiTaskGP neither): it warns and generates from the transfer model
        node = client._generation_strategy._curr
        botl = node.generator_specs[0]
        assert node.generator_spec_to_gen_from is botl
        assert type(botl.fitted_adapter.generator.surrogate.model) is DeltaBOModel
        return
    model = client._generation_strategy.adapter.generator.surrogate.model
    assert type(model) is DeltaBOModel
    roles = {"source_z": {"x0": "shared", "x1": "shared", "z": "marginalized"}}
    assert all(
        run.gen_metadata["source_parameters"] == roles for run in model_trials(client)
    )
    n = model.target_X.shape[-2]
    X, Y = target_data(client, n)
    by_hand = DeltaBOModel(
        X,
        Y,
        source=task_data_from_experiment(source, "y", parameter_names=["x0", "x1"]),
        input_transform=Normalize(2, bounds=BOUNDS),
        outcome_transform=Standardize(m=1),
    )
    fit_gpytorch_mll(ExactMarginalLogLikelihood(by_hand.likelihood, by_hand))
    X_test = torch.rand(4, 2, generator=torch.Generator().manual_seed(4), dtype=F64)
    expected = by_hand.posterior(X_test)
    # Ax generates with the task column appended, and cross-validates with the
    # source-only column (any value) before it as well
    z = torch.full_like(X_test[:, :1], 0.7)
    for query in (
        with_task_column(X_test),
        with_task_column(torch.cat([X_test, z], -1)),
    ):
        got = model.posterior(query)
        torch.testing.assert_close(got.mean, expected.mean, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(
            got.variance, expected.variance, rtol=1e-5, atol=1e-5
        )
    # (Ax 1.3 cannot `predict` here, whatever the model: the client refuses `z`
    # as not the target's, the adapter needs it.)


def test_heterogeneous_sources_are_refused_with_a_clear_error():
    data = multitask_dataset()
    names = ["x0", "z", "task"]
    odd = SupervisedDataset(
        X=with_task_column(torch.rand(4, 2, dtype=F64), 3.0),
        Y=torch.rand(4, 1, dtype=F64),
        feature_names=names,
        outcome_names=["c_y"],
    )
    mixed = MultiTaskDataset(
        datasets=[*data.datasets.values(), odd],
        target_outcome_name="y",
        task_feature_index=-1,
    )
    with pytest.raises(ValueError, match="backfill_value"):
        EnvGP.construct_inputs(mixed)


def multitask_dataset(n_target=3, n_source=5, target_value=0.0):
    gen = torch.Generator().manual_seed(0)
    names = ["x0", "x1", "task"]

    def task(n, value, outcome):
        X = torch.rand(n, 2, generator=gen, dtype=F64)
        return SupervisedDataset(
            X=with_task_column(X, value),
            Y=X.sum(dim=-1, keepdim=True),
            feature_names=names,
            outcome_names=[outcome],
        )

    return MultiTaskDataset(
        datasets=[
            task(n_target, target_value, "y"),
            task(n_source, 1.0, "a_y"),
            task(n_source, 2.0, "b_y"),
        ],
        target_outcome_name="y",
        task_feature_index=-1,
    )


def test_construct_inputs_splits_a_multitask_dataset():
    data = multitask_dataset()
    inputs = DeltaBOModel.construct_inputs(data)
    assert inputs["train_X"].shape == (3, 2) and inputs["train_Y"].shape == (3, 1)
    assert [s.name for s in inputs["source"]] == ["a_y", "b_y"]
    assert all(s.X.shape == (5, 2) for s in inputs["source"])
    torch.testing.assert_close(inputs["source"][0].X, data.datasets["a_y"].X[:, :2])
    assert inputs["task_column"] == TaskColumn(index=2, target_value=0.0)
    model = DeltaBOModel(**inputs)
    X = torch.rand(4, 2, dtype=F64)
    torch.testing.assert_close(
        model.posterior(with_task_column(X)).mean, model.posterior(X).mean
    )
    with pytest.raises(ValueError, match="predicts the target task"):
        model.posterior(with_task_column(X, 1.0))


def test_construct_inputs_refuses_sources_twice():
    extra = TaskData(torch.rand(3, 2, dtype=F64), torch.rand(3, 1, dtype=F64))
    with pytest.raises(ValueError, match="source tasks twice"):
        DeltaBOModel.construct_inputs(multitask_dataset(), source=extra)


def test_construct_inputs_keeps_the_supervised_dataset_route():
    X = torch.rand(4, 2, dtype=F64)
    data = SupervisedDataset(
        X=X, Y=X.sum(-1, keepdim=True), feature_names=["x0", "x1"], outcome_names=["y"]
    )
    source = TaskData(X, X.sum(-1, keepdim=True))
    inputs = EnvGP.construct_inputs(data, source=source)
    assert inputs["source"] is source and "task_column" not in inputs


def test_axs_normalize_over_the_task_column_is_restricted():
    # Ax builds Normalize over d + 1 columns with the task column left out
    data = multitask_dataset()
    transform = Normalize(
        d=3, indices=[0, 1], bounds=torch.tensor([[0.0, -1.0, 0.0], [1.0, 2.0, 2.0]])
    )
    model = DiffGP(**DeltaBOModel.construct_inputs(data), input_transform=transform)
    assert model.input_transform.bounds.shape == (2, 2)
    torch.testing.assert_close(model.input_transform.bounds.to(F64), BOUNDS)


def heterogeneous_dataset():
    # the source has a parameter `z` the target lacks, and its columns in another
    # order (as Ax hands them over when `z` has no backfill value)
    data = multitask_dataset()
    gen = torch.Generator().manual_seed(5)
    X = torch.rand(6, 3, generator=gen, dtype=F64)
    source = SupervisedDataset(
        X=with_task_column(X, 1.0),
        Y=X[:, 1:].sum(dim=-1, keepdim=True),
        feature_names=["z", "x1", "x0", "task"],
        outcome_names=["a_y"],
    )
    return MultiTaskDataset(
        datasets=[data.datasets["y"], source],
        target_outcome_name="y",
        task_feature_index=-1,
    )


def test_a_source_with_an_extra_parameter_is_used_on_the_targets_parameters():
    data = heterogeneous_dataset()
    with pytest.warns(UserWarning, match=r"\['z'\].*averaging"):
        inputs = EnvGP.construct_inputs(data)
    (source,) = inputs["source"]
    # the target's parameters x0, x1 in the target's order; z dropped
    torch.testing.assert_close(source.X, data.datasets["a_y"].X[:, [2, 1]])
    assert inputs["task_column"] == TaskColumn(-1, 0.0, source_only_features=1)
    # Ax's transforms over its layout (x0, x1, z, task): Normalize of the three
    # parameters, and an imputation of `z` for the target that is not needed here
    layout_bounds = torch.tensor([[0.0, -1.0, 0.0], [1.0, 2.0, 1.0]], dtype=F64)
    transform = ChainedInputTransform(
        tf0=Normalize(d=4, indices=[0, 1, 2], bounds=layout_bounds),
        tf1=LearnedFeatureImputation(
            feature_indices={0: [0, 1], 1: [0, 1, 2]}, d=3, target_task=0
        ),
    )
    model = EnvGP(**inputs, input_transform=transform)
    assert isinstance(model.input_transform, Normalize)
    torch.testing.assert_close(model.input_transform.bounds.to(F64), BOUNDS)
    X = torch.rand(4, 2, dtype=F64)
    expected = model.posterior(X).mean
    z = torch.rand(4, 1, dtype=F64)
    for query in (with_task_column(X), with_task_column(torch.cat([X, z], -1))):
        torch.testing.assert_close(model.posterior(query).mean, expected)
    with pytest.raises(ValueError, match="predicts the target task"):
        model.posterior(with_task_column(torch.cat([X, z], -1), 1.0))


def test_a_source_missing_a_target_parameter_is_refused_clearly():
    data = heterogeneous_dataset()
    target = data.datasets["y"]
    narrow = SupervisedDataset(
        X=with_task_column(torch.rand(4, 1, dtype=F64), 1.0),
        Y=torch.rand(4, 1, dtype=F64),
        feature_names=["x0", "task"],
        outcome_names=["a_y"],
    )
    mixed = MultiTaskDataset(
        datasets=[target, narrow], target_outcome_name="y", task_feature_index=-1
    )
    with pytest.raises(ValueError, match=r"'a_y' lacks the target's parameter.*x1"):
        DeltaBOModel.construct_inputs(mixed)


def test_task_data_from_experiment_and_dataframe():
    experiment = source_experiment("past", shift=0.0, n=4)
    data = task_data_from_experiment(experiment, "y")
    assert data.name == "past" and data.X.shape == (4, 2) and data.Yvar is None
    df = pd.DataFrame(
        {"a": [0.1, 0.2, 0.3], "y": [1.0, float("nan"), 3.0], "v": [0.1, 0.1, 0.2]}
    )
    data = task_data_from_dataframe(df, ["a"], "y", noise_column="v")
    assert data.n == 2 and data.Yvar.shape == (2, 1)
    with pytest.raises(ValueError, match="metric_name"):
        task_data_from_experiment(experiment, "nope")
    with pytest.raises(ValueError, match="parameter_names"):
        task_data_from_dataframe(df, ["b"], "y")
    with pytest.raises(TypeError, match="parameter_names"):
        task_data_from_dataframe(df, "a", "y")


@pytest.mark.parametrize("force_target_model", [False, True])
def test_a_guard_takes_ax_queries_with_the_task_column(force_target_model):
    from botorch.fit import fit_gpytorch_mll
    from gpytorch.mlls import ExactMarginalLogLikelihood

    from botorch_transfer import TransferGuard

    model = DeltaBOModel(**DeltaBOModel.construct_inputs(multitask_dataset(n_target=4)))
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    # either model acts, whatever the data say (the margin decides alone)
    guard = TransferGuard(model, margin=-1e9 if force_target_model else 1e9)
    assert guard.uses_transfer is not force_target_model
    X = torch.rand(5, 2, dtype=F64)
    with_column = guard.posterior(with_task_column(X, 0.0))
    plain = guard.posterior(X)
    torch.testing.assert_close(with_column.mean, plain.mean)
    torch.testing.assert_close(with_column.variance, plain.variance)


@pytest.mark.parametrize("margin", [0.0, -1e9])  # -1e9: the target-only GP acts
def test_a_guarded_model_class_through_the_transfer_learning_adapter(margin):
    from botorch_transfer import TransferGuard

    guarded_class = TransferGuard.of(DeltaBOModel)
    assert TransferGuard.of(DeltaBOModel) is guarded_class  # one class per model
    sources = [source_experiment("source_a", shift=0.5)]
    client = run_target(
        guarded_class, sources, trials=6, init=2, model_options={"margin": margin}
    )
    model = client._generation_strategy.adapter.generator.surrogate.model
    assert type(model) is guarded_class
    assert type(model.transfer_model) is DeltaBOModel
    n = model.target_X.shape[-2]
    X, Y = target_data(client, n)
    # the guard Ax fitted equals a guard around a DeltaBOModel fitted by hand
    guard = TransferGuard(fitted_by_hand(DeltaBOModel, X, Y, sources), margin=margin)
    assert model.uses_transfer == guard.uses_transfer == (margin == 0.0)
    for key in ("transfer", "target"):
        assert model.loo_log_density[key] == pytest.approx(
            guard.loo_log_density[key], rel=1e-5, abs=1e-5
        )
    X_test = torch.rand(6, 2, generator=torch.Generator().manual_seed(3), dtype=F64)
    X_test = BOUNDS[0] + (BOUNDS[1] - BOUNDS[0]) * X_test
    a, b = model.posterior(with_task_column(X_test)), guard.posterior(X_test)
    torch.testing.assert_close(a.mean, b.mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(a.variance, b.variance, rtol=1e-5, atol=1e-5)


def test_ax_cross_validation_runs_on_a_guarded_model_class():
    from botorch_transfer import TransferGuard

    guarded_class = TransferGuard.of(DeltaBOModel)
    sources = [source_experiment("source_a", shift=0.5)]
    client = run_target(
        guarded_class, sources, trials=6, init=3, use_model_selection=True
    )
    node = client._generation_strategy._curr
    botl, plain = node.generator_specs
    assert type(botl.fitted_adapter.generator.surrogate.model) is guarded_class
    for spec in (botl, plain):
        assert spec.cv_results is not None and len(spec.cv_results) == 5
        assert "Rank correlation" in spec.diagnostics


def test_guard_of_refuses_a_class_that_is_not_a_transfer_model():
    from botorch.models import SingleTaskGP

    from botorch_transfer import TransferGuard

    with pytest.raises(TypeError, match="`model_class` must be a source-conditioned"):
        TransferGuard.of(SingleTaskGP)


def test_both_strategies_put_the_model_on_the_requested_device(device):
    source = TaskData(torch.rand(5, 2, dtype=F64), torch.rand(5, 1, dtype=F64))
    strategies = {
        "Sobol+BoTorch": transfer_generation_strategy(
            DeltaBOModel, {"source": source}, torch_device=device
        ),
        "Sobol+TL": transfer_learning_generation_strategy(
            DeltaBOModel, torch_device=device
        ),
    }
    for name, strategy in strategies.items():
        model_nodes = [n for n in strategy.nodes_by_name.values() if n.name != "Sobol"]
        specs = [spec for node in model_nodes for spec in node.generator_specs]
        # the transfer-learning path also has its cross-validation GP: both move
        assert len(specs) == (1 if name == "Sobol+BoTorch" else 2), name
        assert all(s.generator_kwargs["torch_device"] == device for s in specs), name
    # no device asked for: Ax's own default (None: the CPU)
    default = transfer_learning_generation_strategy(DeltaBOModel)
    specs = default.nodes_by_name["TL-DeltaBOModel"].generator_specs
    assert all(s.generator_kwargs.get("torch_device") is None for s in specs)


def one_source_dataset(extra=False):
    r"""The target and one source task (``a_y``); with ``extra``, the source has
    a parameter ``z`` the target lacks (Ax's layout: x0, x1, z, task)."""
    data = heterogeneous_dataset() if extra else multitask_dataset()
    return MultiTaskDataset(
        datasets=[data.datasets["y"], data.datasets["a_y"]],
        target_outcome_name="y",
        task_feature_index=-1,
    )


def test_rank_weighted_construct_inputs_from_a_multitask_dataset():
    from botorch_transfer import RankWeightedTransferGP
    from botorch_transfer.models import RankingOptions

    data = one_source_dataset()
    inputs = RankWeightedTransferGP.construct_inputs(
        data, ranking=RankingOptions(num_samples=32)
    )
    assert inputs["train_X"].shape == (3, 2) and inputs["train_Y"].shape == (3, 1)
    source = inputs["source"]
    assert isinstance(source, TaskData) and source.name == "a_y"
    torch.testing.assert_close(source.X, data.datasets["a_y"].X[:, :2])
    torch.testing.assert_close(source.Y, data.datasets["a_y"].Y)
    assert inputs["task_column"] == TaskColumn(index=2, target_value=0.0)
    assert inputs["ranking"] == RankingOptions(num_samples=32)
    # Ax's Normalize over its layout (the task column left out) acts on x0, x1
    transform = Normalize(
        d=3, indices=[0, 1], bounds=torch.tensor([[0.0, -1.0, 0.0], [1.0, 2.0, 2.0]])
    )
    model = RankWeightedTransferGP(**inputs, input_transform=transform)
    for part in (model.transfer_model, model.target_model):
        torch.testing.assert_close(part.input_transform.bounds.to(F64), BOUNDS)
    X = torch.rand(4, 2, dtype=F64)
    expected = model.posterior(X)
    got = model.posterior(with_task_column(X))
    torch.testing.assert_close(got.mean, expected.mean)
    torch.testing.assert_close(got.variance, expected.variance)
    with pytest.raises(ValueError, match="predicts the target task"):
        model.posterior(with_task_column(X, 1.0))
    # conditioning on Ax's layout conditions both GPs on the d inputs
    Y_new = X[:2].sum(-1, keepdim=True)
    a = model.condition_on_observations(with_task_column(X[:2]), Y_new)
    b = model.condition_on_observations(X[:2], Y_new)
    torch.testing.assert_close(
        a.posterior(with_task_column(X)).mean, b.posterior(X).mean
    )


def test_rank_weighted_construct_inputs_from_several_source_tasks():
    from botorch_transfer import RankWeightedTransferGP

    data = multitask_dataset()
    inputs = RankWeightedTransferGP.construct_inputs(data)
    sources = inputs["source"]
    assert [s.name for s in sources] == ["a_y", "b_y"]
    for source in sources:
        torch.testing.assert_close(source.X, data.datasets[source.name].X[:, :2])
        torch.testing.assert_close(source.Y, data.datasets[source.name].Y)
    model = RankWeightedTransferGP(**inputs)
    assert model.source_names == ("a_y", "b_y")
    X = torch.rand(4, 2, dtype=F64)
    torch.testing.assert_close(
        model.posterior(with_task_column(X)).mean, model.posterior(X).mean
    )


def test_rank_weighted_construct_inputs_refuses_no_sources():
    from botorch_transfer import RankWeightedTransferGP

    data = multitask_dataset()
    target_only = MultiTaskDataset(
        datasets=[data.datasets["y"]], target_outcome_name="y", task_feature_index=-1
    )
    with pytest.raises(ValueError, match="RankWeightedTransferGP needs `source=`"):
        RankWeightedTransferGP.construct_inputs(target_only)
    extra = TaskData(torch.rand(3, 2, dtype=F64), torch.rand(3, 1, dtype=F64))
    with pytest.raises(ValueError, match="source tasks twice"):
        RankWeightedTransferGP.construct_inputs(one_source_dataset(), source=extra)
    # a source in the model options with a target-only dataset is used as given
    inputs = RankWeightedTransferGP.construct_inputs(target_only, source=extra)
    assert inputs["source"] is extra and inputs["task_column"].index == 2
    # and the SupervisedDataset route
    target = data.get_dataset_without_task_feature("y")
    inputs = RankWeightedTransferGP.construct_inputs(target, source=extra)
    assert inputs["source"] is extra and "task_column" not in inputs
    with pytest.raises(ValueError, match="needs `source=`"):
        RankWeightedTransferGP.construct_inputs(target)


def test_rank_weighted_with_a_source_only_parameter():
    from botorch_transfer import RankWeightedTransferGP

    data = one_source_dataset(extra=True)
    with pytest.warns(UserWarning, match=r"\['z'\].*averaging"):
        inputs = RankWeightedTransferGP.construct_inputs(data)
    assert inputs["task_column"] == TaskColumn(-1, 0.0, source_only_features=1)
    torch.testing.assert_close(inputs["source"].X, data.datasets["a_y"].X[:, [2, 1]])
    layout_bounds = torch.tensor([[0.0, -1.0, 0.0], [1.0, 2.0, 1.0]], dtype=F64)
    transform = ChainedInputTransform(
        tf0=Normalize(d=4, indices=[0, 1, 2], bounds=layout_bounds),
        tf1=LearnedFeatureImputation(
            feature_indices={0: [0, 1], 1: [0, 1, 2]}, d=3, target_task=0
        ),
    )
    model = RankWeightedTransferGP(**inputs, input_transform=transform)
    assert isinstance(model.target_model.input_transform, Normalize)
    torch.testing.assert_close(model.target_model.input_transform.bounds, BOUNDS)
    X = torch.rand(4, 2, dtype=F64)
    expected = model.posterior(X).mean
    z = torch.rand(4, 1, dtype=F64)
    for query in (with_task_column(X), with_task_column(torch.cat([X, z], -1))):
        torch.testing.assert_close(model.posterior(query).mean, expected)


def test_rank_weighted_is_fitted_by_axs_fit_botorch_model():
    from ax.generators.torch.botorch_modular.utils import fit_botorch_model

    from botorch_transfer import RankWeightedTransferGP
    from botorch_transfer.models import RankingOptions

    model = RankWeightedTransferGP(
        **RankWeightedTransferGP.construct_inputs(
            one_source_dataset(), ranking=RankingOptions(num_samples=32)
        )
    )
    before = model.target_model.covar_module.lengthscale.clone()
    fit_botorch_model(model, mll_class=ExactMarginalLogLikelihood, mll_options={})
    assert not torch.equal(before, model.target_model.covar_module.lengthscale)
    assert 0.0 <= model.transfer_weight <= 1.0


def test_rank_weighted_is_the_default_transfer_learning_model():
    from botorch_transfer import RankWeightedTransferGP

    strategy = transfer_learning_generation_strategy(initialization_trials=2)
    node = strategy.nodes_by_name["TL-RankWeightedTransferGP"]
    (config,) = node.generator_specs[0].generator_kwargs["surrogate_spec"].model_configs
    assert config.botorch_model_class is RankWeightedTransferGP
    assert config.outcome_transform_classes == [Standardize]


def test_rank_weighted_through_the_transfer_learning_adapter():
    from botorch_transfer import RankWeightedTransferGP

    source = source_experiment("source_a", shift=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TransferModelUnusedWarning)
        client = run_target(RankWeightedTransferGP, [source], trials=4, init=2)
    runs = model_trials(client)
    assert len(runs) == 2
    for run in runs:
        assert run._generation_node_name == "TL-RankWeightedTransferGP"
        assert run._generator_key == "BOTL"
        assert run.gen_metadata["transfer_model_used"] is True
    model = client._generation_strategy.adapter.generator.surrogate.model
    assert type(model) is RankWeightedTransferGP
    # Ax's model equals one built and fitted by hand on the same data
    n = model.target_X.shape[-2]
    X, Y = target_data(client, n)
    torch.testing.assert_close(model.target_X, X)
    by_hand = RankWeightedTransferGP(
        X,
        Y,
        source=task_data_from_experiment(source, "y"),
        input_transform=Normalize(2, bounds=BOUNDS),
    )
    fit_gpytorch_mll(ExactMarginalLogLikelihood(by_hand.likelihood, by_hand))
    assert model.transfer_weight == pytest.approx(by_hand.transfer_weight)
    X_test = torch.rand(6, 2, generator=torch.Generator().manual_seed(3), dtype=F64)
    X_test = BOUNDS[0] + (BOUNDS[1] - BOUNDS[0]) * X_test
    a, b = model.posterior(with_task_column(X_test)), by_hand.posterior(X_test)
    torch.testing.assert_close(a.mean, b.mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(a.variance, b.variance, rtol=1e-5, atol=1e-5)
    point = {"x0": float(X_test[0, 0]), "x1": float(X_test[0, 1])}
    prediction = client.predict([point])[0]["y"]
    assert prediction[0] == pytest.approx(b.mean[0, 0].item(), rel=1e-5, abs=1e-5)


def test_each_trial_records_what_the_model_did_with_each_source_experiment():
    from botorch_transfer import RankWeightedTransferGP

    sources = [
        source_experiment("month_a", shift=0.5),
        source_experiment("month_b", shift=-0.5, seed=2),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error", TransferModelUnusedWarning)
        client = run_target(RankWeightedTransferGP, sources, trials=3, init=2)
    (run,) = model_trials(client)
    model = client._generation_strategy.adapter.generator.surrogate.model
    metadata = run.gen_metadata
    assert metadata["transfer_model_used"] is True
    assert list(metadata["source_weights"]) == list(model.source_names)
    assert len(model.source_names) == 2
    assert metadata["source_weights"] == pytest.approx(model.source_weights)
    assert metadata["target_only_weight"] == pytest.approx(
        float(model.weights[-1]), abs=1e-12
    )
    assert metadata["uninformative_sources"] == list(model.uninformative_sources)


def test_ax_cross_validation_runs_on_rank_weighted():
    from botorch_transfer import RankWeightedTransferGP

    source = source_experiment("source_a", shift=0.5)
    client = run_target(
        RankWeightedTransferGP, [source], trials=4, init=3, use_model_selection=True
    )
    node = client._generation_strategy._curr
    botl, plain = node.generator_specs
    assert type(botl.fitted_adapter.generator.surrogate.model) is RankWeightedTransferGP
    for spec in (botl, plain):
        # leave-one-out over the 3 target trials, compared by rank correlation
        assert spec.cv_results is not None and len(spec.cv_results) == 3
        assert "Rank correlation" in spec.diagnostics


@pytest.mark.parametrize("model_class", [DeltaBOModel, EnvGP, RGPE])
def test_the_task_columns_old_arguments_warn_and_build_the_same_layout(model_class):
    inputs = DeltaBOModel.construct_inputs(multitask_dataset())
    column = inputs.pop("task_column")
    new = model_class(**inputs, task_column=column)
    with pytest.warns(DeprecationWarning, match="pass task_column=TaskColumn"):
        old = model_class(
            **inputs,
            task_feature=column.index,
            target_task_value=column.target_value,
        )
    assert old.task_column == new.task_column == column
    X = with_task_column(torch.rand(4, 2, dtype=F64))
    torch.testing.assert_close(old.posterior(X).mean, new.posterior(X).mean)
    with pytest.raises(TypeError, match="Give `task_column` only"):
        model_class(**inputs, task_column=column, task_feature=2)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['task'\]"):
        model_class(**inputs, task=2)


def test_a_task_column_outside_the_layout_is_a_clear_error():
    inputs = DeltaBOModel.construct_inputs(multitask_dataset())
    inputs.pop("task_column")
    with pytest.raises(ValueError, match="`task_column.index` 5 is outside"):
        DeltaBOModel(**inputs, task_column=TaskColumn(5))
    with pytest.raises(ValueError, match="needs the task column last"):
        DeltaBOModel(**inputs, task_column=TaskColumn(0, source_only_features=1))
    with pytest.raises(TypeError, match="`index` must be an int"):
        TaskColumn(2.0)
    with pytest.raises(ValueError, match="`source_only_features` must be an int"):
        TaskColumn(-1, source_only_features=-1)
