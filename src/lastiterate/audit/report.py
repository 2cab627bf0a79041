"""Audit results and the end-to-end Monte-Carlo audit of a described run.

:func:`audit_run` takes a :class:`lastiterate.run.Run`, builds the worst-case world pair for it
(:func:`lastiterate.audit.simulate.spec_from_run`), simulates N chains per world, computes
certified lower bounds (mu_lb, and eps_lb at delta) and compares them with EVERY guarantee of kind
"bound" that :func:`lastiterate.accountant.account` reports for the run.  Where the pair has an
exactly computable privacy curve (quadratic / linear losses, the projected walk, linear NoisySGD)
the exact value is attached as ``reference_mu`` / ``reference_eps``, and compared as well: an exact
value above a claim is a violation without any sampling error.

Verdicts:

* ``"VIOLATION"``: some claim is below a certified lower bound (probability of a false alarm
  <= alpha), or below the exact reference value;
* ``"ok"``: every claim is at least the lower bounds, and the audit found leakage (mu_lb > 0 or
  eps_lb > 0), i.e. it had some power;
* ``"inconclusive"``: no claim to check, or the audit could not certify any leakage.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lastiterate.accountant import account
from lastiterate.audit import reference as ref
from lastiterate.audit.simulate import ChainSpec, scores, simulate_pair, spec_from_run
from lastiterate.audit.stats import ThresholdStrategy, _gdp_epsilon, audit_scores
from lastiterate.errors import NotApplicable, ParameterError
from lastiterate.formatting import fmt_number

__all__ = [
    "AuditResult",
    "ClaimCheck",
    "audit_run",
    "audit_spec",
    "reference_for_spec",
    "verdict_for",
]

VERDICTS = ("ok", "VIOLATION", "inconclusive")

#: relative slack for comparing an exact (numerically computed) reference value with a claim
REFERENCE_RTOL = 1e-6
#: the projected-walk references are grid approximations (500 vs 1000 bins agree to ~1e-3 in eps)
GRID_REFERENCE_RTOL = 2e-3
#: finer grids cost O(bins^2) per step (O(bins^3) per squaring); beyond this no walk reference is
#: given
MAX_WALK_BINS = 2000


def _reference_rtol(description: str) -> float:
    return GRID_REFERENCE_RTOL if "Markov chain" in description else REFERENCE_RTOL


@dataclass(frozen=True)
class ClaimCheck:
    """One accountant result compared with the audit."""

    bound: str
    theorem: str
    claim_mu: float | None
    claim_eps: float
    delta: float | None
    verdict: str
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: _jf(v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class AuditResult:
    """The outcome of one Monte-Carlo audit (auditing-notes section 4, ``report.py``)."""

    name: str
    claim_mu: float | None
    claim_eps: float | None
    delta: float | None
    mu_lb: float
    eps_lb: float | None
    N: int
    seed: int
    seconds: float
    verdict: str
    alpha: float = 1e-3
    claim_bound: str | None = None
    reference_mu: float | None = None
    reference_eps: float | None = None
    strategy: str = ""
    checks: tuple[ClaimCheck, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict={self.verdict!r} must be one of {VERDICTS}")

    @property
    def violations(self) -> tuple[ClaimCheck, ...]:
        return tuple(c for c in self.checks if c.verdict == "VIOLATION")

    def to_json(self) -> dict[str, Any]:
        out = {k: _jf(v) for k, v in self.__dict__.items() if k not in ("checks", "details")}
        out["checks"] = [c.to_json() for c in self.checks]
        out["details"] = {k: _jf(v) for k, v in self.details.items()}
        return out

    def format(self) -> str:
        f = fmt_number
        lines = [f"Audit {self.name}: {self.verdict}"]
        claim = f"mu = {f(self.claim_mu)}" if self.claim_mu is not None else ""
        if self.claim_eps is not None:
            claim += (
                ", " if claim else ""
            ) + f"epsilon = {f(self.claim_eps)} at delta = {self.delta:g}"
        lines.append(f"  claim ({self.claim_bound or '-'}): {claim or '-'}")
        lb = f"mu_lb = {f(self.mu_lb)}"
        if self.eps_lb is not None:
            lb += f", eps_lb = {f(self.eps_lb)}"
        lines.append(
            f"  Monte-Carlo lower bounds (confidence {1 - self.alpha:g}, {self.strategy}): {lb}"
        )
        if self.reference_mu is not None or self.reference_eps is not None:
            ref = []
            if self.reference_mu is not None:
                ref.append(f"mu = {f(self.reference_mu)}")
            if self.reference_eps is not None:
                ref.append(f"epsilon = {f(self.reference_eps)}")
            lines.append("  exact reference: " + ", ".join(ref))
        lines.append(f"  {self.N} chains per world, seed {self.seed}, {self.seconds:.2f} s")
        for c in self.checks:
            mu = f", mu {f(c.claim_mu)}" if c.claim_mu is not None else ""
            lines.append(f"  {c.verdict:<12} {c.bound:<22} eps {f(c.claim_eps)}{mu}  {c.reason}")
        return "\n".join(lines)


def _jf(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        v = float(v)
        return v if math.isfinite(v) else str(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


# ---------------------------------------------------------------------- verdicts
def verdict_for(
    *,
    mu_lb: float,
    eps_lb: float | None,
    claim_mu: float | None,
    claim_eps: float | None,
    reference_mu: float | None = None,
    reference_eps: float | None = None,
    reference_rtol: float = REFERENCE_RTOL,
) -> tuple[str, str]:
    """(verdict, reason) of one claim against the certified lower bounds and the exact reference
    (which must exceed the claim by more than ``reference_rtol``, its numerical accuracy)."""
    if claim_mu is None and claim_eps is None:
        return "inconclusive", "no claim"
    tol = 1 + reference_rtol
    if claim_mu is not None and mu_lb > claim_mu:
        return "VIOLATION", f"mu_lb {mu_lb:.6g} > claimed mu {claim_mu:.6g}"
    if claim_eps is not None and eps_lb is not None and eps_lb > claim_eps:
        return "VIOLATION", f"eps_lb {eps_lb:.6g} > claimed epsilon {claim_eps:.6g}"
    if claim_mu is not None and reference_mu is not None and reference_mu > claim_mu * tol:
        return "VIOLATION", f"exact mu {reference_mu:.6g} > claimed mu {claim_mu:.6g}"
    if (
        claim_eps is not None
        and reference_eps is not None
        and reference_eps > claim_eps * tol + 1e-9
    ):
        return "VIOLATION", f"exact epsilon {reference_eps:.6g} > claimed epsilon {claim_eps:.6g}"
    if mu_lb <= 0 and (eps_lb is None or eps_lb <= 0):
        return "inconclusive", "no leakage certified (the audit has no power here)"
    parts = []
    if claim_mu is not None and claim_mu > 0:
        parts.append(f"mu_lb/claim = {mu_lb / claim_mu:.3f}")
    if claim_eps is not None and eps_lb is not None and claim_eps > 0:
        parts.append(f"eps_lb/claim = {eps_lb / claim_eps:.3f}")
    return "ok", ", ".join(parts)


# ---------------------------------------------------------------------- exact references
def reference_for_spec(
    spec: ChainSpec, delta: float | None
) -> tuple[float | None, float | None, str]:
    """(exact mu or None, exact eps(delta) or None, description) for the simulated pair, if
    known."""

    kappa = spec.kappa
    etas = spec.etas
    const_lr = bool(np.all(etas == etas[0]))
    if spec.diameter is None and spec.dim == 1 and (spec.algorithm in ("gd", "cgd")):
        # Gaussian iterates: brute-force mean/variance propagation
        A = [np.array([[1.0 - e * kappa[0]]]) for e in etas]
        kicks = np.zeros((spec.T, 1))
        if spec.algorithm == "gd":
            kicks[:, 0] = etas * spec.L / spec.n
        else:
            sizes = spec.partition_sizes()
            l = sizes.size
            pos = l - 1 if spec.position is None else spec.position
            for t in range(spec.T):
                if t % l == pos:
                    kicks[t, 0] = etas[t] * spec.L / sizes[pos]
        mu = (
            ref.gaussian_propagation_mu(A, kicks, etas * spec.sigma) if spec.sigma > 0 else math.inf
        )
        eps = _gdp_epsilon(delta, mu) if delta is not None and math.isfinite(mu) else None
        return mu, eps, "Gaussian mean/variance propagation (exact)"
    if spec.dim != 1 or np.any(kappa):
        return None, None, ""
    bins = 500
    if spec.diameter is not None and spec.sigma > 0:
        bins = max(bins, ref.walk_bins_needed(spec.diameter, float(etas.min()) * spec.sigma))
        if bins > MAX_WALK_BINS:
            return None, None, ""  # noise too small against the domain for an accurate grid chain
    g_d, g_dp = -spec.offset, spec.L - spec.offset  # per-inclusion pushes along u in D and D'
    if not const_lr:
        if spec.diameter is None or spec.x0 != 0.0 or delta is None or spec.sigma <= 0:
            return None, None, ""
        if spec.algorithm == "gd":
            norm, pin = float(spec.n), 1.0
        elif spec.algorithm == "sgd" and spec.sampling in ("uniform", "poisson"):
            norm, pin = float(spec.b), spec.b / spec.n
        else:
            return None, None, ""
        curve = ref.projected_walk_schedule_curve(
            spec.diameter,
            etas * spec.sigma,
            etas * g_dp / norm,
            bins,
            p_include=pin,
            a_d=etas * g_d / norm,
        )
        return (
            None,
            curve.epsilon(delta),
            f"projected random walk with a step-size schedule, Markov chain ({bins} bins)",
        )
    eta = float(etas[0])
    s = eta * spec.sigma
    if spec.diameter is not None and spec.x0 == 0.0 and delta is not None and s > 0:
        if spec.algorithm == "gd":
            curve = ref.projected_walk_curve(
                spec.diameter, s, eta * g_dp / spec.n, spec.T, bins, a_d=eta * g_d / spec.n
            )
            return None, curve.epsilon(delta), f"projected random walk, Markov chain ({bins} bins)"
        if spec.algorithm == "cgd":
            sizes = spec.partition_sizes()
            pos = sizes.size - 1 if spec.position is None else spec.position
            pattern = np.zeros(sizes.size)
            pattern[pos] = 1.0
            bsz = sizes[pos]
            curve = ref.projected_walk_curve(
                spec.diameter,
                s,
                eta * g_dp / bsz,
                spec.T,
                bins,
                p_include=pattern,
                a_d=eta * g_d / bsz,
            )
            return (
                None,
                curve.epsilon(delta),
                f"cyclic projected random walk, Markov chain ({bins} bins)",
            )
        if spec.algorithm == "sgd" and spec.sampling in ("uniform", "poisson"):
            curve = ref.projected_walk_curve(
                spec.diameter,
                s,
                eta * g_dp / spec.b,
                spec.T,
                bins,
                p_include=spec.b / spec.n,
                a_d=eta * g_d / spec.b,
            )
            return (
                None,
                curve.epsilon(delta),
                f"sampled projected random walk, Markov chain ({bins} bins)",
            )
        return None, None, ""
    if (
        spec.diameter is None
        and spec.algorithm == "sgd"
        and spec.sampling in ("uniform", "poisson")
        and delta is not None
        and s > 0
    ):
        mixture = ref.linear_sgd_curve(
            spec.T, spec.b / spec.n, eta * g_dp / spec.b, s, a_d=eta * g_d / spec.b
        )
        return (
            None,
            mixture.epsilon(delta),
            "linear NoisySGD: Binomial mixtures (exact, closed form)",
        )
    return None, None, ""


# ---------------------------------------------------------------------- end-to-end audits
def audit_spec(
    spec: ChainSpec,
    *,
    N: int = 200_000,
    seed: int = 0,
    alpha: float = 1e-3,
    delta: float | None = 1e-5,
    claim_mu: float | None = None,
    claim_eps: float | None = None,
    claim_bound: str | None = None,
    simulated: ChainSpec | None = None,
    strategy: ThresholdStrategy | None = None,
    reference: bool = True,
    name: str = "spec",
) -> AuditResult:
    """Audit a world pair against an explicit claim (no accountant involved).

    ``simulated``: simulate this spec instead (a test double, e.g. half the noise), while the claim
    refers to ``spec``.  The exact reference is always that of the SIMULATED pair."""
    t0 = time.perf_counter()
    sim = simulated or spec
    x, y = simulate_pair(sim, N, seed)
    sa = audit_scores(
        scores(sim, x), scores(sim, y), delta=delta, alpha=alpha, strategy=strategy, seed=seed
    )
    ref_mu, ref_eps, ref_desc = reference_for_spec(sim, delta) if reference else (None, None, "")
    verdict, reason = verdict_for(
        mu_lb=sa.mu_lb,
        eps_lb=sa.eps_lb,
        claim_mu=claim_mu,
        claim_eps=claim_eps,
        reference_mu=ref_mu,
        reference_eps=ref_eps,
        reference_rtol=_reference_rtol(ref_desc),
    )
    check = ClaimCheck(
        claim_bound or "claim",
        "",
        claim_mu,
        claim_eps if claim_eps is not None else math.nan,
        delta,
        verdict,
        reason,
    )
    return AuditResult(
        name=name,
        claim_mu=claim_mu,
        claim_eps=claim_eps,
        delta=delta,
        mu_lb=sa.mu_lb,
        eps_lb=sa.eps_lb,
        N=N,
        seed=seed,
        seconds=time.perf_counter() - t0,
        verdict=verdict,
        alpha=alpha,
        claim_bound=claim_bound,
        reference_mu=ref_mu,
        reference_eps=ref_eps,
        strategy=sa.strategy,
        checks=(check,),
        details={
            "reference": ref_desc,
            "mu_test_threshold": sa.best_mu_test.threshold if sa.best_mu_test else None,
        },
    )


def audit_run(
    run: Any,
    *,
    scenario: str = "auto",
    N: int = 200_000,
    seed: int = 0,
    alpha: float = 1e-3,
    delta: float = 1e-5,
    bounds: Any = None,
    position: int | None = None,
    noise_scale: float = 1.0,
    sensitivity_scale: float = 1.0,
    strategy: ThresholdStrategy | None = None,
    reference: bool = True,
    pair: str = "auto",
) -> AuditResult:
    """Monte-Carlo audit of every bound the accountant reports for ``run``.

    ``scenario``: "quadratic", "linear" (with the run's diameter this is the projected walk) or
    "auto" (see :func:`spec_from_run`).  ``noise_scale`` / ``sensitivity_scale`` simulate a test
    double (a mutated implementation) whose noise / gradient difference is scaled, while the claims
    are those of the unmodified run: a sound audit must then report VIOLATION.

    ``pair``: the differing example's gradients (replace-one).  "difference": g = 0 in D and
    g' = -L u in D' -- constrained only by the sensitivity L = sup ||g - g'|| that the Run
    documents; "antipodal": g = +(L/2) u, g' = -(L/2) u, the worst case when every per-example
    gradient also has norm <= C = L/2 (clipping); "auto": antipodal when the run declares a clip
    norm, difference otherwise.  Full-batch and cyclic runs do not depend on this choice.

    Add/remove adjacency is simulated only for Poisson batches with a linear loss (an example with
    zero gradient is then the same as an absent one); other add/remove runs raise NotApplicable.
    """

    t0 = time.perf_counter()
    if pair not in ("auto", "difference", "antipodal"):
        raise ParameterError("pair", pair, "must be one of auto, difference, antipodal")
    if pair == "auto":
        pair = "antipodal" if run.clip is not None and run.adjacency == "replace" else "difference"
    offset = run.L / 2 if pair == "antipodal" else 0.0
    spec = spec_from_run(run, loss=scenario, position=position, offset=offset)
    if run.adjacency != "replace" and not (
        run.algorithm == "sgd"
        and run.sampling_scheme == "poisson"
        and not np.any(spec.kappa)
        and offset == 0.0
    ):
        raise NotApplicable(
            "the audit simulates replace-one pairs; add/remove adjacency is simulated only for "
            "Poisson "
            "batches with a linear loss (pair 'difference')"
        )
    # the pair scales with L (an antipodal pair stays antipodal: offset L/2 -> L s/2)
    sim = spec.with_(
        sigma=spec.sigma * noise_scale,
        L=spec.L * sensitivity_scale,
        offset=spec.offset * sensitivity_scale,
    )
    x, y = simulate_pair(sim, N, seed)
    sa = audit_scores(
        scores(sim, x), scores(sim, y), delta=delta, alpha=alpha, strategy=strategy, seed=seed
    )
    ref_mu, ref_eps, ref_desc = reference_for_spec(sim, delta) if reference else (None, None, "")
    rep = account(run, delta=delta, bounds=bounds)
    checks = []
    for r in rep.results:
        if r.kind != "bound":
            continue
        v, reason = verdict_for(
            mu_lb=sa.mu_lb,
            eps_lb=sa.eps_lb,
            claim_mu=r.mu,
            claim_eps=r.epsilon,
            reference_mu=ref_mu,
            reference_eps=ref_eps,
            reference_rtol=_reference_rtol(ref_desc),
        )
        checks.append(ClaimCheck(r.bound, r.theorem, r.mu, r.epsilon, r.delta, v, reason))
    best = rep.best
    if any(c.verdict == "VIOLATION" for c in checks):
        verdict = "VIOLATION"
    elif best is None:
        verdict = "inconclusive"
    else:
        verdict = next(c.verdict for c in checks if c.bound == best.bound)
    name = (
        f"{scenario if scenario != 'auto' else ('quadratic' if np.any(spec.kappa) else 'linear')}"
    )
    if spec.diameter is not None and not np.any(spec.kappa):
        name = "projected-walk"
    return AuditResult(
        name=f"{name} ({run.algorithm})",
        claim_mu=None if best is None else best.mu,
        claim_eps=None if best is None else best.epsilon,
        delta=delta,
        mu_lb=sa.mu_lb,
        eps_lb=sa.eps_lb,
        N=N,
        seed=seed,
        seconds=time.perf_counter() - t0,
        verdict=verdict,
        alpha=alpha,
        claim_bound=None if best is None else best.bound,
        reference_mu=ref_mu,
        reference_eps=ref_eps,
        strategy=sa.strategy,
        checks=tuple(checks),
        details={
            "reference": ref_desc,
            "curvature": float(spec.kappa[0]),
            "pair": pair,
            "noise_scale": noise_scale,
            "sensitivity_scale": sensitivity_scale,
            "not_applicable": "; ".join(f"{n.bound}: {n.reason}" for n in rep.not_applicable),
        },
    )
