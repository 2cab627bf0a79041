"""Model cards of table runs replay the encoding (issue 9 §4): `train --dataset FILE.csv --out`
records the columns, the category lists and the class names as JSON data, and `predict` /
`load_model(...).predict(DataFrame)` replay them -- checked against predictions computed without
lastiterate's encoding or model code (a hand-written one-hot and W x read from the safetensors
file) and against the trainer's own model on the encoded training matrix.  Every bad table is
exit 2 with one line naming the column (and the value)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from lastiterate.cli import main
from lastiterate.errors import ParameterError
from lastiterate.train.model_file import card_path, load_model, model_card, save_model

pd = pytest.importorskip("pandas")

CLASSES = ["hi", "lo", "mid"]  # sorted class names: label i is CLASSES[i]
JOBS = ["clerk", "nurse", "pilot"]
ZIPS = ["007", "012", "x9"]  # text codes that look like numbers: must stay text


def _frame(n: int = 240, seed: int = 0) -> pd.DataFrame:
    """A learnable 3-class table: two numeric columns, a text, a text-code and a boolean
    categorical column; the classes depend on x1 and the job."""
    rng = np.random.default_rng(seed)
    x1 = rng.normal(0, 1, n).round(3)
    job = rng.choice(JOBS, n)
    score = 2.5 * x1 + np.where(job == "pilot", 2.0, np.where(job == "clerk", -2.0, 0.0))
    y = np.where(score > 1.0, "hi", np.where(score < -1.0, "lo", "mid"))
    return pd.DataFrame(
        {
            "x1": x1,
            "job": job,
            "count": rng.integers(0, 3, n),
            "zip": rng.choice(ZIPS, n),
            "member": rng.choice([True, False], n),
            "y": y,
        }
    )


def _hand_encoded(df: pd.DataFrame) -> np.ndarray:
    """The encoding written out by hand (numpy only): columns in the training table's order,
    categories sorted, booleans as 'False' < 'True'."""
    blocks = [df["x1"].to_numpy(float)[:, None]]
    blocks += [(df["job"].to_numpy(str)[:, None] == np.array(JOBS)).astype(float)]
    blocks += [df["count"].to_numpy(float)[:, None]]
    blocks += [(df["zip"].to_numpy(str)[:, None] == np.array(ZIPS)).astype(float)]
    member = df["member"].to_numpy(bool)
    blocks += [np.stack([~member, member], axis=1).astype(float)]
    return np.hstack(blocks)


def _independent_predictions(model_path, df: pd.DataFrame) -> list[str]:
    """Class names WITHOUT lastiterate's encoding or model code: the hand-made one-hot, the row
    clip to norm 1 of the default (clip-only) scaling and argmax of W x from the file."""
    Z = _hand_encoded(df)
    Z = Z * np.minimum(1.0, 1.0 / np.linalg.norm(Z, axis=1, keepdims=True))
    W = load_file(str(model_path))["weight"]
    return [CLASSES[i] for i in (Z @ W.T).argmax(1)]


TRAIN = [
    "train",
    "--model",
    "logreg",
    "--algorithm",
    "gd",
    "--epochs",
    "60",
    "--lr",
    "2",
    "--clip",
    "1",
    "--noise-std",
    "0.002",
    "--feature-norm",
    "1",
    "--seed",
    "3",
]


def _run(args, capsys, rc=0):
    capsys.readouterr()
    assert main(args) == rc
    return capsys.readouterr()


def _one_line(cap) -> str:
    assert cap.out == "" and "Traceback" not in cap.err
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1, cap.err
    return lines[0]


@pytest.fixture(scope="module")
def csv_model(tmp_path_factory):
    import contextlib
    import io

    d = tmp_path_factory.mktemp("csvcard")
    df = _frame()
    df.to_csv(d / "train.csv", index=False)
    with contextlib.redirect_stdout(io.StringIO()):
        args = [*TRAIN, "--dataset", str(d / "train.csv"), "--target", "y"]
        assert main([*args, "--out", str(d / "m.safetensors")]) == 0
    return d, df


def _predict(d, dataset, capsys, *extra, rc=0):
    return _run(
        ["predict", "--model", str(d / "m.safetensors"), "--dataset", str(dataset), *extra],
        capsys,
        rc=rc,
    )


# ---------------------------------------------------------------------- the card
def test_card_records_the_encoding_as_data(csv_model):
    d, _ = csv_model
    card = json.loads(card_path(d / "m.safetensors").read_text())
    enc = card["preprocessing"]["encoding"]
    assert enc["format"] == "lastiterate-table-encoding/1"
    assert enc["columns"] == [
        {"name": "x1", "kind": "numeric"},
        {
            "name": "job",
            "kind": "categorical",
            "categories": JOBS,
            "source": "data",
            "values": "text",
        },
        {"name": "count", "kind": "numeric"},
        {
            "name": "zip",
            "kind": "categorical",
            "categories": ZIPS,
            "source": "data",
            "values": "text",
        },
        {
            "name": "member",
            "kind": "categorical",
            "categories": ["False", "True"],
            "source": "data",
            "values": "boolean",
        },
    ]
    assert enc["target"] == {
        "name": "y",
        "kind": "classes",
        "class_names": CLASSES,
        "source": "data",
        "values": "text",
    }
    assert enc["n_features"] == 10 == card["architecture"]["n_features"]
    assert card["features"]["names"][:4] == ["x1", "job=clerk", "job=nurse", "job=pilot"]
    # the lists read from the data are released with the card and said NOT to be covered
    assert not enc["covered_by_guarantee"] and "NOT covered" in enc["note"]
    assert not card["preprocessing"]["covered_by_guarantee"]
    assert "preprocessing.encoding" in card["guarantee"]["not_covered"][0]
    assert any("NOT covered" in n and "'job'" in n for n in card["preprocessing"]["notes"])
    # JSON data, no code: the card parses as standard JSON and holds no callable reference
    assert "lambda" not in json.dumps(enc) and "pickle" not in json.dumps(enc)


# ---------------------------------------------------------------------- replay
def test_predict_csv_replays_the_encoding(csv_model, tmp_path, capsys):
    d, df = csv_model
    expected = _independent_predictions(d / "m.safetensors", df)
    assert len(set(expected)) == 3  # a model that separates the classes: the check has teeth
    out = json.loads(_predict(d, d / "train.csv", capsys, "--json").out)
    assert out["predictions"] == expected and out["n"] == len(df)
    assert out["class_names"] == CLASSES
    assert [CLASSES[i] for i in out["labels"]] == expected
    acc = float(np.mean(np.array(expected) == df["y"].to_numpy()))
    assert out["quality"]["accuracy"] == pytest.approx(acc) and acc > 0.6
    # text output: one class name per line
    assert _predict(d, d / "train.csv", capsys).out.split() == expected
    # columns shuffled, extra columns, no target column: the same predictions
    other = df[["member", "y", "zip", "count", "job", "x1"]].assign(extra=1.5, note="z")
    other.to_csv(tmp_path / "shuffled.csv", index=False)
    df.drop(columns="y").to_csv(tmp_path / "unlabelled.csv", index=False)
    out = json.loads(_predict(d, tmp_path / "shuffled.csv", capsys, "--json").out)
    assert out["predictions"] == expected and out["quality"]["accuracy"] == pytest.approx(acc)
    out = json.loads(_predict(d, tmp_path / "unlabelled.csv", capsys, "--json").out)
    assert out["predictions"] == expected and out["quality"] is None


def test_text_codes_stay_text(csv_model, tmp_path, capsys):
    """'007' / '012' are categories of a text column: a file holding only those must not be read
    as the numbers 7 and 12 (pandas would infer integers and '7' is no category)."""
    d, df = csv_model
    sub = df[df["zip"] != "x9"]
    sub.to_csv(tmp_path / "codes.csv", index=False)
    assert pd.read_csv(tmp_path / "codes.csv")["zip"].dtype.kind == "i"  # what pandas infers
    out = json.loads(_predict(d, tmp_path / "codes.csv", capsys, "--json").out)
    assert out["predictions"] == _independent_predictions(d / "m.safetensors", sub)


def test_parquet_replays_the_encoding(csv_model, tmp_path, capsys):
    if importlib.util.find_spec("pyarrow") is None:
        pytest.skip("pyarrow is not installed")
    d, df = csv_model
    df.to_parquet(tmp_path / "t.parquet")
    out = json.loads(_predict(d, tmp_path / "t.parquet", capsys, "--json").out)
    assert out["predictions"] == _independent_predictions(d / "m.safetensors", df)


def test_load_model_predicts_on_a_dataframe(csv_model):
    d, df = csv_model
    released = load_model(d / "m.safetensors")
    expected = _independent_predictions(d / "m.safetensors", df)
    assert released.class_names == CLASSES
    names = released.predict(df)
    assert names.tolist() == expected
    assert released.predict(df.iloc[:, ::-1].assign(other=0)).tolist() == expected
    assert released.score(names, df["y"]) == {
        "accuracy": pytest.approx(float(np.mean(names == df["y"].to_numpy())))
    }
    X, y = released.encode(df)
    assert np.array_equal(X, _hand_encoded(df)) and [CLASSES[i] for i in y] == df["y"].tolist()
    assert released.predict_labels(df).tolist() == [CLASSES.index(v) for v in expected]
    with pytest.raises(ParameterError, match="'job'.*'sailor'"):
        released.predict(df.assign(job="sailor"))
    with pytest.raises(ParameterError, match="not one of the model's classes"):
        released.score(names, np.zeros(len(df), dtype=int))


def test_trainer_model_and_released_model_agree_on_a_frame(tmp_path):
    """Python path: load_frame -> the trainer -> model_card / save_model -> load_model: the
    released model on the DataFrame predicts what the trainer's model predicts on the encoded
    training matrix (declared categories: the encoding is then covered)."""
    import lastiterate.train as lt
    from lastiterate.train.data import load_frame

    df = _frame(n=120, seed=1)
    cats = {"job": [*JOBS, "sailor"], "zip": ZIPS, "member": [False, True]}
    data = load_frame(df, "y", test_frame=df, categories=cats, feature_norm=1.0, standardize=False)
    assert data.encoding is not None and data.encoding["covered_by_guarantee"]
    model = lt.GLM(data.n_features, 3, "multinomial-logistic", dtype=torch.float64)
    res = lt.NoisyGD(model, lr=2.0, noise_std=0.01, clip=1.0, feature_norm=1.0).fit(
        data.X_train, data.y_train, epochs=30
    )
    path, _ = save_model(tmp_path / "m.safetensors", model, model_card(res, data, method="NoisyGD"))
    released = load_model(path)
    card = released.card
    assert card["preprocessing"]["encoding"]["columns"][1]["source"] == "declared"
    assert card["preprocessing"]["covered_by_guarantee"]
    assert not any("encoding" in line for line in card["guarantee"]["not_covered"])
    own = model.predict(torch.as_tensor(data.X_train)).numpy()
    assert len(set(own.tolist())) > 1
    assert released.predict(df).tolist() == [CLASSES[i] for i in own]
    assert np.array_equal(released.predict_labels(df.sample(frac=1.0, axis=1, random_state=0)), own)
    # a declared category absent from the training table is a feature of its own (all zeros
    # in training), not an error
    assert released.predict(df.assign(job="sailor")).shape == (len(df),)


# ---------------------------------------------------------------------- bad tables
@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda df: df.drop(columns="job"), ["dataset=", "no column 'job'"]),
        (lambda df: df.assign(job=["sailor", *df["job"][1:]]), ["'job'", "'sailor'", "categories"]),
        (lambda df: df.assign(zip=["7", *df["zip"][1:]]), ["'zip'", "'7'"]),
        (
            lambda df: df.assign(x1=[np.nan, *df["x1"][1:]]),
            ["'x1'", "missing value", "never imputed"],
        ),
        (lambda df: df.assign(job=[None, *df["job"][1:]]), ["'job'", "missing value"]),
        (lambda df: df.assign(x1=["abc", *df["x1"][1:]]), ["'x1'", "'abc'", "not a number"]),
        (lambda df: df.assign(count=[np.inf, *df["count"][1:]]), ["'count'", "inf"]),
        (lambda df: df.assign(y=["maybe", *df["y"][1:]]), ["target='y'", "'maybe'", "classes"]),
        (lambda df: df.iloc[:0], ["no rows"]),
    ],
)
def test_bad_tables_exit_2_one_line(csv_model, tmp_path, capsys, edit, words):
    d, df = csv_model
    edit(df.copy()).to_csv(tmp_path / "bad.csv", index=False)
    line = _one_line(_predict(d, tmp_path / "bad.csv", capsys, rc=2))
    for w in words:
        assert w in line, line
    assert "pickle" not in line


def test_unreadable_or_unsupported_files_are_named_honestly(csv_model, tmp_path, capsys):
    d, _ = csv_model
    (tmp_path / "garbage.csv").write_bytes(b"\x00\xff\xfe" * 20)
    (tmp_path / "notes.txt").write_text("x1,job\n1,clerk\n")
    line = _one_line(_predict(d, tmp_path / "notes.txt", capsys, rc=2))
    assert "neither a .npz nor a .npy" in line and "pickle" not in line
    line = _one_line(_predict(d, tmp_path / "garbage.csv", capsys, rc=2))
    assert "dataset=" in line and "pickle" not in line


# ---------------------------------------------------------------------- old cards, bad cards
def _resave(src, dst, edit):
    """Write a copy of the model file ``src`` whose card was changed by ``edit`` (a consistent
    file: the SHA-256 is recomputed, as an older version or a hostile writer would)."""
    released = load_model(src)
    card = json.loads(json.dumps(released.card))
    edit(card)
    save_model(dst, released.model, card)
    return dst


def test_old_card_without_encoding_still_predicts_on_npz(csv_model, tmp_path, capsys):
    d, df = csv_model
    old = _resave(
        d / "m.safetensors",
        tmp_path / "old.safetensors",
        lambda c: c["preprocessing"].pop("encoding"),
    )
    released = load_model(old)
    assert released.encoding is None and released.class_names is None
    np.savez(tmp_path / "x.npz", X=_hand_encoded(df))
    cap = _run(["predict", "--model", str(old), "--dataset", str(tmp_path / "x.npz")], capsys)
    expected = _independent_predictions(d / "m.safetensors", df)
    assert [CLASSES[int(v)] for v in cap.out.split()] == expected
    # a table needs the encoding: refused in one line, not guessed
    line = _one_line(
        _run(["predict", "--model", str(old), "--dataset", str(d / "train.csv")], capsys, rc=2)
    )
    assert "records no table encoding" in line
    with pytest.raises(ParameterError, match="records no table encoding"):
        released.encode(df)
    # the new card on the encoded matrix too (label names then)
    cap = _predict(d, tmp_path / "x.npz", capsys)
    assert cap.out.split() == expected


def _set(path, value):
    def edit(card):
        obj = card
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value

    return edit


ENC = ["preprocessing", "encoding"]


@pytest.mark.parametrize(
    "edit",
    [
        _set([*ENC, "columns", 1, "categories"], ["clerk", "clerk", "pilot"]),
        _set([*ENC, "columns", 1, "categories"], ["clerk", "nurse"]),  # 9 features, not 10
        _set([*ENC, "columns", 0, "kind"], "exec"),
        _set([*ENC, "columns", 1, "values"], "pickle"),
        _set([*ENC, "target", "class_names"], ["hi", "lo"]),  # fewer names than classes
        _set([*ENC, "target", "name"], "x1"),  # a feature column
        _set([*ENC, "format"], "other/1"),
        _set([*ENC, "columns"], "x1,job"),
        _set([*ENC, "n_features"], 11),
    ],
)
def test_invalid_encodings_in_a_card_are_refused(csv_model, tmp_path, capsys, edit):
    d, _ = csv_model
    bad = _resave(d / "m.safetensors", tmp_path / "bad.safetensors", edit)
    with pytest.raises(ParameterError, match="invalid model card"):
        load_model(bad)
    line = _one_line(
        _run(["predict", "--model", str(bad), "--dataset", str(d / "train.csv")], capsys, rc=2)
    )
    assert "model=" in line and "invalid model card" in line


def test_standardised_table_run_replays_encoding_then_scaling(tmp_path, capsys):
    """--scaling data-public: the card's encoding first, then its standardisation and row clip;
    predicting on the CSV equals predicting on the hand-encoded matrix (.npz) and the independent
    formula with the card's statistics."""
    df = _frame(n=150, seed=2)
    df.to_csv(tmp_path / "t.csv", index=False)
    model = tmp_path / "s.safetensors"
    train = [*TRAIN, "--dataset", str(tmp_path / "t.csv"), "--target", "y", "--out", str(model)]
    _run([*train, "--scaling", "data-public"], capsys)
    card = json.loads(card_path(model).read_text())
    assert [s["op"] for s in card["preprocessing"]["steps"]] == ["standardize", "clip_rows"]
    std = card["preprocessing"]["steps"][0]
    Z = (_hand_encoded(df) - np.array(std["mean"])) / np.array(std["scale"])
    Z = Z * np.minimum(1.0, 1.0 / np.linalg.norm(Z, axis=1, keepdims=True))
    expected = [CLASSES[i] for i in (Z @ load_file(str(model))["weight"].T).argmax(1)]
    np.savez(tmp_path / "x.npz", X=_hand_encoded(df))
    for data in ("t.csv", "x.npz"):
        cap = _run(["predict", "--model", str(model), "--dataset", str(tmp_path / data)], capsys)
        assert cap.out.split() == expected


# ---------------------------------------------------------------------- declared categories (CLI)
def test_declared_categories_make_the_encoding_data_independent(tmp_path, capsys):
    # --categories fixes the one-hot columns whatever values the file holds: a declared value
    # absent from the data still gets its column, the card says "declared" and covered, and the
    # prediction replays the declared order (checked by hand against the weights)
    df = _frame(n=120, seed=1)
    df.to_csv(tmp_path / "t.csv", index=False)
    jobs = ["teacher", *JOBS]  # "teacher" never occurs: its column must exist anyway
    args = [
        *TRAIN,
        "--dataset",
        str(tmp_path / "t.csv"),
        "--target",
        "y",
        "--categories",
        "job=" + ",".join(jobs),
        "--categories",
        "zip=" + ",".join(ZIPS),
        "--categories",
        "member=False,True",
        "--classes",
        ",".join(CLASSES),
        "--out",
        str(tmp_path / "m.safetensors"),
    ]
    _run(args, capsys)
    card = json.loads(card_path(tmp_path / "m.safetensors").read_text())
    columns = {c["name"]: c for c in card["preprocessing"]["encoding"]["columns"]}
    assert columns["job"]["categories"] == jobs and columns["job"]["source"] == "declared"
    assert card["preprocessing"]["covered_by_guarantee"] is True
    W = load_file(str(tmp_path / "m.safetensors"))["weight"]
    assert W.shape[1] == 1 + 4 + 1 + 3 + 2  # x1, job (4 declared), count, zip, member
    out = _run(
        [
            "predict",
            "--model",
            str(tmp_path / "m.safetensors"),
            "--dataset",
            str(tmp_path / "t.csv"),
        ],
        capsys,
    ).out.split()
    blocks = [df["x1"].to_numpy(float)[:, None]]
    blocks += [(df["job"].to_numpy(str)[:, None] == np.array(jobs)).astype(float)]
    blocks += [df["count"].to_numpy(float)[:, None]]
    blocks += [(df["zip"].to_numpy(str)[:, None] == np.array(ZIPS)).astype(float)]
    member = df["member"].to_numpy(bool)
    blocks += [np.stack([~member, member], axis=1).astype(float)]
    Z = np.hstack(blocks)
    Z = Z * np.minimum(1.0, 1.0 / np.linalg.norm(Z, axis=1, keepdims=True))
    assert out == [CLASSES[i] for i in (Z @ W.T).argmax(1)]


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--categories", "job=clerk,nurse"], "'pilot'"),  # a value outside the declared list
        (["--categories", "job"], "COLUMN=V1,V2"),
        (["--categories", "job=a,,b"], "distinct, non-empty"),
        (["--categories", "job=a", "--categories", "job=b"], "twice"),
        (["--classes", "hi,lo"], "'mid'"),
    ],
)
def test_bad_declarations_exit_2_one_line(tmp_path, capsys, extra, words):
    _frame(n=60).to_csv(tmp_path / "t.csv", index=False)
    args = [*TRAIN, "--dataset", str(tmp_path / "t.csv"), "--target", "y", *extra]
    line = _one_line(_run(args, capsys, rc=2))
    assert words in line


def test_declarations_need_a_table(capsys):
    args = [*TRAIN, "--dataset", "iris", "--categories", "job=a,b"]
    assert "CSV or Parquet" in _one_line(_run(args, capsys, rc=2))
