"""`module:attr` paths, the one form in which a spec names code of its user's (an env, an algorithm, a memory, a net):
import the object, or say in one line why not, with a did-you-mean hint where a close name exists."""
from __future__ import annotations

import difflib
import importlib
import pkgutil
from typing import Any


def is_import_path(name: str) -> bool:
    """Whether `name` has the `module:attr` form (both parts non-empty)."""
    module_name, sep, attr = name.partition(":")
    return bool(sep and module_name and attr)


def import_object(path: str) -> Any:
    """The object named by `module:attr`; ValueError with a one-line reason otherwise (with a did-you-mean hint for a
    module or attribute named close to one that exists: `cooperative_pong_v5` when the package has `_v6`)."""
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        missing = isinstance(e, ModuleNotFoundError) and e.name is not None and module_name.startswith(e.name)
        raise ValueError(f'cannot import module "{module_name}": {e}'
                         f'{_module_hint(e.name) if missing and e.name else ""}') from None
    try:
        return getattr(module, attr)
    except AttributeError:
        close = difflib.get_close_matches(attr, [a for a in dir(module) if not a.startswith("_")], n=1)
        hint = f'; did you mean "{module_name}:{close[0]}"?' if close else ""
        raise ValueError(f'module "{module_name}" has no attribute "{attr}"{hint}') from None


def _module_hint(missing: str) -> str:
    """'; did you mean "pkg.close_name"?' when the package holding the missing module has one named close to it."""
    parent, _, leaf = missing.rpartition(".")
    if parent:
        try:
            package = importlib.import_module(parent)
        except ImportError:
            return ""
        names = [m.name for m in pkgutil.iter_modules(getattr(package, "__path__", []))]
    else:  # a top-level name: the installed packages and modules
        names = [m.name for m in pkgutil.iter_modules()]
    close = difflib.get_close_matches(leaf, names, n=1)
    return f'; did you mean "{parent + "." if parent else ""}{close[0]}"?' if close else ""
