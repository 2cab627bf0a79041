"""Work the PLD kernels remember or skip (issue 11, sweeps) gives bit-identical values.

* ``_epsilon_for_delta`` reads only the top of a PMF (``_epsilon_for_delta_top``); the full
  computation (``_epsilon_for_delta_full``) is the reference, compared bit for bit on composed
  PMFs of both shapes (a long composition, a short one with little mass) and many deltas;
* the exact log-CGFs of a Chernoff window are remembered on the one-step PMF: windows computed in
  any order of k are those of a fresh PMF.
"""

from __future__ import annotations

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
