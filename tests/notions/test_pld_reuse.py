"""Work the PLD kernels remember or skip (issue 11, sweeps) gives bit-identical values.

* ``_epsilon_for_delta`` reads only the top of a PMF (``_epsilon_for_delta_top``); the full
  computation (``_epsilon_for_delta_full``) is the reference, compared bit for bit on composed
  PMFs of both shapes (a long composition, a short one with little mass) and many deltas;
* the exact log-CGFs of a Chernoff window are remembered on the one-step PMF: windows computed in
  any order of k are those of a fresh PMF.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from lastiterate.notions import pld
from lastiterate.notions.pld import kernels


def _composed(p: float, mu: float, k: int) -> pld.Pld:
    one = pld.symmetric_subsampled_gaussian_pld(p, mu, discretization=1e-4, with_lower=True)
    return one.self_compose(k)


CASES = [(0.025, 0.2, 40), (0.025, 1.3, 40), (0.025, 0.6, 600), (0.1, 2.0, 5), (0.5, 0.5, 3)]


@pytest.mark.parametrize(("p", "mu", "k"), CASES)
def test_top_of_pmf_gives_the_full_epsilon_bit_for_bit(p: float, mu: float, k: int) -> None:
    composed = _composed(p, mu, k)
    deltas = np.geomspace(1e-14, 0.5, 23)
    compared = 0
    for pmf in (composed._remove, composed._low_remove):
        assert pmf is not None
        for delta in deltas:
            if pmf.infinity_mass > delta:
                continue
            full = kernels._epsilon_for_delta_full(pmf, 1e-4, float(delta))
            got = kernels._epsilon_for_delta(pmf, 1e-4, float(delta))
            assert got == full, (p, mu, k, delta)
            top = kernels._epsilon_for_delta_top(pmf, 1e-4, float(delta))
            compared += top is not None
    assert compared > 20  # the top-only path is the one taken (else this tests nothing new)


def test_top_of_pmf_grows_past_its_first_suffix() -> None:
    """A delta whose crossing lies below the first suffix read (the suffix must grow)."""
    pmf = _composed(0.025, 0.6, 600)._remove
    n = len(pmf.probs)
    first = max(kernels._TOP_START, int(kernels._TOP_FRACTION * n))
    assert n > first
    delta = 0.3
    full = kernels._epsilon_for_delta_full(pmf, 1e-4, delta)
    assert kernels._epsilon_for_delta_top(pmf, 1e-4, delta) == full
    j = round(full / 1e-4) - pmf.lower
    assert n - j > first


def test_remembered_cgfs_give_a_fresh_pmfs_windows() -> None:
    ks = [40, 2000, 80, 400, 41, 1200]
    shared = pld.symmetric_subsampled_gaussian_pld(0.025, 1.0, discretization=1e-4)._remove
    for k in ks:
        fresh = pld.symmetric_subsampled_gaussian_pld(0.025, 1.0, discretization=1e-4)._remove
        assert "exact_cgf" not in fresh._cache
        assert kernels._chernoff_window(shared, k, 1e-15) == kernels._chernoff_window(
            fresh, k, 1e-15
        )
    assert len(shared._cache["exact_cgf"]) < 6 * len(ks)  # some lambdas were reused


# ---------------------------------------------------------------------- FFT-length ladder
def _is_fast(n: int) -> bool:
    for f in (2, 3, 5):
        while n % f == 0:
            n //= f
    return n == 1


@pytest.mark.parametrize("needed", [1, 2, 7, 100, 1000, 4097, 185_783, 216_001, 559_873, 2**20])
def test_fft_length_is_a_fast_rung_at_most_9_percent_above(needed: int) -> None:
    from scipy import fft as sp_fft

    got = kernels._fft_length(needed)
    assert got >= needed and _is_fast(got)
    # a rung is next_fast_len of ceil(2^(i/8)): at most 2^(1/8) above, then the fast rounding
    assert got <= sp_fft.next_fast_len(int(np.ceil(needed * 2 ** (1 / 8))), real=True)


def test_fft_length_is_one_rung_for_a_range_of_needs() -> None:
    """The length depends only on the need, in steps: many needs share one rung (what lets the
    compositions of one PMF for nearby k share a transform), and it never decreases."""
    needs = np.arange(200_000, 260_000, 7)
    got = [kernels._fft_length(int(n)) for n in needs]
    assert all(b >= a for a, b in itertools.pairwise(got))
    assert len(set(got)) <= 4  # 2^(3/8) = 1.30 > 260/200: at most 4 rungs


def test_fft_length_never_exceeds_a_budget_the_fast_length_fits() -> None:
    from scipy import fft as sp_fft

    needed = 1_000_001
    rung = kernels._fft_length(needed)
    fast = sp_fft.next_fast_len(needed, real=True)
    assert rung > fast
    with pld.grid_budget(fast):
        assert kernels._fft_length(needed) == fast
    with pld.grid_budget(rung):
        assert kernels._fft_length(needed) == rung


# ---------------------------------------------------------------------- remembered spectra
def _pmfs(composed: pld.Pld) -> list[kernels._Pmf]:
    return [p for p in (composed._remove, composed._add, composed._low_remove) if p is not None]


@pytest.mark.parametrize(
    "make",
    [
        lambda: pld.symmetric_subsampled_gaussian_pld(0.025, 0.8, with_lower=True),
        lambda: pld.poisson_subsampled_gaussian_pld(0.01, 1.1, with_lower=True),
    ],
)
def test_remembered_spectrum_gives_a_fresh_pmfs_compositions_bit_for_bit(make: Any) -> None:
    """k-fold compositions of one shared one-step PLD, in any order of k (the spectrum of the
    latest FFT length remembered on it), equal those of a fresh PLD for every k, bin for bin."""
    shared = make()
    ks = [40, 41, 44, 400, 80, 401, 2000, 42]
    hits = 0
    for k in ks:
        before = shared._remove._cache.get("spectrum")
        got = shared.self_compose(k)
        hits += before is not None and shared._remove._cache.get("spectrum") is before
        want = make().self_compose(k)
        for a, b in zip(_pmfs(got), _pmfs(want), strict=True):
            assert a.lower == b.lower and a.infinity_mass == b.infinity_mass
            assert np.array_equal(a.probs, b.probs)
        assert got.epsilon_with_error(1e-5) == want.epsilon_with_error(1e-5)
    assert hits >= 1  # nearby k need one rung: the remembered spectrum was used


def test_remembered_spectrum_is_that_of_the_factor() -> None:
    one = pld.symmetric_subsampled_gaussian_pld(0.1, 1.0, discretization=1e-3)._remove
    n1 = kernels._fft_length(len(one.probs))
    spec = kernels._untilted_spectrum(one.probs, n1, one._cache)
    assert one._cache["spectrum"] is spec
    x = one.probs / one.probs.sum()
    padded = np.zeros(n1)
    padded[: len(x)] = x
    np.testing.assert_allclose(spec.z, np.fft.rfft(padded), rtol=0, atol=1e-15)
    np.testing.assert_array_equal(spec.mod, np.abs(spec.z))
    assert kernels._untilted_spectrum(one.probs, n1, one._cache) is spec
    n2 = kernels._fft_length(n1 + 1)
    other = kernels._untilted_spectrum(one.probs, n2, one._cache)
    assert other is not spec and one._cache["spectrum"] is other  # one length at a time


# ---------------------------------------------------------------------- one-pass coverage test
def _uncovered_elementwise(
    value: np.ndarray, mode: int, err: float, rho: float, tail_floor: float
) -> bool:
    """The element-wise form of the coverage test (the multi-pass code path's expression)."""
    tail = err * np.arange(len(value) - mode - 1, 0, -1, dtype=float)
    return bool(np.any((err > rho * np.maximum(value[mode + 1 :], 0.0)) & (tail > tail_floor)))


def test_one_pass_coverage_test_equals_the_elementwise_one() -> None:
    rng = np.random.default_rng(11)
    checked = {True: 0, False: 0}
    for _ in range(3000):
        n = int(rng.integers(1, 60))
        value = np.exp(-rng.uniform(0, 40, n)) * rng.choice([1.0, 1.0, 1.0, -1.0, 0.0], n)
        mode = int(rng.integers(0, n))
        err = float(rng.choice([0.0, 1e-300, 10.0 ** rng.uniform(-20, -1), 1e308]))
        rho = float(10.0 ** rng.uniform(-9, 0))
        tail_floor = float(rng.choice([1e-20, 1e-8, 10.0 ** rng.uniform(-25, 0)]))
        with np.errstate(over="ignore"):
            want = _uncovered_elementwise(value, mode, err, rho, tail_floor)
            got = kernels._uncovered_above_mode(value, mode, err, rho, tail_floor)
        assert got == want, (value, mode, err, rho, tail_floor)
        checked[want] += 1
    assert min(checked.values()) > 300  # both answers are exercised
    # the boundary of the tail condition: one bin whose tail is exactly at the floor
    value = np.array([1.0, 0.0, 0.0, 0.0])
    for floor in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0):
        assert kernels._uncovered_above_mode(value, 0, 1.0, 1e-7, floor) == (
            _uncovered_elementwise(value, 0, 1.0, 1e-7, floor)
        )


# ---------------------------------------------------------------------- where the sums start
@pytest.mark.parametrize(("p", "mu", "k"), CASES[:3])
def test_crossing_floor_is_below_the_crossing_and_above_the_suffix(
    p: float, mu: float, k: int
) -> None:
    """The floor (from the tail sums alone) never passes the grid point where the profile first
    reaches delta (the exact profile at every grid point, summed here directly), and it skips a
    part of the first suffix (else it saves nothing)."""
    composed = _composed(p, mu, k)
    raised = 0
    for pmf in (composed._remove, composed._low_remove):
        assert pmf is not None
        probs, n = pmf.probs, len(pmf.probs)
        s = n - max(kernels._TOP_START, int(kernels._TOP_FRACTION * n))
        rising = np.cumsum(probs[s:][::-1]) + pmf.infinity_mass
        losses = (pmf.lower + np.arange(n)) * 1e-4
        for delta in (1e-3, 1e-5, 1e-8):
            floor = s + kernels._crossing_floor(rising, delta, 1e-4)
            # profile at the grid points of the suffix below the floor: all above delta
            for j in np.linspace(s, floor - 1, 25).astype(int) if floor > s else []:
                above = losses > losses[j]
                profile = pmf.infinity_mass + np.sum(
                    probs[above] * -np.expm1(losses[j] - losses[above])
                )
                assert profile > delta, (p, mu, k, delta, j, floor)
            raised += floor > s + 0.05 * n
    assert raised >= 2  # at delta = 1e-5 and 1e-8, where a DP-SGD epsilon is read


def test_a_floor_above_the_crossing_falls_back_to_the_whole_suffix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pmf = _composed(0.025, 0.6, 600)._remove
    want = kernels._epsilon_for_delta_full(pmf, 1e-4, 1e-5)
    monkeypatch.setattr(kernels, "_crossing_floor", lambda rising, delta, d: len(rising) - 3)
    assert kernels._epsilon_for_delta_top(pmf, 1e-4, 1e-5) == want


# ---------------------------------------------------------------------- powers in place
def _power_by_new_arrays(z: np.ndarray, k: int) -> np.ndarray:
    """Repeated squaring with a new array at every step (the form before the in-place one)."""
    result: np.ndarray | None = None
    base = z
    while k:
        if k & 1:
            result = base.copy() if result is None else result * base
        k >>= 1
        if k:
            base = base * base
    return np.ones_like(z) if result is None else result


@pytest.mark.parametrize("k", [0, 1, 2, 3, 40, 41, 1200, 2000, 2047])
def test_in_place_power_equals_the_plain_one_and_leaves_z(k: int) -> None:
    rng = np.random.default_rng(k)
    z = np.exp(2j * np.pi * rng.random(1000)) * rng.uniform(0.99, 1.0, 1000)
    before = z.copy()
    got = kernels._int_power(z, k)
    assert np.array_equal(got, _power_by_new_arrays(z, k))
    np.testing.assert_allclose(got, z**k, rtol=1e-10, atol=1e-300)
    assert np.array_equal(z, before) and got is not z


def test_live_frequencies_and_their_logs_equal_the_whole_arrays_in_any_order() -> None:
    """The remembered live set (filtered when the threshold grows) is the scan's, whatever the
    order of the thresholds; logs taken at the live indices equal the whole arrays' there."""
    one = pld.symmetric_subsampled_gaussian_pld(0.025, 1.0, discretization=1e-3)._remove
    n_fft = kernels._fft_length(4 * len(one.probs))
    sp = kernels._untilted_spectrum(one.probs, n_fft, None)
    ref = kernels._untilted_spectrum(one.probs, n_fft, None)
    kinds = set()
    for k in [40, 80, 2000, 400, 401, 41, 10**6, 3]:
        thr = float(np.exp(-700.0 / k))
        got = sp.live(thr)
        mask = ref.mod_a > thr
        kinds.add(bool(mask.all()))
        if mask.all():
            assert got is None
            continue
        assert got is not None and np.array_equal(got, np.flatnonzero(mask))
        assert np.array_equal(sp.log_mod_a_at(got), np.log(ref.mod_a)[got])
        with np.errstate(divide="ignore"):
            assert np.array_equal(sp.log_mod_at(got), np.log(ref.mod)[got])
    assert kinds == {True, False}  # both every frequency live and a few of them
    assert sp._log_mod_a is None  # never needed whole: only the live entries were taken
    assert np.array_equal(sp.log_mod_a_at(slice(None)), np.log(ref.mod_a))
