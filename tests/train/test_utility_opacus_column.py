"""benchmarks/utility.py, "ours via Opacus": the estimator's configuration through the Opacus path.

The benchmark module is loaded from its file (it has no import-time side effects); these tests
check the settings derivation against the rule and the path, and run one tiny fit.
"""

from __future__ import annotations

import importlib.util
import math
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from lastiterate.accountant import account
from lastiterate.configuration import choose_configuration
from lastiterate.errors import NotApplicable
from lastiterate.opacus import CompositionOnlyWarning, make_private_last_iterate
from lastiterate.train.randomness import SeededRunWarning

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook")

UTILITY = Path(__file__).resolve().parents[2] / "benchmarks" / "utility.py"


@pytest.fixture(scope="module")
def utility():
    spec = importlib.util.spec_from_file_location("_utility_benchmark", UTILITY)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def _config(
    family: str,
    n: int,
    d: int,
    k: int,
    eps: float,
    adjacency: str = "replace",
    strategy: str = "auto",
):
    return choose_configuration(
        family,
        n=n,
        n_features=d,
        n_outputs=k,
        epsilon=eps,
        delta=1e-5,
        data_norm=1.0,
        adjacency=adjacency,
        strategy=strategy,
    )


def _wire(s, cfg, eps: float, d: int, k_classes: int, n: int, clip: float | None = None):
    """make_private_last_iterate with the settings (no training), on rows of norm <= 1."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    A = np.hstack([X, np.full((n, 1), s.intercept_feature)])
    y = rng.integers(0, k_classes, n)
    yt = torch.tensor(y, dtype=torch.float64)[:, None] if s.n_outputs == 1 else torch.tensor(y)
    model = torch.nn.Linear(d + 1, s.n_outputs, bias=False, dtype=torch.float64)
    opt = torch.optim.SGD(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    loader = DataLoader(TensorDataset(torch.tensor(A), yt), batch_size=s.batch_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)
        return make_private_last_iterate(
            model,
            opt,
            loader,
            target_epsilon=eps,
            target_delta=1e-5,
            epochs=s.epochs,
            max_grad_norm=s.max_grad_norm if clip is None else clip,
            sampling=s.sampling,
            adjacency=s.adjacency,
            loss=s.loss,
            data_norm=s.data_norm,
            seed=0,
        )


def test_binary_full_batch_settings_are_the_rule_and_the_path_runs_its_run(utility) -> None:
    n, d, eps = 426, 30, 1.0
    # "auto" trains early stopping here (ties go to it); the last-iterate full batch is the run
    # whose certified geometry the path must wire
    cfg = _config("binary-logistic", n, d, 1, eps, strategy="last-iterate")
    assert cfg.algorithm == "gd" and cfg.l2 > 0
    s = utility.opacus_path_settings(cfg, 2)
    assert (s.loss, s.n_outputs, s.sampling, s.batch_size) == ("bce-with-logits", 1, "cyclic", n)
    assert (s.lr, s.weight_decay, s.max_grad_norm, s.steps) == (
        cfg.lr,
        cfg.l2,
        cfg.clip,
        cfg.steps,
    )
    assert s.data_norm == pytest.approx(math.hypot(1.0, cfg.intercept_feature))
    assert s.intercept_feature == cfg.intercept_feature > 0
    assert s.differs == ()

    *_, accountant = _wire(s, cfg, eps, d, 2, n)
    planned = accountant.planned_run
    assert (planned.steps, planned.lr, planned.clip, planned.n) == (cfg.steps, cfg.lr, cfg.clip, n)
    assert planned.b_min == n  # every row in every step, normalised by n
    assert planned.strong_convexity == pytest.approx(cfg.l2)
    best = account(planned, delta=1e-5).best
    assert best is not None and best.epsilon <= eps
    # the same mechanism calibrated twice (the rule's gd Run, the path's cyclic b = n Run): the
    # path must not need much more noise than the rule, nor get away with less than it needs
    assert 0.95 <= planned.sigma / cfg.noise_std <= 1.05


def test_multinomial_early_stopping_runs_the_rules_clip_accounted_by_composition(utility) -> None:
    n, d, K, eps = 300, 8, 4, 1.0
    cfg = _config("multinomial-logistic", n, d, K, eps)
    assert cfg.strategy == "early-stopping" and cfg.algorithm == "gd" and not cfg.certified
    s = utility.opacus_path_settings(cfg, K)
    R_eff = cfg.effective_feature_norm
    assert s.loss == "cross-entropy" and s.n_outputs == K
    assert s.max_grad_norm == cfg.clip < math.sqrt(2.0) * R_eff  # the rule's clip, not raised
    assert (s.lr, s.weight_decay, s.steps, s.differs) == (cfg.lr, cfg.l2, cfg.steps, ())
    with pytest.warns(CompositionOnlyWarning, match="clip can be active"):
        *_, accountant = _wire(s, cfg, eps, d, K, n)
    planned = accountant.planned_run
    assert accountant.geometry.source == "composition"
    assert planned.m is None and planned.M is None  # no geometry claimed
    assert (planned.steps, planned.clip, planned.b_min) == (cfg.steps, cfg.clip, n)
    best = account(planned, delta=1e-5).best
    assert best.bound.endswith("composition") and best.epsilon <= eps
    # the same mechanism and bound as the rule's gd Run: the same noise, up to calibration
    assert 0.98 <= planned.sigma / cfg.noise_std <= 1.02
    # the rule's own clip with accounting="last-iterate" is refused (no certificate)
    model = torch.nn.Linear(d + 1, K, bias=False, dtype=torch.float64)
    with pytest.raises(NotApplicable, match="clip can be active"):
        make_private_last_iterate(
            model,
            torch.optim.SGD(model.parameters(), lr=s.lr),
            DataLoader(TensorDataset(torch.zeros(n, d + 1, dtype=torch.float64)), batch_size=n),
            target_epsilon=eps,
            target_delta=1e-5,
            epochs=s.epochs,
            max_grad_norm=s.max_grad_norm,
            sampling=s.sampling,
            loss=s.loss,
            data_norm=s.data_norm,
            accounting="last-iterate",
        )


def test_add_remove_runs_poisson_at_rate_one_and_fills_the_cell(utility) -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(120, 4))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] > 0).astype(np.int64)
    cfg = _config("binary-logistic", 120, 4, 1, 1.0, adjacency="add-remove")
    assert cfg.sampling == "poisson" and cfg.batch_size == 120
    s = utility.opacus_path_settings(cfg, 2)
    assert (s.sampling, s.batch_size, s.adjacency, s.differs) == ("poisson", 120, "add-remove", ())
    assert (s.max_grad_norm, s.steps, s.epochs) == (cfg.clip, cfg.steps, cfg.steps)
    *_, accountant = _wire(s, cfg, 1.0, 4, 2, 120)
    planned = accountant.planned_run
    assert (planned.algorithm, planned.sampling_scheme, planned.b, planned.adjacency) == (
        "sgd",
        "poisson",
        120,
        "add-remove",
    )
    assert planned.steps == cfg.steps
    assert 0.98 <= planned.sigma / cfg.noise_std <= 1.02  # the rule's Run, calibrated again
    cell = utility.run_ours_via_opacus(X, y, X, y, 1.0, "add-remove", [0])
    assert cell.na is None and len(cell.accs) == 1, cell.info
    assert 0 < cell.eps_spent <= 1.0
    assert cell.accs[0] >= 0.8  # chance is about 0.5 (a separable direction, n = 120)


def test_sampled_early_stopping_runs_its_poisson_batches(utility) -> None:
    # large n m: the rule's early stopping runs the planned T on Poisson batches of b < n, and the
    # path realises exactly that (Poisson, the same b and T, the noise calibrated again)
    n, d, eps = 30000, 40, 4.0
    cfg = _config("binary-logistic", n, d, 1, eps)
    assert (cfg.algorithm, cfg.sampling) == ("sgd", "poisson") and cfg.batch_size < n
    s = utility.opacus_path_settings(cfg, 2)
    assert (s.sampling, s.batch_size, s.steps, s.differs) == (
        "poisson",
        cfg.batch_size,
        cfg.steps,
        (),
    )
    assert s.epochs == pytest.approx(cfg.steps * cfg.batch_size / n)
    *_, accountant = _wire(s, cfg, eps, d, 2, n)
    planned = accountant.planned_run
    assert (planned.sampling_scheme, planned.b, planned.steps) == (
        "poisson",
        cfg.batch_size,
        cfg.steps,
    )
    assert 0.98 <= planned.sigma / cfg.noise_std <= 1.02
    assert account(planned, delta=1e-5).best.epsilon <= eps


def test_a_tiny_fit_through_the_path_learns_and_stays_within_budget(utility) -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(np.int64)
    cell = utility.run_ours_via_opacus(X[:300], y[:300], X[300:], y[300:], 1.0, "replace", [0])
    assert cell.na is None and len(cell.accs) == 1
    assert cell.accs[0] >= 0.8  # chance is about 0.5
    assert 0 < cell.eps_spent <= 1.0
    assert "weight_decay" in cell.info and "ε=" in cell.info


def test_skip_peers_writes_our_columns_only(utility, tmp_path):
    """``--skip opacus,diffprivlib`` runs ours and ours via Opacus and leaves the peers' cells
    empty (a cheap way to add the Opacus-path column to an earlier run)."""
    out = tmp_path / "u.md"
    argv = ["--datasets", "breast-cancer", "--epsilons", "4", "--seeds", "1"]
    assert utility.main([*argv, "--skip", "opacus,diffprivlib", "--out", str(out)]) == 0
    text = out.read_text()
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    assert rows["| Opacus DP-SGD, best cell"].endswith("| - |")
    assert "not run (--skip diffprivlib)" in rows["| diffprivlib"]
    assert re.search(r"\| 0\.\d{3} \|$", rows["| ours"])
    assert re.search(r"\| 0\.\d{3} \|$", rows["| ours via Opacus"])
    with pytest.raises(SystemExit):
        utility.main([*argv, "--skip", "sklearn", "--out", str(out)])


def test_noise_free_ceiling_draws_the_runs_poisson_batches(utility, monkeypatch) -> None:
    # the "without noise" diagnostic of a sampled configuration draws Poisson batches (rate b/n,
    # the sum divided by b) and lands where the full-batch run of the same T and lr lands
    import dataclasses

    rng = np.random.default_rng(4)
    n, d = 30000, 40
    w = rng.normal(size=d)
    X = rng.normal(size=(n + 2000, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X @ w + 0.3 * rng.normal(size=n + 2000) > 0).astype(np.int64)
    cfg = _config("binary-logistic", n, d, 1, 4.0)
    assert cfg.sampling == "poisson" and cfg.batch_size < n
    cfg = dataclasses.replace(cfg, steps=400)  # the same lr and batches, a shorter run
    full = dataclasses.replace(cfg, algorithm="gd", sampling=None, batch_size=None)
    sampled_acc = utility.noise_free_ceiling(X[:n], y[:n], X[n:], y[n:], cfg)
    full_acc = utility.noise_free_ceiling(X[:n], y[:n], X[n:], y[n:], full)
    assert full_acc > 0.85 and abs(sampled_acc - full_acc) <= 0.02
    # and it really draws them: with no row ever drawn the model stays at zero (class 0 always)

    class _NoRows:
        def random(self, size):
            return np.ones(size)

    monkeypatch.setattr(np.random, "default_rng", lambda *_: _NoRows())
    empty = utility.noise_free_ceiling(X[:n], y[:n], X[n:], y[n:], cfg)
    assert empty == pytest.approx(float(np.mean(y[n:] == 0)))


def test_path_rounds_a_hair_over_budget_noise_up_instead_of_refusing(utility) -> None:
    # full MNIST, eps 4, add/remove: the rule's run (Poisson b = 1024, T = 67212); the path's
    # sigma -> z conversion landed on a noise whose composition bound read 4.0000000128 (its grid
    # is sized from the bracket), and the path refused the run; it now rounds the noise up
    cfg = _config("multinomial-logistic", 50000, 784, 10, 4.0, adjacency="add-remove")
    assert (cfg.sampling, cfg.batch_size, cfg.steps) == ("poisson", 1024, 67212)
    s = utility.opacus_path_settings(cfg, 10)
    *_, accountant = _wire(s, cfg, 4.0, 2, 10, 50000)  # the bound needs no features: d = 2
    planned = accountant.planned_run
    assert account(planned, delta=1e-5).best.epsilon <= 4.0
    assert 1.0 <= planned.sigma / cfg.noise_std <= 1.0 + 1e-5  # rounded up, by a hair
