"""The accountant chooses its grid from the accuracy needed and a bounded cost (issue 8 §4).

A window search only compares candidates, so its grid is capped (``SEARCH_GRID_POINTS``); the
accountant's own compositions are capped at ``ACCOUNTING_GRID_POINTS``.  A coarser grid is still
pessimistic: these tests check the caps are honoured, that a capped value never falls below the
fine one, and that the vectorised revealed-sampling mixture equals the term-by-term sum.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lastiterate import Run, account
from lastiterate.bounds import composition, shifted_interpolation
from lastiterate.notions import pld
from lastiterate.notions.gdp import gdp_delta
from lastiterate.notions.pld import distribution, kernels

#: issue 8: this valid 3-step run used to build 2e7-point grids (a minute) in the T -> infinity
#: window search of Thm 4.9 (contraction 1 - 2e-5, so the limit window has ~1e6 steps)
ISSUE_RUN = {
    "algorithm": "sgd",
    "n": 5,
    "batch_size": 4,
    "steps": 3,
    "lr": 0.0032525,
    "noise_std": 0.632196,
    "sensitivity": 3.25299,
    "strong_convexity": 0.00614912,
    "smoothness": 0.614912,
    "sampling": "uniform",
}


def test_issue_run_never_builds_a_grid_beyond_the_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    original = kernels._compose_spectral

    def recording(probs, powers, n_fft, *args, **kwargs):  # type: ignore[no-untyped-def]
        sizes.append(n_fft)
        return original(probs, powers, n_fft, *args, **kwargs)

    monkeypatch.setattr(kernels, "_compose_spectral", recording)
    rep = account(Run(**ISSUE_RUN), delta=1e-5, bounds=["shifted-interpolation"])
    assert sizes and max(sizes) <= distribution.ACCOUNTING_GRID_POINTS
    best = rep.best
    assert best is not None and math.isfinite(best.epsilon)
    # the reported value is the fine-grid composition or window; the limit bounds it from above
    assert best.details["epsilon_limit"] >= best.epsilon
    comp = account(Run(**ISSUE_RUN), delta=1e-5, bounds=["pld-composition"]).best
    assert comp is not None and best.epsilon <= comp.epsilon * (1 + 1e-9)


def test_grid_budget_is_scoped_and_a_capped_grid_stays_pessimistic() -> None:
    full = pld.max_grid_points()
    one = pld.symmetric_subsampled_gaussian_pld(0.3, 1.0)
    fine = one.self_compose(400)
    with pld.grid_budget(4096):
        assert pld.max_grid_points() == 4096
        coarse = pld.on_feasible_grid(
            lambda d: pld.symmetric_subsampled_gaussian_pld(0.3, 1.0, discretization=d)
            .self_compose(400)
        )
    assert pld.max_grid_points() == full
    assert coarse.discretization > fine.discretization
    for delta in (1e-3, 1e-6, 1e-10):
        assert coarse.epsilon(delta) >= fine.epsilon(delta) * (1 - 1e-12)


def test_search_budget_returns_inf_rather_than_refusing() -> None:
    from lastiterate.bounds.base import Query

    q = Query(delta=1e-5)
    v = shifted_interpolation.subsampled_gaussian_composition_value(
        0.8, 2.64, 977_408, 0.0, q, discretization=3e-3, max_points=1024
    )
    assert v == math.inf or v > 1e5


@pytest.mark.parametrize("T,q,mu", [(50, 0.3, 0.8), (2000, 0.01, 2.0), (7, 0.9, 0.05)])
def test_revealed_sampling_mixture_equals_the_term_by_term_sum(T: int, q: float, mu: float) -> None:
    from scipy import stats

    mix = composition.RevealedSamplingComposition(T, q, mu)
    k = np.arange(T + 1)
    w = stats.binom.pmf(k, T, q)
    for eps in (0.0, 0.1, 1.0, 5.0):
        terms = [wi * float(gdp_delta(eps, mu * math.sqrt(ki))) for ki, wi in zip(k, w) if ki]
        reference = math.fsum(terms)
        got = mix.delta(eps)
        assert got >= reference * (1 - 1e-12)
        assert got <= reference * (1 + 1e-9) + 1e-300 + mix._dropped


def test_delta_of_interest_saves_passes_and_stays_an_upper_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[float] = []
    original = kernels._tilted_pass

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1.0)
        return original(*args, **kwargs)

    monkeypatch.setattr(kernels, "_tilted_pass", counting)

    def compose() -> pld.Pld:
        one = pld.poisson_subsampled_gaussian_pld(0.01, 0.8, with_lower=True)
        return one.self_compose(1000)

    full = compose()
    full_passes = len(calls)
    calls.clear()
    default_floor = pld.tilt_delta_floor()
    with pld.delta_of_interest(1e-5):
        assert pld.tilt_delta_floor() == pytest.approx(1e-8)
        fast = compose()
    assert pld.tilt_delta_floor() == default_floor
    assert len(calls) < full_passes
    # at and above the delta of interest the value is as tight as the fully tilted one; far below
    # it only looser (6e-5 relative at delta 1e-7), never below it
    for delta, rel in ((1e-3, 1e-5), (1e-5, 1e-5), (1e-7, 1e-3)):
        exact_side = full.epsilon_with_error(delta)
        quick = fast.epsilon_with_error(delta)
        assert quick.upper >= exact_side.lower
        assert quick.upper >= exact_side.upper * (1 - 1e-12)
        assert quick.upper <= exact_side.upper * (1 + rel)
