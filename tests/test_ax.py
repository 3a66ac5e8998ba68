r"""The package's models through Ax's Client (skipped when Ax is not installed)."""

import math

import pytest
import torch

pytest.importorskip("ax")

from ax.api.client import Client  # noqa: E402
from ax.api.configs import RangeParameterConfig  # noqa: E402
from botorch.fit import fit_gpytorch_mll  # noqa: E402
from botorch.models.transforms import Normalize, Standardize  # noqa: E402
from gpytorch.mlls import ExactMarginalLogLikelihood  # noqa: E402

from botorch_transfer import (
    DeltaBOModel,
    DiffGP,
    EnvGP,
    PretrainedPriorGP,
    TaskData,
    pretrain_prior,
)  # noqa: E402
from botorch_transfer.ax import transfer_generation_strategy  # noqa: E402
from tests.priors.hyperbo.test_objectives import make_prior  # noqa: E402

F64 = torch.float64
BOUNDS = torch.tensor([[0.0, -1.0], [1.0, 2.0]], dtype=F64)


def g(X):
    return torch.sin(6 * X[..., :1]) + X[..., 1:2]


def f(X):
    return g(X) + 0.3 * X[..., :1]


def run_client(model_class, model_options, trials=5, init=2, strategy=None):
    r"""An Ax Client loop on ``f`` with ``transfer_generation_strategy`` (or the
    given ``strategy``)."""
    client = Client(random_seed=0)
    client.configure_experiment(
        parameters=[
            RangeParameterConfig(name="x0", parameter_type="float", bounds=(0.0, 1.0)),
            RangeParameterConfig(name="x1", parameter_type="float", bounds=(-1.0, 2.0)),
        ]
    )
    client.configure_optimization(objective="y")
    client.set_generation_strategy(
        strategy
        or transfer_generation_strategy(
            model_class, model_options, initialization_trials=init, seed=0
        )
    )
    for _ in range(trials):
        for index, params in client.get_next_trials(max_trials=1).items():
            x = torch.tensor([[params["x0"], params["x1"]]], dtype=F64)
            client.complete_trial(index, raw_data={"y": float(f(x))})
    return client


def fitted_by_hand(model_class, X, Y, source):
    r"""``model_class`` on ``(X, Y)`` with the transforms Ax gives it, fitted."""
    model = model_class(
        X,
        Y,
        source=source,
        input_transform=Normalize(2, bounds=BOUNDS),
        outcome_transform=Standardize(m=1),
    )
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


def observed(client):
    df = client.summarize()
    X = torch.tensor(df[["x0", "x1"]].values, dtype=F64)
    return X, torch.tensor(df["y"].values, dtype=F64).unsqueeze(-1)


@pytest.mark.parametrize("model_class", [DeltaBOModel, EnvGP, DiffGP])
def test_source_conditioned_model_in_an_ax_client_loop(model_class):
    gen = torch.Generator().manual_seed(0)
    X_src = (
        torch.rand(30, 2, generator=gen, dtype=F64) * (BOUNDS[1] - BOUNDS[0])
        + BOUNDS[0]
    )
    source = TaskData(X_src, g(X_src))
    client = run_client(model_class, {"source": source})
    model = client._generation_strategy.adapter.generator.surrogate.model
    assert type(model) is model_class
    # the model Ax fitted (on the first four trials) equals one built and fitted by hand
    X, Y = observed(client)
    n = model.target_X.shape[-2]
    assert n == 4
    by_hand = fitted_by_hand(model_class, X[:n], Y[:n], source)
    X_test = (
        torch.rand(6, 2, generator=gen, dtype=F64) * (BOUNDS[1] - BOUNDS[0]) + BOUNDS[0]
    )
    a, b = model.posterior(X_test), by_hand.posterior(X_test)
    torch.testing.assert_close(a.mean, b.mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(a.variance, b.variance, rtol=1e-5, atol=1e-6)
    # and Ax's predictions (in the user's units) are the model's
    prediction = client.predict(
        [{"x0": float(X_test[0, 0]), "x1": float(X_test[0, 1])}]
    )[0]["y"]
    assert prediction[0] == pytest.approx(b.mean[0, 0].item(), rel=1e-5)


def test_pretrained_prior_gp_in_an_ax_client_loop():
    gen = torch.Generator().manual_seed(1)
    tasks = []
    for i in range(6):
        X = (
            torch.rand(15, 2, generator=gen, dtype=F64) * (BOUNDS[1] - BOUNDS[0])
            + BOUNDS[0]
        )
        tasks.append(TaskData(X, f(X) + 0.1 * i))
    prior = pretrain_prior(tasks, num_steps=30, hidden=(8, 8), progress=False)
    client = run_client(PretrainedPriorGP, {"prior": prior}, trials=3, init=1)
    model = client._generation_strategy.adapter.generator.surrogate.model
    assert type(model) is PretrainedPriorGP and not hasattr(model, "outcome_transform")
    X, Y = observed(client)
    n = model.train_inputs[0].shape[-2]
    by_hand = PretrainedPriorGP(
        X[:n], Y[:n], prior=prior, input_transform=Normalize(2, bounds=BOUNDS)
    )
    X_test = torch.rand(4, 2, generator=gen, dtype=F64)
    torch.testing.assert_close(
        model.posterior(X_test).mean, by_hand.posterior(X_test).mean
    )


def test_cluster_meta_prior_gp_in_an_ax_client_loop():
    from botorch_transfer import ClusterMetaPriorGP, build_cluster_prior

    gen = torch.Generator().manual_seed(2)
    tasks = []
    for i in range(6):
        X = (
            torch.rand(12, 2, generator=gen, dtype=F64) * (BOUNDS[1] - BOUNDS[0])
            + BOUNDS[0]
        )
        tasks.append(TaskData(X, f(X) + (0.0 if i < 3 else 2.0)))
    prior = build_cluster_prior(tasks, n_clusters=2, bounds=BOUNDS, seed=0)
    client = run_client(ClusterMetaPriorGP, {"prior": prior}, trials=3, init=1)
    model = client._generation_strategy.adapter.generator.surrogate.model
    assert type(model) is ClusterMetaPriorGP
    X, Y = observed(client)
    n = model.target_X.shape[-2]
    by_hand = ClusterMetaPriorGP(
        X[:n],
        Y[:n],
        prior=prior,
        input_transform=Normalize(2, bounds=BOUNDS),
        outcome_transform=Standardize(m=1),
    )
    by_hand.load_state_dict(model.state_dict())
    X_test = (
        torch.rand(4, 2, generator=gen, dtype=F64) * (BOUNDS[1] - BOUNDS[0]) + BOUNDS[0]
    )
    torch.testing.assert_close(
        model.posterior(X_test).mean, by_hand.posterior(X_test).mean
    )


def test_strategy_checks_its_model_and_options_when_built():
    # caught when the strategy is built, not at the first model trial after the
    # Sobol budget is spent
    source = TaskData(torch.rand(5, 2, dtype=F64), torch.rand(5, 1, dtype=F64))
    with pytest.raises(TypeError, match="`botorch_model_class` must be a BoTorch"):
        transfer_generation_strategy("DeltaBOModel", {"source": source})
    with pytest.raises(TypeError, match="`model_options` must be a dict"):
        transfer_generation_strategy(DeltaBOModel, None)
    with pytest.raises(ValueError, match="must give `source` for DeltaBOModel"):
        transfer_generation_strategy(DeltaBOModel, {})
    with pytest.raises(ValueError, match=r"\['sources'\], which DeltaBOModel"):
        transfer_generation_strategy(DeltaBOModel, {"sources": source})
    with pytest.raises(ValueError, match=r"\[.source.\], which PretrainedPriorGP"):
        transfer_generation_strategy(PretrainedPriorGP, {"source": source})
    # a renamed argument is taken under its old name (the model warns), a misspelled
    # one is not
    transfer_generation_strategy(DiffGP, {"source": source, "source_Yvar": 0.1})
    with pytest.raises(ValueError, match=r"\['source_var'\], which DiffGP"):
        transfer_generation_strategy(DiffGP, {"source": source, "source_var": 0.1})
    with pytest.raises(ValueError, match=r"`model_options\['source'\]` must not be"):
        transfer_generation_strategy(DeltaBOModel, {"source": []})
    empty = TaskData(torch.rand(0, 2, dtype=F64), torch.rand(0, 1, dtype=F64))
    with pytest.raises(ValueError, match=r"`model_options\['source'\]` must not be"):
        transfer_generation_strategy(EnvGP, {"source": empty})
    for trials in (0, -1):  # Ax's transforms fail without one observed trial
        with pytest.raises(ValueError, match="`initialization_trials` must be an int"):
            transfer_generation_strategy(
                DeltaBOModel, {"source": source}, initialization_trials=trials
            )


def test_a_prior_of_another_dimension_is_a_clear_error_under_normalize():
    # Ax's Normalize input transform skips the d check ("size of tensor a (2) must
    # match")
    prior = make_prior()  # d = 2 (tests.priors.hyperbo.test_objectives)
    X = torch.rand(4, 3, dtype=F64)
    with pytest.raises(ValueError, match="pre-trained on d=2"):
        PretrainedPriorGP(
            X, X.sum(-1, keepdim=True), prior=prior, input_transform=Normalize(3)
        )


def test_randomized_nn_ensemble_in_ax_with_its_own_fit_and_cross_validation():
    from ax.adapter.cross_validation import cross_validate
    from ax.adapter.registry import Generators
    from ax.generation_strategy.generation_node import GenerationNode
    from ax.generation_strategy.generator_spec import GeneratorSpec
    from ax.generators.torch.botorch_modular.surrogate import (
        ModelConfig,
        SurrogateSpec,
    )

    from botorch_transfer import RandomizedNNEnsemble
    from botorch_transfer.ax import with_sobol_initialization
    from botorch_transfer.models import NetworkOptions, TrainingOptions

    options = {
        "num_members": 4,
        "network": NetworkOptions(hidden=(16,)),
        "training_options": TrainingOptions(num_steps=60),
        "seed": 0,
    }
    # Ax's own BoTorch generator, default transforms, the ensemble as model class
    node = GenerationNode(
        name="RandomizedNN",
        generator_specs=[
            GeneratorSpec(
                generator_enum=Generators.BOTORCH_MODULAR,
                generator_kwargs={
                    "surrogate_spec": SurrogateSpec(
                        model_configs=[
                            ModelConfig(
                                botorch_model_class=RandomizedNNEnsemble,
                                model_options=options,
                            )
                        ]
                    )
                },
            )
        ],
    )
    strategy = with_sobol_initialization(node, 3, 0, "Sobol+RandomizedNN")
    client = run_client(None, None, trials=6, strategy=strategy)
    summary = client.summarize()
    assert (summary.generation_node == "RandomizedNN").sum() == 3
    adapter = client._generation_strategy.adapter
    model = adapter.generator.surrogate.model
    assert type(model) is RandomizedNNEnsemble
    assert model.target_X.shape == (5, 2)  # fitted before the sixth trial
    assert torch.equal(model._trained_from, model.initial_parameters)
    # Ax's leave-one-out CV: each fold model is trained on its fold only (the state
    # dict Ax loads into it holds theta_0, not the full-data members): the left-out
    # point is predicted, not recalled as the full-data model recalls it
    results = cross_validate(adapter)
    assert len(results) == 5
    for result in results:
        cv_mean = result.predicted.means[0]
        full_mean = client.predict([result.observed.features.parameters])[0]["y"][0]
        assert math.isfinite(cv_mean) and math.isfinite(full_mean)
        assert abs(cv_mean - full_mean) > 1e-6


@pytest.mark.parametrize("criterion", ["loo", "sequential"])
def test_a_guarded_model_class_on_the_model_options_route(criterion):
    from botorch_transfer import TransferGuard

    gen = torch.Generator().manual_seed(0)
    X_src = torch.rand(30, 2, generator=gen, dtype=F64)
    X_src = X_src * (BOUNDS[1] - BOUNDS[0]) + BOUNDS[0]
    source = TaskData(X_src, g(X_src))
    guarded_class = TransferGuard.of(DeltaBOModel)
    options = {"source": source, "criterion": criterion}
    client = run_client(guarded_class, options, trials=6)
    model = client._generation_strategy.adapter.generator.surrogate.model
    assert type(model) is guarded_class and model.criterion == criterion
    evidence = getattr(model, f"{criterion}_log_density")
    assert set(evidence) >= {"transfer", "target"}
    X, Y = observed(client)
    n = model.target_X.shape[-2]
    by_hand = TransferGuard(
        fitted_by_hand(DeltaBOModel, X[:n], Y[:n], source), criterion=criterion
    )
    assert model.uses_transfer == by_hand.uses_transfer
    for key in ("transfer", "target"):
        assert evidence[key] == pytest.approx(
            getattr(by_hand, f"{criterion}_log_density")[key], rel=1e-4, abs=1e-4
        )
    X_test = torch.rand(6, 2, generator=gen, dtype=F64) * (BOUNDS[1] - BOUNDS[0])
    a, b = model.posterior(X_test + BOUNDS[0]), by_hand.posterior(X_test + BOUNDS[0])
    torch.testing.assert_close(a.mean, b.mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(a.variance, b.variance, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("on_transfer_failure", ["warn", "raise"])
def test_a_fallback_from_the_transfer_model_is_said(monkeypatch, on_transfer_failure):
    from ax.exceptions.generation_strategy import GenerationStrategyRepeatedPoints
    from ax.generation_strategy.generation_node import GenerationNode

    from botorch_transfer.ax import TransferModelUnusedError, TransferModelUnusedWarning

    gen = torch.Generator().manual_seed(0)
    X_src = torch.rand(10, 2, generator=gen, dtype=F64) * (BOUNDS[1] - BOUNDS[0])
    source = TaskData(X_src + BOUNDS[0], g(X_src + BOUNDS[0]))
    strategy = transfer_generation_strategy(
        DeltaBOModel,
        {"source": source},
        initialization_trials=2,
        seed=0,
        on_transfer_failure=on_transfer_failure,
    )
    original = GenerationNode._gen_maybe_deduplicate

    def repeats_on_the_transfer_node(self, *args, **kwargs):
        # the transfer model proposes only points already tried: Ax falls back
        if self.name == "DeltaBOModel":
            raise GenerationStrategyRepeatedPoints("only repeated points")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(
        GenerationNode, "_gen_maybe_deduplicate", repeats_on_the_transfer_node
    )
    if on_transfer_failure == "raise":
        with pytest.raises(TransferModelUnusedError, match="fell back"):
            run_client(DeltaBOModel, None, trials=3, strategy=strategy)
        return
    with pytest.warns(TransferModelUnusedWarning, match=r"`Fallback_Sobol`.*fell"):
        client = run_client(DeltaBOModel, None, trials=3, strategy=strategy)
    run = client._experiment.trials[2].generator_runs[0]
    assert run._generation_node_name == "DeltaBOModel"
    assert run.gen_metadata["transfer_model_used"] is False
