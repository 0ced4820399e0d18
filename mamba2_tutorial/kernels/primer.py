"""The cuTile primer: three small kernels that teach the tile model (notebook 04).

A cuTile kernel is a Python function decorated with ``@ct.kernel``. ``launch(kernel, grid, args)`` runs
it once per *block* of a 1-, 2- or 3-D grid. Inside, a block does not touch single elements: it *loads
tiles* (small dense arrays whose every dimension is a power of two, e.g. 64x32), computes on whole tiles,
and *stores* tiles back. Load and store positions are given in **tile units**:
``ct.load(A, index=(i, j), shape=(64, 32))`` reads rows ``64*i ... 64*i+63`` and columns
``32*j ... 32*j+31`` of ``A``.

Arrays rarely divide into whole tiles. The last tile along a dimension is *ragged*: its part outside the array
is filled according to ``padding_mode`` on load (here always ``ZERO``, chosen so the padding cannot change the
result), and ignored (masked) on store. Every kernel below is launched with ragged sizes in the tests.

Kernels:

- :data:`vector_add_kernel`: ``c = a + b`` on 1-D arrays, one tile per block.
- :data:`matmul_kernel`: ``C = A @ B``, one output tile per block, looping over K with ``ct.mma`` into a
  float32 accumulator (on the tensor cores for bf16/f16 inputs; float32 inputs run as FMA instructions).
- :data:`row_cumsum_kernel`: the inclusive cumulative sum of each row (``torch.cumsum(x, dim=1)``), a few rows
  per block, walking along the row tile by tile and carrying the running total.

Host wrappers (:func:`vector_add`, :func:`matmul`, :func:`row_cumsum`) check the inputs, allocate the output
and call :func:`mamba2_tutorial.launch`, which runs the kernel on the GPU or on the CPU tile executor.
"""

from __future__ import annotations

import cuda.tile as ct
import torch

from ..runtime.specs import KernelSpec

__all__ = [
    "SPECS",
    "matmul",
    "matmul_kernel",
    "row_cumsum",
    "row_cumsum_kernel",
    "vector_add",
    "vector_add_kernel",
]

ZERO = ct.PaddingMode.ZERO


# ----------------------------------------------------------------------------------------------------
# 1. Vector add: the smallest complete kernel.
# ----------------------------------------------------------------------------------------------------
@ct.kernel
def vector_add_kernel(a, b, c, TILE: ct.Constant[int]):
    """c[i] = a[i] + b[i] for 1-D arrays of length n; grid = (cdiv(n, TILE),).

    ``TILE`` is a ``ct.Constant``: its value is baked into the compiled code (a new compile per value), which
    is what lets it be a tile shape. ``a``, ``b`` and ``c`` are arrays; their length n is a runtime value.
    """
    # Which block am I? Block `pid` owns elements pid*TILE ... pid*TILE + TILE - 1.
    pid = ct.bid(0)
    # The index (pid,) is in TILE units, not elements. On the last block part of the tile lies past the end
    # of the array; ZERO padding fills it with zeros.
    ta = ct.load(a, index=(pid,), shape=(TILE,), padding_mode=ZERO)
    tb = ct.load(b, index=(pid,), shape=(TILE,), padding_mode=ZERO)
    # One operator adds the whole tile. The store drops the padded tail, so nothing is written out of bounds.
    ct.store(c, index=(pid,), tile=ta + tb)


# ----------------------------------------------------------------------------------------------------
# 2. Tiled matrix multiply with ct.mma and a float32 accumulator.
# ----------------------------------------------------------------------------------------------------
@ct.kernel
def matmul_kernel(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    """C = A @ B with A (M, K), B (K, N), C (M, N); grid = (cdiv(M, TM), cdiv(N, TN)).

    Block (bm, bn) computes the (TM, TN) output tile C[bm*TM:(bm+1)*TM, bn*TN:(bn+1)*TN]. It walks along K in
    steps of TK: at step k it loads the (TM, TK) tile (bm, k) of A (a piece of A's row panel) and the (TK, TN)
    tile (k, bn) of B (a piece of B's column panel) and accumulates their product.
    """
    bm = ct.bid(0)
    bn = ct.bid(1)
    # The accumulator is float32 whatever the input dtype: summing K products in bf16/f16 would lose digits.
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    # How many TK-wide tiles cover K (the last one may be ragged). A runtime value: K is not a constant.
    num_k = ct.num_tiles(A, axis=1, shape=(TM, TK))
    for k in range(num_k):
        # ZERO padding matters here: a ragged K tile contributes 0 * 0 = 0 to every dot product, so the padded
        # columns of A and rows of B cannot change the result. (The default padding is undetermined.)
        a = ct.load(A, index=(bm, k), shape=(TM, TK), padding_mode=ZERO)
        b = ct.load(B, index=(k, bn), shape=(TK, TN), padding_mode=ZERO)
        # acc = a @ b + acc. bf16/f16 operands run on the tensor cores: exact products, float32 sums.
        # float32 operands do not: tileiras compiles them to FMA instructions on the FP32 lanes (exact
        # float32, far slower). a.astype(ct.tfloat32) opts into the tensor cores' TF32 (a 10-bit mantissa).
        acc = ct.mma(a, b, acc)
    # Storing float32 into a bf16/f16 array is a compile error (no implicit narrowing): convert explicitly.
    ct.store(C, index=(bm, bn), tile=acc.astype(C.dtype))


# ----------------------------------------------------------------------------------------------------
# 3. Row-wise inclusive cumulative sum with ct.cumsum and a carried running total.
# ----------------------------------------------------------------------------------------------------
@ct.kernel
def row_cumsum_kernel(x, y, TR: ct.Constant[int], TL: ct.Constant[int]):
    """y[r, j] = x[r, 0] + ... + x[r, j] for x, y of shape (R, L); grid = (cdiv(R, TR),).

    Block ``pid`` owns rows pid*TR ... pid*TR + TR - 1 and walks along them in (TR, TL) tiles. ``ct.cumsum``
    scans inside one tile; the total of all earlier tiles is carried in ``carry`` and added on. This
    "scan inside a tile, carry between tiles" pattern is the same one the SSD chunk kernels use along time.
    """
    pid = ct.bid(0)
    # carry[r] = sum of row r over the tiles already done. Shape (TR, 1) broadcasts over the TL columns.
    # A loop-carried variable keeps one type (dtype and shape) on every iteration: float32, (TR, 1).
    carry = ct.zeros((TR, 1), dtype=ct.float32)
    num_j = ct.num_tiles(x, axis=1, shape=(TR, TL))
    for j in range(num_j):
        # Zeros past the end of a row (or below the last row) do not change any sum.
        t = ct.load(x, index=(pid, j), shape=(TR, TL), padding_mode=ZERO).astype(ct.float32)
        # Inclusive scan along axis 1 (cuTile's default axis is 0, so say which).
        s = ct.cumsum(t, axis=1) + carry
        ct.store(y, index=(pid, j), tile=s.astype(y.dtype))
        carry = carry + ct.sum(t, axis=1, keepdims=True)


# ----------------------------------------------------------------------------------------------------
# Host wrappers: validate, allocate the output, launch.
# ----------------------------------------------------------------------------------------------------
_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _check_tensor(name: str, t, *, ndim: int, dtypes=_FLOAT_DTYPES) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(t.shape)}")
    if t.dtype not in dtypes:
        raise TypeError(f"{name} must have dtype in {[str(d) for d in dtypes]}, got {t.dtype}")


def _check_tile(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value & (value - 1):
        raise ValueError(f"{name} must be a positive power of two (a tile dimension), got {value!r}")
    return value


def _launch(kernel, grid, args, backend):
    from mamba2_tutorial.runtime.backends import launch

    launch(kernel, grid, args, backend=backend)


def vector_add(a: torch.Tensor, b: torch.Tensor, *, tile: int = 256, backend: str = "auto") -> torch.Tensor:
    """a + b for 1-D tensors of the same length, dtype and device, with :data:`vector_add_kernel`."""
    _check_tensor("a", a, ndim=1)
    _check_tensor("b", b, ndim=1)
    if b.shape != a.shape or b.dtype != a.dtype or b.device != a.device:
        raise ValueError(
            f"b must match a: a is {tuple(a.shape)} {a.dtype} on {a.device}, b is {tuple(b.shape)} {b.dtype} "
            f"on {b.device}"
        )
    _check_tile("tile", tile)
    c = torch.empty_like(a)
    n = a.shape[0]
    if n:
        _launch(vector_add_kernel, (ct.cdiv(n, tile), 1, 1), (a, b, c, tile), backend)
    return c


def matmul(
    a: torch.Tensor, b: torch.Tensor, *, tile: tuple[int, int, int] = (64, 64, 32), backend: str = "auto"
) -> torch.Tensor:
    """a @ b for a (M, K) and b (K, N) of one dtype (float32, float16 or bfloat16), via :data:`matmul_kernel`.

    ``tile = (TM, TN, TK)``. Accumulates in float32; the result has the inputs' dtype.
    """
    _check_tensor("a", a, ndim=2)
    _check_tensor("b", b, ndim=2)
    if b.shape[0] != a.shape[1]:
        raise ValueError(f"b must have shape (K, N) with K = a.shape[1] = {a.shape[1]}, got {tuple(b.shape)}")
    if b.dtype != a.dtype or b.device != a.device:
        raise ValueError(
            f"b must have a's dtype and device ({a.dtype}, {a.device}), got ({b.dtype}, {b.device})"
        )
    if len(tile) != 3:
        raise ValueError(f"tile must be (TM, TN, TK), got {tile!r}")
    tm, tn, tk = (_check_tile(f"tile[{i}]", v) for i, v in enumerate(tile))
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m == 0 or n == 0:
        return c
    if k == 0:
        return c.zero_()
    _launch(matmul_kernel, (ct.cdiv(m, tm), ct.cdiv(n, tn), 1), (a, b, c, tm, tn, tk), backend)
    return c


def row_cumsum(x: torch.Tensor, *, tile: tuple[int, int] = (8, 64), backend: str = "auto") -> torch.Tensor:
    """torch.cumsum(x, dim=1) for a 2-D float tensor x (R, L), via :data:`row_cumsum_kernel`.

    ``tile = (TR, TL)``: rows per block and columns per step. Sums in float32; the result has x's dtype.
    """
    _check_tensor("x", x, ndim=2)
    if len(tile) != 2:
        raise ValueError(f"tile must be (TR, TL), got {tile!r}")
    tr, tl = (_check_tile(f"tile[{i}]", v) for i, v in enumerate(tile))
    y = torch.empty_like(x)
    r, length = x.shape
    if r and length:
        _launch(row_cumsum_kernel, (ct.cdiv(r, tr), 1, 1), (x, y, tr, tl), backend)
    return y


# ----------------------------------------------------------------------------------------------------
# Example launches for the compile check (python -m mamba2_tutorial compile) and the tests. Ragged sizes.
# ----------------------------------------------------------------------------------------------------
def _vector_add_args():
    n, tile = 1000, 256
    a, b = torch.randn(n), torch.randn(n)
    return (ct.cdiv(n, tile), 1, 1), (a, b, torch.empty_like(a), tile)


def _matmul_args(dtype):
    def make():
        m, n, k = 100, 72, 50
        tm, tn, tk = 64, 64, 32
        a = torch.randn(m, k).to(dtype)
        b = torch.randn(k, n).to(dtype)
        c = torch.empty(m, n, dtype=dtype)
        return (ct.cdiv(m, tm), ct.cdiv(n, tn), 1), (a, b, c, tm, tn, tk)

    return make


def _row_cumsum_args():
    r, length, tr, tl = 13, 150, 8, 64
    x = torch.randn(r, length)
    return (ct.cdiv(r, tr), 1, 1), (x, torch.empty_like(x), tr, tl)


SPECS: list[KernelSpec] = [
    KernelSpec("primer.vector_add", vector_add_kernel, _vector_add_args),
    KernelSpec("primer.matmul_f32", matmul_kernel, _matmul_args(torch.float32)),
    KernelSpec("primer.matmul_bf16", matmul_kernel, _matmul_args(torch.bfloat16)),
    KernelSpec("primer.matmul_f16", matmul_kernel, _matmul_args(torch.float16)),
    KernelSpec("primer.row_cumsum", row_cumsum_kernel, _row_cumsum_args),
]
