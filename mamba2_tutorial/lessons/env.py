"""The environment report: versions, GPU, and which tier (GPU or CPU) the kernel notebooks will use.

``environment_report()`` collects facts (Python, platform, torch, cuda-tile, tileiras, GPU name, compute
capability, driver, ``CUDA_HOME``), asks :func:`mamba2_tutorial.runtime.backends.select_backend` which tier
runs the kernels (``"none"`` where cuTile is not available, e.g. on macOS), lists actionable problems (what
is wrong and the command that fixes it) and ends with a verdict: which notebooks run here, and how to
continue where the kernel notebooks cannot. ``python -m mamba2_tutorial env`` prints it: the pre-class check.

The decision logic is in pure functions (:func:`diagnose`, the ``parse_*`` helpers) so it can be tested
with fake inputs on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..runtime.platforms import (
    HOW_TO_CONTINUE,
    course_map,
    cutile_import_error,
    has_cutile_wheels,
    platform_label,
    this_platform,
)

__all__ = [
    "EnvironmentReport",
    "Problem",
    "environment_report",
    "diagnose",
    "parse_version",
    "parse_driver_version",
    "parse_tileiras_version",
    "cuda_home_toolkit_version",
    "find_tileiras",
    "main",
    "MIN_CAPABILITY",
    "MIN_DRIVER_MAJOR",
    "MIN_TILEIRAS",
    "MIN_CUDA_HOME",
    "TILEIRAS_INSTALL",
]

#: cuTile (tileiras 13.4) targets sm_80 and newer: Ampere, Ada, Hopper, Blackwell.
MIN_CAPABILITY = (8, 0)
#: CUDA 13 needs an r580 or newer driver.
MIN_DRIVER_MAJOR = 580
#: tileiras 13.3 rejects ``ct.mma`` on sm_86 and sm_90; 13.4 compiles them.
MIN_TILEIRAS = (13, 4)
#: a CUDA_HOME toolkit older than this feeds tileiras an old ptxas/libnvvm ("return code 5").
MIN_CUDA_HOME = (13, 4)
TILEIRAS_INSTALL = 'pip install "cuda-tile[tileiras]==1.7.*"'


@dataclass(frozen=True)
class Problem:
    """One thing that stops (or will stop) the GPU tier or the compile check, and how to fix it."""

    code: str  # short key: "capability", "driver", "tileiras", "tileiras_version", "cuda_home", ...
    message: str  # what is wrong and the command or setting that fixes it

    def __str__(self) -> str:
        return self.message


@dataclass
class EnvironmentReport:
    """Facts about this machine and the tier the kernel notebooks will use.

    ``tier`` is ``"gpu"`` (cuTile kernels run on the GPU), ``"cpu"`` (they run on the package's CPU tile
    executor) or ``"none"`` (cuTile is not available: only the plain PyTorch notebooks and exercises run);
    ``tier_reason`` says why. ``problems`` lists actionable messages; empty means nothing to fix.
    ``verdict`` says which notebooks run here and, where the kernels cannot, how to continue.
    """

    python: str
    platform: str
    package: str
    torch: str | None
    torch_cuda: str | None  # CUDA version torch was built with; None for a CPU build
    cuda_tile: str | None
    tileiras_path: str | None
    tileiras_version: str | None
    cuda_available: bool
    gpu_count: int
    gpu_name: str | None
    capability: tuple[int, int] | None
    driver: str | None
    driver_cuda: str | None  # the newest CUDA the driver supports (from torch), e.g. "13.0"
    cuda_home: str | None
    cuda_home_version: str | None
    tier: str
    tier_reason: str
    problems: list[Problem] = field(default_factory=list)
    system: str = ""  # platform.system(): "Linux", "Darwin", "Windows"
    machine: str = ""  # platform.machine(): "x86_64", "arm64", "aarch64", "AMD64"
    cutile_error: str | None = None  # why `import cuda.tile` fails; None when it imports

    @property
    def verdict(self) -> str:
        """Which notebooks and exercises run here, and how to continue where the kernel notebooks cannot.

        The lists come from the notebooks themselves
        (:func:`mamba2_tutorial.runtime.platforms.course_map`)."""
        course = course_map()
        if self.tier in ("gpu", "cpu"):
            where = f"on the {self.tier.upper()} tier"
            if self.tier == "gpu" and self.gpu_name:
                where += f" ({self.gpu_name})"
            return f"READY: {course.all_phrase} runs here, the cuTile kernels {where}."
        head = (f"NOT READY FOR THE KERNELS: {course.plain_phrase} run here; the kernel "
                f"{course.kernel_phrase} need cuTile, which is not available here.")
        if has_cutile_wheels(self.system, self.machine):
            return head + ' Install it: `make install`, or `pip install -e ".[dev]"` in the repository.'
        return f"{head}\n{HOW_TO_CONTINUE}"

    # -- presentation -----------------------------------------------------------------------------------
    def rows(self) -> list[tuple[str, str]]:
        """(label, value) pairs, in the order they are printed."""
        cap = f"{self.capability[0]}.{self.capability[1]} (sm_{self.capability[0]}{self.capability[1]})" if (
            self.capability
        ) else "-"
        tileiras = "not found"
        if self.tileiras_path:
            tileiras = f"{self.tileiras_version or 'unknown version'} ({self.tileiras_path})"
        gpu = self.gpu_name or "none visible"
        if self.gpu_count > 1:
            gpu += f" (device 0 of {self.gpu_count})"
        driver = self.driver or "-"
        if self.driver_cuda:
            driver += f" (supports CUDA {self.driver_cuda})"
        cuda_home = "not set"
        if self.cuda_home:
            cuda_home = f"{self.cuda_home} (CUDA {self.cuda_home_version or 'version unknown'})"
        wheels = "cuda-tile wheels exist" if has_cutile_wheels(self.system, self.machine) else (
            "no cuda-tile wheels for it")
        cuda_tile = self.cuda_tile or "not installed"
        if self.cutile_error:
            cuda_tile += f" (`import cuda.tile` fails: {self.cutile_error})"
        return [
            ("Python", f"{self.python} ({self.platform})"),
            ("platform", f"{platform_label(self.system, self.machine)}: {wheels}"),
            ("mamba2_tutorial", self.package),
            ("torch", f"{self.torch or 'not installed'} (CUDA build: {self.torch_cuda or 'none, CPU only'})"),
            ("cuda-tile", cuda_tile),
            ("tileiras", tileiras),
            ("CUDA available", "yes" if self.cuda_available else "no"),
            ("GPU", gpu),
            ("compute capability", cap),
            ("NVIDIA driver", driver),
            ("CUDA_HOME", cuda_home),
        ]

    def __str__(self) -> str:
        width = max(len(label) for label, _ in self.rows())
        lines = ["mamba2_tutorial environment report"]
        lines += [f"  {label:<{width}}  {value}" for label, value in self.rows()]
        lines.append(f"Tier: {self.tier.upper()}: {self.tier_reason}")
        if self.problems:
            lines.append("To fix:")
            lines += [f"  {i}. {p.message}" for i, p in enumerate(self.problems, 1)]
        elif self.tier != "none":
            lines.append("Nothing to fix.")
        lines.append(f"Verdict: {self.verdict}")
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        lines = ["**mamba2_tutorial environment report**", "", "| | |", "|---|---|"]
        lines += [f"| {label} | `{value}` |" for label, value in self.rows()]
        lines += ["", f"**Tier: {self.tier.upper()}**: {self.tier_reason}", ""]
        if self.problems:
            lines.append("**To fix:**")
            lines += [f"{i}. {p.message}" for i, p in enumerate(self.problems, 1)]
        elif self.tier != "none":
            lines.append("Nothing to fix.")
        verdict = self.verdict.replace("\n  - ", "\n- ").replace("\n", "\n\n", 1)
        lines += ["", f"**Verdict:** {verdict}"]
        return "\n".join(lines)

    def print(self, file=None) -> None:
        print(str(self), file=file or sys.stdout)

    def as_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["problems"] = [dataclasses.asdict(p) for p in self.problems]
        return out


# -- pure helpers (tested with fake inputs) ----------------------------------------------------------------
def parse_version(text: str | None) -> tuple[int, ...] | None:
    """The leading dotted integers of a version string: ``"13.4.92"`` -> (13, 4, 92), ``"2.13.0+cpu"`` ->
    (2, 13, 0), ``"580"`` -> (580,). None if there are none."""
    if not text:
        return None
    m = re.search(r"\d+(?:\.\d+)*", text)
    return tuple(int(part) for part in m.group(0).split(".")) if m else None


def parse_driver_version(text: str | None) -> str | None:
    """The driver version from ``nvidia-smi --query-gpu=driver_version --format=csv,noheader`` output (one
    line per GPU) or from ``/proc/driver/nvidia/version``. None if absent."""
    if not text:
        return None
    m = re.search(r"Kernel Module\s+(\d+(?:\.\d+)+)", text)
    if m:
        return m.group(1)
    for line in text.splitlines():
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)+)\s*", line)
        if m:
            return m.group(1)
    return None


def parse_tileiras_version(text: str | None) -> str | None:
    """The version in ``tileiras --version`` output: ``"... release 13.4, V13.4.92"`` -> ``"13.4.92"``."""
    if not text:
        return None
    m = re.search(r"\bV(\d+\.\d+(?:\.\d+)?)", text) or re.search(r"release (\d+\.\d+)", text)
    return m.group(1) if m else None


def diagnose(
    *,
    cuda_available: bool,
    capability: tuple[int, int] | None = None,
    driver: str | None = None,
    driver_cuda: str | None = None,
    gpu_name: str | None = None,
    torch_cuda: str | None = "13.0",
    cuda_tile: str | None = "1.7.0",
    tileiras: str | None = None,
    tileiras_version: str | None = None,
    cuda_home: str | None = None,
    cuda_home_version: str | None = None,
    cutile_error: str | None = None,
    system: str = "Linux",
    machine: str = "x86_64",
) -> list[Problem]:
    """Actionable problems for the given facts (pure: no probing).

    ``cutile_error`` is why ``import cuda.tile`` fails (None: it imports). ``system`` and ``machine`` are
    ``platform.system()`` and ``platform.machine()``: where cuda-tile has no wheels (macOS), nothing can be
    installed for the kernels, so there is nothing to fix (the report's verdict says where to run them).

    ``driver`` is the driver version (``"580.95.05"``); ``driver_cuda`` the newest CUDA version the driver
    supports (``"13.0"``), used when the driver version itself is unknown (CUDA 13 needs r580).
    ``tileiras`` is the compiler's path (None: not found). A driver is evidence of a GPU even when torch
    cannot see one (a CPU build of torch). Problems about tileiras and CUDA_HOME matter on every machine:
    the compile check (``python -m mamba2_tutorial compile``) runs tileiras without a GPU.
    """
    problems: list[Problem] = []
    add = lambda code, *parts: problems.append(Problem(code, "".join(parts)))
    name = gpu_name or "the GPU"
    if not has_cutile_wheels(system, machine):
        return problems
    if cuda_tile is None:
        add("cuda_tile", 'cuda-tile is not installed: run `pip install -e ".[gpu]"` in the repository ',
            "(it pins cuda-tile 1.7.*).")
    elif (v := parse_version(cuda_tile)) is not None and v[:2] != (1, 7):
        add("cuda_tile", f"cuda-tile {cuda_tile} is installed but this course pins 1.7.*: ",
            f"run `{TILEIRAS_INSTALL}`.")
    elif cutile_error is not None:
        add("cuda_tile", f"cuda-tile {cuda_tile} is installed but `import cuda.tile` fails ",
            f"({cutile_error}): ", 'reinstall it with `pip install --force-reinstall "cuda-tile==1.7.*"`.')
    if not cuda_available and driver is not None and torch_cuda is None:
        add("torch_cpu_build", f"An NVIDIA driver ({driver}) is present but torch is a CPU-only build: ",
            "install a CUDA 13 build, e.g. ",
            "`pip install torch --index-url https://download.pytorch.org/whl/cu130`.")
    if cuda_available and capability is not None and tuple(capability) < MIN_CAPABILITY:
        major, minor = capability
        add("capability", f"{name} has compute capability {major}.{minor} (sm_{major}{minor}), ",
            "but cuTile needs 8.0 or newer (Ampere, Ada, Hopper or Blackwell): the kernels ",
            "will run on the CPU tier here; use an sm_80+ GPU for the GPU tier.")
    drv = parse_version(driver)
    if drv is not None and drv[0] < MIN_DRIVER_MAJOR:
        add("driver", f"NVIDIA driver {driver} is older than r{MIN_DRIVER_MAJOR}, which CUDA 13 and ",
            "cuTile need: install driver 580 or newer (check with `nvidia-smi`).")
    elif drv is None and (dc := parse_version(driver_cuda)) is not None and dc[:2] < (13, 0):
        add("driver", f"The NVIDIA driver supports CUDA {driver_cuda} at most; CUDA 13 and cuTile need ",
            f"driver r{MIN_DRIVER_MAJOR} or newer: update the driver (check with `nvidia-smi`).")
    if tileiras is None:
        add("tileiras", "tileiras (the cuTile compiler) was not found on PATH, in CUDA_HOME or as a ",
            f"pip package: run `{TILEIRAS_INSTALL}` (or `pip install -e \".[gpu]\"`). ",
            "GPU runs and the compile check need it.")
    elif (tv := parse_version(tileiras_version)) is not None and tv[:2] < MIN_TILEIRAS:
        add("tileiras_version", f"tileiras {tileiras_version} ({tileiras}) is older than 13.4 ",
            f"(13.3 rejects ct.mma on sm_86/sm_90): run `{TILEIRAS_INSTALL}`, ",
            "or put a CUDA 13.4+ toolkit first on PATH.")
    hv = parse_version(cuda_home_version)
    if cuda_home is not None and hv is not None and hv[:2] < MIN_CUDA_HOME:
        add("cuda_home", f"CUDA_HOME={cuda_home} is CUDA {cuda_home_version}, older than 13.4: ",
            "tileiras can pick up its old ptxas/libnvvm and fail with the opaque ",
            "'failed to compile Tile IR program' / return code 5. Point CUDA_HOME at a 13.4+ ",
            "toolkit, or `unset CUDA_HOME` to use the pip-installed one.")
    return problems


# -- probing this machine -----------------------------------------------------------------------------------
def _run(cmd: list[str], timeout: float = 20.0) -> str | None:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout if res.returncode == 0 else None


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def find_tileiras() -> str | None:
    """The tileiras cuTile would use, found the way cuTile finds it (pip package ``nvidia-cuda-tileiras``,
    then PATH, then ``$CUDA_HOME/bin``, then default toolkit folders); None if there is none."""
    try:
        from cuda.tile._compile import _find_compiler_bin  # private, pinned with cuda-tile 1.7.*
    except (ImportError, AttributeError):
        _find_compiler_bin = None
    if _find_compiler_bin is not None:
        try:
            return _find_compiler_bin().path
        except FileNotFoundError:
            return None
    found = shutil.which("tileiras")
    if found is None and os.environ.get("CUDA_HOME"):
        found = shutil.which("tileiras", path=os.path.join(os.environ["CUDA_HOME"], "bin"))
    return found


def cuda_home_toolkit_version(cuda_home: str | os.PathLike | None) -> str | None:
    """The CUDA version of the toolkit at ``cuda_home``: from ``version.json``, else ``version.txt``, else
    ``bin/nvcc --version``. None if it cannot be told."""
    if not cuda_home:
        return None
    root = Path(cuda_home)
    try:
        data = json.loads((root / "version.json").read_text())
        version = data.get("cuda", {}).get("version")
        if version:
            return str(version)
    except (OSError, ValueError, AttributeError):
        pass
    try:
        m = re.search(r"CUDA Version\s+(\d+(?:\.\d+)+)", (root / "version.txt").read_text())
        if m:
            return m.group(1)
    except OSError:
        pass
    nvcc = root / "bin" / "nvcc"
    if nvcc.exists():
        out = _run([str(nvcc), "--version"])
        m = re.search(r"release (\d+\.\d+)", out or "")
        if m:
            return m.group(1)
    return None


def _driver_version() -> str | None:
    if shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        version = parse_driver_version(_run(query))
        if version:
            return version
    try:
        return parse_driver_version(Path("/proc/driver/nvidia/version").read_text())
    except OSError:
        return None


def _driver_cuda_version(torch) -> str | None:
    """The newest CUDA version the driver supports, from the CUDA driver API through torch (e.g. "13.0")."""
    try:
        version = int(torch._C._cuda_getDriverVersion())  # e.g. 13000; private, absent on CPU builds
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return None
    return f"{version // 1000}.{version % 1000 // 10}" if version > 0 else None


def environment_report(*, select_backend: Callable | None = None) -> EnvironmentReport:
    """Probe this machine and return an :class:`EnvironmentReport`.

    The tier comes from ``select_backend()`` (default :func:`mamba2_tutorial.runtime.backends.select_backend`,
    which returns ``BackendChoice(name, reason)``); pass another callable to override it.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        package_version = version("mamba2-tutorial")   # the installed project (make install)
    except PackageNotFoundError:
        package_version = "not installed (make install)"

    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency
        torch = None
    cuda_available = bool(torch is not None and torch.cuda.is_available())
    gpu_count = torch.cuda.device_count() if cuda_available else 0
    gpu_name = torch.cuda.get_device_name(0) if cuda_available else None
    capability = tuple(torch.cuda.get_device_capability(0)) if cuda_available else None
    torch_cuda = getattr(getattr(torch, "version", None), "cuda", None)
    driver = _driver_version()
    driver_cuda = _driver_cuda_version(torch) if cuda_available else None
    tileiras = find_tileiras()
    tileiras_version = parse_tileiras_version(_run([tileiras, "--version"])) if tileiras else None
    cuda_home = os.environ.get("CUDA_HOME") or None
    cuda_home_version = cuda_home_toolkit_version(cuda_home)
    cuda_tile = _dist_version("cuda-tile")
    import_error = cutile_import_error()
    cutile_error = None if import_error is None else str(import_error)
    system, machine = this_platform()
    problems = diagnose(
        cuda_available=cuda_available, capability=capability, driver=driver, driver_cuda=driver_cuda,
        gpu_name=gpu_name,
        torch_cuda=torch_cuda, cuda_tile=cuda_tile, tileiras=tileiras, tileiras_version=tileiras_version,
        cuda_home=cuda_home, cuda_home_version=cuda_home_version, cutile_error=cutile_error, system=system,
        machine=machine,
    )
    if select_backend is None:
        from ..runtime.backends import select_backend
    choice = select_backend()
    tier, reason = str(choice.name), str(choice.reason)
    return EnvironmentReport(
        python=platform.python_version(), platform=platform.platform(terse=True), package=package_version,
        torch=getattr(torch, "__version__", None), torch_cuda=torch_cuda, cuda_tile=cuda_tile,
        tileiras_path=tileiras, tileiras_version=tileiras_version, cuda_available=cuda_available,
        gpu_count=gpu_count, gpu_name=gpu_name, capability=capability, driver=driver, driver_cuda=driver_cuda,
        cuda_home=cuda_home,
        cuda_home_version=cuda_home_version, tier=tier, tier_reason=reason, problems=problems,
        system=system, machine=machine, cutile_error=cutile_error,
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m mamba2_tutorial env [--json]``: print the report. Exit 0 (problems are advice)."""
    parser = argparse.ArgumentParser(
        prog="python -m mamba2_tutorial env", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = environment_report()
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        report.print()
    return 0
