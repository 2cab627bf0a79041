"""NoisyRuns: R seeded runs advanced together give what the sequential trainer gives, run by run.

Independent source: the single-run trainer itself (``NoisyGD / NoisyCGD / NoisySGD(...,
seed=s).fit``), whose update is tested against exactly solvable cases elsewhere
(test_noise_exact.py, test_per_example.py).  Every case checks that what it claims to exercise
happened (clipping active or not, projection active), so it cannot pass vacuously.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch

from lastiterate.errors import ParameterError
from lastiterate.train.models import GLM, GLMStack, ModuleModel, glm_clipped_grad_sum, mlp
from lastiterate.train.randomness import SeededRunWarning
from lastiterate.train.trainer import (
    NoisyAdam,
    NoisyCGD,
    NoisyGD,
    NoisyMethod,
    NoisyRuns,
    NoisySGD,
    stack_batches,
)

N, D, STEPS = 30, 4, 12
SEEDS = (101, 202, 303)
FAMILIES = {
    "multinomial-logistic": 3,
    "binary-logistic": 1,
    "least-squares": 1,
}


def _data(family: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    X = rng.normal(size=(N, D))
    if family == "multinomial-logistic":
        return X, rng.integers(0, 3, N)
    if family == "binary-logistic":
        return X, rng.integers(0, 2, N)
    return X, 3.0 * rng.normal(size=N)


#: (trainer class, its arguments): gd, cgd and sgd (uniform, poisson, shuffle)
METHODS = [
    ("gd", NoisyGD, {}),
    ("cgd", NoisyCGD, {"batch_size": 7}),
    ("sgd-uniform", NoisySGD, {"batch_size": 8, "sampling": "uniform"}),
    ("sgd-poisson", NoisySGD, {"batch_size": 8, "sampling": "poisson"}),
    ("sgd-shuffle", NoisySGD, {"batch_size": 8, "sampling": "shuffle"}),
]
#: clip 0.2: nearly every gradient is clipped; clip 100: none is (|r| sqrt(R^2 + 1) < 100)
SETTINGS = [
    ("clipped", {"clip": 0.2}),
    ("unclipped", {"clip": 100.0}),
    ("clipped+projected", {"clip": 0.2, "diameter": 0.02, "l2": 0.05}),
]


def _make(cls: Any, family: str, seed: int, kw: dict[str, Any], **extra: Any) -> NoisyMethod:
    model = GLM(D, FAMILIES[family], family, intercept=True)
    return cls(model, lr=0.3, noise_std=0.05, feature_norm=2.0, seed=seed, **kw, **extra)  # type: ignore[no-any-return]


def _flat(model: Any) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.params()])


def _sequential(cls: Any, family: str, kw: dict[str, Any], **extra: Any) -> list[Any]:
    out = []
    for s in SEEDS:
        m = _make(cls, family, s, kw, **extra)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SeededRunWarning)
            m.fit(*_data(family), steps=STEPS, account=False)
        out.append(m)
    return out


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("setting", SETTINGS, ids=[s[0] for s in SETTINGS])
@pytest.mark.parametrize("method", METHODS, ids=[m[0] for m in METHODS])
def test_run_r_equals_the_sequential_trainer_with_its_seed(
    method: tuple[str, Any, dict[str, Any]],
    setting: tuple[str, dict[str, Any]],
    family: str,
) -> None:
    _, cls, mkw = method
    label, skw = setting
    kw = {**mkw, **skw}
    seq = _sequential(cls, family, kw)
    methods = [_make(cls, family, s, kw) for s in SEEDS]
    with pytest.warns(SeededRunWarning):
        res = NoisyRuns(methods).fit(*_data(family), steps=STEPS)
    assert res.steps == STEPS and res.run.setting() == seq[0].plan(N, steps=STEPS)[0].setting()
    finals = [_flat(m) for m in res.models]
    for a, b in zip(finals, seq):
        torch.testing.assert_close(a, _flat(b.model), rtol=1e-10, atol=1e-12)
    # the runs have their own noise and batches: no two alike
    assert min(float((finals[0] - f).abs().max()) for f in finals[1:]) > 1e-6
    # what the case claims to exercise did happen
    if label == "unclipped":
        assert np.all(res.clipped_fraction == 0.0)
    else:
        assert np.all(res.clipped_fraction > 0.5)
    if "projected" in label:
        for f in finals:
            assert float(torch.linalg.vector_norm(f)) == pytest.approx(
                0.01, rel=1e-9
            )  # on the ball


def test_custom_projection_without_runs_dimension_is_applied_run_by_run() -> None:
    def box(flat: torch.Tensor) -> torch.Tensor:  # the projection onto a box (closed, convex)
        return flat.clamp(-0.02, 0.02)

    kw = {"batch_size": 8, "sampling": "poisson", "clip": 0.2}
    seq = _sequential(NoisySGD, "least-squares", kw, projection=box)
    methods = [_make(NoisySGD, "least-squares", s, kw, projection=box) for s in SEEDS]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)
        res = NoisyRuns(methods).fit(*_data("least-squares"), steps=STEPS)
    for m, b in zip(res.models, seq):
        torch.testing.assert_close(_flat(m), _flat(b.model), rtol=1e-10, atol=1e-12)
        assert float(_flat(m).abs().max()) == pytest.approx(0.02)  # the box is active


def test_a_patched_noise_routine_reaches_the_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation testing must reach the vectorised path: it draws noise with the trainers' own
    ``_noise``."""
    kw = {"batch_size": 7, "clip": 0.2}
    normal = NoisyRuns([_make(NoisyCGD, "binary-logistic", s, kw) for s in SEEDS])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)
        a = [_flat(m) for m in normal.fit(*_data("binary-logistic"), steps=STEPS).models]
        orig = NoisyMethod._noise

        def no_noise(self, t, sigma, params):  # type: ignore[no-untyped-def]
            return orig(self, t, 0.0 * sigma, params)

        monkeypatch.setattr(NoisyMethod, "_noise", no_noise)
        runs = NoisyRuns([_make(NoisyCGD, "binary-logistic", s, kw) for s in SEEDS])
        b = [_flat(m) for m in runs.fit(*_data("binary-logistic"), steps=STEPS).models]
        seq = _sequential(NoisyCGD, "binary-logistic", kw)
    assert all(float((x - y).abs().max()) > 1e-4 for x, y in zip(a, b))
    for x, m in zip(b, seq):  # noiseless, and still the sequential trainer's (mutated) result
        torch.testing.assert_close(x, _flat(m.model), rtol=1e-10, atol=1e-12)


def test_unseeded_runs_draw_fresh_secret_randomness() -> None:
    methods = [
        NoisyGD(GLM(D, 1, "least-squares"), lr=0.3, clip=1.0, noise_std=0.05) for _ in range(3)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeededRunWarning)  # no seed: no seeded-run warning
        res = NoisyRuns(methods).fit(*_data("least-squares"), steps=3)
    f = [_flat(m) for m in res.models]
    assert float((f[0] - f[1]).abs().max()) > 1e-6 and float((f[1] - f[2]).abs().max()) > 1e-6
    assert all(not m.randomness.seeded for m in methods)


def test_stacked_gradient_sum_equals_the_single_glm() -> None:
    """GLMStack and GLM share glm_clipped_grad_sum; padding rows are masked out exactly."""
    X, y = _data("multinomial-logistic")
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    models = []
    for s in SEEDS:
        m = GLM(D, 3, "multinomial-logistic", intercept=True)
        torch.manual_seed(s)
        m.weight.data.normal_()
        m.bias.data.normal_()  # type: ignore[union-attr]
        models.append(m)
    stack = GLMStack(models)
    batches = [np.arange(0, 10), np.arange(5, 25), np.array([], dtype=np.int64)]
    (Xb, yb), mask = stack_batches((Xt, yt), batches)
    assert mask is not None and Xb.shape == (3, 20, D)
    gsum, clipped = stack.clipped_grad_sum(Xb, yb, 0.5, mask)
    for r, (m, b) in enumerate(zip(models, batches)):
        idx = torch.as_tensor(b)
        one, k = m.clipped_grad_sum(Xt[idx], yt[idx], 0.5)
        assert int(clipped[r]) == k
        for g, h in zip(gsum, one):
            torch.testing.assert_close(g[r], h, rtol=1e-12, atol=1e-14)
    # a shared batch is not copied per run, and the functional form is the GLM's
    (Xs, _), m2 = stack_batches((Xt, yt), [np.arange(N)] * 3)
    assert m2 is None and Xs.shape == (N, D)
    out, _ = glm_clipped_grad_sum(
        "multinomial-logistic", models[0].weight, models[0].bias, Xt, yt, 0.5
    )
    ref, _ = models[0].clipped_grad_sum(Xt, yt, 0.5)
    for g, h in zip(out, ref):
        assert torch.equal(g, h)


def test_refusals() -> None:
    glm = GLM(D, 1, "least-squares")
    with pytest.raises(ParameterError, match="methods"):
        NoisyRuns([])
    with pytest.raises(ParameterError, match="Adam"):
        NoisyRuns([NoisyAdam(glm, lr=0.1, clip=1.0, noise_std=1.0, sampling="full")])
    with pytest.raises(ParameterError, match="lr"):
        NoisyRuns(
            [
                NoisyGD(GLM(D, 1, "least-squares"), lr=0.1, clip=1.0, noise_std=1.0, seed=1),
                NoisyGD(GLM(D, 1, "least-squares"), lr=0.2, clip=1.0, noise_std=1.0, seed=2),
            ]
        )
    with pytest.raises(ParameterError, match="NoisyGD"):
        NoisyRuns(
            [
                NoisyGD(GLM(D, 1, "least-squares"), lr=0.1, clip=1.0, noise_std=1.0),
                NoisyCGD(GLM(D, 1, "least-squares"), batch_size=3, lr=0.1, clip=1.0, noise_std=1.0),
            ]
        )
    with pytest.raises(ParameterError, match="diameter"):
        NoisyRuns(
            [
                NoisyGD(GLM(D, 1, "least-squares"), lr=0.1, clip=1.0, noise_std=1.0, diameter=1.0),
                NoisyGD(GLM(D, 1, "least-squares"), lr=0.1, clip=1.0, noise_std=1.0, diameter=2.0),
            ]
        )
    with pytest.raises(ParameterError, match="projection"):  # two callables: not known alike
        NoisyRuns(
            [
                NoisyGD(
                    GLM(D, 1, "least-squares"),
                    lr=0.1,
                    clip=1.0,
                    noise_std=1.0,
                    projection=lambda f, a=a: f.clamp(-a, a),  # type: ignore[misc]
                )
                for a in (1.0, 2.0)
            ]
        )
    with pytest.raises(ParameterError, match="GLM"):
        NoisyRuns([NoisyGD(ModuleModel(mlp(D, 2, (3,))), lr=0.1, clip=1.0, noise_std=1.0)])
    with pytest.raises(ParameterError, match="shape"):
        NoisyRuns(
            [
                NoisyGD(GLM(D, 1, "least-squares"), lr=0.1, clip=1.0, noise_std=1.0),
                NoisyGD(GLM(D + 1, 1, "least-squares"), lr=0.1, clip=1.0, noise_std=1.0),
            ]
        )
    schedule = np.linspace(0.2, 0.1, 5)  # a numpy schedule: compared element by element
    NoisyRuns(
        [
            NoisyGD(GLM(D, 1, "least-squares"), lr=schedule.copy(), clip=1.0, noise_std=1.0)
            for _ in range(2)
        ]
    )
    with pytest.raises(ParameterError, match="lr"):
        NoisyRuns(
            [
                NoisyGD(GLM(D, 1, "least-squares"), lr=lr, clip=1.0, noise_std=1.0)
                for lr in (schedule, schedule[::-1].copy())
            ]
        )
    runs = NoisyRuns([NoisyGD(glm, lr=0.1, clip=1.0, noise_std=1.0)])
    with pytest.raises(ParameterError, match="X"):
        runs.fit(np.full((3, D), np.nan), np.zeros(3), steps=2)
    with pytest.raises(ParameterError, match="epochs"):
        runs.fit(np.zeros((3, D)), np.zeros(3))
