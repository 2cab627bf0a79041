"""The Opacus adapter: Opacus' own RDP value without geometry, lastiterate's bounds with it."""

from __future__ import annotations

import warnings

import pytest
import torch
from opacus.accountants import RDPAccountant
from opacus.accountants.accountant import IAccountant

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
    kw = {"n": n, "batch_size": b, "lr": lr, "clip": 1.0, "strong_convexity": 0.05, "smoothness": 1.0, "sampling": "uniform"}
    acc = LastIterateAccountant(**kw)
    for _ in range(400):
        acc.step(noise_multiplier=z, sample_rate=b / n)
    eps = acc.get_epsilon(1e-5)
    run = Run(algorithm="sgd", sampling="uniform", n=n, batch_size=b, lr=lr, steps=400, noise_multiplier=z, clip=1.0,
              strong_convexity=0.05, smoothness=1.0)
    rep = account(run, delta=1e-5)
    assert eps == rep.best.epsilon
    assert acc.get_report(1e-5).best.bound == rep.best.bound
    # never worse than composition under the same adjacency
    comp = min(r.epsilon for r in rep.results if r.bound.endswith("composition") and r.kind == "bound")
    assert eps <= comp


def test_falls_back_when_the_history_does_not_match():
    acc = LastIterateAccountant(n=1000, batch_size=64, lr=0.1, clip=1.0, strong_convexity=0.1, smoothness=1.0)
    for _ in range(10):
        acc.step(noise_multiplier=1.0, sample_rate=1 / 16)  # make_private's 1/len(loader) != 64/1000
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
    model, opt, loader = engine.make_private(module=model, optimizer=opt, data_loader=DataLoader(TensorDataset(X, y), batch_size=b),
                                             noise_multiplier=1.0, max_grad_norm=1.0)
    for xb, yb in loader:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
    assert len(engine.accountant) == len(loader) == 10
    ref = RDPAccountant()
    ref.history = [(1.0, b / n, 10)]
    assert engine.get_epsilon(1e-5) == ref.get_epsilon(1e-5)
