"""Fuzz of the file inputs of ``train`` and ``predict``: truncated, corrupted, hostile and
merely odd CSV / npz / npy / IDX / safetensors files, directories and missing paths.

Every file gets an answer under the CLI contract (:mod:`.contract`): a guarantee (exit 0,
standard JSON) or exactly one error line (exit 2).  Files whose data are bad -- NaN or infinite
features or targets, labels outside [0, 1e5] or outside the declared classes, missing cells,
ragged rows -- must be refused: a guarantee is never printed for a model trained on them.
"""

from __future__ import annotations

import gzip
import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest

from .contract import check_contract

TRAIN = [
    "--model", "logreg", "--algorithm", "gd", "--epochs", "1", "--lr", "0.1",
    "--noise-std", "1", "--clip", "1", "--json",
]  # fmt: skip

_GOOD_CSV = "a,b,c,t\n" + "".join(
    f"{(i * 7 % 11) / 5 - 1:.3f},{(i * 5 % 13) / 6 - 1:.3f},{'uvw'[i % 3]},{i % 2}\n"
    for i in range(40)
)


def _with_row(row: str) -> str:
    head, rest = _GOOD_CSV.split("\n", 1)
    return f"{head}\n{row}\n{rest}"


def _rows(pattern: str) -> str:
    return "".join(pattern.format(i=i, b=i % 2) + "\n" for i in range(20))


#: CSV files: name -> (text, must be refused)
CSV = {
    "good.csv": (_GOOD_CSV, False),
    "empty.csv": ("", True),
    "header_only.csv": ("a,b,c,t\n", True),
    "one_row.csv": ("a,b,c,t\n1,2,u,1\n", True),
    "nan_feature.csv": (_with_row("nan,1,u,0"), True),
    "inf_feature.csv": (_with_row("inf,1,u,0"), True),
    "neg_inf_feature.csv": (_with_row("-inf,1,u,1"), True),
    "overflow_feature.csv": (_with_row("1e400,1,u,1"), True),
    "huge_feature.csv": (_with_row("1e300,1e300,u,1"), False),  # finite: clipped, then trained
    "subnormal_feature.csv": (_with_row("1e-320,5e-324,u,1"), False),
    "nan_target.csv": (_with_row("1,1,u,nan"), True),
    "inf_target.csv": (_with_row("1,1,u,inf"), True),
    "float_target.csv": (_with_row("1,1,u,0.5"), True),  # logreg on a regression target
    "negative_label.csv": (_with_row("1,1,u,-1"), True),
    "huge_label.csv": (_with_row("1,1,u,1000000"), True),
    "missing_cell.csv": (_with_row(",1,u,0"), True),
    "short_row.csv": (_with_row("1"), True),
    "long_row.csv": (_with_row("1,2,3,4,5,6"), True),
    "quote.csv": ('a,b,t\n"1,2\n' + _GOOD_CSV, True),
    "semicolons.csv": (_GOOD_CSV.replace(",", ";"), True),
    "text_labels.csv": (_GOOD_CSV.replace(",1\n", ",yes\n").replace(",0\n", ",no\n"), False),
    "bom.csv": ("\ufeff" + _GOOD_CSV, False),
    "unicode_names.csv": ("é,日本,\u202e,t\n" + _rows("{i},{i},{i},{b}"), False),
    "only_target.csv": ("t\n" + _rows("{b}"), True),
    "duplicate_names.csv": ("a,a,t\n" + _rows("{i},{i},{b}"), False),
}  # fmt: skip


def _npz(path: Path, **arrays: np.ndarray) -> None:
    np.savez(path, **arrays)


def _idx(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as fh:
        fh.write(struct.pack(">BBBB", 0, 0, 0x08, array.ndim))
        fh.write(struct.pack(">" + "I" * array.ndim, *array.shape))
        fh.write(array.astype(np.uint8).tobytes())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, bool | None]]:
    """name -> (path, must be refused; None: either answer is fine)."""
    d = tmp_path_factory.mktemp("hostile")
    files: dict[str, tuple[Path, bool | None]] = {}
    for name, (text, bad) in CSV.items():
        (d / name).write_text(text, encoding="utf-8")
        files[name] = (d / name, bad)
    raw = {
        "binary.csv": bytes(range(256)) * 20,
        "latin1.csv": _GOOD_CSV.replace("u,", "\xe9,").encode("latin-1"),
        "nul.csv": _GOOD_CSV.encode().replace(b"u,", b"u\x00,"),
        "good.csv.gz": gzip.compress(_GOOD_CSV.encode()),
        "corrupt.csv.gz": b"\x1f\x8b" + bytes(range(60)),
        "fake.parquet": b"PAR1" + bytes(40) + b"PAR1",
        "text.npz": b"hello",
        "garbage.npz": b"PK\x03\x04" + bytes(range(200)),
    }
    for name, blob in raw.items():
        (d / name).write_bytes(blob)
        files[name] = (d / name, None if name in ("nul.csv", "good.csv.gz") else True)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    arrays: dict[str, tuple[dict[str, np.ndarray], bool | None]] = {
        "good.npz": ({"X": X, "y": y}, False),
        "nan_X.npz": ({"X": np.where(X > 1.5, np.nan, X), "y": y}, True),
        "inf_X.npz": ({"X": np.where(X > 1.5, np.inf, X), "y": y}, True),
        "huge_X.npz": ({"X": X * 1e300, "y": y}, False),  # finite; was a NaN model
        "nan_y.npz": ({"X": X, "y": np.where(y > 0, np.nan, 0.0)}, True),
        "float_y.npz": ({"X": X, "y": y + 0.5}, True),
        "negative_y.npz": ({"X": X, "y": y - 5}, True),
        "huge_y.npz": ({"X": X, "y": y * 10**9}, True),
        "text_y.npz": ({"X": X, "y": np.array(["a", "b"])[y]}, True),
        "one_class.npz": ({"X": X, "y": np.zeros(40, int)}, True),
        "y_2d.npz": ({"X": X, "y": y.reshape(-1, 1)}, True),
        "y_short.npz": ({"X": X, "y": y[:10]}, True),
        "text_X.npz": ({"X": X.astype(str), "y": y}, True),
        "complex_X.npz": ({"X": X + 1j, "y": y}, True),
        "object_X.npz": ({"X": X.astype(object), "y": y}, True),
        "no_X.npz": ({"Z": X, "y": y}, True),
        "no_y.npz": ({"X": X}, True),
        "empty.npz": ({}, True),
        "no_rows.npz": ({"X": np.zeros((0, 3)), "y": np.zeros(0, int)}, True),
        "no_columns.npz": ({"X": np.zeros((40, 0)), "y": y}, True),
        "test_columns.npz": ({"X": X, "y": y, "X_test": X[:, :2], "y_test": y}, True),
        "test_nan.npz": (
            {"X": X, "y": y, "X_test": np.full((5, 3), np.nan), "y_test": y[:5]},
            True,
        ),
        "test_half.npz": ({"X": X, "y": y, "X_test": X[:5]}, True),
        # a test label that is no training class widened the released model (fuzz finding)
        "test_new_label.npz": ({"X": X, "y": y, "X_test": X[:5], "y_test": np.full(5, 7)}, True),
        "float16_X.npz": ({"X": X.astype(np.float16), "y": y}, False),
        "int8.npz": ({"X": (X * 10).astype(np.int8), "y": y.astype(np.uint8)}, False),
        "bool_y.npz": ({"X": X, "y": y.astype(bool)}, False),
    }  # fmt: skip
    for name, (arrs, bad) in arrays.items():
        _npz(d / name, **arrs)
        files[name] = (d / name, bad)
    (d / "truncated.npz").write_bytes((d / "good.npz").read_bytes()[:200])
    files["truncated.npz"] = (d / "truncated.npz", True)
    np.save(d / "good.npy", X)  # train needs X and y: an .npy is refused
    files["good.npy"] = (d / "good.npy", True)
    images = rng.integers(0, 256, (30, 4, 4))
    labels = rng.integers(0, 10, 30)
    for name in ("idx_good", "idx_truncated", "idx_magic", "idx_mismatch", "idx_huge_dims"):
        sub = d / name
        sub.mkdir()
        _idx(sub / "train-images-idx3-ubyte", images)
        _idx(sub / "train-labels-idx1-ubyte", labels)
        _idx(sub / "t10k-images-idx3-ubyte", images[:10])
        _idx(sub / "t10k-labels-idx1-ubyte", labels[:10])
        files[name] = (sub, name != "idx_good")
    blob = (d / "idx_truncated" / "train-images-idx3-ubyte").read_bytes()
    (d / "idx_truncated" / "train-images-idx3-ubyte").write_bytes(blob[:100])
    (d / "idx_magic" / "train-images-idx3-ubyte").write_bytes(b"\x01\x02" + blob[2:])
    _idx(d / "idx_mismatch" / "train-labels-idx1-ubyte", labels[:20])
    (d / "idx_huge_dims" / "train-images-idx3-ubyte").write_bytes(
        struct.pack(">BBBB", 0, 0, 8, 3) + struct.pack(">III", 2**31, 2**31, 2**31) + bytes(10)
    )
    (d / "empty_dir").mkdir()
    (d / "dir.csv").mkdir()
    files["empty_dir"] = (d / "empty_dir", True)
    files["dir.csv"] = (d / "dir.csv", True)
    files["missing.csv"] = (d / "missing.csv", True)
    files["missing.npz"] = (d / "missing.npz", True)
    return files


def _train_argv(path: Path) -> list[str]:
    argv = ["train", "--dataset", str(path), *TRAIN]
    name = path.name.lower()
    if ".csv" in name or name.endswith(".parquet"):
        argv += ["--target", "t"]
    return argv


def test_train_answers_every_file(corpus: dict[str, tuple[Path, bool | None]]) -> None:
    wrong = []
    for name, (path, bad) in corpus.items():
        rc, out, err = check_contract(_train_argv(path))
        if bad is not None and (rc == 2) != bad:
            wrong.append(f"{name}: exit {rc} ({err.strip() or 'a guarantee'})")
        if rc == 0:
            doc = json.loads(out)
            assert doc["best"]["epsilon"] >= 0, name
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    "extra",
    [
        ["--classes", "no"],  # a label outside the declared classes
        ["--classes", "0,1,0"],
        ["--categories", "c=u,v"],  # a category outside the declared ones
        ["--categories", "zz=u"],
        ["--categories", "c"],
        ["--target", ""],
        ["--target", "a"],  # a float column as the label of logreg
    ],
)
def test_train_refuses_declarations_the_table_breaks(
    corpus: dict[str, tuple[Path, bool | None]], extra: list[str]
) -> None:
    path = corpus["text_labels.csv"][0] if "no" in extra else corpus["good.csv"][0]
    rc, _, err = check_contract([*_train_argv(path), *extra])
    assert rc == 2, err


@pytest.fixture(scope="module")
def models(
    corpus: dict[str, tuple[Path, bool | None]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("models")
    out = {}
    for name, dataset in (("array", "good.npz"), ("table", "good.csv")):
        path = d / f"{name}.safetensors"
        rc, _, err = check_contract([*_train_argv(corpus[dataset][0]), "--out", str(path)])
        assert rc == 0, err
        out[name] = path
    return out


def test_predict_answers_every_file(
    corpus: dict[str, tuple[Path, bool | None]], models: dict[str, Path]
) -> None:
    for model in models.values():
        for path, _ in corpus.values():
            for js in ([], ["--json"]):
                check_contract(["predict", "--model", str(model), "--dataset", str(path), *js])


def _mutations(blob: bytes, count: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        b = bytearray(blob)
        if rng.random() < 0.4:
            b = b[: int(rng.integers(0, len(b)))]
        else:
            for _ in range(int(rng.integers(1, 5))):
                b[int(rng.integers(len(b)))] = int(rng.integers(256))
        out.append(bytes(b))
    return out


@pytest.mark.parametrize("which", ["array", "table"])
def test_predict_answers_every_corrupted_model(
    corpus: dict[str, tuple[Path, bool | None]], models: dict[str, Path], which: str, tmp_path: Path
) -> None:
    model = models[which]
    dataset = corpus["good.npz" if which == "array" else "good.csv"][0]
    card = model.with_name(f"{which}.card.json").read_text()
    for i, blob in enumerate(_mutations(model.read_bytes(), 40, seed=len(which))):
        target = tmp_path / f"m{i}.safetensors"
        target.write_bytes(blob)
        if i % 3 == 0:  # a card beside it: sometimes intact, sometimes cut
            (tmp_path / f"m{i}.card.json").write_text(card if i % 2 else card[: len(card) // 2])
        check_contract(["predict", "--model", str(target), "--dataset", str(dataset), "--json"])


def test_hostile_paths_for_outputs(
    corpus: dict[str, tuple[Path, bool | None]], tmp_path: Path
) -> None:
    good = corpus["good.npz"][0]
    for flag in ("--out", "--checkpoint", "--ledger"):
        for target in (tmp_path, tmp_path / "missing-dir" / "x" / "f", Path(os.devnull), good):
            rc, _, err = check_contract(
                ["train", "--dataset", str(good), *TRAIN, flag, str(target)]
            )
            if target == good or target == tmp_path:
                assert rc == 2, (flag, target, err)


@pytest.mark.parametrize("reader", ["read_npz", "read_inputs"])
def test_a_corrupt_npz_is_closed_after_the_refusal(tmp_path: Path, reader: str) -> None:
    # np.load(path) left the file open when the zip was corrupt (a ResourceWarning per call)
    import gc
    import warnings

    from lastiterate.errors import ParameterError
    from lastiterate.train.data import read_npz
    from lastiterate.train.model_file import read_inputs

    path = tmp_path / "bad.npz"
    path.write_bytes(b"PK\x03\x04" + bytes(range(100)))
    read = {"read_npz": read_npz, "read_inputs": read_inputs}[reader]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ParameterError):
            read(path)
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_predict_on_no_rows_with_labels_is_refused(
    corpus: dict[str, tuple[Path, bool | None]], models: dict[str, Path]
) -> None:
    # the accuracy over 0 rows was NaN (and a RuntimeWarning)
    argv = ["predict", "--model", str(models["array"]), "--dataset", str(corpus["no_rows.npz"][0])]
    rc, _, err = check_contract(argv)
    assert rc == 2 and "y=" in err
