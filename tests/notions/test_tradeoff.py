"""Tests for lastiterate.notions.tradeoff (docs/theorems.md 1.1, 1.3, 1.6)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lastiterate.errors import ParameterError
from lastiterate.notions.gdp import gaussian_tradeoff, gdp_delta, gdp_epsilon
from lastiterate.notions.tradeoff import (
    MAX_POLYGON_MU,
    PROFILE_MARGIN,
    TradeoffCurve,
    default_grid,
    epsilon_delta_tradeoff,
    subsampled_gaussian_delta,
    subsampled_gaussian_tradeoff,
)

ALPHAS = np.linspace(0.0, 1.0, 20001)


@pytest.fixture(scope="module")
def g1() -> TradeoffCurve:
    return TradeoffCurve.from_gaussian(1.0)


# ---------------------------------------------------------------------------------------------
# C_p(G_mu): explicit construction vs the operator
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("p", "mu"), [(0.1, 1.0), (0.025, 2.0 / 3.0), (0.5, 3.0), (0.9, 0.5)])
def test_subsample_operator_matches_explicit(p: float, mu: float) -> None:
    """The operator on the G_mu polygon lies below the explicit C_p(G_mu) (safe side) and within the
    grid error (chord errors of a ~1e-3 grid, measured <= 1e-6)."""
    op = TradeoffCurve.from_gaussian(mu).subsample(p)
    assert op.is_valid()
    explicit = subsampled_gaussian_tradeoff(ALPHAS, p, mu)
    diff = np.asarray(op(ALPHAS)) - explicit
    assert diff.max() <= 1e-15
    # chord-error lowering of the G_mu polygon, O(h^2 f''): measured <= 2e-5 (largest for mu = 3)
    assert diff.min() >= -5e-5


def test_explicit_pieces_and_kinks() -> None:
    p, mu = 0.2, 2.0
    x_star = 0.15865525393145707  # Phi(-1)
    y_star = p * float(gaussian_tradeoff(x_star, mu)) + (1 - p) * (1 - x_star)
    f = subsampled_gaussian_tradeoff(
        np.array([0.0, x_star, 0.5 * (x_star + y_star), y_star, 1.0]), p, mu
    )
    assert f[0] == 1.0 and f[-1] == 0.0
    assert f[1] == pytest.approx(y_star, abs=1e-15)
    assert f[2] == pytest.approx(
        x_star + y_star - 0.5 * (x_star + y_star), abs=1e-15
    )  # slope -1 piece
    assert f[3] == pytest.approx(x_star, abs=1e-12)  # f_p^{-1}(y*) = x*


@pytest.mark.parametrize(("p", "mu"), [(0.1, 1.0), (0.3, 2.5), (1.0, 1.5)])
def test_cp_gmu_is_symmetric(p: float, mu: float) -> None:
    """C_p(G_mu) is symmetric (f = f^{-1}): f(f(x)) = x on the strictly decreasing part."""
    x = np.linspace(1e-4, 0.999, 401)
    f = subsampled_gaussian_tradeoff(x, p, mu)
    ok = f > 1e-10
    ff = subsampled_gaussian_tradeoff(f[ok], p, mu)
    assert np.max(np.abs(ff - x[ok])) < 1e-9
    curve = TradeoffCurve.from_gaussian(mu).subsample(p)
    assert np.max(np.abs(np.asarray(curve.inverse()(ALPHAS)) - np.asarray(curve(ALPHAS)))) < 1e-12


def test_explicit_limits() -> None:
    x = np.linspace(0, 1, 101)
    assert np.allclose(
        subsampled_gaussian_tradeoff(x, 1.0, 1.3), gaussian_tradeoff(x, 1.3), atol=1e-14
    )
    assert np.allclose(subsampled_gaussian_tradeoff(x, 0.0, 1.3), 1 - x, atol=1e-14)
    assert np.allclose(subsampled_gaussian_tradeoff(x, 0.4, 0.0), 1 - x, atol=1e-14)


def test_subsampled_gaussian_delta_matches_curve_profile() -> None:
    """The single-step privacy curve formula vs the conjugate of the C_p(G_mu) polygon: the polygon
    is pessimistic (never below) and within 1e-3 relative where delta >= 1e-12."""
    p, mu = 0.1, 1.0
    curve = TradeoffCurve.from_subsampled_gaussian(p, mu)
    eps = np.array([0.0, 0.05, 0.3, 1.0, 2.0, 3.0, 4.0])
    formula = subsampled_gaussian_delta(eps, p, mu)
    prof = curve.privacy_profile(eps)
    assert np.all(prof >= formula)
    assert np.all(prof <= formula * (1 + 1e-3) + PROFILE_MARGIN)
    # operator-built curve gives the same numbers within the grid error
    op = TradeoffCurve.from_gaussian(mu).subsample(p)
    assert np.all(op.privacy_profile(eps) >= formula)
    assert np.allclose(op.privacy_profile(eps), formula, rtol=1e-3, atol=1e-14)


def test_subsampled_gaussian_delta_limits_and_values() -> None:
    eps = np.array([0.0, 0.5, 2.0, 800.0])
    assert np.allclose(subsampled_gaussian_delta(eps, 1.0, 2.0), gdp_delta(eps, 2.0), rtol=1e-13)
    assert np.all(subsampled_gaussian_delta(eps, 0.0, 2.0) == 0.0)
    # hand value: p = 0.5, eps = log 2 -> e^{eps'} = 1 + 1/0.5 = 3, delta = 0.5 * delta(log 3; mu)
    assert subsampled_gaussian_delta(math.log(2.0), 0.5, 1.0) == pytest.approx(
        0.5 * gdp_delta(math.log(3.0), 1.0), rel=1e-13
    )
    d = subsampled_gaussian_delta(np.array([1e3, 1e5]), 0.01, 1.0)
    assert np.all(np.isfinite(d)) and np.all(d >= 0)


# ---------------------------------------------------------------------------------------------
# Gaussian curve: profile <-> curve round trips
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mu", [0.1, 1.0, 3.0, 10.0])
def test_gaussian_curve_profile_never_below_exact(mu: float) -> None:
    curve = TradeoffCurve.from_gaussian(mu)
    assert curve.is_valid()
    eps = np.linspace(0.0, mu * mu / 2 + 6 * mu, 41)
    exact = gdp_delta(eps, mu)
    prof = curve.privacy_profile(eps)
    assert np.all(prof >= exact)
    keep = exact >= 1e-12
    # grid error: chord lowering O(h^2 f''); in relative delta it grows like (mu * dt / w)^2 with
    # the logit step dt and w = Phi^-1(1 - alpha*): measured <= 3e-4 for mu <= 3 and <= 1.4e-3 for
    # mu = 10
    rel = 1e-3 if mu <= 3 else 3e-3
    assert np.all(prof[keep] <= exact[keep] * (1 + rel) + PROFILE_MARGIN)
    for delta in [1e-3, 1e-5, 1e-10]:
        e_curve = curve.epsilon(delta)
        e_exact = gdp_epsilon(delta, mu)
        assert e_exact <= e_curve <= e_exact * (1 + 1e-4)


def test_gaussian_polygon_below_function(g1: TradeoffCurve) -> None:
    diff = np.asarray(g1(ALPHAS)) - gaussian_tradeoff(ALPHAS, 1.0)
    assert diff.max() <= 0.0
    assert diff.min() > -1e-5


def test_profile_to_curve_round_trip() -> None:
    """from_privacy_profile(gdp_delta) is a valid curve below G_mu, close to it, with epsilon >=
    exact."""
    mu = 1.0
    eps = np.linspace(0.0, 12.0, 2000)
    curve = TradeoffCurve.from_privacy_profile(eps, gdp_delta(eps, mu))
    assert curve.is_valid()
    g = gaussian_tradeoff(ALPHAS, mu)
    diff = np.asarray(curve(ALPHAS)) - g
    assert diff.max() <= 1e-15
    assert diff.min() > -1e-4  # envelope of 2000 tangent f_{eps,delta}'s
    for delta in [1e-2, 1e-5]:
        assert gdp_epsilon(delta, mu) <= curve.epsilon(delta) <= gdp_epsilon(delta, mu) + 1e-2


# ---------------------------------------------------------------------------------------------
# f_{eps, delta}
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("eps", "delta"), [(0.0, 0.1), (1.0, 1e-3), (5.0, 1e-6), (700.0, 1e-5)])
def test_epsilon_delta_curve_profile_reproduces_delta(eps: float, delta: float) -> None:
    c = TradeoffCurve.from_epsilon_delta(eps, delta)
    assert c.is_valid()
    assert float(c.privacy_profile(eps)) == pytest.approx(delta, rel=1e-9, abs=2 * PROFILE_MARGIN)
    # at a slightly larger delta the curve certifies (essentially) the same epsilon
    e = c.epsilon(delta * (1 + 1e-6) + 2 * PROFILE_MARGIN)
    assert e <= eps + 1e-9
    assert e >= eps - 1e-4
    # below delta no finite epsilon is certified by f_{eps,delta}
    assert c.epsilon(delta / 2) == math.inf


def test_epsilon_delta_tradeoff_function() -> None:
    a = np.array([0.0, 0.1, 0.5, 0.999, 1.0])
    f = epsilon_delta_tradeoff(a, 1.0, 0.01)
    exp = np.maximum(0, np.maximum(1 - 0.01 - math.e * a, math.exp(-1) * (0.99 - a)))
    assert np.allclose(f, exp, atol=1e-15)
    c = TradeoffCurve.from_epsilon_delta(1.0, 0.01)
    assert np.allclose(c(a), f, atol=1e-15)
    big = epsilon_delta_tradeoff(np.array([0.0, 1e-300, 0.5]), 1000.0, 0.0)
    assert big[0] == 1.0 and big[1] == pytest.approx(math.exp(-1000.0), rel=1e-12)


# ---------------------------------------------------------------------------------------------
# inverse / symmetrize / pointwise max / validity
# ---------------------------------------------------------------------------------------------


def test_non_symmetric_profile_uses_both_sides() -> None:
    """f_p = p G_mu + (1 - p) Id is not symmetric: the profile is max(delta_f, delta_{f^-1}) and
    equals the profile of the symmetrisation min{f, f^-1}** (docs/theorems.md 1.3)."""
    p, mu = 0.2, 2.0
    fp = TradeoffCurve.from_function(lambda a: p * gaussian_tradeoff(a, mu) + (1 - p) * (1 - a))
    eps = np.array([0.0, 0.5, 1.0, 2.0])
    one_sided = fp.privacy_profile(eps, symmetric=True)
    both = fp.privacy_profile(eps)
    inv_side = fp.inverse().privacy_profile(eps, symmetric=True)
    assert np.all(both >= one_sided)
    assert np.all(one_sided[1:] > inv_side[1:] * 1.01)  # genuinely asymmetric here
    assert np.allclose(both, np.maximum(one_sided, inv_side), rtol=0, atol=1e-15)
    # for g = f_p^{-1} the dominant side is the inverse one: the one-sided profile would
    # under-report
    g = fp.inverse()
    assert np.all(g.privacy_profile(eps, symmetric=True)[1:] < g.privacy_profile(eps)[1:] / 1.01)
    assert np.allclose(g.privacy_profile(eps), both, rtol=0, atol=1e-13)
    sym = fp.symmetrize()
    assert sym.is_valid()
    assert np.allclose(sym.privacy_profile(eps, symmetric=True), both, rtol=0, atol=1e-13)
    # f^{-1} of the inverse is f again (exact reflection)
    assert (
        np.max(np.abs(np.asarray(fp.inverse().inverse()(ALPHAS)) - np.asarray(fp(ALPHAS)))) < 1e-14
    )


def test_inverse_of_epsilon_delta_handles_flat_part() -> None:
    c = TradeoffCurve.from_epsilon_delta(1.0, 0.1)
    inv = c.inverse()
    assert inv.is_valid()
    # f_{eps,delta} is symmetric
    assert np.max(np.abs(np.asarray(inv(ALPHAS)) - np.asarray(c(ALPHAS)))) < 1e-14
    # f^{-1}(0) = inf{x: f(x) <= 0} = 1 - delta
    assert float(inv(0.0)) == pytest.approx(0.9, abs=1e-15)


def test_pointwise_max_is_valid_and_is_the_max(g1: TradeoffCurve) -> None:
    fed = TradeoffCurve.from_epsilon_delta(1.5, 1e-3)
    m = g1.pointwise_max(fed)
    assert m.is_valid()
    expected = np.maximum(np.asarray(g1(ALPHAS)), np.asarray(fed(ALPHAS)))
    assert np.max(np.abs(np.asarray(m(ALPHAS)) - expected)) < 1e-12
    # combining guarantees can only help
    eps = np.array([0.5, 1.5, 3.0])
    assert np.all(
        m.privacy_profile(eps)
        <= np.minimum(g1.privacy_profile(eps), fed.privacy_profile(eps)) + 1e-15
    )
    with pytest.raises(ParameterError):
        g1.pointwise_max(1.0)  # type: ignore[arg-type]


def test_subsample_edge_cases(g1: TradeoffCurve) -> None:
    # C_1(f) = min{f, f^-1}**: for the (slightly asymmetric, lowered) polygon this is its
    # symmetrisation
    c1 = g1.subsample(1.0)
    assert np.array_equal(c1.alphas, g1.symmetrize().alphas)
    assert np.max(np.asarray(c1(ALPHAS)) - np.asarray(g1(ALPHAS))) <= 1e-15
    assert np.max(np.abs(np.asarray(c1(ALPHAS)) - gaussian_tradeoff(ALPHAS, 1.0))) < 1e-5
    assert np.max(np.abs(np.asarray(g1.subsample(0.0)(ALPHAS)) - (1 - ALPHAS))) < 1e-14
    with pytest.raises(ParameterError) as ei:
        g1.subsample(1.5)
    assert ei.value.name == "p"


def test_validate_rejects_invalid_polygons() -> None:
    TradeoffCurve([0.0, 0.5, 1.0], [1.0, 0.2, 0.0])  # valid
    bad = [
        ([0.0, 0.5, 1.0], [1.0, 0.8, 0.0]),  # not convex
        ([0.0, 0.5, 1.0], [0.4, 0.5, 0.0]),  # increasing
        ([0.0, 0.5, 1.0], [1.0, 0.6, 0.0]),  # above 1 - x
        ([0.0, 0.5, 0.9], [1.0, 0.2, 0.0]),  # does not end at 1
        ([0.0, 1.0], [1.2, 0.0]),  # above 1
    ]
    for x, y in bad:
        with pytest.raises(ParameterError):
            TradeoffCurve(x, y)
    with pytest.raises(ParameterError):
        TradeoffCurve.from_function(
            lambda a: np.where(a < 0.5, 1 - 0.5 * a, 1.5 * (1 - a))
        )  # not convex
    with pytest.raises(ParameterError):
        TradeoffCurve.from_function(lambda a: np.full_like(a, np.nan))


def test_every_constructed_curve_is_valid() -> None:
    curves = [
        TradeoffCurve.identity(),
        TradeoffCurve.from_gaussian(0.0),
        TradeoffCurve.from_gaussian(MAX_POLYGON_MU),
        TradeoffCurve.from_subsampled_gaussian(0.01, 5.0),
        TradeoffCurve.from_epsilon_delta(0.0, 0.0),
        TradeoffCurve.from_epsilon_delta(2.0, 1.0),
        TradeoffCurve.from_privacy_profile([0.0, 1.0, 1000.0], [0.5, 0.1, 0.0]),
        TradeoffCurve.from_gaussian(2.0).subsample(0.3).inverse().symmetrize(),
    ]
    for c in curves:
        assert c.is_valid(), c
        assert c.alphas[0] == 0.0 and c.alphas[-1] == 1.0
        prof = c.privacy_profile([0.0, 1.0, 1e4, math.inf])
        assert np.all(np.isfinite(prof)) and np.all(prof >= 0) and np.all(prof <= 1)


def test_unrepresentable_parameters_are_refused() -> None:
    with pytest.raises(ParameterError) as ei:
        TradeoffCurve.from_gaussian(MAX_POLYGON_MU * 1.01)
    assert ei.value.name == "mu"
    with pytest.raises(ParameterError) as ei:
        TradeoffCurve.from_epsilon_delta(701.0, 1e-5)
    assert ei.value.name == "epsilon"


def test_default_grid_shape() -> None:
    g = default_grid()
    assert g[0] == 0.0 and g[-1] == 1.0 and np.all(np.diff(g) > 0)
    assert g[1] < 1e-300 and 1 - g[-2] < 1e-15


def test_epsilon_rejects_bad_delta(g1: TradeoffCurve) -> None:
    for bad in [0.0, 1.0, -0.1]:
        with pytest.raises(ParameterError) as ei:
            g1.epsilon(bad)
        assert ei.value.name == "delta"
    assert g1.epsilon(PROFILE_MARGIN / 2) == math.inf
    with pytest.raises(ParameterError):
        g1.privacy_profile(-1.0)
    with pytest.raises(ParameterError):
        g1(1.5)
