"""Gaussian differential privacy (mu-GDP) and its exact conversions.

Reference: docs/theorems.md section 1.1 (tradeoff functions, ``G_mu``), 1.2 (GDP -> (eps, delta),
exact in both directions) and 1.4 (GDP -> RDP).

Conventions
-----------
* ``G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)`` is the tradeoff function of ``N(0, 1)`` vs ``N(mu,
  1)``.
* A mechanism is mu-GDP when its tradeoff function is ``>= G_mu`` pointwise. ``mu = 0`` is perfect
  privacy (``G_0 = Id``).
* The privacy profile of mu-GDP is ``delta(eps; mu) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu -
  mu/2)`` for ``eps >= 0`` (Balle-Wang 2018 Thm 8; Dong-Roth-Su Cor 2.13). It is TIGHT: a mu-GDP
  mechanism is ``(eps, delta(eps; mu))``-DP for every ``eps >= 0`` and no smaller delta is valid for
  ``N(0,1)`` vs ``N(mu,1)``.

Every inverse (``gdp_epsilon``, ``gdp_mu``) is rounded in the direction that never under-reports
privacy loss: the returned epsilon satisfies ``gdp_delta(eps, mu) <= delta`` exactly in floating
point, and the returned mu satisfies ``gdp_delta(epsilon, mu) <= delta`` exactly in floating point.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from lastiterate.errors import ParameterError, check_nonnegative, check_positive
from lastiterate.notions import normal
from lastiterate.notions.roots import brent_root

__all__ = [
    "GaussianDP",
    "gaussian_tradeoff",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "gdp_to_rdp",
]

_SQRT2 = math.sqrt(2.0)


MU_MAX = 1e6
"""Largest mu accepted: its epsilon (about mu^2/2 = 5e11) is still evaluated to ~1e-10 relative in
delta (checked against 80-digit arithmetic); beyond, the two terms of the profile cancel in double
precision and the inversion could under-report."""


def _check_mu(mu: float) -> float:
    m = check_nonnegative("mu", mu)
    if m > MU_MAX:
        raise ParameterError(
            "mu",
            mu,
            f"must be in [0, {MU_MAX:g}]: beyond, epsilon exceeds 5e11 and "
            "cannot be evaluated accurately",
        )
    return m


def _check_delta_open(delta: float) -> float:
    x = check_positive("delta", delta)
    if not x < 1.0:
        raise ParameterError("delta", delta, "must be in (0, 1)")
    return x


def _as_float_array(name: str, value: ArrayLike) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(
            name, value, "must be a real number or an array of real numbers"
        ) from None
    if np.isnan(arr).any():
        raise ParameterError(name, value, "must not contain NaN")
    return arr


def _scalar_or_array(arr: np.ndarray) -> float | np.ndarray:
    return float(arr) if arr.ndim == 0 else arr


def gaussian_tradeoff(alpha: ArrayLike, mu: float) -> np.ndarray:
    """Gaussian tradeoff function ``G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)``
    (docs/theorems.md 1.1).

    ``alpha`` must lie in ``[0, 1]``; ``mu >= 0``. Computed as ``ndtr(-ndtri(alpha) - mu)`` (using
    ``Phi^{-1}(1 - alpha) = -Phi^{-1}(alpha)``), which keeps full relative accuracy for tiny alpha.
    ``G_mu(0) = 1`` and ``G_mu(1) = 0`` exactly.
    """
    m = _check_mu(mu)
    a = _as_float_array("alpha", alpha)
    if ((a < 0) | (a > 1)).any():
        raise ParameterError("alpha", alpha, "must lie in [0, 1]")
    with np.errstate(divide="ignore"):
        z = normal.ndtri(a)  # -inf at 0, +inf at 1
    out = normal.ndtr(-z - m)
    return np.asarray(out, dtype=float)


def _gdp_delta_unchecked(eps: np.ndarray, mu: float | np.ndarray) -> np.ndarray:
    """``delta(eps; mu)`` for validated ``eps >= 0`` (may contain +inf) and ``mu > 0`` (a scalar, or
    an array broadcast against ``eps``).

    Two algebraically identical forms are used:

    * ``a = -eps/mu + mu/2 <= 0`` (the tail, where delta can be tiny): with ``b = a - mu`` one has
      ``eps + (a^2 - b^2)/2 = 0``, so writing ``Phi(x) = erfcx(-x/sqrt2) e^{-x^2/2} / 2`` gives the
      cancellation-free, overflow-free form ``delta = exp(-a^2/2) * (erfcx(-a/sqrt2) -
      erfcx(-b/sqrt2)) / 2`` (both erfcx arguments are >= 0 and erfcx is decreasing, so the bracket
      is >= 0).
    * ``a > 0`` (the head, ``eps < mu^2/2``): ``delta = (Phi(a) - Phi(b)) - (e^eps - 1) Phi(b)``
      with ``Phi(a) - Phi(b) = (erf(a/sqrt2) + erf(-b/sqrt2)) / 2`` (``a > 0 > b``: a sum of two
      positive terms, no cancellation even for tiny mu, where ``Phi(a) - e^eps Phi(b)`` lost all
      digits) and ``(e^eps - 1) Phi(b) = exp(log(e^eps - 1) + log Phi(b))`` (no underflow of
      ``Phi(b)`` for large mu).  The subtracted term is below 0.4 of the first (at most ~0.6 mu
      for small mu, ~0.8/mu for large), so the difference keeps its relative accuracy.
    """
    eps, mu_b = np.broadcast_arrays(np.asarray(eps, dtype=float), np.asarray(mu, dtype=float))
    out = np.zeros(eps.shape)
    finite = np.isfinite(eps)
    e = np.where(finite, eps, 0.0)
    mu = mu_b  # type: ignore[assignment]  # an array of mu's is evaluated elementwise
    # overflow only for subnormal mu (eps/mu -> inf); the limits then give delta = 0 without NaN
    with np.errstate(over="ignore"):
        a = -e / mu + mu / 2.0
        b = a - mu
        tail = finite & (a <= 0)
        head = finite & (a > 0)
        if tail.any():
            at, bt = a[tail], b[tail]
            bracket = normal.erfcx(-at / _SQRT2) - normal.erfcx(-bt / _SQRT2)
            out[tail] = 0.5 * np.exp(-0.5 * at * at) * np.maximum(bracket, 0.0)
        if head.any():
            ah, bh, eh = a[head], b[head], e[head]
            between = 0.5 * (normal.erf(ah / _SQRT2) + normal.erf(-bh / _SQRT2))
            with np.errstate(divide="ignore"):  # eps = 0: log(e^0 - 1) = -inf, the term is 0
                log_em1 = eh + np.log(-np.expm1(-eh))
            out[head] = between - np.exp(log_em1 + normal.log_ndtr(bh))
    # eps = +inf -> delta = 0 (left as 0).
    return np.clip(out, 0.0, 1.0)


def gdp_delta(epsilon: ArrayLike, mu: float) -> float | np.ndarray:
    """Exact privacy profile of mu-GDP (docs/theorems.md 1.2, TIGHT):

        delta(eps; mu) = Phi(-eps/mu + mu/2) - e^eps * Phi(-eps/mu - mu/2),    eps >= 0.

    ``epsilon`` may be a scalar or an array (``+inf`` allowed, giving 0); ``mu >= 0`` (``mu = 0``
    gives 0). The difference is evaluated without overflow (see ``_gdp_delta_unchecked``): relative
    accuracy ~1e-12 for mu in [1e-3, 40] and eps up to several thousand (checked against 60-digit
    arithmetic); for tiny mu the two terms nearly cancel and the relative accuracy degrades to
    ~1e-16 * max(1, |a|) / mu. Never NaN, clipped to [0, 1]. Returns a float for scalar input, else
    an array.
    """
    m = _check_mu(mu)
    eps = _as_float_array("epsilon", epsilon)
    if (eps < 0).any():
        raise ParameterError("epsilon", epsilon, "must be >= 0")
    if m == 0.0:
        return _scalar_or_array(np.zeros_like(eps))
    return _scalar_or_array(_gdp_delta_unchecked(eps, m))


def _delta_scalar(eps: float, mu: float) -> float:
    return float(_gdp_delta_unchecked(np.asarray(eps, dtype=float), mu))


#: one unit of the evaluation-error bound of ``_gdp_delta_unchecked`` (16 ulps; the special
#: functions are within 5 ulps, ``lastiterate.notions.normal``, the rest a few roundings)
_DELTA_EVAL_ULPS = 16.0 * 2.0**-52


def _delta_scalar_upper(eps: float, mu: float) -> float:
    """``delta(eps; mu)`` plus a bound on its evaluation error: what the inversions compare with
    the target, so that their answers hold for the EXACT profile, not only for its floating-point
    value (at eps = 1e-6 the plain value sent ``gdp_mu`` 1.1e-8 relative past the target delta
    1e-15).  Relative error bounds, in units of ``_DELTA_EVAL_ULPS``, of the two forms of
    ``_gdp_delta_unchecked`` (``a = -eps/mu + mu/2``):

    * tail (``a <= 0``): ``1 + a^2 + (1 + |a|)/mu``.  The two erfcx terms (arguments ``z`` and
      ``z + mu/sqrt2``, ``z = -a/sqrt2``) cancel: their difference is about ``mu/sqrt2`` times
      ``|erfcx'(z)|`` and ``erfcx(z) / |erfcx'(z)| <= 1 + z``, which amplifies their own errors
      and the rounding of the arguments by ``(1 + |a|)/mu``; ``exp(-a^2/2)`` of a rounded
      ``a^2`` adds ``a^2`` ulps.
    * head (``a > 0``): ``1 + mu^2``.  No cancellation (the subtracted term is below 0.4 of the
      first); the subtracted term's exponent ``eps + log Phi(b)`` is of size ``mu^2`` and
      carries its rounding.
    """
    d = _delta_scalar(eps, mu)
    if d == 0.0 or math.isinf(eps):
        return d
    a = -eps / mu + mu / 2.0
    units = 1.0 + a * a + (1.0 + abs(a)) / mu if a <= 0.0 else 1.0 + mu * mu
    return min(1.0, d * (1.0 + _DELTA_EVAL_ULPS * units))


def smallest_epsilon(
    delta_of_epsilon: Callable[[float], float],
    delta: float,
    *,
    hi: float = 1.0,
    max_epsilon: float = math.inf,
) -> float:
    """Smallest ``eps >= 0`` with ``delta_of_epsilon(eps) <= delta`` for a non-increasing privacy
    profile, to within ``1e-14 + 4 eps_mach * eps``: 0 if it already holds at 0; otherwise an
    expanding bracket from ``hi`` (``inf`` once the bracket passes ``max_epsilon``), then Brent's
    method (:func:`lastiterate.notions.roots.brent_root`).  The upper end of the final bracket is
    returned: there the inequality holds exactly in floating point (``x - y <= 0`` iff ``x <= y``
    for doubles), so the result never under-reports."""
    if delta_of_epsilon(0.0) <= delta:
        return 0.0
    while delta_of_epsilon(hi) > delta:
        hi *= 2.0
        if hi > max_epsilon or not math.isfinite(hi):
            return math.inf
    root = brent_root(lambda e: delta_of_epsilon(e) - delta, 0.0, hi, xtol=1e-14)
    return root.nonpositive_end


def gdp_epsilon(delta: float, mu: float) -> float:
    """Smallest ``eps >= 0`` with ``delta(eps; mu) <= delta`` (docs/theorems.md 1.2, exact inverse).

    ``delta`` in (0, 1), ``mu >= 0``. Returns 0 when ``delta(0; mu) = 2 Phi(mu/2) - 1 <= delta``.
    Otherwise brackets the root with an expanding upper end (no fixed cap: for mu = 40 and delta =
    1e-15 the answer exceeds 1000) and solves with Brent's method (:func:`smallest_epsilon`); the
    end of the final bracket where ``gdp_delta(eps, mu)`` plus its evaluation error
    (:func:`_delta_scalar_upper`) is ``<= delta`` in floating point is returned, so it never
    under-reports. Golden values: mu = 1, delta = 1e-5 -> 4.37718; mu =
    4.71405 -> 30.506.
    """
    d = _check_delta_open(delta)
    m = _check_mu(mu)
    if m == 0.0:
        return 0.0
    eps = smallest_epsilon(lambda e: _delta_scalar_upper(e, m), d, hi=max(1.0, m * m))
    if math.isinf(eps):  # pragma: no cover - delta(eps) -> 0, so this cannot happen
        raise ParameterError("delta", delta, "is too small to reach with a finite epsilon")
    return eps


def gdp_mu(epsilon: float, delta: float) -> float:
    """Largest ``mu >= 0`` such that mu-GDP implies ``(epsilon, delta)``-DP, i.e. ``delta(epsilon;
    mu) <= delta``.

    ``epsilon >= 0`` finite, ``delta`` in (0, 1). ``delta(eps; mu)`` increases in mu (from 0 at mu =
    0 to 1), so the root is unique; it is bracketed with an expanding upper end and solved by
    Brent's method (:func:`lastiterate.notions.roots.brent_root`, to a relative tolerance of 4
    ulps); the lower end of the final bracket, where ``gdp_delta(epsilon, mu)`` plus its
    evaluation error (:func:`_delta_scalar_upper`) is ``<= delta`` in floating point, is
    returned (docs/theorems.md 1.2).
    """
    e = check_nonnegative("epsilon", epsilon)
    d = _check_delta_open(delta)
    hi = 1.0
    while _delta_scalar_upper(e, hi) <= d:
        hi *= 2.0
        if hi > 1e300:  # pragma: no cover
            raise ParameterError("epsilon", epsilon, "is too large for a finite mu")
    root = brent_root(
        lambda m: _delta_scalar_upper(e, m) - d if m > 0 else -d, 0.0, hi, xtol=1e-300
    )
    return root.nonpositive_end


def gdp_to_rdp(mu: float, orders: ArrayLike) -> np.ndarray:
    """mu-GDP implies ``(alpha, alpha mu^2 / 2)``-RDP for every alpha > 1 (docs/theorems.md 1.4;
    tight for the Gaussian mechanism). ``orders`` must all be > 1."""
    m = _check_mu(mu)
    a = _as_float_array("orders", orders)
    if (a <= 1).any() or np.isinf(a).any():
        raise ParameterError("orders", orders, "every order must be finite and > 1")
    return np.asarray(a * m * m / 2.0, dtype=float)


@dataclass(frozen=True)
class GaussianDP:
    """A mu-GDP guarantee (docs/theorems.md 1.1). ``mu >= 0`` and finite.

    Composition is exact: ``G_mu1 (x) G_mu2 = G_sqrt(mu1^2 + mu2^2)`` (docs/theorems.md 1.1).
    """

    mu: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", _check_mu(self.mu))

    def tradeoff(self, alpha: ArrayLike) -> np.ndarray:
        """``G_mu(alpha)``."""
        return gaussian_tradeoff(alpha, self.mu)

    def delta(self, epsilon: ArrayLike) -> float | np.ndarray:
        """Exact ``delta(eps; mu)`` (see :func:`gdp_delta`)."""
        return gdp_delta(epsilon, self.mu)

    def epsilon(self, delta: float) -> float:
        """Smallest valid epsilon at ``delta`` (see :func:`gdp_epsilon`)."""
        return gdp_epsilon(delta, self.mu)

    def to_rdp(self, orders: ArrayLike) -> np.ndarray:
        """RDP curve ``alpha mu^2 / 2`` at ``orders`` (see :func:`gdp_to_rdp`)."""
        return gdp_to_rdp(self.mu, orders)

    def compose(self, other: GaussianDP) -> GaussianDP:
        """Exact composition: ``mu = sqrt(mu1^2 + mu2^2)`` (``math.hypot``, no overflow)."""
        if not isinstance(other, GaussianDP):
            raise ParameterError("other", other, "must be a GaussianDP")
        return GaussianDP(math.hypot(self.mu, other.mu))
