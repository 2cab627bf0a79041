"""DPRidge's rule on TUNING data: the least-squares horizon, early stopping against last iterate.

The least-squares constants of :mod:`lastiterate.configuration` (``LEAST_SQUARES_HORIZON_SCALE``,
no horizon growth, early stopping winning ties) were set with this script, on regression data that
no other benchmark uses:

* ``reg100``: ``make_regression``, n = 3000, d = 100, 10 informative features, noise 10 (seed 1);
* ``reg20``: n = 3000, d = 20, all informative, noise 20 (seed 2);
* ``reg8small``: n = 800, d = 8, noise 5 (seed 3);
* ``diabetes``: scikit-learn's bundled copy (n = 442, d = 10; non-private R^2 about 0.36).

Each is split 75/25 (random_state 0), standardised on the training part, every row divided by
the largest training row norm (so rows have norm <= 1 and the features keep their relative
scale), and the targets centred and divided by their largest absolute value (so |y| <= 1, the
default ``target_bound``).  For each dataset and epsilon (delta = 1e-5, replace-one adjacency)
the table reports the test R^2 (mean over seeds) of:

* ``DPRidge`` as the rule configures it (``strategy="auto"``);
* early stopping (``strategy="early-stopping"``) and last iterate (``"last-iterate"``) with the
  planned horizon ``H = n mu / (c D(p))`` for several constants c (the rule's c is marked);
* the classification rule's horizon ``n mu G(mu) / D(p)`` (``G = min(max(1, 8 m, n m / 500), 8)``;
  what DPRidge planned before, with the growth of that time: ``min(max(1, 8 m), 8)``);
* diffprivlib's ``LinearRegression`` (functional mechanism, pure epsilon-DP, with the public
  bounds ``bounds_X = (-1, 1)``, ``bounds_y = (-1, 1)``; run in its own interpreter, see
  ``benchmarks/utility.py``; a mean R^2 below -1 is shown as "< -1"), and non-private
  scikit-learn ``Ridge(alpha=1e-3)``.

An R^2 below 0 means the predictions are worse than the constant mean; cells are clipped at -1
before the means are taken, so that one diverging cell does not decide a column.

Run ``python benchmarks/ridge_tuning.py`` (about ten minutes on 2 cores; ``--quick``: 2 seeds,
epsilon 1 and 4).  Writes ``benchmarks/results/ridge_tuning.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes, make_regression
from sklearn.linear_model import Ridge
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from lastiterate import configuration
from lastiterate.sklearn import DPRidge

warnings.filterwarnings("ignore")

DELTA = 1e-5
DATASETS = ("reg100", "reg20", "reg8small", "diabetes")
CONSTANTS = (1.0, 2.0, 4.0, 8.0)
ORIGINAL_HORIZON = configuration.planned_horizon
DEFAULT_DPL_PYTHON = "/work/venvs/dpl/bin/python"

DPL_SCRIPT = r"""
import json, sys, warnings
import numpy as np
warnings.filterwarnings("ignore")
from diffprivlib.models import LinearRegression
z = np.load(sys.argv[1])
out = {}
for eps in json.loads(sys.argv[2]):
    scores = []
    for seed in json.loads(sys.argv[3]):
        reg = LinearRegression(epsilon=eps, bounds_X=(-1.0, 1.0), bounds_y=(-1.0, 1.0),
                               random_state=seed)
        reg.fit(z["Xtr"], z["ytr"])
        scores.append(float(reg.score(z["Xte"], z["yte"])))
    out[repr(eps)] = scores
print(json.dumps(out))
"""


def tuning_data(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One tuning set, split, standardised, rows scaled to norm <= 1, targets to [-1, 1]."""
    if name == "reg100":
        X, y = make_regression(
            n_samples=3000, n_features=100, n_informative=10, noise=10.0, random_state=1
        )
    elif name == "reg20":
        X, y = make_regression(n_samples=3000, n_features=20, noise=20.0, random_state=2)
    elif name == "reg8small":
        X, y = make_regression(n_samples=800, n_features=8, noise=5.0, random_state=3)
    elif name == "diabetes":
        X, y = load_diabetes(return_X_y=True)
    else:
        raise SystemExit(f"unknown dataset {name!r}; choose from {', '.join(DATASETS)}")
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    scaler = StandardScaler().fit(Xtr)
    Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)
    row_scale = np.linalg.norm(Xtr, axis=1).max()
    Xtr, Xte = Xtr / row_scale, Xte / row_scale
    Xte = Xte / np.maximum(1.0, np.linalg.norm(Xte, axis=1, keepdims=True))
    centre = ytr.mean()
    y_scale = np.abs(ytr - centre).max()
    return Xtr, (ytr - centre) / y_scale, Xte, np.clip((yte - centre) / y_scale, -1.0, 1.0)


def r2_of(Xtr, ytr, Xte, yte, eps: float, strategy: str, seeds: int) -> tuple[float, str]:
    """Mean test R^2 of ``seeds`` DPRidge fits and the configuration's strategy and horizon."""
    scores = []
    for seed in range(seeds):
        reg = DPRidge(epsilon=eps, delta=DELTA, strategy=strategy, random_state=seed)
        reg.fit(Xtr, ytr)
        scores.append(reg.score(Xte, yte))
    cfg = reg.privacy_report_.configuration  # type: ignore[union-attr]
    return float(np.mean(scores)), f"{cfg.strategy}, T={cfg.steps}"


@contextlib.contextmanager
def with_horizon(horizon: Callable[..., float] | None) -> Iterator[None]:
    """Run the block with ``configuration.planned_horizon`` replaced (None: the rule's own)."""
    original = ORIGINAL_HORIZON
    if horizon is not None:
        configuration.planned_horizon = horizon  # type: ignore[assignment]
    configuration.cached_configuration.cache_clear()
    try:
        yield
    finally:
        configuration.planned_horizon = original  # type: ignore[assignment]
        configuration.cached_configuration.cache_clear()


def plain_horizon(c: float) -> Callable[..., float]:
    """``H = n m / (c D(p))`` (m = mu, 2 mu under add/remove), whatever the family."""

    def planned(n: int, p: int, mu: float, adjacency: str = "replace", family: str = "") -> float:
        m = mu * (2.0 if adjacency == "add-remove" else 1.0)
        return n * m / (c * configuration.dimension_factor(p))

    return planned


def classification_horizon(
    n: int, p: int, mu: float, adjacency: str = "replace", family: str = ""
) -> float:
    """The logistic rule's horizon ``n m G(m) / D(p)`` (what DPRidge planned before)."""
    return ORIGINAL_HORIZON(n, p, mu, adjacency, "binary-logistic")


def run_diffprivlib(python: str, Xtr, ytr, Xte, yte, epsilons, seeds: int) -> dict | str:
    """diffprivlib's LinearRegression in its own interpreter; a string says why it did not run."""
    if not Path(python).exists():
        return f"not run (no interpreter at {python}; see benchmarks/utility.py)"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.npz")
        np.savez(path, Xtr=Xtr, ytr=ytr, Xte=Xte, yte=yte)
        proc = subprocess.run(
            [
                python,
                "-c",
                DPL_SCRIPT,
                path,
                json.dumps(list(epsilons)),
                json.dumps([*range(seeds)]),
            ],
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
        )
    if proc.returncode != 0:
        return "not run (" + (proc.stderr.strip().splitlines() or ["?"])[-1] + ")"
    res = json.loads(proc.stdout)
    return {eps: float(np.mean(res[repr(eps)])) for eps in epsilons}


def _r2_cell(r2: float) -> str:
    """An R^2 for the table; below -1 (a diverged fit) shown as such."""
    return f"{r2:.3f}" if r2 >= -1.0 else "< -1"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds, epsilon 1 and 4")
    ap.add_argument("--seeds", type=int, help="number of seeds (default 3; quick: 2)")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--dpl-python", default=os.environ.get("DPL_PYTHON", DEFAULT_DPL_PYTHON))
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "ridge_tuning.md"))
    args = ap.parse_args(argv)
    seeds = args.seeds or (2 if args.quick else 3)
    eps_list = (1.0, 4.0) if args.quick else (0.5, 1.0, 2.0, 4.0, 8.0)
    names = [s for s in args.datasets.split(",") if s]
    rule_c = configuration.LEAST_SQUARES_HORIZON_SCALE
    columns: list[tuple[str, str, Callable[..., float] | None]] = [("DPRidge (rule)", "auto", None)]
    for strategy, short in (("early-stopping", "ES"), ("last-iterate", "LI")):
        for c in CONSTANTS:
            mark = " (rule)" if c == rule_c else ""
            columns.append((f"{short} c={c:g}{mark}", strategy, plain_horizon(c)))
        columns.append((f"{short}, classification horizon", strategy, classification_horizon))
    start = time.perf_counter()
    head = ["dataset", "n, d", "ε"] + [c[0] for c in columns] + ["diffprivlib", "non-private"]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    table: list[list[float]] = []
    for name in names:
        Xtr, ytr, Xte, yte = tuning_data(name)
        nonprivate = Ridge(alpha=1e-3).fit(Xtr, ytr).score(Xte, yte)
        dpl = run_diffprivlib(args.dpl_python, Xtr, ytr, Xte, yte, eps_list, seeds)
        for eps in eps_list:
            scores, picked = [], ""
            for label, strategy, horizon in columns:
                with with_horizon(horizon):
                    r2, what = r2_of(Xtr, ytr, Xte, yte, eps, strategy, seeds)
                scores.append(max(r2, -1.0))
                if label == "DPRidge (rule)":
                    picked = what
            table.append(scores)
            best = max(scores)
            cells = [f"**{s:.3f}**" if s == best else f"{s:.3f}" for s in scores]
            cells[0] += f" ({picked})"
            peer = dpl if isinstance(dpl, str) else _r2_cell(dpl[eps])
            row = f"| {name} | {len(Xtr)}, {Xtr.shape[1]} | {eps:g} | " + " | ".join(cells)
            row += f" | {peer} | {nonprivate:.3f} |"
            lines.append(row)
            print(row, flush=True)
    means = np.mean(table, axis=0)
    lines.append("| **mean** | | | " + " | ".join(f"{m:.4f}" for m in means) + " | | |")
    elapsed = time.perf_counter() - start
    cmd = "python benchmarks/ridge_tuning.py" + (" --quick" if args.quick else "")
    text = [
        "# DPRidge's rule on tuning data (benchmarks/ridge_tuning.py)",
        "",
        (
            f"Command: `{cmd}` ({elapsed:.0f} s on {platform.machine()}, Python "
            f"{platform.python_version()}). Test R², mean over {seeds} seeds "
            "(cells clipped at -1), "
            f"delta = {DELTA:g}, replace-one adjacency. None of these datasets is in another "
            "benchmark. ES / LI: early stopping / last iterate with the horizon H = n·mu/(c·D(p)); "
            "'classification horizon': n·mu·min(max(1, 8·mu), 8)/D(p), the logistic rule's. "
            f"The rule uses c = {rule_c:g}. diffprivlib: LinearRegression, pure ε-DP, "
            "bounds_X = (-1, 1), bounds_y = (-1, 1)."
        ),
        "",
        *lines,
        "",
    ]
    Path(args.out).write_text("\n".join(text))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
