"""Two exact speed-ups of the PLD kernels (issue 11) against the paths they replace.

* The tilt bisection decides the steps it can certify without evaluating them
  (``kernels._certifying_points``): its bracket must be the plain bisection's bit for bit.
* The aliasing profile of a tilted pass remembers its factors' summaries between the cheap and
  the refined profile (``kernels._tail_summaries``): the same numbers as computed afresh.

So every reported value on the extremes grid of ``benchmarks/accountant.py`` (T up to 1e7, delta
down to 1e-12, sampling rate near 1) must be the same number on both paths.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from lastiterate.bounds import Query
from lastiterate.bounds import composition as comp
from lastiterate.bounds import shifted_interpolation as si
from lastiterate.notions.pld import kernels
from lastiterate.run import Run

from ._pld_exact import random_blocks


def _both(
    blocks: Any, powers: Any, target: float, hi: float, steps: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[tuple[float, float], tuple[float, float]]:
    monkeypatch.setattr(kernels, "_CERTIFIED_BISECTION", False)
    slow = kernels._tilt_bracket(blocks, powers, target, hi, steps)
    monkeypatch.setattr(kernels, "_CERTIFIED_BISECTION", True)
    fast = kernels._tilt_bracket(blocks, powers, target, hi, steps)
    return slow, fast


@pytest.mark.parametrize("seed", range(40))
def test_certified_bisection_is_the_plain_bisection(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(seed)
    blocks, powers = random_blocks(rng)
    top = sum(k * float(c[-1]) for (_, c), k in zip(blocks, powers))
    hi = 600.0 / max(len(c) for _, c in blocks) * float(rng.uniform(0.2, 3.0))
    mean0 = kernels._tilted_mean(blocks, powers, 0.0)
    for target in (
        mean0 + float(rng.uniform(0.0, 1.0)) * (top - mean0),
        kernels._tilted_mean(blocks, powers, hi * float(rng.uniform(0.0, 1.0))),  # a hit root
        kernels._tilted_mean(blocks, powers, hi * 0.5),  # the first mid exactly
        mean0 - 1.0,  # below every tilt's mean
    ):
        for steps in (10, 24):
            slow, fast = _both(blocks, powers, target, hi, steps, monkeypatch)
            assert fast == slow


def test_certified_bisection_evaluates_less(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path is taken (fewer mean evaluations than steps), so the equalities above and
    below compare two different computations."""
    rng = np.random.default_rng(1)
    blocks, powers = random_blocks(rng)
    hi = 600.0 / max(len(c) for _, c in blocks)
    target = kernels._tilted_mean(blocks, powers, 0.37 * hi)
    calls = {"mean": 0, "moments": 0}
    mean, moments = kernels._tilted_mean, kernels._tilted_moments

    def count_mean(*a: Any) -> float:
        calls["mean"] += 1
        return mean(*a)

    def count_moments(*a: Any) -> tuple[float, float]:
        calls["moments"] += 1
        return moments(*a)

    monkeypatch.setattr(kernels, "_tilted_mean", count_mean)
    monkeypatch.setattr(kernels, "_tilted_moments", count_moments)
    kernels._tilt_bracket(blocks, powers, target, hi, 24)
    assert calls["mean"] + calls["moments"] < 15  # the plain bisection: 25 means


def test_error_bound_covers_the_computed_mean() -> None:
    """E of ``_tilted_mean_error`` against the mean computed in 40-digit arithmetic (mpmath)."""
    mpmath = pytest.importorskip("mpmath")
    rng = np.random.default_rng(7)
    blocks, powers = random_blocks(rng)
    blocks = [(lm[:300], c[:300]) for lm, c in blocks]  # mpmath: keep it short
    hi = 600.0 / 300
    err = kernels._tilted_mean_error(blocks, powers, hi)
    with mpmath.workdps(40):
        for lam in np.linspace(0.0, hi, 7):
            exact = mpmath.mpf(0)
            for (logm, c), k in zip(blocks, powers):
                w = [
                    mpmath.exp(mpmath.mpf(float(a)) + mpmath.mpf(float(lam)) * float(b))
                    for a, b in zip(logm, c)
                ]
                s = mpmath.fsum(w)
                exact += k * mpmath.fsum(wi * float(b) for wi, b in zip(w, c)) / s
            got = kernels._tilted_mean(blocks, powers, float(lam))
            assert abs(mpmath.mpf(got) - exact) <= err
            assert (
                abs(mpmath.mpf(kernels._tilted_moments(blocks, powers, float(lam))[0]) - exact)
                <= err
            )


#: the extremes table of benchmarks/accountant.py (n = 60000, b = 256, sigma = 0.02, L = 2)
BASE: dict[str, Any] = {
    "algorithm": "sgd",
    "n": 60000,
    "batch_size": 256,
    "lr": 0.05,
    "noise_std": 0.02,
    "sensitivity": 2.0,
    "smoothness": 1.0,
}
_SC = {"sampling": "uniform", "strong_convexity": 0.002}
_SC_D_CLIP = {
    "sampling": "uniform",
    "strong_convexity": 0.002,
    "diameter": 10.0,
    "sensitivity": None,
    "clip": 1.0,
}
_CONVEX_D = {"sampling": "uniform", "convex": True, "diameter": 10.0}
_RATE_1 = {"batch_size": 59999}
_POISSON_AR = {"sampling": "poisson", "adjacency": "add-remove", "sensitivity": None, "clip": 1.0}

LAST_ITERATE = [
    (_SC, 10_000_000, 1e-5),
    (_SC, 10_000_000, 1e-12),
    (_SC_D_CLIP, 100_000, 1e-12),
    ({**_SC_D_CLIP, **_RATE_1}, 100_000, 1e-12),
    ({**_SC_D_CLIP, **_RATE_1}, 1000, 1e-5),
    pytest.param(_CONVEX_D, 10_000_000, 1e-12, marks=pytest.mark.slow),
]
COMPOSITION = [
    (_SC, 10_000_000, 1e-12),  # uniform batches: Thm 4.8
    ({**_POISSON_AR, **_RATE_1}, 10_000_000, 1e-12),
    (_POISSON_AR, 10_000_000, 1e-5),
]


def _run(extra: dict[str, Any], steps: int) -> Run:
    kw = {**BASE, **extra, "steps": steps}
    return Run(**{k: v for k, v in kw.items() if v is not None})


def _clear() -> None:
    si.forget_memos()
    comp.forget_memos()


def _theorem(run: Run) -> Any:
    func = si.noisy_sgd_strongly_convex if run.strong_convexity else si.noisy_sgd_bounded_convex
    return func.__wrapped__  # type: ignore[attr-defined]  # not the memoised wrapper


@pytest.mark.parametrize(("extra", "steps", "delta"), LAST_ITERATE)
def test_last_iterate_bounds_unchanged(
    extra: dict[str, Any], steps: int, delta: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, query = _run(extra, steps), Query(delta=delta)
    _clear()
    fast = _theorem(run)(run, query)
    monkeypatch.setattr(kernels, "_CERTIFIED_BISECTION", False)
    monkeypatch.setattr(kernels, "_REMEMBER_TAIL_SUMMARIES", False)
    _clear()
    slow = _theorem(run)(run, query)
    _clear()
    assert fast.epsilon == slow.epsilon
    assert fast.details == slow.details


@pytest.mark.parametrize(("extra", "steps", "delta"), COMPOSITION)
def test_composition_bracket_unchanged(
    extra: dict[str, Any], steps: int, delta: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, query = _run(extra, steps), Query(delta=delta)
    _clear()
    fast = comp._sgd_pld_for_query(run, query)
    monkeypatch.setattr(kernels, "_CERTIFIED_BISECTION", False)
    monkeypatch.setattr(kernels, "_REMEMBER_TAIL_SUMMARIES", False)
    _clear()
    slow = comp._sgd_pld_for_query(run, query)
    _clear()
    assert fast.at_query[0] == slow.at_query[0]  # the reported epsilon
    assert fast.at_query[1] == slow.at_query[1]  # its certified lower end
    assert math.isfinite(fast.at_query[0])
    assert fast.pld.discretization == slow.pld.discretization


def test_remembered_tail_summaries_are_the_fresh_ones() -> None:
    """The aliasing profile's factor summaries, remembered between the cheap and the refined
    profile of one pass (issue 11), are the numbers a fresh computation gives."""
    rng = np.random.default_rng(3)
    blocks, powers = random_blocks(rng)
    # normalised factors, as a tilted pass hands them over
    logxs = [lm - float(np.log(np.sum(np.exp(lm)))) for lm, _ in blocks]
    above = np.array([10.0, 1e3, 1e5])
    below = np.array([-5.0, 2.0, 40.0])
    first = kernels._chernoff_tails(logxs, powers, above, below, refine=False)
    again = kernels._chernoff_tails(logxs, powers, above, below)  # from the memo
    kernels._TAIL_SUMMARY_MEMO.clear()
    fresh = kernels._chernoff_tails(logxs, powers, above, below)
    copies = kernels._chernoff_tails([x.copy() for x in logxs], powers, above, below)
    cheap = kernels._chernoff_tails(logxs, powers, above, below, refine=False)
    for a, b in zip(again + first, fresh + cheap):
        assert np.array_equal(a, b)
    assert np.all(np.isfinite(fresh[0])) and np.all(fresh[0] <= cheap[0])
    for a, b in zip(copies, fresh):
        assert np.array_equal(a, b)
