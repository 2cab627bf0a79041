"""Property tests: no guarantee the accountant reports is ever below an EXACT reference value.

For random runs of each family the worst-case pair is built with ``spec_from_run`` and its exact
privacy computed (``reference_for_spec``: Gaussian propagation, projected-walk Markov chain,
binomial mixtures).  Every result of kind "bound" must be at least that value, at a random delta.
No sampling is involved, so there is no false alarm: any failure is an under-reported epsilon (or a
reference bug), with the run printed in the message.

Hypothesis runs derandomised (fixed examples), so CI is deterministic.  For a deeper nightly
search set ``LASTITERATE_AUDIT_EXAMPLES=500`` (and ``LASTITERATE_AUDIT_RANDOM=1``
for fresh examples).
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lastiterate.accountant import account
from lastiterate.audit.report import reference_for_spec
from lastiterate.audit.simulate import spec_from_run
from lastiterate.run import Run

SETTINGS = settings(
    max_examples=int(os.environ.get("LASTITERATE_AUDIT_EXAMPLES", "15")),
    deadline=None,
    derandomize=os.environ.get("LASTITERATE_AUDIT_RANDOM") != "1",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check_claims(run: Run, spec, delta: float) -> None:  # type: ignore[no-untyped-def]
    mu_ref, eps_ref, desc = reference_for_spec(spec, delta)
    assert eps_ref is not None or mu_ref is not None, "no exact reference for this family"
    # projected walks are grid approximations (~1e-3 in eps); the other references are exact
    rtol = 2e-3 if "Markov chain" in desc else 1e-7
    rep = account(run, delta=delta)
    assert rep.best is not None
    for r in rep.results:
        if r.kind != "bound":
            continue
        if eps_ref is not None:
            assert r.epsilon >= eps_ref * (1 - rtol) - 1e-9, (
                f"{r.bound} ({r.theorem}) claims eps={r.epsilon:.6g} < exact {eps_ref:.6g} "
                f"[{desc}] at delta={delta:g} for {run.setting()} (offset {spec.offset}, "
                f"position {spec.position})"
            )
        if mu_ref is not None and r.mu is not None:
            assert r.mu >= mu_ref * (1 - 1e-9), (
                f"{r.bound} ({r.theorem}) claims mu={r.mu:.6g} < exact "
                f"{mu_ref:.6g} for {run.setting()}"
            )


deltas = st.sampled_from([1e-8, 1e-5, 1e-3, 0.05])


@SETTINGS
@given(
    m=st.floats(0.05, 2.0),
    ratio=st.floats(1.0, 5.0),
    frac=st.floats(0.05, 0.999),
    n=st.integers(1, 20),
    T=st.integers(1, 500),
    L=st.floats(0.1, 3.0),
    rel_sigma=st.floats(0.03, 3.0),
    delta=deltas,
)
def test_gd_quadratic(
    m: float, ratio: float, frac: float, n: int, T: int, L: float, rel_sigma: float, delta: float
) -> None:
    M = m * ratio
    eta = frac * 2 / M  # the whole admissible range, also beyond 2/(m+M)
    run = Run(
        algorithm="gd",
        n=n,
        lr=eta,
        steps=T,
        noise_std=rel_sigma * L / n,
        sensitivity=L,
        strong_convexity=m,
        smoothness=M,
    )
    check_claims(run, spec_from_run(run, loss="quadratic"), delta)


@SETTINGS
@given(
    m=st.floats(0.05, 2.0),
    ratio=st.floats(1.0, 3.0),
    frac=st.floats(0.05, 0.999),
    l=st.integers(1, 6),
    b=st.integers(1, 4),
    E=st.integers(1, 60),
    rel_sigma=st.floats(0.1, 3.0),
    data=st.data(),
    delta=deltas,
)
def test_cgd_quadratic_every_position(
    m: float,
    ratio: float,
    frac: float,
    l: int,
    b: int,
    E: int,
    rel_sigma: float,
    data,
    delta: float,
) -> None:  # type: ignore[no-untyped-def]
    M = m * ratio
    eta = frac * 2 / M
    run = Run(
        algorithm="cgd",
        n=l * b,
        batch_size=b,
        lr=eta,
        epochs=E,
        noise_std=rel_sigma,
        sensitivity=b * 1.0,
        strong_convexity=m,
        smoothness=M,
    )
    pos = data.draw(st.integers(0, l - 1))
    check_claims(run, spec_from_run(run, loss="quadratic", position=pos), delta)


@SETTINGS
@given(
    algorithm=st.sampled_from(["gd", "cgd"]),
    M=st.floats(0.1, 5.0),
    frac=st.floats(0.05, 1.0),
    l=st.integers(1, 5),
    T=st.integers(1, 400),
    rel_sigma=st.floats(0.05, 3.0),
    delta=deltas,
)
def test_linear_unconstrained(
    algorithm: str, M: float, frac: float, l: int, T: int, rel_sigma: float, delta: float
) -> None:
    eta = frac * 2 / M
    kw = (
        {"n": 3, "steps": T}
        if algorithm == "gd"
        else {"n": 2 * l, "batch_size": 2, "epochs": max(1, T // l)}
    )
    run = Run(
        algorithm=algorithm,
        lr=eta,
        noise_std=rel_sigma,
        sensitivity=1.0,
        convex=True,
        smoothness=M,
        **kw,
    )  # type: ignore[arg-type]
    check_claims(run, spec_from_run(run, loss="linear"), delta)


@SETTINGS
@given(
    algorithm=st.sampled_from(["gd", "cgd", "sgd"]),
    log_s=st.floats(-2.0, -0.7),
    log_ratio=st.floats(-1.5, 0.3),
    l=st.integers(1, 5),
    log_T=st.floats(0.0, 3.3),
    antipodal=st.booleans(),
    data=st.data(),
    delta=deltas,
)
def test_projected_walk(
    algorithm: str,
    log_s: float,
    log_ratio: float,
    l: int,
    log_T: float,
    antipodal: bool,
    data,
    delta: float,
) -> None:  # type: ignore[no-untyped-def]
    """Convex, smooth, diameter 1: the AT22 projected walk (gd), its cyclic (cgd) and sampled (sgd,
    uniform batches) versions."""
    s = 10**log_s  # eta sigma
    eta = 0.1
    b = 2
    T = max(1, int(10**log_T))
    if algorithm == "gd":
        a = s * 10**log_ratio  # eta L / n
        run = Run(
            algorithm="gd",
            n=1,
            lr=eta,
            steps=T,
            noise_std=s / eta,
            sensitivity=a / eta,
            convex=True,
            smoothness=1.0,
            diameter=1.0,
        )
        pos = None
    elif algorithm == "cgd":
        a = s * 10**log_ratio  # eta L / b
        run = Run(
            algorithm="cgd",
            n=b * l,
            batch_size=b,
            lr=eta,
            epochs=max(1, T // l),
            noise_std=s / eta,
            sensitivity=a * b / eta,
            convex=True,
            smoothness=1.0,
            diameter=1.0,
        )
        pos = data.draw(st.integers(0, l - 1))
    else:
        a = s * 10**log_ratio
        run = Run(
            algorithm="sgd",
            n=b * (l + 1),
            batch_size=b,
            lr=eta,
            steps=min(T, 600),
            noise_std=s / eta,
            sensitivity=a * b / eta,
            convex=True,
            smoothness=1.0,
            diameter=1.0,
            sampling="uniform",
        )
        pos = None
    spec = spec_from_run(run, loss="linear", position=pos, offset=run.L / 2 if antipodal else 0.0)
    check_claims(run, spec, delta)


@SETTINGS
@given(
    sampling=st.sampled_from(["uniform", "poisson"]),
    n=st.integers(3, 30),
    T=st.integers(1, 150),
    mu0=st.floats(0.2, 2.0),
    antipodal=st.booleans(),
    clip=st.booleans(),
    delta=deltas,
)
def test_sgd_linear(
    sampling: str, n: int, T: int, mu0: float, antipodal: bool, clip: bool, delta: float
) -> None:
    """NoisySGD, linear loss, no projection: binomial mixtures.  With a declared clip norm only the
    antipodal pair is admissible (every gradient has norm <= C = L/2)."""
    b = 2
    kw = (
        {"clip": mu0} if clip else {"sensitivity": 2 * mu0}
    )  # L = 2 mu0, sigma = 1: per-step L/(b sigma) = mu0
    run = Run(
        algorithm="sgd",
        n=n,
        batch_size=b,
        lr=0.1,
        steps=T,
        noise_std=1.0,
        convex=True,
        smoothness=1.0,
        sampling=sampling,
        **kw,
    )  # type: ignore[arg-type]
    assert math.isclose(run.L, 2 * mu0)
    spec = spec_from_run(run, loss="linear", offset=run.L / 2 if (antipodal or clip) else 0.0)
    check_claims(run, spec, delta)


@SETTINGS
@given(
    n=st.integers(3, 30),
    T=st.integers(1, 150),
    mu0=st.floats(0.2, 2.0),
    clip=st.booleans(),
    delta=deltas,
)
def test_sgd_poisson_add_remove_linear(
    n: int, T: int, mu0: float, clip: bool, delta: float
) -> None:
    """Add/remove with Poisson batches normalised by the fixed b: an example with zero gradient is
    an absent example, so the 'difference' pair (g' = -L u, ||g'|| = L = C) is
    the add/remove pair."""
    kw = {"clip": mu0 * 2} if clip else {"sensitivity": mu0 * 2}  # add/remove: L = C
    run = Run(
        algorithm="sgd",
        n=n,
        batch_size=2,
        lr=0.1,
        steps=T,
        noise_std=1.0,
        sampling="poisson",
        adjacency="add-remove",
        **kw,
    )  # type: ignore[arg-type]
    check_claims(run, spec_from_run(run, loss="linear"), delta)


def test_reference_for_spec_knows_its_limits() -> None:
    """No reference is claimed where none is exact (quadratic NoisySGD, shuffled batches)."""
    run = Run(
        algorithm="sgd",
        n=10,
        batch_size=2,
        lr=0.1,
        steps=10,
        noise_std=1.0,
        sensitivity=1.0,
        strong_convexity=1.0,
        smoothness=1.0,
        sampling="uniform",
    )
    assert reference_for_spec(spec_from_run(run), 1e-5)[:2] == (None, None)
    run = run.replace(sampling="shuffle", strong_convexity=None, convex=True)
    assert reference_for_spec(spec_from_run(run, loss="linear"), 1e-5)[:2] == (None, None)
    with pytest.raises(ValueError):
        spec_from_run(run, loss="quadratic")


@SETTINGS
@given(
    algorithm=st.sampled_from(["gd", "sgd"]),
    eta0=st.floats(0.05, 1.0),
    decay=st.sampled_from(["sqrt", "linear", "step"]),
    T=st.integers(2, 500),
    log_s=st.floats(-2.0, -0.7),
    log_ratio=st.floats(-1.5, 0.3),
    antipodal=st.booleans(),
    delta=deltas,
)
def test_projected_walk_with_lr_schedule(
    algorithm: str,
    eta0: float,
    decay: str,
    T: int,
    log_s: float,
    log_ratio: float,
    antipodal: bool,
    delta: float,
) -> None:
    """Step-size schedules (AT22 eq. 5.7 is the only last-iterate theorem that takes them): the
    projected walk with per-step noise eta_t sigma and kicks eta_t L / b, exact by a
    time-varying chain."""
    t = np.arange(1, T + 1)
    etas = {
        "sqrt": eta0 / np.sqrt(t),
        "linear": eta0 * (1 - 0.9 * (t - 1) / T),
        "step": np.where(t <= T // 2, eta0, eta0 / 4),
    }[decay]
    s_min = 10**log_s  # the smallest per-step noise eta_T sigma
    sigma = s_min / float(etas.min())
    b = 2
    if algorithm == "gd":
        L = s_min * 10**log_ratio / float(etas.min())  # eta_T L / n at the last step, n = 1
        run = Run(
            algorithm="gd",
            n=1,
            lr=list(etas),
            steps=T,
            noise_std=sigma,
            sensitivity=L,
            convex=True,
            smoothness=1.0 / eta0,
            diameter=1.0,
        )
    else:
        L = b * s_min * 10**log_ratio / float(etas.min())
        run = Run(
            algorithm="sgd",
            n=3 * b,
            batch_size=b,
            lr=list(etas),
            steps=T,
            noise_std=sigma,
            sensitivity=L,
            convex=True,
            smoothness=1.0 / eta0,
            diameter=1.0,
            sampling="uniform",
        )
    check_claims(
        run, spec_from_run(run, loss="linear", offset=run.L / 2 if antipodal else 0.0), delta
    )
