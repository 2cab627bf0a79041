"""The released model file: `train --out` + model card, `predict`, `load_model`; the card holds the
guarantee and nothing else computed from the data; hostile model files are refused (exit 2)."""

from __future__ import annotations

import json
import os
import pickle
import stat

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from lastiterate.cli import main
from lastiterate.errors import ParameterError
from lastiterate.train.data import load_dataset
from lastiterate.train.model_file import (
    NON_PRIVATE_DIAGNOSTICS,
    card_path,
    load_model,
    model_card,
    save_model,
)

IRIS = [
    "train",
    "--dataset",
    "iris",
    "--model",
    "logreg",
    "--algorithm",
    "gd",
    "--epochs",
    "30",
    "--lr",
    "0.5",
    "--noise-std",
    "0.02",
    "--clip",
    "1",
    "--feature-norm",
    "1",
    "--l2",
    "0.01",
    "--seed",
    "7",
    "--split-seed",
    "7",
    "--scaling",
    "data-public",
]  # the uncovered scaling: its statistics must be flagged


def _run(args, capsys, rc=0):
    capsys.readouterr()
    assert main(args) == rc
    return capsys.readouterr()


def _keys(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _keys(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _keys(v)


@pytest.fixture(scope="module")
def iris_model(tmp_path_factory):
    import contextlib
    import io

    d = tmp_path_factory.mktemp("iris")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main([*IRIS, "--out", str(d / "model.safetensors"), "--json"]) == 0
    return d, json.loads(buf.getvalue())


def test_train_out_writes_model_and_card_with_the_guarantee_only(iris_model):
    d, report = iris_model
    model, card_file = d / "model.safetensors", d / "model.card.json"
    assert report["model_file"] == {"parameters": str(model), "card": str(card_file)}
    card = json.loads(card_file.read_text())
    # the guarantee and the Run are the report's
    assert card["guarantee"]["best"] == report["best"] and card["run"] == report["run"]
    assert card["guarantee"]["adjacency"] == report["run"]["adjacency"] == "replace"
    assert "Releasing only this final model" in card["guarantee"]["statement"]
    assert card["geometry"] == report["geometry"] and card["architecture"]["kind"] == "glm"
    assert (
        card["features"]["names"][0] == "sepal length (cm)" and card["features"]["n_features"] == 4
    )
    from lastiterate import __version__

    assert card["library"]["version"] == __version__
    # nothing else computed from the data: no seed, no diagnostics, no intermediate iterate
    keys = set(_keys(card))
    assert (
        not keys & set(NON_PRIVATE_DIAGNOSTICS)
        and "seed" not in keys
        and "non_private_diagnostics" not in keys
    )
    assert "parameters_sha256" not in keys
    text = card_file.read_text()
    for diag in ("train_accuracy", "test_accuracy", "clipped_fraction", '"seed"'):
        assert diag not in text
    # the standardisation statistics are needed to apply the model: in the card, flagged NOT covered
    steps = card["preprocessing"]["steps"]
    assert [s["op"] for s in steps] == ["standardize", "clip_rows"] and "NOT covered" in steps[0][
        "statistics"
    ]
    assert (
        not card["preprocessing"]["covered_by_guarantee"]
        and "preprocessing" in card["guarantee"]["not_covered"][0]
    )
    # the safetensors file holds exactly the final parameters, and the card too
    tensors = load_file(str(model))
    assert set(tensors) == {"weight"} and tensors["weight"].shape == (3, 4)
    assert (
        stat.S_IMODE(os.stat(model).st_mode) & 0o044
    )  # the released model is a public file (not 0600)


def _independent_iris_predictions(model_path, X_raw):
    """Predictions computed WITHOUT lastiterate's model code: the training split's raw statistics,
    the row clip and an argmax of W x read straight from the safetensors file."""
    raw = load_dataset("iris", seed=7, standardize=False)
    mu, sd = raw.X_train.mean(0), raw.X_train.std(0)
    Z = (X_raw - mu) / sd
    Z = Z * np.minimum(1.0, 1.0 / np.linalg.norm(Z, axis=1, keepdims=True))
    W = load_file(str(model_path))["weight"]
    return (Z @ W.T).argmax(1)


def test_predict_cli_and_load_model_apply_the_model(iris_model, tmp_path, capsys):
    d, _ = iris_model
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    np.savez(tmp_path / "new.npz", X=X, y=y)
    expected = _independent_iris_predictions(d / "model.safetensors", X)
    out = json.loads(
        _run(
            [
                "predict",
                "--model",
                str(d / "model.safetensors"),
                "--dataset",
                str(tmp_path / "new.npz"),
                "--json",
            ],
            capsys,
        ).out
    )
    assert out["predictions"] == expected.tolist() and out["n"] == 150
    assert (
        out["quality"]["accuracy"] == pytest.approx(np.mean(expected == y))
        and out["quality"]["accuracy"] > 0.7
    )
    assert "Releasing only this final model" in out["guarantee"]["statement"]
    text = _run(
        [
            "predict",
            "--model",
            str(d / "model.safetensors"),
            "--dataset",
            str(tmp_path / "new.npz"),
        ],
        capsys,
    )
    assert [int(v) for v in text.out.split()] == expected.tolist()
    released = load_model(d / "model.safetensors")
    assert np.array_equal(released.predict(X), expected)
    np.save(tmp_path / "x.npy", X[:3])
    text = _run(
        ["predict", "--model", str(d / "model.safetensors"), "--dataset", str(tmp_path / "x.npy")],
        capsys,
    )
    assert [int(v) for v in text.out.split()] == expected[:3].tolist()


def test_regression_predictions_are_in_target_units(tmp_path, capsys):
    path = tmp_path / "lin.safetensors"
    _run(
        [
            "train",
            "--dataset",
            "diabetes",
            "--model",
            "linreg",
            "--algorithm",
            "gd",
            "--epochs",
            "20",
            "--lr",
            "0.5",
            "--noise-std",
            "0.01",
            "--clip",
            "1",
            "--feature-norm",
            "1",
            "--l2",
            "0.01",
            "--intercept",
            "--target-range",
            "0,400",
            "--out",
            str(path),
        ],
        capsys,
    )
    from sklearn.datasets import load_diabetes

    X, _ = load_diabetes(return_X_y=True)
    # default scaling: rows clipped to norm 1; targets mapped from the declared [0, 400] to [-1, 1]
    Z = X * np.minimum(1.0, 1.0 / np.linalg.norm(X, axis=1, keepdims=True))
    t = load_file(str(path))
    pred = (Z @ t["weight"].T + t["bias"])[:, 0] * 200.0 + 200.0
    assert np.allclose(load_model(path).predict(X), pred, rtol=1e-10)
    assert load_model(path).card["task"] == "regression"


def test_mlp_roundtrip_in_python(tmp_path):
    import lastiterate.train as lt

    data = load_dataset("wine", seed=0, feature_norm=1.0)
    net = lt.mlp(data.n_features, data.n_classes, (8, 5), "relu", seed=1)
    model = lt.ModuleModel(net, "cross-entropy")
    res = lt.NoisySGD(
        model,
        batch_size=32,
        sampling="poisson",
        lr=0.3,
        noise_std=0.05,
        clip=1.0,
        feature_norm=1.0,
        seed=2,
    ).fit(data.X_train, data.y_train, epochs=3)
    p, cp = lt.save_model(
        tmp_path / "m.safetensors", model, lt.model_card(res, data, method="NoisySGD")
    )
    assert cp == card_path(p) == tmp_path / "m.card.json"
    released = lt.load_model(p)
    assert released.card["architecture"] == {
        "kind": "mlp",
        "n_features": 13,
        "n_outputs": 3,
        "hidden": [8, 5],
        "activation": "relu",
        "loss": "cross-entropy",
        "dtype": "float64",
    }
    from sklearn.datasets import load_wine

    X, _ = load_wine(return_X_y=True)
    Z = torch.as_tensor(released.transform(X))
    assert torch.equal(torch.as_tensor(released.predict(X)), model.predict(Z))
    assert released.guarantee["best"]["bound"].endswith("composition")


def test_non_finite_parameters_and_unsupported_models_are_refused(tmp_path):
    import lastiterate.train as lt

    data = load_dataset("iris", seed=0, feature_norm=1.0)
    model = lt.GLM(4, 3)
    res = lt.NoisyGD(model, lr=0.5, noise_std=0.1, clip=1.0, feature_norm=1.0).fit(
        data.X_train, data.y_train, steps=2
    )
    card = model_card(res, data)
    with torch.no_grad():
        model.weight[0, 0] = float("nan")
    with pytest.raises(ParameterError, match="not finite"):
        save_model(tmp_path / "m.safetensors", model, card)
    assert list(tmp_path.iterdir()) == []
    conv = lt.ModuleModel(
        torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Dropout()).double(),
        "cross-entropy",
        method="vmap",
    )
    with pytest.raises(ParameterError, match="only GLMs and mlp"):
        model_card(res, data, model=conv)


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def _variants(src, tmp_path):
    data = src.read_bytes()
    card = src.with_name("model.card.json").read_text()
    out = {}

    def put(name, blob, card_text=card):
        p = tmp_path / name / "model.safetensors"
        p.parent.mkdir()
        p.write_bytes(blob)
        if card_text is not None:
            (p.parent / "model.card.json").write_text(card_text)
        out[name] = p

    put("pickle", pickle.dumps(_Evil()))
    buf = tmp_path / "evil.pt"
    torch.save({"weight": torch.zeros(3, 4), "evil": _Evil()}, buf)
    put("torch-save", buf.read_bytes())
    put("empty", b"")
    put("truncated", data[:-11])
    put("half", data[: len(data) // 2])
    flipped = bytearray(data)
    flipped[-5] ^= 0x40
    put("tampered-weights", bytes(flipped))
    c = json.loads(card)
    c["guarantee"]["best"]["epsilon"] = 0.001
    put("tampered-card", data, json.dumps(c))
    put("card-not-json", data, "{NaN")
    from safetensors.torch import save

    from lastiterate.train.ledger import tensors_digest

    embedded = json.loads(card)
    for name, arch in {
        "huge-architecture": {
            "kind": "glm",
            "family": "multinomial-logistic",
            "n_features": 10**9,
            "n_outputs": 10**6,
            "intercept": False,
            "dtype": "float64",
        },
        "unknown-kind": {"kind": "pickle", "dtype": "float64", "n_features": 4, "n_outputs": 3},
        "wrong-shape": {
            "kind": "glm",
            "family": "multinomial-logistic",
            "n_features": 3,
            "n_outputs": 4,
            "intercept": False,
            "dtype": "float64",
        },
    }.items():
        t = {"weight": torch.zeros(3, 4, dtype=torch.float64)}
        crafted = {**embedded, "architecture": arch}
        text = json.dumps(crafted)
        put(
            name,
            save(
                t,
                metadata={
                    "format": "lastiterate-model/1",
                    "lastiterate_model_card": text,
                    "lastiterate_tensors_sha256": tensors_digest(t, text),
                },
            ),
            None,
        )
    bad_steps = {
        **embedded,
        "preprocessing": {**embedded["preprocessing"], "steps": [{"op": "exec", "code": "x"}]},
    }
    t = load_model(src).model.state_dict()
    text = json.dumps(bad_steps)
    put(
        "bad-preprocessing",
        save(
            dict(t),
            metadata={
                "format": "lastiterate-model/1",
                "lastiterate_model_card": text,
                "lastiterate_tensors_sha256": tensors_digest(dict(t), text),
            },
        ),
        None,
    )
    put(
        "tampered-embedded-card", data.replace(b'\\"version\\": \\"0', b'\\"version\\": \\"9'), None
    )
    assert out["tampered-embedded-card"].read_bytes() != data
    ck = tmp_path / "ck"
    from lastiterate.train.ledger import save_checkpoint

    save_checkpoint(ck, {"model": dict(t)})
    put("a-checkpoint", ck.read_bytes(), None)
    return out


def test_hostile_model_files_are_exit_2_one_line_never_code(
    iris_model, tmp_path, capsys, monkeypatch
):
    d, _ = iris_model
    monkeypatch.chdir(tmp_path)
    np.savez(tmp_path / "new.npz", X=np.ones((3, 4)))
    for name, path in _variants(d / "model.safetensors", tmp_path).items():
        cap = _run(
            ["predict", "--model", str(path), "--dataset", str(tmp_path / "new.npz"), "--json"],
            capsys,
            rc=2,
        )
        assert cap.out == "" and len(cap.err.strip().splitlines()) == 1 and "model" in cap.err, (
            name,
            cap.err,
        )
        with pytest.raises(ParameterError):
            load_model(path).predict(np.ones((3, 4)))
    assert not (tmp_path / "PWNED").exists()
    cap = _run(
        ["predict", "--model", str(tmp_path), "--dataset", str(tmp_path / "new.npz")], capsys, rc=2
    )
    assert "model" in cap.err and len(cap.err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "X,why",
    [
        (np.ones((3, 5)), "4 columns"),
        (np.full((3, 4), np.nan), "finite"),
        (np.array([["a"] * 4] * 3), "numeric"),
    ],
)
def test_predict_refuses_bad_inputs(iris_model, tmp_path, capsys, X, why):
    d, _ = iris_model
    np.savez(tmp_path / "x.npz", X=X)
    cap = _run(
        ["predict", "--model", str(d / "model.safetensors"), "--dataset", str(tmp_path / "x.npz")],
        capsys,
        rc=2,
    )
    assert cap.out == "" and why in cap.err and len(cap.err.strip().splitlines()) == 1
    import pickle

    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    (tmp_path / "pickle.npz").write_bytes(pickle.dumps({"X": np.ones((3, 4))}))
    np.save(tmp_path / "obj.npy", np.array([{}] * 3, dtype=object), allow_pickle=True)
    for bad in ("bad.npz", "pickle.npz", "obj.npy", "missing.npz"):
        cap = _run(
            ["predict", "--model", str(d / "model.safetensors"), "--dataset", str(tmp_path / bad)],
            capsys,
            rc=2,
        )
        assert "dataset" in cap.err and len(cap.err.strip().splitlines()) == 1


def test_out_never_overwrites_an_input(tmp_path, capsys):
    rng = np.random.default_rng(0)
    data = tmp_path / "d.npz"
    np.savez(data, X=rng.normal(size=(40, 3)), y=np.arange(40) % 2)
    before = data.read_bytes()
    args = [
        "train",
        "--dataset",
        str(data),
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
    ]
    cap = _run([*args, "--out", str(data)], capsys, rc=2)
    assert "would overwrite" in cap.err and data.read_bytes() == before
    cap = _run([*args, "--out", str(tmp_path)], capsys, rc=2)
    assert "directory" in cap.err
    cap = _run(
        [*args, "--out", str(tmp_path / "m.st"), "--ledger", str(tmp_path / "m.card.json")],
        capsys,
        rc=2,
    )
    assert "would overwrite" in cap.err


def test_text_report_names_the_model_file_and_the_diagnostics(tmp_path, capsys):
    cap = _run([*IRIS, "--out", str(tmp_path / "m.safetensors")], capsys)
    assert f"Model written to {tmp_path / 'm.safetensors'}" in cap.out
    assert "non-private diagnostics" in cap.out and "NOT covered by the guarantee" in cap.out


@pytest.mark.parametrize("name", ["digits", "breast-cancer", "diabetes"])
def test_recorded_preprocessing_replays_the_training_features(name, tmp_path):
    from lastiterate.train.model_file import apply_feature_transform, check_replay

    full = load_dataset(name, seed=3, feature_norm=0.8)
    raw = load_dataset(name, seed=3, standardize=False)
    assert np.allclose(
        apply_feature_transform(full.transform, raw.X_train), full.X_train, rtol=1e-12, atol=1e-12
    )
    assert np.allclose(
        apply_feature_transform(full.transform, raw.X_test), full.X_test, rtol=1e-12, atol=1e-12
    )
    check_replay(full, raw)
    full.transform = full.transform[:-1]  # a step applied but not recorded: no model file
    with pytest.raises(ParameterError, match="replayable"):
        check_replay(full, raw)


def test_mnist_pixel_scaling_is_replayed(tmp_path):
    from lastiterate.train.data import write_idx
    from lastiterate.train.model_file import check_replay

    rng = np.random.default_rng(0)
    for stem, arr in (
        ("train-images-idx3-ubyte", rng.integers(0, 256, (40, 3, 3))),
        ("train-labels-idx1-ubyte", np.arange(40) % 3),
        ("t10k-images-idx3-ubyte", rng.integers(0, 256, (10, 3, 3))),
        ("t10k-labels-idx1-ubyte", np.arange(10) % 3),
    ):
        write_idx(tmp_path / stem, arr.astype(np.uint8))
    full = load_dataset(str(tmp_path), feature_norm=1.0)
    assert full.transform[0]["op"] == "multiply"
    check_replay(full, load_dataset(str(tmp_path), standardize=False))


def test_feature_and_target_ops_are_replayed_exactly():
    from lastiterate.train.model_file import apply_feature_transform, invert_target_transform

    X = np.array([[0.0, 5.0, -3.0], [16.0, 20.0, 1.0]])
    steps = [
        {"op": "multiply", "factor": 0.5},
        {"op": "clip_values", "lo": [0, 0, -1], "hi": [4, 8, 1]},
        {"op": "public_range", "lo": -1, "hi": 9},
        {"op": "standardize", "mean": 0.5, "scale": [1, 2, 4]},
        {"op": "clip_rows", "norm": 0.3},
    ]
    Z = X * 0.5
    Z = np.clip(Z, [0, 0, -1], [4, 8, 1])
    Z = (np.clip(Z, -1, 9) + 1) / 10
    Z = (Z - 0.5) / np.array([1, 2, 4])
    Z = Z * np.minimum(1, 0.3 / np.linalg.norm(Z, axis=1, keepdims=True))
    assert np.allclose(apply_feature_transform(steps, X), Z, rtol=1e-15, atol=0)
    y = np.array([-1.0, 0.0, 1.0])
    assert np.allclose(
        invert_target_transform({"op": "affine", "shift": 10, "scale": 5}, y), [5, 10, 15]
    )
    assert np.allclose(
        invert_target_transform({"op": "standardize", "mean": 1, "scale": 2}, y), [-1, 1, 3]
    )
    for bad in (
        [{"op": "standardize", "mean": 0, "scale": 0}],
        [{"op": "clip_rows", "norm": -1}],
        [{"op": "multiply", "factor": [1, 2]}],
        [{"op": "multiply", "factor": "nan"}],
        ["x"],
    ):
        with pytest.raises(ValueError):
            apply_feature_transform(bad, X)


def test_default_scaling_card_is_covered_and_replays(tmp_path, capsys):
    """The default (iris declares no range: row clipping only) needs no statistic: the card's
    preprocessing is covered and predictions from the file equal the trained model's."""
    args = [a for a in IRIS if a not in ("--scaling", "data-public")]
    out = json.loads(_run([*args, "--out", str(tmp_path / "m.safetensors"), "--json"], capsys).out)
    card = json.loads((tmp_path / "m.card.json").read_text())
    assert card["preprocessing"]["covered_by_guarantee"] and [
        s["op"] for s in card["preprocessing"]["steps"]
    ] == ["clip_rows"]
    assert out["best"] == card["guarantee"]["best"]
    raw = load_dataset("iris", seed=7, standardize=False)
    Z = raw.X_test * np.minimum(1.0, 1.0 / np.linalg.norm(raw.X_test, axis=1, keepdims=True))
    W = load_file(str(tmp_path / "m.safetensors"))["weight"]
    assert np.array_equal(
        load_model(tmp_path / "m.safetensors").predict(raw.X_test), (Z @ W.T).argmax(1)
    )
