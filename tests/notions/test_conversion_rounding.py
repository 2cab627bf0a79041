"""The RDP -> (epsilon, delta) conversions never round below the exact formula (40-digit mpmath)
at the order they report: each formula is moved outward by its rounding bound
(``rdp._CONVERSION_ULPS``).  The plain floating-point values were below the exact ones in about
half of these cells (by a few ulps)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from lastiterate.notions import rdp as R

RNG = np.random.default_rng(20261125)
N = 400
ALPHAS = 1.0 + np.exp(RNG.uniform(math.log(1e-5), math.log(1e6), N))
RDPS = np.exp(RNG.uniform(math.log(1e-8), math.log(1e3), N))
DELTAS = np.exp(RNG.uniform(math.log(1e-14), math.log(0.5), N))
EPSILONS = np.exp(RNG.uniform(math.log(1e-3), math.log(1e3), N))


def _mp(x: float) -> mpmath.mpf:
    return mpmath.mpf(float(x))


def _exact_epsilon(method: str, a: float, r: float, d: float) -> mpmath.mpf:
    a, r, d = _mp(a), _mp(r), _mp(d)
    if method == "mironov":
        return r + mpmath.log(1 / d) / (a - 1)
    if method == "balle2020":
        return r + mpmath.log1p(-1 / a) - (mpmath.log(d) + mpmath.log(a)) / (a - 1)
    return mpmath.log(1 + mpmath.expm1((a - 1) * r) / (a * d)) / (a - 1)


def _exact_log_delta(method: str, a: float, r: float, e: float) -> mpmath.mpf:
    a, r, e = _mp(a), _mp(r), _mp(e)
    if method == "mironov":
        return (a - 1) * (r - e)
    if method == "balle2020":
        return (a - 1) * (r - e + mpmath.log1p(-1 / a)) - mpmath.log(a)
    if method == "asoodeh2021":
        return mpmath.log(mpmath.expm1((a - 1) * r)) - mpmath.log(a) - mpmath.log(
            mpmath.expm1((a - 1) * e)
        )
    return mpmath.log(-mpmath.expm1(-r)) / 2


@pytest.mark.parametrize("method", ["mironov", "balle2020", "asoodeh2021"])
def test_epsilon_formulas_round_up(method: str) -> None:
    with mpmath.workdps(40):
        for k in range(N):
            d = float(DELTAS[k])
            v = R._EPS_FORMULAS[method](np.asarray(ALPHAS[k]), np.asarray(RDPS[k]), d)
            exact = _exact_epsilon(method, ALPHAS[k], RDPS[k], d)
            if math.isfinite(float(v)):
                assert v >= exact, (method, ALPHAS[k], RDPS[k], d, float(v), float(exact))
                assert v <= exact * (1 + 1e-11) + 1e-11  # and the margin is small


@pytest.mark.parametrize("method", ["mironov", "balle2020", "asoodeh2021", "kl-tv"])
def test_log_delta_formulas_round_up(method: str) -> None:
    f = R._LOG_DELTA_FORMULAS[method]
    with mpmath.workdps(40):
        for k in range(N):
            e = float(EPSILONS[k])
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                v = float(f(np.asarray(ALPHAS[k]), np.asarray(RDPS[k]), e))
            if not math.isfinite(v) or abs(v) > 1e300:
                continue
            exact = _exact_log_delta(method, ALPHAS[k], RDPS[k], e)
            assert v >= exact, (method, ALPHAS[k], RDPS[k], e, v, float(exact))
            assert v <= exact + 1e-9 * (1 + abs(exact))


def test_bun_steinke_rounds_up() -> None:
    with mpmath.workdps(40):
        for rho, d in zip(RDPS[:100], DELTAS[:100], strict=True):
            e, _ = R.epsilon_bun_steinke(float(rho), float(d))
            exact = _mp(rho) + 2 * mpmath.sqrt(_mp(rho) * mpmath.log(1 / _mp(d)))
            assert e >= exact
