r"""Preprocessing is part of the mechanism: feature scaling whose privacy cost is accounted.

A model trained on features standardised with the training set's mean and standard deviation
depends on the data through those statistics as well as through the noisy gradients; a guarantee
for "the noisy training on the preprocessed data" does not cover it.  This module offers scalings
whose cost is known, and composes that cost with the training guarantee.

Scalings (``SCALINGS``)
-----------------------
* ``"public-range"`` -- every feature is mapped by the DECLARED public range ``[lo_j, hi_j]``:
  ``x -> (clip(x, lo, hi) - lo) / (hi - lo)`` in ``[0, 1]``.  Data-independent: costs nothing.
  The bundled digits (pixels 0-16) and MNIST (0-255) declare theirs
  (:data:`lastiterate.train.data.PUBLIC_FEATURE_RANGES`); other data need ``feature_range``.
* ``"clip-only"`` -- no scaling; only the per-row clip ``||x|| <= R`` (data-independent, free).
* ``"private"`` -- means and variances released with the Gaussian mechanism on values clipped to a
  declared range (:class:`GaussianMomentsMechanism`), then ``x -> (x - mean) / std``.  Costs
  ``mu_stats``-GDP, composed with the training guarantee (:func:`compose_with_preprocessing`).
* ``"data-public"`` -- the old behaviour: the training set's exact mean and std, TREATED AS PUBLIC.
  The guarantee then does NOT cover the preprocessing, and every report says so.
* ``"auto"`` (default) -- ``public-range`` when a range is declared (flag or dataset), otherwise
  ``clip-only``.  It never uses data-dependent statistics without paying for them.

Regression targets are scaled by a declared ``target_range`` (to ``[-1, 1]``), privately (as one
more column of the private moments) or, with ``data-public``, by the training set's statistics.

Composition (adaptive: the training runs on data scaled by the released statistics, a per-row map
fixed once they are released, so neighbouring datasets stay neighbouring and the clipped rows keep
``||x|| <= R``; Dong, Roth & Su 2022, Thm 4 / Cor 3.3 for GDP):

* a training result that is ``mu_train``-GDP gives ``mu = sqrt(mu_train^2 + mu_stats^2)``, exact;
* a training RDP curve gives ``eps_R(a) + a mu_stats^2 / 2`` at its orders (Mironov 2017, Prop. 1);
* any ``(eps_1, delta_1)``-DP training guarantee is dominated by the pair of Kairouz, Oh and
  Viswanath (2015) with losses ``{+inf, eps_1, -eps_1, -inf}``; composing it with ``G_mu`` has the
  closed-form profile of :func:`approximate_dp_gaussian_delta`, evaluated at a few
  ``delta_1 < delta``.

Every candidate is a valid upper bound, so the smallest is reported.  Adjacency: replace-one (the
number of rows n is public, as for the training accountant); add-remove is supported by the
statistics mechanism, which then also releases a noisy count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from lastiterate.accountant import account, calibrate_noise
from lastiterate.errors import (
    ParameterError,
    check_in_range,
    check_nonnegative,
    check_positive,
    check_scale,
)
from lastiterate.notions.adjacency import ADJACENCIES
from lastiterate.notions.gdp import gdp_delta, gdp_epsilon, gdp_mu, smallest_epsilon
from lastiterate.notions.rdp import RdpCurve, rdp_to_epsilon
from lastiterate.train.budget import allowed_steps, truncate
from lastiterate.train.data import public_feature_range

SCALINGS: tuple[str, ...] = ("auto", "public-range", "private", "clip-only", "data-public")

#: smallest released variance in the [-1, 1] units of the private moments (post-processing floor)
VARIANCE_FLOOR = 1e-4

NOT_COVERED = (
    "NOT covered: features (and regression targets) were standardised with the training set's "
    "exact mean and standard deviation, treated as public; the guarantee covers only the noisy "
    "training on the standardised data"
)


# ---------------------------------------------------------------------- declared ranges
def parse_range(value: Any, d: int, name: str = "feature_range") -> tuple[np.ndarray, np.ndarray]:
    """Per-feature bounds ``(lo, hi)`` (arrays of length ``d``) from a declared range.

    ``value``: a pair ``(lo, hi)`` for every feature, a sequence of ``d`` pairs, or the text
    ``"LO,HI"`` / ``"LO1,HI1;LO2,HI2;..."`` (the CLI's ``--feature-range``).  Every bound must be
    finite with ``lo < hi``; anything else raises :class:`ParameterError` naming ``name``.
    """
    pairs: Any = value
    if isinstance(value, str):
        try:
            pairs = [
                tuple(float(t) for t in part.split(","))
                for part in value.split(";")
                if part.strip()
            ]
        except ValueError:
            raise ParameterError(
                name, value, "must be LO,HI or LO1,HI1;LO2,HI2;... (one pair per feature)"
            ) from None
        if len(pairs) == 1:
            pairs = pairs[0]
    try:
        arr = np.asarray(pairs, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(
            name, value, "must be a pair (lo, hi) or one pair per feature"
        ) from None
    if arr.shape == (2,):
        arr = np.tile(arr, (d, 1))
    if arr.shape != (d, 2):
        raise ParameterError(
            name,
            value,
            "must be one pair (lo, hi)"
            if d == 1
            else f"must be one pair (lo, hi) for all features or {d} pairs (one per feature)",
        )
    lo, hi = arr[:, 0], arr[:, 1]
    with np.errstate(over="ignore"):
        width = hi - lo  # (-1e308, 1e308) is finite, its width is not: NaN after scaling
    if not (np.isfinite(arr).all() and (lo < hi).all() and np.isfinite(width).all()):
        raise ParameterError(
            name, value, "every bound must be finite with lo < hi and hi - lo finite"
        )
    return lo.copy(), hi.copy()


def public_range_scale(X: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``(clip(x, lo, hi) - lo) / (hi - lo)``: a data-independent map into ``[0, 1]^d``."""
    return (np.clip(X, lo, hi) - lo) / (hi - lo)


def _to_unit(X: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Clip to ``[lo, hi]`` and map affinely onto ``[-1, 1]`` (the units of the private moments)."""
    mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0
    return (np.clip(X, lo, hi) - mid) / half


def clip_rows(X: np.ndarray, R: float) -> np.ndarray:
    """Every row scaled to L2 norm at most ``R`` (a per-row map, so neighbours stay neighbours).

    The norm is computed on the row divided by its largest entry, so rows of finite values near
    the float64 limit are scaled correctly instead of overflowing to a zero row."""
    X = np.asarray(X, dtype=np.float64)
    peak = np.max(np.abs(X), axis=1, keepdims=True) if X.size else np.ones((X.shape[0], 1))
    peak = np.where(peak > 0, peak, 1.0)
    with np.errstate(divide="ignore"):
        factor = np.minimum(1.0, (R / peak) / np.linalg.norm(X / peak, axis=1, keepdims=True))
    return X * factor


# ---------------------------------------------------------------------- private moments
def replace_one_sensitivity2(rho: float) -> float:
    r"""``max_{a, b in [-1, 1]} (a - b)^2 + rho (a^2 - b^2)^2``: the squared replace-one change of
    one column of ``(sum u, sum u^2 / sqrt(rho))``, in units where the sums' noise std is 1.

    With ``s = a - b in [0, 2]`` and ``t = a + b``, ``|t| <= 2 - s``, the value is
    ``s^2 (1 + rho t^2) <= h(s) = s^2 (1 + rho (2 - s)^2)``, attained at ``a = 1, b = 1 - s``.
    ``h'(s) = 0`` at ``s = (3 - sqrt(1 - 2/rho)) / 2`` (a maximum inside [0, 2] when ``rho >= 2``);
    otherwise the maximum is the end point ``s = 2`` (value 4).  Exact, hence attained.
    """
    r = check_positive("rho", rho)
    h = lambda s: s * s * (1.0 + r * (2.0 - s) ** 2)
    cands = [2.0]
    if r >= 2.0:
        cands.append((3.0 - math.sqrt(1.0 - 2.0 / r)) / 2.0)
    return max(h(s) for s in cands)


@dataclass(frozen=True)
class GaussianMomentsMechanism:
    r"""Means and variances of ``d`` columns by the Gaussian mechanism on clipped values.

    Every value is clipped to its declared range and mapped onto ``u in [-1, 1]``.  Released:
    ``S1 = sum_i u_i + N(0, sigma_1^2 I_d)``, ``S2 = sum_i u_i^2 + N(0, sigma_2^2 I_d)`` with
    ``sigma_2 = noise_ratio * sigma_1`` and, under add-remove adjacency only, ``N = n + N(0,
    sigma_0^2)`` (under replace-one n is public).

    Sensitivity: the release divided by its noise stds is a Gaussian mechanism with unit noise, so
    it is ``s``-GDP with ``s`` the L2 sensitivity of ``(S1/sigma_1, S2/sigma_2[, N/sigma_0])``
    (Dong, Roth & Su 2022, Thm 2.7).  Columns add up, so with ``rho = 1/noise_ratio^2``:

    * replace-one: ``s^2 = d k(rho) / sigma_1^2`` with ``k`` = :func:`replace_one_sensitivity2`
      (exact: one row going from ``(1, ..., 1)`` to ``(1 - s*, ..., 1 - s*)``);
    * add-remove: ``s^2 = d (1 + rho) / sigma_1^2 + 1 / sigma_0^2`` (exact at ``|u_j| = 1``).

    Calibration to ``mu``: under add-remove ``count_share`` of ``mu^2`` pays for the count; the
    rest fixes ``sigma_1`` (and ``sigma_2 = noise_ratio sigma_1``).
    """

    d: int
    mu: float
    adjacency: str = "replace"
    noise_ratio: float = 0.5
    count_share: float = 0.1

    def __post_init__(self) -> None:
        if isinstance(self.d, bool) or not isinstance(self.d, (int, np.integer)) or self.d < 1:
            raise ParameterError("d", self.d, "must be an integer >= 1 (number of columns)")
        check_scale("statistics_mu", self.mu)  # mu^2 neither underflows nor overflows
        if self.adjacency not in ADJACENCIES:
            raise ParameterError(
                "adjacency", self.adjacency, "must be one of " + ", ".join(ADJACENCIES)
            )
        check_positive("noise_ratio", self.noise_ratio)
        check_in_range("count_share", self.count_share, 0.0, 1.0, low_open=True, high_open=True)

    @property
    def rho(self) -> float:
        return 1.0 / self.noise_ratio**2

    @property
    def column_sensitivity2(self) -> float:
        """Squared sensitivity of one column in units of ``1/sigma_1^2`` (see the
        class docstring)."""
        if self.adjacency == "replace":
            return replace_one_sensitivity2(self.rho)
        return 1.0 + self.rho

    @property
    def sigma_sum(self) -> float:
        moment_mu2 = self.mu**2 * (
            1.0 - self.count_share if self.adjacency == "add-remove" else 1.0
        )
        return math.sqrt(self.d * self.column_sensitivity2 / moment_mu2)

    @property
    def sigma_square(self) -> float:
        return self.noise_ratio * self.sigma_sum

    @property
    def sigma_count(self) -> float | None:
        if self.adjacency == "replace":
            return None
        return 1.0 / math.sqrt(self.count_share * self.mu**2)

    def scaled_change(self, a: np.ndarray, b: np.ndarray | None) -> float:
        """``||(release(D) - release(D')) / noise||`` for neighbours that differ in one row: ``a``
        replaced by ``b`` (replace-one) or ``a`` added (``b=None``, add-remove).  For tests."""
        a = np.asarray(a, dtype=np.float64)
        if b is None:
            v = np.concatenate(
                [
                    a / self.sigma_sum,
                    a * a / self.sigma_square,
                    [1.0 / self.sigma_count] if self.sigma_count else [],
                ]
            )
        else:
            b = np.asarray(b, dtype=np.float64)
            v = np.concatenate([(a - b) / self.sigma_sum, (a * a - b * b) / self.sigma_square])
        return float(np.linalg.norm(v))

    def claimed_mu(self) -> float:
        """The GDP parameter of the release from its exact sensitivity and noise
        stds (equals ``mu``)."""
        m2 = self.d * self.column_sensitivity2 / self.sigma_sum**2
        if self.sigma_count is not None:
            m2 += 1.0 / self.sigma_count**2
        return math.sqrt(m2)

    def release(self, U: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray | float]:
        """The noisy sums of ``U`` (rows already in ``[-1, 1]^d``): ``{"sum",
        "square", "count"}``."""
        U = np.asarray(U, dtype=np.float64)
        if U.ndim != 2 or U.shape[1] != self.d:
            raise ParameterError("X", tuple(U.shape), f"must be a 2-D array with {self.d} columns")
        if np.abs(U).max(initial=0.0) > 1.0:
            raise ParameterError("X", "rows", "must be clipped to [-1, 1] before the release")
        n = float(len(U))
        count = n if self.sigma_count is None else n + float(rng.normal(0.0, self.sigma_count))
        return {
            "sum": U.sum(0) + rng.normal(0.0, self.sigma_sum, self.d),
            "square": (U * U).sum(0) + rng.normal(0.0, self.sigma_square, self.d),
            "count": count,
        }


@dataclass(frozen=True)
class PrivateMoments:
    """Released per-column means and standard deviations (in the data's units) and their cost."""

    mean: np.ndarray
    std: np.ndarray
    mu: float
    adjacency: str
    sigma_sum: float
    sigma_square: float
    sigma_count: float | None
    lo: np.ndarray
    hi: np.ndarray

    def to_json(self) -> dict[str, Any]:
        return {
            "mu": self.mu,
            "adjacency": self.adjacency,
            "sigma_sum": self.sigma_sum,
            "sigma_square": self.sigma_square,
            "sigma_count": self.sigma_count,
            "units": "sums of values clipped to the declared range and mapped onto [-1, 1]",
        }


def private_moments(
    X: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    mu: float,
    *,
    adjacency: str = "replace",
    rng: np.random.Generator | None = None,
) -> PrivateMoments:
    """Means and standard deviations of the columns of ``X`` released ``mu``-GDP
    (:class:`GaussianMomentsMechanism` on values clipped to ``[lo, hi]``).

    ``rng``: the noise source; None draws fresh entropy from the operating system (the default:
    the noise must stay secret).  Post-processing (no extra cost): the released mean is clamped to
    ``[lo, hi]`` and the variance in ``[-1, 1]`` units to ``[floor, 1]``, ``floor =
    max(VARIANCE_FLOOR, 3 sigma_2 / count)`` (three noise stds of the released second moment: a
    near-constant column is not blown up by noise).
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or len(X) < 1:
        raise ParameterError("X", getattr(X, "shape", X), "must be a non-empty 2-D array")
    mech = GaussianMomentsMechanism(X.shape[1], mu, adjacency)
    gen = rng if rng is not None else np.random.default_rng()
    out = mech.release(_to_unit(X, lo, hi), gen)
    count = max(float(out["count"]), 1.0)
    mean_u = np.clip(np.asarray(out["sum"]) / count, -1.0, 1.0)
    floor = max(VARIANCE_FLOOR, 3.0 * mech.sigma_square / count)
    var_u = np.clip(np.asarray(out["square"]) / count - mean_u**2, floor, 1.0)
    mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0
    return PrivateMoments(
        mid + half * mean_u,
        half * np.sqrt(var_u),
        mech.claimed_mu(),
        adjacency,
        mech.sigma_sum,
        mech.sigma_square,
        mech.sigma_count,
        lo,
        hi,
    )


# ---------------------------------------------------------------------- the preprocessing step
@dataclass(frozen=True)
class Preprocessing:
    """What was done to the data before training, and what it costs.

    Attributes:
        scaling: the scaling applied (``public-range``, ``private``, ``clip-only`` or
            ``data-public``; ``auto`` resolved).
        description: what was done, in words.
        mu: the GDP cost of data-dependent statistics (0 for data-independent scalings); None
            when the statistics were treated as public (``data-public``), i.e. the guarantee does
            NOT cover it.
        adjacency: the neighbouring relation ``mu`` is stated for.
        details: the statistics' parameters (JSON values).
    """

    scaling: str
    description: str
    mu: float | None
    adjacency: str = "replace"
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def covered(self) -> bool:
        """Whether the guarantee covers the preprocessing (``mu`` is not None)."""
        return self.mu is not None

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON-safe dict.

        Returns:
            The fields and ``covered``.
        """
        return {
            "scaling": self.scaling,
            "description": self.description,
            "mu": self.mu,
            "covered": self.covered,
            "adjacency": self.adjacency,
            "details": self.details,
        }


def resolve_scaling(scaling: str, has_range: bool) -> str:
    """``auto`` -> ``public-range`` when a public range is declared, else ``clip-only``."""
    if scaling not in SCALINGS:
        raise ParameterError("scaling", scaling, "must be one of " + ", ".join(SCALINGS))
    if scaling == "auto":
        return "public-range" if has_range else "clip-only"
    return scaling


def preprocess(
    data: Any,
    *,
    scaling: str = "auto",
    feature_range: Any = None,
    target_range: Any = None,
    statistics_mu: float | None = None,
    feature_norm: float | None = None,
    adjacency: str = "replace",
    rng: np.random.Generator | None = None,
) -> tuple[Any, Preprocessing]:
    """Scale a raw :class:`~lastiterate.train.data.Dataset` (loaded with ``standardize=False``)
    and clip its rows; return the new dataset and the :class:`Preprocessing` record.

    The statistics come from the TRAINING rows only and are applied to the test rows.
    ``feature_range``: declared public range (see :func:`parse_range`); the dataset's own
    (:func:`~lastiterate.train.data.public_feature_range`: per feature, or by its name) is used
    when None.  ``statistics_mu``:
    the GDP budget of ``scaling="private"`` (required there).  ``rng``: noise of the private
    statistics (None: fresh OS entropy).

    Args:
        data: the raw dataset.
        scaling: ``auto`` (public-range with a declared range, else clip-only),
            ``public-range``, ``private``, ``clip-only`` or ``data-public``.
        feature_range: the declared public feature range.
        target_range: the declared public range of regression targets.
        statistics_mu: the GDP budget of the private statistics (``private`` only).
        feature_norm: clip every row to this L2 norm R.
        adjacency: the neighbouring relation the statistics' cost is stated for.
        rng: the noise of the private statistics.

    Returns:
        The preprocessed dataset and its :class:`Preprocessing` record.

    Raises:
        ParameterError: an unknown scaling, a range that does not parse or is missing for
            ``public-range``, a target range for classification, a missing or invalid
            ``statistics_mu``, or a non-positive ``feature_norm``.
    """
    d = data.n_features
    declared = public_feature_range(data)
    lo: Any  # per-feature bounds (ndarray) or None when no range is declared
    hi: Any
    if feature_range is not None:
        lo, hi = parse_range(feature_range, d)
        range_note = "declared by the user"
    elif declared is not None:
        lo = np.broadcast_to(np.asarray(declared[0], dtype=np.float64), (d,)).copy()
        hi = np.broadcast_to(np.asarray(declared[1], dtype=np.float64), (d,)).copy()
        range_note = declared[2]
    else:
        lo = hi = None
        range_note = ""
    mode = resolve_scaling(scaling, lo is not None)
    regression = data.task == "regression"
    t_lo: Any = None  # the declared target range (ndarray), if any
    t_hi: Any = None
    if target_range is not None:
        if not regression:
            raise ParameterError("target_range", target_range, "only applies to regression targets")
        t_lo, t_hi = parse_range(target_range, 1, "target_range")
    R = None if feature_norm is None else check_positive("feature_norm", feature_norm)
    Xtr, Xte = np.asarray(data.X_train, dtype=np.float64), np.asarray(data.X_test, dtype=np.float64)
    ytr, yte = np.asarray(data.y_train), np.asarray(data.y_test)
    notes: list[str] = []
    details: dict[str, Any] = {}
    mu: float | None = 0.0
    target_done = mode == "data-public"
    # the feature map as replayable steps (lastiterate.train.model_file.apply_feature_transform)
    steps: list[dict[str, Any]] = []
    target_step: dict[str, Any] | None = None

    if mode == "public-range":
        if lo is None:
            raise ParameterError(
                "feature_range",
                None,
                f"scaling=public-range needs a declared range; {data.name} has none",
            )
        Xtr, Xte = public_range_scale(Xtr, lo, hi), public_range_scale(Xte, lo, hi)
        steps.append(
            {
                "op": "public_range",
                "lo": lo.tolist(),
                "hi": hi.tolist(),
                "why": "declared public range",
            }
        )
        desc = (
            f"features mapped to [0, 1] by the public range ({range_note}); data-independent, "
            "no privacy cost"
        )
        details["feature_range"] = _range_json(lo, hi)
    elif mode == "clip-only":
        hint = (
            ""
            if lo is not None
            else (
                f"; {data.name} declares no public feature range: declare one to scale by it "
                "(--feature-range LO,HI) or to release private statistics (--scaling private)"
            )
        )
        desc = f"no feature scaling (row clipping only{hint}); data-independent, no privacy cost"
    elif mode == "private":
        if lo is None:
            raise ParameterError(
                "feature_range",
                None,
                "scaling=private clips values to a declared range before the Gaussian mechanism; "
                f"{data.name} has none: give one (e.g. --feature-range LO,HI)",
            )
        if statistics_mu is None:
            raise ParameterError(
                "statistics_mu", None, "scaling=private needs a GDP budget statistics_mu > 0"
            )
        cols_tr, cols_lo, cols_hi = Xtr, lo, hi
        with_target = regression and t_lo is not None
        if with_target:
            cols_tr = np.column_stack([Xtr, ytr.astype(np.float64)])
            cols_lo, cols_hi = np.append(lo, t_lo), np.append(hi, t_hi)
        mom = private_moments(
            cols_tr, cols_lo, cols_hi, statistics_mu, adjacency=adjacency, rng=rng
        )
        mu = mom.mu
        m, s = mom.mean[:d], mom.std[:d]
        Xtr, Xte = (np.clip(Xtr, lo, hi) - m) / s, (np.clip(Xte, lo, hi) - m) / s
        steps.append(
            {
                "op": "clip_values",
                "lo": lo.tolist(),
                "hi": hi.tolist(),
                "why": "declared public range",
            }
        )
        steps.append(
            {
                "op": "standardize",
                "mean": m.tolist(),
                "scale": s.tolist(),
                "statistics": (
                    f"private (Gaussian mechanism, {mom.mu:.6g}-GDP, included in the guarantee)"
                ),
            }
        )
        desc = (
            "features standardised with PRIVATE means and variances (Gaussian mechanism on values "
            f"clipped to the declared range, {range_note}): {mu:.4g}-GDP"
        )
        details["feature_range"] = _range_json(lo, hi)
        details["mechanism"] = mom.to_json()
        if with_target:
            ytr = (np.clip(ytr, t_lo, t_hi) - mom.mean[d]) / mom.std[d]
            yte = (np.clip(yte, t_lo, t_hi) - mom.mean[d]) / mom.std[d]
            target_step = {
                "op": "standardize",
                "mean": float(mom.mean[d]),
                "scale": float(mom.std[d]),
                "statistics": "private (released with the feature statistics)",
            }
            notes.append("targets standardised with the same private statistics")
            target_done = True
    else:  # data-public
        with np.errstate(over="ignore", invalid="ignore"):
            mean, sd = Xtr.mean(0), Xtr.std(0)
        if not (np.isfinite(mean).all() and np.isfinite(sd).all()):
            raise ParameterError(
                "dataset",
                data.name,
                "features overflow when standardised (values too large for "
                "float64): rescale the data or declare a range",
            )
        sd = np.where(sd > 0, sd, 1.0)
        Xtr, Xte = (Xtr - mean) / sd, (Xte - mean) / sd
        steps.append(
            {
                "op": "standardize",
                "mean": mean.tolist(),
                "scale": sd.tolist(),
                "statistics": NOT_COVERED,
            }
        )
        if regression:
            with np.errstate(over="ignore", invalid="ignore"):
                ym, ys = float(ytr.mean()), float(ytr.std()) or 1.0
            if not (math.isfinite(ym) and math.isfinite(ys)):
                raise ParameterError(
                    "dataset",
                    data.name,
                    "targets overflow when standardised (values too large "
                    "for float64): rescale them or declare --target-range",
                )
            ytr, yte = (ytr - ym) / ys, (yte - ym) / ys
            target_step = {"op": "standardize", "mean": ym, "scale": ys, "statistics": NOT_COVERED}
        desc = "features standardised with the training set's exact mean and std; " + NOT_COVERED
        mu = None
    if regression and not target_done:
        if t_lo is not None:
            t_mid, t_half = (t_lo + t_hi) / 2.0, (t_hi - t_lo) / 2.0
            ytr, yte = (
                (np.clip(ytr, t_lo, t_hi) - t_mid) / t_half,
                (np.clip(yte, t_lo, t_hi) - t_mid) / t_half,
            )
            target_step = {
                "op": "affine",
                "shift": float(t_mid[0]),
                "scale": float(t_half[0]),
                "why": "declared public target range to [-1, 1]",
            }
            notes.append(
                "targets mapped to [-1, 1] by the declared range "
                f"[{float(t_lo[0]):g}, {float(t_hi[0]):g}]"
            )
            details["target_range"] = [float(t_lo[0]), float(t_hi[0])]
        else:
            notes.append(
                "targets not scaled (declare target_range / --target-range LO,HI to scale them)"
            )
    if R is not None:
        Xtr, Xte = clip_rows(Xtr, R), clip_rows(Xte, R)
        notes.append(f"rows clipped to norm {R:g}")
        steps.append(
            {"op": "clip_rows", "norm": R, "why": "declared row-norm bound (data-independent)"}
        )
    record = Preprocessing(mode, desc, mu, adjacency, details)
    new = replace(
        data,
        X_train=Xtr,
        X_test=Xte,
        y_train=ytr,
        y_test=yte,
        feature_norm=R,
        notes=[*data.notes, desc, *notes],
        transform=[*data.transform, *steps],
        target_transform=target_step if target_step is not None else data.target_transform,
    )
    return new, record


def _range_json(lo: np.ndarray, hi: np.ndarray) -> list[float] | list[list[float]]:
    if np.all(lo == lo[0]) and np.all(hi == hi[0]):
        return [float(lo[0]), float(hi[0])]
    return [[float(a), float(b)] for a, b in zip(lo, hi)]


# ---------------------------------------------------------------------- composition
def gaussian_hockey_stick(x: float, mu: float) -> float:
    """``E_P[(1 - e^{x - L})_+]`` for the pair ``N(mu, 1)`` vs ``N(0, 1)`` at ANY real ``x``.

    ``x >= 0``: the GDP profile :func:`~lastiterate.notions.gdp.gdp_delta`.  ``x < 0``: the
    identity ``delta(x) = 1 - e^x + e^x delta(-x)`` (the pair is symmetric).
    """
    if x >= 0:
        return float(gdp_delta(x, mu))
    return float(1.0 - math.exp(x) + math.exp(x) * float(gdp_delta(-x, mu)))


def approximate_dp_gaussian_delta(epsilon: float, eps1: float, delta1: float, mu: float) -> float:
    r"""Exact privacy profile of ``f_{eps1, delta1} (x) G_mu`` at ``epsilon``:

    .. math:: \delta(\varepsilon) = \delta_1
              + (1 - \delta_1)\,[p\,\delta_G(\varepsilon - \varepsilon_1)
              + (1 - p)\,\delta_G(\varepsilon + \varepsilon_1)],\qquad
              p = e^{\varepsilon_1}/(1 + e^{\varepsilon_1}),

    from the dominating pair of an ``(eps1, delta1)``-DP mechanism (Kairouz, Oh, Viswanath 2015:
    losses ``+inf`` w.p. ``delta1``, ``+-eps1``, ``-inf``) composed with ``N(mu,1)`` vs ``N(0,1)``.
    Composition preserves dominance, so this bounds any ``(eps1, delta1)``-DP mechanism composed
    (adaptively) with a ``mu``-GDP one.
    """
    p = 1.0 / (1.0 + math.exp(-eps1))
    inner = p * gaussian_hockey_stick(epsilon - eps1, mu) + (1.0 - p) * gaussian_hockey_stick(
        epsilon + eps1, mu
    )
    return min(1.0, delta1 + (1.0 - delta1) * inner)


def approximate_dp_gaussian_epsilon(eps1: float, delta1: float, mu: float, delta: float) -> float:
    """Smallest epsilon with ``approximate_dp_gaussian_delta(epsilon, ...) <= delta`` (``delta >
    delta1``), rounded upwards (never under-reports); ``inf`` when ``delta <= delta1``."""
    check_nonnegative("eps1", eps1)
    if not delta > delta1:
        return math.inf
    return smallest_epsilon(
        lambda e: approximate_dp_gaussian_delta(e, eps1, delta1, mu),
        delta,
        hi=max(1.0, eps1 + mu * mu),
    )


@dataclass(frozen=True)
class ComposedGuarantee:
    """The headline guarantee: training and preprocessing together (or the
    training alone, said so)."""

    epsilon: float
    delta: float
    mu: float | None
    method: str
    covered: bool
    training_epsilon: float
    training_bound: str
    preprocessing_mu: float | None
    preprocessing_epsilon: float | None
    candidates: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        def f(x: float | None) -> float | str | None:
            return None if x is None else (x if math.isfinite(x) else "inf")

        return {
            "epsilon": f(self.epsilon),
            "delta": self.delta,
            "mu": f(self.mu),
            "method": self.method,
            "covers_preprocessing": self.covered,
            "training_epsilon": f(self.training_epsilon),
            "training_bound": self.training_bound,
            "preprocessing_mu": f(self.preprocessing_mu),
            "preprocessing_epsilon": f(self.preprocessing_epsilon),
            "candidates": [
                {k: f(v) if isinstance(v, float) else v for k, v in c.items()}
                for c in self.candidates
            ],
        }


#: fractions of delta given to the training guarantee in the (eps, delta)-DP composition candidate
DELTA_FRACTIONS: tuple[float, ...] = (0.5, 0.2)


def compose_with_preprocessing(
    report: Any,
    preprocessing: Preprocessing,
    *,
    account_at: Callable[[float], Any] | None = None,
    delta_fractions: Sequence[float] = DELTA_FRACTIONS,
) -> ComposedGuarantee:
    """Compose the training report (an :class:`~lastiterate.accountant.Report` at a fixed delta)
    with the preprocessing's cost (module docstring).  ``account_at(delta1)`` re-accounts the same
    training run at another delta; it is used for the ``(eps, delta)``-DP candidate only when no
    training result is GDP.  Raises :class:`ParameterError` when the adjacencies differ."""
    delta = report.query.delta
    if delta is None:
        raise ParameterError("report", "epsilon query", "must be accounted at a fixed delta")
    best = report.best
    if best is None:
        raise ParameterError("report", "no bound", "has no applicable bound to compose with")
    train_eps, train_bound = float(best.epsilon), str(best.bound)
    mu_s = preprocessing.mu
    if mu_s is None or mu_s == 0.0:
        method = "training only (preprocessing NOT covered)" if mu_s is None else train_bound
        return ComposedGuarantee(
            train_eps,
            delta,
            best.mu,
            method,
            mu_s is not None,
            train_eps,
            train_bound,
            mu_s,
            None if mu_s is None else 0.0,
        )
    if report.run.adjacency != preprocessing.adjacency:
        raise ParameterError(
            "adjacency",
            preprocessing.adjacency,
            f"the preprocessing and the training ({report.run.adjacency}) "
            "must use the same adjacency",
        )
    cands: list[dict[str, Any]] = []
    bounds = [r for r in report.results if r.kind == "bound"]
    for r in bounds:
        if r.mu is not None and math.isfinite(r.mu):
            total = math.hypot(r.mu, mu_s)
            cands.append(
                {
                    "method": f"GDP composition sqrt({r.bound} mu^2 + mu_stats^2)",
                    "epsilon": gdp_epsilon(delta, total),
                    "mu": total,
                }
            )
        if r.rdp:
            orders = [a for a, _ in r.rdp]
            curve = RdpCurve(orders, [e + a * mu_s * mu_s / 2.0 for a, e in r.rdp])
            cands.append(
                {
                    "method": f"RDP composition ({r.bound} + Gaussian)",
                    "epsilon": float(rdp_to_epsilon(curve, delta).epsilon),
                    "mu": None,
                }
            )
    if account_at is not None and not any(c["mu"] is not None for c in cands):
        for frac in delta_fractions:
            d1 = delta * check_in_range(
                "delta_fractions", frac, 0.0, 1.0, low_open=True, high_open=True
            )
            b1 = account_at(d1).best
            if b1 is None:
                continue
            e = approximate_dp_gaussian_epsilon(float(b1.epsilon), d1, mu_s, delta)
            cands.append(
                {
                    "method": f"(eps, delta)-DP x GDP composition ({b1.bound} at delta={d1:.3g})",
                    "epsilon": e,
                    "mu": None,
                }
            )
    if not cands:
        raise ParameterError(
            "report", train_bound, "has no GDP or RDP result; pass account_at to compose it"
        )
    chosen = min(cands, key=lambda c: c["epsilon"])
    return ComposedGuarantee(
        float(chosen["epsilon"]),
        delta,
        chosen["mu"],
        chosen["method"],
        True,
        train_eps,
        train_bound,
        mu_s,
        gdp_epsilon(delta, mu_s),
        tuple(cands),
    )


# ---------------------------------------------------------------------- calibration
@dataclass(frozen=True)
class BudgetSplit:
    """How a target ``(epsilon, delta)`` is shared between the private statistics and the training.

    The target is read as ``mu_total``-GDP (``mu_total = gdp_mu(epsilon, delta)``, exact); the
    statistics get ``statistics_share`` of ``mu_total^2`` and the training the rest, so that GDP
    composition gives back exactly ``mu_total``.  ``training_epsilon`` is the training's target
    at the same delta.  When the training's bound is not GDP, :func:`meet_budget` lowers it until
    the composed guarantee meets the target.
    """

    epsilon: float
    delta: float
    statistics_share: float
    mu_total: float
    statistics_mu: float
    training_mu: float
    training_epsilon: float

    def describe(self) -> str:
        return (
            f"budget split: epsilon={self.epsilon:g} at delta={self.delta:g} is "
            f"{self.mu_total:.4g}-GDP; {self.statistics_share:.0%} of mu^2 to the private "
            f"statistics (mu={self.statistics_mu:.4g}), the rest to training "
            f"(mu={self.training_mu:.4g}, epsilon={self.training_epsilon:.4g})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "statistics_share": self.statistics_share,
            "mu_total": self.mu_total,
            "statistics_mu": self.statistics_mu,
            "training_mu": self.training_mu,
            "training_epsilon": self.training_epsilon,
            "rule": "GDP: mu_total^2 = mu_train^2 + mu_stats^2",
        }


def split_budget(epsilon: float, delta: float, statistics_share: float = 0.1) -> BudgetSplit:
    """Share a target ``(epsilon, delta)`` between private statistics and training (see
    :class:`BudgetSplit`)."""
    eps = check_positive("target_epsilon", epsilon)
    d = check_in_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    share = check_in_range(
        "statistics_share", statistics_share, 0.0, 1.0, low_open=True, high_open=True
    )
    mu_total = gdp_mu(eps, d)
    if not mu_total > 0:
        raise ParameterError(
            "target_epsilon", epsilon, f"is too small to spend anything at delta={d:g}"
        )
    mu_s, mu_t = math.sqrt(share) * mu_total, math.sqrt(1.0 - share) * mu_total
    return BudgetSplit(eps, d, share, mu_total, mu_s, mu_t, gdp_epsilon(d, mu_t))


def meet_budget(
    split: BudgetSplit,
    composed_epsilon_for: Callable[[float], float],
    *,
    max_rounds: int = 8,
) -> tuple[float, float, int]:
    """The training target epsilon whose composed guarantee meets ``split.epsilon``.

    ``composed_epsilon_for(training_epsilon)`` calibrates the training to that target and returns
    the composed epsilon (:func:`compose_with_preprocessing`).  Starts at the GDP split (exact when
    the training is GDP) and lowers the training target by the excess until the composed epsilon
    is within the budget.  Returns ``(training_epsilon, composed_epsilon, rounds)``; raises
    :class:`ParameterError` when ``max_rounds`` do not suffice.
    """
    t = split.training_epsilon
    for k in range(1, max_rounds + 1):
        c = composed_epsilon_for(t)
        if c <= split.epsilon:
            return t, c, k
        t = t - 1.25 * (c - split.epsilon) - 1e-9 * split.epsilon
        if t <= 0:
            break
    raise ParameterError(
        "target_epsilon",
        split.epsilon,
        "cannot be met by this training together with the private statistics; lower "
        "statistics_share or raise the target",
    )


def calibrate_noise_with_preprocessing(
    run: Any,
    split: BudgetSplit,
    preprocessing: Preprocessing,
    *,
    bounds: Sequence[str] | None = None,
) -> tuple[Any, ComposedGuarantee, float]:
    """The smallest training noise (:func:`~lastiterate.accountant.calibrate_noise`) whose
    guarantee, composed with the preprocessing's, meets ``split.epsilon`` at ``split.delta``.

    Returns ``(calibration, composed guarantee of the calibrated run, training target epsilon)``.
    """
    last: dict[str, Any] = {}

    def composed_for(training_epsilon: float) -> float:
        cal = calibrate_noise(run, epsilon=training_epsilon, delta=split.delta, bounds=bounds)
        calibrated = run.replace(noise_std=cal.noise_std)
        comp = compose_with_preprocessing(
            cal.report,
            preprocessing,
            account_at=lambda d1: account(calibrated, delta=d1, bounds=bounds),
        )
        last.update(cal=cal, comp=comp)
        return comp.epsilon

    t, _, _ = meet_budget(split, composed_for)
    return last["cal"], last["comp"], t


def budget_stop_with_preprocessing(
    run: Any,
    split: BudgetSplit,
    preprocessing: Preprocessing,
    *,
    bounds: Sequence[str] | None = None,
) -> tuple[float, ComposedGuarantee]:
    """The training target epsilon for the budget stop
    (:func:`~lastiterate.train.budget.allowed_steps`) such that the model at the stop, composed with
    the preprocessing, meets ``split.epsilon``.

    Returns ``(training target epsilon, composed guarantee at the stop)``.
    """
    last: dict[str, Any] = {}

    def composed_for(training_epsilon: float) -> float:
        stop = truncate(
            run, allowed_steps(run, training_epsilon, split.delta, bounds).allowed_steps
        )
        comp = compose_with_preprocessing(
            account(stop, delta=split.delta, bounds=bounds),
            preprocessing,
            account_at=lambda d1: account(stop, delta=d1, bounds=bounds),
        )
        last["comp"] = comp
        return comp.epsilon

    t, _, _ = meet_budget(split, composed_for)
    return t, last["comp"]


__all__ = [
    "ADJACENCIES",
    "NOT_COVERED",
    "SCALINGS",
    "BudgetSplit",
    "ComposedGuarantee",
    "GaussianMomentsMechanism",
    "Preprocessing",
    "PrivateMoments",
    "approximate_dp_gaussian_delta",
    "approximate_dp_gaussian_epsilon",
    "budget_stop_with_preprocessing",
    "calibrate_noise_with_preprocessing",
    "clip_rows",
    "compose_with_preprocessing",
    "gaussian_hockey_stick",
    "meet_budget",
    "parse_range",
    "preprocess",
    "private_moments",
    "public_range_scale",
    "replace_one_sensitivity2",
    "resolve_scaling",
    "split_budget",
]
