"""One-run audit (Steinke, Nasr, Jagielski, NeurIPS 2023): m canaries, ONE training run.

:mod:`lastiterate.audit.canary` trains hundreds of models per world.  This module trains ONE model
with the project's own trainer and still certifies a lower bound on epsilon, from m canaries whose
presence is decided by independent fair coins (Steinke, Nasr, Jagielski, "Privacy Auditing with One
(1) Training Run", arXiv 2305.08846, Algorithm 1):

1. draw S in {-1, +1}^m uniformly (secret from the guesser);
2. train on the data plus, for each canary i, its ``+`` version if S_i = +1 and its ``-`` version
   otherwise (replace-one adjacency: n is the same whatever S, and flipping one S_i replaces one
   row, so a replace-one (eps, delta)-DP trainer is (eps, delta)-DP in S);
3. score every canary on the FINAL model (higher = "looks like +") and guess T_i = +1 for the
   ``k_plus`` highest scores, -1 for the ``k_minus`` lowest, abstain (0) on the rest: r = k_plus +
   k_minus guesses, v of them correct (T_i = S_i);
4. reject "the trainer is (eps, delta)-DP" when the tail bound on v is below alpha.

The tail bound (their Theorem 5.2 / Corollary 5.4, with delta handled as in the paper): if the
mechanism is (eps, delta)-DP in S then, with q = e^eps / (1 + e^eps) (the accuracy of eps-DP
randomized response),

    P[V >= v] <= P[Binomial(r, q) >= v]
                 + 2 m delta * max_{1 <= i <= v} P[v - i <= Binomial(r, q) <= v - 1] / i,

for any guesser that sees only the output.  :func:`one_run_p_value` is this bound;
:func:`one_run_epsilon_lb` is the largest eps rejected at level alpha (the bound is nondecreasing
in eps, which the tests check; the search scans a grid from 0 and bisects the first crossing, and
returns its low end, so it never over-reports).  Several guess sizes k are tried with a
Bonferroni split of alpha (each at alpha / #sizes), so picking the best one afterwards keeps the
confidence 1 - alpha.

Canaries (:class:`OneRunCanaries`):

* ``gradient`` (white-box of the final model, hidden-state threat model): one new feature per
  canary, 0 in every other row; canary i is the row ``a e_{d+i}`` with label + / - as in
  :func:`lastiterate.audit.canary.gradient_canary` (only canary i's gradient touches column d+i:
  the crafted-gradient-every-step adversary of Cebere, Bellet, Papernot, ICLR 2025).  Score: the
  final weights projected on canary i's direction.
* ``input`` (black-box): m held-out points; ``+`` = the point with a wrong label, ``-`` = with its
  true label.  Score: loss(true label) - loss(wrong label) under the final model (membership of the
  mislabelled version lowers its loss).  Works for any model with ``per_example_losses`` (GLMs and
  MLPs).

The f-DP refinement (Mahloujifar, Melis, Chaudhuri, "Auditing f-Differential Privacy in One Run",
arXiv 2410.22235, 2024; :func:`one_run_fdp_bound`) reads the same guesses (r, v) against a
candidate tradeoff curve f instead of (eps, delta): if the trainer is f-DP in S, their recursion
on the guessing game with abstention (:func:`fdp_one_run_statistic`) bounds P[V >= v]; when it
shows P[V >= v] < alpha the observation rejects f.  Over the nested GDP family G_mu this gives the
largest rejected mu (``fdp_mu_lb``: valid for any mechanism, compared with the accountant's GDP
claims, i.e. its claimed tradeoff curve where it has one) and epsilon(delta) of that Gaussian curve
(``fdp_eps_lb``, the paper's empirical epsilon: an (eps, delta) lower bound only for
Gaussian-shaped curves); over the (eps, delta) curves it gives a non-parametric epsilon bound
(``eps_lb_eps_delta``, close to Steinke et al.'s).  The same guess sizes and Bonferroni split are
used, so each bound holds at confidence 1 - alpha.

The bound is loose by design (one run, m canaries): it certifies leakage, it cannot certify
privacy, so the verdict is VIOLATION (eps_lb above an epsilon claim, or fdp_mu_lb above a GDP
claim: two tests, each at level alpha, so a sound trainer is flagged with probability at most
2 alpha) or consistent/inconclusive, never a proof of the claim.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import special, stats

from lastiterate.accountant import account
from lastiterate.audit.canary import (
    FAMILIES,
    GRADIENT_TARGET,
    INPUT_TARGET_SHIFT,
    _check_family,
    _scaled_noise,
    model_seed,
)
from lastiterate.audit.report import verdict_for
from lastiterate.audit.stats import epsilon_of_gdp
from lastiterate.errors import (
    NotApplicable,
    ParameterError,
    check_in_range,
    check_positive,
    check_positive_int,
)
from lastiterate.formatting import fmt_number
from lastiterate.train.randomness import SeededRunWarning

__all__ = [
    "OneRunAuditResult",
    "OneRunCanaries",
    "OneRunFdpGuess",
    "OneRunGuess",
    "audit_one_run",
    "canary_signs",
    "default_guess_sizes",
    "eps_delta_inverse_blowup",
    "fdp_one_run_epsilon_lb",
    "fdp_one_run_mu_lb",
    "fdp_one_run_rejects",
    "fdp_one_run_statistic",
    "gdp_inverse_blowup",
    "guess_from_scores",
    "one_run_bound",
    "one_run_epsilon_lb",
    "one_run_fdp_bound",
    "one_run_gradient_canaries",
    "one_run_input_canaries",
    "one_run_p_value",
    "one_run_scores",
]

#: largest epsilon the search considers (beyond it the p-value of any finite r is ~0 anyway)
EPS_SEARCH_MAX = 50.0
#: at most this many canaries (each adds a row, a gradient canary also a feature)
MAX_CANARIES = 100_000
#: gradient canaries build a dense (n + m) x (d + m) design: at most this many entries (800 MB)
MAX_DENSE_ENTRIES = 100_000_000


# ---------------------------------------------------------------------- the statistics
def _check_counts(m: int, r: int, v: int) -> tuple[int, int, int]:
    m = check_positive_int("m", m)
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or not 0 <= r <= m:
        raise ParameterError("r", r, f"must be an integer number of guesses in [0, m={m}]")
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= r:
        raise ParameterError("v", v, f"must be an integer number of correct guesses in [0, r={r}]")
    return m, int(r), int(v)


def one_run_p_value(m: int, r: int, v: int, eps: Any, delta: float) -> Any:
    """Steinke-Nasr-Jagielski (2023), Thm 5.2 / Cor 5.4: an upper bound on P[V >= v] for v correct
    guesses out of r (m canaries, each in with probability 1/2) under (eps, delta)-DP.

    ``P[Bin(r, q) >= v] + 2 m delta max_{1<=i<=v} P[v-i <= Bin(r, q) <= v-1] / i``, q =
    e^eps/(1+e^eps), clipped at 1.  Vectorised over ``eps``.
    """
    m, r, v = _check_counts(m, r, v)
    delta = check_in_range("delta", delta, 0.0, 1.0, high_open=True)
    e = np.asarray(eps, dtype=float)
    if np.any(~np.isfinite(e)) or np.any(e < 0):
        raise ParameterError("eps", eps, "must be finite and >= 0")
    q = np.exp(-np.logaddexp(0.0, -e.reshape(-1)))  # e^eps / (1 + e^eps), stable; shape (G,)
    tail = stats.binom.sf(v - 1, r, q)  # P[Bin >= v]
    if delta > 0 and v > 0:
        i = np.arange(1, v + 1)[:, None]  # (v, 1)
        cdf_v1 = stats.binom.cdf(v - 1, r, q)[None, :]  # P[Bin <= v-1], (1, G)
        window = (cdf_v1 - stats.binom.cdf(v - 1 - i, r, q[None, :])) / i  # (v, G)
        tail = tail + 2.0 * m * delta * np.max(np.maximum(window, 0.0), axis=0)
    tail = tail.reshape(e.shape)
    out = np.minimum(tail, 1.0)
    return out if out.ndim else float(out)


def one_run_epsilon_lb(
    m: int, r: int, v: int, *, delta: float, alpha: float = 0.05, grid: int = 512
) -> float:
    """The largest eps that v correct guesses out of r reject at level ``alpha``: the low end of
    the first crossing of :func:`one_run_p_value` with alpha (0 when even eps = 0 is not rejected).

    With probability >= 1 - alpha the trainer is not (eps', delta)-DP for any eps' below the
    returned value.  The search scans ``grid`` points of [0, EPS_SEARCH_MAX] then bisects.
    """
    m, r, v = _check_counts(m, r, v)
    alpha = check_in_range("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    delta = check_in_range("delta", delta, 0.0, 1.0, high_open=True)
    if v == 0 or one_run_p_value(m, r, v, 0.0, delta) >= alpha:
        return 0.0
    g = np.linspace(0.0, EPS_SEARCH_MAX, grid + 1)
    p = np.asarray(one_run_p_value(m, r, v, g, delta))
    above = np.nonzero(p >= alpha)[0]
    if above.size == 0:  # rejected everywhere on the search range: report its end
        return float(g[-1])
    lo, hi = float(g[above[0] - 1]), float(g[above[0]])
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if one_run_p_value(m, r, v, mid, delta) < alpha:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-9:
            break
    return lo


# ---------------------------------------------------------------------- the f-DP refinement
def gdp_inverse_blowup(y: Any, mu: Any) -> np.ndarray:
    """Inverse blow-up of mu-GDP: ``Phi(Phi^-1(y) - mu)`` = ``G_mu(1 - y)`` (Mahloujifar, Melis,
    Chaudhuri 2024, their ``gaussianDP_blow_up_inverse``), without the rounding of ``1 - y``."""
    y = np.clip(np.asarray(y, dtype=float), 0.0, 1.0)
    return np.asarray(special.ndtr(special.ndtri(y) - np.asarray(mu, dtype=float)))


def eps_delta_inverse_blowup(y: Any, eps: Any, delta: float) -> np.ndarray:
    """Inverse blow-up of (eps, delta)-DP: ``f_{eps,delta}(1 - y)`` =
    ``max(0, e^-eps (y - delta), 1 - delta - e^eps (1 - y))`` (docs/theorems.md 1.1)."""
    y = np.clip(np.asarray(y, dtype=float), 0.0, 1.0)
    return _eps_delta_bound(np.asarray(eps, dtype=float), delta)(y)


def _gdp_bound(mu: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """y -> Phi(Phi^-1(y) - mu) for y in [0, 1] (the recursion keeps y there)."""

    def inv(y: np.ndarray) -> np.ndarray:
        return np.asarray(special.ndtr(special.ndtri(y) - mu))

    return inv


def _eps_delta_bound(eps: np.ndarray, delta: float) -> Callable[[np.ndarray], np.ndarray]:
    """y -> f_{eps,delta}(1 - y) for y in [0, 1], with e^eps and e^-eps computed once."""
    up = np.exp(np.minimum(eps, 700.0))  # (1 - y) e^eps: 0 at y = 1 whatever eps
    down = np.exp(-eps)

    def inv(y: np.ndarray) -> np.ndarray:
        return np.maximum(np.maximum(down * (y - delta), 1.0 - delta - up * (1.0 - y)), 0.0)

    return inv


def fdp_one_run_statistic(
    m: int,
    r: Any,
    v: Any,
    inverse_blowup: Callable[[np.ndarray], np.ndarray],
    alpha: Any,
    candidates: int = 1,
) -> np.ndarray:
    """Mahloujifar, Melis, Chaudhuri (2024, arXiv 2410.22235), the numerical audit of a guessing
    game with abstention (their ``audit_rh_with_cap``): ``r_0 + h_0 - r/m``; > 0 REJECTS f.

    Theorem (their one-run f-DP bound, alphabet k = 2): if the trainer is f-DP in the canary signs
    S (flipping one S_i, both directions; f symmetric) and a guesser that sees only the output
    makes ``r`` guesses, of which at least ``v`` are correct with probability >= tau, then the
    recursion started at ``r_v = tau v / m``, ``h_v = tau (r - v) / m`` and run for i = v-1..0,

        h_i = max(h_{i+1}, f^-blowup(r_{i+1})),   r_i = min(1, r_{i+1} + i/(r - i) (h_i - h_{i+1})),

    ends with ``r_0 + h_0 <= r / m``.  So with tau = alpha, a positive value certifies
    ``P[V >= v] < alpha`` under f: the observation rejects f at level alpha.  The inverse
    blow-up ``f^-blowup(y)`` = ``f(1 - y)`` is ``inverse_blowup(y)``, y in [0, 1].

    Vectorised: ``r``, ``v`` of shape (K,) (one row per guess size; or scalars, K = 1) and
    ``candidates`` G curves per row: ``inverse_blowup`` maps a (K, G) array to a (K, G) array
    (column j is candidate j), and the result is (K, G); ``alpha`` is a scalar or one level per
    row.  r_i and h_i never decrease as i falls, so the loop stops once every candidate is
    decided: r + h above the budget r/m (its sign is then final; the value returned is positive
    but not the full r_0 + h_0) or h at a fixed point (h_i = h_{i+1} keeps every later step
    unchanged).
    """
    m = check_positive_int("m", m)
    r_arr = np.atleast_1d(np.asarray(r, dtype=float))
    v_arr = np.atleast_1d(np.asarray(v, dtype=np.int64))
    if r_arr.ndim != 1 or r_arr.shape != v_arr.shape or r_arr.size == 0:
        raise ParameterError("r", r, "r and v must be integers or equal-length 1-D arrays")
    if np.any(~(r_arr <= m)) or np.any(r_arr != np.round(r_arr)):
        raise ParameterError("r", r, f"must be integer numbers of guesses in [0, m={m}]")
    if np.any(v_arr < 0) or np.any(v_arr > r_arr):
        raise ParameterError("v", v, "must be integer numbers of correct guesses in [0, r]")
    a = np.asarray(alpha, dtype=float)
    if a.size not in (1, r_arr.size) or not np.all((a > 0) & (a < 1)):
        raise ParameterError("alpha", alpha, "must be in (0, 1): a scalar or one per row")
    candidates = check_positive_int("candidates", candidates)
    shape = (r_arr.size, candidates)
    tau = np.broadcast_to(np.asarray(alpha, dtype=float).reshape(-1), r_arr.shape)
    rr = np.broadcast_to((tau * v_arr / m)[:, None], shape).copy()
    hh = np.broadcast_to((tau * (r_arr - v_arr) / m)[:, None], shape).copy()
    budget = (r_arr / m)[:, None]
    vmin, vmax = int(v_arr.min(initial=0)), int(v_arr.max(initial=0))
    for i in range(vmax - 1, -1, -1):
        if i >= vmin:  # some rows start later (fewer correct guesses): keep them still
            live = (v_arr > i)[:, None]
            h_new = np.where(live, np.maximum(hh, inverse_blowup(rr)), hh)
        else:
            h_new = np.maximum(hh, inverse_blowup(rr))
        w = i / np.maximum(r_arr - i, 1.0)
        rr = np.minimum(rr + w[:, None] * (h_new - hh), 1.0)
        # r_i and h_i never decrease as i falls: a candidate is decided once r + h exceeds the
        # budget r/m (rejected for good) or h stops moving (a fixed point of the recursion)
        done = i < vmin and i % 4 == 0 and bool(np.all((h_new == hh) | (rr + h_new > budget)))
        hh = h_new
        if done:
            break
    return rr + hh - budget


def _check_alpha_arg(alpha: float) -> float:
    return check_in_range("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)


def fdp_one_run_rejects(m: int, r: int, v: int, tradeoff: Any, *, alpha: float = 0.05) -> bool:
    """True when v correct guesses out of r (m canaries) reject the claim "the trainer is f-DP"
    at level ``alpha`` (Mahloujifar-Melis-Chaudhuri 2024; :func:`fdp_one_run_statistic`).

    ``tradeoff``: a SYMMETRIC tradeoff function f (f = f^-1, as every GDP and (eps, delta) curve;
    symmetrise an asymmetric claim first), vectorised over numpy arrays.  It is checked on a grid
    (values in [0, 1], non-increasing, f(x) <= 1 - x); else ParameterError.
    """
    m, r, v = _check_counts(m, r, v)
    alpha = _check_alpha_arg(alpha)
    if not callable(tradeoff):
        raise ParameterError("tradeoff", tradeoff, "must be a tradeoff function x -> f(x)")
    x = np.linspace(0.0, 1.0, 257)
    with np.errstate(all="ignore"):
        fx = np.asarray(tradeoff(x), dtype=float)
    if (
        fx.shape != x.shape
        or not np.all(np.isfinite(fx))
        or np.any(fx < -1e-12)
        or np.any(fx > 1 - x + 1e-9)
        or np.any(np.diff(fx) > 1e-12)
    ):
        raise ParameterError(
            "tradeoff", "<function>", "must map [0, 1] to [0, 1], non-increasing, f(x) <= 1 - x"
        )
    if v == 0:
        return False

    def inv(y: np.ndarray) -> np.ndarray:
        return np.clip(np.asarray(tradeoff(1.0 - np.clip(y, 0.0, 1.0)), dtype=float), 0.0, 1.0)

    return bool(fdp_one_run_statistic(m, r, v, inv, alpha)[0, 0] > 0)


#: largest GDP mu the f-DP search considers (mu = 40 is epsilon ~ 800 at delta 1e-5)
MU_SEARCH_MAX = 40.0
#: grid points of the coarse scan, then of each refinement of the bracket (2 refinements)
_SCAN, _REFINE, _ROUNDS = 65, 65, 2


#: a candidate family: (theta, rows) -> the inverse blow-up y -> f_theta(1 - y) of the (K, G)
#: parameters theta of the given rows
FamilyBlowup = Callable[[np.ndarray, np.ndarray], Callable[[np.ndarray], np.ndarray]]


def _largest_rejected(
    m: int,
    r: np.ndarray,
    v: np.ndarray,
    alpha: np.ndarray,
    inverse_blowup: FamilyBlowup,
    top: np.ndarray,
) -> np.ndarray:
    """Per row, the largest parameter in [0, top] found to be rejected (0 when none is).

    A scan of 0 and ``_SCAN - 1`` geometric points from ``top / 1000`` to ``top`` (rows with
    nothing rejected are then done: 0), and ``_ROUNDS`` refinements of the bracket above the
    largest rejected point (resolution about 12% / 64^2 of the value, or
    ``top / 1000 / 64^2``).  Every returned value was itself rejected by the recursion (never
    interpolated), and the candidate families are nested (a smaller parameter is a stronger
    claim), so every parameter below it is rejected too: the result is a lower bound at level
    alpha.  Where the statistic is not monotone in the parameter the search may miss a larger
    rejected value (it then under-reports, never over-reports).
    """
    found = np.zeros(r.size)

    def stat(sel: np.ndarray, theta: np.ndarray) -> np.ndarray:
        inv = inverse_blowup(theta, sel)
        return fdp_one_run_statistic(m, r[sel], v[sel], inv, alpha[sel], theta.shape[1])

    sel = np.arange(r.size)
    # 0 and a geometric scan from 1e-3 * top to top (relative steps of about 12%)
    grid = top[:, None] * np.concatenate([[0.0], np.geomspace(1e-3, 1.0, _SCAN - 1)])[None, :]
    for rnd in range(_ROUNDS + 1):
        rej = stat(sel, grid) > 0
        any_rej = rej.any(axis=1)
        n_grid = grid.shape[1]
        last = n_grid - 1 - np.argmax(rej[:, ::-1], axis=1)  # where any_rej
        k = np.arange(sel.size)
        hit = sel[any_rej]
        found[hit] = np.maximum(found[hit], grid[k[any_rej], last[any_rej]])
        if rnd == _ROUNDS:
            break
        lo = found[sel]
        hi = np.where(any_rej & (last + 1 < n_grid), grid[k, np.minimum(last + 1, n_grid - 1)], lo)
        keep = any_rej & (hi > lo)  # nothing rejected, or rejected up to top: the row is done
        sel, lo, hi = sel[keep], lo[keep], hi[keep]
        if sel.size == 0:
            break
        grid = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, _REFINE)[None, :]
    return found


def _gdp_family(mu: np.ndarray, _: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    return _gdp_bound(mu)


def _fdp_families(
    m: int, r: np.ndarray, v: np.ndarray, alpha: np.ndarray, delta: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per row (guess size): the largest rejected GDP mu and the largest rejected eps of the
    (eps, delta) curve, at the row's level: both families in ONE recursion (rows 0..K-1 GDP,
    K..2K-1 the (eps, delta) curves)."""
    K = r.size

    def both(theta: np.ndarray, rows: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        g = int(np.searchsorted(rows, K))  # rows are sorted: the GDP rows come first
        gdp, ed = _gdp_bound(theta[:g]), _eps_delta_bound(theta[g:], delta)

        def inv(y: np.ndarray) -> np.ndarray:
            return np.concatenate([gdp(y[:g]), ed(y[g:])])

        return inv

    top = np.repeat([MU_SEARCH_MAX, EPS_SEARCH_MAX], K)
    out = _largest_rejected(m, np.tile(r, 2), np.tile(v, 2), np.tile(alpha, 2), both, top)
    return out[:K], out[K:]


def fdp_one_run_mu_lb(m: int, r: int, v: int, *, alpha: float = 0.05) -> float:
    """The f-DP one-run lower bound on the GDP parameter: the largest mu whose curve G_mu the
    observation (v correct of r guesses, m canaries) rejects at level ``alpha`` (0 when none).

    Mahloujifar, Melis, Chaudhuri (2024) with f = G_mu (:func:`fdp_one_run_statistic`).  With
    probability >= 1 - alpha the trainer is not mu'-GDP for any mu' <= the returned value.  Valid
    whatever the shape of the true tradeoff curve (it lower-bounds the smallest mu with which the
    trainer is mu-GDP).  Resolution: about 3e-5 relative (or 1e-5 absolute), rounded down.
    """
    m, r, v = _check_counts(m, r, v)
    alpha = _check_alpha_arg(alpha)
    if v == 0:
        return 0.0
    one = np.ones(1)
    top = MU_SEARCH_MAX * one
    return float(_largest_rejected(m, r * one, v * one, alpha * one, _gdp_family, top)[0])


def fdp_one_run_epsilon_lb(
    m: int, r: int, v: int, *, delta: float, alpha: float = 0.05, curve: str = "gdp"
) -> float:
    """The f-DP one-run epsilon lower bound at ``delta`` (level ``alpha``; 0 when none).

    ``curve="gdp"`` (the paper's empirical epsilon): epsilon(delta) of the largest rejected GDP
    curve, :func:`fdp_one_run_mu_lb` converted by the GDP duality.  It says the trainer's curve is
    not the Gaussian curve of any epsilon below it; it lower-bounds an (eps, delta) claim only if
    the true curve is Gaussian-shaped (compare it with GDP claims).  ``curve="eps-delta"``: the
    largest eps whose (eps, delta) curve f_{eps,delta} is rejected: non-parametric, valid for any
    mechanism, comparable with Steinke-Nasr-Jagielski's :func:`one_run_epsilon_lb`.
    """
    m, r, v = _check_counts(m, r, v)
    alpha = _check_alpha_arg(alpha)
    if curve == "gdp":
        delta = check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
        return epsilon_of_gdp(fdp_one_run_mu_lb(m, r, v, alpha=alpha), delta)
    if curve != "eps-delta":
        raise ParameterError("curve", curve, "must be 'gdp' or 'eps-delta'")
    delta = check_in_range("delta", delta, 0.0, 1.0, high_open=True)
    if v == 0:
        return 0.0
    one = np.ones(1)

    def ed(eps: np.ndarray, _: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        return _eps_delta_bound(eps, delta)

    top = EPS_SEARCH_MAX * one
    return float(_largest_rejected(m, r * one, v * one, alpha * one, ed, top)[0])


def guess_from_scores(scores: Any, k_plus: int, k_minus: int) -> np.ndarray:
    """Guesses in {-1, 0, +1}: +1 for the ``k_plus`` highest scores, -1 for the ``k_minus`` lowest,
    0 (abstain) elsewhere.  Ties are broken by position (the guesser never sees S)."""
    s = np.asarray(scores, dtype=float).reshape(-1)
    m = s.size
    if not np.all(np.isfinite(s)):
        raise ParameterError("scores", "<array with NaN or inf>", "canary scores must be finite")
    for name, k in (("k_plus", k_plus), ("k_minus", k_minus)):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ParameterError(name, k, "must be an integer >= 0")
    if k_plus + k_minus > m:
        raise ParameterError("k_plus", k_plus, f"k_plus + k_minus must be at most m = {m}")
    order = np.argsort(s, kind="stable")
    t = np.zeros(m, dtype=np.int8)
    if k_minus:
        t[order[:k_minus]] = -1
    if k_plus:
        t[order[m - k_plus :]] = 1
    return t


def default_guess_sizes(m: int) -> tuple[int, ...]:
    """Guess sizes k (k_plus = k_minus = k) tried by default: about 1%, 2%, 5%, 10%, 20%, 50% of m
    on each side (distinct, >= 1)."""
    m = check_positive_int("m", m)
    ks = {max(1, round(f * m)) for f in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)}
    return tuple(sorted(k for k in ks if 2 * k <= m)) or (max(1, m // 2),)


@dataclass(frozen=True)
class OneRunGuess:
    """One guess size: r guesses, v correct, and the eps it rejects at its share of alpha."""

    k_plus: int
    k_minus: int
    r: int
    v: int
    alpha: float
    eps_lb: float

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def one_run_bound(
    scores: Any,
    S: Any,
    *,
    delta: float,
    alpha: float = 0.05,
    sizes: Sequence[int] | Sequence[tuple[int, int]] | None = None,
) -> tuple[OneRunGuess, tuple[OneRunGuess, ...]]:
    """The one-run lower bound from canary ``scores`` (higher = "+") and the secret signs ``S``.

    ``sizes``: guess sizes k (k on each side) or (k_plus, k_minus) pairs, fixed before looking at
    the scores (default :func:`default_guess_sizes`); each is evaluated at ``alpha / len(sizes)``
    (Bonferroni), so the best of them holds at confidence 1 - alpha.  Returns (best, all).
    """
    s, sign = _check_scores_signs(scores, S)
    m = s.size
    alpha = check_in_range("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    pairs = _size_pairs(m, sizes)
    a = alpha / len(pairs)
    out = []
    for kp, km in pairs:
        t = guess_from_scores(s, kp, km)
        r = int(np.count_nonzero(t))
        v = int(np.count_nonzero(t == sign))
        eps = one_run_epsilon_lb(m, r, v, delta=delta, alpha=a) if r else 0.0
        out.append(OneRunGuess(kp, km, r, v, a, eps))
    best = max(out, key=lambda g: g.eps_lb)
    return best, tuple(out)


@dataclass(frozen=True)
class OneRunFdpGuess:
    """One guess size under the f-DP analysis (Mahloujifar-Melis-Chaudhuri 2024): r guesses, v
    correct, and what they reject at the size's share of alpha.

    ``mu_lb``: the largest rejected GDP mu; ``eps_lb``: epsilon(delta) of that GDP curve (the
    paper's empirical epsilon, Gaussian-shaped curves); ``eps_lb_eps_delta``: the largest eps
    whose (eps, delta) curve is rejected (non-parametric).
    """

    k_plus: int
    k_minus: int
    r: int
    v: int
    alpha: float
    mu_lb: float
    eps_lb: float
    eps_lb_eps_delta: float

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _size_pairs(m: int, sizes: Any) -> list[tuple[int, int]]:
    pairs: list[tuple[int, int]] = []
    for k in sizes if sizes is not None else default_guess_sizes(m):
        kp, km = (k, k) if not isinstance(k, tuple) else k
        pairs.append((int(kp), int(km)))
    if not pairs:
        raise ParameterError("sizes", sizes, "must name at least one guess size")
    return pairs


def _check_scores_signs(scores: Any, S: Any) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=float).reshape(-1)
    sign = np.asarray(S).reshape(-1)
    if sign.shape != s.shape or not np.all(np.isin(sign, (-1, 1))):
        raise ParameterError("S", "<array>", "must be one sign in {-1, +1} per canary score")
    check_positive_int("m", s.size)
    return s, sign


def one_run_fdp_bound(
    scores: Any,
    S: Any,
    *,
    delta: float,
    alpha: float = 0.05,
    sizes: Sequence[int] | Sequence[tuple[int, int]] | None = None,
) -> tuple[OneRunFdpGuess, tuple[OneRunFdpGuess, ...]]:
    """The f-DP one-run lower bounds (Mahloujifar, Melis, Chaudhuri 2024) from the same guesses
    as :func:`one_run_bound` (same ``sizes``, each at ``alpha / len(sizes)``, Bonferroni), so the
    best size's bounds hold at confidence 1 - alpha.  Returns (best by mu_lb, all); all sizes are
    searched together (one vectorised recursion per refinement round).
    """
    s, sign = _check_scores_signs(scores, S)
    m = s.size
    alpha = _check_alpha_arg(alpha)
    delta = check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    pairs = _size_pairs(m, sizes)
    a = alpha / len(pairs)
    rv = []
    for kp, km in pairs:
        t = guess_from_scores(s, kp, km)
        rv.append((int(np.count_nonzero(t)), int(np.count_nonzero(t == sign))))
    r = np.array([x[0] for x in rv], dtype=float)
    v = np.array([x[1] for x in rv], dtype=np.int64)
    mu, eps_ed = _fdp_families(m, r, v, np.full(r.size, a), delta)
    out = tuple(
        OneRunFdpGuess(kp, km, ri, vi, a, float(mi), epsilon_of_gdp(float(mi), delta), float(ei))
        for (kp, km), (ri, vi), mi, ei in zip(pairs, rv, mu, eps_ed, strict=True)
    )
    return max(out, key=lambda g: (g.mu_lb, g.eps_lb_eps_delta)), out


# ---------------------------------------------------------------------- canaries
@dataclass(frozen=True)
class OneRunCanaries:
    """m canaries for one run: the base rows, and each canary's row with its + and - label.

    ``kind`` gradient / input; ``X_canary`` (m rows, same features as ``X_base``); ``y_plus`` /
    ``y_minus`` (labels or targets).  Gradient canaries: ``directions`` (m flat parameter
    directions).  Input canaries: ``y_true`` / ``y_wrong`` (the score's two labels).
    """

    kind: str
    family: str
    n_outputs: int
    X_base: np.ndarray
    y_base: np.ndarray
    X_canary: np.ndarray
    y_plus: np.ndarray
    y_minus: np.ndarray
    description: str
    directions: np.ndarray | None = None
    inserted: bool = True

    @property
    def m(self) -> int:
        return int(self.X_canary.shape[0])

    @property
    def n(self) -> int:
        return int(self.X_base.shape[0] + self.X_canary.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X_base.shape[1])

    def dataset(self, S: Any) -> tuple[np.ndarray, np.ndarray]:
        """(X, y) of the run with signs S: base rows, then canary i with its ``+`` label if S_i =
        +1, its ``-`` label otherwise (the NULL audit uses the ``-`` label whatever S)."""
        sign = np.asarray(S).reshape(-1)
        if sign.shape != (self.m,) or not np.all(np.isin(sign, (-1, 1))):
            raise ParameterError("S", "<array>", f"must be {self.m} signs in {{-1, +1}}")
        plus = (sign > 0) & self.inserted
        yc = np.where(plus, self.y_plus, self.y_minus).astype(self.y_base.dtype)
        return np.vstack([self.X_base, self.X_canary]), np.concatenate([self.y_base, yc])

    def null(self) -> OneRunCanaries:
        """The null audit: every canary keeps its ``-`` label whatever S (no signal)."""
        return replace(
            self, inserted=False, description=self.description + " -- NULL: never inserted"
        )

    def scores(self, model: Any, feature_norm: float | None = None) -> np.ndarray:
        """Canary scores of a trained model (higher = looks like the ``+`` version)."""
        # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
        import torch

        if self.kind == "gradient":
            assert self.directions is not None
            w = model.weight.detach().reshape(-1).numpy()
            return np.asarray(self.directions @ w, dtype=float)
        # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
        from lastiterate.train.trainer import clip_rows

        dtype = torch.float64
        params = list(getattr(model, "params", list)()) or list(model.module.parameters())
        if params:
            dtype = params[0].dtype
        x = torch.as_tensor(self.X_canary, dtype=dtype)
        if feature_norm is not None:
            x = clip_rows(x, feature_norm)  # the trainer's row clipping, as in training

        def losses(y: np.ndarray) -> np.ndarray:
            yt = torch.as_tensor(y)
            yt = yt.to(dtype) if self.family == "least-squares" else yt.long()
            with torch.no_grad():
                return model.per_example_losses(x, yt).detach().numpy().astype(float)

        return losses(self.y_minus) - losses(self.y_plus)


def _base(X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or X.shape[0] != y.shape[0] or X.shape[0] < 1:
        raise ParameterError(
            "X", getattr(X, "shape", None), "must be a non-empty 2-D array with one row per label"
        )
    if not np.all(np.isfinite(X)):
        raise ParameterError("X", "<array with NaN or inf>", "features must be finite")
    return X, y


def _check_m(m: int) -> int:
    m = check_positive_int("canaries", m, minimum=2)
    if m > MAX_CANARIES:
        raise ParameterError("canaries", m, f"must be at most {MAX_CANARIES}")
    return m


def one_run_gradient_canaries(
    X: Any,
    y: Any,
    m: int,
    *,
    family: str,
    n_outputs: int = 1,
    feature_norm: float | None = None,
) -> OneRunCanaries:
    """m gradient canaries: m new features (0 in every row of X), canary i = ``a e_{d+i}``.

    Labels and score directions as in :func:`lastiterate.audit.canary.gradient_canary` (least
    squares +-GRADIENT_TARGET, binary 1 / 0, multinomial class 0 / 1); ``a`` = ``feature_norm``,
    else the largest row norm of X.  GLM families only.
    """
    _check_family(family, n_outputs)
    assert family in FAMILIES
    m = _check_m(m)
    X, y = _base(X, y)
    n, d = X.shape
    if (n + m) * (d + m) > MAX_DENSE_ENTRIES:
        raise ParameterError(
            "canaries",
            m,
            f"gradient canaries add one feature each: the {n + m} x {d + m} design exceeds "
            f"{MAX_DENSE_ENTRIES:.0e} entries; use fewer canaries",
        )
    a = (
        check_positive("feature_norm", feature_norm)
        if feature_norm is not None
        else float(np.max(np.linalg.norm(X, axis=1))) or 1.0
    )
    Xb = np.hstack([X, np.zeros((n, m))])
    Xc = np.zeros((m, d + m))
    Xc[np.arange(m), d + np.arange(m)] = a
    if family == "least-squares":
        yb = y.astype(np.float64)
        yp, ym = np.full(m, GRADIENT_TARGET), np.full(m, -GRADIENT_TARGET)
    else:
        yb = y.astype(np.int64)
        yp, ym = (
            (np.ones(m, np.int64), np.zeros(m, np.int64))
            if family == "binary-logistic"
            else (np.zeros(m, np.int64), np.ones(m, np.int64))
        )
    dirs = np.zeros((m, n_outputs, d + m))
    if family == "multinomial-logistic":
        dirs[np.arange(m), 0, d + np.arange(m)] = 1 / math.sqrt(2)
        dirs[np.arange(m), 1, d + np.arange(m)] = -1 / math.sqrt(2)
    else:
        dirs[np.arange(m), 0, d + np.arange(m)] = 1.0
    return OneRunCanaries(
        kind="gradient",
        family=family,
        n_outputs=n_outputs,
        X_base=Xb,
        y_base=yb,
        X_canary=Xc,
        y_plus=yp,
        y_minus=ym,
        directions=dirs.reshape(m, -1),
        description=f"{m} gradient canaries: one extra feature each (0 in the other {n} rows), "
        f"canary row {a:g} e_(d+i), labels +/- as the multi-run gradient canary; "
        "score = final weights projected on canary i's direction",
    )


def one_run_input_canaries(
    X: Any,
    y: Any,
    X_points: Any,
    y_points: Any,
    *,
    family: str,
    n_outputs: int = 1,
) -> OneRunCanaries:
    """Input canaries: the held-out points ``X_points`` with a WRONG label (``+``) or their true
    label (``-``); class ``(y + 1) mod K`` (binary ``1 - y``), least squares ``y + 4 sd(y)``.
    Score: loss(true label) - loss(wrong label) under the final model.  Any model family whose
    model has ``per_example_losses`` (``family`` is ``mlp-classifier`` for an MLP on classes).
    """
    X, y = _base(X, y)
    Xp = np.asarray(X_points, dtype=np.float64)
    yt = np.asarray(y_points)
    if Xp.ndim != 2 or Xp.shape[1] != X.shape[1] or Xp.shape[0] != yt.shape[0]:
        raise ParameterError(
            "X_points", getattr(Xp, "shape", None), f"must be rows of {X.shape[1]} features"
        )
    if not np.all(np.isfinite(Xp)):
        raise ParameterError("X_points", "<array with NaN or inf>", "features must be finite")
    m = _check_m(Xp.shape[0])
    if family == "least-squares":
        yb = y.astype(np.float64)
        true = yt.astype(np.float64)
        wrong = true + INPUT_TARGET_SHIFT * max(1.0, float(np.std(yb)))
    else:
        yb = y.astype(np.int64)
        true = yt.astype(np.int64)
        k = 2 if family == "binary-logistic" else n_outputs
        if k < 2 or np.any(true < 0) or np.any(true >= k):
            raise ParameterError("y_points", "<labels>", f"must be class labels in [0, {k - 1}]")
        wrong = (true + 1) % k
    return OneRunCanaries(
        kind="input",
        family=family,
        n_outputs=n_outputs,
        X_base=X,
        y_base=yb,
        X_canary=Xp,
        y_plus=wrong,
        y_minus=true,
        description=f"{m} input canaries: held-out points, + = a wrong label, - = the true "
        "label; score = loss(true) - loss(wrong) under the final model",
    )


# ---------------------------------------------------------------------- one training run
def canary_signs(m: int, seed: int) -> np.ndarray:
    """S: m fair coins from the audit's seed (a stream the trainer never uses)."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x0E1]))
    return np.where(rng.random(m) < 0.5, -1, 1).astype(np.int8)


def one_run_scores(
    canaries: OneRunCanaries,
    method: Any,
    *,
    S: Any,
    epochs: float | None = None,
    steps: int | None = None,
    noise_scale: float = 1.0,
    score_steps: Sequence[int] | None = None,
    feature_norm: float | None = None,
) -> tuple[np.ndarray, Any, dict[int, np.ndarray]]:
    """Train ONCE with ``method`` (a fresh trainer of the project on its model) on the data with
    signs S, and score the final model.  Returns (scores, the executed Run, {t: scores of the
    model after t steps} for the epoch ends t in ``score_steps``).  ``noise_scale`` != 1 is a
    mutation test (the trainer draws noise ``noise_scale * sigma`` while its Run says sigma)."""
    X, y = canaries.dataset(S)
    if noise_scale != 1.0:
        _scaled_noise(method, check_positive("noise_scale", noise_scale))
    at: dict[int, np.ndarray] = {}
    wanted = {int(t) for t in score_steps or ()}

    def on_epoch(t: int, *_: Any) -> None:  # the trainer calls it with the steps done
        if t in wanted:
            at[t] = canaries.scores(method.model, feature_norm)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)  # an experiment, seeded on purpose
        res = method.fit(
            X,
            y,
            epochs=epochs,
            steps=steps,
            account=False,
            progress=False,
            on_epoch=on_epoch if wanted else None,
        )
    return canaries.scores(method.model, feature_norm), res.run, at


@dataclass(frozen=True)
class OneRunAuditResult:
    """Claim (the accountant's guarantee for the trained Run) vs the one-run lower bound."""

    canary: str
    description: str
    inserted: bool
    m: int
    seed: int
    alpha: float
    delta: float
    eps_lb: float
    best: OneRunGuess
    guesses: tuple[OneRunGuess, ...]
    claim_bound: str | None
    claim_theorem: str | None
    claim_eps: float | None
    verdict: str
    reason: str
    run: dict[str, Any]
    seconds: float
    noise_scale: float = 1.0
    details: dict[str, Any] = field(default_factory=dict)
    #: the f-DP refinement (Mahloujifar-Melis-Chaudhuri 2024) on the same guesses: the largest
    #: rejected GDP mu, epsilon(delta) of that Gaussian curve, the largest rejected eps of the
    #: (eps, delta) curve, the best size and every size
    fdp_mu_lb: float = 0.0
    fdp_eps_lb: float = 0.0
    fdp_eps_lb_eps_delta: float = 0.0
    fdp_best: OneRunFdpGuess | None = None
    fdp_guesses: tuple[OneRunFdpGuess, ...] = ()
    #: the GDP parameter of the best claim, when it is a GDP bound
    claim_mu: float | None = None

    def to_json(self) -> dict[str, Any]:
        skip = ("best", "guesses", "fdp_best", "fdp_guesses")
        out = {k: v for k, v in self.__dict__.items() if k not in skip}
        out["best"] = self.best.to_json()
        out["guesses"] = [g.to_json() for g in self.guesses]
        out["fdp_best"] = None if self.fdp_best is None else self.fdp_best.to_json()
        out["fdp_guesses"] = [g.to_json() for g in self.fdp_guesses]
        return out

    def format(self) -> str:
        f = fmt_number

        b = self.best
        r = self.run
        lines = [
            (
                f"One-run audit ({self.m} {self.canary} canaries"
                f"{'' if self.inserted else ', NULL: never inserted'}, ONE training run): "
                f"{self.verdict}"
            ),
            f"  {self.description}",
            f"  run: {r.get('algorithm')}, n={r.get('n')}, T={r.get('steps')} steps, "
            f"lr={f(r.get('lr'))}, sigma={f(r.get('noise_std'))}, C={f(r.get('clip'))}"
            + (f", noise x{self.noise_scale:g} (MUTATION TEST)" if self.noise_scale != 1.0 else ""),
        ]
        if self.claim_bound is None:
            lines.append("  claim: none (the accountant gives no bound for this run)")
        else:
            lines.append(
                f"  claim ({self.claim_bound}: {self.claim_theorem}): epsilon = "
                f"{f(self.claim_eps)} at delta = {self.delta:g}"
            )
        lines.append(
            f"  lower bound (confidence {1 - self.alpha:g}, Steinke-Nasr-Jagielski 2023 Thm 5.2, "
            f"Bonferroni over {len(self.guesses)} guess sizes):"
        )
        lines.append(
            f"    eps >= {f(self.eps_lb)} at delta {self.delta:g}: {b.v} of {b.r} guesses correct "
            f"(top {b.k_plus} guessed +, bottom {b.k_minus} guessed -)"
        )
        fdp = {(g.k_plus, g.k_minus): g for g in self.fdp_guesses}
        for g in self.guesses:
            h = fdp.get((g.k_plus, g.k_minus))
            lines.append(
                f"      k = {g.k_plus:>6}/{g.k_minus:<6} correct {g.v:>6}/{g.r:<6} "
                f"eps_lb {f(g.eps_lb)}"
                + ("" if h is None else f"  f-DP: mu_lb {f(h.mu_lb)}, eps_lb {f(h.eps_lb)}")
            )
        if self.fdp_best is not None:
            h = self.fdp_best
            claim_mu = "" if self.claim_mu is None else f" (claim: mu = {f(self.claim_mu)})"
            lines += [
                (
                    "  f-DP refinement (Mahloujifar-Melis-Chaudhuri 2024, same guesses, "
                    f"confidence {1 - self.alpha:g}):"
                ),
                (
                    f"    mu >= {f(self.fdp_mu_lb)}{claim_mu}: {h.v} of {h.r} guesses correct "
                    "reject every mu-GDP curve below it"
                    if self.fdp_mu_lb > 0
                    else f"    mu >= 0{claim_mu}: no GDP curve rejected"
                ),
                (
                    f"    eps >= {f(self.fdp_eps_lb)} at delta {self.delta:g} if the curve is "
                    "Gaussian-shaped; any curve: (eps, delta) curves rejected up to eps = "
                    f"{f(self.fdp_eps_lb_eps_delta)}"
                ),
                (
                    "  (the verdict checks the claims with both analyses, each at level alpha: "
                    "a sound trainer is flagged with probability at most 2 alpha)"
                ),
            ]
        lines.append(f"  verdict: {self.verdict} ({self.reason}); {self.seconds:.1f} s")
        return "\n".join(lines)


def audit_one_run(
    canaries: OneRunCanaries,
    spec: Any,
    *,
    seed: int = 0,
    alpha: float = 0.05,
    delta: float = 1e-5,
    sizes: Sequence[int] | None = None,
    bounds: Sequence[str] | None = None,
    noise_scale: float = 1.0,
    model: Any = None,
) -> OneRunAuditResult:
    """Train ONE model (``spec``: a :class:`lastiterate.audit.canary.TrainerSpec`) with the
    canaries inserted by fair coins, and compare the one-run lower bound (confidence 1 - alpha)
    with every bound the accountant reports for the executed Run.

    ``model``: the model to train (default a fresh GLM for the canaries' family; give an MLP's
    ``ModuleModel`` for input canaries on an MLP).  VIOLATION when eps_lb exceeds a claim.
    """
    alpha = check_in_range("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    delta = check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    noise_scale = check_positive("noise_scale", noise_scale)
    t0 = time.perf_counter()
    if model is None:
        if canaries.family not in ("binary-logistic", "multinomial-logistic", "least-squares"):
            raise NotApplicable(f"no default model for family {canaries.family!r}: pass model=")
        # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
        import torch

        from lastiterate.train.models import GLM

        model = GLM(
            canaries.n_features,
            canaries.n_outputs,
            canaries.family,
            intercept=spec.intercept,
            dtype=torch.float64,
        )
    elif canaries.kind == "gradient":
        raise NotApplicable("gradient canaries score a GLM's weights: use input canaries")
    S = canary_signs(canaries.m, seed)
    method = spec.method(model, model_seed(seed, 2, 0))
    scores, run, _ = one_run_scores(
        canaries,
        method,
        S=S,
        epochs=spec.epochs,
        steps=spec.steps,
        noise_scale=noise_scale,
        feature_norm=spec.feature_norm,
    )
    if not np.all(np.isfinite(scores)):
        raise ParameterError(
            "lr", spec.lr, "the trained model diverged (non-finite scores): lower the learning rate"
        )
    best, allg = one_run_bound(scores, S, delta=delta, alpha=alpha, sizes=sizes)
    fdp_best, fdp_all = one_run_fdp_bound(scores, S, delta=delta, alpha=alpha, sizes=sizes)
    fdp_mu = max(g.mu_lb for g in fdp_all)
    rep = account(run, delta=delta, bounds=bounds)
    checks = []
    for res in rep.results:
        if res.kind != "bound":
            continue
        # Steinke et al.'s eps_lb against the claimed epsilon; the f-DP mu_lb against the claimed
        # GDP curve G_mu (the accountant's claimed tradeoff curve, where it has one).  Flipping one
        # sign replaces one row: a GDP claim under another adjacency is not the curve tested here
        claim_mu = res.mu if res.adjacency == "replace" else None
        v, why = verdict_for(
            mu_lb=fdp_mu, eps_lb=best.eps_lb, claim_mu=claim_mu, claim_eps=res.epsilon
        )
        checks.append((res.bound, v, why))
    claim = rep.best
    bad = [c for c in checks if c[1] == "VIOLATION"]
    if bad:
        verdict, reason = "VIOLATION", "; ".join(f"{b}: {why}" for b, _, why in bad)
    elif claim is None:
        verdict, reason = "inconclusive", "no claim for this run"
    elif best.eps_lb <= 0 and fdp_mu <= 0:
        verdict, reason = "inconclusive", "no leakage certified (one run has little power)"
    else:
        verdict = "ok"
        reason = f"eps_lb/claim = {best.eps_lb / claim.epsilon:.3f}" if claim.epsilon > 0 else ""
        if claim.mu is not None and claim.mu > 0 and claim.adjacency == "replace":
            reason += f", f-DP mu_lb/claim = {fdp_mu / claim.mu:.3f}"
        reason = f"{reason.lstrip(', ')} (consistent, not a proof)"
    return OneRunAuditResult(
        canary=canaries.kind,
        description=canaries.description,
        inserted=canaries.inserted,
        m=canaries.m,
        seed=seed,
        alpha=alpha,
        delta=delta,
        eps_lb=best.eps_lb,
        best=best,
        guesses=allg,
        claim_bound=None if claim is None else claim.bound,
        claim_theorem=None if claim is None else claim.theorem,
        claim_eps=None if claim is None else claim.epsilon,
        verdict=verdict,
        reason=reason,
        run=run.setting(),
        seconds=time.perf_counter() - t0,
        noise_scale=noise_scale,
        details={
            "checks": [{"bound": b, "verdict": v, "reason": w} for b, v, w in checks],
            "score_mean_plus": float(np.mean(scores[S > 0])) if np.any(S > 0) else None,
            "score_mean_minus": float(np.mean(scores[S < 0])) if np.any(S < 0) else None,
        },
        fdp_mu_lb=fdp_mu,
        fdp_eps_lb=epsilon_of_gdp(fdp_mu, delta),
        fdp_eps_lb_eps_delta=max(g.eps_lb_eps_delta for g in fdp_all),
        fdp_best=fdp_best,
        fdp_guesses=fdp_all,
        claim_mu=None if claim is None or claim.adjacency != "replace" else claim.mu,
    )
