"""Renyi differential privacy: curves, conversions to (eps, delta), and the sampled Gaussian
mechanism.

References: docs/theorems.md section 1.4 (GDP -> RDP), 1.5 (RDP -> (eps, delta), four conversions,
minimum of them), 1.9 (Renyi divergence of the sampled Gaussian in both directions; AT22 Lemma 2.12
conditions).

Conventions
-----------
* An RDP curve ``eps_R(alpha)`` means ``D_alpha(M(S) || M(S')) <= eps_R(alpha)`` for all adjacent S,
  S' (both orders of the pair), for every order alpha > 1 listed (or for all alpha > 1 for a
  callable / linear curve).
* Every conversion below is a valid upper bound for every alpha, so the optimisation over alpha only
  affects tightness, never validity: the reported epsilon is the formula evaluated at a concrete
  order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

from lastiterate.errors import (
    NotApplicable,
    ParameterError,
    check_in_range,
    check_nonnegative,
    check_positive,
)
from lastiterate.notions import normal

__all__ = [
    "CONVERSION_METHODS",
    "DEFAULT_ORDERS",
    "DpConversion",
    "RdpCurve",
    "alpha_star",
    "lemma_2_12_applies",
    "lemma_2_12_bound",
    "literal_split_upper",
    "literal_taylor_upper",
    "mixture_first_integer_grid",
    "rdp_linear_to_epsilon",
    "rdp_to_delta",
    "rdp_to_epsilon",
    "sampled_gaussian_rdp",
]

#: dp_accounting's default orders: 1.1, 1.2, ..., 10.9, 11, ..., 63, 128, 256, 512, 1024.
DEFAULT_ORDERS: np.ndarray = np.concatenate(
    [
        1.0 + np.arange(1, 100) / 10.0,
        np.arange(11, 64, dtype=float),
        np.array([128.0, 256.0, 512.0, 1024.0]),
    ]
)
DEFAULT_ORDERS.setflags(write=False)

#: Conversion names accepted by :func:`rdp_to_epsilon` / :func:`rdp_to_delta` (docs/theorems.md 1.5,
#: plus
#: KL-TV).
CONVERSION_METHODS: tuple[str, ...] = (
    "mironov",
    "bun-steinke",
    "balle2020",
    "asoodeh2021",
    "kl-tv",
)

# ------------------------------------------------------------------------------------------------
# results and validation
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DpConversion:
    """Result of an RDP -> (eps, delta) conversion: ``epsilon`` at the requested delta, the RDP
    ``order`` at which it was obtained, and the conversion ``method`` (one of
    :data:`CONVERSION_METHODS`)."""

    epsilon: float
    order: float
    method: str


def _check_delta(delta: float) -> float:
    return check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)


def _check_orders(orders: ArrayLike) -> np.ndarray:
    try:
        a = np.atleast_1d(np.asarray(orders, dtype=float))
    except (TypeError, ValueError):
        raise ParameterError("orders", orders, "must be an array of real numbers > 1") from None
    if a.ndim != 1 or a.size == 0 or np.isnan(a).any() or (a <= 1).any() or np.isinf(a).any():
        raise ParameterError(
            "orders", orders, "must be a non-empty 1-D array of finite real numbers > 1"
        )
    return a


def _check_methods(methods: Iterable[str] | None) -> tuple[str, ...]:
    if methods is None:
        return CONVERSION_METHODS
    ms = tuple(methods)
    bad = [m for m in ms if m not in CONVERSION_METHODS]
    if bad or not ms:
        raise ParameterError("methods", ms, f"must be a non-empty subset of {CONVERSION_METHODS}")
    return ms


# ------------------------------------------------------------------------------------------------
# the four (+1) conversions, vectorised over orders
# ------------------------------------------------------------------------------------------------


def _log_expm1(x: np.ndarray) -> np.ndarray:
    """``log(e^x - 1)`` for x >= 0 without overflow (``-inf`` at 0)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(
            x > 30.0,
            x + np.log1p(-np.exp(-np.minimum(x, 1e300))),
            np.log(np.expm1(np.minimum(x, 30.0))),
        )


#: the rounding margin of the conversions, in units of their terms' magnitudes: every formula
#: below returns its floating-point value moved OUTWARD (epsilon and log delta up) by
#: ``_CONVERSION_ULPS`` times the sum of the magnitudes of the terms it adds (each term is
#: within a few ulps; the sum adds one rounding per term), so the reported value is never below
#: the exact formula at that order.  ~1e-14 relative; an audit finding (README, "Rounding and
#: truncation audit")
_CONVERSION_ULPS = 8.0 * float(np.finfo(float).eps)


def epsilon_mironov(alpha: np.ndarray, rdp: np.ndarray, delta: float) -> np.ndarray:
    """Mironov 2017 Prop. 3: ``eps = eps_R(alpha) + log(1/delta)/(alpha - 1)`` (docs/theorems.md 1.5
    item 1), rounded up (``_CONVERSION_ULPS``)."""
    tail = math.log(1.0 / delta) / (alpha - 1.0)
    return (rdp + tail) + _CONVERSION_ULPS * (np.abs(rdp) + tail)


def epsilon_balle2020(alpha: np.ndarray, rdp: np.ndarray, delta: float) -> np.ndarray:
    """Balle et al. 2020 Thm 20 (= Canonne-Kamath-Steinke Prop 12; dp_accounting's conversion):
    ``eps = eps_R + log((alpha-1)/alpha) - (log delta + log alpha)/(alpha - 1)`` (docs/theorems.md
    1.5 item 3), rounded up (``_CONVERSION_ULPS``)."""
    shrink = np.log1p(-1.0 / alpha)
    tail = (math.log(delta) + np.log(alpha)) / (alpha - 1.0)
    # log1p(-1/a) of a rounded 1/a: its absolute error is within (|log1p(-1/a)| + 1/(a - 1)) ulps
    size = np.abs(rdp) + np.abs(shrink) + (1.0 + abs(math.log(delta)) + np.abs(np.log(alpha))) / (
        alpha - 1.0
    )
    return (rdp + shrink - tail) + _CONVERSION_ULPS * size


def epsilon_asoodeh2021(alpha: np.ndarray, rdp: np.ndarray, delta: float) -> np.ndarray:
    """Asoodeh et al. 2021 Lemma 1 as coded in paper 000's repository (docs/theorems.md 1.5 item 4):

        eps = log(1 + (exp((alpha - 1) eps_R) - 1) / (alpha delta)) / (alpha - 1),

    evaluated as ``logaddexp(0, log_expm1((alpha-1) eps_R) - log(alpha delta)) / (alpha - 1)`` (no
    overflow). Validity: with ``L = dP/dQ`` and ``c = e^eps``, ``(L - c)_+ <= (L^alpha - 1 - alpha
    (L - 1)) / (alpha (c^{alpha-1} - 1))`` for all ``L >= 0`` (equality of values at ``L = c`` and
    of derivatives ordered for ``L >= c``); taking ``E_Q`` gives ``delta <= (e^{(alpha-1) eps_R} -
    1)/(alpha (c^{alpha-1} - 1))``.  Rounded up (``_CONVERSION_ULPS``): ``log(e^x - 1)`` of a
    rounded ``x`` is within ``2 + x + |log(e^x - 1)|`` ulps, and ``log(1 + e^z)`` damps an error
    in z by its slope ``e^(z - log(1 + e^z)) <= 1``.
    """
    x = (alpha - 1.0) * rdp
    lem1 = _log_expm1(x)
    log_ad = np.log(alpha * delta)
    z = lem1 - log_ad
    numerator = np.logaddexp(0.0, z)
    slope = np.exp(np.minimum(z - numerator, 0.0))
    size = (2.0 + np.abs(x) + np.abs(lem1) + np.abs(log_ad)) * slope + np.abs(numerator)
    return (numerator + _CONVERSION_ULPS * size) / (alpha - 1.0)


def epsilon_kl_tv(alpha: np.ndarray, rdp: np.ndarray, delta: float) -> np.ndarray:
    """KL / total-variation shortcut (used by dp_accounting): ``TV <= sqrt(1 - exp(-KL))``
    (Bretagnolle-Huber) and ``KL <= D_alpha`` for alpha > 1, so ``delta >= sqrt(1 -
    exp(-eps_R(alpha)))`` gives ``(0, delta)``-DP. Returns 0 where that holds (the computed TV
    bound rounded up by ``_CONVERSION_ULPS``) and ``inf`` elsewhere."""
    tv = np.sqrt(-np.expm1(-np.asarray(rdp, dtype=float)))
    return np.where(tv * (1.0 + _CONVERSION_ULPS) <= delta, 0.0, np.inf)


def epsilon_bun_steinke(rho: float, delta: float) -> tuple[float, float]:
    """Bun-Steinke 2016 Lemma 3.5 for rho-zCDP (linear RDP ``rho alpha``): ``eps = rho + 2 sqrt(rho
    log(1/delta))`` (docs/theorems.md 1.5 item 2); returns ``(eps, optimal order 1 +
    sqrt(log(1/delta)/rho))``."""
    L = math.log(1.0 / delta)
    if rho == 0.0:
        return 0.0, math.inf
    eps = rho + 2.0 * math.sqrt(rho * L)
    return eps * (1.0 + _CONVERSION_ULPS), 1.0 + math.sqrt(L / rho)


_Formula = Callable[[np.ndarray, np.ndarray, float], np.ndarray]

_EPS_FORMULAS: dict[str, _Formula] = {
    "mironov": epsilon_mironov,
    "balle2020": epsilon_balle2020,
    "asoodeh2021": epsilon_asoodeh2021,
    "kl-tv": epsilon_kl_tv,
}


def delta_mironov(alpha: np.ndarray, rdp: np.ndarray, epsilon: float) -> np.ndarray:
    """Inverse of Mironov's conversion: ``log delta = (alpha - 1)(eps_R - eps)``; returns log
    delta, rounded up (``_CONVERSION_ULPS``)."""
    return (alpha - 1.0) * (rdp - epsilon) + _CONVERSION_ULPS * (alpha - 1.0) * (
        np.abs(rdp) + epsilon
    )


def delta_balle2020(alpha: np.ndarray, rdp: np.ndarray, epsilon: float) -> np.ndarray:
    """Inverse of Balle et al. 2020: ``log delta = (alpha-1)(eps_R - eps + log(1 - 1/alpha)) - log
    alpha``, rounded up (``_CONVERSION_ULPS``)."""
    shrink = np.log1p(-1.0 / alpha)
    value = (alpha - 1.0) * (rdp - epsilon + shrink) - np.log(alpha)
    # log1p(-1/a) of a rounded 1/a: within (|log1p(-1/a)| + 1/(a - 1)) ulps
    size = (alpha - 1.0) * (np.abs(rdp) + epsilon + np.abs(shrink)) + np.abs(np.log(alpha)) + 1.0
    return value + _CONVERSION_ULPS * size


def delta_asoodeh2021(alpha: np.ndarray, rdp: np.ndarray, epsilon: float) -> np.ndarray:
    """Inverse of the Asoodeh formula: ``delta = (e^{(a-1) eps_R} - 1) / (a (e^{(a-1) eps} - 1))``;
    log delta, rounded up (``_CONVERSION_ULPS``; see :func:`epsilon_asoodeh2021`)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        x, y = (alpha - 1.0) * rdp, (alpha - 1.0) * epsilon
        lx, ly = _log_expm1(x), _log_expm1(y)
        out = lx - np.log(alpha) - ly
        size = 2.0 + np.abs(x) + np.abs(lx) + np.abs(y) + np.abs(ly) + np.abs(np.log(alpha))
        out = out + _CONVERSION_ULPS * size
    return np.where(np.isnan(out), np.inf, out)


def delta_kl_tv(alpha: np.ndarray, rdp: np.ndarray, epsilon: float) -> np.ndarray:
    """``log sqrt(1 - exp(-eps_R))`` (valid for every eps >= 0), rounded up
    (``_CONVERSION_ULPS``)."""
    with np.errstate(divide="ignore"):
        value = 0.5 * np.log(-np.expm1(-np.asarray(rdp, dtype=float)))
    return value + _CONVERSION_ULPS * (1.0 + np.abs(value))


_LOG_DELTA_FORMULAS: dict[str, _Formula] = {
    "mironov": delta_mironov,
    "balle2020": delta_balle2020,
    "asoodeh2021": delta_asoodeh2021,
    "kl-tv": delta_kl_tv,
}


# ------------------------------------------------------------------------------------------------
# RDP curves
# ------------------------------------------------------------------------------------------------


class RdpCurve:
    """An RDP guarantee tabulated at ``orders`` (all > 1) with values ``epsilons`` (all >= 0,
    ``inf`` allowed).

    ``linear_rho`` is set for curves known to be ``rho * alpha`` at EVERY order alpha > 1 (zCDP,
    GDP, Gaussian mechanism); conversions then optimise over all alpha > 1 and also use Bun-Steinke.
    """

    __slots__ = ("_eps", "_orders", "_rho")

    def __init__(
        self, orders: ArrayLike, epsilons: ArrayLike, *, linear_rho: float | None = None
    ) -> None:
        a = _check_orders(orders)
        try:
            e = np.atleast_1d(np.asarray(epsilons, dtype=float))
        except (TypeError, ValueError):
            raise ParameterError(
                "epsilons", epsilons, "must be an array of real numbers >= 0"
            ) from None
        if e.shape != a.shape:
            raise ParameterError(
                "epsilons", epsilons, f"must have the same length as orders ({a.size})"
            )
        if np.isnan(e).any() or (e < 0).any():
            raise ParameterError("epsilons", epsilons, "must be >= 0 (inf allowed), never NaN")
        order = np.argsort(a, kind="stable")
        a, e = a[order].copy(), e[order].copy()
        if (np.diff(a) == 0).any():
            raise ParameterError("orders", orders, "must not contain duplicates")
        a.setflags(write=False)
        e.setflags(write=False)
        self._orders = a
        self._eps = e
        self._rho = None if linear_rho is None else check_nonnegative("linear_rho", linear_rho)

    # -- constructors ---------------------------------------------------------------------------
    @classmethod
    def from_linear(cls, rho: float, orders: ArrayLike | None = None) -> RdpCurve:
        """``eps_R(alpha) = rho * alpha`` (rho-zCDP), tabulated at ``orders`` (default
        :data:`DEFAULT_ORDERS`)."""
        r = check_nonnegative("rho", rho)
        a = DEFAULT_ORDERS if orders is None else _check_orders(orders)
        return cls(a, r * a, linear_rho=r)

    @classmethod
    def from_gdp(cls, mu: float, orders: ArrayLike | None = None) -> RdpCurve:
        """mu-GDP -> ``(alpha, alpha mu^2/2)``-RDP (docs/theorems.md 1.4)."""
        m = check_nonnegative("mu", mu)
        return cls.from_linear(m * m / 2.0, orders)

    @classmethod
    def from_sampled_gaussian(
        cls,
        q: float,
        noise_multiplier: float,
        steps: float = 1,
        orders: ArrayLike | None = None,
        direction: str = "max",
    ) -> RdpCurve:
        """``steps``-fold composition of the Poisson-sampled Gaussian (see
        :func:`sampled_gaussian_rdp`)."""
        k = check_nonnegative("steps", steps)
        a = DEFAULT_ORDERS if orders is None else _check_orders(orders)
        return cls(a, k * sampled_gaussian_rdp(q, noise_multiplier, a, direction=direction))

    # -- accessors ------------------------------------------------------------------------------
    @property
    def orders(self) -> np.ndarray:
        return self._orders

    @property
    def epsilons(self) -> np.ndarray:
        return self._eps

    @property
    def linear_rho(self) -> float | None:
        return self._rho

    def __call__(self, alpha: float) -> float:
        """Value at a tabulated order, or ``rho * alpha`` for a linear curve."""
        a = check_positive("alpha", alpha)
        if self._rho is not None:
            return self._rho * a
        idx = np.nonzero(self._orders == a)[0]
        if idx.size == 0:
            raise ParameterError("alpha", alpha, "must be one of the curve's orders")
        return float(self._eps[idx[0]])

    def __repr__(self) -> str:
        lin = f", linear_rho={self._rho:g}" if self._rho is not None else ""
        return (
            f"RdpCurve(<{self._orders.size} orders {self._orders[0]:g}..{self._orders[-1]:g}>{lin})"
        )

    # -- calculus -------------------------------------------------------------------------------
    def compose(self, other: RdpCurve) -> RdpCurve:
        """Adaptive composition: RDP values add order by order (on the common orders; two linear
        curves compose to the linear curve with the summed rho on the union of orders)."""
        if not isinstance(other, RdpCurve):
            raise ParameterError("other", other, "must be an RdpCurve")
        if self._rho is not None and other._rho is not None:
            return RdpCurve.from_linear(
                self._rho + other._rho, np.union1d(self._orders, other._orders)
            )
        common, i, j = np.intersect1d(self._orders, other._orders, return_indices=True)
        if common.size == 0:
            raise ParameterError("other", other, "must share at least one order with this curve")
        return RdpCurve(common, self._eps[i] + other._eps[j])

    def scale(self, k: float) -> RdpCurve:
        """``k``-fold composition (``k >= 0``): every value multiplied by k."""
        kk = check_nonnegative("k", k)
        rho = None if self._rho is None else self._rho * kk
        return RdpCurve(self._orders, self._eps * kk, linear_rho=rho)

    def to_dp(self, delta: float, methods: Iterable[str] | None = None) -> DpConversion:
        """Best (smallest) epsilon at ``delta`` over the conversions (see
        :func:`rdp_to_epsilon`)."""
        return rdp_to_epsilon(self, delta, methods=methods)

    def epsilon(self, delta: float) -> float:
        return self.to_dp(delta).epsilon

    def delta(self, epsilon: float) -> float:
        """Smallest delta over the conversions at ``epsilon`` (see :func:`rdp_to_delta`)."""
        return rdp_to_delta(self, epsilon)


# ------------------------------------------------------------------------------------------------
# RDP -> (eps, delta)
# ------------------------------------------------------------------------------------------------


def _rdp_value(rdp: Callable[[float], float], a: float) -> float:
    """``eps_R(a)`` of a callable curve, checked to be a number >= 0."""
    v = float(rdp(a))
    if math.isnan(v) or v < 0:
        raise ParameterError("rdp", rdp, f"must return a value >= 0 (got {v!r} at alpha={a!r})")
    return v


def _evaluate_callable(rdp: Callable[[float], float], alphas: np.ndarray) -> np.ndarray:
    """``eps_R`` at every order of ``alphas``: through the curve's vectorised ``values(alphas)``
    when it has one (it must equal the scalar calls), else one call per order."""
    many = getattr(rdp, "values", None)
    if callable(many):
        vals = np.asarray(many(alphas), dtype=float)
        bad = np.isnan(vals) | (vals < 0)
        if vals.shape != alphas.shape or bad.any():
            k = int(np.argmax(bad)) if bad.any() else 0
            raise ParameterError(
                "rdp",
                rdp,
                f"must return values >= 0 (got {vals.ravel()[k]!r} at alpha={alphas[k]!r})",
            )
        return vals
    vals = np.empty(alphas.size)
    for k, a in enumerate(alphas.tolist()):
        vals[k] = _rdp_value(rdp, a)
    return vals


def _formula_on_orders(f: _Formula, alphas: np.ndarray, vals: np.ndarray, x: float) -> np.ndarray:
    """Conversion formula ``f`` (at ``delta`` or ``epsilon`` = ``x``) at every tabulated order,
    NaN read as ``inf`` (no information)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        v = f(alphas, vals, x)
    return np.where(np.isnan(v), np.inf, v)


def _formula_at_order(rdp: Callable[[float], float], f: _Formula, u: float, x: float) -> float:
    """Conversion formula ``f`` (at ``x``) of a callable curve at the order ``a = 1 + e^u`` (NaN
    kept)."""
    a = 1.0 + math.exp(u)
    r = _rdp_value(rdp, a)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return float(f(np.asarray(a), np.asarray(r), x))


def _refine_order(objective: Callable[[float], float], u_grid: np.ndarray, k: int) -> float:
    """``u = log(a - 1)`` minimising ``objective`` between the grid neighbours of ``u_grid[k]``
    (bounded scalar minimisation; only tightness depends on it)."""
    lo, hi = u_grid[max(k - 1, 0)], u_grid[min(k + 1, u_grid.size - 1)]
    from scipy import optimize  # lazy: ~0.2 s of start-up (issue 11)

    res = optimize.minimize_scalar(
        objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10}
    )
    return float(res.x)


def _order_grid(alpha_bounds: tuple[float, float] | None) -> np.ndarray:
    """Coarse grid of 97 points in ``log(a - 1)`` over ``alpha_bounds`` (default [1 + 1e-6, 1 +
    1e8])."""
    lo, hi = (1.0 + 1e-6, 1.0 + 1e8) if alpha_bounds is None else alpha_bounds
    lo = check_in_range("alpha_bounds[0]", lo, 1.0, math.inf, low_open=True, high_open=True)
    hi = check_in_range("alpha_bounds[1]", hi, lo, math.inf, low_open=True, high_open=True)
    return np.linspace(math.log(lo - 1.0), math.log(hi - 1.0), 97)


def _best_on_table(
    alphas: np.ndarray, vals: np.ndarray, delta: float, methods: tuple[str, ...]
) -> DpConversion:
    best = DpConversion(math.inf, float(alphas[0]), methods[0])
    for m in methods:
        f = _EPS_FORMULAS.get(m)
        if f is None:
            continue
        e = _formula_on_orders(f, alphas, vals, delta)
        k = int(np.argmin(e))
        if e[k] < best.epsilon:
            best = DpConversion(float(e[k]), float(alphas[k]), m)
    return best


#: the vectorised refinement of :func:`_refine_callable`: rounds of ``_ZOOM_POINTS`` orders
#: spanning the two grid steps around the best point (each round shrinks the step 16x: after
#: ``_ZOOM_ROUNDS`` rounds it is ~8e-11 in log(alpha - 1)); a curve's ``kink_orders`` are tried too;
#: 0 rounds: the bounded scalar minimisation of every other callable, the reference the tests
#: compare with)
_ZOOM_POINTS = 33
_ZOOM_ROUNDS = 8


def _refine_vectorised(
    many: Callable[[np.ndarray], np.ndarray],
    delta: float,
    formulas: list[tuple[str, _Formula]],
    u_grid: np.ndarray,
    vals: np.ndarray,
) -> dict[str, float]:
    """For each formula, the ``u = log(alpha - 1)`` of its smallest value found by zooming: the
    two grid steps around its best point are re-gridded with :data:`_ZOOM_POINTS` orders, and
    again around the best of those, :data:`_ZOOM_ROUNDS` times; every round evaluates the curve at
    all formulas' points in ONE call of its vectorised ``values`` (``many``).  Only tightness
    depends on it: the caller reports the formula at the returned order."""
    alphas = 1.0 + np.exp(u_grid)
    state: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for m, f in formulas:
        state[m] = (u_grid, _formula_on_orders(f, alphas, vals, delta))
    best_u: dict[str, float] = {}
    best_e: dict[str, float] = {}
    for _ in range(_ZOOM_ROUNDS):
        windows: list[tuple[str, np.ndarray]] = []
        for m, f in formulas:
            us, e = state[m]
            k = int(np.argmin(e))
            if not math.isfinite(e[k]):
                continue
            if e[k] < best_e.get(m, math.inf):
                best_u[m], best_e[m] = float(us[k]), float(e[k])
            lo, hi = us[max(k - 1, 0)], us[min(k + 1, us.size - 1)]
            if not hi > lo:
                continue
            windows.append((m, np.linspace(lo, hi, _ZOOM_POINTS)))
        if not windows:
            break
        u_all = np.concatenate([w for _, w in windows])
        a_all = 1.0 + np.exp(u_all)
        v_all = np.asarray(many(a_all), dtype=float)
        if v_all.shape != a_all.shape or np.isnan(v_all).any() or (v_all < 0).any():
            raise ParameterError("rdp", many, "must return values >= 0 (vectorised)")
        start = 0
        for m, w in windows:
            f = dict(formulas)[m]
            sl = slice(start, start + w.size)
            e = _formula_on_orders(f, a_all[sl], v_all[sl], delta)
            state[m] = (w, e)
            start += w.size
    for m, _f in formulas:
        us, e = state[m]
        k = int(np.argmin(e))
        if math.isfinite(e[k]) and e[k] < best_e.get(m, math.inf):
            best_u[m] = float(us[k])
    return best_u


def _refine_callable(
    rdp: Callable[[float], float],
    delta: float,
    methods: tuple[str, ...],
    u_grid: np.ndarray,
    vals: np.ndarray,
) -> DpConversion:
    alphas = 1.0 + np.exp(u_grid)
    best = _best_on_table(alphas, vals, delta, methods)
    many = getattr(rdp, "values", None)
    if callable(many) and _ZOOM_ROUNDS > 0:  # a vectorised curve: zoom, all formulas at once
        formulas = [(m, _EPS_FORMULAS[m]) for m in methods if m in _EPS_FORMULAS and m != "kl-tv"]
        if "balle2020" in methods:
            # Mironov's value exceeds Balle et al.'s at every order (their difference, log(1 -
            # 1/a) - log(a)/(a - 1), is negative): its optimum can never be the smaller one
            formulas = [(m, fm) for m, fm in formulas if m != "mironov"]
        zoomed = _refine_vectorised(many, delta, formulas, u_grid, vals)
        # a tabulated curve is piecewise smooth with kinks at its table orders, where the optimum
        # often sits: those orders are candidates too (one more vectorised call)
        kinks = np.asarray(getattr(rdp, "kink_orders", ()), dtype=float)
        kinks = kinks[(kinks > alphas[0]) & (kinks < alphas[-1])]
        kink_vals = np.asarray(many(kinks), dtype=float) if kinks.size else kinks
        for m, fm in formulas:
            candidates = [1.0 + math.exp(zoomed[m])] if m in zoomed else []
            if kinks.size:
                e = _formula_on_orders(fm, kinks, kink_vals, delta)
                candidates.append(float(kinks[int(np.argmin(e))]))
            for a in candidates:
                r = _rdp_value(rdp, a)  # the reported value: the formula at this order
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                    val = float(fm(np.asarray(a), np.asarray(r), delta))
                if math.isfinite(val) and val < best.epsilon:
                    best = DpConversion(val, a, m)
        return best
    for m in methods:
        f = _EPS_FORMULAS.get(m)
        if f is None or m == "kl-tv":
            continue
        e = _formula_on_orders(f, alphas, vals, delta)
        k = int(np.argmin(e))
        if not math.isfinite(e[k]):
            continue

        def objective(u: float, f: _Formula = f) -> float:
            v = _formula_at_order(rdp, f, u, delta)
            return v if math.isfinite(v) else math.inf

        u = _refine_order(objective, u_grid, k)
        # re-evaluate: the reported value is the formula at this order
        val = objective(u)
        if val < best.epsilon:
            best = DpConversion(val, 1.0 + math.exp(u), m)
    return best


def rdp_to_epsilon(
    rdp: Callable[[float], float] | RdpCurve,
    delta: float,
    *,
    methods: Iterable[str] | None = None,
    alpha_bounds: tuple[float, float] | None = None,
) -> DpConversion:
    """Smallest epsilon at ``delta`` over the RDP -> (eps, delta) conversions (docs/theorems.md
    1.5):

    1. ``mironov``: ``eps_R(a) + log(1/delta)/(a - 1)`` (Mironov 2017 Prop. 3);
    2. ``bun-steinke``: ``rho + 2 sqrt(rho log(1/delta))`` for linear curves ``rho a`` (zCDP);
    3. ``balle2020``: ``eps_R(a) + log((a-1)/a) - (log delta + log a)/(a - 1)`` (BBG+20 Thm 20);
    4. ``asoodeh2021``: ``log(1 + (e^{(a-1) eps_R(a)} - 1)/(a delta))/(a - 1)``, in log space;
    5. ``kl-tv``: 0 when ``delta >= sqrt(1 - e^{-eps_R(a)})`` (extra, as in dp_accounting).

    ``rdp`` is either an :class:`RdpCurve` (minimised over its tabulated orders; a linear curve is
    treated as valid at every alpha > 1) or a callable ``alpha -> eps_R(alpha)`` valid for every
    alpha > 1, minimised over ``log(alpha - 1)`` in ``log(alpha_bounds - 1)`` (default alpha in [1 +
    1e-6, 1 + 1e8]) by a coarse grid (97 points, step 1/3 in log(alpha - 1), to avoid local minima)
    followed by bounded scalar minimisation around the best grid point of each formula. Each formula
    is valid at every order, so the minimisation can only affect tightness; the value returned is
    the formula evaluated at the returned order. The result is >= 0 and never NaN (``inf`` if every
    order gives ``inf``).
    """
    d = _check_delta(delta)
    ms = _check_methods(methods)
    memo = getattr(rdp, "_conversion_memo", None)  # a curve that was converted while built
    if isinstance(memo, dict) and methods is None and alpha_bounds is None and d in memo:
        return memo[d]
    if isinstance(rdp, RdpCurve):
        best = _best_on_table(rdp.orders, rdp.epsilons, d, ms)
        if rdp.linear_rho is not None:
            rho = rdp.linear_rho
            lin = rdp_linear_to_epsilon(rho, d, methods=ms)
            if lin.epsilon < best.epsilon:
                best = lin
    elif callable(rdp):
        u_grid = _order_grid(alpha_bounds)
        vals = _evaluate_callable(rdp, 1.0 + np.exp(u_grid))
        best = _refine_callable(rdp, d, ms, u_grid, vals)
    else:
        raise ParameterError("rdp", rdp, "must be an RdpCurve or a callable alpha -> eps_R(alpha)")
    eps = best.epsilon
    if math.isnan(eps):  # pragma: no cover - formulas above never produce NaN after filtering
        raise ParameterError("rdp", rdp, "produced NaN epsilon")
    return DpConversion(max(0.0, eps), best.order, best.method)


RHO_LINEAR_MAX = 1e12
"""Largest slope of a linear RDP curve converted (mu-GDP has rho = mu^2/2 <= 5e11 for mu <= 1e6);
far beyond it the optimal order approaches 1 closer than double precision resolves."""


def rdp_linear_to_epsilon(
    rho: float, delta: float, *, methods: Iterable[str] | None = None
) -> DpConversion:
    """Conversion of the linear RDP curve ``eps_R(alpha) = rho alpha`` (valid for all alpha > 1) at
    ``delta``: minimum of Bun-Steinke's closed form and the optimised formulas 1, 3, 4
    (docs/theorems.md 1.5; paper 000's ``table_privacy_lr.py``). ``rho = 0`` gives 0. Used by the
    CLI ``--rdp-linear RHO --delta D``."""
    r = check_nonnegative("rho", rho)
    if r > RHO_LINEAR_MAX:
        raise ParameterError(
            "rho", rho, f"must be in [0, {RHO_LINEAR_MAX:g}] (epsilon about rho beyond)"
        )
    d = _check_delta(delta)
    ms = _check_methods(methods)
    if r == 0.0:
        return DpConversion(0.0, math.inf, ms[0])
    best = DpConversion(math.inf, math.nan, ms[0])
    others = tuple(m for m in ms if m != "bun-steinke")
    if others:
        # every formula's optimum lies near Bun-Steinke's order: widen the default range around it
        a_bs = 1.0 + math.sqrt(math.log(1.0 / d) / r)
        lo = 1.0 + min(1e-6, (a_bs - 1.0) * 1e-4)
        hi = 1.0 + max(1e8, (a_bs - 1.0) * 1e4)
        best = rdp_to_epsilon(lambda a: r * a, d, methods=others, alpha_bounds=(lo, hi))
    if "bun-steinke" in ms:
        e, a = epsilon_bun_steinke(r, d)
        if e < best.epsilon:
            best = DpConversion(e, a, "bun-steinke")
    return DpConversion(max(0.0, best.epsilon), best.order, best.method)


def rdp_to_delta(
    rdp: Callable[[float], float] | RdpCurve,
    epsilon: float,
    *,
    methods: Iterable[str] | None = None,
    alpha_bounds: tuple[float, float] | None = None,
) -> float:
    """Smallest delta at ``epsilon >= 0`` over the inverted conversions (docs/theorems.md 1.5):
    ``mironov`` ``log delta = (a-1)(eps_R - eps)``, ``balle2020`` ``(a-1)(eps_R - eps + log(1-1/a))
    - log a``, ``asoodeh2021`` ``(e^{(a-1) eps_R} - 1)/(a (e^{(a-1) eps} - 1))``, ``kl-tv``
    ``sqrt(1 - e^{-eps_R})``, and for linear curves ``bun-steinke`` ``exp(-(eps - rho)^2/(4 rho))``
    (eps >= rho).

    ``rdp`` is an :class:`RdpCurve` (minimised over its orders; a linear curve also over all orders
    a > 1) or a callable valid at every order a > 1 (grid in ``log(a - 1)`` over ``alpha_bounds``,
    default [1 + 1e-6, 1 + 1e8], plus bounded refinement per formula). Every value is a formula
    evaluated at a concrete order, hence valid. Clipped to [0, 1]; never NaN.
    """
    e = check_nonnegative("epsilon", epsilon)
    ms = _check_methods(methods)
    if isinstance(rdp, RdpCurve):
        best_log = 0.0
        for m in ms:
            f = _LOG_DELTA_FORMULAS.get(m)
            if f is None:
                continue
            v = _formula_on_orders(f, rdp.orders, rdp.epsilons, e)
            best_log = min(best_log, float(np.min(v)))
        if rdp.linear_rho is not None:
            rho = rdp.linear_rho
            if rho == 0.0:
                return 0.0
            if "bun-steinke" in ms and e >= rho:
                bs = -((e - rho) ** 2) / (4.0 * rho)
                best_log = min(best_log, bs + _CONVERSION_ULPS * (1.0 + abs(bs)))
            # the optimum sits near a - 1 = eps/rho: widen the default range around it
            centre = math.log(e / rho) if e > rho else 0.0
            u_grid = np.linspace(
                min(math.log(1e-6), centre - 10.0), max(math.log(1e8), centre + 10.0), 401
            )
            best_log = min(best_log, _best_log_delta_callable(lambda a: rho * a, e, ms, u_grid))
    elif callable(rdp):
        u_grid = _order_grid(alpha_bounds)
        best_log = _best_log_delta_callable(rdp, e, ms, u_grid)
    else:
        raise ParameterError("rdp", rdp, "must be an RdpCurve or a callable alpha -> eps_R(alpha)")
    return float(min(1.0, max(0.0, math.exp(best_log))))


def _best_log_delta_callable(
    rdp: Callable[[float], float],
    epsilon: float,
    methods: tuple[str, ...],
    u_grid: np.ndarray,
) -> float:
    """Smallest log delta (<= 0) of the inverted formulas for a curve valid at every order: the grid
    ``u_grid`` in ``log(a - 1)`` and a bounded refinement around each formula's best grid point."""
    alphas = 1.0 + np.exp(u_grid)
    vals = _evaluate_callable(rdp, alphas)
    best = 0.0
    for m in methods:
        f = _LOG_DELTA_FORMULAS.get(m)
        if f is None:
            continue
        grid_vals = _formula_on_orders(f, alphas, vals, epsilon)
        k = int(np.argmin(grid_vals))
        best = min(best, float(grid_vals[k]))
        if not math.isfinite(grid_vals[k]) or m == "kl-tv":
            continue

        def objective(u: float, f: _Formula = f) -> float:
            v = _formula_at_order(rdp, f, u, epsilon)
            return v if not math.isnan(v) else math.inf

        best = min(best, objective(_refine_order(objective, u_grid, k)))
    return best


# ------------------------------------------------------------------------------------------------
# the sampled Gaussian mechanism
# ------------------------------------------------------------------------------------------------

_DIRECTIONS = ("mixture-first", "literal", "max")


#: Relative rounding margin added to every sampled-Gaussian RDP value (see
#: ``sampled_gaussian_rdp``).
_RDP_REL_MARGIN = 1e-12
_U = float(np.finfo(float).eps)


def _logsumexp(x: np.ndarray) -> float:
    """``log(sum(exp(x)))`` of a 1-D array (``-inf`` when empty or all ``-inf``), as
    ``scipy.special.logsumexp`` computes it (the largest term factored out, the rest through
    ``log1p``) without its array-API dispatch, which costs ~0.1 ms per call and dominated the
    series of :func:`_log_a_frac` and :func:`_log_a_int` (thousands of calls per account)."""
    if x.size == 0:
        return -math.inf
    k = int(np.argmax(x))
    m = float(x[k])
    if not math.isfinite(m):
        return m
    rest = np.exp(x - m)
    return m + math.log1p(float(np.sum(rest)) - float(rest[k]))


def _log_a_int(q: float, sigma: float, alpha: int) -> float:
    """``log A_alpha`` for integer alpha (Mironov-Talwar-Zhang 2019; docs/theorems.md 1.9):
    ``A_alpha = sum_k C(alpha,k) (1-q)^{alpha-k} q^k exp((k^2 - k)/(2 sigma^2))``.

    Because the binomial weights sum to 1, ``A_alpha - 1 = sum_{k>=2} C(alpha,k) (1-q)^{alpha-k} q^k
    expm1((k^2 - k)/(2 sigma^2))``: all terms are positive, so ``log A_alpha = log1p(A_alpha - 1)``
    is obtained with full RELATIVE accuracy even when the RDP is tiny (q small, sigma large), where
    summing the original terms loses digits (log A ~ 1e-10 with an absolute error ~1e-16).
    """
    return _log_a_int_many(q, sigma, [alpha])[0]


def _log_a_int_many(q: float, sigma: float, alphas: list[int]) -> list[float]:
    """:func:`_log_a_int` at several integer orders: the terms of all orders in one numpy pass
    (the same operations elementwise), each order's sum by :func:`_logsumexp` as there, so the
    values are those of the scalar calls."""
    k = np.concatenate([np.arange(2, a + 1, dtype=float) for a in alphas])
    alpha = np.concatenate([np.full(a - 1, float(a)) for a in alphas])
    lg_a, lg_k, lg_ak = (
        normal.gammaln(alpha + 1.0),
        normal.gammaln(k + 1.0),
        normal.gammaln(alpha - k + 1.0),
    )
    log_c = lg_a - lg_k - lg_ak
    x = (k * k - k) / (2.0 * sigma * sigma)
    terms = log_c + k * math.log(q) + (alpha - k) * math.log1p(-q) + _log_expm1(x)
    # each term's logarithm is a sum of components of size up to alpha log alpha: its absolute
    # rounding error (not the ulp of the term) is up to a few eps times their magnitudes, which
    # at alpha = 4096 exceeds the 1e-12 relative margin (issue 8 audit)
    log_err = np.log(
        _INT_TERM_LOG_ERR
        * (
            np.abs(lg_a)
            + np.abs(lg_k)
            + np.abs(lg_ak)
            + k * abs(math.log(q))
            + (alpha - k) * abs(math.log1p(-q))
            + x
            + 1.0
        )
    )
    out, start = [], 0
    for a in alphas:
        seg = slice(start, start + a - 1)
        log_s = _logsumexp(terms[seg])
        if math.isfinite(log_s):  # sum(t_k (1 + e_k)) <= S (1 + weighted mean of e_k)
            log_s += 2.0 * math.exp(_logsumexp(terms[seg] + log_err[seg]) - log_s) + 8.0 * _U
        out.append(float(np.logaddexp(0.0, log_s)))
        start += a - 1
    return out


#: absolute rounding error of the logarithm of a term of :func:`_log_a_int_many`, per unit of
#: the magnitudes of its components (gammaln of integers comes from a table of math.lgamma,
#: correctly rounded to ~1 ulp; each product and sum adds an ulp)
_INT_TERM_LOG_ERR = 4.0 * _U


@lru_cache(maxsize=32)
def _integer_order_layout(
    alphas: tuple[int, ...],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The terms' layout of :func:`_log_a_int` for several integer orders, concatenated: ``k`` (2..
    alpha for each order), ``alpha - k``, the log binomial coefficients ``log C(alpha, k)``
    (``gammaln``, as there) and the first index of each order's segment.  It depends on the
    orders only, so a search over the noise or the rate reuses it (cached)."""
    k = np.concatenate([np.arange(2, a + 1, dtype=float) for a in alphas])
    alpha = np.concatenate([np.full(a - 1, float(a)) for a in alphas])
    log_c = (
        normal.gammaln(alpha + 1.0) - normal.gammaln(k + 1.0) - normal.gammaln(alpha - k + 1.0)
    )
    starts = np.concatenate([[0], np.cumsum([a - 1 for a in alphas])[:-1]]).astype(np.intp)
    for arr in (k, alpha, log_c, starts):
        arr.setflags(write=False)
    return k, alpha - k, log_c, starts


def mixture_first_integer_grid(
    q: float, noise_multipliers: ArrayLike, orders: ArrayLike
) -> np.ndarray:
    """The mixture-first sampled-Gaussian RDP ``log(A_alpha)/(alpha - 1)`` (Mironov-Talwar-Zhang
    2019, docs/theorems.md 1.9) for every noise multiplier (rows) at every INTEGER order >= 2
    (columns), in one numpy pass: the closed form of :func:`_log_a_int` (the ``A_alpha - 1`` sum,
    positive terms), each order's segment summed by a segmented log-sum-exp, with the relative
    margin of :func:`sampled_gaussian_rdp`.  Equal to the scalar closed form up to floating-point
    rounding (a few ulps; tested to 1e-12 relative), NOT rounded upwards beyond that margin.

    Only the locating pass of the RDP window bounds uses it (``bounds.pabi``: the order and the
    split where the exact, two-direction table is then placed); no reported value comes from it.
    ``0 < q < 1``.
    """
    qq = check_in_range("q", q, 0.0, 1.0, low_open=True, high_open=True)
    s = np.atleast_1d(np.asarray(noise_multipliers, dtype=float))
    if s.ndim != 1 or not np.all(s > 0) or not np.all(np.isfinite(s)):
        raise ParameterError("noise_multipliers", noise_multipliers, "must be finite and > 0")
    a = _check_orders(orders)
    if not np.all(a == np.round(a)) or np.any(a < 2):
        raise ParameterError("orders", orders, "must be integers >= 2")
    k, a_minus_k, log_c, starts = _integer_order_layout(tuple(int(x) for x in a.tolist()))
    base = log_c + k * math.log(qq) + a_minus_k * math.log1p(-qq)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        x = (k * k - k)[None, :] / (2.0 * s * s)[:, None]  # > 0 (k >= 2)
        # log(e^x - 1) = x + log(1 - e^-x); the second term is above -1e-17 for x > 40: only the
        # small arguments need it (the terms are then larger by < 1e-17 relative: upwards)
        small = x < 40.0
        terms = base[None, :] + x
        terms[small] += np.log(-np.expm1(-x[small]))
        m = np.maximum.reduceat(terms, starts, axis=1)
        m_safe = np.where(np.isfinite(m), m, 0.0)
        m_rep = np.repeat(m_safe, np.diff(np.append(starts, k.size)), axis=1)
        rest = np.exp(terms - m_rep)
        sums = np.add.reduceat(rest, starts, axis=1)
        log_s = np.where(np.isfinite(m), m_safe + np.log(sums), m)
        # the rounding bound of _log_a_int_many (same weighted mean of the terms' log errors)
        # |lg_a| + |lg_k| + |lg_ak| = 2 lg_a - log_c: the three log-factorials are >= 0
        lg_a = normal.gammaln(k + a_minus_k + 1.0)
        mags = 2.0 * lg_a - log_c + k * abs(math.log(qq)) + a_minus_k * abs(math.log1p(-qq)) + 1.0
        weighted = np.add.reduceat(rest * (_INT_TERM_LOG_ERR * (mags[None, :] + x)), starts, axis=1)
        log_s = np.where(np.isfinite(m), log_s + 2.0 * weighted / sums + 8.0 * _U, log_s)
        log_a = np.logaddexp(0.0, log_s)
    return np.maximum(0.0, log_a / (a - 1.0)[None, :] * (1.0 + _RDP_REL_MARGIN))


def _log_half_gauss_tail_term(k: np.ndarray, z0: float, sigma: float, upper: bool) -> np.ndarray:
    """``(k^2 - k)/(2 s^2) + log Phi(x)`` with ``x = (z0 - k)/s`` (upper=False) or ``(k - z0)/s``
    (upper=True).

    For ``x < 0`` it uses ``log Phi(x) = log(erfcx(-x/sqrt2)/2) - x^2/2`` and cancels the quadratic
    terms algebraically: ``(k^2 - k)/(2 s^2) - (k - z0)^2/(2 s^2) = (k (2 z0 - 1) - z0^2)/(2 s^2)``,
    so no precision is lost for huge |k|.
    """
    x = (k - z0) / sigma if upper else (z0 - k) / sigma
    out = np.empty_like(k)
    neg = x < 0
    kn, xn = k[neg], x[neg]
    out[neg] = (kn * (2.0 * z0 - 1.0) - z0 * z0) / (2.0 * sigma * sigma) + np.log(
        0.5 * normal.erfcx(-xn / math.sqrt(2.0))
    )
    kp, xp = k[~neg], x[~neg]
    out[~neg] = (kp * kp - kp) / (2.0 * sigma * sigma) + normal.log_ndtr(xp)
    return out


_FRAC_CHUNK = 512
_FRAC_MAX_TERMS = 50_000
_FRAC_REL_STOP = math.log(1e-13)


def _log_a_frac(
    q: float,
    sigma: float,
    alpha: float,
    series: str = "signed",
    start: tuple[float, float, int, float] | None = None,
) -> tuple[float, float] | None:
    """``log A_alpha`` for fractional alpha by MTZ19 section 3.3 (docs/theorems.md 1.9), and a bound
    on its absolute rounding error. Split at ``z0 = sigma^2 log(1/q - 1) + 1/2`` and expand both
    halves in binomial series (``j = alpha - i``):

        A_alpha = sum_i C(alpha, i) [ (1-q)^{alpha-i} q^i e^{(i^2-i)/(2s^2)} Phi((z0 - i)/s)
                                    + q^{alpha-i} (1-q)^i e^{(j^2-j)/(2s^2)} Phi((j - z0)/s) ].

    ``series="signed"`` (default) keeps the sign of ``C(alpha, i)`` (alternating for i > alpha + 1):
    that is the exact value of the integral (both binomial series converge absolutely, so summation
    and integration commute), as in TF-Privacy / Opacus. ``series="absolute"`` sums ``|C(alpha,
    i)|`` as dp_accounting 0.6 does, a strictly larger upper bound.

    Truncation: terms are summed in chunks until, past ``i > alpha + 2``, the combined term
    magnitudes are decreasing over the last chunk and below ``1e-13`` of the running total. For the
    signed series the remainder of an alternating series with decreasing magnitudes is bounded by
    the next term, so the magnitude of the last term is ADDED (upper bound). For the absolute series
    the last term times the number of terms summed so far is added (the tail decays at least like
    ``i^{-alpha-2}``).

    Returns ``(log A, err)`` with ``err = 16 u (P + N)/A`` (``P``, ``N`` the sums of positive /
    negative terms, ``u`` the unit roundoff): the cancellation-amplified rounding error of ``log
    A``.  ``start = (log P, log N, i0)`` continues from the sums of the terms below ``i0`` (as
    :func:`_log_a_frac_first_chunk_many` leaves them). Returns ``None`` when the series has not
    converged within 50,000 terms (this happens only for extreme parameters, e.g. ``q`` within
    ~1e-10 of 1, where the terms decay polynomially); the caller then uses
    :func:`_log_a_quadrature`.
    """
    log_q, log_1mq = math.log(q), math.log1p(-q)
    z0 = sigma * sigma * math.log(1.0 / q - 1.0) + 0.5
    log_gamma_a1 = normal.gammaln(alpha + 1.0)
    log_p = log_n = log_e = -math.inf
    i0 = 0
    if start is not None:  # the sums of the first chunks, already made (the same numbers)
        log_p, log_n, i0, log_e = start
    while i0 < _FRAC_MAX_TERMS:
        i = np.arange(i0, i0 + _FRAC_CHUNK, dtype=float)
        j = alpha - i
        lg_i, lg_j = normal.gammaln(i + 1.0), normal.gammaln(j + 1.0)
        log_c = log_gamma_a1 - lg_i - lg_j
        sign = normal.gammasgn(j + 1.0)
        t0 = _log_half_gauss_tail_term(i, z0, sigma, upper=False)
        t1 = _log_half_gauss_tail_term(j, z0, sigma, upper=True)
        s0 = log_c + i * log_q + j * log_1mq + t0
        s1 = log_c + j * log_q + i * log_1mq + t1
        mag = np.logaddexp(s0, s1)
        log_p, log_n = _add_chunk(log_p, log_n, mag, sign, series)
        e0, e1 = _frac_term_log_errors(
            i, j, log_gamma_a1, lg_i, lg_j, log_c, log_q, log_1mq, z0, sigma, t0, t1
        )
        log_e = float(np.logaddexp(log_e, _logsumexp(np.logaddexp(s0 + e0, s1 + e1))))
        i0 += _FRAC_CHUNK
        done = _frac_series_converged(log_p, log_n, mag, float(i[-1]), i0, alpha, series, log_e)
        if done is not None:
            return done
    return None


def _add_chunk(
    log_p: float, log_n: float, mag: np.ndarray, sign: np.ndarray, series: str
) -> tuple[float, float]:
    """The running log-sums of positive / negative terms with one chunk of term magnitudes added
    (``series="absolute"``: every term counts as positive)."""
    if series == "absolute":
        return float(np.logaddexp(log_p, _logsumexp(mag))), log_n
    if (sign > 0).any():
        log_p = float(np.logaddexp(log_p, _logsumexp(mag[sign > 0])))
    if (sign < 0).any():
        log_n = float(np.logaddexp(log_n, _logsumexp(mag[sign < 0])))
    return log_p, log_n


def _frac_term_log_errors(
    i: np.ndarray,
    j: np.ndarray,
    lg_a1: float | np.ndarray,
    lg_i: np.ndarray,
    lg_j: np.ndarray,
    log_c: np.ndarray,
    log_q: float,
    log_1mq: float,
    z0: float,
    sigma: float,
    t0: np.ndarray,
    t1: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Logarithms of bounds on the absolute rounding errors of the two halves' log-terms ``s0``,
    ``s1`` of :func:`_log_a_frac` (so a term ``e^s`` is within a factor ``1 +- e`` of its exact
    value, to first order).  Their components are up to ~alpha log alpha (log binomial
    coefficients by gammaln: measured within ``2 eps |lgamma| + 30 eps``; ``k log q``; the
    Gaussian-tail exponents), far above the unit roundoff of the term: at ``q = 0.01``, ``s =
    1000``, ``alpha = 512.5`` their neglect made the value 1.3e-9 relative too small (issue 8
    audit).  ``log C(alpha, 0) = 0`` is exact (the same gammaln value subtracted)."""
    lg = 4.0 * _U * (np.abs(lg_a1) + np.abs(lg_i) + np.abs(lg_j)) + 96.0 * _U
    lg = np.where((i == 0) & (log_c == 0.0), 0.0, lg)
    inv = 1.0 / (2.0 * sigma * sigma)

    def tail_mag(k: np.ndarray, neg: np.ndarray, t: np.ndarray) -> np.ndarray:
        # the two branches of _log_half_gauss_tail_term and their components
        quad = np.where(neg, np.abs(k * (2.0 * z0 - 1.0)) + z0 * z0, k * k + np.abs(k)) * inv
        return quad + np.abs(t)

    rest0 = np.abs(i * log_q) + np.abs(j * log_1mq) + tail_mag(i, i > z0, t0)
    rest1 = np.abs(j * log_q) + np.abs(i * log_1mq) + tail_mag(j, j < z0, t1)
    with np.errstate(divide="ignore"):
        return np.log(lg + 4.0 * _U * (rest0 + 1.0)), np.log(lg + 4.0 * _U * (rest1 + 1.0))


def _frac_series_converged(
    log_p: float,
    log_n: float,
    mag: np.ndarray,
    i_last: float,
    i0: int,
    alpha: float,
    series: str,
    log_e: float = -math.inf,
) -> tuple[float, float] | None:
    """The stopping rule of :func:`_log_a_frac` after the terms below ``i0`` (``mag``: the last
    chunk's magnitudes, ``i_last`` its last index): ``(log A, err)`` with the tail bound added, or
    None while the series has not converged.  ``log_e``: the log of the sum of the terms' rounding
    errors (:func:`_frac_term_log_errors`), added (twice, for second-order terms) to the error."""
    if not log_n < log_p:
        return None
    log_total = log_p + math.log1p(-math.exp(log_n - log_p))
    last = float(mag[-1])
    decreasing = bool(np.all(np.diff(mag[-_FRAC_CHUNK // 4 :]) <= 0))
    if not (i_last > alpha + 2 and decreasing and last < log_total + _FRAC_REL_STOP):
        return None
    tail = last + math.log(i0) if series == "absolute" else last
    log_a = float(np.logaddexp(log_total, tail))
    amplification = math.exp(float(np.logaddexp(log_p, log_n)) - log_a)
    return log_a, 16.0 * _U * amplification + 2.0 * math.exp(log_e - log_a)


def _log_a_frac_first_chunk_many(
    q: float, sigma: float, alphas: list[float], series: str
) -> list[tuple[float, float] | tuple[float, float, int, float]]:
    """:func:`_log_a_frac` at several fractional orders, the first chunk of terms of every order
    in one numpy pass (the same elementwise operations), then each order's sums, stopping rule,
    tail and error bound exactly as there: ``(log A, err)`` for an order whose series converged,
    else ``(log P, log N, i0)``, the sums so far, from which :func:`_log_a_frac` continues."""
    log_q, log_1mq = math.log(q), math.log1p(-q)
    z0 = sigma * sigma * math.log(1.0 / q - 1.0) + 0.5
    a = np.asarray(alphas, dtype=float)[:, None]
    i = np.arange(0, _FRAC_CHUNK, dtype=float)[None, :]
    j = a - i
    lg_a1, lg_i, lg_j = normal.gammaln(a + 1.0), normal.gammaln(i + 1.0), normal.gammaln(j + 1.0)
    log_c = lg_a1 - lg_i - lg_j
    sign = normal.gammasgn(j + 1.0)
    ii = np.broadcast_to(i, j.shape)
    t0 = _log_half_gauss_tail_term(ii, z0, sigma, upper=False)
    t1 = _log_half_gauss_tail_term(j, z0, sigma, upper=True)
    s0 = log_c + i * log_q + j * log_1mq + t0
    s1 = log_c + j * log_q + i * log_1mq + t1
    mags = np.logaddexp(s0, s1)
    e0, e1 = _frac_term_log_errors(
        ii,
        j,
        lg_a1,
        lg_i,
        lg_j,
        log_c,
        log_q,
        log_1mq,
        z0,
        sigma,
        t0,
        t1,
    )
    errs = np.logaddexp(s0 + e0, s1 + e1)
    out: list[tuple[float, float] | tuple[float, float, int, float]] = []
    for row, alpha in enumerate(alphas):
        mag = mags[row]
        log_p, log_n = _add_chunk(-math.inf, -math.inf, mag, sign[row], series)
        log_e = _logsumexp(errs[row])
        done = _frac_series_converged(
            log_p, log_n, mag, float(_FRAC_CHUNK - 1), _FRAC_CHUNK, alpha, series, log_e
        )
        out.append(done if done is not None else (log_p, log_n, _FRAC_CHUNK, log_e))
    return out


#: mixture-first values at fractional orders computed by the vectorised path, by (q, s, alpha,
#: series) (the scalar path has its own cache)
_FRAC_CACHE: dict[tuple[float, float, float, str], float] = {}
_FRAC_CACHE_MAX = 200_000


def _mixture_first_fractional_many(
    q: float, sigma: float, alphas: list[float], series: str
) -> dict[float, float]:
    """:func:`_rdp_mixture_first_scalar` at several fractional orders (the same values): those
    whose series converges in one chunk through :func:`_log_a_frac_first_chunk_many`, the others
    through the scalar function."""
    out: dict[float, float] = {}
    missing = []
    for a in alphas:
        v = _FRAC_CACHE.get((q, sigma, a, series))
        if v is None:
            missing.append(a)
        else:
            out[a] = v
    if missing:
        if len(_FRAC_CACHE) > _FRAC_CACHE_MAX:
            _FRAC_CACHE.clear()
        with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
            got = _log_a_frac_first_chunk_many(q, sigma, missing, series)
        for a, res in zip(missing, got):
            if len(res) == 4:  # not converged in one chunk: the scalar series continues
                v = _rdp_mixture_first_from(q, sigma, a, series, res)  # type: ignore[arg-type]
            else:
                log_a, err = res  # type: ignore[misc]
                v = max(0.0, (log_a + err) / (a - 1.0) * (1.0 + _RDP_REL_MARGIN))
            _FRAC_CACHE[(q, sigma, a, series)] = out[a] = v
    return out


def _log_mix(z: np.ndarray, log_q: float, log_1mq: float, s2: float) -> np.ndarray:
    """``log(1 + X(z)) = log(1 - q + q exp((2z - 1)/(2 s^2)))`` (vectorised, no overflow)."""
    return np.logaddexp(log_1mq, log_q + (2.0 * z - 1.0) / (2.0 * s2))


def _log_a_quadrature(q: float, sigma: float, alpha: float) -> float:
    """``log A_alpha = log E_{z ~ N(0, s^2)}[(1 + X)^alpha]``, ``X = q expm1((2z - 1)/(2 s^2))``, by
    quadrature (used when the fractional series does not converge; also valid at integer orders).

    The log-integrand ``l(z) = -z^2/(2 s^2) + alpha log(1 + X)`` may have two local maxima (near 0
    and near alpha), so it is first evaluated on a 4001-point grid over
    ``[-40 s, alpha + 1 + 40 s]`` (outside, ``l`` is below a Gaussian of std s centred in
    ``[0, alpha]``, so the neglected mass is < e^-800 relative), the best grid point is refined
    with a bounded scalar search, and ``exp(l - max)`` is integrated by ``quad`` (epsrel 1e-13)
    with the grid's local maxima as breakpoints. When ``log A < 0.01`` the integral is recomputed
    as ``A - 1 = E[h(X)]`` with the non-negative ``h(x) = (1 + x)^alpha - 1 - alpha x``
    (``E[X] = 0``) for full relative accuracy.
    """
    s2 = sigma * sigma
    log_q, log_1mq = math.log(q), math.log1p(-q)
    norm = -math.log(sigma * math.sqrt(2.0 * math.pi))
    lo, hi = -40.0 * sigma, alpha + 1.0 + 40.0 * sigma
    grid = np.linspace(lo, hi, 4001)
    lg = -np.square(grid) / (2.0 * s2) + alpha * _log_mix(grid, log_q, log_1mq, s2)
    interior = np.nonzero((lg[1:-1] >= lg[:-2]) & (lg[1:-1] >= lg[2:]))[0] + 1
    k = int(np.argmax(lg))

    def neg_l(z: float) -> float:
        return -float(-z * z / (2.0 * s2) + alpha * _log_mix(np.asarray(z), log_q, log_1mq, s2))

    a_k, b_k = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
    from scipy import integrate, optimize  # lazy: start-up (issue 11)

    res = optimize.minimize_scalar(neg_l, bounds=(a_k, b_k), method="bounded")
    l_max = max(float(lg[k]), -float(res.fun))
    peaks = sorted({float(grid[i]) for i in interior} | {float(res.x)})[:20]

    def integrand(z: float) -> float:
        return math.exp(-neg_l(z) - l_max)

    val, _ = integrate.quad(integrand, lo, hi, points=peaks, epsabs=0.0, epsrel=1e-13, limit=1000)
    log_a = math.log(val) + l_max + norm
    if log_a < 0.01:

        def h_density(z: float) -> float:
            x = q * math.expm1((2.0 * z - 1.0) / (2.0 * s2))
            return math.exp(-z * z / (2.0 * s2) + norm) * _binomial_remainder_scalar(x, alpha)

        pts = sorted({0.0, 0.5, 1.0, alpha, *peaks})[:20]
        a_m1, _ = integrate.quad(
            h_density, lo, hi, points=pts, epsabs=0.0, epsrel=1e-13, limit=1000
        )
        log_a = math.log1p(max(a_m1, 0.0))
    return log_a


@lru_cache(maxsize=65536)
def _rdp_mixture_first_scalar(q: float, sigma: float, alpha: float, series: str) -> float:
    """``log(A_alpha)/(alpha - 1)`` rounded up: relative margin ``_RDP_REL_MARGIN`` and, for
    fractional orders, the absolute rounding bound of ``log A`` from :func:`_log_a_frac`."""
    return _rdp_mixture_first_from(q, sigma, alpha, series, None)


def _rdp_mixture_first_from(
    q: float, sigma: float, alpha: float, series: str, start: tuple[float, float, int, float] | None
) -> float:
    """:func:`_rdp_mixture_first_scalar`, the fractional series continued from ``start`` (see
    :func:`_log_a_frac`)."""
    if float(alpha).is_integer():
        log_a, err = _log_a_int(q, sigma, int(alpha)), 0.0
    else:
        frac = _log_a_frac(q, sigma, alpha, series, start)
        if frac is None:  # documented: extreme q, series too slow -> exact integral by quadrature
            log_a, err = _log_a_quadrature(q, sigma, alpha), 1e-13
        else:
            log_a, err = frac
    return max(0.0, (log_a + err) / (alpha - 1.0) * (1.0 + _RDP_REL_MARGIN))


def _binomial_remainder_scalar(x: float, beta: float) -> float:
    """``h(x) = (1 + x)^beta - 1 - beta x`` for x > -1, accurately (>= 0 when beta < 0 or beta > 1).

    Where ``|x| < 0.05`` and ``|beta x| < 0.5`` the binomial series ``sum_{k>=2} C(beta, k) x^k``
    (25 terms) avoids the cancellation of the direct form: the ratio of consecutive terms is
    ``|(beta - k + 1) x / k| <= 0.5/k + 0.05``, so the first term left out is below 1e-20 of the
    first (and h is at least 0.78 of the first term).  Elsewhere ``expm1(beta log1p(x)) - beta x``,
    whose cancellation costs at most ``~4e-16 / |beta x|`` relative there.  (The series alone at
    ``|x| < 0.05`` was 8.8e-6 too SMALL at beta = -1000, x = -0.01, where its terms grow.)
    """
    if abs(x) < 0.05 and abs(beta * x) < 0.5:
        term = beta * (beta - 1.0) / 2.0 * x * x
        acc = term
        for k in range(3, 27):
            term = term * (beta - k + 1.0) / k * x
            acc += term
        return acc
    try:
        return math.expm1(beta * math.log1p(x)) - beta * x
    except OverflowError:
        return math.inf


@lru_cache(maxsize=65536)
def _rdp_literal_scalar(q: float, sigma: float, alpha: float) -> float:
    """``S_alpha(q, s) = D_alpha(N(0,s^2) || (1-q)N(0,s^2) + q N(1,s^2))`` by quadrature
    (docs/theorems.md 1.9):

        S_alpha = log I / (alpha - 1),   I = E_{z ~ N(0, s^2)}[ (1 + X)^{1 - alpha} ],
        X = q expm1((2z - 1)/(2 s^2)).

    Large values (log I >= 0.01): the log-integrand ``l(z) = -z^2/(2s^2) + (1 - alpha) log(1 + X)``
    is concave with curvature <= -1/s^2, so it has a single mode ``z_m`` in ``[-alpha, 1]`` (brentq
    on l') and ``exp(l - l(z_m)) <= exp(-(z - z_m)^2/(2 s^2))``; ``exp(l - l(z_m))`` is integrated
    over ``z_m +- 40 s`` (neglected tails < e^-800 relative) with ``quad(epsrel=1e-13)``. Small
    values (log I < 0.01, where ``log I`` would lose relative accuracy): since ``E[X] = 0``, ``I - 1
    = E[h(X)]`` with ``h(x) = (1 + x)^{1-alpha} - 1 - (1 - alpha) x >= 0`` (convex), integrated with
    ``quad`` on ``[min(z_m, 0) - 40 s, 1 + 40 s]``, and ``log I = log1p(I - 1)``. The result is
    clipped at 0 and increased by the relative margin 1e-10 (quadrature tolerance).
    """
    s2 = sigma * sigma
    log_1mq, log_q = math.log1p(-q), math.log(q)

    def dlog(z: float) -> float:
        u = (2.0 * z - 1.0) / (2.0 * s2)
        w = normal.expit(u + log_q - log_1mq)  # q e^u / (1 - q + q e^u)
        return -z / s2 + (1.0 - alpha) * w / s2

    from scipy import integrate, optimize  # lazy: start-up (issue 11)

    z_m = optimize.brentq(dlog, -alpha, 1.0, xtol=1e-13 * max(1.0, alpha), maxiter=500)

    def log_integrand(z: float) -> float:
        u = (2.0 * z - 1.0) / (2.0 * s2)
        a_, b_ = log_1mq, log_q + u
        lmix = max(a_, b_) + math.log1p(math.exp(-abs(a_ - b_)))
        return -z * z / (2.0 * s2) + (1.0 - alpha) * lmix

    l_m = log_integrand(z_m)
    width = 40.0 * sigma
    val, _ = integrate.quad(
        lambda z: math.exp(log_integrand(z) - l_m),
        z_m - width,
        z_m + width,
        points=[z_m],
        epsabs=0.0,
        epsrel=1e-13,
        limit=500,
    )
    norm = -math.log(sigma * math.sqrt(2.0 * math.pi))
    log_i = math.log(val) + l_m + norm
    if log_i < 0.01:
        beta = 1.0 - alpha

        def h_density(z: float) -> float:
            x = q * math.expm1((2.0 * z - 1.0) / (2.0 * s2))
            return math.exp(-z * z / (2.0 * s2) + norm) * _binomial_remainder_scalar(x, beta)

        lo = min(z_m, 0.0) - width
        hi = 1.0 + width
        i_m1, _ = integrate.quad(
            h_density,
            lo,
            hi,
            points=sorted({z_m, 0.0, 0.5, 1.0}),
            epsabs=0.0,
            epsrel=1e-13,
            limit=500,
        )
        log_i = math.log1p(max(i_m1, 0.0))
    return max(0.0, log_i / (alpha - 1.0)) * (1.0 + 1e-10)


#: the vectorised literal quadrature (:func:`_rdp_literal_many`): used where ``s >=`` this (smooth
#: integrands on the scale of s; below it scipy's adaptive ``quad`` of :func:`_rdp_literal_scalar`)
_LITERAL_RULE_MIN_S = 2.0
#: Gauss-Legendre nodes per panel of the coarse rule (the fine rule has twice as many)
_LITERAL_RULE_NODES = 8
#: panels per noise std s (panel width s / 2)
_LITERAL_RULE_PANELS_PER_S = 2
#: accepted relative difference between the two rules (else: the scalar quadrature)
_LITERAL_RULE_TOL = 1e-14
#: relative margin of the vectorised rule: the scalar quadrature's 1e-10 plus 5e-11, which covers
#: the difference of the two quadratures (each within ~1e-13 of the integral; in the large-value
#: branch an absolute 2e-13 on log I >= 0.01 is 2e-11 relative), so that its values are never
#: below the scalar quadrature's (tested on a grid of (q, s, alpha))
_LITERAL_RULE_MARGIN = 1.5e-10


@lru_cache(maxsize=8)
def _gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the n-point Gauss-Legendre rule on [0, 1]."""
    x, w = np.polynomial.legendre.leggauss(n)
    return (x + 1.0) / 2.0, w / 2.0


def _panel_rule(
    func: Callable[[np.ndarray], np.ndarray], lo: np.ndarray, hi: np.ndarray, panels: int
) -> tuple[np.ndarray, np.ndarray]:
    """Composite Gauss-Legendre quadrature of ``func`` (vectorised: one row per integral) over
    ``[lo, hi]`` cut into ``panels`` equal panels, with the coarse and the fine rule
    (``_LITERAL_RULE_NODES`` and twice as many nodes per panel): (fine value, sum over the panels
    of |fine - coarse|), the latter an error estimate of the coarse rule and thus, for smooth
    integrands, far above the fine rule's error."""
    width = (hi - lo) / panels
    starts = lo[:, None] + width[:, None] * np.arange(panels)[None, :]
    out = []
    for n in (_LITERAL_RULE_NODES, 2 * _LITERAL_RULE_NODES):
        x, w = _gauss_legendre(n)
        z = starts[:, :, None] + width[:, None, None] * x[None, None, :]
        out.append((func(z) * w).sum(axis=2) * width[:, None])
    coarse, fine = out
    return fine.sum(axis=1), np.abs(fine - coarse).sum(axis=1)


def _binomial_remainder_many(x: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """:func:`_binomial_remainder_scalar` elementwise: the same two formulas and switch (the
    24-term series summed by Horner's rule with the same coefficients ``C(beta, k)``)."""
    small = (np.abs(x) < 0.05) & (np.abs(beta * x) < 0.5)
    xs = np.where(small, x, 0.0)
    coefs = [beta * (beta - 1.0) / 2.0]
    for k in range(3, 27):
        coefs.append(coefs[-1] * (beta - k + 1.0) / k)
    acc = coefs[-1]
    for c in reversed(coefs[:-1]):
        acc = acc * xs + c
    acc = acc * xs * xs
    with np.errstate(over="ignore", invalid="ignore"):
        xl = np.where(small, 0.0, x)
        direct = np.expm1(beta * np.log1p(xl)) - beta * xl
    return np.where(small, acc, direct)


#: P(N(0, 1) < -14): the tails beyond 14 s that the vectorised rule leaves out are bounded by
#: multiples of it (see :func:`_rdp_literal_many`)
_PHI_MINUS_14 = 0.5 * math.erfc(14.0 / math.sqrt(2.0))


def _rdp_literal_many(q: float, sigma: float, alphas: Sequence[float]) -> list[float]:
    """:func:`_rdp_literal_scalar` for several orders at once (issue 11: near q = 1 every order
    needs the literal quadrature, 2-5 ms each with scipy's adaptive ``quad``).

    The same integrals and branch (docs/theorems.md 1.9), by a vectorised composite
    Gauss-Legendre rule on panels of width s/2 (8 and 16 nodes per panel, compared): the mode
    ``z_m`` of the concave log-integrand by bisection of its decreasing derivative on
    ``[-alpha, 1]``; ``I = E[(1 + X)^(1-alpha)]`` as ``exp(l - l(z_m))`` over ``z_m +- 14 s``
    (``l'' <= -1/s^2``: the neglected tails are below ``e^-98`` of the peak, while the integral is
    at least the peak times ``sqrt(2 pi) s / sqrt(1 + (alpha-1)/(4 s^2))``); where ``log I <
    0.01``, ``I - 1 = E[h(X)]`` over ``[min(z_m, 0) - 14 s, 1 + 14 s]`` (the scalar version
    integrates 40 s beyond; the tails left out are bounded in closed form by multiples of
    ``Phi(-14)`` and must be below 1e-17 of the value, else the scalar quadrature is used).  An
    order whose two rules differ by more than ``_LITERAL_RULE_TOL`` (relative), and every order
    when ``s < _LITERAL_RULE_MIN_S``, gets the scalar quadrature (the same value as before).
    The result carries the relative margin ``_LITERAL_RULE_MARGIN`` (1.5e-10 instead of 1e-10),
    which keeps it above the scalar quadrature's value.
    """
    alist = [float(x) for x in alphas]
    if sigma < _LITERAL_RULE_MIN_S or not alist:
        return [_rdp_literal_scalar(q, sigma, x) for x in alist]
    a = np.asarray(alist)
    s2 = sigma * sigma
    log_1mq, log_q = math.log1p(-q), math.log(q)

    def log_mix(z: np.ndarray) -> np.ndarray:
        return np.logaddexp(log_1mq, log_q + (2.0 * z - 1.0) / (2.0 * s2))

    lo, hi = -a.copy(), np.ones_like(a)
    for _ in range(100):  # l'(z) = (-z + (1 - alpha) w(z)) / s^2 is decreasing; > 0 at -alpha
        mid = 0.5 * (lo + hi)
        u = log_q + (2.0 * mid - 1.0) / (2.0 * s2)
        w = np.exp(u - np.logaddexp(log_1mq, u))
        pos = -mid + (1.0 - a) * w > 0.0
        lo, hi = np.where(pos, mid, lo), np.where(pos, hi, mid)
    z_m = 0.5 * (lo + hi)
    beta = (1.0 - a)[:, None, None]
    zc = z_m[:, None, None]
    l_m = -z_m * z_m / (2.0 * s2) + (1.0 - a) * log_mix(z_m)

    def bump(z: np.ndarray) -> np.ndarray:
        lz = -z * z / (2.0 * s2) + beta * log_mix(z)
        lzc = -zc * zc / (2.0 * s2) + beta * log_mix(zc)
        return np.exp(lz - lzc)

    panels = 28 * _LITERAL_RULE_PANELS_PER_S  # z_m +- 14 s
    val, err = _panel_rule(bump, z_m - 14.0 * sigma, z_m + 14.0 * sigma, panels)
    norm = -math.log(sigma * math.sqrt(2.0 * math.pi))
    with np.errstate(divide="ignore", invalid="ignore"):
        log_i = np.log(val) + l_m + norm
    # and only where the panels are at most twice the narrowest the integrand can be (its
    # log-curvature is at most 1/s^2 + (alpha - 1)/(4 s^4)): narrower bumps get the adaptive quad
    resolved = a <= 1.0 + 60.0 * s2
    ok = np.isfinite(log_i) & (err <= _LITERAL_RULE_TOL * val) & resolved
    small = ok & (log_i < 0.01)
    if small.any():
        sub = np.nonzero(small)[0]
        b_sub = beta[sub]

        def h_density(z: np.ndarray) -> np.ndarray:
            x = q * np.expm1((2.0 * z - 1.0) / (2.0 * s2))
            return np.exp(-z * z / (2.0 * s2) + norm) * _binomial_remainder_many(x, b_sub)

        lo_s = np.minimum(z_m[sub], 0.0) - 14.0 * sigma
        hi_s = np.full(sub.shape, 1.0 + 14.0 * sigma)
        n_pan = math.ceil(float(np.max(hi_s - lo_s)) / sigma * _LITERAL_RULE_PANELS_PER_S)
        i_m1, err_s = _panel_rule(h_density, lo_s, hi_s, n_pan)
        # what lies beyond: |h(X)| <= (1 + X)^beta + 1 + |beta| q (1 + r), r = X/q + 1, and
        # outside the interval |z - z_m| > 14 s, |z| > 14 s and |z - 1| > 14 s, so
        # (1 + X)^beta phi(z) <= I-density peak x exp(-(z - z_m)^2 / (2 s^2)) (l'' <= -1/s^2),
        # P(tail) <= 2 Phi(-14) and E[r; tail] = P(N(1, s^2) in tail) <= 2 Phi(-14)
        peak = np.exp(l_m[sub] + norm)
        tail = (
            2.0
            * _PHI_MINUS_14
            * (peak * sigma * math.sqrt(2.0 * math.pi) + 1.0 + 2.0 * np.abs(1.0 - a[sub]) * q)
        )
        good = (
            np.isfinite(i_m1)
            & (i_m1 >= 0.0)
            & (err_s <= _LITERAL_RULE_TOL * i_m1)
            & (tail <= 1e-3 * _LITERAL_RULE_TOL * i_m1)
        )
        log_i[sub] = np.log1p(np.maximum(i_m1, 0.0))
        ok[sub[~good]] = False
    out = []
    for k, alpha in enumerate(alist):
        if ok[k]:
            out.append(max(0.0, float(log_i[k]) / (alpha - 1.0)) * (1.0 + _LITERAL_RULE_MARGIN))
        else:
            out.append(_rdp_literal_scalar(q, sigma, alpha))
    return out


def sampled_gaussian_rdp(
    q: float,
    noise_multiplier: float,
    orders: ArrayLike | None = None,
    direction: str = "max",
    *,
    fractional_series: str = "signed",
) -> np.ndarray:
    """RDP of one step of the Poisson-sampled Gaussian mechanism with rate ``q`` and noise
    multiplier ``s`` (noise std / sensitivity), at ``orders`` (default :data:`DEFAULT_ORDERS`);
    docs/theorems.md 1.9.

    ``direction``:

    * ``"mixture-first"``: ``D_alpha((1-q)N(0,s^2) + qN(1,s^2) || N(0,s^2))``
      ``= log(A_alpha)/(alpha - 1)`` (Mironov-Talwar-Zhang 2019): integer orders by the closed form
      in log space, fractional orders by the two-series expansion (``fractional_series="signed"``,
      the exact value, default; ``"absolute"`` gives dp_accounting's looser bound). Equal to
      dp_accounting / Opacus at integer orders. Why signed: the expansion is exact (absolutely
      convergent binomial series), the truncation remainder is bounded and ADDED, and tests check
      it against 40-digit quadrature of ``A_alpha`` (agreement ~1e-12); the absolute-value variant
      is only a looser bound with no extra safety. If the series has not converged after 50,000
      terms (only for extreme q, e.g. within ~1e-10 of 1), ``A_alpha`` is computed by quadrature of
      its defining integral instead (same exact quantity, see ``_log_a_quadrature``).
    * ``"literal"``: AT22 Def. 2.10, ``D_alpha(N(0,s^2) || (1-q)N(0,s^2) + qN(1,s^2))``, by
      quadrature.
    * ``"max"`` (default): the larger of the two, a valid RDP bound for the sampled Gaussian under
      add/remove adjacency whatever the order of the pair (the accountant must not assume which
      direction dominates).

    ``q`` in [0, 1] (``q = 0`` gives 0; ``q = 1`` gives the Gaussian ``alpha / (2 s^2)``); ``s >
    0``. Returns an array with the shape of ``orders`` (1-D).

    Rounding is upwards: mixture-first values carry a relative margin of 1e-12 (plus, at fractional
    orders, the series' absolute rounding bound on log A divided by alpha - 1), literal values
    1e-10, so the returned numbers exceed the exact divergences by at most those amounts and are
    never below them by floating-point error. Results are cached per (q, s, alpha).
    """
    qq = check_in_range("q", q, 0.0, 1.0)
    s = check_positive("noise_multiplier", noise_multiplier)
    a = DEFAULT_ORDERS if orders is None else _check_orders(orders)
    if direction not in _DIRECTIONS:
        raise ParameterError("direction", direction, f"must be one of {_DIRECTIONS}")
    if fractional_series not in ("signed", "absolute"):
        raise ParameterError(
            "fractional_series", fractional_series, "must be 'signed' or 'absolute'"
        )
    if qq == 0.0:
        return np.zeros(a.shape)
    if qq == 1.0:
        return a / (2.0 * s * s)
    out = np.empty(a.shape)
    # "max": the literal direction costs a quadrature per order; it is skipped where a closed-form
    # bound (literal_taylor_upper, then literal_split_upper) already shows it below the
    # mixture-first value
    lit_upper = literal_taylor_upper(qq, s, a) if direction == "max" else None
    integer_mf: dict[float, float] = {}
    if direction in ("mixture-first", "max"):
        whole = [float(x) for x in a.tolist() if float(x).is_integer()]
        if len(whole) > 2:  # one vectorised pass over their closed forms (same numbers)
            log_as = _log_a_int_many(qq, s, [int(x) for x in whole])
            integer_mf = {
                x: max(0.0, la / (x - 1.0) * (1.0 + _RDP_REL_MARGIN))
                for x, la in zip(whole, log_as)
            }
    mfs = np.zeros(a.shape)
    if direction in ("mixture-first", "max"):
        fractional = [float(x) for x in a.tolist() if not float(x).is_integer()]
        if len(fractional) > 2:  # one vectorised pass over their series' first chunks
            integer_mf.update(_mixture_first_fractional_many(qq, s, fractional, fractional_series))
        for k, alpha in enumerate(a.tolist()):
            known = integer_mf.get(float(alpha))
            mfs[k] = (
                known
                if known is not None
                else _rdp_mixture_first_scalar(qq, s, float(alpha), fractional_series)
            )
    if lit_upper is not None:
        # where the Taylor bound does not clear the mixture-first value, the tighter split bound
        # (small noise) often does: only the orders that neither clears need a quadrature
        unclear = ~(lit_upper * (1.0 + _FILTER_REL_MARGIN) <= mfs)
        if unclear.any():
            lit_upper = lit_upper.copy()
            lit_upper[unclear] = np.minimum(
                lit_upper[unclear], literal_split_upper(qq, s, a[unclear])
            )
    need = [
        k
        for k in range(a.size)
        if direction == "literal"
        or (lit_upper is not None and not lit_upper[k] * (1.0 + _FILTER_REL_MARGIN) <= mfs[k])
    ]
    lits = np.zeros(a.shape)
    lits[need] = _rdp_literal_orders(qq, s, [float(a[k]) for k in need])
    for k in range(a.size):
        out[k] = max(float(mfs[k]), float(lits[k]))
    return out


def _rdp_literal_orders(q: float, sigma: float, alphas: list[float]) -> list[float]:
    """The literal direction at ``alphas``, remembered per (q, s, alpha) like the scalar
    quadrature: the orders not seen yet go through :func:`_rdp_literal_many` together."""
    missing = sorted({x for x in alphas if (q, sigma, x) not in _LITERAL_CACHE})
    if missing:
        if len(_LITERAL_CACHE) + len(missing) > 65536:
            _LITERAL_CACHE.clear()
        for x, v in zip(missing, _rdp_literal_many(q, sigma, missing)):
            _LITERAL_CACHE[(q, sigma, x)] = v
    return [_LITERAL_CACHE[(q, sigma, x)] for x in alphas]


_LITERAL_CACHE: dict[tuple[float, float, float], float] = {}


#: relative margin of the literal-direction filter of :func:`sampled_gaussian_rdp` (far above the
#: quadrature's 1e-10 and the rounding of :func:`literal_taylor_upper`)
_FILTER_REL_MARGIN = 1e-8


def literal_taylor_upper(q: float, noise_multiplier: float, orders: ArrayLike) -> np.ndarray:
    """A closed-form UPPER bound on the literal direction
    ``D_alpha(N(0,s^2) || (1-q)N(0,s^2) + qN(1,s^2))`` (AT22 Def. 2.10; docs/theorems.md 1.9),
    vectorised over ``orders``; ``inf`` where it overflows or ``q = 1``.

    With ``X = q (r - 1)``, ``r = exp((2z - 1)/(2 s^2))``, ``z ~ N(0, s^2)`` and
    ``beta = alpha - 1``, the literal direction is ``log E[(1 + X)^(-beta)] / beta``.  Taylor's
    theorem with the Lagrange remainder for ``f(x) = (1 + x)^(-beta)`` at 0, whose fourth
    derivative is
    ``beta(beta+1)(beta+2)(beta+3) (1 + xi)^(-beta-4)`` with ``(1 + xi)^(-beta-4) <= 1`` for
    ``x >= 0`` and ``<= (1-q)^(-beta-4)`` for ``-q <= x < 0``, gives, since ``E[X] = 0`` and
    ``|X| <= q`` where ``X < 0``::

        E[(1+X)^(-beta)] - 1 <= beta(beta+1)/2 m2 - beta(beta+1)(beta+2)/6 m3
                                + beta(beta+1)(beta+2)(beta+3)/24 (m4 + ((1-q)^(-beta-4) - 1) q^4)

    with the exact moments ``m_k = q^k E[(r-1)^k]`` (``E[r^j] = exp(j(j-1) t/2)``, ``t = 1/s^2``):
    ``E[(r-1)^2] = e^t - 1``, ``E[(r-1)^3] = (e^(3t) - 1) - 3(e^t - 1)`` and
    ``E[(r-1)^4] = (e^(6t) - 1) - 4(e^(3t) - 1) + 6(e^t - 1)``.  Rounding is bounded componentwise
    (each cancelling difference is taken at its unfavourable end) and a relative margin 1e-12 is
    added.

    The mixture-first direction has the same second-order term and a POSITIVE third-order term where
    this bound has a negative one, so for small ``q`` (roughly ``q E[(r-1)^4] < E[(r-1)^3]``) the
    bound lies below the mixture-first value, and the maximum of the two directions needs no
    quadrature (:func:`sampled_gaussian_rdp`, ``direction="max"``).  At small noise, where the
    moments explode, ``(1 + X)^(-beta) <= (1 - q)^(-beta)`` gives the bound ``log(1/(1 - q))``; the
    smaller of the two is returned.
    """
    a = _check_orders(orders)
    qq = check_in_range("q", q, 0.0, 1.0)
    s = check_positive("noise_multiplier", noise_multiplier)
    if qq == 0.0:
        return np.zeros(a.shape)
    t = 1.0 / (s * s)
    if qq == 1.0:
        return np.full(a.shape, math.inf)
    if 6.0 * t > 700.0:
        return np.full(a.shape, -math.log1p(-qq) * (1.0 + 1e-12))
    b = a - 1.0
    u8 = 8.0 * _U
    e1, e3, e6 = math.expm1(t), math.expm1(3.0 * t), math.expm1(6.0 * t)
    m2 = e1 * (1.0 + u8)
    m3_low = max(0.0, (e3 - 3.0 * e1) - u8 * (e3 + 3.0 * e1))
    m4_up = (e6 - 4.0 * e3 + 6.0 * e1) + u8 * (e6 + 4.0 * e3 + 6.0 * e1)
    q2, q3, q4 = qq * qq, qq**3, qq**4
    with np.errstate(over="ignore", invalid="ignore"):
        c4 = np.expm1(-(b + 4.0) * math.log1p(-qq)) * (1.0 + u8)
        c_2 = b * (b + 1.0) / 2.0
        c_3 = c_2 * (b + 2.0) / 3.0
        c_4 = c_3 * (b + 3.0) / 4.0
        pos = c_2 * m2 * q2 + c_4 * (m4_up + c4) * q4
        j = np.maximum(pos - c_3 * m3_low * q3, 0.0) + u8 * (pos + c_3 * m3_low * q3)
        out = np.log1p(j) / b * (1.0 + 1e-12)
    out = np.where(np.isfinite(out), out, math.inf)
    # (1 + X)^(-beta) <= (1 - q)^(-beta): the literal direction never exceeds log(1/(1-q)), the
    # better bound at small noise, where the moments above explode
    return np.minimum(out, -math.log1p(-qq) * (1.0 + 1e-12))


def _truncated_lognormal_moments(
    z_lo: np.ndarray | float, z_hi: np.ndarray | float, sigma: float
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``E[r^j 1{z_lo < z < z_hi}]`` for j = 0..4, ``r = exp((2z - 1)/(2 s^2))``, ``z ~ N(0,
    s^2)``: completing the square, ``exp(j (j - 1) t / 2) P(N(j, s^2) in (z_lo, z_hi))``, ``t =
    1/s^2``.  Also a bound on each value's magnitude for the rounding margin (the two normal
    tails whose difference is taken, each times the exponential factor)."""
    t = 1.0 / (sigma * sigma)
    vals, mags = [], []
    for j in range(5):
        lo = (np.asarray(z_lo, dtype=float) - j) / sigma
        hi = (np.asarray(z_hi, dtype=float) - j) / sigma
        upper_tail = lo > 0  # take the difference of the smaller tails (accurate)
        a = np.where(upper_tail, normal.ndtr(-lo), normal.ndtr(hi))
        b = np.where(upper_tail, normal.ndtr(-hi), normal.ndtr(lo))
        e = math.exp(j * (j - 1) * t / 2.0)
        vals.append(e * np.maximum(a - b, 0.0))
        mags.append(e * (a + b))
    return vals, mags


def _polynomial_expectation(
    coefs: list[np.ndarray | float],
    q: float,
    moments: tuple[list[np.ndarray], list[np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """``E[sum_k coefs[k] X^k 1{region}]`` with ``X = q (r - 1)`` expanded in the truncated moments
    of ``r`` (``(r - 1)^k`` by the binomial theorem), and the sum of the absolute values of the
    terms (for the rounding margin)."""
    vals, mags = moments
    total = np.zeros(np.broadcast(*[np.asarray(c) for c in coefs], vals[0]).shape)
    mag = np.zeros_like(total)
    for k, ck in enumerate(coefs):
        ck = np.asarray(ck, dtype=float)
        for j in range(k + 1):
            w = ck * (q**k * math.comb(k, j) * (-1.0) ** (k - j))
            total = total + w * vals[j]
            mag = mag + np.abs(w) * mags[j]
    return total, mag


def literal_split_upper(q: float, noise_multiplier: float, orders: ArrayLike) -> np.ndarray:
    """A second closed-form UPPER bound on the literal direction ``D_alpha(N(0,s^2) || (1-q)N(0,s^2)
    + qN(1,s^2))`` (AT22 Def. 2.10; docs/theorems.md 1.9), much tighter than
    :func:`literal_taylor_upper` at small noise (s ~ 1), where that one's fourth moment explodes.

    With ``X = q (r - 1)``, ``r = exp((2z - 1)/(2 s^2))``, ``z ~ N(0, s^2)``, ``beta = alpha - 1``
    and ``f(x) = (1 + x)^(-beta)`` (decreasing, derivatives of alternating sign), the literal
    direction is ``log E f(X) / beta`` and ``E f(X) - 1 = E[f(X) - 1 + beta X]`` (``E X = 0``).
    Pointwise, with ``c_k = beta (beta+1) ... (beta+k-1) / k!`` and ``x* = c_3 / c_4 = 4/(beta+3)``:

    * ``-q < x < 0`` (z < 1/2): Taylor with the Lagrange remainder of order 4,
      ``f(x) <= 1 - beta x + c_2 x^2 - c_3 x^3 + c_4 (1 - q)^(-beta-4) x^4``;
    * ``0 <= x <= x*``: the order-5 remainder is negative, ``f(x) <= 1 - beta x + c_2 x^2 - c_3 x^3
      + c_4 x^4``;
    * ``x > x*``: ``f(x) <= f(x*)`` (evaluated at ``x* (1 - 1e-9)``, below the rounded region
      boundary).

    Each region's polynomial in ``X`` has a closed-form expectation through the truncated moments
    ``E[r^j 1{z in A}] = exp(j (j-1)/(2 s^2)) P(N(j, s^2) in A)``.  Rounding: ``1e-12`` times the
    sum of the absolute values of all terms is added, and a relative margin ``1e-12`` on the
    result.
    ``inf`` where it overflows (``6/s^2 > 700``) or is not finite; vectorised over ``orders``.
    """
    a = _check_orders(orders)
    qq = check_in_range("q", q, 0.0, 1.0)
    s = check_positive("noise_multiplier", noise_multiplier)
    if qq == 0.0:
        return np.zeros(a.shape)
    t = 1.0 / (s * s)
    if qq == 1.0 or 6.0 * t > 700.0:
        return np.full(a.shape, math.inf)
    b = a - 1.0
    c2 = b * (b + 1.0) / 2.0
    c3 = c2 * (b + 2.0) / 3.0
    c4 = c3 * (b + 3.0) / 4.0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        c4_neg = c4 * np.exp(-(b + 4.0) * math.log1p(-qq))
        x_star = 4.0 / (b + 3.0)
        z_star = 0.5 + s * s * np.log1p(x_star / qq)
        f_star = np.exp(-b * np.log1p(x_star * (1.0 - 1e-9)))
        neg = _polynomial_expectation(
            [0.0, 0.0, c2, -c3, c4_neg], qq, _truncated_lognormal_moments(-math.inf, 0.5, s)
        )
        mid = _polynomial_expectation(
            [0.0, 0.0, c2, -c3, c4], qq, _truncated_lognormal_moments(0.5, z_star, s)
        )
        top = _polynomial_expectation(
            [f_star - 1.0, b], qq, _truncated_lognormal_moments(z_star, math.inf, s)
        )
        j = neg[0] + mid[0] + top[0] + 1e-12 * (neg[1] + mid[1] + top[1])
        out = np.log1p(np.maximum(j, 0.0)) / b * (1.0 + 1e-12)
    return np.where(np.isfinite(out), out, math.inf)


# ------------------------------------------------------------------------------------------------
# AT22 Lemma 2.12 (Mironov-Talwar-Zhang Thm 11)
# ------------------------------------------------------------------------------------------------


def _lemma_2_12_margins(q: float, sigma: float, alpha: float) -> tuple[float, float]:
    """Slack of the two order conditions of Mironov et al. Thm 11 at ``alpha`` (both must be >= 0):

    * ``M sigma^2 / 2 - log(sigma^2) - alpha``;
    * ``M^2 sigma^2 / 2 - log(5 sigma^2) - alpha (M + log(q alpha) + 1/(2 sigma^2))`` (the
      denominator ``M + log(q alpha) + 1/(2 sigma^2) = log(q alpha + alpha/(alpha - 1)) + 1/(2
      sigma^2)`` is > 0),

    with ``M = log(1 + 1/(q (alpha - 1)))``."""
    M = math.log1p(1.0 / (q * (alpha - 1.0)))
    s2 = sigma * sigma
    g1 = M * s2 / 2.0 - math.log(s2) - alpha
    g2 = (
        M * M * s2 / 2.0 - math.log(5.0 * s2) - alpha * (M + math.log(q * alpha) + 1.0 / (2.0 * s2))
    )
    return g1, g2


def lemma_2_12_applies(q: float, sigma: float, alpha: float) -> bool:
    """True iff AT22 Lemma 2.12 (Mironov-Talwar-Zhang 2019 Thm 11) applies: ``q in (0, 1/5)``,
    ``sigma >= 4`` and ``1 < alpha`` satisfying both order conditions at alpha (see
    :func:`alpha_star`); docs/theorems.md 1.9. The open interval for q is the stricter of the two
    readings (applies less often)."""
    qq = check_in_range("q", q, 0.0, 1.0)
    s = check_positive("sigma", sigma)
    a = check_positive("alpha", alpha)
    if not (0.0 < qq < 0.2 and s >= 4.0 and a > 1.0):
        return False
    g1, g2 = _lemma_2_12_margins(qq, s, a)
    return g1 >= 0.0 and g2 >= 0.0


def alpha_star(q: float, sigma: float) -> float:
    """``alpha*(q, sigma)``: the largest alpha such that every order in ``(1, alpha]`` satisfies
    both order conditions of Lemma 2.12 (docs/theorems.md 1.9 last bullet). Found by scanning
    ``log(alpha
    - 1)`` from 1e-8 upwards for the FIRST violation and refining with brentq, so it never
    over-states the range. Requires ``q in (0, 1/5)`` and ``sigma >= 4``; returns 1.0 if no order
    qualifies."""
    qq = check_in_range("q", q, 0.0, 0.2, low_open=True, high_open=True)
    s = check_in_range("sigma", sigma, 4.0, math.inf, high_open=True)

    from scipy import optimize  # lazy: ~0.2 s of start-up (issue 11)

    def h(a: float) -> float:
        return min(_lemma_2_12_margins(qq, s, a))

    grid = 1.0 + np.exp(np.linspace(math.log(1e-8), math.log(1e9), 2000))
    prev = None
    for a in grid.tolist():
        if h(a) < 0.0:
            if prev is None:
                return 1.0
            root = optimize.brentq(h, prev, a, xtol=1e-12, rtol=1e-14, maxiter=500)
            # nudge down so that the returned order itself satisfies the conditions
            step = root * 2.0**-52
            while h(root) < 0.0 and root > prev:
                root = max(prev, root - step)
                step *= 2.0
            return float(root)
        prev = a
    return float(grid[-1])  # pragma: no cover - conditions always fail for huge alpha


def lemma_2_12_bound(q: float, sigma: float, alpha: float) -> float:
    """``S_alpha(q, sigma) <= 2 alpha q^2 / sigma^2`` under AT22 Lemma 2.12; raises
    :class:`~lastiterate.errors.NotApplicable` (with the failed condition) otherwise."""
    qq = check_in_range("q", q, 0.0, 1.0)
    s = check_positive("sigma", sigma)
    a = check_positive("alpha", alpha)
    if not 0.0 < qq < 0.2:
        raise NotApplicable(f"Lemma 2.12 needs q in (0, 1/5); got q={qq!r}")
    if s < 4.0:
        raise NotApplicable(f"Lemma 2.12 needs sigma >= 4; got sigma={s!r}")
    if not lemma_2_12_applies(qq, s, a):
        raise NotApplicable(f"Lemma 2.12 needs 1 < alpha <= alpha*(q, sigma); got alpha={a!r}")
    return 2.0 * a * qq * qq / (s * s)
