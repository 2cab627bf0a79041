"""Thms 4.9 / 4.10 remember each window value they compute (issue 11).

A window search, the T -> infinity search and the evaluation at the run's T ask for the same
window C_p(G_a)^{k} (x) G_b more than the PLD composer's 8 cached compositions apart (e.g. the
limit's window again at T = 1e5 when c^tau underflows to 0).  The memo must return exactly what a
fresh computation gives (same results, detail by detail), and no window may be composed twice.
"""

from __future__ import annotations

from typing import Any

import pytest

from lastiterate.bounds import Query
from lastiterate.bounds import shifted_interpolation as si
from lastiterate.run import Run

BASE: dict[str, Any] = {
    "algorithm": "sgd",
    "sampling": "uniform",
    "n": 6000,
    "batch_size": 64,
    "lr": 0.05,
    "sensitivity": 2.0,
    "smoothness": 1.0,
    "strong_convexity": 0.02,
}


def _clear() -> None:
    si.forget_memos()


@pytest.mark.parametrize(
    ("extra", "delta"),
    [
        # c^tau underflows at the run's T: the limit's window is asked for again (a duplicate
        # without the memo, found by this test's count)
        ({"steps": 100000, "noise_std": 0.05, "strong_convexity": 0.5}, 1e-5),
        ({"steps": 20000, "noise_std": 0.05}, 1e-5),
        ({"steps": 20000, "noise_std": 0.05}, 1e-10),
        ({"steps": 300, "noise_std": 0.08, "diameter": 5.0}, 1e-5),
        (
            {
                "steps": 3000,
                "noise_std": 0.08,
                "diameter": 5.0,
                "strong_convexity": None,
                "convex": True,
            },
            1e-6,
        ),
    ],
)
def test_memoised_windows_equal_fresh_ones_and_are_composed_once(
    extra: dict[str, Any], delta: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    kw = {**BASE, **extra}
    run = Run(**{k: v for k, v in kw.items() if v is not None})
    query = Query(delta=delta)
    func = (
        si.noisy_sgd_bounded_convex if not run.strong_convexity else si.noisy_sgd_strongly_convex
    ).__wrapped__  # type: ignore[attr-defined]
    computed: list[tuple[Any, ...]] = []
    real = si._composition_value

    def counting(*args: Any) -> float:
        p, mu_sub, k, mu_gauss, _query, disc, max_points = args
        computed.append((p, mu_sub, k, mu_gauss, disc, max_points))
        return real(*args)

    _clear()
    monkeypatch.setattr(si, "_composition_value", counting)
    memo = func(run, query)
    assert computed and len(computed) == len(set(computed))
    # fresh: every window computed anew, nothing remembered between evaluations
    monkeypatch.setattr(si, "_WINDOW_VALUES", _NoMemory())
    _clear()
    computed.clear()
    fresh = func(run, query)
    assert memo.epsilon == fresh.epsilon
    assert memo.details == fresh.details


class _NoMemory(dict):  # type: ignore[type-arg]
    """A dict that forgets everything stored in it."""

    def __setitem__(self, key: Any, value: Any) -> None:
        return None
