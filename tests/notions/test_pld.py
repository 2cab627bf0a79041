"""Tests of lastiterate.notions.pld: numerical composition with rigorous discretisation error.

Reference values and where they come from:

* Gaussian: the exact profile delta(eps; mu) (docs/theorems.md 1.2), root-found independently here.
* Poisson-subsampled Gaussian, add/remove: dp_accounting's PLDAccountant on PoissonSampledDpEvent
  (same connect-the-dots construction, so agreement to ~1e-6 relative) and prv_accountant's
  certified [lower, upper] bracket; peers.md 2 reference interval [0.5976, 0.5987] at
  q = 256/60000, z = 1.1, T = 1000, delta = 1e-5.
* Replace-one: direct numerical integration of int (p - e^eps q)_+ for the mixture pair, q = 1
  reduces to G_{2/z}, and prv_accountant fed with an independently computed CDF of the loss.
* C_p(G_mu): paper 000 Table 4 (p = 0.025, mu = 2/3, T = 2000/4000/8000 -> 4.438/6.654/10.113),
  the PRV CDF of docs/theorems.md 1.8 (implemented below, not in the library) fed to prv_accountant,
  and the identity delta(eps) = int_eps^inf e^{eps - t} (1 - F_Y(t)) dt against the closed form.

Tolerances: the connect-the-dots discretisation at Delta = 1e-4 moves epsilon by ~1e-8 relative
for a Gaussian and ~1e-5 relative for subsampled mechanisms; upper values must never be below the
exact value (up to 1e-9 relative float slack) and lower values never above it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize, special, stats

from lastiterate.errors import ParameterError
from lastiterate.notions import pld as P

DELTA = 1e-5
Q_MNIST = 256 / 60000


def exact_gaussian_epsilon(mu: float, delta: float) -> float:
    """Independent root of Phi(-e/mu + mu/2) - e^e Phi(-e/mu - mu/2) = delta (scipy.stats)."""

    def f(e: float) -> float:
        return (
            stats.norm.cdf(-e / mu + mu / 2)
            - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2)
            - delta
        )

    return optimize.brentq(f, 0.0, 200.0, xtol=1e-14, rtol=1e-15)


# --------------------------------------------------------------------------------------------
# A PRV (Gopi et al.) of C_p(G_mu) for prv_accountant, docs/theorems.md 1.8 (float64 version)
# --------------------------------------------------------------------------------------------


def _prv_classes():
    from prv_accountant.privacy_random_variables import PrivacyRandomVariable

    class SymmetricSubsampledGaussianPRV(PrivacyRandomVariable):
        """F_Y(t) = p Phi(a(t)/mu - mu/2) + (1-p) Phi(a(t)/mu + mu/2) (t > 0),
        Phi(-a(-t)/mu - mu/2) (t <= 0), a(u) = log((p - 1 + e^u)/p)."""

        def __init__(self, p: float, mu: float) -> None:
            self.p = float(p)
            self.mu = float(mu)

        def _a(self, u: np.ndarray) -> np.ndarray:
            p = self.p
            small = u < 1.0
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                a1 = np.log1p(np.expm1(np.where(small, u, 0.0)) / p)
                a2 = u + np.log1p(-(1 - p) * np.exp(-np.where(small, 1.0, u))) - math.log(p)
            return np.where(small, a1, a2)

        def cdf(self, t):
            t = np.asarray(t, dtype=float)
            p, mu = self.p, self.mu
            pos = t > 0
            ap = self._a(np.where(pos, t, 0.0))
            an = self._a(np.where(pos, 0.0, -t))
            fp = p * special.ndtr(ap / mu - mu / 2) + (1 - p) * special.ndtr(ap / mu + mu / 2)
            fn = special.ndtr(-an / mu - mu / 2)
            return np.where(pos, fp, fn)

    class ReplaceOnePoissonPRV(PrivacyRandomVariable):
        """Loss of P = qN(-1, z^2) + (1-q)N(0, z^2) vs Q = qN(1, z^2) + (1-q)N(0, z^2) under P.

        L(x) decreases in x; F(t) = P(L <= t) = 1 - P_cdf(x_t) with x_t found by bisection
        (independent of the arcsinh inverse used by the library and dp_accounting)."""

        def __init__(self, q: float, z: float) -> None:
            self.q = float(q)
            self.z = float(z)

        def _loss(self, x: np.ndarray) -> np.ndarray:
            q, z = self.q, self.z
            lp = np.logaddexp(
                math.log(q) + stats.norm.logpdf(x, -1, z),
                math.log1p(-q) + stats.norm.logpdf(x, 0, z),
            )
            lq = np.logaddexp(
                math.log(q) + stats.norm.logpdf(x, 1, z),
                math.log1p(-q) + stats.norm.logpdf(x, 0, z),
            )
            return lp - lq

        def cdf(self, t):
            scalar = np.ndim(t) == 0
            t = np.atleast_1d(np.asarray(t, dtype=float))
            lo = np.full_like(t, -60.0)
            hi = np.full_like(t, 60.0)
            for _ in range(80):
                mid = (lo + hi) / 2
                go_right = self._loss(mid) > t
                lo = np.where(go_right, mid, lo)
                hi = np.where(go_right, hi, mid)
            x = (lo + hi) / 2
            q, z = self.q, self.z
            p_cdf = q * special.ndtr((x + 1) / z) + (1 - q) * special.ndtr(x / z)
            out = 1.0 - p_cdf
            return float(out[0]) if scalar else out

    return SymmetricSubsampledGaussianPRV, ReplaceOnePoissonPRV


def prv_epsilon(
    prv: object, steps: int, eps_error: float, eps_max: float | None = None
) -> tuple[float, float, float]:
    import warnings

    from prv_accountant import PRVAccountant

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acc = PRVAccountant(
            prvs=[prv],
            eps_error=eps_error,
            delta_error=1e-10,
            max_self_compositions=[steps],
            eps_max=eps_max,
        )
        return tuple(float(x) for x in acc.compute_epsilon(DELTA, [steps]))  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------
# Gaussian
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mu", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-9])
def test_gaussian_pld_matches_exact_and_brackets_it(mu: float, delta: float) -> None:
    exact = exact_gaussian_epsilon(mu, delta)
    est = P.gaussian_pld(mu, with_lower=True).epsilon_with_error(delta)
    # pessimistic: never below the exact value (float slack 1e-9 relative)
    assert est.upper >= exact * (1 - 1e-9)
    assert est.lower is not None and est.lower <= exact * (1 + 1e-9)
    # connect-the-dots error at Delta = 1e-4 is second order: measured < 1e-7 relative
    assert est.upper - exact <= 1e-6 * max(1.0, exact)
    assert est.upper - est.lower <= 1e-6 * max(1.0, exact)


def test_gaussian_delta_closed_form_and_symmetry() -> None:
    for mu in (0.5, 1.0, 3.0):
        for eps in (0.0, 0.3, 2.0, 9.0):
            ref = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(
                -eps / mu - mu / 2
            )
            assert P.gaussian_delta(eps, mu) == pytest.approx(ref, rel=1e-9, abs=1e-300)
            # delta(-x) = 1 - e^{-x} + e^{-x} delta(x) (symmetric tradeoff function)
            back = P.gaussian_delta(-eps, mu)
            assert back == pytest.approx(1 - math.exp(-eps) + math.exp(-eps) * ref, rel=1e-12)
    assert P.gaussian_delta(1.0, 0.0) == 0.0
    # deep tail keeps relative precision (naive difference would return 0 or garbage)
    tail = P.gaussian_delta(60.0, 1.0)
    assert 0.0 < tail < 1e-300 or tail == pytest.approx(0.0, abs=1e-300)


def test_gaussian_composition_is_gaussian() -> None:
    # G_a ⊗ G_b = G_sqrt(a^2 + b^2)
    a, b = 0.6, 0.8
    composed = P.gaussian_pld(a).compose(P.gaussian_pld(b))
    exact = exact_gaussian_epsilon(1.0, DELTA)
    assert composed.epsilon(DELTA) >= exact * (1 - 1e-9)
    assert composed.epsilon(DELTA) == pytest.approx(exact, rel=1e-6)
    # k-fold: G_mu^{⊗k} = G_{mu sqrt(k)}
    g = P.gaussian_pld(0.1).self_compose(100)
    assert g.epsilon(DELTA) == pytest.approx(exact, rel=1e-5)
    assert g.epsilon(DELTA) >= exact * (1 - 1e-9)


@settings(max_examples=15, deadline=None)
@given(mu=st.floats(0.05, 4.0), log_delta=st.floats(-12.0, -2.0))
def test_property_gaussian_bracket(mu: float, log_delta: float) -> None:
    delta = 10.0**log_delta
    exact = exact_gaussian_epsilon(mu, delta) if P.gaussian_delta(0.0, mu) > delta else 0.0
    est = P.gaussian_pld(mu, discretization=1e-3, with_lower=True).epsilon_with_error(delta)
    assert est.lower is not None
    assert est.lower <= exact + 1e-9 <= est.upper + 2e-9
    assert not math.isnan(est.upper) and est.upper >= 0.0


# --------------------------------------------------------------------------------------------
# Poisson-subsampled Gaussian (DP-SGD)
# --------------------------------------------------------------------------------------------


def test_poisson_add_remove_matches_dp_accounting_accountant() -> None:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    for z in (0.7, 1.1):
        acc = pld_privacy_accountant.PLDAccountant(
            dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-4
        )
        event = dp_accounting.PoissonSampledDpEvent(Q_MNIST, dp_accounting.GaussianDpEvent(z))
        acc.compose(dp_accounting.SelfComposedDpEvent(event, 1000))
        ref = acc.get_epsilon(DELTA)
        ours = P.poisson_subsampled_gaussian_pld(Q_MNIST, z).self_compose(1000).epsilon(DELTA)
        # same grid and connect-the-dots formula; ours adds a certified bound on the FFT round-off
        # (a few 1e-6 relative here), dp_accounting's does not: never below, barely above
        assert ref * (1.0 - 1e-9) <= ours <= ref * (1.0 + 1e-5)


def test_poisson_add_remove_reference_interval_and_bracket() -> None:
    est = P.poisson_subsampled_gaussian_epsilon(Q_MNIST, 1.1, 1000, DELTA, with_lower=True)
    # peers.md 2: the true epsilon lies in [0.5976, 0.5987]; dp_accounting PLD 1e-5 gives 0.5987
    assert 0.5976 <= est.upper <= 0.5987 + 5e-5
    assert est.lower is not None and 0.5976 - 1e-4 <= est.lower <= est.upper
    # our certified bracket is much tighter than the reference interval
    assert est.upper - est.lower < 2e-4


def test_poisson_add_remove_within_prv_accountant_bracket() -> None:
    from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism

    lo, mid, hi = prv_epsilon(
        PoissonSubsampledGaussianMechanism(Q_MNIST, 1.1), 1000, eps_error=0.01
    )
    est = P.poisson_subsampled_gaussian_epsilon(Q_MNIST, 1.1, 1000, DELTA, with_lower=True)
    assert lo <= est.upper <= hi
    assert est.lower is not None and est.lower <= hi
    assert est.upper == pytest.approx(mid, abs=2e-4)  # prv estimate is the midpoint of its bracket


def test_poisson_one_step_pmf_equals_dp_accounting_construction() -> None:
    from dp_accounting.pld import privacy_loss_distribution as pldm

    ours = P.poisson_subsampled_gaussian_pld(Q_MNIST, 1.1)
    ref = pldm.from_gaussian_mechanism(1.1, sampling_prob=Q_MNIST)
    for eps in (-0.002, 0.0, 0.005, 0.05, 0.5, 2.0):
        assert ours.delta(eps) == pytest.approx(ref.get_delta_for_epsilon(eps), rel=1e-8, abs=1e-20)
    assert ours.epsilon(DELTA) == pytest.approx(ref.get_epsilon_for_delta(DELTA), rel=1e-9)


def test_poisson_sampling_rate_one_is_gaussian() -> None:
    exact = exact_gaussian_epsilon(1 / 1.5, DELTA)
    assert P.poisson_subsampled_gaussian_pld(1.0, 1.5).epsilon(DELTA) == pytest.approx(
        exact, rel=1e-6
    )


# --------------------------------------------------------------------------------------------
# Replace-one adjacency (dp_accounting REPLACE_ONE semantics, issue #378)
# --------------------------------------------------------------------------------------------


def _replace_delta_by_quadrature(q: float, z: float, eps: float) -> float:
    def f(x: float) -> float:
        p = q * stats.norm.pdf(x, -1, z) + (1 - q) * stats.norm.pdf(x, 0, z)
        qq = q * stats.norm.pdf(x, 1, z) + (1 - q) * stats.norm.pdf(x, 0, z)
        return max(p - math.exp(eps) * qq, 0.0)

    return integrate.quad(
        f, -12 * z - 2, 12 * z + 2, points=[0.0], limit=500, epsabs=1e-16, epsrel=1e-12
    )[0]


def test_replace_one_single_step_against_quadrature() -> None:
    q, z = 0.01, 1.0
    pld = P.poisson_subsampled_gaussian_pld(q, z, adjacency="replace", with_lower=True)
    assert pld.symmetric
    for eps in (0.0, 0.01, 0.05, 0.1, 0.3):
        ref = _replace_delta_by_quadrature(q, z, eps)
        up, lo = pld.delta_with_error(eps)
        assert up >= ref * (1 - 1e-7)
        assert lo is not None and lo <= ref * (1 + 1e-7)
        assert up == pytest.approx(ref, rel=1e-5)


def test_replace_one_noise_multiplier_convention() -> None:
    # q = 1: the sum moves by 2C, so z is a Gaussian of mu = 2/z (not 1/z)
    exact = exact_gaussian_epsilon(2 / 2.0, DELTA)
    assert P.poisson_subsampled_gaussian_pld(1.0, 2.0, adjacency="replace").epsilon(
        DELTA
    ) == pytest.approx(exact, rel=1e-6)
    # replace-one is never more private than add/remove
    a = P.poisson_subsampled_gaussian_pld(0.02, 1.0).self_compose(100).epsilon(DELTA)
    r = (
        P.poisson_subsampled_gaussian_pld(0.02, 1.0, adjacency="replace")
        .self_compose(100)
        .epsilon(DELTA)
    )
    assert r > a


def test_replace_one_matches_dp_accounting_and_independent_prv() -> None:
    from dp_accounting import NeighboringRelation
    from dp_accounting.pld import privacy_loss_distribution as pldm

    q, z, steps = 0.01, 1.0, 100
    ours = (
        P.poisson_subsampled_gaussian_pld(q, z, adjacency="replace")
        .self_compose(steps)
        .epsilon(DELTA)
    )
    ref = pldm.from_gaussian_mechanism(
        z, sampling_prob=q, neighboring_relation=NeighboringRelation.REPLACE_ONE
    )
    assert ours == pytest.approx(ref.self_compose(steps).get_epsilon_for_delta(DELTA), rel=1e-6)
    _, replace_prv = _prv_classes()
    lo, _, hi = prv_epsilon(replace_prv(q, z), steps, eps_error=0.01, eps_max=10.0)
    assert lo <= ours <= hi


# --------------------------------------------------------------------------------------------
# Symmetric subsampled Gaussian C_p(G_mu)
# --------------------------------------------------------------------------------------------


def test_symmetric_single_step_profile_identity_with_prv_cdf() -> None:
    """Closed form delta(eps) = p delta_G(eps') equals int_eps^inf e^{eps-t}(1 - F_Y(t)) dt."""
    sym_prv, _ = _prv_classes()
    p, mu = 0.025, 2 / 3
    prv = sym_prv(p, mu)
    for eps in (0.0, 0.05, 0.5, 1.5):
        integral = integrate.quad(
            lambda t, e=eps: math.exp(e - t) * (1.0 - float(prv.cdf(t))),
            eps,
            eps + 40,
            limit=400,
            epsabs=1e-17,
        )[0]
        assert P.symmetric_subsampled_gaussian_delta(eps, p, mu) == pytest.approx(
            integral, rel=1e-6
        )
    # symmetry: delta(-x) = 1 - e^{-x} + e^{-x} delta(x)
    x = 0.3
    d = P.symmetric_subsampled_gaussian_delta(x, p, mu)
    assert P.symmetric_subsampled_gaussian_delta(-x, p, mu) == pytest.approx(
        1 - math.exp(-x) + math.exp(-x) * d, rel=1e-12
    )


def test_symmetric_single_step_pld_dominates_closed_form() -> None:
    p, mu = 0.025, 2 / 3
    pld = P.symmetric_subsampled_gaussian_pld(p, mu, with_lower=True)
    grid = np.linspace(-1.0, 3.0, 81)
    for eps in grid:
        exact = P.symmetric_subsampled_gaussian_delta(eps, p, mu)
        up, lo = pld.delta_with_error(float(eps)) if eps >= 0 else (None, None)
        if up is None:
            continue
        assert up >= exact * (1 - 1e-9) - 1e-300
        assert lo is not None and lo <= exact * (1 + 1e-9) + 1e-300
        # chord error of connect-the-dots: second order in Delta, tiny relative to delta; above
        # the cut (delta <= e^-50) the profile is the mass sent to +inf
        assert up - exact <= 1e-6 * exact + pld.error.truncation_mass


def test_symmetric_table4_T2000_and_prv_bracket() -> None:
    p, mu = 0.025, 2 / 3
    est = (
        P.symmetric_subsampled_gaussian_pld(p, mu, with_lower=True)
        .self_compose(2000)
        .epsilon_with_error(DELTA)
    )
    assert est.upper == pytest.approx(4.438, abs=0.01)  # paper 000 Table 4 prints 4.44
    assert est.lower is not None and est.upper - est.lower < 1e-4
    sym_prv, _ = _prv_classes()
    lo, mid, hi = prv_epsilon(sym_prv(p, mu), 2000, eps_error=0.01, eps_max=30.0)
    assert lo <= est.upper <= hi
    # the prv estimate lies inside our certified bracket (up to its own rounding)
    assert est.lower - 1e-5 <= mid <= est.upper + 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("steps, expected", [(4000, 6.654), (8000, 10.113)])
def test_symmetric_table4_long(steps: int, expected: float) -> None:
    p, mu = 0.025, 2 / 3
    est = (
        P.symmetric_subsampled_gaussian_pld(p, mu, with_lower=True)
        .self_compose(steps)
        .epsilon_with_error(DELTA)
    )
    assert est.upper == pytest.approx(expected, abs=0.01)
    sym_prv, _ = _prv_classes()
    lo, mid, hi = prv_epsilon(sym_prv(p, mu), steps, eps_error=1e-3, eps_max=30.0)
    assert lo <= est.upper <= hi
    assert est.lower is not None and est.lower <= hi
    # prv_accountant's point estimate falls inside our (much narrower) certified bracket
    assert est.lower - 1e-4 <= mid <= est.upper + 1e-4


def test_symmetric_p_one_is_gaussian() -> None:
    exact = exact_gaussian_epsilon(1.3, DELTA)
    assert P.symmetric_subsampled_gaussian_pld(1.0, 1.3).epsilon(DELTA) == pytest.approx(
        exact, rel=1e-6
    )


# --------------------------------------------------------------------------------------------
# Structural properties
# --------------------------------------------------------------------------------------------


def test_monotone_in_k_and_mu() -> None:
    pld = P.symmetric_subsampled_gaussian_pld(0.05, 1.0)
    eps_k = [pld.self_compose(k).epsilon(DELTA) for k in (1, 3, 10, 30, 100, 300)]
    assert all(a < b for a, b in itertools.pairwise(eps_k))
    eps_mu = [
        P.symmetric_subsampled_gaussian_pld(0.05, mu).self_compose(50).epsilon(DELTA)
        for mu in (0.3, 0.6, 1.2, 2.4)
    ]
    assert all(a < b for a, b in itertools.pairwise(eps_mu))
    eps_z = [
        P.poisson_subsampled_gaussian_pld(0.01, z).self_compose(200).epsilon(DELTA)
        for z in (2.0, 1.0, 0.7)
    ]
    assert all(a < b for a, b in itertools.pairwise(eps_z))


def test_zero_compositions_is_perfect_privacy() -> None:
    for one in (
        P.gaussian_pld(1.0),
        P.poisson_subsampled_gaussian_pld(0.01, 1.0),
        P.symmetric_subsampled_gaussian_pld(0.1, 1.0),
    ):
        none = one.self_compose(0)
        assert none.epsilon(DELTA) == 0.0
        assert none.delta(0.0) == 0.0
    ident = P.identity_pld()
    assert ident.epsilon(1e-12) == 0.0
    g = P.gaussian_pld(0.8)
    assert ident.compose(g).epsilon(DELTA) == pytest.approx(g.epsilon(DELTA), rel=1e-12)
    assert P.gaussian_pld(0.0).epsilon(DELTA) == 0.0
    assert P.SubsampledGaussianComposer(0.1, 1.0).epsilon(0, DELTA) == 0.0


def test_delta_epsilon_roundtrip_and_interop_with_dp_accounting() -> None:
    pld = P.poisson_subsampled_gaussian_pld(0.02, 0.9).self_compose(300)
    eps = pld.epsilon(DELTA)
    assert pld.delta(eps) <= DELTA * (1 + 1e-9)
    assert pld.delta(eps * 0.99) > DELTA
    dpa = pld.to_dp_accounting()
    assert dpa.get_epsilon_for_delta(DELTA) == pytest.approx(eps, rel=1e-10)
    assert dpa.get_delta_for_epsilon(1.0) == pytest.approx(pld.delta(1.0), rel=1e-10)
    back = P.Pld.from_dp_accounting(dpa)
    assert back.epsilon(DELTA) == pytest.approx(eps, rel=1e-12)
    assert not back.has_lower and back.error.value_discretization_interval == pld.discretization


def test_compose_matches_dp_accounting_compose() -> None:
    a = P.poisson_subsampled_gaussian_pld(0.02, 1.0).self_compose(50)
    b = P.symmetric_subsampled_gaussian_pld(0.05, 0.8).self_compose(20)
    ours = a.compose(b)
    ref = a.to_dp_accounting().compose(b.to_dp_accounting())
    # same convolution; ours adds a bound on the FFT round-off, so it is never below
    assert ours.epsilon(DELTA) == pytest.approx(ref.get_epsilon_for_delta(DELTA), rel=1e-7)
    assert ours.epsilon(DELTA) >= ref.get_epsilon_for_delta(DELTA) * (1 - 1e-12)
    assert "⊗" in ours.description


def test_error_information() -> None:
    pld = P.symmetric_subsampled_gaussian_pld(0.025, 2 / 3, discretization=2e-4).self_compose(100)
    err = pld.error
    assert err.value_discretization_interval == 2e-4
    assert 0.0 < err.truncation_mass < 1e-12  # tail cut + Chernoff window, all sent to +inf
    assert err.log_mass_truncation_bound == P.DEFAULT_LOG_MASS_TRUNCATION_BOUND
    est = pld.epsilon_with_error(DELTA)
    assert est.lower is None and est.relative_width is None
    assert est.discretization == 2e-4


# --------------------------------------------------------------------------------------------
# The cached composer C_p(G_a)^{⊗k} ⊗ G_b
# --------------------------------------------------------------------------------------------


def test_composer_matches_generic_composition() -> None:
    p, a = 0.025, 2 * math.sqrt(2) * (2 / 3)
    comp = P.SubsampledGaussianComposer(p, a)
    for k, b in ((5, 2.0), (60, 0.7), (400, 0.0)):
        generic = P.symmetric_subsampled_gaussian_pld(p, a).self_compose(k)
        if b > 0:
            generic = generic.compose(P.gaussian_pld(b))
        # two valid upper bounds with different FFT error bounds (one product vs two)
        assert comp.epsilon(k, DELTA, b) == pytest.approx(generic.epsilon(DELTA), rel=1e-5)
    # k = 0 leaves the exact Gaussian
    assert comp.epsilon(0, DELTA, 1.0) == pytest.approx(
        exact_gaussian_epsilon(1.0, DELTA), rel=1e-9
    )
    assert comp.epsilon(0, DELTA, 1.0) >= exact_gaussian_epsilon(1.0, DELTA)
    est = comp.epsilon_with_error(60, DELTA, 0.7)
    assert est.lower is not None and est.lower <= est.upper <= est.lower * (1 + 1e-3)


def test_compose_symmetric_subsampled_with_gaussian_function() -> None:
    p, a = 0.025, 1.2
    value = P.compose_symmetric_subsampled_with_gaussian(p, a, 30, 0.5, DELTA)
    generic = (
        P.symmetric_subsampled_gaussian_pld(p, a).self_compose(30).compose(P.gaussian_pld(0.5))
    )
    assert value == pytest.approx(generic.epsilon(DELTA), rel=1e-7)
    assert value >= generic.epsilon(DELTA) * (1 - 1e-7)
    assert P.compose_symmetric_subsampled_with_gaussian(p, a, 0, 0.0, DELTA) == 0.0


def test_composer_minimize_finds_the_best_candidate() -> None:
    """(Its speed is measured by benchmarks/accountant.py, never by a timed unit test.)"""
    p, a = 0.025, 2 * math.sqrt(2) * (2 / 3)
    comp = P.SubsampledGaussianComposer(p, a)
    ks = sorted({int(k) for k in np.geomspace(1, 1e4, 40)})

    def b_of(k: int) -> float:
        return 3.0 / math.sqrt(k)

    res = comp.minimize(ks, DELTA, b_of)
    # the screening keeps the true optimum: compare with fine evaluations around it
    around = [k for k in ks if 0.5 * res.k <= k <= 2 * res.k]
    brute = {k: comp.epsilon(k, DELTA, b_of(k)) for k in around}
    assert res.epsilon == pytest.approx(min(brute.values()), rel=1e-12)
    assert res.epsilon == brute[res.k]
    assert res.epsilon >= exact_gaussian_epsilon(b_of(res.k), DELTA)


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: P.gaussian_pld(-1.0), "mu"),
        (lambda: P.gaussian_pld(1.0, discretization=0.0), "discretization"),
        (lambda: P.symmetric_subsampled_gaussian_pld(0.0, 1.0), "p"),
        (lambda: P.symmetric_subsampled_gaussian_pld(1.5, 1.0), "p"),
        (lambda: P.symmetric_subsampled_gaussian_pld(0.1, float("nan")), "mu"),
        (lambda: P.poisson_subsampled_gaussian_pld(0.1, 0.0), "noise_multiplier"),
        (lambda: P.poisson_subsampled_gaussian_pld(0.1, 1.0, adjacency="swap"), "adjacency"),  # type: ignore[arg-type]
        (lambda: P.gaussian_pld(1.0).epsilon(0.0), "delta"),
        (lambda: P.gaussian_pld(1.0).epsilon(1.0), "delta"),
        (lambda: P.gaussian_pld(1.0).self_compose(-1), "k"),
        (lambda: P.gaussian_pld(1.0).self_compose(2.5), "k"),  # type: ignore[arg-type]
        (lambda: P.gaussian_pld(1.0).compose(P.gaussian_pld(1.0, discretization=1e-3)), "other"),
        (
            lambda: P.SubsampledGaussianComposer(0.1, 1.0).epsilon(3, DELTA, -0.5),
            "extra_gaussian_mu",
        ),
        (lambda: P.SubsampledGaussianComposer(0.1, 1.0).minimize([], DELTA), "ks"),
    ],
)
def test_invalid_input_raises_parameter_error(call, name: str) -> None:
    with pytest.raises(ParameterError) as info:
        call()
    assert info.value.name == name


def test_pld_is_immutable() -> None:
    pld = P.gaussian_pld(1.0)
    with pytest.raises(AttributeError):
        pld._d = 0.5  # type: ignore[misc]
    with pytest.raises(ValueError):
        pld._remove.probs[0] = 1.0
