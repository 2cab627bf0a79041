"""Data-parallel training (issue 11 section 3): the GLOBAL batch, one noise draw per global step.

Independent sources: the single-process trainer (the theorems' algorithm, tested elsewhere against
the accountant's Run), and the noise of the run randomness re-drawn here step by step.  The ranks of
the library tests are forked from this process (torch already imported: fast) and join a gloo group
on 127.0.0.1; the command-line tests run ``lastiterate train --nproc 2`` for real.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from lastiterate.cli import main
from lastiterate.errors import ParameterError
from lastiterate.train import distributed as dist_mod
from lastiterate.train.distributed import DataParallel, free_port, from_env, launch_local
from lastiterate.train.models import GLM
from lastiterate.train.randomness import Randomness
from lastiterate.train.trainer import NoisyCGD, NoisyGD, NoisySGD

SRC = str(Path(__file__).resolve().parents[2] / "src")
pytestmark = pytest.mark.filterwarnings("ignore::lastiterate.train.randomness.SeededRunWarning")


def _data(n: int = 48, d: int = 5, k: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    return X, rng.integers(0, k, size=n)


def _method(kind: str, seed: int | None, **kw: Any) -> Any:
    model = GLM(5, 3, "multinomial-logistic", intercept=True)
    b = kw.pop("batch_size", 8)
    common: dict[str, Any] = {
        "lr": 0.5,
        "clip": kw.pop("clip", 0.3),
        "noise_std": kw.pop("noise_std", 0.05),
        "l2": kw.pop("l2", 0.01),
        "seed": seed,
        **kw,
    }
    if kind == "cgd":
        return NoisyCGD(model, batch_size=16, **common)
    if kind == "gd":
        return NoisyGD(model, **common)
    return NoisySGD(model, batch_size=b, sampling=kind, **common)


def _worker(fn: Any, rank: int, world: int, port: int, queue: Any, args: tuple[Any, ...]) -> None:
    os.environ.update(
        {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "GLOO_SOCKET_IFNAME": "lo",
        }
    )
    try:
        dp = from_env("cpu")
        try:
            queue.put((rank, "ok", fn(dp, *args)))
        finally:
            dp.close()
    except BaseException as exc:  # noqa: BLE001 (reported to the test, never a hang)
        queue.put((rank, "error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


def _ranks(fn: Any, world: int, *args: Any, only: int | None = None) -> dict[int, Any]:
    """Run ``fn(dp, *args)`` in ``world`` forked ranks; {rank: (status, value)}."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    port = free_port()
    ranks = range(world) if only is None else [only]
    procs = [
        ctx.Process(target=_worker, args=(fn, r, world, port, queue, args), daemon=True)
        for r in ranks
    ]
    for p in procs:
        p.start()
    out = {}
    try:
        for _ in procs:
            r, status, value = queue.get(timeout=120)
            out[r] = (status, value)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    return out


def _fit_params(dp: DataParallel, kind: str, seed: int | None, steps: int, kw: dict[str, Any]):
    X, y = _data()
    method = _method(kind, seed, **kw)
    res = method.fit(X, y, steps=steps, distributed=dp, account=dp.is_writer)
    flat = torch.cat([p.detach().reshape(-1) for p in method.model.params()]).numpy()
    best = None if res.report is None else res.report.to_json()["best"]
    return flat, res.run.setting(), best, res.randomness["source"]


def _single(kind: str, seed: int | None, steps: int, kw: dict[str, Any]):
    return _fit_params(DataParallel(), kind, seed, steps, dict(kw))


@pytest.mark.parametrize(
    ("kind", "world", "kw"),
    [
        ("cgd", 2, {}),
        ("poisson", 3, {"batch_size": 4}),  # small Poisson batches: some shares are empty
        ("gd", 2, {"diameter": 0.5}),  # with the projection after the step
    ],
)
def test_k_processes_reproduce_one_process(kind: str, world: int, kw: dict[str, Any]) -> None:
    """K ranks with the same seed end at the single-process parameters (float summation order
    aside), on every rank, with the same Run and the same guarantee."""
    ref, run, best, _ = _single(kind, 11, 12, kw)
    got = _ranks(_fit_params, world, kind, 11, 12, kw)
    assert all(s == "ok" for s, _ in got.values()), got
    for r, (_, (flat, run_r, best_r, _)) in got.items():
        np.testing.assert_allclose(flat, ref, rtol=0, atol=1e-12)
        assert np.array_equal(flat, got[0][1][0])  # the ranks agree bit for bit
        assert run_r == run
        if r == 0:
            assert best_r == best and best is not None
        else:
            assert best_r is None  # only rank 0 accounts
    assert np.abs(ref).max() > 1e-3  # the run moved: the comparison is not between zeros


def _zero_gradient_params(dp: DataParallel, steps: int, sigma: float, lr: float):
    X, y = _data()
    model = GLM(5, 3, "multinomial-logistic", intercept=True)
    method = NoisySGD(
        model, batch_size=8, sampling="uniform", lr=lr, noise_std=sigma, clip=1e-30, seed=5
    )
    method.fit(X, y, steps=steps, distributed=dp, account=False)
    return torch.cat([p.detach().reshape(-1) for p in model.params()]).numpy()


def test_noise_is_added_once_per_global_step() -> None:
    """Clip 1e-30 makes every clipped gradient vanish, so the final parameters are exactly
    -lr sum_t Z_t.  Re-drawing Z_t from the seed's randomness (stream 21, the trainer's) shows
    that two ranks add each Z_t once -- not twice (2 Z_t) nor two independent draws."""
    steps, sigma, lr = 6, 0.3, 0.5
    numel = 3 * 5 + 3
    rnd = Randomness.from_seed(5)
    expected = torch.zeros(numel, dtype=torch.float64)
    for t in range(steps):
        expected -= lr * rnd.gaussian(21, t, numel, sigma, torch.float64)
    got = _ranks(_zero_gradient_params, 2, steps, sigma, lr)
    assert all(s == "ok" for s, _ in got.values()), got
    for _, flat in got.values():
        np.testing.assert_allclose(flat, expected.numpy(), rtol=0, atol=1e-12)
    # the check can fail: doubled noise is far from it
    assert np.abs(2 * expected.numpy() - expected.numpy()).max() > 0.1
    np.testing.assert_allclose(_zero_gradient_params(DataParallel(), steps, sigma, lr), expected)


@pytest.mark.parametrize("secure", [False, True])
def test_fresh_secret_is_shared_by_rank_0(secure: bool) -> None:
    """Unseeded: rank 0's OS-entropy root (128 bits, or the 256-bit CSPRNG key) reaches every rank
    (same batches, same noise, identical parameters); a run whose ranks kept their own roots is
    refused, not silently averaged."""
    got = _ranks(_fit_params, 2, "shuffle", None, 8, {"secure": secure})
    assert all(s == "ok" for s, _ in got.values()), got
    assert np.array_equal(got[0][1][0], got[1][1][0])
    assert got[0][1][3] == "os-entropy"
    if secure:
        return

    broken = _ranks(_fit_unshared, 2)
    assert all(s == "error" for s, _ in broken.values())
    assert all("ParameterError" in v and "disagree" in v for _, v in broken.values())


def _fit_unshared(dp: DataParallel):
    dp.share_randomness = lambda r: r  # type: ignore[method-assign]  # each rank keeps its own
    return _fit_params(dp, "shuffle", None, 4, {})


def _fit_with_files(dp: DataParallel, ledger: str, checkpoint: str):
    X, y = _data()
    method = _method("cgd", 2)
    method.fit(X, y, epochs=2, distributed=dp, ledger=ledger, checkpoint=checkpoint)
    return True


def test_ledger_and_checkpoint_written_once(tmp_path: Path) -> None:
    """Rank 0 alone writes: the ledger has the events of ONE run (start, 2 epochs, end)."""
    led, ck = tmp_path / "l.jsonl", tmp_path / "c.safetensors"
    got = _ranks(_fit_with_files, 2, str(led), str(ck))
    assert all(s == "ok" for s, _ in got.values()), got
    events = [json.loads(line)["event"] for line in led.read_text().splitlines()]
    assert events == ["start", "epoch", "epoch", "end"]
    assert ck.is_file()


class _Killed(Exception):
    pass


def _fit_resumable(dp: DataParallel, checkpoint: str, resume: bool, stop_at: int | None):
    X, y = _data()
    method = _method("cgd", 9)

    def on_epoch(t: int, _stop: int) -> None:
        if stop_at is not None and t >= stop_at:
            raise _Killed(f"stopped after step {t}")  # after the epoch's checkpoint

    res = method.fit(
        X,
        y,
        epochs=4,
        distributed=dp,
        checkpoint=checkpoint,
        resume=resume,
        on_epoch=on_epoch,
        account=False,
    )
    flat = torch.cat([p.detach().reshape(-1) for p in method.model.params()]).numpy()
    return flat, res.resumed_from


def test_resume_across_processes(tmp_path: Path) -> None:
    """Two ranks stopped after epoch 2 and resumed from rank 0's checkpoint end where one
    uninterrupted process ends (same batches, same noise, no step twice)."""
    X, y = _data()
    single = _method("cgd", 9)
    single.fit(X, y, epochs=4, account=False)
    ref = torch.cat([p.detach().reshape(-1) for p in single.model.params()]).numpy()
    ck = str(tmp_path / "c.safetensors")
    first = _ranks(_fit_resumable, 2, ck, False, 6)  # 3 batches per epoch: stop after epoch 2
    assert all(s == "error" and "_Killed" in v for s, v in first.values())
    second = _ranks(_fit_resumable, 2, ck, True, None)
    assert all(s == "ok" for s, _ in second.values()), second
    for _, (flat, resumed_from) in second.values():
        assert resumed_from == 6  # every rank continued the checkpoint (no restart from 0)
        np.testing.assert_allclose(flat, ref, rtol=0, atol=1e-12)


def _join_alone(dp: DataParallel):  # never reached: rank 1 never comes
    return dp.world_size


def test_missing_peer_is_an_error_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(dist_mod.TIMEOUT_ENV, "2")
    got = _ranks(_join_alone, 2, only=0)
    status, value = got[0]
    assert status == "error" and "ParameterError" in value and "process group" in value


def test_too_many_processes_for_the_batch() -> None:
    got = _ranks(_fit_params, 3, "gd", 1, 2, {})  # n = 48 >= 3: fine
    assert all(s == "ok" for s, _ in got.values())
    dp = DataParallel(rank=0, world_size=5)
    with pytest.raises(ParameterError, match="nproc"):
        dp.check_batch(4)


# ---------------------------------------------------------------------- command line
TRAIN = [
    "train",
    "--dataset",
    "iris",
    "--model",
    "logreg",
    "--algorithm",
    "cgd",
    "--epochs",
    "3",
    "--batch-size",
    "32",
    "--lr",
    "0.5",
    "--noise-std",
    "0.05",
    "--clip",
    "1",
    "--feature-norm",
    "0.7",
    "--l2",
    "0.01",
]


def _cli(args: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "lastiterate.cli", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        **kw,
    )


def test_cli_two_processes_same_model_and_guarantee(tmp_path: Path, capsys: Any) -> None:
    from safetensors.torch import load_file

    one, two = tmp_path / "one.safetensors", tmp_path / "two.safetensors"
    assert main([*TRAIN, "--seed", "3", "--json", "--out", str(one)]) == 0
    a = json.loads(capsys.readouterr().out)
    proc = _cli([*TRAIN, "--seed", "3", "--json", "--out", str(two), "--nproc", "2"])
    assert proc.returncode == 0, proc.stderr
    b = json.loads(proc.stdout)  # one JSON object: rank 0 alone prints
    assert proc.stderr.count("seeded run") == 1
    for key in ("guarantee", "best", "composition", "run", "results", "geometry"):
        assert a[key] == b[key], key
    assert "distributed" not in a
    assert b["distributed"]["world_size"] == 2 and b["distributed"]["backend"] == "gloo"
    x, y = load_file(str(one)), load_file(str(two))
    assert x.keys() == y.keys()
    for k in x:
        torch.testing.assert_close(x[k], y[k], rtol=0, atol=1e-12)
        assert float(x[k].abs().max()) > 1e-3


@pytest.mark.slow  # two interpreters importing torch (the launcher tests below cover the logic)
def test_cli_child_error_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nothing.npz"
    args = [a if a != "iris" else str(missing) for a in TRAIN]
    proc = _cli([*args, "--nproc", "2"])
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "dataset" in lines[0], proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--nproc", "0"], "nproc"),
        (["--nproc", "-3"], "nproc"),
        (["--nproc", "65"], "nproc"),
        (["--nproc", "33"], "global batch size"),  # --batch-size 32
        (["--nproc", "2", "--scaling", "private"], "--scaling private"),
    ],
)
def test_cli_bad_nproc_exit_2(extra: list[str], needle: str, capsys: Any) -> None:
    assert main([*TRAIN, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_cli_nproc_contradicting_torchrun(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert main([*TRAIN, "--nproc", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "WORLD_SIZE=3" in err[0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where there is no GPU")
def test_cli_cuda_unavailable_exit_2(capsys: Any) -> None:
    assert main([*TRAIN, "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "device" in err[0] and "cuda" in err[0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_same_parameters_as_cpu() -> None:
    ref, run, best, _ = _single("cgd", 4, 10, {})
    X, y = _data()
    method = _method("cgd", 4)
    res = method.fit(X, y, steps=10, device="cuda")
    flat = torch.cat([p.detach().reshape(-1).cpu() for p in method.model.params()]).numpy()
    np.testing.assert_allclose(flat, ref, rtol=0, atol=1e-10)
    assert res.run.setting() == run and res.report.to_json()["best"] == best


# ---------------------------------------------------------------------- the launcher itself
CHILD = (
    "import os, sys, time\n"
    "r = int(os.environ['RANK'])\n"
    "if r == {fail}:\n"
    "    print('lastiterate: error: boom on purpose', file=sys.stderr); sys.exit(2)\n"
    "time.sleep(60)\n"
)


def test_launcher_stops_the_others_when_one_fails(capfd: Any) -> None:
    """Rank 2 fails while the others would wait for it: they are stopped at once (no hang), the
    status is the failing rank's and stderr has one line naming it."""
    import time

    t0 = time.monotonic()
    status = launch_local([sys.executable, "-c", CHILD.format(fail=2)], 3)
    assert time.monotonic() - t0 < 30
    assert status == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert err == ["lastiterate: error: process 2 of 3 failed (exit 2): boom on purpose"]


def test_launcher_rank0_failure_keeps_its_own_line(capfd: Any) -> None:
    status = launch_local([sys.executable, "-c", CHILD.format(fail=0)], 2)
    assert status == 2
    assert capfd.readouterr().err.strip().splitlines() == ["lastiterate: error: boom on purpose"]
