"""Empirical privacy audits: catch a wrong bound before it ships.

* :mod:`~lastiterate.audit.stats` - Clopper-Pearson / DKW confidence bounds, certified lower
  bounds ``mu_lb`` (GDP) and ``eps_lb`` (non-parametric, at delta), threshold strategies
  (:class:`Split`, :class:`Bonferroni`, :class:`Explicit`, :class:`DKW`), :func:`fdp_violation`.
* :mod:`~lastiterate.audit.reference` - exact privacy of extremal instances: Gaussian
  propagation for quadratic/linear NoisyGD and NoisyCGD, the projected random walk (Markov chain
  with boundary atoms), linear NoisySGD (binomial mixture).
* :mod:`~lastiterate.audit.simulate` - vectorised N-chain simulators of NoisyGD / NoisyCGD /
  NoisySGD (uniform, Poisson, shuffled batches), with projection and coupled randomness.
* :mod:`~lastiterate.audit.canary` / :mod:`~lastiterate.audit.mia` - audits of the trainer's
  final models: canaries (:func:`audit_canary`) and membership inference (:func:`audit_mia`).
* :mod:`~lastiterate.audit.one_run` - the one-run audit (Steinke, Nasr, Jagielski 2023): m
  canaries inserted by fair coins into ONE training run, epsilon lower bound from the tail of
  the number of correct guesses; and its f-DP refinement (Mahloujifar, Melis, Chaudhuri 2024):
  the largest GDP mu (and tradeoff curve) the same guesses reject.
* :mod:`~lastiterate.audit.report` - :class:`AuditResult` and :func:`audit_run`, which audits
  every bound the accountant reports for a :class:`~lastiterate.run.Run`.

Quick use::

    from lastiterate.run import Run
    from lastiterate.audit import audit_run
    run = Run(algorithm="gd", n=4, lr=0.1, steps=100, noise_std=1.0, sensitivity=1.0,
              strong_convexity=1.0, smoothness=1.0)
    print(audit_run(run, N=200_000, seed=0).format())

Imports are lazy (PEP 562) so that ``import lastiterate.audit`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "audit_canary": "canary",
    "CanaryAuditResult": "canary",
    "TrainerSpec": "canary",
    "gradient_canary": "canary",
    "input_canary": "canary",
    "MIAResult": "mia",
    "ModelSpec": "mia",
    "audit_mia": "mia",
    "OneRunAuditResult": "one_run",
    "audit_one_run": "one_run",
    "one_run_epsilon_lb": "one_run",
    "one_run_gradient_canaries": "one_run",
    "one_run_input_canaries": "one_run",
    "one_run_p_value": "one_run",
    "PairOneRunBound": "mia",
    "pair_one_run_bound": "mia",
    "OneRunFdpGuess": "one_run",
    "one_run_fdp_bound": "one_run",
    "fdp_one_run_mu_lb": "one_run",
    "fdp_one_run_epsilon_lb": "one_run",
    "fdp_one_run_rejects": "one_run",
    "fdp_one_run_statistic": "one_run",
    "AuditResult": "report",
    "ClaimCheck": "report",
    "audit_run": "report",
    "audit_spec": "report",
    "reference_for_spec": "report",
    "verdict_for": "report",
    "ChainSpec": "simulate",
    "coupled_trace": "simulate",
    "simulate": "simulate",
    "simulate_pair": "simulate",
    "spec_from_run": "simulate",
    "Bonferroni": "stats",
    "DKW": "stats",
    "Explicit": "stats",
    "Split": "stats",
    "audit_scores": "stats",
    "clopper_pearson_lower": "stats",
    "clopper_pearson_upper": "stats",
    "dkw_epsilon": "stats",
    "eps_lb_two_sided": "stats",
    "fdp_violation": "stats",
    "mu_lb_gdp": "stats",
    "cgd_quadratic_mu": "reference",
    "gaussian_propagation_mu": "reference",
    "gaussian_quadratic_mu": "reference",
    "linear_sgd_curve": "reference",
    "linear_sgd_heuristic_curve": "reference",
    "linear_unconstrained_mu": "reference",
    "projected_walk_curve": "reference",
}

__all__ = [
    "DKW",
    "AuditResult",
    "Bonferroni",
    "CanaryAuditResult",
    "ChainSpec",
    "ClaimCheck",
    "Explicit",
    "MIAResult",
    "ModelSpec",
    "OneRunAuditResult",
    "OneRunFdpGuess",
    "PairOneRunBound",
    "Split",
    "TrainerSpec",
    "audit_canary",
    "audit_mia",
    "audit_one_run",
    "audit_run",
    "audit_scores",
    "audit_spec",
    "cgd_quadratic_mu",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "coupled_trace",
    "dkw_epsilon",
    "eps_lb_two_sided",
    "fdp_one_run_epsilon_lb",
    "fdp_one_run_mu_lb",
    "fdp_one_run_rejects",
    "fdp_one_run_statistic",
    "fdp_violation",
    "gaussian_propagation_mu",
    "gaussian_quadratic_mu",
    "gradient_canary",
    "input_canary",
    "linear_sgd_curve",
    "linear_sgd_heuristic_curve",
    "linear_unconstrained_mu",
    "mu_lb_gdp",
    "one_run_epsilon_lb",
    "one_run_fdp_bound",
    "one_run_gradient_canaries",
    "one_run_input_canaries",
    "one_run_p_value",
    "pair_one_run_bound",
    "projected_walk_curve",
    "reference_for_spec",
    "simulate",
    "simulate_pair",
    "spec_from_run",
    "verdict_for",
]


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'lastiterate.audit' has no attribute {name!r}")
    return getattr(importlib.import_module(f"lastiterate.audit.{mod}"), name)


def __dir__() -> list[str]:
    return __all__
