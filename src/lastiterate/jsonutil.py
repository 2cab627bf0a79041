"""Standard JSON for every output of lastiterate (RFC 8259: no ``NaN`` / ``Infinity`` tokens).

Python's :func:`json.dumps` writes ``NaN``, ``Infinity`` and ``-Infinity`` by default, which strict
parsers (JavaScript's ``JSON.parse``, ``jq``, most other languages) reject.  :func:`dumps` maps the
non-finite floats DELIBERATELY before serialising, with the convention the reports already use:

* ``+inf`` -> the string ``"inf"`` and ``-inf`` -> ``"-inf"`` (an unbounded epsilon is a
  meaningful answer: "no finite guarantee");
* ``nan`` -> ``null`` (no value: e.g. the loss on an empty set);

numpy scalars and arrays become Python numbers and lists, tuples become lists; then
``json.dumps(..., allow_nan=False)`` guarantees that nothing non-standard slips through.
:func:`loads` is the strict reader: it refuses the non-standard tokens too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["dumps", "jsonable", "loads"]


def _float(x: float) -> float | str | None:
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def jsonable(obj: Any) -> Any:
    """``obj`` with non-finite floats mapped (``"inf"``, ``"-inf"``, ``None``), numpy values made
    plain Python, tuples made lists and mapping keys made strings.  Other objects are returned
    unchanged (``json`` then refuses them unless ``dumps`` gets a ``default``)."""
    if obj is None or isinstance(obj, (str, bool, int)):
        return obj
    if isinstance(obj, float):
        return _float(obj)
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`jsonable` (obj) with ``allow_nan=False``: always standard JSON.

    ``default`` (if given) is applied to objects json cannot serialise, and its result is made
    jsonable too."""
    default = kwargs.pop("default", None)
    if default is not None:
        user_default = default

        def default(o: Any) -> Any:  # wraps the caller's default
            return jsonable(user_default(o))

    kwargs.pop("allow_nan", None)
    return json.dumps(jsonable(obj), allow_nan=False, default=default, **kwargs)


def _reject_constant(token: str) -> Any:
    raise ValueError(f"non-standard JSON token {token}")


def loads(text: str | bytes) -> Any:
    """``json.loads`` that refuses ``NaN``, ``Infinity`` and ``-Infinity`` (ValueError)."""
    return json.loads(text, parse_constant=_reject_constant)
