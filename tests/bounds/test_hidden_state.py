"""Ye-Shokri 2022 hidden-state RDP (the RDP baseline of paper 000): golden values and sanity.

Tolerances: printed values to half a unit of the printed digit; the stored rho to 1e-9 relative
(closed form); epsilons to 1e-6 relative (the RDP -> (eps, delta) minimisation over alpha).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from lastiterate.bounds import Query
from lastiterate.bounds import hidden_state as hs
from lastiterate.bounds import shifted_interpolation as si
from lastiterate.errors import NotApplicable, ParameterError
from lastiterate.run import Run

REFERENCE_FILE = Path(__file__).resolve().parents[1] / "data" / "reference_values.json"
Q = Query(delta=1e-5)


def _vectors(prefix: str) -> list[dict[str, Any]]:
    if not REFERENCE_FILE.exists():
        return []
    return [
        v for v in json.loads(REFERENCE_FILE.read_text())["vectors"] if v["id"].startswith(prefix)
    ]


def mnist_cgd(epochs: int, lam: float = 0.002, **kw: Any) -> Run:
    base: dict[str, Any] = {
        "algorithm": "cgd",
        "n": 60000,
        "batch_size": 1500,
        "epochs": epochs,
        "lr": 0.05,
        "noise_std": 0.01,
        "sensitivity": 10.0,
        "strong_convexity": lam,
        "smoothness": 32.5,
    }
    base.update(kw)
    return Run(**base)


def fig1_gd(T: int, **kw: Any) -> Run:
    base: dict[str, Any] = {
        "algorithm": "gd",
        "n": 1,
        "lr": 0.05,
        "steps": T,
        "noise_std": 10.0,
        "sensitivity": 1.0,
        "strong_convexity": 1.0,
        "smoothness": 10.0,
    }
    base.update(kw)
    return Run(**base)


RDP_VECTORS = [v for v in _vectors("P000-T1-") if v["id"].endswith("RDP")]
FIG1_VECTORS = _vectors("P000-Fig1-")


@pytest.mark.skipif(not RDP_VECTORS, reason=f"reference vectors not found at {REFERENCE_FILE}")
@pytest.mark.parametrize("vec", RDP_VECTORS, ids=[v["id"] for v in RDP_VECTORS])
def test_table1_rdp_column(vec: dict[str, Any]) -> None:
    res = hs.ys22_noisy_cgd(mnist_cgd(vec["inputs_canonical"]["E"]), Q)
    assert abs(res.epsilon - vec["expected_printed"]) <= vec["tolerance"]["abs_vs_printed"]
    assert res.details["rho"] == pytest.approx(vec["recomputed"]["rho"], rel=1e-9)
    assert res.epsilon == pytest.approx(vec["recomputed"]["best"], rel=1e-6)
    assert res.kind == "bound" and res.mu is None and res.rdp is not None
    # the reported curve is linear rho * alpha
    for a, e in res.rdp:
        assert e == pytest.approx(res.details["rho"] * a, rel=1e-12)


@pytest.mark.parametrize("E,printed", [(50, 5.61), (100, 7.00), (200, 8.38)])
def test_table4_rdp_column_lambda_0004(E: int, printed: float) -> None:
    """Paper 000 Table 4, RDP column for lambda = 0.004 (c = 0.9998)."""
    assert abs(hs.ys22_noisy_cgd(mnist_cgd(E, 0.004), Q).epsilon - printed) <= 0.005


@pytest.mark.skipif(not FIG1_VECTORS, reason=f"reference vectors not found at {REFERENCE_FILE}")
@pytest.mark.parametrize("vec", FIG1_VECTORS, ids=[v["id"] for v in FIG1_VECTORS])
def test_fig1_prior_rdp(vec: dict[str, Any]) -> None:
    run = fig1_gd(vec["inputs_canonical"]["T"])
    res = hs.ys22_noisy_gd(run, Q)
    assert res.details["c_ys"] == pytest.approx(0.975, rel=1e-12)
    assert res.epsilon == pytest.approx(
        vec["recomputed"]["eps_prior_rdp_YS22_D6_as_coded"], rel=vec["tolerance"]["rel"]
    )
    # a valid bound can never beat Thm 4.2, which is exact for this setting
    assert res.epsilon >= si.noisy_gd_strongly_convex(run, Q).epsilon


def test_headline() -> None:
    res = hs.ys22_noisy_cgd(mnist_cgd(200), Q)
    assert round(res.epsilon, 2) == 9.88
    assert res.epsilon > si.noisy_cgd_strongly_convex(mnist_cgd(200), Q).epsilon


def test_rdp_never_below_exact_quadratic_renyi() -> None:
    """D.6 reading: rho >= mu_exact^2/2 for the quadratic instance making Thm 4.2
    tight, for every T."""
    for m, eta in ((1.0, 0.05), (0.3, 0.9), (2.0, 0.4)):
        for T in (1, 2, 5, 50, 5000):
            run = Run(
                algorithm="gd",
                n=3,
                lr=eta,
                steps=T,
                noise_std=0.5,
                sensitivity=1.0,
                strong_convexity=m,
                smoothness=m,
            )
            mu = si.noisy_gd_strongly_convex(run, Q).mu
            assert hs.ys22_noisy_gd(run, Q).details["rho"] >= mu**2 / 2 * (1 - 1e-12)


def test_monotone_and_limit() -> None:
    eps = [hs.ys22_noisy_cgd(mnist_cgd(E, 0.004), Q) for E in (1, 2, 10, 100, 1000, 10000)]
    vals = [r.epsilon for r in eps]
    assert vals == sorted(vals)
    assert all(v <= eps[0].details["epsilon_limit"] * (1 + 1e-9) for v in vals)
    assert eps[-1].epsilon == pytest.approx(eps[0].details["epsilon_limit"], rel=1e-3)
    assert eps[0].details["rho"] == pytest.approx(
        (2 / 3) ** 2 / 2, rel=1e-12
    )  # E = 1: one Gaussian step
    gd = [hs.ys22_noisy_gd(fig1_gd(T), Q) for T in (1, 10, 100, 10000)]
    assert [r.epsilon for r in gd] == sorted(r.epsilon for r in gd)
    assert gd[-1].epsilon == pytest.approx(gd[0].details["epsilon_limit"], rel=1e-6)


def test_refusals() -> None:
    with pytest.raises(NotApplicable, match="strong convexity"):
        hs.ys22_noisy_cgd(mnist_cgd(5, 0.0), Q)  # m = 0: c = 1
    with pytest.raises(NotApplicable, match="lr=0.07 >= 2/M"):
        hs.ys22_noisy_cgd(mnist_cgd(5, lr=0.07), Q)
    with pytest.raises(NotApplicable, match="strong-convexity constant m"):
        hs.ys22_noisy_gd(
            Run(
                algorithm="gd",
                n=10,
                lr=0.1,
                steps=5,
                noise_std=1.0,
                sensitivity=1.0,
                contraction=0.9,
            ),
            Q,
        )
    with pytest.raises(
        ParameterError, match="poisson"
    ):  # add/remove re-partitions cgd: refused by Run
        hs.ys22_noisy_cgd(mnist_cgd(5, adjacency="add-remove"), Q)
    with pytest.raises(NotApplicable, match="constant learning rate"):
        hs.ys22_noisy_gd(fig1_gd(3, lr=[0.05, 0.05, 0.04]), Q)


def test_query_by_epsilon() -> None:
    res = hs.ys22_noisy_cgd(mnist_cgd(50), Query(delta=None, epsilon=5.82))
    assert res.epsilon == 5.82 and res.delta == pytest.approx(1e-5, rel=2e-2)
    assert math.isfinite(res.details["delta_limit"]) and res.details["delta_limit"] >= res.delta


def test_single_batch_cycle_with_zero_contraction_is_refused_not_a_crash() -> None:
    """Found by the audit: c = 0 and l = 1 made c**(l-2) divide by zero inside account()."""
    from lastiterate.accountant import account
    from lastiterate.run import Run

    run = Run(
        algorithm="cgd",
        n=1,
        batch_size=1,
        lr=1.0,
        epochs=1,
        noise_std=1.0,
        sensitivity=1.0,
        strong_convexity=1.0,
        smoothness=1.0,
    )
    report = account(run, delta=1e-5)
    refused = {r.bound: r.reason for r in report.not_applicable}
    assert "2 batches" in refused["hidden-state-rdp"]
    assert report.best is not None and report.best.epsilon > 0
