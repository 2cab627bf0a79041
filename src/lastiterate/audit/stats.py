"""Statistics of privacy audits: confidence bounds, epsilon / mu lower bounds, threshold strategies.

An audit observes scores ``S`` of the released output under two neighbouring worlds D and D' and
runs threshold tests "guess D' if S > t" (and the mirrored "guess D' if S < t").  For one test

    FPR = P_D(S > t),   FNR = P_D'(S <= t).

Every (eps, delta)-DP mechanism satisfies FNR >= f_{eps,delta}(FPR) (docs/theorems.md 1.1), so with
one-sided UPPER confidence bounds FPR_u, FNR_u (Clopper-Pearson, each at level alpha/2):

    eps >= eps_lb = max( log((1 - delta - FPR_u)/FNR_u), log((1 - delta - FNR_u)/FPR_u), 0 )

and every mu-GDP mechanism satisfies FNR >= G_mu(FPR) = Phi(Phi^-1(1 - FPR) - mu), so

    mu >= mu_lb = Phi^-1(1 - FPR_u) - Phi^-1(FNR_u).

Both hold with probability >= 1 - alpha for ONE test chosen independently of the evaluation data.
``mu_lb`` is a rigorous lower bound on the GDP parameter whatever the shape of the true tradeoff
curve; converting it to an epsilon(delta) lower bound assumes a Gaussian-shaped curve, so the
non-parametric ``eps_lb`` is the one to compare with (eps, delta) claims of non-Gaussian mechanisms.

Threshold choice (auditing-notes 3.4, and the "same data" bug class of 5.3):

* :class:`Explicit` - thresholds fixed in advance (e.g. from an exact reference); Bonferroni over
them;
* :class:`Split` - choose the best threshold on a held-out part, evaluate on the rest;
* :class:`Bonferroni` - a grid of thresholds (fixed, or read from a small pilot part that is then
  discarded), every one evaluated at level alpha / (#grid * #directions);
* :class:`DKW` - the Dvoretzky-Kiefer-Wolfowitz band (Massart constant), simultaneous over ALL
  thresholds, so the best one can be picked on the same data.

The mu_lb of a null audit (D = D') can be negative; it is reported as is (never folded with abs():
google-deepmind/jax_privacy PR #270).  eps_lb is clipped at 0.

This module deliberately re-implements the GDP <-> (eps, delta) duality with scipy instead of
importing ``lastiterate.notions``: the audit must not share numerics with the code it audits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy import optimize, special, stats

Direction = Literal["greater", "less"]

__all__ = [
    "DKW",
    "Bonferroni",
    "Explicit",
    "ScoreAudit",
    "Split",
    "TestOutcome",
    "ThresholdStrategy",
    "audit_scores",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "dkw_epsilon",
    "eps_lb_two_sided",
    "epsilon_of_gdp",
    "fdp_violation",
    "mu_lb_gdp",
    "point_mu_gaussian",
]


# ---------------------------------------------------------------------- Gaussian DP (independent
# copy)
def _ndtr(x: Any) -> Any:
    return special.ndtr(x)


def _gaussian_tradeoff(alpha: Any, mu: float) -> Any:
    """G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu)."""
    a = np.clip(np.asarray(alpha, dtype=float), 0.0, 1.0)
    return _ndtr(special.ndtri(1.0 - a) - mu)


def _gdp_delta(eps: float, mu: float) -> float:
    """delta(eps; mu) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (docs/theorems.md 1.2), in
    log space."""
    if mu <= 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    a = -eps / mu + mu / 2
    b = -eps / mu - mu / 2
    la = special.log_ndtr(a)
    lb = eps + special.log_ndtr(b)
    if lb >= la:
        return 0.0
    return float(math.exp(la) * -math.expm1(lb - la))


def _gdp_epsilon(delta: float, mu: float) -> float:
    """The smallest eps >= 0 with delta(eps; mu) <= delta (bracketing root finding)."""
    if not (0 < delta < 1):
        raise ValueError(f"delta={delta!r} must be in (0, 1)")
    if mu <= 0 or _gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = max(1.0, mu * mu / 2 + 3 * mu * math.sqrt(2 * math.log(1 / delta)))
    while _gdp_delta(hi, mu) > delta:
        hi *= 2
    return float(
        optimize.brentq(lambda e: _gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-12, rtol=1e-12)
    )


# ---------------------------------------------------------------------- confidence bounds
def clopper_pearson_upper(k: Any, n: Any, alpha: float) -> Any:
    """One-sided (1 - alpha) Clopper-Pearson UPPER bound on a binomial proportion (k successes of
    n).

    Exact: P(p <= upper) >= 1 - alpha.  Equals 1 when k == n.  Vectorised over k (and n).
    """
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    _check_alpha(alpha)
    with np.errstate(invalid="ignore"):
        up = stats.beta.ppf(1.0 - alpha, k + 1.0, np.maximum(n - k, 1e-300))
    up = np.where(k >= n, 1.0, up)
    return up if up.ndim else float(up)


def clopper_pearson_lower(k: Any, n: Any, alpha: float) -> Any:
    """One-sided (1 - alpha) Clopper-Pearson LOWER bound (0 when k == 0)."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    _check_alpha(alpha)
    with np.errstate(invalid="ignore"):
        lo = stats.beta.ppf(alpha, np.maximum(k, 1e-300), n - k + 1.0)
    lo = np.where(k <= 0, 0.0, lo)
    return lo if lo.ndim else float(lo)


def dkw_epsilon(n: int, alpha: float) -> float:
    """Half-width of the two-sided DKW band: P(sup_t |F_n(t) - F(t)| > eps) <= alpha (Massart)."""
    _check_alpha(alpha)
    return math.sqrt(math.log(2.0 / alpha) / (2.0 * n))


def _check_alpha(alpha: float) -> None:
    if not (0 < alpha < 1):
        raise ValueError(f"alpha={alpha!r} must be in (0, 1)")


# ---------------------------------------------------------------------- lower bounds from one test
def eps_lb_two_sided(fpr_u: Any, fnr_u: Any, delta: float) -> Any:
    """eps lower bound of an (eps, delta) claim from upper bounds on FPR and FNR of one test:

    max( log((1 - delta - FPR_u)/FNR_u), log((1 - delta - FNR_u)/FPR_u), 0 ).
    """
    fpr_u = np.asarray(fpr_u, dtype=float)
    fnr_u = np.asarray(fnr_u, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1.0 - delta - fpr_u, 0.0)) - np.log(fnr_u)
        b = np.log(np.maximum(1.0 - delta - fnr_u, 0.0)) - np.log(fpr_u)
    out = np.maximum(np.maximum(np.nan_to_num(a, nan=-np.inf), np.nan_to_num(b, nan=-np.inf)), 0.0)
    return out if out.ndim else float(out)


def mu_lb_gdp(fpr_u: Any, fnr_u: Any) -> Any:
    """mu lower bound Phi^-1(1 - FPR_u) - Phi^-1(FNR_u) (may be negative; never abs()-folded).

    ``-inf`` for a test with FPR_u = 1 or FNR_u = 1 (it certifies nothing): the threshold
    strategies rank tests by it, so such a test is never preferred to one with a finite bound.
    What is reported is :func:`reported_mu_lb` of it."""
    fpr_u = np.clip(np.asarray(fpr_u, dtype=float), 0.0, 1.0)
    fnr_u = np.clip(np.asarray(fnr_u, dtype=float), 0.0, 1.0)
    with np.errstate(invalid="ignore"):  # FPR_u = 1 and FNR_u = 0: -inf - (-inf)
        out = special.ndtri(1.0 - fpr_u) - special.ndtri(fnr_u)
    out = np.where(np.isnan(out), -np.inf, out)
    return out if out.ndim else float(out)


def reported_mu_lb(mu_lb: float) -> float:
    """The mu lower bound of a test as reports print it: ``mu_lb``, or 0 for ``-inf``.

    A test whose FPR_u or FNR_u is 1 puts its upper corner on the edge of the unit square, the end
    point of every tradeoff curve (G_mu(0) = 1 for all mu): it certifies nothing, and
    :func:`mu_lb_gdp` gives -inf.  0 is the lower bound every mechanism meets (any tradeoff
    function is at most 1 - alpha = G_0(alpha)), so reporting it claims nothing more and keeps
    -inf out of JSON and tables.  A finite negative bound is reported as it is (the point
    estimate of a weak test)."""
    return 0.0 if mu_lb == -math.inf else float(mu_lb)


def fdp_violation(f: Callable[[Any], Any], fpr_u: Any, fnr_u: Any) -> bool:
    """True if some test refutes the claimed tradeoff function f: FNR_u < f(FPR_u).

    Since f is non-increasing and FPR_u >= FPR, FNR_u >= FNR (with the stated confidence), a test
    with FNR_u < f(FPR_u) has FNR <= FNR_u < f(FPR_u) <= f(FPR), i.e. the claim is false.
    For a claim about the SYMMETRIC notion, call it also with the roles of FPR and FNR exchanged.
    """
    fpr_u = np.asarray(fpr_u, dtype=float)
    fnr_u = np.asarray(fnr_u, dtype=float)
    return bool(np.any(fnr_u < np.asarray(f(fpr_u), dtype=float)))


# ---------------------------------------------------------------------- empirical error rates
def _error_counts(
    x: np.ndarray, y: np.ndarray, thresholds: np.ndarray, direction: Direction
) -> tuple[np.ndarray, np.ndarray]:
    """(false positives among x, false negatives among y) of "guess D' if S > t" (or "S < t")."""
    xs = np.sort(x)
    ys = np.sort(y)
    if direction == "greater":
        fp = xs.size - np.searchsorted(xs, thresholds, side="right")  # #{x > t}
        fn = np.searchsorted(ys, thresholds, side="right")  # #{y <= t}
    else:
        fp = np.searchsorted(xs, thresholds, side="left")  # #{x < t}
        fn = ys.size - np.searchsorted(ys, thresholds, side="left")  # #{y >= t}
    return fp.astype(float), fn.astype(float)


def _candidate_thresholds(values: np.ndarray, max_candidates: int) -> np.ndarray:
    """Midpoints between distinct sorted values (plus both ends), at most ``max_candidates``.

    Midpoints make a test separate atoms cleanly (e.g. the boundary atoms of a projected walk).
    """
    u = np.unique(values[np.isfinite(values)])
    if u.size == 0:
        return np.array([0.0])
    if u.size > max_candidates:
        idx = np.unique(np.linspace(0, u.size - 1, max_candidates).round().astype(int))
        u = u[idx]
    span = (u[-1] - u[0]) if u.size > 1 else 1.0
    mids = (u[:-1] + u[1:]) / 2 if u.size > 1 else np.empty(0)
    pad = 1e-9 * max(span, 1.0)
    return np.concatenate(([u[0] - pad], mids, [u[-1] + pad]))


Metric = Literal["mu", "eps"]


@dataclass(frozen=True)
class TestOutcome:
    """One evaluated threshold test and the lower bounds it certifies."""

    threshold: float
    direction: Direction
    fpr: float
    fnr: float
    fpr_u: float
    fnr_u: float
    mu_lb: float
    eps_lb: float
    n_d: int
    n_dprime: int
    alpha_per_test: float

    def to_json(self) -> dict[str, Any]:
        """The test as JSON values: ``mu_lb`` as reported (:func:`reported_mu_lb`), ``eps_lb``
        None when it was not computed (no delta)."""
        out = dict(self.__dict__)
        out["mu_lb"] = reported_mu_lb(self.mu_lb)
        return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in out.items()}


def _evaluate(
    x: np.ndarray,
    y: np.ndarray,
    thresholds: np.ndarray,
    direction: Direction,
    alpha_per_test: float,
    delta: float | None,
) -> list[TestOutcome]:
    fp, fn = _error_counts(x, y, thresholds, direction)
    a = alpha_per_test / 2  # split between the FPR and the FNR bound
    fpr_u = np.atleast_1d(clopper_pearson_upper(fp, x.size, a))
    fnr_u = np.atleast_1d(clopper_pearson_upper(fn, y.size, a))
    mu = np.atleast_1d(mu_lb_gdp(fpr_u, fnr_u))
    eps = (
        np.atleast_1d(eps_lb_two_sided(fpr_u, fnr_u, delta))
        if delta is not None
        else np.full(mu.shape, np.nan)
    )
    return [
        TestOutcome(
            float(t),
            direction,
            float(p / x.size),
            float(q / y.size),
            float(pu),
            float(qu),
            float(m),
            float(e),
            x.size,
            y.size,
            alpha_per_test,
        )
        for t, p, q, pu, qu, m, e in zip(thresholds, fp, fn, fpr_u, fnr_u, mu, eps)
    ]


def _point_scores(
    x: np.ndarray,
    y: np.ndarray,
    thresholds: np.ndarray,
    direction: Direction,
    metric: Metric,
    delta: float | None,
    alpha: float,
) -> np.ndarray:
    """Selection score of each threshold on selection data: the bound itself at level alpha
    (penalises thresholds in sparse tails, unlike the raw point estimate)."""
    outs = _evaluate(x, y, thresholds, direction, alpha, delta)
    return np.array([o.mu_lb if metric == "mu" else o.eps_lb for o in outs])


# ---------------------------------------------------------------------- threshold strategies
class ThresholdStrategy:
    """How the thresholds of an audit are chosen; ``select`` returns the evaluated tests."""

    def select(
        self,
        x: np.ndarray,
        y: np.ndarray,
        *,
        metric: Metric,
        alpha: float,
        delta: float | None,
        directions: Sequence[Direction],
        rng: np.random.Generator,
    ) -> list[TestOutcome]:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class Explicit(ThresholdStrategy):
    """Thresholds fixed before seeing the data; Bonferroni over thresholds x directions."""

    thresholds: tuple[float, ...]

    def select(self, x, y, *, metric, alpha, delta, directions, rng):  # type: ignore[no-untyped-def]
        ts = np.asarray(self.thresholds, dtype=float)
        k = ts.size * len(directions)
        out: list[TestOutcome] = []
        for d in directions:
            out += _evaluate(x, y, ts, d, alpha / k, delta)
        return out

    def describe(self) -> str:
        return f"explicit({len(self.thresholds)} thresholds)"


@dataclass(frozen=True)
class Split(ThresholdStrategy):
    """Choose the best threshold and direction on a random ``fraction`` of each world's scores;
    evaluate that single test on the remaining scores at the full level alpha."""

    fraction: float = 0.5
    max_candidates: int = 2000

    def select(self, x, y, *, metric, alpha, delta, directions, rng):  # type: ignore[no-untyped-def]
        xs, xe = _random_split(x, self.fraction, rng)
        ys, ye = _random_split(y, self.fraction, rng)
        cand = _candidate_thresholds(np.concatenate([xs, ys]), self.max_candidates)
        best: tuple[float, float, Direction] | None = None
        for d in directions:
            sc = _point_scores(xs, ys, cand, d, metric, delta, alpha)
            i = int(np.argmax(sc))
            if best is None or sc[i] > best[0]:
                best = (float(sc[i]), float(cand[i]), d)
        assert best is not None
        return _evaluate(xe, ye, np.array([best[1]]), best[2], alpha, delta)

    def describe(self) -> str:
        return f"split(select on {self.fraction:g})"


@dataclass(frozen=True)
class Bonferroni(ThresholdStrategy):
    """A grid of thresholds, each test at level alpha / (#grid x #directions).

    Give ``thresholds`` for a fixed grid, or let ``n_grid`` quantiles be read from a random pilot
    part (``pilot_fraction`` of each world) that is NOT used for evaluation.
    """

    thresholds: tuple[float, ...] | None = None
    n_grid: int = 64
    pilot_fraction: float = 0.1

    def select(self, x, y, *, metric, alpha, delta, directions, rng):  # type: ignore[no-untyped-def]
        if self.thresholds is not None:
            ts = np.asarray(self.thresholds, dtype=float)
            xe, ye = x, y
        else:
            xp, xe = _random_split(x, self.pilot_fraction, rng)
            yp, ye = _random_split(y, self.pilot_fraction, rng)
            pilot = np.concatenate([xp, yp])
            qs = np.quantile(pilot, np.linspace(0, 1, self.n_grid + 2)[1:-1])
            ts = _candidate_thresholds(qs, self.n_grid + 2)
        k = ts.size * len(directions)
        out: list[TestOutcome] = []
        for d in directions:
            out += _evaluate(xe, ye, ts, d, alpha / k, delta)
        return out

    def describe(self) -> str:
        return (
            "bonferroni(fixed grid)"
            if self.thresholds is not None
            else f"bonferroni({self.n_grid} pilot quantiles)"
        )


@dataclass(frozen=True)
class DKW(ThresholdStrategy):
    """Simultaneous DKW bands on both empirical CDFs (level alpha / (2 #directions) each): every
    threshold is valid at once, so the best can be chosen on the same data."""

    max_candidates: int = 4000

    def select(self, x, y, *, metric, alpha, delta, directions, rng):  # type: ignore[no-untyped-def]
        k = 2 * len(directions)
        ex = dkw_epsilon(x.size, alpha / k)
        ey = dkw_epsilon(y.size, alpha / k)
        cand = _candidate_thresholds(np.concatenate([x, y]), self.max_candidates)
        out: list[TestOutcome] = []
        for d in directions:
            fp, fn = _error_counts(x, y, cand, d)
            fpr_u = np.minimum(fp / x.size + ex, 1.0)
            fnr_u = np.minimum(fn / y.size + ey, 1.0)
            mu = np.atleast_1d(mu_lb_gdp(fpr_u, fnr_u))
            eps = (
                np.atleast_1d(eps_lb_two_sided(fpr_u, fnr_u, delta))
                if delta is not None
                else np.full(mu.shape, np.nan)
            )
            sc = mu if metric == "mu" else eps
            i = int(np.argmax(sc))
            out.append(
                TestOutcome(
                    float(cand[i]),
                    d,
                    float(fp[i] / x.size),
                    float(fn[i] / y.size),
                    float(fpr_u[i]),
                    float(fnr_u[i]),
                    float(mu[i]),
                    float(eps[i]),
                    x.size,
                    y.size,
                    alpha,
                )
            )
        return out


def _random_split(
    v: np.ndarray, fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    if not (0 < fraction < 1):
        raise ValueError(f"fraction={fraction!r} must be in (0, 1)")
    perm = rng.permutation(v.size)
    k = round(fraction * v.size)
    return v[perm[:k]], v[perm[k:]]


# ---------------------------------------------------------------------- score-level auditor
@dataclass(frozen=True)
class ScoreAudit:
    """The certified lower bounds of one audit of scores (x under D, y under D')."""

    mu_lb: float
    eps_lb: float | None
    delta: float | None
    alpha: float
    strategy: str
    best_mu_test: TestOutcome | None
    best_eps_test: TestOutcome | None
    n_d: int
    n_dprime: int
    extra: dict[str, Any] = field(default_factory=dict)


def audit_scores(
    x: Any,
    y: Any,
    *,
    delta: float | None = None,
    alpha: float = 0.05,
    strategy: ThresholdStrategy | None = None,
    directions: Sequence[Direction] = ("greater", "less"),
    seed: int | None = 0,
) -> ScoreAudit:
    """mu and eps(delta) lower bounds, each holding with probability >= 1 - alpha.

    ``x``: scores under D; ``y``: scores under D'.  When ``delta`` is given, alpha is split in two
    halves, one for the mu bound and one for the eps bound (so both hold jointly w.p. >= 1 - alpha).
    """
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.size == 0 or y.size == 0:
        raise ValueError("both worlds need at least one score")
    _check_alpha(alpha)
    strategy = strategy or Split()
    rng = np.random.default_rng(seed)
    a = alpha / 2 if delta is not None else alpha
    mu_tests = strategy.select(
        x, y, metric="mu", alpha=a, delta=None, directions=directions, rng=rng
    )
    best_mu = max(mu_tests, key=lambda o: o.mu_lb)
    best_eps = None
    eps_lb = None
    if delta is not None:
        eps_tests = strategy.select(
            x, y, metric="eps", alpha=a, delta=delta, directions=directions, rng=rng
        )
        best_eps = max(eps_tests, key=lambda o: o.eps_lb)
        eps_lb = best_eps.eps_lb
    return ScoreAudit(
        mu_lb=reported_mu_lb(best_mu.mu_lb),
        eps_lb=eps_lb,
        delta=delta,
        alpha=alpha,
        strategy=strategy.describe(),
        best_mu_test=best_mu,
        best_eps_test=best_eps,
        n_d=x.size,
        n_dprime=y.size,
    )


def point_mu_gaussian(x: Any, y: Any) -> float:
    """Moment estimate |mean(y) - mean(x)| / pooled sd (assumes equal-variance Gaussians; no CI)."""
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    sd = math.sqrt((x.var(ddof=1) + y.var(ddof=1)) / 2)
    return (
        float(abs(y.mean() - x.mean()) / sd)
        if sd > 0
        else (0.0 if y.mean() == x.mean() else math.inf)
    )


def epsilon_of_gdp(mu: float, delta: float) -> float:
    """epsilon(delta) of the mu-GDP curve (0 for mu <= 0), the independent copy of the GDP duality
    above: the smallest eps >= 0 with Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) <= delta."""
    if not (0 < delta < 1):
        raise ValueError(f"delta={delta!r} must be in (0, 1)")
    if not math.isfinite(mu):
        raise ValueError(f"mu={mu!r} must be finite")
    return _gdp_epsilon(delta, mu) if mu > 0 else 0.0
