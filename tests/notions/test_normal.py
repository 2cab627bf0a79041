"""``lastiterate.notions.normal`` (the account path's erf / normal family, without scipy.special).

Independent references: mpmath at 100 bits (and, beyond mpmath's range, the asymptotic series
evaluated in mpmath), scipy.special on dense grids where scipy itself is accurate, Python's
``statistics.NormalDist.inv_cdf`` (the same AS 241 algorithm, transcribed independently) and
Wichura's published check sums of the AS 241 coefficients.  Stated accuracy (relative error for
normal results, absolute error in units of the smallest subnormal for subnormal results):

========== ============================ =========================
function   max relative error (eps)     subnormal results
========== ============================ =========================
erf        3 (6.7e-16)                  --
erfc       5 (1.1e-15)                  2 units
erfcx      4 (8.9e-16)                  --
ndtr       5 (1.1e-15)                  2 units
log_ndtr   5 (1.1e-15)                  --
ndtri      4 (8.9e-16)                  --
expit      2 (4.4e-16)                  2 units
gammaln    64 x max(1, |value|) abs.    --
========== ============================ =========================

(scipy's own ``erfc``/``ndtr`` lose ``~x^2`` eps in the tails, where the argument's rounding is
amplified; these functions split ``exp(-x^2)`` as Cody does and keep the bound there.)
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from functools import cache

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from lastiterate.notions import normal

EPS = 2.220446049250313e-16
TINY = 2.2250738585072014e-308  # smallest normal double
SUBNORMAL_UNIT = 5e-324

#: relative error bounds (units of EPS) for normal results
BOUNDS = {
    "erf": 3.0,
    "erfc": 5.0,
    "erfcx": 4.0,
    "ndtr": 5.0,
    "log_ndtr": 5.0,
    "ndtri": 4.0,
    "expit": 2.0,
}


# --- references in mpmath ---------------------------------------------------------------------


def _mp(v: float) -> mp.mpf:
    return mp.mpf(float(v))


def ref_erf(v: float) -> float:
    if abs(v) > 10.0:
        return math.copysign(1.0, v)
    with mp.workprec(100):
        return float(mp.erf(_mp(v)))


def ref_erfc(v: float) -> float:
    if v > 30.0:
        return 0.0  # erfc(30) < 1e-392
    if v < -10.0:
        return 2.0
    with mp.workprec(100):
        return float(mp.erfc(_mp(v)))


def ref_erfcx(v: float) -> float:
    if v < -26.7:
        return math.inf  # 2 exp(v^2) overflows from -26.63 on
    with mp.workprec(100):
        y = _mp(v)
        if v > 1e4:  # asymptotic series, next term 15/(8 y^6) < 1e-24 relative
            return float((1 - 1 / (2 * y**2) + 3 / (4 * y**4)) / (y * mp.sqrt(mp.pi)))
        return float(mp.erfc(y) * mp.exp(y * y))


def ref_ndtr(v: float) -> float:
    if v < -45.0:
        return 0.0
    if v > 10.0:
        return 1.0
    with mp.workprec(100):
        return float(mp.ncdf(_mp(v)))


def ref_log_ndtr(v: float) -> float:
    with mp.workprec(100):
        y = _mp(v)
        if v < -1e4:  # log Phi(y) = -y^2/2 - log(-y sqrt(2 pi)) + log(1 - 1/y^2 + 3/y^4 - ...)
            return float(-(y * y) / 2 - mp.log(-y * mp.sqrt(2 * mp.pi)) + mp.log1p(-1 / y**2))
        if v > 40.0:
            return -0.0  # -Phi(-40) < 1e-349
        if v > 0:
            return float(mp.log1p(-mp.ncdf(-y)))
        return float(mp.log(mp.ncdf(y)))


def ref_ndtri(p: float) -> float:
    """Newton's method on ``log Phi`` in 200-bit arithmetic, from scipy's value."""
    if p > 0.5:
        return -ref_ndtri(1.0 - p)  # 1 - p is exact for p >= 1/2
    if p == 0.5:
        return 0.0
    with mp.workprec(200):
        z = mp.mpf(float(special.ndtri(p)))
        target = mp.log(_mp(p))
        for _ in range(8):
            cdf = mp.ncdf(z)
            z -= (mp.log(cdf) - target) * cdf / mp.npdf(z)
        return float(z)


def ref_expit(v: float) -> float:
    if abs(v) > 800.0:
        return 1.0 if v > 0 else 0.0
    with mp.workprec(100):
        return float(1 / (1 + mp.exp(-_mp(v))))


REFERENCES: dict[str, Callable[[float], float]] = {
    "erf": ref_erf,
    "erfc": ref_erfc,
    "erfcx": ref_erfcx,
    "ndtr": ref_ndtr,
    "log_ndtr": ref_log_ndtr,
    "ndtri": ref_ndtri,
    "expit": ref_expit,
}


def _errors(got: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(max relative error in EPS over normal references, max absolute error in subnormal units
    over subnormal/zero references); equal values (infinities included) count as exact."""
    got, ref = np.asarray(got, dtype=float), np.asarray(ref, dtype=float)
    same = (got == ref) | (np.isnan(got) & np.isnan(ref))
    normal_ref = (np.abs(ref) >= TINY) & ~same
    with np.errstate(invalid="ignore", over="ignore"):
        rel = np.abs(got - ref)[normal_ref] / np.abs(ref[normal_ref]) / EPS
        sub = np.abs(got - ref)[~normal_ref & ~same] / SUBNORMAL_UNIT
    return float(np.max(rel, initial=0.0)), float(np.max(sub, initial=0.0))


def _sample(name: str) -> np.ndarray:
    """Fixed points covering every branch of ``name`` (both tails, the branch boundaries,
    subnormal results) and random points."""
    rng = np.random.default_rng(20261125)
    if name == "ndtri":
        return np.concatenate(
            [
                rng.uniform(0.0, 1.0, 600),
                10.0 ** rng.uniform(-323.5, -1.0, 500),  # down to subnormal p
                1.0 - 10.0 ** rng.uniform(-15.9, -1.0, 200),
                [0.075, 0.925, 0.5, math.exp(-25.0), 5e-324, 1e-300],
            ]
        )
    edges = [0.46875, 4.0, 0.46875 * math.sqrt(2), 4 * math.sqrt(2), 1.0, 26.55, 37.5]
    pts = [
        rng.uniform(-0.5, 0.5, 200),
        rng.uniform(-6.0, 6.0, 400),
        rng.uniform(-40.0, 40.0, 400),
        np.array(edges + [-e for e in edges]),
    ]
    if name in ("erfcx", "log_ndtr", "expit"):
        pts.append(-np.exp(rng.uniform(0.0, 300.0, 150)))
        pts.append(np.exp(rng.uniform(0.0, 300.0, 150)))
    if name == "expit":
        pts.append(rng.uniform(-745.0, 745.0, 300))
    return np.concatenate(pts)


@cache
def _reference(name: str) -> tuple[np.ndarray, np.ndarray]:
    x = _sample(name)
    return x, np.array([REFERENCES[name](float(v)) for v in x])


def _check_accuracy(name: str) -> tuple[float, float]:
    x, ref = _reference(name)
    with np.errstate(all="ignore"):
        return _errors(getattr(normal, name)(x), ref)


# --- accuracy -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_accuracy_against_mpmath(name: str) -> None:
    rel, sub = _check_accuracy(name)
    assert rel <= BOUNDS[name], f"{name}: {rel:.2f} eps"
    assert sub <= 2.0, f"{name}: {sub} subnormal units"


@pytest.mark.parametrize(
    ("name", "lo", "hi", "bound"),
    [
        # ranges where scipy itself is within ~3 eps (measured against mpmath), so a departure
        # beyond our bound plus 3 eps is ours
        ("erf", -8.0, 8.0, 6.0),
        ("erfc", -8.0, 0.46875, 8.0),
        ("erfcx", -0.46875, 1e4, 10.0),
        ("ndtr", -0.6, 8.0, 8.0),
        ("log_ndtr", -50.0, 0.6, 8.0),
        ("expit", -700.0, 700.0, 5.0),
    ],
)
def test_dense_grid_against_scipy(name: str, lo: float, hi: float, bound: float) -> None:
    x = np.linspace(lo, hi, 400_001)
    rel, sub = _errors(getattr(normal, name)(x), getattr(special, name)(x))
    assert rel <= bound and sub <= 2.0, (rel, sub)


def test_ndtri_dense_grid_against_scipy() -> None:
    p = np.concatenate([np.linspace(0.0, 1.0, 400_001), 10.0 ** np.linspace(-320, -1, 100_001)])
    rel, _ = _errors(normal.ndtri(p), special.ndtri(p))
    assert rel <= 8.0


def test_ndtri_is_the_stdlib_as241() -> None:
    """The array path reproduces ``statistics.NormalDist.inv_cdf`` (an independent transcription
    of AS 241) to the last bit: every coefficient is right."""
    x, _ = _reference("ndtri")
    p = x[(x > 0) & (x < 1)]
    inv = statistics.NormalDist().inv_cdf
    expected = np.array([inv(float(v)) for v in p])
    np.testing.assert_array_equal(normal.ndtri(p), expected)


@pytest.mark.parametrize(
    ("num", "den", "check_sum"),
    [
        ("_PPND_CENTRAL_NUM", "_PPND_CENTRAL_DEN", 55.8831928806149014439),
        ("_PPND_NEAR_NUM", "_PPND_NEAR_DEN", 49.33206503301610289036),
        ("_PPND_FAR_NUM", "_PPND_FAR_DEN", 47.52583317549289671629),
    ],
)
def test_as241_coefficients_match_wichuras_check_sums(num: str, den: str, check_sum: float) -> None:
    """Wichura (1988) prints, for each region, the "hash sum" of its 15 fitted coefficients: the
    sum of their decimal mantissas (``c / 10^floor(log10 c)``; the leading 1 of the denominator is
    not fitted), to check a transcription."""
    fitted = [*getattr(normal, num), *getattr(normal, den)[:-1]]
    total = math.fsum(c / 10.0 ** math.floor(math.log10(c)) for c in fitted)
    assert total == pytest.approx(check_sum, rel=1e-15)


COEFFICIENT_TABLES = {
    "_A": "erf",
    "_B": "erf",
    "_C": "erfcx",
    "_D": "erfcx",
    "_P": "erfcx",
    "_Q": "erfcx",
    "_PPND_CENTRAL_NUM": "ndtri",
    "_PPND_CENTRAL_DEN": "ndtri",
    "_PPND_NEAR_NUM": "ndtri",
    "_PPND_NEAR_DEN": "ndtri",
    "_PPND_FAR_NUM": "ndtri",
    "_PPND_FAR_DEN": "ndtri",
}


@pytest.mark.parametrize(
    ("table", "index"),
    [(t, i) for t in COEFFICIENT_TABLES for i in range(len(getattr(normal, t)))],
)
def test_a_wrong_coefficient_fails_the_accuracy_test(
    table: str, index: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The accuracy test above can fail: changing any one coefficient in its 7th significant
    digit (most are caught at the 14th) puts the function outside its bound on the sample."""
    values = list(getattr(normal, table))
    if values[index] == 1.0 and table.endswith("_DEN") and index == len(values) - 1:
        pytest.skip("the constant 1 of the denominator is not a fitted coefficient")
    values[index] *= 1.0 + 1e-6
    monkeypatch.setattr(normal, table, tuple(values))
    name = COEFFICIENT_TABLES[table]
    if name == "ndtri":
        # the array path (the scalar path is the stdlib's own)
        x, ref = _reference("ndtri")
        rel, _ = _errors(normal._ndtri_block(x), ref)
    else:
        rel, _ = _check_accuracy(name)
    assert rel > BOUNDS[name]


# --- special values and the whole double range ------------------------------------------------

SPECIALS = np.array(
    [-np.inf, -1e308, -1e154, -40.0, -38.5, -37.6, -27.0, -26.63, -1.0, -5e-324, -0.0, 0.0]
    + [5e-324, 1e-300, 0.5, 1.0, 26.6, 40.0, 1e8, 1e154, 1e308, np.inf, np.nan]
)


@pytest.mark.parametrize("name", ["erf", "erfc", "erfcx", "ndtr", "log_ndtr", "expit"])
def test_special_values_as_scipy(name: str) -> None:
    """inf, -inf, signed zeros and nan as scipy (tails where scipy flushes to 0 excepted: there
    the value is compared with mpmath)."""
    ours = getattr(normal, name)(SPECIALS)
    with np.errstate(all="ignore"):
        theirs = getattr(special, name)(SPECIALS)
    ref = np.array([math.nan if math.isnan(v) else REFERENCES[name](v) for v in SPECIALS])
    for v, a, b, r in zip(SPECIALS, ours, theirs, ref):
        if math.isnan(b) or math.isinf(b) or b == 0.0 or abs(b) == 1.0:
            if b == 0.0 and r != 0.0:  # scipy flushed a subnormal (or tiny) value to 0
                assert abs(a - r) <= 2 * SUBNORMAL_UNIT, (v, a, r)
            else:
                np.testing.assert_equal(a, b, err_msg=f"{name}({v})")
        _, sub = _errors(np.array([a]), np.array([r]))
        rel, _ = _errors(np.array([a]), np.array([r]))
        assert rel <= BOUNDS[name] and sub <= 2.0, (name, v, a, r)


def test_ndtri_special_values_as_scipy() -> None:
    p = np.array([-1.0, -0.0, 0.0, 0.5, 1.0, 1.5, np.inf, -np.inf, np.nan])
    np.testing.assert_equal(normal.ndtri(p), special.ndtri(p))
    extreme = np.array([5e-324, 1e-300, 1.0 - 2**-53])
    np.testing.assert_allclose(normal.ndtri(extreme), special.ndtri(extreme), rtol=4 * EPS)


@pytest.mark.parametrize("name", sorted(BOUNDS))
@settings(max_examples=150, deadline=None)
@given(v=st.floats(allow_nan=False, allow_infinity=True, allow_subnormal=True))
def test_whole_double_range_against_mpmath(name: str, v: float) -> None:
    """Any double: the scalar path, a one-element array and a longer array (the block path) agree
    within an ulp (the same operations; numpy's exp/log may differ from libm's by one ulp) and
    are within the bound of the mathematical value."""
    if name == "ndtri":
        v = abs(v) / (1.0 + abs(v)) if math.isfinite(v) else 1.0
    f = getattr(normal, name)
    scalar = f(v)
    one = f(np.array([v]))[0]
    many = f(np.array([v, 0.25, v]))[0]
    assert isinstance(scalar, np.float64)
    for a in (one, many):
        assert a == scalar or abs(a - scalar) <= np.spacing(abs(scalar)), (v, a, scalar)
    r = REFERENCES[name](v) if name != "ndtri" or 0.0 < v < 1.0 else float(special.ndtri(v))
    rel, sub = _errors(np.array([scalar]), np.array([r]))
    assert rel <= BOUNDS[name] and sub <= 2.0, (v, scalar, r)


def test_nan_propagates() -> None:
    for name in [*sorted(BOUNDS), "gammaln", "gammasgn"]:
        f = getattr(normal, name)
        assert math.isnan(f(math.nan)), name
        assert np.isnan(f(np.array([math.nan, 0.5]))[0]), name
    assert math.isnan(normal.logsumexp(np.array([0.0, math.nan])))


def test_shapes_and_types_follow_scipy() -> None:
    x = np.linspace(-3, 3, 12).reshape(3, 4)
    for name in [*sorted(BOUNDS), "gammaln"]:
        f, g = getattr(normal, name), getattr(special, name)
        arg = x if name != "ndtri" else special.ndtr(x)
        assert f(arg).shape == (3, 4)
        assert type(f(0.3)) is type(g(0.3)) is np.float64
        assert f(np.array(0.3)).shape == () and f(np.array([0.3])).shape == (1,)
        assert f(np.array([])).shape == (0,)
        assert f(1) == f(1.0)  # integers accepted


# --- monotonicity -------------------------------------------------------------------------------

MONOTONE = {  # name: (sign, lo, hi)
    "ndtr": (1, -40.0, 10.0),
    "log_ndtr": (1, -1e3, 40.0),
    "erf": (1, -6.0, 6.0),
    "erfc": (-1, -6.0, 28.0),
    "erfcx": (-1, -26.0, 1e3),
    "ndtri": (1, 0.0, 1.0),
    "expit": (1, -800.0, 800.0),
}


@pytest.mark.parametrize("name", sorted(MONOTONE))
def test_monotone_on_dense_grids(name: str) -> None:
    sign, lo, hi = MONOTONE[name]
    x = np.sort(np.random.default_rng(5).uniform(lo, hi, 1_000_000))
    v = sign * getattr(normal, name)(x)
    assert np.all(np.diff(v) >= 0)


def _adjacent_doubles(c: float, k: int = 200) -> np.ndarray:
    """``c`` and the ``k`` doubles on each side of it, in increasing order."""
    down, up = [c], [c]
    for _ in range(k):
        down.append(float(np.nextafter(down[-1], -np.inf)))
        up.append(float(np.nextafter(up[-1], np.inf)))
    return np.array(down[:0:-1] + up)


BRANCH_EDGES = {
    "ndtr": [0.46875 * math.sqrt(2), 4 * math.sqrt(2), 28 * math.sqrt(2), 3.0625, 20.0625],
    "log_ndtr": [-1.0, 0.46875 * math.sqrt(2), 4 * math.sqrt(2), -4 * math.sqrt(2)],
    "erf": [0.46875, 4.0, 3.0625],
    "erfc": [0.46875, 4.0, 3.0625, 20.0625],
    "erfcx": [0.46875, 4.0, 3.0625],
    "ndtri": [0.075, math.exp(-25.0)],
    "expit": [0.0],
}


@pytest.mark.parametrize("name", sorted(BRANCH_EDGES))
def test_no_jump_at_branch_boundaries(name: str) -> None:
    """Around every switch of formula (and of CALERF's 1/16 split of ``exp(-x^2)``), over 400
    adjacent doubles on each side (and mirrored), the function never moves against its direction
    by more than 4 ulps: rounding noise of the last bits, never a jump between branches."""
    sign = MONOTONE[name][0]
    for c in BRANCH_EDGES[name]:
        for edge in (c, -c) if name not in ("ndtri", "expit") else (c, 1.0 - c):
            x = _adjacent_doubles(edge)
            v = sign * getattr(normal, name)(x)
            back = -np.diff(v)
            assert np.all(back <= 4 * np.spacing(np.abs(v[1:]))), (name, edge, np.max(back))


# --- logsumexp, gammaln, gammasgn ---------------------------------------------------------------


@pytest.mark.parametrize(
    "a",
    [
        np.array([0.0]),
        np.array([1000.0, 1000.0]),
        np.array([-1e3, 0.0, -745.0, -np.inf]),
        np.array([-np.inf, -np.inf]),
        np.array([np.inf, 1.0]),
        np.array([np.inf, -np.inf]),
        np.array([]),
        np.linspace(-50.0, 3.0, 10_000),
        np.random.default_rng(3).standard_normal((40, 25)) * 30.0,
    ],
)
def test_logsumexp_against_scipy(a: np.ndarray) -> None:
    ours, theirs = normal.logsumexp(a), special.logsumexp(a)
    assert isinstance(ours, np.float64)
    if math.isfinite(theirs):
        assert ours == pytest.approx(theirs, rel=4 * EPS, abs=4 * EPS)
    else:
        np.testing.assert_equal(ours, theirs)


def test_logsumexp_against_mpmath() -> None:
    a = np.random.default_rng(11).uniform(-40.0, 10.0, 500)
    with mp.workprec(120):
        ref = float(mp.log(mp.fsum(mp.exp(_mp(v)) for v in a)))
    assert normal.logsumexp(a) == pytest.approx(ref, rel=4 * EPS)


def test_gammaln_against_math_lgamma_and_scipy() -> None:
    rng = np.random.default_rng(13)
    x = np.concatenate(
        [
            rng.uniform(-600.0, 600.0, 20_000),
            rng.uniform(-5.0, 12.0, 20_000),
            np.arange(1.0, 3000.0),  # the integer table
            rng.uniform(-1e6, 1e6, 2_000),
            np.exp(rng.uniform(-700.0, 700.0, 2_000)),
            [0.5, 1.5, 1e-300, 2.5e305],
        ]
    )
    x = x[~((x <= 0) & (x == np.floor(x)))]
    ours = normal.gammaln(x)
    lg = np.array([math.lgamma(v) for v in x])
    scale = np.maximum(1.0, np.abs(lg))
    assert np.max(np.abs(ours - lg) / scale) <= 64 * EPS
    integers = (x >= 1) & (x == np.floor(x)) & (x <= 2**20)
    np.testing.assert_array_equal(ours[integers], lg[integers])  # the table is math.lgamma's
    assert np.max(np.abs(ours - special.gammaln(x)) / scale) <= 80 * EPS


def test_gammaln_and_gammasgn_special_values_as_scipy() -> None:
    x = np.array([0.0, -0.0, -1.0, -2.0, -0.5, -1.5, -2.5, 1e-300, 1.0, 2.0, 0.5, 1e20, -1e20])
    x = np.concatenate([x, [1e308, np.inf, -np.inf, np.nan, 2.6e305]])
    g = normal.gammaln(x)
    np.testing.assert_allclose(g, special.gammaln(x), rtol=64 * EPS, atol=64 * EPS)
    np.testing.assert_equal(normal.gammasgn(x), special.gammasgn(x))
    assert isinstance(normal.gammaln(2.5), np.float64)


def test_gammasgn_against_the_sign_of_math_gamma() -> None:
    x = np.random.default_rng(17).uniform(-170.0, 170.0, 5_000)
    expected = np.sign([math.gamma(v) if abs(v) < 171 else 1.0 for v in x])
    np.testing.assert_array_equal(normal.gammasgn(x), expected)


# --- speed --------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ndtr", "log_ndtr", "erfcx", "erf", "ndtri", "expit"])
def test_a_million_points_within_4x_of_scipy(name: str) -> None:
    """A PLD-sized grid of 1e6 points through every branch: typically 1.5-3.5x scipy's time (a
    few dozen numpy passes against one compiled loop; numpy's exp alone is ~10 ns a point), at
    most 4x here (best of 5, measured alternately in this process, so that the machine's load
    affects both)."""
    x = np.linspace(-40.0, 10.0, 1_000_000)
    if name == "ndtri":
        x = special.ndtr(x)
    ours, theirs = getattr(normal, name), getattr(special, name)
    best = [math.inf, math.inf]
    for _ in range(5):
        for i, f in enumerate((ours, theirs)):
            t0 = time.process_time()
            f(x)
            best[i] = min(best[i], time.process_time() - t0)
    assert best[0] <= 4.0 * best[1], best
