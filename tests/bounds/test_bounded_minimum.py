"""The window searches' CLT-optimal noise split without SciPy (issue 11, start-up).

``shifted_interpolation._bounded_minimum`` is SciPy's bounded scalar minimisation
(``minimize_scalar(method="bounded")``) with the same operations in the same order; it replaced
the call because importing ``scipy.optimize`` was a third of a second or more of every command
that accounts a sampled run.  Checked here: the same minimiser and value as SciPy, bit for bit,
on smooth, kinked, infinite and flat objectives and on the theorems' CLT surrogates; and that a
whole ``lastiterate account`` of a sampled run with the window theorems imports no SciPy (nor
``numpy.ma``, which ``np.unique`` imports: ``sorted_unique``, the same array, is tested here too).
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from lastiterate.bounds import shifted_interpolation as si


def _scipy(
    func: Callable[[float], float], lo: float, hi: float, xatol: float
) -> tuple[float, float]:
    res = minimize_scalar(func, bounds=(lo, hi), method="bounded", options={"xatol": xatol})
    return float(res.x), float(res.fun)


def _objectives() -> list[Callable[[float], float]]:
    rng = np.random.default_rng(11)
    out: list[Callable[[float], float]] = []
    for _ in range(40):
        c, w = float(rng.uniform(0.05, 0.95)), float(rng.uniform(0.1, 5.0))
        out += [
            lambda t, c=c, w=w: (t - c) ** 2 * w + math.sin(7.0 * t),  # smooth, multimodal
            lambda t, c=c, w=w: abs(t - c) * w,  # a kink
            lambda t, c=c: min(1e300, math.inf if t < c else math.sqrt(t - c) - t),  # a wall
            lambda t, c=c, w=w: 1e300 if t > c else math.exp(w * t),  # the finite() cap
        ]
    out += [lambda t: 1.0, lambda t: -t, lambda t: t]  # flat, monotone both ways
    return out


@pytest.mark.parametrize("xatol", [1e-3, 1e-5])
def test_same_minimiser_and_value_as_scipy_bit_for_bit(xatol: float) -> None:
    for f in _objectives():
        lo, hi = si._THETA_RANGE
        x, fun = si._bounded_minimum(f, lo, hi, xatol=xatol)
        assert (float(x), float(fun)) == _scipy(f, lo, hi, xatol)


def test_the_theorems_clt_surrogates_minimise_as_with_scipy() -> None:
    """The Thm 4.10 and Thm 4.9 surrogates of ``noisy_sgd_bounded_convex`` /
    ``noisy_sgd_strongly_convex`` (the same formulas) over a grid of per-step parameters."""
    for p in (256 / 60000, 0.05, 59999 / 60000):
        for step_mu in (0.05, 0.390625, 2.0):
            for r in (10.0, 1e4):

                def mu2_410(theta: float, p: float = p, m: float = step_mu, r: float = r) -> float:
                    h = si.clt_h(si.lemma_c12_mu(m, theta))
                    return (
                        2 * r * p * math.sqrt(2 * h / (1 - theta)) if math.isfinite(h) else math.inf
                    )

                for c in (0.9999, 0.99):

                    def mu2_49(
                        theta: float, p: float = p, m: float = step_mu, c: float = c
                    ) -> float:
                        h = si.clt_h(si.lemma_c12_mu(m, theta))
                        if not math.isfinite(h):
                            return math.inf
                        a = si.thm49_gaussian_mu(m, c, theta, 0, math.inf)
                        arg = a * a * -math.log(c) / (p * p * h)
                        nu = max(1.0, math.log(arg) / (-2 * math.log(c))) if arg > 1 else 1.0
                        return (
                            2 * p * p * h * nu
                            + si.thm49_gaussian_mu(m, c, theta, nu, math.inf) ** 2
                        )

                    for f in (mu2_410, mu2_49):
                        finite = lambda t, f=f: min(1e300, f(t))
                        res = _scipy(finite, *si._THETA_RANGE, 1e-3)
                        want = res[0] if res[1] < 1e300 else 0.5
                        assert si._minimise_clt_surrogate(f) == want


def test_an_account_of_a_sampled_run_imports_no_scipy() -> None:
    """Thms 4.9 + 4.10, pabi, Thm 3.4, composition and the CLT estimates of a sampled run with
    strong convexity, a diameter and clipping: a whole CLI process imports no SciPy module."""
    args = [
        "account", "--algorithm", "sgd", "--sampling", "uniform", "--n", "60000",
        "--batch-size", "256", "--steps", "2000", "--lr", "0.05", "--noise-std", "0.02",
        "--clip", "1", "--smoothness", "1", "--strong-convexity", "0.002", "--diameter", "10",
        "--json",
    ]  # fmt: skip
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['lastiterate', *{args!r}]\n"
        "try:\n"
        "    runpy.run_module('lastiterate.cli', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print('\\nMODULES', *sorted(sys.modules), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    modules = proc.stderr.rstrip().splitlines()[-1].split()
    assert modules[0] == "MODULES"
    assert "lastiterate.bounds.shifted_interpolation" in modules  # the probe: the theorems ran
    assert '"shifted-interpolation"' in proc.stdout
    assert not [m for m in modules if m == "scipy" or m.startswith("scipy.")]
    assert "numpy.ma" not in modules  # np.unique's import (sorted_unique instead)


@pytest.mark.parametrize("kind", ["int", "float", "specials", "nan", "empty"])
def test_sorted_unique_is_np_unique(kind: str) -> None:
    from lastiterate.notions.arrays import sorted_unique

    rng = np.random.default_rng(len(kind))
    for _ in range(300):
        n = 0 if kind == "empty" else int(rng.integers(1, 80))
        if kind == "int":
            a = rng.integers(-5, 5, n)
        elif kind == "float":
            a = np.round(rng.normal(size=n), 1)
        elif kind == "specials":
            a = rng.choice([0.0, -0.0, 1.5, np.inf, -np.inf, 5e-324], n)
        elif kind == "nan":
            a = rng.choice([0.0, np.nan, 1.0], n)
        else:
            a = np.zeros(0)
        want = np.unique(a)
        got = sorted_unique(a)
        assert got.dtype == want.dtype
        assert np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(want))
