r"""Randomized regularized neural networks: approximate Thompson sampling without a GP.

Implements the randomized policy of Oliveira, *Kernel-based guarantees for nonlinear
parametric models in Bayesian optimization* (2026), Sec. 4.1, eq. 10. Each ensemble
member is an MLP ``g_theta`` whose parameters start from a fresh draw
``theta_0 ~ Pi_0`` and are trained to minimize (eq. 10)

    (lambda_t / 2) * ||g_theta - g_theta_0||^2_G + sum_i loss(g_theta(x_i), z_i)

so that, away from the data, a trained member stays close to its random
initialization (exploration) while, near the data, it fits the observations.

- ``Pi_0`` (Sec. 4.1, A2): a standard Gaussian over *whitened* parameters. Layer
  ``l`` computes ``(s_l / sqrt(fan_in)) W h + s_b b`` with all entries of ``W`` and
  ``b`` drawn ``N(0, 1)`` (the NTK parameterization), so the scales live in the
  forward pass and ``theta`` itself is isotropic.
- The regularizer (eq. 10-11). The paper's norm is the model-induced RKHS distance
  ``rho(theta, theta_0) = ||k_Theta(., theta) - k_Theta(., theta_0)||`` (eq. 11).
  With the linear parameter kernel ``k_Theta(theta, theta') = theta . theta'`` (Sec. 3)
  this is exactly ``||theta - theta_0||_2``, the default
  ``regularizer="parameter"``. ``regularizer="function"`` instead uses the empirical
  function-space distance ``sum_{z in Z} (g_theta(z) - g_theta_0(z))^2`` over the
  training inputs and a set of anchor points ``Z`` (pseudo-observations of the
  initial function with weight ``lambda_t``); it is not the paper's norm but an
  often-used practical surrogate for it.
- ``lambda_t = c * log(t + e)^q`` with ``t`` the number of observations and ``q > 1``
  (the lemma of Sec. 4.3 and Theorem 4.2 need ``lambda_t`` in ``omega(log t)``,
  e.g. ``log^q t``).
- The pointwise loss: ``loss="squared"`` is eq. 3 on the observations (``z_i = y_i``,
  approximate Thompson sampling, Sec. 4.3); ``loss="cross_entropy"`` is eq. 2 on the
  LFBO labels ``z_i = u_t(y_i) = 1[y_i >= tau_t]`` with ``tau_t`` the empirical
  ``(1 - gamma)``-quantile of the observations (Sec. 2.3, BORE). The network outputs
  the logit; the posterior reports the class probability, the learned acquisition.
- The policy (eq. 8): the next point maximizes a freshly trained member, see
  :func:`~botorch_transfer.acquisition.randomized_nn.randomized_nn_thompson_candidate`.

All members are trained at once on batched weights (one ``num_members x P``
parameter tensor, batched matrix products), deterministically given ``seed``.
"""

from __future__ import annotations

import copy
import itertools
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from botorch.acquisition.objective import (
    PosteriorTransform,
    ScalarizedPosteriorTransform,
)
from botorch.models.ensemble import EnsembleModel
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform, Standardize
from botorch.optim.core import scipy_minimize
from botorch.posteriors.ensemble import EnsemblePosterior
from botorch.sampling.base import MCSampler
from botorch.sampling.index_sampler import IndexSampler
from botorch.utils.datasets import SupervisedDataset
from botorch.utils.types import DEFAULT
from torch import Tensor
from torch.nn import Module

from botorch_transfer._deprecation import moved_names
from botorch_transfer.models.randomized_nn_options import (
    ACTIVATIONS,
    OLD_OPTION_ARGUMENTS,
    FunctionSpaceRegularizer,
    LFBOLoss,
    NetworkOptions,
    TrainingOptions,
    lambda_value,
    resolved_options,
)
from botorch_transfer.models.utils.assorted import SingleOutputTargetMixin
from botorch_transfer.models.utils.whitened_mlp import WhitenedMLP
from botorch_transfer.validation import (
    check_integer,
    check_query_inputs,
    validate_training_data,
    warn_if_below_standardize_floor,
)

#: The largest magnitude of the network's training inputs without a warning: the
#: weight scales are set for inputs of order 1 (e.g. ``Normalize``'s unit cube).
MAX_INPUT_MAGNITUDE = 10.0


class InputScaleWarning(UserWarning):
    r"""The network's training inputs are far from order 1 (no ``Normalize``)."""


class RandomizedNNEnsemble(SingleOutputTargetMixin, EnsembleModel):
    r"""An ensemble of independently randomized, regularized MLPs (eq. 10).

    Member ``j`` draws ``theta_0^(j) ~ N(0, I)`` (whitened parameters, see the module
    docstring) and is trained on

        (lambda_t / 2) R(theta, theta_0^(j)) + sum_{i <= t} loss(g_theta(x_i), z_i),

    with ``R = ||theta - theta_0||^2`` (``regularizer="parameter"``, eq. 10-11 under the
    linear parameter kernel) or ``R = sum_{z in Z} (g_theta(z) - g_theta_0(z))^2``
    over the training inputs and anchors ``Z`` (``regularizer="function"``). The
    members are independent approximate posterior draws; ``posterior`` returns an
    ``EnsemblePosterior`` over them (qUCB, qLogEI, ... through ``IndexSampler``).

    The members are one :class:`~botorch_transfer.models.utils.whitened_mlp.WhitenedMLP`
    (``mlp``); ``hidden=()`` makes them linear in their parameters, on the inputs or
    on the fixed features of ``feature_map``.

    The model is trained at construction. Training data must be ``n x d`` (a batch
    of training sets arises only from fantasies); ``posterior`` accepts
    ``batch x q x d`` and ``q x d``.

    Where BoTorch and Ax expect a GP, this model differs:

    - It has no likelihood and no marginal likelihood, so ``fit_gpytorch_mll`` does
      not apply: build a new model on the new data every iteration (the training is
      the fit). :meth:`fit` trains where that has not happened yet (after
      ``load_state_dict``).
    - ``state_dict`` holds the draws ``theta_0`` and the transforms, not the trained
      members (they depend on the data): loading it into a model trains that model's
      members from the loaded draws on its own data.
    - ``condition_on_observations(X, Y)`` retrains on the augmented data (same
      settings and draws). ``fantasize`` retrains one ensemble per fantasy (draws
      from an ``IndexSampler``): ``num_fantasies`` trainings per call and no
      gradient to ``X``, so it serves fixed ``X`` (pending points, a discrete set,
      ``qKnowledgeGradient.evaluate``) but not gradient-based optimization of a
      look-ahead acquisition. Acquisition functions that need no fantasies (qUCB,
      qLogEI, qLogNEI, Thompson sampling) are the efficient choice.
    - In Ax it can be the ``botorch_model_class`` of a ``ModelConfig`` once
      ``botorch_transfer.ax`` is imported (that registers :meth:`fit` with Ax's
      ``fit_botorch_model``); Ax's cross-validation trains every fold's members on
      the fold. Observation variances (``Yvar``) Ax passes are not used, with a
      warning.

    As on the package's GPs, ``target_X`` and ``target_Y`` are the training data in
    the user's units (``train_targets`` are the networks' targets: standardized
    outcomes, or the LFBO labels); give BoTorch's acquisition functions
    ``best_f=model.target_Y.max()`` and ``X_baseline=model.target_X``.

    Args:
        train_X: ``n x d`` training inputs (``n = 0`` is allowed: untrained draws).
        train_Y: ``n x 1`` observations.
        train_Yvar: Must be ``None`` (eq. 10 has no per-point noise); accepted for
            signature compatibility with the package's models.
        num_members: Ensemble size ``s``.
        loss: ``"squared"`` (eq. 3, regression on ``y``), ``"cross_entropy"``
            (eq. 2, the LFBO classifier on ``1[y >= tau_t]``, ``LFBOLoss()``) or an
            :class:`~botorch_transfer.models.randomized_nn_options.LFBOLoss` with
            its fraction ``gamma`` of positive labels.
        regularizer: ``"parameter"`` (default, the paper's eq. 10-11),
            ``"function"`` or a
            :class:`~botorch_transfer.models.randomized_nn_options.FunctionSpaceRegularizer`
            with its anchor points.
        lambda_schedule: ``lambda_t`` as a positive number, a callable ``t ->
            lambda_t`` (``t`` = number of observations) or ``None`` for
            :class:`~botorch_transfer.models.randomized_nn_options.LogPowerSchedule`'s
            default.
        network: The members' architecture and prior scales
            (:class:`~botorch_transfer.models.randomized_nn_options.NetworkOptions`;
            ``None``: two hidden layers of 64 ``tanh`` units).
        training_options: How eq. 10 is minimized
            (:class:`~botorch_transfer.models.randomized_nn_options.TrainingOptions`;
            ``None``: 500 Adam steps).
        seed: Seed of the parameter draws and anchors; ``None`` draws one from
            torch's global generator. Draws are made on the CPU in float64 and then
            moved, so a seed gives the same members on every device and dtype.
        input_transform: E.g. ``Normalize(d, bounds=bounds)``, applied as
            ``SingleTaskGP`` applies it.
        outcome_transform: Squared loss only; predictions come back in the user's
            units. Default: ``Standardize(m=1)`` (as ``SingleTaskGP``), since
            ``lambda_schedule`` and the weight scales are set for standardized
            outcomes: trained on raw outcomes far from 0 or in large units, the members
            cannot reach the data. ``None`` trains on the raw outcomes.
        **deprecated: The options' fields by their old keyword names (``hidden``,
            ``activation``, ``feature_map``, ``input_scale``, ``weight_scale``,
            ``bias_scale``; ``optimizer``, ``num_steps``, ``lr``; ``gamma``;
            ``anchors``, ``num_anchors``): deprecated, each with a
            ``DeprecationWarning``.

    Example:
        >>> from botorch.acquisition import qUpperConfidenceBound
        >>> from botorch.models.transforms import Normalize, Standardize
        >>> X = torch.rand(10, 2, dtype=torch.float64)
        >>> Y = (X - 0.5).pow(2).sum(-1, keepdim=True).neg()
        >>> model = RandomizedNNEnsemble(
        ...     X, Y, num_members=8, seed=0, input_transform=Normalize(2)
        ... )
        >>> model.posterior(torch.rand(4, 3, 2, dtype=torch.float64)).values.shape
        torch.Size([4, 8, 3, 1])
        >>> acqf = qUpperConfidenceBound(model, beta=2.0)
    """

    #: Old keyword names the constructor still takes (deprecated), with the
    #: options that replace them.
    renamed_arguments: ClassVar[dict[str, str]] = OLD_OPTION_ARGUMENTS

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        train_Yvar: Tensor | None = None,
        num_members: int = 16,
        loss: str | LFBOLoss = "squared",
        regularizer: str | FunctionSpaceRegularizer = "parameter",
        lambda_schedule: float | Callable[[int], float] | None = None,
        network: NetworkOptions | None = None,
        training_options: TrainingOptions | None = None,
        seed: int | None = None,
        input_transform: InputTransform | None = None,
        outcome_transform: OutcomeTransform | None | Any = DEFAULT,
        **deprecated: Any,
    ) -> None:
        lfbo, function_space, network, training_options = resolved_options(
            type(self).__name__,
            loss,
            regularizer,
            network,
            training_options,
            deprecated,
        )
        # the settings, for condition_on_observations to train the same ensemble
        # on more data (the transforms untrained: training fits them in place)
        settings = dict(
            num_members=num_members,
            loss=lfbo or "squared",
            regularizer=function_space or "parameter",
            lambda_schedule=lambda_schedule,
            network=network,
            training_options=training_options,
            seed=seed,
            input_transform=input_transform,
            outcome_transform=outcome_transform,
        )
        for name in ("input_transform", "outcome_transform"):
            if isinstance(settings[name], Module):
                settings[name] = copy.deepcopy(settings[name])
        super().__init__()
        self._settings = settings
        validate_training_data(train_X, train_Y, None)
        if train_X.dim() != 2:
            raise ValueError(
                "`train_X` must have shape n x d (batches of training sets are not "
                f"supported), got {tuple(train_X.shape)}."
            )
        if train_X.shape[-1] < 1:
            raise ValueError(
                "`train_X` must have at least one input dimension (d >= 1)."
            )
        if train_Yvar is not None:
            raise ValueError(
                "`train_Yvar` must be None: the loss of eq. 10 has no per-point noise; "
                "noise enters through `lambda_schedule`."
            )
        check_integer("num_members", num_members)
        loss = "squared" if lfbo is None else "cross_entropy"
        regularizer = "parameter" if function_space is None else "function"
        if outcome_transform is DEFAULT:  # standardize what can be standardized
            squared = loss == "squared" and train_X.shape[-2] > 0
            outcome_transform = Standardize(m=1) if squared else None
        if loss == "cross_entropy" and outcome_transform is not None:
            raise ValueError(
                "`outcome_transform` is not used with loss='cross_entropy': the model "
                "predicts P(y >= tau_t), not y (and the labels are invariant to any "
                "increasing transform of y)."
            )
        n, d = train_X.shape
        self._num_outputs = 1
        self.num_members, self.loss, self.regularizer = num_members, loss, regularizer
        self.network, self.training_options = network, training_options
        # the options' fields, as the training and the network read them
        self.hidden, self.activation = network.hidden, network.activation
        self.feature_map, self.input_scale = network.feature_map, network.input_scale
        self.weight_scale, self.bias_scale = network.weight_scale, network.bias_scale
        self.optimizer = training_options.optimizer
        self.num_steps, self.lr = training_options.num_steps, training_options.lr
        self.gamma = LFBOLoss().gamma if lfbo is None else lfbo.gamma
        self.lambda_schedule = lambda_schedule
        if seed is None:
            seed = int(torch.randint(2**62, (1,)).item())
        self.seed = seed
        self._settings["seed"] = seed  # the same draws theta_0 when conditioned
        self.lambda_t = lambda_value(lambda_schedule, n)

        # Transforms are fitted on the training data exactly as SingleTaskGP does.
        if input_transform is not None:
            self.input_transform = input_transform.to(train_X)
        if outcome_transform is not None:
            if n == 0:
                raise ValueError(
                    "`outcome_transform` cannot be fitted without observations (n = 0)."
                )
            outcome_transform = outcome_transform.to(train_X)
            warn_if_below_standardize_floor(outcome_transform, train_Y)
            outcome_transform.train()
            train_Y_model, _ = outcome_transform(train_Y, X=train_X)
            outcome_transform.eval()
            self.outcome_transform = outcome_transform
        else:
            train_Y_model = train_Y
        if input_transform is not None and n == 0:
            # no data to learn bounds from: use the given ones
            self.input_transform.eval()
        with torch.no_grad():
            X_model = self.transform_inputs(train_X)
            largest = self._features(X_model).abs().max() if n > 0 else 0.0
        if largest > MAX_INPUT_MAGNITUDE:
            # the weight scales are set for inputs of order 1: at |x| in the
            # hundreds the first layer saturates and the members cannot fit the data
            warnings.warn(
                f"The network's inputs reach |x| = {float(largest):.3g} (`train_X` "
                "after `input_transform` and `feature_map`); the members are set for "
                f"inputs of order 1 (`input_scale`={network.input_scale} is an inverse "
                "lengthscale in these units) and fit poorly at inputs this large. "
                "Pass `input_transform=Normalize(d, bounds=bounds)`.",
                InputScaleWarning,
                stacklevel=2,
            )
        # the transformed training inputs are kept in `train_X_model` (below)
        self._has_transformed_inputs = True
        # the input transform is fitted; anchors and predictions use it as is
        self.eval()
        # Only theta_0 (and the transforms) are the model's state: everything else
        # is derived from the data and retrained, never loaded (see `fit`).
        self.register_buffer("train_X", train_X.detach().clone(), persistent=False)
        self.register_buffer("train_Y", train_Y.detach().clone(), persistent=False)

        # Layer layout of the flat whitened parameter vector theta (one row per member).
        in_dim = self._features(
            torch.zeros(1, d, dtype=train_X.dtype, device=train_X.device)
        ).shape[-1]
        self.mlp = WhitenedMLP.of_widths(
            (in_dim, *network.hidden, 1),
            network.input_scale,
            network.weight_scale,
            network.bias_scale,
            ACTIVATIONS[network.activation],
        )
        # theta_0 ~ Pi_0 = N(0, I), drawn on the CPU in float64 so a seed means the same
        # members everywhere; the member's training is then deterministic.
        gen = torch.Generator().manual_seed(seed)
        theta0 = torch.randn(
            num_members, self.mlp.num_parameters, generator=gen, dtype=torch.float64
        )
        self.register_buffer("initial_parameters", theta0.to(train_X))

        if function_space is not None:
            anchors = function_space.anchors
            if anchors is None:
                anchors_model = torch.rand(
                    function_space.num_anchors, d, generator=gen, dtype=torch.float64
                ).to(train_X)
            else:
                if anchors.shape[-1] != d:
                    raise ValueError(
                        f"`anchors` must be a k x d tensor with d={d}, got "
                        f"{tuple(anchors.shape)}."
                    )
                with torch.no_grad():
                    anchors_model = self.transform_inputs(anchors.to(train_X))
            if n + anchors_model.shape[0] == 0:
                raise ValueError(
                    "regularizer='function' needs training data or anchors; "
                    "both are empty."
                )
        else:
            anchors_model = None
        # the anchors of the function-space regularizer, in model input space
        self.register_buffer("anchors_model", anchors_model, persistent=False)
        self._set_training_data(X_model, train_Y_model, train_Y)
        self.register_load_state_dict_post_hook(_retrain_if_draws_changed)
        self.eval()

    @classmethod
    def construct_inputs(
        cls, training_data: SupervisedDataset, **kwargs: Any
    ) -> dict[str, Any]:
        r"""Constructor arguments from a ``SupervisedDataset`` (how Ax builds the
        model): its ``X`` and ``Y`` and the options in ``kwargs`` (Ax's
        ``model_options``, e.g. ``num_members``).

        Args:
            training_data: One outcome's data, ``n x d`` and ``n x 1``.
            **kwargs: Further constructor arguments.

        Returns:
            A dict for ``RandomizedNNEnsemble(**inputs)``. Observation variances in
            the dataset are not used, with a warning: eq. 10 has no per-point noise.
        """
        inputs = super().construct_inputs(training_data=training_data)
        if inputs.pop("train_Yvar", None) is not None:
            warnings.warn(
                "RandomizedNNEnsemble does not use the dataset's observation "
                "variances (Yvar): eq. 10 has no per-point noise; noise enters "
                "through `lambda_schedule`.",
                UserWarning,
                stacklevel=2,
            )
        return {**inputs, **kwargs}

    # ----------------------------------------------------------------- network
    def _features(self, X: Tensor) -> Tensor:
        return X if self.feature_map is None else self.feature_map(X)

    def _net(self, theta: Tensor, X: Tensor) -> Tensor:
        r"""The raw output (regression value or logit) of every member at inputs
        ``X`` in the model's input space (shapes as in ``WhitenedMLP``)."""
        return self.mlp(theta, self._features(X))

    def _set_training_data(self, X_model: Tensor, Y_model: Tensor, Y: Tensor) -> None:
        r"""Store the data of eq. 10 and train the members on it.

        Args:
            X_model: ``batch x n x d`` transformed inputs.
            Y_model: ``batch x n x 1`` transformed outcomes (squared loss).
            Y: ``batch x n x 1`` raw outcomes (the LFBO labels' threshold).
        """
        n = X_model.shape[-2]
        self.lambda_t = lambda_value(self.lambda_schedule, n)
        if self.regularizer == "function":
            anchors = self.anchors_model.expand(*X_model.shape[:-2], -1, -1)
            reg_points = torch.cat([X_model, anchors], dim=-2)
        else:
            reg_points = None
        # Z (model input space) of the function-space regularizer; g_theta_0(Z) is
        # computed with theta_0 when training
        self.register_buffer("regularization_points", reg_points, persistent=False)
        y = Y_model.squeeze(-1)
        if self.loss == "cross_entropy" and n > 0:
            # u_t(y) = 1[y >= tau_t], tau_t the empirical (1 - gamma)-quantile of each
            # training set (Sec. 2.3)
            tau = torch.quantile(Y.squeeze(-1), 1.0 - self.gamma, dim=-1, keepdim=True)
            y = (Y.squeeze(-1) >= tau).to(Y)
            tau = tau.squeeze(-1)
        else:
            tau = None
        self.register_buffer(
            "tau", None if tau is None else tau.detach().clone(), persistent=False
        )
        self.register_buffer("train_targets", y.detach().clone(), persistent=False)
        self.register_buffer(
            "train_X_model", X_model.detach().clone(), persistent=False
        )
        self._retrain()

    def _retrain(self) -> None:
        r"""Train the members from the current ``initial_parameters`` (eq. 10)."""
        batch = self.train_X_model.shape[:-2]
        if self.regularizer == "function":
            with torch.no_grad():
                g0 = self._net(self.initial_parameters, self.regularization_points)
        else:
            g0 = None
        self.register_buffer("initial_outputs", g0, persistent=False)
        theta = self._train(batch)
        self.register_buffer("trained_parameters", theta, persistent=False)
        # the draws the members were trained from (`fit` and state-dict loading)
        self.register_buffer(
            "_trained_from", self.initial_parameters.detach().clone(), persistent=False
        )

    def _objective(self, theta: Tensor, index: tuple[int, ...] = ()) -> Tensor:
        r"""Eq. 10 for every member of every training set: ``batch x s`` values (the
        members' problems are separable); for the training set ``index`` alone
        (``s`` values) when one is given."""
        X_model, targets = self.train_X_model[index], self.train_targets[index]
        if self.regularizer == "parameter":
            reg = (theta - self.initial_parameters).pow(2).sum(-1)
        else:
            outputs = self._net(theta, self.regularization_points[index])
            reg = (outputs - self.initial_outputs[index]).pow(2).sum(-1)
        total = 0.5 * self.lambda_t * reg
        if X_model.shape[-2] > 0:
            out = self._net(theta, X_model)
            z = targets.unsqueeze(-2).expand_as(out)
            if self.loss == "squared":
                data = 0.5 * (out - z).pow(2)  # eq. 3
            else:  # eq. 2, with g the logit of the class probability
                data = torch.nn.functional.binary_cross_entropy_with_logits(
                    out, z, reduction="none"
                )
            total = total + data.sum(-1)
        return total

    def _train(self, batch: torch.Size = torch.Size()) -> Tensor:
        # every training set's members start from the same draws theta_0
        theta0 = self.initial_parameters.expand(*batch, -1, -1)
        if self.train_X_model.shape[-2] == 0:
            return theta0.clone()  # with no data, theta_0 minimizes eq. 10 exactly
        theta = theta0.clone().requires_grad_(True)
        with torch.enable_grad():
            if self.optimizer == "adam":
                # Adam is per-coordinate: on the summed objective each member follows
                # exactly the path it would follow if trained alone.
                opt = torch.optim.Adam([theta], lr=3e-2 if self.lr is None else self.lr)
                for _ in range(self.num_steps):
                    opt.zero_grad(set_to_none=True)
                    self._objective(theta).sum().backward()
                    opt.step()
            else:
                # one run per training set (fantasy): on the sum of their separate
                # problems L-BFGS would stop at the precision of the sum
                theta = theta.detach().clone()
                for index in itertools.product(*map(range, batch)):
                    theta[index] = self._train_lbfgs(theta[index], index)
        return theta.detach()

    def _train_lbfgs(self, theta: Tensor, index: tuple[int, ...] = ()) -> Tensor:
        r"""Full-batch L-BFGS (BoTorch's ``scipy_minimize``: SciPy's L-BFGS-B in
        float64 on the CPU; the objective and its gradient are evaluated on the
        model's device). SciPy's line search keeps converging on ill-conditioned
        problems (small ``lambda_t``) where torch's L-BFGS stalls at gradients of
        about 1e-7."""
        theta = theta.detach().clone().requires_grad_(True)

        def closure() -> tuple[Tensor, tuple[Tensor]]:
            value = self._objective(theta, index).sum()
            return value, torch.autograd.grad(value, theta)

        options = {"maxiter": self.num_steps, "maxcor": 50, "gtol": 1e-12, "ftol": 0.0}
        scipy_minimize(closure, {"theta": theta}, options=options)
        return theta.detach()

    # --------------------------------------------------------------- BoTorch API
    def member_outputs(self, X: Tensor, raw: bool = False) -> Tensor:
        r"""The members' outputs at (already transformed) inputs ``X``.

        Args:
            X: ``batch x q x d`` inputs in the model's input space (``batch``
                broadcastable with the model's ``batch_shape``).
            raw: Return the networks' raw outputs (logits for ``"cross_entropy"``)
                instead of the predictions in model units.

        Returns:
            ``batch x s x q x 1`` outputs.
        """
        if self.batch_shape == torch.Size():
            # one training set: all query points in one matrix product per member
            batch, q = X.shape[:-2], X.shape[-2]
            out = self._net(self.trained_parameters, X.reshape(-1, X.shape[-1]))
            out = out.reshape(self.num_members, *batch, q).movedim(0, -2)
        else:
            out = self._net(self.trained_parameters, X)  # batch x s x q
        if self.loss == "cross_entropy" and not raw:
            out = torch.sigmoid(out)
        return out.unsqueeze(-1)

    @property
    def target_X(self) -> Tensor:
        r"""``batch_shape x n x d`` training inputs, raw (``X_baseline`` for
        BoTorch)."""
        return self.train_X

    @property
    def target_Y(self) -> Tensor:
        r"""``batch_shape x n x 1`` observations in the user's units (``best_f`` for
        BoTorch: ``model.target_Y.max()``)."""
        return self.train_Y

    @property
    def target_Yvar(self) -> None:
        r"""``None``: the model has no observation noise (eq. 10)."""
        return None

    @property
    def batch_shape(self) -> torch.Size:
        r"""The batch of training sets: empty for a model built from ``n x d`` data,
        ``num_fantasies x batch`` for a fantasy model (the members are the ensemble
        dimension, not a batch)."""
        return self.trained_parameters.shape[:-2]

    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        posterior_transform: PosteriorTransform | None = None,
        **kwargs: Any,
    ) -> EnsemblePosterior:
        r"""BoTorch's ``EnsembleModel.posterior`` at ``batch_shape x q x d`` raw ``X``
        (checked as the GP models check it).

        A ``ScalarizedPosteriorTransform`` (what Ax passes for an objective) is
        applied to the members' values, which BoTorch's ``EnsembleModel`` cannot do
        (``scalarize_posterior`` needs a Gaussian).
        """
        self._check_X(X)
        if kwargs.get("observation_noise") is True:
            # BoTorch's EnsembleModel ignores it (so that a ModelList can pass it on)
            warnings.warn(
                "RandomizedNNEnsemble has no observation noise model (eq. 10 has no "
                "noise term): `observation_noise=True` adds no noise; the posterior "
                "is the members' spread over f.",
                UserWarning,
                stacklevel=2,
            )
        if isinstance(posterior_transform, ScalarizedPosteriorTransform):
            values = super().posterior(X, output_indices, **kwargs).values
            values = posterior_transform.evaluate(values).unsqueeze(-1)
            return EnsemblePosterior(values=values, weights=self.ensemble_weights)
        return super().posterior(X, output_indices, posterior_transform, **kwargs)

    def forward(self, X: Tensor) -> Tensor:
        r"""Members' predictions, ``batch x s x q x 1`` (model units; class
        probabilities for ``loss="cross_entropy"``), in ``X``'s dtype; the members are
        evaluated in the model's dtype."""
        dtype = self.trained_parameters.dtype
        return self.member_outputs(X.to(dtype)).to(X.dtype)

    def objective(self) -> Tensor:
        r"""Eq. 10 at the trained parameters, one value per member (``batch x s``)."""
        return self._objective(self.trained_parameters)

    def fit(self) -> RandomizedNNEnsemble:
        r"""Train the members on the model's data (eq. 10) unless they already are
        trained from the current draws ``initial_parameters``.

        The model trains at construction, and again when ``load_state_dict`` brings
        other draws ``theta_0`` (the state dict holds the draws and the transforms,
        never the trained members, which depend on the data). So ``fit`` trains only
        where that has not happened; it is what Ax's surrogate calls (``import
        botorch_transfer.ax`` registers it with Ax's ``fit_botorch_model``). There is
        nothing for ``fit_gpytorch_mll`` to fit: the model has no likelihood.

        Returns:
            The model itself, trained.
        """
        if not torch.equal(self._trained_from, self.initial_parameters):
            self._retrain()
        return self

    def condition_on_observations(
        self, X: Tensor, Y: Tensor, **kwargs: Any
    ) -> RandomizedNNEnsemble:
        r"""The ensemble trained again on its training data plus ``(X, Y)``, from the
        same draws ``theta_0`` (eq. 10). Training is the conditioning here; there is no
        cheaper update.

        - ``X`` ``m x d`` and ``Y`` ``m x 1`` (one training set): the model built
          on all the data with the same settings and draws, its transforms fitted
          again, exactly as if constructed on it.
        - ``Y`` with batch dimensions, ``batch x m x 1`` (fantasies, from
          :meth:`fantasize`): one training set per batch entry, each the training
          data plus its ``(X, Y)``; the transforms stay as they are, as BoTorch's GPs
          condition. The result has ``batch_shape = batch``.

        Args:
            X: ``batch_x x m x d`` new raw inputs (``batch_x`` broadcastable with
                ``Y``'s batch).
            Y: ``batch x m x 1`` new observations in the user's units.

        Returns:
            A new, trained ``RandomizedNNEnsemble``.
        """
        if kwargs.get("noise") is not None:
            raise ValueError(
                "`noise` must be None: the ensemble has no observation noise (eq. 10)."
            )
        check_query_inputs(X, self.train_X.shape[-1], "X")
        if not isinstance(Y, Tensor) or Y.dim() < 2 or Y.shape[-2:] != (X.shape[-2], 1):
            raise ValueError(
                "condition_on_observations takes `X` of shape batch x m x d and `Y` of "
                f"shape batch x m x 1, got {tuple(X.shape)} and "
                f"{tuple(getattr(Y, 'shape', ()))}."
            )
        if X.dim() == 2 and Y.dim() == 2 and self.batch_shape == torch.Size():
            return self._trained_on_more_data(X, Y)
        return self._conditioned_batch(X, Y)

    def _trained_on_more_data(self, X: Tensor, Y: Tensor) -> RandomizedNNEnsemble:
        settings = dict(self._settings)
        for name in ("input_transform", "outcome_transform"):
            if isinstance(settings[name], Module):
                settings[name] = copy.deepcopy(settings[name])
        model = type(self)(
            torch.cat([self.train_X, X.to(self.train_X)]),
            torch.cat([self.train_Y, Y.to(self.train_Y)]),
            **settings,
        )
        # draws loaded from a state dict are not the seed's
        model.initial_parameters.copy_(self.initial_parameters)
        return model.fit()

    def _conditioned_batch(self, X: Tensor, Y: Tensor) -> RandomizedNNEnsemble:
        batch = torch.broadcast_shapes(X.shape[:-2], Y.shape[:-2], self.batch_shape)
        n, m, d = self.train_X.shape[-2], X.shape[-2], X.shape[-1]
        X_all = torch.cat(
            [
                self.train_X.expand(*batch, n, d),
                X.to(self.train_X).expand(*batch, m, d),
            ],
            dim=-2,
        )
        Y_all = torch.cat(
            [
                self.train_Y.expand(*batch, n, 1),
                Y.to(self.train_Y).expand(*batch, m, 1),
            ],
            dim=-2,
        )
        model = copy.deepcopy(self)
        model.eval()  # the transforms are applied as fitted, not fitted again
        with torch.no_grad():
            X_model = model.transform_inputs(X_all)
            if hasattr(model, "outcome_transform"):
                Y_model, _ = model.outcome_transform(Y_all, X=X_all)
            else:
                Y_model = Y_all
        model.train_X, model.train_Y = X_all.detach().clone(), Y_all.detach().clone()
        model._set_training_data(X_model, Y_model, Y_all)
        return model

    def fantasize(
        self,
        X: Tensor,
        sampler: MCSampler,
        observation_noise: Tensor | None = None,
        **kwargs: Any,
    ) -> RandomizedNNEnsemble:
        r"""A fantasy model: outcomes at ``X`` drawn from the ensemble, and one ensemble
        trained per draw on the training data plus the fantasies.

        The draws are the members' predictions at ``X``: use an ``IndexSampler``
        (BoTorch's sampler for ensembles; ``sampler.sample_shape`` fantasies, each a
        randomly chosen member). Every fantasy trains the full ensemble again from
        the same draws ``theta_0`` with the transforms kept fixed (see
        :meth:`condition_on_observations`), so a fantasy model costs
        ``num_fantasies x batch`` trainings, and no gradient flows from the fantasy
        model back to ``X``. Use it where ``X`` is fixed: pending points of a batch
        chosen one at a time, ``qKnowledgeGradient.evaluate(X, bounds)`` on given
        candidates, a discrete search; not to optimize ``X`` of a look-ahead
        acquisition by gradients (``optimize_acqf`` on ``qKnowledgeGradient``).
        Not available for ``loss="cross_entropy"``, whose classifier predicts
        ``P(y >= tau_t)``, not ``y``.

        Args:
            X: ``batch x q x d`` raw inputs of the fantasized observations.
            sampler: An ``IndexSampler`` (``sample_shape``: the fantasies).
            observation_noise: Must be ``None``: the ensemble has no noise.
            **kwargs: Ignored (``propagate_grads``: no gradient flows).

        Returns:
            A ``RandomizedNNEnsemble`` with ``batch_shape = sample_shape x batch``.

        Example:
            >>> from botorch.sampling.index_sampler import IndexSampler
            >>> X = torch.rand(8, 2, dtype=torch.float64)
            >>> model = RandomizedNNEnsemble(X, X.sum(-1, keepdim=True), seed=0)
            >>> sampler = IndexSampler(torch.Size([4]))
            >>> fantasy = model.fantasize(torch.rand(1, 2, dtype=X.dtype), sampler)
            >>> fantasy.batch_shape
            torch.Size([4])
        """
        if self.loss == "cross_entropy":
            raise NotImplementedError(
                "fantasize needs a model of y: with loss='cross_entropy' the ensemble "
                "predicts P(y >= tau_t). Use loss='squared' for fantasies."
            )
        if observation_noise is not None:
            raise ValueError(
                "`observation_noise` must be None: the ensemble has no observation "
                "noise (eq. 10)."
            )
        if not isinstance(sampler, IndexSampler):
            raise ValueError(
                "`sampler` must be an IndexSampler (botorch.sampling.index_sampler): "
                "the ensemble's fantasies are its members' predictions, got "
                f"{type(sampler).__name__}. For qKnowledgeGradient pass "
                "sampler=IndexSampler(torch.Size([num_fantasies]))."
            )
        self._check_X(X)
        with torch.no_grad():
            Y = sampler(self.posterior(X))  # sample_shape x batch x q x 1
        return self.condition_on_observations(X.detach(), Y)


def _retrain_if_draws_changed(module: RandomizedNNEnsemble, incompatible_keys) -> None:
    r"""``load_state_dict`` post-hook: retrain when the loaded draws differ."""
    module.fit()


# the acquisition function and the options that used to be importable from here
__getattr__ = moved_names(
    __name__,
    {
        "randomized_nn_thompson_candidate": (
            "botorch_transfer.acquisition.randomized_nn"
        ),
        **dict.fromkeys(
            ("ACTIVATIONS", "LOSSES", "OPTIMIZERS", "REGULARIZERS", "LogPowerSchedule"),
            "botorch_transfer.models.randomized_nn_options",
        ),
    },
)
