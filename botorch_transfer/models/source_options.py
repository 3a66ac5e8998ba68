r"""How a source enters a transfer model, and how its GP and posterior are built.

A :class:`~botorch_transfer.models.delta.DeltaBOModel` (and the transfer parts of
:class:`~botorch_transfer.models.rank_weighted.RankWeightedTransferGP`) takes

- a *source map* (``source_map=``), how the source posterior ``g`` enters the
  target ``f``: :class:`IdentityMap` (``f = g + delta``, the DeltaBO paper's),
  :class:`AffineMap` (``f = a g + c + delta`` with ``a`` and ``c`` fitted) or
  :class:`MarginalAffineMap` (the same map with ``a`` and ``c`` integrated out).
  The strings ``"identity"``, ``"affine"`` and ``"marginal-affine"`` name each map
  with its defaults;
- :class:`SourceOptions` (``source_options=``): the kernel and fit of a source GP
  built from a ``TaskData``, and the size of the cached factor of its posterior.

Each option is checked when it is built.

Example:
    >>> from botorch_transfer.models.source_options import (
    ...     MarginalAffineMap,
    ...     resolved_source_map,
    ... )
    >>> MarginalAffineMap(scale_sd=0.25)
    MarginalAffineMap(scale_sd=0.25, offset_sd=1.0)
    >>> resolved_source_map("affine")
    AffineMap(scale_prior=None)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar, Union

from gpytorch.kernels import Kernel
from gpytorch.priors import Prior

from botorch_transfer._deprecation import renamed_keywords
from botorch_transfer.validation import check_integer, check_number

#: Standard deviation of the default ``N(1, sd^2)`` prior on the affine source scale
#: (:class:`AffineMap`: its prior; :class:`MarginalAffineMap`: the distribution
#: integrated over).
DEFAULT_SOURCE_SCALE_PRIOR_SD = 0.5
#: Standard deviation of the offset integrated over by :class:`MarginalAffineMap`, in
#: model units (the target's standard deviations under ``Standardize(m=1)``).
DEFAULT_SOURCE_OFFSET_SD = 1.0
RESIDUAL_COVARIANCES = ("diagonal", "full")


@dataclass(frozen=True)
class IdentityMap:
    r"""``f = g + delta``: the source posterior as it is (the DeltaBO paper's).

    Args:
        residual_covariance: How the source's error at the target points enters.
            ``"full"`` (default): the exact Gaussian conditional with prior mean
            ``mu_g,N`` and prior kernel ``k_g,N + k_delta``, so target observations
            also correct the source's error near them. ``"diagonal"`` (the paper's
            eqs. 6-7): independent noise of variance ``sigma^2_g,N(x_i)`` at each
            target point, which no target observation reduces.
    """

    name: ClassVar[str] = "identity"
    residual_covariance: str = "full"

    def __post_init__(self) -> None:
        if self.residual_covariance not in RESIDUAL_COVARIANCES:
            raise ValueError(
                f"`residual_covariance` must be one of {RESIDUAL_COVARIANCES}, got "
                f"{self.residual_covariance!r}."
            )


@dataclass(frozen=True)
class AffineMap:
    r"""``f = a g + c + delta`` with a scale ``a`` and an offset ``c`` fitted with
    the difference's kernel (a source in other units is rescaled, an unrelated one
    weighted down).

    Args:
        scale_prior: Prior of ``a`` (default ``N(1, 0.5^2)``, which keeps a few
            target points from fitting ``a`` and ``c`` exactly). ``c`` has no prior.
    """

    name: ClassVar[str] = "affine"
    residual_covariance: ClassVar[str] = "full"
    scale_prior: Prior | None = None

    def __post_init__(self) -> None:
        if self.scale_prior is not None and not isinstance(self.scale_prior, Prior):
            raise TypeError(
                "`scale_prior` must be a GPyTorch Prior or None, got "
                f"{type(self.scale_prior).__name__}."
            )


@dataclass(frozen=True)
class MarginalAffineMap:
    r"""``f = a g + c + delta`` with ``a ~ N(1, scale_sd^2)`` and ``c ~ N(0,
    offset_sd^2)`` integrated out (see
    :class:`~botorch_transfer.models.source_posterior.MarginalAffineSourcePosterior`),
    so the scale stays uncertain where the target data cannot fix it. Use it with
    ``Standardize(m=1)``.

    Args:
        scale_sd: ``s_a``, the standard deviation of the scale (default 0.5).
        offset_sd: ``s_c``, the standard deviation of the offset, in model units
            (default 1.0: one standard deviation of the target under
            ``Standardize(m=1)``, on which BoTorch's default priors also rely).
    """

    name: ClassVar[str] = "marginal-affine"
    residual_covariance: ClassVar[str] = "full"
    scale_sd: float = DEFAULT_SOURCE_SCALE_PRIOR_SD
    offset_sd: float = DEFAULT_SOURCE_OFFSET_SD

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale_sd", check_number("scale_sd", self.scale_sd))
        object.__setattr__(self, "offset_sd", check_number("offset_sd", self.offset_sd))


SourceMap = Union[IdentityMap, AffineMap, MarginalAffineMap]
SOURCE_MAPS: dict[str, type] = {
    cls.name: cls for cls in (IdentityMap, AffineMap, MarginalAffineMap)
}


def resolved_source_map(value: Any, allowed: tuple[str, ...] | None = None) -> Any:
    r"""The source map ``value`` names (a string) or is (a map object).

    Args:
        value: One of the strings in :data:`SOURCE_MAPS` (the map with its defaults)
            or a map object.
        allowed: The names of the maps the model takes (default: all).

    Returns:
        The map object.

    Raises:
        ValueError: For another string, or a map the model does not take.
        TypeError: For anything else.
    """
    allowed = tuple(SOURCE_MAPS) if allowed is None else allowed
    if isinstance(value, str):
        if value not in allowed:
            raise ValueError(f"`source_map` must be one of {allowed}, got {value!r}.")
        return SOURCE_MAPS[value]()
    if not isinstance(value, tuple(SOURCE_MAPS.values())):
        raise TypeError(
            "`source_map` must be a name in "
            f"{allowed} or one of IdentityMap, AffineMap, MarginalAffineMap, got "
            f"{type(value).__name__}."
        )
    if value.name not in allowed:
        raise ValueError(
            f"`source_map` must be one of {allowed}, got {type(value).__name__}."
        )
    return value


@dataclass(frozen=True)
class SourceOptions:
    r"""How the source GP and its cached posterior are built.

    Args:
        covar_module: Kernel ``k_g`` of a source GP built from a ``TaskData`` (the
            first source; later stacked sources use it for their difference layer).
            Default: a scaled RBF kernel with BoTorch's priors.
        fit: Whether to fit the hyperparameters of source GPs built from
            ``TaskData`` (else they keep the kernel's current values).
        max_rank: Largest rank of the cached factor of the source posterior (its
            per-point cost is ``O(rank^2)``); the posterior is exact when the
            source's numerical rank is below it. See
            :class:`~botorch_transfer.models.source_posterior.GPSourcePosterior`.
        tolerance: Relative residual prior variance at which the cached factor
            stops growing (``1e-10``: the exact posterior's numerical rank).
    """

    covar_module: Kernel | None = None
    fit: bool = True
    max_rank: int = 1000
    tolerance: float = 1e-10

    def __post_init__(self) -> None:
        if self.covar_module is not None and not isinstance(self.covar_module, Kernel):
            raise TypeError(
                "`covar_module` must be a GPyTorch Kernel or None, got "
                f"{type(self.covar_module).__name__}."
            )
        if not isinstance(self.fit, bool):
            raise TypeError(f"`fit` must be a bool, got {self.fit!r}.")
        check_integer("max_rank", self.max_rank)
        object.__setattr__(
            self,
            "tolerance",
            check_number("tolerance", self.tolerance, 0.0, 1.0, include_maximum=False),
        )


#: The keywords :class:`SourceOptions` and the map objects replace (deprecated),
#: with the field each fills.
OLD_SOURCE_OPTIONS = {
    "source_covar_module": "covar_module",
    "fit_source": "fit",
    "source_max_rank": "max_rank",
    "source_tolerance": "tolerance",
}
OLD_MAP_OPTIONS = {
    "residual_covariance": "IdentityMap(residual_covariance=...)",
    "source_scale_prior": "AffineMap(scale_prior=...)",
    "source_scale_sd": "MarginalAffineMap(scale_sd=...)",
    "source_offset_sd": "MarginalAffineMap(offset_sd=...)",
}


def options_from_old_keywords(
    owner: str,
    source_map: Any,
    source_options: SourceOptions | None,
    given: dict[str, Any],
    default_map: Any = "marginal-affine",
) -> tuple[Any, SourceOptions]:
    r"""The source map and :class:`SourceOptions` of a constructor that still takes
    their old keywords (each with a ``DeprecationWarning`` at the caller's line).

    Args:
        owner: The constructor's class name (for the messages).
        source_map: The ``source_map`` argument (``None``: ``default_map``).
        source_options: The ``source_options`` argument.
        given: The constructor's ``**kwargs``; the old keywords are taken out.
        default_map: The map ``source_map=None`` means.

    Returns:
        The resolved map object and options.

    Raises:
        ValueError: When an old keyword contradicts the map or the options given.
    """
    old_map = {k: given.pop(k) for k in list(given) if k in OLD_MAP_OPTIONS}
    old_options = {k: given.pop(k) for k in list(given) if k in OLD_SOURCE_OPTIONS}
    renamed_keywords(
        owner,
        {**old_map, **old_options},
        {
            **OLD_MAP_OPTIONS,
            **{
                old: f"source_options=SourceOptions({new}=...)"
                for old, new in OLD_SOURCE_OPTIONS.items()
            },
        },
    )
    if old_options:
        if source_options is not None:
            raise ValueError(
                f"Give {sorted(old_options)} in `source_options`, not beside it."
            )
        source_options = SourceOptions(
            **{OLD_SOURCE_OPTIONS[k]: v for k, v in old_options.items()}
        )
    diagonal = old_map.get("residual_covariance") == "diagonal"
    if source_map is None:
        source_map = "identity" if diagonal else default_map
    source_map = resolved_source_map(source_map)
    if "residual_covariance" in old_map:
        covariance = old_map["residual_covariance"]
        if isinstance(source_map, IdentityMap):
            source_map = IdentityMap(residual_covariance=covariance)
        elif covariance != "full":
            IdentityMap(residual_covariance=covariance)  # names a wrong value
            raise ValueError(
                f"`source_map={source_map.name!r}` needs `residual_covariance='full'` "
                "(the source's share of the prior covariance is scaled), got "
                f"{covariance!r}."
            )
    sd_names = ("source_scale_sd", "source_offset_sd")
    sds = {k: old_map[k] for k in sd_names if k in old_map}
    if sds:
        if not isinstance(source_map, MarginalAffineMap):
            raise ValueError(
                "`source_scale_sd` and `source_offset_sd` apply to "
                f"`source_map='marginal-affine'` only, got `source_map="
                f"{source_map.name!r}`."
            )
        source_map = replace(
            source_map,
            **{k.removeprefix("source_"): v for k, v in sds.items()},
        )
    if "source_scale_prior" in old_map:
        if not isinstance(source_map, AffineMap):
            raise ValueError(
                "`source_scale_prior` applies to `source_map='affine'` only (give "
                "`MarginalAffineMap(scale_sd=...)` under 'marginal-affine'), got "
                f"`source_map={source_map.name!r}`."
            )
        source_map = AffineMap(scale_prior=old_map["source_scale_prior"])
    if source_options is None:
        return source_map, SourceOptions()
    if not isinstance(source_options, SourceOptions):
        raise TypeError(
            "`source_options` must be a SourceOptions or None, got "
            f"{type(source_options).__name__}."
        )
    return source_map, source_options
