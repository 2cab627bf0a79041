"""Data-parallel noisy training across processes (``torch.distributed``) and on a device.

The accountant's :class:`~lastiterate.run.Run` describes ONE global step of the canonical update

    x_{t+1} = Proj_K( x_t - eta_t ( (1/b_t) sum_{i in B_t} clip_C(g_i(x_t)) + lambda x_t + Z_t ) ),
    Z_t ~ N(0, sigma^2 I),

and every theorem (paper 000's Thms 4.5-4.10, the composition bounds) sees only this law.  Data
parallelism over K processes ("ranks") changes WHO computes which terms of the sum, never the law:

* **The global batch.**  Every rank holds the same data and builds the same
  :class:`~lastiterate.train.sampling.Sampler` from the same run randomness, so every rank derives
  the SAME global batch ``B_t`` (the batch a single process would use; Poisson batches keep their
  rate b/n over all n examples, never b/K).  Rank r takes the contiguous share
  ``numpy.array_split(B_t, K)[r]`` (balanced; it may be empty when a Poisson batch is small).
* **Clipping and the sum.**  Each rank clips ITS examples' gradients (per example, as in one
  process) and sums them; the K partial sums are added with ``all_reduce(SUM)``, giving
  ``sum_{i in B_t} clip_C(g_i)`` up to floating-point summation order.  Every rank then divides by
  the GLOBAL normaliser b_t of the sampler (fixed b for uniform and Poisson batches, n for gd, the
  realised size of the global batch for cyclic and shuffled batches).
* **The noise, once.**  ``Z_t`` is drawn AFTER the all-reduce, by every rank, from the shared run
  randomness (stream 21, step t: the draw of a single-process run with the same root) and added to
  the already reduced gradient.  It is therefore added exactly once per global step, with the run's
  sigma -- never summed over ranks (K draws of the same Z_t summed would be K Z_t; K independent
  draws would be sqrt(K) sigma).  All ranks apply the identical update, so their parameters stay
  identical; :meth:`DataParallel.check_same` compares their digests at the end of training (and the
  run, the data and the initial parameters at the start).  Drawing on every rank instead of
  broadcasting rank 0's draw costs no communication and makes a K-process run reproduce the
  single-process run of the same seed (``tests/train/test_distributed.py``).
* **The secret.**  With fresh randomness (the default) rank 0 draws the root from OS entropy
  (:meth:`~lastiterate.train.randomness.Randomness.fresh`) and broadcasts its bytes in memory over
  the process group (:meth:`DataParallel.share_randomness`); it is never written to disk or logs.
  The local launcher (``lastiterate train --nproc K``) keeps that traffic on the loopback
  interface; across machines (``torchrun`` on several nodes) it crosses the network unencrypted,
  like every gloo/NCCL message: run only on a trusted network.  A seeded run checks that all ranks
  were given the same seed.
* **Outputs.**  Only rank 0 writes the ledger, the checkpoints and the model file, and prints; a
  resume reads the checkpoint on every rank (one machine, or a shared file system) and checks that
  every rank resumed the same state.

The guarantee is the single-process guarantee of the same Run: nothing in the accounting changes.

``device``: the per-example gradient path (:mod:`~lastiterate.train.models`) runs unchanged on any
torch device; the noise is drawn on the CPU from the run randomness and moved to the device, so a
CUDA run draws the same noise as a CPU run of the same seed.  Backend: gloo on the CPU, NCCL on
CUDA (one GPU per local rank).

:func:`launch_local` (``--nproc K``) re-executes a command in K local processes with the
environment ``torchrun`` sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, a free
MASTER_PORT); it imports no torch.  :func:`from_env` joins the process group those variables
describe, with a timeout (:data:`TIMEOUT_ENV`, default :data:`DEFAULT_TIMEOUT_S` seconds) so that a
missing or dead peer is an error, never a hang.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from lastiterate.errors import ParameterError, check_int_in_range
from lastiterate.train.randomness import Randomness

#: the largest number of local processes ``--nproc`` accepts
MAX_PROCESSES = 64
#: seconds a rank waits for its peers (process-group start and every collective)
DEFAULT_TIMEOUT_S = 300.0
TIMEOUT_ENV = "LASTITERATE_DIST_TIMEOUT"
DEVICES = ("cpu", "cuda")

NOISE_PLACEMENT = (
    "Gaussian noise added once per global step, after the all-reduce of the clipped-gradient sums, "
    "by every rank from the shared run randomness (identical draws; never summed over ranks)"
)


def torchrun_world() -> tuple[int, int, int] | None:
    """(rank, world size, local rank) from the variables ``torchrun`` sets, or None outside it."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    try:
        world = int(os.environ["WORLD_SIZE"])
        rank = int(os.environ["RANK"])
        local = int(os.environ.get("LOCAL_RANK", rank))
    except ValueError:
        raise ParameterError(
            "WORLD_SIZE",
            os.environ.get("WORLD_SIZE"),
            "RANK, WORLD_SIZE, LOCAL_RANK must be integers",
        ) from None
    check_int_in_range("WORLD_SIZE", world, 1, 1 << 20)
    check_int_in_range("RANK", rank, 0, world - 1)
    return rank, world, local


def check_device(device: Any) -> Any:
    """``device`` as a :class:`torch.device`: ``cpu`` or ``cuda`` (only where torch sees a GPU)."""
    # lazy: torch (~1.5 s) only where a process trains, not for the launcher's checks
    import torch

    name = str(device)
    kind = name.split(":", 1)[0]
    if kind not in DEVICES:
        raise ParameterError("device", name, "must be cpu or cuda")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ParameterError(
            "device", name, "is not available: torch.cuda.is_available() is False (use cpu)"
        )
    try:
        return torch.device(name)
    except RuntimeError:
        raise ParameterError("device", name, "must be cpu, cuda or cuda:INDEX") from None


def move_model(model: Any, device: Any) -> Any:
    """Move a trainer model (:class:`~lastiterate.train.models.GLM` or ``ModuleModel``) in place."""
    module = getattr(model, "module", model)
    if hasattr(module, "to"):
        module.to(device)
    return model


def parameters_sha256(params: Sequence[Any]) -> str:
    """SHA-256 of the parameters' bytes, on the CPU (any device)."""
    h = hashlib.sha256()
    for p in params:
        h.update(p.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()


@dataclass
class DataParallel:
    """Where this process stands in a data-parallel run: rank r of K, on ``device``.

    Build with :func:`single` (one process) or :func:`from_env` (joins the process group of
    ``torchrun`` / ``--nproc``).  The module docstring states what the global step computes.

    Attributes:
        rank: this process's rank r (0 writes the ledger, checkpoints and reports).
        world_size: the number of processes K.
        device: the torch device of this process.
        backend: the ``torch.distributed`` backend (None for one process).
        group: the process group (None for one process).
    """

    rank: int = 0
    world_size: int = 1
    device: Any = "cpu"
    backend: str | None = None
    group: Any = field(default=None, repr=False)

    @property
    def is_writer(self) -> bool:
        """Rank 0 writes the ledger, the checkpoints, the model file and the report."""
        return self.rank == 0

    @property
    def parallel(self) -> bool:
        """Whether more than one process takes part (collectives are needed)."""
        return self.world_size > 1

    # ---------------------------------------------------------------- the global batch
    def share(self, batch: np.ndarray) -> np.ndarray:
        """This rank's contiguous share of the global batch (the whole batch in one process).

        Args:
            batch: the indices of the global batch.

        Returns:
            This rank's part of ``numpy.array_split(batch, world_size)``.
        """
        if not self.parallel:
            return batch
        return np.array_split(np.asarray(batch, dtype=np.int64), self.world_size)[self.rank]

    def check_batch(self, batch_size: int) -> None:
        """Refuse more processes than the global batch has examples (some would have no share).

        Args:
            batch_size: the global batch size b.

        Raises:
            ParameterError: world_size > b.
        """
        if self.world_size > batch_size:
            raise ParameterError(
                "nproc",
                self.world_size,
                f"must be at most the global batch size b={batch_size}: every process takes a "
                "share of the same global batch",
            )

    # ---------------------------------------------------------------- collectives
    def _comm(self, t: Any) -> Any:
        return t.to(self.device) if self.backend == "nccl" else t.to("cpu")

    def sum_clipped(self, sums: list[Any], n_clipped: int) -> tuple[list[Any], int]:
        """All-reduce (SUM) of the per-rank clipped-gradient sums and clip counts: the sum over
        the global batch, identical on every rank.  One message per step.

        Args:
            sums: this rank's clipped-gradient sum per parameter tensor.
            n_clipped: this rank's number of clipped examples.

        Returns:
            The global sums (on each tensor's device) and the global clip count.
        """
        if not self.parallel:
            return sums, n_clipped
        # lazy: torch (~1.5 s) only where a process trains, not for the launcher's checks
        import torch
        import torch.distributed as dist

        dtype = sums[0].dtype
        flat = torch.cat([s.detach().reshape(-1).to(dtype) for s in sums])
        buf = self._comm(
            torch.cat([flat, torch.tensor([float(n_clipped)], dtype=dtype, device=flat.device)])
        )
        dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=self.group)
        out, k = [], 0
        for s in sums:
            out.append(buf[k : k + s.numel()].view_as(s).to(s.device))
            k += s.numel()
        return out, round(float(buf[-1]))

    def _broadcast_bytes(self, data: bytes | None, size: int) -> bytes:
        # lazy: torch (~1.5 s) only where a process trains, not for the launcher's checks
        import torch
        import torch.distributed as dist

        buf = torch.zeros(size, dtype=torch.uint8)
        if self.is_writer:
            assert data is not None and len(data) == size
            buf = torch.frombuffer(bytearray(data), dtype=torch.uint8).clone()
        buf = self._comm(buf)
        dist.broadcast(buf, src=0, group=self.group)
        out = bytes(buf.to("cpu").numpy().tobytes())
        del buf
        return out

    def share_randomness(self, randomness: Any) -> Any:
        """The run randomness of rank 0 on every rank.

        Fresh (secret) randomness: rank 0's root is broadcast as raw bytes in memory (never
        written).  Seeded: every rank must have been given the same seed and mode (checked).

        Args:
            randomness: this rank's :class:`~lastiterate.train.randomness.Randomness`.

        Returns:
            Rank 0's randomness (``randomness`` itself in one process or when seeded).

        Raises:
            ParameterError: the ranks' seeds or modes differ.
        """
        if not self.parallel:
            return randomness

        self.check_same("randomness (seed and mode)", repr(randomness.fingerprint()))
        if randomness.seeded:
            return randomness
        state = randomness.checkpoint_state()  # the owner-only form of the secret, in memory
        size = len(bytes.fromhex(state["root_hex"]))
        root = self._broadcast_bytes(
            bytes.fromhex(state["root_hex"]) if self.is_writer else None, size
        )
        shared = Randomness.from_checkpoint_state({**state, "root_hex": root.hex()})
        del state, root
        return shared

    def check_same(self, what: str, text: str) -> None:
        """Refuse unless ``text`` is identical on every rank (compares SHA-256 digests, so nothing
        but a hash crosses the wire).

        Args:
            what: what is compared, for the message.
            text: this rank's value.

        Raises:
            ParameterError: a rank's text differs.
        """
        if not self.parallel:
            return
        # lazy: torch (~1.5 s) only where a process trains, not for the launcher's checks
        import torch
        import torch.distributed as dist

        digest = hashlib.sha256(text.encode()).digest()
        mine = self._comm(torch.frombuffer(bytearray(digest), dtype=torch.uint8).clone())
        every = [torch.zeros_like(mine) for _ in range(self.world_size)]
        dist.all_gather(every, mine, group=self.group)
        differ = [r for r, d in enumerate(every) if not torch.equal(d, mine)]
        if differ:
            raise ParameterError(
                "nproc",
                self.world_size,
                f"the processes disagree on {what} (rank {self.rank} vs rank {differ[0]}): every "
                "process must run the same command on the same data",
            )

    def describe(self) -> dict[str, Any]:
        """Public description for reports (no secret).

        Returns:
            ``world_size``, ``backend``, ``device``, and how the global batch and noise are
            placed.
        """
        return {
            "world_size": self.world_size,
            "backend": self.backend,
            "device": str(self.device),
            "global_batch": "the sampler's batch over all n examples, split in contiguous shares "
            "(one per process); the theorems see the global batch",
            "noise": NOISE_PLACEMENT,
        }

    def close(self) -> None:
        """Leave the process group (idempotent)."""
        if not self.parallel:
            return
        # lazy: torch (~1.5 s) only where a process trains, not for the launcher's checks
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def single(device: Any = "cpu") -> DataParallel:
    """One process on ``device``."""
    return DataParallel(0, 1, check_device(device), None)


def timeout_seconds() -> float:
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None or raw == "":
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (0 < value <= 86400):
        raise ParameterError(TIMEOUT_ENV, raw, "must be a number of seconds in (0, 86400]")
    return value


def from_env(device: Any = "cpu") -> DataParallel:
    """Join the process group ``torchrun`` (or :func:`launch_local`) describes; one process when
    WORLD_SIZE is absent or 1.  Backend gloo on the CPU, NCCL on CUDA (device ``cuda:LOCAL_RANK``).
    Waiting for peers is bounded by :func:`timeout_seconds`."""
    dev = check_device(device)
    world = torchrun_world()
    if world is None or world[1] == 1:
        return DataParallel(0, 1, dev, None)
    rank, size, local = world

    # lazy: torch (~1.5 s) only where a process trains, not for the launcher's checks
    import torch
    import torch.distributed as dist

    if dev.type == "cuda":
        count = torch.cuda.device_count()
        if local >= count:
            raise ParameterError(
                "nproc",
                size,
                f"local rank {local} has no GPU of its own (this machine has {count}): at most "
                "one process per GPU",
            )
        dev = torch.device("cuda", local)
        torch.cuda.set_device(dev)
        backend = "nccl"
    else:
        backend = "gloo"
    if not dist.is_available():
        raise ParameterError(
            "nproc", size, "torch.distributed is not available in this torch build"
        )
    try:
        dist.init_process_group(
            backend=backend,
            init_method="env://",
            rank=rank,
            world_size=size,
            timeout=datetime.timedelta(seconds=timeout_seconds()),
        )
    except (RuntimeError, ValueError, OSError) as exc:
        raise ParameterError(
            "nproc",
            size,
            f"could not start the process group ({backend}, MASTER_ADDR="
            f"{os.environ.get('MASTER_ADDR')}, MASTER_PORT={os.environ.get('MASTER_PORT')}): "
            + " ".join(str(exc).split())[:200],
        ) from None
    return DataParallel(rank, size, dev, backend, dist.group.WORLD)


# ---------------------------------------------------------------------- local launcher (no torch)
def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_nproc(nproc: Any) -> int:
    """``--nproc``: an integer in [1, :data:`MAX_PROCESSES`]."""
    return check_int_in_range("nproc", nproc, 1, MAX_PROCESSES)


def _last_line(f: IO[bytes]) -> str:
    f.seek(0)
    lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + 5.0
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def launch_local(
    command: Sequence[str], nproc: int, *, prefix: str = "lastiterate: error: "
) -> int:
    """Run ``command`` in ``nproc`` local processes as ``torchrun --nproc-per-node`` would (RANK,
    WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free MASTER_PORT; gloo on
    the loopback interface) and return an exit status.

    Rank 0 keeps this process's stdout and stderr; the others' stdout is discarded and their stderr
    kept in an anonymous temporary file.  When a process fails the others are stopped at once: the
    status is rank 0's when it failed (its one error line is already on stderr), else the failing
    rank's, with ONE line on stderr (its last line, naming the rank).  A process killed by a signal
    is status 70."""
    nproc = check_nproc(nproc)
    port = free_port()
    base = dict(os.environ)
    base.update(
        {
            "WORLD_SIZE": str(nproc),
            "LOCAL_WORLD_SIZE": str(nproc),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
    )
    if sys.platform.startswith("linux"):
        base.setdefault("GLOO_SOCKET_IFNAME", "lo")
    procs: list[subprocess.Popen[bytes]] = []
    errs: list[IO[bytes] | None] = []
    try:
        for r in range(nproc):
            env = {**base, "RANK": str(r), "LOCAL_RANK": str(r)}
            err: IO[bytes] | None = None
            if r > 0:
                err = tempfile.TemporaryFile()  # noqa: SIM115 (closed below)
            errs.append(err)
            procs.append(
                subprocess.Popen(
                    list(command),
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=None if r == 0 else subprocess.DEVNULL,
                    stderr=err,
                )
            )
        while True:
            codes = [p.poll() for p in procs]
            if all(c == 0 for c in codes):
                return 0
            if any(c not in (None, 0) for c in codes):
                time.sleep(0.3)  # let a simultaneous failure of rank 0 show up first
                codes = [p.poll() for p in procs]
                _stop(procs)
                failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
                r = 0 if 0 in failed else failed[0]
                code = codes[r]
                assert code is not None
                if code < 0:
                    name = signal.Signals(-code).name if -code in signal.valid_signals() else -code
                    print(
                        f"{prefix}process {r} of {nproc} was killed by signal {name}",
                        file=sys.stderr,
                    )
                    return 70
                if r != 0:
                    log = errs[r]
                    line = _last_line(log) if log is not None else ""
                    line = line.removeprefix(prefix)
                    print(
                        f"{prefix}process {r} of {nproc} failed (exit {code}): "
                        + (line or "no message"),
                        file=sys.stderr,
                    )
                return code
            time.sleep(0.05)
    except KeyboardInterrupt:  # the terminal interrupted every process: rank 0 said so
        _stop(procs)
        return 130
    except BaseException:
        _stop(procs)
        raise
    finally:
        for log in errs:
            if log is not None:
                log.close()


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_PROCESSES",
    "NOISE_PLACEMENT",
    "DataParallel",
    "check_device",
    "check_nproc",
    "free_port",
    "from_env",
    "launch_local",
    "move_model",
    "parameters_sha256",
    "single",
    "torchrun_world",
]
