"""lastiterate.sklearn.DPStandardScaler: a scikit-learn transformer whose cost is
reported as mu-GDP."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

from lastiterate.errors import ParameterError
from lastiterate.notions.gdp import gdp_epsilon, gdp_mu
from lastiterate.sklearn import DPStandardScaler
from lastiterate.train.preprocessing import GaussianMomentsMechanism


@pytest.fixture(scope="module")
def digits():
    return load_digits(return_X_y=True)


def test_passes_scikit_learn_estimator_checks():
    failed = [
        r
        for r in check_estimator(
            DPStandardScaler(bounds=(-1e6, 1e6), mu=1.0, random_state=0), on_fail=None
        )
        if r["status"] == "failed"
    ]
    assert failed == []


def test_params_clone_and_pipeline(digits):
    X, y = digits
    sc = DPStandardScaler(bounds=(0, 16), epsilon=1.0, random_state=0)
    assert sc.get_params() == {
        "bounds": (0, 16),
        "epsilon": 1.0,
        "delta": 1e-5,
        "mu": None,
        "adjacency": "replace",
        "random_state": 0,
    }
    sc.set_params(epsilon=2.0)
    assert clone(sc).get_params()["epsilon"] == 2.0
    pipe = make_pipeline(sc, LogisticRegression(max_iter=300))
    pipe.fit(X, y)
    assert pipe.score(X, y) > 0.9
    pipe.set_params(dpstandardscaler__mu=0.5, dpstandardscaler__epsilon=None)
    pipe.fit(X, y)
    assert pipe[0].mu_ == pytest.approx(0.5)
    assert isinstance(pickle.loads(pickle.dumps(pipe)), Pipeline)
    assert list(pipe[0].get_feature_names_out())[:2] == ["x0", "x1"]


def test_budget_and_privacy_report(digits):
    X, _ = digits
    sc = DPStandardScaler(bounds=(0, 16), epsilon=1.0, delta=1e-6).fit(X)
    assert sc.mu_ == pytest.approx(gdp_mu(1.0, 1e-6), rel=1e-9) and sc.epsilon_ <= 1.0 + 1e-9
    assert sc.epsilon_ == pytest.approx(1.0, rel=1e-6)
    rep = sc.privacy_report_
    mech = GaussianMomentsMechanism(X.shape[1], rep["mu"])
    assert rep["sigma_sum"] == pytest.approx(mech.sigma_sum) and rep[
        "sigma_square"
    ] == pytest.approx(mech.sigma_square)
    assert rep["secret_noise"] and rep["adjacency"] == "replace" and rep["sigma_count"] is None
    assert sc.composed_mu(0.6) == pytest.approx(math.hypot(0.6, sc.mu_))
    assert gdp_epsilon(1e-6, sc.composed_mu(0.6)) > gdp_epsilon(1e-6, 0.6)
    ar = DPStandardScaler(bounds=(0, 16), mu=1.0, adjacency="add-remove").fit(X)
    assert ar.privacy_report_["sigma_count"] is not None


def test_noise_is_fresh_unless_seeded_and_transform_is_clipped(digits):
    X, _ = digits
    a = DPStandardScaler(bounds=(0, 16), mu=0.5, random_state=3).fit(X)
    b = DPStandardScaler(bounds=(0, 16), mu=0.5, random_state=3).fit(X)
    c = DPStandardScaler(bounds=(0, 16), mu=0.5).fit(X)
    d = DPStandardScaler(bounds=(0, 16), mu=0.5).fit(X)
    np.testing.assert_array_equal(a.mean_, b.mean_)
    assert not np.array_equal(c.mean_, d.mean_)
    far = np.full((1, X.shape[1]), 1e9)
    np.testing.assert_allclose(a.transform(far), a.transform(np.full((1, X.shape[1]), 16.0)))
    np.testing.assert_allclose(a.inverse_transform(a.transform(X[:5])), X[:5], atol=1e-9)
    big = DPStandardScaler(bounds=(0, 16), mu=1e5, random_state=0).fit(X)
    np.testing.assert_allclose(big.mean_, X.mean(0), atol=1e-2)
    exact = StandardScaler().fit(X)
    live = (exact.var_ > 0) & (
        exact.scale_ > 0.2
    )  # StandardScaler reports scale 1 for constant columns
    np.testing.assert_allclose(big.scale_[live], exact.scale_[live], rtol=1e-2)
    assert (
        big.scale_.min() >= 8 * math.sqrt(1e-4) - 1e-12
    )  # the released variance floor (post-processing)


@pytest.mark.parametrize(
    "kw",
    [
        {},  # no bounds: refused, never computed from the data
        {"bounds": (0, 16)},  # no budget
        {"bounds": (0, 16), "epsilon": 1.0, "mu": 1.0},
        {"bounds": (16, 0), "mu": 1.0},
        {"bounds": (0, 16), "mu": -1.0},
        {"bounds": (0, 16), "epsilon": 1.0, "delta": 0.0},
        {"bounds": (0, 16), "mu": 1.0, "adjacency": "nope"},
        {"bounds": (0, 16), "mu": 1.0, "random_state": "x"},
        {"bounds": [(0, 16)] * 3, "mu": 1.0},  # wrong number of pairs
    ],
)
def test_bad_parameters_raise_parameter_error(kw, digits):
    X, _ = digits
    with pytest.raises(ParameterError):
        DPStandardScaler(**kw).fit(X)


def test_not_fitted():
    with pytest.raises(NotFittedError):
        DPStandardScaler(bounds=(0, 1), mu=1.0).transform(np.zeros((2, 2)))
