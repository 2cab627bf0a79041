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
import math
import pkgutil
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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


def write_experiment(exp: Experiment, outdir: Path) -> list[Path]:
    """Write NAME.md, NAME.csv and (when the experiment has a plot and matplotlib is present)
    NAME.png."""
    outdir.mkdir(parents=True, exist_ok=True)
    md = outdir / f"{exp.name}.md"
    text = f"# {exp.title}\n\n" + markdown_table(exp.columns, exp.rows)
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
    md.write_text(text)
    csv_path = outdir / f"{exp.name}.csv"
    with csv_path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(exp.columns)
        w.writerows(exp.rows)
    paths = [md, csv_path]
    if exp.plot is not None:
        # lazy: matplotlib (the plot extra) only when a figure is written
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        exp.plot(ax)

        ax.set_title("\n".join(textwrap.wrap(exp.title, 70)), fontsize=9)
        fig.tight_layout()
        png = outdir / f"{exp.name}.png"
        fig.savefig(png, dpi=120)
        plt.close(fig)
        paths.append(png)
    return paths
