"""The contract every registered theorem keeps, over a grid of runs (cf. dp_accounting's shared
``PrivacyAccountantTest``).

The grid is built from the registry itself (:func:`lastiterate.bounds.registered`), so a theorem is
covered the day it is registered.  For every theorem and every run of the grid (gd / cgd / sgd with
each sampling scheme, both adjacencies, with or without m, M, D, sensitivity given as L or as a clip
norm) the theorem must

* return a well-formed :class:`~lastiterate.bounds.Result` (its id, theorem, kind and adjacency,
  epsilon >= 0, delta in [0, 1], standard JSON) or refuse with
  :class:`~lastiterate.errors.NotApplicable` and a reason, and nothing else;
* report an epsilon that is non-decreasing in the number of steps T and in 1/sigma.

A quick grid runs by default; the full product (and a larger scale of n, T and sigma) is marked
slow. A theorem that breaks the contract is not fixed here: its case is marked
``xfail(strict=True)`` with the numbers, so the mark must be removed once the theorem is fixed.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import pkgutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import lastiterate.bounds
from lastiterate.bounds import BOUND_IDS, BoundSpec, Query, Result, registered
from lastiterate.errors import NotApplicable
from lastiterate.run import ADJACENCIES, ALGORITHMS, Run

SPECS: list[BoundSpec] = registered()

#: (algorithm, sampling) pairs: every algorithm, and sgd with every sampling scheme
ALGORITHM_SAMPLINGS: tuple[tuple[str, str | None], ...] = (
    ("gd", None),
    ("cgd", None),
    ("sgd", "poisson"),
    ("sgd", "uniform"),
    ("sgd", "shuffle"),
)
#: geometry declarations: none, convex + smooth on a bounded domain, strongly convex (with and
#: without D), and m = M
GEOMETRIES: dict[str, dict[str, Any]] = {
    "no-geometry": {},
    "convex-D": {"convex": True, "smoothness": 1.0, "diameter": 1.0},
    "strongly-convex": {"strong_convexity": 0.1, "smoothness": 1.0},
    "strongly-convex-D": {"strong_convexity": 0.1, "smoothness": 1.0, "diameter": 1.0},
    "quadratic": {"strong_convexity": 1.0, "smoothness": 1.0},  # m = M: the l2-squared loss
}
#: sensitivity given directly, or through a clip norm (L = 2C replace-one, C add/remove)
SENSITIVITIES: dict[str, dict[str, Any]] = {"L": {"sensitivity": 1.0}, "clip": {"clip": 0.5}}


@dataclass(frozen=True)
class Scale:
    """Size of the runs of a grid: dataset, batch, step counts (increasing) and noise stds
    (decreasing)."""

    name: str
    n: int
    batch_size: int
    lr: float
    steps: tuple[int, ...]
    noise_stds: tuple[float, ...]


SMALL = Scale("small", n=20, batch_size=5, lr=0.1, steps=(4, 8, 16), noise_stds=(2.0, 1.0, 0.5))
LARGE = Scale(
    "large", n=200, batch_size=20, lr=0.1, steps=(100, 200, 400), noise_stds=(4.0, 2.0, 1.0)
)


@dataclass(frozen=True)
class Setting:
    """One point of the grid; ``run(steps, noise_std)`` varies T and sigma around it."""

    algorithm: str
    sampling: str | None
    adjacency: str
    geometry: str
    sensitivity: str
    scale: Scale

    @property
    def id(self) -> str:
        alg = self.algorithm if self.sampling is None else f"sgd-{self.sampling}"
        return f"{alg}-{self.adjacency}-{self.geometry}-{self.sensitivity}-{self.scale.name}"

    def run(self, *, steps: int | None = None, noise_std: float | None = None) -> Run:
        s = self.scale
        kw: dict[str, Any] = dict(
            algorithm=self.algorithm,
            n=s.n,
            lr=s.lr,
            steps=steps if steps is not None else s.steps[len(s.steps) // 2],
            noise_std=noise_std if noise_std is not None else s.noise_stds[len(s.noise_stds) // 2],
            adjacency=self.adjacency,
            **GEOMETRIES[self.geometry],
            **SENSITIVITIES[self.sensitivity],
        )
        if self.algorithm != "gd":
            kw["batch_size"] = s.batch_size
        if self.sampling is not None:
            kw["sampling"] = self.sampling
        return Run(**kw)


def _admissible(algorithm: str, sampling: str | None, adjacency: str) -> bool:
    """Add/remove adjacency exists only for Poisson batches over the fixed b; ``Run`` refuses the
    other runs (tests/test_adjacency_semantics.py), so they have no result to check here."""
    return adjacency == "replace" or (algorithm == "sgd" and sampling == "poisson")


def full_grid(scale: Scale) -> list[Setting]:
    return [
        Setting(alg, samp, adj, geo, sens, scale)
        for (alg, samp), adj, geo, sens in itertools.product(
            ALGORITHM_SAMPLINGS, ADJACENCIES, GEOMETRIES, SENSITIVITIES
        )
        if _admissible(alg, samp, adj)
    ]


def quick_grid() -> list[Setting]:
    """Every algorithm/sampling with every geometry under replace-one adjacency (sensitivity given
    as L or as a clip norm, alternately), and add/remove adjacency with two geometries."""
    out = []
    for (alg, samp), (i, geo) in itertools.product(ALGORITHM_SAMPLINGS, enumerate(GEOMETRIES)):
        out.append(Setting(alg, samp, "replace", geo, ("L", "clip")[i % 2], SMALL))
    for (alg, samp), geo in itertools.product(
        ALGORITHM_SAMPLINGS, ("no-geometry", "strongly-convex-D")
    ):
        if _admissible(alg, samp, "add-remove"):
            out.append(Setting(alg, samp, "add-remove", geo, "clip", SMALL))
    return out


QUICK = quick_grid()
QUICK_IDS = {s.id for s in QUICK}
#: the full product at the small scale, and every algorithm and geometry at the large scale
SLOW = [s for s in full_grid(SMALL) if s.id not in QUICK_IDS] + [
    s for s in full_grid(LARGE) if s.adjacency == "replace" and s.sensitivity == "clip"
]


# ------------------------------------------------------------------ known breaches of the contract
def _known_breach(spec: BoundSpec, setting: Setting, prop: str) -> str | None:
    """Why (theorem, setting, property) is expected to fail today, with the numbers, or None."""
    if (
        prop == "T"
        and spec.func.__name__ == "noisy_sgd_bounded_convex_clt"
        and setting.sampling == "uniform"
        and setting.adjacency == "replace"
        and "diameter" in GEOMETRIES[setting.geometry]
    ):
        return (
            "Prop C.15 CLT estimate (kind 'estimate', never chosen as best) decreases in T: "
            "it always pays the diameter term 2 D^2/(eta^2 sigma^2 nu) with nu <= T and omits "
            "the tau = 0 window (no D term).  n=20, b=5, lr=0.1, D=1, sigma=0.5: "
            "epsilon(T=4, 8, 16) = 160.19, 93.45, 58.01; n=200, b=20, sigma=1: "
            "epsilon(T=100, 200, 400) = 6.62, 4.49, 3.23"
        )
    return None


def _cases(settings: list[Setting], prop: str, slow: bool) -> Iterator[Any]:
    for spec, setting in itertools.product(SPECS, settings):
        if setting.algorithm not in spec.algorithms:
            continue
        marks: list[Any] = [pytest.mark.slow] if slow else []
        reason = _known_breach(spec, setting, prop)
        if reason is not None:
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        yield pytest.param(
            spec, setting, id=f"{spec.id}:{spec.func.__name__}:{setting.id}", marks=marks
        )


def cases(prop: str) -> list[Any]:
    return list(_cases(QUICK, prop, slow=False)) + list(_cases(SLOW, prop, slow=True))


# ------------------------------------------------------------------ evaluating one theorem
def evaluate(
    spec: BoundSpec,
    setting: Setting,
    query: Query,
    steps: int | None = None,
    noise_std: float | None = None,
) -> Result | None:
    """The theorem's result on ``setting.run(steps, noise_std)``, or None when it refuses; any
    other outcome fails the contract.  Cached: the tests share the runs in the grid's middle."""
    scale = setting.scale
    steps = scale.steps[len(scale.steps) // 2] if steps is None else steps
    noise_std = scale.noise_stds[len(scale.noise_stds) // 2] if noise_std is None else noise_std
    return _evaluate(spec, setting, query, steps, noise_std)


@functools.cache
def _evaluate(
    spec: BoundSpec, setting: Setting, query: Query, steps: int, noise_std: float
) -> Result | None:
    run = setting.run(steps=steps, noise_std=noise_std)
    try:
        result = spec.func(run, query)
    except NotApplicable as exc:
        assert str(exc).strip(), f"{spec.id} ({spec.theorem}) refused without a reason"
        return None
    assert_well_formed(spec, run, query, result)
    return result


def assert_well_formed(spec: BoundSpec, run: Run, query: Query, result: Any) -> None:
    assert isinstance(result, Result), (
        f"{spec.theorem} returned {type(result).__name__}, not a Result"
    )
    assert result.bound == spec.id
    assert result.kind == spec.kind
    assert result.theorem and result.reference
    assert result.adjacency == run.adjacency
    assert not math.isnan(result.epsilon) and result.epsilon >= 0
    assert not math.isnan(result.delta) and 0 <= result.delta <= 1
    if query.delta is not None:
        assert result.delta == query.delta
    else:
        assert result.epsilon == query.epsilon
    if result.mu is not None:
        assert not math.isnan(result.mu) and result.mu >= 0
    for order, rdp_epsilon in result.rdp or ():
        assert order > 1 and not math.isnan(rdp_epsilon) and rdp_epsilon >= 0
    # standard JSON: non-finite floats must have been turned into strings deliberately
    text = json.dumps(result.to_json(), allow_nan=False)
    assert json.loads(text)["bound"] == spec.id


def assert_non_decreasing(
    spec: BoundSpec, label: str, xs: tuple[float, ...], eps: list[float | None]
) -> None:
    pairs = [(x, e) for x, e in zip(xs, eps) if e is not None]
    for (x0, e0), (x1, e1) in itertools.pairwise(pairs):
        assert e1 >= e0 * (1 - 1e-9), (
            f"{spec.theorem}: epsilon decreases from {e0:.6g} at {label}={x0:g} to {e1:.6g} at "
            f"{label}={x1:g}"
        )


# ------------------------------------------------------------------ the contract
def test_every_bound_module_is_loaded_and_every_id_is_registered() -> None:
    package_dir = Path(lastiterate.bounds.__file__).parent
    modules = [
        m.name
        for m in pkgutil.iter_modules([str(package_dir)])
        if m.name != "base" and not m.name.startswith("_")
    ]
    missing = [m for m in modules if f"lastiterate.bounds.{m}" not in sys.modules]
    assert not missing, f"bound modules not imported by lastiterate.bounds.load_all: {missing}"
    assert {s.id for s in SPECS} == set(BOUND_IDS), "every bound id has a theorem and vice versa"
    for spec in SPECS:
        assert spec.theorem and spec.reference
        assert spec.algorithms and spec.algorithms <= set(ALGORITHMS)
    keys = [(s.id, s.theorem) for s in SPECS]
    assert len(keys) == len(set(keys)), "two theorems registered under the same id and name"


def test_the_grid_reaches_every_theorem() -> None:
    """A theorem that refuses every quick run is not tested by the grid: widen the grid."""
    query = Query(delta=1e-5)
    answered = {
        spec.func
        for spec, setting in itertools.product(SPECS, QUICK)
        if setting.algorithm in spec.algorithms and evaluate(spec, setting, query) is not None
    }
    silent = [s.theorem for s in SPECS if s.func not in answered]
    assert not silent, f"no quick run is answered by: {silent}"


@pytest.mark.parametrize(("spec", "setting"), cases("form"))
def test_result_is_well_formed_or_refused(spec: BoundSpec, setting: Setting) -> None:
    for query in (
        Query(delta=1e-5),
        Query(delta=1e-10),
        Query(delta=None, epsilon=1.0),
        Query(delta=None, epsilon=0.0),
    ):
        evaluate(spec, setting, query)


@pytest.mark.parametrize(("spec", "setting"), cases("T"))
def test_epsilon_is_non_decreasing_in_steps(spec: BoundSpec, setting: Setting) -> None:
    query = Query(delta=1e-5)
    steps = setting.scale.steps
    eps = [_epsilon(evaluate(spec, setting, query, steps=T)) for T in steps]
    assert_non_decreasing(spec, "T", steps, eps)


@pytest.mark.parametrize(("spec", "setting"), cases("sigma"))
def test_epsilon_is_non_decreasing_in_inverse_noise(spec: BoundSpec, setting: Setting) -> None:
    query = Query(delta=1e-5)
    stds = setting.scale.noise_stds
    eps = [_epsilon(evaluate(spec, setting, query, noise_std=s)) for s in stds]
    assert_non_decreasing(spec, "1/sigma", tuple(1 / s for s in stds), eps)


def _epsilon(result: Result | None) -> float | None:
    return None if result is None else result.epsilon
