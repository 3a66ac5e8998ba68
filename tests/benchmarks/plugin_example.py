r"""A benchmark plugin: one ``register_method`` line adds a model to the comparison CLI
(used by ``test_runner.py`` with ``--plugin tests.benchmarks.plugin_example``)."""

import torch
from gpytorch.distributions import MultivariateNormal

from benchmarks.methods import register_method
from benchmarks.transfer_protocol import AcquisitionMethod
from botorch_transfer import DeltaBOModel
from botorch_transfer.models import TrainingData


class MeanTransferGP(DeltaBOModel):
    r"""Mean-transfer stack (MHGP): residual GP with the target noise only, variance
    from the residual GP only (see the custom-model tutorial)."""

    def _training_data(self, X, Y, Yvar):
        with torch.no_grad():
            residuals = Y - self.source_posterior.mean(X)
        return TrainingData(X, residuals, Yvar)  # the target noise only

    def _combine_posterior(self, gp_posterior, X):
        mean = gp_posterior.mean + self.source_posterior.mean(X)
        return MultivariateNormal(mean, gp_posterior.lazy_covariance_matrix)


register_method(
    "mhgp",
    AcquisitionMethod(  # UCB with the problem's beta
        lambda state, X, Y: MeanTransferGP(
            X,
            Y,
            train_Yvar=state.target_noise(Y),
            source=state.source,
            covar_module=state.problem.kernels["delta"](state.problem.dim),
        )
    ),
)
