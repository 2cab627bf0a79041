"""The package-top API: every exported name resolves, importing it (or the CLI's help) is cheap,
and every public callable has Args/Returns/Raises docstrings (issue 12)."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import textwrap
from typing import Any

import pytest

import lastiterate as li


def test_every_exported_name_resolves() -> None:
    for name in li.__all__:
        assert getattr(li, name) is not None, name


def test_readme_python_example_runs() -> None:
    run = li.Run(
        algorithm="cgd",
        n=60000,
        batch_size=1500,
        epochs=200,
        lr=0.05,
        noise_std=0.01,
        sensitivity=10.0,
        strong_convexity=0.002,
        smoothness=32.5,
    )
    report = li.account(run, delta=1e-5)
    assert report.best is not None and report.best.bound == "shifted-interpolation"
    assert round(report.best.epsilon, 3) == 7.579  # paper 000 section 4.4, also in the README
    assert "Releasing only the final model" in report.format()


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(out.split())


def test_import_and_help_do_not_load_heavy_libraries() -> None:
    heavy = {"torch", "scipy", "numpy", "matplotlib", "dp_accounting"}
    assert not heavy & _modules_after("import lastiterate")
    help_modules = _modules_after(
        "import contextlib, io\nfrom lastiterate.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    main([])"
    )
    assert not {"torch", "scipy", "matplotlib"} & help_modules


def test_all_lists_exactly_the_exports() -> None:
    assert set(li.__all__) == set(li._EXPORTS) | {"NotApplicable", "ParameterError", "__version__"}


def test_docstring_examples_of_the_public_api_run() -> None:
    import doctest

    import lastiterate.accountant

    result = doctest.testmod(lastiterate.accountant)
    assert result.attempted >= 1 and result.failed == 0


# ---------------------------------------------------------------- docstrings of the public API
#: the public callables whose docstrings are checked: the package top, the scikit-learn estimators
#: and every export of lastiterate.train (its ``__all__``)


def _missing_sections(func: Any) -> list[str]:
    """The Google docstring sections ``func`` lacks: ``Args:`` when it takes arguments,
    ``Returns:`` when it returns something, ``Raises:`` when its body raises or validates."""
    doc = inspect.getdoc(func) or ""
    if not doc:
        return ["docstring"]
    sig = inspect.signature(func)
    missing = []
    if any(name not in ("self", "cls") for name in sig.parameters) and "Args:" not in doc:
        missing.append("Args:")
    if sig.return_annotation not in (inspect.Signature.empty, None, "None") and (
        "Returns:" not in doc
    ):
        missing.append("Returns:")
    body = textwrap.dedent(inspect.getsource(func))
    if re.search(r"\braise\b|\bcheck_\w+\(", body) and "Raises:" not in doc:
        missing.append("Raises:")
    return missing


def _class_gaps(qualname: str, cls: type) -> dict[str, list[str]]:
    gaps: dict[str, list[str]] = {}
    doc = inspect.getdoc(cls) or ""
    init_params = [n for n in inspect.signature(cls).parameters if n not in ("self", "cls")]
    if init_params and not any(s in doc for s in ("Args:", "Attributes:", "Parameters\n")):
        gaps[qualname] = ["Args: or Attributes:"]
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            if not (member.__doc__ or "").strip():
                gaps[f"{qualname}.{name}"] = ["docstring"]
            continue
        func = getattr(member, "__func__", member)
        if inspect.isfunction(func):
            missing = _missing_sections(func)
            if missing:
                gaps[f"{qualname}.{name}"] = missing
    return gaps


def _public_api() -> dict[str, Any]:
    pytest.importorskip("sklearn")
    import lastiterate.configuration as cf
    import lastiterate.sklearn as sk
    import lastiterate.train as tr

    api = {f"lastiterate.{n}": getattr(li, n) for n in li.__all__ if n != "__version__"}
    api.update({f"lastiterate.sklearn.{n}": getattr(sk, n) for n in sk.__all__})
    api.update({f"lastiterate.configuration.{n}": getattr(cf, n) for n in cf.__all__})
    api.update({f"lastiterate.train.{n}": getattr(tr, n) for n in tr.__all__})
    return api


def _api_gaps(api: dict[str, Any]) -> dict[str, list[str]]:
    gaps: dict[str, list[str]] = {}
    for qualname, obj in api.items():
        if inspect.isclass(obj):
            if issubclass(obj, Exception):
                continue
            gaps.update(_class_gaps(qualname, obj))
        elif callable(obj):
            missing = _missing_sections(obj)
            if missing:
                gaps[qualname] = missing
    return gaps


def test_public_api_has_args_returns_raises_docstrings() -> None:
    assert _api_gaps(_public_api()) == {}


def test_docstring_check_catches_a_missing_section() -> None:
    def undocumented(x: float) -> float:
        """Half of x."""
        if x < 0:
            raise ValueError(x)
        return x / 2

    def documented(x: float) -> float:
        """Half of x.

        Args:
            x: a number >= 0.

        Returns:
            x / 2.

        Raises:
            ValueError: x < 0.
        """
        if x < 0:
            raise ValueError(x)
        return x / 2

    assert _api_gaps({"undocumented": undocumented}) == {
        "undocumented": ["Args:", "Returns:", "Raises:"]
    }
    assert _api_gaps({"documented": documented}) == {}

    class Undocumented:
        """A class whose constructor arguments, property and method are not documented."""

        def __init__(self, a: int) -> None:
            self.a = a

        @property
        def double(self) -> int:
            return 2 * self.a

        def plus(self, x: int) -> int:
            """a + x."""
            return self.a + x

    assert _api_gaps({"U": Undocumented}) == {
        "U": ["Args: or Attributes:"],
        "U.double": ["docstring"],
        "U.plus": ["Args:", "Returns:"],
    }
