"""audit.reference: exact reference mechanisms, and the exactness of the accountant's closed forms.

Suite item 1 of auditing-notes section 4: the closed-form last-iterate mu of Bok-Su-Altschuler
Thm 4.2 (NoisyGD) must EQUAL the brute-force Gaussian mean/covariance propagation on extremal
random quadratics (rtol 1e-10) and upper-bound it on all others; Thm 4.5 (NoisyCGD) must
upper-bound the exact value for every position of the differing example, within a modest factor.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lastiterate.audit.reference import (
    _reference_cgd_mu,
    _reference_gd_mu,
    cgd_quadratic_mu,
    composition_epsilon,
    gaussian_propagation_mu,
    gaussian_quadratic_mu,
    linear_sgd_curve,
    linear_unconstrained_mu,
    projected_walk_curve,
)
from lastiterate.audit.stats import _gdp_epsilon
from lastiterate.run import Run


def accountant_mu(run: Run, bound_id: str = "shifted-interpolation") -> float:
    """The accountant's mu for ``bound_id`` (restricted to that id so that unrelated modules do
    not matter here).  Until the shifted-interpolation module exists the docs/theorems.md 2.2 / 2.3
    formulas stand in (the exactness of the formula is then what is tested)."""
    import importlib.util

    if importlib.util.find_spec("lastiterate.bounds.shifted_interpolation") is None:
        if run.algorithm == "gd":
            return _reference_gd_mu(run.T, run.c, run.L / (run.n * run.sigma))
        return _reference_cgd_mu(run.uses, int(run.l), run.c, run.L / (run.b_min * run.sigma))
    from lastiterate.accountant import account

    res = account(run, delta=1e-5, bounds=[bound_id]).result(bound_id)
    assert res is not None, f"{bound_id} gave no result for {run}"
    assert res.mu is not None
    return float(res.mu)


def random_quadratic(
    rng: np.random.Generator, d: int, m: float, M: float
) -> tuple[np.ndarray, np.ndarray]:
    """A random SPD Hessian with spectrum in [m, M], m and M attained; and its m-eigenvector."""
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    lam = np.concatenate(([m, M], rng.uniform(m, M, size=d - 2))) if d >= 2 else np.array([m])
    H = Q @ np.diag(lam) @ Q.T
    return H, Q[:, 0]


# ---------------------------------------------------------------------- 1. exactness (NoisyGD)
@pytest.mark.parametrize("seed", range(6))
def test_thm42_equals_bruteforce_on_random_quadratics(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 6))
    m = float(rng.uniform(0.1, 1.0))
    M = float(m * rng.uniform(1.0, 5.0))
    eta = float(rng.uniform(0.05, 1.0)) * 2 / (m + M)  # eta <= 2/(m+M): c = 1 - eta m
    n = int(rng.integers(1, 50))
    L = float(rng.uniform(0.1, 3.0))
    sigma = float(rng.uniform(0.05, 2.0))
    T = int(rng.integers(1, 300))
    H, v_min = random_quadratic(rng, d, m, M)
    A = np.eye(d) - eta * H
    run = Run(
        algorithm="gd",
        n=n,
        lr=eta,
        steps=T,
        noise_std=sigma,
        sensitivity=L,
        strong_convexity=m,
        smoothness=M,
    )
    assert run.c == pytest.approx(1 - eta * m, rel=1e-12)
    claimed = accountant_mu(run)
    # extremal pair: the gradient difference (norm L/n) along the flattest direction -> equality
    exact = gaussian_propagation_mu(A, np.tile(eta * L / n * v_min, (T, 1)), eta * sigma)
    assert exact == pytest.approx(claimed, rel=1e-10)
    # any other direction of the gradient difference: never more than the claim
    for _ in range(3):
        u = rng.standard_normal(d)
        u /= np.linalg.norm(u)
        other = gaussian_propagation_mu(A, np.tile(eta * L / n * u, (T, 1)), eta * sigma)
        assert other <= claimed * (1 + 1e-10)


def test_thm42_anchor_auditing_notes_3_1() -> None:
    run = Run(
        algorithm="gd",
        n=4,
        lr=0.1,
        steps=100,
        noise_std=1.0,
        sensitivity=1.0,
        strong_convexity=1.0,
        smoothness=1.0,
    )
    assert accountant_mu(run) == pytest.approx(1.0897, abs=1e-4)
    assert gaussian_quadratic_mu(100, 0.1, 1.0, 1.0, 0.25) == pytest.approx(1.0897, abs=1e-4)
    assert _gdp_epsilon(1e-5, gaussian_quadratic_mu(100, 0.1, 1.0, 1.0, 0.25)) == pytest.approx(
        4.836, abs=1e-3
    )


@pytest.mark.parametrize("frac", [0.6, 0.9, 0.99])
def test_thm42_sound_when_the_large_curvature_dominates(frac: float) -> None:
    """eta in (2/(m+M), 2/M): c = eta M - 1 > 1 - eta m.  The curvature-M quadratic oscillates
    (1 - eta M < 0) and the curvature-m one contracts slower than c: both stay below the claim."""
    m, M = 0.2, 1.0
    eta = 2 / (m + M) + frac * (2 / M - 2 / (m + M))
    T, n, L, sigma = 150, 3, 1.0, 0.5
    run = Run(
        algorithm="gd",
        n=n,
        lr=eta,
        steps=T,
        noise_std=sigma,
        sensitivity=L,
        strong_convexity=m,
        smoothness=M,
    )
    claimed = accountant_mu(run)
    for kappa in (m, M, (m + M) / 2):
        exact = gaussian_propagation_mu(
            np.array([[1 - eta * kappa]]), np.full((T, 1), eta * L / n), eta * sigma
        )
        assert exact <= claimed * (1 + 1e-10)


def test_schedule_propagation_matches_scalar_recursion() -> None:
    etas = np.linspace(0.2, 0.05, 40)
    mu = gaussian_quadratic_mu(40, etas, 0.5, 1.0, 0.3)
    A = [np.array([[1 - e * 0.5]]) for e in etas]
    assert mu == pytest.approx(
        gaussian_propagation_mu(A, (etas * 0.3)[:, None], etas * 1.0), rel=1e-12
    )


# ---------------------------------------------------------------------- 1. exactness (NoisyCGD)
@pytest.mark.parametrize("seed", range(5))
def test_thm45_bounds_exact_cgd_every_position(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    l = int(rng.integers(1, 8))
    b = int(rng.integers(1, 6))
    n = l * b
    E = int(rng.integers(1, 30))
    m = float(rng.uniform(0.05, 1.0))
    M = float(m * rng.uniform(1.0, 3.0))
    eta = float(rng.uniform(0.05, 1.0)) * 2 / (m + M)
    sigma = float(rng.uniform(0.1, 2.0))
    L = float(rng.uniform(0.1, 2.0))
    run = Run(
        algorithm="cgd",
        n=n,
        batch_size=b,
        lr=eta,
        epochs=E,
        noise_std=sigma,
        sensitivity=L,
        strong_convexity=m,
        smoothness=M,
    )
    claimed = accountant_mu(run)
    exact = [cgd_quadratic_mu(E, l, eta, m, sigma, L / b, position=j) for j in range(l)]
    # the generic propagation agrees with the scalar recursion
    j = int(rng.integers(0, l))
    kicks = np.array([[eta * L / b if t % l == j else 0.0] for t in range(E * l)])
    assert gaussian_propagation_mu(np.array([[1 - eta * m]]), kicks, eta * sigma) == pytest.approx(
        exact[j], rel=1e-10
    )
    assert max(exact) <= claimed * (1 + 1e-10)
    assert claimed <= 2.0 * max(exact)
    # one batch per epoch: NoisyCGD is NoisyGD and Thm 4.5 is exact
    if l == 1:
        assert max(exact) == pytest.approx(claimed, rel=1e-10)


def test_cgd_one_batch_equals_gd() -> None:
    assert cgd_quadratic_mu(50, 1, 0.1, 1.0, 1.0, 0.25) == pytest.approx(
        gaussian_quadratic_mu(50, 0.1, 1.0, 1.0, 0.25), rel=1e-12
    )


def test_linear_unconstrained_is_composition() -> None:
    mu = gaussian_propagation_mu(np.eye(1), np.full((100, 1), 0.1 * 0.25), 0.1 * 1.0)
    assert mu == pytest.approx(linear_unconstrained_mu(100, 0.25, 1.0), rel=1e-12)
    assert mu == pytest.approx(2.5, rel=1e-12)


# ---------------------------------------------------------------------- projected random walk
NOTES_3_3 = {
    10: (0.427, 0.440),
    100: (0.711, 1.555),
    300: (0.915, 2.876),
    1000: (0.940, 5.759),
    10000: (0.940, 24.38),
}


@pytest.mark.parametrize("T", sorted(NOTES_3_3))
def test_projected_walk_reproduces_auditing_notes(T: int) -> None:
    exact, comp = NOTES_3_3[T]
    curve = projected_walk_curve(1.0, 0.05, 0.002, T)
    assert curve.epsilon(1e-5) == pytest.approx(exact, abs=1.5e-3)
    assert composition_epsilon(T, 0.04, 1e-5) == pytest.approx(comp, abs=2e-3)
    assert curve.epsilon(1e-5) <= composition_epsilon(T, 0.04, 1e-5)


def test_projected_walk_worst_event_is_the_lower_atom_and_grid_converges() -> None:
    curve = projected_walk_curve(1.0, 0.05, 0.002, 1000)
    (p_lo, q_lo), _ = curve.atom_masses["lower"], curve.atom_masses["upper"]
    assert p_lo == pytest.approx(0.033, abs=1e-3) and q_lo == pytest.approx(0.013, abs=1e-3)
    coarse, fine = (
        projected_walk_curve(1.0, 0.05, 0.002, 100),
        projected_walk_curve(1.0, 0.05, 0.002, 100, bins=1000),
    )
    assert fine.epsilon(1e-5) == pytest.approx(coarse.epsilon(1e-5), abs=1e-3)
    # masses sum to one, delta is monotone, tradeoff is a tradeoff function
    assert curve.p.sum() == pytest.approx(1.0) and curve.q.sum() == pytest.approx(1.0)
    assert curve.delta(0.1) >= curve.delta(0.5) >= curve.delta(1.0)
    a = np.linspace(0, 1, 11)
    f = curve.tradeoff(a)
    assert np.all(np.diff(f) <= 1e-12) and np.all(f <= 1 - a + 1e-12)


def test_projected_walk_without_drift_is_null_and_no_wall_is_gaussian() -> None:
    assert projected_walk_curve(1.0, 0.05, 0.0, 100).epsilon(1e-5) == 0.0
    # a huge domain: the walk never reaches the walls, so it is the linear unconstrained Gaussian
    wide = projected_walk_curve(3.0, 0.05, 0.002, 30, bins=1000)
    assert wide.epsilon(1e-3) == pytest.approx(_gdp_epsilon(1e-3, 0.04 * math.sqrt(30)), rel=0.02)


# ---------------------------------------------------------------------- linear NoisySGD
def test_linear_sgd_curve_limits() -> None:
    # p = 1: a deterministic shift, i.e. the Gaussian mechanism with mu = a sqrt(T)/s... per step
    T, a, s = 20, 0.05, 0.1
    full = linear_sgd_curve(T, 1.0, a, s)
    mu = a * T / (s * math.sqrt(T))
    assert full.epsilon(1e-5) == pytest.approx(_gdp_epsilon(1e-5, mu), rel=1e-4)
    # subsampling helps
    sub = linear_sgd_curve(T, 0.1, a, s)
    assert sub.epsilon(1e-5) < full.epsilon(1e-5)
    assert sub.delta(0.5) >= sub.delta(1.0)
