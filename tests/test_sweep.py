"""Sweeps (issue 11 section 2): ``account_grid`` and ``lastiterate sweep``.

Every cell must be what ``account`` reports for that point's run (best bound and composition); an
exactly solvable case (full-batch gd without geometry: mu = sqrt(T) L/(n sigma), the Gaussian
mechanism's exact epsilon(delta) solved here with scipy) checks the values independently.
"""

from __future__ import annotations

import csv
import io
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scipy.optimize import brentq
from scipy.stats import norm

import lastiterate as li
from lastiterate import accountant
from lastiterate.cli import main
from lastiterate.errors import ParameterError
from lastiterate.jsonutil import loads
from lastiterate.sweep import MAX_GRID_POINTS, account_grid, plot_grid, to_records

CGD = {
    "algorithm": "cgd",
    "n": 6000,
    "batch_size": 1500,
    "lr": 0.05,
    "sensitivity": 10.0,
    "strong_convexity": 0.002,
    "smoothness": 32.5,
}
CGD_FLAGS = [
    "--algorithm",
    "cgd",
    "--n",
    "6000",
    "--batch-size",
    "1500",
    "--lr",
    "0.05",
    "--sensitivity",
    "10",
    "--strong-convexity",
    "0.002",
    "--smoothness",
    "32.5",
]


def records(table: Any) -> list[dict[str, Any]]:
    return to_records(table)


def assert_row_matches_account(row: dict[str, Any], run: li.Run, **query: Any) -> None:
    report = li.account(run, **query)
    best, comp = report.best, report.composition()
    assert best is not None and comp is not None
    assert row["status"] == "ok"
    assert (row["best_bound"], row["theorem"]) == (best.bound, best.theorem)
    assert (row["epsilon"], row["delta"], row["mu"]) == (best.epsilon, best.delta, best.mu)
    assert (row["composition_bound"], row["composition_epsilon"], row["composition_delta"]) == (
        comp.bound,
        comp.epsilon,
        comp.delta,
    )


# ---------------------------------------------------------------------- values
def test_every_cell_equals_account_point_by_point() -> None:
    epochs, noises = [1, 2, 8, 40], [0.005, 0.01, 0.04]
    base = li.Run(epochs=1, noise_std=0.01, **CGD)
    rows = records(account_grid(base, {"epochs": epochs, "noise_std": noises}, delta=1e-5))
    assert [(r["epochs"], r["noise_std"]) for r in rows] == [(e, s) for e in epochs for s in noises]
    for r in rows:
        assert_row_matches_account(
            r, base.replace(epochs=r["epochs"], noise_std=r["noise_std"]), delta=1e-5
        )
    # not degenerate: the last-iterate bound wins somewhere, and every cell differs
    assert any(r["epsilon"] < r["composition_epsilon"] for r in rows)
    assert len({r["epsilon"] for r in rows}) == len(rows)


def test_sampled_run_cells_equal_account() -> None:
    """A sampled run (sgd, uniform batches, strongly convex, clip): the accountant's PLD path."""
    base = li.Run(
        algorithm="sgd",
        sampling="uniform",
        n=6000,
        batch_size=600,
        epochs=1,
        lr=0.05,
        noise_std=0.02,
        clip=5.0,
        strong_convexity=0.002,
        smoothness=32.5,
    )
    rows = records(account_grid(base, {"epochs": [1, 3], "noise_std": [0.02]}))
    for r in rows:
        assert_row_matches_account(r, base.replace(epochs=r["epochs"]), delta=1e-5)
    assert rows[1]["steps"] == 30 and rows[0]["steps"] == 10


def test_gd_composition_matches_the_exact_gaussian_mechanism() -> None:
    """gd without geometry: T compositions of the Gaussian mechanism with mu0 = L/(n sigma) is
    exactly mu = sqrt(T) mu0 GDP, whose epsilon(delta) solves
    delta = Phi(-e/mu + mu/2) - e^e Phi(-e/mu - mu/2)."""
    base = {"algorithm": "gd", "n": 100, "lr": 0.1, "sensitivity": 1.0}
    rows = records(
        account_grid(base, {"steps": [1, 16, 400], "noise_std": [0.02, 0.1]}, delta=1e-6)
    )
    for r in rows:
        mu = math.sqrt(r["steps"]) * 1.0 / (100 * r["noise_std"])

        def gap(e: float, mu: float = mu) -> float:
            return float(
                norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - 1e-6
            )

        eps = brentq(gap, 0.0, 200.0, xtol=1e-12)
        assert r["status"] == "ok" and r["mu"] == pytest.approx(mu, rel=1e-12)
        assert r["epsilon"] == pytest.approx(eps, rel=1e-6)
        assert r["composition_epsilon"] == pytest.approx(eps, rel=1e-6)
        assert r["per_step_mu"] == pytest.approx(1.0 / (100 * r["noise_std"]), rel=1e-12)


def test_delta_at_epsilon_query() -> None:
    base = li.Run(epochs=1, noise_std=0.01, **CGD)
    rows = records(account_grid(base, {"epochs": [2, 20]}, epsilon=3.0))
    for r in rows:
        assert r["epsilon"] == 3.0
        assert_row_matches_account(r, base.replace(epochs=r["epochs"]), epsilon=3.0)
    assert rows[0]["delta"] < rows[1]["delta"]


# ---------------------------------------------------------- invalid points, reuse, columns
def test_invalid_points_are_rows_with_the_refusal() -> None:
    base = li.Run(epochs=1, noise_std=0.01, **CGD)
    rows = records(account_grid(base, {"batch_size": [1500, 7000], "noise_std": [0.01, -1.0]}))
    status = {(r["batch_size"], r["noise_std"]): r for r in rows}
    assert status[(1500, 0.01)]["status"] == "ok"
    assert (
        status[(7000, 0.01)]["status"] == "invalid"
        and "batch_size" in status[(7000, 0.01)]["reason"]
    )
    assert (
        status[(1500, -1.0)]["status"] == "invalid"
        and "noise_std" in status[(1500, -1.0)]["reason"]
    )
    for r in rows:
        if r["status"] == "invalid":
            assert (
                r["epsilon"] is None
                and r["composition_epsilon"] is None
                and r["best_bound"] is None
            )


def test_point_without_a_bound_is_a_row_with_the_reason() -> None:
    base = li.Run(epochs=1, noise_std=0.01, **CGD)
    rows = records(account_grid(base, {"epochs": [1, 2]}, bounds=["langevin-lsi"]))
    assert all(r["status"] == "no-bound" and r["epsilon"] is None for r in rows)
    assert all("langevin-lsi" in r["reason"] for r in rows)


def test_each_distinct_run_is_accounted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[li.Run] = []
    real = accountant.account

    def counting(run: li.Run, **kw: Any) -> Any:
        calls.append(run)
        return real(run, **kw)

    monkeypatch.setattr(accountant, "account", counting)
    base = li.Run(epochs=1, noise_std=0.01, **CGD)
    messages: list[str] = []
    rows = records(
        account_grid(
            base,
            {"epochs": [1, 2, 1, 2], "noise_std": [0.01, 0.01, 0.02]},
            progress=messages.append,
        )
    )
    assert len(rows) == 12 and len(calls) == 4 and len(set(map(repr, calls))) == 4
    assert len(messages) == 12 and messages[-1].startswith("12/12 ")
    by_point = {(r["epochs"], r["noise_std"]): r["epsilon"] for r in rows}
    assert by_point[(1, 0.01)] == rows[0]["epsilon"] == rows[2 * 3]["epsilon"]


def test_derived_columns_are_those_that_change() -> None:
    base = li.Run(
        epochs=1, noise_std=0.01, clip=5.0, **{k: v for k, v in CGD.items() if k != "sensitivity"}
    )
    table = account_grid(base, {"epochs": [1, 2], "noise_std": [0.01, 0.02]}, as_frame=False)
    cols = list(table[0])
    assert {"steps", "per_step_mu", "noise_multiplier"} <= set(cols)
    assert not {"n", "batch_size", "sensitivity", "contraction", "sampling_rate"} & set(cols)
    assert cols[:2] == ["epochs", "noise_std"] and cols[-2:] == ["reason", "failures"]
    assert [r["steps"] for r in table] == [4, 4, 8, 8]
    assert table[0]["noise_multiplier"] == pytest.approx(0.01 * 1500 / 5.0)


def test_base_may_be_a_mapping_without_the_varied_fields() -> None:
    rows = records(account_grid(dict(CGD), {"epochs": [2], "noise_std": [0.01]}))
    assert_row_matches_account(rows[0], li.Run(epochs=2, noise_std=0.01, **CGD), delta=1e-5)


def test_table_kinds() -> None:
    base = li.Run(epochs=1, noise_std=0.01, **CGD)
    try:
        import pandas  # noqa: F401
    except ImportError:
        assert isinstance(account_grid(base, {"epochs": [1]}), list)
        with pytest.raises(ModuleNotFoundError, match="pandas"):
            account_grid(base, {"epochs": [1]}, as_frame=True)
    else:  # pragma: no cover - depends on the environment
        frame = account_grid(base, {"epochs": [1, 2]})
        assert list(frame["epochs"]) == [1, 2] and records(frame)[0]["reason"] is None


@pytest.mark.parametrize(
    ("vary", "name"),
    [
        ({}, "vary"),
        ({"epoch": [1]}, "vary"),
        ({"epochs": []}, "vary['epochs']"),
        ({"epochs": "12"}, "vary['epochs']"),
        ({"epochs": [1], "steps": [2]}, "vary"),
        ({"noise_std": [1], "noise_multiplier": [2]}, "vary"),
        ({"epochs": list(range(1, 101)), "lr": [0.01 * k for k in range(1, 102)]}, "vary"),
    ],
)
def test_bad_vary_is_a_parameter_error(vary: dict[str, Any], name: str) -> None:
    base = li.Run(epochs=1, noise_std=0.01, **CGD)
    with pytest.raises(ParameterError) as info:
        account_grid(base, vary)
    assert info.value.name == name
    if name == "vary" and "lr" in vary:
        assert str(MAX_GRID_POINTS) in str(info.value)


def test_bad_query_is_refused_before_any_work() -> None:
    base = li.Run(epochs=1, noise_std=0.01, **CGD)
    with pytest.raises(ParameterError, match="delta"):
        account_grid(base, {"epochs": [1]}, delta=2.0)
    with pytest.raises(ParameterError, match="bound"):
        account_grid(base, {"epochs": [1]}, bounds=["no-such-bound"])


def test_plot_needs_an_epochs_axis(tmp_path: Path) -> None:
    base = li.Run(epochs=1, noise_std=0.01, **CGD)
    table = account_grid(base, {"noise_std": [0.01, 0.02]})
    with pytest.raises(ParameterError, match="epochs or steps"):
        plot_grid(table, tmp_path / "x.png")


# ---------------------------------------------------------------------- CLI
def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_text_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(
        capsys, "sweep", *CGD_FLAGS, "--vary", "epochs=1,8", "--vary", "noise-std=0.01,0"
    )
    assert code == 0 and err == ""
    assert "Sweep of 4 runs (epochs[2] x noise-std[2])" in out
    rep = li.account(li.Run(epochs=8, noise_std=0.01, **CGD), delta=1e-5)
    assert f"{rep.best.epsilon:.4g}" in out and f"{rep.composition().epsilon:.4g}" in out
    assert "Points without a guarantee:" in out and "noise_std=0.0 is invalid" in out


def test_cli_text_table_at_fixed_epsilon_shows_delta(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "delta.png"
    code, out, _ = run_cli(
        capsys,
        "sweep",
        *CGD_FLAGS,
        "--vary",
        "epochs=8,16",
        "--noise-std",
        "0.01",
        "--epsilon",
        "3",
        "--plot",
        str(png),
    )
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert code == 0 and "epsilon = 3:" in out
    header = out.splitlines()[2].split()
    assert "delta" in header and "composition_delta" in header and "epsilon" not in header
    rep = li.account(li.Run(epochs=8, noise_std=0.01, **CGD), epsilon=3.0)
    assert f"{rep.best.delta:.4g}" in out


def test_cli_json_equals_account(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        "sweep",
        *CGD_FLAGS,
        "--vary",
        "epochs=1,8",
        "--vary",
        "noise-std=0.01,0.05",
        "--delta",
        "1e-6",
        "--json",
    )
    assert code == 0
    obj = loads(out)  # strict: no NaN / Infinity tokens
    assert obj["vary"] == {"epochs": [1.0, 8.0], "noise_std": [0.01, 0.05]} and obj["delta"] == 1e-6
    assert obj["columns"][:3] == ["epochs", "noise_std", "status"] and len(obj["rows"]) == 4
    for r in obj["rows"]:
        assert_row_matches_account(
            r, li.Run(epochs=r["epochs"], noise_std=r["noise_std"], **CGD), delta=1e-6
        )


def test_cli_csv_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv_path, png = tmp_path / "grid.csv", tmp_path / "grid.png"
    code, out, _ = run_cli(
        capsys,
        "sweep",
        *CGD_FLAGS,
        "--vary",
        "epochs=1,2,8",
        "--vary",
        "noise-std=0.01,0.05",
        "--csv",
        str(csv_path),
        "--plot",
        str(png),
    )
    assert code == 0 and "CSV written to" in out and "Plot written to" in out
    rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert len(rows) == 6
    for r in rows:
        report = li.account(
            li.Run(epochs=float(r["epochs"]), noise_std=float(r["noise_std"]), **CGD), delta=1e-5
        )
        assert float(r["epsilon"]) == report.best.epsilon
        assert float(r["composition_epsilon"]) == report.composition().epsilon
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    code, out, _ = run_cli(
        capsys, "sweep", *CGD_FLAGS, "--vary", "epochs=1", "--noise-std", "0.01", "--csv", "-"
    )
    assert code == 0 and out.splitlines()[0].startswith("epochs,status,best_bound")


def test_cli_vary_from_a_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "grid.toml"
    config.write_text('noise-std = 0.01\nvary = ["epochs=1,8"]\n')
    code, out, _ = run_cli(capsys, "sweep", *CGD_FLAGS, "--config", str(config), "--json")
    assert code == 0 and [r["epochs"] for r in loads(out)["rows"]] == [1.0, 8.0]
    config.write_text('noise-std = 0.01\nvary = "epochs=2"\n')
    code, out, _ = run_cli(capsys, "sweep", *CGD_FLAGS, "--config", str(config), "--json")
    assert code == 0 and [r["epochs"] for r in loads(out)["rows"]] == [2.0]
    code, out, err = run_cli(capsys, "sweep", *CGD_FLAGS, "--vary", "epochs=1", "steps=2")
    assert code == 2 and "steps and epochs" in err


def test_progress_bar_only_when_asked_or_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    base = li.Run(epochs=1, noise_std=0.01, **CGD)
    account_grid(base, {"epochs": [1, 2]})  # stderr is not a terminal here: no bar
    assert capsys.readouterr().err == ""
    account_grid(base, {"epochs": [1, 2]}, show_progress=True)
    assert "accounting grid" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        (["--noise-std", "0.01"], "--vary is required"),
        (["--noise-std", "0.01", "--vary", "epochs"], "vary 'epochs'"),
        (["--noise-std", "0.01", "--vary", "epoch=1,2"], "vary field 'epoch'"),
        (["--noise-std", "0.01", "--vary", "epochs=1,x"], "vary epochs='x'"),
        (["--noise-std", "0.01", "--vary", "steps=1.5"], "vary steps='1.5'"),
        (["--noise-std", "0.01", "--vary", "epochs=inf"], "vary epochs='inf'"),
        (["--noise-std", "0.01", "--vary", "epochs=1,,2"], "vary 'epochs=1,,2'"),
        (["--noise-std", "0.01", "--vary", "epochs=1", "--vary", "epochs=2"], "given twice"),
        (["--noise-std", "0.01", "--vary", "epochs=1", "--vary", "steps=2"], "steps and epochs"),
        (
            ["--epochs", "1", "--vary", f"noise-std={','.join(['0.1'] * (MAX_GRID_POINTS + 1))}"],
            "vary=",
        ),
        (["--noise-std", "0.01", "--vary", "epochs=1", "--json", "--csv", "x.csv"], "--csv"),
        (["--epochs", "1", "--vary", "noise-std=0.1", "--plot", "x.png"], "plot"),
        (["--noise-std", "0.01", "--vary", "epochs=1", "--delta", "0"], "delta"),
        (["--noise-std", "0.01", "--vary", "epochs=1", "--bound", "nope"], "bound"),
    ],
)
def test_cli_bad_input_exit_2_one_line(
    capsys: pytest.CaptureFixture[str], extra: list[str], param: str
) -> None:
    code, out, err = run_cli(capsys, "sweep", *CGD_FLAGS, *extra)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and param in err


def test_sweep_help_does_not_import_heavy_libraries() -> None:
    code = (
        "import contextlib, io\nfrom lastiterate.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    main(['sweep', '--help'])\n"
        "import sys; print(' '.join(sys.modules))"
    )
    # --help exits through SystemExit inside main's parser; catch it to print the modules
    code = code.replace(
        "    main(['sweep', '--help'])",
        "    try:\n        main(['sweep', '--help'])\n    except SystemExit:\n        pass",
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert not {"torch", "scipy", "matplotlib", "numpy"} & set(out.split())
