"""pytest configuration for the repository root: nbval runs every notebook except the exercises.

Exercise notebooks fail by design (their check cells raise ``ExerciseFailed`` until the learner fills in
the TODO), so nbval must not collect them. ``tests/test_exercises.py`` runs them instead and asserts that
every check fails as shipped; the solutions in ``notebooks/solutions/`` run under nbval and must pass.
(This file lives at the root, not in notebooks/, so learners don't see it next to the notebooks.)

Where cuTile does not import (macOS has no cuda-tile wheels), ``make test`` runs what can run and skips the
rest, with the reason: the kernel notebooks (their first code cell calls ``require_cutile()``), test modules
that fail to import for want of ``cuda.tile``, tests that raise ``CuTileUnavailable`` and tests marked
``cutile`` (they need cuTile in a subprocess). Where cuTile
imports (CI), none of this applies: a missing ``cuda.tile`` there is an error like any other.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mamba2_tutorial.platforms import (
    cutile_available,
    cutile_unavailable_reason,
    is_cutile_import_error,
    notebook_requires_cutile,
)

collect_ignore_glob = ["notebooks/exercises/*"]

_CUTILE_IMPORT_ERRORS = ("No module named 'cuda.tile", "No module named 'cuda'", "CuTileUnavailable")


def _skip_reason() -> str:
    return f"needs cuTile: {cutile_unavailable_reason()}"


def pytest_collection_modifyitems(config, items):
    if cutile_available():
        return
    skip = pytest.mark.skip(reason=_skip_reason())
    kernel_notebooks: dict[Path, bool] = {}
    for item in items:
        if "cutile" in item.keywords:
            item.add_marker(skip)
        path = Path(item.path)
        if path.suffix == ".ipynb":
            if path not in kernel_notebooks:
                kernel_notebooks[path] = notebook_requires_cutile(path)
            if kernel_notebooks[path]:
                item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    if (report.failed and isinstance(collector, pytest.Module) and not cutile_available()
            and any(text in str(report.longrepr) for text in _CUTILE_IMPORT_ERRORS)):
        report.outcome = "skipped"
        report.longrepr = (str(collector.path), 0, f"Skipped: {_skip_reason()}")
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    excinfo = call.excinfo
    if (report.failed and excinfo is not None and isinstance(item, pytest.Function) and not cutile_available()
            and is_cutile_import_error(excinfo.value)):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {_skip_reason()}")
    return report
