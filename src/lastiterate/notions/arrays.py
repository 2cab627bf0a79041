"""Small array helpers shared by the PLD engine and the bounds (numpy only)."""

from __future__ import annotations

import numpy as np


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of a 1-d numeric array: the same sort (numpy's default kind) and the
    same removal of repeats, so the same array; without the first call's import of ``numpy.ma``
    (which ``np.unique`` pulls in: 15-30 ms of a command's start-up, issue 11).  An array with a
    NaN goes to ``np.unique`` itself (it merges NaNs)."""
    a = np.asarray(values).ravel()
    if a.dtype.kind == "f" and bool(np.isnan(a).any()):
        return np.unique(a)
    a = np.sort(a)
    if a.size < 2:
        return a
    keep = np.empty(a.size, dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]
