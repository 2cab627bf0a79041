"""Shifted interpolation (paper 000, Bok-Su-Altschuler 2024): golden values, exact cases, refusals.

Tolerances:
* printed paper values: half a unit of the last printed digit (``abs_vs_printed`` of the JSON);
* recomputed closed forms: the JSON's relative tolerance (1e-9 for mu; eps via the exact GDP
  inverse agrees with the stored analytic value to ~1e-9, we allow 1e-8);
* exactly solvable quadratic instances: 1e-10 relative (pure floating point of two formulas);
* numerical PLD values: the engine is pessimistic at grid width 1e-4 (about 1e-4 absolute in eps).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lastiterate.bounds import Query
from lastiterate.bounds import hidden_state as hs
from lastiterate.bounds import shifted_interpolation as si
from lastiterate.errors import NotApplicable, ParameterError
from lastiterate.notions.gdp import gdp_epsilon
from lastiterate.run import Run

REFERENCE_DIR = Path(__file__).resolve().parents[1] / "data"
REFERENCE_FILE = REFERENCE_DIR / "reference_values.json"
Q = Query(delta=1e-5)


def _paper000_vectors() -> list[dict[str, Any]]:
    if not REFERENCE_FILE.exists():
        return []
    data = json.loads(REFERENCE_FILE.read_text())
    return [v for v in data["vectors"] if v["id"].startswith("P000")]


VECTORS = _paper000_vectors()


# ----------------------------------------------------------------------------- run builders
def mnist_cgd(epochs: int, lam: float = 0.002, **kw: Any) -> Run:
    """Paper 000 Sec. 4.4: n=60000, b=1500 (l=40), eta=0.05, L/(b sigma)=2/3, c=1-eta*lambda."""
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


def gd_sc(T: int, c: float, step_mu: float = 0.1, **kw: Any) -> Run:
    """NoisyGD with L/(n sigma)=step_mu and c = 1 - m (eta = 1, M = 1 so |1 - eta M| = 0)."""
    base: dict[str, Any] = {
        "algorithm": "gd",
        "n": 1,
        "lr": 1.0,
        "steps": T,
        "noise_std": 1.0 / step_mu,
        "sensitivity": 1.0,
        "strong_convexity": 1 - c,
        "smoothness": 1.0,
    }
    base.update(kw)
    return Run(**base)


def gd_bounded(
    T: int, L_over_n: float, eta: float, sigma: float = 8.0, D: float = 1.0, **kw: Any
) -> Run:
    base: dict[str, Any] = {
        "algorithm": "gd",
        "n": 1,
        "lr": eta,
        "steps": T,
        "noise_std": sigma,
        "sensitivity": L_over_n,
        "convex": True,
        "smoothness": 1.0,
        "diameter": D,
    }
    base.update(kw)
    return Run(**base)


def cgd_bounded(
    E: int, l: int, L_over_b: float, eta: float, sigma: float = 3.0, D: float = 1.0
) -> Run:
    b = 100
    return Run(
        algorithm="cgd",
        n=b * l,
        batch_size=b,
        epochs=E,
        lr=eta,
        noise_std=sigma,
        sensitivity=L_over_b * b,
        convex=True,
        smoothness=1.0,
        diameter=D,
    )


def sgd_run(T: int, **kw: Any) -> Run:
    base: dict[str, Any] = {
        "algorithm": "sgd",
        "n": 1000,
        "batch_size": 100,
        "steps": T,
        "lr": 0.5,
        "noise_std": 0.1,
        "sensitivity": 2.0,
        "convex": True,
        "smoothness": 1.0,
        "diameter": 1.0,
        "sampling": "uniform",
    }
    base.update(kw)
    return Run(**base)


# ----------------------------------------------------------------------------- reference vectors
def _check_printed(value: float, vec: dict[str, Any], printed: float | None = None) -> None:
    p = vec["expected_printed"] if printed is None else printed
    assert abs(value - p) <= vec["tolerance"]["abs_vs_printed"] + 1e-12, (vec["id"], value, p)


def _vector_T7(vec: dict[str, Any]) -> None:
    ic = vec["inputs_canonical"]
    if vec["id"].endswith("composition"):
        # Thm 4.1: mu = (L/(n sigma)) sqrt(T); read from our Thm 4.2 result (any c)
        res = si.noisy_gd_strongly_convex(gd_sc(ic["T"], 0.9, ic["L_over_n_sigma"]), Q)
        mu = res.details["composition_mu"]
    else:
        ex = ic["example_instance"]
        run = Run(
            algorithm="gd",
            n=ex["n"],
            lr=ex["eta"],
            steps=ic["T"],
            noise_std=ex["sigma"],
            sensitivity=ex["L"],
            strong_convexity=ex["m"],
            smoothness=ex["M"],
        )
        assert run.c == pytest.approx(ic["c"], rel=1e-12)
        mu = si.noisy_gd_strongly_convex(run, Q).mu
    _check_printed(mu, vec)
    # the JSON stores 10 significant digits, so its 1e-12 for composition rows is below its rounding
    assert mu == pytest.approx(
        vec["recomputed"], rel=max(vec["tolerance"]["rel_vs_recomputed"], 1e-9)
    )


def _vector_T8(vec: dict[str, Any]) -> None:
    ic = vec["inputs_canonical"]
    exp, rec = vec["expected_printed"], vec["recomputed"]
    run = gd_bounded(10 * rec["Tbar"], ic["L_over_n"], ic["eta"], ic["sigma"], ic["D"])
    res = si.noisy_gd_bounded_convex(run, Q)
    d = res.details
    assert d["crossover_steps"] == exp["T_star"] == rec["T_star"]
    assert d["T_bar"] == rec["Tbar"]
    assert abs(d["mu_limit"] - exp["mu_star"]) <= vec["tolerance"]["mu_star_abs"]
    assert d["mu_limit"] == pytest.approx(rec["mu_star"], rel=1e-9)
    assert d["mu_star"] == pytest.approx(rec["mu_star"], rel=1e-9)
    # past T-bar the reported bound IS the T-independent optimum
    assert res.mu == pytest.approx(rec["mu_star"], rel=1e-9)


def _vector_T1(vec: dict[str, Any]) -> None:
    ic = vec["inputs_canonical"]
    run = mnist_cgd(ic["E"])
    assert run.c == pytest.approx(ic["c"], rel=1e-12)
    assert run.per_step_mu == pytest.approx(ic["L_over_b_sigma"], rel=1e-12)
    rec = vec["recomputed"]
    if vec["id"].endswith("GDPcomp"):
        res = si.noisy_cgd_strongly_convex(run, Q)
        eps = gdp_epsilon(1e-5, res.details["composition_mu"])
        _check_printed(eps, vec)
        assert eps == pytest.approx(rec["analytic_exact"], rel=1e-8)
    elif vec["id"].endswith("RDP"):
        res = hs.ys22_noisy_cgd(run, Q)
        _check_printed(res.epsilon, vec)
        assert res.details["rho"] == pytest.approx(rec["rho"], rel=1e-9)
        assert res.epsilon == pytest.approx(rec["best"], rel=1e-6)
    else:
        res = si.noisy_cgd_strongly_convex(run, Q)
        _check_printed(res.epsilon, vec)
        assert res.mu == pytest.approx(rec["mu"], rel=1e-9)
        assert res.epsilon == pytest.approx(rec["analytic_exact"], rel=1e-8)


def _vector_Fig1(vec: dict[str, Any]) -> None:
    from lastiterate.notions.rdp import rdp_to_epsilon

    ic = vec["inputs_canonical"]
    rec, rel = vec["recomputed"], vec["tolerance"]["rel"]
    # Appendix D.1: m = 1, M = 10, eta = 0.05 (c = 0.95), L/(n sigma) = 0.1
    run = Run(
        algorithm="gd",
        n=1,
        lr=0.05,
        steps=ic["T"],
        noise_std=10.0,
        sensitivity=1.0,
        strong_convexity=1.0,
        smoothness=10.0,
    )
    assert run.c == pytest.approx(ic["c"], rel=1e-12)
    res = si.noisy_gd_strongly_convex(run, Q)
    assert res.mu == pytest.approx(rec["mu_thm42"], rel=rel)
    assert res.epsilon == pytest.approx(rec["eps_fdp_exact"], rel=rel)
    ours_rdp = rdp_to_epsilon(lambda a: a * res.mu**2 / 2, 1e-5).epsilon  # Lemma A.4 then 1.5
    assert ours_rdp == pytest.approx(rec["eps_our_rdp"], rel=rel)
    assert gdp_epsilon(1e-5, res.details["composition_mu"]) == pytest.approx(
        rec["eps_composition"], rel=rel
    )
    prior = hs.ys22_noisy_gd(run, Q)
    assert prior.epsilon == pytest.approx(rec["eps_prior_rdp_YS22_D6_as_coded"], rel=rel)


def _vector_T2(vec: dict[str, Any]) -> None:
    assert vec["recomputed"] is None and vec["tolerance"] is None
    pytest.skip("Table 2 is empirical test/train accuracy (training runs), not a privacy quantity")


HANDLERS = {
    "P000-T7-": _vector_T7,
    "P000-T8-": _vector_T8,
    "P000-T1-": _vector_T1,
    "P000-Fig1-": _vector_Fig1,
    "P000-T2-": _vector_T2,
}


@pytest.mark.skipif(not VECTORS, reason=f"reference vectors not found at {REFERENCE_FILE}")
@pytest.mark.parametrize("vec", VECTORS, ids=[v["id"] for v in VECTORS])
def test_paper000_reference_vector(vec: dict[str, Any]) -> None:
    for prefix, handler in HANDLERS.items():
        if vec["id"].startswith(prefix):
            handler(vec)
            return
    raise AssertionError(f"no check for paper-000 vector {vec['id']}: every vector must be covered")


# ----------------------------------------------------------------------------- headline
def test_headline_mnist_noisy_cgd() -> None:
    run = mnist_cgd(200)
    res = si.noisy_cgd_strongly_convex(run, Q)
    assert round(res.mu, 3) == 1.593 and round(res.epsilon, 2) == 7.58
    from lastiterate.accountant import account

    rep = account(run, delta=1e-5, bounds=["shifted-interpolation", "hidden-state-rdp"])
    ours, ys = rep.result("shifted-interpolation"), rep.result("hidden-state-rdp")
    assert ours is not None and ys is not None
    assert round(ours.mu, 3) == 1.593 and round(ours.epsilon, 2) == 7.58
    assert round(ys.epsilon, 2) == 9.88
    assert rep.best is ours


# ----------------------------------------------------------------------------- closed forms
@pytest.mark.parametrize("l,c", [(10, 0.98), (20, 0.99), (40, 0.995), (40, 0.9999)])
def test_thm45_equals_engine_with_zero_start(l: int, c: float) -> None:
    """Thm 4.5 = s^2 + R^2/W for the window of E-1 epochs from the common start (z = 0)."""
    for E in (2, 5, 50):
        eng = float(np.sqrt(0.2**2 + si.shift_window_mu(0.2, c, 0.0, l * (E - 1), period=l) ** 2))
        assert eng == pytest.approx(si.thm45_mu(0.2, c, l, E), rel=1e-10)


def test_thm42_is_engine_window_from_start() -> None:
    for c in (0.0, 0.5, 0.92, 0.9999):
        for T in (1, 7, 1000):
            eng = float(si.shift_window_mu(0.1, c, 0.0, T))
            assert eng == pytest.approx(si.thm42_mu(0.1, c, T), rel=1e-10)


@pytest.mark.parametrize("period", [1, 3, 10])
@pytest.mark.parametrize("c", [1.0, 0.999, 0.95, 0.6])
@pytest.mark.parametrize("z0", [0.0, 0.3, 5.0])
def test_back_loaded_shifts_are_feasible(period: int, c: float, z0: float) -> None:
    """The proof in the module docstring: shifts a_j ~ c^{N-j} keep every z_j >= 0 when the mass s
    arrives at the first step of each block, and reach z_N = 0 with sum a^2 = R^2/W."""
    s = 0.7
    for blocks in (1, 2, 7, 40):
        N = period * blocks
        j = np.arange(1, N + 1)
        mass = np.where((j - 1) % period == 0, s, 0.0)
        R = c**N * z0 + float(np.sum(c ** (N - j) * mass))
        W = float(np.sum(c ** (2 * (N - j))))
        a = R * c ** (N - j) / W
        z, zs = z0, []
        for k in range(N):
            z = c * z + mass[k] - a[k]
            zs.append(z)
        assert min(zs[:-1], default=0.0) >= -1e-12
        assert abs(zs[-1]) <= 1e-9 * max(1.0, R)
        assert float(np.sum(a**2)) == pytest.approx(R * R / W, rel=1e-10)
        assert float(si.shift_window_mu(s, c, z0, N, period=period)) == pytest.approx(
            math.sqrt(R * R / W), rel=1e-10
        )


# -----------------------------------------------------------------------------
# exact quadratic cases
def _quadratic_exact_mu(
    n: int, b: int, T: int, eta: float, m: float, sigma: float, L: float, position: int
) -> float:
    """NoisyGD/CGD on f_i(x) = (m/2)(x - z_i)^2 in 1-D, batches = consecutive blocks of size b in a
    fixed order; the two datasets differ in z at index ``position`` with m |z - z'| = L.  Both last
    iterates are Gaussian with the same variance: brute-force mean and variance recursions."""
    rng = np.random.default_rng(position)
    z = rng.normal(size=n)
    z2 = z.copy()
    z2[position] += L / m
    l = n // b
    mean1 = mean2 = 0.0
    var = 0.0
    for t in range(T):
        batch = slice((t % l) * b, (t % l) * b + b)
        mean1 = mean1 - eta * m * (mean1 - z[batch].mean())
        mean2 = mean2 - eta * m * (mean2 - z2[batch].mean())
        var = (1 - eta * m) ** 2 * var + (eta * sigma) ** 2
    return abs(mean1 - mean2) / math.sqrt(var)


@pytest.mark.parametrize(
    "m,eta,T,n",
    [
        (0.5, 0.3, 1, 5),
        (0.5, 0.3, 17, 5),
        (0.08, 1.0, 100, 3),
        (2.0, 0.1, 400, 1),
        (1.0, 0.05, 60, 10),
    ],
)
def test_thm42_exact_on_quadratics(m: float, eta: float, T: int, n: int) -> None:
    sigma, L = 0.7, 1.3
    run = Run(
        algorithm="gd",
        n=n,
        lr=eta,
        steps=T,
        noise_std=sigma,
        sensitivity=L,
        strong_convexity=m,
        smoothness=m,
    )
    bound = si.noisy_gd_strongly_convex(run, Q).mu
    exact = _quadratic_exact_mu(n, n, T, eta, m, sigma, L, position=n - 1)
    assert bound == pytest.approx(exact, rel=1e-10)


@pytest.mark.parametrize(
    "m,eta,l,E", [(0.5, 0.3, 4, 1), (0.5, 0.3, 4, 6), (0.1, 0.5, 5, 20), (1.0, 0.9, 3, 9)]
)
def test_thm45_dominates_exact_cgd_on_quadratics_every_position(
    m: float, eta: float, l: int, E: int
) -> None:
    b, sigma, L = 2, 0.5, 1.0
    n = b * l
    run = Run(
        algorithm="cgd",
        n=n,
        batch_size=b,
        epochs=E,
        lr=eta,
        noise_std=sigma,
        sensitivity=L,
        strong_convexity=m,
        smoothness=m,
    )
    bound = si.noisy_cgd_strongly_convex(run, Q).mu
    exacts = [_quadratic_exact_mu(n, b, l * E, eta, m, sigma, L, position=i) for i in range(n)]
    assert max(exacts) <= bound * (1 + 1e-12)
    assert max(exacts) >= 0.3 * bound  # and not vacuous
    # and the hidden-state RDP never goes below the exact Renyi curve (alpha * mu^2 / 2)
    ys = hs.ys22_noisy_cgd(run, Q)
    assert ys.details["rho"] >= max(exacts) ** 2 / 2 * (1 - 1e-12)


# ----------------------------------------------------------------------------- refusals
def test_refusals_with_reasons() -> None:
    with pytest.raises(NotApplicable, match=r"lr=0.07 >= 2/M=0.0615"):
        si.noisy_cgd_strongly_convex(mnist_cgd(50, lr=0.07), Q)
    plain = Run(algorithm="gd", n=100, lr=0.1, steps=10, noise_std=1.0, sensitivity=1.0)
    for f in (si.noisy_gd_strongly_convex, si.noisy_gd_bounded_convex):
        with pytest.raises(
            NotApplicable, match=r"no strong convexity or \(convexity \+ diameter\) declared"
        ):
            f(plain, Q)
    with pytest.raises(NotApplicable, match="bounded domain"):
        si.noisy_gd_bounded_convex(plain.replace(convex=True, smoothness=1.0), Q)
    with pytest.raises(NotApplicable, match="strong convexity"):
        si.noisy_gd_strongly_convex(plain.replace(convex=True, smoothness=1.0), Q)
    for sampling in ("poisson", "shuffle"):
        for f in (si.noisy_sgd_bounded_convex, si.noisy_sgd_bounded_convex_clt):
            with pytest.raises(
                NotApplicable,
                match=f"sampling={sampling}: Thms 4.9/4.10 assume uniform fixed-size batches",
            ):
                f(sgd_run(100, sampling=sampling), Q)
    schedule = [0.05] * 39 + [0.04]
    with pytest.raises(NotApplicable, match="constant learning rate"):
        si.noisy_cgd_strongly_convex(mnist_cgd(1, lr=schedule), Q)
    with pytest.raises(
        ParameterError, match="poisson"
    ):  # add/remove re-partitions cgd: refused by Run
        si.noisy_cgd_strongly_convex(mnist_cgd(5, adjacency="add-remove"), Q)


def test_no_geometry_gives_no_shifted_interpolation_result() -> None:
    from lastiterate.accountant import account

    rep = account(
        Run(
            algorithm="cgd",
            n=1000,
            batch_size=100,
            epochs=3,
            lr=0.1,
            noise_std=0.1,
            sensitivity=1.0,
        ),
        bounds=["shifted-interpolation"],
    )
    assert rep.result("shifted-interpolation") is None
    assert any(r.bound == "shifted-interpolation" and r.reason for r in rep.not_applicable)


# ----------------------------------------------------------------------------- monotone,
# plateau, <= composition
def _check_path(values: list[float], limit: float) -> None:
    assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(values)), values
    assert max(values) <= limit * (1 + 1e-12)


def test_gd_monotone_plateau_and_below_composition() -> None:
    Ts = [1, 2, 3, 5, 10, 19, 20, 21, 40, 79, 80, 81, 200, 1000, 5000]
    for f, mk in (
        (si.noisy_gd_strongly_convex, lambda T: gd_sc(T, 0.96)),
        (si.noisy_gd_bounded_convex, lambda T: gd_bounded(T, 0.25, 0.2)),
        (si.noisy_gd_strongly_convex_bounded, lambda T: gd_sc(T, 0.995, 0.1, diameter=3.0)),
    ):
        res = [f(mk(T), Q) for T in Ts]
        mus = [r.mu for r in res]
        _check_path(mus, res[0].details["mu_limit"])
        _check_path([r.epsilon for r in res], res[0].details["epsilon_limit"])
        for r in res:
            assert r.mu <= r.details["composition_mu"] * (1 + 1e-12)
    # T = 1: a single Gaussian step of mu = L/(n sigma)
    assert si.noisy_gd_strongly_convex(gd_sc(1, 0.9), Q).mu == pytest.approx(0.1, rel=1e-12)
    assert si.noisy_gd_bounded_convex(gd_bounded(1, 0.25, 0.2), Q).mu == pytest.approx(
        0.25 / 8, rel=1e-12
    )
    # bounded domain: composition until it reaches mu* at T* = 80 (Table 8), then constant
    path = [
        si.noisy_gd_bounded_convex(gd_bounded(T, 0.25, 0.2), Q).mu
        for T in (20, 79, 80, 81, 500, 10**6)
    ]
    assert path[0] == pytest.approx(0.25 / 8 * math.sqrt(20), rel=1e-12) and path[1] < path[2]
    assert path[2] == pytest.approx(0.2795084971874737, rel=1e-12)
    assert path[2] == pytest.approx(path[3], rel=1e-12) and path[3] == path[4] == path[5]


def test_cgd_monotone_plateau_and_below_composition() -> None:
    Es = [1, 2, 3, 4, 5, 10, 25, 26, 27, 60, 200]
    for f, mk in (
        (si.noisy_cgd_strongly_convex, lambda E: mnist_cgd(E, 0.004)),
        (si.noisy_cgd_bounded_convex, lambda E: cgd_bounded(E, 40, 1.0, 0.04)),
        (si.noisy_cgd_strongly_convex_bounded, lambda E: mnist_cgd(E, 0.002, diameter=1.0)),
    ):
        res = [f(mk(E), Q) for E in Es]
        _check_path([r.mu for r in res], res[0].details["mu_limit"])
        _check_path([r.epsilon for r in res], res[0].details["epsilon_limit"])
        for r in res:
            assert r.mu <= r.details["composition_mu"] * (1 + 1e-12)
        assert res[0].mu == pytest.approx(
            res[0].details["per_step_mu"], rel=1e-12
        )  # E = 1: one Gaussian step
    # Table 12 cell (l=40, L/b=1, eta=0.04, mu* = 0.624 with window k = 25): the common-start window
    # (Lemma C.10 at c = 1) is smaller until it meets mu* at E = 1 + 40 (mu*^2/mu_step^2 - 1) = 101
    vals = [
        si.noisy_cgd_bounded_convex(cgd_bounded(E, 40, 1.0, 0.04), Q).mu
        for E in (26, 100, 101, 102, 1000)
    ]
    assert vals[0] < vals[1] < vals[2]
    assert vals[2] == pytest.approx(0.6236095644623235, rel=1e-12)
    assert vals[2] == pytest.approx(vals[3], rel=1e-12) and vals[3] == vals[4]


def test_combined_is_at_most_each_single_theorem() -> None:
    for E in (1, 3, 30, 300):
        run = mnist_cgd(E, 0.002, diameter=2.0)
        both = si.noisy_cgd_strongly_convex_bounded(run, Q).mu
        assert both <= min(
            si.noisy_cgd_strongly_convex(run, Q).mu, si.noisy_cgd_bounded_convex(run, Q).mu
        ) * (1 + 1e-12)
    for T in (1, 10, 300, 3000):
        run = gd_sc(T, 0.999, 0.1, diameter=2.0, lr=1.0)
        both = si.noisy_gd_strongly_convex_bounded(run, Q).mu
        assert both <= min(
            si.noisy_gd_strongly_convex(run, Q).mu, si.noisy_gd_bounded_convex(run, Q).mu
        ) * (1 + 1e-12)


def test_tables_10_12_crossover_is_self_consistent() -> None:
    """docs/theorems.md 2.3: the printed E* are not the crossing with Thm 4.4; ours for l = 10 are
    41/81/161, 21/41/81, 11/21/41 (rows L/b = 0.25, 0.5, 1; columns eta = 0.04, 0.02, 0.01)."""
    want = [[41, 81, 161], [21, 41, 81], [11, 21, 41]]
    for i, Lb in enumerate((0.25, 0.5, 1.0)):
        for j, eta in enumerate((0.04, 0.02, 0.01)):
            d = si.noisy_cgd_bounded_convex(cgd_bounded(5, 10, Lb, eta), Q).details
            assert d["crossover_epoch"] == want[i][j]
            E = d["crossover_epoch"]
            assert (
                d["per_step_mu"] * math.sqrt(E)
                >= d["mu_limit"]
                > d["per_step_mu"] * math.sqrt(E - 1)
            )


def test_query_by_epsilon_reports_delta() -> None:
    q = Query(delta=None, epsilon=2.0)
    res = si.noisy_cgd_strongly_convex(mnist_cgd(50), q)
    assert res.epsilon == 2.0 and 0 < res.delta < 1
    assert res.details["delta_limit"] >= res.delta


# ----------------------------------------------------------------------------- NoisySGD
def test_lemma_c12_factor() -> None:
    """theta = 1/2 reproduces Thm 4.10's 2 sqrt(2) L/(b sigma) and sqrt(2)
    D/(eta sigma sqrt(nu))."""
    assert si.lemma_c12_mu(0.5, 0.5) == pytest.approx(2 * math.sqrt(2) * 0.5, rel=1e-15)
    assert si.lemma_c12_mu(0.5, 0.9) == pytest.approx(2 * 0.5 * math.sqrt(10 / 9), rel=1e-15)
    assert si.thm49_gaussian_mu(0.5, 0.9, 0.5, 3, 7) == pytest.approx(
        2 * math.sqrt(2) * 0.5 * 0.9**3 * (1 - 0.9**7) / 0.1, rel=1e-12
    )


def test_sgd_bounded_value_is_the_stated_composition() -> None:
    """The reported epsilon is the PLD epsilon of C_p(G_a)^{⊗nu} ⊗ G_g at the reported window."""
    from lastiterate.notions import pld

    res = si.noisy_sgd_bounded_convex(sgd_run(20000), Q)
    d = res.details
    assert d["chosen"] == "window" and d["tau"] == 20000 - d["window_steps"]
    theta, nu = d["theta"], d["window_steps"]
    a = 2 * 0.2 / math.sqrt(theta)  # L/(b sigma) = 2/(100*0.1) = 0.2
    g = 1.0 / (0.5 * 0.1) / math.sqrt((1 - theta) * nu)
    assert d["subsampled_mu"] == pytest.approx(a, rel=1e-12) and d["gaussian_mu"] == pytest.approx(
        g, rel=1e-12
    )
    grid = d["discretization"]  # (a long window's reported value is on a multiple of 1e-4)
    direct = (
        pld.symmetric_subsampled_gaussian_pld(0.1, a, discretization=grid)
        .self_compose(nu)
        .compose(pld.gaussian_pld(g, discretization=grid))
        .epsilon(1e-5)
    )
    # same grid; the composer's FFT window truncation (<= 1e-15 tail mass) differs (~1e-10
    # relative), and the accountant composes for delta = 1e-5 (FFT errors below 1e-9 are added,
    # not chased with extra tilted passes): never below the fully tilted value, ~3e-7 above it
    assert direct * (1 - 1e-9) <= res.epsilon <= direct * (1 + 1e-6)
    assert res.epsilon < d["composition_epsilon"]
    assert res.epsilon <= d["epsilon_limit"]


@pytest.mark.slow  # ~45 s (certified PLD engine); CI: tests/test_registry_contract.py
def test_sgd_monotone_plateau_and_single_step() -> None:
    from lastiterate.notions.pld import symmetric_subsampled_gaussian_pld

    Ts = [1, 10, 100, 1000, 10000, 100000]
    for f, kw in (
        (si.noisy_sgd_bounded_convex, {}),
        (
            si.noisy_sgd_strongly_convex,
            {"convex": False, "diameter": None, "strong_convexity": 0.1},
        ),
    ):
        res = [f(sgd_run(T, **kw), Q) for T in Ts]
        eps = [r.epsilon for r in res]
        assert all(b >= a - 2e-3 for a, b in itertools.pairwise(eps)), eps  # PLD grids: ~1e-4 noise
        lim = res[-1].details["epsilon_limit"]
        assert max(eps) <= lim + 1e-9
        assert res[-1].details["chosen"] == "window" and res[-2].epsilon == pytest.approx(
            res[-1].epsilon, abs=2e-3
        )
        for r in res:
            assert r.epsilon <= r.details["composition_epsilon"] + 1e-9
        # T = 1: one subsampled Gaussian step C_p(G_{L/(b sigma)})
        one = symmetric_subsampled_gaussian_pld(0.1, 0.2).epsilon(1e-5)
        assert res[0].epsilon == pytest.approx(one, rel=1e-12)


def test_sgd_single_step_matches_exact_subsampled_profile() -> None:
    """T = 1: delta(eps) = p delta_G(log(1 + (e^eps - 1)/p); mu) (docs/theorems.md 1.6) at
    the reported eps."""
    from lastiterate.notions.gdp import gdp_delta

    res = si.noisy_sgd_bounded_convex(sgd_run(1), Q)
    e = res.epsilon
    exact_delta = 0.1 * gdp_delta(math.log1p(math.expm1(e) / 0.1), 0.2)
    assert exact_delta <= 1e-5 * (1 + 1e-9)  # the PLD epsilon is valid (never below the exact one)
    assert exact_delta >= 1e-5 * 0.97  # and tight to the grid


def test_sgd_account_call_answers() -> None:
    """(Its speed is a target of benchmarks/accountant.py, never of a timed unit test.)"""
    from lastiterate.accountant import account

    run = sgd_run(30000, strong_convexity=0.1)
    rep = account(run.replace(noise_std=0.11), delta=1e-5, bounds=["shifted-interpolation"])
    assert rep.result("shifted-interpolation") is not None


def test_sgd_clt_versions_are_estimates() -> None:
    run = sgd_run(100000, strong_convexity=0.1)
    for f in (si.noisy_sgd_bounded_convex_clt, si.noisy_sgd_strongly_convex_clt):
        r = f(run, Q)
        assert r.kind == "estimate" and r.mu is not None
    c15 = si.noisy_sgd_bounded_convex_clt(run, Q)
    assert c15.mu == pytest.approx(
        c15.details["mu_closed_form"], rel=1e-3
    )  # integer vs real optimum
    c14 = si.noisy_sgd_strongly_convex_clt(run, Q)
    assert c14.details["mu_limit"] == pytest.approx(c14.details["mu_closed_form"], rel=2e-2)


def test_sgd_strongly_convex_reading_is_conservative() -> None:
    """Our Thm 4.9 reading (split noise in every factor) is never below the recovered 'most likely'
    form (2L/(b sigma) in the first T-tau-1 factors) at the same window and theta = 1/2."""
    from lastiterate.notions import pld

    step_mu, c, p, nu, tau = 0.2, 0.9, 0.1, 40, 200
    ours = si.subsampled_gaussian_composition_value(
        p, si.lemma_c12_mu(step_mu, 0.5), nu, si.thm49_gaussian_mu(step_mu, c, 0.5, nu, tau), Q
    )
    likely = (
        pld.symmetric_subsampled_gaussian_pld(p, 2 * step_mu)
        .self_compose(nu - 1)
        .compose(pld.symmetric_subsampled_gaussian_pld(p, 2 * math.sqrt(2) * step_mu))
        .compose(pld.gaussian_pld(si.thm49_gaussian_mu(step_mu, c, 0.5, nu, tau)))
        .epsilon(1e-5)
    )
    assert ours >= likely


def test_ties_keep_the_combined_theorem_with_the_smallest_limit() -> None:
    """At one epoch every theorem equals one (subsampled) Gaussian step; the accountant keeps the
    first of equally tight results, which must be the combined theorem: its epsilon_limit (read by
    the epoch calibrator) is the smallest."""
    from lastiterate.accountant import account

    run = mnist_cgd(1, 0.002, diameter=1.0)
    kept = account(run, bounds=["shifted-interpolation"]).result("shifted-interpolation")
    assert kept is not None and kept.theorem.startswith("Thm C.3")
    singles = [si.noisy_cgd_strongly_convex(run, Q), si.noisy_cgd_bounded_convex(run, Q)]
    assert kept.epsilon == pytest.approx(min(r.epsilon for r in singles), rel=1e-12)
    assert kept.details["epsilon_limit"] <= min(r.details["epsilon_limit"] for r in singles) * (
        1 + 1e-12
    )

    srun = sgd_run(3, strong_convexity=0.1)
    kept = account(srun, bounds=["shifted-interpolation"]).result("shifted-interpolation")
    assert kept is not None and kept.theorem == si.THM_SGD_BOTH
    a, b = si.noisy_sgd_strongly_convex(srun, Q), si.noisy_sgd_bounded_convex(srun, Q)
    assert kept.epsilon == min(a.epsilon, b.epsilon)
    assert kept.details["epsilon_limit"] == min(
        a.details["epsilon_limit"], b.details["epsilon_limit"]
    )
    with pytest.raises(NotApplicable):
        si.noisy_sgd_strongly_convex_bounded(sgd_run(3), Q)  # convex only: Thm 4.9 does not apply
