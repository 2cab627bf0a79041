"""The logreg-digits experiment is registered and (slow) runs end to end."""

from __future__ import annotations

import pytest

from lastiterate.experiments._base import experiments, write_experiment


def test_registered():
    assert "logreg-digits" in experiments()


@pytest.mark.slow
def test_quick_run(tmp_path):
    _, func = experiments()["logreg-digits"]
    exp = func(True)
    paths = write_experiment(exp, tmp_path)
    assert {p.suffix for p in paths} == {".md", ".csv", ".png"}
    text = (tmp_path / "logreg-digits.md").read_text()
    assert "shifted-interpolation" in text and "Ye-Shokri" in text
    for row in exp.rows:
        assert float(row[4]) > 0.8  # test accuracy
