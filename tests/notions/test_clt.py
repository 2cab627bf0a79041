"""Tests for lastiterate.notions.clt (docs/theorems.md 1.7). These are ESTIMATES; the tests check
the formulas and the published numbers, not a privacy guarantee."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import mpmath as mp
import numpy as np
import pytest

from lastiterate.errors import ParameterError
from lastiterate.notions.clt import clt_h, clt_mu_poisson, clt_mu_symmetric
from lastiterate.notions.gdp import gdp_epsilon

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "reference_values.json"


def _vectors() -> list[dict[str, Any]]:
    if not REFERENCE.exists():
        pytest.skip(f"reference vectors not found at {REFERENCE}")
    with REFERENCE.open() as fh:
        return json.load(fh)["vectors"]


def _mp_h(mu: float) -> float:
    with mp.workdps(50):
        m = mp.mpf(mu)
        return float(mp.e ** (m * m) * mp.ncdf(1.5 * m) + 3 * mp.ncdf(-0.5 * m) - 2)


@pytest.mark.parametrize(
    "mu", [1e-8, 1e-4, 0.005, 0.01, 0.02, 0.5, 2.0 / 3.0, 1.0, 3.0, 10.0, 26.0]
)
def test_clt_h_high_precision(mu: float) -> None:
    # the erf form + Taylor series below 0.01 keep full relative accuracy (measured <= 3e-14)
    assert clt_h(mu) == pytest.approx(_mp_h(mu), rel=1e-12)


def test_clt_h_small_mu_and_overflow() -> None:
    assert clt_h(0.0) == 0.0
    assert clt_h(1e-3) == pytest.approx(
        0.5e-6 + 1e-9 / math.sqrt(2 * math.pi), rel=1e-5
    )  # mu^2/2 + mu^3 phi(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert clt_h(27.0) == math.inf
        arr = clt_h(np.array([0.5, 40.0]))
        assert isinstance(arr, np.ndarray) and arr[1] == math.inf and np.isfinite(arr[0])
        assert clt_mu_symmetric(0.1, 40.0, 10) == math.inf
        assert clt_mu_poisson(0.1, 40.0, 10) == math.inf
    assert clt_mu_poisson(0.0, 40.0, 10) == 0.0


def test_clt_formulas_by_hand() -> None:
    # mu_CLT = p sqrt(T (e^{mu^2} - 1)): p = 0.1, mu = 1, T = 100 -> sqrt(e - 1) = 1.310832...
    assert clt_mu_poisson(0.1, 1.0, 100) == pytest.approx(math.sqrt(math.e - 1), rel=1e-15)
    # symmetric: sqrt(2) p sqrt(T) sqrt(h(1)), h(1) = e Phi(1.5) + 3 Phi(-0.5) - 2 = 1.462293643...
    assert clt_mu_symmetric(0.1, 1.0, 100) == pytest.approx(
        math.sqrt(2 * 1.462293643417663), rel=1e-12
    )


def test_paper000_mnist_clt_epsilons() -> None:
    """docs/theorems.md 1.7: p = 0.025, mu = 2/3, T = 2000/4000/8000 -> CLT eps 4.51 / 6.77 / 10.31
    (delta 1e-5)."""
    for T, printed in [(2000, 4.51), (4000, 6.77), (8000, 10.31)]:
        eps = gdp_epsilon(1e-5, clt_mu_symmetric(0.025, 2.0 / 3.0, T))
        assert abs(eps - printed) <= 0.005, (T, eps)


def test_reference_paper004_mu_and_eps() -> None:
    """Paper 004 (BDLS20): mu_CLT via the Poisson CLT with mu = 1/sigma, eps via GDP duality (delta
    = 1e-5)."""
    rows = [v for v in _vectors() if v["id"].startswith("P004-MNIST")]
    assert len(rows) == 27
    for v in rows:
        pn, rc, tol = v["inputs_paper_notation"], v["recomputed"], v["tolerance"]
        mu = clt_mu_poisson(pn["p"], 1.0 / pn["sigma"], pn["T"])
        assert mu == pytest.approx(rc["mu_CLT"], rel=tol["mu_rel"]), v["id"]
        mu_sym = clt_mu_symmetric(pn["p"], 1.0 / pn["sigma"], pn["T"])
        assert mu_sym == pytest.approx(rc["mu_CLT_uniform_symmetric"], rel=tol["mu_rel"]), v["id"]
        eps = gdp_epsilon(pn["delta"], mu)
        assert abs(eps - rc["eps_CLT"]) <= tol["eps_abs"], v["id"]
        printed = v["expected_printed"]
        if printed:
            table = printed["table1_partial"]
            for source in ("confirmed_in_seed_text", "recomputed_only"):
                shown = table[source]
                if "mu_CLT" in shown:
                    assert abs(mu - shown["mu_CLT"]) <= 0.005, v["id"]  # printed to 2 decimals
                if "eps_CLT" in shown:
                    assert abs(eps - shown["eps_CLT"]) <= 0.005, v["id"]


def test_reference_paper004_fig4_caption() -> None:
    rows = [
        v for v in _vectors() if v["quantity"] == "mu_CLT and eps_CLT for reduced noise sigma_tilde"
    ]
    assert len(rows) == 2
    for v in rows:
        pn, tol = v["inputs_paper_notation"], v["tolerance"]
        T = v["inputs_canonical"]["T"]
        mu = clt_mu_poisson(pn["p"], 1.0 / pn["sigma_tilde"], T)
        eps = gdp_epsilon(pn["delta"], mu)
        assert mu == pytest.approx(v["recomputed"]["mu_CLT"], rel=1e-9)
        assert eps == pytest.approx(v["recomputed"]["eps_CLT"], abs=1e-6)
        assert abs(mu - v["expected_printed"]["mu_CLT"]) <= tol["mu_abs"]
        assert abs(eps - v["expected_printed"]["eps"]) <= tol["eps_abs"]


def test_clt_rejects_bad_input() -> None:
    for fn in (clt_mu_poisson, clt_mu_symmetric):
        with pytest.raises(ParameterError) as ei:
            fn(1.5, 1.0, 10)
        assert ei.value.name == "p"
        with pytest.raises(ParameterError) as ei:
            fn(0.1, -1.0, 10)
        assert ei.value.name == "mu"
        with pytest.raises(ParameterError) as ei:
            fn(0.1, 1.0, 0)
        assert ei.value.name == "steps"
    with pytest.raises(ParameterError):
        clt_h(-1.0)
