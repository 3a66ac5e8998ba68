r"""The pre-trained GP prior of HyperBO (Wang et al., Sec. 7.2): its structure,
evaluation in the user's units, and saving/loading.

A :class:`PretrainedPrior` is a GP prior ``GP(mu, k o sigma^2)`` over one input
space: a mean function, a kernel and a homoscedastic noise variance. Its default
structure is the paper's H-NLL model: a 2-hidden-layer tanh MLP ``phi`` (32, 32),
mean ``mu(x) = W phi(x) + b`` (a linear head) and kernel
``k(x, x') = s^2 Matern52_ARD(phi(x), phi(x'))`` on the MLP's last hidden features,
with softplus-constrained signal variance, lengthscales and noise (GPyTorch's
default ``Positive``/``GreaterThan`` constraints use softplus).

Two fixed affine maps make one set of network weights work for any units: inputs
are mapped to the unit cube with the bounds of the pre-training data, and the
network's outputs are scaled by the mean and standard deviation of all
pre-training outcomes, so ``mean`` / ``covariance`` / ``noise`` are always in the
user's units.
"""

from __future__ import annotations

from typing import Any

import torch
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import Kernel, MaternKernel, ScaleKernel
from gpytorch.means import ConstantMean, Mean, ZeroMean
from gpytorch.module import Module
from torch import Tensor, nn

from botorch_transfer.priors.io import (
    PathLike,
    PriorFileError,
    check_keys,
    check_tensors,
    describe_path,
    load_prior,
    save_prior,
)

MEANS = ("mlp", "constant", "zero", "empirical")
KERNELS = ("matern52_on_features", "matern52", "empirical")
#: Smallest noise variance of the prior, relative to the outcome variance.
MIN_NOISE = 1e-6
#: Tensors a saved prior must hold to be rebuilt (the rest depends on its config).
_STATE_KEYS = (
    "features.lower",
    "features.range",
    "mean_module.offset",
    "mean_module.scale",
)
#: Tensors of the empirical prior absent from priors saved before they existed, and
#: filled with their defaults on loading: the whitening factor (``I``: the formula
#: those priors stored) and the meta-tasks' statistics (``shrinkage = -1``: absent).
_ADDED_EMPIRICAL_KEYS = (
    "empirical.index_cholesky",
    "empirical.index_mean",
    "empirical.index_covariance",
    "empirical.index_noise",
    "empirical.shrinkage",
)


class InputFeatures(nn.Module):
    r"""``x -> phi((x - lower) / range)``: the unit-cube map, then an optional MLP.

    Shared by the prior's mean and kernel (the paper's kernel acts on the mean
    network's last hidden layer).
    """

    def __init__(
        self, lower: Tensor, range_: Tensor, hidden: tuple[int, ...] | None
    ) -> None:
        super().__init__()
        self.register_buffer("lower", lower.clone())
        self.register_buffer("range", range_.clone())
        d = lower.shape[-1]
        if hidden:
            layers: list[nn.Module] = []
            width = d
            for h in hidden:
                layers += [nn.Linear(width, h), nn.Tanh()]
                width = h
            self.mlp: nn.Module | None = nn.Sequential(*layers)
            self.out_dim = width
        else:
            self.mlp = None
            self.out_dim = d

    def forward(self, X: Tensor) -> Tensor:
        Z = (X - self.lower) / self.range
        return Z if self.mlp is None else self.mlp(Z)


class EmpiricalStructure(nn.Module):
    r"""The empirical prior's mean and kernel in standardized units (see
    :func:`~botorch_transfer.priors.hyperbo.empirical.fit_empirical_structure`).

    With index points ``V`` (the inputs every meta-task observed, on the unit cube),
    a base kernel ``k`` (ARD Matern-5/2 with an outputscale) and noise ``s^2``:

    - ``m(x) = c + q(x)^T alpha`` with ``q(x) = L^{-1} k(V, x)``, ``L L^T = K + s^2 I``
      and ``alpha = L^{-1} (mu_hat - c)``: the meta-tasks' mean at ``V``, smoothed
      and interpolated by ``k``;
    - ``k_e(x, x') = k(x, x') + q(x)^T D q(x')`` with ``D = L^{-1} S L^{-T} - I``,
      where ``S`` is the meta-tasks' (shrunk) covariance at ``V``. Far from ``V`` it
      is ``k``.

    This is ``k(x, x') + k(x, V) B k(V, x')`` with
    ``B = (K + s^2 I)^{-1} (S - K - s^2 I) (K + s^2 I)^{-1}``, computed in the
    coordinates whitened by ``L``: ``B`` itself holds ``(K + s^2 I)^{-2}``, whose
    round-off made the covariance indefinite for smooth, noise-free meta-data
    (a smallest eigenvalue of -0.19 against variances of at most 0.09). A prior saved
    before ``index_cholesky`` existed stored ``B`` and ``(K + s^2 I)^{-1}
    (mu_hat - c)``: it loads with ``L = I``, which is that formula.

    ``index_cholesky``, ``alpha``, ``correction`` (``D``) and ``c`` are buffers set
    by the fit, derived (:meth:`derive`) from the meta-tasks' statistics at ``V``,
    which are kept too: their mean ``mu_hat`` (``index_mean``), unbiased covariance
    ``Sigma_hat`` (``index_covariance``), noise variance (``index_noise``, the
    diagonal of ``K + s^2 I`` less ``K``'s) and the shrinkage ``lam``, so that
    ``S = (1 - lam) Sigma_hat + lam (K + s^2 I)`` and
    ``D = (1 - lam) (L^{-1} Sigma_hat L^{-T} - I)``. With ``adaptive = True`` (a
    fine-tuned ``PretrainedPriorGP``) the mean and kernel re-derive ``L``,
    ``alpha`` and ``D`` from these statistics and the *current* base kernel at
    every evaluation, so that a re-fitted kernel gives a consistent prior. A prior
    saved before the statistics were kept has ``shrinkage = -1`` and cannot adapt.
    """

    def __init__(self, features: InputFeatures, num_index_points: int) -> None:
        super().__init__()
        self.features = features
        d = features.lower.shape[-1]
        dtype = features.lower.dtype
        self.base_kernel = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=d))
        self.register_buffer("index_points", torch.zeros(num_index_points, d))
        self.register_buffer("alpha", torch.zeros(num_index_points))
        self.register_buffer(
            "correction", torch.zeros(num_index_points, num_index_points)
        )
        self.register_buffer("index_cholesky", torch.eye(num_index_points))
        self.register_buffer("constant", torch.zeros(()))
        # the meta-tasks' statistics at V (shrinkage < 0: not kept, saved before)
        self.register_buffer("index_mean", torch.zeros(num_index_points))
        self.register_buffer(
            "index_covariance", torch.zeros(num_index_points, num_index_points)
        )
        self.register_buffer("index_noise", torch.zeros(num_index_points))
        self.register_buffer("shrinkage", torch.tensor(-1.0))
        self.adaptive = False
        self.to(dtype=dtype)

    @property
    def has_statistics(self) -> bool:
        r"""Whether the meta-tasks' statistics at ``V`` are kept (they are for
        every prior fitted or saved since they exist)."""
        return bool(self.shrinkage >= 0)

    def derive(self) -> tuple[Tensor, Tensor, Tensor]:
        r"""``L``, ``alpha`` and ``D`` from the kept statistics and the current base
        kernel (the class docstring's formulas).

        Returns:
            ``index_cholesky`` (``M x M``), ``alpha`` (``M``) and ``correction``
            (``M x M``) as the current kernel gives them.
        """
        if not self.has_statistics:
            raise RuntimeError(
                "This empirical prior was saved without the meta-tasks' statistics; "
                "its structure cannot be re-derived (pre-train it again)."
            )
        K = self.base_kernel(self.index_points).to_dense()
        L = torch.linalg.cholesky(K + torch.diag_embed(self.index_noise))
        alpha = torch.linalg.solve_triangular(
            L, (self.index_mean - self.constant).unsqueeze(-1), upper=False
        ).squeeze(-1)
        inner = torch.linalg.solve_triangular(L, self.index_covariance, upper=False)
        inner = torch.linalg.solve_triangular(L, inner.transpose(-1, -2), upper=False)
        eye = torch.eye(L.shape[-1], dtype=L.dtype, device=L.device)
        inner = (inner + inner.transpose(-1, -2)) / 2
        return L, alpha, (1 - self.shrinkage) * (inner - eye)

    def _parts(self) -> tuple[Tensor, Tensor, Tensor]:
        if self.adaptive:
            return self.derive()
        return self.index_cholesky, self.alpha, self.correction

    def unit(self, X: Tensor) -> Tensor:
        return (X - self.features.lower) / self.features.range

    def cross(self, X: Tensor, L: Tensor | None = None) -> Tensor:
        r"""``q(X)^T = k(X, V) L^{-T}`` (``... x n x M``)."""
        L = self._parts()[0] if L is None else L
        k = self.base_kernel(self.unit(X), self.index_points).to_dense()
        if L.dim() == 2:  # one triangular solve for all points (a batch of solves
            # against copies of L took 1.9 of 2.4 s for a 2,000-point pool)
            flat = k.reshape(-1, k.shape[-1]).transpose(-1, -2)
            q = torch.linalg.solve_triangular(L, flat, upper=False)
            return q.transpose(-1, -2).reshape(k.shape)
        L = L.expand(*k.shape[:-2], *L.shape)
        q = torch.linalg.solve_triangular(L, k.transpose(-1, -2), upper=False)
        return q.transpose(-1, -2)

    def mean(self, X: Tensor) -> Tensor:
        L, alpha, _ = self._parts()
        return self.constant + (self.cross(X, L) @ alpha.unsqueeze(-1)).squeeze(-1)

    def covariance(self, X1: Tensor, X2: Tensor, diag: bool = False) -> Tensor:
        L, _, correction = self._parts()
        q1 = self.cross(X1, L)
        if diag:
            base = self.base_kernel(self.unit(X1), self.unit(X2), diag=True)
            return base + ((q1 @ correction) * q1).sum(-1)
        q2 = q1 if X2 is X1 else self.cross(X2, L)
        base = self.base_kernel(self.unit(X1), self.unit(X2)).to_dense()
        return base + q1 @ correction @ q2.transpose(-1, -2)


class PretrainedMean(Mean):
    r"""``mu(x) = offset + scale * m(phi(x))`` with ``m`` linear, constant, zero or
    the empirical prior's mean."""

    def __init__(
        self,
        features: InputFeatures,
        kind: str,
        offset: Tensor,
        scale: Tensor,
        empirical: EmpiricalStructure | None = None,
    ) -> None:
        super().__init__()
        self.features = features
        self.kind = kind
        self.register_buffer("offset", offset.clone())
        self.register_buffer("scale", scale.clone())
        self.empirical = empirical
        if kind == "mlp":
            self.head: nn.Module = nn.Linear(features.out_dim, 1)
        elif kind == "constant":
            self.head = ConstantMean()
        else:  # zero, or the empirical structure (owned by the prior)
            self.head = ZeroMean()

    def forward(self, X: Tensor) -> Tensor:
        if self.kind == "mlp":
            m = self.head(self.features(X)).squeeze(-1)
        elif self.kind == "empirical":
            m = self.empirical.mean(X)
        else:
            m = self.head(X)
        return self.offset + self.scale * m


class PretrainedKernel(Kernel):
    r"""``k(x, x') = scale^2 * s^2 * Matern52_ARD(phi(x), phi(x'))``, or ``scale^2``
    times the empirical prior's kernel."""

    has_lengthscale = False

    def __init__(
        self,
        features: InputFeatures,
        on_features: bool,
        scale: Tensor,
        empirical: EmpiricalStructure | None = None,
    ) -> None:
        super().__init__()
        self.features = features
        self.on_features = on_features
        self.register_buffer("scale", scale.clone())
        self.empirical = empirical
        if empirical is None:
            dims = features.out_dim if on_features else features.lower.shape[-1]
            self.base_kernel = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=dims))
        else:  # the empirical prior's base kernel (shared)
            self.base_kernel = empirical.base_kernel

    def _inputs(self, X: Tensor) -> Tensor:
        if self.on_features:
            return self.features(X)
        return (X - self.features.lower) / self.features.range

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, **params: Any):
        if self.empirical is not None:
            K = self.empirical.covariance(x1, x2, diag=diag)
        else:
            K = self.base_kernel.forward(self._inputs(x1), self._inputs(x2), diag=diag)
        return K * self.scale.pow(2)


class PretrainedPrior(Module):
    r"""A GP prior learned from related tasks (HyperBO): mean, kernel and noise.

    Build one with :func:`~botorch_transfer.priors.hyperbo.pretrain_prior`; use it with
    :class:`~botorch_transfer.models.PretrainedPriorGP`. All evaluations are in the
    units of the pre-training data.

    Args:
        input_lower: ``d`` lower input bounds of the unit-cube map.
        input_upper: ``d`` upper input bounds.
        output_offset: Mean of the pre-training outcomes (scalar tensor).
        output_scale: Standard deviation of the pre-training outcomes (scalar tensor).
        mean: ``"mlp"`` (paper default), ``"constant"``, ``"zero"`` or
            ``"empirical"``.
        kernel: ``"matern52_on_features"`` (paper default: ARD Matern-5/2 on the
            MLP's last hidden features), ``"matern52"`` (ARD on the inputs) or
            ``"empirical"``.
        hidden: Hidden layer widths of the MLP (used when ``mean="mlp"`` or the
            kernel acts on features).
        num_index_points: For ``mean="empirical"`` / ``kernel="empirical"`` (always
            together): the number of index points of the empirical prior
            (:class:`EmpiricalStructure`); its tensors are set by
            :func:`~botorch_transfer.priors.hyperbo.pretrain_prior` with
            ``objective="empirical"``.

    Example:
        >>> prior = PretrainedPrior(
        ...     torch.zeros(2), torch.ones(2), torch.tensor(0.), torch.tensor(1.)
        ... )
        >>> prior.covariance(torch.rand(5, 2)).shape
        torch.Size([5, 5])
    """

    def __init__(
        self,
        input_lower: Tensor,
        input_upper: Tensor,
        output_offset: Tensor,
        output_scale: Tensor,
        mean: str = "mlp",
        kernel: str = "matern52_on_features",
        hidden: tuple[int, ...] = (32, 32),
        num_index_points: int | None = None,
    ) -> None:
        super().__init__()
        if mean not in MEANS:
            raise ValueError(f"`mean` must be one of {MEANS}, got {mean!r}.")
        if kernel not in KERNELS:
            raise ValueError(f"`kernel` must be one of {KERNELS}, got {kernel!r}.")
        hidden = tuple(int(h) for h in hidden)
        if any(h < 1 for h in hidden):
            raise ValueError(
                f"`hidden` must contain positive layer widths, got {hidden}."
            )
        if input_lower.shape != input_upper.shape or input_lower.dim() != 1:
            raise ValueError(
                "`input_lower` and `input_upper` must be 1-D tensors of length d, got "
                f"shapes {tuple(input_lower.shape)} and {tuple(input_upper.shape)}."
            )
        if not (output_scale > 0):
            raise ValueError(
                f"`output_scale` must be positive, got {float(output_scale)}."
            )
        if (mean == "empirical") != (kernel == "empirical"):
            raise ValueError(
                "`mean='empirical'` and `kernel='empirical'` go together (one "
                f"empirical prior), got mean={mean!r} and kernel={kernel!r}."
            )
        is_empirical = mean == "empirical"
        if is_empirical and (
            not isinstance(num_index_points, int) or num_index_points < 1
        ):
            raise ValueError(
                "The empirical prior needs `num_index_points`, a positive integer, "
                f"got {num_index_points!r}."
            )
        needs_features = mean == "mlp" or kernel == "matern52_on_features"
        self.config = {
            "mean": mean,
            "kernel": kernel,
            "hidden": list(hidden),
            "dim": input_lower.shape[-1],
        }
        if is_empirical:
            self.config["num_index_points"] = num_index_points
        # a constant input dimension gets range 1 (its unit-cube coordinate is then 0)
        range_ = torch.where(
            input_upper > input_lower,
            input_upper - input_lower,
            torch.ones_like(input_lower),
        )
        self.features = InputFeatures(
            input_lower, range_, hidden if needs_features else None
        )
        self.empirical = (
            EmpiricalStructure(self.features, num_index_points)
            if is_empirical
            else None
        )
        self.mean_module = PretrainedMean(
            self.features, mean, output_offset, output_scale, self.empirical
        )
        self.covar_module = PretrainedKernel(
            self.features,
            kernel == "matern52_on_features",
            output_scale,
            self.empirical,
        )
        # noise in units of the outcome variance; softplus-constrained
        self.register_parameter(
            "raw_noise", nn.Parameter(torch.zeros((), dtype=input_lower.dtype))
        )
        self.register_constraint("raw_noise", GreaterThan(MIN_NOISE))
        self.noise_relative = torch.tensor(0.1, dtype=input_lower.dtype)
        self.to(input_lower)
        self.training_history: list[dict[str, float]] = []

    # --- noise -----------------------------------------------------------------------
    @property
    def noise_relative(self) -> Tensor:
        r"""Noise variance in units of the pre-training outcome variance."""
        return self.raw_noise_constraint.transform(self.raw_noise)

    @noise_relative.setter
    def noise_relative(self, value: Tensor) -> None:
        value = torch.as_tensor(
            value, dtype=self.raw_noise.dtype, device=self.raw_noise.device
        )
        self.initialize(raw_noise=self.raw_noise_constraint.inverse_transform(value))

    @property
    def noise(self) -> Tensor:
        r"""Observation noise variance in the user's units."""
        return self.noise_relative * self.mean_module.scale.pow(2)

    # --- evaluation ------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return int(self.config["dim"])

    def _check(self, X: Tensor, name: str) -> None:
        if X.dim() < 2 or X.shape[-1] != self.dim:
            raise ValueError(
                f"`{name}` must have shape batch_shape x n x {self.dim} (the prior's "
                f"input dimension), got {tuple(X.shape)}."
            )

    def mean(self, X: Tensor) -> Tensor:
        r"""Prior mean ``mu(X)`` (shape ``batch x n``)."""
        self._check(X, "X")
        return self.mean_module(X)

    def covariance(
        self, X1: Tensor, X2: Tensor | None = None, observation_noise: bool = False
    ) -> Tensor:
        r"""Dense prior covariance ``k(X1, X2)``; with ``observation_noise`` (and
        ``X2=None``) the noisy-observation covariance ``k o sigma^2`` of the paper."""
        self._check(X1, "X1")
        if X2 is not None:
            self._check(X2, "X2")
        K = self.covar_module(X1, X1 if X2 is None else X2).to_dense()
        if observation_noise:
            if X2 is not None:
                raise ValueError(
                    "`observation_noise=True` needs `X2=None` "
                    "(noise is on the diagonal)."
                )
            K = K + self.noise * torch.eye(K.shape[-1], dtype=K.dtype, device=K.device)
        return K

    # --- persistence -----------------------------------------------------------------
    def save(self, path: PathLike) -> None:
        r"""Save the prior (structure, weights, training history) to ``path``.

        One ``torch.save`` file in the shared prior format
        (:mod:`botorch_transfer.priors.io`).

        Args:
            path: File path or writable binary file object.
        """
        save_prior(self, self.payload(), path)

    def payload(self) -> dict[str, Any]:
        r"""The saved data of this prior: its config, state tensors (on the CPU) and
        training history (what :meth:`save` writes, and what
        :class:`~botorch_transfer.priors.hyperbo.PretrainedPriorMixture` saves per
        component)."""
        return {
            "config": dict(self.config),
            "state": {k: v.detach().cpu() for k, v in self.state_dict().items()},
            "training_history": list(self.training_history),
        }

    @classmethod
    def load(
        cls, path: PathLike, map_location: str | torch.device | None = None
    ) -> PretrainedPrior:
        r"""Load a prior written by :meth:`save`.

        Args:
            path: File path or readable binary file object.
            map_location: Device to load onto (as in ``torch.load``).

        Returns:
            The prior, in eval mode.

        Raises:
            ~botorch_transfer.priors.io.PriorFileError: If the file is not a readable
                saved ``PretrainedPrior`` (see
                :func:`~botorch_transfer.priors.io.load_prior`: header, checksum,
                finite tensors of one dtype), or its config, tensor shapes or values
                (positive input ranges and outcome scale) are invalid.
        """
        blob = load_prior(path, cls.__name__, ("config", "state"), map_location="cpu")
        prior = cls.from_payload(blob, path)
        if map_location is not None:
            prior.to(map_location)
        return prior

    @classmethod
    def from_payload(cls, blob: dict[str, Any], path: PathLike) -> PretrainedPrior:
        r"""The prior saved as ``blob`` (see :meth:`payload`), every part checked.

        Args:
            blob: The payload read from ``path``.
            path: The file it was read from (for the messages).

        Returns:
            The prior on the CPU, in eval mode.

        Raises:
            ~botorch_transfer.priors.io.PriorFileError: See :meth:`load`.
        """
        name = cls.__name__
        check_keys(blob, ("config", "state"), path, name, "payload")
        config, state = blob["config"], blob["state"]
        check_keys(config, ("mean", "kernel", "hidden"), path, name, "config")
        check_keys(state, _STATE_KEYS, path, name, "state")
        # the maps' tensors here; the networks' by load_state_dict (strict)
        shapes = dict(zip(_STATE_KEYS, [("d",), ("d",), (), ()]))
        positive = ("features.range", "mean_module.scale")
        d = check_tensors(state, shapes, path, name, positive=positive)["d"]
        if config.get("dim", d) != d:
            raise PriorFileError(
                f"{describe_path(path)}: the config 'dim' is {config['dim']!r} but the "
                f"state tensors of the saved {name} have d={d}."
            )
        lower = state["features.lower"]
        upper = lower + state["features.range"]
        try:
            prior = cls(
                lower,
                upper,
                state["mean_module.offset"],
                state["mean_module.scale"],
                mean=config["mean"],
                kernel=config["kernel"],
                hidden=tuple(config["hidden"]),
                num_index_points=config.get("num_index_points"),
            )
        except (TypeError, ValueError) as e:
            raise PriorFileError(
                f"{describe_path(path)}: invalid config of the saved {name}: {e}"
            ) from e
        if prior.empirical is not None:
            # saved before the whitened form (alpha and B un-whitened, i.e. L = I) or
            # before the statistics were kept: their defaults, under each name of the
            # shared structure
            missing = [k for k in _ADDED_EMPIRICAL_KEYS if k not in state]
            state = {
                **state,
                **{
                    k: v
                    for k, v in prior.state_dict().items()
                    if any(k.endswith(m) for m in missing)
                },
            }
        try:
            prior.load_state_dict(state)
        except RuntimeError as e:  # missing / unexpected / mis-shaped tensors
            raise PriorFileError(
                f"{describe_path(path)}: the state of the saved {name} does not match "
                f"its config: {e}"
            ) from e
        prior.config.update(config)
        prior.training_history = list(blob.get("training_history", []))
        return prior.eval()

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.config.items())
