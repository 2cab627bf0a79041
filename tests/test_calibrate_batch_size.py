"""Batch-size calibration (issue 11 section 1): ``calibrate_batch_size`` and
``lastiterate calibrate --solve batch-size``.

Semantics checked here: the epochs stay fixed (T changes with b); a run given a noise MULTIPLIER z
keeps z (sigma = z C / b) and gets the LARGEST batch size within the target, a run given a noise
std sigma keeps sigma and gets the SMALLEST.  Every answer is checked against independent
evaluations: a fresh ``account`` at the answer (never above the target) and at the next batch size
towards the expensive end (above it), the brute-force extreme over every b of a small run where
the bound is monotone, and dp_accounting's PLD accountant for the Poisson (add/remove) runs.
"""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import pytest

import lastiterate as li
from lastiterate.accountant import account, batch_size_direction, calibrate_batch_size
from lastiterate.cli import main
from lastiterate.errors import ParameterError
from lastiterate.run import Run

DELTA = 1e-5


def _run(**kw: Any) -> Run:
    base: dict[str, Any] = {"n": 500, "batch_size": 50, "epochs": 3, "lr": 0.05}
    base.update(kw)
    return Run(**base)


#: name -> (run, target epsilon); n = 500, 3 epochs
RUNS: dict[str, tuple[Run, float]] = {
    "poisson add/remove, z fixed (composition)": (
        _run(
            algorithm="sgd",
            noise_multiplier=2.0,
            clip=1.0,
            sampling="poisson",
            adjacency="add-remove",
        ),
        2.5,
    ),
    "poisson replace, sigma fixed": (
        _run(algorithm="sgd", noise_std=0.05, clip=1.0, sampling="poisson"),
        1.0,
    ),
    "uniform sgd strongly convex, sigma fixed": (
        _run(
            algorithm="sgd",
            noise_std=0.05,
            clip=1.0,
            strong_convexity=0.5,
            smoothness=2.0,
            sampling="uniform",
        ),
        1.0,
    ),
    "uniform sgd strongly convex, z fixed": (
        _run(
            algorithm="sgd",
            noise_multiplier=2.0,
            clip=1.0,
            strong_convexity=0.5,
            smoothness=2.0,
            sampling="uniform",
        ),
        6.0,
    ),
    "cyclic strongly convex, sigma fixed": (
        _run(
            algorithm="cgd", noise_std=0.05, sensitivity=2.0, strong_convexity=0.5, smoothness=2.0
        ),
        1.5,
    ),
}


def _eps_at(run: Run, b: int) -> float:
    """The best bound of a fresh, full accounting of ``run`` with batch size b (same epochs)."""
    best = account(run.replace(batch_size=b, epochs=run.E), delta=DELTA).best
    assert best is not None
    return best.epsilon


def _beyond(run: Run, b: int) -> int:
    """The next batch size towards the expensive end."""
    return b + 1 if batch_size_direction(run) == "largest" else b - 1


@pytest.mark.parametrize("name", list(RUNS))
def test_never_overshoots_and_the_next_batch_size_exceeds(name: str) -> None:
    run, target = RUNS[name]
    cal = calibrate_batch_size(run, epsilon=target, delta=DELTA)
    b = cal.batch_size
    assert b is not None and 1 <= b <= run.n
    # the report is that of the answer, and a fresh accounting agrees: never above the target
    assert cal.report.run.b == b and cal.report.run.E == pytest.approx(run.E)
    assert cal.report.best is not None and cal.report.best.epsilon <= target
    assert _eps_at(run, b) == pytest.approx(cal.report.best.epsilon, rel=1e-9)
    assert _eps_at(run, b) <= target
    # tight: one batch size further towards the expensive end exceeds the target
    nxt = _beyond(run, b)
    assert 1 <= nxt <= run.n, "these targets are met strictly inside [1, n]"
    assert _eps_at(run, nxt) > target
    # the fixed noise input is kept and the other one follows b
    if run.noise_multiplier is not None:
        assert cal.noise_multiplier == pytest.approx(run.noise_multiplier)
        assert cal.noise_std == pytest.approx(run.noise_multiplier * run.clip / b)  # type: ignore[operator]
    else:
        assert cal.noise_std == pytest.approx(run.sigma)


def test_direction_follows_the_noise_input() -> None:
    z_run = RUNS["poisson add/remove, z fixed (composition)"][0]
    sigma_run = RUNS["poisson replace, sigma fixed"][0]
    assert batch_size_direction(z_run) == "largest"
    assert batch_size_direction(sigma_run) == "smallest"
    # and the bound agrees with the stated direction on these runs: z fixed, a larger batch
    # costs more; sigma fixed, it costs less
    assert _eps_at(z_run, 100) > _eps_at(z_run, 50)
    assert _eps_at(sigma_run, 100) < _eps_at(sigma_run, 50)


def _small_cyclic() -> Run:
    return Run(
        algorithm="cgd",
        n=120,
        batch_size=30,
        epochs=3,
        lr=0.05,
        noise_std=0.05,
        sensitivity=2.0,
        strong_convexity=0.5,
        smoothness=2.0,
    )


def test_equals_the_brute_force_extreme_where_monotone() -> None:
    """Every batch size of a small cyclic run: the bound is monotone from b = 12 on (below, a b
    that does not divide n keeps the smallest batch while the epoch gets fewer steps, and Thm 4.5
    rises a little: b = 6 -> 7, 8 -> 9, 10 -> 11), and for targets met only there the answer is
    the smallest b within the target, exactly."""
    run = _small_cyclic()
    eps = {b: _eps_at(run, b) for b in range(1, run.n + 1)}
    values = [eps[b] for b in range(12, run.n + 1)]
    assert all(x >= y for x, y in itertools.pairwise(values)), "the check needs a monotone bound"
    assert min(eps[b] for b in range(1, 12)) > 20.0
    for target in (3.0, 10.0, 20.0):
        expected = min(b for b in eps if eps[b] <= target)
        cal = calibrate_batch_size(run, epsilon=target, delta=DELTA)
        assert cal.batch_size == expected
        assert cal.report.best is not None and cal.report.best.epsilon == eps[expected]


def test_non_monotone_bound_answer_is_verified() -> None:
    """Where the bound is not monotone in b (the small cyclic run, b = 6 -> 7), the answer is the
    extreme found by bisection: within the target by a full accounting, its neighbour towards the
    expensive end above it, and at least as far out as the brute-force extreme (which it may not
    reach: a batch size nearer the cheap end may meet the target again)."""
    run = _small_cyclic()
    target = 52.0  # eps(6) = 51.90 <= 52 < eps(7) = 52.29; eps(8) = 35.1
    assert _eps_at(run, 6) <= target < _eps_at(run, 7)
    cal = calibrate_batch_size(run, epsilon=target, delta=DELTA)
    b = cal.batch_size
    assert b is not None and b >= 6
    assert _eps_at(run, b) <= target and _eps_at(run, b - 1) > target


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RUNS))
def test_brute_force_over_every_batch_size(name: str) -> None:
    """Every b in [1, n]: where the bound is monotone in b the answer is the brute-force extreme;
    where it is not (last-iterate theorems), the answer is still within the target and the
    brute-force extreme is at least as far towards the expensive end (the documented limit).
    About 8 minutes for the five runs on two shared cores (Poisson near rate 1 is the slow part)."""
    run, target = RUNS[name]
    eps = {b: _eps_at(run, b) for b in range(1, run.n + 1)}
    largest = batch_size_direction(run) == "largest"
    within = [b for b in eps if eps[b] <= target]
    expected = max(within) if largest else min(within)
    cal = calibrate_batch_size(run, epsilon=target, delta=DELTA)
    assert cal.batch_size is not None and eps[cal.batch_size] <= target
    ordered = [eps[b] for b in sorted(eps, reverse=not largest)]  # cheap end first
    if all(x <= y for x, y in itertools.pairwise(ordered)):
        assert cal.batch_size == expected
    else:
        assert (cal.batch_size <= expected) if largest else (cal.batch_size >= expected)


def test_poisson_answer_agrees_with_dp_accounting() -> None:
    """Independent peer: dp_accounting's PLD accountant (add/remove, Poisson-subsampled Gaussian
    composed T = ceil(epochs n / b) times) at the answer and one batch size past it."""
    import dp_accounting

    run, target = RUNS["poisson add/remove, z fixed (composition)"]
    cal = calibrate_batch_size(run, epsilon=target, delta=DELTA)
    b = cal.batch_size
    assert b is not None

    def peer(bb: int) -> float:
        steps = run.replace(batch_size=bb, epochs=run.E).T
        acc = dp_accounting.pld.PLDAccountant()
        event = dp_accounting.PoissonSampledDpEvent(
            bb / run.n, dp_accounting.GaussianDpEvent(run.noise_multiplier)
        )
        acc.compose(event, steps)
        return float(acc.get_epsilon(DELTA))

    # ours is an upper bound: never below the peer's (pessimistic, close to exact) value
    assert cal.report.best is not None
    assert cal.report.best.epsilon >= peer(b) * (1 - 3e-3)
    assert peer(b) <= target * (1 + 3e-3)
    assert peer(b + 1) >= target * (1 - 3e-3)


def test_target_met_everywhere_returns_the_expensive_end() -> None:
    run, _ = RUNS["cyclic strongly convex, sigma fixed"]
    cal = calibrate_batch_size(run, epsilon=1e4, delta=DELTA)
    assert cal.batch_size == 1  # sigma fixed: the smallest batch size, b = 1, is within
    assert cal.report.best is not None and cal.report.best.epsilon <= 1e4


def test_add_remove_keeps_its_adjacency() -> None:
    run, target = RUNS["poisson add/remove, z fixed (composition)"]
    cal = calibrate_batch_size(run, epsilon=target, delta=DELTA)
    assert cal.report.run.adjacency == "add-remove"
    assert cal.report.run.sampling_scheme == "poisson"


def test_progress_and_json() -> None:
    run, target = RUNS["cyclic strongly convex, sigma fixed"]
    messages: list[str] = []
    cal = calibrate_batch_size(run, epsilon=target, delta=DELTA, progress=messages.append)
    assert messages and all("batch size=" in m for m in messages)
    out = cal.to_json()
    assert out["batch_size"] == cal.batch_size
    text = json.dumps(out, allow_nan=False)  # standard JSON: no NaN / Infinity tokens
    assert json.loads(text)["best"]["epsilon"] <= target


def test_exported_at_the_package_top() -> None:
    assert "calibrate_batch_size" in li.__all__
    assert li.calibrate_batch_size is calibrate_batch_size
    # the other calibrations do not set a batch size
    run, _ = RUNS["cyclic strongly convex, sigma fixed"]
    assert li.calibrate_noise(run, epsilon=3.0, delta=DELTA).batch_size is None


# ---------------------------------------------------------------------- refusals
def test_refuses_full_batch_gd() -> None:
    run = Run(algorithm="gd", n=100, steps=10, lr=0.1, noise_std=0.1, sensitivity=1.0)
    with pytest.raises(ParameterError, match="algorithm.*no batch size"):
        calibrate_batch_size(run, epsilon=1.0)


def test_refuses_a_learning_rate_schedule() -> None:
    run = Run(
        algorithm="sgd",
        n=100,
        batch_size=10,
        steps=20,
        lr=[0.1] * 20,
        noise_std=0.1,
        clip=1.0,
        sampling="uniform",
    )
    with pytest.raises(ParameterError, match="lr.*constant"):
        calibrate_batch_size(run, epsilon=1.0)


def test_refuses_fractional_epochs_under_cyclic_batches() -> None:
    # 7 steps with ceil(100/30) = 4 batches per epoch: 1.75 epochs, which b = 10 cannot keep
    run = Run(algorithm="cgd", n=100, batch_size=30, steps=7, lr=0.1, noise_std=0.1, sensitivity=1)
    with pytest.raises(ParameterError, match="epochs.*whole number"):
        calibrate_batch_size(run, epsilon=1.0)


def test_unreachable_target_and_bad_epsilon() -> None:
    run, _ = RUNS["cyclic strongly convex, sigma fixed"]
    with pytest.raises(ParameterError, match="epsilon.*not met by any batch size"):
        calibrate_batch_size(run, epsilon=1e-3)
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ParameterError, match="epsilon"):
            calibrate_batch_size(run, epsilon=bad)


# ---------------------------------------------------------------------- CLI
CGD_FLAGS = [
    "calibrate", "--solve", "batch-size", "--algorithm", "cgd", "--n", "500", "--batch-size", "50",
    "--epochs", "3", "--lr", "0.05", "--noise-std", "0.05", "--sensitivity", "2",
    "--strong-convexity", "0.5", "--smoothness", "2", "--epsilon", "1.5",
]  # fmt: skip


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, *CGD_FLAGS, "--json")
    assert code == 0 and err == ""

    def no_constants(token: str) -> None:
        raise AssertionError(f"non-standard JSON token {token}")

    obj = json.loads(out, parse_constant=no_constants)
    assert set(obj) == {"batch_size", "steps", "noise_std", "noise_multiplier", "epochs", "best"}
    run, target = RUNS["cyclic strongly convex, sigma fixed"]
    expected = calibrate_batch_size(run, epsilon=target, delta=DELTA)
    assert obj["batch_size"] == expected.batch_size
    assert obj["best"]["epsilon"] <= 1.5 and obj["epochs"] == 3
    assert obj["steps"] == run.replace(batch_size=obj["batch_size"], epochs=3).T


def test_cli_text_names_the_direction(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, *CGD_FLAGS)
    assert code == 0
    assert "noise std 0.05 fixed: the smallest" in out and "b = " in out


@pytest.mark.parametrize(
    ("change", "name"),
    [
        ({"--algorithm": "gd", "--batch-size": None}, "algorithm"),
        ({"--batch-size": None}, "--batch-size"),
        ({"--noise-std": None}, "--noise-std"),
        ({"--epochs": None}, "--steps"),
        ({"--epsilon": "0.001"}, "epsilon"),
        ({"--epsilon": "-1"}, "epsilon"),
        ({"--epochs": None, "--steps": "7"}, "epochs"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], change: dict[str, str | None], name: str
) -> None:
    flags = dict(zip(CGD_FLAGS[3::2], CGD_FLAGS[4::2]))
    for k, v in change.items():
        if v is None:
            flags.pop(k, None)
        else:
            flags[k] = v
    argv = ["calibrate", "--solve", "batch-size"]
    for k, v in flags.items():
        argv += [k, v]
    code, out, err = _cli(capsys, *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and name in lines[0]
