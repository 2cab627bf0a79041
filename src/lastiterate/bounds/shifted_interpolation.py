"""Shifted interpolation: last-iterate f-DP of noisy gradient methods (paper 000).

Bok, Su, Altschuler, "Shifted Interpolation for Differential Privacy", ICML 2024; formulas as
recovered in docs/theorems.md section 2 (tags [V]/[R+]/[R-] quoted per theorem below).  Adjacency is
replace-one, ``L`` the gradient sensitivity (= 2 x clip norm), noise std ``sigma`` on the averaged
gradient, constant step ``eta``; only the LAST iterate is released.

The common engine is the meta-theorem (Thm C.3, docs/theorems.md 2.1).  Each noiseless step
``phi_k`` is c-Lipschitz (``c = run.c``; projection onto a convex set keeps this true), the two
datasets' maps differ by at most ``s_k`` (``s_k = eta L / b`` at steps whose batch holds the
differing example), the noise in iterate space has std ``eta sigma``.  For a window of ``N`` steps
starting at ``tau`` with ``||X_tau - X'_tau|| <= z_tau`` (``z_tau = 0`` when ``tau`` precedes the
first use of the example: common start; ``z_tau = D`` on a domain of diameter D), shifts
``a_1..a_N >= 0`` with ``z_j = c z_{j-1} + s_j - a_j >= 0`` and ``z_N = 0`` give

    T(X_T, X'_T) >= G_{ sqrt(sum a_j^2) / (eta sigma) }.

The smallest ``sum a_j^2`` under the single linear constraint ``sum_j c^{N-j} a_j = R`` (with
``R = c^N z_tau + sum_j c^{N-j} s_j``) is ``R^2 / W``, ``W = sum_{j<N} c^{2j}``, attained by
back-loaded shifts ``a_j ~ c^{N-j}``.  Those shifts also satisfy every ``z_j >= 0`` whenever the
mass ``s_j`` arrives at the start of blocks of equal length (every step for NoisyGD, the first
step of each epoch-block for NoisyCGD): in the variable ``y = c^{-j}`` the rescaled distance
``c^{-j} z_j`` is, at block ends, a concave quadratic in ``y`` that is ``z_tau >= 0`` at ``y = 1``
and 0 at the window end, hence nonnegative in between, and it only decreases inside a block.
(For c = 1 the same statement is linear.)  This reproduces Thm 4.2 / C.5 (GD, z = 0), Thm 4.3 / C.7
(GD, c = 1, z = D), Thm 4.5 / Lemma C.10 (CGD, z = 0) and Thm 4.6 / Lemma C.11 (CGD, c = 1, z = D)
exactly, and gives their contraction-aware bounded combination (c < 1 and z = D) rigorously.

NoisySGD (uniform size-b batches, p = b/n) uses Lemma C.12: a Gaussian of std s perturbed, with
probability p, by two DIFFERENT vectors of norm <= R is at least ``C_p(G_{2R/s})``.  With
``R = eta L / b`` and a noise share ``theta sigma^2`` this is ``C_p(G_{2 L / (b sigma
sqrt(theta))})``; ``theta = 1/2`` gives the paper's ``2 sqrt(2) L / (b sigma)``.  The f-DP curves
are composed with the numerical PLD engine (``lastiterate.notions.pld``), never with the CLT; the
CLT versions (Props C.14 / C.15) are registered separately as ``kind="estimate"``.

Sensitivity: which examples ``L`` must cover (``lastiterate.run.SENSITIVITY_MEANING``).  The
NoisyGD and NoisyCGD theorems (4.2, 4.3, 4.5, 4.6, C.3) need only the DIFFERING pair: the two maps
differ at one index i, by ``eta ||g_i(x) - g'_i(x)|| / b <= eta L / b``.  The NoisySGD theorems
(Lemma C.12 and the C_p operator of Thms 4.8-4.10, and the CLT Props C.14 / C.15) compare batches
that may hold DIFFERENT examples, so ``L`` must bound ``||g(x; z) - g(x; z')||`` for ANY two
possible examples z, z' and every x (clip norm C: L = 2C).  Adjacency is replace-one only;
add/remove runs of gd/cgd/shuffled/uniform batches are refused by
:class:`~lastiterate.run.Run` itself.

Every result carries, in ``details``: the chosen window (``tau``, ``window_steps`` or
``window_epochs``), the noise split ``theta`` where relevant, ``mu_limit`` / ``epsilon_limit``
(the supremum over T of THIS bound with everything else fixed; every bound here is non-decreasing
in T, so the supremum is the T -> infinity limit, or the optimal-window value for bounded domains)
and the crossover with composition.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lastiterate.bounds.base import (
    Kind,
    Query,
    Result,
    forget_gdp_epsilons,
    gdp_epsilon_at,
    gdp_result,
    locating,
    register,
)
from lastiterate.errors import NotApplicable
from lastiterate.notions.arrays import sorted_unique
from lastiterate.notions.clt import clt_h as _clt_h
from lastiterate.notions.gdp import MU_MAX, _delta_scalar_upper, gdp_delta
from lastiterate.run import Run

BOUND_ID = "shifted-interpolation"
REFERENCE = "Bok, Su, Altschuler 2024, Shifted Interpolation for Differential Privacy (ICML)"

#: relative slack used when turning a real-valued crossing into an integer (absorbs rounding in
#: mu^2 / mu_step^2 when the exact ratio is an integer, e.g. Table 8's T* = 80)
_CROSSING_RTOL = 1e-9


# ============================================================================ small numerics
def one_minus_power(c: float, k: float) -> float:
    """``1 - c^k`` without cancellation for c close to 1 (c in [0, 1], k >= 0)."""
    if k == 0:
        return 0.0
    if c <= 0.0:
        return 1.0
    if c >= 1.0:
        return 0.0
    return -math.expm1(k * math.log(c))


def _one_minus_power_array(c: float, k: np.ndarray) -> np.ndarray:
    k = np.asarray(k, dtype=float)
    if c <= 0.0:
        return np.where(k > 0, 1.0, 0.0)
    if c >= 1.0:
        return np.zeros_like(k)
    return -np.expm1(k * math.log(c))


def _power_array(c: float, k: np.ndarray) -> np.ndarray:
    k = np.asarray(k, dtype=float)
    if c <= 0.0:
        return np.where(k > 0, 0.0, 1.0)
    return np.exp(k * math.log(c)) if c < 1.0 else np.ones_like(k)


def geometric_weight(c: float, N: np.ndarray | float) -> np.ndarray:
    """``W(N) = sum_{j=0}^{N-1} c^{2j}`` = ``(1 - c^{2N}) / (1 - c^2)`` (``N`` for c = 1)."""
    N = np.asarray(N, dtype=float)
    if c >= 1.0:
        return N
    return _one_minus_power_array(c, 2 * N) / ((1.0 - c) * (1.0 + c))


def geometric_mass(c: float, N: np.ndarray | float) -> np.ndarray:
    """``sum_{j=0}^{N-1} c^j`` = ``(1 - c^N) / (1 - c)`` (``N`` for c = 1)."""
    N = np.asarray(N, dtype=float)
    if c >= 1.0:
        return N
    return _one_minus_power_array(c, N) / (1.0 - c)


def crossing_count(mu_target: float, mu_step: float) -> int | None:
    """Smallest integer ``k >= 1`` with ``mu_step * sqrt(k) >= mu_target``: the number of composed
    Gaussian steps (Thm 4.1 / 4.4) at which composition first reaches ``mu_target`` (None when
    ``mu_target`` is infinite).  A relative slack of 1e-9 absorbs the rounding of ``(mu/mu_step)^2``
    when it is an integer (Table 8's T* = 80, 160, ...)."""
    if not math.isfinite(mu_target):
        return None
    x = (mu_target / mu_step) ** 2
    return max(1, math.ceil(x * (1 - _CROSSING_RTOL)))


# ============================================================================ closed forms
def thm42_mu(step_mu: float, c: float, T: float) -> float:
    """Thm 4.2 (NoisyGD, m-strongly convex, M-smooth, eta < 2/M) [V, TIGHT]:

        mu = (L/(n sigma)) sqrt( (1+c)/(1-c) * (1-c^T)/(1+c^T) ),    c = max(|1-eta m|, |1-eta M|).

    ``step_mu = L/(n sigma)``.  ``T = inf`` gives the limit ``step_mu sqrt((1+c)/(1-c))``; ``c = 1``
    gives composition ``step_mu sqrt(T)`` (Thm 4.1).  Reference: docs/theorems.md
    2.2; Thm C.5/Lemma C.6.
    """
    if c >= 1.0:
        return step_mu * math.sqrt(T)
    q = 1.0 if math.isinf(T) else one_minus_power(c, T)  # 1 - c^T
    return step_mu * math.sqrt((1.0 + c) / (1.0 - c) * q / (2.0 - q))


def shift_window_mu(
    step_mu: float, c: float, z_over_noise: float, N: np.ndarray | float, *, period: int = 1
) -> np.ndarray:
    """Thm C.3 with optimal shifts over a window of ``N`` steps (module docstring):

        mu(N) = sqrt(R^2 / W(N)),    R = c^N z + s_mass,    W(N) = sum_{j<N} c^{2j},

    in noise units (``step_mu = s / (eta sigma)``, ``z_over_noise = z_tau / (eta sigma)``).  The
    example is used at the first step of every block of ``period`` steps (``period = 1``: every
    step, NoisyGD; ``period = l``: NoisyCGD windows of whole epochs, ``N = l k``), so
    ``s_mass = s * c^{period-1} (1 - c^N) / (1 - c^period)`` (``s * N / period`` for c = 1).
    Shifts are feasible (all ``z_j >= 0``), see the module docstring.
    """
    N = np.asarray(N, dtype=float)
    if c >= 1.0:
        R = z_over_noise + step_mu * N / period
    else:
        R = _power_array(c, N) * z_over_noise + step_mu * c ** (
            period - 1
        ) * _one_minus_power_array(c, N) / one_minus_power(c, period)
    return np.sqrt(R * R / geometric_weight(c, N))


def thm43_window_mu(step_mu: float, D_over_noise: float, nu: np.ndarray | float) -> np.ndarray:
    """Thm 4.3 (NoisyGD, convex, M-smooth, eta <= 2/M, diameter D) for the window ``nu = T - tau``
    [V via Table 8]:  mu(nu) = (1/sigma) sqrt( (D + nu eta L/n)^2 / (eta^2 nu) )
    = (D/(eta sigma) + nu L/(n sigma)) / sqrt(nu).  (Thm C.7 / Lemma C.8.)"""
    nu = np.asarray(nu, dtype=float)
    return (D_over_noise + nu * step_mu) / np.sqrt(nu)


def thm43_mu_star(step_mu: float, D_over_noise: float) -> float:
    """Thm 4.3 closed form for ``T >= ceil(D n/(L eta))`` [V via Table 8]:

        mu* = (1/sigma) sqrt( 3 L D/(eta n) + (L/n)^2 ceil(D n/(L eta)) )

    = sqrt(3 r m + m^2 ceil(r/m)) with ``m = L/(n sigma)``, ``r = D/(eta sigma)``.  It is the window
    ``nu = ceil(r/m)`` bounded above (so never below the integer optimum)."""
    k = math.ceil(D_over_noise / step_mu * (1 - _CROSSING_RTOL))
    return math.sqrt(3 * D_over_noise * step_mu + step_mu**2 * max(k, 1))


def thm45_mu(step_mu: float, c: float, l: int, E: float) -> float:
    """Thm 4.5 (NoisyCGD, m-strongly convex, M-smooth, eta < 2/M) [V via Tables 1, 3, 4, 9]:

        mu = (L/(b sigma)) sqrt( 1 + c^{2l-2} (1-c^2)/(1-c^l)^2 * (1-c^{l(E-1)})/(1+c^{l(E-1)}) ).

    ``step_mu = L/(b sigma)``, ``l`` batches per epoch, ``E`` uses of the example (``inf``: limit).
    Valid for every position of the example in the partition.  For c = 1 this is the c -> 1 limit
    ``step_mu sqrt(1 + (E-1)/l)`` (Lemma C.10 at c = 1).
    """
    if E <= 1:
        return step_mu
    if c >= 1.0:
        return step_mu * math.sqrt(1 + (E - 1) / l)
    q = 1.0 if math.isinf(E) else one_minus_power(c, l * (E - 1))  # 1 - c^{l(E-1)}
    factor = c ** (2 * l - 2) * (1 - c) * (1 + c) / one_minus_power(c, l) ** 2 * q / (2.0 - q)
    return step_mu * math.sqrt(1 + factor)


def thm46_window_mu(
    step_mu: float, D_over_noise: float, l: int, k: np.ndarray | float, c: float = 1.0
) -> np.ndarray:
    """Thm 4.6 (NoisyCGD, convex, M-smooth, eta <= 2/M, diameter D), window of ``k`` whole epochs
    before the last use, ``1 <= k <= E-1`` [V via Tables 10-12 (mu*); wording R+]:

        mu(k)^2 sigma^2 = L^2/b^2 + (D + k eta L/b)^2 / (eta^2 l k).

    With ``c < 1`` the contraction-aware version of the same window (Thm C.3, z_tau = D) is
    returned instead: ``mu(k)^2 = step_mu^2 + R^2 / W(l k)``."""
    k = np.asarray(k, dtype=float)
    window = shift_window_mu(step_mu, c, D_over_noise, l * k, period=l)
    return np.sqrt(step_mu**2 + window**2)


def thm46_mu_star(step_mu: float, D_over_noise: float, l: int) -> float:
    """Thm 4.6 closed form [V: all 27 cells of Tables 10-12]:

        mu* = (1/sigma) sqrt( L^2/b^2 + 3 L D/(eta b l) + (L^2/(b^2 l)) ceil(D b/(eta L)) ),

    i.e. the window ``k = ceil(D b/(eta L))`` bounded above; valid once ``E >= k + 1``."""
    k = math.ceil(D_over_noise / step_mu * (1 - _CROSSING_RTOL))
    return math.sqrt(step_mu**2 + 3 * D_over_noise * step_mu / l + step_mu**2 / l * max(k, 1))


def integer_argmin(
    func: Callable[[np.ndarray], np.ndarray],
    lo: int,
    hi: int,
    *,
    dense: int = 200_000,
    grid: int = 4000,
) -> tuple[int, float]:
    """Minimise ``func`` (vectorised) over the integers ``lo..hi``.

    Exhaustive when the range has at most ``dense`` points; otherwise a geometric grid of about
    ``grid`` integers followed by an exhaustive pass over the neighbourhood of the best grid point.
    Every evaluated point is a valid bound, so the search only affects tightness, never validity.
    """
    if hi < lo:
        raise ValueError("empty range")
    if hi - lo + 1 <= dense:
        xs = np.arange(lo, hi + 1, dtype=float)
        vals = func(xs)
        i = int(np.nanargmin(vals))
        return int(xs[i]), float(vals[i])
    xs = sorted_unique(np.round(np.geomspace(lo, hi, grid)).astype(np.int64))
    vals = func(xs.astype(float))
    i = int(np.nanargmin(vals))
    left = int(xs[max(i - 1, 0)])
    right = int(xs[min(i + 1, len(xs) - 1)])
    if right - left + 1 > dense:
        mid = int(xs[i])
        left, right = max(lo, mid - dense // 2), min(hi, mid + dense // 2)
    fine = np.arange(left, right + 1, dtype=float)
    fv = func(fine)
    j = int(np.nanargmin(fv))
    if fv[j] <= vals[i]:
        return int(fine[j]), float(fv[j])
    return int(xs[i]), float(vals[i])


def _convex_integer_argmin(
    func: Callable[[np.ndarray], np.ndarray], x0: float, lo: int, hi: int
) -> tuple[int, float]:
    """Minimiser over integers in [lo, hi] of a function convex in x with
    continuous minimiser x0."""
    cands = {lo, hi}
    for x in (math.floor(x0), math.ceil(x0)):
        cands.add(int(min(max(x, lo), hi)))
    xs = np.array(sorted(cands), dtype=float)
    vals = func(xs)
    i = int(np.argmin(vals))
    return int(xs[i]), float(vals[i])


def _optimal_window(func: Callable[[np.ndarray], np.ndarray], x0: float) -> tuple[int, float]:
    """Best window over ALL lengths >= 1 of a window bound convex in its length with continuous
    minimiser ``x0`` (the T -> infinity value on a bounded domain: independent of T once the
    run is longer than the optimal window)."""
    return _convex_integer_argmin(func, x0, 1, max(math.ceil(x0) + 1, 2))


def _bounded_windows(
    win_c: Callable[[np.ndarray], np.ndarray],
    win_1: Callable[[np.ndarray], np.ndarray],
    x0: float,
    longest: int,
    n_sat: int,
) -> tuple[list[tuple[int, float]], float, float]:
    """Windows of Thm C.3 with ``z_tau = D`` (strongly convex AND bounded domain).

    ``win_c`` is the contraction-aware window bound (searched exhaustively up to ``n_sat``, where
    ``c^N`` saturates), ``win_1`` the c = 1 window bound (convex, continuous minimiser ``x0``).
    Returns the best ``(length, mu)`` of each among lengths 1..``longest`` (none when ``longest <
    1``) and the best value of each over all lengths (their T -> infinity limits)."""
    found: list[tuple[int, float]] = []
    if longest >= 1:
        found.append(integer_argmin(win_c, 1, min(longest, n_sat)))
        found.append(_convex_integer_argmin(win_1, x0, 1, longest))
    _, lim_c = integer_argmin(win_c, 1, n_sat)
    _, lim_1 = _optimal_window(win_1, x0)
    return found, lim_c, lim_1


# ============================================================================ shared checks
def _common_checks(run: Run) -> float:
    """Assumptions shared by every theorem of paper 000; returns the constant step ``eta``."""
    if run.adjacency != "replace":
        raise NotApplicable(
            f"paper 000 analyses replace-one adjacency; the run declares adjacency={run.adjacency}"
        )
    eta = run.eta  # raises NotApplicable("needs a constant learning rate...") for a schedule
    return eta


def _require_contraction(run: Run) -> float:
    c = run.c
    if c is None:
        raise NotApplicable(
            f"no strong convexity or (convexity + diameter) declared: {run.contraction_note}"
        )
    return float(c)


def _require_strong_convexity(run: Run) -> float:
    c = _require_contraction(run)
    if not c < 1.0:
        raise NotApplicable(
            "needs strong convexity (contraction c < 1); the run only gives c = "
            f"{c:g} ({run.contraction_note})"
        )
    return c


def _require_diameter(run: Run) -> float:
    if run.D is None:
        raise NotApplicable("needs a bounded domain: no diameter D of the projection set declared")
    return float(run.D)


def _geometry_notes(run: Run, c: float) -> list[str]:
    notes = [f"each noiseless step is c-Lipschitz with c = {c:.10g} ({run.contraction_note})"]
    if run.D is not None:
        notes.append(f"iterates projected onto a convex set of diameter D = {run.D:g}")
    notes.append(
        "replace-one adjacency; constant learning rate; same initialisation for both datasets"
    )
    return notes


def _limit_details(mu_limit: float, query: Query) -> dict[str, Any]:
    """``mu_limit`` and the matching ``epsilon_limit`` (query by delta) or ``delta_limit``."""
    out: dict[str, Any] = {"mu_limit": float(mu_limit)}
    if (
        not mu_limit <= MU_MAX
    ):  # infinite, or beyond what the Gaussian profile evaluates: no finite limit reported
        out["epsilon_limit"] = math.inf
        return out
    out[_limit_key(query)] = _gaussian_value(mu_limit, query)
    return out


def _shift_result(
    run: Run,
    query: Query,
    *,
    theorem: str,
    reference: str,
    mu: float,
    mu_limit: float,
    c: float,
    details: dict[str, Any],
    kind: Kind = "bound",
    assumptions: Sequence[str] = (),
) -> Result:
    """The mu-GDP result of one theorem of paper 000: ``details`` completed by the limit values
    (:func:`_limit_details`), the geometry notes followed by the extra ``assumptions``."""
    details.update(_limit_details(mu_limit, query))
    return gdp_result(
        BOUND_ID,
        theorem=theorem,
        reference=reference,
        mu=mu,
        query=query,
        run=run,
        kind=kind,
        details=details,
        assumptions=_geometry_notes(run, c) + list(assumptions),
    )


# ============================================================================ NoisyGD
def _gd_setup(run: Run) -> tuple[float, float, float]:
    """(eta, c, step_mu = L/(n sigma))."""
    eta = _common_checks(run)
    c = _require_contraction(run)
    return eta, c, run.L / (run.n * run.sigma)


def noisy_gd_strongly_convex(run: Run, query: Query) -> Result:
    """Thm 4.2 [V, TIGHT]: NoisyGD on m-strongly convex, M-smooth losses with eta < 2/M is mu-GDP,
    mu = (L/(n sigma)) sqrt((1+c)/(1-c) (1-c^T)/(1+c^T)), c = ``run.c``.

    Assumptions (NotApplicable otherwise): c < 1 (strong convexity, or declared contraction),
    constant step, replace-one.  Exact (equality) for quadratics when c = 1 - eta m; a projection
    onto a convex set keeps the bound valid (post-processing).  Reference: docs/theorems.md 2.2,
    paper 000 Thm 4.2 / Thm C.5.
    """
    _eta, c, step_mu = _gd_setup(run)
    c = _require_strong_convexity(run)
    T = run.T
    mu = thm42_mu(step_mu, c, T)
    mu_limit = thm42_mu(step_mu, c, math.inf)
    details: dict[str, Any] = {
        "tau": 0,
        "window_steps": T,
        "contraction": c,
        "per_step_mu": step_mu,
        "composition_mu": step_mu * math.sqrt(T),
        "crossover_steps": crossing_count(mu_limit, step_mu),
    }
    return _shift_result(
        run,
        query,
        theorem="Thm 4.2 (NoisyGD, strongly convex)",
        reference=REFERENCE + ", Thm 4.2",
        mu=mu,
        mu_limit=mu_limit,
        c=c,
        details=details,
    )


def noisy_gd_bounded_convex(run: Run, query: Query) -> Result:
    """Thm 4.3 [V via Table 8; wording R+]: NoisyGD on convex, M-smooth losses (eta <= 2/M) over a
    convex set of diameter D.  For every window ``nu = T - tau`` in 1..T,

        mu(nu) = (D/(eta sigma) + nu L/(n sigma)) / sqrt(nu),

    optimised over the INTEGERS nu (convex in nu: the optimum is floor/ceil of D n/(eta L)), and
    compared with the closed form mu* (valid for T >= ceil(D n/(L eta)); never smaller than the
    integer optimum) and with tau = 0 from the common start (z_0 = 0), which is composition
    (Thm 4.1).  The smallest is reported.  ``details``: chosen ``tau``, ``mu_star`` (closed form),
    ``crossover_steps`` = T* = the first T at which Thm 4.1 reaches the T-independent optimum
    (Table 8), ``epsilon_limit`` = the optimal-window value.  Reference:
    docs/theorems.md 2.2, Thm C.7.
    """
    eta, c, step_mu = _gd_setup(run)
    D = _require_diameter(run)
    T = run.T
    r = D / (eta * run.sigma)
    win = functools.partial(thm43_window_mu, step_mu, r)
    nu0 = r / step_mu
    nu, mu_win = _convex_integer_argmin(win, nu0, 1, T)
    mu_comp = step_mu * math.sqrt(T)
    nu_lim, mu_limit = _optimal_window(win, nu0)
    mu_star = thm43_mu_star(step_mu, r)
    if mu_comp <= mu_win:
        mu, tau, chosen = mu_comp, 0, "composition (tau = 0, common start)"
    else:
        mu, tau, chosen = mu_win, T - nu, "window"
    details: dict[str, Any] = {
        "tau": tau,
        "window_steps": T - tau,
        "chosen": chosen,
        "contraction_used": 1.0,
        "per_step_mu": step_mu,
        "composition_mu": mu_comp,
        "mu_star": mu_star,
        "T_bar": math.ceil(nu0 * (1 - _CROSSING_RTOL)),
        "optimal_window_steps": nu_lim,
        "crossover_steps": crossing_count(mu_limit, step_mu),
    }
    return _shift_result(
        run,
        query,
        theorem="Thm 4.3 (NoisyGD, convex, bounded domain)",
        reference=REFERENCE + ", Thm 4.3",
        mu=mu,
        mu_limit=mu_limit,
        c=c,
        details=details,
    )


def noisy_gd_strongly_convex_bounded(run: Run, query: Query) -> Result:
    """Thm C.3 with contraction c < 1 AND diameter D (rigorous combination of Thms 4.2 and 4.3).

    Candidates: tau = 0 with z_0 = 0 (= Thm 4.2), and every window ``nu = T - tau`` in 1..T-1 with
    ``z_tau = D`` and optimal back-loaded shifts (module docstring; feasibility proved there):

        mu(nu) = (c^nu D/(eta sigma) + (L/(n sigma)) (1-c^nu)/(1-c)) / sqrt((1-c^{2 nu})/(1-c^2)).

    Also the c = 1 windows of Thm 4.3 (c-Lipschitz implies 1-Lipschitz).  The smallest is reported.
    ``epsilon_limit`` is the T -> infinity value (min of Thm 4.2's limit and the best window).
    """
    eta, c, step_mu = _gd_setup(run)
    c = _require_strong_convexity(run)
    D = _require_diameter(run)
    T = run.T
    r = D / (eta * run.sigma)
    cands: list[tuple[float, int, str]] = [(thm42_mu(step_mu, c, T), 0, "Thm 4.2 (tau = 0)")]
    win_c = functools.partial(shift_window_mu, step_mu, c, r)
    win_1 = functools.partial(thm43_window_mu, step_mu, r)
    windows, lim_c, lim_1 = _bounded_windows(win_c, win_1, r / step_mu, T - 1, _saturation_steps(c))
    labels = ("contraction-aware window (z_tau = D)", "Thm 4.3 window (c = 1, z_tau = D)")
    cands.extend((val, T - nu, label) for (nu, val), label in zip(windows, labels))
    mu, tau, chosen = min(cands, key=lambda x: x[0])
    mu_limit = min(thm42_mu(step_mu, c, math.inf), lim_c, lim_1)
    details: dict[str, Any] = {
        "tau": tau,
        "window_steps": T - tau,
        "chosen": chosen,
        "contraction": c,
        "per_step_mu": step_mu,
        "composition_mu": step_mu * math.sqrt(T),
        "crossover_steps": crossing_count(mu_limit, step_mu),
    }
    return _shift_result(
        run,
        query,
        theorem="Thm C.3 (NoisyGD, strongly convex + bounded domain)",
        reference=REFERENCE + ", Thm C.3 (with Thms 4.2, 4.3)",
        mu=mu,
        mu_limit=mu_limit,
        c=c,
        details=details,
    )


def _saturation_steps(c: float) -> int:
    """Number of steps after which ``c^N`` is below double precision (windows longer than this
    all give the same value); capped so searches stay bounded."""
    if c <= 0.0:
        return 1
    if c >= 1.0:
        return 10**9
    return int(min(10**9, math.ceil(40.0 / -math.log(c)) + 1))


# ============================================================================ NoisyCGD
def _cgd_setup(run: Run) -> tuple[float, float, float, int, int]:
    """(eta, c, step_mu = L/(b_min sigma), l, E = worst-case number of uses)."""
    eta = _common_checks(run)
    c = _require_contraction(run)
    return eta, c, run.L / (run.b_min * run.sigma), int(run.l), int(run.uses)


def noisy_cgd_strongly_convex(run: Run, query: Query) -> Result:
    """Thm 4.5 [V via Tables 1, 3, 4, 9]: NoisyCGD (fixed partition into l batches, cycled) on
    m-strongly convex, M-smooth losses with eta < 2/M is mu-GDP,

        mu = (L/(b sigma)) sqrt(1 + c^{2l-2}(1-c^2)/(1-c^l)^2 (1-c^{l(E-1)})/(1+c^{l(E-1)})),

    for every position of the differing example.  ``E = run.uses`` (the worst-case number of uses,
    ceil(T/l)), ``b = run.b_min`` (the smallest batch sets the shift eta L/b), ``l = run.l``.  The
    bound is non-decreasing in E, so it covers examples used fewer times.  ``epsilon_limit`` is the
    E -> infinity value; ``crossover_epoch`` the first E at which Thm 4.4 reaches it.
    Reference: docs/theorems.md 2.3, Lemma C.10.
    """
    _eta, c, step_mu, l, E = _cgd_setup(run)
    c = _require_strong_convexity(run)
    mu = thm45_mu(step_mu, c, l, E)
    mu_limit = thm45_mu(step_mu, c, l, math.inf)
    details: dict[str, Any] = {
        "tau": "common start (before the first use)",
        "window_epochs": E - 1,
        "epochs_used": E,
        "batches_per_epoch": l,
        "contraction": c,
        "per_step_mu": step_mu,
        "composition_mu": step_mu * math.sqrt(E),
        "crossover_epoch": crossing_count(mu_limit, step_mu),
    }
    return _shift_result(
        run,
        query,
        theorem="Thm 4.5 (NoisyCGD, strongly convex)",
        reference=REFERENCE + ", Thm 4.5",
        mu=mu,
        mu_limit=mu_limit,
        c=c,
        details=details,
    )


def noisy_cgd_bounded_convex(run: Run, query: Query) -> Result:
    """Thm 4.6 [V via Tables 10-12 (mu*); wording R+]: NoisyCGD on convex, M-smooth losses
    (eta <= 2/M) over a convex set of diameter D.  For a window of k whole epochs before the last
    use, 1 <= k <= E-1:

        mu(k)^2 sigma^2 = L^2/b^2 + (D + k eta L/b)^2 / (eta^2 l k),

    optimised over the INTEGERS k (convex in k).  Fallback for small E: the window of all E-1
    earlier epochs from the common start (tau before the first use, so z_tau = 0 instead of D):
    ``mu^2 = (L/(b sigma))^2 (1 + (E-1)/l)``, which is Thm C.3 with Lemma C.10's shifts at c = 1
    (the c -> 1 limit of Thm 4.5; feasibility proved in the module docstring).  It never exceeds
    composition (Thm 4.4, ``(L/(b sigma)) sqrt(E)``; equal at E = 1) and it makes the reported
    bound non-decreasing in E with supremum ``mu_limit`` (with composition alone as the fallback,
    epochs between Thm 4.4's crossing and k_opt + 1 would exceed mu*).  ``E = run.uses``,
    ``b = run.b_min``.
    ``details``: ``window_epochs`` k, ``mu_star`` (printed closed form), ``epsilon_limit`` (optimal
    window over all k >= 1, independent of E once E >= k+1) and ``crossover_epoch`` = the smallest
    E with Thm 4.4's mu >= mu_limit, i.e. ceil(mu_limit^2 sigma^2 b^2 / L^2).  The paper's printed
    E* (Tables 10-12) come from a mistyped expression and are NOT reproduced (docs/theorems.md 2.3).
    """
    eta, c, step_mu, l, E = _cgd_setup(run)
    D = _require_diameter(run)
    r = D / (eta * run.sigma)
    win = functools.partial(thm46_window_mu, step_mu, r, l)
    k0 = r / step_mu
    mu_comp = step_mu * math.sqrt(E)
    mu, k, chosen = thm45_mu(step_mu, 1.0, l, E), 0, "common start (Lemma C.10 at c = 1)"
    if E >= 2:
        kk, val = _convex_integer_argmin(win, k0, 1, E - 1)
        if val < mu:
            mu, k, chosen = val, kk, "window"
    k_lim, mu_limit = _optimal_window(win, k0)
    details: dict[str, Any] = {
        "window_epochs": k,
        "tau_epoch": (E - 1 - k) if k else 0,
        "chosen": chosen,
        "epochs_used": E,
        "batches_per_epoch": l,
        "contraction_used": 1.0,
        "per_step_mu": step_mu,
        "composition_mu": mu_comp,
        "mu_star": thm46_mu_star(step_mu, r, l),
        "optimal_window_epochs": k_lim,
        "crossover_epoch": crossing_count(mu_limit, step_mu),
    }
    return _shift_result(
        run,
        query,
        theorem="Thm 4.6 (NoisyCGD, convex, bounded domain)",
        reference=REFERENCE + ", Thm 4.6",
        mu=mu,
        mu_limit=mu_limit,
        c=c,
        details=details,
    )


def noisy_cgd_strongly_convex_bounded(run: Run, query: Query) -> Result:
    """Thm C.3 with contraction c < 1 AND diameter D for NoisyCGD (rigorous combination of Thms
    4.5 and 4.6): candidates are Thm 4.5 (common start), the contraction-aware windows of k whole
    epochs with ``z_tau = D`` (mu(k)^2 = (L/(b sigma))^2 + R^2/W(l k), module docstring), the c = 1
    windows of Thm 4.6 and composition (Thm 4.4).  The smallest is reported; ``epsilon_limit`` is
    the E -> infinity value.
    """
    eta, c, step_mu, l, E = _cgd_setup(run)
    c = _require_strong_convexity(run)
    D = _require_diameter(run)
    r = D / (eta * run.sigma)
    win_c = functools.partial(thm46_window_mu, step_mu, r, l, c=c)
    win_1 = functools.partial(thm46_window_mu, step_mu, r, l)
    k0 = r / step_mu
    cands: list[tuple[float, int, str]] = [
        (thm45_mu(step_mu, c, l, E), 0, "Thm 4.5 (common start)"),
        (step_mu * math.sqrt(E), 0, "composition (Thm 4.4)"),
    ]
    windows, lim_c, lim_1 = _bounded_windows(
        win_c, win_1, k0, E - 1, max(1, _saturation_steps(c) // l + 1)
    )
    labels = ("contraction-aware window (z_tau = D)", "Thm 4.6 window (c = 1)")
    cands.extend((val, kk, label) for (kk, val), label in zip(windows, labels))
    mu, k, chosen = min(cands, key=lambda x: x[0])
    mu_limit = min(thm45_mu(step_mu, c, l, math.inf), lim_c, lim_1)
    details: dict[str, Any] = {
        "window_epochs": k,
        "chosen": chosen,
        "epochs_used": E,
        "batches_per_epoch": l,
        "contraction": c,
        "per_step_mu": step_mu,
        "composition_mu": step_mu * math.sqrt(E),
        "crossover_epoch": crossing_count(mu_limit, step_mu),
    }
    return _shift_result(
        run,
        query,
        theorem="Thm C.3 (NoisyCGD, strongly convex + bounded domain)",
        reference=REFERENCE + ", Thm C.3 (with Thms 4.5, 4.6)",
        mu=mu,
        mu_limit=mu_limit,
        c=c,
        details=details,
    )


# ============================================================================ NoisySGD
#: grid width of the privacy loss used while SEARCHING the window / noise split (every value it
#: gives is itself a valid pessimistic bound; only the final value is recomputed at the default
#: grid width of the PLD engine)
SEARCH_DISCRETIZATION = 3e-3
#: grid budget of one search evaluation: a candidate whose composition needs a longer grid is
#: evaluated on a coarser one (still a valid pessimistic bound), so no search step costs more than
#: a few FFTs of this length (windows of 1e6 steps with a large per-step mu made the T -> infinity
#: search of a 3-step run take a minute)
SEARCH_GRID_POINTS = 2**18
#: range of the noise split theta (share of the noise variance given to the subsampled part;
#: theta = 1/2 is the paper's statement)
_THETA_RANGE = (0.05, 0.95)
#: beyond this mu the PLD engine refuses; such windows are scored as eps = inf (never chosen)
_MAX_PLD_MU = 60.0
#: longest window searched (longer windows only matter when the bound is useless anyway; a
#: missed optimum only makes ``epsilon_limit`` larger, never smaller than the truth)
NU_SEARCH_MAX = 1_000_000


@functools.lru_cache(maxsize=1024)
def clt_h(mu: float) -> float:
    """``h(mu) = e^{mu^2} Phi(3mu/2) + 3 Phi(-mu/2) - 2`` (docs/theorems.md 1.7), from
    :func:`lastiterate.notions.clt.clt_h` (``inf`` once it overflows).  Remembered: the window
    searches' CLT guesses ask for the same per-step mu at every T of a sweep or a calibration
    (a deterministic function of mu, so the same value as computed afresh)."""
    return float(_clt_h(mu))


def _sgd_checks(run: Run) -> tuple[float, float]:
    """Assumptions of Thms 4.9 / 4.10; returns (eta, c)."""
    eta = _common_checks(run)
    if run.sampling_scheme != "uniform":
        raise NotApplicable(
            f"sampling={run.sampling_scheme}: Thms 4.9/4.10 assume uniform fixed-size batches "
            "(a uniformly random size-b subset each step; C_p operator, replace-one)"
        )
    if run.b >= run.n:
        raise NotApplicable("batch_size = n: the batch is deterministic; account the run as gd")
    c = _require_contraction(run)
    return eta, c


@functools.lru_cache(maxsize=6)
def _composer(p: float, mu: float) -> Any:
    """The cached :class:`lastiterate.notions.pld.SubsampledGaussianComposer` of C_p(G_mu) (a small
    cache: composed PMFs on the fine grid can hold millions of points)."""
    # lazy: the PLD engine adds ~20 ms to every start-up and only the sgd bounds need it
    from lastiterate.notions import pld

    return pld.SubsampledGaussianComposer(p, mu, cache_size=8)


def subsampled_gaussian_composition_value(
    p: float,
    mu_sub: float,
    k: int,
    mu_gauss: float,
    query: Query,
    *,
    discretization: float | None = None,
    max_points: int | None = None,
) -> float:
    """epsilon at ``query.delta`` (or delta at ``query.epsilon``) of

        C_p(G_{mu_sub})^{⊗k} ⊗ G_{mu_gauss},

    composed by the pessimistic (connect-the-dots) PLD engine
    (``lastiterate.notions.pld.SubsampledGaussianComposer``), so the value is an upper bound for
    the exact tradeoff function at any grid width.  ``k = 0`` leaves only the Gaussian.  Returns
    ``inf`` when a parameter is beyond the engine's range (mu > 60).  ``max_points`` caps the grid
    (searches: a coarser grid is still an upper bound; ``inf`` when even width 1 does not fit)."""
    if mu_sub > _MAX_PLD_MU or mu_gauss > _MAX_PLD_MU:
        return math.inf
    # lazy: the PLD engine adds ~20 ms to every start-up and only the sgd bounds need it
    from lastiterate.notions.pld import max_grid_points

    key = (
        float(p),
        float(mu_sub),
        int(k),
        float(mu_gauss),
        query.delta,
        query.epsilon,
        discretization,
        max_points,
        max_grid_points(),
        locating(),
    )
    hit = _WINDOW_VALUES.get(key)
    if hit is None:
        hit = _composition_value(p, mu_sub, k, mu_gauss, query, discretization, max_points)
        if len(_WINDOW_VALUES) >= 4096:
            _WINDOW_VALUES.pop(next(iter(_WINDOW_VALUES)), None)
        _WINDOW_VALUES[key] = hit
    return hit


#: values of :func:`subsampled_gaussian_composition_value`, by everything they depend on (the
#: composition, the query, the grid and its budget): a window search, the T -> infinity search
#: and the evaluation at the run's T often ask for the same window more than 8 compositions apart
#: (the composer's own cache), e.g. the limit's window again when c^tau underflows to 0
_WINDOW_VALUES: dict[tuple[Any, ...], float] = {}


def _composition_value(
    p: float,
    mu_sub: float,
    k: int,
    mu_gauss: float,
    query: Query,
    discretization: float | None,
    max_points: int | None,
) -> float:
    """:func:`subsampled_gaussian_composition_value`, computed (no memo)."""
    from lastiterate.notions.pld import delta_of_interest, grid_budget

    composer = _composer(float(p), float(mu_sub))
    with delta_of_interest(query.delta):
        if max_points is None:
            obj = composer.pld(int(k), float(mu_gauss), discretization=discretization)
        else:
            try:
                with grid_budget(max_points):
                    obj = composer.pld(int(k), float(mu_gauss), discretization=discretization)
            except NotApplicable:  # no grid within the budget: not worth its cost
                return math.inf
    if query.delta is not None:
        return float(obj.epsilon(query.delta))
    return float(obj.delta(float(query.epsilon)))  # type: ignore[arg-type]


def _search_budget(disc: float | None) -> int | None:
    """The grid budget of an evaluation at ``disc``: capped for the search grid only."""
    return SEARCH_GRID_POINTS if disc == SEARCH_DISCRETIZATION else None


def _golden_integer_min(
    f: Callable[[int], float], lo: int, hi: int, *, guess: int | None = None, rel: float = 0.1
) -> tuple[int, float]:
    """Minimise ``f`` over the integers in [lo, hi] by golden-section search on log(x) (to a
    relative bracket ``rel``), then the integer neighbours when the minimiser is small.  ``f`` is
    memoised; a non-unimodal ``f`` only costs tightness (every value is a valid bound)."""
    memo: dict[int, float] = {}

    def F(x: float) -> float:
        k = int(min(max(round(x), lo), hi))
        if k not in memo:
            memo[k] = f(k)
        return memo[k]

    if guess is not None:
        F(guess)
    if hi - lo <= 6:
        for k in range(lo, hi + 1):
            F(k)
    else:
        a, b = math.log(lo), math.log(hi)
        g = (math.sqrt(5) - 1) / 2
        x1, x2 = b - g * (b - a), a + g * (b - a)
        f1, f2 = F(math.exp(x1)), F(math.exp(x2))
        while b - a > rel:
            if f1 <= f2:
                b, x2, f2 = x2, x1, f1
                x1 = b - g * (b - a)
                f1 = F(math.exp(x1))
            else:
                a, x1, f1 = x1, x2, f2
                x2 = a + g * (b - a)
                f2 = F(math.exp(x2))
        F(lo)
        F(hi)
        best = min(memo, key=memo.__getitem__)
        if best <= 64:
            for k in range(best - 3, best + 4):
                if lo <= k <= hi:
                    F(k)
    best = min(memo, key=memo.__getitem__)
    return best, memo[best]


def _pruned_by_gaussian_factor(
    value: Callable[[int, float], float],
    gaussian_mu: Callable[[int, float], float],
    query: Query,
) -> Callable[[int, float], float]:
    """``value`` that skips the PLD for candidates that cannot win.

    Composing more mechanisms never lowers epsilon (or delta at a fixed epsilon), so the window's
    Gaussian factor G_b alone is a LOWER bound on the window's value.  When it already exceeds the
    best value evaluated so far, the candidate loses to that one and its (costly: a wide Gaussian
    widens the FFT grid) composition is skipped; the lower bound is returned in its place, which
    is larger than the incumbent, so the search's minimum is always an evaluated upper bound.
    """
    best = [math.inf]

    def pruned(nu: int, theta: float) -> float:
        mu = gaussian_mu(nu, theta)
        if not _gaussian_factor_within(mu, best[0], query):
            low = _gaussian_value(mu, query)
            if low > best[0]:
                return low
        v = value(nu, theta)
        best[0] = min(best[0], v)
        return v

    return pruned


#: :func:`_gaussian_factor_within` decides from the profile only for Gaussian factors G_mu with mu
#: in this range, where ``gdp_delta`` is accurate to about 1e-12 relative (1e-16 max(1, |a|) / mu
#: below 1e-3, ``lastiterate.notions.gdp``: at most 1e-10 here for the epsilons that matter);
#: other factors take the full inversion
_WITHIN_MU_RANGE = (1e-4, 40.0)
#: relative margins of :func:`_gaussian_factor_within`: on epsilon (far above the 1e-14 + 4 ulp
#: bracket of ``gdp_epsilon``'s root finder) and on delta (1e5 times the profile's accuracy)
_WITHIN_EPSILON_MARGIN = 1e-9
_WITHIN_DELTA_MARGIN = 1e-6


def _gaussian_factor_within(mu: float, best: float, query: Query) -> bool:
    """Whether the pruning test of :func:`_pruned_by_gaussian_factor`, ``_gaussian_value(mu,
    query) > best``, is certainly False, decided without inverting the Gaussian profile (a root
    search of a dozen or more profile evaluations: a fifth of a calibration's time at T = 1e7).

    True when ``best`` is +inf (no value exceeds it); for a query at delta and mu in (0, 40],
    when the profile's certified upper value at 0 is at most delta (``gdp_epsilon`` then returns
    0 after that same test); and for mu in ``_WITHIN_MU_RANGE``, when the profile's certified
    upper value (``_delta_scalar_upper``, what ``gdp_epsilon`` compares with delta) at
    ``y = best (1 - 1e-9) - 1e-12`` is at most ``delta (1 - 1e-6)``.  Then ``gdp_epsilon(delta,
    mu) <= best``: its root finder returns an end of a bracket of width ``<= 1e-14 + 4 ulp``
    whose other end (or itself) x has a profile upper value ``>= delta``, so the exact profile at
    x is above ``delta (1 - 1e-6)`` (the computed profile is within 1e-12 relative of the exact
    one in this range of mu), above the exact profile at y, so ``x < y`` (the profile decreases)
    and the returned end is below ``y + 1e-14 + 4 ulp <= best``.  False means "not decided": the
    caller inverts the profile as before.  So the search takes the same steps and returns the
    same values as with the full inversion at every candidate; and were the accuracy assumption
    ever wrong, a candidate would only be evaluated instead of pruned (every evaluated value is a
    valid bound)."""
    if best == math.inf:
        return True
    if query.delta is None or not 0.0 <= best < math.inf or not 0.0 < mu <= _WITHIN_MU_RANGE[1]:
        return False
    if _delta_scalar_upper(0.0, mu) <= query.delta:
        return True  # gdp_epsilon's first test, the same computation: it returns 0 <= best
    if not _WITHIN_MU_RANGE[0] <= mu:
        return False
    y = best * (1.0 - _WITHIN_EPSILON_MARGIN) - 1e-12
    if not y > 0.0:
        return False
    return _delta_scalar_upper(y, mu) <= query.delta * (1.0 - _WITHIN_DELTA_MARGIN)


def _gaussian_factor_above(mu: float, x: float, query: Query) -> bool:
    """Whether ``_gaussian_value(mu, query) > x`` certainly holds (a query at delta, mu in
    ``_WITHIN_MU_RANGE``, ``x >= 0``), decided from one profile value: when the profile's
    certified upper value at x, less the margin ``_WITHIN_DELTA_MARGIN``, exceeds delta.  The
    exact profile at x is then above delta (the computed profile is within 1e-12 relative of it
    here), so the exact epsilon at delta exceeds x, and ``gdp_epsilon`` returns a point whose
    certified upper value is at most delta, hence whose exact profile is at most delta: a point
    above the exact epsilon, so above x.  False means "not decided"."""
    if query.delta is None or not 0.0 <= x < math.inf:
        return False
    if not _WITHIN_MU_RANGE[0] <= mu <= _WITHIN_MU_RANGE[1]:
        return False
    return _delta_scalar_upper(x, mu) * (1.0 - _WITHIN_DELTA_MARGIN) > query.delta


def _gaussian_exceeds(mu: float, x: float, query: Query) -> bool:
    """``_gaussian_value(mu, query) > x``, the same answer, from one or two profile values where
    :func:`_gaussian_factor_within` or :func:`_gaussian_factor_above` decides it, else from the
    inverted value."""
    if _gaussian_factor_within(mu, x, query):
        return False
    if _gaussian_factor_above(mu, x, query):
        return True
    return _gaussian_value(mu, query) > x


def _gaussian_value(mu: float, query: Query) -> float:
    """epsilon at ``query.delta`` (or delta at ``query.epsilon``) of G_mu (exact)."""
    return _gaussian_value_at(float(mu), query.delta, query.epsilon)


@functools.lru_cache(maxsize=1024)
def _gaussian_value_at(mu: float, delta: float | None, epsilon: float | None) -> float:
    """:func:`_gaussian_value` (cached: a sweep asks for the same T-independent CLT limit at every
    number of epochs of one noise level)."""
    if not mu <= MU_MAX:
        return math.inf if delta is not None else 1.0
    if delta is not None:
        return gdp_epsilon_at(float(delta), mu)
    return float(gdp_delta(float(epsilon), mu))  # type: ignore[arg-type]


def _search_window_theta(
    value: Callable[[int, float], float],
    hi: int,
    clt_nu: Callable[[float], float],
    theta_clt: float,
    *,
    guess_only: bool = False,
) -> tuple[float, int, float]:
    """Coarse search of the window length nu in 1..hi and the noise split theta.

    Golden-section search over nu at the CLT-optimal theta, in a bracket of a factor 8 around the
    CLT-optimal window (clipped to [1, hi]); then theta = 1/2 and theta +- 0.1, +- 0.05 are tried
    at the best window.  ``value(nu, theta)`` must be a valid bound for every input (or, for
    candidates pruned by :func:`_pruned_by_gaussian_factor`, exceed an evaluated one), so these
    heuristics only affect tightness.  Returns (value, nu, theta).  ``guess_only``: the
    CLT-optimal window and theta alone (one evaluation, the search's first; a valid bound that is
    never below the full search's minimum, which includes it).
    """
    lo_t, hi_t = _THETA_RANGE
    theta = round(min(max(theta_clt, lo_t), hi_t), 4)
    guess = int(max(1, min(hi, round(clt_nu(theta)))))
    if guess_only or locating():  # e.g. a calibration's locating pass: a valid bound
        return value(guess, theta), guess, theta
    lo_b, hi_b = max(1, guess // 8), min(hi, max(guess * 8, 16))
    nu, val = _golden_integer_min(lambda k: value(k, theta), lo_b, hi_b, guess=guess, rel=0.15)
    if theta != 0.5:
        v = value(nu, 0.5)
        if v < val:
            val, theta = v, 0.5
    for step in (0.1, 0.05):
        for sign in (-1.0, 1.0):
            th = round(theta + sign * step, 4)
            if lo_t <= th <= hi_t:
                v = value(nu, th)
                if v < val:
                    val, theta = v, th
    return val, nu, theta


#: the reported value of a window is composed on a grid whose window is expected to hold at most
#: about this many points (:func:`_final_discretization`): measured (issue 11), the final
#: composition of Thm 4.9's window at T = 1e7 (about 3e5 points at 1e-4, an FFT of 373248) took
#: 0.10 s of the 0.23 s account; on 4e-4 (8e4 points) 0.03 s, its epsilon 3.7e-4 relative higher
_FINAL_GRID_POINTS = 2**17
#: the grid of a window's reported value unless :func:`_final_discretization` coarsens it (the PLD
#: engine's default, ``lastiterate.notions.pld.DEFAULT_DISCRETIZATION``)
DEFAULT_FINAL_DISCRETIZATION = 1e-4


def _final_discretization(
    coarse_value: float, query: Query, window_mu: float = 0.0
) -> float | None:
    """Grid width for the reported value of a window.

    The PLD default (1e-4, returned as None) unless the coarse value shows the epsilon is large
    (> 20), where 1e-3 keeps the cost bounded, or the window's composition is expected to need
    more than ``_FINAL_GRID_POINTS`` points on it: then the finest power-of-two multiple of 1e-4
    (at most 8e-4) whose window is expected to fit.  The expected number of points is the
    composition bound's (``_expected_points``): 16 mu / width, with ``window_mu`` the privacy
    CLT's estimate of the window's GDP parameter (only steers the grid).

    Any grid gives a valid bound.  A multiple of 1e-4 also moves the value outward: its grid
    points are grid points of 1e-4 (exactly, in floating point: the widths differ by powers of
    two), so its connect-the-dots profile (chords of the convex privacy profile between fewer
    points) lies above the 1e-4 one, and composition keeps that order; the computed values
    differ from these exact ones by the engine's error bounds and truncations (1e-10 relative and
    below), far inside the gap (measured +7e-5 at 2e-4 and +3.7e-4 at 4e-4 relative on Thm 4.9's
    window at T = 1e7; tests/bounds/test_final_window_grid.py checks the order on the extremes
    table's runs).
    """
    if query.delta is not None and coarse_value > 20:
        return 1e-3
    default = DEFAULT_FINAL_DISCRETIZATION
    width = default
    while 16.0 * window_mu / width > _FINAL_GRID_POINTS and width < 8e-4:
        width *= 2.0
    return None if width == default else width


def _best_theta_by_clt(
    objective: Callable[[float], float], key: tuple[Any, ...] | None = None
) -> float:
    """theta in the allowed range minimising a CLT surrogate (search heuristic only).

    ``key`` names everything ``objective`` depends on (theorem and per-step parameters, not T):
    the minimiser is then remembered, so the points of a sweep that share a per-step pair share
    it (the same value as computed afresh: a deterministic minimisation of the same function).
    """
    if key is not None and key in _THETA_CLT_CACHE:
        return _THETA_CLT_CACHE[key]
    theta = _minimise_clt_surrogate(objective)
    if key is not None:
        if len(_THETA_CLT_CACHE) >= 256:
            _THETA_CLT_CACHE.pop(next(iter(_THETA_CLT_CACHE)))
        _THETA_CLT_CACHE[key] = theta
    return theta


_THETA_CLT_CACHE: dict[tuple[Any, ...], float] = {}


def _minimise_clt_surrogate(objective: Callable[[float], float]) -> float:
    """Bounded scalar minimisation of ``objective`` over the allowed theta range."""

    def finite(theta: float) -> float:  # inf/NaN would make Brent's parabola steps NaN
        v = objective(theta)
        return min(1e300, v)

    x, fun = _bounded_minimum(finite, *_THETA_RANGE, xatol=1e-3)
    return float(x) if fun < 1e300 else 0.5


def _bounded_minimum(
    func: Callable[[float], float], x1: float, x2: float, *, xatol: float, maxiter: int = 500
) -> tuple[float, float]:
    """``(x, f(x))`` of ``scipy.optimize.minimize_scalar(func, bounds=(x1, x2),
    method="bounded", options={"xatol": xatol})``: Brent's bounded minimisation (golden-section
    and parabolic steps; Forsythe, Malcolm and Moler 1977, ``fminbound``), the same operations in
    the same order as SciPy's ``_minimize_scalar_bounded`` (scipy 1.17, BSD licence), so the same
    numbers (tested against it).  Here because importing ``scipy.optimize`` is a third of a
    second or more of a command's start-up (issue 11), and this search (the CLT-optimal noise
    split theta, a heuristic starting point of the window searches) was the only reason an
    account of a sampled run imported SciPy at all.

    Adapted from SciPy (``scipy/optimize/_optimize.py``), Copyright (c) 2001-2002 Enthought,
    Inc. and 2003-2024 SciPy Developers, under the BSD 3-Clause licence, whose conditions and
    disclaimer are in the repository's ``LICENSES/scipy-BSD-3-Clause.txt``."""
    sqrt_eps = np.sqrt(2.2e-16)
    golden_mean = 0.5 * (3.0 - np.sqrt(5.0))
    a, b = x1, x2
    fulc = a + golden_mean * (b - a)
    nfc, xf = fulc, fulc
    rat = e = 0.0
    x = xf
    fx = func(x)
    num = 1
    ffulc = fnfc = fx
    xm = 0.5 * (a + b)
    tol1 = sqrt_eps * np.abs(xf) + xatol / 3.0
    tol2 = 2.0 * tol1
    while np.abs(xf - xm) > (tol2 - 0.5 * (b - a)):
        golden = 1
        if np.abs(e) > tol1:  # a parabolic fit
            golden = 0
            r = (xf - nfc) * (fx - ffulc)
            q = (xf - fulc) * (fx - fnfc)
            p = (xf - fulc) * q - (xf - nfc) * r
            q = 2.0 * (q - r)
            if q > 0.0:
                p = -p
            q = np.abs(q)
            r = e
            e = rat
            if (np.abs(p) < np.abs(0.5 * q * r)) and (p > q * (a - xf)) and (p < q * (b - xf)):
                rat = (p + 0.0) / q  # the parabola is acceptable
                x = xf + rat
                if ((x - a) < tol2) or ((b - x) < tol2):
                    si = np.sign(xm - xf) + ((xm - xf) == 0)
                    rat = tol1 * si
            else:
                golden = 1
        if golden:  # a golden-section step
            e = (a - xf) if xf >= xm else (b - xf)
            rat = golden_mean * e
        si = np.sign(rat) + (rat == 0)
        x = xf + si * np.maximum(np.abs(rat), tol1)
        fu = func(x)
        num += 1
        if fu <= fx:
            if x >= xf:
                a = xf
            else:
                b = xf
            fulc, ffulc = nfc, fnfc
            nfc, fnfc = xf, fx
            xf, fx = x, fu
        else:
            if x < xf:
                a = x
            else:
                b = x
            if (fu <= fnfc) or (nfc == xf):
                fulc, ffulc = nfc, fnfc
                nfc, fnfc = x, fu
            elif (fu <= ffulc) or (fulc == xf) or (fulc == nfc):
                fulc, ffulc = x, fu
        xm = 0.5 * (a + b)
        tol1 = sqrt_eps * np.abs(xf) + xatol / 3.0
        tol2 = 2.0 * tol1
        if num >= maxiter:
            break
    return xf, fx


def _thm48_composition(run: Run, query: Query) -> tuple[float, float]:
    """Thm 4.8's C_p(G_{L/(b sigma)})^{⊗T} at the query, from the composition bounds' PLD (one
    cached object, on the grid their accuracy rule chose): (value, grid width)."""
    # lazy: importing composition here would register its bounds before this module's, which
    # changes which of two equally tight results a report keeps
    from lastiterate.bounds.composition import _sgd_pld_for_query

    found = _sgd_pld_for_query(run, query)
    return found.at_query[0], float(found.pld.discretization)


def _sgd_composition_value(run: Run, query: Query, disc: float | None = None) -> float:
    """Thm 4.8 (composition, tau = 0): C_p(G_{L/(b sigma)})^{⊗T}."""
    return subsampled_gaussian_composition_value(
        run.p,
        run.L / (run.b * run.sigma),
        run.T,
        0.0,
        query,
        discretization=disc,
        max_points=_search_budget(disc),
    )


def _sgd_result(
    run: Run,
    query: Query,
    *,
    theorem: str,
    reference: str,
    value: float,
    details: dict[str, Any],
    assumptions: Sequence[str],
) -> Result:
    if query.delta is not None:
        eps, delta = value, query.delta
    else:
        eps, delta = float(query.epsilon), min(1.0, value)  # type: ignore[arg-type]
    # lazy: the PLD engine adds ~20 ms to every start-up and only the sgd bounds need it
    from lastiterate.notions import pld

    details = dict(details)
    details.setdefault("discretization", pld.DEFAULT_DISCRETIZATION)
    return Result(
        bound=BOUND_ID,
        theorem=theorem,
        reference=reference,
        kind="bound",
        epsilon=eps,
        delta=delta,
        mu=None,
        rdp=None,
        details=details,
        assumptions=tuple(assumptions),
        adjacency=run.adjacency,
    )


def _sgd_window_result(
    run: Run,
    query: Query,
    *,
    theorem: str,
    reference: str,
    c: float,
    window_value: Callable[[int, float, float | None], float],
    search: Callable[[int], tuple[float, int, float]],
    limit_search: Callable[[], tuple[float, int, float]],
    limit_guess: Callable[[], tuple[float, int, float]],
    clt_limit_mu: float,
    window_at_T: Callable[[int, float], float],
    gaussian_mu: Callable[[int, float], float],
    geometry_details: dict[str, Any],
    reading_details: dict[str, Any],
) -> Result:
    """Thm 4.8's composition (tau = 0) against the windows of Thm 4.9 / 4.10, then the chosen one
    recomputed at the default grid width (every coarse value is itself a valid pessimistic bound).

    ``window_value(nu, theta, disc)`` is the window bound at this run's T, ``search(hi)`` the
    coarse search over windows 1..hi (:func:`_search_window_theta`), ``limit_search()`` = (value,
    nu, theta) the coarse best window over all lengths (the supremum over T) and
    ``window_at_T(nu, theta)`` a window's coarse value at this run's T.  The limit search is
    skipped (``epsilon_limit`` = inf, a trivially valid supremum) when the CLT surrogate
    ``clt_limit_mu`` of the limit already gives more than ``_LIMIT_SKIP_FACTOR`` times
    composition's epsilon at this T: no window can then win here, and such a limit bounds nothing
    a user would train for.  Between ``_LIMIT_GUESS_FACTOR`` and ``_LIMIT_SKIP_FACTOR`` times
    (composition's epsilon at least 1) the limit is ``limit_guess()``, the value of the CLT's
    window alone (one composition instead of a search of ten or more: of windows up to 1e6 steps
    at T = 1e7), a valid supremum never below the searched one (the search starts from that
    window); a window that could win at this T is then not expected, and the limit is far above
    this run's epsilon.  ``gaussian_mu(nu, theta)`` is the Gaussian factor of the chosen
    window; ``geometry_details`` / ``reading_details`` are placed in ``details`` before
    ``per_step_mu`` / before the limit value."""
    T, p = run.T, run.p
    step_mu = run.L / (run.b * run.sigma)
    comp_coarse = _sgd_composition_value(run, query, SEARCH_DISCRETIZATION)
    coarse: list[tuple[float, int, float | None, str]] = [
        (comp_coarse, T, None, "composition (Thm 4.8, tau = 0)")
    ]
    # the CLT surrogate of the limit, G_{clt_limit_mu} at the query, is only compared with these
    # two thresholds (a query by epsilon has none: NaN, so neither test holds)
    finite = query.delta is not None and math.isfinite(comp_coarse)
    skip = finite and _gaussian_exceeds(
        clt_limit_mu, _LIMIT_SKIP_FACTOR * max(comp_coarse, 1.0), query
    )
    guess_only = (
        not skip
        and finite
        and comp_coarse >= 1.0
        and _gaussian_exceeds(clt_limit_mu, _LIMIT_GUESS_FACTOR * comp_coarse, query)
    )
    if skip:
        limit_value, nu_lim, th_lim = math.inf, 0, 0.5
    else:
        limit_value, nu_lim, th_lim = limit_guess() if guess_only else limit_search()
    if T >= 2 and not skip:
        if nu_lim <= T - 1:
            coarse.append((window_at_T(nu_lim, th_lim), nu_lim, th_lim, "window"))
        elif limit_value < 1.2 * comp_coarse:
            # the best window overall does not improve with T: if even it loses clearly to
            # composition, no window shorter than T can win (skipping only affects tightness)
            coarse.append(search(T - 1) + ("window",))
    best_coarse, nu, theta, chosen = min(coarse, key=lambda x: x[0])
    disc = _final_discretization(
        best_coarse, query, 0.0 if theta is None else _window_clt_mu(run, nu, theta, gaussian_mu)
    )
    if locating():  # a calibration's locating pass: the coarse value (itself a valid bound)
        value, comp_disc = best_coarse, SEARCH_DISCRETIZATION
    elif theta is None:  # Thm 4.8 is composition: the same (cached) PLD as the composition bounds
        value, comp_disc = _thm48_composition(run, query)
    else:
        value, comp_disc = window_value(nu, theta, disc), SEARCH_DISCRETIZATION
    comp = value if theta is None else comp_coarse
    details: dict[str, Any] = {
        "tau": T - nu,
        "window_steps": nu,
        "theta": theta,
        "chosen": chosen,
        "subsampled_mu": None if theta is None else lemma_c12_mu(step_mu, theta),
        "gaussian_mu": None if theta is None else gaussian_mu(nu, theta),
        **geometry_details,
        "per_step_mu": step_mu,
        "sampling_rate": p,
        "composition_" + ("epsilon" if query.delta is not None else "delta"): comp,
        "composition_discretization": comp_disc,
        "optimal_window_steps": None if skip else nu_lim,
        "optimal_theta": None if skip else th_lim,
        "limit_search": "skipped: the CLT surrogate of the limit exceeds "
        f"{_LIMIT_SKIP_FACTOR:g} x composition at this T"
        if skip
        else (
            "CLT window only: the CLT surrogate of the limit exceeds "
            f"{_LIMIT_GUESS_FACTOR:g} x composition at this T"
            if guess_only
            else "done"
        ),
        **reading_details,
        _limit_key(query): max(limit_value, value),
    }
    if theta is not None and not locating():  # the grid of the reported window value
        details["discretization"] = DEFAULT_FINAL_DISCRETIZATION if disc is None else disc
    return _sgd_result(
        run,
        query,
        theorem=theorem,
        reference=reference,
        value=value,
        details=details,
        assumptions=_geometry_notes(run, c)
        + ["uniformly random size-b batches (p = b/n), drawn independently each step"],
    )


def _window_clt_mu(
    run: Run, nu: int, theta: float, gaussian_mu: Callable[[int, float], float]
) -> float:
    """The privacy CLT's estimate of the GDP parameter of the window C_p(G_a)^{⊗nu} ⊗ G_b (a
    from Lemma C.12 at ``theta``, b = ``gaussian_mu(nu, theta)``): only sizes its grid."""
    from lastiterate.notions.clt import clt_mu_symmetric

    step_mu = run.L / (run.b * run.sigma)
    sub = clt_mu_symmetric(run.p, lemma_c12_mu(step_mu, theta), nu)
    return math.hypot(sub, gaussian_mu(nu, theta))


#: skip the T -> infinity window search when its CLT surrogate exceeds this many times
#: composition's epsilon at the run's T (see :func:`_sgd_window_result`)
_LIMIT_SKIP_FACTOR = 4.0
#: evaluate the T -> infinity limit at the CLT's window only (no search) when its CLT surrogate
#: exceeds this many times composition's epsilon (>= 1) at the run's T (see
#: :func:`_sgd_window_result`)
_LIMIT_GUESS_FACTOR = 2.0


def _memoized(func: Callable[[Run, Query], Result]) -> Callable[[Run, Query], Result]:
    """Remember the last few results (and refusals) of an expensive bound: the combined NoisySGD
    theorem re-uses the results of Thms 4.9 and 4.10 computed for the same run and query.

    A calibration's locating pass (:func:`lastiterate.bounds.base.locating_estimates`) is
    remembered apart: there Thm 4.8's composition is the coarse locating estimate, which must
    never come back from a full accounting of the same run and query."""
    cache: dict[str, Result | NotApplicable] = {}

    @functools.wraps(func)
    def wrapper(run: Run, query: Query) -> Result:
        key = repr(run) + "|" + repr(query) + ("|locating" if locating() else "")
        if key not in cache:
            if len(cache) >= 16:
                cache.pop(next(iter(cache)))
            try:
                cache[key] = func(run, query)
            except NotApplicable as exc:
                cache[key] = exc
        hit = cache[key]
        if isinstance(hit, NotApplicable):
            raise NotApplicable(str(hit))
        return hit

    return wrapper


def _limit_search_once(
    key: tuple[Any, ...], query: Query, search: Callable[[], tuple[float, int, float]]
) -> tuple[float, int, float]:
    """``search()`` -- the coarse window search of the T -> infinity limit of Thm 4.9 / 4.10,
    which does not depend on T -- remembered under ``key`` (theorem, per-step parameters, search
    range and starting theta), the query and the PLD engine's context (grid budget, tilt floor):
    the runs of a sweep or a calibration that differ only in T share one search, with the value
    a fresh search gives (the search is deterministic in these inputs)."""
    # lazy: the PLD engine adds ~20 ms to every start-up and only the sgd bounds need it
    from lastiterate.notions.pld import max_grid_points, tilt_delta_floor

    full = (*key, query.delta, query.epsilon, max_grid_points(), tilt_delta_floor(), locating())
    hit = _LIMIT_SEARCHES.get(full)
    if hit is None:
        hit = search()
        if len(_LIMIT_SEARCHES) >= 256:
            _LIMIT_SEARCHES.pop(next(iter(_LIMIT_SEARCHES)))
        _LIMIT_SEARCHES[full] = hit
    return hit


_LIMIT_SEARCHES: dict[tuple[Any, ...], tuple[float, int, float]] = {}


def forget_memos() -> None:
    """Forget every value this module remembers (window values, limit searches, CLT windows and
    thetas, Gaussian values, composers): the next account recomputes them.  Remembered values are
    the ones computed afresh, so this changes speed only (tests compare the two paths)."""
    _WINDOW_VALUES.clear()
    _LIMIT_SEARCHES.clear()
    _THETA_CLT_CACHE.clear()
    clt_h.cache_clear()
    _gaussian_value_at.cache_clear()
    forget_gdp_epsilons()
    _composer.cache_clear()


def _limit_key(query: Query) -> str:
    return "epsilon_limit" if query.delta is not None else "delta_limit"


def lemma_c12_mu(step_mu: float, theta: float) -> float:
    """Lemma C.12 [R+]: a Gaussian of std s perturbed, with probability p, by two different vectors
    of norm <= R is at least C_p(G_{2R/s}).  Here R = eta L/b and s = eta sigma sqrt(theta) (the
    share theta of the noise variance), so the subsampled factor is C_p(G_mu) with

        mu = 2 L / (b sigma sqrt(theta)),        theta = 1/2:  2 sqrt(2) L/(b sigma).

    The factor 2 is kept (the footnote's conjectured improvement is NOT used)."""
    return 2.0 * step_mu / math.sqrt(theta)


@_memoized
def noisy_sgd_bounded_convex(run: Run, query: Query) -> Result:
    """Thm 4.10 [R+]: NoisySGD with uniformly random size-b batches (p = b/n) on convex, M-smooth
    losses (eta <= 2/M) over a convex set of diameter D is f-DP for every tau in 1..T-1 with

        f = C_p(G_{2L/(b sigma sqrt(theta))})^{⊗(T-tau)} ⊗ G_{D/(eta sigma
            sqrt(1-theta) sqrt(T-tau))},

    for every noise split theta in (0, 1) (Z = Z1 + Z2, Var Z1 = theta sigma^2: Z1 absorbs the
    subsampled gradient difference via Lemma C.12, Z2 the interpolation shifts D/(T-tau) per step).
    theta = 1/2 is the printed statement (factors 2 sqrt(2) L/(b sigma) and sqrt(2) D/(eta sigma
    sqrt(T-tau))); the factor 2 of Lemma C.12 (two different vectors) is kept with L the canonical
    sensitivity, the larger of the readings of docs/theorems.md 0.1 / 2.4.  tau = 0 (common start)
    is Thm 4.8's composition C_p(G_{L/(b sigma)})^{⊗T}, used as the fallback (it dominates the tau =
    0 case of the formula).  The compositions are evaluated with the pessimistic PLD engine (never
    the CLT); the window and theta are searched on a coarse grid (CLT only as a starting guess;
    every evaluated point is a valid bound) and the chosen one recomputed at the default grid.

    Assumptions (NotApplicable otherwise): sampling="uniform" (not poisson / shuffle), replace-one,
    constant step, c <= 1 (convex + smooth with eta <= 2/M, or declared contraction), diameter D.
    ``details``: ``tau``, ``window_steps``, ``theta``, ``epsilon_limit`` (best window over all
    lengths: the supremum over T, since the bound is non-decreasing in T), ``composition_epsilon``.
    """
    eta, c = _sgd_checks(run)
    D = _require_diameter(run)
    p = run.p
    step_mu = run.L / (run.b * run.sigma)
    r = D / (eta * run.sigma)

    def window_value(nu: int, theta: float, disc: float | None) -> float:
        return subsampled_gaussian_composition_value(
            p,
            lemma_c12_mu(step_mu, theta),
            nu,
            r / math.sqrt((1 - theta) * nu),
            query,
            discretization=disc,
            max_points=_search_budget(disc),
        )

    def clt_nu(theta: float) -> float:
        h = clt_h(lemma_c12_mu(step_mu, theta))
        return r / (p * math.sqrt(2 * h * (1 - theta))) if math.isfinite(h) and h > 0 else 1.0

    def clt_mu2(theta: float) -> float:  # CLT surrogate of the optimal window's mu^2 (heuristic)
        h = clt_h(lemma_c12_mu(step_mu, theta))
        return 2 * r * p * math.sqrt(2 * h / (1 - theta)) if math.isfinite(h) else math.inf

    theta_clt = _best_theta_by_clt(clt_mu2, ("Thm 4.10", p, step_mu, r))

    def search(hi: int, guess_only: bool = False) -> tuple[float, int, float]:
        return _search_window_theta(
            _pruned_by_gaussian_factor(
                lambda k, th: window_value(k, th, SEARCH_DISCRETIZATION),
                lambda k, th: r / math.sqrt((1 - th) * k),
                query,
            ),
            hi,
            clt_nu,
            theta_clt,
            guess_only=guess_only,
        )

    nu_cap = min(NU_SEARCH_MAX, max(16, 64 * max(1, round(clt_nu(0.5)))))
    return _sgd_window_result(
        run,
        query,
        theorem="Thm 4.10 (NoisySGD, convex, bounded domain)",
        reference=REFERENCE + ", Thm 4.10",
        c=c,
        window_value=window_value,
        search=search,
        # coarse grid: itself a valid (pessimistic) bound; T-free, so remembered across T
        limit_search=lambda: _limit_search_once(
            ("Thm 4.10", p, step_mu, r, nu_cap, theta_clt), query, lambda: search(nu_cap)
        ),
        limit_guess=lambda: _limit_search_once(
            ("Thm 4.10", p, step_mu, r, nu_cap, theta_clt, "guess"),
            query,
            lambda: search(nu_cap, guess_only=True),
        ),
        clt_limit_mu=math.sqrt(max(clt_mu2(theta_clt), 0.0)),
        window_at_T=lambda nu, th: window_value(nu, th, SEARCH_DISCRETIZATION),  # T-free
        gaussian_mu=lambda nu, theta: r / math.sqrt((1 - theta) * nu),
        geometry_details={},
        reading_details={},
    )


def thm49_gaussian_mu(step_mu: float, c: float, theta: float, nu: float, tau: float) -> float:
    """GDP part of Thm 4.9 (conservative reading): the residual gap
    ``||X_tau - X'_tau|| <= 2 (eta L/b)(1-c^tau)/(1-c)`` contracted by ``c^nu`` and absorbed at the
    last step by the noise share 1 - theta:  2 L c^nu (1-c^tau) / (b sigma (1-c) sqrt(1-theta)).
    (theta = 1/2: 2 sqrt(2) L c^{T-tau}(1-c^tau) / (b sigma (1-c)).)"""
    q = 1.0 if math.isinf(tau) else one_minus_power(c, tau)
    return 2.0 * step_mu * c**nu * q / ((1.0 - c) * math.sqrt(1.0 - theta))


@_memoized
def noisy_sgd_strongly_convex(run: Run, query: Query) -> Result:
    """Thm 4.9 [R-], conservative reading: NoisySGD with uniform size-b batches on m-strongly
    convex, M-smooth losses (eta < 2/M, c < 1) is f-DP for every tau in 1..T-1 and theta in (0,1):

        f = C_p(G_{2L/(b sigma sqrt(theta))})^{⊗(T-tau)} ⊗ G_{2L c^{T-tau}(1-c^tau)/(b sigma
            (1-c) sqrt(1-theta))}.

    Why this reading.  The recovered "most likely" form has C_p(G_{2L/(b sigma)}) in the first
    T-tau-1 factors and the split 2 sqrt(2) only in the last one; our own derivation (auxiliary
    process with X's contraction and X''s subsampled perturbation, Lemma C.12 at every step, the
    contracted gap ``c^{T-tau} z_tau`` absorbed at the last step) agrees with that, and even gives
    ``z_tau <= (eta L/b)(1-c^tau)/(1-c)`` (factor 1).  Since the printed statement was not seen
    (index offsets, where the noise is split), we use the reading that is pointwise WEAKER than
    each of them: the noise split (theta; theta = 1/2 gives 2 sqrt(2) L/(b sigma)) in EVERY factor
    and the factor 2 in the gap.  C_p(G_mu) decreases in mu, so this never reports a smaller
    epsilon than the recovered form.  tau = 0 is Thm 4.8's composition (fallback).  Evaluated with
    the pessimistic PLD engine (no CLT); window and theta searched as in Thm 4.10.

    Assumptions (NotApplicable otherwise): sampling="uniform", replace-one, constant step, c < 1.
    ``epsilon_limit`` is the T -> infinity value (tau -> infinity with the window fixed).
    """
    _eta, c = _sgd_checks(run)
    c = _require_strong_convexity(run)
    T, p = run.T, run.p
    step_mu = run.L / (run.b * run.sigma)
    log_inv_c = -math.log(c) if c > 0 else math.inf

    def window_value(nu: int, theta: float, tau: float, disc: float | None) -> float:
        return subsampled_gaussian_composition_value(
            p,
            lemma_c12_mu(step_mu, theta),
            nu,
            thm49_gaussian_mu(step_mu, c, theta, nu, tau),
            query,
            discretization=disc,
            max_points=_search_budget(disc),
        )

    def clt_nu(theta: float) -> float:
        h = clt_h(lemma_c12_mu(step_mu, theta))
        a = thm49_gaussian_mu(step_mu, c, theta, 0, math.inf)
        if not (math.isfinite(h) and h > 0) or not math.isfinite(log_inv_c):
            return 1.0
        arg = a * a * log_inv_c / (p * p * h)
        return max(1.0, math.log(arg) / (2 * log_inv_c)) if arg > 1 else 1.0

    def clt_mu2(theta: float) -> float:
        h = clt_h(lemma_c12_mu(step_mu, theta))
        if not math.isfinite(h):
            return math.inf
        nu = clt_nu(theta)
        return 2 * p * p * h * nu + thm49_gaussian_mu(step_mu, c, theta, nu, math.inf) ** 2

    theta_clt = _best_theta_by_clt(clt_mu2, ("Thm 4.9", p, step_mu, c))

    def search(
        hi: int, tau_of: Callable[[int], float], guess_only: bool = False
    ) -> tuple[float, int, float]:
        return _search_window_theta(
            _pruned_by_gaussian_factor(
                lambda k, th: window_value(k, th, tau_of(k), SEARCH_DISCRETIZATION),
                lambda k, th: thm49_gaussian_mu(step_mu, c, th, k, tau_of(k)),
                query,
            ),
            hi,
            clt_nu,
            theta_clt,
            guess_only=guess_only,
        )

    nu_cap = min(NU_SEARCH_MAX, max(16, 64 * max(1, round(clt_nu(0.5)))))
    return _sgd_window_result(
        run,
        query,
        theorem="Thm 4.9 (NoisySGD, strongly convex)",
        reference=REFERENCE + ", Thm 4.9 (conservative reading)",
        c=c,
        window_value=lambda nu, theta, disc: window_value(nu, theta, T - nu, disc),
        search=lambda hi: search(hi, lambda k: T - k),
        # coarse: a valid bound; tau = infinity does not depend on T, so remembered across T
        limit_search=lambda: _limit_search_once(
            ("Thm 4.9", p, step_mu, c, nu_cap, theta_clt),
            query,
            lambda: search(nu_cap, lambda k: math.inf),
        ),
        limit_guess=lambda: _limit_search_once(
            ("Thm 4.9", p, step_mu, c, nu_cap, theta_clt, "guess"),
            query,
            lambda: search(nu_cap, lambda k: math.inf, guess_only=True),
        ),
        clt_limit_mu=math.sqrt(max(clt_mu2(theta_clt), 0.0)),
        # the limit's window with the actual (finite) tau: never worse than the limit window
        window_at_T=lambda nu, th: window_value(nu, th, T - nu, SEARCH_DISCRETIZATION),
        gaussian_mu=lambda nu, theta: thm49_gaussian_mu(step_mu, c, theta, nu, T - nu),
        geometry_details={"contraction": c},
        reading_details={
            "reading": "conservative: noise split in every factor, factor 2 in the gap [R-]"
        },
    )


# ---------------------------------------------------------------------------- CLT estimates
_CLT_ASSUMPTIONS = ("asymptotic CLT approximation: NOT a guarantee at finite T",)


def _clt_checks(run: Run) -> tuple[float, float]:
    eta, c = _sgd_checks(run)
    return eta, c


def noisy_sgd_bounded_convex_clt(run: Run, query: Query) -> Result:
    """Prop C.15 [R+ by derivation; HEUR]: the CLT approximation of Thm 4.10 at theta = 1/2,

        mu(nu)^2 = 2 p^2 h(2 sqrt(2) L/(b sigma)) nu + 2 D^2 / (eta^2 sigma^2 nu),   nu = T - tau,

    minimised over the integers nu in 1..T (``gdp.gdp_clt_proj`` of the authors' code); the
    closed form is ``mu ~ 2 sqrt(D p sqrt(h)/(eta sigma))`` at ``nu* = D/(eta sigma p sqrt(h))``.
    An ESTIMATE (a limit, not a guarantee at finite T): never chosen as best.
    """
    eta, c = _clt_checks(run)
    D = _require_diameter(run)
    T, p = run.T, run.p
    step_mu = run.L / (run.b * run.sigma)
    r = D / (eta * run.sigma)
    h = clt_h(lemma_c12_mu(step_mu, 0.5))
    if not math.isfinite(h):
        raise NotApplicable("CLT parameter overflows (per-step mu too large for the approximation)")

    def mu_of(nu: np.ndarray) -> np.ndarray:
        return np.sqrt(2 * p * p * h * nu + 2 * r * r / nu)

    nu0 = r / (p * math.sqrt(h))
    nu, mu = _convex_integer_argmin(mu_of, nu0, 1, T)
    nu_lim, mu_lim = _optimal_window(mu_of, nu0)
    details: dict[str, Any] = {
        "tau": T - nu,
        "window_steps": nu,
        "theta": 0.5,
        "clt_h": h,
        "mu_closed_form": 2 * math.sqrt(r * p * math.sqrt(h)),
        "optimal_window_steps": nu_lim,
    }
    return _shift_result(
        run,
        query,
        theorem="Prop C.15 (NoisySGD, convex, bounded domain; CLT)",
        reference=REFERENCE + ", Prop C.15",
        mu=mu,
        mu_limit=mu_lim,
        c=c,
        details=details,
        kind="estimate",
        assumptions=_CLT_ASSUMPTIONS,
    )


def noisy_sgd_strongly_convex_clt(run: Run, query: Query) -> Result:
    """Prop C.14 [R+ by derivation; HEUR]: the CLT approximation of Thm 4.9 as coded by the
    authors (``gdp.gdp_clt_sc``), with ``mu0 = L/(b sigma)`` and ``nu = T - tau`` in 1..T:

        mu(nu)^2 = 2 h(2 mu0) p^2 nu + 2 (2 mu0 c^nu (1 - c^{T-nu}) / (1-c))^2.

    T -> infinity closed form: ``c^{2 nu*} = p^2 h(a) b^2 sigma^2 (1-c)^2 / (8 L^2 log(1/c))`` and
    ``mu^2 ~ 2 p^2 h(a) nu* + p^2 h(a)/log(1/c)``, a = 2 L/(b sigma).  An ESTIMATE, never a bound.
    """
    _eta, c = _clt_checks(run)
    c = _require_strong_convexity(run)
    T, p = run.T, run.p
    step_mu = run.L / (run.b * run.sigma)
    h = clt_h(2 * step_mu)
    if not math.isfinite(h):
        raise NotApplicable("CLT parameter overflows (per-step mu too large for the approximation)")

    def mu_of(nu: np.ndarray, tau: np.ndarray | None = None) -> np.ndarray:
        gap = (
            _power_array(c, nu) * (1.0 if tau is None else _one_minus_power_array(c, tau)) / (1 - c)
        )
        return np.sqrt(2 * h * p * p * nu + 2 * (2 * step_mu * gap) ** 2)

    nu, mu = integer_argmin(lambda x: mu_of(x, T - x), 1, T)
    nu_lim, mu_lim = integer_argmin(mu_of, 1, max(2, _saturation_steps(c)))
    details: dict[str, Any] = {
        "tau": T - nu,
        "window_steps": nu,
        "clt_h": h,
        "optimal_window_steps": nu_lim,
    }
    if 0 < c < 1:
        a2 = p * p * h * (1 - c) ** 2 / (8 * step_mu**2 * -math.log(c))
        if 0 < a2 < 1:
            nu_star = math.log(a2) / (2 * math.log(c))
            details["nu_star_closed_form"] = nu_star
            details["mu_closed_form"] = math.sqrt(
                2 * p * p * h * nu_star + p * p * h / -math.log(c)
            )
    return _shift_result(
        run,
        query,
        theorem="Prop C.14 (NoisySGD, strongly convex; CLT)",
        reference=REFERENCE + ", Prop C.14",
        mu=mu,
        mu_limit=mu_lim,
        c=c,
        details=details,
        kind="estimate",
        assumptions=_CLT_ASSUMPTIONS,
    )


@_memoized
def noisy_sgd_strongly_convex_bounded(run: Run, query: Query) -> Result:
    """Thms 4.9 and 4.10 together (NoisySGD, strongly convex AND bounded domain): the smaller of
    the two f-DP bounds (each valid, so their pointwise best is), with ``epsilon_limit`` the
    smaller of the two suprema over T (sup_T min(a, b) <= min(sup a, sup b)).  Both must apply.

    Thm 4.10 is not searched when it provably cannot change the result
    (:func:`_thm410_cannot_improve`): then the result is Thm 4.9's, exactly as the search would
    have left it."""
    a = noisy_sgd_strongly_convex(run, query)
    eta, _ = _sgd_checks(run)  # Thm 4.10's assumptions (the checks it makes first)
    r = _require_diameter(run) / (eta * run.sigma)
    if _thm410_cannot_improve(run, query, a, r):
        details = dict(a.details)
        details["chosen_theorem"] = a.theorem
        return dataclasses.replace(a, theorem=THM_SGD_BOTH, details=details)
    b = noisy_sgd_bounded_convex(run, query)
    key = "epsilon" if query.delta is not None else "delta"
    best = a if getattr(a, key) <= getattr(b, key) else b
    details = dict(best.details)
    details["chosen_theorem"] = best.theorem
    lk = _limit_key(query)
    details[lk] = min(a.details[lk], b.details[lk])
    return dataclasses.replace(best, theorem=THM_SGD_BOTH, details=details)


def _thm410_cannot_improve(run: Run, query: Query, a: Result, r: float) -> bool:
    """Whether Thm 4.10 can change neither the value nor the limit of Thms 4.9 + 4.10, given
    Thm 4.9's result ``a`` (exact lower bounds, no PLD):

    * every Thm 4.10 window (any theta in the searched range, so ``1 - theta <= 0.95``, and any
      length nu up to ``max(T - 1, NU_SEARCH_MAX)``) composes the Gaussian factor
      ``G_{D/(eta sigma sqrt((1 - theta) nu))}``, and composing more mechanisms never lowers
      epsilon (nor delta at a fixed epsilon): each window's value, on any pessimistic grid, is at
      least that of ``G_{r / sqrt(0.95 nu_max)}``, ``r = D/(eta sigma)``.  If that exceeds
      ``a``'s value, and Thm 4.10's other candidate, Thm 4.8's composition (the same cached PLD
      as Thm 4.9's fallback), does not beat ``a`` either, then the pointwise minimum keeps ``a``.
    * Thm 4.10's ``epsilon_limit`` is a window value over lengths up to ``NU_SEARCH_MAX`` (or
      infinity when its search is skipped): at least the same Gaussian value at ``NU_SEARCH_MAX``;
      if that is at least ``a``'s limit, the minimum of the two limits is ``a``'s.
    """
    lk = _limit_key(query)
    key = "epsilon" if query.delta is not None else "delta"
    value_a, limit_a = float(getattr(a, key)), float(a.details[lk])
    theta_low = 1.0 - _THETA_RANGE[0]  # the largest share 1 - theta of the searched range
    nu_max = max(run.T - 1, NU_SEARCH_MAX)
    if _gaussian_value(r / math.sqrt(theta_low * nu_max), query) < value_a:
        return False
    if _gaussian_value(r / math.sqrt(theta_low * NU_SEARCH_MAX), query) < limit_a:
        return False
    try:
        return _thm48_composition(run, query)[0] >= value_a
    except NotApplicable:  # no composition value to compare with: search as before
        return False


def noisy_sgd_bounded_convex_alone(run: Run, query: Query) -> Result:
    """Thm 4.10 as registered: :func:`noisy_sgd_bounded_convex`, except for runs where the
    combined Thms 4.9 + 4.10 apply (strongly convex AND bounded domain), whose result is never
    larger than Thm 4.10's alone and is the one the accountant keeps for this bound id (it is
    registered first and wins ties); there Thm 4.10 alone refuses (NotApplicable, with the reason)
    instead of repeating the window search that the combined theorem may have proved useless
    (:func:`_thm410_cannot_improve`)."""
    try:
        noisy_sgd_strongly_convex_bounded(run, query)  # memoized: the accountant asked first
    except NotApplicable:
        return noisy_sgd_bounded_convex(run, query)
    raise NotApplicable(
        f"superseded by {THM_SGD_BOTH}, which applies to this run and is never larger"
    )


# ============================================================================ registration
# One registered function per theorem.  Order matters only on ties (the accountant keeps the
# first of equally tight results of an id): the combined theorems come first because their
# ``epsilon_limit`` is the smallest, which is what the epoch calibrator reads.
THM_SGD_BOTH = "Thms 4.9 + 4.10 (NoisySGD, strongly convex + bounded domain)"
_REGISTRATION: tuple[tuple[Callable[[Run, Query], Result], str, str, str], ...] = (
    (
        noisy_gd_strongly_convex_bounded,
        "Thm C.3 (NoisyGD, strongly convex + bounded domain)",
        "gd",
        "bound",
    ),
    (noisy_gd_strongly_convex, "Thm 4.2 (NoisyGD, strongly convex)", "gd", "bound"),
    (noisy_gd_bounded_convex, "Thm 4.3 (NoisyGD, convex, bounded domain)", "gd", "bound"),
    (
        noisy_cgd_strongly_convex_bounded,
        "Thm C.3 (NoisyCGD, strongly convex + bounded domain)",
        "cgd",
        "bound",
    ),
    (noisy_cgd_strongly_convex, "Thm 4.5 (NoisyCGD, strongly convex)", "cgd", "bound"),
    (noisy_cgd_bounded_convex, "Thm 4.6 (NoisyCGD, convex, bounded domain)", "cgd", "bound"),
    (noisy_sgd_strongly_convex_bounded, THM_SGD_BOTH, "sgd", "bound"),
    (
        noisy_sgd_bounded_convex_alone,
        "Thm 4.10 (NoisySGD, convex, bounded domain)",
        "sgd",
        "bound",
    ),
    (noisy_sgd_strongly_convex, "Thm 4.9 (NoisySGD, strongly convex)", "sgd", "bound"),
    (
        noisy_sgd_bounded_convex_clt,
        "Prop C.15 (NoisySGD, convex, bounded domain; CLT)",
        "sgd",
        "estimate",
    ),
    (
        noisy_sgd_strongly_convex_clt,
        "Prop C.14 (NoisySGD, strongly convex; CLT)",
        "sgd",
        "estimate",
    ),
)
for _func, _theorem, _algorithm, _kind in _REGISTRATION:
    register(
        BOUND_ID,
        theorem=_theorem,
        reference=REFERENCE,
        kind=_kind,  # type: ignore[arg-type]
        algorithms=(_algorithm,),
    )(_func)
