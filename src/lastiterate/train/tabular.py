"""Tables as training data: CSV and Parquet files and pandas DataFrames.

A table becomes a numeric feature matrix by a PER-ROW map fixed before training:

* numeric columns (integers, floats) are used as they are;
* categorical columns (``object``, ``string``, ``category`` and ``bool`` dtypes) are one-hot
  encoded, one 0/1 column per category (``column=value``); a value outside the categories is
  refused with the column and the value named (only a test table read while training,
  :func:`encode_test_frame`, encodes it as all zeros);
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

**The map is data.**  :class:`TableEncoding` holds it -- the input columns in order, numeric or
categorical with the category list that fixes the order of the one-hot features, the target
column and the class names (label i is ``class_names[i]``) -- and :meth:`TableEncoding.to_json`
writes it into the model card (``preprocessing.encoding``).  Training encodes its table WITH the
encoding it derived (:func:`encode_frame`), and ``lastiterate predict`` / ``load_model(...)
.predict(frame)`` replay the same :meth:`TableEncoding.encode_features` on new tables: columns
found by name (any order, extra columns ignored), categorical columns of a CSV read verbatim as
text (``007`` stays ``007``).

References: the per-row-map argument is the one of :mod:`lastiterate.train.preprocessing`
(neighbouring tables map to neighbouring matrices, so the training guarantee carries over).
"""

from __future__ import annotations

import importlib.util
from collections import Counter
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
    "them, train --categories COLUMN=V1,V2,... or load_frame(categories=...), to keep the "
    "encoding data-independent)"
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


def read_table(path: str | Path, *, text_columns: Sequence[str] = ()) -> Any:
    """The pandas DataFrame of a CSV (``CSV_SUFFIXES``) or Parquet (``PARQUET_SUFFIXES``) file.

    ``text_columns``: CSV columns read verbatim as text (the categorical columns of a recorded
    :class:`TableEncoding`, so that ``007`` stays ``007`` as it was when training); columns the
    file lacks are skipped.  Parquet keeps its own types and needs pyarrow (checked with
    :func:`importlib.util.find_spec` before anything is read).  An absent or unreadable file
    raises :class:`ParameterError` naming it."""
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
    dtype = {str(c): str for c in text_columns} or None
    try:
        return pd.read_csv(p, sep=sep, skipinitialspace=True, dtype=dtype)
    except Exception as exc:  # noqa: BLE001 - ParserError, UnicodeDecodeError, EmptyDataError ...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ParameterError("dataset", name, f"is not a readable CSV file ({first})") from None


# ---------------------------------------------------------------------- the encoding, as data
#: the ``format`` of :meth:`TableEncoding.to_json` (the ``preprocessing.encoding`` of a model card)
ENCODING_FORMAT = "lastiterate-table-encoding/1"
#: where a category list or a class list came from (:attr:`TableColumn.source`)
SOURCES = ("declared", "data")
#: how the values of a categorical column are read back from a CSV file (:attr:`TableColumn.values`)
VALUE_KINDS = ("text", "boolean")
#: what the target column holds (:attr:`TableTarget.kind`)
TARGET_KINDS = ("classes", "labels", "values")
#: limits on a recorded encoding (a model card is untrusted input)
MAX_COLUMNS = 100_000
MAX_CATEGORIES = 1_000_000


@dataclass(frozen=True)
class TableColumn:
    """One input column of a table and its part of the feature map.

    ``kind="numeric"``: one feature, the value as it is.  ``kind="categorical"``: one 0/1 feature
    per entry of ``categories``, in that order (``column=value``); every value must be one of them.
    ``source``: ``"declared"`` (public knowledge, given by the user) or ``"data"`` (read from the
    training table: treated as public, NOT covered by the guarantee).  ``values``: ``"boolean"``
    when the training column held booleans (read back as booleans), ``"text"`` otherwise."""

    name: str
    kind: str  # "numeric" | "categorical"
    categories: tuple[str, ...] = ()
    source: str = "data"
    values: str = "text"

    @property
    def width(self) -> int:
        """The number of features this column becomes."""
        return 1 if self.kind == "numeric" else len(self.categories)

    @property
    def feature_names(self) -> list[str]:
        """The names of its features (``name`` or ``name=category``)."""
        return (
            [self.name] if self.kind == "numeric" else [f"{self.name}={c}" for c in self.categories]
        )


@dataclass(frozen=True)
class TableTarget:
    """The label column: ``kind="classes"`` (label i is ``class_names[i]``; strings, booleans,
    categories or declared classes), ``"labels"`` (integer class labels as they are) or
    ``"values"`` (a regression target).  ``source`` / ``values`` as for :class:`TableColumn`."""

    name: str
    kind: str
    class_names: tuple[str, ...] | None = None
    source: str = "data"
    values: str = "text"

    @property
    def task(self) -> str:
        """``"regression"`` for values, ``"classification"`` otherwise."""
        return "regression" if self.kind == "values" else "classification"


@dataclass(frozen=True)
class TableEncoding:
    """The per-row map from a table to the feature matrix: the input columns in order (numeric
    or one-hot categorical) and the target.  :func:`encode_frame` derives it from a training
    table and encodes that table WITH it; a model card stores it (:meth:`to_json`) and
    :meth:`encode_features` replays it on new tables -- the same code on both sides, so a
    prediction sees exactly the features training saw.  Columns are found by name (their order
    in a new table does not matter; extra columns are ignored)."""

    columns: tuple[TableColumn, ...]
    target: TableTarget

    @property
    def feature_names(self) -> list[str]:
        """The names of the encoded features, in order."""
        return [f for c in self.columns for f in c.feature_names]

    @property
    def n_features(self) -> int:
        """The number of encoded features."""
        return sum(c.width for c in self.columns)

    @property
    def text_columns(self) -> list[str]:
        """The columns to read verbatim as text from a CSV file (categorical columns and a class
        target whose training values were not booleans)."""
        cols = [c.name for c in self.columns if c.kind == "categorical" and c.values == "text"]
        t = self.target
        return cols + ([t.name] if t.kind == "classes" and t.values == "text" else [])

    @property
    def categories(self) -> dict[str, list[str]]:
        """Per categorical column, its categories in the order of its one-hot features."""
        return {c.name: list(c.categories) for c in self.columns if c.kind == "categorical"}

    @property
    def read_from_data(self) -> list[str]:
        """The categorical columns whose category lists were read from the training table."""
        return [c.name for c in self.columns if c.kind == "categorical" and c.source == "data"]

    # ------------------------------------------------------------------ replay
    def _frame(self, frame: Any, name: str, *, with_target: bool) -> Any:
        """``frame`` with string column names and the columns this encoding needs (checked)."""
        pd = _pandas()
        if not isinstance(frame, pd.DataFrame):
            raise ParameterError(
                "dataset", name, f"must be a pandas DataFrame (got {type(frame).__name__})"
            )
        cols = [str(c) for c in frame.columns]
        need = [c.name for c in self.columns] + ([self.target.name] if with_target else [])
        absent = [c for c in need if c not in cols]
        if absent:
            raise ParameterError(
                "dataset",
                name,
                f"has no column {absent[0]!r}"
                + (f" (nor {_columns(absent[1:])})" if len(absent) > 1 else "")
                + f": the model's encoding needs the columns {_columns(need)}",
            )
        counts = Counter(cols)
        dup = sorted({c for c in need if counts[c] > 1})
        if dup:
            raise ParameterError("dataset", name, f"has duplicate column names: {_columns(dup)}")
        if len(frame) == 0:
            raise ParameterError("dataset", name, "has no rows")
        frame = frame.set_axis(cols, axis=1)[need]
        _refuse_missing(frame, name)
        return frame

    def encode_features(
        self, frame: Any, *, name: str = "DataFrame", unknown: str = "error"
    ) -> np.ndarray:
        """The feature matrix of ``frame`` (float64, one row per row of ``frame``).

        ``unknown="error"`` refuses a category outside a column's list (naming the column and
        the value); ``"ignore"`` encodes it as all zeros (only for evaluation tables while
        training).  Raises :class:`ParameterError` for a missing column, missing values, a
        non-numeric or non-finite value in a numeric column, or an unknown category."""
        if unknown not in ("error", "ignore"):
            raise ParameterError("unknown", unknown, "must be 'error' or 'ignore'")
        frame = self._frame(frame, name, with_target=False)
        blocks = [
            _numeric_feature(frame[c.name], c.name, name)
            if c.kind == "numeric"
            else _one_hot(frame[c.name], c, name, unknown)
            for c in self.columns
        ]
        return np.hstack(blocks)

    def encode_target(self, frame: Any, *, name: str = "DataFrame") -> np.ndarray:
        """The labels (int64) or regression targets (float64) of ``frame``'s target column.

        Raises :class:`ParameterError` for a missing column or values, a class outside
        ``class_names``, or values of the wrong type."""
        t = self.target
        ys = self._frame(frame, name, with_target=True)[t.name]
        pd = _pandas()
        if t.kind == "classes":
            assert t.class_names is not None  # by construction and from_json
            values = _as_text(ys)
            index = {c: i for i, c in enumerate(t.class_names)}
            y = np.fromiter((index.get(v, -1) for v in values), dtype=np.int64, count=len(values))
            if (y < 0).any():
                raise ParameterError(
                    "target",
                    t.name,
                    f"holds {values[int(np.argmax(y < 0))]!r}, not among the classes "
                    f"{list(t.class_names)[:_SHOW]}",
                )
            return y
        if pd.api.types.is_bool_dtype(ys.dtype) or not pd.api.types.is_numeric_dtype(ys.dtype):
            what = "integer class labels" if t.kind == "labels" else "numbers"
            raise ParameterError(
                "target", t.name, f"has type {ys.dtype}: the model's target holds {what}"
            )
        if t.kind == "labels" and pd.api.types.is_integer_dtype(ys.dtype):
            return ys.to_numpy(dtype=np.int64)
        if t.kind == "labels":
            yf = ys.to_numpy(dtype=np.float64)
            if not (np.isfinite(yf).all() and (yf == np.round(yf)).all()):
                raise ParameterError("target", t.name, "must hold integer class labels")
            return yf.astype(np.int64)
        return ys.to_numpy(dtype=np.float64)

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        """The encoding as JSON data (no code): ``columns`` in order, each ``{"name", "kind"}``
        and, when categorical, ``categories`` (the order of its one-hot features), ``source``
        and ``values``; ``target`` with its ``kind`` and ``class_names`` (label i -> name)."""
        cols: list[dict[str, Any]] = []
        for c in self.columns:
            if c.kind == "numeric":
                cols.append({"name": c.name, "kind": "numeric"})
            else:
                cols.append(
                    {
                        "name": c.name,
                        "kind": "categorical",
                        "categories": list(c.categories),
                        "source": c.source,
                        "values": c.values,
                    }
                )
        t = self.target
        target: dict[str, Any] = {"name": t.name, "kind": t.kind}
        if t.kind == "classes":
            target.update(class_names=list(t.class_names or ()), source=t.source, values=t.values)
        read = self.read_from_data
        return {
            "format": ENCODING_FORMAT,
            "columns": cols,
            "target": target,
            "n_features": self.n_features,
            "covered_by_guarantee": not read,
            "note": (
                "numeric columns as they are, categorical columns one 0/1 feature per listed "
                "category in the listed order (a value outside the list is refused); columns are "
                "found by name; label i is class_names[i]"
                + (f"; {CATEGORIES_READ_NOTE}: {_columns(read)}" if read else "")
            ),
        }

    @classmethod
    def from_json(cls, obj: Any) -> TableEncoding:
        """The encoding recorded by :meth:`to_json` (an untrusted model card: every field is
        checked; raises :class:`ValueError` naming the first bad one)."""
        if not isinstance(obj, dict) or obj.get("format") != ENCODING_FORMAT:
            raise ValueError(f"preprocessing.encoding must be a {ENCODING_FORMAT} object")
        raw_cols = obj.get("columns")
        if not isinstance(raw_cols, list) or not 1 <= len(raw_cols) <= MAX_COLUMNS:
            raise ValueError(f"encoding.columns must be a list of 1 to {MAX_COLUMNS} columns")
        columns = tuple(_column_from_json(c) for c in raw_cols)
        target = _target_from_json(obj.get("target"))
        names = [c.name for c in columns] + [target.name]
        if len(set(names)) != len(names):
            raise ValueError("encoding: column names (target included) must be distinct")
        enc = cls(columns, target)
        if obj.get("n_features") != enc.n_features:
            raise ValueError("encoding.n_features does not match its columns")
        return enc


def _text(v: Any, what: str) -> str:
    if not isinstance(v, str):
        raise ValueError(f"{what} must be a string")  # noqa: TRY004 - a bad card
    return v


def _text_list(v: Any, what: str) -> tuple[str, ...]:
    if (
        not isinstance(v, list)
        or not 1 <= len(v) <= MAX_CATEGORIES
        or not all(isinstance(x, str) for x in v)
        or len(set(v)) != len(v)
    ):
        raise ValueError(f"{what} must be a list of distinct strings (at least one)")
    return tuple(v)


def _choice(v: Any, allowed: tuple[str, ...], what: str) -> str:
    if v not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(allowed)}")
    return str(v)


def _column_from_json(c: Any) -> TableColumn:
    if not isinstance(c, dict):
        raise ValueError("encoding.columns[] must be objects")  # noqa: TRY004 - a bad card
    name = _text(c.get("name"), "encoding.columns[].name")
    kind = _choice(c.get("kind"), ("numeric", "categorical"), f"encoding column {name!r}: kind")
    if kind == "numeric":
        return TableColumn(name, kind)
    return TableColumn(
        name,
        kind,
        _text_list(c.get("categories"), f"encoding column {name!r}: categories"),
        _choice(c.get("source"), SOURCES, f"encoding column {name!r}: source"),
        _choice(c.get("values"), VALUE_KINDS, f"encoding column {name!r}: values"),
    )


def _target_from_json(t: Any) -> TableTarget:
    if not isinstance(t, dict):
        raise ValueError("encoding.target must be an object")  # noqa: TRY004 - a bad card
    name = _text(t.get("name"), "encoding.target.name")
    kind = _choice(t.get("kind"), TARGET_KINDS, "encoding.target.kind")
    if kind != "classes":
        return TableTarget(name, kind)
    names = _text_list(t.get("class_names"), "encoding.target.class_names")
    if len(names) < 2:
        raise ValueError("encoding.target.class_names must name at least 2 classes")
    return TableTarget(
        name,
        kind,
        names,
        _choice(t.get("source"), SOURCES, "encoding.target.source"),
        _choice(t.get("values"), VALUE_KINDS, "encoding.target.values"),
    )


def _numeric_feature(s: Any, col: str, name: str) -> np.ndarray:
    """The column of a numeric input as a float64 column vector; refuses booleans, text that is
    not a number and non-finite values, naming the column and the value."""
    pd = _pandas()
    dt = s.dtype
    if pd.api.types.is_bool_dtype(dt) or pd.api.types.is_complex_dtype(dt):
        bad = s.iloc[0]
        raise ParameterError(
            "dataset", name, f"numeric column {col!r} holds {bad!r} ({dt}), not a real number"
        )
    if pd.api.types.is_numeric_dtype(dt):
        x = s.to_numpy(dtype=np.float64)
    else:
        num = pd.to_numeric(s, errors="coerce")
        wrong = num.isna().to_numpy() | np.asarray(
            [isinstance(v, (bool, np.bool_)) for v in s.tolist()]
        )
        if wrong.any():
            first = int(np.argmax(wrong))
            raise ParameterError(
                "dataset",
                name,
                f"numeric column {col!r} holds {s.iloc[first]!r} (data row {first}), not a number",
            )
        x = num.to_numpy(dtype=np.float64)
    if not np.isfinite(x).all():
        first = int(np.argmax(~np.isfinite(x)))
        raise ParameterError(
            "dataset",
            name,
            f"numeric column {col!r} holds {float(x[first])!r} (data row {first}): infinite values "
            "are refused",
        )
    return x.reshape(-1, 1)


def _one_hot(s: Any, column: TableColumn, name: str, unknown: str) -> np.ndarray:
    """The 0/1 features of a categorical column (one per category, in the listed order)."""
    values = _as_text(s)
    index = {c: i for i, c in enumerate(column.categories)}
    codes = np.fromiter((index.get(v, -1) for v in values), dtype=np.int64, count=len(values))
    if (codes < 0).any() and unknown == "error":
        first = int(np.argmax(codes < 0))
        listed = "declared" if column.source == "declared" else "recorded"
        raise ParameterError(
            "dataset",
            name,
            f"column {column.name!r} holds {values[first]!r} (data row {first}), which is not "
            f"among its {listed} categories {_columns(column.categories)}",
        )
    onehot = np.zeros((len(values), column.width))
    rows = np.flatnonzero(codes >= 0)
    onehot[rows, codes[rows]] = 1.0
    return onehot


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
    #: the map itself, to record in a model card and replay on new tables
    encoding: TableEncoding | None = None


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


def _value_kind(series: Any) -> str:
    return "boolean" if _pandas().api.types.is_bool_dtype(series.dtype) else "text"


def table_encoding(
    frame: Any,
    target: str,
    *,
    name: str = "DataFrame",
    categories: Mapping[str, Sequence[Any]] | None = None,
    classes: Sequence[Any] | None = None,
) -> TableEncoding:
    """The :class:`TableEncoding` of a training table (module docstring): numeric columns as
    they are, categorical ones (object, string, category, bool dtypes, and every column in
    ``categories``) one-hot with the declared categories or their sorted distinct values; the
    target as classes (non-numeric or declared ``classes``), integer labels or regression values.
    Raises :class:`ParameterError` for a missing target column, missing values (column named),
    columns of unsupported types, bad declarations and tables without rows or features."""
    pd = _pandas()
    if not isinstance(frame, pd.DataFrame):
        raise ParameterError(
            "dataset", name, f"must be a pandas DataFrame (got {type(frame).__name__})"
        )
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
    columns: list[TableColumn] = []
    for col in features:
        s = frame[col]
        if col in declared or _is_categorical(s):
            cats = declared.get(col) or sorted(set(_as_text(s).tolist()))
            source = "declared" if col in declared else "data"
            columns.append(TableColumn(col, "categorical", tuple(cats), source, _value_kind(s)))
        elif pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_complex_dtype(s.dtype):
            columns.append(TableColumn(col, "numeric"))
        else:
            raise ParameterError(
                "dataset",
                name,
                f"column {col!r} has type {s.dtype}, which is neither numeric nor categorical "
                "(convert it, or drop the column)",
            )
    ys = frame[target]
    if classes is not None or _is_categorical(ys):
        class_names = (
            [str(c) for c in classes] if classes is not None else sorted(set(_as_text(ys)))
        )
        if len(set(class_names)) != len(class_names) or not class_names:
            raise ParameterError("classes", class_names, "must list distinct class names")
        tgt = TableTarget(
            target,
            "classes",
            tuple(class_names),
            "declared" if classes is not None else "data",
            _value_kind(ys),
        )
    elif pd.api.types.is_integer_dtype(ys.dtype):
        tgt = TableTarget(target, "labels")
    elif pd.api.types.is_float_dtype(ys.dtype):
        tgt = TableTarget(target, "values")
    else:
        raise ParameterError(
            "target", target, f"has type {ys.dtype}: must hold numbers, strings or booleans"
        )
    return TableEncoding(tuple(columns), tgt)


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
    The encoding is derived by :func:`table_encoding` and applied by
    :meth:`TableEncoding.encode_features` -- the code that replays it at prediction time.
    Raises :class:`ParameterError` for a missing target column, missing values (column named),
    columns of unsupported types and tables without rows or features."""
    if unknown not in ("error", "ignore"):
        raise ParameterError("unknown", unknown, "must be 'error' or 'ignore'")
    enc = table_encoding(frame, target, name=name, categories=categories, classes=classes)
    X = enc.encode_features(frame, name=name, unknown=unknown)
    y = enc.encode_target(frame, name=name)
    class_names = list(enc.target.class_names) if enc.target.class_names is not None else None
    cats_out = enc.categories
    read = enc.read_from_data
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
        X,
        y,
        enc.target.task,
        enc.feature_names,
        cats_out,
        [c for c in cats_out if c not in read],
        class_names,
        notes,
        enc,
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
