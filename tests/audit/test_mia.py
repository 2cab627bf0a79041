"""Membership inference against models of the project's trainer (lastiterate.audit.mia,
``lastiterate audit mia``) and the audit plots (``--plot`` of ``audit canary`` and ``audit mia``).

Independent sources: the AUC is checked against the Mann-Whitney U statistic (scipy), LiRA's
statistic against scipy's logit and a hand-computed standardisation, the lower bounds against the
claim of the accountant for the executed run, and two limiting cases: with a huge noise the
private model is independent of its data (members and non-members are exchangeable: AUC ~ 0.5 and
no certified leakage), without noise a logistic model that memorises random labels of 40 points in
40 dimensions is attacked easily (AUC clearly above 0.5).

Cost: about 40 small models (n <= 100, T <= 200) and a few CLI runs: 10-25 s on a loaded 2-core
machine.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import special, stats

from lastiterate.audit.canary import TrainerSpec
from lastiterate.audit.mia import (
    ATTACKS,
    ModelSpec,
    audit_mia,
    evaluate_attack,
    lira_offline_scores,
    logit_confidence,
    membership_split,
    shadow_attack_scores,
)
from lastiterate.cli import main
from lastiterate.errors import NotApplicable, ParameterError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _no_constants(token: str) -> None:
    raise AssertionError(f"non-standard JSON token {token}")


def _random_labels(n: int = 200, d: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian rows on the unit sphere with random binary labels (nothing to learn: a model can
    only memorise its members)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1)[:, None]
    return X, rng.integers(0, 2, n)


# ---------------------------------------------------------------------- attack primitives
def test_roc_auc_and_tpr_at_low_fpr_against_mann_whitney() -> None:
    rng = np.random.default_rng(3)
    mem, non = rng.normal(1.0, 1.0, 300), rng.normal(0.0, 1.0, 400)
    a = evaluate_attack("loss", mem, non, delta=1e-5, alpha=0.05, seed=0)
    fpr, tpr = np.asarray(a.fpr), np.asarray(a.tpr)
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    assert fpr[0] == 0 and tpr[-1] == 1 and fpr[-1] == 1
    u = stats.mannwhitneyu(mem, non).statistic
    assert a.auc == pytest.approx(u / (mem.size * non.size), rel=1e-12)
    # TPR at FPR <= 1e-2: members above the 4th largest non-member score (4 / 400 = 1e-2)
    t = np.sort(non)[-5]
    assert a.tpr_at_fpr["0.01"] == pytest.approx(np.mean(mem > t))
    assert a.tpr_at_fpr["0.001"] == pytest.approx(np.mean(mem > non.max()))
    # a Gaussian shift of 1 is mu = 1 GDP: the certified bound is below it, and positive
    assert 0 < a.mu_lb <= 1.0 and a.eps_lb <= 1.0 * 6
    assert a.test_mu["n_d"] == 200 and a.test_mu["n_dprime"] == 150  # evaluated on the other half
    assert a.test_mu["fpr_l"] <= a.test_mu["fpr"] <= a.test_mu["fpr_u"]


def test_null_scores_certify_nothing() -> None:
    rng = np.random.default_rng(5)
    a = evaluate_attack("loss", rng.normal(size=500), rng.normal(size=500), delta=1e-5, alpha=0.05)
    assert a.eps_lb == 0.0 and a.mu_lb <= 0.0 and abs(a.auc - 0.5) < 0.05


def test_logit_confidence_and_offline_lira_by_hand() -> None:
    p = np.array([[0.2, 0.8], [0.6, 0.4], [1.0, 0.0]])
    phi = logit_confidence(p, [1, 1, 0])
    assert phi[:2] == pytest.approx(special.logit([0.8, 0.4]))
    assert math.isfinite(phi[2]) and phi[2] > 20  # p = 1 clipped, never inf
    out = np.array([[0.0, 1.0, 2.0], [2.0, 3.0, 2.0]])
    target = np.array([1.0, 5.0, 2.0])
    sd = math.sqrt(np.mean([2.0, 2.0, 0.0]))  # per-example variances (ddof 1), pooled
    assert lira_offline_scores(target, out) == pytest.approx([0.0, 3.0 / sd, 0.0])
    with pytest.raises(ParameterError, match="out_phi"):
        lira_offline_scores(target, out[:1])


def test_shadow_attack_learns_per_class_rules() -> None:
    """Class 0 members are confident, class 1 members are NOT (a per-class rule a single global
    attack model could not learn); the per-class models rank the target's members first."""
    rng = np.random.default_rng(1)

    def probs(conf: np.ndarray) -> np.ndarray:
        return np.stack([conf, 1 - conf], axis=1)

    def world(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        c = rng.integers(0, 2, n)
        m = rng.integers(0, 2, n)
        p_true = np.where(m == 1, 0.95, 0.6)
        p_true = np.where(c == 1, 1.55 - p_true, p_true)  # class 1: members LESS confident
        p0 = np.where(c == 0, p_true, 1 - p_true) + rng.normal(0, 0.01, n)
        return probs(np.clip(p0, 0.01, 0.99)), c, m

    shadows = [world(400) for _ in range(3)]
    pt, ct, mt = world(400)
    s = shadow_attack_scores(
        [w[0] for w in shadows], [w[1] for w in shadows], [w[2] for w in shadows], pt, ct
    )
    auc = evaluate_attack("shadow", s[mt == 1], s[mt == 0], delta=1e-5, alpha=0.05).auc
    assert auc > 0.95


def test_membership_split_is_disjoint_and_checked() -> None:
    s = membership_split(100, 20, seed=0)
    rows = np.concatenate([s.members, s.nonmembers, s.shadow_pool])
    assert sorted(rows.tolist()) == list(range(100))
    assert s.members.size == s.nonmembers.size == 20 and s.shadow_pool.size == 60
    with pytest.raises(ParameterError, match="members"):
        membership_split(100, 40, seed=0)  # shadows need more than 40 rows
    with pytest.raises(ParameterError, match="members"):
        membership_split(20, 10, seed=0)
    with pytest.raises(NotApplicable, match="per class"):
        ModelSpec("linreg", 3, 2)


# ---------------------------------------------------------------------- trained models
def test_null_with_huge_noise_gives_no_leakage() -> None:
    """sigma = 1e3 x the clip: the final model is noise, members and non-members exchangeable."""
    X, y = _random_labels(400, 10, seed=2)
    spec = TrainerSpec(algorithm="gd", lr=1.0, clip=1.0, noise_std=1e3, feature_norm=1.0, steps=20)
    res = audit_mia(
        X, y, ModelSpec("logreg", 10, 2), spec, members=100, shadows=2, seed=0, alpha=0.05
    )
    for a in res.private.values():
        assert a.eps_lb == 0.0 and a.mu_lb <= 0.0  # 0 lies within the interval
        assert abs(a.auc - 0.5) < 0.12  # 100 vs 100: sd of the AUC about 0.04
    assert res.eps_lb == 0.0 and res.verdict == "inconclusive"
    # the rigorous one-run bounds over the 100 pairs certify nothing either
    for b in res.rigorous_private.values():
        assert b.eps_lb == 0.0 and b.mu_lb == 0.0 and b.m == 100
    assert res.rigorous_eps_lb == 0.0 and res.rigorous_mu_lb == 0.0


#: 100 members in 100 dimensions with random labels, 100 full-batch steps: without noise the
#: model memorises its members; sigma = 3 gives the claim mu = sqrt(T) 2C / (n sigma) = 1/15
MEMO_SIGMA, MEMO_T, MEMO_N, MEMO_D = 3.0, 100, 100, 100
MEMO_SPEC = TrainerSpec(
    algorithm="gd", lr=4.0, clip=1.0, noise_std=MEMO_SIGMA, feature_norm=1.0, steps=MEMO_T
)


def _memorise(noise_scale: float = 1.0):  # type: ignore[no-untyped-def]
    X, y = _random_labels(400, MEMO_D, seed=0)
    return audit_mia(
        X,
        y,
        ModelSpec("logreg", MEMO_D, 2),
        MEMO_SPEC,
        members=MEMO_N,
        shadows=2,
        seed=0,
        alpha=0.05,
        noise_scale=noise_scale,
    )


@pytest.fixture(scope="module")
def memorised():  # type: ignore[no-untyped-def]
    return _memorise()


def test_non_private_baseline_is_attacked(memorised) -> None:  # type: ignore[no-untyped-def]
    """Measured at seed 0: baseline AUC 0.78 (loss), 0.77 (shadow), 0.66 (lira); train accuracy
    0.91 vs 0.47 held out."""
    b = memorised.baseline
    assert memorised.accuracy["baseline"]["train_accuracy"] > 0.85
    assert b["loss"].auc > 0.7 and b["shadow"].auc > 0.7 and b["lira"].auc > 0.6
    assert max(a.eps_lb for a in b.values()) > 0  # leakage certified without noise
    assert memorised.details["baseline"].startswith("the same trainer")


def test_private_lower_bound_never_exceeds_the_claim(memorised) -> None:  # type: ignore[no-untyped-def]
    r = memorised
    assert r.claim_bound is not None and r.claim_mu is not None and r.claim_eps is not None
    # the claim is the accountant's for the executed run: GDP composition of T steps of
    # sensitivity 2C / n at noise sigma (paper 000 Thm 4.1)
    claim_mu = math.sqrt(MEMO_T) * 2 / (MEMO_N * MEMO_SIGMA)
    assert r.claim_mu == pytest.approx(claim_mu, rel=1e-9)
    assert r.verdict != "VIOLATION" and all(c.verdict != "VIOLATION" for c in r.checks)
    for a in r.private.values():
        assert a.eps_lb <= r.claim_eps and a.mu_lb <= r.claim_mu
        assert abs(a.auc - 0.5) < 0.12
    assert r.eps_lb == max(a.eps_lb for a in r.private.values()) == r.private[r.best_attack].eps_lb
    assert r.mu_lb == max(a.mu_lb for a in r.private.values()) == r.private[r.mu_attack].mu_lb
    assert r.private["loss"].alpha == pytest.approx(0.05 / len(ATTACKS))
    # the rigorous bounds (the verdict's) stay below the claim too
    assert r.rigorous_eps_lb <= r.claim_eps and r.rigorous_mu_lb <= r.claim_mu
    assert r.heuristic_verdict != "VIOLATION"


def test_mutated_trainer_with_almost_no_noise_is_a_violation() -> None:
    """The same check has power: a trainer that draws 1e-4 of the claimed noise (the claim still
    says sigma = 3) memorises like the baseline and the private lower bound exceeds mu = 1/15."""
    r = _memorise(noise_scale=1e-4)
    assert r.verdict == "VIOLATION" and r.mu_lb > r.claim_mu
    assert r.heuristic_verdict == "VIOLATION"  # the heuristic agrees here (informational)
    # the verdict's bound: the rigorous one-run bound over the pairs (seed 0: mu >= 0.35)
    assert r.rigorous_mu_lb > r.claim_mu and r.rigorous_eps_lb > r.claim_eps
    assert "MUTATION TEST" in r.format()


def test_result_json_is_standard_and_rocs_monotone(memorised) -> None:  # type: ignore[no-untyped-def]
    out = json.loads(json.dumps(memorised.to_json(), allow_nan=False))
    for world in ("private", "baseline"):
        assert set(out[world]) == set(ATTACKS)
        for a in out[world].values():
            fpr, tpr = np.asarray(a["roc"]["fpr"]), np.asarray(a["roc"]["tpr"])
            assert fpr.size == tpr.size >= 2
            assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
            assert set(a["tpr_at_fpr"]) == {"0.001", "0.01"}


def test_audit_is_reproducible_with_a_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    X, y = _random_labels(120, 5, seed=4)
    spec = TrainerSpec(algorithm="gd", lr=1.0, clip=1.0, noise_std=0.1, feature_norm=1.0, steps=5)
    ms = ModelSpec("logreg", 5, 2)
    a = audit_mia(X, y, ms, spec, members=30, shadows=2, seed=7, progress=True)
    err = capsys.readouterr().err
    assert "mia: target and shadow models" in err and "/6 [" in err  # 2 x (1 + 2) models
    b = audit_mia(X, y, ms, spec, members=30, shadows=2, seed=7)
    assert a.private["lira"].fpr == b.private["lira"].fpr
    assert a.private["shadow"].auc == b.private["shadow"].auc


# ---------------------------------------------------------------------- CLI
MIA_ARGV = [
    "audit",
    "mia",
    "--dataset",
    "breast-cancer",
    "--model",
    "logreg",
    "--algorithm",
    "gd",
    "--steps",
    "10",
    "--lr",
    "1",
    "--noise-std",
    "0.1",
    "--clip",
    "1",
    "--feature-norm",
    "1",
    "--members",
    "60",
    "--shadows",
    "2",
    "--alpha",
    "0.05",
]


def test_cli_mia_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "mia.png"
    rc = main([*MIA_ARGV, "--json", "--plot", str(png)])
    out = json.loads(capsys.readouterr().out, parse_constant=_no_constants)
    assert rc == 0 and out["verdict"] in ("ok", "inconclusive")
    assert out["members"] == 60 and out["shadows"] == 2 and out["run"]["n"] == 60
    assert out["claim_eps"] is not None and out["eps_lb"] <= out["claim_eps"]
    assert out["rigorous"]["eps_lb"] <= out["claim_eps"] and out["rigorous"]["pairs"] == 60
    assert out["heuristic"]["eps_lb"] == out["eps_lb"]
    assert out["dataset"]["name"] == "breast-cancer" and out["plot"] == str(png)
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 10_000


def test_cli_mia_text_with_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The flags can come from a TOML file (flags on the command line win)."""
    argv = list(MIA_ARGV)
    for flag in ("--members", "--shadows"):
        i = argv.index(flag)
        del argv[i : i + 2]
    cfg = tmp_path / "mia.toml"
    cfg.write_text("members = 60\nshadows = 2\n")
    rc = main([*argv, "--config", str(cfg)])
    text = capsys.readouterr().out
    assert rc == 0 and "Membership inference audit:" in text and "claim (" in text
    assert "baseline  loss" in text and "weak evidence" in text
    assert "rigorous (one-run, Steinke et al. 2023)" in text
    assert "heuristic (Clopper-Pearson over shared-model examples)" in text
    assert "60 members vs 60 non-members, 2 shadow models" in text


def test_cli_mia_alpha_defaults_to_the_help_value(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --alpha the mia scenario uses 1e-3, as ``audit --help`` says (it used to exit 2
    with "alpha=None is invalid")."""
    argv = list(MIA_ARGV)
    i = argv.index("--alpha")
    del argv[i : i + 2]
    rc = main([*argv, "--json"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert json.loads(cap.out)["alpha"] == 1e-3


def test_cli_canary_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(9, 3))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = rng.normal(size=9)
    data = tmp_path / "tiny.npz"
    np.savez(data, X=X, y=y, X_test=X[:2], y_test=y[:2])
    png = tmp_path / "canary.png"
    argv = ["audit", "canary", "--dataset", str(data), "--model", "linreg", "--algorithm", "gd"]
    argv += ["--steps", "4", "--lr", "0.5", "--noise-std", "0.2", "--clip", "1"]
    argv += ["--feature-norm", "1", "--runs", "20", "--plot", str(png)]
    rc = main(argv)
    text = capsys.readouterr().out
    assert rc == 0 and f"Plot written to {png}" in text
    assert png.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize(
    ("extra", "name"),
    [
        (["--shadows", "1"], "shadows"),
        (["--shadows", "65"], "shadows"),
        (["--members", "500"], "members"),
        (["--members", "5"], "members"),
        (["--plot", "out.txt"], "plot"),
        (["--plot", "/nonexistent-dir/x.png"], "plot"),
        (["--runs", "10"], "--runs"),
        (["--canary", "input"], "--canary"),
        (["--one-run"], "--one-run"),
        (["--canaries", "100"], "--canaries"),
        (["--guesses", "5"], "--guesses"),
        (["--n", "10"], "--n"),
        (["--hidden", "8"], "--hidden"),
        (["--adjacency", "add-remove"], "adjacency"),
        (["--noise-scale", "0"], "noise_scale"),
        (["--steps", "20000", "--shadows", "64"], "shadows"),
    ],
)
def test_cli_mia_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str], extra: list[str], name: str
) -> None:
    argv = list(MIA_ARGV)
    if extra[0] in argv:  # replace a flag's value
        i = argv.index(extra[0])
        del argv[i : i + 2]
    rc = main([*argv, *extra])
    cap = capsys.readouterr()
    assert rc == 2 and cap.out == ""
    assert len(cap.err.strip().splitlines()) == 1 and cap.err.startswith("lastiterate: error:")
    assert name in cap.err


def test_cli_mia_refuses_regression(capsys: pytest.CaptureFixture[str]) -> None:
    argv = list(MIA_ARGV)
    argv[argv.index("--model") + 1] = "linreg"
    assert main(argv) == 2
    assert "per class" in capsys.readouterr().err
    argv[argv.index("--model") + 1] = "logreg"
    argv[argv.index("--dataset") + 1] = "diabetes"
    assert main(argv) == 2
    assert "regression" in capsys.readouterr().err


def test_cli_shadow_range_is_the_library_range() -> None:
    from lastiterate.audit import mia
    from lastiterate.cli import audit_mia

    assert (audit_mia.MIN_SHADOWS, audit_mia.MAX_SHADOWS) == (mia.MIN_SHADOWS, mia.MAX_SHADOWS)


def test_cli_other_scenarios_refuse_mia_flags_and_plot(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["audit", "linear", "--algorithm", "gd", "--n", "4", "--lr", "0.1", "--noise-std", "1"]
    base += ["--sensitivity", "1", "--steps", "10"]
    for extra, flag in ((["--shadows", "4"], "--shadows"), (["--plot", "x.png"], "--plot")):
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert flag in err and len(err.strip().splitlines()) == 1
    canary = ["audit", "canary", "--dataset", "digits", "--model", "logreg", "--members", "10"]
    assert main(canary) == 2 and "--members" in capsys.readouterr().err


def test_audit_point_intervals_are_clopper_pearson() -> None:
    """The plotted interval of a test: Clopper-Pearson lower ends (scipy's beta quantiles) at the
    test's level, the upper ends as certified."""
    from lastiterate.plotting import audit_point

    test = {"fpr": 0.1, "fnr": 0.3, "fpr_u": 0.25, "fnr_u": 0.5, "n_d": 50, "n_dprime": 40}
    test["alpha_per_test"] = 0.02
    p = audit_point("t", test)
    assert p["fpr_l"] == pytest.approx(stats.beta.ppf(0.01, 5, 46), rel=1e-9)
    assert p["fnr_l"] == pytest.approx(stats.beta.ppf(0.01, 12, 29), rel=1e-9)
    assert (p["fpr_u"], p["fnr_u"]) == (0.25, 0.5)
