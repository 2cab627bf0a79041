"""Tables as training data: CSV and Parquet files and pandas DataFrames.

A table becomes a numeric feature matrix by a PER-ROW map fixed before training:

* numeric columns (integers, floats) are used as they are;
* categorical columns (``object``, ``string``, ``category`` and ``bool`` dtypes) are one-hot
  encoded, one 0/1 column per category (``column=value``); a value outside the categories of the
  training table (a test row) encodes as all zeros;
* missing values (NaN, None, empty cells and pandas' other NA markers) are REFUSED with the column
  named: they are never imputed, because an imputation computed from the data is a data-dependent
  step the guarantee would not cover;
* the target column becomes class labels ``0..K-1`` (strings, booleans and categories: the classes
  in sorted order, or the declared ``classes``) or stays a number (integers: class labels as they
  are; floats: a regression target).

**What the category lists reveal.**  When the categories of a column are read from the data, the
list itself (which values occur) is part of the released model's shape and is NOT covered by the
guarantee: a category held by one person reveals that it occurs.  Declare the categories
(``categories={"column": [...]}``: public knowledge such as a form's choices) to keep the encoding
data-independent; the dataset's notes say which columns were declared and which were read.
Likewise n, the column names and the label set are treated as public (as everywhere in the
library).

References: the per-row-map argument is the one of :mod:`lastiterate.train.preprocessing`
(neighbouring tables map to neighbouring matrices, so the training guarantee carries over).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lastiterate.errors import ParameterError

#: file suffixes read as CSV (gzip, bz2, zip, xz compression inferred by pandas from the suffix)
CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.zip", ".csv.xz", ".tsv", ".tsv.gz")
PARQUET_SUFFIXES = (".parquet", ".pq")

#: how many column names an error message lists before "..."
_SHOW = 8

CATEGORIES_READ_NOTE = (
    "category lists read from the data (treated as public, NOT covered by the guarantee: declare "
    "them, load_frame(categories=...), to keep the encoding data-independent)"
)


def is_table_path(name: str) -> bool:
    """True when ``name`` ends like a CSV or Parquet file (see ``CSV_SUFFIXES``)."""
    low = name.lower()
    return low.endswith(CSV_SUFFIXES) or low.endswith(PARQUET_SUFFIXES)


def _pandas() -> Any:
    if importlib.util.find_spec("pandas") is None:
        raise ParameterError(
            "dataset",
            "<table>",
            "reading CSV / Parquet files and DataFrames needs pandas: pip install pandas",
        )
    # lazy: pandas is optional (checked above) and only tables need it
    import pandas as pd

    return pd


def read_table(path: str | Path) -> Any:
    """The pandas DataFrame of a CSV (``CSV_SUFFIXES``) or Parquet (``PARQUET_SUFFIXES``) file.

    Parquet needs pyarrow (checked with :func:`importlib.util.find_spec` before anything is
    read).  An absent or unreadable file raises :class:`ParameterError` naming it."""
    p = Path(path)
    name = str(path)
    if not p.is_file():
        raise ParameterError("dataset", name, "is not an existing file")
    pd = _pandas()
    low = name.lower()
    if low.endswith(PARQUET_SUFFIXES):
        if importlib.util.find_spec("pyarrow") is None:
            raise ParameterError(
                "dataset", name, "is a Parquet file: reading it needs pyarrow (pip install pyarrow)"
            )
        try:
            return pd.read_parquet(p, engine="pyarrow")
        except Exception as exc:  # noqa: BLE001 - pyarrow raises many kinds
            raise ParameterError(
                "dataset", name, f"is not a readable Parquet file ({type(exc).__name__})"
            ) from None
    sep = "\t" if ".tsv" in low else ","
    try:
        return pd.read_csv(p, sep=sep, skipinitialspace=True)
    except Exception as exc:  # noqa: BLE001 - ParserError, UnicodeDecodeError, EmptyDataError ...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ParameterError("dataset", name, f"is not a readable CSV file ({first})") from None


@dataclass
class EncodedTable:
    """A table turned into numbers by :func:`encode_frame` (see the module docstring)."""

    X: np.ndarray
    y: np.ndarray
    task: str  # "classification" | "regression"
    feature_names: list[str]
    #: per categorical column, its categories in the order of its one-hot columns
    categories: dict[str, list[str]]
    #: the categorical columns whose categories were DECLARED (the rest were read from the data)
    declared: list[str]
    #: class names of a string / boolean / categorical target, in label order (None otherwise)
    class_names: list[str] | None
    notes: list[str] = field(default_factory=list)


def _columns(names: Sequence[Any]) -> str:
    shown = ", ".join(repr(str(c)) for c in list(names)[:_SHOW])
    return shown + (", ..." if len(names) > _SHOW else "")


def _is_categorical(series: Any) -> bool:
    pd = _pandas()
    dt = series.dtype
    return bool(
        isinstance(dt, pd.CategoricalDtype)
        or pd.api.types.is_bool_dtype(dt)
        or pd.api.types.is_object_dtype(dt)
        or pd.api.types.is_string_dtype(dt)
    )


def _refuse_missing(frame: Any, name: str) -> None:
    na = frame.isna()
    counts = na.sum(axis=0)
    bad = [c for c in frame.columns if int(counts[c]) > 0]
    if bad:
        col = bad[0]
        first = int(np.argmax(na[col].to_numpy()))
        more = f" (also in {_columns(bad[1:])})" if len(bad) > 1 else ""
        raise ParameterError(
            "dataset",
            name,
            f"column {str(col)!r} has {int(counts[col])} missing value(s) (first in data row "
            f"{first}){more}: missing values are refused, never imputed -- fill or drop them first",
        )


def _as_text(series: Any) -> np.ndarray:
    return np.asarray([str(v) for v in series.tolist()], dtype=object)


def encode_frame(
    frame: Any,
    target: str,
    *,
    name: str = "DataFrame",
    categories: Mapping[str, Sequence[Any]] | None = None,
    classes: Sequence[Any] | None = None,
    unknown: str = "error",
) -> EncodedTable:
    """One-hot encode the categorical columns of ``frame`` and split off ``target``.

    ``categories``: declared categories per column (public knowledge); other categorical columns
    take the sorted distinct values of ``frame`` (treated as public, see the module docstring).
    ``classes``: the declared class names of a non-numeric target (sorted values otherwise).
    ``unknown``: ``"error"`` refuses a value outside a column's declared categories, ``"ignore"``
    encodes it as all zeros (used for a test table encoded with the training table's categories).
    Raises :class:`ParameterError` for a missing target column, missing values (column named),
    columns of unsupported types and tables without rows or features."""
    pd = _pandas()
    if not isinstance(frame, pd.DataFrame):
        raise ParameterError(
            "dataset", name, f"must be a pandas DataFrame (got {type(frame).__name__})"
        )
    if unknown not in ("error", "ignore"):
        raise ParameterError("unknown", unknown, "must be 'error' or 'ignore'")
    cols = [str(c) for c in frame.columns]
    if len(set(cols)) != len(cols):
        dup = sorted({c for c in cols if cols.count(c) > 1})
        raise ParameterError("dataset", name, f"has duplicate column names: {_columns(dup)}")
    frame = frame.set_axis(cols, axis=1)
    if not isinstance(target, str) or target not in cols:
        raise ParameterError(
            "target",
            target,
            f"is not a column of {name} (columns: {_columns(cols)})",
        )
    if len(frame) == 0:
        raise ParameterError("dataset", name, "has no rows")
    _refuse_missing(frame, name)
    declared = {str(k): [str(v) for v in vals] for k, vals in (categories or {}).items()}
    for col, listed in declared.items():
        if col not in cols or col == target:
            raise ParameterError(
                "categories", col, f"names no feature column of {name} (columns: {_columns(cols)})"
            )
        if len(set(listed)) != len(listed) or not listed:
            raise ParameterError("categories", col, "must list distinct categories (at least one)")
    features = [c for c in cols if c != target]
    if not features:
        raise ParameterError(
            "dataset", name, f"has no feature column besides the target {target!r}"
        )
    blocks: list[np.ndarray] = []
    names: list[str] = []
    cats_out: dict[str, list[str]] = {}
    for col in features:
        s = frame[col]
        if col in declared or _is_categorical(s):
            values = _as_text(s)
            cats = declared.get(col) or sorted(set(values.tolist()))
            index = {c: i for i, c in enumerate(cats)}
            codes = np.fromiter(
                (index.get(v, -1) for v in values), dtype=np.int64, count=len(values)
            )
            if (codes < 0).any() and unknown == "error":
                bad = values[int(np.argmax(codes < 0))]
                raise ParameterError(
                    "dataset",
                    name,
                    f"column {col!r} holds {bad!r}, which is not among its declared categories",
                )
            onehot = np.zeros((len(values), len(cats)))
            rows = np.flatnonzero(codes >= 0)
            onehot[rows, codes[rows]] = 1.0
            blocks.append(onehot)
            names += [f"{col}={c}" for c in cats]
            cats_out[col] = list(cats)
        elif pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_complex_dtype(s.dtype):
            blocks.append(s.to_numpy(dtype=np.float64).reshape(-1, 1))
            names.append(col)
        else:
            raise ParameterError(
                "dataset",
                name,
                f"column {col!r} has type {s.dtype}, which is neither numeric nor categorical "
                "(convert it, or drop the column)",
            )
    X = np.hstack(blocks)
    ys = frame[target]
    class_names: list[str] | None = None
    if classes is not None or _is_categorical(ys):
        values = _as_text(ys)
        class_names = [str(c) for c in classes] if classes is not None else sorted(set(values))
        index = {c: i for i, c in enumerate(class_names)}
        y = np.fromiter((index.get(v, -1) for v in values), dtype=np.int64, count=len(values))
        if (y < 0).any():
            raise ParameterError(
                "target",
                target,
                f"holds {values[int(np.argmax(y < 0))]!r}, not among the classes {class_names}",
            )
        task = "classification"
    elif pd.api.types.is_integer_dtype(ys.dtype):
        y, task = ys.to_numpy(dtype=np.int64), "classification"
    elif pd.api.types.is_float_dtype(ys.dtype):
        y, task = ys.to_numpy(dtype=np.float64), "regression"
    else:
        raise ParameterError(
            "target", target, f"has type {ys.dtype}: must hold numbers, strings or booleans"
        )
    read = [c for c in cats_out if c not in declared]
    notes: list[str] = []
    if cats_out:
        notes.append(
            f"{len(cats_out)} categorical column(s) one-hot encoded into "
            f"{sum(len(v) for v in cats_out.values())} 0/1 features"
        )
    if read:
        notes.append(f"{CATEGORIES_READ_NOTE}: {_columns(read)}")
    if class_names is not None:
        notes.append(
            "labels: "
            + ", ".join(f"{i}={c!r}" for i, c in enumerate(class_names[:_SHOW]))
            + (", ..." if len(class_names) > _SHOW else "")
        )
    return EncodedTable(
        X, y, task, names, cats_out, [c for c in cats_out if c in declared], class_names, notes
    )


def encode_test_frame(
    frame: Any, train: EncodedTable, target: str, *, name: str
) -> tuple[np.ndarray, np.ndarray]:
    """``(X_test, y_test)`` of a test table encoded with ``train``'s columns and categories
    (unseen categories encode as all zeros)."""
    enc = encode_frame(
        frame,
        target,
        name=name,
        categories=train.categories,
        classes=train.class_names,
        unknown="ignore",
    )
    if enc.feature_names != train.feature_names:
        raise ParameterError(
            "dataset",
            name,
            "test table's columns differ from the training table's "
            f"({_columns(enc.feature_names)} vs {_columns(train.feature_names)})",
        )
    return enc.X, enc.y
