r"""The source/target problem type shared by the problem modules (``problems``,
``hpo``), the description of a source on other parameters, and the kernels with
fixed hyperparameters the papers state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch
from gpytorch.kernels import Kernel, MaternKernel, RBFKernel, ScaleKernel
from torch import Tensor


def fixed_kernel(kind: str, lengthscale: float, outputscale: float, dim: int) -> Kernel:
    r"""A ``ScaleKernel`` over ``"rbf"`` or ``"matern52"`` with the given fixed values.

    Args:
        kind: ``"rbf"`` (squared exponential) or ``"matern52"``.
        lengthscale: The (shared) lengthscale.
        outputscale: The kernel variance.
        dim: Input dimension.

    Returns:
        A float64 kernel whose hyperparameters do not require gradients.
    """
    base = RBFKernel() if kind == "rbf" else MaternKernel(nu=2.5)
    kernel = ScaleKernel(base).to(torch.float64)
    kernel.base_kernel.lengthscale = torch.tensor(lengthscale, dtype=torch.float64)
    kernel.outputscale = torch.tensor(outputscale, dtype=torch.float64)
    for p in kernel.parameters():
        p.requires_grad_(False)
    return kernel


@dataclass(frozen=True)
class ExtraSource:
    r"""A further source task of a multi-source problem.

    Attributes:
        name: The source's name (its ``TaskData.name``).
        observe: ``observe(X, generator) -> n x 1`` draws one real replicate at each
            row of ``X``.
        noise: Its noise variance (the table's mean replicate variance).
        description: What it is (task, scrambled or not, rank correlation with the
            target).
    """

    name: str
    observe: Callable[[Tensor, torch.Generator], Tensor]
    noise: float
    description: str = ""


@dataclass(frozen=True)
class SourceSpace:
    r"""The parameters of a source that ran on other parameters than the target.

    What a user knows about the source is here (its parameters' names, the values
    it ran the target's other parameters at, the values the target runs its
    retired parameters at); what a method makes of it is the method's.

    Attributes:
        feature_names: The source's parameters, in the order of its inputs.
        target_feature_names: The target's parameters, in the order of its inputs.
        sample: ``sample(n, generator) -> n x len(feature_names)``: source inputs,
            in the source's columns (on a sub-range where the source ran on one).
        source_values: For each target parameter the source lacks and whose value
            it ran at is known, that value (in the target's units).
        target_values: For each parameter only the source has, the value the
            target runs at.
        candidates: For each target parameter the source lacks at an unknown
            value, the values a user would try.
    """

    feature_names: tuple[str, ...]
    target_feature_names: tuple[str, ...]
    sample: Callable[[int, torch.Generator], Tensor]
    source_values: dict[str, float] = field(default_factory=dict)
    target_values: dict[str, float] = field(default_factory=dict)
    candidates: dict[str, tuple[float, ...]] = field(default_factory=dict)


@dataclass
class TransferProblem:
    r"""A source/target pair to maximize.

    Attributes:
        name: Registry name.
        bounds: ``2 x d`` box.
        target: Noise-free target function (``n x d -> n x 1``).
        source: Noise-free source function.
        n_source: Number of source observations ``N``.
        source_noise: Source noise variance ``sigma_0^2``.
        target_noise: Target noise variance ``sigma^2``.
        kernels: Fixed kernels ``{"source", "delta", "target"}`` of the paper.
        grid_size: Points per dimension of the candidate grid (``None``: continuous).
        n_init: Random initial target points shared by all methods.
        iterations: Default number of BO iterations ``T``.
        beta: Fixed UCB exploration weight (the papers' experiments use a constant).
        optimum_known: ``False`` for problems (HPO) whose optimum is unknown: their
            regret is measured against the best value any run found.
        noisy_observations: Add Gaussian noise of the stated variances to the
            observations (synthetic problems); ``False`` observes the objective as is.
        observe_source: ``observe_source(X, generator) -> n x 1`` draws one real
            replicate of the source at each row of ``X`` (tabular problems with
            replicate noise: the objectives are then the replicate means); ``None``:
            Gaussian noise as ``noisy_observations`` says.
        observe_target: The same for the target.
        description: One-line summary with the source of the settings.
        source_name: The first source's name (``None``: unnamed).
        extra_sources: Further sources (multi-source problems), each with
            ``n_source`` observations drawn after the target's initial points.
        source_space: How the source's parameters differ from the target's
            (``None``: the source ran on the target's parameters). When set, the
            source's inputs come from ``source_space.sample`` in the source's own
            columns, and ``source`` and ``observe_source`` take them.
    """

    name: str
    bounds: Tensor
    target: Callable[[Tensor], Tensor]
    source: Callable[[Tensor], Tensor]
    n_source: int
    source_noise: float
    target_noise: float
    kernels: dict[str, Callable[[int], Kernel]]
    grid_size: int | None = None
    n_init: int = 2
    iterations: int = 30
    beta: float = 0.3
    optimum_known: bool = True
    noisy_observations: bool = True
    observe_source: Callable[[Tensor, torch.Generator], Tensor] | None = None
    observe_target: Callable[[Tensor, torch.Generator], Tensor] | None = None
    description: str = ""
    source_name: str | None = None
    extra_sources: tuple[ExtraSource, ...] = ()
    source_space: SourceSpace | None = None
    _grid: Tensor | None = field(default=None, repr=False)

    @property
    def dim(self) -> int:
        return self.bounds.shape[-1]

    @property
    def grid(self) -> Tensor | None:
        r"""The ``grid_size^d x d`` candidate grid (``None``: a continuous problem)."""
        if self.grid_size is None:
            return None
        if self._grid is None:
            axes = [
                torch.linspace(
                    lo, hi, self.grid_size, dtype=torch.float64, device=lo.device
                )
                for lo, hi in self.bounds.T
            ]
            self._grid = torch.stack(torch.meshgrid(*axes, indexing="ij"), -1).reshape(
                -1, self.dim
            )
        return self._grid

    def optimum(self) -> float | None:
        r"""Max of the target: exact on the grid; a dense-sample estimate otherwise;
        ``None`` when unknown (``optimum_known=False``)."""
        if not self.optimum_known:
            return None
        if self.grid is not None:
            return float(self.target(self.grid).max())
        gen = torch.Generator().manual_seed(0)
        X = self.sample(200_000, gen)
        return float(self.target(X).max())

    def sample(self, n: int, generator: torch.Generator) -> Tensor:
        r"""``n`` uniform points of the domain (grid points for a grid problem), on
        the domain's device; drawn from a CPU ``generator``, so a seed gives the
        same points on every device."""
        if self.grid is not None:
            rows = torch.randint(self.grid.shape[0], (n,), generator=generator)
            return self.grid[rows.to(self.grid.device)]
        lo, hi = self.bounds
        u = torch.rand(n, self.dim, generator=generator, dtype=torch.float64)
        return lo + (hi - lo) * u.to(lo.device)

    def with_domain_on(self, device: torch.device | str) -> TransferProblem:
        r"""This problem with its box (and grid) on ``device``: what a method sees
        in a run on that device. The objectives stay on the CPU (scikit-learn and
        ONNX surrogates are CPU code); the runner evaluates them there.

        Args:
            device: The device of the methods' data, models and acquisition.

        Returns:
            A copy sharing the objectives, with ``bounds`` (and a built grid) moved.
        """
        grid = None if self._grid is None else self._grid.to(device)
        return replace(self, bounds=self.bounds.to(device), _grid=grid)
