"""What every subcommand shares: the parser class, usage errors, the run flags, typed config files,
JSON output and progress bars.

Contract (design.md): invalid input exits with status 2 and ONE line on stderr naming the parameter
and its allowed range; nothing is printed on stdout.  Only the standard library is imported here so
that ``lastiterate --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from lastiterate.errors import ParameterError
from lastiterate.run import RUN_CHOICES, Run

#: exit statuses of every subcommand
EXIT_OK = 0
EXIT_VIOLATION = 1  # ``audit`` found a claim below its certified lower bound
EXIT_USAGE = 2  # invalid input: one line on stderr
EXIT_NO_BOUND = 3  # ``account``: the input is valid but no theorem gives a guarantee
EXIT_INTERNAL = (
    70  # a bug in lastiterate (EX_SOFTWARE): one line, the traceback with LASTITERATE_DEBUG=1
)
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # the reader of stdout went away (``| head -1``): 128 + SIGPIPE


class UsageError(Exception):
    """A command-line error: exit status 2, one line on stderr."""


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one-line :class:`UsageError` and which never guesses a
    flag from a prefix (``--target 3`` is an error, not ``--target-epsilon 3``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


# ---------------------------------------------------------------------- value parsers
def orders(text: str) -> list[float]:
    """``A,B,...``: Renyi orders, each a finite number > 1."""
    try:
        values = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"orders={text!r} is invalid: must be comma-separated numbers > 1"
        ) from None
    if not values or any(not (a > 1) or not math.isfinite(a) for a in values):
        raise argparse.ArgumentTypeError(
            f"orders={text!r} is invalid: every order must be a finite number > 1"
        )
    return values


def finite_float(text: str) -> float:
    """A real number; ``nan`` and ``inf`` are refused here so that no check downstream sees them."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a real number") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return x


# ---------------------------------------------------------------------- run flags
#: what the sensitivity L means (help text, README, JSON)
SENSITIVITY_HELP = (
    "gradient sensitivity L: a bound on ||g(x;z) - g(x;z')|| for ANY two possible examples z, z' "
    "(replace-one; sampled batches need all pairs, not only the differing one; --clip C gives L = "
    "2C), or on ||g(x;z)|| under add-remove (L = C)"
)


def add_run_flags(p: argparse.ArgumentParser, *, noise: bool) -> None:
    """The flags that describe a :class:`lastiterate.run.Run` and the privacy query."""
    g = p.add_argument_group("run")
    g.add_argument(
        "--algorithm",
        choices=RUN_CHOICES["algorithm"],
        help="full batch, cyclic batches, sampled batches",
    )
    g.add_argument("--n", type=int, help="number of examples")
    g.add_argument(
        "--batch-size", type=int, help="batch size b (expected size for Poisson sampling)"
    )
    steps = g.add_mutually_exclusive_group()
    steps.add_argument("--steps", type=int, help="number of noisy steps T")
    steps.add_argument("--epochs", type=finite_float, help="number of epochs E")
    g.add_argument("--lr", type=finite_float, help="learning rate (constant)")
    nz = g.add_mutually_exclusive_group()
    nz.add_argument(
        "--noise-std", type=finite_float, help="std sigma of the noise on the AVERAGED gradient"
    )
    nz.add_argument(
        "--noise-multiplier",
        type=finite_float,
        help="Opacus noise multiplier z (needs --clip): sigma = z*C/b",
    )
    g.add_argument("--clip", type=finite_float, help="per-example gradient clip norm C")
    g.add_argument("--sensitivity", type=finite_float, help=SENSITIVITY_HELP)
    g.add_argument("--strong-convexity", type=finite_float, help="strong convexity m")
    g.add_argument("--smoothness", type=finite_float, help="smoothness M")
    g.add_argument("--convex", action="store_true", default=None, help="declare the losses convex")
    g.add_argument(
        "--contraction",
        type=finite_float,
        help="contraction factor c of one step (c < 1: strongly convex)",
    )
    g.add_argument("--diameter", type=finite_float, help="diameter D of the projection set")
    g.add_argument(
        "--sampling", choices=RUN_CHOICES["sampling"], help="batch sampling for sgd (required)"
    )
    g.add_argument(
        "--adjacency",
        choices=RUN_CHOICES["adjacency"],
        help="neighbouring relation (default replace)",
    )
    g.add_argument(
        "--config",
        type=Path,
        help="TOML file with any of these flags (flags on the command line win)",
    )
    q = p.add_argument_group("query")
    dq = q.add_mutually_exclusive_group()
    dq.add_argument(
        "--delta", type=finite_float, help="report epsilon at this delta (default 1e-5)"
    )
    if noise:
        dq.add_argument("--epsilon", type=finite_float, help="report delta at this epsilon instead")
    q.add_argument(
        "--bound",
        action="extend",
        nargs="+",
        metavar="ID",
        help="restrict to these bound ids (several after one flag, or repeated)",
    )
    q.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(_parser=p)


# ---------------------------------------------------------------------- config files
def _read_toml(path: Path) -> dict[str, Any]:
    where = f"config={str(path)!r} is invalid"
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{where}: file not found") from None
    except IsADirectoryError:
        raise UsageError(f"{where}: is a directory, not a TOML file") from None
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not a UTF-8 text file") from None
    except OSError as exc:
        raise UsageError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{where}: not TOML ({exc})") from None


def _typed_config_value(key: str, value: Any, action: argparse.Action) -> Any:
    """``value`` from the TOML file checked against what the flag accepts on the command line."""
    bad = f"config key {key!r} is invalid"
    if isinstance(action, argparse._StoreTrueAction):
        if not isinstance(value, bool):
            raise UsageError(f"{bad}: must be true or false (a TOML boolean), not {value!r}")
        return value
    if action.nargs in ("+", "*"):
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or not all(isinstance(v, str) for v in items):
            raise UsageError(f"{bad}: must be a string or a list of strings, not {value!r}")
        return items
    if action.choices is not None:
        if not isinstance(value, str) or value not in action.choices:
            raise UsageError(
                f"{bad}: must be one of {', '.join(map(str, action.choices))}, not {value!r}"
            )
        return value
    if action.type is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(f"{bad}: must be an integer, not {value!r}")
        return value
    if action.type in (float, finite_float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UsageError(f"{bad}: must be a number, not {value!r}")
        if not math.isfinite(value):
            raise UsageError(f"{bad}: must be a finite number, not {value!r}")
        return float(value)
    convert: Any = action.type  # a callable here (argparse also allows a registered name)
    if callable(convert) and isinstance(value, str):
        try:
            return convert(value)
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise UsageError(f"{bad}: {exc}") from None
    if not isinstance(value, str):
        raise UsageError(f"{bad}: must be a string, not {value!r}")
    return value


def apply_config(args: argparse.Namespace) -> None:
    """Fill the flags not given on the command line from ``--config FILE`` (TOML), type-checked."""
    path = getattr(args, "config", None)
    if path is None:
        return
    parser: argparse.ArgumentParser = args._parser
    actions = {a.dest: a for a in parser._actions}
    for key, value in _read_toml(path).items():
        dest = key.replace("-", "_")
        action = actions.get(dest)
        if action is None or dest in ("config", "help", "_parser"):
            raise UsageError(f"config key {key!r} is invalid: not a flag of this command")
        if getattr(args, dest) is None:
            setattr(args, dest, _typed_config_value(key, value, action))


def run_from_args(args: argparse.Namespace, **override: Any) -> Any:
    """The :class:`lastiterate.run.Run` the run flags describe (``override`` wins)."""
    kw: dict[str, Any] = {k: getattr(args, k, None) for k in Run.field_names()}
    kw.update(override)
    for required in ("algorithm", "n", "lr"):
        if kw[required] is None:
            raise UsageError(f"--{required.replace('_', '-')} is required")
    kw["convex"] = bool(kw["convex"])
    if kw["adjacency"] is None:
        kw["adjacency"] = "replace"
    return Run(**kw)


# ---------------------------------------------------------------------- output
def check_output_file(flag: str, path: Path | None) -> None:
    """Refuse the output file of ``--flag`` before any work: ``--plot`` must be a ``.png`` file
    in an existing folder (as ``audit``), ``--csv`` must not be a directory (``-``: stdout)."""
    if path is None or (flag == "csv" and str(path) == "-"):
        return
    if flag == "plot":
        # lazy: plotting is only needed for a plot
        from lastiterate.plotting import check_png_path

        check_png_path(path)
    elif path.is_dir():
        raise ParameterError(flag, str(path), "is a directory: give a file name")


@contextlib.contextmanager
def writing(flag: str, path: Path | None) -> Iterator[None]:
    """An operating-system error while the output of ``--flag`` is written (no permission, a
    read-only or vanished folder) becomes one error line naming the flag."""
    try:
        yield
    except OSError as exc:
        raise ParameterError(
            flag, str(path), f"cannot be written ({exc.strerror or exc})"
        ) from None


def print_json(obj: Any) -> None:
    """One standard JSON object on stdout (no NaN or Infinity tokens; see
    :mod:`lastiterate.jsonutil`)."""
    # lazy: jsonutil imports numpy; this module is loaded at CLI start-up (--help)
    from lastiterate.jsonutil import dumps

    print(dumps(obj))


class ProgressBar:
    """A tqdm bar on stderr for long searches; silent when stderr is not a
    terminal or with --json."""

    def __init__(self, desc: str, *, quiet: bool = False, total: int | None = None) -> None:
        self._bar = None
        if not quiet and sys.stderr.isatty():
            # lazy: only for an interactive progress bar (CLI start-up)
            from tqdm import tqdm

            self._bar = tqdm(desc=desc, unit="eval", file=sys.stderr, leave=False, total=total)

    def step(self, message: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(message, refresh=False)
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
