"""An Opacus accountant (``opacus.accountants.IAccountant``) that accounts the
RELEASED LAST ITERATE.

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
    engine.accountant.explain()                        # what that number certifies, and why

``engine.make_private_with_epsilon(..., target_epsilon=..., target_delta=..., epochs=...)`` works
too: Opacus' ``get_noise_multiplier`` creates an accountant by the name ``mechanism()`` returns and
bisects on its ``get_epsilon``; the name ``"lastiterate"`` is registered with Opacus, and calling
``mechanism()`` on an instance stages a copy of that instance's declaration for it, so the noise is
calibrated with exactly the bounds (and fallbacks) :meth:`LastIterateAccountant.get_epsilon` uses.

Opacus calls :meth:`step` once per optimizer step with ``(noise_multiplier, sample_rate)``.  When
the user declared a geometry (strong convexity and/or smoothness, convexity, diameter) and the
history is a single constant ``(z, q)`` segment with ``q = batch_size / n``, :meth:`get_epsilon`
builds the :class:`~lastiterate.run.Run` (``algorithm="sgd"``, ``sampling`` as declared, default
``"poisson"``; ``noise_multiplier=z``, ``clip=C``, so ``sigma = z C / b``) and returns the best
bound of :func:`lastiterate.accountant.account` -- which already includes the composition bounds, so
it is never worse than composition under the same adjacency.  Otherwise it falls back to Opacus' own
RDP accountant on the same history (identical number).  Either way ``get_epsilon`` returns a number;
what it certifies is one call away: :meth:`LastIterateAccountant.explain` (one paragraph: the bound,
its adjacency, and the reason for any fallback), :attr:`reason` (the short form) and
:attr:`last_report` (the full :class:`~lastiterate.accountant.Report`, None after a fallback).

Limits (read before trusting a number):

* **Adjacency.**  Opacus' numbers are for add/remove-one.  The last-iterate theorems are stated
  for replace-one, so with a declared geometry the default ``adjacency="replace"`` (sensitivity
  L = 2C, a bound on the gradient difference of ANY two examples) is used; pass
  ``adjacency="add-remove"`` to ask for add/remove bounds (Poisson sampling only, as for
  :class:`~lastiterate.run.Run` and the trainer: other samplers are refused at construction).  A
  FALLBACK to Opacus' RDP accountant certifies add/remove whatever was declared, and
  :meth:`~LastIterateAccountant.explain` says so.  The two notions are not interchangeable:
  compare numbers only under the same adjacency.
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
  any change falls back to composition.  Attached to a ``DPOptimizer`` (``make_private``), the
  adapter also reads the optimizer at every step and falls back when its clip norm, expected batch
  size or learning rate differ from the declaration, or when it uses momentum or weight decay.
* Only the final model is covered.  If you also publish checkpoints, use composition.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

from opacus.accountants.accountant import IAccountant
from opacus.accountants.rdp import RDPAccountant
from opacus.accountants.registry import register_accountant

from lastiterate.accountant import account
from lastiterate.errors import ParameterError, check_positive, check_positive_int
from lastiterate.run import Run

#: the name under which Opacus' ``create_accountant`` finds this accountant
MECHANISM = "lastiterate"

#: the declaration staged by the last ``mechanism()`` call on an instance, per thread
_STAGED = threading.local()

_OPACUS_FALLBACK = "Opacus' RDP accountant (composition of every step, add/remove adjacency)"


class _Mechanism:
    """``mechanism()`` returns ``"lastiterate"``; called on an INSTANCE it also stages that
    instance's declaration, so that Opacus' ``create_accountant("lastiterate")`` (inside
    ``get_noise_multiplier``, which ``PrivacyEngine.make_private_with_epsilon`` calls right after
    ``self.accountant.mechanism()``) builds an accountant with the same declaration."""

    def __get__(
        self, obj: LastIterateAccountant | None, owner: type | None = None
    ) -> Callable[[], str]:
        def mechanism() -> str:
            if obj is not None:
                _STAGED.declaration = obj.declaration()
            return MECHANISM

        return mechanism


def _staged_accountant() -> LastIterateAccountant:
    """The factory registered with Opacus: a fresh accountant with the staged declaration."""
    decl = getattr(_STAGED, "declaration", None)
    if decl is None:
        raise ParameterError(
            "accountant",
            MECHANISM,
            "needs a declaration: create LastIterateAccountant(n=..., batch_size=..., lr=..., "
            "clip=..., ...) and assign it to PrivacyEngine.accountant before "
            "make_private_with_epsilon",
        )
    return LastIterateAccountant(**decl)


register_accountant(MECHANISM, _staged_accountant, force=True)  # type: ignore[arg-type]


class LastIterateAccountant(IAccountant):
    """Opacus accountant with lastiterate's bounds (see the module docstring).

    Args:
        n: the number of examples.
        batch_size: the (expected) batch size b.
        lr: the constant learning rate of the plain SGD steps.
        clip: the per-example clip norm C (Opacus' ``max_grad_norm``).
        strong_convexity: the losses' strong convexity m, if declared.
        smoothness: the losses' smoothness M, if declared.
        convex: declare the losses convex.
        diameter: the diameter D of the projection set, if any.
        sampling: sgd's batch sampling (default poisson, as Opacus).
        algorithm: gd, cgd or sgd.
        adjacency: ``replace`` (default) or ``add-remove``.
        bounds: restrict to these bound ids.

    Raises:
        ParameterError: a value out of range or a declaration no Run accepts (e.g. add/remove
            without Poisson sampling).
    """

    #: (noise_multiplier, sample_rate, steps) runs; initialised by ``IAccountant.__init__``
    history: list[tuple[float, float, int]]

    mechanism = _Mechanism()  # type: ignore[assignment]

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
        self.bounds = None if bounds is None else list(bounds)
        self.reason = "no steps yet"
        self._last_report: Any = None
        #: what the attached DPOptimizer really does (clip, expected batch size, lr, ...), per step
        self.observed: dict[str, Any] = {}
        # validate the declaration once (raises ParameterError early, e.g.
        # add/remove without Poisson)
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

    def get_optimizer_hook_fn(self, sample_rate: float) -> Callable[[Any], None]:
        """Opacus' step hook, which also records what the optimizer really applies.

        Args:
            sample_rate: the sampling rate Opacus passes.

        Returns:
            The hook for ``DPOptimizer.attach_step_hook``.
        """
        count = super().get_optimizer_hook_fn(sample_rate)

        def hook_fn(optim: Any) -> None:
            self._observe(optim)
            count(optim)

        return hook_fn

    def get_epsilon(self, delta: float, *args: Any, **kwargs: Any) -> float:
        """Epsilon at ``delta`` for releasing the current (last) iterate; :meth:`explain` says
        what it certifies.

        Without declared geometry, with a changing noise multiplier or sample rate, or when the
        attached optimizer does not execute the declared run, it falls back to Opacus' RDP
        epsilon (add/remove adjacency, every iterate), and says so.

        Args:
            delta: the target delta.
            *args: ignored (Opacus' signature).
            **kwargs: ignored (Opacus' signature).

        Returns:
            Epsilon (0 before any step).
        """
        if not self.history:
            self.reason = "no steps yet"
            self._last_report = None
            return 0.0
        run, why = self._run_from_history()
        if run is None:
            self.reason = f"{why}; fell back to {_OPACUS_FALLBACK}"
            self._last_report = None
            return self.opacus_rdp_epsilon(delta)

        report = account(run, delta=delta, bounds=self.bounds)
        self._last_report = report
        best = report.best
        if best is None:
            self.reason = f"no bound of lastiterate applies; fell back to {_OPACUS_FALLBACK}"
            self._last_report = None
            return self.opacus_rdp_epsilon(delta)
        self.reason = f"{best.bound}: {best.theorem} ({run.adjacency} adjacency)"
        return float(best.epsilon)

    # ------------------------------------------------------------------ what the number means
    @property
    def last_report(self) -> Any:
        """The :class:`~lastiterate.accountant.Report` behind the last :meth:`get_epsilon` (None
        after a fallback)."""
        return self._last_report

    def explain(self) -> str:
        """What the last :meth:`get_epsilon` certifies: the bound, the adjacency, any
        fallback and why.

        Returns:
            The explanation, in words.
        """
        rep = self._last_report
        if rep is None:
            if self.reason == "no steps yet":
                return "No steps yet: epsilon is 0."
            text = f"Fallback: {self.reason}."
            if self.adjacency != "add-remove":
                text += (
                    " That number certifies add/remove adjacency, NOT the declared "
                    f"{self.adjacency} adjacency (a replace-one guarantee follows from it only by "
                    "group privacy over 2 examples)."
                )
            return text + " It covers every intermediate iterate as well as the last one."
        best = rep.best
        text = (
            f"{best.bound} ({best.kind}): {best.theorem} [{best.reference}], {rep.run.adjacency} "
            f"adjacency; L = {rep.run.L:g} means: {rep.run.setting()['sensitivity_meaning']}."
        )
        if best.bound.endswith("composition"):
            refused = "; ".join(
                f"{r.bound}: {r.reason}"
                for r in rep.not_applicable
                if not r.bound.endswith("composition")
                and "no theorem of this family" not in r.reason
            )
            text += (
                " This is composition (it also covers every intermediate iterate): no "
                "last-iterate theorem gave a "
                "smaller epsilon" + (f" (refused: {refused})" if refused else "") + "."
            )
        else:
            text += (
                " Only the final model is covered; publishing intermediate iterates costs "
                "composition."
            )
        return text

    # ------------------------------------------------------------------ extras
    def opacus_rdp_epsilon(self, delta: float) -> float:
        """Opacus' own RDP epsilon on this history (add/remove adjacency).

        Args:
            delta: the target delta.

        Returns:
            Opacus' ``RDPAccountant`` epsilon.
        """
        acc = RDPAccountant()
        acc.history = list(self.history)
        return float(acc.get_epsilon(delta))

    def get_report(self, delta: float) -> Any:
        """The full :class:`~lastiterate.accountant.Report` (None when falling back).

        Args:
            delta: the target delta.

        Returns:
            The report of :meth:`get_epsilon` at ``delta``.
        """
        self.get_epsilon(delta)
        return self._last_report

    @property
    def declared_geometry(self) -> bool:
        """Whether any geometry (m, M, D or convexity) was declared (else: fallback)."""
        return (
            any(v is not None for v in (self.strong_convexity, self.smoothness, self.diameter))
            or self.convex
        )

    def declaration(self) -> dict[str, Any]:
        """The constructor arguments (JSON-serialisable): the run this accountant
        was declared for.

        Returns:
            The arguments by name.
        """
        return {
            "n": self.n,
            "batch_size": self.batch_size,
            "lr": self.lr,
            "clip": self.clip,
            "strong_convexity": self.strong_convexity,
            "smoothness": self.smoothness,
            "convex": self.convex,
            "diameter": self.diameter,
            "sampling": self.sampling if self.sampling is not None else "poisson",
            "algorithm": self.algorithm,
            "adjacency": self.adjacency,
            "bounds": self.bounds,
        }

    def _observe(self, optim: Any) -> None:
        groups = getattr(optim, "param_groups", None) or [{}]
        g = groups[0]
        self.observed = {
            "max_grad_norm": getattr(optim, "max_grad_norm", None),
            "expected_batch_size": getattr(optim, "expected_batch_size", None),
            "lr": sorted({float(pg.get("lr", math.nan)) for pg in groups}),
            "momentum": float(g.get("momentum", 0.0) or 0.0),
            "weight_decay": max(float(pg.get("weight_decay", 0.0) or 0.0) for pg in groups),
            "optimizer": type(getattr(optim, "original_optimizer", optim)).__name__,
        }

    def _mismatch(self) -> str | None:
        """Why the attached optimizer does not execute the declared run (None when it
        does or is unknown)."""
        o = self.observed
        if not o:
            return None
        if o["max_grad_norm"] is not None and not math.isclose(
            float(o["max_grad_norm"]), self.clip, rel_tol=1e-9
        ):
            return (
                f"the optimizer clips at max_grad_norm={o['max_grad_norm']:g}, "
                f"the declaration says clip={self.clip:g}"
            )
        b = self.batch_size if self.algorithm != "gd" else self.n
        if o["expected_batch_size"] is not None and int(o["expected_batch_size"]) != b:
            return (
                f"the optimizer divides by expected_batch_size={o['expected_batch_size']}, "
                f"the declaration says {b}"
            )
        if o["lr"] != [self.lr]:
            return (
                f"the optimizer's learning rate {o['lr']} differs from the declared lr={self.lr:g}"
            )
        if o["optimizer"] != "SGD" or o["momentum"] != 0.0 or o["weight_decay"] != 0.0:
            return (
                f"the update is {o['optimizer']} with momentum={o['momentum']:g}, "
                f"weight_decay={o['weight_decay']:g}; the theorems need plain SGD steps"
            )
        return None

    def _build_run(self, z: float, steps: int) -> Any:
        kw: dict[str, Any] = {
            "algorithm": self.algorithm,
            "n": self.n,
            "lr": self.lr,
            "steps": steps,
            "noise_multiplier": z,
            "clip": self.clip,
            "strong_convexity": self.strong_convexity,
            "smoothness": self.smoothness,
            "convex": self.convex,
            "diameter": self.diameter,
            "adjacency": self.adjacency,
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
        mismatch = self._mismatch()
        if mismatch is not None:
            return None, mismatch
        z, q, steps = self.history[0]
        expected = (self.batch_size if self.algorithm != "gd" else self.n) / self.n
        if not math.isclose(q, expected, rel_tol=1e-9, abs_tol=0.0):
            return (
                None,
                f"sample rate {q:.6g} from Opacus differs from batch_size/n = {expected:.6g}",
            )
        return self._build_run(float(z), int(steps)), ""

    def state_dict(self, destination: Any = None) -> Any:
        """Opacus' state (the history) with the :meth:`declaration`.

        Args:
            destination: Opacus' optional dict to fill.

        Returns:
            The state dict.
        """
        d = super().state_dict(destination)
        d["declaration"] = self.declaration()
        return d

    def load_state_dict(self, state_dict: Any) -> None:
        super().load_state_dict(state_dict)
        # the base class stored state_dict["history"]; re-read it so that lists (a round-trip
        # through a serialiser) become tuples again
        self.history = [tuple(h) for h in state_dict["history"]]
        decl = state_dict.get("declaration")
        if decl is not None:
            mine = self.declaration()
            if decl != mine:
                raise ValueError(
                    f"state_dict was written for a different declaration: {decl} != {mine}"
                )
