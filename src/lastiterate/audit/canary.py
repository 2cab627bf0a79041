"""Canary audits of the trainer: many models trained with and without a canary, FINAL model only.

:mod:`lastiterate.audit.report` audits the accountant on simulated chains; this module audits the
training code itself.  It trains ``runs`` models in each of two neighbouring worlds (replace-one
adjacency: both datasets have n rows and differ in the canary's row) with the project's own
trainers (:class:`~lastiterate.train.trainer.NoisyGD`, ``NoisyCGD``, ``NoisySGD`` on a
:class:`~lastiterate.train.models.GLM`; the update is never re-implemented here), scores each
FINAL model, and turns the best threshold test into certified lower bounds with
:func:`lastiterate.audit.stats.audit_scores` (threshold chosen on a random half of the runs,
evaluated on the other half; one-sided Clopper-Pearson bounds on FPR and FNR):

* ``mu_lb`` - a lower bound on the GDP parameter (rigorous whatever the tradeoff curve's shape);
* ``eps_lb`` - a lower bound on epsilon at the run's delta (non-parametric, rigorous).

Both hold jointly with probability >= 1 - alpha.  They are compared with every ``bound`` the
accountant reports for the Run the trainer executed (:func:`~lastiterate.audit.report.verdict_for`):
VIOLATION when a claim is below a lower bound, ok when leakage was certified below every claim,
inconclusive otherwise.

Canaries (hidden-state threat model: the adversary chooses the canary and sees the final model):

* ``gradient`` (:func:`gradient_canary`): one extra feature that is 0 in every other row; the canary
  row is ``a e_d`` (a = the feature-norm bound R) and its counterpart in the neighbouring world is
  the same row with the opposite label / target.  Only the canary's gradient touches column d of
  the weights, and its direction there is fixed (least squares, binary logistic) or nearly fixed
  (multinomial: ``e_y - softmax``).  For least squares the target is +-``GRADIENT_TARGET`` so the
  clipped gradient is exactly ``-+C e_d`` at every step: a LINEAR loss on that coordinate whose two
  versions differ by the full replace-one sensitivity L = 2C.  Score: the projection of the final
  weights on the canary direction.  Without projection and regularisation the final coordinate is
  Gaussian with the mean shift of the whole transcript, so the audit should reach the composition
  claim (Cebere, Bellet, Papernot, ICLR 2025: a crafted gradient at every step gets no hidden-state
  amplification; Annamalai 2024).
* ``input`` (:func:`input_canary`): a held-out point with a wrong label (least squares: target
  shifted by 4 standard deviations); its counterpart is the same point with its true label.  Score:
  the canary's loss under the final model.

Many models at once: the models of a world are advanced together, in chunks
(:func:`runs_per_chunk`), by :class:`~lastiterate.train.trainer.NoisyRuns`, which runs the
trainer's own step (clipped gradient sum, normalisation, batches, noise, L2, projection) over a
leading "runs" dimension; model r draws its batches and noise from ITS trainer, so it ends where
the sequential ``fit`` with its seed ends (to float rounding; tested for gd, cgd and sgd), and the
mutation tests (half the noise, no clipping) reach it.  ``vectorised=False`` trains one model
after the other.

Seeded runs: every model is trained with its own seed (derived from the audit's ``seed``, the
model's world and index) so the audit is reproducible; the trainer's
:class:`~lastiterate.train.randomness.SeededRunWarning` is silenced inside the audit, which is an
experiment, not a release.

References: Nasr et al., "Adversary instantiation" (S&P 2021, gradient canaries); Nasr et al.,
"Tight auditing of DP ML" (USENIX Sec 2023, the GDP lower bound); Cebere, Bellet, Papernot
(ICLR 2025, hidden-state auditing); Annamalai & De Cristofaro (NeurIPS 2024, final-model audits);
auditing-notes sections 1 and 3.4 of the design notes.
"""

from __future__ import annotations

import math
import multiprocessing
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import special
from tqdm import tqdm

from lastiterate.accountant import account
from lastiterate.audit.report import ClaimCheck, verdict_for
from lastiterate.audit.stats import (
    Split,
    _gdp_epsilon,
    audit_scores,
    clopper_pearson_lower,
    reported_mu_lb,
)
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
    "CANARIES",
    "GRADIENT_TARGET",
    "CanaryAuditResult",
    "CanaryPair",
    "TrainerSpec",
    "audit_canary",
    "gradient_canary",
    "input_canary",
    "model_seed",
    "runs_per_chunk",
    "train_chunk",
    "train_scores",
]

CANARIES = ("gradient", "input")
FAMILIES = ("binary-logistic", "multinomial-logistic", "least-squares")

#: |target| of the least-squares gradient canary: the residual stays ~1e6 whatever the model, so the
#: canary's gradient is clipped to exactly C at every step (a linear loss)
GRADIENT_TARGET = 1e6
#: the input canary's regression target is its true target + this many standard deviations of y
INPUT_TARGET_SHIFT = 4.0
#: at most this many models per world (each is a full training run)
MAX_RUNS = 100_000
#: vectorised training: at most this many models advanced together (one chunk) ...
MAX_CHUNK = 256
#: ... and at most this many batch elements (rows x (features + 2 outputs)) per chunk and step:
#: the gathered batches of a chunk stay near 32 MB of float64
CHUNK_ELEMENTS = 4_000_000
#: at most this many worker processes (``jobs``)
MAX_JOBS = 256


# ---------------------------------------------------------------------- what is trained
@dataclass(frozen=True)
class TrainerSpec:
    """The training run every model of the audit executes (the flags of ``lastiterate train``).

    ``algorithm`` gd / cgd / sgd (with ``sampling``), ``epochs`` or ``steps``; ``noise_std`` or
    ``noise_multiplier``; the other fields are passed to the trainer unchanged.
    """

    algorithm: str
    lr: float
    clip: float
    noise_std: float | None = None
    noise_multiplier: float | None = None
    batch_size: int | None = None
    sampling: str | None = None
    l2: float = 0.0
    diameter: float | None = None
    feature_norm: float | None = None
    epochs: float | None = None
    steps: int | None = None
    intercept: bool = False

    def __post_init__(self) -> None:
        if self.algorithm not in ("gd", "cgd", "sgd"):
            raise ParameterError("algorithm", self.algorithm, "must be one of gd, cgd, sgd")
        if (self.epochs is None) == (self.steps is None):
            raise ParameterError("epochs", self.epochs, "give exactly one of epochs and steps")
        if self.algorithm != "gd" and self.batch_size is None:
            raise ParameterError(
                "batch_size", self.batch_size, f"is required with algorithm {self.algorithm}"
            )

    def method(self, model: Any, seed: int) -> Any:
        """The project's trainer for ``model``, seeded with ``seed``."""
        # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
        from lastiterate.train.trainer import NoisyCGD, NoisyGD, NoisySGD

        kw: dict[str, Any] = {
            "lr": self.lr,
            "clip": self.clip,
            "l2": self.l2,
            "diameter": self.diameter,
            "feature_norm": self.feature_norm,
            "seed": seed,
        }
        if self.noise_std is not None:
            kw["noise_std"] = self.noise_std
        else:
            kw["noise_multiplier"] = self.noise_multiplier
        if self.algorithm == "gd":
            if self.sampling is not None:
                raise ParameterError("sampling", self.sampling, "only applies to algorithm sgd")
            return NoisyGD(model, **kw)
        assert self.batch_size is not None  # __post_init__: required for cgd and sgd
        if self.algorithm == "cgd":
            if self.sampling is not None:
                raise ParameterError("sampling", self.sampling, "only applies to algorithm sgd")
            return NoisyCGD(model, batch_size=self.batch_size, **kw)
        if self.sampling is None:
            raise ParameterError(
                "sampling", None, "is required with algorithm sgd: one of poisson, uniform, shuffle"
            )
        return NoisySGD(model, batch_size=self.batch_size, sampling=self.sampling, **kw)


# ---------------------------------------------------------------------- canaries
@dataclass(frozen=True)
class CanaryPair:
    """Two neighbouring datasets (same n, differing in row ``index``) and the score of a model.

    ``X_in, y_in``: the world with the canary; ``X_out, y_out``: its neighbour.  ``direction``
    (gradient canary): the flat parameter direction the score projects on.  ``x_canary,
    y_canary`` (input canary): the point whose loss is the score.
    """

    kind: str
    family: str
    n_outputs: int
    X_in: np.ndarray
    y_in: np.ndarray
    X_out: np.ndarray
    y_out: np.ndarray
    index: int
    description: str
    direction: np.ndarray | None = None
    x_canary: np.ndarray | None = None
    y_canary: Any = None
    inserted: bool = True

    @property
    def n(self) -> int:
        return int(self.X_in.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X_in.shape[1])

    def null(self) -> CanaryPair:
        """The null audit: the canary is never inserted (both worlds are the neighbour world)."""
        return replace(
            self,
            X_in=self.X_out,
            y_in=self.y_out,
            inserted=False,
            description=self.description + " -- NULL audit: canary never inserted",
        )

    def new_model(self, intercept: bool = False) -> Any:
        """A fresh GLM (parameters at zero) for this pair's data."""
        # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
        import torch

        from lastiterate.train.models import GLM

        return GLM(
            self.n_features, self.n_outputs, self.family, intercept=intercept, dtype=torch.float64
        )

    def score(self, model: Any, feature_norm: float | None = None) -> float:
        """The distinguishing statistic of a trained model (shifted in the canary world)."""
        # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
        import torch

        if self.kind == "gradient":
            assert self.direction is not None
            w = model.weight.detach().reshape(-1).numpy()
            return float(w @ self.direction)
        # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
        from lastiterate.train.trainer import clip_rows

        x = torch.as_tensor(np.asarray(self.x_canary, dtype=np.float64).reshape(1, -1))
        if feature_norm is not None:
            x = clip_rows(x, feature_norm)  # the trainer's row clipping, as in training
        y = torch.as_tensor(np.asarray([self.y_canary]))
        if self.family != "least-squares":
            y = y.long()
        with torch.no_grad():
            return float(model.per_example_losses(x, y)[0])


def _check_family(family: str, n_outputs: int) -> None:
    if family not in FAMILIES:
        raise NotApplicable(
            f"canary audits need a GLM ({', '.join(FAMILIES)}), not {family!r}: "
            "only a linear model has a parameter direction no other example touches"
        )
    if family == "multinomial-logistic" and n_outputs < 2:
        raise ParameterError(
            "n_outputs", n_outputs, "must be >= 2 classes for multinomial-logistic"
        )
    if family != "multinomial-logistic" and n_outputs != 1:
        raise ParameterError("n_outputs", n_outputs, f"must be 1 for {family}")


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


def gradient_canary(
    X: Any, y: Any, *, family: str, n_outputs: int = 1, feature_norm: float | None = None
) -> CanaryPair:
    """The gradient canary: a new feature d, 0 in every row of (X, y), and one extra row ``a e_d``.

    ``a`` = ``feature_norm`` (the row-norm bound R the trainer clips to), else the largest row norm
    of X (1 if X is zero).  Labels: least squares +-:data:`GRADIENT_TARGET` (clipped gradient
    exactly -+C e_d at every step), binary logistic 1 / 0, multinomial classes 0 / 1.  Score
    direction: e_d (one output), ``(e_0 - e_1)/sqrt(2)`` on column d (multinomial) -- the mean
    difference of the two worlds' updates at the start.
    """
    _check_family(family, n_outputs)
    X, y = _base(X, y)
    n, d = X.shape
    if feature_norm is not None:
        a = check_positive("feature_norm", feature_norm)
    else:
        a = float(np.max(np.linalg.norm(X, axis=1))) or 1.0
    Xc = np.zeros((n + 1, d + 1))
    Xc[:n, :d] = X
    Xc[n, d] = a
    if family == "least-squares":
        lab_in, lab_out = GRADIENT_TARGET, -GRADIENT_TARGET
        ys = y.astype(np.float64)
    else:
        lab_in, lab_out = (1, 0) if family == "binary-logistic" else (0, 1)
        ys = y.astype(np.int64)
    y_in = np.concatenate([ys, np.asarray([lab_in], dtype=ys.dtype)])
    y_out = np.concatenate([ys, np.asarray([lab_out], dtype=ys.dtype)])
    W = np.zeros((n_outputs, d + 1))
    if family == "multinomial-logistic":
        W[0, d], W[1, d] = 1 / math.sqrt(2), -1 / math.sqrt(2)
    else:
        W[0, d] = 1.0
    what = {
        "least-squares": f"target +-{GRADIENT_TARGET:g}",
        "binary-logistic": "label 1 vs 0",
        "multinomial-logistic": "class 0 vs 1",
    }[family]
    return CanaryPair(
        kind="gradient",
        family=family,
        n_outputs=n_outputs,
        X_in=Xc,
        y_in=y_in,
        X_out=Xc.copy(),
        y_out=y_out,
        index=n,
        direction=W.reshape(-1),
        description=f"gradient canary: extra feature (0 in the other {n} rows), "
        f"canary row {a:g} e_d, {what}; "
        "score = final weights projected on the canary direction",
    )


def input_canary(
    X: Any, y: Any, x_point: Any, y_point: Any, *, family: str, n_outputs: int = 1
) -> CanaryPair:
    """The input-space canary: the held-out point ``x_point`` with a WRONG label appended to (X, y);
    the neighbour world has the same point with its true label ``y_point``.

    Wrong label: class ``(y + 1) mod K`` (binary: ``1 - y``); least squares: ``y + 4 sd(y)``.
    Score: the canary's loss under the final model (lower when it was trained on).
    """
    _check_family(family, n_outputs)
    X, y = _base(X, y)
    x_point = np.asarray(x_point, dtype=np.float64).reshape(-1)
    if x_point.shape[0] != X.shape[1] or not np.all(np.isfinite(x_point)):
        raise ParameterError(
            "x_point", x_point.shape, f"must be a finite vector of {X.shape[1]} features"
        )
    n = X.shape[0]
    if family == "least-squares":
        ys = y.astype(np.float64)
        true = float(y_point)
        wrong: Any = true + INPUT_TARGET_SHIFT * max(1.0, float(np.std(ys)))
    else:
        ys = y.astype(np.int64)
        true = int(y_point)
        k = 2 if family == "binary-logistic" else n_outputs
        if not 0 <= true < k:
            raise ParameterError("y_point", y_point, f"must be a class label in [0, {k - 1}]")
        wrong = (true + 1) % k
    Xc = np.vstack([X, x_point[None, :]])
    y_in = np.concatenate([ys, np.asarray([wrong], dtype=ys.dtype)])
    y_out = np.concatenate([ys, np.asarray([true], dtype=ys.dtype)])
    return CanaryPair(
        kind="input",
        family=family,
        n_outputs=n_outputs,
        X_in=Xc,
        y_in=y_in,
        X_out=Xc.copy(),
        y_out=y_out,
        index=n,
        x_canary=x_point,
        y_canary=wrong,
        description=f"input canary: a held-out point with label {wrong:g} instead of {true:g} "
        "(neighbour: its true "
        "label); score = the canary's loss under the final model",
    )


# ---------------------------------------------------------------------- training the models
def model_seed(seed: int, world: int, index: int) -> int:
    """The trainer seed of model ``index`` of world ``world`` (0: neighbour, 1: canary)."""
    return int(
        np.random.SeedSequence([int(seed), int(world), int(index)]).generate_state(
            1, dtype=np.uint32
        )[0]
    )


def _scaled_noise(method: Any, scale: float) -> None:
    """Mutation testing: make ``method`` draw noise with std ``scale * sigma`` while its Run (and
    so the claim) still says ``sigma`` -- the trainer's own noise routine, rescaled."""
    orig = method._noise

    def noise(t: int, sigma: float, params: list[Any]) -> list[Any]:
        return orig(t, sigma * scale, params)

    method._noise = noise


def runs_per_chunk(pair: CanaryPair, spec: TrainerSpec) -> int:
    """How many models the vectorised path advances together: at most :data:`MAX_CHUNK`, and
    at most :data:`CHUNK_ELEMENTS` batch elements per step (rows x (features + 2 outputs))."""
    rows = pair.n if spec.algorithm == "gd" else min(pair.n, 2 * int(spec.batch_size or 1))
    per_model = rows * (pair.n_features + 2 * pair.n_outputs)
    return max(1, min(MAX_CHUNK, CHUNK_ELEMENTS // per_model))


def _same_run(run0: Any, run: Any) -> Any:
    if run0 is not None and run.setting() != run0.setting():  # pragma: no cover - deterministic
        raise RuntimeError("the trainer executed different runs in the two worlds")
    return run


def train_scores(
    pair: CanaryPair,
    spec: TrainerSpec,
    runs: int,
    *,
    seed: int = 0,
    noise_scale: float = 1.0,
    progress: bool = False,
    on_model: Callable[[int, int], None] | None = None,
    vectorised: bool = True,
    jobs: int = 1,
) -> tuple[np.ndarray, np.ndarray, Any]:
    """Train ``runs`` models per world and score each final model.

    Every model is trained by a fresh trainer (``spec.method``) on a fresh GLM with its own seed
    (:func:`model_seed`).  ``vectorised`` (default): the models of a world are advanced together
    in chunks of :func:`runs_per_chunk` by :class:`~lastiterate.train.trainer.NoisyRuns` -- the
    trainer's own step over a runs dimension, run r's batches and noise from ITS trainer, so model
    r ends where ``spec.method(model, seed_r).fit`` ends (to float rounding; tested) and a patched
    noise routine or clipping reaches it.  ``vectorised=False``: one model after the other with
    :meth:`~lastiterate.train.trainer.NoisyMethod.fit` (interleaving the worlds).  ``progress``
    shows a tqdm bar (models) with the time left on stderr; ``on_model(done, total)`` is called
    as models finish.  ``jobs`` > 1 (vectorised only): the chunks are trained in that many worker
    processes (:mod:`concurrent.futures`, the platform's start method), with the same chunks and
    seeds, so the same scores.

    Returns:
        (scores without the canary, scores with it, the Run the trainer executed).
    """
    runs = check_positive_int("runs", runs)
    if runs > MAX_RUNS:
        raise ParameterError("runs", runs, f"must be at most {MAX_RUNS} models per world")
    jobs = check_positive_int("jobs", jobs)
    if jobs > MAX_JOBS:
        raise ParameterError("jobs", jobs, f"must be an integer in [1, {MAX_JOBS}]")
    if jobs > 1 and not vectorised:
        raise ParameterError("jobs", jobs, "worker processes train vectorised chunks only")
    bar = None
    if progress:
        bar = tqdm(
            total=2 * runs,
            unit="model",
            desc="canary audit",
            file=sys.stderr,
            leave=False,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} models "
            "[{elapsed}<{remaining}, {rate_fmt}]",
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore", SeededRunWarning
            )  # an experiment: every model is seeded on purpose
            if vectorised:
                return _train_vectorised(pair, spec, runs, seed, noise_scale, bar, on_model, jobs)
            return _train_sequential(pair, spec, runs, seed, noise_scale, bar, on_model)
    finally:
        if bar is not None:
            bar.close()


def train_chunk(
    pair: CanaryPair,
    spec: TrainerSpec,
    world: int,
    start: int,
    stop: int,
    *,
    seed: int = 0,
    noise_scale: float = 1.0,
    on_epoch: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, Any]:
    """Models ``start .. stop-1`` of ``world`` (0: neighbour, 1: canary), advanced together by
    :class:`~lastiterate.train.trainer.NoisyRuns`, each with its own trainer and seed
    (:func:`model_seed`); their scores and the Run they executed.  A module-level function: the
    unit of work of ``jobs`` worker processes."""
    # lazy: torch (~1.5 s) and the trainer only when models are trained or scored
    from lastiterate.train.trainer import NoisyRuns

    X, y = (pair.X_in, pair.y_in) if world == 1 else (pair.X_out, pair.y_out)
    methods = [
        spec.method(pair.new_model(spec.intercept), model_seed(seed, world, r))
        for r in range(start, stop)
    ]
    if noise_scale != 1.0:
        for m in methods:
            _scaled_noise(m, noise_scale)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)  # an experiment, seeded on purpose
        res = NoisyRuns(methods).fit(
            X, y, epochs=spec.epochs, steps=spec.steps, threads=1, on_epoch=on_epoch
        )
    return np.asarray([pair.score(m, spec.feature_norm) for m in res.models]), res.run


def _train_vectorised(
    pair: CanaryPair,
    spec: TrainerSpec,
    runs: int,
    seed: int,
    noise_scale: float,
    bar: Any,
    on_model: Callable[[int, int], None] | None,
    jobs: int = 1,
) -> tuple[np.ndarray, np.ndarray, Any]:
    """:func:`train_scores` with the models of a world advanced together in chunks
    (:func:`train_chunk`); the worlds alternate chunk by chunk; ``jobs`` > 1 trains the chunks in
    that many worker processes (the same chunks, so the same scores)."""
    scores = np.empty((2, runs))
    chunk = runs_per_chunk(pair, spec)
    tasks = [
        (w, start, min(runs, start + chunk)) for start in range(0, runs, chunk) for w in (0, 1)
    ]
    run0 = None
    done = 0

    def finished(w: int, start: int, stop: int, s: np.ndarray, run: Any) -> None:
        nonlocal run0, done
        run0 = _same_run(run0, run)
        scores[w, start:stop] = s
        done += stop - start
        if on_model is not None:
            on_model(done, 2 * runs)

    if jobs > 1 and len(tasks) > 1:
        # the platform's start method: fork on Linux (no __main__ guard needed; the workers
        # inherit this process's modules), spawn on macOS / Windows (a script calling this
        # needs the usual ``if __name__ == "__main__":`` guard)
        with ProcessPoolExecutor(
            max_workers=min(jobs, len(tasks)), mp_context=multiprocessing.get_context()
        ) as pool:
            futures = {
                pool.submit(train_chunk, pair, spec, w, a, b, seed=seed, noise_scale=noise_scale): (
                    w,
                    a,
                    b,
                )
                for w, a, b in tasks
            }
            for fut in as_completed(futures):
                w, a, b = futures[fut]
                s, run = fut.result()
                finished(w, a, b, s, run)
                if bar is not None:
                    bar.update(b - a)
        return scores[0], scores[1], run0

    for w, start, stop in tasks:
        shown = 0.0

        def advance(t: int, T: int, size: int = stop - start) -> None:
            nonlocal shown
            if bar is not None:  # fractions of models: the time left from the first epochs
                bar.update(size * t / T - shown)
                shown = size * t / T

        s, run = train_chunk(
            pair, spec, w, start, stop, seed=seed, noise_scale=noise_scale, on_epoch=advance
        )
        finished(w, start, stop, s, run)
    return scores[0], scores[1], run0


def _train_sequential(
    pair: CanaryPair,
    spec: TrainerSpec,
    runs: int,
    seed: int,
    noise_scale: float,
    bar: Any,
    on_model: Callable[[int, int], None] | None,
) -> tuple[np.ndarray, np.ndarray, Any]:
    """:func:`train_scores` one model after the other (``NoisyMethod.fit``), worlds interleaved."""
    scores = np.empty((2, runs))
    run0 = None
    worlds = ((pair.X_out, pair.y_out), (pair.X_in, pair.y_in))
    for r in range(runs):
        for w, (X, y) in enumerate(worlds):
            model = pair.new_model(spec.intercept)
            method = spec.method(model, model_seed(seed, w, r))
            if noise_scale != 1.0:
                _scaled_noise(method, noise_scale)
            res = method.fit(
                X,
                y,
                epochs=spec.epochs,
                steps=spec.steps,
                account=False,
                progress=False,
                threads=1,
            )
            run0 = _same_run(run0, res.run)
            scores[w, r] = pair.score(model, spec.feature_norm)
            if bar is not None:
                bar.update(1)
            if on_model is not None:
                on_model(2 * r + w + 1, 2 * runs)
    return scores[0], scores[1], run0


# ---------------------------------------------------------------------- the audit
@dataclass(frozen=True)
class CanaryAuditResult:
    """Claim (the accountant's guarantee for the trained Run) vs the canary audit's lower bounds."""

    canary: str
    description: str
    inserted: bool
    runs: int
    seed: int
    alpha: float
    delta: float
    claim_bound: str | None
    claim_theorem: str | None
    claim_mu: float | None
    claim_eps: float | None
    mu_lb: float
    eps_lb: float
    mu_interval: tuple[float, float]
    mu_point: float | None
    eps_from_mu_lb: float
    verdict: str
    reason: str
    checks: tuple[Any, ...]
    run: dict[str, Any]
    strategy: str
    test: dict[str, Any]
    seconds: float
    noise_scale: float = 1.0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def mu_fraction(self) -> float | None:
        """mu_lb / claimed mu (how close the audit comes to the claim)."""
        return None if not self.claim_mu else self.mu_lb / self.claim_mu

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("checks",)}
        out["mu_interval"] = list(self.mu_interval)
        out["mu_fraction"] = self.mu_fraction
        out["checks"] = [c.to_json() for c in self.checks]
        return out

    def format(self) -> str:
        f = fmt_number

        lo, hi = self.mu_interval
        lines = [
            (
                f"Canary audit ({self.canary} canary"
                f"{'' if self.inserted else ', NULL: never inserted'}): {self.verdict}"
            )
        ]
        lines.append(f"  {self.description}")
        r = self.run
        lines.append(
            f"  run: {r.get('algorithm')}, n={r.get('n')}, T={r.get('steps')} steps, "
            f"lr={f(r.get('lr'))}, "
            f"sigma={f(r.get('noise_std'))}, C={f(r.get('clip'))}"
            + (f", noise x{self.noise_scale:g} (MUTATION TEST)" if self.noise_scale != 1.0 else "")
        )
        training = self.details.get("training")
        if training:
            secs = float(self.details.get("train_seconds") or 0.0)
            rate = f", {2 * self.runs / secs:.3g} models/s" if secs > 0 else ""
            lines.append(f"  training: {training} ({2 * self.runs} models in {secs:.1f} s{rate})")
        if self.claim_bound is None:
            lines.append("  claim: none (the accountant gives no bound for this run)")
        else:
            mu = f"mu = {f(self.claim_mu)}, " if self.claim_mu is not None else ""
            lines.append(
                f"  claim ({self.claim_bound}: {self.claim_theorem}): "
                f"{mu}epsilon = {f(self.claim_eps)} "
                f"at delta = {self.delta:g}"
            )
        lines.append(
            f"  lower bounds (confidence {1 - self.alpha:g}, {self.strategy}, "
            f"{self.runs} models per world):"
        )
        frac = f"  ({f(self.mu_fraction, 3)} of the claim)" if self.mu_fraction is not None else ""
        lines.append(
            f"    mu  >= {f(lo)}   interval of the chosen test [{f(lo)}, {_upper(hi)}], "
            f"point {_upper(self.mu_point)}{frac}"
        )
        lines.append(
            f"    eps >= {f(self.eps_lb)} at delta {self.delta:g} (Clopper-Pearson); eps(mu_lb) = "
            f"{f(self.eps_from_mu_lb)} if the tradeoff curve is Gaussian"
        )
        t = self.test
        lines.append(
            f"    test: guess 'canary' if score {'>' if t['direction'] == 'greater' else '<'} "
            f"{f(t['threshold'])}: "
            f"FPR {f(t['fpr'])} <= {f(t['fpr_u'])}, FNR {f(t['fnr'])} <= {f(t['fnr_u'])}"
        )
        lines.append(f"  verdict: {self.verdict} ({self.reason}); {self.seconds:.1f} s")
        for c in self.checks:
            mu = f", mu {f(c.claim_mu)}" if c.claim_mu is not None else ""
            lines.append(f"    {c.verdict:<12} {c.bound:<22} eps {f(c.claim_eps)}{mu}  {c.reason}")
        return "\n".join(lines)


def _upper(x: float | None) -> str:
    """An upper end or point estimate of mu in a table: +inf reads ``unbounded``, None ``-``."""
    return "unbounded" if x == math.inf else fmt_number(x)


def _test_interval(test: Any) -> tuple[float, float, float | None]:
    """(mu lower bound, mu upper bound, point estimate) of the chosen test's GDP parameter: the
    Clopper-Pearson upper (lower) bounds on FPR and FNR give the lower (upper) end.

    The lower end is :func:`~lastiterate.audit.stats.reported_mu_lb` (0, not -inf, for a test
    that certifies nothing); the upper end is +inf (unbounded) when a lower Clopper-Pearson
    bound is 0; the point estimate is None when the observed point (FPR, FNR) is an end point
    of every tradeoff curve ((0, 1) or (1, 0): no mu is singled out) or lies at (1, 1)."""
    a = test.alpha_per_test / 2
    fpr_l = clopper_pearson_lower(round(test.fpr * test.n_d), test.n_d, a)
    fnr_l = clopper_pearson_lower(round(test.fnr * test.n_dprime), test.n_dprime, a)

    def mu(p: float, q: float) -> float:
        p, q = min(max(p, 0.0), 1.0), min(max(q, 0.0), 1.0)
        with np.errstate(invalid="ignore"):  # inf - inf at the end points: nan
            return float(special.ndtri(1.0 - p) - special.ndtri(q))

    point = mu(test.fpr, test.fnr)
    return (
        reported_mu_lb(test.mu_lb),
        mu(fpr_l, fnr_l),
        point if point > -math.inf else None,  # nan and -inf: no estimate
    )


def audit_canary(
    pair: CanaryPair,
    spec: TrainerSpec,
    runs: int,
    *,
    seed: int = 0,
    alpha: float = 0.05,
    delta: float = 1e-5,
    bounds: Sequence[str] | None = None,
    noise_scale: float = 1.0,
    progress: bool = False,
    vectorised: bool = True,
    jobs: int = 1,
) -> CanaryAuditResult:
    """Train ``runs`` models per world with the project's trainer, score the final models, and
    compare the certified lower bounds (mu_lb, eps_lb at ``delta``; jointly at confidence
    ``1 - alpha``, threshold chosen on half of the runs) with every bound the accountant reports
    for the executed Run.  ``noise_scale`` != 1 is a mutation test (the trainer draws noise
    ``noise_scale * sigma`` while the claim is for sigma).  ``vectorised``: train the models of
    a world together (default) or one after the other; ``jobs``: worker processes for the
    vectorised chunks (:func:`train_scores`)."""
    alpha = check_in_range("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    delta = check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    noise_scale = check_positive("noise_scale", noise_scale)
    runs = check_positive_int("runs", runs, minimum=10)
    t0 = time.perf_counter()
    out_s, in_s, run = train_scores(
        pair,
        spec,
        runs,
        seed=seed,
        noise_scale=noise_scale,
        progress=progress,
        vectorised=vectorised,
        jobs=jobs,
    )
    train_seconds = time.perf_counter() - t0
    if not (np.all(np.isfinite(out_s)) and np.all(np.isfinite(in_s))):
        raise ParameterError(
            "lr",
            spec.lr,
            "the trained models diverged (non-finite scores): lower the learning rate",
        )
    sa = audit_scores(out_s, in_s, delta=delta, alpha=alpha, strategy=Split(0.5), seed=seed)
    rep = account(run, delta=delta, bounds=bounds)
    checks = []
    for r in rep.results:
        if r.kind != "bound":
            continue
        v, why = verdict_for(mu_lb=sa.mu_lb, eps_lb=sa.eps_lb, claim_mu=r.mu, claim_eps=r.epsilon)
        checks.append(ClaimCheck(r.bound, r.theorem, r.mu, r.epsilon, r.delta, v, why))
    best = rep.best
    if any(c.verdict == "VIOLATION" for c in checks):
        verdict = "VIOLATION"
        reason = "; ".join(f"{c.bound}: {c.reason}" for c in checks if c.verdict == "VIOLATION")
    elif best is None:
        verdict, reason = (
            "inconclusive",
            "no claim: " + (rep.to_json().get("no_bound_reason") or "no bound"),
        )
    else:
        c = next(c for c in checks if c.bound == best.bound)
        verdict, reason = c.verdict, c.reason
    test = sa.best_mu_test
    assert test is not None and sa.eps_lb is not None
    lo, hi, point = _test_interval(test)
    return CanaryAuditResult(
        canary=pair.kind,
        description=pair.description,
        inserted=pair.inserted,
        runs=runs,
        seed=seed,
        alpha=alpha,
        delta=delta,
        claim_bound=None if best is None else best.bound,
        claim_theorem=None if best is None else best.theorem,
        claim_mu=None if best is None else best.mu,
        claim_eps=None if best is None else best.epsilon,
        mu_lb=sa.mu_lb,
        eps_lb=sa.eps_lb,
        mu_interval=(lo, hi),
        mu_point=point,
        eps_from_mu_lb=_gdp_epsilon(delta, sa.mu_lb) if sa.mu_lb > 0 else 0.0,
        verdict=verdict,
        reason=reason,
        checks=tuple(checks),
        run=run.setting(),
        strategy=sa.strategy,
        test=test.to_json(),
        seconds=time.perf_counter() - t0,
        noise_scale=noise_scale,
        details={
            "training": (
                f"vectorised: up to {runs_per_chunk(pair, spec)} models advanced together"
                + (f", {jobs} worker processes" if jobs > 1 else "")
                if vectorised
                else "sequential: one model after the other"
            ),
            "train_seconds": train_seconds,
            "scores_mean_out": float(np.mean(out_s)),
            "scores_mean_in": float(np.mean(in_s)),
            "scores_sd_out": float(np.std(out_s)),
            "scores_sd_in": float(np.std(in_s)),
            "eps_test": None if sa.best_eps_test is None else sa.best_eps_test.to_json(),
            "not_applicable": "; ".join(f"{n.bound}: {n.reason}" for n in rep.not_applicable),
        },
    )
