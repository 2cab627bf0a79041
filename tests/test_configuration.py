"""lastiterate.configuration: the rule that chooses a GLM's private training configuration.

Independent sources: Monte Carlo simulation of the linearised noisy step (the proxy's formulas),
dp_accounting's PLD accountant (every candidate's calibrated noise meets the target), closed-form
expressions of the documented rule, and the accountant re-run on each candidate's Run.
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest

import lastiterate as li
from lastiterate import configuration
from lastiterate.configuration import (
    choose_configuration,
    horizon,
    linearised_noise,
)
from lastiterate.errors import ParameterError
from lastiterate.notions.gdp import gdp_mu
from lastiterate.sklearn import DPLogisticRegression
from lastiterate.train import SeededRunWarning


@pytest.mark.parametrize("lr, l2, T", [(1.5, 0.0, 7), (2.0, 0.05, 40), (0.5, 0.3, 200)])
def test_proxy_formulas_match_a_simulation_of_the_linearised_step(lr, l2, T):
    # x_{t+1} = (1 - lr l2) x_t - lr (g + Z_t), x_0 = 0: mean -g * horizon, std sigma lr sqrt(...)
    rng = np.random.default_rng(0)
    sigma, g, chains = 0.7, 1.0, 200_000
    x = np.zeros(chains)
    for _ in range(T):
        x = (1 - lr * l2) * x - lr * (g + sigma * rng.standard_normal(chains))
    assert -x.mean() == pytest.approx(horizon(lr, l2, T), rel=5e-3)
    assert x.std() == pytest.approx(linearised_noise(sigma, lr, l2, T), rel=5e-3)


def _candidate_run(c: dict, n: int, adjacency: str) -> li.Run:
    return li.Run(
        algorithm=c["algorithm"],
        sampling=c["sampling"],
        n=n,
        batch_size=c["batch_size"],
        steps=c["steps"],
        lr=c["lr"],
        noise_std=c["noise_std"],
        clip=c["clip"],
        adjacency=adjacency,
        **c["geometry"],
    )


def _default_rule(family: str, n: int, d: int, k: int, eps: float, adjacency: str):
    """The rule's configuration with the estimator's defaults (R = 1, delta = 1e-5)."""
    return choose_configuration(
        family,
        n=n,
        n_features=d,
        n_outputs=k,
        epsilon=eps,
        delta=1e-5,
        data_norm=1.0,
        adjacency=adjacency,
    )


@pytest.mark.parametrize(
    "family, n, d, k, eps, adjacency",
    [
        ("multinomial-logistic", 1350, 64, 10, 1.0, "replace"),
        ("binary-logistic", 427, 30, 1, 0.25, "replace"),
        ("binary-logistic", 427, 30, 1, 4.0, "replace"),
        ("multinomial-logistic", 133, 13, 3, 8.0, "add-remove"),
        ("binary-logistic", 5000, 20, 1, 0.5, "add-remove"),
    ],
)
def test_every_candidate_meets_the_target_under_dp_accounting(family, n, d, k, eps, adjacency):
    # every calibrated candidate (not only the winner) is private at the target: its run with
    # every iterate released is T Gaussian mechanisms of sensitivity L/b = 2C/n (replace-one) or
    # C/n (add/remove at rate 1), which dp_accounting composes exactly; the early-stopping
    # candidates are accounted by composition, so dp_accounting's epsilon must meet the target
    cfg = _default_rule(family, n, d, k, eps, adjacency)
    assert cfg.candidates
    for c in cfg.candidates:
        run = _candidate_run(c, n, adjacency)
        sens = (2.0 if adjacency == "replace" else 1.0) * c["clip"] / n
        assert li.account(run, delta=1e-5).result(c["bound"]).epsilon <= eps * (1 + 1e-9)
        if c["strategy"] == "early-stopping":
            acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
            acc.compose(dp_accounting.GaussianDpEvent(c["noise_std"] / sens), c["steps"])
            assert acc.get_epsilon(1e-5) <= eps * (1 + 2e-3)
    # the trained run (tightly calibrated) too, and it is the one the rule picked
    won = next(
        c
        for c in cfg.candidates
        if (c["strategy"], c["algorithm"], c["sampling"])
        == (cfg.strategy, cfg.algorithm, cfg.sampling)
    )
    run = _candidate_run({**won, "noise_std": cfg.noise_std}, n, adjacency)
    assert li.account(run, delta=1e-5).best.epsilon <= eps * (1 + 1e-9)


def test_early_stopping_follows_the_documented_rule():
    n, d, eps = 1350, 64, 1.0
    cfg = choose_configuration(
        "multinomial-logistic",
        n=n,
        n_features=d,
        n_outputs=10,
        epsilon=eps,
        delta=1e-5,
        data_norm=1.0,
    )
    R_eff = math.hypot(1.0, configuration.INTERCEPT_FEATURE)
    p = (d + 1) * 10
    lr = 1.0 / (0.5 * R_eff**2)  # multinomial curvature 1/2
    mu = gdp_mu(eps, 1e-5)
    # mu = 0.268: the growth factor is 8 mu = 2.14; p = 650: the dimension factor is capped at 6
    H = n * mu * min(max(1.0, 8.0 * mu), 8.0) / min(math.sqrt(p), 6.0)
    assert (cfg.strategy, cfg.algorithm, cfg.l2) == ("early-stopping", "gd", 0.0)
    assert cfg.effective_feature_norm == pytest.approx(R_eff) and cfg.n_parameters == p
    assert cfg.lr == pytest.approx(lr) and cfg.steps == math.ceil(H / lr)
    assert cfg.clip == pytest.approx(0.5 * R_eff)
    # composition of T Gaussian steps with sensitivity 2C/n: mu = 2C sqrt(T) / (n sigma)
    mu_run = 2 * cfg.clip * math.sqrt(cfg.steps) / (n * cfg.noise_std)
    assert mu_run == pytest.approx(mu, rel=1e-3) and mu_run <= mu
    # max_steps caps the horizon
    short = choose_configuration(
        "multinomial-logistic",
        n=n,
        n_features=d,
        n_outputs=10,
        epsilon=eps,
        delta=1e-5,
        data_norm=1.0,
        max_steps=3,
    )
    assert short.steps == 3


def test_auto_trains_early_stopping_unless_last_iterate_dominates():
    common = {"n": 427, "n_features": 30, "n_outputs": 1, "delta": 1e-5, "data_norm": 1.0}
    # binary, moderate epsilon: equal clips, plain ratios equal to the calibration precision
    # (sigma_L = sqrt(2 - lr lambda) sigma_E at H = 1/lambda), but early stopping is better at
    # every h > 0
    for eps in (1.0, 4.0):
        mid = choose_configuration("binary-logistic", epsilon=eps, **common)
        ratios = {c["strategy"]: c["noise_to_horizon"] for c in mid.candidates}
        assert ratios["last-iterate"] == pytest.approx(ratios["early-stopping"], rel=0.03)
        li_cand = next(c for c in mid.candidates if c["strategy"] == "last-iterate")
        assert li_cand["eligible"] and li_cand["dominates_early_stopping"] is False
        assert mid.strategy == "early-stopping" and mid.l2 == 0.0
    # small epsilon: lambda would be heavy (lr lambda > 0.2) -> not eligible -> early stopping
    small = choose_configuration("binary-logistic", epsilon=0.25, **common)
    li_cand = next(c for c in small.candidates if c["strategy"] == "last-iterate")
    assert not li_cand["eligible"] and li_cand["lr"] * li_cand["l2"] > 0.2
    assert small.strategy == "early-stopping"
    # multinomial: the certified last-iterate clip is sqrt(2) R_eff against 0.5 R_eff -> ES
    multi = choose_configuration(
        "multinomial-logistic",
        n=1350,
        n_features=64,
        n_outputs=10,
        epsilon=4.0,
        delta=1e-5,
        data_norm=1.0,
    )
    r = {c["strategy"]: c["noise_to_horizon"] for c in multi.candidates}
    assert multi.strategy == "early-stopping" and r["early-stopping"] < r["last-iterate"] / 2
    # add/remove: early stopping only, Poisson at rate 1 over b = n
    ar = choose_configuration("binary-logistic", epsilon=1.0, adjacency="add-remove", **common)
    assert [c["strategy"] for c in ar.candidates] == ["early-stopping"]
    assert (ar.algorithm, ar.sampling, ar.batch_size) == ("sgd", "poisson", 427)


def test_auto_trains_a_dominating_last_iterate_candidate(monkeypatch):
    # the selection's other branch: a last-iterate candidate that dominates is trained
    monkeypatch.setattr(configuration, "dominates", lambda *args: True)
    cfg = choose_configuration(
        "binary-logistic",
        n=427,
        n_features=30,
        n_outputs=1,
        epsilon=1.0,
        delta=1e-5,
        data_norm=1.0,
    )
    assert cfg.strategy == "last-iterate" and cfg.l2 > 0


def _simulate(lr, l2, T, h, sigma, x_star, chains=200_000):
    """Monte Carlo of x -> x - lr (h (x - x*) + l2 x + Z) from 0: mean and std after T steps."""
    rng = np.random.default_rng(1)
    x = np.zeros(chains)
    for _ in range(T):
        x = x - lr * (h * (x - x_star) + l2 * x + sigma * rng.standard_normal(chains))
    return x.mean(), x.std()


@pytest.mark.parametrize(
    "lr, l2, T, h", [(3.0, 0.0, 13, 0.05), (3.0, 0.02, 80, 0.1), (1.0, 0.1, 30, 0.5)]
)
def test_curvature_ratio_matches_a_simulation(lr, l2, T, h):
    # noise_to_horizon at curvature h is (std / mean) * h x*, both by simulation
    sigma, x_star = 0.4, 2.0
    mean, std = _simulate(lr, l2, T, h, sigma, x_star)
    assert std / mean * h * x_star == pytest.approx(
        configuration.noise_to_horizon(sigma, lr, l2, T, h), rel=1e-2
    )
    # at h = 0 it is the plain proxy
    assert configuration.noise_to_horizon(sigma, lr, l2, T) == pytest.approx(
        linearised_noise(sigma, lr, l2, T) / horizon(lr, l2, T)
    )


def test_early_stopping_beats_the_converged_run_at_every_curvature():
    # small steps (the continuous limit): early stopping at H with noise s and the converged run
    # with lambda = 1/H and noise sqrt(2) s have the same plain ratio, and at x = h H the squared
    # ratio ES / LI is (x/2) coth(x/2) / (1 + x) < 1 (docs/sklearn.md); simulated independently
    lr, H, s = 0.01, 50.0, 1.0
    T_es, lam = round(H / lr), 1.0 / H
    T_li = round(math.log(1e4) / (lr * lam))
    es = {"noise_std": s, "lr": lr, "l2": 0.0, "steps": T_es}
    li_ = {"noise_std": math.sqrt(2) * s, "lr": lr, "l2": lam, "steps": T_li}
    r0 = [
        configuration.noise_to_horizon(c["noise_std"], c["lr"], c["l2"], c["steps"])
        for c in (es, li_)
    ]
    assert r0[0] == pytest.approx(r0[1], rel=1e-2)
    for x in (0.1, 1.0, 5.0, 20.0):
        h = x / H
        r = [
            configuration.noise_to_horizon(c["noise_std"], c["lr"], c["l2"], c["steps"], h)
            for c in (es, li_)
        ]
        closed = (x / 2) / math.tanh(x / 2) / (1 + x)
        assert (r[0] / r[1]) ** 2 == pytest.approx(closed, rel=2e-2) and closed < 1
    assert not configuration.dominates(li_, es, beta=1.0 / lr)
    # a last-iterate run with clearly less noise does dominate (the test can fail both ways)
    assert configuration.dominates({**li_, "noise_std": 0.3 * s}, es, beta=1.0 / lr)


def test_last_iterate_uses_batches_beyond_the_work_budget(monkeypatch):
    # a problem that does not fit the full-batch work budget: cyclic or uniformly sampled batches
    # (the budget is lowered here so that the sampled-batch calibration stays fast)
    monkeypatch.setattr(configuration, "WORK_BUDGET", 2e6)
    big = choose_configuration(
        "multinomial-logistic",
        n=4000,
        n_features=9,
        n_outputs=3,
        epsilon=2.0,
        delta=1e-5,
        data_norm=1.0,
        max_steps=100,
        strategy="last-iterate",
    )
    assert big.algorithm in ("cgd", "sgd") and big.batch_size < 4000
    assert {c["algorithm"] for c in big.candidates} == {"cgd", "sgd"}
    assert big.steps * big.batch_size * big.n_parameters <= 2e6
    winner = min(big.candidates, key=lambda c: c["noise_to_horizon"])
    assert (winner["algorithm"], winner["sampling"]) == (big.algorithm, big.sampling)
    run = li.Run(
        algorithm=big.algorithm,
        sampling=big.sampling,
        n=4000,
        batch_size=big.batch_size,
        steps=big.steps,
        lr=big.lr,
        noise_std=big.noise_std,
        clip=big.clip,
        strong_convexity=big.l2,
        smoothness=0.5 * big.effective_feature_norm**2 + big.l2,
    )
    assert li.account(run, delta=1e-5).best.epsilon <= 2.0


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"strategy": "fastest"}, "strategy"),
        ({"strategy": "last-iterate", "adjacency": "add-remove"}, "strategy"),
        ({"adjacency": "swap"}, "adjacency"),
        ({"n": 0}, "n"),
        # extreme row norms used to overflow R^2, divide by a zero smoothness or derive a step
        # outside the accepted scale range (tracebacks or a parameter the user never set)
        ({"data_norm": 1e300}, "data_norm"),
        ({"data_norm": 1e-300, "fit_intercept": False}, "data_norm"),
        ({"data_norm": 1e7}, "data_norm"),
        ({"data_norm": float("nan")}, "data_norm"),
    ],
)
def test_refuses_bad_input(kw, name):
    args = {
        "n": 100,
        "n_features": 3,
        "n_outputs": 1,
        "epsilon": 1.0,
        "delta": 1e-5,
        "data_norm": 1.0,
        **kw,
    }
    with pytest.raises(ParameterError) as info:
        choose_configuration("binary-logistic", **args)
    assert info.value.name == name


@pytest.mark.parametrize("R, intercept", [(1e-6, False), (1e-6, True), (1e6, False), (1e6, True)])
@pytest.mark.parametrize("family, k", [("binary-logistic", 1), ("multinomial-logistic", 3)])
def test_extreme_row_norms_in_range_give_a_valid_configuration(R, intercept, family, k):
    cfg = choose_configuration(
        family,
        n=200,
        n_features=3,
        n_outputs=k,
        epsilon=1.0,
        delta=1e-5,
        data_norm=R,
        fit_intercept=intercept,
    )
    for c in cfg.candidates:
        assert math.isfinite(c["noise_std"]) and math.isfinite(c["noise_to_horizon"])
        run = _candidate_run(c, 200, "replace")
        assert li.account(run, delta=1e-5).result(c["bound"]).epsilon <= 1.0 * (1 + 1e-9)


def test_target_bound_range():
    args = {
        "n": 100,
        "n_features": 3,
        "n_outputs": 1,
        "epsilon": 1.0,
        "delta": 1e-5,
        "data_norm": 1.0,
    }
    for B in (0.0, 1e-7, 1e7, float("inf")):
        with pytest.raises(ParameterError) as info:
            choose_configuration("least-squares", target_bound=B, **args)
        assert info.value.name == "target_bound"


def test_proxy_sums_past_the_contraction_regime():
    # sum_t lr a^t and sigma lr sqrt(sum_t a^(2t)) by direct summation, also for a = 0 and a < 0
    for lr, l2, T in [(1.0, 1.0, 5), (1.5, 1.0, 3), (1.9, 1.0, 6), (0.5, 0.0, 4)]:
        a = 1 - lr * l2
        assert horizon(lr, l2, T) == pytest.approx(sum(lr * a**t for t in range(T)))
        ref = 0.3 * lr * math.sqrt(sum(a ** (2 * t) for t in range(T)))
        assert linearised_noise(0.3, lr, l2, T) == pytest.approx(ref)


def test_planned_horizon_stops_shrinking_at_the_dimension_cap():
    # D(p) = min(sqrt(p), 6): 1/sqrt(p) up to p = 36, then flat (pixel-sized models included)
    n, mu = 3000, 0.5
    H = {p: configuration.planned_horizon(n, p, mu) for p in (4, 9, 36, 650, 7850)}
    growth = 4.0  # min(max(1, 8 mu, n mu / 500), 8) at mu = 0.5, n = 3000
    assert H[4] == pytest.approx(n * mu * growth / 2) and H[9] == pytest.approx(n * mu * growth / 3)
    assert H[36] == H[650] == H[7850] == pytest.approx(n * mu * growth / 6)
    assert configuration.planned_horizon(n, 7850, mu, "add-remove") == pytest.approx(
        n * (2 * mu) * 8.0 / 6
    )
    assert configuration.planned_horizon(n, 7850, 0.05, "add-remove") == pytest.approx(n * 0.1 / 6)
    assert configuration.planned_horizon(n, 7850, 2.0, "add-remove") == pytest.approx(
        n * 4.0 * 8.0 / 6
    )


def _growth_before_issue_9(m):
    """The growth in the budget alone, tuned on the small sets: min(max(1, 8 m), 8)."""
    return min(max(1.0, 8.0 * m), 8.0)


def test_horizon_growth_stops_at_its_cap():
    # G = min(max(1, 8 m, n m / 500), 8): for n <= 4000 the budget term decides (1 up to
    # m = 1/8, then 8 m, then 8 from m = 1 on)
    G = configuration.horizon_growth
    assert G(0.05, 1000) == 1.0 and G(0.5, 1000) == pytest.approx(4.0)
    assert G(1.0, 1000) == G(1.7, 1000) == 8.0
    n, p = 1000, 31
    for mu in (0.1, 0.5, 0.9, 1.7):
        for adjacency, m in (("replace", mu), ("add-remove", 2 * mu)):
            H = configuration.planned_horizon(n, p, mu, adjacency)
            assert H == pytest.approx(n * m * _growth_before_issue_9(m) / math.sqrt(p))
    # the noise left per coordinate by the planned early-stopped run: 2C G / D(p), at most
    # 2C * 8 / D, whatever epsilon and n (composition: sigma = 2C sqrt(T) / (n m), std
    # sigma lr sqrt(T)); n = 5000 and 40000 reach the cap through the sample-size term
    for n in (5000, 40000):
        for eps in (0.25, 1.0, 4.0, 16.0, 64.0):
            cfg = choose_configuration(
                "binary-logistic",
                n=n,
                n_features=30,
                n_outputs=1,
                epsilon=eps,
                delta=1e-5,
                data_norm=1.0,
                max_steps=10**6,
            )
            left = linearised_noise(cfg.noise_std, cfg.lr, 0.0, cfg.steps)
            m = gdp_mu(eps, 1e-5)
            bound = 2 * cfg.clip * G(m, n) / math.sqrt(31)
            # T = ceil(H / lr) overshoots H by less than one step
            H = configuration.planned_horizon(n, 31, m)
            assert left == pytest.approx(bound, rel=2e-2 + cfg.lr / H)
            assert left <= 2 * cfg.clip * 8 / math.sqrt(31) * (1.02 + cfg.lr / H)


#: the training sizes of the small tuning sets (benchmarks/rule_tuning.py's defaults: iris, wine,
#: synth2*, german, synth10*, lowrank256b, synth5 / lowrank784 / full784), on which the growth
#: in the budget alone was tuned
SMALL_TUNING_SIZES = (112, 133, 427, 750, 1350, 2250, 3750)


def test_horizon_is_unchanged_on_the_small_tuning_sets():
    # the sample-size term n m / 500 never exceeds max(1, 8 m) for n <= 4000 (8 m >= n m / 500)
    # and m < 1/8 (n m / 500 < 1): the configurations tuned on small sets stay as they were
    for n in SMALL_TUNING_SIZES + (4000,):
        for eps in (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0):
            mu = gdp_mu(eps, 1e-5)
            for adjacency, m in (("replace", mu), ("add-remove", 2 * mu)):
                assert configuration.horizon_growth(m, n) == _growth_before_issue_9(m)
                for p in (5, 31, 650):
                    expected = n * m * _growth_before_issue_9(m) / min(math.sqrt(p), 6.0)
                    assert configuration.planned_horizon(n, p, mu, adjacency) == pytest.approx(
                        expected, rel=1e-12
                    )
    # just above: the sample-size term takes over
    m = 0.5
    assert configuration.horizon_growth(m, 6000) == pytest.approx(6000 * m / 500)
    assert configuration.horizon_growth(m, 6000) > 8 * m


def test_horizon_grows_with_the_effective_sample_size_up_to_the_cap():
    G = configuration.horizon_growth
    ns = np.unique(np.geomspace(10, 1e8, 300).astype(int))
    for m in np.geomspace(1e-3, 20.0, 41):
        growth = np.array([G(m, int(n)) for n in ns])
        assert np.all(np.diff(growth) >= 0) and growth.min() >= 1.0 and growth.max() <= 8.0
        # where the cap does not bind, the sample-size term is n m / 500 exactly
        free = (ns * m / 500 > max(1.0, 8 * m)) & (ns * m / 500 < 8.0)
        assert np.allclose(growth[free], ns[free] * m / 500, rtol=1e-12)
        # the horizon H = n m G / D(p) strictly increases with n
        H = np.array([configuration.planned_horizon(int(n), 114, m) for n in ns])
        assert np.all(np.diff(H) > 0)
        # and the growth never decreases with the budget either
        assert all(G(m, int(n)) <= G(1.1 * m, int(n)) for n in ns[::10])
    assert G(1e-3, 10**8) == 8.0  # huge n m: the cap


def test_large_sets_plan_longer_horizons_at_small_epsilon():
    # an Adult-sized binary fit (n = 32561, d = 113): the rule before issue 9 planned
    # T = 112 / 240 full-batch steps at epsilon 0.25 / 0.5; the sample-size term lengthens both
    n, d = 32561, 113
    R_eff = math.hypot(1.0, configuration.INTERCEPT_FEATURE)
    for eps, before in ((0.25, 112), (0.5, 240)):
        mu = gdp_mu(eps, 1e-5)
        cfg = choose_configuration(
            "binary-logistic",
            n=n,
            n_features=d,
            n_outputs=1,
            epsilon=eps,
            delta=1e-5,
            data_norm=1.0,
        )
        lr = 4.0 / R_eff**2  # binary curvature 1/4
        assert cfg.strategy == "early-stopping" and cfg.lr == pytest.approx(lr)
        H_before = n * mu * _growth_before_issue_9(mu) / 6.0
        assert math.ceil(H_before / lr) == before
        H = n * mu * min(max(1.0, 8.0 * mu, n * mu / 500), 8.0) / 6.0
        assert cfg.steps == math.ceil(H / lr) >= 4 * before
        # the composition bound still meets the target: mu = 2C sqrt(T) / (n sigma) <= mu
        mu_run = 2 * cfg.clip * math.sqrt(cfg.steps) / (n * cfg.noise_std)
        assert mu_run <= mu * (1 + 1e-9) and mu_run == pytest.approx(mu, rel=1e-3)


@pytest.mark.parametrize("adjacency", ["replace", "add-remove"])
def test_least_squares_plans_a_horizon_linear_in_the_budget(adjacency):
    # DPRidge: H = n m / (2 D(p)), no growth (a regression prediction carries the noise itself)
    n, p = 3000, 21
    factor = 2.0 if adjacency == "add-remove" else 1.0
    for eps in (0.5, 1.0, 4.0, 8.0):
        mu = gdp_mu(eps, 1e-5)
        H = configuration.planned_horizon(n, p, mu, adjacency, "least-squares")
        assert H == pytest.approx(n * factor * mu / (2.0 * math.sqrt(p)))
        # the classification horizon is at least twice as long (growth >= 1, scale 1 vs 2)
        assert configuration.planned_horizon(n, p, mu, adjacency) >= 2.0 * H
        cfg = choose_configuration(
            "least-squares",
            n=n,
            n_features=p - 1,
            n_outputs=1,
            epsilon=eps,
            delta=1e-5,
            data_norm=1.0,
            target_bound=1.0,
            adjacency=adjacency,
        )
        assert cfg.strategy == "early-stopping"
        assert cfg.steps == min(3000, math.ceil(H / cfg.lr))


def _regression_split(n, d, noise, seed):
    from sklearn.datasets import make_regression
    from sklearn.model_selection import train_test_split

    X, y = make_regression(n_samples=n, n_features=d, noise=noise, random_state=seed)
    X = (X - X.mean(0)) / X.std(0)
    X = X / np.linalg.norm(X, axis=1).max()
    y = (y - y.mean()) / np.abs(y - y.mean()).max()
    return train_test_split(X, y, test_size=0.25, random_state=0)


@pytest.mark.parametrize(("eps", "floor"), [(1.0, 0.6), (4.0, 0.85)])
def test_dpridge_explains_most_of_the_variance_on_generated_data(eps, floor):
    # 20 informative features, n = 2250: the non-private R^2 is 0.98.  With the classification
    # horizon (growth up to 8, scale 1) DPRidge scores 0.49 / 0.54 at epsilon 1 / 4 on these
    # arrays (3 seeds), noise-dominated; the least-squares horizon scores 0.83 / 0.94
    from lastiterate.sklearn import DPRidge

    Xtr, Xte, ytr, yte = _regression_split(3000, 20, 20.0, 2)
    scores = [
        DPRidge(epsilon=eps, delta=1e-5, random_state=seed).fit(Xtr, ytr).score(Xte, yte)
        for seed in range(3)
    ]
    assert np.mean(scores) > floor


# --------------------------------------------------------------------------------------------
# Sampled early stopping (large n m: the planned horizon needs more than max_steps full batches)
# --------------------------------------------------------------------------------------------


def _dp_accounting_poisson_epsilon(z: float, q: float, steps: int, adjacency: str) -> float:
    """dp_accounting's PLD epsilon of ``steps`` Poisson-sampled Gaussian steps (noise z C on the
    clipped sum; REPLACE_ONE moves the sum by 2C at most, as our replace-one adjacency)."""
    relation = (
        dp_accounting.NeighboringRelation.REPLACE_ONE
        if adjacency == "replace"
        else dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    )
    acc = dp_accounting.pld.PLDAccountant(relation, value_discretization_interval=1e-4)
    event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z))
    acc.compose(dp_accounting.SelfComposedDpEvent(event, steps))
    return float(acc.get_epsilon(1e-5))


@pytest.mark.parametrize("adjacency, eps", [("replace", 4.0), ("add-remove", 1.0)])
def test_sampled_early_stopping_runs_the_planned_horizon(adjacency, eps):
    # a big2-sized binary fit: the planned horizon needs ~10^4 full-batch steps, 3x max_steps
    n, d = 30000, 40
    cfg = _default_rule("binary-logistic", n, d, 1, eps, adjacency)
    mu = gdp_mu(eps, 1e-5)
    lr = 4.0 / cfg.effective_feature_norm**2  # binary curvature 1/4
    H = configuration.planned_horizon(n, d + 1, mu, adjacency)
    b = cfg.batch_size
    assert (cfg.strategy, cfg.algorithm, cfg.sampling) == ("early-stopping", "sgd", "poisson")
    assert cfg.steps == math.ceil(H / lr) > 3000 and cfg.lr == pytest.approx(lr)
    assert b in [256 * 2**j for j in range(8)] and b < n and cfg.steps * b <= 3000 * n
    # private at the target under dp_accounting (Poisson-sampled Gaussian, the sum's noise z C)
    z = cfg.noise_std * b / cfg.clip
    assert _dp_accounting_poisson_epsilon(z, b / n, cfg.steps, adjacency) <= eps * (1 + 2e-3)
    # its noise on the mean gradient is within 1% (+ calibration precision) of the full batch's
    # at the same T: Gaussian composition, mu = s C sqrt(T) / (n sigma), s = 2 (replace) or 1
    s = 2.0 if adjacency == "replace" else 1.0
    sigma_full = s * cfg.clip * math.sqrt(cfg.steps) / (n * mu)
    assert cfg.noise_std <= sigma_full * 1.01 * (1 + 3e-3)
    # and b is the smallest rung that is: half of it fails the tolerance (or is below 256)
    if b > 256:
        run = li.Run(
            algorithm="sgd",
            sampling="poisson",
            n=n,
            batch_size=b // 2,
            steps=cfg.steps,
            lr=cfg.lr,
            noise_std=1.0,
            clip=cfg.clip,
            adjacency=adjacency,
        )
        half = li.calibrate_noise(run, epsilon=eps, delta=1e-5, rtol=1e-3).noise_std
        assert half > sigma_full * 1.01 * (1 - 3e-3)


def test_sampled_early_stopping_respects_the_work_budget_and_can_be_switched_off(monkeypatch):
    n, d, eps = 30000, 40, 4.0
    kw: dict = {"n": n, "n_features": d, "n_outputs": 1, "epsilon": eps, "delta": 1e-5}
    kw["data_norm"] = 1.0
    # max_steps = 100: even the smallest batch's work T * 256 exceeds 100 n, so full batch
    short = choose_configuration("binary-logistic", max_steps=100, **kw)
    assert (short.algorithm, short.steps) == ("gd", 100)
    # a planned horizon within max_steps stays full batch
    assert choose_configuration("binary-logistic", max_steps=10**6, **kw).algorithm == "gd"
    monkeypatch.setattr(configuration, "SAMPLED_RATIO_TOLERANCE", -1.0)
    off = choose_configuration("binary-logistic", **kw)
    assert (off.algorithm, off.steps) == ("gd", 3000)


def test_sampled_early_stopping_fits_and_meets_its_target():
    rng = np.random.default_rng(3)
    n, d = 24000, 10
    w = rng.normal(size=d)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X @ w + 0.1 * rng.normal(size=n) > 0).astype(int)
    with pytest.warns(SeededRunWarning):
        clf = DPLogisticRegression(epsilon=4.0, delta=1e-5, random_state=0).fit(X, y)
    report = clf.privacy_report_
    run = report.run
    assert (run.algorithm, run.sampling) == ("sgd", "poisson") and run.steps > 3000
    assert report.best.epsilon <= 4.0 * (1 + 1e-9)
    assert li.account(run, delta=1e-5).best.epsilon <= 4.0 * (1 + 1e-9)
    assert clf.score(X, y) > 0.9


def test_sampled_early_stopping_only_where_the_sample_size_sets_the_growth():
    # small sets keep the capped full batch: their horizons beyond max_steps were never tuned
    # (full784-shaped, n = 3750 and p = 7850, at epsilon 8 loses 3.9 points at the planned T)
    for adjacency in ("replace", "add-remove"):
        cfg = _default_rule("multinomial-logistic", 3750, 784, 10, 8.0, adjacency)
        assert cfg.steps == 3000 and cfg.batch_size in (None, 3750)
    # the boundary: n m / 500 >= max(1, 8 m), i.e. n >= 4000 for m >= 1/8
    assert configuration.large_sample(1.0, 4000) and not configuration.large_sample(1.0, 3999)
    assert configuration.large_sample(0.05, 10000) and not configuration.large_sample(0.05, 9999)
    for n in SMALL_TUNING_SIZES:
        for eps in (0.25, 1.0, 4.0, 8.0, 16.0):
            mu = gdp_mu(eps, 1e-5)
            assert not configuration.large_sample(mu, n)
            assert not configuration.large_sample(2 * mu, n)
