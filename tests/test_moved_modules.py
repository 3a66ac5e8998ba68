r"""Modules that moved keep their old import paths for one release: every name of
the new module is there, with a ``DeprecationWarning`` naming the new home."""

import importlib

import pytest

MOVED = {
    "botorch_transfer.models.datasets": "botorch_transfer.models.utils.datasets",
    "botorch_transfer.models.guard_scoring": "botorch_transfer.models.utils.scoring",
    "botorch_transfer.models.loo": "botorch_transfer.models.utils.loo",
    "botorch_transfer.models.low_rank": "botorch_transfer.models.utils.low_rank",
    "botorch_transfer.models.source_skill": (
        "botorch_transfer.models.utils.source_skill"
    ),
    "botorch_transfer.models.sources": "botorch_transfer.models.utils.sources",
    "botorch_transfer.priors_io": "botorch_transfer.priors.io",
    "botorch_transfer.clustering.stage1": "botorch_transfer.priors.meta_task_gps",
    **{
        f"botorch_transfer.clustering.{name}": f"botorch_transfer.priors.{name}"
        for name in ("kernels", "divergences", "kmeans")
    },
    **{
        f"botorch_transfer.clustering.{name}": f"botorch_transfer.priors.cmbo.{name}"
        for name in ("barycenter", "build", "prior", "weights")
    },
    **{
        f"botorch_transfer.pretraining.{name}": (
            f"botorch_transfer.priors.hyperbo.{name}"
        )
        for name in (
            "empirical",
            "lbfgs",
            "mixture",
            "objectives",
            "posterior_empirical",
            "pretrain",
            "prior",
        )
    },
}


@pytest.mark.parametrize("old, new", MOVED.items())
def test_an_old_module_path_gives_the_new_modules_names_with_a_warning(old, new):
    old_module, new_module = importlib.import_module(old), importlib.import_module(new)
    public = [
        name
        for name, value in vars(new_module).items()
        if not name.startswith("_")
        and getattr(value, "__module__", None) == new_module.__name__
    ]
    assert public  # the moved module defines something
    for name in public:
        with pytest.warns(DeprecationWarning, match=f"import `{name}` from `{new}`"):
            assert getattr(old_module, name) is getattr(new_module, name)
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        old_module.nothing_here  # noqa: B018


def test_an_old_import_statement_still_works():
    with pytest.warns(DeprecationWarning, match="botorch_transfer.models.utils.loo"):
        from botorch_transfer.models.loo import exact_loo_posterior
    from botorch_transfer.models.utils.loo import exact_loo_posterior as moved

    assert exact_loo_posterior is moved


@pytest.mark.parametrize(
    "name", ["DEFAULT_SOURCE_OFFSET_SD", "RESIDUAL_COVARIANCES", "SOURCE_MAPS"]
)
def test_the_source_map_constants_moved_beside_the_maps(name):
    from botorch_transfer.models import delta, source_options

    with pytest.warns(DeprecationWarning, match="botorch_transfer.models.source_opt"):
        assert getattr(delta, name) is getattr(source_options, name)


@pytest.mark.parametrize(
    "old, new",
    [
        ("botorch_transfer.clustering", "botorch_transfer.priors"),
        ("botorch_transfer.pretraining", "botorch_transfer.priors.hyperbo"),
    ],
)
def test_an_old_package_gives_every_name_of_its_new_home_with_a_warning(old, new):
    old_package, new_package = (
        importlib.import_module(old),
        importlib.import_module(new),
    )
    assert new_package.__all__
    for name in new_package.__all__:
        with pytest.warns(DeprecationWarning, match=f"import `{name}` from `{new}`"):
            assert getattr(old_package, name) is getattr(new_package, name)
