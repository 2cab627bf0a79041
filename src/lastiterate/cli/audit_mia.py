"""``lastiterate audit mia``: membership inference against models trained by the trainer.

    lastiterate audit mia --dataset digits --model logreg --algorithm gd --epochs 50 --lr 1 \\
        --noise-std 0.05 --clip 1 --feature-norm 1 [--shadows K] [--members M] [--hidden 64] \\
        [--seed S] [--alpha A] [--delta DELTA] [--plot FILE.png] [--json]

Draws M pairs of rows of the dataset; a secret fair coin per pair picks the one the target model
trains on (its members; the other row of each pair is a non-member), and K shadow models train
the same way on disjoint rows, with the project's own trainer and the flags of ``train``; runs the
loss-threshold, shadow-model and offline LiRA attacks on the FINAL target model, and does the same
for a non-private baseline (noise x 0).  Prints the claim for the trained run beside the attacks'
AUC, TPR at low FPR, the RIGOROUS one-run lower bounds over the pairs (Steinke, Nasr, Jagielski
2023, and the f-DP refinement), which decide the verdict, and the heuristic Clopper-Pearson bounds
(informational) (:mod:`lastiterate.audit.mia`).  Exit status: 0 (ok / inconclusive), 1
(VIOLATION), 2 (invalid input, one line).  A scenario of ``lastiterate audit``
(:mod:`lastiterate.cli.audit` dispatches here).
"""

from __future__ import annotations

import argparse
import sys

from lastiterate.cli import audit_common
from lastiterate.cli.common import UsageError
from lastiterate.errors import NotApplicable, ParameterError, check_int_in_range

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
NOT_MIA_FLAGS = ("canary", "runs", "target_range", "one_run", "canaries", "guesses", "jobs")


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
    audit_common.refuse_scenario_flags(args, MIA_FLAGS, "mia")


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
    """Refuse the flags the mia scenario does not read; require those it needs."""
    audit_common.refuse_derived_flags(
        args, "mia", "the trainer derives the run from the data (--members sets n)"
    )
    for dest in NOT_MIA_FLAGS:
        if getattr(args, dest, None) is not None:
            raise UsageError(
                f"--{dest.replace('_', '-')} does not apply to the mia scenario "
                "(--shadows and --members set its work)"
            )
    audit_common.refuse_simulation_flags(
        args, "mia", adjacency_reason="membership inference swaps examples: replace only"
    )
    audit_common.require_training_flags(args, "mia")
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
    opts = audit_common.audit_options(args, alpha_default=1e-3)
    hidden = _hidden(args.hidden)
    plot = audit_common.plot_path(args)

    # lazy: numpy and the audit package (scipy) are not on the CLI's start-up path
    import numpy as np

    from lastiterate.audit.mia import ModelSpec, audit_mia

    data = audit_common.load_preprocessed(args, opts)
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
        init_seed=opts.split_seed,
    )
    spec = audit_common.trainer_spec(args)
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
        **opts.audit_kwargs(),
        progress=progress,
    )
    return audit_common.report_audit(
        res,
        args,
        data,
        f"Dataset {data.name} ({X.shape[0]} rows, d={X.shape[1]}, {model_spec.n_classes} "
        f"classes), {args.model} ({model_spec.family})",
        plot=plot,
    )
