"""``lastiterate reproduce``: regenerate the papers' tables and figures."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lastiterate.cli.common import ProgressBar, UsageError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("reproduce", help="regenerate the papers' tables and figures")
    p.add_argument("name", nargs="?", help="experiment name, 'all' or 'list'")
    p.add_argument("--out", default="reproduce-out", help="output folder (default reproduce-out)")
    p.add_argument(
        "--quick", action="store_true", help="smaller grids where an experiment supports it"
    )
    p.set_defaults(func=cmd_reproduce)


def cmd_reproduce(args: argparse.Namespace) -> int:
    # lazy: the experiments load the accountant and matplotlib (CLI start-up, --help)
    from lastiterate.experiments._base import experiments, write_experiment

    registry = experiments()
    if args.name in (None, "list"):
        for name, (desc, _) in registry.items():
            print(f"{name:<24} {desc}")
        return 0
    names = list(registry) if args.name == "all" else [args.name]
    for name in names:
        if name not in registry:
            raise UsageError(
                f"name={name!r} is invalid: must be one of all, list, " + ", ".join(registry)
            )
    outdir = Path(args.out)
    if outdir.exists() and not outdir.is_dir():
        raise UsageError(f"out={args.out!r} is invalid: exists and is not a folder")
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"out={args.out!r} is invalid: cannot create the folder ({exc.strerror or exc})"
        ) from None
    bar = ProgressBar("reproducing", total=len(names))
    try:
        for name in names:
            desc, func = registry[name]
            exp = func(args.quick)
            bar.step(name)
            paths = write_experiment(exp, outdir)
            bad = [c for c in exp.comparisons if not c.agrees]
            print(f"{name}: {desc}")
            print("  wrote " + ", ".join(str(p) for p in paths))
            for line in exp.summary:
                print(f"  {line}")
            if exp.comparisons:
                agree = len(exp.comparisons) - len(bad)
                print(
                    f"  {agree}/{len(exp.comparisons)} printed values "
                    "reproduced to the printed precision"
                )
                for c in bad:
                    print(f"  differs: {c.line()}")
    finally:
        bar.close()
    return 0
