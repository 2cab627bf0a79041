"""The second tilt placement of a pass starts Newton's certifying points at the first one's
tilt (``kernels._tilt_above``, issue 11): the bisection's bracket must still be the plain
bisection's, bit for bit, from any starting point (only which steps are evaluated changes)."""

from __future__ import annotations

import numpy as np
import pytest

from lastiterate.notions.pld import kernels

from ._pld_exact import random_blocks


@pytest.mark.parametrize("seed", range(30))
def test_any_start_gives_the_plain_bisection(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1000 + seed)
    blocks, powers = random_blocks(rng)
    top = sum(k * float(c[-1]) for (_, c), k in zip(blocks, powers))
    hi = 600.0 / max(len(c) for _, c in blocks) * float(rng.uniform(0.2, 3.0))
    low = kernels._tilted_mean(blocks, powers, 0.0)
    for frac in (0.05, 0.5, 0.95):
        target = low + frac * (min(top, kernels._tilted_mean(blocks, powers, hi)) - low)
        monkeypatch.setattr(kernels, "_CERTIFIED_BISECTION", False)
        plain = kernels._tilt_bracket(blocks, powers, target, hi, 24)
        monkeypatch.setattr(kernels, "_CERTIFIED_BISECTION", True)
        for x in (1e-9 * hi, 0.3 * hi, 0.999 * hi, plain[0], plain[1], -1.0, 2.0 * hi):
            start = (x, *kernels._tilted_moments(blocks, powers, max(x, 0.0)))
            assert kernels._tilt_bracket(blocks, powers, target, hi, 24, start) == plain


def test_tilt_above_starts_at_the_first_tilt(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second placement is given the first tilt and its moments (and uses them: one
    moments evaluation fewer than without)."""
    rng = np.random.default_rng(7)
    blocks, powers = random_blocks(rng)
    top = sum(k * float(c[-1]) for (_, c), k in zip(blocks, powers))
    hi = 600.0 / max(len(c) for _, c in blocks)
    target = 0.5 * (kernels._tilted_mean(blocks, powers, 0.0) + min(top, 0.9 * top))
    seen: list[object] = []
    real = kernels._tilt_for_mean

    def spy(*args: object, **kw: object) -> float:
        seen.append(kw.get("start", args[4] if len(args) > 4 else None))
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(kernels, "_tilt_for_mean", spy)
    kernels._tilt_above(blocks, powers, target, top, hi)
    assert seen[0] is None and isinstance(seen[1], tuple) and len(seen[1]) == 3
