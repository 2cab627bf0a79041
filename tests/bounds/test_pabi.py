"""Paper 003 (Altschuler-Talwar 2022): ``pabi`` bounds.

The soundness anchor is the AT22 lower-bound construction, the 1-D projected random walk on
K = [-D/2, D/2] (auditing-notes 3.3), computed exactly below as a Markov chain on a grid of interior
cells plus the two boundary atoms: every bound must be >= its exact epsilon.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import ndtr

from lastiterate.bounds import Query, pabi
from lastiterate.errors import NotApplicable, ParameterError
from lastiterate.notions.rdp import sampled_gaussian_rdp
from lastiterate.run import Run

DELTA = 1e-5


# ============================================================================ exact projected walk
def _walk_matrix(points: np.ndarray, edges: np.ndarray, drift: float, s: float) -> np.ndarray:
    """Rows: x -> Proj_[edges[0], edges[-1]](x + drift + N(0, s^2)) onto [lower atom,
    cells..., upper atom]."""
    cdf = ndtr((edges[None, :] - points[:, None] - drift) / s)
    P = np.empty((points.size, edges.size + 1))
    P[:, 0] = cdf[:, 0]
    P[:, 1:-1] = np.diff(cdf, axis=1)
    P[:, -1] = 1.0 - cdf[:, -1]
    return P


def walk_laws(
    D: float,
    s: float,
    a: float,
    T: int,
    *,
    q: float = 1.0,
    uses=None,
    bins: int = 400,
    x0: float = 0.0,
):
    """Laws of W_T (no drift) and W'_T (drift a with probability q at the steps
    where ``uses(t)``)."""
    edges = np.linspace(-D / 2, D / 2, bins + 1)
    pts = np.concatenate(([-D / 2], (edges[:-1] + edges[1:]) / 2, [D / 2]))
    P0 = _walk_matrix(pts, edges, 0.0, s)
    P1 = q * _walk_matrix(pts, edges, a, s) + (1 - q) * P0
    r0 = _walk_matrix(np.array([x0]), edges, 0.0, s)[0]
    r1 = q * _walk_matrix(np.array([x0]), edges, a, s)[0] + (1 - q) * r0
    use = (lambda t: True) if uses is None else uses
    p, w = r0, (r1 if use(0) else r0)
    for t in range(1, T):
        p = p @ P0
        w = w @ (P1 if use(t) else P0)
    return p, w


def exact_epsilon(p: np.ndarray, w: np.ndarray, delta: float = DELTA) -> float:
    """Smallest eps with max(sum (w - e^eps p)_+, sum (p - e^eps w)_+) <= delta (bisection)."""

    def dlt(e: float) -> float:
        return max(
            np.maximum(w - math.exp(e) * p, 0).sum(), np.maximum(p - math.exp(e) * w, 0).sum()
        )

    if dlt(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 50.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if dlt(mid) <= delta else (mid, hi)
    return lo  # the exact epsilon is >= lo


@pytest.mark.parametrize("T,expected", [(10, 0.427), (100, 0.711), (1000, 0.940)])
def test_exact_walk_reproduces_auditing_notes(T: int, expected: float) -> None:
    p, w = walk_laws(1.0, 0.05, 0.002, T)
    assert exact_epsilon(p, w) == pytest.approx(expected, abs=0.005)


def _gd_walk_run(T: int) -> Run:
    # s = lr*sigma = 0.05, a = lr*L/n = 0.002, D = 1
    return Run(
        algorithm="gd",
        n=100,
        lr=0.1,
        steps=T,
        noise_std=0.5,
        sensitivity=2.0,
        convex=True,
        smoothness=1.0,
        diameter=1.0,
    )


@pytest.mark.parametrize("T", [10, 100, 1000])
def test_gd_bound_above_exact_projected_walk(T: int) -> None:
    res = pabi.pabi_gd(_gd_walk_run(T), Query(delta=DELTA))
    exact = exact_epsilon(*walk_laws(1.0, 0.05, 0.002, T))
    assert res.epsilon >= exact
    assert res.details["epsilon_limit"] >= exact


@pytest.mark.parametrize("T", [10, 100, 1000])
def test_sgd_bound_above_exact_sampled_walk(T: int) -> None:
    # uniform batches b = 10 of n = 100 (q = 0.1); a = lr*L/b = 0.002, s = lr*sigma = 0.05
    run = Run(
        algorithm="sgd",
        n=100,
        batch_size=10,
        sampling="uniform",
        lr=0.01,
        steps=T,
        noise_std=5.0,
        clip=1.0,
        convex=True,
        smoothness=1.0,
        diameter=1.0,
    )
    res = pabi.pabi_sgd(run, Query(delta=DELTA))
    exact = exact_epsilon(*walk_laws(1.0, 0.05, 0.002, T, q=0.1))
    assert res.epsilon >= exact


@pytest.mark.parametrize("T", [12, 120, 1200])
def test_cgd_bound_above_exact_cyclic_walk(T: int) -> None:
    # l = 4 batches of b = 10; the differing example in batch k is used at steps t = k mod 4
    run = Run(
        algorithm="cgd",
        n=40,
        batch_size=10,
        lr=0.01,
        steps=T,
        noise_std=5.0,
        sensitivity=2.0,
        convex=True,
        smoothness=1.0,
        diameter=1.0,
    )
    res = pabi.pabi_cgd(run, Query(delta=DELTA))
    for k in range(4):
        exact = exact_epsilon(*walk_laws(1.0, 0.05, 0.002, T, uses=lambda t, k=k: t % 4 == k))
        assert res.epsilon >= exact


# ============================================================================ formula checks
def test_b1_matches_brute_force() -> None:
    for D, eta, sigma, L, n, T in [
        (1.0, 0.1, 0.5, 2.0, 100, 50),
        (0.3, 0.05, 1.0, 1.0, 20, 300),
        (2.0, 1.0, 0.1, 1.0, 1000, 7),
    ]:
        s = eta * L / n
        Dt = D + s
        brute = min(T * s * s, min((Dt / t + s) ** 2 * t for t in range(1, T + 1))) / (
            2 * eta**2 * sigma**2
        )
        assert pabi.b1_rho(D=D, eta=eta, sigma=sigma, L=L, n=n, T=T)[0] == pytest.approx(
            brute, rel=1e-12
        )


def _gcm_cost(ceiling: np.ndarray) -> float:
    """Independent taut string: minimal sum of squared increments of A with A_0 = 0, A_t
    <= ceiling[t] (t = 1..N-1), A_N = ceiling[N]: the greatest convex minorant of
    (0,0),(t, ceiling[t])."""
    N = len(ceiling) - 1
    xs = list(range(N + 1))
    ys = [0.0] + list(ceiling[1:])
    hull: list[int] = []
    for i in range(N + 1):
        while len(hull) >= 2:
            i1, i2 = hull[-2], hull[-1]
            if (xs[i2] - xs[i1]) * (ys[i] - ys[i1]) - (ys[i2] - ys[i1]) * (xs[i] - xs[i1]) <= 0:
                hull.pop()
            else:
                break
        hull.append(i)
    return sum((ys[j] - ys[i]) ** 2 / (xs[j] - xs[i]) for i, j in itertools.pairwise(hull))


def _cgd_brute(D: float, s: float, l: int, T: int) -> float:
    """max over the batch k of min over tau of the taut-string cost (Prop 3.2 / Prop 2.17)."""
    Dt = D + s
    worst = 0.0
    for k in range(l):
        uses = np.array(
            [1.0 if (t - 1) % l == k else 0.0 for t in range(1, T + 1)]
        )  # transition t uses batch (t-1) mod l
        best = math.inf
        for tau in range(T):
            S = np.concatenate([[0.0], np.cumsum(uses[tau:])]) * s
            start = 0.0 if tau == 0 else Dt
            best = min(best, _gcm_cost(start + S))
        worst = max(worst, best)
    return worst


@pytest.mark.parametrize(
    "D,s,l,T",
    [
        (1.0, 0.1, 4, 30),
        (0.2, 0.1, 3, 25),
        (1.0, 0.02, 5, 60),
        (0.05, 0.1, 2, 20),
        (1.0, 0.3, 1, 15),
        (0.5, 0.05, 7, 9),
    ],
)
def test_cgd_closed_form_matches_independent_taut_string(
    D: float, s: float, l: int, T: int
) -> None:
    cost, _ = pabi.cgd_shift_cost(D=D, s=s, l=l, T=T)
    assert cost == pytest.approx(_cgd_brute(D, s, l, T), rel=1e-9, abs=1e-15)


def test_cgd_with_one_batch_is_b1() -> None:
    for T in (1, 5, 50, 5000):
        eta, sigma, L, n, D = 0.1, 0.5, 2.0, 100, 1.0
        rho_c, _ = pabi.cgd_rho(D=D, eta=eta, sigma=sigma, L=L, b_min=n, l=1, T=T)
        rho_b, _ = pabi.b1_rho(D=D, eta=eta, sigma=sigma, L=L, n=n, T=T)
        assert rho_c == pytest.approx(rho_b, rel=1e-12)


@pytest.mark.parametrize("c", [0.9, 0.999, 1.0, 1.05, 1.3])
def test_best_window_matches_brute_force(c: float) -> None:
    Q = np.array([1e-4, 1e-2, 0.3, 2.0])
    K = np.array([5.0, 0.5, 10.0, 1e-3])
    for n_max in (1, 7, 500, math.inf):
        v, _N = pabi.best_window(Q, K, c, n_max)
        top = int(min(n_max, 20000))
        Ns = np.arange(1, top + 1, dtype=float)
        brute = (
            Ns[None, :] * Q[:, None] + K[:, None] * pabi.window_diameter_factor(Ns, c)[None, :]
        ).min(axis=1)
        assert np.all(v <= brute * (1 + 1e-9))
        assert np.all(v >= brute * (1 - 1e-9) - 1e-15) or not math.isfinite(n_max)


def test_window_factor_special_values() -> None:
    assert pabi.window_diameter_factor(1, 0.8) == pytest.approx(0.64)
    assert pabi.window_diameter_factor(1, 1.2) == pytest.approx(1.44)
    assert pabi.window_diameter_factor(7, 1.0) == pytest.approx(1 / 7)
    assert pabi.window_diameter_factor(1e9, 1.2) == pytest.approx(1.44 - 1)
    assert pabi.window_diameter_factor(5, 1 - 1e-13) == pytest.approx(1 / 5, rel=1e-6)


def test_sampled_gaussian_is_max_of_both_directions() -> None:
    for q, s, a in [(0.01, 2.0, 8.0), (0.25, 1.0, 3.5), (0.1, 0.7, 30.0)]:
        mf = float(sampled_gaussian_rdp(q, s, [a], direction="mixture-first")[0])
        lit = float(sampled_gaussian_rdp(q, s, [a], direction="literal")[0])
        assert pabi.sampled_gaussian(q, s, a) == pytest.approx(max(mf, lit), rel=1e-12)
    assert pabi.sampled_gaussian(1.0, 2.0, 3.0) == pytest.approx(3.0 / 8.0)


@pytest.mark.parametrize("q,s", [(0.01, 2.0), (0.2, 0.8), (0.05, 5.0)])
def test_sgm_table_chord_is_an_upper_bound(q: float, s: float) -> None:
    orders = 1.0 + np.geomspace(0.05, 200.0, 12)
    tab = pabi.SGMTable(q, np.array([s]), orders)
    rng = np.random.default_rng(0)
    probe = np.concatenate(
        [1.0 + np.exp(rng.uniform(math.log(0.01), math.log(400.0), 25)), orders[:3]]
    )
    exact = sampled_gaussian_rdp(q, s, probe, direction="max")
    for a, e in zip(probe, exact):
        assert tab.upper(float(a))[0] >= e * (1 - 1e-9)
    for a in orders[:3]:
        assert tab.upper(float(a))[0] == pytest.approx(
            pabi.sampled_gaussian(q, s, float(a)), rel=1e-12
        )


def test_b3_below_b2_and_schedule_above_b2() -> None:
    kw = {"q": 0.05, "b": 50, "L": 2.0, "sigma": 0.2, "eta": 0.1, "D": 1.0, "T": 2000}
    for a in (2.0, 8.0):
        b2 = pabi.split_window_rdp(a, c=1.0, **kw)
        b3 = pabi.split_window_rdp(a, c=0.97, **kw)
        assert b3 <= b2
        sched = pabi.schedule_rdp(a, q=0.05, b=50, L=2.0, sigma=0.2, D=1.0, schedule=[0.1] * 2000)
        assert b2 <= sched * (1 + 1e-12)  # eq. (5.7) read literally is the more conservative form
        assert sched <= 1.05 * b2


# ============================================================================ refusals
def _convex(**kw) -> Run:
    base = {
        "algorithm": "gd",
        "n": 100,
        "lr": 0.1,
        "steps": 100,
        "noise_std": 0.5,
        "sensitivity": 2.0,
        "convex": True,
        "smoothness": 1.0,
        "diameter": 1.0,
    }
    base.update(kw)
    return Run(**base)


def test_refusals_with_reasons() -> None:
    q = Query()
    with pytest.raises(NotApplicable, match="needs a diameter D"):
        pabi.pabi_gd(_convex(diameter=None), q)
    with pytest.raises(NotApplicable, match="non-expansive"):
        pabi.pabi_gd(_convex(convex=False), q)
    with pytest.raises(NotApplicable, match=r"lr=3 > 2/M=2"):
        pabi.pabi_gd(_convex(lr=3.0), q)
    with pytest.raises(NotApplicable, match="needs uniform sampling"):
        pabi.pabi_sgd(_convex(algorithm="sgd", batch_size=10, sampling="poisson"), q)
    with pytest.raises(NotApplicable, match="needs uniform sampling"):
        pabi.pabi_sgd(_convex(algorithm="sgd", batch_size=10, sampling="shuffle"), q)
    with pytest.raises(
        ParameterError, match="poisson"
    ):  # add/remove with fixed-size batches: refused by Run
        pabi.pabi_sgd(
            _convex(
                algorithm="sgd",
                batch_size=10,
                sampling="uniform",
                adjacency="add-remove",
                sensitivity=1.0,
            ),
            q,
        )
    with pytest.raises(NotApplicable, match="lr schedule"):
        pabi.pabi_cgd(_convex(algorithm="cgd", batch_size=10, lr=[0.1] * 50 + [0.05] * 50), q)


# ============================================================================ plateau,
# limits, monotonicity
def test_gd_and_cgd_plateau_and_limit() -> None:
    q = Query(delta=DELTA)
    for make in (
        lambda T: _convex(steps=T),
        lambda T: _convex(algorithm="cgd", batch_size=10, steps=T),
    ):
        res = [
            pabi.pabi_gd(make(T), q) if make(T).algorithm == "gd" else pabi.pabi_cgd(make(T), q)
            for T in (10, 100, 10**4, 10**6, 10**7)
        ]
        eps = [r.epsilon for r in res]
        assert eps[-1] == pytest.approx(eps[-2], rel=1e-9)
        assert eps[0] < eps[-1]
        lim = res[0].details["epsilon_limit"]
        assert all(r.details["epsilon_limit"] == pytest.approx(lim, rel=1e-9) for r in res)
        assert all(e <= lim * (1 + 1e-9) for e in eps)
        assert eps[-1] == pytest.approx(lim, rel=1e-6)


def test_cgd_limit_is_a_supremum_over_T() -> None:
    q = Query(delta=DELTA)
    base = _convex(algorithm="cgd", batch_size=10, lr=0.05, noise_std=0.3)
    lim = pabi.cgd_rho_limit(D=1.0, eta=0.05, sigma=0.3, L=2.0, b_min=10, l=10)
    rhos = [
        pabi.cgd_rho(D=1.0, eta=0.05, sigma=0.3, L=2.0, b_min=10, l=10, T=T)[0]
        for T in range(1, 4000, 7)
    ]
    assert max(rhos) <= lim * (1 + 1e-12)
    assert pabi.pabi_cgd(base.replace(steps=10**6), q).details["rho"] == pytest.approx(
        lim, rel=1e-9
    )


def test_sgd_plateau_and_limit() -> None:
    q = Query(delta=DELTA)
    run = Run(
        algorithm="sgd",
        n=1000,
        batch_size=10,
        sampling="uniform",
        lr=0.1,
        steps=10,
        noise_std=0.5,
        clip=1.0,
        convex=True,
        smoothness=5.0,
        diameter=1.0,
    )
    res = [pabi.pabi_sgd(run.replace(steps=T), q) for T in (10, 10**4, 10**6, 10**8)]
    eps = [r.epsilon for r in res]
    assert eps[0] < eps[1] < eps[2]
    assert eps[3] == pytest.approx(eps[2], rel=1e-6)
    for r in res:
        assert r.details["epsilon_limit"] >= r.epsilon * (1 - 1e-9)
    assert res[-1].details["branch"] == "noise split + diameter-aware window"


def test_monotone_in_sigma_and_D() -> None:
    q = Query(delta=DELTA)
    for algo, kw in (("gd", {}), ("cgd", {"batch_size": 10})):
        f = pabi.pabi_gd if algo == "gd" else pabi.pabi_cgd
        by_sigma = [
            f(_convex(algorithm=algo, steps=10**5, noise_std=s, **kw), q).epsilon
            for s in (0.25, 0.5, 1.0, 2.0)
        ]
        assert all(a > b for a, b in itertools.pairwise(by_sigma))
        by_D = [
            f(_convex(algorithm=algo, steps=10**5, diameter=D, **kw), q).epsilon
            for D in (0.1, 0.5, 1.0, 5.0)
        ]
        assert all(a < b for a, b in itertools.pairwise(by_D))
    sgd = Run(
        algorithm="sgd",
        n=1000,
        batch_size=10,
        sampling="uniform",
        lr=0.1,
        steps=10**5,
        noise_std=0.5,
        clip=1.0,
        convex=True,
        smoothness=5.0,
        diameter=1.0,
    )
    assert pabi.pabi_sgd(sgd, q).epsilon > pabi.pabi_sgd(sgd.replace(noise_std=1.0), q).epsilon
    assert pabi.pabi_sgd(sgd, q).epsilon < pabi.pabi_sgd(sgd.replace(diameter=4.0), q).epsilon


def test_strongly_convex_sgd_uses_b3_and_is_smaller() -> None:
    q = Query(delta=DELTA)
    run = Run(
        algorithm="sgd",
        n=1000,
        batch_size=10,
        sampling="uniform",
        lr=0.1,
        steps=10**5,
        noise_std=0.5,
        clip=1.0,
        convex=True,
        smoothness=5.0,
        diameter=1.0,
    )
    sc = pabi.pabi_sgd(run.replace(strong_convexity=1.0), q)
    assert "B.3" in sc.theorem
    assert sc.epsilon < pabi.pabi_sgd(run, q).epsilon


def test_schedule_runs_use_eq_5_7() -> None:
    q = Query(delta=DELTA)
    sched = [0.1 / math.sqrt(1 + t / 100) for t in range(3000)]
    gd = pabi.pabi_gd(_convex(steps=3000, lr=sched), q)
    assert "5.7" in gd.theorem and gd.epsilon > 0
    const = pabi.pabi_gd(_convex(steps=3000, lr=0.1), q)
    assert gd.epsilon > 0 and const.epsilon > 0
    sgd = Run(
        algorithm="sgd",
        n=1000,
        batch_size=10,
        sampling="uniform",
        lr=sched,
        steps=3000,
        noise_std=0.5,
        clip=1.0,
        convex=True,
        smoothness=5.0,
        diameter=1.0,
    )
    res = pabi.pabi_sgd(sgd, q)
    assert "5.7" in res.theorem and res.epsilon > 0


def test_rdp_curve_is_valid_at_report_orders() -> None:
    """The reported curve at the requested orders equals an independent evaluation
    with exact S_alpha."""
    q = Query(delta=DELTA, orders=(2.0, 8.0))
    run = Run(
        algorithm="sgd",
        n=1000,
        batch_size=10,
        sampling="uniform",
        lr=0.1,
        steps=2000,
        noise_std=0.5,
        clip=1.0,
        convex=True,
        smoothness=5.0,
        diameter=1.0,
    )
    res = pabi.pabi_sgd(run, q)
    for a, v in res.rdp:
        full = pabi.split_window_rdp(a, q=0.01, b=10, L=2.0, sigma=0.5, eta=0.1, D=1.0, T=2000)
        assert v >= full * (1 - 1e-12)  # a coarser split grid can only be larger
        assert v <= full * 1.2
    # the converted epsilon is never below what the reported orders alone give with
    # Mironov's conversion
    assert min(v + math.log(1 / DELTA) / (a - 1) for a, v in res.rdp) >= res.epsilon - 1e-12


@pytest.mark.slow  # ~45 s with the certified PLD engine
def test_sgd_needs_bounded_gradients_not_only_a_sensitivity() -> None:
    """S_alpha bounds the fixed-size-batch pair only for gradients in a ball of radius L/2; with
    only sup ||g - g'|| <= L declared (no clip) pabi and smooth-bounded-domain refuse for sgd."""
    from lastiterate.accountant import account
    from lastiterate.run import Run

    base = {
        "algorithm": "sgd",
        "n": 60000,
        "batch_size": 1500,
        "epochs": 100,
        "lr": 0.05,
        "noise_std": 0.01,
        "convex": True,
        "smoothness": 32.5,
        "diameter": 1.0,
        "sampling": "uniform",
    }
    report = account(Run(sensitivity=10.0, **base), delta=1e-5)
    refused = {r.bound: r.reason for r in report.not_applicable}
    assert (
        "bounded in norm" in refused["pabi"]
        and "bounded in norm" in refused["smooth-bounded-domain"]
    )
    clipped = account(Run(clip=5.0, **base), delta=1e-5)
    assert clipped.result("pabi") is not None


@pytest.mark.parametrize("trial", range(6))
def test_vectorised_curve_values_equal_the_scalar_calls(trial: int) -> None:
    """issue 11: rdp_to_epsilon evaluates its order grid through SplitWindowCurve.values (one
    numpy pass); it must give exactly the scalar curve's numbers (same operations elementwise),
    for every branch: q = 1, contraction c < 1 and c > 1, the T -> infinity limit, no window,
    the q-linear term, both directions, orders beyond the table."""
    from lastiterate.bounds.pabi import LAMBDA_GRID, PROXY_ORDERS, SplitWindowCurve

    rng = np.random.default_rng(trial)
    alphas = np.concatenate(
        [1.0 + np.exp(np.linspace(math.log(1e-6), math.log(1e8), 97)), [1.5, 2.0, 3.0, 1e4 + 5]]
    )
    curve = SplitWindowCurve(
        q=[0.025, 0.004, 1.0][trial % 3],
        b=1500,
        L=10.0,
        sigma=float(rng.uniform(0.005, 0.05)),
        eta=0.05,
        D=1.0,
        c=[1.0, 0.99, 1.01][trial % 3],
        T=2000,
        n_max=[1999, math.inf, 0][trial % 3],
        lambdas=LAMBDA_GRID,
        orders=np.concatenate([PROXY_ORDERS[:10], [1.3, 2.5, 7.7]]),
        q_linear=bool(trial % 2),
        direction=["max", "mixture-first"][trial % 2],
    )
    scalar = np.array([curve(float(a)) for a in alphas])
    np.testing.assert_array_equal(curve.values(alphas), scalar)
