"""``lastiterate audit canary``: audit the TRAINER with canaries (final model only).

    lastiterate audit canary --dataset digits --model logreg --algorithm cgd --epochs 100 \\
        --batch-size 256 --lr 1.0 --noise-std 0.05 --clip 1 --feature-norm 0.7 --l2 0.005 \\
        [--canary {gradient,input}] [--runs R] [--seed S] [--alpha A] [--delta DELTA]
        [--jobs K] [--plot FILE.png] [--json]
    lastiterate audit canary --one-run [--canaries M] [--guesses K] <the same flags, no --runs>

Trains R models per world (with / without the canary) with the project's own trainer, scores the
final models and prints the accountant's claim for the trained run beside the certified lower
bounds (:mod:`lastiterate.audit.canary`).  ``--one-run`` trains ONE model with M canaries,
each inserted by a fair coin, and prints the Steinke-Nasr-Jagielski lower bound and its f-DP
refinement (Mahloujifar-Melis-Chaudhuri: GDP mu and epsilon) at confidence 1 - alpha (default
0.95) beside the claim (:mod:`lastiterate.audit.one_run`).  Exit status: 0
(ok / inconclusive), 1 (VIOLATION), 2 (invalid input, one line).  Registered as a scenario of
``lastiterate audit`` (:mod:`lastiterate.cli.audit` adds the flags below and dispatches here).

The models of a world are advanced together in chunks (vectorised over the models, each with its
own seed); ``--jobs K`` trains the chunks in K worker processes.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lastiterate.cli.audit_common import (
    AuditOptions,
    audit_options,
    load_preprocessed,
    plot_path,
    refuse_derived_flags,
    refuse_scenario_flags,
    refuse_simulation_flags,
    report_audit,
    require_training_flags,
    trainer_spec,
)
from lastiterate.cli.common import UsageError, finite_float
from lastiterate.cli.train import add_table_flags
from lastiterate.errors import NotApplicable, ParameterError, check_in_range, check_int_in_range

#: models per world when --runs is not given
DEFAULT_RUNS = 200
#: canaries of a one-run audit when --canaries is not given
DEFAULT_CANARIES = 1000
#: noisy steps over all models (2 x runs x T) above which the audit is refused (hours of training)
MAX_TOTAL_STEPS = 5e7

#: flags of the canary scenario (dest names); refused by the other scenarios
CANARY_FLAGS = (
    "dataset",
    "target",
    "categories",
    "classes",
    "model",
    "canary",
    "runs",
    "l2",
    "feature_norm",
    "intercept",
    "scaling",
    "feature_range",
    "target_range",
    "test_size",
    "split_seed",
    "one_run",
    "canaries",
    "guesses",
    "jobs",
)


def add_canary_flags(p: argparse.ArgumentParser) -> None:
    """The flags of the canary scenario (the data, model and training flags of ``train``)."""
    c = p.add_argument_group(
        "canary scenario (audit the trainer; with the run flags --algorithm, --sampling, "
        "--batch-size, --epochs/--steps, --lr, --noise-std/--noise-multiplier, --clip, --diameter)"
    )
    c.add_argument(
        "--dataset",
        help="canary: digits, breast-cancer, iris, wine, diabetes, FILE.npz, FILE.csv or "
        "FILE.parquet with --target, or an MNIST directory",
    )
    add_table_flags(c, prefix="canary, mia: ")
    c.add_argument(
        "--model",
        choices=("logreg", "linreg", "mlp"),
        help="canary: logreg (binary / multinomial logistic) or linreg (least squares); "
        "mlp: mia only",
    )
    c.add_argument(
        "--canary",
        choices=("gradient", "input"),
        help="canary: gradient (a crafted row on a feature no other row uses; default) or input "
        "(a held-out point with a wrong label)",
    )
    c.add_argument(
        "--runs", type=int, help=f"canary: models trained per world (default {DEFAULT_RUNS})"
    )
    c.add_argument(
        "--jobs",
        type=int,
        help="canary: worker processes training the chunks of models in parallel (default 1: "
        "this process; every chunk is vectorised over its models either way)",
    )
    c.add_argument("--l2", type=finite_float, help="canary: L2 regularisation lambda (default 0)")
    c.add_argument(
        "--feature-norm", type=finite_float, help="canary: clip every feature row to this L2 norm R"
    )
    c.add_argument(
        "--intercept", action="store_true", default=None, help="canary: fit an intercept"
    )
    c.add_argument(
        "--scaling",
        choices=("auto", "public-range", "clip-only", "data-public"),
        help="canary: feature scaling as in train (default auto; private is not audited here)",
    )
    c.add_argument("--feature-range", help="canary: declared public feature range LO,HI")
    c.add_argument(
        "--target-range", help="canary: declared public range LO,HI of regression targets"
    )
    c.add_argument(
        "--test-size",
        type=finite_float,
        help="canary: test fraction when the data have no test set (default 0.2)",
    )
    c.add_argument(
        "--split-seed", type=int, help="canary: seed of the train/test split (default 0)"
    )
    c.add_argument(
        "--one-run",
        action="store_true",
        default=None,
        help="canary: ONE training run with --canaries M canaries, each inserted by a fair coin "
        "(Steinke-Nasr-Jagielski 2023, and its f-DP refinement, Mahloujifar-Melis-Chaudhuri "
        "2024); confidence 1 - alpha (default 0.95 here)",
    )
    c.add_argument(
        "--canaries",
        type=int,
        help=f"canary --one-run: number of canaries M (default {DEFAULT_CANARIES})",
    )
    c.add_argument(
        "--guesses",
        type=int,
        help="canary --one-run: guess + for the K highest and - for the K lowest scores "
        "(default: try about 1%%..50%% of M, Bonferroni over the sizes)",
    )


def refuse_canary_flags(args: argparse.Namespace) -> None:
    """The other scenarios simulate chains: the canary flags do not apply to them."""
    refuse_scenario_flags(args, CANARY_FLAGS, "canary")


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse the flags the canary scenario does not read; require those it needs."""
    refuse_derived_flags(
        args,
        "canary",
        "the trainer derives the run (n, geometry) from the data, and --runs sets the number of "
        "models",
    )
    refuse_simulation_flags(
        args,
        "canary",
        adjacency_reason="the canary audit swaps one example: replace only",
        pair_hint=" (use --canary)",
        scale_hint=" (use --noise-scale)",
    )
    require_training_flags(args, "canary")
    if args.model == "mlp":
        raise NotApplicable(
            "--model mlp is not audited by canaries: only a linear model (logreg, linreg) has a "
            "parameter direction that no other example touches"
        )


def cmd_audit_canary(args: argparse.Namespace) -> int:
    """Run the canary audit the flags describe; print the claim, lower bounds and verdict."""
    _check_flags(args)
    # lazy: the audit package imports numpy and scipy, not on the CLI's start-up path
    from lastiterate.audit.canary import (
        MAX_JOBS,
        MAX_RUNS,
        audit_canary,
        gradient_canary,
        input_canary,
    )

    runs = (
        DEFAULT_RUNS if args.runs is None else check_int_in_range("runs", args.runs, 10, MAX_RUNS)
    )
    jobs = 1 if args.jobs is None else check_int_in_range("jobs", args.jobs, 1, MAX_JOBS)
    opts = audit_options(args, alpha_default=1e-3)
    kind = args.canary or "gradient"
    plot = plot_path(args)
    data, family, n_out = _load(args, opts)
    if args.one_run:
        if plot is not None:
            raise UsageError("--plot does not apply with --one-run (one model: no tradeoff points)")
        if args.jobs is not None:
            raise UsageError("--jobs does not apply with --one-run (one model)")
        return _cmd_one_run(args, data, family, n_out, kind, opts)
    for dest in ("canaries", "guesses"):
        if getattr(args, dest) is not None:
            raise UsageError(f"--{dest} only applies with --one-run")

    if kind == "gradient":
        pair = gradient_canary(
            data.X_train,
            data.y_train,
            family=family,
            n_outputs=n_out,
            feature_norm=args.feature_norm,
        )
    else:
        if len(data.y_test) == 0:
            raise ParameterError(
                "canary", "input", f"needs a held-out row; {data.name} has no test rows"
            )
        pair = input_canary(
            data.X_train,
            data.y_train,
            data.X_test[0],
            data.y_test[0],
            family=family,
            n_outputs=n_out,
        )
    spec = trainer_spec(args)
    planned, _, _ = spec.method(pair.new_model(spec.intercept), 0).plan(
        pair.n, epochs=args.epochs, steps=args.steps
    )
    if 2 * runs * planned.T > MAX_TOTAL_STEPS:
        raise ParameterError(
            "runs",
            runs,
            f"2 x runs x steps = {2 * runs * planned.T:.3g} noisy steps exceeds "
            f"{MAX_TOTAL_STEPS:.0e} (hours of training); lower --runs or --epochs",
        )
    progress = (not args.json) and sys.stderr.isatty()
    res = audit_canary(
        pair,
        spec,
        runs,
        **opts.audit_kwargs(),
        progress=progress,
        jobs=jobs,
    )
    return report_audit(
        res,
        args,
        data,
        f"Dataset {data.name} (n={pair.n} with the canary row, d={pair.n_features}), "
        f"{args.model} ({family})",
        model={"kind": args.model, "family": family},
        plot=plot,
    )


def _load(args: argparse.Namespace, opts: AuditOptions) -> tuple[Any, str, int]:
    """The preprocessed data set of the flags, the GLM family and its number of outputs."""
    data = load_preprocessed(args, opts)
    if args.model == "logreg":
        if data.task != "classification":
            raise ParameterError(
                "model",
                "logreg",
                f"needs class labels; {data.name} is a regression dataset (use linreg)",
            )
        k = int(data.n_classes or 2)
        family, n_out = ("binary-logistic", 1) if k == 2 else ("multinomial-logistic", k)
    else:
        if data.task != "regression":
            raise ParameterError(
                "model",
                "linreg",
                f"needs real-valued targets; {data.name} is a classification dataset",
            )
        family, n_out = "least-squares", 1
    return data, family, n_out


def _cmd_one_run(
    args: argparse.Namespace,
    data: Any,
    family: str,
    n_out: int,
    kind: str,
    opts: AuditOptions,
) -> int:
    """``audit canary --one-run``: ONE training run with M canaries (Steinke-Nasr-Jagielski and
    the f-DP refinement of Mahloujifar-Melis-Chaudhuri, both reported)."""
    # lazy: the audit package imports numpy and scipy, not on the CLI's start-up path
    from lastiterate.audit.one_run import (
        MAX_CANARIES,
        audit_one_run,
        one_run_gradient_canaries,
        one_run_input_canaries,
    )

    if args.runs is not None:
        raise UsageError("--runs does not apply with --one-run (one model; use --canaries)")
    m = (
        DEFAULT_CANARIES
        if args.canaries is None
        else check_int_in_range("canaries", args.canaries, 2, MAX_CANARIES)
    )
    # one run reports 95% confidence by default (the many-run audits 1 - 1e-3); alpha then
    # shrinks to its Bonferroni share per guess size
    alpha = (
        0.05
        if args.alpha is None
        else check_in_range("alpha", args.alpha, 1e-12, 1.0, high_open=True)
    )
    sizes = None
    if args.guesses is not None:
        k = check_int_in_range("guesses", args.guesses, 1, m // 2)
        sizes = [k]
    if kind == "gradient":
        can = one_run_gradient_canaries(
            data.X_train,
            data.y_train,
            m,
            family=family,
            n_outputs=n_out,
            feature_norm=args.feature_norm,
        )
    else:
        if len(data.y_test) < m:
            raise ParameterError(
                "canaries",
                m,
                f"input canaries are held-out rows: {data.name} has {len(data.y_test)} test rows",
            )
        can = one_run_input_canaries(
            data.X_train,
            data.y_train,
            data.X_test[:m],
            data.y_test[:m],
            family=family,
            n_outputs=n_out,
        )
    spec = trainer_spec(args)
    planned, _, _ = spec.method(can_model(can, spec), 0).plan(
        can.n, epochs=args.epochs, steps=args.steps
    )
    if planned.T * can.n * can.n_features > MAX_TOTAL_STEPS * 1e3:
        raise ParameterError(
            "canaries", m, "steps x rows x features exceeds 5e10: lower --canaries or --epochs"
        )
    res = audit_one_run(
        can,
        spec,
        seed=opts.seed,
        alpha=alpha,
        delta=opts.delta,
        sizes=sizes,
        bounds=args.bound,
        noise_scale=opts.noise_scale,
    )
    return report_audit(
        res,
        args,
        data,
        f"Dataset {data.name} (n={can.n} with the canary rows), {args.model} ({family})",
        model={"kind": args.model, "family": family},
    )


def can_model(can: Any, spec: Any) -> Any:
    """A fresh GLM for the one-run canaries (used to plan the run)."""
    # lazy: torch is not on the CLI's start-up path
    import torch

    from lastiterate.train.models import GLM

    return GLM(
        can.n_features, can.n_outputs, can.family, intercept=spec.intercept, dtype=torch.float64
    )
