"""Bracketed root finding for cheap scalar functions: Brent's method, in pure Python.

The accounting path inverts monotone scalar maps to near machine precision: the GDP profile
(``gdp_epsilon``, ``gdp_mu``), a composed profile (``smallest_epsilon``) and the privacy profile
that fixes the top of a PLD grid.  ``scipy.optimize.brentq`` does this, but importing
``scipy.optimize`` costs 0.25-0.4 s of CPU (it parses a few hundred docstrings at import), more
than half of the command-line tool's start-up budget (issue 11).  This module is the one home of
that need.  (Calibration, whose every evaluation is a whole accounting, has its own search with
coarser, user-facing tolerances: :mod:`lastiterate.bracketing`.)

Algorithm
---------
Brent, *Algorithms for Minimization without Derivatives* (1973), chapter 4 (procedure ``zero``),
the method ``scipy.optimize.brentq`` also implements.  It keeps a bracket ``[b, c]`` with ``f(b)``
and ``f(c)`` of opposite signs, ``b`` the end of smaller ``|f|``; each step tries inverse
quadratic (or secant) interpolation and falls back to bisection whenever the interpolated step is
not at least halving the step before last, so it converges superlinearly on smooth functions and
never needs more than about the square of bisection's number of evaluations.

Contract (what callers rely on)
-------------------------------
The result is the final bracket, not a single point: ``f(best)`` and ``f(other)`` have opposite
signs (or ``f(best) == 0``) and ``|best - other| <= xtol + rtol * |best|``, the tolerance of
``scipy.optimize.brentq`` with the same ``xtol``/``rtol``.  A caller that must not under-report
takes the end on the safe side of the root (:attr:`RootBracket.nonpositive_end`,
:attr:`RootBracket.nonnegative_end`): the inequality holds there exactly in floating point,
because it is the sign of the value actually computed.  The sign tests never multiply two values
(a product of two tiny values underflows to 0).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RootBracket", "brent_root"]

DOUBLE_EPS = sys.float_info.epsilon
"""Spacing of doubles at 1 (2**-52)."""

MIN_RTOL = 4.0 * DOUBLE_EPS
"""Smallest relative tolerance accepted (as ``scipy.optimize.brentq``): the smallest step,
``(xtol + rtol |x|) / 2``, then exceeds the spacing of doubles at ``x``, so every step moves."""


@dataclass(frozen=True)
class RootBracket:
    """The final bracket of :func:`brent_root`.

    ``best`` is the end with the smaller ``|f|`` (Brent's estimate of the root); ``f(best)`` and
    ``f(other)`` have opposite signs, or ``f(best) == 0`` (then ``other`` may be any point of the
    last bracket).  ``evaluations`` counts the calls of ``f``.
    """

    best: float
    other: float
    f_best: float
    f_other: float
    evaluations: int

    @property
    def nonpositive_end(self) -> float:
        """An end where the computed ``f <= 0`` (a decreasing ``f``: the upper end)."""
        return self.best if self.f_best <= 0 else self.other

    @property
    def nonnegative_end(self) -> float:
        """An end where the computed ``f >= 0`` (a decreasing ``f``: the lower end)."""
        return self.best if self.f_best >= 0 else self.other


def _checked_value(f: Callable[[float], float], x: float) -> float:
    y = float(f(x))
    if math.isnan(y):
        raise ValueError(f"brent_root: the function is NaN at x={x!r}")
    return y


def _same_sign(u: float, v: float) -> bool:
    """Both strictly positive or both strictly negative (no product: it could underflow)."""
    return (u > 0 and v > 0) or (u < 0 and v < 0)


def _interpolation_step(
    a: float, b: float, c: float, fa: float, fb: float, fc: float, m: float
) -> tuple[float, float]:
    """Brent's trial step from ``b`` as a fraction ``p / q`` (with ``p >= 0``): the secant
    through ``(a, fa), (b, fb)`` when ``a == c``, otherwise inverse quadratic interpolation
    through the three points; ``m = (c - b) / 2`` is the bisection step."""
    s = fb / fa
    if a == c:
        p = 2.0 * m * s
        q = 1.0 - s
    else:
        qa = fa / fc
        r = fb / fc
        p = s * (2.0 * m * qa * (qa - r) - (b - a) * (r - 1.0))
        q = (qa - 1.0) * (r - 1.0) * (s - 1.0)
    if p > 0:
        q = -q
    else:
        p = -p
    return p, q


def brent_root(
    f: Callable[[float], float],
    a: float,
    b: float,
    *,
    xtol: float,
    rtol: float = MIN_RTOL,
    maxiter: int = 500,
) -> RootBracket:
    """A bracket of width ``<= xtol + rtol * |best|`` around a sign change of ``f`` in ``[a, b]``.

    Brent's method (Brent 1973, ch. 4; the module docstring states the contract).  ``f(a)`` and
    ``f(b)`` must have opposite signs or one of them be 0 (a zero end is returned at once, as
    ``scipy.optimize.brentq`` does); ``f`` need not be continuous: a bracket around a jump is
    returned the same way.  Same tolerances as ``scipy.optimize.brentq``: ``xtol > 0``,
    ``rtol >= 4 * machine epsilon``.

    Raises ``ValueError`` when the ends do not bracket a sign change, when ``f`` returns NaN or
    when a tolerance is out of range (all are programming errors of the caller, not user input),
    and ``RuntimeError`` when ``maxiter`` steps do not reach the tolerance.
    """
    if not (xtol > 0 and math.isfinite(xtol)):
        raise ValueError(f"brent_root: xtol={xtol!r} must be > 0 and finite")
    if not (MIN_RTOL <= rtol < 1):
        raise ValueError(f"brent_root: rtol={rtol!r} must be in [{MIN_RTOL!r}, 1)")
    if not (math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f"brent_root: the bracket [{a!r}, {b!r}] must be finite")
    fa, fb = _checked_value(f, a), _checked_value(f, b)
    evaluations = 2
    if fa == 0:
        return RootBracket(a, a, fa, fa, evaluations)
    if fb == 0:
        return RootBracket(b, b, fb, fb, evaluations)
    if _same_sign(fa, fb):
        raise ValueError(
            f"brent_root: f({a!r}) = {fa!r} and f({b!r}) = {fb!r} do not bracket a sign change"
        )
    c, fc = a, fa  # the contrapoint: f(c) has the sign opposite to f(b)
    step = before_last = b - a
    for _ in range(maxiter):
        if abs(fc) < abs(fb):  # b is the better end: rotate so that it is
            a, b, c = b, c, b
            fa, fb, fc = fb, fc, fb
        tol = 0.5 * (xtol + rtol * abs(b))
        m = 0.5 * (c - b)
        if fb == 0 or abs(m) <= tol:
            return RootBracket(b, c, fb, fc, evaluations)
        if abs(before_last) < tol or abs(fa) <= abs(fb):
            step = before_last = m  # bisection: the last steps did not shrink |f|
        else:
            p, q = _interpolation_step(a, b, c, fa, fb, fc, m)
            if 2.0 * p < min(3.0 * m * q - abs(tol * q), abs(before_last * q)):
                before_last, step = step, p / q  # accept the interpolation
            else:
                step = before_last = m
        a, fa = b, fb
        b += step if abs(step) > tol else math.copysign(tol, m)
        fb = _checked_value(f, b)
        evaluations += 1
        if _same_sign(fb, fc):  # the sign change is now between a and b
            c, fc = a, fa
            step = before_last = b - a
    raise RuntimeError(
        f"brent_root: no bracket of width {xtol!r} + {rtol!r}|x| after {maxiter} steps"
    )
