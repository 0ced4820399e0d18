"""The hash of the kernel sources that every results file records: stable, blind to line endings, sensitive
to any change of a kernel file and to nothing else; the same for a git commit's sources as for a checkout of
that commit; and recorded, right, in every shipped result."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mamba2_tutorial.perf import bench_train, sources
from mamba2_tutorial.perf import results as res

PACKAGE = Path(sources.__file__).resolve().parents[1]
REPO = PACKAGE.parent
HEX64 = re.compile(r"[0-9a-f]{64}")


def _copy_package(tmp_path: Path) -> Path:
    dst = tmp_path / "mamba2_tutorial"
    for d in sources.KERNEL_DIRS:
        shutil.copytree(PACKAGE / d, dst / d, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def test_the_hash_is_stable_and_covers_the_kernel_files():
    found = sources.kernel_sources()
    assert "kernels/chunk_scan.py" in found and "fast/scan_chunk.py" in found and "fast/steps.py" in found
    assert all(p.split("/")[0] in sources.KERNEL_DIRS and p.endswith(".py") for p in found)
    h = sources.kernels_sha256()
    assert HEX64.fullmatch(h) and h == sources.kernels_sha256() == sources.hash_sources(found)


def test_line_endings_do_not_matter_and_any_edit_does(tmp_path):
    pkg = _copy_package(tmp_path)
    here = sources.kernels_sha256()
    assert sources.kernels_sha256(pkg) == here
    scan = pkg / "kernels" / "chunk_scan.py"
    text = scan.read_bytes()
    scan.write_bytes(text.replace(b"\n", b"\r\n"))                   # a Windows checkout
    assert sources.kernels_sha256(pkg) == here
    scan.write_bytes(text.replace(b"TM, TK", b"TM,  TK", 1))          # one character
    assert sources.kernels_sha256(pkg) != here
    scan.write_bytes(text)
    (pkg / "fast" / "notes.txt").write_text("not a source")           # not a .py file
    (pkg / "fast" / "__pycache__").mkdir()
    (pkg / "fast" / "__pycache__" / "x.py").write_text("cache")
    (pkg / "perf").mkdir()
    (pkg / "perf" / "bench.py").write_text("outside the kernel directories")
    assert sources.kernels_sha256(pkg) == here
    (pkg / "fast" / "new_kernel.py").write_text("# a new kernel file\n")
    assert sources.kernels_sha256(pkg) != here
    # a file moved to another name is another set of sources
    sources_now = sources.kernel_sources(pkg)
    moved = dict(sources_now)
    moved["fast/renamed.py"] = moved.pop("fast/new_kernel.py")
    assert sources.hash_sources(moved) != sources.hash_sources(sources_now)


def test_bad_input_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no kernel sources"):
        sources.hash_sources({"perf/bench.py": "x"})
    with pytest.raises(ValueError, match="no kernel sources"):
        sources.kernels_sha256(tmp_path)
    with pytest.raises(ValueError, match="commit must be"):
        sources.kernels_sha256_at("--all", REPO)


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@needs_git
def test_a_commits_hash_is_its_checkouts(tmp_path):
    repo = tmp_path / "repo"
    pkg = _copy_package(repo)
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "kernels")
    first = _git(repo, "rev-parse", "HEAD")
    assert sources.kernels_sha256_at(first, repo) == sources.kernels_sha256(pkg) == sources.kernels_sha256()
    (pkg / "fast" / "steps.py").write_text((pkg / "fast" / "steps.py").read_text() + "\n# changed\n")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "a change")
    assert sources.kernels_sha256_at("HEAD", repo) == sources.kernels_sha256(pkg) != sources.kernels_sha256()
    assert sources.kernels_sha256_at(first, repo) == sources.kernels_sha256()   # the old commit's, unchanged
    with pytest.raises(RuntimeError, match="failed"):
        sources.kernels_sha256_at("0" * 40, repo)


def _shipped_files() -> list[Path]:
    names = list(res.SHIPPED_FORWARD) + list(bench_train.SHIPPED_TRAINING)
    return [PACKAGE / "data" / "benchmarks" / f"{n}.json" for n in names]


@pytest.mark.parametrize("path", _shipped_files(), ids=lambda p: p.stem)
def test_every_shipped_result_records_its_kernels(path):
    data = json.loads(path.read_text())
    assert HEX64.fullmatch(data.get(sources.RESULT_KEY, "")), f"{path.name} records no kernels_sha256"
    commit = data.get("kernels_commit")
    if commit is None:
        return  # measured with the hash recorded by the benchmark itself
    try:
        at_commit = sources.kernels_sha256_at(commit, REPO)
    except RuntimeError as exc:  # a shallow clone, or a copy without .git
        pytest.skip(f"{path.name}: commit {commit}'s sources are not in this checkout ({exc})")
    assert data[sources.RESULT_KEY] == at_commit, f"{path.name}: not the hash of {commit}'s kernel sources"


def test_the_staleness_note():
    current = sources.kernels_sha256()
    assert sources.is_current({"kernels_sha256": current}) is True
    assert sources.staleness_note({"kernels_sha256": current}) == ""
    old = {"kernels_sha256": "0" * 64, "device": "NVIDIA H200", "date": "2026-12-04"}
    assert sources.is_current(old) is False
    note = sources.staleness_note(old)
    assert "measured on kernels older than these" in note and "NVIDIA H200" in note
    assert sources.is_current({}) is None and "no hash" in sources.staleness_note({})


def _readme_paragraphs() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Performance", 1)[1].split("\n## ", 1)[0]
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", section) if p.strip()]


@pytest.mark.skipif(not (REPO / "README.md").is_file(), reason="no README beside the package (installed)")
def test_the_readme_says_when_its_numbers_measured_older_kernels():
    """Every shipped result the README's Performance section cites: where its kernels have changed since, the
    paragraph that cites it says so."""
    current = sources.kernels_sha256()
    cited = 0
    for path in _shipped_files():
        data = json.loads(path.read_text())
        paragraphs = [p for p in _readme_paragraphs() if path.name in p]
        cited += bool(paragraphs)
        if data[sources.RESULT_KEY] != current:
            for p in paragraphs:
                # the sentence that names the file says so, not only another sentence of its paragraph
                sentences = [s for s in re.split(r"(?<=[.:])\s+(?=[A-Z(])", p) if path.name in s]
                where = (path.name, p[:300])
                assert any("measured on kernels older than these" in s for s in sentences), where
                assert not any("on the kernels in this repository" in s for s in sentences), where
    assert cited, "the README's Performance section cites no shipped result"
