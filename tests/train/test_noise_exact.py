"""An exact check that the trainer adds the noise it claims (issue 14, section 4).

Least squares, loss (w.x - y)^2 / 2 + (lambda/2)||w||^2, on n rows with two features.  The canary
(the last row) is ALONE on feature 1: x_canary = (0, a) and every other row has feature 1 equal to
0.  The neighbouring datasets differ in the canary's label only (y0 against -y0).  Coordinate 1 of
the parameters then evolves alone, by the documented update (trainer.py module docstring)

    w_{t+1} = w_t - eta ( [canary in B_t] a (a w_t - y_c) / b_t + lambda w_t + Z_t ),
        Z_t ~ N(0, sigma^2),

as long as the canary's gradient |a (a w_t - y_c)| stays below the clip norm C (checked: no gradient
is ever clipped).  So w_T = alpha-products applied to the label term plus Gaussian noise: w_T is
Gaussian with mean m_T(y_c) and variance v_T computed below from the update alone (b_t = n for
NoisyGD; the numpy.array_split partition of range(n) for NoisyCGD with permute=False), and the
privacy loss of releasing the last iterate is exactly that of N(m_T(y0), v_T) against
N(m_T(-y0), v_T): mu_exact = |m_T(y0) - m_T(-y0)| / sqrt(v_T) (the other coordinate has the
same law under both datasets and is independent of coordinate 1).

The test trains a few hundred seeded models per neighbour with the library's own trainer and
compares the empirical mean shift and standard deviation with (m_T, v_T) within confidence
intervals, and the empirical mu with the mu the accountant claims for the same Run.  It is shown
to FAIL for a trainer that adds half the claimed noise (the noise is monkeypatched).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lastiterate.accountant import account
from lastiterate.train.models import GLM
from lastiterate.train.trainer import NoisyCGD, NoisyGD, NoisyMethod

N_ROWS, A, Y0, CLIP, L2, LR, SIGMA, STEPS, CGD_BATCH = 8, 1.0, 0.52, 0.6, 0.5, 0.5, 0.03, 16, 4
# two-sided level of every confidence interval (the seeds are fixed: the outcome is deterministic)
LEVEL = 1e-4
Z_CI = stats.norm.isf(LEVEL / 2)


def canary_dataset(y_canary: float) -> tuple[np.ndarray, np.ndarray]:
    """n-1 ordinary rows on feature 0 (norm <= 0.5) and the canary alone on feature 1."""
    X = np.zeros((N_ROWS, 2))
    X[:-1, 0] = np.linspace(-0.5, 0.5, N_ROWS - 1)
    X[-1, 1] = A
    y = np.linspace(-0.3, 0.3, N_ROWS)
    y[-1] = y_canary
    return X, y


def _method(kind: str, model: GLM, seed: int, secure: bool = False) -> NoisyMethod:
    kw = {
        "lr": LR,
        "noise_std": SIGMA,
        "clip": CLIP,
        "l2": L2,
        "feature_norm": A,
        "seed": seed,
        "secure": secure,
    }
    if kind == "gd":
        return NoisyGD(model, **kw)
    return NoisyCGD(model, batch_size=CGD_BATCH, permute=False, **kw)


def canary_coordinate_law(kind: str, y_canary: float) -> tuple[float, float]:
    """(mean, variance) of the canary coordinate of w_T, from the documented update alone."""
    batches = (
        [np.arange(N_ROWS)]
        if kind == "gd"
        else np.array_split(np.arange(N_ROWS), -(-N_ROWS // CGD_BATCH))
    )
    mean, var = 0.0, 0.0  # w_0 = 0
    for t in range(STEPS):
        batch = batches[t % len(batches)]
        hit = (N_ROWS - 1) in batch
        alpha = 1.0 - LR * (L2 + (A * A / len(batch) if hit else 0.0))
        mean = alpha * mean + (LR * A * y_canary / len(batch) if hit else 0.0)
        var = alpha**2 * var + (LR * SIGMA) ** 2
    return mean, var


def train_canary_coordinates(
    kind: str, y_canary: float, seeds: range, secure: bool = False
) -> np.ndarray:
    """w_T[canary feature] of one model per seed, trained by the library's trainer."""
    X, y = canary_dataset(y_canary)
    out = []
    for seed in seeds:
        model = GLM(2, 1, "least-squares")
        res = _method(kind, model, seed, secure).fit(X, y, steps=STEPS, account=False)
        assert res.clipped_fraction == 0.0  # the premise: clipping never active
        out.append(float(model.weight[0, 1]))
    return np.array(out)


def claimed_mu(kind: str) -> float:
    run, cert, _ = _method(kind, GLM(2, 1, "least-squares"), 0).plan(N_ROWS, steps=STEPS)
    assert cert.certified  # the last-iterate theorems are the claim under test
    best = account(run, delta=1e-5).best
    assert best is not None and best.mu is not None
    return float(best.mu)


def noise_check(kind: str, n_models: int, secure: bool = False) -> dict[str, object]:
    """Empirical against computed law of the canary coordinate; the names of the
    checks that fail."""
    w1 = train_canary_coordinates(kind, Y0, range(n_models), secure)
    w2 = train_canary_coordinates(kind, -Y0, range(n_models, 2 * n_models), secure)
    m1, v = canary_coordinate_law(kind, Y0)
    m2, v2 = canary_coordinate_law(kind, -Y0)
    assert v == v2
    shift, sd = m1 - m2, float(np.sqrt(v))
    mu_exact = abs(shift) / sd
    emp_shift = float(w1.mean() - w2.mean())
    se_shift = float(np.sqrt(w1.var(ddof=1) / n_models + w2.var(ddof=1) / n_models))
    failed = []
    if abs(emp_shift - shift) > Z_CI * se_shift:
        failed.append("mean shift")
    for w in (w1, w2):  # (k-1) s^2 / sd^2 ~ chi^2_{k-1}
        q = (n_models - 1) * w.var(ddof=1) / v
        if (
            not stats.chi2.ppf(LEVEL / 2, n_models - 1)
            <= q
            <= stats.chi2.isf(LEVEL / 2, n_models - 1)
        ):
            failed.append("std")
    pooled_sd = float(np.sqrt((w1.var(ddof=1) + w2.var(ddof=1)) / 2))
    mu_emp = abs(emp_shift) / pooled_sd
    claim = claimed_mu(kind)
    if mu_emp > claim:
        failed.append("mu above claim")
    return {
        "failed": failed,
        "mu_emp": mu_emp,
        "mu_exact": mu_exact,
        "claim": claim,
        "shift": shift,
        "emp_shift": emp_shift,
        "sd": sd,
    }


@pytest.mark.filterwarnings("ignore::lastiterate.train.randomness.SeededRunWarning")
@pytest.mark.parametrize(
    ("kind", "secure", "n_models"), [("gd", False, 200), ("cgd", False, 200), ("gd", True, 120)]
)
def test_last_iterate_has_the_claimed_gaussian_law(kind, secure, n_models):
    res = noise_check(kind, n_models, secure)
    assert res["failed"] == [], res
    assert res["mu_exact"] <= res["claim"]  # the accountant's claim covers the exact privacy loss
    assert (
        res["mu_exact"] > 0.7 * res["claim"]
    )  # tight enough that half the noise exceeds the claim


def test_the_computed_law_is_not_vacuous():
    """The hand computation reacts to its inputs (a check that cannot fail is a defect)."""
    m1, v = canary_coordinate_law("gd", Y0)
    m2, _ = canary_coordinate_law("gd", -Y0)
    assert m1 == pytest.approx(-m2) and m1 > 0 and v > 0
    # GD: stationary variance (eta sigma)^2 / (1 - alpha^2) approached from below
    alpha = 1 - LR * (L2 + A * A / N_ROWS)
    assert v == pytest.approx((LR * SIGMA) ** 2 * (1 - alpha ** (2 * STEPS)) / (1 - alpha**2))


@pytest.mark.filterwarnings("ignore::lastiterate.train.randomness.SeededRunWarning")
@pytest.mark.parametrize("kind", ["gd", "cgd"])
def test_half_the_claimed_noise_is_caught(kind, monkeypatch):
    """A trainer that adds half the noise it claims fails the check (std and mu)."""
    honest = NoisyMethod._noise

    def half_noise(self, t, sigma, params):
        return honest(self, t, sigma / 2, params)

    monkeypatch.setattr(NoisyMethod, "_noise", half_noise)
    res = noise_check(kind, 80)
    assert "std" in res["failed"] and "mu above claim" in res["failed"], res
