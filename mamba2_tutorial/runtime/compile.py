"""Ahead-of-time compile checks and the compiler's view of a kernel, all without a GPU.

- :func:`compile_kernel` compiles one :class:`~mamba2_tutorial.runtime.specs.KernelSpec` to a cubin for one
  GPU architecture with the real ``tileiras`` (cuTile's public AOT API,
``cuda.tile.compilation.export_kernel``). - :func:`main` is ``python -m mamba2_tutorial compile [--arch ...]
  [--kernel ...] [--jobs N] [--quick]``: every kernel of the package for every architecture, as a table; exit
  code 1 if any failed. ``--quick`` (what ``make test`` runs) compiles every spec for :data:`PRIMARY_ARCH`
  and, for the other architectures, one spec of each kernel function (:func:`representative_specs`); ``make
compile`` runs the whole matrix. - :func:`tile_ir` returns a kernel's Tile IR (MLIR text) for given launch
  arguments: cuTile bytecode, disassembled with ``tileirdisasm``. :func:`show_tile_ir` wraps it for display
in a notebook. - :func:`cutile_ir` returns cuTile's own typed IR (the front end's view, before Tile IR).
- :func:`compiler_remarks` asks tileiras what it made of each load, store and ``mma`` for one architecture
  (TMA or plain loads; tensor cores or FMA instructions), as :class:`Remark` records.

The signature (dtypes, ranks, constants) comes from example arguments via
:mod:`mamba2_tutorial.runtime.signature`, exactly as ``ct.launch`` would derive it.
"""

from __future__ import annotations

import argparse
import html
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from .cubin_info import cubin_resources

__all__ = [
    "DEFAULT_ARCHS",
    "PRIMARY_ARCH",
    "CompileResult",
    "IRListing",
    "Remark",
    "TileirasNotFound",
    "compile_cubin",
    "compile_kernel",
    "compile_specs",
    "compiler_remarks",
    "cutile_ir",
    "find_tileiras",
    "format_table",
    "launch_resources",
    "main",
    "quick_plan",
    "representative_specs",
    "show_tile_ir",
    "tile_ir",
]

DEFAULT_ARCHS: tuple[str, ...] = ("sm_80", "sm_90", "sm_100", "sm_120")
#: the architecture ``--quick`` compiles every spec for (Hopper: the shipped configs are tuned for it)
PRIMARY_ARCH = "sm_90"

_INSTALL_HINT = (
    "Install the compiler with `pip install 'cuda-tile[tileiras]==1.7.*'` (in this repo: "
    "`.venv/bin/pip install -e '.[gpu]'`), or put a CUDA 13.4+ toolkit's bin directory (which holds tileiras "
    "and tileirdisasm) on PATH or in CUDA_HOME."
)


class TileirasNotFound(RuntimeError):
    """The cuTile compiler (tileiras) or its disassembler is not installed."""


@dataclass(frozen=True)
class CompileResult:
    """Outcome of compiling one kernel spec for one architecture."""

    name: str
    arch: str
    ok: bool
    cubin_bytes: int
    seconds: float
    error: str | None = None
    #: registers per thread and stack frame bytes of the compiled kernel (``cubin_info.cubin_resources``)
    registers: int | None = None
    frame_bytes: int | None = None


def find_tileiras() -> str:
    """Path of the tileiras cuTile would use; :class:`TileirasNotFound` with an install hint if none."""
    try:
        from cuda.tile._compile import _find_compiler_bin

        return _find_compiler_bin().path
    except ImportError as exc:  # cuda-tile itself missing
        raise TileirasNotFound(f"cuda-tile is not importable ({exc}). {_INSTALL_HINT}") from exc
    except FileNotFoundError as exc:
        raise TileirasNotFound(f"tileiras not found. {_INSTALL_HINT}") from exc


def _find_tileirdisasm() -> str:
    tileiras = find_tileiras()
    name = "tileirdisasm.exe" if sys.platform == "win32" else "tileirdisasm"
    path = shutil.which(name, path=os.path.dirname(tileiras))
    if path is None:
        raise TileirasNotFound(
            f"tileirdisasm not found next to {tileiras} (Tile IR text needs tileiras 13.4 or newer). "
            f"{_INSTALL_HINT}"
        )
    return path


def tileiras_version() -> str:
    """tileiras's version line, e.g. 'Cuda compilation tools, release 13.4, V13.4.92'."""
    out = subprocess.run([find_tileiras(), "--version"], capture_output=True, text=True, timeout=60)
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if "release" in ln.lower()]
    return lines[-1].strip() if lines else (out.stdout + out.stderr).strip().splitlines()[-1]


def _kernel_name(kernel) -> str:
    return kernel._annotated_function.pyfunc.__name__


def _export(kernel, args, output_format: str, gpu_code: str | None = None) -> bytes:
    from cuda.tile.compilation import export_kernel

    from .signature import kernel_signature

    buf = io.BytesIO()
    signature = kernel_signature(kernel, args)
    export_kernel(kernel, [signature], buf, gpu_code=gpu_code, output_format=output_format)
    return buf.getvalue()


def compile_cubin(kernel, args, arch: str = "sm_90") -> bytes:
    """The cubin tileiras makes of ``kernel`` (a ``@ct.kernel``, possibly hinted) for these example launch
    arguments and ``arch``, on a machine without a GPU. Read its registers and stack frame with
    :func:`mamba2_tutorial.runtime.cubin_info.cubin_resources`."""
    find_tileiras()
    return _export(kernel, args, "cubin", gpu_code=arch)


def launch_resources(run: Callable[[], object], arch: str = "sm_90") -> dict[str, dict[str, int]]:
    """What the kernels a call launches cost the SM: ``run()`` runs with every launch recorded and none
    executed (``runtime.launch.recording``: its outputs are left unwritten), each launched kernel is compiled
    for ``arch`` with its recorded arguments, on a machine without a GPU, and its cubin read
    (``cubin_info.cubin_resources``). ``{kernel name: {"registers", "frame_bytes"}}`` in launch order, the
    largest over a kernel's launches; a stack frame above 0 bytes means registers spilled to local memory."""
    from .launch import recording

    launches = []
    with recording(lambda kernel, grid, args: launches.append((kernel, args))):
        run()
    found: dict[str, dict[str, int]] = {}
    for kernel, args in launches:
        name = _kernel_name(kernel)
        got = cubin_resources(compile_cubin(kernel, args, arch))
        was = found.setdefault(name, {"registers": 0, "frame_bytes": 0})
        for key in was:
            was[key] = max(was[key], got[key])
    return found


def _format_error(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


@contextmanager
def _cubin_cache(enabled: bool):
    """cuTile caches cubins on disk (~/.cache/cutile-python); disabled here, every compile runs tileiras."""
    if enabled:
        yield
        return
    from cuda.tile._cext import default_tile_context

    config = default_tile_context.config
    saved = config.cache_dir
    config.cache_dir = None
    try:
        yield
    finally:
        config.cache_dir = saved


def compile_kernel(spec, arch: str, *, cache: bool = False) -> CompileResult:
    """Compile ``spec`` (a KernelSpec) to a cubin for ``arch`` (e.g. ``"sm_90"``) with tileiras, no GPU.

    Never raises for a kernel that fails to compile: ``ok`` is False and ``error`` says why (type errors from
    cuTile's front end, or tileiras's message). Raises :class:`TileirasNotFound` when the compiler is missing.
    ``cache=True`` lets cuTile reuse a cubin from its disk cache (same tileiras, same bytecode) instead of
    running tileiras again.
    """
    find_tileiras()
    start = time.perf_counter()
    try:
        _grid, args = spec.make_args()
        with _cubin_cache(cache):
            cubin = _export(spec.kernel, args, "cubin", gpu_code=arch)
    except Exception as exc:  # a compile failure is a result, not a crash
        return CompileResult(spec.name, arch, False, 0, time.perf_counter() - start, _format_error(exc))
    seconds = time.perf_counter() - start
    try:
        res = cubin_resources(cubin)
    except ValueError:  # a cubin layout this reader does not know: the compile itself succeeded
        res = {"registers": None, "frame_bytes": None}
    return CompileResult(spec.name, arch, True, len(cubin), seconds, None, res["registers"],
                         res["frame_bytes"])


def _compile_by_name(name: str, arch: str, cache: bool, modules: tuple[str, ...]) -> CompileResult:
    # runs in a worker process: specs hold closures, so workers look them up by name among the modules the
    # parent had registered
    from .specs import kernel_spec

    return compile_kernel(kernel_spec(name, modules), arch, cache=cache)


def compile_specs(specs, archs: Sequence[str] | None, *, jobs: int = 1, cache: bool = False,
                  progress=None) -> list[CompileResult]:
    """Compile every spec for every arch; ``jobs`` > 1 uses that many processes. Results in input order.
    ``archs=None``: ``specs`` is a list of (spec, arch) pairs (e.g. :func:`quick_plan`).

    With ``jobs`` > 1 the specs must come from :func:`mamba2_tutorial.runtime.specs.all_kernel_specs` (workers
    look them up by name in the registered modules).
    """
    from .specs import spec_modules

    tasks = list(specs) if archs is None else [(spec, arch) for spec in specs for arch in archs]
    modules = spec_modules()
    if jobs <= 1 or len(tasks) <= 1:
        results = []
        for spec, arch in tasks:
            results.append(compile_kernel(spec, arch, cache=cache))
            if progress:
                progress(results[-1])
        return results

    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # forkserver: workers fork from a clean server process, not from this one (which may hold torch/OpenMP
    # threads that make a plain fork unsafe); spawn where forkserver does not exist.
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload([*modules, __name__])
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=ctx) as pool:
        futures = [pool.submit(_compile_by_name, spec.name, arch, cache, modules) for spec, arch in tasks]
        results = []
        for fut in futures:
            results.append(fut.result())
            if progress:
                progress(results[-1])
        return results


def representative_specs(specs) -> list:
    """One spec per kernel function (the first listed of each, in registry order): every ``@ct.kernel`` of the
    package once. A kernel's other specs differ in dtypes, tile sizes and hints; compiled for one architecture
    (``--quick`` compiles them all for :data:`PRIMARY_ARCH`), they need not be compiled for every other one to
    show that the kernel's code compiles there."""
    seen: set[tuple[str, str]] = set()
    chosen = []
    for spec in specs:
        func = spec.kernel._annotated_function.pyfunc
        key = (func.__module__, func.__qualname__)
        if key not in seen:
            seen.add(key)
            chosen.append(spec)
    return chosen


def quick_plan(specs, archs: Sequence[str] = DEFAULT_ARCHS) -> list[tuple]:
    """The (spec, arch) pairs ``--quick`` compiles: every spec for :data:`PRIMARY_ARCH` (when it is among
    ``archs``), :func:`representative_specs` for each other arch; no pair twice."""
    plan = [(spec, PRIMARY_ARCH) for spec in specs] if PRIMARY_ARCH in archs else []
    rep = representative_specs(specs)
    plan += [(spec, arch) for arch in archs if arch != PRIMARY_ARCH for spec in rep]
    return plan


def format_table(results: Sequence[CompileResult]) -> str:
    """The compile results as an aligned text table: kernel | arch | ok | cubin size | registers per thread |
    stack frame bytes (non-zero: spills) | seconds."""
    rows = [("kernel", "arch", "ok", "cubin size", "regs", "stack", "seconds")]
    for r in results:
        size = f"{r.cubin_bytes / 1024:.1f} KiB" if r.ok else "-"
        regs, stack = ("-" if v is None else str(v) for v in (r.registers, r.frame_bytes))
        rows.append((r.name, r.arch, "ok" if r.ok else "FAILED", size, regs, stack, f"{r.seconds:.2f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = {3, 4, 5, 6}
    lines = []
    for n, row in enumerate(rows):
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append(" | ".join(cells).rstrip())
        if n == 0:
            lines.append("-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mamba2_tutorial compile``: compile every kernel spec ahead of time; 0 if all compiled."""
    parser = argparse.ArgumentParser(
        prog="python -m mamba2_tutorial compile",
        description="Compile every cuTile kernel of the package ahead of time with tileiras (no GPU needed).",
    )
    parser.add_argument("--arch", nargs="+", default=list(DEFAULT_ARCHS), metavar="SM",
                        help=f"GPU architectures (default: {' '.join(DEFAULT_ARCHS)})")
    parser.add_argument("--kernel", nargs="+", default=None, metavar="NAME",
                        help="only these kernel specs (exact name, or a prefix such as 'primer.')")
    parser.add_argument("--jobs", "-j", type=int, default=min(os.cpu_count() or 1, 8),
                        help="parallel worker processes (default: number of CPUs, at most 8)")
    parser.add_argument("--cache", action="store_true",
                        help="reuse cubins from cuTile's disk cache and store new ones there, where the "
                             "tests that compile the same specs find them (default: run tileiras for every "
                             "kernel)")
    parser.add_argument("--quick", action="store_true",
                        help=f"every spec for {PRIMARY_ARCH}, one spec per kernel function for the other "
                             "architectures (what `make test` checks; `make compile` runs the whole matrix)")
    parser.add_argument("--list", action="store_true", help="list the kernel specs and exit")
    parser.add_argument("--skip-unsupported", action="store_true",
                        help="on a platform cuda-tile has no wheels for (macOS), say so and exit 0; "
                             "elsewhere a missing cuTile is still an error (`make test` passes it)")
    opts = parser.parse_args(list(sys.argv[1:] if argv is None else argv))

    from . import platforms

    if not platforms.cutile_available():
        if opts.skip_unsupported and not platforms.has_cutile_wheels():
            print(f"compile check skipped: {platforms.cutile_unavailable_reason()}. The kernel notebooks, "
                  "the cuTile exercises and the tests that need cuTile are skipped here too.")
            return 0
        print(f"error: {platforms.cutile_unavailable_message()}", file=sys.stderr)
        return 1

    from .specs import all_kernel_specs, spec_modules

    if not spec_modules():
        print("error: no kernel modules are registered: import mamba2_tutorial.kernels and "
              "mamba2_tutorial.fast first (python -m mamba2_tutorial compile does)", file=sys.stderr)
        return 2
    specs = all_kernel_specs()
    if opts.list:
        for spec in specs:
            print(spec.name)
        return 0
    if opts.kernel:
        chosen = [s for s in specs if any(s.name == k or (k.endswith(".") and s.name.startswith(k))
                                          for k in opts.kernel)]
        unknown = [k for k in opts.kernel if not any(s.name == k or (k.endswith(".") and s.name.startswith(k))
                                                     for s in specs)]
        if unknown:
            known = ", ".join(s.name for s in specs)
            print(f"error: unknown kernel spec(s) {', '.join(unknown)}; known: {known}", file=sys.stderr)
            return 2
        specs = chosen
    try:
        tileiras = find_tileiras()
        version = tileiras_version()
    except TileirasNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"tileiras: {tileiras} ({version})")
    if opts.quick:
        plan = quick_plan(specs, opts.arch)
        others = [a for a in opts.arch if a != PRIMARY_ARCH]
        print(f"compiling {len(plan)} (kernel spec, arch) pairs with {opts.jobs} job(s): "
              + (f"all {len(specs)} specs for {PRIMARY_ARCH}" if PRIMARY_ARCH in opts.arch else "")
              + (f"{', ' if PRIMARY_ARCH in opts.arch else ''}{len(representative_specs(specs))} "
                 f"(one per kernel) for {' '.join(others)}" if others else ""), flush=True)
    else:
        plan = [(spec, arch) for spec in specs for arch in opts.arch]
        print(f"compiling {len(specs)} kernel specs x {len(opts.arch)} archs with {opts.jobs} job(s)",
              flush=True)
    start = time.perf_counter()
    results = compile_specs(plan, None, jobs=opts.jobs, cache=opts.cache)
    total = time.perf_counter() - start
    print(format_table(results))
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"\nFAILED {r.name} [{r.arch}]:\n{r.error}", file=sys.stderr)
    print(f"\n{len(results) - len(failed)}/{len(results)} compiled in {total:.1f} s")
    return 1 if failed else 0


# ----------------------------------------------------------------------------------------------------
# The compiler's view: Tile IR and cuTile IR as text.
# ----------------------------------------------------------------------------------------------------
def tile_ir_bytecode(kernel, args) -> bytes:
    """Architecture-independent Tile IR bytecode of ``kernel`` for launch arguments ``args`` (no GPU)."""
    return _export(kernel, tuple(args), "tileir_bytecode")


def tile_ir(kernel, args, *, debug_info: bool = False) -> str:
    """The Tile IR (MLIR text) that cuTile produces for ``kernel`` launched with ``args``.

    ``args`` as for ``launch`` (CPU tensors are fine: only their dtype, rank and layout matter). Runs cuTile's
    front end to bytecode, then ``tileirdisasm``; ``debug_info=True`` adds Python source locations. This is
    the input tileiras turns into a cubin: look for ``load_view_tko`` / ``store_view_tko`` (tile-indexed
    loads and stores), ``mmaf`` (the tensor-core multiply-accumulate) and the ``for`` loop over K.
    """
    bytecode = tile_ir_bytecode(kernel, args)
    disasm = _find_tileirdisasm()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{_kernel_name(kernel)}.tileirbc")
        with open(path, "wb") as f:
            f.write(bytecode)
        cmd = [disasm, path] + (["--print-debug-info"] if debug_info else [])
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"tileirdisasm failed (exit {out.returncode}): {out.stderr.strip()}")
    return out.stdout


def cutile_ir(kernel, args) -> str:
    """cuTile's typed IR of ``kernel`` for ``args`` (what ``CUDA_TILE_LOGS=CUTILEIR`` prints): the front end's
    view after type inference, before lowering to Tile IR. Needs no tileiras."""
    from cuda.tile._compile import compile_tile, parse_bytecode_version

    from .signature import kernel_signature

    result = compile_tile(
        kernel._annotated_function,
        [kernel_signature(kernel, tuple(args))],
        sm_arch=None,
        compiler_options=kernel._compiler_options,
        bytecode_version=parse_bytecode_version("13.4"),
        return_final_ir=True,
        return_bytecode=False,
        return_cubin=False,
    )
    return result.final_ir[0].to_string(include_loc=False)


class IRListing:
    """Text shown as a code block in Jupyter (markdown/HTML) and as plain text elsewhere.

    ``max_lines`` trims long listings (the full text stays in ``.text``); ``highlight`` lists substrings whose
    lines are marked in the HTML view; ``language`` tags the markdown code block.
    """

    def __init__(self, text: str, *, title: str = "", max_lines: int | None = None,
                 highlight: Sequence[str] = (), language: str = "mlir"):
        self.text = text
        self.title = title
        self.max_lines = max_lines
        self.highlight = tuple(highlight)
        self.language = language

    def _lines(self) -> tuple[list[str], int]:
        lines = self.text.rstrip("\n").splitlines()
        if self.max_lines is not None and len(lines) > self.max_lines:
            return lines[: self.max_lines], len(lines) - self.max_lines
        return lines, 0

    def _shown(self) -> str:
        lines, hidden = self._lines()
        tail = [f"... ({hidden} more lines)"] if hidden else []
        return "\n".join(lines + tail)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        head = f"{self.title}\n" if self.title else ""
        return head + self._shown()

    def __contains__(self, item: str) -> bool:
        return item in self.text

    def _repr_markdown_(self) -> str:
        head = f"**{self.title}**\n\n" if self.title else ""
        return f"{head}```{self.language}\n{self._shown()}\n```"

    def _repr_html_(self) -> str:
        lines, hidden = self._lines()
        out = []
        for line in lines:
            esc = html.escape(line)
            if any(h in line for h in self.highlight):
                esc = f'<span style="background:#fff3b0">{esc}</span>'
            out.append(esc)
        if hidden:
            out.append(f"<i>... ({hidden} more lines)</i>")
        head = f"<b>{html.escape(self.title)}</b>" if self.title else ""
        return f'{head}<pre style="font-size:11px;line-height:1.25">{chr(10).join(out)}</pre>'


def show_tile_ir(kernel, args, *, max_lines: int | None = 60, highlight: Sequence[str] = (),
                 debug_info: bool = False) -> IRListing:
    """:func:`tile_ir` wrapped for notebook display (code block, trimmed to ``max_lines``)."""
    return IRListing(tile_ir(kernel, args, debug_info=debug_info),
                     title=f"Tile IR of {_kernel_name(kernel)}", max_lines=max_lines, highlight=highlight)


# ----------------------------------------------------------------------------------------------------
# The compiler's decisions: tileiras's optimization remarks.
# ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Remark:
    """One tileiras optimization remark: what became of one load, store or ``mma`` of the kernel.

    ``category`` is "Memory" or "Tensor-core"; ``status`` "passed" or "failed"; ``line`` and ``source`` the
    kernel's source line (number and text); ``instruction`` e.g. "TMA Load instruction", "Global-memory load
    instruction", "Tensor-core SM90", "FMA"; ``shape`` the instruction's tile shape when given; ``reason``
    why an optimization was not applied.
    """

    category: str
    status: str
    message: str
    line: int | None
    name: str = ""
    instruction: str = ""
    shape: tuple[int, ...] | None = None
    reason: str = ""
    source: str = ""  # the kernel's source line the remark points at


def _parse_remarks(text: str) -> list[Remark]:
    import linecache
    import re

    remarks: list[Remark] = []
    category = ""
    current: dict | None = None

    def flush():
        if current is not None:
            remarks.append(Remark(**current))

    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("category:"):
            flush()
            current = None
            category = line.split(":", 1)[1].strip()
        elif m := re.match(r"remark\[(\w+)\]:\s*(.*)", line):
            flush()
            current = {"category": category, "status": m.group(1), "message": m.group(2), "line": None}
        elif current is None:
            continue
        elif m := re.match(r'-->\s*"(.*)":(\d+):\d+', line):
            current["line"] = int(m.group(2))
            current["source"] = linecache.getline(m.group(1), current["line"]).strip()
        elif m := re.match(r"=\s*name:\s*(.*)", line):
            current["name"] = m.group(1).strip()
        elif m := re.match(r"=\s*note:\s*Instruction\s*=\s*(.*)", line):
            current["instruction"] = m.group(1).strip()
        elif m := re.match(r"=\s*note:\s*Shape\s*=\s*\[(.*)\]", line):
            current["shape"] = tuple(int(v) for v in m.group(1).split(",") if v.strip())
        elif m := re.match(r"=\s*reason:\s*(.*)", line):
            current["reason"] = re.sub(r'^loc\(.*?\):\s*', "", m.group(1).strip())
    flush()
    unique: list[Remark] = []
    for r in remarks:  # tileiras reports some operations once per code path: keep one of each
        if r not in unique:
            unique.append(r)
    return unique


def compiler_remarks(kernel, args, arch: str = "sm_90", category: str = "all") -> list[Remark]:
    """tileiras's optimization remarks for ``kernel`` launched with ``args``, compiled for ``arch`` (no GPU).

    Each remark says what one load, store or ``ct.mma`` became: on Hopper (sm_90) a load is a TMA load when
    the array's base and strides allow it (16-byte aligned), else a plain global-memory load; on Ampere
    (sm_80) it is an asynchronous copy (LDGSTS). An ``mma`` of bf16, fp16, tf32 or fp8 operands runs on the
    tensor cores; one of float32 operands is compiled to FMA instructions on the CUDA cores. ``category``:
    "all", "memory" or "tensorcore".
    """
    if category not in ("all", "memory", "tensorcore"):
        raise ValueError(f"category must be 'all', 'memory' or 'tensorcore', got {category!r}")
    bytecode = tile_ir_bytecode(kernel, args)
    tileiras = find_tileiras()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{_kernel_name(kernel)}.tileirbc")
        with open(path, "wb") as f:
            f.write(bytecode)
        cmd = [tileiras, path, f"--gpu-name={arch}", "-o", os.path.join(tmp, "out.cubin"),
               f"--remarks={category}", "--remark-format=command-line"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"tileiras failed (exit {out.returncode}): {out.stderr.strip()}")
    return _parse_remarks(out.stdout + out.stderr)
