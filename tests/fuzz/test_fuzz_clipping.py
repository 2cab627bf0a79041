"""Fuzz finding: one example whose gradient norm overflows turned the released model into NaN.

``||g_i|| = ||r_i|| sqrt(||x_i||^2)`` overflows for finite features above ~1e154 (no
``--feature-norm``); with a zero residual (a correctly classified example) it was ``0 * inf = NaN``,
the clip factor ``C / NaN`` was NaN and the clipped SUM, hence every parameter, became NaN -- an
output that depends on one example (infinite privacy loss) printed next to a finite epsilon.  The
factor is now 0 for a norm that is not finite (the example's gradient is dropped, ``||s g|| <= C``
still holds) and a dropped example contributes exactly 0.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lastiterate.train.models import GLM, ModuleModel, glm_clipped_grad_sum, mlp
from lastiterate.train.trainer import NoisyGD


def _huge_rows() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)) * 1e300  # finite, but ||x||^2 overflows
    return X, (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize("family", ["binary-logistic", "multinomial-logistic", "least-squares"])
def test_overflowing_gradient_norms_leave_the_model_finite(family: str) -> None:
    torch.set_num_threads(1)
    X, y = _huge_rows()
    model = GLM(3, 2 if family == "multinomial-logistic" else 1, family, dtype=torch.float64)
    NoisyGD(model, lr=0.1, noise_std=1.0, clip=1.0).fit(X, y, steps=3)
    assert all(bool(torch.isfinite(p).all()) for p in model.params())


def test_a_zero_residual_with_an_overflowing_norm_is_dropped_not_nan() -> None:
    # example 0: sigmoid(1e300 * 1) - 1 = 0 exactly and ||x||^2 = inf; example 1 is ordinary
    X = torch.tensor([[1e300, 1e300], [0.3, -0.4]], dtype=torch.float64)
    y = torch.tensor([1, 0])
    w = torch.ones(1, 2, dtype=torch.float64)
    (g,), _ = glm_clipped_grad_sum("binary-logistic", w, None, X, y, clip=1.0)
    r1 = torch.sigmoid(torch.tensor(-0.1, dtype=torch.float64))
    assert torch.allclose(g, r1 * X[1:2])  # example 0 contributes exactly nothing


@settings(max_examples=60, deadline=None, database=None)
@given(
    scale=st.sampled_from([1.0, 1e100, 1e154, 1e155, 1e200, 1e300, 1e308]),
    clip=st.floats(1e-3, 1e3),
    seed=st.integers(0, 2**16),
)
def test_every_clipped_gradient_sum_is_finite_and_within_b_times_c(scale, clip, seed) -> None:
    rng = np.random.default_rng(seed)
    X = torch.tensor(rng.uniform(-1, 1, size=(6, 3)) * scale, dtype=torch.float64)
    y = torch.tensor(rng.integers(0, 2, 6))
    w = torch.tensor(rng.normal(size=(1, 3)), dtype=torch.float64)
    b = torch.tensor(rng.normal(size=(1,)), dtype=torch.float64)
    out, _ = glm_clipped_grad_sum("binary-logistic", w, b, X, y, clip=clip)
    # the weight part may overflow only if the sum of 6 vectors of norm <= C does: it cannot
    assert all(bool(torch.isfinite(t).all()) for t in out)
    total = torch.sqrt(sum((t * t).sum() for t in out))
    assert float(total) <= 6 * clip * (1 + 1e-9)


@pytest.mark.parametrize("method", ["linear", "vmap"])
def test_module_models_drop_an_overflowing_example(method: str) -> None:
    torch.set_num_threads(1)
    net = mlp(2, 2, (3,), "relu", seed=0, dtype=torch.float64)
    model = ModuleModel(net, "cross-entropy", method=method)
    X = torch.tensor([[1e300, 1e300], [0.3, -0.4]], dtype=torch.float64)
    with torch.no_grad():  # example 0 classified correctly: a residual of exactly 0
        y = torch.tensor([int(net(X[:1]).argmax()), 0])
    sums, _ = model.clipped_grad_sum(X, y, clip=1.0)
    assert all(bool(torch.isfinite(t).all()) for t in sums)
    alone, _ = model.clipped_grad_sum(X[1:], y[1:], clip=1.0)
    for a, b in zip(sums, alone):
        assert torch.allclose(a, b)
