r"""Pre-training GP priors over many related tasks (HyperBO)."""

from botorch_transfer.priors.hyperbo.mixture import (
    PretrainedPriorMixture,
    pretrain_clustered_prior,
)
from botorch_transfer.priors.hyperbo.objectives import (
    EKLGroup,
    MatchingInputGroup,
    ekl_objective,
    matching_input_groups,
    nll_objective,
)
from botorch_transfer.priors.hyperbo.pretrain import ThinMetaDataWarning, pretrain_prior
from botorch_transfer.priors.hyperbo.prior import PretrainedPrior

__all__ = [
    "EKLGroup",
    "MatchingInputGroup",
    "PretrainedPrior",
    "PretrainedPriorMixture",
    "ThinMetaDataWarning",
    "ekl_objective",
    "matching_input_groups",
    "nll_objective",
    "pretrain_clustered_prior",
    "pretrain_prior",
]
