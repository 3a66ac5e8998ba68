r"""Named sets of methods and problems for ``run --track``.

- ``"quick"``: the main job (``run`` with no arguments): the recommended model
  (``rank-weighted``) against the peers a BoTorch user would pick (``MultiTaskGP``,
  ``RGPE``), the no-transfer GP and random search on three real tuning pairs with
  replicate noise and one negative control (the source scrambled), and on one target
  with four past experiments (``MetaTaskMixtureGP`` among the peers there), 10 seeds.
- ``"real-development"`` and ``"real-confirmation"``: the two halves of the real
  track (:mod:`~botorch_transfer.test_functions.real_pairs`), 20 seeds: defaults are
  chosen on the development half, claims are made on the confirmation half.
- ``"zero-development"`` and ``"zero-confirmation"``: the first five queries with
  no target point (:mod:`~botorch_transfer.test_functions.zero_start`), the recommended
  model from the sources alone against a Sobol design, 20 seeds.
- ``"hetero-development"`` and ``"hetero-confirmation"``: a source that ran on other
  parameters (:mod:`~botorch_transfer.test_functions.real_heterogeneous`): the
  recommended model on the source mapped by name against ``HeterogeneousMTGP``,
  ``MultiTaskGP`` filled Ax's way or with learned imputation, the same model with
  what differs ignored, the no-transfer GP and random search, 20 seeds.
- ``"quick-papers"``: the papers' models with their hand-set kernels beside the
  peers on two synthetic problems (the main job's earlier form).
- ``"papers"``: the papers' track: fixed kernels and noise levels as the papers
  state them (reproducing DeltaBO Fig. 1 and Shilton et al. Fig. 2).
- ``"default"``: the default-settings track: every model built as its docstring
  tells a user (inputs normalized, outcomes standardized as documented, BoTorch's
  default kernels and priors, ``fit_gpytorch_mll`` every iteration, the same UCB for
  all, nothing tuned per problem), against the peers (``mtgp``, ``rgpe``) and the
  no-transfer GP, on the paper settings, the Shilton shifts, the negative-transfer
  controls and the real LCBench transfer pairs (these need the ``[yahpo]`` extra).
- ``"meta"``: the meta-learning track: the README loops of ``PretrainedPriorGP``
  (``hyperbo-clustered-ucb1-skip``) and ``ClusterMetaPriorGP`` (``cmbo``) and
  ``MetaTaskMixtureGP`` (``meta-task-mixture-ucb1-skip``) against the no-meta GP
  (``stbo-ucb-skip``), the peers with every meta-task as a source or task
  (``rgpe-meta-skip``, ``mtgp-meta-skip``), a greedy portfolio and random search,
  leave-tasks-out on three YAHPO families and one with the noise of its resampling
  replicates, each with the meta-tasks on shared inputs and at their own inputs (the
  ``[yahpo]`` extra and the YAHPO data), T = 30.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from botorch_transfer.test_functions.controls import CONTROLS
from botorch_transfer.test_functions.hpo_pairs import HPO_PAIRS
from botorch_transfer.test_functions.problems import CONTROLLED, SHILTON_SHIFTS
from botorch_transfer.test_functions.real_heterogeneous import (
    HETERO_CONFIRMATION,
    HETERO_DEVELOPMENT,
)
from botorch_transfer.test_functions.real_multi import (
    MULTI_CONFIRMATION,
    MULTI_DEVELOPMENT,
)
from botorch_transfer.test_functions.real_pairs import CONFIRMATION, DEVELOPMENT
from botorch_transfer.test_functions.zero_start import (
    ZERO_CONFIRMATION,
    ZERO_DEVELOPMENT,
)

PAPER_SETTINGS = (
    "breast-cancer-gboost",
    "breast-cancer-mlp",
    "gaussian-bumps",
    "bohachevsky",
    "assumption-gp",
)
SHILTON = tuple(f"shilton-bumps-s{s:g}" for s in SHILTON_SHIFTS)
CONTROL_PROBLEMS = tuple(f"{base}-{kind}" for base in CONTROLLED for kind in CONTROLS)


@dataclass(frozen=True)
class Track:
    r"""A named comparison.

    Attributes:
        methods: Registered method names.
        problems: Registered problem names.
        description: What the track measures.
        seeds: Seeds when ``run`` gets no ``--seeds``.
        iterations: BO iterations when ``run`` gets no ``--iterations`` (``None``:
            each problem's default).
        left_out: ``{(method, problem): why}``: combinations the track does not run
            when ``run`` takes its methods (``run`` prints why).
    """

    methods: tuple[str, ...]
    problems: tuple[str, ...]
    description: str
    seeds: int = 5
    iterations: int | None = None
    left_out: dict[tuple[str, str], str] = field(default_factory=dict)


#: The methods of the real track: the recommended model, the peers, the no-transfer
#: GP, the guarded DeltaBO loop and random search.
REAL_METHODS = (
    "rank-weighted",
    "mtgp",
    "rgpe",
    "gp-ucb-fitted",
    "deltabo-marginal-final-guarded",
    "random",
)

#: The methods of the multi-source track: the recommended model, the peers that take
#: several sources, the no-transfer GP and random search.
MULTI_SOURCE_METHODS = (
    "rank-weighted",
    "mtgp",
    "rgpe",
    "meta-task-mixture",
    "gp-ucb-fitted",
    "random",
)

#: The methods of the heterogeneous track: the recommended model on the source
#: mapped with what the user knows and with what differs ignored, the peers that
#: take a source on other parameters, the no-transfer GP and random search.
HETERO_METHODS = (
    "rank-weighted-aligned",
    "rank-weighted-ignored",
    "hetero-mtgp",
    "mtgp-filled",
    "mtgp-imputed",
    "gp-ucb-fitted",
    "random",
)

#: The methods of the zero-start track: the recommended model from the sources alone,
#: a Sobol design and random search.
ZERO_START_METHODS = ("rank-weighted", "sobol", "random")


def _halves(
    prefix: str,
    methods: tuple[str, ...],
    development: list[str],
    confirmation: list[str],
    what: str,
) -> dict[str, Track]:
    r"""The ``<prefix>-development`` and ``<prefix>-confirmation`` tracks of a split
    benchmark, 20 seeds each (``what`` opens their descriptions)."""
    return {
        f"{prefix}-development": Track(
            methods=methods,
            problems=tuple(development),
            description=f"{what} development half (kept for choosing defaults)",
            seeds=20,
        ),
        f"{prefix}-confirmation": Track(
            methods=methods,
            problems=tuple(confirmation),
            description=f"{what} confirmation half (claims are made here)",
            seeds=20,
        ),
    }


#: The main job's single-source pairs (a control last) and multi-source problem (a
#: confirmation-half problem with four sources, one of them scrambled).
QUICK_PAIRS = (
    "mlp-breast_cancer-to-wine",
    "forest-digits_low-to-digits_high",
    "svm-digit3-to-digit8",
    "mlp-breast_cancer-to-wine-permuted",
)
QUICK_MULTI = "multi-svm-digit8"

TRACKS: dict[str, Track] = {
    "quick": Track(
        methods=(
            "rank-weighted",
            "mtgp",
            "rgpe",
            "meta-task-mixture",
            "gp-ucb-fitted",
            "random",
        ),
        problems=(*QUICK_PAIRS, QUICK_MULTI),
        description="the main job: the recommended model against MultiTaskGP, RGPE "
        "and the no-transfer GP on real noisy tuning pairs and a control, and with "
        "four past experiments (MetaTaskMixtureGP among the peers)",
        # enough seeds for ratios near the 20-seed ones (the committed records of
        # these pairs: 0.56x the GP at seeds 0-9, 0.49x at 0-19), in minutes
        seeds=10,
        left_out={
            **{
                ("meta-task-mixture", pair): "a model for several past tasks; "
                "the single-source pairs are left to the others"
                for pair in QUICK_PAIRS
            },
            ("mtgp", QUICK_MULTI): "about 100 s per iteration with five tasks "
            "on 2 cores, beyond the main job's few minutes",
        },
    ),
    **_halves("real", REAL_METHODS, DEVELOPMENT, CONFIRMATION, "the real track's"),
    **_halves(
        "multi",
        MULTI_SOURCE_METHODS,
        MULTI_DEVELOPMENT,
        MULTI_CONFIRMATION,
        "the multi-source track's",
    ),
    **_halves(
        "hetero",
        HETERO_METHODS,
        HETERO_DEVELOPMENT,
        HETERO_CONFIRMATION,
        "the heterogeneous track's",
    ),
    **_halves(
        "zero",
        ZERO_START_METHODS,
        ZERO_DEVELOPMENT,
        ZERO_CONFIRMATION,
        "the first 5 queries with no target point:",
    ),
    "quick-papers": Track(
        methods=("deltabo", "envgp", "diffgp", "mtgp", "rgpe", "gp-ucb", "random"),
        problems=("bohachevsky", "gaussian-bumps"),
        description="the papers' models with hand-set kernels beside the peers",
        seeds=3,
    ),
    "papers": Track(
        methods=(
            "deltabo",
            "deltabo-full",
            "envgp",
            "diffgp",
            "gp-ucb",
            "gp-ei",
            "gp-pi",
            "gp-ts",
            "random",
        ),
        problems=PAPER_SETTINGS + SHILTON,
        description="the papers' fixed kernels and noise levels",
    ),
    "default": Track(
        methods=(
            "deltabo-fitted",
            "deltabo-guarded",
            "deltabo-affine-fitted",
            "deltabo-affine-guarded",
            "deltabo-marginal-fitted",
            "deltabo-marginal-guarded",
            "deltabo-marginal-preq-guarded",
            "deltabo-marginal-preqclip-guarded",
            "deltabo-marginal-preqclip2-guarded",
            "deltabo-marginal-seqclip2-guarded",
            "deltabo-marginal-preqinit-guarded",
            "deltabo-marginal-final-guarded",
            "envgp-fitted",
            "diffgp-fitted",
            "mtgp",
            "rgpe",
            "gp-ucb-fitted",
            "random",
        ),
        problems=PAPER_SETTINGS + SHILTON + CONTROL_PROBLEMS + tuple(HPO_PAIRS),
        description="every model with its documented defaults, fitted every "
        "iteration, against MultiTaskGP, RGPE and the no-transfer GP",
    ),
    "meta": Track(
        methods=(
            "hyperbo-clustered-ucb1-skip",
            "cmbo",
            "meta-task-mixture-ucb1-skip",
            "stbo-ucb-skip",
            "rgpe-meta-skip",
            "mtgp-meta-skip",
            "portfolio-skip",
            "random",
        ),
        problems=tuple(
            f"{family}{design}"
            for family in (
                "lcbench",
                "rbv2-xgboost",
                "rbv2-rpart",
                "rbv2-rpart-replicates",
            )
            for design in ("", "-own-inputs")
        ),
        description="the meta models' README loops against the no-meta GP, RGPE and "
        "MultiTaskGP over the meta-tasks (mtgp-meta-skip refits an ICM GP on 30 "
        "points per meta-task every iteration: hours per run on a CPU), meta-tasks on "
        "shared inputs and at their own",
        iterations=30,
    ),
}
