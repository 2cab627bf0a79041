"""Paper 001 (Chourasia-Ye-Shokri 2021): ``langevin-lsi`` bound, formulas and reference vectors."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

from lastiterate.bounds import Query
from lastiterate.bounds import langevin as lg
from lastiterate.errors import NotApplicable
from lastiterate.run import Run

REF = Path(__file__).resolve().parents[1] / "data" / "reference_values.json"


def _p001_vectors() -> list[dict]:
    if not REF.exists():
        return []
    return [
        v
        for v in json.loads(REF.read_text())["vectors"]
        if str(v.get("paper", "")).startswith("001")
    ]


VECTORS = _p001_vectors()


@pytest.mark.skipif(not REF.exists(), reason=f"reference vectors not found at {REF}")
def test_reference_file_has_paper001_vectors() -> None:
    assert len(VECTORS) == 36


@pytest.mark.parametrize("vec", VECTORS, ids=[v["id"] for v in VECTORS])
def test_reference_vectors_canonical_and_paper_units(vec: dict) -> None:
    c, p, r = vec["inputs_canonical"], vec["inputs_paper_notation"], vec["recomputed"]
    tol = vec["tolerance"]["rel"]
    cor1 = lg.corollary1_rdp(
        c["alpha"], L=c["L"], n=c["n"], m=c["m"], eta=c["eta"], sigma=c["sigma"], T=c["T"]
    )
    base = lg.composition_baseline_rdp(c["alpha"], L=c["L"], n=c["n"], sigma=c["sigma"], T=c["T"])
    assert cor1 == pytest.approx(r["corollary1"], rel=tol)
    assert base == pytest.approx(r["composition_baseline"], rel=tol)
    # the same in the paper's own units (sigma' = 0.02)
    cor1_p = lg.corollary1_rdp_paper(
        p["alpha"],
        S_g=p["S_g"],
        n=p["n"],
        sigma_prime=p["sigma"],
        lam=p["lambda_sc"],
        eta=p["eta"],
        K=p["K"],
    )
    base_p = lg.thm1_rdp_paper(
        p["alpha"], S_g=p["S_g"], n=p["n"], sigma_prime=p["sigma"], eta=p["eta"], K=p["K"]
    )
    assert cor1_p == pytest.approx(r["corollary1"], rel=tol)
    assert base_p == pytest.approx(r["composition_baseline"], rel=tol)
    # the canonical sigma is the paper's sigma' * sqrt(2/eta)
    assert lg.sigma_canonical_from_prime(p["sigma"], p["eta"]) == pytest.approx(
        c["sigma"], rel=1e-12
    )


@pytest.mark.parametrize("vec", VECTORS[::7], ids=[v["id"] for v in VECTORS[::7]])
def test_registered_bound_reports_the_reference_curve(vec: dict) -> None:
    c, r = vec["inputs_canonical"], vec["recomputed"]
    run = Run(
        algorithm="gd",
        n=c["n"],
        lr=c["eta"],
        steps=c["T"],
        noise_std=c["sigma"],
        sensitivity=c["L"],
        strong_convexity=c["m"],
        smoothness=c["M"],
    )
    res = lg.langevin_corollary1(run, Query(delta=1e-5, orders=(float(c["alpha"]),)))
    assert res.bound == "langevin-lsi" and res.kind == "bound"
    assert dict(res.rdp)[float(c["alpha"])] == pytest.approx(r["corollary1"], rel=1e-9)
    assert any("N(0" in a and "initialisation" in a for a in res.assumptions)


def test_thm2_with_lemma5_constant_is_corollary1() -> None:
    sp, lam = 0.03, 1.7
    c = lg.lemma5_lsi_constant(sp, lam)
    assert c == pytest.approx(2 * sp**2 / lam)
    for K in (1, 10, 1000):
        a = lg.thm2_rdp_paper(7.0, c_lsi=c, S_g=3.0, n=100, sigma_prime=sp, eta=0.05, K=K)
        b = lg.corollary1_rdp_paper(7.0, S_g=3.0, n=100, sigma_prime=sp, lam=lam, eta=0.05, K=K)
        assert a == pytest.approx(b, rel=1e-12)


# ------------------------------------------------------------------ quadratic loss: exact vs bounds
@pytest.mark.parametrize("eta", [0.01, 0.1, 0.5, 0.9])
def test_exact_gaussian_value_below_corollary2_and_corollary1(eta: float) -> None:
    kw = {"S_g": 2.0, "n": 50, "sigma_prime": 0.3, "eta": eta}
    for K in (1, 2, 5, 10, 100, 1000, 10**5):
        exact = lg.quadratic_exact_rdp_paper(3.0, K=K, **kw)
        lower = lg.thm3_lower_rdp_paper(3.0, K=K, **kw)
        cor2 = lg.corollary2_rdp_paper(3.0, K=K, **kw)
        cor1 = lg.corollary1_rdp_paper(3.0, lam=1.0, K=K, **kw)
        assert lower <= exact * (1 + 1e-12)
        assert exact <= cor2 * (1 + 1e-12)
        assert exact <= cor1 * (1 + 1e-12)


def test_ratios_quoted_in_theorems_md() -> None:
    """Cor 1 / Thm 3 -> 4 and Cor 2 / Thm 3 -> 4/(2 - eta) ~ 2 as K -> infinity (lambda = 1)."""
    eta = 0.01
    kw = {"S_g": 2.0, "n": 50, "sigma_prime": 0.3, "eta": eta, "K": 10**7}
    lower = lg.thm3_lower_rdp_paper(5.0, **kw)
    assert lg.corollary1_rdp_paper(5.0, lam=1.0, **kw) / lower == pytest.approx(4.0, rel=1e-9)
    assert lg.corollary2_rdp_paper(5.0, **kw) / lower == pytest.approx(4.0 / (2.0 - eta), rel=1e-9)
    assert 4.0 / (2.0 - eta) == pytest.approx(2.0, rel=0.01)


def test_corollary2_scaling_to_lambda_matches_exact_scaled_problem() -> None:
    """(lam/2)||theta - x||^2 with step eta is the lam = 1 problem with step eta*lam,
    noise sigma'^2/lam, sensitivity S_g/lam; the exact value must stay below the
    generalised Corollary 2."""
    lam, eta, sp, S, n = 3.0, 0.1, 0.2, 6.0, 40
    for K in (1, 10, 100, 10000):
        exact = lg.quadratic_exact_rdp_paper(
            2.0, S_g=S / lam, n=n, sigma_prime=sp / math.sqrt(lam), eta=eta * lam, K=K
        )
        cor2 = lg.corollary2_rdp_paper(2.0, S_g=S, n=n, sigma_prime=sp, eta=eta, K=K, lam=lam)
        assert exact <= cor2 * (1 + 1e-12)


def test_registered_corollary2_for_m_equal_M() -> None:
    run = Run(
        algorithm="gd",
        n=100,
        lr=0.1,
        steps=1000,
        noise_std=0.5,
        sensitivity=2.0,
        strong_convexity=1.0,
        smoothness=1.0,
    )
    q = Query(delta=1e-5, orders=(4.0,))
    r2 = lg.langevin_corollary2(run, q)
    r1 = lg.langevin_corollary1(run, q)
    assert r2.epsilon <= r1.epsilon
    sp = lg.sigma_prime_from_canonical(0.5, 0.1)
    exact = lg.quadratic_exact_rdp_paper(4.0, S_g=2.0, n=100, sigma_prime=sp, eta=0.1, K=1000)
    assert exact <= dict(r2.rdp)[4.0] * (1 + 1e-12)
    with pytest.raises(NotApplicable, match="m = M"):
        lg.langevin_corollary2(run.replace(strong_convexity=0.5), q)
    with pytest.raises(NotApplicable, match="unconstrained"):
        lg.langevin_corollary2(run.replace(diameter=1.0), q)


# ------------------------------------------------------------------ refusals
def _run(**kw) -> Run:
    base = {
        "algorithm": "gd",
        "n": 1000,
        "lr": 0.1,
        "steps": 100,
        "noise_std": 1.0,
        "sensitivity": 2.0,
        "strong_convexity": 1.0,
        "smoothness": 2.0,
    }
    base.update(kw)
    return Run(**base)


def test_refusals_with_reasons() -> None:
    q = Query()
    with pytest.raises(NotApplicable, match="full-batch gd"):
        lg.langevin_corollary1(_run(algorithm="sgd", batch_size=10, sampling="poisson"), q)
    with pytest.raises(NotApplicable, match="full-batch gd"):
        lg.langevin_corollary1(_run(algorithm="cgd", batch_size=10), q)
    with pytest.raises(NotApplicable, match="strong convexity"):
        lg.langevin_corollary1(_run(strong_convexity=None, convex=True), q)
    with pytest.raises(NotApplicable, match="smoothness"):
        lg.langevin_corollary1(_run(smoothness=None), q)
    with pytest.raises(NotApplicable, match=r"lr=0.5 >= 1/M=0.5"):
        lg.langevin_corollary1(_run(lr=0.5), q)
    with pytest.raises(NotApplicable, match="constant learning rate"):
        lg.langevin_corollary1(_run(lr=[0.1] * 99 + [0.05]), q)


# ------------------------------------------------------------------ plateau and monotonicity
def test_plateau_in_T_and_epsilon_limit() -> None:
    q = Query(delta=1e-5)
    eps = [lg.langevin_corollary1(_run(steps=T), q) for T in (10, 100, 1000, 10**5, 10**7)]
    vals = [r.epsilon for r in eps]
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(vals))
    assert vals[-1] == pytest.approx(vals[-2], rel=1e-6)
    for r in eps:
        assert r.details["epsilon_limit"] >= r.epsilon - 1e-12
    assert eps[-1].details["epsilon_limit"] == pytest.approx(vals[-1], rel=1e-6)


def test_monotone_in_sigma_and_m() -> None:
    q = Query(delta=1e-5)
    by_sigma = [lg.langevin_corollary1(_run(noise_std=s), q).epsilon for s in (0.5, 1.0, 2.0, 4.0)]
    assert all(a > b for a, b in itertools.pairwise(by_sigma))
    by_m = [
        lg.langevin_corollary1(_run(strong_convexity=m, steps=10**6), q).epsilon
        for m in (0.25, 0.5, 1.0, 2.0)
    ]
    assert all(a > b for a, b in itertools.pairwise(by_m))
