"""Packaging: dp-accounting is an optional extra, used only by ``Pld.to_dp_accounting``."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from lastiterate.notions.pld import gaussian_pld

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_dp_accounting_is_an_extra_not_a_requirement() -> None:
    project = _pyproject()["project"]
    assert not any(d.startswith("dp-accounting") for d in project["dependencies"])
    extras = project["optional-dependencies"]
    assert any(d.startswith("dp-accounting") for d in extras["dp-accounting"])
    assert any(d.startswith("dp-accounting") for d in extras["test"])


def test_accounting_works_without_dp_accounting() -> None:
    """The accountant (closed forms and the PLD engine) never imports dp_accounting."""
    code = (
        "import sys\n"
        "sys.modules['dp_accounting'] = None\n"
        "from lastiterate.accountant import account\n"
        "from lastiterate.run import Run\n"
        "run = Run(algorithm='sgd', n=100, batch_size=10, steps=50, lr=0.1, noise_std=0.5,\n"
        "          sensitivity=1.0, sampling='poisson')\n"
        "report = account(run, delta=1e-5)\n"
        "assert report.result('pld-composition') is not None, report\n"
        "assert 'dp_accounting.pld' not in sys.modules\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_to_dp_accounting_names_the_extra_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "dp_accounting" or m.startswith("dp_accounting.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    with pytest.raises(ModuleNotFoundError, match=r"lastiterate\[dp-accounting\]"):
        gaussian_pld(1.0).to_dp_accounting()
