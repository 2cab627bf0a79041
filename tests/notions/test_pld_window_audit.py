"""The Chernoff window of a k-fold composition (kernels._chernoff_window) against the exact
k-fold distribution in 40-digit mpmath: the mass above and below the window must each be at most
tail/2 (the pessimistic composition puts tail/2 at +inf and tail/2 on the top bin for them).
"""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from lastiterate.notions.pld.kernels import _chernoff_window, _Pmf

mp.mp.dps = 40


def _k_fold(probs: list[float], k: int) -> list[mp.mpf]:
    """Exact distribution of the sum of k independent indices with these masses (by squaring)."""
    base = [mp.mpf(p) for p in probs]
    result = [mp.mpf(1)]

    def conv(x: list[mp.mpf], y: list[mp.mpf]) -> list[mp.mpf]:
        out = [mp.mpf(0)] * (len(x) + len(y) - 1)
        for i, a in enumerate(x):
            if a:
                for j, b in enumerate(y):
                    out[i + j] += a * b
        return out

    while k:
        if k & 1:
            result = conv(result, base)
        k >>= 1
        if k:
            base = conv(base, base)
    return result


@pytest.mark.parametrize(
    ("probs", "k", "tail"),
    [
        ([0.2, 0.5, 0.3], 200, 1e-15),
        ([0.999, 0.0009, 0.0001], 300, 1e-15),  # skewed, as small sampling rates
        ([0.1, 0.0, 0.0, 0.3, 0.6], 64, 1e-12),
        ([0.25] * 4, 500, 1e-15),
    ],
)
def test_chernoff_window_holds_all_but_the_tail(probs: list[float], k: int, tail: float) -> None:
    pmf = _Pmf(0, np.array(probs), 0.0)
    a, b = _chernoff_window(pmf, k, tail)
    exact = _k_fold(probs, k)
    above = mp.fsum(exact[b + 1 :])
    below = mp.fsum(exact[:a])
    assert above <= tail / 2, (a, b, above)
    assert below <= tail / 2, (a, b, below)
    assert b - a + 1 < len(exact)  # the window does truncate (the test can fail)
