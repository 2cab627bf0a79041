"""The description of a training run, in the canonical notation of docs/theorems.md section 0.

    x_{t+1} = Proj_K( x_t - eta_t * ( (1/b) * sum_{i in B_t} g_i(x_t) + Z_t ) ),  Z_t ~ N(0, sigma^2 I)

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
from dataclasses import dataclass, field
from typing import Any, Literal

from lastiterate.errors import (
    NotApplicable,
    ParameterError,
    check_in_range,
    check_nonnegative,
    check_positive,
    check_positive_int,
)

Algorithm = Literal["gd", "cgd", "sgd"]
Sampling = Literal["poisson", "uniform", "shuffle"]
Adjacency = Literal["replace", "add-remove"]

ALGORITHMS: tuple[str, ...] = ("gd", "cgd", "sgd")
SAMPLINGS: tuple[str, ...] = ("poisson", "uniform", "shuffle")
ADJACENCIES: tuple[str, ...] = ("replace", "add-remove")


def _choice(name: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ParameterError(name, value, "must be one of " + ", ".join(allowed))
    return str(value)


#: What the reported ``sensitivity`` certifies, per adjacency (the ``sensitivity_meaning`` of a setting).
SENSITIVITY_MEANING: dict[str, str] = {
    "replace": (
        "L bounds ||g(x; z) - g(x; z')|| for ANY two possible examples z, z' and every parameter x "
        "(not only the pair that differs); --clip C gives L = 2C"
    ),
    "add-remove": (
        "L bounds ||g(x; z)|| for every possible example z and every parameter x, i.e. the change of the "
        "gradient SUM when one example is added or removed; the sum is normalised by the fixed expected "
        "batch size b; --clip C gives L = C"
    ),
}

#: Why add/remove adjacency is refused outside Poisson sampling (shared by Run, the trainer and the
#: Opacus adapter, so that all three refuse the same runs with the same line).
ADD_REMOVE_REFUSAL = (
    "add-remove adjacency is supported only for sgd with poisson sampling (the sum normalised by the "
    "fixed expected size b); for {what} removing an example changes the data-dependent normaliser or the "
    "batches (the average moves by up to 2C/b, not C/b): use replace"
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


def _optional_positive(name: str, value: Any) -> float | None:
    return None if value is None else check_positive(name, value)


@dataclass(frozen=True)
class Run:
    """A noisy gradient-descent run, validated on construction.

    Give exactly one of ``steps`` / ``epochs``; exactly one of ``noise_std`` /
    ``noise_multiplier`` (the latter needs ``clip``); and ``sensitivity`` or ``clip``.
    Geometry is optional: ``strong_convexity`` m, ``smoothness`` M, ``convex``, or an explicit
    ``contraction`` c (c < 1 declares the strongly convex regime directly), and ``diameter`` D of
    the projection set.  ``lr`` is a constant or a per-step sequence of length ``steps``.
    """

    algorithm: str
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
    sampling: str | None = None
    adjacency: str = "replace"
    # derived, filled in __post_init__
    _derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    # ------------------------------------------------------------------ validation
    def __post_init__(self) -> None:
        algorithm = _choice("algorithm", self.algorithm, ALGORITHMS)
        n = check_positive_int("n", self.n)
        _choice("adjacency", self.adjacency, ADJACENCIES)

        if algorithm == "gd":
            if self.batch_size is not None and int(self.batch_size) != n:
                raise ParameterError(
                    "batch_size", self.batch_size, f"must equal n={n} for full-batch gd (or be omitted)"
                )
            b = n
        else:
            if self.batch_size is None:
                raise ParameterError("batch_size", None, f"is required for {algorithm}: an integer in [1, n={n}]")
            b = check_positive_int("batch_size", self.batch_size)
            if b > n:
                raise ParameterError("batch_size", b, f"must be an integer in [1, n={n}]")

        if algorithm == "sgd":
            if self.sampling is None:
                raise ParameterError(
                    "sampling", None, "is required for sgd: one of poisson, uniform, shuffle (no default is assumed)"
                )
            sampling: str | None = _choice("sampling", self.sampling, SAMPLINGS)
        else:
            if self.sampling is not None:
                raise ParameterError("sampling", self.sampling, f"only applies to sgd, not {algorithm}")
            sampling = None
        adjacency = check_adjacency(self.adjacency, algorithm, sampling)

        # batches per epoch and the smallest batch of the cyclic partition
        if algorithm == "gd":
            l_batches: float = 1
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
            raise ParameterError("noise_std", self.noise_std, "give exactly one of noise_std and noise_multiplier")
        clip = _optional_positive("clip", self.clip)
        if self.noise_std is not None:
            sigma = check_positive("noise_std", self.noise_std)
            z = sigma * b / clip if clip is not None else None
        else:
            z = check_positive("noise_multiplier", self.noise_multiplier)
            if clip is None:
                raise ParameterError("clip", None, "is required with noise_multiplier (sigma = z*C/b): must be > 0")
            sigma = z * clip / b

        if self.sensitivity is not None:
            L = check_positive("sensitivity", self.sensitivity)
            if clip is not None:
                implied = 2 * clip if adjacency == "replace" else clip
                if L < implied * (1 - 1e-12):
                    raise ParameterError(
                        "sensitivity",
                        self.sensitivity,
                        f"must be >= {implied:g} for clip={clip:g} under {adjacency} adjacency",
                    )
        elif clip is not None:
            L = 2 * clip if adjacency == "replace" else clip
        else:
            raise ParameterError("sensitivity", None, "give sensitivity L or clip C (L = 2C under replace-one)")

        m = None if self.strong_convexity is None else check_nonnegative("strong_convexity", self.strong_convexity)
        M = _optional_positive("smoothness", self.smoothness)
        if m is not None and M is not None and m > M:
            raise ParameterError("strong_convexity", m, f"must be <= smoothness M={M:g}")
        D = _optional_positive("diameter", self.diameter)
        c_explicit = None
        if self.contraction is not None:
            c_explicit = check_in_range("contraction", self.contraction, 0.0, 1.0)

        d = self._derived
        d.update(
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
            convex=bool(self.convex) or (m is not None),
            diameter=D,
            lr_schedule=lr_schedule,
            contraction_explicit=c_explicit,
        )
        d["contraction"], d["contraction_reason"] = self._contraction()
        d["per_step_mu"] = L / (min_b * sigma)

    def _steps_and_epochs(self, algorithm: str, l_batches: float) -> tuple[int, float]:
        if (self.steps is None) == (self.epochs is None):
            raise ParameterError("steps", self.steps, "give exactly one of steps and epochs")
        if self.steps is not None:
            steps = check_positive_int("steps", self.steps)
            return steps, steps / l_batches
        epochs = check_positive("epochs", self.epochs)
        exact = epochs * l_batches
        steps = math.ceil(exact - 1e-9)
        if algorithm in ("gd", "cgd") and abs(exact - round(exact)) > 1e-9:
            raise ParameterError("epochs", self.epochs, f"must make epochs*{l_batches} an integer number of steps")
        return max(1, steps), epochs

    def _lr_schedule(self, steps: int) -> tuple[float, ...] | None:
        if isinstance(self.lr, (int, float)) and not isinstance(self.lr, bool):
            check_positive("lr", self.lr)
            return None
        try:
            schedule = tuple(check_positive("lr", v) for v in self.lr)  # type: ignore[union-attr]
        except TypeError:
            raise ParameterError("lr", self.lr, "must be a positive number or a sequence of them") from None
        if len(schedule) != steps:
            raise ParameterError("lr", f"<sequence of {len(schedule)}>", f"schedule must have one value per step ({steps})")
        return schedule

    def _contraction(self) -> tuple[float | None, str]:
        """Contraction c of one gradient step (docs/theorems.md 0): c = max(|1-eta m|, |1-eta M|)."""
        d = self._derived
        if d["contraction_explicit"] is not None:
            return d["contraction_explicit"], "declared with contraction"
        m, M = d["strong_convexity"], d["smoothness"]
        if M is None:
            return None, "no smoothness M declared"
        etas = d["lr_schedule"] or (float(self.lr),)  # type: ignore[arg-type]
        eta, eta_min = max(etas), min(etas)
        if m is not None and m > 0:
            if eta >= 2 / M:
                return None, f"lr={eta:g} >= 2/M={2 / M:g}: a gradient step is not a contraction"
            # worst step of a schedule: |1 - lr m| is largest at the smallest lr, |1 - lr M| at the largest
            return max(abs(1 - eta_min * m), abs(1 - eta * M)), "c = max(|1 - lr m|, |1 - lr M|)"
        if d["convex"]:
            if eta > 2 / M:
                return None, f"lr={eta:g} > 2/M={2 / M:g}: a gradient step is not non-expansive"
            return 1.0, "convex and lr <= 2/M: non-expansive (c = 1)"
        return None, "neither strong convexity nor convexity declared"

    # ------------------------------------------------------------------ derived quantities
    # Canonical short names (docs/theorems.md 0).  The constructor's inputs keep their long names; these
    # properties are the values every bound must use.
    @property
    def T(self) -> int:
        """Number of noisy steps."""
        return int(self._derived["steps"])

    @property
    def E(self) -> float:
        """Epochs (T / l)."""
        return float(self._derived["epochs"])

    @property
    def uses(self) -> int:
        """Worst-case number of steps that touch one example under cyclic batches: ceil(T / l)."""
        return math.ceil(self.T / self.l - 1e-9)

    @property
    def l(self) -> float:
        """Batches per epoch: 1 (gd), ceil(n/b) (cgd, shuffle), n/b (poisson, uniform)."""
        return self._derived["batches_per_epoch"]

    @property
    def b(self) -> int:
        """Batch size (n for gd; the expected size for Poisson sampling)."""
        return int(self._derived["batch_size"])

    @property
    def b_min(self) -> int:
        """Smallest batch of the cyclic partition (sets the per-step sensitivity)."""
        return int(self._derived["min_batch_size"])

    @property
    def p(self) -> float:
        """Sampling rate b/n."""
        return float(self._derived["sampling_rate"])

    @property
    def sigma(self) -> float:
        """Std of the Gaussian noise on the averaged gradient."""
        return float(self._derived["noise_std"])

    @property
    def z(self) -> float | None:
        """Opacus noise multiplier sigma*b/C (None without a clip norm)."""
        return self._derived["noise_multiplier"]

    @property
    def L(self) -> float:
        """Gradient sensitivity under the run's adjacency (:data:`SENSITIVITY_MEANING`).

        Replace-one: a bound on the gradient difference of ANY two possible examples (2C from a
        clip norm C); add/remove (Poisson only): a bound on one example's gradient norm (C).
        """
        return float(self._derived["sensitivity"])

    @property
    def m(self) -> float | None:
        return self._derived["strong_convexity"]

    @property
    def M(self) -> float | None:
        return self._derived["smoothness"]

    @property
    def D(self) -> float | None:
        return self._derived["diameter"]

    @property
    def is_convex(self) -> bool:
        return bool(self._derived["convex"])

    @property
    def c(self) -> float | None:
        """Contraction factor of one gradient step, or None when no geometry makes it <= 1."""
        return self._derived["contraction"]

    @property
    def contraction_note(self) -> str:
        return str(self._derived["contraction_reason"])

    @property
    def sampling_scheme(self) -> str | None:
        return self._derived["sampling"]

    @property
    def per_step_mu(self) -> float:
        """GDP parameter of one step that uses the differing example: L / (b_min sigma)."""
        return float(self._derived["per_step_mu"])

    @property
    def lr_schedule(self) -> tuple[float, ...]:
        """Per-step learning rates (length T)."""
        s = self._derived["lr_schedule"]
        return s if s is not None else (float(self.lr),) * self.T  # type: ignore[arg-type]

    @property
    def constant_lr(self) -> bool:
        s = self._derived["lr_schedule"]
        return s is None or max(s) == min(s)

    @property
    def eta(self) -> float:
        """The constant learning rate; raises NotApplicable for a schedule."""
        if not self.constant_lr:
            raise NotApplicable("needs a constant learning rate; the run has a schedule")
        s = self._derived["lr_schedule"]
        return float(s[0]) if s is not None else float(self.lr)  # type: ignore[arg-type]

    def setting(self) -> dict[str, Any]:
        """Every canonical and derived quantity, JSON-serialisable (the ``setting`` of a report)."""
        d = self._derived
        keys = (
            "algorithm", "n", "batch_size", "min_batch_size", "batches_per_epoch", "steps", "epochs",
            "sampling", "sampling_rate", "adjacency", "noise_std", "noise_multiplier", "clip",
            "sensitivity", "strong_convexity", "smoothness", "convex", "diameter", "contraction",
            "per_step_mu",
        )
        out: dict[str, Any] = {k: d[k] for k in keys}
        out["sensitivity_meaning"] = SENSITIVITY_MEANING[d["adjacency"]]
        out["lr"] = list(d["lr_schedule"]) if d["lr_schedule"] is not None and not self.constant_lr else (
            d["lr_schedule"][0] if d["lr_schedule"] is not None else float(self.lr)  # type: ignore[arg-type]
        )
        out["contraction_note"] = d["contraction_reason"]
        return out

    def replace(self, **changes: Any) -> Run:
        """A copy with some inputs changed (re-validated)."""
        fields = {
            k: getattr(self, k)
            for k in (
                "algorithm", "n", "lr", "batch_size", "steps", "epochs", "noise_std", "noise_multiplier",
                "clip", "sensitivity", "strong_convexity", "smoothness", "convex", "contraction",
                "diameter", "sampling", "adjacency",
            )
        }
        if "steps" in changes:
            fields["epochs"] = None
        if "epochs" in changes:
            fields["steps"] = None
        if "noise_std" in changes:
            fields["noise_multiplier"] = None
        if "noise_multiplier" in changes:
            fields["noise_std"] = None
        fields.update(changes)
        return Run(**fields)
