"""Shared machinery for ``lastiterate reproduce NAME``.

An experiment is a function ``(quick: bool) -> Experiment`` registered with
:func:`register_experiment`.  It computes its tables from the library's own functions (never from
hard-coded results; printed paper values appear only in the ``paper`` columns used for the
comparison).  :func:`write_experiment` writes ``NAME.md``, ``NAME.csv`` and ``NAME.png`` and the
CLI prints the cells where the printed paper value and ours differ beyond the printed precision.
"""

from __future__ import annotations

import csv
import importlib
import io
import math
import pkgutil
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO


@dataclass
class Comparison:
    """One printed paper value against ours."""

    label: str
    paper: float
    ours: float
    decimals: int  # printed precision of the paper value

    @property
    def agrees(self) -> bool:
        return abs(self.paper - self.ours) <= 0.5 * 10 ** (-self.decimals) + 1e-12

    def line(self) -> str:
        d = self.decimals
        return f"{self.label}: paper {self.paper:.{d}f}, ours {self.ours:.{d + 2}f}"


@dataclass
class Experiment:
    """Tables and a plot produced by one reproduction."""

    name: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    comparisons: list[Comparison] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: findings computed from the rows (printed by ``lastiterate reproduce`` and written first)
    summary: list[str] = field(default_factory=list)
    #: draws the figure on a matplotlib Axes
    plot: Callable[[Any], None] | None = None


_EXPERIMENTS: dict[str, tuple[str, Callable[[bool], Experiment]]] = {}


def register_experiment(
    name: str, description: str
) -> Callable[[Callable[[bool], Experiment]], Callable[[bool], Experiment]]:
    def decorate(func: Callable[[bool], Experiment]) -> Callable[[bool], Experiment]:
        _EXPERIMENTS[name] = (description, func)
        return func

    return decorate


def experiments() -> dict[str, tuple[str, Callable[[bool], Experiment]]]:
    """All registered experiments (imports every module of this package once)."""
    # lazy: the package imports this module (a cycle at import); its modules register experiments
    from lastiterate import experiments as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{pkg.__name__}.{info.name}")
    return dict(sorted(_EXPERIMENTS.items()))


def _table_cell(x: Any) -> str:
    """A markdown table cell: 4 significant digits, scientific from 1e4 (wider than fmt_number)."""
    if isinstance(x, float):
        if math.isinf(x):
            return "inf"
        return f"{x:.4g}" if abs(x) < 1e4 else f"{x:.4e}"
    return str(x)


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "| " + " | ".join(columns) + " |\n|" + "|".join("---" for _ in columns) + "|\n"
    return head + "".join("| " + " | ".join(_table_cell(v) for v in row) + " |\n" for row in rows)


#: the first line of every Markdown file ``reproduce`` writes (an HTML comment, invisible when
#: rendered): how an earlier output is recognised, and replaced
MD_MARKER = "<!-- written by lastiterate reproduce -->"


def _refuse_foreign_outputs(exp: Experiment, md: Path, csv_path: Path, png: Path | None) -> None:
    """Refuse (ParameterError ``out``) before anything of ``exp`` is written when one of its files
    exists and is not an earlier output of it (the rule of every file lastiterate writes:
    :func:`lastiterate.train.ledger.refuse_foreign_output`)."""
    from lastiterate.plotting import png_why_not
    from lastiterate.train.ledger import refuse_foreign_output

    def md_why_not(fh: BinaryIO) -> str | None:
        first = fh.readline(len(MD_MARKER) + 2).decode("utf-8", errors="replace").rstrip("\r\n")
        return None if first == MD_MARKER else f"its first line is not {MD_MARKER}"

    def csv_why_not(fh: BinaryIO) -> str | None:
        first = fh.readline(1 << 16).decode("utf-8", errors="replace").rstrip("\r\n")
        if next(csv.reader([first]), []) == [str(c) for c in exp.columns]:
            return None
        return f"its header is not that of the {exp.name} table"

    refuse_foreign_output(md, "out", "lastiterate reproduce report", md_why_not)
    refuse_foreign_output(csv_path, "out", "lastiterate reproduce table", csv_why_not)
    if png is not None:
        refuse_foreign_output(png, "out", "lastiterate plot", png_why_not)


def write_experiment(exp: Experiment, outdir: Path) -> list[Path]:
    """Write NAME.md, NAME.csv and (when the experiment has a plot and matplotlib is present)
    NAME.png, each atomically (temporary file + replace); an existing file of that name that is
    not an earlier output of this experiment is refused (ParameterError ``out``) before any of
    them is written."""
    from lastiterate.train.ledger import write_private_file

    outdir.mkdir(parents=True, exist_ok=True)
    md = outdir / f"{exp.name}.md"
    csv_path = outdir / f"{exp.name}.csv"
    png = outdir / f"{exp.name}.png"
    _refuse_foreign_outputs(exp, md, csv_path, png if exp.plot is not None else None)
    text = f"{MD_MARKER}\n# {exp.title}\n\n" + markdown_table(exp.columns, exp.rows)
    if exp.comparisons:
        bad = [c for c in exp.comparisons if not c.agrees]
        n_compared = len(exp.comparisons)
        text += f"\n{n_compared - len(bad)} of {n_compared} printed values reproduced"
        text += " to the printed precision.\n"
        for c in bad:
            text += f"- differs: {c.line()}\n"
    for line in exp.summary:
        text += f"\n{line}\n"
    for note in exp.notes:
        text += f"\n{note}\n"
    write_private_file(md, text.encode("utf-8"), mode=0o644, param="out")
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(exp.columns)
    w.writerows(exp.rows)
    write_private_file(csv_path, buf.getvalue().encode("utf-8"), mode=0o644, param="out")
    paths = [md, csv_path]
    if exp.plot is not None:
        # lazy: matplotlib (the plot extra) only when a figure is written
        from lastiterate.plotting import _pyplot, save_png

        plt = _pyplot()
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        exp.plot(ax)

        ax.set_title("\n".join(textwrap.wrap(exp.title, 70)), fontsize=9)
        fig.tight_layout()
        save_png(fig, png, dpi=120, param="out")
        plt.close(fig)
        paths.append(png)
    return paths
