"""The secret randomness of a training run: noise and batch selection.

Every guarantee of :mod:`lastiterate` assumes that the Gaussian noise and the batches are random
and UNKNOWN to the adversary.  Anyone who knows the generator's state replays training on each
candidate dataset and compares with the released model: the mechanism is then deterministic and
its privacy loss is infinite.  Hence:

* **Default (no seed): secret, fresh randomness.**  :meth:`Randomness.fresh` draws 128 bits from the
  operating system's entropy (:mod:`secrets`, i.e. ``os.urandom``) for every run.  Nothing derived
  from it is ever written to a published output (report, JSON, ledger); it is kept only in the
  owner-only checkpoint a resume needs (:meth:`Randomness.checkpoint_state`).
* **Seeded** (``seed=`` / ``--seed``): exact reproducibility for experiments, tests and papers.  The
  guarantee then holds only while the seed stays secret and is never reused on other data (a seed
  reused on two versions of a dataset makes the difference of the two models noise-free): the
  trainer warns (:class:`SeededRunWarning`, :data:`SEED_WARNING`) and the report says so.
* **Secure** (``secure=True`` / ``--secure``): every random bit (noise and batches) comes from a
  cryptographically secure generator -- SHAKE-256 (FIPS 202) keyed with 256 secret bits, as an
  extendable-output PRF of (key, stream, step) -- and every Gaussian is the floating-point-safe
  sum of 2n = 4 Box-Muller samples divided by sqrt(2n) = 2 (Holohan and Braghin, "Secure random
  sampling in differential privacy", ESORICS 2021, Sec. 5.1; the construction of Opacus'
  ``secure_mode``, which is also n = 2).  It defeats the floating-point attacks on DP noise
  (Mironov, CCS 2012; Holohan and Braghin 2021) that recover a single sample's uniform inputs from
  its bits.  The default mode instead uses statistical generators (numpy PCG64 for the batches,
  torch's Mersenne Twister for the noise) keyed with the secret entropy: unpredictable without
  the key, but not cryptographically secure and not protected against those attacks.

Randomness is STATELESS in both modes: the draw of step ``t`` in stream ``s`` is a pure function of
(root, s, t), so a run resumed from a checkpoint at step t replays exactly the batches and noise
of an uninterrupted run (see :mod:`lastiterate.train.sampling`).  A seeded run in the default mode
draws exactly what earlier versions drew for the same seed (``SeedSequence([seed, stream, t])``).
"""

from __future__ import annotations

import hashlib
import math
import secrets
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from lastiterate.errors import ParameterError

#: The text of the warning of a seeded run (stderr on the CLI,
#: ``randomness["warning"]`` in reports).
SEED_WARNING = (
    "seeded run: its privacy guarantee holds only while the seed stays secret and is never "
    "reused on other data (whoever knows the seed replays the noise and the batches); omit the "
    "seed for fresh secret randomness"
)

STATE_FORMAT = "lastiterate-randomness/1"

#: Holohan and Braghin (2021), Sec. 5.1: each secure Gaussian is the sum of 2n standard
#: samples / sqrt(2n).
SECURE_GAUSSIAN_TERMS = 4

_FRESH_BYTES = {
    False: 16,
    True: 32,
}  # 128 secret bits for the statistical mode, 256 for the CSPRNG key
_DOMAIN = b"lastiterate/randomness/v1"


class SeededRunWarning(UserWarning):
    """A run used a fixed seed: its guarantee needs the seed to stay secret and never be reused."""


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or int(seed) < 0:
        raise ParameterError(
            "seed", seed, "must be an integer >= 0, or None for fresh secret randomness"
        )
    return int(seed)


class Randomness:
    """The root of a run's noise and batch randomness: a secret from the OS, or a seed.

    Build with :meth:`fresh` (default: OS entropy), :meth:`from_seed` or :meth:`of`.  ``repr``,
    :meth:`describe` and :meth:`fingerprint` never contain the secret; only
    :meth:`checkpoint_state` does (for the owner-only checkpoint).

    Args:
        root: the secret root bytes (None when seeded).
        seed: the seed (None for a secret root); exactly one of ``root`` and ``seed`` is given.
        secure: draw from the keyed SHAKE-256 CSPRNG with floating-point-safe Gaussians
            (default False: numpy PCG64 and torch MT19937 keyed per step).

    Raises:
        ParameterError: both or neither of ``root`` and ``seed`` are given.
    """

    __slots__ = ("_root", "secure", "seed")

    def __init__(self, root: bytes | None, *, seed: int | None, secure: bool) -> None:
        if (root is None) == (seed is None):
            raise ParameterError(
                "randomness", "<root>", "give exactly one of a secret root and a seed"
            )
        self._root = root
        self.seed = seed
        self.secure = bool(secure)

    # ---------------------------------------------------------------- construction
    @classmethod
    def fresh(cls, secure: bool = False) -> Randomness:
        """Fresh secret randomness from the operating system (``secrets.token_bytes``).

        Args:
            secure: CSPRNG mode (256 secret bits) instead of the statistical one (128 bits).

        Returns:
            The new :class:`Randomness`.
        """
        return cls(secrets.token_bytes(_FRESH_BYTES[bool(secure)]), seed=None, secure=secure)

    @classmethod
    def from_seed(cls, seed: int, secure: bool = False) -> Randomness:
        """Reproducible randomness from ``seed`` (an integer >= 0).  Secret only
        while the seed is.

        Args:
            seed: an integer >= 0.
            secure: CSPRNG mode keyed by the seed.

        Returns:
            The seeded :class:`Randomness`.

        Raises:
            ParameterError: the seed is not an integer >= 0.
        """
        return cls(None, seed=_check_seed(seed), secure=secure)

    @classmethod
    def of(cls, seed: int | Randomness | None, secure: bool = False) -> Randomness:
        """``seed`` as a :class:`Randomness`: None -> :meth:`fresh`, an int -> :meth:`from_seed`.

        Args:
            seed: None, an integer >= 0, or a :class:`Randomness` (returned as is).
            secure: the mode of a new :class:`Randomness`.

        Returns:
            The :class:`Randomness`.

        Raises:
            ParameterError: the seed is not an integer >= 0.
        """
        if isinstance(seed, Randomness):
            return seed
        return cls.fresh(secure) if seed is None else cls.from_seed(seed, secure)

    @property
    def seeded(self) -> bool:
        """Whether the randomness comes from a seed (secret only while the seed is)."""
        return self.seed is not None

    def __repr__(self) -> str:  # never the secret
        src = "seed" if self.seeded else "os-entropy"
        return f"Randomness(source={src!r}, secure={self.secure})"

    # ---------------------------------------------------------------- what may be shown
    def describe(self) -> dict[str, Any]:
        """Public description for reports (no seed value, nothing derived from the secret).

        Returns:
            ``source``, ``seeded``, ``secure``, ``generator`` and the seeded-run ``warning``.
        """
        return {
            "source": "seed" if self.seeded else "os-entropy",
            "seeded": self.seeded,
            "secure": self.secure,
            "generator": (
                "SHAKE-256 keyed CSPRNG; Gaussian = sum of 4 Box-Muller samples "
                "/ 2 (Holohan-Braghin 2021)"
                if self.secure
                else "numpy PCG64 (batches) and torch MT19937 (noise), keyed per step"
            ),
            "warning": SEED_WARNING if self.seeded else None,
        }

    def fingerprint(self) -> dict[str, Any]:
        """What identifies the run for a resume without the secret: the seed (if
        any) and the mode.

        Returns:
            ``{"seed": seed or None, "secure": mode}``.
        """
        return {"seed": self.seed, "secure": self.secure}

    # ---------------------------------------------------------------- owner-only state
    def checkpoint_state(self) -> dict[str, Any]:
        """Plain JSON data a resume needs (CONTAINS THE SECRET: owner-only checkpoints only).

        Returns:
            ``format``, ``seed``, ``secure`` and the secret root in hex (``root_hex``).
        """
        return {
            "format": STATE_FORMAT,
            "seed": self.seed,
            "secure": self.secure,
            "root_hex": None if self._root is None else self._root.hex(),
        }

    @classmethod
    def from_checkpoint_state(cls, state: Any) -> Randomness:
        """Inverse of :meth:`checkpoint_state`.

        Args:
            state: the dict :meth:`checkpoint_state` returned (read back from a checkpoint).

        Returns:
            The same randomness.

        Raises:
            ParameterError: a malformed state (format, mode, seed or secret root).
        """
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise ParameterError("checkpoint", "<rng>", f"has no {STATE_FORMAT} randomness state")
        secure = state.get("secure")
        if not isinstance(secure, bool):
            raise ParameterError(
                "checkpoint", "<rng>", "randomness state: 'secure' must be true or false"
            )
        if state.get("seed") is not None:
            return cls.from_seed(state["seed"], secure)
        root_hex = state.get("root_hex")
        try:
            root = bytes.fromhex(root_hex) if isinstance(root_hex, str) else b""
        except ValueError:
            root = b""
        if len(root) != _FRESH_BYTES[secure]:
            raise ParameterError("checkpoint", "<rng>", "randomness state: malformed secret root")
        return cls(root, seed=None, secure=secure)

    # ---------------------------------------------------------------- statistical
    # generators (default mode)
    def _entropy(self) -> list[int]:
        if self.seed is not None:
            return [self.seed]
        assert self._root is not None
        return [int(w) for w in np.frombuffer(self._root, dtype="<u4")]

    def generator(self, stream: int, *keys: int) -> np.random.Generator:
        """numpy PCG64 generator of (root, stream, keys) -- ``SeedSequence([seed, stream,
        *keys])`` when seeded.

        Args:
            stream: the purpose of the draw (a fixed integer per consumer).
            *keys: the draw's keys within the stream (e.g. the step).

        Returns:
            The generator.
        """
        return np.random.default_rng(
            np.random.SeedSequence([*self._entropy(), int(stream), *(int(k) for k in keys)])
        )

    def _torch_seed(self, stream: int, t: int) -> int:
        ss = np.random.SeedSequence([*self._entropy(), int(stream), int(t)])
        return int(ss.generate_state(1, dtype=np.uint64)[0])

    # ---------------------------------------------------------------- CSPRNG (secure mode)
    def _key(self) -> bytes:
        if self._root is not None:
            return self._root
        return hashlib.shake_256(_DOMAIN + b"/seed/" + str(self.seed).encode()).digest(32)

    def random_words(self, stream: int, keys: Sequence[int], size: int) -> np.ndarray:
        """``size`` uniform 64-bit words of (key, stream, keys) from keyed SHAKE-256 (a CSPRNG).

        Args:
            stream: the purpose of the draw (a fixed integer per consumer).
            keys: the draw's keys within the stream (e.g. the step, the epoch).
            size: the number of words.

        Returns:
            The words (uint64).
        """
        msg = (
            _DOMAIN
            + self._key()
            + struct.pack(f"<{1 + len(keys)}Q", int(stream), *(int(k) for k in keys))
        )
        return np.frombuffer(hashlib.shake_256(msg).digest(8 * int(size)), dtype="<u8")

    def _secure_uniform(self, stream: int, keys: Sequence[int], size: int) -> np.ndarray:
        """Uniforms on the grid k 2^-53 of [0, 1) (53 bits of each CSPRNG word)."""
        return (self.random_words(stream, keys, size) >> np.uint64(11)).astype(
            np.float64
        ) * 2.0**-53

    def _secure_standard_normal(self, stream: int, keys: Sequence[int], size: int) -> np.ndarray:
        """Box-Muller standard normals from CSPRNG uniforms (``size`` samples)."""
        pairs = (size + 1) // 2
        u = self._secure_uniform(stream, keys, 2 * pairs)
        r = np.sqrt(-2.0 * np.log1p(-u[:pairs]))  # 1 - u in (0, 1]
        theta = 2.0 * math.pi * u[pairs:]
        return np.concatenate([r * np.cos(theta), r * np.sin(theta)])[:size]

    def secure_gaussian(
        self, stream: int, keys: Sequence[int], size: int, sigma: float
    ) -> np.ndarray:
        """N(0, sigma^2) samples safe against floating-point attacks (Holohan and
        Braghin 2021, Sec. 5.1).

        Each sample is sum_{j=1}^{2n} sigma Z_j / sqrt(2n) with 2n = :data:`SECURE_GAUSSIAN_TERMS`
        independent Box-Muller samples Z_j from the keyed CSPRNG: N(0, sigma^2) in law, and its
        floating-point value no longer reveals the inputs of one sampler call.  Like every
        floating-point sampler it is not exactly Gaussian: the uniforms have 53 bits, so each
        Box-Muller radius is at most sqrt(2 * 53 ln 2) ~ 8.6 (a tail of probability 2^-53 ~ 1.1e-16
        per sample is cut), far below any delta the accountant reports.

        Args:
            stream: the purpose of the draw (a fixed integer per consumer).
            keys: the draw's keys within the stream (e.g. the step, the epoch).
            size: the number of samples.
            sigma: the standard deviation.

        Returns:
            The samples (float64).
        """
        k = SECURE_GAUSSIAN_TERMS
        z = (sigma * self._secure_standard_normal(stream, keys, k * size)).reshape(k, size)
        return z.sum(axis=0) / math.sqrt(k)

    # ---------------------------------------------------------------- what the
    # trainer and sampler draw
    def gaussian(self, stream: int, t: int, size: int, sigma: float, dtype: Any) -> Any:
        """``size`` i.i.d. N(0, sigma^2) values (a 1-D torch tensor of ``dtype``) for step ``t``.

        Args:
            stream: the purpose of the draw (a fixed integer per consumer).
            t: the step.
            size: the number of values.
            sigma: the standard deviation.
            dtype: the torch dtype of the result.

        Returns:
            The noise tensor (secure-mode samples when :attr:`secure`).
        """
        # lazy: torch (~1.5 s) only for the trainer's noise; samplers and audits use numpy
        import torch

        if self.secure:
            return torch.from_numpy(self.secure_gaussian(stream, (t,), size, sigma)).to(dtype)
        g = torch.Generator()
        g.manual_seed(self._torch_seed(stream, t))
        return torch.randn(size, generator=g, dtype=dtype) * sigma

    def permutation(self, stream: int, keys: Sequence[int], n: int) -> np.ndarray:
        """A uniformly random permutation of range(n).

        Args:
            stream: the purpose of the draw (a fixed integer per consumer).
            keys: the draw's keys within the stream (e.g. the step, the epoch).
            n: the number of elements.

        Returns:
            The permutation (int64).
        """
        if self.secure:  # sort by 64-bit CSPRNG keys (ties have probability < n^2 / 2^65)
            return np.argsort(self.random_words(stream, keys, n), kind="stable").astype(np.int64)
        return self.generator(stream, *keys).permutation(n).astype(np.int64)

    def subset(self, stream: int, keys: Sequence[int], n: int, b: int) -> np.ndarray:
        """A uniformly random subset of exactly b of range(n), sorted.

        Args:
            stream: the purpose of the draw (a fixed integer per consumer).
            keys: the draw's keys within the stream (e.g. the step, the epoch).
            n: the number of elements.
            b: the subset size.

        Returns:
            The sorted indices (int64).
        """
        if self.secure:
            return np.sort(self.permutation(stream, keys, n)[:b]).astype(np.int64)
        return np.sort(self.generator(stream, *keys).choice(n, size=b, replace=False)).astype(
            np.int64
        )

    def poisson_subset(self, stream: int, keys: Sequence[int], n: int, p: float) -> np.ndarray:
        """Every index of range(n) independently with probability p.

        Args:
            stream: the purpose of the draw (a fixed integer per consumer).
            keys: the draw's keys within the stream (e.g. the step, the epoch).
            n: the number of elements.
            p: the inclusion probability.

        Returns:
            The included indices, increasing (int64).
        """
        if p >= 1.0:  # u < 1 always: every index, whatever the draw (no draw needed)
            return np.arange(n, dtype=np.int64)
        u = (
            self._secure_uniform(stream, keys, n)
            if self.secure
            else self.generator(stream, *keys).random(n)
        )
        return np.flatnonzero(u < p).astype(np.int64)


__all__ = ["SECURE_GAUSSIAN_TERMS", "SEED_WARNING", "Randomness", "SeededRunWarning"]
