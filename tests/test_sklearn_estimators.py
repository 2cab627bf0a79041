"""lastiterate.sklearn.DPLogisticRegression / DPRidge: estimators that choose their configuration.

Independent sources: scikit-learn's estimator checks, scikit-learn's LogisticRegression (the
non-private limit), dp_accounting (the composition epsilon of the executed run) and closed-form
gradient bounds (the clip is the largest per-example gradient norm).
"""

from __future__ import annotations

import math
import pickle
import warnings

import dp_accounting
import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_iris, load_wine, make_classification, make_regression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

import lastiterate as li
from lastiterate.errors import ParameterError
from lastiterate.sklearn import (
    DPLogisticRegression,
    DPRidge,
    DPStandardScaler,
    choose_configuration,
)
from lastiterate.train import GLM, SeededRunWarning

#: checks a private estimator cannot meet, each with its reason
RIDGE_XFAIL = {
    "check_regressors_train": (
        "asks for R^2 > 0.5 from ~200 unscaled rows at the default epsilon=1 with rows clipped to "
        "norm 1 and "
        "targets to [-1, 1]: the privacy noise and the clipping forbid it (the fit itself works)"
    ),
}


def _clip(X: np.ndarray, R: float = 1.0) -> np.ndarray:
    return X * np.minimum(1.0, R / np.linalg.norm(X, axis=1, keepdims=True))


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X) / 3  # test data only: the split below is what matters
    return train_test_split(X, y, test_size=0.3, random_state=0)


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(n_samples=600, n_features=8, n_informative=4, random_state=2)
    return train_test_split(X / 3, y, test_size=0.3, random_state=0)


@pytest.mark.parametrize(
    "est, xfail",
    [(DPLogisticRegression(), {}), (DPRidge(), RIDGE_XFAIL)],
    ids=["logistic", "ridge"],
)
def test_passes_scikit_learn_estimator_checks(est, xfail):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)
        results = check_estimator(est, expected_failed_checks=xfail, on_fail=None, on_skip=None)
    failed = [
        (r["check_name"], repr(r["exception"])[:200]) for r in results if r["status"] == "failed"
    ]
    assert failed == []
    assert {r["check_name"] for r in results if r["status"] == "xfail"} == set(xfail)
    assert est.__sklearn_tags__().non_deterministic  # fresh secret noise on every fit


def test_done_when_snippet_works_as_written(wine):
    X, X_test, y, y_test = wine
    clf = DPLogisticRegression(epsilon=1.0, delta=1e-5, data_norm=1.0).fit(X, y)
    score, best = clf.score(X_test, y_test), clf.privacy_report_.best
    assert 0.0 <= score <= 1.0
    assert best.epsilon <= 1.0 and best.delta == 1e-5
    assert clf.privacy_report_.run.adjacency == "replace"
    assert clf.privacy_report_.notes[0].startswith("rows of X are clipped to norm <= data_norm = 1")


def test_reaches_non_private_accuracy_at_huge_epsilon(wine, binary):
    # a 10-class, 64-feature synthetic set (digits' shape, not digits: the benchmark's data is not
    # used to set the rule) besides wine and a binary set
    X, y = make_classification(
        n_samples=1800,
        n_features=64,
        n_informative=32,
        n_classes=10,
        n_clusters_per_class=1,
        class_sep=1.5,
        random_state=5,
    )
    X = StandardScaler().fit_transform(X)
    X /= np.quantile(np.linalg.norm(X, axis=1), 0.9)
    many = train_test_split(X, y, test_size=0.25, random_state=0)
    for X, X_test, y, y_test in (wine, binary, many):
        clf = DPLogisticRegression(epsilon=1e6, random_state=0).fit(X, y)
        ref = LogisticRegression(max_iter=3000).fit(_clip(X), y).score(_clip(X_test), y_test)
        assert clf.score(X_test, y_test) >= ref - 0.01
        assert clf.privacy_report_.epsilon <= 1e6
        # the step budget binds: the horizon rule asks for far more than max_steps
        assert clf.privacy_report_.configuration.steps == 3000


def test_privacy_degrades_accuracy_monotonically_on_average(binary):
    # not a guarantee test: a fit at a tiny epsilon must be visibly noisier (noise is really added)
    X, _, y, _ = binary
    strong = DPLogisticRegression(epsilon=1e6, random_state=1).fit(X, y)
    weak = DPLogisticRegression(epsilon=0.01, random_state=1).fit(X, y)
    assert (
        weak.privacy_report_.configuration.noise_std
        > 100 * strong.privacy_report_.configuration.noise_std
    )
    assert np.linalg.norm(weak.coef_ - strong.coef_) > 0.1


@pytest.mark.parametrize("strategy", ["early-stopping", "last-iterate"])
def test_report_is_the_accountants_for_the_executed_run(wine, strategy):
    X, _, y, _ = wine
    clf = DPLogisticRegression(epsilon=2.0, random_state=0, strategy=strategy).fit(X, y)
    rep, cfg = clf.privacy_report_, clf.privacy_report_.configuration
    run = rep.run
    assert (run.algorithm, run.T, run.sigma, run.n) == (
        cfg.algorithm,
        cfg.steps,
        cfg.noise_std,
        len(y),
    )
    assert run.L == pytest.approx(2 * cfg.clip)
    assert cfg.strategy == strategy and cfg.family == "multinomial-logistic"
    R_eff = math.hypot(1.0, 0.3)  # rows at norm <= 1 and the intercept feature a = 0.3
    assert cfg.effective_feature_norm == pytest.approx(R_eff)
    if strategy == "last-iterate":
        # the multinomial certificate: C = sqrt(2) R_eff, lr < 2/M, m = lambda
        assert cfg.certified and cfg.clip == pytest.approx(math.sqrt(2) * R_eff)
        assert run.m == pytest.approx(cfg.l2) and cfg.lr < 2 / run.M
    else:
        # no L2, a clip below the largest gradient: no geometry, composition is the bound
        assert cfg.l2 == 0 and cfg.clip == pytest.approx(0.5 * R_eff) and not cfg.certified
        assert rep.bound in ("gdp-composition", "pld-composition")
    again = li.account(run, delta=1e-5).best
    assert (again.bound, again.epsilon) == (rep.bound, rep.epsilon)
    assert rep.epsilon <= 2.0
    assert rep.to_json()["configuration"]["algorithm"] == cfg.algorithm


def test_composition_entry_agrees_with_dp_accounting(wine):
    # the executed full-batch run, every iterate released: T Gaussian mechanisms, scale L/(n sigma)
    X, _, y, _ = wine
    clf = DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
    run = clf.privacy_report_.run
    comp = clf.privacy_report_.report.result("pld-composition")
    z = run.n * run.sigma / run.L
    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.GaussianDpEvent(z), run.T)
    ref = acc.get_epsilon(1e-5)
    assert comp.epsilon == pytest.approx(ref, rel=1e-3)
    assert (
        comp.epsilon >= clf.privacy_report_.epsilon
    )  # the last-iterate bound is the tighter one here


@pytest.mark.parametrize("family, k", [("binary-logistic", 1), ("multinomial-logistic", 4)])
def test_last_iterate_clip_against_the_largest_gradient_norm(family, k):
    # closed form: per-example gradient norms of rows (x, a) with ||x|| <= 0.8 stay <= G, G =
    # R_eff (binary) or sqrt(2) R_eff (multinomial); the multinomial clip is G (never active, the
    # certificate holds), the binary clip G/2 (a Huber-type loss, certified)
    cfg = choose_configuration(
        family,
        n=500,
        n_features=6,
        n_outputs=k,
        epsilon=1.0,
        delta=1e-5,
        data_norm=0.8,
        strategy="last-iterate",
    )
    assert cfg.certified and cfg.intercept_feature == 0.3
    rng = np.random.default_rng(0)
    model = GLM(7, k, family=family, intercept=False)
    with torch.no_grad():
        model.weight.copy_(torch.as_tensor(rng.normal(0, 50, (k, 7))))
    X = np.hstack([_clip(rng.normal(size=(2000, 6)), 0.8), np.full((2000, 1), 0.3)])
    y = torch.as_tensor(rng.integers(0, max(k, 2), 2000))
    G = float(model.grad_norms(torch.as_tensor(X), y).max())
    ratio = 1.0 if family == "multinomial-logistic" else 2.0
    assert G <= ratio * cfg.clip * (1 + 1e-12)
    assert G >= 0.9 * ratio * cfg.clip  # and the bound is nearly attained (tight, not arbitrary)


def test_add_remove_trains_poisson_sgd(binary):
    X, X_test, y, y_test = binary
    clf = DPLogisticRegression(
        epsilon=2.0, adjacency="add-remove", random_state=0, max_steps=100
    ).fit(X, y)
    run = clf.privacy_report_.run
    assert (run.algorithm, run.sampling, run.adjacency) == ("sgd", "poisson", "add-remove")
    # Poisson sampling at rate 1: every row, the clipped sum divided by the fixed b = n
    assert run.b == len(y) and run.p == 1.0
    assert clf.privacy_report_.configuration.strategy == "early-stopping"
    assert clf.privacy_report_.epsilon <= 2.0
    # dp_accounting: Poisson-subsampled Gaussian, noise multiplier sigma b / C, composed T times
    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(
        dp_accounting.PoissonSampledDpEvent(
            run.p, dp_accounting.GaussianDpEvent(run.sigma * run.b / run.L)
        ),
        run.T,
    )
    ref = acc.get_epsilon(1e-5)
    # composition is the bound here, and the accountant's best is not below the (near-exact,
    # pessimistic) PLD of dp_accounting: nothing is under-reported
    comp = clf.privacy_report_.report.result("pld-composition")
    assert comp.epsilon == pytest.approx(ref, rel=1e-3)
    assert clf.privacy_report_.epsilon >= ref * (1 - 1e-3)
    assert clf.score(X_test, y_test) > 0.5


def test_ridge_fits_and_reports(binary):
    X, y = make_regression(n_samples=800, n_features=5, noise=1.0, random_state=0)
    X = X / 4
    y = y / np.abs(y).max()
    reg = DPRidge(epsilon=1e6, random_state=0).fit(X, y)
    assert reg.score(X, y) > 0.9
    assert reg.coef_.shape == (5,) and isinstance(reg.intercept_, float)
    assert reg.privacy_report_.configuration.family == "least-squares"
    assert any("targets are clipped" in note for note in reg.privacy_report_.notes)
    private = DPRidge(epsilon=1.0, random_state=0).fit(X, y)
    assert private.privacy_report_.epsilon <= 1.0


def test_binary_api_shapes_and_labels(binary):
    X, X_test, y, _ = binary
    labels = np.array(["no", "yes"])[y]
    clf = DPLogisticRegression(epsilon=1e6, random_state=0).fit(X, labels)
    assert list(clf.classes_) == ["no", "yes"]
    assert clf.decision_function(X_test).shape == (len(X_test),)
    proba = clf.predict_proba(X_test)
    assert proba.shape == (len(X_test), 2) and np.allclose(proba.sum(1), 1)
    assert np.array_equal(clf.predict(X_test), clf.classes_[proba.argmax(1)])
    assert clf.coef_.shape == (1, X.shape[1])


def test_pipeline_with_private_scaler_and_pickle():
    X, y = load_iris(return_X_y=True)  # petal / sepal lengths in cm: public range [0, 10]
    pipe = Pipeline(
        [
            ("scale", DPStandardScaler(bounds=(0, 10), epsilon=0.5, random_state=0)),
            ("clf", DPLogisticRegression(epsilon=1e6, data_norm=3.0, random_state=0)),
        ]
    )
    pipe.fit(X, y)
    assert pipe.score(X, y) > 0.8
    clf = pickle.loads(pickle.dumps(pipe))[-1]
    assert clf.privacy_report_.epsilon == pipe[-1].privacy_report_.epsilon
    assert np.array_equal(clf.predict(pipe[0].transform(X)), pipe.predict(X))


def test_params_clone_and_seed_warning(binary):
    X, _, y, _ = binary
    clf = DPLogisticRegression(epsilon=3.0)
    assert clf.get_params() == {
        "epsilon": 3.0,
        "delta": 1e-5,
        "data_norm": 1.0,
        "adjacency": "replace",
        "fit_intercept": True,
        "random_state": None,
        "max_steps": 3000,
        "classes": None,
        "strategy": "auto",
    }
    assert clone(clf.set_params(epsilon=2.0)).epsilon == 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeededRunWarning)
        clf.fit(X, y)  # no seed: fresh secret entropy, no warning
        assert "secret randomness" in " ".join(clf.privacy_report_.notes)
        with pytest.raises(SeededRunWarning):
            DPLogisticRegression(epsilon=3.0, random_state=0).fit(X, y)
    # two unseeded fits draw different noise
    other = DPLogisticRegression(epsilon=3.0).fit(X, y)
    assert not np.array_equal(other.coef_, clf.coef_)


def test_no_intercept_is_honoured(binary):
    X, _, y, _ = binary
    clf = DPLogisticRegression(epsilon=5.0, fit_intercept=False, random_state=0).fit(X, y)
    assert np.all(clf.intercept_ == 0)
    cfg = clf.privacy_report_.configuration
    # R_eff = R without the intercept feature; both strategies clip binary gradients at R_eff / 2
    assert cfg.intercept_feature == 0 and cfg.effective_feature_norm == 1.0
    assert cfg.clip == pytest.approx(0.5)
    assert clf.privacy_report_.run.L == pytest.approx(1.0)


@pytest.mark.parametrize("strategy", ["early-stopping", "last-iterate"])
def test_intercept_is_the_weight_of_the_constant_feature(strategy):
    # exactly solvable: with all-zero rows the model is its intercept alone, whose optimum is the
    # log-odds of the label frequency (logit(0.8) = ln 4); at a huge epsilon the fit reaches it
    X = np.zeros((1000, 3))
    y = np.r_[np.ones(800), np.zeros(200)].astype(int)
    clf = DPLogisticRegression(epsilon=1e6, random_state=0, strategy=strategy).fit(X, y)
    assert np.abs(clf.coef_).max() < 0.05  # zero rows: only the (tiny) noise reaches the weights
    tol = 0.05 if strategy == "early-stopping" else 0.15  # last iterate: lambda shrinks a bit
    assert clf.intercept_[0] == pytest.approx(math.log(4.0), abs=tol)
    assert clf.predict_proba(X[:1])[0, 1] == pytest.approx(0.8, abs=0.02)


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"delta": 1.0}, "delta"),
        ({"data_norm": -1}, "data_norm"),
        ({"adjacency": "swap"}, "adjacency"),
        ({"fit_intercept": "yes"}, "fit_intercept"),
        ({"random_state": -3}, "random_state"),
        ({"max_steps": 0}, "max_steps"),
        ({"strategy": "fast"}, "strategy"),
        ({"strategy": "last-iterate", "adjacency": "add-remove"}, "strategy"),
    ],
)
def test_bad_parameters_raise_parameter_error(binary, kw, name):
    X, _, y, _ = binary
    with pytest.raises(ParameterError) as info:
        DPLogisticRegression(**kw).fit(X, y)
    assert info.value.name == name


def test_bad_data_raises_parameter_error(binary):
    X, _, y, _ = binary
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ParameterError, match="NaN"):
        DPLogisticRegression().fit(bad, y)
    with pytest.raises(ParameterError, match="2 classes"):
        DPLogisticRegression().fit(X, np.zeros(len(y)))
    with pytest.raises(ParameterError) as info:
        DPRidge(target_bound=0).fit(X, y.astype(float))
    assert info.value.name == "target_bound"


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"n": 0}, "n"),
        ({"n_features": 1.5}, "n_features"),
        ({"epsilon": -1}, "epsilon"),
        ({"family": "poisson"}, "model"),
        ({"max_steps": 0}, "max_steps"),
        ({"family": "least-squares", "target_bound": None}, "target_bound"),
    ],
)
def test_choose_configuration_refuses_bad_input(kw, name):
    args = {
        "family": "binary-logistic",
        "n": 100,
        "n_features": 3,
        "n_outputs": 1,
        "epsilon": 1.0,
        "delta": 1e-5,
        "data_norm": 1.0,
        **kw,
    }
    family = args.pop("family")
    with pytest.raises(ParameterError) as info:
        choose_configuration(family, **args)
    assert info.value.name == name


def test_declared_classes_fix_the_label_set(binary):
    X, X_test, y, _ = binary
    clf = DPLogisticRegression(epsilon=1e6, classes=[0, 1, 2], random_state=0).fit(X, y)
    assert list(clf.classes_) == [0, 1, 2] and clf.coef_.shape == (3, X.shape[1])
    assert clf.privacy_report_.configuration.family == "multinomial-logistic"
    assert set(clf.predict(X_test)) <= {0, 1, 2}
    with pytest.raises(ParameterError) as info:
        DPLogisticRegression(classes=[0, 2]).fit(X, y)
    assert info.value.name == "y"


def _anisotropic_logistic_set(n: int, d: int, seed: int):
    """A logistic generative model with anisotropic features (covariance eigenvalues from 1 to
    1e-2 in a random basis), split 75/25, standardised on the training part, rows at norm <= 1."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(d, d)))
    X = (rng.normal(size=(n, d)) * np.sqrt(np.geomspace(1.0, 1e-2, d))) @ basis.T
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ (3.0 * rng.normal(size=d))))).astype(int)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    scaler = StandardScaler().fit(Xtr)
    return _clip(scaler.transform(Xtr)), ytr, _clip(scaler.transform(Xte)), yte


@pytest.mark.slow
def test_large_n_horizon_beats_the_growth_in_the_budget_alone(monkeypatch):
    # issue 9: at epsilon 0.25 on 30000 training rows the horizon n m G / D(p) with G from the
    # budget alone (112 steps here) stops long before the optimisation saturates; the
    # sample-size term n m / 500 trains ~4x longer and comes closer to non-private scikit-learn
    from lastiterate import configuration

    Xtr, ytr, Xte, yte = _anisotropic_logistic_set(40000, 30, seed=3)
    nonprivate = LogisticRegression(max_iter=2000).fit(Xtr, ytr).score(Xte, yte)

    def accuracy() -> tuple[float, int]:
        configuration.cached_configuration.cache_clear()
        scores, steps = [], 0
        for seed in range(3):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SeededRunWarning)
                clf = DPLogisticRegression(epsilon=0.25, random_state=seed).fit(Xtr, ytr)
            scores.append(clf.score(Xte, yte))
            steps = clf.privacy_report_.configuration.steps
            assert clf.privacy_report_.epsilon <= 0.25 * (1 + 1e-9)
        return float(np.mean(scores)), steps

    new, new_steps = accuracy()
    monkeypatch.setattr(configuration, "HORIZON_SAMPLE_SCALE", math.inf)  # the rule before
    old, old_steps = accuracy()
    configuration.cached_configuration.cache_clear()
    assert new_steps >= 3 * old_steps
    assert new >= old + 0.01, (new, old, nonprivate)
    assert nonprivate - new < 0.6 * (nonprivate - old)
