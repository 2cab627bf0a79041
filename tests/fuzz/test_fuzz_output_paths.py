"""Fuzz finding: ``train`` destroyed files given by mistake as its outputs.

``--ledger FILE`` cut an existing file after its last newline and appended JSON lines to it,
``--checkpoint FILE`` and ``--out FILE`` replaced any existing file (a CSV, an .npz data set) --
exit 0, the data gone.  Now an existing file is only ever replaced (checkpoint, model) or extended
(ledger) when it is a file of that kind; anything else is refused with exit 2 and one line naming
the flag, before training, and left byte for byte as it was.
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
