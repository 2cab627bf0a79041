"""The CLI contract every fuzz test of this folder checks (README, "Every subcommand exits...").

For one argument vector: exit 0 (or 1 for ``audit``, 3 for ``account``) with output, nothing
on stderr but the documented one-line warnings (``predict``: its summary), standard JSON under
``--json`` (no NaN / Infinity tokens) and no ``nan`` / ``inf`` word in text; or exit 2 with
nothing on stdout and exactly one stderr line ``lastiterate: error: ...``.  An exception
escaping ``main`` (the suite runs with ``LASTITERATE_DEBUG=1``, so an internal error is a
traceback), a Python warning, or a call longer than ``seconds`` fails the test.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import signal
import warnings
from collections.abc import Iterator
from typing import Any

from lastiterate.cli import main

#: stderr lines a successful command may print (seeded-run and checkpoint notices)
ALLOWED_WARNINGS = re.compile(r"^warning: ")


class Hang(Exception):
    """A CLI call ran past its time limit."""


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def _raise(signum: int, frame: Any) -> None:
        raise Hang(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _reject_constant(token: str) -> float:
    raise AssertionError(f"non-standard JSON token {token}")


def run_cli(argv: list[str], seconds: int = 60) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``main(argv)``; exceptions and warnings propagate."""
    out, err = io.StringIO(), io.StringIO()
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        time_limit(seconds),
    ):
        warnings.simplefilter("error")
        try:
            rc = main(argv)
        except SystemExit as exc:  # --help
            rc = int(exc.code or 0)
    return rc, out.getvalue(), err.getvalue()


def check_contract(argv: list[str], seconds: int = 60) -> tuple[int, str, str]:
    """Run ``argv`` and assert the contract; returns (status, stdout, stderr)."""
    rc, out, err = run_cli(argv, seconds)
    if rc == 2:
        lines = err.splitlines()
        assert len(lines) == 1, f"exit 2 needs one stderr line, got {lines!r} for {argv}"
        assert lines[0].startswith("lastiterate: error: "), lines[0]
        assert out == "", f"exit 2 printed on stdout: {out[:200]!r}"
        return rc, out, err
    allowed = {0, 1} if argv[:1] == ["audit"] else {0, 3} if argv[:1] == ["account"] else {0}
    assert rc in allowed, f"exit status {rc} for {argv}: {err[-500:]}"
    if argv[:1] != ["predict"]:  # predict prints its summary on stderr, predictions on stdout
        stray = [line for line in err.splitlines() if not ALLOWED_WARNINGS.match(line)]
        assert not stray, f"stderr on success for {argv}: {stray}"
    assert out.strip(), f"no output for {argv}"
    if "--json" in argv:
        json.loads(out, parse_constant=_reject_constant)
    else:
        assert not re.search(r"\b(nan|inf|infinity)\b", out, re.IGNORECASE), (
            f"a non-finite number in the output of {argv}"
        )
    return rc, out, err
