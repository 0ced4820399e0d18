"""The cubin cache built on a CPU (``mamba2_tutorial.cubin_cache``): launches recorded without running, and
cuTile's own JIT lookups hitting what was built, simulated on the CPU with the stand-in driver."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from mamba2_tutorial.cubin_cache import check_paths, recording_launches, report, ssd_launches, unique, unpack
from mamba2_tutorial.inputs import make_inputs
from mamba2_tutorial.ssd import ssd_forward

ROOT = Path(__file__).resolve().parent.parent
SHAPE = "small-pow2"  # b2 l100 h4 p16 g2 n32 Q32: ragged, distinct sizes


def test_recording_runs_nothing_and_sees_every_launch():
    inp = make_inputs(SHAPE, dtype=torch.bfloat16, D=False)
    with recording_launches() as seen:
        y = ssd_forward(**inp, chunk_size=32, backend="cpu", _poison=True)
    assert torch.isnan(y.float()).all(), "a recorded launch ran"
    names = [launch.name for launch in seen]
    assert names and all(name.endswith("_kernel") for name in names)
    assert any("scan" in name for name in names) and any("state" in name for name in names)
    # the hook is removed on exit: the same call now runs
    assert not torch.isnan(ssd_forward(**inp, chunk_size=32, backend="cpu").float()).any()


def test_ssd_launches_dedupe_by_kernel_hints_and_signature():
    launches = ssd_launches(SHAPE)
    distinct = unique(launches)
    assert 0 < len(distinct) < len(launches)  # ssd_forward twice and ssd_stages launch the same kernels
    assert len({launch.key for launch in distinct}) == len(distinct)


def test_check_paths_explains_where_the_cache_must_be_built():
    if str(ROOT) == "/tmp/mamba2-cutile":
        pytest.skip("running from the fixed path itself")
    with pytest.raises(RuntimeError, match="benchmarks/cubin_cache.sh"):
        check_paths()


def test_cuTiles_jit_lookups_hit_the_built_cache(tmp_path):
    """Build the cache for SHAPE, then in a fresh process derive each launch's signature with cuTile's own C
    code (stand-in driver) and compile it the way ct.launch does (kernel._compile): every lookup must hit, and
    tileiras must not run."""
    pytest.importorskip("cuda.tile")
    from mamba2_tutorial.compile import TileirasNotFound, find_tileiras

    try:
        find_tileiras()
    except TileirasNotFound as exc:
        pytest.skip(str(exc))
    from mamba2_tutorial.cubin_cache import build

    summary = build(ssd_launches(SHAPE), tmp_path / "packed", jobs=1, fresh=True, fixed_paths=False,
                    progress=lambda _line: None)
    assert summary["failures"] == {} and summary["entries"] == summary["distinct"] > 0
    assert summary["compiled"] == summary["distinct"] and summary["reused"] == 0
    again = build(ssd_launches(SHAPE), tmp_path / "again", jobs=1, fresh=True, fixed_paths=False,
                  seed=[tmp_path / "packed" / "cache.db.xz"], progress=lambda _line: None)
    assert again["compiled"] == 0 and again["reused"] == again["entries"] == summary["distinct"]
    script = textwrap.dedent(f"""
        import json, torch
        from mamba2_tutorial.driverless import as_cuda_array, install_stand_in_driver
        install_stand_in_driver()
        from cuda.tile._cext import default_tile_context
        from cuda.tile.compilation import CallingConvention, KernelSignature
        from mamba2_tutorial.cubin_cache import recording_launches, report, unpack
        from mamba2_tutorial.inputs import make_inputs
        from mamba2_tutorial.kernels import _host
        from mamba2_tutorial.ssd import ssd_forward
        unpack({str(tmp_path / "packed" / "cache.db.xz")!r}, {str(tmp_path / "cache")!r})
        default_tile_context.config.cache_dir = {str(tmp_path / "cache")!r}
        def jit(kernel, grid, args):  # what ct.launch does on a GPU, minus the launch
            sig = KernelSignature.from_kernel_args(kernel, as_cuda_array(tuple(args)),
                                                   CallingConvention.cutile_python_v2())
            kernel._compile(sig, default_tile_context, (9, 0))
        _host._RECORDER = jit
        inp = make_inputs({SHAPE!r}, dtype=torch.bfloat16, D=False)
        ssd_forward(**inp, chunk_size=32, backend="cpu")
        print(json.dumps(report({str(tmp_path / "cache")!r})))
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                         cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["compiled_here"] == 0, f"cuTile compiled what the cache should have served: {result}"
    assert result["hits"] == summary["distinct"], result


def _pack(path, rows, t):
    """A packed cache holding ``rows`` (key, blob), compiled and last used at time ``t``."""
    import lzma
    import sqlite3

    db = path.with_suffix("")
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE cache (key TEXT PRIMARY KEY, blob BLOB NOT NULL,"
                     " blob_size INTEGER NOT NULL, atime REAL NOT NULL, metadata TEXT)")
        for key, blob in rows:
            conn.execute("INSERT INTO cache VALUES (?, ?, 1, ?, ?)",
                         (key, blob, t, json.dumps({"compilation_timestamp": t, "kernel_names": [key]})))
    path.write_bytes(lzma.compress(db.read_bytes()))
    return path


def test_report_counts_hits_unused_and_compiles(tmp_path):
    import sqlite3
    import time

    old = time.time() - 100
    packed = _pack(tmp_path / "cache.db.xz", [("hit", b"0"), ("unused", b"0")], old)
    # a second pack: one entry shared, one new (merged on unpack)
    packed2 = _pack(tmp_path / "other.db.xz", [("hit", b"1"), ("also", b"1")], old)
    assert unpack([packed, packed2], tmp_path / "unpacked") == 3
    now = time.time() + 1
    with sqlite3.connect(tmp_path / "unpacked" / "cache.db") as conn:
        conn.execute("UPDATE cache SET atime = ? WHERE key = 'hit'", (now,))
        conn.execute("INSERT INTO cache VALUES ('new', x'00', 1, ?, ?)",
                     (now, json.dumps({"compilation_timestamp": now, "kernel_names": ["scan_kernel"]})))
    assert report(tmp_path / "unpacked") == {"hits": 1, "unused": 2, "compiled_here": 1,
                                             "compiled": {"scan_kernel": 1}}


def test_device_script_lists_name_real_variants_and_tests():
    # benchmarks/attempt25_lists.sh feeds both the device scripts and the cubin packs: a name that probe.py
    # no longer has would fail on the GPU machine, after the device time is spent
    import importlib.util
    import shutil

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    run = subprocess.run([bash, "-c", "source benchmarks/attempt25_lists.sh && "
                          "printf '%s\\n%s\\n' \"$A25_B8,$A25_B1,$A25_G8\" \"$A25_TESTS\""],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert run.returncode == 0, run.stderr
    variants, tests = run.stdout.splitlines()
    spec = importlib.util.spec_from_file_location("probe", ROOT / "benchmarks" / "probe.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    names = variants.split(",")
    assert len(names) > 40 and not [n for n in names if n not in probe.VARIANTS]
    source = (ROOT / "tests" / "test_kernel_configs.py").read_text()
    assert not [t for t in tests.split(",") if t not in source]


def test_packs_cover_the_gpu_tests_beyond_the_config_cases():
    # the GPU tests of test_kernel_configs.py that are not GPU_CASES (the state tail, the CUDA-graph capture)
    # are compiled ahead too: their calls come from the tests' own extra_gpu_calls
    from mamba2_tutorial.cubin_cache import config_test_launches

    tail = config_test_launches(ROOT, only=["test_state_tail_gpu"])
    names = {launch.name for launch in tail}
    assert {"chunk_state_passing_kernel", "chunk_state_segments_kernel", "segment_fixup_kernel"} <= names
    # fused tails of 16 and 8 heads, a segmented stage of 24 heads and its tail of 8
    heads = sorted({launch.shapes[0][2] for launch in tail if launch.name.startswith("chunk_state")})
    assert heads == [8, 16, 24]
    graph = config_test_launches(ROOT, only=["side_streams"])
    assert "chunk_cb_kernel" in {launch.name for launch in graph}
    assert not config_test_launches(ROOT, only=["no-such-test"])
