"""lastiterate.opacus: an Opacus run that is exactly the Run the accountant certifies."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pytest
import torch
from opacus import GradSampleModule
from torch.utils.data import DataLoader, TensorDataset

from lastiterate.accountant import account
from lastiterate.errors import NotApplicable, ParameterError
from lastiterate.opacus import (
    COMPOSITION_BOUNDS,
    NOISE_STREAM,
    CompositionOnlyWarning,
    GhostClippingLoss,
    GhostClippingModule,
    LastIterateBatchSampler,
    LastIterateDPOptimizer,
    LastIterateGhostDPOptimizer,
    glm_geometry,
    make_private_last_iterate,
)
from lastiterate.train.randomness import Randomness, SeededRunWarning
from lastiterate.train.sampling import balanced_partition

# Opacus' hooks on a first layer whose input needs no gradient: harmless, and not ours
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook")


def _data(n: int = 60, d: int = 5, k: int = 3, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    y = torch.argmax(X[:, :k], dim=1)
    return TensorDataset(X, y)


def _wire(
    n: int = 60,
    b: int = 10,
    *,
    model: torch.nn.Module | None = None,
    lr: float = 0.5,
    weight_decay: float = 0.01,
    **kw: object,
) -> tuple:
    torch.manual_seed(0)
    model = model if model is not None else torch.nn.Linear(5, 3)
    opt = torch.optim.SGD(model.parameters(), lr=lr, weight_decay=weight_decay)
    args: dict = {
        "target_epsilon": 2.0,
        "target_delta": 1e-5,
        "epochs": 3,
        "max_grad_norm": 2.0,  # >= sqrt(2) R_eff = sqrt(2 (0.5^2 + 1)): the clip is inactive
        "sampling": "cyclic",
        "loss": "cross-entropy",
        "data_norm": 0.5,
        "seed": 7,
    }
    args.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)
        return make_private_last_iterate(model, opt, DataLoader(_data(n), batch_size=b), **args)


def _train(model, opt, loader, epochs: int, loss=torch.nn.functional.cross_entropy) -> int:
    steps = 0
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            loss(model(xb), yb).backward()
            opt.step()
            steps += 1
    return steps


# ------------------------------------------------------------------------------------- samplers
def test_uniform_batches_are_b_distinct_indices_and_epochs_follow_the_run() -> None:
    n, b = 50, 7
    s = LastIterateBatchSampler(n, b, "uniform", seed=3)
    assert s.run_kwargs() == {"algorithm": "sgd", "batch_size": b, "sampling": "uniform"}
    batches, lengths = [], []
    for _ in range(4):
        epoch = list(s)
        lengths.append(len(epoch))
        batches += epoch
    for batch in batches:
        assert len(batch) == b == len(set(batch)) and all(0 <= i < n for i in batch)
    # epoch e ends after ceil(e n / b) steps: 8, 15, 22, 29 (T = ceil(E l), the Run's rule)
    assert np.cumsum(lengths).tolist() == [math.ceil(e * n / b) for e in (1, 2, 3, 4)]
    assert s.steps_for_epochs(4) == len(batches) == 29
    assert len({tuple(x) for x in batches}) > 20  # independent draws
    # every index is equally likely: 29 * 7 draws over 50 indices, each in b/n of the batches
    counts = np.bincount(np.concatenate(batches), minlength=n)
    assert counts.sum() == 29 * b and counts.max() < 15
    # seeded: reproducible; unseeded: fresh secret randomness
    again = LastIterateBatchSampler(n, b, "uniform", seed=3)
    assert [list(again) for _ in range(4)] == [
        batches[0:8],
        batches[8:15],
        batches[15:22],
        batches[22:29],
    ]
    a, c = LastIterateBatchSampler(n, b, "uniform"), LastIterateBatchSampler(n, b, "uniform")
    assert list(a) != list(c)


def test_cyclic_batches_are_one_shuffle_then_the_same_partition_every_epoch() -> None:
    n, b = 10, 4  # l = ceil(10/4) = 3 balanced batches: sizes 4, 3, 3 (b_min = 3)
    s = LastIterateBatchSampler(n, b, "cyclic", seed=1)
    epochs = [list(s) for _ in range(3)]
    assert epochs[0] == epochs[1] == epochs[2]
    assert [len(x) for x in epochs[0]] == [4, 3, 3]
    order = np.concatenate(epochs[0])
    assert sorted(order.tolist()) == list(range(n))
    assert [x.tolist() for x in balanced_partition(order, 3)] == epochs[0]
    assert s.run_kwargs() == {"algorithm": "cgd", "batch_size": b}
    # the shuffle is secret and random: another root gives another order
    others = {
        tuple(np.concatenate(list(LastIterateBatchSampler(n, b, "cyclic")))) for _ in range(5)
    }
    assert len(others) > 1


def test_shuffled_batches_repartition_every_epoch() -> None:
    s = LastIterateBatchSampler(10, 4, "shuffle", seed=2)
    e1, e2 = list(s), list(s)
    for epoch in (e1, e2):
        assert sorted(np.concatenate(epoch).tolist()) == list(range(10))
        assert [len(x) for x in epoch] == [4, 3, 3]
    assert e1 != e2


# ------------------------------------------------------------------------------------- the step
def _per_example_clipped_sum(model, X, y, C):
    """Sum of per-example gradients clipped to C, computed one example at a time (no Opacus)."""
    total = [torch.zeros_like(p) for p in model.parameters()]
    for i in range(len(X)):
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(X[i : i + 1]), y[i : i + 1]).backward()
        g = [p.grad.detach().clone() for p in model.parameters()]
        norm = torch.sqrt(sum((x**2).sum() for x in g))
        f = min(1.0, C / (float(norm) + 1e-6))  # Opacus' clip factor
        total = [t + f * x for t, x in zip(total, g)]
    return total


@pytest.mark.parametrize("mode", ["hooks", "ghost"])
@pytest.mark.parametrize("normaliser", ["fixed", "poisson", "realised"])
def test_one_step_is_the_hand_computed_update(normaliser: str, mode: str) -> None:
    torch.manual_seed(0)
    X, y = _data(12).tensors
    Xb, yb = X[:4], y[:4]
    ref = torch.nn.Linear(5, 3)
    model = torch.nn.Linear(5, 3)
    model.load_state_dict(ref.state_dict())
    x0 = [p.detach().clone() for p in ref.parameters()]
    C, z, lr, l2 = 0.3, 1.7, 0.5, 0.05
    b = 4 if normaliser == "fixed" else 6  # Poisson: the fixed b, not the realised 4
    kw = {
        "noise_multiplier": z,
        "max_grad_norm": C,
        "expected_batch_size": b,
        "normaliser": normaliser,
        "l2": l2,
        "randomness": Randomness.from_seed(5),
        "min_batch_size": 4,
    }
    if mode == "ghost":  # per-example norms only: lastiterate.opacus' grad_sample_mode="ghost"
        gsm = GhostClippingModule(model, max_grad_norm=C)
        sgd = torch.optim.SGD(gsm.parameters(), lr=lr)
        opt = LastIterateGhostDPOptimizer(sgd, module=gsm, **kw)
        loss = GhostClippingLoss(gsm, opt, torch.nn.CrossEntropyLoss())
    else:
        gsm = GradSampleModule(model)
        opt = LastIterateDPOptimizer(torch.optim.SGD(gsm.parameters(), lr=lr), **kw)
        loss = torch.nn.functional.cross_entropy
    opt.zero_grad()
    loss(gsm(Xb), yb).backward()
    opt.step()
    # by hand: x - lr ((1/b_t) sum clip_C(g_i) + Z + l2 x), Z ~ N(0, sigma^2), sigma = z C / b
    b_t = len(Xb) if normaliser == "realised" else b  # realised size for the partitions
    sigma = z * C / b
    numel = sum(p.numel() for p in x0)
    Z = Randomness.from_seed(5).gaussian(NOISE_STREAM, 0, numel, sigma * b_t, torch.float32) / b_t
    assert float(Z.std()) == pytest.approx(sigma, rel=0.25)
    gsum = _per_example_clipped_sum(ref, Xb, yb, C)
    k = 0
    for p, p0, g in zip(gsm.parameters(), x0, gsum):
        expected = p0 - lr * (g / b_t + Z[k : k + p0.numel()].view_as(p0) + l2 * p0)
        k += p0.numel()
        torch.testing.assert_close(p.detach(), expected, rtol=1e-5, atol=1e-6)
    assert opt.noise_std == pytest.approx(sigma)


def test_a_batch_the_accountant_did_not_charge_is_refused() -> None:
    X, y = _data(12).tensors
    gsm = GradSampleModule(torch.nn.Linear(5, 3))
    opt = LastIterateDPOptimizer(
        torch.optim.SGD(gsm.parameters(), lr=0.1),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        expected_batch_size=4,
        randomness=Randomness.from_seed(0),
    )
    torch.nn.functional.cross_entropy(gsm(X[:3]), y[:3]).backward()
    with pytest.raises(ParameterError, match="exactly b=4"):
        opt.step()
    opt.zero_grad()
    for _ in range(2):  # gradient accumulation
        torch.nn.functional.cross_entropy(gsm(X[:4]), y[:4]).backward()
    with pytest.raises(ParameterError, match="accumulated_iterations"):
        opt.step()


# ------------------------------------------------------------------------------------- wiring
# Accounting uniform batches with every bound takes tens of seconds per evaluation (the C_p-based
# Thms 4.8-4.9 and their PLD), so the fast test restricts uniform runs to paper 002's Thm 3.3; the
# slow test below calibrates a uniform run with every bound.
@pytest.mark.parametrize(
    "sampling,bounds",
    [("cyclic", None), ("uniform", ["smooth-bounded-domain"]), ("shuffle", None)],
)
def test_the_accountant_runs_what_the_loader_and_optimizer_do(
    sampling: str, bounds: list[str] | None
) -> None:
    n, b, E = 40, 8, 2
    model, opt, loader, acc = _wire(n, b, sampling=sampling, epochs=E, bounds=bounds)
    planned = acc.planned_run
    steps = _train(model, opt, loader, E)
    assert steps == len(acc) == planned.T == opt.steps_taken
    report = acc.get_report(1e-5)
    assert report is not None, acc.reason  # no fallback: the optimizer is the declared one
    run = report.run
    assert run.setting() == planned.setting()
    assert run.algorithm == ("cgd" if sampling == "cyclic" else "sgd")
    assert run.sampling_scheme == (None if sampling == "cyclic" else sampling)
    assert (run.n, run.b, run.z, run.eta) == (n, b, opt.noise_multiplier, 0.5)
    assert run.sigma == pytest.approx(opt.noise_std, rel=1e-12)
    # the weight decay became the step's l2 term and the certificate's m
    assert opt.l2 == 0.01 and run.m == 0.01
    assert all(g["weight_decay"] == 0.0 for g in opt.param_groups)
    # epsilon: within the target, equal to lastiterate.account of that Run, and tight
    eps = acc.get_epsilon(1e-5)
    assert eps <= 2.0
    assert eps == account(run, delta=1e-5, bounds=bounds).best.epsilon
    assert eps > 2.0 * 0.99
    text = acc.explain()
    assert "Geometry: certified for nn.Linear(5, 3, bias=True) with cross-entropy" in text
    assert "\n" not in text


@pytest.mark.slow
def test_uniform_path_is_calibrated_with_every_bound() -> None:
    model, opt, loader, acc = _wire(40, 8, sampling="uniform", epochs=2)
    _train(model, opt, loader, 2)
    rep = acc.get_report(1e-5)
    assert rep.best.bound == "shifted-interpolation"
    assert rep.best.epsilon <= 2.0 and rep.run.setting() == acc.planned_run.setting()


def test_cyclic_path_uses_a_last_iterate_theorem_and_beats_composition() -> None:
    model, opt, loader, acc = _wire(60, 10, epochs=30, lr=1.0)
    _train(model, opt, loader, 30)
    rep = acc.get_report(1e-5)
    assert rep.best.bound in ("shifted-interpolation", "hidden-state-rdp")
    comp = min(r.epsilon for r in rep.results if r.bound.endswith("composition"))
    assert rep.best.epsilon < comp


def test_training_longer_than_planned_is_charged() -> None:
    model, opt, loader, acc = _wire(40, 8, epochs=2, bounds=["gdp-composition"])
    _train(model, opt, loader, 3)
    assert len(acc) == 15 and acc.get_epsilon(1e-5) > 2.0


@pytest.mark.parametrize("center", ["origin", "init"])
def test_projection_keeps_every_iterate_in_the_ball(center: str) -> None:
    D = 0.2
    torch.manual_seed(1)
    model = torch.nn.Linear(5, 3)
    init = torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])
    model, opt, loader, acc = _wire(40, 8, model=model, diameter=D, center=center, epochs=2)
    c = init if center == "init" else torch.zeros_like(init)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    assert float(torch.linalg.vector_norm(flat - c)) <= D / 2 * (1 + 1e-6)
    dist = []
    for xb, yb in loader:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        dist.append(float(torch.linalg.vector_norm(flat - c)))
    assert max(dist) <= D / 2 * (1 + 1e-6)
    assert max(dist) > D / 2 * 0.99  # the constraint is active: the test can fail
    assert acc.get_report(1e-5).run.D == D


def test_rows_are_clipped_to_data_norm_inside_the_loader() -> None:
    _, _, loader, _ = _wire(40, 8, data_norm=0.25)
    for xb, _ in loader:
        assert float(xb.norm(dim=1).max()) <= 0.25 * (1 + 1e-6)


def test_seeded_runs_reproduce_and_warn_unseeded_runs_differ() -> None:
    def final(seed: int | None) -> torch.Tensor:
        model, opt, loader, _ = _wire(40, 8, seed=seed, bounds=["gdp-composition"])
        _train(model, opt, loader, 3)
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    torch.testing.assert_close(final(3), final(3))
    assert not torch.equal(final(None), final(None))
    with pytest.warns(SeededRunWarning):
        _seeded_call()


def test_secure_mode_and_a_changed_learning_rate_is_reported() -> None:
    model, opt, loader, acc = _wire(40, 8, seed=None, secure=True, bounds=["gdp-composition"])
    assert opt.randomness.secure and "(secure CSPRNG)" in acc.explain()
    _train(model, opt, loader, 1)
    assert acc.get_report(1e-5) is not None
    for g in opt.param_groups:  # a scheduler changed the step size: not the accounted run
        g["lr"] = 0.25
    _train(model, opt, loader, 1)
    assert acc.get_report(1e-5) is None
    assert "learning rate" in acc.reason and "Fallback" in acc.explain()


def _seeded_call() -> None:
    model = torch.nn.Linear(5, 3)
    make_private_last_iterate(
        model,
        torch.optim.SGD(model.parameters(), lr=0.1),
        DataLoader(_data(40), batch_size=8),
        target_epsilon=2.0,
        target_delta=1e-5,
        epochs=1,
        max_grad_norm=2.0,
        sampling="cyclic",
        loss="cross-entropy",
        data_norm=0.5,
        seed=1,
    )


# ------------------------------------------------------------------------------------- geometry
def test_a_model_without_certified_geometry_is_refused_with_one_line() -> None:
    mlp = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    with pytest.raises(NotApplicable) as info:
        _wire(model=mlp)
    msg = str(info.value)
    assert "not a GLM" in msg and "declare" in msg and "\n" not in msg


def test_a_declared_geometry_is_used_and_labelled_user_declared() -> None:
    mlp = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    model, opt, loader, acc = _wire(
        model=mlp, loss=None, data_norm=None, strong_convexity=0.01, smoothness=1.0
    )
    _train(model, opt, loader, 3)
    assert acc.get_report(1e-5).run.m == 0.01
    assert "USER-DECLARED" in acc.explain() and "not derived or verified" in acc.explain()


def test_glm_in_sequential_with_flatten_is_certified() -> None:
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(5, 3, bias=False))
    *_, acc = _wire(model=model)
    assert acc.geometry.source == "certified"
    # no intercept: m = lambda, M = R^2/2 + lambda (multinomial logistic)
    assert acc.planned_run.M == pytest.approx(0.5**2 / 2 + 0.01)


@pytest.mark.parametrize(
    "loss,out,bias",
    [("mse", 1, True), ("mse", 1, False), ("bce-with-logits", 1, True), ("cross-entropy", 2, True)],
)
def test_glm_smoothness_bounds_the_true_hessian(loss: str, out: int, bias: bool) -> None:
    """M of the certificate against the Hessian of the torch loss itself (an independent check
    of the constants, including MSE's factor 2): never below, and attained up to 10%."""
    R, l2 = 0.8, 0.0
    lin = torch.nn.Linear(6, out, bias=bias)
    geo = glm_geometry(lin, loss=loss, data_norm=R, l2=l2, clip=100.0, lr=0.01)
    M = geo.run_kwargs["smoothness"]
    crit = {
        "mse": torch.nn.MSELoss(),
        "bce-with-logits": torch.nn.BCEWithLogitsLoss(),
        "cross-entropy": torch.nn.CrossEntropyLoss(),
    }[loss]
    worst = 0.0
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        x = torch.randn(1, 6, generator=g)
        x = x / x.norm() * R
        w0 = torch.zeros(out * 6 + (out if bias else 0)) + 0.0 * torch.randn(1, generator=g)
        y = torch.tensor([1]) if loss == "cross-entropy" else torch.tensor([[1.0]])

        def f(w: torch.Tensor, x=x, y=y) -> torch.Tensor:
            W = w[: out * 6].view(out, 6)
            u = x @ W.T + (w[out * 6 :] if bias else 0)
            return crit(u, y)

        H = torch.autograd.functional.hessian(f, w0)
        worst = max(worst, float(torch.linalg.eigvalsh(H).max()))
    assert worst <= M * (1 + 1e-6)
    assert worst >= 0.9 * M


def test_softmax_certificate_leaves_room_for_opacus_clip_factor() -> None:
    """Opacus scales by C / (||g|| + 1e-6): a clip equal to sup ||g|| = sqrt(2) R can still act
    (on gradients within 1e-6 of it), which breaks the softmax certificate; 2e-6 more is enough."""
    lin = torch.nn.Linear(6, 3, bias=False)
    R = 0.5
    G = math.sqrt(2.0) * R
    kw = {"loss": "cross-entropy", "data_norm": R, "l2": 0.01, "lr": 0.5}
    with pytest.raises(NotApplicable, match="clip can be active"):
        glm_geometry(lin, clip=G * (1 + 1e-9), **kw)
    geo = glm_geometry(lin, clip=G + 2e-6, **kw)
    assert geo.run_kwargs == {
        "strong_convexity": 0.01,
        "smoothness": pytest.approx(R**2 / 2 + 0.01),
    }


def test_mse_and_bce_glms_are_wired() -> None:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 5, generator=g)
    for loss, y, fn in [
        ("mse", X[:, :1].clone(), torch.nn.functional.mse_loss),
        (
            torch.nn.BCEWithLogitsLoss(),
            (X[:, :1] > 0).float(),
            torch.nn.functional.binary_cross_entropy_with_logits,
        ),
    ]:
        model = torch.nn.Linear(5, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.2, weight_decay=0.01)
        model, opt, loader, acc = make_private_last_iterate(
            model,
            opt,
            DataLoader(TensorDataset(X, y), batch_size=8),
            target_epsilon=4.0,
            target_delta=1e-5,
            epochs=2,
            max_grad_norm=1.0,
            sampling="cyclic",
            loss=loss,
            data_norm=1.0,
        )
        _train(model, opt, loader, 2, loss=fn)
        assert acc.get_epsilon(1e-5) <= 4.0 and acc.last_report is not None


@pytest.mark.parametrize(
    "change,error,match",
    [
        ({"adjacency": "add-remove"}, ParameterError, "add-remove adjacency is supported only"),
        ({"sampling": "bernoulli"}, ParameterError, "sampling"),
        ({"accounting": "composition"}, ParameterError, "accounting"),
        ({"data_norm": None}, ParameterError, "data_norm"),
        ({"loss": None}, ParameterError, "loss"),
        ({"loss": "hinge"}, ParameterError, "loss"),
        ({"loss": torch.nn.CrossEntropyLoss(label_smoothing=0.1)}, ParameterError, "plain"),
        ({"lr": 100.0, "accounting": "last-iterate"}, NotApplicable, "lr=100 > 2/M"),
        ({"max_grad_norm": 0.1, "accounting": "last-iterate"}, NotApplicable, "clip can be"),
        ({"target_epsilon": -1}, ParameterError, "target_epsilon"),
        ({"epochs": 0}, ParameterError, "epochs"),
        ({"center": "middle"}, ParameterError, "center"),
        ({"momentum": 0.9}, ParameterError, "momentum"),
        ({"adam": True}, ParameterError, "torch.optim.SGD"),
        # the ghost mode (tests/train/test_opacus_ghost.py)
        ({"grad_sample_mode": "functorch"}, ParameterError, "grad_sample_mode"),
        (
            {"grad_sample_mode": "ghost"},
            ParameterError,
            "criterion=None is invalid: must be a torch loss module",
        ),
        (
            {"criterion": torch.nn.CrossEntropyLoss()},
            ParameterError,
            "only used with grad_sample_mode='ghost'",
        ),
        (
            {"grad_sample_mode": "ghost", "criterion": torch.nn.CrossEntropyLoss(reduction="sum")},
            ParameterError,
            "reduction='mean'",
        ),
        (
            {"grad_sample_mode": "ghost", "criterion": torch.nn.MSELoss()},
            ParameterError,
            "loss='cross-entropy' is invalid: must name the criterion's loss",
        ),
        (
            {"grad_sample_mode": "ghost", "criterion": torch.nn.L1Loss(), "loss": None},
            ParameterError,
            "loss='L1Loss' is invalid: must be nn.CrossEntropyLoss",
        ),
        (
            {"grad_sample_mode": "ghost", "criterion": torch.nn.CrossEntropyLoss(), "gsm": True},
            ParameterError,
            "must be the plain model",
        ),
    ],
)
def test_bad_input_is_one_line(change: dict, error: type, match: str) -> None:
    kw = dict(change)
    lr = kw.pop("lr", 0.5)
    momentum = kw.pop("momentum", 0.0)
    adam = kw.pop("adam", False)
    model: torch.nn.Module = torch.nn.Linear(5, 3)
    if kw.pop("gsm", False):  # already wrapped for per-example gradients
        model = GradSampleModule(model)
    opt = (
        torch.optim.Adam(model.parameters(), lr=lr)
        if adam
        else torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    )
    args = {
        "target_epsilon": 2.0,
        "target_delta": 1e-5,
        "epochs": 2,
        "max_grad_norm": 2.0,
        "sampling": "cyclic",
        "loss": "cross-entropy",
        "data_norm": 0.5,
    }
    args.update(kw)
    with pytest.raises(error, match=match) as info:
        make_private_last_iterate(model, opt, DataLoader(_data(40), batch_size=8), **args)
    assert "\n" not in str(info.value)


def test_old_import_path_still_works() -> None:
    from lastiterate.opacus import LastIterateAccountant as A
    from lastiterate.train import LastIterateAccountant as B
    from lastiterate.train.opacus_accountant import LastIterateAccountant as C

    assert A is B is C


# ------------------------------------------------------------------------------------- digits
def _digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = X / 16.0  # the public pixel range 0-16: no privacy cost
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    f = torch.float32
    return (
        TensorDataset(torch.tensor(Xtr, dtype=f), torch.tensor(ytr)),
        torch.tensor(Xte, dtype=f),
        torch.tensor(yte),
    )


def _accuracy(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(X).argmax(1) == y).float().mean())


def test_digits_beside_stock_opacus_at_the_same_target_epsilon() -> None:
    from opacus import PrivacyEngine

    from lastiterate.train.trainer import clip_rows

    train, Xte, yte = _digits()
    eps, delta, R = 2.0, 1e-5, 0.7071
    t0 = time.perf_counter()
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 10, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=4.0, weight_decay=0.005)
    model, opt, loader, acc = make_private_last_iterate(
        model,
        opt,
        DataLoader(train, batch_size=256),
        target_epsilon=eps,
        target_delta=delta,
        epochs=50,
        max_grad_norm=1.0,
        sampling="cyclic",
        loss="cross-entropy",
        data_norm=R,
    )
    _train(model, opt, loader, 50)
    ours = _accuracy(model, clip_rows(Xte, R), yte)
    ours_eps = acc.get_epsilon(delta)

    torch.manual_seed(0)
    stock = torch.nn.Linear(64, 10)
    engine = PrivacyEngine()
    stock, sopt, sloader = engine.make_private_with_epsilon(
        module=stock,
        optimizer=torch.optim.SGD(stock.parameters(), lr=2.0),
        data_loader=DataLoader(train, batch_size=64),
        target_epsilon=eps,
        target_delta=delta,
        epochs=10,
        max_grad_norm=1.0,
    )
    _train(stock, sopt, sloader, 10)
    theirs = _accuracy(stock, Xte, yte)
    theirs_eps = engine.get_epsilon(delta)
    elapsed = time.perf_counter() - t0

    assert ours_eps <= eps and theirs_eps <= eps * 1.01
    assert acc.get_report(delta).best.bound == "shifted-interpolation"
    # both train: well above the 0.1 of chance (who wins is not asserted)
    assert ours > 0.6 and theirs > 0.6, (ours, theirs)
    assert elapsed < 60


# ------------------------------------------------------------------- a failed GLM certificate
def _dp_accounting_epsilon(event: object, count: int, delta: float, relation: str) -> float:
    """Epsilon of ``count`` compositions of ``event`` from dp_accounting's PLD accountant (an
    independent implementation; pessimistic discretisation, so slightly above the exact value)."""
    import dp_accounting
    from dp_accounting.pld import PLDAccountant

    rel = getattr(dp_accounting.NeighboringRelation, relation)
    acc = PLDAccountant(neighboring_relation=rel, value_discretization_interval=1e-4)
    acc.compose(dp_accounting.SelfComposedDpEvent(event, count))
    return float(acc.get_epsilon(delta))


def test_multinomial_clip_that_can_be_active_is_wired_for_composition_and_said() -> None:
    """The estimator's early-stopping clip (C < sqrt(2) R_eff): no geometry, composition only,
    with a one-line warning and the reason in explain(); the epsilon is the Gaussian composition
    of the realised cyclic run, checked against dp_accounting."""
    import dp_accounting

    n, b, E, C = 60, 10, 3, 0.3  # sqrt(2) R_eff = sqrt(2 (0.5^2 + 1)) = 1.58 > C
    with pytest.warns(CompositionOnlyWarning) as record:
        model, opt, loader, acc = _wire(n, b, epochs=E, max_grad_norm=C)
    (w,) = [r for r in record if r.category is CompositionOnlyWarning]
    line = str(w.message)
    assert "\n" not in line and "certificate failed" in line and "clip can be active" in line
    assert "only composition applies" in line and "sqrt(2) R_eff" in line
    planned = acc.planned_run
    assert planned.m is None and planned.M is None and not planned.setting().get("convex")
    assert acc.geometry.source == "composition"
    steps = _train(model, opt, loader, E)
    assert steps == planned.T == 18
    rep = acc.get_report(1e-5)
    assert rep is not None, acc.reason  # lastiterate's accounting, not Opacus' fallback
    assert rep.best.bound in COMPOSITION_BOUNDS
    assert {r.bound for r in rep.results} <= set(COMPOSITION_BOUNDS) | {"clt"}
    eps = acc.get_epsilon(1e-5)
    assert 2.0 * 0.99 < eps <= 2.0
    # independent: every example is in one batch per epoch (cyclic), so E Gaussian steps of
    # replace-one sensitivity 2C / b_min over noise sigma; dp_accounting's GaussianDpEvent has
    # sensitivity 1, so its noise multiplier is sigma b_min / (2C)
    z_eff = planned.sigma * planned.b_min / (2 * C)
    ref = _dp_accounting_epsilon(dp_accounting.GaussianDpEvent(z_eff), E, 1e-5, "REPLACE_SPECIAL")
    assert eps == pytest.approx(ref, rel=0.01)
    text = acc.explain()
    assert "\n" not in text and "Geometry: NONE" in text and "certificate failed" in text
    assert "only composition applies" in text and "last-iterate accounting back" in text


def test_composition_fallback_needs_no_raised_clip_and_last_iterate_mode_refuses() -> None:
    # lr >= 2/M: the certificate fails too; "auto" accounts by composition, "last-iterate" refuses
    with pytest.warns(CompositionOnlyWarning, match="2/M"):
        *_, acc = _wire(40, 8, lr=100.0, bounds=None)
    assert acc.planned_run.M is None
    with pytest.raises(NotApplicable, match="clip can be active") as info:
        _wire(40, 8, max_grad_norm=0.3, accounting="last-iterate")
    assert "\n" not in str(info.value)
    with pytest.raises(NotApplicable, match="only composition applies, and bounds="):
        _wire(40, 8, max_grad_norm=0.3, bounds=["shifted-interpolation"])


def test_a_non_glm_is_still_refused_under_auto() -> None:
    mlp = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    with pytest.raises(NotApplicable, match="not a GLM"):
        _wire(model=mlp, accounting="auto")


# ------------------------------------------------------------------- Poisson, add/remove
def _poisson_data(n: int, d: int = 5, k: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(4)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    X = 0.5 * X / X.norm(dim=1, keepdim=True).clamp(min=1.0)  # ||x|| <= 0.5: no row clipping
    return X, torch.argmax(X[:, :k], dim=1)


def test_full_batch_under_add_remove_is_the_trainers_poisson_rate_one_run() -> None:
    """sampling="poisson" with b = n: the same Run as NoisySGD(sampling="poisson", batch_size=n),
    the same trained parameters for the same seed, and the epsilon of dp_accounting's
    Poisson-sampled Gaussian (rate 1) under add/remove."""
    import dp_accounting

    from lastiterate.train.models import GLM
    from lastiterate.train.trainer import NoisySGD

    n, T, C, lr, l2, seed = 50, 6, 2.0, 0.5, 0.01, 11
    X, y = _poisson_data(n)
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3, dtype=torch.float64)
    with torch.no_grad():  # x_0 = 0, as the trainer's GLM
        model.weight.zero_()
        model.bias.zero_()
    opt = torch.optim.SGD(model.parameters(), lr=lr, weight_decay=l2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)
        model, opt, loader, acc = make_private_last_iterate(
            model,
            opt,
            DataLoader(TensorDataset(X, y), batch_size=n),
            target_epsilon=2.0,
            target_delta=1e-5,
            epochs=T,
            max_grad_norm=C,
            sampling="poisson",
            adjacency="add-remove",
            loss="cross-entropy",
            data_norm=0.5,
            seed=seed,
        )
    sizes = []
    for _ in range(T):
        for xb, yb in loader:
            sizes.append(len(xb))
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    assert sizes == [n] * T  # rate 1: every row at every step
    rep = acc.get_report(1e-5)
    run = rep.run
    assert (run.algorithm, run.sampling_scheme, run.b, run.adjacency) == (
        "sgd",
        "poisson",
        n,
        "add-remove",
    )
    assert run.setting() == acc.planned_run.setting()
    # the trainer's run of the same declaration, trained with the same seed
    glm = GLM(5, 3, "multinomial-logistic", intercept=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)
        trainer = NoisySGD(
            glm,
            batch_size=n,
            sampling="poisson",
            lr=lr,
            clip=C,
            noise_multiplier=opt.noise_multiplier,
            l2=l2,
            feature_norm=0.5,
            seed=seed,
            adjacency="add-remove",
        )
        result = trainer.fit(X, y, steps=T, account=False)
    assert result.run.setting() == run.setting()
    torch.testing.assert_close(model._module.weight.detach(), glm.weight, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(model._module.bias.detach(), glm.bias, rtol=1e-9, atol=1e-12)
    # epsilon: dp_accounting, Poisson-sampled Gaussian at rate 1, add/remove, T steps
    eps = acc.get_epsilon(1e-5)
    gaussian = dp_accounting.GaussianDpEvent(opt.noise_multiplier)
    ref = _dp_accounting_epsilon(
        dp_accounting.PoissonSampledDpEvent(1.0, gaussian), T, 1e-5, "ADD_OR_REMOVE_ONE"
    )
    assert 2.0 * 0.99 < eps <= 2.0
    assert eps == pytest.approx(ref, rel=0.01)


def test_poisson_batches_at_a_lower_rate_are_normalised_by_b_and_accounted() -> None:
    """Rate b/n < 1: batches of varying size (empty ones included) over the fixed b, the
    worst-case-batch certificate M = (n/b) beta + lambda, and dp_accounting's epsilon."""
    import dp_accounting

    n, b, E = 40, 2, 2  # P(empty batch) = (1 - 1/20)^40 ~ 0.13 per step, 40 steps
    X, y = _poisson_data(n)
    model = torch.nn.Linear(5, 3, dtype=torch.float64)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, weight_decay=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)
        model, opt, loader, acc = make_private_last_iterate(
            model,
            opt,
            DataLoader(TensorDataset(X, y), batch_size=b),
            target_epsilon=4.0,
            target_delta=1e-5,
            epochs=E,
            max_grad_norm=2.0,
            sampling="poisson",
            adjacency="add-remove",
            loss="cross-entropy",
            data_norm=0.5,
            seed=3,
        )
    planned = acc.planned_run
    assert planned.T == E * n // b == 40
    # the certificate's worst case: M = (n/b) * R_eff^2 / 2 + lambda
    assert planned.M == pytest.approx((n / b) * (0.5**2 + 1) / 2 + 0.01)
    sizes = []
    for _ in range(E):
        for xb, yb in loader:
            sizes.append(len(xb))
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            before = [p.detach().clone() for p in model.parameters()]
            opt.step()
            assert all(torch.isfinite(p).all() for p in model.parameters())
            assert opt._b_t == b  # the fixed b, whatever the realised size
            if len(xb) == 0:  # a pure-noise step (plus the l2 term): parameters still move
                assert any(not torch.equal(p, q) for p, q in zip(model.parameters(), before))
    assert len(sizes) == 40 and 0 in sizes and len(set(sizes)) > 2
    eps = acc.get_epsilon(1e-5)
    gaussian = dp_accounting.GaussianDpEvent(opt.noise_multiplier)
    ref = _dp_accounting_epsilon(
        dp_accounting.PoissonSampledDpEvent(b / n, gaussian), planned.T, 1e-5, "ADD_OR_REMOVE_ONE"
    )
    assert eps <= 4.0 and eps == pytest.approx(ref, rel=0.03)
