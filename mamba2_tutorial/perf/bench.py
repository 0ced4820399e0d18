"""The benchmark: our cuTile ``ssd_forward`` against mamba_ssm's Triton path, fla and PyTorch, on one GPU.

``python -m mamba2_tutorial bench [--shapes NAME ...] [--dtype bf16] [--out FILE.json] [--plot FILE.png]
[--warmup MS] [--rep MS]`` runs, for every shape, in one process:

1. inputs from ``make_inputs`` (x, dt, A, B, C; no D, z or dt_bias, because fla's ``chunk_simple_gla``
computes
   only the core SSD: q = C, k = B, v = dt·x, g = dt·A, scale 1, B and C expanded to heads);
2. the float64 reference ``ssd_chunked`` on the same (upcast) inputs, on the GPU;
3. every implementation that imports, once, checked against the reference (relative L2 error, a gate per
dtype):
   an implementation whose output is wrong is reported and NOT timed;
4. the timings: median device time per call with CUDA events after warm-up, the L2 cache flushed before every
call
   (``mamba2_tutorial.perf.timing.time_cuda``); our three kernels are also timed one at a time;
5. the roofline floor from counted FLOPs and bytes (``mamba2_tutorial.perf.roofline``) and the measured
   ceilings.

Then a seqlen sweep (time against length), the launch/host overhead at a small shape (eager against CUDA-graph
replay), a printed table and, with ``--out``, the JSON that is shipped as ``data/benchmarks/h200.json``
(schema in ``mamba2_tutorial.perf.results``). The ``--out`` file is rewritten after every shape (and after
the sweep and the overhead sections) with ``"complete": false``, so a run killed part-way keeps its
measurements; the final write sets ``"complete": true``.

What is timed for each implementation is one forward call on prepared inputs: fla's inputs (C and B expanded
to heads, v = dt·x, g = dt·A) are prepared once, outside the timed region — a small advantage to fla.

The harness takes its timer and its implementations as arguments, so the tests run it on a CPU with fake
timers and deliberately wrong implementations; performance is measured only by this command.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import importlib
import importlib.metadata
import importlib.util
import json
import math
import re
import sys
import time
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import roofline
from .results import IMPLS, SCHEMA_VERSION, format_overhead, format_steps, format_table, stages_of
from .sources import kernels_sha256

DEFAULT_SHAPES = ("b8-l4096-h80", "b1-l32768-h80", "b4-l2048-h24", "b2-l8192-h128-g8")
#: shapes of the staged steps from the taught kernels to the shipped config (notebook 10)
STEP_SHAPES = ("b8-l4096-h80", "b1-l32768-h80")
SWEEP_BASE = dict(batch=4, nheads=24, headdim=64, ngroups=1, dstate=128, chunk_size=256)
SWEEP_SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
OVERHEAD_SHAPE = dict(batch=1, seqlen=256, nheads=8, headdim=64, ngroups=1, dstate=128, chunk_size=64)
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# Relative L2 error above which an output is rejected (METHOD: bf16 operands land between 1e-3 and 1e-2;
# float32 far under 1e-3, tf32 near 3e-4).
REL_ERR_GATE = {torch.bfloat16: 2e-2, torch.float16: 5e-3, torch.float32: 2e-3, torch.float64: 1e-10}


class IncorrectOutput(AssertionError):
    """An implementation's output does not match the float64 reference (``rel_err``: its error, or None)."""

    def __init__(self, message: str, rel_err: float | None = None):
        super().__init__(message)
        self.rel_err = rel_err if rel_err is not None and math.isfinite(rel_err) else None


# ----------------------------------------------------------------------------------------------------
# implementations: each prepares (untimed) from the input dict and returns a zero-argument forward call

Forward = Callable[[], torch.Tensor]


@dataclass
class Impl:
    """A benchmarked implementation: ``prepare(inputs, chunk_size) -> forward`` where ``forward()`` returns
    y."""

    name: str
    prepare: Callable[[Mapping[str, torch.Tensor], int], Forward]
    kernels: Callable[[Mapping[str, torch.Tensor], int], dict[str, Forward]] | None = None
    #: the launch configuration it runs these inputs with (recorded as the shape's ``cutile_config``)
    config: Callable[[Mapping[str, torch.Tensor], int], dict] | None = None


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def _make_cutile(backend: str = "gpu", configs: Mapping[tuple, object] | None = None) -> Impl:
    """Our ``ssd_forward`` (``backend="cpu"``, the tile executor, only to test the wiring on a CPU).

    ``configs``: :class:`~mamba2_tutorial.fast.config.FastConfig` by problem size ``(b, l, h, p, g, n, Q)``,
    in place of what ``ssd_config`` picks for those sizes (``--configs``: a candidate config, measured side
    by side with the baselines before it goes into a tuning table)."""
    from ..fast.config import config_to_json
    from ..fast.forward import ssd_forward
    from ..fast.tuning import ssd_config

    def pick(inp, Q):
        x, B = inp["x"], inp["B"]
        dims = (*x.shape, *B.shape[2:], Q)
        b, l, h, p, _g, n, _ = dims
        return (configs or {}).get(dims) or ssd_config(b, l, h, p, n, Q, x.dtype, x.device)

    def prepare(inp, Q):
        x, dt, A, B, C = (inp[k] for k in ("x", "dt", "A", "B", "C"))
        cfg = pick(inp, Q)
        return lambda: _first(ssd_forward(x, dt, A, B, C, Q, backend=backend, config=cfg))

    return Impl("cutile", prepare, kernels=lambda inp, Q: _cutile_kernels(inp, Q, backend, pick(inp, Q)),
                config=lambda inp, Q: config_to_json(pick(inp, Q)))


def _make_taught(backend: str = "gpu") -> Impl:
    """The three taught kernels, one launch each (``ssd_forward_taught``): what the tuning bought."""
    from ..kernels.forward import ssd_forward_taught

    def prepare(inp, Q):
        x, dt, A, B, C = (inp[k] for k in ("x", "dt", "A", "B", "C"))
        return lambda: _first(ssd_forward_taught(x, dt, A, B, C, Q, backend=backend))

    return Impl("taught", prepare)


def _cutile_kernels(inp, Q, backend: str = "gpu", config=None) -> dict[str, Forward]:
    """Our kernels as separate calls on their real inputs, exactly as ``ssd_forward`` launches them for this
    size (``mamba2_tutorial.fast.forward.ssd_stages``; each stage's input made once by the one before): the
    three kernels, or ``chunk_state_passing`` and ``chunk_scan`` when this size's config fuses the first two.

    "chain" runs them in order and returns y, so the harness can check the chain too; "meta" holds the
    element sizes of the chunk states and entering states and whether the first two are fused, for the
    kernels' roofline floors.
    """
    from ..fast.forward import ssd_stages

    x, dt, A, B, C = (inp[k] for k in ("x", "dt", "A", "B", "C"))
    return ssd_stages(x, dt, A, B, C, Q, backend=backend, config=config)


def import_mamba_chunk_scan_combined():
    """``mamba_ssm.ops.triton.ssd_combined.mamba_chunk_scan_combined``, importable without mamba_ssm's CUDA
    build.

    mamba_ssm 2.3.2.post1 imports its CUDA extension ``selective_scan_cuda`` (and transformers) at package
    import. Only the Triton path is used here, so: (1) try a plain import; (2) put an empty
    ``selective_scan_cuda`` module in ``sys.modules`` if none exists and retry; (3) stand in for the package
    ``__init__`` with an empty package module whose ``__path__`` is mamba_ssm's folder, so only the Triton
    files are imported.
    """
    target = "mamba_ssm.ops.triton.ssd_combined"
    try:
        return importlib.import_module(target).mamba_chunk_scan_combined
    except Exception as exc:  # noqa: BLE001 - any import-time failure; the fallbacks follow
        first = exc
    if "selective_scan_cuda" not in sys.modules and importlib.util.find_spec("selective_scan_cuda") is None:
        sys.modules["selective_scan_cuda"] = types.ModuleType("selective_scan_cuda")
        try:
            return importlib.import_module(target).mamba_chunk_scan_combined
        except Exception:  # noqa: BLE001
            pass
    spec = importlib.util.find_spec("mamba_ssm")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"mamba_ssm is not installed ({first})") from first
    for name in [m for m in sys.modules if m == "mamba_ssm" or m.startswith("mamba_ssm.")]:
        del sys.modules[name]
    pkg = importlib.util.module_from_spec(spec)  # __path__, __file__ and __spec__ set; __init__ NOT executed
    sys.modules["mamba_ssm"] = pkg
    return importlib.import_module(target).mamba_chunk_scan_combined


def _make_mamba() -> Impl:
    fn = import_mamba_chunk_scan_combined()

    def prepare(inp, Q):
        x, dt, A, B, C = (inp[k] for k in ("x", "dt", "A", "B", "C"))
        return lambda: _first(fn(x, dt, A, B, C, Q))

    return Impl("mamba_ssm", prepare)


def fla_inputs(inp: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The SSD as simple GLA: q = C, k = B (both expanded from groups to heads), v = dt·x, g = dt·A, all (b,
    l, h, .).

    Head i uses group i // (h/g), as in mamba_ssm. v is rounded to x's dtype; g is float32.
    """
    x, dt, A, B, C = (inp[k] for k in ("x", "dt", "A", "B", "C"))
    h, g = x.shape[2], B.shape[2]
    rep = h // g
    q = C.repeat_interleave(rep, dim=2).contiguous()
    k = B.repeat_interleave(rep, dim=2).contiguous()
    v = (x.float() * dt.float()[..., None]).to(x.dtype).contiguous()
    gate = (dt.float() * A.float()).contiguous()
    return {"q": q, "k": k, "v": v, "g": gate}


def _make_fla() -> Impl:
    from fla.ops.simple_gla import chunk_simple_gla

    def prepare(inp, Q):
        f = fla_inputs(inp)
        return lambda: _first(chunk_simple_gla(q=f["q"], k=f["k"], v=f["v"], g=f["g"], scale=1.0))

    return Impl("fla", prepare)


def tilegym_inputs(inp: Mapping[str, torch.Tensor], Q: int) -> dict[str, torch.Tensor]:
    """The arguments of TileGym's ``mamba2_chunk_forward(x, a, b, c, d, dt, init_state, chunk_size)``: ``a``
    and ``d`` (h,) float32 (d = 0: the benchmark has no skip term), ``dt`` (b, l, h) in x's dtype and
    already through its softplus (as the benchmark's dt is), ``init_state`` (b, h, p, n) float32 zeros.
    TileGym needs the length to be a multiple of the chunk size."""
    x, dt, A, B, C = (inp[k] for k in ("x", "dt", "A", "B", "C"))
    b, l, h, p = x.shape
    if l % Q:
        raise ValueError(f"TileGym needs the sequence length to be a multiple of the chunk size: l = {l}, "
                         f"chunk_size = {Q}")
    return {"x": x, "a": A.float().contiguous(), "b": B, "c": C,
            "d": torch.zeros(h, dtype=torch.float32, device=x.device),
            "dt": dt.to(x.dtype).contiguous(),
            "init_state": torch.zeros(b, h, p, B.shape[-1], dtype=torch.float32, device=x.device)}


def _make_tilegym() -> Impl:
    """TileGym's cuTile Mamba-2 forward (``tilegym.ops.cutile.mamba2``), with its own tuner on: the first
    call of each shape searches its launch settings (the record's ``first_call_s``), later calls reuse
    them."""
    from tilegym.ops.cutile.mamba2 import mamba2_chunk_forward

    def prepare(inp, Q):
        a = tilegym_inputs(inp, Q)
        return lambda: _first(mamba2_chunk_forward(a["x"], a["a"], a["b"], a["c"], a["d"], a["dt"],
                                                   a["init_state"], chunk_size=Q))

    return Impl("tilegym", prepare)


def _make_torch() -> Impl:
    from ..reference import ssd_chunked

    def prepare(inp, Q):
        x, dt, A, B, C = (inp[k] for k in ("x", "dt", "A", "B", "C"))
        return lambda: ssd_chunked(x, dt, A, B, C, Q)

    return Impl("torch", prepare)


FACTORIES = {"cutile": _make_cutile, "taught": _make_taught, "mamba_ssm": _make_mamba, "fla": _make_fla,
             "tilegym": _make_tilegym, "torch": _make_torch}


def load_implementations(names: Sequence[str] = IMPLS) -> tuple[dict[str, Impl], dict[str, str]]:
    """The implementations that import here, and for the others why not."""
    impls, missing = {}, {}
    for name in names:
        if name not in FACTORIES:
            raise ValueError(f"unknown implementation {name!r}; choose from {list(FACTORIES)}")
        try:
            impls[name] = FACTORIES[name]()
        except Exception as exc:  # noqa: BLE001 - report, never crash the whole run
            missing[name] = f"did not import: {type(exc).__name__}: {exc}"
    return impls, missing


def versions() -> dict[str, str | None]:
    """Versions of torch, cuda-tile, triton, mamba_ssm and fla (None where absent)."""

    def dist(*names):
        for n in names:
            try:
                return importlib.metadata.version(n)
            except importlib.metadata.PackageNotFoundError:
                continue
        return None

    def from_init(pkg):
        try:
            spec = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            return None
        if spec is None or spec.origin is None:
            return None
        m = re.search(
            r"""__version__\s*=\s*["']([^"']+)["']""", Path(spec.origin).read_text(errors="replace")
        )
        return m.group(1) if m else None

    return {
        "torch": torch.__version__,
        "cuda_tile": dist("cuda-tile", "cuda_tile"),
        "triton": dist("triton"),
        "mamba_ssm": dist("mamba-ssm", "mamba_ssm") or from_init("mamba_ssm"),
        "fla": dist("fla-core", "flash-linear-attention") or from_init("fla"),
        "tilegym": dist("tilegym"),
    }


# ----------------------------------------------------------------------------------------------------
# correctness gate


def rel_err_gate(dtype: torch.dtype) -> float:
    if dtype not in REL_ERR_GATE:
        raise ValueError(f"no relative-error gate for dtype {dtype}; known: {list(REL_ERR_GATE)}")
    return REL_ERR_GATE[dtype]


def check_output(name: str, y: torch.Tensor, y_ref: torch.Tensor, *, gate: float) -> float:
    """Relative L2 error of ``y`` against ``y_ref``; raise IncorrectOutput if it is not finite or above
    ``gate``."""
    from ..lessons.checks import relative_error

    if not isinstance(y, torch.Tensor):
        raise IncorrectOutput(
            f"{name}: returned {type(y).__name__}, expected a tensor of shape {tuple(y_ref.shape)}"
        )
    if tuple(y.shape) != tuple(y_ref.shape):
        raise IncorrectOutput(f"{name}: output shape {tuple(y.shape)}, expected {tuple(y_ref.shape)}")
    err = float(relative_error(y, y_ref))
    if not math.isfinite(err) or err > gate:
        raise IncorrectOutput(
            f"{name}: relative L2 error {err:.3e} vs the float64 reference exceeds {gate:.0e}", rel_err=err
        )
    return err


def _poison_allocator(shape, dtype: torch.dtype, device) -> None:
    """Leave a freed block of the output's size full of NaN in the caching allocator, so an output element
    that an implementation forgets to write reads NaN, not a previous implementation's correct result."""
    torch.empty(shape, dtype=dtype, device=device).fill_(float("nan"))


# ----------------------------------------------------------------------------------------------------
# the harness

Timer = Callable[..., float]  # timer(fn, label=str) -> median ms


def cuda_timer(warmup_ms: float = 25.0, rep_ms: float = 100.0) -> Timer:
    from .timing import time_cuda

    return lambda fn, label="": time_cuda(fn, warmup_ms=warmup_ms, rep_ms=rep_ms).median_ms


class _Progress:
    """tqdm if it is installed, else a line per step on stderr."""

    def __init__(self, total: int, desc: str, enabled: bool = True):
        self.bar = None
        self.enabled = enabled
        self.total, self.done, self.desc = total, 0, desc
        if enabled:
            try:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=total, desc=desc, file=sys.stderr)
            except ImportError:
                self.bar = None

    def step(self, what: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(what, refresh=False)
            self.bar.update(1)
        else:
            print(f"[{self.desc} {self.done}/{self.total}] {what}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@dataclass
class ShapeSpec:
    """One benchmark problem: a name and its dims."""

    name: str
    dims: roofline.Dims
    extra: dict = field(default_factory=dict)


def shape_spec(shape) -> ShapeSpec:
    """From an ``SSDShape`` preset (or anything ``roofline.dims_of`` accepts plus a ``name``)."""
    d = roofline.dims_of(shape)
    name = getattr(shape, "name", None) or (shape.get("name") if isinstance(shape, Mapping) else None)
    return ShapeSpec(name or f"b{d.b}-l{d.l}-h{d.h}-g{d.g}-Q{d.Q}", d)


def _make_inputs(spec: ShapeSpec, *, dtype, device, seed) -> dict[str, torch.Tensor]:
    from ..lessons.inputs import SSDShape, make_inputs

    d = spec.dims
    shape = SSDShape(
        batch=d.b,
        seqlen=d.l,
        nheads=d.h,
        headdim=d.p,
        ngroups=d.g,
        dstate=d.n,
        chunk_size=d.Q,
        name=spec.name,
    )
    inp = make_inputs(shape, seed=seed, dtype=dtype, device=device, D=False)
    return {k: inp[k] for k in ("x", "dt", "A", "B", "C")}


def _reference(inp: Mapping[str, torch.Tensor], Q: int) -> torch.Tensor:
    from ..reference import ssd_chunked

    d64 = {k: v.to(torch.float64) for k, v in inp.items()}
    return _first(ssd_chunked(d64["x"], d64["dt"], d64["A"], d64["B"], d64["C"], Q))


def _elem(t: torch.Tensor) -> int:
    return t.element_size()


def bench_shape(
    spec: ShapeSpec,
    impls: Mapping[str, Impl],
    *,
    dtype: torch.dtype,
    device: str,
    timer: Timer,
    ceilings: roofline.Ceilings,
    missing: Mapping[str, str] | None = None,
    seed: int = 0,
    kernels: bool = True,
    progress: _Progress | None = None,
    inputs: Mapping[str, torch.Tensor] | None = None,
) -> dict:
    """Check, then time, every implementation on one shape; return its record (schema in bench_results)."""
    d = spec.dims
    inp = dict(inputs) if inputs is not None else _make_inputs(spec, dtype=dtype, device=device, seed=seed)
    gate = rel_err_gate(inp["x"].dtype)
    ms: dict[str, float | None] = {k: None for k in IMPLS}
    rel: dict[str, float | None] = {k: None for k in IMPLS}
    errors: dict[str, str] = {k: v for k, v in (missing or {}).items() if k in IMPLS}
    for k in IMPLS:
        if k not in impls and k not in errors:
            errors[k] = "not selected"

    y_ref = _reference(inp, d.Q)
    forwards: dict[str, Forward] = {}
    kernel_fns: dict[str, Forward] | None = None
    kernel_meta: dict = {}
    first_call: dict[str, float] = {}
    for name, impl in impls.items():
        try:
            fwd = impl.prepare(inp, d.Q)
            _poison_allocator(y_ref.shape, inp["x"].dtype, y_ref.device)
            start = time.perf_counter()
            y = fwd()
            if y_ref.is_cuda:
                torch.cuda.synchronize()
            first_call[name] = round(time.perf_counter() - start, 3)
            rel[name] = check_output(name, y, y_ref, gate=gate)
            del y
            forwards[name] = fwd
            if kernels and impl.kernels is not None:
                try:
                    kernel_fns = impl.kernels(inp, d.Q)
                    kernel_meta = kernel_fns.pop("meta", {})
                    check_output(f"{name} kernels one by one", kernel_fns.pop("chain")(), y_ref, gate=gate)
                except Exception as exc:  # noqa: BLE001
                    kernel_fns = None
                    errors[f"{name}_kernels"] = f"{type(exc).__name__}: {exc}"
        except IncorrectOutput as exc:
            errors[name] = f"failed the correctness check: {exc}"
            rel[name] = exc.rel_err
        except Exception as exc:  # noqa: BLE001 - an implementation that crashes is reported, not fatal
            errors[name] = f"raised {type(exc).__name__}: {exc}"
        if progress:
            progress.step(f"{spec.name} check {name}")
    del y_ref

    for name, fwd in forwards.items():
        try:
            ms[name] = float(timer(fwd, label=f"{spec.name}/{name}"))
        except Exception as exc:  # noqa: BLE001
            errors[name] = f"timing raised {type(exc).__name__}: {exc}"
        if progress:
            progress.step(f"{spec.name} time {name}")
    kernel_ms = None
    if kernel_fns is not None:
        try:
            kernel_ms = {k: float(timer(kernel_fns[k], label=f"{spec.name}/kernel/{k}"))
                         for k in stages_of(kernel_fns)}
        except Exception as exc:  # noqa: BLE001
            errors["cutile_kernels"] = f"timing raised {type(exc).__name__}: {exc}"

    cost_kw = dict(io_bytes=_elem(inp["x"]), dt_bytes=_elem(inp["dt"]))
    fwd_cost = roofline.forward_cost(d, **cost_kw)
    rec = {
        "name": spec.name,
        "dims": d.as_dict(),
        "dtype": str(inp["x"].dtype).replace("torch.", ""),
        "ms": ms,
        "rel_err": rel,
        "errors": {k: v for k, v in errors.items() if k in IMPLS and ms.get(k) is None}
        | {k: v for k, v in errors.items() if k not in IMPLS},
        "floor_ms": fwd_cost.floor_ms(ceilings),
        "flops": fwd_cost.flops,
        "bytes": fwd_cost.bytes,
        "bound": fwd_cost.bound(ceilings),
        "kernel_floor_ms": roofline.kernel_floors_ms(d, ceilings, **cost_kw, **kernel_meta),
        "first_call_s": first_call,
    }
    if kernel_ms is not None:
        rec["cutile_kernels_ms"] = kernel_ms
    cutile = impls.get("cutile")
    if cutile is not None and cutile.config is not None:
        rec["cutile_config"] = cutile.config(inp, d.Q)
    return rec


def _bench_shape_or_record_failure(spec: ShapeSpec, impls, **kwargs) -> dict:
    """``bench_shape``, but a failure outside the implementations (inputs, the reference: out of memory, say)
    becomes a record with no times and the reason, so one bad shape does not lose the whole run."""
    try:
        rec = bench_shape(spec, impls, **kwargs)
    except Exception as exc:  # noqa: BLE001
        reason = f"shape failed before timing: {type(exc).__name__}: {exc}"
        print(f"bench: {spec.name}: {reason}", file=sys.stderr)
        rec = {
            "name": spec.name,
            "dims": spec.dims.as_dict(),
            "dtype": str(kwargs["dtype"]).replace("torch.", ""),
            "ms": dict.fromkeys(IMPLS),
            "rel_err": dict.fromkeys(IMPLS),
            "errors": dict.fromkeys(IMPLS, reason),
            "floor_ms": roofline.floor_ms(spec.dims, kwargs["ceilings"]),
        }
    if str(kwargs.get("device", "")).startswith("cuda"):
        torch.cuda.empty_cache()
    return rec


def measure_overhead(
    spec: ShapeSpec, impls: Mapping[str, Impl], *, dtype, device: str, timer: Timer, seed: int = 0
) -> dict:
    """Launch and host overhead at a small shape, per implementation: device time (events), host time to issue
    one call, back-to-back time per call, and CUDA-graph replay time per call (None where capture fails)."""
    from .timing import capture_graph, time_host

    inp = _make_inputs(spec, dtype=dtype, device=device, seed=seed)
    y_ref = _reference(inp, spec.dims.Q)
    gate = rel_err_gate(inp["x"].dtype)
    rows: dict[str, dict] = {}
    for name, impl in impls.items():
        row: dict = {"event_ms": None, "host_us": None, "loop_us": None, "graph_us": None}
        try:
            fwd = impl.prepare(inp, spec.dims.Q)
            check_output(name, fwd(), y_ref, gate=gate)
            row["event_ms"] = float(timer(fwd, label=f"overhead/{name}"))
            ht = time_host(fwd)
            row["host_us"], row["loop_us"] = ht.host_us, ht.loop_us
            try:
                replay = capture_graph(fwd)
                row["graph_us"] = time_host(replay).loop_us
            except Exception as exc:  # noqa: BLE001
                row["graph_error"] = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # noqa: BLE001
            row["error"] = f"{type(exc).__name__}: {exc}"
        rows[name] = row
    return {"name": spec.name, "dims": spec.dims.as_dict(), "impls": rows}


def run_benchmark(
    shapes: Sequence[ShapeSpec],
    *,
    impl_names: Sequence[str] = IMPLS,
    impls: Mapping[str, Impl] | None = None,
    dtype: torch.dtype = torch.bfloat16,
    device: str = "cuda",
    timer: Timer | None = None,
    ceilings: roofline.Ceilings | None = None,
    sweep: Sequence[ShapeSpec] = (),
    overhead: ShapeSpec | None = None,
    seed: int = 0,
    progress: bool = True,
    device_name: str | None = None,
    settings: Mapping | None = None,
    checkpoint: Callable[[dict], None] | None = None,
    cutile_configs: Mapping[tuple, object] | None = None,
    steps: Sequence[ShapeSpec] = (),
) -> dict:
    """Run the whole benchmark and return the results object (schema in ``mamba2_tutorial.perf.results``).

    ``checkpoint(results)``, if given, is called after every shape, after the sweep and after the overhead
    section with what has been measured so far (a schema-valid object with ``"complete": false``), so a run
    killed part-way keeps its measurements (``results_writer(path)`` writes them to a file).
    ``cutile_configs``: our configs by problem size, in place of ``ssd_config``'s (``_make_cutile``).
    ``steps``: shapes at which every staged step from the taught kernels to the shipped config
    (:mod:`mamba2_tutorial.fast.steps`) is checked and timed, side by side in this run (notebook 10).
    """
    if impls is None:
        impls, missing = load_implementations(impl_names)
        if cutile_configs and "cutile" in impls:
            impls["cutile"] = _make_cutile(configs=cutile_configs)
    else:
        missing = {}
    timer = timer or cuda_timer()
    ceilings = ceilings or roofline.H200_CEILINGS
    if device_name is None:
        device_name = torch.cuda.get_device_name() if device.startswith("cuda") else f"{device} (not a GPU)"
    n_impl = len(impls)
    total = (len(shapes) + len(sweep)) * 2 * n_impl
    bar = _Progress(total, "bench", enabled=progress)
    common = dict(
        dtype=dtype, device=device, timer=timer, ceilings=ceilings, missing=missing, seed=seed, progress=bar
    )
    recs: list[dict] = []
    sweep_recs: list[dict] = []
    step_recs: list[dict] = []
    ov = None
    header = {
        "schema_version": SCHEMA_VERSION,
        "device": device_name,
        "kernels_sha256": kernels_sha256(),  # which kernels this run measured (perf.sources)
        "versions": versions(),
        "ceilings": ceilings.as_dict(),
        "settings": dict(settings or {}) | {"dtype": str(dtype).replace("torch.", ""), "seed": seed},
    }

    def results(complete: bool) -> dict:
        date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        return header | {
            "date": date,
            "shapes": list(recs),
            "sweep": list(sweep_recs),
            "overhead": ov,
            "complete": complete,
        } | ({"steps": list(step_recs)} if steps else {})

    def save() -> None:
        if checkpoint is not None:
            checkpoint(results(complete=False))

    try:
        for s in shapes:
            recs.append(_bench_shape_or_record_failure(s, impls, **common))
            save()
        for s in sweep:
            sweep_recs.append(_bench_shape_or_record_failure(s, impls, kernels=False, **common))
        if sweep:
            save()
        for s in steps:
            step_recs.append(bench_steps(s, dtype=dtype, device=device, timer=timer, seed=seed))
            save()
    finally:
        bar.close()
    if overhead is not None:
        # last, and the PyTorch reference last of all: a failed graph capture must not cost the other numbers
        order = sorted(impls, key=lambda k: k == "torch")
        try:
            ov = measure_overhead(
                overhead, {k: impls[k] for k in order}, dtype=dtype, device=device, timer=timer, seed=seed
            )
        except Exception as exc:  # noqa: BLE001
            print(f"bench: launch-overhead measurement failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        save()
    return results(complete=True)


def bench_steps(spec: ShapeSpec, *, dtype: torch.dtype, device: str, timer: Timer, seed: int = 0) -> dict:
    """Every staged step of :mod:`mamba2_tutorial.fast.steps` at one shape (with the segmented step when the
    shape's class is ``long``): each checked against the float64 reference, then timed end to end and stage
    by stage. A step that fails is recorded with its error, never timed."""
    from ..fast.config import config_to_json
    from ..fast.forward import ssd_forward
    from ..fast.steps import steps_for
    from ..fast.tuning import problem_class, segments_for, table_for_device

    d = spec.dims
    backend = "gpu" if str(device).startswith("cuda") else "cpu"  # the CPU executor only to test the wiring
    table = table_for_device(torch.device(device))
    key = problem_class((d.b, d.l, d.h, d.p, d.n, d.Q), dtype, table, device)  # None for float32: untuned
    long = key is not None and key.split("/")[2] == "long"
    segments = segments_for(d.b, d.h, -(-d.l // d.Q), table, device)
    steps = steps_for(segmented=long, segments=segments)
    rows = [{"name": step.name, "idea": step.idea, "config": config_to_json(step.config), "ms": None,
             "rel_err": None, "kernels_ms": None} for step in steps]
    record = {"name": spec.name, "dims": d.as_dict(), "dtype": str(dtype).replace("torch.", ""),
              "steps": rows}
    try:
        inp = _make_inputs(spec, dtype=dtype, device=device, seed=seed)
        y_ref = _reference(inp, d.Q)
    except Exception as exc:  # noqa: BLE001 - out of memory, say: every step says why it has no time
        for row in rows:
            row["error"] = f"shape failed before timing: {type(exc).__name__}: {exc}"
        return record
    gate = rel_err_gate(dtype)
    x, dt, A, B, C = (inp[k] for k in ("x", "dt", "A", "B", "C"))

    for step, row in zip(steps, rows):
        try:
            fwd = lambda cfg=step.config: ssd_forward(x, dt, A, B, C, d.Q, backend=backend, config=cfg)
            # a step that forgets to write part of y must not pass on the step before's result
            _poison_allocator(y_ref.shape, x.dtype, y_ref.device)
            row["rel_err"] = check_output(step.name, fwd(), y_ref, gate=gate)
            row["ms"] = float(timer(fwd, label=f"{spec.name}/step/{step.name}"))
            stages = _cutile_kernels(inp, d.Q, backend, step.config)
            stages.pop("meta")
            stages.pop("chain")
            row["kernels_ms"] = {k: float(timer(stages[k], label=f"{spec.name}/step/{step.name}/{k}"))
                                 for k in stages_of(stages)}
        except IncorrectOutput as exc:
            row["error"] = f"failed the correctness check: {exc}"
            row["rel_err"] = exc.rel_err
        except Exception as exc:  # noqa: BLE001 - a failed step is reported, not fatal
            row["error"] = f"{type(exc).__name__}: {exc}"
    return record


#: ``bench --packed``: the lengths of the sequences a row is packed from, uniform in this range (the last one
#: cut to fit the row)
PACKED_LENGTHS = (256, 4096)


def packed_seq_idx(b: int, l: int, *, seed: int, lengths: tuple[int, int] = PACKED_LENGTHS,
                   device="cpu") -> torch.Tensor:
    """seq_idx (b, l) int32 for rows packed from sequences of random lengths, uniform in ``lengths``
    (inclusive; the last sequence of a row is cut at l), drawn from a generator seeded with ``seed``."""
    lo, hi = lengths
    if not 1 <= lo <= hi:
        raise ValueError(f"packed sequence lengths must satisfy 1 <= low <= high, got {lengths}")
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(b):
        row = torch.empty(l, dtype=torch.int32)
        start, seq = 0, 0
        while start < l:
            n = int(torch.randint(lo, hi + 1, (1,), generator=gen))
            row[start:start + n] = seq
            start, seq = start + n, seq + 1
        rows.append(row)
    return torch.stack(rows).to(device)


def bench_packed(spec: ShapeSpec, *, dtype: torch.dtype, device: str, timer: Timer, seed: int = 0,
                 mamba: Callable | None = None, lengths: tuple[int, int] = PACKED_LENGTHS,
                 train: bool = True) -> dict:
    """A packed batch against the same batch unpacked (``bench --packed``): ``ssd_forward`` on the rows
    packed from sequences of random lengths (:func:`packed_seq_idx`), on the same rows unpacked, and the
    packed rows run sequence by sequence (``_each_sequence``, how a config that cannot pack in its kernels
    runs them); with ``mamba`` (mamba_ssm's ``mamba_chunk_scan_combined``) the same packed and unpacked.
    Each packed output is checked first against the float64 reference run on every sequence alone, each
    unpacked one against the float64 reference of the whole rows; a run that fails is recorded with its
    error, never timed. ``ms``, ``rel_err`` and ``errors`` by run name; ``packed_over_unpacked``: our packed
    time over our unpacked one. With ``train``, forward plus backward too (:func:`_packed_training`:
    ``packed_over_unpacked_fwd_bwd``, and ``grad_rel_err`` against mamba_ssm's packed gradients)."""
    import functools

    from ..fast.forward import _each_sequence, ssd_forward
    from ..fast.tuning import ssd_config
    from ..reference import ssd_chunked, ssd_each_sequence
    from ..runtime.validation import validate_packing

    d = spec.dims
    backend = "gpu" if str(device).startswith("cuda") else "cpu"  # the CPU executor only to test the wiring
    record = {"name": spec.name, "dims": d.as_dict(), "dtype": str(dtype).replace("torch.", ""),
              "lengths": list(lengths), "seed": seed, "sequences": None, "ms": {}, "rel_err": {},
              "errors": {}}
    try:
        inp = _make_inputs(spec, dtype=dtype, device=device, seed=seed)
        seq_idx = packed_seq_idx(d.b, d.l, seed=seed, lengths=lengths, device=device)
        record["sequences"] = [int(r[-1]) + 1 for r in seq_idx.cpu()]
        wide = {k: v.to(torch.float64) for k, v in inp.items()}
        chunked = functools.partial(ssd_chunked, chunk_size=d.Q)
        y_packed_ref = _first(ssd_each_sequence(chunked, wide["x"], wide["dt"], wide["A"], wide["B"],
                                                wide["C"], seq_idx))
        y_ref = _reference(inp, d.Q)
    except Exception as exc:  # noqa: BLE001 - out of memory, say: every run says why it has no time
        record["errors"]["shape"] = f"shape failed before timing: {type(exc).__name__}: {exc}"
        return record
    x, dt, A, B, C = (inp[k] for k in ("x", "dt", "A", "B", "C"))
    cfg = ssd_config(d.b, d.l, d.h, d.p, d.n, d.Q, dtype, x.device)
    packing = validate_packing(seq_idx, None, False, d.b, d.l, x.device)
    runs = {
        "cutile unpacked": (lambda: ssd_forward(x, dt, A, B, C, d.Q, backend=backend, config=cfg), y_ref),
        "cutile packed": (lambda: ssd_forward(x, dt, A, B, C, d.Q, seq_idx=seq_idx, backend=backend,
                                              config=cfg), y_packed_ref),
        "cutile each sequence": (lambda: _first(_each_sequence(
            packing, dict(x=x, dt=dt, A=A, B=B, C=C), False, chunk_size=d.Q, backend=backend)), y_packed_ref),
    }
    if mamba is not None:
        runs["mamba_ssm unpacked"] = (lambda: _first(mamba(x, dt, A, B, C, d.Q)), y_ref)
        runs["mamba_ssm packed"] = (lambda: _first(mamba(x, dt, A, B, C, d.Q, seq_idx=seq_idx)), y_packed_ref)
    gate = rel_err_gate(dtype)
    for name, (fwd, want) in runs.items():
        try:
            _poison_allocator(want.shape, x.dtype, want.device)
            record["rel_err"][name] = check_output(name, fwd(), want, gate=gate)
            record["ms"][name] = float(timer(fwd, label=f"{spec.name}/packed/{name}"))
        except IncorrectOutput as exc:
            record["errors"][name] = f"failed the correctness check: {exc}"
            record["rel_err"][name] = exc.rel_err
        except Exception as exc:  # noqa: BLE001 - a failed run is reported, not fatal
            record["errors"][name] = f"{type(exc).__name__}: {exc}"
    if train:
        _packed_training(record, spec, inp, seq_idx, backend, cfg, mamba, timer)
    ms = record["ms"]
    for suffix in ("", " fwd+bwd"):
        if f"cutile packed{suffix}" in ms and f"cutile unpacked{suffix}" in ms:
            record[f"packed_over_unpacked{suffix.replace(' ', '_').replace('+', '_')}"] = (
                ms[f"cutile packed{suffix}"] / ms[f"cutile unpacked{suffix}"])
    return record


#: the gradients ``bench --packed`` compares between our packed forward plus backward and mamba_ssm's
PACKED_GRADS = ("x", "dt", "A", "B", "C")


def _packed_training(record: dict, spec: ShapeSpec, inp, seq_idx, backend, cfg, mamba, timer) -> None:
    """Forward plus backward of the packed rows and of the same rows unpacked (``bench --packed``), ours and
    mamba_ssm's, timed into ``record`` under "<run> fwd+bwd". Our packed gradients are checked against
    mamba_ssm's packed ones (its own seq_idx path; relative L2 error per input, ``grad_rel_err``), where it
    imports."""
    from ..fast.forward import ssd_forward

    d = spec.dims
    x, dt, A, B, C = (inp[k] for k in PACKED_GRADS)
    leaves = [t.detach().clone().requires_grad_() for t in (x, dt, A, B, C)]
    dout = torch.randn(x.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float32).to(x)

    def step(forward, **packing):
        def run():
            out = _first(forward(*leaves, d.Q, **packing))
            return torch.autograd.grad(out, leaves, dout)
        return run

    def ours(*args, **kw):
        return ssd_forward(*args, backend=backend, config=cfg, **kw)

    runs = {"cutile unpacked fwd+bwd": step(ours), "cutile packed fwd+bwd": step(ours, seq_idx=seq_idx)}
    if mamba is not None:
        runs["mamba_ssm unpacked fwd+bwd"] = step(mamba)
        runs["mamba_ssm packed fwd+bwd"] = step(mamba, seq_idx=seq_idx)
    grads = {}
    for name, run in runs.items():
        forward_only = name.removesuffix(" fwd+bwd")
        if forward_only in record["errors"]:
            record["errors"][name] = f"not run: its forward ({forward_only}) has no time"
            continue
        try:
            grads[name] = [g.float() for g in run()]
            record["ms"][name] = float(timer(run, label=f"{spec.name}/packed/{name}"))
        except Exception as exc:  # noqa: BLE001 - a failed run is reported, not fatal
            record["errors"][name] = f"{type(exc).__name__}: {exc}"
    ours_g, theirs_g = grads.get("cutile packed fwd+bwd"), grads.get("mamba_ssm packed fwd+bwd")
    if ours_g is not None and theirs_g is not None:
        from ..lessons.checks import relative_error

        record["grad_rel_err"] = {k: float(relative_error(a, b)) for k, a, b in zip(PACKED_GRADS, ours_g,
                                                                                     theirs_g)}


#: the goal for a packed row: at most this many times the same row unpacked
PACKED_GOAL = 1.10


def packed_verdict(ratio: float) -> str:
    """Where a packed / unpacked time ratio stands against :data:`PACKED_GOAL`."""
    if ratio <= PACKED_GOAL:
        return f"within the goal of {PACKED_GOAL:.2f}x"
    if ratio > 2:
        return (f"far from the goal of {PACKED_GOAL:.2f}x: the packed row runs the unpacked row's launches, "
                f"so the extra time is not in more launches")
    return f"short of the goal of {PACKED_GOAL:.2f}x"


def format_packed(records: Sequence[Mapping]) -> str:
    """The ``bench --packed`` table: per shape, every run's time (or why it has none) and packed/unpacked."""
    lines = []
    for rec in records:
        d = rec["dims"]
        seqs = rec["sequences"]
        lines.append(f"{rec['name']} (b{d['b']} l{d['l']} h{d['h']} p{d['p']} g{d['g']} n{d['n']} Q{d['Q']}, "
                     f"{rec['dtype']}; rows packed from {seqs} sequences of lengths in {rec['lengths']})")
        for name in sorted(set(rec["ms"]) | set(rec["errors"])):
            if name in rec["ms"]:
                err = rec["rel_err"].get(name)
                note = f"   rel err {err:.1e}" if err is not None else ""
                lines.append(f"  {name:<28} {rec['ms'][name]:9.3f} ms{note}")
            else:
                lines.append(f"  {name:<28} {'-':>9}      {rec['errors'][name]}")
        for key, what in (("packed_over_unpacked", "forward"), ("packed_over_unpacked_fwd_bwd", "fwd+bwd")):
            if key in rec:
                verdict = packed_verdict(rec[key])
                lines.append(f"  cutile packed / unpacked, {what}: {rec[key]:.3f} ({verdict})")
        if "grad_rel_err" in rec:
            errs = ", ".join(f"d{k} {v:.1e}" for k, v in rec["grad_rel_err"].items())
            lines.append(f"  our packed gradients against mamba_ssm's (relative L2): {errs}")
    return "\n".join(lines)


def write_results(results: Mapping, path: Path) -> None:
    """Validate ``results`` and write them to ``path`` as JSON, atomically (a kill mid-write leaves the
    previous file)."""
    from .results import validate_results

    validate_results(results)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n")
    tmp.replace(path)


def results_writer(path: Path) -> Callable[[dict], None]:
    """A ``checkpoint`` for ``run_benchmark`` that rewrites ``path`` with the partial results; a failure to
    write is reported on stderr and does not stop the run."""

    def checkpoint(results: dict) -> None:
        try:
            write_results(results, path)
        except Exception as exc:  # noqa: BLE001 - the measurement matters more than its checkpoint
            print(f"bench: checkpoint {path} not written: {type(exc).__name__}: {exc}", file=sys.stderr)

    return checkpoint


# ----------------------------------------------------------------------------------------------------
# command line


def default_shapes(names: Sequence[str] = DEFAULT_SHAPES, chunk_size: int | None = None) -> list[ShapeSpec]:
    """The presets ``names``; with ``chunk_size``, each at that chunk size instead of its own (and named
    ``<preset>-Q<chunk_size>`` where that differs)."""
    from ..lessons.inputs import SHAPES

    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        raise SystemExit(f"unknown shape(s) {unknown}; presets: {sorted(SHAPES)}")
    specs = [ShapeSpec(n, roofline.dims_of(SHAPES[n])) for n in names]
    if chunk_size is None:
        return specs
    if chunk_size < 16 or chunk_size & (chunk_size - 1):
        raise SystemExit(f"--chunk-size must be a power of two of at least 16, got {chunk_size}")
    return [s if s.dims.Q == chunk_size else
            ShapeSpec(f"{s.name}-Q{chunk_size}", dataclasses.replace(s.dims, Q=chunk_size)) for s in specs]


def sweep_shapes(seqlens: Sequence[int] = SWEEP_SEQLENS, **base) -> list[ShapeSpec]:
    b = dict(SWEEP_BASE) | base
    return [
        ShapeSpec(
            f"b{b['batch']}-l{l}-h{b['nheads']}",
            roofline.Dims(
                b["batch"], l, b["nheads"], b["headdim"], b["ngroups"], b["dstate"], b["chunk_size"]
            ),
        )
        for l in seqlens
    ]


def overhead_shape() -> ShapeSpec:
    s = OVERHEAD_SHAPE
    return ShapeSpec(
        f"b{s['batch']}-l{s['seqlen']}-h{s['nheads']}",
        roofline.Dims(
            s["batch"], s["seqlen"], s["nheads"], s["headdim"], s["ngroups"], s["dstate"], s["chunk_size"]
        ),
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mamba2_tutorial bench",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--shapes",
        nargs="+",
        default=list(DEFAULT_SHAPES),
        metavar="NAME",
        help="presets from mamba2_tutorial.lessons.inputs.SHAPES (default: the four benchmark shapes)",
    )
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument(
        "--chunk-size",
        type=int,
        default=None,
        metavar="Q",
        help="run --shapes at this chunk size instead of their own (named <shape>-Q<Q>; TileGym, for one, is "
        "compared at 128 and 256)",
    )
    p.add_argument(
        "--impls",
        nargs="+",
        default=list(IMPLS),
        choices=list(IMPLS),
        metavar="IMPL",
        help=f"implementations to run (default: all of {', '.join(IMPLS)})",
    )
    p.add_argument("--out", type=Path, help="write the results JSON here")
    p.add_argument("--plot", type=Path, help="save the summary figure (PNG) here")
    p.add_argument("--warmup", type=float, default=25.0, metavar="MS", help="warm-up budget per timing (ms)")
    p.add_argument("--rep", type=float, default=100.0, metavar="MS", help="timed budget per timing (ms)")
    p.add_argument(
        "--sweep",
        nargs="*",
        type=int,
        default=list(SWEEP_SEQLENS),
        metavar="L",
        help="seqlens of the b4 h24 sweep (default %(default)s; give none to skip)",
    )
    p.add_argument("--no-overhead", action="store_true", help="skip the launch-overhead measurement")
    p.add_argument(
        "--steps",
        nargs="*",
        default=list(STEP_SHAPES),
        metavar="NAME",
        help="shapes at which every step from the taught kernels to the shipped config is timed "
        "(default %(default)s; give none to skip)",
    )
    p.add_argument(
        "--no-measure-ceilings",
        action="store_true",
        help="use the recorded H200 ceilings (790 TFLOP/s, 4.3 TB/s) instead of measuring them",
    )
    p.add_argument(
        "--packed",
        action="store_true",
        help="time only the packed batch at --shapes: ssd_forward on rows packed from sequences of random "
        f"lengths (uniform in {list(PACKED_LENGTHS)}, --seed) against the same rows unpacked and run "
        "sequence by sequence, and mamba_ssm's with the same seq_idx where it imports",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--configs",
        type=Path,
        nargs="+",
        metavar="FILE.json",
        help="our configs per shape name, {name: FastConfig as JSON}, in place of what ssd_config picks for "
        "those shapes (a candidate measured beside the baselines before it goes into a tuning table); a "
        "later file wins",
    )
    return p


def config_mismatches(results: Mapping) -> list[str]:
    """The shapes of a results object whose recorded ``cutile_config`` is not what ``ssd_config`` picks now
    for that size and dtype on its GPU (its own table, or the default table on a GPU without one): a shipped
    result must be the shipped configs' measurement."""
    from ..fast.config import config_from_json
    from ..fast.tuning import DEFAULT_TABLE, load_table, problem_class, table_names, with_segments

    tables = [load_table(n) for n in table_names()]
    # the table measured on the run's GPU, else the default one, as ssd_config picks it (table_for_device)
    table = next((t for t in tables if t.gpu == results.get("device")), None) or load_table(DEFAULT_TABLE)
    problems = []
    for rec in list(results.get("shapes", [])) + list(results.get("sweep", [])):
        if "cutile_config" not in rec:
            continue
        d = rec["dims"]
        dtype = getattr(torch, rec["dtype"])
        key = problem_class(tuple(d[k] for k in "blhpnQ"), dtype, table)
        now = table.config(key)
        ran = config_from_json(rec["cutile_config"])
        if getattr(ran.state, "segments", None) is not None:
            now = with_segments(now, d["b"], d["h"], -(-d["l"] // d["Q"]), table)
        if ran != now:
            problems.append(f"{rec['name']}: measured with {ran}, but the {table.name} table's class {key} "
                            f"now runs {now}")
    return problems


def read_configs(path: Path) -> dict[tuple, object]:
    """``--configs``: {shape preset name: FastConfig as JSON} -> {(b, l, h, p, g, n, Q): FastConfig}."""
    from ..fast.config import config_from_json
    from ..lessons.inputs import SHAPES

    data = json.loads(Path(path).read_text())
    if not isinstance(data, Mapping):
        raise ValueError(f"{path}: expected an object {{shape name: FastConfig as JSON}}")
    configs = {}
    for name, fields in data.items():
        if name not in SHAPES:
            raise ValueError(f"{path}: unknown shape {name!r}; presets: {sorted(SHAPES)}")
        d = default_shapes([name])[0].dims
        try:
            configs[(d.b, d.l, d.h, d.p, d.g, d.n, d.Q)] = config_from_json(fields)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {name}: {exc}") from exc
    return configs


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    if not torch.cuda.is_available():
        print(
            "bench: needs a CUDA GPU (torch.cuda.is_available() is False). On a CPU, notebook 09 shows the "
            "shipped H200 results (mamba2_tutorial.perf.results.load_shipped_results()).",
            file=sys.stderr,
        )
        return 2
    shapes = default_shapes(args.shapes, args.chunk_size)
    if args.packed:
        return _main_packed(args, shapes)
    configs = {k: v for path in args.configs or () for k, v in read_configs(path).items()} or None
    ceilings = roofline.H200_CEILINGS if args.no_measure_ceilings else roofline.measure_ceilings()
    print(
        f"ceilings: {ceilings.mma_flops_per_s / 1e12:.0f} TFLOP/s bf16 mma, "
        f"{ceilings.copy_bytes_per_s / 1e12:.2f} TB/s copy ({ceilings.source})",
        file=sys.stderr,
    )
    cmd = "python -m mamba2_tutorial bench " + " ".join(argv if argv is not None else sys.argv[1:])
    results = run_benchmark(
        shapes,
        impl_names=args.impls,
        dtype=DTYPES[args.dtype],
        timer=cuda_timer(args.warmup, args.rep),
        ceilings=ceilings,
        sweep=sweep_shapes(args.sweep) if args.sweep else (),
        overhead=None if args.no_overhead else overhead_shape(),
        seed=args.seed,
        progress=not args.quiet,
        checkpoint=results_writer(args.out) if args.out else None,
        cutile_configs=configs,
        steps=default_shapes(args.steps) if args.steps else (),
        settings={
            "configs": [str(path) for path in args.configs or ()],
            "warmup_ms": args.warmup,
            "rep_ms": args.rep,
            "command": cmd.strip(),
            "timer": "CUDA events, median, L2 flushed before each call "
                     "(mamba2_tutorial.perf.timing.time_cuda)",
        },
    )
    from .results import validate_results

    validate_results(results)
    print(format_table(results))
    if results["sweep"]:
        print()
        print(format_table(results, records="sweep"))
    print()
    print(format_overhead(results))
    if results.get("steps"):
        print()
        print(format_steps(results))
    if args.out:
        write_results(results, args.out)
        print(f"wrote {args.out}")
    if args.plot:
        from .plots import summary_figure

        fig = summary_figure(results)
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.plot, dpi=120, bbox_inches="tight")
        print(f"wrote {args.plot}")
    return 0


def _main_packed(args, shapes: Sequence[ShapeSpec]) -> int:
    """``bench --packed``: :func:`bench_packed` at every shape, printed, and written to ``--out`` (JSON)."""
    try:
        mamba = import_mamba_chunk_scan_combined()
    except Exception as exc:  # noqa: BLE001 - mamba_ssm is optional here
        print(f"bench --packed: mamba_ssm not timed ({type(exc).__name__}: {exc})", file=sys.stderr)
        mamba = None
    timer = cuda_timer(args.warmup, args.rep)
    records = [bench_packed(spec, dtype=DTYPES[args.dtype], device="cuda", timer=timer, seed=args.seed,
                            mamba=mamba) for spec in shapes]
    print(format_packed(records))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "date": date,
                                        "kernels_sha256": kernels_sha256(), "versions": versions(),
                                        "packed": records}, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0
