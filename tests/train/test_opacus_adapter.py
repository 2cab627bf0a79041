"""The Opacus adapter: Opacus' own RDP value without geometry, lastiterate's bounds with it."""

from __future__ import annotations

import warnings

import pytest
import torch
from opacus.accountants import RDPAccountant
from opacus.accountants.accountant import IAccountant
from torch.utils.data import DataLoader, TensorDataset

from lastiterate.accountant import account
from lastiterate.run import Run
from lastiterate.train.opacus_accountant import LastIterateAccountant


@pytest.mark.parametrize("z,q,steps", [(1.1, 0.01, 1000), (0.8, 256 / 60000, 5000), (2.0, 0.1, 37)])
def test_matches_opacus_rdp_without_geometry(z, q, steps):
    n = 60000
    b = round(q * n)
    acc = LastIterateAccountant(n=n, batch_size=b, lr=0.1, clip=1.0)
    ref = RDPAccountant()
    for _ in range(steps):
        acc.step(noise_multiplier=z, sample_rate=q)
        ref.step(noise_multiplier=z, sample_rate=q)
    assert isinstance(acc, IAccountant) and len(acc) == steps
    for delta in (1e-5, 1e-7):
        assert acc.get_epsilon(delta) == ref.get_epsilon(delta)
    assert "no geometry declared" in acc.reason
    assert acc.mechanism() == "lastiterate"


def test_with_geometry_uses_the_accountant():
    n, b, z, lr = 1000, 50, 2.0, 0.5
    kw = {
        "n": n,
        "batch_size": b,
        "lr": lr,
        "clip": 1.0,
        "strong_convexity": 0.05,
        "smoothness": 1.0,
        "sampling": "uniform",
    }
    acc = LastIterateAccountant(**kw)
    for _ in range(400):
        acc.step(noise_multiplier=z, sample_rate=b / n)
    eps = acc.get_epsilon(1e-5)
    run = Run(
        algorithm="sgd",
        sampling="uniform",
        n=n,
        batch_size=b,
        lr=lr,
        steps=400,
        noise_multiplier=z,
        clip=1.0,
        strong_convexity=0.05,
        smoothness=1.0,
    )
    rep = account(run, delta=1e-5)
    assert eps == rep.best.epsilon
    assert acc.get_report(1e-5).best.bound == rep.best.bound
    # never worse than composition under the same adjacency
    comp = min(
        r.epsilon for r in rep.results if r.bound.endswith("composition") and r.kind == "bound"
    )
    assert eps <= comp


def test_falls_back_when_the_history_does_not_match():
    acc = LastIterateAccountant(
        n=1000, batch_size=64, lr=0.1, clip=1.0, strong_convexity=0.1, smoothness=1.0
    )
    for _ in range(10):
        acc.step(
            noise_multiplier=1.0, sample_rate=1 / 16
        )  # make_private's 1/len(loader) != 64/1000
    ref = RDPAccountant()
    ref.history = [(1.0, 1 / 16, 10)]
    assert acc.get_epsilon(1e-5) == ref.get_epsilon(1e-5)
    assert "differs from batch_size/n" in acc.reason
    acc.step(noise_multiplier=2.0, sample_rate=1 / 16)
    acc.get_epsilon(1e-5)
    assert "changed" in acc.reason and len(acc) == 11


def test_state_dict_roundtrip():
    acc = LastIterateAccountant(n=100, batch_size=10, lr=0.1, clip=1.0)
    for _ in range(5):
        acc.step(noise_multiplier=1.0, sample_rate=0.1)
    sd = acc.state_dict()
    other = LastIterateAccountant(n=100, batch_size=10, lr=0.1, clip=1.0)
    other.load_state_dict(sd)
    assert other.get_epsilon(1e-5) == acc.get_epsilon(1e-5) and len(other) == 5
    with pytest.raises(ValueError):
        LastIterateAccountant(n=100, batch_size=20, lr=0.1, clip=1.0).load_state_dict(sd)


def test_inside_privacy_engine():
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    warnings.filterwarnings("ignore")
    g = torch.Generator().manual_seed(0)
    n, b = 200, 20
    X = torch.randn(n, 4, generator=g)
    y = (X[:, 0] > 0).long()
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = PrivacyEngine(accountant="rdp")
    engine.accountant = LastIterateAccountant(n=n, batch_size=b, lr=0.1, clip=1.0)
    model, opt, loader = engine.make_private(
        module=model,
        optimizer=opt,
        data_loader=DataLoader(TensorDataset(X, y), batch_size=b),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
    )
    for xb, yb in loader:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
    assert len(engine.accountant) == len(loader) == 10
    ref = RDPAccountant()
    ref.history = [(1.0, b / n, 10)]
    assert engine.get_epsilon(1e-5) == ref.get_epsilon(1e-5)


# ----------------------------------------------------------------------
# calibration and explanations
def _private_setup(
    n: int = 200, b: int = 20, seed: int = 0
) -> tuple[torch.nn.Module, torch.optim.Optimizer, DataLoader]:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 4, generator=g)
    y = (X[:, 0] > 0).long()
    model = torch.nn.Linear(4, 2)
    return (
        model,
        torch.optim.SGD(model.parameters(), lr=0.1),
        DataLoader(TensorDataset(X, y), batch_size=b),
    )


def _train(
    model: torch.nn.Module, opt: torch.optim.Optimizer, loader: DataLoader, epochs: int
) -> None:
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()


def test_make_private_with_epsilon_calibrates_with_the_same_bounds() -> None:
    """Opacus raised "Unexpected accounting mechanism: lastiterate" here; now the noise multiplier
    is calibrated with exactly the bounds get_epsilon uses, and the trained run meets the target."""
    from opacus import PrivacyEngine

    warnings.filterwarnings("ignore")
    n, b, lr, target, delta, epochs = 200, 20, 0.1, 3.0, 1e-5, 2
    model, opt, loader = _private_setup(n, b)
    engine = PrivacyEngine(accountant="rdp")
    engine.accountant = LastIterateAccountant(
        n=n, batch_size=b, lr=lr, clip=1.0, strong_convexity=0.01, smoothness=0.5
    )
    model, opt, loader = engine.make_private_with_epsilon(
        module=model,
        optimizer=opt,
        data_loader=loader,
        target_epsilon=target,
        target_delta=delta,
        epochs=epochs,
        max_grad_norm=1.0,
    )
    z = opt.noise_multiplier
    _train(model, opt, loader, epochs)
    eps = engine.get_epsilon(delta)
    assert len(engine.accountant) == epochs * n // b
    assert (
        target - 0.05 <= eps <= target
    )  # bisection tolerance of Opacus' get_noise_multiplier is 0.01
    run = Run(
        algorithm="sgd",
        sampling="poisson",
        n=n,
        batch_size=b,
        lr=lr,
        steps=epochs * n // b,
        noise_multiplier=z,
        clip=1.0,
        strong_convexity=0.01,
        smoothness=0.5,
    )
    assert eps == account(run, delta=delta).best.epsilon
    # Poisson batches: no last-iterate theorem applies; the explanation says it is
    # composition, and why
    text = engine.accountant.explain()
    assert "composition" in text and "replace adjacency" in text and "sampling=poisson" in text
    assert (
        engine.accountant.last_report is not None
        and engine.accountant.observed["max_grad_norm"] == 1.0
    )


def test_calibration_uses_the_last_iterate_bound() -> None:
    """With a geometry and uniform batches the calibrated noise comes from a last-iterate theorem,
    which needs less noise than composition for the same target."""
    from opacus.accountants import create_accountant
    from opacus.accountants.utils import get_noise_multiplier

    n, b, T, target = 1000, 50, 4000, 3.0
    kw = {
        "n": n,
        "batch_size": b,
        "lr": 0.5,
        "clip": 1.0,
        "strong_convexity": 0.05,
        "smoothness": 1.0,
        "sampling": "uniform",
    }
    acc = LastIterateAccountant(**kw)
    assert type(create_accountant(acc.mechanism())) is LastIterateAccountant
    z = get_noise_multiplier(
        target_epsilon=target,
        target_delta=1e-5,
        sample_rate=b / n,
        steps=T,
        accountant=acc.mechanism(),
    )
    acc.history = [(z, b / n, T)]
    assert target - 0.05 <= acc.get_epsilon(1e-5) <= target
    assert (
        acc.last_report.best.bound == "shifted-interpolation"
        and "shifted-interpolation" in acc.explain()
    )
    comp = LastIterateAccountant(**kw, bounds=["pld-composition"])
    z_comp = get_noise_multiplier(
        target_epsilon=target,
        target_delta=1e-5,
        sample_rate=b / n,
        steps=T,
        accountant=comp.mechanism(),
    )
    assert z < z_comp


def test_the_registered_name_needs_a_declaration() -> None:
    import threading

    from opacus.accountants import create_accountant

    from lastiterate.errors import ParameterError

    errors: list[Exception] = []

    def fresh_thread() -> None:  # nothing staged in this thread
        try:
            create_accountant("lastiterate")
        except ParameterError as e:
            errors.append(e)

    t = threading.Thread(target=fresh_thread)
    t.start()
    t.join()
    assert len(errors) == 1 and "declaration" in str(errors[0])
    assert LastIterateAccountant.mechanism() == "lastiterate"


def test_explain_says_when_it_falls_back_and_changes_adjacency() -> None:
    acc = LastIterateAccountant(n=1000, batch_size=10, lr=0.1, clip=1.0)
    assert acc.explain() == "No steps yet: epsilon is 0."
    for _ in range(5):
        acc.step(noise_multiplier=1.0, sample_rate=0.01)
    acc.get_epsilon(1e-5)
    text = acc.explain()
    assert (
        "no geometry declared" in text
        and "NOT the declared replace adjacency" in text
        and acc.last_report is None
    )
    ar = LastIterateAccountant(n=1000, batch_size=10, lr=0.1, clip=1.0, adjacency="add-remove")
    ar.history = list(acc.history)
    ar.get_epsilon(1e-5)
    assert "no geometry declared" in ar.explain() and "NOT the declared" not in ar.explain()
    geo = LastIterateAccountant(
        n=1000, batch_size=10, lr=0.1, clip=1.0, convex=True, smoothness=1.0
    )
    geo.history = [(1.0, 0.01, 3), (2.0, 0.01, 3)]
    geo.get_epsilon(1e-5)
    assert "changed during training" in geo.explain()


@pytest.mark.parametrize("change", ["clip", "momentum"])
def test_falls_back_when_the_optimizer_is_not_the_declared_run(change: str) -> None:
    """The declaration says clip 1 and plain SGD; an optimizer that clips at 2 or uses momentum runs
    another algorithm, so the geometry-based bounds are not used (and explain() says why)."""
    from opacus import PrivacyEngine

    warnings.filterwarnings("ignore")
    n, b = 200, 20
    model, _, loader = _private_setup(n, b)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9 if change == "momentum" else 0.0)
    engine = PrivacyEngine(accountant="rdp")
    engine.accountant = LastIterateAccountant(
        n=n, batch_size=b, lr=0.1, clip=1.0, strong_convexity=0.01, smoothness=0.5
    )
    model, opt, loader = engine.make_private(
        module=model,
        optimizer=opt,
        data_loader=loader,
        noise_multiplier=1.0,
        max_grad_norm=2.0 if change == "clip" else 1.0,
    )
    _train(model, opt, loader, 1)
    ref = RDPAccountant()
    ref.history = [(1.0, b / n, n // b)]
    assert engine.get_epsilon(1e-5) == ref.get_epsilon(1e-5)
    assert (
        "max_grad_norm=2" if change == "clip" else "momentum=0.9"
    ) in engine.accountant.explain()
