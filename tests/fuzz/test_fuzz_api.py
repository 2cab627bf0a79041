"""Fuzz of the Python API (``import lastiterate as li``): every input, hostile ones included, gets
a result or a ParameterError / NotApplicable -- never another exception, a NaN or a non-standard
JSON report -- plus the regressions this fuzz found.

Findings fixed (each test below fails on the code before the fix):

* ``Run(convex="False")`` declared convexity (``bool("False")`` is True) and ``smoothness=True``
  declared M = 1: a string or a bool from a config dict silently enabled last-iterate theorems.
* ``calibrate_*`` and the trainers' budget refused a run with "no applicable bound for this run"
  and no reason.
* ``progress=True`` in ``calibrate_*`` / ``account_grid`` raised TypeError after the first
  evaluation.
* ``DPRidge.fit`` with text targets raised a bare ValueError from ``astype``.
* ``Run(algorithm="gd", batch_size=inf)`` raised OverflowError; ``account_grid`` echoed a NaN
  grid value into its row (no standard JSON).
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lastiterate as li
from lastiterate.errors import NotApplicable, ParameterError

FUZZ = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
BASE: dict[str, Any] = {
    "algorithm": "gd", "n": 100, "steps": 20, "lr": 0.1, "noise_std": 1.0, "sensitivity": 1.0,
}  # fmt: skip
HOSTILE = [
    math.nan, math.inf, -math.inf, -0.0, 0.0, 1e308, 1e-320, 5e-324, -1, 10**400, 2**64,
    True, False, None, "1", "x", "", b"1", [1.0], (1.0, 2.0), {}, 1 + 2j, np.float32(0.5),
    np.int64(3), np.array(2.0), np.array([1.0, 2.0]), np.nan, np.True_,
]  # fmt: skip


def _reject_constant(token: str) -> float:
    raise AssertionError(f"non-standard JSON token {token}")


def _standard_json(obj: Any) -> None:
    json.loads(json.dumps(obj, allow_nan=False), parse_constant=_reject_constant)


# ---------------------------------------------------------------------- regressions
@pytest.mark.parametrize("value", ["False", "no", "", 1, 0, None, 1.0, [True]])
def test_convex_must_be_a_bool(value: Any) -> None:
    with pytest.raises(ParameterError, match="convex"):
        li.Run(**BASE, convex=value, smoothness=2.0, diameter=1.0)


@pytest.mark.parametrize("field", ["smoothness", "strong_convexity", "diameter", "noise_std"])
@pytest.mark.parametrize("value", [True, False, np.True_])
def test_a_bool_is_not_a_number(field: str, value: Any) -> None:
    with pytest.raises(ParameterError, match=field):
        li.Run(**{**BASE, "smoothness": 2.0, field: value})


def test_numpy_bools_and_numbers_still_work() -> None:
    run = li.Run(**{**BASE, "noise_std": np.float32(1.0)}, convex=np.True_, smoothness=2.0,
                 diameter=np.float64(1.0))  # fmt: skip
    assert run.is_convex


def test_calibration_says_why_no_bound_applies() -> None:
    run = li.Run(algorithm="cgd", n=100, batch_size=10, epochs=2, lr=0.1, noise_std=1.0, clip=1.0)
    with pytest.raises(NotApplicable, match="langevin-lsi: no theorem of this family for cgd"):
        li.calibrate_noise(run, epsilon=1.0, bounds=["langevin-lsi"])


@pytest.mark.parametrize("name", ["calibrate_noise", "calibrate_epochs", "account_grid"])
def test_a_progress_that_is_not_callable_is_refused_up_front(name: str) -> None:
    run = li.Run(**BASE)
    call = {
        "calibrate_noise": lambda: li.calibrate_noise(run, epsilon=1.0, progress=True),
        "calibrate_epochs": lambda: li.calibrate_epochs(run, epsilon=1.0, progress=True),
        "account_grid": lambda: li.account_grid(run, vary={"epochs": [1, 2]}, progress=True),
    }[name]
    with pytest.raises(ParameterError, match="progress"):
        call()


@pytest.mark.parametrize("field", ["algorithm", "adjacency"])
def test_a_choice_that_is_an_array_is_refused(field: str) -> None:
    # `value not in allowed` raised "truth value of an array is ambiguous" (ValueError)
    with pytest.raises(ParameterError, match=field):
        li.Run(**{**BASE, field: np.array(["gd", "replace"])})


@pytest.mark.parametrize("epsilon", [1e200, 1e308])
def test_calibrate_epochs_with_a_huge_target(epsilon: float) -> None:
    # the first guess (target / epsilon_1)^2 overflowed: OverflowError
    run = li.Run(**BASE)
    with pytest.raises(ParameterError, match="epsilon=.*allows more than"):
        li.calibrate_epochs(run, epsilon=epsilon, bounds=["gdp-composition"])


@pytest.mark.parametrize("b", [math.inf, math.nan, "x", [100]])
def test_full_batch_size_that_is_no_integer_is_refused(b: Any) -> None:
    # was OverflowError / ValueError / TypeError from int(batch_size)
    with pytest.raises(ParameterError, match="batch_size"):
        li.Run(**BASE, batch_size=b)


@pytest.mark.parametrize("vary", [{"epochs": [math.nan]}, {"noise_std": [1.0, math.inf]}])
def test_account_grid_refuses_non_finite_values(vary: dict[str, Any]) -> None:
    # a NaN was echoed into its invalid row: the table was no standard JSON
    with pytest.raises(ParameterError, match="vary"):
        li.account_grid(li.Run(**BASE), vary=vary, as_frame=False)


def test_ridge_refuses_text_targets() -> None:
    from lastiterate.sklearn import DPRidge

    with pytest.raises(ParameterError, match="y="):
        DPRidge(max_steps=5).fit(np.ones((3, 1)), np.array(["a", "1", "nan"]))


# ---------------------------------------------------------------------- property fuzz
def _number(low: float, high: float, integer: bool = False) -> st.SearchStrategy[Any]:
    normal = st.floats(math.log10(low), math.log10(high)).map(lambda e: 10.0**e)
    if integer:
        normal = normal.map(lambda v: int(v) + 1)
    return st.one_of(normal, normal, normal, st.sampled_from(HOSTILE))


@st.composite
def run_inputs(draw: st.DrawFn) -> dict[str, Any]:
    algorithm = draw(st.sampled_from(["gd", "cgd", "sgd", "sgd", "bogus"]))
    kw: dict[str, Any] = {
        "algorithm": algorithm,
        "n": draw(_number(1, 1e4, integer=True)),
        "lr": draw(_number(1e-3, 2)),
    }
    if algorithm != "gd":
        kw["batch_size"] = draw(_number(1, 100, integer=True))
    if algorithm == "sgd":
        kw["sampling"] = draw(st.sampled_from(["poisson", "uniform", "shuffle", None, "x"]))
    if draw(st.booleans()):
        kw["steps"] = draw(_number(1, 200, integer=True))
    else:
        kw["epochs"] = draw(_number(0.1, 20))
    if draw(st.booleans()):
        kw["noise_std"] = draw(_number(1e-2, 10))
        kw["sensitivity"] = draw(_number(1e-1, 10))
    else:
        kw["noise_multiplier"] = draw(_number(0.1, 10))
        kw["clip"] = draw(_number(0.1, 10))
    for name, low, high in (
        ("strong_convexity", 1e-3, 1),
        ("smoothness", 0.1, 10),
        ("diameter", 0.1, 100),
        ("contraction", 0.01, 1),
    ):
        if draw(st.integers(0, 3)) == 0:
            kw[name] = draw(_number(low, high))
    if draw(st.integers(0, 4)) == 0:
        kw["convex"] = draw(st.sampled_from([True, False, "yes", 1, None]))
    if draw(st.integers(0, 5)) == 0:
        kw["adjacency"] = draw(st.sampled_from(["replace", "add-remove", "x", None]))
    return kw


def _answers(call: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return call()
        except (ParameterError, NotApplicable) as exc:
            assert str(exc).strip(), "an error needs a message"
            return None


QUERIES = st.one_of(
    st.sampled_from([1e-5, 1e-10, 0.5]).map(lambda d: {"delta": d}),
    st.sampled_from([0.0, 1.0, -1e-5, math.nan, 1.5, "1e-5", 5e-324]).map(lambda d: {"delta": d}),
    st.sampled_from([0.1, 1.0, 0.0, math.inf, math.nan, 1e308]).map(lambda e: {"epsilon": e}),
)


#: the bounds evaluated in closed form (fast); the PLD engine has its own fuzz (test_cli_fuzz)
CLOSED_FORM = [
    "gdp-composition", "shifted-interpolation", "rdp-composition", "hidden-state-rdp",
    "langevin-lsi", "pabi", "smooth-bounded-domain",
]  # fmt: skip


@FUZZ
@given(kw=run_inputs(), query=QUERIES)
def test_run_and_account_answer_every_input(kw: dict[str, Any], query: dict[str, Any]) -> None:
    run = _answers(lambda: li.Run(**kw))
    if run is None:
        return
    report = _answers(lambda: li.account(run, bounds=CLOSED_FORM, **query))
    if report is None:
        return
    _standard_json(report.to_json())
    for r in report.results:
        assert r.epsilon >= 0 and r.delta >= 0 and not math.isnan(r.epsilon + r.delta), r


CALIBRATIONS = st.sampled_from(["calibrate_noise", "calibrate_epochs", "calibrate_batch_size"])


@FUZZ
@given(kw=run_inputs(), which=CALIBRATIONS, epsilon=_number(0.05, 50))
def test_calibrations_answer_every_input(kw: dict[str, Any], which: str, epsilon: Any) -> None:
    run = _answers(lambda: li.Run(**kw))
    if run is None:
        return
    cal = _answers(
        lambda: getattr(li, which)(run, epsilon=epsilon, delta=1e-5, bounds=["gdp-composition"])
    )
    if cal is None:
        return
    assert cal.report.best is not None
    assert cal.report.best.epsilon <= float(epsilon) * (1 + 1e-9)  # never overshoots


VARY = st.dictionaries(
    st.sampled_from(["epochs", "noise_std", "lr", "n", "batch_size", "clip", "bogus", "noise-std"]),
    st.lists(st.sampled_from(HOSTILE[:12] + [0.5, 1, 2, 10]), max_size=3),
    max_size=2,
)


@settings(FUZZ, max_examples=40)
@given(vary=VARY)
def test_account_grid_answers_every_vary(vary: dict[str, Any]) -> None:
    table = _answers(
        lambda: li.account_grid(
            li.Run(**BASE),
            vary=vary,
            bounds=["gdp-composition"],
            as_frame=False,
            show_progress=False,
        )
    )
    if table is None:
        return
    _standard_json(table)
    for row in table:
        assert row["status"] in ("ok", "no-bound", "invalid"), row


# ---------------------------------------------------------------------- the Opacus entry point
def _opacus_inputs() -> tuple[Any, Any, Any]:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    X = torch.randn(32, 4)
    y = (X[:, 0] > 0).long()
    module = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    return module, optimizer, DataLoader(TensorDataset(X, y), batch_size=8)


OPACUS_GOOD: dict[str, Any] = {
    "target_epsilon": 2.0, "target_delta": 1e-5, "epochs": 1, "max_grad_norm": 1.0,
    "loss": "cross-entropy", "data_norm": 1.0,
}  # fmt: skip


@pytest.mark.parametrize(
    "name, value",
    [("convex", "False"), ("convex", 1), ("target_delta", "1"), ("target_delta", "x")],
)
def test_opacus_entry_refuses_wrong_types(name: str, value: Any) -> None:
    # convex="False" declared convexity (bool("False") is True); a string target_delta raised
    # TypeError from the comparison after the positivity check
    pytest.importorskip("opacus")
    from lastiterate.opacus import make_private_last_iterate

    with pytest.raises(ParameterError, match=name), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the composition-only warning of the old code
        make_private_last_iterate(*_opacus_inputs(), **{**OPACUS_GOOD, name: value})


@settings(FUZZ, max_examples=30)
@given(
    name=st.sampled_from(sorted(OPACUS_GOOD) + ["batch_size", "diameter", "smoothness", "seed"]),
    value=st.sampled_from(HOSTILE),
)
def test_opacus_entry_answers_hostile_values(name: str, value: Any) -> None:
    pytest.importorskip("opacus")
    from lastiterate.opacus import make_private_last_iterate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # composition-only and seeded-run warnings are answers
        try:
            make_private_last_iterate(*_opacus_inputs(), **{**OPACUS_GOOD, name: value})
        except (ParameterError, NotApplicable):
            pass


# ---------------------------------------------------------------------- glm_certificate
@pytest.mark.parametrize(
    "kw, name",
    [
        ({"sampling": "poisson", "n": 100, "batch_size": 0}, "batch_size"),  # ZeroDivisionError
        ({"sampling": "poisson", "n": 100, "batch_size": "x"}, "batch_size"),  # TypeError
        ({"sampling": "poisson", "n": 10, "batch_size": 100}, "batch_size"),  # b > n
        ({"sampling": "poisson", "n": math.nan, "batch_size": 1}, "n"),  # NaN smoothness
        ({"feature_norm": 1e-320, "l2": 0.0, "lr": 0.1}, "feature_norm"),  # R^2 = 0: 2/M
        ({"clip": 1e308}, "clip"),  # sensitivity 2C = inf in the certificate
        ({"lr": math.inf}, "lr"),  # an infinite lr stored in the certificate
        ({"lr": 0.1, "lr_min": math.nan}, "lr_min"),
    ],
)
def test_glm_certificate_refuses_what_it_cannot_certify(kw: dict[str, Any], name: str) -> None:
    args: dict[str, Any] = {"feature_norm": 1.0, "l2": 0.01, "clip": 1.0, **kw}
    with pytest.raises(ParameterError, match=f"^{name}="):
        li.glm_certificate("binary-logistic", **args)


@FUZZ
@given(
    family=st.sampled_from(["binary-logistic", "multinomial-logistic", "least-squares", "x"]),
    feature_norm=st.one_of(st.none(), _number(1e-3, 1e3)),
    l2=_number(1e-4, 10),
    clip=_number(1e-2, 1e2),
    lr=st.one_of(st.none(), _number(1e-3, 10)),
    intercept=st.booleans(),
    poisson=st.one_of(st.none(), st.tuples(_number(1, 1e4, True), _number(1, 1e3, True))),
)
def test_glm_certificate_answers_every_input(
    family: str,
    feature_norm: Any,
    l2: Any,
    clip: Any,
    lr: Any,
    intercept: bool,
    poisson: Any,
) -> None:
    extra = (
        {}
        if poisson is None
        else {"sampling": "poisson", "n": poisson[0], "batch_size": poisson[1]}
    )
    cert = _answers(
        lambda: li.glm_certificate(
            family, feature_norm=feature_norm, l2=l2, clip=clip, lr=lr, intercept=intercept, **extra
        )
    )
    if cert is None:
        return
    _standard_json(cert.to_json())
    for value in (cert.strong_convexity, cert.smoothness, cert.contraction):
        assert value is None or (math.isfinite(value) and value >= 0), cert


# ---------------------------------------------------------------------- data loaders, scaler
@pytest.mark.parametrize(
    "kw, name",
    [
        ({"seed": -1}, "seed"),  # sklearn's InvalidParameterError from train_test_split
        ({"seed": "x"}, "seed"),
        ({"seed": 2**40}, "seed"),
        ({"test_size": "x"}, "test_size"),  # TypeError from the comparison
        ({"test_size": math.nan}, "test_size"),
    ],
)
def test_load_dataset_checks_its_split_inputs(kw: dict[str, Any], name: str) -> None:
    from lastiterate.train.data import load_dataset

    with pytest.raises(ParameterError, match=f"^{name}="):
        load_dataset("iris", **kw)


@pytest.mark.parametrize("name", [3, ["iris"], None, True])
def test_load_dataset_needs_a_name(name: Any) -> None:
    # AttributeError: 'int' object has no attribute 'lower'
    from lastiterate.train.data import load_dataset

    with pytest.raises(ParameterError, match="^dataset="):
        load_dataset(name)


def test_load_dataset_takes_numpy_seeds_and_paths(tmp_path: Any) -> None:
    from lastiterate.train.data import load_dataset

    path = tmp_path / "d.npz"
    np.savez(path, X=np.arange(40.0).reshape(20, 2), y=np.arange(20) % 2)
    assert load_dataset(path, seed=np.int64(3)).n == 16


@pytest.mark.parametrize(
    "kw",
    [
        {"bounds": (-1e308, 1e308), "epsilon": 1.0},  # width overflows: NaN features out
        {"bounds": (-3.0, 3.0), "mu": 1e300},  # OverflowError (mu^2)
        {"bounds": (-3.0, 3.0), "mu": 1e-200},  # ZeroDivisionError (mu^2 = 0)
    ],
)
def test_private_scaler_refuses_what_overflows(kw: dict[str, Any]) -> None:
    from lastiterate.sklearn import DPStandardScaler

    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ParameterError):
        DPStandardScaler(**kw).fit(X)


@FUZZ
@given(
    bounds=st.sampled_from([(-3.0, 3.0), (0.0, 1.0), (-1e300, 1e300), (1.0, 1.0), "0,1", None]),
    budget=st.one_of(
        _number(1e-3, 1e3).map(lambda e: {"epsilon": e}),
        _number(1e-3, 1e3).map(lambda m: {"mu": m}),
    ),
    delta=st.sampled_from([1e-5, 1e-300, 0.5, 0.0, math.nan]),
    adjacency=st.sampled_from(["replace", "add-remove", "x"]),
)
def test_private_scaler_answers_every_input(
    bounds: Any, budget: dict[str, Any], delta: Any, adjacency: str
) -> None:
    from lastiterate.sklearn import DPStandardScaler

    X = np.random.default_rng(0).uniform(-2, 2, size=(30, 3))
    scaler = DPStandardScaler(bounds=bounds, delta=delta, adjacency=adjacency, **budget)
    Z = _answers(lambda: scaler.fit(X).transform(X))
    if Z is not None:
        assert np.isfinite(Z).all()
        _standard_json(scaler.privacy_report_)


def test_one_bound_id_as_a_plain_string_is_that_bound():
    """bounds='gdp-composition' was read letter by letter ("bound='g' is invalid")."""
    run = li.Run(algorithm="gd", n=1000, noise_std=1.0, lr=0.1, steps=100, sensitivity=1.0)
    one = li.account(run, delta=1e-5, bounds="gdp-composition")
    listed = li.account(run, delta=1e-5, bounds=["gdp-composition"])
    assert [r.bound for r in one.results] == ["gdp-composition"]
    assert one.best.epsilon == listed.best.epsilon


def test_a_single_range_refusal_asks_for_one_pair():
    """A target range (one column) was refused with "or 1 pairs (one per feature)"."""
    from lastiterate.train.preprocessing import parse_range

    with pytest.raises(ParameterError, match=r"must be one pair \(lo, hi\)$"):
        parse_range([[0, 1], [0, 1]], 1, name="target_range")
    with pytest.raises(ParameterError, match="or 3 pairs"):
        parse_range([[0, 1], [0, 1]], 3)
