"""YS22's closed-form rho (hidden_state.py) against 50-digit mpmath at extreme arguments.

The formulas are a dozen floating-point operations; before the rounding margin 336 of 576 Thm 3.3
cases and 166 of 320 Thm D.6 cases came out below the exact value of the formula at the same
inputs (by up to 5.9e-16 relative).  Every computed rho must be >= the exact one, and within
1e-13 relative of it.
"""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import pytest

from lastiterate.bounds import hidden_state as hs

mp.mp.dps = 50

MUS = [1e-3, 0.0133, 0.7, 3.0]


def _exact_thm33(mu: float, c: float, l: int, E: float) -> mp.mpf:
    m, cc = mp.mpf(mu), mp.mpf(c)
    q = 1 if math.isinf(E) else 1 - cc ** (l * (E - 1))
    return m**2 / 2 * (1 + cc ** (l - 2) * (1 - cc) * (1 + cc) * q / (1 - cc**l) ** 2)


def _exact_thmd6(mu: float, c: float, c_ys: float, T: float) -> mp.mpf:
    m, cc, cy = mp.mpf(mu), mp.mpf(c), mp.mpf(c_ys)
    q = 1 if math.isinf(T) else 1 - cy**T
    return m**2 * (1 + cc) / (1 - cc) * q


@pytest.mark.parametrize("c", [1e-6, 0.3, 0.95, 0.999983, 1 - 1e-9, 1 - 2.0**-40])
def test_thm33_rho_is_never_below_the_exact_formula(c: float) -> None:
    for mu, l, E in itertools.product(MUS, [2, 3, 40, 1000], [1, 2, 7, 1000, 10**7, math.inf]):
        got = mp.mpf(hs.ys22_thm33_rho(mu, c, l, E))
        exact = _exact_thm33(mu, c, l, E)
        assert got >= exact, (mu, c, l, E, got, exact)
        assert got <= exact * (1 + mp.mpf("1e-13")), (mu, c, l, E)


@pytest.mark.parametrize("c_ys", [0.5, 0.975, 1 - 1e-7, 1 - 2.0**-40])
def test_thmd6_rho_is_never_below_the_exact_formula(c_ys: float) -> None:
    for mu, c, T in itertools.product(
        MUS, [1e-6, 0.3, 0.95, 1 - 1e-9], [1, 3, 1000, 10**7, math.inf]
    ):
        got = mp.mpf(hs.ys22_thmd6_rho(mu, c, c_ys, T))
        exact = _exact_thmd6(mu, c, c_ys, T)
        assert got >= exact, (mu, c, c_ys, T, got, exact)
        assert got <= exact * (1 + mp.mpf("1e-13")), (mu, c, c_ys, T)
