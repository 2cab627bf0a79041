"""The reuse of ``account_grid`` (issue 11 section 2) never changes a value.

A sweep skips work only where it cannot change a row: estimate-only bound ids (never a row's best
or composition), paper 002's Thm 3.3 where the exact epsilon of a Gaussian its curve dominates
already exceeds the best of the other bounds, and repeated one-step PLDs / CLT searches.  Every
row is checked here against a fresh ``account`` of that point, column by column, on the benchmark
run (sgd, uniform batches, n = 60000, b = 1500) including its extremes; the Thm 3.3 floor is
checked against Thm 3.3's own reported epsilon and against scipy's normal distribution.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from typing import Any

import pytest
from scipy.optimize import brentq
from scipy.stats import norm

import lastiterate as li
from lastiterate import accountant, sweep
from lastiterate.bounds import Query
from lastiterate.bounds.smooth_bounded_domain import smooth_bounded_domain_thm33
from lastiterate.errors import NotApplicable
from lastiterate.notions import pld
from lastiterate.sweep import account_grid, thm33_cannot_win, thm33_gaussian_floor, to_records

#: the benchmark's run (benchmarks/sweep.py)
BASE: dict[str, Any] = {
    "algorithm": "sgd",
    "sampling": "uniform",
    "n": 60000,
    "batch_size": 1500,
    "epochs": 1,
    "lr": 0.05,
    "noise_std": 0.01,
    "clip": 5.0,
    "strong_convexity": 0.002,
    "smoothness": 32.5,
}
RESULT_COLUMNS = (
    "best_bound",
    "theorem",
    "epsilon",
    "delta",
    "mu",
    "composition_bound",
    "composition_epsilon",
    "composition_delta",
)


def expected_row(report: accountant.Report) -> dict[str, Any]:
    best, comp = report.best, report.composition()
    assert best is not None and comp is not None
    return {
        "best_bound": best.bound,
        "theorem": best.theorem,
        "epsilon": best.epsilon,
        "delta": best.delta,
        "mu": best.mu,
        "composition_bound": comp.bound,
        "composition_epsilon": comp.epsilon,
        "composition_delta": comp.delta,
    }


_FRESH = """
import json, sys
import lastiterate as li
spec = json.loads(sys.stdin.read())
out = []
for fields in spec["runs"]:
    rep = li.account(li.Run(**fields), **spec["query"])
    b, c = rep.best, rep.composition()
    out.append([b.bound, b.theorem, b.epsilon, b.delta, b.mu, c.bound, c.epsilon, c.delta])
print(json.dumps(out))
"""


def fresh_expected(runs: list[li.Run], **query: Any) -> list[dict[str, Any]]:
    """The rows ``account`` gives for ``runs`` in a fresh interpreter: none of the caches a sweep
    filled (shifted-interpolation results, composed PLDs, limit searches) can answer for it."""
    spec = {"runs": [{k: getattr(r, k) for k in li.Run.field_names()} for r in runs]}
    spec["query"] = query  # type: ignore[assignment]
    done = subprocess.run(
        [sys.executable, "-c", _FRESH],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    return [dict(zip(RESULT_COLUMNS, row)) for row in json.loads(done.stdout)]


def exact_gaussian_epsilon(mu: float, delta: float) -> float:
    """mu-GDP's epsilon(delta), solved here from scipy's normal CDF (independent of gdp.py)."""

    def excess(eps: float) -> float:
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2) - delta

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2
    return float(brentq(excess, 0.0, hi, xtol=1e-13, rtol=1e-13))


# ---------------------------------------------------------------------- every cell = account
@pytest.mark.parametrize(
    ("vary", "query", "extra"),
    [
        # the benchmark grid's corners and middle: T = 40 .. 2000, sigma in [0.005, 0.05]
        ({"epochs": [1, 2, 25, 50], "noise_std": [0.005, 0.0123, 0.05]}, {"delta": 1e-5}, {}),
        # extremes: one step, tiny and huge noise, many epochs
        ({"steps": [1, 3], "noise_std": [0.002, 0.01, 5.0]}, {"delta": 1e-5}, {}),
        ({"epochs": [200], "noise_std": [0.01, 0.5]}, {"delta": 1e-8}, {}),
        # delta at a fixed epsilon: no skip, the same values
        ({"epochs": [1, 10], "noise_std": [0.008, 0.03]}, {"epsilon": 1.0}, {}),
        # contraction c = 0.975: Thm 4.9's T -> infinity window search runs (and is shared)
        (
            {"epochs": [1, 2, 5], "noise_std": [0.01, 0.03]},
            {"delta": 1e-5},
            {"strong_convexity": 0.5},
        ),
    ],
)
def test_every_row_equals_a_fresh_account(
    vary: dict[str, list[float]], query: Any, extra: dict[str, Any]
) -> None:
    base = li.Run(**{**BASE, **extra})
    rows = to_records(account_grid(base, vary, as_frame=False, **query))
    names = list(vary)
    assert len(rows) == math.prod(len(v) for v in vary.values())
    wanted = fresh_expected([base.replace(**{n: row[n] for n in names}) for row in rows], **query)
    for row, want in zip(rows, wanted):
        assert row["status"] == "ok"
        assert {c: row[c] for c in RESULT_COLUMNS} == want, (row, want)


def test_the_benchmark_grid_skips_thm33_everywhere_and_values_stay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the benchmark run Thm 3.3 (about 8x composition's epsilon) is never evaluated by the
    sweep: the reuse is exercised, not bypassed, and the rows still equal ``account``."""
    calls: list[tuple[str, ...]] = []
    real = accountant.account

    def recording(run: li.Run, **kw: Any) -> Any:
        calls.append(tuple(kw["bounds"]))
        return real(run, **kw)

    monkeypatch.setattr(accountant, "account", recording)
    base = li.Run(**BASE)
    vary: dict[str, list[float]] = {"epochs": [1, 4], "noise_std": [0.006, 0.02]}
    rows = to_records(account_grid(base, vary, delta=1e-5, as_frame=False))
    assert len(calls) == 4
    assert all("smooth-bounded-domain" not in ids and "clt" not in ids for ids in calls)
    assert all("gdp-composition" in ids and "shifted-interpolation" in ids for ids in calls)
    monkeypatch.setattr(accountant, "account", real)
    for row in rows:
        full = li.account(base.replace(epochs=row["epochs"], noise_std=row["noise_std"]))
        assert {c: row[c] for c in RESULT_COLUMNS} == expected_row(full)
        thm33 = full.result("smooth-bounded-domain")
        assert thm33 is not None and thm33.epsilon > row["epsilon"]  # skipped, and it loses


def test_when_thm33_might_win_the_full_report_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """No certain loss (forced here): the run is accounted again with every bound."""
    calls: list[tuple[str, ...]] = []
    real = accountant.account

    def recording(run: li.Run, **kw: Any) -> Any:
        calls.append(tuple(kw["bounds"]))
        return real(run, **kw)

    monkeypatch.setattr(accountant, "account", recording)
    monkeypatch.setattr(sweep, "thm33_cannot_win", lambda run, delta, eps: False)
    base = li.Run(**BASE)
    rows = to_records(account_grid(base, {"epochs": [2]}, delta=1e-5, as_frame=False))
    assert len(calls) == 2
    assert "smooth-bounded-domain" not in calls[0] and "smooth-bounded-domain" in calls[1]
    monkeypatch.setattr(accountant, "account", real)
    assert {c: rows[0][c] for c in RESULT_COLUMNS} == expected_row(
        li.account(base.replace(epochs=2))
    )


def test_estimate_only_ids_are_not_evaluated_but_bounds_are() -> None:
    ids = sweep._table_bound_ids(None)
    assert "clt" not in ids
    assert {"gdp-composition", "pld-composition", "shifted-interpolation"} <= set(ids)
    assert sweep._table_bound_ids(["clt"]) == ()
    assert sweep._table_bound_ids(["clt", "pabi"]) == ("pabi",)


def test_estimate_theorems_are_skipped_for_the_table_only() -> None:
    """The table's accounting evaluates no estimate (the CLT versions of Thms 4.9 / 4.10 share
    the shifted-interpolation id with bounds); its best and composition results are the full
    report's; a plain ``account`` still reports the estimates."""
    run = li.Run(**{**BASE, "epochs": 3, "noise_std": 0.02})
    full = accountant.account(run, delta=1e-5)
    assert any(r.kind == "estimate" and r.bound == "shifted-interpolation" for r in full.results)
    table = sweep._without_estimates(accountant.account, run, delta=1e-5)
    assert table.results and all(r.kind == "bound" for r in table.results)
    assert table.best == full.best and table.composition() == full.composition()
    # only estimates apply: accounted in full, so the reason is account's
    alone = sweep._without_estimates(accountant.account, run, delta=1e-5, bounds=("clt",))
    assert alone.best is None
    assert alone.no_bound_reason() == full_reason(run)
    assert any(r.kind == "estimate" for r in accountant.account(run, delta=1e-5).results)


def test_account_kinds() -> None:
    """``kinds`` keeps the theorems of those kinds only, and is checked."""
    run = li.Run(**{**BASE, "epochs": 3, "noise_std": 0.02})
    full = li.account(run, delta=1e-5)
    bounds_only = li.account(run, delta=1e-5, kinds=("bound",))
    estimates = li.account(run, delta=1e-5, kinds=["estimate"])
    assert {r.kind for r in full.results} == {"bound", "estimate"}
    assert [r for r in full.results if r.kind == "bound"] == list(bounds_only.results)
    assert [r for r in full.results if r.kind == "estimate"] == list(estimates.results)
    assert estimates.best is None and bounds_only.best == full.best
    for bad in ("bound", ("bounds",), [1]):
        with pytest.raises(li.ParameterError, match="kinds"):
            li.account(run, delta=1e-5, kinds=bad)  # type: ignore[arg-type]


def full_reason(run: li.Run) -> str | None:
    reason = accountant.account(run, delta=1e-5, bounds=("clt",)).no_bound_reason()
    assert reason is not None and "only estimates apply" in reason
    return reason


# ---------------------------------------------------------------------- the Thm 3.3 floor
@pytest.mark.parametrize(
    ("inputs", "tight"),
    [
        ({"noise_std": 0.005, "epochs": 1}, True),
        ({"noise_std": 0.01, "epochs": 3}, True),
        ({"noise_std": 0.05, "epochs": 50}, True),
        ({"noise_std": 0.3, "steps": 1}, True),
        ({"noise_std": 0.02, "epochs": 2, "batch_size": 60000, "algorithm": "gd"}, True),
        # small batches, per-step mu = 5: the sampled-Gaussian term binds, the floor is loose
        ({"noise_std": 0.02, "epochs": 4, "batch_size": 100}, False),
    ],
)
@pytest.mark.parametrize("delta", [1e-5, 1e-9])
def test_thm33_floor_is_below_thm33(inputs: dict[str, Any], tight: bool, delta: float) -> None:
    """The floor G_mu, mu = (L/(b sigma)) sqrt(T p), has an exact epsilon (solved with scipy) at
    most Thm 3.3's reported one, and close to it where the q-linear term binds (large batches)."""
    fields = {**BASE, **inputs}
    if fields.get("algorithm") == "gd":
        fields.pop("sampling")
    if "steps" in inputs:
        fields.pop("epochs")
    run = li.Run(**fields)
    mu = thm33_gaussian_floor(run)
    assert mu is not None
    assert mu == pytest.approx(run.L / (run.b * run.sigma) * math.sqrt(run.T * run.p), rel=1e-12)
    thm33 = smooth_bounded_domain_thm33(run, Query(delta=delta)).epsilon
    floor = exact_gaussian_epsilon(mu, delta)
    assert floor <= thm33 * (1 + 1e-9)
    assert floor > (0.5 if tight else 0.01) * thm33  # a useful floor, not a trivial one
    # the skip rule: a certain loss just below the floor, never at or above Thm 3.3's value
    assert thm33_cannot_win(run, delta, 0.999 * floor)
    assert not thm33_cannot_win(run, delta, thm33)
    assert not thm33_cannot_win(run, delta, 1.001 * floor)


def test_thm33_floor_only_where_thm33_is_the_only_theorem_of_its_id() -> None:
    bounded = li.Run(**{**BASE, "diameter": 10.0})  # Thm 3.4 (a window bound) applies instead
    assert thm33_gaussian_floor(bounded) is None
    assert not thm33_cannot_win(bounded, 1e-5, 1e-9)
    cgd = li.Run(
        algorithm="cgd", n=6000, batch_size=1500, epochs=2, lr=0.05, noise_std=0.01,
        sensitivity=10.0, smoothness=32.5,
    )  # fmt: skip
    assert thm33_gaussian_floor(cgd) is None
    with pytest.raises(NotApplicable):
        smooth_bounded_domain_thm33(cgd, Query(delta=1e-5))
    # outside the closed form's accurate range: never skipped
    huge = li.Run(**{**BASE, "noise_std": 50.0})
    mu = thm33_gaussian_floor(huge)
    assert mu is not None and mu < 1e-3
    assert not thm33_cannot_win(huge, 1e-5, 0.0)


# ---------------------------------------------------------------------- shared one-step PLDs
def test_one_step_plds_are_shared_across_epochs_and_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[tuple[float, float, float]] = []
    real = pld.symmetric_subsampled_gaussian_pld

    def counting(p: float, mu: float, **kw: Any) -> Any:
        built.append((p, mu, kw["discretization"]))
        return real(p, mu, **kw)

    monkeypatch.setattr(pld, "symmetric_subsampled_gaussian_pld", counting)
    base = li.Run(**BASE)
    epochs = [3, 4, 5, 6]
    rows = to_records(
        account_grid(base, {"epochs": epochs, "noise_std": [0.0071]}, delta=1e-5, as_frame=False)
    )
    assert pld.symmetric_subsampled_gaussian_pld is counting  # the sweep's hook is gone
    assert len(built) == len(set(built))  # no one-step PLD built twice
    default = [b for b in built if b[2] == 1e-4]
    assert len(default) == 1  # the default grid's C_p(G_mu): once for the four epochs values
    wanted = fresh_expected([base.replace(epochs=r["epochs"], noise_std=0.0071) for r in rows])
    assert [{c: r[c] for c in RESULT_COLUMNS} for r in rows] == wanted


def test_hook_is_removed_when_a_point_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    real = pld.symmetric_subsampled_gaussian_pld

    def boom(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("internal error of a theorem")

    monkeypatch.setattr(accountant, "account", boom)
    with pytest.raises(RuntimeError):
        account_grid(li.Run(**BASE), {"epochs": [1]}, delta=1e-5)
    assert pld.symmetric_subsampled_gaussian_pld is real


def test_sweeps_in_threads_restore_the_constructor() -> None:
    """Two sweeps at once (threads) take turns with the hook: both rows equal account and the
    engine's constructor is the original afterwards."""
    import threading

    real = pld.symmetric_subsampled_gaussian_pld
    base = li.Run(**BASE)
    out: dict[float, list[dict[str, Any]]] = {}

    def one(sigma: float) -> None:
        out[sigma] = to_records(
            account_grid(base, {"epochs": [1, 2], "noise_std": [sigma]}, as_frame=False)
        )

    threads = [threading.Thread(target=one, args=(s,)) for s in (0.009, 0.02)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert pld.symmetric_subsampled_gaussian_pld is real
    for sigma, rows in out.items():
        wanted = fresh_expected([base.replace(epochs=r["epochs"], noise_std=sigma) for r in rows])
        assert [{c: r[c] for c in RESULT_COLUMNS} for r in rows] == wanted


def test_remembered_limit_search_and_clt_theta_equal_fresh_ones() -> None:
    """Thm 4.9 at T = 80 after T = 40 (its tau = infinity search and CLT theta served from
    memory) equals Thm 4.9 at T = 80 computed with both memories emptied, detail by detail."""
    from lastiterate.bounds import shifted_interpolation as si

    thm49 = si.noisy_sgd_strongly_convex.__wrapped__  # type: ignore[attr-defined]
    run = li.Run(**{**BASE, "strong_convexity": 0.5, "noise_std": 0.03})
    query = Query(delta=1e-5)
    thm49(run.replace(epochs=1), query)
    remembered = thm49(run.replace(epochs=2), query)
    assert remembered.details["limit_search"] == "done"
    si._LIMIT_SEARCHES.clear()
    si._THETA_CLT_CACHE.clear()
    si._gaussian_value_at.cache_clear()
    fresh = thm49(run.replace(epochs=2), query)
    assert si._LIMIT_SEARCHES  # the fresh evaluation searched (and remembered) again
    assert remembered.epsilon == fresh.epsilon
    assert remembered.details == fresh.details
