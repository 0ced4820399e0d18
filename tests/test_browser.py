"""JupyterLab in a real browser: run notebooks in headless Chromium, fail on any cell error, screenshot.

Opt-in (``-m browser``); needs Debian's Chromium (``apt-get install -y chromium``) and the PyPI ``playwright``
package (a dev dependency; its own browser download is not needed: we drive the system Chromium)::

    .venv/bin/python -m pytest -o addopts='' -m browser tests/test_browser.py

The test copies ``notebooks/`` to a temporary folder (the browser may save notebooks), starts JupyterLab on a
free localhost port with a random token, opens each notebook in a fresh workspace, runs all cells, waits until
the kernel is idle and every code cell has run, then checks the notebook model for error outputs and the page
for rendered tracebacks. Screenshots go to ``artifacts/browser/`` (or ``$MAMBA2_BROWSER_ARTIFACTS``).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# 00_start_here plus one notebook that launches cuTile kernels (on the CPU executor here)
DEFAULT_NOTEBOOKS = ("00_start_here.ipynb", "04_cutile_primer.ipynb")
# (override with MAMBA2_BROWSER_NOTEBOOKS="a.ipynb,solutions/b.ipynb", paths relative to notebooks/)
NOTEBOOKS = [
    n.strip()
    for n in os.environ.get("MAMBA2_BROWSER_NOTEBOOKS", ",".join(DEFAULT_NOTEBOOKS)).split(",")
    if n.strip()
]
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NOTEBOOK_TIMEOUT_S = 240

pytestmark = pytest.mark.browser


def _skip_reason() -> str | None:
    if not Path(CHROMIUM).exists():
        return "Chromium is not installed (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (.venv/bin/pip install playwright)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a copy of notebooks/: yields (base_url, token)."""
    reason = _skip_reason()
    if reason and os.environ.get("MAMBA2_REQUIRE_BROWSER") == "1":
        pytest.fail(f"MAMBA2_REQUIRE_BROWSER=1 (set by .ci/run) but {reason}")
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("lab")
    root = work / "notebooks"
    shutil.copytree(ROOT / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    settings = work / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # no "would you like to receive Jupyter news?" toast in the screenshots, no update checks
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(work / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(work / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(work / "runtime"),
        CI=os.environ.get("CI", "true"),
        MPLBACKEND="module://matplotlib_inline.backend_inline",
    )
    log = open(work / "jupyterlab.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "jupyter", "lab",
            "--no-browser", "--allow-root",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=",
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("JupyterLab did not start:\n" + (work / "jupyterlab.log").read_text()[-3000:])
            time.sleep(0.3)
        yield base, token, root
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory, lab):
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh --user-data-dir
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000},
        )  # fmt: skip
        try:
            yield context
        finally:
            context.close()


_RUN_ALL = """
async (path) => {
  const app = window.jupyterapp;
  const w = app.shell.currentWidget;
  if (!w || !w.context || w.context.path !== path) return {error: 'current widget is not ' + path};
  await w.context.sessionContext.ready;
  const ok = await app.commands.execute('notebook:run-all-cells');
  return {ok};
}
"""

_STATE = """
(path) => {
  const w = window.jupyterapp.shell.currentWidget;
  if (!w || !w.context || w.context.path !== path) return null;
  const kernel = w.context.sessionContext.session && w.context.sessionContext.session.kernel;
  const cells = [];
  for (const c of w.content.widgets) {
    if (c.model.type !== 'code') continue;
    const outs = c.model.outputs.toJSON();
    cells.push({
      count: c.model.executionCount,
      errors: outs.filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue),
      source: c.model.sharedModel.getSource().slice(0, 80),
    });
  }
  return {status: kernel ? kernel.status : 'no kernel', cells};
}
"""


def _artifacts() -> Path:
    out = Path(os.environ.get("MAMBA2_BROWSER_ARTIFACTS", ROOT / "artifacts" / "browser"))
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_in_jupyterlab(lab, browser_context, name):
    from mamba2_tutorial.runtime.platforms import (
        cutile_available,
        cutile_unavailable_reason,
        notebook_requires_cutile,
    )

    base, token, root = lab
    assert (root / name).exists(), f"notebooks/{name} does not exist"
    if not cutile_available() and notebook_requires_cutile(root / name):
        pytest.skip(f"needs cuTile: {cutile_unavailable_reason()}")
    page = browser_context.new_page()
    page.set_default_timeout(NOTEBOOK_TIMEOUT_S * 1000)
    start = time.monotonic()
    try:
        # a fresh workspace, so JupyterLab cannot restore (and hand us) the previous notebook's tab
        page.goto(f"{base}/lab/workspaces/t{secrets.token_hex(4)}/tree/{name}?reset&token={token}")
        page.wait_for_function(
            "(p) => window.jupyterapp && window.jupyterapp.shell.currentWidget"
            " && window.jupyterapp.shell.currentWidget.context"
            " && window.jupyterapp.shell.currentWidget.context.path === p",
            arg=name,
        )
        result = page.evaluate(_RUN_ALL, name)
        assert "error" not in result, result["error"]
        # run-all resolves when the last cell finished; still wait for an idle kernel and every cell counted
        deadline = time.monotonic() + NOTEBOOK_TIMEOUT_S
        while True:
            state = page.evaluate(_STATE, name)
            idle = state is not None and state["status"] == "idle"
            # run-all stops at the first error: then the later cells never get a count
            failed = idle and any(c["errors"] for c in state["cells"])
            done = idle and all(c["count"] is not None for c in state["cells"])
            if done or failed or time.monotonic() > deadline:
                break
            page.wait_for_timeout(250)
        page.wait_for_timeout(500)  # let the last outputs render
        shot = _artifacts() / f"{name.replace('/', '__').removesuffix('.ipynb')}.png"
        page.screenshot(path=str(shot), full_page=True)
        elapsed = time.monotonic() - start
        print(f"{name}: ran in JupyterLab in {elapsed:.1f} s; screenshot {shot}")

        errors = [(i, c["source"], c["errors"]) for i, c in enumerate(state["cells"]) if c["errors"]]
        assert not errors, f"{name}: code cells raised errors in JupyterLab: {errors}"
        assert done, f"{name}: not finished after {NOTEBOOK_TIMEOUT_S} s (kernel {state and state['status']})"
        tracebacks = page.locator(
            '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]', has_text="Traceback"
        ).count()
        assert tracebacks == 0, f"{name}: {tracebacks} rendered traceback(s) in the page"
        assert result["ok"] is True, f"{name}: notebook:run-all-cells reported a failure ({result})"
        assert page.locator(".jp-OutputArea-output").count() > 0, f"{name}: no outputs rendered"
    finally:
        page.close()
