"""Issue 8 audit: the PABI window factor ``g_c(N) = (c^2 - 1)/(1 - c^{-2N})`` must not be replaced
by its c = 1 limit ``1/N`` for an expansion ``c = 1 + eta M > 1`` (there ``g_c(N) > 1/N``, by
``~N log c`` relative).  Reference: the formula in 50-digit arithmetic."""

from __future__ import annotations

from typing import Any

import mpmath as mp
import numpy as np
import pytest

from lastiterate.bounds.pabi import best_window, window_diameter_factor


def _exact_g(c: float, n: float) -> Any:
    with mp.workdps(50):
        cc = mp.mpf(c)
        return (cc * cc - 1) / (1 - cc ** (-2 * mp.mpf(n)))


@pytest.mark.parametrize("c", [1 + 9e-13, 1 + 2e-14, 1 + 1e-9])
@pytest.mark.parametrize("n", [1.0, 1e3, 1e7])
def test_expansion_window_factor_not_below_exact(c: float, n: float) -> None:
    """Was 9e-6 relative too SMALL at c = 1 + 9e-13, N = 1e7 (the 1/N shortcut)."""
    ref = _exact_g(c, n)
    got = float(window_diameter_factor(n, c))
    assert got >= ref * (1 - 1e-14)
    assert got <= ref * (1 + 1e-12)


def test_contraction_shortcut_stays_an_upper_bound() -> None:
    """For c <= 1 the shortcut 1/N is kept: it is above g_c(N)."""
    assert float(window_diameter_factor(1e7, 1.0)) == 1e-7
    assert float(window_diameter_factor(1e7, 1 - 9e-13)) >= _exact_g(1 - 9e-13, 1e7)


def test_best_window_uses_the_exact_factor_for_an_expansion() -> None:
    c = 1 + 9e-13
    q, k = np.array([1e-14]), np.array([1.0])
    value, n = best_window(q, k, c, 1e9)
    assert value[0] >= n[0] * q[0] + k[0] * _exact_g(c, n[0]) * (1 - 1e-14)
