"""GLM certificates: the constants, their derivations checked numerically, and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lastiterate.run import Run
from lastiterate.train.geometry import glm_certificate
from lastiterate.train.models import GLM


def test_constants():
    c = glm_certificate("binary-logistic", feature_norm=2.0, l2=0.1, clip=0.5, lr=1.0)
    assert c.certified and c.strong_convexity == 0.1 and c.smoothness == pytest.approx(1.0 + 0.1)
    assert c.sensitivity == 1.0 and c.contraction == pytest.approx(max(0.9, abs(1 - 1.1)))
    c = glm_certificate("multinomial-logistic", feature_norm=1.0, l2=0.005, clip=1.5, lr=1.0)
    assert (
        c.certified
        and c.smoothness == pytest.approx(0.505)
        and c.contraction == pytest.approx(0.995)
    )
    assert c.gradient_bound == pytest.approx(math.sqrt(2)) and c.clipping_active is False
    c = glm_certificate("least-squares", feature_norm=1.0, l2=0.01, clip=1.0, lr=0.5)
    assert c.certified and c.smoothness == pytest.approx(1.01) and c.clipping_active
    c = glm_certificate(
        "least-squares", feature_norm=1.0, l2=0.01, clip=1.0, lr=0.5, intercept=True
    )
    assert c.smoothness == pytest.approx(2.01)


def test_refusals():
    # clipped multinomial (clip can be active): not certified, with a hint
    c = glm_certificate("multinomial-logistic", feature_norm=1.0, l2=0.005, clip=1.0, lr=1.0)
    assert (
        not c.certified and "sqrt(2)" in c.reason and "0.707" in c.hint and c.run_geometry() == {}
    )
    # R = C/sqrt(2) certifies it
    assert glm_certificate(
        "multinomial-logistic", feature_norm=1 / math.sqrt(2), l2=0.005, clip=1.0, lr=1.0
    ).certified
    # lr >= 2/M
    c = glm_certificate("binary-logistic", feature_norm=1.0, l2=0.01, clip=1.0, lr=2 / 0.26)
    assert not c.certified and "2/M" in c.reason
    # no feature bound
    assert not glm_certificate(
        "binary-logistic", feature_norm=None, l2=0.01, clip=1.0, lr=0.1
    ).certified
    # Poisson: worst-case batch n
    c = glm_certificate(
        "binary-logistic",
        feature_norm=1.0,
        l2=0.01,
        clip=1.0,
        lr=0.1,
        sampling="poisson",
        n=100,
        batch_size=10,
    )
    assert c.smoothness == pytest.approx(10 * 0.25 + 0.01)
    # lambda = 0: convex + smooth only
    c = glm_certificate("binary-logistic", feature_norm=1.0, l2=0.0, clip=1.0, lr=1.0)
    assert (
        c.certified
        and c.run_geometry() == {"smoothness": 0.25, "convex": True}
        and c.contraction == 1.0
    )


def test_certificate_feeds_run():
    c = glm_certificate("multinomial-logistic", feature_norm=0.7, l2=0.005, clip=1.0, lr=1.0)
    run = Run(
        algorithm="cgd",
        n=1437,
        batch_size=256,
        epochs=10,
        lr=1.0,
        noise_std=0.05,
        clip=1.0,
        **c.run_geometry(),
    )
    assert run.c == pytest.approx(c.contraction) == pytest.approx(0.995)


def _hessian_opnorm(model, x, y):
    params = model.params()
    flat0 = torch.cat([p.detach().reshape(-1) for p in params])

    def f(flat):
        k = 0
        out = []
        for p in params:
            out.append(flat[k : k + p.numel()].view_as(p))
            k += p.numel()
        z = x @ out[0].T + (out[1] if len(out) > 1 else 0)
        if model.family == "multinomial-logistic":
            return torch.nn.functional.cross_entropy(z, y)
        if model.family == "binary-logistic":
            u = z[:, 0]
            return (torch.nn.functional.softplus(u) - y * u).sum()
        return (0.5 * (z[:, 0] - y) ** 2).sum()

    H = torch.autograd.functional.hessian(f, flat0)
    return float(torch.linalg.eigvalsh(H).abs().max())


@pytest.mark.parametrize(
    "family,coef",
    [("multinomial-logistic", 0.5), ("binary-logistic", 0.25), ("least-squares", 1.0)],
)
@pytest.mark.parametrize("intercept", [False, True])
def test_hessian_bound_holds_and_is_nearly_attained(family, coef, intercept):
    """||Hess l_i|| <= coef * R_eff^2 at random points, and (close to) equality somewhere."""
    g = torch.Generator().manual_seed(0)
    K = 4 if family == "multinomial-logistic" else 1
    R = 1.3
    R_eff2 = R * R + (1 if intercept else 0)
    worst = 0.0
    for trial in range(60):
        model = GLM(3, K, family, intercept=intercept)
        with torch.no_grad():
            for p in model.params():
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * (trial % 5))
        x = torch.randn(1, 3, generator=g, dtype=torch.float64)
        x = x / x.norm() * R
        y = (
            torch.randint(0, K, (1,), generator=g)
            if K > 1
            else torch.randint(0, 2, (1,), generator=g).double()
        )
        h = _hessian_opnorm(model, x, y)
        assert h <= coef * R_eff2 * (1 + 1e-9)
        worst = max(worst, h)
    # zero parameters give p uniform (binary: s = 1/2), where the bound is attained for K
    # = 2-like directions
    assert worst >= 0.5 * coef * R_eff2


def test_softmax_covariance_bound():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        K = rng.integers(2, 12)
        z = rng.normal(size=K) * rng.uniform(0, 6)
        p = np.exp(z - z.max())
        p /= p.sum()
        assert np.linalg.eigvalsh(np.diag(p) - np.outer(p, p)).max() <= 0.5 + 1e-12
    p = np.array([0.5, 0.5, 0.0])
    assert np.linalg.eigvalsh(np.diag(p) - np.outer(p, p)).max() == pytest.approx(0.5)


def _clipped_step_jacobian_norm(z, y, eta, lam, C, xnorm):
    K = len(z)
    p = np.exp(z - z.max())
    p /= p.sum()
    u = p.copy()
    u[y] -= 1
    gn = np.linalg.norm(u) * xnorm
    Jp = np.diag(p) - np.outer(p, p)
    if gn <= C:
        A = Jp * xnorm**2
    else:
        uh = u / np.linalg.norm(u)
        A = (C / gn) * (np.eye(K) - np.outer(uh, uh)) @ Jp * xnorm**2
    return np.linalg.svd((1 - eta * lam) * np.eye(K) - eta * A, compute_uv=False)[0]


def test_clipped_multinomial_step_can_expand():
    """Why the multinomial certificate refuses an active clip: the clipped step is not c-Lipschitz.

    With R = C = 1, lambda = 0.005, eta = 1 the certified c would be 0.995; some point has a step
    Jacobian (in the direction of x) with largest singular value > 1.
    """
    rng = np.random.default_rng(0)
    best = max(
        _clipped_step_jacobian_norm(
            rng.normal(size=10) * rng.uniform(0, 8), int(rng.integers(10)), 1.0, 0.005, 1.0, 1.0
        )
        for _ in range(4000)
    )
    assert best > 1.0
    # with R = C/sqrt(2) the clip is never active and the Jacobian is symmetric with norm <= c
    best_ok = max(
        _clipped_step_jacobian_norm(
            rng.normal(size=10) * rng.uniform(0, 8),
            int(rng.integers(10)),
            1.0,
            0.005,
            1.0,
            1 / math.sqrt(2),
        )
        for _ in range(2000)
    )
    assert best_ok <= 0.995 + 1e-12


def test_schedule_contraction_is_the_worst_step():
    c = glm_certificate("binary-logistic", feature_norm=1.0, l2=0.1, clip=1.0, lr=4.0, lr_min=0.5)
    # a small step contracts less (1 - 0.5*0.1 = 0.95); a large one may overshoot
    # (|1 - 4*0.35| = 0.4)
    assert c.contraction == pytest.approx(max(1 - 0.5 * 0.1, abs(1 - 4.0 * 0.35)))


@pytest.mark.parametrize("intercept", [False, True])
def test_a_feature_norm_whose_square_overflows_is_refused(intercept):
    # 1e300**2 used to raise OverflowError (exit 70 from `train --feature-norm 1e300`)
    from lastiterate.cli import main
    from lastiterate.errors import ParameterError

    with pytest.raises(ParameterError) as info:
        glm_certificate(
            "binary-logistic", feature_norm=1e300, l2=0.1, clip=1.0, intercept=intercept
        )
    assert info.value.name == "feature_norm"
    largest = glm_certificate("least-squares", feature_norm=1e150, l2=0.0, clip=1.0)
    assert largest.data_smoothness == pytest.approx(1e300)
    args = [
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--algorithm",
        "gd",
        "--lr",
        "1",
        "--clip",
        "1",
        "--epochs",
        "1",
        "--noise-std",
        "1",
        "--feature-norm",
        "1e300",
    ]
    assert main(args) == 2
