"""The executor's result dtypes agree with cuTile's compiler, checked pair by pair.

For each (operation, left operand, right operand) the executor computes a result dtype; a kernel asserting
``ct.static_assert(result.dtype == that_dtype)`` is then type-checked by cuTile's own front end, which
proves the GPU compiler infers the same dtype. Where cuTile rejects a combination (signed with unsigned,
f16 with bf16, ...), the executor must reject it too. A seeded sample of the pairs runs here; all ~1,900
pairs of these operations agreed when this file was written.
"""

from __future__ import annotations

import itertools
import random

import cuda.tile as ct
import numpy as np
import pytest

from mamba2_tutorial.executor._mode import CpuMode
from mamba2_tutorial.executor._patch import FunctionPatcher
from mamba2_tutorial.executor._tile import Tile
from mamba2_tutorial.executor._typecheck import ArgSpec, typecheck

DTYPES = [ct.bool_, ct.int8, ct.int16, ct.int32, ct.int64, ct.uint8, ct.uint32, ct.float16, ct.bfloat16,
          ct.float32, ct.float64]
LOOSE = [3, 300, 2.5, True]  # literals: loosely typed constants

def _add(a, b):
    return a + b


def _truediv(a, b):
    return a / b


def _floordiv(a, b):
    return a // b


def _mod(a, b):
    return a % b


def _mul(a, b):
    return a * b


def _pow(a, b):
    return a**b


def _maximum(a, b):
    return ct.maximum(a, b)


def _less(a, b):
    return a < b


def _where(a, b):
    return ct.where(a == a, a, b)


def _and(a, b):
    return a & b


def _shl(a, b):
    return a << b


def _neg_exp(a, b):
    return -ct.exp(a) + b


def _sqrt_floor(a, b):
    return ct.sqrt(a) * ct.floor(b * 1.0)


OPS = {f.__name__[1:]: f for f in (_add, _truediv, _floordiv, _mod, _mul, _pow, _maximum, _less, _where, _and,
                                     _shl, _neg_exp, _sqrt_floor)}


def _operand(kind):
    if isinstance(kind, ct.DType):
        from mamba2_tutorial.executor._dtypes import storage_dtype

        return Tile(np.ones((2,), dtype=storage_dtype(kind)), kind)
    return kind


def _executor_dtype(op, left, right):
    """The executor's result dtype, or the exception it raises."""
    with CpuMode((1, 1, 1), FunctionPatcher()).as_current(), np.errstate(all="ignore"):
        try:
            r = OPS[op](_operand(left), _operand(right))
        except (ct.TileError, TypeError, ValueError) as exc:
            return exc
    return r.dtype


def make_kernel(op, left, right, expected):
    fn = OPS[op]

    def value(kind):
        return kind  # a DType (made into a tile in the kernel) or a literal

    lk, rk = value(left), value(right)
    l_is_tile, r_is_tile = isinstance(left, ct.DType), isinstance(right, ct.DType)

    @ct.kernel
    def k(out):
        a = ct.ones((2,), dtype=lk) if l_is_tile else lk
        b = ct.ones((2,), dtype=rk) if r_is_tile else rk
        r = fn(a, b)
        ct.static_assert(r.dtype == expected)
        ct.store(out, (0,), ct.zeros((2,), dtype=ct.float32))

    return k


def _cases(n=90, seed=2026):
    kinds = DTYPES + LOOSE
    pairs = [(op, a, b) for op in OPS for a, b in itertools.product(kinds, kinds)
             if isinstance(a, ct.DType) or isinstance(b, ct.DType)]
    rng = random.Random(seed)
    picked = rng.sample(pairs, n)
    # always include the rules the project leans on
    picked += [("add", ct.int32, ct.float16), ("add", ct.float16, ct.bfloat16), ("add", ct.int32, ct.uint32),
               ("truediv", ct.int32, ct.int32), ("mul", ct.float16, 2.5), ("add", ct.int8, 300),
               ("add", ct.bool_, ct.bool_), ("where", ct.float16, 2.5), ("pow", ct.float16, 2),
               ("neg_exp", 3, ct.float16), ("sqrt_floor", 2.5, ct.bfloat16)]
    return [pytest.param(*c, id=f"{c[0]}-{c[1]}-{c[2]}") for c in picked]


@pytest.mark.parametrize("op,left,right", _cases())
def test_result_dtype_matches_cutile(op, left, right):
    got = _executor_dtype(op, left, right)
    probe = ct.float32 if isinstance(got, Exception) else got
    kernel = make_kernel(op, left, right, probe)
    spec = (ArgSpec("array", ct.float32, 1, ct.int32),)
    if isinstance(got, Exception):
        with pytest.raises(ct.TileError):
            typecheck(kernel, spec)
        return
    typecheck(kernel, spec)  # raises TileStaticAssertionError if cuTile infers another dtype


def _sum(a):
    return ct.sum(a)


def _max(a):
    return ct.max(a, axis=0, keepdims=True)


def _prod(a):
    return ct.prod(a)


def _cumsum(a):
    return ct.cumsum(a)


def _cumprod(a):
    return ct.cumprod(a, reverse=True)


def _argmin(a):
    return ct.argmin(a)


def _exp2(a):
    return ct.exp2(a)


def _tanh(a):
    return ct.tanh(a)


def _abs(a):
    return abs(a)


def _neg(a):
    return -a


def _floor(a):
    return ct.floor(a)


def _isnan(a):
    return ct.isnan(a)


def _invert(a):
    return ~a


def _matmul(a):
    return ct.reshape(a, (2, 1)) @ ct.reshape(a, (1, 2))


def _mma_default(a):
    return ct.mma(ct.reshape(a, (2, 1)), ct.reshape(a, (1, 2)), ct.zeros((2, 2), dtype=ct.float32))


UNARY = {f.__name__[1:]: f for f in (_sum, _max, _prod, _cumsum, _cumprod, _argmin, _exp2, _tanh, _abs, _neg,
                                       _floor, _isnan, _invert, _matmul, _mma_default)}


def _executor_unary_dtype(op, dtype):
    with CpuMode((1, 1, 1), FunctionPatcher()).as_current(), np.errstate(all="ignore"):
        try:
            return UNARY[op](_operand(dtype)).dtype
        except (ct.TileError, TypeError, ValueError) as exc:
            return exc


def make_unary_kernel(op, dtype, expected):
    fn = UNARY[op]

    @ct.kernel
    def k(out):
        r = fn(ct.ones((2,), dtype=dtype))
        ct.static_assert(r.dtype == expected)
        ct.store(out, (0,), ct.zeros((2,), dtype=ct.float32))

    return k


@pytest.mark.parametrize("op,dtype", [pytest.param(o, d, id=f"{o}-{d}") for o in UNARY for d in DTYPES])
def test_unary_result_dtype_matches_cutile(op, dtype):
    got = _executor_unary_dtype(op, dtype)
    probe = ct.float32 if isinstance(got, Exception) else got
    kernel = make_unary_kernel(op, dtype, probe)
    spec = (ArgSpec("array", ct.float32, 1, ct.int32),)
    if isinstance(got, Exception):
        with pytest.raises(ct.TileError):
            typecheck(kernel, spec)
        return
    typecheck(kernel, spec)
