r"""Long work shows tqdm progress on stderr; ``progress=False`` and quick work print
nothing."""

import pytest
import torch

from botorch_transfer import (
    RGPE,
    DeltaBOModel,
    TaskData,
    build_cluster_prior,
    pretrain_prior,
    progress,
)
from botorch_transfer.models.source_posterior import frozen_source_posterior

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
        lambda p: DeltaBOModel(*xy(tasks(1, 3)[0]), source=tasks(1)[0], progress=p),
        "pivoted Cholesky",
    ),
    "RGPE": (
        lambda p: RGPE(*xy(tasks(1, 3)[0]), source=tasks(2), progress=p),
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
