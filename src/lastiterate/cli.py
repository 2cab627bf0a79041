"""Command-line interface: ``lastiterate account | calibrate | convert | reproduce | train | demo``.

The contract is design.md's.  Invalid input exits with status 2 and ONE line on stderr naming the
parameter and its allowed range; nothing is printed on stdout.  Imports are lazy so that start-up
stays cheap.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn


class UsageError(Exception):
    """A command-line error: exit status 2, one line on stderr."""


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # --target must not silently mean --target-epsilon
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # one line, exit 2
        raise UsageError(message)


def _positive_float(name: str):  # type: ignore[no-untyped-def]
    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}={text!r} is invalid: must be a real number") from None
        return x

    return parse


def _orders(text: str) -> list[float]:
    try:
        values = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"orders={text!r} is invalid: must be comma-separated numbers > 1") from None
    if not values or any(not (a > 1) or not math.isfinite(a) for a in values):
        raise argparse.ArgumentTypeError(f"orders={text!r} is invalid: every order must be a finite number > 1")
    return values


# ---------------------------------------------------------------------- run flags
def _add_run_flags(p: argparse.ArgumentParser, *, noise: bool) -> None:
    from lastiterate.run import RUN_CHOICES

    g = p.add_argument_group("run")
    g.add_argument("--algorithm", choices=RUN_CHOICES["algorithm"], help="full batch, cyclic batches, sampled batches")
    g.add_argument("--n", type=int, help="number of examples")
    g.add_argument("--batch-size", type=int, help="batch size b (expected size for Poisson sampling)")
    steps = g.add_mutually_exclusive_group()
    steps.add_argument("--steps", type=int, help="number of noisy steps T")
    steps.add_argument("--epochs", type=float, help="number of epochs E")
    g.add_argument("--lr", type=float, help="learning rate (constant)")
    nz = g.add_mutually_exclusive_group()
    nz.add_argument("--noise-std", type=float, help="std sigma of the noise on the AVERAGED gradient")
    nz.add_argument("--noise-multiplier", type=float, help="Opacus noise multiplier z (needs --clip): sigma = z*C/b")
    g.add_argument("--clip", type=float, help="per-example gradient clip norm C")
    g.add_argument("--sensitivity", type=float, help="gradient sensitivity L (default 2C replace-one, C add/remove)")
    g.add_argument("--strong-convexity", type=float, help="strong convexity m")
    g.add_argument("--smoothness", type=float, help="smoothness M")
    g.add_argument("--convex", action="store_true", default=None, help="declare the losses convex")
    g.add_argument("--contraction", type=float, help="contraction factor c of one step (c < 1: strongly convex)")
    g.add_argument("--diameter", type=float, help="diameter D of the projection set")
    g.add_argument("--sampling", choices=RUN_CHOICES["sampling"], help="batch sampling for sgd (required)")
    g.add_argument("--adjacency", choices=RUN_CHOICES["adjacency"], help="neighbouring relation (default replace)")
    g.add_argument("--config", type=Path, help="TOML file with any of these flags (flags on the command line win)")
    q = p.add_argument_group("query")
    dq = q.add_mutually_exclusive_group()
    dq.add_argument("--delta", type=float, help="report epsilon at this delta (default 1e-5)")
    if noise:
        dq.add_argument("--epsilon", type=float, help="report delta at this epsilon instead")
    q.add_argument("--bound", action="extend", nargs="+", metavar="ID", help="restrict to these bound ids (repeatable)")
    q.add_argument("--json", action="store_true", help="print one JSON object")


def _apply_config(args: argparse.Namespace) -> None:
    path = getattr(args, "config", None)
    if path is None:
        return
    import tomllib

    try:
        cfg = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"config={str(path)!r} is invalid: file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"config={str(path)!r} is invalid: not TOML ({exc})") from None
    except OSError as exc:
        raise UsageError(f"config={str(path)!r} is invalid: cannot be read ({exc.strerror or exc})") from None
    for key, value in cfg.items():
        dest = key.replace("-", "_")
        if not hasattr(args, dest):
            raise UsageError(f"config key {key!r} is invalid: not a flag of this command")
        if getattr(args, dest) is None:
            setattr(args, dest, value)


def _run_from_args(args: argparse.Namespace, **override: Any) -> Any:
    from lastiterate.run import Run

    kw: dict[str, Any] = {k: getattr(args, k, None) for k in Run.field_names()}
    kw.update(override)
    for required in ("algorithm", "n", "lr"):
        if kw[required] is None:
            raise UsageError(f"--{required.replace('_', '-')} is required")
    kw["convex"] = bool(kw["convex"])
    if kw["adjacency"] is None:
        kw["adjacency"] = "replace"
    return Run(**kw)


# ---------------------------------------------------------------------- account
def _fmt(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if math.isinf(x):
        return "inf"
    return f"{x:.{digits}g}"


def _describe_run(run: Any) -> str:
    s = run.setting()
    parts = [f"{s['algorithm']}", f"n={s['n']}"]
    if s["algorithm"] != "gd":
        parts.append(f"b={s['batch_size']}")
    if s["sampling"]:
        parts.append(f"sampling={s['sampling']}")
    parts += [f"T={s['steps']} steps ({_fmt(s['epochs'])} epochs)", f"lr={_fmt(s['lr']) if not isinstance(s['lr'], list) else 'schedule'}"]
    parts += [f"sigma={_fmt(s['noise_std'])}", f"L={_fmt(s['sensitivity'])}", f"adjacency={s['adjacency']}"]
    if s["contraction"] is not None:
        parts.append(f"c={s['contraction']:.6g}")
    if s["diameter"] is not None:
        parts.append(f"D={_fmt(s['diameter'])}")
    return ", ".join(parts)


def format_report(report: Any) -> str:
    """Human-readable account report."""
    lines = [f"Run: {_describe_run(report.run)}"]
    best = report.best
    if best is None:
        lines.append("No applicable bound.")
    else:
        mu = f", mu = {best.mu:.4g}" if best.mu is not None else ""
        lines.append(
            f"Releasing only the final model is ({_fmt(best.epsilon)}, {best.delta:.3g})-DP"
            f"  [{best.bound}: {best.theorem}{mu}]"
        )
    comp = [r for r in report.results if r.bound in ("gdp-composition", "pld-composition") and r.kind == "bound"]
    if best is not None and comp and best.bound not in ("gdp-composition", "pld-composition"):
        c = min(comp, key=lambda r: r.epsilon)
        lines.append(f"Composition (every iterate released) would give epsilon = {_fmt(c.epsilon)}.")
    lines.append("")
    header = f"{'bound':<22} {'kind':<9} {'epsilon':>10} {'delta':>9} {'mu':>8}  theorem"
    lines.append(header)
    lines.append("-" * len(header))
    for r in report.results:
        mark = "*" if best is not None and r is best else " "
        lines.append(
            f"{r.bound:<22} {r.kind:<9} {_fmt(r.epsilon):>10} {r.delta:>9.3g} {_fmt(r.mu):>8} {mark}{r.theorem}"
        )
    rdp = [r for r in report.results if r.rdp]
    if rdp:
        lines.append("")
        lines.append("Renyi DP curves (order: epsilon):")
        for r in rdp:
            lines.append(f"  {r.bound}: " + ", ".join(f"{a:g}: {_fmt(e)}" for a, e in r.rdp))
    if report.not_applicable:
        lines.append("")
        lines.append("Not applicable:")
        for n in report.not_applicable:
            lines.append(f"  {n.bound}: {n.reason}")
    lines.append("")
    lines.append("* best valid bound; 'estimate' rows are approximations, never chosen as best.")
    return "\n".join(lines)


def _cmd_account(args: argparse.Namespace) -> int:
    from lastiterate.accountant import account

    _apply_config(args)
    run = _run_from_args(args)
    report = account(run, delta=args.delta, epsilon=args.epsilon, bounds=args.bound, orders=args.orders)
    if args.plot is not None:
        from lastiterate.plotting import plot_report

        plot_report(report, args.plot)
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        print(format_report(report))
        if args.plot is not None:
            print(f"\nTradeoff curves written to {args.plot}")
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from lastiterate.accountant import calibrate_epochs, calibrate_noise

    _apply_config(args)
    delta = args.delta if args.delta is not None else 1e-5
    bar = _ProgressBar("calibrating", quiet=args.json)
    if args.solve == "noise":
        if args.steps is None and args.epochs is None:
            raise UsageError("--steps or --epochs is required with --solve noise")
        run = _run_from_args(args, noise_std=1.0, noise_multiplier=None)
        cal = calibrate_noise(run, epsilon=args.epsilon, delta=delta, bounds=args.bound, progress=bar.step)
    else:
        if args.noise_std is None and args.noise_multiplier is None:
            raise UsageError("--noise-std or --noise-multiplier is required with --solve epochs")
        run = _run_from_args(args, epochs=1, steps=None)
        cal = calibrate_epochs(run, epsilon=args.epsilon, delta=delta, bounds=args.bound, progress=bar.step)
    bar.close()
    out = cal.to_json()
    if args.json:
        print(json.dumps({k: out[k] for k in ("noise_std", "noise_multiplier", "epochs", "best")}))
        return 0
    best = out["best"]
    if args.solve == "noise":
        z = f" (noise multiplier {out['noise_multiplier']:.6g})" if out["noise_multiplier"] is not None else ""
        print(f"Smallest noise std meeting ({args.epsilon:g}, {delta:g})-DP: sigma = {out['noise_std']:.6g}{z}")
    else:
        epochs = "unlimited (a convergent bound stays within the budget)" if out["epochs"] is None else f"{out['epochs']:g}"
        print(f"Largest number of epochs within ({args.epsilon:g}, {delta:g})-DP: {epochs}")
    if best.get("for_any_number_of_epochs"):
        print(f"Guarantee for any number of epochs: {best['bound']} ({best['theorem']}), epsilon = {best['epsilon']:.6g}")
    else:
        print(f"Best bound there: {best['bound']} ({best['theorem']}), epsilon = {best['epsilon']:.6g}")
    return 0


class _ProgressBar:
    """A tqdm bar on stderr for long searches; silent when stderr is not a terminal or with --json."""

    def __init__(self, desc: str, *, quiet: bool = False) -> None:
        self._bar = None
        if not quiet and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(desc=desc, unit="eval", file=sys.stderr, leave=False)

    def step(self, message: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(message, refresh=False)
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


# ---------------------------------------------------------------------- convert
def _cmd_convert(args: argparse.Namespace) -> int:
    if args.mu is not None:
        from lastiterate.errors import check_nonnegative
        from lastiterate.notions.gdp import gdp_delta, gdp_epsilon

        mu = check_nonnegative("mu", args.mu)
        if args.delta is not None:
            from lastiterate.errors import check_in_range

            delta = check_in_range("delta", args.delta, 0.0, 1.0, low_open=True, high_open=True)
            eps = float(gdp_epsilon(delta, mu))
        elif args.epsilon is not None:
            eps = check_nonnegative("epsilon", args.epsilon)
            delta = float(gdp_delta(eps, mu))
        else:
            raise UsageError("one of --delta or --epsilon is required with --mu")
        out: dict[str, Any] = {"epsilon": eps, "delta": delta, "mu": mu}
        text = f"{mu:g}-GDP implies ({eps:.6g}, {delta:.6g})-DP"
    else:
        from lastiterate.errors import check_in_range
        from lastiterate.notions.rdp import RHO_LINEAR_MAX, rdp_linear_to_epsilon

        rho = check_in_range("rdp-linear", args.rdp_linear, 0.0, RHO_LINEAR_MAX)
        if args.delta is None:
            raise UsageError("--delta is required with --rdp-linear")
        delta = check_in_range("delta", args.delta, 0.0, 1.0, low_open=True, high_open=True)
        conv = rdp_linear_to_epsilon(rho, delta)
        eps = float(conv.epsilon)
        out = {"epsilon": eps, "delta": delta, "mu": None, "rho": rho, "order": float(conv.order) if math.isfinite(conv.order) else None, "conversion": conv.method}
        text = f"RDP eps(alpha) = {rho:g}*alpha implies ({eps:.6g}, {delta:.6g})-DP  [{conv.method}, order {conv.order:.4g}]"
    print(json.dumps(out) if args.json else text)
    return 0


# ---------------------------------------------------------------------- reproduce
def _cmd_reproduce(args: argparse.Namespace) -> int:
    from lastiterate.experiments._base import experiments, write_experiment

    registry = experiments()
    if args.name in (None, "list"):
        for name, (desc, _) in registry.items():
            print(f"{name:<24} {desc}")
        return 0
    names = list(registry) if args.name == "all" else [args.name]
    for name in names:
        if name not in registry:
            raise UsageError(f"name={name!r} is invalid: must be one of all, list, " + ", ".join(registry))
    outdir = Path(args.out)
    if outdir.exists() and not outdir.is_dir():
        raise UsageError(f"out={args.out!r} is invalid: exists and is not a folder")
    bar = _ProgressBar("reproducing")
    for name in names:
        desc, func = registry[name]
        exp = func(args.quick)
        bar.step(name)
        paths = write_experiment(exp, outdir)
        bad = [c for c in exp.comparisons if not c.agrees]
        print(f"{name}: {desc}")
        print("  wrote " + ", ".join(str(p) for p in paths))
        if exp.comparisons:
            print(f"  {len(exp.comparisons) - len(bad)}/{len(exp.comparisons)} printed values reproduced to the printed precision")
            for c in bad:
                print(f"  differs: {c.line()}")
    bar.close()
    return 0


# ---------------------------------------------------------------------- demo
def _cmd_demo(args: argparse.Namespace) -> int:
    from lastiterate.demo import run_demo

    print(run_demo())
    return 0


# ---------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="lastiterate", description=__doc__.splitlines()[0])
    from lastiterate import __version__

    parser.add_argument("--version", action="version", version=f"lastiterate {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    p = sub.add_parser("account", help="every valid guarantee for releasing the last iterate")
    _add_run_flags(p, noise=True)
    p.add_argument("--orders", type=_orders, help="Renyi orders A,B,... at which RDP results report their curve")
    p.add_argument("--plot", type=Path, help="write the tradeoff curves of all results to this PNG")
    p.set_defaults(func=_cmd_account)

    p = sub.add_parser("calibrate", help="smallest noise or most epochs within a budget")
    _add_run_flags(p, noise=False)
    p.add_argument("--epsilon", type=float, required=True, help="target epsilon")
    p.add_argument("--solve", choices=("noise", "epochs"), required=True)
    p.set_defaults(func=_cmd_calibrate)

    p = sub.add_parser("convert", help="convert between privacy notions")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--mu", type=float, help="Gaussian-DP parameter")
    src.add_argument("--rdp-linear", type=float, metavar="RHO", help="linear RDP curve eps(alpha) = RHO*alpha")
    dq = p.add_mutually_exclusive_group()
    dq.add_argument("--delta", type=float)
    dq.add_argument("--epsilon", type=float)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_convert)

    p = sub.add_parser("reproduce", help="regenerate the papers' tables and figures")
    p.add_argument("name", nargs="?", help="experiment name, 'all' or 'list'")
    p.add_argument("--out", default="reproduce-out", help="output folder (default reproduce-out)")
    p.add_argument("--quick", action="store_true", help="smaller grids where an experiment supports it")
    p.set_defaults(func=_cmd_reproduce)

    p = sub.add_parser("demo", help="a short privacy report for a built-in example run")
    p.set_defaults(func=_cmd_demo)

    _add_optional_commands(sub)
    return parser


def _add_optional_commands(sub: Any) -> None:
    """Subcommands defined in other modules (training, auditing), registered when present."""
    import importlib

    for module in ("lastiterate.train.cli", "lastiterate.audit.cli"):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue
            raise
        mod.add_parser(sub)


def main(argv: Sequence[str] | None = None) -> int:
    from lastiterate.errors import NotApplicable, ParameterError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:
            parser.print_help()
            return 2
        return int(args.func(args))
    except (UsageError, ParameterError, NotApplicable) as exc:
        print(f"lastiterate: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (`| head -1`): stop quietly like a Unix filter, and keep Python's
        # flush at exit from raising again on the closed pipe
        import os

        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
        return 1


if __name__ == "__main__":
    sys.exit(main())
