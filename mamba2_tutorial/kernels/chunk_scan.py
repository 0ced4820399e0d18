"""Kernel 3 of 3: each chunk's output, from the state entering the chunk and the chunk's own inputs.

For row m of chunk c (position t = c·Q + m) and head h, with S_c the state entering the chunk (kernel 2):

    y_m = exp(dA_cs_m) · (C_m · S_cᵀ)                                      inter-chunk: the past, via S_c
        + sum_{k <= m} (C_m · B_k) · exp(dA_cs_m - dA_cs_k) · dt_k · x_k    intra-chunk: the chunk itself
        + D · x_m                                                         skip (optional, D (h,) or (h, p))
    out_m = y_m · silu(z_m)                                               gate (optional)

The intra-chunk sum is a masked matrix product: P = (C Bᵀ) ∘ decay ∘ causal ∘ dt is a (Q, Q) lower-triangular
matrix and the sum is P @ x. C Bᵀ is computed tile by tile on the tensor cores and used at once: it never
goes to global memory (mamba_ssm writes it, in float32, from a separate kernel).

Tiling. One block per (output tile, batch·chunk, block of HB heads):

    grid = (Q/TM · cdiv(p, TP),  b · nchunks,  h / HB)

A block owns TM rows of the chunk and TP columns of the head dimension for HB heads of ONE group, so its
output tile is (HB, TM, TP) (per-head tiles carry the heads as a leading batch dimension; ``ct.mma`` on 3-D
tiles is a batched matrix product). It loads C for its rows once, (TM, NS) with NS the state size padded to
a power of two, and then

1. inter-chunk: acc = (C @ S_cᵀ) · exp(dA_cs_m)                         (HB ×) (TM, NS) @ (NS, TP) mma
2. intra-chunk: for each key tile kt = 0 .. (its last row)/TK  (causality: later tiles contribute nothing)
       CB = C @ B_ktᵀ                                                    (TM, TK), ONE mma for all HB heads
       P  = CB ∘ exp(dA_cs_m - dA_cs_k) ∘ [k <= m] ∘ dt_k               (HB, TM, TK), in float32
       acc += P @ x_kt                                                   (HB ×) (TM, TK) @ (TK, TP) mma
3. epilogue: acc += D · x_m;  acc *= silu(z_m);  store in x's dtype.

C Bᵀ depends on the group, not the head: with HB heads per block it is computed once instead of HB times.
At Mamba-2's n = 128, p = 64 it is about half of a per-head kernel's arithmetic (a (TM, 128) @ (128, TK)
product against the (TM, TK) @ (TK, 64) one it feeds). HB = 1 gives the plain per-head kernel.

Every mma accumulates in float32. Its operands are in x's dtype, as in mamba_ssm: bf16/fp16 operands run at
tensor-core speed (P and the state are rounded to bf16/fp16 first), float32 operands keep full float32
precision. The decay exp(dA_cs_m - dA_cs_k) is taken only of min(difference, 0): on the masked-out upper
triangle the difference is positive and could overflow, so it is clamped before the exponential, not after.

Ragged last chunk: loads past the sequence end are zero-padded and dt is 0 there, so padded rows and columns
contribute nothing; the store drops rows past the end. A tile whose rows all lie past the end does nothing
(a load or store entirely out of bounds is undefined in cuTile).
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ._host import (
    LaunchPlan,
    allocate,
    cdiv,
    check_chunk_size,
    check_kernel_dtype,
    hinted,
    launch,
    next_power_of_two,
    placeholder,
    resolve_backend,
    strided_ok,
    tile_size,
)
from .configs import FAST_16BIT
from .spec import KernelSpec

__all__ = ["SPECS", "chunk_scan_fwd", "chunk_scan_heads_kernel", "chunk_scan_kernel", "chunk_scan_plan",
           "chunk_scan_shared_kernel",
           "chunk_scan_tiles", "launch_chunk_scan"]

LOG2E = 1.4426950408889634
ZERO = ct.PaddingMode.ZERO

D_NONE, D_PER_HEAD, D_PER_CHANNEL = 0, 1, 2  # D absent, D (h,), D (h, p)


def silu(z):
    """z · sigmoid(z) = z / (1 + exp(-z)) on a float32 tile, with the approximate division
    (``div.approx.f32``, about 2 ulp): the IEEE division adds a range check and a slow-path call per element
    (sm_90 SASS of the chunk scan's epilogue with z: 2496 -> 2088 instructions). Where exp(-z) overflows to
    inf the quotient is -0, silu's limit. A plain function, inlined by cuTile."""
    return ct.truediv(z, 1.0 + ct.exp2(-z * LOG2E), rounding_mode=ct.RoundingMode.APPROX)


@ct.kernel
def chunk_scan_kernel(x, z, dt_out, dA_cumsum, C, B, chunk_init_states, D,   # inputs
                      out,                                                     # output
                      heads_per_group: int,
                      Q: ct.Constant[int], TM: ct.Constant[int], TK: ct.Constant[int],
                      TP: ct.Constant[int], NS: ct.Constant[int], HB: ct.Constant[int],
                      D_MODE: ct.Constant[int], HAS_Z: ct.Constant[bool], LAT: ct.Constant[int],
                      FACTORED: ct.Constant[bool]):
    """x, z (b, l, h, p); dt_out, dA_cumsum (b, h, nchunks, Q) fp32; C, B (b, l, g, n);
    chunk_init_states (b, nchunks, h, p, n) fp32 or x's dtype; D (h,) or (h, p)
    -> out (b, l, h, p) in x's dtype. HB must divide heads_per_group (the HB heads share one group).
    LAT > 0: latency hint (1-10) on the B and x loads of the key loop; 0: the compiler's default.
    FACTORED: split the decay of key tiles before the row tile into two factors; needs dA_cumsum monotone
    within each chunk (dt_out >= 0, as ssd_forward guarantees when dt_limit's lower bound is >= 0)."""
    pid_mp = ct.bid(0)
    pid_bc = ct.bid(1)
    hb = ct.bid(2)                          # head block: heads hb·HB ... hb·HB + HB - 1
    nchunks = dA_cumsum.shape[2]
    b = pid_bc // nchunks
    c = pid_bc % nchunks
    p_tiles = ct.cdiv(x.shape[3], TP)
    i_m = pid_mp // p_tiles                 # which TM rows of the chunk
    i_p = pid_mp % p_tiles                  # which TP columns of the head dimension
    g = (hb * HB) // heads_per_group        # the group of all HB heads
    seqlen = x.shape[1]
    m_tile = c * (Q // TM) + i_m            # row tile index along l, in units of TM
    lat = LAT if LAT > 0 else None          # a compile-time hint: how long the key loop's loads take

    if m_tile * TM < seqlen:                # skip tiles entirely past the end of the sequence
        # per-head tiles are 3-D, heads first: (HB, rows, columns)
        dA_m = ct.load(dA_cumsum, (b, hb, c, i_m), shape=(1, HB, 1, TM)).reshape((HB, TM))
        C_m = ct.load(C, (b, m_tile, g, 0), shape=(1, TM, 1, NS), padding_mode=ZERO).reshape((TM, NS))
        C_m = C_m.astype(x.dtype)

        # 1. inter-chunk: (C_m @ S_cᵀ) per head, scaled row by row with exp(dA_cs_m) (<= 1 for A <= 0)
        S_c = ct.load(chunk_init_states, (b, c, hb, i_p, 0), shape=(1, 1, HB, TP, NS), padding_mode=ZERO)
        S_cT = ct.permute(S_c.reshape((HB, TP, NS)).astype(x.dtype), (0, 2, 1))       # (HB, NS, TP)
        C_mh = ct.broadcast_to(C_m[None, :, :], (HB, TM, NS))                         # same C for all HB
        acc = ct.mma(C_mh, S_cT, ct.zeros((HB, TM, TP), dtype=ct.float32))           # batched over heads
        acc = acc * ct.exp2(dA_m * LOG2E, flush_to_zero=True)[:, :, None]

        # 2. intra-chunk: key tiles up to and including the one holding this tile's last row
        m_pos = i_m * TM + ct.arange(TM, dtype=ct.int32)        # row positions inside the chunk
        # causality bounds the key tiles by this tile's last row; the sequence end bounds them too (a key tile
        # entirely past the end would be an out-of-bounds load)
        n_k = min(((i_m + 1) * TM) // TK, ct.cdiv(seqlen - c * Q, TK))
        # FACTORED (dA monotone: dt >= 0): a key tile entirely before this row tile needs no causal mask, and
        # its decay splits at r, the tile's last key: exp(dA_m - dA_k) = exp(dA_m - dA_r) · exp(dA_r - dA_k),
        # both factors <= 1, so HB·(TM + TK) exponentials instead of HB·TM·TK
        n_full = min((i_m * TM) // TK, n_k) if FACTORED else 0
        for kt in range(n_full):
            k_tile = c * (Q // TK) + kt
            B_k = ct.load(B, (b, k_tile, g, 0), shape=(1, TK, 1, NS), padding_mode=ZERO,
                          latency=lat).reshape((TK, NS))
            CB = ct.mma(C_m, ct.transpose(B_k.astype(x.dtype)), ct.zeros((TM, TK), dtype=ct.float32))
            dA_k = ct.load(dA_cumsum, (b, hb, c, kt), shape=(1, HB, 1, TK)).reshape((HB, TK))
            dt_k = ct.load(dt_out, (b, hb, c, kt), shape=(1, HB, 1, TK)).reshape((HB, TK))
            x_k = ct.load(x, (b, k_tile, hb, i_p), shape=(1, TK, HB, TP), padding_mode=ZERO, latency=lat)
            x_k = ct.permute(x_k.reshape((TK, HB, TP)), (1, 0, 2))                    # (HB, TK, TP)
            dA_r = ct.extract(dA_k, (0, TK - 1), shape=(HB, 1))
            u = ct.exp2(ct.minimum(dA_m - dA_r, 0.0) * LOG2E, flush_to_zero=True)            # (HB, TM)
            v = ct.exp2(ct.minimum(dA_r - dA_k, 0.0) * LOG2E, flush_to_zero=True) * dt_k     # (HB, TK)
            P = CB[None, :, :] * u[:, :, None] * v[:, None, :]
            acc = ct.mma(P.astype(x.dtype), x_k, acc)
        for kt in range(n_full, n_k):
            k_tile = c * (Q // TK) + kt
            B_k = ct.load(B, (b, k_tile, g, 0), shape=(1, TK, 1, NS), padding_mode=ZERO,
                          latency=lat).reshape((TK, NS))
            # C Bᵀ depends on the group only: one mma, shared by the block's HB heads
            CB = ct.mma(C_m, ct.transpose(B_k.astype(x.dtype)), ct.zeros((TM, TK), dtype=ct.float32))
            dA_k = ct.load(dA_cumsum, (b, hb, c, kt), shape=(1, HB, 1, TK)).reshape((HB, TK))
            dt_k = ct.load(dt_out, (b, hb, c, kt), shape=(1, HB, 1, TK)).reshape((HB, TK))
            x_k = ct.load(x, (b, k_tile, hb, i_p), shape=(1, TK, HB, TP), padding_mode=ZERO, latency=lat)
            x_k = ct.permute(x_k.reshape((TK, HB, TP)), (1, 0, 2))                    # (HB, TK, TP)
            k_pos = kt * TK + ct.arange(TK, dtype=ct.int32)
            causal = m_pos[:, None] >= k_pos[None, :]                                  # (TM, TK)
            decay = ct.exp2(ct.minimum(dA_m[:, :, None] - dA_k[:, None, :], 0.0) * LOG2E,
                            flush_to_zero=True)                                            # (HB, TM, TK)
            P = ct.where(causal[None, :, :], CB[None, :, :] * decay * dt_k[:, None, :], 0.0)
            acc = ct.mma(P.astype(x.dtype), x_k, acc)                                 # batched over heads

        # 3. epilogue: skip connection D·x and gate silu(z), in float32
        if D_MODE != D_NONE:
            x_m = ct.load(x, (b, m_tile, hb, i_p), shape=(1, TM, HB, TP), padding_mode=ZERO)
            x_m = ct.permute(x_m.reshape((TM, HB, TP)), (1, 0, 2)).astype(ct.float32)
            if D_MODE == D_PER_HEAD:
                D_h = ct.load(D, (hb,), shape=(HB,)).reshape((HB, 1, 1)).astype(ct.float32)
            else:
                D_h = ct.load(D, (hb, i_p), shape=(HB, TP), padding_mode=ZERO).reshape((HB, 1, TP))
                D_h = D_h.astype(ct.float32)
            acc = acc + x_m * D_h
        if HAS_Z:
            z_m = ct.load(z, (b, m_tile, hb, i_p), shape=(1, TM, HB, TP), padding_mode=ZERO)
            z_m = ct.permute(z_m.reshape((TM, HB, TP)), (1, 0, 2)).astype(ct.float32)
            acc = acc * silu(z_m)
        y = ct.permute(acc.astype(out.dtype), (1, 0, 2)).reshape((1, TM, HB, TP))
        ct.store(out, (b, m_tile, hb, i_p), y)


def _store_head(acc, x, z, D, out, b, m_tile, h, i_p, TM, TP, D_MODE, HAS_Z):
    """Epilogue of one head's 2-D (TM, TP) float32 tile: + D·x, · silu(z), store in out's dtype.
    A plain function: cuTile inlines it into the kernels that call it (D_MODE, HAS_Z stay constants)."""
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
def chunk_scan_heads_kernel(x, z, dt_out, dA_cumsum, C, B, chunk_init_states, D,   # inputs
                            out,                                                     # output
                            heads_per_group: int,
                            Q: ct.Constant[int], TM: ct.Constant[int], TK: ct.Constant[int],
                            TP: ct.Constant[int], NS: ct.Constant[int], HB: ct.Constant[int],
                            D_MODE: ct.Constant[int], HAS_Z: ct.Constant[bool], LAT: ct.Constant[int],
                            FACTORED: ct.Constant[bool]):
    """chunk_scan_kernel's results (same arguments), the block's HB heads taken one after the other with 2-D
    tiles. The batched 3-D mma of chunk_scan_kernel compiles to mma.sync on sm_90 and its (HB, TM, TP)
    accumulator spills; 2-D mmas compile to wgmma with no spills (docs/perf-notes.md, attempt 8). The price:
    C Bᵀ is computed once per head instead of once per block. FACTORED is not supported (must be False)."""
    ct.static_assert(not FACTORED, "chunk_scan_heads_kernel has no factored decay")
    pid_mp = ct.bid(0)
    pid_bc = ct.bid(1)
    hb = ct.bid(2)
    nchunks = dA_cumsum.shape[2]
    b = pid_bc // nchunks
    c = pid_bc % nchunks
    p_tiles = ct.cdiv(x.shape[3], TP)
    i_m = pid_mp // p_tiles
    i_p = pid_mp % p_tiles
    g = (hb * HB) // heads_per_group
    seqlen = x.shape[1]
    m_tile = c * (Q // TM) + i_m
    lat = LAT if LAT > 0 else None

    if m_tile * TM < seqlen:
        C_m = ct.load(C, (b, m_tile, g, 0), shape=(1, TM, 1, NS), padding_mode=ZERO).reshape((TM, NS))
        C_m = C_m.astype(x.dtype)
        m_pos = i_m * TM + ct.arange(TM, dtype=ct.int32)
        n_k = min(((i_m + 1) * TM) // TK, ct.cdiv(seqlen - c * Q, TK))
        for j in ct.static_iter(range(HB)):     # unrolled at compile time: one head at a time
            h = hb * HB + j
            dA_m = ct.load(dA_cumsum, (b, h, c, i_m), shape=(1, 1, 1, TM)).reshape((TM,))
            S_c = ct.load(chunk_init_states, (b, c, h, i_p, 0), shape=(1, 1, 1, TP, NS), padding_mode=ZERO)
            S_c = S_c.reshape((TP, NS)).astype(x.dtype)
            acc = ct.mma(C_m, ct.transpose(S_c), ct.zeros((TM, TP), dtype=ct.float32))
            acc = acc * ct.exp2(dA_m * LOG2E, flush_to_zero=True)[:, None]
            for kt in range(n_k):
                k_tile = c * (Q // TK) + kt
                B_k = ct.load(B, (b, k_tile, g, 0), shape=(1, TK, 1, NS), padding_mode=ZERO,
                              latency=lat).reshape((TK, NS))
                CB = ct.mma(C_m, ct.transpose(B_k.astype(x.dtype)), ct.zeros((TM, TK), dtype=ct.float32))
                dA_k = ct.load(dA_cumsum, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,))
                dt_k = ct.load(dt_out, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,))
                x_k = ct.load(x, (b, k_tile, h, i_p), shape=(1, TK, 1, TP), padding_mode=ZERO, latency=lat)
                k_pos = kt * TK + ct.arange(TK, dtype=ct.int32)
                causal = m_pos[:, None] >= k_pos[None, :]
                decay = ct.exp2(ct.minimum(dA_m[:, None] - dA_k[None, :], 0.0) * LOG2E, flush_to_zero=True)
                P = ct.where(causal, CB * decay * dt_k[None, :], 0.0)
                acc = ct.mma(P.astype(x.dtype), x_k.reshape((TK, TP)), acc)
            _store_head(acc, x, z, D, out, b, m_tile, h, i_p, TM, TP, D_MODE, HAS_Z)


def entering_state_T(x, chunk_init_states, b, c, h, i_p, TP, NS):
    """S_cᵀ (NS, TP) of head h in x's dtype: tile i_p of the state entering chunk c (a plain function,
    inlined by cuTile into the kernels that call it)."""
    S_c = ct.load(chunk_init_states, (b, c, h, i_p, 0), shape=(1, 1, 1, TP, NS), padding_mode=ZERO)
    return ct.transpose(S_c.reshape((TP, NS)).astype(x.dtype))


def inter_chunk_heads(C_m, x, dA_cumsum, chunk_init_states, b, c, hb, i_m, i_p, TM, TP, NS, HB, S_cTs=None,
                      carries=None):
    """The inter-chunk part for the HB heads of a block, one 2-D accumulator each:
    acc_j = (C_m @ S_cᵀ) · exp(dA_cs_m). Returns (accs, a_ms), tuples over the heads, with
    a_m = dA_cs_m · log2(e) for the intra-chunk decay. ``S_cTs`` (a tuple of the heads' S_cᵀ) when the caller
    loaded them already; otherwise each head's is loaded here. ``carries`` (the segmented state stage, a
    tuple over the heads of (K_sᵀ, exp(d_c))): S_c = L_c + exp(d_c) · K_s, so the product is
    C_m @ L_cᵀ + exp(d_c) · (C_m @ K_sᵀ), two mmas on loaded tiles. Inlined by cuTile."""
    accs = ()
    a_ms = ()
    for j in ct.static_iter(range(HB)):
        h = hb * HB + j
        a_m = ct.load(dA_cumsum, (b, h, c, i_m), shape=(1, 1, 1, TM)).reshape((TM,)) * LOG2E
        S_cT = entering_state_T(x, chunk_init_states, b, c, h, i_p, TP, NS) if S_cTs is None else S_cTs[j]
        acc = ct.zeros((TM, TP), dtype=ct.float32)
        if carries is not None:
            K_sT, decay = carries[j]
            acc = ct.mma(C_m, K_sT, acc) * decay
        acc = ct.mma(C_m, S_cT, acc)
        accs = accs + (acc * ct.exp2(a_m, flush_to_zero=True)[:, None],)
        a_ms = a_ms + (a_m,)
    return accs, a_ms


@ct.kernel
def chunk_scan_shared_kernel(x, z, dt_out, dA_cumsum, C, B, chunk_init_states, D,   # inputs
                             out,                                                     # output
                             heads_per_group: int,
                             Q: ct.Constant[int], TM: ct.Constant[int], TK: ct.Constant[int],
                             TP: ct.Constant[int], NS: ct.Constant[int], HB: ct.Constant[int],
                             D_MODE: ct.Constant[int], HAS_Z: ct.Constant[bool], LAT: ct.Constant[int],
                             FACTORED: ct.Constant[bool]):
    """chunk_scan_kernel's results (same arguments) with 2-D mmas only, C Bᵀ shared by the block's heads.

    The key loop is outermost: per key tile, C Bᵀ is ONE (TM, NS) @ (NS, TK) mma, then each of the HB heads
    (unrolled, ``ct.static_iter``) applies its own decay and dt and accumulates P @ x into its own 2-D
    (TM, TP) float32 accumulator; the HB accumulators are loop-carried as a tuple. So C Bᵀ is computed once
    per block, as in chunk_scan_kernel, but every mma is 2-D (wgmma on sm_90), as in chunk_scan_heads_kernel.
    FACTORED is not supported (must be False)."""
    ct.static_assert(not FACTORED, "chunk_scan_shared_kernel has no factored decay")
    pid_mp = ct.bid(0)
    pid_bc = ct.bid(1)
    hb = ct.bid(2)
    nchunks = dA_cumsum.shape[2]
    b = pid_bc // nchunks
    c = pid_bc % nchunks
    p_tiles = ct.cdiv(x.shape[3], TP)
    i_m = pid_mp // p_tiles
    i_p = pid_mp % p_tiles
    g = (hb * HB) // heads_per_group
    seqlen = x.shape[1]
    m_tile = c * (Q // TM) + i_m
    lat = LAT if LAT > 0 else None

    if m_tile * TM < seqlen:
        C_m = ct.load(C, (b, m_tile, g, 0), shape=(1, TM, 1, NS), padding_mode=ZERO).reshape((TM, NS))
        C_m = C_m.astype(x.dtype)
        m_pos = i_m * TM + ct.arange(TM, dtype=ct.int32)
        n_k = min(((i_m + 1) * TM) // TK, ct.cdiv(seqlen - c * Q, TK))
        # 1. inter-chunk, head by head: acc_j = (C_m @ S_cᵀ) · exp(dA_cs_m); a_m = dA_cs_m · log2(e)
        accs, a_ms = inter_chunk_heads(C_m, x, dA_cumsum, chunk_init_states, b, c, hb, i_m, i_p,
                                       TM, TP, NS, HB)
        # 2. intra-chunk: C Bᵀ once per key tile, then every head's masked, decayed P @ x
        for kt in range(n_k):
            k_tile = c * (Q // TK) + kt
            B_k = ct.load(B, (b, k_tile, g, 0), shape=(1, TK, 1, NS), padding_mode=ZERO,
                          latency=lat).reshape((TK, NS))
            CB = ct.mma(C_m, ct.transpose(B_k.astype(x.dtype)), ct.zeros((TM, TK), dtype=ct.float32))
            k_pos = kt * TK + ct.arange(TK, dtype=ct.int32)
            causal = m_pos[:, None] >= k_pos[None, :]
            new_accs = ()
            for j in ct.static_iter(range(HB)):
                h = hb * HB + j
                a_k = ct.load(dA_cumsum, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,)) * LOG2E
                dt_k = ct.load(dt_out, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,))
                x_k = ct.load(x, (b, k_tile, h, i_p), shape=(1, TK, 1, TP), padding_mode=ZERO, latency=lat)
                decay = ct.exp2(ct.minimum(a_ms[j][:, None] - a_k[None, :], 0.0), flush_to_zero=True)
                P = ct.where(causal, CB * decay * dt_k[None, :], 0.0)
                new_accs = new_accs + (ct.mma(P.astype(x.dtype), x_k.reshape((TK, TP)), accs[j]),)
            accs = new_accs
        # 3. epilogue per head
        for j in ct.static_iter(range(HB)):
            h = hb * HB + j
            _store_head(accs[j], x, z, D, out, b, m_tile, h, i_p, TM, TP, D_MODE, HAS_Z)


# ----------------------------------------------------------------------------------------------------
# Host side: tile sizes, the wrapper, example launches.
# ----------------------------------------------------------------------------------------------------
#: most heads one block handles (they share one group's C Bᵀ); float32 keeps 1 (its mma code grows with tiles)
MAX_HEADS_PER_BLOCK = {torch.float32: 1, torch.float16: 4, torch.bfloat16: 4}


@functools.lru_cache(maxsize=256)
def chunk_scan_tiles(chunk_size: int, headdim: int, dstate: int, heads_per_group: int, dtype: torch.dtype,
                     max_heads_per_block: int | None = None, tiles: tuple | None = None):
    """(TM, TK, TP, NS, HB): output rows, key rows per step, head-dim columns, padded state size, heads.

    bf16/fp16: 64 × 64 output tiles (4 row tiles per 256-chunk). float32 mma has no fast tensor-core path
    and its code grows with the tile: 32 × 32. NS covers the whole state size n, so C and B are loaded once
    per tile and C Bᵀ is one mma. HB heads of one group per block share that C Bᵀ (it does not depend on
    the head): HB is the largest power of two <= the cap that divides the heads per group.

    ``tiles`` = (TM, TK, TP) overrides the row, key and column tiles (tuning; :mod:`.configs`): TK must divide
    TM (the causal bound counts whole key tiles) and each is clipped to the chunk and the head dimension.
    """
    cap = 32 if dtype == torch.float32 else 64
    TM = min(chunk_size, cap)
    TK, TP = TM, tile_size(headdim, cap)
    if tiles is not None:
        TM, TK, TP = min(tiles[0], chunk_size), min(tiles[1], chunk_size), tile_size(headdim, tiles[2])
        if TM % TK:
            raise ValueError(f"chunk_scan tiles: TK = {TK} must divide TM = {TM}")
    HB = max_heads_per_block or MAX_HEADS_PER_BLOCK[dtype]
    while heads_per_group % HB:
        HB //= 2
    return TM, TK, TP, next_power_of_two(dstate), HB


@functools.lru_cache(maxsize=256)
def chunk_scan_plan(b: int, l: int, h: int, p: int, g: int, n: int, Q: int, dtype: torch.dtype,
                    max_heads_per_block: int | None = None, tiles: tuple | None = None) -> LaunchPlan:
    """Grid and tiles of :data:`chunk_scan_kernel` for x (b, l, h, p), C and B (b, l, g, n)."""
    TM, TK, TP, NS, HB = chunk_scan_tiles(Q, p, n, h // g, dtype, max_heads_per_block, tiles)
    tiles = {"Q": Q, "TM": TM, "TK": TK, "TP": TP, "NS": NS, "HB": HB}
    return LaunchPlan(((Q // TM) * cdiv(p, TP), b * cdiv(l, Q), h // HB), tiles)


def launch_chunk_scan(x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z, backend, out=None, poison=False,
                      max_heads_per_block=None, tiles=None, hints=(None, None), latency=0,
                      factored=False, heads_2d=False, shared=False, cb=False, whole_chunk=False,
                      cb_bf16=False, carry=None, unroll=False, head_loop=1, kd_ready=False, row_group=1,
                      CB=None, cb_hints=(None, None)):
    """Allocate the output (unless ``out`` is given), launch :data:`chunk_scan_kernel`; no argument checks.

    ``tiles`` (TM, TK, TP) and ``max_heads_per_block`` override the default tiles, ``hints`` = (occupancy,
    num_ctas) are compiler hints, ``latency`` the key loop's load latency hint (0: none) (all from
    :func:`mamba2_tutorial.kernels.configs.ssd_config`). ``factored`` (see the kernel) only when every dt_out
    is >= 0. ``heads_2d`` launches :data:`chunk_scan_heads_kernel` instead, ``shared``
    :data:`chunk_scan_shared_kernel` (neither has the factored decay). ``cb`` runs the two launches of
    :mod:`.chunk_scan_cb` instead (C Bᵀ once per chunk and group, then the scan that reads it;
    ``whole_chunk``: one block per chunk; ``cb_bf16``: C Bᵀ stored in bfloat16; ``carry``: the
    :class:`~mamba2_tutorial.kernels.segments.SegmentCarry` of a segmented state stage, whole-chunk scan
    only; ``unroll``: the whole-chunk scan unrolled for full chunks; ``kd_ready``: with ``factored`` 3 (the
    key-log2 form), dt_out already holds kd; ``row_group``: the whole-chunk scan's row tiles per key-major
    group; ``CB``: C Bᵀ already computed, with ``cb`` only; ``cb_hints``: compiler hints of the C Bᵀ
    kernel)."""
    if cb:
        from .chunk_scan_cb import launch_chunk_scan_cb

        return launch_chunk_scan_cb(x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z, backend, out, poison,
                                    max_heads_per_block, tiles, hints, latency, factored,
                                    whole_chunk=whole_chunk,
                                    cb_dtype=torch.bfloat16 if cb_bf16 else torch.float32, carry=carry,
                                    unroll=unroll, head_loop=head_loop, kd_ready=kd_ready,
                                    row_group=row_group, CB=CB, cb_hints=cb_hints)
    if CB is not None:
        raise ValueError("a precomputed C Bᵀ (CB) needs the C Bᵀ scans (SSDConfig(scan_cb=True))")
    if carry is not None or unroll or head_loop != 1 or factored >= 2 or row_group != 1:
        raise ValueError("a segment carry (the segmented state stage), an unrolled scan, a head loop, row "
                         "groups and factored 2 or 3 need the whole-chunk scan "
                         "(SSDConfig(scan_cb=True, scan_chunk=True))")
    b, l, h, p = x.shape
    g, n = C.shape[2], C.shape[3]
    Q = dA_cumsum.shape[3]
    device = x.device
    if out is None:
        out = allocate((b, l, h, p), x.dtype, device, poison)
    plan = chunk_scan_plan(b, l, h, p, g, n, Q, x.dtype, max_heads_per_block, tiles)
    t = plan.tiles
    d_mode = D_NONE if D is None else (D_PER_HEAD if D.ndim == 1 else D_PER_CHANNEL)
    args = (x, z if z is not None else placeholder(device, x.dtype, 4), dt_out, dA_cumsum, C, B,
            chunk_init_states, D if D is not None else placeholder(device, torch.float32, 1), out,
            h // g, Q, t["TM"], t["TK"], t["TP"], t["NS"], t["HB"], d_mode, z is not None, latency,
            bool(factored) and not (heads_2d or shared))
    kernel = (chunk_scan_shared_kernel if shared else
              chunk_scan_heads_kernel if heads_2d else chunk_scan_kernel)
    launch(kernel, plan.grid, args, backend, hints)
    return out


def chunk_scan_fwd(x, dt_out, dA_cumsum, C, B, chunk_init_states, *, D=None, z=None, backend="auto",
                   max_heads_per_block=None, _poison=False):
    """Kernel 3 on its own: the output y (b, l, h, p) in x's dtype, like ``reference.chunk_scan``.

    x (b, l, h, p), dt_out and dA_cumsum (b, h, nchunks, Q) float32 (kernel 1), C and B (b, l, g, n),
    chunk_init_states (b, nchunks, h, p, n) float32 or x's dtype (kernel 2), D (h,) or (h, p), z (b, l, h, p).
    ``max_heads_per_block`` (a power of two) overrides the cap on heads per block (tests and tuning).
    """
    from mamba2_tutorial.validation import check_shape

    for name, t in (("x", x), ("C", C), ("B", B)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        check_kernel_dtype(name, t)
    for name, t in (("dt_out", dt_out), ("dA_cumsum", dA_cumsum), ("chunk_init_states", chunk_init_states)):
        allowed = (torch.float32, x.dtype) if name == "chunk_init_states" else (torch.float32,)
        if not isinstance(t, torch.Tensor) or t.dtype not in allowed:
            got = getattr(t, "dtype", type(t).__name__)
            raise TypeError(f"{name} must be a float32 torch.Tensor, got {got}")
    check_shape(x, "x", ("b", "l", "h", "p"), (None,) * 4)
    b, l, h, p = x.shape
    check_shape(C, "C", ("b", "l", "g", "n"), (b, l, None, None))
    g, n = C.shape[2], C.shape[3]
    check_shape(B, "B", ("b", "l", "g", "n"), (b, l, g, n))
    if B.dtype != x.dtype or C.dtype != x.dtype:
        raise TypeError(f"x, B and C must share one dtype, got {x.dtype}, {B.dtype}, {C.dtype}")
    if g == 0 or h % g:
        raise ValueError(f"nheads h = {h} must be divisible by ngroups g = {g}")
    check_shape(dt_out, "dt_out", ("b", "h", "nchunks", "Q"), (b, h, None, None))
    Q = dt_out.shape[3]
    check_chunk_size(Q)
    nchunks = -(-l // Q)
    check_shape(dt_out, "dt_out", ("b", "h", "nchunks", "Q"), (b, h, nchunks, Q))
    check_shape(dA_cumsum, "dA_cumsum", ("b", "h", "nchunks", "Q"), (b, h, nchunks, Q))
    check_shape(chunk_init_states, "chunk_init_states", ("b", "nchunks", "h", "p", "n"),
                (b, nchunks, h, p, n))
    if D is not None:
        check_shape(D, "D", ("h",) if D.ndim == 1 else ("h", "p"), (h,) if D.ndim == 1 else (h, p))
    if z is not None:
        check_shape(z, "z", ("b", "l", "h", "p"), (b, l, h, p))
        if z.dtype != x.dtype:
            raise TypeError(f"z must have x's dtype {x.dtype}, got {z.dtype}")
    x, dt_out, dA_cumsum, C, B, chunk_init_states = (
        strided_ok(t) for t in (x, dt_out, dA_cumsum, C, B, chunk_init_states))
    D, z = strided_ok(D), strided_ok(z)
    where = resolve_backend(backend, x)
    hb = max_heads_per_block
    if hb is not None and (isinstance(hb, bool) or not isinstance(hb, int) or hb < 1 or hb & (hb - 1)):
        raise ValueError(f"max_heads_per_block must be a power of two, got {hb!r}")
    return launch_chunk_scan(x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z, where, poison=_poison,
                             max_heads_per_block=max_heads_per_block)


def _example_args(dtype, Q, d_mode, has_z, b=2, l=300, h=4, p=48, g=2, n=80, factored=None, heads=None):
    def make():
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(b, l, h, p, generator=gen).to(dtype)
        z = torch.randn(b, l, h, p, generator=gen).to(dtype)
        C = torch.randn(b, l, g, n, generator=gen).to(dtype)
        B = torch.randn(b, l, g, n, generator=gen).to(dtype)
        nchunks = -(-l // Q)
        dt_out = torch.rand(b, h, nchunks, Q, generator=gen)
        dA_cumsum = -dt_out.cumsum(-1)
        S = torch.randn(b, nchunks, h, p, n, generator=gen)
        D = torch.randn(h, generator=gen) if d_mode == D_PER_HEAD else torch.randn(h, p, generator=gen)
        plan = chunk_scan_plan(b, l, h, p, g, n, Q, dtype, heads)
        t = plan.tiles
        args = (x, z, dt_out, dA_cumsum, C, B, S, D, torch.empty_like(x),
                h // g, *(t[k] for k in ("Q", "TM", "TK", "TP", "NS", "HB")), d_mode, has_z,
                0, dtype != torch.float16 if factored is None else factored)
        return plan.grid, args

    return make


SPECS: list[KernelSpec] = [
    KernelSpec("ssd.chunk_scan_bf16_q256_z", chunk_scan_kernel,
               _example_args(torch.bfloat16, 256, D_PER_CHANNEL, True, h=8, p=64, g=1, n=128)),
    KernelSpec("ssd.chunk_scan_f16_q64", chunk_scan_kernel,
               _example_args(torch.float16, 64, D_PER_HEAD, True)),
    KernelSpec("ssd.chunk_scan_f32_q64", chunk_scan_kernel,
               _example_args(torch.float32, 64, D_PER_CHANNEL, True)),
    KernelSpec("ssd.chunk_scan_heads_bf16_q256", chunk_scan_heads_kernel,
               _example_args(torch.bfloat16, 256, D_PER_HEAD, True, h=8, p=64, g=1, n=128, factored=False)),
    KernelSpec("ssd.chunk_scan_shared_bf16_q256", chunk_scan_shared_kernel,
               _example_args(torch.bfloat16, 256, D_PER_CHANNEL, True, h=8, p=64, g=1, n=128,
                             factored=False)),
    # what ssd_forward launches for bf16 inputs (configs.FAST_16BIT: the shared kernel, its heads and hints)
    KernelSpec("ssd.fast_bf16.chunk_scan", hinted(chunk_scan_shared_kernel, *FAST_16BIT.scan_hints),
               _example_args(torch.bfloat16, 256, D_PER_CHANNEL, True, h=8, p=64, g=1, n=128,
                             factored=False, heads=FAST_16BIT.scan_heads)),
]
