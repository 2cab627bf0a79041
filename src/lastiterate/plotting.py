"""Plots of account reports (matplotlib, imported lazily; install the ``plot`` extra)."""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from lastiterate.notions.tradeoff import epsilon_delta_tradeoff


def plot_report(report: Any, path: Path | str) -> Path:
    """Draw the tradeoff curve of every result of ``report`` (type I error alpha, log scale, vs type
    II error).

    GDP results are drawn exactly (G_mu); results known only through (epsilon, delta) — RDP and PLD
    results — are drawn as the tradeoff curve of the reported (epsilon, delta) pair.  Higher curves
    mean more privacy; the diagonal 1 - alpha is perfect privacy.
    """
    try:
        import matplotlib
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
        raise ModuleNotFoundError(
            "plotting needs matplotlib: pip install 'lastiterate[plot]'"
        ) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    alpha = np.geomspace(1e-40, 1.0, 800)
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    ax.plot(alpha, 1 - alpha, color="0.7", lw=1, ls=":", label="perfect privacy")
    best = report.best
    for r in report.results:
        if r.tradeoff is not None:
            beta = r.tradeoff(alpha)
            how = f"mu={r.mu:.3g}" if r.mu is not None else ""
        else:
            beta = epsilon_delta_tradeoff(alpha, r.epsilon, r.delta)
            how = f"({r.epsilon:.3g}, {r.delta:.2g})-DP"
        style = "--" if r.kind == "estimate" else "-"
        width = 2.6 if r is best else 1.3
        ax.plot(alpha, beta, ls=style, lw=width, label=f"{r.bound} [{r.kind}] {how}")
    ax.set_xscale("log")
    ax.set_xlabel("type I error alpha (log scale: strong guarantees differ at tiny alpha)")
    ax.set_ylabel("type II error beta")
    ax.set_xlim(alpha[0], 1)
    ax.set_ylim(0, 1.02)
    ax.set_title(
        "Tradeoff curves of the released last iterate\n(higher = more private; thick = best bound)",
        fontsize=9,
    )
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    out = save_png(fig, path, dpi=120)
    plt.close(fig)
    return out


def _pyplot() -> Any:
    """matplotlib.pyplot with the Agg backend (no display), imported on first use."""
    try:
        import matplotlib
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
        raise ModuleNotFoundError(
            "plotting needs matplotlib: pip install 'lastiterate[plot]'"
        ) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: the ``Software`` text chunk of every PNG lastiterate writes: an earlier figure is recognised
#: by it and replaced, any other existing file is refused (:func:`check_png_path`)
PNG_SOFTWARE = "lastiterate"


def save_png(fig: Any, path: Path | str, *, dpi: int, param: str = "plot") -> Path:
    """Write the matplotlib figure ``fig`` to ``path`` as a PNG tagged ``Software: lastiterate
    VERSION``, atomically (temporary file + replace, no temporary left behind:
    :func:`lastiterate.train.ledger.write_private_file`; mode 0644 less the umask).  An
    operating-system error raises :class:`~lastiterate.errors.ParameterError` naming ``param``."""
    from lastiterate import __version__
    from lastiterate.train.ledger import write_private_file

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": f"{PNG_SOFTWARE} {__version__}"})
    write_private_file(path, buf.getvalue(), mode=0o644, param=param)
    return Path(path)


def png_why_not(fh: BinaryIO) -> str | None:
    """None when the open file is a PNG that lastiterate wrote (:data:`PNG_SOFTWARE`), else why
    not.  Pillow reads the header chunks only (no pixel is decoded)."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Pillow's decompression-bomb warning: not decoded
            with Image.open(fh, formats=["PNG"]) as im:
                software = str(im.info.get("Software", ""))
    except Exception:  # noqa: BLE001 - Pillow raises many types on a file that is no PNG
        return "not a PNG file"
    return None if software.startswith(PNG_SOFTWARE) else "a PNG that lastiterate did not write"


def check_png_path(path: Path | str) -> Path:
    """``path`` as the PNG a command will write: refused (ParameterError ``plot``) before any work
    when it does not end in .png, is a directory, its folder does not exist, or it is an existing
    file that is not a lastiterate plot (:func:`png_why_not`; an earlier plot is replaced)."""
    from lastiterate.errors import ParameterError
    from lastiterate.train.ledger import refuse_foreign_output

    out = Path(path)
    if out.suffix.lower() != ".png":
        raise ParameterError("plot", str(path), "must be a file name ending in .png")
    if out.is_dir():
        raise ParameterError("plot", str(path), "is a directory, must be a .png file")
    if not out.parent.is_dir():
        raise ParameterError("plot", str(path), "must be in an existing directory")
    refuse_foreign_output(out, "plot", "lastiterate plot", png_why_not)
    return out


def audit_point(label: str, test: dict[str, Any]) -> dict[str, Any]:
    """An empirical tradeoff point (FPR, FNR) of an audit's threshold test with its intervals.

    ``test``: :meth:`lastiterate.audit.stats.TestOutcome.to_json` (``fpr``, ``fnr``, their
    one-sided Clopper-Pearson upper bounds ``fpr_u``, ``fnr_u``, the sample sizes ``n_d``,
    ``n_dprime`` and ``alpha_per_test``); the lower ends are the Clopper-Pearson lower bounds at
    the same level (``fpr_l`` / ``fnr_l`` when given).  A claim is refuted when the upper corner
    (fpr_u, fnr_u) lies below the claimed tradeoff curve.
    """
    from lastiterate.audit.stats import clopper_pearson_lower

    a = float(test["alpha_per_test"]) / 2
    fpr_l = test.get("fpr_l")
    fnr_l = test.get("fnr_l")
    if fpr_l is None:
        fpr_l = float(clopper_pearson_lower(round(test["fpr"] * test["n_d"]), test["n_d"], a))
    if fnr_l is None:
        fnr_l = float(
            clopper_pearson_lower(round(test["fnr"] * test["n_dprime"]), test["n_dprime"], a)
        )
    return {
        "label": label,
        "fpr": float(test["fpr"]),
        "fnr": float(test["fnr"]),
        "fpr_l": float(fpr_l),
        "fpr_u": float(test["fpr_u"]),
        "fnr_l": float(fnr_l),
        "fnr_u": float(test["fnr_u"]),
    }


def plot_audit_tradeoff(
    path: Path | str,
    *,
    points: Sequence[dict[str, Any]],
    curves: Sequence[tuple[str, Any, Any]] = (),
    claim_mu: float | None = None,
    claim_eps: float | None = None,
    delta: float | None = None,
    claim_label: str = "claim",
    title: str = "Audit: empirical tradeoff points against the claim",
) -> Path:
    """Empirical tradeoff points of an audit against the claimed tradeoff curve (PNG).

    ``points``: :func:`audit_point` dicts, drawn at (FPR, FNR) with Clopper-Pearson intervals;
    ``curves``: (label, FPR array, FNR array) empirical curves (e.g. an attack's ROC as
    FNR = 1 - TPR); the claim: the GDP curve G_mu when ``claim_mu`` is given and the
    (epsilon, delta) curve when ``claim_eps`` and ``delta`` are.  Linear axes: the lower-left
    region is where leakage shows; a point whose upper corner lies below a claimed curve refutes it.
    """
    from lastiterate.notions.gdp import gaussian_tradeoff

    plt = _pyplot()
    alpha = np.concatenate([np.geomspace(1e-9, 1e-3, 200), np.linspace(1e-3, 1.0, 600)])
    fig, ax = plt.subplots(figsize=(6.0, 5.6))
    ax.plot([0, 1], [1, 0], color="0.7", lw=1, ls=":", label="perfect privacy (random guess)")
    if claim_mu is not None and math.isfinite(claim_mu):
        ax.plot(
            alpha,
            gaussian_tradeoff(alpha, claim_mu),
            lw=2.2,
            color="C0",
            label=f"{claim_label}: G_mu, mu = {claim_mu:.4g}",
        )
    if claim_eps is not None and delta is not None and math.isfinite(claim_eps):
        ax.plot(
            alpha,
            epsilon_delta_tradeoff(alpha, claim_eps, delta),
            lw=1.6,
            ls="--",
            color="C3",
            label=f"{claim_label}: ({claim_eps:.4g}, {delta:.2g})-DP",
        )
    for i, (label, fpr, fnr) in enumerate(curves):
        ax.plot(
            np.asarray(fpr), np.asarray(fnr), lw=1, alpha=0.8, color=f"C{(i + 4) % 10}", label=label
        )
    for i, p in enumerate(points):
        ax.errorbar(
            [p["fpr"]],
            [p["fnr"]],
            xerr=[[p["fpr"] - p["fpr_l"]], [p["fpr_u"] - p["fpr"]]],
            yerr=[[p["fnr"] - p["fnr_l"]], [p["fnr_u"] - p["fnr"]]],
            fmt="o",
            ms=5,
            capsize=3,
            color=f"C{(i + 1) % 10}",
            label=p["label"],
        )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("false positive rate (type I error)")
    ax.set_ylabel("false negative rate (type II error)")
    ax.set_title(
        title
        + "\n(a claim is refuted when a point's upper corner (FPR_u, FNR_u) lies below its curve)",
        fontsize=9,
    )
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    out = save_png(fig, path, dpi=110)
    plt.close(fig)
    return out


def plot_canary_audit(result: Any, path: Path | str) -> Path:
    """The canary audit's chosen tests (mu test, eps test; FPR, FNR with Clopper-Pearson
    intervals) against the claimed tradeoff curves (:class:`~lastiterate.audit.canary.
    CanaryAuditResult`)."""
    points = [audit_point("canary: the test of mu_lb (held-out half)", result.test)]
    eps_test = result.details.get("eps_test")
    if eps_test is not None and eps_test != result.test:
        points.append(audit_point("canary: the test of eps_lb (held-out half)", eps_test))
    return plot_audit_tradeoff(
        path,
        points=points,
        claim_mu=result.claim_mu,
        claim_eps=result.claim_eps,
        delta=result.delta,
        claim_label=f"claim ({result.claim_bound})" if result.claim_bound else "claim",
        title=f"Canary audit ({result.canary} canary, {result.runs} models per world): "
        f"{result.verdict}",
    )


def plot_mia_audit(result: Any, path: Path | str) -> Path:
    """Membership inference (:class:`~lastiterate.audit.mia.MIAResult`): each attack's ROC on
    the private model as a tradeoff curve (FNR = 1 - TPR), the held-out test behind each lower
    bound with its intervals, and the claimed tradeoff curves; the baseline's best ROC for
    comparison."""
    curves: list[tuple[str, Any, Any]] = []
    points = []
    for name, a in result.private.items():
        curves.append((f"private {name} (AUC {a.auc:.3f})", a.fpr, 1 - np.asarray(a.tpr)))
        points.append(audit_point(f"private {name}: held-out test of mu_lb", a.test_mu))
    best = max(result.baseline.values(), key=lambda a: a.auc)
    curves.append(
        (
            f"non-private baseline {best.attack} (AUC {best.auc:.3f})",
            best.fpr,
            1 - np.asarray(best.tpr),
        )
    )
    return plot_audit_tradeoff(
        path,
        points=points,
        curves=curves,
        claim_mu=result.claim_mu,
        claim_eps=result.claim_eps,
        delta=result.delta,
        claim_label=f"claim ({result.claim_bound})" if result.claim_bound else "claim",
        title=f"Membership inference ({result.members} members, {result.shadows} shadows): "
        f"{result.verdict}",
    )
