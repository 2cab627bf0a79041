"""Per-example gradients equal autograd's, for the GLM closed form and every MLP path."""

from __future__ import annotations

import pytest
import torch

from lastiterate.train.models import GLM, ModuleModel, mlp


def _autograd_per_example(model, X, y):
    params = model.params()
    saved = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(True)
    out = []
    for i in range(len(y)):
        loss = model.per_example_losses(X[i : i + 1], y[i : i + 1])[0]
        out.append(torch.autograd.grad(loss, params))
    for p, s in zip(params, saved):
        p.requires_grad_(s)
    return [torch.stack([o[k] for o in out]) for k in range(len(params))]


def _data(family, B=17, d=6, K=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(B, d, generator=g, dtype=torch.float64)
    if family == "multinomial-logistic":
        y = torch.randint(0, K, (B,), generator=g)
    elif family == "binary-logistic":
        y = torch.randint(0, 2, (B,), generator=g)
    else:
        y = torch.randn(B, generator=g, dtype=torch.float64)
    return X, y


def _assert_matches_autograd(model, X, y, rtol):
    """Per-example gradients, their norms and the clipped sum agree with autograd."""
    ours = model.per_example_grads(X, y)
    ref = _autograd_per_example(model, X, y)
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b, rtol=rtol, atol=1e-12)
    norms = torch.sqrt(sum((r.reshape(len(y), -1) ** 2).sum(1) for r in ref))
    torch.testing.assert_close(model.grad_norms(X, y), norms, rtol=rtol, atol=1e-12)
    # clipped sum = sum_i g_i min(1, C/||g_i||)
    # a clip norm between two examples' norms (the median itself is a tie that one rounding
    # of that example's norm decides)
    sorted_norms = norms.sort().values
    k = len(sorted_norms) // 2
    C = float((sorted_norms[k - 1] + sorted_norms[k]) / 2)
    s = torch.clamp(C / norms, max=1.0)
    summed, n_clipped = model.clipped_grad_sum(X, y, C)
    for a, r in zip(summed, ref):
        torch.testing.assert_close(a, torch.einsum("b,b...->...", s, r), rtol=rtol, atol=1e-12)
    assert n_clipped == int((norms > C).sum())


@pytest.mark.parametrize("family", ["multinomial-logistic", "binary-logistic", "least-squares"])
@pytest.mark.parametrize("intercept", [False, True])
def test_glm_closed_form_equals_autograd(family, intercept):
    K = 4 if family == "multinomial-logistic" else 1
    model = GLM(6, K, family, intercept=intercept)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.params():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
    X, y = _data(family)
    _assert_matches_autograd(model, X, y, rtol=1e-10)


@pytest.mark.parametrize("method", ["linear", "vmap", "opacus"])
@pytest.mark.parametrize("loss", ["cross-entropy", "mse"])
def test_mlp_per_example_equals_autograd(method, loss):
    K = 3 if loss == "cross-entropy" else 1
    net = mlp(5, K, hidden=(7, 6), activation="tanh", seed=3)
    model = ModuleModel(net, loss, method=method)
    g = torch.Generator().manual_seed(2)
    X = torch.randn(11, 5, generator=g, dtype=torch.float64)
    y = (
        torch.randint(0, K, (11,), generator=g)
        if loss == "cross-entropy"
        else torch.randn(11, generator=g, dtype=torch.float64)
    )
    _assert_matches_autograd(model, X, y, rtol=1e-9)


def test_auto_method_choice():
    assert ModuleModel(mlp(3, 2)).method == "linear"

    class Odd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 2).double()

        def forward(self, x):
            return self.a(x) * 2

    assert ModuleModel(Odd()).method == "vmap"


def test_empty_batch_gives_zero_gradient():
    model = GLM(4, 3)
    X = torch.zeros(0, 4, dtype=torch.float64)
    y = torch.zeros(0, dtype=torch.long)
    summed, k = model.clipped_grad_sum(X, y, 1.0)
    assert k == 0 and all(float(s.abs().sum()) == 0 for s in summed)


def test_shared_linear_layer_is_not_eligible_for_the_per_layer_path():
    lin = torch.nn.Linear(3, 3).double()
    net = torch.nn.Sequential(lin, torch.nn.Tanh(), lin)
    model = ModuleModel(net, "cross-entropy")
    assert model.method == "vmap"
    g = torch.Generator().manual_seed(0)
    X = torch.randn(5, 3, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (5,), generator=g)
    for a, b in zip(model.per_example_grads(X, y), _autograd_per_example(model, X, y)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
