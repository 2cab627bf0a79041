"""``lastiterate reproduce logreg-digits``: paper 000 section 4.4 on scikit-learn's digits.

The analogue of Bok, Su, Altschuler (2024) section 4.4 (MNIST, regularised logistic regression),
run end to end by the library's own trainer on the 8x8 digits bundled with scikit-learn:

* regularised multinomial logistic regression (lambda = 0.005, no intercept), features
  standardised and rows clipped to R = C/sqrt(2) so that the per-example gradient never exceeds the
  clip norm C = 1 (the multinomial certificate needs an inactive clip, see
  :mod:`lastiterate.train.geometry`): m = 0.005, M = R^2/2 + lambda = 0.255;
* NoisyCGD (fixed balanced partition) and NoisySGD with uniform fixed-size batches, b = 144
  (l = 10 batches per epoch on n = 1437 training examples, b_min = 143), learning rate 1
  (c = 1 - eta lambda = 0.995), and noise sigma = 3/143 so that L/(b_min sigma) = 2/3 as in the
  paper's MNIST experiment;
* E = 50, 100, 200 epochs, several seeds (5; 2 with ``--quick``), accuracy mean and standard
  deviation over the seeds; epsilon at delta = 1e-5 of the best last-iterate bound ("ours"),
  Ye-Shokri's hidden-state RDP bound when it applies, and the tightest composition bound.

The privacy columns come from the Run the trainer built (identical for every seed).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from lastiterate.experiments._base import Experiment, markdown_table, register_experiment

DELTA = 1e-5
EPOCHS = (50, 100, 200)
LAMBDA = 0.005
CLIP = 1.0
R = CLIP / math.sqrt(2.0)
LR = 1.0
B = 144


def _train(
    algorithm: str, epochs: int, seed: int, data: Any, with_report: bool
) -> tuple[float, float, Any]:
    # lazy: torch (the train extra; seconds to import) only when this experiment runs
    from lastiterate.train.models import GLM
    from lastiterate.train.trainer import NoisyCGD, NoisySGD, evaluate

    n = data.n
    l = math.ceil(n / B)
    b_min = n // l
    sigma = 2 * CLIP / (b_min * (2.0 / 3.0))  # L/(b_min sigma) = 2/3
    model = GLM(data.n_features, data.n_classes, "multinomial-logistic")
    kw = {"lr": LR, "noise_std": sigma, "clip": CLIP, "l2": LAMBDA, "feature_norm": R, "seed": seed}
    if algorithm == "NoisyCGD":
        method: Any = NoisyCGD(model, batch_size=B, **kw)
    else:
        method = NoisySGD(model, batch_size=B, sampling="uniform", **kw)
    res = method.fit(data.X_train, data.y_train, epochs=epochs, account=with_report, delta=DELTA)
    test = evaluate(model, data.X_test, data.y_test, R)["accuracy"]
    train = evaluate(model, data.X_train, data.y_train, R)["accuracy"]
    if test is None or train is None:  # evaluate gives no accuracy on an empty split
        raise ValueError(
            f"digits split has an empty train or test set (n_test = {len(data.y_test)})"
        )
    return float(test), float(train), res


def _eps(report: Any, ids: tuple[str, ...]) -> tuple[float | None, str | None]:
    cands = [r for r in report.results if r.kind == "bound" and r.bound in ids]
    if not cands:
        return None, None
    r = min(cands, key=lambda r: r.epsilon)
    return float(r.epsilon), r.bound


@register_experiment(
    "logreg-digits",
    "paper 000 sec. 4.4 analogue: NoisyCGD / NoisySGD logistic regression on sklearn digits",
)
def logreg_digits(quick: bool) -> Experiment:
    # lazy: torch (the train extra; seconds to import) only when this experiment runs
    from lastiterate.train.data import load_dataset

    seeds = (0, 1) if quick else (0, 1, 2, 3, 4)
    data = load_dataset("digits", seed=0, feature_norm=R)
    rows: list[list[Any]] = []
    eps_rows: list[list[Any]] = []
    curves: dict[str, dict[str, list[tuple[int, float]]]] = {}
    setting: dict[str, Any] = {}
    for algorithm in ("NoisyCGD", "NoisySGD"):
        for E in EPOCHS:
            tests, trains = [], []
            report = None
            for k, seed in enumerate(seeds):
                test, train, res = _train(algorithm, E, seed, data, with_report=(k == 0))
                tests.append(test)
                trains.append(train)
                if k == 0:
                    report = res.report
                    setting[algorithm] = res.run.setting()
            sd = statistics.stdev(tests) if len(tests) > 1 else 0.0
            sd_tr = statistics.stdev(trains) if len(trains) > 1 else 0.0
            if report is None:  # the first seed's run is fitted with account=True
                raise RuntimeError(f"{algorithm}, {E} epochs: the accounted run returned no report")
            ours = report.best
            ys, _ = _eps(report, ("hidden-state-rdp",))
            comp, comp_id = _eps(report, ("gdp-composition", "pld-composition", "rdp-composition"))
            if comp is None:
                raise RuntimeError(
                    f"{algorithm}, {E} epochs: the report has no composition bound to compare with"
                )
            rows.append(
                [
                    algorithm,
                    E,
                    report.run.T,
                    len(seeds),
                    f"{statistics.mean(tests):.4f}",
                    f"{sd:.4f}",
                    f"{statistics.mean(trains):.4f}",
                    f"{sd_tr:.4f}",
                ]
            )
            eps_rows.append(
                [
                    algorithm,
                    E,
                    report.run.T,
                    round(ours.epsilon, 3),
                    ours.bound,
                    "n/a" if ys is None else round(ys, 3),
                    round(comp, 3),
                    comp_id,
                ]
            )
            c = curves.setdefault(
                algorithm, {"ours": [], "composition": [], "hidden-state-rdp": []}
            )
            c["ours"].append((E, ours.epsilon))
            c["composition"].append((E, comp))
            if ys is not None:
                c["hidden-state-rdp"].append((E, ys))

    s = setting["NoisyCGD"]
    notes = [
        "## Privacy of the released final model (epsilon at delta = 1e-5, replace-one "
        "adjacency)\n\n"
        + markdown_table(
            [
                "algorithm",
                "epochs",
                "steps",
                "ours",
                "ours: bound",
                "Ye-Shokri RDP",
                "composition",
                "composition: bound",
            ],
            eps_rows,
        ),
        (
            f"Setting: sklearn digits, n = {s['n']} training / {len(data.y_test)} test examples "
            "(split seed 0), "
            f"d = {data.n_features}, 10 classes; features standardised, rows clipped to R = "
            f"C/sqrt(2) = {R:.4f}; "
            f"multinomial logistic regression, lambda = {LAMBDA}, clip C = {CLIP} (never active: "
            "sup ||grad|| = sqrt(2) R = C), "
            f"lr = {LR}, b = {B} (l = {s['batches_per_epoch']}, b_min = {s['min_batch_size']}), "
            f"sigma = {s['noise_std']:.6g} "
            f"(L/(b_min sigma) = {s['per_step_mu']:.4g}), certified m = {s['strong_convexity']}, M "
            f"= {s['smoothness']:.4g}, "
            f"c = {s['contraction']:.4g}. Seeds {list(seeds)} (batches, noise). NoisySGD draws "
            "uniform fixed-size batches."
        ),
        (
            "'ours' is the best valid bound of `lastiterate account` for the Run the trainer "
            "executed; "
            "Ye-Shokri RDP is `hidden-state-rdp` (n/a where no such theorem applies); composition "
            "is the tightest of "
            "gdp-/pld-/rdp-composition (what releasing every iterate costs)."
        ),
    ]

    def plot(ax: Any) -> None:
        styles = {"ours": "-", "hidden-state-rdp": ":", "composition": "--"}
        colors = {"NoisyCGD": "C0", "NoisySGD": "C1"}
        for alg, cs in curves.items():
            for kind, pts in cs.items():
                if pts:
                    ax.plot(
                        [p[0] for p in pts],
                        [p[1] for p in pts],
                        styles[kind],
                        marker="o",
                        color=colors[alg],
                        label=f"{alg}: {kind}",
                    )
        ax.set_xlabel("epochs E")
        ax.set_ylabel("epsilon of the final model (delta = 1e-5)")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)

    return Experiment(
        name="logreg-digits",
        title="Logistic regression on sklearn digits: accuracy and last-iterate epsilon",
        columns=[
            "algorithm",
            "epochs",
            "steps",
            "seeds",
            "test accuracy (mean)",
            "test accuracy (sd)",
            "train accuracy (mean)",
            "train accuracy (sd)",
        ],
        rows=rows,
        notes=notes,
        plot=plot,
    )
