"""Dataset loaders: IDX (MNIST) files, .npz files, scikit-learn sets, feature clipping."""

from __future__ import annotations

import re

import numpy as np
import pytest

from lastiterate.errors import ParameterError
from lastiterate.train.data import load_dataset, load_idx, load_mnist, write_idx


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_idx_roundtrip(tmp_path, dtype, suffix):
    a = (np.arange(2 * 3 * 4) % 120).astype(dtype).reshape(2, 3, 4)
    write_idx(tmp_path / f"a{suffix}", a)
    b = load_idx(tmp_path / f"a{suffix}")
    assert b.dtype.kind == np.dtype(dtype).kind and np.array_equal(a, b)


def test_idx_rejects_bad_files(tmp_path):
    (tmp_path / "x").write_bytes(b"\x01\x02\x08\x01\x00")
    with pytest.raises(ParameterError):
        load_idx(tmp_path / "x")
    write_idx(tmp_path / "y", np.zeros(5, np.uint8))
    (tmp_path / "y").write_bytes((tmp_path / "y").read_bytes()[:-1])
    with pytest.raises(ParameterError, match="payload"):
        load_idx(tmp_path / "y")


def _fake_mnist(d, n_train=60, n_test=20, gz=False):
    rng = np.random.default_rng(0)
    ext = ".gz" if gz else ""
    write_idx(
        d / f"train-images-idx3-ubyte{ext}", rng.integers(0, 256, (n_train, 4, 4)).astype(np.uint8)
    )
    write_idx(d / f"train-labels-idx1-ubyte{ext}", (np.arange(n_train) % 10).astype(np.uint8))
    write_idx(
        d / f"t10k-images-idx3-ubyte{ext}", rng.integers(0, 256, (n_test, 4, 4)).astype(np.uint8)
    )
    write_idx(d / f"t10k-labels-idx1-ubyte{ext}", (np.arange(n_test) % 10).astype(np.uint8))


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_loader_on_generated_idx(tmp_path, gz):
    _fake_mnist(tmp_path, gz=gz)
    Xtr, ytr, Xte, _yte = load_mnist(tmp_path)
    assert Xtr.shape == (60, 16) and Xte.shape == (20, 16) and Xtr.max() <= 1.0 and ytr.max() == 9
    ds = load_dataset(str(tmp_path), feature_norm=1.0)
    assert ds.n == 60 and len(ds.y_test) == 20 and ds.n_classes == 10
    assert np.linalg.norm(ds.X_train, axis=1).max() <= 1.0 + 1e-12
    with pytest.raises(ParameterError, match="IDX"):
        load_dataset(str(tmp_path / "missing_dir_is_not_a_dataset"))


def test_npz_with_an_empty_test_part_is_accepted(tmp_path):
    # a 0 x d test part used to crash (reshape of zero rows) with exit 70 instead of an answer
    rng = np.random.default_rng(2)
    np.savez(
        tmp_path / "e.npz",
        X=rng.normal(size=(30, 3)),
        y=rng.integers(0, 2, 30),
        X_test=np.zeros((0, 3)),
        y_test=np.zeros(0, dtype=int),
    )
    ds = load_dataset(str(tmp_path / "e.npz"))
    assert ds.n == 30 and ds.X_test.shape == (0, 3) and len(ds.y_test) == 0
    np.savez(
        tmp_path / "f.npz",
        X=rng.normal(size=(30, 3)),
        y=rng.integers(0, 2, 30),
        X_test=np.zeros((0, 4)),
        y_test=np.zeros(0, dtype=int),
    )
    with pytest.raises(ParameterError, match="columns"):
        load_dataset(str(tmp_path / "f.npz"))


def test_npz(tmp_path):
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "a.npz", X=rng.normal(size=(50, 3)), y=rng.integers(0, 2, 50))
    ds = load_dataset(str(tmp_path / "a.npz"), seed=3, feature_norm=0.5)
    assert ds.task == "classification" and ds.n == 40 and ds.n_classes == 2
    assert np.linalg.norm(ds.X_test, axis=1).max() <= 0.5 + 1e-12
    np.savez(
        tmp_path / "b.npz",
        X=rng.normal(size=(30, 3)),
        y=rng.normal(size=30),
        X_test=rng.normal(size=(5, 3)),
        y_test=rng.normal(size=5),
    )
    ds = load_dataset(str(tmp_path / "b.npz"))
    assert ds.task == "regression" and ds.n == 30 and len(ds.y_test) == 5
    np.savez(tmp_path / "c.npz", A=np.zeros(3))
    with pytest.raises(ParameterError, match="X and y"):
        load_dataset(str(tmp_path / "c.npz"))


@pytest.mark.parametrize(
    "name,classes",
    [("digits", 10), ("breast-cancer", 2), ("iris", 3), ("wine", 3), ("diabetes", None)],
)
def test_sklearn_sets(name, classes):
    ds = load_dataset(name, seed=0, feature_norm=1.0)
    assert ds.n_classes == classes
    assert abs(ds.n / (ds.n + len(ds.y_test)) - 0.8) < 0.01
    assert np.linalg.norm(ds.X_train, axis=1).max() <= 1.0 + 1e-12
    again = load_dataset(name, seed=0, feature_norm=1.0)
    assert np.array_equal(ds.X_train, again.X_train)  # the split is fixed by the seed


# ---------------------------------------------------------------------- bad data:
# exit 2 with the reason
def _bad_npz(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3))
    y = np.arange(20) % 2
    nan_X = X.copy()
    nan_X[3, 1] = np.nan
    inf_X = X.copy()
    inf_X[0, 0] = np.inf
    cases = {
        "nan-features": ({"X": nan_X, "y": y}, "NaN or infinite"),
        "inf-features": ({"X": inf_X, "y": y}, "NaN or infinite"),
        "nan-targets": ({"X": X, "y": np.where(y == 1, np.nan, 0.5)}, "NaN or infinite"),
        "empty": ({"X": np.zeros((0, 3)), "y": np.zeros(0, np.int64)}, "empty"),
        "one-row": ({"X": X[:1], "y": y[:1]}, "test_size"),
        "one-class": ({"X": X, "y": np.zeros(20, np.int64)}, "single class"),
        "string-labels": ({"X": X, "y": np.array(["a", "b"] * 10)}, "labels must be numbers"),
        "string-features": ({"X": np.array([["1", "x", "2"]] * 20), "y": y}, "numeric"),
        "negative-labels": ({"X": X, "y": y - 1}, r"\[0, "),
        "huge-label": ({"X": X, "y": y * 10**9}, r"\[0, "),
        "label-count": ({"X": X, "y": y[:-1]}, "one label per row"),
        "no-columns": ({"X": np.zeros((20, 0)), "y": y}, "0 columns"),
        "test-columns": ({"X": X, "y": y, "X_test": X[:4, :2], "y_test": y[:4]}, "columns"),
        "test-nan": ({"X": X, "y": y, "X_test": nan_X, "y_test": y}, "test features contain NaN"),
        "half-test": ({"X": X, "y": y, "X_test": X}, "both or neither"),
        "no-arrays": ({"A": X}, "X and y"),
        "overflow": ({"X": X * 1e307, "y": y}, "overflow"),
        "target-overflow": ({"X": X, "y": X[:, 0] * 1e307}, "overflow"),
    }
    for name, (arrays, _) in cases.items():
        np.savez(tmp_path / f"{name}.npz", **arrays)
    np.savez(tmp_path / "object.npz", X=np.array([{"a": 1}] * 20, dtype=object), y=y)
    cases["object"] = (None, "pickle")
    (tmp_path / "garbage.npz").write_bytes(b"PK\x03\x04 not a zip at all")
    cases["garbage"] = (None, "not a readable .npz")
    np.save(tmp_path / "npy.npy", X)
    (tmp_path / "npy.npy").rename(tmp_path / "npy-named-npz.npz")
    cases["npy-named-npz"] = (None, "not a readable .npz")
    import pickle

    (tmp_path / "pickle.npz").write_bytes(pickle.dumps({"X": X, "y": y}))
    cases["pickle"] = (None, "pickle")
    good = tmp_path / "good.npz"
    np.savez(good, X=X, y=y)
    (tmp_path / "truncated.npz").write_bytes(good.read_bytes()[:300])
    cases["truncated"] = (None, "not a readable .npz")
    return {k: msg for k, (_, msg) in cases.items()}


def test_bad_npz_files_are_refused_with_the_reason(tmp_path):
    for name, msg in _bad_npz(tmp_path).items():
        with pytest.raises(ParameterError, match=msg):
            load_dataset(str(tmp_path / f"{name}.npz"), feature_norm=1.0)


def test_test_size_that_leaves_no_training_or_no_test_data(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "a.npz", X=rng.normal(size=(5, 2)), y=np.arange(5) % 2)
    with pytest.raises(ParameterError, match="test_size"):
        load_dataset(str(tmp_path / "a.npz"), test_size=0.9)  # 5 test, 0 training
    with pytest.raises(ParameterError, match="test_size"):
        load_dataset(str(tmp_path / "a.npz"), test_size=0.7)  # 4 test, 1 training
    ds = load_dataset(str(tmp_path / "a.npz"), test_size=0.5)
    assert (ds.n, len(ds.y_test)) == (2, 3)
    with pytest.raises(ParameterError, match="test_size"):
        load_dataset("iris", test_size=0.999)


def test_cli_bad_data_exit_2_one_line_and_no_guarantee(tmp_path, capsys):
    from lastiterate.cli import main

    cases = _bad_npz(tmp_path)
    for name, msg in cases.items():
        capsys.readouterr()
        # the overflow cases overflow when standardised with the data's statistics (the default
        # scaling clips rows only, and clips near-overflow rows correctly, see
        # test_clip_rows_near_the_float_limit)
        scaling = ["--scaling", "data-public"] if "overflow" in name else []
        rc = main(
            [
                "train",
                "--dataset",
                str(tmp_path / f"{name}.npz"),
                "--model",
                "logreg",
                "--algorithm",
                "gd",
                "--epochs",
                "2",
                "--lr",
                "0.5",
                "--noise-std",
                "0.1",
                "--clip",
                "1",
                "--feature-norm",
                "1",
                "--json",
                *scaling,
            ]
        )
        cap = capsys.readouterr()
        assert rc == 2, name
        assert (
            cap.out == "" and len(cap.err.strip().splitlines()) == 1 and re.search(msg, cap.err)
        ), (name, cap.err)
    capsys.readouterr()
    assert (
        main(
            [
                "train",
                "--dataset",
                "iris",
                "--model",
                "logreg",
                "--algorithm",
                "gd",
                "--epochs",
                "2",
                "--lr",
                "0.5",
                "--noise-std",
                "0.1",
                "--clip",
                "1",
                "--test-size",
                "0.995",
            ]
        )
        == 2
    )
    cap = capsys.readouterr()
    assert cap.out == "" and "test_size" in cap.err and len(cap.err.strip().splitlines()) == 1


def test_trainer_refuses_non_finite_arrays():
    from lastiterate.train.models import GLM
    from lastiterate.train.trainer import NoisyGD

    X = np.ones((10, 2))
    X[4, 1] = np.nan
    y = np.arange(10) % 2
    with pytest.raises(ParameterError, match="finite"):
        NoisyGD(GLM(2, 2), lr=0.1, noise_std=0.1, clip=1.0).fit(X, y, steps=2)
    with pytest.raises(ParameterError, match="finite"):
        NoisyGD(GLM(2, 1, "least-squares"), lr=0.1, noise_std=0.1, clip=1.0).fit(
            np.ones((10, 2)), np.full(10, np.inf), steps=2
        )


def test_clip_rows_near_the_float_limit():
    from lastiterate.train.preprocessing import clip_rows

    X = np.array([[1e307, 1e307, 1e307], [0.0, 0.0, 0.0], [0.1, 0.2, 0.2], [3.0, 4.0, 0.0]])
    out = clip_rows(X, 1.0)
    assert np.allclose(out[0], 3**-0.5) and np.array_equal(out[1], [0, 0, 0])
    assert np.array_equal(out[2], X[2]) and np.allclose(out[3], [0.6, 0.8, 0.0])
