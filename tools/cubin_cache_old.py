"""The GPU's cubins compiled ahead of time on a CPU: cuTile's disk cache, filled before the GPU run.

A GPU machine spends 4-30 s of tileiras on every kernel signature it meets first (a probe of 18 launch
configurations, the benchmark, the GPU tests: minutes of a 30-minute device session). cuTile looks each
compile up in a disk cache first (``CUDA_TILE_CACHE_DIR``, an SQLite file) under the hash of the compiler's
version, the architecture, the optimization level and the kernel's Tile IR bytecode. That bytecode is the
same on any machine given the same kernel source, the same signature (``mamba2_tutorial.signature``, checked
against ``ct.launch``'s own derivation), the same cuda-tile and tileiras versions, and the same absolute
paths of the source files, which the debug information records: the package's own and cuda.tile's. So:

- the cache is built (:func:`build`) and used with the project at :data:`PROJECT_ROOT` and cuda.tile
  installed under :data:`GPU_SITE` (where ``.gpu-bundle/activate.sh`` puts it on the GPU machine);
  ``benchmarks/cubin_cache.sh`` sets that up here, ``benchmarks/gpu_env.sh`` there;
- :func:`recording_launches` runs ``ssd_forward`` on CPU tensors of the GPU run's real sizes with every launch
  recorded instead of run (:func:`ssd_launches`), so that the recorded signatures are the GPU run's;
- the cache travels compressed (``.cubin-cache/<name>/cache.db.xz``: cubins compress 10-20x; one pack per
  device call, since the travelling tree is limited to 64 MiB and ``.gpu-bundle`` takes 59 MB of it) and
  :func:`report` says afterwards which lookups hit and what the GPU had to compile anyway.

A cubin that misses costs only the compile it would have cost anyway; one that hits is the same bytes
tileiras would have produced there (same compiler, same input).

    bash benchmarks/cubin_cache.sh bench --bench          # here: .cubin-cache/bench/cache.db.xz
    python -m mamba2_tutorial.cubin_cache report /tmp/cutile-cache    # there, after the run
"""

from __future__ import annotations

import argparse
import io
import json
import lzma
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "GPU_SITE",
    "PROJECT_ROOT",
    "Launch",
    "build",
    "check_paths",
    "config_test_launches",
    "recording_launches",
    "report",
    "ssd_launches",
]

#: where the project must live, here and on the GPU machine, for cache keys to match
PROJECT_ROOT = "/tmp/mamba2-cutile"
#: where cuda.tile must be installed, here and on the GPU machine (``.gpu-bundle/activate.sh`` installs there)
GPU_SITE = "/tmp/gpu-site"
#: the compressed cache file that travels with the project (an ignored path: name it in the run's carry)
PACKED_NAME = "cache.db.xz"
#: written next to an unpacked cache: when it was unpacked (for :func:`report`)
UNPACKED_AT = "unpacked_at"


class Launch:
    """One recorded launch: the (hinted) kernel, the signature ``ct.launch`` would compile, the grid, and the
    shape of each tensor argument (None for the others; the tensors themselves are not kept)."""

    __slots__ = ("kernel", "signature", "grid", "shapes")

    def __init__(self, kernel, signature, grid=None, shapes=()):
        self.kernel, self.signature, self.grid, self.shapes = kernel, signature, grid, shapes

    @property
    def occupancy(self) -> int | None:
        return self.kernel._compiler_options.occupancy

    @property
    def key(self) -> tuple:
        """Equal for launches that compile to the same cubin: the kernel, its hints, its signature."""
        return (self.kernel._annotated_function.pyfunc, repr(self.kernel._compiler_options),
                self.signature.with_mangled_symbol(self.name).symbol)

    @property
    def name(self) -> str:
        return self.kernel._annotated_function.pyfunc.__name__

    def __str__(self) -> str:
        o = self.kernel._compiler_options
        hints = "".join(f" {k} {v}" for k, v in (("occupancy", o.occupancy), ("num_ctas", o.num_ctas),
                                                  ("num_worker_warps", o.num_worker_warps)) if v is not None)
        return f"{self.name}{hints} [{self.signature.with_mangled_symbol(self.name).symbol[-40:]}]"


@contextmanager
def recording_launches():
    """Inside the block every SSD kernel launch (``kernels._host.launch``) is recorded, not run; yields the
    list of :class:`Launch` it fills. Outputs stay unwritten: use it to learn what a call launches."""
    from .kernels import _host
    from .signature import kernel_signature

    seen: list[Launch] = []

    def record(kernel, grid, args):
        shapes = tuple(tuple(a.shape) if hasattr(a, "shape") else None for a in args)
        seen.append(Launch(kernel, kernel_signature(kernel, args), tuple(grid), shapes))

    saved, _host._RECORDER = _host._RECORDER, record
    try:
        yield seen
    finally:
        _host._RECORDER = saved


def ssd_launches(shape, *, config=None, dtype=None, stages: bool = True) -> list[Launch]:
    """Every launch that ``ssd_forward`` (with and without final states, as the probe and the benchmark
    call it) and, with ``stages``, ``ssd_stages`` (the benchmark's per-kernel timing) make for ``shape`` (an
    ``SSDShape`` or preset name) with ``config`` (None: the shipped ``ssd_config``). Inputs as the benchmark
    makes them (``make_inputs``, bf16 by default, no D), on the CPU, at full size; nothing runs."""
    import torch

    from .inputs import get_shape, make_inputs
    from .ssd import ssd_forward, ssd_stages

    shape = get_shape(shape)
    inp = make_inputs(shape, dtype=dtype or torch.bfloat16, D=False)
    Q = shape.chunk_size
    with recording_launches() as seen:
        for final in (False, True):
            ssd_forward(**inp, chunk_size=Q, return_final_states=final, backend="cpu", _config=config)
        if stages:
            ssd_stages(**inp, chunk_size=Q, backend="cpu", config=config)
    return seen


def config_test_launches(root: str | os.PathLike = PROJECT_ROOT, only: Sequence[str] = ()) -> list[Launch]:
    """The launches of ``tests/test_kernel_configs.py``'s GPU cases (``GPU_CASES``: ``gpu_case`` gives each
    one's shape and config, ``check_inputs`` its arguments) and of its other GPU tests (``extra_gpu_calls``),
    recorded on the CPU; ``only``: the cases whose name (or test id) contains one of these strings (as
    ``pytest -k "a or b"`` picks them), all when empty."""
    import importlib.util

    from .inputs import make_inputs
    from .ssd import ssd_forward

    path = Path(root) / "tests" / "test_kernel_configs.py"
    spec = importlib.util.spec_from_file_location("_config_tests", path)
    tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tests)
    launches: list[Launch] = []
    for name, dtype, Q in tests.GPU_CASES:
        if only and not any(part in name for part in only):
            continue
        shape, cfg = tests.gpu_case(name, Q)
        inputs = tests.check_inputs(shape, dtype, 0, "cpu")
        with recording_launches() as seen:
            ssd_forward(**inputs, chunk_size=Q, return_final_states=True, backend="cpu", _poison=True,
                        _config=cfg)
        launches += seen
    for test_id, shape, cfg, kwargs in tests.extra_gpu_calls():
        if only and not any(part in test_id for part in only):
            continue
        inputs = make_inputs(shape, **kwargs)
        with recording_launches() as seen:
            ssd_forward(**inputs, chunk_size=shape.chunk_size, backend="cpu", _config=cfg)
        launches += seen
    return launches


def check_paths() -> None:
    """RuntimeError unless this process imports the project from PROJECT_ROOT and cuda.tile from GPU_SITE
    (otherwise the cubins built here would never be found on the GPU machine)."""
    import cuda.tile as ct

    import mamba2_tutorial

    project = str(Path(mamba2_tutorial.__file__).resolve().parent.parent)
    tile = str(Path(ct.__file__).resolve())
    problems = []
    if project != PROJECT_ROOT:
        problems.append(f"the package is imported from {project}, not {PROJECT_ROOT}")
    if not tile.startswith(GPU_SITE + "/"):
        problems.append(f"cuda.tile is imported from {tile}, not from under {GPU_SITE}")
    if problems:
        raise RuntimeError(
            "cache keys would not match the GPU machine's: " + "; ".join(problems)
            + ". Build the cache with benchmarks/cubin_cache.sh, which copies the project there and installs "
            "cuda-tile there first."
        )


def unique(launches: Iterable[Launch]) -> list[Launch]:
    """One launch per distinct cubin, in first-seen order."""
    found: dict = {}
    for launch in launches:
        found.setdefault(launch.key, launch)
    return list(found.values())


def _compile_into(cache_dir: str, launch: Launch, arch: str) -> tuple[str, float, str | None]:
    from cuda.tile._cext import default_tile_context
    from cuda.tile.compilation import export_kernel

    default_tile_context.config.cache_dir = cache_dir
    start = time.perf_counter()
    try:
        export_kernel(launch.kernel, [launch.signature], io.BytesIO(), gpu_code=arch, output_format="cubin")
    except Exception as exc:  # noqa: BLE001 - reported: the GPU would have failed to compile it too
        return str(launch), time.perf_counter() - start, f"{type(exc).__name__}: {str(exc)[:300]}"
    return str(launch), time.perf_counter() - start, None


_WORK: list[Launch] = []  # the launches of build(), inherited by its forked workers


def _compile_one(args) -> tuple[str, float, str | None]:
    index, cache_dir, arch = args
    return _compile_into(cache_dir, _WORK[index], arch)


def build(launches: Sequence[Launch], out_dir: str | os.PathLike, *, arch: str = "sm_90", jobs: int = 2,
          fresh: bool = False, seed: Sequence[str | os.PathLike] = (), fixed_paths: bool = True,
          progress=print) -> dict:
    """Compile every distinct launch into a cuTile cache and pack it as ``out_dir/cache.db.xz`` (added to
    the one already there unless ``fresh``). Returns counts; compile failures are listed, not raised.

    ``seed``: other packs whose cubins are reused where they fit; the pack then keeps only what this build's
    launches use (a smaller pack cut out of a larger one, without compiling again). ``fixed_paths=False``
    skips :func:`check_paths` (a cache for this machine's own paths: the tests)."""
    import multiprocessing as mp

    if fixed_paths:
        check_paths()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    packed = out / PACKED_NAME
    work = unique(launches)
    with tempfile.TemporaryDirectory(prefix="cubin-cache-") as tmp:
        db = Path(tmp) / "cache.db"
        sources = ([packed] if packed.exists() and not fresh else []) + [Path(p) for p in seed]
        if sources:
            unpack(sources, tmp)
        before = _count(tmp)
        t0 = time.time()
        _WORK[:] = work
        tasks = [(i, tmp, arch) for i in range(len(work))]
        failures = {}
        start = time.perf_counter()
        if jobs > 1 and len(tasks) > 1:
            with mp.get_context("fork").Pool(jobs) as pool:
                results = pool.imap_unordered(_compile_one, tasks)
                for done, (name, secs, err) in enumerate(results, 1):
                    progress(f"[{done}/{len(tasks)}] {name} {secs:.1f} s" + (f" FAILED {err}" if err else ""))
                    if err:
                        failures[name] = err
        else:
            for done, task in enumerate(tasks, 1):
                name, secs, err = _compile_one(task)
                progress(f"[{done}/{len(tasks)}] {name} {secs:.1f} s" + (f" FAILED {err}" if err else ""))
                if err:
                    failures[name] = err
        if seed:  # keep only what this build looked up or compiled
            with sqlite3.connect(db) as conn:
                conn.execute("DELETE FROM cache WHERE atime < ?", (t0,))
                conn.commit()
            with sqlite3.connect(db) as conn:
                conn.execute("VACUUM")
        entries = _count(tmp)
        compiled = _compiled_since(db, t0)
        packed.write_bytes(lzma.compress(db.read_bytes(), preset=9))
    return {"launches": len(launches), "distinct": len(work), "compiled": compiled,
            "reused": len(work) - compiled - len(failures), "new_entries": entries - before,
            "entries": entries, "packed_bytes": packed.stat().st_size, "failures": failures,
            "seconds": round(time.perf_counter() - start, 1)}


def _compiled_since(db: Path, t0: float) -> int:
    """Entries of a cache.db that tileiras compiled at or after time ``t0`` (their metadata says when)."""
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT metadata FROM cache").fetchall()
    return sum(1 for (meta,) in rows if meta and json.loads(meta).get("compilation_timestamp", 0) >= t0)


def _count(cache_dir: str) -> int:
    db = Path(cache_dir) / "cache.db"
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        try:
            return conn.execute("SELECT count(*) FROM cache").fetchone()[0]
        except sqlite3.OperationalError:  # no table yet
            return 0


def unpack(packed: str | os.PathLike | Sequence[str | os.PathLike], cache_dir: str | os.PathLike) -> int:
    """Unpack one or more packed caches into ``cache_dir`` (its cache.db replaced by their union) and note
    the time, for :func:`report`; returns the number of entries."""
    packs = [packed] if isinstance(packed, str | os.PathLike) else list(packed)
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    db = cache_dir / "cache.db"
    db.unlink(missing_ok=True)
    for i, pack in enumerate(packs):
        data = lzma.decompress(Path(pack).read_bytes())
        if i == 0:
            db.write_bytes(data)
            continue
        with tempfile.TemporaryDirectory(prefix="cubin-pack-") as tmp:
            part = Path(tmp) / "part.db"
            part.write_bytes(data)
            with sqlite3.connect(db) as conn:
                conn.execute("ATTACH DATABASE ? AS part", (str(part),))
                conn.execute("INSERT OR IGNORE INTO cache SELECT * FROM part.cache")
                conn.commit()
                conn.execute("DETACH DATABASE part")
    (cache_dir / UNPACKED_AT).write_text(repr(time.time()))
    return _count(str(cache_dir))


def report(cache_dir: str | os.PathLike) -> dict:
    """After a GPU run: the packed entries that were looked up (hits), those never looked up, and what the GPU
    compiled itself (misses, by kernel name), from the cache's access and compile times."""
    cache_dir = Path(cache_dir)
    since = float((cache_dir / UNPACKED_AT).read_text())
    hits = unused = 0
    compiled: dict[str, int] = {}
    with sqlite3.connect(cache_dir / "cache.db") as conn:
        for atime, metadata in conn.execute("SELECT atime, metadata FROM cache"):
            meta = json.loads(metadata) if metadata else {}
            if meta.get("compilation_timestamp", 0) >= since:
                for name in meta.get("kernel_names") or ["?"]:
                    compiled[name] = compiled.get(name, 0) + 1
            elif atime >= since:
                hits += 1
            else:
                unused += 1
    return {"hits": hits, "unused": unused, "compiled_here": sum(compiled.values()), "compiled": compiled}


def _launches_for(args) -> list[Launch]:
    from .inputs import BENCHMARK_SHAPES, SSDShape

    launches: list[Launch] = []
    if args.bench:
        from .bench import SWEEP_BASE, SWEEP_SEQLENS

        for name in BENCHMARK_SHAPES:
            launches += ssd_launches(name)
        for seqlen in SWEEP_SEQLENS:
            b = SWEEP_BASE
            launches += ssd_launches(SSDShape(b["batch"], seqlen, b["nheads"], b["headdim"], b["ngroups"],
                                              b["dstate"], b["chunk_size"]))
    if args.bench:
        from .bench import OVERHEAD_SHAPE

        o = OVERHEAD_SHAPE
        launches += ssd_launches(SSDShape(o["batch"], o["seqlen"], o["nheads"], o["headdim"], o["ngroups"],
                                          o["dstate"], o["chunk_size"]))
    if args.tests is not None:
        launches += config_test_launches(only=[t.strip() for t in args.tests.split(",") if t.strip()])
    if args.probe:
        probe = _probe_module()
        names = [n.strip() for n in args.probe.split(",") if n.strip()]
        unknown = [n for n in names if n not in probe.VARIANTS]
        if unknown:
            raise SystemExit(f"unknown probe variants: {unknown}")
        for name in names:
            shapes = args.probe_shapes.split(",") if args.probe_shapes else [_probe_shape(name)]
            for shape in shapes:
                launches += ssd_launches(shape, config=probe.VARIANTS[name])
    return launches


#: the benchmark shape a probe variant's name points at ("s25 b1 rg2 occ2" -> b1-l32768-h80)
_PROBE_SHAPES = {"b8": "b8-l4096-h80", "b1": "b1-l32768-h80", "b4": "b4-l2048-h24", "g8": "b2-l8192-h128-g8"}


def _probe_shape(variant: str) -> str:
    for token in variant.split():
        if token in _PROBE_SHAPES:
            return _PROBE_SHAPES[token]
    raise SystemExit(f"probe variant {variant!r} names no shape (b8, b1, b4, g8): pass --probe-shapes")


def _probe_module():
    import importlib.util

    path = Path(PROJECT_ROOT) / "benchmarks" / "probe.py"
    spec = importlib.util.spec_from_file_location("probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mamba2_tutorial.cubin_cache",
                                 description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="record launches on the CPU, compile their cubins into a packed cache")
    b.add_argument("--bench", action="store_true", help="the benchmark's shapes and sweep, shipped configs")
    b.add_argument("--tests", nargs="?", const="", default=None, metavar="SUBSTRINGS",
                   help="the GPU cases of tests/test_kernel_configs.py (those whose names contain one of "
                        "these comma-separated strings, if given)")
    b.add_argument("--probe", default="", help="comma-separated variants of benchmarks/probe.py")
    b.add_argument("--probe-shapes", default="",
                   help="shapes for every --probe variant (comma-separated; default: the one its name names)")
    b.add_argument("--arch", default="sm_90")
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    b.add_argument("--fresh", action="store_true", help="start from an empty cache")
    b.add_argument("--seed", nargs="*", default=[], help="packs to reuse cubins from (the pack keeps only "
                   "what this build uses)")
    b.add_argument("--out", default=str(Path(PROJECT_ROOT) / ".cubin-cache"))
    u = sub.add_parser("unpack", help="unpack packed caches into one cache directory (on the GPU machine)")
    u.add_argument("cache_dir")
    u.add_argument("packed", nargs="+")
    r = sub.add_parser("report", help="hits and misses of an unpacked cache after a GPU run")
    r.add_argument("cache_dir")
    args = ap.parse_args(argv)
    if args.command == "build":
        check_paths()
        launches = _launches_for(args)
        print(f"recorded {len(launches)} launches, {len(unique(launches))} distinct", flush=True)
        summary = build(launches, args.out, arch=args.arch, jobs=args.jobs, fresh=args.fresh, seed=args.seed)
        print(json.dumps(summary, indent=1))
        return 1 if summary["failures"] else 0
    if args.command == "unpack":
        entries = unpack(args.packed, args.cache_dir)
        print(f"cubin cache: {entries} entries from {len(args.packed)} pack(s) in {args.cache_dir}")
        return 0
    print(json.dumps(report(args.cache_dir), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
