"""An Opacus accountant (``opacus.accountants.IAccountant``) that accounts the RELEASED LAST ITERATE.

    from opacus import PrivacyEngine
    from lastiterate.train import LastIterateAccountant

    engine = PrivacyEngine()
    engine.accountant = LastIterateAccountant(
        n=len(train_set), batch_size=256, lr=0.05, clip=1.0,
        strong_convexity=0.01, smoothness=0.26,        # declare the geometry (e.g. from
    )                                                  #   lastiterate.train.glm_certificate)
    model, optimizer, loader = engine.make_private(module=..., optimizer=..., data_loader=...,
                                                   noise_multiplier=1.1, max_grad_norm=1.0)
    ...                                                # train as usual
    engine.get_epsilon(1e-5)                           # best last-iterate bound

Opacus calls :meth:`step` once per optimizer step with ``(noise_multiplier, sample_rate)``.  When the
user declared a geometry (strong convexity and/or smoothness, convexity, diameter) and the history
is a single constant ``(z, q)`` segment with ``q = batch_size / n``, :meth:`get_epsilon` builds the
:class:`~lastiterate.run.Run` (``algorithm="sgd"``, ``sampling`` as declared, default
``"poisson"``; ``noise_multiplier=z``, ``clip=C``, so ``sigma = z C / b``) and returns the best bound of
:func:`lastiterate.accountant.account` -- which already includes the composition bounds, so it is
never worse than composition under the same adjacency.  Otherwise it falls back to Opacus' own RDP
accountant on the same history (identical number) and :attr:`reason` says why.

Limits (read before trusting a number):

* **Adjacency.**  Opacus' numbers are for add/remove-one.  The last-iterate theorems are stated
  for replace-one, so with a declared geometry the default ``adjacency="replace"`` (sensitivity
  2C) is used; pass ``adjacency="add-remove"`` to ask for add/remove bounds (fewer theorems apply).
  The two notions are not interchangeable: compare numbers only under the same adjacency.
* **Sampling.**  Opacus' ``DPDataLoader`` samples Poisson batches and its ``DPOptimizer`` divides by
  the expected batch size -- the ``poisson`` semantics.  Most last-iterate theorems are for uniform
  fixed-size batches (paper 000's NoisySGD) or cyclic batches; with Opacus' loader they do not
  apply, and the accountant says so.  Declare another ``sampling`` only if your loader really
  implements it.  ``make_private`` sets ``q = 1/len(data_loader)``; when ``batch_size`` does not
  divide ``n`` this differs from ``b/n`` and the adapter falls back to composition.
* **Geometry is declared, not verified.**  For Poisson batches normalised by b the realised step
  can be up to (n/b) times smoother-than-declared curvature-wise; declare the smoothness of the
  update actually applied (``glm_certificate(..., sampling="poisson", n=..., batch_size=...)``
  does it for GLMs).  Clipping can break convexity (see :mod:`lastiterate.train.geometry`).
  Momentum, Adam or weight decay outside the loss make the update something else: do not declare
  a geometry then.
* **Constant everything.**  One noise multiplier, one sample rate, one constant learning rate;
  any change falls back to composition.
* Only the final model is covered.  If you also publish checkpoints, use composition.
"""

from __future__ import annotations

import math
from typing import Any

from opacus.accountants.accountant import IAccountant
from opacus.accountants.rdp import RDPAccountant

from lastiterate.errors import ParameterError, check_positive, check_positive_int


class LastIterateAccountant(IAccountant):
    """Opacus accountant with lastiterate's bounds (see the module docstring)."""

    #: (noise_multiplier, sample_rate, steps) runs; initialised by ``IAccountant.__init__``
    history: list[tuple[float, float, int]]

    def __init__(
        self,
        *,
        n: int,
        batch_size: int,
        lr: float,
        clip: float,
        strong_convexity: float | None = None,
        smoothness: float | None = None,
        convex: bool = False,
        diameter: float | None = None,
        sampling: str = "poisson",
        algorithm: str = "sgd",
        adjacency: str = "replace",
        bounds: list[str] | None = None,
    ) -> None:
        super().__init__()
        self.n = check_positive_int("n", n)
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.lr = check_positive("lr", lr)
        self.clip = check_positive("clip", clip)
        self.strong_convexity = strong_convexity
        self.smoothness = smoothness
        self.convex = bool(convex)
        self.diameter = diameter
        if algorithm not in ("gd", "cgd", "sgd"):
            raise ParameterError("algorithm", algorithm, "must be one of gd, cgd, sgd")
        self.algorithm = algorithm
        self.sampling = sampling if algorithm == "sgd" else None
        self.adjacency = adjacency
        self.bounds = bounds
        self.reason = "no steps yet"
        self._last_report: Any = None
        # validate the declaration once (raises ParameterError early)
        self._build_run(1.0, 1)

    # ------------------------------------------------------------------ IAccountant
    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        if self.history:
            z, q, k = self.history[-1]
            if z == noise_multiplier and q == sample_rate:
                self.history[-1] = (z, q, k + 1)
                return
        self.history.append((noise_multiplier, sample_rate, 1))

    def __len__(self) -> int:
        """Number of optimisation steps taken so far."""
        return int(sum(k for _, _, k in self.history))

    @classmethod
    def mechanism(cls) -> str:
        return "lastiterate"

    def get_epsilon(self, delta: float, *args: Any, **kwargs: Any) -> float:
        """Epsilon at ``delta`` for releasing the current (last) iterate."""
        if not self.history:
            self.reason = "no steps yet"
            return 0.0
        run, why = self._run_from_history()
        if run is None:
            self.reason = why + "; fell back to Opacus' RDP accountant (composition)"
            self._last_report = None
            return self.opacus_rdp_epsilon(delta)
        from lastiterate.accountant import account

        report = account(run, delta=delta, bounds=self.bounds)
        self._last_report = report
        best = report.best
        if best is None:  # pragma: no cover - composition always applies
            self.reason = "no applicable bound; fell back to Opacus' RDP accountant"
            return self.opacus_rdp_epsilon(delta)
        self.reason = f"{best.bound}: {best.theorem} ({run.adjacency} adjacency)"
        return float(best.epsilon)

    # ------------------------------------------------------------------ extras
    def opacus_rdp_epsilon(self, delta: float) -> float:
        """Opacus' own RDP epsilon on this history (add/remove adjacency)."""
        acc = RDPAccountant()
        acc.history = list(self.history)
        return float(acc.get_epsilon(delta))

    def get_report(self, delta: float) -> Any:
        """The full :class:`~lastiterate.accountant.Report` (None when falling back)."""
        self.get_epsilon(delta)
        return self._last_report

    @property
    def declared_geometry(self) -> bool:
        return any(v is not None for v in (self.strong_convexity, self.smoothness, self.diameter)) or self.convex

    def _build_run(self, z: float, steps: int) -> Any:
        from lastiterate.run import Run

        kw: dict[str, Any] = {
            "algorithm": self.algorithm, "n": self.n, "lr": self.lr, "steps": steps, "noise_multiplier": z, "clip": self.clip,
            "strong_convexity": self.strong_convexity, "smoothness": self.smoothness, "convex": self.convex,
            "diameter": self.diameter, "adjacency": self.adjacency,
        }
        if self.algorithm != "gd":
            kw["batch_size"] = self.batch_size
        if self.sampling is not None:
            kw["sampling"] = self.sampling
        return Run(**kw)

    def _run_from_history(self) -> tuple[Any, str]:
        if not self.declared_geometry:
            return None, "no geometry declared"
        if len(self.history) != 1:
            return None, "the noise multiplier or sample rate changed during training"
        z, q, steps = self.history[0]
        expected = (self.batch_size if self.algorithm != "gd" else self.n) / self.n
        if not math.isclose(q, expected, rel_tol=1e-9, abs_tol=0.0):
            return None, f"sample rate {q:.6g} from Opacus differs from batch_size/n = {expected:.6g}"
        return self._build_run(float(z), int(steps)), ""

    def state_dict(self, destination: Any = None) -> Any:
        d = super().state_dict(destination)
        d["declaration"] = {
            "n": self.n, "batch_size": self.batch_size, "lr": self.lr, "clip": self.clip,
            "strong_convexity": self.strong_convexity, "smoothness": self.smoothness, "convex": self.convex,
            "diameter": self.diameter, "sampling": self.sampling, "algorithm": self.algorithm,
            "adjacency": self.adjacency,
        }
        return d

    def load_state_dict(self, state_dict: Any) -> None:
        super().load_state_dict(state_dict)
        # the base class stored state_dict["history"]; re-read it so that lists (a round-trip
        # through a serialiser) become tuples again
        self.history = [tuple(h) for h in state_dict["history"]]
        decl = state_dict.get("declaration")
        if decl is not None:
            mine = self.state_dict()["declaration"]
            if decl != mine:
                raise ValueError(f"state_dict was written for a different declaration: {decl} != {mine}")
