"""audit.stats: confidence bounds, certified lower bounds, threshold strategies (no simulation)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from lastiterate.audit.stats import (
    DKW,
    Bonferroni,
    Explicit,
    Split,
    _gaussian_tradeoff,
    _gdp_delta,
    _gdp_epsilon,
    audit_scores,
    clopper_pearson_lower,
    clopper_pearson_upper,
    dkw_epsilon,
    eps_lb_two_sided,
    fdp_violation,
    mu_lb_gdp,
)


def deterministic_normal(n: int, shift: float = 0.0) -> np.ndarray:
    """jax_privacy's quantile trick: the n 'ideal' N(shift, 1) samples, no randomness."""
    return sps.norm.ppf((np.arange(n) + 0.5) / n) + shift


# ---------------------------------------------------------------------- Clopper-Pearson / DKW
def test_clopper_pearson_known_values() -> None:
    # k = 0: upper = 1 - alpha^(1/n) (rule of three); k = n: lower = alpha^(1/n)
    assert clopper_pearson_upper(0, 100, 0.05) == pytest.approx(1 - 0.05 ** (1 / 100), rel=1e-10)
    assert clopper_pearson_lower(100, 100, 0.05) == pytest.approx(0.05 ** (1 / 100), rel=1e-10)
    assert clopper_pearson_upper(100, 100, 0.05) == 1.0
    assert clopper_pearson_lower(0, 100, 0.05) == 0.0
    # symmetry: upper(k, n) = 1 - lower(n - k, n)
    assert clopper_pearson_upper(30, 100, 0.01) == pytest.approx(
        1 - clopper_pearson_lower(70, 100, 0.01), rel=1e-12
    )


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 10_000), frac=st.floats(0, 1), alpha=st.floats(1e-6, 0.5))
def test_clopper_pearson_brackets_the_estimate(n: int, frac: float, alpha: float) -> None:
    k = round(frac * n)
    lo, up = clopper_pearson_lower(k, n, alpha), clopper_pearson_upper(k, n, alpha)
    assert 0.0 <= lo <= k / n <= up <= 1.0
    # a smaller alpha widens the bound
    assert clopper_pearson_upper(k, n, alpha / 10) >= up - 1e-15


def test_clopper_pearson_coverage_exact() -> None:
    """P_p(upper(K) < p) <= alpha, computed exactly over the binomial law."""
    n, alpha = 200, 0.05
    ks = np.arange(n + 1)
    ups = clopper_pearson_upper(ks, n, alpha)
    for p in (0.001, 0.02, 0.3, 0.5, 0.77, 0.999):
        miss = sps.binom.pmf(ks, n, p)[ups < p].sum()
        assert miss <= alpha + 1e-12


def test_dkw_width() -> None:
    assert dkw_epsilon(1000, 0.05) == pytest.approx(math.sqrt(math.log(40) / 2000))


# ---------------------------------------------------------------------- lower-bound formulas
def test_mu_lb_recovers_mu_on_exact_rates() -> None:
    for mu in (0.1, 0.5, 1.0, 2.5):
        for t in (-0.5, mu / 2, mu + 0.3):
            fpr = sps.norm.sf(t)
            fnr = sps.norm.cdf(t - mu)
            assert mu_lb_gdp(fpr, fnr) == pytest.approx(mu, abs=1e-9)


def test_mu_lb_is_not_abs_folded() -> None:
    # a test that does WORSE than random gives a negative bound, not a positive one
    # (jax_privacy #270)
    assert mu_lb_gdp(0.7, 0.6) < 0


def test_eps_lb_formula_and_edge_cases() -> None:
    d = 1e-5
    assert eps_lb_two_sided(0.01, 0.5, d) == pytest.approx(math.log((1 - d - 0.5) / 0.01))
    assert eps_lb_two_sided(0.5, 0.01, d) == pytest.approx(math.log((1 - d - 0.5) / 0.01))
    assert eps_lb_two_sided(0.5, 0.5, d) == 0.0  # never negative
    assert eps_lb_two_sided(0.9, 0.9, d) == 0.0
    # against a GDP mechanism, the optimal eps-test reaches the exact eps(delta)
    mu, delta = 1.0, 1e-3
    eps = _gdp_epsilon(delta, mu)
    t = np.linspace(-3, 5, 40001)
    fpr, fnr = sps.norm.sf(t), sps.norm.cdf(t - mu)
    assert float(np.max(eps_lb_two_sided(fpr, fnr, delta))) <= eps + 1e-6
    assert float(np.max(eps_lb_two_sided(fpr, fnr, delta))) >= eps - 0.02


def test_gdp_duality_independent_copy_matches_library() -> None:
    notions = pytest.importorskip("lastiterate.notions.gdp")
    for mu in (0.04, 0.5, 1.0897, 2.5, 6.0):
        for delta in (1e-10, 1e-5, 1e-2):
            assert _gdp_epsilon(delta, mu) == pytest.approx(
                float(notions.gdp_epsilon(delta, mu)), rel=1e-7, abs=1e-9
            )
        assert _gdp_delta(1.0, mu) == pytest.approx(
            float(notions.gdp_delta(1.0, mu)), rel=1e-8, abs=1e-15
        )
    # auditing-notes 3.1 anchors
    assert _gdp_epsilon(1e-5, 1.0897) == pytest.approx(4.836, abs=2e-3)
    assert _gdp_epsilon(1e-5, 2.5) == pytest.approx(13.207, abs=2e-3)


def test_fdp_violation() -> None:
    f = lambda a: _gaussian_tradeoff(a, 1.0)
    a = np.array([0.1, 0.3])
    assert not fdp_violation(f, a, f(a) + 1e-3)
    assert fdp_violation(f, a, f(a) - 1e-3)
    # FPR_u / FNR_u of a mu = 1.5 mechanism refute a mu = 1 claim
    t = 0.75
    assert fdp_violation(f, sps.norm.sf(t), sps.norm.cdf(t - 1.5))


# ---------------------------------------------------------------------- strategies on scores
STRATEGIES = [Split(), Bonferroni(), DKW(), Explicit((0.5,))]


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.describe())
def test_sound_and_tight_on_deterministic_gaussian_scores(strategy) -> None:  # type: ignore[no-untyped-def]
    mu = 1.0
    x = deterministic_normal(200_000)
    y = deterministic_normal(200_000, mu)
    res = audit_scores(x, y, alpha=1e-3, strategy=strategy, seed=1)
    assert res.mu_lb <= mu
    assert res.mu_lb >= 0.95 * mu


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.describe())
def test_null_scores_certify_nothing(strategy) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(3)
    x = rng.standard_normal(100_000)
    y = rng.standard_normal(100_000)
    res = audit_scores(x, y, alpha=1e-3, delta=1e-5, strategy=strategy, seed=2)
    assert res.mu_lb <= 0.0
    assert res.eps_lb == 0.0
    # identical score arrays: also nothing
    res = audit_scores(x, x.copy(), alpha=1e-3, delta=1e-5, strategy=strategy, seed=2)
    assert res.mu_lb <= 0.0 and res.eps_lb == 0.0


def test_both_directions_are_audited() -> None:
    x = deterministic_normal(100_000)
    y = deterministic_normal(100_000, -1.0)  # D' shifted DOWN
    assert audit_scores(x, y, alpha=1e-3, seed=0).mu_lb >= 0.9
    assert audit_scores(x, y, alpha=1e-3, seed=0, directions=("greater",)).mu_lb < 0


def test_soundness_rate_over_repetitions() -> None:
    """Empirical false-alarm rate of mu_lb > mu at alpha = 0.1 over 100 small audits is <= alpha."""
    rng = np.random.default_rng(11)
    mu, alpha, reps = 0.8, 0.1, 100
    bad = 0
    for i in range(reps):
        x = rng.standard_normal(1000)
        y = rng.standard_normal(1000) + mu
        bad += audit_scores(x, y, alpha=alpha, seed=i).mu_lb > mu
    # binomial(100, 0.1) exceeds 21 with probability < 1e-3
    assert bad <= 21


def test_eps_lb_on_atoms() -> None:
    """A two-atom mechanism (randomised response with eps = log 3): the atom test is found."""
    rng = np.random.default_rng(5)
    n = 200_000
    x = (rng.random(n) < 0.25).astype(float)
    y = (rng.random(n) < 0.75).astype(float)
    res = audit_scores(x, y, alpha=1e-3, delta=1e-5, seed=0)
    assert res.eps_lb <= math.log(3)
    assert res.eps_lb >= math.log(3) - 0.05


def test_a_test_that_certifies_nothing_reports_mu_lb_zero() -> None:
    # equal constant scores: every threshold has FPR_u = 1 or FNR_u = 1 (mu_lb_gdp = -inf, which
    # nan_to_num had turned into -1.8e308); the report says 0, the bound every mechanism meets
    assert mu_lb_gdp(0.3, 1.0) == -math.inf and mu_lb_gdp(1.0, 0.0) == -math.inf
    res = audit_scores(np.zeros(20), np.zeros(20), delta=1e-5, alpha=0.05)
    assert res.mu_lb == 0.0 and res.best_mu_test is not None
    assert res.best_mu_test.to_json()["mu_lb"] == 0.0
    assert res.best_mu_test.to_json()["eps_lb"] is None  # not computed for the mu test
