"""Hidden-state Renyi DP of Ye & Shokri 2022: the RDP baseline of paper 000's tables.

Ye, Shokri, "Differentially Private Learning Needs Hidden State (Or Much Faster Convergence)",
NeurIPS 2022 (YS22).  Paper 000 (Bok, Su, Altschuler 2024) compares its f-DP bounds with these
RDP bounds ("RDP" column of Tables 1/4, "prior RDP" curve of Fig. 1).  They are published upper
bounds on the privacy of the last iterate and are registered with ``kind="bound"``; in this
library they serve mainly as a comparison baseline (paper 000's Thm 4.5 / 4.2 are tighter).

Formulas exactly as recovered in docs/theorems.md 2.3 (canonical units: ``L`` gradient sensitivity
under replace-one, ``sigma`` noise std on the averaged gradient, ``b`` batch size, ``l`` batches
per epoch, ``E`` epochs, ``c`` contraction of one gradient step):

* Thm 3.3 (NoisyCGD, strongly convex, smooth) [C, V: reproduces Tables 1/4's RDP column]:
  ``eps_R(alpha) = rho alpha``,
  ``rho = (L^2/(2 b^2 sigma^2)) (1 + c^{l-2} (1-c^2) (1 - c^{l(E-1)}) / (1-c^l)^2)``.
* Thm D.6 (NoisyGD, full batch) as coded by paper 000 for Fig. 1 [C; general c_ys R-]:
  ``rho = (L/(n sigma))^2 ((1+c)/(1-c)) (1 - c_ys^T)`` with ``c_ys = 0.975 = 1 - eta m/2`` there.

Sensitivity: both theorems need ``L`` to bound only the DIFFERING pair ``||g_i(x) - g'_i(x)||`` (one
index differs; full or cyclic batches).  Replace-one adjacency only.

Linear RDP curves are converted with the best of the conversions of docs/theorems.md 1.5
(``lastiterate.bounds.base.rdp_result``).
"""

from __future__ import annotations

import math
from typing import Any

from lastiterate.bounds.base import Query, Result, rdp_result, register
from lastiterate.bounds.shifted_interpolation import one_minus_power
from lastiterate.errors import NotApplicable
from lastiterate.notions.rdp import rdp_to_delta, rdp_to_epsilon
from lastiterate.run import Run

BOUND_ID = "hidden-state-rdp"

#: relative margin of the closed forms: each is a dozen operations of at most one ulp (EPS/2) each
#: (``pow`` and ``expm1``/``log`` inside ``one_minus_power`` below one ulp; the condition number of
#: ``-expm1(x)`` in x is at most 1 for x <= 0), i.e. below 16 EPS; 32 EPS keeps every computed rho
#: at or above the exact value of the formula at the given inputs (tests/bounds/
#: test_hidden_state_rounding.py, against 50-digit mpmath).  The inputs themselves (``step_mu``,
#: ``c``) are taken as exact.
_ROUNDING_MARGIN = 1.0 + 32.0 * 2.0**-52
REFERENCE = "Ye, Shokri 2022, Differentially Private Learning Needs Hidden State (NeurIPS)"


# ============================================================================ formulas
def ys22_thm33_rho(step_mu: float, c: float, l: int, E: float) -> float:
    """YS22 Thm 3.3 zCDP-type constant of NoisyCGD (``eps_R(alpha) = rho alpha``),
    docs/theorems.md 2.3:

        rho = (step_mu^2 / 2) (1 + c^{l-2} (1-c^2) (1 - c^{l(E-1)}) / (1-c^l)^2),

    ``step_mu = L/(b sigma)``, ``l`` batches per epoch, ``E`` epochs (``inf``: the limit), c < 1.
    The exponent ``l - 2`` is the one that reproduces paper 000's printed RDP column (whether YS22
    prints it literally was not checked); it is >= the alternative ``2l - 2``, i.e. the larger rho.
    Rounded up by ``_ROUNDING_MARGIN`` (32 EPS relative).
    """
    if not c < 1.0:
        raise ValueError("YS22 Thm 3.3 needs c < 1")
    q = 1.0 if math.isinf(E) else one_minus_power(c, l * (E - 1))
    factor = c ** (l - 2) * (1 - c) * (1 + c) * q / one_minus_power(c, l) ** 2
    return step_mu**2 / 2 * (1 + factor) * _ROUNDING_MARGIN


def ys22_thmd6_rho(step_mu: float, c: float, c_ys: float, T: float) -> float:
    """YS22 Thm D.6 (full batch) as coded by paper 000 (docs/theorems.md 2.3):

        rho = step_mu^2 ((1+c)/(1-c)) (1 - c_ys^T),    step_mu = L/(n sigma).

    ``T = inf`` gives the limit ``step_mu^2 (1+c)/(1-c)``.  Rounded up by ``_ROUNDING_MARGIN``."""
    if not c < 1.0:
        raise ValueError("YS22 Thm D.6 needs c < 1")
    q = 1.0 if math.isinf(T) else one_minus_power(c_ys, T)
    return step_mu**2 * (1 + c) / (1 - c) * q * _ROUNDING_MARGIN


# ============================================================================ helpers
def _checks(run: Run) -> tuple[float, float]:
    """Shared assumptions; returns (eta, c)."""
    if run.adjacency != "replace":
        raise NotApplicable(
            "YS22 bounds are stated for replace-one adjacency; the run declares "
            f"adjacency={run.adjacency}"
        )
    eta = run.eta  # NotApplicable for a learning-rate schedule
    c = run.c
    if c is None:
        raise NotApplicable(f"no contraction: {run.contraction_note}")
    if not c < 1.0:
        raise NotApplicable(
            "needs strong convexity (contraction c < 1); the run only gives c = "
            f"{c:g} ({run.contraction_note})"
        )
    return eta, float(c)


def _limit_details(rho_limit: float, query: Query) -> dict[str, Any]:
    out: dict[str, Any] = {"rho_limit": rho_limit}
    curve = lambda a, _r=rho_limit: _r * a
    if query.delta is not None:
        out["epsilon_limit"] = float(rdp_to_epsilon(curve, query.delta).epsilon)
    else:
        out["delta_limit"] = float(rdp_to_delta(curve, float(query.epsilon)))  # type: ignore[arg-type]
    return out


def _linear_rdp_result(
    run: Run,
    query: Query,
    *,
    theorem: str,
    reference: str,
    rho: float,
    rho_limit: float,
    details: dict[str, Any],
    assumptions: tuple[str, ...],
) -> Result:
    """Result of the ``(alpha, rho alpha)``-RDP guarantee of a YS22 theorem, ``details`` completed
    by the limit values (:func:`_limit_details` of ``rho_limit``, the supremum over T)."""
    details.update(_limit_details(rho_limit, query))
    return rdp_result(
        BOUND_ID,
        theorem=theorem,
        reference=reference,
        rdp=lambda a: rho * a,
        query=query,
        run=run,
        linear_rho=rho,
        details=details,
        assumptions=assumptions,
    )


# ============================================================================ bounds
@register(
    BOUND_ID,
    theorem="YS22 Thm 3.3 (NoisyCGD, strongly convex)",
    reference=REFERENCE,
    algorithms=("cgd",),
)
def ys22_noisy_cgd(run: Run, query: Query) -> Result:
    """YS22 Thm 3.3: NoisyCGD on strongly convex, smooth losses is ``(alpha, rho alpha)``-RDP for
    every alpha > 1 with rho = ``ys22_thm33_rho(L/(b sigma), c, l, E)``
    (docs/theorems.md 2.3) [C, V].

    Uses ``E = run.uses`` (worst-case uses of an example), ``b = run.b_min``, ``l = run.l``,
    ``c = run.c`` (needs c < 1), constant step, replace-one.  A published upper bound, used here as
    the comparison baseline of paper 000 Tables 1/4.  ``epsilon_limit``: E -> infinity.
    """
    _, c = _checks(run)
    step_mu = run.L / (run.b_min * run.sigma)
    l, E = int(run.l), int(run.uses)
    if l < 2:
        # the recovered exponent c^(l-2) is only meaningful for a cycle of >= 2 batches (it divides
        # by c for l = 1); refusing is always safe, and gd-type bounds cover a single batch
        raise NotApplicable(
            "YS22 Thm 3.3 (as recovered, exponent l-2) needs at least 2 batches per epoch"
        )
    rho = ys22_thm33_rho(step_mu, c, l, E)
    return _linear_rdp_result(
        run,
        query,
        theorem="YS22 Thm 3.3 (NoisyCGD, strongly convex)",
        reference=REFERENCE + ", Thm 3.3",
        rho=rho,
        rho_limit=ys22_thm33_rho(step_mu, c, l, math.inf),
        details={
            "epochs_used": E,
            "batches_per_epoch": l,
            "contraction": c,
            "per_step_mu": step_mu,
        },
        assumptions=(
            f"strongly convex, smooth losses: each step is c-Lipschitz with c = {c:.10g} < 1",
            "replace-one adjacency; constant learning rate; comparison baseline of paper 000",
        ),
    )


@register(
    BOUND_ID,
    theorem="YS22 Thm D.6 (NoisyGD, strongly convex)",
    reference=REFERENCE,
    algorithms=("gd",),
)
def ys22_noisy_gd(run: Run, query: Query) -> Result:
    """YS22 Thm D.6 (full batch) as coded in paper 000's ``plot_intro.py`` (Fig. 1 "prior RDP"):
    ``(alpha, rho alpha)``-RDP, rho = (L/(n sigma))^2 ((1+c)/(1-c)) (1 - c_ys^T).

    The general ``c_ys`` is [R-]: the code uses 0.975 for eta m = 0.05, c = 0.95, which is both
    ``1 - eta m/2`` and ``(1+c)/2``.  We take ``c_ys = min(1 - eta m/2, (1+c)/2)``, the smaller one
    (larger rho; for c = max(|1-eta m|, |1-eta M|) it is ``1 - eta m/2``).  With c_ys <= (1+c)/2 the
    curve is never below the exact RDP of the quadratic instance that makes Thm 4.2 tight
    (Jensen: ((1+c)/2)^T <= (1+c^T)/2), a sanity check of this reading.  Needs the strong
    convexity m declared (not only a contraction), c < 1, constant step, replace-one.
    """
    eta, c = _checks(run)
    m = run.m
    if m is None or not m > 0:
        raise NotApplicable(
            "YS22 Thm D.6 needs the strong-convexity constant m (c_ys = 1 - lr*m/2); only "
            "a contraction was declared"
        )
    c_ys = min(1.0 - eta * m / 2.0, (1.0 + c) / 2.0)
    if not 0.0 <= c_ys < 1.0:
        raise NotApplicable(f"c_ys = 1 - lr*m/2 = {c_ys:g} is outside [0, 1)")
    step_mu = run.L / (run.n * run.sigma)
    rho = ys22_thmd6_rho(step_mu, c, c_ys, run.T)
    return _linear_rdp_result(
        run,
        query,
        theorem="YS22 Thm D.6 (NoisyGD, strongly convex)",
        reference=REFERENCE + ", Thm D.6 (as coded in paper 000)",
        rho=rho,
        rho_limit=ys22_thmd6_rho(step_mu, c, c_ys, math.inf),
        details={"contraction": c, "c_ys": c_ys, "per_step_mu": step_mu, "steps": run.T},
        assumptions=(
            (
                f"m-strongly convex (m = {m:g}), smooth losses: "
                f"c = {c:.10g} < 1; c_ys = {c_ys:.10g} [R-]"
            ),
            (
                "replace-one adjacency; constant learning rate; comparison "
                "baseline of paper 000 Fig. 1"
            ),
        ),
    )
