"""``lastiterate demo``: a short privacy report for a built-in example run.

The example is paper 000's regularised logistic regression on MNIST (section 4.4): NoisyCGD with
n = 60000, b = 1500, 200 epochs, lr = 0.05, per-step GDP scale L/(b sigma) = 2/3, strong convexity
0.002 and smoothness 32.5.  The report contrasts what a standard accountant charges for releasing
every iterate with what releasing only the final model costs, and shows the same run as Poisson
DP-SGD, where only composition applies.
"""

from __future__ import annotations

from lastiterate.accountant import account
from lastiterate.run import Run

EXAMPLE = {
    "algorithm": "cgd",
    "n": 60000,
    "batch_size": 1500,
    "epochs": 200,
    "lr": 0.05,
    "noise_std": 0.01,
    "sensitivity": 10.0,
    "strong_convexity": 0.002,
    "smoothness": 32.5,
}


def run_demo(delta: float = 1e-5) -> str:
    """The demo text (every number computed now by the accountant)."""
    run = Run(**EXAMPLE)  # type: ignore[arg-type]
    report = account(run, delta=delta)
    lines = [
        "lastiterate demo: privacy of releasing only the final model",
        "=" * 60,
        "Example: paper 000's regularised logistic regression (NoisyCGD, cyclic batches).",
        "",
        report.format(),
        "",
        "Same data, Poisson-sampled DP-SGD (Opacus-style, add/remove, noise multiplier 1.1,",
        "batch 256, 15 epochs), no geometry declared: only composition applies.",
        "",
    ]
    sgd = Run(
        algorithm="sgd",
        n=60000,
        batch_size=256,
        epochs=15,
        lr=0.25,
        noise_multiplier=1.1,
        clip=1.0,
        sampling="poisson",
        adjacency="add-remove",
    )
    lines.append(account(sgd, delta=delta).format())
    lines += [
        "",
        (
            "Try:  lastiterate account --help    lastiterate calibrate --help    "
            "lastiterate reproduce list"
        ),
    ]
    return "\n".join(lines)
