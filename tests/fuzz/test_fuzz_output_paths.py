"""Fuzz finding: ``train`` destroyed files given by mistake as its outputs (and ``sweep --csv``,
the ``--plot`` of sweep / account / audit and the model card beside ``--out`` did too).

``--ledger FILE`` cut an existing file after its last newline and appended JSON lines to it,
``--checkpoint FILE`` and ``--out FILE`` replaced any existing file (a CSV, an .npz data set) --
exit 0, the data gone.  Now an existing file is only ever replaced (checkpoint, model, card,
table, plot) or extended (ledger) when it is a file of that kind; anything else is refused with
exit 2 and one line naming the flag, before any work, and left byte for byte as it was.  Tables
and plots are written atomically (temporary file + replace) and leave no temporary behind.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

from lastiterate.cli import main
from lastiterate.errors import ParameterError
from lastiterate.train.ledger import Ledger

TRAIN = [
    "train", "--dataset", "iris", "--model", "logreg", "--algorithm", "gd", "--epochs", "1",
    "--lr", "0.1", "--noise-std", "1", "--clip", "1",
]  # fmt: skip

VICTIMS = {
    "table.csv": b"a,b,t\n1,2,0\n3,4,1\n",
    "notes.txt": b"first line\nlast line without a newline",
    "data.npz": None,  # written by numpy below
    "empty-but-not-ours.json": b"{}",
}


def _victim(tmp_path: Path, name: str) -> Path:
    p = tmp_path / name
    if VICTIMS[name] is None:
        np.savez(p, X=np.zeros((3, 2)), y=np.arange(3))
    else:
        p.write_bytes(VICTIMS[name])
    return p


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("flag", ["--ledger", "--checkpoint", "--out"])
@pytest.mark.parametrize("name", sorted(VICTIMS))
def test_train_never_overwrites_a_foreign_file(tmp_path: Path, flag: str, name: str) -> None:
    victim = _victim(tmp_path, name)
    before = victim.read_bytes()
    rc, out, err = _cli([*TRAIN, flag, str(victim)])
    assert rc == 2 and out == "", (rc, err)
    assert len(err.splitlines()) == 1 and f"{flag[2:]}=" in err and "refusing" in err, err
    assert victim.read_bytes() == before


def test_own_files_are_still_replaced_and_extended(tmp_path: Path) -> None:
    paths = [tmp_path / "m.safetensors", tmp_path / "ck", tmp_path / "ledger.jsonl"]
    argv = [
        *TRAIN,
        "--out",
        str(paths[0]),
        "--checkpoint",
        str(paths[1]),
        "--ledger",
        str(paths[2]),
    ]
    assert _cli(argv)[0] == 0
    lines = paths[2].read_bytes().count(b"\n")
    assert _cli(argv)[0] == 0  # a rerun replaces its model and checkpoint, extends its ledger
    assert paths[2].read_bytes().count(b"\n") > lines
    # a crash fragment of a ledger's first record is still a ledger (cut and reused)
    paths[2].write_bytes(b'{"format": "lastiter')
    Ledger(paths[2]).open()
    assert paths[2].read_bytes() == b""


def test_the_library_refuses_too(tmp_path: Path) -> None:
    victim = _victim(tmp_path, "notes.txt")
    with pytest.raises(ParameterError, match="ledger"):
        Ledger(victim).open()
    assert victim.read_bytes() == VICTIMS["notes.txt"]


def test_train_never_overwrites_a_foreign_model_card(tmp_path: Path) -> None:
    victim = tmp_path / "m.card.json"
    victim.write_bytes(b'{"format": "something else"}')
    rc, out, err = _cli([*TRAIN, "--out", str(tmp_path / "m.safetensors")])
    assert rc == 2 and out == "" and "out=" in err and "refusing" in err, err
    assert victim.read_bytes() == b'{"format": "something else"}'


SWEEP = [
    "sweep", "--algorithm", "gd", "--n", "100", "--lr", "0.1", "--noise-std", "1",
    "--sensitivity", "1", "--vary", "steps=1,2",
]  # fmt: skip
ACCOUNT = [
    "account", "--algorithm", "gd", "--n", "100", "--steps", "2", "--lr", "0.1",
    "--noise-std", "1", "--sensitivity", "1",
]  # fmt: skip


def _foreign_png(path: Path) -> Path:
    """A PNG that lastiterate did not write (matplotlib's own Software tag)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(1, 1))
    fig.savefig(path)
    plt.close(fig)
    return path


def _png_victims(tmp_path: Path) -> list[Path]:
    text = tmp_path / "notes.png"
    text.write_bytes(VICTIMS["notes.txt"])
    return [_foreign_png(tmp_path / "photo.png"), text]


@pytest.mark.parametrize("name", sorted(VICTIMS))
def test_sweep_csv_never_overwrites_a_foreign_file(tmp_path: Path, name: str) -> None:
    victim = _victim(tmp_path, name)
    before = victim.read_bytes()
    rc, out, err = _cli([*SWEEP, "--csv", str(victim)])
    assert rc == 2 and out == "", (rc, err)
    assert len(err.splitlines()) == 1 and "csv=" in err and "refusing" in err, err
    assert victim.read_bytes() == before


@pytest.mark.parametrize("command", ["sweep", "account"])
def test_plots_never_overwrite_a_foreign_file(tmp_path: Path, command: str) -> None:
    for victim in _png_victims(tmp_path):
        before = victim.read_bytes()
        rc, out, err = _cli([*(SWEEP if command == "sweep" else ACCOUNT), "--plot", str(victim)])
        assert rc == 2 and out == "", (rc, err)
        assert len(err.splitlines()) == 1 and "plot=" in err and "refusing" in err, err
        assert victim.read_bytes() == before


def test_audit_plot_never_overwrites_a_foreign_file(tmp_path: Path) -> None:
    victim = _foreign_png(tmp_path / "photo.png")
    before = victim.read_bytes()
    argv = [
        "audit", "canary", "--dataset", "iris", "--model", "logreg", "--algorithm", "gd",
        "--epochs", "1", "--lr", "0.1", "--noise-std", "1", "--clip", "1", "--runs", "10",
        "--plot", str(victim),
    ]  # fmt: skip
    rc, out, err = _cli(argv)
    assert rc == 2 and out == "" and "plot=" in err and "refusing" in err, err
    assert victim.read_bytes() == before


def test_own_tables_and_plots_are_replaced_atomically(tmp_path: Path) -> None:
    table, plot, plot2 = tmp_path / "t.csv", tmp_path / "s.png", tmp_path / "a.png"
    for _ in range(2):  # the second run replaces the first run's files
        assert _cli([*SWEEP, "--csv", str(table), "--plot", str(plot)])[0] == 0
        assert _cli([*ACCOUNT, "--plot", str(plot2)])[0] == 0
    assert table.read_text().startswith("steps,status,best_bound")
    assert plot.read_bytes()[:8] == plot2.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "s.png", "t.csv"]


REPRODUCE = ["reproduce", "paper000-table9", "--quick", "--out"]


@pytest.mark.parametrize("suffix", [".md", ".csv", ".png"])
def test_reproduce_never_overwrites_a_foreign_file(tmp_path: Path, suffix: str) -> None:
    victim = tmp_path / f"paper000-table9{suffix}"
    if suffix == ".png":
        _foreign_png(victim)
    else:
        victim.write_bytes(VICTIMS["table.csv"])
    before = victim.read_bytes()
    rc, _, err = _cli([*REPRODUCE, str(tmp_path)])
    assert rc == 2 and len(err.splitlines()) == 1 and "out=" in err and "refusing" in err, err
    assert victim.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == [victim.name]  # nothing else written


def test_reproduce_replaces_its_own_outputs_atomically(tmp_path: Path) -> None:
    for _ in range(2):
        assert _cli([*REPRODUCE, str(tmp_path)])[0] == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"paper000-table9.{s}" for s in ("csv", "md", "png")]
