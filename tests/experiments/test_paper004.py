"""``lastiterate reproduce paper004-*`` (Bu-Dong-Long-Su 2020): printed values, rounding cases,
validity of the rigorous PLD column, and the written outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lastiterate.experiments import paper004
from lastiterate.experiments._base import Comparison, Experiment, experiments, write_experiment

REFERENCE_FILE = Path(__file__).resolve().parents[1] / "data" / "reference_values.json"

#: comparisons that are EXPECTED to differ at the printed precision (documented in the notes),
#: with our precise value: the paper rounded an input first or truncated its output
ROUNDING_CASES = {
    # 2 Phi(-mu/2) at the unrounded mu_CLT = 0.5736; the text used mu = 0.57 (-> 0.7756)
    "Sec. 4 row 2 min type I+II error, CLT (mu_CLT)": (0.776, 0.77427),
    # MA recipe gives 1.3498 (-> 1.35); the caption prints 1.34
    "Fig. 4 eps_MA(sigma) (sigma=1.3, epoch 20)": (1.34, 1.34983),
    # CLT eps at the ROUNDED sigma~ = 0.638 is 8.697; the caption's 8.68 is the target eps_MA
    "Fig. 4 eps_CLT(printed sigma~=0.638) (sigma=0.7, epoch 70)": (8.68, 8.69716),
}


@pytest.fixture(scope="module")
def t1() -> Experiment:
    return paper004.table1(True)


@pytest.fixture(scope="module")
def f4() -> Experiment:
    return paper004.figure4(True)


def _rows(exp: Experiment) -> list[dict[str, Any]]:
    return [dict(zip(exp.columns, r)) for r in exp.rows]


def _by_label(exp: Experiment) -> dict[str, Comparison]:
    return {c.label: c for c in exp.comparisons}


def test_registered() -> None:
    reg = experiments()
    assert "paper004-table1" in reg and "paper004-figure4" in reg


def test_table1_printed_values(t1: Experiment) -> None:
    assert [r["row"] for r in _rows(t1)] == [1, 2, 3]
    assert all(len(r) == len(t1.columns) for r in t1.rows)
    # row 1 eps_MA; row 2 eps_MA, mu_CLT and two error sums; row 3 mu_CLT, eps_CLT, eps_MA
    assert len(t1.comparisons) == 8
    bad = [c.line() for c in t1.comparisons if not c.agrees and c.label not in ROUNDING_CASES]
    assert not bad, bad
    comps = _by_label(t1)
    assert comps["Table 1 row 1 eps_MA (sigma=1.3, 15 epochs)"].ours == pytest.approx(
        1.192264409, abs=1e-8
    )
    assert comps["Table 1 row 2 eps_MA (sigma=1.1, 60 epochs)"].ours == pytest.approx(
        3.0083810, abs=1e-6
    )
    assert comps["Table 1 row 3 eps_MA (sigma=0.7, 45 epochs)"].ours == pytest.approx(
        7.1005517, abs=1e-6
    )
    assert comps["Table 1 row 3 eps_CLT (sigma=0.7, 45 epochs)"].ours == pytest.approx(
        5.0661559282, abs=1e-6
    )


def test_figure4_printed_values(f4: Experiment) -> None:
    assert len(f4.rows) == 2 and len(f4.comparisons) == 8
    bad = [c.line() for c in f4.comparisons if not c.agrees and c.label not in ROUNDING_CASES]
    assert not bad, bad
    comps = _by_label(f4)
    # eps_MA(0.7, 70 epochs) = 8.676 (exact signed series; dp_accounting's looser series: 8.6785)
    c = comps["Fig. 4 eps_MA(sigma) (sigma=0.7, epoch 70)"]
    assert c.agrees and c.ours == pytest.approx(8.67597, abs=1e-5)
    assert paper004.ma_epsilon_absolute_series(0.7, 70) == pytest.approx(8.6785189, abs=1e-5)
    assert comps["Fig. 4 sigma~ (sigma=1.3, epoch 20)"].ours == pytest.approx(1.05593, abs=1e-5)
    assert comps["Fig. 4 sigma~ (sigma=0.7, epoch 70)"].ours == pytest.approx(0.638476, abs=1e-6)
    assert comps["Fig. 4 mu_CLT(sigma~) = mu~ (sigma=1.3, epoch 20)"].ours == pytest.approx(
        0.351988, abs=1e-6
    )
    assert comps["Fig. 4 mu_CLT(sigma~) = mu~ (sigma=0.7, epoch 70)"].ours == pytest.approx(
        1.781302, abs=1e-6
    )
    assert comps["Fig. 4 eps_CLT(printed sigma~=1.06) (sigma=1.3, epoch 20)"].ours == pytest.approx(
        1.3411966651, abs=1e-6
    )


@pytest.mark.parametrize("label", list(ROUNDING_CASES))
def test_rounding_cases_precisely(label: str, t1: Experiment, f4: Experiment) -> None:
    comps = {**_by_label(t1), **_by_label(f4)}
    printed, ours = ROUNDING_CASES[label]
    c = comps[label]
    assert c.paper == printed
    assert c.ours == pytest.approx(ours, abs=1e-5)
    assert not c.agrees  # documented: differs at the printed precision


def test_rounding_explanations() -> None:
    # the text's 77.6% is 2 Phi(-0.57/2) at the printed (rounded) mu
    assert round(paper004.min_error_sum_gdp(0.57), 3) == 0.776
    # the caption's 1.34 is eps_CLT at the printed sigma~ = 1.06 (eps_MA itself is 1.3498)
    assert round(paper004.clt_epsilon(1.06, 20), 2) == 1.34
    # the CLT calibration closes: eps_CLT(unrounded sigma~) = eps_MA
    for sigma, epochs in ((1.3, 20), (0.7, 70)):
        cal = paper004.figure4_calibration(sigma, epochs)
        assert paper004.clt_epsilon(cal["sigma_tilde"], epochs) == pytest.approx(
            cal["eps_MA"], rel=1e-9
        )
        assert paper004.clt_mu(cal["sigma_tilde"], epochs) == pytest.approx(
            cal["mu_tilde"], rel=1e-12
        )


def test_pld_column_is_a_valid_bound(t1: Experiment, f4: Experiment) -> None:
    for r in _rows(t1):
        lo, hi = r["eps_PLD_lower"], r["eps_PLD_upper"]
        assert 0 < lo <= hi <= lo + 0.01
        # the exact composition is never above the RDP bounds it refines
        assert hi <= r["eps_RDP_best"] <= r["eps_MA_classic"] + 1e-12
        # the CLT under-reports: its estimate lies below the certified lower bound
        assert r["eps_CLT_estimate"] < lo
    row1 = _rows(t1)[0]
    assert row1["eps_CLT_estimate"] == pytest.approx(0.834462903, abs=1e-6)
    assert row1["eps_PLD_lower"] > 0.86
    for r in _rows(f4):
        assert r["eps_PLD_lower(sigma_tilde_printed)"] <= r["eps_PLD_upper(sigma_tilde_printed)"]
        # the reduced noise sigma~ does NOT achieve the MA (eps, 1e-5) the CLT promises
        assert r["eps_PLD_lower(sigma_tilde_printed)"] > r["eps_MA_classic"]
        assert r["eps_PLD_upper(sigma)"] < r["eps_MA_classic"]


def _ref() -> dict[str, Any]:
    if not REFERENCE_FILE.exists():
        pytest.skip(f"reference vectors not found at {REFERENCE_FILE}")
    return {v["id"]: v for v in json.loads(REFERENCE_FILE.read_text())["vectors"]}


def test_against_reference_vectors(t1: Experiment, f4: Experiment) -> None:
    ref = _ref()
    for r in _rows(t1):
        v = ref[f"P004-MNIST-s{r['sigma']:g}-ep{r['epochs']}"]
        rec, tol = v["recomputed"], v["tolerance"]
        assert r["mu_CLT_estimate"] == pytest.approx(rec["mu_CLT"], rel=tol["mu_rel"])
        assert r["eps_CLT_estimate"] == pytest.approx(rec["eps_CLT"], abs=tol["eps_abs"])
        assert r["eps_MA_classic"] == pytest.approx(
            rec["eps_MA_rdp_classic_conversion"], abs=tol["eps_MA_abs"]
        )
        assert r["eps_RDP_best"] == pytest.approx(
            rec["eps_MA_rdp_improved_conversion"], abs=tol["eps_MA_abs"]
        )
        printed = v["expected_printed"]["table1_partial"]
        readme, seed = printed["from_TF_tutorial_README"], printed["confirmed_in_seed_text"]
        row = printed["row"]
        assert (r["row"], r["sigma"], r["R"], r["eta"]) == (
            row,
            readme["sigma"],
            readme["R"],
            readme["eta"],
        )
        assert paper004.TABLE1_PRINTED[row]["eps_MA"] == readme["eps_MA"]
        for key in ("mu_CLT", "eps_CLT", "eps_MA"):
            if key in seed:
                assert paper004.TABLE1_PRINTED[row][key] == seed[key]
        if "min_sum_type_I_II_errors_CLT" in seed:
            assert paper004.ROW2_MIN_ERRORS_PRINTED == {
                "CLT": seed["min_sum_type_I_II_errors_CLT"],
                "MA": seed["min_sum_type_I_II_errors_MA"],
            }
    for r in _rows(f4):
        v = ref[f"P004-Fig4-MA-sigma{r['sigma']:g}-ep{r['epochs']}"]
        assert r["eps_MA_classic"] == pytest.approx(
            v["recomputed"]["eps_MA_rdp_classic_conversion"], abs=v["tolerance"]["eps_abs"]
        )
        w = ref[f"P004-Fig4-sigtilde{r['sigma_tilde_printed']:g}-ep{r['epochs']}"]
        assert r["mu_CLT(sigma_tilde_printed)"] == pytest.approx(
            w["recomputed"]["mu_CLT"], abs=1e-8
        )
        assert r["eps_CLT_estimate(sigma_tilde_printed)"] == pytest.approx(
            w["recomputed"]["eps_CLT"], abs=1e-6
        )
        printed = next(s for s in paper004.FIG4_SETTINGS if s[0] == r["sigma"])
        assert (printed[3], printed[4]) == (
            w["expected_printed"]["eps"],
            w["expected_printed"]["mu_CLT"],
        )
        assert printed[3] == v["expected_printed"]["eps"]


@pytest.mark.parametrize("func", [paper004.table1, paper004.figure4])
def test_write_experiment_outputs(func, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    exp = func(True)
    paths = write_experiment(exp, tmp_path)
    names = {p.name for p in paths}
    assert names == {f"{exp.name}.md", f"{exp.name}.csv", f"{exp.name}.png"}
    assert all(p.stat().st_size > 0 for p in paths)
    md = (tmp_path / f"{exp.name}.md").read_text()
    assert "ESTIMATE" in md and "printed values reproduced" in md
    csv_lines = (tmp_path / f"{exp.name}.csv").read_text().splitlines()
    assert len(csv_lines) == 1 + len(exp.rows)
    assert csv_lines[0].split(",") == exp.columns
