"""Batch samplers whose semantics are exactly the accountant's (``lastiterate.run``).

=============  ==========================================================  ==================
scheme         batch at step t                                             normaliser (1/.)
=============  ==========================================================  ==================
full batch     all n examples (``algorithm="gd"``)                         n
cyclic         ``numpy.array_split(order, l)[t mod l]``, l = ceil(n/b),    realised size
               one FIXED partition for the whole run (``algorithm="cgd"``)  (>= b_min = n // l)
shuffle        a fresh uniformly random permutation every epoch, cut the    realised size
               same way into l = ceil(n/b) batches                          (>= b_min)
uniform        a uniformly random subset of exactly b examples, drawn      b
               independently at every step
poisson        every example independently with probability p = b/n       b (FIXED expected
                                                                            size, not realised)
=============  ==========================================================  ==================

The balanced partition of ``numpy.array_split`` has ``n mod l`` batches of size ``n//l + 1`` and
the rest of size ``n//l``, so the smallest batch is ``b_min = n // l`` -- exactly
:attr:`Run.b_min <lastiterate.run.Run.b_min>`, which sets the per-step sensitivity ``L/(b_min
sigma)``.  Averaging a cyclic batch over its realised size therefore never exceeds what the
accountant charges.

Randomness is SECRET and STATELESS (:mod:`lastiterate.train.randomness`): by default fresh OS
entropy for every sampler (``seed=None``); a seed (an int) gives reproducible batches, and a
:class:`~lastiterate.train.randomness.Randomness` shares one root with the trainer's noise.  The
batch of step t is a pure function of ``(root, t)`` (``numpy.random.SeedSequence([seed, stream,
t])`` when seeded; the shuffle permutation of epoch e of ``(root, e)``; a keyed CSPRNG in secure
mode), so a run resumed from a checkpoint at step t replays exactly the batches of an
uninterrupted run.  The partition of the cyclic scheme is data-independent: the identity order, or
one permutation drawn from the root (``permute=True``, the default) -- any fixed partition is
covered by the theorems.  Amplification by sampling credits batches the adversary cannot predict:
a public seed forfeits it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lastiterate.errors import ParameterError, check_positive_int
from lastiterate.run import MAX_COUNT
from lastiterate.train.randomness import Randomness

SCHEMES = ("full", "cyclic", "shuffle", "uniform", "poisson")

_STREAM = {"cyclic": 11, "shuffle": 12, "uniform": 13, "poisson": 14}


def balanced_partition(order: np.ndarray, n_batches: int) -> list[np.ndarray]:
    """``numpy.array_split`` of ``order`` into ``n_batches`` balanced batches (the
    accountant's partition).

    Args:
        order: the example indices in the order they are cut.
        n_batches: the number of batches (sizes differ by at most one).

    Returns:
        The batches, as int64 index arrays.
    """
    return [
        np.asarray(b, dtype=np.int64)
        for b in np.array_split(np.asarray(order, dtype=np.int64), n_batches)
    ]


@dataclass(frozen=True)
class Sampler:
    """Batches for one run.  Build with :func:`make_sampler`.

    Attributes:
        scheme: ``full`` (gd), ``cyclic`` (cgd), ``shuffle``, ``uniform`` or ``poisson`` (sgd).
        n: the number of examples.
        batch_size: b (the expected size for Poisson; n for full batch).
        seed: None (default) draws fresh secret randomness; an int gives reproducible batches; a
            :class:`~lastiterate.train.randomness.Randomness` is used as is (the trainer's).
        permute: cyclic only: partition a random permutation (default) or ``0..n-1`` in order.

    Raises:
        ParameterError: an unknown scheme, n or batch_size not a positive integer, b > n, or
            b != n for full batch.
    """

    scheme: str
    n: int
    batch_size: int
    seed: int | Randomness | None = None
    permute: bool = True

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ParameterError("sampling", self.scheme, "must be one of " + ", ".join(SCHEMES))
        check_positive_int("n", self.n)
        b = check_positive_int("batch_size", self.batch_size)
        if b > self.n:
            raise ParameterError("batch_size", b, f"must be an integer in [1, n={self.n}]")
        if self.scheme == "full" and b != self.n:
            raise ParameterError("batch_size", b, f"must equal n={self.n} for full-batch gd")
        object.__setattr__(self, "_randomness", Randomness.of(self.seed))
        if self.scheme == "cyclic":
            order = (
                self.randomness.permutation(_STREAM["cyclic"], (), self.n)
                if self.permute
                else np.arange(self.n)
            )
            object.__setattr__(self, "_partition", balanced_partition(order, int(self.l)))

    @property
    def randomness(self) -> Randomness:
        """The root of this sampler's batches (secret unless seeded)."""
        return self._randomness  # type: ignore[attr-defined,no-any-return]

    # ---------------------------------------------------------------- run semantics
    @property
    def algorithm(self) -> str:
        """The Run's ``algorithm``: gd (full batch), cgd (cyclic) or sgd."""
        return {"full": "gd", "cyclic": "cgd"}.get(self.scheme, "sgd")

    @property
    def sampling(self) -> str | None:
        """The Run's ``sampling`` (None for gd and cgd)."""
        return self.scheme if self.scheme in ("shuffle", "uniform", "poisson") else None

    @property
    def l(self) -> float:
        """Batches per epoch, as :attr:`Run.l`: 1, ceil(n/b), or n/b for uniform/Poisson."""
        if self.scheme == "full":
            return 1
        if self.scheme in ("cyclic", "shuffle"):
            return math.ceil(self.n / self.batch_size)
        return self.n / self.batch_size

    @property
    def b_min(self) -> int:
        """Smallest batch (the per-step sensitivity is L / (b_min sigma))."""
        if self.scheme == "full":
            return self.n
        if self.scheme in ("cyclic", "shuffle"):
            return self.n // int(self.l)
        return self.batch_size

    @property
    def rate(self) -> float:
        """Sampling rate p = b/n."""
        return self.batch_size / self.n

    def run_kwargs(self) -> dict[str, object]:
        """The sampling part of the :class:`~lastiterate.run.Run` describing these batches.

        Returns:
            ``algorithm``, and ``batch_size`` and ``sampling`` where they apply.
        """
        kw: dict[str, object] = {"algorithm": self.algorithm}
        if self.scheme != "full":
            kw["batch_size"] = self.batch_size
        if self.sampling is not None:
            kw["sampling"] = self.sampling
        return kw

    def steps_for_epochs(self, epochs: float) -> int:
        """Number of steps of ``epochs`` epochs (``Run``'s rule: ceil(E * l)).

        Args:
            epochs: the number of epochs E (may be fractional).

        Returns:
            ceil(E * l), at least 1.

        Raises:
            ParameterError: E * l exceeds the Run's step range (``epochs=1e308`` overflowed to an
                infinite step count).
        """
        steps = epochs * self.l
        if not steps <= MAX_COUNT:
            raise ParameterError(
                "epochs", epochs, f"gives {steps:.4g} steps: at most {MAX_COUNT:g} are accepted"
            )
        return max(1, math.ceil(steps - 1e-9))

    def epoch_ends(self, steps: int) -> list[int]:
        """Step counts at which an epoch ends (the last one is ``steps``).

        Args:
            steps: the total number of steps T.

        Returns:
            The increasing step counts ceil(e * l) below T, then T.
        """
        ends = []
        e = 1
        while True:
            s = math.ceil(e * self.l - 1e-9)
            if s >= steps:
                ends.append(steps)
                return ends
            ends.append(s)
            e += 1

    # ---------------------------------------------------------------- batches
    @property
    def partition(self) -> list[np.ndarray]:
        """The fixed cyclic partition (cyclic scheme only)."""
        if self.scheme != "cyclic":
            raise ParameterError("sampling", self.scheme, "has no fixed partition (only cyclic)")
        return self._partition  # type: ignore[attr-defined,no-any-return]

    def batch(self, t: int) -> np.ndarray:
        """Indices of the batch used at step ``t`` (0-based).

        Args:
            t: the step, from 0.

        Returns:
            The int64 indices of the examples in the batch (a fresh draw of the scheme's
            randomness for step t: the same t gives the same batch).
        """
        n, b = self.n, self.batch_size
        if self.scheme == "full":
            return np.arange(n, dtype=np.int64)
        if self.scheme == "cyclic":
            return self._partition[t % len(self._partition)]  # type: ignore[attr-defined,no-any-return]
        if self.scheme == "shuffle":
            l = int(self.l)
            epoch, k = divmod(t, l)
            cached = getattr(self, "_epoch_cache", None)
            if cached is None or cached[0] != epoch:
                perm = self.randomness.permutation(_STREAM["shuffle"], (epoch,), n)
                cached = (epoch, balanced_partition(perm, l))
                object.__setattr__(self, "_epoch_cache", cached)
            return cached[1][k]
        if self.scheme == "uniform":
            return self.randomness.subset(_STREAM["uniform"], (t,), n, b)
        # poisson: independent inclusion with rate p = b/n
        return self.randomness.poisson_subset(_STREAM["poisson"], (t,), n, b / n)

    def normaliser(self, batch: np.ndarray) -> int:
        """The denominator of the averaged gradient: b (uniform, Poisson: fixed), else
        the realised size.

        Args:
            batch: the indices of the batch.

        Returns:
            b for uniform and Poisson sampling, else ``len(batch)``.
        """
        if self.scheme in ("uniform", "poisson"):
            return self.batch_size
        return len(batch)


def make_sampler(
    algorithm: str,
    n: int,
    batch_size: int | None = None,
    sampling: str | None = None,
    *,
    seed: int | Randomness | None = None,
    permute: bool = True,
) -> Sampler:
    """The sampler for a Run-style description (``algorithm`` gd/cgd/sgd, ``sampling`` for sgd).

    Args:
        algorithm: gd (full batch), cgd (cyclic partition) or sgd.
        n: the number of examples.
        batch_size: b; required for cgd and sgd (gd: n).
        sampling: sgd only: poisson, uniform or shuffle.
        seed: None (default) for fresh secret randomness, an int for reproducible batches, or the
            trainer's :class:`~lastiterate.train.randomness.Randomness`.
        permute: cgd only: partition a random permutation (default) or the examples in order.

    Returns:
        The :class:`Sampler`.

    Raises:
        ParameterError: an unknown algorithm, a missing batch size or sampling, sampling given
            for cgd, or a batch size outside [1, n].
    """
    if algorithm == "gd":
        return Sampler("full", n, n if batch_size is None else batch_size, seed)
    if batch_size is None:
        raise ParameterError(
            "batch_size", None, f"is required for {algorithm}: an integer in [1, n={n}]"
        )
    if algorithm == "cgd":
        if sampling is not None:
            raise ParameterError("sampling", sampling, "only applies to sgd, not cgd")
        return Sampler("cyclic", n, batch_size, seed, permute)
    if algorithm == "sgd":
        if sampling not in ("poisson", "uniform", "shuffle"):
            raise ParameterError(
                "sampling", sampling, "is required for sgd: one of poisson, uniform, shuffle"
            )
        return Sampler(sampling, n, batch_size, seed)
    raise ParameterError("algorithm", algorithm, "must be one of gd, cgd, sgd")
