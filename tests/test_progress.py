r"""Long work shows tqdm progress on stderr; ``progress=False``, a
``progress_bars(False)`` block and quick work print nothing."""

import pytest
import torch
from tqdm.notebook import tqdm as notebook_tqdm

from botorch_transfer import (
    RGPE,
    DeltaBOModel,
    TaskData,
    build_cluster_prior,
    pretrain_prior,
    progress,
)
from botorch_transfer.models.frozen_source import frozen_source_posterior

F64 = torch.float64


def tasks(n_tasks=3, n=8):
    gen = torch.Generator().manual_seed(0)
    data = []
    for i in range(n_tasks):
        X = torch.rand(n, 2, generator=gen, dtype=F64)
        data.append(TaskData(X, torch.sin(3 * X[:, :1] + i) + X[:, 1:]))
    return data


def xy(task):
    return task.X, task.Y


def one():
    return torch.ones((), dtype=F64)


def in_block(build):
    r"""``build()`` with the package's bars on or off (models take no flag)."""

    def run(show):
        with progress.progress_bars(show):
            return build()

    return run


# each long computation and the label of its bar
CASES = {
    "build_cluster_prior": (
        lambda p: build_cluster_prior(
            tasks(2), n_clusters=1, n_index_points=8, n_init=1, progress=p
        ),
        "cm-BO stage 1",
    ),
    "pretrain_prior": (
        lambda p: pretrain_prior(tasks(), num_steps=3, eval_every=1, progress=p),
        "pretrain",
    ),
    "frozen_source_posterior": (
        lambda p: frozen_source_posterior(tasks(1)[0], one(), 0 * one(), progress=p),
        "source GP fit",
    ),
    "DeltaBOModel": (
        in_block(lambda: DeltaBOModel(*xy(tasks(1, 3)[0]), source=tasks(1)[0])),
        "pivoted Cholesky",
    ),
    "RGPE": (
        in_block(lambda: RGPE(*xy(tasks(1, 3)[0]), source=tasks(2))),
        "pivoted Cholesky",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_progress_goes_to_stderr_and_can_be_turned_off(case, capsys, monkeypatch):
    run, label = CASES[case]
    monkeypatch.setattr(progress, "PROGRESS_DELAY", 0.0)  # show even quick work
    run(False)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""
    run(True)
    captured = capsys.readouterr()
    assert label in captured.err and captured.out == ""


def test_a_block_turns_off_the_bars_of_functions_too(capsys, monkeypatch):
    monkeypatch.setattr(progress, "PROGRESS_DELAY", 0.0)
    with progress.progress_bars(False):
        pretrain_prior(tasks(), num_steps=3, eval_every=1)
        with progress.progress_bars(True):  # an inner block overrides
            frozen_source_posterior(tasks(1)[0], one(), 0 * one())
    captured = capsys.readouterr()
    assert "pretrain" not in captured.err and "source GP fit" in captured.err


@pytest.mark.parametrize("model_class", [DeltaBOModel, RGPE])
def test_the_old_progress_flag_warns_and_acts_as_the_block(
    model_class, capsys, monkeypatch
):
    monkeypatch.setattr(progress, "PROGRESS_DELAY", 0.0)
    with pytest.warns(DeprecationWarning, match="`progress` of .* is deprecated"):
        model_class(*xy(tasks(1, 3)[0]), source=tasks(2), progress=False)
    assert capsys.readouterr().err == ""


def test_quick_work_prints_nothing(capsys, monkeypatch):
    # a bar appears only after PROGRESS_DELAY seconds of work
    monkeypatch.setattr(progress, "PROGRESS_DELAY", 60.0)
    DeltaBOModel(*xy(tasks(1, 3)[0]), source=tasks(1)[0])
    assert capsys.readouterr().err == ""


def test_a_bar_written_to_a_log_updates_rarely(monkeypatch):
    import io
    import time

    monkeypatch.setattr(progress, "PROGRESS_DELAY", 0.0)

    def lines_written(file):
        bar = progress.progress_bar(total=50, file=file, desc="work")
        for _ in range(50):
            time.sleep(0.01)
            bar.update(1)
        bar.close()
        return file.getvalue().count("\r")

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    # a terminal refreshes every 0.1 s; a log gets the first and the final state
    assert lines_written(io.StringIO()) <= 3
    assert lines_written(Terminal()) >= 2


def test_an_early_stop_completes_the_pretraining_bar(capsys, monkeypatch):
    monkeypatch.setattr(progress, "PROGRESS_DELAY", 0.0)
    prior = pretrain_prior(
        tasks(6), objective="nll", num_steps=500, eval_every=1, patience=1, lr=0.5
    )
    steps = prior.training_history[-1]["step"]
    assert steps < 500  # stopped early
    final = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "100%" in final and f"{steps}/{steps}" in final


class RecordingNotebookBar(notebook_tqdm):
    r"""A notebook bar class that records its instances and calls (no widgets)."""

    instances: list = []

    def __init__(self, iterable=None, total=None, initial=0, **kwargs):
        self.total, self.n, self.kwargs, self.calls = total, initial, kwargs, []
        RecordingNotebookBar.instances.append(self)

    def update(self, n=1):
        self.n += n

    def set_postfix(self, ordered_dict=None, refresh=True, **kwargs):
        self.calls.append(("set_postfix", dict(ordered_dict or {}, **kwargs)))

    def refresh(self, *args, **kwargs):
        self.calls.append(("refresh",))

    def close(self):
        self.calls.append(("close",))

    def __del__(self):
        pass


@pytest.fixture
def notebook(monkeypatch):
    RecordingNotebookBar.instances = []
    monkeypatch.setattr(progress, "tqdm", RecordingNotebookBar)
    return RecordingNotebookBar.instances


def test_quick_work_in_a_notebook_creates_no_widget(notebook, monkeypatch):
    monkeypatch.setattr(progress, "PROGRESS_DELAY", 60.0)
    bar = progress.progress_bar(range(4), desc="quick")
    assert isinstance(bar, progress.DeferredNotebookBar)
    assert list(bar) == [0, 1, 2, 3] and bar.n == 4 and bar.total == 4
    with progress.progress_bar(total=10, desc="by hand") as bar:
        bar.update(3)
        bar.set_postfix(loss="1.0")
        bar.total = bar.n
    assert bar.total == 3
    # the models' own bars too: a source posterior built in a BO loop
    DeltaBOModel(*xy(tasks(1, 3)[0]), source=tasks(1)[0])
    assert notebook == []


def test_long_work_in_a_notebook_hands_its_count_to_a_widget(notebook, monkeypatch):
    monkeypatch.setattr(progress, "PROGRESS_DELAY", 0.0)
    with progress.progress_bar(total=10, desc="long", unit="step") as bar:
        bar.set_postfix(loss="2.0")
        bar.update(2)  # due: the widget bar starts at the count so far
        (widget,) = notebook
        assert (widget.n, widget.total) == (2, 10)
        assert widget.kwargs == {"desc": "long", "unit": "step"}
        assert widget.calls == [("set_postfix", {"loss": "2.0"})]
        bar.update(3)
        bar.set_postfix({"loss": "1.5"})
        bar.total = 5  # an early stop
        assert (widget.n, widget.total) == (5, 5)
    assert widget.calls[1:] == [
        ("set_postfix", {"loss": "1.5"}),
        ("refresh",),
        ("close",),
    ]
    assert list(progress.progress_bar(range(3))) == [0, 1, 2]
    assert notebook[1].n == 3 and notebook[1].calls == [("close",)]
    # turned off: tqdm's own disabled bar (no deferral needed)
    progress.progress_bar(range(3), progress=False)
    assert notebook[2].kwargs["disable"] is True
