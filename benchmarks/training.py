"""Noisy steps per second: lastiterate's trainer against Opacus, same model, batch and process.

Models: multinomial logistic regression on 784 synthetic features (10 classes, with intercept) and
a small MLP (784-128-10, ReLU).  Batch size 256, float32, per-example clipping to C = 1, Gaussian
noise, SGD update.  Every step includes everything a training step does:

* lastiterate: ``NoisySGD(sampling="poisson").step`` -- draws the Poisson batch (p = b/n),
  per-example gradients (closed form for the GLM; per-layer for the MLP, and for
  comparison ``torch.func`` vmap(grad) and Opacus' GradSampleModule inside our trainer),
  clipping, noise, update;
* Opacus 1.6: ``GradSampleModule`` (hooks) + ``DPOptimizer`` on a fixed batch of 256 (the data
  loader's cost is NOT counted, to Opacus' advantage), and Opacus' ghost clipping
  (``PrivacyEngine.make_private(grad_sample_mode="ghost")``) where it runs.

Timing: best of 5 repeats of about 0.5 s each after a warm-up (the machine is shared; the best
repeat is the least disturbed), for 1 and 2 torch threads.  Run:
``python benchmarks/training.py [--threads 1,2] [--tables main,secure] [--out FILE]``.

Secure mode (``secure=True`` / ``--secure``, :mod:`lastiterate.train.randomness`): the same steps
with noise and batches from the keyed SHAKE-256 CSPRNG and the Holohan-Braghin Gaussian (4
Box-Muller samples per coordinate), against the default generators; and the noise draw alone
(one N(0, sigma^2 I) vector per step).  ``--tables secure`` measures only that table and replaces
its section of the results file.
"""

from __future__ import annotations

import argparse
import platform
import time
import warnings
from pathlib import Path

import torch
from torch import nn

warnings.filterwarnings("ignore")

N, D, K, B, HIDDEN = 20000, 784, 10, 256, 128


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(N, D, generator=g)
    X = X / X.norm(dim=1, keepdim=True)
    W = torch.randn(K, D, generator=g)
    y = (X @ W.T).argmax(1)
    return X, y


def _best_rate(step, steps, repeats=5, warmup=3, seconds=0.5):
    """Best steps/s over ``repeats`` repeats of about ``seconds`` each (at most ``steps`` steps)."""
    start = time.perf_counter()
    for i in range(warmup):
        step(i)
    per_step = (time.perf_counter() - start) / warmup
    steps = int(max(3, min(steps, seconds / max(per_step, 1e-9))))
    best = 0.0
    t0 = warmup
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(steps):
            step(t0 + i)
        t0 += steps
        best = max(best, steps / (time.perf_counter() - start))
    return best


def ours(model_kind, method, X, y, steps, policy=False, secure=False):
    """``policy=True``: run with the thread count ``NoisyMethod.fit`` would choose
    (default_threads); ``secure=True``: the CSPRNG noise and batches of secure mode."""
    from lastiterate.train.models import GLM, ModuleModel, mlp
    from lastiterate.train.trainer import NoisySGD, default_threads

    if model_kind == "glm":
        model = GLM(D, K, "multinomial-logistic", intercept=True, dtype=torch.float32)
    else:
        model = ModuleModel(
            mlp(D, K, (HIDDEN,), "relu", seed=0, dtype=torch.float32),
            "cross-entropy",
            method=method,
        )
    meth = NoisySGD(
        model, batch_size=B, sampling="poisson", lr=0.1, noise_std=1.0 / B, clip=1.0, secure=secure
    )
    run, _, sampler = meth.plan(N, steps=10**6)
    sigma = run.sigma
    old = torch.get_num_threads()
    if policy and default_threads(model, B) is not None:
        torch.set_num_threads(default_threads(model, B))
    try:
        return _best_rate(lambda t: meth.step(t, X, y, sampler, sigma, 0.1), steps)
    finally:
        torch.set_num_threads(old)


def noise_draws(n_params, secure, steps):
    """Noise vectors per second: one N(0, sigma^2 I) draw over ``n_params`` coordinates per step."""
    from lastiterate.train.randomness import Randomness

    r = Randomness.fresh(secure)
    return _best_rate(lambda t: r.gaussian(21, t, n_params, 1.0, torch.float32), steps)


SECURE_MARK = "## Secure mode (--secure): what it costs"


def secure_table(X, y, steps):
    """Default against secure randomness, 1 thread: whole steps and the noise draw alone."""
    n_glm, n_mlp = D * K + K, D * HIDDEN + HIDDEN + HIDDEN * K + K
    rows = [
        (
            "logreg 784x10",
            "noisy step (Poisson batch + noise)",
            lambda sec: ours("glm", None, X, y, steps, secure=sec),
        ),
        (
            "MLP 784-128-10",
            "noisy step (Poisson batch + noise)",
            lambda sec: ours("mlp", "linear", X, y, steps, secure=sec),
        ),
        (
            f"logreg 784x10 ({n_glm:,} parameters)",
            "noise draw alone",
            lambda sec: noise_draws(n_glm, sec, steps),
        ),
        (
            f"MLP 784-128-10 ({n_mlp:,} parameters)",
            "noise draw alone",
            lambda sec: noise_draws(n_mlp, sec, steps),
        ),
    ]
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    lines = [
        SECURE_MARK,
        "",
        (
            "1 torch thread; per second (best of 5 repeats). Default: numpy PCG64 batches and "
            "torch MT19937 noise keyed with 128 secret bits. Secure: keyed SHAKE-256 for "
            "every random bit and each Gaussian the sum of 4 Box-Muller samples / 2 (Holohan "
            "and Braghin, ESORICS 2021)."
        ),
        "",
        "| model | what | default /s | secure /s | secure cost |",
        "|---|---|---:|---:|---:|",
    ]
    try:
        for m, what, fn in rows:
            base, sec = fn(False), fn(True)
            print(f"secure table: {m} | {what}: {base:.0f} vs {sec:.0f}", flush=True)
            lines.append(f"| {m} | {what} | {base:,.0f} | {sec:,.0f} | {base / sec:.1f}x slower |")
    finally:
        torch.set_num_threads(old)
    load = __import__("os").getloadavg()
    lines += ["", f"Load average during this table: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}."]
    return "\n".join(lines) + "\n"


def _opacus_model(model_kind):
    torch.manual_seed(0)
    if model_kind == "glm":
        return nn.Sequential(nn.Linear(D, K))
    return nn.Sequential(nn.Linear(D, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, K))


def opacus_hooks(model_kind, X, y, steps):
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    model = GradSampleModule(_opacus_model(model_kind))
    opt = DPOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        expected_batch_size=B,
    )
    xb, yb = X[:B], y[:B]
    lossf = nn.CrossEntropyLoss()

    def step(t):
        opt.zero_grad()
        lossf(model(xb), yb).backward()
        opt.step()

    return _best_rate(step, steps)


def opacus_ghost(model_kind, X, y, steps):
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    model = _opacus_model(model_kind)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = PrivacyEngine(accountant="rdp")
    model, opt, crit, _ = engine.make_private(
        module=model,
        optimizer=opt,
        data_loader=DataLoader(TensorDataset(X, y), batch_size=B),
        criterion=nn.CrossEntropyLoss(),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        grad_sample_mode="ghost",
    )
    xb, yb = X[:B], y[:B]

    def step(t):
        opt.zero_grad()
        crit(model(xb), yb).backward()
        opt.step()

    return _best_rate(step, steps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--threads",
        default="1,2",
        help="comma-separated torch thread counts to measure (default 1,2)",
    )
    ap.add_argument("--steps", type=int, default=400, help="at most this many steps per repeat")
    ap.add_argument(
        "--tables",
        default="main,secure",
        help="main (against Opacus), secure (secure-mode cost); --tables "
        "secure keeps the main table",
    )
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "training.md")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    tables = {t.strip() for t in args.tables.split(",")}
    X, y = _data()
    s = args.steps
    secure = secure_table(X, y, s) if "secure" in tables else None
    if "main" not in tables:
        old = args.out.read_text() if args.out.exists() else ""
        kept = old.split(SECURE_MARK)[0].rstrip("\n")
        text = (kept + "\n\n" if kept else "") + (secure or "")
        print(text)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        return
    impls = [
        ("logreg 784x10", "lastiterate, closed form", lambda: ours("glm", None, X, y, s)),
        (
            "logreg 784x10",
            "lastiterate, closed form, fit()'s thread policy",
            lambda: ours("glm", None, X, y, s, True),
        ),
        (
            "logreg 784x10",
            "Opacus GradSampleModule + DPOptimizer",
            lambda: opacus_hooks("glm", X, y, s),
        ),
        ("logreg 784x10", "Opacus ghost clipping", lambda: opacus_ghost("glm", X, y, s)),
        (
            "MLP 784-128-10",
            "lastiterate, per-layer (default)",
            lambda: ours("mlp", "linear", X, y, s),
        ),
        (
            "MLP 784-128-10",
            "lastiterate, per-layer, fit()'s thread policy",
            lambda: ours("mlp", "linear", X, y, s, True),
        ),
        (
            "MLP 784-128-10",
            "lastiterate, torch.func vmap(grad)",
            lambda: ours("mlp", "vmap", X, y, s),
        ),
        (
            "MLP 784-128-10",
            "lastiterate, Opacus GradSampleModule inside",
            lambda: ours("mlp", "opacus", X, y, s),
        ),
        (
            "MLP 784-128-10",
            "Opacus GradSampleModule + DPOptimizer",
            lambda: opacus_hooks("mlp", X, y, s),
        ),
        ("MLP 784-128-10", "Opacus ghost clipping", lambda: opacus_ghost("mlp", X, y, s)),
    ]
    rates: dict[tuple[str, str, int], float | None] = {}
    notes: dict[tuple[str, str], str] = {}
    for nt in threads:
        torch.set_num_threads(nt)
        for m, impl, fn in impls:
            try:
                rates[(m, impl, nt)] = fn()
            except Exception as exc:  # noqa: BLE001 - report, do not abort the table
                rates[(m, impl, nt)] = None
                notes[(m, impl)] = f"failed: {type(exc).__name__}: {exc}"[:80]
            print(f"threads={nt} {m} | {impl}: {rates[(m, impl, nt)]}", flush=True)
    import opacus

    ref = "Opacus GradSampleModule + DPOptimizer"
    head = (
        "| model | implementation | "
        + " | ".join(f"steps/s ({t} thr.) | vs Opacus" for t in threads)
        + " |"
    )
    lines = [
        (
            f"# Noisy steps per second (batch {B}, float32, clip 1, Poisson rate {B}/{N} for "
            f"ours, {N} synthetic examples)"
        ),
        "",
        (
            f"torch {torch.__version__}, opacus {opacus.__version__}, {platform.machine()}, "
            f"{__import__('os').cpu_count()} CPUs (shared machine); best of 5 repeats; one "
            "process. 'vs Opacus' = ratio to Opacus GradSampleModule + DPOptimizer on the "
            "same model and thread count."
        ),
        "",
        head,
        "|---|---|" + "---:|---:|" * len(threads),
    ]
    for m, impl, _ in impls:
        cells = []
        for nt in threads:
            r = rates[(m, impl, nt)]
            base = rates.get((m, ref, nt))
            cells.append("-" if r is None else f"{r:,.0f}")
            cells.append("-" if r is None or not base else f"{r / base:.1f}x")
        note = notes.get((m, impl), "")
        lines.append(
            f"| {m} | {impl}{' (' + note + ')' if note else ''} | " + " | ".join(cells) + " |"
        )
    load = __import__("os").getloadavg()
    lines += [
        "",
        (
            "Load average during the run (other jobs on the machine): "
            f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}. "
            "With 2 threads every parallel kernel waits for a core, so that column mostly measures "
            "the contention; `NoisyMethod.fit` therefore trains small problems "
            "(parameters x batch < 5e7: every GLM, small MLPs) single-threaded by default: "
            'the rows "fit()\'s thread policy" are the trainer as it actually runs.'
        ),
    ]
    table = "\n".join(lines) + "\n" + ("\n" + secure if secure else "")
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)


if __name__ == "__main__":
    main()
