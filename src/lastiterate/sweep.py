"""Sweeps in one call: the accountant over a grid of runs (issue 11, section 2).

    import lastiterate as li

    run = li.Run(algorithm="sgd", sampling="uniform", n=60000, batch_size=1500, epochs=1, lr=0.05,
                 noise_std=0.01, clip=5.0, strong_convexity=0.002, smoothness=32.5)
    table = li.account_grid(run, vary={"epochs": [1, 2, 5, 10], "noise_std": [0.005, 0.01, 0.02]})

:func:`account_grid` evaluates :func:`lastiterate.accountant.account` at every point of the
Cartesian product of ``vary`` and returns one row per point, in grid order (the first varied
field changes slowest): the varied values, the best bound (id, theorem, epsilon, delta, mu), the
composition bound (:meth:`lastiterate.accountant.Report.composition`, every iterate released) and
the run's derived quantities that change over the grid.  Every number is exactly what
``account`` returns for that point's :class:`~lastiterate.run.Run` (same theorems, same
assumptions checked in code, same pessimistic discretisation): a sweep never reports a smaller
epsilon than the single-run accountant.

Reuse across points (only where it cannot change a value):

* each distinct :class:`Run` is accounted once (two grid points that describe the same run, e.g.
  a repeated value, share one evaluation);
* the distinct runs are evaluated grouped by their per-step pair (sampling rate p, per-step scale
  L/(b sigma)) and, within a group, by the number of steps T, so that the accountant's own caches
  of per-step privacy-loss distributions (one per (p, mu)) are hit by consecutive points;
* within a sweep, the one-step PLD C_p(G_mu) on a grid is built once for every T
  (:func:`_shared_per_step_plds`), and Thms 4.9 / 4.10 remember their T-independent CLT choices;
* only what a row reports is computed: estimates are not evaluated (bound ids that only estimate,
  the privacy CLT, and the CLT versions of Thms 4.9 / 4.10 that share a bound id with bounds,
  :func:`_without_estimates`; a point where no bound applies is accounted in full, for its
  reason), and paper 002's Thm 3.3 is left out where the exact epsilon of a Gaussian that its
  curve dominates already exceeds the best of the other bounds (:func:`thm33_cannot_win`), so it
  can be neither the best bound nor a tie.  A bound left out can only make a row's epsilon
  larger, never smaller; the tests check every row against a fresh ``account``.

Where the time goes (issue 11's 50 x 20 grid of a sampled run, benchmarks/sweep.py): about 80%
of a point is Thm 4.8's composition C_p(G_mu)^{⊗T} (the PLD engine's T-fold FFT power with its
optimistic twin), which is T-dependent and must be the accountant's own to give its values.  What
of it does not depend on T is remembered on the one-step PMF that this module shares across T
(the exact log-CGFs of the Chernoff window, :func:`lastiterate.notions.pld.kernels._exact_cgf`);
the rest (the forward transform on a T-dependent FFT length, the power, the inverse transform,
epsilon from the composed PMF's upper tail) is the same arithmetic as ``account``'s, bit for bit.

A point that :class:`Run` refuses (e.g. a batch size above n, a learning rate schedule of the wrong
length) is a row with ``status == "invalid"`` and the refusal in ``reason``; a valid point where
no theorem applies has ``status == "no-bound"`` and the accountant's ``no_bound_reason``.

The table is a ``pandas.DataFrame`` when pandas is importable (``as_frame=None``, the default),
else a list of records (dicts); :func:`plot_grid` draws epsilon against epochs (or steps), one line
per value of the other varied fields (best bound solid, composition dashed).
"""

from __future__ import annotations

import functools
import math
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import fields
from itertools import product
from pathlib import Path
from typing import Any

from lastiterate.errors import NotApplicable, ParameterError, check_progress
from lastiterate.run import Run, Setting

__all__ = [
    "MAX_GRID_POINTS",
    "VARY_FIELDS",
    "account_grid",
    "grid_columns",
    "plot_grid",
    "to_records",
]

#: The largest number of grid points :func:`account_grid` accepts (a sampled run costs up to a few
#: tenths of a second per distinct point: 10 000 points is already an hour of accounting).
MAX_GRID_POINTS = 10_000

#: The :class:`Run` inputs a sweep may vary (every constructor input).
VARY_FIELDS: tuple[str, ...] = Run.field_names()

#: Mutually exclusive inputs: varying one clears the other in the base run (as :meth:`Run.replace`).
_EXCLUSIVE = {
    "steps": "epochs",
    "epochs": "steps",
    "noise_std": "noise_multiplier",
    "noise_multiplier": "noise_std",
}

#: Result columns of every row, after the varied fields (the derived columns follow them).
RESULT_COLUMNS: tuple[str, ...] = (
    "status",
    "best_bound",
    "theorem",
    "epsilon",
    "delta",
    "mu",
    "composition_bound",
    "composition_epsilon",
    "composition_delta",
)
#: Columns after the derived quantities.
TRAILING_COLUMNS: tuple[str, ...] = ("reason", "failures")

#: Derived quantities (:class:`~lastiterate.run.Setting` fields), reported when they change.
_DERIVED = tuple(
    f.name
    for f in fields(Setting)
    if f.name
    not in ("contraction_note", "lr_schedule", "algorithm", "sampling", "adjacency", "convex")
)

Progress = Callable[[str], None]


# ---------------------------------------------------------------------- the grid
def _check_vary(vary: Mapping[str, Any]) -> dict[str, tuple[Any, ...]]:
    """``vary`` validated: Run fields, non-empty value lists, no exclusive pair, under the cap."""
    if not isinstance(vary, Mapping) or not vary:
        raise ParameterError("vary", vary, "must be a non-empty mapping {run field: [values, ...]}")
    out: dict[str, tuple[Any, ...]] = {}
    for name, values in vary.items():
        if name not in VARY_FIELDS:
            raise ParameterError(
                "vary", name, "must name a Run field: one of " + ", ".join(VARY_FIELDS)
            )
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise ParameterError(f"vary[{name!r}]", values, "must be a non-empty list of values")
        items = tuple(values)
        if not items:
            raise ParameterError(f"vary[{name!r}]", values, "must be a non-empty list of values")
        for v in items:  # a NaN or inf would be echoed into its (invalid) row: no standard JSON
            if isinstance(v, float) and not math.isfinite(v):
                raise ParameterError(f"vary[{name!r}]", v, "values must be finite numbers")
        out[name] = items
    for a, b in _EXCLUSIVE.items():
        if a in out and b in out:
            raise ParameterError(
                "vary",
                f"{a} and {b}",
                f"vary at most one of {a} and {b} (they are exclusive inputs)",
            )
    size = math.prod(len(v) for v in out.values())
    if size > MAX_GRID_POINTS:
        raise ParameterError(
            "vary",
            " x ".join(f"{k}[{len(v)}]" for k, v in out.items()),
            f"gives {size} grid points: at most {MAX_GRID_POINTS} (MAX_GRID_POINTS) are accepted",
        )
    return out


def _base_inputs(run: Run | Mapping[str, Any]) -> dict[str, Any]:
    """The constructor inputs of the base run (a :class:`Run` or a mapping of its inputs)."""
    if isinstance(run, Run):
        return {k: getattr(run, k) for k in Run.field_names()}
    if not isinstance(run, Mapping):
        raise ParameterError("run", run, "must be a Run or a mapping of Run inputs")
    unknown = [k for k in run if k not in VARY_FIELDS]
    if unknown:
        raise ParameterError(
            "run", unknown[0], "is not a Run input: use one of " + ", ".join(VARY_FIELDS)
        )
    return dict(run)


def _point_inputs(base: dict[str, Any], point: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs of one grid point: the base with the varied values (exclusive partner cleared)."""
    inputs = dict(base)
    for name in point:
        other = _EXCLUSIVE.get(name)
        if other is not None:
            inputs[other] = None
    inputs.update(point)
    return inputs


def _run_key(run: Run) -> str:
    """A hashable identity of a run's inputs (``repr`` is exact for floats; lr may be a list)."""
    return repr(run)


def _reuse_order(run: Run) -> tuple[float, float, int, str]:
    """Sort key: runs sharing a per-step pair (p, L/(b sigma)) are consecutive, by increasing T."""
    return (run.p, run.per_step_mu, run.T, repr(run))


# ---------------------------------------------------------------------- evaluation
#: the bound id and theorem of paper 002's Thm 3.3 (DPSGD-GC), the one theorem a sweep may skip
_THM33_ID = "smooth-bounded-domain"
#: safety margins of :func:`thm33_cannot_win` (relative, on delta and on epsilon): a skip needs a
#: clear loss, far beyond the floating-point error of the closed forms
_SKIP_DELTA_MARGIN = 1e-6
_SKIP_EPSILON_MARGIN = 1e-9


def _table_bound_ids(bounds: Sequence[str] | None) -> tuple[str, ...]:
    """The bound ids a sweep evaluates: those of ``bounds`` (default: all) with at least one
    theorem of kind ``"bound"``.

    Estimates (the privacy CLT) never enter ``Report.best`` nor ``Report.composition``, the only
    results a grid row reports, so ids that only estimate are not evaluated.
    """
    # lazy: `lastiterate sweep --help` imports this module
    from lastiterate.bounds import BOUND_IDS, registered

    specs = registered(bounds)
    wanted = {s.id for s in specs if s.kind == "bound"}
    return tuple(b for b in BOUND_IDS if b in wanted)


def thm33_gaussian_floor(run: Run) -> float | None:
    """A mu whose exact mu-GDP epsilon(delta) is a lower bound of the epsilon the accountant
    reports for paper 002's Thm 3.3 (``smooth-bounded-domain``, DPSGD-GC, no diameter) at any
    delta; None where Thm 3.3 cannot apply (a diameter is declared: Thm 3.4 is used instead).

    Thm 3.3's curve is ``eps(alpha) = T max(S_alpha(q, b sigma/L), q alpha (L/b)^2/(2 sigma^2))``
    (reading 1's two-direction per-step term, :func:`lastiterate.bounds.smooth_bounded_domain.
    smooth_bounded_domain_thm33`), so ``eps(alpha) >= rho alpha`` with ``rho = T p (L/(b
    sigma))^2 / 2``: the RDP curve of the Gaussian mechanism G_mu, ``mu = sqrt(2 rho)``.  Every
    RDP -> (eps, delta) conversion the accountant uses is valid for G_mu and increases with the RDP
    value, so at every order it gives at least G_mu's exact epsilon(delta) (docs/theorems.md 1.2,
    1.5); so does their minimum over orders.  ``tests/test_sweep_speed.py`` checks the floor
    against Thm 3.3's reported value.
    """
    if run.D is not None or run.M is None or run.algorithm not in ("gd", "sgd"):
        return None
    step_mu = run.L / (run.b * run.sigma)
    return step_mu * math.sqrt(run.T * min(1.0, run.p))


def thm33_cannot_win(run: Run, delta: float, best_epsilon: float) -> bool:
    """True when Thm 3.3's epsilon at ``delta`` surely exceeds ``best_epsilon`` (so it is neither
    the best bound nor a tie): the exact epsilon of :func:`thm33_gaussian_floor`'s G_mu is above
    ``best_epsilon`` with a margin (G_mu's delta at a slightly larger epsilon still exceeds
    ``delta``).  False whenever that is not certain (mu outside [1e-3, 40], where the closed form
    loses accuracy, a non-finite best)."""
    mu = thm33_gaussian_floor(run)
    if mu is None or not 1e-3 <= mu <= 40.0 or not math.isfinite(best_epsilon):
        return False
    # lazy: numpy/scipy (`lastiterate sweep --help` imports this module)
    from lastiterate.notions.gdp import gdp_delta

    eps = best_epsilon * (1.0 + _SKIP_EPSILON_MARGIN) + 1e-12
    return float(gdp_delta(eps, mu)) > delta * (1.0 + _SKIP_DELTA_MARGIN)


def _account_for_table(
    account: Callable[..., Any],
    run: Run,
    *,
    delta: float | None,
    epsilon: float | None,
    bounds: tuple[str, ...],
) -> Any:
    """``account(run, ...)`` restricted to what a grid row reports: the best bound and the
    composition bound.  Both equal the full report's.

    Thm 3.3 of paper 002 (composition-like, T times a per-step term that is at least the
    Gaussian's) is first left out; if :func:`thm33_cannot_win` shows it loses to the best of the
    others, that report is returned, else the run is accounted again with it (the other theorems'
    work is then served from their caches).  Leaving a bound out can only raise a row's epsilon,
    never lower it.
    """
    if delta is None or _THM33_ID not in bounds or thm33_gaussian_floor(run) is None:
        return _without_estimates(account, run, delta=delta, epsilon=epsilon, bounds=bounds)
    others = tuple(b for b in bounds if b != _THM33_ID)
    if others:
        first = _without_estimates(account, run, delta=delta, epsilon=epsilon, bounds=others)
        best = first.best
        if best is not None and thm33_cannot_win(run, delta, best.epsilon):
            return first
    return _without_estimates(account, run, delta=delta, epsilon=epsilon, bounds=bounds)


def _without_estimates(account: Callable[..., Any], run: Run, **query: Any) -> Any:
    """``account(run, **query)`` with no theorem of kind ``"estimate"`` evaluated
    (``kinds=("bound",)``; the CLT versions of Thms 4.9 / 4.10 share a bound id with bounds, so
    they are left out theorem by theorem): ``Report.best`` and ``Report.composition`` are chosen
    among bounds only, so both are those of the full report.  A point where no bound applies is
    accounted again in full, so that its reason (which mentions the estimates) is
    ``account``'s."""
    report = account(run, kinds=("bound",), **query)
    return report if report.best is not None else account(run, **query)


@contextmanager
def _shared_per_step_plds() -> Iterator[None]:
    """Within a sweep, one one-step PLD per distinct (p, mu, grid) for every number of steps.

    The composition bounds of a sampled run build C_p(G_mu) on a grid (the T-independent part,
    20-25% of a composition) and then compose it T times; the pure constructor
    ``lastiterate.notions.pld.symmetric_subsampled_gaussian_pld`` is memoised here on its
    arguments and on the engine's context (grid budget, tilt floor), so the points of one noise
    level share it.  A :class:`~lastiterate.notions.pld.Pld` is immutable, so the values are
    those of ``account``.  The memo lives only for the sweep; sweeps in several threads take
    turns (a re-entrant lock), so each restores the constructor it found.
    """
    # lazy: the PLD engine (numpy) is loaded by the accounting anyway
    from lastiterate.notions import pld

    with _HOOK_LOCK, _memoised_constructor(pld):
        yield


_HOOK_LOCK = threading.RLock()


@contextmanager
def _memoised_constructor(pld: Any) -> Iterator[None]:
    """``pld.symmetric_subsampled_gaussian_pld`` memoised while the context is open."""
    real = pld.symmetric_subsampled_gaussian_pld
    memo: dict[tuple[Any, ...], Any] = {}

    @functools.wraps(real)
    def shared(p: float, mu: float, **kwargs: Any) -> Any:
        key = (
            float(p),
            float(mu),
            tuple(sorted(kwargs.items())),
            pld.max_grid_points(),
            pld.tilt_delta_floor(),
        )
        hit = memo.get(key)
        if hit is None:
            hit = real(p, mu, **kwargs)
            # the sweep evaluates the runs grouped by their per-step pair (p, mu): a new pair
            # means the earlier ones are done, and their PMFs (which remember the forward
            # transforms of their compositions, kernels._untilted_spectrum) can go
            if memo and next(iter(memo))[:2] != key[:2]:
                memo.clear()
            if len(memo) >= _PER_STEP_MEMO:
                memo.pop(next(iter(memo)))
            memo[key] = hit
        return hit

    pld.symmetric_subsampled_gaussian_pld = shared
    try:
        yield
    finally:
        pld.symmetric_subsampled_gaussian_pld = real


#: one-step PLDs of one per-step pair kept by a sweep (a fine one holds up to ~1e6 points, 4
#: arrays, and the spectrum of its latest composition length)
_PER_STEP_MEMO = 8


def _result_row(report: Any) -> dict[str, Any]:
    best = report.best
    comp = report.composition()
    failures = [f.bound for f in report.failures]
    if best is None:
        return {
            "status": "no-bound",
            "best_bound": None,
            "theorem": None,
            "epsilon": None,
            "delta": None,
            "mu": None,
            "composition_bound": None,
            "composition_epsilon": None,
            "composition_delta": None,
            "reason": report.no_bound_reason(),
            "failures": failures,
        }
    return {
        "status": "ok",
        "best_bound": best.bound,
        "theorem": best.theorem,
        "epsilon": best.epsilon,
        "delta": best.delta,
        "mu": best.mu,
        "composition_bound": None if comp is None else comp.bound,
        "composition_epsilon": None if comp is None else comp.epsilon,
        "composition_delta": None if comp is None else comp.delta,
        "reason": None,
        "failures": failures,
    }


def _invalid_row(reason: str) -> dict[str, Any]:
    row: dict[str, Any] = {c: None for c in RESULT_COLUMNS}
    row.update(status="invalid", reason=" ".join(reason.split()), failures=[])
    return row


def _format_point(point: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in point.items())


def _changing_derived(runs: Sequence[Run | None], varied: Sequence[str]) -> list[str]:
    """Derived quantities (Setting fields), not varied, with several values on valid points."""
    valid = [r for r in runs if r is not None]
    out = []
    for name in _DERIVED:
        if name in varied:
            continue
        values = {repr(getattr(r.derived, name)) for r in valid}
        if len(values) > 1:
            out.append(name)
    return out


def _progress_bar(total: int, show: bool | None) -> Any:
    """A tqdm bar on stderr (``show=None``: only when stderr is a terminal), else None."""
    if show is False or (show is None and not sys.stderr.isatty()):
        return None
    # lazy: only for an interactive progress bar (CLI start-up)
    from tqdm import tqdm

    return tqdm(total=total, desc="accounting grid", unit="point", file=sys.stderr, leave=False)


def account_grid(
    run: Run | Mapping[str, Any],
    vary: Mapping[str, Sequence[Any]],
    *,
    delta: float | None = None,
    epsilon: float | None = None,
    bounds: Sequence[str] | None = None,
    progress: Progress | None = None,
    show_progress: bool | None = None,
    as_frame: bool | None = None,
) -> Any:
    """Account every point of the grid ``vary`` around the base ``run``: one row per point.

    Args:
        run: the base run, a :class:`Run` or a mapping of its inputs (which may leave out the
            varied fields, e.g. ``epochs`` when ``vary`` has ``epochs``).
        vary: ``{field: [values, ...]}`` for any :class:`Run` input (``epochs``, ``steps``,
            ``noise_std``, ``noise_multiplier``, ``batch_size``, ``lr``, ``clip``, ...); the
            grid is their Cartesian product, in order (the first field changes slowest).  Varying
            ``steps`` clears the base's ``epochs`` and vice versa (likewise ``noise_std`` /
            ``noise_multiplier``); varying both of such a pair is refused.  At most
            :data:`MAX_GRID_POINTS` points.
        delta, epsilon: the query, as for :func:`lastiterate.accountant.account` (default:
            epsilon at delta = 1e-5).
        bounds: restrict to these bound ids (as ``account``).
        progress: called with a short message after every grid point.
        show_progress: a tqdm bar on stderr; ``None`` (default) shows it only when stderr is a
            terminal.
        as_frame: return a pandas DataFrame (True), a list of dicts (False), or a DataFrame when
            pandas is importable (None).

    Returns:
        the table, one row per grid point with the columns of :func:`grid_columns`: the varied
        fields, ``status`` (``"ok"``, ``"no-bound"`` or ``"invalid"``), ``best_bound``,
        ``theorem``, ``epsilon``, ``delta``, ``mu`` (the best bound's, None unless GDP),
        ``composition_bound`` / ``composition_epsilon`` / ``composition_delta`` (the tightest
        composition bound: every iterate released), the derived quantities of the run that change
        over the grid (e.g. ``steps`` when epochs vary, ``per_step_mu`` when the noise varies),
        ``reason`` (why a point is invalid or has no bound) and ``failures`` (bound ids whose
        theorem raised an internal error at that point; their values are left out, which can
        only make the reported epsilon larger; estimates and a Thm 3.3 that surely loses are
        not evaluated, see the module docstring).

    Raises:
        ParameterError: a malformed ``vary`` (unknown field, empty list, exclusive pair, more than
            :data:`MAX_GRID_POINTS` points), an invalid query or bound id.  Invalid grid points are
            rows, not errors.
    """
    # lazy: `lastiterate sweep --help` imports this module; these load numpy/scipy
    from lastiterate import accountant
    from lastiterate.bounds import Query, registered

    check_progress(progress)
    grid = _check_vary(vary)
    base = _base_inputs(run)
    if delta is None and epsilon is None:
        delta = 1e-5
    Query(delta=delta, epsilon=epsilon)  # validate the query once (ParameterError)
    if bounds is not None:
        registered(bounds)  # validate the bound ids once (ParameterError)

    names = list(grid)
    points = [dict(zip(names, values)) for values in product(*(grid[n] for n in names))]
    runs: list[Run | None] = []
    invalid: dict[int, str] = {}
    for i, point in enumerate(points):
        try:
            runs.append(Run(**_point_inputs(base, point)))
        except (ValueError, TypeError, NotApplicable) as exc:  # ParameterError is a ValueError
            runs.append(None)
            invalid[i] = str(exc)

    keys = [None if r is None else _run_key(r) for r in runs]
    distinct: dict[str, Run] = {}
    by_key: dict[str, list[int]] = {}  # the grid points of each distinct run
    for i, (k, r) in enumerate(zip(keys, runs)):
        if k is not None and r is not None:
            distinct.setdefault(k, r)
            by_key.setdefault(k, []).append(i)

    table_ids = _table_bound_ids(bounds)
    bar = _progress_bar(len(points), show_progress)
    done = 0

    def tick(message: str) -> None:
        nonlocal done
        done += 1
        if bar is not None:
            bar.set_postfix_str(message, refresh=False)
            bar.update(1)
        if progress is not None:
            progress(f"{done}/{len(points)} {message}")

    evaluated: dict[str, dict[str, Any]] = {}
    with _shared_per_step_plds():
        try:
            for i in invalid:
                tick(f"{_format_point(points[i])}: invalid")
            for k_run, r in sorted(distinct.items(), key=lambda kv: _reuse_order(kv[1])):
                try:
                    report = _account_for_table(
                        accountant.account, r, delta=delta, epsilon=epsilon, bounds=table_ids
                    )
                except (ParameterError, NotApplicable) as exc:
                    evaluated[k_run] = _invalid_row(str(exc))
                else:
                    evaluated[k_run] = _result_row(report)
                for i in by_key[k_run]:
                    value = evaluated[k_run]["epsilon" if epsilon is None else "delta"]
                    tick(
                        f"{_format_point(points[i])} -> "
                        + ("no bound" if value is None else f"{value:.4g}")
                    )
        finally:
            if bar is not None:
                bar.close()

    derived = _changing_derived(runs, names)
    records: list[dict[str, Any]] = []
    for i, (point, r, key) in enumerate(zip(points, runs, keys)):
        row: dict[str, Any] = dict(point)
        res = _invalid_row(invalid[i]) if key is None else evaluated[key]
        for c in RESULT_COLUMNS:
            row[c] = res[c]
        for name in derived:
            row[name] = None if r is None else _plain(getattr(r.derived, name))
        row["reason"] = res["reason"]
        row["failures"] = list(res["failures"])
        records.append(row)
    return _table(
        records, names + list(RESULT_COLUMNS) + derived + list(TRAILING_COLUMNS), as_frame
    )


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _table(records: list[dict[str, Any]], columns: list[str], as_frame: bool | None) -> Any:
    if as_frame is False:
        return records
    # lazy: pandas is optional (as_frame)
    try:
        import pandas as pd
    except ImportError:
        if as_frame:
            raise ModuleNotFoundError("as_frame=True needs pandas: pip install pandas") from None
        return records
    return pd.DataFrame.from_records(records, columns=columns)


def to_records(table: Any) -> list[dict[str, Any]]:
    """The rows of an :func:`account_grid` table as a list of dicts (a DataFrame or records)."""
    if isinstance(table, list):
        return table
    records = table.to_dict(orient="records")
    # pandas stores a missing number as NaN: give back None, as the records table has it
    return [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        for row in records
    ]


def grid_columns(table: Any) -> list[str]:
    """The column names of an :func:`account_grid` table, in order."""
    if isinstance(table, list):
        return list(table[0]) if table else []
    return [str(c) for c in table.columns]


# ---------------------------------------------------------------------- plot
def plot_grid(table: Any, path: Path | str, *, title: str | None = None) -> Path:
    """Plot epsilon against epochs (or steps) from an :func:`account_grid` table, one line per
    value of the other varied fields (e.g. one per noise level): the best bound solid, the
    composition bound (every iterate released) dashed in the same colour.  A table accounted at a
    fixed epsilon (``account_grid(..., epsilon=E)``) plots delta instead.  Invalid points, points
    without a bound and infinite values are left out.  matplotlib is imported here (install the
    ``plot`` extra).

    Raises ParameterError when the table varies neither epochs nor steps (no x axis).
    """
    rows = to_records(table)
    columns = grid_columns(table)
    first_result = columns.index("status") if "status" in columns else len(columns)
    varied = columns[:first_result]
    x_name = next((n for n in ("epochs", "steps") if n in varied), None)
    if x_name is None:
        raise ParameterError("plot", "", "needs a grid that varies epochs or steps (the x axis)")
    series_names = [n for n in varied if n != x_name]
    ok_rows = [r for r in rows if r["status"] == "ok"]
    fixed_epsilon = (
        len({r["epsilon"] for r in ok_rows}) == 1 and len({r["delta"] for r in ok_rows}) > 1
    )
    y_name = "delta" if fixed_epsilon else "epsilon"
    # lazy: matplotlib (the plot extra) only when a plot is asked for
    from lastiterate.plotting import _pyplot, save_png

    plt = _pyplot()

    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[n] for n in series_names), []).append(row)
    fig, ax = plt.subplots(figsize=(7.0, 4.8))
    keys = list(groups)
    # many numeric series of one field (e.g. 20 noise levels): a colour scale instead of a legend
    scale = (
        len(series_names) == 1
        and len(keys) > 6
        and all(isinstance(k[0], (int, float)) and float(k[0]) > 0 for k in keys)
    )
    cmap = plt.get_cmap("viridis")
    if scale:
        from matplotlib.colors import LogNorm, Normalize

        values = [float(k[0]) for k in keys]
        norm: Any = (
            LogNorm(min(values), max(values))
            if max(values) / min(values) > 10
            else Normalize(min(values), max(values))
        )
    positive: list[float] = []
    for k, key in enumerate(keys):
        ok = sorted((r for r in groups[key] if r["status"] == "ok"), key=lambda r: float(r[x_name]))
        if not ok:
            continue
        label = ", ".join(
            f"{n}={v:.4g}" if isinstance(v, float) else f"{n}={v}"
            for n, v in zip(series_names, key)
        )
        color = cmap(norm(float(key[0]))) if scale else cmap(k / max(1, len(keys) - 1) * 0.9)
        ok = [r for r in ok if math.isfinite(float(r[y_name]))]
        xs = [float(r[x_name]) for r in ok]
        best = [float(r[y_name]) for r in ok]
        ax.plot(xs, best, "-o", ms=2.5, lw=1.6, color=color, label=None if scale else label)
        comp = [
            (x, float(r["composition_" + y_name]))
            for x, r in zip(xs, ok)
            if r["composition_" + y_name] is not None
            and math.isfinite(float(r["composition_" + y_name]))
        ]
        if comp:
            ax.plot([c[0] for c in comp], [c[1] for c in comp], "--", color=color, lw=1.0)
        positive += [v for v in best + [c[1] for c in comp] if math.isfinite(v) and v > 0]
    from matplotlib.lines import Line2D

    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Line2D([], [], color="0.2", ls="-", marker="o", ms=2.5, label="best bound (final model)"),
        Line2D([], [], color="0.2", ls="--", label="composition (every iterate)"),
    ]
    ax.legend(handles=handles, fontsize=7, ncol=1 if len(handles) <= 8 else 2)
    if scale:
        from matplotlib.cm import ScalarMappable

        fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label=series_names[0])
    if positive and max(positive) / min(positive) > 50:
        ax.set_yscale("log")
    xs_all = [float(r[x_name]) for r in rows if r["status"] == "ok"]
    if xs_all and min(xs_all) > 0 and max(xs_all) / min(xs_all) > 50:
        ax.set_xscale("log")
    ax.set_xlabel(x_name)
    ax.set_ylabel(
        y_name if y_name == "epsilon" else f"delta at epsilon = {ok_rows[0]['epsilon']:g}"
    )
    ax.set_title(
        title
        or "epsilon of the released last iterate (solid) vs composition, "
        "every iterate released (dashed)",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out = save_png(fig, path, dpi=120)
    plt.close(fig)
    return out
