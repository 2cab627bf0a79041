"""The revealed-sampling mixture's epsilon with its comparisons read from numpy's sum (issue 11).

``RevealedSamplingComposition.epsilon`` takes the steps of ``smallest_epsilon(self.delta, ...)``
(:func:`lastiterate.notions.gdp.smallest_epsilon`) but decides the tests of its first two phases
(the value at 0, the doubling bracket) from numpy's floating sum with its error bound where that
settles them, instead of the exactly rounded ``math.fsum``.  Checked here against the reference
path, bit for bit, over short and long runs, sampling rates, noise levels and deltas (the 0 and
infinite answers included), that the shortcut's answers are those of the exact sum (an adversarial
delta on the value itself and one ulp around it), and that it saves exact sums on a long run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lastiterate.bounds import composition
from lastiterate.bounds.composition import RevealedSamplingComposition
from lastiterate.notions.gdp import smallest_epsilon

MIXTURES = [
    (1, 0.5, 1.0),
    (10, 0.1, 0.3),
    (1000, 0.004, 0.5),
    (100_000, 256 / 60000, 2.0 / (256 * 0.02)),
    (10_000_000, 256 / 60000, 2.0 / (256 * 0.02)),
    (10_000_000, 59999 / 60000, 2.0 / (59999 * 0.02)),
    (1000, 0.01, 1e-4),  # epsilon 0 for most deltas
    (100, 0.9, 400.0),  # a huge epsilon: the doubling runs to the cap
]
DELTAS = [0.5, 1e-2, 1e-5, 1e-12, 1e-100, 1e-300]


@pytest.mark.parametrize(("T", "q", "mu"), MIXTURES)
def test_epsilon_equals_the_reference_path_bit_for_bit(T: int, q: float, mu: float) -> None:
    m = RevealedSamplingComposition(T, q, mu)
    for delta in DELTAS:
        ref = smallest_epsilon(m.delta, delta, max_epsilon=1e6)
        got = m.epsilon(delta)
        assert got == ref or (math.isnan(got) and math.isnan(ref)), (T, q, mu, delta, got, ref)


@pytest.mark.parametrize(("T", "q", "mu"), MIXTURES[2:6])
def test_the_side_is_that_of_the_exact_sum(T: int, q: float, mu: float) -> None:
    m = RevealedSamplingComposition(T, q, mu)
    for eps in (0.0, 0.5, 1.0, 4.0, 64.0, 1024.0):
        exact = m.delta(eps)
        if not 0.0 < exact < 1.0:
            continue
        for delta in (
            exact,
            float(np.nextafter(exact, 0.0)),
            float(np.nextafter(exact, 1.0)),
            exact * (1 + 1e-12),
            exact * (1 - 1e-12),
            exact * 2.0,
            exact / 2.0,
        ):
            side = m._side(eps, delta)
            assert (side > delta) == (exact > delta), (eps, delta, side, exact)
            assert (side <= delta) == (exact <= delta), (eps, delta, side, exact)


def test_fewer_exact_sums_on_a_long_run(monkeypatch: pytest.MonkeyPatch) -> None:
    m = RevealedSamplingComposition(10_000_000, 256 / 60000, 2.0 / (256 * 0.02))
    calls = [0]
    real = composition.math.fsum

    def counted(xs: list[float]) -> float:
        calls[0] += 1
        return real(xs)

    monkeypatch.setattr(composition.math, "fsum", counted)
    fast = m.epsilon(1e-5)
    fast_calls = calls[0]
    calls[0] = 0
    ref = smallest_epsilon(m.delta, 1e-5, max_epsilon=1e6)
    assert fast == ref
    assert fast_calls + 10 <= calls[0]  # the doubling from 1 to ~4096 needed no exact sum


@pytest.mark.parametrize("T", [1, 7, 1000, 100_000, 10_000_000, 1_000_000_000])
@pytest.mark.parametrize("q", [0.0, 1e-6, 256 / 60000, 0.5, 59999 / 60000, 1.0])
def test_binomial_pmf_and_cdf_are_scipy_stats_bit_for_bit(T: int, q: float) -> None:
    from scipy import stats

    rng = np.random.default_rng(T % 1000 + int(q * 1e6))
    sd = math.sqrt(T * q * (1 - q))
    lo, hi = max(0, int(T * q - 40 * sd) - 5), min(T, int(T * q + 40 * sd) + 5)
    ks = np.unique(
        np.concatenate(
            [
                np.arange(lo, min(hi, lo + 2000) + 1),
                rng.integers(-5, T + 6, 100),
                [-1, 0, 1, T - 1, T, T + 1],
            ]
        )
    ).astype(np.int64)
    dist = stats.binom(T, q)
    assert np.array_equal(composition._binomial_pmf(ks, T, q), dist.pmf(ks))
    assert np.array_equal(composition._binomial_cdf(ks, T, q), dist.cdf(ks))


def test_an_account_of_the_mixture_imports_no_scipy_stats() -> None:
    """``lastiterate account`` of Poisson sampling with the sensitivity only (the mixture)
    imports ``scipy.special`` for the binomial, not ``scipy.stats`` (a second of start-up)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from lastiterate import Run, account\n"
        "run = Run(algorithm='sgd', sampling='poisson', n=60000, batch_size=256, steps=10**6,\n"
        "          lr=0.05, noise_std=0.02, sensitivity=2.0)\n"
        "rep = account(run, delta=1e-5, bounds=['gdp-composition'])\n"
        "assert rep.best is not None and 'revealed-sampling' in rep.best.theorem\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    ).stdout.split()
    assert "lastiterate.bounds.composition" in out  # the probe
    assert "scipy.special" in out  # the binomial came from SciPy's ufuncs
    assert not [m for m in out if m == "scipy.stats" or m.startswith("scipy.stats.")]
