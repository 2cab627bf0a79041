"""The Run description: validation (clear errors naming the parameter) and derived quantities."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lastiterate.errors import NotApplicable, ParameterError
from lastiterate.run import Run

BASE = {
    "algorithm": "cgd",
    "n": 60000,
    "batch_size": 1500,
    "epochs": 200,
    "lr": 0.05,
    "noise_std": 0.01,
    "sensitivity": 10.0,
}


def test_paper000_mnist_setting_derived_quantities() -> None:
    run = Run(**BASE, strong_convexity=0.002, smoothness=32.5)
    assert run.T == 8000 and run.E == 200 and run.l == 40 and run.uses == 200
    assert run.c == pytest.approx(1 - 0.05 * 0.002, rel=1e-15)  # eta <= 2/(m+M): c = 1 - eta m
    assert run.per_step_mu == pytest.approx(2 / 3)
    s = run.setting()
    assert s["steps"] == 8000 and s["batches_per_epoch"] == 40 and s["sampling_rate"] == 0.025


def test_noise_multiplier_and_clip_conventions() -> None:
    # Opacus: noise z*C on the SUM, divided by b -> sigma = z C / b; replace-one L =
    # 2C, add/remove L = C
    run = Run(
        algorithm="sgd",
        n=60000,
        batch_size=256,
        steps=100,
        lr=0.1,
        noise_multiplier=1.1,
        clip=2.0,
        sampling="poisson",
    )
    assert run.sigma == pytest.approx(1.1 * 2.0 / 256)
    assert run.L == 4.0
    run2 = run.replace(adjacency="add-remove")
    assert run2.L == 2.0
    assert run2.per_step_mu == pytest.approx(1 / 1.1)


def test_uneven_partition_uses_smallest_batch() -> None:
    run = Run(algorithm="cgd", n=1797, batch_size=256, epochs=3, lr=0.1, noise_std=0.1, clip=1.0)
    assert run.l == 8 and run.b_min == 1797 // 8 == 224
    assert run.per_step_mu == pytest.approx(2.0 / (224 * 0.1))


def test_contraction_rules() -> None:
    run = Run(
        algorithm="gd",
        n=10,
        steps=5,
        lr=0.1,
        noise_std=1.0,
        sensitivity=1.0,
        strong_convexity=1.0,
        smoothness=15.0,
    )
    assert run.c == pytest.approx(max(abs(1 - 0.1), abs(1 - 1.5)))
    # lr >= 2/M: no contraction, with a reason
    run = Run(
        algorithm="gd",
        n=10,
        steps=5,
        lr=0.2,
        noise_std=1.0,
        sensitivity=1.0,
        strong_convexity=1.0,
        smoothness=10.0,
    )
    assert run.c is None and "2/M" in run.contraction_note
    # convex + smooth, lr <= 2/M: non-expansive
    run = Run(
        algorithm="gd",
        n=10,
        steps=5,
        lr=0.2,
        noise_std=1.0,
        sensitivity=1.0,
        convex=True,
        smoothness=10.0,
    )
    assert run.c == 1.0
    # explicit contraction
    run = Run(
        algorithm="gd", n=10, steps=5, lr=1.0, noise_std=1.0, sensitivity=1.0, contraction=0.9
    )
    assert run.c == 0.9
    # nothing declared
    assert Run(algorithm="gd", n=10, steps=5, lr=1.0, noise_std=1.0, sensitivity=1.0).c is None


def test_sgd_steps_from_epochs_round_up() -> None:
    run = Run(
        algorithm="sgd",
        n=1000,
        batch_size=300,
        epochs=2,
        lr=0.1,
        noise_std=1.0,
        clip=1.0,
        sampling="uniform",
    )
    assert run.T == math.ceil(2 * 1000 / 300)


@pytest.mark.parametrize(
    "change, param",
    [
        ({"noise_std": -1.0}, "noise_std"),
        ({"noise_std": float("nan")}, "noise_std"),
        ({"batch_size": 70000}, "batch_size"),
        ({"n": 0}, "n"),
        ({"lr": 0.0}, "lr"),
        ({"algorithm": "adam"}, "algorithm"),
        ({"sensitivity": None}, "sensitivity"),
        ({"noise_std": None}, "noise_std"),
        ({"steps": 10}, "steps"),
        ({"contraction": 1.5}, "contraction"),
        ({"diameter": 0.0}, "diameter"),
        ({"adjacency": "neighbour"}, "adjacency"),
        ({"strong_convexity": 50.0, "smoothness": 1.0}, "strong_convexity"),
        ({"epochs": 2.501}, "epochs"),
    ],
)
def test_bad_input_names_the_parameter(change: dict, param: str) -> None:
    kw = dict(BASE, **change)
    with pytest.raises(ParameterError) as info:
        Run(**kw)
    assert info.value.name == param
    assert param in str(info.value)


def test_sgd_requires_sampling_no_silent_default() -> None:
    with pytest.raises(ParameterError, match="sampling"):
        Run(algorithm="sgd", n=100, batch_size=10, steps=5, lr=0.1, noise_std=1.0, clip=1.0)


def test_noise_multiplier_needs_clip() -> None:
    with pytest.raises(ParameterError, match="clip"):
        Run(algorithm="gd", n=100, steps=5, lr=0.1, noise_multiplier=1.0, sensitivity=1.0)


def test_sensitivity_below_clip_implied_is_refused() -> None:
    with pytest.raises(ParameterError, match="sensitivity"):
        Run(algorithm="gd", n=100, steps=5, lr=0.1, noise_std=1.0, sensitivity=1.0, clip=1.0)


def test_lr_schedule() -> None:
    run = Run(algorithm="gd", n=10, steps=3, lr=[0.1, 0.2, 0.3], noise_std=1.0, sensitivity=1.0)
    assert run.lr_schedule == (0.1, 0.2, 0.3) and not run.constant_lr
    with pytest.raises(NotApplicable):
        _ = run.eta
    with pytest.raises(ParameterError, match="lr"):
        Run(algorithm="gd", n=10, steps=3, lr=[0.1, 0.2], noise_std=1.0, sensitivity=1.0)


def test_contraction_of_a_schedule_is_the_worst_step() -> None:
    # lr in {0.01, 0.1}, m = 1, M = 5: worst |1 - lr m| = 0.99 (smallest lr), worst |1 - lr M| = 0.5
    run = Run(
        algorithm="gd",
        n=10,
        steps=2,
        lr=[0.01, 0.1],
        noise_std=1.0,
        sensitivity=1.0,
        strong_convexity=1.0,
        smoothness=5.0,
    )
    assert run.c == pytest.approx(0.99)


# ---------------------------------------------------------------------- typed Run,
# derived field lists


def test_field_names_are_the_constructor_inputs_and_replace_round_trips() -> None:
    import dataclasses

    names = Run.field_names()
    assert names == tuple(f.name for f in dataclasses.fields(Run) if f.init)
    assert "derived" not in names and {"algorithm", "lr", "contraction", "adjacency"} <= set(names)
    run = Run(**BASE, strong_convexity=0.002, smoothness=32.5)
    assert run.replace() == run
    assert run.replace(noise_std=0.02).sigma == 0.02 and run.replace(steps=10).T == 10


def test_run_choices_come_from_the_literal_annotations() -> None:
    from typing import get_args

    from lastiterate.run import (
        ADJACENCIES,
        ALGORITHMS,
        RUN_CHOICES,
        SAMPLINGS,
        Adjacency,
        Algorithm,
        Sampling,
    )

    assert RUN_CHOICES == {"algorithm": ALGORITHMS, "sampling": SAMPLINGS, "adjacency": ADJACENCIES}
    assert ALGORITHMS == get_args(Algorithm) == ("gd", "cgd", "sgd")
    assert SAMPLINGS == get_args(Sampling) and ADJACENCIES == get_args(Adjacency)


def test_cli_flags_use_the_run_choices() -> None:
    from lastiterate.cli import build_parser
    from lastiterate.run import RUN_CHOICES

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for command in ("account", "calibrate", "audit"):
        parser = sub.choices[command]
        for name, choices in RUN_CHOICES.items():
            action = next(a for a in parser._actions if a.dest == name)
            assert tuple(action.choices) == choices


def test_setting_is_typed_and_matches_the_report_keys() -> None:
    run = Run(algorithm="gd", n=10, steps=3, lr=[0.1, 0.2, 0.3], noise_std=1.0, sensitivity=1.0)
    s = run.setting()
    assert s["lr"] == [0.1, 0.2, 0.3] and "lr_schedule" not in s
    assert list(s) == [
        "algorithm",
        "n",
        "batch_size",
        "min_batch_size",
        "batches_per_epoch",
        "steps",
        "epochs",
        "sampling",
        "sampling_rate",
        "adjacency",
        "noise_std",
        "noise_multiplier",
        "clip",
        "sensitivity",
        "sensitivity_meaning",
        "strong_convexity",
        "smoothness",
        "convex",
        "diameter",
        "contraction",
        "per_step_mu",
        "lr",
        "contraction_note",
    ]
    assert run.derived.steps == run.T == 3 and run.derived.lr_schedule == (0.1, 0.2, 0.3)


# ---------------------------------------------------------------------- --contraction is
# consistent with lr, m, M


def test_declared_contraction_below_the_geometry_is_refused() -> None:
    # lr 0.1, m 1, M 5: a gradient step contracts by max(|1 - 0.1|, |1 - 0.5|) = 0.9, no better
    kw = {
        "algorithm": "gd",
        "n": 10,
        "steps": 5,
        "lr": 0.1,
        "noise_std": 1.0,
        "sensitivity": 1.0,
        "strong_convexity": 1.0,
        "smoothness": 5.0,
    }
    assert Run(**kw).c == pytest.approx(0.9)
    with pytest.raises(
        ParameterError, match=r"contraction=0\.5 is invalid: must be in \[0\.9"
    ) as info:
        Run(**kw, contraction=0.5)
    assert info.value.name == "contraction"
    # the implied value is accepted (and used rounded up: never a faster contraction than exact)
    assert 0.9 <= Run(**kw, contraction=0.9).c <= 0.9 + 1e-15
    assert Run(**kw, contraction=0.95).c == 0.95  # a looser declaration is sound


@pytest.mark.parametrize(
    "geometry, smallest",
    [
        (
            {"smoothness": 25.0},
            1.5,
        ),  # lr M = 2.5: not even non-expansive, every c in [0, 1] is refused
        ({"strong_convexity": 0.0}, 1.0),  # m = 0 (merely convex): |1 - lr * 0| = 1
        ({"strong_convexity": 2.0}, 0.8),  # m alone: c >= |1 - lr m|
        ({"smoothness": 4.0}, 0.6),  # M alone: c >= |1 - lr M|
    ],
)
def test_contraction_lower_limit_from_each_declared_constant(
    geometry: dict, smallest: float
) -> None:
    kw = dict(algorithm="gd", n=10, steps=5, lr=0.1, noise_std=1.0, sensitivity=1.0, **geometry)
    with pytest.raises(ParameterError, match="contraction"):
        Run(**kw, contraction=min(smallest, 1.0) * 0.999)
    if smallest <= 1:
        assert smallest <= Run(**kw, contraction=smallest).c <= smallest + 1e-15  # rounded up


def test_contraction_of_a_schedule_uses_the_worst_step_for_consistency() -> None:
    kw = {
        "algorithm": "gd",
        "n": 10,
        "steps": 2,
        "lr": [0.01, 0.1],
        "noise_std": 1.0,
        "sensitivity": 1.0,
        "strong_convexity": 1.0,
        "smoothness": 5.0,
    }
    with pytest.raises(ParameterError, match="contraction"):
        Run(**kw, contraction=0.9)  # the step lr = 0.01 only contracts by 0.99
    assert 0.99 <= Run(**kw, contraction=0.99).c <= 0.99 + 1e-15  # rounded up


def test_step_contraction_matches_the_hessian_spectrum_of_a_quadratic() -> None:
    # independent check: for f(x) = x^T diag(h) x / 2 the step x -> (I - eta H) x has
    # norm max |1 - eta h|
    import numpy as np

    from lastiterate.run import step_contraction

    rng = np.random.default_rng(0)
    for _ in range(50):
        m, M = sorted(rng.uniform(0, 10, size=2))
        eta = float(rng.uniform(0, 0.5))
        h = np.array([m, M, *rng.uniform(m, M, size=5)])
        assert step_contraction((eta,), m, M) == pytest.approx(
            np.linalg.norm(np.diag(1 - eta * h), 2)
        )


# ---------------------------------------------------------------------- extreme values: a
# ParameterError, not inf


@pytest.mark.parametrize(
    "change, param",
    [
        ({"noise_std": 1e-31}, "noise_std"),
        ({"noise_std": 1e31}, "noise_std"),
        ({"sensitivity": 1e300}, "sensitivity"),
        ({"sensitivity": None, "clip": 1e308}, "clip"),
        ({"diameter": 1e300}, "diameter"),
        ({"lr": 1e-300}, "lr"),
        ({"lr": [0.05] * 7999 + [1e300]}, "lr"),
        ({"smoothness": 1e-300}, "smoothness"),
        ({"strong_convexity": 1e31, "smoothness": 1e31}, "strong_convexity"),
        ({"strong_convexity": 1.0, "smoothness": 1e31}, "smoothness"),
        (
            {"noise_std": None, "noise_multiplier": 1e-300, "clip": 1.0, "sensitivity": None},
            "noise_multiplier",
        ),
        ({"n": 10**13, "batch_size": 10}, "n"),
        ({"epochs": None, "steps": 10**13}, "steps"),
        ({"epochs": 1e300}, "epochs"),
    ],
)
def test_scales_outside_the_representable_range_are_refused(change: dict, param: str) -> None:
    with pytest.raises(ParameterError) as info:
        Run(**dict(BASE, **change))
    assert info.value.name == param
    assert param in str(info.value) and "must be" in str(info.value)


def test_per_step_scale_is_capped_where_the_gaussian_profile_is_accurate() -> None:
    from lastiterate.notions.gdp import MU_MAX

    # L/(b sigma) = 10 / (1500 sigma): 1e6 at sigma = 6.67e-9
    ok = Run(**dict(BASE, noise_std=1e-8))
    assert ok.per_step_mu == pytest.approx(10 / 1500 / 1e-8) and ok.per_step_mu <= MU_MAX
    with pytest.raises(
        ParameterError, match=r"noise_std=1e-09 is invalid: .*at most 1e\+06"
    ) as info:
        Run(**dict(BASE, noise_std=1e-9))
    assert info.value.name == "noise_std"
    with pytest.raises(ParameterError) as info:
        Run(**dict(BASE, noise_std=None, noise_multiplier=1e-12, clip=5.0, sensitivity=None))
    assert info.value.name == "noise_multiplier"


def test_a_strong_convexity_too_small_for_the_step_is_refused_not_rounded() -> None:
    # 1 - lr m rounds to 1 for lr m < 2^-52: refuse instead of dividing by 1 - c = 0 downstream
    kw = {
        "algorithm": "gd",
        "n": 10,
        "steps": 5,
        "lr": 0.1,
        "noise_std": 1.0,
        "sensitivity": 1.0,
        "smoothness": 2.0,
    }
    with pytest.raises(ParameterError, match="strong_convexity") as info:
        Run(**kw, strong_convexity=5e-324)
    assert info.value.name == "strong_convexity"
    assert Run(**kw, strong_convexity=0.0).c == 1.0
    assert Run(**kw, strong_convexity=1e-14).c < 1.0


def test_step_contraction_is_never_below_the_exact_value() -> None:
    """max(|1 - eta m|, |1 - eta M|) in exact rational arithmetic of the double inputs: the
    computed contraction is never below it (a smaller c claims a faster contraction).  In plain
    floating point 1 - eta m lies below the exact value in about half of these cells."""
    from fractions import Fraction

    from lastiterate.run import step_contraction

    rng = np.random.default_rng(11)
    for _ in range(3000):
        M = float(np.exp(rng.uniform(-5, 5)))
        eta = float(rng.uniform(1e-6, 1.999) / M)
        m = float(M * np.exp(rng.uniform(-35, 0)))
        if eta * m < 2.0**-52:
            continue
        exact = max(
            abs(1 - Fraction(eta) * Fraction(m)), abs(1 - Fraction(eta) * Fraction(M))
        )
        c = step_contraction((eta,), m, M)
        assert Fraction(c) >= exact, (eta, m, M, c)
        assert c <= 1.0 and Fraction(c) - exact <= Fraction(2.0**-50)


def test_tiny_lr_m_does_not_overstate_the_contraction() -> None:
    # lr = 0.05, m = 3e-14: 1 - fl(1 - lr m) was 3.6% above lr m (a faster contraction)
    from fractions import Fraction

    run = Run(
        algorithm="gd", n=10, steps=5, lr=0.05, noise_std=1.0, sensitivity=1.0,
        strong_convexity=3e-14, smoothness=1.0,
    )
    assert 1 - Fraction(run.c) <= Fraction(0.05) * Fraction(3e-14)
