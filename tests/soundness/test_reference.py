"""The independent references are themselves checked against independent sources.

* the Gaussian formula against 60-digit mpmath integration of the densities;
* the mixture level-set evaluation against adaptive quadrature of (p - e^eps q)_+ (scipy.integrate)
  and, for one Poisson-subsampled step, against dp_accounting's PLD (a peer library);
* the sampling patterns against closed forms (binomial counts, one use per epoch);
* the projected-walk bracket: lower <= Monte Carlo (within 4 standard errors) <= upper, it
  narrows as the grid is refined, and it contains the unprojected value when D is huge.
"""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest
from scipy import integrate, stats

from .reference import (
    GaussianMixture,
    Instance,
    gaussian_delta,
    mixture_delta,
    projected_walk_bracket,
)


@pytest.mark.parametrize(
    ("eps", "mu"), [(0.0, 0.5), (1.0, 1.0), (5.0, 1.0), (20.0, 3.0), (82.0, 8.0), (0.3, 0.01)]
)
def test_gaussian_delta_matches_mpmath(eps: float, mu: float) -> None:
    mpmath.mp.dps = 60
    e, m = mpmath.mpf(eps), mpmath.mpf(mu)
    exact = mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)
    assert gaussian_delta(eps, mu) == pytest.approx(float(exact), rel=1e-9, abs=1e-300)


def _quad_delta(p: GaussianMixture, q: GaussianMixture, eps: float) -> float:
    def dens(g: GaussianMixture, x: float) -> float:
        return float(np.sum(g.weights * stats.norm.pdf(x, g.means, g.scale)))

    lo = min(p.means.min(), q.means.min()) - 12 * p.scale
    hi = max(p.means.max(), q.means.max()) + 12 * p.scale
    pts = np.linspace(lo, hi, 60)
    f1 = lambda x: max(0.0, dens(p, x) - math.exp(eps) * dens(q, x))
    f2 = lambda x: max(0.0, dens(q, x) - math.exp(eps) * dens(p, x))
    d1 = sum(
        integrate.quad(f1, a, b, epsabs=1e-14, epsrel=1e-10, limit=200)[0]
        for a, b in itertools.pairwise(pts)
    )
    d2 = sum(
        integrate.quad(f2, a, b, epsabs=1e-14, epsrel=1e-10, limit=200)[0]
        for a, b in itertools.pairwise(pts)
    )
    return max(d1, d2)


@pytest.mark.parametrize(
    ("means_p", "weights_p", "means_q", "weights_q", "eps"),
    [
        ([0.0, 1.0, 2.0], [0.49, 0.42, 0.09], [0.0], [1.0], 0.5),  # binomial(2, 0.3) shifts vs none
        ([0.5, -0.5], [0.5, 0.5], [0.0], [1.0], 0.1),  # non-monotone ratio: two-sided level set
        ([3.0, 0.0], [0.2, 0.8], [-3.0, 0.0], [0.2, 0.8], 1.0),  # replace pair with a shared atom
        (
            [0.0, 4.0, 8.0],
            [0.5, 0.3, 0.2],
            [0.0, 5.0, 10.0],
            [0.5, 0.3, 0.2],
            0.2,
        ),  # revealed-sampling kind
    ],
)
def test_mixture_delta_matches_quadrature(means_p, weights_p, means_q, weights_q, eps) -> None:  # type: ignore[no-untyped-def]
    p = GaussianMixture.of(means_p, weights_p, 1.0)
    q = GaussianMixture.of(means_q, weights_q, 1.0)
    assert mixture_delta(p, q, eps) == pytest.approx(_quad_delta(p, q, eps), rel=1e-7, abs=1e-12)


def test_single_component_mixture_is_gaussian() -> None:
    p = GaussianMixture.of([1.3], [1.0], 0.7)
    q = GaussianMixture.of([0.0], [1.0], 0.7)
    for eps in (0.0, 0.5, 3.0, 8.0):
        assert mixture_delta(p, q, eps) == pytest.approx(gaussian_delta(eps, 1.3 / 0.7), rel=1e-10)


@pytest.mark.parametrize(
    ("q", "sigma", "eps"), [(0.1, 1.0, 0.5), (0.5, 2.0, 0.2), (0.01, 0.5, 1.0)]
)
def test_one_poisson_step_matches_dp_accounting(q: float, sigma: float, eps: float) -> None:
    """T = 1: the last iterate IS the subsampled Gaussian; dp_accounting's PLD (pessimistic, an
    upper bound) must be >= ours and agree to its discretisation."""
    from dp_accounting.pld import privacy_loss_distribution as pld_mod

    inst = Instance(T=1, eta=1.0, sigma=sigma, a=1.0, v_p=1.0, v_q=None, uses=("bernoulli", q, 1))
    ours = inst.delta(eps)
    theirs = pld_mod.from_gaussian_mechanism(
        sigma, sampling_prob=q, value_discretization_interval=1e-4
    ).get_delta_for_epsilon(eps)
    assert ours <= theirs * (1 + 1e-9)
    assert ours == pytest.approx(theirs, rel=2e-3)


def test_patterns_closed_forms() -> None:
    # Poisson / uniform on a linear loss: U = K / b, K ~ Binomial(T, p)
    inst = Instance(T=7, eta=1.0, sigma=1.0, a=1.0, v_p=1.0, v_q=None, uses=("bernoulli", 0.3, 4))
    u, w = inst.pattern()
    assert np.allclose(u, np.arange(8) / 4) and np.allclose(
        w, stats.binom.pmf(np.arange(8), 7, 0.3)
    )
    # strongly convex: enumeration over 2^T subsets has the binomial count law at a = 1 and
    # mean p * sum a^j / b otherwise
    inst = Instance(T=6, eta=1.0, sigma=1.0, a=0.8, v_p=1.0, v_q=None, uses=("bernoulli", 0.3, 4))
    u, w = inst.pattern()
    assert w.sum() == pytest.approx(1.0) and len(u) == 2**6
    assert float(u @ w) == pytest.approx(0.3 * sum(0.8**j for j in range(6)) / 4)
    # shuffled equal batches, whole epochs, a = 1: exactly E / b
    inst = Instance(T=12, eta=1.0, sigma=1.0, a=1.0, v_p=1.0, v_q=None, uses=("shuffle", (3, 3, 3)))
    u, w = inst.pattern()
    assert len(u) == 1 and u[0] == pytest.approx(4 / 3)
    # shuffled, partial last epoch: used in it with probability (steps left) / l
    inst = Instance(T=4, eta=1.0, sigma=1.0, a=1.0, v_p=1.0, v_q=None, uses=("shuffle", (3, 3, 3)))
    u, w = inst.pattern()
    assert dict(zip(np.round(u, 9), w)) == pytest.approx(
        {round(1 / 3, 9): 2 / 3, round(2 / 3, 9): 1 / 3}
    )
    # Gaussian (gd) instance: Thm 4.2 closed form on the quadratic
    c, T, L, n, sigma, eta = 0.9, 25, 2.0, 10, 0.3, 0.2
    inst = Instance(
        T=T,
        eta=eta,
        sigma=sigma,
        a=c,
        v_p=1.0,
        v_q=-1.0,
        uses=("steps", tuple((t, n) for t in range(T))),
    )
    mu = L / (n * sigma) * math.sqrt((1 + c) / (1 - c) * (1 - c**T) / (1 + c**T))
    assert inst.delta(1.0) == pytest.approx(gaussian_delta(1.0, mu), rel=1e-12)


def _walk_mc(inst: Instance, v: float | None, n: int, rng: np.random.Generator) -> np.ndarray:
    R = inst.diameter / 2  # type: ignore[operator]
    x = np.zeros(n)
    for t in range(inst.T):
        drift = 0.0
        if v is not None:
            if inst.uses[0] == "steps":
                used = dict(inst.uses[1])
                drift = inst.eta * v / used[t] if t in used else 0.0
            else:
                drift = inst.eta * v / inst.uses[2] * (rng.random(n) < inst.uses[1])
        x = np.clip(inst.a * x + drift + inst.eta * inst.sigma * rng.standard_normal(n), -R, R)
    return x


@pytest.mark.parametrize(
    "inst",
    [
        Instance(
            T=8,
            eta=0.5,
            sigma=1.0,
            a=1.0,
            v_p=2.0,
            v_q=-2.0,
            uses=("steps", tuple((t, 4) for t in range(8))),
            diameter=2.0,
        ),
        Instance(
            T=6,
            eta=0.5,
            sigma=1.0,
            a=0.9,
            v_p=3.0,
            v_q=None,
            uses=("bernoulli", 0.5, 2),
            diameter=3.0,
        ),
    ],
    ids=["gd-walk", "poisson-sc-walk"],
)
def test_projected_bracket_contains_monte_carlo(inst: Instance) -> None:
    """The worst event of the walk is a boundary atom or a tail: delta at eps of the set
    {x >= t} (a lower bound for any t) estimated by Monte Carlo lies below the upper bound,
    and the exact-set Monte Carlo estimate (best threshold) lies above the lower bound."""
    rng = np.random.default_rng(1)
    n = 100_000
    xp, xq = _walk_mc(inst, inst.v_p, n, rng), _walk_mc(inst, inst.v_q, n, rng)
    eps = 0.5
    lower, upper = projected_walk_bracket(inst, eps, cells=600)
    assert 0 < lower <= upper
    thresholds = np.quantile(np.concatenate([xp, xq]), np.linspace(0.0, 1.0, 401))
    best, se = 0.0, 0.0
    for a, b in ((xp, xq), (xq, xp)):
        for pa, pb in (
            ((a[:, None] >= thresholds).mean(0), (b[:, None] >= thresholds).mean(0)),
            ((a[:, None] <= thresholds).mean(0), (b[:, None] <= thresholds).mean(0)),
        ):
            vals = pa - math.exp(eps) * pb
            i = int(np.argmax(vals))
            if vals[i] > best:
                best = float(vals[i])
                se = math.sqrt(
                    pa[i] * (1 - pa[i]) / n + math.exp(2 * eps) * pb[i] * (1 - pb[i]) / n
                )
    # the MC value of one set is a (noisy) lower bound on delta_true <= upper
    assert best <= upper + 4 * se + 1e-3  # 1e-3: the maximum over 1600 sets is biased upward
    # and the walk's true delta is at least the certified lower bound; MC of a good set gets close
    assert best >= lower - 4 * se - 1e-3
    assert upper - lower < 0.05


def test_projected_bracket_narrows_and_converges_to_unprojected() -> None:
    base = {
        "T": 10,
        "eta": 0.5,
        "sigma": 1.0,
        "a": 1.0,
        "v_p": 1.0,
        "v_q": -1.0,
        "uses": ("steps", tuple((t, 2) for t in range(10))),
    }
    widths = []
    for cells in (150, 300, 600):
        lo, hi = projected_walk_bracket(Instance(**base, diameter=3.0), 0.5, cells=cells)
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2]
    exact = Instance(**base).delta(0.5)
    # a domain 12 final noise-stds wide: projection changes the law by < 1e-6, so the bracket
    # contains the unprojected value (the upper bound is loose there: its gap grows like T h / s)
    lo, hi = projected_walk_bracket(
        Instance(**base, diameter=12 * 0.5 * math.sqrt(10)), 0.5, cells=800
    )
    assert lo - 1e-6 <= exact <= hi + 1e-6
    assert exact - lo < 0.05
