"""Conformance: small kernels that together use every cuTile operation the project relies on.

Each case runs on the CPU executor and is compared with a torch computation. Under ``-m gpu`` the SAME kernels
run on real cuTile (``launch(..., backend="gpu")``) and are compared element by element with the CPU
executor's result. Array sizes are distinct and not powers of two, so every kernel meets ragged tiles.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import cuda.tile as ct
import pytest
import torch

from mamba2_tutorial.lessons.checks import assert_close
from mamba2_tutorial.runtime.backends import launch

PM = ct.PaddingMode
ZERO = PM.ZERO


@dataclass
class Case:
    """``make(g)`` -> (grid, args, names of the output args); ``ref(args)`` -> {name: expected tensor}."""

    name: str
    kernel: object
    make: Callable
    ref: Callable
    rtol: float | None = None
    atol: float | None = None


CASES: list[Case] = []


def case(name, kernel, *, rtol=None, atol=None):
    def register(fns):
        make, ref = fns()
        CASES.append(Case(name, kernel, make, ref, rtol, atol))
        return fns

    return register


def _randn(g, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g).to(dtype)


# =========================================================================================================
# elementwise math (float32): unary functions, binary ops, comparisons, where
# =========================================================================================================
@ct.kernel
def unary_math(x, out, T: ct.Constant[int]):
    i = ct.bid(0)
    v = ct.load(x, (i,), (T,), padding_mode=ZERO)
    a = ct.abs(v)
    rows = (
        ct.exp(v),
        ct.exp2(v),
        ct.log(a + 1.0),
        ct.log2(a + 0.5),
        ct.sqrt(a),
        ct.rsqrt(a + 1.0),
        ct.tanh(v),
        ct.sin(v),
        ct.cos(v),
        abs(v),
        ct.floor(v * 3.0),
        ct.ceil(v * 3.0),
        -v,
        v**2,
        ct.negative(v) * 0.5,
        ct.tan(v * 0.3),
        ct.sinh(v),
        ct.cosh(v),
    )
    for j in ct.static_iter(range(len(rows))):
        ct.store(out, (j, i), ct.reshape(rows[j], (1, T)))


@case("unary_math", unary_math)
def _():
    def make(g):
        n = 300
        x = _randn(g, n)
        return (ct.cdiv(n, 64),), (x, torch.zeros(18, n), 64), ("out",)

    def ref(args):
        v = args[0]
        a = v.abs()
        rows = [
            v.exp(),
            torch.exp2(v),
            torch.log(a + 1),
            torch.log2(a + 0.5),
            a.sqrt(),
            torch.rsqrt(a + 1),
            v.tanh(),
            v.sin(),
            v.cos(),
            a,
            torch.floor(v * 3),
            torch.ceil(v * 3),
            -v,
            v**2,
            -v * 0.5,
            torch.tan(v * 0.3),
            v.sinh(),
            v.cosh(),
        ]
        return {"out": torch.stack(rows)}

    return make, ref


@ct.kernel
def binary_ops(a, b, out, s, T: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, (i,), (T,), padding_mode=ZERO)
    y = ct.load(b, (i,), (T,), padding_mode=PM.POS_INF)
    rows = (
        x + y,
        x - y,
        x * y,
        x / y,
        x // y,
        x % y,
        ct.minimum(x, y),
        ct.maximum(x, y),
        min(x, y),
        max(x, y),
        (x > y).astype(ct.float32),
        (x <= y).astype(ct.float32),
        (x == x).astype(ct.float32),
        (x != y).astype(ct.float32),
        ct.where(x > 0, x, y),
        x * s + 1,
        ct.pow(ct.abs(x) + 1.0, y),
        ct.atan2(x, y),
        ct.add(x, y),
        ct.sub(x, y),
        ct.mul(x, y),
        ct.truediv(x, 2.0),
        ct.floordiv(x, 0.5),
        ct.mod(x, 0.75),
        (x >= 0.5).astype(ct.float32),
        (x < y).astype(ct.float32),
        ct.isnan(x / x).astype(ct.float32),
    )
    for j in ct.static_iter(range(len(rows))):
        ct.store(out, (j, i), ct.reshape(rows[j], (1, T)))


@case("binary_ops", binary_ops)
def _():
    def make(g):
        n = 201
        a = _randn(g, n)
        b = _randn(g, n)
        b = torch.where(b.abs() < 0.1, b.sign() * 0.1 + 0.05, b)
        return (ct.cdiv(n, 32),), (a, b, torch.zeros(27, n), 0.75, 32), ("out",)

    def ref(args):
        x, y, _, s, _ = args
        rows = [
            x + y,
            x - y,
            x * y,
            x / y,
            torch.floor(x / y),
            torch.remainder(x, y),
            torch.minimum(x, y),
            torch.maximum(x, y),
            torch.minimum(x, y),
            torch.maximum(x, y),
            (x > y).float(),
            (x <= y).float(),
            (x == x).float(),
            (x != y).float(),
            torch.where(x > 0, x, y),
            x * s + 1,
            torch.pow(x.abs() + 1, y),
            torch.atan2(x, y),
            x + y,
            x - y,
            x * y,
            x / 2,
            torch.floor(x / 0.5),
            torch.remainder(x, 0.75),
            (x >= 0.5).float(),
            (x < y).float(),
            torch.isnan(x / x).float(),
        ]
        return {"out": torch.stack(rows)}

    return make, ref


@ct.kernel
def int_ops(a, b, out, T: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, (i,), (T,), padding_mode=ZERO)
    y = ct.load(b, (i,), (T,), padding_mode=ZERO) + 0
    y = ct.where(y == 0, 1, y)
    rows = (
        x + y,
        x - y,
        x * y,
        x // y,
        x % y,
        x & y,
        x | y,
        x ^ y,
        ~x,
        x << 2,
        x >> 1,
        ct.minimum(x, y),
        ct.maximum(x, y),
        -x,
        abs(x),
        (x > y).astype(ct.int32),
        x // 3,
        x % 5,
        ct.bitwise_and(x, 7),
        ct.bitwise_or(x, 8),
        ct.bitwise_xor(x, y),
        ct.bitwise_not(y),
        ct.bitwise_lshift(y, 1),
        ct.bitwise_rshift(x, 2),
        x * 1000003,
    )
    for j in ct.static_iter(range(len(rows))):
        ct.store(out, (j, i), ct.reshape(rows[j], (1, T)))


@case("int_ops", int_ops)
def _():
    def make(g):
        n = 150
        a = torch.randint(-1000, 1000, (n,), generator=g, dtype=torch.int32)
        b = torch.randint(-50, 50, (n,), generator=g, dtype=torch.int32)
        return (ct.cdiv(n, 64),), (a, b, torch.zeros(25, n, dtype=torch.int32), 64), ("out",)

    def ref(args):
        x, y = args[0].long(), args[1].long()
        y = torch.where(y == 0, 1, y)

        def wrap(v):
            return ((v + 2**31) % 2**32 - 2**31).to(torch.int32)

        rows = [
            x + y,
            x - y,
            x * y,
            torch.div(x, y, rounding_mode="floor"),
            torch.remainder(x, y),
            x & y,
            x | y,
            x ^ y,
            ~x,
            x << 2,
            x >> 1,
            torch.minimum(x, y),
            torch.maximum(x, y),
            -x,
            x.abs(),
            (x > y).long(),
            torch.div(x, 3, rounding_mode="floor"),
            torch.remainder(x, 5),
            x & 7,
            x | 8,
            x ^ y,
            ~y,
            y << 1,
            x >> 2,
            x * 1000003,
        ]
        return {"out": torch.stack([wrap(r) for r in rows])}

    return make, ref


# =========================================================================================================
# narrow floats: f16 and bf16 math computed in f32 and rounded; astype
# =========================================================================================================
@ct.kernel
def narrow_math(x16, xb, o16, ob, T: ct.Constant[int]):
    i = ct.bid(0)
    h = ct.load(x16, (i,), (T,), padding_mode=ZERO)
    b = ct.load(xb, (i,), (T,), padding_mode=ZERO)
    h_rows = (
        ct.exp(h),
        h * 1.5 + 0.25,
        ct.sqrt(ct.abs(h)),
        h.astype(ct.float32).astype(ct.float16),
        ct.maximum(h, 0.0),
        ct.tanh(h),
    )
    b_rows = (
        ct.exp(b),
        b * 3.0 - 1.0,
        b.astype(ct.float32).astype(ct.bfloat16),
        ct.minimum(b, 0.5),
        ct.cumsum(b, 0) * 0.0 + b,
    )
    for j in ct.static_iter(range(len(h_rows))):
        ct.store(o16, (j, i), ct.reshape(h_rows[j], (1, T)))
    for j in ct.static_iter(range(len(b_rows))):
        ct.store(ob, (j, i), ct.reshape(b_rows[j], (1, T)))


@case("narrow_math", narrow_math)
def _():
    def make(g):
        n = 97
        x = _randn(g, n)
        return (
            (ct.cdiv(n, 32),),
            (
                x.half(),
                x.bfloat16(),
                torch.zeros(6, n, dtype=torch.float16),
                torch.zeros(5, n, dtype=torch.bfloat16),
                32,
            ),
            ("o16", "ob"),
        )

    def ref(args):
        h, b = args[0].float(), args[1].float()
        h_rows = [h.exp(), h * 1.5 + 0.25, h.abs().sqrt(), h, h.clamp(min=0), h.tanh()]
        b_rows = [b.exp(), b * 3 - 1, b, b.clamp(max=0.5), b]
        return {"o16": torch.stack(h_rows).half(), "ob": torch.stack(b_rows).bfloat16()}

    return make, ref


# =========================================================================================================
# reductions and scans along each axis, keepdims, argmax/argmin, ragged with neutral padding
# =========================================================================================================
@ct.kernel
def reductions(x, s_row, s_col, mx, mn, am, an, pr, tot, TR: ct.Constant[int], TC: ct.Constant[int]):
    i = ct.bid(0)
    z = ct.load(x, (i, 0), (TR, TC), padding_mode=ZERO)
    lo = ct.load(x, (i, 0), (TR, TC), padding_mode=PM.NEG_INF)
    hi = ct.load(x, (i, 0), (TR, TC), padding_mode=PM.POS_INF)
    ct.store(s_row, (i,), ct.sum(z, axis=1))
    ct.store(s_col, (i, 0), ct.sum(z, axis=0, keepdims=True))
    ct.store(mx, (i,), ct.max(lo, axis=1))
    ct.store(mn, (i,), ct.min(hi, axis=-1))
    ct.store(am, (i,), ct.argmax(lo, axis=1))
    ct.store(an, (i,), ct.argmin(hi, axis=1))
    ct.store(pr, (i,), ct.prod(ct.where(z == 0.0, 1.0, 1.0 + z * 0.01), axis=1))
    ct.store(tot, (i,), ct.sum(z) + ct.sum(z, axis=(0, 1)) * 0.0)


@case("reductions", reductions)
def _():
    def make(g):
        r, c = 37, 50
        x = _randn(g, r, c)
        nb = ct.cdiv(r, 8)
        outs = (
            torch.zeros(r),
            torch.zeros(nb, c),
            torch.zeros(r),
            torch.zeros(r),
            torch.zeros(r, dtype=torch.int32),
            torch.zeros(r, dtype=torch.int32),
            torch.zeros(r),
            torch.zeros(nb),
        )
        return (nb,), (x, *outs, 8, 64), ("s_row", "s_col", "mx", "mn", "am", "an", "pr", "tot")

    def ref(args):
        x = args[0]
        r, c = x.shape
        nb = ct.cdiv(r, 8)
        xp = torch.zeros(nb * 8, c)
        xp[:r] = x
        return {
            "s_row": x.sum(1),
            "s_col": xp.reshape(nb, 8, c).sum(1),
            "mx": x.max(1).values,
            "mn": x.min(1).values,
            "am": x.argmax(1).int(),
            "an": x.argmin(1).int(),
            "pr": (1 + x * 0.01).prod(1),
            "tot": xp.reshape(nb, -1).sum(1),
        }

    return make, ref


@ct.kernel
def scans(x, c1, c0, cr, cp, ci, TR: ct.Constant[int], TC: ct.Constant[int]):
    i = ct.bid(0)
    z = ct.load(x, (i, 0), (TR, TC), padding_mode=ZERO)
    ct.store(c1, (i, 0), ct.cumsum(z, axis=1))
    ct.store(c0, (i, 0), ct.cumsum(z, axis=0))
    ct.store(cr, (i, 0), ct.cumsum(z, axis=1, reverse=True))
    ct.store(cp, (i, 0), ct.cumprod(1.0 + z * 0.05, axis=1))
    ct.store(ci, (i, 0), ct.cumsum(z > 0, axis=1))


@case("scans", scans)
def _():
    def make(g):
        r, c = 21, 45
        x = _randn(g, r, c)
        outs = tuple(torch.zeros(r, c) for _ in range(4)) + (torch.zeros(r, c, dtype=torch.int32),)
        return (ct.cdiv(r, 8),), (x, *outs, 8, 64), ("c1", "c0", "cr", "cp", "ci")

    def ref(args):
        x = args[0]
        r, c = x.shape
        xp = torch.zeros(ct.cdiv(r, 8) * 8, c)
        xp[:r] = x
        c0 = xp.reshape(-1, 8, c).cumsum(1).reshape(-1, c)[:r]
        return {
            "c1": x.cumsum(1),
            "c0": c0,
            "cr": x.flip(1).cumsum(1).flip(1),
            "cp": (1 + x * 0.05).cumprod(1),
            "ci": (x > 0).int().cumsum(1).int(),
        }

    return make, ref


# =========================================================================================================
# matrix multiply: mma with each input/accumulator pair, @, batched 3-D mma
# =========================================================================================================
def make_mma_kernel(in_dtype, acc_dtype):
    @ct.kernel
    def mma_kernel(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        bm, bn = ct.bid(0), ct.bid(1)
        acc = ct.zeros((TM, TN), dtype=acc_dtype)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            a = ct.load(A, (bm, k), (TM, TK), padding_mode=ZERO).astype(in_dtype)
            b = ct.load(B, (k, bn), (TK, TN), padding_mode=ZERO).astype(in_dtype)
            acc = ct.mma(a, b, acc)
        ct.store(C, (bm, bn), acc.astype(C.dtype))

    return mma_kernel


_TORCH = {ct.float32: torch.float32, ct.float16: torch.float16, ct.bfloat16: torch.bfloat16}

for _in, _acc in (
    (ct.float32, ct.float32),
    (ct.float16, ct.float32),
    (ct.bfloat16, ct.float32),
    (ct.float16, ct.float16),
):

    def _mma_case(in_dt=_in, acc_dt=_acc):
        tin, tacc = _TORCH[in_dt], _TORCH[acc_dt]

        def make(g):
            m, n, k = 70, 45, 100
            A = _randn(g, m, k).to(tin)
            B = _randn(g, k, n).to(tin)
            C = torch.zeros(m, n, dtype=tacc)
            return (ct.cdiv(m, 32), ct.cdiv(n, 16)), (A, B, C, 32, 16, 32), ("C",)

        def ref(args):
            return {"C": (args[0].double() @ args[1].double()).to(tacc)}

        return make, ref

    case(
        f"mma_{_in}_{_acc}",
        make_mma_kernel(_in, _acc),
        rtol=5e-2 if _acc == ct.float16 else None,
        atol=1e-1 if _acc == ct.float16 else None,
    )(_mma_case)


@ct.kernel
def matmul_ops(A, B, X, Y, C1, C2, C3):
    a = ct.load(A, (0, 0), (16, 32), padding_mode=ZERO)
    b = ct.load(B, (0, 0), (32, 8), padding_mode=ZERO)
    ct.store(C1, (0, 0), a @ b)
    ct.store(C2, (0, 0), ct.matmul(a, b) * 2.0)
    x = ct.load(X, (0, 0, 0), (2, 16, 16), padding_mode=ZERO)
    y = ct.load(Y, (0, 0, 0), (2, 16, 8), padding_mode=ZERO)
    ct.store(C3, (0, 0, 0), ct.mma(x, y, ct.zeros((2, 16, 8), dtype=ct.float32)))


@case("matmul_ops", matmul_ops)
def _():
    def make(g):
        A, B = _randn(g, 13, 30), _randn(g, 30, 7)
        X, Y = _randn(g, 2, 11, 15), _randn(g, 2, 15, 6)
        return (
            (1,),
            (A, B, X, Y, torch.zeros(13, 7), torch.zeros(13, 7), torch.zeros(2, 11, 6)),
            ("C1", "C2", "C3"),
        )

    def ref(args):
        A, B, X, Y = args[:4]
        return {"C1": A @ B, "C2": 2 * (A @ B), "C3": X @ Y}

    return make, ref


# =========================================================================================================
# shapes and factories: reshape, [None]/[:, None], expand_dims, transpose, permute, broadcast_to, cat,
# extract, item, arange/full/zeros/ones, astype
# =========================================================================================================
@ct.kernel
def shape_ops(x, v, o_t, o_outer, o_perm, o_cat, o_ext, o_misc):
    t = ct.load(x, (0, 0), (8, 16), padding_mode=ZERO)
    ct.store(o_t, (0, 0), ct.transpose(t) + t.transpose() * 0.0)
    a = ct.load(v, (0,), (8,), padding_mode=ZERO)
    ar = ct.arange(16, dtype=ct.float32)
    ct.store(o_outer, (0, 0), a[:, None] * ar[None, :] + ct.expand_dims(a, 1) * 0.0)
    t3 = ct.reshape(t, (2, 4, 16))
    ct.store(o_perm, (0, 0, 0), ct.permute(t3, (2, 0, 1)))
    ct.store(o_cat, (0, 0), ct.cat((t, t * 2.0), 0))
    ct.store(o_ext, (0, 0), ct.extract(t, (1, 1), (4, 8)))
    first = ct.extract(t, (0, 0), ()).item() + ct.reshape(t, (-1,)).extract((3,), (32,)).reshape((4, 8)) * 0.0
    row = ct.broadcast_to(ct.full((1, 8), 2.5, ct.float32), (4, 8)) + ct.ones((4, 8), ct.float32)
    row = row + ct.zeros((4, 8), dtype=ct.float32) + first
    idx = ct.arange(8, dtype=ct.int32, start=3, step=2).astype(ct.float32)
    ct.store(o_misc, (0, 0), row + idx[None, :])


@case("shape_ops", shape_ops)
def _():
    def make(g):
        x, v = _randn(g, 7, 13), _randn(g, 5)
        outs = (
            torch.zeros(16, 8),
            torch.zeros(8, 16),
            torch.zeros(16, 2, 4),
            torch.zeros(16, 16),
            torch.zeros(4, 8),
            torch.zeros(4, 8),
        )
        return (1,), (x, v, *outs), ("o_t", "o_outer", "o_perm", "o_cat", "o_ext", "o_misc")

    def ref(args):
        x, v = args[0], args[1]
        t = torch.zeros(8, 16)
        t[:7, :13] = x
        a = torch.zeros(8)
        a[:5] = v
        misc = 3.5 + t[0, 0] + (3 + 2 * torch.arange(8.0))[None, :].expand(4, 8)
        return {
            "o_t": t.T,
            "o_outer": a[:, None] * torch.arange(16.0)[None, :],
            "o_perm": t.reshape(2, 4, 16).permute(2, 0, 1),
            "o_cat": torch.cat([t, 2 * t], 0),
            "o_ext": t[4:8, 8:16],
            "o_misc": misc,
        }

    return make, ref


# =========================================================================================================
# memory: order, padding modes on ragged tails, Array.slice / shape, num_tiles/num_blocks, gather/scatter,
# atomics, tiled views
# =========================================================================================================
@ct.kernel
def transposed_load(x, out, T: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    t = ct.load(x, (i, j), (T, T), order=(1, 0), padding_mode=ZERO)  # tile (i, j) of x.T
    ct.store(out, (i, j), t)


@case("transposed_load", transposed_load)
def _():
    def make(g):
        x = _randn(g, 19, 27)
        return (ct.cdiv(27, 8), ct.cdiv(19, 8)), (x, torch.zeros(27, 19), 8), ("out",)

    def ref(args):
        return {"out": args[0].T.contiguous()}

    return make, ref


def make_padding_kernel(mode):
    @ct.kernel
    def padding_tail(x, out, T: ct.Constant[int]):
        i = ct.bid(0)
        t = ct.load(x, (i,), (T,), padding_mode=mode)
        ct.store(out, (i,), ct.where(ct.isnan(t), 123.0, t))

    return padding_tail


_FILL = {PM.ZERO: 0.0, PM.NEG_ZERO: -0.0, PM.NAN: 123.0, PM.POS_INF: float("inf"), PM.NEG_INF: float("-inf")}
for _mode, _fill in _FILL.items():

    def _padding_case(fill=_fill):
        def make(g):
            n, t = 45, 16
            return (ct.cdiv(n, t),), (_randn(g, n), torch.zeros(ct.cdiv(n, t) * t), t), ("out",)

        def ref(args):
            x, out = args[0], args[1]
            e = torch.full_like(out, fill)
            e[: x.numel()] = x
            return {"out": e}

        return make, ref

    case(f"padding_{_mode.name}", make_padding_kernel(_mode))(_padding_case)


@ct.kernel
def slices_and_loops(x, out, T: ct.Constant[int]):
    # each block sums one row of x in T-wide tiles with a runtime loop over num_tiles
    r = ct.bid(0)
    row = x.slice(0, r, r + 1)
    acc = ct.zeros((1, T), dtype=ct.float32)
    for k in range(ct.num_tiles(row, axis=1, shape=(1, T))):
        acc = acc + ct.load(row, (0, k), (1, T), padding_mode=ZERO)
    n = x.shape[1]
    scale = ct.num_blocks(0) * 0 + 1
    ct.store(out, (r, 0), ct.reshape(ct.sum(acc) * scale + n * 0.0, (1, 1)))


@case("slices_and_loops", slices_and_loops)
def _():
    def make(g):
        x = _randn(g, 11, 83)
        return (11,), (x, torch.zeros(11, 1), 16), ("out",)

    def ref(args):
        return {"out": args[0].sum(1, keepdim=True)}

    return make, ref


@ct.kernel
def gather_scatter(x, idx, out_g, out_s, T: ct.Constant[int]):
    i = ct.bid(0)
    ind = ct.load(idx, (i,), (T,), padding_mode=ZERO)
    pos = ct.arange(T, dtype=ct.int32) + i * T
    g = ct.gather(x, ind, mask=ind % 3 != 0, padding_value=-1.0)
    ct.store(out_g, (i,), g)
    ct.scatter(out_s, pos, g * 2.0, mask=pos < x.shape[0])


@case("gather_scatter", gather_scatter)
def _():
    def make(g):
        n = 57
        x = _randn(g, n)
        idx = torch.randint(-5, n + 5, (n,), generator=g, dtype=torch.int32)
        return (ct.cdiv(n, 16),), (x, idx, torch.zeros(n), torch.zeros(n), 16), ("out_g", "out_s")

    def ref(args):
        x, idx = args[0], args[1].long()
        ok = (idx >= 0) & (idx < x.numel()) & (idx % 3 != 0)
        g = torch.where(ok, x[idx.clamp(0, x.numel() - 1)], torch.tensor(-1.0))
        return {"out_g": g, "out_s": 2 * g}

    return make, ref


@ct.kernel
def histogram(x, hist, T: ct.Constant[int]):
    i = ct.bid(0)
    v = ct.load(x, (i,), (T,), padding_mode=ZERO)
    ones = ct.ones((T,), dtype=ct.int32)
    pos = ct.arange(T, dtype=ct.int32) + i * T
    ct.atomic_add(hist, ct.where(pos < x.shape[0], v, 0), ct.where(pos < x.shape[0], ones, 0))


@case("atomic_histogram", histogram)
def _():
    def make(g):
        x = torch.randint(0, 10, (123,), generator=g, dtype=torch.int32)
        return (ct.cdiv(123, 32),), (x, torch.zeros(10, dtype=torch.int32), 32), ("hist",)

    def ref(args):
        return {"hist": torch.bincount(args[0].long(), minlength=10).int()}

    return make, ref


@ct.kernel
def tiled_view_copy(x, out, T: ct.Constant[int]):
    src = x.tiled_view((T,), padding_mode=ZERO)
    dst = out.tiled_view((T,))
    i = ct.bid(0)
    dst.store((i,), src.load((i,)) * 3.0)


@case("tiled_view", tiled_view_copy)
def _():
    def make(g):
        return (ct.cdiv(77, 16),), (_randn(g, 77), torch.zeros(77), 16), ("out",)

    def ref(args):
        return {"out": 3 * args[0]}

    return make, ref


# =========================================================================================================
# kernels the project has not seen: row softmax, layer norm, an SSD-style causal block (segsum, where, exp,
# mma)
# =========================================================================================================
@ct.kernel
def softmax_rows(x, out, TC: ct.Constant[int]):
    r = ct.bid(0)
    t = ct.load(x, (r, 0), (1, TC), padding_mode=PM.NEG_INF)
    m = ct.max(t, axis=1, keepdims=True)
    e = ct.exp(t - m)
    ct.store(out, (r, 0), e / ct.sum(e, axis=1, keepdims=True))


@case("softmax_rows", softmax_rows)
def _():
    def make(g):
        return (29,), (_randn(g, 29, 71) * 3, torch.zeros(29, 71), 128), ("out",)

    def ref(args):
        return {"out": torch.softmax(args[0], dim=1)}

    return make, ref


@ct.kernel
def layernorm_rows(x, w, out, n, eps, TC: ct.Constant[int]):
    r = ct.bid(0)
    t = ct.load(x, (r, 0), (1, TC), padding_mode=ZERO).astype(ct.float32)
    mean = ct.sum(t) / n
    col = ct.arange(TC, dtype=ct.int32)[None, :]
    d = ct.where(col < n, t - mean, 0.0)
    var = ct.sum(d * d) / n
    wt = ct.load(w, (0,), (TC,), padding_mode=ZERO)
    y = d * ct.rsqrt(var + eps) * wt[None, :]
    ct.store(out, (r, 0), y.astype(out.dtype))


@case("layernorm_rows", layernorm_rows)
def _():
    def make(g):
        x = _randn(g, 13, 100).bfloat16()
        w = _randn(g, 100)
        return (13,), (x, w, torch.zeros(13, 100, dtype=torch.bfloat16), 100, 1e-5, 128), ("out",)

    def ref(args):
        x, w = args[0].float(), args[1]
        return {"out": (torch.nn.functional.layer_norm(x, (100,), eps=1e-5) * w).bfloat16()}

    return make, ref


@ct.kernel
def ssd_causal_block(C, B, X, dA, Y, Q: ct.Constant[int], N: ct.Constant[int], P: ct.Constant[int]):
    # Y = (C B^T * exp(segsum(dA)) * causal) @ X for one chunk per block; rows past the end are zero-padded
    c = ct.bid(0)
    Ct = ct.load(C, (c, 0), (Q, N), padding_mode=ZERO)
    Bt = ct.load(B, (c, 0), (Q, N), padding_mode=ZERO)
    Xt = ct.load(X, (c, 0), (Q, P), padding_mode=ZERO)
    a = ct.cumsum(ct.load(dA, (c,), (Q,), padding_mode=ZERO), axis=0)
    seg = a[:, None] - a[None, :]
    i = ct.arange(Q, dtype=ct.int32)
    causal = i[:, None] >= i[None, :]
    L = ct.exp(ct.where(causal, seg, -float("inf")))
    cb = ct.mma(Ct, ct.permute(Bt, (1, 0)), ct.zeros((Q, Q), dtype=ct.float32))
    y = ct.mma((cb * L).astype(ct.float16), Xt.astype(ct.float16), ct.zeros((Q, P), dtype=ct.float32))
    ct.store(Y, (c, 0), y)


@case("ssd_causal_block", ssd_causal_block, rtol=2e-2, atol=2e-2)
def _():
    def make(g):
        length, n, p = 150, 24, 20
        C, B, X = _randn(g, length, n) * 0.3, _randn(g, length, n) * 0.3, _randn(g, length, p)
        dA = -torch.rand(length, generator=g) * 0.2
        return (ct.cdiv(length, 64),), (C, B, X, dA, torch.zeros(length, p), 64, 32, 32), ("Y",)

    def ref(args):
        C, B, X, dA = args[:4]
        length = C.shape[0]
        Y = torch.zeros(length, X.shape[1])
        for s in range(0, length, 64):
            sl = slice(s, min(s + 64, length))
            a = dA[sl].cumsum(0)
            q = a.numel()
            seg = a[:, None] - a[None, :]
            L = torch.exp(torch.where(torch.tril(torch.ones(q, q, dtype=torch.bool)), seg, -torch.inf))
            Y[sl] = (C[sl] @ B[sl].T * L) @ X[sl]
        return {"Y": Y}

    return make, ref


@ct.function
def _combine_max(a, b):
    return ct.maximum(a, b)


@ct.kernel
def custom_reduce_scan(x, rmax, smax, T: ct.Constant[int]):
    i = ct.bid(0)
    t = ct.load(x, (i, 0), (1, T), padding_mode=PM.NEG_INF)
    ct.store(rmax, (i, 0), ct.reduce(t, 1, _combine_max, -float("inf"), keepdims=True))
    ct.store(smax, (i, 0), ct.scan(t, 1, _combine_max, -float("inf")))


@case("custom_reduce_scan", custom_reduce_scan)
def _():
    def make(g):
        return (9,), (_randn(g, 9, 27), torch.zeros(9, 1), torch.zeros(9, 27), 32), ("rmax", "smax")

    def ref(args):
        x = args[0]
        return {"rmax": x.max(1, keepdim=True).values, "smax": torch.cummax(x, 1).values}

    return make, ref


# =========================================================================================================
# the tests
# =========================================================================================================
IDS = [c.name for c in CASES]
def _run(c: Case, seed: int, backend: str, device: str = "cpu"):
    g = torch.Generator().manual_seed(seed)
    grid, args, out_names = c.make(g)
    args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)
    launch(c.kernel, grid, args, backend=backend)
    names = list(inspect.signature(c.kernel._pyfunc).parameters)
    return args, {n: args[names.index(n)] for n in out_names}


@pytest.mark.parametrize("c", CASES, ids=IDS)
@pytest.mark.parametrize("seed", [0, 1])
def test_cpu_matches_torch(c: Case, seed: int):
    args, outs = _run(c, seed, "cpu")
    # the reference sees the inputs as they were (outputs were freshly allocated)
    expected = c.ref(c.make(torch.Generator().manual_seed(seed))[1])
    for name, actual in outs.items():
        assert_close(actual, expected[name], rtol=c.rtol, atol=c.atol, name=f"{c.name}.{name}")


@pytest.mark.gpu
@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_gpu_matches_cpu_executor(c: Case):
    _, cpu = _run(c, 0, "cpu")
    _, gpu = _run(c, 0, "gpu", "cuda")
    for name in cpu:
        assert_close(
            gpu[name].cpu(), cpu[name], rtol=c.rtol, atol=c.atol, name=f"{c.name}.{name} (gpu vs cpu)"
        )


@pytest.mark.gpu
@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_gpu_matches_torch(c: Case):
    _, gpu = _run(c, 1, "gpu", "cuda")
    expected = c.ref(c.make(torch.Generator().manual_seed(1))[1])
    for name, actual in gpu.items():
        assert_close(actual.cpu(), expected[name], rtol=c.rtol, atol=c.atol, name=f"{c.name}.{name} (gpu)")


def test_cases_cover_every_op_the_project_uses():
    """Guard against a case being dropped: each of these ct names appears in some conformance kernel."""

    source = "\n".join(inspect.getsource(c.kernel._pyfunc) for c in CASES)
    source += inspect.getsource(_combine_max)
    needed = [
        "bid",
        "num_blocks",
        "num_tiles",
        "load",
        "store",
        "gather",
        "scatter",
        "atomic_add",
        "arange",
        "full",
        "zeros",
        "ones",
        "astype",
        "exp",
        "exp2",
        "log",
        "log2",
        "sqrt",
        "rsqrt",
        "tanh",
        "sin",
        "cos",
        "abs",
        "floor",
        "ceil",
        "minimum",
        "maximum",
        "where",
        "sum",
        "max",
        "min",
        "prod",
        "argmax",
        "argmin",
        "cumsum",
        "cumprod",
        "mma",
        "matmul",
        "reshape",
        "expand_dims",
        "transpose",
        "permute",
        "broadcast_to",
        "extract",
        "cat",
        "item",
        "slice",
        "tiled_view",
        "reduce",
        "scan",
        "isnan",
        "pow",
        "atan2",
        "bitwise_and",
        "bitwise_not",
        "static_iter",
    ]
    missing = [n for n in needed if f"ct.{n}(" not in source and f".{n}(" not in source]
    assert not missing, missing
