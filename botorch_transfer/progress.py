r"""Progress bars for the package's long computations.

Work that can run for minutes shows a `tqdm <https://tqdm.github.io>`_ progress bar
(on stderr; a widget in notebooks): Stage 1 of
:func:`~botorch_transfer.priors.cmbo.build_cluster_prior` (one GP fit per meta-task),
:func:`~botorch_transfer.priors.hyperbo.pretrain_prior`, and building a large source
posterior (fitting the source GP, the pivoted Cholesky factor), e.g. inside
``DeltaBOModel`` or ``RGPE``. ``with progress_bars(False):`` turns the bars off
within a block (:func:`progress_bars`); a function's ``progress=False`` turns its own
off (tqdm's ``TQDM_DISABLE=1`` environment variable turns them all off).

A bar appears only once its work has run for :data:`PROGRESS_DELAY` seconds, so quick
calls (small sources, a few meta-tasks, BO loops that rebuild models) print nothing.
In a notebook the bar's widget is not even created before then
(:class:`DeferredNotebookBar`): tqdm's notebook bar waits ``delay`` seconds to display
its widget but creates it at once, and a notebook saves every widget created.
Written to a file or pipe rather than a terminal, a bar updates every
:data:`LOG_UPDATE_INTERVAL` seconds, so logs stay short.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import time
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

from botorch.fit import fit_gpytorch_mll
from gpytorch.mlls import MarginalLogLikelihood
from tqdm.auto import tqdm

from botorch_transfer._deprecation import user_stacklevel

#: Seconds of work before a progress bar is shown.
PROGRESS_DELAY = 2.0
#: Seconds between updates of a bar written to a file or pipe (a log), where every
#: refresh is kept: tqdm's default (0.1 s) wrote megabytes of bars into CI logs.
LOG_UPDATE_INTERVAL = 30.0

_SHOWN: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "botorch_transfer_progress_bars", default=True
)


@contextlib.contextmanager
def progress_bars(show: bool = True) -> Iterator[None]:
    r"""Show (``True``) or hide (``False``) the package's progress bars within the
    block, as ``gpytorch.settings`` flags do (the setting of the current thread or
    task; nested blocks override outer ones).

    Example:
        >>> with progress_bars(False):
        ...     model = DeltaBOModel(X, Y, source=TaskData(X_src, Y_src))
    """
    token = _SHOWN.set(bool(show))
    try:
        yield
    finally:
        _SHOWN.reset(token)


def progress_bars_shown() -> bool:
    r"""Whether progress bars are shown here (see :func:`progress_bars`)."""
    return _SHOWN.get()


def progress_argument(owner: str, given: dict[str, Any]) -> Any:
    r"""The block a constructor runs in for its deprecated ``progress`` argument,
    taken out of ``given`` (its ``**kwargs``): :func:`progress_bars` of its value,
    with a ``DeprecationWarning``, or a block that changes nothing."""
    if "progress" not in given:
        return contextlib.nullcontext()
    show = given.pop("progress")
    warnings.warn(
        f"`progress` of {owner} is deprecated and will be removed in the next "
        "release: build the model inside `with botorch_transfer.progress."
        "progress_bars(False):`.",
        DeprecationWarning,
        stacklevel=user_stacklevel(),
    )
    return progress_bars(bool(show))


def _is_notebook_bar(bar_class: type) -> bool:
    r"""Whether ``bar_class`` draws ipywidgets (``tqdm.auto`` in a notebook)."""
    try:
        from tqdm.notebook import tqdm as notebook_tqdm
    except ImportError:  # pragma: no cover - tqdm without its notebook module
        return False
    return issubclass(bar_class, notebook_tqdm)


def _writes_to_a_log(file: Any) -> bool:
    r"""Whether a text bar on ``file`` ends up in a log: not a terminal (notebook
    bars are widgets, see :class:`DeferredNotebookBar`)."""
    isatty = getattr(file, "isatty", None)
    try:
        return not (callable(isatty) and isatty())
    except ValueError:  # a closed stream
        return True


def progress_bar(
    iterable: Iterable | None = None, *, progress: bool = True, **kwargs: Any
) -> tqdm | DeferredNotebookBar:
    r"""A tqdm bar shown after :data:`PROGRESS_DELAY` seconds, or a disabled one (in
    a notebook, a :class:`DeferredNotebookBar`).

    Args:
        iterable: What to iterate over (``None`` for a bar updated by hand).
        progress: Show the bar; ``False`` disables it (no output, no overhead beyond
            the iteration).
        kwargs: Passed to ``tqdm`` (``desc``, ``total``, ``unit``, ...).

    Returns:
        The bar.
    """
    if not (progress and progress_bars_shown()):
        kwargs["disable"] = True  # else tqdm's defaults (TQDM_DISABLE) decide
    elif _is_notebook_bar(tqdm):
        return DeferredNotebookBar(tqdm, iterable, **kwargs)
    elif _writes_to_a_log(kwargs.get("file", sys.stderr)):
        kwargs.setdefault("mininterval", LOG_UPDATE_INTERVAL)
    return tqdm(iterable, delay=PROGRESS_DELAY, **kwargs)


class DeferredNotebookBar:
    r"""A notebook progress bar whose widget is created only once its work has run
    for :data:`PROGRESS_DELAY` seconds.

    It counts like a tqdm bar (``update``, iteration, ``n``, ``total``,
    ``set_postfix``, ``close``, a context manager) and hands the count to a
    ``bar_class`` bar when that is due. Quick work (a BO loop rebuilding a model
    every iteration) thus creates no widgets, which a notebook would otherwise keep
    in its saved widget state (a tutorial grew to 11 MB with 960 of them).

    Args:
        bar_class: The notebook tqdm class to create.
        iterable: What to iterate over (``None`` for a bar updated by hand).
        kwargs: Passed to ``bar_class`` (``desc``, ``total``, ``unit``, ...).
    """

    def __init__(
        self, bar_class: type, iterable: Iterable | None = None, **kwargs: Any
    ) -> None:
        self._bar_class, self._iterable = bar_class, iterable
        total = kwargs.pop("total", None)
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self._total, self._kwargs = total, kwargs
        self._postfix: dict[str, Any] | None = None
        self._start = time.monotonic()
        self.bar: Any = None  # the widget bar, once created
        self.n = 0

    @property
    def total(self) -> int | float | None:
        return self._total

    @total.setter
    def total(self, value: int | float | None) -> None:
        self._total = value
        if self.bar is not None:
            self.bar.total = value
            self.bar.refresh()

    def update(self, n: int | float = 1) -> None:
        r"""Count ``n`` more steps; create the widget bar once it is due."""
        self.n += n
        if self.bar is not None:
            self.bar.update(n)
        elif time.monotonic() - self._start >= PROGRESS_DELAY:
            self.bar = self._bar_class(
                total=self._total, initial=self.n, **self._kwargs
            )
            if self._postfix:
                self.bar.set_postfix(self._postfix)

    def set_postfix(
        self, ordered_dict: dict[str, Any] | None = None, refresh: bool = True, **kw
    ) -> None:
        r"""As tqdm's ``set_postfix`` (kept until the widget bar exists)."""
        self._postfix = {**(ordered_dict or {}), **kw}
        if self.bar is not None:
            self.bar.set_postfix(self._postfix, refresh=refresh)

    def __iter__(self) -> Iterator:
        for item in self._iterable:
            yield item
            self.update(1)
        self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> DeferredNotebookBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


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
    if not (progress and progress_bars_shown()):
        return fit_gpytorch_mll(mll)
    with progress_bar(progress=progress, desc=desc, unit="step") as bar:

        def callback(parameters: Any, result: Any) -> None:
            bar.set_postfix(loss=f"{float(result.fval):.4g}", refresh=False)
            bar.update(1)

        return fit_gpytorch_mll(mll, optimizer_kwargs={"callback": callback})
