r"""The closed-form leave-one-out predictions of ``botorch_transfer.models.utils.loo``
against brute force: for each training point, a GP with the same hyperparameters
conditioned on the other points (no refit), in float64."""

import math

import pytest
import torch
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize, Standardize

from botorch_transfer.models.utils.loo import (
    exact_loo_log_density,
    exact_loo_posterior,
    leave_input_out_shift,
    training_marginal,
)

F64 = torch.float64
N, D = 9, 2
TOL = {"rtol": 1e-8, "atol": 1e-8}


def make_gp(fixed_noise: bool, batch_shape=torch.Size([]), seed: int = 0):
    r"""A ``SingleTaskGP`` (input and outcome transforms) with set hyperparameters;
    each batch has its own data and hyperparameters."""
    gen = torch.Generator().manual_seed(seed)
    X = 3.0 * torch.rand(*batch_shape, N, D, generator=gen, dtype=F64)
    Y = torch.sin(2 * X).sum(-1, keepdim=True) + 2.0
    Y = Y + 0.1 * torch.randn(*batch_shape, N, 1, generator=gen, dtype=F64)
    Yvar = (
        0.01 + 0.04 * torch.rand(*batch_shape, N, 1, generator=gen, dtype=F64)
        if fixed_noise
        else None
    )
    bounds = torch.tensor([[0.0] * D, [3.0] * D], dtype=F64)
    model = SingleTaskGP(
        X,
        Y,
        Yvar,
        input_transform=Normalize(D, bounds=bounds),
        outcome_transform=Standardize(1, batch_shape=batch_shape),
    )
    shape = (*batch_shape, 1, D)
    lengthscale = 0.3 + 0.4 * torch.rand(shape, generator=gen, dtype=F64)
    model.covar_module.lengthscale = lengthscale
    model.mean_module.constant = 0.1 * torch.arange(
        1, 1 + batch_shape.numel(), dtype=F64
    ).reshape(batch_shape)
    if not fixed_noise:
        noise = 0.02 + 0.01 * torch.arange(batch_shape.numel(), dtype=F64)
        model.likelihood.noise = noise.reshape(*batch_shape, 1)
    return model.eval()


def brute_force_loo(model: SingleTaskGP, i: int):
    r"""Point ``i`` of a non-batched ``model`` predicted by the GP with the same
    hyperparameters conditioned on the other points: ``(mean, latent variance,
    noise)``, model units."""
    X = model.train_inputs[0]  # transformed (eval mode)
    y = model.train_targets
    keep = torch.arange(N) != i
    with torch.no_grad():
        noise = model.likelihood.noise.expand(N)  # per point, or the learned level
        K = model.covar_module(X).to_dense()
        m = model.mean_module(X)
        K_rest = K[keep][:, keep] + torch.diag(noise[keep])
        k = K[i, keep]
        mean = m[i] + k @ torch.linalg.solve(K_rest, y[keep] - m[keep])
        variance = K[i, i] - k @ torch.linalg.solve(K_rest, k)
    return mean, variance, noise[i]


def hyperparameters(model: SingleTaskGP) -> dict:
    r"""A GP's (raw) hyperparameters, by name."""
    return {name: p.detach() for name, p in model.named_parameters()}


def brute_force_by_conditioning(model: SingleTaskGP, i: int):
    r"""The same through BoTorch: a ``SingleTaskGP`` on the other points (model
    units, no transforms) with ``model``'s hyperparameters, and its posterior at
    point ``i``: ``(mean, latent variance, observation variance)``."""
    X = model.train_inputs[0]
    y = model.train_targets.unsqueeze(-1)
    keep = torch.arange(N) != i
    noise = model.likelihood.noise
    Yvar = noise.unsqueeze(-1)[keep] if noise.numel() == N else None
    fold = SingleTaskGP(X[keep], y[keep], Yvar, outcome_transform=None)
    fold.load_state_dict(hyperparameters(model), strict=False)
    fold.eval()
    with torch.no_grad():
        latent = fold.posterior(X[i : i + 1])
        if Yvar is None:
            observed = fold.posterior(X[i : i + 1], observation_noise=True)
            obs_var = observed.variance.squeeze()
        else:
            obs_var = latent.variance.squeeze() + noise[i]
    return latent.mean.squeeze(), latent.variance.squeeze(), obs_var


@pytest.mark.parametrize("fixed_noise", [True, False], ids=["fixed", "learned"])
def test_loo_posterior_equals_the_gp_conditioned_on_the_other_points(fixed_noise):
    model = make_gp(fixed_noise)
    shift, variance, noise = exact_loo_posterior(model)
    _, observed, _ = exact_loo_posterior(model, observation_noise=True)
    y = model.train_targets
    assert shift.shape == variance.shape == noise.shape == (N,)
    for i in range(N):
        mean_i, var_i, noise_i = brute_force_loo(model, i)
        torch.testing.assert_close(y[i] - shift[i], mean_i, **TOL)
        torch.testing.assert_close(variance[i], var_i, **TOL)
        torch.testing.assert_close(noise[i], noise_i, **TOL)
        mean_b, var_b, obs_b = brute_force_by_conditioning(model, i)
        torch.testing.assert_close(y[i] - shift[i], mean_b, **TOL)
        torch.testing.assert_close(variance[i], var_b, **TOL)
        torch.testing.assert_close(observed[i], obs_b, **TOL)


@pytest.mark.parametrize("fixed_noise", [True, False], ids=["fixed", "learned"])
def test_loo_log_density_is_the_normal_density_of_the_loo_predictive(fixed_noise):
    model = make_gp(fixed_noise)
    y = model.train_targets
    expected = []
    for i in range(N):
        mean, _, obs_var = brute_force_by_conditioning(model, i)
        squared = (y[i] - mean) ** 2 / obs_var
        expected.append(-0.5 * (math.log(2 * math.pi) + obs_var.log() + squared))
    got = exact_loo_log_density(model)
    torch.testing.assert_close(got, torch.stack(expected), **TOL)


@pytest.mark.parametrize("fixed_noise", [True, False], ids=["fixed", "learned"])
def test_batched_model_gives_the_loo_posterior_of_each_batch(fixed_noise):
    batch_shape = torch.Size([3])
    model = make_gp(fixed_noise, batch_shape)
    shift, variance, noise = exact_loo_posterior(model)
    assert shift.shape == variance.shape == noise.shape == (3, N)
    log_density = exact_loo_log_density(model)
    assert log_density.shape == (3, N)
    X, y = model.train_inputs[0], model.train_targets
    for b in range(3):
        # the non-batched GP of batch b: its data and hyperparameters
        Yvar = model.likelihood.noise[b].unsqueeze(-1) if fixed_noise else None
        single = SingleTaskGP(X[b], y[b].unsqueeze(-1), Yvar, outcome_transform=None)
        state_b = {k: v[b] for k, v in hyperparameters(model).items()}
        single.load_state_dict(state_b, strict=False)
        single.eval()
        for got, want in zip(
            (shift[b], variance[b], noise[b], log_density[b]),
            (*exact_loo_posterior(single), exact_loo_log_density(single)),
            strict=True,
        ):
            torch.testing.assert_close(got, want, **TOL)
        for i in range(N):
            mean_i, var_i, _ = brute_force_loo(single, i)
            torch.testing.assert_close(y[b, i] - shift[b, i], mean_i, **TOL)
            torch.testing.assert_close(variance[b, i], var_i, **TOL)


@pytest.mark.parametrize("training", [True, False])
def test_the_model_keeps_its_mode_and_its_training_inputs(training):
    model = make_gp(fixed_noise=False)
    model.train(training)
    inputs = model.train_inputs[0].clone()
    _, _, noise = training_marginal(model)
    torch.testing.assert_close(noise, model.likelihood.noise.detach().expand(N), **TOL)
    for value in exact_loo_posterior(model):
        assert value.grad_fn is None and not value.requires_grad
    assert model.training is training
    torch.testing.assert_close(model.train_inputs[0], inputs, rtol=0, atol=0)


def test_a_model_in_eval_mode_keeps_its_prediction_cache():
    # acquisition functions evaluate a model whose weights need the LOO (RGPE):
    # the LOO must not make every later posterior rebuild the cache
    model = make_gp(fixed_noise=False)
    model.eval()
    X = torch.rand(3, model.train_inputs[0].shape[-1], dtype=torch.float64)
    before = model.posterior(X).mean
    strategy = model.prediction_strategy
    assert strategy is not None
    exact_loo_posterior(model)
    assert model.prediction_strategy is strategy
    torch.testing.assert_close(model.posterior(X).mean, before, rtol=0, atol=0)


def test_leave_input_out_predicts_each_inputs_replicates_from_the_other_inputs():
    # 6 inputs, three of them observed 2-3 times: each group of replicates left out
    # together, predicted by plain Gaussian conditioning on the rest
    gen = torch.Generator().manual_seed(3)
    inputs = torch.rand(6, D, generator=gen, dtype=F64)
    X = inputs[torch.tensor([0, 1, 1, 2, 3, 3, 3, 4, 5, 5])]
    n = X.shape[0]
    y = torch.sin(4 * X).sum(-1) + 0.1 * torch.randn(n, generator=gen, dtype=F64)
    sq = (X.unsqueeze(-2) - X.unsqueeze(-3)).square().sum(-1)
    K = torch.exp(-sq / (2 * 0.4**2)) + torch.diag(
        0.01 + 0.02 * torch.rand(n, generator=gen, dtype=F64)
    )
    m = 0.3
    shift = leave_input_out_shift(K, y - m, X)
    for row in range(n):
        out = (X == X[row]).all(-1)
        keep = ~out
        K_rest = K[keep][:, keep]
        mean = m + K[row, keep] @ torch.linalg.solve(K_rest, y[keep] - m)
        torch.testing.assert_close(y[row] - shift[row], mean, **TOL)
    # without replicates it is plain LOO
    model = make_gp(fixed_noise=True)
    mean, K, _ = training_marginal(model)
    loo_shift, _, _ = exact_loo_posterior(model)
    (inputs,) = model.train_inputs
    torch.testing.assert_close(
        leave_input_out_shift(K, model.train_targets - mean, inputs), loo_shift, **TOL
    )


def test_leave_input_out_rejects_batched_arguments():
    K = torch.eye(3, dtype=F64)
    with pytest.raises(ValueError, match="not batched"):
        leave_input_out_shift(
            K.expand(2, 3, 3),
            torch.zeros(2, 3, dtype=F64),
            torch.zeros(2, 3, 1, dtype=F64),
        )
