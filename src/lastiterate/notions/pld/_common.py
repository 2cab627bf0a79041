"""Constants and the grid-size refusal shared by the PLD modules."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from lastiterate.errors import (
    ParameterError,
)

DEFAULT_DISCRETIZATION: float = 1e-4
"""Default grid width of the privacy loss (same default as dp_accounting)."""

DEFAULT_TAIL_MASS_TRUNCATION: float = 1e-15
"""Default bound on the mass an FFT composition may push to +inf (same as dp_accounting)."""

DEFAULT_LOG_MASS_TRUNCATION_BOUND: float = -50.0
"""One-step profiles are cut where delta <= exp(this); the rest is put at +inf (pessimistic)."""

_MAX_GRID_POINTS = 20_000_000  # grids that would need several GB are coarsened by the callers

_GRID_BUDGET: ContextVar[int] = ContextVar("grid_budget", default=_MAX_GRID_POINTS)


def max_grid_points() -> int:
    """The largest grid (FFT length or one-step profile) allowed now: ``_MAX_GRID_POINTS``, or the
    smaller budget of an enclosing :func:`grid_budget`."""
    return _GRID_BUDGET.get()


@contextmanager
def grid_budget(points: int) -> Iterator[None]:
    """Cap the grid size inside the block (a search that only compares candidates asks for a cheap
    grid: a coarser grid is still pessimistic, so every value stays a valid upper bound)."""
    token = _GRID_BUDGET.set(max(1024, min(int(points), _MAX_GRID_POINTS)))
    try:
        yield
    finally:
        _GRID_BUDGET.reset(token)


class _GridTooLarge(ParameterError):
    """A composition would need more than ``_MAX_GRID_POINTS`` grid points at this width."""

    def __init__(self, points: float) -> None:
        super().__init__(
            "discretization",
            "(composition grid)",
            f"composition needs {points:.3g} grid points; use a coarser discretization",
        )
        self.points = points
