"""Exact reference mechanisms ("physical limits"; auditing-notes 3.1-3.3).

A trusted accountant must never report less privacy loss than these curves, because each one is
the EXACT privacy of the last iterate for a specific admissible instance:

* NoisyGD / NoisyCGD on quadratic losses: the iterates are Gaussian with a world-independent
  covariance, so the tradeoff curve is exactly G_mu with mu = ||Sigma^{-1/2} (mean difference)||.
  :func:`gaussian_propagation_mu` does the brute-force mean/covariance recursion in d dimensions;
  :func:`gaussian_quadratic_mu` and :func:`cgd_quadratic_mu` are the 1-D worst cases.
* NoisyGD on a linear loss without projection: mu_T = mu_0 sqrt(T) (no amplification by hiding the
  iterates): :func:`linear_unconstrained_mu`.
* NoisySGD on a linear loss (Steinke et al. 2025's last-iterate heuristic, exact for this loss):
  Binomial(T, p) shifts + N(0, s^2 T) against N(0, s^2 T): :func:`linear_sgd_curve`.
* The 1-D projected random walk (Altschuler-Talwar lower-bound construction; convex, bounded
  domain): a Markov chain on ``bins`` interior cells plus two boundary atoms
  (:func:`projected_walk_curve`).  This one is a grid approximation (cell midpoints), not a
  certified bound; bins=500 and bins=1000 agree to about 1e-3 in epsilon.

Units follow auditing-notes section 3: ``Delta`` is the sensitivity of the AVERAGED gradient
(L/n for full batch, L/b for a batch), ``sigma`` the noise std on the averaged gradient, so one
step moves the mean difference by eta*Delta and adds noise of std eta*sigma.  mu_0 = Delta/sigma.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, special

from lastiterate.audit.stats import _gdp_delta, _gdp_epsilon

__all__ = [
    "DiscreteCurve",
    "MixtureCurve",
    "ProjectedWalkCurve",
    "cgd_quadratic_mu",
    "composition_epsilon",
    "gaussian_propagation_mu",
    "gaussian_quadratic_mu",
    "linear_sgd_curve",
    "linear_sgd_heuristic_curve",
    "linear_unconstrained_mu",
    "projected_walk_curve",
    "projected_walk_schedule_curve",
    "walk_bins_needed",
]


# ---------------------------------------------------------------------- Gaussian propagation
def gaussian_propagation_mu(
    A: np.ndarray | Sequence[np.ndarray],
    kicks: np.ndarray,
    noise_std: float | Sequence[float] | np.ndarray,
    *,
    initial_cov: np.ndarray | None = None,
) -> float:
    """Exact GDP parameter of x_T for the linear-Gaussian recursion, by brute force.

        x_{t+1} = A_t x_t + k_t + (world-independent terms) + N(0, s_t^2 I),  x_0 equal in both
        worlds,

    where ``kicks[t]`` (shape (T, d)) is the difference of the deterministic drifts of the two
    worlds at step t.  Returns sqrt(d_T^T Sigma_T^{-1} d_T), with d the mean difference and Sigma
    the (common) covariance: the two laws are N(0, Sigma) vs N(d, Sigma), whose tradeoff is exactly
    G_mu.
    ``A`` is one d x d matrix or a sequence of T of them; ``noise_std`` a scalar or T values.
    """
    kicks = np.atleast_2d(np.asarray(kicks, dtype=float))
    T, d = kicks.shape
    mats = (
        [np.asarray(A, dtype=float)] * T
        if np.ndim(A) == 2
        else [np.asarray(a, dtype=float) for a in A]
    )
    if len(mats) != T:
        raise ValueError("need one matrix per step")
    s = np.broadcast_to(np.asarray(noise_std, dtype=float), (T,))
    mean = np.zeros(d)
    cov = np.zeros((d, d)) if initial_cov is None else np.array(initial_cov, dtype=float)
    for t in range(T):
        mean = mats[t] @ mean + kicks[t]
        cov = mats[t] @ cov @ mats[t].T + (s[t] ** 2) * np.eye(d)
    sol = np.linalg.solve(cov, mean)
    return float(math.sqrt(max(float(mean @ sol), 0.0)))


def gaussian_quadratic_mu(
    T: int,
    eta: float | Sequence[float],
    m: float,
    sigma: float,
    Delta: float,
    *,
    M: float | None = None,
) -> float:
    """Exact mu of NoisyGD's last iterate on the 1-D quadratic with curvature kappa (auditing-notes
    3.1).

    kappa = m, or, when ``M`` is given, whichever of m, M has the larger |1 - eta kappa| (the
    extremal curvature).  Mean/variance recursion: d <- c d + eta Delta, v <- c^2 v + (eta sigma)^2,
    c = 1 - eta kappa; mu = d_T / sqrt(v_T).  ``eta`` may be a per-step schedule.
    """
    etas = _schedule(eta, T)
    kappa = m
    if M is not None:
        kappa = max((m, M), key=lambda k: abs(1 - etas.max() * k))
    dmean, var = 0.0, 0.0
    for e in etas:
        c = 1.0 - e * kappa
        dmean = c * dmean + e * Delta
        var = c * c * var + (e * sigma) ** 2
    return abs(dmean) / math.sqrt(var)


def cgd_quadratic_mu(
    epochs: int,
    l: int,
    eta: float,
    m: float,
    sigma: float,
    Delta_b: float,
    *,
    position: int | None = None,
    steps: int | None = None,
) -> float:
    """Exact mu of NoisyCGD's last iterate on the 1-D quadratic with curvature m.

    l batches per epoch, the differing example in batch ``position`` (0-based; default the last,
    l - 1); the kick eta*Delta_b (Delta_b = L/b) enters only in the steps t with t mod l ==
    position.
    ``steps`` defaults to epochs*l (a partial last epoch is allowed).
    """
    T = epochs * l if steps is None else steps
    pos = l - 1 if position is None else position
    if not (0 <= pos < l):
        raise ValueError(f"position={pos} must be in [0, {l})")
    c = 1.0 - eta * m
    dmean, var = 0.0, 0.0
    for t in range(T):
        dmean = c * dmean + (eta * Delta_b if t % l == pos else 0.0)
        var = c * c * var + (eta * sigma) ** 2
    return abs(dmean) / math.sqrt(var)


def _reference_gd_mu(T: int, c: float, mu0: float) -> float:
    """Bok-Su-Altschuler Thm 4.2 (docs/theorems.md 2.2): mu0 sqrt((1+c)/(1-c) (1-c^T)/(1+c^T))."""
    if c == 1.0:
        return mu0 * math.sqrt(T)
    return mu0 * math.sqrt((1 + c) / (1 - c) * (1 - c**T) / (1 + c**T))


def _reference_cgd_mu(E: int, l: int, c: float, mu0_b: float) -> float:
    """Bok-Su-Altschuler Thm 4.5 (docs/theorems.md 2.3): NoisyCGD, mu0_b = L/(b sigma)."""
    return mu0_b * math.sqrt(
        1
        + c ** (2 * l - 2)
        * (1 - c * c)
        / (1 - c**l) ** 2
        * (1 - c ** (l * (E - 1)))
        / (1 + c ** (l * (E - 1)))
    )


def linear_unconstrained_mu(T: int, Delta: float, sigma: float) -> float:
    """Linear loss, no projection: x_T ~ N(eta T Delta, (eta sigma)^2 T) vs N(0, .): mu_0
    sqrt(T)."""
    return Delta / sigma * math.sqrt(T)


def _schedule(eta: float | Sequence[float], T: int) -> np.ndarray:
    if np.ndim(eta) == 0:
        return np.full(T, float(eta))  # type: ignore[arg-type]
    etas = np.asarray(eta, dtype=float)
    if etas.size != T:
        raise ValueError(f"schedule has {etas.size} values for T={T}")
    return etas


def _invert_profile(
    delta_of: Callable[[float], float], delta: float, *, xtol: float, rtol: float
) -> float:
    """Exact reference epsilon(delta) of a non-increasing profile: expanding bracket (inf past 1e4),
    then brentq.  Deliberately independent of lastiterate.notions (the audit checks those
    numerics)."""
    if not (0 < delta < 1):
        raise ValueError(f"delta={delta!r} must be in (0, 1)")
    if delta_of(0.0) <= delta:
        return 0.0
    hi = 1.0
    while delta_of(hi) > delta:
        hi *= 2
        if hi > 1e4:
            return math.inf
    return float(optimize.brentq(lambda e: delta_of(e) - delta, 0.0, hi, xtol=xtol, rtol=rtol))


# ---------------------------------------------------------------------- discrete privacy curves
@dataclass(frozen=True)
class DiscreteCurve:
    """The privacy curve of two discrete distributions P (world D) and Q (world D') on one support.

    delta(eps) = max( sum (Q - e^eps P)_+, sum (P - e^eps Q)_+ ) (both hockey-stick directions);
    epsilon(delta) is its inverse by root finding.
    """

    p: np.ndarray
    q: np.ndarray
    support: np.ndarray | None = None

    def delta(self, eps: float) -> float:
        e = math.exp(eps)
        return float(
            max(
                np.maximum(self.q - e * self.p, 0.0).sum(),
                np.maximum(self.p - e * self.q, 0.0).sum(),
            )
        )

    def epsilon(self, delta: float) -> float:
        return _invert_profile(self.delta, delta, xtol=1e-10, rtol=1e-10)

    def tradeoff(self, alpha: Any) -> np.ndarray:
        """T(P, Q)(alpha) via the Neyman-Pearson lemma with randomisation (piecewise linear)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            lr = np.where(self.p > 0, self.q / self.p, np.inf)
        order = np.argsort(-lr)  # reject where Q/P is largest first
        fpr = np.concatenate(([0.0], np.cumsum(self.p[order])))
        tpr = np.concatenate(([0.0], np.cumsum(self.q[order])))
        return 1.0 - np.interp(np.asarray(alpha, dtype=float), fpr, tpr)


@dataclass(frozen=True)
class ProjectedWalkCurve(DiscreteCurve):
    """Exact (grid) privacy curve of the projected walk; index 0 and -1 of the support are the
    atoms."""

    T: int = 0
    D: float = 1.0
    s: float = 1.0
    a: float = 0.0

    @property
    def atom_masses(self) -> dict[str, tuple[float, float]]:
        """(P_D, P_D') of the lower and the upper boundary atom."""
        return {
            "lower": (float(self.p[0]), float(self.q[0])),
            "upper": (float(self.p[-1]), float(self.q[-1])),
        }


def _walk_matrix(centers: np.ndarray, edges: np.ndarray, drift: float, s: float) -> np.ndarray:
    """Transition matrix from every support point x to [lower atom, bins..., upper atom] for
    x -> Proj(x + drift + N(0, s^2))."""
    z = (edges[None, :] - centers[:, None] - drift) / s  # (K, bins+1)
    cdf = special.ndtr(z)
    P = np.empty((centers.size, edges.size + 1))
    P[:, 0] = cdf[:, 0]
    P[:, 1:-1] = np.diff(cdf, axis=1)
    P[:, -1] = special.ndtr(-z[:, -1])
    return P


def _propagate(v: np.ndarray, P: np.ndarray, k: int) -> np.ndarray:
    """v P^k: k vector-matrix products, or repeated squaring when that is cheaper."""
    if k <= 0:
        return v
    K = P.shape[0]
    if k <= 4 * K:  # gemv is much slower per flop than gemm: square only for long walks
        for _ in range(k):
            v = v @ P
        return v
    return v @ np.linalg.matrix_power(P, k)


def _walk_step_from_point(
    x: float, edges: np.ndarray, drift: float, s: float, p_inc: float
) -> np.ndarray:
    row = _walk_matrix(np.array([x]), edges, drift, s)[0]
    if p_inc < 1.0:
        row = p_inc * row + (1 - p_inc) * _walk_matrix(np.array([x]), edges, 0.0, s)[0]
    return row


def _walk_step(
    v: np.ndarray, edges: np.ndarray, drift: float, s: float, p_inc: float
) -> np.ndarray:
    """One step of the grid chain (v over [lower atom, cells..., upper atom]) by convolution:
    from cell midpoints the transition depends only on the cell offset (Toeplitz), O(K^2) per step
    without building the matrix; kick w.p. ``p_inc``."""
    K = edges.size - 1
    h = edges[1] - edges[0]
    lo_edge, hi_edge = edges[0], edges[-1]
    mids = (edges[:-1] + edges[1:]) / 2

    def kernel(dr: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = np.arange(-(K - 1), K)  # target cell - source cell
        w = special.ndtr(((k + 0.5) * h - dr) / s) - special.ndtr(((k - 0.5) * h - dr) / s)
        to_lo = special.ndtr((lo_edge - mids - dr) / s)
        to_hi = special.ndtr(-(hi_edge - mids - dr) / s)
        return w, to_lo, to_hi

    def apply(dr: float) -> np.ndarray:
        w, to_lo, to_hi = kernel(dr)
        cells = v[1:-1]
        out = np.empty_like(v)
        out[1:-1] = np.convolve(cells, w)[K - 1 : 2 * K - 1]
        out[0] = cells @ to_lo
        out[-1] = cells @ to_hi
        atoms = _walk_matrix(np.array([lo_edge, hi_edge]), edges, dr, s)
        out += v[0] * atoms[0] + v[-1] * atoms[1]
        return out

    if p_inc >= 1.0:
        return apply(drift)
    if p_inc <= 0.0 or drift == 0.0:
        return apply(0.0)
    return p_inc * apply(drift) + (1 - p_inc) * apply(0.0)


#: the grid chain is accurate only when one step's noise spans several cells
MIN_CELLS_PER_NOISE_STD = 4.0


def walk_bins_needed(D: float, s_min: float) -> int:
    """The smallest number of cells giving MIN_CELLS_PER_NOISE_STD cells per noise std s_min."""
    return max(2, math.ceil(MIN_CELLS_PER_NOISE_STD * D / s_min))


def _check_resolution(D: float, s_min: float, bins: int) -> None:
    if bins < walk_bins_needed(D, s_min):
        raise ValueError(
            f"bins={bins} is too coarse for noise std {s_min:g} on a domain of diameter {D:g}: "
            f"need >= {walk_bins_needed(D, s_min)} (>= {MIN_CELLS_PER_NOISE_STD:g} cells per noise "
            "std)"
        )


def _propagate_periodic(
    rn: np.ndarray, rk: np.ndarray, Pn: np.ndarray, Pk: np.ndarray, pattern: np.ndarray, T: int
) -> np.ndarray:
    """Law after T steps from x0 when step t uses pattern[t % l] * (kick) + (1 - .) * (no kick)."""
    l = pattern.size
    mats = [w * Pk + (1 - w) * Pn for w in pattern]
    v = pattern[0] * rk + (1 - pattern[0]) * rn  # step 0 from the exact start point
    t = 1
    # finish the first period step by step, then whole periods by powers of the period matrix
    while t < T and t % l:
        v = v @ mats[t % l]
        t += 1
    full = (T - t) // l
    if full:
        period = mats[0]
        for Mx in mats[1:]:
            period = period @ Mx
        v = _propagate(v, period, full) if l == 1 else v @ np.linalg.matrix_power(period, full)
        t += full * l
    while t < T:
        v = v @ mats[t % l]
        t += 1
    return v


def projected_walk_curve(
    D: float,
    s: float,
    a: float,
    T: int,
    bins: int = 500,
    *,
    x0: float = 0.0,
    p_include: float | Sequence[float] | np.ndarray = 1.0,
    a_d: float = 0.0,
) -> ProjectedWalkCurve:
    """Exact (grid) last-iterate privacy curve of the 1-D projected random walk on K = [-D/2, D/2].

        W_{t+1} = Proj_K(W_t + Z_t)            (world D)
        W'_{t+1} = Proj_K(W'_t + Y_t + Z_t)     (world D'),  Z_t ~ N(0, s^2),  W_0 = W'_0 = x0,

    with Y_t = a deterministic (NoisyGD: a = eta L / n, s = eta sigma), or Y_t = a with probability
    ``p_include`` (NoisySGD with sampled batches: a = eta L / b).  ``a_d`` is world D's own drift
    (entering with the same probability; 0 in the AT22 construction).  ``p_include`` may also be a
    PERIODIC schedule (one inclusion probability per step of a period of length l, step t uses entry
    t mod l): NoisyCGD with the differing example in batch j is the 0/1 pattern with a 1 at j.
    The state space is ``bins`` equal
    interior cells (represented by their midpoints) plus the two boundary atoms.  T-step laws are
    computed by vector-matrix products or repeated squaring of the transition matrices.
    """
    if not (D > 0 and s > 0 and a >= 0 and T >= 1 and bins >= 2):
        raise ValueError("need D > 0, s > 0, a >= 0, T >= 1, bins >= 2")
    if not (abs(x0) <= D / 2):
        raise ValueError(f"x0={x0} must lie in [-D/2, D/2]")
    _check_resolution(D, s, bins)
    edges = np.linspace(-D / 2, D / 2, bins + 1)
    mids = (edges[:-1] + edges[1:]) / 2
    support = np.concatenate(([-D / 2], mids, [D / 2]))
    Pn = _walk_matrix(support, edges, 0.0, s)
    P0 = _walk_matrix(support, edges, a_d, s) if a_d else Pn
    P1 = _walk_matrix(support, edges, a, s)
    # the start point's own transition row (exact start, not snapped to a cell)
    rn = _walk_matrix(np.array([x0]), edges, 0.0, s)[0]
    r0 = _walk_matrix(np.array([x0]), edges, a_d, s)[0] if a_d else rn
    r1 = _walk_matrix(np.array([x0]), edges, a, s)[0]
    if np.ndim(p_include) == 0:
        pi = float(p_include)  # type: ignore[arg-type]
        if pi < 1.0:
            P0 = pi * P0 + (1 - pi) * Pn
            P1 = pi * P1 + (1 - pi) * Pn
            r0 = pi * r0 + (1 - pi) * rn
            r1 = pi * r1 + (1 - pi) * rn
        p = _propagate(r0, P0, T - 1)
        q = _propagate(r1, P1, T - 1)
    else:
        pattern = np.asarray(p_include, dtype=float)
        p = _propagate_periodic(rn, r0, Pn, P0, pattern, T)
        q = _propagate_periodic(rn, r1, Pn, P1, pattern, T)
    p = np.maximum(p, 0.0)
    q = np.maximum(q, 0.0)
    return ProjectedWalkCurve(p=p / p.sum(), q=q / q.sum(), support=support, T=T, D=D, s=s, a=a)


def projected_walk_schedule_curve(
    D: float,
    s: Sequence[float] | np.ndarray,
    a: Sequence[float] | np.ndarray,
    bins: int = 500,
    *,
    x0: float = 0.0,
    p_include: float | Sequence[float] | np.ndarray = 1.0,
    a_d: Sequence[float] | np.ndarray | None = None,
) -> ProjectedWalkCurve:
    """The projected walk with per-step noise s_t = eta_t sigma and kicks a_t = eta_t L / b (a
    learning-rate schedule).  ``p_include``: a constant inclusion probability or one per step.
    One O(bins^2) convolution step per iteration (the chain is Toeplitz on the cells)."""
    s_arr = np.asarray(s, dtype=float)
    a_arr = np.asarray(a, dtype=float)
    T = s_arr.size
    if a_arr.size != T or T < 1:
        raise ValueError("s and a need one value per step")
    _check_resolution(D, float(s_arr.min()), bins)
    ad = np.zeros(T) if a_d is None else np.asarray(a_d, dtype=float)
    pin = np.broadcast_to(np.asarray(p_include, dtype=float), (T,))
    edges = np.linspace(-D / 2, D / 2, bins + 1)
    support = np.concatenate(([-D / 2], (edges[:-1] + edges[1:]) / 2, [D / 2]))
    p = _walk_step_from_point(x0, edges, ad[0], s_arr[0], pin[0])
    q = _walk_step_from_point(x0, edges, a_arr[0], s_arr[0], pin[0])
    for t in range(1, T):
        p = _walk_step(p, edges, ad[t], s_arr[t], pin[t])
        q = _walk_step(q, edges, a_arr[t], s_arr[t], pin[t])
    p = np.maximum(p, 0.0)
    q = np.maximum(q, 0.0)
    return ProjectedWalkCurve(
        p=p / p.sum(),
        q=q / q.sum(),
        support=support,
        T=T,
        D=D,
        s=float(s_arr.max()),
        a=float(a_arr.max()),
    )


def composition_epsilon(T: int, mu0: float, delta: float) -> float:
    """eps(delta) of mu0 sqrt(T)-GDP (the composition column of auditing-notes 3.3)."""
    return _gdp_epsilon(delta, mu0 * math.sqrt(T))


# ---------------------------------------------------------------------- linear NoisySGD (mixture)
@dataclass(frozen=True)
class MixtureCurve:
    """P = sum_k w_k N(k a, sd^2) (world D') against Q = sum_k w_k N(k a_d, sd^2) (world D), a_d <=
    0 <= a.

    The likelihood ratio p/q is then increasing in x, so the optimal (Neyman-Pearson) sets are
    half-lines: delta(eps) = max( P(X > t1) - e^eps Q(X > t1), Q(X < t2) - e^eps P(X < t2) ) with
    log p/q (t1) = eps and log p/q (t2) = -eps.  Evaluated in closed form (normal tails in log
    space, thresholds by root finding): no quadrature error.
    """

    weights: np.ndarray
    a: float
    sd: float
    a_d: float = 0.0

    def __post_init__(self) -> None:
        if not (self.a_d <= 0.0 <= self.a):
            raise ValueError("need a_d <= 0 <= a (monotone likelihood ratio)")

    def _logw(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(np.asarray(self.weights, dtype=float))

    def _log(self, kind: str, t: float, shift: float) -> float:
        k = np.arange(self.weights.size)
        z = (t - k * shift) / self.sd
        if kind == "pdf":
            terms = -0.5 * z * z
        elif kind == "sf":
            terms = special.log_ndtr(-z)
        else:
            terms = special.log_ndtr(z)
        return float(special.logsumexp(self._logw() + terms))

    def _llr(self, t: float) -> float:
        return self._log("pdf", t, self.a) - self._log("pdf", t, self.a_d)

    def _root(self, level: float) -> float | None:
        """t with llr(t) = level; -inf / +inf (None meaning +inf) when out of range."""
        n = self.weights.size - 1
        lo = min(0.0, n * self.a_d) - 40 * self.sd
        hi = max(0.0, n * self.a) + 40 * self.sd
        f_lo, f_hi = self._llr(lo) - level, self._llr(hi) - level
        if f_lo >= 0:
            return -math.inf
        if f_hi <= 0:
            return None
        return float(
            optimize.brentq(
                lambda t: self._llr(t) - level, lo, hi, xtol=1e-13 * self.sd, rtol=1e-15
            )
        )

    def delta(self, eps: float) -> float:
        e = math.exp(eps)
        out = 0.0
        t1 = self._root(eps)
        if t1 is not None:
            if t1 == -math.inf:
                out = max(out, 1.0 - e)
            else:
                out = max(
                    out,
                    math.exp(self._log("sf", t1, self.a))
                    - e * math.exp(self._log("sf", t1, self.a_d)),
                )
        t2 = self._root(-eps)
        if t2 is None:
            out = max(out, 1.0 - e)
        elif t2 != -math.inf:
            out = max(
                out,
                math.exp(self._log("cdf", t2, self.a_d))
                - e * math.exp(self._log("cdf", t2, self.a)),
            )
        return float(min(1.0, max(out, 0.0)))

    def epsilon(self, delta: float) -> float:
        return _invert_profile(self.delta, delta, xtol=1e-12, rtol=1e-13)


def linear_sgd_curve(T: int, p: float, a: float, s: float, *, a_d: float = 0.0) -> MixtureCurve:
    """NoisySGD on a linear loss without projection, exact: the differing example's gradient kick a
    (= eta L / b) enters each step independently with probability p (uniform fixed-size batches, or
    Poisson), so x'_T - x_T ~ a Binomial(T, p) and both carry N(0, s^2 T) noise (s = eta sigma).
    This is the last-iterate heuristic of Steinke et al. 2025, exact for linear losses.
    ``a_d``: the kick of world D's own differing example (e.g. -a/2 with a' = +a/2 for the
    antipodal clipped pair; then use ``a`` for world D')."""
    w = (
        special.comb(T, np.arange(T + 1))
        * p ** np.arange(T + 1)
        * (1 - p) ** (T - np.arange(T + 1))
    )
    w = np.asarray(w, dtype=float)
    keep = w > 1e-18 * w.max()
    last = int(np.nonzero(keep)[0].max())
    w = w[: last + 1]
    return MixtureCurve(weights=w / w.sum(), a=a, sd=s * math.sqrt(T), a_d=a_d)


def linear_sgd_heuristic_curve(T: int, q: float, sigma: float) -> MixtureCurve:
    """Steinke et al. 2025 normalisation: Binomial(T, q) + N(0, sigma^2 T) vs N(0, sigma^2 T)."""
    return linear_sgd_curve(T, q, 1.0, sigma)


def gdp_curve_delta(eps: float, mu: float) -> float:
    """Re-export of the GDP privacy profile (independent of lastiterate.notions)."""
    return _gdp_delta(eps, mu)
