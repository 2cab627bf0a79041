"""Placement of the tilted FFT passes (issue 11).  With the grid width known (``Pld.self_compose``)
a bin is settled when its error tail is under 1e-3 of a certified lower bound on the profile there
(the accuracy the delta of interest gets, relative to delta), and the next tilt is aimed above the
lowest unsettled bin instead of walking a fixed ladder.  Which passes run only steers tightness
(every error bound is added to the pessimistic PMF), so the checks are: the lower bound on the
profile is one, the aimed passes give the ladder's values, and they need fewer passes where the
composition is Gaussian-like."""

from __future__ import annotations

import numpy as np
import pytest

from lastiterate.notions import pld
from lastiterate.notions.pld import kernels


def test_profile_floor_is_below_the_profile_of_each_bin() -> None:
    rng = np.random.default_rng(3)
    d = 1e-3
    probs = rng.gamma(2.0, size=4000) * np.exp(-np.linspace(0.0, 30.0, 4000))
    probs /= probs.sum()
    bound = 1e-9
    relative = 1e-12
    floor = kernels._profile_floor(probs, bound, relative, d)
    pmf = kernels._Pmf(0, probs, 0.0)
    exact = np.array([kernels._delta_for_epsilon(pmf, d, t * d) for t in range(0, 4000, 37)])
    assert np.all(floor[::37] <= exact * (1 + 1e-12))
    assert np.max(floor[::37] / np.maximum(exact, 1e-300)) > 0.05  # and not vacuous


def _passes(monkeypatch: pytest.MonkeyPatch, aimed: bool) -> list[float]:
    lams: list[float] = []
    real_pass = kernels._tilted_pass
    real_spectral = kernels._compose_spectral

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        lams.append(args[2])
        return real_pass(*args, **kwargs)

    def spectral(*args, **kwargs):  # type: ignore[no-untyped-def]
        if not aimed:
            kwargs["loss_step"] = None  # the fixed ladder
        return real_spectral(*args, **kwargs)

    monkeypatch.setattr(kernels, "_tilted_pass", counting)
    monkeypatch.setattr(kernels, "_compose_spectral", spectral)
    return lams


@pytest.mark.parametrize(
    ("q", "z", "steps", "delta"),
    [
        (256 / 60000, 5.12, 10**6, 1e-12),  # Gaussian-like: one aimed pass settles the tail
        (1e-3, 0.8, 1000, 1e-10),  # skewed (few sampled steps): the ladder takes over
        (0.5, 2.0, 1000, 1e-12),
    ],
)
def test_aimed_tilts_give_the_ladders_values(
    monkeypatch: pytest.MonkeyPatch, q: float, z: float, steps: int, delta: float
) -> None:
    got = {}
    counts = {}
    for aimed in (False, True):
        with monkeypatch.context() as m:
            lams = _passes(m, aimed)
            one = pld.poisson_subsampled_gaussian_pld(q, z, discretization=1e-4, with_lower=True)
            with pld.delta_of_interest(delta):
                got[aimed] = one.self_compose(steps).epsilon_with_error(delta)
            counts[aimed] = len(lams)
    ladder, aimed_est = got[False], got[True]
    assert aimed_est.upper == pytest.approx(ladder.upper, rel=1e-5)
    assert aimed_est.lower == pytest.approx(ladder.lower, rel=1e-5)
    assert counts[True] <= counts[False]
    if q < 0.01:
        assert aimed_est.upper >= ladder.lower  # (both are certified brackets of one value)


def test_gaussian_like_composition_needs_fewer_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = {}
    for aimed in (False, True):
        with monkeypatch.context() as m:
            lams = _passes(m, aimed)
            one = pld.poisson_subsampled_gaussian_pld(256 / 60000, 5.12, discretization=2e-4)
            with pld.delta_of_interest(1e-12):
                one.self_compose(10**6)
            counts[aimed] = len(lams)
    assert counts[True] < counts[False]
