"""Property-based tests (hypothesis) for the privacy-notion calculus."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lastiterate.notions.clt import clt_mu_poisson, clt_mu_symmetric
from lastiterate.notions.gdp import gdp_delta, gdp_epsilon, gdp_mu
from lastiterate.notions.rdp import RdpCurve, rdp_linear_to_epsilon, sampled_gaussian_rdp
from lastiterate.notions.tradeoff import (
    TradeoffCurve,
    subsampled_gaussian_delta,
    subsampled_gaussian_tradeoff,
)

FAST = settings(max_examples=40, deadline=None)
MEDIUM = settings(max_examples=15, deadline=None)

mus = st.floats(min_value=0.0, max_value=40.0, allow_nan=False)
pos_mus = st.floats(min_value=1e-3, max_value=40.0, allow_nan=False)
log_deltas = st.floats(min_value=math.log(1e-15), max_value=math.log(0.5))
probs = st.floats(min_value=1e-4, max_value=1.0, allow_nan=False)
sigmas = st.floats(min_value=0.3, max_value=20.0, allow_nan=False)


# ---------------------------------------------------------------------------------------------
# GDP
# ---------------------------------------------------------------------------------------------


@FAST
@given(mu=mus, log_delta=log_deltas)
def test_gdp_epsilon_finite_nonnegative_and_round_trips(mu: float, log_delta: float) -> None:
    delta = math.exp(log_delta)
    eps = gdp_epsilon(delta, mu)
    assert math.isfinite(eps) and eps >= 0.0
    d = gdp_delta(eps, mu)
    assert 0.0 <= d <= delta
    if eps > 0 and mu >= 1e-4:
        # tight: slightly smaller epsilon violates delta (1e-8 relative). For tinier mu, delta
        # itself is only accurate to ~1e-16 * |a| / mu relative (cancellation between Phi(a) and
        # e^eps Phi(a - mu)).
        assert gdp_delta(eps * (1 - 1e-8), mu) > delta


@FAST
@given(mu=pos_mus, ld1=log_deltas, ld2=log_deltas)
def test_gdp_epsilon_monotone_in_delta(mu: float, ld1: float, ld2: float) -> None:
    d1, d2 = sorted([math.exp(ld1), math.exp(ld2)])
    assert gdp_epsilon(d1, mu) >= gdp_epsilon(d2, mu)


@FAST
@given(m1=mus, m2=mus, log_delta=log_deltas)
def test_gdp_epsilon_monotone_in_mu(m1: float, m2: float, log_delta: float) -> None:
    lo, hi = sorted([m1, m2])
    delta = math.exp(log_delta)
    assert gdp_epsilon(delta, lo) <= gdp_epsilon(delta, hi)


@FAST
@given(mu=mus, eps=st.lists(st.floats(min_value=0.0, max_value=2000.0), min_size=2, max_size=8))
def test_gdp_delta_bounded_and_non_increasing(mu: float, eps: list[float]) -> None:
    e = np.sort(np.asarray(eps))
    d = gdp_delta(e, mu)
    assert np.all(np.isfinite(d)) and np.all(d >= 0) and np.all(d <= 1)
    # non-increasing up to the rounding of the two-term formula: a few ulps of delta, and an
    # absolute ~1e-16 where the terms cancel for tiny mu (the accuracy gdp_delta documents): at
    # eps = 0 and 2.2e-16, mu = 1/8 gives a rise of 5.6e-17, mu = 2.2e-16 one of 1.0e-16
    assert np.all(np.diff(d) <= 8 * np.finfo(float).eps * d[:-1] + 4e-16)


@FAST
@given(eps=st.floats(min_value=0.0, max_value=1500.0), log_delta=log_deltas)
def test_gdp_mu_round_trip(eps: float, log_delta: float) -> None:
    delta = math.exp(log_delta)
    mu = gdp_mu(eps, delta)
    assert math.isfinite(mu) and mu > 0
    assert gdp_delta(eps, mu) <= delta


# ---------------------------------------------------------------------------------------------
# tradeoff curves
# ---------------------------------------------------------------------------------------------


@MEDIUM
@given(mu=st.floats(min_value=0.0, max_value=8.0), p=st.floats(min_value=0.0, max_value=1.0))
def test_produced_curves_are_valid(mu: float, p: float) -> None:
    g = TradeoffCurve.from_gaussian(mu)
    for c in (
        g,
        g.subsample(p),
        g.inverse(),
        g.symmetrize(),
        TradeoffCurve.from_subsampled_gaussian(p, mu),
    ):
        assert c.is_valid(), (mu, p)
    # the polygon never exceeds the exact function (safe side)
    a = np.linspace(0, 1, 501)
    assert np.all(np.asarray(g.subsample(p)(a)) <= subsampled_gaussian_tradeoff(a, p, mu) + 1e-15)


@MEDIUM
@given(
    e1=st.floats(min_value=0.0, max_value=20.0),
    d1=st.floats(min_value=0.0, max_value=0.5),
    e2=st.floats(min_value=0.0, max_value=20.0),
    d2=st.floats(min_value=0.0, max_value=0.5),
)
def test_pointwise_max_and_epsilon_delta_curves_valid(
    e1: float, d1: float, e2: float, d2: float
) -> None:
    f = TradeoffCurve.from_epsilon_delta(e1, d1)
    g = TradeoffCurve.from_epsilon_delta(e2, d2)
    m = f.pointwise_max(g)
    assert f.is_valid() and g.is_valid() and m.is_valid()
    a = np.linspace(0, 1, 257)
    assert np.all(np.asarray(m(a)) >= np.maximum(np.asarray(f(a)), np.asarray(g(a))) - 1e-12)


@FAST
@given(
    p=probs,
    mu=st.floats(min_value=0.0, max_value=10.0),
    eps=st.floats(min_value=0.0, max_value=50.0),
)
def test_subsampling_amplifies(p: float, mu: float, eps: float) -> None:
    d_sub = subsampled_gaussian_delta(eps, p, mu)
    assert 0.0 <= d_sub <= gdp_delta(eps, mu) * (1 + 1e-12) + 1e-300


# ---------------------------------------------------------------------------------------------
# sampled Gaussian RDP
# ---------------------------------------------------------------------------------------------


@MEDIUM
@given(q1=probs, q2=probs, s=sigmas)
@example(q1=0.6086022877972007, q2=0.9999999999999999, s=0.5394879212469417)  # series -> quadrature
def test_sampled_gaussian_rdp_monotone_in_q(q1: float, q2: float, s: float) -> None:
    lo, hi = sorted([q1, q2])
    orders = np.array([1.5, 2.0, 4.5, 16.0])
    r_lo = sampled_gaussian_rdp(lo, s, orders, direction="mixture-first")
    r_hi = sampled_gaussian_rdp(hi, s, orders, direction="mixture-first")
    assert np.all(r_lo <= r_hi * (1 + 1e-9) + 1e-15)


@MEDIUM
@given(q=probs, s1=sigmas, s2=sigmas)
def test_sampled_gaussian_rdp_monotone_in_inverse_sigma(q: float, s1: float, s2: float) -> None:
    small, large = sorted([s1, s2])
    orders = np.array([1.5, 2.0, 4.5, 16.0])
    assert np.all(
        sampled_gaussian_rdp(q, large, orders, direction="max")
        <= sampled_gaussian_rdp(q, small, orders, direction="max") * (1 + 1e-9) + 1e-15
    )


@MEDIUM
@given(q=probs, s=sigmas)
def test_sampled_gaussian_rdp_monotone_in_order_and_nonnegative(q: float, s: float) -> None:
    orders = np.array([1.1, 1.5, 2.0, 2.5, 3.0, 5.5, 8.0, 12.0, 32.0, 64.0])
    for direction in ("mixture-first", "literal"):
        r = sampled_gaussian_rdp(q, s, orders, direction=direction)
        assert np.all(np.isfinite(r)) and np.all(r >= 0)
        # Renyi divergence is non-decreasing in the order
        assert np.all(np.diff(r) >= -1e-12 * r[1:]), (direction, r)


@FAST
@given(
    mu=st.floats(min_value=0.01, max_value=20.0),
    log_delta=st.floats(min_value=math.log(1e-12), max_value=math.log(0.1)),
)
def test_rdp_epsilon_never_below_exact_gaussian(mu: float, log_delta: float) -> None:
    delta = math.exp(log_delta)
    conv = rdp_linear_to_epsilon(mu * mu / 2, delta)
    assert conv.epsilon >= gdp_epsilon(delta, mu)
    assert RdpCurve.from_gdp(mu).epsilon(delta) >= conv.epsilon - 1e-12


# ---------------------------------------------------------------------------------------------
# CLT estimates
# ---------------------------------------------------------------------------------------------


@FAST
@given(
    p=probs,
    mu=st.floats(min_value=0.0, max_value=5.0),
    t1=st.floats(1.0, 1e6),
    t2=st.floats(1.0, 1e6),
)
def test_clt_monotone_in_steps(p: float, mu: float, t1: float, t2: float) -> None:
    lo, hi = sorted([t1, t2])
    for fn in (clt_mu_poisson, clt_mu_symmetric):
        assert 0.0 <= fn(p, mu, lo) <= fn(p, mu, hi)
