"""Tradeoff functions (f-DP) as convex polygons, with the operations an accountant needs.

Reference: docs/theorems.md section 1.1 (tradeoff functions, ``f_{eps,delta}``), 1.3 (f-DP -> (eps,
delta) via the convex conjugate, ``max(delta_f, delta_{f^-1})`` for non-symmetric f) and 1.6
(subsampling operator ``C_p``, explicit ``C_p(G_mu)``, single-step privacy curve).

Representation and safety
-------------------------
A :class:`TradeoffCurve` IS the piecewise-linear function through its vertices
``(alphas[i], values[i])`` (``alphas[0] = 0``, ``alphas[-1] = 1``). A curve certifies "the
mechanism is f-DP with f = this polygon", so a polygon that lies BELOW the true tradeoff function is
a valid (pessimistic) guarantee and one that lies above it is not.

* Every operation on polygons is exact for the polygon: the conjugate (privacy profile) of a polygon
  is a maximum over its vertices, ``f^{-1}`` is the reflection of the vertices, ``min{f, g}**`` is
  the lower convex hull of the union of the vertices, ``max{f, g}`` adds the crossing points, and
  ``f_p`` is a vertex-wise linear combination. Hence :meth:`privacy_profile`, :meth:`epsilon`,
  :meth:`inverse`, :meth:`symmetrize`, :meth:`pointwise_max` and :meth:`subsample` introduce no
  discretisation error.
* Discretisation happens only when a smooth convex function is sampled (:meth:`from_function`,
  :meth:`from_gaussian`, ...). The chord of a convex function lies ABOVE it, so plain interpolation
  would be optimistic. Instead each vertex is lowered by a bound on the chord error of its adjacent
  intervals, computed from the neighbouring secant slopes only (no derivatives needed; see
  ``_chord_error_lowering``), and the lowered points are replaced by their lower convex hull, so the
  polygon is convex and lies below f. The lowering is ``O(h^2 f'')`` (a few times the chord error
  itself); for ``G_mu`` on the default grid it changes delta(eps) by <= ~3e-4 relative (mu <= 3).
* Floating-point rounding: vertex values near 1 carry absolute rounding errors of a few 1e-16 (and
  rounded crossing points / hull tests add errors of the same order). Since the conjugate is
  1-Lipschitz in the sup norm, an additive margin ``PROFILE_MARGIN = 2^-48`` (~3.6e-15) is added to
  every privacy profile computed from a curve (and :meth:`TradeoffCurve.epsilon` solves the profile
  including that margin). So a curve-derived delta is never below ~3.6e-15 and delta targets at or
  below it give ``epsilon = inf``; use :mod:`lastiterate.notions.gdp` for exact Gaussian profiles at
  tiny delta.

The default grid (:func:`default_grid`) has ~19000 points: logit-spaced (dense near 0 and 1, where
the profile at large epsilon is decided, reaching down to 1e-304) plus 2001 evenly spaced points.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from lastiterate.errors import ParameterError, check_in_range, check_nonnegative
from lastiterate.notions import normal
from lastiterate.notions.gdp import _as_float_array, _gdp_delta_unchecked, gaussian_tradeoff

__all__ = [
    "TradeoffCurve",
    "default_grid",
    "epsilon_delta_tradeoff",
    "subsampled_gaussian_delta",
    "subsampled_gaussian_tradeoff",
]

#: Additive safety margin on every curve-derived delta (covers rounding of the vertex arithmetic).
PROFILE_MARGIN = 2.0**-48
#: Largest GDP mu whose curve the default grid represents usefully (see ``default_grid``).
MAX_POLYGON_MU = 30.0


# ------------------------------------------------------------------------------------------------
# small polygon helpers
# ------------------------------------------------------------------------------------------------


def default_grid(n_logit: int = 5500, n_far: int = 12000, n_linear: int = 2001) -> np.ndarray:
    """Sorted grid on [0, 1] containing 0 and 1, the union of

    * ``expit(linspace(-100, 37, n_logit))``: 3.7e-44 ... 1 - 1e-16 with relative spacing ~2.5% in
      the tails (near 1 the spacing of ``1 - alpha`` cannot go below the double resolution 1.1e-16);
    * ``expit(linspace(-700, -100, n_far))``: down to ~1e-304 with relative spacing ~5%, so that
      strongly separated curves (GDP mu up to ~10) keep ``f(0+) ~ 1``;
    * ``linspace(0, 1, n_linear)``.

    Curves with even stronger separation (mu >~ 30) reach ``f(alpha) << 1`` only below the smallest
    positive double and cannot be represented accurately as polygons in alpha; use the closed forms
    of :mod:`lastiterate.notions.gdp` for those.
    """
    g = np.concatenate(
        [
            normal.expit(np.linspace(-100.0, 37.0, int(n_logit))),
            normal.expit(np.linspace(-700.0, -100.0, int(n_far))),
            np.linspace(0.0, 1.0, int(n_linear)),
            [0.0, 1.0],
        ]
    )
    return np.unique(np.clip(g, 0.0, 1.0))


def lower_hull_indices(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the vertices of the lower convex hull of the points (x_i, y_i), given with x
    strictly increasing (Andrew's monotone chain; collinear points are dropped)."""
    hull: list[int] = []
    for i in range(len(x)):
        while len(hull) >= 2:
            i1, i2 = hull[-2], hull[-1]
            if (x[i2] - x[i1]) * (y[i] - y[i1]) - (y[i2] - y[i1]) * (x[i] - x[i1]) <= 0.0:
                hull.pop()
            else:
                break
        hull.append(i)
    return np.asarray(hull, dtype=int)


def _lower_hull(xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower convex hull of points in any order; returns its vertices sorted by x.

    The lower hull of a point set is the graph of the largest convex function lying below all the
    points, i.e. the double conjugate of the piecewise-linear function through them.
    """
    order = np.lexsort((ys, xs))
    x = xs[order]
    y = ys[order]
    keep = np.ones(x.size, dtype=bool)
    keep[1:] = x[1:] != x[:-1]  # for equal x keep the lowest y (first after lexsort)
    x, y = x[keep], y[keep]
    idx = lower_hull_indices(x, y)
    return x[idx], y[idx]


def _chord_error_lowering(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-vertex downward correction making the polygon lie below the convex non-increasing f
    sampled at x.

    On ``[x_i, x_{i+1}]`` (length h, chord slope s) f lies above its tangents at both ends, whose
    slopes satisfy ``g_i >= L = s_{i-1}`` (``-inf`` for the first interval) and ``g_{i+1} <= U =
    min(s_{i+1}, 0)`` (``U = 0`` for the last interval). The chord exceeds the larger tangent by at
    most the gap at their intersection, ``h (g_{i+1} - s)(s - g_i) / (g_{i+1} - g_i)``, which is
    increasing in ``g_{i+1}`` and decreasing in ``g_i``; hence ``err_i = h u d / (u + d)`` with ``u
    = U - s >= 0``, ``d = s - L >= 0`` (``h u`` when ``L = -inf``). Each vertex is lowered by the
    max over its two intervals, so the polygon through the lowered vertices lies below f on every
    interval.
    """
    h = np.diff(x)
    s = np.diff(y) / h
    s_next = np.minimum(np.append(s[1:], 0.0), 0.0)
    u = np.maximum(s_next - s, 0.0)
    d = np.empty_like(s)
    d[0] = np.inf
    d[1:] = np.maximum(s[1:] - s[:-1], 0.0)
    lo_, hi_ = np.minimum(u, d), np.maximum(u, d)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        # u d / (u + d) = lo / (1 + lo/hi), overflow-free; hi = inf gives lo, hi = 0 gives 0
        frac = np.where(hi_ > 0, lo_ / (1.0 + lo_ / hi_), 0.0)
    err = h * frac
    err = np.where(np.isfinite(err), err, 0.0)
    low = np.zeros_like(y)
    low[:-1] = err
    low[1:] = np.maximum(low[1:], err)
    return low


def _finalize(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower hull, then clip into [0, min(1, 1 - x)] (lowering only, so still a pessimistic
    curve)."""
    hx, hy = _lower_hull(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    hy = np.maximum(np.minimum(hy, 1.0 - hx), 0.0)
    return hx, hy


def _check_probability_closed(name: str, value: float) -> float:
    return check_in_range(name, value, 0.0, 1.0)


def _check_alpha_array(alpha: ArrayLike) -> np.ndarray:
    a = _as_float_array("alpha", alpha)
    if ((a < 0) | (a > 1)).any():
        raise ParameterError("alpha", alpha, "must lie in [0, 1]")
    return a


def _scalar_or_array(arr: np.ndarray) -> float | np.ndarray:
    return float(arr) if np.ndim(arr) == 0 else arr


# ------------------------------------------------------------------------------------------------
# closed forms
# ------------------------------------------------------------------------------------------------


def epsilon_delta_tradeoff(alpha: ArrayLike, epsilon: float, delta: float) -> np.ndarray:
    """Tradeoff function of (eps, delta)-DP (docs/theorems.md 1.1): ``f_{eps,delta}(alpha) = max{0,
    1 - delta - e^eps alpha, e^-eps (1 - delta - alpha)}``."""
    e = check_nonnegative("epsilon", epsilon)
    d = _check_probability_closed("delta", delta)
    a = _check_alpha_array(alpha)
    if e <= 709.0:
        steep = 1.0 - d - math.exp(e) * a
    else:  # e^eps overflows: the steep piece is 1 - delta at alpha = 0 and negative elsewhere
        steep = np.where(a > 0, -np.inf, 1.0 - d)
    shallow = math.exp(-e) * (1.0 - d - a)
    return np.maximum(0.0, np.maximum(steep, shallow))


def _w_of_one_minus_x(one_minus_x: np.ndarray, p: float, mu: float) -> np.ndarray:
    """Solve ``p Phi(mu - w) + (1 - p) Phi(-w) = r`` for ``w >= mu/2`` (vectorised bisection,
    decreasing in w)."""
    lo = np.full(one_minus_x.shape, mu / 2.0)
    hi = np.full(one_minus_x.shape, 40.0 + mu)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        g = p * normal.ndtr(mu - mid) + (1.0 - p) * normal.ndtr(-mid) - one_minus_x
        bigger = g > 0  # value too large -> root is to the right
        lo = np.where(bigger, mid, lo)
        hi = np.where(bigger, hi, mid)
        if np.all(hi - lo <= 4e-16 * np.maximum(hi, 1.0)):
            break
    # The root lies in [lo, hi]; t = Phi(-w) is decreasing in w, so using lo gives the LARGER t,
    # i.e. the value is rounded towards the other (larger) end of the bracket. Use hi: smaller
    # tradeoff value (pessimistic).
    return hi


def subsampled_gaussian_tradeoff(alpha: ArrayLike, p: float, mu: float) -> np.ndarray:
    """Explicit ``C_p(G_mu)`` (docs/theorems.md 1.6, DRS22 Def. 6 / Thm 9, paper 000 Def. 4.7).

    With ``f_p = p G_mu + (1 - p) Id``, ``x* = Phi(-mu/2)`` (where ``f_p' = -1``) and ``y* =
    f_p(x*)``:

    * ``C_p(G_mu)(x) = f_p(x)`` on ``[0, x*]``;
    * ``x* + y* - x`` on ``[x*, y*]`` (slope -1);
    * ``f_p^{-1}(x)`` on ``[y*, 1]``.

    ``f_p^{-1}(x) = Phi(-w)`` where ``p Phi(mu - w) + (1 - p) Phi(-w) = 1 - x`` is solved by
    bisection in ``w`` to ~4e-16 relative, rounded to the pessimistic (smaller) value. ``p`` in [0,
    1], ``mu >= 0``.
    """
    pp = _check_probability_closed("p", p)
    m = check_nonnegative("mu", mu)
    a = _check_alpha_array(alpha)
    x_star = float(normal.ndtr(-m / 2.0))
    y_star = pp * float(gaussian_tradeoff(x_star, m)) + (1.0 - pp) * (1.0 - x_star)
    out = np.empty_like(a)
    first = a <= x_star
    third = a >= y_star
    middle = ~first & ~third
    if first.any():
        af = a[first]
        out[first] = pp * gaussian_tradeoff(af, m) + (1.0 - pp) * (1.0 - af)
    if middle.any():
        out[middle] = x_star + y_star - a[middle]
    if third.any():
        at = a[third]
        w = _w_of_one_minus_x(1.0 - at, pp, m)
        out[third] = normal.ndtr(-w)
    return np.clip(out, 0.0, 1.0)


def subsampled_gaussian_delta(epsilon: ArrayLike, p: float, mu: float) -> float | np.ndarray:
    """Single-step privacy curve of ``C_p(G_mu)`` for ``eps >= 0`` (docs/theorems.md 1.6, last
    bullet):

        delta(eps) = p * delta_GDP(eps'; mu),   e^{eps'} = 1 + (e^eps - 1) / p.

    ``eps'`` is computed as ``log1p(expm1(eps)/p)`` for eps <= 1 and ``eps - log p + log1p((p-1)
    e^-eps)`` otherwise (no overflow). ``p`` in [0, 1] (``p = 0`` gives 0), ``mu >= 0``. Exact
    (TIGHT for T = 1).
    """
    pp = _check_probability_closed("p", p)
    m = check_nonnegative("mu", mu)
    e = _as_float_array("epsilon", epsilon)
    if (e < 0).any():
        raise ParameterError("epsilon", epsilon, "must be >= 0")
    if pp == 0.0 or m == 0.0:
        return _scalar_or_array(np.zeros_like(e))
    with np.errstate(over="ignore"):
        small = e <= 1.0
        e_prime = np.where(
            small,
            np.log1p(np.expm1(np.minimum(e, 1.0)) / pp),
            e - math.log(pp) + np.log1p((pp - 1.0) * np.exp(-np.maximum(e, 1.0))),
        )
    out = pp * _gdp_delta_unchecked(np.asarray(e_prime, dtype=float), m)
    return _scalar_or_array(np.clip(out, 0.0, 1.0))


# ------------------------------------------------------------------------------------------------
# the curve class
# ------------------------------------------------------------------------------------------------


class TradeoffCurve:
    """A tradeoff function stored as the convex polygon through ``(alphas[i], values[i])``.

    See the module docstring for what is exact and what is pessimistic. Build curves with the
    ``from_*`` constructors; the plain constructor takes explicit vertices and validates them.
    """

    __slots__ = ("_x", "_y")

    def __init__(self, alphas: ArrayLike, values: ArrayLike, *, tol: float = 1e-9) -> None:
        x = _as_float_array("alphas", alphas).ravel()
        y = _as_float_array("values", values).ravel()
        if x.size != y.size or x.size < 2:
            raise ParameterError("alphas", alphas, "must have the same length (>= 2) as values")
        self._set(x, y)
        self.validate(tol)

    # -- internal -------------------------------------------------------------------------------
    def _set(self, x: np.ndarray, y: np.ndarray) -> None:
        x = np.array(x, dtype=float)
        y = np.array(y, dtype=float)
        x.setflags(write=False)
        y.setflags(write=False)
        self._x = x
        self._y = y

    @classmethod
    def _raw(cls, x: np.ndarray, y: np.ndarray) -> TradeoffCurve:
        obj = cls.__new__(cls)
        obj._set(x, y)
        return obj

    @classmethod
    def _from_points(cls, x: np.ndarray, y: np.ndarray) -> TradeoffCurve:
        hx, hy = _finalize(x, y)
        return cls._raw(hx, hy)

    # -- constructors ---------------------------------------------------------------------------
    @classmethod
    def identity(cls) -> TradeoffCurve:
        """Perfect privacy ``Id(alpha) = 1 - alpha`` (exact)."""
        return cls._raw(np.array([0.0, 1.0]), np.array([1.0, 0.0]))

    @classmethod
    def from_function(
        cls,
        f: Callable[[np.ndarray], ArrayLike],
        grid: ArrayLike | None = None,
        *,
        tol: float = 1e-9,
    ) -> TradeoffCurve:
        """Sample a convex, non-increasing ``f: [0,1] -> [0,1]`` with ``f(x) <= 1 - x`` and return a
        polygon lying BELOW it (chord-error lowering + lower hull, see module docstring).

        ``f`` is called once with the whole grid (an array). Raises :class:`ParameterError` if the
        samples are NaN, outside [0, 1], above ``1 - x`` or non-convex / increasing by more than
        ``tol``.
        """
        x = (
            default_grid()
            if grid is None
            else np.unique(np.clip(_as_float_array("grid", grid), 0.0, 1.0))
        )
        if x[0] != 0.0 or x[-1] != 1.0:
            x = np.unique(np.concatenate([[0.0, 1.0], x]))
        y = np.asarray(f(x), dtype=float).reshape(x.shape)
        if np.isnan(y).any():
            raise ParameterError("f", f, "returned NaN on [0, 1]")
        if (y < -tol).any() or (y > 1 + tol).any() or (y > 1.0 - x + tol).any():
            raise ParameterError("f", f, "must map [0, 1] into [0, 1] with f(x) <= 1 - x")
        if (np.diff(y) > tol).any():
            raise ParameterError("f", f, "must be non-increasing")
        if _convexity_violation(x, y) > tol:
            raise ParameterError("f", f, "must be convex (a tradeoff function)")
        y = np.clip(np.minimum(y, 1.0 - x), 0.0, 1.0)
        y = y - _chord_error_lowering(x, y)
        return cls._from_points(x, y)

    @classmethod
    def from_gaussian(cls, mu: float, grid: ArrayLike | None = None) -> TradeoffCurve:
        """Polygon below ``G_mu`` (docs/theorems.md 1.1); ``mu = 0`` gives the exact identity.

        ``mu`` must be in [0, MAX_POLYGON_MU]: beyond that, ``G_mu`` stays far below 1 down to the
        smallest positive double, so no polygon in alpha can represent it usefully (use
        :mod:`~lastiterate.notions.gdp`).
        """
        m = check_in_range("mu", mu, 0.0, MAX_POLYGON_MU)
        if m == 0.0:
            return cls.identity()
        return cls.from_function(lambda a: gaussian_tradeoff(a, m), grid)

    @classmethod
    def from_subsampled_gaussian(
        cls, p: float, mu: float, grid: ArrayLike | None = None
    ) -> TradeoffCurve:
        """Polygon below the explicit ``C_p(G_mu)`` (see :func:`subsampled_gaussian_tradeoff`);
        ``mu`` in [0, MAX_POLYGON_MU] as for :meth:`from_gaussian`."""
        pp = _check_probability_closed("p", p)
        m = check_in_range("mu", mu, 0.0, MAX_POLYGON_MU)
        if m == 0.0 or pp == 0.0:
            return cls.identity()
        return cls.from_function(lambda a: subsampled_gaussian_tradeoff(a, pp, m), grid)

    @classmethod
    def from_epsilon_delta(cls, epsilon: float, delta: float) -> TradeoffCurve:
        """Exact ``f_{eps,delta}`` (docs/theorems.md 1.1): vertices ``(0, 1-delta)``, the kink
        ``((1-delta)/(1+e^eps), (1-delta)/(1+e^eps))``, ``(1-delta, 0)`` and ``(1, 0)``.

        ``epsilon`` in [0, 700]: beyond, the kink value ``~e^-eps`` underflows and the shallow piece
        (which carries the ``f^{-1}`` side of the profile) cannot be represented."""
        e = check_in_range("epsilon", epsilon, 0.0, 700.0)
        d = _check_probability_closed("delta", delta)
        k = (1.0 - d) * float(normal.expit(-e))  # = (1 - delta)/(1 + e^eps), no overflow
        x = np.array([0.0, k, 1.0 - d, 1.0])
        y = np.array([1.0 - d, k, 0.0, 0.0])
        return cls._from_points(x, y)

    @classmethod
    def from_privacy_profile(cls, epsilons: ArrayLike, deltas: ArrayLike) -> TradeoffCurve:
        """f-DP curve implied by a privacy profile: ``max_j f_{eps_j, delta_j}`` (docs/theorems.md
        1.3).

        Each pair ``(eps_j, delta_j)`` must be a valid guarantee; the pointwise max of the
        corresponding ``f_{eps,delta}`` is then valid, and it is computed EXACTLY as the upper
        envelope of the lines ``1 - delta_j - e^{eps_j} x``, ``e^{-eps_j}(1 - delta_j - x)`` and
        ``0``. The steep line of a pair with ``eps_j > 700`` is dropped (its slope is not
        representable; dropping a line only lowers the curve, which is pessimistic). Lossless when
        the profile is dense and symmetric (DRS22 Prop 2.12).
        """
        e = _as_float_array("epsilons", epsilons).ravel()
        d = _as_float_array("deltas", deltas).ravel()
        if e.size != d.size or e.size == 0:
            raise ParameterError(
                "deltas", deltas, "must have the same (non-zero) length as epsilons"
            )
        if (e < 0).any() or np.isinf(e).any():
            raise ParameterError("epsilons", epsilons, "must be finite and >= 0")
        if (d < 0).any() or (d > 1).any():
            raise ParameterError("deltas", deltas, "must lie in [0, 1]")
        slopes = [np.array([0.0])]
        inter = [np.array([0.0])]
        steep = e <= 700.0
        slopes.append(-np.exp(e[steep]))
        inter.append(1.0 - d[steep])
        slopes.append(-np.exp(-e))
        inter.append(np.exp(-e) * (1.0 - d))
        x, y = _upper_envelope_on_unit_interval(np.concatenate(slopes), np.concatenate(inter))
        return cls._from_points(x, y)

    # -- evaluation -----------------------------------------------------------------------------
    @property
    def alphas(self) -> np.ndarray:
        """Vertex abscissae (type-I errors), sorted, from 0 to 1 (read-only)."""
        return self._x

    @property
    def values(self) -> np.ndarray:
        """Vertex values (type-II errors), read-only."""
        return self._y

    def __call__(self, alpha: ArrayLike) -> float | np.ndarray:
        """The polygon at ``alpha`` in [0, 1] (linear interpolation between vertices)."""
        a = _check_alpha_array(alpha)
        return _scalar_or_array(np.interp(a, self._x, self._y))

    def __len__(self) -> int:
        return int(self._x.size)

    def __repr__(self) -> str:
        return f"TradeoffCurve(<{self._x.size} vertices>, f(0)={self._y[0]:.6g})"

    # -- validity -------------------------------------------------------------------------------
    def validity_violation(self) -> float:
        """Largest violation (in value units) of: x sorted from 0 to 1, values in [0, 1], ``f(x) <=
        1 - x``, non-increasing, convex. 0 for a valid curve."""
        x, y = self._x, self._y
        if x[0] != 0.0 or x[-1] != 1.0 or (np.diff(x) <= 0).any():
            return math.inf
        v = max(
            float(np.max(-y)),
            float(np.max(y - 1.0)),
            float(np.max(y - (1.0 - x))),
            float(np.max(np.diff(y), initial=-math.inf)),
            _convexity_violation(x, y),
            0.0,
        )
        return v

    def is_valid(self, tol: float = 1e-9) -> bool:
        """True when the polygon is a tradeoff function up to ``tol`` (see
        :meth:`validity_violation`)."""
        return self.validity_violation() <= tol

    def validate(self, tol: float = 1e-9) -> TradeoffCurve:
        """Raise :class:`ParameterError` unless :meth:`is_valid`; return self."""
        v = self.validity_violation()
        if not v <= tol:
            raise ParameterError(
                "tradeoff curve",
                repr(self),
                "must be convex, non-increasing, in [0,1], below 1 - alpha, on [0,1] "
                f"(violation {v:.3g} > tol {tol:g})",
            )
        return self

    # -- conversions ----------------------------------------------------------------------------
    def _one_sided_profile(self, eps: np.ndarray, inverse: bool) -> np.ndarray:
        """``max(0, max_i 1 - f_i - e^eps alpha_i)`` (roles swapped for ``f^{-1}``), without the
        margin.

        ``e^eps alpha_i`` is evaluated as ``exp(eps + log alpha_i)`` (overflow to +inf is harmless,
        alpha = 0 gives 0), so arbitrarily large eps and tiny alpha_i are handled exactly."""
        x, y = (self._y, self._x) if inverse else (self._x, self._y)
        flat = eps.ravel()
        with np.errstate(divide="ignore"):
            log_x = np.log(x)
        base = 1.0 - y
        res = np.empty(flat.size)
        with np.errstate(over="ignore"):
            for start in range(0, flat.size, 256):
                e = flat[start : start + 256, None]
                finite_e = np.where(np.isinf(e), 0.0, e)
                t = np.where(np.isinf(e) & (x[None, :] > 0), np.inf, finite_e + log_x[None, :])
                res[start : start + 256] = np.max(base[None, :] - np.exp(t), axis=1)
        return np.maximum(res.reshape(eps.shape), 0.0)

    def privacy_profile(
        self, epsilons: ArrayLike, *, symmetric: bool = False
    ) -> float | np.ndarray:
        """``delta(eps) = max(delta_f(eps), delta_{f^-1}(eps)) + PROFILE_MARGIN`` (docs/theorems.md
        1.3), clipped to [0, 1], with ``delta_f(eps) = 1 + f*(-e^eps)``.

        For the polygon the conjugate is exact: ``delta_f(eps) = max(0, max_i 1 - f_i - e^eps
        alpha_i)``; for ``f^{-1}`` the roles of alpha and f swap. ``PROFILE_MARGIN`` (~3.6e-15)
        covers floating-point rounding of the vertices (module docstring). ``eps >= 0`` (``+inf``
        allowed). ``symmetric=True`` skips the ``f^{-1}`` side, which is only correct for symmetric
        curves; the default uses both sides and never under-reports.
        """
        e = _as_float_array("epsilons", epsilons)
        if (e < 0).any():
            raise ParameterError("epsilons", epsilons, "must be >= 0")
        d = self._one_sided_profile(e, inverse=False)
        if not symmetric:
            d = np.maximum(d, self._one_sided_profile(e, inverse=True))
        return _scalar_or_array(np.clip(d + PROFILE_MARGIN, 0.0, 1.0))

    def _one_sided_epsilon(self, target: float, inverse: bool) -> float:
        x, y = (self._y, self._x) if inverse else (self._x, self._y)
        need = 1.0 - y - target
        if ((x == 0.0) & (need > 0.0)).any():
            return math.inf
        mask = (x > 0.0) & (need > 0.0)
        if not mask.any():
            return 0.0
        return max(0.0, float(np.max(np.log(need[mask]) - np.log(x[mask]))))

    def epsilon(self, delta: float) -> float:
        """Smallest ``eps >= 0`` with ``privacy_profile(eps) <= delta`` (exact for the polygon,
        margin included).

        Closed form: with ``t = delta - PROFILE_MARGIN``, ``eps_f = max_i log((1 - f_i - t) /
        alpha_i)`` over vertices with ``1 - f_i > t`` (``inf`` if such a vertex has ``alpha_i =
        0``), likewise for ``f^{-1}``; the larger side is then nudged upwards until
        ``privacy_profile(eps) <= delta`` holds in floating point. Returns ``math.inf`` when no
        finite epsilon achieves ``delta`` (e.g. ``f_{eps0,delta0}`` with ``delta <= delta0``, or
        ``delta <= PROFILE_MARGIN``).
        """
        d = check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
        t = d - PROFILE_MARGIN
        if t <= 0.0:
            return math.inf
        eps = max(self._one_sided_epsilon(t, False), self._one_sided_epsilon(t, True))
        if not math.isfinite(eps):
            return math.inf
        step = max(eps, 1e-300) * 2.0**-52
        while float(self.privacy_profile(eps)) > d:
            eps += step
            step *= 2.0
            if not math.isfinite(eps):  # pragma: no cover - profile tends to its limit <= t
                return math.inf
        return float(eps)

    # -- operations -----------------------------------------------------------------------------
    def inverse(self) -> TradeoffCurve:
        """Left-continuous inverse ``f^{-1}(y) = inf{x : f(x) <= y}`` (exact reflection of the
        vertices; ``f^{-1} = 0`` on ``[f(0), 1]``)."""
        X = self._y[::-1].copy()
        Y = self._x[::-1].copy()
        # Equal X (only possible at X = 0 for a valid curve): keep the smallest Y (the infimum). X
        # is non-decreasing, so runs of equal X are contiguous and np.unique's first indices delimit
        # them.
        uniq, idx = np.unique(X, return_index=True)
        X, Y = uniq, np.minimum.reduceat(Y, idx)
        if X[0] != 0.0:  # cannot happen for a valid curve (f(1) = 0), keep the point set consistent
            X = np.concatenate([[0.0], X])
            Y = np.concatenate([[Y[0]], Y])
        if X[-1] < 1.0:
            X = np.concatenate([X, [1.0]])
            Y = np.concatenate([Y, [0.0]])
        return TradeoffCurve._from_points(X, Y)

    def symmetrize(self) -> TradeoffCurve:
        """``min{f, f^{-1}}**`` = lower convex hull of the vertices of f and f^{-1} (exact for the
        polygon).

        Its privacy profile equals ``max(delta_f, delta_{f^-1})`` (docs/theorems.md 1.3)."""
        inv = self.inverse()
        return TradeoffCurve._from_points(
            np.concatenate([self._x, inv._x]), np.concatenate([self._y, inv._y])
        )

    def pointwise_max(self, other: TradeoffCurve) -> TradeoffCurve:
        """``max{f, g}``: if a mechanism is both f-DP and g-DP it is ``max{f, g}``-DP (the max of
        two convex functions is convex). Exact: vertices of both plus the crossing points."""
        if not isinstance(other, TradeoffCurve):
            raise ParameterError("other", other, "must be a TradeoffCurve")
        xs = np.union1d(self._x, other._x)
        f = np.interp(xs, self._x, self._y)
        g = np.interp(xs, other._x, other._y)
        diff = f - g
        cross = np.nonzero(diff[:-1] * diff[1:] < 0)[0]
        if cross.size:
            t = diff[cross] / (diff[cross] - diff[cross + 1])
            xc = xs[cross] + t * (xs[cross + 1] - xs[cross])
            xs = np.concatenate([xs, xc])
            xs.sort()
            f = np.interp(xs, self._x, self._y)
            g = np.interp(xs, other._x, other._y)
        # The crossing abscissae are rounded (an error of order 1e-16 relative, covered by the final
        # pessimistic shrink); the values are re-evaluated on both polygons at the rounded
        # abscissae.
        return TradeoffCurve._from_points(xs, np.maximum(f, g))

    def subsample(self, p: float) -> TradeoffCurve:
        """Subsampling operator ``C_p(f) = min{f_p, f_p^{-1}}**`` with ``f_p = p f + (1 - p) Id``
        (docs/theorems.md 1.6; DRS22 Def. 6 / Thm 9). Exact for the polygon (``f_p`` is a
        vertex-wise combination, then :meth:`symmetrize`). ``p`` in [0, 1]."""
        pp = _check_probability_closed("p", p)
        fp = TradeoffCurve._raw(self._x, pp * self._y + (1.0 - pp) * (1.0 - self._x))
        return fp.symmetrize()


def _convexity_violation(x: np.ndarray, y: np.ndarray) -> float:
    """Max over interior vertices of ``y_i - chord_{i-1,i+1}(x_i)`` (0 if convex)."""
    if x.size < 3:
        return 0.0
    x0, x1, x2 = x[:-2], x[1:-1], x[2:]
    y0, y1, y2 = y[:-2], y[1:-1], y[2:]
    w = (x1 - x0) / (x2 - x0)
    chord = y0 + w * (y2 - y0)
    return float(max(np.max(y1 - chord), 0.0))


def _upper_envelope_on_unit_interval(
    slopes: np.ndarray, intercepts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Vertices on [0, 1] of ``max_k (slopes_k x + intercepts_k)`` (convex hull trick, exact up to
    rounding).

    The returned values are re-evaluated as the max over all lines at each vertex, so rounding of
    the breakpoints cannot raise the curve above the true envelope.
    """
    order = np.lexsort((intercepts, slopes))
    a = slopes[order]
    b = intercepts[order]
    keep = np.ones(a.size, dtype=bool)
    keep[:-1] = a[:-1] != a[1:]  # for equal slopes keep the largest intercept (last after lexsort)
    a, b = a[keep], b[keep]
    hull_a: list[float] = []
    hull_b: list[float] = []

    def _cross(a1: float, b1: float, a2: float, b2: float) -> float:
        return (b1 - b2) / (a2 - a1)

    for ai, bi in zip(a.tolist(), b.tolist(), strict=True):
        while len(hull_a) >= 2 and _cross(hull_a[-2], hull_b[-2], ai, bi) <= _cross(
            hull_a[-2], hull_b[-2], hull_a[-1], hull_b[-1]
        ):
            hull_a.pop()
            hull_b.pop()
        hull_a.append(ai)
        hull_b.append(bi)
    bps = [
        _cross(hull_a[k], hull_b[k], hull_a[k + 1], hull_b[k + 1]) for k in range(len(hull_a) - 1)
    ]
    xs = np.array([0.0, 1.0] + [t for t in bps if 0.0 < t < 1.0])
    xs.sort()
    ys = np.max(a[None, :] * xs[:, None] + b[None, :], axis=1)
    return xs, ys
