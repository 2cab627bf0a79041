"""Hypothesis fuzz of the flags of ``sweep``, ``calibrate`` (all three solves), ``train`` and of
``--config`` files, under the CLI contract (:mod:`.contract`), plus the regressions it found.

CI draws a bounded, derandomised number of examples per command (``LASTITERATE_FUZZ=<n>`` any
count, as ``tests/test_cli_fuzz.py``); the sampled-batch composition engine is kept to small T so
that one call stays well under a second.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lastiterate.errors import ParameterError
from lastiterate.formatting import fmt_value

from .contract import check_contract

_PROFILE = os.environ.get("LASTITERATE_FUZZ", "ci")
EXAMPLES = int(_PROFILE) if _PROFILE.isdigit() else 40
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=_PROFILE == "ci",
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
HOSTILE = [
    "nan", "inf", "-inf", "-0", "0", "1e308", "1e-320", "5e-324", "-1", "", "é", "x", "1e400",
    "0x10", "1_000", " 1", "1,2", str(10**30), "\u202e1",
]  # fmt: skip


def value(low: float, high: float, hostile: float = 0.1) -> st.SearchStrategy[str]:
    """Mostly a log-uniform number in [low, high], now and then a hostile string."""
    normal = st.floats(math.log10(low), math.log10(high)).map(lambda e: f"{10.0**e:.4g}")
    return st.one_of(normal, st.sampled_from(HOSTILE)) if hostile else normal


BASES = [
    (
        "--algorithm gd --n 100 --steps 20 --lr 0.1 --noise-std 1 --sensitivity 1 "
        "--strong-convexity 0.5 --smoothness 2"
    ),
    (
        "--algorithm cgd --n 100 --batch-size 10 --epochs 2 --lr 0.1 --noise-std 1 --clip 1 "
        "--convex --smoothness 2 --diameter 1"
    ),
    (
        "--algorithm sgd --sampling poisson --n 100 --batch-size 10 --steps 5 --lr 0.1 "
        "--noise-multiplier 1 --clip 1 --adjacency add-remove"
    ),
    (
        "--algorithm sgd --sampling shuffle --n 100 --batch-size 10 --epochs 1 --lr 0.1 "
        "--noise-std 1 --clip 1"
    ),
]
VARY_FIELDS = [
    "epochs", "steps", "noise-std", "noise-multiplier", "batch-size", "lr", "n", "clip",
    "sensitivity", "strong-convexity", "smoothness", "contraction", "diameter", "bogus", "",
]  # fmt: skip


@st.composite
def sweep_argv(draw: st.DrawFn) -> list[str]:
    argv = ["sweep", *draw(st.sampled_from(BASES)).split()]
    vary = []
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(VARY_FIELDS))
        values = draw(st.lists(value(1e-3, 50, hostile=0.1), max_size=3))
        vary.append(f"{name}={','.join(values)}")
    if vary:
        argv += ["--vary", *vary]
    if draw(st.booleans()):
        argv.append("--json")
    if draw(st.integers(0, 4)) == 0:
        argv += ["--csv", "-"]
    if draw(st.integers(0, 5)) == 0:
        argv += ["--delta", draw(st.sampled_from(["1e-10", "0.5", *HOSTILE[:6]]))]
    return argv


@FUZZ
@given(argv=sweep_argv())
def test_sweep_answers_every_input(argv: list[str]) -> None:
    check_contract(argv)


@st.composite
def calibrate_argv(draw: st.DrawFn) -> list[str]:
    algorithm = draw(st.sampled_from(["gd", "cgd", "sgd", "sgd"]))
    argv = ["calibrate", "--algorithm", algorithm]
    if algorithm == "sgd":
        argv += ["--sampling", draw(st.sampled_from(["poisson", "uniform", "shuffle"]))]
    n = draw(st.integers(1, 2000))
    argv += ["--n", str(n)]
    if algorithm != "gd":
        argv += ["--batch-size", str(draw(st.integers(1, n)))]
    if draw(st.booleans()):
        argv += ["--steps", str(draw(st.integers(1, 100)))]
    else:
        argv += ["--epochs", str(draw(st.integers(1, 10)))]
    argv += ["--lr", draw(value(1e-3, 2, hostile=0.05)), "--clip", draw(value(0.1, 10, 0.05))]
    solve = draw(st.sampled_from(["noise", "epochs", "batch-size"]))
    if solve != "noise":
        flag = draw(st.sampled_from(["--noise-std", "--noise-multiplier"]))
        argv += [flag, draw(value(1e-2, 30, hostile=0.05))]
    for flag, low, high in (("--smoothness", 0.1, 10), ("--strong-convexity", 1e-3, 1)):
        if draw(st.booleans()):
            argv += [flag, draw(value(low, high, hostile=0.05))]
    if draw(st.booleans()):
        argv += ["--convex", "--diameter", draw(value(0.1, 100, hostile=0.05))]
    argv += ["--solve", solve, "--epsilon", draw(value(0.03, 30, hostile=0.05))]
    # closed-form bounds only: the composition engine inside a search is the slow part
    bound = draw(st.sampled_from(["gdp-composition", "shifted-interpolation", "langevin-lsi"]))
    argv += ["--bound", bound]
    if draw(st.booleans()):
        argv.append("--json")
    return argv


@FUZZ
@given(argv=calibrate_argv())
def test_calibrate_answers_every_solve(argv: list[str]) -> None:
    check_contract(argv)


def test_calibrate_names_why_no_bound_applies() -> None:
    # was "no applicable bound for this run" with no reason and no parameter
    argv = shlex.split(
        "calibrate --algorithm cgd --n 100 --batch-size 10 --epochs 2 --lr 0.1 --clip 1 "
        "--solve noise --epsilon 1 --bound langevin-lsi"
    )
    rc, _, err = check_contract(argv)
    assert rc == 2 and "langevin-lsi: no theorem of this family for cgd" in err


@st.composite
def train_argv(draw: st.DrawFn) -> list[str]:
    dataset = draw(st.sampled_from(["iris", "wine", "diabetes", "breast-cancer"]))
    model = draw(st.sampled_from(["logreg", "linreg", "mlp"]))
    algorithm = draw(st.sampled_from(["gd", "cgd", "sgd"]))
    argv = ["train", "--dataset", dataset, "--model", model, "--algorithm", algorithm]
    if algorithm == "sgd":
        argv += ["--sampling", draw(st.sampled_from(["poisson", "uniform", "shuffle"]))]
    if algorithm != "gd":
        argv += ["--batch-size", draw(st.sampled_from(["1", "16", "64", "0", "100000", "x"]))]
    argv += ["--epochs", draw(st.sampled_from(["1", "2", "0.5", *HOSTILE[:8]]))]
    argv += ["--lr", draw(value(1e-3, 2, hostile=0.05)), "--clip", draw(value(0.1, 10, 0.05))]
    noise = draw(st.sampled_from(["--noise-std", "--noise-multiplier", "--target-epsilon"]))
    argv += [noise, draw(value(0.1, 10, hostile=0.05))]
    options = {
        "--feature-norm": value(0.1, 10, hostile=0.2),
        "--l2": value(1e-4, 1, hostile=0.2),
        "--diameter": value(0.1, 100, hostile=0.2),
        "--test-size": st.sampled_from(["0.2", "0", "1", "0.99", "nan", "-0.1"]),
        "--scaling": st.sampled_from(
            ["auto", "clip-only", "data-public", "private", "public-range"]
        ),
        "--feature-range": st.sampled_from(["0,1", "1,0", "0,0", "nan,1", "0,inf", "", "a,b"]),
        "--target-range": st.sampled_from(["-400,400", "1,0", "nan,1", ""]),
        "--statistics-mu": value(0.01, 10, hostile=0.2),
        "--hidden": st.sampled_from(["3", "3,3", "0", "", "a", "100000000", "5000"]),
        "--seed": st.sampled_from(["0", "1", "-1", str(2**32), "x"]),
        "--threads": st.sampled_from(["1", "0", "-1"]),
        "--delta": st.sampled_from(["1e-5", "0", "1", "nan", "1e-300"]),
        "--optimizer": st.sampled_from(["sgd", "adam"]),
        "--classes": st.sampled_from(["0,1", "a", ""]),
        "--nproc": st.sampled_from(["1", "0", "65", "-1"]),
        "--device": st.sampled_from(["cpu", "cuda"]),
    }
    for flag, values in options.items():
        if draw(st.integers(0, 9)) == 0:
            argv += [flag, draw(values)]
    if draw(st.integers(0, 9)) == 0:
        argv.append("--intercept")
    if draw(st.booleans()):
        argv.append("--json")
    return argv


@FUZZ
@given(argv=train_argv())
def test_train_answers_every_flag(argv: list[str]) -> None:
    if "--device" in argv and argv[argv.index("--device") + 1] == "cuda":
        pytest.importorskip("torch")
    check_contract(argv, seconds=120)


@pytest.mark.parametrize("algorithm", ["gd", "cgd"])
def test_train_refuses_epochs_beyond_the_step_range(algorithm: str) -> None:
    # --epochs 1e308 with cgd overflowed to infinitely many steps: OverflowError (exit 70)
    argv = shlex.split(
        f"train --dataset iris --model logreg --algorithm {algorithm} --batch-size 1 "
        "--epochs 1e308 --lr 0.1 --noise-std 1 --clip 1"
    )
    if algorithm == "gd":
        argv.remove("--batch-size")
        argv.remove("1")
    rc, _, err = check_contract(argv)
    assert rc == 2 and ("epochs=" in err or "steps=" in err)


@pytest.mark.parametrize("hidden", ["100000000", "4097", ",".join(["2"] * 65)])
def test_train_refuses_a_network_too_large_to_allocate(hidden: str) -> None:
    # --hidden 100000000 asked torch for 28.8 GB: RuntimeError (exit 70) after ~30 s
    argv = [
        *shlex.split(
            "train --dataset iris --model mlp --algorithm gd --epochs 1 --lr 0.1 --noise-std 1 "
            "--clip 1 --hidden"
        ),
        hidden,
    ]
    rc, _, err = check_contract(argv)
    assert rc == 2 and "hidden=" in err


CONFIG_KEYS = [
    "algorithm", "n", "batch-size", "batch_size", "steps", "epochs", "lr", "noise-std",
    "noise-multiplier", "clip", "sensitivity", "strong-convexity", "smoothness", "convex",
    "contraction", "diameter", "sampling", "adjacency", "delta", "epsilon", "bound", "json",
    "orders", "vary", "config", "bogus",
]  # fmt: skip
CONFIG_VALUES = [
    "1", "0", "-1", "1.5", "1e308", "1e-320", "nan", "inf", "-inf", "true", "false", '"gd"',
    '"sgd"', '"poisson"', '"x"', '""', "[1, 2]", "[]", '["gdp-composition"]', '["bogus"]',
    "{a = 1}", "1979-05-27", "0x10", "99999999999999999999", '"1e-5"', '"é"', '["epochs=1,2"]',
]  # fmt: skip
GOOD_CONFIG = {
    "algorithm": '"gd"', "n": "100", "steps": "20", "lr": "0.1", "noise-std": "1",
    "sensitivity": "1", "strong-convexity": "0.5", "smoothness": "2",
}  # fmt: skip


@FUZZ
@given(
    base=st.booleans(),
    entries=st.lists(
        st.tuples(st.sampled_from(CONFIG_KEYS), st.sampled_from(CONFIG_VALUES)), max_size=4
    ),
    tail=st.sampled_from(["", "\n[section]\nn = 1\n", "\nnot toml\n", "\nn = 5\n"]),
    command=st.sampled_from(["account", "sweep", "calibrate"]),
)
def test_config_files_answer_every_content(
    tmp_path: Path, base: bool, entries: list[tuple[str, str]], tail: str, command: str
) -> None:
    table = dict(GOOD_CONFIG) if base else {}
    table.update(entries)
    path = tmp_path / "run.toml"
    path.write_text("".join(f"{k} = {v}\n" for k, v in table.items()) + tail, encoding="utf-8")
    argv = [command, "--config", str(path)]
    if command == "sweep":
        argv += ["--vary", "epochs=1,2"]
    if command == "calibrate":
        argv += ["--solve", "noise", "--epsilon", "1", "--bound", "gdp-composition"]
    check_contract(argv)


@pytest.mark.parametrize(
    "content",
    [b"", b"\xef\xbb\xbfn = 1\n", bytes(range(256)), b"n = 1\nn = 2\n", b"[[n]]\n", b"n = "],
)
def test_odd_config_bytes(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(content)
    base = "account --algorithm gd --n 10 --steps 3 --lr 0.1 --noise-std 1 --sensitivity 1"
    check_contract([*base.split(), "--config", str(path)])


SWEEP = shlex.split(
    "sweep --algorithm gd --n 100 --steps 20 --lr 0.1 --noise-std 1 --sensitivity 1 "
    "--strong-convexity 0.5 --smoothness 2 --vary epochs=1,2"
)
ACCOUNT = shlex.split(
    "account --algorithm gd --n 100 --steps 20 --lr 0.1 --noise-std 1 --sensitivity 1"
)


@pytest.mark.parametrize("name", ["plot.txt", "data.csv", "dir", "", "-", "plot.svg"])
@pytest.mark.parametrize("command", ["sweep", "account"])
def test_plot_outputs_that_are_no_png_files_are_refused(
    tmp_path: Path, name: str, command: str
) -> None:
    # matplotlib's ValueError (unsupported format) and a directory were exit 70 or wrote DIR.png
    (tmp_path / "dir").mkdir()
    target = str(tmp_path / name) if name not in ("", "-") else name
    argv = [*(SWEEP if command == "sweep" else ACCOUNT), "--plot", target]
    rc, _, err = check_contract(argv)
    assert rc == 2 and "plot=" in err


@pytest.mark.parametrize("where", ["dir", "", "/proc/version"])
def test_csv_outputs_that_cannot_be_written_are_refused(tmp_path: Path, where: str) -> None:
    # a directory was IsADirectoryError (exit 70), /proc/version an OSError
    if where == "/proc/version" and not Path(where).exists():
        pytest.skip("no /proc/version here")
    (tmp_path / "dir").mkdir()
    target = str(tmp_path / where) if where == "dir" else where
    rc, _, err = check_contract([*SWEEP, "--csv", target])
    assert rc == 2 and "csv=" in err


@pytest.mark.parametrize("seed", ["-1", str(2**70)])
def test_audit_seed_outside_numpy_range_is_refused(seed: str) -> None:
    # a negative seed raised numpy's ValueError (exit 70) in the chain audits
    argv = shlex.split(
        "audit auto --algorithm gd --n 10 --steps 3 --lr 0.1 --noise-std 1 --sensitivity 1 "
        "--strong-convexity 0.5 --smoothness 2 --samples 10 --seed"
    )
    rc, _, err = check_contract([*argv, seed])
    assert rc == 2 and "seed=" in err


def test_no_command_is_one_error_line_and_exit_2(capsys):
    """A bare ``lastiterate`` printed the help and exited 2 with nothing on stderr."""
    from lastiterate.cli import main

    assert main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "command is required" in err[0]


HUGE_RUN = shlex.split("--algorithm gd --n 100 --lr 0.1 --noise-std 1 --sensitivity 1")


@pytest.mark.parametrize(
    "argv",
    [
        ["account", *HUGE_RUN, "--steps", str(10**300)],
        ["sweep", *HUGE_RUN, "--vary", "steps=1e300,10"],
    ],
    ids=["account-steps", "sweep-vary-steps"],
)
def test_huge_step_counts_are_named_compactly(argv: list[str]) -> None:
    # the messages and the sweep table printed the 301-digit integer
    _, out, err = check_contract(argv)
    text = out + err
    assert "steps=1e+300" in text, text
    assert not re.search(r"\d{16}", text), text


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0"),
        (10**15 - 1, "999999999999999"),
        (-(10**15), "-1e+15"),
        (10**300, "1e+300"),
        # str() refuses more than 4300 digits: the message itself raised ValueError
        pytest.param(10**5000, "1e+5000", id="10**5000"),
        (int(1e300), "1e+300"),
        (12345678901234567890, "1.235e+19"),
        (np.int64(2**62), "4.612e+18"),
    ],
)
def test_fmt_value_prints_huge_integers_compactly(n: int, text: str) -> None:
    assert fmt_value(n) == text
    message = ParameterError("steps", n, "out of range").args[0]
    assert message == f"steps={text} is invalid: out of range"
    assert fmt_value(True) == "True" and fmt_value("7") == "'7'" and fmt_value(0.5) == "0.5"
