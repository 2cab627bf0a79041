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

The ledger file is created owner-only (mode 0600) and its lines are standard JSON
(:mod:`lastiterate.jsonutil`: no NaN / Infinity tokens).

Checkpoints
-----------
A checkpoint holds an INTERMEDIATE iterate (and, for a resume, the run's secret state): the
last-iterate guarantee does not cover it, and publishing it costs composition.  Hence:

* **Never unpickled.**  A checkpoint is ONE safetensors file: the tensors (model parameters,
  optimizer moments) in safetensors' own format, everything else as JSON in its metadata (key
  ``lastiterate``), with a SHA-256 of the tensors.  Loading parses the header as JSON and the
  tensors with :mod:`safetensors` only -- no ``torch.load``, no pickle, so a crafted file cannot run
  code.  A truncated, corrupt, tampered or foreign file (e.g. an old pickle checkpoint) is refused
  with :class:`~lastiterate.errors.ParameterError` (CLI: exit 2, one line).
* **Owner-only and atomic.**  Written with mode 0600 to a temporary file in the same directory
  (``os.open(..., O_CREAT | O_EXCL, 0o600)``), ``fsync``, ``os.replace`` over the target, ``fsync``
  of the directory: a reader sees either the previous or the new checkpoint.
* **No temporary file left behind.**  The temporary file is removed on any exception; SIGTERM,
  SIGINT and SIGHUP arriving during the write are deferred until the file is renamed or removed,
  then re-delivered (the process still terminates as the signal asks).  A SIGKILL cannot be
  intercepted: the temporary files of dead processes are removed by the next save.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import secrets
import signal
import stat
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from lastiterate import jsonutil
from lastiterate.errors import ParameterError

LEDGER_FORMAT = "lastiterate-ledger/1"
CHECKPOINT_FORMAT = "lastiterate-checkpoint/2"
#: file mode of ledgers, checkpoints and their temporary files: owner read/write only
PRIVATE_MODE = 0o600


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def read_ledger(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All complete records of a ledger (a truncated or corrupt LAST line is ignored).

    Args:
        path: the ledger file (JSON lines).

    Returns:
        The records in file order (empty when the file does not exist).

    Raises:
        ValueError: a complete line other than the last is corrupt (not a crash artefact).
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


#: how every ledger line starts (``jsonutil.dumps`` of a record whose first key is ``format``)
_LEDGER_PREFIX = b'{"format": "lastiterate-ledger/'


def _refuse_foreign_ledger(path: Path, head: bytes) -> None:
    """Refuse an existing file that does not start like a ledger (a crash may have left only a
    fragment of the first record): opening it would cut its last line and append records to it,
    destroying e.g. a CSV file given by mistake."""
    if not (_LEDGER_PREFIX.startswith(head) or head.startswith(_LEDGER_PREFIX)):
        raise ParameterError(
            "ledger",
            str(path),
            "exists and is not a lastiterate ledger: refusing to append to it; remove it or "
            "choose another file name",
        )


class Ledger:
    """Append-only JSON-lines privacy ledger.

    Args:
        path: the ledger file (created, mode 0600, by :meth:`open` or the first :meth:`append`).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def open(self) -> Ledger:
        """Create the file if needed and cut a partial last line left by a crash.

        Returns:
            This ledger.

        Raises:
            ParameterError: the file cannot be created or opened for appending.
        """
        try:
            return self._open()
        except OSError as exc:
            raise ParameterError(
                "ledger", str(self.path), f"cannot be opened for appending ({exc.strerror or exc})"
            ) from None

    def _open(self) -> Ledger:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, PRIVATE_MODE)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):  # /dev/null, a FIFO: no fsync, no durable record
                raise ParameterError("ledger", str(self.path), "is not a regular file")
            size = info.st_size
            if size:
                _refuse_foreign_ledger(self.path, os.pread(fd, len(_LEDGER_PREFIX), 0))
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
        """Append one record atomically (one O_APPEND write + fsync).

        Args:
            record: JSON values (anything else is written as its ``str``).

        Returns:
            The record written: ``format`` and ``time`` first, then ``record``.

        Raises:
            ParameterError: the file cannot be written (no space, no permission, not a file).
        """
        rec = {"format": LEDGER_FORMAT, "time": _now(), **record}
        line = (jsonutil.dumps(rec, default=str) + "\n").encode()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_MODE)
            try:
                view = memoryview(line)
                while view:
                    k = os.write(fd, view)
                    view = view[k:]
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise ParameterError(
                "ledger", str(self.path), f"cannot be written ({exc.strerror or exc})"
            ) from None
        return rec

    def records(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The ledger's complete records (:func:`read_ledger`), optionally of one run.

        Args:
            run_id: keep only this run's records (default: all).

        Returns:
            The records in file order.

        Raises:
            ValueError: a complete line other than the last is corrupt.
        """
        recs = read_ledger(self.path)
        return recs if run_id is None else [r for r in recs if r.get("run_id") == run_id]


def steps_counted(records: list[dict[str, Any]], run_id: str) -> int:
    """The steps a ledger charges to ``run_id``: those of its LAST record (cumulative counts)."""
    recs = [r for r in records if r.get("run_id") == run_id]
    return int(recs[-1]["steps_done"]) if recs else 0


# ---------------------------------------------------------------------- private files
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


_DEFERRED_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)
)


@contextlib.contextmanager
def deferred_termination() -> Iterator[None]:
    """Defer SIGTERM / SIGINT / SIGHUP for the duration of the block, then re-deliver them.

    Used around the write + rename of a private file so that a termination request can never
    leave a temporary copy of an intermediate iterate behind.  Signal handlers can only be set
    from the main thread; elsewhere the block runs unprotected (its ``finally`` clean-up still
    runs on exceptions)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous: dict[int, Any] = {}

    def hold(signum: int, _frame: Any) -> None:
        pending.append(signum)

    for sig in _DEFERRED_SIGNALS:
        old = signal.getsignal(sig)
        if old is None:  # a handler installed outside Python: leave it alone
            continue
        previous[sig] = old
        signal.signal(sig, hold)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def _temporary_prefix(p: Path) -> str:
    return f".{p.name}.tmp-"


def remove_stale_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files of ``path`` left by processes that no longer run (SIGKILL,
    power loss).  Returns the files removed."""
    p = Path(path)
    removed = []
    prefix = _temporary_prefix(p)
    try:
        candidates = list(p.parent.glob(prefix + "*"))
    except OSError:  # pragma: no cover
        return []
    for tmp in candidates:
        pid_text = tmp.name[len(prefix) :].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _pid_alive(int(pid_text)):
            continue
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed.append(tmp)
    return removed


def _umask() -> int:
    """The process umask (read from /proc when possible: setting it to read it is
    not thread-safe)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def _test_write_delay() -> None:
    """Test hook: keep the temporary file in place long enough for a test to signal the writer."""
    delay = float(os.environ.get("LASTITERATE_TEST_CHECKPOINT_DELAY", "0") or 0)
    if delay > 0:
        time.sleep(delay)


def write_private_file(
    path: str | os.PathLike[str], data: bytes, *, mode: int = PRIVATE_MODE, param: str = "path"
) -> None:
    """Write ``data`` to ``path`` atomically with mode 0600 (module docstring: temporary file with
    ``O_EXCL``, fsync, ``os.replace``, fsync of the directory; no temporary file survives an
    exception or a SIGTERM / SIGINT / SIGHUP).  ``mode``: a public file (the released model) may
    ask for e.g. 0o644, reduced by the umask; the temporary file is always 0600.  An
    operating-system error (no permission, no space, a directory in the way) raises
    :class:`ParameterError` naming ``param``."""
    p = Path(path)
    try:
        _write_atomically(p, data, mode)
    except OSError as exc:
        raise ParameterError(param, str(p), f"cannot be written ({exc.strerror or exc})") from None


def _write_atomically(p: Path, data: bytes, mode: int) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(p)
    tmp = p.with_name(f"{_temporary_prefix(p)}{os.getpid()}-{secrets.token_hex(4)}")
    with deferred_termination():
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
            try:
                os.fchmod(fd, PRIVATE_MODE)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            _test_write_delay()
            if mode != PRIVATE_MODE:
                os.chmod(tmp, mode & ~_umask())
            os.replace(tmp, p)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
    _fsync_dir(p.parent)


# ---------------------------------------------------------------------- checkpoints
_META_KEY = "lastiterate"
_DIGEST_KEY = "lastiterate_tensors_sha256"
_TENSOR = "__tensor__"
_MAX_HEADER = 1 << 28


def _flatten(obj: Any, tensors: dict[str, Any], where: str) -> Any:
    """A JSON tree of ``obj`` whose tensors are moved to ``tensors`` (referenced by name)."""
    # lazy: torch (~1.5 s) only for checkpoints; the ledger and model-file checks do not need it
    import torch

    if isinstance(obj, torch.Tensor):
        name = f"t{len(tensors)}"
        tensors[name] = obj.detach().to("cpu").clone().contiguous()
        return {_TENSOR: name}
    if isinstance(obj, dict):
        if _TENSOR in obj:
            raise ValueError(f"checkpoint state: key {_TENSOR!r} is reserved ({where})")
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise TypeError(
                    f"checkpoint state: keys must be strings, got {k!r} at {where or 'top level'}"
                )
            out[k] = _flatten(v, tensors, f"{where}/{k}")
        return out
    if isinstance(obj, (list, tuple)):
        return [_flatten(v, tensors, f"{where}/{i}") for i, v in enumerate(obj)]
    if obj is None or isinstance(obj, (str, bool, int, float)):
        return obj
    raise TypeError(
        f"checkpoint state: {type(obj).__name__} at {where} is not storable (tensors, JSON values)"
    )


def _unflatten(tree: Any, tensors: dict[str, Any], bad: Any) -> Any:
    if isinstance(tree, dict):
        if _TENSOR in tree:
            name = tree[_TENSOR]
            if len(tree) != 1 or not isinstance(name, str) or name not in tensors:
                raise bad("refers to a tensor it does not contain")
            return tensors[name]
        return {k: _unflatten(v, tensors, bad) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_unflatten(v, tensors, bad) for v in tree]
    return tree


def tensors_digest(tensors: dict[str, Any], text: str = "") -> str:
    """SHA-256 of named tensors (names, dtypes, shapes, bytes) and of ``text`` (the JSON metadata
    stored with them, so that a changed byte anywhere in the file is detected)."""
    # lazy: torch (~1.5 s) only for checkpoints; the ledger and model-file checks do not need it
    import torch

    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name]
        h.update(json.dumps([name, str(t.dtype), list(t.shape)]).encode())
        if t.numel():
            h.update(t.reshape(-1).contiguous().view(torch.uint8).numpy().tobytes())
    h.update(b"\0metadata\0" + text.encode("utf-8"))
    return h.hexdigest()


def safetensors_metadata(data: bytes, bad: Any) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors byte string (its header is 8 bytes
    of length + JSON)."""
    if len(data) < 8:
        raise bad("is truncated (no safetensors header)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > min(len(data) - 8, _MAX_HEADER):
        raise bad("is truncated or not a safetensors file (header length beyond the file)")
    try:
        header = jsonutil.loads(data[8 : 8 + n].decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise bad("is not a safetensors file (its header is not JSON)") from None
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise bad("has no lastiterate metadata")
    return meta


class _NotOurs(Exception):
    """Why an existing file is not of the kind about to be written (see refuse_foreign_output)."""


def refuse_foreign_output(
    path: str | os.PathLike[str], param: str, what: str, why_not: Callable[[BinaryIO], str | None]
) -> None:
    """Refuse to replace an existing file at ``path`` that is not a lastiterate ``what``.

    The rule of every file lastiterate writes (models, checkpoints, ledgers, tables, plots): an
    earlier output of the same kind is replaced, any other file (a dataset given by mistake) is
    never overwritten.  Only the beginning of the file is read, by ``why_not``.

    Args:
        path: the file about to be written.
        param: the parameter named in the error.
        what: the kind of file expected (for the message).
        why_not: reads the open file (binary) and returns None for a file of that kind, else the
            reason it is not one.

    Raises:
        ParameterError: ``path`` exists and is not a regular file, cannot be read, or is not a
            ``what``.
    """
    p = Path(path)
    if not p.exists():
        return

    def bad(why: str) -> ParameterError:
        return ParameterError(
            param,
            str(p),
            f"exists and is not a {what} ({why}): refusing to overwrite it; remove it or choose "
            "another file name",
        )

    if not p.is_file():
        raise bad("not a regular file")
    try:
        with open(p, "rb") as fh:
            why = why_not(fh)
    except OSError as exc:
        raise ParameterError(param, str(p), f"cannot be read ({exc.strerror or exc})") from None
    if why is not None:
        raise bad(why)


def refuse_foreign_file(path: str | os.PathLike[str], param: str, what: str, is_ours: Any) -> None:
    """:func:`refuse_foreign_output` for a safetensors file (a checkpoint, a model file): only
    its header is read, and ``is_ours`` is called with the header's ``__metadata__`` (True for
    a file of that kind)."""

    def why_not(fh: BinaryIO) -> str | None:
        head = fh.read(8)
        (n,) = struct.unpack("<Q", head) if len(head) == 8 else (0,)
        data = head + fh.read(min(n, _MAX_HEADER))
        try:
            meta = safetensors_metadata(data, _NotOurs)
        except _NotOurs as exc:
            return str(exc)
        return None if is_ours(meta) else f"no {what} metadata"

    refuse_foreign_output(path, param, what, why_not)


def refuse_foreign_checkpoint(path: str | os.PathLike[str]) -> None:
    """Refuse a checkpoint path that holds a file other than a lastiterate checkpoint."""
    refuse_foreign_file(
        path,
        "checkpoint",
        "lastiterate checkpoint",
        lambda meta: _META_KEY in meta and _DIGEST_KEY in meta,
    )


def save_checkpoint(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    """Write ``state`` (a dict of JSON values and tensors, nested in dicts and lists) to ``path``:
    one safetensors file, mode 0600, written atomically (module docstring).

    Args:
        path: the checkpoint file.
        state: the trainer's state (JSON values and torch tensors, nested in dicts and lists).

    Raises:
        ParameterError: the file cannot be written (no permission, no space, a directory in the
            way).
    """
    # lazy: torch (~1.5 s) only for checkpoints; the ledger and model-file checks do not need it
    from safetensors.torch import save

    tensors: dict[str, Any] = {}
    tree = _flatten({"format": CHECKPOINT_FORMAT, **state}, tensors, "")
    text = jsonutil.dumps(tree)
    metadata = {_META_KEY: text, _DIGEST_KEY: tensors_digest(tensors, text)}
    write_private_file(path, save(tensors, metadata=metadata), param="checkpoint")


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The checkpoint at ``path`` (None when there is none).

    Safe on hostile input: the header is parsed as JSON and the tensors by :mod:`safetensors`;
    nothing is unpickled.

    Args:
        path: the checkpoint file.

    Returns:
        The state as saved by :func:`save_checkpoint` (with its ``format``), or None when the
        file does not exist.

    Raises:
        ParameterError: the file is not a complete, intact ``lastiterate-checkpoint/2``
            (truncated, corrupt, tampered tensors, an old pickle checkpoint, a directory).
    """
    p = Path(path)

    def bad(why: str) -> ParameterError:
        return ParameterError("checkpoint", str(p), why)

    if not p.exists():
        return None
    if not p.is_file():
        raise bad("is not a regular file")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise bad(f"cannot be read ({exc.strerror or exc})") from None
    if data[:2] == b"PK" or data[:1] == b"\x80":
        raise bad(
            "is a pickle / torch.save file (e.g. an old lastiterate-checkpoint/1): it is never "
            "unpickled, since that could run code; start the run again without --resume"
        )
    meta = safetensors_metadata(data, bad)
    if _META_KEY not in meta or _DIGEST_KEY not in meta:
        raise bad(f"is not a {CHECKPOINT_FORMAT} file")
    # lazy: torch (~1.5 s) only for checkpoints; the ledger and model-file checks do not need it
    from safetensors.torch import load

    try:
        tensors = load(data)
    except Exception:  # noqa: BLE001 - safetensors raises its own SafetensorError on any bad file
        raise bad("is a truncated or corrupt safetensors file") from None
    if tensors_digest(tensors, meta[_META_KEY]) != meta[_DIGEST_KEY]:
        raise bad(
            "is corrupt or was modified (its tensors and metadata do not match their SHA-256)"
        )
    try:
        tree = jsonutil.loads(meta[_META_KEY])
    except (ValueError, RecursionError):
        raise bad("has corrupt metadata (not standard JSON)") from None
    if not isinstance(tree, dict) or tree.get("format") != CHECKPOINT_FORMAT:
        raise bad(f"is not a {CHECKPOINT_FORMAT} file")
    try:
        return _unflatten(tree, tensors, bad)  # type: ignore[no-any-return]
    except RecursionError:
        raise bad("has corrupt metadata (nested too deeply)") from None


def training_checkpoint(state: dict[str, Any], path: str | os.PathLike[str]) -> dict[str, Any]:
    """``state`` checked to be a trainer checkpoint: ``run_id``, ``fingerprint`` (strings),
    ``step`` (integer >= 0), ``model`` (name -> tensor) and ``optimizer`` (a dict)."""
    # lazy: torch (~1.5 s) only for checkpoints; the ledger and model-file checks do not need it
    import torch

    def bad(why: str) -> ParameterError:
        return ParameterError("checkpoint", str(path), why)

    for key, kind in (("run_id", str), ("fingerprint", str), ("model", dict), ("optimizer", dict)):
        if not isinstance(state.get(key), kind):
            raise bad(f"is not a training checkpoint: {key!r} is missing or not a {kind.__name__}")
    step = state.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise bad("is not a training checkpoint: 'step' must be an integer >= 0")
    if not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state["model"].items()
    ):
        raise bad("is not a training checkpoint: 'model' must map names to tensors")
    return state
