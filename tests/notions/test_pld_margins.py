"""Rounding margins of the PLD engine's Chernoff bounds and tilt bisection (session 10).

Independent reference: the same formulas in 40-50-digit mpmath (the log-CGF of the float masses,
the Chernoff exponent at the evaluated tilts) and mpmath's exp.  Each test says how it failed on
the code before the margins.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from lastiterate.notions import pld as P
from lastiterate.notions.pld import kernels as K

from ._pld_exact import exact_profile_at

mp.mp.dps = 50


def _mp_cgf(probs: np.ndarray, lam: float) -> mp.mpf:
    """K(lam) = log sum_i p_i e^{lam i} of the float masses, in mpmath."""
    lm = mp.mpf(lam)
    return mp.log(mp.fsum(mp.mpf(float(p)) * mp.e ** (lm * j) for j, p in enumerate(probs) if p))


# --- the Chernoff window of a k-fold composition ------------------------------------------------


def _window_certificate(pmf: K._Pmf, k: int, tail: float, a: int, b: int) -> tuple[float, float]:
    """``log(bound / (tail/2))`` of the best Chernoff certificate, with the exact K of the float
    masses, for the mass above ``b`` and below ``a``, over the tilts the window evaluated
    (<= 0: the window holds all but tail/2 on that side)."""
    evaluated = pmf._cache["exact_cgf"]
    log_half = mp.log(mp.mpf(tail) / 2)
    sides = []
    for sign, edge in ((1.0, b + 1), (-1.0, a - 1)):
        best = min(
            k * _mp_cgf(pmf.probs, sign * float(K._LAMBDAS[i]))
            - sign * mp.mpf(K._LAMBDAS[i]) * edge
            for (s, i) in evaluated
            if s == sign
        )
        sides.append(float(best - log_half))
    return sides[0], sides[1]


@pytest.mark.parametrize(
    "probs",
    [
        [0.31645279, 0.0061474, 0.00070433, 0.17081016, 0.50588532],
        [0.48660201, 0.10003486, 0.41336313],
        [0.01131607, 0.11558228, 0.29716425, 0.12545058, 0.45048682],
    ],
)
def test_chernoff_window_is_certified_with_the_exact_cgf_at_huge_k(probs: list[float]) -> None:
    # k K(lambda) in floating point was off by ~1e-3 at k = 1e13: the window of these PMFs was
    # 1-2e-3 (relative, in the tail bound) too narrow on at least one side before the margin
    k = 10**13
    pmf = K._Pmf(0, np.array(probs), 0.0)
    a, b = K._chernoff_window(pmf, k, 1e-15)
    up, down = _window_certificate(pmf, k, 1e-15, a, b)
    assert up <= 0.0 and down <= 0.0, (up, down)
    assert up > -0.2 and down > -0.2, (up, down)  # the margin costs little (and the test can fail)


@pytest.mark.parametrize(
    ("q", "z", "d"), [(256 / 60000, 1.1, 1e-3), (0.5, 0.8, 1e-3), (1 - 1e-9, 3.0, 1e-3)]
)
def test_cgf_rounding_bound_holds_against_mpmath(q: float, z: float, d: float) -> None:
    pld = P.poisson_subsampled_gaussian_pld(q, z, discretization=d)
    for pmf in (pld._remove, pld._add):
        K._chernoff_window(pmf, 10**7, 1e-15)
        n = len(pmf.probs)
        for (sign, i), got in pmf._cache["exact_cgf"].items():
            lam = float(K._LAMBDAS[i])
            err = abs(mp.mpf(got) - _mp_cgf(pmf.probs, sign * lam))
            bound = K._cgf_rounding(n, np.array([lam]), np.array([got]), K._log_mass_range(pmf))
            assert err <= bound[0], (q, sign, lam, float(err), bound[0])
            assert bound[0] < 1e-12  # (a realistic bound: 1e-5 of a bin at k = 1e7)


def test_window_margin_widens_a_dp_sgd_window_by_at_most_one_bin(monkeypatch) -> None:
    pmf = P.poisson_subsampled_gaussian_pld(256 / 60000, 1.1)._remove
    for k in (1000, 10**5, 10**7):
        a, b = K._chernoff_window(pmf, k, 1e-15)
        with monkeypatch.context() as m:
            m.setattr(K, "_chernoff_exponent_margin", lambda *args: 0.0)
            a0, b0 = K._chernoff_window(pmf, k, 1e-15)
        assert a0 - 1 <= a <= a0 and b0 <= b <= b0 + 1, (k, a, a0, b, b0)


# --- the exp accuracy assumed by the certified tilt bisection and the log-CGF bounds ------------


def _exp_arguments() -> np.ndarray:
    """Random and extreme arguments of the kernels' exp: ``[-700, 0]`` (both clamp there)."""
    rng = np.random.default_rng(20261125)
    return np.concatenate(
        [
            -rng.uniform(0.0, 700.0, 6000),
            -rng.uniform(0.0, 1.0, 2000),
            -(10.0 ** rng.uniform(-17.0, 2.845, 4000)),
            -np.nextafter(700.0, 0.0) * np.array([1.0]),
            np.array([-700.0, -1e-300, -5e-324, -0.0, 0.0, -(2.0**-53), -math.log(2.0)]),
        ]
    )


def test_numpy_exp_meets_the_accuracy_the_kernels_assume() -> None:
    # _EXP_ACCURACY (4 ulp) is used by _tilted_mean_error and _cgf_rounding; measured here: at
    # most 0.503 ulp.  The second assertion shows the check is sharp: an assumption of 1/8 ulp
    # would fail it.
    x = _exp_arguments()
    got = np.empty_like(x)
    np.exp(x, out=got)  # (in place, as _tilted_mean)
    worst = mp.mpf(0)
    for xi, yi in zip(x, got, strict=True):
        exact = mp.exp(mp.mpf(float(xi)))
        worst = max(worst, abs(mp.mpf(float(yi)) - exact) / exact)
    assert worst <= K._EXP_ACCURACY, float(worst)
    assert worst >= K._EPS / 8, float(worst)


@pytest.mark.parametrize(("q", "z", "k"), [(256 / 60000, 1.1, 10**5), (0.5, 0.8, 10**7)])
def test_tilted_mean_error_bound_holds_against_mpmath(q: float, z: float, k: int) -> None:
    pmf = P.poisson_subsampled_gaussian_pld(q, z, discretization=1e-3)._remove
    with np.errstate(divide="ignore"):
        blocks = [K._blocks(np.log(pmf.probs))]
    hi = 600.0 / (k * len(pmf.probs))
    bound = K._tilted_mean_error(blocks, [k], hi)
    logm, c = blocks[0]
    for lam in (0.0, hi / 1000, hi / 7, hi / 2, hi):
        got = K._tilted_mean(blocks, [k], lam)
        lm = mp.mpf(lam)
        w = [mp.e ** (mp.mpf(float(a)) + lm * mp.mpf(float(b))) for a, b in zip(logm, c)]
        exact = k * mp.fsum(wi * mp.mpf(float(b)) for wi, b in zip(w, c)) / mp.fsum(w)
        assert abs(mp.mpf(got) - exact) <= bound, (lam, got, float(exact), bound)


# --- the aliasing bound of the tilted passes (the lower twin's slack) ---------------------------


def _mp_log_cgf(logx: np.ndarray, theta: float) -> mp.mpf:
    t = mp.mpf(theta)
    return mp.log(
        mp.fsum(mp.e ** (mp.mpf(float(a)) + t * j) for j, a in enumerate(logx) if np.isfinite(a))
    )


def _mp_chernoff_tails(logxs, powers, lo: int, hi: int, thetas) -> mp.mpf:
    """The Chernoff bound of _alias_bound (mass outside [lo, hi]) with exact log-CGFs, at the best
    of ``thetas`` on each side."""
    base = sum(k * _mp_log_cgf(lx, 0.0) for lx, k in zip(logxs, powers))
    best_up = best_dn = mp.inf
    for th in thetas:
        up = sum(k * _mp_log_cgf(lx, th) for lx, k in zip(logxs, powers)) - base
        dn = sum(k * _mp_log_cgf(lx, -th) for lx, k in zip(logxs, powers)) - base
        best_up = min(best_up, up - mp.mpf(th) * (hi + 1))
        best_dn = min(best_dn, dn + mp.mpf(th) * (lo - 1))
    return (mp.e ** min(0, best_up) + mp.e ** min(0, best_dn)) * mp.e**base


@pytest.mark.parametrize(
    ("q", "z", "k", "calls"), [(0.01, 2.0, 10**7, 2), (256 / 60000, 1.1, 10**4, 2)]
)
def test_alias_bound_is_not_below_its_chernoff_formula(monkeypatch, q, z, k, calls) -> None:
    # Before the margin the computed bound was up to 1.4e-9 (k = 1e7) and 2e-12 (k = 1e4)
    # relative BELOW the same Chernoff bound evaluated exactly (4.2e-9 at k = 1e6).  The
    # reference minimises over the tilts the code evaluated exactly and the binned grid's best.
    seen: list = []
    thetas: list = []
    exact_cgfs, alias_bound = K._exact_log_cgfs, K._alias_bound

    def record_thetas(logx, th):
        thetas.append(np.array(th))
        return exact_cgfs(logx, th)

    def record(logxs, powers, lo, hi):
        thetas.clear()
        w = alias_bound(logxs, powers, lo, hi)
        seen.append(([np.array(x) for x in logxs], list(powers), lo, hi, w, list(thetas)))
        return w

    monkeypatch.setattr(K, "_exact_log_cgfs", record_thetas)
    monkeypatch.setattr(K, "_alias_bound", record)
    with P.delta_of_interest(1e-14):
        P.poisson_subsampled_gaussian_pld(q, z, discretization=1e-3, with_lower=True).self_compose(
            k
        )
    assert len(seen) >= calls
    for logxs, powers, lo, hi, w, tried in seen[:calls]:
        _, _, _, bu, bd = K._tail_summaries(logxs, powers)
        cands = set(np.concatenate(tried).tolist()) if tried else set()
        cands.add(float(K._THETAS[np.argmin(bu - K._THETAS * (hi + 1.0))]))
        cands.add(float(K._THETAS[np.argmin(bd + K._THETAS * (lo - 1.0))]))
        ref = _mp_chernoff_tails(logxs, powers, lo, hi, sorted(cands))
        rel = float((mp.mpf(w) - ref) / ref)
        assert 0.0 <= rel <= 1e-5, (powers, rel)


# --- the optimistic (lower) twins: rounded inward --------------------------------------------


def _excess(pmf, slack: float, d: float, exact, indices) -> list:
    """Grid points where the lower PMF's profile, less its slack, lies above the exact one."""
    out = []
    for i, value in exact_profile_at(pmf, d, indices).items():
        want = exact(i * mp.mpf(d))
        if value - mp.mpf(slack) > want:
            out.append((i, float((value - slack - want) / max(want, mp.mpf(1e-300)))))
    return out


def test_lower_remove_twin_stays_below_the_exact_profile_at_the_kink() -> None:
    # q = 0.5, z = 0.8 at the accountant's grid: next to log(1 - q) the optimistic remove curve
    # is exact up to round-off, and the masses' rounding lifted its PMF 6.3e-14 relative ABOVE
    # the exact profile at l = -0.6932 before the inward rounding
    from .test_pld_outward_rounding import _exact_remove

    q, z, d = 0.5, 0.8, 1e-4
    pld = P.poisson_subsampled_gaussian_pld(q, z, discretization=d, with_lower=True)
    pmf = pld._low_remove
    kink = math.floor(math.log1p(-q) / d)
    points = list(range(kink - 40, kink + 40)) + list(range(pmf.lower, pmf.upper + 1, 97))
    bad = _excess(pmf, pld._low_slack, d, lambda e: _exact_remove(e, q, 1 / z), points)
    assert not bad, bad[:5]
    assert pld._low_slack < 1e-22  # the inward rounding is relative, not an additive slack


@pytest.mark.parametrize(("q", "z"), [(256 / 60000, 1.1), (0.5, 2.0), (0.999, 2.0)])
def test_lower_poisson_twins_stay_below_the_exact_profiles(q: float, z: float) -> None:
    from .test_pld_outward_rounding import _exact_add, _exact_remove

    d = 1e-3
    pld = P.poisson_subsampled_gaussian_pld(q, z, discretization=d, with_lower=True)
    for pmf, exact in (
        (pld._low_remove, lambda e: _exact_remove(e, q, 1 / z)),
        (pld._low_add, lambda e: _exact_add(e, q, 1 / z)),
    ):
        step = max(1, (pmf.upper - pmf.lower) // 1500)
        points = range(pmf.lower - 1, pmf.upper + 2, step)
        bad = _excess(pmf, pld._low_slack, d, exact, points)
        assert not bad, bad[:5]


@pytest.mark.parametrize("mu", [0.05, 1.0, 3.0])
def test_lower_gaussian_twin_stays_below_the_exact_profile(mu: float) -> None:
    from .test_pld_outward_rounding import _exact_gaussian

    d = 1e-3
    pld = P.gaussian_pld(mu, discretization=d, with_lower=True)
    pmf = pld._low_remove
    step = max(1, (pmf.upper - pmf.lower) // 1500)
    points = range(pmf.lower - 1, pmf.upper + 2, step)
    bad = _excess(pmf, pld._low_slack, d, lambda e: _exact_gaussian(e, mu), points)
    assert not bad, bad[:5]


def test_inward_rounding_moves_the_dp_sgd_lower_end_by_at_most_1e_7(monkeypatch) -> None:
    from lastiterate.notions.pld import distribution as D

    q, z, steps, delta = 256 / 60000, 1.1, 10**4, 1e-12
    with P.delta_of_interest(delta):
        pld = P.poisson_subsampled_gaussian_pld(q, z, with_lower=True).self_compose(steps)
        got = pld.epsilon_with_error(delta)
    monkeypatch.setattr(D, "_deflate", lambda masses, rho: masses)
    with P.delta_of_interest(delta):
        pld = P.poisson_subsampled_gaussian_pld(q, z, with_lower=True).self_compose(steps)
        plain = pld.epsilon_with_error(delta)
    # (not monotone to the last digits: the composition's tilted passes and per-bin error bounds
    # depend on the inputs' last bits; measured: the lower end moves by 6e-9 relative)
    assert got.upper == plain.upper
    assert abs(got.lower - plain.lower) <= 1e-7 * plain.lower, (got, plain)
