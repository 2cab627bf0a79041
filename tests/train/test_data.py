"""Dataset loaders: IDX (MNIST) files, .npz files, scikit-learn sets, feature clipping."""

from __future__ import annotations

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
    write_idx(d / f"train-images-idx3-ubyte{ext}", rng.integers(0, 256, (n_train, 4, 4)).astype(np.uint8))
    write_idx(d / f"train-labels-idx1-ubyte{ext}", (np.arange(n_train) % 10).astype(np.uint8))
    write_idx(d / f"t10k-images-idx3-ubyte{ext}", rng.integers(0, 256, (n_test, 4, 4)).astype(np.uint8))
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


def test_npz(tmp_path):
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "a.npz", X=rng.normal(size=(50, 3)), y=rng.integers(0, 2, 50))
    ds = load_dataset(str(tmp_path / "a.npz"), seed=3, feature_norm=0.5)
    assert ds.task == "classification" and ds.n == 40 and ds.n_classes == 2
    assert np.linalg.norm(ds.X_test, axis=1).max() <= 0.5 + 1e-12
    np.savez(tmp_path / "b.npz", X=rng.normal(size=(30, 3)), y=rng.normal(size=30), X_test=rng.normal(size=(5, 3)), y_test=rng.normal(size=5))
    ds = load_dataset(str(tmp_path / "b.npz"))
    assert ds.task == "regression" and ds.n == 30 and len(ds.y_test) == 5
    np.savez(tmp_path / "c.npz", A=np.zeros(3))
    with pytest.raises(ParameterError, match="X and y"):
        load_dataset(str(tmp_path / "c.npz"))


@pytest.mark.parametrize("name,classes", [("digits", 10), ("breast-cancer", 2), ("iris", 3), ("wine", 3), ("diabetes", None)])
def test_sklearn_sets(name, classes):
    ds = load_dataset(name, seed=0, feature_norm=1.0)
    assert ds.n_classes == classes
    assert abs(ds.n / (ds.n + len(ds.y_test)) - 0.8) < 0.01
    assert np.linalg.norm(ds.X_train, axis=1).max() <= 1.0 + 1e-12
    again = load_dataset(name, seed=0, feature_norm=1.0)
    assert np.array_equal(ds.X_train, again.X_train)  # the split is fixed by the seed
