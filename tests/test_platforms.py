"""Platforms without cuTile: the project installs, imports and teaches there; kernel notebooks say why not.

cuda-tile 1.7 has wheels for Linux and Windows (x86-64, ARM64) only. These tests check

* that the dependency's environment marker (pyproject.toml, environment.yml) is true exactly where the wheels
  are, and that where they are (CI), cuTile imports;
* what a learner reads where cuTile is missing (pure functions, every platform);
* a Mac, simulated on this machine: ``tests/platform_sim/sitecustomize.py`` on PYTHONPATH makes ``cuda.tile``
  unimportable and the package see macOS arm64, in a subprocess and in the Jupyter kernels it starts. There,
  ``import mamba2_tutorial``, the environment report and the compile check explain themselves; ``pytest``
  passes as ``make test`` runs it, nbval running notebooks 00-03 and 09 and skipping the kernel notebooks and
  the tests that need cuTile; exercises 1-3 run as shipped; and each kernel notebook and cuTile exercise, run
  as a learner would ("Run All"), stops at its first code cell with ``CuTileUnavailable`` and runs no later
  cell.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mamba2_tutorial.lessons.env import EnvironmentReport, diagnose
from mamba2_tutorial.runtime import platforms
from mamba2_tutorial.runtime.platforms import (
    CUTILE_MARKER,
    CuTileUnavailable,
    cutile_unavailable_message,
    has_cutile_wheels,
    is_cutile_import_error,
    notebook_requires_cutile,
)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SIM = ROOT / "tests" / "platform_sim"
MAC = ("Darwin", "arm64")

ALL_NOTEBOOKS = sorted(p for p in NOTEBOOKS.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
#: notebooks whose first code cell is require_cutile(): they use cuTile
KERNEL_NOTEBOOKS = [p for p in ALL_NOTEBOOKS if notebook_requires_cutile(p)]
#: notebooks that nbval runs and that need no cuTile (the exercises, which fail by design, run separately):
#: every other notebook, so a notebook that uses cuTile without saying so first fails on the simulated Mac
TORCH_NOTEBOOKS = [p for p in ALL_NOTEBOOKS if p not in KERNEL_NOTEBOOKS and "exercises" not in p.parts]
TORCH_EXERCISES = sorted((NOTEBOOKS / "exercises").glob("ex0[1-3]_*.ipynb"))

PLATFORMS = [
    ("Linux", "x86_64", True), ("Linux", "aarch64", True),
    ("Windows", "AMD64", True), ("Windows", "ARM64", True),
    ("Darwin", "arm64", False), ("Darwin", "x86_64", False), ("Linux", "ppc64le", False),
    ("Linux", "armv7l", False), ("Windows", "x86", False), ("FreeBSD", "amd64", False),
]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _sim_env(platform: tuple[str, str] | None = MAC) -> dict[str, str]:
    """The environment of a process (and of the Jupyter kernels it starts) on a machine without cuTile."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAMBA2_TUTORIAL_BACKEND", "MAMBA2_SIM_PLATFORM")}
    env["PYTHONPATH"] = os.pathsep.join([str(SIM)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    if platform is not None:
        env["MAMBA2_SIM_PLATFORM"] = "/".join(platform)
    return env


def _code_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


# ------------------------------------------------------------------------------------ markers and wheels


@pytest.mark.parametrize("system,machine,wheels", PLATFORMS, ids=lambda v: str(v))
def test_the_marker_is_true_exactly_where_cuda_tile_has_wheels(system, machine, wheels):
    from packaging.markers import Marker

    assert has_cutile_wheels(system, machine) is wheels
    env = {"platform_system": system, "platform_machine": machine}
    assert Marker(CUTILE_MARKER).evaluate(env) is wheels


def test_every_cuda_tile_requirement_carries_the_marker():
    from packaging.markers import Marker
    from packaging.requirements import Requirement

    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    yaml = pytest.importorskip("yaml")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    conda = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda_pip = next(d["pip"] for d in conda["dependencies"] if isinstance(d, dict))
    lines = (project["dependencies"] + project["optional-dependencies"]["gpu"]
             + [r for r in conda_pip if not r.startswith("-")])
    cutile = [Requirement(r) for r in lines if Requirement(r).name == "cuda-tile"]
    assert len(cutile) == 3, cutile  # the base dependency, the gpu extra, environment.yml
    assert all(str(r.marker) == str(Marker(CUTILE_MARKER)) for r in cutile), [str(r.marker) for r in cutile]


def test_where_the_wheels_exist_cutile_imports():
    """On Linux x86-64 (CI) the marker installed cuda-tile, and the kernel tiers are there."""
    if not has_cutile_wheels():
        pytest.skip(f"no cuda-tile wheels for {platforms.platform_label()}")
    assert platforms.cutile_available(), platforms.cutile_import_error()
    platforms.require_cutile()  # returns quietly
    from mamba2_tutorial.runtime.backends import select_backend

    assert select_backend().name in ("gpu", "cpu")


# ------------------------------------------------------------------------------------- what a learner reads


def test_the_message_on_a_mac_says_what_runs_and_how_to_continue():
    msg = cutile_unavailable_message(ModuleNotFoundError("No module named 'cuda'", name="cuda"), *MAC)
    assert msg.startswith("cuTile is not available on this platform, macOS arm64 (Apple Silicon)")
    for needed in ("Notebooks 00-03 and 09 and exercises 1-3", "notebooks 04-08 and 10-13 and exercises 4-8",
                   ".devcontainer/",
                   "Reopen in Container", "Codespace", "Linux or Windows machine", "NVIDIA GPU"):
        assert needed in msg, (needed, msg)
    intel = cutile_unavailable_message(None, "Darwin", "x86_64")
    assert "macOS x86_64 (Intel)" in intel and ".devcontainer/" in intel


def test_where_wheels_exist_the_message_says_to_install_them():
    msg = cutile_unavailable_message("No module named 'cuda.tile'", "Linux", "x86_64")
    assert "Linux x86_64" in msg and "No module named 'cuda.tile'" in msg
    assert 'pip install -e ".[dev]"' in msg and ".devcontainer" not in msg


def test_cutile_import_errors_are_told_apart():
    assert is_cutile_import_error(ModuleNotFoundError("x", name="cuda"))
    assert is_cutile_import_error(ModuleNotFoundError("x", name="cuda.tile"))
    assert is_cutile_import_error(ModuleNotFoundError("x", name="cuda.tile._cext"))
    assert is_cutile_import_error(CuTileUnavailable("x"))
    assert not is_cutile_import_error(ModuleNotFoundError("x", name="cudatile"))
    assert not is_cutile_import_error(ModuleNotFoundError("x", name="numpy"))
    assert not is_cutile_import_error(ImportError("cannot import name 'foo' from 'cuda.tile'"))
    assert issubclass(CuTileUnavailable, ImportError)  # `except ImportError` fallbacks keep working
    shown = CuTileUnavailable("the message")._render_traceback_()  # what Jupyter shows: no traceback
    assert shown == ["\x1b[31mCuTileUnavailable\x1b[0m: the message"]


def test_no_install_advice_where_nothing_can_be_installed():
    """On a Mac, `pip install cuda-tile` cannot work: the report gives no such advice, its verdict says where
    to go instead. On Linux the same facts are problems with a fix."""
    facts = dict(cuda_available=False, torch_cuda=None, cuda_tile=None, tileiras=None)
    assert diagnose(**facts, system="Darwin", machine="arm64") == []
    assert {p.code for p in diagnose(**facts, system="Linux", machine="aarch64")} == {"cuda_tile", "tileiras"}
    broken = diagnose(cuda_available=False, torch_cuda=None, cuda_tile="1.7.0", tileiras="/t",
                      tileiras_version="13.4", cutile_error="libfoo.so: cannot open")
    assert [p.code for p in broken] == ["cuda_tile"] and "libfoo.so" in broken[0].message


def _report(tier, system, machine, **kw):
    facts = dict(python="3.12.0", platform="p", package="0.1.0", torch="2.13.0", torch_cuda=None,
                 cuda_tile=None, tileiras_path=None, tileiras_version=None, cuda_available=False, gpu_count=0,
                 gpu_name=None, capability=None, driver=None, driver_cuda=None, cuda_home=None,
                 cuda_home_version=None)
    return EnvironmentReport(**{**facts, **kw}, tier=tier, tier_reason="r", system=system, machine=machine)


def test_the_verdict_of_each_kind_of_machine():
    mac = _report("none", *MAC, cutile_error="No module named 'cuda'")
    assert mac.verdict.startswith("NOT READY FOR THE KERNELS: notebooks 00-03 and 09 and exercises 1-3 run "
                                  "here; the kernel notebooks 04-08 and 10-13 and exercises 4-8 need cuTile")
    assert platforms.HOW_TO_CONTINUE in mac.verdict
    text = str(mac)
    assert "macOS arm64 (Apple Silicon): no cuda-tile wheels" in text and "Nothing to fix" not in text
    assert text.endswith(f"Verdict: {mac.verdict}")  # the last thing the pre-class check prints
    md = mac._repr_markdown_()
    assert "**Verdict:** NOT READY" in md and "\n- open this repository in its dev container" in md
    linux = _report("none", "Linux", "x86_64", cuda_tile="1.7.0", cutile_error="boom")
    assert 'Install it: `make install`, or `pip install -e ".[dev]"`' in linux.verdict
    assert "`import cuda.tile` fails: boom" in str(linux)
    cpu = _report("cpu", "Linux", "aarch64", cuda_tile="1.7.0")
    assert cpu.verdict == ("READY: every notebook (00-13) and exercise (1-8) runs here, the cuTile kernels "
                           "on the CPU tier.")
    gpu = _report("gpu", "Linux", "x86_64", cuda_tile="1.7.0", gpu_name="NVIDIA H200")
    assert gpu.verdict.endswith("the cuTile kernels on the GPU tier (NVIDIA H200).")
    assert str(gpu).splitlines()[-1] == f"Verdict: {gpu.verdict}"


# --------------------------------------------------------------------------------- the notebooks' first cell


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.rglob("*.ipynb")), ids=_rel)
def test_kernel_notebooks_and_only_they_start_with_require_cutile(path):
    first = "".join(_code_cells(json.loads(path.read_text(encoding="utf-8")))[0]["source"])
    if path in KERNEL_NOTEBOOKS:
        # a tiny cell of its own, so edits to the notebook's other cells never move it
        assert "m2.require_cutile()" in first and len(first.splitlines()) <= 4, first
        assert "cuda.tile" not in first
        assert platforms.notebook_requires_cutile(path)
    else:
        assert "require_cutile" not in first and not platforms.notebook_requires_cutile(path)
        assert path in TORCH_NOTEBOOKS or path in TORCH_EXERCISES, f"{_rel(path)}: which list is it in?"


# -------------------------------------------------------------------------- a Mac, simulated on this machine

_PROBE = textwrap.dedent("""
    import contextlib, io, json
    out = {}
    try:
        import cuda.tile  # noqa: F401
        out["cuda.tile"] = "imported"
    except ModuleNotFoundError as exc:
        out["cuda.tile"] = f"ModuleNotFoundError: {exc}"
    import mamba2_tutorial as m2
    out["available"] = m2.cutile_available()
    out["backend"] = list(m2.select_backend())
    for what, call in [("require", m2.require_cutile), ("ssd_forward", lambda: m2.ssd_forward),
                       ("launch", lambda: m2.launch(None, (1,), ()))]:
        try:
            call()
            out[what] = "no error"
        except m2.CuTileUnavailable as exc:
            out[what] = f"CuTileUnavailable: {exc}"
    from mamba2_tutorial.lessons import env as env_cli
    from mamba2_tutorial.runtime import compile as compile_cli
    runs = [("env", env_cli.main, []), ("compile_skip", compile_cli.main, ["--skip-unsupported"]),
            ("compile", compile_cli.main, [])]
    for name, main, argv in runs:
        text = io.StringIO()
        with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
            code = main(argv)
        out[name] = [code, text.getvalue()]
    print(json.dumps(out))
""")


def _probe(platform):
    res = subprocess.run([sys.executable, "-c", _PROBE], env=_sim_env(platform), cwd=ROOT,
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def test_on_a_mac_the_package_imports_and_explains_itself():
    out = _probe(MAC)
    assert out["cuda.tile"] == "ModuleNotFoundError: No module named 'cuda.tile'"  # the simulation holds
    assert out["available"] is False
    name, reason = out["backend"]
    assert name == "none" and "not available on this platform, macOS arm64" in reason
    for what in ("require", "ssd_forward", "launch"):
        assert out[what].startswith("CuTileUnavailable: "), out[what]
        assert "macOS arm64" in out[what] and ".devcontainer/" in out[what], out[what]
    assert out["ssd_forward"].startswith("CuTileUnavailable: mamba2_tutorial.ssd_forward needs cuTile.")

    code, text = out["env"]
    assert code == 0 and "Tier: NONE: cuTile is not available on this platform, macOS arm64" in text, text
    assert "To fix:" not in text and "pip install" not in text, text  # nothing to install on a Mac
    assert "Verdict: NOT READY FOR THE KERNELS: notebooks 00-03 and 09 and exercises 1-3 run here" in text
    assert "dev container (.devcontainer/" in text, text

    code, text = out["compile_skip"]
    assert code == 0, text
    assert text.startswith("compile check skipped: cuTile is not available on this platform"), text
    code, text = out["compile"]  # asked for explicitly, the compile check fails, with the explanation
    assert code == 1 and "error: cuTile is not available on this platform" in text, text


def test_where_wheels_exist_a_missing_cutile_is_an_error():
    """Linux x86-64 without cuTile is a broken install, not a platform limit: nothing is skipped."""
    if not has_cutile_wheels():
        pytest.skip(f"this machine, {platforms.platform_label()}, has no cuda-tile wheels")
    out = _probe(None)
    assert out["available"] is False and out["backend"][0] == "none"
    code, text = out["compile_skip"]
    assert code == 1 and "This platform has cuda-tile wheels" in text, text
    code, text = out["env"]
    assert "To fix:" in text and "does not import" not in text and "`import cuda.tile` fails" in text, text
    assert "Install it: `make install`" in text, text


@pytest.mark.slow
def test_on_a_mac_make_test_runs_the_pytorch_notebooks_and_skips_what_needs_cutile(tmp_path):
    """`pytest` as `make test` runs it on a Mac: it passes. Notebooks 00-03, 09 and solutions 1-3 pass cell
    by cell under nbval, the kernel notebooks are skipped with the reason, and so are the test modules that
    import cuda.tile (tests/test_executor.py among them); the unit tests that need no cuTile run. (Not this
    file, which would run itself, nor the browser test, which needs Chromium, nor tests/test_exercises.py,
    whose notebooks on a Mac are the next test's subject: every exercise run as a learner gets it.)"""
    junit = tmp_path / "junit.xml"
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "notebooks", "-q", f"--junitxml={junit}", "-p", "no:xdist",
         "--deselect", "tests/test_platforms.py", "--deselect", "tests/test_browser.py",
         "--deselect", "tests/test_exercises.py"],
        env=_sim_env(MAC), cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
    outcomes: dict[str, set[str]] = {}  # repository path -> outcomes of its test cases
    reasons: set[str] = set()
    for case in ET.parse(junit).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        if classname.endswith(".ipynb"):  # nbval: one case per cell, classname notebooks.solutions.ex02.ipynb
            path = classname.removesuffix(".ipynb").replace(".", "/") + ".ipynb"
        else:  # a test module skipped at collection: classname "", name tests.test_executor
            path = (classname or name).replace(".", "/") + ".py"
        kinds = [child for child in case if child.tag in ("skipped", "failure", "error")]
        outcomes.setdefault(path, set()).update([k.tag for k in kinds] or ["passed"])
        reasons |= {k.get("message", "") for k in kinds if k.tag == "skipped" and path.endswith(".ipynb")}
    notebooks = {path: kinds for path, kinds in outcomes.items() if path.endswith(".ipynb")}
    expected = {_rel(p): {"passed"} for p in TORCH_NOTEBOOKS}
    expected |= {_rel(p): {"skipped"} for p in KERNEL_NOTEBOOKS if "exercises" not in p.parts}
    assert notebooks == expected, res.stdout[-4000:]
    assert reasons == {f"needs cuTile: {platforms.cutile_unavailable_reason(None, *MAC)}"}, reasons
    assert outcomes["tests/test_executor.py"] == {"skipped"}, outcomes["tests/test_executor.py"]
    ran = {path for path, kinds in outcomes.items() if path.startswith("tests/") and "passed" in kinds}
    assert {"tests/test_reference.py", "tests/test_env.py", "tests/test_repo_hygiene.py"} <= ran, sorted(ran)


async def _run_as_a_learner(paths: list[Path], env: dict[str, str]) -> dict[Path, tuple]:
    """Each notebook executed top to bottom like "Run All", which stops at the first error:
    {path: (notebook, the error it stopped on or None)}."""
    import nbformat
    from nbclient import NotebookClient

    slots = asyncio.Semaphore(4)  # CI has two cores: a few kernels at a time

    async def run(path):
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=300, kernel_name="python3",
                                allow_errors=path in TORCH_EXERCISES,  # their checks fail by design
                                resources={"metadata": {"path": str(path.parent)}})
        async with slots:
            try:
                await client.async_execute(env=env)
            except Exception as exc:  # noqa: BLE001 - a CellExecutionError is the expected stop
                return path, (nb, exc)
        return path, (nb, None)

    return dict(await asyncio.gather(*(run(p) for p in paths)))


def _first_cells_in_one_kernel(paths: list[Path], env: dict[str, str]):
    """The first code cell of each notebook, run one after another in one kernel (each raises or not on its
    own): [(path, the executed cell)]."""
    import nbformat
    from nbclient import NotebookClient

    cells = [copy.deepcopy(_code_cells(nbformat.read(path, as_version=4))[0]) for path in paths]
    for i, cell in enumerate(cells):  # the open and guided tiers of an exercise share their cells' ids
        cell["id"] = f"first-cell-{i}"
    nb = nbformat.v4.new_notebook(cells=cells)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    asyncio.run(client.async_execute(env=env))
    return list(zip(paths, nb.cells))


def _assert_stops_here(path: Path, first) -> None:
    errors = [o for o in first.outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "CuTileUnavailable", (_rel(path), first.outputs)
    message = errors[0].evalue
    assert message.startswith("cuTile is not available on this platform, macOS arm64"), message
    assert ".devcontainer/" in message and "Linux or Windows machine" in message, message
    assert errors[0].traceback == [f"\x1b[31mCuTileUnavailable\x1b[0m: {message}"]  # no traceback


@pytest.mark.slow
def test_on_a_mac_exercises_run_and_kernel_notebooks_stop_at_their_first_cell():
    """The PyTorch exercises run as shipped (every check fails with a hint, every other cell runs). Every
    kernel notebook's first code cell stops with CuTileUnavailable and says how to continue (the first cells
    run one after another in one kernel); and run as a learner does ("Run All"), a kernel notebook and a
    kernel exercise stop there: no later cell runs."""
    whole = [next(p for p in KERNEL_NOTEBOOKS if "exercises" not in p.parts),
             next(p for p in KERNEL_NOTEBOOKS if "exercises" in p.parts)]
    results = asyncio.run(_run_as_a_learner(TORCH_EXERCISES + whole, _sim_env(MAC)))
    for path in TORCH_EXERCISES:  # as shipped: every check fails with a hint, every other cell runs
        nb, error = results[path]
        assert error is None, (_rel(path), error)
        for i, cell in enumerate(_code_cells(nb)):
            errors = [o for o in cell.outputs if o.output_type == "error"]
            if "check" in cell.metadata.get("tags", []):
                assert [e.ename for e in errors] == ["ExerciseFailed"], (_rel(path), i, errors)
            else:
                assert not errors, (_rel(path), i, errors[0].ename, errors[0].evalue)
    for path in whole:
        nb, error = results[path]
        assert error is not None and "CuTileUnavailable" in str(error), (_rel(path), error)
        first, *later = _code_cells(nb)
        _assert_stops_here(path, first)
        ran = [i for i, c in enumerate(later, 1) if c.get("execution_count") is not None or c.get("outputs")]
        assert not ran, f"{_rel(path)}: code cells {ran} ran after the first"
    for path, first in _first_cells_in_one_kernel(KERNEL_NOTEBOOKS, _sim_env(MAC)):
        _assert_stops_here(path, first)


# ------------------------------------------------------------------------------------------ the dev container

_DOCKER_PLATFORMS = {"linux/amd64": ("Linux", "x86_64"), "linux/arm64": ("Linux", "aarch64")}


def test_the_dev_container_is_a_linux_image_that_runs_make_install():
    """.devcontainer/devcontainer.json is strict JSON (no comments), builds its Dockerfile from an official
    Python image that cuTile has wheels for, and runs targets that the Makefile has."""
    folder = ROOT / ".devcontainer"
    config = json.loads((folder / "devcontainer.json").read_text(encoding="utf-8"))
    dockerfile = folder / config["build"]["dockerfile"]
    assert dockerfile.is_file(), dockerfile
    docker = dockerfile.read_text(encoding="utf-8")
    froms = re.findall(r"^FROM\s+(.+)$", docker, re.M)
    assert len(froms) == 1, froms
    words = froms[0].split()
    platform_flags = [w.split("=", 1)[1] for w in words if w.startswith("--platform=")]
    image = next(w for w in words if not w.startswith("--"))
    # Docker Hub's official Python image (multi-arch: linux/amd64 and linux/arm64)
    m = re.fullmatch(r"python:3\.(\d+)(?:\.\d+)?-slim(?:-(?:bookworm|trixie))?", image)
    assert m, f"{image}: use an official python:3.X-slim image"
    assert 10 <= int(m.group(1)) < 14, "Python 3.10-3.13, as pyproject.toml and environment.yml require"
    run_args = config.get("runArgs", [])
    platform_flags += [a.split("=", 1)[1] for a in run_args if a.startswith("--platform=")]
    for flag in platform_flags:  # a forced platform must be one cuda-tile has wheels for
        assert flag in _DOCKER_PLATFORMS and has_cutile_wheels(*_DOCKER_PLATFORMS[flag]), flag
    assert re.search(r"apt-get install[^\n]*\bmake\b", docker), "the image needs make"

    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    variables = set(re.findall(r"^(\w+)\s*\?=", makefile, re.M))
    for key in ("postCreateCommand", "postAttachCommand"):
        command = config[key].split()
        assert command[0] == "make", command
        assert [t for t in command[1:] if "=" not in t][0] in targets, (key, command)
        assert {t.split("=")[0] for t in command[1:] if "=" in t} <= variables, (key, command)
    assert "install" in config["postCreateCommand"].split()
    venv = config["containerEnv"]["VENV"]
    assert "VENV" in variables and not venv.startswith("${containerWorkspaceFolder}"), venv
    vscode = config["customizations"]["vscode"]
    assert vscode["settings"]["python.defaultInterpreterPath"] == f"{venv}/bin/python"
    assert {"ms-python.python", "ms-toolsai.jupyter"} <= set(vscode["extensions"])
    assert 8888 in config["forwardPorts"]  # JupyterLab's port (`make lab`)
    user = config["remoteUser"]
    assert re.search(rf"^RUN useradd .*\b{user}$", docker, re.M), f"the Dockerfile must create {user}"
    assert re.search(rf"^USER {user}$", docker, re.M)


# ----------------------------------------------------------------------------------------------------- docs

_TABLE_HEADER = "| | Linux x86-64 | Linux ARM64 | Windows x86-64 | macOS, Apple Silicon | macOS, Intel |"


def _platform_table(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(_TABLE_HEADER)
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return lines[start:end]


def test_readme_and_instructors_guide_share_the_platform_table_and_the_pre_class_check():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    guide = (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    table = _platform_table(readme)
    assert _platform_table(guide) == table, "README.md and docs/instructors.md must show the same table"
    rows = [line.split("|")[1].strip() for line in table[2:]]
    assert rows[:1] == ["install"] and any(r.startswith("notebooks 00–03") for r in rows), rows
    assert any("CPU tier" in r for r in rows) and any(r.startswith("GPU tier") for r in rows), rows
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for text in (readme, guide):
        assert "make env" in text and ".devcontainer/" in text and "Reopen in Container" in text
        for target in set(re.findall(r"`make (\w[\w-]*)", text)):  # every make command they name exists
            assert re.search(rf"^{target}:", makefile, re.M), f"`make {target}` is not a Makefile target"
        # the verdicts they quote are the report's
        mac, ready = _report("none", *MAC), _report("cpu", "Linux", "x86_64", cuda_tile="1.7.0")
        for quoted in re.findall(r"`Verdict: ([^`]+?)(?:,? \.\.\.| …)?`", text):
            quoted = " ".join(quoted.split()).rstrip(" .…;")  # inline code may wrap across lines
            assert any(v.startswith(quoted) for v in (mac.verdict, ready.verdict)), quoted


# ----------------------------------------------------------------------- the course map, read from notebooks


def _notebook(path: Path, first_cell: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# title"]},
             {"cell_type": "code", "metadata": {}, "source": [first_cell], "outputs": [],
              "execution_count": None}]
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))


def test_the_course_map_is_read_from_the_notebooks(tmp_path):
    """Adding a notebook or an exercise changes every list the learner reads; nothing is hard-coded."""
    plain, kernel = "import mamba2_tutorial as m2", "import mamba2_tutorial as m2\nm2.require_cutile()"
    for name, cell in [("00_start.ipynb", plain), ("01_a.ipynb", plain), ("02_b.ipynb", kernel),
                       ("03_c.ipynb", kernel), ("05_e.ipynb", plain), ("07_g.ipynb", kernel),
                       ("exercises/ex01_a.ipynb", plain), ("exercises/ex02_b.ipynb", kernel),
                       ("exercises/ex02_b_open.ipynb", kernel), ("exercises/ex03_c.ipynb", kernel),
                       ("exercises/notes.ipynb", plain), ("scratch.ipynb", kernel)]:
        _notebook(tmp_path / name, cell)
    course = platforms.course_map(tmp_path)
    assert course.plain == (0, 1, 5) and course.kernel == (2, 3, 7)
    # the two tiers of ex02 count once
    assert course.plain_exercises == (1,) and course.kernel_exercises == (2, 3)
    assert course.plain_phrase == "notebooks 00-01 and 05 and exercise 1"
    assert course.kernel_phrase == "notebooks 02-03 and 07 and exercises 2-3"
    assert course.all_phrase == "every notebook (00-03, 05 and 07) and exercise (1-3)"
    with pytest.raises(FileNotFoundError, match="no course notebooks"):
        platforms.course_map(tmp_path / "exercises" / "nothing-here")


def test_the_verdict_lists_the_notebooks_that_exist():
    """The report's lists are this repository's notebooks: every ladder notebook and every exercise."""
    ladder = sorted(int(p.name[:2]) for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    exercises = sorted({int(p.name[2:4]) for p in (NOTEBOOKS / "exercises").glob("ex[0-9][0-9]_*.ipynb")})
    ready = _report("cpu", "Linux", "x86_64", cuda_tile="1.7.0")
    assert ready.verdict.startswith(f"READY: every notebook ({ladder[0]:02d}-{ladder[-1]:02d}) and exercise "
                                    f"({exercises[0]}-{exercises[-1]}) runs here")
    course = platforms.course_map()
    assert course.notebooks == tuple(ladder) and course.exercises == tuple(exercises)
    kernel = {int(p.name[:2]) for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if notebook_requires_cutile(p)}
    assert set(course.kernel) == kernel and 4 in kernel and 1 not in kernel
    assert platforms.span([0, 1, 2, 3, 9, 10, 11], 2) == "00-03 and 09-11" and platforms.span([4]) == "4"
