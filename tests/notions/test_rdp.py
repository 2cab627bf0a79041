"""Tests for lastiterate.notions.rdp (docs/theorems.md 1.4, 1.5, 1.9)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import mpmath as mp
import numpy as np
import pytest

from lastiterate.errors import NotApplicable, ParameterError
from lastiterate.notions.gdp import gdp_epsilon
from lastiterate.notions.rdp import (
    CONVERSION_METHODS,
    DEFAULT_ORDERS,
    DpConversion,
    RdpCurve,
    alpha_star,
    lemma_2_12_applies,
    lemma_2_12_bound,
    literal_taylor_upper,
    rdp_linear_to_epsilon,
    rdp_to_delta,
    rdp_to_epsilon,
    sampled_gaussian_rdp,
)

dpa = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "reference_values.json"
TF_ORDERS = np.concatenate([1 + np.arange(1, 100) / 10.0, np.arange(12, 64, dtype=float)])
FRACTIONAL = np.array([1.1, 1.5, 2.5, 3.7, 7.3, 10.5, 31.5])
INTEGER = np.array([2.0, 3.0, 8.0, 32.0, 256.0])
CASES = [(0.01, 1.0), (256 / 60000, 0.7), (0.1, 2.0), (0.5, 0.5), (0.9, 3.0), (0.2, 0.3)]


def _opacus_rdp_module() -> Any:
    """Load ``opacus/accountants/analysis/rdp.py`` by path: it only needs numpy/scipy, while
    importing the ``opacus`` package would import torch (~4 s)."""
    spec = importlib.util.find_spec("opacus")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("opacus is not installed")
    path = Path(spec.submodule_search_locations[0]) / "accountants" / "analysis" / "rdp.py"
    mod_spec = importlib.util.spec_from_file_location("_opacus_rdp_analysis", path)
    assert mod_spec is not None and mod_spec.loader is not None
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    return module


def _vectors() -> list[dict[str, Any]]:
    if not REFERENCE.exists():
        pytest.skip(f"reference vectors not found at {REFERENCE}")
    with REFERENCE.open() as fh:
        return json.load(fh)["vectors"]


def _mp_rdp(q: float, s: float, a: float, literal: bool) -> float:
    """Independent 40-digit quadrature of either direction (docs/theorems.md 1.9)."""
    with mp.workdps(40):
        q_, s_, a_ = mp.mpf(q), mp.mpf(s), mp.mpf(a)
        power = (1 - a_) if literal else a_

        def f(z: Any) -> Any:
            return (
                mp.npdf(z, 0, s_) * (1 - q_ + q_ * mp.e ** ((2 * z - 1) / (2 * s_ * s_))) ** power
            )

        pts = sorted({-a_ - 60 * s_, -a_, mp.mpf(0), mp.mpf(1), a_, a_ + 60 * s_, 60 * s_ + 1})
        return float(mp.log(mp.quad(f, pts)) / (a_ - 1))


# ---------------------------------------------------------------------------------------------
# sampled Gaussian: cross-checks
# ---------------------------------------------------------------------------------------------


def test_default_orders_match_dp_accounting() -> None:
    assert np.array_equal(DEFAULT_ORDERS, np.asarray(dpa.DEFAULT_RDP_ORDERS, dtype=float))


@pytest.mark.parametrize(("q", "s"), [*CASES, (0.001, 10.0)])
def test_integer_orders_equal_dp_accounting(q: float, s: float) -> None:
    """Same closed form (MTZ19) as dp_accounting; ours carries a 1e-12 relative upward margin and is
    computed as log1p(A - 1), dp_accounting's own rounding is ~1e-11 relative for tiny values."""
    ours = sampled_gaussian_rdp(q, s, INTEGER, direction="mixture-first")
    theirs = dpa._compute_rdp_poisson_subsampled_gaussian(q, s, INTEGER)
    # dp_accounting sums the terms of A itself, so its log A has an absolute error ~1e-16 (visible
    # only for tiny RDP such as q = 0.001, s = 10, where values are ~1e-8): atol 1e-16
    assert np.allclose(ours, theirs, rtol=1e-10, atol=1e-16)


@pytest.mark.parametrize(("q", "s"), CASES)
def test_fractional_orders_between_literal_and_dp_accounting(q: float, s: float) -> None:
    """At fractional orders the signed series is <= dp_accounting's absolute-value series (up to
    rounding, 1e-11 relative) and >= the literal direction; the absolute series is >= the signed
    one."""
    ours = sampled_gaussian_rdp(q, s, FRACTIONAL, direction="mixture-first")
    absolute = sampled_gaussian_rdp(
        q, s, FRACTIONAL, direction="mixture-first", fractional_series="absolute"
    )
    literal = sampled_gaussian_rdp(q, s, FRACTIONAL, direction="literal")
    theirs = np.asarray(dpa._compute_rdp_poisson_subsampled_gaussian(q, s, FRACTIONAL))
    finite = np.isfinite(theirs)  # dp_accounting gives up (inf) when its series does not converge
    assert np.all(ours[finite] <= theirs[finite] * (1 + 1e-11))
    assert np.all(ours >= literal)
    assert np.all(absolute >= ours)
    assert np.all(absolute[finite] >= theirs[finite] * (1 - 1e-11))  # we add a tail bound they omit


@pytest.mark.parametrize(("q", "s"), [(0.01, 1.0), (256 / 60000, 0.7), (0.1, 2.0)])
def test_fractional_orders_match_opacus(q: float, s: float) -> None:
    """Opacus keeps the signs too (TF-Privacy code); agreement to 1e-7 (Opacus' own truncation error
    at small orders is ~1e-8, measured against 40-digit quadrature)."""
    rdp_mod = _opacus_rdp_module()
    theirs = np.asarray(
        rdp_mod.compute_rdp(q=q, noise_multiplier=s, steps=1, orders=list(FRACTIONAL))
    )
    ours = sampled_gaussian_rdp(q, s, FRACTIONAL, direction="mixture-first")
    assert np.allclose(ours, theirs, rtol=1e-7, atol=0)


@pytest.mark.parametrize(
    ("q", "s", "a"),
    [
        (0.01, 1.0, 1.5),
        (0.01, 1.0, 3.7),
        (0.2, 0.3, 1.1),
        (0.9, 3.0, 10.5),
        (0.001, 10.0, 2.0),
        (0.05, 2.0, 8.0),
    ],
)
def test_both_directions_against_high_precision(q: float, s: float, a: float) -> None:
    """Both directions are never below a 40-digit reference and exceed it by at most their
    documented rounding margins (1e-12 relative for mixture-first + series rounding bound; 1e-10 for
    literal)."""
    ref_mf = _mp_rdp(q, s, a, literal=False)
    ref_lit = _mp_rdp(q, s, a, literal=True)
    mf = sampled_gaussian_rdp(q, s, [a], direction="mixture-first")[0]
    lit = sampled_gaussian_rdp(q, s, [a], direction="literal")[0]
    assert ref_mf * (1 - 1e-13) <= mf <= ref_mf * (1 + 1e-9)
    assert ref_lit * (1 - 1e-13) <= lit <= ref_lit * (1 + 2e-10)
    assert sampled_gaussian_rdp(q, s, [a], direction="max")[0] == max(mf, lit)


@pytest.mark.parametrize(("q", "s", "a"), [(1 - 1e-16, 0.54, 1.5), (1 - 1e-12, 0.3, 2.5)])
def test_fractional_series_fallback_for_extreme_q(q: float, s: float, a: float) -> None:
    """For q within ~1e-10 of 1 the fractional series decays only polynomially; A_alpha is then
    computed by quadrature of its defining integral (documented), still exact to ~1e-12."""
    from lastiterate.notions import rdp as rdp_module

    if a == 1.5:
        assert rdp_module._log_a_frac(q, s, a) is None  # the series really gives up here
    got = sampled_gaussian_rdp(q, s, [a], direction="mixture-first")[0]
    ref = _mp_rdp(q, s, a, literal=False)
    assert ref * (1 - 1e-13) <= got <= ref * (1 + 1e-9)


def test_sampled_gaussian_limits() -> None:
    orders = np.array([1.5, 2.0, 10.0, 1024.0])
    for d in ("mixture-first", "literal", "max"):
        assert np.array_equal(sampled_gaussian_rdp(1.0, 2.0, orders, direction=d), orders / 8.0)
        assert np.array_equal(sampled_gaussian_rdp(0.0, 2.0, orders, direction=d), np.zeros(4))
    # q -> 1 approaches the Gaussian value continuously (both directions)
    near = sampled_gaussian_rdp(1 - 1e-9, 2.0, [3.0], direction="mixture-first")[0]
    assert near == pytest.approx(3.0 / 8.0, rel=1e-6)


def test_large_orders_no_overflow() -> None:
    vals = sampled_gaussian_rdp(0.5, 0.3, [512.0, 1024.0, 1000.5])
    assert np.all(np.isfinite(vals)) and np.all(vals > 100)


def test_sampled_gaussian_rejects_bad_input() -> None:
    for kwargs, name in [
        ({"q": 1.5, "noise_multiplier": 1.0}, "q"),
        ({"q": 0.1, "noise_multiplier": 0.0}, "noise_multiplier"),
        ({"q": 0.1, "noise_multiplier": 1.0, "orders": [1.0]}, "orders"),
        ({"q": 0.1, "noise_multiplier": 1.0, "direction": "other"}, "direction"),
    ]:
        with pytest.raises(ParameterError) as ei:
            sampled_gaussian_rdp(**kwargs)
        assert ei.value.name == name


# ---------------------------------------------------------------------------------------------
# conversions
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q", "s", "steps"), [(256 / 60000, 1.1, 14000), (0.01, 0.8, 1000), (0.1, 3.0, 100)]
)
def test_conversion_not_worse_than_dp_accounting(q: float, s: float, steps: int) -> None:
    """Our conversions are a superset of dp_accounting's (BBG20 + KL-TV) on the same orders and the
    RDP values are <= theirs, so our epsilon is <= theirs (up to 1e-12 relative rounding)."""
    curve = RdpCurve.from_sampled_gaussian(q, s, steps, direction="mixture-first")
    ours = curve.to_dp(1e-5)
    theirs, _order = dpa.compute_epsilon(
        DEFAULT_ORDERS,
        dpa._compute_rdp_poisson_subsampled_gaussian(q, s, DEFAULT_ORDERS) * steps,
        1e-5,
    )
    assert ours.epsilon <= theirs * (1 + 1e-12)
    assert ours.epsilon >= theirs * (1 - 1e-2)  # same RDP, same best formula family
    # and via the public accountant API
    from dp_accounting import dp_event

    acc = dpa.RdpAccountant()
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(s)), steps)
    assert ours.epsilon <= acc.get_epsilon(1e-5) * (1 + 1e-12)
    # ours with 'max' may only be larger if the literal direction ever dominated (it does not here)
    assert RdpCurve.from_sampled_gaussian(q, s, steps).epsilon(1e-5) == pytest.approx(
        ours.epsilon, rel=1e-9
    )


@pytest.mark.parametrize("mu", [0.05, 0.5, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-10])
def test_rdp_epsilon_never_below_exact_gaussian(mu: float, delta: float) -> None:
    """The Gaussian mechanism's exact epsilon (gdp_epsilon) lower-bounds every RDP-derived epsilon;
    the best RDP conversion is within ~25% of it in this range."""
    exact = gdp_epsilon(delta, mu)
    lin = rdp_linear_to_epsilon(mu * mu / 2, delta)
    tab = RdpCurve(DEFAULT_ORDERS, DEFAULT_ORDERS * mu * mu / 2).to_dp(delta)
    for conv in (lin, tab):
        assert conv.epsilon >= exact
        assert conv.epsilon <= exact * 1.3 + 0.05
        assert conv.method in CONVERSION_METHODS
    assert lin.epsilon <= tab.epsilon + 1e-12  # continuous alpha can only help
    for method in CONVERSION_METHODS:
        single = rdp_linear_to_epsilon(mu * mu / 2, delta, methods=[method])
        assert single.epsilon >= exact


def test_linear_conversion_formulas_by_hand() -> None:
    rho, delta = 0.5, 1e-5
    L = math.log(1 / delta)
    bs = rdp_linear_to_epsilon(rho, delta, methods=["bun-steinke"])
    assert bs.epsilon == pytest.approx(rho + 2 * math.sqrt(rho * L), rel=1e-15)
    # Mironov's optimum for a linear curve is exactly Bun-Steinke's value, at alpha = 1 +
    # sqrt(L/rho)
    mir = rdp_linear_to_epsilon(rho, delta, methods=["mironov"])
    assert mir.epsilon == pytest.approx(bs.epsilon, rel=1e-9)
    assert mir.order == pytest.approx(1 + math.sqrt(L / rho), rel=1e-3)
    best = rdp_linear_to_epsilon(rho, delta)
    assert best.method == "balle2020" and best.epsilon < bs.epsilon
    assert rdp_linear_to_epsilon(0.0, delta).epsilon == 0.0


def test_tabulated_conversion_equals_formulas_at_orders() -> None:
    orders = np.array([2.0, 4.0, 8.0, 16.0])
    eps = np.array([0.1, 0.3, 0.9, 2.5])
    c = RdpCurve(orders, eps)
    mir = rdp_to_epsilon(c, 1e-5, methods=["mironov"])
    assert mir.epsilon == pytest.approx(
        float(np.min(eps + math.log(1e5) / (orders - 1))), rel=1e-15
    )
    bbg = rdp_to_epsilon(c, 1e-5, methods=["balle2020"])
    theirs, _ = dpa.compute_epsilon(orders, eps, 1e-5)
    assert bbg.epsilon == pytest.approx(theirs, rel=1e-13)
    aso = rdp_to_epsilon(c, 1e-5, methods=["asoodeh2021"])
    direct = np.log1p(np.expm1((orders - 1) * eps) / (orders * 1e-5)) / (orders - 1)
    assert aso.epsilon == pytest.approx(float(direct.min()), rel=1e-13)
    assert c.to_dp(1e-5).epsilon == min(mir.epsilon, bbg.epsilon, aso.epsilon)


def test_conversion_huge_values_no_overflow_or_nan() -> None:
    c = RdpCurve(DEFAULT_ORDERS, DEFAULT_ORDERS * 50.0)
    with np.errstate(over="raise", invalid="raise"):
        conv = c.to_dp(1e-10)
    assert math.isfinite(conv.epsilon) and conv.epsilon > 50
    inf_curve = RdpCurve([2.0, 3.0], [math.inf, math.inf])
    assert inf_curve.to_dp(1e-5).epsilon == math.inf
    zero = RdpCurve([2.0, 3.0], [0.0, 0.0])
    assert zero.to_dp(1e-5).epsilon == 0.0
    assert isinstance(zero.to_dp(1e-5), DpConversion)


def test_kl_tv_shortcut() -> None:
    # tiny RDP: delta >= sqrt(1 - e^{-r}) certifies eps = 0 (Bretagnolle-Huber + monotonicity in
    # alpha)
    c = RdpCurve([2.0], [1e-12])
    conv = c.to_dp(1e-5)
    assert conv.epsilon == 0.0 and conv.method == "kl-tv"
    assert c.delta(0.0) == pytest.approx(math.sqrt(-math.expm1(-1e-12)), rel=1e-12)


def test_rdp_to_delta_round_trip() -> None:
    c = RdpCurve.from_sampled_gaussian(0.01, 1.0, 1000, direction="mixture-first")
    for delta in [1e-3, 1e-6, 1e-9]:
        eps = c.epsilon(delta)
        d = c.delta(eps)
        assert d <= delta * (1 + 1e-9)
        assert d >= delta * (1 - 1e-6)  # same formula and order on the table
    lin = RdpCurve.from_linear(0.3)
    eps = lin.epsilon(1e-6)
    assert 1e-6 * (1 - 1e-6) <= rdp_to_delta(lin, eps) <= 1e-6 * (1 + 1e-9)
    # the same linear curve given as a callable
    assert rdp_to_delta(lambda a: 0.3 * a, eps) == pytest.approx(1e-6, rel=1e-6)
    assert rdp_to_delta(lin, 0.0) <= 1.0
    assert rdp_to_delta(RdpCurve.from_linear(0.0), 0.5) == 0.0
    with pytest.raises(ParameterError):
        rdp_to_delta(1.0, 0.5)  # type: ignore[arg-type]


def test_callable_conversion() -> None:
    conv = rdp_to_epsilon(lambda a: 0.02 * a + 0.001 * a * a, 1e-6)
    assert conv.order > 1 and conv.epsilon > 0
    # brute force over a fine alpha grid for the same formulas
    a = 1 + np.exp(np.linspace(-8, 10, 200001))
    r = 0.02 * a + 0.001 * a * a
    brute = min(
        float(np.min(r + math.log(1e6) / (a - 1))),
        float(np.min(r + np.log1p(-1 / a) - (math.log(1e-6) + np.log(a)) / (a - 1))),
    )
    assert brute * (1 - 1e-9) <= conv.epsilon <= brute + 1e-9
    with pytest.raises(ParameterError):
        rdp_to_epsilon(lambda a: float("nan"), 1e-5)
    with pytest.raises(ParameterError):
        rdp_to_epsilon(lambda a: -1.0, 1e-5)


def test_reference_rdp_rows_paper000() -> None:
    rows = [v for v in _vectors() if v["quantity"] == "epsilon (RDP)"]
    assert len(rows) == 3
    for v in rows:
        conv = rdp_linear_to_epsilon(v["recomputed"]["rho"], 1e-5)
        assert abs(conv.epsilon - v["expected_printed"]) <= v["tolerance"]["abs_vs_printed"]
        assert conv.epsilon == pytest.approx(v["recomputed"]["best"], rel=1e-9)
        assert conv.method == "balle2020"


def test_reference_fig1_rdp_columns() -> None:
    rows = [
        v for v in _vectors() if v["quantity"] == "eps at delta=1e-5 for NoisyGD strongly convex"
    ]
    assert len(rows) == 5
    for v in rows:
        rc, tol, T = v["recomputed"], v["tolerance"]["rel"], v["inputs_canonical"]["T"]
        # GDP -> RDP (docs/theorems.md 1.4) -> best conversion
        assert rdp_linear_to_epsilon(rc["mu_thm42"] ** 2 / 2, 1e-5).epsilon == pytest.approx(
            rc["eps_our_rdp"], rel=tol
        )
        # YS22 Thm D.6 as coded: rho = (L/(n sigma))^2 (1+c)/(1-c) (1 - 0.975^T), c = 0.95
        # (docs/theorems.md 2.3)
        rho = 0.1**2 * (1.95 / 0.05) * (1 - 0.975**T)
        assert rdp_linear_to_epsilon(rho, 1e-5).epsilon == pytest.approx(
            rc["eps_prior_rdp_YS22_D6_as_coded"], rel=tol
        )


def test_reference_paper004_moments_accountant() -> None:
    """Paper 004's MA numbers: sampled-Gaussian RDP at TF-tutorial orders, steps = ceil(epochs n /
    B), classic (Mironov) conversion; and the improved conversion (dp_accounting), which ours may
    only beat."""
    rows = [v for v in _vectors() if v["id"].startswith("P004-MNIST")]
    assert len(rows) == 27
    for v in rows:
        pn, rc = v["inputs_paper_notation"], v["recomputed"]
        steps = math.ceil(pn["epochs"] * 60000 / 256)
        curve = RdpCurve.from_sampled_gaussian(
            pn["p"], pn["sigma"], steps, TF_ORDERS, direction="mixture-first"
        )
        classic = rdp_to_epsilon(curve, pn["delta"], methods=["mironov"]).epsilon
        improved = curve.epsilon(pn["delta"])
        tol = v["tolerance"]["eps_MA_abs"]
        assert abs(classic - rc["eps_MA_rdp_classic_conversion"]) <= tol, v["id"]
        assert abs(improved - rc["eps_MA_rdp_improved_conversion"]) <= tol, v["id"]
        # never worse than the reference (which used dp_accounting's looser fractional series)
        assert improved <= rc["eps_MA_rdp_improved_conversion"] + 1e-9, v["id"]
        printed = v["expected_printed"]
        if (
            printed
            and printed["table1_partial"]["from_TF_tutorial_README"].get("eps_MA") is not None
        ):
            eps_ma = printed["table1_partial"]["from_TF_tutorial_README"]["eps_MA"]
            assert abs(classic - eps_ma) <= 0.01 + 0.005, v[
                "id"
            ]  # printed to 2 decimals (1.19, 3.01, 7.1)


def test_reference_paper004_fig4_printed() -> None:
    rows = [v for v in _vectors() if v["quantity"] == "eps_MA at delta=1e-5"]
    assert len(rows) == 2
    for v in rows:
        pn = v["inputs_paper_notation"]
        steps = math.ceil(pn["epochs"] * 60000 / 256)
        curve = RdpCurve.from_sampled_gaussian(
            pn["p"], pn["sigma"], steps, TF_ORDERS, direction="mixture-first"
        )
        classic = rdp_to_epsilon(curve, pn["delta"], methods=["mironov"]).epsilon
        assert abs(classic - v["expected_printed"]["eps"]) <= v["tolerance"]["eps_abs"]


# ---------------------------------------------------------------------------------------------
# RdpCurve
# ---------------------------------------------------------------------------------------------


def test_rdp_curve_calculus() -> None:
    a = RdpCurve([2.0, 3.0, 4.0], [0.1, 0.2, 0.3])
    b = RdpCurve([3.0, 4.0, 5.0], [1.0, 1.0, 1.0])
    c = a.compose(b)
    assert np.array_equal(c.orders, [3.0, 4.0]) and np.allclose(c.epsilons, [1.2, 1.3])
    assert np.allclose(a.scale(10).epsilons, [1.0, 2.0, 3.0])
    lin = RdpCurve.from_linear(0.1).compose(RdpCurve.from_gdp(1.0))
    assert lin.linear_rho == pytest.approx(0.6)
    assert lin(7.0) == pytest.approx(4.2)
    assert RdpCurve.from_linear(0.1).scale(3).linear_rho == pytest.approx(0.3)
    assert a(3.0) == 0.2
    with pytest.raises(ParameterError):
        a(3.5)
    with pytest.raises(ParameterError):
        a.compose(RdpCurve([7.0], [1.0]))


def test_rdp_curve_validation() -> None:
    bad = [
        (([1.0, 2.0], [0.1, 0.2]), "orders"),
        (([2.0, 2.0], [0.1, 0.2]), "orders"),
        (([2.0, 3.0], [0.1]), "epsilons"),
        (([2.0, 3.0], [0.1, -0.2]), "epsilons"),
        (([2.0, 3.0], [0.1, float("nan")]), "epsilons"),
    ]
    for args, name in bad:
        with pytest.raises(ParameterError) as ei:
            RdpCurve(*args)
        assert ei.value.name == name
    with pytest.raises(ParameterError) as ei:
        rdp_to_epsilon(RdpCurve.from_linear(1.0), 0.0)
    assert ei.value.name == "delta"
    with pytest.raises(ParameterError) as ei:
        rdp_to_epsilon(RdpCurve.from_linear(1.0), 1e-5, methods=["nope"])
    assert ei.value.name == "methods"


# ---------------------------------------------------------------------------------------------
# AT22 Lemma 2.12
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("q", "s"), [(0.01, 4.0), (0.1, 5.0), (0.19, 8.0), (0.001, 20.0)])
def test_alpha_star_boundary_and_bound(q: float, s: float) -> None:
    a_star = alpha_star(q, s)
    assert a_star > 1
    assert lemma_2_12_applies(q, s, a_star)
    assert not lemma_2_12_applies(q, s, a_star * (1 + 1e-6))
    # inside the range the lemma's bound dominates the exact RDP in both directions
    for a in np.linspace(1 + (a_star - 1) * 0.01, a_star, 7):
        bound = lemma_2_12_bound(q, s, float(a))
        assert sampled_gaussian_rdp(q, s, [float(a)], direction="max")[0] <= bound


def test_alpha_star_paper_regime() -> None:
    # AT22 Thm 3.1 uses alpha*(b/n, b sigma/(2 sqrt2 L)); e.g. q = 0.01, sigma = 4 gives alpha* ~
    # 14.34
    assert alpha_star(0.01, 4.0) == pytest.approx(14.34288555, rel=1e-8)


def test_lemma_2_12_not_applicable() -> None:
    assert not lemma_2_12_applies(0.2, 8.0, 2.0)  # q must be < 1/5
    assert not lemma_2_12_applies(0.1, 3.9, 2.0)  # sigma >= 4
    assert not lemma_2_12_applies(0.1, 8.0, 1.0)  # alpha > 1
    with pytest.raises(NotApplicable, match="q in"):
        lemma_2_12_bound(0.3, 8.0, 2.0)
    with pytest.raises(NotApplicable, match="sigma"):
        lemma_2_12_bound(0.1, 2.0, 2.0)
    with pytest.raises(NotApplicable, match="alpha"):
        lemma_2_12_bound(0.1, 5.0, 1e4)
    with pytest.raises(ParameterError):
        alpha_star(0.3, 5.0)


# ---------------------------------------------------------------------------------------------
# the literal direction's closed-form filter (issue 11: speed without a quadrature per order)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q", "s", "a"),
    [
        (1e-6, 0.5, 1024.0),  # scipy's quad over-reports here (1.5e-2 vs 2.1e-8): a loose reference
        (1e-4, 1.0, 1024.0),
        (1e-4, 1.5, 1024.0),
        (1e-4, 2.0, 2.0),
        (1e-6, 100.0, 8.0),
        (256 / 60000, 1.1, 1.1),
        (256 / 60000, 1.1, 12.0),
        (0.025, 1.2, 5.5),
        (0.3, 0.8, 3.0),
        (0.9, 3.0, 10.5),
        (0.025, 0.2121, 1.987),  # small noise: the log(1/(1-q)) bound
        (0.5, 0.3, 3.0),
    ],
)
def test_literal_taylor_upper_is_above_high_precision(q: float, s: float, a: float) -> None:
    """The closed-form bound is never below a 40-digit quadrature of the literal direction."""
    ref = _mp_rdp(q, s, a, literal=True)
    assert literal_taylor_upper(q, s, [a])[0] >= ref


@pytest.mark.parametrize(("q", "s"), [*CASES, (0.001, 10.0), (1e-5, 1e3), (0.999, 2.0)])
def test_max_direction_filter_gives_the_slow_path_value(q: float, s: float) -> None:
    """``direction="max"`` skips the literal quadrature where the Taylor bound is below the
    mixture-first value: the result equals max(mixture-first, literal) computed both ways, at every
    default order (the filter only decides which quadratures are needed)."""
    orders = np.union1d(DEFAULT_ORDERS, FRACTIONAL)
    mf = sampled_gaussian_rdp(q, s, orders, direction="mixture-first")
    lit = sampled_gaussian_rdp(q, s, orders, direction="literal")
    fast = sampled_gaussian_rdp(q, s, orders, direction="max")
    np.testing.assert_array_equal(fast, np.maximum(mf, lit))
    upper = literal_taylor_upper(q, s, orders)
    assert np.all(upper >= lit / (1 + 2e-10))  # the quadrature's own margin is 1e-10


def test_max_direction_filter_is_used_for_dp_sgd() -> None:
    """For DP-SGD rates the filter removes every literal quadrature (what makes it fast)."""
    from lastiterate.notions import rdp as rdp_module

    rdp_module._rdp_literal_scalar.cache_clear()
    sampled_gaussian_rdp(256 / 60000, 1.1 * (1 + 1e-7), DEFAULT_ORDERS, direction="max")
    assert rdp_module._rdp_literal_scalar.cache_info().misses == 0


@pytest.mark.parametrize(("q", "s"), [*CASES, (1e-6, 100.0)])
def test_vectorised_integer_orders_equal_the_scalar_closed_form(q: float, s: float) -> None:
    """sampled_gaussian_rdp evaluates several integer orders in one pass (issue 11): the same
    numbers as the scalar closed form, order by order."""
    from lastiterate.notions import rdp as rdp_module

    orders = [2, 3, 4, 8, 16, 63, 64, 128, 1024]
    assert rdp_module._log_a_int_many(q, s, orders) == [
        rdp_module._log_a_int(q, s, a) for a in orders
    ]
    together = sampled_gaussian_rdp(q, s, [float(a) for a in orders], direction="mixture-first")
    one_by_one = [
        sampled_gaussian_rdp(q, s, [float(a)], direction="mixture-first")[0] for a in orders
    ]
    assert together.tolist() == one_by_one
