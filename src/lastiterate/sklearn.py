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
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    OneToOneFeatureMixin,
    RegressorMixin,
    TransformerMixin,
)
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from lastiterate.accountant import account
from lastiterate.configuration import (
    ESTIMATOR_ADJACENCIES,
    Configuration,
    cached_configuration,
    check_data_norm,
    check_strategy,
    check_target_bound,
    choose_configuration,
)
from lastiterate.errors import ParameterError, check_in_range, check_positive, check_scale
from lastiterate.notions.gdp import gdp_epsilon, gdp_mu
from lastiterate.train.preprocessing import parse_range, private_moments

__all__ = ["DPStandardScaler"]


def _generator(random_state: Any) -> np.random.Generator:
    """None: fresh entropy from the operating system (the default: the noise must stay secret);
    an int or a ``numpy.random.Generator``: reproducible (the guarantee then holds only while the
    seed stays secret and is never reused on other data)."""
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if (
        isinstance(random_state, Integral)
        and not isinstance(random_state, bool)
        and int(random_state) >= 0
    ):
        return np.random.default_rng(int(random_state))
    raise ParameterError(
        "random_state",
        random_state,
        "must be None (fresh OS entropy), an integer >= 0 or a numpy Generator",
    )


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
            raise ParameterError(
                "epsilon", self.epsilon, "give exactly one of epsilon and mu (the budget to spend)"
            )
        if self.mu is not None:
            return check_scale("mu", self.mu), delta  # mu^2 in float range
        mu = gdp_mu(check_positive("epsilon", self.epsilon), delta)
        if not mu > 0:
            raise ParameterError(
                "epsilon", self.epsilon, f"is too small to spend anything at delta={delta:g}"
            )
        return mu, delta

    def fit(self, X: Any, y: Any = None) -> DPStandardScaler:
        """Release the private means and variances of ``X`` (``y`` is ignored).

        Args:
            X: the training rows, shape (n, d); every value is clipped to its declared bounds.
            y: ignored (scikit-learn's API).

        Returns:
            This scaler, fitted: ``mean_``, ``scale_``, ``var_``, ``mu_``, ``epsilon_``,
            ``delta_`` and ``privacy_report_`` are set.

        Raises:
            ParameterError: no declared ``bounds``, an invalid budget or adjacency, or ``X`` not
                a finite numeric 2-D array.
        """
        if self.bounds is None:
            raise ParameterError(
                "bounds",
                None,
                "must be declared (public (lo, hi) per feature or for all); "
                "bounds computed from the data would leak",
            )
        if self.adjacency not in ESTIMATOR_ADJACENCIES:
            raise ParameterError(
                "adjacency", self.adjacency, "must be one of " + ", ".join(ESTIMATOR_ADJACENCIES)
            )
        mu, delta = self._budget()
        X = validate_data(self, X, dtype=np.float64, ensure_all_finite=True)
        lo, hi = parse_range(self.bounds, X.shape[1], "bounds")
        with np.errstate(over="ignore"):
            too_wide = not np.isfinite(((hi - lo) / 2.0) ** 2).all()
        if too_wide:  # var_ = scale_^2 would be inf
            raise ParameterError("bounds", self.bounds, "are too wide: (hi - lo)^2 / 4 overflows")
        mom = private_moments(
            X, lo, hi, mu, adjacency=self.adjacency, rng=_generator(self.random_state)
        )
        self.mean_ = mom.mean
        self.scale_ = mom.std
        self.var_ = mom.std**2
        self.lo_, self.hi_ = lo, hi
        self.mu_ = mom.mu
        self.delta_ = delta
        self.epsilon_ = gdp_epsilon(delta, mom.mu)
        self.privacy_report_ = {
            "mechanism": (
                "Gaussian mechanism on per-feature sums of clipped values and of their squares"
            ),
            "mu": self.mu_,
            "epsilon": self.epsilon_,
            "delta": delta,
            "adjacency": self.adjacency,
            "sigma_sum": mom.sigma_sum,
            "sigma_square": mom.sigma_square,
            "sigma_count": mom.sigma_count,
            "bounds": [[float(a), float(b)] for a, b in zip(lo, hi)],
            "composition": (
                "GDP: a downstream mu_model-GDP estimator gives sqrt(mu_model^2 + mu^2)-GDP"
            ),
            "secret_noise": self.random_state is None,
        }
        return self

    def transform(self, X: Any) -> np.ndarray:
        """``(clip(X, lo, hi) - mean_) / scale_`` (a fixed per-row map: no further privacy cost).

        Args:
            X: rows to scale, shape (n, d).

        Returns:
            The scaled rows, shape (n, d).

        Raises:
            NotFittedError: the estimator is not fitted (scikit-learn's error).
            ParameterError: ``X`` is not a finite numeric 2-D array with ``n_features_in_``
                columns.
        """
        check_is_fitted(self, "mean_")
        X = validate_data(self, X, dtype=np.float64, reset=False, ensure_all_finite=True)
        return (np.clip(X, self.lo_, self.hi_) - self.mean_) / self.scale_

    def inverse_transform(self, X: Any) -> np.ndarray:
        """``X * scale_ + mean_``: scaled rows back in the original units (the clip is not undone).

        Args:
            X: scaled rows, shape (n, d).

        Returns:
            The rows in the original units, shape (n, d).

        Raises:
            NotFittedError: the estimator is not fitted (scikit-learn's error).
            ParameterError: ``X`` is not a finite numeric 2-D array with ``n_features_in_``
                columns.
        """
        check_is_fitted(self, "mean_")
        X = validate_data(self, X, dtype=np.float64, reset=False, ensure_all_finite=True)
        return X * self.scale_ + self.mean_

    def composed_mu(self, model_mu: float) -> float:
        """GDP of a pipeline whose estimator is ``model_mu``-GDP on the scaled data.

        The composition of two Gaussian mechanisms is exact: ``sqrt(model_mu^2 + mu_^2)``
        (Dong, Roth & Su 2022, Cor. 3.3).

        Args:
            model_mu: the GDP parameter of the downstream estimator, >= 0.

        Returns:
            The GDP parameter of the scaler and the estimator together.

        Raises:
            NotFittedError: the scaler is not fitted (scikit-learn's error).
            ParameterError: ``model_mu`` is negative or not finite.
        """
        check_is_fitted(self, "mu_")
        m = float(model_mu)
        if not (m >= 0 and math.isfinite(m)):
            raise ParameterError("model_mu", model_mu, "must be >= 0 and finite")
        return math.hypot(m, self.mu_)


# ====================================================================================== estimators
#
# DPLogisticRegression and DPRidge: generalised linear models trained with the library's own
# noisy gradient methods (lastiterate.train) and accounted by lastiterate.account.  The training
# configuration is CHOSEN from public quantities only -- see choose_configuration.

PUBLIC_QUANTITIES = (
    "n (the number of training rows), d (the number of features) and the label set (the classes "
    "present in y) are treated as PUBLIC: the configuration is chosen from them, data_norm, "
    "epsilon and delta only, and they are not protected by the guarantee"
)

STRATEGY_NOTES = {
    "early-stopping": (
        "strategy early-stopping: clipped full-batch noisy GD without L2, stopped at a horizon "
        "chosen from public quantities; the tightest valid bound for such short runs is usually "
        "composition (the last-iterate theorems gain little before their bounds plateau)"
    ),
    "last-iterate": (
        "strategy last-iterate: L2-regularised noisy GD run until convergence, accounted by the "
        "last-iterate theorems (only the final model is released)"
    ),
}

TUNING_WARNING = (
    "choosing epsilon, data_norm or any other hyperparameter by comparing fits on the private data "
    "spends privacy too: every fit whose result influences what is released must be paid for"
)


@dataclass(frozen=True)
class PrivacyReport:
    """What a fitted private estimator guarantees: the accountant's report of the executed run.

    ``best`` (bound, epsilon, delta, mu, theorem) is the tightest valid bound for releasing the
    fitted coefficients; ``report`` is the full :class:`lastiterate.accountant.Report` (every bound
    and why the others do not apply), ``run`` the :class:`lastiterate.run.Run` the trainer executed,
    ``configuration`` the chosen settings and ``notes`` what is and is not covered.

    Attributes:
        report: the accountant's :class:`lastiterate.accountant.Report` of the executed run.
        run: the executed :class:`lastiterate.run.Run`.
        configuration: the chosen :class:`Configuration`.
        notes: what is and is not covered by the guarantee.
    """

    report: Any
    run: Any
    configuration: Configuration
    notes: tuple[str, ...]

    @property
    def best(self) -> Any:
        """The tightest valid bound (a :class:`lastiterate.bounds.Result`)."""
        return self.report.best

    @property
    def epsilon(self) -> float:
        """Epsilon of the tightest bound."""
        return float(self.report.best.epsilon)

    @property
    def delta(self) -> float:
        """Delta of the tightest bound."""
        return float(self.report.best.delta)

    @property
    def mu(self) -> float | None:
        """The GDP parameter of the tightest bound (None for a non-GDP bound)."""
        return self.report.best.mu

    @property
    def bound(self) -> str:
        """The bound id of the tightest bound."""
        return str(self.report.best.bound)

    def format(self) -> str:
        """The human-readable report followed by the notes.

        Returns:
            The accountant's report text and one ``Note:`` line per note.
        """
        return self.report.format() + "\n" + "\n".join(f"Note: {n}" for n in self.notes)

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object.

        Returns:
            The accountant report's JSON with ``configuration`` and ``notes`` added.
        """
        return {
            **self.report.to_json(),
            "configuration": self.configuration.to_json(),
            "notes": list(self.notes),
        }

    def __reduce__(self) -> tuple[Any, ...]:
        # the accountant's results hold closures (tradeoff curves) that cannot be pickled: a pickled
        # estimator stores the executed Run and re-accounts it (deterministically) when loaded
        return (
            _privacy_report_from_run,
            (self.run, float(self.report.query.delta), self.configuration, self.notes),
        )


def _privacy_report_from_run(
    run: Any, delta: float, configuration: Configuration, notes: tuple[str, ...]
) -> PrivacyReport:
    """Rebuild a :class:`PrivacyReport` by accounting ``run`` again (used when unpickling)."""
    return PrivacyReport(
        report=account(run, delta=delta), run=run, configuration=configuration, notes=notes
    )


def _seed(random_state: Any) -> int | None:
    """None: fresh secret OS entropy (the trainer's default).  An int, a ``RandomState`` or a
    ``Generator``: a reproducible seed (the trainer warns: the guarantee then needs it secret)."""
    if random_state is None:
        return None
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        if int(random_state) < 0:
            raise ParameterError(
                "random_state",
                random_state,
                "must be None (fresh OS entropy), an integer >= 0 or a numpy generator",
            )
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**31 - 1))
    raise ParameterError(
        "random_state",
        random_state,
        "must be None (fresh OS entropy), an integer >= 0 or a numpy generator",
    )


class _DPGeneralisedLinearModel(BaseEstimator):
    """Shared fitting of :class:`DPLogisticRegression` and :class:`DPRidge` (see their docs)."""

    _family_of_targets: str = ""

    def _check_params(self) -> None:
        check_positive("epsilon", self.epsilon)
        check_in_range("delta", self.delta, 0.0, 1.0, low_open=True, high_open=True)
        check_data_norm(self.data_norm)
        if self.adjacency not in ESTIMATOR_ADJACENCIES:
            raise ParameterError(
                "adjacency", self.adjacency, "must be one of " + ", ".join(ESTIMATOR_ADJACENCIES)
            )
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ParameterError("fit_intercept", self.fit_intercept, "must be True or False")
        if (
            isinstance(self.max_steps, bool)
            or not isinstance(self.max_steps, Integral)
            or not 1 <= int(self.max_steps) <= 10**6
        ):
            raise ParameterError("max_steps", self.max_steps, "must be an integer in [1, 1e6]")
        if not isinstance(self.random_state, (np.random.RandomState, np.random.Generator)):
            _seed(self.random_state)  # validates None / int >= 0
        check_strategy(self.strategy, self.adjacency)

    def _validated(self, X: Any, y: Any = None, reset: bool = True, fitting: bool = False) -> Any:
        try:
            if not fitting:
                return validate_data(self, X, dtype=np.float64, reset=reset, ensure_all_finite=True)
            return validate_data(
                self,
                X,
                y,
                dtype=np.float64,
                y_numeric=self._family_of_targets == "least-squares",
                ensure_all_finite=True,
            )
        except ParameterError:
            raise
        except ValueError as exc:
            raise ParameterError("X", "<array>", str(exc)) from None

    def _clipped_rows(self, X: np.ndarray) -> np.ndarray:
        """Every row scaled to norm <= data_norm (the per-row map the guarantee covers)."""
        norms = np.linalg.norm(X, axis=1, keepdims=True)
        return X * np.minimum(1.0, self.data_norm_ / np.maximum(norms, 1e-300))

    def _train(
        self, X: np.ndarray, y: np.ndarray, family: str, n_outputs: int, target_bound: float | None
    ) -> None:
        # lazy: torch (the train extra) costs seconds to import; only fitting needs it
        import torch

        from lastiterate.train import GLM, NoisyCGD, NoisyGD, NoisySGD

        n, d = X.shape
        config = cached_configuration(
            family,
            int(n),
            int(d),
            int(n_outputs),
            float(self.epsilon),
            float(self.delta),
            float(self.data_norm),
            bool(self.fit_intercept),
            str(self.adjacency),
            target_bound,
            int(self.max_steps),
            str(self.strategy),
        )
        a = config.intercept_feature
        if a > 0:  # the intercept is the weight of a constant feature of value a
            X = np.hstack([X, np.full((n, 1), a)])
        model = GLM(X.shape[1], n_outputs, family=family, intercept=False, dtype=torch.float64)
        common = {
            "lr": config.lr,
            "clip": config.clip,
            "noise_std": config.noise_std,
            "l2": config.l2,
            "feature_norm": config.effective_feature_norm,
            "seed": _seed(self.random_state),
            "adjacency": config.adjacency,
        }
        if config.algorithm == "gd":
            method: Any = NoisyGD(model, **common)
        elif config.algorithm == "cgd":
            method = NoisyCGD(model, batch_size=config.batch_size, **common)
        else:
            method = NoisySGD(
                model, batch_size=config.batch_size, sampling=config.sampling, **common
            )
        result = method.fit(X, y, steps=config.steps, delta=float(self.delta))
        best = result.report.best
        if best is None or not best.epsilon <= float(self.epsilon) * (1 + 1e-9):
            raise RuntimeError(  # never release a model whose accounted epsilon exceeds the target
                f"internal error: the executed run is accounted at epsilon="
                f"{None if best is None else best.epsilon} > target {self.epsilon}"
            )
        W = model.weight.detach().numpy().copy()
        if a > 0:
            W, b = W[:, :-1].copy(), a * W[:, -1]
        else:
            b = np.zeros(W.shape[0])
        self._W, self._b = W, b
        notes = [
            (
                f"rows of X are clipped to norm <= data_norm = {config.feature_norm:g} before "
                "training and prediction (a per-row map, covered by the guarantee)"
            ),
            PUBLIC_QUANTITIES,
            STRATEGY_NOTES[config.strategy],
            (
                "only the fitted coefficients are covered: training loss, intermediate iterates "
                "and the number of clipped rows are not released"
            ),
            (
                "secret randomness (fresh OS entropy)"
                if self.random_state is None
                else "random_state was given: the guarantee holds only while the seed stays "
                "secret and is never reused"
            ),
            TUNING_WARNING,
        ]
        if target_bound is not None:
            notes.insert(
                1, f"targets are clipped to [-{target_bound:g}, {target_bound:g}] (a per-row map)"
            )
        self.privacy_report_ = PrivacyReport(
            report=result.report, run=result.run, configuration=config, notes=tuple(notes)
        )
        self.n_iter_ = int(result.steps)

    def _linear(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "coef_")
        X = self._validated(X, reset=False)
        return self._clipped_rows(X) @ self._W.T + self._b


_RULE_DOC = """
    How ``fit`` chooses (see :func:`lastiterate.configuration.choose_configuration` and
    docs/sklearn.md): only n, d, the label set, ``data_norm``, ``epsilon``, ``delta`` and
    ``adjacency`` are used -- n, d and the label set are treated as PUBLIC and are not protected.
    Rows are clipped to ``||x|| <= data_norm`` (also in ``predict``); the intercept is the weight
    of a constant feature of value 0.3.  Two strategies are calibrated and compared by a public
    noise-to-horizon proxy: **early stopping** (clipped full-batch noisy GD without L2, stopped
    at a planned horizon, usually accounted by composition; on n >= 4000 rows, a horizon beyond
    ``max_steps`` full batches runs on Poisson batches, DP-SGD as Opacus trains it) and, under
    replace-one adjacency,
    **last iterate** (L2-regularised noisy GD run to convergence, accounted by the last-iterate
    theorems), trained only when its proxy is lower at every data curvature (ties go to early
    stopping, which is better in every direction at equal proxy).  ``strategy`` forces one.
    The noise is calibrated by :func:`lastiterate.calibrate_noise` over every bound of the
    accountant, composition included, and the executed run is accounted again:
    ``privacy_report_.best`` is the accountant's guarantee for releasing the fitted coefficients.

    Tuning spends privacy too: choosing ``epsilon``, ``data_norm`` or any setting by comparing
    fits (cross-validation, grid search) on the private data is itself a use of the data that
    this guarantee does NOT cover; pay for every fit whose outcome influences the release.
"""


class DPLogisticRegression(ClassifierMixin, _DPGeneralisedLinearModel):
    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        data_norm: float = 1.0,
        adjacency: str = "replace",
        fit_intercept: bool = True,
        random_state: Any = None,
        max_steps: int = 3000,
        classes: Any = None,
        strategy: str = "auto",
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.adjacency = adjacency
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.max_steps = max_steps
        self.classes = classes
        self.strategy = strategy

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.non_deterministic = True  # fresh secret noise on every fit unless seeded
        return tags

    def _label_set(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The classes and the label indices: the DECLARED ``classes`` when given (then the label
        set is public by declaration), otherwise the labels present in y (treated as public)."""
        if self.classes is None:
            return np.unique(y, return_inverse=True)
        declared = np.unique(np.asarray(self.classes))
        if declared.ndim != 1 or len(declared) < 2:
            raise ParameterError("classes", self.classes, "must list at least 2 distinct labels")
        unknown = np.setdiff1d(np.unique(y), declared)
        if len(unknown):
            raise ParameterError(
                "y", f"<labels {unknown[:3].tolist()}>", "must be among the declared classes"
            )
        return declared, np.searchsorted(declared, y)

    def fit(self, X: Any, y: Any) -> DPLogisticRegression:
        """Choose the configuration from (n, d, classes, epsilon, delta, data_norm) and train.

        Args:
            X: the training rows, shape (n, d); each is clipped to norm ``data_norm``.
            y: the labels, shape (n,).

        Returns:
            This estimator, fitted: ``coef_``, ``intercept_``, ``classes_`` and
            ``privacy_report_`` are set.

        Raises:
            ParameterError: an invalid parameter, ``X`` or ``y`` (fewer than two classes,
                labels outside the declared ``classes``).
        """
        self._check_params()
        X, y = self._validated(X, y, fitting=True)
        check_classification_targets(y)
        self.classes_, y_idx = self._label_set(y)
        K = len(self.classes_)
        if K < 2:
            raise ParameterError("y", f"<{K} class>", "needs samples of at least 2 classes")
        self.data_norm_ = float(self.data_norm)
        family = "binary-logistic" if K == 2 else "multinomial-logistic"
        self._train(self._clipped_rows(X), y_idx.astype(np.int64), family, 1 if K == 2 else K, None)
        self.coef_ = self._W
        self.intercept_ = self._b
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        """Logits of the clipped rows.

        Args:
            X: rows, shape (n, d).

        Returns:
            Shape (n,) for two classes (positive: ``classes_[1]``), else (n, K).

        Raises:
            NotFittedError: the estimator is not fitted (scikit-learn's error).
            ParameterError: ``X`` is not a finite numeric 2-D array with ``n_features_in_``
                columns.
        """
        z = self._linear(X)
        return z[:, 0] if z.shape[1] == 1 else z

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities of the clipped rows (logistic or softmax of the logits).

        Args:
            X: rows, shape (n, d).

        Returns:
            Probabilities, shape (n, K), columns in the order of ``classes_``.

        Raises:
            NotFittedError: the estimator is not fitted (scikit-learn's error).
            ParameterError: ``X`` is not a finite numeric 2-D array with ``n_features_in_``
                columns.
        """
        z = self.decision_function(X)
        if z.ndim == 1:
            p1 = 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic function, overflow-free
            return np.column_stack([1.0 - p1, p1])
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithms of :meth:`predict_proba`.

        Args:
            X: rows, shape (n, d).

        Returns:
            Log-probabilities, shape (n, K) (``-inf`` where a probability underflows to 0).

        Raises:
            NotFittedError: the estimator is not fitted (scikit-learn's error).
            ParameterError: ``X`` is not a finite numeric 2-D array with ``n_features_in_``
                columns.
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class of each row.

        Args:
            X: rows, shape (n, d).

        Returns:
            Labels from ``classes_``, shape (n,).

        Raises:
            NotFittedError: the estimator is not fitted (scikit-learn's error).
            ParameterError: ``X`` is not a finite numeric 2-D array with ``n_features_in_``
                columns.
        """
        z = self.decision_function(X)
        idx = (z > 0).astype(np.int64) if z.ndim == 1 else z.argmax(axis=1)
        return self.classes_[idx]


DPLogisticRegression.__doc__ = (
    """Differentially private logistic regression (binary and multinomial, with intercept).

    Only the fitted model (``coef_``, ``intercept_``) is covered by the guarantee, which is
    ``(epsilon, delta)``-DP under ``adjacency`` (``"replace"``: datasets of the same size differing
    in one row; ``"add-remove"``: one row more or less, trained with Poisson sampling at rate 1,
    the clipped sum divided by the fixed b = n).
"""
    + _RULE_DOC
    + """
    Parameters
    ----------
    epsilon, delta : the target guarantee (default 1.0, 1e-5).
    data_norm : float in [1e-6, 1e6], default 1.0. Rows are clipped to this L2 norm (scale
        features first, e.g. with :class:`DPStandardScaler`; a plain StandardScaler leaks).
    adjacency : {"replace", "add-remove"}, default "replace".
    fit_intercept : bool, default True.
    random_state : None (default: fresh secret OS entropy) or an int / numpy generator
        (reproducible;
        a seeded fit warns: the guarantee then holds only while the seed stays secret).
    max_steps : int, default 3000. The work budget, in full-batch steps: a full-batch run
        takes at most max_steps noisy steps; early stopping on Poisson batches of size b
        (chosen when the planned horizon needs more) at most max_steps * n / b.
    strategy : {"auto", "early-stopping", "last-iterate"}, default "auto". "auto" compares both
        (docs/sklearn.md); "last-iterate" needs adjacency="replace".
    classes : None or array-like, default None. The public label set; None takes the labels
        present in y (then the label set is treated as public and not protected).

    Attributes
    ----------
    classes_, coef_ (n_classes or 1, n_features), intercept_, n_features_in_, n_iter_,
    privacy_report_ : :class:`PrivacyReport` (``.best``: bound, epsilon, delta, mu; ``.run``;
    ``.configuration``; ``.report``: every bound).

    Example
    -------
    >>> from lastiterate.sklearn import DPLogisticRegression
    >>> clf = DPLogisticRegression(epsilon=1.0, delta=1e-5, data_norm=1.0)  # doctest: +SKIP
    >>> clf.fit(X, y).score(X_test, y_test)                                 # doctest: +SKIP
    >>> clf.privacy_report_.best                                            # doctest: +SKIP
    """
)


class DPRidge(RegressorMixin, _DPGeneralisedLinearModel):
    _family_of_targets = "least-squares"

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        data_norm: float = 1.0,
        target_bound: float = 1.0,
        adjacency: str = "replace",
        fit_intercept: bool = True,
        random_state: Any = None,
        max_steps: int = 3000,
        strategy: str = "auto",
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.target_bound = target_bound
        self.adjacency = adjacency
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.max_steps = max_steps
        self.strategy = strategy

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.non_deterministic = True
        return tags

    def fit(self, X: Any, y: Any) -> DPRidge:
        """Choose the configuration from (n, d, epsilon, delta, data_norm, target_bound), train.

        Args:
            X: the training rows, shape (n, d); each is clipped to norm ``data_norm``.
            y: the targets, shape (n,); each is clipped to ``[-target_bound, target_bound]``.

        Returns:
            This estimator, fitted: ``coef_``, ``intercept_`` and ``privacy_report_`` are set.

        Raises:
            ParameterError: an invalid parameter, ``X`` or ``y``.
        """
        self._check_params()
        B = check_target_bound(self.target_bound)
        X, y = self._validated(X, y, fitting=True)
        if y.ndim != 1:
            raise ParameterError(
                "y", f"<array of shape {y.shape}>", "must be one-dimensional (one target per row)"
            )
        if y.dtype.kind not in "biuf":  # text targets: float() of each would be a parse, not data
            raise ParameterError("y", f"<array of dtype {y.dtype}>", "targets must be real numbers")
        self.data_norm_ = float(self.data_norm)
        self._train(
            self._clipped_rows(X), np.clip(y.astype(np.float64), -B, B), "least-squares", 1, B
        )
        self.coef_ = self._W[0]
        self.intercept_ = float(self._b[0])
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Predicted targets of the clipped rows.

        Args:
            X: rows, shape (n, d).

        Returns:
            Predictions, shape (n,).

        Raises:
            NotFittedError: the estimator is not fitted (scikit-learn's error).
            ParameterError: ``X`` is not a finite numeric 2-D array with ``n_features_in_``
                columns.
        """
        return self._linear(X)[:, 0]


DPRidge.__doc__ = (
    """Differentially private ridge regression (least squares with an L2 penalty).

    Rows are clipped to ``data_norm`` and targets to ``[-target_bound, target_bound]`` (both per-row
    maps inside the guarantee; scale the targets to a public range first).  The per-example
    gradient ``(u - y) x`` is clipped to ``C = target_bound * R_eff``, a Huber-type loss for which
    the geometry certificate holds for any C.
"""
    + _RULE_DOC
    + """
    Parameters
    ----------
    epsilon, delta, data_norm, adjacency, fit_intercept, random_state, max_steps, strategy :
        as for :class:`DPLogisticRegression`.
    target_bound : float in [1e-6, 1e6], default 1.0. Public bound on |y|; targets are clipped
        to it.

    Attributes
    ----------
    coef_ (n_features,), intercept_ (float), n_features_in_, n_iter_, privacy_report_.
    """
)


__all__ += [
    "Configuration",
    "DPLogisticRegression",
    "DPRidge",
    "PrivacyReport",
    "choose_configuration",
]
