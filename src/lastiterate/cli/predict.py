"""``lastiterate predict``: apply a released model file to new data.

Registered by :func:`lastiterate.cli.build_parser`.  Reads the model with
:func:`lastiterate.train.model_file.load_model` (safetensors + JSON, never pickle) and replays the
preprocessing stored in its card on the raw features of ``--dataset``: for a CSV / Parquet file,
first the card's table encoding (columns by name, one-hot categories in the card's order; a
missing column, a missing value, a non-number in a numeric column or a category outside the
card's list is refused with the column named), then its numeric steps.  Class names are printed
where the card has them.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lastiterate.cli.common import print_json


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "predict",
        help="apply a model file written by 'train --out' to new data",
        description="Load MODEL.safetensors (and check its model card), replay the "
        "card's preprocessing on the raw features of --dataset and print one prediction "
        "per row (class label or target).",
    )
    p.add_argument(
        "--model",
        required=True,
        metavar="MODEL.safetensors",
        help="model file written by 'lastiterate train --out'",
    )
    p.add_argument(
        "--dataset",
        required=True,
        metavar="FILE",
        help="FILE.npz with an array X (or X_test / x_test) of raw features, optionally y (then "
        "accuracy / MSE is reported), FILE.npy holding X, or -- for a model trained on a "
        "table -- FILE.csv / FILE.parquet with the training table's columns (any order, extra "
        "columns ignored; the target column, if present, gives the accuracy)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (predictions, guarantee, model card path)",
    )
    p.set_defaults(func=run_predict)


def run_predict(args: argparse.Namespace) -> int:
    # lazy: model files need torch (the train extra; seconds to import)
    from lastiterate.train.model_file import (
        card_path,
        load_model,
        read_inputs,
        read_table_inputs,
    )
    from lastiterate.train.tabular import is_table_path

    released = load_model(args.model)
    if is_table_path(args.dataset):
        X, y = read_table_inputs(args.dataset, released)
    else:
        X, y = read_inputs(args.dataset)
    labels = released.predict_labels(X)
    quality = released.score(labels, y) if y is not None else None
    pred = released.label_names(labels)
    if args.json:
        record = {
            "model": args.model,
            "card": str(card_path(args.model)),
            "n": len(pred),
            "task": released.card.get("task"),
            "predictions": pred.tolist(),
            "quality": quality,
            "guarantee": released.guarantee,
        }
        if released.class_names is not None and record["task"] != "regression":
            record["labels"] = labels.tolist()
            record["class_names"] = released.class_names
        print_json(record)
        return 0
    out = sys.stdout
    out.write("\n".join(str(v) for v in pred.tolist()) + ("\n" if len(pred) else ""))
    score = (
        ""
        if quality is None
        else "; " + ", ".join(f"{k} {v:.4g}" for k, v in quality.items()) + " against y"
    )
    print(
        f"{len(pred)} predictions{score}; {released.guarantee.get('statement', '')}",
        file=sys.stderr,
    )
    return 0
