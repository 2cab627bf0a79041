"""The accountant: every applicable guarantee for a run, the tightest one, and the refusals.

``account(run, delta=1e-5)`` evaluates every registered theorem (``lastiterate.bounds``) on the
run.  A theorem whose assumptions fail is listed in ``not_applicable`` with its reason; for each
bound id and kind the tightest applicable theorem is kept.  ``best`` is the result of kind
``"bound"`` with the smallest epsilon (or smallest delta when the query fixes epsilon); estimates
(CLT limits) are reported but never chosen.

``calibrate`` inverts the best bound: the smallest noise, the largest number of epochs, or the
extreme batch size (largest under a fixed noise multiplier, smallest under a fixed noise std)
meeting a target (epsilon, delta).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lastiterate.bounds import BOUND_IDS, Query, Result, registered
from lastiterate.bounds.base import locating_estimates
from lastiterate.bracketing import Bracket, shrink_bracket
from lastiterate.errors import (
    SCALE_RANGE,
    NotApplicable,
    ParameterError,
    check_positive,
    check_progress,
)
from lastiterate.formatting import COMPOSITION_BOUNDS, format_report
from lastiterate.run import Run


@dataclass(frozen=True)
class Refusal:
    """A bound id that produced no result, with the reasons of each of its theorems.

    Attributes:
        bound: the bound id (one of :data:`lastiterate.bounds.BOUND_IDS`).
        reason: why none of its theorems applies (their ``NotApplicable`` reasons, joined).
    """

    bound: str
    reason: str

    def to_json(self) -> dict[str, str]:
        """The refusal as a JSON object.

        Returns:
            ``{"bound": ..., "reason": ...}``.
        """
        return {"bound": self.bound, "reason": self.reason}


@dataclass(frozen=True)
class Failure:
    """A theorem that raised an unexpected error: it is left out, the other bounds
    are still reported.

    Attributes:
        bound: the bound id of the theorem.
        theorem: the theorem that failed.
        reason: the error, as one line.
    """

    bound: str
    theorem: str
    reason: str

    def to_json(self) -> dict[str, str]:
        """The failure as a JSON object.

        Returns:
            ``{"bound": ..., "theorem": ..., "reason": ...}``.
        """
        return {"bound": self.bound, "theorem": self.theorem, "reason": self.reason}


#: set to "1" (the test suite does) to re-raise a theorem's internal error instead of listing it
STRICT_ENV = "LASTITERATE_STRICT_BOUNDS"


@dataclass(frozen=True)
class Report:
    """Everything ``account`` found for one run and query.

    ``results`` holds every valid result (one per bound id and kind), ``not_applicable`` the bound
    ids whose assumptions fail (with reasons), ``failures`` the theorems that raised an internal
    error (listed, never silently dropped).  ``best`` is None when no bound applies: that is not a
    guarantee, and the CLI exits with :data:`lastiterate.errors.EXIT_NO_BOUND`.

    Attributes:
        run: the accounted run.
        query: the query (``delta`` or ``epsilon``, and the report orders).
        results: every valid result, one per bound id and kind.
        not_applicable: the bound ids none of whose theorems applies, with the reasons.
        refusals_by_theorem: ``(bound id, theorem, reason)`` of every theorem that refused.
        failures: the theorems that raised an internal error.
    """

    run: Run
    query: Query
    results: tuple[Result, ...]
    not_applicable: tuple[Refusal, ...]
    refusals_by_theorem: tuple[tuple[str, str, str], ...] = field(default=(), repr=False)
    failures: tuple[Failure, ...] = ()

    @property
    def best(self) -> Result | None:
        """The tightest valid bound (never an estimate)."""
        bounds = [r for r in self.results if r.kind == "bound"]
        if not bounds:
            return None
        key: Callable[[Result], float] = (
            (lambda r: r.epsilon) if self.query.delta is not None else (lambda r: r.delta)
        )
        return min(bounds, key=key)

    def result(self, bound_id: str, kind: str = "bound") -> Result | None:
        """The result of one bound id.

        Args:
            bound_id: a bound id (one of :data:`lastiterate.bounds.BOUND_IDS`).
            kind: ``"bound"`` (a guarantee) or ``"estimate"``.

        Returns:
            The result of that id and kind, or None when it gave none (refused, failed or not
            asked for).
        """
        for r in self.results:
            if r.bound == bound_id and r.kind == kind:
                return r
        return None

    def composition(self) -> Result | None:
        """The tightest composition bound (every iterate released), the standard
        accountants' answer.

        Returns:
            The composition result with the smallest epsilon (query by delta) or delta (query by
            epsilon), or None when no composition bound was evaluated.
        """
        comp = [r for r in self.results if r.bound in COMPOSITION_BOUNDS and r.kind == "bound"]
        if not comp:
            return None
        return min(
            comp, key=(lambda r: r.epsilon) if self.query.delta is not None else (lambda r: r.delta)
        )

    def no_bound_reason(self) -> str | None:
        """Why no bound applies.

        Returns:
            None when a bound applies; else the refusals, failures and (when only estimates
            apply) that an estimate is not a guarantee, joined by ``"; "``.
        """
        if self.best is not None:
            return None
        parts = [f"{n.bound}: {n.reason}" for n in self.not_applicable]
        parts += [f"{f.bound} failed: {f.reason}" for f in self.failures]
        if any(r.kind == "estimate" for r in self.results):
            parts.append("only estimates apply, and an estimate is not a guarantee")
        return "; ".join(parts) if parts else "no theorem was evaluated"

    def format(self) -> str:
        """The human-readable report (what ``lastiterate account`` prints).

        Returns:
            The multi-line text: the run, the best guarantee, every result and every refusal.
        """
        return format_report(self)

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object (what ``lastiterate account --json`` prints).

        Returns:
            A dict with ``setting``, ``delta``, ``epsilon``, ``best``, ``no_bound_reason``,
            ``results``, ``not_applicable`` and ``failures``; non-finite numbers are made
            standard JSON by :func:`lastiterate.jsonutil.dumps`.
        """
        best = self.best
        return {
            "setting": self.run.setting(),
            "delta": self.query.delta
            if self.query.delta is not None
            else (best.delta if best else None),
            "epsilon": self.query.epsilon,
            "best": None
            if best is None
            else {
                "bound": best.bound,
                "epsilon": best.to_json()["epsilon"],
                "delta": best.delta,
                "mu": best.mu,
                "kind": best.kind,
                "theorem": best.theorem,
            },
            "no_bound_reason": self.no_bound_reason(),
            "results": [r.to_json() for r in self.results],
            "not_applicable": [n.to_json() for n in self.not_applicable],
            "failures": [f.to_json() for f in self.failures],
        }


def _better(a: Result, b: Result, query: Query) -> bool:
    return a.epsilon < b.epsilon if query.delta is not None else a.delta < b.delta


def account(
    run: Run,
    *,
    delta: float | None = None,
    epsilon: float | None = None,
    bounds: Sequence[str] | None = None,
    orders: Sequence[float] | None = None,
    kinds: Sequence[str] | None = None,
) -> Report:
    """Account ``run`` under every applicable theorem.

    Give ``delta`` (default 1e-5) to get epsilon(delta), or ``epsilon`` to get delta(epsilon).
    ``bounds`` restricts to some bound ids; ``orders`` sets the Renyi orders at which RDP results
    report their curves; ``kinds=("bound",)`` leaves out the theorems that only estimate (the
    privacy CLT, the CLT versions of Thms 4.9 / 4.10), which are never ``best``.

    Args:
        run: the validated run (what was trained, with its declared geometry and adjacency).
        delta: report epsilon at this delta, in (0, 1).
        epsilon: report delta at this epsilon instead (>= 0).
        bounds: bound ids to evaluate (default: all registered,
            ``lastiterate.bounds.BOUND_IDS``).
        orders: Renyi orders > 1 at which RDP results report their curves.
        kinds: the kinds of theorem to evaluate, a subset of ``("bound", "estimate")``
            (default both).

    Returns:
        A :class:`Report`: every valid result, the tightest ``best`` (None when no bound applies),
        the refusals with their reasons and the theorems that failed internally.

    Raises:
        ParameterError: invalid ``delta``, ``epsilon``, ``bounds``, ``orders`` or ``kinds``.

    Example:
        >>> import lastiterate as li
        >>> run = li.Run(algorithm="gd", n=100, steps=50, lr=0.1, noise_std=0.5, sensitivity=1.0)
        >>> round(li.account(run, delta=1e-5).best.epsilon, 3)
        0.497
    """
    if delta is None and epsilon is None:
        delta = 1e-5
    query = Query(delta=delta, epsilon=epsilon, orders=tuple(orders) if orders else None)
    kept: dict[tuple[str, str], Result] = {}
    reasons: dict[str, list[tuple[str, str]]] = {}
    by_theorem: list[tuple[str, str, str]] = []
    failures: list[Failure] = []
    strict = os.environ.get(STRICT_ENV) == "1"
    specs = _of_kinds(registered(bounds), kinds)
    for bid in {s.id for s in specs}:
        covered = sorted({a for s in specs if s.id == bid for a in s.algorithms})
        if run.algorithm not in covered:
            reason = (
                f"no theorem of this family for {run.algorithm} (it covers {', '.join(covered)})"
            )
            reasons[bid] = [("", reason)]  # type: ignore[list-item]
    for spec in specs:
        if run.algorithm not in spec.algorithms:
            continue
        try:
            res = spec.func(run, query)
        except NotApplicable as exc:
            reasons.setdefault(spec.id, []).append((spec.theorem, str(exc)))  # type: ignore[arg-type]
            by_theorem.append((spec.id, spec.theorem, str(exc)))
            continue
        except Exception as exc:  # one theorem's internal error must not take the report down
            if strict:
                raise
            failures.append(Failure(spec.id, spec.theorem, f"{type(exc).__name__}: {exc}"))
            continue
        key = (res.bound, res.kind)
        if key not in kept or _better(res, kept[key], query):
            kept[key] = res
    order = {bid: i for i, bid in enumerate(BOUND_IDS)}
    results = tuple(sorted(kept.values(), key=lambda r: (r.kind != "bound", order[r.bound])))
    have = {r.bound for r in results}
    refusals = tuple(
        Refusal(bid, _join_reasons(reasons[bid]))
        for bid in BOUND_IDS
        if bid in reasons and bid not in have
    )
    return Report(
        run=run,
        query=query,
        results=results,
        not_applicable=refusals,
        refusals_by_theorem=tuple(by_theorem),
        failures=tuple(failures),
    )


#: the kinds of theorem (``BoundSpec.kind``)
THEOREM_KINDS = ("bound", "estimate")


def _of_kinds(specs: list[Any], kinds: Sequence[str] | None) -> list[Any]:
    """The theorems of ``specs`` whose kind is in ``kinds`` (all when None)."""
    if kinds is None:
        return specs
    if isinstance(kinds, str) or not all(k in THEOREM_KINDS for k in kinds):
        raise ParameterError("kinds", kinds, "must be a sequence of 'bound' and/or 'estimate'")
    return [s for s in specs if s.kind in kinds]


def _join_reasons(items: list[tuple[str, str]]) -> str:
    """'Thm A, Thm B: reason; Thm C: other reason' (theorems sharing a reason are grouped)."""
    grouped: dict[str, list[str]] = {}
    for theorem, reason in items:
        grouped.setdefault(reason, [])
        if theorem and theorem not in grouped[reason]:
            grouped[reason].append(theorem)
    return "; ".join(
        (", ".join(ths) + ": " if ths else "") + reason for reason, ths in grouped.items()
    )


# ---------------------------------------------------------------------- calibration
@dataclass(frozen=True)
class Calibration:
    """The solution of ``calibrate`` and the best guarantee there.

    Attributes:
        noise_std: the calibrated noise std sigma on the averaged gradient.
        noise_multiplier: the matching Opacus noise multiplier z (None without a clip norm).
        epochs: the calibrated number of epochs (None: any number of epochs).
        report: the account of the calibrated run.
        limit: for an unlimited number of epochs, the convergent result whose supremum over T
            meets the target.
        batch_size: the calibrated batch size b (:func:`calibrate_batch_size`; None for the noise
            and epoch calibrations, which keep the run's batch size).
    """

    noise_std: float
    noise_multiplier: float | None
    epochs: float | None  # None = unlimited
    report: Report
    #: when epochs is unlimited: the convergent result whose supremum over T is within the target
    limit: Result | None = None
    #: the calibrated batch size (only calibrate_batch_size sets it)
    batch_size: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The calibration as a JSON object (what ``lastiterate calibrate --json`` prints).

        Returns:
            A dict with ``noise_std``, ``noise_multiplier``, ``epochs``, ``batch_size`` (null
            unless the batch size was calibrated), ``best`` and ``setting``.
        """
        rep = self.report.to_json()
        best = rep["best"]
        if self.limit is not None:
            r = self.limit
            best = {
                "bound": r.bound,
                "epsilon": float(r.details["epsilon_limit"]),
                "delta": r.delta,
                "mu": r.details.get("mu_limit"),
                "kind": r.kind,
                "theorem": r.theorem,
                "for_any_number_of_epochs": True,
            }
        return {
            "noise_std": self.noise_std,
            "noise_multiplier": self.noise_multiplier,
            "epochs": self.epochs,
            "batch_size": self.batch_size,
            "best": best,
            "setting": rep["setting"],
        }


def _best_epsilon(run: Run, delta: float, bounds: Sequence[str] | None) -> tuple[float, Report]:
    rep = account(run, delta=delta, bounds=bounds)
    best = rep.best
    if best is None:
        raise NotApplicable(f"no applicable bound for this run: {rep.no_bound_reason()}")
    return best.epsilon, rep


def calibrate_noise(
    run: Run,
    *,
    epsilon: float,
    delta: float = 1e-5,
    bounds: Sequence[str] | None = None,
    rtol: float = 2e-4,
    progress: Callable[[str], None] | None = None,
) -> Calibration:
    """The smallest noise std sigma whose best bound gives eps <= ``epsilon``.

    Bisection on log sigma with an expanding bracket.  The returned sigma always satisfies the
    target (it is the upper end of the final bracket: never overshoots), and the bracket is
    narrower than ``rtol`` relative, so sigma*(1 - 0.001) violates the target (tight).
    ``progress`` is called with a short message after every evaluation (the CLI shows a bar).

    Args:
        run: the run to calibrate; its ``noise_std`` is the starting point of the search.
        epsilon: the target epsilon (> 0) at ``delta``.
        delta: the target delta, in (0, 1).
        bounds: bound ids to use (default all, composition included).
        rtol: relative width of the final bracket on sigma.
        progress: called with a short message after every evaluation.

    Returns:
        A :class:`Calibration` with ``noise_std`` (and ``noise_multiplier`` when the run has a clip)
        and the report at that noise.

    Raises:
        ParameterError: the target is unreachable with any finite noise, or met with vanishing
            noise.
        NotApplicable: no bound applies to the run.
    """
    target = check_positive("epsilon", epsilon)
    check_progress(progress)
    reports: dict[float, Report] = {}  # the final report is one the search already made

    def excess(log_sigma: float) -> float:
        if log_sigma in reports:
            return _log_excess(reports[log_sigma].best.epsilon, target)  # type: ignore[union-attr]
        sigma = math.exp(log_sigma)
        eps, reports[log_sigma] = _best_epsilon(run.replace(noise_std=sigma), delta, bounds)
        if progress is not None:
            progress(f"sigma={sigma:.6g} -> epsilon={eps:.6g}")
        return _log_excess(eps, target)

    width = math.log1p(rtol)
    done = lambda bad, good: abs(good - bad) <= width

    estimates = _Estimates(lambda x: run.replace(noise_std=math.exp(x)), delta, bounds, target)
    bracket = None
    start = math.log(run.sigma)
    located = _locate(lambda: _noise_bracket(estimates, start, epsilon), estimates, estimates)
    if located is not None:
        bracket, restart = _focused_noise_bracket(
            excess,
            reports,
            located,
            width,
            run,
            delta,
            target,
            progress,
            named=estimates.best_at.get(located.x),
        )
        start = start if restart is None else restart
    if bracket is None:  # no estimate, or it misled: the full search
        bracket = _noise_bracket(excess, start, epsilon)
    bracket = shrink_bracket(excess, bracket, done=done, close_within=width)
    hi = math.exp(bracket.good)
    final = run.replace(noise_std=hi)
    rep = reports.get(bracket.good) or _best_epsilon(final, delta, bounds)[1]
    z = hi * final.b / final.clip if final.clip is not None else None
    return Calibration(noise_std=hi, noise_multiplier=z, epochs=final.E, report=rep)


def _focused_noise_bracket(
    excess: Callable[[float], float],
    reports: dict[float, Report],
    located: _Located,
    width: float,
    run: Run,
    delta: float,
    target: float,
    progress: Callable[[str], None] | None,
    named: str | None = None,
) -> tuple[Bracket | None, float | None]:
    """The focused phase (:func:`_focused_bracket`) of :func:`calibrate_noise`, on log sigma.

    The bound B is ``named`` (the locating estimates' best at the located noise), or, when None,
    the best of a full accounting at the located noise.  The bracket of B alone is found next to
    the located root (:func:`_bracket_near`) and closed to ``width``.  Returns ``(bracket,
    start)``: the checked bracket, or None and the point from which the caller's full search
    starts (the located noise, or the bad end that another bound turned out to meet; None: the
    run's own noise)."""
    x1 = min(max(located.x, _SIGMA_RANGE[0]), _SIGMA_RANGE[1])
    if named is None:
        try:
            g1 = excess(x1)
        except ParameterError:  # a noise the run or a bound refuses: search from the run's noise
            return None, None
        best = reports[x1].best
        if best is None or not math.isfinite(g1):
            return None, None
        named = best.bound

    def partial(x: float, ids: list[str]) -> float:
        return _best_epsilon(run.replace(noise_std=math.exp(x)), delta, ids)[0]

    def near(excess_b: Callable[[float], float], x: float) -> Bracket | None:
        at = _Located(x=x, slope=located.slope, bad_direction=located.bad_direction)
        return _bracket_near(excess_b, at, width, _SIGMA_RANGE)

    search = _FocusedSearch(
        full=excess,
        report_at=lambda x: reports.get(x),
        partial=partial,
        near=near,
        shrink=lambda f, b: shrink_bracket(
            f, b, done=lambda bad, good: abs(good - bad) <= width, close_within=width
        ),
        key=lambda x: x,
        label=lambda x: f"sigma={math.exp(x):.6g}",
        target=target,
        progress=progress,
    )
    out = _focused_bracket(search, x1, named)
    if out.bracket is not None:
        return out.bracket, x1
    return None, out.bad if out.other_meets_bad else out.x1


@dataclass(frozen=True)
class _FocusedSearch:
    """One calibration's search variable x for :func:`_focused_bracket`: log sigma, or an integer
    (epochs, a batch-size position).

    Attributes:
        full: the FULL excess ``log(eps_best / target)`` at x (a full accounting, remembered by
            the caller).
        report_at: the report of the full accounting made at x, None if none was made.
        partial: the best epsilon of some bound ids at x (may raise ``NotApplicable``).
        near: a bracket of an excess function next to x (None if it finds none).
        shrink: the bracket shrunk to the calibration's resolution.
        key: how x is remembered (``int`` for the integer searches).
        label: x in the progress messages.
        target: the target epsilon.
        progress: called with a short message after every evaluation.
    """

    full: Callable[[float], float]
    report_at: Callable[[float], Report | None]
    partial: Callable[[float, list[str]], float]
    near: Callable[[Callable[[float], float], float], Bracket | None]
    shrink: Callable[[Callable[[float], float], Bracket], Bracket]
    key: Callable[[float], float]
    label: Callable[[float], str]
    target: float
    progress: Callable[[str], None] | None


@dataclass(frozen=True)
class _Focus:
    """What :func:`_focused_bracket` found: the checked bracket (or None), the located point of
    the phase that ended (``x1``; a retry starts from the good end), the bracket's two ends (None
    when no bracket of the named bound was found) and whether another bound met the target at
    the bad end."""

    bracket: Bracket | None
    x1: float
    good: float | None = None
    bad: float | None = None
    other_meets_bad: bool = False


def _focused_bracket(search: _FocusedSearch, x1: float, named: str, retry: bool = True) -> _Focus:
    """The focused phase of a calibration: close the bracket next to a located root ``x1`` with
    the bound B that is best there only, then check both ends.

    The bracket is searched with B alone (``eps_B >= eps_best``, so a point B finds good is
    good) and shrunk to the calibration's resolution; a full accounting at the good end gives the
    report, and at the bad end every bound within ``_RIVAL_FACTOR`` of the target at the good
    end is evaluated (:func:`_rivals`: the others stay above the target there), so a B the
    estimates named wrongly costs evaluations, never a wrong answer.  When the good end's full
    accounting finds another bound B' best (the estimates named the wrong one), the search is
    made once more with B' from the good end (``retry``): at once when B' is 1% below the target
    there (far more than the bracket's width can change), else when another bound turned out to
    meet the target at the bad end.  Returns the checked bracket, or None with what was learnt
    (where the caller's full search starts)."""
    values: dict[float, float] = {}

    def excess_b(x: float) -> float:
        k = search.key(x)
        if search.report_at(k) is not None:
            return search.full(k)  # a full accounting already made: its best is <= eps_B
        if k not in values:
            try:
                eps = search.partial(k, [named])
            except NotApplicable:  # B does not apply here: "bad" for B, checked in full below
                eps = math.inf
            if search.progress is not None:
                search.progress(f"{search.label(k)} -> epsilon={eps:.6g} ({named})")
            values[k] = _log_excess(eps, search.target)
        return values[k]

    near = search.near(excess_b, x1)
    if near is None:
        return _Focus(None, x1)
    near = search.shrink(excess_b, near)
    good, bad = search.key(near.good), search.key(near.bad)
    g_good = search.full(good)  # full: the report; <= eps_B, so still within the target
    report = search.report_at(good)
    best_good = report.best if report is not None else None
    wrong_name = best_good is not None and best_good.bound != named
    if retry and wrong_name and best_good.epsilon * 1.01 < search.target:  # type: ignore[union-attr]
        return _focused_bracket(search, good, best_good.bound, retry=False)  # type: ignore[union-attr]
    # does any other bound meet the target at the bad end?  (B's value there is known)
    rivals = _rivals(report, search.target) - {named} if report is not None else set()
    g_bad = excess_b(bad)
    if rivals and g_bad > 0:
        try:
            eps_r = search.partial(bad, sorted(rivals))
        except NotApplicable:
            eps_r = math.inf
        if search.progress is not None:
            search.progress(
                f"{search.label(bad)} -> epsilon={eps_r:.6g} ({', '.join(sorted(rivals))})"
            )
        g_bad = min(g_bad, _log_excess(eps_r, search.target))
    if g_bad > 0 >= g_good:
        bracket = Bracket(bad=float(bad), good=float(good), g_bad=g_bad, g_good=g_good)
        return _Focus(bracket, x1, good, bad)
    if retry and g_bad <= 0 and wrong_name:
        return _focused_bracket(search, good, best_good.bound, retry=False)  # type: ignore[union-attr]
    return _Focus(None, x1, good, bad, other_meets_bad=g_bad <= 0)


#: a bound whose epsilon at the good end of a focused noise bracket exceeds the target by more
#: than this factor is not evaluated at the bad end (see :func:`_rivals`)
_RIVAL_FACTOR = 1.05


def _rivals(report: Report, target: float) -> set[str]:
    """The bound ids whose epsilon at the good end of a focused noise bracket is within
    ``_RIVAL_FACTOR`` of the target: the only ones that may meet it at the bad end.

    The bad end has LESS noise, by at most the bracket's relative width (``rtol``, 2e-4 by
    default); every bound evaluates a privacy loss that does not decrease with less noise (a
    noisier Gaussian is a post-processing of a less noisy one), up to numerical effects (grids,
    discrete searches) far below 5%.  So a bound 5% above the target at the good end stays above
    it at the bad end; skipping its evaluation there can only affect how TIGHT the answer is
    (the bad end's role), never the answer's guarantee (the good end's full accounting)."""
    return {
        r.bound for r in report.results if r.kind == "bound" and r.epsilon <= _RIVAL_FACTOR * target
    }


#: the log-noise range a Run accepts (less a hair), for the searches
_SIGMA_RANGE = (math.log(SCALE_RANGE[0]) + 1e-9, math.log(SCALE_RANGE[1]) - 1e-9)
#: relative width to which the locating pass places the answer before the full accountings
_LOCATE_WIDTH = 1e-3


@dataclass(frozen=True)
class _Located:
    """Where the locating estimates put the root: ``x`` (their good end), the excess change per
    unit towards the bad side (``slope``, None if unknown) and that side's direction (+1 / -1)."""

    x: float
    slope: float | None
    bad_direction: float


class _Estimates:
    """The locating excess ``log(epsilon / target)`` of the run at a searched value, from the
    cheap estimates (:func:`locating_estimates`).  Once a bracket is found, :meth:`focus` limits
    the estimates to the bound ids that were best at its two ends (the others cannot decide where
    the root lies unless they overtake, and a full accounting checks every answer anyway)."""

    def __init__(
        self,
        make_run: Callable[[float], Run],
        delta: float,
        bounds: Sequence[str] | None,
        target: float,
    ) -> None:
        self.make_run, self.delta, self.bounds, self.target = make_run, delta, bounds, target
        self.best_at: dict[float, str] = {}

    def __call__(self, x: float) -> float:
        with locating_estimates():
            eps, rep = _best_epsilon(self.make_run(x), self.delta, self.bounds)
        if rep.best is not None:
            self.best_at[x] = _named_of_ties(rep)
        return _log_excess(eps, self.target)

    def focus(self, b: Bracket) -> None:
        ids = {self.best_at.get(b.bad), self.best_at.get(b.good)}
        if None not in ids:
            self.bounds = sorted(i for i in ids if i is not None)


def _named_of_ties(report: Report) -> str:
    """The best bound of a report, a composition bound among exactly tied ones: a last-iterate
    bound that equals composition has fallen back to it (Thm 4.8 for NoisySGD, tau = 0) and
    costs its whole window search on top, so a search focused on it pays more for the same
    values."""
    best = report.best
    assert best is not None
    tied = [r.bound for r in report.results if r.kind == "bound" and r.epsilon == best.epsilon]
    composition = [b for b in tied if b in COMPOSITION_BOUNDS]
    return composition[0] if composition else best.bound


def _locate(
    initial: Callable[[], Bracket],
    estimate: Callable[[float], float],
    estimates: _Estimates | None = None,
) -> _Located | None:
    """Run the search on the cheap locating estimates (:func:`locating_estimates`): ``initial``
    brackets, then the bracket shrinks to ``_LOCATE_WIDTH`` (with the estimates focused on the
    bounds best at the bracket's ends).  None when the estimates cannot locate the root (the
    caller then searches with full accountings only)."""
    try:
        b = initial()
        if estimates is not None:  # the ends keep their values: their best bounds are kept
            estimates.focus(b)
        b = shrink_bracket(
            estimate,
            b,
            done=lambda bad, good: abs(good - bad) <= _LOCATE_WIDTH,
            close_within=_LOCATE_WIDTH,
        )
    except (ParameterError, NotApplicable):
        return None
    span = abs(b.bad - b.good)
    slope = (b.g_bad - b.g_good) / span if span > 0 else math.nan
    return _Located(
        x=b.good,
        slope=slope if math.isfinite(slope) and slope > 0 else None,
        bad_direction=math.copysign(1.0, b.bad - b.good),
    )


def _bracket_near(
    excess: Callable[[float], float], at: _Located, width: float, limits: tuple[float, float]
) -> Bracket | None:
    """A bracket of the FULL excess next to a located root: evaluate at ``at.x``, then step along
    the estimated slope to ``0.45 width`` past the predicted root (usually the second point already
    lies on the other side, within about one ``width``); the step grows 4x while the sign does not
    change.  None if the full excess is not finite there, leaves ``limits`` or keeps its sign."""
    lo, hi = limits
    x = min(max(at.x, lo), hi)
    try:
        g = excess(x)
    except ParameterError:
        return None
    if not math.isfinite(g):
        return None
    direction = -at.bad_direction if g > 0 else at.bad_direction
    slope = at.slope
    margin = 0.45 * width
    for _ in range(6):
        distance = abs(g) / slope if slope is not None else width
        x_new = min(max(x + direction * (distance + margin), lo), hi)
        if x_new == x:
            return None
        try:
            g_new = excess(x_new)
        except ParameterError:
            return None
        if (g_new > 0) != (g > 0):
            return (
                Bracket(bad=x, good=x_new, g_bad=g, g_good=g_new)
                if g > 0
                else Bracket(bad=x_new, good=x, g_bad=g_new, g_good=g)
            )
        if not math.isfinite(g_new):
            return None
        # same side: the secant of the two full evaluations predicts better than the estimates'
        secant = abs(g_new - g) / abs(x_new - x)
        slope = secant if secant > 0 else slope
        x, g = x_new, g_new
        margin *= 4.0
    return None


def _log_excess(eps: float, target: float) -> float:
    """log(eps / target): > 0 violates the target (inf for eps = inf, -inf for eps = 0)."""
    if eps <= 0.0:
        return -math.inf
    return math.log(eps) - math.log(target) if math.isfinite(eps) else math.inf


def _noise_bracket(excess: Callable[[float], float], x0: float, epsilon: float) -> Bracket:
    """A bracket [violating, meeting] on log sigma around the run's sigma: the first step scales
    sigma by epsilon(sigma)/target (exact for eps proportional to 1/sigma, clipped to a factor
    16), then steps grow geometrically until the target is crossed."""
    g0 = excess(x0)
    step = min(max(g0, -math.log(16.0)), math.log(16.0)) if math.isfinite(g0) else 0.0
    if step == 0.0:
        step = math.log(2.0) if g0 > 0 else -math.log(2.0)
    x, g = x0, g0
    lowest, highest = math.log(SCALE_RANGE[0]) + 1e-9, math.log(SCALE_RANGE[1]) - 1e-9
    for _ in range(200):
        if x in (lowest, highest):
            break
        x_new = min(max(x + step, lowest), highest)  # the noise range a Run accepts
        try:
            g_new = excess(x_new)
        except ParameterError:  # a Run refuses this noise (e.g. per-step scale above 1e6)
            if abs(step) < 1e-3:
                break
            step /= 4.0
            continue
        if (g > 0) != (g_new > 0):
            return (
                Bracket(bad=x, good=x_new, g_bad=g, g_good=g_new)
                if g > 0
                else Bracket(bad=x_new, good=x, g_bad=g_new, g_good=g)
            )
        x, g = x_new, g_new
        step *= 2.0
    if g0 > 0:
        raise ParameterError(
            "epsilon", epsilon, "is not reachable with any finite noise for this run"
        )
    raise ParameterError(
        "epsilon", epsilon, "is met with vanishing noise; the run leaks nothing measurable"
    )


def calibrate_epochs(
    run: Run,
    *,
    epsilon: float,
    delta: float = 1e-5,
    bounds: Sequence[str] | None = None,
    max_epochs: float = 1e7,
    progress: Callable[[str], None] | None = None,
) -> Calibration:
    """The largest number of whole epochs whose best bound gives eps <= ``epsilon``.

    ``progress`` is called with a short message after every evaluation (the CLI shows a bar).
    ``epochs`` is None (unlimited) when a convergent bound's supremum over T (its
    ``details['epsilon_limit']``) is already within the target.

    Args:
        run: the run to calibrate (its noise is kept; its length is searched).
        epsilon: the target epsilon (> 0) at ``delta``.
        delta: the target delta, in (0, 1).
        bounds: bound ids to use (default all, composition included).
        max_epochs: the largest number of epochs searched.
        progress: called with a short message after every evaluation.

    Returns:
        A :class:`Calibration` whose ``epochs`` is the largest whole number within the budget, or
        None when a convergent bound keeps every number of epochs within it (``limit``).

    Raises:
        ParameterError: one epoch already exceeds the target, or more than ``max_epochs`` fit and
            no bound proves a limit.
        NotApplicable: no bound applies to the run.
    """
    target = check_positive("epsilon", epsilon)
    check_progress(progress)

    seen: dict[int, tuple[float, Report]] = {}

    def evaluate(epochs: int) -> tuple[float, Report]:
        if epochs not in seen:
            seen[epochs] = _best_epsilon(run.replace(epochs=epochs), delta, bounds)
            if progress is not None:
                progress(f"epochs={epochs} -> epsilon={seen[epochs][0]:.6g}")
        return seen[epochs]

    eps1, rep1 = evaluate(1)
    if eps1 > target:
        raise ParameterError(
            "epsilon", epsilon, f"is below the guarantee after one epoch ({eps1:.6g})"
        )
    limits = [
        r
        for r in rep1.results
        if r.kind == "bound"
        and r.details.get("epsilon_limit") is not None
        and r.details["epsilon_limit"] <= target
    ]
    if limits:
        tightest = min(limits, key=lambda r: float(r.details["epsilon_limit"]))
        return Calibration(run.sigma, _z(run), None, rep1, limit=tightest)

    def full(e: float) -> float:
        return _log_excess(evaluate(int(e))[0], target)

    g1 = _log_excess(eps1, target)
    estimates = _Estimates(lambda e: run.replace(epochs=int(e)), delta, bounds, target)
    bracket = None
    located = _locate_epochs(estimates, g1, max_epochs)
    if located is not None:
        named = estimates.best_at.get(float(located[0]))
        if named is not None:
            bracket, located = _focused_epoch_bracket(
                full, seen, located, max_epochs, run, delta, target, named, progress
            )
        if bracket is None:
            bracket = _integer_bracket_near(full, located, max_epochs)
    if bracket is None:  # no estimate, or it misled: doubling with full accountings
        lo, hi = 1, 2
        g_lo = g1
        while True:
            g_hi = full(hi)
            if g_hi > 0:
                break
            lo, hi, g_lo = hi, hi * 2, g_hi
            if hi > max_epochs:
                raise ParameterError(
                    "epsilon",
                    epsilon,
                    f"allows more than {max_epochs:g} epochs and no bound proves a limit",
                )
        bracket = Bracket(bad=float(hi), good=float(lo), g_bad=g_hi, g_good=g_lo)
    bracket = shrink_bracket(full, bracket, done=lambda bad, good: bad - good <= 1, integer=True)
    best = int(bracket.good)
    _, rep = evaluate(best)
    return Calibration(run.sigma, _z(run), float(best), rep)


def _focused_epoch_bracket(
    full: Callable[[float], float],
    seen: dict[int, tuple[float, Report]],
    located: tuple[int, float | None],
    max_epochs: float,
    run: Run,
    delta: float,
    target: float,
    named: str,
    progress: Callable[[str], None] | None,
    partial: Callable[[int, list[str]], float] | None = None,
    label: Callable[[int], str] | None = None,
) -> tuple[Bracket | None, tuple[int, float | None]]:
    """The focused phase (:func:`_focused_bracket`) of :func:`calibrate_epochs`, on the integers:
    the bracket of the bound B the locating estimates name is found next to the located number
    of epochs (:func:`_integer_bracket_near`) and shrunk to adjacent integers; at the bad end
    (one epoch more) the rivals are checked (every bound is non-decreasing in the number of
    steps, which the registry contract tests).  Returns ``(bracket, start)``: the checked
    bracket, or None and where the caller's full search starts (the good end when another bound
    turned out to meet the target at the bad end, else the located value).

    ``partial(k, ids)`` is the best epsilon of the bound ids ``ids`` at the searched integer k
    (default: the run with k epochs) and ``label(k)`` names k in the progress messages; the
    batch-size calibration searches another integer with the same phase."""

    def epochs_partial(k: int, ids: list[str]) -> float:
        return _best_epsilon(run.replace(epochs=k), delta, ids)[0]

    part = epochs_partial if partial is None else partial
    name = (lambda k: f"epochs={k}") if label is None else label

    def report_at(k: float) -> Report | None:
        hit = seen.get(int(k))
        return hit[1] if hit is not None else None

    search = _FocusedSearch(
        full=full,
        report_at=report_at,
        partial=lambda x, ids: part(int(x), ids),
        near=lambda f, x: _integer_bracket_near(f, (int(x), located[1]), max_epochs),
        shrink=lambda f, b: shrink_bracket(
            f, b, done=lambda bad, good: bad - good <= 1, integer=True
        ),
        key=lambda x: int(x),
        label=lambda x: name(int(x)),
        target=target,
        progress=progress,
    )
    out = _focused_bracket(search, float(located[0]), named)
    if out.bracket is not None:
        return out.bracket, located
    start = out.good if out.other_meets_bad and out.good is not None else out.x1
    return None, (int(start), located[1])


def _log_bracket(
    estimate: Callable[[float], float], lo: int, g_lo: float, hi: int, g_hi: float
) -> tuple[int, float, int, float]:
    """Shrink the integer bracket ``[lo, hi]`` (``g_lo <= 0 < g_hi``) to ``hi <= 2 lo`` by regula
    falsi on ``log(epochs)``: the locating excess ``log(epsilon / target)`` of a composition is
    nearly linear in the logarithm of the number of epochs (``epsilon ~ epochs^alpha`` with alpha
    between 1/2 and 1), so a bracket of many octaves, e.g. from the square-law first guess of a
    run whose epsilon grows linearly, closes in one or two evaluations where halving took one per
    octave.  The interpolation point keeps 1/16 of the (log) bracket from its ends, and the
    excess of an end kept twice in a row is halved for the interpolation (the Illinois variant,
    as :func:`lastiterate.bracketing.shrink_bracket`).  Only where the locating pass evaluates
    changes: the calibration's answer comes from full accountings."""
    kept_lo = kept_hi = 0  # how often each end survived in a row
    while hi > 2 * lo:
        a, b = math.log(lo), math.log(hi)
        w_lo = g_lo / 2.0**kept_lo if kept_lo >= 2 else g_lo
        w_hi = g_hi / 2.0**kept_hi if kept_hi >= 2 else g_hi
        if math.isfinite(w_lo) and math.isfinite(w_hi) and w_hi > w_lo:
            t = min(max(-w_lo / (w_hi - w_lo), 1.0 / 16.0), 15.0 / 16.0)
        else:
            t = 0.5
        x = min(max(round(math.exp(a + t * (b - a))), lo + 1), hi - 1)
        g = estimate(x)
        if g > 0:
            hi, g_hi = x, g
            kept_lo, kept_hi = kept_lo + 1, 0
        else:
            lo, g_lo = x, g
            kept_lo, kept_hi = 0, kept_hi + 1
    return lo, g_lo, hi, g_hi


def _locate_epochs(
    estimate: Callable[[float], float], g1: float, max_epochs: float
) -> tuple[int, float | None] | None:
    """The largest number of epochs meeting the target by the locating estimates, with their
    excess per epoch there; None when they cannot place it below ``max_epochs``.  The search starts
    at ``(target / epsilon_1)^2`` epochs (exact for a Gaussian composition; ``g1`` is the FULL
    excess of one epoch, which meets the target), doubles up, or closes the bracket between one
    epoch and a bad guess by regula falsi on log(epochs) (:func:`_log_bracket`), and
    ends with the integer interpolation search."""
    try:
        # first guess: epsilon ~ sqrt(epochs) (composition); last-iterate bounds grow slower
        # (target / epsilon after one epoch)^2 = e^(-2 g1), capped before it overflows (a target
        # of 1e300 gave OverflowError; the guess is capped at max_epochs anyway)
        ratio_squared = math.exp(min(-2.0 * g1, 700.0))
        guess = int(min(max(2.0, math.floor(ratio_squared)), max_epochs))
        g_guess = estimate(guess)
        if g_guess > 0:  # down to a good number of epochs (1 is good: its full excess)
            lo, g_lo, hi, g_hi = _log_bracket(estimate, 1, g1, guess, g_guess)
        else:
            lo, g_lo, hi = guess, g_guess, guess * 2
            while True:
                if hi > max_epochs:
                    return None
                g_hi = estimate(hi)
                if g_hi > 0:
                    break
                lo, hi, g_lo = hi, hi * 2, g_hi
        assert g_lo is not None
        b = Bracket(bad=float(hi), good=float(lo), g_bad=g_hi, g_good=g_lo)
        if isinstance(estimate, _Estimates):
            estimate.focus(b)
        b = shrink_bracket(
            estimate,
            b,
            done=lambda bad, good: bad - good <= 1,
            integer=True,
        )
    except (ParameterError, NotApplicable):
        return None
    slope = (b.g_bad - b.g_good) / (b.bad - b.good)
    return int(b.good), (slope if math.isfinite(slope) and slope > 0 else None)


def _integer_bracket_near(
    full: Callable[[float], float], located: tuple[int, float | None], max_epochs: float
) -> Bracket | None:
    """A bracket [good, bad] of the FULL excess around a located number of epochs.

    The located value is evaluated; then the integer just past the root predicted from the
    latest full excess (the first bad integer from a good point, the last good one from a bad
    point), with the estimates' slope at first and then the secant of the two latest full
    evaluations (the estimates may be off by a nearly constant factor, the secant is not); a
    prediction on the other side closes the bracket, which :func:`shrink_bracket` then narrows to
    adjacent integers.  Without a usable slope, or after ``_PREDICTIONS`` predictions that stay on
    one side, steps of 1, 2, 4, ... epochs until the sign changes.  None past ``max_epochs`` (the
    caller's doubling then reports it)."""
    e = max(1, located[0])
    g = full(e)
    slope = located[1]  # excess per epoch of the estimates near their answer
    for _ in range(_PREDICTIONS):
        if slope is None or not math.isfinite(g):
            break
        root = e - g / slope  # the excess grows with the number of epochs
        nxt = math.floor(root) + 1 if g <= 0 else math.floor(root)
        nxt = min(max(1, nxt), int(max_epochs))
        if nxt == e:
            nxt = e + (1 if g <= 0 else -1)
        if nxt < 1 or nxt > max_epochs:
            return None
        g_new = full(nxt)
        if (g_new > 0) != (g > 0):
            return _ordered_bracket(e, g, nxt, g_new)
        secant = (g_new - g) / (nxt - e)
        slope = secant if math.isfinite(secant) and secant > 0 else slope
        e, g = nxt, g_new
    direction = 1 if g <= 0 else -1
    step = 1
    while True:
        e_new = e + direction * step
        if e_new < 1 or e_new > max_epochs:
            return None
        g_new = full(e_new)
        if (g_new > 0) != (g > 0):
            return _ordered_bracket(e, g, e_new, g_new)
        e, g = e_new, g_new
        step *= 2


#: predictions of the root from full evaluations before :func:`_integer_bracket_near` steps
_PREDICTIONS = 4


def _ordered_bracket(x: float, g: float, y: float, g_y: float) -> Bracket:
    """The bracket of two evaluations on opposite sides (``g > 0``: x is the bad end)."""
    if g > 0:
        return Bracket(bad=float(x), good=float(y), g_bad=g, g_good=g_y)
    return Bracket(bad=float(y), good=float(x), g_bad=g_y, g_good=g)


# ---------------------------------------------------------------------- batch-size calibration
def batch_size_direction(run: Run) -> str:
    """Which batch size :func:`calibrate_batch_size` seeks for ``run``: ``"largest"`` or
    ``"smallest"``, from the noise input the run carries (and keeps while b changes).

    * ``noise_multiplier`` z (Opacus' convention, sigma = z C / b on the averaged gradient): the
      per-step scale L / (b sigma) = L / (z C) does not depend on b while the sampling rate b / n
      grows with it, so a LARGER batch costs more privacy: the answer is the largest b.
    * ``noise_std`` sigma on the averaged gradient: the per-step scale L / (b sigma) falls with b
      (the sensitivity of the average is L / b), so a larger batch costs LESS: the answer is the
      smallest b.

    Args:
        run: the run whose batch size is calibrated.

    Returns:
        ``"largest"`` or ``"smallest"``.

    Raises:
        ParameterError: the run has no batch size to choose (full-batch gd), a learning-rate
            schedule (one value per step: the number of steps changes with b), or cyclic batches
            with a fractional number of epochs (steps = epochs * ceil(n/b) must stay whole).
    """
    if run.algorithm == "gd":
        raise ParameterError(
            "algorithm",
            "gd",
            "has no batch size to calibrate (full batch, b = n): use cgd or sgd",
        )
    if not isinstance(run.lr, (int, float)):
        raise ParameterError(
            "lr",
            "<schedule>",
            "must be a constant to calibrate the batch size: a per-step schedule fixes the "
            "number of steps, which changes with b at fixed epochs",
        )
    if run.algorithm == "cgd" and abs(run.E - round(run.E)) > 1e-9:
        raise ParameterError(
            "epochs",
            run.E,
            "must be a whole number to calibrate the batch size of cgd (steps = epochs * "
            "ceil(n/b) must stay an integer for every b)",
        )
    return "largest" if run.noise_multiplier is not None else "smallest"


def calibrate_batch_size(
    run: Run,
    *,
    epsilon: float,
    delta: float = 1e-5,
    bounds: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Calibration:
    """The extreme batch size b in [1, n] whose best bound gives eps <= ``epsilon``, at fixed
    epochs (the number of steps T = epochs * n / b, or epochs * ceil(n/b) for cyclic and shuffled
    batches, changes with b) and a fixed noise input:

    * a run given a ``noise_multiplier`` z (Opacus; sigma = z C / b) keeps z: a larger batch
      samples each example more often at the same per-step scale and costs MORE privacy, so the
      answer is the LARGEST batch size within the target;
    * a run given a ``noise_std`` sigma (on the averaged gradient) keeps sigma: a larger batch
      has the smaller sensitivity L / b and costs LESS, so the answer is the SMALLEST batch size
      within the target (see :func:`batch_size_direction`).

    The search is that of :func:`calibrate_epochs` over the integers of [1, n], ordered from the
    cheap end to the expensive one: the locating estimates place the answer (doubling or halving b
    from the run's own batch size, then integer bisection/interpolation), a focused phase brackets
    it with the bound they name, and full accountings close it.  It ASSUMES the privacy loss is
    monotone in b; the last-iterate theorems do not promise that, so the answer is the extreme
    found by this bisection, verified, not proven global: the returned batch size's best bound
    (a full accounting, in ``report``) is always within the target (never overshoots), and the
    next batch size towards the expensive end was found above it, but a batch size farther out
    may meet the target again where a bound is not monotone.

    Example:
        >>> import lastiterate as li
        >>> run = li.Run(algorithm="sgd", n=500, batch_size=50, epochs=5, lr=0.1,
        ...              noise_multiplier=1.0, clip=1.0, sampling="poisson",
        ...              adjacency="add-remove")
        >>> cal = li.calibrate_batch_size(run, epsilon=2.0, delta=1e-5)
        >>> cal.report.best.epsilon <= 2.0 and 1 <= cal.batch_size <= 500
        True

    Args:
        run: the run to calibrate; its batch size is the starting point, its epochs and its
            noise input (``noise_multiplier`` or ``noise_std``) stay fixed.
        epsilon: the target epsilon (> 0) at ``delta``.
        delta: the target delta, in (0, 1).
        bounds: bound ids to use (default all, composition included).
        progress: called with a short message after every evaluation.

    Returns:
        A :class:`Calibration` with ``batch_size`` and the report at that batch size (its
        ``noise_std`` is the one that batch size gets).

    Raises:
        ParameterError: the run has no batch size to choose (gd), a learning-rate schedule, a
            fractional number of epochs under cyclic batches, or no batch size in [1, n] meets
            the target.
        NotApplicable: no bound applies to the run.
    """
    target = check_positive("epsilon", epsilon)
    check_progress(progress)
    direction = batch_size_direction(run)
    n = run.n
    epochs: float = round(run.E) if abs(run.E - round(run.E)) <= 1e-9 else run.E

    def b_of(x: int) -> int:
        """The batch size at search position x (1 = the cheap end, n = the expensive end)."""
        return x if direction == "largest" else n + 1 - x

    def make_run(x: int) -> Run:
        return run.replace(batch_size=b_of(x), epochs=epochs)

    def partial(x: int, ids: Sequence[str] | None) -> float:
        """The best epsilon of ``ids`` at position x; inf where the run is refused (e.g. a
        per-step scale above the accountant's range at a small batch with a fixed noise std)."""
        try:
            r = make_run(x)
        except ParameterError:
            return math.inf
        return _best_epsilon(r, delta, ids)[0]

    seen: dict[int, tuple[float, Report | None]] = {}

    def evaluate(x: int) -> float:
        if x not in seen:
            try:
                eps, rep = _best_epsilon(make_run(x), delta, bounds)
                seen[x] = (eps, rep)
            except ParameterError:
                seen[x] = (math.inf, None)
            if progress is not None:
                progress(f"batch size={b_of(x)} -> epsilon={seen[x][0]:.6g}")
        return seen[x][0]

    def full(x: float) -> float:
        return _batch_excess(evaluate(int(x)), target)

    def estimate(x: float) -> float:
        try:
            make_run(int(x))
        except ParameterError:  # a batch size the run refuses: bad, as in ``partial``
            return math.inf
        return estimates(x)

    estimates = _Estimates(lambda x: make_run(int(x)), delta, bounds, target)
    x0 = min(max(1, run.b if direction == "largest" else n + 1 - run.b), n)
    bracket = None
    located = _locate_batch(estimate, estimates, x0, n, b_of)
    if located is not None:
        named = estimates.best_at.get(float(located[0]))
        if named is not None:
            bracket, located = _focused_epoch_bracket(
                full,
                seen,  # type: ignore[arg-type]
                located,
                n,
                run,
                delta,
                target,
                named,
                progress,
                partial=partial,
                label=lambda x: f"batch size={b_of(x)}",
            )
        if bracket is None:
            bracket = _integer_bracket_near(full, located, n)
    if bracket is None:  # no estimate, or it misled: bisection with full accountings
        bracket = _full_batch_bracket(full, n, epsilon, direction, b_of)
    if bracket is not None:
        bracket = shrink_bracket(
            full, bracket, done=lambda bad, good: abs(bad - good) <= 1, integer=True
        )
        best_x = int(bracket.good)
    else:  # every batch size up to the expensive end meets the target
        best_x = n
    eps, rep = seen[best_x]
    if rep is None or not eps <= target:  # the invariant of the bracket; checked, never assumed
        raise RuntimeError(f"batch-size calibration ended outside the target at x={best_x}")
    final = make_run(best_x)
    return Calibration(final.sigma, _z(final), final.E, rep, batch_size=final.b)


def _batch_excess(eps: float, target: float) -> float:
    """:func:`_log_excess`, with its sign forced to agree with ``eps <= target`` exactly (the
    verification of the answer compares epsilons, not logarithms)."""
    g = _log_excess(eps, target)
    if eps <= target:
        return min(g, 0.0)
    return g if g > 0 else math.ulp(1.0)


def _locate_batch(
    estimate: Callable[[float], float],
    estimates: _Estimates,
    x0: int,
    n: int,
    b_of: Callable[[int], int],
) -> tuple[int, float | None] | None:
    """The last search position meeting the target by the locating estimates, with their excess
    per position there; None when they cannot place it.  Positions x run from the cheap end (1)
    to the expensive one (n); the batch size b_of(x) is doubled or halved from the run's own
    (geometric steps in b, whichever way x runs), then the integer bracket is shrunk on the
    estimates."""

    def x_of(b: int) -> int:
        return b if b_of(1) == 1 else n + 1 - b

    def towards(x: int, bad: bool) -> int:
        b = b_of(x)
        up = (b_of(1) == 1) == bad  # the expensive end is the large b under 'largest'
        return x_of(min(n, 2 * b) if up else max(1, b // 2))

    try:
        g0 = estimate(x0)
        x, g = x0, g0
        while True:
            nxt = towards(x, bad=g <= 0)
            if nxt == x:  # an end of [1, n]
                return (n, None) if g <= 0 else (1, None)
            g_new = estimate(nxt)
            if (g_new > 0) != (g > 0):
                break
            x, g = nxt, g_new
        b = _ordered_bracket(x, g, nxt, g_new)
        estimates.focus(b)
        b = shrink_bracket(estimate, b, done=lambda bad, good: abs(bad - good) <= 1, integer=True)
    except (ParameterError, NotApplicable):
        return None
    slope = (b.g_bad - b.g_good) / (b.bad - b.good)
    return int(b.good), (slope if math.isfinite(slope) and slope > 0 else None)


def _full_batch_bracket(
    full: Callable[[float], float],
    n: int,
    epsilon: float,
    direction: str,
    b_of: Callable[[int], int],
) -> Bracket | None:
    """The bracket of the whole range with full accountings: None when the expensive end (n)
    meets the target (the answer is that end; it is evaluated first, the usual reason to come
    here); else the cheap end (1) must meet it (else ParameterError)."""
    g_n = full(n)
    if g_n <= 0:
        return None
    g1 = full(1)
    if g1 > 0:
        raise ParameterError(
            "epsilon",
            epsilon,
            f"is not met by any batch size in [1, {n}] (the {direction} batch size is sought; "
            f"even b={b_of(1)} exceeds it)",
        )
    return Bracket(bad=float(n), good=1.0, g_bad=g_n, g_good=g1)


def _z(run: Run) -> float | None:
    return run.sigma * run.b / run.clip if run.clip is not None else None
