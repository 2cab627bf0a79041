"""The released model as a file that carries its guarantee: safetensors parameters + a model card.

What the last-iterate theorems cover is releasing the FINAL model of one run.  ``lastiterate train
--out model.safetensors`` (:func:`save_model`) writes exactly that object:

* ``model.safetensors`` -- the final parameters (safetensors: raw tensors and a JSON header, no
  pickle) with the model card embedded in its metadata, and a SHA-256 of the tensors;
* ``model.card.json`` -- the same card, for people (:func:`card_path`).

The card (:func:`model_card`) holds the guarantee (epsilon, delta, mu, bound and theorem, what it
covers and what it does not), the Run the trainer executed, the adjacency, the certificate, the
preprocessing (the feature map to replay on new inputs, and whether its statistics are covered; for
a table, first its encoding -- columns, category lists, class names -- as JSON data,
:class:`~lastiterate.train.tabular.TableEncoding`), the feature names, the architecture and the
library version.  Category lists read from the training table are released with the card and listed
in ``not_covered``; the label set is treated as public, as everywhere in the library.  It holds
NOTHING ELSE computed from the training data: no seed (noise and batches must stay secret), no
intermediate iterate, and no training/test loss, accuracy or clipped fraction -- those are functions
of the private data (and of intermediate iterates) that the guarantee does not cover; the train
report keeps them apart as ``non_private_diagnostics``.  A data-dependent preprocessing statistic
that the guarantee does NOT cover (standardisation with the training set's mean and std "treated as
public") is needed to apply the model and is therefore in the card, marked as not covered -- with a
line in ``not_covered``.

:func:`load_model` reads a model file safely: the header is parsed as JSON and the tensors by
:mod:`safetensors` (never pickle), the tensors are checked against their SHA-256 and the
architecture, and a card beside the file must equal the embedded one.  A truncated, corrupt,
tampered or hostile file raises :class:`~lastiterate.errors.ParameterError` (CLI: exit 2, one line);
the SHA-256 detects accidental corruption and inconsistent edits -- it is not a signature.
"""

from __future__ import annotations

import itertools
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from lastiterate import __version__, jsonutil
from lastiterate.errors import ParameterError
from lastiterate.train.ledger import (
    refuse_foreign_file,
    refuse_foreign_output,
    safetensors_metadata,
    tensors_digest,
    write_private_file,
)
from lastiterate.train.tabular import TableEncoding, read_table

MODEL_FORMAT = "lastiterate-model/1"
CARD_FORMAT = "lastiterate-model-card/1"
_FORMAT_KEY = "format"
_CARD_KEY = "lastiterate_model_card"
_DIGEST_KEY = "lastiterate_tensors_sha256"
#: the model file is the published object: world-readable (reduced by the umask), unlike checkpoints
PUBLIC_MODE = 0o644
#: a model card longer than this is not one of ours (a card is a few KiB)
_MAX_CARD_BYTES = 16 << 20
#: limits on a card's architecture, checked before anything is allocated
MAX_PARAMETERS = 2_000_000_000
_ACTIVATIONS = ("tanh", "relu", "sigmoid")
_MLP_LOSSES = ("cross-entropy", "mse")

#: what no card contains (tests check it); they are in the train report's non_private_diagnostics
NON_PRIVATE_DIAGNOSTICS = (
    "train_accuracy",
    "test_accuracy",
    "train_loss",
    "test_loss",
    "train_mse",
    "test_mse",
    "clipped_fraction",
)

NOT_COVERED_ALWAYS = (
    (
        "any other iterate of this run (checkpoints are intermediate iterates: publishing "
        "one composes the guarantees)"
    ),
    "other models trained on the same data (their guarantees compose)",
    (
        "diagnostics computed from the data (loss, accuracy, clipped fraction): "
        "they are not in this card"
    ),
)


def card_path(path: str | os.PathLike[str]) -> Path:
    """The model card beside a model file: ``model.safetensors`` -> ``model.card.json``."""
    p = Path(path)
    return p.with_name(p.stem + ".card.json") if p.suffix else p.with_name(p.name + ".card.json")


# ---------------------------------------------------------------------- architecture
def architecture(model: Any) -> dict[str, Any]:
    """The JSON description that :func:`build_model` turns back into ``model`` (GLMs and the
    ``mlp()`` networks of :mod:`lastiterate.train.models`; other modules are refused)."""
    # lazy: torch (~1.5 s) only to build or run a model, not to read cards or check paths
    from torch import nn

    from lastiterate.train.models import GLM, ModuleModel

    if isinstance(model, GLM):
        return {
            "kind": "glm",
            "family": model.family,
            "n_features": int(model.weight.shape[1]),
            "n_outputs": int(model.weight.shape[0]),
            "intercept": bool(model.intercept),
            "dtype": str(model.weight.dtype).removeprefix("torch."),
        }
    if isinstance(model, ModuleModel) and isinstance(model.module, nn.Sequential):
        layers = list(model.module)
        acts = {nn.Tanh: "tanh", nn.ReLU: "relu", nn.Sigmoid: "sigmoid"}
        linears = layers[0::2]
        between = layers[1::2]
        ok = (
            len(layers) % 2 == 1
            and all(isinstance(x, nn.Linear) and x.bias is not None for x in linears)
            and len({type(a) for a in between}) <= 1
            and all(type(a) in acts for a in between)
            and model.loss_name in _MLP_LOSSES
        )
        if ok:
            return {
                "kind": "mlp",
                "n_features": int(linears[0].in_features),  # type: ignore[arg-type]
                "n_outputs": int(linears[-1].out_features),  # type: ignore[arg-type]
                "hidden": [int(x.out_features) for x in linears[:-1]],  # type: ignore[arg-type]
                "activation": acts[type(between[0])] if between else "tanh",
                "loss": model.loss_name,
                "dtype": str(linears[0].weight.dtype).removeprefix("torch."),
            }
    raise ParameterError(
        "model",
        type(model).__name__,
        "only GLMs and mlp() networks (Linear layers with tanh/relu/sigmoid) "
        "can be saved as a model file",
    )


def _int_field(arch: dict[str, Any], key: str, low: int = 1, high: int = 10**9) -> int:
    v = arch.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise ValueError(f"architecture.{key} must be an integer in [{low}, {high}]")
    return v


def _architecture_parameters(arch: Any) -> tuple[dict[str, Any], int]:
    """``arch`` validated, and its number of parameters (computed before anything is allocated)."""
    if not isinstance(arch, dict):
        # - a bad file, reported as ParameterError
        raise ValueError("architecture must be an object")  # noqa: TRY004
    if arch.get("dtype") not in ("float64", "float32"):
        raise ValueError("architecture.dtype must be float64 or float32")
    d = _int_field(arch, "n_features")
    k = _int_field(arch, "n_outputs")
    if arch.get("kind") == "glm":
        # lazy: torch (~1.5 s) only to build or run a model, not to read cards or check paths
        from lastiterate.train.models import GLM_FAMILIES

        if arch.get("family") not in GLM_FAMILIES or not isinstance(arch.get("intercept"), bool):
            raise ValueError("architecture.family / intercept are invalid")
        return arch, k * d + (k if arch["intercept"] else 0)
    if arch.get("kind") == "mlp":
        hidden = arch.get("hidden")
        if (
            not isinstance(hidden, list)
            or len(hidden) > 100
            or not all(
                isinstance(h, int) and not isinstance(h, bool) and 1 <= h <= 10**9 for h in hidden
            )
        ):
            raise ValueError("architecture.hidden must be a list of integers >= 1")
        if arch.get("activation") not in _ACTIVATIONS or arch.get("loss") not in _MLP_LOSSES:
            raise ValueError("architecture.activation / loss are invalid")
        widths = [d, *hidden, k]
        return arch, sum(a * b + b for a, b in itertools.pairwise(widths))
    raise ValueError("architecture.kind must be glm or mlp")


def build_model(arch: dict[str, Any]) -> Any:
    """A zero-initialised model of architecture ``arch`` (from :func:`architecture`)."""
    # lazy: torch (~1.5 s) only to build or run a model, not to read cards or check paths
    import torch

    from lastiterate.train.models import GLM, ModuleModel, mlp

    dtype = getattr(torch, arch["dtype"])
    if arch["kind"] == "glm":
        return GLM(
            arch["n_features"],
            arch["n_outputs"],
            arch["family"],
            intercept=arch["intercept"],
            dtype=dtype,
        )
    net = mlp(
        arch["n_features"],
        arch["n_outputs"],
        tuple(arch["hidden"]),
        arch["activation"],
        seed=0,
        dtype=dtype,
    )
    return ModuleModel(net, arch["loss"])


# ---------------------------------------------------------------------- preprocessing replay
def _vector(step: dict[str, Any], key: str, d: int) -> np.ndarray:
    v = step.get(key)
    arr = np.asarray(v if isinstance(v, list) else [v], dtype=np.float64)
    if arr.ndim != 1 or len(arr) not in (1, d) or not np.isfinite(arr).all():
        raise ValueError(
            f"preprocessing step {step.get('op')!r}: {key} must be a finite number or {d} of them"
        )
    return np.broadcast_to(arr, (d,))


def apply_feature_transform(steps: list[dict[str, Any]], X: np.ndarray) -> np.ndarray:
    """Replay the feature map of a :class:`~lastiterate.train.data.Dataset` (``Dataset.transform``,
    stored in the card) on raw inputs ``X``.  Ops (vectors may be one number for all features):
    ``multiply`` (factor), ``standardize`` ((x - mean) / scale), ``public_range``
    ((clip(x, lo, hi) - lo) / (hi - lo)), ``clip_values`` (clip(x, lo, hi)),
    ``clip_rows`` (norm)."""
    # lazy: preprocessing imports scipy (~1.5 s), which replaying a model card does not need
    from lastiterate.train.preprocessing import clip_rows

    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    for step in steps:
        op = step.get("op") if isinstance(step, dict) else None
        if op == "multiply":
            X = X * _vector(step, "factor", d)
        elif op == "standardize":
            scale = _vector(step, "scale", d)
            if not (scale > 0).all():
                raise ValueError("preprocessing step 'standardize': scale must be > 0")
            X = (X - _vector(step, "mean", d)) / scale
        elif op == "public_range":
            lo, hi = _vector(step, "lo", d), _vector(step, "hi", d)
            if not (hi > lo).all():
                raise ValueError("preprocessing step 'public_range': needs hi > lo")
            X = (np.clip(X, lo, hi) - lo) / (hi - lo)
        elif op == "clip_values":
            lo, hi = _vector(step, "lo", d), _vector(step, "hi", d)
            if not (hi >= lo).all():
                raise ValueError("preprocessing step 'clip_values': needs hi >= lo")
            X = np.clip(X, lo, hi)
        elif op == "clip_rows":
            R = float(_vector(step, "norm", 1)[0])
            if not R > 0:
                raise ValueError("preprocessing step 'clip_rows': norm must be > 0")
            X = clip_rows(X, R)
        else:
            raise ValueError(f"unknown preprocessing step {op!r}")
    return X


def check_replay(dataset: Any, raw: Any) -> None:
    """Refuse to write a model whose card could not reproduce its training features: replaying
    ``dataset.transform`` on the rows of ``raw`` (the same data loaded without feature scaling or
    clipping) must give ``dataset.X_train``.  Guards against a preprocessing step that is applied
    but not recorded (predictions from the file would then be silently wrong)."""
    done = list(getattr(raw, "transform", []) or [])
    steps = list(getattr(dataset, "transform", []) or [])
    ok = steps[: len(done)] == done and raw.X_train.shape == dataset.X_train.shape
    if ok:
        try:
            replay = apply_feature_transform(steps[len(done) :], raw.X_train)
            ok = bool(np.allclose(replay, dataset.X_train, rtol=1e-9, atol=1e-9))
        except ValueError:
            ok = False
    if not ok:
        raise ParameterError(
            "out",
            "<model file>",
            "the preprocessing of this run is not recorded in a replayable form: "
            "no model file is written (report this as a bug)",
        )


def invert_target_transform(step: dict[str, Any] | None, y: np.ndarray) -> np.ndarray:
    """Map predictions back to the units of the targets (inverse of ``Dataset.target_transform``:
    ``standardize`` (mean, scale) or ``affine`` (shift, scale), both ``y -> (y -
    shift) / scale``)."""
    if step is None:
        return y
    if step.get("op") == "standardize":
        scale, mean = float(_vector(step, "scale", 1)[0]), float(_vector(step, "mean", 1)[0])
        return y * scale + mean
    if (
        step.get("op") == "affine"
    ):  # y_scaled = (y - shift) / scale, e.g. a declared range to [-1, 1]
        scale, shift = float(_vector(step, "scale", 1)[0]), float(_vector(step, "shift", 1)[0])
        return y * scale + shift
    raise ValueError(f"unknown target step {step.get('op')!r}")


# ---------------------------------------------------------------------- the card
def _preprocessing_card(dataset: Any, preprocessing: dict[str, Any] | None) -> dict[str, Any]:
    steps = list(getattr(dataset, "transform", []) or [])
    target = getattr(dataset, "target_transform", None)
    uncovered = [
        s
        for s in [*steps, target]
        if isinstance(s, dict) and "NOT covered" in str(s.get("statistics", ""))
    ]
    encoding = getattr(dataset, "encoding", None)
    out: dict[str, Any] = {}
    if encoding is not None:
        # the table -> feature map, replayed first by predict (then the steps below)
        out["encoding"] = encoding
    return {
        **out,
        "steps": steps,
        "target": target,
        "covered_by_guarantee": not uncovered
        and (encoding is None or bool(encoding.get("covered_by_guarantee"))),
        # the preprocessing's own record and cost, when the trainer has one
        "privacy": preprocessing,
        "notes": [n for n in getattr(dataset, "notes", []) if "split" not in n],
    }


def _dataset_label(name: str) -> str:
    """A bundled dataset's name, or the base name of a file / directory (no local
    paths in the card)."""
    kind, sep, _ = name.partition(":")
    if sep and kind == "mnist":
        return "mnist"
    return Path(name).name or name


def model_card(
    result: Any,
    dataset: Any,
    *,
    model: Any | None = None,
    method: str | None = None,
    preprocessing: dict[str, Any] | None = None,
    with_preprocessing: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The model card of a :class:`~lastiterate.train.trainer.TrainResult` trained on ``dataset``
    (a :class:`~lastiterate.train.data.Dataset`).  See the module docstring for what it holds and
    what it must not hold.  ``with_preprocessing``: the headline guarantee of training and private
    preprocessing together (``ComposedGuarantee.to_json()``); the statement then quotes it.

    Args:
        result: the trainer's result (its model, report and run).
        dataset: the training dataset (only public facts: its name, sizes, declared ranges).
        model: the released model, when it is not ``result.model``.
        method: the training method's name.
        preprocessing: the preprocessing to replay at prediction time.
        with_preprocessing: the composed guarantee of training and private preprocessing.

    Returns:
        The card as a JSON-safe dict.

    Raises:
        ParameterError: the result was not accounted (``fit(account=False)``).
    """
    model = result.model if model is None else model
    report = result.report
    if report is None:
        raise ParameterError(
            "result",
            "account=False",
            "a model card needs the accounted guarantee (fit with account=True)",
        )
    rep = report.to_json()
    best = rep["best"]
    pre = _preprocessing_card(dataset, preprocessing)
    not_covered = list(NOT_COVERED_ALWAYS)
    encoding = pre.get("encoding")
    if encoding is not None and not encoding.get("covered_by_guarantee"):
        not_covered.insert(
            0,
            "the category lists in 'preprocessing.encoding' marked source 'data' (read from the "
            "training table, treated as public: which values occur is released with this card)",
        )
    if any(
        isinstance(s, dict) and "NOT covered" in str(s.get("statistics", ""))
        for s in [*pre["steps"], pre["target"]]
    ):
        not_covered.insert(
            0,
            "the preprocessing statistics in 'preprocessing' (training-set statistics treated as "
            "public; they are released with this card)",
        )
    if best is None:
        statement = "No applicable bound: this model comes with NO privacy guarantee"
    else:
        eps = best["epsilon"]
        eps_text = f"{eps:.6g}" if isinstance(eps, float) else str(eps)
        statement = (
            f"Releasing only this final model is ({eps_text}, {best['delta']:.3g})-DP "
            f"under {result.run.adjacency} adjacency [{best['bound']}: {best['theorem']}]"
        )
        if (
            with_preprocessing is not None
            and with_preprocessing.get("covers_preprocessing")
            and with_preprocessing.get("preprocessing_mu")
        ):
            eps = with_preprocessing["epsilon"]
            eps_text = f"{eps:.6g}" if isinstance(eps, float) else str(eps)
            statement = (
                f"Releasing this final model and its private preprocessing statistics is "
                f"({eps_text}, {with_preprocessing['delta']:.3g})-DP under {result.run.adjacency} "
                f"adjacency [{with_preprocessing['method']}; training alone: {best['bound']}]"
            )
    # lazy: the trainer imports torch (~1.5 s), which reading cards or checking paths need not
    from lastiterate.train.trainer import composition_summary

    return jsonutil.jsonable(
        {
            "format": CARD_FORMAT,
            "library": {"name": "lastiterate", "version": __version__},
            "guarantee": {
                "statement": statement,
                "best": best,
                "with_preprocessing": with_preprocessing,
                "delta": rep["delta"],
                "adjacency": result.run.adjacency,
                "covers": (
                    "releasing this final model (the last iterate of one run) and anything "
                    "computed from it alone"
                ),
                "not_covered": not_covered,
                "composition_every_iterate": composition_summary(report),
            },
            "run": result.run.setting(),
            "method": method or type(result).__name__,
            "geometry": result.certificate.to_json(),
            "architecture": architecture(model),
            "task": dataset.task,
            "n_classes": dataset.n_classes,
            "features": {"n_features": dataset.n_features, "names": dataset.feature_names},
            "preprocessing": pre,
            "dataset": _dataset_label(dataset.name),
            "run_id": result.run_id,
        }
    )


# ---------------------------------------------------------------------- save / load
def _card_why_not(fh: BinaryIO) -> str | None:
    """None when the open file is a model card (JSON with ``format`` = CARD_FORMAT), else why."""
    try:
        card = jsonutil.loads(fh.read(_MAX_CARD_BYTES + 1).decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return "not a JSON file of at most 16 MiB"
    if isinstance(card, dict) and card.get("format") == CARD_FORMAT:
        return None
    return f"no {CARD_FORMAT} format"


def _refuse_foreign_model_path(p: Path) -> None:
    """A model file (and its card beside it) is written over an earlier model file (card), never
    over another file."""
    refuse_foreign_file(
        p, "out", "lastiterate model file", lambda meta: meta.get(_FORMAT_KEY) == MODEL_FORMAT
    )
    refuse_foreign_output(card_path(p), "out", "lastiterate model card", _card_why_not)


def check_output_path(out: str | os.PathLike[str], *inputs: str | os.PathLike[str] | None) -> Path:
    """Refuse a model path (or its card path) that is a directory or names one of ``inputs``
    (the dataset, the checkpoint, the ledger): writing the model must never overwrite them."""
    p = Path(out)
    if p.is_dir() or not p.name:
        raise ParameterError(
            "out", str(out), "is a directory: give a file name such as model.safetensors"
        )
    if not p.parent.exists() and str(p.parent):
        raise ParameterError("out", str(out), f"its directory {p.parent} does not exist")
    targets = {p.resolve(), card_path(p).resolve()}
    for other in inputs:
        if other is not None and Path(other).resolve() in targets:
            raise ParameterError(
                "out",
                str(out),
                f"would overwrite {other} (an input of this run): choose another file name",
            )
    _refuse_foreign_model_path(p)
    return p


def _model_tensors(model: Any) -> dict[str, Any]:
    return {k: v.detach().to("cpu").clone().contiguous() for k, v in model.state_dict().items()}


def save_model(path: str | os.PathLike[str], model: Any, card: dict[str, Any]) -> tuple[Path, Path]:
    """Write the final parameters of ``model`` to ``path`` (safetensors, card embedded) and the card
    beside it (:func:`card_path`); both atomically.

    Args:
        path: the model file to write.
        model: the trained model (a GLM or a module model).
        card: its model card (:func:`model_card`).

    Returns:
        ``(model file, card file)``.

    Raises:
        ParameterError: ``path`` is a directory or an existing file other than a model file,
            or the parameters are not finite (a diverged run).
    """
    # lazy: torch (~1.5 s) only to build or run a model, not to read cards or check paths
    from safetensors.torch import save

    p = Path(path)
    cp = card_path(p)
    if p.is_dir():
        raise ParameterError(
            "out", str(p), "is a directory: give a file name such as model.safetensors"
        )
    _refuse_foreign_model_path(p)
    tensors = _model_tensors(model)
    if not all(bool(t.isfinite().all()) for t in tensors.values()):
        raise ParameterError(
            "out",
            str(p),
            "the trained parameters are not finite (training diverged: lower the learning rate)",
        )
    card_json = jsonutil.dumps(card, indent=2)
    embedded = jsonutil.dumps(card)
    meta = {
        _FORMAT_KEY: MODEL_FORMAT,
        _CARD_KEY: embedded,
        _DIGEST_KEY: tensors_digest(tensors, embedded),
    }
    write_private_file(p, save(tensors, metadata=meta), mode=PUBLIC_MODE, param="out")
    write_private_file(cp, (card_json + "\n").encode(), mode=PUBLIC_MODE, param="out")
    return p, cp


def _is_frame(X: Any) -> bool:
    """True for a pandas DataFrame (without importing pandas when nobody has)."""
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(X, pd.DataFrame)


@dataclass
class ReleasedModel:
    """A model loaded from a model file: ``predict`` replays the card's preprocessing.

    A model trained on a table (CSV, Parquet, DataFrame) carries its encoding in the card
    (``preprocessing.encoding``): ``predict`` then takes a pandas DataFrame with the training
    table's columns (any order, extra columns ignored) and returns class names.

    Example::

        import pandas as pd
        from lastiterate.train.model_file import load_model
        released = load_model("model.safetensors")   # written by `lastiterate train --out`
        frame = pd.read_csv("new.csv")
        names = released.predict(frame)              # class names, one per row
        released.score(names, frame["y"])            # {"accuracy": ...}

    Attributes:
        model: the trained model (a :class:`~lastiterate.train.models.GLM` or
            :class:`~lastiterate.train.models.ModuleModel`).
        card: the model card (guarantee, run, architecture, preprocessing, task).
        path: the model file it was loaded from.
        encoding: the card's table encoding (None: the model was trained on arrays, or the
            card predates encodings).
    """

    model: Any
    card: dict[str, Any]
    path: Path
    encoding: TableEncoding | None = None

    @property
    def class_names(self) -> list[str] | None:
        """Class names of a model trained on a table with non-numeric labels (label i is
        ``class_names[i]``); None otherwise."""
        if self.encoding is None or self.encoding.target.class_names is None:
            return None
        return list(self.encoding.target.class_names)

    def encode(self, frame: Any, *, name: str = "DataFrame") -> tuple[np.ndarray, Any]:
        """Replay the card's table encoding on ``frame``.

        Args:
            frame: a pandas DataFrame with the training table's input columns (by name).
            name: what error messages call the table.

        Returns:
            ``(X, y)``: the encoded (not yet scaled) features, and the labels / targets of the
            target column (None when ``frame`` has no target column).

        Raises:
            ParameterError: the card records no encoding, or ``frame`` lacks a column, has
                missing values, a non-numeric value in a numeric column or a category (or class)
                outside the card's lists -- the message names the column and the value.
        """
        enc = self.table_encoding(name)
        X = enc.encode_features(frame, name=name)
        has_target = enc.target.name in [str(c) for c in frame.columns]
        y = enc.encode_target(frame, name=name) if has_target else None
        return X, y

    def table_encoding(self, name: str = "DataFrame") -> TableEncoding:
        """The card's table encoding (:class:`~lastiterate.train.tabular.TableEncoding`).

        Args:
            name: what the error message calls the table to be encoded.

        Returns:
            The encoding.

        Raises:
            ParameterError: the card records no table encoding (a model trained on arrays, or a
                card written before encodings were recorded).
        """
        if self.encoding is None:
            raise ParameterError(
                "dataset",
                name,
                "is a table, but this model's card records no table encoding (it was trained on "
                "arrays, or by an older version): predict on the numeric features "
                "(FILE.npz / FILE.npy, or an array)",
            )
        return self.encoding

    @property
    def guarantee(self) -> dict[str, Any]:
        """The card's privacy guarantee for this final model."""
        return self.card["guarantee"]  # type: ignore[no-any-return]

    @property
    def n_features(self) -> int:
        """The number of raw input features the model expects."""
        return int(self.card["architecture"]["n_features"])

    def transform(self, X: Any) -> np.ndarray:
        """Raw inputs -> the features the model was trained on (the card's preprocessing).

        Args:
            X: raw inputs, a numeric 2-D array with :attr:`n_features` columns, or a pandas
                DataFrame (encoded first by the card's table encoding, :meth:`encode`, when
                there is one; otherwise its values are the features).

        Returns:
            The transformed features (float64).

        Raises:
            ParameterError: X is not a finite numeric 2-D array of the right width, or the card's
                preprocessing is invalid.
        """
        if _is_frame(X) and self.encoding is not None:
            X = self.encode(X)[0]
        try:
            Xa = np.asarray(X)
        except Exception:  # noqa: BLE001 - ragged input
            raise ParameterError("X", "<array>", "must be a numeric 2-D array") from None
        if Xa.dtype.kind not in "biuf" or Xa.ndim != 2:
            raise ParameterError(
                "X",
                f"<{Xa.dtype} array of shape {Xa.shape}>",
                f"must be a numeric 2-D array with {self.n_features} columns",
            )
        if Xa.shape[1] != self.n_features:
            raise ParameterError(
                "X",
                f"<array of shape {Xa.shape}>",
                f"must have {self.n_features} columns (the model's features)",
            )
        if not np.isfinite(Xa.astype(np.float64)).all():
            raise ParameterError("X", "<array with NaN or inf>", "features must be finite")
        try:
            return apply_feature_transform(self.card["preprocessing"]["steps"], Xa)
        except (ValueError, TypeError, KeyError) as exc:
            raise ParameterError(
                "model", str(self.path), f"has an invalid preprocessing in its card ({exc})"
            ) from None

    def score(self, pred: np.ndarray, y: Any) -> dict[str, float]:
        """Accuracy (classification) or mean squared error of ``pred`` against labels ``y``.

        Args:
            pred: the predictions of :meth:`predict` (class names) or :meth:`predict_labels`.
            y: the true labels or targets, one per prediction (class names when ``pred`` holds
                class names).

        Returns:
            ``{"accuracy": ...}`` or ``{"mse": ...}`` (regression).

        Raises:
            ParameterError: y is not finite numeric values of the predictions' shape, or (class
                names) holds a name that is not one of the model's classes, or there are no
                predictions (the mean over none would be NaN).
        """
        pred = np.asarray(pred)
        if len(pred) == 0:
            raise ParameterError("y", "<0 labels>", "no rows to score against: the data are empty")
        names = self.class_names
        if names is not None and pred.dtype.kind in "UOS":
            ys = [str(v) for v in (y.tolist() if hasattr(y, "tolist") else list(y))]
            if len(ys) != len(pred):
                raise ParameterError("y", f"<{len(ys)} labels>", f"must be {len(pred)} class names")
            unknown = sorted(set(ys) - set(names))
            if unknown:
                raise ParameterError(
                    "y", unknown[0], f"is not one of the model's classes {names[:8]}"
                )
            return {"accuracy": float(np.mean(pred.astype(str) == np.asarray(ys, dtype=str)))}
        ya = np.asarray(y)
        if (
            ya.dtype.kind not in "biuf"
            or ya.shape != pred.shape
            or not np.isfinite(ya.astype(np.float64)).all()
        ):
            raise ParameterError(
                "y",
                f"<{ya.dtype} array of shape {ya.shape}>",
                f"must be {len(pred)} finite numeric labels",
            )
        if self.card.get("task") == "regression":
            return {"mse": float(np.mean((pred - ya.astype(np.float64)) ** 2))}
        return {"accuracy": float(np.mean(pred == ya))}

    def predict(self, X: Any) -> np.ndarray:
        """Class names (a model trained on a table with non-numeric labels), class labels
        (other classifiers) or targets in their original units (regression).

        Args:
            X: raw inputs (as :meth:`transform` takes them: an array, or a DataFrame).

        Returns:
            str class names, int64 labels, or float64 targets.

        Raises:
            ParameterError: invalid inputs, or an invalid preprocessing or target map in the card.
        """
        pred = self.predict_labels(X)
        return self.label_names(pred)

    def label_names(self, labels: np.ndarray) -> np.ndarray:
        """Label indices as class names.

        Args:
            labels: predictions of :meth:`predict_labels`.

        Returns:
            The class names (str) when the card has them, ``labels`` unchanged otherwise.
        """
        names = self.class_names
        if names is None or self.card.get("task") == "regression":
            return labels
        return np.asarray(names, dtype=str)[np.asarray(labels, dtype=np.int64)]

    def predict_labels(self, X: Any) -> np.ndarray:
        """Class labels 0..K-1 (classification) or targets in their original units (regression).

        Args:
            X: raw inputs (as :meth:`transform` takes them).

        Returns:
            int64 labels, or float64 targets mapped back by the card's target transform.

        Raises:
            ParameterError: invalid inputs, or an invalid preprocessing or target map in the card.
        """
        # lazy: torch (~1.5 s) only to build or run a model, not to read cards or check paths
        import torch

        Z = torch.as_tensor(self.transform(X), dtype=self.model.params()[0].dtype)
        pred = self.model.predict(Z).detach().cpu().numpy()
        if self.card.get("task") == "regression":
            try:
                return invert_target_transform(
                    self.card["preprocessing"].get("target"), pred.astype(np.float64)
                )
            except (ValueError, TypeError) as exc:
                raise ParameterError(
                    "model", str(self.path), f"has an invalid target map in its card ({exc})"
                ) from None
        return pred.astype(np.int64)


#: the first bytes of a .npz (a zip archive) and of a .npy file
_ZIP_MAGIC = b"PK\x03\x04"
_NPY_MAGIC = b"\x93NUMPY"


def read_inputs(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray | None]:
    """Raw features ``X`` (and labels ``y`` when present) to predict on: a ``.npz`` with ``X`` (or
    ``X_test`` / ``x_test``) and optionally ``y`` (``y_test``), or a ``.npy`` with ``X``; read
    without pickle.  Tables (CSV, Parquet) are read by :func:`read_table_inputs`; any other file
    is refused as such (never with a misleading "pickled" message)."""
    p = Path(path)
    name = str(p)
    if not p.is_file():
        raise ParameterError("dataset", name, "must be an existing FILE.npz or FILE.npy")
    try:
        with p.open("rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise ParameterError("dataset", name, f"cannot be read ({exc.strerror or exc})") from None
    if head.startswith(b"\x80"):
        raise ParameterError("dataset", name, "is a Python pickle (never unpickled): use FILE.npz")
    if not head.startswith((_ZIP_MAGIC, _NPY_MAGIC)):
        raise ParameterError(
            "dataset",
            name,
            "is neither a .npz nor a .npy file: predict reads FILE.npz / FILE.npy, or a CSV / "
            "Parquet table (FILE.csv, FILE.parquet) for a model trained on one",
        )
    try:
        # our own handle: np.load(path) leaves the file open when the zip is corrupt
        with p.open("rb") as fh:
            if p.suffix == ".npy":
                return np.load(fh, allow_pickle=False), None
            z = np.load(fh, allow_pickle=False)
            keys = set(z.files) if hasattr(z, "files") else set()
            for xk, yk in (("X", "y"), ("X_test", "y_test"), ("x_test", "y_test")):
                if xk in keys:
                    return z[xk], (z[yk] if yk in keys else None)
    except (
        ValueError,
        OSError,
        EOFError,
        zipfile.BadZipFile,
        KeyError,
        RuntimeError,
        TypeError,
        AttributeError,
    ) as exc:
        why = (
            "holds pickled data or object arrays (never unpickled)"
            if "pickle" in str(exc).lower()
            else f"is not a readable .npz/.npy file ({type(exc).__name__})"
        )
        raise ParameterError("dataset", name, why) from None
    raise ParameterError(
        "dataset", name, "a .npz file to predict on must hold an array X (or X_test / x_test)"
    )


def read_table_inputs(
    path: str | os.PathLike[str], released: ReleasedModel
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(X, y)`` of a CSV / Parquet file encoded by ``released``'s card (:meth:`ReleasedModel.
    encode`): categorical columns read verbatim as text, the columns found by name (extra
    columns ignored), y None when the file has no target column."""
    enc = released.table_encoding(str(path))
    frame = read_table(Path(path), text_columns=enc.text_columns)
    return released.encode(frame, name=str(path))


def _encoding_from_card(card: dict[str, Any], arch: dict[str, Any]) -> TableEncoding | None:
    """The card's table encoding (None when it has none), checked against the architecture,
    the feature names and the number of classes; raises ValueError on an invalid one."""
    pre = card["preprocessing"]
    if not isinstance(pre, dict):
        raise ValueError("preprocessing must be an object")  # noqa: TRY004 - a bad card
    if pre.get("encoding") is None:
        return None
    enc = TableEncoding.from_json(pre["encoding"])
    if enc.n_features != arch["n_features"]:
        raise ValueError(
            f"the encoding makes {enc.n_features} features, the architecture takes "
            f"{arch['n_features']}"
        )
    names = (card.get("features") or {}).get("names")
    if names is not None and names != enc.feature_names:
        raise ValueError("the encoding's features differ from features.names")
    if (enc.target.task == "regression") != (card.get("task") == "regression"):
        raise ValueError("the encoding's target does not match the task")
    if enc.target.class_names is not None:
        k = max(2, int(arch["n_outputs"]))
        n_classes = card.get("n_classes")
        if not isinstance(n_classes, int) or not 2 <= n_classes <= len(enc.target.class_names):
            raise ValueError("n_classes does not match the encoding's class names")
        if k > len(enc.target.class_names):
            raise ValueError("the model has more outputs than the encoding has class names")
    return enc


def load_model(path: str | os.PathLike[str]) -> ReleasedModel:
    """Load a model file written by :func:`save_model` (``li.load_model``), safely: JSON and
    safetensors only, never pickle.

    Args:
        path: the model file (``.safetensors``, its card embedded).

    Returns:
        A :class:`ReleasedModel`: the model, its card (the guarantee, the preprocessing to
        replay) and the path.

    Raises:
        ParameterError: a missing, truncated, corrupt, tampered or foreign file, or a card beside
            it that differs from the embedded card.
    """
    # lazy: torch (~1.5 s) only to build or run a model, not to read cards or check paths
    from safetensors.torch import load

    p = Path(path)

    def bad(why: str) -> ParameterError:
        return ParameterError("model", str(p), why)

    if not p.is_file():
        raise bad("does not exist or is not a regular file")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise bad(f"cannot be read ({exc.strerror or exc})") from None
    meta = safetensors_metadata(data, bad)
    if meta.get(_FORMAT_KEY) != MODEL_FORMAT or _CARD_KEY not in meta or _DIGEST_KEY not in meta:
        raise bad(f"is not a {MODEL_FORMAT} file (a checkpoint is not a released model)")
    try:
        card = jsonutil.loads(meta[_CARD_KEY])
    except (ValueError, RecursionError):
        raise bad("has a corrupt model card (not standard JSON)") from None
    if not isinstance(card, dict) or card.get("format") != CARD_FORMAT:
        raise bad(f"has no {CARD_FORMAT} model card")
    try:
        arch, n_par = _architecture_parameters(card.get("architecture"))
        steps = card["preprocessing"]["steps"]
        if not isinstance(steps, list):
            # - reported as ParameterError
            raise ValueError("preprocessing.steps must be a list")  # noqa: TRY004
        encoding = _encoding_from_card(card, arch)
    except (ValueError, TypeError, KeyError) as exc:
        raise bad(f"has an invalid model card ({exc})") from None
    itemsize = 8 if arch["dtype"] == "float64" else 4
    if n_par > MAX_PARAMETERS or n_par * itemsize > len(data):
        raise bad(f"declares {n_par} parameters, more than the file holds")
    try:
        tensors = load(data)
    except Exception:  # noqa: BLE001 - safetensors' own SafetensorError on any malformed file
        raise bad("is a truncated or corrupt safetensors file") from None
    if tensors_digest(tensors, meta[_CARD_KEY]) != meta[_DIGEST_KEY]:
        raise bad("is corrupt or was modified (its parameters and card do not match their SHA-256)")
    model = build_model(arch)
    try:
        if hasattr(model, "module"):
            model.module.load_state_dict(tensors, strict=True)
        else:
            model.load_state_dict(tensors, strict=True)
    except (RuntimeError, KeyError, TypeError) as exc:
        raise bad(
            f"parameters do not fit its architecture ({str(exc).splitlines()[0][:120]})"
        ) from None
    cp = card_path(p)
    if cp.exists():
        try:
            beside = jsonutil.loads(cp.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            raise ParameterError(
                "model",
                str(cp),
                "the model card beside the model file is unreadable or not standard JSON",
            ) from None
        if beside != card:
            raise ParameterError(
                "model",
                str(cp),
                "the model card beside the model file differs from the card "
                "embedded in it (tampered?)",
            )
    return ReleasedModel(model, card, p, encoding)


__all__ = [
    "CARD_FORMAT",
    "MODEL_FORMAT",
    "ReleasedModel",
    "apply_feature_transform",
    "architecture",
    "build_model",
    "card_path",
    "check_replay",
    "load_model",
    "model_card",
    "read_inputs",
    "read_table_inputs",
    "save_model",
]
