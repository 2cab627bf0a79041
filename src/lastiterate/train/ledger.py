"""Privacy ledger (JSON lines) and atomic checkpoints.

Ledger
------
One JSON object per line, appended after every epoch and at the end of training (and at start,
resume and budget stop).  Each line holds the ``run_id``, the event, ``steps_done``, the Run
TRUNCATED to the steps done (``run``: what has actually been executed) and ``guarantee``: the
accountant's best bound and the composition bound for releasing the model at that step.

Atomicity: a line is written with ONE ``write`` on a file descriptor opened with ``O_APPEND``,
followed by ``fsync``.  A crash can at worst leave a truncated LAST line; :func:`read_ledger`
ignores it, and :meth:`Ledger.open` cuts such a partial tail before appending, so a later line is
never glued onto a fragment.

Double counting: every line carries the CUMULATIVE number of steps of its run; the guarantee of
a run is that of its last line.  On resume the trainer restarts from the last checkpoint's step
counter and writes a ``resume`` line with that count: steps executed after the checkpoint by the
killed process are discarded with its state -- their iterates were never released, and the
resumed process replays exactly the same batches and noise (stateless seeding, see
:mod:`lastiterate.train.sampling`), so the final model is the one an uninterrupted run gives.

What the guarantee covers: releasing ONE model, the iterate at ``steps_done``.  Checkpoint files
are intermediate iterates: keep them private (or delete them); releasing several iterates of one
run, or models of several runs (several ``run_id``) on the same data, composes their guarantees.

Checkpoints
-----------
``torch.save`` to a temporary file in the same directory, ``fsync``, ``os.replace`` over the
target, ``fsync`` of the directory: a reader sees either the previous or the new checkpoint.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

LEDGER_FORMAT = "lastiterate-ledger/1"
CHECKPOINT_FORMAT = "lastiterate-checkpoint/1"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def read_ledger(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All complete records of a ledger (a truncated or corrupt LAST line is ignored).

    A corrupt line anywhere else raises ``ValueError``: that is not a crash artefact.
    """
    p = Path(path)
    if not p.exists():
        return []
    data = p.read_bytes()
    lines = data.split(b"\n")
    records: list[dict[str, Any]] = []
    complete = lines[:-1]  # the part after the last newline is a partial record (or empty)
    for i, raw in enumerate(complete):
        if not raw.strip():
            continue
        try:
            records.append(json.loads(raw))
        except json.JSONDecodeError:
            raise ValueError(f"ledger {p}: line {i + 1} is corrupt") from None
    return records


class Ledger:
    """Append-only JSON-lines privacy ledger."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def open(self) -> Ledger:
        """Create the file if needed and cut a partial last line left by a crash."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size:
                # find the last newline; everything after it is a fragment
                chunk = 1 << 16
                pos = size
                cut = 0
                while pos > 0:
                    start = max(0, pos - chunk)
                    os.lseek(fd, start, os.SEEK_SET)
                    buf = os.read(fd, pos - start)
                    k = buf.rfind(b"\n")
                    if k >= 0:
                        cut = start + k + 1
                        break
                    pos = start
                if cut != size:
                    os.ftruncate(fd, cut)
                    os.fsync(fd)
        finally:
            os.close(fd)
        return self

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Append one record atomically (one O_APPEND write + fsync).  Returns the record written."""
        rec = {"format": LEDGER_FORMAT, "time": _now(), **record}
        line = (json.dumps(rec, sort_keys=False, default=_json_default) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(line)
            while view:
                k = os.write(fd, view)
                view = view[k:]
            os.fsync(fd)
        finally:
            os.close(fd)
        return rec

    def records(self, run_id: str | None = None) -> list[dict[str, Any]]:
        recs = read_ledger(self.path)
        return recs if run_id is None else [r for r in recs if r.get("run_id") == run_id]


def _json_default(obj: Any) -> Any:
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(obj, float):
        return obj
    return str(obj)


def steps_counted(records: list[dict[str, Any]], run_id: str) -> int:
    """The steps a ledger charges to ``run_id``: those of its LAST record (cumulative counts)."""
    recs = [r for r in records if r.get("run_id") == run_id]
    return int(recs[-1]["steps_done"]) if recs else 0


# ---------------------------------------------------------------------- checkpoints
def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def save_checkpoint(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    """``torch.save`` to ``path`` atomically (temporary file + fsync + os.replace)."""
    import torch

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        torch.save({"format": CHECKPOINT_FORMAT, **state}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, p)
    _fsync_dir(p.parent)


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The checkpoint at ``path`` (None when there is none)."""
    import torch

    p = Path(path)
    if not p.exists():
        return None
    state = torch.load(p, map_location="cpu", weights_only=False)
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        from lastiterate.errors import ParameterError

        raise ParameterError("checkpoint", str(p), f"is not a {CHECKPOINT_FORMAT} file")
    return state
