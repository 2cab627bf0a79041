"""lastiterate: privacy accounting for noisy gradient descent when only the final model is released.

    import lastiterate as li

    run = li.Run(algorithm="cgd", n=60000, batch_size=1500, epochs=200, lr=0.05, noise_std=0.01,
                 sensitivity=10.0, strong_convexity=0.002, smoothness=32.5)
    report = li.account(run, delta=1e-5)
    report.best.epsilon, report.best.bound       # (7.579..., 'shifted-interpolation')
    print(report.format())                        # every bound, and why the others do not apply
    li.calibrate_noise(run, epsilon=2.0, delta=1e-5).noise_std
    li.calibrate_batch_size(run, epsilon=8.0, delta=1e-5).batch_size   # 1396 (fixed noise std:
                                                  # the smallest batch within the budget)

What a number means: ``epsilon`` and ``delta`` bound what an adversary learns about one example
(replace-one adjacency unless ``adjacency="add-remove"``) from the FINAL model alone; intermediate
iterates, checkpoints and unseeded randomness must stay secret.  ``sensitivity`` L bounds the
gradient difference of ANY two possible examples (``clip=C`` gives L = 2C).

Names are imported lazily, so ``import lastiterate`` (and the CLI's start-up) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lastiterate.errors import NotApplicable, ParameterError

__version__ = "0.1.0"

if TYPE_CHECKING:
    from lastiterate.accountant import (
        Calibration,
        Failure,
        Refusal,
        Report,
        account,
        calibrate_batch_size,
        calibrate_epochs,
        calibrate_noise,
    )
    from lastiterate.bounds.base import Query, Result
    from lastiterate.run import Run
    from lastiterate.train.geometry import Certificate, glm_certificate

_EXPORTS = {
    "Run": "lastiterate.run",
    "account": "lastiterate.accountant",
    "calibrate_noise": "lastiterate.accountant",
    "calibrate_epochs": "lastiterate.accountant",
    "calibrate_batch_size": "lastiterate.accountant",
    "Report": "lastiterate.accountant",
    "Calibration": "lastiterate.accountant",
    "Refusal": "lastiterate.accountant",
    "Failure": "lastiterate.accountant",
    "Result": "lastiterate.bounds.base",
    "Query": "lastiterate.bounds.base",
    "glm_certificate": "lastiterate.train.geometry",
    "Certificate": "lastiterate.train.geometry",
    "account_grid": "lastiterate.sweep",
}

__all__ = [
    "Calibration", "Certificate", "Failure", "NotApplicable", "ParameterError", "Query", "Refusal",
    "Report", "Result", "Run", "__version__", "account", "account_grid", "calibrate_batch_size",
    "calibrate_epochs", "calibrate_noise", "glm_certificate",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
