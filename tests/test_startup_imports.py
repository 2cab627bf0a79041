"""Start-up cost of the CLI (issue 11): a command imports only what it uses.

Timings are not tested (the machine is shared; ``benchmarks/accountant.py --startup-only`` measures
them).  What is tested is the cause of a slow start: which modules a whole ``lastiterate`` process
has imported when it ends (``sys.modules``), and that the bound registry imports only the modules
of the bounds asked for.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lastiterate.bounds import BOUND_IDS, BOUND_MODULES, registered

#: libraries no accounting command needs (training, tables, plots, progress bars, peers)
NOT_FOR_ACCOUNTING = (
    "torch",
    "pandas",
    "matplotlib",
    "tqdm",
    "dp_accounting",
    "opacus",
    "sklearn",
    "safetensors",
)

#: the benchmark's start-up run: plain DP-SGD, Poisson sampling, add/remove (fewer steps: the
#: modules a run imports do not depend on T)
POISSON_SGD = (
    "account",
    "--algorithm",
    "sgd",
    "--n",
    "60000",
    "--batch-size",
    "256",
    "--steps",
    "1400",
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
)


def _imported_by(args: list[str]) -> set[str]:
    """Every module in ``sys.modules`` when a fresh ``python -m lastiterate.cli ARGS`` process
    ends (run through :mod:`runpy`, exactly as ``-m`` does; ``python -X importtime`` would miss
    the modules imported through :func:`importlib.import_module`)."""
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['lastiterate', *{args!r}]\n"
        "status = 0\n"
        "try:\n"
        "    runpy.run_module('lastiterate.cli', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n"
        "    status = exc.code\n"
        "print('\\nMODULES', *sorted(sys.modules), file=sys.stderr)\n"
        "sys.exit(status)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stderr.rstrip().splitlines()[-1].split()
    assert last[0] == "MODULES", proc.stderr[-2000:]
    return set(last[1:])


def _imported_by_code(code: str) -> set[str]:
    """Every module in ``sys.modules`` after a fresh interpreter runs ``code``."""
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return set(out.split())


def _loaded(modules: set[str], package: str) -> bool:
    return package in modules or any(m.startswith(package + ".") for m in modules)


def test_importtime_parsing_sees_the_modules_a_command_imports() -> None:
    """The probe itself: an account run does import the PLD engine and numpy (so an empty or
    misparsed module list cannot make the tests below pass)."""
    modules = _imported_by([*POISSON_SGD, "--bound", "pld-composition", "--json"])
    assert {"numpy", "lastiterate.notions.pld", "lastiterate.bounds.composition"} <= modules


@pytest.mark.parametrize("args", [["--help"], ["account", "--help"], ["calibrate", "--help"]])
def test_help_imports_neither_scipy_nor_numpy_nor_torch(args: list[str]) -> None:
    modules = _imported_by(args)
    assert "lastiterate.cli.account" in modules  # the parser was built
    heavy = [p for p in ("scipy", "numpy", *NOT_FOR_ACCOUNTING) if _loaded(modules, p)]
    assert not heavy, f"lastiterate {' '.join(args)} imports {heavy}"


def test_account_one_bound_imports_only_what_that_bound_uses() -> None:
    """``account --bound pld-composition`` (the benchmark's start-up command): no training,
    table, plot or peer library, none of scipy's statistics, quadrature or optimisation (the root
    finding is notions.roots), no scipy.fft (the PLD kernels use numpy.fft), no scipy.special
    (notions.normal), in fact no scipy at all, and none of the other theorems' modules (the
    registry imports the module of the bound asked for)."""
    modules = _imported_by([*POISSON_SGD, "--bound", "pld-composition", "--json"])
    unwanted = [
        p
        for p in (
            *NOT_FOR_ACCOUNTING,
            "scipy.stats",
            "scipy.integrate",
            "scipy.optimize",
            "scipy.fft",
            "scipy",
        )
        if _loaded(modules, p)
    ]
    assert not unwanted, f"account --bound pld-composition imports {unwanted}"
    others = {f"lastiterate.bounds.{m}" for m in BOUND_MODULES.values()} - {
        "lastiterate.bounds.composition"
    }
    assert not others & modules, sorted(others & modules)


def test_account_of_every_bound_needs_no_training_or_peer_library() -> None:
    """The benchmark's all-bounds start-up command: composition bounds only (no geometry), so
    no scipy.optimize either (the sampled-Gaussian PLD and GDP inverses use notions.roots), and
    no scipy.special (notions.normal): no scipy at all."""
    modules = _imported_by([*POISSON_SGD, "--json"])
    unwanted = [
        p
        for p in (*NOT_FOR_ACCOUNTING, "scipy.stats", "scipy.optimize", "scipy")
        if _loaded(modules, p)
    ]
    assert not unwanted, f"account imports {unwanted}"


def test_account_of_every_bound_does_not_import_numpy_ma() -> None:
    """``numpy.ma`` (about 40 ms of a command's start-up) is what ``np.unique`` / ``np.union1d``
    import on first use; the RDP composition's order grid took that path on every Poisson
    add/remove account.  The accounting path uses ``notions.arrays.sorted_unique`` instead."""
    modules = _imported_by([*POISSON_SGD, "--json"])
    assert "lastiterate.bounds.composition" in modules  # the probe: the bounds ran
    assert not _loaded(modules, "numpy.ma"), "account imports numpy.ma"


def test_importing_the_accountant_defers_scipy_optimize_and_integrate() -> None:
    """The modules of the accounting path import scipy.optimize / scipy.integrate only inside the
    functions that solve or integrate (each is ~0.2 s of start-up), and scipy.special not at all
    (its ~0.2 s import is replaced by notions.normal)."""
    modules = _imported_by_code(
        "import lastiterate.accountant, lastiterate.notions.pld, lastiterate.notions.rdp, "
        "lastiterate.notions.clt, lastiterate.notions.tradeoff\n"
        "from lastiterate.bounds import load_all\nload_all()"
    )
    assert "lastiterate.bounds.pabi" in modules and "numpy" in modules  # the probe
    deferred = [
        p
        for p in ("scipy.optimize", "scipy.integrate", "scipy.stats", "scipy.special")
        if _loaded(modules, p)
    ]
    assert not deferred, f"importing the bounds imports {deferred}"


# ------------------------------------------------------------------ the registry's module table
def test_every_bound_id_has_the_module_that_registers_it() -> None:
    assert set(BOUND_MODULES) == set(BOUND_IDS)
    for spec in registered():
        assert spec.func.__module__ == f"lastiterate.bounds.{BOUND_MODULES[spec.id]}", (
            f"{spec.id} ({spec.theorem}) is registered in {spec.func.__module__}, not in the "
            f"module BOUND_MODULES names"
        )


def test_registered_ids_import_only_their_modules_and_keep_the_canonical_order() -> None:
    """In a fresh process: asking for one id imports its module alone and returns exactly the
    theorems a full load gives for it; a later full load returns the same order as a process
    that loaded everything first."""
    code = (
        "import json, sys\n"
        "from lastiterate.bounds import registered\n"
        "one = [(s.id, s.theorem) for s in registered(['langevin-lsi'])]\n"
        "partial = sorted(m for m in sys.modules if m.startswith('lastiterate.bounds.'))\n"
        "full = [(s.id, s.theorem) for s in registered()]\n"
        "print(json.dumps([one, partial, full]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    one, partial, full_after = (
        [tuple(k) if isinstance(k, list) else k for k in x] for x in json.loads(out)
    )
    canonical = [(s.id, s.theorem) for s in registered()]
    assert one == [k for k in canonical if k[0] == "langevin-lsi"] and one
    assert "lastiterate.bounds.langevin" in partial
    others = {f"lastiterate.bounds.{m}" for m in BOUND_MODULES.values()} - {
        "lastiterate.bounds.langevin"
    }
    assert not others & set(partial), partial
    assert full_after == canonical
    assert [k for k in canonical if k[0] == "pld-composition"] == [
        (s.id, s.theorem) for s in registered(["pld-composition"])
    ]


# ------------------------------------------------------------------ the BLAS pool at numpy's load
def _openblas_threads_after(code: str, env: dict[str, str]) -> tuple[int, str | None]:
    """OpenBLAS's pool size (threadpoolctl) and ``OPENBLAS_NUM_THREADS`` after ``code`` runs in
    a fresh interpreter with ``env``."""
    probe = (
        f"{code}\n"
        "import json, os\n"
        "from threadpoolctl import threadpool_info\n"
        "sizes = [i['num_threads'] for i in threadpool_info() if i['internal_api'] == 'openblas']\n"
        "print(json.dumps([sizes[0] if sizes else None, os.environ.get('OPENBLAS_NUM_THREADS')]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    ).stdout
    size, var = json.loads(out.splitlines()[-1])
    return size, var


def test_account_loads_numpy_with_a_one_thread_blas_pool_unless_the_user_chose() -> None:
    """Accounting makes no BLAS call; an OpenBLAS pool spins ~0.1 s of CPU per extra core at
    numpy's load (issue 11).  ``account`` loads numpy with one thread and removes the variable
    again; a size the user set is kept (compared with numpy loaded directly under that value)."""
    pytest.importorskip("threadpoolctl")
    import os

    run_account = (
        "import sys\n"
        "from lastiterate.cli import main\n"
        f"assert main([*{list(POISSON_SGD)!r}, '--bound', 'gdp-composition', '--json']) == 0\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    default_size, _ = _openblas_threads_after("import numpy", env)
    if default_size is None or default_size == 1:
        pytest.skip("numpy has no multi-thread OpenBLAS pool here (another BLAS, or one core)")
    assert _openblas_threads_after(run_account, env) == (1, None)
    chosen = {**env, "OPENBLAS_NUM_THREADS": "2"}
    expected_size, _ = _openblas_threads_after("import numpy", chosen)
    assert _openblas_threads_after(run_account, chosen) == (expected_size, "2")
