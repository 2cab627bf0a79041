"""The samplers have exactly the accountant's semantics (lastiterate.run.Run)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from lastiterate.run import Run
from lastiterate.train.sampling import Sampler, balanced_partition, make_sampler


def _run(s: Sampler, steps: int) -> Run:
    return Run(**s.run_kwargs(), n=s.n, lr=0.1, steps=steps, noise_std=1.0, clip=1.0)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 500),
    b=st.integers(1, 500),
    scheme=st.sampled_from(["cyclic", "shuffle", "uniform", "poisson"]),
)
def test_partition_and_constants_match_run(n, b, scheme):
    b = min(b, n)
    s = make_sampler(
        "cgd" if scheme == "cyclic" else "sgd", n, b, None if scheme == "cyclic" else scheme, seed=1
    )
    run = _run(s, 3)
    assert s.l == run.l
    assert s.b_min == run.b_min
    assert s.rate == run.p
    if scheme == "cyclic":
        part = s.partition
        assert len(part) == math.ceil(n / b) == run.l
        sizes = [len(p) for p in part]
        assert min(sizes) == run.b_min and max(sizes) <= run.b_min + 1
        assert sorted(np.concatenate(part).tolist()) == list(range(n))
        # identical to numpy.array_split of the fixed order
        ref = np.array_split(np.concatenate(part), run.l)
        assert all(np.array_equal(a, r) for a, r in zip(part, ref))


@pytest.mark.parametrize("n,b", [(1437, 256), (100, 10), (101, 10), (7, 3)])
def test_cyclic_order_repeats_every_epoch(n, b):
    s = make_sampler("cgd", n, b, seed=5)
    l = int(s.l)
    first = [s.batch(t) for t in range(l)]
    assert sorted(np.concatenate(first).tolist()) == list(range(n))
    for epoch in range(1, 4):
        for k in range(l):
            assert np.array_equal(s.batch(epoch * l + k), first[k])
    assert all(s.normaliser(bt) == len(bt) >= s.b_min for bt in first)


def test_cyclic_identity_partition():
    s = make_sampler("cgd", 10, 4, permute=False)
    assert [p.tolist() for p in s.partition] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert [p.tolist() for p in balanced_partition(np.arange(10), 3)] == [
        [0, 1, 2, 3],
        [4, 5, 6],
        [7, 8, 9],
    ]


def test_shuffle_is_a_fresh_partition_each_epoch():
    n, b = 103, 10
    s = make_sampler("sgd", n, b, "shuffle", seed=2)
    l = int(s.l)
    epochs = []
    for e in range(3):
        batches = [s.batch(e * l + k) for k in range(l)]
        assert sorted(np.concatenate(batches).tolist()) == list(range(n))
        assert min(len(x) for x in batches) == s.b_min == n // l
        epochs.append(np.concatenate(batches))
    assert not np.array_equal(epochs[0], epochs[1])


def test_uniform_fixed_size_distinct_and_uniform():
    n, b, T = 50, 7, 4000
    s = make_sampler("sgd", n, b, "uniform", seed=3)
    counts = np.zeros(n)
    for t in range(T):
        bt = s.batch(t)
        assert len(bt) == b == s.normaliser(bt)
        assert len(np.unique(bt)) == b
        counts[bt] += 1
    # each example is included with probability b/n at every step: binomial(T, b/n) counts
    lo, hi = binom.ppf([1e-4 / n, 1 - 1e-4 / n], T, b / n)
    assert counts.min() >= lo and counts.max() <= hi


def test_poisson_inclusion_rate_and_fixed_normaliser():
    n, b, T = 200, 20, 3000
    s = make_sampler("sgd", n, b, "poisson", seed=4)
    counts = np.zeros(n)
    sizes = []
    for t in range(T):
        bt = s.batch(t)
        assert s.normaliser(bt) == b  # the FIXED expected size, never the realised one
        sizes.append(len(bt))
        counts[bt] += 1
    p = b / n
    # total inclusions ~ Binomial(n T, p): 99.99% interval
    lo, hi = binom.ppf([5e-5, 1 - 5e-5], n * T, p)
    assert lo <= counts.sum() <= hi
    # per example (Bonferroni over n)
    lo1, hi1 = binom.ppf([1e-4 / n, 1 - 1e-4 / n], T, p)
    assert counts.min() >= lo1 and counts.max() <= hi1
    # batch sizes vary (not a fixed-size sampler) and average b
    assert len(set(sizes)) > 5
    assert abs(np.mean(sizes) - b) < 4 * math.sqrt(b * (1 - p) / T) + 1e-9


def test_batches_are_pure_functions_of_seed_and_step():
    for scheme in ("uniform", "poisson", "shuffle"):
        a = make_sampler("sgd", 60, 8, scheme, seed=9)
        b = make_sampler("sgd", 60, 8, scheme, seed=9)
        order = [5, 0, 17, 3, 5]
        assert all(np.array_equal(a.batch(t), b.batch(t)) for t in order)
        c = make_sampler("sgd", 60, 8, scheme, seed=10)
        assert not all(np.array_equal(a.batch(t), c.batch(t)) for t in range(5))


@pytest.mark.parametrize("scheme", ["cyclic", "shuffle", "uniform", "poisson", "full"])
@pytest.mark.parametrize("epochs", [1, 3, 7])
def test_steps_for_epochs_match_run(scheme, epochs):
    n, b = 103, 10
    if scheme == "full":
        s = make_sampler("gd", n)
    else:
        s = make_sampler(
            "cgd" if scheme == "cyclic" else "sgd", n, b, None if scheme == "cyclic" else scheme
        )
    run = Run(**s.run_kwargs(), n=n, lr=0.1, epochs=epochs, noise_std=1.0, clip=1.0)
    assert s.steps_for_epochs(epochs) == run.T
    ends = s.epoch_ends(run.T)
    assert ends[-1] == run.T and len(ends) == epochs


def test_full_batch():
    s = make_sampler("gd", 9)
    assert s.batch(4).tolist() == list(range(9)) and s.normaliser(s.batch(0)) == 9
    assert s.run_kwargs() == {"algorithm": "gd"}
