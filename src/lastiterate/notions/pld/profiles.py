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


#: machine epsilon (2^-52): every elementary operation and numpy's exp/log/log1p/expm1 (glibc,
#: < 1 ulp) is within EPS relative of its exact value
EPS = 2.0**-52
#: accuracy of :func:`lastiterate.notions.normal.log_ndtr`: 5 EPS relative, measured against mpmath
#: (tests/notions/test_normal.py); 8 EPS leaves a margin
_LOG_NDTR_ACCURACY = 8.0 * EPS
#: accuracy of :func:`lastiterate.notions.normal.erfcx`: 4 EPS relative against mpmath
#: (tests/notions/test_normal.py); 6 EPS leaves a margin
_ERFCX_ACCURACY = 6.0 * EPS
_SQRT1_2 = math.sqrt(0.5)
#: first-order error bounds are multiplied by this (second-order terms of errors below 1e-10)
_FIRST_ORDER = 1.01
#: absolute error of a result that underflows (exact values below the smallest normal double are
#: returned as 0 or subnormal numbers)
UNDERFLOW = 2.0**-1022


def _difference_error(
    delta: np.ndarray, qe: np.ndarray, err_log_p: np.ndarray, err_log_qe: np.ndarray
) -> np.ndarray:
    r"""Absolute error bound of :math:`\delta = p - q_e` evaluated as
    ``exp(log p) * -expm1(log qe - log p)`` from logs with absolute errors ``err_log_p`` and
    ``err_log_qe``: :math:`|\Delta\delta| \le p\,|\Delta \log p| + q_e |\Delta \log q_e|` to
    first order, plus an ulp for each of exp, expm1 and the product (4 EPS delta), with
    :math:`p = \delta + q_e`; the computed values stand in for the exact ones (second order);
    plus ``UNDERFLOW``."""
    with np.errstate(invalid="ignore", over="ignore"):
        out = (delta + qe) * (err_log_p + EPS) + qe * (err_log_qe + EPS) + 4.0 * EPS * delta
    return _FIRST_ORDER * out + UNDERFLOW


def _log_ndtr_error(arg: np.ndarray, log_value: np.ndarray, err_arg: np.ndarray) -> np.ndarray:
    r"""Absolute error bound of ``log_ndtr(arg)`` as an approximation of
    :math:`\log\Phi` at the exact argument, when the computed ``arg`` is off by at most
    ``err_arg``: ``_LOG_NDTR_ACCURACY |log Phi|`` (the function's accuracy) plus ``err_arg`` times
    the slope :math:`\varphi(x)/\Phi(x) \le |x| + 1` (Birnbaum's bound on Mills' ratio,
    :math:`\varphi(x)/\Phi(x) < (|x| + \sqrt{x^2 + 4})/2` for x < 0, and <= 0.8 for x >= 0)."""
    return _LOG_NDTR_ACCURACY * np.abs(log_value) + err_arg * (np.abs(arg) + 1.0)


def _gaussian_parts(eps: np.ndarray, mu: float) -> tuple[np.ndarray, np.ndarray]:
    r"""Return ``(delta, qe)`` of :math:`G_\mu` at ``eps >= 0`` (vectorised, stable).

    ``delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` and
    ``qe = e^eps * Q(L > eps) = e^eps Phi(-eps/mu - mu/2)`` (the minus slope of the profile in
    :math:`u=e^\varepsilon`, times u).  Computed in log space so that neither term underflows and
    the difference keeps its relative precision for large eps.
    """
    delta, qe, _ = _gaussian_parts_bounded(eps, mu, None)
    return delta, qe


def _gaussian_parts_bounded(
    eps: np.ndarray, mu: float, eps_err: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    r""":func:`_gaussian_parts` with an absolute bound on the evaluation error of delta.

    Two evaluations of :math:`\delta = p - q_e`, :math:`p = \Phi(a_+)`,
    :math:`q_e = e^\varepsilon\Phi(a_-)`, :math:`a_\pm = -\varepsilon/\mu \pm \mu/2`:

    * tail (:math:`a_+ < -1`): :math:`\Phi(x) = \tfrac12 \operatorname{erfcx}(-x/\sqrt2)
      e^{-x^2/2}` and :math:`\varepsilon - a_-^2/2 = -a_+^2/2`, so
      :math:`\delta = \tfrac12 e^{-a_+^2/2}(\operatorname{erfcx}(y_+) - \operatorname{erfcx}(y_-))`,
      :math:`y_\pm = -a_\pm/\sqrt2`: the cancellation is between two values accurate to a few
      ulps, while the large exponent is a common factor (in log space both logs carry an error of
      EPS times :math:`|\log\Phi| \approx a^2/2`, which the difference then multiplies by
      :math:`(p + q_e)/\delta`: up to 1e-9 relative at sigma = 1e3);
    * centre: ``exp(log p) * -expm1(log qe - log p)`` with :func:`normal.log_ndtr`.

    ``eps_err`` bounds how far the computed ``eps`` is from the exact epsilon the value stands for
    (``None``: no bound is computed).  Derivation (first order, each elementary operation within
    EPS/2 relative, numpy's exp/log/expm1 within EPS): the input error moves delta by at most
    ``qe * eps_err`` (the slope of the profile in epsilon is :math:`-q_e`).  Evaluating at the
    computed eps, with :math:`s = |\varepsilon/\mu| + \mu/2 \ge |a_\pm|`: the arguments are
    rounded by at most ``EPS s``.  Tail: :math:`y_\pm` by ``1.1 EPS s``, which moves
    :math:`\log\operatorname{erfcx}` by at most 1.2 times that (its slope is in [-1.2, 0] for
    y >= 0), on top of erfcx's accuracy (``_ERFCX_ACCURACY``); the common factor by
    ``EPS (2 s^2 + 1)`` relative: ``delta EPS (2 s^2 + 3) + (p + qe) EPS (1.4 s + 7)``.  Centre:
    each log by ``EPS s (s + 1)`` (:func:`_log_ndtr_error`'s slope bound) plus
    ``_LOG_NDTR_ACCURACY |log Phi(a_-)|`` and ``EPS |log qe|`` for the sum with eps; then
    :func:`_difference_error`, i.e. ``EPS ((delta + 2 qe)(K + 1) + qe |log qe| + 4 delta)``,
    :math:`K = 8|\log\Phi(a_-)| + s(s + 1)`.
    """
    eps = np.asarray(eps, dtype=float)
    a = -eps / mu
    arg_p = a + mu / 2.0
    arg_q = a - mu / 2.0
    tail_mask = arg_p < -1.0
    centre_mask = ~tail_mask
    has_tail, has_centre = bool(np.any(tail_mask)), bool(np.any(centre_mask))
    tail: np.ndarray | slice = tail_mask
    centre: np.ndarray | slice = centre_mask
    # on a grid sorted by eps the tail is a suffix: slices (views) instead of masked copies
    n_centre = int(np.count_nonzero(centre_mask))
    if eps.ndim == 1 and not np.any(tail_mask[:n_centre]):
        tail, centre = slice(n_centre, None), slice(0, n_centre)
    delta = np.empty_like(eps)
    qe = np.empty_like(eps)
    if has_tail:
        ap, aq = arg_p[tail], arg_q[tail]
        e_p = normal.erfcx(ap * -_SQRT1_2)
        e_q = normal.erfcx(aq * -_SQRT1_2)
        with np.errstate(over="ignore"):  # (a^2 = inf far out: the factor is 0, as it should be)
            half_c = 0.5 * np.exp(-0.5 * ap * ap)
        delta[tail] = half_c * np.maximum(e_p - e_q, 0.0)
        qe[tail] = half_c * e_q
    log_p = log_phi_q = log_qe = None
    if has_centre:
        log_p = normal.log_ndtr(arg_p[centre])
        log_phi_q = normal.log_ndtr(arg_q[centre])
        log_qe = log_phi_q + eps[centre]
        with np.errstate(over="ignore", invalid="ignore"):
            dc = np.exp(log_p) * -np.expm1(np.minimum(log_qe - log_p, 0.0))
        delta[centre] = np.maximum(dc, 0.0)
        qe[centre] = np.exp(log_qe)
    if eps_err is None:
        return delta, qe, None
    err = np.empty_like(eps)
    with np.errstate(invalid="ignore", over="ignore"):
        s = np.abs(a)
        s += mu / 2.0
        if has_tail:
            st, dt, qt = s[tail], delta[tail], qe[tail]
            k = dt * (2.0 * st * st + 3.0)
            k += (dt + 2.0 * qt) * (1.4 * st + 3.0 + _ERFCX_ACCURACY / EPS)
            err[tail] = k
        if log_phi_q is not None and log_qe is not None:
            sc, dc, qc = s[centre], delta[centre], qe[centre]
            k = sc * (sc + 1.0)
            k += (_LOG_NDTR_ACCURACY / EPS) * np.abs(log_phi_q)
            k += 1.0  # K + 1
            e = 2.0 * qc
            e += dc
            e *= k
            e += qc * np.abs(log_qe)
            e += 4.0 * dc
            err[centre] = e
        err *= _FIRST_ORDER * EPS
        err += _FIRST_ORDER * qe * eps_err
        err += UNDERFLOW
    return delta, qe, err


def _reflect(x: np.ndarray, delta_at_x: np.ndarray) -> np.ndarray:
    r"""Profile of a symmetric tradeoff at :math:`-x` from its value at :math:`x \ge 0`:
    :math:`\delta(-x) = 1 - e^{-x} + e^{-x}\delta(x)`."""
    return -np.expm1(-x) + np.exp(-x) * delta_at_x


def _reflect_error(
    x: np.ndarray, err_x: np.ndarray, err_at_x: np.ndarray, value: np.ndarray
) -> np.ndarray:
    r"""Absolute error bound of :func:`_reflect`'s :math:`1 - e^{-x} + e^{-x}\delta(x)` when x is
    off by ``err_x`` and :math:`\delta(x)` by ``err_at_x``: the derivative in x is
    :math:`e^{-x}(1 - \delta(x) - q_e(x)) \in [0, e^{-x}]`, the two terms are non-negative (their
    sum's rounding and the ulps of expm1, exp and the product: 4 EPS of the ``value``)."""
    return _FIRST_ORDER * (np.exp(-x) * (err_x + err_at_x) + 4.0 * EPS * value)


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


def _log_amplified_error(
    eps: np.ndarray, amplified: np.ndarray, p: float, eps_err: np.ndarray
) -> np.ndarray:
    r"""Absolute error bound of :func:`_log_amplified` (``amplified`` its computed value) when
    ``eps`` is off by ``eps_err``.

    Small branch (eps < 1), :math:`\varepsilon' = \log(1 + y)`, :math:`y = (e^\varepsilon-1)/p`:
    y is off by (4 EPS + eps_err e^eps/|e^eps - 1|) relative (expm1, the division, and eps's own
    error through expm1's condition number), which log1p turns into
    :math:`|y|/(1+y) = |1 - e^{-\varepsilon'}|` times it, plus EPS |eps'| for log1p itself.
    Large branch: three roundings of terms of size |eps|, |log p|, |eps'| and eps's error times the
    slope :math:`1/(1 - (1-p)e^{-\varepsilon}) \le 1/(1 - e^{-1}) < 2`."""
    small = eps < 1.0
    out = np.empty_like(eps)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        e, err, amp = eps[small], eps_err[small], amplified[small]
        # (eps = 0 is exact: y = 0 and the error is 0)
        rel_y = np.where(err > 0.0, err * np.exp(e) / np.abs(np.expm1(e)), 0.0)
        rel_y += 4.0 * EPS
        out[small] = np.abs(np.expm1(-amp)) * rel_y + EPS * np.abs(amp)
        large = ~small
        out[large] = (
            4.0 * EPS * (np.abs(eps[large]) + abs(math.log(p)) + np.abs(amplified[large]) + 1.0)
            + 2.0 * eps_err[large]
        )
    out *= _FIRST_ORDER
    return out


def _subsampled_parts(eps: np.ndarray, p: float, mu: float) -> tuple[np.ndarray, np.ndarray]:
    r"""``(delta, qe)`` of the remove-direction profile :math:`pG_\mu + (1-p)\mathrm{Id}`.

    For :math:`\varepsilon > \log(1-p)`: :math:`\delta(\varepsilon) = p\,\delta_G(\varepsilon';\mu)`
    with :math:`e^{\varepsilon'} = 1 + (e^\varepsilon - 1)/p` (Balle, Barthe & Gaboardi 2018,
    Thm 8; docs/theorems.md §1.6) and :math:`Q(L > \varepsilon) = \Phi(-\varepsilon'/\mu - \mu/2)`;
    for :math:`\varepsilon \le \log(1-p)`: :math:`\delta = 1 - e^\varepsilon`, ``qe = e^eps``.
    This is also the profile of :math:`C_p(G_\mu)` for :math:`\varepsilon \ge 0` (DRS22 Thm 9).
    """
    delta, qe, _ = _subsampled_parts_bounded(eps, p, mu, None)
    return delta, qe


def _subsampled_parts_bounded(
    eps: np.ndarray, p: float, mu: float, eps_err: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    r""":func:`_subsampled_parts` with an absolute bound on the evaluation error of delta (``eps``
    off by ``eps_err``; ``None``: no bound).  Branches: :math:`1 - e^\varepsilon` (expm1's ulp and
    eps's error times the slope :math:`e^\varepsilon`); :math:`p\,\delta_G(\varepsilon')` with
    the error of :math:`\varepsilon'` (:func:`_log_amplified_error`) passed to
    :func:`_gaussian_parts_bounded`; for :math:`\varepsilon' < 0` the reflection
    (:func:`_reflect_error`); and 2 EPS of delta for the product with p and the clip."""
    eps = np.asarray(eps, dtype=float)
    delta = np.empty_like(eps)
    qe = np.empty_like(eps)
    err = None if eps_err is None else np.empty_like(eps)
    flat = eps <= (math.log1p(-p) if p < 1.0 else -math.inf)
    delta[flat] = -np.expm1(eps[flat])
    qe[flat] = np.exp(eps[flat])
    if err is not None and eps_err is not None:
        err[flat] = 2.0 * EPS * delta[flat] + np.exp(eps[flat]) * eps_err[flat]
    e = eps[~flat]
    ep = _log_amplified(e, p) if p < 1.0 else e
    err_ep = None
    if eps_err is not None:
        err_ep = eps_err[~flat] if p == 1.0 else _log_amplified_error(e, ep, p, eps_err[~flat])
    pos = ep >= 0
    d = np.empty_like(ep)
    d_err = np.empty_like(ep)
    log_qe = np.empty_like(ep)
    if np.any(pos):
        dp, _, ep_pos = _gaussian_parts_bounded(
            ep[pos], mu, None if err_ep is None else err_ep[pos]
        )
        d[pos] = dp
        if ep_pos is not None:
            d_err[pos] = ep_pos
    if np.any(~pos):
        x = -ep[~pos]
        ex = None if err_ep is None else err_ep[~pos]
        dx, _, dx_err = _gaussian_parts_bounded(x, mu, ex)
        d[~pos] = _reflect(x, dx)
        if ex is not None and dx_err is not None:
            d_err[~pos] = _reflect_error(x, ex, dx_err, d[~pos])
    log_qe[:] = normal.log_ndtr(-ep / mu - mu / 2.0) + e
    delta[~flat] = np.clip(p * d, 0.0, 1.0)
    qe[~flat] = np.exp(log_qe)
    if err is not None:
        err[~flat] = p * d_err + 2.0 * EPS * delta[~flat]
    return delta, qe, err


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
    bounded = _replace_parts_bounded(q, z)

    def parts(eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        delta, qe, _ = bounded(eps, None)
        return delta, qe

    return parts


def _replace_parts_bounded(
    q: float, z: float
) -> Callable[[np.ndarray, np.ndarray | None], tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    r""":func:`_replace_parts` with an absolute bound on the evaluation error of delta (``eps`` off
    by ``eps_err``; ``None``: no bound).

    Derivation: :math:`f(x) = P(X \le x) - e^\varepsilon Q(X \le x)` is maximal at the exact
    crossing :math:`x^*` (:math:`f'(x^*) = p(x^*) - e^\varepsilon q(x^*) = 0`), so the computed
    :math:`\hat x` costs at most :math:`\tfrac12 (\hat x - x^*)^2 \sup|f''|` near
    :math:`\hat x`, :math:`|f''| \le 4 p(\hat x)(|\hat x| + 1)/z^2` (p the density of P);
    :math:`|\hat x - x^*| \le 16\,\mathrm{EPS}\, z^2 (|\operatorname{asinh}| + |\varepsilon| + |t|
    + 1)` (a dozen roundings of terms of those sizes).  At :math:`\hat x`: each
    :math:`\log(q\Phi(\cdot))`, :math:`\log((1-q)\Phi(\cdot))` by the log's rounding and
    :func:`_log_ndtr_error` (argument rounding 2 EPS (|x| + 1)/z), logaddexp adds 2 EPS of its
    result; :math:`\log q_e` also ``eps_err`` (the slope of f in epsilon is :math:`-q_e`) and the
    sum's ulp; then :func:`_difference_error`.
    """
    s2 = z * z
    log_q = math.log(q)
    log_1q = math.log1p(-q) if q < 1 else -math.inf
    log_alpha = 0.5 / s2 + (log_1q - log_q if q < 1 else -math.inf)

    def term(
        shift: float, x: np.ndarray, log_w: float, want: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        arg = (x + shift) / z
        ln = normal.log_ndtr(arg)
        if not want:
            return log_w + ln, ln
        err_arg = 2.0 * EPS * (np.abs(x) + 1.0) / z
        return log_w + ln, EPS * abs(log_w) + _log_ndtr_error(arg, ln, err_arg)

    def parts(
        eps: np.ndarray, eps_err: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        eps = np.asarray(eps, dtype=float)
        want = eps_err is not None
        t = np.zeros_like(eps)
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
            asinh = np.zeros_like(eps)
            x = -s2 * eps / 2
        a_p, e_ap = term(1.0, x, log_q, want)
        a_q, e_aq = term(-1.0, x, log_q, want)
        if q < 1:
            b, e_b = term(0.0, x, log_1q, want)
        else:
            b, e_b = np.full_like(eps, -np.inf), np.zeros_like(eps)
        lp = np.logaddexp(a_p, b)
        lq = np.logaddexp(a_q, b)
        log_qe = lq + eps
        delta = np.exp(lp) * -np.expm1(np.minimum(log_qe - lp, 0.0))
        delta = np.maximum(delta, 0.0)
        qe = np.exp(log_qe)
        if eps_err is None:
            return delta, qe, None
        with np.errstate(invalid="ignore"):
            t_fin = np.where(np.isfinite(t), t, 0.0)
            err_lp = np.maximum(e_ap, e_b) + 2.0 * EPS * np.abs(lp)
            err_lqe = (
                np.maximum(e_aq, e_b) + 2.0 * EPS * np.abs(lq) + eps_err + EPS * np.abs(log_qe)
            )
            err_x = 16.0 * EPS * s2 * (np.abs(asinh) + np.abs(eps) + np.abs(t_fin) + 1.0)
            # |f''| <= (p(x) + e^eps q(x)) (|x| + 1)/z^2 (each component's density has slope
            # (x - m)/z^2 times it, |m| <= 1), p = e^eps q at x*, and the densities change by a
            # factor below 2 within err_x of x_hat: |f''| <= 4 p(x_hat) (|x_hat| + 1)/z^2
            log_dens = np.logaddexp(
                log_q - 0.5 * ((x + 1.0) / z) ** 2, log_1q - 0.5 * (x / z) ** 2
            ) - math.log(z * math.sqrt(2.0 * math.pi))
            second = 2.0 * err_x**2 * np.exp(log_dens) * (np.abs(x) + 1.0) / s2
        return delta, qe, _difference_error(delta, qe, err_lp, err_lqe) + _FIRST_ORDER * second

    return parts
