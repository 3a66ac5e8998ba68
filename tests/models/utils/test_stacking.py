r"""Several GPs of one structure as one batched GP: each entry is its model."""

import copy

import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer import DeltaBOModel
from botorch_transfer.models.delta import stacked_delta_models
from botorch_transfer.models.frozen_source import frozen_source_posterior
from botorch_transfer.models.source_options import AffineMap
from botorch_transfer.models.utils.stacking import (
    StackedSourcePosterior,
    fit_batch_entries,
    load_stacked_parameters,
    stacked_module,
    unstack_parameters,
)

F64 = torch.float64


def source_gp(seed, lengthscale):
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(30, 2, generator=gen, dtype=F64)
    Y = torch.sin(4 * X[:, :1] + seed) + X[:, 1:] ** 2
    gp = SingleTaskGP(X, Y, 1e-3 * torch.ones_like(Y))
    gp.covar_module.lengthscale = torch.tensor(lengthscale, dtype=F64)
    return gp.eval()


def two_sources():
    return [
        frozen_source_posterior(source_gp(0, [0.3, 0.5]), 1.0, 0.0),
        frozen_source_posterior(source_gp(1, [0.6, 0.2]), 2.0, -1.0),
    ]


def test_each_entry_of_the_stacked_source_is_its_source():
    components = two_sources()
    stacked = StackedSourcePosterior(components)
    gen = torch.Generator().manual_seed(3)
    X = torch.rand(4, 2, 3, 2, generator=gen, dtype=F64)  # batch x K x m x d
    fixed = torch.rand(2, 5, 2, generator=gen, dtype=F64)  # K x n x d
    mean, variance = stacked.mean(X), stacked.variance(X)
    covariance, joint = stacked.covariance(X), stacked.joint_covariance(fixed, X)
    assert mean.shape == (4, 2, 3) and covariance.shape == (4, 2, 3, 3)
    assert joint.shape == (4, 2, 8, 8)
    for k, source in enumerate(components):
        x = X[:, k]
        torch.testing.assert_close(mean[:, k], source.mean(x))
        torch.testing.assert_close(variance[:, k], source.variance(x))
        torch.testing.assert_close(covariance[:, k], source.covariance(x))
        torch.testing.assert_close(joint[:, k], source.joint_covariance(fixed[k], x))
    # one set of points for every entry: given once, or without the dimension
    shared = X[:, :1]
    torch.testing.assert_close(stacked.mean(shared)[:, 1], components[1].mean(X[:, 0]))
    torch.testing.assert_close(stacked.mean(X[0, 0])[1], components[1].mean(X[0, 0]))


def test_the_stacked_sources_own_output_map_acts_on_top_of_theirs():
    components = two_sources()
    stacked = StackedSourcePosterior(components)
    X = torch.rand(2, 3, 2, dtype=F64)
    before_mean, before_cov = stacked.mean(X), stacked.covariance(X)
    stacked.set_output_affine(3.0, 0.5)
    torch.testing.assert_close(stacked.mean(X), 3.0 * before_mean + 0.5)
    torch.testing.assert_close(stacked.covariance(X), 9.0 * before_cov)


def test_a_copy_of_the_stacked_source_shares_the_sources():
    components = two_sources()
    stacked = StackedSourcePosterior(components)
    copied = copy.deepcopy(stacked)
    assert all(a is b for a, b in zip(copied.components, components))
    copied.set_output_affine(2.0, 0.0)
    assert stacked.output_scale == 1.0


def test_inputs_without_an_entry_per_source_are_an_error():
    stacked = StackedSourcePosterior(two_sources())
    with pytest.raises(ValueError, match="size 2"):
        stacked.mean(torch.rand(3, 4, 2, dtype=F64))
    with pytest.raises(ValueError, match="at least one"):
        StackedSourcePosterior([])


def kernel(lengthscale, outputscale, kind=RBFKernel, frozen=False):
    base = kind(ard_num_dims=2).double()
    base.lengthscale = torch.tensor(lengthscale, dtype=F64)
    base.raw_lengthscale.requires_grad_(not frozen)  # a source's shape: frozen
    scaled = ScaleKernel(base).double()
    scaled.outputscale = torch.tensor(outputscale, dtype=F64)
    return scaled


def test_a_stacked_kernels_entries_are_the_kernels():
    kernels = [kernel([0.2, 0.4], 0.5), kernel([0.7, 0.1], 2.0)]
    stacked = stacked_module(kernels)
    assert stacked.batch_shape == (2,) and stacked.base_kernel.batch_shape == (2,)
    assert stacked.base_kernel.lengthscale.shape == (2, 1, 2)
    X = torch.rand(5, 2, dtype=F64)
    values = stacked(X.expand(2, 5, 2)).to_dense()
    for k, single in enumerate(kernels):
        torch.testing.assert_close(values[k], single(X).to_dense())
    # the originals are not touched
    assert kernels[0].base_kernel.lengthscale.shape == (1, 2)


def test_modules_of_other_structures_or_batched_ones_do_not_stack():
    not_ard = ScaleKernel(RBFKernel()).double()  # one lengthscale, not two
    assert stacked_module([kernel([0.2, 0.4], 1.0), not_ard]) is None
    matern = kernel([0.2, 0.4], 1.0, kind=MaternKernel)
    assert stacked_module([kernel([0.2, 0.4], 1.0), matern]) is None
    batched = ScaleKernel(RBFKernel(batch_shape=torch.Size([3])))
    assert stacked_module([batched, copy.deepcopy(batched)]) is None
    assert stacked_module([]) is None


def test_parameters_go_to_their_entries_and_back():
    kernels = [kernel([0.2, 0.4], 0.5), kernel([0.7, 0.1], 2.0)]
    stacked = stacked_module(kernels)
    with torch.no_grad():
        kernels[1].outputscale = torch.tensor(3.0, dtype=F64)
    load_stacked_parameters(stacked, kernels)
    torch.testing.assert_close(stacked.outputscale, torch.tensor([0.5, 3.0], dtype=F64))
    with torch.no_grad():
        stacked.outputscale = torch.tensor([1.5, 0.25], dtype=F64)
    unstack_parameters(stacked, kernels)
    assert kernels[0].outputscale.item() == pytest.approx(1.5)
    assert kernels[1].outputscale.item() == pytest.approx(0.25)


def delta_models():
    gen = torch.Generator().manual_seed(7)
    X = torch.rand(12, 2, generator=gen, dtype=F64)
    Y = (
        2 * torch.sin(4 * X[:, :1])
        + X[:, 1:]
        + 0.05 * torch.randn(12, 1, generator=gen, dtype=F64)
    )
    models = []
    for seed, lengthscale in ((0, [0.3, 0.5]), (1, [0.6, 0.2])):
        gp = source_gp(seed, lengthscale)
        models.append(
            DeltaBOModel(
                X,
                Y,
                source=gp,
                covar_module=kernel(lengthscale, 0.5, frozen=True),
                source_map=AffineMap(),
            )
        )
    return models


def test_stacked_delta_models_entries_are_the_models_marginal_likelihoods():
    models = delta_models()
    with torch.no_grad():
        models[1].likelihood.noise = 0.05
        models[1].source_scale.fill_(1.7)
    stacked = stacked_delta_models(models)
    assert stacked.batch_shape == (2,)
    stacked.train()
    batched = ExactMarginalLogLikelihood(stacked.likelihood, stacked)
    values = batched(stacked(*stacked.train_inputs), stacked.train_targets)
    for k, model in enumerate(models):
        model.train()
        mll = ExactMarginalLogLikelihood(model.likelihood, model)
        expected = mll(model(*model.train_inputs), model.train_targets)
        torch.testing.assert_close(values[k], expected)


def test_stacked_delta_models_entries_are_the_models_posteriors():
    models = delta_models()
    stacked = stacked_delta_models(models)
    X = torch.rand(3, 4, 2, dtype=F64)  # batch x q x d
    posterior = stacked.posterior(X.unsqueeze(-3))
    for k, model in enumerate(models):
        expected = model.posterior(X)  # the model's units are its data's: no map
        torch.testing.assert_close(posterior.mean[:, k], expected.mean)
        torch.testing.assert_close(
            posterior.distribution.covariance_matrix[:, k],
            expected.distribution.covariance_matrix,
        )


def test_models_on_other_data_do_not_stack():
    models = delta_models()
    other = DeltaBOModel(
        models[0].target_X[:6],
        models[0].target_Y[:6],
        source=source_gp(0, [0.3, 0.5]),
        source_map=AffineMap(),
    )
    assert stacked_delta_models([models[0], other]) is None
    assert stacked_delta_models(models[:1]) is None


def test_each_entry_is_fitted_as_its_model_alone():
    # the difference kernels keep their sources' shapes (frozen lengthscales), as
    # the transfer models' do: each entry's run is the model's own fit, step by step
    models = delta_models()
    stacked = stacked_delta_models(models)
    results = fit_batch_entries(ExactMarginalLogLikelihood(stacked.likelihood, stacked))
    assert len(results) == 2 and all(r["success"] for r in results)
    assert not stacked.training
    for k, model in enumerate(models):
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        for name, parameter in stacked.named_parameters():
            torch.testing.assert_close(
                parameter[k],
                dict(model.named_parameters())[name],
                rtol=1e-9,
                atol=1e-12,
            )
