"""scikit-learn estimators whose privacy cost is accounted.

.. warning::

   A plain :class:`sklearn.preprocessing.StandardScaler` in front of a private estimator LEAKS:
   it learns every feature's exact mean and standard deviation from the training data, and the
   fitted pipeline (and every prediction) depends on them with no noise at all.  A one-row change
   moves them, so a differentially private estimator after it no longer makes the pipeline
   differentially private.  Use :class:`DPStandardScaler` (declared bounds, a spent budget), or a
   data-independent scaling such as ``FunctionTransformer`` with a public range.

:class:`DPStandardScaler` releases the means and variances with the Gaussian mechanism on values
clipped to DECLARED bounds (:class:`lastiterate.train.preprocessing.GaussianMomentsMechanism`)
and reports its cost as mu-GDP in ``privacy_report_``.  GDP composes exactly: a pipeline whose
estimator is ``mu_model``-GDP on the scaled data is ``sqrt(mu_model^2 + mu_scaler^2)``-GDP
(Dong, Roth & Su 2022, Cor. 3.3); :func:`lastiterate.train.preprocessing.compose_with_preprocessing`
composes it with any training report.
"""

from __future__ import annotations

import math
from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from lastiterate.errors import ParameterError, check_in_range, check_positive
from lastiterate.notions.gdp import gdp_epsilon, gdp_mu
from lastiterate.train.preprocessing import ADJACENCIES, parse_range, private_moments

__all__ = ["DPStandardScaler"]


def _generator(random_state: Any) -> np.random.Generator:
    """None: fresh entropy from the operating system (the default: the noise must stay secret);
    an int or a ``numpy.random.Generator``: reproducible (the guarantee then holds only while the
    seed stays secret and is never reused on other data)."""
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, Integral) and not isinstance(random_state, bool) and int(random_state) >= 0:
        return np.random.default_rng(int(random_state))
    raise ParameterError("random_state", random_state, "must be None (fresh OS entropy), an integer >= 0 or a numpy Generator")


class DPStandardScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Standardise features with differentially private means and variances.

    Every value is clipped to its declared bounds, the per-feature sums of the values and of their
    squares are released with Gaussian noise (the Gaussian mechanism, mu-GDP: Dong, Roth & Su 2022,
    Thm 2.7), and ``transform`` maps ``x -> (clip(x, lo, hi) - mean_) / scale_``.  The bounds must
    be DECLARED (public knowledge such as a sensor's or a pixel's range); they are never computed
    from the data, which would leak (see the module warning about a plain ``StandardScaler``).

    Parameters
    ----------
    bounds : (lo, hi) for every feature, or one (lo, hi) per feature. Required.
    epsilon : float, optional
        Budget spent, at ``delta``: converted exactly to ``mu = gdp_mu(epsilon, delta)``.
    delta : float, default 1e-5
    mu : float, optional
        Budget spent as mu-GDP (give exactly one of ``epsilon`` and ``mu``).
    adjacency : {"replace", "add-remove"}, default "replace"
        Replace-one treats the number of rows as public; add-remove also releases a noisy count.
    random_state : None, int or numpy Generator, default None
        None draws the noise from fresh OS entropy (keep it so for a real release).

    Attributes
    ----------
    mean_, scale_, var_ : ndarray of shape (n_features,)
    n_features_in_ : int
    mu_, epsilon_, delta_ : the spent budget (mu-GDP and its epsilon at delta).
    privacy_report_ : dict
        The mechanism, its noise stds, the bounds, the adjacency and the budget.
    """

    def __init__(
        self,
        *,
        bounds: Any = None,
        epsilon: float | None = None,
        delta: float = 1e-5,
        mu: float | None = None,
        adjacency: str = "replace",
        random_state: Any = None,
    ) -> None:
        self.bounds = bounds
        self.epsilon = epsilon
        self.delta = delta
        self.mu = mu
        self.adjacency = adjacency
        self.random_state = random_state

    def _budget(self) -> tuple[float, float]:
        delta = check_in_range("delta", self.delta, 0.0, 1.0, low_open=True, high_open=True)
        if (self.epsilon is None) == (self.mu is None):
            raise ParameterError("epsilon", self.epsilon, "give exactly one of epsilon and mu (the budget to spend)")
        if self.mu is not None:
            return check_positive("mu", self.mu), delta
        mu = gdp_mu(check_positive("epsilon", self.epsilon), delta)
        if not mu > 0:
            raise ParameterError("epsilon", self.epsilon, f"is too small to spend anything at delta={delta:g}")
        return mu, delta

    def fit(self, X: Any, y: Any = None) -> DPStandardScaler:
        """Release the private means and variances of ``X`` (``y`` is ignored)."""
        if self.bounds is None:
            raise ParameterError("bounds", None, "must be declared (public (lo, hi) per feature or for all); "
                                 "bounds computed from the data would leak")
        if self.adjacency not in ADJACENCIES:
            raise ParameterError("adjacency", self.adjacency, "must be one of " + ", ".join(ADJACENCIES))
        mu, delta = self._budget()
        X = validate_data(self, X, dtype=np.float64, ensure_all_finite=True)
        lo, hi = parse_range(self.bounds, X.shape[1], "bounds")
        mom = private_moments(X, lo, hi, mu, adjacency=self.adjacency, rng=_generator(self.random_state))
        self.mean_ = mom.mean
        self.scale_ = mom.std
        self.var_ = mom.std**2
        self.lo_, self.hi_ = lo, hi
        self.mu_ = mom.mu
        self.delta_ = delta
        self.epsilon_ = gdp_epsilon(delta, mom.mu)
        self.privacy_report_ = {
            "mechanism": "Gaussian mechanism on per-feature sums of clipped values and of their squares",
            "mu": self.mu_, "epsilon": self.epsilon_, "delta": delta, "adjacency": self.adjacency,
            "sigma_sum": mom.sigma_sum, "sigma_square": mom.sigma_square, "sigma_count": mom.sigma_count,
            "bounds": [[float(a), float(b)] for a, b in zip(lo, hi)],
            "composition": "GDP: a downstream mu_model-GDP estimator gives sqrt(mu_model^2 + mu^2)-GDP",
            "secret_noise": self.random_state is None,
        }
        return self

    def transform(self, X: Any) -> np.ndarray:
        """``(clip(X, lo, hi) - mean_) / scale_`` (a fixed per-row map: no further privacy cost)."""
        check_is_fitted(self, "mean_")
        X = validate_data(self, X, dtype=np.float64, reset=False, ensure_all_finite=True)
        return (np.clip(X, self.lo_, self.hi_) - self.mean_) / self.scale_

    def inverse_transform(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "mean_")
        X = validate_data(self, X, dtype=np.float64, reset=False, ensure_all_finite=True)
        return X * self.scale_ + self.mean_

    def composed_mu(self, model_mu: float) -> float:
        """GDP of a pipeline whose estimator is ``model_mu``-GDP on the scaled data (exact composition)."""
        check_is_fitted(self, "mu_")
        m = float(model_mu)
        if not (m >= 0 and math.isfinite(m)):
            raise ParameterError("model_mu", model_mu, "must be >= 0 and finite")
        return math.hypot(m, self.mu_)
