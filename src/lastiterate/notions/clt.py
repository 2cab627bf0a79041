"""Privacy central limit theorem for subsampled Gaussians (docs/theorems.md section 1.7).

Everything in this module is an ESTIMATE (bound-type HEUR): the CLT gives the limit of ``T``-fold
compositions as ``T -> infinity`` with ``p sqrt(T)`` fixed. It is not an upper bound on the privacy
loss at any finite ``T`` and can under-report (e.g. paper 000's MNIST setting: CLT eps 4.51 vs the
exact 4.44 is an over-estimate there, while Opacus' CLT accountant under-reports at small T; see
peers.md). Results of these functions must be labelled "estimate" and never chosen as a best bound.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from lastiterate.errors import ParameterError, check_in_range, check_nonnegative, check_positive
from lastiterate.notions import normal

__all__ = ["clt_h", "clt_mu_poisson", "clt_mu_symmetric"]

_SQRT2 = math.sqrt(2.0)


def clt_h(mu: ArrayLike) -> float | np.ndarray:
    """ESTIMATE helper ``h(mu) = e^{mu^2} Phi(1.5 mu) + 3 Phi(-0.5 mu) - 2`` (docs/theorems.md 1.7;
    paper 000's ``gdp.clt_mu``), the per-step variance factor of the symmetric privacy CLT.

    Evaluated as ``expm1(mu^2) Phi(1.5 mu) + erf(1.5 mu/sqrt2)/2 - 3 erf(0.5 mu/sqrt2)/2``
    (algebraically equal: ``Phi(x) - 1/2 = erf(x/sqrt2)/2``), which avoids the cancellation of the
    O(1) terms for small mu (``h(mu) ~ mu^2/2`` as mu -> 0); the O(mu^3) erf difference uses its
    Taylor series below mu = 0.01. ``mu >= 0``; returns ``inf`` (without overflow warnings) once
    ``e^{mu^2}`` overflows (mu > ~26.6). Scalar in, float out; array in, array out.
    """
    try:
        m = np.asarray(mu, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError("mu", mu, "must be a real number >= 0") from None
    if np.isnan(m).any() or (m < 0).any():
        raise ParameterError("mu", mu, "must be >= 0 (not NaN)")
    with np.errstate(over="ignore", invalid="ignore"):
        big = np.expm1(np.square(m))
        g = 0.5 * normal.erf(1.5 * m / _SQRT2) - 1.5 * normal.erf(0.5 * m / _SQRT2)
        # g = Phi(1.5m) - 3 Phi(0.5m) + 1 = 1.5 phi(0) int_0^m e^{-t^2/8} expm1(-t^2) dt is O(m^3);
        # for small m use its Taylor series (next term ~1e-14 relative at m = 0.01) instead of the
        # cancelling erf difference.
        m3 = m * m * m
        g_series = (
            1.5
            / math.sqrt(2.0 * math.pi)
            * (-m3 / 3.0 + 0.125 * m3 * m * m - 91.0 / 2688.0 * m3 * m3 * m)
        )
        g = np.where(m < 0.01, g_series, g)
        out = big * normal.ndtr(1.5 * m) + g
    out = np.maximum(out, 0.0)  # h >= 0; clip rounding noise at mu ~ 0
    return float(out) if out.ndim == 0 else out


def _check_steps(steps: float) -> float:
    return check_positive("steps", steps)


def clt_mu_symmetric(p: float, mu: float, steps: float) -> float:
    """ESTIMATE of the GDP parameter of ``C_p(G_mu)^{(x)T}`` by the symmetric privacy CLT (DRS22
    Cor. 4; paper 000 Lemma A.5; TF-Privacy ``compute_mu_uniform``; docs/theorems.md 1.7):

        mu_CLT = sqrt(2) * p * sqrt(T) * sqrt(h(mu)).

    Assumes uniform subsampling without replacement with rate ``p = b/n``; a limit as ``T ->
    infinity`` with ``p sqrt(T)`` fixed, NOT a bound at finite T. ``p`` in [0, 1], ``mu >= 0``,
    ``steps > 0`` (a real number is accepted, as in paper 004's ``T = epochs * n / B``). Returns
    ``inf`` when ``h(mu)`` overflows.
    """
    pp = check_in_range("p", p, 0.0, 1.0)
    m = check_nonnegative("mu", mu)
    t = _check_steps(steps)
    h = float(clt_h(m))
    if math.isinf(h):
        return math.inf if pp > 0 else 0.0
    return _SQRT2 * pp * math.sqrt(t) * math.sqrt(h)


def clt_mu_poisson(p: float, mu: float, steps: float) -> float:
    """ESTIMATE of the GDP parameter of ``(p G_mu + (1 - p) Id)^{(x)T}`` by the one-sided (Poisson)
    privacy CLT (BDLS20 eq. 3.1; TF-Privacy ``compute_mu_poisson``; docs/theorems.md 1.7):

        mu_CLT = p * sqrt(T (e^{mu^2} - 1)).

    In BDLS20 ``mu = 1 / noise_multiplier`` (add/remove adjacency). A limit as ``T -> infinity``
    with ``p sqrt(T)`` fixed, NOT a bound at finite T. ``p`` in [0, 1], ``mu >= 0``, ``steps > 0``
    (real). ``e^{mu^2} - 1`` is computed with ``expm1``; returns ``inf`` once it overflows (mu >
    ~26.6).
    """
    pp = check_in_range("p", p, 0.0, 1.0)
    m = check_nonnegative("mu", mu)
    t = _check_steps(steps)
    if m * m > 709.0:
        return math.inf if pp > 0 else 0.0
    return pp * math.sqrt(t * math.expm1(m * m))
