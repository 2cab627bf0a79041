"""The package-top API: every exported name resolves, and importing it (or the
CLI's help) is cheap."""

from __future__ import annotations

import subprocess
import sys

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
