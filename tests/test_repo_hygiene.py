"""Repository hygiene: stripped, valid notebooks; environment.yml in sync with pyproject.toml; README."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def _requirement_name(req: str) -> str:
    """'cuda-tile[tileiras]==1.7.*' -> 'cuda-tile'."""
    return re.split(r"[\[<>=!~; ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_there_are_notebooks():
    names = {p.name for p in NOTEBOOKS}
    assert "00_start_here.ipynb" in names, sorted(names)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_notebook_is_valid_and_stripped(path: Path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)
    ]
    assert not dirty, f"{path.name}: code cells {dirty} have stored outputs or execution counts; `make strip`"
    kernel = nb.metadata.get("kernelspec", {}).get("name")
    assert kernel == "python3", f"{path.name}: kernelspec must be python3, got {kernel!r}"


@pytest.mark.parametrize(
    "path",
    [p for p in NOTEBOOKS if "exercises" not in p.parts],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_notebook_asserts_its_claims(path: Path):
    """Under --nbval-lax only exceptions fail a notebook, so every notebook must check something."""
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    source = "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells)
    assert re.search(r"\bassert\b|assert_close\(|check_\w+\(", source), f"{path.name} asserts nothing"


def test_environment_yml_matches_pyproject():
    yaml = pytest.importorskip("yaml")
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    env_reqs = {_requirement_name(r): r.replace(" ", "") for r in pip_section if not r.startswith("-e")}
    assert "-e ." in pip_section, "environment.yml must install the package itself with `-e .`"

    project = _pyproject()["project"]
    wanted = list(project["dependencies"]) + [
        r for r in project["optional-dependencies"]["dev"] if not r.startswith("mamba2-tutorial")
    ]
    for req in wanted:
        name = _requirement_name(req)
        assert name in env_reqs, f"environment.yml lacks {req!r} (from pyproject.toml)"
        if name != "cuda-tile":  # pyproject's base dep has no extra; environment.yml asks for [tileiras]
            got = env_reqs[name]
            assert got == req.replace(" ", ""), f"{name}: pyproject says {req!r}, environment.yml {got!r}"
    from packaging.requirements import Requirement

    conda_cutile = next(Requirement(r) for r in pip_section if _requirement_name(r) == "cuda-tile")
    assert (conda_cutile.extras, str(conda_cutile.specifier)) == ({"tileiras"}, "==1.7.*"), conda_cutile
    base_cutile = next(Requirement(r) for r in project["dependencies"] if _requirement_name(r) == "cuda-tile")
    assert str(conda_cutile.marker) == str(base_cutile.marker), "cuda-tile's platform marker must agree"
    extra = set(env_reqs) - {_requirement_name(r) for r in wanted}
    assert not extra, f"environment.yml has requirements pyproject.toml lacks: {sorted(extra)}"


def test_python_version_bounds_agree():
    yaml = pytest.importorskip("yaml")
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    py = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    assert _pyproject()["project"]["requires-python"].lstrip(">=") in py


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make lab" in readme
    assert re.search(r"^make test$", ci, re.M), ".ci/run must call the README's test command"


def test_cuda_tile_is_pinned_to_1_7():
    from packaging.requirements import Requirement

    project = _pyproject()["project"]
    reqs = [Requirement(d) for d in project["dependencies"] + project["optional-dependencies"]["gpu"]]
    cutile = [r for r in reqs if r.name == "cuda-tile"]
    assert len(cutile) == 2, cutile  # the base dependency and the gpu extra's cuda-tile[tileiras]
    assert all(str(r.specifier) == "==1.7.*" for r in cutile), cutile


def test_repository_is_small():
    """Source, data and stripped notebooks only: no data dumps, logs or outputs (a few MiB in all)."""
    import subprocess

    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True).stdout
    paths = [ROOT / f for f in files.split("\0") if f and (ROOT / f).is_file()]
    if not paths:
        pytest.skip("not a git checkout")
    size = sum(p.stat().st_size for p in paths)
    assert size < 5 * 2**20, f"project files take {size / 2**20:.1f} MiB (keep under 5 MiB)"


#: words about how the repository is developed, which the product (README, notebooks, docs, code) never says
PROCESS_WORDS = (r"the lead\b|\bissue ?#?[0-9]|issue's|device (call|machine)|next session|this session|"
                 r"\.\./shared|64 MiB|/tmp/mamba2|attempt [0-9]|gpu-bundle|perf-notes")


def test_the_product_speaks_only_of_itself():
    """README, notebooks, docs, package and tools speak of the project and its users, never of how it is
    developed; the engineering history (docs/perf-history.md) is the one place that tells how it got here."""
    import subprocess

    run = subprocess.run(["git", "grep", "-nIiE", PROCESS_WORDS, "--", "README.md", "notebooks", "docs",
                          "mamba2_tutorial", "tools", "benchmarks", ":!docs/perf-history.md"],
                         cwd=ROOT, capture_output=True, text=True)
    if run.returncode == 128:
        pytest.skip("not a git checkout")
    assert not run.stdout, "development-process words in the product:\n" + run.stdout[:3000]
