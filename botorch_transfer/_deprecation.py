r"""Old import paths that keep working for one release, with a
``DeprecationWarning``."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def moved_names(module: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    r"""A module-level ``__getattr__`` (PEP 562) for names that moved elsewhere.

    Args:
        module: The module that used to define the names (``__name__``).
        names: Each moved name and the module that defines it now.

    Returns:
        The ``__getattr__`` to assign in ``module``: getting a moved name warns with a
        ``DeprecationWarning`` naming the new module and returns the object there
        (imported on first use, so the old module does not import the new one at
        import time); any other name raises ``AttributeError``.
    """

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"`{module}.{name}` is deprecated and will be removed in the next "
            f"release: import it from `{names[name]}`.",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(names[name]), name)

    return __getattr__


def renamed_keywords(
    owner: str,
    given: Mapping[str, Any],
    renames: Mapping[str, str],
    stacklevel: int = 3,
) -> dict[str, Any]:
    r"""The values of renamed keyword arguments, by their new names.

    Args:
        owner: The callable that takes them (for the messages).
        given: The keyword arguments not in the signature (a ``**kwargs``).
        renames: Each old name and its new name.
        stacklevel: The warnings' ``stacklevel`` (3: the caller of the function
            that calls this one).

    Returns:
        ``{new name: value}`` for each old name in ``given``, each with a
        ``DeprecationWarning``.

    Raises:
        TypeError: For a keyword in ``given`` that is no old name.
    """
    unknown = sorted(set(given) - set(renames))
    if unknown:
        raise TypeError(f"{owner}() got unexpected keyword arguments {unknown}.")
    values = {}
    for old, value in given.items():
        new = renames[old]
        warnings.warn(
            f"`{old}` is deprecated and will be removed in the next release: pass "
            f"`{new}` to {owner}.",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        values[new] = value
    return values
