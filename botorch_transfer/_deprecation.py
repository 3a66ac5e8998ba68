r"""Old import paths that keep working for one release, with a
``DeprecationWarning``."""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stacklevel() -> int:
    r"""The ``stacklevel`` at which a ``warnings.warn`` called right after this
    points at the first frame outside this package: the user's line, also when the
    call passes through a subclass's ``super().__init__`` or another model of the
    package."""
    level, frame = 1, sys._getframe(1)  # the frame that calls warnings.warn
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        _PACKAGE_DIR
    ):
        level, frame = level + 1, frame.f_back
    return level


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
            stacklevel=user_stacklevel(),
        )
        return getattr(importlib.import_module(names[name]), name)

    return __getattr__


def renamed_keywords(
    owner: str,
    given: Mapping[str, Any],
    renames: Mapping[str, str],
) -> dict[str, Any]:
    r"""The values of renamed keyword arguments, by their new names.

    Args:
        owner: The callable that takes them (for the messages).
        given: The keyword arguments not in the signature (a ``**kwargs``).
        renames: Each old name and its new name.

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
            stacklevel=user_stacklevel(),
        )
        values[new] = value
    return values


def options_argument(
    owner: str,
    argument: str,
    value: Any,
    options_class: type,
    given: dict[str, Any],
) -> Any:
    r"""An options argument, or the options its deprecated field keywords fill.

    Args:
        owner: The constructor's class name (for the messages).
        argument: The options argument's name (e.g. ``"ranking"``).
        value: Its value: an ``options_class`` or ``None`` (the defaults).
        options_class: The dataclass of the options.
        given: The constructor's ``**kwargs``: the keywords named as fields of
            ``options_class`` are taken out of it, each with a
            ``DeprecationWarning`` at the user's line.

    Returns:
        The options.

    Raises:
        ValueError: For old keywords beside ``value``.
        TypeError: For a ``value`` of another type.
    """
    fields = [f.name for f in dataclasses.fields(options_class)]
    old = {k: given.pop(k) for k in fields if k in given}
    name = options_class.__name__
    renamed_keywords(
        owner,
        old,
        {k: f"{argument}={name}({k}=...)" for k in old},
    )
    if old:
        if value is not None:
            raise ValueError(f"Give {sorted(old)} in `{argument}`, not beside it.")
        return options_class(**old)
    if value is None:
        return options_class()
    if not isinstance(value, options_class):
        raise TypeError(
            f"`{argument}` must be a {name} or None, got {type(value).__name__}."
        )
    return value


def moved_module(module: str, new: str) -> Callable[[str], Any]:
    r"""A module-level ``__getattr__`` (PEP 562) for a module that moved as a whole.

    Args:
        module: The old module (``__name__``), kept as a file holding only this.
        new: The module that defines its names now.

    Returns:
        The ``__getattr__`` to assign in ``module``: getting any name of ``new``
        warns with a ``DeprecationWarning`` naming ``new`` and returns it there;
        any other name raises ``AttributeError``.
    """

    def __getattr__(name: str) -> Any:
        target = importlib.import_module(new)
        if name.startswith("__") or not hasattr(target, name):
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"`{module}` is deprecated and will be removed in the next release: "
            f"import `{name}` from `{new}`.",
            DeprecationWarning,
            stacklevel=user_stacklevel(),
        )
        return getattr(target, name)

    return __getattr__
