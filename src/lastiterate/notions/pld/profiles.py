"""Closed-form privacy profiles: Gaussian, subsampled Gaussian (remove direction / C_p), the
replace-one Poisson pair (docs/theorems.md §1.2, §1.6).

The public profiles :func:`gaussian_delta` and :func:`symmetric_subsampled_gaussian_delta` are the
formulas of :func:`lastiterate.notions.gdp.gdp_delta` and
:func:`lastiterate.notions.tradeoff.subsampled_gaussian_delta` (their one home), extended to
negative epsilon by symmetry.  The private ``*_parts`` kernels evaluate the same profiles together
with their slope ``qe`` in log space, as the connect-the-dots PMFs need both at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from lastiterate.errors import (
    ParameterError,
    check_nonnegative,
    check_probability,
)
from lastiterate.notions import normal
from lastiterate.notions.gdp import _gdp_delta_unchecked
from lastiterate.notions.tradeoff import subsampled_gaussian_delta

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
    log_p = normal.log_ndtr(-eps / mu + mu / 2.0)
    log_qe = normal.log_ndtr(-eps / mu - mu / 2.0) + eps
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

    (Balle & Wang 2018, Thm 8; Dong, Roth & Su 2022, Cor. 2.13; docs/theorems.md §1.2), evaluated
    by :func:`lastiterate.notions.gdp.gdp_delta`'s cancellation-free form for
    :math:`\varepsilon \ge 0`.  For :math:`\varepsilon < 0` the symmetric identity
    :math:`\delta(-x) = 1 - e^{-x} + e^{-x}\delta(x)` is used.  ``mu = 0`` gives
    :math:`\max(0, 1 - e^\varepsilon)` (perfect privacy).

    Args:
        epsilon: a real number or an array of them (``+inf`` gives 0).
        mu: the GDP parameter, ``mu >= 0``.

    Returns:
        :math:`\delta(\varepsilon)`: a float for scalar input, else an array.

    Raises:
        ParameterError: ``mu`` is negative or not finite, or ``epsilon`` holds NaN.
    """
    mu = check_nonnegative("mu", mu)
    return _symmetric_profile(epsilon, mu, lambda x: _gdp_delta_unchecked(x, mu))


def _log_amplified(eps: np.ndarray, p: float) -> np.ndarray:
    r"""Return :math:`\varepsilon' = \log(1 + (e^{\varepsilon} - 1)/p)` for
    :math:`e^\varepsilon > 1-p`.

    ``log1p(expm1(t)/p)`` for small t and ``t + log1p(-(1-p) e^{-t}) - log p`` for large t
    (docs/theorems.md §1.8 implementation note).
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
    Thm 8; docs/theorems.md §1.6) and :math:`Q(L > \varepsilon) = \Phi(-\varepsilon'/\mu - \mu/2)`;
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
    log_qe[:] = normal.log_ndtr(-ep / mu - mu / 2.0) + e
    delta[~flat] = np.clip(p * d, 0.0, 1.0)
    qe[~flat] = np.exp(log_qe)
    return delta, qe


def symmetric_subsampled_gaussian_delta(
    epsilon: float | np.ndarray, p: float, mu: float
) -> float | np.ndarray:
    r"""Exact single-step privacy profile of :math:`C_p(G_\mu)` for every real epsilon.

    For :math:`\varepsilon \ge 0`: :math:`\delta(\varepsilon) = p\,\delta_G(\varepsilon';\mu)`,
    :math:`e^{\varepsilon'} = 1 + (e^\varepsilon - 1)/p` (docs/theorems.md §1.6; DRS22 Thm 9 / paper
    000 Prop. D.4).  :math:`C_p(G_\mu)` is symmetric, hence for :math:`\varepsilon < 0`
    :math:`\delta(\varepsilon) = 1 - e^{\varepsilon} + e^{\varepsilon}\delta(-\varepsilon)`
    (from :math:`(p - \gamma q)_+ = p - \gamma q + (\gamma q - p)_+` and the swap symmetry).
    The non-negative side is :func:`lastiterate.notions.tradeoff.subsampled_gaussian_delta`.

    Args:
        epsilon: a real number or an array of them.
        p: the sampling rate, in (0, 1].
        mu: the GDP parameter of one unsampled step, ``mu >= 0``.

    Returns:
        :math:`\delta(\varepsilon)`: a float for scalar input, else an array.

    Raises:
        ParameterError: ``p`` or ``mu`` is out of range, or ``epsilon`` holds NaN.
    """
    p = check_probability("p", p)
    mu = check_nonnegative("mu", mu)
    return _symmetric_profile(
        epsilon, mu, lambda x: np.asarray(subsampled_gaussian_delta(x, p, mu), dtype=float)
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
            math.log(q) + normal.log_ndtr((x + 1) / z),
            (math.log1p(-q) + normal.log_ndtr(x / z)) if q < 1 else -np.inf,
        )
        lq = np.logaddexp(
            math.log(q) + normal.log_ndtr((x - 1) / z),
            (math.log1p(-q) + normal.log_ndtr(x / z)) if q < 1 else -np.inf,
        )
        log_qe = lq + eps
        delta = np.exp(lp) * -np.expm1(np.minimum(log_qe - lp, 0.0))
        return np.maximum(delta, 0.0), np.exp(log_qe)

    return parts
