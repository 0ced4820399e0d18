"""Ahead-of-time compile checks (real tileiras, no GPU), signatures from example arguments, Tile IR text."""

from __future__ import annotations

import cuda.tile as ct
import pytest
import torch

from mamba2_tutorial import all_kernel_specs
from mamba2_tutorial.kernels import KERNEL_MODULES, primer
from mamba2_tutorial.runtime import compile as compile_mod
from mamba2_tutorial.runtime import specs as spec_registry
from mamba2_tutorial.runtime.compile import (
    CompileResult,
    IRListing,
    TileirasNotFound,
    compile_kernel,
    compile_specs,
    cutile_ir,
    find_tileiras,
    format_table,
    show_tile_ir,
    tile_ir,
)
from mamba2_tutorial.runtime.signature import kernel_signature
from mamba2_tutorial.runtime.specs import KernelSpec, kernel_spec

PRIMER_NAMES = [s.name for s in primer.SPECS]


@ct.kernel
def _narrowing_store_kernel(x, y, TILE: ct.Constant[int]):
    # a float32 tile stored into a float16 array: cuTile never narrows implicitly, so this is a compile error
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(y, index=(ct.bid(0),), tile=t.astype(ct.float32))


def _narrowing_args():
    x = torch.randn(40, dtype=torch.float16)
    return (3, 1, 1), (x, torch.empty_like(x), 16)


BROKEN = KernelSpec("test.narrowing_store", _narrowing_store_kernel, _narrowing_args)


def test_registry_lists_primer_specs_with_unique_names():
    assert "primer" in KERNEL_MODULES
    specs = all_kernel_specs()
    names = [s.name for s in specs]
    assert len(names) == len(set(names))
    for name in ("primer.vector_add", "primer.matmul_f32", "primer.matmul_bf16", "primer.row_cumsum"):
        assert name in names
        assert kernel_spec(name).name == name
    with pytest.raises(KeyError, match="primer.vector_add"):
        kernel_spec("primer.no_such_kernel")


def test_missing_kernel_module_is_an_error_not_a_skip():
    with pytest.raises(ModuleNotFoundError):
        spec_registry.all_kernel_specs(("mamba2_tutorial.kernels.no_such_kernel_module",))
    with pytest.raises(ValueError, match="full name"):
        spec_registry.register_spec_modules(".primer")


def test_the_registry_holds_both_paths_kernel_modules_and_the_taught_ones_first():
    all_kernel_specs()
    modules = spec_registry.spec_modules()
    taught = [m for m in modules if m.startswith("mamba2_tutorial.kernels.")]
    fast = [m for m in modules if m.startswith("mamba2_tutorial.fast.")]
    assert taught == [f"mamba2_tutorial.kernels.{m}" for m in KERNEL_MODULES]
    assert fast and modules == tuple(taught + fast)


def test_kernel_spec_rejects_a_plain_function():
    with pytest.raises(TypeError, match="@ct.kernel"):
        KernelSpec("bad", lambda: None, _narrowing_args)


@pytest.mark.parametrize(("arch", "jobs"), [("sm_90", 2), ("sm_80", 1)])
def test_primer_kernels_compile(arch, jobs):
    # cache=True: the cubins `make test`'s compile check stored are reused (a kernel that no longer compiles
    # has new bytecode, so it misses the cache and fails here too)
    results = compile_specs(primer.SPECS, [arch], jobs=jobs, cache=True)
    assert [r.name for r in results] == PRIMER_NAMES
    for r in results:
        assert r.ok, f"{r.name} [{arch}] failed: {r.error}"
        assert r.arch == arch
        assert r.cubin_bytes > 1000
        assert r.seconds > 0
        assert r.error is None


def test_compile_error_is_reported_not_raised():
    r = compile_kernel(BROKEN, "sm_90")
    assert isinstance(r, CompileResult)
    assert not r.ok and r.cubin_bytes == 0
    assert "float32" in r.error and "float16" in r.error, r.error


def test_cli_prints_table_and_exit_code_0(capsys):
    code = compile_mod.main(["--arch", "sm_90", "sm_120", "--kernel", "primer.vector_add", "--jobs", "1"])
    out = capsys.readouterr().out
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("kernel"))
    for column in ("arch", "ok", "cubin size", "seconds"):
        assert column in header
    rows = [line for line in out.splitlines() if line.startswith("primer.vector_add")]
    assert len(rows) == 2
    assert "sm_90" in rows[0] and "sm_120" in rows[1]
    assert all(" ok " in row and "KiB" in row for row in rows)
    assert "2/2 compiled" in out


def test_cli_exit_code_1_and_error_when_a_kernel_fails(monkeypatch, capsys):
    real = spec_registry.all_kernel_specs
    monkeypatch.setattr(spec_registry, "all_kernel_specs", lambda modules=None: real(modules) + [BROKEN])
    code = compile_mod.main(["--arch", "sm_80", "--kernel", "test.narrowing_store", "primer.vector_add",
                             "--jobs", "1"])
    captured = capsys.readouterr()
    assert code == 1
    assert "FAILED" in captured.out
    assert "test.narrowing_store" in captured.err and "float16" in captured.err


def test_cli_unknown_kernel_and_list(capsys):
    specs = all_kernel_specs()
    assert compile_mod.main(["--kernel", "primer.nope"]) == 2
    assert "primer.nope" in capsys.readouterr().err
    assert compile_mod.main(["--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == [s.name for s in specs]


def test_missing_tileiras_gives_an_actionable_message(monkeypatch, capsys):
    import cuda.tile._compile as cc

    def not_found():
        raise FileNotFoundError("'tileiras' compiler not found")

    monkeypatch.setattr(cc, "_find_compiler_bin", not_found)
    with pytest.raises(TileirasNotFound, match=r"pip install 'cuda-tile\[tileiras\]"):
        find_tileiras()
    assert compile_mod.main(["--arch", "sm_90", "--kernel", "primer.vector_add"]) == 1
    assert "cuda-tile[tileiras]" in capsys.readouterr().err
    with pytest.raises(TileirasNotFound):
        compile_kernel(primer.SPECS[0], "sm_90")


def test_format_table_marks_failures():
    table = format_table([CompileResult("k.a", "sm_90", True, 2048, 0.5),
                          CompileResult("k.b", "sm_80", False, 0, 0.1, "TileTypeError: boom")])
    lines = table.splitlines()
    assert lines[0].split("|")[0].strip() == "kernel"
    assert "2.0 KiB" in lines[2] and "FAILED" in lines[3]


def test_tile_ir_of_matmul_shows_tile_loads_and_mma():
    _, args = primer.SPECS[2].make_args()  # bf16 matmul
    text = tile_ir(primer.matmul_kernel, args)
    assert "entry @matmul_kernel" in text
    assert "load_view_tko" in text and "store_view_tko" in text
    assert "mmaf" in text
    assert "tile<64x32xbf16>" in text and "tile<64x64xf32>" in text  # bf16 operands, f32 accumulator
    assert "padding_value = zero" in text
    assert "for %" in text


def test_tile_ir_of_vector_add_and_debug_info():
    _, args = primer.SPECS[0].make_args()
    text = tile_ir(primer.vector_add_kernel, args)
    assert "addf" in text and "tile<256xf32>" in text
    with_loc = tile_ir(primer.vector_add_kernel, args, debug_info=True)
    assert "primer.py" in with_loc


def test_cutile_ir_shows_typed_ops():
    _, args = primer.SPECS[1].make_args()
    text = cutile_ir(primer.matmul_kernel, args)
    assert "tile_mma" in text and "tile_load" in text
    assert "Tile[float32,(64,64)]" in text


def test_show_tile_ir_trims_and_renders():
    _, args = primer.SPECS[0].make_args()
    listing = show_tile_ir(primer.vector_add_kernel, args, max_lines=5, highlight=("addf",))
    assert isinstance(listing, IRListing)
    md = listing._repr_markdown_()
    assert md.count("\n") < 12 and "more lines" in md and md.count("```") == 2
    assert "addf" in listing  # the full text is kept
    full = IRListing("a < b\naddf x\nc", title="t", highlight=("addf",))._repr_html_()
    assert "a &lt; b" in full and "background" in full and "more lines" not in full


def test_signature_maps_arguments_like_ct_launch():
    _, args = primer.SPECS[2].make_args()
    sig = kernel_signature(primer.matmul_kernel, args)
    a_c, b_c, c_c, *consts = sig.parameters
    assert a_c.dtype == ct.bfloat16 and a_c.ndim == 2 and a_c.index_dtype == ct.int32
    assert a_c.stride_constant == (None, 1)
    assert [c.value for c in consts] == [64, 64, 32]


def test_signature_scalars_and_errors():
    @ct.kernel
    def scaled(x, y, alpha, n, TILE: ct.Constant[int]):
        t = ct.load(x, index=(ct.bid(0),), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
        ct.store(y, index=(ct.bid(0),), tile=t * alpha)

    x = torch.randn(33)
    sig = kernel_signature(scaled, (x, torch.empty_like(x), 0.5, 7, 16))
    assert sig.parameters[2].dtype == ct.float32
    assert sig.parameters[3].dtype == ct.int32
    with pytest.raises(TypeError, match="takes 5 arguments"):
        kernel_signature(scaled, (x, x, 0.5, 16))
    with pytest.raises(TypeError, match="TILE"):
        kernel_signature(scaled, (x, x, 0.5, 7, x))
    with pytest.raises(TypeError, match="unsupported argument type"):
        kernel_signature(scaled, (x, x, "0.5", 7, 16))


def test_signature_int64_annotations_and_tuples():
    @ct.kernel
    def wide(big: ct.IndexedWithInt64, n: ct.ScalarInt64, shape: ct.Constant[tuple], pair):
        ct.store(big, index=(ct.bid(0),), tile=ct.zeros((16,), dtype=ct.float32))

    x = torch.zeros(50)
    sig = kernel_signature(wide, (x, 3, (16, 32), (x, 2.0)))
    big, n, shape, pair = sig.parameters
    assert big.index_dtype == ct.int64
    assert n.dtype == ct.int64
    assert [c.value for c in shape.items] == [16, 32]
    assert pair.items[0].dtype == ct.float32 and pair.items[1].dtype == ct.float32
    assert compile_mod.tile_ir_bytecode(wide, (x, 3, (16, 32), (x, 2.0)))  # cuTile accepts the signature


def test_the_taught_ssd_kernels_compile_for_hopper():
    """Every taught SSD kernel spec compiles for sm_90 with tileiras (no GPU needed)."""
    from mamba2_tutorial.kernels import chunk_scan, chunk_state, state_passing

    specs = chunk_state.SPECS + state_passing.SPECS + chunk_scan.SPECS
    results = compile_specs(specs, ["sm_90"], jobs=1, cache=True)  # the compile check's cubins, where stored
    failed = [f"{r.name}: {r.error}" for r in results if not r.ok]
    assert not failed, failed
    assert all(r.cubin_bytes > 1000 for r in results)


def test_the_fast_specs_are_what_the_shipped_configs_launch():
    """The fast path's compile specs come from recording ``ssd_forward`` with each shipped config: the b8
    class's state stage is the fused kernel at occupancy 2, its scan the whole-chunk kernel at 3."""
    from mamba2_tutorial.fast.specs import shipped_specs

    by_name = {s.name: s for s in shipped_specs()}
    state = by_name["fast.h200.bfloat16.large.one-tile.qge256.chunk_state_passing_kernel"]
    scan = by_name["fast.h200.bfloat16.large.one-tile.qge256.chunk_scan_chunk_kernel"]
    assert state.kernel._compiler_options.occupancy == 2
    assert scan.kernel._compiler_options.occupancy == 3
    grid, _ = scan.make_args()
    assert grid[0] == 8  # heads first: one block per (head, p tile, chunk)


def test_the_b8_kernels_fit_their_occupancy_without_spilling():
    """What ``ssd_forward`` runs for bf16 at b8-l4096-h80, compiled for sm_90: the fused state stage at
    occupancy 2 must fit 128 registers per thread (two blocks of 256 threads fill the register file) with no
    stack frame, the whole-chunk scan at occupancy 3 80 registers and no stack. A compiler change that spills
    here would cost far more than it shows in a correctness test. The stage's plain form (dt re-derived per
    element of the x tile, no StateForm) with the same tiles and hint spills, so the check can fail."""
    from mamba2_tutorial.fast.specs import shipped_specs
    from mamba2_tutorial.fast.state_fused import KD
    from mamba2_tutorial.runtime.compile import compile_cubin
    from mamba2_tutorial.runtime.cubin_info import cubin_resources

    by_name = {s.name: s for s in shipped_specs()}
    state = by_name["fast.h200.bfloat16.large.one-tile.qge256.chunk_state_passing_kernel"]
    scan = by_name["fast.h200.bfloat16.large.one-tile.qge256.chunk_scan_chunk_kernel"]
    _, args = state.make_args()
    res = cubin_resources(compile_cubin(state.kernel, args))
    assert res["registers"] <= 128 and res["frame_bytes"] == 0, res
    plain = args[:-1] + (KD,)  # FORM is the last argument: the key-log2 store only, no DT_ONCE or ACC
    old = cubin_resources(compile_cubin(state.kernel, plain))
    assert old["frame_bytes"] > 1024, old
    res = cubin_resources(compile_cubin(scan.kernel, scan.make_args()[1]))
    assert res["registers"] <= 80 and res["frame_bytes"] == 0, res


def test_cubin_resources_reads_a_real_cubin_and_rejects_other_bytes():
    from mamba2_tutorial.runtime.compile import compile_cubin
    from mamba2_tutorial.runtime.cubin_info import cubin_resources

    spec = kernel_spec("primer.vector_add")
    res = cubin_resources(compile_cubin(spec.kernel, spec.make_args()[1]))
    assert set(res) == {"registers", "frame_bytes", "min_stack_bytes"}
    assert 0 < res["registers"] <= 255 and res["frame_bytes"] == 0
    with pytest.raises(ValueError, match="not a 64-bit ELF cubin"):
        cubin_resources(b"PK\x03\x04 not a cubin")


def test_the_quick_plan_covers_every_kernel_on_every_arch_and_every_spec_on_hopper():
    """What `make test` compiles: every spec for sm_90, one spec of each kernel function for the other
    architectures, no (spec, arch) pair twice; the whole matrix stays `make compile`'s."""
    from mamba2_tutorial.runtime.compile import DEFAULT_ARCHS, PRIMARY_ARCH, quick_plan, representative_specs

    specs = all_kernel_specs()
    plan = quick_plan(specs)
    pairs = [(spec.name, arch) for spec, arch in plan]
    assert len(pairs) == len(set(pairs))
    assert {name for name, arch in pairs if arch == PRIMARY_ARCH} == {s.name for s in specs}

    def function(spec):
        f = spec.kernel._annotated_function.pyfunc
        return f.__module__, f.__qualname__

    functions = {function(s) for s in specs}
    for arch in DEFAULT_ARCHS:
        assert {function(kernel_spec(n)) for n, a in pairs if a == arch} == functions, arch
    assert len(representative_specs(specs)) == len(functions) < len(specs)
    assert [a for _, a in quick_plan(specs, ["sm_80"])] == ["sm_80"] * len(functions)  # no sm_90: no full set
