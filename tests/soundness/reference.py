"""Independent exact references for 1-D noisy gradient descent (issue 8, section 5).

This module shares NO code with the accountant: it imports numpy and scipy only (never
``lastiterate.*``).  Every function returns either an exact value or a CERTIFIED bound on the
hockey-stick divergence

    delta_true(eps) = max( sup_A P(A) - e^eps Q(A),  sup_A Q(A) - e^eps P(A) )

between the laws P, Q of the final iterate on two neighbouring data sets.  A violation of a
claimed (eps, delta) is certified when a LOWER bound on delta_true(eps) exceeds the claimed delta,
so every routine here errs on the low side: any measurable set A gives a lower bound, a
post-processing (quantisation) of the final iterate gives a lower bound, and weights that are
dropped from P (never from Q) only lower it.

The 1-D instance (canonical iteration, theorems.md section 0):

    x_{t+1} = Proj_[-D/2, D/2]( x_t - eta ( (1/b_t) sum_{j in B_t} g_j(x_t) + Z_t )
        ),  Z_t ~ N(0, sigma^2)

with g_j(x) = k x + v_j (a quadratic regulariser k x^2 / 2 shared by every example -- it is
added outside any clipping, so it does not change the sensitivity -- and a linear data term v_j,
|v_j| <= C).  Every example but the differing one has v_j = 0.  Then with a = 1 - eta k the
mean of the unprojected final iterate is a * (...) plus the sum, over the steps t that used the
differing example, of a^(T-1-t) eta v / b_t, and its variance is eta^2 sigma^2 sum_t a^(2(T-1-t)):

* deterministic batches (gd, cgd): two Gaussians, N(m, s^2) vs N(m', s^2), exact mu = |m - m'|/s;
* sampled batches (Poisson, uniform, shuffle): Gaussian mixtures over the sampling pattern,
  whose hockey-stick divergence is computed exactly from the level set of the log-likelihood ratio
  (found on a grid and refined by root finding; the value is a lower bound for ANY set, and exact
  when the level set is found);
* the projected walk (diameter D): a monotone Markov chain, bracketed on a grid by two
  stochastically ordered discrete chains, giving certified lower and upper bounds.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

# ----------------------------------------------------------------------------- Gaussian pair


def gaussian_delta(eps: float, mu: float) -> float:
    """Exact delta(eps) of N(0,1) vs N(mu,1): Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).

    Balle and Wang 2018, Thm 8; evaluated in log space (``scipy.special.log_ndtr``) so that tiny
    deltas keep their relative accuracy.
    """
    if mu <= 0:
        return 0.0
    la = special.log_ndtr(-eps / mu + mu / 2)
    lb = eps + special.log_ndtr(-eps / mu - mu / 2)
    if lb >= la:
        return 0.0
    return float(math.exp(la) * -math.expm1(lb - la))


# ----------------------------------------------------------------------------- Gaussian mixtures


@dataclass(frozen=True)
class GaussianMixture:
    """sum_k weights[k] N(means[k], scale^2) (weights may sum to less than one: dropped mass)."""

    means: np.ndarray
    weights: np.ndarray
    scale: float

    @staticmethod
    def of(
        means: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray, scale: float
    ) -> GaussianMixture:
        m = np.asarray(means, dtype=float).ravel()
        w = np.asarray(weights, dtype=float).ravel()
        if m.shape != w.shape or not np.all(w >= 0) or not scale > 0:
            raise ValueError("bad mixture")
        keep = w > 0  # exactly-zero weights change nothing
        return GaussianMixture(m[keep], w[keep], float(scale))

    def pruned(self, rel: float = 1e-30) -> tuple[GaussianMixture, float]:
        """Drop components lighter than ``rel`` times the heaviest; return the dropped mass too."""
        keep = self.weights >= rel * self.weights.max()
        dropped = float(self.weights[~keep].sum())
        return GaussianMixture(self.means[keep], self.weights[keep], self.scale), dropped

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """log density up to the common constant -log(scale sqrt(2 pi)) (it cancels in ratios)."""
        z = (x[:, None] - self.means[None, :]) / self.scale
        with np.errstate(divide="ignore"):
            logw = np.log(self.weights)
        return special.logsumexp(logw[None, :] - 0.5 * z * z, axis=1)

    def log_prob_intervals(self, intervals: list[tuple[float, float]]) -> float:
        """log P(union of disjoint intervals), each term from log_ndtr of the nearer tail."""
        if not intervals:
            return -math.inf
        terms = []
        with np.errstate(divide="ignore"):
            logw = np.log(self.weights)
        for lo, hi in intervals:
            zl = (lo - self.means) / self.scale
            zh = (hi - self.means) / self.scale
            # P(lo < X < hi) = Phi(zh) - Phi(zl) = Phi(-zl) - Phi(-zh); use the form
            # whose terms are small
            upper_tail = zl > 0
            a = np.where(upper_tail, -zl, zh)
            b = np.where(upper_tail, -zh, zl)
            la = special.log_ndtr(a)
            lb = special.log_ndtr(b)
            with np.errstate(divide="ignore", invalid="ignore"):
                lt = la + np.log1p(-np.exp(np.minimum(lb - la, 0.0)))
            lt = np.where(lb >= la, -np.inf, lt)
            terms.append(
                special.logsumexp(logw + lt) if np.any(np.isfinite(logw + lt)) else -math.inf
            )
        return float(special.logsumexp(terms)) if np.any(np.isfinite(terms)) else -math.inf


def _level_set(
    p: GaussianMixture, q: GaussianMixture, eps: float, grid_points: int
) -> list[tuple[float, float]]:
    """{x : log p(x) - log q(x) > eps} as intervals: sign changes on a grid, refined by brentq.

    Outside [min mean - 40 scale, max mean + 40 scale] the sign is that of the grid's end (the
    ratio of Gaussian mixtures with equal scale is eventually monotone).  Missing a crossing
    only makes the returned set suboptimal, hence the divergence it yields a LOWER bound.
    """
    s = p.scale
    allm = np.concatenate([p.means, q.means])
    lo, hi = float(allm.min() - 40 * s), float(allm.max() + 40 * s)
    x = np.linspace(lo, hi, grid_points)

    def f(v: np.ndarray) -> np.ndarray:
        return p.logpdf(v) - q.logpdf(v) - eps

    fx = f(x)
    pos = fx > 0
    crossings = []
    for i in np.nonzero(pos[1:] != pos[:-1])[0]:
        r = optimize.brentq(
            lambda t: float(f(np.array([t]))[0]), x[i], x[i + 1], xtol=1e-13 * max(1.0, abs(x[i]))
        )
        crossings.append(r)
    edges = [-math.inf, *crossings, math.inf]
    out = []
    inside = bool(pos[0])
    for a, b in itertools.pairwise(edges):
        if inside:
            out.append((a, b))
        inside = not inside
    return out


def hockey_stick(
    p: GaussianMixture, q: GaussianMixture, eps: float, grid_points: int = 4001
) -> float:
    """sup_A P(A) - e^eps Q(A) (one direction), evaluated on the level set of the
    likelihood ratio."""
    if p.scale != q.scale:
        raise ValueError("equal scales only")
    # dropping P mass lowers P(A); dropped Q mass is added back to Q(A): both keep a lower bound
    p, _ = p.pruned()
    q, q_dropped = q.pruned()
    A = _level_set(p, q, eps, grid_points)
    lp = p.log_prob_intervals(A)
    lq = q.log_prob_intervals(A)
    if q_dropped > 0:
        lq = float(np.logaddexp(lq, math.log(q_dropped)))
    if lp == -math.inf:
        return 0.0
    if eps + lq >= lp:
        return 0.0
    return float(math.exp(lp) * -math.expm1(eps + lq - lp))


def mixture_delta(
    p: GaussianMixture, q: GaussianMixture, eps: float, grid_points: int = 4001
) -> float:
    """delta_true(eps) of the pair: the larger of the two directions."""
    return max(hockey_stick(p, q, eps, grid_points), hockey_stick(q, p, eps, grid_points))


# ----------------------------------------------------------------------------- sampling patterns


def _merge(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge atoms whose values agree to 13 significant digits (keeps the
    mixture exact to 1e-13)."""
    key = np.round(values, 13 - math.floor(math.log10(max(float(np.max(np.abs(values))), 1e-300))))
    uniq, inv = np.unique(key, return_inverse=True)
    w = np.bincount(inv, weights=weights, minlength=len(uniq))
    v = np.zeros(len(uniq))
    v[inv] = values  # any representative (they agree to 1e-13)
    return v, w


def _convolve(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], cap: int
) -> tuple[np.ndarray, np.ndarray]:
    v = (a[0][:, None] + b[0][None, :]).ravel()
    w = (a[1][:, None] * b[1][None, :]).ravel()
    v, w = _merge(v, w)
    if len(v) > cap:
        raise ValueError(f"sampling pattern has more than {cap} distinct shifts; use a shorter run")
    return v, w


@dataclass(frozen=True)
class Instance:
    """The 1-D instance of a run: every number needed to write down the final iterate's law.

    ``uses`` describes when the differing example enters a batch and with which normaliser:

    * ``("steps", [(t, b_t), ...])``: at exactly these steps (gd, cgd);
    * ``("bernoulli", p, b)``: independently at every step with probability p, normaliser b
      (Poisson with its fixed normaliser, or uniform b-subsets where p = b/n);
    * ``("shuffle", sizes)``: once per epoch, in the batch of position k with probability
      sizes[k]/n, normalised by sizes[k] (a fresh permutation cut into batches of these sizes).

    ``v_p`` / ``v_q`` is the data gradient of the differing example in the two worlds (None:
    absent, add/remove adjacency).
    """

    T: int
    eta: float
    sigma: float
    a: float
    v_p: float
    v_q: float | None
    uses: tuple
    diameter: float | None = None

    def noise_scale(self) -> float:
        """std of the unprojected final iterate: eta sigma sqrt(sum_t a^(2t))."""
        a2 = self.a * self.a
        if a2 == 1.0:
            total = float(self.T)
        else:
            total = (1.0 - a2**self.T) / (1.0 - a2)
        return self.eta * self.sigma * math.sqrt(total)

    def pattern(self, cap: int = 20000) -> tuple[np.ndarray, np.ndarray]:
        """Distribution of U = sum over used steps t of a^(T-1-t) / b_t (values, probabilities)."""
        T, a, kind = self.T, self.a, self.uses[0]
        decay = a ** (T - 1 - np.arange(T, dtype=float))
        if kind == "steps":
            u = math.fsum(decay[t] / bt for t, bt in self.uses[1])  # exactly rounded: T may be 1e6
            return np.array([u]), np.array([1.0])
        if kind == "bernoulli":
            p, b = self.uses[1], self.uses[2]
            if a == 1.0:
                k = np.arange(T + 1)
                return k / b, stats.binom.pmf(k, T, p)
            dist = (np.array([0.0]), np.array([1.0]))
            for t in range(T):
                dist = _convolve(dist, (np.array([0.0, decay[t] / b]), np.array([1 - p, p])), cap)
            return dist
        if kind == "shuffle":
            sizes = np.asarray(self.uses[1], dtype=float)
            n, l = sizes.sum(), len(sizes)
            dist = (np.array([0.0]), np.array([1.0]))
            for start in range(0, T, l):
                vals = np.array(
                    [decay[start + k] / sizes[k] if start + k < T else 0.0 for k in range(l)]
                )
                dist = _convolve(dist, _merge(vals, sizes / n), cap)
            return dist
        raise ValueError(kind)

    def laws(self) -> tuple[GaussianMixture, GaussianMixture]:
        """The laws of the UNPROJECTED final iterate in both worlds (common offsets removed)."""
        u, w = self.pattern()
        s = self.noise_scale()
        p = GaussianMixture.of(self.eta * self.v_p * u, w, s)
        if self.v_q is None:
            q = GaussianMixture.of([0.0], [1.0], s)
        else:
            q = GaussianMixture.of(self.eta * self.v_q * u, w, s)
        return p, q

    def delta(self, eps: float) -> float:
        """delta_true(eps) of the unprojected instance (exact up to floating point)."""
        if self.diameter is not None:
            raise ValueError("projected instance: use projected_walk_bracket")
        p, q = self.laws()
        if len(p.means) == 1 and len(q.means) == 1:
            return gaussian_delta(eps, abs(p.means[0] - q.means[0]) / p.scale)
        return mixture_delta(p, q, eps)


# ----------------------------------------------------------------------------- projected walk


def _step_kernels(inst: Instance, v: float | None) -> list[list[tuple[float, float]]]:
    """Per step: the mixture [(weight, drift)] of x -> a x + drift + N(0, (eta
    sigma)^2) in one world."""
    T, eta = inst.T, inst.eta
    kind = inst.uses[0]
    if v is None:
        return [[(1.0, 0.0)]] * T
    if kind == "steps":
        used = dict(inst.uses[1])
        return [[(1.0, eta * v / used[t])] if t in used else [(1.0, 0.0)] for t in range(T)]
    if kind == "bernoulli":
        p, b = inst.uses[1], inst.uses[2]
        return [[(1 - p, 0.0), (p, eta * v / b)]] * T
    raise ValueError(
        "the projected walk needs steps that are independent (gd, cgd, poisson, uniform)"
    )


def _one_blas_thread() -> contextlib.AbstractContextManager[object]:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional (installed with scikit-learn): only a speed-up
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def projected_walk_bracket(inst: Instance, eps: float, cells: int = 600) -> tuple[float, float]:
    """Certified (lower, upper) bounds on delta_true(eps) of the projected 1-D walk (see
    :func:`_projected_walk_bounds`; the propagation is cached per instance and grid)."""
    return _projected_walk_bounds(inst, cells)(eps)


@functools.lru_cache(maxsize=64)
def _projected_walk_bounds(inst: Instance, cells: int) -> Callable[[float], tuple[float, float]]:
    """Certified (lower, upper) bounds on delta_true(eps) of the projected 1-D walk.

    x_{t+1} = clip(a x_t + d + N(0, s^2), -D/2, D/2) with s = eta sigma, x_0 = 0, a in (0, 1].  The
    step is monotone in x, so E g(x_t) for a decreasing g is monotone in the CDF F_t of x_t.
    Given F_lo <= F_t <= F_hi at the grid points y_0 = -D/2 < ... < y_K = D/2 (the last one read as
    P(x < D/2)), the stochastically smallest law consistent with F_hi (cell masses at left ends)
    gives an upper bound on F_{t+1}, the largest (masses at right ends) a lower bound.
    At the end:

    * lower: P(A) - e^eps Q(A) for the sets A = {x <= y_j} U {x > y_k} (any set gives a lower
      bound; these contain the boundary atoms and the tails, where the walk's privacy loss is
      largest), with P(A) from the lower and Q(A) from the upper CDF bracket at step T;
    * upper: the atoms and the interior densities of the last step, bounded through the bracket at
      step T-1 and the exact Gaussian kernel (``last_step_bounds``); it is loose by about
      3 T h / s (h the cell width), so it reports how good the grid is, not a test threshold.

    A padding of 1e-13 per step covers floating-point rounding of the CDF sums.
    """
    if inst.diameter is None:
        raise ValueError("needs a diameter")
    if not 0 < inst.a <= 1:
        raise ValueError("monotone step needs 0 < a <= 1")
    R = inst.diameter / 2
    y = np.linspace(-R, R, cells + 1)
    s = inst.eta * inst.sigma
    pad = 1e-13

    def propagate(
        kernels: list[list[tuple[float, float]]],
    ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        # x_0 = 0: F = 1{y >= 0}; exact as a bracket
        F_hi = (y >= 0).astype(float)
        F_hi[-1] = 1.0
        F_lo = F_hi.copy()
        cache: dict[tuple, np.ndarray] = {}
        pts_small = np.concatenate([[y[0]], y[:-1], [R]])
        pts_large = np.concatenate([y, [R]])
        prev = (F_lo, F_hi)
        for ker in kernels:
            prev = (F_lo, F_hi)
            key = tuple(ker)
            if key not in cache:
                # G[k, j] = P(x' <= y_k | x = point_j), for both point sets
                def G(pts: np.ndarray, ker: list[tuple[float, float]] = ker) -> np.ndarray:
                    out = np.zeros((len(y), len(pts)))
                    for w, d in ker:
                        out += w * special.ndtr((y[:, None] - d - inst.a * pts[None, :]) / s)
                    return out

                cache[key] = (G(pts_small), G(pts_large))
            Gs, Gl = cache[key]
            m_small = np.diff(np.concatenate([[0.0], F_hi, [1.0]]))
            m_large = np.diff(np.concatenate([[0.0], F_lo, [1.0]]))
            F_hi = np.minimum(1.0, Gs @ np.maximum(m_small, 0) + pad)
            F_lo = np.maximum(0.0, Gl @ np.maximum(m_large, 0) - pad)
            # monotonicity of the true CDF tightens both bounds
            F_hi = np.minimum.accumulate(F_hi[::-1])[::-1]
            F_lo = np.maximum.accumulate(F_lo)
        return prev, (F_lo, F_hi)

    def laws(
        F_lo: np.ndarray, F_hi: np.ndarray
    ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """(points, masses) of the stochastically smallest and largest laws within the bracket."""
        small = (
            np.concatenate([[y[0]], y[:-1], [R]]),
            np.maximum(np.diff(np.concatenate([[0.0], F_hi, [1.0]])), 0),
        )
        large = (
            np.concatenate([y, [R]]),
            np.maximum(np.diff(np.concatenate([[0.0], F_lo, [1.0]])), 0),
        )
        return small, large

    def phi(z: np.ndarray) -> np.ndarray:
        return np.exp(-0.5 * (z / s) ** 2) / (s * math.sqrt(2 * math.pi))

    def last_step_bounds(
        F_lo: np.ndarray, F_hi: np.ndarray, ker: list[tuple[float, float]]
    ) -> dict[str, np.ndarray]:
        """Bounds on the final law from the bracket on x_{T-1} and the exact last kernel.

        Atoms: P(x_T = -R) = E Phi((-R - d - a X)/s) is decreasing in X (bounded by the smallest /
        largest law).  Interior: the density on the cell [y_k, y_{k+1}] is at most E gbar(X) and at
        least E gmin(X), with gbar / gmin the max / min over the cell of phi_s(y - d - a X); both
        are unimodal in X, so g = g(min(X, x0)) + g(max(X, x0)) - g(x0) splits each into a
        non-decreasing and a non-increasing part, each bounded through the ordered laws.
        """
        (ps, ms), (pl, ml) = laws(F_lo, F_hi)
        out = {"L_hi": 0.0, "L_lo": 0.0, "R_hi": 0.0, "R_lo": 0.0}
        dens_hi = np.zeros(cells)
        dens_lo = np.zeros(cells)
        lo_y, hi_y = y[:-1, None], y[1:, None]
        for w, d in ker:
            out["L_hi"] += w * float(ms @ special.ndtr((-R - d - inst.a * ps) / s))
            out["L_lo"] += w * float(ml @ special.ndtr((-R - d - inst.a * pl) / s))
            out["R_hi"] += w * float(ml @ special.ndtr((-R + d + inst.a * pl) / s))
            out["R_lo"] += w * float(ms @ special.ndtr((-R + d + inst.a * ps) / s))

            def gbar(
                x: np.ndarray, d: float = d
            ) -> np.ndarray:  # max over y in the cell of phi_s(y - d - a x)
                u = d + inst.a * x
                return phi(np.maximum(0.0, np.maximum(lo_y - u, u - hi_y)))

            def gmin(x: np.ndarray, d: float = d) -> np.ndarray:  # min over y in the cell
                u = d + inst.a * x
                return phi(np.maximum(np.abs(lo_y - u), np.abs(hi_y - u)))

            x0 = (lo_y - d) / inst.a  # gbar is maximal (plateau) from here
            x1 = ((lo_y + hi_y) / 2 - d) / inst.a  # gmin is maximal here
            up = (
                (gbar(np.minimum(pl[None, :], x0)) @ ml)
                + (gbar(np.maximum(ps[None, :], x0)) @ ms)
                - phi(np.zeros(cells))
            )
            dn = (
                (gmin(np.minimum(ps[None, :], x1)) @ ms)
                + (gmin(np.maximum(pl[None, :], x1)) @ ml)
                - gmin(x1)[:, 0]
            )
            dens_hi += w * up
            dens_lo += w * np.maximum(dn, 0.0)
        res = {k: np.array([v]) for k, v in out.items()}
        res["dens_hi"] = dens_hi
        res["dens_lo"] = dens_lo
        return res

    kp = _step_kernels(inst, inst.v_p)
    kq = _step_kernels(inst, inst.v_q)
    with _one_blas_thread():  # many small mat-vecs: threads only contend (3x slower on 2 cores)
        Fp_prev, Fp = propagate(kp)
        Fq_prev, Fq = propagate(kq)
        bp = last_step_bounds(*Fp_prev, kp[-1])
        bq = last_step_bounds(*Fq_prev, kq[-1])
    h = np.diff(y)

    def bracket(eps: float) -> tuple[float, float]:
        e = math.exp(eps)

        def halflines(
            F1: tuple[np.ndarray, np.ndarray], F2: tuple[np.ndarray, np.ndarray]
        ) -> float:
            """max over A = {x <= y_j} U {x > y_k} (j < k) of a lower bound on
            P1(A) - e^eps P2(A)."""
            (lo1, hi1), (lo2, hi2) = F1, F2
            low_part = lo1 - pad - e * (hi2 + pad)  # P1(x <= y_j) - e^eps P2(x <= y_j), lower bound
            up_part = (
                (1 - hi1) - pad - e * ((1 - lo2) + pad)
            )  # sets {x > y_k}; k = K is the atom at R
            best = max(0.0, float(low_part.max()), float(up_part.max()))
            # both pieces: prefix maxima of the lower pieces against the upper piece at k
            pref = np.maximum.accumulate(np.maximum(low_part, 0.0))
            both = pref[:-1] + np.maximum(up_part[1:], 0.0)
            return max(best, float(both.max()))

        def upper_one(b1: dict[str, np.ndarray], b2: dict[str, np.ndarray]) -> float:
            upper = max(0.0, float(b1["L_hi"][0] + pad - e * (b2["L_lo"][0] - pad)))
            upper += max(0.0, float(b1["R_hi"][0] + pad - e * (b2["R_lo"][0] - pad)))
            upper += float(
                np.sum(
                    np.maximum(
                        0.0, h * (b1["dens_hi"] + pad) - e * h * np.maximum(b2["dens_lo"] - pad, 0)
                    )
                )
            )
            return min(1.0, upper)

        lower = max(halflines(Fp, Fq), halflines(Fq, Fp))
        upper = max(upper_one(bp, bq), upper_one(bq, bp))
        return lower, max(lower, upper)

    return bracket
