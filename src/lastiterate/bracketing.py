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
    close_within: float | None = None,
) -> Bracket:
    """Shrink ``bracket`` until ``done(bad, good)``, keeping ``excess(bad) > 0 >= excess(good)``.

    ``excess`` is monotone (the sign changes once between ``bad`` and ``good``; either may be the
    larger).  With ``integer=True`` only integers strictly between the ends are evaluated (stop at
    adjacent integers at the latest).  Each new point is the Illinois interpolation of the excess,
    kept at least 1/16 of the bracket away from its ends, or the midpoint when the excesses are not
    finite.

    ``close_within`` (the width at which ``done`` holds, continuous searches only) adds a closing
    probe: when the point just evaluated is, by the secant slope of the bracket, within
    ``close_within / 2`` of the root while the other end is farther than ``close_within``, the next
    point is placed just past the predicted root (``0.45 close_within`` beyond it, so within
    ``0.95 close_within`` of the evaluated point): one evaluation then usually closes the bracket,
    where regula falsi would creep towards the root from one side.  Only the choice of points
    changes; the invariant is the same.  Returns the final bracket.
    """
    b = bracket
    kept_bad = kept_good = 0  # how often each end survived in a row (Illinois halving)
    probe: float | None = None
    last = [(b.bad, b.g_bad), (b.good, b.g_good)]  # the two latest evaluations (secant)
    widths = [abs(b.good - b.bad)] * 2
    for _ in range(max_evaluations):
        if done(b.bad, b.good) or (integer and abs(b.good - b.bad) <= 1):
            return b
        x = probe
        if (
            x is None
            and close_within is not None
            and not integer
            and widths[-1] <= 0.75 * widths[-2]
        ):
            x = _secant_point(b, last)  # local secant while the bracket shrinks well
        if x is None:
            x = _next_point(b, kept_bad, kept_good, integer)
        g = excess(x)
        last = [last[1], (x, g)]
        if g > 0:
            b = Bracket(bad=x, good=b.good, g_bad=g, g_good=b.g_good)
            kept_good += 1
            kept_bad = 0
        else:
            b = Bracket(bad=b.bad, good=x, g_bad=b.g_bad, g_good=g)
            kept_bad += 1
            kept_good = 0
        widths.append(abs(b.good - b.bad))
        probe = None
        if close_within is not None and not integer:
            probe = _closing_probe(b, last, close_within)
        elif integer:
            probe = _integer_closing_probe(b, last)
    return b


def _secant_slope(last: list[tuple[float, float]]) -> float | None:
    """|excess change per unit| between the two latest evaluations (None if not finite or 0)."""
    (x0, g0), (x1, g1) = last
    if x0 == x1 or not (math.isfinite(g0) and math.isfinite(g1)):
        return None
    slope = abs((g1 - g0) / (x1 - x0))
    return slope if slope > 0 and math.isfinite(slope) else None


def _secant_point(b: Bracket, last: list[tuple[float, float]]) -> float | None:
    """The root of the secant through the two latest evaluations, when it lies strictly inside the
    bracket (else None: the caller interpolates the bracket ends)."""
    (x0, g0), (x1, g1) = last
    if x0 == x1 or g0 == g1 or not (math.isfinite(g0) and math.isfinite(g1)):
        return None
    x = x1 - g1 * (x1 - x0) / (g1 - g0)
    lo, hi = min(b.bad, b.good), max(b.bad, b.good)
    return x if lo < x < hi and math.isfinite(x) else None


def _closing_probe(b: Bracket, last: list[tuple[float, float]], width: float) -> float | None:
    """The point ``0.45 width`` past the secant prediction of the root from the point just
    evaluated, when that prediction is within ``width / 2`` of it and the other end of the bracket
    is farther than ``width``; else None (see :func:`shrink_bracket`)."""
    x, g = last[1]
    other = b.good if g > 0 else b.bad
    span = abs(other - x)
    if not (span > width and math.isfinite(g)):
        return None
    slope = _secant_slope(last)
    if slope is None:
        if not math.isfinite(b.g_bad - b.g_good):
            return None
        slope = (b.g_bad - b.g_good) / abs(b.bad - b.good)  # > 0: excess per unit towards bad
        if not slope > 0:
            return None
    distance = abs(g) / slope
    if distance > width / 2:
        return None
    step = distance + 0.45 * width
    return x + math.copysign(step, other - x)


def _integer_closing_probe(b: Bracket, last: list[tuple[float, float]]) -> float | None:
    """Integer searches: the first integer past the secant prediction of the root, seen from the
    point just evaluated, when it lies strictly inside the bracket (else None).  When the
    prediction is right to within one unit, the next evaluation lands on the other side of the
    root next to it, and one more closes the bracket to adjacent integers, where regula falsi
    would creep towards the root from one side.  Only the choice of points changes; the
    invariant is the same."""
    x, g = last[1]
    other = b.good if g > 0 else b.bad
    span = abs(other - x)
    if span <= 1 or not math.isfinite(g):
        return None
    slope = _secant_slope(last)
    if slope is None:
        if not math.isfinite(b.g_bad - b.g_good):
            return None
        slope = (b.g_bad - b.g_good) / abs(b.bad - b.good)
        if not slope > 0:
            return None
    step = math.floor(abs(g) / slope) + 1
    if step >= span:
        return None
    return x + math.copysign(step, other - x)


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
