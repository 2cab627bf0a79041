"""Every input has an answer (issue 8 section 4): a property-based fuzz of the command line.

Hypothesis draws argument vectors over the CLI's argument space -- well-formed runs, extreme and
malformed values, missing and conflicting flags -- and drives ``lastiterate.cli.main(argv)``.
The contract, for every draw:

* exit status 0 with well-formed output (``--json``: one standard JSON object, no NaN/Infinity
  tokens; text: no ``nan``), and nothing on stderr but warnings-free silence; or
* exit status 2, nothing on stdout and exactly ONE line on stderr, starting with
  ``lastiterate: error:``; for a ParameterError the named parameter is one of the command's inputs;
* (``audit`` only) exit status 1 with a report (a VIOLATION verdict);
* never an exception escaping ``main``, never a Python warning, never a hang (each call is
  limited by ``CALL_SECONDS``).

CI runs ``max_examples`` = 100 per subcommand (about 30 s); ``LASTITERATE_FUZZ=deep``
runs 3000 (``LASTITERATE_FUZZ=<number>`` any count).  Argument combinations that are legitimately
slow are not drawn: sampled-batch (Poisson, uniform) runs keep T <= 2000, where the composition
engine answers in well under a second; larger T is exercised for gd, cgd and shuffled batches.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import warnings
from typing import Any

import pytest
from fuzz.contract import _reject_constant
from fuzz.contract import time_limit as _time_limit
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from lastiterate.cli import main
from lastiterate.cli.common import EXIT_NO_BOUND
from lastiterate.run import RUN_CHOICES, Run

_PROFILE = os.environ.get("LASTITERATE_FUZZ", "ci")
MAX_EXAMPLES = 3000 if _PROFILE == "deep" else (int(_PROFILE) if _PROFILE.isdigit() else 100)
CALL_SECONDS = 30  # one CLI call longer than this counts as a hang
FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=_PROFILE == "ci",  # CI is reproducible; deep runs explore
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
    database=None,  # nothing written into the checkout
)

# Known failures inside modules other sessions are rewriting (the PLD composition engine): a
# valid run refused with a grid-size message.  They satisfy the exit-2 contract but name no input
# of the command; they are listed in test_known_engine_refusals below and tolerated here.
KNOWN_ENGINE_REFUSAL = re.compile(r"needs [0-9.e+]+ grid points")

# Parameters a ParameterError may name besides the command's own flags (derived or query inputs).
DERIVED_NAMES = {"mu", "delta", "epsilon", "rdp-linear", "name", "config", "bound", "orders"}


def run_cli(argv: list[str]) -> tuple[int, str, str, list[str]]:
    """(exit status, stdout, stderr, warnings) of ``main(argv)``; exceptions propagate."""
    out, err = io.StringIO(), io.StringIO()
    with (
        warnings.catch_warnings(record=True) as caught,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        warnings.simplefilter("always")
        with _time_limit(CALL_SECONDS):
            try:
                rc = main(argv)
            except SystemExit as exc:  # --help / --version
                rc = int(exc.code or 0)
    return (
        rc,
        out.getvalue(),
        err.getvalue(),
        [f"{w.category.__name__}: {w.message}" for w in caught],
    )


def _flags_of(argv: list[str]) -> set[str]:
    return {a[2:].split("=")[0] for a in argv if a.startswith("--")}


def _known_engine_crash(exc: BaseException) -> bool:
    """An exception from the PLD engine that its rewrite is fixing (see
    test_known_engine_failures)."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    in_engine = any(f.filename.replace("\\", "/").endswith("notions/pld.py") for f in frames)
    return in_engine and "is NaN; solver cannot continue" in str(exc)


def check_contract(argv: list[str], *, allow_violation: bool = False) -> tuple[int, str, str]:
    """Run ``argv`` and assert the CLI contract; returns (status, stdout, stderr)."""
    try:
        rc, out, err, caught = run_cli(argv)
    except ValueError as exc:
        if not _known_engine_crash(exc):
            raise
        event("known PLD engine crash (tolerated, see test_known_engine_failures)")
        return -1, "", str(exc)
    assert not caught, f"warnings for {argv}: {caught}"
    if rc == 2:
        lines = err.splitlines()
        assert len(lines) == 1, f"exit 2 needs exactly one stderr line, got {lines!r} for {argv}"
        assert lines[0].startswith("lastiterate: error:"), lines[0]
        assert out == "", f"exit 2 printed on stdout: {out[:200]!r}"
        m = re.match(r"lastiterate: error: ([a-z_][a-z_0-9\-]*)=", lines[0])
        if KNOWN_ENGINE_REFUSAL.search(lines[0]):
            event("known PLD engine refusal (tolerated, see test_known_engine_failures)")
        elif m:
            name = m.group(1).replace("_", "-")
            known = (
                _flags_of(argv) | DERIVED_NAMES | {f.replace("_", "-") for f in Run.field_names()}
            )
            assert name in known, (
                f"error names {name!r}, which is not an input of {argv}: {lines[0]}"
            )
        return rc, out, err
    if (
        rc == EXIT_NO_BOUND
    ):  # account: valid input, no theorem applies; best is null with the reason
        assert argv[0] == "account", f"exit {rc} from {argv[0]}"
        if "--json" in argv:
            doc = json.loads(out, parse_constant=_reject_constant)
            assert doc["best"] is None and doc["no_bound_reason"], doc
        else:
            assert "No applicable bound: " in out
        return rc, out, err
    assert rc == 0 or (allow_violation and rc == 1), f"exit status {rc} for {argv}: {err[-500:]}"
    assert err == "", f"stderr on success for {argv}: {err[-500:]!r}"
    assert out.strip(), f"no output for {argv}"
    if "--json" in argv:
        doc = json.loads(out, parse_constant=_reject_constant)
        assert isinstance(doc, dict)
    else:
        assert not re.search(r"\bnan\b", out, re.IGNORECASE), f"NaN in the output of {argv}"
    return rc, out, err


# ---------------------------------------------------------------------- value strategies
EXTREME_REALS = [
    "0",
    "-1",
    "5e-324",
    "1e-300",
    "1e-31",
    "1e-30",
    "1e30",
    "1e31",
    "1e300",
    "1e308",
    "inf",
    "-inf",
    "nan",
    "abc",
    "",
]


def reals(low: float, high: float) -> st.SearchStrategy[str]:
    """A real flag value: mostly log-uniform in [low, high], sometimes extreme or malformed."""
    normal = st.floats(math.log10(low), math.log10(high)).map(lambda e: f"{10.0**e:.6g}")
    return st.one_of(normal, normal, normal, normal, st.sampled_from(EXTREME_REALS))


def ints(low: int, high: int) -> st.SearchStrategy[str]:
    normal = st.integers(low, high).map(str)
    bad = st.sampled_from(["0", "-3", "1.5", "1e3", "10000000000000", str(10**400), "x"])
    return st.one_of(normal, normal, normal, normal, bad)


def maybe(
    flag: str, values: st.SearchStrategy[str], optional: bool = True
) -> st.SearchStrategy[list[str]]:
    """``[flag, value]``, or (when ``optional``) sometimes nothing."""
    given_flag = values.map(lambda v: [flag, v])
    return st.one_of(st.just([]), given_flag) if optional else given_flag


EXTREME_NUMBERS = ["0", "5e-324", "1e-300", "1e-30", "1e30", "1e300"]


@st.composite
def run_flags(draw: st.DrawFn, *, noise: bool = True, small: bool = False) -> list[str]:
    """The shared run flags of account / calibrate / audit.

    Three draws in four describe a complete run (every required flag, values in practical ranges,
    now and then one extreme but parseable number); one in four is chaotic (flags left out or
    malformed, values anywhere).
    """
    chaotic = draw(st.integers(0, 3)) == 0

    def num(low: float, high: float) -> str:
        if chaotic:
            return draw(reals(low, high))
        normal = st.floats(math.log10(low), math.log10(high)).map(lambda e: f"{10.0**e:.6g}")
        if draw(st.integers(0, 29)) == 17:  # now and then one extreme but parseable number
            return draw(st.sampled_from(EXTREME_NUMBERS))
        return draw(normal)

    def count(low: int, high: int) -> str:
        return draw(ints(low, high)) if chaotic else str(draw(st.integers(low, high)))

    def present() -> bool:
        return draw(st.booleans()) if chaotic else True

    argv: list[str] = []
    algorithm = draw(st.sampled_from(RUN_CHOICES["algorithm"]))
    if present():
        argv += ["--algorithm", algorithm]
    sampling = draw(st.sampled_from(RUN_CHOICES["sampling"])) if algorithm == "sgd" else None
    if chaotic and draw(st.booleans()):
        sampling = draw(st.sampled_from([*RUN_CHOICES["sampling"], None]))
    if sampling is not None:
        argv += ["--sampling", sampling]
    n_max = 200 if small else 5000
    n = draw(st.integers(1, n_max))
    argv += ["--n", count(1, n_max) if chaotic else str(n)]
    if algorithm != "gd" or chaotic:
        argv += ["--batch-size", count(1, n_max) if chaotic else str(draw(st.integers(1, n)))]
    # T: sampled batches (the composition engine) stay small; gd, cgd and shuffling may be huge
    slow_engine = sampling in ("poisson", "uniform")
    t_max = 200 if small else (2000 if slow_engine else 10**8)
    if draw(st.booleans()):
        steps = (
            count(1, t_max)
            if chaotic
            else str(draw(st.one_of(st.integers(1, min(t_max, 1000)), st.integers(1, t_max))))
        )
        argv += ["--steps", steps]
    elif present():
        integral = (
            algorithm in ("gd", "cgd") and not chaotic
        )  # epochs * l must be a whole number of steps
        e_max = 10 if slow_engine or small else 10**4
        argv += ["--epochs", str(draw(st.integers(1, e_max))) if integral else num(0.01, e_max)]
    if present():
        argv += ["--lr", num(1e-3, 2)]
    if noise and present():
        if draw(st.booleans()):
            argv += ["--noise-std", num(1e-2, 100)]
        else:
            argv += ["--noise-multiplier", num(0.1, 20), "--clip", num(1e-2, 100)]
    if "--clip" not in argv and (draw(st.booleans()) or not present()):
        argv += ["--clip", num(1e-2, 100)]
    if "--clip" not in argv:
        argv += ["--sensitivity", num(1e-2, 100)]
    elif draw(st.integers(0, 3)) == 0:  # L >= 2C (replace-one) is required with a clip norm
        clip = argv[argv.index("--clip") + 1]
        factor = draw(st.sampled_from(["2", "2.5", "1"]))
        argv += [
            "--sensitivity",
            num(1e-2, 100) if chaotic else f"{float(factor) * float(clip):.17g}",
        ]
    if draw(st.booleans()):
        argv += ["--smoothness", num(0.1, 10)]
    if draw(st.booleans()):
        argv += ["--strong-convexity", draw(st.sampled_from(["0", num(1e-3, 1)]))]
    if draw(st.booleans()):
        argv.append("--convex")
    if draw(st.integers(0, 4)) == 0:
        argv += [
            "--contraction",
            draw(
                st.one_of(
                    st.floats(0, 1).map(lambda c: f"{c:.6g}"),
                    st.sampled_from(["0", "1", "1.5", "-0.1", "nan"]),
                )
            ),
        ]
    if draw(st.booleans()):
        argv += ["--diameter", num(1e-2, 1e3)]
    if draw(st.integers(0, 2)) == 0:
        argv += [
            "--adjacency",
            draw(
                st.sampled_from(
                    [*RUN_CHOICES["adjacency"], "neighbour"]
                    if chaotic
                    else RUN_CHOICES["adjacency"]
                )
            ),
        ]
    return argv


DELTAS = st.one_of(
    st.sampled_from(["1e-5", "1e-10", "1e-15", "0.1"]),
    st.floats(-300, -0.05).map(lambda e: f"{10.0**e:.6g}"),
    reals(1e-300, 0.9),
)


@st.composite
def account_argv(draw: st.DrawFn) -> list[str]:
    argv = ["account", *draw(run_flags())]
    argv += draw(
        st.one_of(
            st.just([]),
            DELTAS.map(lambda d: ["--delta", d]),
            reals(1e-3, 50).map(lambda e: ["--epsilon", e]),
        )
    )
    if draw(st.integers(0, 4)) == 0:
        from lastiterate.bounds import BOUND_IDS

        argv += [
            "--bound",
            *draw(
                st.lists(
                    st.sampled_from([*BOUND_IDS, "bogus"]), min_size=1, max_size=3, unique=True
                )
            ),
        ]
    if draw(st.integers(0, 5)) == 0:
        argv += [
            "--orders",
            draw(st.sampled_from(["2,4,8", "1.5", "2,32,1e6", "1", "0.5,2", "x", "inf", "2,nan"])),
        ]
    if draw(st.booleans()):
        argv.append("--json")
    return argv


@st.composite
def calibrate_argv(draw: st.DrawFn) -> list[str]:
    argv = ["calibrate", *draw(run_flags(noise=False, small=True))]
    solve = draw(st.sampled_from(["noise", "epochs", "noise", "epochs", "bogus"]))
    argv += ["--solve", solve]
    if solve == "epochs":
        argv += draw(st.one_of(reals(1e-2, 50).map(lambda v: ["--noise-std", v]), st.just([])))
    argv += draw(maybe("--epsilon", reals(0.05, 50)))
    argv += draw(maybe("--delta", DELTAS))
    # the composition engine inside a search is what makes calibrate slow: mostly closed-form bounds
    argv += [
        "--bound",
        draw(
            st.sampled_from(
                ["gdp-composition", "shifted-interpolation", "rdp-composition", "langevin-lsi"]
            )
        ),
    ]
    if draw(st.booleans()):
        argv.append("--json")
    return argv


@st.composite
def convert_argv(draw: st.DrawFn) -> list[str]:
    argv = ["convert"]
    argv += draw(
        st.one_of(
            reals(1e-3, 100).map(lambda v: ["--mu", v]),
            reals(1e-4, 100).map(lambda v: ["--rdp-linear", v]),
            st.just([]),
        )
    )
    argv += draw(
        st.one_of(
            st.just([]),
            DELTAS.map(lambda d: ["--delta", d]),
            reals(1e-3, 1e3).map(lambda e: ["--epsilon", e]),
        )
    )
    if draw(st.booleans()):
        argv.append("--json")
    return argv


@st.composite
def audit_argv(draw: st.DrawFn) -> list[str]:
    argv = [
        "audit",
        draw(st.sampled_from(["auto", "quadratic", "linear"])),
        *draw(run_flags(noise=True, small=True)),
    ]
    argv += [
        "--samples",
        draw(
            st.one_of(st.integers(10, 400).map(str), st.sampled_from(["0", "9", "-5", "1e9", "x"]))
        ),
    ]
    argv += draw(
        maybe(
            "--seed",
            st.one_of(st.integers(0, 2**32).map(str), st.sampled_from(["-1", str(2**70), "x"])),
        )
    )
    argv += draw(maybe("--alpha", st.one_of(reals(1e-6, 0.5), st.sampled_from(["0", "1"]))))
    argv += draw(maybe("--delta", DELTAS))
    argv += draw(maybe("--pair", st.sampled_from(["auto", "difference", "antipodal", "x"])))
    argv += draw(maybe("--noise-scale", reals(1e-3, 10)))
    argv += draw(maybe("--sensitivity-scale", reals(1e-3, 10)))
    argv += draw(maybe("--position", st.integers(-2, 30).map(str)))
    if draw(st.booleans()):
        argv.append("--json")
    return argv


# ---------------------------------------------------------------------- the properties
@FUZZ
@given(account_argv())
@example(
    [
        "account",
        "--algorithm",
        "gd",
        "--n",
        "100",
        "--steps",
        "50",
        "--lr",
        "0.1",
        "--noise-std",
        "1",
        "--sensitivity",
        "1",
        "--contraction",
        "0",
        "--diameter",
        "1",
        "--json",
    ]
)
@example(
    [
        "account",
        "--algorithm",
        "gd",
        "--n",
        "100",
        "--steps",
        "50",
        "--lr",
        "0.1",
        "--noise-std",
        "1e-300",
        "--sensitivity",
        "1",
        "--strong-convexity",
        "1",
        "--smoothness",
        "2",
    ]
)
@example(
    [
        "account",
        "--algorithm",
        "gd",
        "--n",
        "100",
        "--steps",
        "50",
        "--lr",
        "0.1",
        "--noise-std",
        "1",
        "--sensitivity",
        "1e300",
        "--strong-convexity",
        "1",
        "--smoothness",
        "2",
    ]
)
@example(
    [
        "account",
        "--algorithm",
        "gd",
        "--n",
        "100",
        "--steps",
        "50",
        "--lr",
        "0.1",
        "--noise-std",
        "1",
        "--sensitivity",
        "1",
        "--strong-convexity",
        "5e-324",
        "--smoothness",
        "2",
        "--diameter",
        "1e300",
    ]
)
@example(
    [
        "account",
        "--algorithm",
        "cgd",
        "--n",
        "1000",
        "--batch-size",
        "10",
        "--steps",
        "100000000",
        "--lr",
        "0.1",
        "--noise-std",
        "1",
        "--clip",
        "1",
        "--strong-convexity",
        "1",
        "--smoothness",
        "2",
        "--delta",
        "1e-15",
        "--json",
    ]
)
@example(
    [
        "account",
        "--algorithm",
        "gd",
        "--n",
        "10",
        "--steps",
        "10",
        "--lr",
        "0.1",
        "--noise-std",
        "0.02",
        "--sensitivity",
        "1",
        "--strong-convexity",
        "1",
        "--smoothness",
        "2",
        "--contraction",
        "0.5",
    ]
)
def test_account_answers_every_input(argv: list[str]) -> None:
    check_contract(argv)


@FUZZ
@given(calibrate_argv())
def test_calibrate_answers_every_input(argv: list[str]) -> None:
    check_contract(argv)


@FUZZ
@given(convert_argv())
@example(["convert", "--mu", "50", "--delta", "1e-15", "--json"])
@example(["convert", "--mu", "1e300", "--delta", "1e-5"])
@example(["convert", "--rdp-linear", "1e300", "--delta", "1e-5"])
@example(["convert", "--rdp-linear", "0", "--delta", "1e-5", "--json"])
def test_convert_answers_every_input(argv: list[str]) -> None:
    check_contract(argv)


@FUZZ
@given(audit_argv())
@example(
    [
        "audit",
        "linear",
        "--algorithm",
        "sgd",
        "--sampling",
        "poisson",
        "--n",
        "92",
        "--batch-size",
        "35",
        "--epochs",
        "1",
        "--lr",
        "1",
        "--noise-multiplier",
        "1",
        "--clip",
        "30.4",
        "--samples",
        "127",
        "--sensitivity-scale",
        "0.001",
    ]
)
@example(
    [
        "audit",
        "auto",
        "--algorithm",
        "gd",
        "--n",
        "41",
        "--steps",
        "3",
        "--lr",
        "1",
        "--noise-std",
        "1",
        "--sensitivity",
        "2",
        "--samples",
        "400",
        "--alpha",
        "5e-324",
    ]
)
@example(
    [
        "audit",
        "linear",
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
        "--sensitivity",
        "1",
        "--samples",
        "100",
        "--noise-scale",
        "1e-300",
    ]
)
@example(
    [
        "audit",
        "linear",
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
        "--sensitivity",
        "1",
        "--samples",
        "100",
        "--noise-scale",
        "1e308",
        "--json",
    ]
)
def test_audit_answers_every_input(argv: list[str]) -> None:
    check_contract(argv, allow_violation=True)


@pytest.mark.parametrize(
    "argv", [["reproduce", "list"], ["reproduce"], ["--version"], ["reproduce", "bogus"]]
)
def test_small_commands(argv: list[str]) -> None:
    check_contract(argv)


def test_the_contract_check_catches_a_broken_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness itself: a traceback, a NaN in JSON or two stderr lines are caught."""
    from lastiterate.cli import convert

    def nan_json(args: Any) -> int:
        print('{"epsilon": NaN}')
        return 0

    def crash(args: Any) -> int:
        raise ZeroDivisionError("float division by zero")

    def two_lines(args: Any) -> int:
        print("lastiterate: error: one\nsecond", file=__import__("sys").stderr)
        return 2

    for broken, expected in (
        (nan_json, AssertionError),
        (crash, ZeroDivisionError),
        (two_lines, AssertionError),
    ):
        monkeypatch.setattr(convert, "cmd_convert", broken)
        with pytest.raises(expected):
            check_contract(["convert", "--mu", "1", "--delta", "1e-5", "--json"])


# Inputs the fuzz found failing inside the PLD composition engine (notions/pld.py), which another
# session is rewriting: valid runs must get an answer (exit 0).  Strict xfail: when the engine is
# fixed these pass and the marker must go.
_SLOW = pytest.mark.slow  # the engine searches for ~10 s before refusing
KNOWN_ENGINE_FAILURES = [
    # issue 8 section 1: "composition needs 2.3e+07 grid points"
    pytest.param(
        "account --algorithm sgd --n 5 --batch-size 4 --steps 3 --lr 0.0032525 --noise-std "
        "0.632196 --sensitivity 3.25299 --strong-convexity 0.00614912 --smoothness "
        "0.614912 --sampling uniform",
        marks=_SLOW,
    ),
    # "discretization=0.0001 is invalid: needs 2.66e+07 grid points" while calibrating
    # towards tiny noise
    pytest.param(
        "calibrate --algorithm sgd --sampling poisson --n 129 --batch-size 64 --steps 1 --lr "
        "1.00014 --clip 1 --strong-convexity 0.148351 --diameter 1 --solve noise --epsilon 1e30 "
        "--delta 1e-15 --bound gdp-composition --json",
        marks=_SLOW,
    ),
]


# Fixed: "ValueError: The function value at x=1.0 is NaN; solver cannot continue"
# (pld._top_index): the Gaussian factor G_mu with mu = 1.8e-90 gave log_ndtr(-1e87) - log_ndtr(...)
# = NaN; its tail is now evaluated through erfcx (notions/pld/profiles.py) and is 0 there.
FIXED_ENGINE_FAILURES = [
    (
        "account --algorithm sgd --sampling uniform --n 38 --batch-size 27 --epochs 7.08889 --lr "
        "0.00371573 --noise-std 6.20023 --sensitivity 100 --convex --contraction 3.41481e-91 "
        "--epsilon 0.0034541 --json"
    )
]


@pytest.mark.parametrize("command", FIXED_ENGINE_FAILURES)
def test_fixed_engine_failures(command: str) -> None:
    rc, _, err, _ = run_cli(command.split())
    assert rc == 0, err
    assert err == "", err


@pytest.mark.parametrize("command", KNOWN_ENGINE_FAILURES)
@pytest.mark.xfail(
    strict=True, reason="PLD composition engine (notions/pld.py) refuses or crashes on a valid run"
)
def test_known_engine_failures(command: str) -> None:
    rc, _, err, _ = run_cli(command.split())
    assert rc == 0, err


# ---------------------------------------------------------------------- hostile paths and flags
# (issue 8 section 4)
RUN = [
    "--algorithm",
    "gd",
    "--n",
    "10",
    "--steps",
    "3",
    "--lr",
    "0.1",
    "--noise-std",
    "1",
    "--sensitivity",
    "1",
]


def test_config_that_is_a_folder_or_binary_is_one_line(tmp_path: Any) -> None:
    binary = tmp_path / "bin.toml"
    binary.write_bytes(bytes(range(256)))
    for path, reason in ((tmp_path, "is a directory"), (binary, "not a UTF-8 text file")):
        rc, _, err = check_contract(["account", *RUN, "--config", str(path)])
        assert rc == 2 and "config=" in err and reason in err


def test_reproduce_out_naming_a_file_is_refused(tmp_path: Any) -> None:
    target = tmp_path / "taken"
    target.write_text("keep me")
    rc, _, err = check_contract(["reproduce", "paper000-table7", "--quick", "--out", str(target)])
    assert rc == 2 and "out=" in err and target.read_text() == "keep me"


def test_flag_prefixes_are_not_expanded() -> None:
    # --target must not silently become --target-epsilon (train) or --eps become --epsilon
    rc, _, err = check_contract(["account", *RUN, "--eps", "1"])
    assert rc == 2 and "unrecognized arguments: --eps" in err


def test_a_closed_pipe_ends_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    from lastiterate.cli import convert
    from lastiterate.cli.common import EXIT_BROKEN_PIPE

    def closed_pipe(args: Any) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(convert, "cmd_convert", closed_pipe)
    rc, _, err, _ = run_cli(["convert", "--mu", "1", "--delta", "1e-5"])
    assert rc == EXIT_BROKEN_PIPE and err == ""


@pytest.mark.parametrize(
    "flag, value",
    [("--seed", str(10**23)), ("--seed", "-1"), ("--threads", "100000000"), ("--threads", "0")],
)
def test_train_refuses_out_of_range_seed_and_threads_before_training(flag: str, value: str) -> None:
    # a seed beyond 2^32 - 1 crashed scikit-learn's split; 1e8 torch threads crashed the process
    argv = [
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
        flag,
        value,
    ]
    rc, _, err = check_contract(argv)
    shown = "1e+23" if value == str(10**23) else value  # a huge integer is named compactly
    assert rc == 2 and f"{flag[2:]}={shown}" in err
