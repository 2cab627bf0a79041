"""``lastiterate audit mia``: membership inference against models trained by the trainer.

    lastiterate audit mia --dataset digits --model logreg --algorithm gd --epochs 50 --lr 1 \\
        --noise-std 0.05 --clip 1 --feature-norm 1 [--shadows K] [--members M] [--hidden 64] \\
        [--seed S] [--alpha A] [--delta DELTA] [--plot FILE.png] [--json]

Trains a target model on M rows of the dataset (its members; as many other rows are its
non-members) and K shadow models the same way on disjoint rows, with the project's own trainer and
the flags of ``train``; runs the loss-threshold, shadow-model and offline LiRA attacks on the
FINAL target model, and does the same for a non-private baseline (noise x 0).  Prints the claim for
the trained run beside the attacks' AUC, TPR at low FPR and lower bounds, with a verdict
(:mod:`lastiterate.audit.mia`).  Exit status: 0 (ok / inconclusive), 1 (VIOLATION), 2 (invalid
input, one line).  A scenario of ``lastiterate audit`` (:mod:`lastiterate.cli.audit` dispatches
here).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lastiterate.cli.common import UsageError, print_json
from lastiterate.errors import (
    NotApplicable,
    ParameterError,
    check_in_range,
    check_int_in_range,
    check_scale,
)

#: shadow models per world when --shadows is not given, and their range (the library's
#: ``lastiterate.audit.mia.MIN_SHADOWS`` / ``MAX_SHADOWS``, repeated here so that ``--help`` does
#: not import numpy; a test checks they agree)
DEFAULT_SHADOWS = 8
MIN_SHADOWS, MAX_SHADOWS = 2, 64
#: noisy steps over all models (2 x (1 + shadows) x T) above which the audit is refused
MAX_TOTAL_STEPS = 2e6

#: flags of the mia scenario only (dest names); refused by the other scenarios
MIA_FLAGS = ("shadows", "members", "hidden", "activation")
#: flags of the canary scenario that do not apply here
NOT_MIA_FLAGS = ("canary", "runs", "target_range")
#: run flags of ``audit`` that the trainer derives itself
DERIVED_FLAGS = (
    "n",
    "sensitivity",
    "strong_convexity",
    "smoothness",
    "convex",
    "contraction",
    "samples",
    "position",
)


def add_mia_flags(p: argparse.ArgumentParser) -> None:
    """The flags of the mia scenario (with the canary group's data and model flags)."""
    g = p.add_argument_group(
        "mia scenario (membership inference; with --dataset, --model logreg/mlp and the run and "
        "training flags)"
    )
    g.add_argument(
        "--shadows",
        type=int,
        help=f"mia: shadow models per world, {MIN_SHADOWS} to {MAX_SHADOWS} (default "
        f"{DEFAULT_SHADOWS}); the private and the baseline world each train 1 + this many",
    )
    g.add_argument(
        "--members",
        type=int,
        help="mia: training rows of each model (default a quarter of the rows, at most 1000); "
        "as many rows are the target's non-members, the rest the shadows' data",
    )
    g.add_argument("--hidden", help="mia: mlp hidden widths, comma-separated (default 64)")
    g.add_argument(
        "--activation", choices=("tanh", "relu", "sigmoid"), help="mia: mlp activation (tanh)"
    )


def refuse_mia_flags(args: argparse.Namespace) -> None:
    """The other scenarios have no shadow models."""
    for dest in MIA_FLAGS:
        if getattr(args, dest, None) is not None:
            raise UsageError(
                f"--{dest.replace('_', '-')} only applies to the mia scenario (audit mia ...)"
            )


def _hidden(text: str | None) -> tuple[int, ...]:
    if text is None:
        return (64,)
    try:
        widths = tuple(int(v) for v in text.split(","))
    except ValueError:
        widths = ()
    if not widths or any(not 1 <= w <= 4096 for w in widths):
        raise ParameterError("hidden", text, "must be comma-separated integers in [1, 4096]")
    return widths


def _check_flags(args: argparse.Namespace) -> None:
    for dest in DERIVED_FLAGS:
        if getattr(args, dest, None) is not None:
            raise UsageError(
                f"--{dest.replace('_', '-')} does not apply to the mia scenario: the trainer "
                "derives the run from the data (--members sets n)"
            )
    for dest in NOT_MIA_FLAGS:
        if getattr(args, dest, None) is not None:
            raise UsageError(
                f"--{dest.replace('_', '-')} does not apply to the mia scenario "
                "(--shadows and --members set its work)"
            )
    if args.pair != "auto":
        raise UsageError("--pair does not apply to the mia scenario")
    if args.sensitivity_scale != 1.0:
        raise UsageError("--sensitivity-scale does not apply to the mia scenario")
    if args.adjacency not in (None, "replace"):
        raise ParameterError(
            "adjacency", args.adjacency, "membership inference swaps examples: replace only"
        )
    for dest in ("dataset", "model", "algorithm", "lr", "clip"):
        if getattr(args, dest) is None:
            raise UsageError(f"--{dest.replace('_', '-')} is required with the mia scenario")
    if args.epochs is None and args.steps is None:
        raise UsageError("one of --epochs or --steps is required with the mia scenario")
    if args.noise_std is None and args.noise_multiplier is None:
        raise UsageError(
            "one of --noise-std or --noise-multiplier is required with the mia scenario"
        )
    if args.algorithm == "sgd" and args.sampling is None:
        raise UsageError(
            "--sampling is required with --algorithm sgd: one of poisson, uniform, shuffle"
        )
    if args.algorithm != "sgd" and args.sampling is not None:
        raise UsageError(f"--sampling only applies to --algorithm sgd, not {args.algorithm}")
    if args.algorithm != "gd" and args.batch_size is None:
        raise UsageError(f"--batch-size is required with --algorithm {args.algorithm}")
    if args.model == "linreg":
        raise NotApplicable(
            "--model linreg is not audited by membership inference: the shadow attack is per "
            "class (use logreg or mlp on a classification dataset)"
        )
    if args.model != "mlp" and (args.hidden is not None or args.activation is not None):
        raise UsageError("--hidden and --activation only apply to --model mlp")


def cmd_audit_mia(args: argparse.Namespace) -> int:
    """Run the membership-inference audit the flags describe."""
    _check_flags(args)
    shadows = (
        DEFAULT_SHADOWS
        if args.shadows is None
        else check_int_in_range("shadows", args.shadows, MIN_SHADOWS, MAX_SHADOWS)
    )
    alpha = check_in_range("alpha", args.alpha, 1e-12, 1.0, high_open=True)
    delta = (
        1e-5
        if args.delta is None
        else check_in_range("delta", args.delta, 0.0, 1.0, low_open=True, high_open=True)
    )
    noise_scale = check_scale("noise_scale", args.noise_scale)
    seed = check_int_in_range("seed", args.seed, 0, 2**32 - 1)
    split_seed = (
        0
        if args.split_seed is None
        else check_int_in_range("split_seed", args.split_seed, 0, 2**32 - 1)
    )
    test_size = (
        0.2
        if args.test_size is None
        else check_in_range("test_size", args.test_size, 0.0, 1.0, low_open=True, high_open=True)
    )
    hidden = _hidden(args.hidden)
    plot = None
    if args.plot is not None:
        from lastiterate.plotting import check_png_path

        plot = check_png_path(args.plot)

    import numpy as np

    from lastiterate.audit.canary import TrainerSpec
    from lastiterate.audit.mia import ModelSpec, audit_mia
    from lastiterate.train import preprocessing as pp
    from lastiterate.train.data import load_dataset

    raw = load_dataset(args.dataset, seed=split_seed, test_size=test_size, standardize=False)
    data, _prep = pp.preprocess(
        raw,
        scaling=args.scaling or "auto",
        feature_range=args.feature_range,
        feature_norm=args.feature_norm,
    )
    if data.task != "classification":
        raise ParameterError(
            "dataset",
            args.dataset,
            f"needs class labels for membership inference; {data.name} is a regression dataset",
        )
    X = np.concatenate([data.X_train, data.X_test]) if len(data.y_test) else data.X_train
    y = np.concatenate([data.y_train, data.y_test]) if len(data.y_test) else data.y_train
    model_spec = ModelSpec(
        kind=args.model,
        n_features=int(X.shape[1]),
        n_classes=int(data.n_classes or 2),
        hidden=hidden,
        activation=args.activation or "tanh",
        intercept=bool(args.intercept),
        init_seed=split_seed,
    )
    spec = TrainerSpec(
        algorithm=args.algorithm,
        lr=args.lr,
        clip=args.clip,
        noise_std=args.noise_std,
        noise_multiplier=args.noise_multiplier,
        batch_size=args.batch_size,
        sampling=args.sampling,
        l2=0.0 if args.l2 is None else args.l2,
        diameter=args.diameter,
        feature_norm=args.feature_norm,
        epochs=args.epochs,
        steps=args.steps,
        intercept=bool(args.intercept),
    )
    members = args.members
    if members is None:
        members = max(10, min(1000, X.shape[0] // 4))
    members = check_int_in_range("members", members, 10, max(10, (X.shape[0] - 1) // 3))
    planned, _, _ = spec.method(model_spec.new(), 0).plan(
        members, epochs=args.epochs, steps=args.steps
    )
    total = 2 * (1 + shadows) * planned.T
    if total > MAX_TOTAL_STEPS:
        raise ParameterError(
            "shadows",
            shadows,
            f"2 x (1 + shadows) x steps = {total:.3g} noisy steps exceeds {MAX_TOTAL_STEPS:.0e} "
            "(hours of training); lower --shadows, --epochs or --steps",
        )
    progress = (not args.json) and sys.stderr.isatty()
    res = audit_mia(
        X,
        y,
        model_spec,
        spec,
        members=members,
        shadows=shadows,
        seed=seed,
        alpha=alpha,
        delta=delta,
        bounds=args.bound,
        noise_scale=noise_scale,
        progress=progress,
    )
    if plot is not None:
        from lastiterate.plotting import plot_mia_audit

        plot_mia_audit(res, plot)
    if args.json:
        out: dict[str, Any] = res.to_json()
        out["dataset"] = data.describe()
        if plot is not None:
            out["plot"] = str(plot)
        print_json(out)
    else:
        print(
            f"Dataset {data.name} ({X.shape[0]} rows, d={X.shape[1]}, {model_spec.n_classes} "
            f"classes), {args.model} ({model_spec.family})"
        )
        print(res.format())
        if plot is not None:
            print(f"Plot written to {plot}")
    return 1 if res.verdict == "VIOLATION" else 0
