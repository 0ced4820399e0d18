"""Fail loudly when cuTile moves: the CPU executor relies on cuda-tile 1.7.x and on private hooks.

If this file fails after a cuTile upgrade, read the new sources before touching the executor: the dispatch
hook, promotion, annotations and the AOT compilation API are what the CPU executor is built on.
"""

from __future__ import annotations

import inspect
import io

import cuda.tile as ct
import pytest


def test_cuda_tile_version_is_pinned_to_1_7():
    major, minor, *_ = ct.__version__.split(".")
    assert (major, minor) == ("1", "7"), (
        f"cuda-tile {ct.__version__} is installed; the CPU executor is written against 1.7.x "
        "(pyproject pins cuda-tile==1.7.*). Re-check the private hooks before moving the pin."
    )


def test_dispatch_mode_hook():
    from cuda.tile._dispatch_mode import DispatchMode

    assert callable(DispatchMode.get_current)
    assert callable(DispatchMode.as_current)
    assert "call_tile_function_from_host" in vars(DispatchMode)

    seen = []

    class Probe(DispatchMode):
        def call_tile_function_from_host(self, func, args, kwargs):
            seen.append((func.__qualname__, args, kwargs))
            return 7

    class T(ct.Tile):
        pass

    t = T()
    with Probe().as_current():
        assert ct.exp(3.0) == 7
        assert t + 1 == 7  # ct.Tile operators route through the hook too
        assert ct.sum(t, axis=0) == 7
    names = [s[0] for s in seen]
    assert names == ["exp", "add", "sum"], names


def test_stub_markers_and_function_wrappers():
    from cuda.tile._execution import is_function_wrapper, is_stub

    assert is_stub(ct.load) and is_stub(ct.mma) and is_stub(ct.Tile.item)

    @ct.function
    def helper(x):
        return x

    assert is_function_wrapper(helper) and not is_stub(helper)
    assert helper.__wrapped__.__name__ == "helper"
    # host=True stubs are plain Python functions
    assert ct.cdiv(7, 2) == 4
    assert ct.static_iter(range(3)) == range(3)


def test_promotion_functions():
    from cuda.tile._datatype import _resolve_mma_supported_dtype
    from cuda.tile._ir.ops_utils import promote_dtypes
    from cuda.tile._ir.type import LooselyTypedScalar

    assert promote_dtypes(ct.int32, ct.float16) == ct.float16
    assert promote_dtypes(ct.int32, ct.int32, True) == ct.float32
    assert promote_dtypes(ct.float16, LooselyTypedScalar(2.5)) == ct.float16
    assert promote_dtypes(ct.float16, ct.float32) == ct.float32
    with pytest.raises(ct.TileTypeError):
        promote_dtypes(ct.float16, ct.bfloat16)
    assert _resolve_mma_supported_dtype(ct.float16, ct.float16) == ct.float16
    assert _resolve_mma_supported_dtype(ct.bfloat16, ct.bfloat16) == ct.float32
    with pytest.raises(ct.TileTypeError):
        _resolve_mma_supported_dtype(ct.float32, ct.float32, ct.float16)


def test_kernel_pyfunc_and_parameter_annotations():
    @ct.kernel
    def k(a, n, T: ct.Constant[int]):
        pass

    assert inspect.isfunction(k._pyfunc) and k._pyfunc.__name__ == "k"
    anns = k._annotated_function.parameter_annotations
    assert [a.constant for a in anns] == [False, False, True]
    assert all(hasattr(a, f) for a in anns for f in ("scalar", "array", "list"))


def test_compilation_api_type_checks_without_tileiras():
    from cuda.tile.compilation import (
        ArrayConstraint,
        CallingConvention,
        KernelSignature,
        ScalarConstraint,
        export_kernel,
    )

    @ct.kernel
    def k(a, b, s, T: ct.Constant[int]):
        x = ct.load(a, (ct.bid(0),), (T,))
        ct.store(b, (ct.bid(0),), x * s)

    def arr(dt):
        return ArrayConstraint(dt, 1, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                               may_alias_internally=False)

    ok = KernelSignature([arr(ct.float32), arr(ct.float32), ScalarConstraint(ct.float32), 16],
                         CallingConvention.cutile_python_v2())
    buf = io.BytesIO()
    export_kernel(k, [ok], buf, output_format="tileir_bytecode", bytecode_version="13.4")
    assert len(buf.getvalue()) > 0
    bad = KernelSignature([arr(ct.float32), arr(ct.float16), ScalarConstraint(ct.float32), 16],
                          CallingConvention.cutile_python_v2())
    with pytest.raises(ct.TileError, match="cannot implicitly cast float32 to float16"):
        export_kernel(k, [bad], io.BytesIO(), output_format="tileir_bytecode", bytecode_version="13.4")


def test_every_stub_is_known_to_the_executor():
    """A new or renamed cuTile op must be a conscious decision: implemented, or listed as unsupported."""
    import cuda.tile._stub as stub_mod
    from cuda.tile._execution import is_stub

    from mamba2_tutorial.executor import HANDLERS
    from mamba2_tutorial.executor._mode import KNOWN_UNSUPPORTED

    names = set()
    for obj in vars(stub_mod).values():
        if callable(obj) and not isinstance(obj, type) and is_stub(obj):
            host_only = not getattr(obj, "_cutile_function_wrapper", False)
            if not host_only:
                names.add(inspect.unwrap(obj).__qualname__)
    for cls in (stub_mod.Tile, stub_mod.Array, stub_mod.TiledView, stub_mod.RawArrayMemory, stub_mod.Slice):
        for attr, obj in vars(cls).items():
            obj = obj.fget if isinstance(obj, property) else obj
            obj = obj.__func__ if isinstance(obj, staticmethod) else obj
            if callable(obj) and is_stub(obj):
                names.add(f"{cls.__name__}.{attr}")
    unknown = sorted(n for n in names if n not in HANDLERS and n not in KNOWN_UNSUPPORTED)
    assert not unknown, f"stubs the CPU executor neither implements nor lists as unsupported: {unknown}"

