"""``lastiterate reproduce paper002-mia``: the shape of paper 002's MIA experiment (quick mode).

Independent checks: the RDP -> (epsilon, delta) conversion against a numerical minimisation over
the order (scipy), the plateau diameter against the authors' Thm 3.4 closed form on both sides of
it, the certified one-run bound never above the theory curves, and the quick mode's time.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize

from lastiterate.bounds import smooth_bounded_domain as sbd
from lastiterate.cli import main
from lastiterate.experiments import paper002_mia as p
from lastiterate.experiments._base import Experiment, experiments, write_experiment


@pytest.fixture(scope="module")
def quick() -> tuple[Experiment, float]:
    t0 = time.perf_counter()
    exp = p.paper002_mia(True)
    return exp, time.perf_counter() - t0


def test_rdp_conversion_matches_numerical_minimum() -> None:
    for k in (0.01, 1.0, 37.0, 5000.0):
        for delta in (1e-5, 1e-3):
            res = optimize.minimize_scalar(
                lambda a, k=k, d=delta: a * k + math.log(1 / d) / (a - 1),
                bounds=(1 + 1e-9, 1e7),
                method="bounded",
                options={"xatol": 1e-12},
            )
            assert p.rdp_linear_to_dp(k, delta) == pytest.approx(res.fun, rel=1e-6)


def test_plateau_diameter_is_where_thm34_leaves_composition() -> None:
    n, b, T = 600, 32, 1200
    d_star = p.plateau_diameter(n, b, T)
    kw = {"C": p.CLIP, "T": T, "n": n, "b": b, "sigma": p.SIGMA, "eta": p.LR}
    comp = sbd.thm33_rdp_paper(1.0, C=p.CLIP, T=T, n=n, b=b, sigma=p.SIGMA)
    below = sbd.thm34_rdp_paper(1.0, L_smooth=p.L_SMOOTH, D=0.99 * d_star, **kw)
    above = sbd.thm34_rdp_paper(1.0, L_smooth=p.L_SMOOTH, D=1.01 * d_star, **kw)
    assert below < comp
    assert above == pytest.approx(comp, rel=1e-12)


def test_balanced_estimate() -> None:
    S = np.array([1, 1, -1, -1])
    assert p.balanced_estimate(np.array([3.0, 2.0, 1.0, 0.0]), S) == pytest.approx(math.log(9))
    assert p.balanced_estimate(np.array([0.0, 1.0, 2.0, 3.0]), S) == 0.0


def test_quick_mode_table(quick: tuple[Experiment, float]) -> None:
    exp, seconds = quick
    assert seconds < 60
    assert "paper002-mia" in experiments()
    assert len(exp.rows) == 2 * 2 * len(p.EPOCHS_QUICK)
    col = {c: i for i, c in enumerate(exp.columns)}
    for r in exp.rows:
        assert 0.0 <= r[col["eps_lb"]] <= r[col["eps_thm34"]] <= r[col["eps_composition"]] * 1.0001
        assert r[col["eps_emp"]] >= 0 and math.isfinite(r[col["eps_emp"]])
        # theory columns recomputed from the closed forms
        e34, e33 = p.theory(p.N_BASE + p.M, r[col["batch_size"]], r[col["diameter"]], r[3])
        assert r[col["eps_thm34"]] == e34 and r[col["eps_composition"]] == e33
    # larger batch: fewer steps for the same epochs, smaller composition epsilon
    last = [r for r in exp.rows if r[col["epochs"]] == p.EPOCHS_QUICK[-1]]
    by_b = {r[0]: r[col["eps_composition"]] for r in last}
    assert by_b[128] < by_b[32]
    assert len(exp.summary) == 3 and "Paper 002" in exp.summary[0]
    assert ("same trend" in exp.summary[1]) or ("NOT the paper's trend" in exp.summary[1])


def test_written_outputs(quick: tuple[Experiment, float], tmp_path: Path) -> None:
    exp, _ = quick
    paths = write_experiment(exp, tmp_path)
    md = (tmp_path / "paper002-mia.md").read_text()
    assert exp.summary[1] in md and "nan" not in md.lower()
    assert any(str(x).endswith(".png") for x in paths)


def test_cli_prints_the_finding(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(p, "EPOCHS_QUICK", (1, 2))
    assert main(["reproduce", "paper002-mia", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Paper 002 (Figs. 2-3" in out and "Here (MLP on digits" in out
