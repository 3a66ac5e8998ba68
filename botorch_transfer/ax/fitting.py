r"""How Ax's surrogate fits the package's models that are not one GPyTorch GP
(registered with Ax's ``fit_botorch_model`` when ``botorch_transfer.ax`` is
imported)."""

from __future__ import annotations

from typing import Any

from ax.generators.torch.botorch_modular.utils import fit_botorch_model
from botorch.fit import fit_gpytorch_mll
from gpytorch.mlls import ExactMarginalLogLikelihood

from botorch_transfer.models.guard import TransferGuard
from botorch_transfer.models.randomized_nn import RandomizedNNEnsemble
from botorch_transfer.models.rank_weighted import RankWeightedTransferGP


@fit_botorch_model.register(RandomizedNNEnsemble)
@fit_botorch_model.register(TransferGuard)
def _fit_with_the_models_own_fit(
    model: RandomizedNNEnsemble | TransferGuard,
    mll_class: type | None = None,
    mll_options: dict[str, Any] | None = None,
) -> None:
    r"""How Ax's surrogate fits the package's models that are not one GPyTorch GP
    (``mll_class`` is not used): a ``RandomizedNNEnsemble`` trains its members on
    eq. 10, a guard (``TransferGuard.of(DeltaBOModel)``) fits its two GPs by
    marginal likelihood and chooses (their ``fit``)."""
    model.fit()


@fit_botorch_model.register(RankWeightedTransferGP)
def _fit_rank_weighted(
    model: RankWeightedTransferGP,
    mll_class: type | None = None,
    mll_options: dict[str, Any] | None = None,
) -> None:
    r"""How Ax's surrogate fits a ``RankWeightedTransferGP`` (two GPs, not one
    GPyTorch model; ``mll_class`` is not used): ``fit_gpytorch_mll`` calls its
    ``custom_fit``, which fits the transfer model and the target-only GP by their
    exact marginal likelihoods and recomputes the weight."""
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
