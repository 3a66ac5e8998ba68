r"""``source_skill`` against plain linear algebra: each source input's observations
predicted from the other inputs by Gaussian conditioning in float64, then R^2."""

import math

import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer.models.utils.source_skill import MIN_DISTINCT_INPUTS, source_skill

F64 = torch.float64


def source_gp(X, Y, Yvar=None, fit=True):
    bounds = torch.stack([X.min(0).values, X.max(0).values])
    gp = SingleTaskGP(X, Y, Yvar, input_transform=Normalize(X.shape[-1], bounds=bounds))
    if fit:
        fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp))
    return gp.eval()


def smooth_data(n=40, seed=0, replicates=1):
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=gen, dtype=F64).repeat(replicates, 1)
    Y = torch.sin(5 * X).sum(-1, keepdim=True)
    return X, Y + 0.05 * torch.randn(X.shape[0], 1, generator=gen, dtype=F64)


@torch.no_grad()
def brute_force_skill(gp):
    (X,) = gp.train_inputs
    t = gp.train_targets
    noise = gp.likelihood.noise.detach().expand(t.shape)
    K = gp.covar_module(X).to_dense()
    m = gp.mean_module(X)
    predictions = torch.empty_like(t)
    for i in range(t.shape[0]):
        keep = ~(X == X[i]).all(-1)
        K_rest = K[keep][:, keep] + torch.diag(noise[keep])
        predictions[i] = m[i] + K[i, keep] @ torch.linalg.solve(
            K_rest, t[keep] - m[keep]
        )
    return 1 - (t - predictions).square().sum() / (t - t.mean()).square().sum()


@pytest.mark.parametrize("replicates", [1, 3])
@pytest.mark.parametrize("fixed_noise", [True, False], ids=["fixed", "learned"])
def test_skill_is_the_leave_input_out_r2_of_plain_conditioning(fixed_noise, replicates):
    X, Y = smooth_data(n=15, replicates=replicates)
    Yvar = torch.full_like(Y, 0.05**2) if fixed_noise else None
    gp = source_gp(X, Y, Yvar)
    assert source_skill(gp) == pytest.approx(float(brute_force_skill(gp)), abs=1e-9)


def test_a_smooth_source_has_skill_and_a_scrambled_one_has_none():
    X, Y = smooth_data(n=60)
    assert source_skill(source_gp(X, Y)) > 0.9
    scrambled = Y[torch.randperm(60, generator=torch.Generator().manual_seed(1))]
    assert source_skill(source_gp(X, scrambled)) < 0.1


def test_replicates_do_not_count_as_skill():
    # pure noise observed three times at each input, with small known noise: each
    # replicate predicts its twins (plain LOO credits that), no input predicts another
    gen = torch.Generator().manual_seed(2)
    X = torch.rand(30, 2, generator=gen, dtype=F64).repeat(3, 1)
    values = torch.randn(30, 1, generator=gen, dtype=F64).repeat(3, 1)
    Y = values + 0.01 * torch.randn(90, 1, generator=gen, dtype=F64)
    gp = source_gp(X, Y, torch.full_like(Y, 1e-4))
    assert source_skill(gp) < 0.1


def test_too_few_distinct_inputs_give_nan_and_new_hyperparameters_a_new_value():
    X, Y = smooth_data(n=MIN_DISTINCT_INPUTS - 1, replicates=2)
    assert math.isnan(source_skill(source_gp(X, Y, fit=False)))
    X, Y = smooth_data(n=20)
    gp = source_gp(X, Y)
    first = source_skill(gp)
    with torch.no_grad():  # nothing is kept: the skill follows the GP's state
        gp.covar_module.lengthscale = gp.covar_module.lengthscale * 10
    assert source_skill(gp) != first


def test_batched_model_is_rejected():
    X, Y = smooth_data(n=12)
    gp = SingleTaskGP(X.expand(2, 12, 2), Y.expand(2, 12, 1))
    with pytest.raises(ValueError, match="non-batched"):
        source_skill(gp)
