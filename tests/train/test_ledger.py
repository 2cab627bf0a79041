"""Privacy ledger, checkpoints, kill-and-resume, and the budget stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from lastiterate.train.budget import allowed_steps, best_epsilon, truncate
from lastiterate.train.ledger import (
    Ledger,
    load_checkpoint,
    read_ledger,
    save_checkpoint,
    steps_counted,
)
from lastiterate.train.models import GLM
from lastiterate.train.trainer import NoisyCGD, NoisySGD


def test_ledger_append_and_truncated_tail(tmp_path):
    p = tmp_path / "l.jsonl"
    led = Ledger(p).open()
    led.append({"run_id": "a", "steps_done": 1})
    led.append({"run_id": "a", "steps_done": 2})
    with open(p, "ab") as fh:  # a crash in the middle of a write
        fh.write(b'{"run_id": "a", "steps_do')
    recs = read_ledger(p)
    assert [r["steps_done"] for r in recs] == [1, 2]
    led = Ledger(p).open()  # cuts the fragment
    assert p.read_bytes().endswith(b"\n")
    led.append({"run_id": "a", "steps_done": 3})
    assert [r["steps_done"] for r in read_ledger(p)] == [1, 2, 3]
    assert steps_counted(read_ledger(p), "a") == 3
    # a corrupt line that is not the last one is an error, not a crash artefact
    with open(p, "ab") as fh:
        fh.write(b"garbage\n")
        fh.write(b'{"run_id": "a", "steps_done": 4}\n')
    with pytest.raises(ValueError):
        read_ledger(p)


def test_checkpoint_atomic_roundtrip(
    tmp_path,
):  # safetensors + JSON: tests/train/test_checkpoint_files.py
    p = tmp_path / "ck.pt"
    save_checkpoint(p, {"step": 3, "model": {"w": torch.ones(2)}})
    save_checkpoint(p, {"step": 4, "model": {"w": torch.zeros(2)}})
    st = load_checkpoint(p)
    assert st["step"] == 4 and float(st["model"]["w"].sum()) == 0
    assert [f.name for f in tmp_path.iterdir()] == ["ck.pt"]  # no temporary file left
    assert load_checkpoint(tmp_path / "none.pt") is None


def _digits():
    from lastiterate.train.data import load_dataset

    return load_dataset("digits", seed=0, feature_norm=0.7)


def test_ledger_records_every_epoch_and_the_guarantee(tmp_path):
    data = _digits()
    m = GLM(data.n_features, data.n_classes)
    meth = NoisyCGD(m, batch_size=256, lr=1.0, noise_std=0.05, clip=1.0, l2=0.005, feature_norm=0.7)
    res = meth.fit(data.X_train, data.y_train, epochs=3, ledger=tmp_path / "l.jsonl")
    recs = read_ledger(tmp_path / "l.jsonl")
    assert [r["event"] for r in recs] == ["start", "epoch", "epoch", "epoch", "end"]
    assert [r["steps_done"] for r in recs] == [0, 6, 12, 18, 18]
    for r in recs[1:]:
        assert r["run"]["steps"] == r["steps_done"]
        from lastiterate.accountant import account

        rep = account(truncate(res.planned_run, r["steps_done"]), delta=1e-5)
        assert r["guarantee"]["best"]["epsilon"] == pytest.approx(rep.best.epsilon)
        assert r["guarantee"]["best"]["bound"] == rep.best.bound
    assert recs[-1]["guarantee"]["best"]["epsilon"] == pytest.approx(res.report.best.epsilon)


def _cli(args, env=None, **kw):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.Popen(
        [sys.executable, "-m", "lastiterate.cli", "train", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=e,
        **kw,
    )


ARGS = [
    "--dataset",
    "digits",
    "--model",
    "logreg",
    "--algorithm",
    "sgd",
    "--sampling",
    "shuffle",
    "--epochs",
    "12",
    "--batch-size",
    "256",
    "--lr",
    "1.0",
    "--noise-std",
    "0.05",
    "--clip",
    "1",
    "--feature-norm",
    "0.7",
    "--l2",
    "0.005",
    "--json",
    "--threads",
    "1",
    "--seed",
    "0",
]  # seeded: compared with an uninterrupted run


def _main(args, capsys):
    from lastiterate.cli import main

    capsys.readouterr()
    assert main(["train", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_kill_mid_run_and_resume_without_double_counting(tmp_path, capsys):
    """SIGKILL a training process mid-epoch, resume in-process, compare with an
    uninterrupted run."""
    ledger, ck = tmp_path / "l.jsonl", tmp_path / "ck.pt"
    proc = _cli(
        [*ARGS, "--ledger", str(ledger), "--checkpoint", str(ck)],
        env={"LASTITERATE_TEST_STEP_DELAY": "0.03"},
    )
    deadline = time.time() + 90
    try:
        while time.time() < deadline:
            recs = read_ledger(ledger)
            if sum(r["event"] == "epoch" for r in recs) >= 3:
                break
            if proc.poll() is not None:
                pytest.fail(
                    "the run finished before it could be killed: " + proc.stderr.read().decode()
                )
            time.sleep(0.02)
        time.sleep(0.05)  # now inside a later epoch
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    killed = read_ledger(ledger)
    assert killed[-1]["event"] == "epoch" and killed[-1]["steps_done"] < 72
    ck_step = load_checkpoint(ck)["step"]
    assert ck_step >= killed[-1]["steps_done"]

    resumed = _main([*ARGS, "--ledger", str(ledger), "--checkpoint", str(ck), "--resume"], capsys)
    recs = read_ledger(ledger)
    assert len({r["run_id"] for r in recs}) == 1
    events = [r["event"] for r in recs]
    assert events.count("start") == 1 and events.count("resume") == 1 and events[-1] == "end"
    k = events.index("resume")
    assert recs[k]["steps_done"] == ck_step == resumed["resumed_from"]
    steps = [r["steps_done"] for r in recs]
    assert steps == sorted(steps)  # cumulative, never restarted
    assert (
        steps[k + 1] == ck_step + 6
    )  # the next epoch after the checkpoint, not a replay counted twice
    assert (
        recs[-1]["steps_done"]
        == recs[-1]["run"]["steps"]
        == 72
        == resumed["steps"]
        == resumed["run"]["steps"]
    )

    # the resumed model is the uninterrupted run's model, bit for bit
    straight = _main(ARGS, capsys)
    assert straight["parameters_sha256"] == resumed["parameters_sha256"]
    assert straight["best"] == resumed["best"]


def test_resume_refuses_a_different_run(tmp_path):
    data = _digits()
    kw = {
        "batch_size": 256,
        "lr": 1.0,
        "noise_std": 0.05,
        "clip": 1.0,
        "l2": 0.005,
        "feature_norm": 0.7,
    }
    NoisyCGD(GLM(data.n_features, data.n_classes), **kw).fit(
        data.X_train, data.y_train, epochs=2, checkpoint=tmp_path / "c.pt"
    )
    from lastiterate.errors import ParameterError

    with pytest.raises(ParameterError, match="different run"):
        NoisyCGD(GLM(data.n_features, data.n_classes), **{**kw, "noise_std": 0.06}).fit(
            data.X_train, data.y_train, epochs=2, checkpoint=tmp_path / "c.pt", resume=True
        )


@pytest.mark.parametrize("target", [1.5, 3.0, 4.5])
def test_budget_stop_never_exceeds_the_target(tmp_path, target):
    data = _digits()
    # clip active on a multinomial model: composition only, so epsilon grows with the steps
    m = GLM(data.n_features, data.n_classes)
    meth = NoisySGD(
        m,
        batch_size=128,
        sampling="shuffle",
        lr=1.0,
        noise_std=0.1,
        clip=1.0,
        l2=0.005,
        feature_norm=1.0,
    )
    res = meth.fit(
        data.X_train, data.y_train, epochs=40, target_epsilon=target, ledger=tmp_path / "l.jsonl"
    )
    assert res.stopped_by_budget and res.steps < res.planned_run.T
    assert res.report.best.epsilon <= target
    eps_next, _ = best_epsilon(truncate(res.planned_run, res.steps + 1), 1e-5)
    assert eps_next > target  # the LAST step within budget
    recs = read_ledger(tmp_path / "l.jsonl")
    assert all(r["guarantee"]["best"]["epsilon"] <= target for r in recs if r.get("guarantee"))
    assert [r["event"] for r in recs][-2:] == ["budget-stop", "end"]
    assert recs[-1]["steps_done"] == res.steps
    assert "budget stop" in res.notes[0]


def test_budget_allows_everything_when_the_bound_converges():
    data = _digits()
    meth = NoisyCGD(
        GLM(data.n_features, data.n_classes),
        batch_size=256,
        lr=1.0,
        noise_std=0.05,
        clip=1.0,
        l2=0.005,
        feature_norm=0.7,
    )
    run, cert, _ = meth.plan(data.n, epochs=200)
    b = allowed_steps(run, 2.5)
    assert (
        cert.certified
        and b.allowed_steps == run.T
        and not b.stops_early
        and b.epsilon_at_stop <= 2.5
    )
    from lastiterate.errors import ParameterError

    with pytest.raises(ParameterError, match="single step"):
        allowed_steps(run, 0.01)


class _Crash(Exception):
    pass


def test_adam_resume_after_a_crash_equals_uninterrupted(tmp_path):
    """In-process crash after 2 epochs (optimizer moments must be checkpointed too)."""
    from lastiterate.train.models import parameters_digest
    from lastiterate.train.trainer import NoisyAdam

    data = _digits()
    kw = {
        "batch_size": 200,
        "sampling": "poisson",
        "lr": 0.05,
        "noise_std": 0.05,
        "clip": 1.0,
        "l2": 0.005,
        "feature_norm": 0.7,
        "seed": 3,
    }

    def crash(t, stop):
        if t >= 2 * 8:
            raise _Crash

    m1 = GLM(data.n_features, data.n_classes)
    with pytest.raises(_Crash):
        NoisyAdam(m1, **kw).fit(
            data.X_train,
            data.y_train,
            epochs=5,
            checkpoint=tmp_path / "c.pt",
            ledger=tmp_path / "l.jsonl",
            on_epoch=crash,
        )
    crashed_at = load_checkpoint(tmp_path / "c.pt")["step"]
    assert 0 < crashed_at < 36
    m2 = GLM(data.n_features, data.n_classes)
    res = NoisyAdam(m2, **kw).fit(
        data.X_train,
        data.y_train,
        epochs=5,
        checkpoint=tmp_path / "c.pt",
        ledger=tmp_path / "l.jsonl",
        resume=True,
    )
    m3 = GLM(data.n_features, data.n_classes)
    NoisyAdam(m3, **kw).fit(data.X_train, data.y_train, epochs=5, account=False)
    assert res.resumed_from == crashed_at and parameters_digest(m2) == parameters_digest(m3)
    assert not res.certificate.certified and "Adam" in res.certificate.reason
    recs = read_ledger(tmp_path / "l.jsonl")
    assert recs[-1]["steps_done"] == res.steps == res.run.T


def test_learning_rate_schedule():
    from lastiterate.train.trainer import NoisyGD

    data = _digits()
    meth = NoisyGD(
        GLM(data.n_features, data.n_classes),
        lr=lambda t: 1.0 / (1 + t) ** 0.5,
        noise_std=0.01,
        clip=1.0,
        l2=0.005,
        feature_norm=0.7,
    )
    res = meth.fit(data.X_train, data.y_train, steps=30)
    assert not res.run.constant_lr and res.run.lr_schedule[4] == pytest.approx(1 / 5**0.5)
    assert res.run.T == 30 and truncate(res.run, 10).lr_schedule == res.run.lr_schedule[:10]
    assert res.report.best is not None


def test_checkpoint_beyond_the_budget_is_refused(tmp_path):
    data = _digits()
    kw = {
        "batch_size": 128,
        "sampling": "shuffle",
        "lr": 1.0,
        "noise_std": 0.1,
        "clip": 1.0,
        "l2": 0.005,
        "feature_norm": 1.0,
    }
    NoisySGD(GLM(data.n_features, data.n_classes), **kw).fit(
        data.X_train, data.y_train, epochs=10, checkpoint=tmp_path / "c.pt"
    )
    from lastiterate.errors import ParameterError

    with pytest.raises(ParameterError, match="beyond the budget"):
        NoisySGD(GLM(data.n_features, data.n_classes), **kw).fit(
            data.X_train,
            data.y_train,
            epochs=10,
            checkpoint=tmp_path / "c.pt",
            resume=True,
            target_epsilon=2.0,
        )
