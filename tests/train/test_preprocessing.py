"""Preprocessing is part of the mechanism (issue 14, section 2).

Independent references: a dense grid over neighbouring rows for the sensitivity, Monte-Carlo draws
of the released statistics on worst-case neighbours, dp_accounting's PLDs for every composition.
"""

from __future__ import annotations

import contextlib
import io
import json
import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as dpl
from dp_accounting.pld.common import DifferentialPrivacyParameters
from dp_accounting.privacy_accountant import NeighboringRelation
from scipy import stats

from lastiterate.accountant import account
from lastiterate.errors import ParameterError
from lastiterate.notions.gdp import gdp_epsilon
from lastiterate.run import Run
from lastiterate.train.data import load_dataset
from lastiterate.train.preprocessing import (
    GaussianMomentsMechanism,
    Preprocessing,
    approximate_dp_gaussian_delta,
    approximate_dp_gaussian_epsilon,
    compose_with_preprocessing,
    meet_budget,
    parse_range,
    preprocess,
    private_moments,
    replace_one_sensitivity2,
    split_budget,
)

DELTA = 1e-5


def _dp_gaussian(mu: float) -> dpl.PrivacyLossDistribution:
    return dpl.from_gaussian_mechanism(
        1.0 / mu, sensitivity=1.0, value_discretization_interval=1e-4
    )


# ---------------------------------------------------------------------- sensitivity
@pytest.mark.parametrize("rho", [0.25, 1.0, 2.0, 4.0, 16.0])
def test_replace_one_sensitivity_is_the_exact_sup_over_a_grid(rho):
    g = np.linspace(-1, 1, 2001)
    a, b = np.meshgrid(g, g)
    grid = ((a - b) ** 2 + rho * (a * a - b * b) ** 2).max()
    k = replace_one_sensitivity2(rho)
    assert grid <= k * (1 + 1e-12)  # never exceeded: an upper bound
    assert grid >= k * (1 - 1e-5)  # and attained (to the grid's resolution): exact


@pytest.mark.parametrize("adjacency", ["replace", "add-remove"])
@pytest.mark.parametrize("d", [1, 7])
def test_claimed_mu_is_the_worst_scaled_change(adjacency, d):
    mech = GaussianMomentsMechanism(d, 0.8, adjacency)
    assert mech.claimed_mu() == pytest.approx(0.8, rel=1e-12)
    rng = np.random.default_rng(1)
    for _ in range(2000):  # random neighbours never exceed the claim
        a = rng.uniform(-1, 1, d) * rng.choice([1.0, 0.0], d) + rng.choice([-1.0, 1.0, 0.0], d) * (
            rng.random(d) < 0.3
        )
        a = np.clip(a, -1, 1)
        b = None if adjacency == "add-remove" else np.clip(rng.uniform(-1, 1, d), -1, 1)
        assert mech.scaled_change(a, b) <= 0.8 * (1 + 1e-12)
    # ... and the worst neighbours attain it
    if adjacency == "add-remove":
        worst = mech.scaled_change(np.ones(d), None)
    else:
        r = mech.rho
        s = (3 - math.sqrt(1 - 2 / r)) / 2 if r >= 2 else 2.0
        worst = mech.scaled_change(np.ones(d), np.full(d, 1 - s))
    assert worst == pytest.approx(0.8, rel=1e-12)


def _worst_neighbours(mech, n, rng):
    base = rng.uniform(-1, 1, (n, mech.d))
    if mech.adjacency == "add-remove":
        return np.vstack([base, np.ones(mech.d)]), base
    r = mech.rho
    s = (3 - math.sqrt(1 - 2 / r)) / 2 if r >= 2 else 2.0
    return np.vstack([base, np.ones(mech.d)]), np.vstack([base, np.full(mech.d, 1 - s)])


def _empirical_mu(mech, D, D2, draws, rng):
    """Release on D and D2 ``draws`` times; the likelihood-ratio statistic of two Gaussians with
    the mechanism's noise has mean shift / std = mu.  Returns (empirical mu, its standard error)."""

    def flat(out):
        return np.concatenate([out["sum"], out["square"], [out["count"]]])

    X1 = np.array([flat(mech.release(D, rng)) for _ in range(draws)])
    X2 = np.array([flat(mech.release(D2, rng)) for _ in range(draws)])
    noise = np.concatenate(
        [
            np.full(mech.d, mech.sigma_sum),
            np.full(mech.d, mech.sigma_square),
            [mech.sigma_count or 1.0],
        ]
    )
    for j in range(2 * mech.d + (mech.sigma_count is not None)):  # the noise stds are those claimed
        v = X1[:, j].var(ddof=1) / noise[j] ** 2
        lo, hi = stats.chi2.ppf([1e-4, 1 - 1e-4], draws - 1) / (draws - 1)
        assert lo < v < hi
    diff = (X1.mean(0) - X2.mean(0)) / noise**2
    t1, t2 = X1 @ diff, X2 @ diff
    emp = (t1.mean() - t2.mean()) / math.sqrt((t1.var(ddof=1) + t2.var(ddof=1)) / 2)
    return emp, math.sqrt(2 / draws + emp**2 / (4 * draws))


@pytest.mark.parametrize("adjacency", ["replace", "add-remove"])
def test_monte_carlo_noise_matches_the_claimed_mu(adjacency):
    """On the worst neighbouring datasets the empirical mu agrees with the claim; a mechanism with
    half the noise (what a wrong sensitivity would give) is detected by the same check."""
    rng = np.random.default_rng(7)
    mech = GaussianMomentsMechanism(3, 1.0, adjacency)
    D, D2 = _worst_neighbours(mech, 50, rng)
    emp, se = _empirical_mu(mech, D, D2, 4000, rng)
    assert abs(emp - mech.claimed_mu()) < 4 * se + 0.02
    half_noise = GaussianMomentsMechanism(3, 2.0, adjacency)  # sigmas halved, still claiming mu = 1
    assert half_noise.sigma_sum == pytest.approx(mech.sigma_sum / 2)
    emp_half, se_half = _empirical_mu(half_noise, D, D2, 4000, rng)
    assert emp_half > mech.claimed_mu() + 4 * se_half + 0.02


def test_statistics_epsilon_matches_dp_accounting_gaussian_mechanism():
    for mu in (0.1, 0.5, 2.0):
        ref = _dp_gaussian(mu).get_epsilon_for_delta(DELTA)
        assert gdp_epsilon(DELTA, mu) == pytest.approx(ref, rel=1e-3)


def test_private_moments_are_accurate_with_a_large_budget_and_clip_to_the_range():
    rng = np.random.default_rng(0)
    X = rng.normal([2.0, -1.0], [0.5, 3.0], (20000, 2))
    lo, hi = np.array([0.0, -20.0]), np.array([4.0, 20.0])
    m = private_moments(X, lo, hi, 1e4, rng=rng)
    clipped = np.clip(X, lo, hi)
    np.testing.assert_allclose(m.mean, clipped.mean(0), atol=1e-3)
    np.testing.assert_allclose(m.std, clipped.std(0), rtol=1e-3)
    a = private_moments(X, lo, hi, 0.5, rng=np.random.default_rng(3))
    b = private_moments(X, lo, hi, 0.5, rng=np.random.default_rng(3))
    c = private_moments(X, lo, hi, 0.5)  # fresh OS entropy by default
    np.testing.assert_array_equal(a.mean, b.mean)
    assert not np.array_equal(a.mean, c.mean)


# ---------------------------------------------------------------------- composition
@pytest.mark.parametrize("eps1,delta1,mu", [(1.0, 5e-6, 0.5), (0.3, 1e-6, 1.0), (3.0, 2e-6, 0.2)])
def test_approximate_dp_with_gaussian_matches_dp_accounting(eps1, delta1, mu):
    ours = approximate_dp_gaussian_epsilon(eps1, delta1, mu, DELTA)
    pair = dpl.from_privacy_parameters(
        DifferentialPrivacyParameters(eps1, delta1), value_discretization_interval=1e-4
    )
    ref = pair.compose(_dp_gaussian(mu)).get_epsilon_for_delta(DELTA)
    assert ours == pytest.approx(ref, rel=1e-5)
    assert approximate_dp_gaussian_delta(ours, eps1, delta1, mu) <= DELTA
    # tighter than basic composition, never below either part
    assert ours <= eps1 + gdp_epsilon(DELTA - delta1, mu)
    assert ours >= max(eps1, gdp_epsilon(DELTA, mu))


def _gd_report():
    run = Run(algorithm="gd", n=500, steps=40, lr=0.5, noise_std=0.05, clip=1.0)
    return run, account(run, delta=DELTA)


def test_gdp_training_composes_exactly_like_two_gaussians():
    _, rep = _gd_report()
    mu_t = rep.best.mu
    assert mu_t is not None
    g = compose_with_preprocessing(rep, Preprocessing("private", "test", 0.4))
    ref = _dp_gaussian(mu_t).compose(_dp_gaussian(0.4)).get_epsilon_for_delta(DELTA)
    assert g.mu == pytest.approx(math.hypot(mu_t, 0.4), rel=1e-12)
    assert g.epsilon == pytest.approx(ref, rel=1e-3) and g.epsilon <= ref * (1 + 1e-6)
    assert (
        g.epsilon > rep.best.epsilon
        and g.covered
        and g.preprocessing_epsilon == gdp_epsilon(DELTA, 0.4)
    )


def test_non_gdp_training_is_never_under_reported():
    """Poisson-subsampled training (no GDP result): the composition is at least the exact PLD of
    the whole mechanism (dp_accounting, replace-one) and not far above it."""
    run = Run(
        algorithm="sgd",
        sampling="poisson",
        n=1000,
        batch_size=50,
        steps=60,
        lr=0.1,
        noise_multiplier=1.0,
        clip=1.0,
    )
    rep = account(run, delta=DELTA)
    assert all(r.mu is None for r in rep.results if r.kind == "bound")
    g = compose_with_preprocessing(
        rep, Preprocessing("private", "test", 0.3), account_at=lambda d1: account(run, delta=d1)
    )
    step = dpl.from_gaussian_mechanism(
        1.0,
        sensitivity=1.0,
        sampling_prob=0.05,
        value_discretization_interval=1e-4,
        neighboring_relation=NeighboringRelation.REPLACE_ONE,
    )
    exact = step.self_compose(60).compose(_dp_gaussian(0.3)).get_epsilon_for_delta(DELTA)
    assert exact * (1 - 1e-4) <= g.epsilon <= 1.5 * exact
    assert g.epsilon >= rep.best.epsilon and len(g.candidates) >= 2
    with pytest.raises(ParameterError):  # nothing to compose exactly and no way to re-account
        compose_with_preprocessing(
            rep.__class__(
                rep.run, rep.query, tuple(r for r in rep.results if not r.rdp), rep.not_applicable
            ),
            Preprocessing("private", "t", 0.3),
        )


def test_free_and_uncovered_preprocessing():
    _, rep = _gd_report()
    free = compose_with_preprocessing(rep, Preprocessing("public-range", "t", 0.0))
    assert free.epsilon == rep.best.epsilon and free.covered
    public = compose_with_preprocessing(rep, Preprocessing("data-public", "t", None))
    assert not public.covered and public.epsilon == rep.best.epsilon and "NOT" in public.method
    with pytest.raises(ParameterError):
        compose_with_preprocessing(rep, Preprocessing("private", "t", 0.3, adjacency="add-remove"))


# ---------------------------------------------------------------------- calibration
def test_budget_split_is_exact_in_gdp():
    s = split_budget(2.0, DELTA, 0.2)
    assert math.hypot(s.statistics_mu, s.training_mu) == pytest.approx(s.mu_total, rel=1e-12)
    assert s.statistics_mu**2 == pytest.approx(0.2 * s.mu_total**2)
    assert gdp_epsilon(DELTA, s.mu_total) == pytest.approx(2.0, rel=1e-9)
    assert "20% of mu^2" in s.describe()
    with pytest.raises(ParameterError):
        split_budget(2.0, DELTA, 1.0)


def test_meet_budget_lowers_the_training_target_until_the_composition_fits():
    s = split_budget(2.0, DELTA, 0.1)
    calls = []

    def composed(
        t,
    ):  # a non-GDP training whose composition costs 0.3 more than the GDP split assumed
        calls.append(t)
        return t + 0.3 + (s.epsilon - s.training_epsilon)

    t, c, rounds = meet_budget(s, composed)
    assert c <= 2.0 and rounds == 2 and t < s.training_epsilon
    with pytest.raises(ParameterError):
        meet_budget(s, lambda t: 10.0)


# ---------------------------------------------------------------------- preprocess()
def test_parse_range():
    lo, hi = parse_range("0,16", 3)
    assert list(lo) == [0, 0, 0] and list(hi) == [16, 16, 16]
    lo, hi = parse_range("0,1;2,3", 2)
    assert list(lo) == [0, 2] and list(hi) == [1, 3]
    for bad in ("1,0", "a,b", "0,1;2,3", "0,inf", (0, float("nan"))):
        with pytest.raises(ParameterError):
            parse_range(bad, 3)


def test_auto_scaling_uses_declared_ranges_or_clips_rows_only():
    digits, rec = preprocess(load_dataset("digits", standardize=False), feature_norm=1.0)
    assert (
        rec.scaling == "public-range"
        and rec.mu == 0.0
        and rec.details["feature_range"] == [0.0, 16.0]
    )
    assert digits.X_train.min() >= 0 and np.linalg.norm(digits.X_train, axis=1).max() <= 1 + 1e-12
    raw = load_dataset("breast-cancer", standardize=False)
    bc, rec = preprocess(raw, feature_norm=1.0)
    assert rec.scaling == "clip-only" and rec.mu == 0.0
    assert "declares no public feature range" in rec.description and rec.description in bc.notes
    with pytest.raises(ParameterError, match="feature_range"):
        preprocess(raw, scaling="private", statistics_mu=0.5)
    with pytest.raises(ParameterError, match="statistics_mu"):
        preprocess(raw, scaling="private", feature_range="0,3000")
    _, rec = preprocess(raw, scaling="private", feature_range="0,3000", statistics_mu=0.5)
    assert rec.mu == pytest.approx(0.5) and rec.covered and "mechanism" in rec.details
    old, rec = preprocess(raw, scaling="data-public")
    assert not rec.covered and "NOT covered" in rec.description
    np.testing.assert_allclose(old.X_train.mean(0), 0, atol=1e-9)


def test_regression_targets_follow_the_scaling():
    raw = load_dataset("diabetes", standardize=False)
    ds, rec = preprocess(raw, target_range="0,400")
    assert np.abs(ds.y_train).max() <= 1 and rec.details["target_range"] == [0.0, 400.0]
    ds, rec = preprocess(
        raw,
        scaling="private",
        feature_range="-1,1",
        target_range="0,400",
        statistics_mu=2.0,
        rng=np.random.default_rng(0),
    )
    assert abs(ds.y_train.mean()) < 0.3 and rec.mu == pytest.approx(2.0)
    ds, rec = preprocess(raw)
    assert any("targets not scaled" in n for n in ds.notes)
    with pytest.raises(ParameterError, match="target_range"):
        preprocess(load_dataset("digits", standardize=False), target_range="0,1")


# ---------------------------------------------------------------------- the train CLI
TRAIN = [
    "train",
    "--model",
    "logreg",
    "--algorithm",
    "gd",
    "--epochs",
    "5",
    "--lr",
    "0.5",
    "--noise-std",
    "0.05",
    "--clip",
    "1",
    "--feature-norm",
    "1",
    "--l2",
    "0.01",
]


def _strict_json(text):
    def no_constants(x):
        raise AssertionError(f"non-standard JSON token {x}")

    return json.loads(text, parse_constant=no_constants)


def _run(args, capsys):
    from lastiterate.cli import main

    capsys.readouterr()
    code = main(args)
    return code, capsys.readouterr()


def test_default_run_reports_the_preprocessing_and_covers_it(capsys):
    code, cap = _run([*TRAIN, "--dataset", "digits", "--json"], capsys)
    out = _strict_json(cap.out)
    assert (
        code == 0
        and out["preprocessing"]["scaling"] == "public-range"
        and out["preprocessing"]["covered"]
    )
    assert (
        out["guarantee"]["covers_preprocessing"]
        and out["guarantee"]["epsilon"] == out["best"]["epsilon"]
    )
    code, cap = _run([*TRAIN, "--dataset", "breast-cancer"], capsys)
    assert code == 0 and "Preprocessing: no feature scaling" in cap.out
    assert "Releasing only the final model is" in cap.out
    # only the non-private diagnostics are flagged NOT covered; the preprocessing and the
    # headline are covered
    flagged = [line for line in cap.out.splitlines() if "NOT covered" in line]
    assert flagged and all(
        "non-private" in line or "private training and test data" in line for line in flagged
    )


def test_private_statistics_are_in_the_headline_epsilon(capsys):
    code, cap = _run(
        [
            *TRAIN,
            "--dataset",
            "breast-cancer",
            "--scaling",
            "private",
            "--feature-range",
            "0,3000",
            "--statistics-mu",
            "0.3",
            "--json",
        ],
        capsys,
    )
    out = _strict_json(cap.out)
    assert code == 0
    mu_t = out["best"]["mu"]
    ref = _dp_gaussian(mu_t).compose(_dp_gaussian(0.3)).get_epsilon_for_delta(DELTA)
    assert out["guarantee"]["epsilon"] == pytest.approx(ref, rel=1e-3)
    assert out["guarantee"]["epsilon"] > out["best"]["epsilon"] and out["guarantee"][
        "preprocessing_mu"
    ] == pytest.approx(0.3)
    code, cap = _run(
        [
            *TRAIN,
            "--dataset",
            "breast-cancer",
            "--scaling",
            "private",
            "--feature-range",
            "0,3000",
            "--statistics-mu",
            "0.3",
        ],
        capsys,
    )
    text = cap.out
    assert "Preprocessing: features standardised with PRIVATE means and variances" in text
    assert "preprocessing included" in text and "Training alone" in text


def test_target_epsilon_splits_the_budget_and_meets_it(capsys):
    args = [a for a in TRAIN if a not in ("--noise-std", "0.05")]
    code, cap = _run(
        [
            *args,
            "--dataset",
            "breast-cancer",
            "--scaling",
            "private",
            "--feature-range",
            "0,3000",
            "--target-epsilon",
            "1.5",
            "--statistics-share",
            "0.25",
            "--json",
        ],
        capsys,
    )
    out = _strict_json(cap.out)
    assert code == 0
    split = out["preprocessing"]["budget_split"]
    assert split["statistics_share"] == 0.25 and out["guarantee"][
        "preprocessing_mu"
    ] == pytest.approx(split["statistics_mu"])
    assert (
        out["guarantee"]["epsilon"] <= 1.5 and out["guarantee"]["epsilon"] > 1.45
    )  # GDP: the split is tight
    assert out["best"]["epsilon"] <= split["training_epsilon"] + 1e-9


def test_data_public_is_labelled_not_covered(capsys):
    code, cap = _run(
        [*TRAIN, "--dataset", "breast-cancer", "--scaling", "data-public", "--json"], capsys
    )
    out = _strict_json(cap.out)
    assert (
        code == 0
        and not out["guarantee"]["covers_preprocessing"]
        and out["preprocessing"]["mu"] is None
    )
    assert "NOT covered" in out["preprocessing"]["description"]
    code, cap = _run([*TRAIN, "--dataset", "breast-cancer", "--scaling", "data-public"], capsys)
    assert "preprocessing NOT covered" in cap.out
    from lastiterate.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "NOT covered" in " ".join(buf.getvalue().split())


@pytest.mark.parametrize(
    "extra",
    [
        ["--dataset", "breast-cancer", "--scaling", "private"],  # no range to clip to
        ["--dataset", "digits", "--feature-range", "1,0"],
        ["--dataset", "digits", "--feature-range", "0,1;0,2"],  # wrong number of pairs
        ["--dataset", "digits", "--scaling", "private", "--statistics-mu", "-1"],
        ["--dataset", "digits", "--target-range", "0,1"],  # classification
    ],
)
def test_bad_preprocessing_input_is_one_line_exit_2(extra, capsys):
    code, cap = _run([*TRAIN, *extra], capsys)
    assert code == 2 and cap.out == "" and len(cap.err.strip().splitlines()) == 1


def test_ledger_records_the_preprocessing_cost(tmp_path, capsys):
    from lastiterate.train.ledger import read_ledger, steps_counted

    led = tmp_path / "privacy.jsonl"
    code, cap = _run(
        [
            *TRAIN,
            "--dataset",
            "breast-cancer",
            "--scaling",
            "private",
            "--feature-range",
            "0,3000",
            "--ledger",
            str(led),
            "--json",
        ],
        capsys,
    )
    out = _strict_json(cap.out)
    recs = read_ledger(led)
    last = recs[-1]
    assert (
        code == 0
        and last["event"] == "preprocessing"
        and last["preprocessing"]["mu"] == pytest.approx(0.5)
    )
    assert last["guarantee_with_preprocessing"]["epsilon"] == out["guarantee"]["epsilon"]
    assert steps_counted(recs, out["run_id"]) == out["steps"]
    code, cap = _run(
        [
            *TRAIN,
            "--dataset",
            "breast-cancer",
            "--scaling",
            "private",
            "--feature-range",
            "0,3000",
            "--checkpoint",
            str(tmp_path / "c.pt"),
            "--resume",
        ],
        capsys,
    )
    assert (
        code == 2
        and "spend their budget twice" in cap.err
        and len(cap.err.strip().splitlines()) == 1
    )
