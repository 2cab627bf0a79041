"""``lastiterate convert``: between Gaussian DP, linear Renyi DP and (epsilon, delta)-DP."""

from __future__ import annotations

import argparse
import math
from typing import Any

from lastiterate.cli.common import UsageError, finite_float, print_json
from lastiterate.errors import check_in_range, check_nonnegative


def add_parser(sub: Any) -> None:
    p = sub.add_parser("convert", help="convert between privacy notions")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--mu", type=finite_float, help="Gaussian-DP parameter mu")
    src.add_argument(
        "--rdp-linear",
        type=finite_float,
        metavar="RHO",
        help="linear RDP curve eps(alpha) = RHO*alpha",
    )
    dq = p.add_mutually_exclusive_group()
    dq.add_argument("--delta", type=finite_float, help="report epsilon at this delta")
    dq.add_argument("--epsilon", type=finite_float, help="report delta at this epsilon (with --mu)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_convert)


def cmd_convert(args: argparse.Namespace) -> int:
    out: dict[str, Any]
    if args.mu is not None:
        # lazy: numpy/scipy (CLI start-up, --help)
        from lastiterate.notions.gdp import gdp_delta, gdp_epsilon

        mu = check_nonnegative("mu", args.mu)
        if args.delta is not None:
            delta = check_in_range("delta", args.delta, 0.0, 1.0, low_open=True, high_open=True)
            eps = float(gdp_epsilon(delta, mu))
        elif args.epsilon is not None:
            eps = check_nonnegative("epsilon", args.epsilon)
            delta = float(gdp_delta(eps, mu))
        else:
            raise UsageError("one of --delta or --epsilon is required with --mu")
        out = {"epsilon": eps, "delta": delta, "mu": mu}
        text = f"{mu:g}-GDP implies ({eps:.6g}, {delta:.6g})-DP"
    else:
        # lazy: numpy/scipy (CLI start-up, --help)
        from lastiterate.notions.rdp import RHO_LINEAR_MAX, rdp_linear_to_epsilon

        rho = check_in_range("rdp-linear", args.rdp_linear, 0.0, RHO_LINEAR_MAX)
        if args.delta is None:
            raise UsageError("--delta is required with --rdp-linear")
        delta = check_in_range("delta", args.delta, 0.0, 1.0, low_open=True, high_open=True)
        conv = rdp_linear_to_epsilon(rho, delta)
        eps = float(conv.epsilon)
        out = {
            "epsilon": eps,
            "delta": delta,
            "mu": None,
            "rho": rho,
            "order": float(conv.order) if math.isfinite(conv.order) else None,
            "conversion": conv.method,
        }
        text = (
            f"RDP eps(alpha) = {rho:g}*alpha implies ({eps:.6g}, {delta:.6g})-DP"
            f"  [{conv.method}, order {conv.order:.4g}]"
        )
    if args.json:
        print_json(out)
    else:
        print(text)
    return 0
