"""Errors raised by lastiterate and small validators that produce them.

Every invalid input raises :class:`ParameterError`, whose message names the parameter, the value
received and the allowed range.  The command-line tool turns it into exit status 2 and one line on
stderr.  A theorem whose assumptions do not hold raises :class:`NotApplicable` with the reason; the
accountant records it as a refusal, never as an error.
"""

from __future__ import annotations

import math
from typing import Any

from lastiterate.formatting import fmt_value


class ParameterError(ValueError):
    """An input parameter is outside its allowed range."""

    def __init__(self, name: str, value: Any, allowed: str) -> None:
        self.name = name
        self.value = value
        self.allowed = allowed
        super().__init__(f"{name}={fmt_value(value)} is invalid: {allowed}")


class NotApplicable(Exception):
    """A theorem's assumptions are not met by the described run (the message says why)."""


class BeyondEngineRange(ParameterError, NotApplicable):
    """A bound's numerical method cannot represent this run: e.g. a per-step privacy loss whose
    profile is still above the truncation level at epsilon 1e5 (far too little noise for any
    meaningful guarantee).  The accountant records it as a refusal with this reason, and the
    other bounds are reported; code that searches over noises treats it as a refused noise, as
    it treats any :class:`ParameterError`."""

    def __init__(self, reason: str) -> None:
        self.name, self.value, self.allowed = "run", None, reason
        ValueError.__init__(self, reason)


def _is_bool(value: Any) -> bool:
    """True for ``True`` / ``False`` and NumPy booleans (``float()`` would read them as 1 / 0)."""
    return isinstance(value, bool) or getattr(value, "dtype", None) == bool


def _finite_number(name: str, value: Any) -> float:
    if _is_bool(value):  # smoothness=True must not silently declare M = 1
        raise ParameterError(name, value, "must be a real number, not a bool")
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ParameterError(name, value, "must be a real number") from None
    if math.isnan(x):
        raise ParameterError(name, value, "must be a real number, not NaN")
    return x


def check_positive(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """Return ``float(value)`` if it is > 0 (finite unless ``allow_inf``)."""
    x = _finite_number(name, value)
    if not x > 0 or (math.isinf(x) and not allow_inf):
        raise ParameterError(name, value, "must be > 0" + ("" if allow_inf else " and finite"))
    return x


SCALE_RANGE: tuple[float, float] = (1e-30, 1e30)
"""Range of every positive real scale of a run (lr, sigma, z, C, L, m, M, D).  Products and ratios
of a few such scales, and their squares, stay inside double precision, so no bound overflows or
divides by an underflowed zero; every practical run lies far inside it."""


def check_scale(name: str, value: Any) -> float:
    """Return ``float(value)`` if it lies in :data:`SCALE_RANGE` (a positive,
    finite, moderate scale)."""
    x = _finite_number(name, value)
    low, high = SCALE_RANGE
    if not (low <= x <= high):
        raise ParameterError(name, value, f"must be in [{low:g}, {high:g}]")
    return x


def check_nonnegative(name: str, value: Any) -> float:
    """Return ``float(value)`` if it is finite and >= 0."""
    x = _finite_number(name, value)
    if not (x >= 0 and math.isfinite(x)):
        raise ParameterError(name, value, "must be >= 0 and finite")
    return x


def check_in_range(
    name: str,
    value: Any,
    low: float,
    high: float,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``float(value)`` if it lies in the interval given by low/high and openness flags."""
    x = _finite_number(name, value)
    ok_low = x > low if low_open else x >= low
    ok_high = x < high if high_open else x <= high
    if not (ok_low and ok_high):
        lb = "(" if low_open else "["
        rb = ")" if high_open else "]"
        raise ParameterError(name, value, f"must be in {lb}{low:g}, {high:g}{rb}")
    return x


def check_probability(
    name: str, value: Any, *, open_low: bool = True, open_high: bool = False
) -> float:
    """A probability in (0, 1] by default."""
    return check_in_range(name, value, 0.0, 1.0, low_open=open_low, high_open=open_high)


def check_positive_int(name: str, value: Any, *, minimum: int = 1) -> int:
    """Return ``int(value)`` if it is an integer >= ``minimum``."""
    if isinstance(value, bool):
        raise ParameterError(name, value, f"must be an integer >= {minimum}")
    try:
        as_float = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ParameterError(name, value, f"must be an integer >= {minimum}") from None
    if not math.isfinite(as_float) or as_float != int(as_float) or int(as_float) < minimum:
        raise ParameterError(name, value, f"must be an integer >= {minimum}")
    return int(as_float)


def check_int_in_range(name: str, value: Any, low: int, high: int) -> int:
    """Return ``int(value)`` if it is an integer in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(name, value, f"must be an integer in [{low}, {high}]")
    if not low <= value <= high:
        raise ParameterError(name, value, f"must be an integer in [{low}, {high}]")
    return value


def check_progress(progress: Any) -> None:
    """Refuse a ``progress`` argument that is neither None nor callable (``progress=True`` would
    only fail with a TypeError after the first, possibly long, evaluation)."""
    if progress is not None and not callable(progress):
        raise ParameterError(
            "progress", progress, "must be None or a callable taking one message string"
        )
