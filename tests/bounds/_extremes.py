"""The base run of benchmarks/accountant.py's extremes table, shared by the bounds' speed tests."""

from __future__ import annotations

from typing import Any

#: the extremes table of benchmarks/accountant.py (n = 60000, b = 256, sigma = 0.02, L = 2)
BASE: dict[str, Any] = {
    "algorithm": "sgd",
    "sampling": "uniform",
    "n": 60000,
    "batch_size": 256,
    "lr": 0.05,
    "noise_std": 0.02,
    "sensitivity": 2.0,
    "smoothness": 1.0,
}
SC = {"strong_convexity": 0.002}
CONVEX_D = {"convex": True, "diameter": 10.0}
