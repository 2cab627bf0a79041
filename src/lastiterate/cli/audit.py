"""``lastiterate audit``: Monte-Carlo audit of every bound the accountant reports for a run.

    lastiterate audit {auto,quadratic,linear} <the account run flags> [--samples N] [--seed S]
        [--alpha A] [--delta DELTA] [--position J] [--pair {auto,difference,antipodal}]
        [--bound ID ...] [--json]
    lastiterate audit canary --dataset D --model logreg <train flags> [--canary {gradient,input}]
        [--runs R] [--seed S] [--alpha A] [--delta DELTA] [--noise-scale F] [--plot FILE.png]
        [--json]
    lastiterate audit canary --one-run [--canaries M] [--guesses K] --dataset D --model logreg ...
    lastiterate audit mia --dataset D --model {logreg,mlp} <train flags> [--shadows K]
        [--members M] [--seed S] [--alpha A] [--delta DELTA] [--plot FILE.png] [--json]

Simulates N chains per world on the worst-case pair for the run (quadratic with the extremal
curvature, or a linear loss; with ``--diameter`` the linear pair is the projected random walk),
certifies mu and epsilon lower bounds at confidence 1 - alpha, and compares them (and the exact
reference value, where known) with every guarantee.  The ``canary`` scenario audits the trainer
itself instead: it trains models with and without a canary and compares the final models
(:mod:`lastiterate.cli.audit_canary`, :mod:`lastiterate.audit.canary`); with ``--one-run`` it
trains ONE model with M canaries inserted by fair coins (:mod:`lastiterate.audit.one_run`); the
``mia`` scenario runs membership-inference attacks on a trained model
(:mod:`lastiterate.cli.audit_mia`, :mod:`lastiterate.audit.mia`).  Exit status: 0 (ok /
inconclusive), 1 (VIOLATION), 2 (invalid input).
"""

from __future__ import annotations

import argparse
from typing import Any

from lastiterate.cli.audit_canary import add_canary_flags, cmd_audit_canary, refuse_canary_flags
from lastiterate.cli.audit_common import MAX_SEED
from lastiterate.cli.audit_mia import add_mia_flags, cmd_audit_mia, refuse_mia_flags
from lastiterate.cli.common import (
    UsageError,
    add_run_flags,
    apply_config,
    print_json,
    run_from_args,
)
from lastiterate.errors import (
    ParameterError,
    check_in_range,
    check_int_in_range,
    check_positive_int,
    check_scale,
)

SCENARIOS = ("auto", "quadratic", "linear", "canary", "mia")
#: chains per world when --samples is not given
DEFAULT_SAMPLES = 200_000
#: simulated work per world (chains x steps) above which the audit is refused: about 5e9 chain-steps
#: take several minutes on one core, and the user chose both factors
MAX_CHAIN_STEPS = 5e9


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "audit", help="Monte-Carlo audit of the accountant's claims for a run"
    )
    p.add_argument(
        "scenario",
        choices=SCENARIOS,
        help="loss pair: quadratic, linear (projected walk with --diameter), or auto; "
        "canary: train models with and without a canary and audit the final models; "
        "mia: membership inference against a trained model",
    )
    add_run_flags(p, noise=False)
    a = p.add_argument_group("audit")
    a.add_argument("--samples", type=int, help=f"chains per world (default {DEFAULT_SAMPLES})")
    a.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the simulated chains or audit models (default 0): an audit is a "
        "reproducible experiment whose models are never released",
    )
    a.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="false-alarm probability of the lower bounds (default 1e-3; 0.05 with canary "
        "--one-run)",
    )
    a.add_argument(
        "--position", type=int, help="cgd: batch index of the differing example (default the last)"
    )
    a.add_argument(
        "--pair",
        choices=("auto", "difference", "antipodal"),
        default="auto",
        help="differing gradients: g=0 vs g'=-L u (difference), +-L/2 u (antipodal, clipped); "
        "auto = antipodal with --clip, difference otherwise",
    )
    a.add_argument(
        "--noise-scale",
        type=float,
        default=1.0,
        help="mutation testing: simulate (canary: train with) noise_std * this factor",
    )
    a.add_argument(
        "--sensitivity-scale",
        type=float,
        default=1.0,
        help="mutation testing: simulate sensitivity * this factor",
    )
    a.add_argument(
        "--plot",
        metavar="FILE.png",
        help="canary, mia: write the empirical tradeoff points (FPR, FNR with intervals) against "
        "the claimed tradeoff curve to this PNG",
    )
    add_canary_flags(p)
    add_mia_flags(p)
    p.set_defaults(func=_cmd_audit)


def _cmd_audit(args: argparse.Namespace) -> int:
    apply_config(args)
    if args.scenario == "canary":
        refuse_mia_flags(args)
        return cmd_audit_canary(args)
    if args.scenario == "mia":
        return cmd_audit_mia(args)
    refuse_canary_flags(args)
    refuse_mia_flags(args)
    if args.plot is not None:
        raise UsageError("--plot only applies to the canary and mia scenarios")
    run = run_from_args(args)
    samples = DEFAULT_SAMPLES if args.samples is None else args.samples
    n_samples = check_positive_int("samples", samples, minimum=10)
    if n_samples > 50_000_000:
        raise ParameterError("samples", args.samples, "must be at most 5e7 chains per world")
    if n_samples * run.T > MAX_CHAIN_STEPS:
        raise ParameterError(
            "samples",
            args.samples,
            f"samples x steps = {n_samples * run.T:.3g} chain-steps per world exceeds "
            f"{MAX_CHAIN_STEPS:.0e} (several minutes of simulation); lower --samples or --steps",
        )
    alpha = check_in_range(
        "alpha", 1e-3 if args.alpha is None else args.alpha, 1e-12, 1.0, high_open=True
    )
    # as the canary and mia scenarios (numpy raised ValueError on a negative seed: exit 70)
    check_int_in_range("seed", args.seed, 0, MAX_SEED)
    delta = (
        1e-5
        if args.delta is None
        else check_in_range("delta", args.delta, 0.0, 1.0, low_open=True, high_open=True)
    )
    noise_scale = check_scale("noise_scale", args.noise_scale)
    sens_scale = check_scale("sensitivity_scale", args.sensitivity_scale)
    if args.position is not None and run.algorithm != "cgd":
        raise ParameterError("position", args.position, "only applies to cgd")
    if args.position is not None:
        check_in_range("position", args.position, 0, run.l - 1)
    if args.scenario == "quadratic" and not (
        (run.m is not None and run.m > 0) or (run.c is not None and run.c < 1)
    ):
        raise UsageError("scenario quadratic needs --strong-convexity m > 0 or --contraction c < 1")

    # lazy: the audit package imports numpy and scipy, not on the CLI's start-up path
    from lastiterate.audit.report import audit_run

    res = audit_run(
        run,
        scenario=args.scenario,
        N=n_samples,
        seed=args.seed,
        alpha=alpha,
        delta=delta,
        bounds=args.bound,
        position=args.position,
        noise_scale=noise_scale,
        sensitivity_scale=sens_scale,
        pair=args.pair,
    )
    if args.json:
        print_json(res.to_json())
    else:
        print(res.format())
    return 1 if res.verdict == "VIOLATION" else 0
