"""``lastiterate calibrate``: the smallest noise, the most epochs or the extreme batch size
within an (epsilon, delta) budget."""

from __future__ import annotations

import argparse
from typing import Any

from lastiterate.cli.common import (
    ProgressBar,
    UsageError,
    add_run_flags,
    apply_config,
    finite_float,
    print_json,
    run_from_args,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate", help="smallest noise, most epochs or extreme batch size within a budget"
    )
    add_run_flags(p, noise=False)
    p.add_argument("--epsilon", type=finite_float, required=True, help="target epsilon")
    p.add_argument(
        "--solve",
        choices=("noise", "epochs", "batch-size"),
        required=True,
        help="noise: the smallest noise std for the given steps; epochs: the most "
        "epochs for the given noise; batch-size: at the given epochs (or those --steps make at "
        "--batch-size; the steps then change with b), "
        "from --batch-size as the start, the LARGEST batch size when --noise-multiplier is "
        "given (it stays fixed, sigma = z*C/b: a larger batch costs more) or the SMALLEST when "
        "--noise-std is given (it stays fixed: a larger batch costs less); not for gd",
    )
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    # lazy: the accountant loads numpy/scipy and every bound (CLI start-up, --help)
    from lastiterate.accountant import calibrate_batch_size, calibrate_epochs, calibrate_noise

    apply_config(args)
    delta = args.delta if args.delta is not None else 1e-5
    bar = ProgressBar("calibrating", quiet=args.json)
    try:
        if args.solve == "noise":
            if args.steps is None and args.epochs is None:
                raise UsageError("--steps or --epochs is required with --solve noise")
            run = run_from_args(args, noise_std=1.0, noise_multiplier=None)
            cal = calibrate_noise(
                run, epsilon=args.epsilon, delta=delta, bounds=args.bound, progress=bar.step
            )
        elif args.solve == "epochs":
            if args.noise_std is None and args.noise_multiplier is None:
                raise UsageError(
                    "--noise-std or --noise-multiplier is required with --solve epochs"
                )
            run = run_from_args(args, epochs=1, steps=None)
            cal = calibrate_epochs(
                run, epsilon=args.epsilon, delta=delta, bounds=args.bound, progress=bar.step
            )
        else:
            if args.noise_std is None and args.noise_multiplier is None:
                raise UsageError(
                    "--noise-std or --noise-multiplier is required with --solve batch-size"
                )
            if args.steps is None and args.epochs is None:
                raise UsageError("--steps or --epochs is required with --solve batch-size")
            if args.algorithm != "gd" and args.batch_size is None:
                raise UsageError(
                    "--batch-size is required with --solve batch-size (the search's start)"
                )
            run = run_from_args(args)
            cal = calibrate_batch_size(
                run, epsilon=args.epsilon, delta=delta, bounds=args.bound, progress=bar.step
            )
    finally:
        bar.close()
    out = cal.to_json()
    if args.json:
        keys: tuple[str, ...] = ("noise_std", "noise_multiplier", "epochs", "best")
        if args.solve == "batch-size":
            keys = ("batch_size", "steps", *keys)
            out["steps"] = cal.report.run.T
        print_json({k: out[k] for k in keys})
        return 0
    best = out["best"]
    if args.solve == "batch-size":
        fixed = (
            f"noise multiplier {out['noise_multiplier']:.6g} fixed: the largest"
            if run.noise_multiplier is not None
            else f"noise std {out['noise_std']:.6g} fixed: the smallest"
        )
        print(
            f"Batch size within ({args.epsilon:g}, {delta:g})-DP ({fixed}): "
            f"b = {out['batch_size']} ({cal.report.run.T} steps, "
            f"{out['epochs']:g} epochs, sigma = {out['noise_std']:.6g})"
        )
    elif args.solve == "noise":
        z = (
            f" (noise multiplier {out['noise_multiplier']:.6g})"
            if out["noise_multiplier"] is not None
            else ""
        )
        print(
            f"Smallest noise std meeting ({args.epsilon:g}, {delta:g})-DP: sigma = "
            f"{out['noise_std']:.6g}{z}"
        )
    else:
        epochs = (
            "unlimited (a convergent bound stays within the budget)"
            if out["epochs"] is None
            else f"{out['epochs']:g}"
        )
        print(f"Largest number of epochs within ({args.epsilon:g}, {delta:g})-DP: {epochs}")
    if best.get("for_any_number_of_epochs"):
        print(
            f"Guarantee for any number of epochs: {best['bound']} ({best['theorem']}), "
            f"epsilon = {best['epsilon']:.6g}"
        )
    else:
        print(
            f"Best bound there: {best['bound']} ({best['theorem']}), "
            f"epsilon = {best['epsilon']:.6g}"
        )
    return 0
