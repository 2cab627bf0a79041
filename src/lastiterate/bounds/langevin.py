"""Paper 001: Chourasia, Ye, Shokri, "Differential Privacy Dynamics of Langevin Diffusion and Noisy
Gradient Descent" (NeurIPS 2021).  Bound id ``langevin-lsi``.

Only the last iterate theta_K of full-batch noisy GD is released.  The paper traces noisy GD by a
pair of Langevin diffusions and bounds the Renyi divergence through the log-Sobolev inequality (LSI)
of the tracing diffusions (docs/theorems.md section 3; formulas tagged [R+] there).

Notation map (docs/theorems.md 0.1)
------------------------------
The paper writes ``theta_{k+1} = Pi_C(theta_k - eta grad L_D(theta_k) + sqrt(2 eta sigma'^2)
N(0, I))`` with ``L_D`` the AVERAGE loss.  Canonically the noise is ``eta * N(0, sigma^2)``
on the parameters, so

    sigma'^2 = eta * sigma^2 / 2          (sigma' = sigma * sqrt(eta / 2))

The paper's total gradient sensitivity ``S_g`` (of the SUM of per-example gradients) is the
canonical sensitivity ``L``; its ``lambda`` is ``m`` and its ``beta`` is ``M``; its ``K`` is ``T``.

Implemented (paper units in the ``*_paper`` helpers, canonical units elsewhere):

* Thm 1 (linear bound, the composition baseline):

      eps = alpha S_g^2 eta K / (4 sigma'^2 n^2)

* Thm 2 (c-LSI along the trajectory):

      eps = alpha S_g^2 c / (2 sigma'^4 n^2) (1 - exp(-sigma'^2 eta K / c))

* Lemma 5 (LSI constant for lambda-strongly convex, beta-smooth, eta < 1/beta,
  theta_0 ~ Pi_C(N(0, 2 sigma'^2/lambda I))):

      c = 2 sigma'^2 / lambda

* Corollary 1 = Thm 2 with Lemma 5's constant:

      eps = alpha S_g^2 / (lambda sigma'^2 n^2) (1 - exp(-lambda eta K / 2))
      canonical: eps = 2 alpha L^2 / (m eta sigma^2 n^2) (1 - exp(-m eta T / 2))

* Corollary 2 (l2-squared loss on R^d, c = 2 sigma'^2/(2 - eta)):

      eps = alpha S_g^2 / ((2 - eta) sigma'^2 n^2) (1 - exp(-(2 - eta) eta K / 2))

  generalised here to ``(lambda/2)||theta - x||^2`` (i.e. m = M = lambda) by the change of variables
  eta -> eta lambda, sigma'^2 -> sigma'^2 / lambda, S_g -> S_g / lambda.
* Thm 3 (lower bound) and the exact Gaussian value for the l2-squared loss (used by the tests).

Adjacency and sensitivity: the paper uses replace-one neighbouring datasets; its argument only uses
that the two vector fields differ by at most ``S_g / n`` (Lemma 4), so ``L`` needs to bound only the
DIFFERING pair ``||g_i(x) - g'_i(x)||``.  Add/remove is not offered for full-batch gd: the average
is normalised by the dataset size, so removing example z moves it by ``(1/n)||g_z - mean of the
others||``, up to 2C/n rather than C/n; :class:`~lastiterate.run.Run` refuses such runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from lastiterate.bounds.base import Query, Result, rdp_epsilon_limit, rdp_result, register
from lastiterate.errors import NotApplicable
from lastiterate.run import Run

REFERENCE = "Chourasia, Ye, Shokri 2021 (paper 001)"

__all__ = [
    "composition_baseline_rdp",
    "corollary1_rdp",
    "corollary1_rdp_limit",
    "corollary1_rdp_paper",
    "corollary2_rdp",
    "corollary2_rdp_limit",
    "corollary2_rdp_paper",
    "lemma5_lsi_constant",
    "quadratic_exact_rdp_paper",
    "sigma_canonical_from_prime",
    "sigma_prime_from_canonical",
    "thm1_rdp_paper",
    "thm2_rdp_paper",
    "thm3_lower_rdp_paper",
]


# ---------------------------------------------------------------------------- notation
def sigma_prime_from_canonical(sigma: float, eta: float) -> float:
    """Paper-001 noise sigma' from the canonical sigma: sigma' = sigma * sqrt(eta / 2)
    (docs/theorems.md 0.1)."""
    return sigma * math.sqrt(eta / 2.0)


def sigma_canonical_from_prime(sigma_prime: float, eta: float) -> float:
    """Canonical sigma from paper 001's sigma': sigma = sigma' * sqrt(2 / eta)."""
    return sigma_prime * math.sqrt(2.0 / eta)


# ---------------------------------------------------------------------------- paper units
def lemma5_lsi_constant(sigma_prime: float, lam: float) -> float:
    """Lemma 5: LSI constant c = 2 sigma'^2 / lambda of the tracing diffusions.

    Assumptions: lambda-strongly convex, beta-smooth loss on a closed convex set, eta < 1/beta,
    theta_0 ~ Pi_C(N(0, (2 sigma'^2/lambda) I)).  ``c`` is in the "variance" normalisation: a
    Gaussian of variance v is v-LSI.
    """
    return 2.0 * sigma_prime**2 / lam


def thm1_rdp_paper(
    alpha: float, *, S_g: float, n: int, sigma_prime: float, eta: float, K: int
) -> float:
    """Thm 1 (linear Renyi bound) for noisy GD: alpha S_g^2 eta K / (4 sigma'^2 n^2).

    The vector fields differ by at most S_g/n (Lemma 4) over time eta K.  This is the composition
    baseline of the paper's Fig. 1 (= the Gaussian-mechanism composition alpha T
    (L/(n sigma))^2 / 2).
    """
    return alpha * S_g**2 * eta * K / (4.0 * sigma_prime**2 * n**2)


def thm2_rdp_paper(
    alpha: float, *, c_lsi: float, S_g: float, n: int, sigma_prime: float, eta: float, K: int
) -> float:
    """Thm 2 (RDP of noisy GD when the tracing diffusions are c-LSI throughout [0, eta K]):

    eps = alpha S_g^2 c / (2 sigma'^4 n^2) * (1 - exp(-sigma'^2 eta K / c)).
    """
    return (
        alpha
        * S_g**2
        * c_lsi
        / (2.0 * sigma_prime**4 * n**2)
        * (-math.expm1(-(sigma_prime**2) * eta * K / c_lsi))
    )


def corollary1_rdp_paper(
    alpha: float, *, S_g: float, n: int, sigma_prime: float, lam: float, eta: float, K: int
) -> float:
    """Corollary 1: Thm 2 with Lemma 5's c = 2 sigma'^2/lambda:

        eps = alpha S_g^2 / (lambda sigma'^2 n^2) * (1 - exp(-lambda eta K / 2)).

    Assumptions: lambda-strongly convex and beta-smooth loss on a closed convex set C, full batch,
    eta < 1/beta, theta_0 ~ Pi_C(N(0, (2 sigma'^2/lambda) I)).
    """
    c = lemma5_lsi_constant(sigma_prime, lam)
    return thm2_rdp_paper(alpha, c_lsi=c, S_g=S_g, n=n, sigma_prime=sigma_prime, eta=eta, K=K)


def corollary2_rdp_paper(
    alpha: float, *, S_g: float, n: int, sigma_prime: float, eta: float, K: int, lam: float = 1.0
) -> float:
    """Corollary 2 (loss (lambda/2)||theta - x||^2 on R^d; the paper states lambda = 1):

        eps = alpha S_g^2 / (lambda (2 - eta lambda) sigma'^2 n^2) * (1 - exp(-(2 - eta
            lambda) eta lambda K / 2)).

    For lambda = 1 this is the printed form (Thm 2 with c = 2 sigma'^2/(2 - eta)).  General lambda
    follows by the change of variables eta -> eta lambda, sigma'^2 -> sigma'^2/lambda,
    S_g -> S_g/lambda, which maps the lambda-scaled problem onto the lambda = 1 one exactly.
    """
    e = eta * lam
    return (
        alpha
        * S_g**2
        / (lam * (2.0 - e) * sigma_prime**2 * n**2)
        * (-math.expm1(-(2.0 - e) * e * K / 2.0))
    )


def thm3_lower_rdp_paper(
    alpha: float, *, S_g: float, n: int, sigma_prime: float, eta: float, K: int
) -> float:
    """Thm 3 (lower bound, l2-squared loss, eta < 1, theta_0 = 0): alpha S_g^2/(4 sigma'^2 n^2)
    (1 - e^{-eta K})."""
    return alpha * S_g**2 / (4.0 * sigma_prime**2 * n**2) * (-math.expm1(-eta * K))


def quadratic_exact_rdp_paper(
    alpha: float, *, S_g: float, n: int, sigma_prime: float, eta: float, K: int
) -> float:
    """Exact Renyi divergence of theta_K for the loss (1/2)||theta - x||^2 on R^d, theta_0 fixed.

    theta_K is Gaussian with mean xbar (1 - (1-eta)^K) and per-coordinate variance
    2 eta sigma'^2 sum_{j<K} (1-eta)^{2j}; the means differ by at most S_g/n, so

        R_alpha = alpha S_g^2 (2 - eta) / (4 sigma'^2 n^2) * (1 - r) / (1 + r),   r = (1 - eta)^K.
    """
    r = (1.0 - eta) ** K
    return alpha * S_g**2 * (2.0 - eta) / (4.0 * sigma_prime**2 * n**2) * (1.0 - r) / (1.0 + r)


# ---------------------------------------------------------------------------- canonical units
def composition_baseline_rdp(alpha: float, *, L: float, n: int, sigma: float, T: int) -> float:
    """Thm 1 in canonical units: alpha T L^2 / (2 n^2 sigma^2) (eta cancels)."""
    return alpha * T * L**2 / (2.0 * n**2 * sigma**2)


def corollary1_rdp(
    alpha: float, *, L: float, n: int, m: float, eta: float, sigma: float, T: int
) -> float:
    """Corollary 1 in canonical units: 2 alpha L^2 / (m eta sigma^2 n^2) * (1 -
    exp(-m eta T / 2))."""
    sp = sigma_prime_from_canonical(sigma, eta)
    return corollary1_rdp_paper(alpha, S_g=L, n=n, sigma_prime=sp, lam=m, eta=eta, K=T)


def corollary1_rdp_limit(
    alpha: float, *, L: float, n: int, m: float, eta: float, sigma: float
) -> float:
    """sup over T of Corollary 1 (its T -> infinity limit; the bound increases in T): 2 alpha L^2/(m
    eta sigma^2 n^2)."""
    return 2.0 * alpha * L**2 / (m * eta * sigma**2 * n**2)


def corollary2_rdp(
    alpha: float, *, L: float, n: int, lam: float, eta: float, sigma: float, T: int
) -> float:
    """Corollary 2 (loss (lambda/2)||theta - x||^2, unconstrained) in canonical units."""
    sp = sigma_prime_from_canonical(sigma, eta)
    return corollary2_rdp_paper(alpha, S_g=L, n=n, sigma_prime=sp, eta=eta, K=T, lam=lam)


def corollary2_rdp_limit(
    alpha: float, *, L: float, n: int, lam: float, eta: float, sigma: float
) -> float:
    """sup over T of Corollary 2: 2 alpha L^2 / (lambda eta (2 - eta lambda) sigma^2 n^2)."""
    return 2.0 * alpha * L**2 / (lam * eta * (2.0 - eta * lam) * sigma**2 * n**2)


# ---------------------------------------------------------------------------- applicability
def _require_full_batch_strongly_convex(run: Run) -> tuple[float, float, float]:
    """(m, M, eta) or NotApplicable with the reason."""
    if run.algorithm != "gd":
        raise NotApplicable(f"langevin-lsi needs full-batch gd (the run uses {run.algorithm})")
    if run.m is None or run.m <= 0:
        raise NotApplicable("langevin-lsi needs strong convexity m > 0 (Lemma 5)")
    if run.M is None:
        raise NotApplicable("langevin-lsi needs smoothness M (Lemma 5: lr < 1/M)")
    if not run.constant_lr:
        raise NotApplicable("langevin-lsi needs a constant learning rate (the run has a schedule)")
    return float(run.m), float(run.M), run.eta


def _linear_rdp_result(
    run: Run,
    query: Query,
    *,
    theorem: str,
    reference: str,
    rdp: Callable[[float], float],
    rdp_lim: Callable[[float], float],
    details: dict[str, Any],
    assumptions: tuple[str, ...],
) -> Result:
    """Result of a linear RDP curve ``rdp(alpha) = rho alpha`` (both corollaries are of this form):
    ``details`` completed by ``rho``, ``rho_limit`` (sup over T) and ``epsilon_limit``."""
    details.update({"rho": rdp(1.0), "rho_limit": rdp_lim(1.0)})
    details.update(rdp_epsilon_limit(rdp_lim, query))
    return rdp_result(
        "langevin-lsi",
        theorem=theorem,
        reference=reference,
        rdp=rdp,
        query=query,
        run=run,
        details=details,
        linear_rho=rdp(1.0),
        assumptions=assumptions,
    )


# ---------------------------------------------------------------------------- registered bounds
@register(
    "langevin-lsi",
    theorem="Corollary 1 (Thm 2 + Lemma 5: LSI of the tracing diffusion)",
    reference=REFERENCE + ", Corollary 1",
    algorithms=("gd",),
)
def langevin_corollary1(run: Run, query: Query) -> Result:
    """Corollary 1 of paper 001 (RDP, valid for every order alpha > 1):

        eps(alpha) = 2 alpha L^2 / (m eta sigma^2 n^2) * (1 - exp(-m eta T / 2))

    Assumptions (checked): full-batch gd, m-strongly convex and M-smooth per-example losses,
    constant lr eta < 1/M (Lemma 5).  Assumption that the Run cannot express (listed in the result):
    the initial point is random, theta_0 ~ Pi_C(N(0, (2 sigma'^2/m) I)) = Pi_C(N(0, (eta sigma^2/m)
    I)). A fixed initial point is NOT covered by Lemma 5.
    """
    m, M, eta = _require_full_batch_strongly_convex(run)
    if not eta < 1.0 / M:
        raise NotApplicable(f"lr={eta:g} >= 1/M={1.0 / M:g} (Lemma 5 needs lr < 1/M)")
    L, n, sigma, T = run.L, run.n, run.sigma, run.T
    sp = sigma_prime_from_canonical(sigma, eta)
    init_var = 2.0 * sp**2 / m

    def rdp(alpha: float) -> float:
        return corollary1_rdp(alpha, L=L, n=n, m=m, eta=eta, sigma=sigma, T=T)

    def rdp_lim(alpha: float) -> float:
        return corollary1_rdp_limit(alpha, L=L, n=n, m=m, eta=eta, sigma=sigma)

    return _linear_rdp_result(
        run,
        query,
        theorem="Corollary 1 (Thm 2 + Lemma 5)",
        reference=REFERENCE + ", Corollary 1, Lemma 5, Thm 2",
        rdp=rdp,
        rdp_lim=rdp_lim,
        details={
            "sigma_prime": sp,
            "lsi_constant": lemma5_lsi_constant(sp, m),
            "init_variance": init_var,
        },
        assumptions=(
            f"full-batch gd, m={m:g}-strongly convex and M={M:g}-smooth losses, lr={eta:g} < 1/M",
            (
                "initialisation theta_0 ~ Proj_C(N(0, (2 sigma'^2/m) I)) with sigma'^2 = "
                f"lr sigma^2/2, i.e. variance {init_var:.6g} per coordinate (Lemma 5); a "
                "fixed theta_0 is not covered"
            ),
            (
                "the update uses the declared loss gradients (no active clipping), sensitivity of "
                "the summed gradient S_g = L"
            ),
        ),
    )


@register(
    "langevin-lsi",
    theorem="Corollary 2 (l2-squared loss, exact LSI constant)",
    reference=REFERENCE + ", Corollary 2",
    algorithms=("gd",),
)
def langevin_corollary2(run: Run, query: Query) -> Result:
    """Corollary 2 of paper 001 for the loss (m/2)||theta - x||^2 on R^d (any start point):

        eps(alpha) = 2 alpha L^2 / (m eta (2 - eta m) sigma^2 n^2) * (1 - exp(-(2 -
            eta m) eta m T / 2)).

    A loss that is m-strongly convex AND m-smooth (m = M) is exactly of this form (its Hessian is
    m I), so the run qualifies when it declares m = M, no projection (D absent) and eta m < 1 (the
    range of Thm 3 / Cor 2 in the paper).  The paper states lambda = 1; general m by rescaling (see
    :func:`corollary2_rdp_paper`).
    """
    m, M, eta = _require_full_batch_strongly_convex(run)
    if abs(m - M) > 1e-12 * M:
        raise NotApplicable(
            f"Corollary 2 needs the l2-squared loss, i.e. m = M (got m={m:g}, M={M:g})"
        )
    if run.D is not None:
        raise NotApplicable(
            "Corollary 2 is for the unconstrained problem (no projection / diameter)"
        )
    if not eta * m < 1.0:
        raise NotApplicable(f"lr*m={eta * m:g} >= 1 (Corollary 2 / Thm 3 need lr m < 1)")
    L, n, sigma, T = run.L, run.n, run.sigma, run.T

    def rdp(alpha: float) -> float:
        return corollary2_rdp(alpha, L=L, n=n, lam=m, eta=eta, sigma=sigma, T=T)

    def rdp_lim(alpha: float) -> float:
        return corollary2_rdp_limit(alpha, L=L, n=n, lam=m, eta=eta, sigma=sigma)

    return _linear_rdp_result(
        run,
        query,
        theorem="Corollary 2 (l2-squared loss)",
        reference=REFERENCE + ", Corollary 2, Thm 2",
        rdp=rdp,
        rdp_lim=rdp_lim,
        details={},
        assumptions=(
            (
                f"loss (m/2)||theta - x||^2 with m = M = {m:g} (declared m = M), "
                "unconstrained, full-batch gd"
            ),
            f"lr m = {eta * m:g} < 1; any fixed start point",
        ),
    )
