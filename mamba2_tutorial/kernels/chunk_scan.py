"""Kernel 3 of 3: each chunk's output, from the state entering the chunk and the chunk's own inputs.

For row m of chunk c (position t = c·Q + m) and head h, with S_c the state entering the chunk (kernel 2):

    y_m = exp(dA_cs_m) · (C_m · S_cᵀ)                                      inter-chunk: the past, via S_c
        + sum_{k <= m} (C_m · B_k) · exp(dA_cs_m - dA_cs_k) · dt_k · x_k    intra-chunk: the chunk itself
        + D · x_m                                                         skip (optional, D (h,) or (h, p))
    out_m = y_m · silu(z_m)                                               gate (optional)

The intra-chunk sum is notebook 02's dual form on one chunk: P = (C Bᵀ) ∘ decay ∘ causal ∘ dt is a (Q, Q)
lower-triangular matrix and the sum is P @ x. This kernel computes C Bᵀ tile by tile on the tensor cores and
uses it at once, so here it never goes to global memory.

Tiling. One block per (output tile, batch·chunk, head):

    grid = (Q/TM · cdiv(p, TP),  b · nchunks,  h)

A block owns TM rows of one chunk and TP columns of one head's head dimension. It loads C for its rows once,
(TM, NS) with NS the state size padded to a power of two, and then

1. inter-chunk: acc = (C_m @ S_cᵀ) · exp(dA_cs_m)                        (TM, NS) @ (NS, TP) mma
2. intra-chunk: one loop over the key tiles kt = 0 .. the one holding the block's last row (causality: later
   key tiles contribute nothing):
       CB  = C_m @ B_ktᵀ                                                (TM, NS) @ (NS, TK) mma
       P   = CB ∘ exp(dA_cs_m - dA_cs_k) ∘ [k <= m] ∘ dt_k              (TM, TK), float32
       acc += P @ x_kt                                                  (TM, TK) @ (TK, TP) mma
3. epilogue: acc += D · x_m;  acc *= silu(z_m);  store in x's dtype.

Every mma accumulates in float32. Its operands are in x's dtype, as in mamba_ssm: bf16/fp16 operands run on
the tensor cores (P and the state are rounded to bf16/fp16 first); float32 operands keep float32 precision and
run on the ordinary float32 units (TF32 only when asked for with ``ct.tfloat32``, which these kernels do not
do; notebook 04 shows the compiler's own account). The decay exp(dA_cs_m - dA_cs_k) is taken only of
min(difference, 0): on the masked-out upper triangle the difference is positive and could overflow, so it is
clamped before the exponential, not after.

Ragged last chunk: loads past the sequence end are zero-padded and dt is 0 there, so padded rows and columns
contribute nothing; the store drops rows past the end. A tile whose rows all lie past the end does nothing
(a load or store entirely out of bounds is undefined in cuTile).
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ..runtime.launch import launch, resolve_backend
from ..runtime.specs import KernelSpec
from ._host import LaunchPlan, allocate, cdiv, next_power_of_two, placeholder, strided_ok, tile_size
from .chunk_state import LOG2E

__all__ = ["D_NONE", "D_PER_CHANNEL", "D_PER_HEAD", "SPECS", "chunk_scan_fwd", "chunk_scan_kernel",
           "chunk_scan_plan", "chunk_scan_tiles", "d_mode", "launch_chunk_scan", "silu", "store_output"]

ZERO = ct.PaddingMode.ZERO

D_NONE, D_PER_HEAD, D_PER_CHANNEL = 0, 1, 2  # D absent, D (h,), D (h, p)


def silu(z):
    """z · sigmoid(z) = z / (1 + exp(-z)) on a float32 tile, with the approximate division
    (``div.approx.f32``, about 2 ulp: the IEEE division adds a range check and a slow path per element).
    Where exp(-z) overflows to inf the quotient is -0, silu's limit. A plain function, inlined by cuTile."""
    return ct.truediv(z, 1.0 + ct.exp2(-z * LOG2E), rounding_mode=ct.RoundingMode.APPROX)


def store_output(acc, x, z, D, out, b, m_tile, h, i_p, TM, TP, D_MODE, HAS_Z):
    """The epilogue of one head's (TM, TP) float32 output tile: + D·x, · silu(z), store in out's dtype.
    A plain function: cuTile inlines it into the kernel that calls it (D_MODE and HAS_Z stay constants)."""
    if D_MODE != D_NONE:
        x_m = ct.load(x, (b, m_tile, h, i_p), shape=(1, TM, 1, TP), padding_mode=ZERO)
        x_m = x_m.reshape((TM, TP)).astype(ct.float32)
        if D_MODE == D_PER_HEAD:
            D_h = ct.load(D, (h,), shape=()).astype(ct.float32)
        else:
            D_h = ct.load(D, (h, i_p), shape=(1, TP), padding_mode=ZERO).astype(ct.float32)
        acc = acc + x_m * D_h
    if HAS_Z:
        z_m = ct.load(z, (b, m_tile, h, i_p), shape=(1, TM, 1, TP), padding_mode=ZERO)
        z_m = z_m.reshape((TM, TP)).astype(ct.float32)
        acc = acc * silu(z_m)
    ct.store(out, (b, m_tile, h, i_p), acc.astype(out.dtype).reshape((1, TM, 1, TP)))


@ct.kernel
def chunk_scan_kernel(x, z, dt_out, dA_cumsum, C, B, chunk_init_states, D,   # inputs
                      out,                                                     # output
                      heads_per_group: int,
                      Q: ct.Constant[int], TM: ct.Constant[int], TK: ct.Constant[int],
                      TP: ct.Constant[int], NS: ct.Constant[int],
                      D_MODE: ct.Constant[int], HAS_Z: ct.Constant[bool]):
    """x, z (b, l, h, p); dt_out, dA_cumsum (b, h, nchunks, Q) fp32; C, B (b, l, g, n);
    chunk_init_states (b, nchunks, h, p, n) fp32 or x's dtype; D (h,) or (h, p) -> out (b, l, h, p)."""
    pid_mp = ct.bid(0)
    pid_bc = ct.bid(1)
    h = ct.bid(2)                           # head
    nchunks = dA_cumsum.shape[2]
    b = pid_bc // nchunks
    c = pid_bc % nchunks
    p_tiles = ct.cdiv(x.shape[3], TP)
    i_m = pid_mp // p_tiles                 # which TM rows of the chunk
    i_p = pid_mp % p_tiles                  # which TP columns of the head dimension
    g = h // heads_per_group                # the group whose B and C this head reads
    seqlen = x.shape[1]
    m_tile = c * (Q // TM) + i_m            # row tile index along l, in units of TM

    if m_tile * TM < seqlen:                # skip tiles entirely past the end of the sequence
        # 1. inter-chunk: (C_m @ S_cᵀ), scaled row by row with exp(dA_cs_m) (<= 1 for A <= 0)
        a_m = ct.load(dA_cumsum, (b, h, c, i_m), shape=(1, 1, 1, TM)).reshape((TM,)) * LOG2E
        C_m = ct.load(C, (b, m_tile, g, 0), shape=(1, TM, 1, NS), padding_mode=ZERO).reshape((TM, NS))
        C_m = C_m.astype(x.dtype)
        S_c = ct.load(chunk_init_states, (b, c, h, i_p, 0), shape=(1, 1, 1, TP, NS), padding_mode=ZERO)
        S_cT = ct.transpose(S_c.reshape((TP, NS)).astype(x.dtype))                 # (NS, TP)
        acc = ct.mma(C_m, S_cT, ct.zeros((TM, TP), dtype=ct.float32))
        acc = acc * ct.exp2(a_m, flush_to_zero=True)[:, None]

        # 2. intra-chunk: key tiles up to and including the one holding this tile's last row; the sequence
        # end bounds them too (a key tile entirely past the end would be an out-of-bounds load)
        m_pos = i_m * TM + ct.arange(TM, dtype=ct.int32)        # row positions inside the chunk
        n_k = min(((i_m + 1) * TM) // TK, ct.cdiv(seqlen - c * Q, TK))
        for kt in range(n_k):
            k_tile = c * (Q // TK) + kt                          # key tile index along l, in units of TK
            B_k = ct.load(B, (b, k_tile, g, 0), shape=(1, TK, 1, NS), padding_mode=ZERO).reshape((TK, NS))
            CB = ct.mma(C_m, ct.transpose(B_k.astype(x.dtype)), ct.zeros((TM, TK), dtype=ct.float32))
            a_k = ct.load(dA_cumsum, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,)) * LOG2E
            dt_k = ct.load(dt_out, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,))
            x_k = ct.load(x, (b, k_tile, h, i_p), shape=(1, TK, 1, TP), padding_mode=ZERO).reshape((TK, TP))
            k_pos = kt * TK + ct.arange(TK, dtype=ct.int32)
            causal = m_pos[:, None] >= k_pos[None, :]                                  # (TM, TK)
            decay = ct.exp2(ct.minimum(a_m[:, None] - a_k[None, :], 0.0), flush_to_zero=True)
            P = ct.where(causal, CB * decay * dt_k[None, :], 0.0)
            acc = ct.mma(P.astype(x.dtype), x_k, acc)

        # 3. epilogue: skip connection D·x and gate silu(z), in float32; store
        store_output(acc, x, z, D, out, b, m_tile, h, i_p, TM, TP, D_MODE, HAS_Z)


# ----------------------------------------------------------------------------------------------------
# Host side: tile sizes, the wrapper, example launches.
# ----------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def chunk_scan_tiles(chunk_size: int, headdim: int, dstate: int, dtype: torch.dtype):
    """(TM, TK, TP, NS): output rows, key rows per step, head-dim columns, padded state size.

    bf16/fp16: 64 × 64 output tiles (4 row tiles per 256-chunk). float32 mma has no fast tensor-core path
    and its code grows with the tile: 32 × 32. NS covers the whole state size n, so C and B are loaded once
    per tile and C Bᵀ is one mma.
    """
    cap = 32 if dtype == torch.float32 else 64
    TM = min(chunk_size, cap)
    return TM, TM, tile_size(headdim, cap), next_power_of_two(dstate)


@functools.lru_cache(maxsize=256)
def chunk_scan_plan(b: int, l: int, h: int, p: int, g: int, n: int, Q: int, dtype: torch.dtype) -> LaunchPlan:
    """Grid and tiles of :data:`chunk_scan_kernel` for x (b, l, h, p), C and B (b, l, g, n)."""
    TM, TK, TP, NS = chunk_scan_tiles(Q, p, n, dtype)
    return LaunchPlan(((Q // TM) * cdiv(p, TP), b * cdiv(l, Q), h),
                      {"Q": Q, "TM": TM, "TK": TK, "TP": TP, "NS": NS})


def d_mode(D) -> int:
    """The kernels' D_MODE for an optional D: absent, one value per head (h,), or per channel (h, p)."""
    return D_NONE if D is None else (D_PER_HEAD if D.ndim == 1 else D_PER_CHANNEL)


def launch_chunk_scan(x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z, backend, out=None, poison=False):
    """Allocate the output (unless ``out`` is given), launch :data:`chunk_scan_kernel`; no argument checks."""
    b, l, h, p = x.shape
    g, n = C.shape[2], C.shape[3]
    Q = dA_cumsum.shape[3]
    device = x.device
    if out is None:
        out = allocate((b, l, h, p), x.dtype, device, poison)
    plan = chunk_scan_plan(b, l, h, p, g, n, Q, x.dtype)
    t = plan.tiles
    args = (x, z if z is not None else placeholder(device, x.dtype, 4), dt_out, dA_cumsum, C, B,
            chunk_init_states, D if D is not None else placeholder(device, torch.float32, 1), out,
            h // g, Q, t["TM"], t["TK"], t["TP"], t["NS"], d_mode(D), z is not None)
    launch(chunk_scan_kernel, plan.grid, args, backend)
    return out


def chunk_scan_fwd(x, dt_out, dA_cumsum, C, B, chunk_init_states, *, D=None, z=None, backend="auto",
                   _poison=False):
    """Kernel 3 on its own: the output y (b, l, h, p) in x's dtype, like ``reference.chunk_scan``.

    x (b, l, h, p), dt_out and dA_cumsum (b, h, nchunks, Q) float32 (kernel 1), C and B (b, l, g, n),
    chunk_init_states (b, nchunks, h, p, n) float32 or x's dtype (kernel 2), D (h,) or (h, p), z (b, l, h, p).
    """
    from mamba2_tutorial.runtime.validation import validate_chunk_scan_inputs

    validate_chunk_scan_inputs(x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z)
    x, dt_out, dA_cumsum, C, B, chunk_init_states = (
        strided_ok(t) for t in (x, dt_out, dA_cumsum, C, B, chunk_init_states))
    D, z = strided_ok(D), strided_ok(z)
    where = resolve_backend(backend, x)
    return launch_chunk_scan(x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z, where, poison=_poison)


def _example_args(dtype, Q, d_mode, has_z, b=2, l=300, h=4, p=48, g=2, n=80):
    def make():
        gen = torch.Generator().manual_seed(0)
        nchunks = cdiv(l, Q)
        x = torch.randn(b, l, h, p, generator=gen).to(dtype)
        C = torch.randn(b, l, g, n, generator=gen).to(dtype)
        B = torch.randn(b, l, g, n, generator=gen).to(dtype)
        dt_out = torch.rand(b, h, nchunks, Q, generator=gen)
        dA_cumsum = -dt_out.cumsum(-1)
        D = torch.randn(h, p, generator=gen) if d_mode == D_PER_CHANNEL else torch.randn(h, generator=gen)
        plan = chunk_scan_plan(b, l, h, p, g, n, Q, dtype)
        t = plan.tiles
        args = (x, torch.randn(b, l, h, p, generator=gen).to(dtype), dt_out, dA_cumsum, C, B,
                torch.randn(b, nchunks, h, p, n, generator=gen), D, torch.empty(b, l, h, p, dtype=dtype),
                h // g, Q, t["TM"], t["TK"], t["TP"], t["NS"], d_mode, has_z)
        return plan.grid, args

    return make


SPECS: list[KernelSpec] = [
    KernelSpec("ssd.chunk_scan_bf16_q256", chunk_scan_kernel,
               _example_args(torch.bfloat16, 256, D_PER_HEAD, True, p=64, n=128, g=1)),
    KernelSpec("ssd.chunk_scan_f16_q64_dchannel", chunk_scan_kernel,
               _example_args(torch.float16, 64, D_PER_CHANNEL, False)),
    KernelSpec("ssd.chunk_scan_f32_q64", chunk_scan_kernel, _example_args(torch.float32, 64, D_NONE, True)),
]
