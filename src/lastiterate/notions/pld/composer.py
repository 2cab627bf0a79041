"""The cached composer of :math:`C_p(G_a)^{\\otimes k} \\otimes G_b` and epsilon helpers."""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from lastiterate.errors import (
    ParameterError,
    check_in_range,
    check_nonnegative,
    check_positive_int,
    check_probability,
)
from lastiterate.notions.adjacency import Adjacency
from lastiterate.notions.gdp import gdp_epsilon
from lastiterate.notions.pld._common import (
    DEFAULT_DISCRETIZATION,
    DEFAULT_LOG_MASS_TRUNCATION_BOUND,
    DEFAULT_TAIL_MASS_TRUNCATION,
    delta_of_interest,
    max_grid_points,
    tilt_delta_floor,
)
from lastiterate.notions.pld.distribution import (
    EpsilonEstimate,
    Pld,
    _check_discretization,
    _check_log_bound,
    _compose_power,
    gaussian_pld,
    identity_pld,
    on_feasible_grid,
    poisson_subsampled_gaussian_pld,
    symmetric_subsampled_gaussian_pld,
)

# ---------------------------------------------------------------------------------------------
# Epsilon helpers and the cached composer for "C_p(G_a)^{⊗k} ⊗ G_b"
# ---------------------------------------------------------------------------------------------


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
    r"""Fast repeated evaluation of
    :math:`\varepsilon_\delta\big(C_p(G_\mu)^{\otimes k} \otimes G_b\big)`.

    This is the shape of the NoisySGD bounds of paper 000 (Thm 4.8: b = 0; Thm 4.10:
    :math:`C_p(G_{2\sqrt2 L/(b\sigma)})^{\otimes(T-\tau)}
    \otimes G_{\sqrt2 D/(\eta\sigma\sqrt{T-\tau})}`),
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
        self._composed: OrderedDict[tuple[float, int, float, bool, int, float], Pld] = OrderedDict()

    def __repr__(self) -> str:
        return (
            f"SubsampledGaussianComposer(p={self.p:g}, mu={self.mu:g}, "
            f"discretization={self.discretization:g})"
        )

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
        r"""The (cached) PLD of :math:`C_p(G_\mu)^{\otimes k} \otimes G_b`.

        ``b`` is ``extra_gaussian_mu``.
        """
        k = check_positive_int("k", k, minimum=0)
        b = check_nonnegative("extra_gaussian_mu", extra_gaussian_mu)
        d = self.discretization if discretization is None else _check_discretization(discretization)
        # a grid budget may coarsen the result, a delta of interest may skip tilted passes
        key = (d, k, b, with_lower, max_grid_points(), tilt_delta_floor())
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
            return gdp_epsilon(delta, b)
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
            e = gdp_epsilon(delta, b)
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
            if fine and gdp_epsilon(delta, b_of[k]) >= best_fine:
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
    """Epsilon of ``steps`` DP-SGD steps with Poisson sampling.

    See :func:`poisson_subsampled_gaussian_pld` for the mechanism.

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
    # the one delta asked for steers the tilted FFT passes (every value stays an upper bound)
    with delta_of_interest(delta):
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
    r"""Upper bound on
    :math:`\varepsilon_\delta(C_p(G_{\mu_{sub}})^{\otimes k} \otimes G_{\mu_{gauss}})`.

    Convenience wrapper around a module-level cache of :class:`SubsampledGaussianComposer`
    (one per ``(p, mu_sub, discretization)``), so that repeated calls with the same subsampled
    step reuse the one-step PLD.  ``k = 0`` gives the exact Gaussian epsilon.
    """
    p = check_probability("p", p)
    mu_sub = check_nonnegative("mu_sub", mu_sub)
    d = _check_discretization(discretization)
    return _composer(p, mu_sub, d).epsilon(k, delta, mu_gauss)
