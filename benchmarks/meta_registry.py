r"""The built-in methods of the leave-tasks-out (``"meta"``) protocol, by name.

Every method queries points of the split's candidate pool (``MetaData.pool``);
``random`` (uniform over the pool) is registered with the transfer methods.

- ``stbo``: single-task GP with BoTorch's default priors, hyperparameters fitted
  every iteration, the HyperBO PI acquisition (threshold ``max(y) + 0.1`` in
  standardized units);
- ``stbo-ucb``: the same GP with UCB, ``beta = 1.8^2`` (HyperBO's STBOH);
- ``stbo-ucb-skip`` / ``hyperbo-skip``: ``stbo-ucb`` / ``hyperbo`` on the pool points
  not yet queried, the pool protocol of the cm-BO methods (the others may re-propose
  an evaluated point, as HyperBO's own simulated BO does; on noise-free pools that
  spends an evaluation on nothing new);
- ``stbo-ucb1-skip``: ``stbo-ucb-skip`` with ``beta = 1``, the README HyperBO loop's
  weight;
- ``hyperbo-clustered-ucb1-skip``: the README's PretrainedPriorGP loop:
  ``pretrain_clustered_prior`` and UCB with ``beta = 1``, without re-queries;
- ``hyperbo-clustered-ranked-ucb1-skip``: the same with the prior weighed against
  a target-only GP by leave-one-out ranking
  (:class:`~botorch_transfer.RankWeightedPriorGP`);
- ``hyperbo-nll`` / ``hyperbo-ekl``: :class:`~botorch_transfer.PretrainedPriorGP` on a
  prior pre-trained once per split with that objective, PI with threshold
  ``max(y) + 0.1`` in the prior's standardized units;
- ``cmbo-{center,barycenter}-{w2,jeffreys}``: cm-BO (Alg. 1), see
  :class:`ClusterMetaBO`;
- ``meta-task-mixture-ucb1-skip``: :class:`~botorch_transfer.MetaTaskMixtureGP`
  with positive scales only and no target-alone candidate, UCB with ``beta = 1``,
  without re-queries; ``meta-task-mixture-defaults-ucb1-skip`` the same with the
  model's defaults;
- ``portfolio-skip``: a greedy portfolio of the meta-training tasks (Feurer et al.
  2015), see :class:`GreedyPortfolioMeta`.
"""

from __future__ import annotations

from benchmarks.meta_methods import (
    PRETRAINED_PRIOR_UCB_BETA,
    ClusterMetaBO,
    ClusterMetaBOReadme,
    GreedyPortfolioMeta,
    HyperBO,
    MetaTaskMixtureMeta,
    MultiTaskMeta,
    RGPEMeta,
    SingleTaskBO,
)
from benchmarks.methods import register_method
from botorch_transfer.models.pretrained import PRIOR_SCALE_DOF

# one line each for `list`: model, acquisition, fixed or fitted hyperparameters, paper
register_method(
    "stbo",
    SingleTaskBO("pi"),
    "no transfer: single-task GP with BoTorch's default priors fitted every "
    "iteration; HyperBO's PI (threshold max(y) + 0.1 in standardized units)",
)
register_method(
    "stbo-ucb",
    SingleTaskBO("ucb"),
    "no transfer: stbo's fitted GP; UCB with beta = 1.8^2 (HyperBO's STBOH)",
)
register_method(
    "hyperbo",
    HyperBO(None, "ucb"),
    "HyperBO as the README loop: PretrainedPriorGP on pretrain_prior's default "
    "prior (the empirical prior on the meta-tasks' shared inputs), then frozen; UCB "
    "as stbo-ucb",
)
register_method(
    "stbo-ucb-skip",
    SingleTaskBO("ucb", skip_queried=True),
    "no transfer: stbo-ucb on the pool points not yet queried (cm-BO's pool "
    "protocol, for comparisons with it)",
)
register_method(
    "stbo-ucb1-skip",
    SingleTaskBO("ucb", skip_queried=True, beta=PRETRAINED_PRIOR_UCB_BETA),
    "no transfer: stbo-ucb-skip with UCB beta = 1 (the README PretrainedPriorGP "
    "loop's weight; its no-meta reference at the same weight)",
)
register_method(
    "hyperbo-skip",
    HyperBO(None, "ucb", skip_queried=True),
    "HyperBO as the README loop on the pool points not yet queried (cm-BO's pool "
    "protocol)",
)
register_method(
    "hyperbo-scale-skip",
    HyperBO(None, "ucb", skip_queried=True, prior_scale_dof=PRIOR_SCALE_DOF),
    "hyperbo-skip with the prior's scale updated by the target's data "
    "(PretrainedPriorGP(prior_scale_dof=2): an inverse-gamma scale, the Student-t "
    "predictive's scale)",
)
register_method(
    "hyperbo-clustered-skip",
    HyperBO(None, "ucb", skip_queried=True, clustered=True),
    "hyperbo-skip on a clustered prior: pretrain_clustered_prior (one empirical "
    "prior per cluster of meta-tasks, C by the silhouette), mixed with the "
    "clusters' posterior probabilities given the target's data",
)
register_method(
    "hyperbo-clustered-scale-skip",
    HyperBO(
        None, "ucb", skip_queried=True, prior_scale_dof=PRIOR_SCALE_DOF, clustered=True
    ),
    "hyperbo-clustered-skip with the prior's scale updated by the target's data "
    "(prior_scale_dof=2, as hyperbo-scale-skip)",
)
register_method(
    "hyperbo-clustered-ucb1-skip",
    HyperBO(
        None, "ucb", skip_queried=True, clustered=True, beta=PRETRAINED_PRIOR_UCB_BETA
    ),
    "the README's PretrainedPriorGP loop: hyperbo-clustered-skip with UCB beta = 1",
)
register_method(
    "hyperbo-clustered-ranked-ucb1-skip",
    HyperBO(
        None,
        "ucb",
        skip_queried=True,
        clustered=True,
        beta=PRETRAINED_PRIOR_UCB_BETA,
        ranked=True,
    ),
    "hyperbo-clustered-ucb1-skip with the prior weighed against a target-only GP by "
    "leave-one-out ranking (RankWeightedPriorGP)",
)
register_method(
    "hyperbo-clustered-scale-ucb1-skip",
    HyperBO(
        None,
        "ucb",
        skip_queried=True,
        prior_scale_dof=PRIOR_SCALE_DOF,
        clustered=True,
        beta=PRETRAINED_PRIOR_UCB_BETA,
    ),
    "the README's PretrainedPriorGP loop (hyperbo-clustered-ucb1-skip) with the "
    "prior's scale updated by the target's data (prior_scale_dof=2, as "
    "hyperbo-scale-skip)",
)
register_method(
    "hyperbo-fine-tune",
    HyperBO(None, "ucb", fine_tune=True),
    "HyperBO as the README loop with fine_tune=True: the empirical prior's base "
    "kernel and noise re-fitted to the target every iteration (log-normal priors at "
    "the pre-trained values); UCB as stbo-ucb",
)
register_method(
    "hyperbo-nll-ucb",
    HyperBO("nll", "ucb"),
    "HyperBO: hyperbo-nll's prior (NLL, Adam), UCB as stbo-ucb",
)
register_method(
    "hyperbo-nll",
    HyperBO("nll"),
    "HyperBO (Wang et al.): PretrainedPriorGP, prior pre-trained per split by NLL "
    "(Adam), then frozen; PI as stbo",
)
register_method(
    "hyperbo-ekl",
    HyperBO("ekl"),
    "HyperBO (Wang et al.): PretrainedPriorGP, prior pre-trained per split by EKL "
    "(L-BFGS), then frozen; PI as stbo",
)
register_method(
    "cmbo",
    ClusterMetaBOReadme(),
    "cm-BO as the README loop: ClusterMetaPriorGP on build_cluster_prior's defaults "
    "(silhouette C, W2, center prototypes, mixture covariance), target noise fitted "
    "(BoTorch's noise model in the prior's units), UCB beta = 3, posterior-probability "
    "weights",
)
register_method(
    "cmbo-raw-noise",
    ClusterMetaBOReadme(raw_unit_noise=True),
    "the README cm-BO loop with BoTorch's target noise model "
    "in raw outcome units (its queries depend on the outcomes' units)",
)
register_method(
    "rgpe-meta",
    RGPEMeta(),
    "peer: RGPE (Feurer et al. 2018), one default GP fitted per meta-training task "
    "(frozen), target GP fitted every iteration; UCB as stbo-ucb",
)
register_method(
    "rgpe-meta-skip",
    RGPEMeta(skip_queried=True),
    "peer: rgpe-meta searching only the pool points not yet queried (as every -skip "
    "method and the no-meta GP stbo-ucb-skip)",
)
register_method(
    "meta-task-mixture-ucb1-skip",
    MetaTaskMixtureMeta({"negative_scale_prior": 0.0, "target_alone_prior": 0.0}),
    "MetaTaskMixtureGP (one mixture component per meta-task or their average, "
    "positive scale and residual; no negated scales, no target-alone candidate), UCB "
    "beta = 1 on the pool points not yet queried",
)
register_method(
    "meta-task-mixture-defaults-ucb1-skip",
    MetaTaskMixtureMeta(),
    "MetaTaskMixtureGP with its defaults (meta-task-mixture-ucb1-skip with negated "
    "scales and the target alone as candidates), UCB beta = 1 on the pool points not "
    "yet queried",
)
register_method(
    "portfolio-skip",
    GreedyPortfolioMeta(),
    "peer: a greedy portfolio (Feurer et al. 2015) of the meta-training tasks' values "
    "on the pool, predicted by pretrain_prior's default prior conditioned on each "
    "task; queried in order, not adapted to the target's data",
)
register_method(
    "mtgp-meta",
    MultiTaskMeta(),
    "peer: BoTorch's MultiTaskGP (ICM), the meta-training tasks (30 random points "
    "each) and the target as tasks, its defaults, fitted every iteration; UCB as "
    "stbo-ucb",
)
register_method(
    "mtgp-meta-skip",
    MultiTaskMeta(skip_queried=True),
    "peer: mtgp-meta searching only the pool points not yet queried",
)
#: cm-BO variants ``cmbo-{prototype}-{distance}``; the distance is used both for
#: clustering and for the weight updates (the paper's JefClus_JefCMP, WssClus_WssCMP
#: and WssClus_WssCMP_Bary; the barycenter with Jeffreys is an extra).
for _prototype in ("center", "barycenter"):
    for _short, _distance, _words in (
        ("w2", "wasserstein", "2-Wasserstein"),
        ("jeffreys", "jeffreys", "Jeffreys"),
    ):
        register_method(
            f"cmbo-{_prototype}-{_short}",
            ClusterMetaBO(_prototype, _distance),
            f"cm-BO (Nguyen et al., Alg. 1): ClusterMetaPriorGP, meta-task GPs "
            f"clustered by the {_words} distance into {_prototype} prototypes, "
            "weights updated every iteration; GP-UCB with xi = 3",
        )
