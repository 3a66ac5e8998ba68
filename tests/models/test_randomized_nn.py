r"""RandomizedNNEnsemble (Oliveira 2026, Sec. 4.1, eq. 10): trained members against the
closed-form minimizers of eq. 10, exploration, the BoTorch contract, BO loops."""

import math
import warnings

import pytest
import torch
from botorch.acquisition import (
    LogExpectedImprovement,
    qLogExpectedImprovement,
    qLogNoisyExpectedImprovement,
    qUpperConfidenceBound,
)
from botorch.models.transforms import Normalize, Standardize
from botorch.optim import optimize_acqf
from botorch.posteriors.ensemble import EnsemblePosterior

from botorch_transfer import (
    LogPowerSchedule,
    RandomizedNNEnsemble,
    randomized_nn_thompson_candidate,
)
from botorch_transfer.models.randomized_nn import InputScaleWarning
from botorch_transfer.models.randomized_nn_options import (
    FunctionSpaceRegularizer,
    LFBOLoss,
    NetworkOptions,
    TrainingOptions,
)
from botorch_transfer.validation import OutcomeScaleWarning

F64 = torch.float64
NUM_FEATURES = 12
BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=F64)


def f(X):
    return torch.sin(5 * X[..., :1]) + torch.cos(4 * X[..., 1:])


def data(n=15, dtype=F64, device="cpu", seed=1):
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=gen, dtype=F64)
    return X.to(device=device, dtype=dtype), f(X).to(device=device, dtype=dtype)


class Features(torch.nn.Module):
    r"""A fixed random-Fourier feature map: with ``hidden=()`` a member is linear in
    its parameters."""

    def __init__(self, d=2, num=NUM_FEATURES):
        super().__init__()
        gen = torch.Generator().manual_seed(123)
        self.register_buffer("omega", 3 * torch.randn(d, num, generator=gen, dtype=F64))
        self.register_buffer(
            "phase", 2 * math.pi * torch.rand(num, generator=gen, dtype=F64)
        )

    def forward(self, X):
        return torch.cos(X @ self.omega.to(X) + self.phase.to(X))


def design(model, X):
    r"""The whitened design matrix [input_scale / sqrt(F) phi(x), bias_scale] of a
    linear member, written from the parameterization stated in the docstring (weights
    first, then the bias)."""
    phi = model.feature_map(X)
    scale = model.input_scale / math.sqrt(phi.shape[-1])
    return torch.cat(
        [scale * phi, torch.full_like(phi[..., :1], model.bias_scale)], dim=-1
    )


def linear_model(X, Y, **kwargs):
    options = dict(
        network=NetworkOptions(
            hidden=(), feature_map=Features().to(X), input_scale=2.0, bias_scale=0.7
        ),
        training_options=TrainingOptions(optimizer="lbfgs", num_steps=500),
        seed=3,
        num_members=5,
        outcome_transform=None,  # the closed forms are eq. 10 on the raw outcomes
    )
    return RandomizedNNEnsemble(X, Y, **{**options, **kwargs})


# ---------------------------------------------------------------- eq. 10 in closed form
@pytest.mark.parametrize("lam", [0.3, None])
def test_parameter_regularizer_equals_ridge_to_prior(device, lam):
    X, Y = data(device=device)
    model = linear_model(X, Y, lambda_schedule=lam)
    lam_t = 1e-3 * math.log(15 + math.e) ** 1.5 if lam is None else lam
    assert model.lambda_t == pytest.approx(lam_t, rel=1e-12)
    # argmin (lam/2)||theta - theta0||^2 + (1/2)||Phi theta - y||^2
    #   = (Phi'Phi + lam I)^-1 (Phi'y + lam theta0)
    Phi, theta0 = design(model, X), model.initial_parameters
    A = Phi.T @ Phi + lam_t * torch.eye(Phi.shape[-1], dtype=F64, device=device)
    expected = torch.linalg.solve(A, (Phi.T @ Y + lam_t * theta0.T)).T  # s x P
    torch.testing.assert_close(model.trained_parameters, expected, atol=1e-6, rtol=0)
    X_test = torch.rand(7, 2, dtype=F64, device=device)
    values = model.posterior(X_test).values  # s x q x 1
    torch.testing.assert_close(
        values.squeeze(-1), expected @ design(model, X_test).T, atol=1e-6, rtol=0
    )


def test_function_regularizer_equals_closed_form(device):
    X, Y = data(n=6, device=device)  # fewer points than parameters: the anchors matter
    anchors = torch.rand(
        200, 2, dtype=F64, device=device
    )  # enough anchors for a well-posed (cond ~5e5) system
    model = linear_model(
        X, Y, regularizer=FunctionSpaceRegularizer(anchors=anchors), lambda_schedule=0.5
    )
    # Z = [X; anchors]:
    # argmin (lam/2)||Phi_Z (theta - theta0)||^2 + (1/2)||Phi theta - y||^2
    Phi, Phi_Z, theta0 = (
        design(model, X),
        design(model, torch.cat([X, anchors])),
        model.initial_parameters,
    )
    M = Phi_Z.T @ Phi_Z
    expected = torch.linalg.solve(
        Phi.T @ Phi + 0.5 * M, Phi.T @ Y + 0.5 * M @ theta0.T
    ).T
    torch.testing.assert_close(model.trained_parameters, expected, atol=1e-6, rtol=0)


def test_transforms_give_ridge_solution_in_user_units():
    X, Y = data()
    lo, hi = torch.tensor([-1.0, 2.0], dtype=F64), torch.tensor([3.0, 5.0], dtype=F64)
    X_raw, Y_raw = lo + (hi - lo) * X, 10 * Y - 4
    model = linear_model(
        X_raw,
        Y_raw,
        lambda_schedule=0.2,
        input_transform=Normalize(2, bounds=torch.stack([lo, hi])),
        outcome_transform=Standardize(m=1),
    )
    # reference: ridge-to-prior on the normalized inputs and standardized outcomes
    mu, sd = Y_raw.mean(), Y_raw.std()
    Phi = design(model, X)
    expected = torch.linalg.solve(
        Phi.T @ Phi + 0.2 * torch.eye(Phi.shape[-1], dtype=F64),
        Phi.T @ ((Y_raw - mu) / sd) + 0.2 * model.initial_parameters.T,
    ).T
    X_test = torch.rand(2, 4, 2, dtype=F64)
    post = model.posterior(lo + (hi - lo) * X_test)
    torch.testing.assert_close(
        post.values.squeeze(-1),
        mu + sd * (design(model, X_test) @ expected.T).movedim(-1, -2),
        atol=1e-6,
        rtol=0,
    )


def test_cross_entropy_equals_newton_solution():
    X, Y = data(n=20)
    gamma = 0.3
    model = linear_model(X, Y, loss=LFBOLoss(gamma=gamma), lambda_schedule=0.4)
    # LFBO labels u = 1[y >= tau], tau the empirical (1 - gamma)-quantile
    ys = Y.squeeze(-1).sort().values
    pos = (1 - gamma) * (len(ys) - 1)
    tau = ys[math.floor(pos)] + (pos - math.floor(pos)) * (
        ys[math.ceil(pos)] - ys[math.floor(pos)]
    )
    assert model.tau.item() == pytest.approx(tau.item(), abs=1e-12)
    u = (Y.squeeze(-1) >= tau).to(F64)
    assert torch.equal(model.train_targets, u) and u.sum() == 6
    # Newton's method on (lam/2)||theta - theta0||^2 + sum CE(sigmoid(Phi theta), u),
    # per member
    Phi = design(model, X)
    for theta0, theta_model in zip(model.initial_parameters, model.trained_parameters):
        theta = theta0.clone()
        for _ in range(50):
            p = torch.sigmoid(Phi @ theta)
            grad = Phi.T @ (p - u) + 0.4 * (theta - theta0)
            hess = Phi.T @ (Phi * (p * (1 - p)).unsqueeze(-1)) + 0.4 * torch.eye(
                len(theta), dtype=F64
            )
            theta = theta - torch.linalg.solve(hess, grad)
        torch.testing.assert_close(theta_model, theta, atol=1e-6, rtol=0)
    # the posterior is the class probability P(y >= tau | x), the learned acquisition
    X_test = torch.rand(5, 2, dtype=F64)
    expected = torch.sigmoid(design(model, X_test) @ model.trained_parameters.T).T
    torch.testing.assert_close(
        model.posterior(X_test).values.squeeze(-1), expected, atol=1e-12, rtol=0
    )


def test_lambda_schedule():
    schedule = LogPowerSchedule(c=0.5, q=2.0)
    assert schedule(0) == pytest.approx(0.5)
    assert schedule(10) == pytest.approx(0.5 * math.log(10 + math.e) ** 2)
    assert LogPowerSchedule().q > 1  # Theorem 4.2 needs q > 1
    X, Y = data(n=8)
    assert RandomizedNNEnsemble(
        X,
        Y,
        num_members=1,
        training_options=TrainingOptions(num_steps=1),
        lambda_schedule=schedule,
    ).lambda_t == schedule(8)
    assert (
        RandomizedNNEnsemble(
            X,
            Y,
            num_members=1,
            training_options=TrainingOptions(num_steps=1),
            lambda_schedule=lambda t: t + 1.0,
        ).lambda_t
        == 9.0
    )
    with pytest.raises(ValueError, match="`c` must be"):
        LogPowerSchedule(c=0.0)


# ---------------------------------------------------------------- exploration
def test_without_data_members_are_prior_draws(device):
    X, Y = data(n=0, device=device)
    model = linear_model(X, Y, num_members=4000, seed=0)
    assert torch.equal(
        model.trained_parameters, model.initial_parameters
    )  # theta_0 minimizes eq. 10
    X_test = torch.rand(6, 2, dtype=F64, device=device)
    values = model.posterior(X_test).values.squeeze(-1)
    # prior: theta ~ N(0, I) so Var g(x) = |design(x)|^2
    prior_var = design(model, X_test).pow(2).sum(-1)
    # 4000 draws: the sample variance has relative sd sqrt(2 / 4000) = 2.2%
    torch.testing.assert_close(values.var(0), prior_var, rtol=0.08, atol=0)
    torch.testing.assert_close(
        values.mean(0),
        torch.zeros_like(prior_var),
        atol=4 * (prior_var / 4000).sqrt().max().item(),
        rtol=0,
    )


def test_mlp_forward_matches_torch_nn():
    r"""The NTK parameterization of the docstring, checked against plain torch.nn
    layers."""
    X, Y = data(n=0)
    model = RandomizedNNEnsemble(
        X,
        Y,
        num_members=3,
        network=NetworkOptions(
            hidden=(5, 4),
            input_scale=3.0,
            weight_scale=1.5,
            bias_scale=0.5,
            activation="tanh",
        ),
        seed=2,
    )
    X_test = torch.rand(7, 2, dtype=F64)
    for j, theta in enumerate(model.initial_parameters):
        layers, offset = [], 0
        for i, (fan_in, fan_out) in enumerate([(2, 5), (5, 4), (4, 1)]):
            lin = torch.nn.Linear(fan_in, fan_out).double()
            scale = (3.0 if i == 0 else 1.5) / math.sqrt(fan_in)
            lin.weight.data = scale * theta[offset : offset + fan_in * fan_out].reshape(
                fan_out, fan_in
            )
            offset += fan_in * fan_out
            lin.bias.data = 0.5 * theta[offset : offset + fan_out]
            offset += fan_out
            layers += [lin, torch.nn.Tanh()]
        net = torch.nn.Sequential(*layers[:-1])
        assert offset == theta.numel()
        torch.testing.assert_close(
            model.posterior(X_test).values[j], net(X_test), atol=1e-12, rtol=0
        )


def test_members_agree_near_data_and_disagree_away():
    x0 = torch.tensor([0.3, 0.7], dtype=F64)
    gen = torch.Generator().manual_seed(0)
    X = x0 + 0.02 * (torch.rand(40, 2, generator=gen, dtype=F64) - 0.5)
    Y = torch.ones(40, 1, dtype=F64)
    options = dict(
        num_members=32,
        network=NetworkOptions(hidden=(32, 32), input_scale=6.0),
        seed=5,
    )
    prior = RandomizedNNEnsemble(X[:0], Y[:0], **options)
    model = RandomizedNNEnsemble(X, Y, **options)
    near, far = x0.reshape(1, 2), torch.tensor([[0.95, 0.05]], dtype=F64)
    prior_sd_near = prior.posterior(near).variance.sqrt().item()
    prior_sd_far = prior.posterior(far).variance.sqrt().item()
    post_near, post_far = model.posterior(near), model.posterior(far)
    assert post_near.variance.sqrt().item() < 0.01 * prior_sd_near
    assert post_near.mean.item() == pytest.approx(1.0, abs=0.01)
    # far away the members keep much of their prior spread (not all: the output bias
    # and the network's long-range correlations are pinned by the data at x0 too)
    assert post_far.variance.sqrt().item() > 0.25 * prior_sd_far


# ---------------------------------------------------------------- BoTorch contract
@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("transforms", [False, True])
@pytest.mark.parametrize("loss", ["squared", "cross_entropy"])
def test_posterior_shapes_dtypes_devices(device, dtype, transforms, loss):
    X, Y = data(n=10, dtype=dtype, device=device)
    options = dict(input_transform=Normalize(2)) if transforms else {}
    if transforms and loss == "squared":
        options["outcome_transform"] = Standardize(m=1)
    model = RandomizedNNEnsemble(
        X,
        Y,
        num_members=4,
        network=NetworkOptions(hidden=(8,)),
        training_options=TrainingOptions(num_steps=20),
        loss=loss,
        seed=0,
        **options,
    )
    assert model.num_outputs == 1 and model.batch_shape == torch.Size([])
    for shape in [(3, 2), (5, 3, 2), (2, 4, 3, 2)]:
        post = model.posterior(torch.rand(*shape, dtype=dtype, device=device))
        assert isinstance(post, EnsemblePosterior)
        assert post.values.shape == torch.Size([*shape[:-2], 4, shape[-2], 1])
        assert (
            post.mean.shape == torch.Size([*shape[:-1], 1])
            and post.variance.shape == post.mean.shape
        )
        assert post.values.dtype == dtype and post.values.device.type == device.type
        assert torch.isfinite(post.values).all()
        if loss == "cross_entropy":
            assert ((post.values > 0) & (post.values < 1)).all()


def test_outcome_transform_is_exact_affine_map():
    X, Y = data(n=12)
    options = dict(
        num_members=3,
        network=NetworkOptions(hidden=(16,)),
        training_options=TrainingOptions(num_steps=50),
        seed=4,
    )
    with_t = RandomizedNNEnsemble(X, Y, outcome_transform=Standardize(m=1), **options)
    mu, sd = Y.mean(), Y.std()
    manual = RandomizedNNEnsemble(X, (Y - mu) / sd, **options)
    X_test = torch.rand(4, 2, dtype=F64)
    torch.testing.assert_close(
        with_t.posterior(X_test).values, mu + sd * manual.posterior(X_test).values
    )


def test_seed_to_and_state_dict():
    X, Y = data(n=10)
    options = dict(
        num_members=3,
        network=NetworkOptions(hidden=(8,)),
        training_options=TrainingOptions(num_steps=30),
    )
    a, b = (
        RandomizedNNEnsemble(X, Y, seed=7, **options),
        RandomizedNNEnsemble(X, Y, seed=7, **options),
    )
    c = RandomizedNNEnsemble(X, Y, seed=8, **options)
    X_test = torch.rand(5, 2, dtype=F64)
    assert torch.equal(a.posterior(X_test).values, b.posterior(X_test).values)
    assert not torch.allclose(a.posterior(X_test).values, c.posterior(X_test).values)
    c.load_state_dict(a.state_dict())
    assert torch.equal(a.posterior(X_test).values, c.posterior(X_test).values)
    a32 = a.to(torch.float32)
    values32 = a32.posterior(X_test.float()).values
    assert values32.dtype == torch.float32
    torch.testing.assert_close(
        values32.double(), b.posterior(X_test).values, atol=1e-5, rtol=1e-5
    )


def test_same_seed_same_members_on_every_device(device):
    X, Y = data(n=0, device=device)
    model = RandomizedNNEnsemble(
        X, Y, num_members=2, network=NetworkOptions(hidden=(4,)), seed=11
    )
    reference = RandomizedNNEnsemble(
        *data(n=0), num_members=2, network=NetworkOptions(hidden=(4,)), seed=11
    )
    torch.testing.assert_close(
        model.initial_parameters.cpu(), reference.initial_parameters, atol=0, rtol=0
    )


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            dict(
                train_X=torch.rand(3, 4, 2, dtype=F64),
                train_Y=torch.rand(3, 4, 1, dtype=F64),
            ),
            ValueError,
            "n x d",
        ),
        (
            dict(train_X=torch.rand(5, dtype=F64), train_Y=torch.rand(5, 1, dtype=F64)),
            ValueError,
            "train_X",
        ),
        (
            dict(train_Y=torch.rand(4, 1, dtype=F64)),
            ValueError,
            "`train_Y` must have shape",
        ),
        (
            dict(train_Y=torch.rand(6, dtype=F64)),
            ValueError,
            "`train_Y` must have shape",
        ),
        (
            dict(train_X=torch.tensor([[0.1, float("nan")]] * 6, dtype=F64)),
            ValueError,
            "`train_X` contains NaN",
        ),
        (
            dict(train_Y=torch.tensor([[float("inf")]] * 6, dtype=F64)),
            ValueError,
            "`train_Y` contains NaN",
        ),
        (dict(train_Y=torch.rand(6, 1)), TypeError, "dtype"),
        (
            dict(train_Yvar=torch.rand(6, 1, dtype=F64)),
            ValueError,
            "`train_Yvar` must be None",
        ),
        (dict(num_members=0), ValueError, "`num_members` must be a positive int"),
        (dict(num_members=2.5), TypeError, "`num_members` must be an int"),
        (dict(loss="hinge"), ValueError, "Unknown `loss`"),
        (dict(regularizer="l1"), ValueError, "Unknown `regularizer`"),
        (
            dict(loss="cross_entropy", outcome_transform=Standardize(m=1)),
            ValueError,
            "`outcome_transform` is not used",
        ),
        (
            dict(lambda_schedule=-1.0),
            ValueError,
            "`lambda_schedule` must be a positive",
        ),
        (dict(lambda_schedule=lambda t: 0.0), ValueError, "`lambda_schedule`"),
        (
            dict(regularizer=FunctionSpaceRegularizer(torch.rand(4, 3, dtype=F64))),
            ValueError,
            "`anchors` must be a k x d",
        ),
        (dict(network=(64, 64)), TypeError, "`network` must be a NetworkOptions"),
        (
            dict(training_options=dict(num_steps=5)),
            TypeError,
            "`training_options` must be a TrainingOptions",
        ),
    ],
)
def test_bad_inputs_are_rejected(kwargs, error, match):
    X, Y = data(n=6)
    arguments = dict(
        train_X=X,
        train_Y=Y,
        training_options=TrainingOptions(num_steps=1),
        num_members=1,
    )
    arguments.update(kwargs)
    with pytest.raises(error, match=match):
        RandomizedNNEnsemble(**arguments)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: NetworkOptions(hidden=(8, 0)), "`hidden`"),
        (lambda: NetworkOptions(activation="swish2"), "Unknown `activation`"),
        (lambda: NetworkOptions(input_scale=-1.0), "`input_scale`"),
        (lambda: TrainingOptions(optimizer="sgd"), "Unknown `optimizer`"),
        (lambda: TrainingOptions(num_steps=0), "`num_steps`"),
        (lambda: TrainingOptions(lr=math.inf), "`lr`"),
        (lambda: LFBOLoss(gamma=1.0), "`gamma` must lie in the open interval"),
        (lambda: LFBOLoss(gamma=0.0), "`gamma`"),
        (lambda: FunctionSpaceRegularizer(num_anchors=-1), "`num_anchors`"),
        (
            lambda: FunctionSpaceRegularizer(torch.rand(4, dtype=F64)),
            "`anchors` must be a k x d",
        ),
        (
            lambda: FunctionSpaceRegularizer(torch.full((2, 2), math.nan)),
            "`anchors` contains NaN",
        ),
    ],
)
def test_bad_options_are_rejected_where_they_are_built(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_old_keywords_fill_the_options_with_a_deprecation_warning():
    X, Y = data(n=6)
    with pytest.warns(DeprecationWarning, match="is deprecated") as caught:
        model = RandomizedNNEnsemble(
            X,
            Y,
            num_members=2,
            hidden=(4,),
            input_scale=2.0,
            num_steps=3,
            loss="cross_entropy",
            gamma=0.5,
            regularizer="function",
            num_anchors=5,
            seed=0,
        )
    # each warning points at the caller's line
    assert {w.filename for w in caught} == {__file__}
    assert model.network == NetworkOptions(hidden=(4,), input_scale=2.0)
    assert model.training_options == TrainingOptions(num_steps=3)
    assert (model.hidden, model.input_scale, model.num_steps) == ((4,), 2.0, 3)
    assert (model.loss, model.gamma, model.regularizer) == (
        "cross_entropy",
        0.5,
        "function",
    )
    assert model.anchors_model.shape == (5, 2)
    reference = RandomizedNNEnsemble(
        X,
        Y,
        num_members=2,
        network=NetworkOptions(hidden=(4,), input_scale=2.0),
        training_options=TrainingOptions(num_steps=3),
        loss=LFBOLoss(gamma=0.5),
        regularizer=FunctionSpaceRegularizer(num_anchors=5),
        seed=0,
    )
    torch.testing.assert_close(
        model.trained_parameters, reference.trained_parameters, rtol=0, atol=0
    )


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(gamma=0.5), ValueError, r"\['gamma'\] apply to loss='cross_entropy'"),
        (
            dict(anchors=torch.rand(4, 2, dtype=F64)),
            ValueError,
            r"\['anchors'\] apply to regularizer='function'",
        ),
        (
            dict(hidden=(4,), network=NetworkOptions()),
            ValueError,
            "give them once, in `network`",
        ),
        (
            dict(gamma=0.5, loss=LFBOLoss()),
            ValueError,
            "give them once, in `loss`",
        ),
        (dict(num_layers=3), TypeError, "unexpected keyword arguments"),
    ],
)
def test_old_keywords_that_cannot_apply_are_rejected(kwargs, error, match):
    X, Y = data(n=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(error, match=match):
            RandomizedNNEnsemble(X, Y, num_members=1, **kwargs)


def test_bad_posterior_inputs_and_ts_arguments():
    X, Y = data(n=6)
    model = RandomizedNNEnsemble(
        X,
        Y,
        num_members=2,
        network=NetworkOptions(hidden=(4,)),
        training_options=TrainingOptions(num_steps=1),
    )
    with pytest.raises(ValueError, match="`X` must have d=2 columns"):
        model.posterior(torch.rand(4, 3, dtype=F64))
    with pytest.raises(ValueError, match="exactly one of `bounds`"):
        randomized_nn_thompson_candidate(X, Y)
    with pytest.raises(ValueError, match="`bounds` must be a 2 x d"):
        randomized_nn_thompson_candidate(X, Y, bounds=torch.zeros(2, 3, dtype=F64))
    with pytest.raises(ValueError, match="`num_members` is fixed to 1"):
        randomized_nn_thompson_candidate(X, Y, bounds=BOUNDS, num_members=4)


# ---------------------------------------------------------------- BO loops
F_MAX = 2.0 * 0.999  # sin(5x) + cos(4y) peaks at 2 at x = pi/10, y = 0


def test_qucb_and_qlogei_loop():
    X, Y = data(n=4, seed=2)
    for _ in range(10):
        model = RandomizedNNEnsemble(
            X,
            Y,
            num_members=8,
            network=NetworkOptions(hidden=(32, 32)),
            training_options=TrainingOptions(num_steps=200),
            seed=len(X),
            input_transform=Normalize(2, bounds=BOUNDS),
            outcome_transform=Standardize(m=1),
        )
        acqf = qUpperConfidenceBound(model, beta=2.0)
        x, value = optimize_acqf(
            acqf, bounds=BOUNDS, q=2, num_restarts=2, raw_samples=64
        )
        assert x.shape == (2, 2) and torch.isfinite(value)
        X, Y = torch.cat([X, x]), torch.cat([Y, f(x)])
    assert ((X >= 0) & (X <= 1)).all() and len(X) == 24
    assert Y.max() > 1.9 > Y[:4].max()
    logei = qLogExpectedImprovement(model, best_f=Y.max())
    x, value = optimize_acqf(logei, bounds=BOUNDS, q=1, num_restarts=2, raw_samples=64)
    assert x.shape == (1, 2) and torch.isfinite(value)


def test_subset_output_says_why_and_what_to_do():
    model = RandomizedNNEnsemble(
        *data(n=5), num_members=2, training_options=TrainingOptions(num_steps=5), seed=0
    )
    with pytest.raises(NotImplementedError, match="single outcome") as error:
        model.subset_output([0])
    assert "ModelList" in str(error.value)


def test_botorch_incumbent_idioms_see_the_training_data():
    # as on the GPs: train_targets are standardized, target_Y is the user's
    X, Y = data(n=6)
    Y = 10 * Y + 3
    model = RandomizedNNEnsemble(
        X,
        Y,
        num_members=4,
        training_options=TrainingOptions(num_steps=20),
        seed=0,
        input_transform=Normalize(2, bounds=BOUNDS),
        outcome_transform=Standardize(m=1),
    )
    assert torch.equal(model.target_X, X) and torch.equal(model.target_Y, Y)
    assert model.target_Yvar is None
    acqf = LogExpectedImprovement(model, best_f=model.target_Y.max())
    torch.testing.assert_close(acqf.best_f, Y.max())
    acqf = qLogNoisyExpectedImprovement(
        model, X_baseline=model.target_X, prune_baseline=False
    )
    assert torch.equal(acqf.X_baseline, X)
    assert torch.isfinite(acqf(torch.rand(3, 1, 2, dtype=F64))).all()


def test_outcomes_are_standardized_by_default():
    # data far from 0 in large units: eq. 10's lambda_t and the weight scales are set
    # for standardized outcomes, so the default standardizes (as SingleTaskGP does)
    gen = torch.Generator().manual_seed(0)
    X = torch.rand(12, 2, generator=gen, dtype=F64)
    Y = 1080 + 880 * (0.5 + 0.5 * torch.sin(3 * X[:, :1]) * torch.cos(2 * X[:, 1:]))
    model = RandomizedNNEnsemble(
        X, Y, num_members=4, training_options=TrainingOptions(num_steps=200), seed=0
    )
    assert isinstance(model.outcome_transform, Standardize)
    span = (Y.max() - Y.min()).item()
    torch.testing.assert_close(model.posterior(X).mean, Y, atol=0.05 * span, rtol=0)
    # `None` trains on the raw outcomes; the LFBO classifier needs no transform
    raw = RandomizedNNEnsemble(
        X,
        Y,
        num_members=1,
        training_options=TrainingOptions(num_steps=1),
        outcome_transform=None,
    )
    assert not hasattr(raw, "outcome_transform")
    lfbo = RandomizedNNEnsemble(
        X,
        Y,
        num_members=1,
        training_options=TrainingOptions(num_steps=1),
        loss="cross_entropy",
    )
    assert not hasattr(lfbo, "outcome_transform")


def test_query_inputs_are_checked_and_cast_to_the_model_dtype():
    X, Y = data(n=8)
    model = RandomizedNNEnsemble(
        X.float(),
        Y.float(),
        num_members=2,
        network=NetworkOptions(hidden=(4,)),
        training_options=TrainingOptions(num_steps=5),
        seed=0,
    )
    X_test = torch.rand(3, 2, dtype=F64)
    values = model.posterior(X_test).values  # a float64 query of a float32 model
    assert values.dtype == F64
    torch.testing.assert_close(
        values, model.posterior(X_test.float()).values.double(), atol=1e-5, rtol=1e-5
    )
    with pytest.raises(ValueError, match="`X` contains NaN or infinite values"):
        model.posterior(X_test * float("nan"))
    with pytest.raises(ValueError, match=r"`X` must have shape .* x q x d"):
        model.posterior(X_test[0])


def test_condition_on_observations_retrains_with_the_same_draws():
    X, Y = data(n=8)

    def settings():  # fresh transforms per model (training fits them in place)
        return dict(
            num_members=3,
            training_options=TrainingOptions(num_steps=30),
            seed=4,
            input_transform=Normalize(2),
            outcome_transform=Standardize(m=1),
        )

    model = RandomizedNNEnsemble(X[:6], Y[:6], **settings())
    conditioned = model.condition_on_observations(X[6:], Y[6:])
    # the same as training on all points from scratch with the same settings
    direct = RandomizedNNEnsemble(X, Y, **settings())
    torch.testing.assert_close(
        conditioned.trained_parameters, direct.trained_parameters, rtol=0, atol=0
    )
    torch.testing.assert_close(conditioned.target_Y, Y)
    # the original model is unchanged
    assert model.target_X.shape == (6, 2)
    with pytest.raises(ValueError, match="m x 1"):
        model.condition_on_observations(X[6:], Y[6:, 0])
    with pytest.raises(ValueError, match="noise"):
        model.condition_on_observations(X[6:], Y[6:], noise=torch.ones(2, 1))


@pytest.mark.parametrize("regularizer", ["parameter", "function"])
def test_fantasize_trains_one_ensemble_per_fantasy_as_the_closed_form(
    device, regularizer
):
    from botorch.sampling.index_sampler import IndexSampler

    X, Y = data(n=10, device=device)
    anchors = torch.rand(200, 2, dtype=F64, device=device)
    # the function-space problem is ill-conditioned (cond ~8e5 for any lambda):
    # a larger lambda_t keeps L-BFGS's error below the tolerance, as for one model
    lam = 0.3 if regularizer == "parameter" else 10.0
    if regularizer == "function":
        regularizer = FunctionSpaceRegularizer(anchors=anchors)
    model = linear_model(X, Y, lambda_schedule=lam, regularizer=regularizer)
    X_new = torch.rand(2, 3, 2, dtype=F64, device=device)  # batch 2, q = 3
    fantasy = model.fantasize(X_new, IndexSampler(torch.Size([4]), seed=0))
    assert fantasy.batch_shape == torch.Size([4, 2])
    assert fantasy.target_X.shape == (4, 2, 13, 2)
    members = model.posterior(X_new).values  # 2 x s x 3 x 1
    Phi_new = design(model, X_new)  # 2 x 3 x P
    theta0, eye = model.initial_parameters, torch.eye(Phi_new.shape[-1]).to(X)
    for k in range(4):
        for b in range(2):
            Y_fantasy = fantasy.target_Y[k, b, 10:]
            # each fantasy is one member's prediction at X_new (the IndexSampler)
            assert any(
                torch.allclose(Y_fantasy, members[b, j], atol=1e-12, rtol=0)
                for j in range(model.num_members)
            )
            # eq. 10 on the data plus the fantasy in closed form: ridge to theta_0,
            # in parameter space or over Z = [data; anchors]
            Phi = torch.cat([design(model, X), Phi_new[b]])
            Y_all = torch.cat([Y, Y_fantasy])
            if regularizer == "parameter":
                M = eye
            else:
                Phi_Z = torch.cat([Phi, design(model, anchors)])
                M = Phi_Z.T @ Phi_Z
            expected = torch.linalg.solve(
                Phi.T @ Phi + lam * M, Phi.T @ Y_all + lam * M @ theta0.T
            ).T
            torch.testing.assert_close(
                fantasy.trained_parameters[k, b], expected, atol=1e-6, rtol=0
            )
    # the fantasy model's posterior broadcasts its batch with the query's
    values = fantasy.posterior(torch.rand(2, 5, 2, dtype=F64, device=device)).values
    assert values.shape == (4, 2, model.num_members, 5, 1)
    assert model.batch_shape == torch.Size([])  # the model itself is unchanged


def test_fantasies_keep_the_transforms_fixed():
    from botorch.sampling.index_sampler import IndexSampler

    X, Y = data(n=8)
    model = RandomizedNNEnsemble(
        4 * X,
        10 * Y - 3,
        num_members=3,
        network=NetworkOptions(hidden=(8,)),
        training_options=TrainingOptions(num_steps=40),
        seed=2,
        input_transform=Normalize(2),
        outcome_transform=Standardize(m=1),
    )
    X_new = 4 * torch.rand(1, 2, dtype=F64)
    fantasy = model.fantasize(X_new, IndexSampler(torch.Size([2]), seed=1))
    torch.testing.assert_close(
        fantasy.outcome_transform.means, model.outcome_transform.means
    )
    torch.testing.assert_close(
        fantasy.input_transform.coefficient, model.input_transform.coefficient
    )
    # fantasy k is the ensemble trained on the augmented data in model units
    for k in range(2):
        X_all, Y_all = fantasy.target_X[k], fantasy.target_Y[k]
        reference = RandomizedNNEnsemble(
            model.transform_inputs(X_all),
            (Y_all - model.outcome_transform.means) / model.outcome_transform.stdvs,
            num_members=3,
            network=NetworkOptions(hidden=(8,)),
            training_options=TrainingOptions(num_steps=40),
            seed=2,
            outcome_transform=None,
        )
        torch.testing.assert_close(
            fantasy.trained_parameters[k],
            reference.trained_parameters,
            atol=1e-10,
            rtol=0,
        )


def test_knowledge_gradient_evaluates_given_candidates():
    from botorch.acquisition import qKnowledgeGradient
    from botorch.sampling.index_sampler import IndexSampler

    X, Y = data(n=8)
    model = RandomizedNNEnsemble(
        X,
        Y,
        num_members=3,
        network=NetworkOptions(hidden=(8,)),
        training_options=TrainingOptions(num_steps=30),
        seed=0,
    )
    qkg = qKnowledgeGradient(
        model, num_fantasies=None, sampler=IndexSampler(torch.Size([3]), seed=0)
    )
    candidates = torch.rand(4, 1, 2, dtype=F64)
    values = qkg.evaluate(candidates, bounds=BOUNDS, num_restarts=2, raw_samples=16)
    assert values.shape == (4,) and torch.isfinite(values).all()


def test_fantasize_says_what_it_needs():
    from botorch.sampling import SobolQMCNormalSampler
    from botorch.sampling.index_sampler import IndexSampler

    X, Y = data(n=5)
    model = RandomizedNNEnsemble(
        X, Y, num_members=2, training_options=TrainingOptions(num_steps=5), seed=0
    )
    X_new = torch.rand(1, 2, dtype=F64)
    with pytest.raises(ValueError, match="`sampler` must be an IndexSampler"):
        model.fantasize(X_new, SobolQMCNormalSampler(torch.Size([2])))
    with pytest.raises(ValueError, match="`observation_noise` must be None"):
        model.fantasize(
            X_new, IndexSampler(torch.Size([2])), observation_noise=torch.ones(1, 1)
        )
    lfbo = RandomizedNNEnsemble(
        X,
        Y,
        num_members=2,
        training_options=TrainingOptions(num_steps=5),
        seed=0,
        loss="cross_entropy",
    )
    with pytest.raises(NotImplementedError, match="loss='squared'"):
        lfbo.fantasize(X_new, IndexSampler(torch.Size([2])))


def test_state_dict_holds_the_draws_and_members_are_retrained_on_load():
    X, Y = data(n=10)
    options = dict(
        num_members=3,
        network=NetworkOptions(hidden=(8,)),
        training_options=TrainingOptions(num_steps=30),
    )
    a = RandomizedNNEnsemble(X, Y, seed=7, **options)
    assert set(a.state_dict()) == {
        "initial_parameters",
        "outcome_transform.means",
        "outcome_transform.stdvs",
        "outcome_transform._stdvs_sq",
        "outcome_transform._is_trained",
    }
    # a's draws on other data (of another size): trained on that data, nothing of
    # a's training is carried over (Ax loads a state dict into its CV-fold models)
    c = RandomizedNNEnsemble(X[:6], Y[:6], seed=8, **options)
    c.load_state_dict(a.state_dict())
    expected = RandomizedNNEnsemble(X[:6], Y[:6], seed=7, **options)
    torch.testing.assert_close(
        c.trained_parameters, expected.trained_parameters, atol=1e-12, rtol=0
    )
    # fit trains only when the draws changed; condition_on_observations keeps them
    before = c.trained_parameters
    assert c.fit() is c and c.trained_parameters is before
    conditioned = c.condition_on_observations(X[6:], Y[6:])
    torch.testing.assert_close(conditioned.initial_parameters, a.initial_parameters)


def test_scalarized_posterior_transform_applies_to_the_members():
    from botorch.acquisition.objective import ScalarizedPosteriorTransform

    X, Y = data(n=6)
    model = RandomizedNNEnsemble(
        X, Y, num_members=3, training_options=TrainingOptions(num_steps=10), seed=0
    )
    X_test = torch.rand(2, 4, 2, dtype=F64)
    transform = ScalarizedPosteriorTransform(
        weights=torch.tensor([-2.0], dtype=F64), offset=0.5
    )
    posterior = model.posterior(X_test, posterior_transform=transform)
    assert isinstance(posterior, EnsemblePosterior)
    torch.testing.assert_close(
        posterior.values, 0.5 - 2.0 * model.posterior(X_test).values
    )


def test_construct_inputs_from_a_dataset():
    from botorch.utils.datasets import SupervisedDataset

    X, Y = data(n=6)
    dataset = SupervisedDataset(X, Y, feature_names=["a", "b"], outcome_names=["y"])
    inputs = RandomizedNNEnsemble.construct_inputs(dataset, num_members=2, seed=1)
    assert set(inputs) == {"train_X", "train_Y", "num_members", "seed"}
    noisy = SupervisedDataset(
        X,
        Y,
        Yvar=0.1 * torch.ones_like(Y),
        feature_names=["a", "b"],
        outcome_names=["y"],
    )
    with pytest.warns(UserWarning, match="does not use the dataset's observation"):
        inputs = RandomizedNNEnsemble.construct_inputs(noisy)
    assert "train_Yvar" not in inputs


def small_ensemble(X, Y, **kwargs):
    return RandomizedNNEnsemble(
        X,
        Y,
        num_members=2,
        network=NetworkOptions(hidden=(8,)),
        training_options=TrainingOptions(num_steps=20),
        seed=0,
        **kwargs,
    )


def test_unnormalized_inputs_in_the_hundreds_warn():
    X, Y = data(n=6)
    with pytest.warns(InputScaleWarning, match=r"\|x\| = \d{3}.*Normalize"):
        small_ensemble(1000 * X, Y)
    # the same inputs through Normalize, and inputs of order 1, do not warn
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputScaleWarning)
        small_ensemble(1000 * X, Y, input_transform=Normalize(2))
        small_ensemble(X, Y)


def test_posterior_with_observation_noise_says_it_adds_none():
    X, Y = data(n=6)
    model = small_ensemble(X, Y)
    with pytest.warns(UserWarning, match="adds no noise"):
        noisy = model.posterior(X, observation_noise=True)
    torch.testing.assert_close(noisy.values, model.posterior(X).values)


def test_outcomes_below_the_standardize_floor_warn():
    X, Y = data(n=6)
    with pytest.warns(OutcomeScaleWarning, match="min_stdv"):
        small_ensemble(X, 1e-9 * Y)


def test_the_model_keeps_copies_of_its_training_data():
    X, Y = data(n=6)
    model = small_ensemble(X, Y)
    before = model.posterior(X).mean
    X.add_(1.0), Y.mul_(10.0)
    torch.testing.assert_close(model.posterior(X - 1.0).mean, before)
