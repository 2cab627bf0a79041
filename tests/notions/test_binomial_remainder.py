"""h(x) = (1 + x)^beta - 1 - beta x, the integrand of the literal sampled-Gaussian RDP, against
40-digit arithmetic: its series must not be summed where its terms grow (|beta x| large), where
a truncated series is too SMALL (an under-reported RDP)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from lastiterate.notions.rdp import _binomial_remainder_many, _binomial_remainder_scalar

BETAS = (-4095.0, -1000.0, -100.0, -31.0, -3.5, -1.0, -0.25, 0.5, 1.5, 2.5, 9.0, 256.0)
XS = (-0.049, -0.01, -1e-3, -1e-5, -1e-9, 1e-9, 1e-5, 1e-3, 0.01, 0.049, 0.2, -0.3)


def _exact(x: float, beta: float) -> float:
    with mpmath.workdps(40):
        X, B = mpmath.mpf(x), mpmath.mpf(beta)
        return float((1 + X) ** B - 1 - B * X)


@pytest.mark.parametrize("beta", BETAS)
def test_scalar_and_vector_forms_are_accurate(beta: float) -> None:
    many = _binomial_remainder_many(np.array(XS), np.full(len(XS), beta))
    for x, v in zip(XS, many):
        exact = _exact(x, beta)
        if not np.isfinite(exact) or exact > 1e300:
            continue
        for got in (_binomial_remainder_scalar(x, beta), float(v)):
            assert got == pytest.approx(exact, rel=1e-12, abs=1e-300), (x, beta, got, exact)


def test_the_large_order_case_that_the_old_switch_got_wrong() -> None:
    exact = _exact(-0.01, -1000.0)  # |beta x| = 10: the series' terms grow by ~10x at first
    assert _binomial_remainder_scalar(-0.01, -1000.0) >= exact * (1 - 1e-13)
