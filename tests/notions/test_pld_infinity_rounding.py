"""The +inf mass and the truncated tails of the PLD kernels are rounded outward (upper PMF: never
below the exact value; optimistic PMF: never above), checked against exact rational / 50-digit
arithmetic.  Both failed on the code that used the plain floating-point values (about half of the
random cells came out a few ulps below the exact value)."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest

from lastiterate.notions.pld.kernels import _composed_infinity_mass, _truncate


def _exact_composed(mass: float, k: int) -> mpmath.mpf:
    with mpmath.workdps(50):
        return 1 - (1 - mpmath.mpf(mass)) ** k


def _cells(seed: int, count: int) -> list[tuple[float, int]]:
    rng = np.random.default_rng(seed)
    masses = 10.0 ** rng.uniform(-30, -0.01, count)
    ks = np.rint(10.0 ** rng.uniform(0, 7, count)).astype(int)
    return [(float(m), int(k)) for m, k in zip(masses, ks, strict=True)]


def test_composed_infinity_mass_is_outward():
    cells = _cells(0, 400)
    with mpmath.workdps(50):
        for mass, k in cells:
            exact = _exact_composed(mass, k)
            up = _composed_infinity_mass(mass, k, up=True)
            down = _composed_infinity_mass(mass, k, up=False)
            assert mpmath.mpf(up) >= exact, (mass, k)
            assert mpmath.mpf(down) <= exact, (mass, k)
            # and tight: within 20 eps of the exact value
            assert abs(mpmath.mpf(up) / exact - 1) < 20 * 2.0**-52


def test_plain_floating_point_value_can_be_below_the_exact_one():
    """The check above can fail: the unrounded formula is below the exact value in many cells."""
    below = 0
    with mpmath.workdps(50):
        for mass, k in _cells(0, 400):
            plain = -np.expm1(k * np.log1p(-mass))
            below += mpmath.mpf(float(plain)) < _exact_composed(mass, k)
    assert below > 20


@pytest.mark.parametrize("edge", [0.0, 1.0])
def test_composed_infinity_mass_edges(edge):
    assert _composed_infinity_mass(edge, 10, up=True) == edge
    assert _composed_infinity_mass(edge, 10, up=False) == edge


def test_truncated_tail_masses_are_not_below_their_exact_sums():
    rng = np.random.default_rng(1)
    low = 0
    for _ in range(300):
        n = int(rng.integers(50, 3000))
        probs = rng.exponential(size=n) * 10.0 ** rng.uniform(-12, 0, n)
        probs /= probs.sum()
        tail = float(10.0 ** rng.uniform(-8, -1))
        left, out, right_mass = _truncate(probs, tail)
        right = left + len(out)
        exact_right = sum(Fraction(float(p)) for p in probs[right:])
        assert Fraction(right_mass) >= exact_right
        if left > 0:
            exact_left = sum(Fraction(float(p)) for p in probs[:left])
            moved = Fraction(float(out[0])) - Fraction(float(probs[left]))
            # the kept first bin carries at least the dropped prefix (up to the final addition's
            # rounding, which is relative to the bin's total)
            assert moved >= exact_left - Fraction(float(out[0])) * Fraction(2.0**-53)
        low += float(np.sum(probs[right:])) < exact_right
    # the plain float sum is below the exact sum in some cells: the rounding-up is needed
    assert low > 0
