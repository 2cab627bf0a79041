"""lastiterate.opacus, grad_sample_mode="ghost": Opacus' ghost clipping runs exactly the step of
the default mode (the Run the accountant charges), without per-example gradients.  The one-step
update by hand, in both modes: tests/train/test_opacus_path.py."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from lastiterate.errors import ParameterError
from lastiterate.opacus import (
    CompositionOnlyWarning,
    GhostClippingLoss,
    GhostClippingModule,
    LastIterateGhostDPOptimizer,
    make_private_last_iterate,
)
from lastiterate.train.randomness import SeededRunWarning

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook")

#: (criterion, out_features): binary and multinomial logistic GLMs, and least squares with two
#: outputs (whose per-example loss is the mean over the outputs, as nn.MSELoss's "mean")
FAMILIES = {
    "binary": (torch.nn.BCEWithLogitsLoss, 1),
    "multinomial": (torch.nn.CrossEntropyLoss, 3),
    "least-squares": (torch.nn.MSELoss, 2),
}

#: accounting restricted where every bound would take tens of seconds (uniform batches)
BOUNDS = {
    "cyclic": None,
    "uniform": ["smooth-bounded-domain", "gdp-composition"],
    "poisson": None,
}


def _data(n: int, family: str) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 5, generator=g)
    if family == "binary":
        return TensorDataset(X, (X[:, :1] > 0).float())
    if family == "least-squares":
        return TensorDataset(X, X[:, :2] + 0.1)
    return TensorDataset(X, torch.argmax(X[:, :3], dim=1))


def _wire(mode: str, family: str, sampling: str, *, n: int = 40, b: int = 8, **kw: object):
    """The same declaration wired in ``mode``; returns (module, optimizer, loss, loader, acc)."""
    criterion, out = FAMILIES[family]
    torch.manual_seed(0)
    model = torch.nn.Linear(5, out)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, weight_decay=float(kw.pop("l2", 0.0)))
    args: dict = {
        "target_epsilon": 2.0,
        "target_delta": 1e-5,
        "epochs": 3,
        "max_grad_norm": 0.3,  # active: rows of norm 1 give gradients above 0.3
        "sampling": sampling,
        "data_norm": 1.0,
        "seed": 7,
        "bounds": BOUNDS[sampling],
        **kw,
    }
    loader = DataLoader(_data(n, family), batch_size=b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)
        warnings.simplefilter("ignore", CompositionOnlyWarning)  # the active softmax clip
        if mode == "ghost":
            return make_private_last_iterate(
                model, opt, loader, grad_sample_mode="ghost", criterion=criterion(), **args
            )
        module, dp_opt, dp_loader, acc = make_private_last_iterate(
            model, opt, loader, loss=criterion(), **args
        )
        return module, dp_opt, criterion(), dp_loader, acc


def _train(module, opt, loss, loader, epochs: int) -> list[int]:
    sizes = []
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            loss(module(xb), yb).backward()
            opt.step()
            sizes.append(len(xb))
    return sizes


def _flat(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


@pytest.mark.parametrize("projected", [False, True], ids=["plain", "projected-l2"])
@pytest.mark.parametrize("sampling", ["cyclic", "uniform", "poisson"])
@pytest.mark.parametrize("family", ["binary", "multinomial"])
def test_ghost_mode_trains_the_default_modes_parameters(
    family: str, sampling: str, projected: bool
) -> None:
    kw: dict = {"diameter": 0.6, "l2": 0.05} if projected else {}
    b = 3 if sampling == "poisson" else 8  # Poisson at rate 3/40: empty batches occur
    hooks = _wire("hooks", family, sampling, b=b, **kw)
    ghost = _wire("ghost", family, sampling, b=b, **kw)
    module, opt, loss, _, acc = ghost
    assert isinstance(module, GhostClippingModule)
    assert isinstance(opt, LastIterateGhostDPOptimizer)
    assert isinstance(loss, GhostClippingLoss)
    start = _flat(module)
    sizes = _train(*hooks[:4], 3)
    assert _train(*ghost[:4], 3) == sizes
    if sampling == "poisson":
        assert 0 in sizes  # a pure-noise step was taken in both modes
    if sampling == "cyclic":
        assert set(sizes) == {8}
    # the clip was active (else a wrong clip would go unnoticed)
    assert float(module.per_sample_gradient_norms.max()) > 0.3
    x_hooks, x_ghost = _flat(hooks[0]), _flat(module)
    assert float((x_ghost - start).norm()) > 0.1  # training moved the parameters
    torch.testing.assert_close(x_ghost, x_hooks, rtol=1e-6, atol=1e-6 * float(x_hooks.abs().max()))
    if projected:
        assert float(x_ghost.norm()) <= 0.3 + 1e-6
        assert opt.l2 == 0.05 and opt.projection is not None
    # the accountant's report is the same: same Run, same epsilon, same explanation
    assert opt.steps_taken == hooks[1].steps_taken == len(acc) == len(hooks[4])
    assert acc.get_epsilon(1e-5) == hooks[4].get_epsilon(1e-5) <= 2.0
    ghost_report, hooks_report = acc.get_report(1e-5), hooks[4].get_report(1e-5)
    assert ghost_report is not None, acc.reason
    assert ghost_report.run == hooks_report.run
    suffix = "; Opacus ghost clipping (per-example gradient norms)"
    assert acc.explain().replace(suffix, "") == hooks[4].explain()


def test_least_squares_with_several_outputs_clips_the_same_per_example_loss() -> None:
    geometry = {"convex": True, "smoothness": 2.0}  # declared: the certificate is for 1 output
    hooks = _wire("hooks", "least-squares", "cyclic", **geometry)
    ghost = _wire("ghost", "least-squares", "cyclic", **geometry)
    _train(*hooks[:4], 2)
    _train(*ghost[:4], 2)
    assert float(ghost[0].per_sample_gradient_norms.max()) > 0.3
    x_hooks = _flat(hooks[0])
    torch.testing.assert_close(
        _flat(ghost[0]), x_hooks, rtol=1e-6, atol=1e-6 * float(x_hooks.abs().max())
    )


def test_the_realisation_names_ghost_clipping() -> None:
    acc = _wire("ghost", "binary", "cyclic")[4]
    assert "Opacus ghost clipping" in acc.explain()
    assert "ghost" not in _wire("hooks", "binary", "cyclic")[4].explain()


# ------------------------------------------------------------------------------------- refusals
def test_a_batch_the_accountant_did_not_charge_is_refused() -> None:
    X, y = _data(40, "multinomial").tensors
    module, opt, loss, _, _ = _wire("ghost", "multinomial", "uniform")
    loss(module(X[:7]), y[:7]).backward()  # uniform batches hold exactly b = 8
    with pytest.raises(ParameterError, match="exactly b=8"):
        opt.step()
    module, opt, loss, _, _ = _wire("ghost", "multinomial", "cyclic", n=42)  # b_min = 7
    loss(module(X[:6]), y[:6]).backward()
    with pytest.raises(ParameterError, match="at least b_min=7"):
        opt.step()
    opt.zero_grad()
    loss(module(X[:7]), y[:7]).backward()
    opt.step()  # the accountant's b_min is accepted
    assert opt.steps_taken == 1


def test_accumulation_and_an_unclipped_backward_are_refused() -> None:
    X, y = _data(40, "multinomial").tensors
    module, opt, loss, _, _ = _wire("ghost", "multinomial", "uniform")
    for _ in range(2):  # two batches before one step
        loss(module(X[:8]), y[:8]).backward()
    with pytest.raises(ParameterError, match="accumulated_iterations"):
        opt.step()
    opt.zero_grad()
    # the plain criterion: unclipped gradients, no clipping pass
    torch.nn.functional.cross_entropy(module(X[:8]), y[:8]).backward()
    with pytest.raises(ParameterError, match="accumulated_iterations=0"):
        opt.step()
    with pytest.raises(ParameterError, match="accumulated_iterations=0"):
        opt.step()  # no backward pass at all
    assert opt.steps_taken == 0


def test_norms_of_an_earlier_batch_are_never_reused_and_eval_mode_is_refused() -> None:
    X, y = _data(40, "multinomial").tensors
    module, opt, loss, _, _ = _wire("ghost", "multinomial", "uniform")
    opt.zero_grad()
    loss(module(X[:8]), y[:8]).backward()
    opt.step()
    with pytest.raises(ParameterError, match="computed no per-example gradient norms") as info:
        module.get_clipping_coef()  # the norms of the step's batch were consumed
    assert "\n" not in str(info.value)
    module.eval()
    with pytest.raises(ParameterError, match="must be in training mode") as info:
        loss(module(X[8:16]), y[8:16])
    assert "\n" not in str(info.value)
    assert opt.steps_taken == 1


def test_tied_parameters_are_refused_with_one_line() -> None:
    layer = torch.nn.Linear(5, 5)
    model = torch.nn.Sequential(layer, layer)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)
        module, *_ = make_private_last_iterate(
            model,
            opt,
            DataLoader(_data(40, "multinomial"), batch_size=8),
            target_epsilon=2.0,
            target_delta=1e-5,
            epochs=1,
            max_grad_norm=1.0,
            sampling="cyclic",
            convex=True,
            smoothness=1.0,
            seed=1,
            grad_sample_mode="ghost",
            criterion=torch.nn.CrossEntropyLoss(),
        )
    tied = "module='Sequential' is invalid: cannot be ghost-clipped"
    with pytest.raises(ParameterError, match=tied) as info:
        module(torch.randn(8, 5))
    assert "\n" not in str(info.value)
