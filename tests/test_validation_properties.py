r"""Property-based tests of input validation: ``TaskData`` and every model
constructor on random shapes, dtypes, NaN/inf and scales from 1e-9 to 1e9. Every
input either works (a finite posterior) or raises a clear error: a ``TypeError`` or
``ValueError`` whose message names the argument (in backticks)."""

import math
import re
import warnings

import pytest
import torch
from botorch.models.transforms import Standardize

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from botorch_transfer import (  # noqa: E402
    RGPE,
    ClusterMetaPriorGP,
    DeltaBOModel,
    DiffGP,
    EnvGP,
    PretrainedPriorGP,
    RandomizedNNEnsemble,
    TaskData,
    build_cluster_prior,
)
from tests.priors.hyperbo.test_objectives import make_prior  # noqa: E402

#: Few examples per property, no deadline: the machine is shared and slow.
PROPERTY = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: A clear error names an argument or field in backticks, e.g. `train_Y`.
NAMED = re.compile(r"`[A-Za-z_][A-Za-z_0-9\[\]'.]*`")
DTYPES = (torch.float64, torch.float32)


@st.composite
def tensor(draw, shape, dtype=None, bad=None):
    r"""A random tensor of ``shape`` at a scale from 1e-9 to 1e9 (of either sign,
    off 0 by as much), with one ``bad`` entry (NaN/inf) if given."""
    dtype = dtype or draw(st.sampled_from(DTYPES))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    scale = 10.0 ** draw(st.integers(-9, 9))
    offset = draw(st.sampled_from((0.0, scale, -1e3 * scale)))
    value = offset + scale * torch.rand(shape, generator=gen, dtype=torch.float64)
    value = value.to(dtype)
    if bad is not None and value.numel() > 0:
        value.view(-1)[draw(st.integers(0, value.numel() - 1))] = bad
    return value


#: At most one fault per example (``None``: none), so that half work.
FAULTS = (None,) * 7 + ("nan", "inf", "rows", "shape", "dtype", "yvar", "yvar_shape")


@st.composite
def target(draw, d=None):
    r"""``(train_X, train_Y, train_Yvar)`` with at most one fault: a NaN/inf, the
    wrong number of rows or shape of ``Y``, a dtype mix, a negative or misshapen
    ``train_Yvar``."""
    fault = draw(st.sampled_from(FAULTS))
    n = draw(st.sampled_from((0, 1, 4)))
    d = d or draw(st.integers(1, 3))
    dtype = draw(st.sampled_from(DTYPES))
    bad = {"nan": math.nan, "inf": draw(st.sampled_from((math.inf, -math.inf)))}
    X = draw(tensor((n, d), dtype, bad.get(fault) if draw(st.booleans()) else None))
    y_shape = {"rows": (n + 1, 1), "shape": draw(st.sampled_from(((n,), (n, 2))))}
    other = torch.float32 if dtype == torch.float64 else torch.float64
    Y = draw(
        tensor(
            y_shape.get(fault, (n, 1)),
            other if fault == "dtype" else dtype,
            bad.get(fault) if X.isfinite().all() else None,
        )
    )
    Yvar = None
    if fault in ("yvar", "yvar_shape") or draw(st.booleans()):
        rows = n + 1 if fault == "yvar_shape" else n
        Yvar = torch.full((rows, 1), -0.1 if fault == "yvar" else 0.1, dtype=dtype)
        Yvar = Yvar * Y.abs().max().clamp_min(1e-12).to(dtype) if n else Yvar
    return X, Y, Yvar


@st.composite
def source(draw, d):
    r"""A source's ``(X, Y)``: 1 or 5 points, sometimes of another ``d`` or dtype."""
    fault = draw(st.sampled_from((None,) * 4 + ("d", "dtype")))
    n = draw(st.sampled_from((1, 5)))
    dtype = torch.float32 if fault == "dtype" else torch.float64
    X = draw(tensor((n, d + 1 if fault == "d" else d), dtype))
    return X, draw(tensor((n, 1), dtype))


def check_clear(error: Exception) -> None:
    assert isinstance(error, (TypeError, ValueError)), (
        f"not a TypeError/ValueError: {type(error).__name__}: {error}"
    )
    assert NAMED.search(str(error)), f"names no argument: {error}"


def works_or_fails_clearly(build, query_d: int | None = None) -> None:
    r"""``build()`` either returns a model with a finite posterior at a query
    point, or raises a clear error."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # warnings are the point elsewhere
            model = build()
    except Exception as error:  # noqa: BLE001 - the property is about any error
        check_clear(error)
        return
    X = model.target_X if hasattr(model, "target_X") else model.train_X
    d = query_d or X.shape[-1]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        posterior = model.posterior(torch.full((1, d), 0.5, dtype=X.dtype))
    assert torch.isfinite(posterior.mean).all()
    assert torch.isfinite(posterior.variance).all()
    assert (posterior.variance >= 0).all()


@PROPERTY
@given(
    shape=st.sampled_from(((4, 2), (0, 2), (4,), (4, 1, 2))),
    y_shape=st.sampled_from(((4, 1), (4,), (3, 1), (4, 2))),
    dtypes=st.tuples(st.sampled_from(DTYPES), st.sampled_from(DTYPES)),
    data=st.data(),
)
def test_task_data_works_or_fails_clearly(shape, y_shape, dtypes, data):
    bad = data.draw(st.sampled_from((None, None, math.nan, math.inf)))
    X = data.draw(tensor(shape, dtypes[0], bad))
    Y = data.draw(tensor(y_shape, dtypes[1]))
    Yvar = data.draw(st.sampled_from((None, "same", "negative")))
    if Yvar is not None:
        Yvar = Y.abs() if Yvar == "same" else -Y.abs() - 1
    try:
        task = TaskData(X, Y, Yvar)
    except (TypeError, ValueError) as error:
        assert NAMED.search(str(error)), f"names no field: {error}"
        return
    assert task.X.dim() == 2 and task.Y.shape == (task.n, 1)
    assert torch.isfinite(task.X).all() and torch.isfinite(task.Y).all()
    assert task.Yvar is None or (task.Yvar >= 0).all()


SOURCE_MODELS = {
    "DeltaBOModel": lambda X, Y, Yvar, s, ot: DeltaBOModel(
        X, Y, Yvar, source=s, outcome_transform=ot, progress=False
    ),
    "EnvGP": lambda X, Y, Yvar, s, ot: EnvGP(
        X, Y, Yvar, source=s, outcome_transform=ot
    ),
    "DiffGP": lambda X, Y, Yvar, s, ot: DiffGP(
        X, Y, Yvar, source=s, outcome_transform=ot
    ),
    "RGPE": lambda X, Y, Yvar, s, ot: RGPE(
        X, Y, Yvar, source=s, outcome_transform=ot, num_samples=16, progress=False
    ),
}


@pytest.mark.parametrize("name", sorted(SOURCE_MODELS))
@PROPERTY
@given(data=st.data())
def test_source_conditioned_models_work_or_fail_clearly(name, data):
    X, Y, Yvar = data.draw(target())
    S_X, S_Y = data.draw(source(X.shape[-1]))
    try:
        task = TaskData(S_X, S_Y)
    except (TypeError, ValueError) as error:
        check_clear(error)
        return
    standardize = data.draw(st.booleans())
    works_or_fails_clearly(
        lambda: SOURCE_MODELS[name](
            X, Y, Yvar, task, Standardize(m=1) if standardize else None
        )
    )


@PROPERTY
@given(data=st.data())
def test_pretrained_prior_gp_works_or_fails_clearly(data):
    X, Y, Yvar = data.draw(target(d=data.draw(st.sampled_from((2, 2, 3)))))
    prior = make_prior(dtype=data.draw(st.sampled_from(DTYPES)))
    works_or_fails_clearly(lambda: PretrainedPriorGP(X, Y, Yvar, prior=prior))


@pytest.fixture(scope="module")
def cluster_prior():
    gen = torch.Generator().manual_seed(0)
    tasks = []
    for shift in (0.0, 0.5):
        X = torch.rand(6, 2, generator=gen, dtype=torch.float64)
        tasks.append(TaskData(X, torch.sin(4 * X + shift).sum(-1, keepdim=True)))
    return build_cluster_prior(tasks, n_clusters=1, n_index_points=8, n_init=1)


@PROPERTY
@given(data=st.data())
def test_cluster_meta_prior_gp_works_or_fails_clearly(cluster_prior, data):
    X, Y, Yvar = data.draw(target(d=data.draw(st.sampled_from((2, 2, 3)))))
    standardize = data.draw(st.booleans())
    works_or_fails_clearly(
        lambda: ClusterMetaPriorGP(
            X,
            Y,
            Yvar,
            prior=cluster_prior,
            outcome_transform=Standardize(m=1) if standardize else None,
        )
    )


@PROPERTY
@given(data=st.data())
def test_randomized_nn_ensemble_works_or_fails_clearly(data):
    X, Y, Yvar = data.draw(target())
    works_or_fails_clearly(
        lambda: RandomizedNNEnsemble(
            X, Y, Yvar, num_members=2, hidden=(4,), num_steps=3, seed=0
        )
    )
