"""Shared exact references of the PLD tests: a PMF's profile in mpmath, random kernel blocks."""

from __future__ import annotations

import mpmath as mp
import numpy as np

from lastiterate.notions.pld import kernels


def exact_profile_at(pmf, d: float, indices) -> dict:
    """The PMF's profile at grid points, evaluated exactly from its float masses."""
    probs = [mp.mpf(float(p)) for p in pmf.probs]
    dd = mp.mpf(d)
    n = len(probs)
    tail_u = [mp.mpf(0)] * (n + 1)
    tail_w = [mp.mpf(0)] * (n + 1)
    for k in range(n - 1, -1, -1):
        tail_u[k] = tail_u[k + 1] + probs[k]
        tail_w[k] = tail_w[k + 1] + probs[k] * mp.e ** (-(pmf.lower + k) * dd)
    out = {}
    for i in indices:
        k = min(max(i - pmf.lower + 1, 0), n)
        out[i] = mp.mpf(pmf.infinity_mass) + tail_u[k] - mp.e ** (i * dd) * tail_w[k]
    return out


def random_blocks(
    rng: np.random.Generator,
) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[int]]:
    """One or two blocks shaped like the kernels' (log masses of a bumpy PMF, indices >= 0)."""
    blocks, powers = [], []
    for _ in range(int(rng.integers(1, 3))):
        n = int(rng.integers(3, 5000))
        x = np.arange(n, dtype=float)
        centre, width = rng.uniform(0, n), rng.uniform(1.0, n / 2)
        logp = -0.5 * ((x - centre) / width) ** 2 + rng.normal(0.0, 0.5, n)
        logp -= float(np.max(logp))
        blocks.append(kernels._blocks(logp))
        powers.append(int(rng.choice([1, 7, 1000, 114_730, 10_000_000])))
    return blocks, powers
