"""The calibration bracket never ends on the wrong side and needs few evaluations."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lastiterate.bracketing import Bracket, shrink_bracket


def _bracket(f, bad: float, good: float) -> Bracket:  # type: ignore[no-untyped-def]
    return Bracket(bad=bad, good=good, g_bad=f(bad), g_good=f(good))


@settings(max_examples=200, deadline=None)
@given(
    root=st.floats(-5, 5),
    power=st.floats(0.2, 3.0),
    kink=st.floats(-5, 5),
)
def test_continuous_bracket_keeps_the_invariant(root: float, power: float, kink: float) -> None:
    # monotone decreasing with a kink and a curvature: excess > 0 left of the root
    def f(x: float) -> float:
        d = root - x
        return math.copysign(abs(d) ** power, d) * (3.0 if x > kink else 1.0)

    calls = []

    def counted(x: float) -> float:
        calls.append(x)
        return f(x)

    b = shrink_bracket(
        counted, _bracket(f, -10.0, 10.0), done=lambda bad, good: abs(good - bad) <= 1e-6
    )
    assert f(b.bad) > 0 >= f(b.good)
    assert abs(b.good - b.bad) <= 1e-6
    assert b.bad <= root + 1e-12 and b.good >= root - 1e-12
    assert len(calls) < 80  # bisection would need about 25; interpolation usually far fewer


def test_log_linear_target_converges_in_a_few_steps() -> None:
    # eps proportional to 1/sigma: log-excess linear in log sigma, as for Gaussian bounds
    target = 2.0
    f = lambda x: math.log(3.0 / math.exp(x)) - math.log(target)
    calls = []
    b = shrink_bracket(
        lambda x: calls.append(x) or f(x),
        _bracket(f, math.log(0.5), math.log(8.0)),
        done=lambda bad, good: abs(good - bad) <= math.log1p(2e-4),
    )
    assert f(b.good) <= 0 < f(b.bad)
    assert len(calls) <= 6


@pytest.mark.parametrize("answer", [1, 2, 7, 63, 64, 1000])
def test_integer_bracket_finds_the_largest_good_integer(answer: int) -> None:
    f = lambda e: (e - answer - 0.5) ** 3  # > 0 (bad) above the answer
    b = shrink_bracket(
        f, _bracket(f, 2048.0, 1.0), done=lambda bad, good: bad - good <= 1, integer=True
    )
    assert b.good == answer and b.bad == answer + 1


def test_non_finite_excess_falls_back_to_bisection() -> None:
    f = lambda x: math.inf if x < 1.0 else -math.inf
    b = shrink_bracket(f, _bracket(f, -8.0, 8.0), done=lambda bad, good: abs(good - bad) <= 1e-3)
    assert b.bad < 1.0 <= b.good


@settings(max_examples=200, deadline=None)
@given(
    root=st.floats(-5, 5),
    power=st.floats(0.2, 3.0),
    kink=st.floats(-5, 5),
    width=st.sampled_from([1e-6, 1e-4, 1e-2]),
)
def test_closing_probe_keeps_the_invariant(
    root: float, power: float, kink: float, width: float
) -> None:
    """The secant steps and the closing probe (``close_within``) only choose points: the bracket
    still ends with bad > 0 >= good around the root and within the width."""

    def f(x: float) -> float:
        d = root - x
        return math.copysign(abs(d) ** power, d) * (3.0 if x > kink else 1.0)

    calls: list[float] = []
    b = shrink_bracket(
        lambda x: calls.append(x) or f(x),
        _bracket(f, -10.0, 10.0),
        done=lambda bad, good: abs(good - bad) <= width,
        close_within=width,
    )
    assert f(b.bad) > 0 >= f(b.good)
    assert abs(b.good - b.bad) <= width
    assert len(calls) < 80


def test_closing_probe_saves_evaluations_on_a_smooth_calibration() -> None:
    """eps ~ sigma^-2 (log-excess linear with slope 2, plus curvature): the secant and the closing
    probe finish in fewer evaluations than the bracket-end interpolation alone."""
    f = lambda x: math.log(3.0 * math.exp(-2.0 * x) + 0.1 * math.exp(-x)) - math.log(2.0)
    counts = {}
    for close in (None, math.log1p(2e-4)):
        calls: list[float] = []
        b = shrink_bracket(
            lambda x, calls=calls: calls.append(x) or f(x),  # type: ignore[misc]
            _bracket(f, math.log(0.5), math.log(8.0)),
            done=lambda bad, good: abs(good - bad) <= math.log1p(2e-4),
            close_within=close,
        )
        assert f(b.good) <= 0 < f(b.bad)
        counts[close is not None] = len(calls)
    assert counts[True] < counts[False]
    assert counts[True] <= 6


@settings(max_examples=200, deadline=None)
@given(
    answer=st.integers(1, 100_000),
    power=st.floats(0.2, 3.0),
    kink=st.floats(1, 100_000),
    frac=st.floats(0.01, 0.99),
)
def test_integer_closing_probe_keeps_the_invariant(
    answer: int, power: float, kink: float, frac: float
) -> None:
    """The integer closing probe (issue 11) only chooses points: on monotone maps with kinks and
    curvature the result is still the largest good integer."""
    root = answer + frac

    def f(e: float) -> float:
        d = e - root
        return math.copysign(abs(d) ** power, d) * (3.0 if e > kink else 1.0)

    b = shrink_bracket(
        f, _bracket(f, 200_000.0, 1.0), done=lambda bad, good: bad - good <= 1, integer=True
    )
    assert b.good == answer and b.bad == answer + 1


def test_integer_closing_probe_saves_evaluations_on_an_epoch_calibration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """log epsilon grows smoothly with the number of epochs (about log sqrt(E) for a
    composition), with a small wobble (grid effects): from a bracket 3500 epochs wide the probe
    ends the search in 4 evaluations, Illinois regula falsi alone needs 6."""
    from lastiterate import bracketing

    def f(e: float) -> float:
        return 0.5 * math.log(e / 24139.6) + 5e-5 * (math.sin(e / 7.0) - math.sin(24139.6 / 7.0))

    def count() -> tuple[Bracket, int]:
        calls: list[float] = []
        b = shrink_bracket(
            lambda e: calls.append(e) or f(e),
            _bracket(f, 24454.0, 20966.0),
            done=lambda bad, good: bad - good <= 1,
            integer=True,
        )
        return b, len(calls)

    b, with_probe = count()
    assert b.good == 24139 and b.bad == 24140
    monkeypatch.setattr(bracketing, "_integer_closing_probe", lambda b, last: None)
    b, without = count()
    assert b.good == 24139 and b.bad == 24140
    assert with_probe <= 4 < without
