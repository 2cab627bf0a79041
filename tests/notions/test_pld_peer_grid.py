"""The fast DP-SGD composition path against dp_accounting's PLD at Delta = 1e-5 (issue 11).

``poisson_subsampled_gaussian_epsilon`` (Delta = 1e-4, composed for its delta, see
``delta_of_interest``) on the grid z in {0.7, 1.1, 2}, q in {1e-3, 0.01, 0.1, 0.5, 0.99},
T in {1, 1e3, 1e5, 1e7}, delta in {1e-5, 1e-12}:

* cells whose composition needs more than the engine's 2e7 grid points at Delta = 1e-4 are refused
  with one ParameterError naming the discretization (the accountant coarsens those itself);
* cells where dp_accounting at Delta = 1e-5 stays under ~3e6 points (27 cells, both deltas) are
  compared with it (slow: dp_accounting builds the one-step PMF point by point, minutes in all);
  two cheap cells run in the default suite;
* the remaining cells (dp_accounting would need 3e6 .. 2e8 points at 1e-5) are not compared.

Every cell also checks the certified lower bound against dp_accounting's RDP accountant (a valid
upper bound from an independent method): a lower bound above a valid upper bound would be a false
certificate.

Where the comparison with dp_accounting cannot hold, the cell is listed below with the evidence;
the lists are pinned (a listed cell that starts to agree fails too, so the lists stay true).
"""

from __future__ import annotations

import functools
import itertools
import math

import pytest

from lastiterate.errors import ParameterError
from lastiterate.notions import pld as P

ZS = (0.7, 1.1, 2.0)
QS = (1e-3, 0.01, 0.1, 0.5, 0.99)
TS = (1, 1_000, 100_000, 10_000_000)
DELTAS = (1e-5, 1e-12)

#: the composition would need more than 2e7 grid points at Delta = 1e-4 (measured)
TOO_LARGE = {
    (0.7, 0.1, 10_000_000), (0.7, 0.5, 100_000), (0.7, 0.5, 10_000_000),
    (0.7, 0.99, 100_000), (0.7, 0.99, 10_000_000), (1.1, 0.1, 10_000_000),
    (1.1, 0.5, 100_000), (1.1, 0.5, 10_000_000), (1.1, 0.99, 100_000),
    (1.1, 0.99, 10_000_000), (2.0, 0.1, 10_000_000), (2.0, 0.5, 10_000_000),
    (2.0, 0.99, 100_000), (2.0, 0.99, 10_000_000),
}  # fmt: skip

#: dp_accounting at Delta = 1e-5 stays under ~3e6 points (our Delta = 1e-4 window <= 3e5)
COMPARED = [
    (0.7, 0.001, 1), (0.7, 0.001, 1000), (0.7, 0.001, 100_000), (0.7, 0.01, 1),
    (0.7, 0.01, 1000), (0.7, 0.1, 1), (0.7, 0.5, 1), (0.7, 0.99, 1), (1.1, 0.001, 1),
    (1.1, 0.001, 1000), (1.1, 0.001, 100_000), (1.1, 0.01, 1), (1.1, 0.01, 1000), (1.1, 0.1, 1),
    (1.1, 0.5, 1), (1.1, 0.99, 1), (2.0, 0.001, 1), (2.0, 0.001, 1000), (2.0, 0.001, 100_000),
    (2.0, 0.001, 10_000_000), (2.0, 0.01, 1), (2.0, 0.01, 1000), (2.0, 0.01, 100_000),
    (2.0, 0.1, 1), (2.0, 0.1, 1000), (2.0, 0.5, 1), (2.0, 0.99, 1),
]  # fmt: skip
CHEAP = {(2.0, 0.01, 1), (2.0, 0.01, 1000)}

#: dp_accounting's value at Delta = 1e-5 is outside the certified range of an independent peer
#: (prv_accountant's bracket, eps_error 0.02, delta_error delta/1000; or dp_accounting's own RDP
#: accountant, a valid upper bound), or the peers cannot decide; it bounds nothing here:
DPA_UNRELIABLE = {
    # dpa 8.2401 above prv_accountant's certified upper 8.1345 (ours [8.0875, 8.1429])
    (2.0, 0.001, 10_000_000, 1e-5),
    # dpa 12.7462 below prv_accountant's certified lower 12.9297 (ours [12.9493, 12.9504])
    (2.0, 0.01, 100_000, 1e-12),
    # dpa 3.8995 above the RDP bound 2.6996 (ours [2.4342, 2.4748])
    (1.1, 0.001, 100_000, 1e-12),
    # dpa 10.9954 above the RDP bound 7.5847 (ours [6.0617, 8.4075])
    (0.7, 0.001, 100_000, 1e-12),
    # dpa 12.2979 below our certified lower 12.8416; prv_accountant refuses delta 1e-12 here
    # ("floating point errors will dominate"), RDP 13.36.  At delta 1e-11 prv_accountant's
    # bracket [12.2712, 12.3716] holds ours [12.2811, 12.3663] and excludes dpa's 12.1747 (dpa
    # under-reports there); at 1e-10 all three agree.  Not verified at 1e-12 itself.
    (2.0, 0.001, 10_000_000, 1e-12),
    # dpa 3.09032 below our lower 3.09109 by 2.5e-4 relative; prv_accountant's bracket
    # [3.0895, 3.0937] holds both: dpa's FFT round-off at delta 1e-12 is not bounded (peers.md 2)
    (1.1, 0.01, 1000, 1e-12),
    # dpa 1.178231 below our lower 1.178259 by 2.4e-5 relative; prv [1.1763, 1.1803] holds both
    (2.0, 0.01, 1000, 1e-12),
}

#: the fixed grid Delta = 1e-4 misses 0.1% of dp_accounting (ours is the larger, i.e. looser,
#: value; the certified bracket is at least as wide as the miss, so it says so itself):
#: epsilon ~ 0.05 .. 0.6 at q = 1e-3 is resolved by only ~500 .. 6000 grid steps and the loss
#: piles up within one cell (the accountant refines such grids, composition._TARGET_BRACKET).
#: (Until issue 11 (2, 0.99, 1, 1e-12) was here too, 34% loose: the add direction mirrored the
#: round-off of the remove masses near loss log(1-q), times 1/(1-q), to its top loss; the masses
#: at negative losses now come from the residual delta_R - (1 - u), and it agrees to 1e-9.)
GRID_MISSES = {
    (2.0, 0.001, 1000, 1e-5),
    (2.0, 0.001, 1000, 1e-12),
    (2.0, 0.001, 100_000, 1e-5),
    (2.0, 0.001, 100_000, 1e-12),
    (1.1, 0.001, 1000, 1e-12),
    (0.7, 0.001, 1000, 1e-12),
}

AGREEMENT = 1e-3  # 0.1% relative


@functools.cache
def _dpa_pld(z: float, q: float, steps: int) -> tuple[float, float]:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(
        dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-5
    )
    event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z))
    acc.compose(dp_accounting.SelfComposedDpEvent(event, steps))
    return acc.get_epsilon(DELTAS[0]), acc.get_epsilon(DELTAS[1])


def _rdp(z: float, q: float, steps: int, delta: float) -> float:
    """dp_accounting's RDP accountant on a dense order grid: a valid (loose) upper bound."""
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant

    orders = [1 + x / 20 for x in range(1, 200)] + list(range(11, 256)) + [300, 512, 1024, 4096]
    acc = rdp_privacy_accountant.RdpAccountant(orders=orders)
    event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z))
    acc.compose(dp_accounting.SelfComposedDpEvent(event, steps))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("cell", sorted(TOO_LARGE))
def test_too_large_cells_are_refused_with_one_parameter_error(
    cell: tuple[float, float, int],
) -> None:
    z, q, steps = cell
    with pytest.raises(ParameterError, match="discretization"):
        P.poisson_subsampled_gaussian_epsilon(q, z, steps, 1e-5)


def test_the_grid_is_partitioned() -> None:
    cells = set(itertools.product(ZS, QS, TS))
    assert TOO_LARGE <= cells and set(COMPARED) <= cells
    assert not TOO_LARGE & set(COMPARED)
    for z, q, steps, delta in DPA_UNRELIABLE | GRID_MISSES:
        assert (z, q, steps) in COMPARED and delta in DELTAS
    assert not DPA_UNRELIABLE & GRID_MISSES


def _check_cell(z: float, q: float, steps: int) -> None:
    references = _dpa_pld(z, q, steps)
    for delta, dpa in zip(DELTAS, references):
        est = P.poisson_subsampled_gaussian_epsilon(q, z, steps, delta, with_lower=True)
        assert est.lower is not None
        assert math.isfinite(est.upper) and 0.0 <= est.lower <= est.upper
        where = f"z={z} q={q} T={steps} delta={delta}: ours [{est.lower}, {est.upper}], dpa {dpa}"
        # a certified lower bound never exceeds a valid upper bound of another method
        assert est.lower <= _rdp(z, q, steps, delta) * (1 + 1e-9), where
        key = (z, q, steps, delta)
        if key in DPA_UNRELIABLE:
            continue
        # never below the peer by more than our own certified gap (at delta 1e-12 the peer's own
        # tail truncation, 1e-15 of mass sent to +inf, is 1e-3 of delta: it sits ~1e-4 relative
        # above the exact value, see test_one_step_bracket_holds_the_exact_value)
        slack = 0.0 if delta >= 1e-6 else 5e-4 * dpa
        assert est.upper >= dpa - slack - (est.upper - est.lower) - 1e-12, where
        assert est.lower <= dpa * (1 + 1e-9), where
        agrees = abs(est.upper / dpa - 1.0) <= AGREEMENT
        if key in GRID_MISSES:
            assert not agrees, f"{where}: now agrees, remove it from GRID_MISSES"
            assert est.upper > dpa, where  # the miss is on the safe side
        else:
            assert agrees, where


def _exact_one_step_delta(eps: float, q: float, z: float) -> float:
    """Exact delta(eps) of one Poisson-subsampled Gaussian step, add/remove (max of directions).

    Remove: P = q N(1, z^2) + (1 - q) N(0, z^2) against Q = N(0, z^2); the loss
    log(q e^{(2x - 1)/(2 z^2)} + 1 - q) increases in x, so {L > eps} = {x > x_eps} in closed form.
    Add: the swapped pair, {L > eps} = {x < x_a}.  Written here from the definition with
    scipy.special.log_ndtr, independently of the library's profiles.
    """
    from scipy import special

    def sf(x: float) -> float:
        return math.exp(special.log_ndtr(-x))

    def cdf(x: float) -> float:
        return math.exp(special.log_ndtr(x))

    if eps <= math.log1p(-q):
        remove = -math.expm1(eps)
    else:
        xs = z * z * math.log((math.exp(eps) - (1 - q)) / q) + 0.5
        remove = q * sf((xs - 1) / z) + (1 - q) * sf(xs / z) - math.exp(eps) * sf(xs / z)
    t = math.exp(-eps) - (1 - q)
    add = 0.0
    if t > 0:
        xa = z * z * math.log(t / q) + 0.5
        add = cdf(xa / z) - math.exp(eps) * (q * cdf((xa - 1) / z) + (1 - q) * cdf(xa / z))
    return max(remove, add)


@pytest.mark.parametrize("z, q", list(itertools.product(ZS, QS)))
def test_one_step_bracket_holds_the_exact_value(z: float, q: float) -> None:
    from scipy import optimize

    for delta in DELTAS:
        exact = optimize.brentq(
            lambda e, d=delta: math.log(max(_exact_one_step_delta(e, q, z), 1e-300)) - math.log(d),
            1e-6,
            14.0,
            xtol=1e-14,
        )
        est = P.poisson_subsampled_gaussian_epsilon(q, z, 1, delta, with_lower=True)
        assert est.lower is not None
        where = f"z={z} q={q} delta={delta}: ours [{est.lower}, {est.upper}], exact {exact}"
        assert est.lower <= exact * (1 + 1e-9) and exact <= est.upper * (1 + 1e-9), where
        if (z, q, 1, delta) in GRID_MISSES:
            assert est.upper > exact * (1 + AGREEMENT), where
        else:
            assert est.upper <= exact * (1 + AGREEMENT), where


@pytest.mark.parametrize("cell", sorted(CHEAP))
def test_fast_path_agrees_with_dp_accounting_1e5_cheap_cells(
    cell: tuple[float, float, int],
) -> None:
    _check_cell(*cell)


@pytest.mark.slow
@pytest.mark.parametrize("cell", [c for c in COMPARED if c not in CHEAP])
def test_fast_path_agrees_with_dp_accounting_1e5(cell: tuple[float, float, int]) -> None:
    _check_cell(*cell)


@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_one_step_profile_is_accurate_up_to_the_largest_add_loss(q: float) -> None:
    """The add direction's losses end at -log(1-q); its profile there is tiny (1e-11 .. 1e-80)
    and must not carry the round-off of the remove masses near log(1-q) (before issue 11: 1e-7 at
    q = 0.99, epsilon = 3, against an exact 1.9e-11)."""
    z = 2.0
    one = P.poisson_subsampled_gaussian_pld(q, z)
    top = -math.log1p(-q)
    for frac in (0.3, 0.5, 0.7, 0.9, 0.97):
        eps = frac * top
        exact = _exact_one_step_delta(eps, q, z)
        got = one.delta(eps)
        assert got >= exact * (1 - 1e-9), (eps, got, exact)
        assert got <= exact * (1 + 1e-3) + 1e-300, (eps, got, exact)
