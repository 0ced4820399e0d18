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

``make test`` runs pytest on every core (pytest-xdist, ``--dist loadgroup``, scheduled here). The cells of one
notebook share one Jupyter kernel and run in order, and a module-scoped fixture (a JupyterLab server, a
benchmark run) is built once per process, so each notebook, and each test module that defines such a fixture,
is one unit that runs whole on one worker; every other test is handed out alone. Each worker's PyTorch uses
one thread when there are as many workers as cores. Every run ends with its slowest notebooks, each cell
added up.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections import defaultdict
from pathlib import Path

import pytest

from mamba2_tutorial.runtime.platforms import (
    cutile_available,
    cutile_unavailable_reason,
    is_cutile_import_error,
    notebook_requires_cutile,
)

collect_ignore_glob = ["notebooks/exercises/*"]

_CUTILE_IMPORT_ERRORS = ("No module named 'cuda.tile", "No module named 'cuda'", "CuTileUnavailable")


def _skip_reason() -> str:
    return f"needs cuTile: {cutile_unavailable_reason()}"


def _one_thread_per_worker() -> None:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and workers >= (os.cpu_count() or 1):
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # also for the notebooks' kernels, started later
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


_one_thread_per_worker()


_FIXTURE_SCOPE = re.compile(r"""scope\s*=\s*["'](module|class|package)["']""")


@functools.cache
def _whole(path: str) -> bool:
    """Whether the items of the file at ``path`` (relative to the root) must run together on one worker:
    a notebook (its cells share a kernel), or a test module that builds a module-, class- or package-scoped
    fixture (built once per process)."""
    if path.endswith(".ipynb"):
        return True
    file = Path(__file__).resolve().parent / path
    return file.suffix == ".py" and file.is_file() and bool(_FIXTURE_SCOPE.search(file.read_text("utf-8")))


@functools.cache
def _slow_tests(path: str) -> frozenset[str]:
    """Names of the test functions of the module at ``path`` marked ``slow`` (read from its source; the
    scheduler, in the controlling process, collects nothing)."""
    file = Path(__file__).resolve().parent / path
    if file.suffix != ".py" or not file.is_file():
        return frozenset()
    tree = ast.parse(file.read_text("utf-8"))
    return frozenset(node.name for node in tree.body if isinstance(node, ast.FunctionDef)
                     and any("mark.slow" in ast.unparse(d) for d in node.decorator_list))


def _is_slow(nodeid: str) -> bool:
    path, _, rest = nodeid.partition("::")
    return rest.split("[", 1)[0] in _slow_tests(path)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: nothing to do where it is not installed
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``: a notebook, or a module with a module-scoped fixture, is one unit of work handed
    to one worker; every other test is a unit of its own. Units holding a test marked ``slow`` go first, then
    the largest, so that no long unit starts last."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WholeFiles(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if _whole(path) else nodeid

        def _assign_work_unit(self, node) -> None:
            if not getattr(self, "_ranked", False):  # the first assignment: the queue is complete
                self._ranked = True
                units = sorted(self.workqueue.items(),  # stable: slow first, then the largest
                               key=lambda kv: (not any(_is_slow(n) for n in kv[1]), -len(kv[1])))
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)

    return WholeFiles(config, log)


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


_NOTEBOOK_SECONDS: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):  # cells of a notebook (reported to the controller under xdist too)
        _NOTEBOOK_SECONDS[path] += report.duration


def pytest_terminal_summary(terminalreporter):
    if not _NOTEBOOK_SECONDS or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    slowest = sorted(_NOTEBOOK_SECONDS.items(), key=lambda kv: -kv[1])[:10]
    terminalreporter.write_sep("=", f"slowest {len(slowest)} notebooks (every cell added up)")
    for path, seconds in slowest:
        terminalreporter.write_line(f"{seconds:8.2f}s {path}")
