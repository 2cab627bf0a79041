"""The description of a training run, in the canonical notation of docs/theorems.md section 0.

    x_{t+1} = Proj_K( x_t - eta_t * ( (1/b) * sum_{i in B_t} g_i(x_t) + Z_t ) ),
        Z_t ~ N(0, sigma^2 I)

A :class:`Run` is validated on construction and computes every derived quantity once (steps T,
epochs E, batches per epoch l, sampling rate p, noise std sigma, sensitivity L, contraction c,
per-step GDP scale L/(b sigma)).  Bounds read these derived quantities; they never re-derive them.

Conventions (docs/theorems.md 0.1):

* ``noise_std`` sigma is the std of the Gaussian added to the AVERAGED gradient.  Opacus users give
  ``noise_multiplier`` z on the SUM of gradients clipped to ``clip`` C; then sigma = z*C/b.
* ``sensitivity`` L (see :data:`SENSITIVITY_MEANING`).  Under replace-one adjacency
  L = sup_x sup_{z, z'} ||g(x; z) - g(x; z')|| over ANY two possible examples z, z' -- not only
  the pair that differs in the two datasets: the sampled-batch results (the C_p operator of paper
  000 Thms 4.8-4.10, the sampled-Gaussian terms) compare batches that may hold different examples.
  ``clip`` C gives L = 2C.  Under add/remove adjacency (Poisson batches normalised by the FIXED b
  only, see :func:`check_adjacency`) L = sup_x sup_z ||g(x; z)||, the change of the gradient SUM
  when one example is added or removed; ``clip`` C gives L = C.
* Cyclic batches (``cgd``) use the balanced partition of ``numpy.array_split`` into
  l = ceil(n/b) batches; when b does not divide n the smallest batch ``min_batch_size`` sets the
  per-step sensitivity L/(b_min sigma), which is what the accountant uses.
* Sampled batches (``sgd``) need an explicit ``sampling`` scheme: ``poisson`` (each example
  independently with rate p = b/n, the sum normalised by the FIXED expected size b), ``uniform``
  (a uniformly random subset of exactly b examples, drawn independently each step) or ``shuffle``
  (a fresh random permutation each epoch, cut into l batches).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args, get_origin, get_type_hints

from lastiterate.errors import (
    SCALE_RANGE,
    NotApplicable,
    ParameterError,
    check_in_range,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_scale,
)
from lastiterate.notions.adjacency import ADJACENCIES, Adjacency

Algorithm = Literal["gd", "cgd", "sgd"]
Sampling = Literal["poisson", "uniform", "shuffle"]

ALGORITHMS: tuple[Algorithm, ...] = get_args(Algorithm)
SAMPLINGS: tuple[Sampling, ...] = get_args(Sampling)


def _choice(name: str, value: Any, allowed: Sequence[str]) -> Any:
    if not isinstance(value, str) or value not in allowed:  # an array made `in` ambiguous
        raise ParameterError(name, value, "must be one of " + ", ".join(allowed))
    return str(value)


#: What the reported ``sensitivity`` certifies, per adjacency (the
#: ``sensitivity_meaning`` of a setting).
SENSITIVITY_MEANING: dict[str, str] = {
    "replace": (
        "L bounds ||g(x; z) - g(x; z')|| for ANY two possible examples z, z' and every parameter x "
        "(not only the pair that differs); --clip C gives L = 2C"
    ),
    "add-remove": (
        "L bounds ||g(x; z)|| for every possible example z and every parameter x, i.e. the change "
        "of the gradient SUM when one example is added or removed; the sum is normalised by the "
        "fixed expected batch size b; --clip C gives L = C"
    ),
}

#: Why add/remove adjacency is refused outside Poisson sampling (shared by Run, the trainer and the
#: Opacus adapter, so that all three refuse the same runs with the same line).
ADD_REMOVE_REFUSAL = (
    "add-remove adjacency is supported only for sgd with poisson sampling (the sum normalised by "
    "the fixed expected size b); for {what} removing an example changes the data-dependent "
    "normaliser or the batches (the average moves by up to 2C/b, not C/b): use replace"
)


def check_adjacency(adjacency: Any, algorithm: str, sampling: str | None) -> str:
    """Validate ``adjacency`` for a run of ``algorithm`` / ``sampling``; return it.

    Add/remove adjacency is certified only where the accountant, the trainer and Opacus implement
    the same mechanism: Poisson sampling, each example kept independently with the public rate p,
    the clipped-gradient SUM divided by the FIXED expected batch size b (one example moves it by
    at most C/b).  Full batches (gd), cyclic (cgd), shuffled and uniform fixed-size batches
    normalise by a size that changes with the dataset (or partition it anew): removing an example
    moves the average by up to 2C/b (gd: (1/n)||g_z - mean of the others|| <= 2C/n) and, for the
    cyclic and shuffled partitions, changes every later batch.  Charging C/b there under-reports
    mu by up to 2x, so those runs are refused (use replace-one adjacency, which covers them).
    """
    adjacency = _choice("adjacency", adjacency, ADJACENCIES)
    if adjacency == "add-remove" and not (algorithm == "sgd" and sampling == "poisson"):
        what = algorithm if algorithm != "sgd" else f"sgd with {sampling} sampling"
        raise ParameterError("adjacency", adjacency, ADD_REMOVE_REFUSAL.format(what=what))
    return adjacency


def _optional_scale(name: str, value: Any) -> float | None:
    return None if value is None else check_scale(name, value)


MAX_COUNT = 10**12
"""Largest number of examples n and of steps T accepted."""
# The largest per-step GDP scale L/(b sigma) accepted: notions.gdp.MU_MAX, beyond which a Gaussian
# privacy profile cannot be evaluated accurately in double precision (epsilon > 5e11).
_MAX_PER_STEP_MU = 1e6
# The smallest positive lr*m: below it, 1 - lr*m rounds to 1 (and products such as
# m*lr*sigma^2 may underflow).
_MIN_LR_TIMES_M = 2.0**-52
# The rounding bound added to a computed contraction max(|1 - eta m|, |1 - eta M|)
# (step_contraction): covers the product's and the subtraction's rounding for eta m, eta M <= 2.
_CONTRACTION_ROUNDING = 2.0**-51


def step_contraction(etas: Sequence[float], m: float | None, M: float | None) -> float:
    """Contraction of one gradient step, worst over the learning rates ``etas``
    (docs/theorems.md 0).

    For a differentiable loss that is m-strongly convex and M-smooth, the gradient step
    x -> x - eta grad f(x) is Lipschitz with constant max(|1 - eta m|, |1 - eta M|) (a standard
    fact: the Hessian's eigenvalues lie in [m, M]).  A missing m or M drops its term, which gives
    what the declared constant alone implies: no loss whose curvature is declared to reach m (or
    M) contracts by less than |1 - eta m| (or |1 - eta M|).  Both terms are convex in eta, so their
    maximum over a schedule is attained at its smallest or largest step.  Returns 0.0 when neither
    constant is given.

    Rounded UP: ``1 - eta m`` in floating point can lie below the exact value (at eta m = 1.5e-15
    it made ``1 - c`` 3.6% too large, a faster contraction than the geometry gives, and every
    bound with ``1/(1 - c)`` too small).  For ``eta m, eta M <= 2`` the product's rounding is at
    most ``2^-52`` and the subtraction's ``2^-54``, so ``_CONTRACTION_ROUNDING = 2^-51`` is added
    (capped at 1 for a value up to 1).
    """
    if m is None and M is None:
        return 0.0
    ends = (min(etas), max(etas))
    terms = [0.0]
    if m is not None:
        terms.append(max(abs(1 - eta * m) for eta in ends))
    if M is not None:
        terms.append(max(abs(1 - eta * M) for eta in ends))
    c = max(terms)
    return min(1.0, c + _CONTRACTION_ROUNDING) if c <= 1.0 else c + _CONTRACTION_ROUNDING


def _check_declared_contraction(
    c: float, etas: Sequence[float], m: float | None, M: float | None
) -> None:
    """Refuse a declared contraction below what the declared lr, m and M imply
    (never under-report)."""
    if m is None and M is None:
        return
    implied = step_contraction(etas, m, M)
    if c < implied * (1 - 1e-12):
        lr = f"{etas[0]:g}" if len(set(etas)) == 1 else f"in [{min(etas):g}, {max(etas):g}]"
        declared = ", ".join(f"{k}={v:g}" for k, v in (("m", m), ("M", M)) if v is not None)
        raise ParameterError(
            "contraction",
            c,
            f"must be in [{implied!r}, 1] for lr {lr} and {declared}: a gradient step on an "
            "m-strongly convex M-smooth loss contracts by max(|1 - lr m|, |1 - lr M|), and a "
            "smaller declared c would under-report",
        )


def _contraction(
    c_explicit: float | None, etas: Sequence[float], m: float | None, M: float | None, convex: bool
) -> tuple[float | None, str]:
    """Contraction c of one gradient step (docs/theorems.md 0): c = max(|1-eta m|,
    |1-eta M|), and why."""
    if c_explicit is not None:
        if m is not None or M is not None:
            # never below what the declared geometry gives, rounded up (the declaration was
            # checked to be within 1e-12 of it)
            return max(c_explicit, step_contraction(etas, m, M)), "declared with contraction"
        return c_explicit, "declared with contraction"
    if M is None:
        return None, "no smoothness M declared"
    eta = max(etas)
    if m is not None and m > 0:
        if eta >= 2 / M:
            return None, f"lr={eta:g} >= 2/M={2 / M:g}: a gradient step is not a contraction"
        # worst step of a schedule: |1 - lr m| is largest at the smallest lr, |1 -
        # lr M| at the largest
        return step_contraction(etas, m, M), "c = max(|1 - lr m|, |1 - lr M|)"
    if convex:
        if eta > 2 / M:
            return None, f"lr={eta:g} > 2/M={2 / M:g}: a gradient step is not non-expansive"
        return 1.0, "convex and lr <= 2/M: non-expansive (c = 1)"
    return None, "neither strong convexity nor convexity declared"


@dataclass(frozen=True)
class Setting:
    """Every canonical and derived quantity of a validated :class:`Run` (docs/theorems.md 0).

    The field order is the order of the report's ``setting`` object; ``lr`` is the constant step
    (or the per-step list when it varies) and ``lr_schedule`` the explicit schedule (None for a
    constant ``lr``), which is not part of the report.
    """

    algorithm: Algorithm
    n: int
    batch_size: int
    min_batch_size: int
    batches_per_epoch: float
    steps: int
    epochs: float
    sampling: Sampling | None
    sampling_rate: float
    adjacency: Adjacency
    noise_std: float
    noise_multiplier: float | None
    clip: float | None
    sensitivity: float
    strong_convexity: float | None
    smoothness: float | None
    convex: bool
    diameter: float | None
    contraction: float | None
    per_step_mu: float
    lr: float | tuple[float, ...]
    contraction_note: str
    lr_schedule: tuple[float, ...] | None = field(default=None, metadata={"report": False})

    def to_json(self) -> dict[str, Any]:
        """The report's ``setting`` object (JSON-serialisable, every value finite or null)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.metadata.get("report", True):
                value = getattr(self, f.name)
                out[f.name] = list(value) if isinstance(value, tuple) else value
            if f.name == "sensitivity":
                out["sensitivity_meaning"] = SENSITIVITY_MEANING[self.adjacency]
        return out


@dataclass(frozen=True)
class Run:
    """A noisy gradient-descent run, validated on construction.

    Give exactly one of ``steps`` / ``epochs``; exactly one of ``noise_std`` /
    ``noise_multiplier`` (the latter needs ``clip``); and ``sensitivity`` or ``clip``.
    Geometry is optional: ``strong_convexity`` m, ``smoothness`` M, ``convex``, or an explicit
    ``contraction`` c (c < 1 declares the strongly convex regime directly), and ``diameter`` D of
    the projection set.  ``lr`` is a constant or a per-step sequence of length ``steps``.

    A declared ``contraction`` must be consistent with the declared ``lr``, m and M: it may not
    be smaller than :func:`step_contraction` of them, max(|1 - lr m|, |1 - lr M|) (a smaller c
    would claim a faster contraction than the declared geometry gives, and under-report).

    The derived quantities live in the typed :attr:`derived` (a :class:`Setting`) and are read
    through the canonical short names (``T``, ``E``, ``l``, ``b``, ``p``,
    ``sigma``, ``L``, ``c``...).

    Args:
        algorithm: ``"gd"`` (full batch), ``"cgd"`` (cyclic batches) or ``"sgd"`` (sampled
            batches).
        n: the number of examples.
        lr: the learning rate eta, a constant or one value per step.
        batch_size: the batch size b (the expected size under Poisson sampling); not for gd.
        steps: the number of noisy steps T (or give ``epochs``).
        epochs: the number of epochs E (or give ``steps``).
        noise_std: the std sigma of the Gaussian noise on the AVERAGED gradient.
        noise_multiplier: Opacus's z on the SUM of clipped gradients (needs ``clip``):
            sigma = z C / b.
        clip: the per-example gradient clip norm C.
        sensitivity: L, a bound on ``||g(x; z) - g(x; z')||`` over ANY two examples (replace-one)
            or on ``||g(x; z)||`` (add/remove); ``clip`` C gives L = 2C or C.
        strong_convexity: m, the strong convexity of every loss.
        smoothness: M, the smoothness of every loss.
        convex: the losses are convex.
        contraction: an explicit contraction factor c of one noiseless step.
        diameter: the diameter D of the convex set the iterates are projected onto.
        sampling: the batch sampling of sgd: ``"poisson"``, ``"uniform"`` or ``"shuffle"``.
        adjacency: ``"replace"`` (replace-one, the default) or ``"add-remove"``.

    Raises:
        ParameterError: a value out of its range, or an inconsistent combination (both or
            neither of an exclusive pair, a contraction faster than the declared geometry, ...).
    """

    algorithm: Algorithm
    n: int
    lr: float | Sequence[float]
    batch_size: int | None = None
    steps: int | None = None
    epochs: float | None = None
    noise_std: float | None = None
    noise_multiplier: float | None = None
    clip: float | None = None
    sensitivity: float | None = None
    strong_convexity: float | None = None
    smoothness: float | None = None
    convex: bool = False
    contraction: float | None = None
    diameter: float | None = None
    sampling: Sampling | None = None
    adjacency: Adjacency = "replace"
    derived: Setting = field(init=False, repr=False, compare=False)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The constructor's inputs, in declaration order (what a config or the CLI may set).

        Returns:
            The names of the fields the constructor takes.
        """
        return tuple(f.name for f in fields(cls) if f.init)

    # ------------------------------------------------------------------ validation
    def __post_init__(self) -> None:
        algorithm: Algorithm = _choice("algorithm", self.algorithm, ALGORITHMS)
        n = check_positive_int("n", self.n)
        if n > MAX_COUNT:
            raise ParameterError("n", self.n, f"must be an integer in [1, {MAX_COUNT:g}]")
        _choice("adjacency", self.adjacency, ADJACENCIES)

        if algorithm == "gd":
            if (
                self.batch_size is not None
                and check_positive_int("batch_size", self.batch_size) != n
            ):
                raise ParameterError(
                    "batch_size",
                    self.batch_size,
                    f"must equal n={n} for full-batch gd (or be omitted)",
                )
            b = n
        else:
            if self.batch_size is None:
                raise ParameterError(
                    "batch_size", None, f"is required for {algorithm}: an integer in [1, n={n}]"
                )
            b = check_positive_int("batch_size", self.batch_size)
            if b > n:
                raise ParameterError("batch_size", b, f"must be an integer in [1, n={n}]")

        sampling: Sampling | None
        if algorithm == "sgd":
            if self.sampling is None:
                raise ParameterError(
                    "sampling",
                    None,
                    "is required for sgd: one of poisson, uniform, shuffle (no default is assumed)",
                )
            sampling = _choice("sampling", self.sampling, SAMPLINGS)
        else:
            if self.sampling is not None:
                raise ParameterError(
                    "sampling", self.sampling, f"only applies to sgd, not {algorithm}"
                )
            sampling = None
        adjacency: Adjacency = check_adjacency(self.adjacency, algorithm, sampling)  # type: ignore[assignment]

        # batches per epoch and the smallest batch of the cyclic partition
        l_batches: float
        if algorithm == "gd":
            l_batches = 1
            min_b = n
        elif algorithm == "cgd" or sampling == "shuffle":
            l_batches = math.ceil(n / b)
            min_b = n // l_batches
        else:
            l_batches = n / b
            min_b = b

        steps, epochs = self._steps_and_epochs(algorithm, l_batches)

        lr_schedule = self._lr_schedule(steps)

        if (self.noise_std is None) == (self.noise_multiplier is None):
            raise ParameterError(
                "noise_std", self.noise_std, "give exactly one of noise_std and noise_multiplier"
            )
        clip = _optional_scale("clip", self.clip)
        z: float | None
        if self.noise_std is not None:
            sigma = check_scale("noise_std", self.noise_std)
            z = sigma * b / clip if clip is not None else None
        else:
            z = check_scale("noise_multiplier", self.noise_multiplier)
            if clip is None:
                raise ParameterError(
                    "clip", None, "is required with noise_multiplier (sigma = z*C/b): must be > 0"
                )
            sigma = z * clip / b

        L = self._sensitivity(clip, adjacency)

        m = (
            None
            if self.strong_convexity is None
            else check_nonnegative("strong_convexity", self.strong_convexity)
        )
        if m is not None and m > SCALE_RANGE[1]:
            raise ParameterError("strong_convexity", m, f"must be in [0, {SCALE_RANGE[1]:g}]")
        M = _optional_scale("smoothness", self.smoothness)
        if m is not None and M is not None and m > M:
            raise ParameterError("strong_convexity", m, f"must be <= smoothness M={M:g}")
        D = _optional_scale("diameter", self.diameter)
        etas = lr_schedule if lr_schedule is not None else (float(self.lr),)  # type: ignore[arg-type]
        if m is not None and m > 0 and m * min(etas) < _MIN_LR_TIMES_M:
            raise ParameterError(
                "strong_convexity",
                m,
                f"must be 0 or >= {_MIN_LR_TIMES_M / min(etas):.6g} for lr "
                f"{min(etas):g}: a smaller lr*m rounds the contraction 1 - lr m to 1 "
                "(declare --convex, or m = 0, instead)",
            )
        etas = lr_schedule if lr_schedule is not None else (float(self.lr),)  # type: ignore[arg-type]
        c_explicit = None
        if self.contraction is not None:
            c_explicit = check_in_range("contraction", self.contraction, 0.0, 1.0)
            _check_declared_contraction(c_explicit, etas, m, M)
        if not (isinstance(self.convex, bool) or getattr(self.convex, "dtype", None) == bool):
            # bool("False") is True: a string or number must not declare convexity
            raise ParameterError("convex", self.convex, "must be True or False")
        convex = bool(self.convex) or (m is not None)
        contraction, contraction_note = _contraction(c_explicit, etas, m, M, convex)

        per_step_mu = L / (min_b * sigma)
        if not per_step_mu <= _MAX_PER_STEP_MU:
            name, value = (
                ("noise_std", self.noise_std)
                if self.noise_std is not None
                else ("noise_multiplier", z)
            )
            raise ParameterError(
                name,
                value,
                f"gives a per-step scale L/(b sigma) = {per_step_mu:g} with L={L:g}, b={min_b}: "
                f"it must be at most {_MAX_PER_STEP_MU:g} (sigma >= "
                f"{L / (min_b * _MAX_PER_STEP_MU):.6g}); beyond, epsilon exceeds 5e11 and "
                "cannot be evaluated accurately",
            )

        if lr_schedule is not None and max(lr_schedule) != min(lr_schedule):
            lr_report: float | tuple[float, ...] = lr_schedule
        else:
            lr_report = lr_schedule[0] if lr_schedule is not None else float(self.lr)  # type: ignore[arg-type]

        object.__setattr__(
            self,
            "derived",
            Setting(
                algorithm=algorithm,
                n=n,
                batch_size=b,
                min_batch_size=min_b,
                batches_per_epoch=l_batches,
                steps=steps,
                epochs=epochs,
                sampling=sampling,
                sampling_rate=b / n,
                adjacency=adjacency,
                noise_std=sigma,
                noise_multiplier=z,
                clip=clip,
                sensitivity=L,
                strong_convexity=m,
                smoothness=M,
                convex=convex,
                diameter=D,
                contraction=contraction,
                per_step_mu=per_step_mu,
                lr=lr_report,
                contraction_note=contraction_note,
                lr_schedule=lr_schedule,
            ),
        )

    def _sensitivity(self, clip: float | None, adjacency: Adjacency) -> float:
        """L from ``sensitivity`` or the clip norm: 2C under replace-one, C under add/remove."""
        implied = None
        if clip is not None:
            implied = 2 * clip if adjacency == "replace" else clip
        if self.sensitivity is not None:
            L = check_scale("sensitivity", self.sensitivity)
            if implied is not None and L < implied * (1 - 1e-12):
                raise ParameterError(
                    "sensitivity",
                    self.sensitivity,
                    f"must be >= {implied:g} for clip={clip:g} under {adjacency} adjacency",
                )
            return L
        if implied is not None:
            return implied
        raise ParameterError(
            "sensitivity", None, "give sensitivity L or clip C (L = 2C under replace-one)"
        )

    def _steps_and_epochs(self, algorithm: str, l_batches: float) -> tuple[int, float]:
        if (self.steps is None) == (self.epochs is None):
            raise ParameterError("steps", self.steps, "give exactly one of steps and epochs")
        if self.steps is not None:
            steps = check_positive_int("steps", self.steps)
            if steps > MAX_COUNT:
                raise ParameterError(
                    "steps", self.steps, f"must be an integer in [1, {MAX_COUNT:g}]"
                )
            return steps, steps / l_batches
        epochs = check_positive("epochs", self.epochs)
        exact = epochs * l_batches
        if not exact <= MAX_COUNT:
            raise ParameterError(
                "epochs",
                self.epochs,
                f"must be in (0, {MAX_COUNT / l_batches:g}]: at most {MAX_COUNT:g} steps",
            )
        steps = math.ceil(exact - 1e-9)
        if algorithm in ("gd", "cgd") and abs(exact - round(exact)) > 1e-9:
            raise ParameterError(
                "epochs", self.epochs, f"must make epochs*{l_batches} an integer number of steps"
            )
        return max(1, steps), epochs

    def _lr_schedule(self, steps: int) -> tuple[float, ...] | None:
        if isinstance(self.lr, (int, float)) and not isinstance(self.lr, bool):
            check_scale("lr", self.lr)
            return None
        try:
            schedule = tuple(check_scale("lr", v) for v in self.lr)  # type: ignore[union-attr]
        except TypeError:
            raise ParameterError(
                "lr", self.lr, "must be a positive number or a sequence of them"
            ) from None
        if len(schedule) != steps:
            raise ParameterError(
                "lr",
                f"<sequence of {len(schedule)}>",
                f"schedule must have one value per step ({steps})",
            )
        return schedule

    # ------------------------------------------------------------------ derived quantities
    # Canonical short names (docs/theorems.md 0).  The constructor's inputs keep their long names;
    # these properties are the values every bound must use.
    @property
    def T(self) -> int:
        """Number of noisy steps."""
        return self.derived.steps

    @property
    def E(self) -> float:
        """Epochs (T / l)."""
        return self.derived.epochs

    @property
    def uses(self) -> int:
        """Worst-case number of steps that touch one example under cyclic batches: ceil(T / l)."""
        return math.ceil(self.T / self.l - 1e-9)

    @property
    def l(self) -> float:
        """Batches per epoch: 1 (gd), ceil(n/b) (cgd, shuffle), n/b (poisson, uniform)."""
        return self.derived.batches_per_epoch

    @property
    def b(self) -> int:
        """Batch size (n for gd; the expected size for Poisson sampling)."""
        return self.derived.batch_size

    @property
    def b_min(self) -> int:
        """Smallest batch of the cyclic partition (sets the per-step sensitivity)."""
        return self.derived.min_batch_size

    @property
    def p(self) -> float:
        """Sampling rate b/n."""
        return self.derived.sampling_rate

    @property
    def sigma(self) -> float:
        """Std of the Gaussian noise on the averaged gradient."""
        return self.derived.noise_std

    @property
    def z(self) -> float | None:
        """Opacus noise multiplier sigma*b/C (None without a clip norm)."""
        return self.derived.noise_multiplier

    @property
    def L(self) -> float:
        """Gradient sensitivity under the run's adjacency (:data:`SENSITIVITY_MEANING`).

        Replace-one: a bound on the gradient difference of ANY two possible examples (2C from a
        clip norm C); add/remove (Poisson only): a bound on one example's gradient norm (C).
        """
        return self.derived.sensitivity

    @property
    def m(self) -> float | None:
        """Strong convexity m (None when not declared)."""
        return self.derived.strong_convexity

    @property
    def M(self) -> float | None:
        """Smoothness M (None when not declared)."""
        return self.derived.smoothness

    @property
    def D(self) -> float | None:
        """Diameter D of the projection set (None without projection)."""
        return self.derived.diameter

    @property
    def is_convex(self) -> bool:
        """Convexity declared (``convex`` or any strong convexity m >= 0)."""
        return self.derived.convex

    @property
    def c(self) -> float | None:
        """Contraction factor of one gradient step, or None when no geometry makes it <= 1."""
        return self.derived.contraction

    @property
    def contraction_note(self) -> str:
        """Why :attr:`c` has its value (or is None)."""
        return self.derived.contraction_note

    @property
    def sampling_scheme(self) -> Sampling | None:
        """The batch sampling of sgd (None for gd and cgd)."""
        return self.derived.sampling

    @property
    def per_step_mu(self) -> float:
        """GDP parameter of one step that uses the differing example: L / (b_min sigma)."""
        return self.derived.per_step_mu

    @property
    def lr_schedule(self) -> tuple[float, ...]:
        """Per-step learning rates (length T)."""
        s = self.derived.lr_schedule
        return s if s is not None else (self.eta,) * self.T

    @property
    def constant_lr(self) -> bool:
        """Whether every step uses the same learning rate."""
        return not isinstance(self.derived.lr, tuple)

    @property
    def eta(self) -> float:
        """The constant learning rate; raises NotApplicable for a schedule."""
        lr = self.derived.lr
        if isinstance(lr, tuple):
            raise NotApplicable("needs a constant learning rate; the run has a schedule")
        return lr

    def setting(self) -> dict[str, Any]:
        """Every canonical and derived quantity, JSON-serialisable (the ``setting`` of a report).

        Returns:
            A dict of the inputs and the derived quantities (T, E, l, p, sigma, L, c, ...).
        """
        return self.derived.to_json()

    def replace(self, **changes: Any) -> Run:
        """A copy with some inputs changed (re-validated).

        Giving ``steps`` drops ``epochs`` (and the reverse); giving ``noise_std`` drops
        ``noise_multiplier`` (and the reverse).

        Args:
            **changes: constructor inputs and their new values.

        Returns:
            The new, validated run.

        Raises:
            ParameterError: an unknown input name, or the changed run is invalid.
        """
        unknown = sorted(set(changes) - set(self.field_names()))
        if unknown:
            raise ParameterError(
                unknown[0],
                changes[unknown[0]],
                "must name a Run input: one of " + ", ".join(self.field_names()),
            )
        inputs = {k: getattr(self, k) for k in self.field_names()}
        if "steps" in changes:
            inputs["epochs"] = None
        if "epochs" in changes:
            inputs["steps"] = None
        if "noise_std" in changes:
            inputs["noise_multiplier"] = None
        if "noise_multiplier" in changes:
            inputs["noise_std"] = None
        inputs.update(changes)
        return Run(**inputs)


def _literal_choices(hint: Any) -> tuple[str, ...] | None:
    """The values of a ``Literal[...]`` (or ``Literal[...] | None``) annotation, else None."""
    if get_origin(hint) is Literal:
        return get_args(hint)
    for arg in get_args(hint):
        if get_origin(arg) is Literal:
            return get_args(arg)
    return None


def _run_choices() -> dict[str, tuple[str, ...]]:
    hints = get_type_hints(Run)
    out = {}
    for name in Run.field_names():
        choices = _literal_choices(hints[name])
        if choices is not None:
            out[name] = choices
    return out


RUN_CHOICES: dict[str, tuple[str, ...]] = _run_choices()
"""The allowed values of every enumerated input of :class:`Run` (``algorithm``, ``sampling``,
``adjacency``), read from the dataclass's Literal annotations: the CLI's ``choices``."""
