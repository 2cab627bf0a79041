"""One-run audit (Steinke, Nasr, Jagielski 2023): lastiterate.audit.one_run, audit canary --one-run.

Independent sources:

* the tail bound is recomputed here by brute force from binomial coefficients (math.comb, exact
  integer sums), and for delta = 0 it must EQUAL the exact tail of eps-DP randomized response (the
  extremal eps-DP mechanism), computed by enumerating every sign vector and output on small m;
* a (eps, delta)-DP mechanism with a known tail (reveal S with probability delta, else randomized
  response) must stay below the bound;
* in the trainer tests the gradient canary with a least-squares target of 1e6 is clipped at every
  step, so each canary coordinate of the final model is Gaussian with mean +-T eta C / n and sd
  eta sigma sqrt(T): per canary mu = 2 C sqrt(T) / (n sigma), the GDP composition claim (paper 000
  Thm 4.1) -- the run is exactly as private as claimed, so the one-run bound must stay below it.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from lastiterate.audit.canary import TrainerSpec
from lastiterate.audit.one_run import (
    audit_one_run,
    default_guess_sizes,
    guess_from_scores,
    one_run_bound,
    one_run_epsilon_lb,
    one_run_gradient_canaries,
    one_run_input_canaries,
    one_run_p_value,
)
from lastiterate.cli import main
from lastiterate.errors import ParameterError


# ---------------------------------------------------------------------- the statistic
def _brute_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """Thm 5.2 / Cor 5.4 summed term by term from binomial coefficients."""
    q = math.exp(eps) / (1 + math.exp(eps))

    def pmf(k: int) -> float:
        return math.comb(r, k) * q**k * (1 - q) ** (r - k)

    tail = math.fsum(pmf(k) for k in range(v, r + 1))
    best = 0.0
    for i in range(1, v + 1):
        best = max(best, math.fsum(pmf(k) for k in range(v - i, v)) / i)
    return min(1.0, tail + 2 * m * delta * best)


@pytest.mark.parametrize("delta", [0.0, 1e-5, 1e-2])
@pytest.mark.parametrize("eps", [0.0, 0.3, 1.0, 2.5])
def test_p_value_matches_brute_force_binomial(eps: float, delta: float) -> None:
    for m, r, v in [(10, 10, 7), (20, 8, 8), (30, 12, 3), (12, 6, 0), (40, 40, 31)]:
        ours = one_run_p_value(m, r, v, eps, delta)
        assert ours == pytest.approx(_brute_p_value(m, r, v, eps, delta), rel=1e-9, abs=1e-15)


def test_p_value_is_the_exact_tail_of_randomized_response_for_pure_dp() -> None:
    """eps-DP randomized response on m canaries (output Y_i = S_i w.p. q), guesser T_i = Y_i on r
    of them: enumerate every (S, Y) and sum the probability of >= v correct guesses."""
    m, r, eps = 5, 4, 0.8
    q = math.exp(eps) / (1 + math.exp(eps))
    for v in range(r + 1):
        total = 0.0
        for S in itertools.product((-1, 1), repeat=m):
            for Y in itertools.product((-1, 1), repeat=m):
                pr = 0.5**m * math.prod(q if y == s else 1 - q for y, s in zip(Y, S, strict=True))
                correct = sum(Y[i] == S[i] for i in range(r))
                total += pr * (correct >= v)
        assert one_run_p_value(m, r, v, eps, 0.0) == pytest.approx(total, rel=1e-12)


def test_bound_holds_for_an_eps_delta_mechanism() -> None:
    """Reveal S with probability delta, else eps-randomized response: (eps, delta)-DP in S; its
    exact tail P[V >= v] = delta + (1 - delta) P[Bin(r, q) >= v] must be below the bound."""
    m, r, eps, delta = 50, 50, 1.0, 1e-3
    q = math.exp(eps) / (1 + math.exp(eps))
    for v in range(r + 1):
        exact = delta + (1 - delta) * math.fsum(
            math.comb(r, k) * q**k * (1 - q) ** (r - k) for k in range(v, r + 1)
        )
        assert exact <= one_run_p_value(m, r, v, eps, delta) + 1e-12


def test_p_value_nondecreasing_in_eps() -> None:
    """The epsilon search relies on it (first crossing = the only crossing)."""
    grid = np.linspace(0, 12, 241)
    for m, r, v, delta in itertools.product((20, 200), (10, 20), (5, 10, 20), (0.0, 1e-5, 1e-2)):
        if v > r or r > m:
            continue
        p = one_run_p_value(m, r, v, grid, delta)
        assert np.all(np.diff(p) >= -1e-12), (m, r, v, delta)


def test_epsilon_lb_is_the_first_crossing() -> None:
    for m, r, v, delta in [(1000, 100, 90, 1e-5), (1000, 200, 200, 1e-5), (50, 50, 45, 0.0)]:
        e = one_run_epsilon_lb(m, r, v, delta=delta, alpha=0.05)
        assert e > 0
        assert one_run_p_value(m, r, v, e, delta) < 0.05
        assert one_run_p_value(m, r, v, e + 1e-6, delta) >= 0.05
    # chance-level guessing rejects nothing
    assert one_run_epsilon_lb(1000, 100, 55, delta=1e-5) == 0.0
    assert one_run_epsilon_lb(10, 0, 0, delta=1e-5) == 0.0


def test_coverage_on_randomized_response() -> None:
    """Monte Carlo: eps-RR canaries, the bound exceeds the true eps in at most ~alpha of trials."""
    rng = np.random.default_rng(0)
    eps, m, trials, alpha = 1.0, 400, 300, 0.05
    q = math.exp(eps) / (1 + math.exp(eps))
    over = 0
    for _ in range(trials):
        S = np.where(rng.random(m) < 0.5, -1, 1)
        Y = np.where(rng.random(m) < q, S, -S)
        score = Y + 1e-3 * rng.standard_normal(m)  # ties broken at random
        best, _ = one_run_bound(score, S, delta=0.0, alpha=alpha, sizes=[m // 2])
        over += best.eps_lb > eps
    assert over / trials <= alpha + 0.04


def test_guesses_and_sizes() -> None:
    t = guess_from_scores([0.1, 5.0, -3.0, 0.2, 2.0], 2, 1)
    assert t.tolist() == [0, 1, -1, 0, 1]
    assert default_guess_sizes(1000) == (10, 20, 50, 100, 200, 500)
    assert default_guess_sizes(3) == (1,)
    with pytest.raises(ParameterError, match="k_plus"):
        guess_from_scores([1.0, 2.0], 2, 1)
    with pytest.raises(ParameterError, match="scores"):
        guess_from_scores([1.0, float("nan")], 1, 0)
    with pytest.raises(ParameterError, match="S"):
        one_run_bound([1.0, 2.0], [1, 0], delta=1e-5)
    with pytest.raises(ParameterError, match="eps"):
        one_run_p_value(10, 5, 3, -1.0, 1e-5)
    with pytest.raises(ParameterError, match="r"):
        one_run_p_value(10, 11, 3, 1.0, 1e-5)


# ---------------------------------------------------------------------- the trainer
N_BASE, D, M = 50, 3, 600
T, LR, C = 10, 0.5, 1.0
N = N_BASE + M


def _sigma_for(mu: float) -> float:
    return 2 * C * math.sqrt(T) / (N * mu)


def _canaries() -> object:
    rng = np.random.default_rng(1)
    X = rng.standard_normal((N_BASE, D))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return one_run_gradient_canaries(X, rng.standard_normal(N_BASE), M, family="least-squares")


def _spec(mu: float) -> TrainerSpec:
    return TrainerSpec(algorithm="gd", lr=LR, clip=C, noise_std=_sigma_for(mu), steps=T)


def test_null_one_run_gives_zero() -> None:
    res = audit_one_run(_canaries().null(), _spec(8.0), seed=3)
    assert res.eps_lb == 0.0
    assert res.verdict == "inconclusive"
    assert all(g.v <= 0.6 * g.r for g in res.guesses)


def test_sound_run_bound_is_positive_and_below_the_claim() -> None:
    """mu = 8 per canary (exact): the guesses are mostly right, eps_lb > 0, and never above the
    claimed epsilon (the composition claim is exact for this run)."""
    res = audit_one_run(_canaries(), _spec(8.0), seed=0)
    assert res.claim_eps is not None
    assert res.claim_bound == "gdp-composition"
    assert 0.0 < res.eps_lb <= res.claim_eps
    assert res.verdict == "ok"
    json.dumps(res.to_json(), allow_nan=False)


def test_mutated_trainer_noise_over_100_is_flagged() -> None:
    """Claim mu = 0.5 (epsilon ~ 2 at 1e-5); the trainer draws sigma/100: VIOLATION."""
    spec = _spec(0.5)
    sound = audit_one_run(_canaries(), spec, seed=0)
    assert sound.eps_lb <= sound.claim_eps
    res = audit_one_run(_canaries(), spec, seed=0, noise_scale=0.01)
    assert res.eps_lb > res.claim_eps > 0
    assert res.verdict == "VIOLATION"
    assert res.best.v == res.best.r  # every guess right


def test_input_canaries_on_a_glm() -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] > 0).astype(int)
    Xp = rng.standard_normal((300, 4))
    Xp /= np.linalg.norm(Xp, axis=1, keepdims=True)
    yp = (Xp[:, 0] > 0).astype(int)
    can = one_run_input_canaries(X, y, Xp, yp, family="binary-logistic")
    assert can.n == 500 and can.m == 300
    spec = TrainerSpec(algorithm="gd", lr=1.0, clip=1.0, noise_std=0.01, steps=20)
    res = audit_one_run(can, spec, seed=0)
    assert 0 <= res.eps_lb <= res.claim_eps
    assert audit_one_run(can.null(), spec, seed=0).eps_lb == 0.0


# ---------------------------------------------------------------------- CLI
def test_cli_one_run(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "audit", "canary", "--one-run", "--canaries", "200", "--dataset", "breast-cancer",
        "--model", "logreg", "--algorithm", "gd", "--steps", "10", "--lr", "1",
        "--noise-std", "0.03", "--clip", "1", "--feature-norm", "1", "--json",
    ]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["m"] == 200 and out["claim_eps"] > 0 and out["eps_lb"] <= out["claim_eps"]
    assert main([*argv[:-1], "--noise-scale", "0.001"]) == 1  # mutation: VIOLATION
    capsys.readouterr()


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--canaries", "1"], "canaries"),
        (["--runs", "100"], "--runs"),
        (["--guesses", "0"], "guesses"),
        (["--guesses", "150"], "guesses"),
        (["--canaries", "20000"], "canaries"),
        (["--canary", "input"], "canaries"),  # breast-cancer has 114 test rows < 200
    ],
)
def test_cli_one_run_bad_input(
    extra: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "audit", "canary", "--one-run", "--dataset", "breast-cancer", "--model", "logreg",
        "--algorithm", "gd", "--steps", "2", "--lr", "1", "--noise-std", "0.01", "--clip", "1",
        "--canaries", "200",
    ]  # fmt: skip
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_cli_one_run_flags_need_one_run(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "audit", "canary", "--dataset", "breast-cancer", "--model", "logreg", "--algorithm",
        "gd", "--steps", "2", "--lr", "1", "--noise-std", "0.01", "--clip", "1",
        "--canaries", "200",
    ]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--canaries only applies with --one-run" in err[0]
    assert main(["audit", "auto", "--n", "10", "--steps", "2", "--lr", "0.1", "--noise-std",
                 "1", "--sensitivity", "1", "--one-run"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--one-run only applies to the canary scenario" in err[0]
