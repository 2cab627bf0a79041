"""Privacy bounds for the released last iterate, one module per source.

Every public module of this package registers its theorems with
:func:`lastiterate.bounds._base.register`; :func:`load_all` imports them all, so adding a theorem
means adding one decorated function (and its tests) and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil

_loaded = False


def load_all() -> None:
    """Import every bound module of this package once (each registers its theorems)."""
    global _loaded
    if _loaded:
        return
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    _loaded = True
