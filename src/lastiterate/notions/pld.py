r"""Numerical composition of privacy-loss distributions (PLDs) with rigorous discretisation error.

What this module computes
-------------------------
A pair of distributions (P, Q) is described by its *privacy profile* (hockey-stick curve)

.. math::  \delta(\varepsilon) = \sup_S \, P(S) - e^{\varepsilon} Q(S)
           = \mathbb{E}_{L\sim P}\big[(1 - e^{\varepsilon - L})_+\big],
           \qquad L = \log \tfrac{dP}{dQ},

(Balle & Wang 2018; Dong, Roth & Su 2022, Prop. 2.12).  Composition of mechanisms adds
independent privacy losses, so the PLD of a composition is the convolution of the PLDs
(Koskela et al. 2020; Gopi, Lee & Wutschitz 2021).  We represent a PLD by a probability mass
function on the grid ``{i * Delta}`` plus a mass at ``+inf`` and convolve with the FFT.

Rigour: pessimistic discretisation ("connect-the-dots")
------------------------------------------------------
Every one-step PLD is built with the *connect-the-dots* construction (Doroshenko, Ghazi, Kamath,
Kumar & Manurangsi, PETS 2022, Algorithm 1): as a function of :math:`u = e^\varepsilon` the
profile :math:`\delta(u)` is convex and decreasing with :math:`\delta(0) = 1`, and the grid PMF is
chosen so that *its* profile is the piecewise-linear interpolation of the exact profile at the grid
points :math:`u_i = e^{i\Delta}`, anchored at :math:`(0, 1)`, and constant (= the mass put at
:math:`+\infty`) above the top grid point.  A chord of a convex function lies above it, so the
discrete pair dominates the true pair for every :math:`\varepsilon \in \mathbb{R}`, and dominance is
preserved by composition (Zhu, Dong & Wang 2022, Thm. 10).  Every epsilon returned by this module
is therefore an upper bound, up to floating-point rounding of the FFT (the same caveat as
dp_accounting and prv_accountant; the FFT round-off is far below the deltas of interest).

Truncation is always done in the pessimistic direction and its size is recorded:

* one-step profiles are cut at the grid point where :math:`\delta \le e^{\text{log\_mass\_truncation\_bound}}`
  (default :math:`e^{-50}`); the remaining profile becomes mass at :math:`+\infty`;
* the FFT window of a composition is chosen by a Chernoff bound so that at most
  ``tail_mass_truncation`` (default 1e-15) lies outside it; mass below the window is moved *up*
  into it and the bound on the mass above it is added to :math:`+\infty`.

:attr:`Pld.error` reports the grid width and the total mass that truncation sent to
:math:`+\infty` (an additive over-estimate of delta, already included in every result).

Optimistic twin: a certified lower estimate
-------------------------------------------
With ``with_lower=True`` the constructors also build a PMF whose profile lies *below* the exact
one: at every grid point we take the minimum of the two tangents of the convex profile taken at the
neighbouring mid-points :math:`e^{(i \pm 1/2)\Delta}`.  The piecewise-linear function through these
values lies below those tangents, hence below the exact profile; where it is not convex, negative
masses are pushed to higher losses, which only lowers it further.  Dominated pairs stay dominated
under composition, so :meth:`Pld.epsilon_with_error` returns a certified bracket
``lower <= epsilon_exact <= upper`` for the *mathematical object* the Pld describes.  Its width is
second order in :math:`\Delta` where the profile is smooth at the grid scale (relative width
~2e-6 for :math:`C_p(G_{2/3})^{\otimes 8000}` at 1e-4).  Next to a concentration of loss mass
strictly inside one grid cell (for DP-SGD: the remove-direction loss piles up just above
:math:`\log(1-q)`) any on-grid lower curve loses first order in :math:`\Delta` times that mass, so
for DP-SGD the bracket is ~1e-4 to 1e-3 relative at 1e-4 -- still far tighter than the round-down
"optimistic" PLD of dp_accounting, whose error grows like :math:`k\Delta/2` (peers.md §2).

Floating point: masses are second differences of the profile divided by :math:`e^\Delta - 1`; the
total mass is restored exactly (the error goes to the mass at the lowest or zero loss, which does
not affect delta at epsilon >= 0), negative round-off is clipped upwards (upper) or pushed up
(lower), and FFT round-off (~1e-16 of the largest mass per entry) is not bounded rigorously --
the same caveat as dp_accounting and prv_accountant.

Conventions used by the constructors
------------------------------------
* :func:`gaussian_pld` -- :math:`G_\mu`: sensitivity 1, noise std :math:`1/\mu`.
* :func:`poisson_subsampled_gaussian_pld` -- Opacus / TF-Privacy / dp_accounting convention:
  each example's clipped gradient has norm :math:`\le C`, the *sum* over the Poisson batch
  (rate ``sampling_rate``) receives :math:`N(0, (zC)^2 I)` with ``z = noise_multiplier``.
  ``adjacency="add-remove"``: neighbours differ by one example (sum changes by norm :math:`\le C`);
  the profile is the max over the add and remove directions.  ``adjacency="replace"``: one example
  is replaced (sum changes by norm :math:`\le 2C`), modelled exactly as dp_accounting's
  ``NeighboringRelation.REPLACE_ONE``: :math:`(1-q)N(0,z^2) + qN(-1,z^2)` versus
  :math:`(1-q)N(0,z^2) + qN(+1,z^2)` in units of C (see google/differential-privacy issue #378:
  ``noise_multiplier`` is relative to C, *not* to the replace-one sensitivity 2C).
* :func:`symmetric_subsampled_gaussian_pld` -- :math:`C_p(G_\mu)` of DRS22 Thm 9 (fixed-size
  uniform subsampling, replace-one); :math:`\mu` is the GDP parameter of one *unsampled* step under
  replace-one, i.e. :math:`\mu = L/(b\sigma) = 2/z` for gradients clipped at C (theorems.md §0).

Implementation note (measured, see ``benchmarks/composition.py``)
-----------------------------------------------------------------
The arrays are exactly the dp_accounting ones (same grid, same connect-the-dots formula, same
``PrivacyLossDistribution`` semantics; :meth:`Pld.to_dp_accounting` returns a genuine
``dp_accounting.pld.privacy_loss_distribution.PrivacyLossDistribution`` and
:meth:`Pld.from_dp_accounting` wraps one), but the kernels are our own, vectorised, because that
was measured to be 2-20x faster at the same grid: dp_accounting 0.6 builds the one-step PMF with
one Python call per grid point (0.14-0.32 s at 1e-4 for DP-SGD), self-composes with a complex FFT,
numpy's complex power and a 40-order Chernoff search, and computes epsilon with a Python loop over
the grid.  Here the one-step PMF is closed-form vectorised, self-composition is one real FFT
raised to the k-th power by repeated squaring on an optimised Chernoff window, and epsilon/delta
use cumulative sums.  Two-PLD composition uses ``scipy.signal.fftconvolve`` with the same
pessimistic truncation as dp_accounting.  The tests check agreement with dp_accounting to 1e-6
(typically 1e-9).

:class:`SubsampledGaussianComposer` serves accountants that minimise
:math:`\varepsilon(C_p(G_a)^{\otimes k} \otimes G_b)` over the window length k (paper 000,
Thm 4.10): one-step PLDs are cached per grid, the Gaussian factor is multiplied into the same FFT,
and candidates are screened on coarse grids before the fine evaluation.
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy import fft as sp_fft
from scipy import optimize, signal, special

from lastiterate.errors import (
    NotApplicable,
    ParameterError,
    check_in_range,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_probability,
)

__all__ = [
    "DEFAULT_DISCRETIZATION",
    "DEFAULT_LOG_MASS_TRUNCATION_BOUND",
    "DEFAULT_TAIL_MASS_TRUNCATION",
    "Adjacency",
    "EpsilonEstimate",
    "KEstimate",
    "Pld",
    "PldError",
    "SubsampledGaussianComposer",
    "compose_symmetric_subsampled_with_gaussian",
    "gaussian_delta",
    "gaussian_pld",
    "identity_pld",
    "on_feasible_grid",
    "poisson_subsampled_gaussian_epsilon",
    "poisson_subsampled_gaussian_pld",
    "symmetric_subsampled_gaussian_delta",
    "symmetric_subsampled_gaussian_pld",
]

Adjacency = Literal["add-remove", "replace"]

DEFAULT_DISCRETIZATION: float = 1e-4
"""Default grid width of the privacy loss (same default as dp_accounting)."""

DEFAULT_TAIL_MASS_TRUNCATION: float = 1e-15
"""Default bound on the mass an FFT composition may push to +inf (same as dp_accounting)."""

DEFAULT_LOG_MASS_TRUNCATION_BOUND: float = -50.0
"""One-step profiles are cut where delta <= exp(this); the rest is put at +inf (pessimistic)."""

_MAX_GRID_POINTS = 20_000_000  # grids that would need several GB are coarsened by the callers


class _GridTooLarge(ParameterError):
    """A composition would need more than ``_MAX_GRID_POINTS`` grid points at this width."""

    def __init__(self, points: float) -> None:
        super().__init__(
            "discretization",
            "(composition grid)",
            f"composition needs {points:.3g} grid points; use a coarser discretization",
        )
        self.points = points


# ---------------------------------------------------------------------------------------------
# Closed-form privacy profiles
# ---------------------------------------------------------------------------------------------


def _gaussian_parts(eps: np.ndarray, mu: float) -> tuple[np.ndarray, np.ndarray]:
    r"""Return ``(delta, qe)`` of :math:`G_\mu` at ``eps >= 0`` (vectorised, stable).

    ``delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` and
    ``qe = e^eps * Q(L > eps) = e^eps Phi(-eps/mu - mu/2)`` (the minus slope of the profile in
    :math:`u=e^\varepsilon`, times u).  Computed in log space so that neither term underflows and
    the difference keeps its relative precision for large eps.
    """
    log_p = special.log_ndtr(-eps / mu + mu / 2.0)
    log_qe = special.log_ndtr(-eps / mu - mu / 2.0) + eps
    with np.errstate(over="ignore", invalid="ignore"):
        delta = np.exp(log_p) * -np.expm1(np.minimum(log_qe - log_p, 0.0))
    return np.maximum(delta, 0.0), np.exp(log_qe)


def _reflect(x: np.ndarray, delta_at_x: np.ndarray) -> np.ndarray:
    r"""Profile of a symmetric tradeoff at :math:`-x` from its value at :math:`x \ge 0`:
    :math:`\delta(-x) = 1 - e^{-x} + e^{-x}\delta(x)`."""
    return -np.expm1(-x) + np.exp(-x) * delta_at_x


def _symmetric_profile(
    epsilon: float | np.ndarray, mu: float, positive_side: Callable[[np.ndarray], np.ndarray]
) -> float | np.ndarray:
    """Profile of a symmetric tradeoff at every real epsilon from ``positive_side(x)`` (x >= 0);
    ``mu = 0`` is perfect privacy (``delta(x) = 0`` for x >= 0)."""
    arr = np.asarray(epsilon, dtype=float)
    if np.any(np.isnan(arr)):
        raise ParameterError("epsilon", epsilon, "must be a real number, not NaN")
    x = np.abs(arr)
    pos = np.zeros_like(x) if mu == 0.0 else positive_side(x)
    out = np.where(arr >= 0, pos, _reflect(x, pos))
    return float(out) if np.ndim(out) == 0 else out


def gaussian_delta(epsilon: float | np.ndarray, mu: float) -> float | np.ndarray:
    r"""Exact privacy profile of the Gaussian tradeoff :math:`G_\mu`, for every real epsilon.

    .. math:: \delta(\varepsilon;\mu) = \Phi(-\varepsilon/\mu + \mu/2)
              - e^{\varepsilon}\,\Phi(-\varepsilon/\mu - \mu/2)

    (Balle & Wang 2018, Thm 8; Dong, Roth & Su 2022, Cor. 2.13; theorems.md §1.2).  For
    :math:`\varepsilon < 0` the symmetric identity
    :math:`\delta(-x) = 1 - e^{-x} + e^{-x}\delta(x)` is used.  ``mu = 0`` gives
    :math:`\max(0, 1 - e^\varepsilon)` (perfect privacy).
    """
    mu = check_nonnegative("mu", mu)
    return _symmetric_profile(epsilon, mu, lambda x: _gaussian_parts(x, mu)[0])


def _log_amplified(eps: np.ndarray, p: float) -> np.ndarray:
    r"""Return :math:`\varepsilon' = \log(1 + (e^{\varepsilon} - 1)/p)` for :math:`e^\varepsilon > 1-p`.

    ``log1p(expm1(t)/p)`` for small t and ``t + log1p(-(1-p) e^{-t}) - log p`` for large t
    (theorems.md §1.8 implementation note).
    """
    small = eps < 1.0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a = np.log1p(np.expm1(np.where(small, eps, 0.0)) / p)
        b = eps + np.log1p(-(1.0 - p) * np.exp(-np.where(small, 1.0, eps))) - math.log(p)
    return np.where(small, a, b)


def _subsampled_parts(eps: np.ndarray, p: float, mu: float) -> tuple[np.ndarray, np.ndarray]:
    r"""``(delta, qe)`` of the remove-direction profile :math:`pG_\mu + (1-p)\mathrm{Id}`.

    For :math:`\varepsilon > \log(1-p)`: :math:`\delta(\varepsilon) = p\,\delta_G(\varepsilon';\mu)`
    with :math:`e^{\varepsilon'} = 1 + (e^\varepsilon - 1)/p` (Balle, Barthe & Gaboardi 2018,
    Thm 8; theorems.md §1.6) and :math:`Q(L > \varepsilon) = \Phi(-\varepsilon'/\mu - \mu/2)`;
    for :math:`\varepsilon \le \log(1-p)`: :math:`\delta = 1 - e^\varepsilon`, ``qe = e^eps``.
    This is also the profile of :math:`C_p(G_\mu)` for :math:`\varepsilon \ge 0` (DRS22 Thm 9).
    """
    eps = np.asarray(eps, dtype=float)
    delta = np.empty_like(eps)
    qe = np.empty_like(eps)
    flat = eps <= (math.log1p(-p) if p < 1.0 else -math.inf)
    delta[flat] = -np.expm1(eps[flat])
    qe[flat] = np.exp(eps[flat])
    e = eps[~flat]
    ep = _log_amplified(e, p) if p < 1.0 else e
    pos = ep >= 0
    d = np.empty_like(ep)
    log_qe = np.empty_like(ep)
    if np.any(pos):
        dp, _ = _gaussian_parts(ep[pos], mu)
        d[pos] = dp
    if np.any(~pos):
        x = -ep[~pos]
        dx, _ = _gaussian_parts(x, mu)
        d[~pos] = _reflect(x, dx)
    log_qe[:] = special.log_ndtr(-ep / mu - mu / 2.0) + e
    delta[~flat] = np.clip(p * d, 0.0, 1.0)
    qe[~flat] = np.exp(log_qe)
    return delta, qe


def symmetric_subsampled_gaussian_delta(
    epsilon: float | np.ndarray, p: float, mu: float
) -> float | np.ndarray:
    r"""Exact single-step privacy profile of :math:`C_p(G_\mu)` for every real epsilon.

    For :math:`\varepsilon \ge 0`: :math:`\delta(\varepsilon) = p\,\delta_G(\varepsilon';\mu)`,
    :math:`e^{\varepsilon'} = 1 + (e^\varepsilon - 1)/p` (theorems.md §1.6; DRS22 Thm 9 / paper
    000 Prop. D.4).  :math:`C_p(G_\mu)` is symmetric, hence for :math:`\varepsilon < 0`
    :math:`\delta(\varepsilon) = 1 - e^{\varepsilon} + e^{\varepsilon}\delta(-\varepsilon)`
    (from :math:`(p - \gamma q)_+ = p - \gamma q + (\gamma q - p)_+` and the swap symmetry).
    """
    p = check_probability("p", p)
    mu = check_nonnegative("mu", mu)
    return _symmetric_profile(epsilon, mu, lambda x: _subsampled_parts(x.ravel(), p, mu)[0].reshape(x.shape))


# ---------------------------------------------------------------------------------------------
# Dense PMFs on the loss grid
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pmf:
    """Masses ``probs[j]`` at losses ``(lower + j) * Delta`` plus ``infinity_mass`` at +inf."""

    lower: int
    probs: np.ndarray
    infinity_mass: float
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.probs.setflags(write=False)

    @property
    def upper(self) -> int:
        return self.lower + len(self.probs) - 1


def _identity_pmf() -> _Pmf:
    return _Pmf(0, np.ones(1), 0.0)


def _masses_from_values(values: np.ndarray, d: float, bottom: float) -> np.ndarray:
    r"""Masses of the PMF whose profile interpolates ``values`` linearly in :math:`u = e^\varepsilon`.

    ``values[j]`` is the profile at :math:`u_j = e^{(lo+j)\Delta}`; ``bottom`` is
    :math:`-u_0 s_{-}`, minus u_0 times the slope of the profile left of :math:`u_0` (for the
    connect-the-dots anchor at (0, 1) it is ``1 - values[0]``).  Above the last point the profile is
    constant (= mass at +inf, not included here).  Mass at :math:`u_j` is
    :math:`u_j (s_j^+ - s_j^-)` (Doroshenko et al. 2022, Alg. 1; same formula as
    ``dp_accounting.pld.pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap``).
    """
    em1 = math.expm1(d)
    diffs = np.diff(values)  # V_{j+1} - V_j
    out = np.empty_like(values)
    if len(values) == 1:
        out[0] = bottom
        return out
    out[0] = bottom + diffs[0] / em1
    out[1:-1] = (diffs[1:] - diffs[:-1] * math.exp(d)) / em1
    out[-1] = diffs[-1] / math.expm1(-d)
    return out


def _delta_for_epsilon(pmf: _Pmf, d: float, epsilon: float) -> float:
    r""":math:`\delta(\varepsilon) = m_\infty + \sum_{\ell_j > \varepsilon} p_j (1 - e^{\varepsilon - \ell_j})`."""
    start = max(0, math.floor(epsilon / d) - pmf.lower)
    if start >= len(pmf.probs):
        return min(1.0, pmf.infinity_mass)
    losses = (pmf.lower + np.arange(start, len(pmf.probs))) * d
    mask = losses > epsilon
    val = pmf.infinity_mass + float(
        np.dot(-np.expm1(epsilon - losses[mask]), pmf.probs[start:][mask])
    )
    return min(1.0, max(0.0, val))


def _epsilon_for_delta(pmf: _Pmf, d: float, delta: float) -> float:
    r"""Smallest :math:`\varepsilon \ge 0` with :math:`\delta(\varepsilon) \le` ``delta``.

    On :math:`(\ell_{J-1}, \ell_J]` the profile is :math:`U_J - e^{\varepsilon} W_J` with
    :math:`U_J = m_\infty + \sum_{j\ge J} p_j` and :math:`W_J = \sum_{j \ge J} p_j e^{-\ell_j}`, so
    the crossing is :math:`\log((U_J - \delta)/W_J)`.  Same result as dp_accounting's
    ``_get_epsilon_for_delta`` but vectorised (reverse cumulative sums).
    """
    if pmf.infinity_mass > delta:
        return math.inf
    probs = pmf.probs
    n = len(probs)
    tail = np.cumsum(probs[::-1])[::-1] + pmf.infinity_mass  # U_j
    # The crossing is at or below the first grid point j with U_{j+1} <= delta.
    above = np.nonzero(tail <= delta)[0]
    j_top = int(above[0]) if len(above) else n  # U_j <= delta for all j >= j_top
    j_top = min(j_top, n - 1)
    while True:
        shift = (pmf.lower + j_top) * d
        j_lo = max(0, j_top - int(600.0 / d))
        losses = (pmf.lower + np.arange(j_lo, n)) * d
        # W_j * e^shift for j >= j_lo; exponents are <= 600, so nothing overflows
        w = np.cumsum((probs[j_lo:] * np.exp(shift - losses))[::-1])[::-1]
        u = tail[j_lo:]
        m = j_top - j_lo + 1  # grid points j_lo..j_top
        u_next = np.append(u[1:], pmf.infinity_mass)[:m]
        w_next = np.append(w[1:], 0.0)[:m]
        # profile at the grid points: D_j = U_{j+1} - e^{l_j} W_{j+1}  (e^{l_j - shift} <= 1)
        d_grid = u_next - np.exp(losses[:m] - shift) * w_next
        ok = np.nonzero(d_grid <= delta)[0]
        jj = int(ok[0]) if len(ok) else m - 1
        if jj == 0 and j_lo > 0:
            j_top = j_lo  # the crossing lies below the window: move the window down
            continue
        hi = losses[jj]
        lo_ = losses[jj - 1] if jj > 0 else -math.inf
        if w[jj] <= 0.0 or u[jj] <= delta:
            eps = hi if w[jj] <= 0.0 else lo_
        else:
            eps = math.log((u[jj] - delta) / w[jj]) + shift
        eps = min(hi, max(lo_, eps))
        return max(0.0, float(eps))


def _truncate(probs: np.ndarray, tail: float) -> tuple[int, np.ndarray, float]:
    """Pessimistic two-sided truncation (dp_accounting ``_truncate_tails``, vectorised).

    Drops a prefix and a suffix of mass <= tail/2 each; the prefix mass is added to the first kept
    entry (its loss is rounded *up*), the suffix mass is returned to be put at +inf.
    """
    if tail <= 0 or len(probs) < 3:
        return 0, probs, 0.0
    c = np.cumsum(probs)
    left = int(np.searchsorted(c, tail / 2.0, side="right"))
    rc = np.cumsum(probs[::-1])
    right_count = int(np.searchsorted(rc, tail / 2.0, side="right"))
    right = len(probs) - right_count
    right = max(right, left + 1)
    left_mass = float(c[left - 1]) if left > 0 else 0.0
    right_mass = float(probs[right:].sum())
    out = probs[left:right].copy()
    out[0] += left_mass
    return left, out, right_mass


def _truncate_optimistic(probs: np.ndarray, tail: float) -> tuple[int, np.ndarray]:
    """Optimistic truncation: drop the low prefix, move the high suffix *down* to the last entry."""
    if tail <= 0 or len(probs) < 3:
        return 0, probs
    c = np.cumsum(probs)
    left = int(np.searchsorted(c, tail / 2.0, side="right"))
    rc = np.cumsum(probs[::-1])
    right = len(probs) - int(np.searchsorted(rc, tail / 2.0, side="right"))
    right = max(right, left + 1)
    out = probs[left:right].copy()
    out[-1] += float(probs[right:].sum())
    return left, out


def _compose_two(a: _Pmf, b: _Pmf, tail: float, pessimistic: bool) -> tuple[_Pmf, float]:
    """Linear convolution (:func:`_compose_spectral`, with its error bound) + truncation.

    The upper PMF holds ``value + error`` per bin (pointwise above the exact convolution, so its
    profile is above), the optimistic one ``max(value - error, 0)``.  Returns the PMF and, for the
    pessimistic one, the mass sent to +inf (the optimistic slack is 0: nothing wraps around).
    """
    if len(a.probs) == 1 or len(b.probs) == 1:  # a point mass: an exact shift and scaling
        one, other = (a, b) if len(a.probs) == 1 else (b, a)
        c = float(one.probs[0])
        value, error = other.probs * c, (0.0 if c == 1.0 else 2.0 * _EPS) * other.probs * c
    else:
        n_out = len(a.probs) + len(b.probs) - 1
        n_fft = sp_fft.next_fast_len(n_out, real=True)
        value, error, _ = _compose_spectral([a.probs, b.probs], [1, 1], n_fft, 0, n_out, False)
    inf = a.infinity_mass + b.infinity_mass - a.infinity_mass * b.infinity_mass
    if pessimistic:
        off, probs, right = _truncate(np.maximum(value + error, 0.0), tail)
        return _Pmf(a.lower + b.lower + off, probs, min(1.0, inf + right)), right
    off, probs = _truncate_optimistic(np.maximum(value - error, 0.0), tail)
    return _Pmf(a.lower + b.lower + off, probs, inf), 0.0


def _logsumexp_rows(z: np.ndarray) -> np.ndarray:
    """Row-wise log(sum(exp(z))) (plain numpy; -inf entries allowed)."""
    m = np.max(z, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(z - m), axis=-1)) + m[..., 0]


_LAMBDAS = np.logspace(-9.0, 1.0, 81)


def _binned_cgf(pmf: _Pmf) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Upper bounds on K(+lambda) and K(-lambda) on the grid ``_LAMBDAS`` from binned masses (cached)."""
    hit = pmf._cache.get("cgf")
    if hit is not None:
        return hit
    probs = pmf.probs
    n = len(probs)
    width = max(1, n // 2048)
    nb = -(-n // width)
    padded = np.zeros(nb * width)
    padded[:n] = probs
    binned = padded.reshape(nb, width).sum(axis=1)
    keep = binned > 0
    with np.errstate(divide="ignore"):
        logm = np.log(binned[keep])
    start = np.arange(nb)[keep] * width
    stop = np.minimum(start + width - 1, n - 1)
    k_up = _logsumexp_rows(_LAMBDAS[:, None] * stop[None, :] + logm[None, :])
    k_dn = _logsumexp_rows(-_LAMBDAS[:, None] * start[None, :] + logm[None, :])
    with np.errstate(divide="ignore"):
        logp = np.log(probs)
    out = (k_up, k_dn, logp)
    pmf._cache["cgf"] = out
    return out


def _chernoff_window(pmf: _Pmf, k: int, tail: float) -> tuple[int, int]:
    r"""Indices ``[a, b]`` (relative to ``k * lower``) holding all but ``tail`` of the k-fold sum.

    Chernoff: :math:`P(S_k \ge b) \le \exp(k K(\lambda) - \lambda b)` and
    :math:`P(S_k \le a) \le \exp(k K(-\lambda) + \lambda a)` with
    :math:`K(\lambda) = \log\sum_i p_i e^{\lambda i}` (valid for any finite measure), each set to
    ``tail/2``.  :math:`\lambda` is located on a log grid using binned masses (index rounded to
    the bin edge, which can only enlarge K), then the bound is evaluated with the exact K at the
    best grid value and its two neighbours; every evaluated bound is valid, the minimum is kept.
    """
    probs = pmf.probs
    n = len(probs)
    full_hi = k * (n - 1)
    if tail <= 0 or n == 1:
        return 0, full_hi
    log_t = math.log(2.0 / tail)
    k_up, k_dn, logp = _binned_cgf(pmf)
    idx = np.arange(n, dtype=float)
    hi, lo = full_hi, 0
    for sign, kk in ((1.0, k_up), (-1.0, k_dn)):
        bound = (k * kk + log_t) / _LAMBDAS
        bound = np.where(np.isfinite(bound), bound, np.inf)
        j = int(np.argmin(bound))
        cands = _LAMBDAS[max(0, j - 1) : j + 2]
        exact = (
            k * _logsumexp_rows(sign * cands[:, None] * idx[None, :] + logp[None, :]) + log_t
        ) / cands
        exact = exact[np.isfinite(exact)]
        if len(exact) == 0:
            continue
        best = float(np.min(exact))
        if sign > 0:
            hi = min(hi, math.ceil(best))
        else:
            lo = max(lo, math.floor(-best))
    return max(0, lo), max(min(hi, full_hi), max(0, lo))


def _int_power(z: np.ndarray, k: int) -> np.ndarray:
    """``z**k`` by repeated squaring (about 6x faster than numpy's complex power here)."""
    result: np.ndarray | None = None
    base = z
    while k:
        if k & 1:
            result = base.copy() if result is None else result * base
        k >>= 1
        if k:
            base = base * base
    return np.ones_like(z) if result is None else result


def _fold(probs: np.ndarray, n_fft: int) -> np.ndarray:
    """Sum ``probs`` modulo ``n_fft`` (cyclic aliasing, exact for cyclic convolution)."""
    if len(probs) <= n_fft:
        return probs
    m = -(-len(probs) // n_fft)
    padded = np.zeros(m * n_fft)
    padded[: len(probs)] = probs
    return padded.reshape(m, n_fft).sum(axis=0)


# ---------------------------------------------------------------------------------------------
# FFT composition: exponential tilting and a floating-point error bound
# ---------------------------------------------------------------------------------------------

_EPS = float(np.finfo(float).eps)
_FFT_ERROR_CONSTANT = 8.0
"""Per-level constant of the componentwise FFT error model: one radix-2 level costs
eta = mu + gamma_4 (sqrt 2 + mu), about 6u for an accurate twiddle table (Higham, *Accuracy and
Stability of Numerical Algorithms*, 2nd ed., 2002, Thm 24.2); 8 leaves a margin for mixed radices."""
_TILT_RELATIVE_ERROR = 1e-7
"""Tilted passes are added until the FFT error bound is below this fraction of each upper bin ..."""
_TILT_DELTA_FLOOR = 1e-20
"""... wherever the error above that bin could still add more than this to a delta."""
_MAX_TILTS = 5


def _fft_level_error(n_fft: int) -> float:
    """Componentwise bound g of one length-``n_fft`` FFT: ``|fl(F x)_f - (F x)_f| <= g ||x||_1``."""
    return _FFT_ERROR_CONSTANT * max(1, math.ceil(math.log2(max(2, n_fft)))) * _EPS


_THETAS = np.logspace(-9.0, 1.0, 41)


def _binned_log_cgfs(logx: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    r"""Upper bounds on :math:`\log\sum_j x_j e^{\pm\theta j} - \log\sum_j x_j` on ``_THETAS``.

    Masses are summed in at most 2048 blocks and each block's index is rounded to its end that
    makes the exponent larger (``stop`` for +theta, ``start`` for -theta): valid upper bounds on
    both log-CGFs at a cost independent of the length.  Returns ``(up, down, log_total)``.
    """
    n = len(logx)
    width = max(1, -(-n // 2048))
    nb = -(-n // width)
    padded = np.full(nb * width, -np.inf)
    padded[:n] = logx
    blocks = padded.reshape(nb, width)
    with np.errstate(divide="ignore"):
        logm = _logsumexp_rows(blocks)
    keep = np.isfinite(logm)
    logm = logm[keep]
    start = (np.arange(nb) * width)[keep].astype(float)
    stop = np.minimum(start + width - 1, n - 1)
    base = float(special.logsumexp(logm))
    up = _logsumexp_rows(_THETAS[:, None] * stop[None, :] + logm[None, :]) - base
    dn = _logsumexp_rows(-_THETAS[:, None] * start[None, :] + logm[None, :]) - base
    return up, dn, base


def _exact_log_cgfs(logx: np.ndarray, thetas: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Exact ``log sum_j x_j e^{+-theta j} - log sum_j x_j`` at ``thetas``; ``(up, down, log_total)``."""
    j = np.arange(len(logx), dtype=float)
    keep = np.isfinite(logx)
    j, lx = j[keep], logx[keep]
    base = float(special.logsumexp(lx))
    up = _logsumexp_rows(thetas[:, None] * j[None, :] + lx[None, :]) - base
    dn = _logsumexp_rows(-thetas[:, None] * j[None, :] + lx[None, :]) - base
    return up, dn, base


def _chernoff_tails(
    logxs: Sequence[np.ndarray],
    powers: Sequence[int],
    above: np.ndarray,
    below: np.ndarray,
    refine: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Chernoff bounds on :math:`P(S \ge above_m)` and :math:`P(S \le below_m)`, times the total mass.

    S is the sum of independent indices, ``powers[i]`` of them distributed as ``exp(logxs[i])``
    (finite measures, normalised): :math:`P(S \ge c) \le e^{\sum k_i K_i(\theta) - \theta c}`,
    :math:`P(S \le c) \le e^{\sum k_i K_i(-\theta) + \theta c}` for every theta > 0.  The
    best theta of a log grid is located with block-binned log-CGFs (:func:`_binned_log_cgfs`,
    cheap upper bounds), then the bound is re-evaluated with the exact log-CGFs at a few thetas
    around it (``refine``); every evaluated theta gives a valid bound and the minimum is kept.
    """
    up = np.zeros(len(_THETAS))
    dn = np.zeros(len(_THETAS))
    log_total = 0.0
    for logx, k in zip(logxs, powers):
        u, d, base = _binned_log_cgfs(logx)
        up += k * u
        dn += k * d
        log_total += k * base
    ua = up[:, None] - _THETAS[:, None] * above[None, :]
    db = dn[:, None] + _THETAS[:, None] * below[None, :]
    best_up, best_dn = ua.min(axis=0), db.min(axis=0)
    scale = math.exp(log_total)
    if not refine:
        return np.exp(np.minimum(0.0, best_up)) * scale, np.exp(np.minimum(0.0, best_dn)) * scale
    picks = np.unique(np.concatenate([np.argmin(ua, axis=0), np.argmin(db, axis=0)]))
    refined = np.unique((_THETAS[picks][:, None] * np.array([0.5, 0.71, 1.0, 1.41, 2.0])).ravel())
    eu = np.zeros(len(refined))
    ed = np.zeros(len(refined))
    for logx, k in zip(logxs, powers):
        u, d, _ = _exact_log_cgfs(logx, refined)
        eu += k * u
        ed += k * d
    best_up = np.minimum(best_up, (eu[:, None] - refined[:, None] * above[None, :]).min(axis=0))
    best_dn = np.minimum(best_dn, (ed[:, None] + refined[:, None] * below[None, :]).min(axis=0))
    return (
        np.exp(np.minimum(0.0, best_up)) * scale,
        np.exp(np.minimum(0.0, best_dn)) * scale,
    )


def _alias_bound(logxs: Sequence[np.ndarray], powers: Sequence[int], lo: int, hi: int) -> float:
    """Chernoff bound on the composed mass of the factors ``exp(logxs)`` outside ``[lo, hi]``."""
    up, dn = _chernoff_tails(logxs, powers, np.array([hi + 1.0]), np.array([lo - 1.0]))
    return float(up[0] + dn[0])


def _alias_profile(
    logxs: Sequence[np.ndarray], powers: Sequence[int], offset: int, n_fft: int, out_len: int
) -> np.ndarray:
    r"""Per-bin Chernoff bound on the mass a cyclic convolution wraps into bin t of the window.

    Bin t (index ``offset + t``) receives mass only from indices ``>= offset + n_fft + t`` (from
    above) or ``<= offset + t - n_fft`` (from below); both tail bounds are monotone in t and are
    evaluated on 256 blocks at the block end that makes them valid for the whole block, with the
    cheap binned log-CGFs (this profile only steers the choice between tilted passes).
    """
    edges = np.unique(np.linspace(0, out_len, min(out_len, 256) + 1).astype(np.int64))
    starts, stops = edges[:-1], edges[1:] - 1
    up, dn = _chernoff_tails(
        logxs,
        powers,
        (offset + n_fft + starts).astype(float),
        (offset + stops - n_fft).astype(float),
        refine=False,
    )
    return np.repeat(np.minimum(1.0, up + dn), np.diff(edges))


@dataclass
class _Pass:
    """One tilted evaluation: bin t (total index ``offset + t``) holds
    ``r[t] * exp(log_scale - lam * (offset + t))`` with absolute error at most ``bound`` times the
    same factor, plus a relative error ``relative``; ``logxs`` are the tilted, normalised factors
    (for the aliasing bound)."""

    lam: float
    r: np.ndarray
    log_scale: float
    bound: float
    relative: float
    logxs: list[np.ndarray]


def _tilted_pass(
    probs: Sequence[np.ndarray],
    powers: Sequence[int],
    lam: float,
    n_fft: int,
    offset: int,
) -> _Pass:
    r"""Cyclic convolution :math:`\circledast_i x_i^{*k_i}` of the tilted, normalised factors.

    ``x_i = p_i e^{lam j} / M_i``; at total index s the exact result is
    :math:`e^{\lambda s}\prod_i M_i^{-k_i}` times the untilted composition, so untilting multiplies
    by :math:`e^{-\lambda s}\prod M_i^{k_i}`: the FFT's absolute round-off, of the size of
    ``eps * k * max`` of the *tilted* sequence, is small relative to the bins near the tilted mode
    (exponential tilting keeps the far tail of a k-fold FFT power accurate).  The bound follows the
    componentwise FFT model (:func:`_fft_level_error`): a per-frequency input error ``a``
    propagates exactly through the powers, :math:`|\prod z_i^{k_i} - \prod w_i^{k_i}| \le
    \prod(|w_i| + a)^{k_i} - \prod |w_i|^{k_i}`; the rounding of the powers and of the inverse
    transform is added; the sup norm of the output error is at most the weighted mean of the
    spectral errors.
    """
    g = _fft_level_error(n_fft)
    n_half = n_fft // 2 + 1
    log_mod_up = np.zeros(n_half)
    log_scale = 0.0
    logxs = []
    spectra = []
    for p, k in zip(probs, powers):
        if lam == 0.0:
            total = float(np.sum(p))
            x = p / total
            log_scale += k * math.log(total)
            with np.errstate(divide="ignore"):
                logxs.append(np.log(x))
        else:
            with np.errstate(divide="ignore"):
                lw = np.log(p) + lam * np.arange(len(p))
            log_m = float(special.logsumexp(lw))
            log_scale += k * log_m
            logxs.append(lw - log_m)
            x = np.exp(logxs[-1])
        folds = -(-len(x) // n_fft)
        z = sp_fft.rfft(_fold(x, n_fft), n_fft)
        mod = np.abs(z)
        a = g + folds * _EPS
        log_mod_up += k * np.log(mod + a)
        spectra.append((z, mod, k))
    # frequencies whose bound (|w| + a)^k underflows carry less than 1e-300 each: treat them as 0
    live = log_mod_up > -700.0
    spec = np.zeros(n_half, dtype=complex)
    spec[live] = 1.0
    log_mod = np.zeros(int(np.count_nonzero(live)))
    for z, mod, k in spectra:
        with np.errstate(divide="ignore"):
            log_mod += k * np.log(mod[live])
        spec[live] *= _int_power(z[live], k)
    rounding = (2.0 * math.ceil(math.log2(max(2, max(powers)))) * len(powers) + 2.0) * 3.0 * _EPS
    with np.errstate(over="ignore", invalid="ignore"):
        up = np.exp(log_mod_up[live])
        prop = up * -np.expm1(log_mod - log_mod_up[live])  # (|w| + a)^k - |w|^k, stable
    weights = np.full(n_half, 2.0)
    weights[0] = 1.0
    if n_fft % 2 == 0:
        weights[-1] = 1.0
    bound = float(np.dot(weights[live], prop + (rounding + g) * up)) / n_fft
    bound += 2.0 * (n_half - len(up)) * 1e-300 / n_fft
    r = sp_fft.irfft(spec, n_fft)
    if offset:
        r = np.roll(r, -(offset % n_fft))
    # the inputs x and the untilting factor are rounded: relative error per bin
    s_max = abs(offset) + n_fft
    relative = 8.0 * sum(powers) * _EPS + 8.0 * _EPS * (abs(log_scale) + abs(lam) * s_max)
    return _Pass(lam, r, log_scale, bound, relative, logxs)


def _blocks(logp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(log mass, centre index)`` of at most 2048 consecutive blocks of ``exp(logp)``."""
    n = len(logp)
    width = max(1, -(-n // 2048))
    nb = -(-n // width)
    padded = np.full(nb * width, -np.inf)
    padded[:n] = logp
    with np.errstate(divide="ignore"):
        logm = _logsumexp_rows(padded.reshape(nb, width))
    centre = np.minimum(np.arange(nb) * width + (width - 1) / 2.0, n - 1)
    keep = np.isfinite(logm)
    return logm[keep], centre[keep]


def _tilted_moments(
    blocks: Sequence[tuple[np.ndarray, np.ndarray]], powers: Sequence[int], lam: float
) -> tuple[float, float]:
    """Approximate mean and variance of the total index under the tilt ``e^{lam s}``
    (``sum k K'``, ``sum k K''`` from block masses; only used to place a tilt, any tilt is valid)."""
    mean = var = 0.0
    for (logm, c), k in zip(blocks, powers):
        lw = logm + lam * c
        w = np.exp(lw - np.max(lw))
        w /= w.sum()
        m = float(np.dot(w, c))
        mean += k * m
        var += k * float(np.dot(w, (c - m) ** 2))
    return mean, var


def _compose_spectral(
    probs: Sequence[np.ndarray],
    powers: Sequence[int],
    n_fft: int,
    offset: int,
    out_len: int,
    aliasing: bool,
    need_alias: bool = True,
) -> tuple[np.ndarray, np.ndarray, float]:
    r"""Composition :math:`\circledast_i p_i^{*k_i}` on the window ``offset .. offset + out_len - 1``.

    Returns ``(value, error, alias)``: ``|value - exact| <= error`` bin by bin, where *exact* is the
    cyclic composition of length ``n_fft`` (equal to the linear one inside the window up to the
    wrapped-in mass, which is non-negative and at most ``alias`` in total, in the units of the
    values).  A k-fold FFT power has an absolute round-off of about ``k eps`` times its largest bin
    (the k-th power multiplies the spectrum's relative error by k), which swamps the tail
    that a small delta depends on -- the root cause of the under-reports in issue 8.  We therefore
    evaluate the composition with exponential tilts: an untilted pass, then tilts
    :math:`e^{\lambda s}` that move the mode to the part of the upper tail where the error bound is
    not yet below ``_TILT_RELATIVE_ERROR`` of the bin (each bin keeps the pass with the smallest
    bound), at most ``_MAX_TILTS`` passes.
    """
    idx = offset + np.arange(out_len, dtype=float)
    best_log_err = np.full(out_len, np.inf)
    sel_log_err = np.full(out_len, np.inf)
    value = np.zeros(out_len)
    rel = np.zeros(out_len)
    source = np.zeros(out_len, dtype=np.int64)
    passes: list[_Pass] = []
    lam = 0.0
    schedule: list[float] | None = None
    floor = math.inf
    max_index = sum(k * (len(p) - 1) for p, k in zip(probs, powers))
    with np.errstate(divide="ignore"):
        logps = [_blocks(np.log(p)) for p in probs]
    for _ in range(_MAX_TILTS):
        ps = _tilted_pass(probs, powers, lam, n_fft, offset)
        passes.append(ps)
        factor_log = ps.log_scale - lam * idx
        # the untilted pass wraps in at most the Chernoff tail (slack / +inf below); a tilted
        # pass may wrap in much more, which must steer the choice of pass away from it
        alias = (
            _alias_profile(ps.logxs, powers, offset, n_fft, out_len)
            if aliasing and lam > 0.0
            else 0.0
        )
        with np.errstate(divide="ignore"):
            log_err = np.log(np.full(out_len, ps.bound)) + factor_log
            log_sel = np.log(ps.bound + alias) + factor_log
        take = log_sel < sel_log_err
        if lam == 0.0:
            take[:] = True
        with np.errstate(over="ignore", invalid="ignore"):
            value[take] = ps.r[:out_len][take] * np.exp(factor_log[take])
        best_log_err[take] = log_err[take]
        sel_log_err[take] = log_sel[take]
        rel[take] = ps.relative
        source[take] = len(passes) - 1
        # coverage: bins above the mode whose bound is not yet small relative to the bin
        with np.errstate(over="ignore"):
            err = np.exp(best_log_err)
        mode = int(np.argmax(value))
        tail_err = np.cumsum(err[::-1])[::-1]
        # a pass cannot do better than its bound relative to its own mode: ask for 100x that
        floor = min(floor, ps.bound / max(float(np.max(ps.r)), 1e-300))
        rho = max(_TILT_RELATIVE_ERROR, 100.0 * floor)
        bad = (err > rho * np.maximum(value, 0.0)) & (tail_err > _TILT_DELTA_FLOOR)
        bad[: mode + 1] = False
        hits = np.nonzero(bad)[0]
        if len(hits) == 0:
            break
        if schedule is None:
            # tilts on a geometric ladder below the one whose mode reaches the top of the window
            # (per-bin selection keeps the best pass for each bin, so the ladder need not be exact)
            top = min(offset + out_len - 1.0 - (0.1 * out_len if aliasing else 0.0), max_index - 0.5)
            lo_l, hi_l = 0.0, 600.0 / n_fft  # a larger tilt spans more than e^600 over the window
            if _tilted_moments(logps, powers, hi_l)[0] > top:
                for _bisect in range(40):
                    mid = 0.5 * (lo_l + hi_l)
                    if _tilted_moments(logps, powers, mid)[0] > top:
                        hi_l = mid
                    else:
                        lo_l = mid
            schedule = [hi_l / 4.0**j for j in range(_MAX_TILTS - 2, -1, -1)]
            # a tilt whose mode lies below the first inaccurate bin cannot help there
            first_bad = offset + float(hits[0])
            useful = [x for x in schedule if _tilted_moments(logps, powers, x)[0] >= first_bad]
            schedule = useful or schedule[-1:]
        while schedule and schedule[0] <= lam:
            schedule.pop(0)
        if not schedule:
            break
        lam = schedule.pop(0)
    with np.errstate(over="ignore"):
        error = np.exp(best_log_err) + rel * np.abs(value)
    alias_total = 0.0
    if aliasing and need_alias:
        # mass wrapped in from above lands on bins t >= t0 only from indices >= offset + n_fft + t0,
        # mass from below on bins t <= t1 only from indices <= offset + t1 - n_fft
        for i, ps in enumerate(passes):
            taken = np.nonzero(source == i)[0]
            if len(taken) == 0:
                continue
            t0, t1 = int(taken[0]), int(taken[-1])
            w = _alias_bound(ps.logxs, powers, offset + t1 - n_fft + 1, offset + n_fft + t0 - 1)
            top = ps.log_scale - ps.lam * (offset + (t0 if ps.lam > 0 else t1))
            alias_total += w * math.exp(min(700.0, top))
    return value, error, alias_total


def _self_compose(
    pmf: _Pmf, k: int, tail: float, pessimistic: bool, extra: _Pmf | None = None
) -> tuple[_Pmf, float]:
    r"""k-fold composition (times one ``extra`` PMF) by FFT powers on a Chernoff window.

    The window ``[a, a + N)`` of the k-fold sum holds all but ``tail`` of the mass (Chernoff,
    :func:`_chernoff_window`); the composition is evaluated by :func:`_compose_spectral`
    (exponentially tilted FFT powers with a floating-point error bound per bin).  Pessimistic PMF:
    ``value + error`` per bin (above the exact bin; mass wrapped in from outside the window is
    non-negative, so it only adds), the mass above the window (<= tail/2) goes to +inf and the mass
    below it (<= tail/2) to the top bin: every dropped or rounded mass moves up.  Optimistic PMF:
    ``max(value - error, 0)``; the wrapped-in mass (Chernoff-bounded) is returned as slack.
    ``extra`` (e.g. a Gaussian) is convolved in the same transforms over its full support.
    Returns ``(pmf, mass_sent_to_inf_or_slack)``.
    """
    if k == 1 and extra is None:
        return pmf, 0.0
    probs = pmf.probs
    n = len(probs)
    n_extra = 1 if extra is None else len(extra.probs)
    full = k * (n - 1) + 1
    a, b = _chernoff_window(pmf, k, tail)
    width = b - a + 1
    if full <= 2 * width:
        a, width, truncated = 0, full, False
    else:
        truncated = True
    n_fft = sp_fft.next_fast_len(width + n_extra - 1, real=True)
    if n_fft > _MAX_GRID_POINTS:
        raise _GridTooLarge(n_fft)
    factors = [probs] if extra is None else [probs, extra.probs]
    powers = [k] if extra is None else [k, 1]
    out_len = n_fft if truncated else width + n_extra - 1
    value, error, alias = _compose_spectral(
        factors, powers, n_fft, a, out_len, truncated, need_alias=not pessimistic
    )
    inf = -math.expm1(k * math.log1p(-pmf.infinity_mass)) if pmf.infinity_mass < 1 else 1.0
    lower = k * pmf.lower + a
    if extra is not None:
        inf = inf + extra.infinity_mass - inf * extra.infinity_mass
        lower += extra.lower
    if pessimistic:
        out = np.maximum(value + error, 0.0)
        add = tail / 2.0 if truncated else 0.0
        out[-1] += add  # the mass below the window, moved up to the top bin
        return _Pmf(lower, out, min(1.0, inf + add)), add
    return _Pmf(lower, np.maximum(value - error, 0.0), inf), alias


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
        from dp_accounting.pld import pld_pmf, privacy_loss_distribution

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


def _coarser_grid(d: float, points: float) -> float:
    """The grid width to retry with after a grid of width ``d`` needed ``points`` points."""
    new = d * max(2.0, 2.0 * points / _MAX_GRID_POINTS)
    if new > 1.0:
        raise NotApplicable(
            f"the privacy-loss distribution would need {points:.3g} grid points even at width "
            f"{d:g}; its support is too wide to bound numerically"
        )
    return new


def on_feasible_grid(
    build: Callable[[float], Pld], discretization: float = DEFAULT_DISCRETIZATION
) -> Pld:
    """``build(d)`` at the finest width ``d >= discretization`` whose grids fit in memory.

    The grid is chosen from the accuracy the mechanism allows, never left to the user: when a
    one-step profile or a composition window would need more than ``_MAX_GRID_POINTS`` points
    (huge Gaussian factors, very long compositions), the width is multiplied until it fits.  A
    coarser grid is still pessimistic (an upper bound, with a wider bracket).  Raises
    ``NotApplicable`` when no width up to 1 fits.
    """
    d = _check_discretization(discretization)
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
    """Smallest grid index n >= 1 with delta(n * d) <= exp(log_bound)."""
    target = math.exp(log_bound)

    def delta_at(x: float) -> float:
        return float(parts(np.array([x]))[0][0])

    if delta_at(d) <= target:
        return 1
    hi = 1.0
    while delta_at(hi) > target:
        hi *= 2.0
        if hi > 1e5:
            raise ParameterError(
                "mu", "(profile)", "the privacy profile does not decay (mu too large)"
            )
    x = optimize.brentq(
        lambda t: math.log(max(delta_at(t), 1e-320)) - log_bound, 0.0, hi, xtol=d / 4
    )
    n = max(1, math.ceil(x / d))
    while delta_at(n * d) > target:
        n += 1
    if n > _MAX_GRID_POINTS:
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


def _lower_masses(
    rho: np.ndarray, i_lo: int, d: float, one_minus_u: bool
) -> tuple[np.ndarray, float]:
    """Masses of the optimistic curve ``v = lin + rho`` on the grid ``i_lo, i_lo + 1, ...``.

    ``lin`` is 0 or ``1 - u``; a linear part has no second differences, so interior masses come
    from ``rho`` alone (accurate even where v is close to 1).  Left of the first grid point the
    curve is the chord to (0, 1), which lies below ``1 - u <= delta`` when ``v_0 <= 1 - u_0`` (for
    ``lin = 1 - u`` a positive ``rho_0`` -- at most the profile's tiny excess over 1 - u there -- is
    counted as slack).  The min-of-tangents values need not be convex where the profile's
    curvature changes within a grid step (next to an atom), so the signed masses are made
    non-negative with :func:`_carry_up`, which only lowers the curve.
    """
    if len(rho) == 1:
        return np.array([1.0]), 0.0
    masses = _masses_from_values(rho, d, -rho[0] if one_minus_u else 1.0 - rho[0])
    if one_minus_u:
        masses[-1] += math.exp((i_lo + len(rho) - 1) * d)  # the linear part's top mass, u_top
    masses, slack = _carry_up(masses)
    if one_minus_u:
        slack += max(float(rho[0]), 0.0)
    return masses, slack


def _mass_at_zero(v0: float, v1: float, d: float) -> float:
    """Connect-the-dots mass at loss 0 of a symmetric profile with values v0 = delta(0), v1 = delta(d)."""
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


def _symmetric_lower(values: np.ndarray, d: float) -> tuple[_Pmf, float]:
    r"""Optimistic symmetric PMF from below-the-profile values at 0, d, ... (last value 0).

    The signed symmetric PMF (positive side, mass at 0, mirror) represents exactly the
    perspective-symmetric piecewise-linear curve through the values, which lies below the profile
    (the perspective :math:`h(u) \mapsto 1 - u + u h(1/u)` preserves 'below'); then
    :func:`_carry_up` removes negative masses by only lowering the curve.
    """
    if len(values) == 1:
        return _Pmf(0, np.array([1.0]), 0.0), 0.0
    signed = _symmetric_pmf(_symmetric_masses(values, d), d, 0.0)
    probs, slack = _carry_up(np.array(signed.probs))
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
    description: str,
    d: float,
    log_bound: float,
    with_lower: bool,
) -> Pld:
    r"""Connect-the-dots PLD of a *symmetric* profile given by ``parts`` on :math:`\varepsilon \ge 0`.

    The positive side is built from the (accurate, small) values :math:`\delta(i\Delta)`; the
    negative side is its mirror (mass at :math:`-\ell` is :math:`e^{-\ell}` times the mass at
    :math:`\ell`).  The perspective map :math:`\delta(u) \mapsto 1 - u + u\,\delta(1/u)` sends
    chords to chords, so this is exactly the connect-the-dots PMF of the symmetric profile on the
    full grid :math:`\{-n..n\}\Delta`, anchored at (0, 1).
    """
    n = _top_index(parts, d, log_bound)
    grid = np.arange(0, n + 1) * d
    vals, _ = parts(grid)
    vals = np.minimum.accumulate(vals)
    pos = np.maximum(_symmetric_masses(vals, d), 0.0)
    rem = _normalise_upper(_symmetric_pmf(pos, d, float(vals[-1])), n)
    rem, trimmed = _trim_bottom(rem, _BOTTOM_TRIM_MASS, True)
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
        dm, qm = parts((np.arange(0, n) + 0.5) * d)
        mid_a = np.concatenate([[first[0]], dm])
        mid_b = -np.concatenate([[first[1]], qm])
        lv = _lower_residuals(mid_a, mid_b, np.zeros(n + 1), d)
        low, slack = _symmetric_lower(lv, d)
        low, _ = _trim_bottom(_normalise_lower(low), _BOTTOM_TRIM_MASS, False)
    return Pld(
        description=description,
        discretization=d,
        remove=rem,
        add=None,
        lower_remove=low,
        truncation_mass=float(vals[-1]) + trimmed,
        lower_slack=slack,
        log_mass_truncation_bound=log_bound,
    )


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
    \Phi(-\varepsilon/\mu-\mu/2)` (theorems.md §1.2).  ``mu = 0`` gives :func:`identity_pld`.
    """
    mu = check_nonnegative("mu", mu)
    d = _check_discretization(discretization)
    lb = _check_log_bound(log_mass_truncation_bound)
    if mu == 0.0:
        return identity_pld(discretization=d, with_lower=with_lower)
    return _symmetric_pld(lambda e: _gaussian_parts(e, mu), f"G(mu={mu:g})", d, lb, with_lower)


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
    Def. 6 / Thm 9; theorems.md §1.6): uniform fixed-size subsampling of rate ``p = b/n`` under
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
        lambda e: _subsampled_parts(e, p, mu), f"C_p(G_mu)(p={p:g}, mu={mu:g})", d, lb, with_lower
    )


def _replace_parts(q: float, z: float) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    r"""``(delta, qe)`` for dp_accounting's REPLACE_ONE Poisson-subsampled Gaussian, eps >= 0.

    Pair :math:`P = qN(-1,z^2) + (1-q)N(0,z^2)`, :math:`Q = qN(1,z^2) + (1-q)N(0,z^2)`.  The loss
    decreases in x and :math:`L(x) = \varepsilon` at
    :math:`x = z^2(\operatorname{asinh}(-\alpha\sinh(\varepsilon/2)) - \varepsilon/2)`,
    :math:`\alpha = e^{1/(2z^2)}(1-q)/q` (dp_accounting ``_inverse_privacy_loss_replace``);
    then :math:`\delta = P(X\le x) - e^\varepsilon Q(X \le x)` in log space.
    """
    s2 = z * z
    log_alpha = 0.5 / s2 + (math.log1p(-q) - math.log(q) if q < 1 else -math.inf)

    def parts(eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        eps = np.asarray(eps, dtype=float)
        if q < 1:
            # asinh(-alpha sinh(e/2)) = -asinh(exp(log_alpha + log sinh(e/2))), stable
            with np.errstate(divide="ignore"):
                log_sinh = np.where(
                    eps > 0,
                    eps / 2 + np.log(-np.expm1(-np.maximum(eps, 1e-300))) - math.log(2.0),
                    -np.inf,
                )
            t = log_alpha + log_sinh
            asinh = np.where(t > 30, t + math.log(2.0), np.arcsinh(np.exp(np.minimum(t, 30))))
            x = s2 * (-asinh - eps / 2)
        else:
            x = -s2 * eps / 2
        lp = np.logaddexp(
            math.log(q) + special.log_ndtr((x + 1) / z),
            (math.log1p(-q) + special.log_ndtr(x / z)) if q < 1 else -np.inf,
        )
        lq = np.logaddexp(
            math.log(q) + special.log_ndtr((x - 1) / z),
            (math.log1p(-q) + special.log_ndtr(x / z)) if q < 1 else -np.inf,
        )
        log_qe = lq + eps
        delta = np.exp(lp) * -np.expm1(np.minimum(log_qe - lp, 0.0))
        return np.maximum(delta, 0.0), np.exp(log_qe)

    return parts


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
        return _symmetric_pld(_replace_parts(q, z), desc, d, lb, with_lower)
    mu = 1.0 / z
    if q == 1.0:
        return _symmetric_pld(lambda e: _gaussian_parts(e, mu), desc, d, lb, with_lower)
    parts = lambda e: _subsampled_parts(e, q, mu)
    i_lo = math.floor(math.log1p(-q) / d)
    n = _top_index(parts, d, lb)
    grid = np.arange(i_lo, n + 1) * d
    vals, _ = parts(grid)
    vals = np.minimum.accumulate(vals)
    probs = np.maximum(_masses_from_values(vals, d, 1.0 - vals[0]), 0.0)
    rem = _normalise_upper(_Pmf(i_lo, probs, float(vals[-1])), 0)
    # The add direction is the swapped pair; its connect-the-dots PMF is the mirror, except for the
    # mass at +inf of the remove PMF, which becomes P-mass at -inf in the add direction (no
    # contribution to delta).  We keep it as a (pessimistic) mass at the lowest grid point.
    # The add pair is the swapped remove pair; the perspective map sends the remove
    # connect-the-dots curve to the add one on the mirrored grid, so the add PMF is the mirror.
    # (The remove mass at +inf becomes Q-mass at loss -inf, which carries no P-mass.)
    add = _normalise_upper(_Pmf(-n, (rem.probs * np.exp(-grid))[::-1].copy(), 0.0), 0)
    low_rem = low_add = None
    slack = 0.0
    if with_lower:
        # remove direction: residual w.r.t. 0; the midpoint below i_lo is in the linear part
        mids = (np.arange(i_lo - 1, n) + 0.5) * d
        dm, qm = parts(mids)
        lv = _lower_residuals(dm, -qm, np.zeros(n - i_lo + 1), d)
        masses, s1 = _lower_masses(lv, i_lo, d, one_minus_u=False)
        low_rem = _normalise_lower(_Pmf(i_lo, masses, 0.0))
        # add direction (the swapped pair), in residual form w.r.t. 1 - u, because the optimistic
        # PMF cannot simply be mirrored (its total masses are not exactly 1):
        #   delta_A(c) = 1 - u_c + u_c delta_R(-c),
        #   T_c(u) - (1 - u) = u_c delta_R(-c) + u_c Q_A(L <= c) (u/u_c - 1),
        #   Q_A(L <= c) = P_R(L >= -c) = delta_R(-c) + e^{-c} Q_R(L > -c).
        a_lo, a_hi = -n, -i_lo
        mids_a = (np.arange(a_lo - 1, a_hi) + 0.5) * d
        dr, qr = parts(-mids_a)
        uc = np.exp(mids_a)
        grid_a = np.arange(a_lo, a_hi + 1) * d
        lva = _lower_residuals(uc * dr, uc * (dr + qr), -np.expm1(grid_a), d)
        masses_a, s2 = _lower_masses(lva, a_lo, d, one_minus_u=True)
        low_add = _normalise_lower(_Pmf(a_lo, masses_a, 0.0))
        slack = max(s1, s2)
    return Pld(
        description=desc,
        discretization=d,
        remove=rem,
        add=add,
        lower_remove=low_rem,
        lower_add=low_add,
        truncation_mass=float(vals[-1]),
        lower_slack=slack,
        log_mass_truncation_bound=lb,
    )


# ---------------------------------------------------------------------------------------------
# Epsilon helpers and the cached composer for "C_p(G_a)^{⊗k} ⊗ G_b"
# ---------------------------------------------------------------------------------------------


def _gaussian_epsilon(mu: float, delta: float) -> float:
    r"""Exact :math:`\varepsilon(\delta)` of :math:`G_\mu`, rounded up (theorems.md §1.2).

    The one Gaussian inversion of the package (:func:`lastiterate.notions.gdp.gdp_epsilon`, with
    its unified tolerances): :math:`\delta(\varepsilon;\mu) \le \delta` holds exactly in
    floating point for the returned value.
    """
    from lastiterate.notions.gdp import gdp_epsilon

    return gdp_epsilon(delta, mu)


def _compose_power(base: Pld, k: int, extra: Pld | None, tail: float) -> Pld:
    """``base^{⊗k} ⊗ extra`` in one FFT pass per direction (extra must be symmetric)."""
    if extra is not None and not extra.symmetric:
        raise ParameterError("extra", extra.description, "must be a symmetric PLD")
    if extra is not None and extra.discretization != base.discretization:
        raise ParameterError("extra", extra.description, "must have the same discretization")
    e_up = None if extra is None else extra._remove
    rem, t1 = _self_compose(base._remove, k, tail, True, e_up)
    add, t2 = (None, 0.0) if base._add is None else _self_compose(base._add, k, tail, True, e_up)
    low_rem = low_add = None
    slack = 0.0
    if base.has_lower and (extra is None or extra.has_lower):
        e_low = None if extra is None else extra._low_remove
        low_rem, s1 = _self_compose(base._low_remove, k, tail, False, e_low)  # type: ignore[arg-type]
        s2 = 0.0
        if base._low_add is not None:
            low_add, s2 = _self_compose(base._low_add, k, tail, False, e_low)
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


@dataclass(frozen=True)
class KEstimate:
    """Result of :meth:`SubsampledGaussianComposer.minimize`.

    Attributes:
        k: the window length achieving ``epsilon``.
        epsilon: rigorous upper bound on epsilon at ``delta`` for that k (fine grid).
        extra_gaussian_mu: the Gaussian parameter b used with that k.
        delta: the delta of every evaluation.
        discretization: grid width of the final (fine) evaluation.
        screened: ``{grid width: {k: epsilon}}`` for the screening passes (each value is also a
            valid upper bound, just on a coarser grid).
        fine: every fine-grid evaluation ``{k: epsilon}``.
    """

    k: int
    epsilon: float
    extra_gaussian_mu: float
    delta: float
    discretization: float
    screened: dict[float, dict[int, float]]
    fine: dict[int, float]


class SubsampledGaussianComposer:
    r"""Fast repeated evaluation of :math:`\varepsilon_\delta\big(C_p(G_\mu)^{\otimes k} \otimes G_b\big)`.

    This is the shape of the NoisySGD bounds of paper 000 (Thm 4.8: b = 0; Thm 4.10:
    :math:`C_p(G_{2\sqrt2 L/(b\sigma)})^{\otimes(T-\tau)} \otimes G_{\sqrt2 D/(\eta\sigma\sqrt{T-\tau})}`),
    where an accountant minimises over the window length k.  The one-step connect-the-dots PLD
    is built once per grid width; each k costs one real FFT (the Gaussian factor, itself a
    connect-the-dots PMF, is multiplied into the same transform).  :meth:`minimize` scans the
    candidates on a coarse grid and re-evaluates the best few on the fine grid.  Every value
    returned is a rigorous upper bound (pessimistic discretisation at whichever grid produced it).

    Args:
        p: sampling rate of the fixed-size uniform subsampling, in (0, 1].
        mu: GDP parameter of one unsampled step (replace-one), >= 0.
        discretization: fine grid width (default 1e-4).
        screening_discretizations: grid widths of the successive screening passes of
            :meth:`minimize` (default 1e-2 then 1e-3; only those coarser than ``discretization``
            are used).
        tail_mass_truncation: per-composition truncation bound.
        log_mass_truncation_bound: one-step profile cut (see module docstring).
        cache_size: number of composed PLDs kept (LRU; each holds up to a few 1e6 floats).
    """

    def __init__(
        self,
        p: float,
        mu: float,
        *,
        discretization: float = DEFAULT_DISCRETIZATION,
        screening_discretizations: Sequence[float] = (1e-2, 1e-3),
        tail_mass_truncation: float = DEFAULT_TAIL_MASS_TRUNCATION,
        log_mass_truncation_bound: float = DEFAULT_LOG_MASS_TRUNCATION_BOUND,
        cache_size: int = 8,
    ) -> None:
        self.p = check_probability("p", p)
        self.mu = check_nonnegative("mu", mu)
        self.discretization = _check_discretization(discretization)
        self.screening_discretizations = tuple(
            sorted((_check_discretization(x) for x in screening_discretizations), reverse=True)
        )
        self.tail_mass_truncation = check_in_range(
            "tail_mass_truncation", tail_mass_truncation, 0.0, 1e-3
        )
        self.log_mass_truncation_bound = _check_log_bound(log_mass_truncation_bound)
        self._cache_size = check_positive_int("cache_size", cache_size)
        self._one: dict[tuple[float, bool], Pld] = {}
        self._gauss: dict[tuple[float, float, bool], Pld] = {}
        self._composed: OrderedDict[tuple[float, int, float, bool], Pld] = OrderedDict()

    def __repr__(self) -> str:
        return f"SubsampledGaussianComposer(p={self.p:g}, mu={self.mu:g}, discretization={self.discretization:g})"

    def one_step(self, *, discretization: float | None = None, with_lower: bool = False) -> Pld:
        """The (cached) one-step PLD :math:`C_p(G_\\mu)` on the given grid."""
        d = self.discretization if discretization is None else _check_discretization(discretization)
        key = (d, with_lower)
        if key not in self._one:
            self._one[key] = symmetric_subsampled_gaussian_pld(
                self.p,
                self.mu,
                discretization=d,
                log_mass_truncation_bound=self.log_mass_truncation_bound,
                with_lower=with_lower,
            )
        return self._one[key]

    def _gaussian(self, b: float, d: float, with_lower: bool) -> Pld:
        key = (b, d, with_lower)
        if key not in self._gauss:
            if len(self._gauss) > 4 * self._cache_size:
                self._gauss.clear()
            self._gauss[key] = gaussian_pld(
                b,
                discretization=d,
                log_mass_truncation_bound=self.log_mass_truncation_bound,
                with_lower=with_lower,
            )
        return self._gauss[key]

    def pld(
        self,
        k: int,
        extra_gaussian_mu: float = 0.0,
        *,
        discretization: float | None = None,
        with_lower: bool = False,
    ) -> Pld:
        r"""The (cached) PLD of :math:`C_p(G_\mu)^{\otimes k} \otimes G_b`, ``b = extra_gaussian_mu``."""
        k = check_positive_int("k", k, minimum=0)
        b = check_nonnegative("extra_gaussian_mu", extra_gaussian_mu)
        d = self.discretization if discretization is None else _check_discretization(discretization)
        key = (d, k, b, with_lower)
        hit = self._composed.get(key)
        if hit is not None:
            self._composed.move_to_end(key)
            return hit
        def build(width: float) -> Pld:
            extra = None if b == 0.0 else self._gaussian(b, width, with_lower)
            if k == 0:
                if extra is None:
                    return identity_pld(discretization=width, with_lower=with_lower)
                return extra
            return _compose_power(
                self.one_step(discretization=width, with_lower=with_lower),
                k,
                extra,
                self.tail_mass_truncation,
            )

        out = on_feasible_grid(build, d)
        self._composed[key] = out
        while len(self._composed) > self._cache_size:
            self._composed.popitem(last=False)
        return out

    def epsilon(
        self,
        k: int,
        delta: float,
        extra_gaussian_mu: float = 0.0,
        *,
        discretization: float | None = None,
    ) -> float:
        r"""Rigorous upper bound on :math:`\varepsilon_\delta(C_p(G_\mu)^{\otimes k} \otimes G_b)`.

        ``k = 0`` gives the exact Gaussian value (0 when b = 0).
        """
        delta = check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
        k = check_positive_int("k", k, minimum=0)
        b = check_nonnegative("extra_gaussian_mu", extra_gaussian_mu)
        if k == 0 or self.mu == 0.0:
            return _gaussian_epsilon(b, delta)
        return self.pld(k, b, discretization=discretization).epsilon(delta)

    def epsilon_with_error(
        self,
        k: int,
        delta: float,
        extra_gaussian_mu: float = 0.0,
        *,
        discretization: float | None = None,
    ) -> EpsilonEstimate:
        """Certified bracket (builds the optimistic twins too; about twice the cost)."""
        delta = check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
        k = check_positive_int("k", k, minimum=0)
        b = check_nonnegative("extra_gaussian_mu", extra_gaussian_mu)
        if k == 0 or self.mu == 0.0:
            e = _gaussian_epsilon(b, delta)
            d = self.discretization if discretization is None else discretization
            return EpsilonEstimate(
                upper=e, lower=e, delta=delta, discretization=d, truncation_mass=0.0
            )
        return self.pld(k, b, discretization=discretization, with_lower=True).epsilon_with_error(
            delta
        )

    def minimize(
        self,
        ks: Iterable[int],
        delta: float,
        extra_gaussian_mu: float | Callable[[int], float] = 0.0,
        *,
        refine: int = 3,
    ) -> KEstimate:
        r"""Minimise the upper bound over the candidate window lengths ``ks``.

        ``extra_gaussian_mu`` is b, or a function ``k -> b(k)``.  Successive screening passes on
        coarse grids (default 1e-2 then 1e-3) keep the candidates whose value is within 3% (then
        0.3%) of the pass's best, at most ``4 * refine`` (then ``refine``) of them; the survivors
        are evaluated on the fine grid, skipping any whose exact Gaussian epsilon (a lower bound:
        composing more mechanisms never lowers epsilon) already exceeds the best fine value.
        Every evaluated value is a valid upper bound for its k, so the returned minimum is too.
        """
        delta = check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
        refine = check_positive_int("refine", refine)
        cands = sorted({check_positive_int("ks", k, minimum=0) for k in ks})
        if not cands:
            raise ParameterError("ks", "[]", "must contain at least one integer >= 0")
        if callable(extra_gaussian_mu):
            b_of = {k: check_nonnegative("extra_gaussian_mu", extra_gaussian_mu(k)) for k in cands}
        else:
            b = check_nonnegative("extra_gaussian_mu", extra_gaussian_mu)
            b_of = {k: b for k in cands}
        screened: dict[float, dict[int, float]] = {}
        passes = [x for x in self.screening_discretizations if x > self.discretization]
        for i, d in enumerate(passes):
            if len(cands) <= refine:
                break
            vals = {k: self.epsilon(k, delta, b_of[k], discretization=d) for k in cands}
            screened[d] = vals
            best = min(vals.values())
            last = i == len(passes) - 1
            rel = 3e-3 if last else 3e-2
            cap = refine if last else 4 * refine
            order = sorted(cands, key=lambda k: (vals[k], k))
            cands = [k for k in order if vals[k] <= best * (1.0 + rel) + 1e-12][:cap]
        fine: dict[int, float] = {}
        best_fine = math.inf
        for k in sorted(cands, key=lambda k: b_of[k]):
            if fine and _gaussian_epsilon(b_of[k], delta) >= best_fine:
                continue
            fine[k] = self.epsilon(k, delta, b_of[k])
            best_fine = min(best_fine, fine[k])
        k_best = min(fine, key=lambda k: (fine[k], k))
        return KEstimate(
            k=k_best,
            epsilon=fine[k_best],
            extra_gaussian_mu=float(b_of[k_best]),
            delta=delta,
            discretization=self.discretization,
            screened=screened,
            fine=fine,
        )


def poisson_subsampled_gaussian_epsilon(
    sampling_rate: float,
    noise_multiplier: float,
    steps: int,
    delta: float,
    *,
    adjacency: Adjacency = "add-remove",
    discretization: float = DEFAULT_DISCRETIZATION,
    with_lower: bool = False,
) -> EpsilonEstimate:
    """Epsilon of ``steps`` DP-SGD steps with Poisson sampling (see :func:`poisson_subsampled_gaussian_pld`).

    Returns an :class:`EpsilonEstimate` whose ``upper`` is a rigorous bound; with
    ``with_lower=True`` ``lower`` is a certified lower bound on the exact epsilon.
    """
    steps = check_positive_int("steps", steps, minimum=0)
    delta = check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    one = poisson_subsampled_gaussian_pld(
        sampling_rate,
        noise_multiplier,
        adjacency=adjacency,
        discretization=discretization,
        with_lower=with_lower,
    )
    return one.self_compose(steps).epsilon_with_error(delta)


@functools.lru_cache(maxsize=8)
def _composer(p: float, mu: float, discretization: float) -> SubsampledGaussianComposer:
    return SubsampledGaussianComposer(p, mu, discretization=discretization)


def compose_symmetric_subsampled_with_gaussian(
    p: float,
    mu_sub: float,
    k: int,
    mu_gauss: float,
    delta: float,
    *,
    discretization: float = DEFAULT_DISCRETIZATION,
) -> float:
    r"""Upper bound on :math:`\varepsilon_\delta(C_p(G_{\mu_{sub}})^{\otimes k} \otimes G_{\mu_{gauss}})`.

    Convenience wrapper around a module-level cache of :class:`SubsampledGaussianComposer`
    (one per ``(p, mu_sub, discretization)``), so that repeated calls with the same subsampled
    step reuse the one-step PLD.  ``k = 0`` gives the exact Gaussian epsilon.
    """
    p = check_probability("p", p)
    mu_sub = check_nonnegative("mu_sub", mu_sub)
    d = _check_discretization(discretization)
    return _composer(p, mu_sub, d).epsilon(k, delta, mu_gauss)
