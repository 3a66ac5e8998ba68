r"""A benchmark plugin: one ``register_method`` line adds a model to the comparison CLI
(used by ``test_runner.py`` with ``--plugin tests.benchmarks.plugin_example``)."""

import torch

from botorch_transfer import DeltaBOModel
from botorch_transfer.benchmarks.methods import register_method
from botorch_transfer.benchmarks.transfer_methods import AcquisitionMethod


class MeanTransferGP(DeltaBOModel):
    r"""Mean-transfer stack (MHGP): residual GP with the target noise only, variance
    from the residual GP only (see the custom-model tutorial)."""

    def _set_target_data(self, X, Y, Yvar):
        self._store_target_data(X, Y, Yvar)
        with torch.no_grad():
            residuals = Y - self.source_posterior.mean(X)
        self.likelihood.noise_covar.noise = Yvar
        self._set_raw_train_inputs(X, residuals)

    def _source_terms(self, X):
        return self.source_posterior.mean(X), None


register_method(
    "mhgp",
    AcquisitionMethod(  # UCB with the problem's beta
        lambda state, X, Y: MeanTransferGP(
            X,
            Y,
            train_Yvar=state.target_noise(Y),
            source=state.source,
            delta_covar_module=state.problem.kernels["delta"](state.problem.dim),
        )
    ),
)
