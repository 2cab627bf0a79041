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

* one-step profiles are cut at the grid point where
  :math:`\delta \le e^{\text{log\_mass\_truncation\_bound}}` (default :math:`e^{-50}`); the
  remaining profile becomes mass at :math:`+\infty`;
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
  replace-one, i.e. :math:`\mu = L/(b\sigma) = 2/z` for gradients clipped at C
  (docs/theorems.md §0).

Implementation note (measured, see ``benchmarks/composition.py``)
-----------------------------------------------------------------
The arrays are the dp_accounting ones up to the outward rounding margin (same grid, same
connect-the-dots formula, each pessimistic mass multiplied by ``1 + rho`` with rho ~ 1e-12 to cover
the evaluation error of the profile values, ``distribution._outward_symmetric``; same
``PrivacyLossDistribution`` semantics; :meth:`Pld.to_dp_accounting` returns a genuine
``dp_accounting.pld.privacy_loss_distribution.PrivacyLossDistribution`` and
:meth:`Pld.from_dp_accounting` wraps one), but the kernels are our own, vectorised, because that
was measured to be 2-20x faster at the same grid: dp_accounting 0.6 builds the one-step PMF with
one Python call per grid point (0.14-0.32 s at 1e-4 for DP-SGD), self-composes with a complex FFT,
numpy's complex power and a 40-order Chernoff search, and computes epsilon with a Python loop over
the grid.  Here the one-step PMF is closed-form vectorised, self-composition is one real FFT
raised to the k-th power by repeated squaring on an optimised Chernoff window, and epsilon/delta
use cumulative sums.  Two-PLD composition is the same spectral kernel with one factor each (the
real FFTs are ``numpy.fft``'s pocketfft, bit-identical to ``scipy.fft``'s and cheaper to import),
with the same pessimistic truncation as dp_accounting.  The tests check agreement with
dp_accounting to 1e-6 (typically 1e-9).

:class:`SubsampledGaussianComposer` serves accountants that minimise
:math:`\varepsilon(C_p(G_a)^{\otimes k} \otimes G_b)` over the window length k (paper 000,
Thm 4.10): one-step PLDs are cached per grid, the Gaussian factor is multiplied into the same FFT,
and candidates are screened on coarse grids before the fine evaluation.
Package layout (issue 12): :mod:`.profiles` (closed-form privacy profiles), :mod:`.kernels` (PMF
kernels: connect-the-dots masses, epsilon/delta of a PMF, truncation, the tilted FFT composition
and its error bound), :mod:`.distribution` (the :class:`Pld` class, its result types and
constructors) and :mod:`.composer` (the cached composer and epsilon helpers).  This module
re-exports the public names, so ``from lastiterate.notions.pld import ...`` keeps working.
"""

from __future__ import annotations

from lastiterate.notions.adjacency import Adjacency
from lastiterate.notions.pld._common import (
    _MAX_GRID_POINTS,  # noqa: F401  (kept importable from the old module)
    DEFAULT_DISCRETIZATION,
    DEFAULT_LOG_MASS_TRUNCATION_BOUND,
    DEFAULT_TAIL_MASS_TRUNCATION,
    _GridTooLarge,  # noqa: F401  (kept importable from the old module)
    delta_of_interest,
    grid_budget,
    max_grid_points,
    tilt_delta_floor,
)
from lastiterate.notions.pld.composer import (
    KEstimate,
    SubsampledGaussianComposer,
    compose_symmetric_subsampled_with_gaussian,
    poisson_subsampled_gaussian_epsilon,
)
from lastiterate.notions.pld.distribution import (
    EpsilonEstimate,
    Pld,
    PldError,
    _compose_power,  # noqa: F401  (kept importable from the old module)
    gaussian_pld,
    identity_pld,
    on_feasible_grid,
    poisson_subsampled_gaussian_pld,
    symmetric_subsampled_gaussian_pld,
)
from lastiterate.notions.pld.kernels import (
    _compose_spectral,  # noqa: F401  (kept importable from the old module)
    _compose_two,  # noqa: F401  (kept importable from the old module)
    _delta_for_epsilon,  # noqa: F401  (kept importable from the old module)
    _epsilon_for_delta,  # noqa: F401  (kept importable from the old module)
    _Pmf,  # noqa: F401  (kept importable from the old module)
    _self_compose,  # noqa: F401  (kept importable from the old module)
    _tilted_pass,  # noqa: F401  (kept importable from the old module)
)
from lastiterate.notions.pld.profiles import (
    _gaussian_parts,  # noqa: F401  (kept importable from the old module)
    _replace_parts,  # noqa: F401  (kept importable from the old module)
    _subsampled_parts,  # noqa: F401  (kept importable from the old module)
    gaussian_delta,
    symmetric_subsampled_gaussian_delta,
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
    "delta_of_interest",
    "gaussian_delta",
    "gaussian_pld",
    "grid_budget",
    "identity_pld",
    "max_grid_points",
    "on_feasible_grid",
    "poisson_subsampled_gaussian_epsilon",
    "poisson_subsampled_gaussian_pld",
    "symmetric_subsampled_gaussian_delta",
    "symmetric_subsampled_gaussian_pld",
    "tilt_delta_floor",
]
