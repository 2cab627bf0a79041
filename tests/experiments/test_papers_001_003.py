"""The reproductions of papers 001, 002 and 003 (quick mode): shape, values, plateau, plots."""

from __future__ import annotations

import math

import pytest

from lastiterate.bounds import langevin as lg
from lastiterate.bounds import smooth_bounded_domain as sbd
from lastiterate.experiments._base import experiments, write_experiment
from lastiterate.experiments.paper001 import figure1 as p001_fig1
from lastiterate.experiments.paper002 import figure1 as p002_fig1
from lastiterate.experiments.paper002 import figure5 as p002_fig5
from lastiterate.experiments.paper003 import bounds as p003_bounds


def test_registered_names() -> None:
    names = experiments()
    for name in ("paper001-figure1", "paper002-figure1", "paper002-figure5", "paper003-bounds"):
        assert name in names


def test_paper001_figure1_matches_formulas() -> None:
    exp = p001_fig1(True)
    cols = exp.columns
    assert cols[:5] == ["alpha", "lambda", "K", "corollary1_rdp", "composition_rdp"]
    assert len(exp.rows) == 3 * 3 * 5
    for alpha, lam, K, ours, base, _ in exp.rows:
        assert ours == pytest.approx(
            lg.corollary1_rdp(alpha, L=4.0, n=5000, m=lam, eta=0.02, sigma=0.2, T=K), rel=1e-12
        )
        assert base == pytest.approx(alpha * 16 * 0.02 * K / (4 * 0.02**2 * 5000**2), rel=1e-12)
    # plateau of Corollary 1 (alpha S_g^2/(lambda sigma'^2 n^2)) vs linear composition
    last = next(r for r in exp.rows if r[2] == 10000 and r[0] == 10.0 and r[1] == 1.0)
    assert last[3] == pytest.approx(10 * 16 / (0.02**2 * 5000**2), rel=1e-6)
    assert last[4] / last[3] > 40


@pytest.mark.parametrize("fig,n,trivial", [(p002_fig1, 8, False), (p002_fig5, 16, True)])
def test_paper002_figures_exactly_as_coded(fig, n: int, trivial: bool) -> None:
    exp = fig(True)
    assert ("trivial" in exp.columns) == trivial
    assert exp.columns[-1] == "library_thm34"
    for row in exp.rows:
        T = row[0]
        d = dict(zip(exp.columns, row))
        assert d["ours_thm34"] == pytest.approx(
            sbd.thm34_rdp_paper(1.1, C=2.0, T=T, n=n, b=2, sigma=4.0, eta=0.2, L_smooth=1.0, D=1.0)
        )
        assert d["mironov"] == pytest.approx(8 * 1.1 * 4 * T / (n**2 * 16))
        if T >= 1:
            assert d["library_thm34"] <= d["ours_thm34"] * (1 + 1e-9) or T == 0
    # Thm 3.4 plateaus while Thm 3.3 grows
    first, last = dict(zip(exp.columns, exp.rows[1])), dict(zip(exp.columns, exp.rows[-1]))
    assert last["thm33_unbounded"] > first["thm33_unbounded"]
    assert last["ours_thm34"] == pytest.approx(dict(zip(exp.columns, exp.rows[-2]))["ours_thm34"])


def test_paper003_bounds_plateau() -> None:
    exp = p003_bounds(True)
    d = [dict(zip(exp.columns, r)) for r in exp.rows]
    Ts = [r["T"] for r in d]
    assert Ts == sorted(Ts)
    # composition keeps growing, the last-iterate bounds stop below their limits
    assert d[-1]["gd_composition"] > d[0]["gd_composition"]
    assert d[-1]["sgd_rdp_composition"] > d[0]["sgd_rdp_composition"]
    for r in d:
        assert r["gd_B1"] <= r["gd_limit"] * (1 + 1e-9)
        assert r["sgd_B2"] <= r["sgd_B2_limit"] * (1 + 1e-9)
        assert r["sgd_B3_c0.95"] <= r["sgd_B2"] * (1 + 1e-9)
    assert d[-1]["cgd_thm5.8"] < d[-1]["cgd_composition"]
    assert d[-1]["sgd_B3_c0.95"] < d[-1]["sgd_rdp_composition"]
    assert all(math.isfinite(v) for r in d for v in r.values() if isinstance(v, float))


@pytest.mark.parametrize("fig", [p001_fig1, p002_fig1, p003_bounds])
def test_write_experiment_outputs(fig, tmp_path) -> None:
    exp = fig(True)
    paths = write_experiment(exp, tmp_path)
    names = {p.name for p in paths}
    assert f"{exp.name}.md" in names and f"{exp.name}.csv" in names
    pytest.importorskip("matplotlib")
    assert f"{exp.name}.png" in names
