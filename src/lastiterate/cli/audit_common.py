"""What the trainer-auditing scenarios of ``lastiterate audit`` share (``canary`` and ``mia``).

Both scenarios train models with the project's own trainer and the flags of ``train``, so they
refuse the same run flags of the chain scenarios (the trainer derives n and the geometry from the
data), require the same training flags, validate the same audit options (alpha, delta, noise scale,
seeds, test fraction), load and preprocess the data the same way, build the same
:class:`~lastiterate.audit.canary.TrainerSpec` and print their results the same way (text or
standard JSON; exit status 1 on a VIOLATION).  Only the standard library and the CLI's own helpers
are imported at module level so that ``lastiterate --help`` stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lastiterate.cli.common import EXIT_OK, EXIT_VIOLATION, UsageError, print_json
from lastiterate.cli.train import table_arguments
from lastiterate.errors import ParameterError, check_in_range, check_int_in_range, check_scale

if TYPE_CHECKING:
    from lastiterate.audit.canary import TrainerSpec

#: run flags of ``audit`` that the trainer derives itself (refused by the trainer scenarios)
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
#: flags a trainer scenario cannot run without (``--epochs``/``--steps`` and the noise are checked
#: as pairs)
REQUIRED_TRAINING_FLAGS = ("dataset", "model", "algorithm", "lr", "clip")
#: largest seed of the trainer and of the train/test split
MAX_SEED = 2**32 - 1


def flag(dest: str) -> str:
    """The command-line spelling of an argparse destination (``split_seed`` -> ``--split-seed``).

    Args:
        dest: the argparse destination name.

    Returns:
        The long flag, with dashes.
    """
    return f"--{dest.replace('_', '-')}"


def refuse_scenario_flags(args: argparse.Namespace, dests: Sequence[str], scenario: str) -> None:
    """Refuse the flags of ``scenario`` when another scenario runs.

    Args:
        args: the parsed ``audit`` flags.
        dests: the destinations that only ``scenario`` reads.
        scenario: the scenario that owns them (``canary`` or ``mia``).

    Raises:
        UsageError: one of ``dests`` was given.
    """
    for dest in dests:
        if getattr(args, dest, None) is not None:
            raise UsageError(
                f"{flag(dest)} only applies to the {scenario} scenario (audit {scenario} ...)"
            )


def refuse_derived_flags(args: argparse.Namespace, scenario: str, reason: str) -> None:
    """Refuse the run flags that the trainer derives from the data (:data:`DERIVED_FLAGS`).

    Args:
        args: the parsed ``audit`` flags.
        scenario: the trainer scenario that runs (``canary`` or ``mia``).
        reason: why they do not apply, appended to the message.

    Raises:
        UsageError: one of :data:`DERIVED_FLAGS` was given.
    """
    for dest in DERIVED_FLAGS:
        if getattr(args, dest, None) is not None:
            raise UsageError(f"{flag(dest)} does not apply to the {scenario} scenario: {reason}")


def refuse_simulation_flags(
    args: argparse.Namespace,
    scenario: str,
    *,
    adjacency_reason: str,
    pair_hint: str = "",
    scale_hint: str = "",
) -> None:
    """Refuse the chain simulation's ``--pair`` and ``--sensitivity-scale`` and any adjacency but
    replace-one (the trainer audits swap one example).

    Args:
        args: the parsed ``audit`` flags.
        scenario: the trainer scenario that runs (``canary`` or ``mia``).
        adjacency_reason: why only ``replace`` adjacency is audited.
        pair_hint: appended to the ``--pair`` message (e.g. ``" (use --canary)"``).
        scale_hint: appended to the ``--sensitivity-scale`` message.

    Raises:
        UsageError: ``--pair`` or ``--sensitivity-scale`` was changed.
        ParameterError: ``adjacency`` is not ``replace``.
    """
    if args.pair != "auto":
        raise UsageError(f"--pair does not apply to the {scenario} scenario{pair_hint}")
    if args.sensitivity_scale != 1.0:
        raise UsageError(
            f"--sensitivity-scale does not apply to the {scenario} scenario{scale_hint}"
        )
    if args.adjacency not in (None, "replace"):
        raise ParameterError("adjacency", args.adjacency, adjacency_reason)


def require_training_flags(args: argparse.Namespace, scenario: str) -> None:
    """Require the flags of a training run: data, model, algorithm, step size, clip, length and
    noise, with ``--sampling`` exactly for sgd and ``--batch-size`` for cgd / sgd.

    Args:
        args: the parsed ``audit`` flags.
        scenario: the trainer scenario that runs (``canary`` or ``mia``).

    Raises:
        UsageError: a required flag is missing or ``--sampling`` is given without sgd.
    """
    for dest in REQUIRED_TRAINING_FLAGS:
        if getattr(args, dest) is None:
            raise UsageError(f"{flag(dest)} is required with the {scenario} scenario")
    if args.epochs is None and args.steps is None:
        raise UsageError(f"one of --epochs or --steps is required with the {scenario} scenario")
    if args.noise_std is None and args.noise_multiplier is None:
        raise UsageError(
            f"one of --noise-std or --noise-multiplier is required with the {scenario} scenario"
        )
    if args.algorithm == "sgd" and args.sampling is None:
        raise UsageError(
            "--sampling is required with --algorithm sgd: one of poisson, uniform, shuffle"
        )
    if args.algorithm != "sgd" and args.sampling is not None:
        raise UsageError(f"--sampling only applies to --algorithm sgd, not {args.algorithm}")
    if args.algorithm != "gd" and args.batch_size is None:
        raise UsageError(f"--batch-size is required with --algorithm {args.algorithm}")


@dataclass(frozen=True)
class AuditOptions:
    """The validated options every trainer audit reads.

    Attributes:
        alpha: false-alarm probability of the lower bounds.
        delta: the delta at which epsilon is claimed and certified.
        noise_scale: mutation testing: train with noise x this factor (1 = as claimed).
        seed: seed of the audit's models (an audit is a reproducible experiment).
        split_seed: seed of the train/test split.
        test_size: test fraction when the data have no test set.
        bounds: the bound ids of ``--bound`` whose claims are compared (``None``: all).
    """

    alpha: float
    delta: float
    noise_scale: float
    seed: int
    split_seed: int
    test_size: float
    bounds: Sequence[str] | None

    def audit_kwargs(self) -> dict[str, Any]:
        """The keyword arguments every trainer audit of the library takes from these options.

        Returns:
            ``seed``, ``alpha``, ``delta``, ``bounds`` and ``noise_scale``.
        """
        return {
            "seed": self.seed,
            "alpha": self.alpha,
            "delta": self.delta,
            "bounds": self.bounds,
            "noise_scale": self.noise_scale,
        }


def audit_options(args: argparse.Namespace, *, alpha_default: float) -> AuditOptions:
    """Validate the audit options of a trainer scenario, in the order of the flags' checks.

    Args:
        args: the parsed ``audit`` flags.
        alpha_default: alpha when ``--alpha`` is not given (1e-3, as ``audit --help`` says).

    Returns:
        The validated :class:`AuditOptions` (delta 1e-5, split seed 0 and test fraction 0.2 by
        default).

    Raises:
        ParameterError: alpha outside [1e-12, 1), delta outside (0, 1), a noise scale that is not
            a positive finite factor, a seed outside [0, 2**32 - 1] or a test fraction outside
            (0, 1).
    """
    alpha = check_in_range(
        "alpha", alpha_default if args.alpha is None else args.alpha, 1e-12, 1.0, high_open=True
    )
    delta = (
        1e-5
        if args.delta is None
        else check_in_range("delta", args.delta, 0.0, 1.0, low_open=True, high_open=True)
    )
    noise_scale = check_scale("noise_scale", args.noise_scale)
    seed = check_int_in_range("seed", args.seed, 0, MAX_SEED)
    split_seed = (
        0
        if args.split_seed is None
        else check_int_in_range("split_seed", args.split_seed, 0, MAX_SEED)
    )
    test_size = (
        0.2
        if args.test_size is None
        else check_in_range("test_size", args.test_size, 0.0, 1.0, low_open=True, high_open=True)
    )
    return AuditOptions(alpha, delta, noise_scale, seed, split_seed, test_size, args.bound)


def plot_path(args: argparse.Namespace) -> Path | None:
    """The checked ``--plot FILE.png`` path, or ``None`` without ``--plot``.

    Args:
        args: the parsed ``audit`` flags.

    Returns:
        The path to write the PNG to, or ``None``.

    Raises:
        ParameterError: the path does not end in ``.png`` or its folder does not exist.
    """
    if getattr(args, "plot", None) is None:
        return None
    # lazy: the plotting module imports numpy, not on the CLI's start-up path
    from lastiterate.plotting import check_png_path

    return check_png_path(args.plot)


def load_preprocessed(args: argparse.Namespace, options: AuditOptions) -> Any:
    """Load ``--dataset`` and preprocess it as ``train`` does (scaling, public ranges, row clip).

    Args:
        args: the parsed ``audit`` flags (``--scaling``, ``--feature-range``, ``--target-range``,
            ``--feature-norm``; ``--target``, ``--categories``, ``--classes`` of a CSV / Parquet
            dataset, as ``train``).
        options: the validated options (split seed and test fraction).

    Returns:
        The preprocessed :class:`~lastiterate.train.data.Dataset`.

    Raises:
        ParameterError: the dataset cannot be loaded or a preprocessing flag is out of range.
    """
    # lazy: the data loaders import numpy, not on the CLI's start-up path
    from lastiterate.train import preprocessing as pp
    from lastiterate.train.data import load_dataset

    raw = load_dataset(
        args.dataset,
        seed=options.split_seed,
        test_size=options.test_size,
        standardize=False,
        **table_arguments(args),
    )
    data, _prep = pp.preprocess(
        raw,
        scaling=args.scaling or "auto",
        feature_range=args.feature_range,
        target_range=args.target_range,
        feature_norm=args.feature_norm,
    )
    return data


def trainer_spec(args: argparse.Namespace) -> TrainerSpec:
    """The training run of every audit model, from the flags of ``train``.

    Args:
        args: the parsed ``audit`` flags (algorithm, step size, clip, noise, batch, sampling,
            ``--l2`` (default 0), diameter, feature norm, epochs / steps, intercept).

    Returns:
        The :class:`~lastiterate.audit.canary.TrainerSpec`.

    Raises:
        ParameterError: the trainer refuses the combination (e.g. both epochs and steps).
    """
    # lazy: the audit package imports numpy and scipy, not on the CLI's start-up path
    from lastiterate.audit.canary import TrainerSpec

    return TrainerSpec(
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


def report_audit(
    res: Any,
    args: argparse.Namespace,
    data: Any,
    header: str,
    *,
    model: dict[str, Any] | None = None,
    plot: Path | None = None,
) -> int:
    """Write the plot, if asked for, and print an audit result: standard JSON with ``--json``
    (the result, the dataset, the model and the plot path), else a header line, the report and
    where the plot went.

    Args:
        res: the audit result (``to_json()``, ``format()`` and ``verdict``): a
            :class:`~lastiterate.audit.canary.CanaryAuditResult` or a
            :class:`~lastiterate.audit.mia.MIAResult` when ``plot`` is given.
        args: the parsed ``audit`` flags (``--json``).
        data: the dataset the audit trained on (``describe()``).
        header: the first line of the text report.
        model: the JSON ``model`` entry, if any.
        plot: where to write the PNG of the empirical tradeoff points, if anywhere.

    Returns:
        The exit status: 1 on a VIOLATION, else 0.
    """
    if plot is not None:
        # lazy: numpy and matplotlib only when a plot is asked for (CLI start-up)
        from lastiterate import plotting

        if args.scenario == "mia":
            plotting.plot_mia_audit(res, plot)
        else:
            plotting.plot_canary_audit(res, plot)
    if args.json:
        out: dict[str, Any] = res.to_json()
        out["dataset"] = data.describe()
        if model is not None:
            out["model"] = model
        if plot is not None:
            out["plot"] = str(plot)
        print_json(out)
    else:
        print(header)
        print(res.format())
        if plot is not None:
            print(f"Plot written to {plot}")
    return EXIT_VIOLATION if res.verdict == "VIOLATION" else EXIT_OK
