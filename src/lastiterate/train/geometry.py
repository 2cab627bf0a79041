"""Geometry certificates: the constants the last-iterate theorems need, DERIVED from the model.

A certificate turns (model family, feature-norm bound R, L2 strength lambda, clip norm C, step
size, sampling scheme) into strong convexity ``m``, smoothness ``M``, gradient sensitivity ``L`` and
contraction ``c`` of the update the trainer actually executes -- or into a refusal with the reason.
The trainer passes ``strong_convexity=m, smoothness=M`` into the :class:`~lastiterate.run.Run`
only when the certificate holds; otherwise the run carries no geometry and the accountant falls
back to composition, saying why.  Pure Python: importing this module does not import torch.

Setting.  Every example's features are clipped to ``||x|| <= R`` (a per-row transformation that is
applied to ANY dataset, so it holds for the neighbouring dataset too).  With an intercept the
constant feature 1 is part of x, so the certificate uses ``R_eff = sqrt(R^2 + 1)``.  The loss of
one example is ``l_i(w) + (lambda/2)||w||^2``; only ``grad l_i`` is clipped, the regulariser's
gradient ``lambda w`` is identical on neighbouring datasets and is added unclipped (so the
sensitivity is unchanged).

Derivations (Hessians w.r.t. the flattened parameters; ``u = w.x`` or ``z = W x``):

* **Binary logistic** ``l(u) = log(1 + exp(-y u))``: ``grad = l'(u) x`` with ``|l'| < 1`` and
  ``l'' = s(1 - s) <= 1/4`` (s the sigmoid), so ``Hess = l''(u) x x^T <= (R^2/4) I``:
  ``M = R^2/4 + lambda``, ``m = lambda``; ``sup ||grad|| < R``.
* **Multinomial logistic** (softmax cross-entropy over K classes, weight ``W`` in R^{K x d}):
  ``grad = (p - e_y) x^T`` and ``Hess = (diag(p) - p p^T) (x) x x^T`` (Kronecker).  For any v,
  ``v^T (diag(p) - p p^T) v = Var_{J~p}(v_J) = (1/2) sum_{i != j} p_i p_j (v_i - v_j)^2
  <= sum_{i != j} p_i p_j (v_i^2 + v_j^2) = 2 sum_i p_i (1 - p_i) v_i^2 <= ||v||^2 / 2``
  (using ``(a-b)^2 <= 2a^2 + 2b^2`` and ``p(1-p) <= 1/4``).  So ``||Hess|| <= R^2/2``:
  ``M = R^2/2 + lambda``, ``m = lambda``.  The 1/2 is attained (K=2, p=(1/2,1/2), v=(1,-1)), so it
  cannot be improved for the over-parameterised softmax.  ``||p - e_y||^2 = (1-p_y)^2 +
  sum_{j != y} p_j^2 <= 2 (1 - p_y)^2 < 2``, hence ``sup ||grad|| = sqrt(2) R`` (not attained).
* **Least squares / ridge** ``l(u) = (u - y)^2 / 2``: ``Hess = x x^T <= R^2 I``:
  ``M = R^2 + lambda``, ``m = lambda``.  No bound on y is needed for the geometry; the gradient
  ``(u - y) x`` is unbounded, so the sensitivity comes from the clip norm.

Clipping and convexity (the subtle part).  The theorems need the executed step
``x -> x - eta ((1/b) sum clip_C(g_i(x)) + lambda x)`` to be a gradient step of an m-strongly
convex, M-smooth function (so that it is c-Lipschitz with ``c = max(|1-eta m|, |1-eta M|)``).

* For the SCALAR GLMs (binary logistic, least squares) ``clip_C(l'(u) x) = clamp(l'(u), -C/||x||,
  C/||x||) x``: clamping a non-decreasing ``l'`` gives the derivative of a convex loss (a
  Huber-type loss) whose second derivative is ``0`` or ``l''``.  So the clipped step IS a gradient
  step of a convex loss with the same M, for every clip norm C.  Certified for any C.
* For the MULTINOMIAL logistic loss the clipped gradient ``s(z) (p - e_y) x^T`` with
  ``s = min(1, C / (||p - e_y|| ||x||))`` is NOT a gradient field when the clip is active: its
  Jacobian ``s (I - u u^T/||u||^2) (diag p - p p^T)`` is not symmetric, and the step can expand
  distances.  Example (R = C = 1, lambda = 0.005, eta = 1, K = 10): the largest singular value
  of one clipped step's Jacobian reaches 1.0076 > c = 0.995 (``tests/train/test_geometry.py``
  reproduces it).  Therefore the multinomial certificate holds only when the clip can never be
  active, i.e. ``C >= sqrt(2) R_eff``; otherwise the trainer claims no geometry (composition only)
  and says so, suggesting ``R <= C / sqrt(2)``.

Sensitivity.  Under replace-one adjacency ``L = 2C``.  When ``C`` exceeds the unclipped bound
``G = sup ||grad l_i||`` the clip is inactive (no clipping bias) and ``2C`` is still a valid (if
loose) sensitivity; lowering C to G changes nothing in training and tightens L.

Sampling.  Poisson batches are normalised by the FIXED expected size b, so a realised batch B
makes the data term ``(1/b) sum_{i in B} l_i``, whose curvature is ``(|B|/b) beta``; since |B|
can be as large as n, the certificate for Poisson sampling uses the worst case
``M = (n/b) beta + lambda`` (the regulariser is applied as ``lambda w`` at every step, so
``m = lambda`` for every realised batch, including an empty one).  Fixed-size, cyclic and
shuffled batches are averaged over their realised size, so ``M = beta + lambda``.

MLPs and other models: no convexity or smoothness is certified (an MLP's Hessian is unbounded
over R^d and non-convex), so only composition applies; :func:`uncertified` records the reason.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, TypedDict

from lastiterate.errors import (
    ParameterError,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_scale,
)

#: GLM families with a certificate
FAMILIES = ("binary-logistic", "multinomial-logistic", "least-squares")

#: Hessian bound of the data loss per unit ||x||^2 (see the module docstring)
_CURVATURE = {"binary-logistic": 0.25, "multinomial-logistic": 0.5, "least-squares": 1.0}

#: sup ||grad l_i|| / ||x|| (None = unbounded)
_GRAD_BOUND = {
    "binary-logistic": 1.0,
    "multinomial-logistic": math.sqrt(2.0),
    "least-squares": None,
}


class _CertificateFields(TypedDict):
    """The :class:`Certificate` fields shared by every outcome of :func:`glm_certificate`."""

    data_smoothness: float
    feature_norm: float
    effective_feature_norm: float
    l2: float
    clip: float
    gradient_bound: float | None
    clipping_active: bool
    sensitivity: float
    lr: float | None


@dataclass(frozen=True)
class Certificate:
    """What the trainer may claim about the executed update.

    ``certified`` is True when ``strong_convexity`` and ``smoothness`` are proven for the update
    the trainer runs; then ``run_geometry()`` gives the Run keywords.  Otherwise ``reason`` says
    why the strongly-convex / bounded-domain theorems cannot be claimed.

    Attributes:
        model: the model family (or a model's name for :func:`uncertified`).
        certified: whether the geometry below is proven for the executed update.
        reason: the derivation (certified) or why nothing is claimed.
        strong_convexity: m (None: not strongly convex).
        smoothness: M of the executed update (with the sampling's worst case).
        data_smoothness: beta = curvature * R_eff^2 (before lambda and sampling).
        feature_norm: R, the declared bound on the feature norm.
        effective_feature_norm: R_eff (with the intercept feature).
        l2: the L2 strength lambda.
        clip: the clip norm C.
        gradient_bound: sup ||grad l_i|| of the unclipped loss (None: unbounded).
        clipping_active: whether the clip can ever be active.
        sensitivity: L under replace-one (2C).
        contraction: c at the learning rate (the worst over a schedule).
        lr: the learning rate the contraction was computed at.
        hint: how to obtain a certificate, when refused.
    """

    model: str
    certified: bool
    reason: str
    strong_convexity: float | None = None
    smoothness: float | None = None
    data_smoothness: float | None = None  # beta = curvature * R_eff^2 (before lambda, sampling)
    feature_norm: float | None = None  # R (declared bound on ||x||)
    effective_feature_norm: float | None = None  # R_eff (with the intercept feature)
    l2: float = 0.0
    clip: float | None = None
    gradient_bound: float | None = None  # sup ||grad l_i|| (unclipped), None = unbounded
    clipping_active: bool | None = None  # can the clip ever be active?
    sensitivity: float | None = None  # L under replace-one
    contraction: float | None = None  # c at the given learning rate (max over a schedule)
    lr: float | None = None
    hint: str | None = None

    def run_geometry(self) -> dict[str, Any]:
        """The keywords to pass to :class:`~lastiterate.run.Run` (empty when not certified).

        Returns:
            ``{"strong_convexity": m, "smoothness": M}``, ``{"smoothness": M, "convex": True}``
            when lambda = 0, or ``{}``.
        """
        if not self.certified:
            return {}
        if self.strong_convexity is None:  # lambda = 0: convex and M-smooth only
            return {"smoothness": self.smoothness, "convex": True}
        return {"strong_convexity": self.strong_convexity, "smoothness": self.smoothness}

    def to_json(self) -> dict[str, Any]:
        """The certificate as a JSON object.

        Returns:
            A dict of every field.
        """
        return {k: v for k, v in asdict(self).items()}


def glm_certificate(
    family: str,
    *,
    feature_norm: float | None,
    l2: float,
    clip: float,
    lr: float | None = None,
    intercept: bool = False,
    sampling: str | None = None,
    n: int | None = None,
    batch_size: int | None = None,
    lr_min: float | None = None,
) -> Certificate:
    """Certificate for a GLM with features clipped to ``||x|| <= feature_norm``.

    ``sampling='poisson'`` needs ``n`` and ``batch_size`` (worst-case batch size n, see the module
    docstring).  ``lr`` (the largest step of a schedule; ``lr_min`` its smallest) is used to refuse
    when ``lr >= 2/M`` and to report the worst contraction over the schedule,
    ``c = max(|1 - lr_min m|, |1 - lr M|)`` (a smaller step contracts less).  The derivations
    are in the module docstring.

    Args:
        family: the GLM family, one of :data:`FAMILIES`.
        feature_norm: R, the clip norm of every feature row (None: unclipped, nothing certified).
        l2: the L2 strength lambda >= 0 (m = lambda).
        clip: the per-example gradient clip norm C > 0.
        lr: the (largest) learning rate, to check contraction and report c.
        intercept: whether the model has an intercept (R_eff = sqrt(R^2 + 1)).
        sampling: the batch sampling; ``"poisson"`` takes the worst-case batch of n examples.
        n: the number of examples (Poisson sampling).
        batch_size: the (expected) batch size b (Poisson sampling).
        lr_min: the smallest learning rate of a schedule.

    Returns:
        A :class:`Certificate`: certified with m, M and c, or refused with the reason and a hint.

    Raises:
        ParameterError: an unknown family or a value out of range (also ``n`` or ``batch_size``
            missing for Poisson sampling).
    """
    if family not in FAMILIES:
        raise ParameterError("model", family, "must be one of " + ", ".join(FAMILIES))
    lam = check_nonnegative("l2", l2)
    C = check_scale("clip", clip)  # 2C and C^2 stay finite (the Run's range)
    if lr is not None:
        lr = check_scale("lr", lr)
    if lr_min is not None:
        lr_min = check_scale("lr_min", lr_min)
    name = family
    if feature_norm is None:
        return Certificate(
            name,
            False,
            "no feature-norm bound R: features are not clipped, so the loss has no certified "
            "smoothness (give feature_norm / --feature-norm)",
            l2=lam,
            clip=C,
            sensitivity=2 * C,
            lr=lr,
        )
    R = check_positive("feature_norm", feature_norm)
    R_eff = math.sqrt(R * R + 1.0) if intercept else R
    beta = _CURVATURE[family] * R_eff * R_eff  # not R_eff**2: float pow raises on overflow
    if not math.isfinite(beta):
        raise ParameterError(
            "feature_norm", feature_norm, "is too large: the smoothness curvature * R^2 overflows"
        )
    if beta == 0.0:  # 2/M below would divide by zero
        raise ParameterError(
            "feature_norm", feature_norm, "is too small: the smoothness curvature * R^2 underflows"
        )
    gb = _GRAD_BOUND[family]
    G = None if gb is None else gb * R_eff
    active = True if G is None else (G > C)
    if sampling == "poisson":
        if n is None or batch_size is None:
            raise ParameterError(
                "batch_size", batch_size, "n and batch_size are needed for the Poisson certificate"
            )
        n = check_positive_int("n", n)
        if not 1 <= check_positive_int("batch_size", batch_size) <= n:
            raise ParameterError("batch_size", batch_size, f"must be an integer in [1, n={n}]")
        M = (n / batch_size) * beta + lam
        sampling_note = (
            "; Poisson batches normalised by b: the worst-case batch of all n examples gives "
            "M = (n/b) beta + lambda"
        )
    else:
        M = beta + lam
        sampling_note = ""
    common: _CertificateFields = {
        "data_smoothness": beta,
        "feature_norm": R,
        "effective_feature_norm": R_eff,
        "l2": lam,
        "clip": C,
        "gradient_bound": G,
        "clipping_active": active,
        "sensitivity": 2 * C,
        "lr": lr,
    }
    if lam <= 0:
        # convex but not strongly convex: smoothness still certified (bounded-domain theorems)
        m = 0.0
    else:
        m = lam
    if family == "multinomial-logistic" and active:
        rmax = C / math.sqrt(2.0)
        rmax_raw = math.sqrt(max(rmax**2 - 1.0, 0.0)) if intercept else rmax
        return Certificate(
            name,
            False,
            f"multinomial logistic with clip C={C:g} < sqrt(2) R_eff={G:.6g}: the clip can be "
            "active, and a clipped softmax gradient is not the gradient of a convex loss (the "
            "step can expand distances), so no contraction is certified",
            **common,
            hint=(
                f"use a feature norm R <= C/sqrt(2) = {rmax:.6g}"
                + (f" (R <= {rmax_raw:.6g} with the intercept)" if intercept else "")
                + f" or a clip C >= sqrt(2) R_eff = {G:.6g} to certify m = lambda, "
                "M = R^2/2 + lambda"
            ),
        )
    c = None
    reason = (
        f"{family}: m = lambda = {m:g}, M = {_CURVATURE[family]:g} R_eff^2 + lambda = {M:.6g}"
        f" (R_eff = {R_eff:.6g}){sampling_note}"
    )
    if family != "multinomial-logistic" and active:
        reason += (
            "; the clip is a scalar clamp of l'(u), i.e. a gradient step of a convex Huber-type "
            "loss with the same M"
        )
    elif not active:
        reason += f"; the clip C={C:g} >= sup ||grad|| = {G:.6g} is never active (no clipping bias)"
    if lr is not None:
        eta = check_positive("lr", lr)
        if m > 0:
            if eta >= 2 / M:
                return Certificate(
                    name,
                    False,
                    f"lr={eta:g} >= 2/M = {2 / M:.6g} (M = {M:.6g}{sampling_note}): a gradient "
                    "step is not a contraction",
                    strong_convexity=m,
                    smoothness=M,
                    **common,
                    hint=f"use lr < {2 / M:.6g}",
                )
            eta_min = eta if lr_min is None else min(eta, check_positive("lr_min", lr_min))
            c = max(abs(1 - eta_min * m), abs(1 - eta * M))
        else:
            if eta > 2 / M:
                return Certificate(
                    name,
                    False,
                    f"lr={eta:g} > 2/M = {2 / M:.6g} (M = {M:.6g}{sampling_note}): a gradient "
                    "step is not non-expansive",
                    strong_convexity=m,
                    smoothness=M,
                    **common,
                    hint=f"use lr <= {2 / M:.6g}",
                )
            c = 1.0
    return Certificate(
        name,
        True,
        reason,
        strong_convexity=m if m > 0 else None,
        smoothness=M,
        contraction=c,
        **common,
    )


def uncertified(
    model: str, reason: str, *, clip: float | None = None, lr: float | None = None
) -> Certificate:
    """A model without a geometry certificate (MLP, CNN, Adam updates...): composition only.

    Args:
        model: the model's name.
        reason: why no geometry is certified.
        clip: the clip norm C (gives the sensitivity 2C).
        lr: the learning rate.

    Returns:
        An uncertified :class:`Certificate`.
    """
    return Certificate(
        model, False, reason, clip=clip, sensitivity=None if clip is None else 2 * clip, lr=lr
    )


MLP_REASON = (
    "an MLP's loss is neither convex nor globally smooth (its Hessian is unbounded over parameter "
    "space), so no strong convexity or smoothness is certified: only composition bounds apply"
)

ADAM_REASON = (
    "NoisyAdam's update is not a gradient step of the loss (per-coordinate adaptive scaling), "
    "so no contraction is certified; its privacy is that of the noisy gradients it "
    "post-processes (composition, paper 004)"
)
