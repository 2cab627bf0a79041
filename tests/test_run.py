"""The Run description: validation (clear errors naming the parameter) and derived quantities."""

from __future__ import annotations

import math

import pytest

from lastiterate.errors import NotApplicable, ParameterError
from lastiterate.run import Run

BASE = dict(algorithm="cgd", n=60000, batch_size=1500, epochs=200, lr=0.05, noise_std=0.01, sensitivity=10.0)


def test_paper000_mnist_setting_derived_quantities() -> None:
    run = Run(**BASE, strong_convexity=0.002, smoothness=32.5)
    assert run.T == 8000 and run.E == 200 and run.l == 40 and run.uses == 200
    assert run.c == pytest.approx(1 - 0.05 * 0.002, rel=1e-15)  # eta <= 2/(m+M): c = 1 - eta m
    assert run.per_step_mu == pytest.approx(2 / 3)
    s = run.setting()
    assert s["steps"] == 8000 and s["batches_per_epoch"] == 40 and s["sampling_rate"] == 0.025


def test_noise_multiplier_and_clip_conventions() -> None:
    # Opacus: noise z*C on the SUM, divided by b -> sigma = z C / b; replace-one L = 2C, add/remove L = C
    run = Run(algorithm="sgd", n=60000, batch_size=256, steps=100, lr=0.1, noise_multiplier=1.1, clip=2.0, sampling="poisson")
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
    run = Run(algorithm="gd", n=10, steps=5, lr=0.1, noise_std=1.0, sensitivity=1.0, strong_convexity=1.0, smoothness=15.0)
    assert run.c == pytest.approx(max(abs(1 - 0.1), abs(1 - 1.5)))
    # lr >= 2/M: no contraction, with a reason
    run = Run(algorithm="gd", n=10, steps=5, lr=0.2, noise_std=1.0, sensitivity=1.0, strong_convexity=1.0, smoothness=10.0)
    assert run.c is None and "2/M" in run.contraction_note
    # convex + smooth, lr <= 2/M: non-expansive
    run = Run(algorithm="gd", n=10, steps=5, lr=0.2, noise_std=1.0, sensitivity=1.0, convex=True, smoothness=10.0)
    assert run.c == 1.0
    # explicit contraction
    run = Run(algorithm="gd", n=10, steps=5, lr=1.0, noise_std=1.0, sensitivity=1.0, contraction=0.9)
    assert run.c == 0.9
    # nothing declared
    assert Run(algorithm="gd", n=10, steps=5, lr=1.0, noise_std=1.0, sensitivity=1.0).c is None


def test_sgd_steps_from_epochs_round_up() -> None:
    run = Run(algorithm="sgd", n=1000, batch_size=300, epochs=2, lr=0.1, noise_std=1.0, clip=1.0, sampling="uniform")
    assert run.T == math.ceil(2 * 1000 / 300)


@pytest.mark.parametrize(
    "change, param",
    [
        (dict(noise_std=-1.0), "noise_std"),
        (dict(noise_std=float("nan")), "noise_std"),
        (dict(batch_size=70000), "batch_size"),
        (dict(n=0), "n"),
        (dict(lr=0.0), "lr"),
        (dict(algorithm="adam"), "algorithm"),
        (dict(sensitivity=None), "sensitivity"),
        (dict(noise_std=None), "noise_std"),
        (dict(steps=10), "steps"),
        (dict(contraction=1.5), "contraction"),
        (dict(diameter=0.0), "diameter"),
        (dict(adjacency="neighbour"), "adjacency"),
        (dict(strong_convexity=50.0, smoothness=1.0), "strong_convexity"),
        (dict(epochs=2.501), "epochs"),
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
    run = Run(algorithm="gd", n=10, steps=2, lr=[0.01, 0.1], noise_std=1.0, sensitivity=1.0, strong_convexity=1.0, smoothness=5.0)
    assert run.c == pytest.approx(0.99)
