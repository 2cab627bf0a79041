"""The standard normal distribution and the error-function family, vectorised in numpy.

Why not ``scipy.special``: importing it costs ~0.2 s of CPU, the largest single share of the
command-line tool's start-up (issue 11): scipy 1.17's ``scipy.special`` clones the numpy namespace
for its array-API dispatch, which imports ``numpy.f2py``, ``numpy.testing``, ``numpy.ma`` and more,
and every submodule of it runs the package ``__init__``.  The accounting path (GDP, tradeoff
curves, RDP, the PLD engine) needs only the handful of functions below, each a published algorithm
of a few dozen numpy operations.  Modules off that path (audits, training, experiments) keep
scipy.

Algorithms
----------
* :func:`erf`, :func:`erfc`, :func:`erfcx`: W. J. Cody, "Rational Chebyshev approximations for
  the error function", Math. Comp. 23 (1969) 631-638, as coded in the netlib SPECFUN routine
  ``CALERF`` (Cody, Argonne, latest modification March 19, 1990; https://www.netlib.org/specfun/erf):
  one set of coefficients for ``|x| <= 0.46875`` (erf), ``0.46875 < |x| <= 4`` and ``|x| > 4``
  (``erfcx``, from which ``erfc = exp(-x^2) erfcx``), ``exp(-x^2)`` split as
  ``exp(-s^2) exp(-(x - s)(x + s))`` with ``s = floor(16 x)/16`` so that no digits are lost
  (``exp(-s^2)`` from a table).  Departures from CALERF, none of which moves a value away from the
  exact one: ``erfc`` is not flushed to 0 from ``x = 26.543`` on (it underflows gradually, to
  subnormal numbers); ``erfcx`` overflows to ``inf`` (not the largest double) for
  ``x < -26.63``, skips the ``erfcx(|x|)`` term of ``2 exp(x^2) - erfcx(|x|)`` from ``|x| = 6.1``
  on (below half an ulp there), keeps ``1/(sqrt(pi) x)`` beyond ``6.71e7`` (CALERF returns 0 from
  2.53e307), and above ``x = 50`` uses the continued fraction of S. G. Johnson's Faddeeva package
  (scipy's ``erfcx`` there), which is cheaper.
* :func:`ndtr`: ``(1 + erf(x/sqrt2))/2`` for ``|x/sqrt2| <= 0.46875`` (scipy's Cephes ``ndtr``
  does the same below 0.707), in the tails ``Phi(-y) = exp(-y^2/2) erfcx(y/sqrt2)/2`` with
  ``exp(-y^2/2)`` split in the same way: the rounding of ``x/sqrt2`` costs an ulp instead of the
  ``x^2`` ulps it costs ``erfc(-x/sqrt2)/2`` (scipy's ``ndtr`` is ~1e-13 off at ``x = -35``).
* :func:`log_ndtr`: ``log(erfcx(-t)/2) - t^2``, ``t = x/sqrt2``, for ``x < -1`` (the formula of
  scipy's ``log_ndtr``; ``erfcx`` does not underflow, so no asymptotic series is needed in the far
  left tail) and ``log1p(-Phi(-x))`` otherwise.
* :func:`ndtri`: M. J. Wichura, "Algorithm AS 241: The percentage points of the normal
  distribution", Applied Statistics 37 (1988) 477-484 (``PPND16``, about 16 digits): scalars
  through ``statistics.NormalDist.inv_cdf``, which implements it, arrays with its coefficients and
  order of evaluation (the same values to the bit).
* :func:`expit`, :func:`logsumexp`: the numerically stable forms (``e^x/(1 + e^x)`` for
  ``x < 0``; the largest term factored out and the rest summed through ``log1p``).
* :func:`gammaln`, :func:`gammasgn` (the RDP binomial coefficients): ``math.lgamma`` at the
  integers (a table), Stirling's series with the recurrence and the reflection formula elsewhere;
  the sign of ``Gamma`` from the parity of ``floor(x)``.

Evaluation: a scalar (or a one-element array, the common case inside root finders) runs the same
arithmetic on Python floats with ``math.exp``/``math.log``; an array runs it block by block
(``_BLOCK`` elements, so that the temporaries stay in cache) with boolean masks per branch, no
Python loop over elements.  A 1e6-point array takes 1.5-3.5x scipy's time.

Contract
--------
Every function takes a scalar or an array and returns ``numpy.float64`` for a scalar (as a scipy
ufunc does), else an array of the input's shape.  Special values behave as in scipy 1.17: ``nan``
propagates; ``ndtr(-inf) = 0``, ``ndtr(inf) = 1``; ``log_ndtr(-inf) = -inf``; ``ndtri(0) =
-inf``, ``ndtri(1) = inf`` and ``nan`` outside ``[0, 1]``; ``erfcx(-inf) = inf``, ``erfcx(inf) =
0``; ``gammaln`` is ``inf`` at the poles, ``gammasgn`` ``nan`` there.  The one deliberate
difference: where scipy's ``ndtr`` (below ``x = -37.5``) and ``erfc`` (beyond 26.55) return 0,
these return the subnormal value.  Accuracy, against mpmath (``tests/notions/test_normal.py``):
relative error at most 5 eps (1.1e-15) for ``erfc``, ``ndtr``, ``log_ndtr``, 4 eps for ``erfcx``
and ``ndtri``, 3 eps for ``erf``; subnormal results within 2 units of the last place.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "erf",
    "erfc",
    "erfcx",
    "expit",
    "gammaln",
    "gammasgn",
    "log_ndtr",
    "logsumexp",
    "ndtr",
    "ndtri",
]

# --- Cody (1969) / netlib SPECFUN CALERF coefficients (double precision) ---------------------
#: erf on |x| <= 0.46875: x * (A4 + y(A3 + y(A2 + y(A1 + y A5)))) / (B4 + y(B3 + ...)), y = x^2
_A = (
    3.16112374387056560e00,
    1.13864154151050156e02,
    3.77485237685302021e02,
    3.20937758913846947e03,
    1.85777706184603153e-1,
)
_B = (
    2.36012909523441209e01,
    2.44024637934444173e02,
    1.28261652607737228e03,
    2.84423683343917062e03,
)
#: erfcx on 0.46875 < |x| <= 4: a rational function of x of degree 8 / 8
_C = (
    5.64188496988670089e-1,
    8.88314979438837594e0,
    6.61191906371416295e01,
    2.98635138197400131e02,
    8.81952221241769090e02,
    1.71204761263407058e03,
    2.05107837782607147e03,
    1.23033935479799725e03,
    2.15311535474403846e-8,
)
_D = (
    1.57449261107098347e01,
    1.17693950891312499e02,
    5.37181101862009858e02,
    1.62138957456669019e03,
    3.29079923573345963e03,
    4.36261909014324716e03,
    3.43936767414372164e03,
    1.23033935480374942e03,
)
#: erfcx on |x| > 4: (1/sqrt(pi) - z R(z)) / x with R rational in z = 1/x^2
_P = (
    3.05326634961232344e-1,
    3.60344899949804439e-1,
    1.25781726111229246e-1,
    1.60837851487422766e-2,
    6.58749161529837803e-4,
    1.63153871373020978e-2,
)
_Q = (
    2.56852019228982242e00,
    1.87295284992346047e00,
    5.27905102951428412e-1,
    6.05183413124413191e-2,
    2.33520497626869185e-3,
)
_SQRPI = 5.6418958354775628695e-1  # 1/sqrt(pi)
_THRESH = 0.46875
_XHUGE = 6.71e7  # above: 1 - 1/(2x^2) == 1, erfcx(x) = 1/(sqrt(pi) x)
_CONTINUED_FRACTION = 50.0  # erfcx from the continued fraction above
_ERFC_ZERO = 28.0  # erfc(28) ~ 6e-343: 0 in double precision (exp(-784) underflows to 0 too)
_ERFCX_NEGLIGIBLE = 6.1  # erfcx(-y) = 2 exp(y^2) - erfcx(y): the 2nd term is below 1/2 ulp beyond
_ERFCX_INF = -27.0  # 2 exp(27^2) overflows (it does from -26.63 on)
_SQRT1_2 = 0.7071067811865476  # 1/sqrt(2), the double scipy's ndtr multiplies by
#: exp(-s^2), exp(-s^2/2) and exp(s^2) at s = k/16, k = 0 .. 640 (s^2 exact; inf where it overflows)
_SPLIT_S = np.arange(641) / 16.0
_EXP_MINUS_SQUARE = np.exp(-(_SPLIT_S * _SPLIT_S))
_EXP_MINUS_HALF_SQUARE = np.exp(-0.5 * (_SPLIT_S * _SPLIT_S))
with np.errstate(over="ignore"):
    _EXP_SQUARE = np.exp(_SPLIT_S * _SPLIT_S)
_EXP_MINUS_SQUARE_LIST = _EXP_MINUS_SQUARE.tolist()
_EXP_MINUS_HALF_SQUARE_LIST = _EXP_MINUS_HALF_SQUARE.tolist()
_EXP_SQUARE_LIST = _EXP_SQUARE.tolist()

# --- Wichura (1988) AS 241 PPND16 coefficients (as in CPython's statistics module) -----------
#: central region |p - 1/2| <= 0.425, in r = 0.180625 - q^2: numerator and denominator, highest
#: power first (Horner order); Wichura's check sum of the 16 values: 55.8831928806149014439
_PPND_CENTRAL_NUM = (
    2.5090809287301226727e3,
    3.3430575583588128105e4,
    6.7265770927008700853e4,
    4.5921953931549871457e4,
    1.3731693765509461125e4,
    1.9715909503065514427e3,
    1.3314166789178437745e2,
    3.3871328727963666080e0,
)
_PPND_CENTRAL_DEN = (
    5.2264952788528545610e3,
    2.8729085735721942674e4,
    3.9307895800092710610e4,
    2.1213794301586595867e4,
    5.3941960214247511077e3,
    6.8718700749205790830e2,
    4.2313330701600911252e1,
    1.0,
)
#: intermediate region r = sqrt(-log(min(p, 1 - p))) <= 5, in r - 1.6; check sum
#: 49.33206503301610289036
_PPND_NEAR_NUM = (
    7.74545014278341407640e-4,
    2.27238449892691845833e-2,
    2.41780725177450611770e-1,
    1.27045825245236838258e0,
    3.64784832476320460504e0,
    5.76949722146069140550e0,
    4.63033784615654529590e0,
    1.42343711074968357734e0,
)
_PPND_NEAR_DEN = (
    1.05075007164441684324e-9,
    5.47593808499534494600e-4,
    1.51986665636164571966e-2,
    1.48103976427480074590e-1,
    6.89767334985100004550e-1,
    1.67638483018380384940e0,
    2.05319162663775882187e0,
    1.0,
)
#: far tail r > 5, in r - 5; check sum 47.52583317549289671629
_PPND_FAR_NUM = (
    2.01033439929228813265e-7,
    2.71155556874348757815e-5,
    1.24266094738807843860e-3,
    2.65321895265761230930e-2,
    2.96560571828504891230e-1,
    1.78482653991729133580e0,
    5.46378491116411436990e0,
    6.65790464350110377720e0,
)
_PPND_FAR_DEN = (
    2.04426310338993978564e-15,
    1.42151175831644588870e-7,
    1.84631831751005468180e-5,
    7.86869131145613259100e-4,
    1.48753612908506148525e-2,
    1.36929880922735805310e-1,
    5.99832206555887937690e-1,
    1.0,
)


#: arrays are evaluated in blocks of this many elements, which keep the temporaries in cache
_BLOCK = 1 << 15
#: gammaln of the integers 1 .. this is read from a table of ``math.lgamma`` values
_LGAMMA_TABLE_MAX = 1 << 20
_lgamma_table = np.array([math.inf])  # _lgamma_table[n] = math.lgamma(n), grown on demand

# --- kernels on floats, in CALERF's order of operations (the *_block versions below do the same
# operations elementwise) ------------------------------------------------------------------------


def _erf_central(x: float) -> float:
    """CALERF's erf for ``|x| <= 0.46875`` (signed)."""
    ysq = x * x
    num = _A[4] * ysq
    den = ysq + _B[0]
    num += _A[0]
    num *= ysq
    den *= ysq
    for i in (1, 2):
        num += _A[i]
        num *= ysq
        den += _B[i]
        den *= ysq
    num += _A[3]
    den += _B[3]
    return x * num / den


def _erfcx_middle(y: float) -> float:
    """CALERF's erfcx for ``0.46875 < y <= 4``."""
    num = _C[8] * y
    den = y + _D[0]
    num += _C[0]
    num *= y
    den *= y
    for i in range(1, 7):
        num += _C[i]
        num *= y
        den += _D[i]
        den *= y
    num += _C[7]
    den += _D[7]
    num /= den
    return num


def _erfcx_far(y: float) -> float:
    """CALERF's erfcx for ``4 < y <= 50``: ``(1/sqrt(pi) - z R(z))/y``, ``z = 1/y^2``."""
    z = 1.0 / (y * y)
    num = _P[5] * z
    den = z + _Q[0]
    num += _P[0]
    num *= z
    den *= z
    for i in (1, 2, 3):
        num += _P[i]
        num *= z
        den += _Q[i]
        den *= z
    num += _P[4]
    den += _Q[4]
    num *= z
    num /= den
    return (_SQRPI - num) / y


def _erfcx_continued_fraction(y: Any) -> Any:
    """erfcx for ``y > 50``: the continued fraction ``1/(sqrt(pi) (y + (1/2)/(y + 1/(y + (3/2)/(y
    + 2/y)))))`` as one rational function (S. G. Johnson's Faddeeva package, which scipy's
    ``erfcx`` uses there; truncation error below 1e-17 relative), cheaper than CALERF's."""
    y2 = y * y
    return _SQRPI * (y2 * (y2 + 4.5) + 2.0) / (y * (y2 * (y2 + 5.0) + 3.75))


def _split_square(y: Any, k: Any) -> Any:
    """``y^2 - s^2 = (y - s)(y + s)`` with ``s = k/16``, ``k = floor(16 y)``: CALERF's split of
    ``exp(-y^2) = exp(-s^2) exp(-(y - s)(y + s))``.  ``s^2`` is exact, so the rounding of ``y^2``
    (up to ~700 x 1e-16 in the exponent) does not enter; ``exp(-s^2)`` comes from a table."""
    s = k / 16.0
    return (y - s) * (y + s)


def _times_exp_minus_square(y: float, r: float, half: bool) -> float:
    """``r exp(-y^2)`` (``half``: ``r exp(-y^2/2)``) for ``0 <= y < 40`` (``y < 28`` without
    ``half``), the small factor last, so that a subnormal result is rounded once more at most."""
    k = int(y * 16.0)
    d = _split_square(y, k)
    if half:
        return _EXP_MINUS_HALF_SQUARE_LIST[k] * (math.exp(-0.5 * d) * r)
    return _EXP_MINUS_SQUARE_LIST[k] * (math.exp(-d) * r)


def _times_exp_minus_square_block(y: np.ndarray, r: np.ndarray, half: bool) -> np.ndarray:
    """:func:`_times_exp_minus_square` of an array (the same operations)."""
    k = (y * 16.0).astype(np.intp)
    d = _split_square(y, k)
    if half:
        d *= -0.5
        return _EXP_MINUS_HALF_SQUARE[k] * (np.exp(d) * r)
    return _EXP_MINUS_SQUARE[k] * (np.exp(-d) * r)


# --- scalar path (a float, or an array of one element) -----------------------------------------


def _erfcx_positive_scalar(y: float) -> float:
    """erfcx for ``y > 0.46875`` (``inf`` included)."""
    if y <= 4.0:
        return _erfcx_middle(y)
    if y <= _CONTINUED_FRACTION:
        return _erfcx_far(y)
    return _erfcx_continued_fraction(y) if y < _XHUGE else _SQRPI / y


def _erf_scalar(x: float) -> float:
    if abs(x) <= _THRESH:
        return _erf_central(x)
    if math.isnan(x):
        return math.nan
    y = abs(x)
    v = 0.0 if y >= _ERFC_ZERO else _times_exp_minus_square(y, _erfcx_positive_scalar(y), False)
    v = (0.5 - v) + 0.5
    return -v if x < 0 else v


def _erfc_scalar(x: float) -> float:
    if abs(x) <= _THRESH:
        return 1.0 - _erf_central(x)
    if math.isnan(x):
        return math.nan
    y = abs(x)
    v = 0.0 if y >= _ERFC_ZERO else _times_exp_minus_square(y, _erfcx_positive_scalar(y), False)
    return 2.0 - v if x < 0 else v


def _erfcx_scalar(x: float) -> float:
    if abs(x) <= _THRESH:
        return math.exp(x * x) * (1.0 - _erf_central(x))
    if math.isnan(x):
        return math.nan
    if x < _ERFCX_INF:
        return math.inf
    if x > 0:
        return _erfcx_positive_scalar(x)
    # erfcx(-y) = 2 exp(y^2) - erfcx(y), exp(y^2) split as in _times_exp_minus_square
    y = -x
    k = int(y * 16.0)
    e = _EXP_SQUARE_LIST[k] * math.exp(_split_square(y, k))  # inf when it overflows
    return (e + e) - _erfcx_positive_scalar(y) if y <= _ERFCX_NEGLIGIBLE else e + e


def _ndtr_scalar(x: float) -> float:
    t = x * _SQRT1_2
    u = abs(t)
    if u <= _THRESH:
        return 0.5 + 0.5 * _erf_central(t)
    if math.isnan(x):
        return math.nan
    tail = 0.0
    if u < _ERFC_ZERO:
        r = 0.5 * _erfcx_positive_scalar(u)
        tail = _times_exp_minus_square(abs(x), r, True)
    return tail if x < 0 else 1.0 - tail


def _log_ndtr_scalar(x: float) -> float:
    if x < -1.0:
        if x == -math.inf:
            return -math.inf
        t = x * _SQRT1_2
        return math.log(0.5 * _erfcx_scalar(-t)) - t * t
    if math.isnan(x):
        return math.nan
    return math.log1p(-_ndtr_scalar(-x))


def _ndtri_scalar(p: float) -> float:
    if 0.0 < p < 1.0:
        # lazy: statistics imports fractions and decimal, ~4 ms of the CLI's start-up
        from statistics import NormalDist

        return NormalDist().inv_cdf(p)
    if p == 0.0:
        return -math.inf
    return math.inf if p == 1.0 else math.nan


def _expit_scalar(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)  # nan for nan
    return e / (1.0 + e)


@lru_cache(maxsize=32)
def _stacked(num: tuple[float, ...], den: tuple[float, ...]) -> np.ndarray:
    """The coefficients of a numerator and a denominator side by side, shape ``(k, 2, 1)``."""
    return np.array([num, den], dtype=float).T[:, :, None].copy()  # (k, 2, 1)


def _rational_block(y: np.ndarray, num: tuple[float, ...], den: tuple[float, ...]) -> np.ndarray:
    """Numerator and denominator by Horner's rule at once, ``(2, n)``: ``(((c0 y + c1) y + ...)
    y + c_last`` for both rows, the same operations per element as the scalar kernels (``c0 = 1``
    in CALERF's denominators: ``1 * y`` is exact), half the numpy calls."""
    coeffs = _stacked(num, den)
    acc = coeffs[0] * y
    for c in coeffs[1:-1]:
        acc += c
        acc *= y
    acc += coeffs[-1]
    return acc


def _erf_central_block(x: np.ndarray) -> np.ndarray:
    """:func:`_erf_central` of an array."""
    ysq = x * x
    nd = _rational_block(ysq, (_A[4], *_A[:4]), (1.0, *_B))
    return x * nd[0] / nd[1]


def _erfcx_middle_block(y: np.ndarray) -> np.ndarray:
    """:func:`_erfcx_middle` of an array."""
    nd = _rational_block(y, (_C[8], *_C[:8]), (1.0, *_D))
    return nd[0] / nd[1]


def _erfcx_far_block(y: np.ndarray) -> np.ndarray:
    """:func:`_erfcx_far` of an array."""
    z = 1.0 / (y * y)
    nd = _rational_block(z, (_P[5], *_P[:5]), (1.0, *_Q))
    return (_SQRPI - z * nd[0] / nd[1]) / y


# --- array path (one block; every branch skipped when no element takes it) ---------------------


def _erfcx_positive_block(y: np.ndarray) -> np.ndarray:
    """erfcx for ``y > 0.46875`` (``inf`` included, no ``nan``)."""
    out = np.empty_like(y)
    mid = y <= 4.0
    big = y > _CONTINUED_FRACTION
    if mid.any():
        out[mid] = _erfcx_middle_block(y[mid])
    far = ~(mid | big)
    if far.any():
        out[far] = _erfcx_far_block(y[far])
    if big.any():
        yb = y[big]
        with np.errstate(over="ignore", invalid="ignore"):  # y^2 overflows from 1.3e154 on
            out[big] = _erfcx_continued_fraction(yb)
        huge = y >= _XHUGE
        if huge.any():
            out[huge] = _SQRPI / y[huge]
    return out


def _erfc_positive_block(y: np.ndarray) -> np.ndarray:
    """erfc for ``y > 0.46875`` (no ``nan``): 0 from 28 on."""
    out = np.zeros_like(y)
    live = y < _ERFC_ZERO
    if live.any():
        yl = y[live]
        out[live] = _times_exp_minus_square_block(yl, _erfcx_positive_block(yl), False)
    return out


def _erf_block(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    central = np.abs(x) <= _THRESH
    if central.any():
        out[central] = _erf_central_block(x[central])
    rest = ~central
    if rest.any():
        xr = x[rest]
        v = (0.5 - _erfc_positive_block(np.abs(xr))) + 0.5
        out[rest] = np.where(xr < 0, -v, v)
        out[np.isnan(x)] = np.nan
    return out


def _erfc_block(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    central = np.abs(x) <= _THRESH
    if central.any():
        out[central] = 1.0 - _erf_central_block(x[central])
    rest = ~central
    if rest.any():
        xr = x[rest]
        v = _erfc_positive_block(np.abs(xr))
        out[rest] = np.where(xr < 0, 2.0 - v, v)
        out[np.isnan(x)] = np.nan
    return out


def _erfcx_block(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    central = np.abs(x) <= _THRESH
    if central.any():
        xc = x[central]
        out[central] = np.exp(xc * xc) * (1.0 - _erf_central_block(xc))
    pos = x > _THRESH
    if pos.any():
        out[pos] = _erfcx_positive_block(x[pos])
    neg = x < -_THRESH
    if neg.any():
        out[neg] = _erfcx_negative_block(-x[neg])
    out[np.isnan(x)] = np.nan
    return out


def _erfcx_negative_block(y: np.ndarray) -> np.ndarray:
    """``erfcx(-y) = 2 exp(y^2) - erfcx(y)`` for ``y > 0.46875``, ``exp(y^2)`` split as in
    :func:`_times_exp_minus_square`; from ``y = 6.1`` on ``erfcx(y) < 0.1`` is below half an ulp
    of ``2 exp(y^2) > 2.9e16`` (not computed), from 26.63 on the result overflows."""
    out = np.full_like(y, np.inf)
    live = y <= -_ERFCX_INF
    yl = y[live]
    k = (yl * 16.0).astype(np.intp)
    with np.errstate(over="ignore"):
        e = _EXP_SQUARE[k] * np.exp(_split_square(yl, k))
        e += e
    near = yl <= _ERFCX_NEGLIGIBLE
    if near.any():
        e[near] -= _erfcx_positive_block(yl[near])
    out[live] = e
    return out


def _ndtr_block(x: np.ndarray) -> np.ndarray:
    t = x * _SQRT1_2
    u = np.abs(t)
    out = np.empty_like(x)
    central = u <= _THRESH
    if central.any():
        out[central] = 0.5 + 0.5 * _erf_central_block(t[central])
    tails = ~central
    if tails.any():
        xt, ut = x[tails], u[tails]
        tail = np.zeros_like(ut)  # beyond |t| = 28 (and for nan, set below)
        live = ut < _ERFC_ZERO
        ul = ut[live]
        r = _erfcx_positive_block(ul)
        r *= 0.5
        tail[live] = _times_exp_minus_square_block(np.abs(xt[live]), r, True)
        out[tails] = np.where(xt < 0, tail, 1.0 - tail)
        out[np.isnan(x)] = np.nan
    return out


def _log_ndtr_block(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    left = x < -1.0
    if left.any():
        t = x[left] * _SQRT1_2
        r = _erfcx_positive_block(-t)  # -t > 0.7 > 0.46875; erfcx(inf) = 0 gives -inf below
        r *= 0.5
        with np.errstate(over="ignore", divide="ignore"):
            out[left] = np.log(r) - t * t
    right = ~left
    if right.any():
        out[right] = np.log1p(-_ndtr_block(-x[right]))
    return out


def _ndtri_block(p: np.ndarray) -> np.ndarray:
    out = np.full_like(p, np.nan)
    q = p - 0.5
    central = np.abs(q) <= 0.425
    if central.any():
        qc = q[central]
        r = 0.180625 - qc * qc
        nd = _rational_block(r, _PPND_CENTRAL_NUM, _PPND_CENTRAL_DEN)
        out[central] = nd[0] * qc / nd[1]
    tail = (np.abs(q) > 0.425) & (p > 0.0) & (p < 1.0)
    if tail.any():
        qt = q[tail]
        r = np.sqrt(-np.log(np.where(qt <= 0.0, p[tail], 1.0 - p[tail])))
        x = np.empty_like(r)
        near = r <= 5.0
        rn = r[near] - 1.6
        nd = _rational_block(rn, _PPND_NEAR_NUM, _PPND_NEAR_DEN)
        x[near] = nd[0] / nd[1]
        rf = r[~near] - 5.0
        nd = _rational_block(rf, _PPND_FAR_NUM, _PPND_FAR_DEN)
        x[~near] = nd[0] / nd[1]
        out[tail] = np.where(qt < 0.0, -x, x)
    out[p == 0.0] = -np.inf
    out[p == 1.0] = np.inf
    return out


def _expit_block(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _elementwise(
    x: ArrayLike, scalar: Callable[[float], float], block: Callable[[np.ndarray], np.ndarray]
) -> Any:
    """Apply a function given by its scalar and its array (block) evaluation: ``numpy.float64``
    for a scalar, else an array of ``x``'s shape; a single element goes through ``scalar`` (no
    numpy overhead), longer arrays block by block (the temporaries stay in cache)."""
    if isinstance(x, float):  # float and numpy.float64
        return np.float64(scalar(x))
    a = np.asarray(x, dtype=float)
    if a.size == 1:
        v = scalar(a.item())
        return np.float64(v) if a.ndim == 0 else np.array([v]).reshape(a.shape)
    flat = a.reshape(-1)
    if flat.size <= _BLOCK:
        return block(flat).reshape(a.shape)
    out = np.empty_like(flat)
    for i in range(0, flat.size, _BLOCK):
        out[i : i + _BLOCK] = block(flat[i : i + _BLOCK])
    return out.reshape(a.shape)


# --- the functions -------------------------------------------------------------------------------


def erf(x: ArrayLike) -> Any:
    """The error function ``erf(x) = 2/sqrt(pi) int_0^x e^{-t^2} dt`` (Cody 1969, netlib CALERF).

    ``erf(+-inf) = +-1``, ``nan`` propagates.
    """
    return _elementwise(x, _erf_scalar, _erf_block)


def erfc(x: ArrayLike) -> Any:
    """The complementary error function ``erfc(x) = 1 - erf(x)`` (Cody 1969, netlib CALERF),
    with full relative accuracy in the right tail, down to subnormal values (0 from x ~ 27.3).

    ``erfc(-inf) = 2``, ``erfc(inf) = 0``, ``nan`` propagates.
    """
    return _elementwise(x, _erfc_scalar, _erfc_block)


def erfcx(x: ArrayLike) -> Any:
    """The scaled complementary error function ``erfcx(x) = exp(x^2) erfc(x)`` (Cody 1969, netlib
    CALERF): ``~ 1/(sqrt(pi) x)`` for large x, ``2 exp(x^2)`` for very negative x.

    ``erfcx(inf) = 0``; ``inf`` from ``x < -26.63`` on (overflow) and at ``-inf``; ``nan``
    propagates.
    """
    return _elementwise(x, _erfcx_scalar, _erfcx_block)


def ndtr(x: ArrayLike) -> Any:
    """The standard normal distribution function ``Phi(x) = erfc(-x/sqrt2)/2``, with full
    relative accuracy in the left tail (subnormal from ``x ~ -37.5``, 0 below ``-38.5``).

    Nondecreasing; ``Phi(-inf) = 0``, ``Phi(inf) = 1``, ``nan`` propagates.
    """
    return _elementwise(x, _ndtr_scalar, _ndtr_block)


def log_ndtr(x: ArrayLike) -> Any:
    """``log Phi(x)`` over the whole line: ``log(erfcx(-t)/2) - t^2`` with ``t = x/sqrt2`` for
    ``x < -1`` (scipy's formula; nothing underflows: ``log_ndtr(-1e150) ~ -5e299``), and
    ``log1p(-Phi(-x))`` otherwise.

    Nondecreasing; ``log_ndtr(-inf) = -inf``, ``log_ndtr(inf) = -0.0``, ``nan`` propagates.
    """
    return _elementwise(x, _log_ndtr_scalar, _log_ndtr_block)


def ndtri(p: ArrayLike) -> Any:
    """The standard normal quantile ``Phi^{-1}(p)`` (Wichura 1988, AS 241 ``PPND16``, about 16
    digits; scalars through ``statistics.NormalDist().inv_cdf``, which implements it, arrays with
    its coefficients and evaluation order: the same values).

    Increasing; ``ndtri(0) = -inf``, ``ndtri(1) = inf``; ``nan`` outside ``[0, 1]`` and for
    ``nan``.
    """
    return _elementwise(p, _ndtri_scalar, _ndtri_block)


def expit(x: ArrayLike) -> Any:
    """The logistic function ``1/(1 + e^{-x})``, as ``e^x/(1 + e^x)`` for ``x < 0`` (no overflow,
    full relative accuracy until ``e^x`` underflows)."""
    return _elementwise(x, _expit_scalar, _expit_block)


def logsumexp(a: ArrayLike) -> np.float64:
    """``log(sum(exp(a)))`` over all elements: the largest term ``m`` factored out and the rest
    summed through ``log1p`` (``m + log1p(sum_{j != k} e^{a_j - m})``, as scipy's
    ``logsumexp``), so nothing overflows and a sum dominated by one term keeps its precision.

    ``-inf`` for an empty array or all ``-inf``; ``inf`` if a term is ``inf`` (and none
    ``nan``); ``nan`` if a term is ``nan``.
    """
    x = np.asarray(a, dtype=float).reshape(-1)
    if x.size == 0:
        return np.float64(-np.inf)
    k = int(np.argmax(x))  # the first nan if any
    m = x[k]
    if not np.isfinite(m):
        return np.float64(m)
    rest = np.exp(x - m)
    rest[k] = 0.0
    return np.float64(m + math.log1p(float(np.sum(rest))))


def _lgamma_of_integers(n: np.ndarray) -> np.ndarray:
    """``math.lgamma(n)`` for integers ``1 <= n <= _LGAMMA_TABLE_MAX``, from a table grown to
    the largest ``n`` asked for (the RDP series ask for ``log k!`` at every term)."""
    global _lgamma_table
    top = int(n.max())
    if top >= len(_lgamma_table):
        size = min(max(top + 1, 2 * len(_lgamma_table), 1024), _LGAMMA_TABLE_MAX + 1)
        more = range(len(_lgamma_table), size)
        grown = np.fromiter(map(math.lgamma, more), dtype=float, count=len(more))
        _lgamma_table = np.concatenate([_lgamma_table, grown])
    return _lgamma_table[n.astype(np.intp)]


#: Stirling's series ``sum_k B_2k / (2k (2k - 1) w^(2k - 1))``, k = 1 .. 7, in ``1/w^2`` (highest
#: power first); at ``w >= 10`` the first omitted term is below 3e-17
_STIRLING = (1 / 156, -691 / 360360, 1 / 1188, -1 / 1680, 1 / 1260, -1 / 360, 1 / 12)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _lgamma_positive(z: np.ndarray) -> np.ndarray:
    """``log Gamma(z)`` for finite ``z >= 0.5``: below 10 shifted to ``w = z + n >= 10``
    (``Gamma(z) = Gamma(w) / (z (z + 1) ... (w - 1))``), and Stirling's series at ``w``
    (Abramowitz-Stegun 6.1.40); absolute error a few units of ``1e-16 max(1, |log Gamma(z)|)``."""
    small = z < 10.0
    if not small.any():
        return _stirling(z)
    w = z.copy()
    ws = z[small]
    prod = np.ones_like(ws)
    for _ in range(10):  # at most 10 steps from 0.5
        low = ws < 10.0
        if not low.any():
            break
        prod = np.where(low, prod * ws, prod)
        ws = np.where(low, ws + 1.0, ws)
    w[small] = ws
    out = _stirling(w)
    out[small] -= np.log(prod)
    return out


def _stirling(w: np.ndarray) -> np.ndarray:
    """Stirling's series for ``log Gamma(w)``, ``w >= 10``."""
    v = 1.0 / (w * w)
    series = _STIRLING[0] * v
    for c in _STIRLING[1:-1]:
        series += c
        series *= v
    series += _STIRLING[-1]
    series /= w
    return (w - 0.5) * np.log(w) - w + _HALF_LOG_2PI + series


def _lgamma_block(x: np.ndarray) -> np.ndarray:
    """``log|Gamma(x)|`` for finite non-poles: :func:`_lgamma_positive` from 0.5 on, below by the
    reflection ``log|Gamma(x)| = log(pi / |sin(pi x)|) - log Gamma(1 - x)``, with ``sin(pi x)``
    from the exactly reduced ``x - round(x)``."""
    out = np.empty_like(x)
    pos = x >= 0.5
    out[pos] = _lgamma_positive(x[pos])
    neg = ~pos
    xn = x[neg]
    r = np.abs(xn - np.round(xn))
    out[neg] = math.log(math.pi) - np.log(np.sin(math.pi * r)) - _lgamma_positive(1.0 - xn)
    return out


def gammaln(x: ArrayLike) -> Any:
    """``log|Gamma(x)|`` elementwise: ``math.lgamma`` at the integers up to 2^20 (a table of it),
    elsewhere Stirling's series with the recurrence and the reflection formula
    (:func:`_lgamma_block`; within ``1e-14 max(1, |log Gamma|)`` of ``math.lgamma``).  ``inf``
    at the poles ``0, -1, -2, ...``, at ``inf`` and from ``2.55e305`` on (where it overflows),
    ``-inf`` at ``-inf`` (as scipy), ``nan`` propagates."""
    a = np.asarray(x, dtype=float)
    flat = a.reshape(-1)
    out = np.empty_like(flat)
    whole = flat == np.floor(flat)
    table = whole & (flat >= 1.0) & (flat <= _LGAMMA_TABLE_MAX)
    if table.any():
        out[table] = _lgamma_of_integers(flat[table])
    pole = whole & (flat <= 0.0)
    out[pole | (flat == np.inf)] = np.inf
    out[flat == -np.inf] = -np.inf
    out[np.isnan(flat)] = np.nan
    rest = ~table & ~pole & np.isfinite(flat)
    if rest.any():
        with np.errstate(over="ignore"):  # inf from 2.55e305 on
            out[rest] = _lgamma_block(flat[rest])
    return out[0] if a.ndim == 0 else out.reshape(a.shape)


def gammasgn(x: ArrayLike) -> Any:
    """The sign of ``Gamma(x)``: 1 for ``x > 0`` and ``+0``, ``-1`` at ``-0``; for ``x < 0``
    ``(-1)^ceil(-x)`` (negative on ``(-1, 0)``, ``(-3, -2)``, ...); ``nan`` at the poles
    ``-1, -2, ...``, at ``-inf`` and for ``nan``."""
    a = np.asarray(x, dtype=float)
    f = np.floor(a)
    with np.errstate(invalid="ignore"):
        out = np.where(np.fmod(f, 2.0) == 0.0, 1.0, -1.0)
    out = np.where(a > 0, 1.0, out)
    out = np.where(a == 0, np.copysign(1.0, a), out)
    out = np.where(np.isnan(a) | ((a < 0) & (f == a)), np.nan, out)
    return out[()] if out.ndim == 0 else out
