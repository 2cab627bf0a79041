"""The vectorised literal-direction quadrature of the sampled Gaussian (issue 11).

Near a sampling rate of 1 every Renyi order needs the literal direction
``D_alpha(N(0,s^2) || (1-q)N(0,s^2) + qN(1,s^2))`` (docs/theorems.md 1.9) by quadrature; the
composite Gauss-Legendre rule of ``_rdp_literal_many`` evaluates all orders at once.  Its values
must never be below the scalar adaptive quadrature's (``_rdp_literal_scalar``, the reference the
accountant used before) and may exceed them only by the documented margin (relative 1.5e-10
instead of 1e-10): checked on a grid, against the 40-digit mpmath quadrature, and through the
public ``sampled_gaussian_rdp``.
"""

from __future__ import annotations

import itertools
from typing import Any

import mpmath as mp
import numpy as np
import pytest

from lastiterate.notions import rdp as rdp_module
from lastiterate.notions.rdp import sampled_gaussian_rdp

ORDERS = [1.0007, 1.003, 1.1, 1.5, 2.0, 3.0, 5.18, 8.0, 16.0, 32.0, 64.0, 145.2, 256.0, 1024.0]


GRID = list(
    itertools.product(
        [1e-6, 0.004, 0.3, 0.9, 0.99, 256 / 60000, 59999 / 60000],
        [2.0, 3.0, 10.0, 84.85, 600.0, 1e4],
    )
)
QUICK = [(1e-6, 2.0), (0.3, 3.0), (0.99, 10.0), (59999 / 60000, 84.85), (59999 / 60000, 600.0)]


@pytest.mark.parametrize(
    ("q", "s"),
    [*QUICK, *(pytest.param(*c, marks=pytest.mark.slow) for c in GRID if c not in QUICK)],
)
def test_rule_is_never_below_the_scalar_quadrature(q: float, s: float) -> None:
    fast = np.array(rdp_module._rdp_literal_many(q, s, ORDERS))
    slow = np.array([rdp_module._rdp_literal_scalar(q, s, a) for a in ORDERS])
    assert np.all(fast >= slow)
    # the margin difference (5e-11) plus the two quadratures' difference
    assert np.all(fast <= slow * (1 + 1e-10))


def test_rule_is_used_near_rate_one() -> None:
    """At the extremes benchmark's rate (q = 0.99998, s = 600) no order falls back to the scalar
    quadrature (which gives the value without the larger margin)."""
    q, s = 59999 / 60000, 600.0 * (1 + 1e-12)
    fast = rdp_module._rdp_literal_many(q, s, ORDERS)
    rdp_module._rdp_literal_scalar.cache_clear()
    slow = [rdp_module._rdp_literal_scalar(q, s, a) for a in ORDERS]
    assert all(f != sl for f, sl in zip(fast, slow))
    assert all(f > sl for f, sl in zip(fast, slow) if sl > 0)


def test_small_noise_keeps_the_scalar_quadrature() -> None:
    q, s = 0.5, 1.0
    assert rdp_module._rdp_literal_many(q, s, ORDERS) == [
        rdp_module._rdp_literal_scalar(q, s, a) for a in ORDERS
    ]


def _mp_literal(q: float, s: float, a: float) -> float:
    """Independent 40-digit quadrature of the literal direction (as in test_rdp.py)."""
    with mp.workdps(40):
        q_, s_, a_ = mp.mpf(q), mp.mpf(s), mp.mpf(a)

        def f(z: Any) -> Any:
            x = q_ * mp.expm1((2 * z - 1) / (2 * s_ * s_))
            return mp.npdf(z, 0, s_) * ((1 + x) ** (1 - a_) - 1 - (1 - a_) * x)

        pts = sorted({-a_ - 60 * s_, mp.mpf(0), mp.mpf("0.5"), mp.mpf(1), 60 * s_ + 1})
        return float(mp.log1p(mp.quad(f, pts)) / (a_ - 1))


@pytest.mark.parametrize(
    ("q", "s", "a"),
    [(59999 / 60000, 600.0, 145.2), (59999 / 60000, 84.85, 2.0), (0.9, 3.0, 8.0), (0.3, 2.0, 1.5)],
)
def test_rule_is_above_high_precision(q: float, s: float, a: float) -> None:
    ref = _mp_literal(q, s, a)
    got = rdp_module._rdp_literal_many(q, s, [a])[0]
    assert ref <= got <= ref * (1 + 1e-9)


@pytest.mark.parametrize(("q", "s"), [(59999 / 60000, 599.99), (0.99, 5.0), (0.3, 2.5)])
def test_public_literal_and_max_directions_use_the_rule(q: float, s: float) -> None:
    lit = sampled_gaussian_rdp(q, s, ORDERS, direction="literal")
    assert lit.tolist() == rdp_module._rdp_literal_many(q, s, ORDERS)
    mf = sampled_gaussian_rdp(q, s, ORDERS, direction="mixture-first")
    np.testing.assert_array_equal(
        sampled_gaussian_rdp(q, s, ORDERS, direction="max"), np.maximum(mf, lit)
    )


def test_orders_too_sharp_for_the_panels_keep_the_scalar_quadrature() -> None:
    """Above alpha = 1 + 60 s^2 the integrand may be narrower than half a panel: the scalar
    quadrature's value is kept exactly (below it, the rule's larger margin shows)."""
    q, s = 0.3, 2.0
    sharp, smooth = 300.0, 200.0  # 1 + 60 s^2 = 241
    fast = rdp_module._rdp_literal_many(q, s, [sharp, smooth])
    assert fast[0] == rdp_module._rdp_literal_scalar(q, s, sharp)
    assert fast[1] > rdp_module._rdp_literal_scalar(q, s, smooth)
