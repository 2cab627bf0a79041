"""Budget stop: the largest number of steps whose final-model guarantee meets a target epsilon.

Only the model at the stopping step is released, so what must meet the budget is the guarantee of
the run TRUNCATED at that step -- ``account(run.replace(steps=t))`` -- not of the planned run.
:func:`allowed_steps` computes the stopping step up front (before any training) by an expanding
search and bisection over t, then re-checks the answer: whatever the search assumed, the returned
``t`` satisfies ``best_epsilon(t) <= target``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lastiterate.accountant import account
from lastiterate.errors import NotApplicable, ParameterError, check_positive
from lastiterate.run import Run


def truncate(run: Run, steps: int) -> Run:
    """``run`` stopped after ``steps`` steps (a learning-rate schedule is cut accordingly).

    Args:
        run: the planned run.
        steps: the stopping step t (1 <= t <= run.T).

    Returns:
        ``run`` itself when t = T, else the run of the first t steps.
    """
    if steps == run.T:
        return run
    if run.constant_lr:
        return run.replace(steps=steps, lr=run.eta)
    return run.replace(steps=steps, lr=tuple(run.lr_schedule[:steps]))


def best_epsilon(run: Run, delta: float, bounds: Sequence[str] | None = None) -> tuple[float, Any]:
    rep = account(run, delta=delta, bounds=bounds)
    best = rep.best
    if best is None:
        raise NotApplicable(f"no applicable bound for this run: {rep.no_bound_reason()}")
    return float(best.epsilon), rep


@dataclass(frozen=True)
class Budget:
    """The result of :func:`allowed_steps`.

    Attributes:
        target_epsilon: the budget.
        delta: the delta of every guarantee compared with it.
        planned_steps: T of the planned run.
        allowed_steps: the stopping step t (<= T) whose truncated run meets the budget.
        epsilon_at_stop: the best guarantee of the run truncated at t.
        bound_at_stop: the bound id that gives it.
        epsilon_planned: the guarantee of the planned run (None when not evaluated).
    """

    target_epsilon: float
    delta: float
    planned_steps: int
    allowed_steps: int
    epsilon_at_stop: float
    bound_at_stop: str
    epsilon_planned: float | None  # guarantee of the planned run (None when not evaluated)

    @property
    def stops_early(self) -> bool:
        """Whether training stops before the planned steps (t < T)."""
        return self.allowed_steps < self.planned_steps

    def message(self) -> str:
        """One line for the user: where training stops and the guarantee there.

        Returns:
            The message (it says whether the budget stops training early).
        """
        if self.stops_early:
            return (
                "budget stop: the final-model guarantee stays within "
                f"epsilon={self.target_epsilon:g} (delta={self.delta:g}) for {self.allowed_steps} "
                f"of the {self.planned_steps} planned steps (epsilon={self.epsilon_at_stop:.6g} "
                f"there, {self.bound_at_stop}); training stops at step {self.allowed_steps}"
            )
        return (
            f"budget: all {self.planned_steps} planned steps fit within "
            f"epsilon={self.target_epsilon:g} "
            f"(epsilon={self.epsilon_at_stop:.6g}, {self.bound_at_stop})"
        )

    def to_json(self) -> dict[str, Any]:
        """The budget as a JSON-safe dict (standard JSON values only).

        Returns:
            The fields, ``stops_early`` and ``message``.
        """
        return {
            "target_epsilon": self.target_epsilon,
            "delta": self.delta,
            "planned_steps": self.planned_steps,
            "allowed_steps": self.allowed_steps,
            "stops_early": self.stops_early,
            "epsilon_at_stop": self.epsilon_at_stop,
            "bound_at_stop": self.bound_at_stop,
            "message": self.message(),
        }


def allowed_steps(
    run: Run, target_epsilon: float, delta: float = 1e-5, bounds: Sequence[str] | None = None
) -> Budget:
    """The largest t <= run.T with ``best_epsilon(truncate(run, t)) <= target_epsilon``.

    Only the final model is released, so the guarantee that must meet the budget is that of the
    run truncated at the stopping step; the search is re-checked so the returned t meets it.

    Args:
        run: the planned run.
        target_epsilon: the budget (> 0).
        delta: the delta of the guarantees (default 1e-5).
        bounds: restrict to these bound ids (default: every applicable bound).

    Returns:
        The :class:`Budget` (stopping step, guarantee there, guarantee of the planned run).

    Raises:
        ParameterError: target_epsilon is not positive, or even one step exceeds it.
        NotApplicable: no bound applies to the run.
    """
    target = check_positive("target_epsilon", target_epsilon)
    cache: dict[int, tuple[float, str]] = {}

    def eps(t: int) -> float:
        if t not in cache:
            e, rep = best_epsilon(truncate(run, t), delta, bounds)
            cache[t] = (e, rep.best.bound)
        return cache[t][0]

    T = run.T
    if eps(T) <= target:
        return Budget(target, delta, T, T, cache[T][0], cache[T][1], cache[T][0])
    if eps(1) > target:
        raise ParameterError(
            "target_epsilon",
            target_epsilon,
            f"is below the guarantee of a single step (epsilon={cache[1][0]:.6g} at "
            f"delta={delta:g}); raise it or the noise",
        )
    # expanding search from below, then bisection: lo is feasible, hi is not
    lo, hi = 1, 2
    while hi < T and eps(hi) <= target:
        lo, hi = hi, hi * 2
    hi = min(hi, T)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if eps(mid) <= target:
            lo = mid
        else:
            hi = mid
    # the answer must satisfy the target whatever monotonicity the search assumed
    if not cache[lo][0] <= target:  # pragma: no cover - lo is only ever set to a feasible t
        raise RuntimeError("budget search returned an infeasible step count")
    return Budget(target, delta, T, lo, cache[lo][0], cache[lo][1], cache[T][0])


__all__ = ["Budget", "allowed_steps", "best_epsilon", "truncate"]
