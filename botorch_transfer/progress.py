r"""Progress bars for the package's long computations.

Work that can run for minutes shows a `tqdm <https://tqdm.github.io>`_ progress bar
(on stderr; a widget in notebooks): Stage 1 of
:func:`~botorch_transfer.clustering.build_cluster_prior` (one GP fit per meta-task),
:func:`~botorch_transfer.pretraining.pretrain_prior`, and building a large source
posterior (fitting the source GP, the pivoted Cholesky factor), e.g. inside
``DeltaBOModel`` or ``RGPE``. Every such function and model takes
``progress: bool = True``; ``progress=False`` turns its bars off (tqdm's
``TQDM_DISABLE=1`` environment variable turns them all off).

A bar appears only once its work has run for :data:`PROGRESS_DELAY` seconds, so quick
calls (small sources, a few meta-tasks, BO loops that rebuild models) print nothing.
Written to a file or pipe rather than a terminal, a bar updates every
:data:`LOG_UPDATE_INTERVAL` seconds, so logs stay short.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from botorch.fit import fit_gpytorch_mll
from gpytorch.mlls import MarginalLogLikelihood
from tqdm.auto import tqdm

#: Seconds of work before a progress bar is shown.
PROGRESS_DELAY = 2.0
#: Seconds between updates of a bar written to a file or pipe (a log), where every
#: refresh is kept: tqdm's default (0.1 s) wrote megabytes of bars into CI logs.
LOG_UPDATE_INTERVAL = 30.0


def _writes_to_a_log(file: Any) -> bool:
    r"""Whether a bar on ``file`` ends up in a log: not a terminal, not a notebook
    widget."""
    try:
        from tqdm.notebook import tqdm as notebook_tqdm

        if issubclass(tqdm, notebook_tqdm):
            return False
    except ImportError:  # pragma: no cover - tqdm without its notebook module
        pass
    isatty = getattr(file, "isatty", None)
    try:
        return not (callable(isatty) and isatty())
    except ValueError:  # a closed stream
        return True


def progress_bar(
    iterable: Iterable | None = None, *, progress: bool = True, **kwargs: Any
) -> tqdm:
    r"""A tqdm bar shown after :data:`PROGRESS_DELAY` seconds, or a disabled one.

    Args:
        iterable: What to iterate over (``None`` for a bar updated by hand).
        progress: Show the bar; ``False`` disables it (no output, no overhead beyond
            the iteration).
        kwargs: Passed to ``tqdm`` (``desc``, ``total``, ``unit``, ...).

    Returns:
        The bar.
    """
    if not progress:
        kwargs["disable"] = True  # else tqdm's defaults (TQDM_DISABLE) decide
    elif _writes_to_a_log(kwargs.get("file", sys.stderr)):
        kwargs.setdefault("mininterval", LOG_UPDATE_INTERVAL)
    return tqdm(iterable, delay=PROGRESS_DELAY, **kwargs)


def fit_mll_with_progress(
    mll: MarginalLogLikelihood, progress: bool = True, desc: str = "GP fit"
) -> MarginalLogLikelihood:
    r"""``fit_gpytorch_mll(mll)``, counting optimizer steps on a progress bar.

    The number of steps is not known in advance: the bar counts them and shows the
    current loss.

    Args:
        mll: The marginal log likelihood to fit.
        progress: Show the bar (see :func:`progress_bar`).
        desc: The bar's label.

    Returns:
        The fitted ``mll``.
    """
    if not progress:
        return fit_gpytorch_mll(mll)
    with progress_bar(progress=progress, desc=desc, unit="step") as bar:

        def callback(parameters: Any, result: Any) -> None:
            bar.set_postfix(loss=f"{float(result.fval):.4g}", refresh=False)
            bar.update(1)

        return fit_gpytorch_mll(mll, optimizer_kwargs={"callback": callback})
