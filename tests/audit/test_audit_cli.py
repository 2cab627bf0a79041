"""``lastiterate audit``: output, exit status (0 ok/inconclusive, 1 VIOLATION, 2 bad input)."""

from __future__ import annotations

import json

import pytest

from lastiterate.cli import main

SC = [
    "--algorithm",
    "gd",
    "--n",
    "4",
    "--lr",
    "0.1",
    "--noise-std",
    "1",
    "--sensitivity",
    "1",
    "--strong-convexity",
    "1",
    "--smoothness",
    "1",
    "--steps",
    "100",
]


def test_audit_quadratic_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["audit", "quadratic", *SC, "--samples", "50000", "--seed", "3", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["verdict"] == "ok"
    assert out["claim_bound"] == "shifted-interpolation"
    assert out["claim_mu"] == pytest.approx(1.0897, abs=1e-4)
    assert 0.9 < out["mu_lb"] <= out["claim_mu"]
    assert out["reference_mu"] == pytest.approx(1.0897, abs=1e-4)
    assert out["N"] == 50000 and out["seed"] == 3
    assert {c["bound"] for c in out["checks"]} >= {"shifted-interpolation", "gdp-composition"}


def test_audit_text_and_violation_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["audit", "auto", *SC, "--samples", "20000", "--noise-scale", "0.5"])
    text = capsys.readouterr().out
    assert rc == 1
    assert "VIOLATION" in text and "shifted-interpolation" in text


def test_audit_projected_walk(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "audit",
            "linear",
            "--algorithm",
            "gd",
            "--n",
            "1",
            "--lr",
            "0.05",
            "--noise-std",
            "1",
            "--sensitivity",
            "0.04",
            "--convex",
            "--smoothness",
            "1",
            "--diameter",
            "1",
            "--steps",
            "100",
            "--samples",
            "20000",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["verdict"] == "ok"
    assert out["name"].startswith("projected-walk")
    assert out["reference_eps"] == pytest.approx(0.711, abs=2e-3)
    assert out["eps_lb"] <= out["reference_eps"]


@pytest.mark.parametrize(
    "argv",
    [
        [
            "audit",
            "quadratic",
            "--algorithm",
            "gd",
            "--n",
            "4",
            "--lr",
            "0.1",
            "--noise-std",
            "1",
            "--sensitivity",
            "1",
            "--convex",
            "--smoothness",
            "1",
            "--steps",
            "10",
        ],  # no strong convexity
        ["audit", "linear", *SC, "--samples", "5"],
        ["audit", "linear", *SC, "--alpha", "2"],
        ["audit", "linear", *SC, "--noise-scale", "0"],
        ["audit", "linear", *SC, "--position", "0"],  # gd has no position
        ["audit", "nonsense", *SC],
        [
            "audit",
            "linear",
            "--algorithm",
            "gd",
            "--n",
            "4",
            "--lr",
            "0.1",
            "--noise-std",
            "1",
            "--sensitivity",
            "1",
            "--convex",
            "--smoothness",
            "1",
            "--steps",
            "10",
            "--adjacency",
            "add-remove",
        ],
    ],
)
def test_audit_bad_input_exits_2_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(argv)
    cap = capsys.readouterr()
    assert rc == 2
    assert cap.out == ""
    assert len(cap.err.strip().splitlines()) == 1
