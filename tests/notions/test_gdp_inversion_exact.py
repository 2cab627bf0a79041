"""The GDP inversions hold for the EXACT profile (60-digit mpmath), not only for its
floating-point value: at tiny mu the profile's two terms cancel, and the plain value let
``gdp_mu`` return a mu whose exact delta exceeded the target by 1.1e-8 relative."""

from __future__ import annotations

import mpmath
import pytest

from lastiterate.notions.gdp import gdp_delta, gdp_epsilon, gdp_mu


def _exact_delta(eps: float, mu: float) -> mpmath.mpf:
    with mpmath.workdps(60):
        e, m = mpmath.mpf(eps), mpmath.mpf(mu)
        return mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)


@pytest.mark.parametrize("eps", [0.0, 1e-12, 1e-8, 1e-6, 1e-4, 1e-3, 0.1, 1.0, 10.0, 100.0])
@pytest.mark.parametrize("delta", [1e-15, 1e-12, 1e-9, 1e-5, 0.1])
def test_gdp_mu_meets_delta_exactly(eps: float, delta: float) -> None:
    mu = gdp_mu(eps, delta)
    exact = _exact_delta(eps, mu)
    assert exact <= delta, (eps, delta, mu, float(exact / delta - 1))
    # and it is not far off; at eps = 1e-12, delta <= 1e-12 mu is ~1e-15 and a = -eps/mu + mu/2
    # ~ -400: the tail form's cancellation amplifies rounding by |a|/mu ~ 1e17, and the margin
    # that covers it costs a few percent of delta there (sound, loose)
    assert exact >= delta * (1 - (0.05 if 0 < eps <= 1e-12 and delta <= 1e-12 else 1e-4))


@pytest.mark.parametrize("mu", [1e-7, 1e-5, 1e-3, 0.1, 1.0, 4.71405, 40.0, 1e4])
@pytest.mark.parametrize("delta", [1e-15, 1e-12, 1e-9, 1e-5, 0.1])
def test_gdp_epsilon_meets_delta_exactly(mu: float, delta: float) -> None:
    eps = gdp_epsilon(delta, mu)
    if eps == 0.0:
        assert _exact_delta(0.0, mu) <= delta
        return
    exact = _exact_delta(eps, mu)
    assert exact <= delta, (mu, delta, eps, float(exact / delta - 1))


@pytest.mark.parametrize("mu", [1e-12, 1e-8, 1e-4, 0.1, 1.0, 4.0, 10.0, 40.0])
@pytest.mark.parametrize("share", [0.0, 0.1, 0.5, 0.99])
def test_gdp_delta_head_form_is_accurate(mu: float, share: float) -> None:
    """For eps < mu^2/2 the profile is a difference of two terms near 1/2 when mu is small: the
    old form Phi(a) - e^eps Phi(b) lost every digit at mu = 1e-12 (delta ~ 4e-13)."""
    eps = share * mu * mu / 2
    exact = _exact_delta(eps, mu)
    got = gdp_delta(eps, mu)
    assert abs(got / exact - 1) <= 1e-13 * (1 + mu * mu), (mu, eps, got, float(exact))
