"""Bracketed root finding for calibration: few evaluations, never on the wrong side.

Calibration inverts a monotone map (noise -> epsilon, epochs -> epsilon) whose every evaluation is
a full accounting.  Bisection needs about log2(range / tolerance) evaluations; here the Illinois
variant of regula falsi (Dowell and Jarratt, BIT 11, 1971) interpolates ``log epsilon`` linearly in
the searched variable, which is nearly linear for Gaussian-like bounds, and converges
superlinearly from both sides.  The invariant is the bracket: ``ok`` always holds at the returned
end and fails at the other, so the answer never overshoots the target whatever the interpolation
does; a non-finite value or a stalled interpolation falls back to bisection.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Bracket:
    """``bad`` violates the target, ``good`` meets it; ``g_*`` are the excesses there (> 0 bad)."""

    bad: float
    good: float
    g_bad: float
    g_good: float


def shrink_bracket(
    excess: Callable[[float], float],
    bracket: Bracket,
    *,
    done: Callable[[float, float], bool],
    integer: bool = False,
    max_evaluations: int = 200,
) -> Bracket:
    """Shrink ``bracket`` until ``done(bad, good)``, keeping ``excess(bad) > 0 >= excess(good)``.

    ``excess`` is monotone (the sign changes once between ``bad`` and ``good``; either may be the
    larger).  With ``integer=True`` only integers strictly between the ends are evaluated (stop at
    adjacent integers at the latest).  Each new point is the Illinois interpolation of the excess,
    kept at least 1/16 of the bracket away from its ends, or the midpoint when the excesses are not
    finite.  Returns the final bracket.
    """
    b = bracket
    kept_bad = kept_good = 0  # how often each end survived in a row (Illinois halving)
    for _ in range(max_evaluations):
        if done(b.bad, b.good) or (integer and abs(b.good - b.bad) <= 1):
            return b
        x = _next_point(b, kept_bad, kept_good, integer)
        g = excess(x)
        if g > 0:
            b = Bracket(bad=x, good=b.good, g_bad=g, g_good=b.g_good)
            kept_good += 1
            kept_bad = 0
        else:
            b = Bracket(bad=b.bad, good=x, g_bad=b.g_bad, g_good=g)
            kept_bad += 1
            kept_good = 0
    return b


def _next_point(b: Bracket, kept_bad: int, kept_good: int, integer: bool) -> float:
    width = b.good - b.bad
    g_bad = b.g_bad / 2.0**kept_bad if kept_bad >= 2 else b.g_bad
    g_good = b.g_good / 2.0**kept_good if kept_good >= 2 else b.g_good
    if math.isfinite(g_bad) and math.isfinite(g_good) and g_bad > g_good:
        t = g_bad / (g_bad - g_good)  # where the linear interpolant crosses 0, in (0, 1]
        t = min(max(t, 1.0 / 16.0), 15.0 / 16.0)
    else:
        t = 0.5
    x = b.bad + t * width
    if integer:
        lo, hi = min(b.bad, b.good), max(b.bad, b.good)
        x = float(min(max(round(x), lo + 1), hi - 1))
    return x
