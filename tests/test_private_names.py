r"""The package imports no private name of BoTorch, GPyTorch or linear_operator,
except GPyTorch's base of Gaussian likelihoods with a custom noise model (exported
by ``gpytorch.likelihoods``, and subclassed by BoTorch's own such likelihoods)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "botorch_transfer"
LIBRARIES = ("botorch", "gpytorch", "linear_operator")
ALLOWED = {("gpytorch.likelihoods", "_GaussianLikelihoodBase")}


def private_imports() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.split(".")[0] not in LIBRARIES:
                    continue
                parts = node.module.split(".")
                names = [alias.name for alias in node.names]
                for name in names:
                    private = name.startswith("_") or any(
                        p.startswith("_") for p in parts
                    )
                    if private and (node.module, name) not in ALLOWED:
                        found.append(f"{path.name}: from {node.module} import {name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] in LIBRARIES and any(p.startswith("_") for p in parts):
                        found.append(f"{path.name}: import {alias.name}")
    return found


def test_no_private_names_of_botorch_gpytorch_or_linear_operator_are_imported():
    assert private_imports() == []
