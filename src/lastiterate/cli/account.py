"""``lastiterate account``: every valid guarantee for releasing the last iterate of a run."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lastiterate.cli.common import (
    EXIT_NO_BOUND,
    EXIT_OK,
    add_run_flags,
    apply_config,
    check_output_file,
    orders,
    print_json,
    run_from_args,
    writing,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "account",
        help="every valid guarantee for releasing the last iterate",
        description="Account a described run under every applicable theorem and name the "
        f"tightest. Exit status: 0 with a guarantee, {EXIT_NO_BOUND} when no bound "
        "applies, 2 on invalid input.",
    )
    add_run_flags(p, noise=True)
    p.add_argument(
        "--orders", type=orders, help="Renyi orders A,B,... at which RDP results report their curve"
    )
    p.add_argument("--plot", type=Path, help="write the tradeoff curves of all results to this PNG")
    p.set_defaults(func=cmd_account)


BLAS_THREADS_VARIABLE = "OPENBLAS_NUM_THREADS"


@contextmanager
def single_threaded_blas_at_numpy_load() -> Iterator[None]:
    """Load numpy with a one-thread OpenBLAS pool, unless the user chose a size or numpy is loaded.

    Accounting makes no BLAS call, while the pool that OpenBLAS starts when numpy is imported
    spins on every extra core before it sleeps: on the 2-core benchmark machine that is ~0.1 s of
    CPU, a fifth of the command's start-up budget (issue 11), and more on larger machines.
    ``OPENBLAS_NUM_THREADS`` is read once, when the library loads, so it is set only around the
    first import of numpy and removed afterwards (child processes and the caller's environment
    are unchanged); a value the user set is kept.  Called in process (``main([...])``) before
    numpy was imported, the process keeps a one-thread OpenBLAS pool.
    """
    set_here = "numpy" not in sys.modules and BLAS_THREADS_VARIABLE not in os.environ
    if set_here:
        os.environ[BLAS_THREADS_VARIABLE] = "1"
    try:
        yield
    finally:
        if set_here:
            os.environ.pop(BLAS_THREADS_VARIABLE, None)


def cmd_account(args: argparse.Namespace) -> int:
    # lazy: the accountant loads numpy/scipy and every bound (CLI start-up, --help)
    with single_threaded_blas_at_numpy_load():
        from lastiterate.accountant import account

    apply_config(args)
    check_output_file("plot", args.plot)
    run = run_from_args(args)
    report = account(
        run, delta=args.delta, epsilon=args.epsilon, bounds=args.bound, orders=args.orders
    )
    if args.plot is not None:
        # lazy: matplotlib (the plot extra) only when a plot is asked for
        from lastiterate.plotting import plot_report

        with writing("plot", args.plot):
            plot_report(report, args.plot)
    if args.json:
        print_json(report.to_json())
    else:
        print(report.format())
        if args.plot is not None:
            print(f"\nTradeoff curves written to {args.plot}")
    return EXIT_OK if report.best is not None else EXIT_NO_BOUND
