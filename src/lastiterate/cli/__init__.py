"""Command-line interface: ``lastiterate account | calibrate | sweep | convert | train | predict |
audit | reproduce | demo``.

Each subcommand owns a module of this package (``add_parser`` registers it, a ``cmd_*`` function
runs it); :mod:`lastiterate.cli.common` holds what they share.  The CLI only consumes the library:
no library module imports it.

Exit statuses (every subcommand): 0 success; 1 ``audit`` found a VIOLATION; 2 invalid input, with
exactly one line on stderr naming the parameter and its range; 3 ``account`` found no applicable
bound (the input is valid, there is no guarantee); 70 an internal error (one line; set
``LASTITERATE_DEBUG=1`` for the traceback); 130 interrupted; 141 stdout closed early (``| head``).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from lastiterate.cli.common import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Parser,
    UsageError,
)
from lastiterate.errors import NotApplicable, ParameterError

#: subcommand modules, in the order of ``lastiterate --help``
SUBCOMMANDS = (
    "account",
    "calibrate",
    "sweep",
    "convert",
    "train",
    "predict",
    "audit",
    "reproduce",
    "demo",
)


def build_parser() -> Parser:
    """The ``lastiterate`` parser with every subcommand registered."""
    from lastiterate import __version__

    parser = Parser(
        prog="lastiterate",
        description=(
            "Differential-privacy accounting of noisy gradient descent when only the final model "
            "is released."
        ),
        epilog=(
            "Run 'lastiterate COMMAND --help' for a command's flags. Exit status: 0 ok, 1 audit "
            "violation, 2 invalid input, 3 no applicable bound, 70 internal error."
        ),
    )
    parser.add_argument("--version", action="version", version=f"lastiterate {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=Parser, metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"lastiterate.cli.{name}").add_parser(sub)
    return parser


def _fail(message: str, status: int) -> int:
    print(f"lastiterate: error: {message}", file=sys.stderr)
    return status


def _stdout_gone() -> int:
    """stdout was closed by its reader: silence the flush at exit, report it by the status alone."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    parser = build_parser()
    try:
        args: Any = parser.parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)  # re-executed by train --nproc
        if getattr(args, "func", None) is None:  # the help on stdout, the error in one line
            parser.print_help()
            return _fail("a command is required (see lastiterate --help)", EXIT_USAGE)
        status = int(args.func(args))
        sys.stdout.flush()
        return status
    except (UsageError, ParameterError, NotApplicable) as exc:
        return _fail(" ".join(str(exc).split()), EXIT_USAGE)
    except BrokenPipeError:
        return _stdout_gone()
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except Exception as exc:  # a bug: one line for the user, the traceback on request
        if os.environ.get("LASTITERATE_DEBUG") == "1":
            raise
        return _fail(
            f"internal error ({type(exc).__name__}: {' '.join(str(exc).split())}); "
            "please report it, LASTITERATE_DEBUG=1 shows the traceback",
            EXIT_INTERNAL,
        )


if __name__ == "__main__":
    sys.exit(main())
