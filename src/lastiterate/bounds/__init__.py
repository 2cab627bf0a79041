"""Privacy bounds for the released last iterate, one module per source.

The public vocabulary of bounds lives in :mod:`lastiterate.bounds.base` and is re-exported here:
:class:`Query`, :class:`Result`, :data:`Kind`, :data:`BOUND_IDS`, :class:`BoundSpec`,
:func:`register` and :func:`registered`.  Every bound module of this package registers its
theorems with :func:`register`; :func:`load_all` imports them all, so adding a theorem means adding
one decorated function (and its tests), and adding a bound module also means listing it in
:data:`BOUND_MODULES` (``tests/test_registry_contract.py`` checks that none is missing).
:func:`registered` with bound ids imports only the modules that register those ids (:func:`load`),
so ``lastiterate account --bound pld-composition`` does not pay for the other theorems' imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from lastiterate.bounds.base import (
    BOUND_IDS,
    BoundSpec,
    Kind,
    Query,
    Result,
    register,
    registered,
)

__all__ = [
    "BOUND_IDS",
    "BOUND_MODULES",
    "BoundSpec",
    "Kind",
    "Query",
    "Result",
    "load",
    "load_all",
    "register",
    "registered",
]


#: the module of this package that registers each bound id's theorems.  The modules are listed in
#: the order :func:`load_all` imports them (the registry's order: :func:`registered` returns the
#: theorems in this order whichever ids were loaded first); ``tests/test_registry_contract.py``
#: checks the table against what every module registers.
BOUND_MODULES: dict[str, str] = {
    "gdp-composition": "composition",
    "pld-composition": "composition",
    "rdp-composition": "composition",
    "clt": "composition",
    "shifted-interpolation": "shifted_interpolation",
    "hidden-state-rdp": "hidden_state",
    "langevin-lsi": "langevin",
    "pabi": "pabi",
    "smooth-bounded-domain": "smooth_bounded_domain",
}


def load(ids: Iterable[str] | None = None) -> None:
    """Import the bound modules that register ``ids`` (every bound module when None).

    The imports are deferred to the first call because the bound modules pull in the PLD engine,
    the RDP tables and scipy, which the CLI's start-up and ``import lastiterate.bounds`` do not
    need; and only the modules of the ids asked for are imported, so accounting one bound does not
    import (nor register) the theorems it will not evaluate.  Python caches modules, so later calls
    cost nothing and register nothing twice.

    Args:
        ids: bound ids (each one of :data:`BOUND_IDS`), or None for all of them.

    Raises:
        KeyError: an id that is not in :data:`BOUND_MODULES` (callers validate ids first).
    """
    wanted = set(BOUND_MODULES.values()) if ids is None else {BOUND_MODULES[i] for i in ids}
    for module in dict.fromkeys(BOUND_MODULES.values()):  # the registry's order
        if module in wanted:
            importlib.import_module(f"{__name__}.{module}")


def load_all() -> None:
    """Import every bound module of this package (each registers its theorems on import); see
    :func:`load`."""
    load(None)
