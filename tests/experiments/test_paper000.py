"""``lastiterate reproduce paper000-*``: every printed value reproduced from the library's own code.

The comparisons use the printed precision (Comparison.agrees: half a unit of the last digit).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lastiterate.experiments import paper000
from lastiterate.experiments._base import experiments, write_experiment

REFERENCE_FILE = Path(__file__).resolve().parents[1] / "data" / "reference_values.json"

EXPECTED = {
    "paper000-table1": 30,  # Table 3 (4 x 3 mu) + Table 4 (6 x 3 eps); Table 1 = part of Table 4
    "paper000-table7": 18,
    "paper000-table8": 18,
    "paper000-table9": 30,
    "paper000-tables10-12": 27,
}


def test_registered() -> None:
    reg = experiments()
    for name in EXPECTED:
        assert name in reg, name


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_printed_value_reproduced(name: str) -> None:
    exp = experiments()[name][1](True)
    assert len(exp.comparisons) == EXPECTED[name]
    bad = [c.line() for c in exp.comparisons if not c.agrees]
    assert not bad, bad
    assert exp.rows and all(len(r) == len(exp.columns) for r in exp.rows)


def test_tables10_12_printed_e_star_come_from_the_repo_expression() -> None:
    exp = paper000.tables10_12(True)
    col = {c: i for i, c in enumerate(exp.columns)}
    for row in exp.rows:
        assert row[col["E*_repo_expression"]] == row[col["E*_paper"]]
        # the self-consistent crossing is never earlier than the printed (mistyped) E*
        assert row[col["E*_crossing_ours"]] >= row[col["E*_paper"]]


def _ref() -> dict[str, Any]:
    if not REFERENCE_FILE.exists():
        pytest.skip(f"reference vectors not found at {REFERENCE_FILE}")
    return {v["id"]: v for v in json.loads(REFERENCE_FILE.read_text())["vectors"]}


def test_transcribed_tables_match_reference_values() -> None:
    ref = _ref()
    for i, E in enumerate(paper000.TABLE1_EPOCHS):
        assert (
            paper000.TABLE4_EPS["cgd_composition"][i]
            == ref[f"P000-T1-E{E}-GDPcomp"]["expected_printed"]
        )
        assert paper000.TABLE4_EPS["rdp_0.002"][i] == ref[f"P000-T1-E{E}-RDP"]["expected_printed"]
        assert paper000.TABLE4_EPS["ours_0.002"][i] == ref[f"P000-T1-E{E}-ours"]["expected_printed"]
    for T, (comp, ours) in paper000.TABLE7.items():
        assert comp == ref[f"P000-T7-T{T}-composition"]["expected_printed"]
        for c, v in zip(paper000.TABLE7_CS, ours):
            assert v == ref[f"P000-T7-T{T}-c{c:g}"]["expected_printed"]
    names = {0.25: "0.25", 0.5: "0.5", 1.0: "1"}
    for L_over_n, cells in paper000.TABLE8.items():
        for eta, (t_star, mu_star) in zip(paper000.TABLE8_ETAS, cells):
            printed = ref[f"P000-T8-Ln{names[L_over_n]}-eta{eta:g}"]["expected_printed"]
            assert (t_star, mu_star) == (printed["T_star"], printed["mu_star"])


def test_write_outputs(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    paths = write_experiment(paper000.table9(True), tmp_path)
    assert {p.suffix for p in paths} == {".md", ".csv", ".png"}
    assert "30 of 30 printed values reproduced" in (tmp_path / "paper000-table9.md").read_text()
