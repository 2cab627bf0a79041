"""Tests for lastiterate.notions.gdp (docs/theorems.md 1.1, 1.2, 1.4)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import mpmath as mp
import numpy as np
import pytest

from lastiterate.errors import ParameterError
from lastiterate.notions.gdp import (
    GaussianDP,
    gaussian_tradeoff,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    gdp_to_rdp,
)

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "reference_values.json"


def _vectors() -> list[dict[str, Any]]:
    if not REFERENCE.exists():
        pytest.skip(f"reference vectors not found at {REFERENCE}")
    with REFERENCE.open() as fh:
        return json.load(fh)["vectors"]


def _mp_delta(eps: float, mu: float) -> float:
    """delta(eps; mu) with 60 significant digits (independent reference for
    docs/theorems.md 1.2)."""
    with mp.workdps(60):
        e, m = mp.mpf(eps), mp.mpf(mu)
        return float(mp.ncdf(-e / m + m / 2) - mp.e**e * mp.ncdf(-e / m - m / 2))


# ---------------------------------------------------------------------------------------------
# golden values
# ---------------------------------------------------------------------------------------------


def test_golden_mu1_delta1e5() -> None:
    # theorems brief: mu = 1, delta = 1e-5 -> 4.37718 (5 decimals printed)
    assert gdp_epsilon(1e-5, 1.0) == pytest.approx(4.37718, abs=5e-6)


def test_golden_mu_4_71405() -> None:
    # paper 000 Table 1 GDP composition, E = 50: mu = (2/3) sqrt(50) = 4.71405 -> 30.506
    assert gdp_epsilon(1e-5, 4.71405) == pytest.approx(30.506, abs=5e-4)


def test_reference_table1_gdp_rows() -> None:
    """Paper 000 Table 1: GDP composition (mu = (2/3) sqrt(E)) and 'ours' (mu given) at delta =
    1e-5."""
    rows = [v for v in _vectors() if v["quantity"] in ("epsilon (GDPcomp)", "epsilon (ours)")]
    assert len(rows) == 6
    for v in rows:
        if v["quantity"] == "epsilon (GDPcomp)":
            mu = v["inputs_canonical"]["L_over_b_sigma"] * math.sqrt(v["inputs_canonical"]["E"])
        else:
            mu = v["recomputed"]["mu"]
        eps = gdp_epsilon(v["inputs_canonical"]["delta"], mu)
        assert abs(eps - v["expected_printed"]) <= v["tolerance"]["abs_vs_printed"], v["id"]
        # the analytic value was recomputed to ~11 digits; mu itself is given to 10 digits
        assert eps == pytest.approx(v["recomputed"]["analytic_exact"], rel=1e-8), v["id"]


def test_reference_fig1_exact_and_composition() -> None:
    """Paper 000 Fig. 1 (recomputed only): eps of mu_thm42 and of the composition mu = 0.1
    sqrt(T)."""
    rows = [
        v for v in _vectors() if v["quantity"] == "eps at delta=1e-5 for NoisyGD strongly convex"
    ]
    assert len(rows) == 5
    for v in rows:
        rc, tol = v["recomputed"], v["tolerance"]["rel"]
        T = v["inputs_canonical"]["T"]
        assert gdp_epsilon(1e-5, rc["mu_thm42"]) == pytest.approx(rc["eps_fdp_exact"], rel=tol)
        mu_comp = v["inputs_canonical"]["L_over_n_sigma"] * math.sqrt(T)
        assert gdp_epsilon(1e-5, mu_comp) == pytest.approx(rc["eps_composition"], rel=tol)


# ---------------------------------------------------------------------------------------------
# gdp_delta accuracy and robustness
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mu", [1e-3, 0.05, 0.5, 1.0, 3.0, 10.0, 40.0])
def test_gdp_delta_matches_high_precision(mu: float) -> None:
    """Relative error <= 1e-9 wherever delta >= 1e-300 (measured worst case ~2e-12)."""
    for eps in [0.0, 1e-3, 0.1, 1.0, 5.0, 20.0, 100.0, 800.0, 2000.0]:
        ref = _mp_delta(eps, mu)
        got = gdp_delta(eps, mu)
        assert isinstance(got, float)
        if ref > 1e-300:
            assert got == pytest.approx(ref, rel=1e-9), (mu, eps)
        else:
            assert 0.0 <= got <= 1e-290


def test_gdp_delta_extreme_no_warnings_no_nan() -> None:
    eps = np.array([0.0, 1.0, 100.0, 1000.0, 2000.0, 1e6, np.inf])
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow to 0 is expected
        for mu in [1e-6, 1.0, 40.0, 200.0]:
            d = gdp_delta(eps, mu)
            assert isinstance(d, np.ndarray) and d.shape == eps.shape
            assert np.all(np.isfinite(d)) and np.all(d >= 0) and np.all(d <= 1)
            assert np.all(np.diff(d) <= 0)  # non-increasing in eps
            assert d[-1] == 0.0


def test_gdp_delta_at_zero_is_tv() -> None:
    # delta(0; mu) = TV(N(0,1), N(mu,1)) = 2 Phi(mu/2) - 1
    for mu in [0.1, 1.0, 4.0]:
        assert gdp_delta(0.0, mu) == pytest.approx(math.erf(mu / (2 * math.sqrt(2))), rel=1e-14)


def test_gdp_delta_mu_zero_is_zero() -> None:
    assert gdp_delta(3.0, 0.0) == 0.0
    assert np.all(gdp_delta([0.0, 1.0], 0.0) == 0.0)


def test_gdp_delta_against_dp_accounting_pld() -> None:
    """dp_accounting's PLD of the Gaussian mechanism (std = 1/mu) at interval 1e-4: it agrees with
    the exact curve to ~1e-13 relative (connect-the-dots is near exact here) and adds only tail mass
    < 1e-15."""
    pld_mod = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    for mu in [0.5, 1.0]:
        pld = pld_mod.from_gaussian_mechanism(
            standard_deviation=1.0 / mu, sensitivity=1.0, value_discretization_interval=1e-4
        )
        for eps in [0.0, 0.5, 1.0, 2.0, 4.0]:
            theirs = pld.get_delta_for_epsilon(eps)
            ours = gdp_delta(eps, mu)
            assert abs(theirs - ours) <= 1e-11 * ours + 1e-15, (mu, eps, theirs, ours)


def test_gdp_delta_rejects_bad_input() -> None:
    with pytest.raises(ParameterError) as ei:
        gdp_delta(-0.1, 1.0)
    assert ei.value.name == "epsilon"
    with pytest.raises(ParameterError) as ei:
        gdp_delta(1.0, -1.0)
    assert ei.value.name == "mu" and ">= 0" in str(ei.value)
    with pytest.raises(ParameterError):
        gdp_delta(float("nan"), 1.0)
    with pytest.raises(ParameterError):
        gdp_delta(1.0, float("nan"))


# ---------------------------------------------------------------------------------------------
# gdp_epsilon / gdp_mu
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mu", "delta"),
    [
        (1e-3, 1e-5),
        (0.3, 1e-10),
        (1.0, 1e-5),
        (4.71405, 1e-5),
        (10.0, 1e-12),
        (40.0, 1e-15),
        (40.0, 0.5),
    ],
)
def test_gdp_epsilon_is_tight_and_never_under_reports(mu: float, delta: float) -> None:
    eps = gdp_epsilon(delta, mu)
    assert eps > 0
    assert gdp_delta(eps, mu) <= delta  # exactly in floating point
    # and it is tight: 1e-9 relative below, delta is exceeded
    assert gdp_delta(eps * (1 - 1e-9), mu) > delta


def test_gdp_epsilon_large_mu_exceeds_1000() -> None:
    eps = gdp_epsilon(1e-15, 40.0)
    assert eps > 1000.0
    # independent check of the root with mpmath: delta there is 1e-15 to 1e-6 relative
    assert _mp_delta(eps, 40.0) == pytest.approx(1e-15, rel=1e-6)


def test_gdp_epsilon_zero_when_delta_large() -> None:
    # delta(0; 1) = 0.3829; any larger delta needs eps = 0
    assert gdp_epsilon(0.4, 1.0) == 0.0
    assert gdp_epsilon(1e-5, 0.0) == 0.0
    assert gdp_epsilon(0.38, 1.0) > 0.0


def test_gdp_epsilon_rejects_bad_delta() -> None:
    for bad in [0.0, 1.0, -1e-3, 2.0, float("nan")]:
        with pytest.raises(ParameterError) as ei:
            gdp_epsilon(bad, 1.0)
        assert ei.value.name == "delta"


@pytest.mark.parametrize(
    ("eps", "delta"), [(0.0, 1e-5), (0.5, 1e-6), (4.37718, 1e-5), (30.0, 1e-10), (900.0, 1e-15)]
)
def test_gdp_mu_inverts_gdp_epsilon(eps: float, delta: float) -> None:
    mu = gdp_mu(eps, delta)
    assert mu > 0
    assert gdp_delta(eps, mu) <= delta
    assert gdp_delta(eps, mu * (1 + 1e-9)) > delta  # largest such mu, to 1e-9
    if eps > 0:
        assert gdp_epsilon(delta, mu) == pytest.approx(eps, rel=1e-8)


def test_gdp_mu_golden() -> None:
    assert gdp_mu(4.37718, 1e-5) == pytest.approx(1.0, abs=1e-5)


# ---------------------------------------------------------------------------------------------
# tradeoff, RDP, class
# ---------------------------------------------------------------------------------------------


def test_gaussian_tradeoff_values() -> None:
    a = np.array([0.0, 0.05, 0.5, 1.0])
    g = gaussian_tradeoff(a, 1.0)
    assert g[0] == 1.0 and g[-1] == 0.0
    # G_1(0.05) = Phi(1.6449 - 1) = Phi(0.6449) = 0.74049
    assert g[1] == pytest.approx(0.740489, abs=1e-6)
    assert g[2] == pytest.approx(0.158655, abs=1e-6)  # Phi(-1)
    assert np.allclose(gaussian_tradeoff(a, 0.0), 1 - a)
    with pytest.raises(ParameterError):
        gaussian_tradeoff([1.2], 1.0)


def test_gdp_to_rdp() -> None:
    assert np.allclose(gdp_to_rdp(2.0, [2.0, 10.0]), [4.0, 20.0])
    with pytest.raises(ParameterError) as ei:
        gdp_to_rdp(1.0, [1.0])
    assert ei.value.name == "orders"


def test_gaussian_dp_class() -> None:
    g = GaussianDP(3.0).compose(GaussianDP(4.0))
    assert g.mu == 5.0
    assert g.epsilon(1e-5) == gdp_epsilon(1e-5, 5.0)
    assert g.delta(1.0) == gdp_delta(1.0, 5.0)
    assert np.allclose(g.to_rdp([2.0]), [25.0])
    assert np.allclose(g.tradeoff([0.5]), gaussian_tradeoff([0.5], 5.0))
    with pytest.raises(ParameterError):
        GaussianDP(-1.0)
    with pytest.raises(AttributeError):
        g.mu = 1.0  # type: ignore[misc]
    with pytest.raises(ParameterError):
        g.compose(1.0)  # type: ignore[arg-type]
