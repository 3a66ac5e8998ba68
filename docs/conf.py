r"""Sphinx configuration of the API reference.

Build it as CI does (warnings are errors)::

    python -m sphinx -W --keep-going -b html docs /tmp/docs_html
"""

import pkgutil
import re
import sys
from pathlib import Path

# the benchmark harness is the repository's `benchmarks/`, outside the package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import benchmarks  # noqa: E402
import botorch_transfer  # noqa: E402

project = "botorch_transfer"
author = "botorch_transfer contributors"
copyright = "botorch_transfer contributors"
release = version = botorch_transfer.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

# Google-style docstrings (``Args:``, ``Returns:``, ``Example:``), as BoTorch's
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# ``Attributes:`` as fields of the class (a NamedTuple's fields are also members)
napoleon_use_ivar = True
# every public class and function of each module (also where the module's
# ``__all__`` lists fewer), in the order of the source
autodoc_default_options = {
    "undoc-members": True,
    "show-inheritance": True,
    "ignore-module-all": True,
    "member-order": "bysource",
}
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"
autodoc_inherit_docstrings = False

html_theme = "alabaster"
html_title = f"botorch_transfer {version}"
exclude_patterns = ["_build", "decisions.md"]


def _missing_modules() -> list[str]:
    r"""Public modules of the package that no page documents."""
    documented = set()
    for page in Path(__file__).parent.glob("*.rst"):
        text = page.read_text()
        documented |= set(re.findall(r"^\.\. automodule:: (\S+)", text, re.M))
    modules = {"botorch_transfer"} | {
        m.name
        for m in pkgutil.walk_packages(botorch_transfer.__path__, "botorch_transfer.")
        if not any(part.startswith("_") for part in m.name.split(".")[1:])
    }
    modules |= {"benchmarks", "benchmarks.__main__"} | {
        m.name for m in pkgutil.walk_packages(benchmarks.__path__, "benchmarks.")
    }
    return sorted(modules - documented)


def _check_coverage(app):
    from sphinx.util import logging

    for name in _missing_modules():
        logging.getLogger(__name__).warning(
            "module %s is not in the API reference: add an automodule to its page", name
        )


def setup(app):
    app.connect("builder-inited", _check_coverage)
