"""The :class:`Pld` class, its result types and constructors (connect-the-dots one-step PLDs)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from lastiterate.errors import (
    BeyondEngineRange,
    NotApplicable,
    ParameterError,
    check_in_range,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_probability,
)
from lastiterate.notions import normal
from lastiterate.notions.adjacency import Adjacency
from lastiterate.notions.pld._common import (
    DEFAULT_DISCRETIZATION,
    DEFAULT_LOG_MASS_TRUNCATION_BOUND,
    DEFAULT_TAIL_MASS_TRUNCATION,
    _GridTooLarge,
    grid_budget,
    max_grid_points,
)
from lastiterate.notions.pld.kernels import (
    _compose_two,
    _delta_for_epsilon,
    _epsilon_for_delta,
    _identity_pmf,
    _masses_from_values,
    _Pmf,
    _self_compose,
)
from lastiterate.notions.pld.profiles import (
    EPS,
    UNDERFLOW,
    _gaussian_parts,
    _gaussian_parts_bounded,
    _log_amplified,
    _log_amplified_error,
    _replace_parts,
    _replace_parts_bounded,
    _subsampled_parts,
    _subsampled_parts_bounded,
)
from lastiterate.notions.roots import brent_root

# ---------------------------------------------------------------------------------------------
# Public result types
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PldError:
    """What the discretisation did (all of it in the pessimistic direction for ``upper``).

    Attributes:
        value_discretization_interval: grid width Delta of the privacy loss.
        truncation_mass: bound on the additive over-estimate of delta caused by truncation
            (one-step cuts and Chernoff windows moved to +inf, negligible low-loss mass moved up);
            already contained in every upper value.
        log_mass_truncation_bound: one-step profiles were cut where delta <= exp(this).
        has_lower: whether an optimistic twin (certified lower estimate) is carried.
        lower_slack: additive allowance on the optimistic twin's delta (FFT wrap-around and
            round-off); lower epsilons are computed at ``delta + lower_slack``.
    """

    value_discretization_interval: float
    truncation_mass: float
    log_mass_truncation_bound: float
    has_lower: bool
    lower_slack: float


@dataclass(frozen=True)
class EpsilonEstimate:
    """Certified bracket ``lower <= epsilon <= upper`` at a given delta.

    ``upper`` is a valid (pessimistic) epsilon.  ``lower`` (when available) is a certified lower
    bound on the epsilon of the exact (undiscretised) object, so ``upper - lower`` bounds the
    discretisation error.  ``discretization`` is the grid width used.
    """

    upper: float
    lower: float | None
    delta: float
    discretization: float
    truncation_mass: float

    @property
    def relative_width(self) -> float | None:
        """``(upper - lower) / upper`` (0 when both are 0), or None without a lower bound."""
        if self.lower is None:
            return None
        if self.upper == 0.0:
            return 0.0
        return (self.upper - self.lower) / self.upper


# ---------------------------------------------------------------------------------------------
# The Pld wrapper
# ---------------------------------------------------------------------------------------------


class Pld:
    """Immutable discretised privacy-loss distribution (pessimistic), optionally with a lower twin.

    Holds one PMF for a symmetric pair, or a ``remove`` and an ``add`` PMF for add/remove
    adjacency (delta is the max over the two directions, as dp_accounting).  Construct with the
    factory functions of this module or :meth:`from_dp_accounting`; combine with :meth:`compose`
    and :meth:`self_compose`; query with :meth:`epsilon`, :meth:`delta`,
    :meth:`epsilon_with_error`.  :meth:`to_dp_accounting` returns the equivalent
    ``dp_accounting`` ``PrivacyLossDistribution``.
    """

    __slots__ = (
        "_add",
        "_d",
        "_description",
        "_log_bound",
        "_low_add",
        "_low_remove",
        "_low_slack",
        "_remove",
        "_trunc",
    )

    def __init__(
        self,
        *,
        description: str,
        discretization: float,
        remove: _Pmf,
        add: _Pmf | None,
        lower_remove: _Pmf | None = None,
        lower_add: _Pmf | None = None,
        truncation_mass: float = 0.0,
        lower_slack: float = 0.0,
        log_mass_truncation_bound: float = DEFAULT_LOG_MASS_TRUNCATION_BOUND,
    ) -> None:
        """Internal constructor; use the module's factory functions."""
        self._description = description
        self._d = float(discretization)
        self._remove = remove
        self._add = add
        self._low_remove = lower_remove
        self._low_add = lower_add
        self._trunc = float(truncation_mass)
        self._low_slack = float(lower_slack)
        self._log_bound = float(log_mass_truncation_bound)

    def __setattr__(self, name: str, value: object) -> None:
        if hasattr(self, name):
            raise AttributeError("Pld is immutable")
        object.__setattr__(self, name, value)

    # -- descriptive properties -------------------------------------------------------------

    @property
    def description(self) -> str:
        """Human-readable description of the mechanism this PLD represents."""
        return self._description

    @property
    def discretization(self) -> float:
        """Grid width (``value_discretization_interval``) of the privacy loss."""
        return self._d

    @property
    def symmetric(self) -> bool:
        """True when one PMF describes both directions (e.g. replace-one, Gaussian)."""
        return self._add is None

    @property
    def has_lower(self) -> bool:
        """True when an optimistic twin is carried (see :meth:`epsilon_with_error`)."""
        return self._low_remove is not None

    @property
    def error(self) -> PldError:
        """Discretisation and truncation information (see :class:`PldError`)."""
        return PldError(
            value_discretization_interval=self._d,
            truncation_mass=self._trunc,
            log_mass_truncation_bound=self._log_bound,
            has_lower=self.has_lower,
            lower_slack=self._low_slack,
        )

    @property
    def size(self) -> int:
        """Number of grid points held (both directions)."""
        return len(self._remove.probs) + (0 if self._add is None else len(self._add.probs))

    def __repr__(self) -> str:
        return (
            f"Pld({self._description!r}, discretization={self._d:g}, "
            f"size={self.size}, lower={'yes' if self.has_lower else 'no'})"
        )

    # -- queries ----------------------------------------------------------------------------

    def _pmfs(self) -> list[_Pmf]:
        return [self._remove] if self._add is None else [self._remove, self._add]

    def _low_pmfs(self) -> list[_Pmf]:
        if self._low_remove is None:
            return []
        return [self._low_remove] if self._low_add is None else [self._low_remove, self._low_add]

    def epsilon(self, delta: float) -> float:
        r"""Smallest :math:`\varepsilon \ge 0` such that the (pessimistic) profile is <= ``delta``.

        A valid epsilon for the described mechanism at this delta (upper bound).  Returns
        ``math.inf`` when the mass at +inf already exceeds ``delta``.
        """
        delta = check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
        return max(_epsilon_for_delta(p, self._d, delta) for p in self._pmfs())

    def delta(self, epsilon: float) -> float:
        r"""Pessimistic hockey-stick divergence :math:`\delta(\varepsilon)` (max over directions).

        Any real epsilon is accepted (negative values describe the tradeoff curve).
        """
        epsilon = check_in_range("epsilon", epsilon, -1e6, 1e6)
        return max(_delta_for_epsilon(p, self._d, epsilon) for p in self._pmfs())

    def epsilon_with_error(self, delta: float) -> EpsilonEstimate:
        """Return ``EpsilonEstimate(upper, lower, ...)``; ``lower`` is None without a twin."""
        upper = self.epsilon(delta)
        lower: float | None = None
        lows = self._low_pmfs()
        if lows:
            target = delta + self._low_slack
            lower = (
                0.0 if target >= 1.0 else max(_epsilon_for_delta(p, self._d, target) for p in lows)
            )
            if lower > upper * (1.0 + 1e-9) + 1e-12:  # pragma: no cover - would be a bug
                raise RuntimeError(
                    f"internal inconsistency: lower bound {lower!r} exceeds upper bound {upper!r} "
                    f"for {self._description}"
                )
            lower = min(lower, upper)  # equal up to float rounding
        return EpsilonEstimate(
            upper=upper,
            lower=lower,
            delta=delta,
            discretization=self._d,
            truncation_mass=self._trunc,
        )

    def delta_with_error(self, epsilon: float) -> tuple[float, float | None]:
        """``(upper, lower)`` bracket of delta at ``epsilon`` (lower None without a twin)."""
        upper = self.delta(epsilon)
        upper_eps = float(epsilon)
        lows = self._low_pmfs()
        if not lows:
            return upper, None
        lower = max(_delta_for_epsilon(p, self._d, upper_eps) for p in lows)
        return upper, max(0.0, min(upper, lower - self._low_slack))

    # -- composition ------------------------------------------------------------------------

    def _check_same_grid(self, other: Pld) -> None:
        if not isinstance(other, Pld):
            raise ParameterError("other", other, "must be a Pld")
        if other._d != self._d:
            raise ParameterError(
                "other",
                other.description,
                f"must have the same discretization ({self._d:g}), got {other._d:g}",
            )

    def compose(
        self, other: Pld, *, tail_mass_truncation: float = DEFAULT_TAIL_MASS_TRUNCATION
    ) -> Pld:
        """PLD of running both mechanisms (independent noise); both must share the grid width.

        Linear FFT convolution of the PMFs (as ``dp_accounting``'s ``compose``) with pessimistic
        tail truncation of at most ``tail_mass_truncation`` (recorded in :attr:`error`).  The
        optimistic twin is carried only if both operands have one.
        """
        self._check_same_grid(other)
        tail = check_in_range("tail_mass_truncation", tail_mass_truncation, 0.0, 1e-3)
        rem, t1 = _compose_two(self._remove, other._remove, tail, True)
        add: _Pmf | None = None
        t2 = 0.0
        if not (self.symmetric and other.symmetric):
            add, t2 = _compose_two(
                self._add or self._remove, other._add or other._remove, tail, True
            )
        low_rem = low_add = None
        slack = 0.0
        if self.has_lower and other.has_lower:
            low_rem, s1 = _compose_two(self._low_remove, other._low_remove, tail, False)  # type: ignore[arg-type]
            s2 = 0.0
            if add is not None:
                low_add, s2 = _compose_two(
                    self._low_add or self._low_remove,  # type: ignore[arg-type]
                    other._low_add or other._low_remove,  # type: ignore[arg-type]
                    tail,
                    False,
                )
            slack = self._low_slack + other._low_slack + max(s1, s2)
        return Pld(
            description=f"{self._description} ⊗ {other._description}",
            discretization=self._d,
            remove=rem,
            add=add,
            lower_remove=low_rem,
            lower_add=low_add,
            truncation_mass=self._trunc + other._trunc + max(t1, t2),
            lower_slack=slack,
            log_mass_truncation_bound=max(self._log_bound, other._log_bound),
        )

    def self_compose(
        self, k: int, *, tail_mass_truncation: float = DEFAULT_TAIL_MASS_TRUNCATION
    ) -> Pld:
        """PLD of ``k`` independent runs (``k = 0`` gives perfect privacy).

        One real-FFT power on a Chernoff window (see module docstring); truncation at most
        ``tail_mass_truncation``.
        """
        k = check_positive_int("k", k, minimum=0)
        tail = check_in_range("tail_mass_truncation", tail_mass_truncation, 0.0, 1e-3)
        if k == 0:
            return identity_pld(discretization=self._d, with_lower=self.has_lower)
        if k == 1:
            return self
        return _compose_power(self, k, None, tail)

    # -- interoperability -------------------------------------------------------------------

    def to_dp_accounting(self):  # -> dp_accounting PrivacyLossDistribution
        """The equivalent pessimistic ``dp_accounting`` ``PrivacyLossDistribution``."""
        try:  # lazy: dp-accounting is an optional extra (and costs ~1 s to import)
            from dp_accounting.pld import pld_pmf, privacy_loss_distribution
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(
                "to_dp_accounting needs dp-accounting: pip install 'lastiterate[dp-accounting]'"
            ) from exc

        def dense(p: _Pmf) -> object:
            return pld_pmf.DensePLDPmf(self._d, p.lower, np.array(p.probs), p.infinity_mass, True)

        add = None if self._add is None else dense(self._add)
        return privacy_loss_distribution.PrivacyLossDistribution(dense(self._remove), add)

    @classmethod
    def from_dp_accounting(cls, pld: object, *, description: str = "dp_accounting PLD") -> Pld:
        """Wrap a pessimistic ``dp_accounting`` ``PrivacyLossDistribution`` (no lower twin).

        Reads dp_accounting 0.6's internal fields; raises ``TypeError`` if they are missing or the
        PLD is optimistic, never guesses.
        """
        try:
            rem = pld._pmf_remove.to_dense_pmf()  # type: ignore[attr-defined]
            add = None if pld._symmetric else pld._pmf_add.to_dense_pmf()  # type: ignore[attr-defined]
            pmfs = [rem] if add is None else [rem, add]
            for p in pmfs:
                if not p._pessimistic_estimate:
                    raise TypeError("only pessimistic dp_accounting PLDs can be wrapped")
            d = float(rem._discretization)

            def conv(p: Any) -> _Pmf:  # a DensePLDPmf (dp_accounting ships no type information)
                return _Pmf(
                    int(p._lower_loss), np.array(p._probs, dtype=float), float(p._infinity_mass)
                )

            return cls(
                description=description,
                discretization=d,
                remove=conv(rem),
                add=None if add is None else conv(add),
            )
        except AttributeError as exc:  # pragma: no cover - depends on dp_accounting internals
            raise TypeError(
                f"not a dp_accounting PrivacyLossDistribution (0.6 layout): {exc}"
            ) from exc


# ---------------------------------------------------------------------------------------------
# Constructors
# ---------------------------------------------------------------------------------------------


#: grid budget of the accountant's compositions (see :func:`on_feasible_grid`): about 1e6 points
#: keeps one composition well under a second; the memory cap ``_MAX_GRID_POINTS`` stays the limit
#: for direct calls of the engine
ACCOUNTING_GRID_POINTS = 2**20


def _coarser_grid(d: float, points: float) -> float:
    """The grid width to retry with after a grid of width ``d`` needed ``points`` points."""
    new = d * max(2.0, 2.0 * points / max_grid_points())
    if new > 1.0:
        raise NotApplicable(
            f"the privacy-loss distribution would need {points:.3g} grid points even at width "
            f"{d:g}; its support is too wide to bound numerically"
        )
    return new


def on_feasible_grid(
    build: Callable[[float], Pld],
    discretization: float = DEFAULT_DISCRETIZATION,
    *,
    max_points: int = ACCOUNTING_GRID_POINTS,
) -> Pld:
    """``build(d)`` at the finest width ``d >= discretization`` whose grids hold ``max_points``.

    The grid is chosen from the accuracy the mechanism allows, never left to the user: when a
    one-step profile or a composition window would need more than ``max_points`` points (huge
    Gaussian factors, very long compositions: a privacy loss spread over a range R), the width is
    multiplied until it fits, i.e. about R / max_points, whose error is a tiny fraction of an
    epsilon that large.  A coarser grid is still pessimistic (an upper bound, with a wider
    bracket).  An enclosing :func:`grid_budget` can only lower ``max_points``.  Raises
    ``NotApplicable`` when no width up to 1 fits.
    """
    d = _check_discretization(discretization)
    with grid_budget(min(max_points, max_grid_points())):
        while True:
            try:
                return build(d)
            except _GridTooLarge as exc:
                d = _coarser_grid(d, exc.points)


def _check_discretization(d: float) -> float:
    return check_in_range("discretization", d, 1e-7, 1.0, low_open=False)


def _check_log_bound(b: float) -> float:
    return check_in_range("log_mass_truncation_bound", b, -700.0, -5.0)


def _top_index(
    parts: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], d: float, log_bound: float
) -> int:
    """Smallest grid index n >= 1 with delta(n * d) <= exp(log_bound) (the profile is
    non-increasing).

    The crossing of ``log delta`` with ``log_bound`` is bracketed by doubling and narrowed to a
    quarter of a grid step by Brent's method (:func:`lastiterate.notions.roots.brent_root`); the
    scan for the first grid point that meets the bound starts at the lower end of that bracket,
    where ``delta`` is not below the bound (a strictly decreasing profile is above it at every
    earlier grid point), so the index does not depend on which end the root finder stops at.
    """
    target = math.exp(log_bound)

    def delta_at(x: float) -> float:
        return float(parts(np.array([x]))[0][0])

    if delta_at(d) <= target:
        return 1
    hi = 1.0
    while delta_at(hi) > target:
        hi *= 2.0
        if hi > 1e5:
            raise BeyondEngineRange(
                f"the per-step privacy profile is still above {target:.3g} at epsilon 1e5 "
                "(per-step privacy loss beyond the PLD engine's range: far too little noise)"
            )
    log_target = math.log(target)  # not log_bound: the sign of f must agree with the scan's test
    root = brent_root(
        lambda t: math.log(max(delta_at(t), 1e-320)) - log_target, 0.0, hi, xtol=d / 4
    )
    n = max(1, math.ceil(root.nonnegative_end / d))
    while delta_at(n * d) > target:
        n += 1
    if n > max_grid_points():
        raise _GridTooLarge(n)
    return n


def _lower_residuals(mid_a: np.ndarray, mid_b: np.ndarray, lin: np.ndarray, d: float) -> np.ndarray:
    r"""Optimistic (below-the-profile) curve at grid points ``0..top``, minus a linear part.

    With :math:`T_c(u) = \delta(c) - Q(L > c)(u - u_c)` the tangent of the convex profile at the
    midpoint :math:`u_c = e^{c\Delta}`, the curve takes at grid point i the value
    :math:`v_i = \min(T_{i-1/2}(u_i), T_{i+1/2}(u_i))`: both ends of a segment lie below the
    tangent at its midpoint, so the piecewise-linear curve lies below the profile, with a
    second-order error like connect-the-dots.  The last value is 0 (no mass at +inf), placed at
    the last grid point where the left tangent is still >= 0, which keeps the last segment below
    its tangent too.

    To keep precision when the profile is close to a known linear function ``lin`` of u (e.g.
    ``1 - u``), everything is in residual form: ``T_c(u) - lin(u) = a_c + b_c (u/u_c - 1)`` with
    ``mid_a``/``mid_b`` given at the midpoints ``-1/2, 1/2, ..., m - 1/2`` and ``lin`` at the grid
    points ``0..m``; the return value is ``v - lin`` on ``0..top``.
    """
    right_of = mid_a + mid_b * math.expm1(d / 2)  # residual of T_c at the grid point above c
    left_of = mid_a + mid_b * math.expm1(-d / 2)  # residual of T_c at the grid point below c
    rho = np.minimum(right_of[:-1], left_of[1:])  # grid point r lies above mid r, below mid r+1
    rho = np.append(rho, -lin[-1])  # value 0 at the top
    bad = np.nonzero(lin[1:] + right_of[1:] < 0.0)[0]
    if len(bad):
        cut = int(bad[0])  # the first failing grid point is bad + 1: put the zero one step lower
        rho = rho[: cut + 1].copy()
        rho[cut] = -lin[cut]
    return rho


def _carry_up(masses: np.ndarray) -> tuple[np.ndarray, float]:
    r"""Make signed masses non-negative by pushing every negative mass to higher losses.

    Replacing (mass ``-a`` at :math:`\ell_i`, ``b`` at :math:`\ell_{i+1}`) by (0, ``b - a``) changes
    the profile by :math:`a[(1-ue^{-\ell_i})_+ - (1-ue^{-\ell_{i+1}})_+] \le 0` for every u, so the
    result stays below the profile (lower-safe).  In closed form: with tail sums
    :math:`R_i = \sum_{j\ge i} m_j` and their running minimum :math:`M_i = \min_{j \le i} R_j`, the
    new masses are :math:`M_i - M_{i+1} \ge 0` (tail sums keep the precision of tiny tail masses).
    A negative total left at the top (``-min R``) cannot be pushed further; it is returned as an
    additive slack on delta.
    """
    r = np.append(np.cumsum(masses[::-1])[::-1], 0.0)
    m = np.minimum.accumulate(r)
    out = m[:-1] - m[1:]
    untouched = (m[:-1] == r[:-1]) & (m[1:] == r[1:]) & (masses >= 0)
    out[untouched] = masses[untouched]
    return out, max(0.0, -float(m[-1]))


# ---------------------------------------------------------------------------------------------
# Inward rounding of the optimistic (lower) PMFs
# ---------------------------------------------------------------------------------------------
#
# The optimistic curve lies below the exact profile by construction (each segment below the
# tangent at its midpoint), but its computed PMF can exceed it by round-off: the tangents are
# evaluated from special functions, and the masses are second differences of the curve's values
# (measured against 50-digit mpmath: 6.3e-14 relative at log(1 - q) for q = 0.5, z = 0.8,
# Delta = 1e-4, tests/notions/test_pld_margins.py).  The mirror image of the outward rounding of
# the upper PMFs: at every grid point we bound how far the PMF's profile can lie ABOVE the curve
# built from the exact tangents -- the tangents' evaluation error (:func:`_tangent_errors`), the
# masses' rounding (:func:`_mass_rounding`, :func:`_right_kernel`) and that of the tail sums of
# :func:`_carry_up` (:func:`_carry_up_error`) -- and multiply every mass by 1 - rho, with
# rho * (B_i - deficit_i) >= deficit_i where the deficit is at most half the value
# (:func:`_outward_scale`); the rest (and 1e-3 of the one-step truncation threshold) is added
# to the lower twin's additive slack.  A segment whose two ends lie below the exact tangent at its
# midpoint lies below the exact profile, so the scaled PMF's profile does at every epsilon.

def _slope_accuracy(b: np.ndarray, mids: np.ndarray) -> np.ndarray:
    r"""Relative accuracy assumed of a tangent's slope :math:`b_c` (:math:`\pm u_c Q(\cdot)`, the
    exp of a sum of ``log_ndtr`` values, logs and c): ``log_ndtr`` is within 8 EPS of its value
    (:mod:`.profiles`), and its argument's rounding moves it by at most EPS s(s + 1) for an
    argument of size s, with :math:`s^2/2 \le |\log\Phi| + 1` in the tail; so EPS times
    ``16 (|log |b|| + |c|) + 64`` covers both with a factor 2.  (A model, not a derivation, where
    the argument's own error is amplified -- next to :math:`\log(1-q)`, where the slope is below
    1e-12 of the value; tests/notions/test_pld_margins.py checks the curve against mpmath.)"""
    with np.errstate(divide="ignore"):
        size = np.abs(np.log(np.abs(b)))
    size = np.where(np.isfinite(size), size, 0.0)
    return EPS * (16.0 * (size + np.abs(mids)) + 64.0)


def _mid_errors(
    a: np.ndarray, a_err: np.ndarray, b: np.ndarray, mids: np.ndarray, d: float
) -> np.ndarray:
    """Error bound of each midpoint tangent :math:`a_c + b_c (u/u_c - 1)`'s value at the grid
    points next to it: ``a_err + |b| (slope accuracy + 2 EPS) expm1(Delta/2)``
    (:func:`_slope_accuracy`) plus the rounding of :math:`a + b x` (EPS of ``|a| + |b x|``)."""
    x = math.expm1(d / 2.0)
    bx = np.abs(b) * x
    return a_err + (_slope_accuracy(b, mids) + 2.0 * EPS) * bx + EPS * (np.abs(a) + bx)


def _settle_top(
    r: np.ndarray, lin: np.ndarray, a: np.ndarray, b: np.ndarray, mid_err: np.ndarray, d: float
) -> np.ndarray:
    r"""Move the optimistic curve's final zero down until the left tangent at it is at least its
    own error bound (``mid_err``, :func:`_mid_errors`).

    The curve ``lin + r`` ends with the value 0 at its last grid point t, which keeps the last
    segment below the tangent at the midpoint :math:`t - 1/2` when that tangent is >= 0 at
    :math:`u_t`; the computed tangent is only known to within ``mid_err``, so the zero is moved to
    the grid point below (the curve only falls) while the computed tangent there is below it.
    ``a``, ``b`` are the tangents at the midpoints ``-1/2, 1/2, ...`` in the same residual form
    as ``r``.  The cost is one grid point of the curve near where it reaches 0."""
    x = math.expm1(d / 2.0)  # u_t / u_{t - 1/2} - 1
    t = len(r) - 1
    while t >= 1 and lin[t] + a[t] + b[t] * x < mid_err[t]:
        t -= 1
    if t == len(r) - 1:
        return r
    out = np.array(r[: t + 1])
    out[t] = -lin[t]
    return out


def _tangent_errors(per_mid: np.ndarray, length: int) -> np.ndarray:
    r"""Bound on the evaluation error of the optimistic curve's value at grid points ``0 ..
    length - 1`` (:func:`_lower_residuals`) from the error bounds ``per_mid`` of the tangents at
    the midpoints ``-1/2, 1/2, ...`` (:func:`_mid_errors`): the value at a grid point is the
    smaller of the two neighbouring tangents there, so it is within the larger of their bounds of
    the value the exact tangents give.  The last point (the value 0 at the top) gets its
    neighbour's bound (the callers set its deficit to 0: no mass lies above it)."""
    out = np.maximum(per_mid[:-1], per_mid[1:])
    out = np.append(out, out[-1] if len(out) else per_mid[-1])
    if len(out) < length:
        out = np.append(out, np.full(length - len(out), out[-1]))
    return _FIRST_ORDER_MARGIN * out[:length]


def _carry_up_error(masses: np.ndarray) -> tuple[np.ndarray, float]:
    r"""Bound on how far :func:`_carry_up`'s rounding moves the profile at each grid point, and on
    the error of its slack.

    The touched masses are differences of running minima of the tail sums
    :math:`R_j = \sum_{l \ge j} m_l`, computed by a sequential reverse sum, each within
    :math:`u \sum_{l \ge j} |\hat R_l|` (Higham, *Accuracy and Stability*, §4.2); a running
    minimum is off by at most the error of the sum it was taken from.  By Abel summation the
    profile at :math:`\ell_i` moves by at most twice the largest such error above i.  Zero where
    nothing is touched."""
    r = np.append(np.cumsum(masses[::-1])[::-1], 0.0)
    m = np.minimum.accumulate(r)
    untouched = (m[:-1] == r[:-1]) & (m[1:] == r[1:]) & (masses >= 0)
    if bool(np.all(untouched)):
        return np.zeros(len(masses)), 0.0
    u = EPS / 2.0
    e = u * np.cumsum(np.abs(r)[::-1])[::-1]
    e *= 1.0 + 2.0 * len(r) * EPS
    dm = e + e[_source_of_running_min(r, m)]
    dm[:-1][untouched] = 0.0
    above = np.maximum.accumulate(dm[::-1])[::-1]  # max over j >= i
    out = 2.0 * _FIRST_ORDER_MARGIN * above[1:]  # max over j > i (the top's m included)
    return out, float(dm[-1])


def _inward_margin(values: np.ndarray, deficit: np.ndarray, floor: float) -> tuple[float, float]:
    """``(rho, slack)`` of :func:`_deflate` for a lower PMF whose profile at the grid points is
    within ``deficit`` above the curve ``values`` (:func:`_outward_scale`; the absolute part goes
    to the lower twin's slack)."""
    rho, extra = _outward_scale(deficit, np.maximum(values, 0.0), floor)
    return rho, floor + extra


def _deflate(masses: np.ndarray, rho: float) -> np.ndarray:
    r"""Multiply every mass by a factor :math:`\le 1 - \rho` that survives its own rounding
    (:math:`1 - \rho - 2\,\mathrm{EPS}`, rounded down)."""
    factor = float(np.nextafter(max(0.0, 1.0 - rho - 2.0 * EPS), 0.0))
    return masses * factor


def _lower_masses(
    rho: np.ndarray,
    i_lo: int,
    d: float,
    one_minus_u: bool,
    tan_err: np.ndarray | None = None,
    floor: float = 0.0,
) -> tuple[np.ndarray, float]:
    """Masses of the optimistic curve ``v = lin + rho`` on the grid ``i_lo, i_lo + 1, ...``.

    ``lin`` is 0 or ``1 - u``; a linear part has no second differences, so interior masses come
    from ``rho`` alone (accurate even where v is close to 1).  Left of the first grid point the
    curve is the chord to (0, 1), which lies below ``1 - u <= delta`` when ``v_0 <= 1 - u_0`` (for
    ``lin = 1 - u`` a positive ``rho_0`` -- at most the profile's tiny excess over 1 - u there -- is
    counted as slack).  The min-of-tangents values need not be convex where the profile's
    curvature changes within a grid step (next to an atom), so the signed masses are made
    non-negative with :func:`_carry_up`, which only lowers the curve.  With ``tan_err`` (the
    values' evaluation error) the masses are rounded inward (:func:`_inward_rounding`).
    """
    if len(rho) == 1:
        return np.array([1.0]), 0.0
    bottom = -rho[0] if one_minus_u else 1.0 - rho[0]
    masses = _masses_from_values(rho, d, bottom)
    if one_minus_u:
        masses[-1] += math.exp((i_lo + len(rho) - 1) * d)  # the linear part's top mass, u_top
    signed = masses
    masses, slack = _carry_up(masses)
    if one_minus_u:
        slack += max(float(rho[0]), 0.0)
    if tan_err is not None:
        grid = (i_lo + np.arange(len(rho))) * d
        lin = -np.expm1(grid) if one_minus_u else np.zeros(len(rho))
        tan = tan_err[: len(rho)]  # (computed before the zero was settled)
        masses, extra = _inward_rounding(masses, signed, rho, lin, bottom, tan, d, floor)
        slack += extra
    return masses, slack


def _inward_rounding(
    masses: np.ndarray,
    signed: np.ndarray,
    r: np.ndarray,
    lin: np.ndarray,
    bottom: float,
    tan_err: np.ndarray,
    d: float,
    floor: float,
) -> tuple[np.ndarray, float]:
    """Round the masses of an optimistic curve ``lin + r`` inward (block comment above
    :func:`_tangent_errors`): ``signed`` are its masses before :func:`_carry_up` (computed from
    ``r`` with ``bottom``, plus the exact masses of ``lin``), ``masses`` after it.  The deficit at
    each grid point is the values' evaluation error ``tan_err``, the masses' rounding, the tail
    sums' rounding, EPS of ``lin`` (the residual's top value is ``-lin``, rounded) and the
    rounding of the masses' losses and of the linear part's masses (:func:`_fixed_rounding`).
    Returns the scaled masses and the absolute part (for the slack)."""
    carry, carry_slack = _carry_up_error(signed)
    deficit = tan_err + _right_kernel(_mass_rounding(r, d, bottom), d) + carry
    deficit += EPS * (np.abs(lin) + np.abs(r))
    deficit[-1] = 0.0  # no mass lies above the last grid point: the profile there is 0
    value = lin + r
    rho, extra = _inward_margin(value, deficit, floor)
    rho += _fixed_rounding(len(r) * d, len(r))
    return _deflate(masses, rho), extra + carry_slack


def _mass_at_zero(v0: float, v1: float, d: float) -> float:
    """Connect-the-dots mass at loss 0 of a symmetric profile.

    ``v0 = delta(0)`` and ``v1 = delta(d)`` are the profile's values at the first two grid points.
    """
    return (v1 - v0) / math.expm1(d) + ((1.0 - v0) - math.exp(-d) * (1.0 - v1)) / -math.expm1(-d)


def _symmetric_masses(values: np.ndarray, d: float) -> np.ndarray:
    """Masses at 0, d, 2d, ... of the symmetric PMF whose profile interpolates ``values``."""
    pos = _masses_from_values(values, d, 0.0)
    pos[0] = _mass_at_zero(values[0], values[1], d)
    return pos


def _symmetric_pmf(pos: np.ndarray, d: float, infinity_mass: float) -> _Pmf:
    """Symmetric PMF from its masses at 0, d, 2d, ... (mass at -l is e^{-l} times mass at l)."""
    m = len(pos) - 1
    mirrored = (pos[1:] * np.exp(-np.arange(1, m + 1) * d))[::-1]
    return _Pmf(-m, np.concatenate([mirrored, pos]), infinity_mass)


def _symmetric_lower(
    values: np.ndarray, d: float, tan_err: np.ndarray | None = None, floor: float = 0.0
) -> tuple[_Pmf, float]:
    r"""Optimistic symmetric PMF from below-the-profile values at 0, d, ... (last value 0).

    The signed symmetric PMF (positive side, mass at 0, mirror) represents exactly the
    perspective-symmetric piecewise-linear curve through the values, which lies below the profile
    (the perspective :math:`h(u) \mapsto 1 - u + u h(1/u)` preserves 'below'); then
    :func:`_carry_up` removes negative masses by only lowering the curve.

    With ``tan_err`` (the values' evaluation error, :func:`_tangent_errors`) the masses are
    rounded inward (block comment above :func:`_tangent_errors`): at the grid points >= 0 the
    profile depends on the positive side only; at -x it is :math:`T(1 - e^{-x}) + e^{-x}B(x)`
    with the total T <= 1 (:func:`_normalise_lower`), so the same relative margin covers it, plus
    the rounding of the mirror and of the mass at 0 (relative to :math:`1 - e^{-x}`).
    """
    if len(values) == 1:
        return _Pmf(0, np.array([1.0]), 0.0), 0.0
    signed = _symmetric_pmf(_symmetric_masses(values, d), d, 0.0)
    probs, slack = _carry_up(np.array(signed.probs))
    if tan_err is not None:
        m = len(values) - 1
        carry, carry_slack = _carry_up_error(np.array(signed.probs))
        deficit = tan_err + _right_kernel(_mass_rounding(values, d, 0.0), d) + carry[m:]
        deficit += EPS * np.abs(values)
        deficit[-1] = 0.0  # no mass lies above the last grid point: the profile there is 0
        rho, extra = _inward_margin(values, deficit, floor)
        v0, v1 = float(values[0]), float(values[1])
        at_zero = 8.0 * EPS * (abs(v1 - v0) + abs(1.0 - v0) + abs(1.0 - v1)) / -math.expm1(-d)
        rho += at_zero + _fixed_rounding(m * d, len(probs))
        probs = _deflate(probs, rho)
        slack += extra + carry_slack
    return _Pmf(signed.lower, probs, 0.0), slack


def _trim_bottom(pmf: _Pmf, mass: float, pessimistic: bool) -> tuple[_Pmf, float]:
    """Remove the lowest-loss entries holding at most ``mass`` in total.

    Pessimistic: their mass is moved *up* to the first kept entry (raises the profile by at most
    ``mass``, only below that loss).  Optimistic: it is dropped (lowers the profile).
    Returns the PMF and the mass moved.
    """
    if mass <= 0.0 or len(pmf.probs) < 3:
        return pmf, 0.0
    c = np.cumsum(pmf.probs)
    cut = int(np.searchsorted(c, mass, side="right"))
    cut = min(cut, len(pmf.probs) - 1)
    if cut == 0:
        return pmf, 0.0
    moved = float(c[cut - 1])
    probs = np.array(pmf.probs[cut:])
    if pessimistic:
        probs[0] += moved
    return _Pmf(pmf.lower + cut, probs, pmf.infinity_mass), moved


_BOTTOM_TRIM_MASS = 1e-30

# ---------------------------------------------------------------------------------------------
# Outward rounding of the pessimistic PMFs (evaluation and arithmetic error)
# ---------------------------------------------------------------------------------------------
#
# Why a margin is needed.  The connect-the-dots PMF dominates the exact pair because its profile
# interpolates the exact profile values at the grid points.  The values come from special
# functions (a few ulps off) and the masses are second differences of them divided by
# e^Delta - 1, so the computed PMF's profile misses the exact values by up to ~1e-13 relative
# (measured against 50-digit mpmath: tests/notions/test_pld_outward_rounding.py), and the add
# direction of a Poisson pair, whose masses come from two representations of the profile, by
# up to ~1e-11 relative.  That is inside every certified bracket, but it is in the wrong
# direction.
#
# What is done.  For every upper PMF we bound, at each grid point l_i, how far its profile B(l_i)
# can lie below the exact profile v(l_i): the evaluation error E_i of the value (from the accuracy
# of log_ndtr, exp, log, expm1 and the rounding of the arguments: profiles.py,
# ``*_parts_bounded``) plus R_i, the effect on B(l_i) of the rounding of the masses (each mass
# is within gamma_j of the exact second difference of the computed values,
# :func:`_mass_rounding`; R_i = sum_{j>i} gamma_j (1 - e^{l_i - l_j}), :func:`_right_kernel`).
# Linearity: the exact masses of the computed values have profile exactly equal to those values
# at the grid points.  Then every mass and the mass at +inf are multiplied by 1 + rho and
# ``floor`` is added at +inf, with rho * (v_i - deficit_i) + floor >= deficit_i at every grid
# point (:func:`_outward_scale`).  The profile of the result is >= the exact profile at every
# grid point, linear in u = e^eps between them (the exact one is convex), >= at +inf, and its
# total mass is >= 1 (below the lowest point it is a line from (0, total)), so it dominates the
# exact profile at every real epsilon.  Dominance at every epsilon of non-negative measures is
# kept by convolution (profile_{A*B}(eps) = sum_j a_j profile_B(eps - l_j)), so every composed
# upper value stays an upper bound.
#
# Cost: rho ~ 1e-15 .. 1e-11 per step; a T-fold composition scales delta by at most (1 + rho)^T
# and adds T * floor (floor = 1e-3 of the one-step truncation threshold, i.e. at most 0.1% of the
# truncation mass already reported).

#: the absolute part of the margin, relative to the one-step truncation threshold exp(log_bound)
_OUTWARD_FLOOR = 1e-3


def _mass_rounding(values: np.ndarray, d: float, bottom: float) -> np.ndarray:
    r"""Bound :math:`\gamma_j` on the rounding error of each mass of :func:`_masses_from_values`
    relative to the exact second differences of the same (computed) ``values``.

    Standard model (each operation within EPS/2 relative; exp and expm1 within EPS): interior
    masses ``(D_j - D_{j-1} e^Delta)/(e^Delta - 1)`` with ``D_j = V_{j+1} - V_j`` are off by at
    most ``4 EPS (|D_j| + e^Delta |D_{j-1}|)/(e^Delta - 1) + 2 EPS |m_j|``; the first and last
    alike with their one difference (and the ``bottom`` term).
    """
    em1 = math.expm1(d)
    ed = math.exp(d)
    diffs = np.abs(np.diff(values))
    out = np.empty_like(values)
    if len(values) == 1:
        out[0] = 2.0 * EPS * abs(bottom)
        return out
    out[0] = 2.0 * EPS * (abs(bottom) + 2.0 * diffs[0] / em1)
    out[1:-1] = 4.0 * EPS * (diffs[1:] + ed * diffs[:-1]) / em1
    out[-1] = 4.0 * EPS * diffs[-1] / -math.expm1(-d)
    # (+ 2 EPS |m_j| <= 2 EPS (|D_j| + e^d |D_{j-1}|)/(e^d - 1): already inside the factor 4)
    return out


def _right_kernel(gamma: np.ndarray, d: float) -> np.ndarray:
    r"""Upper bound on :math:`\sum_{j>i} \gamma_j (1 - e^{-(j-i)\Delta})` for every i (the
    effect of mass errors ``gamma`` on the profile at grid point i): the smaller of
    :math:`\sum_{j>i}\gamma_j` and :math:`\Delta\sum_{j>i}(j-i)\gamma_j` (as
    :math:`1 - e^{-x} \le \min(1, x)`), by reverse cumulative sums of non-negative numbers
    (relative error below n EPS, covered by the factor)."""
    n = len(gamma)
    g1 = np.zeros(n)
    g1[:-1] = np.cumsum(gamma[::-1])[::-1][1:]  # sum over j > i
    g2 = np.cumsum(g1[::-1])[::-1]  # sum over k >= i of g1_k = sum_{j>i} (j - i) gamma_j
    return (1.0 + 2.0 * n * EPS) * _FIRST_ORDER_MARGIN * np.minimum(g1, d * g2)


def _left_kernel(gamma: np.ndarray, u: np.ndarray, d: float) -> np.ndarray:
    r"""Upper bound on :math:`\sum_{j<i} \gamma_j (e^{(i-j)\Delta} - 1)` for every i (the effect
    of mass errors on the *left* profile :math:`\sum_{\ell_j<\varepsilon} b_j
    (e^{\varepsilon - \ell_j} - 1)`, which is the add direction's profile of a mirrored PMF):
    :math:`u_i = e^{\ell_i}` times the smaller of :math:`\sum_{j<i} \gamma_j / u_j` and
    :math:`\Delta\sum_{j<i}(i-j)\gamma_j / u_j` (as :math:`e^x - 1 \le \min(e^x, x e^x)`)."""
    n = len(gamma)
    h1 = np.zeros(n)
    np.cumsum((gamma / u)[:-1], out=h1[1:])  # sum over j < i
    h2 = np.cumsum(h1)  # sum over k <= i of h1_k = sum_{j<i} (i - j) gamma_j / u_j
    h2 *= d
    np.minimum(h1, h2, out=h2)
    h2 *= u
    h2 *= (1.0 + 2.0 * n * EPS) * _FIRST_ORDER_MARGIN
    return h2


_FIRST_ORDER_MARGIN = 1.01


def _source_of_running_min(raw: np.ndarray, accumulated: np.ndarray) -> np.ndarray:
    """Index of the value each entry of ``np.minimum.accumulate(raw)`` was taken from."""
    idx = np.arange(len(raw))
    kept = accumulated == raw
    return np.maximum.accumulate(np.where(kept, idx, 0))


def _outward_scale(
    deficit: np.ndarray, value: np.ndarray, floor: float
) -> tuple[float, float]:
    r"""``(rho, extra)`` with :math:`\rho (v_i - \text{deficit}_i) + \text{floor} +
    \text{extra} \ge \text{deficit}_i` at every point: rho from the points whose deficit is above
    ``floor`` and at most half their value, ``extra`` (absolute, at +inf) for any others (a NaN
    bound would be a bug: it is treated as a 100% error, i.e. the value itself goes to +inf)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (deficit - floor) / (value - deficit)
    good = deficit <= 0.5 * value
    rho = float(np.max(ratio, where=good, initial=0.0))
    bad = ~good & ~(deficit <= floor)  # (NaN deficits land here)
    extra = 0.0
    if np.any(bad):
        extra = float(np.max(np.where(np.isnan(deficit[bad]), value[bad], deficit[bad])))
    return max(rho, 0.0), extra


def _inflate(pmf: _Pmf, rho: float, floor: float) -> _Pmf:
    r"""Multiply every mass (and the mass at +inf) by a factor :math:`\ge 1 + \rho` that survives
    its own rounding (:math:`1 + \rho + 2\,\mathrm{EPS}`, rounded up), and add ``floor`` at +inf."""
    factor = float(np.nextafter(1.0 + rho + 2.0 * EPS, math.inf))
    inf = min(1.0, pmf.infinity_mass * factor + floor)
    return _Pmf(pmf.lower, pmf.probs * factor, inf)


def _fixed_rounding(losses_max: float, n: int) -> float:
    """Relative margin for the mirror (``exp(-l)`` and the product: (|l| + 3) EPS) and the
    normalisation to total mass 1 (numpy's pairwise sum: below (log2 n + 16) EPS)."""
    return EPS * (abs(losses_max) + math.log2(max(n, 2)) + 24.0)



def _normalise_upper(pmf: _Pmf, index: int) -> _Pmf:
    """Set the mass at ``index`` so that the total P-mass is exactly 1.

    Connect-the-dots masses are second differences divided by ``e^Delta - 1``, so their sum carries
    a floating-point error of ~1e-13.  The total must be 1 (the profile is 1 at u = 0); we absorb
    the error into one entry at a non-positive loss (0 for symmetric PMFs, the lowest loss
    otherwise), which only affects the profile at epsilon below that loss.  A negative result is
    clipped to 0 (extra mass is pessimistic).
    """
    probs = np.array(pmf.probs)
    rest = float(probs.sum()) - float(probs[index])
    probs[index] = max(0.0, 1.0 - pmf.infinity_mass - rest)
    return _Pmf(pmf.lower, probs, pmf.infinity_mass)


def _normalise_lower(pmf: _Pmf) -> _Pmf:
    """Scale an optimistic PMF down if round-off made its total mass exceed 1 (lowers delta)."""
    total = float(pmf.probs.sum()) + pmf.infinity_mass
    if total > 1.0:
        return _Pmf(pmf.lower, pmf.probs / total, pmf.infinity_mass / total)
    return pmf


def _symmetric_pld(
    parts: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    bounded: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray | None]],
    description: str,
    d: float,
    log_bound: float,
    with_lower: bool,
) -> Pld:
    r"""Connect-the-dots PLD of a *symmetric* profile given by ``parts`` on
    :math:`\varepsilon \ge 0`.

    The positive side is built from the (accurate, small) values :math:`\delta(i\Delta)`; the
    negative side is its mirror (mass at :math:`-\ell` is :math:`e^{-\ell}` times the mass at
    :math:`\ell`).  The perspective map :math:`\delta(u) \mapsto 1 - u + u\,\delta(1/u)` sends
    chords to chords, so this is exactly the connect-the-dots PMF of the symmetric profile on the
    full grid :math:`\{-n..n\}\Delta`, anchored at (0, 1).  ``bounded`` evaluates the same profile
    with an error bound (``bounded(eps, eps_err) -> (delta, qe, err)``); the upper PMF is rounded
    outward by it (:func:`_outward_symmetric`).
    """
    n = _top_index(parts, d, log_bound)
    grid = np.arange(0, n + 1) * d
    raw, _, err = bounded(grid, EPS * grid)
    assert err is not None  # an error bound was asked for
    vals = np.minimum.accumulate(raw)
    err = err[_source_of_running_min(raw, vals)]
    pos = np.maximum(_symmetric_masses(vals, d), 0.0)
    rem = _normalise_upper(_symmetric_pmf(pos, d, float(vals[-1])), n)
    rem, trimmed = _trim_bottom(rem, _BOTTOM_TRIM_MASS, True)
    rem, margin = _outward_symmetric(rem, vals, err, d, log_bound)
    low = None
    slack = 0.0
    if with_lower:
        x = d / 2
        dx, qx = parts(np.array([x]))
        # tangent at -d/2 via the symmetric identity: delta(-x) = 1 - e^{-x} + e^{-x} delta(x) and
        # e^{-x} Q(L > -x) = e^{-x} P(L <= x) = e^{-x} (1 - delta(x) - qe(x))
        first = (
            float(-math.expm1(-x) + math.exp(-x) * dx[0]),
            float(math.exp(-x) * (1.0 - dx[0] - qx[0])),
        )
        mids = (np.arange(0, n) + 0.5) * d
        dm, qm, dm_err = bounded(mids, EPS * mids)
        assert dm_err is not None  # an error bound was asked for
        mid_a = np.concatenate([[first[0]], dm])
        mid_b = -np.concatenate([[first[1]], qm])
        # the first tangent: e^{-x} times delta(x)'s error (and |b| <= 1), plus its roundings
        _, _, dx_err = bounded(np.array([x]), np.array([EPS * x]))
        assert dx_err is not None
        b_err = float(dx_err[0]) + float(_slope_accuracy(qx, np.array([x]))[0] * qx[0]) + 3.0 * EPS
        first_err = math.exp(-x) * float(dx_err[0]) + 4.0 * EPS + b_err * math.expm1(x)
        lv = _lower_residuals(mid_a, mid_b, np.zeros(n + 1), d)
        all_mids = np.concatenate([[-x], mids])
        a_err = np.concatenate([[first_err], dm_err])
        mid_err = _mid_errors(mid_a, a_err, mid_b, all_mids, d)
        lv = _settle_top(lv, np.zeros(len(lv)), mid_a, mid_b, mid_err, d)
        tan_err = _tangent_errors(mid_err, len(lv))
        low, slack = _symmetric_lower(lv, d, tan_err, _OUTWARD_FLOOR * math.exp(log_bound))
        low, _ = _trim_bottom(_normalise_lower(low), _BOTTOM_TRIM_MASS, False)
    return Pld(
        description=description,
        discretization=d,
        remove=rem,
        add=None,
        lower_remove=low,
        truncation_mass=float(vals[-1]) + trimmed + margin,
        lower_slack=slack,
        log_mass_truncation_bound=log_bound,
    )


def _outward_symmetric(
    pmf: _Pmf, vals: np.ndarray, err: np.ndarray, d: float, log_bound: float
) -> tuple[_Pmf, float]:
    r"""Round a symmetric upper PMF outward (see the block comment above :func:`_mass_rounding`).

    The profile at the grid points :math:`i\Delta \ge 0` depends on the positive side only, which
    is the connect-the-dots PMF of ``vals`` (off by ``err`` from the exact profile) up to the
    rounding of its masses.  At negative epsilon a mirrored PMF (mass at :math:`-\ell` equal to
    :math:`e^{-\ell}` times the mass at :math:`\ell`) of total mass T has profile
    :math:`T(1 - e^{-x}) + e^{-x}B(x)` at :math:`-x`, the exact one :math:`1 - e^{-x} +
    e^{-x}\delta(x)`: the same relative margin, plus the rounding of the mirror and of the total
    (:func:`_fixed_rounding`), covers it.  Returns the PMF and the absolute part of the margin
    (added at +inf, recorded as truncation mass).
    """
    gamma = _mass_rounding(vals, d, 0.0)
    deficit = err + _right_kernel(gamma, d)
    floor = _OUTWARD_FLOOR * math.exp(log_bound)
    rho, extra = _outward_scale(deficit, vals, floor)
    rho += _fixed_rounding(len(vals) * d, len(pmf.probs))
    return _inflate(pmf, rho, floor + extra), floor + extra


def identity_pld(
    *, discretization: float = DEFAULT_DISCRETIZATION, with_lower: bool = False
) -> Pld:
    """Perfect privacy (all privacy loss at 0): the neutral element of composition."""
    d = _check_discretization(discretization)
    one = _identity_pmf()
    return Pld(
        description="Id",
        discretization=d,
        remove=one,
        add=None,
        lower_remove=one if with_lower else None,
    )


def gaussian_pld(
    mu: float,
    *,
    discretization: float = DEFAULT_DISCRETIZATION,
    log_mass_truncation_bound: float = DEFAULT_LOG_MASS_TRUNCATION_BOUND,
    with_lower: bool = False,
) -> Pld:
    r"""Connect-the-dots PLD of :math:`G_\mu` (sensitivity 1, noise std :math:`1/\mu`).

    Profile :math:`\delta(\varepsilon) = \Phi(-\varepsilon/\mu+\mu/2) - e^\varepsilon
    \Phi(-\varepsilon/\mu-\mu/2)` (docs/theorems.md §1.2).  ``mu = 0`` gives :func:`identity_pld`.
    """
    mu = check_nonnegative("mu", mu)
    d = _check_discretization(discretization)
    lb = _check_log_bound(log_mass_truncation_bound)
    if mu == 0.0:
        return identity_pld(discretization=d, with_lower=with_lower)
    return _symmetric_pld(
        lambda e: _gaussian_parts(e, mu),
        lambda e, err: _gaussian_parts_bounded(e, mu, err),
        f"G(mu={mu:g})",
        d,
        lb,
        with_lower,
    )


def symmetric_subsampled_gaussian_pld(
    p: float,
    mu: float,
    *,
    discretization: float = DEFAULT_DISCRETIZATION,
    log_mass_truncation_bound: float = DEFAULT_LOG_MASS_TRUNCATION_BOUND,
    with_lower: bool = False,
) -> Pld:
    r"""Connect-the-dots PLD of the symmetric subsampled Gaussian :math:`C_p(G_\mu)`.

    :math:`C_p(f) = \min\{f_p, f_p^{-1}\}^{**}` with :math:`f_p = pf + (1-p)\mathrm{Id}` (DRS22
    Def. 6 / Thm 9; docs/theorems.md §1.6): uniform fixed-size subsampling of rate ``p = b/n`` under
    replace-one adjacency, where ``mu`` is the GDP parameter of one unsampled step
    (``mu = L/(b sigma)``; ``2/z`` for Opacus noise multiplier z and clipping).  The exact profile
    is :math:`\delta(\varepsilon) = p\,\delta_G(\log(1 + (e^\varepsilon - 1)/p);\mu)` for
    :math:`\varepsilon\ge 0` and is symmetric; the PMF is its connect-the-dots discretisation
    (module docstring), which dominates the exact curve at every epsilon.
    """
    p = check_probability("p", p)
    mu = check_nonnegative("mu", mu)
    d = _check_discretization(discretization)
    lb = _check_log_bound(log_mass_truncation_bound)
    if mu == 0.0:
        return identity_pld(discretization=d, with_lower=with_lower)
    return _symmetric_pld(
        lambda e: _subsampled_parts(e, p, mu),
        lambda e, err: _subsampled_parts_bounded(e, p, mu, err),
        f"C_p(G_mu)(p={p:g}, mu={mu:g})",
        d,
        lb,
        with_lower,
    )


def poisson_subsampled_gaussian_pld(
    sampling_rate: float,
    noise_multiplier: float,
    *,
    adjacency: Adjacency = "add-remove",
    discretization: float = DEFAULT_DISCRETIZATION,
    log_mass_truncation_bound: float = DEFAULT_LOG_MASS_TRUNCATION_BOUND,
    with_lower: bool = False,
) -> Pld:
    r"""One step of DP-SGD with Poisson sampling: connect-the-dots PLD.

    Args:
        sampling_rate: Poisson rate q in (0, 1] (each example joins the batch independently).
        noise_multiplier: z > 0, the std of the Gaussian added to the SUM of clipped per-example
            gradients divided by the clipping norm C (Opacus / TF-Privacy / dp_accounting).
        adjacency: ``"add-remove"`` (one example added or removed; sum moves by <= C; the profile is
            the max over both directions, dp_accounting ``ADD_OR_REMOVE_ONE``) or ``"replace"``
            (one example replaced; sum moves by <= 2C; dp_accounting ``REPLACE_ONE`` pair
            :math:`qN(\mp C) + (1-q)N(0)` -- see google/differential-privacy #378).
        discretization: grid width of the privacy loss.
        log_mass_truncation_bound: cut the one-step profile where delta <= exp(this).
        with_lower: also build the optimistic twin (certified lower estimate).

    Add/remove profiles (Zhu & Wang 2019; dp_accounting): remove
    :math:`\delta_R(\varepsilon) = q\,\delta_G(\log(1+(e^\varepsilon-1)/q); 1/z)` for
    :math:`\varepsilon > \log(1-q)` and :math:`1-e^\varepsilon` below; the add PMF is its mirror
    (the add pair is the swapped remove pair).  Same grid and connect-the-dots formula as
    ``dp_accounting.pld.privacy_loss_distribution.from_gaussian_mechanism``.
    """
    q = check_probability("sampling_rate", sampling_rate)
    z = check_positive("noise_multiplier", noise_multiplier)
    if adjacency not in ("add-remove", "replace"):
        raise ParameterError("adjacency", adjacency, "must be 'add-remove' or 'replace'")
    d = _check_discretization(discretization)
    lb = _check_log_bound(log_mass_truncation_bound)
    desc = f"PoissonSubsampledGaussian(q={q:g}, z={z:g}, {adjacency})"
    if adjacency == "replace":
        return _symmetric_pld(
            _replace_parts(q, z), _replace_parts_bounded(q, z), desc, d, lb, with_lower  # type: ignore[arg-type]
        )
    mu = 1.0 / z
    if q == 1.0:
        return _symmetric_pld(
            lambda e: _gaussian_parts(e, mu),
            lambda e, err: _gaussian_parts_bounded(e, mu, err),
            desc,
            d,
            lb,
            with_lower,
        )
    parts = lambda e: _subsampled_parts(e, q, mu)
    i_lo = _residual_start(q, mu, d, math.floor(math.log1p(-q) / d))
    n = _top_index(parts, d, lb)
    grid = np.arange(i_lo, n + 1) * d
    raw, _, err = _subsampled_parts_bounded(grid, q, mu, EPS * np.abs(grid))
    assert err is not None  # an error bound was asked for
    vals = np.minimum.accumulate(raw)
    err = err[_source_of_running_min(raw, vals)]
    probs = _masses_from_values(vals, d, 1.0 - vals[0])
    gamma = _mass_rounding(vals, d, 1.0 - vals[0])
    splice = _residual_masses_below_zero(probs, gamma, grid, q, mu, d)
    probs = np.maximum(probs, 0.0)
    margins = _outward_poisson(vals, err, gamma, splice, grid, d, lb)
    rem = _fill_to_one(_without_leading_zeros(_Pmf(i_lo, probs, float(vals[-1]))))
    add = _without_trailing_zeros(
        _fill_to_one(_without_leading_zeros(_mirrored_add_pmf(probs, grid, n)))
    )
    fixed = _fixed_rounding(max(abs(grid[0]), abs(grid[-1])), len(grid))
    rem = _inflate(rem, margins[0] + fixed, margins[1])
    add = _inflate(add, margins[2] + fixed, margins[3])
    low_rem = low_add = None
    slack = 0.0
    if with_lower:
        # remove direction: the midpoint below i_lo is in the linear part.  Tangents in plain
        # form at positive losses and in residual form w.r.t. 1 - u at losses <= 0 (there
        # delta_R is within a tiny amount of 1 - u, and second differences of plain values are
        # round-off: near q = 1 they left masses of ~1e-13 that raised the optimistic curve above
        # the exact profile by up to 4e-13 relative at negative losses), as for the add direction
        mids = (np.arange(i_lo - 1, n) + 0.5) * d
        dm, qm, dm_err = _subsampled_parts_bounded(mids, q, mu, EPS * np.abs(mids))
        assert dm_err is not None  # an error bound was asked for
        res_a, res_b, res_err = _remove_residual_tangents(mids, dm, qm, q, mu, dm_err)
        assert res_err is not None
        grid_r = np.arange(i_lo, n + 1) * d
        floor = _OUTWARD_FLOOR * math.exp(lb)
        masses, s1 = _add_lower_masses(
            res_a, res_b, dm, -qm, grid_r, i_lo, d, (res_err, dm_err), floor
        )
        low_rem = _normalise_lower(_Pmf(i_lo, masses, 0.0))
        # near q = 1 the grid reaches down to log(1 - q) and round-off leaves masses of ~1e-13
        # scattered down there, which stretch every composition window (150 000 bins at
        # q = 1 - 1/60000): dropping a little mass only lowers the optimistic curve
        low_rem, _ = _trim_bottom(low_rem, _LOWER_BOTTOM_DROP, False)
        # add direction (the swapped pair), in residual form w.r.t. 1 - u, because the optimistic
        # PMF cannot simply be mirrored (its total masses are not exactly 1):
        #   delta_A(c) = 1 - u_c + u_c delta_R(-c),
        #   T_c(u) - (1 - u) = u_c delta_R(-c) + u_c Q_A(L <= c) (u/u_c - 1),
        #   Q_A(L <= c) = P_R(L >= -c) = delta_R(-c) + e^{-c} Q_R(L > -c).
        # above the upper add PMF's top loss the profile is 0 (the upper one is, and lies above
        # it): the optimistic curve is 0 there, so its grid can stop a few bins higher (near q = 1
        # the top would be -log(1 - q), i.e. 110 000 bins of special functions at q = 1 - 1/60000;
        # _lower_residuals places the last zero validly at any end)
        a_lo, a_hi = -n, min(-i_lo, max(add.upper, 0) + _LOWER_ADD_MARGIN)
        mids_a = (np.arange(a_lo - 1, a_hi) + 0.5) * d
        dr, qr, dr_err = _subsampled_parts_bounded(-mids_a, q, mu, EPS * np.abs(mids_a))
        assert dr_err is not None
        uc = np.exp(mids_a)
        grid_a = np.arange(a_lo, a_hi + 1) * d
        res_a, res_b = uc * dr, uc * (dr + qr)
        res_err_a = _FIRST_ORDER_MARGIN * uc * dr_err + 3.0 * EPS * np.abs(res_a)
        plain_a, plain_b, plain_err = _add_tangents(mids_a, res_a, res_b, q, mu, res_err_a)
        assert plain_err is not None
        errors_a = (res_err_a, plain_err)
        masses_a, s2 = _add_lower_masses(
            res_a, res_b, plain_a, plain_b, grid_a, a_lo, d, errors_a, floor
        )
        low_add = _normalise_lower(_Pmf(a_lo, masses_a, 0.0))
        slack = max(s1, s2)
    return Pld(
        description=desc,
        discretization=d,
        remove=rem,
        add=add,
        lower_remove=low_rem,
        lower_add=low_add,
        truncation_mass=float(vals[-1]) + max(margins[1], margins[3]),
        lower_slack=slack,
        log_mass_truncation_bound=lb,
    )


def _remove_residual_tangents(
    mids: np.ndarray,
    dm: np.ndarray,
    qm: np.ndarray,
    q: float,
    mu: float,
    dm_err: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    r"""Tangents of the Poisson remove profile at the midpoints ``mids`` in residual form w.r.t.
    :math:`1 - u`: :math:`T_c(u) - (1 - u) = a_c + b_c (u/u_c - 1)` with
    :math:`a_c = \delta_R(c) - (1 - u_c)` (:func:`_remove_residuals`, no cancellation at c < 0)
    and :math:`b_c = u_c - q_e(c) = u_c\,Q(L \le c)`; for the remove pair
    :math:`Q = N(0, 1)`, :math:`L \le c` iff :math:`x \le t/\mu + \mu/2` with
    :math:`e^t = 1 + (e^c - 1)/q`, so :math:`Q(L \le c) = \Phi(t/\mu + \mu/2)` (0 for
    :math:`c \le \log(1-q)`).  At c >= 0 the plain values are converted (only the plain form is
    used there).  With ``dm_err`` (the error of ``dm``) also returns the evaluation error of a:
    at c < 0 that of :func:`_remove_residuals_bounded`, at c >= 0 ``dm_err`` plus the sum's and
    expm1's rounding (else None)."""
    uc = np.exp(mids)
    a = dm + np.expm1(mids)
    b = uc - qm
    err = None
    if dm_err is not None:
        err = dm_err + 2.0 * EPS * (np.abs(dm) + np.abs(np.expm1(mids)))
    neg = mids < 0.0
    if np.any(neg):
        c = mids[neg]
        if err is None:
            a[neg] = _remove_residuals(c, q, mu)
        else:
            a[neg], err[neg] = _remove_residuals_bounded(c, q, mu, EPS * np.abs(c))
        live = c > math.log1p(-q)
        bn = np.zeros_like(c)
        if np.any(live):
            t = _log_amplified(c[live], q)
            bn[live] = np.exp(c[live] + normal.log_ndtr(t / mu + mu / 2.0))
        b[neg] = bn
    return a, b, err


def _residual_start(q: float, mu: float, d: float, i_lo: int) -> int:
    r"""The lowest grid index the Poisson remove PMF is evaluated from: two below the first index
    whose residual :math:`\delta_R - (1 - e^\varepsilon)` (:func:`_remove_residuals`) is positive
    in floating point, or ``i_lo`` (:math:`\lfloor\log(1-q)/\Delta\rfloor`).

    Below that index the computed residual is 0, so the connect-the-dots masses there are 0 and
    the PMF is the same whether they are evaluated or not; near q = 1 that range is most of the
    grid (log(1 - q) = -11 at q = 1 - 1/60000: 110 000 points of special functions, for masses
    of at most e^-700).  The residual increases with epsilon (its derivative is
    :math:`e^\varepsilon Q(L \le \varepsilon) \ge 0`): bisection over the integers, and the two
    points below the answer are checked.
    """

    def live(j: int) -> bool:
        return float(_remove_residuals(np.array([j * d]), q, mu)[0]) > 0.0

    if i_lo >= -3 or live(i_lo) or not live(0):
        return i_lo
    dead, alive = i_lo, 0
    while alive - dead > 1:
        mid = (dead + alive) // 2
        if live(mid):
            alive = mid
        else:
            dead = mid
    start = alive - 2
    if start <= i_lo or live(start) or live(start + 1):
        return i_lo
    return start


def _mirrored_add_pmf(remove_masses: np.ndarray, grid: np.ndarray, n: int) -> _Pmf:
    r"""Connect-the-dots PMF of the add direction of the Poisson pair (not yet filled to mass 1).

    The add pair is the swapped remove pair; the perspective map sends the remove
    connect-the-dots curve to the add one on the mirrored grid, so the add P-mass at
    :math:`-\ell` is :math:`e^{-\ell}` times the remove P-mass at :math:`\ell` (the remove Q-mass).
    The remove mass at +inf becomes Q-mass at loss -inf, which carries no P-mass.

    ``remove_masses`` are the *computed* connect-the-dots masses on ``grid``, before any
    normalisation: a round-off correction at the remove PMF's lowest loss :math:`\log(1-q)` would
    be multiplied by :math:`1/(1-q)` here and land at the add direction's highest loss (see
    :func:`_fill_to_one`).
    """
    return _Pmf(-n, (remove_masses * np.exp(-grid))[::-1].copy(), 0.0)


#: bins of the optimistic add curve's grid above the upper add PMF's top loss
_LOWER_ADD_MARGIN = 16
#: the optimistic remove PMF of a Poisson pair drops at most this much mass at its lowest losses
#: (the composed lower curve falls by at most about T times it, relative: 1e-4 at T = 1e7)
_LOWER_BOTTOM_DROP = 1e-11


def _without_trailing_zeros(pmf: _Pmf) -> _Pmf:
    """Drop the zero masses above the highest loss that carries mass (the profile is unchanged:
    the mass at +inf stays)."""
    nz = np.flatnonzero(pmf.probs)
    last = int(nz[-1]) if len(nz) else 0
    if last == len(pmf.probs) - 1:
        return pmf
    return _Pmf(pmf.lower, np.array(pmf.probs[: last + 1]), pmf.infinity_mass)


def _without_leading_zeros(pmf: _Pmf) -> _Pmf:
    """Drop the zero masses below the lowest loss that carries mass (the profile is unchanged)."""
    nz = np.flatnonzero(pmf.probs)
    first = int(nz[0]) if len(nz) else len(pmf.probs) - 1
    if first == 0:
        return pmf
    return _Pmf(pmf.lower + first, np.array(pmf.probs[first:]), pmf.infinity_mass)


def _fill_to_one(pmf: _Pmf) -> _Pmf:
    r"""Add the mass that summation round-off leaves missing (total below 1) at the lowest loss.

    Connect-the-dots masses are second differences divided by :math:`e^\Delta - 1`; their sum
    misses 1 by round-off (about 1e-16, of either sign, changing with the last bit of the inputs).
    A deficit is added at the PMF's lowest loss (it raises the profile only below that loss, so
    the PMF stays pessimistic); an excess is kept (extra mass is pessimistic).  Nothing is taken
    away.

    Where the deficit goes matters near q = 1 (issues 8/11).  It used to be written at the lowest
    *grid* point of the Poisson remove PMF, :math:`\lfloor\log(1-q)/\Delta\rfloor\Delta` (-11 at
    q = 1 - 1/60000), which carries no mass at all when the noise is large, and the add PMF was
    mirrored from the corrected masses.  A round-off of 1.1e-16 there then (i) became
    1.1e-16/(1-q) = 6.7e-12 at the add direction's highest loss +11 and (ii) stretched the remove
    support from -0.007 to -11, i.e. a composition window of 150 000 bins, each charged the FFT's
    pessimistic error bound (5e-14).  Either took the certified epsilon at delta = 1e-12 after
    1000 steps from 0.164 to 0.26 .. 14.9 for a 2e-9 relative change of the noise multiplier.  The
    correction now goes to the lowest loss that carries mass (after
    :func:`_without_leading_zeros`), and each direction is filled on its own.
    """
    missing = 1.0 - pmf.infinity_mass - float(np.sum(pmf.probs))
    if missing <= 0.0:
        return pmf
    probs = np.array(pmf.probs)
    probs[0] += missing
    return _Pmf(pmf.lower, probs, pmf.infinity_mass)


def _add_tangents(
    mids: np.ndarray,
    res_a: np.ndarray,
    res_b: np.ndarray,
    q: float,
    mu: float,
    res_err: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    r"""Tangents of the add-direction profile at the midpoints ``mids`` in plain form,
    :math:`T_c(u) = a_c + b_c (u/u_c - 1)` with :math:`a_c = \delta_A(c)`,
    :math:`b_c = -u_c\,Q_A(L > c)`.

    At :math:`c > 0` both are evaluated without cancellation (the residual form w.r.t. 1 - u,
    ``res_a``/``res_b``, subtracts numbers close to :math:`u_c - 1` there and leaves round-off of
    about 1e-16 u_c, which second differences turn into negative masses of 1e-13 per step):

    * :math:`\delta_A(c) = 1 - u_c + u_c\,\delta_R(-c) = u_c\,r_R(-c)`, with the remove residual
      :math:`r_R = \delta_R - (1 - e^{\varepsilon})` of :func:`_remove_residuals`;
    * :math:`Q_A(L > c) = P_R(L_R < -c) = q\,\Phi(t/\mu - \mu/2) + (1-q)\,\Phi(t/\mu + \mu/2)`,
      :math:`e^t = 1 + (e^{-c} - 1)/q` (the remove pair :math:`P = qN(\mu,1) + (1-q)N(0,1)`,
      :math:`Q = N(0,1)` has loss below :math:`-c` iff :math:`x < t/\mu + \mu/2`); both are 0
      for :math:`c \ge -\log(1-q)`, the largest add loss.

    At :math:`c \le 0` the residual form is converted: :math:`a_c = 1 - u_c + a^{res}_c`,
    :math:`b_c = b^{res}_c - u_c`.

    With ``res_err`` (the evaluation error of ``res_a``) also returns that of ``a``: at c <= 0
    ``res_err`` plus the sum's and expm1's rounding, at live c > 0 ``u_c`` times
    :func:`_remove_residuals_bounded`'s error and the product's rounding, 0 where a is the
    exact 0 (else None).
    """
    uc = np.exp(mids)
    a = -np.expm1(mids) + res_a
    b = res_b - uc
    err = None
    if res_err is not None:
        err = res_err + 2.0 * EPS * (np.abs(a) + np.abs(np.expm1(mids)))
    pos = mids > 0
    live = pos & (-mids > math.log1p(-q))
    a[pos] = 0.0
    b[pos] = 0.0
    if err is not None:
        err[pos] = 0.0
    if np.any(live):
        c = mids[live]
        if err is None:
            a[live] = uc[live] * _remove_residuals(-c, q, mu)
        else:
            r, r_err = _remove_residuals_bounded(-c, q, mu, EPS * np.abs(c))
            a[live] = uc[live] * r
            err[live] = _FIRST_ORDER_MARGIN * uc[live] * r_err + 3.0 * EPS * np.abs(a[live])
        t = _log_amplified(-c, q)
        s = np.exp(
            np.logaddexp(
                math.log(q) + normal.log_ndtr(t / mu - mu / 2.0),
                math.log1p(-q) + normal.log_ndtr(t / mu + mu / 2.0),
            )
        )
        b[live] = -uc[live] * s
    return a, b, err


#: the optimistic add curve is set to 0 from the first positive loss where it is at most this
#: (lowers it by at most this much; without the cut it spans the whole grid up to -log(1-q))
_LOWER_TOP_VALUE = 1e-40


def _add_lower_masses(
    res_a: np.ndarray,
    res_b: np.ndarray,
    plain_a: np.ndarray,
    plain_b: np.ndarray,
    grid: np.ndarray,
    lo: int,
    d: float,
    errors: tuple[np.ndarray, np.ndarray] | None = None,
    floor: float = 0.0,
) -> tuple[np.ndarray, float]:
    r"""Masses (and slack) of the optimistic add-direction curve on ``grid`` (from index ``lo``).

    The curve is :func:`_lower_residuals`'s minimum of midpoint tangents.  It is represented by
    its residual :math:`r = v - (1 - u)_+`, which keeps its relative precision everywhere: at
    losses <= 0 it is the residual w.r.t. :math:`1 - u` (``res_a``/``res_b``; there the profile is
    close to 1 - u), at positive losses it is the curve itself from the plain tangents
    (``plain_a``/``plain_b``, :func:`_add_tangents`; there the profile is small, and the residual
    form would subtract numbers close to :math:`u - 1`, whose round-off of about 1e-16 u became
    negative masses and an additive slack of 2e-13 per step at q = 0.999, z = 100: 12% of bracket
    width at T = 1000, delta = 1e-12).  :math:`(1 - u)_+` is the profile of a unit mass at loss 0,
    so the masses of v are those of r plus that unit mass (connect-the-dots masses are linear in
    the values).  The top (value 0) is the plain form's cut.  Negative masses are carried up
    (:func:`_carry_up`, which only lowers the curve).  The curve is set to 0 from the first
    positive loss where it is at most ``_LOWER_TOP_VALUE``.  Where either form ends at a loss <= 0
    the residual form alone is used (:func:`_lower_masses`).  With ``errors`` (the evaluation
    errors of ``res_a`` and ``plain_a``) the masses are rounded inward
    (:func:`_inward_rounding`).
    """
    lin = -np.expm1(grid)
    mids = np.append(grid - d / 2.0, grid[-1] + d / 2.0)[: len(res_a)]
    rho = _lower_residuals(res_a, res_b, lin, d)
    v = _lower_residuals(plain_a, plain_b, np.zeros_like(grid), d)
    zero = int(np.searchsorted(grid, 0.0, side="right"))  # grid[:zero] <= 0, grid[zero - 1] == 0
    res_tan = plain_tan = None
    if errors is not None:
        res_mid = _mid_errors(res_a, errors[0], res_b, mids, d)
        plain_mid = _mid_errors(plain_a, errors[1], plain_b, mids, d)
        res_tan = _tangent_errors(res_mid, len(rho))
        plain_tan = _tangent_errors(plain_mid, len(v))
    if len(rho) <= zero or len(v) <= zero or grid[zero - 1] != 0.0:
        if errors is not None:
            rho = _settle_top(rho, lin, res_a, res_b, res_mid, d)
        return _lower_masses(rho, lo, d, True, res_tan, floor)
    small = np.flatnonzero(v[zero:] <= _LOWER_TOP_VALUE)
    if len(small):  # the left tangent is >= 0 there: a zero keeps the last segment below it
        v = v[: zero + int(small[0]) + 1].copy()
        v[-1] = 0.0
    if errors is not None:
        settled = _settle_top(v, np.zeros(len(v)), plain_a, plain_b, plain_mid, d)
        if len(settled) > zero:
            v = settled
    r = np.concatenate([rho[:zero], v[zero:]])
    masses = _masses_from_values(r, d, -r[0])
    masses[zero - 1] += 1.0  # (1 - u)_+
    signed = masses
    masses, slack = _carry_up(masses)
    slack += max(float(r[0]), 0.0)
    if res_tan is not None and plain_tan is not None:
        lin_plus = np.concatenate([lin[:zero], np.zeros(len(r) - zero)])
        tan = np.concatenate([res_tan[:zero], plain_tan[zero : len(r)]])
        # (the curve is cut to 0 where v <= _LOWER_TOP_VALUE: only lowered there)
        masses, extra = _inward_rounding(masses, signed, r, lin_plus, -r[0], tan, d, floor)
        slack += extra
    return masses, slack


def _remove_residuals(eps: np.ndarray, q: float, mu: float) -> np.ndarray:
    r""":math:`\delta_R(\varepsilon) - (1 - e^\varepsilon)` of the Poisson remove pair at
    ``eps < 0``, without cancellation.

    With :math:`e^{t} = 1 + (e^\varepsilon - 1)/q` (so :math:`1 - e^\varepsilon = q(1 - e^t)`) and
    :math:`\delta_R = q\,\delta_G(t)`, the symmetric identity
    :math:`\delta_G(t) = 1 - e^{t} + e^{t}\delta_G(-t)` gives
    :math:`\delta_R - (1 - e^\varepsilon) = q\,e^{t}\,\delta_G(-t)`: a product of small positive
    numbers for :math:`t < 0` (0 where :math:`\varepsilon \le \log(1-q)`).
    """
    return _remove_residuals_bounded(eps, q, mu, None)[0]


def _remove_residuals_bounded(
    eps: np.ndarray, q: float, mu: float, eps_err: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    r""":func:`_remove_residuals` and an absolute bound on its evaluation error (``eps`` off by
    ``eps_err``; zeros when ``None``): t is off by :func:`_log_amplified_error`, which
    :math:`e^t` turns into a relative error of the same size and :func:`_gaussian_parts_bounded`
    passes into :math:`\delta_G(-t)`; 3 EPS relative for exp and the two products."""
    out = np.zeros_like(eps)
    err = np.zeros_like(eps)
    live = eps > math.log1p(-q)
    t = _log_amplified(eps[live], q)
    if eps_err is None:
        dx, _, _ = _gaussian_parts_bounded(-t, mu, None)
        out[live] = q * np.exp(t) * dx
        return out, err
    err_t = _log_amplified_error(eps[live], t, q, eps_err[live])
    dx, _, dx_err = _gaussian_parts_bounded(-t, mu, err_t)
    scale = q * np.exp(t)
    out[live] = scale * dx
    err[live] = 1.01 * (out[live] * (err_t + 3.0 * EPS) + scale * dx_err) + UNDERFLOW  # type: ignore[operator]
    return out, err


@dataclass(frozen=True)
class _Splice:
    """Where the Poisson remove PMF switches from residual masses to value masses, and the
    residuals (with their error bounds) at the grid points below 0."""

    neg: int
    residuals: np.ndarray
    errors: np.ndarray


def _residual_masses_below_zero(
    probs: np.ndarray, gamma: np.ndarray, grid: np.ndarray, q: float, mu: float, d: float
) -> _Splice | None:
    r"""Recompute, in place, the connect-the-dots masses at negative losses from the residual
    :math:`\delta_R - (1 - u)` (:func:`_remove_residuals`), and their rounding bounds ``gamma``.

    There :math:`\delta_R(u)` is within a tiny amount of the line :math:`1 - u`, so second
    differences of its values are round-off (about 1e-16 / Delta = 1e-12 per mass), which the add
    direction's mirror multiplies by :math:`e^{-\ell}` up to :math:`1/(1-q)` and puts at its
    largest losses (issue 11: 34% too loose at q = 0.99, delta = 1e-12).  A line has no second
    differences, so the same masses are the second differences of the residual, which keep their
    relative precision (same formula, :func:`_masses_from_values`; the first mass, anchored at
    (0, 1), is the residual's with bottom ``-res[0]``).  Masses whose three points are negative
    losses are replaced; the others keep the values' formula.  Returns the splice (None when
    nothing was replaced).
    """
    neg = int(np.searchsorted(grid, 0.0))  # grid[:neg] < 0
    if neg < 3:
        return None
    res, res_err = _remove_residuals_bounded(grid[:neg], q, mu, EPS * np.abs(grid[:neg]))
    probs[: neg - 1] = _masses_from_values(res, d, -float(res[0]))[: neg - 1]
    gamma[: neg - 1] = _mass_rounding(res, d, -float(res[0]))[: neg - 1]
    return _Splice(neg, res, res_err)


def _outward_poisson(
    vals: np.ndarray,
    err: np.ndarray,
    gamma: np.ndarray,
    splice: _Splice | None,
    grid: np.ndarray,
    d: float,
    log_bound: float,
) -> tuple[float, float, float, float]:
    r"""Margins ``(rho_remove, floor_remove, rho_add, floor_add)`` of the Poisson pair's upper
    PMFs (see the block comment above :func:`_mass_rounding`).

    Remove direction, profile at grid point :math:`\ell_i`: value masses above the splice
    reproduce the computed values (error ``err`` + :func:`_right_kernel`); below it the exact
    masses of the computed residuals :math:`\hat r` give :math:`\hat r + (1 - u) + A(u)` where A
    is the affine function (in u) through the splice mismatch
    :math:`e_k = (\hat v_k - v_k) - (\hat r_k - r_k)` at the two splice points ``neg - 2,
    neg - 1``: :math:`|A(u)| \le \bar e (1 + 2|u - u_{neg-1}|/(u_{neg-1} - u_{neg-2}))`.

    Add direction (the mirror): its profile at :math:`c = -\ell_i` is :math:`e^{c}` times the
    remove PMF's *left* profile :math:`\sum_{\ell_j < \ell_i} b_j (e^{\ell_i - \ell_j} - 1)`, whose
    exact value is the residual :math:`r(\ell_i)`.  The exact masses of :math:`\hat r` have left
    profile :math:`\hat r` below the splice (the affine part cancels), and
    :math:`\hat v - (1 - u) - A(u)` above it; mass rounding enters through :func:`_left_kernel`.
    The mass at +inf of the remove PMF is not mirrored (it is Q-mass at -inf).
    """
    floor = _OUTWARD_FLOOR * math.exp(log_bound)
    u = np.exp(grid)
    right = _right_kernel(gamma, d)
    add_deficit = _left_kernel(gamma, u, d)
    add_deficit += err
    rem_deficit = right
    rem_deficit += err
    k = 0 if splice is None else splice.neg
    resid = vals[k:] + np.expm1(grid[k:])  # v - (1 - u): accurate for losses >= 0
    if splice is None:
        # no residual masses: the exact masses of the values have total P-mass 1 and Q-mass
        # (1 - v_0)/u_0 (the chord to (0, 1)), off by err_0/u_0 from 1
        add_deficit += err[0] * (1.0 + u / u[0])
    else:
        mismatch = float(np.max(err[k - 2 : k] + splice.errors[k - 2 : k]))
        du = u[k - 1] - u[k - 2]
        u_s = u[k - 1]
        below = splice.errors[: k - 2] + mismatch * (1.0 + 2.0 * (u_s - u[: k - 2]) / du)
        rem_deficit[: k - 2] = below + (rem_deficit[: k - 2] - err[: k - 2])
        add_deficit[k:] += mismatch * (1.0 + 2.0 * (u[k:] - u_s) / du)
        add_deficit[:k] += splice.errors - err[:k]
        resid = np.concatenate([splice.residuals, resid])
    rho_r, extra_r = _outward_scale(rem_deficit, vals, floor)
    # the add profile at c = -l_i and its deficit are e^{-l_i} times these
    add_deficit /= u
    resid /= u
    rho_a, extra_a = _outward_scale(add_deficit, resid, floor)
    return rho_r, floor + extra_r, rho_a, floor + extra_a


def _compose_power(base: Pld, k: int, extra: Pld | None, tail: float) -> Pld:
    """``base^{⊗k} ⊗ extra`` in one FFT pass per direction (extra must be symmetric)."""
    if extra is not None and not extra.symmetric:
        raise ParameterError("extra", extra.description, "must be a symmetric PLD")
    if extra is not None and extra.discretization != base.discretization:
        raise ParameterError("extra", extra.description, "must have the same discretization")
    e_up = None if extra is None else extra._remove
    d = base.discretization  # (steers the tilted passes: _compose_spectral)
    rem, t1 = _self_compose(base._remove, k, tail, True, e_up, d)
    add, t2 = (None, 0.0) if base._add is None else _self_compose(base._add, k, tail, True, e_up, d)
    low_rem = low_add = None
    slack = 0.0
    if base.has_lower and (extra is None or extra.has_lower):
        e_low = None if extra is None else extra._low_remove
        low_rem, s1 = _self_compose(base._low_remove, k, tail, False, e_low, d)  # type: ignore[arg-type]
        s2 = 0.0
        if base._low_add is not None:
            low_add, s2 = _self_compose(base._low_add, k, tail, False, e_low, d)
        slack = k * base._low_slack + (0.0 if extra is None else extra._low_slack) + max(s1, s2)
    # a one-step excess t of the profile (sup norm) grows at most to k t under k-fold composition
    base_trunc = min(1.0, k * base._trunc)
    desc = f"({base.description})^⊗{k}"
    if extra is not None:
        desc += f" ⊗ {extra.description}"
    return Pld(
        description=desc,
        discretization=base.discretization,
        remove=rem,
        add=add,
        lower_remove=low_rem,
        lower_add=low_add,
        truncation_mass=min(
            1.0, base_trunc + (0.0 if extra is None else extra._trunc) + max(t1, t2)
        ),
        lower_slack=slack,
        log_mass_truncation_bound=base._log_bound,
    )
