"""Privacy bounds for the released last iterate, one module per source.

The public vocabulary of bounds lives in :mod:`lastiterate.bounds.base` and is re-exported here:
:class:`Query`, :class:`Result`, :data:`Kind`, :data:`BOUND_IDS`, :class:`BoundSpec`,
:func:`register` and :func:`registered`.  Every bound module of this package registers its
theorems with :func:`register`; :func:`load_all` imports them all, so adding a theorem means adding
one decorated function (and its tests), and adding a bound module also means listing it in
:func:`load_all` (``tests/test_registry_contract.py`` checks that none is missing).
"""

from __future__ import annotations

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
    "BoundSpec",
    "Kind",
    "Query",
    "Result",
    "load_all",
    "register",
    "registered",
]


def load_all() -> None:
    """Import every bound module of this package (each registers its theorems on import).

    The imports are deferred to the first call because the bound modules pull in the PLD engine
    and the RDP tables, which the CLI's start-up and ``import lastiterate.bounds`` do not need.
    Python caches modules, so later calls cost nothing and register nothing twice.
    """
    from lastiterate.bounds import (  # noqa: F401  (imported for their registrations)
        composition,
        hidden_state,
        langevin,
        pabi,
        shifted_interpolation,
        smooth_bounded_domain,
    )
