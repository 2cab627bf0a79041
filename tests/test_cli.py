"""The command-line contract of design.md: output shapes, exit status 2 with one stderr line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lastiterate.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_convert_golden_value(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "convert", "--mu", "1", "--delta", "1e-5", "--json")
    assert code == 0 and err == ""
    obj = json.loads(out)
    assert set(obj) >= {"epsilon", "delta", "mu"}
    assert round(obj["epsilon"], 5) == 4.37718


def test_convert_epsilon_to_delta_round_trip(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_cli(capsys, "convert", "--mu", "4.71405", "--delta", "1e-5", "--json")
    eps = json.loads(out)["epsilon"]
    assert eps == pytest.approx(30.506, abs=5e-4)
    _, out, _ = run_cli(capsys, "convert", "--mu", "4.71405", "--epsilon", str(eps), "--json")
    assert json.loads(out)["delta"] == pytest.approx(1e-5, rel=1e-6)


def test_convert_rdp_linear(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "convert", "--rdp-linear", "0.5", "--delta", "1e-5", "--json")
    obj = json.loads(out)
    # linear RDP rho*alpha with rho = mu^2/2 is implied by mu = 1 GDP: the RDP-derived epsilon is
    # valid, so it can never be below the exact Gaussian value 4.37718, and Mironov's closed form
    # rho + 2 sqrt(rho log(1/delta)) = 5.298 is an upper bound on the best conversion.
    assert code == 0 and 4.37718 < obj["epsilon"] <= 0.5 + 2 * (0.5 * 11.512925) ** 0.5


@pytest.mark.parametrize(
    "argv, param",
    [
        (["convert", "--mu", "-1", "--delta", "1e-5"], "mu"),
        (["convert", "--mu", "1", "--delta", "2"], "delta"),
        (["convert", "--mu", "abc", "--delta", "1e-5"], "mu"),
        (["convert", "--rdp-linear", "-0.1", "--delta", "1e-5"], "rdp-linear"),
        (
            [
                "account",
                "--algorithm",
                "gd",
                "--n",
                "100",
                "--steps",
                "10",
                "--lr",
                "0.1",
                "--noise-std",
                "-1",
                "--sensitivity",
                "1",
            ],
            "noise_std",
        ),
        (
            [
                "account",
                "--algorithm",
                "sgd",
                "--n",
                "100",
                "--batch-size",
                "10",
                "--steps",
                "10",
                "--lr",
                "0.1",
                "--noise-std",
                "1",
                "--clip",
                "1",
            ],
            "sampling",
        ),
        (
            [
                "account",
                "--algorithm",
                "cgd",
                "--n",
                "100",
                "--batch-size",
                "1000",
                "--steps",
                "10",
                "--lr",
                "0.1",
                "--noise-std",
                "1",
                "--clip",
                "1",
            ],
            "batch_size",
        ),
        (
            [
                "account",
                "--algorithm",
                "gd",
                "--n",
                "100",
                "--steps",
                "10",
                "--lr",
                "0.1",
                "--noise-std",
                "1",
                "--sensitivity",
                "1",
                "--delta",
                "0",
            ],
            "delta",
        ),
    ],
)
def test_invalid_input_exit_2_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], param: str
) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert param in err


def test_account_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        "account",
        "--algorithm",
        "gd",
        "--n",
        "1000",
        "--steps",
        "100",
        "--lr",
        "0.1",
        "--noise-std",
        "0.01",
        "--sensitivity",
        "1",
        "--delta",
        "1e-5",
        "--orders",
        "2,4",
        "--json",
    )
    assert code == 0
    obj = json.loads(out)
    assert set(obj) >= {"setting", "delta", "best", "results", "not_applicable"}
    assert set(obj["best"]) >= {"bound", "epsilon", "delta", "mu", "kind"}
    assert obj["best"]["kind"] == "bound"
    for r in obj["results"]:
        assert set(r) >= {
            "bound",
            "theorem",
            "reference",
            "kind",
            "epsilon",
            "delta",
            "mu",
            "rdp",
            "details",
        }
    rdp = [r for r in obj["results"] if r["rdp"]]
    assert rdp and [a for a, _ in rdp[0]["rdp"]] == [2.0, 4.0]
    assert obj["setting"]["steps"] == 100 and obj["setting"]["per_step_mu"] == pytest.approx(0.1)


def test_config_file_and_flag_precedence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        'algorithm = "gd"\nn = 1000\nsteps = 100\nlr = 0.1\nnoise-std = 0.01\nsensitivity = 1.0\n'
    )
    code, out, _ = run_cli(capsys, "account", "--config", str(cfg), "--steps", "25", "--json")
    assert code == 0 and json.loads(out)["setting"]["steps"] == 25


def test_calibrate_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        "calibrate",
        "--algorithm",
        "gd",
        "--n",
        "1000",
        "--steps",
        "100",
        "--lr",
        "0.1",
        "--clip",
        "0.5",
        "--epsilon",
        "2",
        "--delta",
        "1e-5",
        "--solve",
        "noise",
        "--json",
    )
    assert code == 0
    obj = json.loads(out)
    assert set(obj) == {"noise_std", "noise_multiplier", "epochs", "best"}
    assert obj["best"]["epsilon"] <= 2.0
    assert obj["noise_multiplier"] == pytest.approx(obj["noise_std"] * 1000 / 0.5)


def test_account_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "curves.png"
    code, _, _ = run_cli(
        capsys,
        "account",
        "--algorithm",
        "gd",
        "--n",
        "1000",
        "--steps",
        "100",
        "--lr",
        "0.1",
        "--noise-std",
        "0.01",
        "--sensitivity",
        "1",
        "--plot",
        str(png),
    )
    assert code == 0 and png.stat().st_size > 10_000


def test_console_script_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "lastiterate.cli", "convert", "--mu", "1", "--delta", "1e-5"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and "4.377" in proc.stdout


def test_demo_reports_the_last_iterate_gain(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's numbers come from the accountant: paper 000 Table 1 (E = 200, lambda = 0.002)
    prints 7.58 for ours and 83.83 for GDP composition."""
    code, out, _ = run_cli(capsys, "demo")
    assert code == 0
    assert "(7.579, 1e-05)-DP" in out and "shifted-interpolation" in out
    assert "83.83" in out
    assert "only composition applies" in out


def test_reproduce_list_and_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "reproduce", "list")
    assert code == 0
    for name in (
        "paper000-table1",
        "paper001-figure1",
        "paper002-figure1",
        "paper003-bounds",
        "paper004-table1",
        "logreg-digits",
    ):
        assert name in out
    code, out, err = run_cli(capsys, "reproduce", "no-such-table")
    assert code == 2 and out == "" and "name=" in err and len(err.strip().splitlines()) == 1
