"""``lastiterate demo``: a short privacy report for a built-in example run."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="a short privacy report for a built-in example run")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    # lazy: the accountant loads numpy/scipy and every bound (CLI start-up, --help)
    from lastiterate.demo import run_demo

    print(run_demo())
    return 0
