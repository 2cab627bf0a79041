"""The CLI contract beyond single commands: exit statuses, typed config files, no prefix matching,
no traceback on a closed pipe, one failing theorem not taking the report down."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lastiterate.accountant import STRICT_ENV, account
from lastiterate.cli import main
from lastiterate.cli.common import EXIT_NO_BOUND, EXIT_USAGE
from lastiterate.run import Run

GD = [
    "--algorithm",
    "gd",
    "--n",
    "100",
    "--steps",
    "50",
    "--lr",
    "0.1",
    "--noise-std",
    "0.5",
    "--sensitivity",
    "1",
]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_usage_error(code: int, out: str, err: str, *words: str) -> None:
    assert code == EXIT_USAGE and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lastiterate: error:"), err
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_prefixes_of_flags_are_not_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    # argparse would read --noise as --noise-std and --target as --target-epsilon
    code, out, err = run_cli(capsys, "account", *GD[:-4], "--noise", "0.5", "--sensitivity", "1")
    assert_usage_error(code, out, err, "--noise")
    code, out, err = run_cli(
        capsys,
        "calibrate",
        *GD[:8],
        "--sensitivity",
        "1",
        "--solve",
        "noise",
        "--epsilon",
        "1",
        "--target",
        "3",
    )
    assert_usage_error(code, out, err, "--target")


def test_no_applicable_bound_is_a_distinct_status(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "account",
        "--algorithm",
        "cgd",
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
        "--sensitivity",
        "1",
        "--bound",
        "langevin-lsi",
    ]
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code == EXIT_NO_BOUND and err == ""
    obj = json.loads(out)
    assert obj["best"] is None
    assert "langevin-lsi" in obj["no_bound_reason"]
    code, out, _ = run_cli(capsys, *argv)
    assert code == EXIT_NO_BOUND
    assert "No applicable bound: langevin-lsi" in out


def test_epsilon_query_reports_compositions_delta(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "account",
        "--algorithm",
        "gd",
        "--n",
        "100",
        "--steps",
        "2000",
        "--lr",
        "0.05",
        "--noise-std",
        "0.05",
        "--sensitivity",
        "1",
        "--strong-convexity",
        "0.5",
        "--smoothness",
        "1",
        "--epsilon",
        "8",
    ]
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0
    comp = account(
        Run(
            algorithm="gd",
            n=100,
            steps=2000,
            lr=0.05,
            noise_std=0.05,
            sensitivity=1.0,
            strong_convexity=0.5,
            smoothness=1.0,
        ),
        epsilon=8.0,
    ).composition()
    assert comp is not None and comp.delta > 0
    assert "would give epsilon = 8" not in out
    assert f"would give delta = {comp.delta:.4g} at epsilon = 8" in out


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "run.toml"
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize(
    "toml, key",
    [
        ('convex = "false"', "convex"),
        ('noise_std = "0.5"', "noise_std"),
        ("n = 100.5", "n"),
        ("n = true", "n"),
        ('algorithm = "adam"', "algorithm"),
        ("bound = 3", "bound"),
        ("nonsense = 1", "nonsense"),
    ],
)
def test_config_values_are_typed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, toml: str, key: str
) -> None:
    cfg = _write(
        tmp_path,
        'algorithm = "gd"\nsteps = 50\nlr = 0.1\nsensitivity = 1\n'.replace(
            'algorithm = "gd"\n', "" if key == "algorithm" else 'algorithm = "gd"\n'
        )
        + toml
        + "\n",
    )
    argv = ["account", "--config", cfg]
    if key != "n":
        argv += ["--n", "100"]
    if key != "noise_std":
        argv += ["--noise-std", "0.5"]
    code, out, err = run_cli(capsys, *argv)
    assert_usage_error(code, out, err, repr(key))


def test_config_bound_string_is_one_id(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cfg = _write(tmp_path, 'bound = "gdp-composition"\nconvex = false\n')
    code, out, _ = run_cli(capsys, "account", *GD, "--config", cfg, "--json")
    assert code == 0
    assert [r["bound"] for r in json.loads(out)["results"]] == ["gdp-composition"]


def test_config_that_is_a_folder_or_binary(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run_cli(capsys, "account", *GD, "--config", str(tmp_path))
    assert_usage_error(code, out, err, "config", "directory")
    binary = tmp_path / "x.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    code, out, err = run_cli(capsys, "account", *GD, "--config", str(binary))
    assert_usage_error(code, out, err, "config")


def test_reproduce_out_naming_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "taken"
    f.write_text("x")
    code, out, err = run_cli(capsys, "reproduce", "paper003-bounds", "--quick", "--out", str(f))
    assert_usage_error(code, out, err, "out")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_numbers_are_refused(capsys: pytest.CaptureFixture[str], value: str) -> None:
    code, out, err = run_cli(capsys, "account", *GD[:-2], "--sensitivity", value)
    assert_usage_error(code, out, err, "--sensitivity")


def test_closed_stdout_gives_no_traceback() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "lastiterate", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away before the first write
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and err.strip() == "", err
    assert proc.returncode == 141


def test_one_failing_theorem_does_not_take_the_report_down(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lastiterate.bounds import base as _base

    def broken(run: Run, query: object) -> object:
        raise ZeroDivisionError("float division by zero")

    _base.registered()  # registers every bound module (the test must not rely on test order)
    specs = [s for s in _base._REGISTRY if s.id == "rdp-composition"]
    assert specs
    patched = [
        (
            _base.BoundSpec(s.id, s.theorem, s.reference, s.kind, broken, s.algorithms)
            if s.id == "rdp-composition"
            else s
        )
        for s in _base._REGISTRY
    ]
    monkeypatch.setattr(_base, "_REGISTRY", patched)
    monkeypatch.delenv(STRICT_ENV, raising=False)
    code, out, err = run_cli(capsys, "account", *GD, "--json")
    assert code == 0 and err == ""
    obj = json.loads(out)
    assert obj["best"] is not None
    assert "rdp-composition" not in [r["bound"] for r in obj["results"]]
    assert obj["failures"] == [
        {
            "bound": "rdp-composition",
            "theorem": specs[0].theorem,
            "reason": "ZeroDivisionError: float division by zero",
        }
    ]
    code, out, _ = run_cli(capsys, "account", *GD)
    assert "rdp-composition [" in out and "ZeroDivisionError" in out
    monkeypatch.setenv(STRICT_ENV, "1")  # the test suite's own setting: failures are raised
    with pytest.raises(ZeroDivisionError):
        account(Run(algorithm="gd", n=100, steps=50, lr=0.1, noise_std=0.5, sensitivity=1.0))


@pytest.mark.parametrize(
    "argv, param",
    [
        (["audit", "linear", *GD, "--noise-scale", "1e-300", "--samples", "1000"], "noise_scale"),
        (
            ["audit", "linear", *GD, "--sensitivity-scale", "1e300", "--samples", "1000"],
            "sensitivity_scale",
        ),
        (
            [
                "train",
                "--dataset",
                "iris",
                "--model",
                "logreg",
                "--algorithm",
                "gd",
                "--epochs",
                "1",
                "--lr",
                "0.1",
                "--noise-std",
                "1",
                "--clip",
                "1",
                "--threads",
                "100000",
            ],
            "threads",
        ),
    ],
)
def test_extreme_work_parameters_are_refused(
    capsys: pytest.CaptureFixture[str], argv: list[str], param: str
) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert_usage_error(code, out, err, param)


def test_audit_work_is_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "audit",
        "linear",
        "--algorithm",
        "gd",
        "--n",
        "100",
        "--steps",
        "1000000",
        "--lr",
        "0.1",
        "--sensitivity",
        "1",
        "--noise-std",
        "1",
    ]
    code, out, err = run_cli(capsys, *argv)  # 2e5 default chains x 1e6 steps: refused at once
    assert_usage_error(code, out, err, "samples", "--steps")


def test_an_internal_error_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lastiterate.cli import convert
    from lastiterate.cli.common import EXIT_INTERNAL

    def crash(args: object) -> int:
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(convert, "cmd_convert", crash)
    monkeypatch.delenv("LASTITERATE_DEBUG", raising=False)
    code, out, err = run_cli(capsys, "convert", "--mu", "1", "--delta", "1e-5")
    assert code == EXIT_INTERNAL and out == "" and len(err.strip().splitlines()) == 1
    assert "internal error (ZeroDivisionError: float division by zero)" in err
    monkeypatch.setenv("LASTITERATE_DEBUG", "1")  # the suite's setting: the traceback escapes
    with pytest.raises(ZeroDivisionError):
        main(["convert", "--mu", "1", "--delta", "1e-5"])


def test_every_subcommand_is_listed_and_every_flag_has_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import argparse

    from lastiterate.cli import SUBCOMMANDS, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(SUBCOMMANDS)
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    for name, sp in sub.choices.items():
        assert f"    {name}" in top, name
        missing = [a.option_strings or a.dest for a in sp._actions if not a.help]
        assert not missing, (name, missing)
