"""Tests for lastiterate.notions.roots (Brent's method), against scipy.optimize.brentq.

The independent source is scipy's compiled brentq, called on the same functions with the same
tolerances: both must stop within the tolerance of the same root, and ours must also return a
bracket (opposite signs at its ends, width within the tolerance), which the accounting callers
rely on to round in the safe direction.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, special

from lastiterate.notions.gdp import gdp_delta, gdp_epsilon, gdp_mu, smallest_epsilon
from lastiterate.notions.roots import MIN_RTOL, RootBracket, brent_root


def _gdp_profile_minus(delta: float, mu: float):  # type: ignore[no-untyped-def]
    return lambda e: float(gdp_delta(e, mu)) - delta


def _log_poisson_profile_minus(q: float, z: float, log_bound: float):  # type: ignore[no-untyped-def]
    """log delta(eps) - log_bound for the remove direction of the Poisson-subsampled Gaussian
    (written with scipy.special here, independently of lastiterate's profiles)."""

    def f(eps: float) -> float:
        x = math.log1p(math.expm1(eps) / q)  # the Gaussian's epsilon, mu = 1/z
        mu = 1.0 / z
        d = special.ndtr(-x / mu + mu / 2) - math.exp(x) * special.ndtr(-x / mu - mu / 2)
        return math.log(max(q * d, 1e-320)) - log_bound

    return f


#: (function, a, b) of varied shapes: smooth, flat at the root, very steep, a jump, tiny values
CASES = [
    ("cubic", lambda x: x**3 - 2.0, 0.0, 3.0),
    ("exp", lambda x: math.exp(x) - 5.0, -10.0, 10.0),
    ("flat x^9", lambda x: x**9 - 1e-3, -1.0, 2.0),
    ("jump", lambda x: 1.0 if x > 0.3 else -1.0, 0.0, 1.0),
    ("cos", lambda x: math.cos(x) - x, 0.0, 1.0),
    ("log wide", lambda x: math.log(x) - 3.0, 1e-9, 1e9),
    ("atan", lambda x: math.atan(x - 0.77), -1e3, 1e3),
    ("tiny values", lambda x: (x - 1e-3) * 1e-200, 0.0, 1.0),
    ("gdp mu=1 delta=1e-5", _gdp_profile_minus(1e-5, 1.0), 0.0, 8.0),
    ("gdp mu=40 delta=1e-15", _gdp_profile_minus(1e-15, 40.0), 0.0, 2048.0),
    ("gdp mu=1e-3 delta=1e-6", _gdp_profile_minus(1e-6, 1e-3), 0.0, 1.0),
    ("log poisson profile", _log_poisson_profile_minus(256 / 60000, 1.1, -50.0), 0.0, 64.0),
]


def _assert_bracket(r: RootBracket, f, xtol: float, rtol: float) -> None:  # type: ignore[no-untyped-def]
    assert f(r.best) == r.f_best and f(r.other) == r.f_other  # the values reported are f's
    if r.f_best != 0:
        assert (r.f_best > 0) != (r.f_other > 0) and r.f_other != 0
        assert abs(r.best - r.other) <= xtol + rtol * abs(r.best)
        assert abs(r.f_best) <= abs(r.f_other)
    assert f(r.nonpositive_end) <= 0 <= f(r.nonnegative_end)


@pytest.mark.parametrize(("name", "f", "a", "b"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize(("xtol", "rtol"), [(1e-14, MIN_RTOL), (1e-15, MIN_RTOL), (1e-6, 1e-10)])
def test_agrees_with_scipy_brentq_on_the_same_function_and_tolerances(
    name: str,
    f,
    a: float,
    b: float,
    xtol: float,
    rtol: float,  # type: ignore[no-untyped-def]
) -> None:
    ours = brent_root(f, a, b, xtol=xtol, rtol=rtol, maxiter=500)
    theirs, info = optimize.brentq(f, a, b, xtol=xtol, rtol=rtol, maxiter=500, full_output=True)
    _assert_bracket(ours, f, xtol, rtol)
    # both are within the tolerance of the same root, so within twice of each other
    assert abs(ours.best - theirs) <= 2 * (xtol + rtol * max(abs(theirs), abs(ours.best)))
    # the same method: about the same number of evaluations (never more than a few extra)
    assert ours.evaluations <= info.function_calls + 3


@settings(max_examples=60, deadline=None)
@given(
    root=st.floats(-1e3, 1e3, allow_nan=False),
    slope=st.floats(1e-6, 1e6),
    curvature=st.floats(-1.0, 1.0),
    left=st.floats(1e-3, 1e3),
    right=st.floats(1e-3, 1e3),
)
def test_random_monotone_functions_match_scipy(
    root: float, slope: float, curvature: float, left: float, right: float
) -> None:
    """Monotone functions ``slope * t + curvature * t^3`` (t = x - root, curvature of either
    sign but dominated on the interval) on random brackets."""
    c = curvature * slope / max(left, right) ** 2 / 3.1  # keeps f' > 0 on the bracket

    def f(x: float) -> float:
        t = x - root
        return slope * t + c * t**3

    a, b = root - left, root + right
    ours = brent_root(f, a, b, xtol=1e-12)
    theirs = optimize.brentq(f, a, b, xtol=1e-12, rtol=MIN_RTOL, maxiter=500)
    _assert_bracket(ours, f, 1e-12, MIN_RTOL)
    assert abs(ours.best - theirs) <= 2 * (1e-12 + MIN_RTOL * abs(theirs))


def test_a_zero_at_an_end_is_returned_at_once() -> None:
    r = brent_root(lambda x: x - 1.0, 1.0, 5.0, xtol=1e-12)
    assert (r.best, r.f_best, r.evaluations) == (1.0, 0.0, 2)
    r = brent_root(lambda x: x - 5.0, 1.0, 5.0, xtol=1e-12)
    assert (r.best, r.f_best) == (5.0, 0.0)


def test_sign_tests_survive_underflowing_products() -> None:
    """f(a) f(b) underflows to -0.0 here; a product-based sign test would see no sign change."""
    r = brent_root(lambda x: (x - 0.25) * 1e-170, 0.0, 1.0, xtol=1e-15)
    assert abs(r.best - 0.25) <= 1e-15 + MIN_RTOL * 0.25


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"xtol": 0.0}, "xtol"),
        ({"xtol": math.nan}, "xtol"),
        ({"xtol": 1e-12, "rtol": 1e-17}, "rtol"),
    ],
)
def test_invalid_tolerances_are_refused(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        brent_root(lambda x: x, -1.0, 1.0, **kwargs)


def test_no_sign_change_nan_and_infinite_ends_are_refused() -> None:
    with pytest.raises(ValueError, match="do not bracket"):
        brent_root(lambda x: x * x + 1.0, -1.0, 1.0, xtol=1e-12)
    with pytest.raises(ValueError, match="NaN"):
        brent_root(lambda x: math.nan if x > 0.1 else x - 0.5, 0.0, 1.0, xtol=1e-12)
    with pytest.raises(ValueError, match="finite"):
        brent_root(lambda x: x, -math.inf, 1.0, xtol=1e-12)


def test_too_few_steps_raise() -> None:
    with pytest.raises(RuntimeError, match="after 3 steps"):
        brent_root(lambda x: x**3 - 2.0, 0.0, 3.0, xtol=1e-15, maxiter=3)


# ------------------------------------------------------------------ the callers round safely
@pytest.mark.parametrize("mu", [1e-4, 0.3, 1.0, 4.71405, 40.0, 1e3])
@pytest.mark.parametrize("delta", [1e-1, 1e-5, 1e-15, 1e-100])
def test_gdp_inverses_hold_exactly_and_match_a_scipy_solve(mu: float, delta: float) -> None:
    """gdp_epsilon: the inequality holds exactly and the value is within the solver tolerance of
    scipy's brentq root of the same profile; gdp_mu likewise from the other side."""
    eps = gdp_epsilon(delta, mu)
    f = _gdp_profile_minus(delta, mu)
    if f(0.0) <= 0:
        assert eps == 0.0
    else:
        assert f(eps) <= 0
        hi = max(1.0, mu * mu)
        while f(hi) > 0:
            hi *= 2
        ref = optimize.brentq(f, 0.0, hi, xtol=1e-14, rtol=MIN_RTOL, maxiter=500)
        # never below the plain root; above it by the solver tolerance plus what the evaluation-
        # error margin of the profile costs (gdp._delta_scalar_upper: <= 1.6e-12 relative in
        # delta here, i.e. <= 3e-12 in epsilon at mu = 40, delta = 1e-100)
        assert ref - 1e-14 - 2 * MIN_RTOL * ref <= eps <= ref + 1e-11 + 1e-13 * ref
        m = gdp_mu(eps, delta)
        assert float(gdp_delta(eps, m)) <= delta
        assert abs(m - mu) <= 1e-9 * mu + 1e-14


def test_smallest_epsilon_reports_infinity_beyond_max_epsilon() -> None:
    assert smallest_epsilon(lambda e: 1.0 if e < 10.0 else 0.0, 0.5, max_epsilon=5.0) == math.inf
    e = smallest_epsilon(lambda e: 1.0 if e < 10.0 else 0.0, 0.5)
    assert 10.0 <= e <= 10.0 + 1e-13  # a jump: the upper end of the last bracket


def test_top_index_is_the_first_grid_point_below_the_truncation_bound() -> None:
    """The PLD grid's top index (distribution._top_index) is the smallest n with
    delta(n d) <= exp(log_bound), checked by scanning the profile on the grid around it."""
    from lastiterate.notions.pld import distribution as dist
    from lastiterate.notions.pld.profiles import _subsampled_parts

    for q, z, d, lb in [
        (256 / 60000, 1.1, 1e-4, -36.0),
        (0.1, 0.8, 1e-3, -50.0),
        (0.5, 3.0, 1e-2, -20.0),
    ]:
        parts = lambda e, q=q, z=z: _subsampled_parts(e, q, 1.0 / z)
        n = dist._top_index(parts, d, lb)
        vals = parts(np.arange(max(1, n - 50), n + 1) * d)[0]
        assert vals[-1] <= math.exp(lb) < vals[-2]
