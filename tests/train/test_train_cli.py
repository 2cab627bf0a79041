"""`lastiterate train`: smoke tests, the JSON contract, and bad input (exit 2, one stderr line)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from lastiterate.cli import main

BASE = [
    "train",
    "--dataset",
    "digits",
    "--model",
    "logreg",
    "--algorithm",
    "cgd",
    "--epochs",
    "3",
    "--batch-size",
    "256",
    "--lr",
    "1.0",
    "--noise-std",
    "0.05",
    "--clip",
    "1",
    "--l2",
    "0.005",
    "--seed",
    "0",
]  # seeded: deterministic


def _json(args, capsys):
    capsys.readouterr()
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def test_json_contract(capsys):
    out = _json([*BASE, "--feature-norm", "0.7", "--json"], capsys)
    for key in (
        "non_private_diagnostics",
        "steps",
        "seconds",
        "run",
        "best",
        "results",
        "not_applicable",
    ):
        assert key in out
    diag = out["non_private_diagnostics"]
    for key in ("train_accuracy", "test_accuracy", "train_loss", "test_loss", "clipped_fraction"):
        assert (
            key in diag and key not in out
        )  # computed from the private data: kept apart, never top level
    assert "NOT covered" in diag["note"]
    assert out["steps"] == 18 and out["run"]["steps"] == 18 and out["run"]["algorithm"] == "cgd"
    assert out["run"]["strong_convexity"] == 0.005 and out["run"]["contraction"] == pytest.approx(
        0.995
    )
    assert out["geometry"]["certified"] and out["best"]["bound"] == "shifted-interpolation"
    assert (
        0.3 < diag["test_accuracy"] <= 1
    )  # default scaling: digits' public pixel range (10 classes, 3 epochs)
    # best / results / not_applicable exactly as account() reports them
    from lastiterate.accountant import account
    from lastiterate.run import Run

    run = Run(
        algorithm="cgd",
        n=out["run"]["n"],
        batch_size=256,
        steps=18,
        lr=1.0,
        noise_std=0.05,
        clip=1.0,
        strong_convexity=0.005,
        smoothness=out["run"]["smoothness"],
    )
    rep = json.loads(json.dumps(account(run, delta=1e-5).to_json()))
    assert (
        out["best"] == rep["best"]
        and out["results"] == rep["results"]
        and out["not_applicable"] == rep["not_applicable"]
    )
    assert out["composition"]["epsilon"] > out["best"]["epsilon"]


def test_uncertified_model_reports_composition_with_reason(capsys):
    out = _json([*BASE, "--feature-norm", "1", "--json"], capsys)
    assert not out["geometry"]["certified"] and "sqrt(2)" in out["geometry"]["reason"]
    assert out["best"]["bound"].endswith("composition")
    out = _json(
        [
            "train",
            "--dataset",
            "iris",
            "--model",
            "mlp",
            "--algorithm",
            "sgd",
            "--sampling",
            "poisson",
            "--epochs",
            "2",
            "--batch-size",
            "20",
            "--lr",
            "0.5",
            "--noise-multiplier",
            "1.0",
            "--clip",
            "1",
            "--json",
        ],
        capsys,
    )
    assert "MLP" in out["geometry"]["reason"] and out["model"]["per_example_gradients"] == "linear"
    assert out["run"]["noise_multiplier"] == pytest.approx(1.0) and out["best"]["bound"].endswith(
        "composition"
    )


def test_text_output_and_other_models(capsys):
    capsys.readouterr()
    assert main([*BASE, "--feature-norm", "0.7"]) == 0
    text = capsys.readouterr().out
    assert (
        "Releasing only the final model" in text
        and "Composition" in text
        and "non-private diagnostics: train accuracy" in text
    )
    out = _json(
        [
            "train",
            "--dataset",
            "diabetes",
            "--model",
            "linreg",
            "--algorithm",
            "gd",
            "--epochs",
            "20",
            "--lr",
            "0.5",
            "--noise-std",
            "0.01",
            "--clip",
            "1",
            "--feature-norm",
            "1",
            "--l2",
            "0.01",
            "--target-range",
            "0,400",
            "--json",
        ],
        capsys,
    )
    diag = out["non_private_diagnostics"]
    assert diag["test_accuracy"] is None and diag["test_mse"] < 2 and out["geometry"]["certified"]
    out = _json(
        [
            "train",
            "--dataset",
            "breast-cancer",
            "--model",
            "logreg",
            "--algorithm",
            "sgd",
            "--sampling",
            "uniform",
            "--epochs",
            "2",
            "--batch-size",
            "50",
            "--lr",
            "1",
            "--noise-std",
            "0.05",
            "--clip",
            "0.5",
            "--feature-norm",
            "1",
            "--l2",
            "0.01",
            "--diameter",
            "10",
            "--optimizer",
            "adam",
            "--json",
        ],
        capsys,
    )
    assert out["model"]["family"] == "binary-logistic" and "Adam" in out["geometry"]["reason"]
    assert out["run"]["diameter"] == 10


def test_target_epsilon(capsys):
    out = _json(
        [*BASE[:8], "20", *BASE[9:], "--feature-norm", "1", "--target-epsilon", "3", "--json"],
        capsys,
    )
    assert (
        out["stopped_by_budget"]
        and out["best"]["epsilon"] <= 3
        and out["steps"] < out["planned_steps"]
    )
    assert "budget stop" in out["budget"]["message"]
    # alone: calibrates the noise for the planned epochs
    args = [a for a in BASE if a not in ("--noise-std", "0.05")]
    out = _json([*args, "--feature-norm", "0.7", "--target-epsilon", "1", "--json"], capsys)
    assert (
        out["calibrated"]["noise_std"] > 0
        and out["best"]["epsilon"] <= 1
        and not out["stopped_by_budget"]
    )


BAD = [
    ["--dataset", "nope"],
    ["--epochs", "-1"],
    ["--clip", "0"],
    ["--lr", "abc"],
    ["--algorithm", "sgd"],  # no --sampling
    ["--resume"],  # no --checkpoint
    ["--delta", "2"],
    ["--model", "linreg"],  # classification data
    ["--hidden", "0", "--model", "mlp"],
]


@pytest.mark.parametrize("bad", BAD, ids=[" ".join(b) for b in BAD])
def test_bad_input_exits_2_with_one_line(bad, capsys):
    args = list(BASE)
    for i in range(len(bad)):
        if (
            bad[i].startswith("--")
            and bad[i] in args
            and i + 1 < len(bad)
            and not bad[i + 1].startswith("--")
        ):
            args[args.index(bad[i]) + 1] = bad[i + 1]
        elif bad[i].startswith("--") and bad[i] not in args:
            args.append(bad[i])
            if i + 1 < len(bad) and not bad[i + 1].startswith("--"):
                args.append(bad[i + 1])
    capsys.readouterr()
    assert main(args) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert len(cap.err.strip().splitlines()) == 1 and cap.err.startswith("lastiterate: error:")


def test_noise_flags_are_exclusive_and_required(capsys):
    capsys.readouterr()
    args = [a for a in BASE if a not in ("--noise-std", "0.05")]
    assert main(args) == 2
    assert main([*BASE, "--noise-multiplier", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2


def test_subprocess_exit_status():
    p = subprocess.run(
        [sys.executable, "-m", "lastiterate.cli", "train", "--dataset", "digits"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 2 and p.stdout == "" and len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("algorithm", "epochs"), [("gd", "1e9"), ("gd", "1000001"), ("cgd", "2e5")]
)
def test_runs_beyond_max_train_steps_are_refused_up_front(algorithm, epochs, capsys, tmp_path):
    # --algorithm gd --epochs 1e9 listed 1e9 epoch ends before the first step: a MemoryError
    # (exit 70) or hours of training; now one line naming epochs and its range, at once
    ledger = tmp_path / "ledger.jsonl"
    args = [*BASE, "--ledger", str(ledger)]
    args[args.index("--algorithm") + 1] = algorithm
    args[args.index("--epochs") + 1] = epochs
    if algorithm == "gd":
        i = args.index("--batch-size")
        del args[i : i + 2]
    capsys.readouterr()
    assert main(args) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and len(cap.err.strip().splitlines()) == 1, cap.err
    assert "epochs=" in cap.err and "MAX_TRAIN_STEPS" in cap.err and "must be in (0, " in cap.err
    assert not ledger.exists()  # refused before anything was written


def test_the_trainer_refuses_more_than_max_train_steps(tmp_path):
    from lastiterate.errors import ParameterError
    from lastiterate.train import GLM, NoisyGD
    from lastiterate.train.trainer import MAX_TRAIN_STEPS

    method = NoisyGD(GLM(3, 1, family="binary-logistic"), lr=0.1, clip=1.0, noise_std=1.0)
    run, _, _ = method.plan(10, steps=MAX_TRAIN_STEPS)  # the maximum itself is accepted
    assert run.T == MAX_TRAIN_STEPS
    with pytest.raises(ParameterError, match=r"steps=1000001 is invalid: .*\[1, 1e\+06\]"):
        method.plan(10, steps=MAX_TRAIN_STEPS + 1)
    X, y = np.zeros((10, 3)), np.arange(10) % 2
    ledger = tmp_path / "ledger.jsonl"
    with pytest.raises(ParameterError, match=r"epochs=1000000000.0 is invalid: .*\(0, 1e\+06\]"):
        method.fit(X, y, epochs=1e9, ledger=ledger)
    assert not ledger.exists()  # refused before anything was written
