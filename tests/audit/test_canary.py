"""Canary audits of the trainer (lastiterate.audit.canary, ``lastiterate audit canary``).

Independent sources: the gradient canary with a least-squares target of 1e6 is clipped at every
step, so without projection or regularisation the canary coordinate of the final model is exactly
Gaussian: mean +-T eta C / n, sd eta sigma sqrt(T) (computed here by hand), i.e. mu = sqrt(T) 2C /
(n sigma) = the GDP composition claim (paper 000 Thm 4.1).  The statistical lower bounds come from
``audit.stats`` (tested against scipy's binomial in test_audit_stats.py).

Cost: about 6000 small models (n = 10, T = 4 steps), most of them on the vectorised path
(``NoisyRuns``: R models advanced together); the sequential path is compared with it model by
model -- about 10 s on a loaded 2-core machine.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from lastiterate.audit import canary
from lastiterate.audit.canary import (
    GRADIENT_TARGET,
    TrainerSpec,
    audit_canary,
    gradient_canary,
    input_canary,
    model_seed,
    train_scores,
)
from lastiterate.cli import main
from lastiterate.errors import NotApplicable, ParameterError
from lastiterate.train import models
from lastiterate.train.trainer import NoisyMethod

N_BASE, D = 9, 3
N = N_BASE + 1  # with the canary row
T, LR, C, SIGMA = 4, 0.5, 1.0, 0.2
#: the GDP composition claim of NoisyGD (every step sees the canary): sqrt(T) L / (n sigma), L = 2C
CLAIM_MU = math.sqrt(T) * 2 * C / (N * SIGMA)  # = 2
#: stated tightness: with TIGHT_RUNS models per world (half of them choose the threshold),
#: alpha = 0.05, the certified mu_lb of the gradient canary reaches at least this fraction of
#: the claimed mu
TIGHT_RUNS = 1000
TIGHT_FRACTION = 0.75  # measured 0.84 at seed 2; 0.70-0.93 over seeds 100-105
#: the issue's target (80% of the claimed mu) with 4x the models: slow test (about 40 s)
SLOW_RUNS = 4000
SLOW_FRACTION = 0.8


def _base(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_BASE, D))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    return X, rng.normal(size=N_BASE)


@pytest.fixture(scope="module")
def pair():  # type: ignore[no-untyped-def]
    X, y = _base()
    return gradient_canary(X, y, family="least-squares", feature_norm=1.0)


SPEC = TrainerSpec(algorithm="gd", lr=LR, clip=C, noise_std=SIGMA, feature_norm=1.0, steps=T)


def test_gradient_canary_construction(pair) -> None:  # type: ignore[no-untyped-def]
    assert pair.X_in.shape == (N, D + 1) and pair.n == N
    assert np.all(pair.X_in[:N_BASE, D] == 0) and pair.X_in[N_BASE, D] == 1.0
    assert np.array_equal(pair.X_in, pair.X_out)
    assert pair.y_in[-1] == GRADIENT_TARGET and pair.y_out[-1] == -GRADIENT_TARGET
    assert np.array_equal(pair.y_in[:-1], pair.y_out[:-1])
    assert (
        pair.direction is not None
        and pair.direction[D] == 1.0
        and np.count_nonzero(pair.direction) == 1
    )
    # the canary's clipped gradient is exactly -+C e_d, whatever the parameters (a linear loss)
    import torch

    model = pair.new_model()
    model.weight.data.normal_()
    for y, sign in ((pair.y_in, -1.0), (pair.y_out, 1.0)):
        g, clipped = model.clipped_grad_sum(
            torch.as_tensor(pair.X_in[-1:]), torch.as_tensor(y[-1:]), C
        )
        assert clipped == 1
        assert g[0][0].numpy() == pytest.approx(np.eye(D + 1)[D] * sign * C, abs=1e-9)


def test_null_audit_gives_zero_within_its_interval(pair) -> None:  # type: ignore[no-untyped-def]
    res = audit_canary(pair.null(), SPEC, 200, seed=5, alpha=0.05)
    assert not res.inserted
    assert res.eps_lb == 0.0
    assert res.mu_lb <= 0.0 <= res.mu_interval[1]
    assert res.verdict == "inconclusive"
    assert res.claim_mu == pytest.approx(CLAIM_MU, rel=1e-9)


def test_mutated_trainer_half_noise_is_a_violation(pair, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    orig = NoisyMethod._noise

    def half_noise(self, t, sigma, params):  # type: ignore[no-untyped-def]
        return orig(self, t, 0.5 * sigma, params)

    monkeypatch.setattr(NoisyMethod, "_noise", half_noise)
    res = audit_canary(pair, SPEC, 300, seed=11, alpha=0.05)
    assert res.claim_mu == pytest.approx(CLAIM_MU)  # the claim still believes sigma
    assert res.verdict == "VIOLATION"
    assert res.mu_lb > res.claim_mu
    assert any(c.verdict == "VIOLATION" and c.bound == "gdp-composition" for c in res.checks)


@pytest.mark.parametrize("vectorised", [True, False], ids=["vectorised", "sequential"])
def test_mutated_trainer_clip_not_applied_is_a_violation(  # type: ignore[no-untyped-def]
    pair, monkeypatch: pytest.MonkeyPatch, vectorised: bool
) -> None:
    """The clip factor is the trainer's, on both paths: without it the canary's gradient (residual
    ~1e6) is not bounded by C, and the audit must say so."""
    monkeypatch.setattr(models, "_clip_factors", lambda norms, clip: torch.ones_like(norms))
    res = audit_canary(pair, SPEC, 300, seed=11, alpha=0.05, vectorised=vectorised)
    assert res.claim_mu == pytest.approx(CLAIM_MU)  # the claim still believes C
    assert res.verdict == "VIOLATION"
    assert res.mu_lb > res.claim_mu


def test_half_noise_reaches_the_sequential_path_too(pair, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    orig = NoisyMethod._noise

    def half_noise(self, t, sigma, params):  # type: ignore[no-untyped-def]
        return orig(self, t, 0.5 * sigma, params)

    monkeypatch.setattr(NoisyMethod, "_noise", half_noise)
    res = audit_canary(pair, SPEC, 300, seed=11, alpha=0.05, vectorised=False)
    assert res.verdict == "VIOLATION" and res.mu_lb > res.claim_mu


SPECS = {
    "gd": SPEC,
    "gd-projected": replace(SPEC, diameter=0.5, l2=0.1),
    "cgd": replace(SPEC, algorithm="cgd", batch_size=3, steps=None, epochs=2),
    "sgd-poisson": replace(SPEC, algorithm="sgd", sampling="poisson", batch_size=4, steps=6),
    "sgd-uniform": replace(SPEC, algorithm="sgd", sampling="uniform", batch_size=4, steps=6),
}


@pytest.mark.parametrize("name", list(SPECS))
def test_vectorised_scores_equal_the_sequential_trainer(  # type: ignore[no-untyped-def]
    pair, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Model r of a world gets the same seed, batches and noise on both paths: same scores (to
    float rounding), whatever the chunking."""
    spec = SPECS[name]
    seq_out, seq_in, run_s = train_scores(pair, spec, 12, seed=4, vectorised=False)
    monkeypatch.setattr(canary, "MAX_CHUNK", 5)  # 12 models per world: chunks of 5, 5, 2
    assert canary.runs_per_chunk(pair, spec) == 5
    vec_out, vec_in, run_v = train_scores(pair, spec, 12, seed=4, progress=True)
    assert run_v.setting() == run_s.setting()
    np.testing.assert_allclose(vec_out, seq_out, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(vec_in, seq_in, rtol=1e-9, atol=1e-12)
    assert len(set(vec_out.tolist())) == 12


def test_vectorised_input_canary_equals_the_sequential_trainer() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 4))
    X /= np.linalg.norm(X, axis=1)[:, None]
    y = rng.integers(0, 3, 30)
    p = input_canary(X, y, X[0], 1, family="multinomial-logistic", n_outputs=3)
    spec = TrainerSpec(
        algorithm="sgd",
        sampling="shuffle",
        batch_size=8,
        lr=1.0,
        clip=0.5,
        noise_std=0.05,
        feature_norm=0.8,
        l2=0.01,
        epochs=2,
        intercept=True,
    )
    a = train_scores(p, spec, 6, seed=9, vectorised=False)
    b = train_scores(p, spec, 6, seed=9)
    for u, v in zip(a[:2], b[:2]):
        np.testing.assert_allclose(v, u, rtol=1e-9, atol=1e-12)


def test_worker_processes_give_the_same_scores(pair, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(canary, "MAX_CHUNK", 7)  # 20 models per world: 3 chunks per world
    one = train_scores(pair, SPEC, 20, seed=3, noise_scale=0.5)
    two = train_scores(pair, SPEC, 20, seed=3, noise_scale=0.5, jobs=2, progress=True)
    assert np.array_equal(one[0], two[0]) and np.array_equal(one[1], two[1])
    assert one[2].setting() == two[2].setting()
    full = train_scores(pair, SPEC, 20, seed=3)  # noise_scale reached the workers
    assert not np.array_equal(full[1], two[1])
    with pytest.raises(ParameterError, match="jobs"):
        train_scores(pair, SPEC, 20, jobs=0)
    with pytest.raises(ParameterError, match="jobs"):
        train_scores(pair, SPEC, 20, jobs=2, vectorised=False)


def test_gradient_canary_is_sound_and_nearly_tight(pair) -> None:  # type: ignore[no-untyped-def]
    res = audit_canary(pair, SPEC, TIGHT_RUNS, seed=2, alpha=0.05)
    assert res.verdict == "ok", res.format()
    assert res.claim_bound in ("gdp-composition", "pld-composition")
    assert res.claim_mu == pytest.approx(CLAIM_MU, rel=1e-9)
    for c in res.checks:  # never above any claim
        assert c.verdict == "ok"
        assert res.eps_lb <= c.claim_eps
        if c.claim_mu is not None:
            assert res.mu_lb <= c.claim_mu
    assert res.mu_lb >= TIGHT_FRACTION * CLAIM_MU, res.format()
    # the trainer does what the claim assumes: the final canary coordinate is
    # N(+-T eta C/n, (eta sigma)^2 T)
    det = res.details
    shift = T * LR * C / N
    sd = LR * SIGMA * math.sqrt(T)
    assert det["scores_mean_in"] == pytest.approx(shift, abs=4 * sd / math.sqrt(TIGHT_RUNS))
    assert det["scores_mean_out"] == pytest.approx(-shift, abs=4 * sd / math.sqrt(TIGHT_RUNS))
    assert det["scores_sd_in"] == pytest.approx(sd, rel=0.1)
    assert det["scores_sd_out"] == pytest.approx(sd, rel=0.1)


@pytest.mark.slow
def test_gradient_canary_reaches_80_percent_with_4000_runs(pair) -> None:  # type: ignore[no-untyped-def]
    res = audit_canary(pair, SPEC, SLOW_RUNS, seed=7, alpha=0.05)
    assert res.verdict == "ok", res.format()
    assert SLOW_FRACTION * CLAIM_MU <= res.mu_lb <= CLAIM_MU, res.format()


def test_models_are_seeded_per_model_and_reproducible(pair) -> None:  # type: ignore[no-untyped-def]
    a_out, a_in, run = train_scores(pair, SPEC, 10, seed=3)
    # the tqdm bar changes nothing
    b_out, b_in, _ = train_scores(pair, SPEC, 10, seed=3, progress=True)
    assert np.array_equal(a_out, b_out) and np.array_equal(a_in, b_in)
    assert len(set(a_out.tolist())) == 10  # every model has its own noise
    assert run.T == T and run.n == N
    assert len({model_seed(3, w, r) for w in (0, 1) for r in range(100)}) == 200


def test_input_canary_on_logistic_regression() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 4))
    X /= np.linalg.norm(X, axis=1)[:, None]
    y = (X[:, 0] > 0).astype(np.int64)
    p = input_canary(X, y, X[0], 1, family="binary-logistic")
    assert p.y_in[-1] == 0 and p.y_out[-1] == 1 and p.n == 31
    spec = TrainerSpec(
        algorithm="cgd",
        batch_size=8,
        lr=1.0,
        clip=1.0,
        noise_std=0.05,
        feature_norm=1.0,
        l2=0.01,
        epochs=5,
    )
    res = audit_canary(p, spec, 40, seed=0, alpha=0.05)
    assert res.verdict == "ok"  # leakage certified (mu_lb 0.61 at this seed), below the claim
    assert res.claim_mu is not None and 0 < res.mu_lb <= res.claim_mu
    assert res.eps_lb <= res.claim_eps
    # the mislabelled point has a lower loss in the models trained on it
    assert res.details["scores_mean_in"] < res.details["scores_mean_out"]


def test_multinomial_gradient_canary_direction() -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(20, 3))
    y = rng.integers(0, 3, size=20)
    p = gradient_canary(X, y, family="multinomial-logistic", n_outputs=3, feature_norm=2.0)
    W = p.direction.reshape(3, 4)  # type: ignore[union-attr]
    assert W[0, 3] == pytest.approx(1 / math.sqrt(2)) and W[1, 3] == pytest.approx(
        -1 / math.sqrt(2)
    )
    assert np.count_nonzero(W) == 2
    o, i, _ = train_scores(
        p,
        TrainerSpec(algorithm="gd", lr=0.5, clip=0.5, noise_std=0.01, feature_norm=2.0, steps=5),
        10,
        seed=0,
    )
    assert np.all(
        i > o.max()
    )  # low noise: the canary pushes its class-0 weight up, the neighbour class 1


def test_refusals() -> None:
    X, y = _base()
    with pytest.raises(NotApplicable, match="GLM"):
        gradient_canary(X, y, family="mlp")
    with pytest.raises(ParameterError, match="runs"):
        audit_canary(gradient_canary(X, y, family="least-squares"), SPEC, 5)
    with pytest.raises(ParameterError, match="epochs"):
        TrainerSpec(algorithm="gd", lr=0.1, clip=1.0, noise_std=1.0)
    with pytest.raises(ParameterError, match="x_point"):
        input_canary(X, y, np.ones(D + 1), 0.0, family="least-squares")


# ---------------------------------------------------------------------- CLI
def _npz(tmp_path: Path) -> str:
    X, y = _base()
    path = tmp_path / "tiny.npz"
    np.savez(path, X=X, y=y, X_test=X[:2], y_test=y[:2])
    return str(path)


def _argv(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "audit",
        "canary",
        "--dataset",
        _npz(tmp_path),
        "--model",
        "linreg",
        "--algorithm",
        "gd",
        "--steps",
        str(T),
        "--lr",
        str(LR),
        "--noise-std",
        str(SIGMA),
        "--clip",
        str(C),
        "--feature-norm",
        "1",
        *extra,
    ]


def test_cli_canary_json_and_violation_exit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(_argv(tmp_path, "--runs", "30", "--json", "--alpha", "0.05"))
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["verdict"] in ("ok", "inconclusive")
    assert (
        out["claim_mu"] == pytest.approx(CLAIM_MU)
        and out["runs"] == 30
        and out["canary"] == "gradient"
    )
    assert out["mu_lb"] <= out["claim_mu"] and out["model"]["family"] == "least-squares"
    rc = main(
        _argv(tmp_path, "--runs", "300", "--seed", "11", "--alpha", "0.05", "--noise-scale", "0.5")
    )
    text = capsys.readouterr().out
    assert rc == 1
    assert (
        "VIOLATION" in text and "MUTATION TEST" in text and "claim (" in text and "mu  >=" in text
    )


@pytest.mark.parametrize(
    "extra",
    [
        ["--runs", "5"],
        ["--n", "10"],
        ["--model", "mlp"],
        ["--adjacency", "add-remove"],
        ["--canary", "bogus"],
        ["--samples", "100"],
        ["--scaling", "private"],
        ["--noise-scale", "0"],
        ["--jobs", "0"],
        ["--jobs", "2", "--one-run"],
    ],
)
def test_cli_canary_bad_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    argv = _argv(tmp_path)
    if extra[0] == "--model":
        argv[argv.index("--model") + 1] = extra[1]
        extra = []
    rc = main([*argv, *extra])
    cap = capsys.readouterr()
    assert rc == 2 and cap.out == ""
    assert len(cap.err.strip().splitlines()) == 1 and cap.err.startswith("lastiterate: error:")


def test_cli_canary_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outs = []
    for jobs in ("1", "2"):
        assert main(_argv(tmp_path, "--runs", "30", "--json", "--jobs", jobs)) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0]["mu_lb"] == outs[1]["mu_lb"] and outs[0]["test"] == outs[1]["test"]
    assert "2 worker processes" in outs[1]["details"]["training"]
    # mia trains its own models: --jobs is refused there, not ignored
    rc = main(
        [
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
            "--jobs",
            "2",
        ]
    )
    cap = capsys.readouterr()
    assert rc == 2 and "--jobs" in cap.err and len(cap.err.strip().splitlines()) == 1


def test_cli_other_scenarios_refuse_canary_flags(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "audit",
            "linear",
            "--algorithm",
            "gd",
            "--n",
            "4",
            "--lr",
            "0.1",
            "--noise-std",
            "1",
            "--sensitivity",
            "1",
            "--steps",
            "10",
            "--dataset",
            "digits",
        ]
    )
    cap = capsys.readouterr()
    assert rc == 2 and "--dataset" in cap.err and len(cap.err.strip().splitlines()) == 1


def test_cli_canary_degenerate_tests_print_finite_standard_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a chosen test at FNR = 1 printed mu_lb = -1.8e308 (-inf through nan_to_num), the point
    # estimate NaN ('nan' in the test's JSON, a RuntimeWarning) and mu_fraction "-inf"
    def reject(token: str) -> None:
        raise AssertionError(f"non-standard JSON token {token}")

    degenerate = 0
    for seed in ("2", "3", "4"):
        argv = _argv(tmp_path, "--runs", "10", "--alpha", "0.9", "--noise-scale", "100")
        argv += ["--seed", seed]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert main([*argv, "--json"]) == 0
            out = json.loads(capsys.readouterr().out, parse_constant=reject)
            assert main(argv) == 0
        text = capsys.readouterr().out
        assert not re.search(r"\b(nan|inf|infinity)\b", text, re.IGNORECASE), text
        values = [out["mu_lb"], out["mu_point"], out["mu_fraction"], *out["mu_interval"]]
        values += list(out["test"].values())
        assert not {"-inf", "nan"} & {v for v in values if isinstance(v, str)}, out
        assert all(abs(v) < 1e300 for v in values if isinstance(v, float)), out
        if out["test"]["fnr"] == 1.0:
            degenerate += 1
            assert out["mu_lb"] == 0.0 and out["test"]["mu_lb"] == 0.0 and out["mu_point"] is None
    assert degenerate == 2  # seeds 2 and 3 choose a test at FNR = 1 (else the test tests nothing)


def test_cli_canary_reads_a_csv_dataset_with_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # CSV / Parquet datasets could not be audited: audit had no --target (train's flag)
    X, y = _base()
    table = tmp_path / "tiny.csv"
    rows = [",".join(repr(float(v)) for v in (*x, t)) for x, t in zip(X, y)]
    table.write_text("a,b,c,label\n" + "\n".join(rows) + "\n")
    argv = _argv(tmp_path, "--runs", "30", "--json")
    argv[argv.index("--dataset") + 1] = str(table)
    assert main([*argv, "--target", "label"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["runs"] == 30 and out["model"]["family"] == "least-squares"
    # n = 9 rows: the default test fraction 0.2 keeps 7 for training, plus the canary row
    assert out["run"]["n"] == 8
    for extra in ([], ["--target", "bogus"]):  # no label column, or one the table lacks
        rc = main([*argv, *extra])
        err = capsys.readouterr().err
        assert rc == 2 and len(err.splitlines()) == 1 and "target=" in err, err
    # the table flags are train's: refused for a built-in dataset, as train refuses them
    rc = main([*_argv(tmp_path, "--runs", "30"), "--target", "label"])
    assert rc == 2 and "target" in capsys.readouterr().err
