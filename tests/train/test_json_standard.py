"""Every --json output and every ledger line is standard JSON: no NaN / Infinity tokens
(lastiterate.jsonutil maps +-inf to "inf" / "-inf" and NaN to null, deliberately)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from lastiterate import jsonutil
from lastiterate.cli import main


def _strict(text: str):
    return json.loads(
        text, parse_constant=lambda tok: pytest.fail(f"non-standard JSON token {tok}")
    )


def test_jsonutil_maps_non_finite_values_deliberately():
    obj = {
        "a": math.inf,
        "b": -math.inf,
        "c": math.nan,
        "d": [np.float64("nan"), np.float32(1.5), np.int64(3)],
        "e": (1.0, np.array([np.inf, 2.0])),
        4: None,
        "f": "NaN",
    }
    text = jsonutil.dumps(obj)
    assert _strict(text) == {
        "a": "inf",
        "b": "-inf",
        "c": None,
        "d": [None, 1.5, 3],
        "e": [1.0, ["inf", 2.0]],
        "4": None,
        "f": "NaN",
    }
    with pytest.raises(ValueError):
        jsonutil.loads('{"x": NaN}')
    with pytest.raises(ValueError):
        jsonutil.loads("[Infinity]")
    with pytest.raises(TypeError):  # objects json cannot write are still refused without a default
        jsonutil.dumps({"x": object()})
    assert _strict(jsonutil.dumps({"x": object()}, default=lambda o: math.inf)) == {"x": "inf"}
    assert "NaN" not in json.dumps(jsonutil.jsonable(float("nan")))


def test_no_json_output_of_the_package_writes_json_dumps_without_the_helper():
    """Every serialisation in src/ goes through jsonutil (json.dumps only for
    hashing a fingerprint)."""
    src = Path(__file__).resolve().parents[2] / "src" / "lastiterate"
    offenders = []
    for path in src.rglob("*.py"):
        if path.name == "jsonutil.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if (
                "json.dump(" in line or "json.dumps(" in line
            ) and "h.update(" not in line:  # hashing is no output
                offenders.append(f"{path.relative_to(src)}:{i}: {line.strip()}")
    assert offenders == []


def _out(args, capsys, rc=0):
    capsys.readouterr()
    assert main(args) == rc
    return capsys.readouterr().out


def test_cli_json_outputs_are_standard(tmp_path, capsys):
    # a diverging training run (the scales at the top of the accepted range, 1e10 and 1e29): huge
    # losses, still standard JSON; jsonutil's own tests cover NaN -> null
    out = _strict(
        _out(
            [
                "train",
                "--dataset",
                "iris",
                "--model",
                "logreg",
                "--algorithm",
                "gd",
                "--epochs",
                "3",
                "--lr",
                "1e10",
                "--noise-std",
                "1e29",
                "--clip",
                "1",
                "--ledger",
                str(tmp_path / "l.jsonl"),
                "--json",
            ],
            capsys,
        )
    )
    loss = out["non_private_diagnostics"]["train_loss"]
    assert (loss is None or loss > 1e30) and out["best"] is not None
    for line in (tmp_path / "l.jsonl").read_text().splitlines():
        _strict(line)
    runs = [
        [
            "account",
            "--algorithm",
            "gd",
            "--n",
            "10",
            "--steps",
            "100",
            "--lr",
            "1",
            "--noise-std",
            "1e-3",
            "--clip",
            "1",
            "--json",
        ],
        [
            "account",
            "--algorithm",
            "sgd",
            "--sampling",
            "poisson",
            "--n",
            "100",
            "--batch-size",
            "10",
            "--steps",
            "50",
            "--lr",
            "0.1",
            "--noise-std",
            "0.5",
            "--clip",
            "1",
            "--epsilon",
            "1",
            "--json",
        ],
        [
            "calibrate",
            "--algorithm",
            "gd",
            "--n",
            "100",
            "--steps",
            "10",
            "--lr",
            "0.1",
            "--clip",
            "1",
            "--epsilon",
            "2",
            "--solve",
            "noise",
            "--json",
        ],
        ["convert", "--mu", "0", "--delta", "1e-5", "--json"],
        ["convert", "--mu", "2", "--epsilon", "0", "--json"],
        ["convert", "--rdp-linear", "0.5", "--delta", "1e-6", "--json"],
    ]
    for args in runs:
        _strict(_out(args, capsys))


def test_audit_json_is_standard(capsys):
    capsys.readouterr()
    rc = main(
        [
            "audit",
            "quadratic",
            "--algorithm",
            "gd",
            "--n",
            "10",
            "--steps",
            "5",
            "--lr",
            "0.1",
            "--noise-std",
            "1",
            "--clip",
            "1",
            "--strong-convexity",
            "1",
            "--smoothness",
            "1",
            "--samples",
            "2000",
            "--json",
        ]
    )
    cap = capsys.readouterr()
    assert rc in (0, 1), cap.err
    _strict(cap.out)
