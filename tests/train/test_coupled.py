"""Coupled-randomness test (auditing-notes.md section 4 item 7).

Train on D and on D' (one example replaced) with the SAME batches and noise.  The noise cancels, so
at every step  ||x_t - x'_t|| <= c ||x_{t-1} - x'_{t-1}|| + eta L / b_t  when the batch holds the
differing example (b_t its normaliser, >= b_min) and  <= c ||x_{t-1} - x'_{t-1}||  otherwise, with c
and L from the certificate.  The pre-noise batch-gradient difference at a common
point is <= L / b_t.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lastiterate.train.models import GLM, flat_parameters
from lastiterate.train.trainer import NoisyCGD, NoisyGD, NoisySGD, clip_rows


def _pair(family, n, d, K, R, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = clip_rows(torch.randn(n, d, generator=g, dtype=torch.float64) * 2, R)
    if family == "multinomial-logistic":
        y = torch.randint(0, K, (n,), generator=g)
    elif family == "binary-logistic":
        y = torch.randint(0, 2, (n,), generator=g)
    else:
        y = torch.randn(n, generator=g, dtype=torch.float64) * 3
    i = 7
    X2, y2 = X.clone(), y.clone()
    X2[i] = torch.zeros(d, dtype=X.dtype)
    X2[i, 0] = R  # a full-norm replacement in another direction
    if family == "multinomial-logistic":
        y2[i] = (y[i] + 1) % K
    elif family == "binary-logistic":
        y2[i] = 1 - y[i]
    else:
        y2[i] = -y[i] * 10
    return X, y, X2, y2, i


CASES = [
    # (name, family, K, method factory, R, clip, l2, lr)
    (
        "cgd-binary-clipped",
        "binary-logistic",
        1,
        lambda m: NoisyCGD(
            m, batch_size=16, lr=5.0, noise_std=0.3, clip=0.3, l2=0.01, feature_norm=1.0, seed=1
        ),
        1.0,
    ),
    (
        "gd-leastsq-clipped",
        "least-squares",
        1,
        lambda m: NoisyGD(m, lr=1.5, noise_std=0.3, clip=0.5, l2=0.05, feature_norm=1.0, seed=2),
        1.0,
    ),
    (
        "sgd-uniform-multinomial",
        "multinomial-logistic",
        3,
        lambda m: NoisySGD(
            m,
            batch_size=10,
            sampling="uniform",
            lr=2.0,
            noise_std=0.3,
            clip=1.5,
            l2=0.01,
            feature_norm=1.0,
            seed=3,
        ),
        1.0,
    ),
    (
        "sgd-shuffle-multinomial",
        "multinomial-logistic",
        3,
        lambda m: NoisySGD(
            m,
            batch_size=13,
            sampling="shuffle",
            lr=2.0,
            noise_std=0.3,
            clip=1.0,
            l2=0.01,
            feature_norm=0.7,
            seed=4,
        ),
        0.7,
    ),
    (
        "sgd-poisson-binary",
        "binary-logistic",
        1,
        lambda m: NoisySGD(
            m,
            batch_size=20,
            sampling="poisson",
            lr=1.0,
            noise_std=0.3,
            clip=0.4,
            l2=0.01,
            feature_norm=1.0,
            seed=5,
        ),
        1.0,
    ),
    (
        "cgd-binary-projected",
        "binary-logistic",
        1,
        lambda m: NoisyCGD(
            m,
            batch_size=16,
            lr=5.0,
            noise_std=0.3,
            clip=0.3,
            l2=0.01,
            feature_norm=1.0,
            diameter=0.8,
            seed=6,
        ),
        1.0,
    ),
]


def _coupled(family, K, factory, R, steps=120, mutate=None):
    n, d = 100, 5
    X, y, X2, y2, i = _pair(family, n, d, K, R)
    m1, m2 = GLM(d, K, family), GLM(d, K, family)
    a, b = factory(m1), factory(m2)
    run, cert, sampler = a.plan(n, steps=steps)
    assert cert.certified, cert.reason
    c, L, sigma = run.c, run.L, run.sigma
    assert L == 2 * a.clip
    if mutate is not None:
        mutate(sampler)
    worst = -np.inf
    prev = 0.0
    for t in range(steps):
        idx = sampler.batch(t)
        bt = sampler.normaliser(idx)
        hit = i in set(idx.tolist())
        # pre-noise gradient difference at a common point (model 1's iterate)
        g1, _ = m1.clipped_grad_sum(X[torch.from_numpy(idx)], y[torch.from_numpy(idx)], a.clip)
        g2, _ = m1.clipped_grad_sum(X2[torch.from_numpy(idx)], y2[torch.from_numpy(idx)], a.clip)
        gd = float(torch.sqrt(sum(((u - v) ** 2).sum() for u, v in zip(g1, g2)))) / bt
        assert gd <= (L / bt if hit else 0.0) + 1e-12
        eta = run.lr_schedule[t]
        a.step(t, X, y, sampler, sigma, eta)
        b.step(t, X2, y2, sampler, sigma, eta)
        dist = float(torch.linalg.vector_norm(flat_parameters(m1) - flat_parameters(m2)))
        allowed = c * prev + (eta * L / bt if hit else 0.0)
        assert bt >= sampler.b_min or sampler.scheme in ("poisson", "uniform")
        assert (
            allowed <= c * prev + (eta * L / run.b_min if hit else 0.0) + 1e-15
        )  # the accountant's per-step shift
        worst = max(worst, dist - allowed)
        prev = dist
    return worst, prev


@pytest.mark.parametrize("name,family,K,factory,R", CASES, ids=[c[0] for c in CASES])
def test_coupled_noise_contraction(name, family, K, factory, R):
    worst, final = _coupled(family, K, factory, R)
    assert worst <= 1e-10, f"{name}: distance exceeded c*prev + eta*L/b by {worst}"
    assert final > 0  # the datasets do differ


def test_coupled_test_has_power():
    """Mutation: normalising by 1 instead of the batch size (a sum, not a mean) must be caught."""

    def mutate(sampler):
        object.__setattr__(sampler, "normaliser", lambda batch: 1)  # type: ignore[misc]

    _, family, K, factory, R = CASES[0]
    n, d = 100, 5
    X, y, X2, y2, i = _pair(family, n, d, K, R)
    m1, m2 = GLM(d, K, family), GLM(d, K, family)
    a, b = factory(m1), factory(m2)
    run, _cert, sampler = a.plan(n, steps=40)
    # honest sampler for the bound, mutated one for the training
    bad = type(sampler)(sampler.scheme, sampler.n, sampler.batch_size, sampler.seed)
    object.__setattr__(bad, "normaliser", lambda batch: 1)
    violated = False
    prev = 0.0
    for t in range(40):
        idx = sampler.batch(t)
        hit = i in set(idx.tolist())
        a.step(t, X, y, bad, run.sigma, run.eta)
        b.step(t, X2, y2, bad, run.sigma, run.eta)
        dist = float(torch.linalg.vector_norm(flat_parameters(m1) - flat_parameters(m2)))
        if (
            dist
            > run.c * prev + (run.eta * run.L / sampler.normaliser(idx) if hit else 0.0) + 1e-10
        ):
            violated = True
            break
        prev = dist
    assert violated


def test_projection_keeps_iterates_in_the_ball():
    n, d, D = 100, 5, 0.3
    X, y, *_ = _pair("binary-logistic", n, d, 1, 1.0)
    m = GLM(d, 1, "binary-logistic")
    meth = NoisyCGD(
        m,
        batch_size=16,
        lr=5.0,
        noise_std=2.0,
        clip=1.0,
        l2=0.0,
        feature_norm=1.0,
        diameter=D,
        seed=0,
    )
    run, cert, sampler = meth.plan(n, steps=80)
    assert run.D == D and cert.certified and run.is_convex
    norms = []
    for t in range(80):
        meth.step(t, X, y, sampler, run.sigma, run.eta)
        norms.append(float(torch.linalg.vector_norm(flat_parameters(m))))
    assert max(norms) <= D / 2 + 1e-12
    assert max(norms) == pytest.approx(D / 2)  # the noise is large: the projection is active


def test_custom_projection_hook():
    calls = []

    def box(flat):
        calls.append(1)
        return flat.clamp(-0.05, 0.05)

    n, d = 50, 4
    X, y, *_ = _pair("binary-logistic", n, d, 1, 1.0)
    m = GLM(d, 1, "binary-logistic")
    meth = NoisyGD(m, lr=1.0, noise_std=1.0, clip=1.0, projection=box, seed=0)
    run, _, sampler = meth.plan(n, steps=10)
    for t in range(10):
        meth.step(t, X, y, sampler, run.sigma, run.eta)
    assert len(calls) == 10 and float(flat_parameters(m).abs().max()) <= 0.05
    assert run.D is None  # no diameter declared: no bounded-domain theorem is claimed
