"""Benchmark of the accountant: speed of account/calibrate, tightness against peers, start-up time.

Run:  python benchmarks/accountant.py [--quick] [--startup-only]

Tables printed (Markdown):

1. seconds per ``account`` (cold: a run no cache has seen; median of repeats, in process) and
   per ``calibrate`` call for each algorithm and geometry.  Targets (issue 11): account <= 0.2 s,
   calibrate <= 1 s; each cell says ok or MISSED.
2. tightness on the papers' experiments: our best epsilon against what Opacus (RDP and PRV
   accountants) and dp_accounting (PLD) report for the same run when they treat it as DP-SGD
   (they charge every iterate).
3. start-up: ``lastiterate account`` for plain DP-SGD composition as a whole process against a
   plain Python script computing the same epsilon with dp_accounting's PLD, and the whole
   ``lastiterate account`` process of the heaviest extreme runs (``HEAVY_CLI_SETTINGS`` at
   T = 1e7, delta = 1e-12; target: 0.5 s of CPU above the interpreter's start).
4. extremes (in the full run, not with ``--quick``): one cold ``account`` of every algorithm,
   sampling and geometry the accountant supports at T = 1e3, 1e5 and 1e7 steps, delta = 1e-5 and
   1e-12, and at a sampling rate near 1, so that "any single run within 0.2 s" is measured, not
   assumed; then ``calibrate_noise`` / ``calibrate_epochs`` of the sampled extreme runs at
   T = 1e5 and 1e7.  ``--extremes-only`` prints only these tables; ``--profile K`` adds the top
   functions (cProfile, cumulative time) of the K slowest cells.
5. batch-size calibration (``calibrate_batch_size``, also a column of table 1): for every setting
   with a batch size, the answer (largest b under a fixed noise multiplier, smallest under a fixed
   noise std, epochs fixed) and its time; ``--batch-size-only`` prints only this table.
6. ``--paired`` (only this table): the sampled extreme cells with the PLD kernels' exact fast
   paths off and on, alternately in one process (before / after in the same seconds on a shared
   machine); the tests check that both sides give the same values.
7. ``--dump-values FILE`` / ``--compare-values FILE``: every result of every extreme cell and the
   extreme calibrations' answers, bit for bit (repr), written by one version of the library and
   compared by another: the check that a speed change left every reported number as it was
   (exit 1 where an epsilon became smaller).
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from lastiterate.accountant import (
    account,
    batch_size_direction,
    calibrate_batch_size,
    calibrate_epochs,
    calibrate_noise,
)
from lastiterate.run import Run

DELTA = 1e-5


SETTINGS: list[tuple[str, dict[str, Any], float, str]] = [
    # name, run, target epsilon for calibration, target class
    (
        "gd strongly convex (Thm 4.2)",
        {
            "algorithm": "gd",
            "n": 1000,
            "steps": 1000,
            "lr": 0.1,
            "noise_std": 0.01,
            "sensitivity": 1.0,
            "strong_convexity": 1.0,
            "smoothness": 5.0,
        },
        2.0,
        "closed form",
    ),
    (
        "gd convex + diameter (Thm 4.3, B.1)",
        {
            "algorithm": "gd",
            "n": 1000,
            "steps": 1000,
            "lr": 0.1,
            "noise_std": 0.01,
            "sensitivity": 1.0,
            "convex": True,
            "smoothness": 5.0,
            "diameter": 1.0,
        },
        2.0,
        "closed form",
    ),
    (
        "cgd strongly convex (Thm 4.5)",
        {
            "algorithm": "cgd",
            "n": 60000,
            "batch_size": 1500,
            "epochs": 200,
            "lr": 0.05,
            "noise_std": 0.01,
            "sensitivity": 10.0,
            "strong_convexity": 0.002,
            "smoothness": 32.5,
        },
        8.0,
        "closed form",
    ),
    (
        "cgd convex + diameter (Thm 4.6)",
        {
            "algorithm": "cgd",
            "n": 60000,
            "batch_size": 1500,
            "epochs": 50,
            "lr": 0.05,
            "noise_std": 0.01,
            "sensitivity": 10.0,
            "convex": True,
            "smoothness": 32.5,
            "diameter": 1.0,
        },
        8.0,
        "closed form",
    ),
    (
        "sgd uniform convex + diameter (Thm 4.10, B.2)",
        {
            "algorithm": "sgd",
            "n": 60000,
            "batch_size": 1500,
            "steps": 2000,
            "lr": 0.05,
            "noise_std": 0.01,
            "clip": 5.0,
            "convex": True,
            "smoothness": 32.5,
            "diameter": 1.0,
            "sampling": "uniform",
        },
        8.0,
        "sgd last-iterate",
    ),
    (
        "sgd uniform strongly convex (Thm 4.9)",
        {
            "algorithm": "sgd",
            "n": 60000,
            "batch_size": 1500,
            "steps": 2000,
            "lr": 0.05,
            "noise_std": 0.01,
            "clip": 5.0,
            "strong_convexity": 0.002,
            "smoothness": 32.5,
            "sampling": "uniform",
        },
        8.0,
        "sgd last-iterate",
    ),
    (
        "sgd poisson, no geometry (composition)",
        {
            "algorithm": "sgd",
            "n": 60000,
            "batch_size": 256,
            "steps": 14000,
            "lr": 0.1,
            "noise_multiplier": 1.1,
            "clip": 1.0,
            "sampling": "poisson",
            "adjacency": "add-remove",
        },
        3.0,
        "composition",
    ),
]

#: issue 11: any single account at most 0.2 s in process; any calibrate at most 1 s
ACCOUNT_TARGET = 0.2
CALIBRATE_TARGET = 1.0


_FRESH = itertools.count(1)


def cold_account_seconds(run: Run, repeats: int) -> tuple[tuple[float, float], Any]:
    """Median (wall, CPU) seconds of ``account`` on runs no cache has seen (sigma moved by 1e-9
    relative per repeat), after one warm-up call that pays the imports; and the last report."""
    account(run.replace(noise_std=run.sigma * (1 - 1e-7)), delta=DELTA)  # imports, not caches
    walls, cpus, report = [], [], None
    for _ in range(repeats):
        # a noise no call has used yet (settings share runs' parameters, and caches are per run)
        fresh = run.replace(noise_std=run.sigma * (1 + 1e-9 * next(_FRESH)))
        t0, c0 = time.perf_counter(), time.process_time()
        report = account(fresh, delta=DELTA)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return (statistics.median(walls), statistics.median(cpus)), report


def _verdict(secs: float, target: float, digits: int = 2) -> str:
    return f"{secs:.{digits}f} ({'ok' if secs <= target else 'MISSED'})"


def _timed(secs: tuple[float, float], target: float, digits: int = 2) -> str:
    """``wall / cpu (verdict)``: the verdict is taken on the CPU time, which a shared machine's
    load does not inflate (wall time also counts the waits for a core)."""
    wall, cpu = secs
    return f"{wall:.{digits}f} / {_verdict(cpu, target, digits)}"


def _clock(func: Any, *args: Any, **kwargs: Any) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    func(*args, **kwargs)
    return time.perf_counter() - t0, time.process_time() - c0


def speed_table(repeats: int, calibrate: bool) -> str:
    rows = [
        (
            "| setting | best bound | epsilon | account, cold (wall / CPU s; target "
            f"{ACCOUNT_TARGET:g}) | calibrate noise (wall / CPU s; target {CALIBRATE_TARGET:g}) | "
            "calibrate epochs (wall / CPU s) | calibrate batch size (wall / CPU s) |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for name, kw, target_eps, klass in SETTINGS:
        run = Run(**kw)
        secs, report = cold_account_seconds(run, repeats)
        best = report.best
        cal_n = cal_e = cal_b = "-"
        if calibrate:
            cal_b = _batch_size_cell(run, target_eps)[0]
            cal_n = _timed(
                _clock(calibrate_noise, run, epsilon=target_eps, delta=DELTA),
                CALIBRATE_TARGET,
            )
            try:
                cal_e = _timed(
                    _clock(calibrate_epochs, run, epsilon=target_eps, delta=DELTA),
                    CALIBRATE_TARGET,
                )
            except Exception as exc:  # noqa: BLE001 - reported in the table
                cal_e = f"error: {exc}"[:40]
        rows.append(
            f"| {name} | {best.bound if best else '-'} | {best.epsilon:.4g} | "
            f"{_timed(secs, ACCOUNT_TARGET, digits=4)} | {cal_n} | {cal_e} | {cal_b} |"
        )
    return "\n".join(rows)


def _batch_size_cell(run: Run, target_eps: float) -> tuple[str, str, str]:
    """``calibrate_batch_size`` of ``run`` at ``target_eps``: (timing cell, answer, epsilon);
    "-" for full-batch gd, which has no batch size to choose."""
    if run.algorithm == "gd":
        return "- (gd: no batch size)", "-", "-"
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        cal = calibrate_batch_size(run, epsilon=target_eps, delta=DELTA)
    except Exception as exc:  # noqa: BLE001 - reported in the table
        return f"error: {exc}"[:40], "-", "-"
    secs = (time.perf_counter() - t0, time.process_time() - c0)
    best = cal.report.best
    eps = f"{best.epsilon:.4g}" if best is not None else "-"
    return _timed(secs, CALIBRATE_TARGET), str(cal.batch_size), eps


def batch_size_table() -> str:
    """``calibrate_batch_size`` of every setting with a batch size (target epsilon as in the speed
    table; the run's epochs and noise input fixed): the answer, its direction (largest under a
    fixed noise multiplier, smallest under a fixed noise std), its epsilon and the time."""
    rows = [
        (
            "| setting | noise kept | target epsilon | start b | batch size | epsilon there | "
            f"calibrate batch size (wall / CPU s; target {CALIBRATE_TARGET:g}) |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for name, kw, target_eps, _ in SETTINGS:
        run = Run(**kw)
        if run.algorithm == "gd":
            continue
        account(run, delta=DELTA)  # imports, as in the speed table
        cell, b, eps = _batch_size_cell(run, target_eps)
        kept = (
            f"z = {run.noise_multiplier:g} ({batch_size_direction(run)})"
            if run.noise_multiplier is not None
            else f"sigma = {run.sigma:g} ({batch_size_direction(run)})"
        )
        rows.append(f"| {name} | {kept} | {target_eps:g} | {run.b} | {b} | {eps} | {cell} |")
    return "\n".join(rows)


#: the run of the extremes table (the lead's measurement of issue 11): n = 60000, b = 256,
#: lr = 0.05, sigma = 0.02, L = 2 (or clip 1: L = 2C), M = 1; each setting adds its geometry
EXTREME_BASE: dict[str, Any] = {
    "n": 60000,
    "batch_size": 256,
    "lr": 0.05,
    "noise_std": 0.02,
    "sensitivity": 2.0,
    "smoothness": 1.0,
}
_SC = {"strong_convexity": 0.002}
_CONVEX_D = {"convex": True, "diameter": 10.0}
_SC_D = {"strong_convexity": 0.002, "diameter": 10.0}
_NONCONVEX_D = {"diameter": 10.0}
_CLIP = {"sensitivity": None, "clip": 1.0}
_RATE_1 = {"batch_size": 59999}  # sampling rate 0.99998

#: (name, what the setting adds to EXTREME_BASE): every algorithm, sampling and geometry the
#: accountant supports (None removes a key of the base)
EXTREME_SETTINGS: list[tuple[str, dict[str, Any]]] = [
    ("gd, no geometry", {"algorithm": "gd", "batch_size": None}),
    ("gd strongly convex", {"algorithm": "gd", "batch_size": None, **_SC}),
    ("gd convex + D, clip", {"algorithm": "gd", "batch_size": None, **_CONVEX_D, **_CLIP}),
    ("gd strongly convex + D", {"algorithm": "gd", "batch_size": None, **_SC_D}),
    (
        "gd smooth non-convex + D, clip",
        {"algorithm": "gd", "batch_size": None, **_NONCONVEX_D, **_CLIP},
    ),
    ("cgd, no geometry", {"algorithm": "cgd"}),
    ("cgd strongly convex", {"algorithm": "cgd", **_SC}),
    ("cgd convex + D, clip", {"algorithm": "cgd", **_CONVEX_D, **_CLIP}),
    ("cgd strongly convex + D", {"algorithm": "cgd", **_SC_D}),
    ("sgd shuffle", {"algorithm": "sgd", "sampling": "shuffle", **_SC}),
    ("sgd uniform, no geometry", {"algorithm": "sgd", "sampling": "uniform"}),
    ("sgd uniform strongly convex", {"algorithm": "sgd", "sampling": "uniform", **_SC}),
    ("sgd uniform convex + D", {"algorithm": "sgd", "sampling": "uniform", **_CONVEX_D}),
    (
        "sgd uniform convex + D, clip",
        {"algorithm": "sgd", "sampling": "uniform", **_CONVEX_D, **_CLIP},
    ),
    (
        "sgd uniform strongly convex + D, clip",
        {"algorithm": "sgd", "sampling": "uniform", **_SC_D, **_CLIP},
    ),
    (
        "sgd uniform smooth non-convex + D, clip",
        {"algorithm": "sgd", "sampling": "uniform", **_NONCONVEX_D, **_CLIP},
    ),
    ("sgd poisson replace (sensitivity only)", {"algorithm": "sgd", "sampling": "poisson"}),
    ("sgd poisson replace, clip", {"algorithm": "sgd", "sampling": "poisson", **_CLIP}),
    (
        "sgd poisson add-remove, clip",
        {"algorithm": "sgd", "sampling": "poisson", "adjacency": "add-remove", **_CLIP},
    ),
    (
        "sgd uniform sc + D, clip, rate ~1",
        {"algorithm": "sgd", "sampling": "uniform", **_SC_D, **_CLIP, **_RATE_1},
    ),
    ("sgd poisson replace, rate ~1", {"algorithm": "sgd", "sampling": "poisson", **_RATE_1}),
    (
        "sgd poisson add-remove, clip, rate ~1",
        {"algorithm": "sgd", "sampling": "poisson", "adjacency": "add-remove", **_CLIP, **_RATE_1},
    ),
]
EXTREME_STEPS = (10**3, 10**5, 10**7)
EXTREME_DELTAS = (1e-5, 1e-12)


def extreme_run(extra: dict[str, Any], steps: int) -> Run:
    """The extremes table's run of one setting at ``steps``."""
    kw = {**EXTREME_BASE, **extra, "steps": steps}
    return Run(**{k: v for k, v in kw.items() if v is not None})


def extremes_table(
    steps: tuple[int, ...] = EXTREME_STEPS, profile: int = 0
) -> tuple[str, list[str]]:
    """One cold ``account`` per setting, T and delta (CPU seconds; target ACCOUNT_TARGET), and
    the cProfile top functions of the ``profile`` slowest cells."""
    import cProfile
    import io
    import pstats

    for _, extra in EXTREME_SETTINGS:  # imports (scipy.stats, the PLD engine), not caches
        account(extreme_run(extra, 10), delta=DELTA)
    rows = [
        (
            "| setting | T | delta | best bound | epsilon | account (wall / CPU s; target "
            f"{ACCOUNT_TARGET:g}) |"
        ),
        "|---|---|---|---|---|---|",
    ]
    slow: list[tuple[float, str, Run, float]] = []
    for name, extra in EXTREME_SETTINGS:
        for T in steps:
            for delta in EXTREME_DELTAS:
                run = extreme_run(extra, T)
                fresh = run.replace(noise_std=run.sigma * (1 + 1e-9 * next(_FRESH)))
                t0, c0 = time.perf_counter(), time.process_time()
                report = account(fresh, delta=delta)
                secs = (time.perf_counter() - t0, time.process_time() - c0)
                best = report.best
                eps = f"{best.epsilon:.4g}" if best else "-"
                rows.append(
                    f"| {name} | {T:.0e} | {delta:g} | {best.bound if best else '-'} | {eps} | "
                    f"{_timed(secs, ACCOUNT_TARGET, digits=3)} |"
                )
                slow.append((secs[1], f"{name}, T={T:.0e}, delta={delta:g}", run, delta))
    profiles = []
    for cpu, label, run, delta in sorted(slow, key=lambda x: -x[0])[:profile]:
        fresh = run.replace(noise_std=run.sigma * (1 + 1e-9 * next(_FRESH)))
        prof = cProfile.Profile()
        prof.enable()
        account(fresh, delta=delta)
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(12)
        profiles.append(f"### {label} ({cpu:.3f} CPU s)\n\n```\n{out.getvalue().strip()}\n```")
    return "\n".join(rows), profiles


#: the exact fast paths of the PLD kernels that ``--paired`` switches off for its "before" column
#: (issue 11, session 9b): the certified tilt bisection and the remembered tail summaries
PAIRED_SWITCHES = ("_CERTIFIED_BISECTION", "_REMEMBER_TAIL_SUMMARIES")


def paired_table(repeats: int = 4) -> str:
    """The sampled extreme cells at T = 1e5 and 1e7 with the kernels' exact fast paths
    (``PAIRED_SWITCHES``) off and on, alternately in the same process and the same seconds (a
    fresh noise for every account, so no cache answers): median (min-max) CPU s of each side.
    That both sides give the same values is checked by the tests
    (``tests/notions/test_pld_certified_bisection.py``), with every cache cleared between them."""
    from lastiterate.notions.pld import kernels

    def switch(on: bool) -> None:
        for name in PAIRED_SWITCHES:
            setattr(kernels, name, on)

    rows = [
        "| setting | T | delta | before: CPU s, median (min-max) | after |",
        "|---|---|---|---|---|",
    ]
    settings = dict(EXTREME_SETTINGS)
    for name in PAIRED_SETTINGS:
        for T in (10**5, 10**7):
            for delta in EXTREME_DELTAS:
                run = extreme_run(settings[name], T)
                secs: dict[bool, list[float]] = {False: [], True: []}
                for r in range(repeats):
                    for on in (False, True) if r % 2 == 0 else (True, False):
                        switch(on)
                        fresh = run.replace(noise_std=run.sigma * (1 + 1e-9 * next(_FRESH)))
                        c0 = time.process_time()
                        account(fresh, delta=delta)
                        secs[on].append(time.process_time() - c0)
                switch(True)
                cells = [
                    f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"
                    for v in (secs[False], secs[True])
                ]
                rows.append(f"| {name} | {T:.0e} | {delta:g} | {cells[0]} | {cells[1]} |")
    return "\n".join(rows)


#: the settings of ``--paired`` (the sampled runs whose compositions place tilted passes)
PAIRED_SETTINGS = (
    "sgd uniform strongly convex",
    "sgd uniform convex + D",
    "sgd uniform convex + D, clip",
    "sgd uniform strongly convex + D, clip",
    "sgd uniform sc + D, clip, rate ~1",
    "sgd poisson add-remove, clip",
    "sgd poisson add-remove, clip, rate ~1",
)


#: the noise of every run of :func:`extreme_values` is the setting's times this factor: fixed, so
#: that two versions of the library are compared on the same runs (the tables' fresh noises are
#: not), and off the setting's own noise, which warm-up calls may have cached
EXACT_NOISE_FACTOR = 1.0 + 1e-9


def extreme_values(calibrations: bool = True) -> dict[str, Any]:
    """Every result of every extreme cell (and, with ``calibrations``, the answers of the timed
    extreme calibrations) with its numbers as ``repr`` strings, so that a before/after comparison
    (``--dump-values`` / ``--compare-values``) sees every bit: keys ``"setting|T|delta"`` (and
    ``"calibrate setting|T"``)."""
    out: dict[str, Any] = {}
    for name, extra in EXTREME_SETTINGS:
        for T in EXTREME_STEPS:
            for delta in EXTREME_DELTAS:
                run = extreme_run(extra, T)
                rep = account(run.replace(noise_std=run.sigma * EXACT_NOISE_FACTOR), delta=delta)
                out[f"{name}|{T}|{delta!r}"] = {
                    "results": [
                        [r.bound, r.kind, r.theorem, repr(r.epsilon), repr(r.delta)]
                        for r in rep.results
                    ],
                    "not_applicable": [[n.bound, n.reason] for n in rep.not_applicable],
                    "failures": [[f.bound, f.reason] for f in rep.failures],
                }
    if calibrations:
        settings = dict(EXTREME_SETTINGS)
        for name in EXTREME_CALIBRATIONS:
            for T in (10**5, 10**7):
                run = extreme_run(settings[name], T)
                run = run.replace(noise_std=run.sigma * EXACT_NOISE_FACTOR)
                best = account(run, delta=DELTA).best
                assert best is not None
                target = 0.7 * best.epsilon
                cal = calibrate_noise(run, epsilon=target, delta=DELTA)
                cal_e = calibrate_epochs(run, epsilon=target, delta=DELTA, max_epochs=1e9)
                out[f"calibrate {name}|{T}"] = [
                    repr(cal.noise_std),
                    repr(cal.report.best.epsilon if cal.report.best else None),
                    repr(cal_e.epochs),
                    repr(cal_e.report.best.epsilon if cal_e.report.best else None),
                ]
    return out


def compare_values(before: dict[str, Any], after: dict[str, Any]) -> tuple[list[str], list[str]]:
    """``(smaller, changed)``: the cells whose results differ, and among them those where some
    epsilon (or delta) of the same bound, kind and theorem is SMALLER after than before or a
    result disappeared (a possible under-report: the lead must look at each)."""
    smaller, changed = [], []
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key), after.get(key)
        if a == b:
            continue
        changed.append(key)
        if not isinstance(b, dict) or not isinstance(a, dict):
            continue
        now = {tuple(r[:3]): r[3:] for r in a["results"]}
        for r in b["results"]:
            got = now.get(tuple(r[:3]))
            if got is None or any(float(x) < float(y) for x, y in zip(got, r[3:])):
                smaller.append(key)
                break
    return smaller, changed


#: the settings of the extremes table whose calibrations are timed (the sampled runs, where a
#: full accounting costs the most)
EXTREME_CALIBRATIONS = (
    "sgd uniform strongly convex",
    "sgd uniform convex + D, clip",
    "sgd poisson add-remove, clip",
    "sgd poisson replace (sensitivity only)",
)


def extreme_calibration_table(steps: tuple[int, ...] = (10**5, 10**7)) -> str:
    """``calibrate_noise`` and ``calibrate_epochs`` (delta 1e-5, target 0.7 x the run's best
    epsilon, so that the answer lies away from the run itself) of the sampled extreme runs, CPU
    seconds against CALIBRATE_TARGET."""
    rows = [
        (
            "| setting | T | target epsilon | calibrate noise (wall / CPU s; target "
            f"{CALIBRATE_TARGET:g}) | sigma | calibrate epochs (wall / CPU s) | epochs |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    settings = dict(EXTREME_SETTINGS)
    for name in EXTREME_CALIBRATIONS:
        for T in steps:
            run = extreme_run(settings[name], T)
            run = run.replace(noise_std=run.sigma * (1 + 1e-9 * next(_FRESH)))
            best = account(run, delta=DELTA).best
            assert best is not None
            target = 0.7 * best.epsilon
            t0, c0 = time.perf_counter(), time.process_time()
            cal = calibrate_noise(run, epsilon=target, delta=DELTA)
            noise = (time.perf_counter() - t0, time.process_time() - c0)
            t0, c0 = time.perf_counter(), time.process_time()
            cal_e = calibrate_epochs(run, epsilon=target, delta=DELTA, max_epochs=1e9)
            epochs = (time.perf_counter() - t0, time.process_time() - c0)
            rows.append(
                f"| {name} | {T:.0e} | {target:.4g} | {_timed(noise, CALIBRATE_TARGET)} | "
                f"{cal.noise_std:.6g} | {_timed(epochs, CALIBRATE_TARGET)} | "
                f"{'unlimited' if cal_e.epochs is None else f'{cal_e.epochs:g}'} |"
            )
    return "\n".join(rows)


def _peer_epsilons(q: float, z: float, steps: int) -> dict[str, float]:
    """What the peers report for the run treated as Poisson DP-SGD (add/remove, every iterate)."""
    import dp_accounting
    from opacus.accountants import PRVAccountant, RDPAccountant

    out: dict[str, float] = {}
    rdp = RDPAccountant()
    rdp.history = [(z, q, steps)]
    out["opacus_rdp"] = rdp.get_epsilon(DELTA)
    try:
        prv = PRVAccountant()
        prv.history = [(z, q, steps)]
        out["opacus_prv"] = prv.get_epsilon(DELTA)
    except Exception:  # noqa: BLE001 - PRV fails at large epsilon (Opacus #601)
        out["opacus_prv"] = float("nan")
    acc = dp_accounting.pld.PLDAccountant()
    acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)), steps)
    out["dp_accounting_pld"] = acc.get_epsilon(DELTA)
    return out


def _dp_accounting_same_run(run: Run) -> float:
    """dp_accounting on the run that was actually executed (replace-one adjacency):

    * cgd: each example is used once per epoch, a Gaussian with noise multiplier b sigma / L
      relative to the replace-one sensitivity, composed E times (PLD);
    * sgd with uniform fixed-size batches: SampledWithoutReplacementDpEvent under REPLACE_ONE
      (its only accountant for this sampling is RDP).  The Gaussian's multiplier is taken
      relative to the full replace-one sensitivity L (google/differential-privacy #378).
    """
    import dp_accounting
    from dp_accounting import NeighboringRelation

    z = run.b * run.sigma / run.L
    if run.algorithm == "cgd":
        acc = dp_accounting.pld.PLDAccountant()
        acc.compose(dp_accounting.GaussianDpEvent(z), run.uses)
        return acc.get_epsilon(DELTA)
    acc = dp_accounting.rdp.RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
    event = dp_accounting.SampledWithoutReplacementDpEvent(
        run.n, run.b, dp_accounting.GaussianDpEvent(z)
    )
    acc.compose(event, run.T)
    return acc.get_epsilon(DELTA)


def tightness_table() -> str:
    """Paper 000 section 4.4 (MNIST regularised logistic regression): L/(b sigma) = 2/3.

    Two kinds of peer numbers: what dp_accounting reports for the run actually executed (cyclic or
    uniform fixed-size batches, replace-one), and what a user gets by describing the run to Opacus /
    dp_accounting as Poisson DP-SGD with add/remove adjacency (q = b/n, z = 3): those assume a
    sampling scheme and adjacency the run does not have, so they are NOT guarantees for it.
    """
    rows = [
        (
            "| run | epochs | ours (best bound) | ours: composition | dp_accounting, same "
            "run | Opacus RDP (as Poisson add/remove) | Opacus PRV (as Poisson) | "
            "dp_accounting PLD (as Poisson) |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for algo, extra in (("cgd", {}), ("sgd", {"sampling": "uniform"})):
        for epochs in (50, 100, 200):
            run = Run(
                algorithm=algo,
                n=60000,
                batch_size=1500,
                epochs=epochs,
                lr=0.05,
                noise_std=0.01,
                sensitivity=10.0,
                strong_convexity=0.002,
                smoothness=32.5,
                **extra,
            )
            rep = account(run, delta=DELTA)
            best = rep.best
            comp = min(
                r.epsilon
                for r in rep.results
                if r.bound.endswith("composition") and r.kind == "bound"
            )
            same = _dp_accounting_same_run(run)
            peers = _peer_epsilons(0.025, 3.0, run.T)
            rows.append(
                f"| {algo} lambda=0.002 | {epochs} | {best.epsilon:.3f} ({best.bound}) | "
                f"{comp:.3f} | {same:.3f} | {peers['opacus_rdp']:.3f} | {peers['opacus_prv']:.3f} "
                f"| {peers['dp_accounting_pld']:.3f} |"
            )
    return "\n".join(rows)


STARTUP_SCRIPT = """
import dp_accounting
acc = dp_accounting.pld.PLDAccountant()
acc.compose(
    dp_accounting.PoissonSampledDpEvent(256 / 60000, dp_accounting.GaussianDpEvent(1.1)), 14000
)
print(acc.get_epsilon(1e-5))
"""


def _installed_env(pycache: str) -> dict[str, str]:
    """The environment of an installed package: bytecode cached (here under ``pycache``, so the
    checkout stays clean) even where the shell sets ``PYTHONDONTWRITEBYTECODE``, which would make
    every process recompile lastiterate's sources while numpy, scipy and dp_accounting load their
    installed ``.pyc`` files."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


#: the extreme settings whose whole ``lastiterate account`` process the start-up table also times
#: (at T = 1e7, delta = 1e-12: the slowest cells of the extremes table, issue 11)
HEAVY_CLI_SETTINGS = (
    "sgd uniform strongly convex",
    "sgd uniform convex + D, clip",
    "sgd uniform strongly convex + D, clip",
    "sgd uniform sc + D, clip, rate ~1",
    "sgd poisson add-remove, clip",
    "sgd poisson add-remove, clip, rate ~1",
)


def _cli_flags(run: Run) -> list[str]:
    """The ``lastiterate account`` flags that describe ``run``: each constructor input that is
    set, as ``--name=value`` (``--convex`` alone for a convex run)."""
    flags = []
    for name in Run.field_names():
        value = getattr(run, name)
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        text = value if isinstance(value, str) else repr(value)  # floats to the last digit
        flags.append(flag if value is True else f"{flag}={text}")
    return flags


def startup_table(repeats: int) -> str:
    """Whole-process seconds of each command: one untimed warm-up run (it writes the bytecode
    cache), then the median of ``repeats`` runs."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(STARTUP_SCRIPT)
        script = fh.name
    pycache = tempfile.TemporaryDirectory(prefix="lastiterate-pycache-")
    env = _installed_env(pycache.name)
    ours_cmd = [
        sys.executable,
        "-m",
        "lastiterate.cli",
        "account",
        "--algorithm",
        "sgd",
        "--n",
        "60000",
        "--batch-size",
        "256",
        "--steps",
        "14000",
        "--lr",
        "0.1",
        "--noise-multiplier",
        "1.1",
        "--clip",
        "1",
        "--sampling",
        "poisson",
        "--adjacency",
        "add-remove",
        "--bound",
        "pld-composition",
        "--json",
    ]
    full_cmd = ours_cmd[:-3] + ["--json"]
    cmds = {
        "interpreter start-up (python -c pass)": [sys.executable, "-c", "pass"],
        "plain script, dp_accounting PLD": [sys.executable, script],
        "lastiterate account --bound pld-composition": ours_cmd,
        "lastiterate account (all bounds)": full_cmd,
    }
    settings = dict(EXTREME_SETTINGS)
    for name in HEAVY_CLI_SETTINGS:
        cmds[f"lastiterate account, extreme: {name}, T = 1e7, delta = 1e-12"] = [
            sys.executable,
            "-m",
            "lastiterate.cli",
            "account",
            *_cli_flags(extreme_run(settings[name], 10**7)),
            "--delta",
            "1e-12",
            "--json",
        ]
    rows = [
        (
            "| command | median seconds, whole process (wall / CPU) | above the interpreter "
            "(wall / CPU; target 0.5) |"
        ),
        "|---|---|---|",
    ]
    base: tuple[float, float] | None = None
    for name, cmd in cmds.items():
        walls, cpus = [], []
        subprocess.run(cmd, check=True, capture_output=True, env=env)  # warm-up: bytecode
        for _ in range(repeats):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=env)
            walls.append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        med = (statistics.median(walls), statistics.median(cpus))
        if base is None:
            base = med
            rows.append(f"| {name} | {med[0]:.3f} / {med[1]:.3f} | - |")
        elif name.startswith("lastiterate"):
            above = (med[0] - base[0], med[1] - base[1])
            rows.append(f"| {name} | {med[0]:.3f} / {med[1]:.3f} | {_timed(above, 0.5, 3)} |")
        else:  # a peer: no target
            rows.append(
                f"| {name} | {med[0]:.3f} / {med[1]:.3f} | "
                f"{med[0] - base[0]:.3f} / {med[1] - base[1]:.3f} |"
            )
    os.unlink(script)
    pycache.cleanup()
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="fewer repeats, no calibration timings"
    )
    parser.add_argument(
        "--extremes-only",
        action="store_true",
        help="print only the extremes table (T up to 1e7, delta 1e-12, sampling rate near 1)",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="K",
        help="with the extremes table: cProfile of its K slowest cells",
    )
    parser.add_argument(
        "--paired",
        action="store_true",
        help="print only the paired table: the sampled extreme cells with the PLD kernels' exact "
        "fast paths off and on, alternately (CPU s)",
    )
    parser.add_argument(
        "--dump-values",
        metavar="FILE",
        help="write every result of every extreme cell and the extreme calibrations' answers "
        "(numbers as repr strings, fixed noises) to FILE as JSON, and nothing else",
    )
    parser.add_argument(
        "--compare-values",
        metavar="FILE",
        help="recompute what --dump-values writes and compare with FILE (another version's "
        "dump): list the changed cells; exit 1 if any epsilon is smaller or a result is gone",
    )
    parser.add_argument(
        "--batch-size-only",
        action="store_true",
        help="print only the batch-size calibration table",
    )
    parser.add_argument(
        "--startup-only",
        action="store_true",
        help="print only the start-up table (whole-process timings of the CLI)",
    )
    args = parser.parse_args()
    if args.dump_values or args.compare_values:
        import json

        values = extreme_values()
        if args.dump_values:
            with open(args.dump_values, "w") as fh:
                json.dump(values, fh, indent=1, sort_keys=True)
            print(f"wrote {len(values)} cells to {args.dump_values}")
            return
        with open(args.compare_values) as fh:
            smaller, changed = compare_values(json.load(fh), values)
        print(f"{len(values)} cells: {len(changed)} changed, {len(smaller)} with a smaller value")
        for key in changed:
            print(("SMALLER  " if key in smaller else "changed  ") + key)
        sys.exit(1 if smaller else 0)
    repeats = 1 if args.quick else 3
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"# lastiterate accountant benchmark\n\nmachine: {os.cpu_count()} cores, Python "
        f"{platform.python_version()}\n"
    )
    if args.paired:
        for _, extra in EXTREME_SETTINGS:  # imports (scipy.stats, the PLD engine), not caches
            account(extreme_run(extra, 10), delta=DELTA)
        print("## Paired: the PLD kernels' exact fast paths off / on (CPU s)\n")
        print(paired_table())
        return
    if args.batch_size_only:
        print("## Batch-size calibration (in process, one call each)\n")
        print(batch_size_table())
        return
    if args.extremes_only or not (args.startup_only or args.quick):
        print(
            "## Extremes: one cold account per run (T up to 1e7, delta down to 1e-12, sampling "
            "rate near 1)\n"
        )
        table, profiles = extremes_table(profile=args.profile)
        print(table)
        print(
            "\n## Extremes: calibrations of the sampled runs (delta 1e-5, target 0.7 x the "
            "run's epsilon)\n"
        )
        print(extreme_calibration_table())
        for p in profiles:
            print("\n" + p)
        if args.extremes_only:
            return
        print()
    if not args.startup_only:
        print("## Seconds per call (in process, median)\n")
        print(speed_table(repeats, calibrate=not args.quick))
        if not args.quick:
            print("\n## Batch-size calibration (in process, one call each)\n")
            print(batch_size_table())
        print("\n## Tightness: paper 000 MNIST logistic-regression runs (delta = 1e-5)\n")
        print(tightness_table())
    print(
        "\n## Start-up: whole process, plain DP-SGD composition (q = "
        "256/60000, z = 1.1, T = 14000)\n\nBytecode cached as in an installed package, after one "
        "warm-up run of each command.\n"
    )
    print(startup_table(max(repeats, 7)))
    load_end = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"\nLoad average (1, 5, 15 min) at the start: {load_start}; at the end: {load_end} "
        f"({os.cpu_count()} cores; the machine is shared, so wall times include waiting)."
    )


if __name__ == "__main__":
    main()
