"""The grid of a window's reported value (Thms 4.9 / 4.10, issue 11).

A window whose composition would need more than ``_FINAL_GRID_POINTS`` points on the default grid
(1e-4) is reported on a power-of-two multiple of it (``_final_discretization``).  Those grids are
nested in the default one, so the reported epsilon may only move outward: checked here against the
same theorem forced onto 1e-4, on the extremes table's runs where the rule coarsens (T = 1e7) and
where it does not (T = 1e5, bit for bit).  The window search itself is unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lastiterate.bounds import Query
from lastiterate.bounds import shifted_interpolation as si
from lastiterate.run import Run

from ._extremes import BASE, SC

_RATE_1 = {**SC, "batch_size": 59999}

CASES = [
    (SC, 10_000_000, 1e-5),
    (SC, 10_000_000, 1e-12),
    (_RATE_1, 10_000_000, 1e-12),
    (SC, 100_000, 1e-12),
]


def _thm49(run: Run, query: Query) -> Any:
    si.forget_memos()
    try:
        return si.noisy_sgd_strongly_convex.__wrapped__(run, query)  # type: ignore[attr-defined]
    finally:
        si.forget_memos()


@pytest.mark.parametrize(("extra", "steps", "delta"), CASES)
def test_coarser_final_grid_moves_the_epsilon_only_outward(
    extra: dict[str, Any], steps: int, delta: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = Run(**{**BASE, **extra, "steps": steps})
    query = Query(delta=delta)
    new = _thm49(run, query)
    rule = si._final_discretization
    monkeypatch.setattr(si, "_final_discretization", lambda c, q, mu=0.0: rule(c, q))
    old = _thm49(run, query)
    assert old.details["discretization"] == si.DEFAULT_FINAL_DISCRETIZATION
    for key in ("chosen", "window_steps", "theta", "epsilon_limit"):  # the same search
        assert new.details[key] == old.details[key]
    if new.details["discretization"] == old.details["discretization"]:
        assert new.epsilon == old.epsilon
    else:
        assert old.epsilon <= new.epsilon <= old.epsilon * (1.0 + 1e-3)


def test_the_coarser_grid_is_exercised() -> None:
    """Thm 4.9's window at T = 1e7 takes a coarser grid (the check above is not vacuous) and
    T = 1e5 keeps the default."""
    long = _thm49(Run(**{**BASE, **SC, "steps": 10_000_000}), Query(delta=1e-12))
    assert long.details["chosen"] == "window"
    assert long.details["discretization"] > si.DEFAULT_FINAL_DISCRETIZATION
    short = _thm49(Run(**{**BASE, **SC, "steps": 100_000}), Query(delta=1e-12))
    assert short.details.get("discretization") == si.DEFAULT_FINAL_DISCRETIZATION


def test_final_grids_are_nested_in_the_default_grid() -> None:
    """Every width the rule returns is 2, 4 or 8 times the default (nested grids), it never
    becomes finer as the window grows, and a large epsilon keeps its 1e-3."""
    query = Query(delta=1e-5)
    last = si.DEFAULT_FINAL_DISCRETIZATION
    for mu in np.geomspace(1e-3, 1e4, 200):
        width = si._final_discretization(1.0, query, float(mu))
        got = si.DEFAULT_FINAL_DISCRETIZATION if width is None else width
        assert got / si.DEFAULT_FINAL_DISCRETIZATION in (1.0, 2.0, 4.0, 8.0)
        assert got >= last
        last = got
    assert last == 8 * si.DEFAULT_FINAL_DISCRETIZATION
    assert si._final_discretization(1.0, query, 0.0) is None
    assert si._final_discretization(25.0, query, 1e4) == 1e-3
