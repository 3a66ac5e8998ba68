r"""Each benchmark test sees the built-in methods only: what a test's plugin
registers (in this process) is removed after it, with the plugin module, so the
next test that imports the plugin registers its methods again."""

import sys

import pytest


@pytest.fixture(autouse=True)
def _builtin_methods_only(monkeypatch):
    from benchmarks import methods

    modules = set(sys.modules)
    monkeypatch.setattr(methods, "_REGISTRY", dict(methods._REGISTRY))
    yield
    for name in set(sys.modules) - modules:
        if name.startswith("tests.benchmarks.") and name.endswith("plugin"):
            del sys.modules[name]
