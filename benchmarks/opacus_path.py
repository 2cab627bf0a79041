"""Seconds per full-batch step of ``make_private_last_iterate``: per-example gradients against
ghost clipping.

An MNIST-5k-sized problem (issue 9's utility benchmark trains its 4000-row training split): 4000
synthetic rows of 784 features with norm 1, 10 classes, ``nn.Linear(784, 10)`` (7,850
parameters), cross-entropy, ``sampling="cyclic"`` with ``batch_size = n`` (every step is the full
batch), float32.  A step is ``optimizer.zero_grad(); loss(module(x), y).backward();
optimizer.step()`` on the batch the returned loader yields (drawing it is timed separately): the
default mode (``grad_sample_mode="hooks"``, Opacus' ``GradSampleModule`` materialises the [4000,
10, 784] per-example gradients) against ``grad_sample_mode="ghost"`` (per-example norms only).
Both modes train the same parameters (tests/train/test_opacus_ghost.py); here they are also
checked to agree after the timed steps.

Timing: best of 5 repeats of ``--steps`` steps each after one warm-up step, on ``--threads``
torch threads (default 1; the machine is shared, the best repeat is the least disturbed).  Run:
``python benchmarks/opacus_path.py [--threads 1] [--steps 5] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lastiterate.opacus import make_private_last_iterate

warnings.filterwarnings("ignore")  # Opacus' "Full backward hook" notice on the first layer

N, D, K = 4000, 784, 10


def _data() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(N, D, generator=g)
    X = X / X.norm(dim=1, keepdim=True)
    y = (X @ torch.randn(K, D, generator=g).T).argmax(1)
    return TensorDataset(X, y)


def wire(mode: str) -> tuple:
    """(module, optimizer, loss, loader) of one mode, with the same seed and declaration."""
    torch.manual_seed(0)
    model = nn.Linear(D, K)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, weight_decay=0.005)
    kw = {
        "target_epsilon": 1.0,
        "target_delta": 1e-5,
        "epochs": 50,
        "max_grad_norm": 1.0,
        "sampling": "cyclic",
        "data_norm": 1.0,
        "seed": 1,
        "bounds": ["gdp-composition"],  # the accountant is not what is timed
    }
    loader = DataLoader(_data(), batch_size=N)
    if mode == "ghost":
        module, dp_opt, loss, dp_loader, _ = make_private_last_iterate(
            model, opt, loader, grad_sample_mode="ghost", criterion=nn.CrossEntropyLoss(), **kw
        )
        return module, dp_opt, loss, dp_loader
    module, dp_opt, dp_loader, _ = make_private_last_iterate(
        model, opt, loader, loss="cross-entropy", **kw
    )
    return module, dp_opt, nn.functional.cross_entropy, dp_loader


def measure(mode: str, steps: int, repeats: int = 5) -> tuple[float, float, torch.Tensor]:
    """(best seconds per step, best seconds per batch drawn from the loader, parameters)."""
    module, opt, loss, loader = wire(mode)
    batches = iter(loader)

    def next_batch():
        nonlocal batches
        try:
            return next(batches)
        except StopIteration:  # the next epoch
            batches = iter(loader)
            return next(batches)

    def step(xb, yb):
        opt.zero_grad()
        loss(module(xb), yb).backward()
        opt.step()

    step(*next_batch())  # warm-up
    best_step = best_draw = float("inf")
    for _ in range(repeats):
        drawn, start = [], time.perf_counter()
        for _ in range(steps):
            drawn.append(next_batch())
        best_draw = min(best_draw, (time.perf_counter() - start) / steps)
        start = time.perf_counter()
        for xb, yb in drawn:
            step(xb, yb)
        best_step = min(best_step, (time.perf_counter() - start) / steps)
    params = torch.cat([p.detach().reshape(-1) for p in module.parameters()])
    return best_step, best_draw, params


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--steps", type=int, default=5, help="steps per repeat (default 5)")
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "opacus-path.md"
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import opacus

    results = {mode: measure(mode, args.steps) for mode in ("hooks", "ghost")}
    same = torch.allclose(results["ghost"][2], results["hooks"][2], rtol=1e-5, atol=1e-6)
    base = results["hooks"][0]
    lines = [
        f"# make_private_last_iterate: one full-batch step, {N} x {D}, {K} classes",
        "",
        (
            f"torch {torch.__version__}, opacus {opacus.__version__}, {platform.machine()}, "
            f"{os.cpu_count()} CPUs (shared machine), {args.threads} torch thread(s); best of 5 "
            f"repeats of {args.steps} steps after a warm-up; `python benchmarks/opacus_path.py "
            f"--threads {args.threads} --steps {args.steps}`."
        ),
        "",
        "| grad_sample_mode | s per step | vs hooks | s per batch drawn (loader) |",
        "|---|---:|---:|---:|",
    ]
    for mode, (sec, draw, _) in results.items():
        lines.append(f"| {mode} | {sec:.4f} | {base / sec:.1f}x | {draw:.4f} |")
    load = os.getloadavg()
    lines += [
        "",
        (
            f"Both modes trained the same parameters ({1 + 5 * args.steps} steps, same seed): "
            f"{'yes' if same else 'NO'} (torch.allclose, rtol 1e-5). Load average during the "
            f"run (other jobs on the machine): {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}."
        ),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
