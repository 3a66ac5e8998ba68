r"""The import graph a reviewer can check: the library and the benchmark harness
import their own modules at module level only, without circles, and the library
never imports the harness."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGES = ("botorch_transfer", "benchmarks")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, ast.Module]:
    return {
        _module_name(path): ast.parse(path.read_text())
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def _imported(node: ast.AST, modules: dict) -> set[str]:
    r"""The project modules an import statement loads (``from p import m`` loads
    ``p.m`` where that is a module)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        names = [node.module]
        names += [f"{node.module}.{alias.name}" for alias in node.names]
    else:
        return set()
    return {name for name in names if name in modules}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, tree in modules.items():
        edges = set()
        for node in tree.body:  # module level only: function-level imports fail below
            if isinstance(node, ast.If):  # e.g. `if TYPE_CHECKING:` is not an import
                continue
            edges |= _imported(node, modules)
        graph[name] = edges - {name}
    return graph


def test_no_function_level_imports_of_project_modules():
    modules = _modules()
    found = [
        f"{name}:{inner.lineno}"
        for name, tree in modules.items()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for inner in ast.walk(node)
        if _imported(inner, modules)
    ]
    assert found == []


def test_no_import_circles():
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for child in sorted(graph[name]):
            # a package's __init__ imports its own modules: that is not a circle
            if name.startswith(child + "."):
                continue
            if state.get(child) == 1:
                pytest.fail("import circle: " + " -> ".join(path + [name, child]))
            if child not in state:
                visit(child, path + [name])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])


def test_the_library_never_imports_the_harness():
    graph = _graph()
    assert not {
        (name, child)
        for name, children in graph.items()
        if name.startswith("botorch_transfer")
        for child in children
        if child.startswith("benchmarks")
    }
