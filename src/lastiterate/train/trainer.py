"""Noisy gradient methods that execute exactly the update the accountant's theorems assume.

    x_{t+1} = Proj_K( x_t - eta_t * ( (1/b_t) sum_{i in B_t} clip_C(g_i(x_t)) +
        lambda x_t + Z_t ) ),
    Z_t ~ N(0, sigma^2 I)  over ALL parameters

* ``b_t`` is the normaliser of :mod:`lastiterate.train.sampling`: n (gd), the realised batch size
  for the cyclic / shuffled partitions (>= b_min, the size the accountant charges), and the FIXED
  b for uniform and Poisson batches (never the realised Poisson size).  Only the Poisson scheme,
  whose normaliser b is a public constant, is run under add/remove adjacency (one added or
  removed example moves the average by at most C/b); the other schemes normalise by a size that
  depends on the data, so removing an example moves the average by up to 2C/b and they are
  refused under add/remove (:func:`lastiterate.run.check_adjacency`, the accountant's rule).
* ``clip_C`` clips each example's gradient of its data loss to norm C (replace-one sensitivity
  L = 2C).  The L2 regulariser's gradient ``lambda x`` is added unclipped: it is identical on
  neighbouring datasets, so the sensitivity is unchanged.  It is applied once per step, also for
  Poisson batches (a data-independent term, so privacy is unaffected; it keeps every step
  lambda-strongly convex whatever the realised batch).
* Noise std ``sigma`` is on the averaged gradient (``noise_multiplier`` z means sigma = z C / b).
* ``Proj_K``: the L2 ball of diameter D centred at 0 (``diameter=D``) or any callable
  ``projection(flat_parameters) -> flat_parameters`` (it must be the projection onto a closed
  convex set for the theorems to hold; give its ``diameter`` to use the bounded-domain theorems).
* ``eta_t``: a constant, a sequence of length T or a callable ``t -> eta_t``.
* Randomness (:mod:`~lastiterate.train.randomness`): ``Z_t`` and ``B_t`` are drawn from fresh secret
  OS entropy for every :meth:`~NoisyMethod.fit` unless ``seed=`` is given (reproducible, with a
  :class:`~lastiterate.train.randomness.SeededRunWarning`: the guarantee then needs the seed to stay
  secret and never be reused on other data).  ``secure=True``: a keyed CSPRNG and the
  floating-point-safe Gaussian sampler of Holohan and Braghin (ESORICS 2021).  Only the owner-only
  checkpoint keeps the secret (to resume); reports, JSON and ledgers never do.
* Device and processes (:mod:`~lastiterate.train.distributed`): ``fit(device="cuda")`` runs the
  same per-example path on a GPU; ``fit(distributed=from_env())`` splits every GLOBAL batch over
  the ranks of a ``torch.distributed`` group, all-reduces the clipped sums, normalises by the
  global b_t and adds ``Z_t`` once, after the all-reduce (the same Run, the same guarantee).

The trainer BUILDS the :class:`~lastiterate.run.Run` describing what it executed (sampling,
n, b, T, eta, sigma, C, D, and the geometry only when :mod:`~lastiterate.train.geometry`
certifies it for this model, data bound, step size and sampling) -- nobody types it twice.

Classes: :class:`NoisyGD`, :class:`NoisyCGD` (fixed balanced partition, cycled), :class:`NoisySGD`
(``sampling`` poisson / uniform / shuffle), :class:`NoisyAdam` (Adam applied to the same noisy
averaged gradient: post-processing of the noisy gradients, paper 004; composition only).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from lastiterate.accountant import account as _account
from lastiterate.errors import ParameterError, check_nonnegative, check_positive, check_positive_int
from lastiterate.formatting import fmt_int
from lastiterate.run import Run, check_adjacency
from lastiterate.train.budget import Budget, allowed_steps, truncate
from lastiterate.train.distributed import DataParallel, check_device, move_model, parameters_sha256
from lastiterate.train.geometry import ADAM_REASON, Certificate, uncertified
from lastiterate.train.ledger import (
    Ledger,
    load_checkpoint,
    refuse_foreign_checkpoint,
    save_checkpoint,
    training_checkpoint,
)
from lastiterate.train.models import GLM
from lastiterate.train.randomness import Randomness, SeededRunWarning
from lastiterate.train.sampling import Sampler, make_sampler

LR = float | Sequence[float] | Callable[[int], float]

COMPOSITION_IDS = ("gdp-composition", "pld-composition", "rdp-composition")

_NOISE_STREAM = 21


def clip_rows(X: Tensor, R: float) -> Tensor:
    """Scale every row to norm at most R (the feature-norm bound of the GLM certificates).

    Args:
        X: features ``[B, d]``.
        R: the row norm bound.

    Returns:
        X with every row of norm above R scaled down to norm R.
    """
    norms = torch.linalg.vector_norm(X, dim=1, keepdim=True)
    return X * torch.clamp(R / torch.clamp(norms, min=1e-300), max=1.0)


def l2_ball(diameter: float) -> Callable[[Tensor], Tensor]:
    """Projection onto the L2 ball of diameter D (radius D/2) centred at the origin.

    Args:
        diameter: D > 0.

    Returns:
        The projection of a flat parameter vector (named ``l2_ball(D=...)``).

    Raises:
        ParameterError: D is not positive.
    """
    radius = check_positive("diameter", diameter) / 2.0

    def project(flat: Tensor) -> Tensor:
        if flat.ndim > 1:  # R runs (NoisyRuns): one flat parameter vector per row
            norms = torch.linalg.vector_norm(flat, dim=-1, keepdim=True)
            return flat * torch.where(norms > radius, radius / norms, torch.ones_like(norms))
        norm = float(torch.linalg.vector_norm(flat))
        return flat * (radius / norm) if norm > radius else flat

    project.__name__ = f"l2_ball(D={diameter:g})"
    project.runs_dimension = True  # type: ignore[attr-defined]  # rows are runs (above)
    return project


def averaged_noisy_gradient(
    gsum: Sequence[Tensor],
    params: Sequence[Tensor],
    noise: Sequence[Tensor],
    normaliser: float | Tensor,
    l2: float,
) -> list[Tensor]:
    """The noisy gradient of the canonical update: ``(1/b_t) sum_i clip_C(g_i) + lambda x_t + Z_t``.

    The one formula of every noisy step: :meth:`NoisyMethod.noisy_gradient` (one run) and
    :class:`NoisyRuns` (R runs on a leading dimension; ``normaliser`` then holds each run's b_t).

    Args:
        gsum: the clipped gradient sums, one per parameter tensor (runs first for R runs).
        params: the parameters x_t (the L2 term's gradient lambda x_t, unclipped).
        noise: Z_t, one tensor per parameter.
        normaliser: b_t (one run), or a tensor ``[R]`` of every run's b_t.
        l2: lambda.

    Returns:
        The noisy averaged gradient per parameter tensor.
    """
    with torch.no_grad():
        out = []
        for g, p, z in zip(gsum, params, noise):
            b = normaliser
            if isinstance(b, Tensor) and b.ndim:  # [R] -> [R, 1, ...]: each run its own b_t
                b = b.reshape(b.shape + (1,) * (g.ndim - b.ndim))
            out.append(g / b + l2 * p.detach() + z)
        return out


def descend(
    params: Sequence[Tensor],
    grads: Sequence[Tensor],
    eta: float,
    projection: Callable[[Tensor], Tensor] | None,
    runs: bool = False,
) -> None:
    """The step of the canonical update, in place: ``x_{t+1} = Proj_K(x_t - eta_t * grad)``.

    Shared by :class:`NoisyGD` / :class:`NoisyCGD` / :class:`NoisySGD` (one run) and
    :class:`NoisyRuns` (``runs``: R runs stacked on the first dimension).

    Args:
        params: the parameters x_t (updated in place).
        grads: the noisy averaged gradient (:func:`averaged_noisy_gradient`).
        eta: the step size eta_t.
        projection: Proj_K of a flat parameter vector, or None.
        runs: whether the first dimension of every tensor is the run.
    """
    with torch.no_grad():
        for p, g in zip(params, grads):
            p.sub_(eta * g)
    project_parameters(params, projection, runs)


def project_parameters(
    params: Sequence[Tensor], projection: Callable[[Tensor], Tensor] | None, runs: bool = False
) -> None:
    """``Proj_K`` applied in place to the parameters (flattened, as the projection sees them).

    Args:
        params: the parameter tensors (one run), or R runs stacked on the first dimension.
        projection: the projection of a flat parameter vector (None: no projection).  With
            ``runs``, one that handles rows as runs (``runs_dimension``, e.g. :func:`l2_ball`)
            gets all R at once; any other is called on every run's vector in turn.
        runs: whether the first dimension of every tensor is the run.
    """
    if projection is None:
        return
    with torch.no_grad():
        if not runs:
            flat = torch.cat([p.detach().reshape(-1) for p in params])
            new = projection(flat)
        else:
            R = params[0].shape[0]
            flat = torch.cat([p.detach().reshape(R, -1) for p in params], dim=1)
            if getattr(projection, "runs_dimension", False):
                new = projection(flat)
            else:
                new = torch.stack([projection(row) for row in flat])
        if new is flat:
            return
        k = 0
        for p in params:
            m = p[0].numel() if runs else p.numel()
            p.copy_(new[..., k : k + m].reshape(p.shape))
            k += m


def default_threads(model: Any, batch_size: int) -> int | None:
    """The trainer's thread policy: 1 when parameters x batch size < 5e7, else None
    (torch's setting)."""
    n_par = sum(int(p.numel()) for p in model.params())
    return 1 if n_par * batch_size < 5e7 else None


def composition_summary(report: Any) -> dict[str, Any] | None:
    """The tightest composition bound of a report (what releasing every iterate would cost)."""
    comp = [r for r in report.results if r.kind == "bound" and r.bound in COMPOSITION_IDS]
    if not comp:
        return None
    key = (lambda r: r.epsilon) if report.query.delta is not None else (lambda r: r.delta)
    c = min(comp, key=key)
    return {
        "bound": c.bound,
        "theorem": c.theorem,
        "epsilon": c.to_json()["epsilon"],
        "delta": c.delta,
        "mu": c.mu,
    }


def guarantee_summary(report: Any) -> dict[str, Any]:
    js = report.to_json()
    return {"delta": js["delta"], "best": js["best"], "composition": composition_summary(report)}


@dataclass
class TrainResult:
    """What :meth:`fit` did: the executed Run, its privacy report, the certificate, the timings.

    Attributes:
        model: the trained model (its final parameters are what the guarantee covers).
        run: the :class:`~lastiterate.run.Run` of the steps actually executed.
        planned_run: the run planned before a budget stop.
        report: the :class:`~lastiterate.accountant.Report` of ``run`` (None when not accounted).
        certificate: the geometry certificate (m, M, L, c), or why none is claimed.
        steps: the number of steps executed.
        seconds: fit() wall time: training and accounting.
        delta: the delta of the report.
        train_seconds: the noisy steps only (no accounting, ledger or checkpoints).
        budget: the budget stop (:class:`~lastiterate.train.budget.Budget`), if any.
        resumed_from: the checkpoint step training resumed from, if any.
        run_id: the run's id in the ledger and checkpoints.
        clipped_fraction: the fraction of per-example gradients that were clipped.
        notes: what the trainer did, in words.
        randomness: the public description of the randomness (never the seed or the secret).
    """

    model: Any
    run: Run  # the steps actually executed
    planned_run: Run
    report: Any  # lastiterate.accountant.Report of ``run`` (None when not accounted)
    certificate: Certificate
    steps: int
    seconds: float  # fit() wall time: training and accounting
    delta: float
    train_seconds: float = 0.0  # the noisy steps only (no accounting, ledger or checkpoints)
    budget: Budget | None = None
    resumed_from: int | None = None
    run_id: str = ""
    clipped_fraction: float = 0.0
    notes: list[str] = field(default_factory=list)
    randomness: dict[str, Any] = field(
        default_factory=dict
    )  # public description; never the seed or the secret

    @property
    def stopped_by_budget(self) -> bool:
        """Whether a budget stopped training before the planned steps."""
        return self.budget is not None and self.budget.stops_early

    def guarantee(self) -> dict[str, Any]:
        """The tightest guarantee for the final model and the composition baseline.

        Returns:
            ``delta``, ``best`` and ``composition`` (empty when the run was not accounted).
        """
        return guarantee_summary(self.report) if self.report is not None else {}


#: the most noisy steps one training run executes (every practical run of a GLM or small network on
#: a CPU is far below; beyond it a run takes hours or days, and its per-epoch bookkeeping alone
#: would exhaust memory): more is refused before any work, naming epochs / steps and their range
MAX_TRAIN_STEPS = 1_000_000


def _check_train_steps(T: int, l: float, *, epochs: float | None, steps: int | None) -> None:
    """Refuse a run of more than :data:`MAX_TRAIN_STEPS` steps (``l`` steps per epoch), naming
    the argument the user gave and its range."""
    if T <= MAX_TRAIN_STEPS:
        return
    if steps is not None:
        raise ParameterError(
            "steps", steps, f"must be an integer in [1, {MAX_TRAIN_STEPS:.0e}] (MAX_TRAIN_STEPS)"
        )
    raise ParameterError(
        "epochs",
        epochs,
        f"gives {fmt_int(T)} steps; training runs at most {MAX_TRAIN_STEPS:.0e} steps "
        f"(MAX_TRAIN_STEPS), so epochs must be in (0, {MAX_TRAIN_STEPS / l:.4g}] here",
    )


class NoisyMethod:
    """Shared machinery; use :class:`NoisyGD`, :class:`NoisyCGD`, :class:`NoisySGD`,
    :class:`NoisyAdam`.

    Each step clips every per-example gradient to norm C, averages over the batch (normalised as
    the run's sampling says), adds the L2 term and Gaussian noise of std sigma, then steps and
    projects: the canonical update the accountant's :class:`~lastiterate.run.Run` describes.

    Args:
        model: a :class:`~lastiterate.train.models.GLM` or
            :class:`~lastiterate.train.models.ModuleModel`.
        lr: the step size: a number, a sequence with one value per step, or a function of t.
        clip: the per-example clip norm C.
        noise_std: sigma, the std of the noise on the AVERAGED gradient; or
        noise_multiplier: Opacus' z (sigma = z C / b); give exactly one of the two.
        batch_size: b (cgd, sgd).
        sampling: sgd's batch sampling: poisson, uniform or shuffle.
        l2: the L2 regularisation lambda (part of the gradient, not clipped).
        diameter: project onto the L2 ball of this diameter D after every step.
        projection: a custom projection of the flat parameters (default: the ball of D).
        feature_norm: the row norm R the data are clipped to (for the GLM certificate).
        seed: None (default: secret OS entropy, redrawn by every fit) or a seed (replays the
            noise and batches: the guarantee then needs the seed to stay secret).
        secure: draw the noise from a CSPRNG with floating-point-safe Gaussians.
        adjacency: ``replace`` (default) or ``add-remove`` (Poisson sgd only).
        permute: cgd: partition a random permutation (default) or the examples in order.

    Raises:
        ParameterError: a value out of range, both or neither of noise_std and
            noise_multiplier, or an adjacency the run does not support.
    """

    algorithm: str = "gd"
    uses_adam: bool = False

    def __init__(
        self,
        model: Any,
        *,
        lr: LR,
        clip: float,
        noise_std: float | None = None,
        noise_multiplier: float | None = None,
        batch_size: int | None = None,
        sampling: str | None = None,
        l2: float = 0.0,
        diameter: float | None = None,
        projection: Callable[[Tensor], Tensor] | None = None,
        feature_norm: float | None = None,
        seed: int | None = None,
        secure: bool = False,
        adjacency: str = "replace",
        permute: bool = True,
    ) -> None:
        self.model = model
        self.lr = lr
        self.clip = check_positive("clip", clip)
        if (noise_std is None) == (noise_multiplier is None):
            raise ParameterError(
                "noise_std", noise_std, "give exactly one of noise_std and noise_multiplier"
            )
        self.noise_std = None if noise_std is None else check_positive("noise_std", noise_std)
        self.noise_multiplier = (
            None
            if noise_multiplier is None
            else check_positive("noise_multiplier", noise_multiplier)
        )
        self.batch_size = batch_size
        self.sampling = sampling
        self.l2 = check_nonnegative("l2", l2)
        self.diameter = None if diameter is None else check_positive("diameter", diameter)
        if projection is None and self.diameter is not None:
            projection = l2_ball(self.diameter)
        self.projection = projection
        self.feature_norm = (
            None if feature_norm is None else check_positive("feature_norm", feature_norm)
        )
        if not isinstance(secure, bool):
            raise ParameterError("secure", secure, "must be True or False")
        self.secure = secure
        self.randomness = Randomness.of(
            seed, secure
        )  # fresh OS entropy unless seeded; redrawn by every fit()
        self.seed = self.randomness.seed
        # the same rule (and line) as Run: add/remove only for Poisson batches over the FIXED b
        self.adjacency = check_adjacency(adjacency, self.algorithm, sampling)
        self.permute = permute
        self._adam_state: dict[str, Any] = {}
        self._dp = DataParallel()  # one process on the CPU unless fit(device=, distributed=)
        #: (training features, their squared row norms): a GLM's norms, computed once per X
        self._row_sq_norms: tuple[Tensor, Tensor] | None = None

    # ---------------------------------------------------------------- planning
    def sampler(self, n: int) -> Sampler:
        """The batch sampler of this method on ``n`` examples (keyed by the method's randomness).

        Args:
            n: the number of examples.

        Returns:
            The :class:`~lastiterate.train.sampling.Sampler`.
        """
        return make_sampler(
            self.algorithm,
            n,
            self.batch_size,
            self.sampling,
            seed=self.randomness,
            permute=self.permute,
        )

    def _schedule(self, T: int) -> tuple[float, ...] | float:
        lr = self.lr
        if callable(lr):
            sched = tuple(float(lr(t)) for t in range(T))
        elif isinstance(lr, (int, float)) and not isinstance(lr, bool):
            return float(check_positive("lr", lr))
        else:
            sched = tuple(float(v) for v in lr)  # type: ignore[union-attr]
            if len(sched) < T:
                raise ParameterError(
                    "lr",
                    f"<sequence of {len(sched)}>",
                    f"schedule must have at least one value per step ({T})",
                )
            sched = sched[:T]
        for v in sched:
            check_positive("lr", v)
        return sched[0] if min(sched) == max(sched) else sched

    def _sigma(self, sampler: Sampler) -> float:
        if self.noise_std is not None:
            return self.noise_std
        return float(self.noise_multiplier) * self.clip / sampler.batch_size  # type: ignore[arg-type]

    def certificate(self, n: int, lr_max: float, lr_min: float | None = None) -> Certificate:
        """The geometry the model certifies for this method (none for Adam: ``ADAM_REASON``).

        Args:
            n: the number of examples.
            lr_max: the largest step size.
            lr_min: the smallest step size of a schedule.

        Returns:
            The :class:`~lastiterate.train.geometry.Certificate`.
        """
        if self.uses_adam:
            return uncertified(
                getattr(self.model, "family", "model"), ADAM_REASON, clip=self.clip, lr=lr_max
            )
        s = self.sampler(n)
        kw = {"lr_min": lr_min} if lr_min is not None else {}
        return self.model.certificate(
            feature_norm=self.feature_norm,
            l2=self.l2,
            clip=self.clip,
            lr=lr_max,
            sampling=s.sampling,
            n=n,
            batch_size=s.batch_size,
            **kw,
        )

    def plan(
        self, n: int, *, epochs: float | None = None, steps: int | None = None
    ) -> tuple[Run, Certificate, Sampler]:
        """The Run this method will execute on ``n`` examples, its certificate and its sampler.

        Args:
            n: the number of examples.
            epochs: the number of epochs; or
            steps: the number of steps T (give exactly one).

        Returns:
            ``(run, certificate, sampler)``.

        Raises:
            ParameterError: n, epochs or steps out of range, both or neither of epochs and
                steps, or a learning-rate schedule shorter than T.
        """
        n = check_positive_int("n", n)
        s = self.sampler(n)
        if (epochs is None) == (steps is None):
            raise ParameterError("epochs", epochs, "give exactly one of epochs and steps")
        T = (
            check_positive_int("steps", steps)
            if steps is not None
            else s.steps_for_epochs(check_positive("epochs", epochs))
        )
        _check_train_steps(T, s.l, epochs=epochs, steps=steps)
        lr = self._schedule(T)
        lr_max = lr if isinstance(lr, float) else max(lr)
        lr_min = lr if isinstance(lr, float) else min(lr)
        cert = self.certificate(n, lr_max, lr_min)
        run = Run(
            **s.run_kwargs(),  # type: ignore[arg-type]
            n=n,
            lr=lr,
            steps=T,
            noise_std=self._sigma(s),
            clip=self.clip,
            diameter=self.diameter,
            adjacency=self.adjacency,  # type: ignore[arg-type]  # checked in __init__
            **cert.run_geometry(),  # type: ignore[arg-type]
        )
        return run, cert, s

    # ---------------------------------------------------------------- one step
    def _noise(self, t: int, sigma: float, params: list[Tensor]) -> list[Tensor]:
        """Z_t ~ N(0, sigma^2 I) over all parameters, from this run's (secret) randomness."""
        numel = sum(p.numel() for p in params)
        z = self.randomness.gaussian(_NOISE_STREAM, t, numel, sigma, params[0].dtype)
        z = z.to(params[0].device)  # drawn on the CPU: the same noise on every device
        out, k = [], 0
        for p in params:
            out.append(z[k : k + p.numel()].view_as(p))
            k += p.numel()
        return out

    def noisy_gradient(
        self, t: int, X: Tensor, y: Tensor, sampler: Sampler, sigma: float
    ) -> tuple[list[Tensor], int, int]:
        """The noisy averaged gradient of step t (before the learning rate),
        #clipped, batch size.

        Across processes (:mod:`~lastiterate.train.distributed`): this rank clips and sums its
        share of the GLOBAL batch, the sums are all-reduced, the normaliser is the global one, and
        the noise is added once, after the all-reduce; the returned counts are global.

        Args:
            t: the step (0-based).
            X: all training features (on the method's device).
            y: all training labels.
            sampler: the run's sampler.
            sigma: the noise std on the averaged gradient.

        Returns:
            ``(gradients per parameter, number clipped, batch size)``.
        """
        idx = sampler.batch(t)
        Xb, yb, xb_sq = self._batch_rows(X, y, self._dp.share(idx))
        if xb_sq is None:
            gsum, n_clipped = self.model.clipped_grad_sum(Xb, yb, self.clip)
        else:
            gsum, n_clipped = self.model.clipped_grad_sum(Xb, yb, self.clip, x_sq=xb_sq)
        gsum, n_clipped = self._dp.sum_clipped(gsum, n_clipped)
        denom = sampler.normaliser(idx)
        params = self.model.params()
        noise = self._noise(t, sigma, params)
        grads = averaged_noisy_gradient(gsum, params, noise, denom, self.l2)
        return grads, n_clipped, len(idx)

    def _batch_rows(
        self, X: Tensor, y: Tensor, idx: np.ndarray
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """The rows of a batch, and for a GLM their squared norms ``||x_i||^2``.

        A batch of every row in order (full batch; Poisson sampling at rate 1) uses ``X`` and
        ``y`` in place instead of a gathered copy, and a GLM's row norms are computed once per
        training set and gathered (:func:`~lastiterate.train.models.glm_grad_norms`): on Adult
        (32561 x 113) a full-batch step took 31 ms, most of it copying the data set twice.
        """
        n = X.shape[0]
        whole = len(idx) == n and n > 0 and idx[0] == 0 and bool(np.all(np.diff(idx) == 1))
        if whole:
            Xb, yb = X, y
        else:
            idx_t = torch.from_numpy(idx).to(X.device)
            Xb, yb = torch.index_select(X, 0, idx_t), torch.index_select(y, 0, idx_t)
        if not isinstance(self.model, GLM):
            return Xb, yb, None
        cached = self._row_sq_norms
        if cached is None or cached[0] is not X:
            cached = (X, (X * X).sum(-1))
            self._row_sq_norms = cached
        x_sq = cached[1]
        return Xb, yb, (x_sq if whole else torch.index_select(x_sq, 0, idx_t))

    def _apply(self, t: int, grads: list[Tensor], eta: float) -> None:
        descend(self.model.params(), grads, eta, self.projection)

    def _project(self, params: list[Tensor]) -> None:
        project_parameters(params, self.projection)

    def step(
        self, t: int, X: Tensor, y: Tensor, sampler: Sampler, sigma: float, eta: float
    ) -> tuple[int, int]:
        """One noisy step: :meth:`noisy_gradient`, the update with step size ``eta``, the
        projection.

        Args:
            t: the step (0-based).
            X: all training features.
            y: all training labels.
            sampler: the run's sampler.
            sigma: the noise std on the averaged gradient.
            eta: the step size.

        Returns:
            ``(number clipped, batch size)``.
        """
        grads, n_clipped, size = self.noisy_gradient(t, X, y, sampler, sigma)
        self._apply(t, grads, eta)
        return n_clipped, size

    # ---------------------------------------------------------------- state
    def _optimizer_state(self) -> dict[str, Any]:
        return {}

    def _load_optimizer_state(self, state: dict[str, Any]) -> None:
        pass

    def _fingerprint(self, run: Run, X: Tensor, y: Tensor) -> str:
        h = hashlib.sha256()
        h.update(json.dumps(run.setting(), sort_keys=True, default=str).encode())
        method = {
            "method": type(self).__name__,
            "randomness": self.randomness.fingerprint(),
            "l2": self.l2,
            "feature_norm": self.feature_norm,
            "projection": getattr(self.projection, "__name__", repr(self.projection))
            if self.projection
            else None,
            "model": type(self.model).__name__,
            "family": getattr(self.model, "family", None),
            "shapes": [list(p.shape) for p in self.model.params()],
            "permute": self.permute,
        }
        h.update(json.dumps(method, sort_keys=True).encode())
        h.update(X.detach().to("cpu").contiguous().numpy().tobytes())
        h.update(y.detach().to("cpu").contiguous().numpy().tobytes())
        return h.hexdigest()

    # ---------------------------------------------------------------- training
    def fit(
        self,
        X: Any,
        y: Any,
        *,
        epochs: float | None = None,
        steps: int | None = None,
        target_epsilon: float | None = None,
        delta: float = 1e-5,
        ledger: str | os.PathLike[str] | None = None,
        checkpoint: str | os.PathLike[str] | None = None,
        resume: bool = False,
        progress: bool = False,
        account: bool = True,
        bounds: Sequence[str] | None = None,
        on_epoch: Callable[[int, int], None] | None = None,
        threads: int | None = None,
        device: Any = None,
        distributed: DataParallel | None = None,
    ) -> TrainResult:
        """Train on (X, y) for ``epochs`` (or ``steps``) and account the executed run.

        ``target_epsilon``: stop at the last step whose final-model guarantee is within the budget
        (computed before training).  ``ledger``: JSON-lines privacy ledger appended after every
        epoch.  ``checkpoint`` (+ ``resume=True``): atomic checkpoint after every epoch; resuming
        continues the same run and ledger from the checkpoint's step.  ``account=False`` skips the
        final accounting (the ledger, the budget and ``result.report`` need it).  ``threads``:
        torch intra-op threads while training.  Default: 1 for small problems (parameters x batch
        size < 5e7, e.g. every GLM and the MLPs of the CLI), whose small per-step kernels only lose
        to thread synchronisation -- measured 40-70x faster on a loaded 2-core machine --; torch's
        setting otherwise.

        ``device`` (``"cpu"`` default, ``"cuda"``): the model and the data are moved there (the
        model stays there).  ``distributed``: this process's place in a data-parallel run
        (:func:`lastiterate.train.distributed.from_env`); the GLOBAL batch is what the Run
        describes, the noise is added once per global step, only rank 0 writes the ledger and
        checkpoints, and only rank 0 accounts (``result.report`` is None on the other ranks).

        Args:
            X: training features, one row per example (clipped to ``feature_norm`` if set).
            y: labels or targets.
            epochs: the number of epochs; or
            steps: the number of steps T (give exactly one).
            target_epsilon: the privacy budget of the final model (above).
            delta: the delta of the guarantees (default 1e-5).
            ledger: the JSON-lines privacy ledger.
            checkpoint: the checkpoint file.
            resume: continue from ``checkpoint``.
            progress: show a progress bar on stderr.
            account: account the executed run (needed by ``ledger`` and ``target_epsilon``).
            bounds: restrict the accounting to these bound ids.
            on_epoch: called with (step, total steps) after every epoch.
            threads: torch intra-op threads while training (above).
            device: ``"cpu"`` (default) or ``"cuda"``.
            distributed: this process's place in a data-parallel run.

        Returns:
            The :class:`TrainResult`.

        Raises:
            ParameterError: invalid data (shape, NaN / inf, labels), arguments out of range, a
                device other than the process group's, ``resume`` without a checkpoint, a
                checkpoint of another run, ``account=False`` with a ledger or budget, or a budget
                below one step's guarantee.
        """
        if distributed is None:
            dp = DataParallel(device=check_device("cpu" if device is None else device))
        else:
            dp = distributed
            if device is not None and check_device(device) != check_device(dp.device):
                raise ParameterError(
                    "device", str(device), f"differs from the process group's device {dp.device}"
                )
        if threads is None:
            threads = default_threads(self.model, self.batch_size or len(y))
        old_threads = torch.get_num_threads()
        if threads is not None:
            torch.set_num_threads(check_positive_int("threads", threads))
        self._dp = dp
        try:
            move_model(self.model, dp.device)
            return self._fit(
                X,
                y,
                epochs=epochs,
                steps=steps,
                target_epsilon=target_epsilon,
                delta=delta,
                ledger=ledger,
                checkpoint=checkpoint,
                resume=resume,
                progress=progress,
                account=account,
                bounds=bounds,
                on_epoch=on_epoch,
            )
        finally:
            self._dp = DataParallel()
            torch.set_num_threads(old_threads)

    def _training_data(self, X: Any, y: Any) -> tuple[Tensor, Tensor]:
        """The training set as tensors of the model's dtype: checked (2-D, one row per label,
        finite), labels as integers for classification, rows clipped to ``feature_norm``."""
        dtype = self.model.params()[0].dtype
        X = torch.as_tensor(np.asarray(X), dtype=dtype)
        y = torch.as_tensor(np.asarray(y))
        if X.ndim != 2 or len(X) != len(y):
            raise ParameterError(
                "X", tuple(X.shape), f"must be a 2-D array with one row per label ({len(y)})"
            )
        if not bool(torch.isfinite(X).all()):
            raise ParameterError(
                "X",
                "<array with NaN or inf>",
                "features must be finite (no guarantee is given for training on NaN)",
            )
        if y.is_floating_point() and not bool(torch.isfinite(y).all()):
            raise ParameterError("y", "<array with NaN or inf>", "labels / targets must be finite")
        if (
            y.is_floating_point()
            and getattr(self.model, "family", "") != "least-squares"
            and getattr(self.model, "loss_name", "") != "mse"
        ):
            y = y.long()
        if self.feature_norm is not None:
            X = clip_rows(X, self.feature_norm)
        return X, y

    def _fit(
        self,
        X: Any,
        y: Any,
        *,
        epochs: float | None,
        steps: int | None,
        target_epsilon: float | None,
        delta: float,
        ledger: Any,
        checkpoint: Any,
        resume: bool,
        progress: bool,
        account: bool,
        bounds: Sequence[str] | None,
        on_epoch: Callable[[int, int], None] | None,
    ) -> TrainResult:
        t_start = time.perf_counter()
        X, y = self._training_data(X, y)
        if resume and checkpoint is None:
            raise ParameterError(
                "resume", True, "needs a checkpoint file (checkpoint=... / --checkpoint FILE)"
            )
        if checkpoint is not None and not resume:
            refuse_foreign_checkpoint(checkpoint)  # replaced after the first epoch
        if (ledger is not None or target_epsilon is not None) and not account:
            raise ParameterError(
                "account", account, "must be True with a ledger or a target epsilon"
            )
        n = len(X)
        if not self.randomness.seeded:
            self.randomness = Randomness.fresh(
                self.secure
            )  # fresh secret per run (a resume adopts its checkpoint's)
        else:
            warnings.warn(self.randomness.describe()["warning"], SeededRunWarning, stacklevel=3)
        dp = self._dp
        account = account and dp.is_writer  # rank 0 accounts and writes; the others only train
        self.randomness = dp.share_randomness(self.randomness)  # rank 0's secret root, in memory
        planned, cert, sampler = self.plan(n, epochs=epochs, steps=steps)
        dp.check_batch(sampler.batch_size)
        sigma = planned.sigma
        schedule = planned.lr_schedule
        notes: list[str] = []

        budget = None
        stop = planned.T
        if target_epsilon is not None:
            budget = allowed_steps(planned, target_epsilon, delta, bounds)
            stop = budget.allowed_steps
            notes.append(budget.message())

        fingerprint = self._fingerprint(planned, X, y)
        if dp.parallel:  # the same run, data, randomness, budget stop and start on every rank
            dp.check_same(
                "the run, the data and the initial parameters",
                f"{fingerprint} {stop} {parameters_sha256(self.model.params())}",
            )
        start = 0
        run_id = uuid.uuid4().hex
        resumed_from = None
        if resume:
            state = load_checkpoint(checkpoint)  # type: ignore[arg-type]
            if state is not None:
                state = training_checkpoint(state, checkpoint)
                if state["fingerprint"] != fingerprint:
                    raise ParameterError(
                        "resume",
                        str(checkpoint),
                        "the checkpoint was written by a different run (data, model, seed "
                        "or run parameters differ)",
                    )
                if state["step"] > planned.T:
                    raise ParameterError(
                        "checkpoint",
                        str(checkpoint),
                        f"its step {state['step']} is beyond the run's {planned.T} steps",
                    )
                self.randomness = Randomness.from_checkpoint_state(state.get("rng"))
                sampler = self.sampler(n)  # the checkpoint's batches (same root as its noise)
                try:
                    self.model.load_state_dict(state["model"])
                    self._load_optimizer_state(state["optimizer"])
                except (RuntimeError, KeyError, TypeError, ValueError, AttributeError) as exc:
                    raise ParameterError(
                        "checkpoint",
                        str(checkpoint),
                        f"does not fit this model ({type(exc).__name__})",
                    ) from None
                start = int(state["step"])
                run_id = state["run_id"]
                resumed_from = start
                notes.append(f"resumed from checkpoint at step {start}")
            else:
                notes.append("no checkpoint found: starting at step 0")
        if dp.parallel and resume:
            dp.check_same(
                "the checkpoint resumed (every process must read the same file)",
                f"{start} {parameters_sha256(self.model.params())}",
            )
        led = Ledger(ledger).open() if ledger is not None and dp.is_writer else None

        def account_at(t: int) -> Any:
            return _account(truncate(planned, t), delta=delta, bounds=bounds)

        base = {"run_id": run_id, "planned_steps": planned.T, "stop_step": stop}
        if led is not None:
            if resumed_from is None:
                led.append(
                    {
                        **base,
                        "event": "start",
                        "steps_done": 0,
                        "planned_run": planned.setting(),
                        "geometry": cert.to_json(),
                        "budget": None if budget is None else budget.to_json(),
                        "guarantee": None,
                        "note": "nothing released yet",
                    }
                )
            else:
                rep = account_at(start) if start > 0 else None
                led.append(
                    {
                        **base,
                        "event": "resume",
                        "steps_done": start,
                        "run": truncate(planned, start).setting() if start > 0 else None,
                        "guarantee": guarantee_summary(rep) if rep is not None else None,
                        "note": (
                            f"resumed from the checkpoint at step {start}; steps of the "
                            "interrupted process after it were discarded (never released) and "
                            "are replayed with the same batches and noise"
                        ),
                    }
                )

        if start > stop:
            raise ParameterError(
                "target_epsilon",
                target_epsilon,
                f"the checkpoint is already at step {start}, beyond the budget's stop at step "
                f"{stop}: its model must not be released under this budget",
            )
        ends = [e for e in sampler.epoch_ends(stop) if e > start] if stop > 0 else []
        l_epoch = sampler.l
        bar = None
        if progress and dp.is_writer:
            bar = tqdm(
                total=len(sampler.epoch_ends(stop)),
                initial=len(sampler.epoch_ends(stop)) - len(ends),
                unit="epoch",
                file=sys.stderr,
                leave=False,
            )
        n_clipped = 0
        n_seen = 0
        delay = float(os.environ.get("LASTITERATE_TEST_STEP_DELAY", "0") or 0)
        t = start
        train_seconds = 0.0
        X, y = X.to(dp.device), y.to(dp.device)
        try:
            for end in ends:
                t0 = time.perf_counter()
                while t < end:
                    c, k = self.step(t, X, y, sampler, sigma, schedule[t])
                    n_clipped += c
                    n_seen += k
                    t += 1
                    if delay:  # test hook: makes a run slow enough to be killed mid-epoch
                        time.sleep(delay)
                train_seconds += time.perf_counter() - t0
                if checkpoint is not None and dp.is_writer:
                    save_checkpoint(
                        checkpoint,
                        {
                            "run_id": run_id,
                            "fingerprint": fingerprint,
                            "step": t,
                            "model": {
                                k: v.detach().clone() for k, v in self.model.state_dict().items()
                            },
                            "optimizer": self._optimizer_state(),
                            # the secret: owner-only checkpoint only
                            "rng": self.randomness.checkpoint_state(),
                            "planned_run": planned.setting(),
                        },
                    )
                if led is not None:
                    rep = account_at(t)
                    led.append(
                        {
                            **base,
                            "event": "epoch",
                            "epoch": t / l_epoch,
                            "steps_done": t,
                            "run": truncate(planned, t).setting(),
                            "guarantee": guarantee_summary(rep),
                            "checkpoint": None if checkpoint is None else str(checkpoint),
                        }
                    )
                if bar is not None:
                    bar.update(1)
                if on_epoch is not None:
                    on_epoch(t, stop)
        finally:
            if bar is not None:
                bar.close()
        if dp.parallel:  # identical updates keep the ranks identical: checked, not assumed
            dp.check_same("the final parameters", parameters_sha256(self.model.params()))

        executed = truncate(planned, stop)
        report = None
        if account:
            report = _account(executed, delta=delta, bounds=bounds)
        if led is not None:
            if budget is not None and budget.stops_early:
                led.append(
                    {
                        **base,
                        "event": "budget-stop",
                        "steps_done": stop,
                        "note": budget.message(),
                        "budget": budget.to_json(),
                    }
                )
            led.append(
                {
                    **base,
                    "event": "end",
                    "steps_done": stop,
                    "run": executed.setting(),
                    "guarantee": guarantee_summary(report),
                    "geometry": cert.to_json(),
                }
            )
        return TrainResult(
            model=self.model,
            run=executed,
            planned_run=planned,
            report=report,
            certificate=cert,
            steps=stop,
            seconds=time.perf_counter() - t_start,
            delta=delta,
            train_seconds=train_seconds,
            budget=budget,
            resumed_from=resumed_from,
            run_id=run_id,
            clipped_fraction=(n_clipped / n_seen) if n_seen else 0.0,
            notes=notes,
            randomness=self.randomness.describe(),
        )


class NoisyGD(NoisyMethod):
    """Full-batch noisy gradient descent (b = n).

    Args:
        model: the model to train.
        **kw: the arguments of :class:`NoisyMethod` (no ``sampling``).

    Raises:
        ParameterError: ``sampling`` is given, or as :class:`NoisyMethod`.
    """

    algorithm = "gd"

    def __init__(self, model: Any, **kw: Any) -> None:
        if kw.get("sampling") is not None:
            raise ParameterError("sampling", kw["sampling"], "only applies to NoisySGD / NoisyAdam")
        super().__init__(model, **kw)


class NoisyCGD(NoisyMethod):
    """Noisy cyclic gradient descent: one fixed balanced partition into l =
    ceil(n/b) batches, cycled.

    Args:
        model: the model to train.
        batch_size: b.
        **kw: the other arguments of :class:`NoisyMethod` (no ``sampling``).

    Raises:
        ParameterError: ``sampling`` is given, or as :class:`NoisyMethod`.
    """

    algorithm = "cgd"

    def __init__(self, model: Any, *, batch_size: int, **kw: Any) -> None:
        if kw.get("sampling") is not None:
            raise ParameterError("sampling", kw["sampling"], "only applies to NoisySGD / NoisyAdam")
        super().__init__(model, batch_size=batch_size, **kw)


class NoisySGD(NoisyMethod):
    """Noisy SGD with ``sampling`` ``"poisson"`` (rate b/n, normalised by b), ``"uniform"``
    (fixed-size subsets drawn independently each step) or ``"shuffle"`` (a new
    permutation per epoch).

    Args:
        model: the model to train.
        batch_size: b (the expected size for Poisson).
        sampling: poisson, uniform or shuffle.
        **kw: the other arguments of :class:`NoisyMethod`.

    Raises:
        ParameterError: as :class:`NoisyMethod`.
    """

    algorithm = "sgd"

    def __init__(self, model: Any, *, batch_size: int, sampling: str, **kw: Any) -> None:
        super().__init__(model, batch_size=batch_size, sampling=sampling, **kw)


class NoisyAdam(NoisyMethod):
    """Adam applied to the noisy averaged gradient of the canonical update (paper 004's NoisyAdam).

    The noisy gradient (clipping, normalisation, noise) is exactly that of the other methods; Adam
    only post-processes it, so the privacy is that of the noisy-gradient sequence: composition
    bounds.  No last-iterate (contraction) theorem is claimed -- the certificate says why.
    ``sampling``: ``"poisson"`` (default, as in paper 004), ``"uniform"``, ``"shuffle"``,
    ``"cyclic"`` or ``"full"``.

    Args:
        model: the model to train.
        batch_size: b (not needed for ``full``).
        sampling: the batches (above).
        betas: Adam's moment decay rates.
        eps: Adam's denominator offset.
        **kw: the other arguments of :class:`NoisyMethod`.

    Raises:
        ParameterError: as :class:`NoisyMethod`.
    """

    uses_adam = True

    def __init__(
        self,
        model: Any,
        *,
        batch_size: int | None = None,
        sampling: str = "poisson",
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        **kw: Any,
    ) -> None:
        if sampling == "full":
            self.algorithm = "gd"
            smp = None
        elif sampling == "cyclic":
            self.algorithm = "cgd"
            smp = None
        else:
            self.algorithm = "sgd"
            smp = sampling
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        super().__init__(model, batch_size=batch_size, sampling=smp, **kw)

    def _apply(self, t: int, grads: list[Tensor], eta: float) -> None:
        params = self.model.params()
        st = self._adam_state
        if not st:
            st["m"] = [torch.zeros_like(p) for p in params]
            st["v"] = [torch.zeros_like(p) for p in params]
        b1, b2 = self.betas
        k = t + 1
        with torch.no_grad():
            for p, g, m, v in zip(params, grads, st["m"], st["v"]):
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                mhat = m / (1 - b1**k)
                vhat = v / (1 - b2**k)
                p.sub_(eta * mhat / (torch.sqrt(vhat) + self.eps))
            self._project(params)

    def _optimizer_state(self) -> dict[str, Any]:
        return {k: [x.clone() for x in v] for k, v in self._adam_state.items()}

    def _load_optimizer_state(self, state: dict[str, Any]) -> None:
        device = self.model.params()[0].device
        self._adam_state = {k: [x.clone().to(device) for x in v] for k, v in state.items()}


#: the trainer arguments the R methods of a :class:`NoisyRuns` must share (all but the seed)
_SHARED_CONFIG = (
    "lr",
    "clip",
    "noise_std",
    "noise_multiplier",
    "batch_size",
    "sampling",
    "l2",
    "diameter",
    "feature_norm",
    "secure",
    "adjacency",
    "permute",
    "algorithm",
)


def _same_value(a: Any, b: Any) -> bool:
    """Whether two trainer arguments are equal (a schedule may be a numpy array)."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # arrays: elementwise ==
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def stack_batches(
    data: Sequence[Tensor], batches: Sequence[np.ndarray]
) -> tuple[list[Tensor], Tensor | None]:
    """The rows of R runs' batches, runs first, padded to one length.

    Args:
        data: tensors with one row per example (features ``[n, d]``, labels ``[n]``, ...).
        batches: run r's batch indices (:meth:`Sampler.batch`), one array per run.

    Returns:
        ``(rows, mask)``: each tensor's rows ``[B, ...]`` and None when every run has the same
        batch (full batch gd, an unpermuted cyclic partition: shared, not copied per run); else
        ``[R, B_max, ...]`` and a mask ``[R, B_max]`` (1: a row of run r's batch, 0: padding) --
        None when every batch has the same size.
    """
    device = data[0].device
    first = batches[0]
    if all(len(b) == len(first) and np.array_equal(b, first) for b in batches[1:]):
        idx = torch.from_numpy(np.ascontiguousarray(first)).to(device)
        return [torch.index_select(v, 0, idx) for v in data], None
    sizes = [len(b) for b in batches]
    width = max(sizes)
    mask = None
    if min(sizes) == width:
        rows = np.stack(batches)
    else:  # Poisson batches: padded with row 0, masked out of every sum
        rows = np.zeros((len(batches), width), dtype=np.int64)
        keep = np.zeros((len(batches), width))
        for r, b in enumerate(batches):
            rows[r, : len(b)] = b
            keep[r, : len(b)] = 1.0
        mask = torch.from_numpy(keep).to(dtype=data[0].dtype, device=device)
    idx = torch.from_numpy(rows.reshape(-1)).to(device)  # index_select: ~5x faster than v[idx]
    return [torch.index_select(v, 0, idx).reshape(*rows.shape, *v.shape[1:]) for v in data], mask


@dataclass
class RunsResult:
    """What :meth:`NoisyRuns.fit` did.

    Attributes:
        models: the R trained models (run r's final parameters in ``models[r]``).
        run: the :class:`~lastiterate.run.Run` every one of them executed (not accounted here:
            :func:`lastiterate.accountant.account` it).
        steps: the number of steps executed.
        seconds: fit() wall time.
        train_seconds: the noisy steps only.
        clipped_fraction: per run, the fraction of per-example gradients that were clipped.
        notes: what the trainer did, in words.
    """

    models: list[Any]
    run: Run
    steps: int
    seconds: float
    train_seconds: float
    clipped_fraction: np.ndarray
    notes: list[str] = field(default_factory=list)


class NoisyRuns:
    """R runs of one :class:`NoisyGD` / :class:`NoisyCGD` / :class:`NoisySGD` configuration on
    GLMs, advanced together (vectorised over a leading "runs" dimension).

    Built from R trainers made alike (the same class and arguments; each its own
    :class:`~lastiterate.train.models.GLM` and its own seed or secret randomness).  Every step does
    what :meth:`NoisyMethod.step` does, with the same code: run r's batch from ITS sampler
    (:meth:`NoisyMethod.sampler`), the clipped gradient sum of
    :func:`~lastiterate.train.models.glm_clipped_grad_sum` over that batch (the function
    :meth:`GLM.clipped_grad_sum <lastiterate.train.models.GLM.clipped_grad_sum>` runs), its
    normaliser b_t, ITS noise (run r's :meth:`NoisyMethod._noise`, so a seed gives the noise the
    sequential trainer draws and a patched noise routine reaches this path),
    :func:`averaged_noisy_gradient` and :func:`descend` (step and projection).  Run r therefore
    ends with the parameters ``methods[r].fit`` would give (to float rounding: the sums are
    batched).  For canary audits (:mod:`lastiterate.audit.canary`): many models at the cost of
    a few.

    Not here (use :meth:`NoisyMethod.fit`): NoisyAdam, non-GLM models, accounting, ledgers,
    checkpoints, budgets, devices and processes.

    Args:
        methods: the R trainers (:class:`NoisyGD`, :class:`NoisyCGD` or :class:`NoisySGD`, one
            class), identical but for their seeds, each on a GLM of one shape.

    Raises:
        ParameterError: no methods, Adam, different classes or arguments, or models that are not
            GLMs of one shape.
    """

    def __init__(self, methods: Sequence[NoisyMethod]) -> None:
        methods = list(methods)
        if not methods:
            raise ParameterError("methods", 0, "give at least one trainer")
        first = methods[0]
        for m in methods:
            if not isinstance(m, NoisyMethod) or m.uses_adam:
                raise ParameterError(
                    "methods",
                    type(m).__name__,
                    "NoisyRuns advances NoisyGD, NoisyCGD or NoisySGD runs (Adam keeps a state per "
                    "run: train it with fit)",
                )
            if type(m) is not type(first):
                raise ParameterError(
                    "methods", type(m).__name__, f"must all be {type(first).__name__}"
                )
            for name in _SHARED_CONFIG:
                if not _same_value(getattr(m, name), getattr(first, name)):
                    raise ParameterError(
                        name, getattr(m, name), f"differs between the runs ({getattr(first, name)})"
                    )
            same_ball = getattr(m.projection, "runs_dimension", False) and getattr(
                m.projection, "__name__", None
            ) == getattr(first.projection, "__name__", None)  # l2_ball(D): one per trainer
            if m.projection is not first.projection and not same_ball:
                raise ParameterError(
                    "projection",
                    getattr(m.projection, "__name__", m.projection),
                    "differs between the runs (give every trainer the same projection)",
                )
        # lazy: models imports the geometry module; only stacks of GLMs are trained here
        from lastiterate.train.models import GLMStack

        stack = GLMStack([m.model for m in methods])  # checks: GLMs of one family and shape
        if stack.weight.device.type != "cpu":
            raise ParameterError(
                "device", str(stack.weight.device), "NoisyRuns trains on the CPU (use fit)"
            )
        self.methods = methods

    @property
    def runs(self) -> int:
        """R, the number of runs."""
        return len(self.methods)

    def fit(
        self,
        X: Any,
        y: Any,
        *,
        epochs: float | None = None,
        steps: int | None = None,
        threads: int | None = None,
        on_epoch: Callable[[int, int], None] | None = None,
    ) -> RunsResult:
        """Train the R runs on (X, y) for ``epochs`` (or ``steps``), together.

        Run r's randomness is ``methods[r]``'s: its seed (a :class:`SeededRunWarning` is issued
        once), else fresh secret OS entropy, as :meth:`NoisyMethod.fit` draws it.

        Args:
            X: training features, one row per example (clipped to ``feature_norm`` if set).
            y: labels or targets.
            epochs: the number of epochs; or
            steps: the number of steps T (give exactly one).
            threads: torch intra-op threads while training (default: 1 when R x parameters x
                batch size < 5e7, torch's setting otherwise).
            on_epoch: called with (step, total steps) after every epoch.

        Returns:
            The :class:`RunsResult`; ``methods[r].model`` holds run r's final parameters.

        Raises:
            ParameterError: invalid data or arguments (as :meth:`NoisyMethod.fit`).
        """
        # lazy: models imports the geometry module; only stacks of GLMs are trained here
        from lastiterate.train.models import GLMStack

        t_start = time.perf_counter()
        first = self.methods[0]
        X, y = first._training_data(X, y)
        n = len(X)
        seeded = False
        for m in self.methods:
            if m.randomness.seeded:
                seeded = True
            else:
                m.randomness = Randomness.fresh(m.secure)  # fresh secret per run
        if seeded:
            warnings.warn(first.randomness.describe()["warning"], SeededRunWarning, stacklevel=2)
        plans = [m.plan(n, epochs=epochs, steps=steps) for m in self.methods]
        planned = plans[0][0]
        for run, _, _ in plans[1:]:
            if run.setting() != planned.setting():  # pragma: no cover - same arguments, same Run
                raise ParameterError("methods", self.runs, "plan different runs")
        samplers = [s for _, _, s in plans]
        sigma, schedule, T = planned.sigma, planned.lr_schedule, planned.T
        stack = GLMStack([m.model for m in self.methods])
        n_par = sum(int(p[0].numel()) for p in stack.params())
        if threads is None:
            threads = 1 if self.runs * n_par * samplers[0].batch_size < 5e7 else None
        old_threads = torch.get_num_threads()
        if threads is not None:
            torch.set_num_threads(check_positive_int("threads", threads))
        x_sq = (X * X).sum(-1)  # ||x_i||^2 of every row, gathered per batch
        n_clipped = torch.zeros(self.runs, dtype=torch.int64)
        n_seen = np.zeros(self.runs)
        t0 = time.perf_counter()
        try:
            t = 0
            for end in samplers[0].epoch_ends(T):
                while t < end:
                    c, k = self._step(t, X, y, x_sq, samplers, stack, sigma, schedule[t])
                    n_clipped += c
                    n_seen += k
                    t += 1
                if on_epoch is not None:
                    on_epoch(t, T)
        finally:
            torch.set_num_threads(old_threads)
        train_seconds = time.perf_counter() - t0
        stack.write_back([m.model for m in self.methods])
        return RunsResult(
            models=[m.model for m in self.methods],
            run=planned,
            steps=T,
            seconds=time.perf_counter() - t_start,
            train_seconds=train_seconds,
            clipped_fraction=n_clipped.numpy() / np.maximum(n_seen, 1),
            notes=[f"{self.runs} runs advanced together (vectorised over runs)"],
        )

    def _step(
        self,
        t: int,
        X: Tensor,
        y: Tensor,
        x_sq: Tensor,
        samplers: Sequence[Sampler],
        stack: Any,
        sigma: float,
        eta: float,
    ) -> tuple[Tensor, np.ndarray]:
        """Step t of every run (:meth:`NoisyMethod.step` over a runs dimension): the number
        clipped and the batch size of each run."""
        first = self.methods[0]
        batches = [s.batch(t) for s in samplers]
        (Xb, yb, xb_sq), mask = stack_batches((X, y, x_sq), batches)
        gsum, n_clipped = stack.clipped_grad_sum(Xb, yb, first.clip, mask, xb_sq)
        denom = torch.tensor(
            [s.normaliser(b) for s, b in zip(samplers, batches)], dtype=X.dtype, device=X.device
        )
        noise = [
            torch.stack(z)
            for z in zip(*(m._noise(t, sigma, m.model.params()) for m in self.methods))
        ]
        params = stack.params()
        grads = averaged_noisy_gradient(gsum, params, noise, denom, first.l2)
        descend(params, grads, eta, first.projection, runs=True)
        return n_clipped, np.asarray([len(b) for b in batches], dtype=np.float64)


def evaluate(
    model: Any, X: Any, y: Any, feature_norm: float | None = None
) -> dict[str, float | None]:
    """Accuracy (classification) or mean squared error, and the mean loss, on (X, y).

    Args:
        model: a trained model.
        X: features.
        y: labels or targets.
        feature_norm: clip the rows to this norm first (as in training).

    Returns:
        ``accuracy`` (None for regression), ``loss`` and ``mse`` (None for classification);
        all None on an empty set.
    """
    params = model.params()
    Xt = torch.as_tensor(np.asarray(X), dtype=params[0].dtype, device=params[0].device)
    yt = torch.as_tensor(np.asarray(y), device=params[0].device)
    if feature_norm is not None:
        Xt = clip_rows(Xt, feature_norm)
    regression = (
        getattr(model, "family", "") == "least-squares" or getattr(model, "loss_name", "") == "mse"
    )
    if not regression:
        yt = yt.long()
    if len(yt) == 0:
        return {"accuracy": None, "loss": None, "mse": None}
    loss = model.loss(Xt, yt)
    pred = model.predict(Xt)
    if regression:
        mse = float(((pred.to(Xt.dtype) - yt.to(Xt.dtype)) ** 2).mean())
        return {"accuracy": None, "loss": loss, "mse": mse}
    return {"accuracy": float((pred == yt).double().mean()), "loss": loss, "mse": None}


__all__ = [
    "NoisyAdam",
    "NoisyCGD",
    "NoisyGD",
    "NoisyMethod",
    "NoisyRuns",
    "NoisySGD",
    "RunsResult",
    "TrainResult",
    "averaged_noisy_gradient",
    "clip_rows",
    "composition_summary",
    "default_threads",
    "descend",
    "evaluate",
    "guarantee_summary",
    "l2_ball",
    "project_parameters",
    "stack_batches",
]
