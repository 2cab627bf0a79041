"""The trainer's batch rows: full batches in place, GLM row norms computed once per data set."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from lastiterate.train.models import GLM, ModuleModel, glm_clipped_grad_sum, mlp
from lastiterate.train.randomness import Randomness
from lastiterate.train.trainer import NoisyGD, NoisySGD


def _data(n: int = 200, d: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(3)
    X = rng.standard_normal((n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    return torch.from_numpy(X), torch.from_numpy((rng.random(n) < 0.4).astype(np.int64))


def test_whole_batch_uses_the_rows_in_place_and_their_norms() -> None:
    X, y = _data()
    meth = NoisyGD(
        GLM(7, 1, family="binary-logistic", intercept=True), lr=1.0, clip=0.5, noise_std=0.1, seed=0
    )
    Xb, yb, x_sq = meth._batch_rows(X, y, np.arange(len(y), dtype=np.int64))
    assert Xb is X and yb is y
    assert x_sq is not None and torch.equal(x_sq, (X * X).sum(-1))


def test_partial_batch_is_gathered_with_the_same_norms() -> None:
    X, y = _data()
    meth = NoisyGD(
        GLM(7, 1, family="binary-logistic", intercept=True), lr=1.0, clip=0.5, noise_std=0.1, seed=0
    )
    for idx in (
        np.array([5, 3, 9, 0]),
        np.arange(1, 200),
        np.arange(199),
        np.arange(200)[::-1].copy(),
    ):
        Xb, yb, x_sq = meth._batch_rows(X, y, idx.astype(np.int64))
        assert Xb is not X
        rows = torch.from_numpy(idx)
        assert torch.equal(Xb, X[rows]) and torch.equal(yb, y[rows])
        assert x_sq is not None and torch.equal(x_sq, (Xb * Xb).sum(-1))


def test_norms_are_recomputed_for_new_data() -> None:
    X, y = _data()
    meth = NoisyGD(
        GLM(7, 1, family="binary-logistic", intercept=True), lr=1.0, clip=0.5, noise_std=0.1, seed=0
    )
    meth._batch_rows(X, y, np.arange(200, dtype=np.int64))
    X2 = 0.5 * X
    _, _, x_sq = meth._batch_rows(X2, y, np.arange(200, dtype=np.int64))
    assert x_sq is not None and torch.equal(x_sq, (X2 * X2).sum(-1))


def test_non_glm_models_get_no_norms() -> None:
    X, y = _data()
    meth = NoisyGD(ModuleModel(mlp(7, 2, hidden=(4,))), lr=1.0, clip=0.5, noise_std=0.1, seed=0)
    _, _, x_sq = meth._batch_rows(X, y, np.arange(200, dtype=np.int64))
    assert x_sq is None


def test_clipped_sum_with_given_norms_equals_computed() -> None:
    X, y = _data()
    glm = GLM(7, 1, family="binary-logistic", intercept=True)
    with torch.no_grad():
        glm.weight.normal_(generator=torch.Generator().manual_seed(1))
    given, c1 = glm.clipped_grad_sum(X, y, 0.3, x_sq=(X * X).sum(-1))
    computed, c2 = glm.clipped_grad_sum(X, y, 0.3)
    ref, c3 = glm_clipped_grad_sum("binary-logistic", glm.weight, glm.bias, X, y, 0.3)
    assert c1 == c2 == int(c3) > 0
    for a, b, c in zip(given, computed, ref):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_poisson_at_rate_one_is_every_row_and_below_one_a_draw() -> None:
    r = Randomness.of(7, False)
    assert np.array_equal(r.poisson_subset(3, (0,), 50, 1.0), np.arange(50))
    below = [len(r.poisson_subset(3, (t,), 2000, 0.9)) for t in range(5)]
    assert all(1700 < k < 1900 for k in below) and len(set(below)) > 1


def test_full_batch_fit_matches_a_gathered_fit() -> None:
    """gd (rows in place) and Poisson sgd at rate 1 (every row; the draw is skipped) train the
    same steps: the same parameters bit for bit."""
    X, y = _data()
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for make in (
            lambda m: NoisyGD(m, lr=1.0, clip=0.5, noise_std=0.05, seed=11),
            lambda m: NoisySGD(
                m, lr=1.0, clip=0.5, noise_std=0.05, seed=11, batch_size=200, sampling="poisson"
            ),
        ):
            glm = GLM(7, 1, family="binary-logistic", intercept=True)
            make(glm).fit(X.numpy(), y.numpy(), steps=30)
            out.append(torch.cat([p.detach().flatten() for p in glm.params()]))
    assert torch.equal(out[0], out[1])
