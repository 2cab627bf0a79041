"""Membership inference against models trained by the project's trainer (final model only).

The canary audit (:mod:`lastiterate.audit.canary`) trains hundreds of models on two neighbouring
datasets and is the sharp test of a claim.  This module asks the practitioner's question instead:
given ONE released model, can an attacker tell its training examples (members) from other examples
of the same distribution (non-members)?  Three attacks, all on the FINAL model:

* ``loss`` (Yeom, Giacomelli, Fredrikson, Jha, CSF 2018): score = minus the example's loss;
* ``shadow`` (Shokri, Stronati, Song, Shmatikov, S&P 2017; the membership-inference experiment of
  paper 002, Liang et al. 2026): ``shadows`` models trained THE SAME WAY (same trainer, flags and
  noise) on data disjoint from the target's; one attack model per class (scikit-learn
  ``LogisticRegression``) learns "member or not" from the shadow models' log-probability vectors on
  their own members and non-members, and scores the target model's outputs;
* ``lira`` (Carlini, Chien, Nasr, Song, Terzis, Tramer, "Membership inference attacks from first
  principles", S&P 2022), offline variant with a fixed variance: the logit-scaled confidence
  ``phi = log(p_y / (1 - p_y))`` of each target example under every shadow model (all shadows are
  OUT models: their data are disjoint from the target's) gives a per-example Gaussian mean and a
  pooled standard deviation; score = the standardised ``(phi_target - mean_out) / sd_out``.

Membership by fair coins (replace-one).  The target's candidates are m PAIRS (a_i, b_i) of pool
rows; for each pair an independent secret fair coin S_i decides which one the target trains on
(:func:`membership_split`); n = m whatever the coins, and flipping one coin replaces one row, so a
replace-one (eps, delta)-DP trainer is (eps, delta)-DP in S.  The shadow data are disjoint from
every candidate, and the attacks score the candidates in their public order, never reading S.

RIGOROUS lower bound (the verdict's).  Each attack's pair score is ``score(a_i) - score(b_i)``
(positive: guess "a_i was in"); guesses on the top-k / bottom-k pairs, abstention on the rest,
and the one-run analysis of Steinke, Nasr, Jagielski ("Privacy Auditing with One (1) Training
Run", NeurIPS 2023, Thm 5.2 / Cor 5.4) gives eps_lb, its f-DP refinement (Mahloujifar, Melis,
Chaudhuri 2024) the GDP mu_lb (:func:`pair_one_run_bound`, calling
:mod:`lastiterate.audit.one_run`).  Each holds at confidence 1 - alpha: alpha is split evenly over
the three attacks and, within an attack, over the guess sizes (Bonferroni), as in the one-run
audit.  The verdict is VIOLATION only when one of these exceeds a claim (eps_lb vs the claimed
epsilon, mu_lb vs a replace-one GDP claim): two tests at level alpha, so a sound trainer is
flagged with probability at most 2 alpha.

HEURISTIC lower bound (informational).  Each attack is also evaluated on the target model's
members (the included side of each pair) against its non-members (the other side): ROC
(scikit-learn ``roc_curve``), AUC, TPR at FPR 1e-3 and 1e-2, and the lower bounds of
:func:`lastiterate.audit.stats.audit_scores` (threshold chosen on a random half of the members and
non-members, evaluated on the other half; one-sided Clopper-Pearson bounds on FPR and FNR at
level alpha / (2 x #attacks), Bonferroni over the attacks).  The Clopper-Pearson interval treats
the examples of ONE model as independent trials; they share the model, so this bound is a
heuristic (``TPR <= e^eps FPR + delta`` holds for the expected rates, Yeom et al. 2018, Thm 1;
Humphries et al. 2023, but the interval is not certified).  It is reported, never used in the
verdict.  The same is done for a NON-PRIVATE BASELINE: the same trainer, flags, seeds and coins
with the trainer's noise multiplied by 0 (its shadows too), which shows what the attacks can do
when nothing protects the data.

What the verdict says.  A VIOLATION is a certified refutation of the claim (at the stated
confidence) for this trainer on this data.  ``ok`` or ``inconclusive`` say little: membership
inference on natural data is far from the worst case the claim covers, and one run with m pairs
cannot certify a large epsilon.  The canary audit is the sharper test.

Assumptions checked in code: a classification dataset (the shadow attack is per class), a pool
large enough for the target's members, non-members and disjoint shadow data.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

from lastiterate.accountant import account
from lastiterate.audit.canary import TrainerSpec, _scaled_noise
from lastiterate.audit.one_run import (
    OneRunFdpGuess,
    OneRunGuess,
    one_run_bound,
    one_run_fdp_bound,
)
from lastiterate.audit.report import ClaimCheck, verdict_for
from lastiterate.audit.stats import (
    Split,
    _gdp_epsilon,
    audit_scores,
    clopper_pearson_lower,
    epsilon_of_gdp,
)
from lastiterate.errors import (
    NotApplicable,
    ParameterError,
    check_in_range,
    check_int_in_range,
    check_positive_int,
)
from lastiterate.formatting import fmt_number
from lastiterate.jsonutil import jsonable
from lastiterate.train.randomness import SeededRunWarning

__all__ = [
    "ATTACKS",
    "FPR_TARGETS",
    "MAX_SHADOWS",
    "MIN_SHADOWS",
    "AttackResult",
    "MIAResult",
    "MembershipSplit",
    "ModelSpec",
    "PairOneRunBound",
    "audit_mia",
    "class_probabilities",
    "evaluate_attack",
    "lira_offline_scores",
    "logit_confidence",
    "loss_attack_scores",
    "membership_split",
    "pair_guess_scores",
    "pair_one_run_bound",
    "shadow_attack_scores",
]

#: how the two lower bounds are named in the report
RIGOROUS_LABEL = "rigorous (one-run, Steinke et al. 2023)"
HEURISTIC_LABEL = "heuristic (Clopper-Pearson over shared-model examples)"

ATTACKS = ("loss", "shadow", "lira")
#: the false-positive rates at which the true-positive rate is reported
FPR_TARGETS = (1e-3, 1e-2)
#: the number of shadow models per world (private, baseline): at least 2 (LiRA needs a variance)
MIN_SHADOWS = 2
MAX_SHADOWS = 64
#: at least this many members (and non-members) in the target model's evaluation
MIN_MEMBERS = 10
#: probabilities are clipped to [PROB_FLOOR, 1 - PROB_FLOOR] before logs
PROB_FLOOR = 1e-12


# ---------------------------------------------------------------------- the models
@dataclass(frozen=True)
class ModelSpec:
    """The model every run of the audit trains (the ``--model`` of ``lastiterate train``).

    ``kind``: ``logreg`` (binary / multinomial logistic GLM, parameters start at 0) or ``mlp``
    (:func:`lastiterate.train.models.mlp` with ``hidden`` widths and ``activation``, initialised
    from ``init_seed``: the same data-independent start for every model).
    """

    kind: str
    n_features: int
    n_classes: int
    hidden: tuple[int, ...] = (64,)
    activation: str = "tanh"
    intercept: bool = False
    init_seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("logreg", "mlp"):
            raise NotApplicable(
                f"membership inference here needs a classifier (logreg or mlp), not {self.kind!r}: "
                "the shadow attack is per class"
            )
        check_positive_int("n_features", self.n_features)
        check_positive_int("n_classes", self.n_classes, minimum=2)

    @property
    def family(self) -> str:
        if self.kind == "mlp":
            return "mlp"
        return "binary-logistic" if self.n_classes == 2 else "multinomial-logistic"

    def new(self) -> Any:
        """A fresh model (the trainer's GLM or ModuleModel)."""
        # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
        import torch

        from lastiterate.train.models import GLM, ModuleModel, mlp

        if self.kind == "logreg":
            k = 1 if self.n_classes == 2 else self.n_classes
            return GLM(
                self.n_features, k, self.family, intercept=self.intercept, dtype=torch.float64
            )
        net = mlp(
            self.n_features,
            self.n_classes,
            self.hidden,
            self.activation,
            seed=self.init_seed,
            dtype=torch.float64,
        )
        return ModuleModel(net, "cross-entropy")


def _inputs(X: np.ndarray, feature_norm: float | None) -> Any:
    """X as the trainer sees it (rows clipped to ``feature_norm``, as in training)."""
    # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
    import torch

    from lastiterate.train.trainer import clip_rows

    x = torch.as_tensor(np.asarray(X, dtype=np.float64))
    return clip_rows(x, feature_norm) if feature_norm is not None else x


def class_probabilities(model: Any, X: np.ndarray, feature_norm: float | None = None) -> np.ndarray:
    """The model's class probabilities ``[B, K]`` (binary logistic: ``[1 - s(z), s(z)]``)."""
    # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
    import torch

    x = _inputs(X, feature_norm)
    with torch.no_grad():
        z = model.module(x) if hasattr(model, "module") else model.forward(x)
        if z.shape[1] == 1:
            p1 = torch.sigmoid(z[:, 0])
            p = torch.stack([1 - p1, p1], dim=1)
        else:
            p = torch.softmax(z, dim=1)
    return np.asarray(p.numpy(), dtype=np.float64)


def per_example_loss(model: Any, X: np.ndarray, y: np.ndarray, feature_norm: float | None) -> Any:
    """The training loss of each example under ``model`` (the model's own per-example loss)."""
    # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
    import torch

    x = _inputs(X, feature_norm)
    with torch.no_grad():
        return np.asarray(
            model.per_example_losses(x, torch.as_tensor(np.asarray(y)).long()).numpy(),
            dtype=np.float64,
        )


# ---------------------------------------------------------------------- the attacks
def loss_attack_scores(losses: Any) -> np.ndarray:
    """Yeom et al. (2018): members have lower loss; score = -loss (higher = member)."""
    return -np.asarray(losses, dtype=np.float64)


def logit_confidence(probs: np.ndarray, y: Any) -> np.ndarray:
    """LiRA's statistic phi = log(p_y) - log(1 - p_y) (Carlini et al. 2022, section 4.3), with
    p clipped to [1e-12, 1 - 1e-12]; close to Gaussian over training randomness."""
    y = np.asarray(y, dtype=np.int64)
    p = np.clip(probs[np.arange(y.size), y], PROB_FLOOR, 1 - PROB_FLOOR)
    return np.log(p) - np.log1p(-p)


def _attack_features(probs: np.ndarray) -> np.ndarray:
    """The attack model's input: the log-probability vector (Shokri et al.'s prediction vector,
    in log space so that a linear attack model can read confidences near 1)."""
    return np.log(np.clip(probs, PROB_FLOOR, 1.0))


def shadow_attack_scores(
    shadow_probs: Sequence[np.ndarray],
    shadow_labels: Sequence[np.ndarray],
    shadow_membership: Sequence[np.ndarray],
    target_probs: np.ndarray,
    target_labels: np.ndarray,
    *,
    seed: int = 0,
) -> np.ndarray:
    """Shokri et al. (2017) / paper 002: per-class attack models on shadow models' outputs.

    ``shadow_probs[j]``: shadow model j's probabilities on the examples of its data pool,
    ``shadow_labels[j]`` their classes, ``shadow_membership[j]`` 1 for its training examples.  For
    every class c a ``LogisticRegression`` is fitted on the rows of class c of all shadows (a
    class whose shadow rows are all members or all non-members falls back to one model fitted on
    every class).  Returns the attack models' member probability for each target example.
    """
    # lazy: scikit-learn takes ~1.3 s to import; only the attacks need it
    from sklearn.linear_model import LogisticRegression

    F = _attack_features(np.concatenate(list(shadow_probs)))
    c = np.concatenate([np.asarray(v, dtype=np.int64) for v in shadow_labels])
    m = np.concatenate([np.asarray(v, dtype=np.int64) for v in shadow_membership])
    target_labels = np.asarray(target_labels, dtype=np.int64)
    Ft = _attack_features(target_probs)

    def fit(rows: np.ndarray) -> Any:
        return LogisticRegression(C=1.0, max_iter=2000, random_state=seed).fit(F[rows], m[rows])

    everything = fit(np.ones(m.size, dtype=bool)) if np.unique(m).size == 2 else None
    if everything is None:
        raise ParameterError(
            "shadows", len(shadow_probs), "shadow data need both members and non-members"
        )
    out = np.empty(target_labels.size)
    for k in np.unique(target_labels):
        rows = c == k
        model = fit(rows) if np.unique(m[rows]).size == 2 else everything
        sel = target_labels == k
        out[sel] = model.predict_proba(Ft[sel])[:, 1]
    return out


def lira_offline_scores(target_phi: Any, out_phi: Any) -> np.ndarray:
    """Offline LiRA with a fixed (pooled) variance (Carlini et al. 2022, section 6.2).

    ``target_phi``: phi of each target example under the target model, shape [m];
    ``out_phi``: phi of the same examples under K shadow models that did NOT train on them,
    shape [K, m].  Score = (phi - mean_out) / sd_out (higher = member), the log of the one-sided
    Gaussian likelihood test's p-value being a monotone function of it.
    """
    out_phi = np.asarray(out_phi, dtype=np.float64)
    target_phi = np.asarray(target_phi, dtype=np.float64)
    if out_phi.ndim != 2 or out_phi.shape[0] < MIN_SHADOWS or out_phi.shape[1] != target_phi.size:
        raise ParameterError(
            "out_phi", out_phi.shape, f"must be [K >= {MIN_SHADOWS}, m] with m = {target_phi.size}"
        )
    mean = out_phi.mean(axis=0)
    sd = float(np.sqrt(np.mean(out_phi.var(axis=0, ddof=1))))
    return (target_phi - mean) / max(sd, 1e-12)


# ---------------------------------------------------------------------- evaluation
@dataclass(frozen=True)
class AttackResult:
    """One attack on one target model: ROC, AUC, TPR at low FPR and the lower bounds."""

    attack: str
    auc: float
    fpr: tuple[float, ...]
    tpr: tuple[float, ...]
    tpr_at_fpr: dict[str, float]
    mu_lb: float
    eps_lb: float
    eps_from_mu_lb: float
    alpha: float
    test_eps: dict[str, Any]
    test_mu: dict[str, Any]
    n_members: int
    n_nonmembers: int

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["roc"] = {"fpr": list(self.fpr), "tpr": list(self.tpr)}
        del out["fpr"], out["tpr"]
        return jsonable(out)


def _tpr_at(fpr: np.ndarray, tpr: np.ndarray, target: float) -> float:
    """The largest TPR among ROC points with FPR <= target (0 when none)."""
    ok = fpr <= target
    return float(tpr[ok].max()) if np.any(ok) else 0.0


def _with_lower_ends(test: Any) -> dict[str, Any]:
    """A test's JSON with the Clopper-Pearson LOWER ends of FPR and FNR (same level), for plots."""
    out = test.to_json()
    a = test.alpha_per_test / 2
    out["fpr_l"] = float(clopper_pearson_lower(round(test.fpr * test.n_d), test.n_d, a))
    out["fnr_l"] = float(clopper_pearson_lower(round(test.fnr * test.n_dprime), test.n_dprime, a))
    return out


def evaluate_attack(
    attack: str,
    member_scores: Any,
    nonmember_scores: Any,
    *,
    delta: float,
    alpha: float,
    seed: int = 0,
) -> AttackResult:
    """ROC / AUC (scikit-learn) and the split-threshold lower bounds of one attack's scores
    (higher = member).  ``alpha``: the false-alarm probability of this attack's two bounds."""
    # lazy: scikit-learn takes ~1.3 s to import; only the attacks need it
    from sklearn.metrics import roc_auc_score, roc_curve

    mem = np.asarray(member_scores, dtype=np.float64)
    non = np.asarray(nonmember_scores, dtype=np.float64)
    if not (np.all(np.isfinite(mem)) and np.all(np.isfinite(non))):
        raise ParameterError(
            "lr", "<training>", "the trained models diverged (non-finite scores): lower the rate"
        )
    labels = np.concatenate([np.ones(mem.size), np.zeros(non.size)])
    scores = np.concatenate([mem, non])
    fpr, tpr, _ = roc_curve(labels, scores)
    sa = audit_scores(
        non, mem, delta=delta, alpha=alpha, strategy=Split(0.5), directions=("greater",), seed=seed
    )
    assert sa.best_eps_test is not None and sa.best_mu_test is not None and sa.eps_lb is not None
    test_eps = _with_lower_ends(sa.best_eps_test)
    test_mu = _with_lower_ends(sa.best_mu_test)
    return AttackResult(
        attack=attack,
        auc=float(roc_auc_score(labels, scores)),
        fpr=tuple(float(v) for v in fpr),
        tpr=tuple(float(v) for v in tpr),
        tpr_at_fpr={f"{t:g}": _tpr_at(fpr, tpr, t) for t in FPR_TARGETS},
        mu_lb=float(sa.mu_lb),
        eps_lb=float(sa.eps_lb),
        eps_from_mu_lb=_gdp_epsilon(delta, sa.mu_lb) if sa.mu_lb > 0 else 0.0,
        alpha=alpha,
        test_eps=test_eps,
        test_mu=test_mu,
        n_members=int(mem.size),
        n_nonmembers=int(non.size),
    )


def pair_guess_scores(score_a: Any, score_b: Any) -> np.ndarray:
    """The guess score of each candidate pair (a_i, b_i) for one attack: ``score(a_i) -
    score(b_i)`` (higher = member; positive: "a_i was the one trained on")."""
    a = np.asarray(score_a, dtype=np.float64).reshape(-1)
    b = np.asarray(score_b, dtype=np.float64).reshape(-1)
    if a.shape != b.shape or a.size == 0:
        raise ParameterError("score_b", b.shape, f"must have one score per pair ({a.size})")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ParameterError(
            "lr", "<training>", "the trained models diverged (non-finite scores): lower the rate"
        )
    return a - b


@dataclass(frozen=True)
class PairOneRunBound:
    """One attack's RIGOROUS lower bounds from the m candidate pairs of ONE target model.

    The pairs are the canaries of the one-run game (Steinke, Nasr, Jagielski 2023, Algorithm 1):
    ``S_i = +1`` when a_i is the pair's member.  ``eps_lb``: their Thm 5.2 / Cor 5.4 bound at
    ``delta``; ``mu_lb``: the largest GDP mu rejected by the f-DP analysis of Mahloujifar, Melis,
    Chaudhuri (2024); ``eps_from_mu_lb``: epsilon(delta) of that Gaussian curve (meaningful for
    Gaussian-shaped curves only, not used in the verdict); ``eps_lb_eps_delta``: the largest eps
    whose (eps, delta) curve the f-DP analysis rejects (any curve).  Each bound holds at confidence
    ``1 - alpha`` (``alpha``: this attack's share, split again over the guess sizes).
    """

    attack: str
    m: int
    alpha: float
    eps_lb: float
    mu_lb: float
    eps_from_mu_lb: float
    eps_lb_eps_delta: float
    best: OneRunGuess
    guesses: tuple[OneRunGuess, ...]
    fdp_best: OneRunFdpGuess
    fdp_guesses: tuple[OneRunFdpGuess, ...]

    def to_json(self) -> dict[str, Any]:
        skip = ("best", "guesses", "fdp_best", "fdp_guesses")
        out: dict[str, Any] = {k: v for k, v in self.__dict__.items() if k not in skip}
        out["best"] = self.best.to_json()
        out["guesses"] = [g.to_json() for g in self.guesses]
        out["fdp_best"] = self.fdp_best.to_json()
        out["fdp_guesses"] = [g.to_json() for g in self.fdp_guesses]
        return jsonable(out)


def pair_one_run_bound(
    attack: str,
    score_a: Any,
    score_b: Any,
    S: Any,
    *,
    delta: float,
    alpha: float,
    sizes: Sequence[int] | None = None,
) -> PairOneRunBound:
    """The one-run lower bounds of one attack on m candidate pairs (Steinke, Nasr, Jagielski 2023;
    f-DP refinement: Mahloujifar, Melis, Chaudhuri 2024), at confidence ``1 - alpha`` each.

    Theorem (Steinke et al. 2023, Thm 5.2 / Cor 5.4, replace-one adjacency): for each pair an
    independent SECRET fair coin S_i chooses which of a_i, b_i the target trains on, everything
    else it trains on being fixed (n is the same for every S and flipping S_i replaces one row, so
    a replace-one (eps, delta)-DP trainer is (eps, delta)-DP in S).  A guesser that sees only the
    final model and data independent of S guesses T_i = sign(score(a_i) - score(b_i)) on the
    top-k / bottom-k pairs and abstains on the rest; the number of correct guesses then has the
    tail bound of :func:`lastiterate.audit.one_run.one_run_p_value`.  Guess sizes are those of
    :func:`lastiterate.audit.one_run.default_guess_sizes`, Bonferroni over them (inside
    :func:`~lastiterate.audit.one_run.one_run_bound` and
    :func:`~lastiterate.audit.one_run.one_run_fdp_bound`).  ``S``: +1 when a_i is the member.
    """
    g = pair_guess_scores(score_a, score_b)
    alpha = check_in_range("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    delta = check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    best, allg = one_run_bound(g, S, delta=delta, alpha=alpha, sizes=sizes)
    fdp_best, fdp_all = one_run_fdp_bound(g, S, delta=delta, alpha=alpha, sizes=sizes)
    mu = max(h.mu_lb for h in fdp_all)
    return PairOneRunBound(
        attack=attack,
        m=int(g.size),
        alpha=alpha,
        eps_lb=float(best.eps_lb),
        mu_lb=float(mu),
        eps_from_mu_lb=epsilon_of_gdp(float(mu), delta),
        eps_lb_eps_delta=float(max(h.eps_lb_eps_delta for h in fdp_all)),
        best=best,
        guesses=allg,
        fdp_best=fdp_best,
        fdp_guesses=fdp_all,
    )


# ---------------------------------------------------------------------- data and training
@dataclass(frozen=True)
class MembershipSplit:
    """Row indices of the pool: the target's members and non-members, and the shadows' pool
    (disjoint from both).

    The candidates come in m PAIRS (``pairs_a[i]``, ``pairs_b[i]``), ``pairs_a[i] <
    pairs_b[i]`` (an order the attacker may know); ``coins[i] = +1`` when the target trains on
    ``pairs_a[i]``, -1 when on ``pairs_b[i]`` (``members[i]`` is the included row of pair i,
    ``nonmembers[i]`` the other one).
    """

    members: np.ndarray
    nonmembers: np.ndarray
    shadow_pool: np.ndarray
    pairs_a: np.ndarray
    pairs_b: np.ndarray
    coins: np.ndarray


def membership_split(n_pool: int, members: int, seed: int) -> MembershipSplit:
    """A random split of ``n_pool`` rows: ``members`` target members, as many non-members, the
    rest for the shadow models (which need more than ``members`` rows: members and
    non-members of their own).

    Membership by fair coins under replace-one: with a uniform permutation ``perm``, pair i is
    the unordered pair {perm[i], perm[m + i]} and its member is perm[i].  Given the pairs and the
    shadow pool, which side of each pair is the member is an independent fair coin (the two
    orders of a pair are equally likely), and the target's training set holds exactly one row of
    each pair at position i: flipping a coin replaces one row, n stays m.  This is the one-run
    game of Steinke, Nasr, Jagielski (2023) with the pairs as canaries.  The seed must be secret
    from the attacker (the attacks here never read it: they see the final model, the pairs and
    the shadow data, all independent of the coins).
    """
    n_pool = check_positive_int("n_pool", n_pool)
    high = (n_pool - 1) // 3
    if high < MIN_MEMBERS:
        raise ParameterError(
            "members",
            members,
            f"the pool has {n_pool} rows; membership inference needs >= "
            f"{3 * MIN_MEMBERS + 1} (members, non-members, disjoint shadow data)",
        )
    members = check_int_in_range("members", members, MIN_MEMBERS, high)
    perm = np.random.default_rng([int(seed), 0x6D6961]).permutation(n_pool)
    inc, exc = perm[:members], perm[members : 2 * members]
    a, b = np.minimum(inc, exc), np.maximum(inc, exc)
    coins = np.where(inc == a, 1, -1).astype(np.int8)
    return MembershipSplit(inc, exc, perm[2 * members :], a, b, coins)


def _train(
    model_spec: ModelSpec,
    spec: TrainerSpec,
    X: np.ndarray,
    y: np.ndarray,
    seed: int,
    noise_scale: float,
) -> tuple[Any, Any]:
    """One model trained by the project's trainer (noise x ``noise_scale``: 0 = non-private)."""
    model = model_spec.new()
    method = spec.method(model, seed)
    if noise_scale != 1.0:
        _scaled_noise(method, noise_scale)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)  # an experiment, never released
        res = method.fit(
            X, y, epochs=spec.epochs, steps=spec.steps, account=False, progress=False, threads=1
        )
    return model, res.run


def _model_seed(seed: int, index: int) -> int:
    """The trainer seed of model ``index`` (0: the target, j: shadow j); the private model and
    the baseline use the same seeds (the same batches under sampling: only the noise differs)."""
    return int(
        np.random.SeedSequence([int(seed), 0x6D6961, int(index)]).generate_state(
            1, dtype=np.uint32
        )[0]
    )


def _attack_world(
    X: np.ndarray,
    y: np.ndarray,
    split: MembershipSplit,
    model_spec: ModelSpec,
    spec: TrainerSpec,
    *,
    shadows: int,
    seed: int,
    noise_scale: float,
    delta: float,
    alpha: float,
    tick: Callable[[], None],
) -> tuple[dict[str, AttackResult], dict[str, PairOneRunBound], Any, dict[str, float]]:
    """Train the target and its shadows in one world and run the three attacks.

    Every attack scores the candidates in their public order (a_1..a_m, b_1..b_m), never
    reading the coins; the coins then give the heuristic's member / non-member groups (the
    included / excluded side of each pair) and the one-run game's secret signs."""
    members = split.members
    m = members.size
    target_rows = np.concatenate([split.pairs_a, split.pairs_b])
    in_a = split.coins > 0
    is_member = np.concatenate([in_a, ~in_a])
    fn = spec.feature_norm
    target, run = _train(
        model_spec, spec, X[members], y[members], _model_seed(seed, 0), noise_scale
    )
    tick()
    Xt, yt = X[target_rows], y[target_rows]
    probs_t = class_probabilities(target, Xt, fn)
    loss_t = per_example_loss(target, Xt, yt, fn)
    rng = np.random.default_rng([int(seed), 0x736861])  # the same shadow data in both worlds
    sh_probs, sh_labels, sh_member, out_phi = [], [], [], []
    for j in range(shadows):
        pool = split.shadow_pool
        own = np.zeros(pool.size, dtype=bool)
        own[rng.choice(pool.size, size=m, replace=False)] = True
        # balance: as many of the pool's non-members as members (the attack model's prior 1/2)
        non = np.flatnonzero(~own)
        keep = own.copy()
        keep[rng.choice(non, size=min(m, non.size), replace=False)] = True
        shadow, run_j = _train(
            model_spec,
            spec,
            X[pool[own]],
            y[pool[own]],
            _model_seed(seed, j + 1),
            noise_scale,
        )
        if run_j.setting() != run.setting():  # pragma: no cover - same n, same flags
            raise RuntimeError("a shadow model executed a different run than the target")
        tick()
        sh_probs.append(class_probabilities(shadow, X[pool[keep]], fn))
        sh_labels.append(y[pool[keep]])
        sh_member.append(own[keep].astype(np.int64))
        out_phi.append(logit_confidence(class_probabilities(shadow, Xt, fn), yt))
    scores = {
        "loss": loss_attack_scores(loss_t),
        "shadow": shadow_attack_scores(sh_probs, sh_labels, sh_member, probs_t, yt, seed=seed),
        "lira": lira_offline_scores(logit_confidence(probs_t, yt), np.stack(out_phi)),
    }
    # the heuristic groups in pair order (member of pair i first), as before the pairs existed
    member_pos = np.where(in_a, np.arange(m), m + np.arange(m))
    nonmember_pos = np.where(in_a, m + np.arange(m), np.arange(m))
    results = {
        name: evaluate_attack(
            name,
            s[member_pos],
            s[nonmember_pos],
            delta=delta,
            alpha=alpha / len(ATTACKS),
            seed=seed,
        )
        for name, s in scores.items()
    }
    rigorous = {
        name: pair_one_run_bound(
            name, s[:m], s[m:], split.coins, delta=delta, alpha=alpha / len(ATTACKS)
        )
        for name, s in scores.items()
    }
    pred = probs_t.argmax(axis=1)
    acc = {
        "train_accuracy": float(np.mean(pred[is_member] == yt[is_member])),
        "heldout_accuracy": float(np.mean(pred[~is_member] == yt[~is_member])),
        "train_loss": float(np.mean(loss_t[is_member])),
        "heldout_loss": float(np.mean(loss_t[~is_member])),
    }
    return results, rigorous, run, acc


# ---------------------------------------------------------------------- the audit
@dataclass(frozen=True)
class MIAResult:
    """Claim vs the membership-inference lower bounds, for the private model and the baseline."""

    private: dict[str, AttackResult]
    baseline: dict[str, AttackResult]
    members: int
    shadows: int
    seed: int
    alpha: float
    delta: float
    claim_bound: str | None
    claim_theorem: str | None
    claim_mu: float | None
    claim_eps: float | None
    mu_lb: float
    eps_lb: float
    best_attack: str
    mu_attack: str
    verdict: str
    reason: str
    checks: tuple[Any, ...]
    run: dict[str, Any]
    model: dict[str, Any]
    accuracy: dict[str, dict[str, float]]
    seconds: float
    noise_scale: float = 1.0
    details: dict[str, Any] = field(default_factory=dict)
    #: the RIGOROUS one-run bounds over the candidate pairs (per attack, both worlds), the best
    #: of them over the private attacks (each at confidence 1 - alpha) and the attacks that
    #: reached them; ``checks`` and ``verdict`` come from these.  ``mu_lb`` / ``eps_lb`` above
    #: are the HEURISTIC bounds, whose verdict is ``heuristic_verdict`` (informational)
    rigorous_private: dict[str, PairOneRunBound] = field(default_factory=dict)
    rigorous_baseline: dict[str, PairOneRunBound] = field(default_factory=dict)
    rigorous_eps_lb: float = 0.0
    rigorous_mu_lb: float = 0.0
    rigorous_eps_attack: str = ""
    rigorous_mu_attack: str = ""
    heuristic_verdict: str = ""
    heuristic_reason: str = ""
    heuristic_checks: tuple[Any, ...] = ()

    def to_json(self) -> dict[str, Any]:
        skip = (
            "checks",
            "private",
            "baseline",
            "rigorous_private",
            "rigorous_baseline",
            "heuristic_checks",
        )
        out = {k: v for k, v in self.__dict__.items() if k not in skip}
        out["private"] = {k: v.to_json() for k, v in self.private.items()}
        out["baseline"] = {k: v.to_json() for k, v in self.baseline.items()}
        out["checks"] = [c.to_json() for c in self.checks]
        out["rigorous"] = {
            "method": RIGOROUS_LABEL,
            "eps_lb": self.rigorous_eps_lb,
            "mu_lb": self.rigorous_mu_lb,
            "eps_attack": self.rigorous_eps_attack,
            "mu_attack": self.rigorous_mu_attack,
            "pairs": self.members,
            "private": {k: v.to_json() for k, v in self.rigorous_private.items()},
            "baseline": {k: v.to_json() for k, v in self.rigorous_baseline.items()},
        }
        out["heuristic"] = {
            "method": HEURISTIC_LABEL,
            "eps_lb": self.eps_lb,
            "mu_lb": self.mu_lb,
            "eps_attack": self.best_attack,
            "mu_attack": self.mu_attack,
            "verdict": self.heuristic_verdict,
            "reason": self.heuristic_reason,
            "checks": [c.to_json() for c in self.heuristic_checks],
        }
        return jsonable(out)  # standard JSON: a bound of -inf becomes "-inf"

    def format(self) -> str:
        f = fmt_number

        r = self.run
        lines = [f"Membership inference audit: {self.verdict}"]
        lines.append(
            f"  run: {r.get('algorithm')}, n={r.get('n')} members, T={r.get('steps')} steps, "
            f"lr={f(r.get('lr'))}, sigma={f(r.get('noise_std'))}, C={f(r.get('clip'))}"
            + (f", noise x{self.noise_scale:g} (MUTATION TEST)" if self.noise_scale != 1.0 else "")
        )
        if self.claim_bound is None:
            lines.append("  claim: none (the accountant gives no bound for this run)")
        else:
            mu = f"mu = {f(self.claim_mu)}, " if self.claim_mu is not None else ""
            lines.append(
                f"  claim ({self.claim_bound}: {self.claim_theorem}): {mu}"
                f"epsilon = {f(self.claim_eps)} at delta = {self.delta:g}"
            )
        lines.append(
            f"  {self.members} members vs {self.members} non-members, {self.shadows} shadow "
            f"models per world; thresholds chosen on half, bounds on the other half "
            f"(confidence {1 - self.alpha:g} over the 3 private attacks)"
        )
        lines.append(
            f"  membership by {self.members} secret fair coins, one per candidate pair "
            "(replace-one); eps/mu: rigorous one-run bounds; heur.: heuristic"
        )
        head = (
            f"    {'model':<9} {'attack':<7} {'AUC':>6} {'TPR@1e-3':>9} {'TPR@1e-2':>9} "
            f"{'eps_lb':>7} {'mu_lb':>7} {'heur.eps':>8} {'heur.mu':>7}"
        )
        lines.append(head)
        worlds = (
            ("private", self.private, self.rigorous_private),
            ("baseline", self.baseline, self.rigorous_baseline),
        )
        for world, res, rig in worlds:
            for name, a in res.items():
                rb = rig.get(name)
                lines.append(
                    f"    {world:<9} {name:<7} {a.auc:>6.3f} {a.tpr_at_fpr['0.001']:>9.4f} "
                    f"{a.tpr_at_fpr['0.01']:>9.4f} {f(rb.eps_lb) if rb else '-':>7} "
                    f"{f(rb.mu_lb) if rb else '-':>7} {f(a.eps_lb):>8} {f(a.mu_lb):>7}"
                )
        for world in ("private", "baseline"):
            acc = self.accuracy[world]
            lines.append(
                f"  {world}: train accuracy {acc['train_accuracy']:.3f}, held-out "
                f"{acc['heldout_accuracy']:.3f} (loss {acc['train_loss']:.3g} vs "
                f"{acc['heldout_loss']:.3g})"
            )
        rp = self.rigorous_private
        b = rp[self.rigorous_eps_attack].best if self.rigorous_eps_attack in rp else None
        lines.append(
            f"  private lower bounds, {RIGOROUS_LABEL}, confidence {1 - self.alpha:g} each:"
        )
        lines.append(
            f"    eps >= {f(self.rigorous_eps_lb)} at delta {self.delta:g} "
            f"({self.rigorous_eps_attack}"
            + (
                f": {b.v} of {b.r} pair guesses correct"
                if b is not None and self.rigorous_eps_lb > 0
                else ": no guess size rejects eps = 0"
            )
            + ")"
        )
        lines.append(
            f"    f-DP refinement (Mahloujifar et al. 2024): mu >= {f(self.rigorous_mu_lb)} "
            f"({self.rigorous_mu_attack})"
        )
        lines.append(f"  private lower bounds, {HEURISTIC_LABEL}:")
        lines.append(
            f"    eps >= {f(self.eps_lb)} ({self.best_attack}), mu >= {f(self.mu_lb)} "
            f"({self.mu_attack}); informational, on its own: {self.heuristic_verdict}"
        )
        lines.append(
            "  (the heuristic is weak evidence: the examples of one model are not independent "
            "trials.\n   The verdict uses the rigorous bounds only: two tests at level alpha, "
            "a sound trainer\n   is flagged with probability at most 2 alpha)"
        )
        lines.append(f"  verdict: {self.verdict} ({self.reason}); {self.seconds:.1f} s")
        for c in self.checks:
            mu = f", mu {f(c.claim_mu)}" if c.claim_mu is not None else ""
            lines.append(f"    {c.verdict:<12} {c.bound:<22} eps {f(c.claim_eps)}{mu}  {c.reason}")
        return "\n".join(lines)


def audit_mia(
    X: Any,
    y: Any,
    model_spec: ModelSpec,
    spec: TrainerSpec,
    *,
    members: int | None = None,
    shadows: int = 8,
    seed: int = 0,
    alpha: float = 0.05,
    delta: float = 1e-5,
    bounds: Sequence[str] | None = None,
    noise_scale: float = 1.0,
    progress: bool = False,
) -> MIAResult:
    """Membership inference on a target model trained by the project's trainer on ``members``
    rows of the pool (X, y), and on a non-private baseline (the same with noise x 0).

    ``members`` defaults to a quarter of the pool (at most 1000).  ``shadows`` models per world
    (private, baseline) are trained on the rest.  ``alpha``: the false-alarm probability of the
    private lower bounds (Bonferroni over the three attacks; the baseline uses the same level).
    Returns the claim for the executed run, every attack's ROC, AUC, TPR at low FPR and lower
    bounds, and the verdict of :func:`lastiterate.audit.report.verdict_for` against every bound.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or X.shape[0] != y.shape[0] or not np.all(np.isfinite(X)):
        raise ParameterError("X", getattr(X, "shape", None), "must be finite, one row per label")
    if X.shape[1] != model_spec.n_features:
        raise ParameterError("X", X.shape, f"must have {model_spec.n_features} features")
    y = y.astype(np.int64)
    if y.size and (y.min() < 0 or y.max() >= model_spec.n_classes):
        raise ParameterError("y", "labels", f"must be classes in [0, {model_spec.n_classes - 1}]")
    alpha = check_in_range("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    delta = check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    noise_scale = check_in_range("noise_scale", noise_scale, 0.0, 1e6, low_open=True)
    shadows = check_int_in_range("shadows", shadows, MIN_SHADOWS, MAX_SHADOWS)
    if members is None:
        members = max(MIN_MEMBERS, min(1000, X.shape[0] // 4))
    split = membership_split(X.shape[0], members, seed)
    t0 = time.perf_counter()
    bar = None
    if progress:
        bar = tqdm(
            total=2 * (1 + shadows),
            unit="model",
            desc="mia: target and shadow models",
            file=sys.stderr,
            leave=False,
        )

    def tick() -> None:
        if bar is not None:
            bar.update(1)

    try:
        private, rig_p, run, acc_p = _attack_world(
            X,
            y,
            split,
            model_spec,
            spec,
            shadows=shadows,
            seed=seed,
            noise_scale=noise_scale,
            delta=delta,
            alpha=alpha,
            tick=tick,
        )
        baseline, rig_b, _, acc_b = _attack_world(
            X,
            y,
            split,
            model_spec,
            spec,
            shadows=shadows,
            seed=seed,
            noise_scale=0.0,
            delta=delta,
            alpha=alpha,
            tick=tick,
        )
    finally:
        if bar is not None:
            bar.close()
    best_attack = max(private, key=lambda k: private[k].eps_lb)
    mu_attack = max(private, key=lambda k: private[k].mu_lb)
    mu_lb = private[mu_attack].mu_lb
    eps_lb = private[best_attack].eps_lb
    rig_eps_attack = max(rig_p, key=lambda k: rig_p[k].eps_lb)
    rig_mu_attack = max(rig_p, key=lambda k: rig_p[k].mu_lb)
    rig_eps, rig_mu = rig_p[rig_eps_attack].eps_lb, rig_p[rig_mu_attack].mu_lb
    rep = account(run, delta=delta, bounds=bounds)
    checks, heuristic_checks = [], []
    for r in rep.results:
        if r.kind != "bound":
            continue
        # the rigorous bounds: flipping one coin replaces one row, so the f-DP mu_lb is compared
        # with GDP claims under replace-one only (as in the one-run audit)
        claim_mu = r.mu if r.adjacency == "replace" else None
        v, why = verdict_for(mu_lb=rig_mu, eps_lb=rig_eps, claim_mu=claim_mu, claim_eps=r.epsilon)
        checks.append(ClaimCheck(r.bound, r.theorem, r.mu, r.epsilon, r.delta, v, why))
        v, why = verdict_for(mu_lb=mu_lb, eps_lb=eps_lb, claim_mu=r.mu, claim_eps=r.epsilon)
        heuristic_checks.append(ClaimCheck(r.bound, r.theorem, r.mu, r.epsilon, r.delta, v, why))
    best = rep.best
    no_claim = "no claim: " + (rep.to_json().get("no_bound_reason") or "no bound")
    verdict, reason = _overall_verdict(checks, best, no_claim)
    h_verdict, h_reason = _overall_verdict(heuristic_checks, best, no_claim)
    return MIAResult(
        private=private,
        baseline=baseline,
        members=int(split.members.size),
        shadows=shadows,
        seed=seed,
        alpha=alpha,
        delta=delta,
        claim_bound=None if best is None else best.bound,
        claim_theorem=None if best is None else best.theorem,
        claim_mu=None if best is None else best.mu,
        claim_eps=None if best is None else best.epsilon,
        mu_lb=mu_lb,
        eps_lb=eps_lb,
        best_attack=best_attack,
        mu_attack=mu_attack,
        verdict=verdict,
        reason=reason,
        checks=tuple(checks),
        run=run.setting(),
        model={
            "kind": model_spec.kind,
            "family": model_spec.family,
            "n_features": model_spec.n_features,
            "n_classes": model_spec.n_classes,
            **({"hidden": list(model_spec.hidden)} if model_spec.kind == "mlp" else {}),
        },
        accuracy={"private": acc_p, "baseline": acc_b},
        seconds=time.perf_counter() - t0,
        noise_scale=noise_scale,
        details={
            "baseline": "the same trainer, flags and seeds with the noise multiplied by 0 "
            "(no claim)",
            "shadow_pool": int(split.shadow_pool.size),
            "alpha_per_attack": alpha / len(ATTACKS),
            "not_applicable": "; ".join(f"{n.bound}: {n.reason}" for n in rep.not_applicable),
            "membership": "m candidate pairs, one secret fair coin each picks the member "
            "(replace-one); the verdict uses the rigorous one-run bounds only",
        },
        rigorous_private=rig_p,
        rigorous_baseline=rig_b,
        rigorous_eps_lb=rig_eps,
        rigorous_mu_lb=rig_mu,
        rigorous_eps_attack=rig_eps_attack,
        rigorous_mu_attack=rig_mu_attack,
        heuristic_verdict=h_verdict,
        heuristic_reason=h_reason,
        heuristic_checks=tuple(heuristic_checks),
    )


def _overall_verdict(checks: Sequence[ClaimCheck], best: Any, no_claim: str) -> tuple[str, str]:
    """VIOLATION when any claim is refuted, else the verdict against the best claim."""
    if any(c.verdict == "VIOLATION" for c in checks):
        return "VIOLATION", "; ".join(
            f"{c.bound}: {c.reason}" for c in checks if c.verdict == "VIOLATION"
        )
    if best is None:
        return "inconclusive", no_claim
    c = next(c for c in checks if c.bound == best.bound)
    return c.verdict, c.reason
