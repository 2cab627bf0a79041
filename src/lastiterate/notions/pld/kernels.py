"""PMF kernels on the loss grid: connect-the-dots masses, epsilon/delta of a PMF, pessimistic
truncation, Chernoff windows and the tilted FFT composition with its floating-point error bound."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from lastiterate.notions import normal
from lastiterate.notions.arrays import sorted_unique as _sorted_unique
from lastiterate.notions.pld._common import (
    _TILT_FLOOR_FRACTION,
    _GridTooLarge,
    max_grid_points,
    tilt_delta_floor,
)

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
    r"""Masses of the PMF whose profile interpolates ``values`` linearly in
    :math:`u = e^\varepsilon`.

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
    r"""The profile of a PMF at one epsilon.

    :math:`\delta(\varepsilon) = m_\infty + \sum_{\ell_j > \varepsilon} p_j
    (1 - e^{\varepsilon - \ell_j})`, rounded up by a bound on its rounding error: each term's
    loss is off by :math:`u|\ell_j|` (u = EPS/2), which moves the term by at most
    :math:`p_j u |\ell_j|` (the slope of :math:`1 - e^{\varepsilon - \ell}` is at most 1; a term
    wrongly kept or dropped at the bin edge is that small too), expm1 and the product add 2u of
    the term, numpy's pairwise sum :math:`u (\log_2 n + 8)` of the total: in all at most
    :math:`u (|\ell|_{max} + \log_2 n + 12)` times the mass above epsilon.
    """
    start = max(0, math.floor(epsilon / d) - pmf.lower)
    if start >= len(pmf.probs):
        return min(1.0, pmf.infinity_mass)
    losses = (pmf.lower + np.arange(start, len(pmf.probs))) * d
    mask = losses > epsilon
    above = pmf.probs[start:][mask]
    val = pmf.infinity_mass + float(np.sum(-np.expm1(epsilon - losses[mask]) * above))
    n = len(above)
    loss_max = max(abs(float(losses[0])), abs(float(losses[-1])))
    margin = _EPS / 2.0 * (loss_max + math.log2(n + 1) + 12.0) * float(np.sum(above))
    return min(1.0, max(0.0, val + 1.01 * margin + _EPS * pmf.infinity_mass))


def _epsilon_for_delta(pmf: _Pmf, d: float, delta: float) -> float:
    r"""Smallest :math:`\varepsilon \ge 0` with :math:`\delta(\varepsilon) \le` ``delta``.

    On :math:`(\ell_{J-1}, \ell_J]` the profile is :math:`U_J - e^{\varepsilon} W_J` with
    :math:`U_J = m_\infty + \sum_{j\ge J} p_j` and :math:`W_J = \sum_{j \ge J} p_j e^{-\ell_j}`, so
    the crossing is :math:`\log((U_J - \delta)/W_J)`.  Same result as dp_accounting's
    ``_get_epsilon_for_delta`` but vectorised (reverse cumulative sums).
    """
    if pmf.infinity_mass > delta:
        return math.inf
    found = _epsilon_for_delta_top(pmf, d, delta)
    return _epsilon_for_delta_full(pmf, d, delta) if found is None else found


def _epsilon_for_delta_full(pmf: _Pmf, d: float, delta: float) -> float:
    """:func:`_epsilon_for_delta` from sums over the whole PMF (``infinity_mass <= delta``)."""
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
        return _crossing_epsilon(losses, u, w, jj, delta, shift)


def _crossing_epsilon(
    losses: np.ndarray,
    u: np.ndarray,
    w: np.ndarray,
    jj: int,
    delta: float,
    shift: float,
) -> float:
    """The epsilon where the profile ``U_J - e^eps W_J`` crosses ``delta`` in the bin
    ``(losses[jj-1], losses[jj]]`` (``w`` scaled by ``e^shift``), clamped to the bin and to
    ``eps >= 0``, rounded up by a bound on its rounding error (:func:`_crossing_margin`); the bin's
    top where ``U - delta`` is not resolved above its own rounding.  ``u`` and ``w`` hold the
    reverse cumulative sums from the top of the PMF down to (at least) ``jj``."""
    hi = float(losses[jj])
    lo_ = float(losses[jj - 1]) if jj > 0 else -math.inf
    big_u, big_w = float(u[jj]), float(w[jj])
    half = _EPS / 2.0
    # recursive summation: |fl(S_n) - S_n| <= u * (sum of the computed partial sums)
    spread_u = half * (float(np.sum(u[jj:])) + big_u + delta)
    if big_w <= 0.0 or big_u - delta <= 2.0 * spread_u:
        eps = hi
    else:
        eps = math.log((big_u - delta) / big_w) + shift
        rel_w = half * float(np.sum(w[jj:])) / big_w
        loss_max = max(abs(float(losses[0])), abs(float(losses[-1])))
        eps += _crossing_margin(spread_u / (big_u - delta), rel_w, loss_max, eps)
    eps = min(hi, max(lo_, eps))
    return max(0.0, eps)


def _crossing_margin(rel_u: float, rel_w: float, loss_max: float, eps: float) -> float:
    r"""Bound on the rounding error of the crossing :math:`\log((U - \delta)/W) + s`, given the
    relative errors of :math:`U - \delta` (``rel_u``) and of the sum W (``rel_w``).

    U and W are sequential (reverse cumulative) sums of non-negative terms: the error of such a sum
    is at most u (u = EPS/2) times the sum of its computed partial sums (first order; Higham,
    *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §4.2), far below ``n u`` of the
    total when the terms grow towards the end, as the tail masses do.  W's terms also carry
    ``exp`` and a product (2u) and the rounding of their losses (:math:`u |\ell|` in the
    exponent), and log, the division, the shift and the sum add :math:`u(|\varepsilon| + 3)`.
    The crossing is clamped to its bin afterwards (the bin's top is always a valid epsilon).
    """
    u = _EPS / 2.0
    return 1.01 * (rel_u + rel_w + u * (loss_max + abs(eps) + 6.0))


#: first length of the top part of a PMF that :func:`_epsilon_for_delta_top` reads (grown 4x):
#: this many points or this fraction of the PMF (measured: the epsilon at delta = 1e-5 of DP-SGD
#: compositions, 40 to 2000 steps, lies 25-45% of the window below its top)
_TOP_START = 4096
_TOP_FRACTION = 0.5


def _epsilon_for_delta_top(pmf: _Pmf, d: float, delta: float) -> float | None:
    """:func:`_epsilon_for_delta` reading only the top of the PMF: the same value, or None.

    Both sums are reverse cumulative sums (``np.cumsum`` adds sequentially), so ``U_j`` and
    ``W_j`` of a suffix ``j >= s`` are bit-identical to those of the whole PMF.  The suffix is grown
    (4x) until it holds the first grid point with ``U_j <= delta`` and the crossing of the
    profile strictly above its bottom; None (use the full computation) when the crossing would be
    in the bottom bin of the full window, or the window would have to move down.  The profile at the
    grid points decreases strictly where mass lies above, so the first point at or below ``delta``
    found in the suffix is the first of the whole window.  Costs O(n - crossing) instead of O(n):
    the epsilon of a long composition sits in its upper tail.
    """
    probs = pmf.probs
    n = len(probs)
    m = max(_TOP_START, int(_TOP_FRACTION * n))
    use_floor = True
    while True:
        s = max(0, n - m)
        # U_j for j >= s, and the same numbers in increasing order (U_{n-1} first): U decreases
        # in j (a reverse cumulative sum of non-negative masses), so "the first j with U_j <= x"
        # is a binary search
        rising = np.cumsum(probs[s:][::-1]) + pmf.infinity_mass
        tail = rising[::-1]
        at_most = int(np.searchsorted(rising, delta, side="right"))  # how many U_j <= delta
        if at_most == len(tail) and s > 0:
            m *= 4  # U_s <= delta already: the first such point lies below the suffix
            continue
        j_top = min(s + len(tail) - at_most if at_most else n, n - 1)
        j_lo = max(0, j_top - int(600.0 / d))
        if s < j_lo:
            return None  # the window moves with j_top: leave it to the full computation
        # the crossing lies at or above `floor`: start the sums there (the same suffix sums)
        floor = s + (_crossing_floor(rising, delta, d) if use_floor else 0)
        floor = max(s, min(floor, j_top - 1))
        shift = (pmf.lower + j_top) * d
        losses = (pmf.lower + np.arange(floor, n)) * d
        w = np.cumsum((probs[floor:] * np.exp(shift - losses))[::-1])[::-1]
        u = tail[floor - s :]
        mm = j_top - floor + 1
        u_next = np.append(u[1:], pmf.infinity_mass)[:mm]
        w_next = np.append(w[1:], 0.0)[:mm]
        d_grid = u_next - np.exp(losses[:mm] - shift) * w_next
        ok = np.nonzero(d_grid <= delta)[0]
        jj = int(ok[0]) if len(ok) else mm - 1
        if jj == 0 and floor > s:
            use_floor = False  # (never seen) the floor was too high: the whole suffix again
            continue
        if jj == 0 and s > j_lo:
            m *= 4  # the crossing may lie below the suffix
            continue
        if jj == 0 and j_lo > 0:
            return None  # the full computation moves its window down
        return _crossing_epsilon(losses, u, w, jj, delta, shift)


#: loss gaps K * Delta of :func:`_crossing_floor`
_FLOOR_GAPS = (0.05, 0.1, 0.2, 0.5)


def _crossing_floor(rising: np.ndarray, delta: float, d: float) -> int:
    r"""An index (into the suffix whose tail sums ``U`` are ``rising[::-1]``) below which the
    profile at the grid points stays above ``delta``: :func:`_epsilon_for_delta_top` need not sum
    below it.

    At a grid point :math:`\delta(\ell_j) = m_\infty + \sum_{i>j} p_i (1 - e^{-(i-j)\Delta})
    \ge (1 - e^{-K\Delta})\, U_{j+K}` for every K >= 1, so a point with
    :math:`\delta(\ell_j) \le \delta` has :math:`U_{j+K} \le \delta / (1 - e^{-K\Delta})`,
    i.e. j is at least the first such index minus K (the best over a few loss gaps K Delta,
    with a margin of 1e-6 relative and 2 bins for the rounding of the computed sums).  Only
    where the sums start depends on it: the sums themselves are the suffix's, bit for bit.
    """
    n = len(rising)
    best = 0
    for gap in _FLOOR_GAPS:
        k = max(1, round(gap / d))
        level = delta / -math.expm1(-k * d) * (1.0 + 1e-6)
        first = n - int(np.searchsorted(rising, level, side="right"))  # first U_j <= level
        best = max(best, first - k - 2)
    return best


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
    # both dropped masses rounded up: a float sum of m terms is within (m - 1) eps of its exact
    # value (Higham 2002, eq. 4.4, for any order of summation), and moving mass up is pessimistic
    left_mass = float(c[left - 1]) * (1.0 + left * _EPS) if left > 0 else 0.0
    right_mass = float(probs[right:].sum()) * (1.0 + (len(probs) - right + 1) * _EPS)
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
        n_fft = next_fast_len_real(n_out)
        value, error, _ = _compose_spectral([a.probs, b.probs], [1, 1], n_fft, 0, n_out, False)
    inf = a.infinity_mass + b.infinity_mass - a.infinity_mass * b.infinity_mass
    if pessimistic:
        off, probs, right = _truncate(np.maximum(value + error, 0.0), tail)
        return _Pmf(a.lower + b.lower + off, probs, min(1.0, inf + right)), right
    off, probs = _truncate_optimistic(np.maximum(value - error, 0.0), tail)
    return _Pmf(a.lower + b.lower + off, probs, inf), 0.0


def _logsumexp_rows(z: np.ndarray, consume: bool = False) -> np.ndarray:
    """Row-wise log(sum(exp(z))) (plain numpy; -inf entries allowed).

    Terms below e^-700 of the row's largest are raised to e^-700 (subnormal exponentials are slow):
    the result can only grow, by a relative 1e-304 per term, which keeps every Chernoff/CGF bound
    computed with it valid.  A row of -inf only is -inf.  ``consume=True`` lets the function
    overwrite ``z`` (a temporary of the caller's; the same operations, fewer large allocations).
    """
    m = np.max(z, axis=-1, keepdims=True)
    finite = np.isfinite(m[..., 0])
    m = np.where(np.isfinite(m), m, 0.0)
    t = np.subtract(z, m, out=z if consume else None)
    np.maximum(t, -700.0, out=t)
    np.exp(t, out=t)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(t, axis=-1)) + m[..., 0]
    return np.where(finite, out, -np.inf)


#: elements of the working block of :func:`_outer_logsumexp` (512 KB: it stays in the core's cache)
_OUTER_BLOCK_ELEMENTS = 2**16


def _outer_logsumexp(scales: np.ndarray, idx: np.ndarray, logm: np.ndarray) -> np.ndarray:
    r"""``_logsumexp_rows(scales[:, None] * idx[None, :] + logm[None, :])``: row i is
    :math:`\log\sum_j e^{s_i x_j + \log m_j}`, a CGF of the masses ``exp(logm)`` at the indices
    ``idx`` (at the tilt ``s_i``).

    The matrix is formed and reduced a few rows at a time (about ``_OUTER_BLOCK_ELEMENTS``
    entries): every row sees the same operations on the same numbers as in the whole matrix (a
    product, a sum, then :func:`_logsumexp_rows`, which reduces each row alone), so the values are
    the same bit for bit, while the working block stays in the cache (measured 1.3-1.9x faster
    on the 14 x 1e5 and 41 x 7e4 matrices of a long composition's aliasing bounds)."""
    rows = max(1, _OUTER_BLOCK_ELEMENTS // max(1, len(idx)))
    out = np.empty(len(scales))
    for start in range(0, len(scales), rows):
        block = scales[start : start + rows, None] * idx[None, :]
        block += logm[None, :]
        out[start : start + rows] = _logsumexp_rows(block, True)
    return out


_LAMBDAS = np.logspace(-9.0, 1.0, 81)


def _binned_cgf(pmf: _Pmf) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Upper bounds on K(+lambda), K(-lambda) on the grid ``_LAMBDAS`` (binned masses, cached)."""
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
    k_up = _outer_logsumexp(_LAMBDAS, stop, logm)
    k_dn = _outer_logsumexp(-_LAMBDAS, start, logm)
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

    Rounding: K is a floating-point log-sum-exp, off by up to a few 1e-15 (measured against
    40-digit mpmath: 7e-15 at lambda = 0.01 for DP-SGD at 1e-4), which k = 1e7 turns into 7e-8
    relative on the tail bound.  The exponent ``k K + log(2/tail)`` is therefore raised by a bound
    on its rounding error (:func:`_chernoff_exponent_margin`) before it is divided by lambda and
    rounded outward, so that :math:`\exp(k K(\lambda) - \lambda b) \le` ``tail/2`` holds for the
    exact K of the float masses.
    """
    probs = pmf.probs
    n = len(probs)
    full_hi = k * (n - 1)
    if tail <= 0 or n == 1:
        return 0, full_hi
    log_t = math.log(2.0 / tail)
    k_up, k_dn, _logp = _binned_cgf(pmf)
    hi, lo = full_hi, 0
    for sign, kk in ((1.0, k_up), (-1.0, k_dn)):
        bound = (k * kk + log_t) / _LAMBDAS
        bound = np.where(np.isfinite(bound), bound, np.inf)
        j = int(np.argmin(bound))
        picks = range(max(0, j - 1), min(len(_LAMBDAS), j + 2))
        cands = _LAMBDAS[picks.start : picks.stop]
        cgf = _exact_cgf(pmf, sign, picks)
        exponent = k * cgf + log_t
        exponent += _chernoff_exponent_margin(pmf, k, cands, cgf, log_t)
        exact = exponent / cands
        exact = exact[np.isfinite(exact)]
        if len(exact) == 0:
            continue
        best = float(np.min(exact))
        best += 4.0 * _EPS * abs(best)  # the division and the sum above: u each, twice over
        if sign > 0:
            hi = min(hi, math.ceil(best))
        else:
            lo = max(lo, math.floor(-best))
    return max(0, lo), max(min(hi, full_hi), max(0, lo))


def _log_mass_range(pmf: _Pmf) -> float:
    """``max |log p_i|`` over the PMF's positive masses (remembered on the PMF)."""
    hit = pmf._cache.get("log_mass_range")
    if hit is None:
        logp = _binned_cgf(pmf)[2]
        finite = logp[np.isfinite(logp)]
        hit = float(np.max(np.abs(finite))) if len(finite) else 0.0
        pmf._cache["log_mass_range"] = hit
    return hit


def _cgf_rounding(n: int, lam: np.ndarray, cgf: np.ndarray, log_mass_range: float) -> np.ndarray:
    r"""Bound on ``|K_computed - K|`` for :func:`_exact_cgf`'s log-sum-exp
    :math:`K(\pm\lambda) = m + \log\sum_i e^{t_i}` of the row ``+-lam * i + log p_i``
    (i < n, :math:`t_i = \text{row}_i - m \le 0`, m the largest entry).

    Standard model (u = EPS/2; Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
    2002, §2-4), with L = ``log_mass_range`` and N = n - 1: ``log p`` is within EPS relative
    (numpy's log, measured at 0.5 ulp against mpmath), the product ``lam * i``, the sum and
    the subtraction of m add u times operands of size at most ``lam N + L`` and
    ``2 (lam N + L)``, so every :math:`t_i` is within ``u (4 lam N + 5 L)`` of its exact value
    (moving the sum by that much, relative); exp is within ``_EXP_ACCURACY``, numpy's pairwise
    sum of n non-negative terms within ``(log2 n + 20) u``, the log of the sum (in [1, n])
    within EPS times log n, and adding m within u |K|.  Raising terms below e^-700 (the clamp
    of :func:`_logsumexp_rows`) only makes K larger.  First-order terms times 1.01."""
    u = _EPS / 2.0
    span = lam * max(n - 1, 0)
    rel = u * (4.0 * span + 5.0 * log_mass_range + math.log2(max(n, 2)) + 20.0) + _EXP_ACCURACY
    return 1.01 * rel + _EPS * math.log(max(n, 2)) + u * np.abs(cgf)


def _chernoff_exponent_margin(
    pmf: _Pmf, k: int, lam: np.ndarray, cgf: np.ndarray, log_t: float
) -> np.ndarray:
    """Bound on the rounding error of the Chernoff exponent ``k K(lam) + log(2/tail)`` of
    :func:`_chernoff_window`: k times :func:`_cgf_rounding`, the product with k and the sum (u
    each of their operands) and ``log(2/tail)`` (the quotient and the log: u + EPS |log_t|)."""
    u = _EPS / 2.0
    err_k = k * _cgf_rounding(len(pmf.probs), lam, cgf, _log_mass_range(pmf))
    ops = u * (2.0 * np.abs(k * cgf) + 3.0 * abs(log_t) + 1.0)
    return 1.01 * (err_k + ops)


def _exact_cgf(pmf: _Pmf, sign: float, picks: range) -> np.ndarray:
    r"""Exact :math:`K(\pm\lambda) = \log\sum_i p_i e^{\pm\lambda i}` at ``_LAMBDAS[picks]``.

    T-independent, so it is remembered on the PMF per (sign, lambda): the k-fold compositions of
    one one-step PMF for many k (a sweep over the number of steps, issue 11) evaluate each lambda
    once.  Every value is computed alone (one row), so a remembered value is bit-identical to a
    fresh one whatever the order of the calls.
    """
    memo = pmf._cache.setdefault("exact_cgf", {})
    out = np.empty(len(picks))
    logp = None
    for m, i in enumerate(picks):
        key = (sign, i)
        hit = memo.get(key)
        if hit is None:
            if logp is None:
                logp = _binned_cgf(pmf)[2]
                idx = np.arange(len(logp), dtype=float)
            row = (sign * _LAMBDAS[i]) * idx + logp
            hit = float(_logsumexp_rows(row[None, :], True)[0])
            memo[key] = hit
        out[m] = hit
    return out


def _int_power(z: np.ndarray, k: int) -> np.ndarray:
    """``z**k`` by repeated squaring (about 6x faster than numpy's complex power here); the
    squares and the product are formed in place in two working arrays (``z`` is left as it is)."""
    result: np.ndarray | None = None
    base = z
    owned = False  # whether `base` is a working array of ours (not z)
    while k:
        if k & 1:
            if result is None:
                result = base.copy()
            else:
                np.multiply(result, base, out=result)
        k >>= 1
        if k:
            if owned:
                np.multiply(base, base, out=base)
            else:
                base = base * base
                owned = True
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
_EXP_ACCURACY = 4.0 * _EPS
"""Relative accuracy assumed of numpy's ``exp`` on the arguments the Chernoff and tilt-placement
kernels give it (``[-700, 0]``): 4 ulp.  Measured against 40-digit mpmath on 80 000 random and
extreme arguments there: at most 0.503 ulp (numpy 2.4 on x86-64 AVX2, glibc's exp); numpy's own
AVX512F kernel (Tang's table-driven algorithm) is proved within 0.77 ulp; glibc's is < 1 ulp
(tests/notions/test_pld_margins.py checks this constant against mpmath)."""
_FFT_ERROR_CONSTANT = 8.0
"""Per-level constant of the componentwise FFT error model: one radix-2 level costs
eta = mu + gamma_4 (sqrt 2 + mu), about 6u for an accurate twiddle table (Higham, *Accuracy and
Stability of Numerical Algorithms*, 2nd ed., 2002, Thm 24.2); 8 leaves a margin for mixed
radices."""
_TILT_RELATIVE_ERROR = 1e-7
"""Tilted passes are added until the FFT error bound is below this fraction of each upper bin ..."""
_MAX_TILTS = 5


@functools.lru_cache(maxsize=4096)
def next_fast_len_real(n: int) -> int:
    """Smallest ``2^a 3^b 5^c >= n`` (``n >= 1``): a length that pocketfft transforms fast.

    The transforms are ``numpy.fft.rfft``/``irfft``: NumPy 2 and ``scipy.fft`` run the same
    pocketfft (C++) code and return the same bits, and ``numpy.fft`` is loaded with NumPy's array
    API namespace anyway, while importing ``scipy.fft`` costs ~25 ms of the command-line start-up
    (issue 11).  This is the length ``scipy.fft.next_fast_len(n, real=True)`` returns (tested
    against it), so the grids, and the error model of :func:`_fft_level_error` (radices 2, 3 and
    5), are unchanged.  Remembered (a pure function of n): every composition asks for two lengths
    (issue 11: 6176 calls in a 50 x 20 sweep).
    """
    if n < 1:
        raise ValueError(f"next_fast_len_real: n={n!r} must be >= 1")
    best = 1 << (n - 1).bit_length()  # the power of two
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            # the smallest p35 * 2^k >= n
            q = -(-n // p35)
            best = min(best, p35 << (q - 1).bit_length())
            p35 *= 3
        p5 *= 5
    return best


def _fft_level_error(n_fft: int) -> float:
    """Componentwise bound g of one length-``n_fft`` FFT: ``|fl(F x)_f - (F x)_f| <= g ||x||_1``."""
    return _FFT_ERROR_CONSTANT * max(1, math.ceil(math.log2(max(2, n_fft)))) * _EPS


_THETAS = np.logspace(-9.0, 1.0, 41)


def _binned_log_cgfs(logx: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    r"""Upper bounds on :math:`\log\sum_j x_j e^{\pm\theta j} - \log\sum_j x_j` on ``_THETAS``.

    Masses are summed in at most 4096 blocks and each block's index is rounded to its end that
    makes the exponent larger (``stop`` for +theta, ``start`` for -theta): valid upper bounds on
    both log-CGFs at a cost independent of the length.  Returns ``(up, down, log_total)``.
    """
    n = len(logx)
    width = max(1, -(-n // 4096))
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
    base = float(normal.logsumexp(logm))
    up = _outer_logsumexp(_THETAS, stop, logm) - base
    dn = _outer_logsumexp(-_THETAS, start, logm) - base
    return up, dn, base


def _exact_log_cgfs(logx: np.ndarray, thetas: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Exact ``log sum_j x_j e^{+-theta j} - log sum_j x_j`` at ``thetas``.

    Returns ``(up, down, log_total)``.
    """
    j = np.arange(len(logx), dtype=float)
    keep = np.isfinite(logx)
    j, lx = j[keep], logx[keep]
    base = float(normal.logsumexp(lx))
    up = _outer_logsumexp(thetas, j, lx) - base
    dn = _outer_logsumexp(-thetas, j, lx) - base
    return up, dn, base


def _chernoff_tails(
    logxs: Sequence[np.ndarray],
    powers: Sequence[int],
    above: np.ndarray,
    below: np.ndarray,
    refine: bool = True,
    full_grid: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Chernoff bounds on :math:`P(S \ge above_m)` and :math:`P(S \le below_m)`, times the total
    mass.

    S is the sum of independent indices, ``powers[i]`` of them distributed as ``exp(logxs[i])``
    (finite measures, normalised): :math:`P(S \ge c) \le e^{\sum k_i K_i(\theta) - \theta c}`,
    :math:`P(S \le c) \le e^{\sum k_i K_i(-\theta) + \theta c}` for every theta > 0, with the
    exact log-CGFs.  Every evaluated theta gives a valid bound; the thetas tried are those located
    with block-binned log-CGFs on a fixed log grid, and a geometric set spanning the Gaussian optima
    ``|c - mean| / var`` of the thresholds (times 1/2 .. 2).
    """
    # (1) block-binned log-CGFs (cheap upper bounds, ``bu``/``bd``) on a fixed log grid locate
    # the optimum of skewed sums; (2) the Gaussian optima cover long compositions, where binning
    # is too coarse
    mean, var, log_total, bu, bd = _tail_summaries(logxs, powers)
    ranges = _factor_ranges(logxs)
    scale = _tail_scale(ranges, powers, log_total)
    gaps = np.concatenate([above - mean, mean - below])
    gaps = gaps[gaps > 0]
    if len(gaps) == 0:
        ones = np.full(len(above), scale)
        return ones, ones.copy()
    # every exponent is raised by a bound on its rounding error (_tail_exponent_margin)
    ua = bu[:, None] - _THETAS[:, None] * above[None, :]
    ua += _tail_exponent_margin(ranges, powers, _THETAS, bu, above, True)
    db = bd[:, None] + _THETAS[:, None] * below[None, :]
    db += _tail_exponent_margin(ranges, powers, _THETAS, bd, below, True)
    if not refine:
        return (
            np.exp(np.minimum(0.0, ua.min(axis=0))) * scale,
            np.exp(np.minimum(0.0, db.min(axis=0))) * scale,
        )
    picks = _sorted_unique(np.concatenate([np.argmin(ua, axis=0), np.argmin(db, axis=0)]))
    if len(picks) > 2:
        picks = picks[np.linspace(0, len(picks) - 1, 2).astype(int)]
    from_bins = (_THETAS[picks][:, None] * np.array([0.5, 0.71, 1.0, 1.41, 2.0])).ravel()
    lo_t = max(float(gaps.min()) / var / 2.0, 1e-12)
    hi_t = min(float(gaps.max()) / var * 2.0, 50.0)
    # skewed sums (small sampling rates) have optima far below the Gaussian ones: reach 1e4 lower
    thetas = _sorted_unique(np.concatenate([from_bins, np.geomspace(lo_t, max(hi_t, lo_t), 4)]))
    if full_grid:  # few thresholds (the lower twin's slack): afford the whole log grid, exactly
        thetas = _sorted_unique(np.concatenate([thetas, _THETAS]))
    eu = np.zeros(len(thetas))
    ed = np.zeros(len(thetas))
    for logx, k in zip(logxs, powers):
        u, d, _ = _exact_log_cgfs(logx, thetas)
        eu += k * u
        ed += k * d
    exact_up = eu[:, None] - thetas[:, None] * above[None, :]
    exact_up += _tail_exponent_margin(ranges, powers, thetas, eu, above, False)
    exact_dn = ed[:, None] + thetas[:, None] * below[None, :]
    exact_dn += _tail_exponent_margin(ranges, powers, thetas, ed, below, False)
    best_up = np.minimum(ua.min(axis=0), exact_up.min(axis=0))
    best_dn = np.minimum(db.min(axis=0), exact_dn.min(axis=0))
    return np.exp(np.minimum(0.0, best_up)) * scale, np.exp(np.minimum(0.0, best_dn)) * scale


def _factor_ranges(logxs: Sequence[np.ndarray]) -> list[tuple[int, float, float]]:
    """``(n, max |log x|, bound on |log sum x|)`` of each factor: its length, the range of its
    finite logs, and ``|max log x| + log n`` (the log of its total mass lies between the largest
    log and that plus log n)."""
    out = []
    for logx in logxs:
        finite = logx[np.isfinite(logx)]
        if len(finite) == 0:
            out.append((len(logx), 0.0, 0.0))
            continue
        top = float(np.max(finite))
        spread = max(abs(top), abs(float(np.min(finite))))
        out.append((len(logx), spread, abs(top) + math.log(max(len(logx), 2))))
    return out


def _tail_exponent_margin(
    ranges: Sequence[tuple[int, float, float]],
    powers: Sequence[int],
    thetas: np.ndarray,
    log_cgf: np.ndarray,
    thresholds: np.ndarray,
    binned: bool,
) -> np.ndarray:
    r"""Bound on the rounding error of the Chernoff exponents
    :math:`\sum_i k_i \bar K_i(\pm\theta) \mp \theta c` of :func:`_chernoff_tails` (one row
    per theta, one column per threshold c), where ``log_cgf`` is the computed sum and
    :math:`\bar K_i = K_i - K_i(0)` the normalised log-CGF of factor i.

    Each :math:`K_i(\pm\theta)` and :math:`K_i(0)` is a log-sum-exp of the factor's n entries
    (:func:`_cgf_rounding`; the block-binned ones, :func:`_binned_log_cgfs`, are a log-sum-exp of
    at most n block sums, each itself a log-sum-exp, whose logs are at most log n above the
    entries': twice the bound, with the range widened by log n); the products with k and theta
    and the sums add u times their operands (the normalised log-CGFs of all factors have the
    sign of the tilt, so their k-weighted sizes add up to ``|log_cgf|``).  Measured before this
    margin (40-digit mpmath, the alias bounds of lower-twin compositions): the computed tail was
    up to 4.2e-9 relative BELOW the same Chernoff bound evaluated exactly, at k = 1e6."""
    u = _EPS / 2.0
    err = np.zeros(len(thetas))
    for (n, spread, size), k in zip(ranges, powers):
        if binned:
            spread += math.log(max(n, 2))
        one = _cgf_rounding(n, thetas, np.full(len(thetas), size), spread)
        if binned:
            one = 2.0 * one
        err += k * (one + _cgf_rounding(n, np.zeros(1), np.full(1, size), spread))
    ops = 2.0 * u * (np.abs(log_cgf)[:, None] + thetas[:, None] * np.abs(thresholds)[None, :])
    return 1.01 * (err[:, None] + ops)


def _tail_scale(
    ranges: Sequence[tuple[int, float, float]], powers: Sequence[int], log_total: float
) -> float:
    r"""``exp(log_total)`` (the total mass :math:`\prod_i M_i^{k_i}` of :func:`_chernoff_tails`'s
    factors) rounded up: each :math:`\log M_i` is a log-sum-exp (:func:`_cgf_rounding`), k times
    it and the sum add u of their operands, and exp and the final products add ``_EXP_ACCURACY``
    and 2 EPS (the caller's product with the tail factor)."""
    u = _EPS / 2.0
    err = sum(
        k * float(_cgf_rounding(n, np.zeros(1), np.full(1, size), spread)[0])
        for (n, spread, size), k in zip(ranges, powers)
    )
    err = 1.01 * (err + 2.0 * u * abs(log_total))
    return math.exp(log_total + err) * (1.0 + _EXP_ACCURACY + 2.0 * _EPS)


def _tail_summaries(
    logxs: Sequence[np.ndarray], powers: Sequence[int]
) -> tuple[float, float, float, np.ndarray, np.ndarray]:
    """What :func:`_chernoff_tails` derives from the factors alone: the mean and variance
    (floored at 1e-12) of the total index, the log of the total mass, and the block-binned
    log-CGFs on ``_THETAS`` summed over the factors (``bu``, ``bd``: (1) cheap upper bounds on a
    fixed log grid, which locate the optimum of skewed sums).

    Remembered for the latest factors (the same array objects, compared by identity, and
    powers): a tilted pass asks for its cheap aliasing profile and then, where that bound is
    weak, for the refined one, from the same factors.  A remembered value is the one computed
    afresh (the same operations on the same arrays), so every bound is unchanged."""
    hit = _TAIL_SUMMARY_MEMO.get("last") if _REMEMBER_TAIL_SUMMARIES else None
    if (
        hit is not None
        and hit[1] == tuple(powers)
        and len(hit[0]) == len(logxs)
        and all(a is b for a, b in zip(hit[0], logxs))
    ):
        return hit[2]
    mean = var = log_total = 0.0
    for logx, k in zip(logxs, powers):
        keep = np.isfinite(logx)
        j = np.arange(len(logx), dtype=float)[keep]
        lx = logx[keep]
        base = float(normal.logsumexp(lx))
        w = np.exp(lx - base)
        m = float(np.sum(w * j))
        mean += k * m
        var += k * float(np.sum(w * (j - m) ** 2))
        log_total += k * base
    var = max(var, 1e-12)
    bu = np.zeros(len(_THETAS))
    bd = np.zeros(len(_THETAS))
    for logx, k in zip(logxs, powers):
        u, d, _ = _binned_log_cgfs(logx)
        bu += k * u
        bd += k * d
    out = (mean, var, log_total, bu, bd)
    # (holding the arrays keeps their identities from being reused while remembered)
    _TAIL_SUMMARY_MEMO["last"] = (list(logxs), tuple(powers), out)
    return out


#: whether :func:`_tail_summaries` remembers its latest answer (False: the tests' reference path)
_REMEMBER_TAIL_SUMMARIES = True
#: the latest :func:`_tail_summaries` (one entry: the factors of the pass being placed)
_TAIL_SUMMARY_MEMO: dict[
    str,
    tuple[list[np.ndarray], tuple[int, ...], tuple[float, float, float, np.ndarray, np.ndarray]],
] = {}


def _alias_bound(logxs: Sequence[np.ndarray], powers: Sequence[int], lo: int, hi: int) -> float:
    """Chernoff bound on the composed mass of the factors ``exp(logxs)`` outside ``[lo, hi]``."""
    above, below = np.array([hi + 1.0]), np.array([lo - 1.0])
    up, dn = _chernoff_tails(logxs, powers, above, below)
    if up[0] + dn[0] > 1e-13:  # try the whole log grid, exactly, before settling for a weak bound
        up2, dn2 = _chernoff_tails(logxs, powers, above, below, full_grid=True)
        up, dn = np.minimum(up, up2), np.minimum(dn, dn2)
    return float(up[0] + dn[0])


def _alias_profile(
    logxs: Sequence[np.ndarray],
    powers: Sequence[int],
    offset: int,
    n_fft: int,
    out_len: int,
    refine: bool = True,
) -> np.ndarray:
    r"""Per-bin Chernoff bound on the mass a cyclic convolution wraps into bin t of the window.

    Bin t (index ``offset + t``) receives mass only from indices ``>= offset + n_fft + t`` (from
    above) or ``<= offset + t - n_fft`` (from below); both tail bounds are monotone in t and are
    evaluated on 256 blocks at the block end that makes them valid for the whole block (this
    profile steers the choice between tilted passes).
    """
    edges = _sorted_unique(np.linspace(0, out_len, min(out_len, 256) + 1).astype(np.int64))
    starts, stops = edges[:-1], edges[1:] - 1
    up, dn = _chernoff_tails(
        logxs,
        powers,
        (offset + n_fft + starts).astype(float),
        (offset + stops - n_fft).astype(float),
        refine,
    )
    return np.repeat(np.minimum(1.0, up + dn), np.diff(edges))


@dataclass
class _Pass:
    """One tilted evaluation: bin t (total index ``offset + t``) holds
    ``r[t] * exp(log_scale - lam * (offset + t))`` with absolute error at most ``bound`` times the
    same factor, plus a relative error ``relative``; ``logxs`` are the tilted, normalised factors
    (for the aliasing bound)."""

    lam: float
    #: the inverse transform before the rotation by the window's offset (see :attr:`r`)
    raw: np.ndarray
    shift: int
    log_scale: float
    bound: float
    relative: float
    #: the untilted pass keeps the normalised factors and takes their logs only when an aliasing
    #: bound asks for them (most compositions never do: their window's Chernoff tail suffices)
    _logxs: list[np.ndarray | None]
    _xs: list[np.ndarray]

    @property
    def r(self) -> np.ndarray:
        """Bin t of the window is ``r[t]`` (the inverse transform rotated by the offset)."""
        return np.roll(self.raw, -self.shift) if self.shift else self.raw

    def segment(self, start: int, stop: int) -> np.ndarray:
        """``r[start:stop]`` without materialising the whole rotation (same values)."""
        n, s = len(self.raw), self.shift
        a, b = (start + s) % n, (stop + s) % n
        if stop - start <= 0:
            return self.raw[:0]
        if a < b or b == 0:
            return self.raw[a : (b if b else n)]
        return np.concatenate([self.raw[a:], self.raw[:b]])

    def head_into(self, out: np.ndarray, scale: float) -> None:
        """``out[:] = r[:len(out)] * scale`` without materialising the rotation (same values)."""
        m, n, s = len(out), len(self.raw), self.shift
        first = min(m, n - s)
        np.multiply(self.raw[s : s + first], scale, out=out[:first])
        if first < m:
            np.multiply(self.raw[: m - first], scale, out=out[first:])

    @property
    def logxs(self) -> list[np.ndarray]:
        """The logs of the tilted, normalised factors (computed once, on first use)."""
        for i, lx in enumerate(self._logxs):
            if lx is None:
                with np.errstate(divide="ignore"):
                    self._logxs[i] = np.log(self._xs[i])
        return self._logxs  # type: ignore[return-value]


class _Spectrum:
    """The forward transform of one normalised factor ``x`` at one FFT length, with what a pass
    derives from it per frequency (computed on first use): ``mod = |z|``, ``mod_a = |z| + a``
    (``a``: the componentwise input error of the transform, :func:`_fft_level_error` plus the
    folding), ``log_mod_a`` and ``log_mod``.  None of it depends on the power k.

    A pass of power k needs these only at its live frequencies (:meth:`live`, usually a few
    percent of them for a long composition): :meth:`log_mod_a_at` and :meth:`log_mod_at` take
    the logarithms there (the same numbers as the whole array's at those indices), and the whole
    arrays only when every frequency is live.
    """

    __slots__ = (
        "_live",
        "_log_mod",
        "_log_mod_a",
        "_mod_a",
        "a",
        "mod",
        "n_fft",
        "total",
        "x",
        "z",
    )

    def __init__(self, n_fft: int, total: float, x: np.ndarray) -> None:
        self.n_fft = n_fft
        self.total = total
        self.x = x
        self.z = np.fft.rfft(_fold(x, n_fft), n_fft)
        self.mod = np.abs(self.z)
        self.a = _fft_level_error(n_fft) + -(-len(x) // n_fft) * _EPS
        self._mod_a: np.ndarray | None = None
        self._log_mod_a: np.ndarray | None = None
        self._log_mod: np.ndarray | None = None
        self._live: tuple[float, np.ndarray | None] | None = None

    def live(self, threshold: float) -> np.ndarray | None:
        """The frequencies with ``mod_a > threshold``, as increasing indices, or None when all
        are.  The last answer is remembered: a larger threshold (a longer composition) filters
        its indices instead of scanning every frequency; the set is the same either way."""
        last = self._live
        if last is not None and last[1] is not None and threshold >= last[0]:
            idx = last[1]
            out: np.ndarray | None = idx[self.mod_a[idx] > threshold]
        else:
            mask = self.mod_a > threshold
            out = None if bool(mask.all()) else np.flatnonzero(mask)
        self._live = (threshold, out)
        return out

    def log_mod_a_at(self, sel: slice | np.ndarray) -> np.ndarray:
        """``log(mod_a)[sel]``: from the whole array when it is (or must be) computed."""
        if self._log_mod_a is not None or isinstance(sel, slice):
            return self.log_mod_a[sel]
        return np.log(self.mod_a[sel])

    def log_mod_at(self, sel: slice | np.ndarray) -> np.ndarray:
        """``log(mod)[sel]`` (-inf where ``mod`` is 0), as :meth:`log_mod_a_at`."""
        if self._log_mod is not None or isinstance(sel, slice):
            return self.log_mod[sel]
        with np.errstate(divide="ignore"):
            return np.log(self.mod[sel])

    @property
    def mod_a(self) -> np.ndarray:
        if self._mod_a is None:
            self._mod_a = self.mod + self.a
        return self._mod_a

    @property
    def log_mod_a(self) -> np.ndarray:
        if self._log_mod_a is None:
            self._log_mod_a = np.log(self.mod_a)
        return self._log_mod_a

    @property
    def log_mod(self) -> np.ndarray:
        if self._log_mod is None:
            with np.errstate(divide="ignore"):
                self._log_mod = np.log(self.mod)
        return self._log_mod


#: the largest FFT length whose spectrum a one-step PMF remembers (a spectrum holds at most 28
#: bytes a point with its derived arrays and live set: about 60 MB at this length; the
#: accountant's compositions use at most ``ACCOUNTING_GRID_POINTS`` = 2**20 points)
_REMEMBERED_SPECTRUM_MAX = 2**21


def _untilted_spectrum(p: np.ndarray, n_fft: int, memo: dict | None) -> _Spectrum:
    """The spectrum of ``p / sum(p)`` at length ``n_fft``; remembered in ``memo`` (a PMF's cache:
    one length at a time, the latest) and reused while the length stays the same.

    The k-fold compositions of one one-step PMF (a sweep over the number of steps, a search over a
    window length) share it: the FFT length comes from a k-independent ladder
    (:func:`_fft_length`), so consecutive k usually need the same length.  A remembered spectrum is
    the one a fresh computation gives (the same operations on the same input), so every value is
    the same whether or not it is remembered.
    """
    if memo is not None:
        hit = memo.get("spectrum")
        if hit is not None and hit.n_fft == n_fft:
            return hit
    total = float(np.sum(p))
    out = _Spectrum(n_fft, total, p / total)
    if memo is not None and n_fft <= _REMEMBERED_SPECTRUM_MAX:
        memo["spectrum"] = out
    return out


#: rungs per octave of the FFT-length ladder (:func:`_fft_length`)
_LADDER_STEPS_PER_OCTAVE = 8


def _fft_length(needed: int) -> int:
    """The FFT length of a composition that needs ``needed`` points: the smallest rung of a fixed
    ladder that holds them, ``next_fast_len(ceil(2 ** (i / 8)))`` (8 rungs an octave, at most 9%
    above ``needed`` plus the fast-length rounding), or ``next_fast_len(needed)`` itself where the
    rung would exceed the grid budget (:func:`max_grid_points`), so that the ladder never coarsens
    a grid.

    The rung does not depend on the number of steps k, only on the length the window needs, so the
    compositions of one PMF for nearby k share one length and one forward transform
    (:func:`_untilted_spectrum`); a single ``account`` uses the same rule, so a sweep's values are
    those of ``account`` bit for bit.  A longer transform only widens the window: the Chernoff
    window's tail bound and the FFT error bound are computed for the length used.
    """
    needed = max(1, int(needed))
    fast = next_fast_len_real(needed)
    i = math.ceil(_LADDER_STEPS_PER_OCTAVE * math.log2(needed))
    while i > 0 and math.ceil(2.0 ** ((i - 1) / _LADDER_STEPS_PER_OCTAVE)) >= needed:
        i -= 1
    while math.ceil(2.0 ** (i / _LADDER_STEPS_PER_OCTAVE)) < needed:
        i += 1
    rung = next_fast_len_real(math.ceil(2.0 ** (i / _LADDER_STEPS_PER_OCTAVE)))
    return fast if rung > max_grid_points() else rung


def _tilted_pass(
    probs: Sequence[np.ndarray],
    powers: Sequence[int],
    lam: float,
    n_fft: int,
    offset: int,
    memos: Sequence[dict | None] | None = None,
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

    ``memos`` (one per factor, or None): where the untilted pass remembers a factor's forward
    transform (:func:`_untilted_spectrum`), so that the k-fold compositions of one one-step PMF for
    many k on one FFT length (:func:`_fft_length`) transform it once.
    """
    g = _fft_level_error(n_fft)
    n_half = n_fft // 2 + 1
    log_scale = 0.0
    logxs: list[np.ndarray | None] = []
    xs: list[np.ndarray] = []
    spectra: list[tuple[_Spectrum, int]] = []
    for i, (p, k) in enumerate(zip(probs, powers)):
        if lam == 0.0:
            sp = _untilted_spectrum(p, n_fft, None if memos is None else memos[i])
            log_scale += k * math.log(sp.total)
            logxs.append(None)  # np.log(x) on demand (_Pass.logxs)
        else:
            with np.errstate(divide="ignore"):
                lw = np.log(p) + lam * np.arange(len(p))
            log_m = float(normal.logsumexp(lw))
            log_scale += k * log_m
            tilted = lw - log_m
            logxs.append(tilted)
            sp = _Spectrum(n_fft, 1.0, np.exp(tilted))
        xs.append(sp.x)
        spectra.append((sp, k))
    # frequencies whose bound (|w| + a)^k underflows carry less than 1e-300 each: treat them as 0
    # every frequency live: views; else the live frequencies' indices, so that every gather and
    # scatter below touches only them (a long composition keeps few frequencies alive)
    sel: slice | np.ndarray
    if len(spectra) == 1:  # one factor: (|w| + a)^k > e^-700 iff |w| + a > e^(-700/k)
        sp, k = spectra[0]
        idx = sp.live(math.exp(-700.0 / k))
        sel = slice(None) if idx is None else idx
        n_live = n_half if idx is None else len(idx)
        log_mod_up = k * sp.log_mod_a_at(sel)
    else:
        log_mod_up = np.zeros(n_half)
        for sp, k in spectra:
            log_mod_up += k * sp.log_mod_a
        live = log_mod_up > -700.0
        n_live = int(np.count_nonzero(live))
        sel = slice(None) if n_live == n_half else np.flatnonzero(live)
        log_mod_up = log_mod_up[sel]
    log_mod = np.zeros(n_live)
    spec: np.ndarray | None = None
    for sp, k in spectra:
        log_mod += k * sp.log_mod_at(sel)
        power = _int_power(sp.z[sel], k)
        if spec is None and n_live == n_half:
            spec = power  # 1 * power (up to the sign of a zero)
        elif spec is None:
            spec = np.zeros(n_half, dtype=complex)
            spec[sel] = power
        else:
            spec[sel] *= power
    assert spec is not None
    rounding = (2.0 * math.ceil(math.log2(max(2, max(powers)))) * len(powers) + 2.0) * 3.0 * _EPS
    with np.errstate(over="ignore", invalid="ignore"):
        up = np.exp(log_mod_up)
        prop = up * -np.expm1(log_mod - log_mod_up)  # (|w| + a)^k - |w|^k, stable
    # frequency f counts twice in the real inverse transform, except 0 and (even n_fft) n_fft / 2
    terms = prop + (rounding + g) * up
    single = [0] + ([n_half - 1] if n_fft % 2 == 0 else [])
    if n_live == n_half:
        once_terms = terms[single]
    else:  # the positions of the live frequencies 0 and n_half - 1 among the live ones
        assert isinstance(sel, np.ndarray)
        ends = ((0, 0), (n_half - 1, n_live - 1)) if n_live else ()
        once_terms = terms[[j for f, j in ends if f in single and sel[j] == f]]
    bound = float(2.0 * np.sum(terms) - np.sum(once_terms)) / n_fft
    bound += 2.0 * (n_half - len(up)) * 1e-300 / n_fft
    r = np.fft.irfft(spec, n_fft)
    # the inputs x and the untilting factor are rounded: relative error per bin
    s_max = abs(offset) + n_fft
    relative = 8.0 * sum(powers) * _EPS + 8.0 * _EPS * (abs(log_scale) + abs(lam) * s_max)
    return _Pass(lam, r, offset % n_fft, log_scale, bound, relative, logxs, xs)


def _blocks(logp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(log mass, index)`` of the entries of ``exp(logp)`` that carry mass.

    (Exact: block centres would bias the mean by up to half a block per step, i.e. by k times that
    over a k-fold composition, which can move a tilt outside the window.)
    """
    # entries e^-100 below the largest cannot move a moment at the tilts used (<= 600 over the
    # window): dropping them only makes the placement of a tilt cheaper
    keep = logp > np.max(logp) - 100.0
    return logp[keep], np.arange(len(logp), dtype=float)[keep]


def _tilted_moments(
    blocks: Sequence[tuple[np.ndarray, np.ndarray]], powers: Sequence[int], lam: float
) -> tuple[float, float]:
    """Approximate mean and variance of the total index under the tilt ``e^{lam s}``
    (``sum k K'``, ``sum k K''`` from block masses; only used to place a tilt, any tilt is
    valid)."""
    mean = var = 0.0
    for (logm, c), k in zip(blocks, powers):
        # (in place, in two working arrays: the same operations on the same numbers as
        # ``w = exp(max(logm + lam c - max, -700)) / sum``, ``sum(w c)``, ``sum(w (c - m)^2)``)
        w = np.multiply(c, lam)
        w += logm
        w -= np.max(w)
        np.maximum(w, -700.0, out=w)  # no subnormals (placement only)
        np.exp(w, out=w)
        w /= w.sum()
        t = np.multiply(w, c)
        m = float(np.sum(t))
        mean += k * m
        np.subtract(c, m, out=t)
        np.square(t, out=t)
        t *= w
        var += k * float(np.sum(t))
    return mean, var


def _tilted_mean(
    blocks: Sequence[tuple[np.ndarray, np.ndarray]], powers: Sequence[int], lam: float
) -> float:
    """The mean of :func:`_tilted_moments` alone, bit for bit (the same operations on the same
    arrays, in place, without the variance): what the bisections of :func:`_tilt_bracket` read
    at every step."""
    mean = 0.0
    for (logm, c), k in zip(blocks, powers):
        w = np.multiply(c, lam)
        w += logm
        w -= np.max(w)
        np.maximum(w, -700.0, out=w)
        np.exp(w, out=w)
        w /= w.sum()
        np.multiply(w, c, out=w)
        mean += k * float(np.sum(w))
    return mean


def _uncovered_above_mode(
    value: np.ndarray, mode: int, err: float, rho: float, tail_floor: float
) -> bool:
    """Whether a bin above the mode is not yet covered by one pass whose error bound ``err`` is
    the same for every bin: a bin t above the mode with ``err > rho * max(value[t], 0)`` whose
    tail of bounds above it, ``err * (number of bins from t to the top)``, exceeds ``tail_floor``.

    The same test as comparing every bin (:func:`_compose_spectral`'s multi-pass form) in one
    pass over a slice: the tail condition holds on a prefix of the bins above the mode (``err *
    c`` is non-decreasing in the count c under rounding), and ``x -> rho * max(x, 0)`` is
    non-decreasing, so some bin of the prefix is uncovered iff its smallest value is.  A NaN bin
    (never produced by finite inputs) is left to the element-wise form.
    """
    top = len(value) - mode - 1  # bins above the mode; the lowest of them counts `top` bins up
    if top <= 0 or not err > 0.0 or not err * top > tail_floor:
        return False
    c = max(1, min(top, math.ceil(tail_floor / err)))  # the smallest count with err * c > floor
    while c > 1 and err * (c - 1) > tail_floor:
        c -= 1
    while not err * c > tail_floor:
        c += 1
    prefix = value[mode + 1 : mode + 1 + (top - c + 1)]  # counts top .. c
    low = float(np.min(prefix))
    if math.isnan(low):
        counts = np.arange(top, 0, -1, dtype=float)
        tail = err * counts
        return bool(np.any((err > rho * np.maximum(value[mode + 1 :], 0.0)) & (tail > tail_floor)))
    return err > rho * max(low, 0.0)


def _compose_spectral(
    probs: Sequence[np.ndarray],
    powers: Sequence[int],
    n_fft: int,
    offset: int,
    out_len: int,
    aliasing: bool,
    need_alias: bool = True,
    window_tail: float | None = None,
    memos: Sequence[dict | None] | None = None,
    loss_step: float | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    r"""Composition :math:`\circledast_i p_i^{*k_i}` on the window
    ``offset .. offset + out_len - 1``.

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

    A bin is settled when its bound is small relative to the bin, or when the bounds from it to
    the top of the window add less than the tilt floor (:func:`tilt_delta_floor`) to delta; with
    ``loss_step`` (the grid width of the losses) also when they add less than
    ``_TILT_FLOOR_FRACTION`` of a certified lower bound on the profile at that loss
    (:func:`_profile_floor`): the same accuracy relative to delta as at the delta of interest,
    which no longer asks for passes for the bins far below the query's epsilon.  Which passes
    run only steers tightness: every bin's bound is added to the pessimistic PMF.
    """
    # per-bin bookkeeping exists only once a tilted pass competes with the untilted one (most
    # compositions need a single pass, whose error bound is one number for every bin), and only
    # for the bins ``lo ..`` that a tilted pass can take (see _first_takeable: below them its
    # bound is not below the untilted one, so they keep the untilted pass's value and bound)
    lo = out_len
    idx = best_log_err = sel_log_err = rel = source = np.empty(0)
    first_log_err = 0.0
    value = np.empty(out_len)
    passes: list[_Pass] = []
    lam = 0.0
    schedule: list[float] | None = None
    floor = math.inf
    max_index = sum(k * (len(p) - 1) for p, k in zip(probs, powers))
    target: float | None = None  # (with loss_step) the total index the next tilt aims at
    last_target: float | None = None
    for _ in range(_MAX_TILTS):
        ps = _tilted_pass(probs, powers, lam, n_fft, offset, memos)
        passes.append(ps)
        log_bound = math.log(ps.bound) if ps.bound > 0.0 else -math.inf
        if lam == 0.0:  # the untilted pass is constant in the bin: scalars, and it takes every bin
            with np.errstate(over="ignore", invalid="ignore"):
                ps.head_into(value, np.exp(ps.log_scale))
            first_log_err = ps.log_scale + log_bound
            log_err: np.ndarray | float = first_log_err
        else:
            start = _first_takeable(ps.log_scale + log_bound, first_log_err, lam, offset, out_len)
            if start < lo:  # the bins start .. lo - 1 join the bookkeeping, untouched so far
                grow = lo - start
                idx = np.concatenate([offset + np.arange(start, lo, dtype=float), idx])
                best_log_err = np.concatenate([np.full(grow, first_log_err), best_log_err])
                sel_log_err = np.concatenate([np.full(grow, first_log_err), sel_log_err])
                rel = np.concatenate([np.full(grow, passes[0].relative), rel])
                source = np.concatenate([np.zeros(grow, dtype=np.int64), source])
                lo = start
            factor_log = ps.log_scale - lam * idx
            log_err = factor_log + log_bound
            # the untilted pass wraps in at most the Chernoff tail (slack / +inf below); a tilted
            # pass may wrap in much more, which must steer the choice of pass away from it
            log_sel = log_err
            if aliasing and lam > 0.0:
                cand = log_err < sel_log_err  # bins this pass could win on its round-off bound
                if np.any(cand):  # cheap binned bound first, exact log-CGFs only where it matters
                    alias = _alias_profile(ps.logxs, powers, offset, n_fft, out_len, refine=False)
                    if np.any(alias[lo:][cand] > 100.0 * ps.bound):
                        alias = _alias_profile(ps.logxs, powers, offset, n_fft, out_len)
                    with np.errstate(divide="ignore"):
                        log_sel = np.log(ps.bound + alias[lo:]) + factor_log
            with np.errstate(over="ignore", invalid="ignore"):
                take = log_sel < sel_log_err
                tail_value = value[lo:]
                tail_value[take] = ps.segment(lo, out_len)[take] * np.exp(factor_log[take])
                np.copyto(best_log_err, log_err, where=take)
                np.copyto(sel_log_err, log_sel, where=take)
                np.copyto(rel, ps.relative, where=take)
                np.copyto(source, len(passes) - 1, where=take)
        # coverage: bins above the mode whose bound is not yet small relative to the bin
        mode = int(np.argmax(value))
        # a pass cannot do better than its bound relative to its own mode: ask for 100x that
        floor = min(floor, ps.bound / max(float(np.max(ps.raw)), 1e-300))  # (rotation-free)
        rho = max(_TILT_RELATIVE_ERROR, 100.0 * floor)
        # (only bins above the mode are examined: the tails below are the same numbers)
        if len(passes) == 1:  # one constant bound: its tail sums in closed form
            err1 = math.exp(min(709.0, float(log_err)))  # type: ignore[arg-type]
            if not _uncovered_above_mode(value, mode, err1, rho, tilt_delta_floor()):
                break
            if loss_step is not None:
                above = value[mode + 1 :]
                tail_err = err1 * np.arange(len(above), 0, -1, dtype=float)
                bad = (err1 > rho * np.maximum(above, 0.0)) & (tail_err > tilt_delta_floor())
                relative = passes[0].relative
                first = _first_unsettled(bad, tail_err, above, err1, relative, loss_step)
                if first < 0:
                    break
                target = offset + mode + 1.0 + first
        else:
            with np.errstate(over="ignore"):
                err = _bin_bounds(best_log_err, first_log_err, lo, mode + 1)
                # (a reverse cumulative sum adds from the top: the same numbers as the whole
                # window's from mode + 1 up)
                tail_err = np.cumsum(err[::-1])[::-1]
            bad = (err > rho * np.maximum(value[mode + 1 :], 0.0)) & (tail_err > tilt_delta_floor())
            if not np.any(bad):
                break
            if loss_step is not None:
                relative = max(p.relative for p in passes)
                above = value[mode + 1 :]
                first = _first_unsettled(bad, tail_err, above, err, relative, loss_step)
                if first < 0:
                    break
                target = offset + mode + 1.0 + first
        if schedule is None:
            with np.errstate(divide="ignore"):  # only a tilted pass needs the factors' logs
                logps = [_blocks(np.log(p)) for p in probs]
            # tilts on a geometric ladder below the one whose mode reaches the top of the window
            # (per-bin selection keeps the best pass for each bin, so the ladder need not be exact)
            top = min(
                offset + out_len - 1.0 - (0.1 * out_len if aliasing else 0.0), max_index - 0.5
            )
            # a larger tilt than 600 / n_fft spans more than e^600 over the window
            hi_l = _tilt_bracket(logps, powers, top, 600.0 / n_fft, 10)[1]
            ladder = [hi_l / 4.0**j for j in range(_MAX_TILTS - 2, -1, -1)]
            # measured (issue 11): the smallest rung rarely settles a bin on its own while the
            # second one usually settles all of them, so the second rung is tried first
            schedule = ladder[1:2] + ladder[2:] + ladder[:1] if len(ladder) > 1 else ladder
        if target is not None and (last_target is None or target > last_target):
            # the tilt whose mean lies above the lowest unsettled bin, as long as each such pass
            # settles the bin it aimed at (a skewed composition, e.g. a small sampling rate, is
            # multimodal under a tilt: its mean may sit where no pass settles anything; then the
            # fixed ladder's rungs that have not run yet take over)
            last_target = target
            lam_next = _tilt_above(logps, powers, min(top, target), top, hi_l)
            if lam_next > 0.0 and all(abs(p.lam - lam_next) > 0.1 * lam_next for p in passes):
                lam = lam_next
                target = None
                continue
        if target is not None:
            target = last_target = math.inf  # from here on: the ladder
            schedule = [x for x in schedule if all(abs(p.lam - x) > 0.1 * x for p in passes)]
        if not schedule:
            break
        lam = schedule.pop(0)
    with np.errstate(over="ignore"):
        if len(passes) == 1:  # (into the pass's inverse transform: read, and no longer needed)
            error = np.abs(value, out=passes[0].raw[:out_len])
            error *= passes[0].relative
            error += np.exp(first_log_err)
        else:
            error = np.empty(out_len)
            np.abs(value[:lo], out=error[:lo])
            error[:lo] *= passes[0].relative
            error[:lo] += np.exp(np.full(1, first_log_err))  # (as an array: the same exp)
            error[lo:] = np.exp(best_log_err) + rel * np.abs(value[lo:])
    alias_total = 0.0
    if aliasing and need_alias:
        # mass wrapped in from above lands on bins t >= t0 only from indices >= offset + n_fft + t0,
        # mass from below on bins t <= t1 only from indices <= offset + t1 - n_fft
        for i, ps in enumerate(passes):
            if len(passes) == 1:  # the one pass took every bin
                t0, t1 = 0, out_len - 1
            else:
                taken = lo + np.nonzero(source == i)[0]
                if i == 0 and lo > 0:  # the untilted pass holds every bin below the bookkeeping
                    t0, t1 = 0, int(taken[-1]) if len(taken) else lo - 1
                elif len(taken) == 0:
                    continue
                else:
                    t0, t1 = int(taken[0]), int(taken[-1])
            if ps.lam == 0.0 and window_tail is not None:
                alias_total += window_tail  # the window was chosen to hold all but this mass
                continue
            w = _alias_bound(ps.logxs, powers, offset + t1 - n_fft + 1, offset + n_fft + t0 - 1)
            top = ps.log_scale - ps.lam * (offset + (t0 if ps.lam > 0 else t1))
            if w > 0.0:  # (in logs: w e^top may be small while e^top alone overflows)
                # untilted with the pass's own relative rounding bound, as its values
                log_alias = math.log(w) + top + 2.0 * _EPS * (abs(math.log(w)) + abs(top))
                alias_total += math.exp(min(700.0, log_alias)) * (1.0 + ps.relative)
    return value, error, alias_total


#: loss gaps K * Delta of :func:`_profile_floor`
_PROFILE_GAPS = (0.02, 0.1, 0.5)


def _profile_floor(
    above: np.ndarray, bound: np.ndarray | float, relative: float, loss_step: float
) -> np.ndarray:
    r"""A lower bound on the composed privacy profile at the loss of each bin of ``above`` (the
    bins from above the mode to the top of the window, with their error ``bound + relative
    |value|``), as :func:`_crossing_floor`: :math:`\delta(\ell_t) \ge (1 - e^{-K\Delta})
    \sum_{j \ge t+K} p_j` for every K >= 1, with the bins' certified lower estimates
    :math:`(v_j - \text{error}_j)_+` for :math:`p_j` (best of a few loss gaps ``_PROFILE_GAPS``).
    Mass wrapped in by the cyclic transform (at most the window's tail, far below these levels)
    is not subtracted: the floor only steers which tilted passes run."""
    n = len(above)
    low = above - bound - relative * np.abs(above)
    np.maximum(low, 0.0, out=low)
    sums = np.cumsum(low[::-1])[::-1]  # sum over j >= t of the lower estimates
    out = np.zeros(n)
    for gap in _PROFILE_GAPS:
        k = max(1, round(gap / loss_step))
        if k < n:
            np.maximum(out[: n - k], -math.expm1(-k * loss_step) * sums[k:], out=out[: n - k])
    return out


def _first_unsettled(
    bad: np.ndarray,
    tail_err: np.ndarray,
    above: np.ndarray,
    bound: np.ndarray | float,
    relative: float,
    loss_step: float,
) -> int:
    """The lowest bin (index into ``above``) flagged ``bad`` by the absolute tilt floor that is also
    unsettled relative to the profile: its tail of error bounds ``tail_err`` exceeds
    ``_TILT_FLOOR_FRACTION`` of the profile's lower bound there (:func:`_profile_floor`); -1 when
    there is none."""
    if not np.any(bad):
        return -1
    floor = _profile_floor(above, bound, relative, loss_step)
    hit = np.flatnonzero(bad & (tail_err > _TILT_FLOOR_FRACTION * floor))
    return int(hit[0]) if len(hit) else -1


#: a tilt chosen for the lowest unsettled bin puts its mean this many standard deviations (of the
#: composition tilted to that bin) above it: the bins above it are the ones left to settle
_TARGET_SDS = 2.0


def _tilt_above(
    logps: Sequence[tuple[np.ndarray, np.ndarray]],
    powers: Sequence[int],
    target: float,
    top: float,
    hi: float,
) -> float:
    """The tilt whose mean lies ``_TARGET_SDS`` standard deviations above the total index
    ``target`` (the deviation of the composition tilted to ``target``), at most ``top``."""
    at = _tilt_for_mean(logps, powers, target, hi)
    moments = _tilted_moments(logps, powers, at)
    sd = math.sqrt(max(moments[1], 0.0))
    # the second root lies above the first: Newton's placement of the certifying points starts
    # there, with the moments just computed (only which bisection steps are evaluated changes)
    return _tilt_for_mean(
        logps, powers, min(top, target + _TARGET_SDS * sd), hi, start=(at, *moments)
    )


def _tilt_for_mean(
    logps: Sequence[tuple[np.ndarray, np.ndarray]],
    powers: Sequence[int],
    target: float,
    hi: float,
    start: tuple[float, float, float] | None = None,
) -> float:
    """The tilt in ``[0, hi]`` whose tilted mean total index is ``target`` (bisection; the mean
    increases with the tilt; ``hi`` when even it falls short).  Only places a pass.  ``start``:
    see :func:`_certifying_points`."""
    lo_l, hi_l = _tilt_bracket(logps, powers, target, hi, 24, start)
    return hi_l if lo_l == hi_l else 0.5 * (lo_l + hi_l)


def _tilt_bracket(
    logps: Sequence[tuple[np.ndarray, np.ndarray]],
    powers: Sequence[int],
    target: float,
    hi: float,
    steps: int,
    start: tuple[float, float, float] | None = None,
) -> tuple[float, float]:
    """``steps`` bisections on ``[0, hi]`` for the tilt whose tilted mean total index is
    ``target`` (the mean increases with the tilt): the final bracket, or ``(hi, hi)`` when even
    ``hi`` falls short.  ``start``: see :func:`_certifying_points`."""
    if _tilted_mean(logps, powers, hi) <= target:
        return hi, hi
    cert_lo, cert_hi = (
        _certifying_points(logps, powers, target, hi, steps, start)
        if _CERTIFIED_BISECTION
        else (-math.inf, math.inf)
    )
    lo_l, hi_l = 0.0, hi
    for _bisect in range(steps):
        mid = 0.5 * (lo_l + hi_l)
        if mid >= cert_hi:
            above = True
        elif mid <= cert_lo:
            above = False
        else:
            above = _tilted_mean(logps, powers, mid) > target
        if above:
            hi_l = mid
        else:
            lo_l = mid
    return lo_l, hi_l


#: :func:`_tilt_bracket` decides the bisection steps it can certify without evaluating them
#: (:func:`_certifying_points`); False: every step evaluated (the reference path of the tests)
_CERTIFIED_BISECTION = True
#: Newton steps of :func:`_certifying_points` (they only place the certifying points)
_NEWTON_STEPS = 8


def _tilted_mean_error(
    blocks: Sequence[tuple[np.ndarray, np.ndarray]], powers: Sequence[int], hi: float
) -> float:
    r"""A bound E on ``|_tilted_mean(blocks, powers, lam) - m(lam)|`` for every ``lam`` in
    ``[0, hi]``, where m is the exact (real-arithmetic, unclamped) tilted mean total index
    :math:`\sum_b k_b \sum_i c_i p_i e^{\lambda c_i} / \sum_i p_i e^{\lambda c_i}` of the
    blocks ``(log p, c)`` (indices c >= 0).  The same bound holds for the mean of
    :func:`_tilted_moments` (the same operations).

    Rounding model (u = 2^-53; Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
    2002, sections 2-4): the exponent ``c lam + log p - max`` is formed with three roundings of
    operands of size at most ``lam c_max + L`` (L = max |log p|) and ``2 (lam c_max + L)``, so its
    absolute error is at most ``Delta = u (4 lam c_max + 3 L)``; ``exp`` adds at most 4 ulp, i.e.
    ``_EXP_ACCURACY`` = 4 EPS relative (checked against mpmath on [-700, 0], the arguments it gets
    here: at most 0.503 ulp; before session 10 this bound used 4u, i.e. 2 ulp, while its text said 4
    ulp -- still above the measured error), so each weight has relative error at most ``e_w =
    e^Delta - 1 + 4 EPS``; numpy's pairwise sum of n non-negative terms has relative error at most
    ``gamma_(log2 n + 20)`` (blocks of 128 summed by 8 accumulators, then pairwise); the division
    and the product with c add u each. With non-negative weights and indices, the ratio then has
    relative error at most ``2 e_w + 2 gamma + 3u`` (to first order; a factor 1.01 covers the
    second), times m_b <= c_max; the outer sum ``mean += k m_b`` adds 3u of ``k c_max`` per block.
    Weights the code raises to e^-700 of the largest (the clamp) move a block's mean by at most ``n
    e^-700 c_max``. The result is multiplied by 8 as a margin. It only decides which bisection steps
    need no evaluation (:func:`_certifying_points`).
    """
    u = _EPS / 2.0
    total = 0.0
    for (logm, c), k in zip(blocks, powers):
        n = len(c)
        if n == 0:
            continue
        c_max = float(np.max(c))
        big_l = float(np.max(np.abs(logm)))
        delta_exp = u * (4.0 * hi * c_max + 3.0 * big_l)
        e_w = math.expm1(delta_exp) + _EXP_ACCURACY
        m_terms = math.log2(max(n, 2)) + 20.0
        gamma = m_terms * u / (1.0 - m_terms * u)
        rel = 1.01 * (2.0 * e_w + 2.0 * gamma + 3.0 * u)
        total += k * c_max * (rel + 3.0 * u) + k * n * c_max * 1e-300
    return 8.0 * total


def _certifying_points(
    logps: Sequence[tuple[np.ndarray, np.ndarray]],
    powers: Sequence[int],
    target: float,
    hi: float,
    steps: int,
    start: tuple[float, float, float] | None = None,
) -> tuple[float, float]:
    """Points ``(a, b)`` that settle bisection steps of :func:`_tilt_bracket` without evaluating
    them: every mid ``<= a`` is "not above" the target and every mid ``>= b`` is "above", the same
    decisions the evaluation would give, so the bracket is the plain bisection's bit for bit.

    The bisection's only inputs are the decisions ``_tilted_mean(mid) > target``.  The computed
    mean is within E (:func:`_tilted_mean_error`) of the exact tilted mean m, which does not
    decrease in the tilt (its derivative is the tilted variance).  So a point a with a computed
    mean ``<= target - 2E`` certifies the decision "not above" for every mid <= a (``m(mid) <=
    m(a) <= target - E``, so the computed mean there is ``<= target``), and a point b with a
    computed mean ``> target + 2E`` certifies "above" for every mid >= b.  Newton steps on the
    tilted mean and variance (:func:`_tilted_moments`, whose mean is the same computation) put
    such points on both sides of the root, close to it; every bisection step between them is
    evaluated as before.  Which steps are evaluated changes; the decisions, and so the bracket,
    do not.  (The caller has checked that the mean at ``hi`` exceeds the target.)

    ``start = (x, mean, var)``: Newton's first point, with the computed :func:`_tilted_moments`
    there (a point near the root saves steps; it must lie in ``(0, hi)``, else 0.5 hi is used).
    """
    err = _tilted_mean_error(logps, powers, hi)
    cert_lo, cert_hi = -math.inf, math.inf  # a (decides "not above" below it), b ("above")
    safe_lo, safe_hi = 0.0, hi  # Newton's safeguard: the computed mean's sign changes in here

    def learn(x: float, mean: float) -> None:
        nonlocal cert_lo, cert_hi, safe_lo, safe_hi
        if mean <= target - 2.0 * err:
            cert_lo = max(cert_lo, x)
        elif mean > target + 2.0 * err:
            cert_hi = min(cert_hi, x)
        if mean > target:
            safe_hi = min(safe_hi, x)
        else:
            safe_lo = max(safe_lo, x)

    resolution = hi * 0.5**steps  # the bisection's last bracket width
    x = 0.5 * hi
    known: tuple[float, float] | None = None
    if start is not None and 0.0 < start[0] < hi:
        x, known = start[0], (start[1], start[2])
    for _newton in range(_NEWTON_STEPS):
        mean, var = _tilted_moments(logps, powers, x) if known is None else known
        known = None
        learn(x, mean)
        if cert_hi - cert_lo <= resolution:
            break
        step = (target - mean) / var if var > 0.0 else math.nan
        if math.isfinite(step) and abs(step) <= 2.0 * err / var:
            # at the root to within the noise: the certifying points just beyond it
            margin = 4.0 * err / var + 4.0 * _EPS * abs(x)
            for y in (x - margin, x + margin):
                if 0.0 < y < hi:
                    learn(y, _tilted_mean(logps, powers, y))
            break
        x_new = x + step
        if not (math.isfinite(x_new) and safe_lo < x_new < safe_hi):
            x_new = 0.5 * (safe_lo + safe_hi)
        x = x_new
    return cert_lo, cert_hi


def _first_takeable(
    log_scale_bound: float, first_log_err: float, lam: float, offset: int, out_len: int
) -> int:
    """The lowest bin a pass with tilt ``lam > 0`` can take from the untilted one, less a margin.

    Bin t's log error bound under the tilt is ``log_scale_bound - lam (offset + t)``; a pass takes
    a bin only where its bound (plus a non-negative aliasing term) is below the best so far, which
    is at most the untilted ``first_log_err``.  So bins up to ``(log_scale_bound -
    first_log_err) / lam - offset`` are never taken; two bins of margin cover the rounding of the
    per-bin computation.  Only how much of the window is examined depends on it.
    """
    x = (log_scale_bound - first_log_err) / lam - offset
    if math.isnan(x) or x == -math.inf:
        return 0
    if x == math.inf:
        return out_len
    return int(max(0, min(out_len, math.floor(x) - 2)))


def _bin_bounds(best_log_err: np.ndarray, first_log_err: float, lo: int, start: int) -> np.ndarray:
    """Error bounds ``exp(log bound)`` of the bins ``start ..`` of a window whose bins below ``lo``
    hold the untilted pass (bound ``exp(first_log_err)``) and bins ``lo ..`` the bounds
    ``best_log_err`` (the same numbers as exponentiating a whole-window array)."""
    if start >= lo:
        return np.exp(best_log_err[start - lo :])
    return np.exp(np.concatenate([np.full(lo - start, first_log_err), best_log_err]))


def _composed_infinity_mass(mass: float, k: int, up: bool) -> float:
    """``1 - (1 - mass)^k``, the +inf mass of a k-fold composition, rounded UP (upper PMF) or
    DOWN (optimistic PMF): computed as ``-expm1(k log1p(-mass))`` (log1p and expm1 within 1 ulp,
    the product within 0.5 ulp, so a relative error below 4 eps, the condition of expm1 being at
    most 1 at a negative argument), then moved by 8 eps so that it is on the right side of the
    exact value."""
    if mass <= 0.0:
        return 0.0
    if mass >= 1.0:
        return 1.0
    value = -math.expm1(k * math.log1p(-mass))
    return min(1.0, value * (1.0 + 8 * _EPS)) if up else value * (1.0 - 8 * _EPS)


def _self_compose(
    pmf: _Pmf,
    k: int,
    tail: float,
    pessimistic: bool,
    extra: _Pmf | None = None,
    loss_step: float | None = None,
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
    n_fft = _fft_length(width + n_extra - 1)
    if n_fft > max_grid_points():
        raise _GridTooLarge(n_fft)
    factors = [probs] if extra is None else [probs, extra.probs]
    powers = [k] if extra is None else [k, 1]
    out_len = n_fft if truncated else width + n_extra - 1
    value, error, alias = _compose_spectral(
        factors,
        powers,
        n_fft,
        a,
        out_len,
        truncated,
        need_alias=not pessimistic,
        window_tail=tail,
        memos=[pmf._cache] if extra is None else [pmf._cache, extra._cache],
        loss_step=loss_step,
    )
    inf = _composed_infinity_mass(pmf.infinity_mass, k, up=pessimistic)
    lower = k * pmf.lower + a
    if extra is not None:  # 1 - (1 - inf)(1 - extra's), rounded like inf
        both = inf + extra.infinity_mass - inf * extra.infinity_mass
        inf = min(1.0, both * (1.0 + 4 * _EPS)) if pessimistic else both * (1.0 - 4 * _EPS)
        lower += extra.lower
    # (in place: the same values as max(value +- error, 0) without two window-long temporaries)
    if pessimistic:
        out = np.add(value, error, out=error)
        np.maximum(out, 0.0, out=out)
        add = tail / 2.0 if truncated else 0.0
        out[-1] += add  # the mass below the window, moved up to the top bin
        return _Pmf(lower, out, min(1.0, inf + add)), add
    out = np.subtract(value, error, out=error)
    np.maximum(out, 0.0, out=out)
    return _Pmf(lower, out, inf), alias
