"""Outward rounding of the pessimistic one-step PMFs (issue: trust of the PLD engine's numerics).

Independent reference: the exact privacy profiles in 50-digit mpmath (closed forms of
docs/theorems.md §1.2/§1.6 and the replace-one pair's crossing point), and the profile of each
computed PMF evaluated exactly (its float masses summed in mpmath).  The pessimistic PMF must
dominate the exact pair: its profile at every grid point at least the exact value (between grid
points it is linear in e^eps and the exact profile is convex).  Before the outward rounding the
PMFs missed by up to 1e-13 relative (1e-10 for the add direction near q = 1) at many points; every
case below failed then.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import mpmath as mp
import numpy as np
import pytest

from lastiterate.notions import pld as P
from lastiterate.notions.pld import distribution as D
from lastiterate.notions.pld import profiles as PR

from ._pld_exact import exact_profile_at

mp.mp.dps = 50


def _exact_gaussian(eps: mp.mpf, mu: float) -> mp.mpf:
    """G_mu's profile at any real eps (symmetric identity below 0)."""
    m = mp.mpf(mu)
    if eps < 0:
        x = -eps
        return 1 - mp.e ** (-x) + mp.e ** (-x) * _exact_gaussian(x, mu)
    return mp.ncdf(-eps / m + m / 2) - mp.e**eps * mp.ncdf(-eps / m - m / 2)


def _exact_remove(eps: mp.mpf, q: float, mu: float) -> mp.mpf:
    """Poisson remove pair qN(mu, 1) + (1 - q)N(0, 1) vs N(0, 1)."""
    qq = mp.mpf(q)
    if q < 1 and eps <= mp.log(1 - qq):
        return 1 - mp.e**eps
    return qq * _exact_gaussian(mp.log(1 + (mp.e**eps - 1) / qq), mu)


def _exact_add(eps: mp.mpf, q: float, mu: float) -> mp.mpf:
    """The swapped pair; above 0 as e^c q e^t delta_G(-t), e^t = 1 + (e^-c - 1)/q (no
    cancellation: the values there go down to 1e-120)."""
    qq = mp.mpf(q)
    if eps <= 0:
        return 1 - mp.e**eps + mp.e**eps * _exact_remove(-eps, q, mu)
    if q < 1 and eps >= -mp.log(1 - qq):
        return mp.mpf(0)
    et = 1 + (mp.e ** (-eps) - 1) / qq
    return mp.e**eps * qq * et * _exact_gaussian(-mp.log(et), mu)


def _exact_uniform(eps: mp.mpf, p: float, mu: float) -> mp.mpf:
    """C_p(G_mu) (symmetric; p delta_G(eps') above 0)."""
    if eps < 0:
        x = -eps
        return 1 - mp.e ** (-x) + mp.e ** (-x) * _exact_uniform(x, p, mu)
    pp = mp.mpf(p)
    return pp * _exact_gaussian(mp.log(1 + (mp.e**eps - 1) / pp), mu)


def _exact_replace(eps: mp.mpf, q: float, z: float) -> mp.mpf:
    """dp_accounting's REPLACE_ONE pair, at the exact crossing x of the loss (eps >= 0)."""
    qq, zz = mp.mpf(q), mp.mpf(z)
    alpha = mp.e ** (1 / (2 * zz**2)) * (1 - qq) / qq
    x = zz**2 * (mp.asinh(-alpha * mp.sinh(eps / 2)) - eps / 2)
    big_p = qq * mp.ncdf((x + 1) / zz) + (1 - qq) * mp.ncdf(x / zz)
    big_q = qq * mp.ncdf((x - 1) / zz) + (1 - qq) * mp.ncdf(x / zz)
    return big_p - mp.e**eps * big_q


def _shortfalls(pmf, d: float, exact: Callable[[mp.mpf], mp.mpf], indices) -> list:
    """Grid points (index, relative shortfall) where the PMF's profile, evaluated exactly from its
    float masses, lies below the exact profile."""
    probs = [mp.mpf(float(p)) for p in pmf.probs]
    dd = mp.mpf(d)
    n = len(probs)
    tail_u = [mp.mpf(0)] * (n + 1)  # sum_{j >= k} b_j
    tail_w = [mp.mpf(0)] * (n + 1)  # sum_{j >= k} b_j e^{-l_j}
    for k in range(n - 1, -1, -1):
        tail_u[k] = tail_u[k + 1] + probs[k]
        tail_w[k] = tail_w[k + 1] + probs[k] * mp.e ** (-(pmf.lower + k) * dd)
    out = []
    for i in indices:
        k = min(max(i - pmf.lower + 1, 0), n)  # first mass strictly above l_i
        loss = i * dd
        value = mp.mpf(pmf.infinity_mass) + tail_u[k] - mp.e**loss * tail_w[k]
        want = exact(loss)
        if value < want:
            out.append((i, float((want - value) / want)))
    return out


def _all_points(pmf) -> range:
    return range(pmf.lower - 2, pmf.upper + 2)


D_COARSE = 1e-2

GAUSSIAN_MUS = [1e-3, 0.05, 1.0, 1.0 / 0.3]  # noise sigma 1e3 .. 0.3


@pytest.mark.parametrize("mu", [1e-3, 0.05, 1.0, pytest.param(1.0 / 0.3, marks=pytest.mark.slow)])
def test_gaussian_upper_pmf_dominates_the_exact_profile_at_every_grid_point(mu: float) -> None:
    pmf = P.gaussian_pld(mu, discretization=D_COARSE)._remove
    bad = _shortfalls(pmf, D_COARSE, lambda e: _exact_gaussian(e, mu), _all_points(pmf))
    assert not bad, bad[:5]


POISSON_CASES = [
    (1e-6, 0.3),
    (1e-3, 1.0),
    (256 / 60000, 1.1),
    (0.5, 0.8),
    (0.999, 2.0),
    (1 - 1e-9, 3.0),
    (0.99, 1000.0),
]


@pytest.mark.parametrize(("q", "z"), POISSON_CASES)
def test_poisson_upper_pmfs_dominate_the_exact_profiles_in_both_directions(
    q: float, z: float
) -> None:
    pld = P.poisson_subsampled_gaussian_pld(q, z, discretization=D_COARSE)
    rem = _shortfalls(
        pld._remove, D_COARSE, lambda e: _exact_remove(e, q, 1 / z), _all_points(pld._remove)
    )
    add = _shortfalls(pld._add, D_COARSE, lambda e: _exact_add(e, q, 1 / z), _all_points(pld._add))
    assert not rem, ("remove", rem[:5])
    assert not add, ("add", add[:5])


@pytest.mark.parametrize(
    ("p", "mu"),
    [
        pytest.param(1e-6, 2 / 0.3, marks=pytest.mark.slow),
        (0.01, 2 / 1.1),
        (0.5, 1.0),
        (1 - 1e-9, 0.5),
    ],
)
def test_uniform_subsampled_upper_pmf_dominates_the_exact_profile(p: float, mu: float) -> None:
    pmf = P.symmetric_subsampled_gaussian_pld(p, mu, discretization=D_COARSE)._remove
    bad = _shortfalls(pmf, D_COARSE, lambda e: _exact_uniform(e, p, mu), _all_points(pmf))
    assert not bad, bad[:5]


@pytest.mark.parametrize(("q", "z"), [(1e-3, 0.5), (0.01, 1.0), (0.9, 3.0)])
def test_replace_one_upper_pmf_dominates_the_exact_profile(q: float, z: float) -> None:
    pmf = P.poisson_subsampled_gaussian_pld(
        q, z, adjacency="replace", discretization=D_COARSE
    )._remove
    points = range(pmf.upper + 2)  # (the closed form is for eps >= 0; below, the mirror)
    bad = _shortfalls(pmf, D_COARSE, lambda e: _exact_replace(e, q, z), points)
    assert not bad, bad[:5]


def test_dp_sgd_upper_pmfs_dominate_at_the_default_grid() -> None:
    # the accountant's grid (1e-4): the masses' rounding grows like 1/Delta; every 13th point
    q, z, d = 256 / 60000, 1.1, 1e-4
    pld = P.poisson_subsampled_gaussian_pld(q, z, discretization=d)
    for pmf, exact in (
        (pld._remove, lambda e: _exact_remove(e, q, 1 / z)),
        (pld._add, lambda e: _exact_add(e, q, 1 / z)),
    ):
        bad = _shortfalls(pmf, d, exact, range(pmf.lower, pmf.upper + 1, 13))
        assert not bad, bad[:5]


# --- the error bounds themselves, against mpmath -------------------------------------------------


def _check_bound(values, errors, exact_values) -> None:
    for v, e, x in zip(values, errors, exact_values, strict=True):
        assert abs(mp.mpf(float(v)) - x) <= mp.mpf(float(e)), (v, e, x)


@pytest.mark.parametrize("mu", GAUSSIAN_MUS)
def test_gaussian_value_error_bound_holds(mu: float) -> None:
    # from 0 to where delta is about e^-60 (eps/mu - mu/2 = 11), and into the underflow
    eps = np.concatenate([np.linspace(0.0, 11.0 * mu + mu * mu / 2, 15), [40.0 * mu + mu * mu]])
    vals, _, err = PR._gaussian_parts_bounded(eps, mu, PR.EPS * eps)
    _check_bound(vals, err, [_exact_gaussian(mp.mpf(float(e)), mu) for e in eps])


@pytest.mark.parametrize(("q", "z"), POISSON_CASES)
def test_subsampled_and_residual_value_error_bounds_hold(q: float, z: float) -> None:
    mu = 1 / z
    lo = math.log1p(-q)
    eps = np.concatenate([np.linspace(lo * 0.999, -1e-3, 9), np.linspace(0.0, 6.0, 9)])
    vals, _, err = PR._subsampled_parts_bounded(eps, q, mu, PR.EPS * np.abs(eps))
    _check_bound(vals, err, [_exact_remove(mp.mpf(float(e)), q, mu) for e in eps])
    neg = eps[eps < 0]
    res, res_err = D._remove_residuals_bounded(neg, q, mu, PR.EPS * np.abs(neg))
    with mp.workdps(400):  # delta_R - (1 - e^eps) cancels down to 1e-300 and below
        exact = [
            +(_exact_remove(mp.mpf(float(e)), q, mu) - 1 + mp.e ** mp.mpf(float(e))) for e in neg
        ]
    _check_bound(res, res_err, exact)


@pytest.mark.parametrize(("q", "z"), [(1e-3, 0.5), (0.01, 1.0), (0.9, 3.0), (1.0, 1.0)])
def test_replace_value_error_bound_holds(q: float, z: float) -> None:
    eps = np.linspace(0.0, 8.0, 17)
    vals, _, err = PR._replace_parts_bounded(q, z)(eps, PR.EPS * eps)
    _check_bound(vals, err, [_exact_replace(mp.mpf(float(e)), q, z) for e in eps])


# --- what the margin costs ----------------------------------------------------------------------


def test_margin_raises_the_dp_sgd_epsilon_by_at_most_1e_7_relative(monkeypatch) -> None:
    q, z, steps, delta = 256 / 60000, 1.1, 14000, 1e-5
    with_margin = P.poisson_subsampled_gaussian_epsilon(q, z, steps, delta).upper
    monkeypatch.setattr(D, "_inflate", lambda pmf, rho, floor: pmf)
    without = P.poisson_subsampled_gaussian_epsilon(q, z, steps, delta).upper
    assert without <= with_margin <= without * (1 + 1e-7), (without, with_margin)


# --- the optimistic (lower) twin near q = 1 ----------------------------------------------------


def _excesses(pmf, d: float, exact: Callable[[mp.mpf], mp.mpf], indices) -> list:
    """Grid points (index, relative excess) where the PMF's exact profile lies above ``exact``."""
    out = []
    for i, value in exact_profile_at(pmf, d, indices).items():
        want = exact(i * mp.mpf(d))
        if value > want:
            out.append((i, float((value - want) / want)))
    return out


@pytest.mark.parametrize(
    ("q", "z"), [(1 - 1e-6, 1.0), pytest.param(1 - 1e-9, 3.0, marks=pytest.mark.slow)]
)
def test_lower_remove_twin_near_rate_one_has_no_round_off_masses(q: float, z: float) -> None:
    # At losses below 0 the remove profile is within a tiny amount of 1 - u; the optimistic
    # curve's masses used to be second differences of plain values there, i.e. round-off of
    # ~1e-13 that lifted the curve above the exact profile by up to 4.2e-13 relative (528 of the
    # points below at q = 1 - 1e-6).  In residual form what is left is the masses' own rounding.
    d = 1e-4
    pmf = P.poisson_subsampled_gaussian_pld(q, z, discretization=d, with_lower=True)._low_remove
    step = max(1, (pmf.upper - pmf.lower) // 1500)
    over = _excesses(
        pmf, d, lambda e: _exact_remove(e, q, 1 / z), range(pmf.lower, pmf.upper + 1, step)
    )
    assert all(rel <= 1e-14 for _, rel in over), sorted(over, key=lambda t: -t[1])[:5]
