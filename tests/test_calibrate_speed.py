"""The fast calibration path (issue 11): locating estimates first, then full accountings.

The locating pass (``lastiterate.bounds.base.locating_estimates``: coarse PLD grids without the
optimistic twin, the RDP window bounds' locating curves) only chooses where the full accountings
are made.  These tests check that the fast path returns what the slow path (full accountings only)
returns, to the calibration's stated tolerance, that it never overshoots, and that no estimate
reaches a report.
"""

from __future__ import annotations

import math

import pytest

import lastiterate.accountant as accountant_module
from lastiterate.accountant import account, calibrate_epochs, calibrate_noise
from lastiterate.bounds.base import Query, locating, locating_estimates
from lastiterate.run import Run

DELTA = 1e-5
RTOL = 2e-4  # calibrate_noise's default relative bracket width


def poisson_run(**kw: object) -> Run:
    base: dict[str, object] = {
        "algorithm": "sgd",
        "n": 60000,
        "batch_size": 256,
        "steps": 14000,
        "lr": 0.1,
        "noise_multiplier": 1.1,
        "clip": 1.0,
        "sampling": "poisson",
        "adjacency": "add-remove",
    }
    base.update(kw)
    return Run(**base)  # type: ignore[arg-type]


def uniform_diameter_run(**kw: object) -> Run:
    base: dict[str, object] = {
        "algorithm": "sgd",
        "n": 3000,
        "batch_size": 150,
        "steps": 100,
        "lr": 0.05,
        "noise_std": 0.05,
        "clip": 5.0,
        "convex": True,
        "smoothness": 32.5,
        "diameter": 1.0,
        "sampling": "uniform",
    }
    base.update(kw)
    return Run(**base)  # type: ignore[arg-type]


def _slow_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full accountings only (the search before issue 11's locating pass)."""
    monkeypatch.setattr(accountant_module, "_locate", lambda *a, **k: None)
    monkeypatch.setattr(accountant_module, "_locate_epochs", lambda *a, **k: None)


def _assert_noise_answer(run: Run, cal: accountant_module.Calibration, target: float) -> None:
    best = cal.report.best
    assert best is not None and best.epsilon <= target  # never overshoots
    # the report is the full accounting of the returned noise, not an estimate
    again = account(run.replace(noise_std=cal.noise_std), delta=DELTA).best
    assert again is not None and again.epsilon == best.epsilon and again.bound == best.bound
    # tight: a relative 3e-4 less noise is past the bracket's bad end
    below = account(run.replace(noise_std=cal.noise_std * (1 - 1.5 * RTOL)), delta=DELTA).best
    assert below is not None and below.epsilon > target


@pytest.mark.parametrize(
    ("make", "target"),
    [
        (poisson_run, 3.0),
        (lambda: poisson_run(steps=200), 0.5),
        # pabi: ~0.7 s per full accounting, the slow path needs ~9 of them
        pytest.param(uniform_diameter_run, 6.0, marks=pytest.mark.slow),
    ],
)
def test_fast_noise_calibration_matches_the_slow_path(
    make: object, target: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = make()  # type: ignore[operator]
    fast = calibrate_noise(run, epsilon=target, delta=DELTA)
    _assert_noise_answer(run, fast, target)
    _slow_path(monkeypatch)
    slow = calibrate_noise(run, epsilon=target, delta=DELTA)
    _assert_noise_answer(run, slow, target)
    # both are the good end of a bracket of relative width <= RTOL around the same root
    assert abs(math.log(fast.noise_std / slow.noise_std)) <= 2 * math.log1p(RTOL)


@pytest.mark.parametrize(
    ("make", "target"),
    [
        (lambda: poisson_run(steps=1000), 2.0),
        pytest.param(uniform_diameter_run, 8.0, marks=pytest.mark.slow),
    ],
)
def test_fast_epoch_calibration_equals_the_slow_path(
    make: object, target: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = make()  # type: ignore[operator]
    fast = calibrate_epochs(run, epsilon=target, delta=DELTA)
    _slow_path(monkeypatch)
    slow = calibrate_epochs(run, epsilon=target, delta=DELTA)
    assert fast.epochs == slow.epochs and fast.epochs is not None
    e = int(fast.epochs)
    assert account(run.replace(epochs=e), delta=DELTA).best.epsilon <= target  # type: ignore[union-attr]
    assert account(run.replace(epochs=e + 1), delta=DELTA).best.epsilon > target  # type: ignore[union-attr]
    assert fast.report.best == slow.report.best


def test_locating_estimates_are_scoped_and_never_reported() -> None:
    """Inside the block the composition is a coarse estimate without a certified bracket; outside,
    the same run gets the reported PLD (1e-4 grid, optimistic twin) again."""
    run = poisson_run()
    assert not locating()
    with locating_estimates():
        assert locating()
        rough = account(run, delta=DELTA).result("pld-composition")
    assert not locating()
    full = account(run, delta=DELTA).result("pld-composition")
    assert rough is not None and full is not None
    # (Poisson: 2.5e-4, bounds/composition._LOCATING_DISCRETIZATION_POISSON; uniform batches 1e-3)
    assert rough.details["discretization"] == 2.5e-4 and "epsilon_lower" not in rough.details
    assert full.details["discretization"] == 1e-4 and full.details["epsilon_lower"] is not None
    # the estimate is a coarser pessimistic grid: above the reported bound, close to it
    assert full.epsilon <= rough.epsilon <= full.epsilon * 1.02


def test_calibration_falls_back_when_the_estimates_mislead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A locating pass far from the answer costs evaluations, never correctness."""
    monkeypatch.setattr(
        accountant_module,
        "_locate",
        lambda *a, **k: accountant_module._Located(x=math.log(1e-5), slope=100.0, bad_direction=-1),
    )
    run = poisson_run(steps=200)
    cal = calibrate_noise(run, epsilon=0.5, delta=DELTA)
    _assert_noise_answer(run, cal, 0.5)


def test_query_object_unchanged_by_locating() -> None:
    q = Query(delta=DELTA)
    with locating_estimates():
        assert q.report_orders == Query(delta=DELTA).report_orders


@pytest.mark.parametrize(
    ("run", "target", "delta"),
    [
        # sampling rate near 1 (the Poisson PLD, not the rate-1 closed form; the literal RDP
        # direction needs its quadratures here: ~1 s per full accounting, ~15 s in all)
        pytest.param(poisson_run(batch_size=59_999, steps=10), 2.0, 1e-5, marks=pytest.mark.slow),
        # a tiny delta (~15 s in all)
        pytest.param(poisson_run(steps=300), 2.0, 1e-12, marks=pytest.mark.slow),
        # a very long run (closed form: cheap at T = 1e7)
        (
            Run(algorithm="gd", n=10_000, steps=10_000_000, lr=0.1, noise_std=1.0, sensitivity=1.0),
            3.0,
            1e-10,
        ),
    ],
)
def test_fast_calibration_at_the_extremes(
    run: Run, target: float, delta: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 11: the fast path agrees with the slow path to the stated tolerance (both are good
    ends of brackets of relative width <= rtol around the same root) and never overshoots."""
    fast = calibrate_noise(run, epsilon=target, delta=delta)
    _slow_path(monkeypatch)
    slow = calibrate_noise(run, epsilon=target, delta=delta)
    for cal in (fast, slow):
        assert cal.report.best is not None and cal.report.best.epsilon <= target
        again = account(run.replace(noise_std=cal.noise_std), delta=delta).best
        assert again is not None and again.epsilon == cal.report.best.epsilon
    assert abs(math.log(fast.noise_std / slow.noise_std)) <= 2 * math.log1p(RTOL)


def test_focused_search_checks_the_bad_end_with_every_rival(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bracket is closed with the best bound alone; then the good end gets a full accounting
    (the report) and the bad end is checked with every bound that came within the rival factor of
    the target at the good end (never a bracket that only one bound vouches for)."""
    run = poisson_run(steps=200)
    real = accountant_module._best_epsilon
    calls: list[tuple[str, ...] | None] = []

    def spy(r: Run, delta: float, bounds: object) -> object:
        if not locating():  # full accountings only (all bounds, or the focused one)
            calls.append(None if bounds is None else tuple(bounds))  # type: ignore[arg-type]
        return real(r, delta, bounds)  # type: ignore[arg-type]

    monkeypatch.setattr(accountant_module, "_best_epsilon", spy)
    cal = calibrate_noise(run, epsilon=0.5, delta=DELTA)
    assert any(c is not None and len(c) == 1 for c in calls)  # the focused phase ran
    assert None in calls  # the good end: every bound
    rivals = accountant_module._rivals(cal.report, 0.5)
    assert {"gdp-composition", "pld-composition"} <= rivals  # equal values here: both rivals
    checked = {b for c in calls[calls.index(None) :] if c is not None for b in c}
    assert rivals <= checked | {cal.report.best.bound}  # type: ignore[union-attr]
    monkeypatch.setattr(accountant_module, "_best_epsilon", real)
    _assert_noise_answer(run, cal, 0.5)


def test_a_rival_that_meets_the_target_at_the_bad_end_hands_over_to_the_full_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """If a rival bound meets the target at the bad end, the focused bracket is not trusted: the
    full search restarts there and still returns a tight, never-overshooting answer."""
    run = poisson_run(steps=200)
    seen: list[object] = []
    real_focused = accountant_module._focused_noise_bracket

    def focused(*args: object, **kwargs: object) -> object:
        out = real_focused(*args, **kwargs)  # type: ignore[arg-type]
        seen.append(out)
        return out

    # every bound is a rival of every other at the bad end: the check runs with all of them
    monkeypatch.setattr(accountant_module, "_RIVAL_FACTOR", math.inf)
    monkeypatch.setattr(accountant_module, "_focused_noise_bracket", focused)
    cal = calibrate_noise(run, epsilon=0.5, delta=DELTA)
    assert seen and seen[0][0] is not None  # type: ignore[index]  # the rivals stay above here
    _assert_noise_answer(run, cal, 0.5)


def test_rivals_are_the_bounds_within_the_factor_of_the_target() -> None:
    run = uniform_diameter_run()
    rep = account(run, delta=DELTA)
    eps = {r.bound: r.epsilon for r in rep.results if r.kind == "bound"}
    target = min(eps.values()) * 1.01
    got = accountant_module._rivals(rep, target)
    assert got == {b for b, e in eps.items() if e <= accountant_module._RIVAL_FACTOR * target}
    assert rep.best is not None and rep.best.bound in got
    estimate_only = {r.bound for r in rep.results if r.kind == "estimate"} - set(eps)
    assert estimate_only and not (estimate_only & got)  # an estimate is never a rival


@pytest.mark.parametrize("slope_factor", [0.5, 0.9, 1.0, 1.5, 4.0])
def test_integer_bracket_near_keeps_both_full_evaluations(slope_factor: float) -> None:
    """The located number of epochs and the prediction from it are both full evaluations: when
    they fall on opposite sides they ARE the bracket (issue 11: the old search dropped the first
    and stepped back 1, 2, 4, ... epochs from the second: ten full accountings at T = 1e7)."""
    calls: list[float] = []

    def full(e: float) -> float:
        calls.append(e)
        return 0.5 * math.log(e / 24139.6)

    true_slope = 0.5 / 24139.6
    b = accountant_module._integer_bracket_near(full, (20966, true_slope * slope_factor), 1e9)
    assert b is not None and full(b.good) <= 0 < full(b.bad)
    assert b.good <= 24139 < b.bad
    assert len(calls) - 2 <= (2 if slope_factor <= 1.0 else 5)  # the two checks above: 2 calls


def test_a_wrongly_named_bound_hands_over_to_the_one_best_at_the_good_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The locating estimates may name the wrong best bound (the coarse Poisson composition is
    12-27% high): the focused search then runs once more with the bound that a full accounting
    finds best at the good end, and the answer is the same tight, never-overshooting one."""
    run = poisson_run(steps=200)
    real_call = accountant_module._Estimates.__call__

    def misnaming(self: accountant_module._Estimates, x: float) -> float:
        out = real_call(self, x)
        self.best_at[x] = "rdp-composition"  # the full accountings find the PLD tighter
        return out

    real = accountant_module._best_epsilon
    calls: list[tuple[str, ...] | None] = []

    def spy(r: Run, delta: float, bounds: object) -> object:
        if not locating():
            calls.append(None if bounds is None else tuple(bounds))  # type: ignore[arg-type]
        return real(r, delta, bounds)  # type: ignore[arg-type]

    monkeypatch.setattr(accountant_module._Estimates, "__call__", misnaming)
    monkeypatch.setattr(accountant_module, "_best_epsilon", spy)
    cal = calibrate_noise(run, epsilon=0.5, delta=DELTA)
    assert cal.report.best is not None and cal.report.best.bound != "rdp-composition"
    first_rdp = calls.index(("rdp-composition",))
    later = calls[first_rdp:]
    assert (cal.report.best.bound,) in later  # the refocused phase ran with the right bound
    monkeypatch.setattr(accountant_module, "_best_epsilon", real)
    _assert_noise_answer(run, cal, 0.5)
    unforced = calibrate_noise(poisson_run(steps=200), epsilon=0.5, delta=DELTA)
    assert abs(math.log(cal.noise_std / unforced.noise_std)) <= 2 * math.log1p(RTOL)


def _epoch_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...] | None]:
    real = accountant_module._best_epsilon
    calls: list[tuple[str, ...] | None] = []

    def spy(r: Run, delta: float, bounds: object) -> object:
        if not locating():
            calls.append(None if bounds is None else tuple(bounds))  # type: ignore[arg-type]
        return real(r, delta, bounds)  # type: ignore[arg-type]

    monkeypatch.setattr(accountant_module, "_best_epsilon", spy)
    return calls


def _assert_epoch_answer(run: Run, cal: accountant_module.Calibration, target: float) -> None:
    assert cal.epochs is not None
    e = int(cal.epochs)
    assert account(run.replace(epochs=e), delta=DELTA).best.epsilon <= target  # type: ignore[union-attr]
    assert account(run.replace(epochs=e + 1), delta=DELTA).best.epsilon > target  # type: ignore[union-attr]


def test_focused_epoch_search_uses_the_named_bound_and_two_checked_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """issue 11: the epochs are bracketed with the bound the estimates name (cheap), then the
    good end gets one full accounting and the bad end the rivals only."""
    run = poisson_run(steps=1000)
    calls = _epoch_calls(monkeypatch)
    cal = calibrate_epochs(run, epsilon=2.0, delta=DELTA)
    singles = [c for c in calls if c is not None and len(c) == 1]
    assert singles  # the focused phase ran
    assert calls.count(None) <= 2  # one epoch (the start) and the good end
    monkeypatch.undo()
    _assert_epoch_answer(run, cal, 2.0)


def test_a_wrongly_named_bound_hands_the_epoch_search_to_the_right_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = poisson_run(steps=1000)
    real_call = accountant_module._Estimates.__call__

    def misnaming(self: accountant_module._Estimates, x: float) -> float:
        out = real_call(self, x)
        self.best_at[x] = "rdp-composition"  # the full accountings find the PLD tighter
        return out

    monkeypatch.setattr(accountant_module._Estimates, "__call__", misnaming)
    calls = _epoch_calls(monkeypatch)
    cal = calibrate_epochs(run, epsilon=2.0, delta=DELTA)
    assert cal.report.best is not None and cal.report.best.bound != "rdp-composition"
    after = calls[calls.index(("rdp-composition",)) :]
    assert (cal.report.best.bound,) in after  # the refocused phase ran with the right bound
    monkeypatch.undo()
    _assert_epoch_answer(run, cal, 2.0)
    assert cal.epochs == calibrate_epochs(run, epsilon=2.0, delta=DELTA).epochs


def _halving(
    estimate: object, lo: int, g_lo: float, hi: int, g_hi: float
) -> tuple[int, float, int, float]:
    """The former locator: halve down from the bad first guess to a good number of epochs."""
    assert callable(estimate)
    lo = max(1, hi // 2)
    while lo > 1:
        g = estimate(lo)
        if g <= 0:
            return lo, g, hi, g_hi
        hi, g_hi, lo = lo, g, max(1, lo // 2)
    return 1, g_lo, hi, g_hi


@pytest.mark.parametrize(
    "run",
    [
        # epsilon ~ linear in the steps (sensitivity only: revealed sampling): the square-law
        # first guess is 30x too long, the log-regula-falsi bracket closes it in 3 estimates
        poisson_run(
            adjacency="replace",
            clip=None,
            sensitivity=2.0,
            noise_multiplier=None,
            noise_std=0.02,
            steps=10**5,
        ),
        poisson_run(steps=10**5),
    ],
)
def test_log_bracket_locator_keeps_the_epoch_answer(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """calibrate_epochs with the log-regula-falsi locator returns the halving locator's answer
    (the largest good number of epochs is decided by full accountings) in fewer estimates."""
    target = 0.7 * account(run, delta=DELTA).best.epsilon  # type: ignore[union-attr]
    calls: list[int] = []
    real = accountant_module._Estimates.__call__

    def counting(self: object, x: float) -> float:
        calls.append(int(x))
        return real(self, x)  # type: ignore[arg-type]

    monkeypatch.setattr(accountant_module._Estimates, "__call__", counting)
    fast = calibrate_epochs(run, epsilon=target, delta=DELTA, max_epochs=1e9)
    n_fast = len(calls)
    calls.clear()
    monkeypatch.setattr(accountant_module, "_log_bracket", _halving)
    slow = calibrate_epochs(run, epsilon=target, delta=DELTA, max_epochs=1e9)
    assert fast.epochs == slow.epochs
    assert fast.report.best.epsilon == slow.report.best.epsilon  # type: ignore[union-attr]
    assert fast.report.best.epsilon <= target  # type: ignore[union-attr]
    assert n_fast < len(calls), (n_fast, len(calls))
