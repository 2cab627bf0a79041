"""Plots of account reports (matplotlib, imported lazily; install the ``plot`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from lastiterate.notions.tradeoff import epsilon_delta_tradeoff


def plot_report(report: Any, path: Path | str) -> Path:
    """Draw the tradeoff curve of every result of ``report`` (type I error alpha, log scale, vs type
    II error).

    GDP results are drawn exactly (G_mu); results known only through (epsilon, delta) — RDP and PLD
    results — are drawn as the tradeoff curve of the reported (epsilon, delta) pair.  Higher curves
    mean more privacy; the diagonal 1 - alpha is perfect privacy.
    """
    try:
        import matplotlib
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
        raise ModuleNotFoundError(
            "plotting needs matplotlib: pip install 'lastiterate[plot]'"
        ) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    alpha = np.geomspace(1e-40, 1.0, 800)
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    ax.plot(alpha, 1 - alpha, color="0.7", lw=1, ls=":", label="perfect privacy")
    best = report.best
    for r in report.results:
        if r.tradeoff is not None:
            beta = r.tradeoff(alpha)
            how = f"mu={r.mu:.3g}" if r.mu is not None else ""
        else:
            beta = epsilon_delta_tradeoff(alpha, r.epsilon, r.delta)
            how = f"({r.epsilon:.3g}, {r.delta:.2g})-DP"
        style = "--" if r.kind == "estimate" else "-"
        width = 2.6 if r is best else 1.3
        ax.plot(alpha, beta, ls=style, lw=width, label=f"{r.bound} [{r.kind}] {how}")
    ax.set_xscale("log")
    ax.set_xlabel("type I error alpha (log scale: strong guarantees differ at tiny alpha)")
    ax.set_ylabel("type II error beta")
    ax.set_xlim(alpha[0], 1)
    ax.set_ylim(0, 1.02)
    ax.set_title(
        "Tradeoff curves of the released last iterate\n(higher = more private; thick = best bound)",
        fontsize=9,
    )
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
