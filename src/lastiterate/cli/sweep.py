"""``lastiterate sweep``: the accountant over a grid of runs (``--vary FIELD=V1,V2,...``)."""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path
from typing import Any, BinaryIO

from lastiterate.cli.common import (
    EXIT_OK,
    ProgressBar,
    UsageError,
    add_run_flags,
    apply_config,
    check_output_file,
    print_json,
    writing,
)
from lastiterate.formatting import fmt_value
from lastiterate.run import Run

#: fields ``--vary`` accepts (the numeric Run inputs), with their value type
VARY_TYPES: dict[str, type] = {
    "epochs": float,
    "steps": int,
    "noise_std": float,
    "noise_multiplier": float,
    "batch_size": int,
    "lr": float,
    "n": int,
    "clip": float,
    "sensitivity": float,
    "strong_convexity": float,
    "smoothness": float,
    "contraction": float,
    "diameter": float,
}


def add_parser(sub: Any) -> None:
    # lazy: only at parser construction (lastiterate.sweep itself imports no numpy)
    from lastiterate.sweep import MAX_GRID_POINTS

    p = sub.add_parser(
        "sweep",
        help="account a grid of runs (e.g. epochs x noise) in one call",
        description="Account every point of a grid around the described run: "
        "--vary FIELD=V1,V2,... (repeatable, or several after one flag; "
        "the grid is the product, the first --vary changes slowest). Each row is exactly what "
        "'lastiterate account' reports for that run: the best bound and the composition bound "
        "(every iterate released). Points the run refuses are rows with the reason. "
        f"At most {MAX_GRID_POINTS} points. Exit status: 0, or 2 on invalid input.",
    )
    add_run_flags(p, noise=True)
    p.add_argument(
        "--vary",
        action="extend",
        nargs="+",
        metavar="FIELD=V1,V2,...",
        default=None,
        help="a run field and its values, e.g. epochs=1,2,5,10 or noise-std=0.5,1,2; fields: "
        + ", ".join(f.replace("_", "-") for f in VARY_TYPES)
        + " (a varied field overrides its flag)",
    )
    p.add_argument(
        "--csv", type=Path, metavar="FILE", help="write the table as CSV to FILE ('-': stdout)"
    )
    p.add_argument(
        "--plot",
        type=Path,
        metavar="FILE.png",
        help="plot epsilon vs epochs (or steps), one line per value of the other varied fields",
    )
    p.set_defaults(func=cmd_sweep)


# ---------------------------------------------------------------------- --vary
def _number(field: str, text: str) -> float | int:
    kind = VARY_TYPES[field]
    flag = field.replace("_", "-")
    try:
        x = float(text)
    except ValueError:
        raise UsageError(f"vary {flag}={text!r} is invalid: values must be numbers") from None
    if not math.isfinite(x):
        raise UsageError(f"vary {flag}={text!r} is invalid: values must be finite numbers")
    if kind is int:
        if x != int(x):
            raise UsageError(f"vary {flag}={text!r} is invalid: values must be integers")
        return int(x)
    return x


def parse_vary(items: list[str] | None) -> dict[str, list[Any]]:
    """``["epochs=1,2", "noise-std=0.5"]`` -> ``{"epochs": [1.0, 2.0], "noise_std": [0.5]}``."""
    if not items:
        raise UsageError("--vary is required: e.g. --vary epochs=1,2,5,10 --vary noise-std=0.5,1,2")
    vary: dict[str, list[Any]] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(
                f"vary {item!r} is invalid: must be FIELD=V1,V2,... (e.g. epochs=1,2,5,10)"
            )
        name, _, values = item.partition("=")
        field = name.strip().replace("-", "_")
        if field not in VARY_TYPES:
            raise UsageError(
                f"vary field {name.strip()!r} is invalid: must be one of "
                + ", ".join(f.replace("_", "-") for f in VARY_TYPES)
            )
        if field in vary:
            raise UsageError(f"vary field {name.strip()!r} is invalid: given twice")
        texts = [t.strip() for t in values.split(",")]
        if not values.strip() or any(not t for t in texts):
            raise UsageError(
                f"vary {item!r} is invalid: must list comma-separated numbers after '='"
            )
        vary[field] = [_number(field, t) for t in texts]
    return vary


def _base_inputs(args: argparse.Namespace, vary: dict[str, list[Any]]) -> dict[str, Any]:
    """The run flags as Run inputs (not yet validated: the varied fields fill the gaps)."""
    kw: dict[str, Any] = {k: getattr(args, k, None) for k in Run.field_names()}
    for required in ("algorithm", "n", "lr"):
        if kw[required] is None and required not in vary:
            raise UsageError(f"--{required.replace('_', '-')} is required")
    kw["convex"] = bool(kw["convex"])
    if kw["adjacency"] is None:
        kw["adjacency"] = "replace"
    return kw


# ---------------------------------------------------------------------- output
def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ";".join(map(str, value)) if value else "-"
    return fmt_value(value) if isinstance(value, int) else str(value)


def format_table(
    rows: list[dict[str, Any]], columns: list[str], header: str, *, by_delta: bool = True
) -> str:
    """The text table: one line per grid point, then the reasons of the invalid points.

    ``by_delta``: the query fixed delta (epsilon columns shown), else epsilon (delta columns)."""
    fixed = ("delta", "composition_delta") if by_delta else ("epsilon", "composition_epsilon")
    shown = [c for c in columns if c not in ("theorem", "reason", "failures", *fixed)]
    if any(r["failures"] for r in rows):
        shown.append("failures")
    cells = [[_cell(r[c]) for c in shown] for r in rows]
    widths = [max(len(c), *(len(row[j]) for row in cells)) for j, c in enumerate(shown)]
    lines = [
        header,
        "",
        "  ".join(c.rjust(w) for c, w in zip(shown, widths)),
        "-" * (sum(widths) + 2 * (len(widths) - 1)),
    ]
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    refused = [r for r in rows if r["status"] != "ok"]
    if refused:
        varied = columns[: columns.index("status")]
        lines += ["", "Points without a guarantee:"]
        for r in refused:
            point = ", ".join(f"{k}={_cell(r[k])}" for k in varied)
            lines.append(f"  {point}: {r['status']}: {r['reason']}")
    theorems = sorted({(r["best_bound"], r["theorem"]) for r in rows if r["status"] == "ok"})
    if theorems:
        lines += ["", "Best bounds used:"] + [f"  {b}: {t}" for b, t in theorems]
    return "\n".join(lines)


def _csv_text(rows: list[dict[str, Any]], columns: list[str]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for r in rows:
        writer.writerow(
            [
                ""
                if r[c] is None
                else (";".join(map(str, r[c])) if isinstance(r[c], list) else r[c])
                for c in columns
            ]
        )
    return buf.getvalue()


#: columns every sweep table has (after the varied fields): how an earlier table is recognised
SWEEP_COLUMNS = frozenset({"status", "best_bound", "theorem", "composition_bound", "reason"})


def _csv_why_not(fh: BinaryIO) -> str | None:
    """None when the open file's first line is the header of a sweep table (an earlier
    ``--csv`` output, replaced), else why not (any other file is never overwritten)."""
    first = fh.readline(1 << 16).decode("utf-8", errors="replace").rstrip("\r\n")
    if SWEEP_COLUMNS <= set(next(csv.reader([first]), [])):
        return None
    return "its first line is not the header of a sweep table"


def cmd_sweep(args: argparse.Namespace) -> int:
    # lazy: the grid loads the accountant, numpy/scipy (CLI start-up, --help)
    from lastiterate.sweep import account_grid, grid_columns, plot_grid, to_records

    apply_config(args)
    vary = parse_vary(args.vary)
    if args.json and args.csv is not None:
        raise UsageError("argument --csv: not allowed with argument --json")
    if args.plot is not None and not ({"epochs", "steps"} & set(vary)):
        raise UsageError(
            "plot is invalid without --vary epochs=... or --vary steps=... (the x axis)"
        )
    check_output_file("plot", args.plot)
    check_output_file("csv", args.csv)
    if args.csv is not None and str(args.csv) != "-":
        # lazy: the ledger module (file rules) imports numpy, not on the CLI's start-up path
        from lastiterate.train.ledger import refuse_foreign_output

        refuse_foreign_output(args.csv, "csv", "lastiterate sweep table", _csv_why_not)
    base = _base_inputs(args, vary)
    quiet = args.json or (args.csv is not None and str(args.csv) == "-")
    bar = ProgressBar(
        "accounting grid", quiet=quiet, total=math.prod(len(v) for v in vary.values())
    )
    try:
        table = account_grid(
            base,
            vary,
            delta=args.delta,
            epsilon=args.epsilon,
            bounds=args.bound,
            progress=bar.step,
            show_progress=False,
            as_frame=False,
        )
    finally:
        bar.close()
    rows, columns = to_records(table), grid_columns(table)
    if args.plot is not None:
        with writing("plot", args.plot):
            plot_grid(rows, args.plot)
    if args.csv is not None:
        text = _csv_text(rows, columns)
        if str(args.csv) == "-":
            sys.stdout.write(text)
            return EXIT_OK
        # lazy: as above
        from lastiterate.train.ledger import write_private_file

        write_private_file(args.csv, text.encode("utf-8"), mode=0o644, param="csv")
    delta = None if args.epsilon is not None else (args.delta if args.delta is not None else 1e-5)
    if args.json:
        print_json(
            {
                "vary": vary,
                "delta": delta,
                "epsilon": args.epsilon,
                "columns": columns,
                "rows": rows,
            }
        )
        return EXIT_OK
    ok = sum(r["status"] == "ok" for r in rows)
    query = f"delta = {delta:g}" if delta is not None else f"epsilon = {args.epsilon:g}"
    shape = " x ".join(f"{k.replace('_', '-')}[{len(v)}]" for k, v in vary.items())
    header = (
        f"Sweep of {len(rows)} runs ({shape}), "
        f"{query}: {ok} with a guarantee for the final model. "
        "epsilon = best bound (final model only), "
        "composition = every iterate released."
    )
    print(format_table(rows, columns, header, by_delta=delta is not None))
    if args.csv is not None:
        print(f"\nCSV written to {args.csv}")
    if args.plot is not None:
        print(f"Plot written to {args.plot}")
    return EXIT_OK
