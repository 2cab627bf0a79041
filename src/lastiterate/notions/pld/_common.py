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

#: the smallest delta the FFT error must not disturb (see :func:`delta_of_interest`)
_DEFAULT_TILT_DELTA_FLOOR = 1e-20
_TILT_FLOOR: ContextVar[float] = ContextVar("tilt_delta_floor", default=_DEFAULT_TILT_DELTA_FLOOR)
#: FFT error bounds that add less than this fraction of the delta of interest in total are not
#: chased with tilted passes (issue 11: 1e-3 instead of 1e-4 halves the cost of a DP-SGD account;
#: the value moves by at most about this fraction of delta divided by the profile's slope, measured
#: at +2e-6 .. +2.4e-5 relative for q = 256/60000, z = 1.1, T = 1.4e4 .. 1e5, delta = 1e-5, below
#: the grid's own discretisation error; see benchmarks/composition.py)
_TILT_FLOOR_FRACTION = 1e-3


def tilt_delta_floor() -> float:
    """Tilted FFT passes are added only where the error above a bin could add more than this to a
    delta (the bound is added to the pessimistic PMF in every case: this only steers tightness)."""
    return _TILT_FLOOR.get()


@contextmanager
def delta_of_interest(delta: float | None) -> Iterator[None]:
    """Compose for queries at ``delta``: FFT errors that add less than 1e-3 delta in total are not
    chased with extra tilted passes (they are still added to the pessimistic PMF, so every value
    stays an upper bound; deltas far below this one are only less tight).  ``None`` keeps 1e-20."""
    floor = _DEFAULT_TILT_DELTA_FLOOR
    if delta is not None:
        floor = max(_DEFAULT_TILT_DELTA_FLOOR, _TILT_FLOOR_FRACTION * delta)
    token = _TILT_FLOOR.set(floor)
    try:
        yield
    finally:
        _TILT_FLOOR.reset(token)


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
