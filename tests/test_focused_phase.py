"""The focused phase of the calibrations (:func:`lastiterate.accountant._focused_bracket`), one
phase for the noise (continuous) and the integer searches (epochs, batch size), on synthetic
bounds whose answers are known: the bound the locating estimates name may be the wrong one, and
the phase must still end on the best bound's bracket."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

from lastiterate import accountant as acc
from lastiterate.bracketing import shrink_bracket

TARGET = 1.0


def _search(curves: dict[str, Any], calls: list[tuple[str, ...]]) -> acc._FocusedSearch:
    """An integer search where each bound's epsilon at k is ``curves[id](k)``."""
    reports: dict[int, Any] = {}

    def report(k: int) -> Any:
        results = [SimpleNamespace(bound=b, kind="bound", epsilon=f(k)) for b, f in curves.items()]
        return SimpleNamespace(results=results, best=min(results, key=lambda r: r.epsilon))

    def full(x: float) -> float:
        k = int(x)
        if k not in reports:
            calls.append(("full",))
            reports[k] = report(k)
        return acc._log_excess(reports[k].best.epsilon, TARGET)

    def partial(x: float, ids: list[str]) -> float:
        calls.append(tuple(ids))
        return min(curves[b](int(x)) for b in ids)

    return acc._FocusedSearch(
        full=full,
        report_at=lambda x: reports.get(int(x)),
        partial=partial,
        near=lambda f, x: acc._integer_bracket_near(f, (int(x), None), 1e6),
        shrink=lambda f, b: shrink_bracket(
            f, b, done=lambda bad, good: bad - good <= 1, integer=True
        ),
        key=lambda x: int(x),
        label=lambda x: f"k={int(x)}",
        target=TARGET,
        progress=None,
    )


def _answer(curves: dict[str, Any]) -> int:
    """The largest k whose best epsilon meets the target (all curves increase in k)."""
    k = 1
    while min(f(k + 1) for f in curves.values()) <= TARGET:
        k += 1
    return k


@pytest.mark.parametrize(
    ("curves", "named"),
    [
        ({"a": lambda k: 0.01 * k, "b": lambda k: 0.008 * k}, "a"),  # b far better: retried
        ({"a": lambda k: 0.01 * k, "b": lambda k: 0.008 * k}, "b"),  # named right
        # b just below the target at a's answer, and meeting it one step further: the rival
        # check at the bad end sees it, and the phase retries with b
        ({"a": lambda k: 0.01 * k, "b": lambda k: 0.993 + 1e-5 * (k - 100)}, "a"),
        # b within 1% at a's answer but above the target one step further: a's bracket holds
        ({"a": lambda k: 0.01 * k, "b": lambda k: 0.00995 * k}, "a"),
    ],
)
def test_the_phase_ends_on_the_best_bounds_bracket(curves: dict[str, Any], named: str) -> None:
    calls: list[tuple[str, ...]] = []
    out = acc._focused_bracket(_search(curves, calls), 100.0, named)
    assert out.bracket is not None
    want = _answer(curves)
    assert (out.bracket.good, out.bracket.bad) == (float(want), float(want + 1))
    assert out.bracket.g_good <= 0 < out.bracket.g_bad


def test_without_a_retry_a_rival_at_the_bad_end_hands_over() -> None:
    """With the retry spent, a rival meeting the target at the bad end leaves no bracket: the
    caller's full search starts from the good end (``other_meets_bad``)."""
    curves = {"a": lambda k: 0.01 * k, "b": lambda k: 0.993 + 1e-5 * (k - 100)}
    calls: list[tuple[str, ...]] = []
    out = acc._focused_bracket(_search(curves, calls), 100.0, "a", retry=False)
    assert out.bracket is None and out.other_meets_bad
    assert (out.good, out.bad) == (100, 101)
    assert ("b",) in calls  # the rival was evaluated at the bad end only
    assert math.isfinite(out.x1)
