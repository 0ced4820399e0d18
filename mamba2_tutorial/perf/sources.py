"""Which kernels a benchmark measured: a hash of the kernel sources, for the working tree or a git commit.

Every results file ``bench`` and ``bench-train`` write records :func:`kernels_sha256` of the code that ran, as
``"kernels_sha256"``. The notebooks and the tests compare it with the hash of the sources in hand: where they
differ, the kernels have changed since the numbers were measured, and a notebook that shows them says so
(:func:`staleness_note`).

The hash covers every ``.py`` file under ``mamba2_tutorial/kernels/`` and ``mamba2_tutorial/fast/`` (the
taught kernels, the fast path and the host code that launches them), sorted by their path inside the package;
each file's text with its line endings normalized to ``\\n``, so a checkout with CRLF endings hashes the
same. For results measured before the hash was recorded, :func:`kernels_sha256_at` computes it from a commit's
sources (``git show <commit>:<path>``), the same way.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

__all__ = ["KERNEL_DIRS", "RESULT_KEY", "kernel_sources", "kernels_sha256", "kernels_sha256_at",
           "hash_sources", "is_current", "staleness_note"]

#: the package directories whose sources the hash covers
KERNEL_DIRS = ("kernels", "fast")
#: the results' field that records the hash
RESULT_KEY = "kernels_sha256"
_PACKAGE = "mamba2_tutorial"


def _normalize(text: str) -> bytes:
    return text.replace("\r\n", "\n").replace("\r", "\n").encode("utf-8")


def _covered(relpath: str) -> bool:
    parts = PurePosixPath(relpath).parts
    return (len(parts) >= 2 and parts[0] in KERNEL_DIRS and relpath.endswith(".py")
            and "__pycache__" not in parts)


def hash_sources(sources: Mapping[str, str]) -> str:
    """sha256 (hex) of ``{path inside the package: text}``: each covered path and its normalized text, in
    sorted path order. ValueError when nothing is covered (a wrong directory, say)."""
    covered = sorted(p for p in sources if _covered(p))
    if not covered:
        raise ValueError(f"no kernel sources among {len(sources)} file(s): expected .py files under "
                         f"{', '.join(d + '/' for d in KERNEL_DIRS)} of the package")
    digest = hashlib.sha256()
    for path in covered:
        body = _normalize(sources[path])
        digest.update(f"{path}\0{len(body)}\0".encode())
        digest.update(body)
    return digest.hexdigest()


def kernel_sources(package_dir: Path | str | None = None) -> dict[str, str]:
    """``{path inside the package: text}`` of the covered files of an installed or checked-out package
    (default: this one)."""
    root = Path(package_dir) if package_dir is not None else Path(__file__).resolve().parents[1]
    out = {}
    for d in KERNEL_DIRS:
        for f in sorted((root / d).rglob("*.py")):
            rel = f.relative_to(root).as_posix()
            if _covered(rel):
                out[rel] = f.read_bytes().decode("utf-8")
    return out


def kernels_sha256(package_dir: Path | str | None = None) -> str:
    """The hash of the kernel sources of this package (or of the package at ``package_dir``)."""
    return hash_sources(kernel_sources(package_dir))


def _git(repo: Path, args: Iterable[str], stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise RuntimeError("git is not installed: the hash of a commit's sources needs it") from exc
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}: {done.stderr.decode().strip()}")
    return done.stdout


def kernels_sha256_at(commit: str, repo: Path | str | None = None) -> str:
    """The hash of the kernel sources as they were at ``commit`` (the package at ``mamba2_tutorial/`` of the
    git repository ``repo``, default: the checkout this package lives in). RuntimeError where git or the
    commit is missing (a shallow clone, say)."""
    repo = Path(repo) if repo is not None else Path(__file__).resolve().parents[2]
    if not isinstance(commit, str) or not commit.strip() or commit.startswith("-"):
        raise ValueError(f"commit must be a commit name such as 'f271671', got {commit!r}")
    listing = _git(repo, ["ls-tree", "-r", "-z", commit, "--", *(f"{_PACKAGE}/{d}" for d in KERNEL_DIRS)])
    blobs = {}
    for entry in filter(None, listing.decode().split("\0")):
        meta, path = entry.split("\t", 1)
        rel = path[len(_PACKAGE) + 1:]
        if meta.split()[1] == "blob" and _covered(rel):
            blobs[rel] = meta.split()[2]
    if not blobs:
        dirs = ", ".join(f"{_PACKAGE}/{d}/" for d in KERNEL_DIRS)
        raise RuntimeError(f"commit {commit} has no kernel sources under {dirs}")
    # one git process for every blob: `cat-file --batch` answers "<sha> blob <size>\n<body>\n" per request
    raw = _git(repo, ["cat-file", "--batch"], stdin="".join(f"{sha}\n" for sha in blobs.values()).encode())
    texts, pos = {}, 0
    for rel in blobs:
        header_end = raw.index(b"\n", pos)
        size = int(raw[pos:header_end].split()[2])
        texts[rel] = raw[header_end + 1:header_end + 1 + size].decode("utf-8")
        pos = header_end + 1 + size + 1
    return hash_sources(texts)


def is_current(results: Mapping, current: str | None = None) -> bool | None:
    """Whether ``results`` measured the kernels in hand: True or False, None where the results record no
    hash."""
    recorded = results.get(RESULT_KEY)
    if recorded is None:
        return None
    return recorded == (current if current is not None else kernels_sha256())


def staleness_note(results: Mapping, current: str | None = None) -> str:
    """A line to print next to a result's numbers: empty where it measured the kernels in hand, else that it
    measured kernels older than these (or that it records no hash)."""
    state = is_current(results, current)
    if state:
        return ""
    what = f"{results.get('device', 'a GPU')}, {results.get('date', 'undated')}"
    if state is None:
        return (f"({what}: the results record no hash of the kernels they measured; they may be older than "
                "these)")
    return (f"measured on kernels older than these ({what}: kernel sources {results[RESULT_KEY][:12]}, "
            f"these are {(current or kernels_sha256())[:12]}); the kernels have changed since")
