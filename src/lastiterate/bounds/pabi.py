"""Paper 003: Altschuler and Talwar, "Privacy of Noisy Stochastic Gradient Descent: More Iterations
without More Privacy Loss" (NeurIPS 2022).  Bound id ``pabi``.

Diameter-aware Privacy Amplification by Iteration (PABI): with projection onto a convex set K of
diameter D, the Renyi divergence of the LAST iterate stops growing after ~Dn/(L eta) steps.

Notation map (docs/theorems.md 0.1, 4)
---------------------------------
AT22 write ``w_{t+1} = Pi_K[w_t - eta (G_t + Z_t)]``, ``Z_t ~ N(0, sigma^2 I)`` (sigma = canonical
sigma) and their ``L`` is the Lipschitz constant.  Every ``2 L_AT`` of the paper (replace
adjacency) is the canonical sensitivity ``L``.  (Under remove adjacency Remark B.2 replaces ``2
L_AT`` by ``L_AT`` for a FIXED normaliser; the library runs add/remove only with Poisson batches,
which these theorems do not cover, and :class:`~lastiterate.run.Run` refuses add/remove for gd,
cgd, shuffled and uniform batches, whose normaliser or partition depends on the data.)  Hence, in
canonical units, always

    per-step shift s = eta L / b,   Q = S_alpha(b/n, b sigma_2 / L),   D~ = D + eta L / n (B.1).

Implemented theorems (all RDP, valid for every alpha > 1 and sigma > 0, Remark B.1)
------------------------------------------------------------------------------------
* (B.1) full-batch gd, convex, diameter D:
      eps = alpha/(2 eta^2 sigma^2) min{ T s^2, min_{Tt in 1..T} Tt (D~/Tt + s)^2 },  s = eta L / n.
* (B.2) Noisy-SGD with uniformly random size-b batches, convex:
      eps = min{ T S_alpha(b/n, b sigma/L),
                 min_{sigma1^2 + sigma2^2 = sigma^2} min_{Tt in 1..T-1} Tt Q + alpha D^2/(2
                     eta^2 sigma1^2 Tt) }.
* (B.3) the same for c-contractive steps (m-strongly convex, c < 1): the diameter term becomes
      alpha D^2 (1 - c^2) / (2 eta^2 sigma1^2 (c^{-2 Tt} - 1)).
  (The seed OCR shows "(1 - c)2"; the derivation from Prop. 5.6 requires (1 - c^2),
  docs/theorems.md 4.2.)
* (5.7) non-uniform step sizes eta_t <= 2/M (Noisy-SGD, and full batch as b = n):
      eps = min{ T S_alpha(b/n, b sigma/L),
                 min_tau (T - tau) Q + (T - tau - 1) alpha D^2 / (2 sigma1^2
                     (sum_{t=tau+1}^{T-1} eta_t)^2) }.
  The printed (5.7) sums over T - tau - 1 step sizes while (3.6) uses T - tau; we implement (5.7)
  literally, the LARGER of the two readings.
* Thm 5.8 (Noisy-CGD, cyclic batches) -- derived non-asymptotic form, see :func:`cgd_shift_cost`.
  The paper only gives the asymptotic ``alpha L^2/sigma^2 (1/b^2 + min{T, Tbar}/n^2)``.  Its proof
  applies Prop. 3.2 to the CNI of the cyclic updates (no noise split, per-step noise eta sigma) with
  s_t = eta L / b at the steps that use the differing example (once per epoch, at a position fixed
  by its batch) and 0 elsewhere.  We evaluate that bound exactly:

      eps(alpha) = alpha / (2 eta^2 sigma^2) * max_{position} min{ cost_0,
          min_{tau >= 1} cost_tau },

  where cost_tau = min sum_{t > tau} a_t^2 subject to z_t = D~ + sum (s_i - a_i) >= 0 and z_T = 0
  (Prop. 3.2; D~ = D + eta L/b_min as in the proof of Thm 5.8) and cost_0 is the same with initial
  distance 0 (Prop. 2.17: both runs start at the same point).  Each cost is a taut string under a
  staircase ceiling with closed-form solution (:func:`_cgd_window_min`, :func:`_cgd_cost0`); the
  tests compare it with an independent greatest-convex-minorant computation for every tau and
  position.  Strong convexity is not exploited (c = 1 is used; valid).  Linear in alpha.

For full batch (gd) the sampled Gaussian with q = 1 is the plain Gaussian, so (B.2)/(B.3) are also
evaluated with Q = alpha L^2/(2 n^2 sigma2^2) and the smallest of (B.1), (B.2), (B.3) is reported
(all linear in alpha).

S_alpha is computed by :func:`lastiterate.notions.rdp.sampled_gaussian_rdp` with ``direction="max"``
(the larger of the literal AT22 direction and the Mironov-Talwar-Zhang direction), never by the
asymptotic 2 alpha q^2/sigma^2 (Lemma 2.12 is not used at all).  Because every evaluation is a
quadrature / series (milliseconds), an RDP curve tabulates S_alpha at a few orders and bounds it in
between by the chord of the convex function (alpha - 1) S_alpha (:class:`SGMTable`; rigorous).  The
table is placed where it matters by a fast locating pass that uses the mixture-first direction at
integer orders (closed form) only to find the order of the best conversion and the best noise split
(:func:`refined_split_window_curve`); the reported curve itself uses only the two-direction values.

Sensitivity: (B.1), Thm 5.8 and the full-batch (B.2)/(B.3) need ``L`` to bound only the DIFFERING
pair ``||g_i(x) - g'_i(x)||``.  Noisy-SGD (B.2)/(B.3)/(5.7) with q < 1 needs more than a
bound on ANY two examples: every per-example gradient in a ball of radius L/2 (a clip norm
C, L = 2C; see below).

Assumptions that the Run cannot express are listed in every result: the per-example losses are
convex, M-smooth and L_AT-Lipschitz (every gradient of norm <= L/2), with the clipping (if any)
never active (a clipped gradient step need not be non-expansive), and the projection is onto a
closed convex set of diameter D.  Bounded gradients matter for Noisy-SGD: with fixed-size batches
under replace-one adjacency, a batch that does not hold the differing example holds another one
instead, so one step compares (1-q) A + q B with (1-q) A + q B'; S_alpha bounds this only when the
three gradient offsets are bounded by L (checked numerically for points in a ball of radius L/2;
with only |g - g'| <= L bounded, the step can leak linearly in q).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lastiterate.bounds.base import (
    Query,
    Result,
    locating,
    rdp_epsilon_limit,
    rdp_result,
    register,
)
from lastiterate.errors import NotApplicable
from lastiterate.notions.arrays import sorted_unique
from lastiterate.notions.rdp import (
    mixture_first_integer_grid,
    rdp_to_epsilon,
    sampled_gaussian_rdp,
)
from lastiterate.notions.tradeoff import lower_hull_indices
from lastiterate.run import Run

#: Why subsampled RDP terms need a clip norm (shared with pabi): S_alpha bounds the sampled pair
#: only when every per-example gradient lies in a ball of radius L/2; a sensitivity sup ||g - g'||
#: <= L alone allows configurations whose divergence exceeds S_alpha (found numerically: an
#: equilateral triple of gradients exceeds it by 1% at q = 0.1, alpha = 2).
GRADIENT_BOUND_REASON = (
    "needs per-example gradients bounded in norm by L/2 (clipping, or L/2-Lipschitz losses): a "
    "sensitivity alone bounds only differences, for which the sampled-Gaussian term can be "
    "exceeded; declare the clip norm C (L = 2C)"
)

REFERENCE = "Altschuler, Talwar 2022 (paper 003)"

__all__ = [
    "LAMBDA_GRID",
    "SGMTable",
    "ScheduleCurve",
    "SplitWindowCurve",
    "b1_rho",
    "b1_rho_limit",
    "best_window",
    "cgd_rho",
    "cgd_rho_limit",
    "cgd_shift_cost",
    "refined_schedule_curve",
    "refined_split_window_curve",
    "sampled_gaussian",
    "schedule_rdp",
    "split_window_rdp",
    "window_diameter_factor",
]


# ============================================================================ window (PABI) term
def window_diameter_factor(N: np.ndarray | float, c: float) -> np.ndarray:
    """min over shifts a_1..a_N of sum a_t^2 needed to erase an initial distance 1 in N steps whose
    maps are c-Lipschitz (Prop. 3.2 for c = 1, Prop. 5.6 for c < 1, and the same recursion for an
    expansion c > 1, paper 002):

        g_c(N) = (1 - c^2) / (c^{-2N} - 1)   (c != 1),      g_1(N) = 1 / N.

    Multiply by D^2.  For c < 1 it decays like c^{2N}; for c > 1 it decreases to c^2 - 1.
    """
    N = np.asarray(N, dtype=float)
    lc = math.log(c)
    if _unit_window(lc):
        return 1.0 / N
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        out = -math.expm1(2.0 * lc) / np.expm1(-2.0 * N * lc)
    return np.where(np.isfinite(out), out, 0.0 if lc < 0 else math.expm1(2.0 * lc))


def _unit_window(lc: float) -> bool:
    """Whether ``g_c(N) = 1/N`` may stand for ``g_c(N)`` (``lc = log c``): only for ``c <= 1``,
    where ``g_c(N) <= 1/N`` (an upper bound, exact within ``N |log c|`` relative).  For an
    expansion ``c > 1``, ``g_c(N) > 1/N`` (by ``~N log c`` relative: 9e-6 too SMALL at ``c = 1 +
    9e-13``, ``N = 1e7``; issue 8 audit), so the exact formula is evaluated (accurate there:
    ``expm1`` of small arguments)."""
    return -1e-12 < lc <= 0.0


def _continuous_window(Q: np.ndarray, K: np.ndarray, c: float) -> np.ndarray:
    """Continuous minimiser of h(N) = N Q + K g_c(N) (h is convex in N > 0).

    c = 1: N* = sqrt(K/Q).  c != 1: with x = c^{-2N}, h'(N) = 0 gives x^2 - (2 + beta) x + 1 = 0,
    beta = -2 K (1 - c^2) log(c) / Q > 0 (AT22 App. B.3); x > 1 for c < 1, x < 1 for c > 1.
    """
    Q = np.asarray(Q, dtype=float)
    K = np.asarray(K, dtype=float)
    lc = math.log(c)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if abs(lc) < 1e-12:
            n_star = np.sqrt(K / Q)
        else:
            beta = -2.0 * K * (-math.expm1(2.0 * lc)) * lc / Q
            disc = np.sqrt(beta * (beta + 4.0))  # sqrt((2+beta)^2 - 4)
            if lc < 0:
                x = (2.0 + beta + disc) / 2.0
                n_star = -np.log(x) / (2.0 * lc)
            else:
                x = 2.0 / (2.0 + beta + disc)  # the root below 1, computed stably
                n_star = -np.log(x) / (2.0 * lc)
    return np.where(Q > 0, n_star, np.inf)


def best_window(
    Q: np.ndarray, K: np.ndarray, c: float, n_max: float
) -> tuple[np.ndarray, np.ndarray]:
    """min over integers N in [1, n_max] of N Q + K g_c(N), elementwise; returns (value, N).

    h is convex in N, so the integer minimum is at the floor or ceiling of the continuous minimiser
    (clipped to the range).  ``n_max`` may be ``inf`` (the T -> infinity limit).

    The same floating-point operations as :func:`_best_window_reference` (equal bit for bit,
    tested) with less numpy overhead: it runs for every order of every RDP conversion.
    """
    Q = np.asarray(Q, dtype=float)
    K = np.asarray(K, dtype=float)
    if Q.shape != K.shape or Q.ndim == 0:
        Q, K = np.broadcast_arrays(np.atleast_1d(Q), np.atleast_1d(K))
    cap = 1e15 if not math.isfinite(n_max) else float(n_max)
    unit = abs(math.log(c)) < 1e-12
    unit_g = _unit_window(math.log(c))  # g = 1/N only where that is an upper bound
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if unit:  # _continuous_window's c = 1 branch, inlined
            n_star = np.where(Q > 0, np.sqrt(K / Q), np.inf)
        else:
            n_star = _continuous_window(Q, K, c)
        n_star = np.where(np.isnan(n_star), 1.0, n_star)  # nan_to_num(nan=1, +-inf -> clipped)
        n_star = np.minimum(np.maximum(n_star, 1.0), cap)
        values = []
        for cand in (np.floor(n_star), np.ceil(n_star)):
            cand = np.minimum(np.maximum(cand, 1.0), cap)
            g = 1.0 / cand if unit_g else window_diameter_factor(cand, c)
            v = cand * Q + K * g
            values.append((np.where(np.isnan(v), np.inf, v), cand))
        (v_lo, n_lo), (v_hi, n_hi) = values
        best_n = np.where(v_lo < np.inf, n_lo, 1.0)
        better = v_hi < v_lo
    return np.where(better, v_hi, v_lo), np.where(better, n_hi, best_n)


def _best_window_reference(
    Q: np.ndarray, K: np.ndarray, c: float, n_max: float
) -> tuple[np.ndarray, np.ndarray]:
    """The original (slower) :func:`best_window`, kept as the reference its tests compare with
    bit for bit: min over integers N in [1, n_max] of N Q + K g_c(N), elementwise; (value, N).

    h is convex in N, so the integer minimum is at the floor or ceiling of the continuous minimiser
    (clipped to the range).  ``n_max`` may be ``inf`` (the T -> infinity limit).
    """
    Q = np.atleast_1d(np.asarray(Q, dtype=float))
    K = np.atleast_1d(np.asarray(K, dtype=float))
    Q, K = np.broadcast_arrays(Q, K)
    n_star = _continuous_window(Q, K, c)
    cap = 1e15 if not math.isfinite(n_max) else float(n_max)
    n_star = np.clip(np.nan_to_num(n_star, nan=1.0, posinf=cap), 1.0, cap)
    best_v = np.full(Q.shape, np.inf)
    best_n = np.ones(Q.shape)
    for cand in (np.floor(n_star), np.ceil(n_star)):
        cand = np.clip(cand, 1.0, cap)
        with np.errstate(invalid="ignore", over="ignore"):
            v = cand * Q + K * window_diameter_factor(cand, c)
        v = np.where(np.isnan(v), np.inf, v)
        better = v < best_v
        best_v = np.where(better, v, best_v)
        best_n = np.where(better, cand, best_n)
    return best_v, best_n


# ============================================================================ (B.1) full batch
def b1_rho(
    *, D: float, eta: float, sigma: float, L: float, n: int, T: int
) -> tuple[float, dict[str, Any]]:
    """(B.1) as the slope rho of the linear RDP curve eps(alpha) = rho alpha (canonical units).

        rho = 1/(2 eta^2 sigma^2) min{ T s^2, min_{Tt in 1..T} (D~ + Tt s)^2 / Tt },  s =
            eta L/n, D~ = D + s.

    The inner term is convex in Tt with optimum D~/s; the floor/ceiling are checked.
    """
    s = eta * L / n
    Dt = D + s
    comp = T * s * s
    t_star = Dt / s
    best, best_t = math.inf, 1
    for t in {max(1, min(T, math.floor(t_star))), max(1, min(T, math.ceil(t_star)))}:
        v = (Dt + t * s) ** 2 / t
        if v < best:
            best, best_t = v, t
    scale = 1.0 / (2.0 * eta**2 * sigma**2)
    if comp <= best:
        return comp * scale, {"window": None, "branch": "composition (Prop. 2.17)"}
    return best * scale, {"window": int(best_t), "branch": "diameter-aware PABI (Prop. 3.2)"}


def b1_rho_limit(*, D: float, eta: float, sigma: float, L: float, n: int) -> float:
    """sup over T of (B.1) (= its T -> infinity plateau; (B.1) never exceeds it)."""
    s = eta * L / n
    Dt = D + s
    t_star = Dt / s
    best = min(
        (Dt + t * s) ** 2 / t for t in {max(1, math.floor(t_star)), max(1, math.ceil(t_star))}
    )
    return best / (2.0 * eta**2 * sigma**2)


# ============================================================================ sampled Gaussian
#: integer orders of the fast locating pass (mixture-first direction only, closed form)
PROXY_ORDERS = np.array(
    [
        2,
        3,
        4,
        5,
        6,
        7,
        8,
        10,
        12,
        14,
        16,
        20,
        24,
        28,
        32,
        40,
        48,
        56,
        64,
        80,
        96,
        128,
        160,
        192,
        256,
        320,
        384,
        512,
        640,
        768,
        1024,
    ],
    dtype=float,
)
#: orders of the exact pass around the located order a*: 1 + (a* - 1) * FINE_FACTORS (ratio ~1.12)
FINE_FACTORS = np.geomspace(0.5, 2.0, 13)
_EXACT_CACHE: dict[tuple[float, float, float, str], float] = {}
#: orders above this are never evaluated (cost grows with alpha); the Gaussian bound is used there
MAX_TABLE_ORDER = 1e4 + 1.0
_EXACT_CACHE_MAX = 500_000


def sampled_gaussian(
    q: float, noise_multiplier: float, alpha: float, direction: str = "max"
) -> float:
    """S_alpha(q, noise_multiplier) of docs/theorems.md 1.9 at one order: the max of both directions
    (``sampled_gaussian_rdp(..., direction="max")``), cached.

    ``noise_multiplier`` is the effective noise over the shift norm (AT22's second argument, e.g.
    b sigma_2 / L).  q = 1 is the plain Gaussian alpha / (2 noise_multiplier^2).  If the numerical
    evaluation fails (it raises for some near-integer fractional orders at small noise), the valid
    upper bound alpha / (2 noise_multiplier^2) is used instead (quasi-convexity of the Renyi
    divergence: sampling never increases it).
    """
    gauss = alpha / (2.0 * noise_multiplier**2)
    if q >= 1.0:
        return gauss
    key = (float(q), float(noise_multiplier), float(alpha), direction)
    val = _EXACT_CACHE.get(key)
    if val is None:
        try:
            val = float(
                np.asarray(
                    sampled_gaussian_rdp(q, noise_multiplier, [alpha], direction=direction),
                    dtype=float,
                )[0]
            )
        except (ValueError, ArithmeticError):  # ParameterError is a ValueError
            val = gauss
        if not val >= 0:  # NaN or negative would under-report
            val = gauss
        val = min(val, gauss)
        if len(_EXACT_CACHE) > _EXACT_CACHE_MAX:
            _EXACT_CACHE.clear()
        _EXACT_CACHE[key] = val
    return val


def sampled_gaussian_many(
    q: float, noise_multiplier: float, alphas: np.ndarray, direction: str = "max"
) -> np.ndarray:
    """:func:`sampled_gaussian` at several orders: the orders it has not cached are evaluated in
    one :func:`~lastiterate.notions.rdp.sampled_gaussian_rdp` call (the per-call checks and the
    literal-direction filter are then shared); the values, their fallback to the Gaussian bound
    and the cache are those of :func:`sampled_gaussian`."""
    orders = [float(a) for a in np.asarray(alphas, dtype=float).tolist()]
    if q < 1.0:
        missing = [
            a
            for a in orders
            if (float(q), float(noise_multiplier), a, direction) not in _EXACT_CACHE
        ]
        if len(missing) > 1:
            try:
                got = np.asarray(
                    sampled_gaussian_rdp(q, noise_multiplier, missing, direction=direction),
                    dtype=float,
                )
            except (ValueError, ArithmeticError):  # one order failed: the scalar path decides
                got = None
            if got is not None:
                if len(_EXACT_CACHE) > _EXACT_CACHE_MAX:
                    _EXACT_CACHE.clear()
                for a, v in zip(missing, got.tolist()):
                    gauss = a / (2.0 * noise_multiplier**2)
                    val = v if v >= 0 else gauss  # NaN or negative would under-report
                    _EXACT_CACHE[(float(q), float(noise_multiplier), a, direction)] = min(
                        val, gauss
                    )
    return np.array([sampled_gaussian(q, noise_multiplier, a, direction) for a in orders])


@functools.lru_cache(maxsize=32)
def _locating_table(q: float, s: tuple[float, ...], orders: tuple[float, ...]) -> np.ndarray:
    """min(mixture-first S_alpha, alpha / (2 s^2)) for every noise multiplier (rows) at every
    integer order (columns): :func:`~lastiterate.notions.rdp.mixture_first_integer_grid`, cached
    (read-only)."""
    o = np.asarray(orders, dtype=float)
    sig = np.asarray(s, dtype=float)
    vals = np.minimum(mixture_first_integer_grid(q, sig, o), o[None, :] / (2.0 * sig[:, None] ** 2))
    vals.setflags(write=False)
    return vals


class SGMTable:
    """Upper bounds on S_alpha(q, s_j) for several noise multipliers s_j at ANY order alpha > 1.

    S_alpha is computed exactly (:func:`sampled_gaussian`) at the table ``orders``.  Between two
    table orders we use the chord of phi(alpha) = (alpha - 1) S_alpha: phi is convex in alpha (for
    each direction it is the logarithm of a moment generating function in alpha, and a max of convex
    functions is convex) and phi(1) = 0, so the chord lies above phi:

        S_alpha <= [phi(a_i) + (alpha - a_i)(phi(a_{i+1}) - phi(a_i))/(a_{i+1} -
            a_i)] / (alpha - 1),

    exact at the table orders.  Below the first order the chord from (1, 0) gives S_alpha <=
    S_{a_0}; above the last order (and above :data:`MAX_TABLE_ORDER`) the Gaussian bound alpha/(2
    s^2) is used.  (If a tabulated value is itself an upper bound, the chord of upper bounds is
    still above the chord of the true values.)

    ``direction="mixture-first"`` (integer orders: a fast closed form) is used ONLY by the locating
    pass of :func:`refined_split_window_curve`, never for a reported bound.
    """

    def __init__(
        self,
        q: float,
        noise_multipliers: np.ndarray,
        orders: Sequence[float] | np.ndarray,
        direction: str = "max",
        gaussian_rows: Sequence[int] = (),
    ) -> None:
        """``gaussian_rows``: rows whose values the caller never uses finitely (the composition
        row of a T -> infinity curve, multiplied by T = inf): they hold the Gaussian bound
        alpha / (2 s^2) (a valid, positive upper bound) instead of evaluated S_alpha."""
        self.q = float(q)
        self.s = np.atleast_1d(np.asarray(noise_multipliers, dtype=float))
        kept = [a for a in orders if 1.0 < a <= MAX_TABLE_ORDER]
        o = sorted_unique(np.asarray(kept, dtype=float))
        self.orders = o
        if self.q >= 1.0:
            self.phi = None
            return
        if direction == "mixture-first" and o.size and np.all(o == np.round(o)) and o[0] >= 2:
            # the locating pass: every row in one numpy pass (closed form at integer orders),
            # shared by the curves of the same run (the T -> infinity curve, paper 002's bound)
            vals = _locating_table(self.q, tuple(self.s.tolist()), tuple(o.tolist()))
        else:
            skip = set(gaussian_rows)
            vals = np.array(
                [
                    o / (2.0 * s**2)
                    if j in skip
                    else sampled_gaussian_many(self.q, float(s), o, direction)
                    for j, s in enumerate(self.s.tolist())
                ]
            )
        self.phi = vals.reshape(len(self.s), len(o)) * (o - 1.0)[None, :]

    def upper(self, alpha: float) -> np.ndarray:
        """Upper bounds on S_alpha(q, s_j) for every row j."""
        gauss = alpha / (2.0 * self.s**2)
        if self.phi is None or self.orders.size == 0:
            return gauss
        o = self.orders
        if alpha > o[-1]:
            return gauss
        i = int(np.searchsorted(o, alpha, side="left"))
        if o[i] == alpha:
            val = self.phi[:, i] / (alpha - 1.0)
        elif i == 0:
            val = self.phi[:, 0] / (o[0] - 1.0)
        else:
            a0, a1 = o[i - 1], o[i]
            val = (
                self.phi[:, i - 1]
                + (alpha - a0) * (self.phi[:, i] - self.phi[:, i - 1]) / (a1 - a0)
            ) / (alpha - 1.0)
            val = val * (1.0 + 1e-9)  # floating-point margin on the chord
        return np.minimum(np.maximum(val, 0.0), gauss)

    __call__ = upper

    def upper_many(self, alphas: np.ndarray) -> np.ndarray:
        """:meth:`upper` at every order of ``alphas`` at once: shape ``(rows, len(alphas))``, the
        same floating-point operations elementwise (equal to the scalar calls bit for bit)."""
        a = np.asarray(alphas, dtype=float)
        gauss = a[None, :] / (2.0 * self.s[:, None] ** 2)
        if self.phi is None or self.orders.size == 0:
            return gauss
        o, phi = self.orders, self.phi
        beyond = a > o[-1]
        i = np.searchsorted(o, a, side="left")
        ic = np.minimum(i, o.size - 1)
        i0 = np.maximum(i - 1, 0)
        exact = o[ic] == a
        # every case computed for every column (no boolean-mask indexing), then selected: the
        # same operations elementwise as upper()
        p0, p1 = phi[:, i0], phi[:, ic]
        a0, a1 = o[i0], o[ic]
        with np.errstate(divide="ignore", invalid="ignore"):
            chord = (p0 + (a - a0) * (p1 - p0) / (a1 - a0)) / (a - 1.0)
            chord = chord * (1.0 + 1e-9)  # floating-point margin on the chord
            val = np.where(
                exact, p1 / (a - 1.0), np.where(i == 0, phi[:, [0]] / (o[0] - 1.0), chord)
            )
        out = np.minimum(np.maximum(val, 0.0), gauss)
        return np.where(beyond, gauss, out)


def _best_order(curve: Callable[[float], float], query: Query) -> float:
    """The order at which the curve's best (eps, delta) conversion is attained (for refinement)."""
    if query.delta is not None:
        return float(rdp_to_epsilon(curve, query.delta).order)
    eps = float(query.epsilon)  # type: ignore[arg-type]
    u = np.linspace(math.log(1e-2), math.log(1e3), 121)
    best, best_a = math.inf, 2.0
    for a in (1.0 + np.exp(u)).tolist():
        v = curve(a)
        ld = (a - 1) * (v - eps) + (a - 1) * math.log1p(-1 / a) - math.log(a)
        if ld < best:
            best, best_a = ld, a
    return best_a


# ============================================================================
# (B.2)/(B.3) noise split
#: the full noise-split grid (lambda = sigma1^2 / sigma^2, the PABI share;
#: sigma2^2 = (1 - lambda) sigma^2)
LAMBDA_GRID = np.array(
    [
        0.02,
        0.05,
        0.1,
        0.16,
        0.23,
        0.3,
        0.37,
        0.44,
        0.5,
        0.56,
        0.63,
        0.7,
        0.77,
        0.84,
        0.9,
        0.95,
        0.98,
    ]
)
#: a fine split grid for q = 1 (the plain Gaussian: no S_alpha evaluations needed)
LAMBDA_FINE_Q1 = np.linspace(0.005, 0.995, 199)


@dataclass
class SplitWindowCurve:
    """The RDP curve alpha -> eps(alpha) of a noise-split + window bound:

        eps(alpha) = min{ T Delta(alpha, sigma),
                          min_lambda min_{N in 1..n_max} N Delta(alpha, sigma sqrt(1 - lambda))
                                + alpha D^2 g_c(N) / (2 eta^2 lambda sigma^2) }

    with Delta(alpha, s2) = S_alpha(q, b s2 / L) (AT22 B.2/B.3; c = 1 or c < 1) or, for paper 002,
    max(S_alpha(q, b s2/L), q alpha (L/b)^2/(2 s2^2)) and c = 1 + eta M > 1.  ``n_max = T - 1`` for
    the bound at T and ``inf`` for the T -> infinity limit.  lambda = sigma1^2/sigma^2 runs over
    ``lambdas`` and N is optimised in closed form, separately for every alpha; S_alpha comes from an
    :class:`SGMTable` on ``orders`` (exact there, a rigorous chord bound in between).
    """

    q: float
    b: int
    L: float
    sigma: float
    eta: float
    D: float
    c: float
    T: float
    n_max: float
    lambdas: np.ndarray
    orders: Sequence[float] | np.ndarray
    q_linear: bool = False  # paper 002's general (q-linear) per-step term joins the max
    direction: str = "max"  # "mixture-first" only for the locating pass

    def __post_init__(self) -> None:
        self.lambdas = np.asarray(self.lambdas, dtype=float)
        self._s2 = self.sigma * np.sqrt(np.concatenate([[1.0], 1.0 - self.lambdas]))
        # T = inf (the limit) with windows: the composition row is T * Delta = inf whatever
        # Delta > 0 is, so its S_alpha is not evaluated (the Gaussian bound stands in)
        limit = not math.isfinite(self.T) and self.n_max >= 1 and self.lambdas.size > 0
        self._table = SGMTable(
            self.q,
            self.b * self._s2 / self.L,
            self.orders,
            self.direction,
            gaussian_rows=(0,) if limit else (),
        )

    def delta_steps(self, alpha: float) -> np.ndarray:
        """Per-step sampled term for [full sigma, sigma2(lambda_1), ...]."""
        d = self._table.upper(alpha)
        if self.q_linear:
            d = np.maximum(d, self.q * alpha * (self.L / self.b) ** 2 / (2.0 * self._s2**2))
        return d

    def evaluate(self, alpha: float) -> tuple[float, dict[str, Any]]:
        """eps(alpha) and the optimiser's choices."""
        d = self.delta_steps(alpha)
        comp = float(d[0]) * self.T
        best, i, n_i = comp, -1, 0.0
        if self.n_max >= 1 and self.lambdas.size:
            K = alpha * self.D**2 / (2.0 * self.eta**2 * self.lambdas * self.sigma**2)
            vals, ns = best_window(d[1:], K, self.c, self.n_max)
            k = int(np.argmin(vals))
            if vals[k] < best:
                best, i, n_i = float(vals[k]), k, float(ns[k])
        if i < 0:
            return best, {"branch": "composition (tau = 0)"}
        lam = float(self.lambdas[i])
        return best, {
            "branch": "noise split + diameter-aware window",
            "sigma1_share": lam,
            "sigma1": self.sigma * math.sqrt(lam),
            "sigma2": self.sigma * math.sqrt(1.0 - lam),
            "window": int(n_i),
        }

    def __call__(self, alpha: float) -> float:
        return self.evaluate(alpha)[0]

    @property
    def kink_orders(self) -> np.ndarray:
        """The S_alpha table's orders: between them the curve is smooth (the chord), at them it
        may have a kink where a conversion's optimum sits (``rdp_to_epsilon`` tries them)."""
        return self._table.orders

    def values(self, alphas: np.ndarray) -> np.ndarray:
        """eps(alpha) at every order of ``alphas`` at once (equal to the scalar calls: the same
        operations elementwise); :func:`lastiterate.notions.rdp.rdp_to_epsilon` uses it for its
        grid of orders."""
        a = np.asarray(alphas, dtype=float)
        d = self._table.upper_many(a)
        if self.q_linear:
            d = np.maximum(
                d, self.q * a[None, :] * (self.L / self.b) ** 2 / (2.0 * self._s2[:, None] ** 2)
            )
        best = d[0] * self.T
        if self.n_max >= 1 and self.lambdas.size:
            K = a[None, :] * self.D**2 / (2.0 * self.eta**2 * self.lambdas[:, None] * self.sigma**2)
            vals, _ = best_window(d[1:], K, self.c, self.n_max)
            best = np.minimum(best, vals.min(axis=0))
        return best


def _neighbour_lambdas(lam: float | None) -> np.ndarray:
    """lam and its neighbours in :data:`LAMBDA_GRID` (the exact pass's split values)."""
    if lam is None:
        return LAMBDA_GRID[[0, 8, -1]]
    k = int(np.argmin(np.abs(LAMBDA_GRID - lam)))
    return LAMBDA_GRID[max(k - 1, 0) : k + 2]


#: refined curves already built, by (query, locating, parameters): a calibration of the number of
#: epochs rebuilds the T -> infinity curve (which does not depend on T) at every step otherwise
_CURVE_CACHE: dict[tuple[Any, ...], SplitWindowCurve] = {}
_CURVE_CACHE_MAX = 256


def refined_split_window_curve(query: Query, **params: Any) -> SplitWindowCurve:
    """:func:`_refined_split_window_curve`, cached by the query, the locating flag and the
    parameters (the curves are not modified after construction)."""
    try:
        key = (
            query.delta,
            query.epsilon,
            tuple(query.report_orders),
            locating(),
            tuple(sorted((k, float(v)) for k, v in params.items())),
        )
    except (TypeError, ValueError):  # a parameter that is not a number: no caching
        return _refined_split_window_curve(query, **params)
    curve = _CURVE_CACHE.get(key)
    if curve is None:
        curve = _refined_split_window_curve(query, **params)
        if len(_CURVE_CACHE) >= _CURVE_CACHE_MAX:
            _CURVE_CACHE.clear()
        _CURVE_CACHE[key] = curve
    return curve


@functools.lru_cache(maxsize=64)
def _locating_curve(windows: bool, items: tuple[tuple[str, Any], ...]) -> SplitWindowCurve:
    """The locating curve of :func:`_refined_split_window_curve` (it does not depend on the
    query), cached: a calibration's full accounting at a point its locating pass visited reuses
    it."""
    return SplitWindowCurve(
        lambdas=LAMBDA_GRID if windows else np.zeros(0),
        orders=PROXY_ORDERS,
        direction="mixture-first",
        **dict(items),
    )


def _refined_split_window_curve(query: Query, **params: Any) -> SplitWindowCurve:
    """A :class:`SplitWindowCurve` whose S_alpha table is concentrated where it matters, with a
    bounded number of (slow) exact evaluations of S_alpha:

    1. locating pass (not a bound): S_alpha replaced by the mixture-first direction at integer
       orders (closed form), the whole split grid; it gives the order a* of the best conversion and
       the split lambda*;
    2. the returned curve: exact S_alpha (both directions) for the full noise and for lambda* and
       its grid neighbours, at 13 orders spanning (a* - 1)/2 .. 2 (a* - 1) plus the report orders.
       It is a valid bound at every alpha (see :class:`SGMTable` outside the table).

    Shortcuts (issue 11; each only ever raises the curve or leaves it unchanged, see the tests in
    ``tests/bounds/test_pabi_speed.py``): the locating curve is cached per parameter set
    (:func:`_locating_curve`); where its windows lose to composition by
    :data:`COMPOSITION_DOMINANCE` over the whole table, the split rows are left out
    (:func:`_composition_dominates`); where the exact optimum's split is at the edge of the three,
    the next grid value is added (:func:`_widen_split_at_edge`, which only lowers the curve).
    """
    report = np.asarray(query.report_orders, dtype=float)
    windows = params.get("n_max", 0) >= 1
    if (
        params.get("q", 0.0) >= 1.0
    ):  # plain Gaussian: no S_alpha evaluations, use the fine split grid
        return SplitWindowCurve(
            lambdas=LAMBDA_FINE_Q1 if windows else np.zeros(0), orders=report, **params
        )
    proxy = _locating_curve(windows, tuple(sorted(params.items())))
    if locating():  # a calibration's locating pass: the proxy is all it needs (never reported)
        return proxy
    a_star = _best_order(proxy, query)
    _, choice = proxy.evaluate(a_star)
    fine = 1.0 + (a_star - 1.0) * FINE_FACTORS
    orders = np.concatenate([fine, report])
    lambdas = _neighbour_lambdas(choice.get("sigma1_share")) if windows else np.zeros(0)
    if windows and _composition_dominates(proxy, orders):
        # the split rows cannot matter near the optimum: dropping them only raises the curve
        # elsewhere (a valid bound at every order), and saves 3/4 of the exact evaluations
        lambdas = np.zeros(0)
    curve = SplitWindowCurve(lambdas=lambdas, orders=orders, **params)
    if lambdas.size and query.delta is not None:
        curve = _widen_split_at_edge(curve, query.delta, lambdas, orders, params)
    return curve


def _widen_split_at_edge(
    curve: SplitWindowCurve,
    delta: float,
    lambdas: np.ndarray,
    orders: np.ndarray,
    params: dict[str, Any],
) -> SplitWindowCurve:
    """The exact curve's optimal split at its best conversion order, if it is the smallest or
    largest of the curve's split values, may be beaten by the next grid value beyond (the locating
    curve's split choice is only a guide): add that value and convert again, until the optimal
    split is interior (or the grid's end).  More splits only lower the curve (a minimum over more
    valid bounds).  The last conversion is kept on the curve (``rdp_to_epsilon`` reuses it)."""
    for _ in range(LAMBDA_GRID.size):
        conv = rdp_to_epsilon(curve, delta)
        if not math.isfinite(conv.order):
            break
        lam = curve.evaluate(conv.order)[1].get("sigma1_share")
        extra = _grid_beyond(lambdas, lam)
        if extra is None:
            curve.__dict__["_conversion_memo"] = {float(delta): conv}
            break
        lambdas = np.sort(np.append(lambdas, extra))
        curve = SplitWindowCurve(lambdas=lambdas, orders=orders, **params)
    return curve


def _grid_beyond(lambdas: np.ndarray, lam: float | None) -> float | None:
    """The :data:`LAMBDA_GRID` value next to ``lam`` outside ``lambdas`` when ``lam`` is their
    smallest (the value below) or largest (above); None when interior or at the grid's end."""
    if lam is None or lambdas.size < 2:
        return None
    k = int(np.argmin(np.abs(LAMBDA_GRID - lam)))
    if lam <= lambdas.min() and k > 0 and LAMBDA_GRID[k - 1] not in lambdas:
        return float(LAMBDA_GRID[k - 1])
    if lam >= lambdas.max() and k < LAMBDA_GRID.size - 1 and LAMBDA_GRID[k + 1] not in lambdas:
        return float(LAMBDA_GRID[k + 1])
    return None


#: the locating curve's windows must exceed its composition branch by this factor over the whole
#: exact table before the exact curve leaves the split rows out (see
#: :func:`_composition_dominates`)
COMPOSITION_DOMINANCE = 4.0


def _composition_dominates(proxy: SplitWindowCurve, alphas: np.ndarray) -> bool:
    """Whether, on the locating curve, every noise split's best window exceeds the composition
    branch T Delta(alpha, sigma) by :data:`COMPOSITION_DOMINANCE` at every order of ``alphas``
    (the exact table: the span around the located order and the report orders, so that the
    reported curve keeps its values).  Then the exact curve is built with
    the composition row only: it is never below the full curve's value at any order (fewer terms
    in a minimum), and equal to it wherever composition wins, which the factor makes certain
    around the optimum (the locating and exact per-step terms differ by far less than 4x there;
    the tests compare with the full curve)."""
    a = np.asarray(alphas, dtype=float)
    d = proxy._table.upper_many(a)
    if proxy.q_linear:
        d = np.maximum(
            d, proxy.q * a[None, :] * (proxy.L / proxy.b) ** 2 / (2.0 * proxy._s2[:, None] ** 2)
        )
    comp = d[0] * proxy.T
    K = a[None, :] * proxy.D**2 / (2.0 * proxy.eta**2 * proxy.lambdas[:, None] * proxy.sigma**2)
    vals, _ = best_window(d[1:], K, proxy.c, proxy.n_max)
    return bool(np.all(np.isfinite(comp)) and np.all(vals >= COMPOSITION_DOMINANCE * comp))


def split_window_rdp(
    alpha: float,
    *,
    q: float,
    b: int,
    L: float,
    sigma: float,
    eta: float,
    D: float,
    T: int,
    c: float = 1.0,
    lambdas: np.ndarray | None = None,
) -> float:
    """(B.2) (c = 1) or (B.3) (c < 1) at one order alpha (canonical units), S_alpha exact at alpha,
    the split over :data:`LAMBDA_GRID` (or ``lambdas``)."""
    curve = SplitWindowCurve(
        q=q,
        b=b,
        L=L,
        sigma=sigma,
        eta=eta,
        D=D,
        c=c,
        T=T,
        n_max=T - 1,
        lambdas=LAMBDA_GRID if lambdas is None else lambdas,
        orders=[alpha],
    )
    return curve(alpha)


# ============================================================================ (5.7)
# step-size schedule
@dataclass
class ScheduleCurve:
    """Eq. (5.7) of AT22 (non-uniform step sizes; contraction c <= 1 used as c = 1):

        eps(alpha) = min{ T S_alpha(q, b sigma/L),
                          min_lambda min_{j in 2..T} j Q + (j - 1) alpha D^2 / (2 lambda sigma^2
                              (sum_{t=T-j+1}^{T-1} eta_t)^2) }

    with j = T - tau and Q = S_alpha(q, b sigma sqrt(1-lambda)/L).  For given (Q, K) the
    minimum over j of j Q + K r_j is attained at a vertex of the lower convex hull of {(j,
    r_j)}, computed once.
    """

    q: float
    b: int
    L: float
    sigma: float
    D: float
    schedule: Sequence[float]
    lambdas: np.ndarray
    orders: Sequence[float] | np.ndarray
    direction: str = "max"

    def __post_init__(self) -> None:
        etas = np.asarray(self.schedule, dtype=float)
        self.T = len(etas)
        rev = etas[::-1]  # rev[0] = eta_{T-1}
        csum = np.concatenate([[0.0], np.cumsum(rev)])  # csum[k] = sum of the last k step sizes
        j = np.arange(2, self.T + 1, dtype=float)
        S = csum[(j - 1).astype(int)]  # sum_{t=T-j+1}^{T-1} eta_t: j - 1 terms
        r = (j - 1.0) / S**2
        if len(j):
            idx = lower_hull_indices(j, r)
            self._j, self._r = j[idx], r[idx]
        else:
            self._j, self._r = np.zeros(0), np.zeros(0)
        self.lambdas = np.asarray(self.lambdas, dtype=float)
        s2 = self.sigma * np.sqrt(np.concatenate([[1.0], 1.0 - self.lambdas]))
        self._table = SGMTable(self.q, self.b * s2 / self.L, self.orders, self.direction)

    def evaluate(self, alpha: float) -> tuple[float, dict[str, Any]]:
        d = self._table.upper(alpha)
        comp = self.T * float(d[0])
        if len(self._j) == 0 or self.lambdas.size == 0:
            return comp, {"branch": "composition (tau = 0)"}
        K = alpha * self.D**2 / (2.0 * self.lambdas * self.sigma**2)
        vals = self._j[None, :] * d[1:, None] + K[:, None] * self._r[None, :]
        k = np.argmin(vals, axis=1)
        v = vals[np.arange(len(k)), k]
        i = int(np.argmin(v))
        if comp <= v[i]:
            return comp, {"branch": "composition (tau = 0)"}
        return float(v[i]), {
            "branch": "eq. 5.7 window",
            "sigma1_share": float(self.lambdas[i]),
            "window": int(self._j[k[i]]),
        }

    def __call__(self, alpha: float) -> float:
        return self.evaluate(alpha)[0]


def refined_schedule_curve(query: Query, **params: Any) -> ScheduleCurve:
    """A :class:`ScheduleCurve` with the two passes of :func:`refined_split_window_curve`."""
    report = np.asarray(query.report_orders, dtype=float)
    if params.get("q", 0.0) >= 1.0:
        return ScheduleCurve(lambdas=LAMBDA_GRID, orders=report, **params)
    proxy = ScheduleCurve(
        lambdas=LAMBDA_GRID, orders=PROXY_ORDERS, direction="mixture-first", **params
    )
    if locating():  # a calibration's locating pass (never reported)
        return proxy
    a_star = _best_order(proxy, query)
    _, choice = proxy.evaluate(a_star)
    orders = np.concatenate([1.0 + (a_star - 1.0) * FINE_FACTORS, report])
    return ScheduleCurve(
        lambdas=_neighbour_lambdas(choice.get("sigma1_share")), orders=orders, **params
    )


def schedule_rdp(
    alpha: float, *, q: float, b: int, L: float, sigma: float, D: float, schedule: Sequence[float]
) -> float:
    """Eq. (5.7) at one order alpha (canonical units), S_alpha exact at alpha."""
    return ScheduleCurve(
        q=q, b=b, L=L, sigma=sigma, D=D, schedule=schedule, lambdas=LAMBDA_GRID, orders=[alpha]
    )(alpha)


# ============================================================================ Thm
# 5.8: cyclic batches
def _cgd_window_min(g: np.ndarray, n_max: np.ndarray, Dt: float, s: float, l: int) -> np.ndarray:
    """min over windows N in [1, n_max] (per position g) of the optimal sum of squared shifts.

    The window covers the last N steps; the differing example is used at the steps N - g + 1 - j l
    (j >= 0) of the window, each contributing a shift s; the distance at the window start is at most
    Dt.  Prop. 3.2 needs a_t with partial sums A_t <= Dt + (shifts so far) and A_N = Dt + (all
    shifts); the minimal sum a_t^2 is the taut string under that staircase ceiling.  Because the
    ceiling's lower corners are collinear (slope s/l) and Dt >= s, the taut string is either the
    straight line (when feasible) or the line to the corner just before the last use followed by the
    last rise s over g steps:

        P(N) = (Dt + s m)^2 / W + s^2 / g,   W = N - g, m = floor(W / l)      (two segments)
        direct(N) = (Dt + s (m + 1))^2 / N   feasible iff (Dt + s(m+1))/N <= (Dt + s m)/W

    plus the windows without a use (N < g: Dt^2/N) and N = g ((Dt + s)^2 / g).  Candidates are the
    block ends W = m l + l - 1 around the stationary points of both expressions, and the range end.
    """
    g = np.asarray(g, dtype=float)
    n_max = np.asarray(n_max, dtype=float)
    best = np.full(g.shape, np.inf)
    # (a) no use inside the window: N <= g - 1
    Na = np.minimum(g - 1.0, n_max)
    best = np.where(Na >= 1, np.minimum(best, Dt**2 / np.maximum(Na, 1.0)), best)
    # (b) N = g: the only use at the first step of the window
    best = np.where(g <= n_max, np.minimum(best, (Dt + s) ** 2 / g), best)
    # (c) W = N - g >= 1
    w_max = n_max - g
    m_max = np.floor(np.maximum(w_max, 0.0) / l)
    m_p = Dt / s - 2.0 * (l - 1.0) / l
    m_d = Dt / s + 1.0 - 2.0 * (l - 1.0 + g) / l
    cands = [np.zeros_like(g), m_max]
    for base in (np.full(g.shape, m_p), m_d):
        for off in (-1.0, 0.0, 1.0, 2.0):
            cands.append(np.floor(base) + off)
    for m in cands:
        m = np.clip(m, 0.0, m_max)
        W = np.minimum(m * l + l - 1.0, w_max)
        ok = (W >= 1.0) & (W >= m * l)
        Wsafe = np.where(ok, W, 1.0)
        N = Wsafe + g
        P = (Dt + s * m) ** 2 / Wsafe + s * s / g
        direct = (Dt + s * (m + 1.0)) ** 2 / N
        feasible = (Dt + s * (m + 1.0)) * Wsafe <= (Dt + s * m) * N
        cost = np.where(feasible, np.minimum(P, direct), P)
        best = np.where(ok, np.minimum(best, cost), best)
    return best


def _cgd_cost0(g: np.ndarray, T: np.ndarray | float, s: float, l: int) -> np.ndarray:
    """tau = 0 (Prop. 2.17, both runs start at the same point): the differing example is used at
    steps T - g + 1 - j l >= 1; the taut string under the ceiling (uses so far) * s is flat until
    the first use, rises with slope s/l through the corners and by s over the last g steps:
    (u - 1) s^2 / l + s^2 / g, u = number of uses (0 if none)."""
    g = np.asarray(g, dtype=float)
    T = np.asarray(T, dtype=float)
    u = np.where(T >= g, np.floor((T - g) / l) + 1.0, 0.0)
    return np.where(u >= 1, (u - 1.0) * s * s / l + s * s / g, 0.0)


def cgd_shift_cost(*, D: float, s: float, l: int, T: int) -> tuple[float, dict[str, Any]]:
    """max over the position of the differing example of min over tau of the minimal sum a_t^2
    (Prop. 3.2 for tau >= 1 with distance D~ = D + s; Prop. 2.17 for tau = 0), for Noisy-CGD with
    per-use shift ``s`` (= eta L / b_min) and ``l`` batches per epoch.

    The RDP is ``alpha * cost / (2 eta^2 sigma^2)``.  D~ = D + s follows the proof of Thm 5.8 (Prop
    3.2 itself needs only D; the larger value is the conservative reading and guarantees D~ >= s,
    which makes the taut string's shape the one computed by :func:`_cgd_window_min`).
    """
    Dt = D + s
    G = min(l, T)
    g = np.arange(1, G + 1, dtype=float)
    c0 = _cgd_cost0(g, T, s, l)
    win = _cgd_window_min(g, np.full(g.shape, T - 1.0), Dt, s, l)
    per_g = np.minimum(c0, win)
    i = int(np.argmax(per_g))
    return float(per_g[i]), {
        "worst_position_from_end": int(g[i]),
        "branch": "composition (Prop. 2.17)"
        if c0[i] <= win[i]
        else "diameter-aware PABI (Prop. 3.2)",
    }


def cgd_rho(
    *, D: float, eta: float, sigma: float, L: float, b_min: int, l: int, T: int
) -> tuple[float, dict[str, Any]]:
    """Noisy-CGD (derived Thm 5.8): eps(alpha) = rho alpha with rho = cost / (2 eta^2 sigma^2)."""
    s = eta * L / b_min
    cost, det = cgd_shift_cost(D=D, s=s, l=l, T=T)
    return cost / (2.0 * eta**2 * sigma**2), det


def cgd_rho_limit(*, D: float, eta: float, sigma: float, L: float, b_min: int, l: int) -> float:
    """sup over T of :func:`cgd_rho` (other parameters fixed).

    For each position g the tau = 0 cost f(T) is non-decreasing in T and the best window h(T) =
    min_{N <= T-1} is non-increasing, so sup_T min(f, h) = max(h(T0), f(T0 - 1)) at the first T0
    with f(T0) >= h(T0) (found by bisection, vectorised over g).
    """
    s = eta * L / b_min
    Dt = D + s
    g = np.arange(1, l + 1, dtype=float)
    # an upper bound on h for large T: the window value with unlimited length
    h_inf = _cgd_window_min(g, np.full(g.shape, 1e15), Dt, s, l)
    h_up = _cgd_window_min(g, g + l * (np.ceil(Dt / s) + 2.0), Dt, s, l)
    t_hi = g + l * (np.ceil(np.maximum(h_up, h_inf) * l / (s * s)) + 2.0)
    lo = g.copy()  # f(g) = s^2/g; h(g) = window with N <= g - 1
    hi = t_hi.copy()
    for _ in range(200):
        if np.all(hi - lo <= 1):
            break
        mid = np.floor((lo + hi) / 2.0)
        f = _cgd_cost0(g, mid, s, l)
        h = _cgd_window_min(g, mid - 1.0, Dt, s, l)
        up = f >= h
        hi = np.where(up & (hi - lo > 1), mid, hi)
        lo = np.where(~up & (hi - lo > 1), mid, lo)
    cand = []
    for T0 in (lo, hi):
        f0 = _cgd_cost0(g, T0, s, l)
        h0 = _cgd_window_min(g, T0 - 1.0, Dt, s, l)
        cand.append(np.minimum(f0, h0))
        cand.append(
            np.minimum(_cgd_cost0(g, T0 - 1.0, s, l), _cgd_window_min(g, T0 - 2.0, Dt, s, l))
        )
        cand.append(np.where(f0 >= h0, h0, f0))
    sup_g = np.maximum.reduce(cand)
    # for T >= hi the value is <= h(hi) (already included); for T <= lo it is <= f(lo) (included)
    return float(np.max(sup_g)) / (2.0 * eta**2 * sigma**2)


# ============================================================================ applicability
_ASSUME_LIPSCHITZ = (
    "per-example losses convex and M-smooth with every per-example gradient of norm <= L/2 "
    "(replace-one; <= L under add/remove), i.e. L_AT-Lipschitz with L = 2 L_AT: the "
    "sampled-Gaussian term needs bounded gradients, not only a bounded difference between "
    "neighbours; any clipping must be inactive (a clipped gradient step need not be non-expansive)"
)


def _require_common(run: Run) -> tuple[float, float]:
    """(D, c) for a convex, smooth, bounded run, else NotApplicable."""
    if run.D is None:
        raise NotApplicable("pabi needs a diameter D (projection onto a bounded convex set)")
    if run.c is None:
        raise NotApplicable(
            f"pabi needs non-expansive gradient steps (convex, lr <= 2/M): {run.contraction_note}"
        )
    if run.M is None and not run.contraction_note.startswith("declared"):
        raise NotApplicable(
            "pabi needs smoothness M (lr <= 2/M makes a gradient step non-expansive)"
        )
    # c = 0 (e.g. lr = 1/M with m = M) is evaluated as the tiny c = 1e-300, which keeps log(c)
    # finite: a c-contraction is also a c'-contraction for every c' >= c, so the bound stays valid.
    return float(run.D), max(float(run.c), 1e-300)


def _result(
    run: Run,
    query: Query,
    *,
    theorem: str,
    rdp: Callable[[float], float],
    details: dict[str, Any],
    assumptions: Sequence[str],
    linear_rho: float | None = None,
) -> Result:
    return rdp_result(
        "pabi",
        theorem=theorem,
        reference=REFERENCE + ", " + theorem,
        rdp=rdp,
        query=query,
        run=run,
        details=details,
        assumptions=tuple(assumptions),
        linear_rho=linear_rho,
    )


# ============================================================================ registered bounds
@register(
    "pabi",
    theorem="(B.1)/(B.2)/(B.3) full batch",
    reference=REFERENCE + ", App. B",
    algorithms=("gd",),
)
def pabi_gd(run: Run, query: Query) -> Result:
    """Full-batch noisy GD with projection (AT22 App. B): the smallest of (B.1), and (B.2)/(B.3)
    with b = n (the sampled Gaussian with q = 1 is the plain Gaussian), all of the form rho * alpha.
    With a step-size schedule: eq. (5.7) with q = 1.
    """
    D, c = _require_common(run)
    L, n, sigma, T = run.L, run.n, run.sigma, run.T
    assumptions = [
        _ASSUME_LIPSCHITZ,
        f"projection onto a convex set of diameter D={D:g}",
        "full batch (b = n)",
    ]
    if not run.constant_lr:
        curve = ScheduleCurve(
            q=1.0,
            b=n,
            L=L,
            sigma=sigma,
            D=D,
            schedule=run.lr_schedule,
            lambdas=LAMBDA_GRID,
            orders=(),
        )
        val, det = curve.evaluate(2.0)
        rho = (
            val / 2.0
        )  # q = 1: every term is linear in alpha, the optimiser does not depend on alpha
        return _result(
            run,
            query,
            theorem="eq. (5.7) (non-uniform step sizes, full batch)",
            rdp=lambda a: rho * a,
            details={"rho": rho, **det},
            linear_rho=rho,
            assumptions=assumptions + ["every lr_t <= 2/M"],
        )
    eta = run.eta
    rho1, det1 = b1_rho(D=D, eta=eta, sigma=sigma, L=L, n=n, T=T)
    lim1 = b1_rho_limit(D=D, eta=eta, sigma=sigma, L=L, n=n)
    # (B.2)/(B.3) with q = 1: linear in alpha, so the split optimisation is done once (at alpha = 2)
    cs = c if c < 1 else 1.0
    split_curve = functools.partial(
        SplitWindowCurve,
        q=1.0,
        b=n,
        L=L,
        sigma=sigma,
        eta=eta,
        D=D,
        c=cs,
        lambdas=LAMBDA_FINE_Q1,
        orders=(),
    )
    val2, det2 = split_curve(T=T, n_max=T - 1).evaluate(2.0)
    rho2 = val2 / 2.0
    lim2 = split_curve(T=math.inf, n_max=math.inf)(2.0) / 2.0
    which = "B.3" if cs < 1 else "B.2"
    if rho1 <= rho2:
        rho, theorem, det = rho1, "(B.1) full batch", dict(det1)
    else:
        rho, theorem, det = rho2, f"({which}) with b = n (noise split)", dict(det2)
    rho_lim = min(lim1, lim2)
    details: dict[str, Any] = {
        "rho": rho,
        "rho_limit": rho_lim,
        "rho_B1": rho1,
        f"rho_{which}": rho2,
        "contraction": c,
        **det,
    }
    details.update(rdp_epsilon_limit(lambda a: rho_lim * a, query))
    return _result(
        run,
        query,
        theorem=theorem,
        rdp=lambda a: rho * a,
        details=details,
        linear_rho=rho,
        assumptions=assumptions + [f"lr={eta:g} <= 2/M (contraction c={c:g})"],
    )


@register(
    "pabi",
    theorem="(B.2)/(B.3)/(5.7) Noisy-SGD",
    reference=REFERENCE + ", App. B, eq. 5.7",
    algorithms=("sgd",),
)
def pabi_sgd(run: Run, query: Query) -> Result:
    """Noisy-SGD with uniformly random size-b batches (AT22 Thm 3.1 / 5.1 in the non-asymptotic
    forms (B.2) (convex) and (B.3) (c < 1); eq. (5.7) for a step-size schedule).  The noise split
    and the window are optimised per order alpha inside the RDP curve
    (:func:`refined_split_window_curve`)."""
    if run.sampling_scheme != "uniform":
        raise NotApplicable(
            "Thm B.2 needs uniform sampling (AT22 draw a uniformly random batch of size b each "
            f"step); got sampling={run.sampling_scheme}"
        )
    if run.adjacency != "replace":
        raise NotApplicable(
            "pabi for sgd is certified under replace-one adjacency only: with fixed-size batches "
            "an added/removed example swaps out another one, so the per-step shift is not halved"
        )
    if run.clip is None and run.p < 1:
        raise NotApplicable(GRADIENT_BOUND_REASON)
    D, c = _require_common(run)
    q, b, L, sigma, T = run.p, run.b, run.L, run.sigma, run.T
    assumptions = [
        _ASSUME_LIPSCHITZ,
        f"projection onto a convex set of diameter D={D:g}",
        f"uniformly random batches of size b={b} drawn independently each step (q = b/n = {q:g})",
    ]
    if not run.constant_lr:
        curve = refined_schedule_curve(
            query, q=q, b=b, L=L, sigma=sigma, D=D, schedule=run.lr_schedule
        )
        return _with_choice(
            _result(
                run,
                query,
                theorem="eq. (5.7) (non-uniform step sizes)",
                rdp=curve,
                details={"sampling_rate": q},
                assumptions=assumptions + ["every lr_t <= 2/M"],
            ),
            curve,
        )
    eta = run.eta
    cs = c if c < 1 else 1.0
    which = "(B.3) strongly convex" if cs < 1 else "(B.2) convex"
    params = {"q": q, "b": b, "L": L, "sigma": sigma, "eta": eta, "D": D, "c": cs, "T": T}
    window_curve = refined_split_window_curve(query, n_max=T - 1, **params)
    res = _result(
        run,
        query,
        theorem=which,
        rdp=window_curve,
        details={"sampling_rate": q, "contraction": c},
        assumptions=assumptions + [f"lr={eta:g} <= 2/M (contraction c={c:g})"],
    )
    res = _with_choice(res, window_curve)
    if query.delta is not None and not locating():  # a locating estimate needs no limit
        lim = refined_split_window_curve(query, n_max=math.inf, **{**params, "T": math.inf})
        memo = lim.__dict__.setdefault("_limit_details", {})  # the curve is cached per query
        if query.delta not in memo:
            memo[query.delta] = rdp_epsilon_limit(lim, query)
        res = dataclasses.replace(res, details={**res.details, **memo[query.delta]})
    return res


def _with_choice(res: Result, curve: Any) -> Result:
    """Add the optimiser's choices (split, window) at the conversion's order to the details."""
    order = res.details.get("order")
    if order is None or not math.isfinite(float(order)):
        return res
    _, choice = curve.evaluate(float(order))
    return dataclasses.replace(res, details={**res.details, **choice})


@register(
    "pabi",
    theorem="Thm 5.8 Noisy-CGD (derived from Prop. 3.2)",
    reference=REFERENCE + ", Thm 5.8, Prop. 3.2",
    algorithms=("cgd",),
)
def pabi_cgd(run: Run, query: Query) -> Result:
    """Noisy-CGD (cyclic batches): the exact non-asymptotic form of Thm 5.8's proof, see
    :func:`cgd_shift_cost`.  Convex case (c = 1 is used even when c < 1: valid, not tight)."""
    if run.adjacency != "replace":
        raise NotApplicable(
            "pabi for cgd is certified under replace-one adjacency only (removing an example "
            "re-partitions the cyclic batches)"
        )
    D, _c = _require_common(run)
    if not run.constant_lr:
        raise NotApplicable(
            "lr schedule with cgd: eq. 5.7 is stated for Noisy-SGD; not derived for cyclic batches"
        )
    eta, sigma, L, b_min, l, T = run.eta, run.sigma, run.L, run.b_min, int(run.l), run.T
    rho, det = cgd_rho(D=D, eta=eta, sigma=sigma, L=L, b_min=b_min, l=l, T=T)
    rho_lim = cgd_rho_limit(D=D, eta=eta, sigma=sigma, L=L, b_min=b_min, l=l)
    rho_lim = max(rho_lim, rho)
    details: dict[str, Any] = {
        "rho": rho,
        "rho_limit": rho_lim,
        "per_use_shift": eta * L / b_min,
        **det,
    }
    details.update(rdp_epsilon_limit(lambda a: rho_lim * a, query))
    return _result(
        run,
        query,
        theorem="Thm 5.8 (Noisy-CGD; exact form of Prop. 3.2 with the cyclic shift pattern)",
        rdp=lambda a: rho * a,
        details=details,
        linear_rho=rho,
        assumptions=[
            _ASSUME_LIPSCHITZ,
            f"projection onto a convex set of diameter D={D:g}",
            f"cyclic batches in a fixed order, smallest batch b_min={b_min}",
            f"lr={eta:g} <= 2/M",
        ],
    )
