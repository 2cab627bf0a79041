"""Opacus, run so that the last-iterate theorems apply (issue 9, section 3).

    from lastiterate.opacus import make_private_last_iterate

    model = torch.nn.Linear(64, 10)                        # a GLM: softmax regression
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0, weight_decay=0.005)
    loader = DataLoader(train_set, batch_size=64)
    model, optimizer, loader, accountant = make_private_last_iterate(
        model, optimizer, loader, target_epsilon=2.0, target_delta=1e-5, epochs=30,
        max_grad_norm=1.0, sampling="cyclic", loss="cross-entropy", data_norm=0.7071)
    for _ in range(30):                                    # exactly `epochs` passes
        for xb, yb in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    accountant.get_epsilon(1e-5)                           # <= 2.0: the final model's guarantee
    print(accountant.explain())                            # which theorem, which geometry, why

Stock Opacus samples Poisson batches and divides the noisy clipped-gradient sum by the EXPECTED
batch size; for that mechanism the last-iterate theorems of paper 000 (Bok, Su, Altschuler 2024)
do not hold, so :class:`~lastiterate.train.opacus_accountant.LastIterateAccountant` can only
report composition there.  This module realises what the theorems assume, with Opacus' per-example
gradients (``GradSampleModule``) and clipping (``DPOptimizer.clip_and_accumulate``):

* **Batches** (:class:`LastIterateBatchSampler`, the semantics of :mod:`lastiterate.train.sampling`
  and :class:`~lastiterate.run.Run`):

  - ``sampling="uniform"``: a uniformly random subset of exactly b examples, drawn independently at
    every step (paper 000 NoisySGD, Thms 4.8-4.10: ``Run(algorithm="sgd", sampling="uniform")``);
    an epoch is n/b steps (the Run's rule T = ceil(E n/b)).
  - ``sampling="cyclic"``: ONE secret uniformly random permutation, cut into the balanced partition
    of ``numpy.array_split`` into l = ceil(n/b) batches, then cycled in the same order every epoch
    (paper 000 NoisyCGD, Thm 4.5, which holds for any fixed partition: ``Run(algorithm="cgd")``).
  - ``sampling="shuffle"``: a fresh permutation every epoch, cut the same way
    (``Run(algorithm="sgd", sampling="shuffle")``).  No last-iterate theorem of the library covers
    it: it is accounted by composition (one Gaussian step per epoch per example).
  - ``sampling="poisson"``: every example independently with probability q = b/n at every step
    (``Run(algorithm="sgd", sampling="poisson")``), the clipped SUM divided by the FIXED b (not
    the realised size; an empty batch is a pure-noise step, whose mean loss prints as nan --
    harmless: the step uses Opacus' per-example gradients, of which there are none).  The only
    scheme supported under ``adjacency="add-remove"`` (one added or removed example moves the
    step by at most C/b: :func:`lastiterate.run.check_adjacency`).  With ``batch_size = n``
    (q = 1) it is the full batch under add/remove: every row, normalised by the fixed n.  The
    GLM certificate then uses the worst-case batch, M = (n/b) beta + lambda
    (:mod:`lastiterate.train.geometry`).

* **Normaliser** (:class:`LastIterateDPOptimizer`).  Opacus' ``DPOptimizer.scale_grad`` divides the
  noisy SUM by ``expected_batch_size * accumulated_iterations`` and ``add_noise`` draws std
  ``noise_multiplier * max_grad_norm`` on the sum.  Here the step is the Run's
  ``(1/b_t) sum_{i in B_t} clip_C(g_i) + Z_t + lambda x_t`` with ``Z_t ~ N(0, sigma^2 I)``,
  ``sigma = z C / b``: ``b_t = b`` (fixed) for uniform batches -- which equals the realised size
  -- and for Poisson batches (whatever their realised size), and the realised size (``b_min =
  n // l`` or ``b_min + 1``) for the cyclic and shuffled partitions, exactly as the library's
  trainer; the accountant charges ``L / (b_min sigma)`` (Poisson: C/b under add/remove).
  Gradient accumulation (several backward passes per step) is refused.
* **L2 regularisation.**  A ``weight_decay`` lambda of the plain ``torch.optim.SGD`` the user passes
  is moved into the DP step (the optimizer's own ``weight_decay`` is set to 0): ``x -= lr (noisy
  mean + lambda x)`` is the same update, and the GLM certificate counts it as m = lambda.
* **Projection** onto the L2 ball of diameter D (radius D/2) after every step when ``diameter=D``
  is declared: centred at the origin (``center="origin"``, as ``lastiterate train --diameter``;
  the initial parameters are projected once when wired) or at the initial parameters
  (``center="init"``; the initial parameters must not depend on the private data).
* **Rows** are clipped to ``||x|| <= data_norm`` inside the loader (a per-row map applied to every
  dataset, so it is part of the mechanism and costs no privacy), which is what the GLM certificate
  needs.
* **Secret randomness.**  Batches and noise come from one :class:`~lastiterate.train.randomness.
  Randomness`: fresh OS entropy by default, independent of torch's global generator (which stock
  Opacus without ``secure_mode`` uses, so that a ``torch.manual_seed`` set for a reproducible
  initialisation also replays its noise), ``seed=`` for reproducible runs (with a
  :class:`~lastiterate.train.randomness.SeededRunWarning`),
  ``secure=True`` for a keyed CSPRNG and the floating-point-safe Gaussian sampler.

:func:`make_private_last_iterate` wires loader, optimizer and accountant from one declaration,
derives the geometry of GLMs with :func:`lastiterate.train.geometry.glm_certificate` (``nn.Linear``
alone or in an ``nn.Sequential`` with ``nn.Flatten`` / ``nn.Identity``, with cross-entropy, binary
cross-entropy with logits or mean squared error, rows clipped to ``data_norm``), refuses any other
model with one line unless the user declares the geometry, and calibrates the noise multiplier with
:func:`lastiterate.calibrate_noise` (the best bound, composition included).

**When a GLM's certificate fails** (a multinomial clip C < sqrt(2) R_eff, which can be active: a
clipped softmax gradient is not a convex loss's gradient; or lr >= 2/M), the model is still
understood, only the last-iterate theorems' assumptions fail.  With ``accounting="auto"`` (the
default) the run is wired WITHOUT geometry: only the composition bounds apply (gdp-, pld- and
rdp-composition, which need no convexity and also cover every intermediate iterate), the noise is
calibrated with them, and a :class:`CompositionOnlyWarning` and ``accountant.explain()`` say which
certificate failed, why, and how to get last-iterate accounting back (e.g. ``max_grad_norm >=
sqrt(2) R_eff``).  This is exactly what the estimator's early-stopping rule trains (clip 0.5
R_eff, no L2: :mod:`lastiterate.configuration`).  ``accounting="last-iterate"`` refuses such a
run instead (``NotApplicable`` with the reason).  A model that is not a GLM is refused either
way unless the user declares its geometry.  The accountant it
returns (:class:`LastIteratePathAccountant`) builds the same :class:`~lastiterate.run.Run` from
the steps Opacus reports, so ``get_epsilon`` after the planned epochs is the calibrated value.

**Ghost clipping** (``grad_sample_mode="ghost"``, ``criterion=``): Opacus' fast gradient
clipping computes every example's gradient norm without materialising the per-example gradients
(:class:`GhostClippingModule`), then backpropagates the clipped sum (:class:`GhostClippingLoss`);
:class:`LastIterateGhostDPOptimizer` applies the same normaliser, noise, projection and checks, so
the step and the accountant's Run are those of the default mode.  The call then also returns the
criterion to train with, as Opacus' ``make_private(..., grad_sample_mode="ghost")`` does.

Limits: only the FINAL model is covered (checkpoints and intermediate models cost composition);
every step must use one batch of the returned loader, in order, with one backward pass; a learning
rate scheduler, momentum, another optimizer, or more epochs than planned change the run, and the
accountant then reports what it can certify (the step count is always counted; a changed
optimizer falls back to Opacus' RDP accountant, see :meth:`LastIteratePathAccountant.explain`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, overload

import torch
from opacus import GradSampleModule
from opacus.grad_sample import GradSampleModuleFastGradientClipping
from opacus.grad_sample.gsm_base import AbstractGradSampleModule
from opacus.optimizers.optimizer import DPOptimizer, _check_processed_flag, _mark_as_processed
from opacus.optimizers.optimizer_fast_gradient_clipping import DPOptimizerFastGradientClipping
from opacus.utils.fast_gradient_clipping_utils import DPTensorFastGradientClipping
from torch import nn
from torch.utils.data import DataLoader

from lastiterate.errors import NotApplicable, ParameterError, check_positive, check_positive_int
from lastiterate.run import Run
from lastiterate.train.geometry import Certificate, glm_certificate
from lastiterate.train.opacus_accountant import LastIterateAccountant
from lastiterate.train.randomness import SEED_WARNING, Randomness, SeededRunWarning
from lastiterate.train.sampling import Sampler
from lastiterate.train.trainer import clip_rows, l2_ball

#: The batch schemes of this module and the Run each realises.
SAMPLINGS: dict[str, dict[str, str]] = {
    "uniform": {"algorithm": "sgd", "sampling": "uniform"},
    "cyclic": {"algorithm": "cgd"},
    "shuffle": {"algorithm": "sgd", "sampling": "shuffle"},
    "poisson": {"algorithm": "sgd", "sampling": "poisson"},
}


#: the relative step by which the path raises a calibrated noise multiplier whose re-accounted
#: epsilon lands a hair above the target (composition bounds vary by ~1e-8 relative with the
#: grid their bracket sizes), and how often: 1e-6 costs nothing measurable in utility
_NOISE_ROUND_UP = 1e-6
_NOISE_ROUND_UP_TRIES = 4

#: ``accounting`` of :func:`make_private_last_iterate`: ``"auto"`` falls back to composition when
#: a GLM's certificate fails, ``"last-iterate"`` refuses such a run.
ACCOUNTINGS = ("auto", "last-iterate")

#: The bounds that need no geometry (what a run without a certificate is accounted by).
COMPOSITION_BOUNDS = ("gdp-composition", "pld-composition", "rdp-composition")

#: Loss names accepted by :func:`make_private_last_iterate` and the GLM family each certifies.
LOSSES: dict[str, str] = {
    "cross-entropy": "multinomial-logistic",
    "bce-with-logits": "binary-logistic",
    "mse": "least-squares",
}

#: The constant of Opacus' clip factor ``min(1, C / (||g|| + 1e-6))``
#: (``DPOptimizer.clip_and_accumulate``).
OPACUS_CLIP_EPS = 1e-6

#: Noise stream of the Randomness root (the batches use the sampler's streams 11-14).
NOISE_STREAM = 21

#: The range of ``accumulated_iterations`` in the refusal of a step after several backward passes.
ACCUMULATION_RANGE = (
    "must be 1: call optimizer.step() after every backward pass (accumulating "
    "several batches runs another algorithm than the one accounted)"
)

#: ``grad_sample_mode`` of :func:`make_private_last_iterate`: Opacus' per-example gradients
#: (``"hooks"``, default) or ghost clipping (``"ghost"``, per-example norms only).
GRAD_SAMPLE_MODES = ("hooks", "ghost")

#: The torch module of every name of :data:`LOSSES`.
_LOSS_MODULES: dict[str, type[nn.Module]] = {
    "cross-entropy": nn.CrossEntropyLoss,
    "bce-with-logits": nn.BCEWithLogitsLoss,
    "mse": nn.MSELoss,
}

_SCHEME = {"uniform": "uniform", "cyclic": "cyclic", "shuffle": "shuffle", "poisson": "poisson"}


class CompositionOnlyWarning(UserWarning):
    """A GLM's certificate failed: the wired run is accounted by composition only (see
    :func:`make_private_last_iterate`, ``accounting="auto"``)."""


# ---------------------------------------------------------------------------------------- batches
class LastIterateBatchSampler(torch.utils.data.Sampler[list[int]]):
    """Batch indices with the Run's semantics, for ``DataLoader(batch_sampler=...)``.

    Wraps :class:`lastiterate.train.sampling.Sampler`: the batch of step t is a pure function of
    the secret root and t.  Iterating once yields the batches of ONE epoch in the Run's sense
    (epoch e ends after ceil(e l) steps, l = n/b for uniform and Poisson batches and ceil(n/b) for
    the cyclic and shuffled partitions), continuing from where the previous iteration stopped.
    A Poisson batch may be empty (then the step is pure noise).

    Args:
        n: number of examples.
        batch_size: b.
        sampling: ``"uniform"``, ``"cyclic"``, ``"shuffle"`` or ``"poisson"`` (see the module
            docstring).
        seed: None (fresh secret OS entropy), an int (reproducible: keep it secret) or a
            :class:`~lastiterate.train.randomness.Randomness` shared with the noise.
    """

    def __init__(
        self, n: int, batch_size: int, sampling: str = "uniform", *, seed: Any = None
    ) -> None:
        if sampling not in SAMPLINGS:
            raise ParameterError("sampling", sampling, "must be one of " + ", ".join(SAMPLINGS))
        self.sampling = sampling
        self.sampler = Sampler(_SCHEME[sampling], check_positive_int("n", n), batch_size, seed)
        self.n = self.sampler.n
        self.batch_size = self.sampler.batch_size
        #: batches handed out so far (the global step index of the next batch)
        self.step = 0

    @property
    def batches_per_epoch(self) -> float:
        """l of the Run: n/b (uniform, Poisson) or ceil(n/b) (cyclic, shuffle)."""
        return float(self.sampler.l)

    def run_kwargs(self) -> dict[str, object]:
        """The sampling part of the :class:`~lastiterate.run.Run` these batches realise."""
        return self.sampler.run_kwargs()

    def steps_for_epochs(self, epochs: float) -> int:
        """T for ``epochs`` epochs: ceil(E l), the Run's rule."""
        return self.sampler.steps_for_epochs(epochs)

    def _epoch_end(self) -> int:
        l = self.sampler.l
        e = math.floor(self.step / l + 1e-12) + 1
        end = math.ceil(e * l - 1e-9)
        return end if end > self.step else math.ceil((e + 1) * l - 1e-9)

    def __iter__(self) -> Iterator[list[int]]:
        end = self._epoch_end()
        while self.step < end:
            batch = self.sampler.batch(self.step)
            self.step += 1
            yield [int(i) for i in batch]

    def __len__(self) -> int:
        return self._epoch_end() - self.step


def _clipping_collate(collate: Callable[[Any], Any], data_norm: float, d: int | None) -> Any:
    """``collate`` followed by clipping every feature row to norm ``data_norm``."""

    def collate_and_clip(items: Any) -> Any:
        batch = collate(items)
        if not isinstance(batch, (list, tuple)) or not batch or not torch.is_tensor(batch[0]):
            raise ParameterError(
                "data_loader", "<batch>", "must yield (features, labels) with a tensor of features"
            )
        x = batch[0]
        flat = x.reshape(len(x), math.prod(x.shape[1:]))  # also for an empty Poisson batch
        if d is not None and flat.shape[1] != d:
            raise ParameterError(
                "data_loader",
                f"<features of shape {tuple(x.shape)}>",
                f"rows must have {d} features, the nn.Linear's in_features",
            )
        if not flat.is_floating_point():
            flat = flat.to(torch.get_default_dtype())
        clipped = clip_rows(flat, data_norm).reshape(x.shape)
        return type(batch)([clipped, *batch[1:]])

    return collate_and_clip


def _empty_safe_collate(collate: Callable[[Any], Any], dataset: Any) -> Any:
    """``collate``, and for an empty (Poisson) batch the collated first example cut to 0 rows:
    tensors of shape ``[0, ...]`` with the dataset's dtypes (only shapes and dtypes are used)."""

    def collate_or_empty(items: Any) -> Any:
        if len(items) > 0:
            return collate(items)
        one = collate([dataset[0]])
        if torch.is_tensor(one):
            return one[:0]
        if isinstance(one, (list, tuple)):
            return type(one)([t[:0] if torch.is_tensor(t) else t for t in one])
        raise ParameterError(
            "data_loader", "<batch>", "must yield (features, labels) with a tensor of features"
        )

    return collate_or_empty


# ---------------------------------------------------------------------------------------- update
class LastIterateDPOptimizer(DPOptimizer):
    """A ``DPOptimizer`` whose step is exactly the Run's (see the module docstring).

    ``x <- Proj_K(x - lr ((1/b_t) sum_{i in B_t} clip_C(g_i) + Z_t + l2 x))``, ``Z_t ~ N(0,
    sigma^2 I)`` over all parameters, ``sigma = noise_multiplier * max_grad_norm /
    expected_batch_size``; ``b_t`` is ``expected_batch_size`` (``normaliser="fixed"``, uniform
    batches of exactly that size; ``normaliser="poisson"``, Poisson batches of any realised size,
    empty included) or the realised batch size (``normaliser="realised"``, cyclic and shuffled
    partitions).  The noise of step t is drawn from ``randomness`` (stream
    :data:`NOISE_STREAM`, key t).  ``projection`` maps the flat parameter vector onto K.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        *,
        noise_multiplier: float,
        max_grad_norm: float,
        expected_batch_size: int,
        normaliser: str = "fixed",
        l2: float = 0.0,
        projection: Callable[[torch.Tensor], torch.Tensor] | None = None,
        randomness: Randomness | None = None,
        min_batch_size: int = 1,
    ) -> None:
        if normaliser not in ("fixed", "poisson", "realised"):
            raise ParameterError(
                "normaliser", normaliser, "must be 'fixed', 'poisson' or 'realised'"
            )
        super().__init__(
            optimizer,
            noise_multiplier=noise_multiplier,
            max_grad_norm=max_grad_norm,
            expected_batch_size=expected_batch_size,
            loss_reduction="mean",
        )
        self.normaliser = normaliser
        self.l2 = float(l2)
        self.projection = projection
        self.randomness = randomness if randomness is not None else Randomness.fresh()
        self.min_batch_size = check_positive_int("min_batch_size", min_batch_size)
        self._b_t = expected_batch_size
        #: steps taken (the key of the next step's noise)
        self.steps_taken = 0

    @property
    def noise_std(self) -> float:
        """sigma: std of the noise on the AVERAGED gradient (the Run's ``noise_std``)."""
        return float(self.noise_multiplier) * float(self.max_grad_norm) / self.expected_batch_size

    def _realised_size(self) -> int:
        """Size of the batch of this step, after checking it came in ONE backward pass."""
        if self.accumulated_iterations != 1:
            raise ParameterError(
                "accumulated_iterations",
                self.accumulated_iterations,
                ACCUMULATION_RANGE,
            )
        return len(self.grad_samples[0])

    def _normaliser(self) -> int:
        """b_t of this step, after checking the batch is one the accountant charged."""
        size = self._realised_size()
        if self.normaliser == "poisson":  # the FIXED b whatever the realised size (C/b per row)
            return int(self.expected_batch_size)
        if self.normaliser == "fixed":
            if size != self.expected_batch_size:
                raise ParameterError(
                    "batch",
                    size,
                    f"must hold exactly b={self.expected_batch_size} examples (uniform batches): "
                    "iterate the data loader returned by make_private_last_iterate",
                )
            return int(self.expected_batch_size)
        if size < self.min_batch_size:
            raise ParameterError(
                "batch",
                size,
                f"must hold at least b_min={self.min_batch_size} examples (the size the "
                "accountant charges): iterate the data loader returned by "
                "make_private_last_iterate",
            )
        return size

    def add_noise(self) -> None:
        """``p.grad = summed clipped gradients + b_t Z_t`` (std ``b_t sigma`` on the sum)."""
        self._b_t = b_t = self._normaliser()
        params = self.params
        numel = sum(p.numel() for p in params)
        noise = self.randomness.gaussian(
            NOISE_STREAM, self.steps_taken, numel, self.noise_std * b_t, params[0].dtype
        )
        k = 0
        for p in params:
            _check_processed_flag(p.summed_grad)
            z = noise[k : k + p.numel()].to(p.device).view_as(p)
            k += p.numel()
            p.grad = (p.summed_grad + z).view_as(p)
            _mark_as_processed(p.summed_grad)

    def scale_grad(self) -> None:
        """Divide by b_t, then add the regulariser's gradient ``l2 x`` (unclipped, noise-free)."""
        for p in self.params:
            p.grad /= self._b_t
            if self.l2:
                p.grad += self.l2 * p.detach()

    def project(self) -> None:
        """Apply ``projection`` to the flat vector of all parameters (no-op without one)."""
        if self.projection is None:
            return
        params = self.params
        with torch.no_grad():
            flat = torch.cat([p.detach().reshape(-1) for p in params])
            new = self.projection(flat)
            if new is not flat:
                k = 0
                for p in params:
                    p.copy_(new[k : k + p.numel()].view_as(p))
                    k += p.numel()

    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        if closure is not None:
            with torch.enable_grad():
                closure()
        if not self.pre_step():
            return None
        out = self.original_optimizer.step()
        self.project()
        self.steps_taken += 1
        return out


# ---------------------------------------------------------------------------------- ghost clipping
class GhostClippingModule(GradSampleModuleFastGradientClipping):
    """Opacus' ghost-clipping module that also records the size of every batch it clips.

    Opacus (``GradSampleModuleFastGradientClipping``, Li et al. 2022 "Large language models can
    be strong differentially private learners", Bu et al. 2023) computes every example's
    gradient NORM from the layer's activations and backpropagated errors, without materialising
    the per-example gradients (``nn.Linear``, ``nn.Embedding``; other layers fall back to
    per-layer per-example gradients).  The clip factor is Opacus' ``min(1, C / (||g_i|| +
    1e-6))``, the same as :meth:`DPOptimizer.clip_and_accumulate`'s, so the second backward pass
    of :class:`GhostClippingLoss` leaves ``sum_i clip_C(g_i)`` in ``p.grad``.
    :class:`LastIterateGhostDPOptimizer` reads the recorded sizes to apply the same normaliser
    and batch-size checks as :class:`LastIterateDPOptimizer`.
    """

    def __init__(self, module: nn.Module, *, max_grad_norm: float) -> None:
        super().__init__(
            module,
            batch_first=True,
            loss_reduction="mean",
            max_grad_norm=max_grad_norm,
            use_ghost_clipping=True,
        )
        #: sizes of the batches clipped since the optimizer's last step
        self.clipped_batch_sizes: list[int] = []

    def get_clipping_coef(self) -> torch.Tensor:
        """Opacus' per-example clip factors from the norms of THIS backward pass (they are
        consumed, so stale norms of an earlier batch are never reused: a forward pass in eval
        mode or without gradients computes none); records the batch size."""
        params = self.trainable_parameters
        if any(getattr(p, "_norm_sample", None) is None for p in params):
            raise ParameterError(
                "module",
                type(self._module).__name__,
                "computed no per-example gradient norms for this batch: run its forward pass "
                "in training mode with gradients enabled",
            )
        coef = super().get_clipping_coef()
        for p in params:
            p._norm_sample = None
        self.clipped_batch_sizes.append(len(coef))
        return coef

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped module's forward; Opacus' refusal of a layer used twice (parameter tying,
        which ghost clipping does not support) becomes one line."""
        try:
            return super().forward(*args, **kwargs)
        except NotImplementedError as exc:
            raise ParameterError(
                "module", type(self._module).__name__, f"cannot be ghost-clipped: {exc}"
            ) from None


class GhostClippingLoss:
    """The criterion of the ghost mode: ``criterion(output, target)`` per example.

    Returns Opacus' ``DPTensorFastGradientClipping``, whose ``backward()`` runs two passes: the
    first computes per-example gradient norms (:class:`GhostClippingModule`), the second
    backpropagates ``sum_i c_i loss_i`` with the clip factors c_i, i.e. leaves the SUM of the
    clipped per-example gradients in ``p.grad``.  The per-example loss is the criterion with
    ``reduction="none"`` averaged over every dimension but the batch's, which is what the
    criterion's ``"mean"`` assigns to one example (so both modes clip the same g_i).
    """

    def __init__(
        self,
        module: GhostClippingModule,
        optimizer: LastIterateGhostDPOptimizer,
        criterion: nn.Module,
    ) -> None:
        self.module = module
        self.optimizer = optimizer
        self.criterion: Any = criterion  # a torch loss module with a ``reduction``

    def per_example(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The criterion of each example (shape ``[batch]``)."""
        reduction = self.criterion.reduction
        self.criterion.reduction = "none"  # as Opacus' DPLossFastGradientClipping
        try:
            loss = self.criterion(output, target)
        finally:
            self.criterion.reduction = reduction
        if loss.dim() == 0 or len(loss) != len(output):
            raise ParameterError(
                "criterion",
                type(self.criterion).__name__,
                "must return one loss per example with reduction='none'",
            )
        return loss.flatten(1).mean(1) if loss.dim() > 1 else loss

    def __call__(self, output: torch.Tensor, target: torch.Tensor) -> Any:
        if not self.module.training:  # Opacus' hooks captured no activations to clip with
            raise ParameterError(
                "module", "eval mode", "must be in training mode (module.train()) to be trained"
            )
        return DPTensorFastGradientClipping(
            self.module, self.optimizer, self.per_example(output, target), "mean"
        )


class LastIterateGhostDPOptimizer(LastIterateDPOptimizer, DPOptimizerFastGradientClipping):
    """:class:`LastIterateDPOptimizer` on ghost clipping: the same step, noise, projection and
    checks, with the clipped sum computed by :class:`GhostClippingLoss` instead of from
    per-example gradients (Opacus' ``DPOptimizerFastGradientClipping`` takes ``p.grad`` as the
    clipped sum).  The realised batch size and the number of backward passes since the last step
    come from ``module`` (:class:`GhostClippingModule`): a step needs exactly one backward pass of
    the criterion returned by :func:`make_private_last_iterate`.
    """

    def __init__(
        self, optimizer: torch.optim.Optimizer, *, module: GhostClippingModule, **kwargs: Any
    ) -> None:
        super().__init__(optimizer, **kwargs)
        self.module = module
        self._size = 0

    def pre_step(self, closure: Callable[[], float] | None = None) -> bool | None:
        """Check there was one clipped backward pass, then Opacus' pre-step (noise, scaling)."""
        sizes = self.module.clipped_batch_sizes
        self.module.clipped_batch_sizes = []
        if len(sizes) != 1:
            raise ParameterError(
                "accumulated_iterations",
                len(sizes),
                ACCUMULATION_RANGE + "; backpropagate the loss of the criterion returned by "
                "make_private_last_iterate (grad_sample_mode='ghost')",
            )
        self._size = sizes[0]
        return super().pre_step(closure)

    def _realised_size(self) -> int:
        return self._size


def ball_projection(
    diameter: float, center: torch.Tensor | None = None
) -> Callable[[torch.Tensor], torch.Tensor]:
    """Projection onto the L2 ball of diameter D (radius D/2) around ``center`` (default 0)."""
    to_ball = l2_ball(diameter)
    if center is None:
        return to_ball
    c = center.detach().clone()

    def project(flat: torch.Tensor) -> torch.Tensor:
        moved = flat - c
        new = to_ball(moved)
        return flat if new is moved else new + c

    project.__name__ = f"l2_ball(D={diameter:g}, center=init)"
    return project


# ---------------------------------------------------------------------------------------- geometry
@dataclass(frozen=True)
class Geometry:
    """Where the Run's geometry comes from: a GLM certificate, the user, or nothing."""

    source: str  # "certified" | "declared" | "composition" (a GLM whose certificate failed)
    run_kwargs: dict[str, Any]
    note: str
    certificate: Certificate | None = None


def glm_linear(module: nn.Module) -> nn.Linear | None:
    """The single ``nn.Linear`` of a GLM (alone, or in an ``nn.Sequential`` whose other members
    are ``nn.Flatten`` / ``nn.Identity``); None for any other model."""
    if isinstance(module, AbstractGradSampleModule):
        module = module._module
    if type(module) is nn.Linear:
        return module
    if type(module) is nn.Sequential:
        layers = [m for m in module if not isinstance(m, (nn.Flatten, nn.Identity))]
        if len(layers) == 1 and type(layers[0]) is nn.Linear:
            return layers[0]
    return None


def loss_family(loss: Any, out_features: int) -> tuple[str, str]:
    """(loss name, GLM family) for ``loss`` (a name of :data:`LOSSES` or the torch module)."""
    if isinstance(loss, nn.Module):
        name = {cls: key for key, cls in _LOSS_MODULES.items()}.get(type(loss))
        if name is None:
            raise ParameterError(
                "loss",
                type(loss).__name__,
                "must be nn.CrossEntropyLoss, nn.BCEWithLogitsLoss "
                "or nn.MSELoss (or declare the geometry)",
            )
        plain = (
            getattr(loss, "reduction", "mean") == "mean"
            and all(getattr(loss, a, None) is None for a in ("weight", "pos_weight"))
            and float(getattr(loss, "label_smoothing", 0.0)) == 0.0
        )
        if not plain:
            raise ParameterError(
                "loss",
                repr(loss),
                "must be the plain loss: reduction='mean', no class weights, "
                "no label smoothing (the certificate is for the unweighted mean loss)",
            )
        loss = name
    if loss not in LOSSES:
        raise ParameterError("loss", loss, "must be one of " + ", ".join(LOSSES))
    family = LOSSES[loss]
    if family == "multinomial-logistic" and out_features < 2:
        raise ParameterError(
            "loss", loss, f"needs out_features >= 2 classes, the nn.Linear has {out_features}"
        )
    if family != "multinomial-logistic" and out_features != 1:
        raise ParameterError(
            "loss", loss, f"is certified for out_features = 1, the nn.Linear has {out_features}"
        )
    return loss, family


def glm_certify(
    module: nn.Module,
    *,
    loss: Any,
    data_norm: float | None,
    l2: float,
    clip: float,
    lr: float,
    sampling: str | None = None,
    n: int | None = None,
    batch_size: int | None = None,
) -> tuple[Certificate, str]:
    """The GLM certificate of ``module`` (certified or not) and the note describing it.

    Reuses :func:`lastiterate.train.geometry.glm_certificate` (derivations there): the bias of the
    ``nn.Linear`` is the intercept (R_eff = sqrt(R^2 + 1)); cross-entropy is the multinomial
    logistic loss, ``BCEWithLogitsLoss`` the binary logistic loss (labels in {0, 1}), and
    ``nn.MSELoss`` on one output is (u - y)^2 = 2 x the certificate's least-squares loss
    (u - y)^2 / 2, certified as least squares on rows of norm sqrt(2) R_eff (same Hessian
    2 x x^T, and the clip is still a scalar clamp, i.e. a Huber-type convex loss).
    ``sampling="poisson"`` (with ``n`` and ``batch_size``) takes the worst-case Poisson batch of
    all n rows normalised by b: M = (n/b) beta + lambda.

    Opacus clips with the factor ``min(1, C / (||g|| + 1e-6))`` (:data:`OPACUS_CLIP_EPS`).  For
    the scalar GLMs the clipped gradient is ``phi(l'(u)) x`` with ``phi(a) = a min(1, C / (|a|
    ||x|| + 1e-6))`` non-decreasing with slope <= 1, so it is still the derivative of a convex loss
    with the same M.  For the multinomial loss, where the certificate needs the clip never to be
    active, it is inactive for every example only when ``C >= sup ||g|| + 1e-6``: the certificate
    is computed for the clip ``C - 1e-6``.

    Raises:
        NotApplicable: ``module`` is not a GLM (no certificate can be derived at all).
        ParameterError: a missing or unknown loss, or a missing data_norm.
    """
    linear = glm_linear(module)
    if linear is None:
        raise NotApplicable(
            f"{type(module).__name__} is not a GLM (one nn.Linear, optionally in nn.Sequential "
            "with nn.Flatten): no convexity or smoothness can be certified; declare "
            "strong_convexity / smoothness / convex yourself to use the last-iterate theorems"
        )
    if loss is None:
        raise ParameterError(
            "loss", None, "is required for a GLM: one of " + ", ".join(LOSSES) + " (or the module)"
        )
    name, family = loss_family(loss, linear.out_features)
    if data_norm is None:
        raise ParameterError(
            "data_norm",
            None,
            "is required for a GLM: the bound R on ||x|| that rows are "
            "clipped to (the certificate's smoothness is proportional to R^2)",
        )
    R = check_positive("data_norm", data_norm)
    intercept = linear.bias is not None
    batch = {"sampling": sampling, "n": n, "batch_size": batch_size}
    if name == "mse":
        R_eff = math.sqrt(R * R + 1.0) if intercept else R
        cert = glm_certificate(
            family,
            feature_norm=math.sqrt(2.0) * R_eff,
            l2=l2,
            clip=clip,
            lr=lr,
            intercept=False,
            **batch,  # type: ignore[arg-type]
        )
        prefix = (
            f"nn.MSELoss = 2 x least squares: certified as least squares on rows of norm "
            f"sqrt(2) R_eff = {math.sqrt(2.0) * R_eff:.6g}; "
        )
    elif family == "multinomial-logistic":
        # Opacus scales a gradient g by min(1, C / (||g|| + 1e-6)): the clip is inactive for
        # every example only when C >= sup ||g|| + 1e-6, so certify with the clip C - 1e-6
        cert = glm_certificate(
            family,
            feature_norm=R,
            l2=l2,
            clip=max(clip - OPACUS_CLIP_EPS, clip / 2),
            lr=lr,
            intercept=intercept,
            **batch,  # type: ignore[arg-type]
        )
        prefix = (
            f"with Opacus' clip factor C/(||g|| + {OPACUS_CLIP_EPS:g}) the certificate uses "
            f"the clip C - {OPACUS_CLIP_EPS:g}; "
        )
    else:
        # scalar GLMs: min(1, C / (|l'(u)| ||x|| + 1e-6)) l'(u) is still a non-decreasing clamp
        # of l'(u) with slope <= 1, i.e. the derivative of a convex loss with the same M
        cert = glm_certificate(
            family,
            feature_norm=R,
            l2=l2,
            clip=clip,
            lr=lr,
            intercept=intercept,
            **batch,  # type: ignore[arg-type]
        )
        prefix = ""
    if not cert.certified:
        return cert, f"{name} GLM: {prefix}{cert.reason}"
    note = (
        f"certified for nn.Linear({linear.in_features}, {linear.out_features}, "
        f"bias={intercept}) with {name} on rows clipped to norm {R:g}, l2 = {l2:g}: "
        f"{prefix}{cert.reason}"
    )
    return cert, note


def glm_geometry(
    module: nn.Module,
    *,
    loss: Any,
    data_norm: float | None,
    l2: float,
    clip: float,
    lr: float,
    sampling: str | None = None,
    n: int | None = None,
    batch_size: int | None = None,
) -> Geometry:
    """The certified geometry of a GLM module (:func:`glm_certify`).

    Raises:
        NotApplicable: the module is not a GLM, or its certificate fails (the reason and the
            hint say why and how to fix it).
        ParameterError: a missing or unknown loss, or a missing data_norm.
    """
    cert, note = glm_certify(
        module,
        loss=loss,
        data_norm=data_norm,
        l2=l2,
        clip=clip,
        lr=lr,
        sampling=sampling,
        n=n,
        batch_size=batch_size,
    )
    if not cert.certified:
        raise NotApplicable(note + (f" ({cert.hint})" if cert.hint else ""))
    return Geometry("certified", cert.run_geometry(), note, cert)


def composition_geometry(cert: Certificate, why: str) -> Geometry:
    """No geometry, because the GLM certificate ``cert`` failed (``why``): composition only."""
    hint = ""
    if cert.hint:
        hint = f" To get last-iterate accounting back: {cert.hint}"
        if cert.model == "multinomial-logistic" and cert.clipping_active:
            hint += f" (plus Opacus' clip constant {OPACUS_CLIP_EPS:g} on max_grad_norm)"
        hint += "."
    note = (
        f"NONE -- the GLM certificate failed ({why}); only composition applies "
        f"({', '.join(COMPOSITION_BOUNDS)}: no convexity needed, every iterate covered).{hint}"
    )
    return Geometry("composition", {}, note, cert)


def declared_geometry(
    strong_convexity: float | None, smoothness: float | None, convex: bool
) -> Geometry | None:
    """The user's declaration (None when nothing is declared)."""
    if strong_convexity is None and smoothness is None and not convex:
        return None
    kw: dict[str, Any] = {}
    if strong_convexity is not None:
        kw["strong_convexity"] = strong_convexity
    if smoothness is not None:
        kw["smoothness"] = smoothness
    if convex:
        kw["convex"] = True
    shown = ", ".join(f"{k}={v}" for k, v in kw.items())
    note = (
        f"USER-DECLARED ({shown}): not derived or verified by lastiterate; the guarantee holds "
        "only if the executed update (loss, clipping, l2) really has this geometry"
    )
    return Geometry("declared", kw, note)


# ---------------------------------------------------------------------------------------- account
class LastIteratePathAccountant(LastIterateAccountant):
    """The :class:`LastIterateAccountant` of a wired run, which also says where the geometry and
    the noise came from (:meth:`explain`).  ``planned_run`` is the Run of the planned epochs and
    ``calibration`` the :class:`~lastiterate.accountant.Calibration` that chose the noise."""

    def __init__(self, *, geometry: Geometry, realisation: str, **declaration: Any) -> None:
        super().__init__(**declaration)
        self.geometry = geometry
        self.realisation = realisation
        self.planned_run: Run | None = None
        self.calibration: Any = None

    @property
    def declared_geometry(self) -> bool:
        """Whether the Run is known well enough to account with lastiterate's bounds: a declared
        or certified geometry, or (``source="composition"``) a GLM whose certificate failed --
        its Run carries no geometry and only the composition bounds apply to it, which is
        lastiterate's accounting of the realised mechanism, not Opacus' fallback."""
        return self.geometry.source == "composition" or super().declared_geometry

    def explain(self) -> str:
        """The accountant's explanation, then the geometry's source and what was realised."""
        note = self.geometry.note.rstrip(".")
        return (
            f"{super().explain()} Geometry: {note}. Realised by "
            f"lastiterate.opacus: {self.realisation}."
        )


def _sgd_settings(optimizer: Any, module: nn.Module) -> tuple[float, float]:
    """(lr, weight decay) of a plain ``torch.optim.SGD`` over the module's parameters."""
    if isinstance(optimizer, DPOptimizer) or type(optimizer) is not torch.optim.SGD:
        raise ParameterError(
            "optimizer",
            type(optimizer).__name__,
            "must be a plain torch.optim.SGD (the theorems "
            "analyse gradient steps; wiring adds the clipping, noise and projection)",
        )
    groups = optimizer.param_groups
    for name, bad in (("momentum", 0.0), ("nesterov", False), ("maximize", False)):
        values = {g.get(name, bad) for g in groups}
        if values != {bad}:
            raise ParameterError(
                "optimizer",
                f"{name}={sorted(values, key=str)}",
                f"must be {name}={bad}: the theorems need plain gradient steps",
            )
    lrs = {float(g["lr"]) for g in groups}
    wds = {float(g.get("weight_decay", 0.0) or 0.0) for g in groups}
    if len(lrs) != 1 or len(wds) != 1:
        raise ParameterError(
            "optimizer",
            f"lr={sorted(lrs)}, weight_decay={sorted(wds)}",
            "must use one learning rate and one weight decay for all parameters",
        )
    theirs = {id(p) for g in groups for p in g["params"]}
    mine = {id(p) for p in module.parameters() if p.requires_grad}
    if theirs != mine:
        raise ParameterError(
            "optimizer", "<parameters>", "must optimise exactly the module's trainable parameters"
        )
    lr = check_positive("lr", lrs.pop())
    wd = wds.pop()
    if wd < 0:
        raise ParameterError("weight_decay", wd, "must be >= 0")
    return lr, wd


def _batch_size(data_loader: Any, batch_size: int | None) -> int:
    if batch_size is not None:
        return check_positive_int("batch_size", batch_size)
    b = getattr(data_loader, "batch_size", None)
    if b is None:
        raise ParameterError(
            "batch_size", None, "is required when the data loader has no batch_size"
        )
    return check_positive_int("batch_size", b)


@overload
def make_private_last_iterate(
    module: nn.Module,
    optimizer: torch.optim.Optimizer,
    data_loader: DataLoader,
    *,
    target_epsilon: float,
    target_delta: float,
    epochs: float,
    max_grad_norm: float,
    sampling: str = "uniform",
    adjacency: str = "replace",
    diameter: float | None = None,
    strong_convexity: float | None = None,
    smoothness: float | None = None,
    convex: bool = False,
    loss: Any = None,
    data_norm: float | None = None,
    batch_size: int | None = None,
    center: str = "origin",
    seed: int | None = None,
    secure: bool = False,
    bounds: list[str] | None = None,
    accounting: str = "auto",
    grad_sample_mode: Literal["hooks"] = "hooks",
    criterion: None = None,
) -> tuple[GradSampleModule, LastIterateDPOptimizer, DataLoader, LastIteratePathAccountant]: ...


@overload
def make_private_last_iterate(
    module: nn.Module,
    optimizer: torch.optim.Optimizer,
    data_loader: DataLoader,
    *,
    target_epsilon: float,
    target_delta: float,
    epochs: float,
    max_grad_norm: float,
    sampling: str = "uniform",
    adjacency: str = "replace",
    diameter: float | None = None,
    strong_convexity: float | None = None,
    smoothness: float | None = None,
    convex: bool = False,
    loss: Any = None,
    data_norm: float | None = None,
    batch_size: int | None = None,
    center: str = "origin",
    seed: int | None = None,
    secure: bool = False,
    bounds: list[str] | None = None,
    accounting: str = "auto",
    grad_sample_mode: Literal["ghost"],
    criterion: nn.Module,
) -> tuple[
    GhostClippingModule,
    LastIterateGhostDPOptimizer,
    GhostClippingLoss,
    DataLoader,
    LastIteratePathAccountant,
]: ...


def make_private_last_iterate(
    module: nn.Module,
    optimizer: torch.optim.Optimizer,
    data_loader: DataLoader,
    *,
    target_epsilon: float,
    target_delta: float,
    epochs: float,
    max_grad_norm: float,
    sampling: str = "uniform",
    adjacency: str = "replace",
    diameter: float | None = None,
    strong_convexity: float | None = None,
    smoothness: float | None = None,
    convex: bool = False,
    loss: Any = None,
    data_norm: float | None = None,
    batch_size: int | None = None,
    center: str = "origin",
    seed: int | None = None,
    secure: bool = False,
    bounds: list[str] | None = None,
    accounting: str = "auto",
    grad_sample_mode: str = "hooks",
    criterion: nn.Module | None = None,
) -> Any:
    """Wire an Opacus run whose FINAL model meets (``target_epsilon``, ``target_delta``).

    Returns ``(module, optimizer, data_loader, accountant)``: a ``GradSampleModule``, a
    :class:`LastIterateDPOptimizer` with the calibrated noise multiplier, a loader whose batches
    are ``sampling``'s (rows clipped to ``data_norm`` when given) and a
    :class:`LastIteratePathAccountant` attached to the optimizer, whose Run is the realised
    algorithm.  Train ``epochs`` passes over the returned loader with one ``optimizer.step()`` per
    batch; then ``accountant.get_epsilon(target_delta) <= target_epsilon``.

    With ``grad_sample_mode="ghost"`` (Opacus' ghost clipping: per-example gradient norms
    without the per-example gradients) it returns ``(module, optimizer, criterion, data_loader,
    accountant)``, as Opacus' ``make_private(..., grad_sample_mode="ghost")`` does: a
    :class:`GhostClippingModule`, a :class:`LastIterateGhostDPOptimizer` (the same step, noise,
    projection and checks) and a :class:`GhostClippingLoss`; every step is
    ``optimizer.zero_grad(); criterion(module(x), y).backward(); optimizer.step()``.

    Args:
        module, optimizer, data_loader: the model, a plain ``torch.optim.SGD`` over its
            parameters (constant lr, no momentum; its ``weight_decay`` becomes the l2 term of the
            DP step) and a loader over the private dataset (its dataset, collate function and
            workers are kept; its sampler is replaced).
        target_epsilon, target_delta: the budget for releasing the final model.
        epochs: planned passes over the data (T = ceil(epochs l) steps).
        max_grad_norm: the per-example clip norm C (replace-one sensitivity L = 2C).
        sampling: ``"uniform"`` (default), ``"cyclic"``, ``"shuffle"`` or ``"poisson"`` (rate
            b/n, normalised by the fixed b; module docstring).
        adjacency: ``"replace"`` or ``"add-remove"`` (Poisson sampling only: the other schemes
            normalise by a size that depends on the data, and are refused with the reason).
        diameter: D of the projection ball (radius D/2), projected onto after every step.
        strong_convexity, smoothness, convex: a USER-DECLARED geometry (any model); without it
            the geometry is derived for GLMs and any other model is refused.
        loss: for a GLM, ``"cross-entropy"``, ``"bce-with-logits"``, ``"mse"`` or the torch loss
            module (plain mean reduction).
        data_norm: R, the bound rows are clipped to (required for a GLM).
        batch_size: b (default: the loader's batch size).
        center: ``"origin"`` or ``"init"``, the centre of the projection ball.
        seed: None for fresh secret randomness (default); an int reproduces batches and noise
            (the guarantee then needs the seed to stay secret).
        secure: a keyed CSPRNG and the floating-point-safe Gaussian sampler.
        bounds: restrict the accountant's bounds (default: all, composition included).
        accounting: ``"auto"`` (default): a GLM whose certificate fails (e.g. a multinomial
            clip C < sqrt(2) R_eff, or lr >= 2/M) is wired without geometry and accounted by
            composition only, with a :class:`CompositionOnlyWarning` and the reason in
            ``accountant.explain()``; ``"last-iterate"``: such a GLM is refused.
        grad_sample_mode: ``"hooks"`` (default: Opacus' per-example gradients) or ``"ghost"``
            (ghost clipping; needs ``criterion``).
        criterion: the torch loss module (``reduction="mean"``) of the ghost mode; for a GLM it
            is the loss the geometry is certified for (``loss``, if given, must name it).

    Raises:
        ParameterError: invalid input (one line naming the parameter).
        NotApplicable: the module is not a GLM and no geometry was declared, or (with
            ``accounting="last-iterate"``) a GLM's certificate fails (e.g. lr >= 2/M, or an
            active softmax clip); the reason says which and how to fix it.
    """
    if not isinstance(module, nn.Module):
        raise ParameterError("module", type(module).__name__, "must be a torch.nn.Module")
    if not isinstance(data_loader, DataLoader):
        raise ParameterError(
            "data_loader", type(data_loader).__name__, "must be a torch DataLoader"
        )
    if sampling not in SAMPLINGS:
        raise ParameterError("sampling", sampling, "must be one of " + ", ".join(SAMPLINGS))
    if center not in ("origin", "init"):
        raise ParameterError("center", center, "must be 'origin' or 'init'")
    if not isinstance(secure, bool):
        raise ParameterError("secure", secure, "must be True or False")
    if not isinstance(convex, bool):  # bool("False") would declare convexity
        raise ParameterError("convex", convex, "must be True or False")
    if accounting not in ACCOUNTINGS:
        raise ParameterError("accounting", accounting, "must be one of " + ", ".join(ACCOUNTINGS))
    ghost = _ghost_mode(grad_sample_mode, criterion, module)
    if ghost:
        loss = _ghost_loss(loss, criterion)
    eps = check_positive("target_epsilon", target_epsilon)
    target_delta = check_positive("target_delta", target_delta)
    if not target_delta < 1:
        raise ParameterError("target_delta", target_delta, "must be in (0, 1)")
    E = check_positive("epochs", epochs)
    C = check_positive("max_grad_norm", max_grad_norm)
    lr, l2 = _sgd_settings(optimizer, module)
    n = len(data_loader.dataset)  # type: ignore[arg-type]
    b = _batch_size(data_loader, batch_size)
    if b > n:
        raise ParameterError("batch_size", b, f"must be an integer in [1, n={n}]")

    geometry = declared_geometry(strong_convexity, smoothness, convex)
    if geometry is None:
        poisson = sampling == "poisson"  # the worst-case batch: M = (n/b) beta + lambda
        cert, note = glm_certify(
            module,
            loss=loss,
            data_norm=data_norm,
            l2=l2,
            clip=C,
            lr=lr,
            sampling="poisson" if poisson else None,
            n=n if poisson else None,
            batch_size=b if poisson else None,
        )
        if cert.certified:
            geometry = Geometry("certified", cert.run_geometry(), note, cert)
        elif accounting == "last-iterate":
            raise NotApplicable(note + (f" ({cert.hint})" if cert.hint else ""))
        else:
            geometry = composition_geometry(cert, note)
            if bounds is not None and not set(bounds) & set(COMPOSITION_BOUNDS):
                raise NotApplicable(
                    f"{note}; only composition applies, and bounds={list(bounds)} excludes "
                    f"{', '.join(COMPOSITION_BOUNDS)}"
                )
            warnings.warn(
                f"lastiterate.opacus: {geometry.note} (accounting='last-iterate' refuses "
                "such a run instead)",
                CompositionOnlyWarning,
                stacklevel=2,
            )
    elif l2 > 0:
        geometry = Geometry(
            geometry.source,
            geometry.run_kwargs,
            geometry.note + f" (the l2 term lambda = {l2:g} is applied in every step)",
        )

    randomness = Randomness.of(seed, secure)
    if randomness.seeded:
        warnings.warn(SEED_WARNING, SeededRunWarning, stacklevel=2)
    batch_sampler = LastIterateBatchSampler(n, b, sampling, seed=randomness)
    T = batch_sampler.steps_for_epochs(E)

    # the planned run, calibrated (the accountant builds the same Run from Opacus' steps)
    run_kw: dict[str, Any] = {
        **batch_sampler.run_kwargs(),
        "n": n,
        "lr": lr,
        "steps": T,
        "clip": C,
        "diameter": diameter,
        "adjacency": adjacency,
        **geometry.run_kwargs,
    }
    planned = Run(noise_multiplier=1.0, **run_kw)
    from lastiterate.accountant import account, calibrate_noise

    cal = calibrate_noise(planned, epsilon=eps, delta=target_delta, bounds=bounds)
    # sigma -> z -> sigma may lose an ulp, and the composition bound's grid is sized from its
    # certified bracket, so a noise a hair above the calibrated one can report a bound a hair
    # higher (both are valid upper bounds; seen: 4.0000000128 at z = 5.78956117 against
    # 3.99999995 at z = 5.78956116, full MNIST, add/remove): round the noise up until the
    # re-accounted run meets the target
    z = float(cal.noise_std) * b / C * (1.0 + 1e-12)
    for _ in range(_NOISE_ROUND_UP_TRIES):
        planned = planned.replace(noise_multiplier=z)
        best = account(planned, delta=target_delta, bounds=bounds).best
        if best is not None and best.epsilon <= eps:
            break
        z *= 1.0 + _NOISE_ROUND_UP
    else:  # never hand out an over-budget run
        raise NotApplicable(f"calibration did not meet epsilon={eps:g} (best: {best})")

    # the loader: the user's dataset, collate and workers; our batches; rows clipped to R
    linear = glm_linear(module)
    collate = data_loader.collate_fn
    if sampling == "poisson":  # a Poisson batch may be empty
        collate = _empty_safe_collate(collate, data_loader.dataset)
    if data_norm is not None:
        collate = _clipping_collate(
            collate,
            check_positive("data_norm", data_norm),
            linear.in_features if linear is not None else None,
        )
    loader = DataLoader(
        data_loader.dataset,
        batch_sampler=batch_sampler,
        collate_fn=collate,
        num_workers=data_loader.num_workers,
        pin_memory=data_loader.pin_memory,
        timeout=data_loader.timeout,
        worker_init_fn=data_loader.worker_init_fn,
        multiprocessing_context=data_loader.multiprocessing_context,
        prefetch_factor=data_loader.prefetch_factor if data_loader.num_workers > 0 else None,
        persistent_workers=data_loader.persistent_workers,
    )

    # the module (per-example gradients, or their norms) and the projection set
    gsm: AbstractGradSampleModule
    try:
        if ghost:
            gsm = GhostClippingModule(module, max_grad_norm=C)
        elif isinstance(module, GradSampleModule):
            gsm = module
        else:
            gsm = GradSampleModule(module, batch_first=True, loss_reduction="mean")
    except NotImplementedError as exc:
        raise ParameterError(
            "module", type(module).__name__, f"has no Opacus per-example gradients: {exc}"
        ) from None
    projection = None
    if diameter is not None:
        params = [p for p in gsm.parameters() if p.requires_grad]
        start = torch.cat([p.detach().reshape(-1) for p in params])
        projection = ball_projection(diameter, start if center == "init" else None)

    # the optimizer: its weight decay becomes the DP step's l2 term
    for g in optimizer.param_groups:
        g["weight_decay"] = 0.0
    dp_class = LastIterateGhostDPOptimizer if ghost else LastIterateDPOptimizer
    dp_optimizer = dp_class(
        optimizer,
        **({"module": gsm} if ghost else {}),
        noise_multiplier=z,
        max_grad_norm=C,
        expected_batch_size=b,
        normaliser={"uniform": "fixed", "poisson": "poisson"}.get(sampling, "realised"),
        l2=l2,
        projection=projection,
        randomness=randomness,
        min_batch_size=planned.b_min,
    )
    dp_optimizer.project()  # x_0 in K (a no-op for center="init" or without a diameter)

    sampling_kw = planned.sampling_scheme
    realisation = (
        f"{_describe(sampling, n, b)}; noise multiplier z = {z:.6g} (sigma = z C / b = "
        f"{planned.sigma:.6g} on the averaged gradient) from "
        f"{'a seed (keep it secret)' if randomness.seeded else 'fresh secret OS entropy'}"
        f"{' (secure CSPRNG)' if secure else ''}; clip C = {C:g}; lr = {lr:g}; l2 = {l2:g}"
        + (f"; rows clipped to norm {data_norm:g}" if data_norm is not None else "")
        + (
            f"; projection onto the ball of diameter {diameter:g} around the "
            f"{'initial parameters' if center == 'init' else 'origin'} after every step"
            if diameter is not None
            else "; no projection"
        )
        + f"; planned {T} steps ({E:g} epochs), calibrated with {best.bound}"
        + ("; Opacus ghost clipping (per-example gradient norms)" if ghost else "")
    )
    accountant = LastIteratePathAccountant(
        geometry=geometry,
        realisation=realisation,
        n=n,
        batch_size=b,
        lr=lr,
        clip=C,
        strong_convexity=geometry.run_kwargs.get("strong_convexity"),
        smoothness=geometry.run_kwargs.get("smoothness"),
        convex=bool(geometry.run_kwargs.get("convex", False)),
        diameter=diameter,
        sampling=sampling_kw if sampling_kw is not None else "poisson",
        algorithm=planned.algorithm,
        adjacency=adjacency,
        bounds=bounds,
    )
    accountant.planned_run = planned
    accountant.calibration = cal
    dp_optimizer.attach_step_hook(accountant.get_optimizer_hook_fn(sample_rate=b / n))
    if ghost:
        assert isinstance(gsm, GhostClippingModule) and criterion is not None
        assert isinstance(dp_optimizer, LastIterateGhostDPOptimizer)
        wrapped = GhostClippingLoss(gsm, dp_optimizer, criterion)
        return gsm, dp_optimizer, wrapped, loader, accountant
    return gsm, dp_optimizer, loader, accountant


def _ghost_mode(grad_sample_mode: str, criterion: Any, module: nn.Module) -> bool:
    """Whether the ghost mode is asked for, after checking its inputs."""
    if grad_sample_mode not in GRAD_SAMPLE_MODES:
        raise ParameterError(
            "grad_sample_mode", grad_sample_mode, "must be one of " + ", ".join(GRAD_SAMPLE_MODES)
        )
    if grad_sample_mode == "hooks":
        if criterion is not None:
            raise ParameterError(
                "criterion", type(criterion).__name__, "is only used with grad_sample_mode='ghost'"
            )
        return False
    if not isinstance(criterion, nn.Module):
        raise ParameterError(
            "criterion",
            None if criterion is None else type(criterion).__name__,
            "must be a torch loss module (e.g. nn.CrossEntropyLoss()) in the ghost mode",
        )
    if getattr(criterion, "reduction", None) != "mean":
        raise ParameterError(
            "criterion",
            f"reduction={getattr(criterion, 'reduction', None)!r}",
            "must be reduction='mean' (the mean loss whose per-example gradients are clipped)",
        )
    if isinstance(module, AbstractGradSampleModule):
        raise ParameterError(
            "module",
            type(module).__name__,
            "must be the plain model with grad_sample_mode='ghost' (it is wrapped here)",
        )
    return True


def _ghost_loss(loss: Any, criterion: Any) -> Any:
    """The loss a GLM is certified for in the ghost mode: the criterion itself (``loss``, if
    given, must name the same loss)."""
    if loss is None:
        return criterion
    named = _LOSS_MODULES.get(loss) if isinstance(loss, str) else type(loss)
    if named is not type(criterion):
        raise ParameterError(
            "loss",
            loss if isinstance(loss, str) else type(loss).__name__,
            f"must name the criterion's loss ({type(criterion).__name__}) with "
            "grad_sample_mode='ghost'",
        )
    return criterion


def _describe(sampling: str, n: int, b: int) -> str:
    if sampling == "uniform":
        return f"uniform batches of exactly b = {b} of n = {n}, normalised by b"
    if sampling == "poisson":
        if b == n:
            return (
                f"Poisson sampling at rate 1 (every row of n = {n} at every step), the clipped "
                "sum divided by the fixed b = n"
            )
        return (
            f"Poisson batches (every row independently with rate b/n = {b}/{n}), the clipped "
            f"sum divided by the fixed b = {b} whatever the realised size"
        )
    l = math.ceil(n / b)
    kind = (
        "one secret shuffle, then cyclic" if sampling == "cyclic" else "a fresh shuffle per epoch"
    )
    return (
        f"{kind}: l = {l} balanced batches of {n // l}-{-(-n // l)} examples per epoch, each "
        "normalised by its size"
    )


__all__ = [
    "ACCOUNTINGS",
    "COMPOSITION_BOUNDS",
    "GRAD_SAMPLE_MODES",
    "LOSSES",
    "NOISE_STREAM",
    "SAMPLINGS",
    "CompositionOnlyWarning",
    "Geometry",
    "GhostClippingLoss",
    "GhostClippingModule",
    "LastIterateAccountant",
    "LastIterateBatchSampler",
    "LastIterateDPOptimizer",
    "LastIterateGhostDPOptimizer",
    "LastIteratePathAccountant",
    "ball_projection",
    "composition_geometry",
    "declared_geometry",
    "glm_certify",
    "glm_geometry",
    "glm_linear",
    "loss_family",
    "make_private_last_iterate",
]
