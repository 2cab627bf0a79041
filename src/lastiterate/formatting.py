"""Plain-text formatting of numbers and account reports (one home for the library's printing).

The CLI and the demo print what :meth:`lastiterate.accountant.Report.format` returns; nothing here
imports the CLI.
"""

from __future__ import annotations

import math
from decimal import Decimal
from numbers import Integral
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lastiterate.accountant import Report
    from lastiterate.run import Run

#: bound ids that charge every iterate (the standard accountants' answer)
COMPOSITION_BOUNDS = ("gdp-composition", "pld-composition", "rdp-composition")


def fmt_number(x: Any, digits: int = 4) -> str:
    """``x`` with ``digits`` significant digits; ``-`` for None, ``inf`` for infinity,
    strings as they are."""
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    x = float(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        return "nan"
    return f"{x:.{digits}g}"


#: integers of more digits than this are printed in scientific notation by :func:`fmt_value`
MAX_PLAIN_DIGITS = 15


def fmt_int(n: int) -> str:
    """``n`` in plain digits, or in compact scientific notation (4 significant digits, trailing
    zeros dropped: ``10**300`` -> ``1e+300``) when it has more than :data:`MAX_PLAIN_DIGITS`
    digits.  ``Decimal`` rounds it exactly and, unlike ``str``, has no limit on the number of
    digits (Python refuses ``str`` of an integer of more than 4300 digits)."""
    if abs(n) < 10**MAX_PLAIN_DIGITS:
        return str(n)
    mantissa, exponent = f"{Decimal(n):.4g}".split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{exponent}"


def fmt_value(value: Any) -> str:
    """A value as error messages name it: ``repr(value)``, except that an integer (Python or
    NumPy, not a bool) is printed by :func:`fmt_int`, so a huge step count reads ``1e+300``
    instead of 300 digits."""
    if isinstance(value, Integral) and not isinstance(value, bool):
        return fmt_int(int(value))
    return repr(value)


def describe_run(run: Run) -> str:
    """One line naming the run's algorithm, sizes, steps, noise, sensitivity and adjacency."""
    s = run.setting()
    parts = [f"{s['algorithm']}", f"n={s['n']}"]
    if s["algorithm"] != "gd":
        parts.append(f"b={s['batch_size']}")
    if s["sampling"]:
        parts.append(f"sampling={s['sampling']}")
    lr = "schedule" if isinstance(s["lr"], list) else fmt_number(s["lr"])
    parts += [f"T={s['steps']} steps ({fmt_number(s['epochs'])} epochs)", f"lr={lr}"]
    parts += [
        f"sigma={fmt_number(s['noise_std'])}",
        f"L={fmt_number(s['sensitivity'])}",
        f"adjacency={s['adjacency']}",
    ]
    if s["contraction"] is not None:
        parts.append(f"c={s['contraction']:.6g}")
    if s["diameter"] is not None:
        parts.append(f"D={fmt_number(s['diameter'])}")
    return ", ".join(parts)


def _headline(report: Report) -> list[str]:
    best = report.best
    if best is None:
        return [f"No applicable bound: {report.no_bound_reason()}"]
    mu = f", mu = {best.mu:.4g}" if best.mu is not None else ""
    headline = (
        f"Releasing only the final model is ({fmt_number(best.epsilon)}, {best.delta:.3g})-DP"
        f"  [{best.bound}: {best.theorem}{mu}]"
    )
    lines = [headline]
    comp = report.composition()
    if comp is not None and best.bound not in COMPOSITION_BOUNDS:
        if report.query.delta is not None:
            lines.append(
                "Composition (every iterate released) would give epsilon = "
                f"{fmt_number(comp.epsilon)}."
            )
        else:
            lines.append(
                f"Composition (every iterate released) would give delta = {comp.delta:.4g}"
                f" at epsilon = {fmt_number(comp.epsilon)}."
            )
    return lines


def _table(report: Report) -> list[str]:
    best = report.best
    header = f"{'bound':<22} {'kind':<9} {'epsilon':>10} {'delta':>9} {'mu':>8}  theorem"
    lines = [header, "-" * len(header)]
    for r in report.results:
        mark = "*" if best is not None and r is best else " "
        lines.append(
            f"{r.bound:<22} {r.kind:<9} {fmt_number(r.epsilon):>10} {r.delta:>9.3g} "
            f"{fmt_number(r.mu):>8} {mark}{r.theorem}"
        )
    return lines


def format_report(report: Report) -> str:
    """The human-readable account report: headline, every result, RDP curves, refusals, failures."""
    lines = [f"Run: {describe_run(report.run)}", *_headline(report), "", *_table(report)]
    rdp = [r for r in report.results if r.rdp]
    if rdp:
        lines += ["", "Renyi DP curves (order: epsilon):"]
        lines += [
            f"  {r.bound}: " + ", ".join(f"{a:g}: {fmt_number(e)}" for a, e in r.rdp or ())
            for r in rdp
        ]
    if report.not_applicable:
        lines += ["", "Not applicable:"]
        lines += [f"  {n.bound}: {n.reason}" for n in report.not_applicable]
    if report.failures:
        lines += ["", "Failed (internal error; this bound is not reported, the others are):"]
        lines += [f"  {f.bound} [{f.theorem}]: {f.reason}" for f in report.failures]
    lines += ["", "* best valid bound; 'estimate' rows are approximations, never chosen as best."]
    return "\n".join(lines)
