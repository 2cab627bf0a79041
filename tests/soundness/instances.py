"""Random runs and their exact 1-D instances, built from the run's INPUTS (not the accountant's
derived quantities), with numpy only.  See ``reference.py`` for the instance itself.

Validity of the instance for each run (so that delta_true of the instance is a lower bound on the
run's true delta, and any excess over a claim is an under-report):

* data term v x of the differing example with |v| <= C under a clip norm C (replace: +-min(L/2, C),
  a difference of min(L, 2C) <= L; add/remove: v = min(L, C) present vs absent); all other
  examples have v = 0, so the realised batch size never matters;
* strong convexity m (and smoothness M >= m): the regulariser m x^2 / 2 in every example's loss,
  so every batch average has exactly curvature m (fixed-size batches, or normalised by the realised
  size) and a = 1 - lr m is the contraction of the GD step (lr <= 1/M keeps a >= 0).  Poisson
  batches normalised by the fixed b would make the curvature random, so Poisson runs are drawn
  without strong convexity;
* diameter D: the projection onto [-D/2, D/2] with x_0 = 0 (the projected walk);
* sampling: exactly the schemes of ``lastiterate.run`` (``numpy.array_split`` partitions into
  l = ceil(n/b) batches, realised-size normaliser for cyclic and shuffled batches; b/n Bernoulli
  inclusion for Poisson and uniform b-subsets; shuffled: once per epoch, batch k with prob.
  size_k / n).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .reference import Instance, projected_walk_bracket

FAMILIES = (("gd", None), ("cgd", None), ("sgd", "poisson"), ("sgd", "uniform"), ("sgd", "shuffle"))


@dataclass
class Case:
    """One randomized run, the query delta, and the instances it admits."""

    name: str
    run_kwargs: dict[str, Any]
    delta: float
    instances: list[Instance] = field(default_factory=list)

    def delta_true_lower(self, eps: float, cells: int) -> float:
        """max over the admissible instances of a (certified) lower bound on delta_true(eps)."""
        best = 0.0
        for inst in self.instances:
            if inst.diameter is None:
                best = max(best, inst.delta(eps))
            else:
                best = max(best, projected_walk_bracket(inst, eps, cells=cells)[0])
        return best


def batch_sizes(n: int, b: int) -> list[int]:
    """Sizes of numpy.array_split(range(n), ceil(n/b)) (the cyclic / shuffled partition)."""
    l_batches = math.ceil(n / b)
    return [len(x) for x in np.array_split(np.arange(n), l_batches)]


def instances_for(kw: dict[str, Any]) -> list[Instance]:
    """Every exact 1-D instance admissible for the run described by ``kw`` (Run keyword args)."""
    alg, samp, n, T = kw["algorithm"], kw.get("sampling"), kw["n"], kw["steps"]
    eta, sigma = float(kw["lr"]), float(kw["noise_std"])
    C = kw.get("clip")
    adj = kw.get("adjacency", "replace")
    if kw.get("sensitivity") is not None:
        L = float(kw["sensitivity"])
    else:
        L = 2 * C if adj == "replace" else C
    m = kw.get("strong_convexity") or 0.0
    a = 1.0 - eta * m
    D = kw.get("diameter")
    b = n if alg == "gd" else int(kw["batch_size"])

    if adj == "replace":
        h = L / 2 if C is None else min(L / 2, C)
        pairs: list[tuple[float, float | None]] = [(h, -h)]
        if C is None and samp == "poisson":
            # no clip: |g| itself is unbounded, only |g - g'| <= L; a large common part reveals
            # which steps sampled the example
            pairs.append((3.0 * L, 2.0 * L))
    else:
        pairs = [(L if C is None else min(L, C), None)]

    uses_list: list[tuple] = []
    if alg == "gd":
        uses_list.append(("steps", tuple((t, n) for t in range(T))))
    elif alg == "cgd":
        sizes = batch_sizes(n, b)
        l_batches = len(sizes)
        for k, bk in enumerate(sizes):  # the differing example in batch k: each one is an instance
            uses_list.append(("steps", tuple((t, bk) for t in range(k, T, l_batches))))
    elif samp in ("poisson", "uniform"):
        uses_list.append(("bernoulli", b / n, b))
    else:
        uses_list.append(("shuffle", tuple(batch_sizes(n, b))))

    return [
        Instance(T=T, eta=eta, sigma=sigma, a=a, v_p=vp, v_q=vq, uses=u, diameter=D)
        for (vp, vq) in pairs
        for u in uses_list
    ]


def random_case(rng: np.random.Generator, index: int, deep: bool) -> Case:
    """A random run covering gd, cgd, sgd x sampling, both adjacencies, geometry, clip."""
    alg, samp = FAMILIES[index % len(FAMILIES)]
    adjacency = "replace" if samp == "uniform" else str(rng.choice(["replace", "add-remove"]))
    if adjacency == "add-remove" and samp != "poisson":
        # Run refuses add/remove outside Poisson (test_add_remove_with_realised_normaliser)
        adjacency = "replace"
    geometries = ["none", "sc", "convex+D", "sc+D"]
    if samp == "poisson":
        geometries = ["none", "convex+D"]
    if samp == "shuffle":
        geometries = ["none", "sc"]
    geometry = geometries[(index // len(FAMILIES)) % len(geometries)]
    projected = geometry.endswith("+D")
    sc = geometry.startswith("sc")

    n = int(rng.integers(2, 41 if deep else 25))
    b = n if alg == "gd" else int(rng.integers(1, n + 1))
    if sc and alg == "sgd":
        T = int(
            rng.integers(1, 11 if deep else 9)
        )  # exact enumeration of 2^T (uniform) / l^E (shuffle) patterns
        if samp == "shuffle":
            while batch_sizes(n, b).__len__() ** math.ceil(T / len(batch_sizes(n, b))) > 4096:
                T = max(1, T - 1)
    elif projected:
        T = int(rng.integers(1, 61 if deep else 31))
    else:
        T = int(rng.integers(1, 401 if deep else 121))

    use_clip = bool(rng.random() < 0.5)
    C = float(np.exp(rng.uniform(np.log(0.1), np.log(3.0))))
    L = 2 * C if adjacency == "replace" else C
    b_min = min(batch_sizes(n, b)) if alg in ("cgd",) or samp == "shuffle" else b
    per_step_mu = float(np.exp(rng.uniform(np.log(0.05), np.log(2.5 if not projected else 4.0))))
    sigma = L / (b_min * per_step_mu)

    kw: dict[str, Any] = {
        "algorithm": alg,
        "n": n,
        "steps": T,
        "noise_std": sigma,
        "adjacency": adjacency,
    }
    if alg != "gd":
        kw["batch_size"] = b
    if samp is not None:
        kw["sampling"] = samp
    if use_clip:
        kw["clip"] = C
    else:
        kw["sensitivity"] = L
    M = float(np.exp(rng.uniform(np.log(0.2), np.log(5.0))))
    if sc:
        m = M * float(rng.uniform(0.02, 1.0))
        kw.update(strong_convexity=m, smoothness=M, lr=float(rng.uniform(0.05, 1.0)) / M)
    elif projected:
        kw.update(convex=True, smoothness=M, lr=float(rng.uniform(0.05, 2.0)) / M)
    else:
        kw["lr"] = float(np.exp(rng.uniform(np.log(0.01), np.log(2.0))))
    if projected:
        s = kw["lr"] * sigma
        kw["diameter"] = s * float(np.exp(rng.uniform(np.log(2.0), np.log(40.0))))
    delta = float(rng.choice([1e-2, 1e-3]) if projected else rng.choice([1e-2, 1e-3, 1e-5, 1e-8]))
    name = (
        f"{index}-{alg}{'-' + samp if samp else ''}-{adjacency}-{geometry}"
        f"-{'clip' if use_clip else 'L'}-T{T}"
    )
    return Case(name=name, run_kwargs=kw, delta=delta, instances=instances_for(kw))


def large_t_case(rng: np.random.Generator, index: int) -> Case:
    """Sampling rate 1 or close to it, many steps, small delta: where issue 8 section 1 reports
    the composition engine under-reporting.  The linear instance is a binomial mixture (a single
    Gaussian at rate 1), so delta_true stays cheap and exact."""
    samp = ("uniform", "poisson")[index % 2]
    adjacency = "replace" if samp == "uniform" else str(rng.choice(["replace", "add-remove"]))
    n = int(rng.integers(2, 21))
    b = n if rng.random() < 0.5 else n - 1
    T = int(10 ** rng.uniform(3, 5))
    C = 1.0
    L = 2 * C if adjacency == "replace" else C
    mu_total = float(np.exp(rng.uniform(np.log(1.0), np.log(10.0))))
    sigma = L * math.sqrt(T) / (b * mu_total)
    kw: dict[str, Any] = {
        "algorithm": "sgd",
        "sampling": samp,
        "n": n,
        "batch_size": b,
        "steps": T,
        "lr": 1.0,
        "noise_std": sigma,
        "clip": C,
        "adjacency": adjacency,
    }
    delta = float(rng.choice([1e-8, 1e-10, 1e-12]))
    name = f"large-{index}-{samp}-{adjacency}-q{b / n:.3g}-T{T}"
    return Case(name=name, run_kwargs=kw, delta=delta, instances=instances_for(kw))


def cases(seed: int, count: int, deep: bool) -> list[Case]:
    """``count`` random runs; the deep mode adds count // 8 large-T runs at sampling rate ~1."""
    rng = np.random.default_rng(seed)
    out = [random_case(rng, i, deep) for i in range(count)]
    if deep:
        out += [large_t_case(rng, i) for i in range(count // 8)]
    return out


def realised_normaliser_instances(kw: dict[str, Any]) -> list[Instance]:
    """Add/remove with a normaliser that counts the examples present (gd: the data-set size;
    cgd, shuffle: the realised batch size -- ``lastiterate.train.sampling``'s table).

    The differing example has data gradient +C and every other example -C.  With it, a batch of
    size b_k averages to -C + 2C/b_k; without it, the other b_k - 1 average to -C.  So every use
    shifts the iterate by eta 2C / b_k, twice the add/remove charge C / b_k.
    """
    C = float(kw["clip"])
    return [
        Instance(
            T=i.T,
            eta=i.eta,
            sigma=i.sigma,
            a=i.a,
            v_p=2 * C,
            v_q=None,
            uses=i.uses,
            diameter=i.diameter,
        )
        for i in instances_for({**kw, "adjacency": "add-remove", "sensitivity": None})
    ]
