"""lastiterate: privacy accounting for noisy gradient descent when only the final model is released."""

from __future__ import annotations

__version__ = "0.1.0"

from lastiterate.errors import NotApplicable, ParameterError

__all__ = ["NotApplicable", "ParameterError", "__version__"]
