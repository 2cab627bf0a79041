"""f-DP refinement of the one-run audit (Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235).

Independent sources:

* exactly solvable mechanisms: eps-randomized response (the extremal eps-DP mechanism: v correct
  out of r is exactly Binomial(r, e^eps / (1 + e^eps))) and the Gaussian mechanism with the sign
  guesser (exactly Binomial(r, Phi(mu / 2))); tails from scipy.stats.binom.  A rejected curve
  must have a tail below alpha; for randomized response the f-DP bound is nearly exact, so the
  tail must also be close to alpha (the test fails if the bound is too loose or too tight);
* a Monte Carlo of m Gaussian canaries drawn exactly from a mu-GDP mechanism, ranked guesses as in
  the audit: the lower bound exceeds the true mu at most at the rate alpha, and is not vacuous;
* the paper's main claim (at least as tight as Steinke-Nasr-Jagielski on the same observations),
  on a grid, against :func:`one_run_epsilon_lb` (itself checked against exact binomial tails);
* google-deepmind/jax_privacy's pinned values of ``CanaryScoreAuditor.epsilon_one_run_fdp``
  (tests/auditing_test.py: 10,000 deterministic-normal scores per world, significance 0.05,
  delta 1e-6, Bonferroni over the ROC hull): 2.164749 (shift 1), 4.7218075 (shift 2), 9.133752
  (shift 4).  The paper's text was not available here, so the peer library stands in for its
  worked example; its harness (hull of the ROC staircase, guesses above a threshold) is rebuilt
  below from its description, and our recursion and GDP conversion are used inside it;
* a plain scalar transcription of the recursion (the paper's definition, no vectorisation or
  early exit) for the vectorised statistic.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import special, stats

from lastiterate.audit.canary import TrainerSpec
from lastiterate.audit.one_run import (
    audit_one_run,
    eps_delta_inverse_blowup,
    fdp_one_run_epsilon_lb,
    fdp_one_run_mu_lb,
    fdp_one_run_rejects,
    fdp_one_run_statistic,
    gdp_inverse_blowup,
    one_run_epsilon_lb,
    one_run_fdp_bound,
    one_run_gradient_canaries,
)
from lastiterate.audit.stats import clopper_pearson_upper, epsilon_of_gdp
from lastiterate.cli import main
from lastiterate.errors import ParameterError

ALPHA = 0.05


def _gdp_tradeoff(mu: float):  # type: ignore[no-untyped-def]
    return lambda x: stats.norm.cdf(stats.norm.ppf(1 - np.asarray(x)) - mu)


# ---------------------------------------------------------------------- the recursion
def _scalar_statistic(m: int, r: int, v: int, inv, tau: float) -> float:  # type: ignore[no-untyped-def]
    """The paper's recursion written out: r_v = tau v/m, h_v = tau (r-v)/m, i = v-1..0."""
    rr, hh = tau * v / m, tau * (r - v) / m
    for i in range(v - 1, -1, -1):
        h_new = max(hh, float(inv(rr)))
        rr = min(1.0, rr + i / (r - i) * (h_new - hh))
        hh = h_new
    return rr + hh - r / m


def test_inverse_blowups_are_the_tradeoff_at_one_minus_y() -> None:
    y = np.linspace(0, 1, 101)
    for mu in (0.0, 0.3, 1.0, 4.0):
        expect = _gdp_tradeoff(mu)(1 - y)  # G_mu(x) = Phi(Phi^-1(1 - x) - mu) at x = 1 - y
        assert np.allclose(gdp_inverse_blowup(y, mu), expect, atol=1e-12)
    for eps, delta in [(0.0, 0.0), (1.0, 1e-5), (3.0, 0.1), (50.0, 1e-5)]:
        x = 1 - y
        f = np.maximum.reduce(
            [np.zeros_like(x), 1 - delta - np.exp(eps) * x, np.exp(-eps) * (1 - delta - x)]
        )
        assert np.allclose(eps_delta_inverse_blowup(y, eps, delta), f, atol=1e-12)
    huge = eps_delta_inverse_blowup(y, 800.0, 1e-5)  # e^800 overflows: no NaN at y = 1
    assert np.all(np.isfinite(huge)) and huge[-1] == pytest.approx(1 - 1e-5) and huge[-2] == 0


def test_vectorised_statistic_has_the_sign_of_the_scalar_recursion() -> None:
    """Rows of different (r, v, alpha) and a grid of candidates in one call: the sign (the
    decision) equals the scalar recursion's; where the loop ran to the end the value too."""
    rng = np.random.default_rng(5)
    m = 300
    r = np.array([20, 100, 300, 7])
    v = np.array([19, 70, 200, 7])
    a = np.array([0.05, 0.01, 0.2, 0.05])
    mus = np.linspace(0.0, 3.0, 31)
    got = fdp_one_run_statistic(
        m, r, v, lambda y: special.ndtr(special.ndtri(y) - mus), a, mus.size
    )
    assert got.shape == (4, 31)
    for k in range(4):
        for j, mu in enumerate(mus):
            ref = _scalar_statistic(
                m, int(r[k]), int(v[k]), lambda y, mu=mu: gdp_inverse_blowup(y, mu), a[k]
            )
            assert (got[k, j] > 0) == (ref > 0), (k, mu, got[k, j], ref)
            if ref <= 0:
                assert got[k, j] == pytest.approx(ref, abs=1e-12)
    for _ in range(20):  # random cases, also through the public decision for a callable f
        mm = int(rng.integers(20, 400))
        rr = int(rng.integers(1, mm + 1))
        vv = int(rng.integers(0, rr + 1))
        mu = float(rng.uniform(0, 3))
        ref = _scalar_statistic(mm, rr, vv, lambda y, mu=mu: gdp_inverse_blowup(y, mu), ALPHA)
        assert fdp_one_run_rejects(mm, rr, vv, _gdp_tradeoff(mu), alpha=ALPHA) == (ref > 0)


def test_statistic_is_monotone_where_the_search_relies_on_it() -> None:
    """More correct guesses or a larger tau never un-reject; a larger mu never rejects more."""
    m, r = 200, 100
    mus = np.linspace(0, 3, 61)

    def stat(v: int, tau: float) -> np.ndarray:
        return fdp_one_run_statistic(
            m, r, v, lambda y: special.ndtr(special.ndtri(y) - mus), tau, mus.size
        )[0]

    prev = None
    for v in range(50, 101, 5):
        rej = stat(v, ALPHA) > 0
        assert np.all(np.diff(rej.astype(int)) <= 0)  # rejected set is [0, mu*]
        if prev is not None:
            assert np.all(rej >= prev)
        prev = rej
    for v in (70, 90, 100):
        rej = np.array([stat(v, t) > 0 for t in (0.01, 0.05, 0.1, 0.2)])
        assert np.all(np.diff(rej.astype(int), axis=0) >= 0)


# ---------------------------------------------------------------------- exactly solvable cases
GRID = [(10, 10, 10), (50, 50, 45), (200, 200, 150), (1000, 1000, 750), (1000, 100, 90),
        (200, 20, 18), (1000, 1000, 1000), (300, 60, 50)]  # fmt: skip


@pytest.mark.parametrize("m, r, v", GRID)
def test_pure_dp_bound_against_the_exact_randomized_response_tail(m: int, r: int, v: int) -> None:
    """(eps, 0)-curves: eps-RR guessing r canaries gets exactly Binomial(r, q) right.  The
    rejected eps must have tail < alpha (soundness) and the bound is nearly exact here: the tail
    at the returned eps is above 0.75 alpha (a looser analysis would fail this)."""
    e = fdp_one_run_epsilon_lb(m, r, v, delta=0.0, alpha=ALPHA, curve="eps-delta")
    assert e > 0
    tail = stats.binom.sf(v - 1, r, special.expit(e))
    assert 0.75 * ALPHA < tail < ALPHA
    # the Steinke et al. bound is the exact tail inversion for delta = 0: never below ours
    assert e <= one_run_epsilon_lb(m, r, v, delta=0.0, alpha=ALPHA) + 1e-9


@pytest.mark.parametrize("m, r, v", GRID)
def test_gdp_bound_against_the_exact_gaussian_sign_guesser(m: int, r: int, v: int) -> None:
    """mu-GDP Gaussian canaries, guess sign(Y_i) on r of them: exactly Binomial(r, Phi(mu/2))."""
    mu = fdp_one_run_mu_lb(m, r, v, alpha=ALPHA)
    assert mu > 0
    assert stats.binom.sf(v - 1, r, special.ndtr(mu / 2)) < ALPHA


def test_coverage_on_simulated_gdp_canaries() -> None:
    """m canaries Y_i = S_i mu/2 + N(0, 1): exactly mu-GDP in each sign.  Ranked guesses (the
    audit's, default sizes, Bonferroni): mu_lb > mu in at most ~alpha of the seeds, and the
    bound is informative (mean above 0.3 mu; 0.47 mu measured)."""
    rng = np.random.default_rng(11)
    m, mu, seeds = 400, 1.0, 60
    lbs = []
    for _ in range(seeds):
        S = np.where(rng.random(m) < 0.5, -1, 1)
        best, allg = one_run_fdp_bound(S * mu / 2 + rng.standard_normal(m), S, delta=1e-5)
        assert best.mu_lb == max(g.mu_lb for g in allg)
        lbs.append(best.mu_lb)
    lb = np.array(lbs)
    assert np.count_nonzero(lb > mu) <= ALPHA * seeds + 2
    assert lb.mean() > 0.3 * mu
    # the null: nothing leaks, nothing is certified (beyond the alpha rate)
    null = [
        one_run_fdp_bound(rng.standard_normal(m), np.where(rng.random(m) < 0.5, -1, 1),
                          delta=1e-5)[0].mu_lb
        for _ in range(20)
    ]  # fmt: skip
    assert sum(x > 0 for x in null) <= 2


# ---------------------------------------------------------------------- tighter than Steinke
@pytest.mark.parametrize("m", [100, 1000])
def test_at_least_as_tight_as_steinke_nasr_jagielski(m: int) -> None:
    """The paper's claim on a grid away from chance level (where the (eps, delta) bound is above
    0.1): the f-DP epsilon (GDP curves) >= the (eps, delta) bound on the same (m, r, v, alpha).
    Near chance level it can be slightly below: (m, r, v) = (1000, 100, 60) gives 0.0435 vs
    0.0495 at delta 1e-5."""
    checked = 0
    for r in (m // 10, m // 2, m):
        for frac in (0.7, 0.85, 1.0):
            v = round(frac * r)
            sj = one_run_epsilon_lb(m, r, v, delta=1e-5, alpha=ALPHA)
            if sj < 0.1:
                continue
            fdp = fdp_one_run_epsilon_lb(m, r, v, delta=1e-5, alpha=ALPHA)
            assert fdp >= sj, (m, r, v, fdp, sj)
            checked += 1
    assert checked >= 6


# ---------------------------------------------------------------------- jax_privacy's pinned values
def _deterministic_normal(shift: float, n: int) -> np.ndarray:
    return stats.norm.ppf((np.arange(n) + 0.5) / n) + shift


def _upper_hull(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the strictly concave upper hull of points sorted by x (monotone chain)."""
    hull: list[int] = []
    for i in range(x.size):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (x[b] - x[a]) * (y[i] - y[a]) - (y[b] - y[a]) * (x[i] - x[a]) >= 0:
                hull.pop()
            else:
                break
        hull.append(i)
    return np.array(hull)


def _jax_privacy_harness(shift: float, n: int = 10_000, delta: float = 1e-6) -> float:
    """Guesses "in" above each threshold of the ROC hull (Bonferroni over its points), thresholds
    visited by decreasing Clopper-Pearson precision bound, skipping those whose raw precision
    cannot beat the best epsilon so far (as the peer does); our mu_lb and GDP conversion."""
    ins, outs = _deterministic_normal(shift, n), _deterministic_normal(0.0, n)
    th = np.concatenate([np.union1d(ins, outs), [np.inf]])
    fn = np.searchsorted(np.sort(ins), th, side="left")
    tn = np.searchsorted(np.sort(outs), th, side="left")
    keep = _upper_hull(fn, tn)
    tp, fp = n - fn[keep], n - tn[keep]
    total = tp + fp
    a = ALPHA / keep.size
    prec = 1 - np.where(total > 0, clopper_pearson_upper(fp, np.maximum(total, 1), a), 1.0)
    best, q = 0.0, 0.5
    for i in np.argsort(-prec, kind="stable"):
        if total[i] == 0 or tp[i] / total[i] <= q:
            continue
        e = epsilon_of_gdp(fdp_one_run_mu_lb(2 * n, int(total[i]), int(tp[i]), alpha=a), delta)
        if e > best:
            best, q = e, float(special.expit(e))
    return best


@pytest.mark.parametrize("shift, pinned", [(1, 2.164749), (2, 4.7218075), (4, 9.133752)])
def test_jax_privacy_pinned_epsilon_one_run_fdp(shift: float, pinned: float) -> None:
    """Ours rounds mu down (resolution ~3e-5 relative): equal to 5e-5, never above."""
    got = _jax_privacy_harness(shift)
    assert got == pytest.approx(pinned, rel=5e-5)
    assert got <= pinned * (1 + 1e-6)


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda: fdp_one_run_mu_lb(0, 0, 0), "m"),
        (lambda: fdp_one_run_mu_lb(10, 11, 3), "r"),
        (lambda: fdp_one_run_mu_lb(10, 5, 6), "v"),
        (lambda: fdp_one_run_mu_lb(10, 5, 3, alpha=0.0), "alpha"),
        (lambda: fdp_one_run_mu_lb(10, 5, 3, alpha=float("nan")), "alpha"),
        (lambda: fdp_one_run_epsilon_lb(10, 5, 3, delta=0.0), "delta"),
        (lambda: fdp_one_run_epsilon_lb(10, 5, 3, delta=1.0, curve="eps-delta"), "delta"),
        (lambda: fdp_one_run_epsilon_lb(10, 5, 3, delta=1e-5, curve="rdp"), "curve"),
        (lambda: fdp_one_run_rejects(10, 5, 3, "G_1"), "tradeoff"),
        (lambda: fdp_one_run_rejects(10, 5, 3, lambda x: 1 - x / 2), "tradeoff"),
        (lambda: fdp_one_run_rejects(10, 5, 3, lambda x: x * np.nan), "tradeoff"),
        (lambda: fdp_one_run_statistic(10, [5, 11], [3, 3], np.sqrt, 0.05), "r"),
        (lambda: fdp_one_run_statistic(10, [5, 4], [3, 5], np.sqrt, 0.05), "v"),
        (lambda: fdp_one_run_statistic(10, 5, 3, np.sqrt, [0.05, 0.1]), "alpha"),
        (lambda: fdp_one_run_statistic(10, 5, 3, np.sqrt, 0.05, candidates=0), "candidates"),
        (lambda: one_run_fdp_bound([1.0, 2.0], [1, 0], delta=1e-5), "S"),
        (lambda: one_run_fdp_bound([1.0, np.inf], [1, -1], delta=1e-5), "scores"),
        (lambda: one_run_fdp_bound([1.0, 2.0], [1, -1], delta=1e-5, sizes=[]), "sizes"),
    ],
)
def test_bad_input_raises_parameter_error(call, needle: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParameterError, match=needle):
        call()


def test_degenerate_observations() -> None:
    assert fdp_one_run_mu_lb(10, 0, 0) == 0.0
    assert fdp_one_run_epsilon_lb(10, 4, 0, delta=1e-5) == 0.0
    assert not fdp_one_run_rejects(10, 4, 0, _gdp_tradeoff(0.0))
    assert fdp_one_run_mu_lb(1, 1, 1) == 0.0  # one canary: P[correct] < 0.05 is impossible
    assert epsilon_of_gdp(0.0, 1e-5) == 0.0
    with pytest.raises(ValueError):
        epsilon_of_gdp(1.0, 0.0)


def test_analysis_of_a_thousand_canaries_is_fast() -> None:
    import time

    rng = np.random.default_rng(0)
    S = np.where(rng.random(1000) < 0.5, -1, 1)
    t0 = time.perf_counter()
    best, _ = one_run_fdp_bound(S * 2.0 + rng.standard_normal(1000), S, delta=1e-5)
    assert best.mu_lb > 0
    assert time.perf_counter() - t0 < 2.0  # ~0.3 s alone; the CI CPU is shared


# ---------------------------------------------------------------------- the audit and the CLI
N_BASE, D, M = 50, 3, 600
T, LR, C = 10, 0.5, 1.0
N = N_BASE + M


def _canaries():  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(1)
    X = rng.standard_normal((N_BASE, D))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return one_run_gradient_canaries(X, rng.standard_normal(N_BASE), M, family="least-squares")


def _spec(mu: float) -> TrainerSpec:
    """Each canary coordinate is exactly N(+-T lr C/n, (lr sigma)^2 T): per-canary mu as given."""
    return TrainerSpec(
        algorithm="gd", lr=LR, clip=C, noise_std=2 * C * math.sqrt(T) / (N * mu), steps=T
    )


def test_audit_reports_the_fdp_bound_below_a_sound_gdp_claim() -> None:
    res = audit_one_run(_canaries(), _spec(1.0), seed=0)
    assert res.claim_mu == pytest.approx(1.0, rel=1e-9)
    assert 0.0 < res.fdp_mu_lb <= res.claim_mu
    assert res.fdp_eps_lb == pytest.approx(epsilon_of_gdp(res.fdp_mu_lb, res.delta))
    assert res.fdp_eps_lb >= res.eps_lb  # tighter than Steinke et al. on the same guesses
    assert res.verdict == "ok"
    assert [g.r for g in res.fdp_guesses] == [g.r for g in res.guesses]
    out = res.to_json()
    json.dumps(out, allow_nan=False)
    assert out["fdp_best"]["mu_lb"] == res.fdp_mu_lb
    text = res.format()
    assert "f-DP refinement" in text and "mu >=" in text


def test_audit_flags_a_mutated_trainer_by_the_fdp_bound() -> None:
    """Claim mu = 1 (epsilon 4.38 at 1e-5); the trainer draws sigma/10 (true mu = 10): the f-DP
    bound rejects the claimed GDP curve (VIOLATION) where the (eps, delta) bound of Steinke et al.
    (3.86 with every guess right) cannot reach the claim with 600 canaries."""
    res = audit_one_run(_canaries(), _spec(1.0), seed=0, noise_scale=0.1)
    assert res.fdp_mu_lb > res.claim_mu
    assert res.eps_lb <= res.claim_eps  # Steinke et al. alone would not have flagged it
    assert res.verdict == "VIOLATION" and "mu_lb" in res.reason


def test_null_audit_certifies_nothing() -> None:
    res = audit_one_run(_canaries().null(), _spec(8.0), seed=3)
    assert res.fdp_mu_lb == 0.0 and res.fdp_eps_lb == 0.0
    assert res.verdict == "inconclusive"


def test_cli_one_run_reports_both(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "audit", "canary", "--one-run", "--canaries", "200", "--dataset", "breast-cancer",
        "--model", "logreg", "--algorithm", "gd", "--steps", "10", "--lr", "1",
        "--noise-std", "0.03", "--clip", "1", "--feature-norm", "1",
    ]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 0 <= out["fdp_mu_lb"] and 0 <= out["fdp_eps_lb"] and out["eps_lb"] <= out["claim_eps"]
    assert len(out["fdp_guesses"]) == len(out["guesses"])
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "Steinke-Nasr-Jagielski" in text and "f-DP refinement" in text
    assert main([*argv, "--alpha", "1.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "alpha" in err[0]
