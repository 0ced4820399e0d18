"""cuTile's rules on the CPU executor: compile errors, typing, padding, bounds, block order, unsupported ops.

Dtype rules are checked with ``ct.static_assert`` inside kernels: the static check proves the GPU compiler
agrees, and the executor evaluates the same assertion with its own dtypes at run time.
"""

from __future__ import annotations

import cuda.tile as ct
import numpy as np
import pytest
import torch

from mamba2_tutorial.executor import run_kernel, set_int_poison

PM = ct.PaddingMode


@ct.kernel
def vector_add(a, b, c, TILE: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, (i,), (TILE,), padding_mode=PM.ZERO)
    y = ct.load(b, (i,), (TILE,), padding_mode=PM.ZERO)
    ct.store(c, (i,), x + y)


# ---------------------------------------------------------------------------------------------------------
# compile errors appear on the CPU, with cuTile's own messages
# ---------------------------------------------------------------------------------------------------------
@ct.kernel
def narrowing_store(a, out, T: ct.Constant[int]):
    x = ct.load(a, (ct.bid(0),), (T,))
    ct.store(out, (ct.bid(0),), x * 2.0)


@ct.kernel
def non_pow2_tile(a, out):
    x = ct.load(a, (0,), (12,))
    ct.store(out, (0,), x)


@ct.kernel
def vector_if(a, out, T: ct.Constant[int]):
    x = ct.load(a, (0,), (T,))
    if x > 0:
        x = x + 1
    ct.store(out, (0,), x)


@ct.kernel
def loop_type_change(a, out, n):
    acc = 0
    for i in range(n):
        acc = acc + ct.load(a, (i,), ())
    ct.store(out, (0,), acc)


def test_store_narrowing_is_a_compile_error():
    a, out = torch.ones(16), torch.zeros(16, dtype=torch.float16)
    with pytest.raises(ct.TileError, match="cannot implicitly cast float32 to float16"):
        run_kernel(narrowing_store, (1,), (a, out, 16))
    assert torch.all(out == 0), "nothing may run when the type check fails"


def test_non_power_of_two_shape_is_a_compile_error():
    a = torch.ones(16)
    with pytest.raises(ct.TileError, match="not a power of two"):
        run_kernel(non_pow2_tile, (1,), (a, a))


def test_if_on_a_vector_tile_is_a_compile_error():
    a = torch.ones(16)
    with pytest.raises(ct.TileError, match="Expected a scalar"):
        run_kernel(vector_if, (1,), (a, a, 16))


def test_loop_variable_changing_type_is_a_compile_error():
    a, out = torch.ones(4), torch.zeros(1)
    with pytest.raises(ct.TileError, match="depends on path taken|type"):
        run_kernel(loop_type_change, (1,), (a, out, 4))


def test_compile_errors_are_cached_per_signature():
    from mamba2_tutorial.executor import typecheck_cache_info

    a, out = torch.ones(16), torch.zeros(16, dtype=torch.float16)
    for _ in range(2):
        with pytest.raises(ct.TileError):
            run_kernel(narrowing_store, (1,), (a, out, 16))
    before = typecheck_cache_info()["misses"]
    with pytest.raises(ct.TileError):
        run_kernel(narrowing_store, (1,), (a, out, 16))
    assert typecheck_cache_info()["misses"] == before
    # a different signature (float32 output) is checked anew and passes
    out32 = torch.zeros(16)
    run_kernel(narrowing_store, (1,), (a, out32, 16))
    assert torch.equal(out32, 2 * a)


# ---------------------------------------------------------------------------------------------------------
# typing: promotion, loose constants, strict runtime scalars, loop variables
# ---------------------------------------------------------------------------------------------------------
@ct.kernel
def typing_rules(x16, s, C: ct.Constant[float], n, out):
    t = ct.load(x16, (0,), (8,))
    # static_assert conditions may only use arithmetic, so compute the values first
    ts, tc, tl, nn, nt = t * s, t * C, t * 2.0, n / n, n + t
    e16, e32 = ct.exp(t), ct.exp(n)
    s16, sb, cb = ct.sum(t), ct.sum(t > 0), ct.cumsum(t > 0)
    mm = t @ ct.reshape(t, (8, 1))
    w = ct.where(t > 0, t, 0.0)
    b, n0, am, neg = ct.bid(0), x16.shape[0], ct.argmax(t), -(t > 0)
    ct.static_assert(ts.dtype == ct.float32)    # a runtime float scalar is strict float32
    ct.static_assert(tc.dtype == ct.float16)    # a ct.Constant float is loose
    ct.static_assert(tl.dtype == ct.float16)    # so is a literal
    ct.static_assert(nn.dtype == ct.float32)    # int32 / int32 -> float32
    ct.static_assert(nt.dtype == ct.float16)    # int32 + float16 -> float16
    ct.static_assert(e16.dtype == ct.float16)   # exp keeps float16
    ct.static_assert(e32.dtype == ct.float32)   # exp promotes int to float32
    ct.static_assert(s16.dtype == ct.float16)   # reductions keep the dtype
    ct.static_assert(sb.dtype == ct.int32)      # bool sums as int32
    ct.static_assert(cb.dtype == ct.int32)
    ct.static_assert(mm.dtype == ct.float16)    # f16 @ f16 -> f16
    ct.static_assert(w.dtype == ct.float16)     # where with a loose constant keeps f16
    ct.static_assert(b.dtype == ct.int32)
    ct.static_assert(n0.dtype == ct.int32)      # array shapes are strict int32
    ct.static_assert(am.dtype == ct.int32)
    ct.static_assert(neg.dtype == ct.int32)     # negating bool gives int32
    for i in range(2):
        ct.static_assert(i.dtype == ct.int32)   # loop variables are strict int32
        q = i / 2 * t
        ct.static_assert(q.dtype == ct.float32)
    ct.store(out, (0,), ts)


def test_typing_rules_match_cutile():
    x = torch.arange(8, dtype=torch.float16)
    out = torch.zeros(8)
    run_kernel(typing_rules, (1,), (x, 1.5, 2.0, 3, out))
    assert torch.equal(out, x.float() * 1.5)


@ct.kernel
def int_arith(a, b, q, r, w):
    x = ct.load(a, (0,), (8,))
    y = ct.load(b, (0,), (8,))
    ct.store(q, (0,), x // y)
    ct.store(r, (0,), x % y)
    big = ct.full((8,), 2147483647, dtype=ct.int32)
    ct.store(w, (0,), big + x)


def test_integer_floor_division_and_wraparound():
    a = torch.tensor([7, -7, 7, -7, 0, 5, -1, 3], dtype=torch.int32)
    b = torch.tensor([2, 2, -2, -2, 3, -3, 4, 3], dtype=torch.int32)
    q, r, w = (torch.zeros(8, dtype=torch.int32) for _ in range(3))
    run_kernel(int_arith, (1,), (a, b, q, r, w))
    assert torch.equal(q, torch.div(a, b, rounding_mode="floor"))
    assert torch.equal(r, torch.remainder(a, b))
    expected = (a.long() + 2147483647 + 2**31) % 2**32 - 2**31
    assert torch.equal(w.long(), expected)


@ct.kernel
def nan_rules(a, mx, mn, am, pairwise):
    x = ct.load(a, (0,), (8,))
    ct.store(mx, (0,), ct.max(x))
    ct.store(mn, (0,), ct.min(x))
    ct.store(am, (0,), ct.argmax(x))
    ct.store(pairwise, (0,), ct.maximum(x, 0.5))


def test_min_max_ignore_nan_and_argmax_ties():
    nan = float("nan")
    a = torch.tensor([1.0, nan, 3.0, -2.0, 3.0, nan, 0.25, 0.0])
    mx, mn, pw = torch.zeros(1), torch.zeros(1), torch.zeros(8)
    am = torch.zeros(1, dtype=torch.int32)
    run_kernel(nan_rules, (1,), (a, mx, mn, am, pw))
    assert mx.item() == 3.0 and mn.item() == -2.0
    assert am.item() == 2  # tie between 2 and 4: the smallest index; NaN never wins
    assert torch.equal(pw, torch.tensor([1.0, 0.5, 3.0, 0.5, 3.0, 0.5, 0.5, 0.5]))


@ct.kernel
def tf32_mma(a, b, out):
    x = ct.load(a, (0, 0), (16, 16)).astype(ct.tfloat32)
    y = ct.load(b, (0, 0), (16, 16)).astype(ct.tfloat32)
    ct.store(out, (0, 0), ct.mma(x, y, ct.zeros((16, 16), dtype=ct.float32)))


def _round_tf32(t: torch.Tensor) -> torch.Tensor:
    u = t.contiguous().view(torch.int32).long() & 0xFFFFFFFF
    u = (u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000
    u = torch.where(u >= 2**31, u - 2**32, u)
    return u.to(torch.int32).view(torch.float32)


def test_tf32_only_on_request_with_10_bit_mantissa():
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(16, 16, generator=g), torch.randn(16, 16, generator=g)
    out = torch.zeros(16, 16)
    run_kernel(tf32_mma, (1,), (a, b, out))
    ref = _round_tf32(a).double() @ _round_tf32(b).double()
    torch.testing.assert_close(out.double(), ref, rtol=1e-6, atol=1e-5)
    exact = a.double() @ b.double()
    assert (out.double() - exact).abs().max() > 1e-4, "tf32 inputs must be rounded"


@ct.kernel
def f16_accumulator(a, b, out):
    x = ct.load(a, (0, 0), (16, 16))
    y = ct.load(b, (0, 0), (16, 16))
    acc = ct.mma(x, y, ct.zeros((16, 16), dtype=ct.float16))
    ct.static_assert(acc.dtype == ct.float16)
    ct.store(out, (0, 0), acc)


def test_mma_f16_accumulator_rounds_to_f16():
    g = torch.Generator().manual_seed(4)
    a = torch.randn(16, 16, generator=g).half()
    b = torch.randn(16, 16, generator=g).half()
    out = torch.zeros(16, 16, dtype=torch.float16)
    run_kernel(f16_accumulator, (1,), (a, b, out))
    assert torch.equal(out, (a.float() @ b.float()).half())


# ---------------------------------------------------------------------------------------------------------
# memory: padding, poisoning, bounds, masking, copies, order
# ---------------------------------------------------------------------------------------------------------
@ct.kernel
def ragged_sum(a, out, T: ct.Constant[int]):
    x = ct.load(a, (ct.bid(0),), (T,))  # default padding: UNDETERMINED
    ct.store(out, (ct.bid(0),), ct.sum(x))


def test_undetermined_padding_poisons_floats():
    a = torch.ones(20)
    out = torch.zeros(2)
    run_kernel(ragged_sum, (2,), (a, out, 16))
    assert out[0].item() == 16.0
    assert torch.isnan(out[1]), "a kernel that sums undetermined padding must fail loudly on the CPU"


def test_undetermined_padding_poisons_ints_with_a_sentinel():
    a = torch.ones(20, dtype=torch.int32)
    out = torch.zeros(2, dtype=torch.int32)
    run_kernel(ragged_sum, (2,), (a, out, 16))
    assert out[0].item() == 16 and out[1].item() == 4 + 12 * -123456789
    set_int_poison(0)
    try:
        run_kernel(ragged_sum, (2,), (a, out, 16))
        assert out[1].item() == 4
    finally:
        set_int_poison(-123456789)


def make_padded_load(mode):
    @ct.kernel
    def padded_load(a, out):
        ct.store(out, (0,), ct.load(a, (1,), (8,), padding_mode=mode))

    return padded_load


@pytest.mark.parametrize("mode,fill", [(PM.ZERO, 0.0), (PM.NEG_ZERO, -0.0), (PM.NAN, float("nan")),
                                       (PM.POS_INF, float("inf")), (PM.NEG_INF, float("-inf")),
                                       (PM.UNDETERMINED, float("nan"))])
def test_padding_modes(mode, fill):
    a = torch.arange(11.0)
    out = torch.zeros(8)
    run_kernel(make_padded_load(mode), (1,), (a, out))
    assert torch.equal(out[:3], a[8:])
    expected = torch.full((5,), fill)
    torch.testing.assert_close(out[3:], expected, equal_nan=True)
    assert torch.equal(torch.signbit(out[3:]), torch.signbit(expected)) or torch.isnan(expected).all()


@ct.kernel
def load_tile_at(a, out, i):
    ct.store(out, (0,), ct.load(a, (i,), (8,), padding_mode=PM.ZERO))


def test_fully_out_of_bounds_tile_raises_with_block_id():
    a, out = torch.arange(10.0), torch.zeros(8)
    run_kernel(load_tile_at, (1,), (a, out, 1))  # partial: fine
    with pytest.raises(IndexError, match="entirely outside") as info:
        run_kernel(load_tile_at, (1,), (a, out, 2))
    assert any("block (0, 0, 0)" in n for n in getattr(info.value, "__notes__", ["block (0, 0, 0)"]))
    with pytest.raises(IndexError, match="negative"):
        run_kernel(load_tile_at, (1,), (a, out, -1))


@ct.kernel
def masked_store(a, out, T: ct.Constant[int]):
    ct.store(out, (ct.bid(0),), ct.load(a, (ct.bid(0),), (T,), padding_mode=PM.ZERO) + 1)


def test_partial_store_is_masked():
    base = torch.full((24,), -7.0)
    out = base[:13]  # a view: elements 13.. of base lie past the end of out
    a = torch.arange(13.0)
    run_kernel(masked_store, (2,), (a, out, 8))
    assert torch.equal(base[:13], a + 1)
    assert torch.all(base[13:] == -7.0), "stores past the end of the array must be masked"


@ct.kernel
def load_is_a_copy(a, out):
    x = ct.load(a, (0,), (8,))
    ct.store(a, (0,), x * 0.0)
    y = ct.load(a, (0,), (8,))
    ct.store(out, (0,), x + y)


def test_loads_return_copies():
    a = torch.arange(1.0, 9.0)
    keep = a.clone()
    out = torch.zeros(8)
    run_kernel(load_is_a_copy, (1,), (a, out))
    assert torch.equal(out, keep) and torch.all(a == 0)


@ct.kernel
def ordered(a, out_f, out_p, out_t):
    ct.store(out_f, (0, 0), ct.load(a, (0, 0), shape=(1, 4), order="F"))
    ct.store(out_p, (0, 0), ct.load(a, (1, 0), shape=(2, 2), order=(1, 0)))
    t = ct.load(a, (0, 0), shape=(4, 4))
    ct.store(out_t, (0, 0), t, order=(1, 0))


def test_load_store_order_follows_the_docs():
    a = torch.arange(16.0).reshape(4, 4)
    out_f, out_p, out_t = torch.zeros(1, 4), torch.zeros(2, 2), torch.zeros(4, 4)
    run_kernel(ordered, (1,), (a, out_f, out_p, out_t))
    assert out_f.tolist() == [[0.0, 4.0, 8.0, 12.0]]  # the _stub.py docstring example
    assert torch.equal(out_p, a.T[2:4, 0:2])
    assert torch.equal(out_t, a.T)


# ---------------------------------------------------------------------------------------------------------
# block order, errors, unsupported ops, printing, helpers
# ---------------------------------------------------------------------------------------------------------
@ct.kernel
def carry_from_previous_block(out, T: ct.Constant[int]):
    # WRONG on a GPU: reads what the previous block wrote, assuming blocks run in order
    i = ct.bid(0)
    prev = ct.load(out, (ct.maximum(i - 1, 0),), (T,))
    base = ct.where(i > 0, ct.max(prev), 0.0)
    ct.store(out, (i,), base + 1.0 + ct.arange(T, dtype=ct.float32))


def test_random_block_order_exposes_order_dependence():
    expected = torch.arange(64.0)
    out = torch.zeros(64)
    run_kernel(carry_from_previous_block, (8,), (out, 8))
    assert torch.equal(out, expected + 1), "sequential order hides the bug"
    wrong = 0
    for seed in range(4):
        out = torch.zeros(64)
        run_kernel(carry_from_previous_block, (8,), (out, 8), block_order="random", seed=seed)
        wrong += not torch.equal(out, expected + 1)
    assert wrong >= 3


def test_random_block_order_is_harmless_for_a_correct_kernel():
    a, b = torch.randn(77), torch.randn(77)
    c1, c2 = torch.zeros(77), torch.zeros(77)
    run_kernel(vector_add, (5,), (a, b, c1, 16))
    run_kernel(vector_add, (5,), (a, b, c2, 16), block_order="random", seed=11)
    assert torch.equal(c1, c2)


@ct.kernel
def uses_pack(a, out):
    x = ct.load(a, (0,), (4,))
    b = ct.pack_to_bytes(x)
    ct.store(out, (0,), b)


def test_unsupported_op_names_itself():
    a, out = torch.ones(4), torch.zeros(16, dtype=torch.uint8)
    with pytest.raises(NotImplementedError, match=r"cuda\.tile\.pack_to_bytes is not supported by the CPU"):
        run_kernel(uses_pack, (1,), (a, out))


@ct.kernel
def printer(a):
    t = ct.load(a, (ct.bid(0),), (4,))
    print(f"t={t}")
    ct.printf("first=%d\n", ct.extract(t, (0,), ()))


def test_print_is_prefixed_with_the_block_id(capsys):
    a = torch.arange(8, dtype=torch.int32)
    run_kernel(printer, (2,), (a,))
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["[block (0, 0, 0)] t=[0, 1, 2, 3]", "[block (0, 0, 0)] first=0",
                     "[block (1, 0, 0)] t=[4, 5, 6, 7]", "[block (1, 0, 0)] first=4"]


def plain_helper(x, n):
    acc = x
    for i in range(n):
        ct.static_assert(i.dtype == ct.int32)
        acc = acc + i
    return acc


@ct.function
def tile_helper(x, k):
    return plain_helper(x, k) * 2


@ct.kernel
def with_helpers(a, out, n):
    x = ct.load(a, (0,), (8,))
    ct.store(out, (0,), tile_helper(x, n) + max(x, 3) + abs(x - 10))


def test_helpers_run_under_tile_rules():
    a = torch.arange(8, dtype=torch.int32)
    out = torch.zeros(8, dtype=torch.int32)
    run_kernel(with_helpers, (1,), (a, out, 4))
    assert torch.equal(out, (a + 6) * 2 + torch.clamp(a, min=3) + (a - 10).abs())


@ct.kernel
def static_iter_kernel(out):
    tile = ct.zeros((4,), dtype=ct.int8)
    acc = ct.zeros((4,), dtype=ct.int8)
    for i in ct.static_iter(range(3)):
        acc = acc + (tile + i)          # i is a constant: int8 stays int8
    ct.static_assert(acc.dtype == ct.int8)
    ct.store(out, (0,), acc)


def test_static_iter_yields_constants():
    out = torch.zeros(4, dtype=torch.int8)
    run_kernel(static_iter_kernel, (1,), (out,))
    assert torch.equal(out, torch.full((4,), 3, dtype=torch.int8))


def test_kernel_argument_errors():
    a = torch.zeros(16)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        run_kernel(vector_add, (1,), (a, a, a))
    with pytest.raises(ValueError, match="grid"):
        run_kernel(vector_add, (0,), (a, a, a, 16))
    with pytest.raises(TypeError, match="kernel"):
        run_kernel(lambda: None, (1,), ())


def test_bfloat16_tensors_round_trip():
    a = torch.randn(40).bfloat16()
    c = torch.zeros(40, dtype=torch.bfloat16)
    run_kernel(vector_add, (3,), (a, a, c, 16))
    assert torch.equal(c, a + a)
    assert np.asarray(c.float()).dtype == np.float32


# ---------------------------------------------------------------------------------------------------------
# loop-carried and branch-merged variables lose loose typing, as in cuTile
# ---------------------------------------------------------------------------------------------------------
@ct.kernel
def carried_literal(x, out, n):
    acc = 0.0
    count = 0
    for i in range(n):
        ct.static_assert(acc.dtype == ct.float32)  # 0.0 is carried: a strict float32
        acc = acc + ct.load(x, (i,), ())           # float32 + float16 -> float32
        count += 1
    ct.static_assert(acc.dtype == ct.float32)
    ct.static_assert(count.dtype == ct.int32)
    ct.store(out, (0,), acc / count)


def test_loop_carried_literal_becomes_strict():
    x = torch.tensor([1.0, 2.0, 3.0001, 4.0], dtype=torch.float16)
    out = torch.zeros(1)
    run_kernel(carried_literal, (1,), (x, out, 4))
    assert out.item() == pytest.approx(x.float().mean().item(), rel=1e-6)


@ct.kernel
def merged_literal(out, n):
    v = 1
    if n > 2:  # a run-time condition: v is merged, hence strict int32
        v = 3
    t = ct.full((4,), 1, dtype=ct.int8) + v
    ct.static_assert(t.dtype == ct.int32)
    w = 5
    if 4 > 2:  # a constant condition is folded: w stays a loose constant
        w = 6
    u = ct.full((4,), 1, dtype=ct.int8) + w
    ct.static_assert(u.dtype == ct.int8)
    ct.store(out, (0,), (t + u).astype(ct.float32))


def test_branch_merged_literal_becomes_strict_only_for_runtime_conditions():
    out = torch.zeros(4)
    run_kernel(merged_literal, (1,), (out, 5))
    assert torch.equal(out, torch.full((4,), 11.0))
    run_kernel(merged_literal, (1,), (out, 1))
    assert torch.equal(out, torch.full((4,), 9.0))


# ---------------------------------------------------------------------------------------------------------
# on a GPU: the same compile errors, CUDA tensors on the CPU backend, auto picks the GPU
# ---------------------------------------------------------------------------------------------------------
COMPILE_ERRORS = [
    (narrowing_store, lambda: (torch.ones(16), torch.zeros(16, dtype=torch.float16), 16)),
    (non_pow2_tile, lambda: (torch.ones(16), torch.ones(16))),
    (vector_if, lambda: (torch.ones(16), torch.ones(16), 16)),
    (loop_type_change, lambda: (torch.ones(4), torch.zeros(1), 4)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,make", COMPILE_ERRORS, ids=["narrowing", "non_pow2", "vector_if", "loop"])
def test_gpu_raises_the_same_compile_errors(kernel, make):
    from mamba2_tutorial.runtime.backends import launch

    with pytest.raises(ct.TileError) as on_cpu:
        launch(kernel, (1,), make(), backend="cpu")
    args = tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in make())
    with pytest.raises(ct.TileError) as on_gpu:
        launch(kernel, (1,), args, backend="gpu")
    assert type(on_cpu.value) is type(on_gpu.value)
    assert str(on_cpu.value).splitlines()[0] == str(on_gpu.value).splitlines()[0]


@pytest.mark.gpu
def test_cuda_tensors_on_the_cpu_backend_are_copied_back():
    from mamba2_tutorial.runtime.backends import launch, select_backend
    assert select_backend().name == "gpu"
    a = torch.randn(300, device="cuda")
    c = torch.zeros(300, device="cuda")
    choice = launch(vector_add, (ct.cdiv(300, 64),), (a, a, c, 64), backend="cpu")
    assert choice.name == "cpu" and c.is_cuda
    assert torch.equal(c, a + a)


@ct.kernel
def list_and_tuple_args(arrays, pair, out):
    i = ct.bid(0)
    t = ct.load(arrays[i], (0,), (8,), padding_mode=PM.ZERO)
    a, b = pair
    ct.store(out, (i, 0), ct.reshape(t * a + b, (1, 8)))


def test_list_and_tuple_arguments():
    arrays = [torch.arange(8.0) + 10 * k for k in range(3)]
    out = torch.zeros(3, 8)
    run_kernel(list_and_tuple_args, (3,), (arrays, (2.0, 1.0), out))
    assert torch.equal(out, torch.stack(arrays) * 2 + 1)


@ct.kernel
def merged_ternary(out, n):
    v = 1 if n > 2 else 2  # run-time condition: merged, strict int32
    t = ct.full((4,), 1, dtype=ct.int8) + v
    ct.static_assert(t.dtype == ct.int32)
    w = 1 if 3 > 2 else 2  # constant condition: folded, still loose
    u = ct.full((4,), 1, dtype=ct.int8) + w
    ct.static_assert(u.dtype == ct.int8)
    ct.store(out, (0,), (t + u).astype(ct.float32))


def test_ternary_on_a_runtime_condition_becomes_strict():
    out = torch.zeros(4)
    run_kernel(merged_ternary, (1,), (out, 5))
    assert torch.equal(out, torch.full((4,), 4.0))
    run_kernel(merged_ternary, (1,), (out, 0))
    assert torch.equal(out, torch.full((4,), 5.0))


@ct.kernel
def exp2_ftz(a, out, out_ftz, T: ct.Constant[int]):
    x = ct.load(a, (0,), (T,))
    ct.store(out, (0,), ct.exp2(x))
    ct.store(out_ftz, (0,), ct.exp2(x, flush_to_zero=True))


def test_exp2_flush_to_zero_flushes_subnormal_results():
    # exp2(-130) = 7.3e-40 is a float32 subnormal: kept by default, 0 with flush_to_zero (the kernels' decays)
    a = torch.tensor([-130.0, -126.0, -1.0, 0.0])
    out, out_ftz = torch.empty(4), torch.empty(4)
    run_kernel(exp2_ftz, (1,), (a, out, out_ftz, 4))
    assert out[0] > 0 and out_ftz[0] == 0
    assert torch.equal(out[1:], out_ftz[1:]) and out_ftz[1] == 2.0 ** -126
