"""``lastiterate reproduce paper001-figure1``: Chourasia, Ye, Shokri (2021), Figure 1.

Renyi privacy loss of full-batch noisy GD over K iterations: Corollary 1 (bold lines in the paper)
against the composition baseline of Thm 1 (dashed), for RDP orders alpha in {10, 20, 30} and strong
convexity lambda in {1, 2, 4}; beta = 4, S_g = 4, n = 5000, eta = 0.02, sigma' = 0.02 (the paper's
noise, as OCR'd; canonical sigma = sigma' sqrt(2/eta) = 0.2).  The paper prints no numbers; the
curves are recomputed by building the Run and calling the registered ``langevin-lsi`` bound
(Corollary 1 value at each order) and :func:`~lastiterate.bounds.langevin.composition_baseline_rdp`.
"""

from __future__ import annotations

from typing import Any

from lastiterate.bounds import Query
from lastiterate.bounds.langevin import (
    composition_baseline_rdp,
    langevin_corollary1,
    sigma_canonical_from_prime,
)
from lastiterate.experiments._base import Experiment, register_experiment
from lastiterate.run import Run

ALPHAS = (10.0, 20.0, 30.0)
LAMBDAS = (1.0, 2.0, 4.0)
BETA = 4.0
S_G = 4.0
N = 5000
ETA = 0.02
SIGMA_PRIME = 0.02
K_FULL = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
K_QUICK = (1, 10, 100, 1000, 10000)


def fig1_run(lam: float, K: int) -> Run:
    """The Fig. 1 run in canonical units (sigma = sigma' sqrt(2/eta), L = S_g, m = lambda, M =
    beta)."""
    return Run(
        algorithm="gd",
        n=N,
        lr=ETA,
        steps=K,
        noise_std=sigma_canonical_from_prime(SIGMA_PRIME, ETA),
        sensitivity=S_G,
        strong_convexity=lam,
        smoothness=BETA,
    )


@register_experiment(
    "paper001-figure1", "Chourasia-Ye-Shokri 2021 Fig. 1: Corollary 1 vs composition over K"
)
def figure1(quick: bool = False) -> Experiment:
    Ks = K_QUICK if quick else K_FULL
    query = Query(delta=1e-5, orders=ALPHAS)
    rows: list[list[Any]] = []
    for lam in LAMBDAS:
        for K in Ks:
            run = fig1_run(lam, K)
            res = langevin_corollary1(run, query)
            curve = dict(res.rdp or ())
            for alpha in ALPHAS:
                ours = float(curve[alpha])
                base = composition_baseline_rdp(alpha, L=run.L, n=run.n, sigma=run.sigma, T=run.T)
                rows.append([alpha, lam, K, ours, base, base / ours])

    def plot(ax: Any) -> None:
        colors = {10.0: "tab:blue", 20.0: "tab:orange", 30.0: "tab:green"}
        styles = {1.0: "-", 2.0: "--", 4.0: ":"}
        for alpha in ALPHAS:
            for lam in LAMBDAS:
                pts = [(r[2], r[3], r[4]) for r in rows if r[0] == alpha and r[1] == lam]
                ks = [p[0] for p in pts]
                ax.plot(
                    ks,
                    [p[1] for p in pts],
                    styles[lam],
                    color=colors[alpha],
                    lw=2,
                    label=f"Cor. 1, alpha={alpha:g}, lambda={lam:g}",
                )
            comp_pts = [(r[2], r[4]) for r in rows if r[0] == alpha and r[1] == LAMBDAS[0]]
            ax.plot(
                [p[0] for p in comp_pts],
                [p[1] for p in comp_pts],
                "-.",
                color=colors[alpha],
                lw=1,
                label=f"composition, alpha={alpha:g}",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("iterations K")
        ax.set_ylabel("RDP epsilon")
        ax.legend(fontsize=5, ncol=2)

    return Experiment(
        name="paper001-figure1",
        title=(
            "Paper 001 Fig. 1: RDP of noisy GD, Corollary 1 (langevin-lsi) vs composition (Thm 1)"
        ),
        columns=[
            "alpha",
            "lambda",
            "K",
            "corollary1_rdp",
            "composition_rdp",
            "composition/corollary1",
        ],
        rows=rows,
        notes=[
            (
                "Setting: beta=4, S_g=4, n=5000, eta=0.02, sigma'=0.02 (OCR; canonical sigma=0.2). "
                "Corollary 1 plateaus at alpha S_g^2/(lambda sigma'^2 n^2); the composition "
                "baseline grows linearly in K."
            ),
            "Corollary 1 assumes theta_0 ~ Proj_C(N(0, 2 sigma'^2/lambda I)) (Lemma 5).",
        ],
        plot=plot,
    )
