"""Checkpoints are safetensors + JSON (never unpickled), owner-only, atomic, and leave no temporary
file behind -- also when the writer is sent SIGTERM in the middle of a write."""

from __future__ import annotations

import os
import pickle
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from lastiterate.errors import ParameterError
from lastiterate.train.ledger import (
    Ledger,
    load_checkpoint,
    remove_stale_temporaries,
    save_checkpoint,
    training_checkpoint,
)

STATE = {
    "run_id": "abc",
    "fingerprint": "f" * 64,
    "step": 12,
    "model": {"weight": torch.arange(6, dtype=torch.float64).reshape(2, 3), "bias": torch.zeros(2)},
    "optimizer": {"m": [torch.ones(3)], "v": [torch.full((3,), 2.0)]},
    "rng": {"seed": 2**70, "scheme": "x"},
    "planned_run": {"lr": 0.5, "steps": 100},
}


def _mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


def test_roundtrip_of_nested_tensors_and_json(tmp_path):
    p = tmp_path / "ck.safetensors"
    save_checkpoint(p, STATE)
    st = training_checkpoint(load_checkpoint(p), p)
    assert (
        st["step"] == 12
        and st["rng"]["seed"] == 2**70
        and st["planned_run"] == {"lr": 0.5, "steps": 100}
    )
    assert (
        torch.equal(st["model"]["weight"], STATE["model"]["weight"])
        and st["model"]["weight"].dtype == torch.float64
    )
    assert torch.equal(st["optimizer"]["v"][0], torch.full((3,), 2.0))
    assert _mode(p) == 0o600
    assert [f.name for f in tmp_path.iterdir()] == ["ck.safetensors"]


def test_owner_only_whatever_the_umask_and_over_a_public_file(tmp_path):
    p = tmp_path / "ck"
    p.write_bytes(b"old")
    os.chmod(p, 0o644)
    old = os.umask(0)
    try:
        save_checkpoint(p, STATE)
        led = Ledger(tmp_path / "l.jsonl").open()
        led.append({"run_id": "a", "steps_done": 1})
    finally:
        os.umask(old)
    assert _mode(p) == 0o600 and _mode(tmp_path / "l.jsonl") == 0o600


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def _hostile_files(tmp_path):
    good = tmp_path / "good"
    save_checkpoint(good, STATE)
    data = good.read_bytes()
    files = {}
    # 1. a pickle (what torch.save writes) that would run code when unpickled
    files["pickle"] = pickle.dumps({"format": "lastiterate-checkpoint/1", "x": _Evil()})
    buf = tmp_path / "torchsave"
    torch.save({"format": "lastiterate-checkpoint/1", "model": {}, "evil": _Evil()}, buf)
    files["torch.save"] = buf.read_bytes()
    files["empty"] = b""
    files["truncated-header"] = data[:5]
    files["truncated"] = data[: len(data) - 7]
    files["half"] = data[: len(data) // 2]
    flipped = bytearray(data)
    flipped[-3] ^= 0xFF  # a tensor byte: caught by the SHA-256
    files["tampered-tensor"] = bytes(flipped)
    files["tampered-metadata"] = data.replace(b'\\"step\\": 12', b'\\"step\\": 13')
    assert files["tampered-metadata"] != data
    files["huge-header-length"] = (2**63).to_bytes(8, "little") + data[8:]
    files["not-json-header"] = (10).to_bytes(8, "little") + b"\xff" * 10
    files["random"] = os.urandom(4096)
    from safetensors.torch import save

    from lastiterate.train.ledger import tensors_digest

    def crafted(meta):
        return save(
            {},
            metadata={"lastiterate": meta, "lastiterate_tensors_sha256": tensors_digest({}, meta)},
        )

    files["json-nan"] = crafted('{"format": "lastiterate-checkpoint/2", "step": NaN}')
    files["missing-tensor"] = crafted(
        '{"format": "lastiterate-checkpoint/2", "model": {"w": {"__tensor__": "t9"}}}'
    )
    files["deep"] = crafted(
        '{"format": "lastiterate-checkpoint/2", "x": ' + "[" * 100000 + "]" * 100000 + "}"
    )
    files["old-format"] = crafted('{"format": "lastiterate-checkpoint/1"}')
    files["no-digest"] = save(
        {}, metadata={"lastiterate": '{"format": "lastiterate-checkpoint/2"}'}
    )
    return files


def test_hostile_truncated_or_tampered_files_are_refused_and_never_executed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, blob in _hostile_files(tmp_path).items():
        p = tmp_path / f"bad-{name}"
        p.write_bytes(blob)
        with pytest.raises(ParameterError, match="checkpoint"):
            training_checkpoint(load_checkpoint(p), p)
    assert not (tmp_path / "PWNED").exists()
    with pytest.raises(ParameterError, match="regular file"):
        load_checkpoint(tmp_path)


def test_metadata_that_is_not_a_training_checkpoint_is_refused(tmp_path):
    p = tmp_path / "ck"
    for broken in (
        {**STATE, "step": -1},
        {**STATE, "step": "3"},
        {**STATE, "model": {"w": 3}},
        {k: v for k, v in STATE.items() if k != "fingerprint"},
    ):
        save_checkpoint(p, broken)
        with pytest.raises(ParameterError, match="not a training checkpoint"):
            training_checkpoint(load_checkpoint(p), p)


def _digits():
    from lastiterate.train.data import load_dataset

    return load_dataset("digits", seed=0, feature_norm=0.7)


def test_resume_refuses_a_checkpoint_that_does_not_fit_the_model(tmp_path):
    from lastiterate.train.models import GLM
    from lastiterate.train.trainer import NoisyCGD

    data = _digits()
    kw = {
        "batch_size": 256,
        "lr": 1.0,
        "noise_std": 0.05,
        "clip": 1.0,
        "l2": 0.005,
        "feature_norm": 0.7,
    }
    ck = tmp_path / "c"
    NoisyCGD(GLM(data.n_features, data.n_classes), **kw).fit(
        data.X_train, data.y_train, epochs=2, checkpoint=ck
    )
    st = load_checkpoint(ck)
    assert _mode(ck) == 0o600 and st["step"] == 12
    # same fingerprint, parameters of the wrong shape: a crafted file
    st["model"] = {"weight": torch.zeros(3, 3, dtype=torch.float64)}
    save_checkpoint(ck, st)
    with pytest.raises(ParameterError, match="does not fit"):
        NoisyCGD(GLM(data.n_features, data.n_classes), **kw).fit(
            data.X_train, data.y_train, epochs=2, checkpoint=ck, resume=True
        )
    st["step"] = 10**9
    save_checkpoint(ck, st)
    with pytest.raises(ParameterError, match="beyond the run"):
        NoisyCGD(GLM(data.n_features, data.n_classes), **kw).fit(
            data.X_train, data.y_train, epochs=2, checkpoint=ck, resume=True
        )


def test_cli_resume_from_a_hostile_checkpoint_is_exit_2_and_one_line(tmp_path, capsys, monkeypatch):
    from lastiterate.cli import main

    monkeypatch.chdir(tmp_path)
    ck = tmp_path / "ck.pt"
    torch.save({"format": "lastiterate-checkpoint/1", "evil": _Evil()}, ck)
    args = [
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--algorithm",
        "gd",
        "--epochs",
        "2",
        "--lr",
        "0.5",
        "--noise-std",
        "0.1",
        "--clip",
        "1",
        "--feature-norm",
        "1",
        "--checkpoint",
        str(ck),
        "--resume",
        "--json",
    ]
    assert main(args) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and len(cap.err.strip().splitlines()) == 1 and "never unpickled" in cap.err
    assert not (tmp_path / "PWNED").exists()


_WRITER = textwrap.dedent("""
    import sys, torch
    from lastiterate.train.ledger import save_checkpoint
    save_checkpoint(sys.argv[1], {"step": 1, "model": {"w": torch.zeros(1000)}})
    print("first", flush=True)
    save_checkpoint(sys.argv[1], {"step": 2, "model": {"w": torch.ones(1000)}})
    print("second", flush=True)
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_a_write_leaves_no_temporary_file(tmp_path, sig):
    """The writer is signalled while its temporary file exists: it finishes the rename (or
    removes the file), then dies of the signal; the checkpoint is complete, nothing else is left."""
    ck = tmp_path / "ck"
    env = {**os.environ, "LASTITERATE_TEST_CHECKPOINT_DELAY": "1.0"}
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(ck)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            if ck.exists() and any(f.name.startswith(".ck.tmp-") for f in tmp_path.iterdir()):
                break  # the second write is in progress
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.01)
        else:
            pytest.fail("the second write never started")
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0 and b"second" not in proc.stdout.read()
    if sig == signal.SIGTERM:
        assert proc.returncode == -signal.SIGTERM
    assert [f.name for f in tmp_path.iterdir()] == ["ck"]
    st = load_checkpoint(ck)
    assert st["step"] in (1, 2) and _mode(ck) == 0o600


def test_temporary_files_of_killed_processes_are_removed_by_the_next_save(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(dead.stdout)
    stale = tmp_path / f".ck.tmp-{pid}-deadbeef"
    stale.write_bytes(b"an intermediate iterate")
    alive = (
        tmp_path / f".ck.tmp-{os.getppid()}-cafe"
    )  # a live process's write in progress: untouched
    alive.write_bytes(b"x")
    save_checkpoint(tmp_path / "ck", STATE)
    assert not stale.exists() and alive.exists()
    assert remove_stale_temporaries(tmp_path / "ck") == []


def test_write_failure_removes_the_temporary_file(tmp_path):
    with pytest.raises(TypeError):
        save_checkpoint(tmp_path / "ck", {"model": object()})
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "ck").mkdir()  # os.replace onto a directory fails
    with pytest.raises(ParameterError, match="checkpoint.*cannot be written"):
        save_checkpoint(tmp_path / "dir" / "ck", STATE)
    assert [f.name for f in (tmp_path / "dir").iterdir()] == ["ck"]
    with pytest.raises(ParameterError, match="ledger.*cannot be opened"):
        Ledger(tmp_path / "dir").open()


def test_cli_unwritable_checkpoint_or_ledger_is_exit_2_one_line(tmp_path, capsys):
    from lastiterate.cli import main

    (tmp_path / "sub").mkdir()
    base = [
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--algorithm",
        "gd",
        "--epochs",
        "2",
        "--lr",
        "0.5",
        "--noise-std",
        "0.1",
        "--clip",
        "1",
        "--feature-norm",
        "1",
        "--json",
    ]
    for extra, name in (
        (["--checkpoint", str(tmp_path / "sub")], "checkpoint"),
        (["--ledger", str(tmp_path / "sub")], "ledger"),
    ):
        capsys.readouterr()
        assert main([*base, *extra]) == 2
        cap = capsys.readouterr()
        assert cap.out == "" and len(cap.err.strip().splitlines()) == 1 and name in cap.err
