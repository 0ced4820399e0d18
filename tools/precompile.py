"""Compile ahead of time every cuTile kernel a benchmark or GPU-test run will launch, in parallel, into
cuTile's disk cache.

cuTile compiles each kernel signature the first time it is launched (``tileiras``: seconds to minutes per
signature), one after another. A run that meets dozens of signatures (the benchmark's shapes, its per-stage
timings, the staged steps, the GPU tests) spends most of its time compiling. This tool records those launches
without running them (``mamba2_tutorial.runtime.launch.recording``: each launch's kernel, hint and arguments
are kept, nothing executes), derives each one's signature as ``ct.launch`` does
(``mamba2_tutorial.runtime.signature``), and compiles the distinct ones with ``--jobs`` processes into the
cache that ``ct.launch`` looks up first (``CUDA_TILE_CACHE_DIR``, else cuTile's default). The run that follows
finds them there.

Typical use, on a GPU node (also one without network access: nothing here downloads anything)::

    python tools/precompile.py --bench --jobs 16 --pytest -m gpu tests && python -m mamba2_tutorial bench

It also runs on a CPU-only machine (``--device cpu``: host tensors of the same sizes), but cuTile's cache keys
include the absolute paths of the kernels' source files, so such a cache hits only where the project and
cuda-tile are installed at the same paths.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class Launch:
    """One recorded launch: the (hinted) kernel and the signature ``ct.launch`` would compile for it."""

    __slots__ = ("kernel", "signature")

    def __init__(self, kernel, signature):
        self.kernel, self.signature = kernel, signature

    @property
    def name(self) -> str:
        return self.kernel._pyfunc.__name__

    @property
    def key(self) -> tuple:
        """Equal for launches that compile to the same cubin: the kernel, its hints, its signature."""
        return (self.kernel._pyfunc, repr(self.kernel._compiler_options),
                self.signature.with_mangled_symbol(self.name).symbol)

    def __str__(self) -> str:
        occupancy = self.kernel._compiler_options.occupancy
        return self.name + (f" occupancy {occupancy}" if occupancy else "")


@contextmanager
def recording():
    """Inside the block every kernel launch is recorded (a :class:`Launch` appended to the yielded list),
    not run."""
    from mamba2_tutorial.runtime.launch import recording as record_launches
    from mamba2_tutorial.runtime.signature import kernel_signature

    seen: list[Launch] = []

    def record(kernel, grid, args):
        seen.append(Launch(kernel, kernel_signature(kernel, args)))

    with record_launches(record):
        yield seen


def bench_launches(device: str) -> list[Launch]:
    """What ``python -m mamba2_tutorial bench`` launches with its defaults: for every shape, the sweep and
    the overhead shape, ``ssd_forward`` (shipped config) and its stages and ``ssd_forward_taught``; every
    staged step at the step shapes."""
    import torch

    from mamba2_tutorial.fast.forward import ssd_forward, ssd_stages
    from mamba2_tutorial.fast.steps import steps_for
    from mamba2_tutorial.kernels.forward import ssd_forward_taught
    from mamba2_tutorial.perf import bench

    backend = "gpu" if device == "cuda" else "cpu"
    specs = bench.default_shapes() + list(bench.sweep_shapes()) + [bench.overhead_shape()]
    launches: list[Launch] = []
    for spec in specs:
        inp = bench._make_inputs(spec, dtype=torch.bfloat16, device=device, seed=0)
        args = tuple(inp[k] for k in ("x", "dt", "A", "B", "C")) + (spec.dims.Q,)
        with recording() as seen:
            ssd_forward(*args, backend=backend)
            ssd_stages(*args, backend=backend)
            ssd_forward_taught(*args, backend=backend)
            if spec.name in bench.STEP_SHAPES:
                for step in steps_for(segmented=True):
                    ssd_forward(*args, backend=backend, config=step.config)
                    ssd_stages(*args, backend=backend, config=step.config)
        launches += seen
        del inp, args
    return launches


def train_launches(device: str, names=None) -> list[Launch]:
    """What ``python -m mamba2_tutorial bench-train`` launches with its defaults: forward and backward of
    ``ssd_forward`` and ``ssd_forward_taught`` at every shape and at its correctness slice; and, at the first
    shape, what ``--stages`` and ``--sweep`` add (every setting the sweep tries is its own compile)."""
    import torch

    from mamba2_tutorial.fast.forward import ssd_forward
    from mamba2_tutorial.kernels.forward import ssd_forward_taught
    from mamba2_tutorial.lessons.inputs import BENCHMARK_SHAPES, get_shape, make_inputs
    from mamba2_tutorial.perf.bench_train import CHECK_LEN, GRADS

    backend = "gpu" if device == "cuda" else "cpu"
    launches: list[Launch] = []
    for name in names or BENCHMARK_SHAPES:
        full = get_shape(name)
        for shape in (full, full.scaled(batch=1, seqlen=min(full.seqlen, CHECK_LEN))):
            inp = make_inputs(shape, dtype=torch.bfloat16, device=device, D=False)
            leaves = [inp[k].detach().requires_grad_() for k in GRADS]
            with recording() as seen:
                for forward in (ssd_forward, ssd_forward_taught):
                    out = forward(*leaves, shape.chunk_size, backend=backend)
                    torch.autograd.grad(out, leaves, torch.ones_like(out))
            launches += seen
    from mamba2_tutorial.perf import bench_train

    if names:
        return launches
    first = get_shape(BENCHMARK_SHAPES[0])
    with recording() as seen:
        for extra in (bench_train.backward_stages, bench_train.backward_sweep):
            extra(first, torch.bfloat16, backend=backend, device=device, timer=lambda fn: fn() and 0.0)
    launches += seen
    return launches


def packed_launches(device: str) -> list[Launch]:
    """What ``python -m mamba2_tutorial bench --packed`` launches at its default shapes: ``ssd_forward`` on
    rows packed from sequences of random lengths (the resets inside the kernels), the same rows unpacked,
    and the packed rows one sequence at a time; and forward plus backward of a packed row (under autograd,
    the resets inside the forward's and the backward's kernels)."""
    import torch

    from mamba2_tutorial.fast.forward import ssd_forward
    from mamba2_tutorial.perf import bench

    backend = "gpu" if device == "cuda" else "cpu"
    launches: list[Launch] = []
    for spec in bench.default_shapes():
        d = spec.dims
        inp = bench._make_inputs(spec, dtype=torch.bfloat16, device=device, seed=0)
        seq_idx = bench.packed_seq_idx(d.b, d.l, seed=0, device=device)
        x, dt, A, B, C = (inp[k] for k in ("x", "dt", "A", "B", "C"))
        with recording() as seen:
            ssd_forward(x, dt, A, B, C, d.Q, backend=backend)
            ssd_forward(x, dt, A, B, C, d.Q, seq_idx=seq_idx, backend=backend)
            first = seq_idx[0] == 0                  # one sequence alone: the each-sequence signatures
            n = int(first.sum())
            ssd_forward(x[:1, :n], dt[:1, :n], A, B[:1, :n], C[:1, :n], d.Q, backend=backend)
            leaves = [t.detach().requires_grad_() for t in (x, dt, A, B, C)]
            out = ssd_forward(*leaves, d.Q, seq_idx=seq_idx, backend=backend)
            torch.autograd.grad(out, leaves, torch.ones_like(out))
        launches += seen
        del inp, seq_idx, x, dt, A, B, C
    return launches


def tilegym_launches(device: str, chunk_sizes, backward: bool) -> list[Launch]:
    """Every launch TileGym's Mamba-2 forward (and, with ``backward``, its backward) would make at the
    benchmark's shapes and ``chunk_sizes``, its tuner's candidates included: TileGym searches each kernel's
    launch settings on its first call (``cuda.tile.tune.exhaustive_search``), compiling every candidate one
    after another, minutes per shape. Compiled here in parallel, its tuning then only times them. Recorded by
    standing in for its search (each candidate's launch recorded, the first one taken) and for
    ``ct.launch``; TileGym's caches of tuned settings are emptied afterwards."""
    from types import SimpleNamespace

    import cuda.tile as ct
    import tilegym.ops.cutile.mamba2 as tg
    import torch

    from mamba2_tutorial.perf import bench
    from mamba2_tutorial.runtime.signature import kernel_signature

    seen: list[Launch] = []

    def search(configs, stream, grid_fn, kernel, args_fn, hints_fn, *rest, **options):
        configs = list(configs)
        for cfg in configs:
            hinted = kernel.replace_hints(**hints_fn(cfg))
            seen.append(Launch(hinted, kernel_signature(hinted, args_fn(cfg))))
        return SimpleNamespace(best=SimpleNamespace(config=configs[0]))

    def launch(stream, grid, kernel, args):
        seen.append(Launch(kernel, kernel_signature(kernel, args)))

    saved = tg.exhaustive_search, ct.launch
    tg.exhaustive_search, ct.launch = search, launch
    try:
        for Q in chunk_sizes:
            for spec in bench.default_shapes(chunk_size=Q):
                inp = bench._make_inputs(spec, dtype=torch.bfloat16, device=device, seed=0)
                a = bench.tilegym_inputs(inp, Q)
                args = (a["x"], a["a"], a["b"], a["c"], a["d"], a["dt"], a["init_state"])
                tg.mamba2_chunk_forward(*args, chunk_size=Q)
                if backward:
                    dout, dfinal = torch.ones_like(a["x"]), torch.zeros_like(a["init_state"])
                    tg.mamba2_chunk_backward(*args, dout, dfinal, chunk_size=Q)
                del inp, a, args
    finally:
        tg.exhaustive_search, ct.launch = saved
        for name in dir(tg):
            if name.endswith("_tune_cache"):
                getattr(tg, name).clear()
    return seen


def bench_at_chunk_sizes(device: str, chunk_sizes) -> list[Launch]:
    """``ssd_forward`` (shipped configs) at the benchmark's shapes run at other chunk sizes
    (``bench --chunk-size``)."""
    import torch

    from mamba2_tutorial.fast.forward import ssd_forward
    from mamba2_tutorial.perf import bench

    backend = "gpu" if device == "cuda" else "cpu"
    launches: list[Launch] = []
    for Q in chunk_sizes:
        for spec in bench.default_shapes(chunk_size=Q):
            inp = bench._make_inputs(spec, dtype=torch.bfloat16, device=device, seed=0)
            with recording() as seen:
                ssd_forward(*(inp[k] for k in ("x", "dt", "A", "B", "C")), Q, backend=backend)
            launches += seen
            del inp
    return launches


def pytest_launches(pytest_args: list[str]) -> list[Launch]:
    """The launches a pytest run makes (e.g. ``-m gpu tests``), recorded: the tests run with every kernel
    launch recorded instead of executed, so their results are meaningless and their failures ignored; only
    the launches are kept."""
    import pytest

    from mamba2_tutorial.runtime.launch import recording as record_launches
    from mamba2_tutorial.runtime.signature import kernel_signature

    seen: list[Launch] = []

    class Recorder:
        def pytest_runtest_setup(self, item):
            self.block = record_launches(
                lambda k, grid, args: seen.append(Launch(k, kernel_signature(k, args))))
            self.block.__enter__()

        def pytest_runtest_teardown(self, item):
            self.block.__exit__(None, None, None)

    pytest.main(["-q", "-o", "addopts=", "-p", "no:cacheprovider", "--no-header", *pytest_args],
                plugins=[Recorder()])
    return seen


_WORK: list[Launch] = []  # the launches to compile, inherited by the forked workers (kernels don't pickle)


def _compile(task) -> tuple[str, float, str | None]:
    index, cache_dir, arch = task
    launch = _WORK[index]
    from cuda.tile._cext import default_tile_context
    from cuda.tile.compilation import export_kernel

    if cache_dir:
        default_tile_context.config.cache_dir = cache_dir
    start = time.perf_counter()
    try:
        export_kernel(launch.kernel, [launch.signature], io.BytesIO(), gpu_code=arch, output_format="cubin")
    except Exception as exc:  # noqa: BLE001 - reported: the run would fail to compile it too
        return str(launch), time.perf_counter() - start, f"{type(exc).__name__}: {str(exc)[:300]}"
    return str(launch), time.perf_counter() - start, None


def compile_all(launches: list[Launch], cache_dir: str | None, arch: str, jobs: int) -> int:
    """Compile the distinct launches with ``jobs`` processes; print one line each; return the failures."""
    import multiprocessing as mp

    distinct = list({launch.key: launch for launch in launches}.values())
    print(f"{len(launches)} launches recorded, {len(distinct)} distinct signatures; compiling for {arch} "
          f"with {jobs} process(es) into {cache_dir or 'the default cache'}", flush=True)
    _WORK[:] = distinct
    tasks = [(i, cache_dir, arch) for i in range(len(distinct))]
    failures = 0
    start = time.perf_counter()
    with mp.get_context("fork").Pool(max(1, jobs)) as pool:
        for done, (name, secs, err) in enumerate(pool.imap_unordered(_compile, tasks), 1):
            print(f"[{done}/{len(tasks)}] {name}: {secs:.1f} s" + (f" FAILED {err}" if err else ""),
                  flush=True)
            failures += err is not None
    print(f"compiled {len(tasks)} in {time.perf_counter() - start:.0f} s, {failures} failed", flush=True)
    return failures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", action="store_true", help="what `python -m mamba2_tutorial bench` launches")
    ap.add_argument("--bench-train", nargs="*", default=None, metavar="SHAPE",
                    help="what `python -m mamba2_tutorial bench-train` launches; with shape names, what "
                    "`bench-train --shapes SHAPE ...` launches (no --stages or --sweep)")
    ap.add_argument("--packed", action="store_true",
                    help="what `python -m mamba2_tutorial bench --packed` launches, forward and backward")
    ap.add_argument("--chunk-sizes", type=int, nargs="+", default=(), metavar="Q",
                    help="what `bench --chunk-size Q` adds for each Q (our forward at the benchmark shapes)")
    ap.add_argument("--tilegym", choices=("forward", "train"), default=None,
                    help="TileGym's Mamba-2 kernels and every candidate its tuner tries, at the benchmark "
                    "shapes and --chunk-sizes (default 128 256): forward, or forward and backward")
    ap.add_argument("--pytest", nargs=argparse.REMAINDER, default=None, metavar="ARGS",
                    help="what a pytest run with these arguments launches, e.g. --pytest -m gpu tests (last)")
    ap.add_argument("--arch", default=None, help="e.g. sm_90 (default: the GPU's, else sm_90)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None,
                    help="where the recorded inputs live (default: cuda when available)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--cache-dir", default=os.environ.get("CUDA_TILE_CACHE_DIR"),
                    help="cuTile's cache directory (default: $CUDA_TILE_CACHE_DIR, else cuTile's own)")
    args = ap.parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    arch = args.arch
    if arch is None:
        major, minor = torch.cuda.get_device_capability() if device == "cuda" else (9, 0)
        arch = f"sm_{major}{minor}"
    launches: list[Launch] = []
    if args.bench:
        launches += bench_launches(device)
    if args.bench_train is not None:
        launches += train_launches(device, args.bench_train)
    if args.packed:
        launches += packed_launches(device)
    if args.chunk_sizes:
        launches += bench_at_chunk_sizes(device, args.chunk_sizes)
    if args.tilegym:
        launches += tilegym_launches(device, args.chunk_sizes or (128, 256), backward=args.tilegym == "train")
    if args.pytest:
        launches += pytest_launches(args.pytest)
    if not launches:
        ap.error("nothing to compile: pass --bench, --bench-train, --packed, --chunk-sizes, --tilegym and/or "
                 "--pytest ARGS")
    return 1 if compile_all(launches, args.cache_dir, arch, args.jobs) else 0


if __name__ == "__main__":
    sys.exit(main())
