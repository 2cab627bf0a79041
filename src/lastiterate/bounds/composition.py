"""Composition baselines: the privacy of the whole transcript, which bounds the last iterate.

These hold for ANY loss (no convexity, smoothness or projection needed): releasing every iterate
is post-processed into releasing the last one.  They are what Opacus / dp_accounting report, and
what the accountant falls back to when no last-iterate theorem applies.

Per-step mechanism (docs/theorems.md 0): a step whose batch holds the differing example is the
Gaussian mechanism with GDP parameter L/(b sigma); full batch: L/(n sigma).

* ``gdp-composition``: paper 000 Thm 4.1 (gd), Thm 4.4 (cgd: the example is used once per epoch),
  Thm 4.8 (sgd with uniform fixed-size batches: C_p(G_{L/(b sigma)})^{⊗T}, composed numerically);
  sgd with Poisson batches: paper 004's exact guarantee (p G + (1-p) Id)^{⊗T}, also numerical;
  shuffled batches: one Gaussian step per epoch (no amplification is claimed).
* ``pld-composition``: the same mechanisms through the privacy-loss-distribution engine.
* ``rdp-composition``: Renyi DP of the (sampled) Gaussian composed over the steps, converted with
  the best conversion of docs/theorems.md 1.5.
* ``clt``: the central-limit GDP approximations (docs/theorems.md 1.7); estimates, never bounds.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from lastiterate.bounds.base import (
    Query,
    Result,
    gdp_result,
    locating,
    rdp_result,
    register,
)
from lastiterate.errors import NotApplicable, ParameterError
from lastiterate.notions.arrays import sorted_unique
from lastiterate.notions.clt import clt_mu_poisson, clt_mu_symmetric
from lastiterate.notions.gdp import _gdp_delta_unchecked, smallest_epsilon
from lastiterate.notions.rdp import DEFAULT_ORDERS, RdpCurve
from lastiterate.notions.roots import brent_root
from lastiterate.run import Run

ANY_LOSS = "any loss: no convexity, smoothness or projection assumed"


def _gaussian_uses(run: Run) -> tuple[float, int]:
    """(per-step GDP parameter, number of steps using the differing example): gd, cgd, shuffle."""
    if run.algorithm == "gd":
        return run.L / (run.n * run.sigma), run.T
    return run.per_step_mu, run.uses


def _clip_noise_multiplier(run: Run) -> float:
    """Noise multiplier of the per-step sum normalised to sensitivity C, the clip norm implied by L.

    Under add/remove the sum changes by at most C = L; under replace-one by at most L = 2C.  The
    noise on the sum is b*sigma, so z = b sigma / C.
    """
    c_norm = run.L / 2 if run.adjacency == "replace" else run.L
    return run.b * run.sigma / c_norm


def _gaussian_composition_result(
    run: Run,
    query: Query,
    *,
    theorem: str,
    reference: str,
    bound_id: str = "gdp-composition",
    **details: Any,
) -> Result:
    """mu-GDP of ``uses`` Gaussian steps G_{mu0} composed: mu = mu0 sqrt(uses) (gd, cgd, shuffle);
    ``details`` are added after ``per_step_mu`` and ``compositions``."""
    mu0, uses = _gaussian_uses(run)
    return gdp_result(
        bound_id,
        theorem=theorem,
        reference=reference,
        mu=mu0 * math.sqrt(uses),
        query=query,
        run=run,
        assumptions=(ANY_LOSS,),
        details={"per_step_mu": mu0, "compositions": uses, **details},
    )


@register(
    "gdp-composition",
    theorem="Thm 4.1 (NoisyGD composition)",
    reference="Bok, Su, Altschuler 2024 (paper 000)",
    algorithms=("gd",),
)
def gdp_composition_gd(run: Run, query: Query) -> Result:
    """Thm 4.1: NoisyGD is mu-GDP with mu = (L/(n sigma)) sqrt(T); tight for linear losses."""
    return _gaussian_composition_result(
        run, query, theorem="Thm 4.1", reference="Bok, Su, Altschuler 2024, Thm 4.1"
    )


@register(
    "gdp-composition",
    theorem="Thm 4.4 (NoisyCGD composition)",
    reference="Bok, Su, Altschuler 2024 (paper 000)",
    algorithms=("cgd",),
)
def gdp_composition_cgd(run: Run, query: Query) -> Result:
    """Thm 4.4: NoisyCGD is mu-GDP with mu = (L/(b sigma)) sqrt(E): the differing example is used
    once per epoch.  b is the smallest batch of the partition and E = ceil(T/l) (worst position)."""
    return _gaussian_composition_result(
        run, query, theorem="Thm 4.4", reference="Bok, Su, Altschuler 2024, Thm 4.4"
    )


@register(
    "gdp-composition",
    theorem="Thm 4.8 / shuffled-batch composition",
    reference="Bok, Su, Altschuler 2024 (paper 000); Bu et al. 2020 (paper 004)",
    algorithms=("sgd",),
)
def gdp_composition_sgd(run: Run, query: Query) -> Result:
    """NoisySGD composition.

    * uniform fixed-size batches, replace-one: Thm 4.8, f = C_p(G_{L/(b sigma)})^{⊗T}, composed by
      the PLD engine (pessimistic; docs/theorems.md 1.8);
    * Poisson batches: paper 004's exact guarantee min{f, f^-1}** with f = (p G + (1-p) Id)^{⊗T}
      (dp_accounting PLD of the Poisson-subsampled Gaussian under the run's adjacency);
    * shuffled batches: each example is used exactly once per epoch; given the permutation this is
      one Gaussian step per epoch, and f-DP is preserved under the mixture over permutations, so
      mu = (L/(b_min sigma)) sqrt(ceil(E)).  No shuffling amplification is claimed.
    """
    if run.sampling_scheme == "shuffle":
        return _gaussian_composition_result(
            run,
            query,
            theorem="shuffled batches: one Gaussian step per epoch",
            reference="Bok, Su, Altschuler 2024, Thm 4.4 argument (cyclic use)",
        )
    return _sgd_pld_result("gdp-composition", run, query)


def _full_batch_gaussian_mu(run: Run) -> float | None:
    """Per-step GDP parameter when every step surely uses the differing example (rate q = 1).

    Then the subsampled mechanism is the plain Gaussian: C_1(G_mu) = G_mu (DRS22 Def. 6), and
    the Poisson pair with q = 1 is N(0, z^2) vs N(1, z^2) (add/remove, mu = 1/z) or N(-1, z^2) vs
    N(1, z^2) (replace, clipped, mu = 2/z); its T-fold composition is exactly G_{mu sqrt(T)}
    (docs/theorems.md 1.1), so no PLD is needed.  None when q < 1.
    """
    if run.p < 1.0:
        return None
    if run.sampling_scheme == "uniform":
        return run.L / (run.b * run.sigma)
    if run.adjacency == "replace" and run.clip is None:
        return run.L / (run.b * run.sigma)
    z = _clip_noise_multiplier(run)
    return (2.0 if run.adjacency == "replace" else 1.0) / z


def _full_batch_result(bound_id: str, mu0: float, run: Run, query: Query) -> Result:
    """Exact G_{mu0 sqrt(T)} for a subsampled run whose rate is 1.

    See :func:`_full_batch_gaussian_mu`.
    """
    return gdp_result(
        bound_id,
        theorem="sampling rate 1: T Gaussian steps compose to G_{mu sqrt(T)} (exact)",
        reference="Dong, Roth, Su 2022, Cor. 3.3 (Gaussian composition); C_1(G_mu) = G_mu (Def. 6)",
        mu=mu0 * math.sqrt(run.T),
        query=query,
        run=run,
        assumptions=(ANY_LOSS, f"sampling={run.sampling_scheme} with rate 1"),
        details={
            "per_step_mu": mu0,
            "sampling_rate": run.p,
            "compositions": run.T,
            "discretization": "none (closed form)",
        },
    )


def _mechanism_key(run: Run) -> tuple[Any, ...]:
    """What determines a subsampled run's composed PLD (the key of the PLD caches)."""
    return (
        run.sampling_scheme,
        run.adjacency,
        run.p,
        run.L,
        run.b,
        run.sigma,
        run.T,
        run.clip,
    )


def _sgd_pld(run: Run, discretization: float = 1e-4) -> tuple[Any, str, str, dict[str, Any]]:
    """The composed PLD of a subsampled run (cached: gdp- and pld-composition share it)."""
    from lastiterate.notions.pld import tilt_delta_floor

    key = (*_mechanism_key(run), discretization, tilt_delta_floor())
    if key not in _PLD_CACHE:
        if len(_PLD_CACHE) > 32:
            _PLD_CACHE.clear()
        _PLD_CACHE[key] = _build_sgd_pld(run, discretization)
    pld_obj, theorem, reference, details = _PLD_CACHE[key]
    return pld_obj, theorem, reference, dict(details)


#: a composition whose certified bracket is wider than this (relative) is recomputed on a finer
#: grid: the default width 1e-4 cannot resolve an epsilon of the order of 1e-2 (tiny per-step
#: losses all fall into one bin), so the grid follows the accuracy the answer needs
_TARGET_BRACKET = 1e-2
_FINEST_DISCRETIZATION = 1e-7


class SgdPld(NamedTuple):
    """The composed PLD of a subsampled run, its provenance and its value at one query.

    Attributes:
        pld: the composed PLD (a :class:`~lastiterate.notions.pld.Pld` with its optimistic twin,
            or :class:`RevealedSamplingComposition`).
        theorem: the theorem the composition implements.
        reference: where it is proved.
        details: the run's parameters of the composition (a copy: callers may add to it).
        at_query: ``(upper, lower)`` of the value at the query, computed once: epsilon at
            ``query.delta`` or delta at ``query.epsilon``; ``lower`` (as the PLD returns it) is
            None without an optimistic twin.
    """

    pld: Any
    theorem: str
    reference: str
    details: dict[str, Any]
    at_query: tuple[float, Any]


def _sgd_pld_for_query(run: Run, query: Query) -> SgdPld:
    """:func:`_sgd_pld` on the default grid, refined (at most three times, each at most 100x, and
    only while the grid budget lets it be finer) until the bracket at the query is narrower than
    ``_TARGET_BRACKET``.  Every grid gives an upper bound; refining only tightens it.  The value
    at the query that chose the grid is returned with the PLD (:attr:`SgdPld.at_query`)."""
    # lazy: the PLD engine adds ~20 ms to every start-up and only sampled sgd needs it
    from lastiterate.notions.pld import delta_of_interest, max_grid_points

    with delta_of_interest(query.delta):
        if locating():
            return _locating_sgd_pld(run, query)
        # gdp- and pld-composition ask for the same run and query: one grid search, one value
        key = (
            *_mechanism_key(run),
            query.delta,
            query.epsilon,
            max_grid_points(),
        )
        found = _FOUND_CACHE.get(key)
        if found is None:
            found = _refined_sgd_pld(run, query)
            _FOUND_CACHE.clear()
            _FOUND_CACHE[key] = found
        return SgdPld(
            found.pld, found.theorem, found.reference, dict(found.details), found.at_query
        )


_FOUND_CACHE: dict[tuple[Any, ...], SgdPld] = {}


#: grid of the locating estimate (:func:`lastiterate.bounds.base.locating_estimates`): ten times
#: coarser than the reported compositions, no optimistic twin, not cached
_LOCATING_DISCRETIZATION = 1e-3
#: the locating grid of a Poisson-subsampled composition: its pessimism grows like the square of
#: the grid width and is ten times that of uniform batches (relative bracket 4-4.6% at 4e-4, see
#: :func:`_sized_discretization`), so at 1e-3 the estimate was 14-26% above the reported epsilon
#: at T = 5e6-1e7 (add/remove), above the RDP bound, and a calibration focused on the wrong bound
#: first; at 2.5e-4 it is 0.75% above (T = 5e6, delta = 1e-5) for 1.8x the cost of 1e-3
_LOCATING_DISCRETIZATION_POISSON = 2.5e-4


def _locating_discretization(run: Run) -> float:
    """The grid of :func:`_locating_sgd_pld` for ``run``."""
    if run.sampling_scheme == "poisson":
        return _LOCATING_DISCRETIZATION_POISSON
    return _LOCATING_DISCRETIZATION


def _locating_sgd_pld(run: Run, query: Query) -> SgdPld:
    """The composition on the coarse grid :func:`_locating_discretization` without its optimistic
    twin (a calibration's locating pass only; still pessimistic, but never reported)."""
    key = (*_mechanism_key(run), _window_tail())
    if key not in _LOCATING_CACHE:  # gdp- and pld-composition share it
        _LOCATING_CACHE.clear()
        _LOCATING_CACHE[key] = _build_sgd_pld(run, _locating_discretization(run), with_lower=False)
    pld_obj, theorem, reference, details = _LOCATING_CACHE[key]
    return SgdPld(pld_obj, theorem, reference, dict(details), _value_at(pld_obj, query))


_LOCATING_CACHE: dict[tuple[Any, ...], tuple[Any, str, str, dict[str, Any]]] = {}


#: a composition expected to need more grid points than this at width 1e-4 (a third of the
#: accountant's grid budget, ``ACCOUNTING_GRID_POINTS`` = 2**20) gets its grid from a pilot
#: (:func:`_sized_discretization`); shorter ones keep 1e-4, whose bracket is far inside the
#: target (paper 000's MNIST NoisySGD runs, at most 3.3e5 expected points at E = 200, keep it and
#: their agreement with the printed Table 4 to 2 decimals)
_PILOT_POINTS = 2**20 // 3
#: the pilot composes T // _PILOT_STEP_FRACTION steps on the grid _PILOT_DISCRETIZATION
_PILOT_STEP_FRACTION = 100
_PILOT_DISCRETIZATION = 4e-4
#: the relative bracket a sized grid aims at: 3/4 of ``_TARGET_BRACKET`` (near it, within it)
_SIZED_BRACKET = 0.75 * _TARGET_BRACKET
#: how much wider the relative bracket of T steps may be than the pilot's T/100 steps on the same
#: grid (measured 1.1x for Poisson, 1.27x for uniform batches from 1e5 to 1e7 steps)
_PILOT_WIDTH_GROWTH = 1.5


def _expected_points(run: Run, d: float) -> float:
    """A rough number of grid points of the T-fold composition at width ``d``: a mu-GDP privacy
    loss is N(mu^2/2, mu^2), and the Chernoff window spans about 16 mu, with mu the privacy
    CLT's estimate (inf where it overflows).  Only steers the choice of grid."""
    if run.sampling_scheme == "uniform":
        mu = clt_mu_symmetric(run.p, run.L / (run.b * run.sigma), run.T)
    else:
        per_step = 1.0 / _clip_noise_multiplier(run)
        if run.adjacency == "replace":
            per_step *= 2.0
        mu = clt_mu_poisson(run.p, per_step, run.T)
    return 16.0 * mu / d


def _sized_discretization(run: Run, query: Query) -> float:
    """The grid width to start a long composition with: the coarsest whose certified bracket is
    expected near ``_SIZED_BRACKET`` (never finer than 1e-4, the default).

    Measured (issue 11), the relative bracket width of these compositions grows like the square of
    the grid width and barely with T (at width 4e-4: 4.0%, 4.2%, 4.6% for Poisson add/remove at
    T = 1e4, 1e5, 1e7; 0.50%, 0.52%, 0.66% for uniform batches at T = 1e4 .. 1e7).  So a pilot
    of T // 100 steps on the grid ``_PILOT_DISCRETIZATION`` (about 1/40 of the points) predicts
    it: width ``w`` there gives ``d = d_pilot sqrt(target / (growth w))``.  The choice only steers
    cost and tightness: every grid gives an upper bound, and :func:`_refined_sgd_pld` still refines
    a grid whose bracket exceeds ``_TARGET_BRACKET``.  Shorter compositions (under
    ``_PILOT_POINTS`` expected points at 1e-4) and pilots without a usable bracket keep 1e-4.
    """
    default = 1e-4
    if run.sampling_scheme == "poisson" and run.adjacency == "replace" and run.clip is None:
        return default  # a closed-form mixture (RevealedSamplingComposition): no grid
    if not _expected_points(run, default) > _PILOT_POINTS:
        return default
    steps = max(1, run.T // _PILOT_STEP_FRACTION)
    pilot = _build_sgd_pld(run, _PILOT_DISCRETIZATION, steps=steps)[0]
    if not getattr(pilot, "has_lower", False):
        return default
    _, width = _bracket_width(pilot, _value_at(pilot, query))
    if not 0.0 < width < 0.5:
        return default
    d = pilot.discretization * math.sqrt(_SIZED_BRACKET / (_PILOT_WIDTH_GROWTH * width))
    return default if d <= default else min(d, 1e-2)


def _refined_sgd_pld(run: Run, query: Query) -> SgdPld:
    # lazy: the PLD engine (see _sgd_pld_for_query)
    from lastiterate.notions.pld.distribution import ACCOUNTING_GRID_POINTS

    d = _sized_discretization(run, query)
    found = _sgd_pld(run, d)
    at_query = _value_at(found[0], query)
    upper, width = _bracket_width(found[0], at_query)
    for _ in range(3):
        if width <= _TARGET_BRACKET or d <= _FINEST_DISCRETIZATION:
            break
        d_new = max(_FINEST_DISCRETIZATION, d * max(0.01, 0.5 * _TARGET_BRACKET / width))
        if _grid_points(found[0]) * d / d_new > ACCOUNTING_GRID_POINTS / 2:
            break  # a grid that fine would be coarsened back (or cost seconds): keep this one
        finer = _sgd_pld(run, d_new)
        at_query_new = _value_at(finer[0], query)
        upper_new, width_new = _bracket_width(finer[0], at_query_new)
        if not upper_new < upper:
            break  # FFT error bounds of a longer grid ate the gain: keep the tighter one
        d, found, at_query, upper, width = d_new, finer, at_query_new, upper_new, width_new
    return SgdPld(*found, at_query)


def _grid_points(pld_obj: Any) -> int:
    """Length of the composed PMF (0 for a closed form)."""
    pmf = getattr(pld_obj, "_remove", None)
    return 0 if pmf is None else len(pmf.probs)


def _value_at(pld_obj: Any, query: Query) -> tuple[float, Any]:
    """``(upper, lower)`` of the PLD's value at the query: epsilon at ``query.delta`` or delta at
    ``query.epsilon``; the certified bracket of a PLD with an optimistic twin (``has_lower``),
    else ``(value, None)``."""
    bracket = getattr(pld_obj, "has_lower", False)
    if query.delta is not None:
        if bracket:
            est = pld_obj.epsilon_with_error(query.delta)
            return float(est.upper), est.lower
        return float(pld_obj.epsilon(query.delta)), None
    assert query.epsilon is not None  # Query holds exactly one of delta and epsilon
    eps = float(query.epsilon)
    if bracket:
        upper, lower = pld_obj.delta_with_error(eps)
        return float(upper), lower
    return float(pld_obj.delta(eps)), None


def _bracket_width(pld_obj: Any, at_query: tuple[float, Any]) -> tuple[float, float]:
    """(upper, (upper - lower) / upper) of the certified bracket at the query (width 0 without a
    lower twin or for a non-finite or zero upper end)."""
    if not getattr(pld_obj, "has_lower", False):
        return 0.0, 0.0
    upper, lower = at_query
    if lower is None or not math.isfinite(upper) or upper <= 0.0:
        return upper, 0.0
    return upper, (upper - float(lower)) / upper


_PLD_CACHE: dict[tuple[Any, ...], tuple[Any, str, str, dict[str, Any]]] = {}


def forget_memos() -> None:
    """Forget the remembered composed PLDs (``_PLD_CACHE``, ``_FOUND_CACHE``): the next account
    recomputes them.  Changes speed only (tests compare the two paths)."""
    _FOUND_CACHE.clear()
    _PLD_CACHE.clear()


#: the composition window of a query at delta leaves out at most this fraction of delta (the
#: mass above the window goes to +inf and the mass below it moves up to the top bin, so it is
#: ADDED to delta: at most 1e-5 delta, far below the grid's error; 1e-4 was measured at +5e-6
#: relative on epsilon and 23% fewer grid points for Poisson add/remove at T = 1e7)
_WINDOW_TAIL_FRACTION = 1e-5


def _window_tail() -> float:
    """Tail mass the T-fold composition's Chernoff window may leave out: the engine's default
    (1e-15), or ``_WINDOW_TAIL_FRACTION`` of the delta of interest where that is larger (read
    from the tilt floor :func:`~lastiterate.notions.pld.tilt_delta_floor`, 1e-3 of it; a query
    by epsilon keeps 1e-15).  Any tail gives an upper bound (pessimistic truncation)."""
    from lastiterate.notions.pld import DEFAULT_TAIL_MASS_TRUNCATION, tilt_delta_floor

    return max(DEFAULT_TAIL_MASS_TRUNCATION, _WINDOW_TAIL_FRACTION / 1e-3 * tilt_delta_floor())


def _build_sgd_pld(
    run: Run, d: float, with_lower: bool = True, steps: int | None = None
) -> tuple[Any, str, str, dict[str, Any]]:
    """The composed PLD of ``steps`` (default ``run.T``) steps of a subsampled run on the grid
    ``d`` (coarsened by :func:`~lastiterate.notions.pld.on_feasible_grid` where too long), its
    theorem, reference and details."""
    # lazy: the PLD engine adds ~20 ms to every start-up and only sampled sgd needs it
    from lastiterate.notions import pld

    k = run.T if steps is None else steps
    tail = _window_tail()

    if run.sampling_scheme == "uniform":
        if run.adjacency != "replace":
            raise NotApplicable(
                "uniform fixed-size batches are analysed under replace-one adjacency (C_p operator)"
            )
        mu0 = run.L / (run.b * run.sigma)
        return (
            pld.on_feasible_grid(
                lambda w: pld.symmetric_subsampled_gaussian_pld(
                    run.p, mu0, discretization=w, with_lower=with_lower
                ).self_compose(k, tail_mass_truncation=tail),
                d,
            ),
            "Thm 4.8: C_p(G_mu)^{⊗T}",
            "Bok, Su, Altschuler 2024, Thm 4.8; Dong, Roth, Su 2022, Thm 9",
            {"per_step_mu": mu0, "sampling_rate": run.p, "compositions": run.T},
        )
    if run.adjacency == "replace" and run.clip is None:
        return _revealed_sampling_pld(run)
    z = _clip_noise_multiplier(run)
    return (
        pld.on_feasible_grid(
            lambda w: pld.poisson_subsampled_gaussian_pld(
                run.p, z, adjacency=run.adjacency, discretization=w, with_lower=with_lower
            ).self_compose(k, tail_mass_truncation=tail),
            d,
        ),
        "Poisson-subsampled Gaussian, T-fold composition",
        "Bu, Dong, Long, Su 2020 (paper 004), Sec. 3; dp_accounting PLD",
        {"noise_multiplier": z, "sampling_rate": run.p, "compositions": run.T},
    )


class RevealedSamplingComposition:
    """Poisson sampling under replace-one when only the sensitivity L = sup ||g - g'|| is known.

    The replace pair of one step is (1-q) R + q N(g) vs (1-q) R + q N(g') where R is the rest of the
    batch: without a bound on ||g|| itself (no clipping declared) the add/remove shift is unbounded
    and subsampling amplifies epsilon much less than for clipped gradients (an audit of a linear
    loss shows the clipped pair under-reports here).  Revealing which steps sampled the example is
    post-processing in reverse, so the transcript is dominated by: K ~ Binomial(T, q) steps, each a
    Gaussian mechanism G_{L/(b sigma)}, i.e.

        delta(eps) = sum_k P(K = k) * delta_G(eps; mu sqrt(k)),   mu = L/(b sigma)

    (docs/theorems.md 1.2 for delta_G).  Only the binomial's bulk is evaluated
    (:func:`binomial_bulk`): the range of K outside which each tail holds less than
    ``_TAIL_MASS``, found from the binomial's quantiles (so T = 1e7 steps cost a few thousand
    components, not 1e7).  Mass below 1e-30 of the largest inside that range, and both tails,
    are dropped and ADDED to delta (a component's delta is at most 1).  A bulk wider than
    ``_MAX_COMPONENTS`` values is grouped into consecutive bins, each charged with its LARGEST k:
    delta_G(eps; mu) increases with mu, so this is an upper bound on the mixture.
    """

    discretization = "none (exact binomial mixture of Gaussian profiles)"

    def __init__(self, T: int, q: float, mu: float) -> None:
        ks, w, dropped = binomial_bulk(T, q)
        keep = w >= 1e-30 * w.max()
        self._dropped = float(dropped + max(0.0, 1.0 - math.fsum(w[keep].tolist())))
        used = keep & (ks > 0)  # K = 0: the example never entered a batch (delta_G = 0)
        self._w = w[used]
        self._mus = mu * np.sqrt(ks[used].astype(float))

    def delta(self, epsilon: float) -> float:
        """The mixture's delta at ``epsilon`` (all components at once, summed exactly)."""
        return self._exact(self._parts(epsilon))

    def _parts(self, epsilon: float) -> np.ndarray:
        """The components' contributions ``w_k delta_G(epsilon; mu sqrt(k))``."""
        if not epsilon >= 0:
            raise ParameterError("epsilon", epsilon, "must be >= 0")
        return self._w * _gdp_delta_unchecked(np.asarray(float(epsilon)), self._mus)

    def _exact(self, parts: np.ndarray) -> float:
        """``min(1, dropped + sum(parts))``, the sum correctly rounded (``math.fsum``)."""
        return min(1.0, math.fsum([self._dropped, *parts.tolist()]))

    def _side(self, epsilon: float, delta: float) -> float:
        """Which side of ``delta`` (``0 < delta < 1``) ``self.delta(epsilon)`` lies on, from
        numpy's sum where it decides it: +inf (certainly above), -inf (certainly below), else the
        exact value itself (also NaN).  The components are non-negative, so the floating sum of
        the n terms (and the dropped mass) is within ``gamma = n u / (1 - n u)`` relative of
        their exact sum S (u = 2^-53; Higham 2002, section 4.2, for any order of summation); when
        it puts S above ``delta (1 + 4u)`` (below ``delta (1 - 4u)``), the correctly rounded S,
        and so its minimum with 1, is above (below) delta.  ``math.fsum`` of the few thousand
        components of a long run is most of the cost of one evaluation, and the first two phases
        of :meth:`epsilon` only compare."""
        parts = self._parts(epsilon)
        u = 2.0**-53
        n = len(parts) + 1
        gamma = n * u / (1.0 - n * u)
        approx = self._dropped + float(np.sum(parts))
        if approx / (1.0 + 2.0 * gamma) > delta * (1.0 + 4.0 * u):
            return math.inf
        if approx / (1.0 - 2.0 * gamma) < delta * (1.0 - 4.0 * u):
            return -math.inf
        return self._exact(parts)

    def epsilon(self, delta: float) -> float:
        """Smallest ``epsilon >= 0`` with ``delta(epsilon) <= delta``: the steps and the answer
        of ``smallest_epsilon(self.delta, delta, max_epsilon=1e6)``
        (:func:`lastiterate.notions.gdp.smallest_epsilon`: 0 if it holds at 0, a bracket
        doubling from 1, Brent's method on ``delta(e) - delta``, the bracket's non-positive
        end), with the tests of the first two phases read from :meth:`_side` (the same answers,
        NaN included; Brent's method reads the exact values)."""
        if not 0.0 < delta < 1.0:  # (the reference path's answer for such a delta)
            return smallest_epsilon(self.delta, delta, max_epsilon=1e6)
        if self._side(0.0, delta) <= delta:
            return 0.0
        hi = 1.0
        while self._side(hi, delta) > delta:
            hi *= 2.0
            if hi > 1e6 or not math.isfinite(hi):
                return math.inf
        root = brent_root(lambda e: self.delta(e) - delta, 0.0, hi, xtol=1e-14)
        return root.nonpositive_end


#: each binomial tail left out of :class:`RevealedSamplingComposition` holds at most this mass
#: (added to delta)
_TAIL_MASS = 1e-30
#: the most mixture components evaluated; a wider binomial bulk is grouped into bins
_MAX_COMPONENTS = 8192


def binomial_bulk(T: int, q: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The bulk of Binomial(T, q): ``(k, w, tails)`` where ``w[i]`` is the probability of the
    i-th value or bin (charged at its largest value ``k[i]``) and ``tails`` (an upper bound on the
    mass outside ``[k[0], k[-1]]``, at most ``2 _TAIL_MASS``) is to be ADDED to delta.

    The range is cut where the Chernoff-Hoeffding bound ``P(K <= k) <= exp(-T KL(k/T || q))``
    (k <= Tq; symmetrically ``P(K >= k)`` for k >= Tq) falls below ``_TAIL_MASS``; that bound,
    not an estimate, is what ``tails`` adds.  Up to ``_MAX_COMPONENTS`` values the masses are
    scipy's point probabilities; beyond, ``_MAX_COMPONENTS`` consecutive bins with their masses
    from CDF differences (a bin charged at its largest k is an upper bound for any quantity that
    increases with k).
    """
    lo, lower_tail = _chernoff_cut(T, q, upper=False)
    hi, upper_tail = _chernoff_cut(T, q, upper=True)
    tails = lower_tail + upper_tail
    if hi - lo + 1 <= _MAX_COMPONENTS:
        ks = np.arange(lo, hi + 1)
        return ks, _binomial_pmf(ks, T, q), tails
    edges = sorted_unique(np.linspace(lo - 1, hi, _MAX_COMPONENTS + 1).round().astype(np.int64))
    cdf = _binomial_cdf(edges, T, q)  # bin i holds k in (edges[i], edges[i + 1]]
    return edges[1:], np.maximum(np.diff(cdf), 0.0), tails


def _boost_binomial() -> tuple[Any, Any]:
    """The Boost ufuncs behind ``scipy.stats.binom``'s pmf and cdf (``scipy.special._ufuncs``:
    ``_binom_pmf(k, n, p)``, ``_binom_cdf(k, n, p)``), or None where this SciPy has none.
    Importing them costs ``scipy.special`` (about a quarter of the time of ``scipy.stats``,
    whose import was a second of a command's start-up on a loaded machine, issue 11)."""
    try:
        from scipy.special import _ufuncs  # lazy: only this mixture needs SciPy
    except ImportError:  # pragma: no cover - every supported SciPy has the module
        return None, None
    return getattr(_ufuncs, "_binom_pmf", None), getattr(_ufuncs, "_binom_cdf", None)


def _binomial_pmf(ks: np.ndarray, T: int, q: float) -> np.ndarray:
    """``scipy.stats.binom(T, q).pmf(ks)`` for integers ``ks`` (``T >= 1``, ``0 <= q <= 1``),
    the same numbers (tested): Boost's pmf clipped to [0, 1] inside the support, 0 outside, as
    ``rv_discrete.pmf`` does; through ``scipy.stats`` itself where the ufunc is missing."""
    pmf, _ = _boost_binomial()
    if pmf is None:  # pragma: no cover - depends on the SciPy version
        from scipy import stats

        return np.asarray(stats.binom(T, q).pmf(ks), dtype=float)
    out = np.zeros(len(ks))
    ok = (ks >= 0) & (ks <= T)
    out[ok] = np.clip(pmf(ks[ok].astype(np.float64), float(T), float(q)), 0, 1)
    return out


def _binomial_cdf(ks: np.ndarray, T: int, q: float) -> np.ndarray:
    """``scipy.stats.binom(T, q).cdf(ks)`` for integers ``ks``, the same numbers (tested):
    Boost's cdf at ``floor(k)`` clipped to [0, 1] for ``0 <= k < T``, 1 from T on, 0 below 0, as
    ``rv_discrete.cdf`` does; through ``scipy.stats`` itself where the ufunc is missing."""
    _, cdf = _boost_binomial()
    if cdf is None:  # pragma: no cover - depends on the SciPy version
        from scipy import stats

        return np.asarray(stats.binom(T, q).cdf(ks), dtype=float)
    out = np.zeros(len(ks))
    out[ks >= T] = 1.0
    ok = (ks >= 0) & (ks < T)
    out[ok] = np.clip(cdf(np.floor(ks[ok]).astype(np.float64), float(T), float(q)), 0, 1)
    return out


def _binomial_chernoff_exponent(T: int, q: float, k: int) -> float:
    """``T KL(k/T || q)``, the exponent of the Chernoff-Hoeffding bound on a binomial tail
    beyond k (``inf`` for an impossible k)."""
    a = k / T
    term1 = 0.0 if k == 0 else (a * math.log(a / q) if q > 0 else math.inf)
    if k == T:
        term2 = 0.0
    elif q >= 1.0:
        term2 = math.inf
    else:
        term2 = (1 - a) * (math.log1p(-a) - math.log1p(-q))
    return T * (term1 + term2)


def _chernoff_cut(T: int, q: float, *, upper: bool) -> tuple[int, float]:
    """The end of the binomial's bulk on one side and the mass beyond it (a Chernoff bound, at
    most ``_TAIL_MASS``): lower side ``(lo, bound on P(K < lo))``, upper side ``(hi, bound on
    P(K > hi))``.  Bisection on the integers between the mean and 0 (or T), where the exponent
    is monotone."""
    need = -math.log(_TAIL_MASS)
    mean = T * q
    if upper:
        near, far = min(T, math.ceil(mean)), T
    else:
        near, far = max(0, math.floor(mean)), 0
    g_far = _binomial_chernoff_exponent(T, q, far)
    if g_far < need:  # even the extreme value is not rare enough: keep the whole side
        return far, 0.0
    # invariant: exponent(near) < need <= exponent(far) (near: the mean, exponent 0 or tiny)
    if _binomial_chernoff_exponent(T, q, near) >= need:
        far, g_far = near, _binomial_chernoff_exponent(T, q, near)
        return (far - 1, math.exp(-g_far)) if upper else (far + 1, math.exp(-g_far))
    while abs(far - near) > 1:
        mid = (near + far) // 2
        g = _binomial_chernoff_exponent(T, q, mid)
        if g >= need:
            far, g_far = mid, g
        else:
            near = mid
    # every value beyond ``near`` is at least as far as ``far``: P(K beyond near) <= exp(-g_far)
    return near, math.exp(-g_far)


def _revealed_sampling_pld(run: Run) -> tuple[Any, str, str, dict[str, Any]]:
    mu0 = run.L / (run.b * run.sigma)
    return (
        RevealedSamplingComposition(run.T, run.p, mu0),
        "Poisson sampling, replace-one, sensitivity only: revealed-sampling Gaussian mixture",
        "post-processing + Dong, Roth, Su 2022 Gaussian composition",
        {
            "per_step_mu": mu0,
            "sampling_rate": run.p,
            "compositions": run.T,
            "note": "no clip norm declared: per-example gradient norms unbounded, so no "
            "amplification of epsilon is claimed",
        },
    )


def _pld_to_result(bound_id: str, found: SgdPld, run: Run, query: Query) -> Result:
    """The result of a composed PLD at the query, from the value it was chosen with
    (:attr:`SgdPld.at_query`), with the certified bracket where the PLD has an optimistic twin."""
    pld_obj = found.pld
    det = dict(found.details)
    bracket = getattr(pld_obj, "has_lower", False)
    value, lower = found.at_query
    if query.delta is not None:
        delta = query.delta
        eps = value
        if bracket:
            det.update(_epsilon_bracket(eps, lower))
    else:
        assert query.epsilon is not None  # Query holds exactly one of delta and epsilon
        eps = float(query.epsilon)
        delta = value
        if bracket:
            det.update(
                {"delta_upper": delta, "delta_lower": None if lower is None else float(lower)}
            )
    det["discretization"] = getattr(pld_obj, "discretization", None)
    err = getattr(pld_obj, "error", None)
    if err is not None:
        # every reported value is pessimistic: rounded up on a grid of this width, with this much
        # truncated mass already added to delta
        det["truncation_mass"] = float(err.truncation_mass)
        det["error"] = (
            "pessimistic discretisation and FFT error bound: an upper bound; epsilon_lower (from "
            "the optimistic PLD) is a certified lower bound on the exact epsilon of the same "
            "mechanism"
        )
    return Result(
        bound=bound_id,
        theorem=found.theorem,
        reference=found.reference,
        kind="bound",
        epsilon=eps,
        delta=delta,
        mu=None,
        rdp=None,
        details=det,
        assumptions=(ANY_LOSS, f"sampling={run.sampling_scheme}"),
        adjacency=run.adjacency,
    )


def _epsilon_bracket(upper: float, lower: float | None) -> dict[str, Any]:
    """``epsilon_upper`` (reported), ``epsilon_lower`` and their relative width (JSON-safe)."""
    if lower is None or not math.isfinite(upper):
        return {
            "epsilon_upper": upper if math.isfinite(upper) else None,
            "epsilon_lower": lower,
            "epsilon_bracket_relative_width": None,
        }
    width = 0.0 if upper == 0.0 else (upper - lower) / upper
    return {
        "epsilon_upper": upper,
        "epsilon_lower": float(lower),
        "epsilon_bracket_relative_width": width,
    }


def _sgd_pld_result(bound_id: str, run: Run, query: Query) -> Result:
    mu_full = _full_batch_gaussian_mu(run)
    if mu_full is not None:
        return _full_batch_result(bound_id, mu_full, run, query)
    found = _sgd_pld_for_query(run, query)
    if run.sampling_scheme == "uniform":
        found.details["clt_mu_estimate"] = clt_mu_symmetric(
            run.p, run.L / (run.b * run.sigma), run.T
        )
    return _pld_to_result(bound_id, found, run, query)


@register(
    "pld-composition",
    theorem="numerical PLD composition",
    reference="dp_accounting PLD (Doroshenko et al. 2022, connect-the-dots)",
)
def pld_composition(run: Run, query: Query) -> Result:
    """Privacy-loss-distribution composition of every step's mechanism (pessimistic grid)."""

    if run.algorithm == "sgd" and run.sampling_scheme != "shuffle":
        mu_full = _full_batch_gaussian_mu(run)
        if mu_full is not None:
            return _full_batch_result("pld-composition", mu_full, run, query)
        found = _sgd_pld_for_query(run, query)
    else:
        # The privacy-loss distribution of G_mu composed k times is exactly that of G_{mu sqrt(k)}
        # (the Gaussian PLD is N(mu^2/2, mu^2) and normals add), so no discretisation is needed.
        return _gaussian_composition_result(
            run,
            query,
            bound_id="pld-composition",
            theorem="Gaussian PLD composed over the steps using the example",
            reference=(
                "Dong, Roth, Su 2022 (Gaussian PLD N(mu^2/2, mu^2) is closed under composition)"
            ),
            discretization="none (analytic PLD)",
        )
    return _pld_to_result("pld-composition", found, run, query)


@register(
    "rdp-composition",
    theorem="RDP composition",
    reference="Mironov 2017; Mironov, Talwar, Zhang 2019",
)
def rdp_composition(run: Run, query: Query) -> Result:
    """RDP of the (sampled) Gaussian mechanism, composed over the steps that may use the example.

    gd / cgd / shuffle: uses * alpha mu^2 / 2.  sgd with Poisson batches under add/remove adjacency:
    T * (sampled-Gaussian RDP, the max of both directions; docs/theorems.md 1.9).  Other subsampled
    cases are refused (no RDP amplification theorem for them is implemented).
    """
    if run.algorithm != "sgd" or run.sampling_scheme == "shuffle":
        mu0, uses = _gaussian_uses(run)
        rho = uses * mu0**2 / 2
        return rdp_result(
            "rdp-composition",
            theorem="Gaussian RDP composition",
            reference="Mironov 2017, Prop. 7",
            rdp=lambda a: rho * a,
            query=query,
            run=run,
            linear_rho=rho,
            assumptions=(ANY_LOSS,),
            details={"per_step_mu": mu0, "compositions": uses},
        )
    if run.sampling_scheme != "poisson" or run.adjacency != "add-remove":
        raise NotApplicable(
            "sampled-Gaussian RDP is implemented for Poisson sampling under add/remove adjacency; "
            f"this run has sampling={run.sampling_scheme}, adjacency={run.adjacency} "
            "(see pld-composition)"
        )
    z = _clip_noise_multiplier(run)
    T = run.T
    # (np.union1d is np.unique of the concatenation, which imports numpy.ma: 40 ms of a command)
    report = np.asarray(query.report_orders, dtype=float)
    orders = sorted_unique(np.concatenate([DEFAULT_ORDERS, report]))
    if locating():  # a calibration's locating pass: integer orders (closed form) and the report's
        orders = sorted_unique(np.concatenate([orders[orders == np.round(orders)], report]))
    curve = RdpCurve.from_sampled_gaussian(run.p, z, T, orders=orders)
    return rdp_result(
        "rdp-composition",
        theorem="sampled Gaussian RDP composition",
        reference="Mironov, Talwar, Zhang 2019; Altschuler, Talwar 2022, Def. 2.10",
        rdp=curve,
        query=query,
        run=run,
        assumptions=(ANY_LOSS, "Poisson sampling", "add/remove adjacency"),
        details={"noise_multiplier": z, "sampling_rate": run.p, "compositions": T},
    )


@register(
    "clt",
    theorem="privacy CLT",
    reference="Dong, Roth, Su 2022; Bu et al. 2020 eq. 3.1; paper 000 Lemma A.5",
    kind="estimate",
    algorithms=("sgd",),
)
def clt(run: Run, query: Query) -> Result:
    """CLT approximation mu of the subsampled-Gaussian composition (an ESTIMATE, not a bound).

    Symmetric (uniform batches): sqrt(2) p sqrt(T h(mu0)); one-sided Poisson:
    p sqrt(T (e^{mu0^2} - 1)).
    """
    mu0 = run.L / (run.b * run.sigma)
    if run.sampling_scheme == "uniform":
        mu, name = clt_mu_symmetric(run.p, mu0, run.T), "symmetric CLT (Lemma A.5)"
    elif run.sampling_scheme == "poisson":
        mu0 = 1.0 / _clip_noise_multiplier(run) if run.adjacency == "add-remove" else mu0
        mu, name = clt_mu_poisson(run.p, mu0, run.T), "one-sided Poisson CLT (eq. 3.1)"
    else:
        raise NotApplicable("no CLT for shuffled batches")
    if not math.isfinite(mu):
        raise NotApplicable("CLT parameter overflows (per-step mu too large for the approximation)")
    return gdp_result(
        "clt",
        theorem=name,
        reference="Bu, Dong, Long, Su 2020; Dong, Roth, Su 2022",
        mu=mu,
        query=query,
        run=run,
        kind="estimate",
        assumptions=("asymptotic: p sqrt(T) -> const; NOT a guarantee at finite T",),
        details={"per_step_mu": mu0, "sampling_rate": run.p, "steps": run.T},
    )
