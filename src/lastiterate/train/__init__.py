"""Training with guarantees: the exact algorithms the last-iterate theorems assume (PyTorch, CPU).

    from lastiterate.train import GLM, NoisyCGD, load_dataset

    data = load_dataset("digits", feature_norm=0.7, seed=0)
    model = GLM(data.n_features, data.n_classes, family="multinomial-logistic")
    method = NoisyCGD(model, batch_size=256, lr=1.0, noise_std=0.05, clip=1.0, l2=0.005,
                      feature_norm=0.7)   # no seed: the noise comes from secret OS entropy
    result = method.fit(data.X_train, data.y_train, epochs=100, ledger="privacy.jsonl")
    result.report.best            # the tightest guarantee for releasing the final model
    result.run                    # the lastiterate.run.Run the trainer executed
    result.certificate            # m, M, L, c -- or why no geometry is claimed

Modules: :mod:`~.sampling` (batches with the accountant's semantics), :mod:`~.geometry` (GLM
certificates), :mod:`~.models` (closed-form / per-layer per-example gradients), :mod:`~.trainer`
(NoisyGD, NoisyCGD, NoisySGD, NoisyAdam), :mod:`~.ledger` (privacy ledger, checkpoints),
:mod:`~.budget` (budget stop), :mod:`~.data` (datasets), :mod:`~.preprocessing` (scaling inside the
guarantee), :mod:`~.randomness` (secret or seeded noise and batches), :mod:`~.model_file` (the
released model file and its card: ``load_model``), :mod:`~.opacus_accountant` (an Opacus
``IAccountant``), :mod:`~.distributed` (data-parallel training over the global batch, devices).
The command line (``lastiterate train``, ``lastiterate predict``) lives in
:mod:`lastiterate.cli`.

Importing this package is cheap: torch is imported only when a torch-based name is first used.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Sampler": "sampling",
    "make_sampler": "sampling",
    "balanced_partition": "sampling",
    "Certificate": "geometry",
    "glm_certificate": "geometry",
    "uncertified": "geometry",
    "GLM": "models",
    "ModuleModel": "models",
    "mlp": "models",
    "parameters_digest": "models",
    "NoisyGD": "trainer",
    "NoisyCGD": "trainer",
    "NoisySGD": "trainer",
    "NoisyRuns": "trainer",
    "RunsResult": "trainer",
    "NoisyAdam": "trainer",
    "NoisyMethod": "trainer",
    "TrainResult": "trainer",
    "evaluate": "trainer",
    "l2_ball": "trainer",
    "clip_rows": "trainer",
    "Ledger": "ledger",
    "read_ledger": "ledger",
    "save_checkpoint": "ledger",
    "load_checkpoint": "ledger",
    "allowed_steps": "budget",
    "Budget": "budget",
    "truncate": "budget",
    "Dataset": "data",
    "load_dataset": "data",
    "load_frame": "data",
    "load_idx": "data",
    "load_mnist": "data",
    "write_idx": "data",
    "LastIterateAccountant": "opacus_accountant",
    "preprocess": "preprocessing",
    "Preprocessing": "preprocessing",
    "Randomness": "randomness",
    "SeededRunWarning": "randomness",
    "load_model": "model_file",
    "save_model": "model_file",
    "model_card": "model_file",
    "ReleasedModel": "model_file",
    "DataParallel": "distributed",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value
