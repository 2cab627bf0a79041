"""``lastiterate reproduce paper004-*``: Bu, Dong, Long, Su, "Deep Learning with Gaussian
Differential Privacy" (HDSR 2020), MNIST accounting (docs/theorems.md 6).

Setting: NoisySGD with Poisson sampling at rate p = 256/60000, clipping R, noise sigma R on the sum
(sigma = TF/Opacus noise multiplier), add/remove adjacency, delta = 1e-5.  Three accountants:

* **CLT** (BDLS20 eq. 3.1, docs/theorems.md 1.7): mu_CLT = p sqrt(T (e^{1/sigma^2} - 1)) with the
  paper's real-valued T = epochs n / B (:func:`~lastiterate.notions.clt.clt_mu_poisson`), and
  eps_CLT by the exact GDP duality (3.2) (:func:`~lastiterate.notions.gdp.gdp_epsilon`).  An
  ESTIMATE (a limit as T -> infinity), not a bound.
* **MA** ("moments accountant", the paper's comparison column, docs/theorems.md 1.5): RDP of the
  Poisson-sampled Gaussian (mixture-first direction, as TF-Privacy) at the TF-tutorial orders
  {1 + x/10 : x = 1..99} u {12..63}, composed over steps = ceil(epochs n / B), converted with the
  classic Mironov formula only (``rdp_to_epsilon(..., methods=("mironov",))``).
* **extra columns** (not in the paper): the modern best-of RDP conversion (library default orders,
  both directions, all conversions) and the rigorous PLD epsilon of the exact composition that the
  CLT approximates: the add/remove Poisson-subsampled Gaussian PLD self-composed over the same
  steps (:func:`~lastiterate.notions.pld.poisson_subsampled_gaussian_pld`), with a certified lower
  bound (``with_lower=True``).

Provenance of the printed values (only used as the ``paper`` side of the comparisons): Table 1 rows
1-3 and the Fig. 4 caption as listed in ``tests/data/reference_values.json`` (ids ``P004-*``).
Table 1 mu_CLT/eps_CLT of row 1 and eps_CLT of row 2 are recomputed-only there (not printed values
recovered from the paper), so they are shown but not compared.  Rows 4-6 were not recovered.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from scipy.special import ndtr

from lastiterate.experiments._base import Comparison, Experiment, register_experiment
from lastiterate.notions.clt import clt_mu_poisson
from lastiterate.notions.gdp import gaussian_tradeoff, gdp_epsilon, gdp_mu
from lastiterate.notions.pld import poisson_subsampled_gaussian_pld
from lastiterate.notions.rdp import RdpCurve, rdp_to_epsilon, sampled_gaussian_rdp
from lastiterate.notions.tradeoff import epsilon_delta_tradeoff

N_TRAIN = 60000
BATCH = 256
P = BATCH / N_TRAIN
DELTA = 1e-5
#: the orders of the TensorFlow-Privacy MNIST tutorial (the "moments accountant" of BDLS20)
TF_ORDERS: tuple[float, ...] = tuple([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)))

# ----------------------------------------------------------------------------- printed values
#: Table 1 rows 1-3: (row, sigma, R, eta, epochs) -- the TF-tutorial hyper-parameters
TABLE1_SETTINGS: tuple[tuple[int, float, float, float, int], ...] = (
    (1, 1.3, 1.5, 0.25, 15),
    (2, 1.1, 1.0, 0.15, 60),
    (3, 0.7, 1.5, 0.25, 45),
)
#: printed Table 1 values (reference_values.json ``from_TF_tutorial_README`` /
#: ``confirmed_in_seed_text``), all with 2 decimals
TABLE1_PRINTED: dict[int, dict[str, float]] = {
    1: {"eps_MA": 1.19},
    2: {"eps_MA": 3.01, "mu_CLT": 0.57},
    3: {"mu_CLT": 1.13, "eps_CLT": 5.07, "eps_MA": 7.10},
}
#: printed test accuracies (%) of rows 1-3 (need training; shown in the notes only)
TABLE1_ACCURACY = {1: 95.0, 2: 96.6, 3: 97.0}
#: Section 4 text for row 2: minimal sum of type I and II errors, CLT (77.6%) and MA (9.4%)
ROW2_MIN_ERRORS_PRINTED = {"CLT": 0.776, "MA": 0.094}

#: Fig. 4: (sigma, epochs, printed sigma~, printed eps, printed mu_CLT(sigma~), decimals of sigma~)
FIG4_SETTINGS: tuple[tuple[float, int, float, float, float, int], ...] = (
    (1.3, 20, 1.06, 1.34, 0.35, 2),
    (0.7, 70, 0.638, 8.68, 1.78, 3),
)

PLOT_EPOCHS_FULL = (1, 2, 5, 10, 15, 20, 30, 45, 60, 70, 85, 100)
PLOT_EPOCHS_QUICK = (1, 5, 15, 30, 45, 60, 100)


# ----------------------------------------------------------------------------- accountants
def steps_for(epochs: float) -> int:
    """Number of DP-SGD steps of the TF tutorial / MA recipe: ``ceil(epochs n / B)``."""
    return math.ceil(epochs * N_TRAIN / BATCH)


def clt_T(epochs: float) -> float:
    """The paper's (real-valued) T = epochs / p used in eq. (3.1)."""
    return epochs * N_TRAIN / BATCH


def clt_mu(sigma: float, epochs: float) -> float:
    """ESTIMATE mu_CLT = p sqrt(T (e^{1/sigma^2} - 1)) (BDLS20 eq. 3.1)."""

    return clt_mu_poisson(P, 1.0 / sigma, clt_T(epochs))


def clt_epsilon(sigma: float, epochs: float, delta: float = DELTA) -> float:
    """ESTIMATE eps_CLT: the exact GDP duality (3.2) applied to mu_CLT."""

    return gdp_epsilon(delta, clt_mu(sigma, epochs))


def _sampled_gaussian_curve(sigma: float, epochs: float, orders: Any, direction: str):  # type: ignore[no-untyped-def]

    return RdpCurve.from_sampled_gaussian(P, sigma, steps_for(epochs), orders, direction=direction)


def ma_curve(sigma: float, epochs: float):  # type: ignore[no-untyped-def]
    """The MA RDP curve: TF-tutorial orders, mixture-first direction (as TF-Privacy computes it)."""
    return _sampled_gaussian_curve(sigma, epochs, TF_ORDERS, "mixture-first")


def ma_epsilon(sigma: float, epochs: float, delta: float = DELTA) -> float:
    """eps_MA: classic Mironov conversion ``min_a eps_R(a) + log(1/delta)/(a - 1)`` over TF
    orders."""

    return float(rdp_to_epsilon(ma_curve(sigma, epochs), delta, methods=("mironov",)).epsilon)


def ma_epsilon_absolute_series(sigma: float, epochs: float, delta: float = DELTA) -> float:
    """eps_MA with dp_accounting 0.6's absolute-value fractional-order series (looser; shown only
    to explain the 'recomputed' values of reference_values.json)."""

    rdp = sampled_gaussian_rdp(
        P, sigma, TF_ORDERS, direction="mixture-first", fractional_series="absolute"
    )
    curve = RdpCurve(TF_ORDERS, steps_for(epochs) * rdp)
    return float(rdp_to_epsilon(curve, delta, methods=("mironov",)).epsilon)


def rdp_best_epsilon(sigma: float, epochs: float, delta: float = DELTA) -> tuple[float, str]:
    """Modern RDP accounting: library default orders, both directions, best of all conversions."""

    conv = rdp_to_epsilon(_sampled_gaussian_curve(sigma, epochs, None, "max"), delta)
    return float(conv.epsilon), conv.method


@functools.lru_cache(maxsize=16)
def _one_step_pld(sigma: float):  # type: ignore[no-untyped-def]

    return poisson_subsampled_gaussian_pld(P, sigma, adjacency="add-remove", with_lower=True)


def pld_epsilon(sigma: float, epochs: float, delta: float = DELTA):  # type: ignore[no-untyped-def]
    """Rigorous epsilon of the exact composition (upper) with a certified lower bound: the
    add/remove Poisson-subsampled Gaussian PLD self-composed ``steps_for(epochs)`` times."""
    return _one_step_pld(sigma).self_compose(steps_for(epochs)).epsilon_with_error(delta)


def min_error_sum_gdp(mu: float) -> float:
    """min_alpha alpha + G_mu(alpha), attained at the symmetric point alpha = Phi(-mu/2)."""

    a = float(ndtr(-mu / 2.0))
    return a + float(gaussian_tradeoff(a, mu))


def min_error_sum_dp(epsilon: float, delta: float = DELTA) -> float:
    """min_alpha alpha + f_{eps,delta}(alpha), attained at the kink alpha = (1 - delta)/(1 +
    e^eps)."""

    a = (1.0 - delta) / (1.0 + math.exp(epsilon))
    return a + float(epsilon_delta_tradeoff(a, epsilon, delta))


def sigma_for_clt_mu(mu: float, epochs: float) -> float:
    """Invert eq. (3.1) in sigma: ``mu = p sqrt(T (e^{1/sigma^2} - 1))`` (BDLS20 (3.4))."""
    return 1.0 / math.sqrt(math.log1p(mu * mu / (P * P * clt_T(epochs))))


def figure4_calibration(sigma: float, epochs: float, delta: float = DELTA) -> dict[str, float]:
    """BDLS20 (3.3)/(3.4): eps_MA(sigma); mu~ with delta(eps_MA; mu~) = delta_MA(eps_MA) = delta;
    sigma~ with mu_CLT(sigma~) = mu~."""

    eps_ma = ma_epsilon(sigma, epochs, delta)
    mu_t = gdp_mu(eps_ma, delta)
    sig_t = sigma_for_clt_mu(mu_t, epochs)
    return {"eps_MA": eps_ma, "mu_tilde": mu_t, "sigma_tilde": sig_t}


# ----------------------------------------------------------------------------- Table 1
@register_experiment(
    "paper004-table1",
    "Bu-Dong-Long-Su 2020 Table 1 (MNIST rows 1-3): CLT vs moments accountant, plus PLD",
)
def table1(quick: bool = False) -> Experiment:
    rows: list[list[Any]] = []
    comps: list[Comparison] = []
    for row, sigma, R, eta, epochs in TABLE1_SETTINGS:
        mu = clt_mu(sigma, epochs)
        e_clt = clt_epsilon(sigma, epochs)
        e_ma = ma_epsilon(sigma, epochs)
        e_best, method = rdp_best_epsilon(sigma, epochs)
        pld = pld_epsilon(sigma, epochs)
        err_clt = min_error_sum_gdp(mu)
        err_ma = min_error_sum_dp(e_ma)
        rows.append(
            [
                row,
                sigma,
                R,
                eta,
                epochs,
                steps_for(epochs),
                mu,
                e_clt,
                e_ma,
                e_best,
                method,
                pld.upper,
                pld.lower,
                err_clt,
                err_ma,
            ]
        )
        ours = {"mu_CLT": mu, "eps_CLT": e_clt, "eps_MA": e_ma}
        for key, printed in TABLE1_PRINTED[row].items():
            comps.append(
                Comparison(
                    f"Table 1 row {row} {key} (sigma={sigma:g}, {epochs} epochs)",
                    printed,
                    ours[key],
                    2,
                )
            )
        if row == 2:
            comps.append(
                Comparison(
                    "Sec. 4 row 2 min type I+II error, CLT (mu_CLT)",
                    ROW2_MIN_ERRORS_PRINTED["CLT"],
                    err_clt,
                    3,
                )
            )
            comps.append(
                Comparison(
                    "Sec. 4 row 2 min type I+II error, MA (eps_MA, 1e-5)",
                    ROW2_MIN_ERRORS_PRINTED["MA"],
                    err_ma,
                    3,
                )
            )

    epochs_grid = PLOT_EPOCHS_QUICK if quick else PLOT_EPOCHS_FULL
    curves: dict[float, dict[str, list[float]]] = {}
    for _, sigma, _, _, _ in TABLE1_SETTINGS:
        curves[sigma] = {
            "CLT (estimate)": [clt_epsilon(sigma, e) for e in epochs_grid],
            "MA (classic RDP)": [ma_epsilon(sigma, e) for e in epochs_grid],
            "RDP best-of": [rdp_best_epsilon(sigma, e)[0] for e in epochs_grid],
            "PLD (exact composition)": [pld_epsilon(sigma, e).upper for e in epochs_grid],
        }

    def plot(ax: Any) -> None:
        # lazy: matplotlib (the plot extra) only when a figure is written
        from matplotlib.lines import Line2D

        colors = {1.3: "tab:blue", 1.1: "tab:orange", 0.7: "tab:green"}
        styles = {
            "CLT (estimate)": ":",
            "MA (classic RDP)": "--",
            "RDP best-of": "-.",
            "PLD (exact composition)": "-",
        }
        for sigma, by_method in curves.items():
            for method, eps in by_method.items():
                ax.plot(epochs_grid, eps, styles[method], color=colors[sigma], lw=1.4)
        for r in rows:
            ax.plot([r[4]], [r[8]], "o", color=colors[r[1]], ms=4)
            ax.plot([r[4]], [r[7]], "s", color=colors[r[1]], ms=4, mfc="none")
        handles = [Line2D([], [], color="k", ls=s, label=m) for m, s in styles.items()]
        handles += [Line2D([], [], color=c, lw=3, label=f"sigma={s:g}") for s, c in colors.items()]
        handles += [
            Line2D([], [], color="k", marker="o", ls="", label="Table 1 eps_MA"),
            Line2D([], [], color="k", marker="s", mfc="none", ls="", label="Table 1 eps_CLT"),
        ]
        ax.legend(handles=handles, fontsize=6, ncol=2)
        ax.set_xlabel("epochs (p = 256/60000)")
        ax.set_ylabel("epsilon at delta = 1e-5")

    r1, r2, r3 = rows
    acc = TABLE1_ACCURACY
    e_abs = ma_epsilon_absolute_series(TABLE1_SETTINGS[2][1], TABLE1_SETTINGS[2][4])
    return Experiment(
        name="paper004-table1",
        title="Paper 004 Table 1 (MNIST, p=256/60000, delta=1e-5): CLT estimate vs MA, with PLD",
        columns=[
            "row",
            "sigma",
            "R",
            "eta",
            "epochs",
            "steps",
            "mu_CLT_estimate",
            "eps_CLT_estimate",
            "eps_MA_classic",
            "eps_RDP_best",
            "RDP_best_method",
            "eps_PLD_upper",
            "eps_PLD_lower",
            "min_err_sum_CLT_estimate",
            "min_err_sum_MA",
        ],
        rows=rows,
        comparisons=comps,
        notes=[
            (
                "CLT columns are ESTIMATES (the privacy CLT is a limit, not a bound): mu_CLT = p "
                "sqrt(T (e^{1/sigma^2} - 1)) with the paper's real T = epochs n/B, eps_CLT = exact "
                "GDP "
                "duality (3.2).  In all three rows eps_CLT lies BELOW the certified lower bound of "
                "the "
                "exact composition (eps_PLD_lower), i.e. the CLT under-reports epsilon here "
                f"(row 1: {r1[7]:.4f} < {r1[12]:.4f}; row 2: {r2[7]:.4f} < {r2[12]:.4f}; "
                f"row 3: {r3[7]:.4f} < {r3[12]:.4f})."
            ),
            (
                "MA = RDP of the Poisson-sampled Gaussian (mixture-first, exact signed "
                "fractional-order series as TF-Privacy) at the TF-tutorial orders, steps = "
                "ceil(epochs n/B), classic Mironov conversion.  dp_accounting 0.6 sums the "
                "fractional-order series with absolute values (a looser bound; the source of the "
                "'recomputed' eps_MA in reference_values.json): for row 3 it gives "
                f"{e_abs:.4f} vs our {r3[8]:.4f}; both print as "
                f"{TABLE1_PRINTED[3]['eps_MA']:.2f}.  "
                "eps_RDP_best (default orders incl. 128..1024, max of both directions, best of "
                "Mironov/Bun-Steinke/BBG20/Asoodeh/KL-TV) and eps_PLD are extra columns, not in "
                "the "
                "paper; eps_PLD (add/remove, steps = ceil) is a valid upper bound, eps_PLD_lower a "
                "certified lower bound on the exact epsilon."
            ),
            (
                "Rounding case (row 2, Sec. 4 text): the printed minimal type I+II error "
                f"{ROW2_MIN_ERRORS_PRINTED['CLT']:.3f} is 2 Phi(-mu/2) at the ROUNDED mu = "
                f"{TABLE1_PRINTED[2]['mu_CLT']:.2f} "
                f"({min_error_sum_gdp(TABLE1_PRINTED[2]['mu_CLT']):.4f}); "
                f"the unrounded mu_CLT = {r2[6]:.4f} gives {r2[13]:.4f}, so this comparison is "
                "expected to differ at the printed precision."
            ),
            (
                f"Printed test accuracies (need training, not reproduced): row 1 {acc[1]:.1f}%, "
                f"row 2 {acc[2]:.1f}%, row 3 {acc[3]:.1f}%.  Printed values compared: row 1 eps_MA "
                "(TF README); row 2 eps_MA, mu_CLT, min error sums (seed text); row 3 mu_CLT, "
                "eps_CLT, eps_MA.  Row 1 mu/eps_CLT and row 2 eps_CLT are recomputed-only in "
                "reference_values.json (not compared).  Rows 4-6 not recovered."
            ),
            "Plot: epsilon vs epochs for the three sigmas (markers: the Table 1 cells).",
        ],
        plot=plot,
    )


# ----------------------------------------------------------------------------- Figure 4
@register_experiment(
    "paper004-figure4",
    "Bu-Dong-Long-Su 2020 Fig. 4: CLT-calibrated reduced noise sigma~ matching the MA (eps, delta)",
)
def figure4(quick: bool = False) -> Experiment:

    rows: list[list[Any]] = []
    comps: list[Comparison] = []
    for sigma, epochs, sig_t_printed, eps_printed, mu_printed, sig_dec in FIG4_SETTINGS:
        cal = figure4_calibration(sigma, epochs)
        mu_t_check = clt_mu_poisson(P, 1.0 / cal["sigma_tilde"], clt_T(epochs))
        mu_at_printed = clt_mu(sig_t_printed, epochs)
        eps_at_printed = gdp_epsilon(DELTA, mu_at_printed)
        pld_sigma = pld_epsilon(sigma, epochs)
        pld_tilde = pld_epsilon(sig_t_printed, epochs)
        rows.append(
            [
                sigma,
                epochs,
                steps_for(epochs),
                cal["eps_MA"],
                cal["mu_tilde"],
                cal["sigma_tilde"],
                mu_t_check,
                sig_t_printed,
                mu_at_printed,
                eps_at_printed,
                clt_mu(sigma, epochs),
                clt_epsilon(sigma, epochs),
                pld_sigma.upper,
                pld_tilde.upper,
                pld_tilde.lower,
            ]
        )
        tag = f"(sigma={sigma:g}, epoch {epochs})"
        comps += [
            Comparison(f"Fig. 4 eps_MA(sigma) {tag}", eps_printed, cal["eps_MA"], 2),
            Comparison(f"Fig. 4 sigma~ {tag}", sig_t_printed, cal["sigma_tilde"], sig_dec),
            Comparison(f"Fig. 4 mu_CLT(sigma~) = mu~ {tag}", mu_printed, cal["mu_tilde"], 2),
            Comparison(
                f"Fig. 4 eps_CLT(printed sigma~={sig_t_printed:g}) {tag}",
                eps_printed,
                eps_at_printed,
                2,
            ),
        ]

    def plot(ax: Any) -> None:

        alpha = np.concatenate([np.linspace(0.0, 0.02, 401), np.linspace(0.02, 1.0, 981)[1:]])
        colors = ("tab:blue", "tab:red")
        for color, r in zip(colors, rows):
            sigma, epochs, _, e_ma, mu_t, sig_t = r[:6]
            ax.plot(
                alpha,
                epsilon_delta_tradeoff(alpha, e_ma, DELTA),
                "--",
                color=color,
                lw=1.2,
                label=f"MA sigma={sigma:g}, ep {epochs}: ({e_ma:.3f}, 1e-5)-DP",
            )
            ax.plot(
                alpha,
                gaussian_tradeoff(alpha, mu_t),
                "-",
                color=color,
                lw=1.6,
                label=f"CLT sigma~={sig_t:.3f}: G_{{{mu_t:.3f}}} (estimate)",
            )
            ax.plot(
                alpha,
                gaussian_tradeoff(alpha, r[10]),
                ":",
                color=color,
                lw=1.2,
                label=f"CLT sigma={sigma:g}: G_{{{r[10]:.3f}}} (estimate)",
            )
        ax.plot([0, 1], [1, 0], color="0.7", lw=0.8, label="Id (perfect privacy)")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("type I error")
        ax.set_ylabel("type II error")
        ax.legend(fontsize=5.5)

    r13, r07 = rows
    return Experiment(
        name="paper004-figure4",
        title=(
            "Paper 004 Fig. 4: noise sigma~ calibrated by the CLT to the MA (eps, 1e-5) guarantee"
        ),
        columns=[
            "sigma",
            "epochs",
            "steps",
            "eps_MA_classic",
            "mu_tilde",
            "sigma_tilde",
            "mu_CLT(sigma_tilde)",
            "sigma_tilde_printed",
            "mu_CLT(sigma_tilde_printed)",
            "eps_CLT_estimate(sigma_tilde_printed)",
            "mu_CLT_estimate(sigma)",
            "eps_CLT_estimate(sigma)",
            "eps_PLD_upper(sigma)",
            "eps_PLD_upper(sigma_tilde_printed)",
            "eps_PLD_lower(sigma_tilde_printed)",
        ],
        rows=rows,
        comparisons=comps,
        notes=[
            (
                "Recipe (BDLS20 (3.3)/(3.4)): eps_MA(sigma) by the MA recipe (TF orders, classic "
                "Mironov, steps = ceil); mu~ = largest mu with delta(eps_MA; mu) = 1e-5 (gdp_mu); "
                "sigma~ solves mu~ = p sqrt(T (e^{1/sigma~^2} - 1)) with T = epochs n/B.  "
                "By construction eps_CLT(sigma~) = eps_MA.  All CLT values are ESTIMATES."
            ),
            (
                f"Rounding case sigma = 1.3, epoch 20: the MA recipe gives eps_MA = {r13[3]:.4f}, "
                f"which rounds to {r13[3]:.2f}; the caption prints {FIG4_SETTINGS[0][3]:.2f} "
                "(truncated, or the CLT value at the printed sigma~ = "
                f"{r13[7]:g}, eps_CLT = {r13[9]:.4f}, quoted for both).  sigma~ = {r13[5]:.4f} and "
                f"mu~ = {r13[4]:.4f} agree with the printed {r13[7]:g} and "
                f"{FIG4_SETTINGS[0][4]:.2f}."
            ),
            (
                f"Rounding case sigma = 0.7, epoch 70: eps_MA = {r07[3]:.4f} -> "
                f"{FIG4_SETTINGS[1][3]:.2f} agrees (dp_accounting's absolute-value fractional "
                "series "
                f"gives {ma_epsilon_absolute_series(0.7, 70):.4f}, also "
                f"{FIG4_SETTINGS[1][3]:.2f}); "
                f"sigma~ = {r07[5]:.5f} and mu~ = {r07[4]:.4f} agree with the printed {r07[7]:g} "
                "and "
                f"{FIG4_SETTINGS[1][4]:.2f}; but the paper trained with the ROUNDED sigma~ = "
                f"{r07[7]:g}, whose CLT estimate is eps = {r07[9]:.4f} (mu = {r07[8]:.4f}), not "
                f"{FIG4_SETTINGS[1][3]:.2f}: the printed eps is the target eps_MA (= eps_CLT at "
                "the "
                "unrounded sigma~), so the eps_CLT(printed sigma~) comparison is expected to "
                "differ."
            ),
            (
                "Rigorous check (not in the paper): the exact composition (add/remove Poisson PLD) "
                f"of the reduced-noise runs gives eps in [{r13[14]:.4f}, {r13[13]:.4f}] for sigma~ "
                "= "
                f"{r13[7]:g} and [{r07[14]:.4f}, {r07[13]:.4f}] for sigma~ = {r07[7]:g}, ABOVE the "
                f"eps_MA = {r13[3]:.4f} and {r07[3]:.4f} the CLT calibration promises at delta = "
                "1e-5: "
                "the CLT under-reports, so sigma~ does not actually achieve the MA guarantee.  "
                "With "
                f"the original sigma the PLD gives {r13[12]:.4f} and {r07[12]:.4f}, below eps_MA."
            ),
            "Plot: tradeoff curves G_mu of the CLT against the (eps_MA, 1e-5)-DP curve of the MA.",
        ],
        plot=plot,
    )
