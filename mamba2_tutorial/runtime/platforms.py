"""Where cuTile runs, and what a learner does where it does not.

cuda-tile 1.7 ships wheels for Linux and Windows, on x86-64 and on ARM64, and nothing else (no macOS wheel, no
source distribution). The project installs everywhere (``pyproject.toml`` asks for cuda-tile only where its
wheels exist, with :data:`CUTILE_MARKER`), and ``import mamba2_tutorial`` never needs cuTile: the notebooks
and exercises before the kernels are plain PyTorch. The kernel notebooks and the cuTile exercises start with

    import mamba2_tutorial as m2
    m2.require_cutile()

which does nothing where cuTile imports, and elsewhere stops the notebook at that cell with
:class:`CuTileUnavailable`: cuTile is not available on this platform, and how to continue (the dev container
in ``.devcontainer/``, or a Linux or Windows machine).

Which notebooks are which is read from the notebooks themselves (:func:`course_map`): a notebook is a kernel
notebook when its first code cell calls ``require_cutile()``, so every message that lists them stays true as
notebooks are added.
"""

from __future__ import annotations

import functools
import json
import platform
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CUTILE_MARKER",
    "CUTILE_PLATFORMS",
    "CourseMap",
    "CuTileUnavailable",
    "HOW_TO_CONTINUE",
    "cutile_available",
    "cutile_import_error",
    "cutile_unavailable_message",
    "cutile_unavailable_reason",
    "course_map",
    "has_cutile_wheels",
    "is_cutile_import_error",
    "notebook_requires_cutile",
    "platform_label",
    "span",
    "require_cutile",
    "this_platform",
]

#: (``platform.system()``, ``platform.machine()``) of every platform cuda-tile 1.7 has wheels for.
CUTILE_PLATFORMS: tuple[tuple[str, str], ...] = (
    ("Linux", "x86_64"),
    ("Linux", "aarch64"),
    ("Windows", "AMD64"),
    ("Windows", "ARM64"),
)

#: The PEP 508 environment marker of the cuda-tile requirements in pyproject.toml and environment.yml: true
#: exactly on :data:`CUTILE_PLATFORMS` (tests/test_platforms.py evaluates it on each platform).
CUTILE_MARKER = (
    '(platform_system == "Linux" and (platform_machine == "x86_64" or platform_machine == "aarch64"))'
    ' or (platform_system == "Windows" and (platform_machine == "AMD64" or platform_machine == "ARM64"))'
)

_SYSTEM_NAMES = {"Darwin": "macOS", "Linux": "Linux", "Windows": "Windows"}
_MACHINE_NOTES = {("Darwin", "arm64"): "Apple Silicon", ("Darwin", "x86_64"): "Intel"}

#: Where the kernel notebooks run when this machine cannot run them.
HOW_TO_CONTINUE = (
    "To run the kernels, either\n"
    "  - open this repository in its dev container (.devcontainer/: a Linux image with Python and the "
    "project installed by `make install`; in VS Code: \"Dev Containers: Reopen in Container\", or start a "
    "GitHub Codespace) and run the kernel notebooks there, on the CPU tier; or\n"
    "  - use a Linux or Windows machine (x86-64 or ARM64). The CPU tier needs no GPU; the GPU tier needs an "
    "NVIDIA GPU of compute capability 8.0 or newer."
)


class CuTileUnavailable(ImportError):
    """cuTile (``cuda.tile``) cannot be imported here; the message says why and how to continue.

    An ImportError, so code that falls back on ``except ImportError`` keeps working. In Jupyter it shows as
    its message alone, without a traceback: the message is the whole story.
    """

    def _render_traceback_(self) -> list[str]:  # IPython's hook for how an exception is shown
        return [f"\x1b[31m{type(self).__name__}\x1b[0m: {self}"]


def this_platform() -> tuple[str, str]:
    """(``platform.system()``, ``platform.machine()``), e.g. ("Darwin", "arm64") or ("Linux", "x86_64")."""
    return platform.system(), platform.machine()


def _resolve(system: str | None, machine: str | None) -> tuple[str, str]:
    """The given system and machine, with this platform's in place of a None."""
    if system is None or machine is None:
        here_system, here_machine = this_platform()
        system = here_system if system is None else system
        machine = here_machine if machine is None else machine
    return system, machine


def platform_label(system: str | None = None, machine: str | None = None) -> str:
    """A platform as a learner names it: "macOS arm64 (Apple Silicon)", "Linux aarch64", "Windows AMD64"."""
    system, machine = _resolve(system, machine)
    label = f"{_SYSTEM_NAMES.get(system, system or 'unknown system')} {machine or 'unknown machine'}"
    note = _MACHINE_NOTES.get((system, machine))
    return f"{label} ({note})" if note else label


def has_cutile_wheels(system: str | None = None, machine: str | None = None) -> bool:
    """Whether cuda-tile publishes wheels for this platform (default: the one running this)."""
    return _resolve(system, machine) in CUTILE_PLATFORMS


@functools.lru_cache(maxsize=1)
def cutile_import_error() -> ImportError | None:
    """None when ``import cuda.tile`` works here, else the ImportError it raised (tried once per process)."""
    try:
        import cuda.tile  # noqa: F401
    except ImportError as exc:
        return exc
    return None


def is_cutile_import_error(exc: BaseException) -> bool:
    """Whether ``exc`` is cuTile failing to import: :class:`CuTileUnavailable`, or a ModuleNotFoundError for
    ``cuda.tile`` (or its namespace package ``cuda``, absent where no CUDA Python package is installed)."""
    if isinstance(exc, CuTileUnavailable):
        return True
    if not isinstance(exc, ModuleNotFoundError):
        return False
    name = exc.name or ""
    return name == "cuda" or name == "cuda.tile" or name.startswith(("cuda.tile.", "cuda.tile_"))


def cutile_available() -> bool:
    """Whether cuTile imports here, so the kernel notebooks can run (on the GPU or on the CPU tier)."""
    return cutile_import_error() is None


def cutile_unavailable_reason(error: BaseException | str | None = None, system: str | None = None,
                              machine: str | None = None) -> str:
    """One line: why cuTile does not import here (``error`` defaults to this process's import error)."""
    system, machine = _resolve(system, machine)
    label = platform_label(system, machine)
    if not has_cutile_wheels(system, machine):
        return f"cuTile is not available on this platform, {label}: cuda-tile has no wheels for it"
    error = cutile_import_error() if error is None else error
    detail = f" ({error})" if error else ""
    return f"cuTile is not available here, {label}: `import cuda.tile` fails{detail}"


def cutile_unavailable_message(error: BaseException | str | None = None, system: str | None = None,
                               machine: str | None = None) -> str:
    """The whole explanation a learner reads: what does not work here, what does, and how to continue."""
    system, machine = _resolve(system, machine)
    lines = [cutile_unavailable_reason(error, system, machine) + "."]
    if not has_cutile_wheels(system, machine):
        lines.append("cuda-tile is published for Linux and Windows (x86-64 and ARM64) only, so the cuTile "
                     f"kernels ({course_map().kernel_phrase}) cannot run on this machine. "
                     f"{course_map().plain_phrase.capitalize()} need only PyTorch and run here.")
        lines.append(HOW_TO_CONTINUE)
    else:
        lines.append("This platform has cuda-tile wheels: install the project with its dependencies "
                     "(`make install`, or `pip install -e \".[dev]\"` in the repository; they pin "
                     "cuda-tile 1.7.*), then restart Python (in Jupyter: the kernel). Check with "
                     "`python -m mamba2_tutorial env`.")
    return "\n".join(lines)


def notebook_requires_cutile(path: str | Path) -> bool:
    """Whether the notebook at ``path`` is a kernel notebook: its first code cell calls ``require_cutile()``
    (the test suite skips such notebooks where cuTile is not available, and checks that they stop there)."""
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    first = next((c for c in cells if c["cell_type"] == "code"), None)
    source = "".join(first["source"]) if first else ""
    return re.search(r"\brequire_cutile\(\)", source) is not None


def require_cutile() -> None:
    """Return quietly where cuTile imports; otherwise raise :class:`CuTileUnavailable` with the explanation.

    The first code cell of every kernel notebook and cuTile exercise calls it, so that on a machine without
    cuTile the notebook stops there, saying why and how to continue, instead of failing later on an import.
    """
    error = cutile_import_error()
    if error is not None:
        raise CuTileUnavailable(cutile_unavailable_message(error)) from error


# -- which notebooks need cuTile, read from the notebooks ----------------------------------------------------
#: the repository's notebooks folder (the project is installed in editable mode from a clone)
NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"


def span(numbers, width: int = 1) -> str:
    """Numbers as ranges, zero-padded to ``width``: ``[0, 1, 2, 3, 9, 10]`` -> ``"00-03 and 09-10"``."""
    nums = sorted(set(numbers))
    runs: list[tuple[int, int]] = []
    for n in nums:
        if runs and n == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    parts = [f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in runs]
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


@dataclass(frozen=True)
class CourseMap:
    """The notebooks and exercises of the course, split by whether they need cuTile.

    ``plain`` and ``kernel`` hold notebook numbers (0 for ``00_start_here``), ``plain_exercises`` and
    ``kernel_exercises`` exercise numbers (5 for ``ex05_...``; the tiers of one exercise count once)."""

    plain: tuple[int, ...]
    kernel: tuple[int, ...]
    plain_exercises: tuple[int, ...]
    kernel_exercises: tuple[int, ...]

    @property
    def notebooks(self) -> tuple[int, ...]:
        return tuple(sorted(self.plain + self.kernel))

    @property
    def exercises(self) -> tuple[int, ...]:
        return tuple(sorted(self.plain_exercises + self.kernel_exercises))

    @staticmethod
    def _phrase(notebooks, exercises) -> str:
        parts = []
        if notebooks:
            parts.append(f"notebook{'s' if len(notebooks) > 1 else ''} {span(notebooks, 2)}")
        if exercises:
            parts.append(f"exercise{'s' if len(exercises) > 1 else ''} {span(exercises)}")
        return " and ".join(parts) if parts else "no notebook"

    @property
    def plain_phrase(self) -> str:
        """e.g. "notebooks 00-03 and 09 and exercises 1-3": what runs without cuTile."""
        return self._phrase(self.plain, self.plain_exercises)

    @property
    def kernel_phrase(self) -> str:
        """e.g. "notebooks 04-08 and 10-13 and exercises 4-8": what needs cuTile."""
        return self._phrase(self.kernel, self.kernel_exercises)

    @property
    def all_phrase(self) -> str:
        """e.g. "every notebook (00-13) and exercise (1-8)"."""
        return f"every notebook ({span(self.notebooks, 2)}) and exercise ({span(self.exercises)})"


_NUMBERED = re.compile(r"^(?:ex)?(\d+)_")


def course_map(root: str | Path | None = None) -> CourseMap:
    """Read the course from ``root`` (default: the repository's ``notebooks/``): every ``NN_*.ipynb`` there
    and every ``exNN_*.ipynb`` in ``exercises/``, each classified by :func:`notebook_requires_cutile`.

    Raises FileNotFoundError, saying where it looked, when there are no notebooks (the package was installed
    without its repository)."""
    folder = Path(root) if root is not None else NOTEBOOKS_DIR
    return _course_map(str(folder.resolve()))


@functools.lru_cache(maxsize=8)
def _course_map(folder: str) -> CourseMap:
    root = Path(folder)
    groups: dict[str, set[int]] = {"plain": set(), "kernel": set(), "plain_ex": set(), "kernel_ex": set()}
    for sub, suffix in ((root, ""), (root / "exercises", "_ex")):
        for path in sorted(sub.glob("*.ipynb")):
            m = _NUMBERED.match(path.name)
            if not m or (suffix == "_ex") != path.name.startswith("ex"):
                continue
            kind = "kernel" if notebook_requires_cutile(path) else "plain"
            groups[kind + suffix].add(int(m.group(1)))
    if not groups["plain"] and not groups["kernel"]:
        raise FileNotFoundError(f"no course notebooks (NN_*.ipynb) in {root}: the course map is read from "
                                "the repository's notebooks/ folder (install the project from a clone)")
    # an exercise whose tiers disagree counts as a kernel exercise
    groups["plain_ex"] -= groups["kernel_ex"]
    return CourseMap(*(tuple(sorted(groups[k])) for k in ("plain", "kernel", "plain_ex", "kernel_ex")))
