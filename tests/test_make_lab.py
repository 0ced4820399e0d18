"""`make lab` starts JupyterLab wherever the install succeeded: as root too (containers, cloud notebook VMs
and many classroom images run as root, where JupyterLab refuses to start without --allow-root).

The test runs the Makefile's own `lab` recipe (the environment report, then the launch line) with this
virtual environment, the way the browser test starts a server: a free localhost port, a random token, settings
and runtime files in a temporary folder. It passes when the server answers; run as root (as CI does) it also
checks the one line that says why --allow-root was passed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(sys.platform == "win32" or shutil.which("make") is None,
                    reason="`make lab` needs make and a POSIX shell (Windows: see the README)")
def test_make_lab_starts_jupyterlab_even_as_root(tmp_path):
    venv = Path(sys.prefix)
    if not (venv / "bin" / "jupyter").exists():
        pytest.skip(f"JupyterLab is not installed in {venv}")
    port, token = _free_port(), secrets.token_hex(16)
    lab_args = (f"--no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port={port} --ServerApp.port_retries=0 "
                f"--IdentityProvider.token={token} --LabApp.news_url=")
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    log_path = tmp_path / "make-lab.log"
    # -o: take the install stamp as up to date (the suite runs inside the installed environment already)
    cmd = ["make", "--no-print-directory", "-o", f"{venv}/.installed", "lab", f"VENV={venv}",
           f"LAB_ARGS={lab_args}"]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            deadline, answered = time.monotonic() + 90, False
            while not answered:
                try:
                    url = f"http://127.0.0.1:{port}/api/status?token={token}"
                    with urllib.request.urlopen(url, timeout=2) as r:
                        answered = r.status == 200
                except OSError:
                    pass
                if not answered and (proc.poll() is not None or time.monotonic() > deadline):
                    pytest.fail(f"`make lab` did not start JupyterLab (exit {proc.poll()}):\n"
                                + log_path.read_text()[-3000:])
                time.sleep(0.3)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
    out = log_path.read_text()
    assert "Verdict: " in out, out[-2000:]  # the pre-class check ran first
    root_line = "make lab: running as root: JupyterLab starts with --allow-root."
    if os.geteuid() == 0:
        assert root_line in out, out[-2000:]
        assert "Running as root is not recommended" not in out, out[-2000:]
    else:
        assert root_line not in out
