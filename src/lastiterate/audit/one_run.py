"""One-run audit (Steinke, Nasr, Jagielski, NeurIPS 2023): m canaries, ONE training run.

:mod:`lastiterate.audit.canary` trains hundreds of models per world.  This module trains ONE model
with the project's own trainer and still certifies a lower bound on epsilon, from m canaries whose
presence is decided by independent fair coins (Steinke, Nasr, Jagielski, "Privacy Auditing with One
(1) Training Run", arXiv 2305.08846, Algorithm 1):

1. draw S in {-1, +1}^m uniformly (secret from the guesser);
2. train on the data plus, for each canary i, its ``+`` version if S_i = +1 and its ``-`` version
   otherwise (replace-one adjacency: n is the same whatever S, and flipping one S_i replaces one
   row, so a replace-one (eps, delta)-DP trainer is (eps, delta)-DP in S);
3. score every canary on the FINAL model (higher = "looks like +") and guess T_i = +1 for the
   ``k_plus`` highest scores, -1 for the ``k_minus`` lowest, abstain (0) on the rest: r = k_plus +
   k_minus guesses, v of them correct (T_i = S_i);
4. reject "the trainer is (eps, delta)-DP" when the tail bound on v is below alpha.

The tail bound (their Theorem 5.2 / Corollary 5.4, with delta handled as in the paper): if the
mechanism is (eps, delta)-DP in S then, with q = e^eps / (1 + e^eps) (the accuracy of eps-DP
randomized response),

    P[V >= v] <= P[Binomial(r, q) >= v]
                 + 2 m delta * max_{1 <= i <= v} P[v - i <= Binomial(r, q) <= v - 1] / i,

for any guesser that sees only the output.  :func:`one_run_p_value` is this bound;
:func:`one_run_epsilon_lb` is the largest eps rejected at level alpha (the bound is nondecreasing
in eps, which the tests check; the search scans a grid from 0 and bisects the first crossing, and
returns its low end, so it never over-reports).  Several guess sizes k are tried with a
Bonferroni split of alpha (each at alpha / #sizes), so picking the best one afterwards keeps the
confidence 1 - alpha.

Canaries (:class:`OneRunCanaries`):

* ``gradient`` (white-box of the final model, hidden-state threat model): one new feature per
  canary, 0 in every other row; canary i is the row ``a e_{d+i}`` with label + / - as in
  :func:`lastiterate.audit.canary.gradient_canary` (only canary i's gradient touches column d+i:
  the crafted-gradient-every-step adversary of Cebere, Bellet, Papernot, ICLR 2025).  Score: the
  final weights projected on canary i's direction.
* ``input`` (black-box): m held-out points; ``+`` = the point with a wrong label, ``-`` = with its
  true label.  Score: loss(true label) - loss(wrong label) under the final model (membership of the
  mislabelled version lowers its loss).  Works for any model with ``per_example_losses`` (GLMs and
  MLPs).

The bound is loose by design (one run, m canaries): it certifies leakage, it cannot certify
privacy, so the verdict is VIOLATION (eps_lb above the claim) or consistent/inconclusive, never a
proof of the claim.  The f-DP refinement of Mahloujifar, Melis, Chaudhuri (2024) is not
implemented here.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import stats

from lastiterate.accountant import account
from lastiterate.audit.canary import (
    FAMILIES,
    GRADIENT_TARGET,
    INPUT_TARGET_SHIFT,
    _check_family,
    _scaled_noise,
    model_seed,
)
from lastiterate.audit.report import verdict_for
from lastiterate.errors import (
    NotApplicable,
    ParameterError,
    check_in_range,
    check_positive,
    check_positive_int,
)
from lastiterate.formatting import fmt_number
from lastiterate.train.randomness import SeededRunWarning

__all__ = [
    "OneRunAuditResult",
    "OneRunCanaries",
    "OneRunGuess",
    "audit_one_run",
    "canary_signs",
    "default_guess_sizes",
    "guess_from_scores",
    "one_run_bound",
    "one_run_epsilon_lb",
    "one_run_gradient_canaries",
    "one_run_input_canaries",
    "one_run_p_value",
    "one_run_scores",
]

#: largest epsilon the search considers (beyond it the p-value of any finite r is ~0 anyway)
EPS_SEARCH_MAX = 50.0
#: at most this many canaries (each adds a row, a gradient canary also a feature)
MAX_CANARIES = 100_000
#: gradient canaries build a dense (n + m) x (d + m) design: at most this many entries (800 MB)
MAX_DENSE_ENTRIES = 100_000_000


# ---------------------------------------------------------------------- the statistics
def _check_counts(m: int, r: int, v: int) -> tuple[int, int, int]:
    m = check_positive_int("m", m)
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or not 0 <= r <= m:
        raise ParameterError("r", r, f"must be an integer number of guesses in [0, m={m}]")
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= r:
        raise ParameterError("v", v, f"must be an integer number of correct guesses in [0, r={r}]")
    return m, int(r), int(v)


def one_run_p_value(m: int, r: int, v: int, eps: Any, delta: float) -> Any:
    """Steinke-Nasr-Jagielski (2023), Thm 5.2 / Cor 5.4: an upper bound on P[V >= v] for v correct
    guesses out of r (m canaries, each in with probability 1/2) under (eps, delta)-DP.

    ``P[Bin(r, q) >= v] + 2 m delta max_{1<=i<=v} P[v-i <= Bin(r, q) <= v-1] / i``, q =
    e^eps/(1+e^eps), clipped at 1.  Vectorised over ``eps``.
    """
    m, r, v = _check_counts(m, r, v)
    delta = check_in_range("delta", delta, 0.0, 1.0, high_open=True)
    e = np.asarray(eps, dtype=float)
    if np.any(~np.isfinite(e)) or np.any(e < 0):
        raise ParameterError("eps", eps, "must be finite and >= 0")
    q = np.exp(-np.logaddexp(0.0, -e.reshape(-1)))  # e^eps / (1 + e^eps), stable; shape (G,)
    tail = stats.binom.sf(v - 1, r, q)  # P[Bin >= v]
    if delta > 0 and v > 0:
        i = np.arange(1, v + 1)[:, None]  # (v, 1)
        cdf_v1 = stats.binom.cdf(v - 1, r, q)[None, :]  # P[Bin <= v-1], (1, G)
        window = (cdf_v1 - stats.binom.cdf(v - 1 - i, r, q[None, :])) / i  # (v, G)
        tail = tail + 2.0 * m * delta * np.max(np.maximum(window, 0.0), axis=0)
    tail = tail.reshape(e.shape)
    out = np.minimum(tail, 1.0)
    return out if out.ndim else float(out)


def one_run_epsilon_lb(
    m: int, r: int, v: int, *, delta: float, alpha: float = 0.05, grid: int = 512
) -> float:
    """The largest eps that v correct guesses out of r reject at level ``alpha``: the low end of
    the first crossing of :func:`one_run_p_value` with alpha (0 when even eps = 0 is not rejected).

    With probability >= 1 - alpha the trainer is not (eps', delta)-DP for any eps' below the
    returned value.  The search scans ``grid`` points of [0, EPS_SEARCH_MAX] then bisects.
    """
    m, r, v = _check_counts(m, r, v)
    alpha = check_in_range("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    delta = check_in_range("delta", delta, 0.0, 1.0, high_open=True)
    if v == 0 or one_run_p_value(m, r, v, 0.0, delta) >= alpha:
        return 0.0
    g = np.linspace(0.0, EPS_SEARCH_MAX, grid + 1)
    p = np.asarray(one_run_p_value(m, r, v, g, delta))
    above = np.nonzero(p >= alpha)[0]
    if above.size == 0:  # rejected everywhere on the search range: report its end
        return float(g[-1])
    lo, hi = float(g[above[0] - 1]), float(g[above[0]])
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if one_run_p_value(m, r, v, mid, delta) < alpha:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-9:
            break
    return lo


def guess_from_scores(scores: Any, k_plus: int, k_minus: int) -> np.ndarray:
    """Guesses in {-1, 0, +1}: +1 for the ``k_plus`` highest scores, -1 for the ``k_minus`` lowest,
    0 (abstain) elsewhere.  Ties are broken by position (the guesser never sees S)."""
    s = np.asarray(scores, dtype=float).reshape(-1)
    m = s.size
    if not np.all(np.isfinite(s)):
        raise ParameterError("scores", "<array with NaN or inf>", "canary scores must be finite")
    for name, k in (("k_plus", k_plus), ("k_minus", k_minus)):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ParameterError(name, k, "must be an integer >= 0")
    if k_plus + k_minus > m:
        raise ParameterError("k_plus", k_plus, f"k_plus + k_minus must be at most m = {m}")
    order = np.argsort(s, kind="stable")
    t = np.zeros(m, dtype=np.int8)
    if k_minus:
        t[order[:k_minus]] = -1
    if k_plus:
        t[order[m - k_plus :]] = 1
    return t


def default_guess_sizes(m: int) -> tuple[int, ...]:
    """Guess sizes k (k_plus = k_minus = k) tried by default: about 1%, 2%, 5%, 10%, 20%, 50% of m
    on each side (distinct, >= 1)."""
    m = check_positive_int("m", m)
    ks = {max(1, round(f * m)) for f in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)}
    return tuple(sorted(k for k in ks if 2 * k <= m)) or (max(1, m // 2),)


@dataclass(frozen=True)
class OneRunGuess:
    """One guess size: r guesses, v correct, and the eps it rejects at its share of alpha."""

    k_plus: int
    k_minus: int
    r: int
    v: int
    alpha: float
    eps_lb: float

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def one_run_bound(
    scores: Any,
    S: Any,
    *,
    delta: float,
    alpha: float = 0.05,
    sizes: Sequence[int] | Sequence[tuple[int, int]] | None = None,
) -> tuple[OneRunGuess, tuple[OneRunGuess, ...]]:
    """The one-run lower bound from canary ``scores`` (higher = "+") and the secret signs ``S``.

    ``sizes``: guess sizes k (k on each side) or (k_plus, k_minus) pairs, fixed before looking at
    the scores (default :func:`default_guess_sizes`); each is evaluated at ``alpha / len(sizes)``
    (Bonferroni), so the best of them holds at confidence 1 - alpha.  Returns (best, all).
    """
    s = np.asarray(scores, dtype=float).reshape(-1)
    sign = np.asarray(S).reshape(-1)
    if sign.shape != s.shape or not np.all(np.isin(sign, (-1, 1))):
        raise ParameterError("S", "<array>", "must be one sign in {-1, +1} per canary score")
    m = s.size
    check_positive_int("m", m)
    alpha = check_in_range("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    pairs: list[tuple[int, int]] = []
    for k in sizes if sizes is not None else default_guess_sizes(m):
        kp, km = (k, k) if not isinstance(k, tuple) else k
        pairs.append((int(kp), int(km)))
    if not pairs:
        raise ParameterError("sizes", sizes, "must name at least one guess size")
    a = alpha / len(pairs)
    out = []
    for kp, km in pairs:
        t = guess_from_scores(s, kp, km)
        r = int(np.count_nonzero(t))
        v = int(np.count_nonzero(t == sign))
        eps = one_run_epsilon_lb(m, r, v, delta=delta, alpha=a) if r else 0.0
        out.append(OneRunGuess(kp, km, r, v, a, eps))
    best = max(out, key=lambda g: g.eps_lb)
    return best, tuple(out)


# ---------------------------------------------------------------------- canaries
@dataclass(frozen=True)
class OneRunCanaries:
    """m canaries for one run: the base rows, and each canary's row with its + and - label.

    ``kind`` gradient / input; ``X_canary`` (m rows, same features as ``X_base``); ``y_plus`` /
    ``y_minus`` (labels or targets).  Gradient canaries: ``directions`` (m flat parameter
    directions).  Input canaries: ``y_true`` / ``y_wrong`` (the score's two labels).
    """

    kind: str
    family: str
    n_outputs: int
    X_base: np.ndarray
    y_base: np.ndarray
    X_canary: np.ndarray
    y_plus: np.ndarray
    y_minus: np.ndarray
    description: str
    directions: np.ndarray | None = None
    inserted: bool = True

    @property
    def m(self) -> int:
        return int(self.X_canary.shape[0])

    @property
    def n(self) -> int:
        return int(self.X_base.shape[0] + self.X_canary.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X_base.shape[1])

    def dataset(self, S: Any) -> tuple[np.ndarray, np.ndarray]:
        """(X, y) of the run with signs S: base rows, then canary i with its ``+`` label if S_i =
        +1, its ``-`` label otherwise (the NULL audit uses the ``-`` label whatever S)."""
        sign = np.asarray(S).reshape(-1)
        if sign.shape != (self.m,) or not np.all(np.isin(sign, (-1, 1))):
            raise ParameterError("S", "<array>", f"must be {self.m} signs in {{-1, +1}}")
        plus = (sign > 0) & self.inserted
        yc = np.where(plus, self.y_plus, self.y_minus).astype(self.y_base.dtype)
        return np.vstack([self.X_base, self.X_canary]), np.concatenate([self.y_base, yc])

    def null(self) -> OneRunCanaries:
        """The null audit: every canary keeps its ``-`` label whatever S (no signal)."""
        return replace(
            self, inserted=False, description=self.description + " -- NULL: never inserted"
        )

    def scores(self, model: Any, feature_norm: float | None = None) -> np.ndarray:
        """Canary scores of a trained model (higher = looks like the ``+`` version)."""
        # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
        import torch

        if self.kind == "gradient":
            assert self.directions is not None
            w = model.weight.detach().reshape(-1).numpy()
            return np.asarray(self.directions @ w, dtype=float)
        # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
        from lastiterate.train.trainer import clip_rows

        dtype = torch.float64
        params = list(getattr(model, "params", list)()) or list(model.module.parameters())
        if params:
            dtype = params[0].dtype
        x = torch.as_tensor(self.X_canary, dtype=dtype)
        if feature_norm is not None:
            x = clip_rows(x, feature_norm)  # the trainer's row clipping, as in training

        def losses(y: np.ndarray) -> np.ndarray:
            yt = torch.as_tensor(y)
            yt = yt.to(dtype) if self.family == "least-squares" else yt.long()
            with torch.no_grad():
                return model.per_example_losses(x, yt).detach().numpy().astype(float)

        return losses(self.y_minus) - losses(self.y_plus)


def _base(X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or X.shape[0] != y.shape[0] or X.shape[0] < 1:
        raise ParameterError(
            "X", getattr(X, "shape", None), "must be a non-empty 2-D array with one row per label"
        )
    if not np.all(np.isfinite(X)):
        raise ParameterError("X", "<array with NaN or inf>", "features must be finite")
    return X, y


def _check_m(m: int) -> int:
    m = check_positive_int("canaries", m, minimum=2)
    if m > MAX_CANARIES:
        raise ParameterError("canaries", m, f"must be at most {MAX_CANARIES}")
    return m


def one_run_gradient_canaries(
    X: Any,
    y: Any,
    m: int,
    *,
    family: str,
    n_outputs: int = 1,
    feature_norm: float | None = None,
) -> OneRunCanaries:
    """m gradient canaries: m new features (0 in every row of X), canary i = ``a e_{d+i}``.

    Labels and score directions as in :func:`lastiterate.audit.canary.gradient_canary` (least
    squares +-GRADIENT_TARGET, binary 1 / 0, multinomial class 0 / 1); ``a`` = ``feature_norm``,
    else the largest row norm of X.  GLM families only.
    """
    _check_family(family, n_outputs)
    assert family in FAMILIES
    m = _check_m(m)
    X, y = _base(X, y)
    n, d = X.shape
    if (n + m) * (d + m) > MAX_DENSE_ENTRIES:
        raise ParameterError(
            "canaries",
            m,
            f"gradient canaries add one feature each: the {n + m} x {d + m} design exceeds "
            f"{MAX_DENSE_ENTRIES:.0e} entries; use fewer canaries",
        )
    a = (
        check_positive("feature_norm", feature_norm)
        if feature_norm is not None
        else float(np.max(np.linalg.norm(X, axis=1))) or 1.0
    )
    Xb = np.hstack([X, np.zeros((n, m))])
    Xc = np.zeros((m, d + m))
    Xc[np.arange(m), d + np.arange(m)] = a
    if family == "least-squares":
        yb = y.astype(np.float64)
        yp, ym = np.full(m, GRADIENT_TARGET), np.full(m, -GRADIENT_TARGET)
    else:
        yb = y.astype(np.int64)
        yp, ym = (
            (np.ones(m, np.int64), np.zeros(m, np.int64))
            if family == "binary-logistic"
            else (np.zeros(m, np.int64), np.ones(m, np.int64))
        )
    dirs = np.zeros((m, n_outputs, d + m))
    if family == "multinomial-logistic":
        dirs[np.arange(m), 0, d + np.arange(m)] = 1 / math.sqrt(2)
        dirs[np.arange(m), 1, d + np.arange(m)] = -1 / math.sqrt(2)
    else:
        dirs[np.arange(m), 0, d + np.arange(m)] = 1.0
    return OneRunCanaries(
        kind="gradient",
        family=family,
        n_outputs=n_outputs,
        X_base=Xb,
        y_base=yb,
        X_canary=Xc,
        y_plus=yp,
        y_minus=ym,
        directions=dirs.reshape(m, -1),
        description=f"{m} gradient canaries: one extra feature each (0 in the other {n} rows), "
        f"canary row {a:g} e_(d+i), labels +/- as the multi-run gradient canary; "
        "score = final weights projected on canary i's direction",
    )


def one_run_input_canaries(
    X: Any,
    y: Any,
    X_points: Any,
    y_points: Any,
    *,
    family: str,
    n_outputs: int = 1,
) -> OneRunCanaries:
    """Input canaries: the held-out points ``X_points`` with a WRONG label (``+``) or their true
    label (``-``); class ``(y + 1) mod K`` (binary ``1 - y``), least squares ``y + 4 sd(y)``.
    Score: loss(true label) - loss(wrong label) under the final model.  Any model family whose
    model has ``per_example_losses`` (``family`` is ``mlp-classifier`` for an MLP on classes).
    """
    X, y = _base(X, y)
    Xp = np.asarray(X_points, dtype=np.float64)
    yt = np.asarray(y_points)
    if Xp.ndim != 2 or Xp.shape[1] != X.shape[1] or Xp.shape[0] != yt.shape[0]:
        raise ParameterError(
            "X_points", getattr(Xp, "shape", None), f"must be rows of {X.shape[1]} features"
        )
    if not np.all(np.isfinite(Xp)):
        raise ParameterError("X_points", "<array with NaN or inf>", "features must be finite")
    m = _check_m(Xp.shape[0])
    if family == "least-squares":
        yb = y.astype(np.float64)
        true = yt.astype(np.float64)
        wrong = true + INPUT_TARGET_SHIFT * max(1.0, float(np.std(yb)))
    else:
        yb = y.astype(np.int64)
        true = yt.astype(np.int64)
        k = 2 if family == "binary-logistic" else n_outputs
        if k < 2 or np.any(true < 0) or np.any(true >= k):
            raise ParameterError("y_points", "<labels>", f"must be class labels in [0, {k - 1}]")
        wrong = (true + 1) % k
    return OneRunCanaries(
        kind="input",
        family=family,
        n_outputs=n_outputs,
        X_base=X,
        y_base=yb,
        X_canary=Xp,
        y_plus=wrong,
        y_minus=true,
        description=f"{m} input canaries: held-out points, + = a wrong label, - = the true "
        "label; score = loss(true) - loss(wrong) under the final model",
    )


# ---------------------------------------------------------------------- one training run
def canary_signs(m: int, seed: int) -> np.ndarray:
    """S: m fair coins from the audit's seed (a stream the trainer never uses)."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x0E1]))
    return np.where(rng.random(m) < 0.5, -1, 1).astype(np.int8)


def one_run_scores(
    canaries: OneRunCanaries,
    method: Any,
    *,
    S: Any,
    epochs: float | None = None,
    steps: int | None = None,
    noise_scale: float = 1.0,
    score_steps: Sequence[int] | None = None,
    feature_norm: float | None = None,
) -> tuple[np.ndarray, Any, dict[int, np.ndarray]]:
    """Train ONCE with ``method`` (a fresh trainer of the project on its model) on the data with
    signs S, and score the final model.  Returns (scores, the executed Run, {t: scores of the
    model after t steps} for the epoch ends t in ``score_steps``).  ``noise_scale`` != 1 is a
    mutation test (the trainer draws noise ``noise_scale * sigma`` while its Run says sigma)."""
    X, y = canaries.dataset(S)
    if noise_scale != 1.0:
        _scaled_noise(method, check_positive("noise_scale", noise_scale))
    at: dict[int, np.ndarray] = {}
    wanted = {int(t) for t in score_steps or ()}

    def on_epoch(t: int, *_: Any) -> None:  # the trainer calls it with the steps done
        if t in wanted:
            at[t] = canaries.scores(method.model, feature_norm)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)  # an experiment, seeded on purpose
        res = method.fit(
            X,
            y,
            epochs=epochs,
            steps=steps,
            account=False,
            progress=False,
            on_epoch=on_epoch if wanted else None,
        )
    return canaries.scores(method.model, feature_norm), res.run, at


@dataclass(frozen=True)
class OneRunAuditResult:
    """Claim (the accountant's guarantee for the trained Run) vs the one-run lower bound."""

    canary: str
    description: str
    inserted: bool
    m: int
    seed: int
    alpha: float
    delta: float
    eps_lb: float
    best: OneRunGuess
    guesses: tuple[OneRunGuess, ...]
    claim_bound: str | None
    claim_theorem: str | None
    claim_eps: float | None
    verdict: str
    reason: str
    run: dict[str, Any]
    seconds: float
    noise_scale: float = 1.0
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("best", "guesses")}
        out["best"] = self.best.to_json()
        out["guesses"] = [g.to_json() for g in self.guesses]
        return out

    def format(self) -> str:
        f = fmt_number

        b = self.best
        r = self.run
        lines = [
            (
                f"One-run audit ({self.m} {self.canary} canaries"
                f"{'' if self.inserted else ', NULL: never inserted'}, ONE training run): "
                f"{self.verdict}"
            ),
            f"  {self.description}",
            f"  run: {r.get('algorithm')}, n={r.get('n')}, T={r.get('steps')} steps, "
            f"lr={f(r.get('lr'))}, sigma={f(r.get('noise_std'))}, C={f(r.get('clip'))}"
            + (f", noise x{self.noise_scale:g} (MUTATION TEST)" if self.noise_scale != 1.0 else ""),
        ]
        if self.claim_bound is None:
            lines.append("  claim: none (the accountant gives no bound for this run)")
        else:
            lines.append(
                f"  claim ({self.claim_bound}: {self.claim_theorem}): epsilon = "
                f"{f(self.claim_eps)} at delta = {self.delta:g}"
            )
        lines.append(
            f"  lower bound (confidence {1 - self.alpha:g}, Steinke-Nasr-Jagielski 2023 Thm 5.2, "
            f"Bonferroni over {len(self.guesses)} guess sizes):"
        )
        lines.append(
            f"    eps >= {f(self.eps_lb)} at delta {self.delta:g}: {b.v} of {b.r} guesses correct "
            f"(top {b.k_plus} guessed +, bottom {b.k_minus} guessed -)"
        )
        for g in self.guesses:
            lines.append(
                f"      k = {g.k_plus:>6}/{g.k_minus:<6} correct {g.v:>6}/{g.r:<6} "
                f"eps_lb {f(g.eps_lb)}"
            )
        lines.append(f"  verdict: {self.verdict} ({self.reason}); {self.seconds:.1f} s")
        return "\n".join(lines)


def audit_one_run(
    canaries: OneRunCanaries,
    spec: Any,
    *,
    seed: int = 0,
    alpha: float = 0.05,
    delta: float = 1e-5,
    sizes: Sequence[int] | None = None,
    bounds: Sequence[str] | None = None,
    noise_scale: float = 1.0,
    model: Any = None,
) -> OneRunAuditResult:
    """Train ONE model (``spec``: a :class:`lastiterate.audit.canary.TrainerSpec`) with the
    canaries inserted by fair coins, and compare the one-run lower bound (confidence 1 - alpha)
    with every bound the accountant reports for the executed Run.

    ``model``: the model to train (default a fresh GLM for the canaries' family; give an MLP's
    ``ModuleModel`` for input canaries on an MLP).  VIOLATION when eps_lb exceeds a claim.
    """
    alpha = check_in_range("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    delta = check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    noise_scale = check_positive("noise_scale", noise_scale)
    t0 = time.perf_counter()
    if model is None:
        if canaries.family not in ("binary-logistic", "multinomial-logistic", "least-squares"):
            raise NotApplicable(f"no default model for family {canaries.family!r}: pass model=")
        # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
        import torch

        from lastiterate.train.models import GLM

        model = GLM(
            canaries.n_features,
            canaries.n_outputs,
            canaries.family,
            intercept=spec.intercept,
            dtype=torch.float64,
        )
    elif canaries.kind == "gradient":
        raise NotApplicable("gradient canaries score a GLM's weights: use input canaries")
    S = canary_signs(canaries.m, seed)
    method = spec.method(model, model_seed(seed, 2, 0))
    scores, run, _ = one_run_scores(
        canaries,
        method,
        S=S,
        epochs=spec.epochs,
        steps=spec.steps,
        noise_scale=noise_scale,
        feature_norm=spec.feature_norm,
    )
    if not np.all(np.isfinite(scores)):
        raise ParameterError(
            "lr", spec.lr, "the trained model diverged (non-finite scores): lower the learning rate"
        )
    best, allg = one_run_bound(scores, S, delta=delta, alpha=alpha, sizes=sizes)
    rep = account(run, delta=delta, bounds=bounds)
    checks = []
    for res in rep.results:
        if res.kind != "bound":
            continue
        v, why = verdict_for(
            mu_lb=-math.inf, eps_lb=best.eps_lb, claim_mu=None, claim_eps=res.epsilon
        )
        checks.append((res.bound, v, why))
    claim = rep.best
    bad = [c for c in checks if c[1] == "VIOLATION"]
    if bad:
        verdict, reason = "VIOLATION", "; ".join(f"{b}: {why}" for b, _, why in bad)
    elif claim is None:
        verdict, reason = "inconclusive", "no claim for this run"
    elif best.eps_lb <= 0:
        verdict, reason = "inconclusive", "no leakage certified (one run has little power)"
    else:
        verdict = "ok"
        reason = f"eps_lb/claim = {best.eps_lb / claim.epsilon:.3f} (consistent, not a proof)"
    return OneRunAuditResult(
        canary=canaries.kind,
        description=canaries.description,
        inserted=canaries.inserted,
        m=canaries.m,
        seed=seed,
        alpha=alpha,
        delta=delta,
        eps_lb=best.eps_lb,
        best=best,
        guesses=allg,
        claim_bound=None if claim is None else claim.bound,
        claim_theorem=None if claim is None else claim.theorem,
        claim_eps=None if claim is None else claim.epsilon,
        verdict=verdict,
        reason=reason,
        run=run.setting(),
        seconds=time.perf_counter() - t0,
        noise_scale=noise_scale,
        details={
            "checks": [{"bound": b, "verdict": v, "reason": w} for b, v, w in checks],
            "score_mean_plus": float(np.mean(scores[S > 0])) if np.any(S > 0) else None,
            "score_mean_minus": float(np.mean(scores[S < 0])) if np.any(S < 0) else None,
        },
    )
