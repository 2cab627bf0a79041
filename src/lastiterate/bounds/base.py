"""What every bound shares: the query, the result type, the registry (public; re-exported by
:mod:`lastiterate.bounds`).

A bound is one small function ``run, query -> Result`` registered with a stable id, the theorem,
the reference and its kind:

* ``"bound"``: a valid upper bound on the privacy loss of releasing the last iterate;
* ``"estimate"``: an approximation (e.g. a CLT limit) that is reported but never chosen as best.

A bound whose assumptions do not hold raises :class:`~lastiterate.errors.NotApplicable` with the
reason.  Several functions may share an id (e.g. ``shifted-interpolation`` has one theorem per
algorithm and geometry); the accountant keeps, for each id and kind, the tightest applicable one.
Adding a theorem means adding one decorated function in a module of this package (a new module
is also listed in :func:`lastiterate.bounds.load_all`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from lastiterate.errors import NotApplicable, ParameterError, check_in_range, check_nonnegative
from lastiterate.notions.gdp import MU_MAX, gaussian_tradeoff, gdp_delta, gdp_epsilon
from lastiterate.notions.rdp import RdpCurve, rdp_to_delta, rdp_to_epsilon
from lastiterate.run import Run

Kind = Literal["bound", "estimate"]

#: Renyi orders reported for RDP results when the caller does not ask for others.
DEFAULT_REPORT_ORDERS: tuple[float, ...] = (1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


@dataclass(frozen=True)
class Query:
    """What the caller wants: epsilon at ``delta`` (default) or delta at ``epsilon``.

    Args:
        delta: report the epsilon at this delta, in (0, 1) (default 1e-5).
        epsilon: report the delta at this epsilon, >= 0 (then ``delta`` must be None).
        orders: Renyi orders > 1 at which RDP results report their curve (default
            :data:`DEFAULT_REPORT_ORDERS`).

    Raises:
        ParameterError: both or neither of ``delta`` and ``epsilon`` given, or a value out of
            its range.
    """

    delta: float | None = 1e-5
    epsilon: float | None = None
    orders: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if (self.delta is None) == (self.epsilon is None):
            raise ParameterError("delta", self.delta, "give exactly one of delta and epsilon")
        if self.delta is not None:
            check_in_range("delta", self.delta, 0.0, 1.0, low_open=True, high_open=True)
        if self.epsilon is not None:
            check_nonnegative("epsilon", self.epsilon)
        if self.orders is not None:
            for a in self.orders:
                check_in_range("orders", a, 1.0, math.inf, low_open=True, high_open=True)

    @property
    def report_orders(self) -> tuple[float, ...]:
        """The Renyi orders at which RDP results report their curve."""
        return tuple(self.orders) if self.orders else DEFAULT_REPORT_ORDERS


@dataclass(frozen=True)
class Result:
    """One guarantee for the released last iterate (JSON contract: docs/design.md).

    Attributes:
        bound: the bound id (one of :data:`BOUND_IDS`).
        theorem: the theorem that gives it.
        reference: the paper (and where in it).
        kind: ``"bound"`` (a guarantee) or ``"estimate"`` (an approximation, never chosen best).
        epsilon: epsilon (the query's, or the one found at the query's delta), >= 0.
        delta: delta, in [0, 1].
        mu: the GDP parameter, for GDP results.
        rdp: ``(order, epsilon)`` pairs of the RDP curve at the report orders, for RDP results.
        details: the theorem's intermediate quantities (JSON-safe).
        assumptions: the assumptions the theorem used.
        adjacency: the neighbouring relation of the guarantee.
        tradeoff: the tradeoff curve alpha -> beta, for plots (not serialised).

    Raises:
        ValueError: a theorem produced epsilon < 0, NaN, or delta outside [0, 1] (an internal
            error: the accountant lists it as a failure).
    """

    bound: str
    theorem: str
    reference: str
    kind: Kind
    epsilon: float
    delta: float
    mu: float | None = None
    rdp: tuple[tuple[float, float], ...] | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    assumptions: tuple[str, ...] = ()
    adjacency: str = "replace"
    #: tradeoff curve alpha -> beta (for plots); not serialised
    tradeoff: Callable[[np.ndarray], np.ndarray] | None = field(
        default=None, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        if not (self.epsilon >= 0) or math.isnan(self.epsilon):
            raise ValueError(
                f"{self.bound}: produced epsilon={self.epsilon!r}; a bound must be >= 0"
            )
        if not (0 <= self.delta <= 1):
            raise ValueError(f"{self.bound}: produced delta={self.delta!r} outside [0, 1]")

    def to_json(self) -> dict[str, Any]:
        """The result as a JSON object (docs/design.md).

        Returns:
            A dict of every field but ``tradeoff``; an infinite epsilon is written ``"inf"``.
        """
        return {
            "bound": self.bound,
            "theorem": self.theorem,
            "reference": self.reference,
            "kind": self.kind,
            "epsilon": _json_float(self.epsilon),
            "delta": self.delta,
            "mu": None if self.mu is None else _json_float(self.mu),
            "rdp": None if self.rdp is None else [[a, _json_float(e)] for a, e in self.rdp],
            "details": _jsonable(self.details),
            "assumptions": list(self.assumptions),
            "adjacency": self.adjacency,
        }


def _json_float(x: float) -> float | str:
    return x if math.isfinite(x) else "inf"


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return _json_float(float(obj))
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


@dataclass(frozen=True)
class BoundSpec:
    """A registered theorem."""

    id: str
    theorem: str
    reference: str
    kind: Kind
    func: Callable[[Run, Query], Result]
    algorithms: frozenset[str]


_REGISTRY: list[BoundSpec] = []

#: the stable bound ids, in report order
BOUND_IDS: tuple[str, ...] = (
    "shifted-interpolation",
    "langevin-lsi",
    "pabi",
    "smooth-bounded-domain",
    "hidden-state-rdp",
    "gdp-composition",
    "pld-composition",
    "rdp-composition",
    "clt",
)


def register(
    id: str,
    *,
    theorem: str,
    reference: str,
    kind: Kind = "bound",
    algorithms: Iterable[str] = ("gd", "cgd", "sgd"),
) -> Callable[[Callable[[Run, Query], Result]], Callable[[Run, Query], Result]]:
    """Register ``func(run, query) -> Result`` under a stable bound id."""
    if id not in BOUND_IDS:
        raise ValueError(f"unknown bound id {id!r}; add it to BOUND_IDS")

    def decorate(func: Callable[[Run, Query], Result]) -> Callable[[Run, Query], Result]:
        _REGISTRY.append(BoundSpec(id, theorem, reference, kind, func, frozenset(algorithms)))
        return func

    return decorate


def registered(ids: Sequence[str] | None = None) -> list[BoundSpec]:
    """The registered theorems, optionally restricted to ``ids``.

    Only the bound modules that register ``ids`` are imported (all of them when ``ids`` is None;
    :func:`lastiterate.bounds.load`).  The theorems come in the registry's canonical order (that
    of :data:`lastiterate.bounds.BOUND_MODULES`, then registration order within a module),
    whichever modules an earlier call imported first.

    Args:
        ids: bound ids (each one of :data:`BOUND_IDS`; one id may be given as a plain string),
            or None for every registered theorem.

    Returns:
        The :class:`BoundSpec` of every registered theorem whose id is in ``ids``.

    Raises:
        ParameterError: an id that is not one of :data:`BOUND_IDS`.
    """
    from lastiterate import bounds  # lazy: the package imports this module (a cycle at import)

    if isinstance(ids, str):  # one id, not its letters
        ids = (ids,)
    if ids is not None:
        unknown = [i for i in ids if i not in BOUND_IDS]
        if unknown:
            raise ParameterError("bound", unknown[0], "must be one of " + ", ".join(BOUND_IDS))
    bounds.load(ids)
    rank = {m: i for i, m in enumerate(dict.fromkeys(bounds.BOUND_MODULES.values()))}
    specs = sorted(_REGISTRY, key=lambda s: rank[bounds.BOUND_MODULES[s.id]])  # stable
    return specs if ids is None else [s for s in specs if s.id in ids]


# ---------------------------------------------------------------------- locating estimates
_LOCATING: ContextVar[bool] = ContextVar("locating_estimates", default=False)


@contextmanager
def locating_estimates() -> Iterator[None]:
    """Inside the block, the slow bounds may return cheap APPROXIMATIONS instead of bounds: the
    numerical compositions use a coarse grid without the optimistic twin, the RDP window bounds
    (pabi, smooth-bounded-domain) their locating pass (mixture-first direction at integer orders).

    Only :mod:`lastiterate.accountant`'s calibrations use it, to locate the answer before they
    bracket it with full accountings; nothing computed inside is reported or cached as a bound.
    """
    token = _LOCATING.set(True)
    try:
        yield
    finally:
        _LOCATING.reset(token)


def locating() -> bool:
    """Whether the caller only locates (see :func:`locating_estimates`): a bound may then return
    an approximation."""
    return _LOCATING.get()


# ---------------------------------------------------------------------- result builders
def rdp_epsilon_limit(rdp_limit: Callable[[float], float], query: Query) -> dict[str, Any]:
    """``epsilon_limit``: the sup over T of epsilon at the query's delta, from the limiting RDP
    curve of a bound that converges in T (docs/theorems.md 1.5 for the conversion).

    Args:
        rdp_limit: the limiting RDP curve ``alpha -> eps_R(alpha)`` (the supremum over T).
        query: the query; only a query by delta has an ``epsilon_limit``.

    Returns:
        ``{"epsilon_limit": ...}`` for a query by delta, else ``{}``.
    """
    if query.delta is None:
        return {}
    return {"epsilon_limit": float(rdp_to_epsilon(rdp_limit, query.delta).epsilon)}


@functools.lru_cache(maxsize=1024)
def gdp_epsilon_at(delta: float, mu: float) -> float:
    """``gdp_epsilon(delta, mu)`` remembered (a pure function of its two numbers): the bounds of
    one account often invert the same Gaussian profile twice (a theorem's value at T and its
    T -> infinity limit once T has converged, the same mu under two bound ids; 84 of the 329
    inversions of the benchmark's 132 extreme accounts), each a root search of some twenty profile
    evaluations.  The value is the one computed afresh, bit for bit."""
    return float(gdp_epsilon(delta, mu))


def forget_gdp_epsilons() -> None:
    """Forget the remembered inversions of :func:`gdp_epsilon_at` (speed only)."""
    gdp_epsilon_at.cache_clear()


def gdp_result(
    spec_id: str,
    *,
    theorem: str,
    reference: str,
    mu: float,
    query: Query,
    run: Run,
    kind: Kind = "bound",
    details: Mapping[str, Any] | None = None,
    assumptions: Sequence[str] = (),
) -> Result:
    """A result from a mu-GDP guarantee: exact eps(delta) or delta(eps) (docs/theorems.md 1.2)."""
    if not (mu >= 0) or math.isnan(mu):
        raise ValueError(f"{spec_id}: mu={mu!r} must be >= 0")
    if mu > MU_MAX:
        raise NotApplicable(
            f"gives mu = {mu:.4g} > {MU_MAX:g}: epsilon would exceed 5e11 (no meaningful "
            "guarantee) and cannot be evaluated accurately"
        )
    if query.delta is not None:
        eps, delta = gdp_epsilon_at(float(query.delta), float(mu)), query.delta
    else:
        eps, delta = float(query.epsilon), float(gdp_delta(query.epsilon, mu))  # type: ignore[arg-type]
    mu_value = float(mu)
    return Result(
        bound=spec_id,
        theorem=theorem,
        reference=reference,
        kind=kind,
        epsilon=eps,
        delta=delta,
        mu=float(mu),
        rdp=None,
        details=dict(details or {}),
        assumptions=tuple(assumptions),
        adjacency=run.adjacency,
        tradeoff=lambda a: gaussian_tradeoff(a, mu_value),
    )


def rdp_result(
    spec_id: str,
    *,
    theorem: str,
    reference: str,
    rdp: Callable[[float], float] | RdpCurve,
    query: Query,
    run: Run,
    kind: Kind = "bound",
    details: Mapping[str, Any] | None = None,
    assumptions: Sequence[str] = (),
    linear_rho: float | None = None,
) -> Result:
    """A result from an RDP curve, converted with the best of the conversions of docs/theorems.md
    1.5.

    ``rdp`` is a callable ``alpha -> eps_R(alpha)`` valid at every order > 1 (optimised over alpha)
    or a tabulated :class:`~lastiterate.notions.rdp.RdpCurve` (minimised over its orders, which must
    include the query's report orders).  ``linear_rho`` marks a linear curve rho*alpha.
    """
    curve = tuple((float(a), float(rdp(a))) for a in query.report_orders)
    extra: dict[str, Any] = dict(details or {})
    if query.delta is not None:
        conv = rdp_to_epsilon(rdp, query.delta)
        eps, delta = float(conv.epsilon), query.delta
        extra.setdefault("order", float(conv.order))
        extra.setdefault("conversion", conv.method)
    else:
        eps, delta = float(query.epsilon), float(rdp_to_delta(rdp, float(query.epsilon)))  # type: ignore[arg-type]
    if linear_rho is not None:
        extra.setdefault("rho", float(linear_rho))
    return Result(
        bound=spec_id,
        theorem=theorem,
        reference=reference,
        kind=kind,
        epsilon=eps,
        delta=delta,
        mu=None,
        rdp=curve,
        details=extra,
        assumptions=tuple(assumptions),
        adjacency=run.adjacency,
    )
