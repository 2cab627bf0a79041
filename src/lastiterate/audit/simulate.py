"""Vectorised Monte-Carlo simulators of NoisyGD / NoisyCGD / NoisySGD on worst-case loss pairs.

The simulated algorithm is the canonical iteration of docs/theorems.md section 0, for N independent
chains at once (leading axis):

    x_{t+1} = Proj_K( x_t - eta_t * ( (1/norm_t) * sum_{i in B_t} g_i(x_t) + Z_t ) ),  Z_t ~ N(0,
    sigma^2 I)

with the batch conventions of :class:`lastiterate.run.Run`: full batch (norm = n); cyclic batches
from ``numpy.array_split`` (norm = |B_j|); uniform fixed-size batches (norm = b); Poisson batches
(norm = the FIXED expected size b, the realised size varies); shuffled batches (a fresh permutation
per epoch, cut like the cyclic partition).

Datasets (a world pair, :class:`ChainSpec`): n examples, all with the loss
``(kappa/2) ||x||^2`` (``kappa = 0``: the zero loss, i.e. a linear problem); in world D' the last
example's loss is replaced so that its gradient changes by the CONSTANT vector ``-L u``
(``||u|| = 1``): for a quadratic this is moving its centre, for a linear loss it is the AT22
function f'(x) = -L <u, x>.  So world D' is pushed along +u by eta*L/norm whenever the differing
example is in the batch.  ``offset`` adds ``offset * u`` to the differing example's gradient in
BOTH worlds (D: ``offset``, D': ``offset - L``): ``offset = L/2`` is the antipodal pair
``g = +C u``, ``g' = -C u`` of clipped gradients (C = L/2), ``offset = 0`` the pair ``g = 0``,
``g' = -L u`` that only the sensitivity (difference) bound L constrains.  These are the extremal
instances of the last-iterate theorems:

* kappa = m > 0, no projection: Bok-Su-Altschuler Thm 4.2 / 4.5 are exact (Gaussian iterates);
* kappa = 0, no projection: no amplification, mu = mu_0 sqrt(T);
* kappa = 0, projection onto [-D/2, D/2]: the Altschuler-Talwar projected random walk.

Only the inclusion of the differing example (and, for Poisson batches, the realised batch size)
matters, so the simulation draws exactly those (Bernoulli / Binomial) instead of whole batches:
this is the exact law of the iteration for this dataset, at O(N) cost per step.

Randomness: ``simulate_pair(spec, N, seed)`` uses independent streams for the two worlds
(``SeedSequence(seed).spawn(2)``); ``coupled=True`` uses the SAME stream in both worlds (identical
noise and batches), for deterministic sensitivity checks (:func:`coupled_trace`).

Note: the library's training code (``lastiterate.train``) is PyTorch; these simulators are an
independent numpy implementation of the same update, so that a Monte-Carlo audit never needs torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

__all__ = [
    "ChainSpec",
    "CoupledTrace",
    "coupled_trace",
    "simulate",
    "simulate_pair",
    "spec_from_run",
]


@dataclass(frozen=True)
class ChainSpec:
    """A world pair and the algorithm run on it (see the module docstring)."""

    algorithm: str  # "gd", "cgd", "sgd"
    n: int
    T: int
    lr: float | tuple[float, ...]
    sigma: float
    L: float
    curvature: float | tuple[float, ...] = 0.0
    batch_size: int | None = None
    sampling: str | None = None  # sgd: "uniform", "poisson", "shuffle"
    diameter: float | None = None  # projection onto the ball of this diameter centred at 0
    x0: float | tuple[float, ...] = 0.0
    position: int | None = None  # cgd: batch index of the differing example (default: last batch)
    direction: tuple[float, ...] | None = None  # u (default e_1)
    dim: int = 1
    offset: float = 0.0  # the differing example's own gradient along u in world D (D': offset - L)

    def __post_init__(self) -> None:
        if self.algorithm not in ("gd", "cgd", "sgd"):
            raise ValueError(f"algorithm={self.algorithm!r}")
        if self.algorithm == "sgd" and self.sampling not in ("uniform", "poisson", "shuffle"):
            raise ValueError("sgd needs sampling in uniform, poisson, shuffle")
        if self.algorithm != "gd" and not self.batch_size:
            raise ValueError(f"{self.algorithm} needs batch_size")
        if self.sigma < 0 or self.L < 0 or self.T < 1 or self.n < 1:
            raise ValueError("need sigma >= 0, L >= 0, T >= 1, n >= 1")

    # ---------------------------------------------------------------- derived
    @property
    def b(self) -> int:
        return self.n if self.algorithm == "gd" else int(self.batch_size)  # type: ignore[arg-type]

    @property
    def etas(self) -> np.ndarray:
        if np.ndim(self.lr) == 0:
            return np.full(self.T, float(self.lr))  # type: ignore[arg-type]
        e = np.asarray(self.lr, dtype=float)
        if e.size != self.T:
            raise ValueError("lr schedule must have T values")
        return e

    @property
    def u(self) -> np.ndarray:
        if self.direction is None:
            v = np.zeros(self.dim)
            v[0] = 1.0
            return v
        v = np.asarray(self.direction, dtype=float)
        if v.size != self.dim:
            raise ValueError("direction must have dim entries")
        return v / np.linalg.norm(v)

    @property
    def kappa(self) -> np.ndarray:
        return np.broadcast_to(np.asarray(self.curvature, dtype=float), (self.dim,)).copy()

    def partition_sizes(self) -> np.ndarray:
        """Batch sizes of the cyclic / shuffled partition (numpy.array_split, as in Run)."""
        l = math.ceil(self.n / self.b)
        return np.array([len(a) for a in np.array_split(np.arange(self.n), l)])

    def with_(self, **changes: Any) -> ChainSpec:
        return replace(self, **changes)


def spec_from_run(
    run: Any,
    *,
    loss: str = "auto",
    position: int | None = None,
    dim: int = 1,
    offset: float = 0.0,
) -> ChainSpec:
    """The worst-case world pair for a :class:`lastiterate.run.Run`.

    ``loss``: "quadratic" (curvature = whichever of m, M gives the largest |1 - eta kappa|, or
    (1 - c)/eta from a declared contraction c), "linear" (curvature 0), or "auto" (quadratic when
    the run declares strong convexity or c < 1, linear otherwise).  The projection is the run's
    diameter.
    ``offset``: the differing example's own gradient (see :class:`ChainSpec`); ``run.L / 2`` gives
    the antipodal clipped pair.
    """
    etas = np.asarray(run.lr_schedule, dtype=float)
    eta_max = float(etas.max())
    strongly = (run.m is not None and run.m > 0) or (run.c is not None and run.c < 1)
    if loss == "auto":
        loss = "quadratic" if strongly else "linear"
    if loss == "quadratic":
        if run.m is not None and run.m > 0:
            cands = [run.m] + ([run.M] if run.M is not None else [])
            kappa = max(cands, key=lambda k: abs(1 - eta_max * k))
        elif run.c is not None and run.c < 1:
            kappa = (1 - run.c) / eta_max
        else:
            raise ValueError(
                "a quadratic scenario needs strong convexity m > 0 or a contraction c < 1"
            )
    elif loss == "linear":
        kappa = 0.0
    else:
        raise ValueError(f"loss={loss!r} must be quadratic, linear or auto")
    lr: float | tuple[float, ...] = (
        float(etas[0]) if run.constant_lr else tuple(float(e) for e in etas)
    )
    return ChainSpec(
        algorithm=run.algorithm,
        n=run.n,
        T=run.T,
        lr=lr,
        sigma=run.sigma,
        L=run.L,
        curvature=kappa,
        batch_size=None if run.algorithm == "gd" else run.b,
        sampling=run.sampling_scheme,
        diameter=run.D,
        position=position,
        dim=dim,
        offset=offset,
    )


# ---------------------------------------------------------------------- the update
def _project(x: np.ndarray, diameter: float | None) -> np.ndarray:
    if diameter is None:
        return x
    r = diameter / 2
    if x.shape[1] == 1:
        return np.clip(x, -r, r, out=x)
    nrm = np.linalg.norm(x, axis=1, keepdims=True)
    scale = np.minimum(1.0, r / np.maximum(nrm, 1e-300))
    x *= scale
    return x


def _kicks(spec: ChainSpec, world: int, N: int, rng: np.random.Generator) -> Any:
    """A generator of (inclusion weight w_t (N,), gradient scale s_t (N,) or scalar) per step:
    batch-averaged gradient = s_t * kappa * x - w_t * L * u * [world == 1]."""
    T, n, b = spec.T, spec.n, spec.b
    if spec.algorithm == "gd":
        for _ in range(T):
            yield 1.0 / n, 1.0
        return
    sizes = spec.partition_sizes()
    l = sizes.size
    if spec.algorithm == "cgd":
        pos = l - 1 if spec.position is None else spec.position
        if not (0 <= pos < l):
            raise ValueError(f"position={pos} must be in [0, {l})")
        for t in range(T):
            yield (1.0 / sizes[pos] if t % l == pos else 0.0), 1.0
        return
    p = b / n
    if spec.sampling == "uniform":
        for _ in range(T):
            inc = rng.random(N) < p
            yield inc / b, 1.0
    elif spec.sampling == "poisson":
        for _ in range(T):
            inc = rng.random(N) < p
            size = inc + rng.binomial(n - 1, p, size=N)
            yield inc / b, size / b
    else:  # shuffle: the differing example's batch is drawn once per epoch, w.p. |B_j|/n
        probs = sizes / n
        batch = None
        for t in range(T):
            if t % l == 0:
                batch = rng.choice(l, size=N, p=probs)
            j = t % l
            yield np.where(batch == j, 1.0 / sizes[j], 0.0), 1.0


def simulate(
    spec: ChainSpec, world: int, N: int, rng: np.random.Generator | int | None = None
) -> np.ndarray:
    """Final iterates x_T of N independent chains in world 0 (D) or 1 (D'); shape (N, dim)."""
    if world not in (0, 1):
        raise ValueError("world must be 0 (D) or 1 (D')")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    d = spec.dim
    x = np.empty((N, d))
    x[:] = np.broadcast_to(np.asarray(spec.x0, dtype=float), (d,))
    kappa, u, etas = spec.kappa, spec.u, spec.etas
    # the differing example's constant gradient part: offset u (D) or (offset - L) u (D'); the step
    # subtracts eta * w * (that), i.e. adds eta * w * shift
    shift = ((spec.L if world == 1 else 0.0) - spec.offset) * u
    linear = not np.any(kappa)
    for t, (w, s) in enumerate(_kicks(spec, world, N, rng)):
        eta = etas[t]
        z = rng.standard_normal((N, d))
        # x - eta * (grad + Z) with grad = s kappa x - w L u [world D']
        if not linear:
            if np.ndim(s):  # Poisson: the realised batch size scales the curvature term
                x -= eta * (np.asarray(s, dtype=float)[:, None] * kappa) * x
            else:
                x -= (eta * s) * kappa * x
        if np.any(shift):
            if np.ndim(w):
                x += eta * np.multiply.outer(w, shift)
            elif w:
                x += eta * w * shift
        x -= (eta * spec.sigma) * z
        _project(x, spec.diameter)
    return x


def simulate_pair(
    spec: ChainSpec,
    N: int,
    seed: int = 0,
    *,
    coupled: bool = False,
    spec_prime: ChainSpec | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(x_T under D, x_T under D'), N chains each, deterministic in ``seed``.

    ``coupled``: both worlds use the same random stream (identical noise and batch draws).
    ``spec_prime``: simulate world D' with a different spec (e.g. a mutated test double)."""
    if coupled:
        r0, r1 = np.random.default_rng(seed), np.random.default_rng(seed)
    else:
        s0, s1 = np.random.SeedSequence(seed).spawn(2)
        r0, r1 = np.random.default_rng(s0), np.random.default_rng(s1)
    return simulate(spec, 0, N, r0), simulate(spec_prime or spec, 1, N, r1)


def scores(spec: ChainSpec, x: np.ndarray) -> np.ndarray:
    """Score of the last iterate: projection on the direction u of the gradient difference (the
    likelihood-ratio direction for the diagonal-curvature pairs simulated here)."""
    return x @ spec.u


# ---------------------------------------------------------------------- coupled sensitivity trace
@dataclass(frozen=True)
class CoupledTrace:
    """Per-step distances of a coupled pair of runs (same noise, same batches)."""

    distance: np.ndarray  # ||x_t - x'_t||, t = 0..T (max over chains)
    grad_difference: np.ndarray  # max over chains of ||grad_t - grad'_t|| before noise, t = 0..T-1
    contraction: float
    step_shift: np.ndarray  # eta_t * (sensitivity of the averaged gradient at step t)


def coupled_trace(spec: ChainSpec, N: int = 16, seed: int = 0) -> CoupledTrace:
    """Run both worlds with identical randomness and record ||x_t - x'_t|| and the pre-noise
    averaged-gradient difference at every step (Re:cord-play idea, auditing-notes 4 item 7).

    For a correct implementation ``dist_{t+1} <= c_t dist_t + eta_t Delta_t`` with
    c_t = max |1 - eta_t s_t kappa| (<= 1 under the theorems' assumptions) and Delta_t the declared
    averaged-gradient sensitivity (L / batch normaliser when the differing example is in the batch).
    """
    rng0, rng1 = np.random.default_rng(seed), np.random.default_rng(seed)
    d = spec.dim
    x = np.zeros((N, d)) + np.asarray(spec.x0, dtype=float)
    y = x.copy()
    kappa, u, etas = spec.kappa, spec.u, spec.etas
    dist = [0.0]
    gdiff = []
    shifts = []
    cmax = 0.0
    for t, ((w0, s0), (w1, s1)) in enumerate(
        zip(_kicks(spec, 0, N, rng0), _kicks(spec, 1, N, rng1))
    ):
        eta = etas[t]
        s0a = np.broadcast_to(np.asarray(s0, dtype=float), (N,))[:, None]
        s1a = np.broadcast_to(np.asarray(s1, dtype=float), (N,))[:, None]
        w0a = np.broadcast_to(np.asarray(w0, dtype=float), (N,))[:, None]
        w1a = np.broadcast_to(np.asarray(w1, dtype=float), (N,))[:, None]
        g0 = s0a * kappa * x + w0a * spec.offset * u
        g1 = s1a * kappa * y + w1a * (spec.offset - spec.L) * u
        # the pre-noise gradient difference at the SAME point isolates the sensitivity
        g1_at_x = s1a * kappa * x + w1a * (spec.offset - spec.L) * u
        gdiff.append(float(np.linalg.norm(g1_at_x - g0, axis=1).max()))
        shifts.append(float(eta * np.max(w1a) * spec.L))
        cmax = max(cmax, float(np.max(np.abs(1 - eta * np.outer(s0a.ravel(), kappa)))))
        z0 = rng0.standard_normal((N, d))
        z1 = rng1.standard_normal((N, d))
        x = _project(x - eta * (g0 + spec.sigma * z0), spec.diameter)
        y = _project(y - eta * (g1 + spec.sigma * z1), spec.diameter)
        dist.append(float(np.linalg.norm(x - y, axis=1).max()))
    return CoupledTrace(np.array(dist), np.array(gdiff), cmax, np.array(shifts))


def default_seeds(seed: int, k: int) -> Sequence[int]:
    """k reproducible child seeds."""
    return [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(k)]
