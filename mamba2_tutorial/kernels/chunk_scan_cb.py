"""Kernel 3, second form: C Bᵀ once per (chunk, group) by its own small kernel, then the scan that reads it.

chunk_scan_kernel and chunk_scan_shared_kernel compute C Bᵀ inside every block. C Bᵀ depends on the chunk and
the group, not on the head: with one head per block (the fastest 16-bit configuration, attempt 11 of
docs/perf-notes.md) every head of a group recomputes the same (Q, Q) matrix. At Mamba-2's n = 128, p = 64 that
is half of the scan's tensor-core work (a (TM, 128) @ (128, TK) product for every (TM, TK) @ (TK, 64) one).

This module splits it out, as mamba_ssm does (its ``bmm_chunk_fwd``):

1. ``chunk_cb_kernel``: CB[b, c, g] = C_c @ B_cᵀ, (Q, Q) float32, only the causal tiles the scan reads.
   One block per (row tile, batch·chunk, group). Its cost is the C Bᵀ of ONE head: 1/80 of what the
   per-head blocks recompute at h = 80, g = 1.
2. ``chunk_scan_cb_kernel``: chunk_scan's results (same arguments, with CB instead of B), each key step
   loading a (TM, TK) float32 tile of CB instead of a (TK, n) tile of B and computing it:

       acc  = (C_m @ S_cᵀ) · exp(dA_cs_m)                                       inter-chunk, as before
       for each key tile kt:  P = CB[m, k] ∘ exp(dA_cs_m - dA_cs_k) ∘ [k <= m] ∘ dt_k;  acc += P @ x_kt
       epilogue:  + D·x,  · silu(z)

CB is kept in float32: the scan multiplies it by the decay in float32 and rounds P to x's dtype, exactly as
when it computed CB itself, so the result is the same up to the order of the float32 sums.

Grid order. ``chunk_scan_cb_kernel``'s grid puts the HEADS first, (h / HB, row tiles, batch·chunk): the blocks
that run at the same time are the heads of one chunk, and they read the same CB and C tiles, which then
come from L2. The row tiles run last-first: the last row tile has the most key tiles, so the longest blocks
start first and the short ones fill the tail.
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ._host import LaunchPlan, allocate, cdiv, hinted, launch, next_power_of_two, placeholder
from .chunk_scan import (
    D_NONE,
    D_PER_CHANNEL,
    D_PER_HEAD,
    _store_head,
    chunk_scan_tiles,
    entering_state_T,
    inter_chunk_heads,
)
from .chunk_state import key_log2
from .configs import FAST_16BIT_CB, FAST_BF16_Q128, LONG_BF16
from .segments import SegmentCarry
from .spec import KernelSpec

__all__ = ["KEY_LOG2", "SPECS", "chunk_cb_kernel", "key_log2_kernel", "launch_key_log2",
           "chunk_cb_plan", "chunk_scan_cb_chunk_kernel", "chunk_scan_cb_kernel",
           "chunk_scan_cb_plan",
           "segment_carry_T", "chunk_kernel_args", "launch_chunk_cb", "launch_chunk_scan_cb"]

LOG2E = 1.4426950408889634
ZERO = ct.PaddingMode.ZERO
#: FACTORED value of the key-log2 form (attempt 23 of docs/perf-notes.md): ``dt_out`` holds each key's
#: kd_k = dA_cs_k · log2(e) - log2(dt_k) (``chunk_state.key_log2``; computed by :data:`key_log2_kernel`, or
#: stored by the fused state stage), so that exp(dA_cs_m - dA_cs_k) · dt_k = exp2(a_m - kd_k): one
#: subtraction and one exponential per element
KEY_LOG2 = 3


@ct.kernel
def chunk_cb_kernel(C, B, CB, Q: ct.Constant[int], TM: ct.Constant[int], TK: ct.Constant[int],
                    NS: ct.Constant[int]):
    """C, B (b, l, g, n) -> CB (b, nchunks, g, Q, Q): CB[b, c, g, m, k] = C_{cQ+m} · B_{cQ+k}, accumulated in
    float32 and stored in CB's dtype (float32, or bfloat16 to halve the scan's CB reads: ``cb_dtype``).

    Writes only the (TM, TK) tiles chunk_scan_cb_kernel reads: key tiles up to the one holding the row tile's
    last row (causality), and none past the sequence end. Rows and keys past the end are zero (padding)."""
    i_m = ct.bid(0)
    pid_bc = ct.bid(1)
    g = ct.bid(2)
    nchunks = CB.shape[1]
    b = pid_bc // nchunks
    c = pid_bc % nchunks
    seqlen = C.shape[1]
    m_tile = c * (Q // TM) + i_m
    if m_tile * TM < seqlen:
        C_m = ct.load(C, (b, m_tile, g, 0), shape=(1, TM, 1, NS), padding_mode=ZERO).reshape((TM, NS))
        n_k = min(((i_m + 1) * TM) // TK, ct.cdiv(seqlen - c * Q, TK))
        for kt in range(n_k):
            k_tile = c * (Q // TK) + kt
            B_k = ct.load(B, (b, k_tile, g, 0), shape=(1, TK, 1, NS), padding_mode=ZERO).reshape((TK, NS))
            CB_mk = ct.mma(C_m, ct.transpose(B_k), ct.zeros((TM, TK), dtype=ct.float32))
            ct.store(CB, (b, c, g, i_m, kt), CB_mk.astype(CB.dtype).reshape((1, 1, 1, TM, TK)))


@ct.kernel
def key_log2_kernel(dt_out, dA_cumsum, kd, TR: ct.Constant[int], Q: ct.Constant[int]):
    """dt_out, dA_cumsum (R, Q) float32 (the (b, h, nchunks, Q) intermediates as rows) -> kd (R, Q) float32,
    kd = dA_cumsum · log2(e) - log2(dt_out) (+inf where dt = 0): the key-log2 form the scan's
    ``FACTORED = KEY_LOG2`` reads. One block per TR rows; only for dt >= 0 (log2 of a negative dt is NaN).

    Its own launch, so that the fused state stage keeps its code: cuTile's log2 has no approximate form, and
    computed there on the stage's (Q,) vectors it doubled the stage's sm_90 chunk loop (1365 -> 3174
    instructions, attempt 23 of docs/perf-notes.md)."""
    i = ct.bid(0)
    dt = ct.load(dt_out, (i, 0), shape=(TR, Q), padding_mode=ZERO)
    a = ct.load(dA_cumsum, (i, 0), shape=(TR, Q), padding_mode=ZERO)
    ct.store(kd, (i, 0), key_log2(a, dt))


#: rows of (b, h, nchunks, Q) per key_log2_kernel block
KEY_LOG2_ROWS = 16


def launch_key_log2(dt_out, dA_cumsum, backend, poison=False):
    """kd (b, h, nchunks, Q) float32 from dt_out and dA_cumsum by :data:`key_log2_kernel` (dt >= 0 only)."""
    Q = dt_out.shape[-1]
    kd = allocate(dt_out.shape, torch.float32, dt_out.device, poison)
    rows = dt_out.numel() // Q
    launch(key_log2_kernel, (cdiv(rows, KEY_LOG2_ROWS),),
           (dt_out.view(rows, Q), dA_cumsum.view(rows, Q), kd.view(rows, Q), KEY_LOG2_ROWS, Q), backend)
    return kd


def _key_log2_P(CB_mk, a_m, kd):
    """P = C Bᵀ ∘ exp2(a_m - kd_k) for a (TM, TK) float32 tile of C Bᵀ, the rows' a_m (TM,) and the keys' kd
    (TK,): the key-log2 form of decay · dt (``FACTORED = KEY_LOG2``). Inlined by cuTile."""
    return CB_mk * ct.exp2(a_m[:, None] - kd[None, :], flush_to_zero=True)


def _key_tile(accs, a_ms, x, dt_out, dA_cumsum, CB, b, c, g, hb, i_m, i_p, kt, m_pos,
              Q, TM, TK, TP, HB, lat, MASK, FACTORED):
    """One key tile kt of the intra-chunk sum for the block's HB heads: acc_j += P_j @ x_kt, with
    P_j = CB[m, k] ∘ exp2(a_m - a_k) ∘ dt_k (∘ [k <= m] when MASK). A plain function: cuTile inlines it, and
    MASK and FACTORED stay compile-time constants.

    FACTORED (only for a key tile entirely before the rows, and only when dA_cs is monotone: dt >= 0): with r
    the tile's last key, exp2(a_m - a_k) = exp2(a_m - a_r) · exp2(a_r - a_k), both factors <= 1, so TM + TK
    exponentials per head instead of TM · TK (1: in float32; 2: the factors and CB in x's dtype).
    FACTORED = KEY_LOG2 (3; every key tile, the diagonal ones too, and only when dt >= 0): ``dt_out`` holds
    kd_k = a_k - log2(dt_k) instead of dt_k, and P_j = CB[m, k] ∘ exp2(a_m - kd_k) (∘ [k <= m]): no dt
    multiply and no clamp (a masked entry's exponential may overflow; the mask's select discards it)."""
    k_tile = c * (Q // TK) + kt
    CB_mk = ct.load(CB, (b, c, g, i_m, kt), shape=(1, 1, 1, TM, TK), latency=lat).reshape((TM, TK))
    if FACTORED == 2:
        CB_mk = CB_mk.astype(x.dtype)     # P in x's dtype (a no-op for a bf16 C Bᵀ with bf16 x)
    else:
        CB_mk = CB_mk.astype(ct.float32)  # a no-op for a float32 CB; a bfloat16 CB (cb_dtype) is widened
    if MASK:
        k_pos = kt * TK + ct.arange(TK, dtype=ct.int32)
        causal = m_pos[:, None] >= k_pos[None, :]
    new_accs = ()
    for j in ct.static_iter(range(HB)):
        h = hb * HB + j
        x_k = ct.load(x, (b, k_tile, h, i_p), shape=(1, TK, 1, TP), padding_mode=ZERO, latency=lat)
        if FACTORED == KEY_LOG2:  # dt_out holds kd_k = a_k - log2(dt_k): exp2(a_m - kd_k) = decay · dt_k
            kd = ct.load(dt_out, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,))
            P = _key_log2_P(CB_mk, a_ms[j], kd)
        else:
            a_k = ct.load(dA_cumsum, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,)) * LOG2E
            dt_k = ct.load(dt_out, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,))
            if FACTORED:
                a_r = ct.extract(a_k, (TK - 1,), shape=(1,))
                u = ct.exp2(ct.minimum(a_ms[j] - a_r, 0.0), flush_to_zero=True)                   # (TM,)
                v = ct.exp2(ct.minimum(a_r - a_k, 0.0), flush_to_zero=True) * dt_k                # (TK,)
                if FACTORED == 2:
                    P = CB_mk * u.astype(x.dtype)[:, None] * v.astype(x.dtype)[None, :]
                else:
                    P = CB_mk * u[:, None] * v[None, :]
            else:
                decay = ct.exp2(ct.minimum(a_ms[j][:, None] - a_k[None, :], 0.0), flush_to_zero=True)
                P = CB_mk * decay * dt_k[None, :]
        if MASK:
            P = ct.where(causal, P, 0.0)
        new_accs = new_accs + (ct.mma(P.astype(x.dtype), x_k.reshape((TK, TP)), accs[j]),)
    return new_accs


def _row_tile(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D, out, b, c, g, hb, i_m, m_tile, i_p,
              seqlen, Q, TM, TK, TP, NS, HB, D_MODE, HAS_Z, lat, FACTORED, S_cTs=None, carries=None,
              STATIC=False):
    """Row tile i_m of chunk c for the HB heads of a block: the inter-chunk part, the key tiles up to the
    diagonal (those entirely before the rows without the causal mask, optionally factored), the epilogue and
    the store; m_tile = c · Q/TM + i_m. Shared by both scan kernels of this module (a plain function: cuTile
    inlines it). STATIC: i_m is a compile-time constant of a chunk that lies wholly inside the sequence, and
    the key loops are unrolled (``ct.static_iter``)."""
    C_m = ct.load(C, (b, m_tile, g, 0), shape=(1, TM, 1, NS), padding_mode=ZERO).reshape((TM, NS))
    C_m = C_m.astype(x.dtype)
    m_pos = i_m * TM + ct.arange(TM, dtype=ct.int32)
    if STATIC:
        n_k = ((i_m + 1) * TM) // TK
    else:
        n_k = min(((i_m + 1) * TM) // TK, ct.cdiv(seqlen - c * Q, TK))
    # 1. inter-chunk, head by head: acc_j = (C_m @ S_cᵀ) · exp(dA_cs_m); a_m = dA_cs_m · log2(e)
    accs, a_ms = inter_chunk_heads(C_m, x, dA_cumsum, chunk_init_states, b, c, hb, i_m, i_p, TM, TP, NS, HB,
                                   S_cTs, carries)
    diag_form = KEY_LOG2 if FACTORED == KEY_LOG2 else 0  # the diagonal tiles: exact, or the key-log2 form
    # 2. intra-chunk, one CB tile per key tile shared by the HB heads. Key tiles entirely before this row
    # tile (kt < n_full) need no causal mask; the diagonal tile(s) do.
    n_full = min((i_m * TM) // TK, n_k)
    if STATIC:
        for kt in ct.static_iter(range(n_full)):
            accs = _key_tile(accs, a_ms, x, dt_out, dA_cumsum, CB, b, c, g, hb, i_m, i_p, kt, m_pos,
                             Q, TM, TK, TP, HB, lat, False, FACTORED)
    else:
        for kt in range(n_full):
            accs = _key_tile(accs, a_ms, x, dt_out, dA_cumsum, CB, b, c, g, hb, i_m, i_p, kt, m_pos,
                             Q, TM, TK, TP, HB, lat, False, FACTORED)
    if STATIC:
        for kt in ct.static_iter(range(n_full, n_k)):
            accs = _key_tile(accs, a_ms, x, dt_out, dA_cumsum, CB, b, c, g, hb, i_m, i_p, kt, m_pos,
                             Q, TM, TK, TP, HB, lat, True, diag_form)
    else:
        for kt in range(n_full, n_k):
            accs = _key_tile(accs, a_ms, x, dt_out, dA_cumsum, CB, b, c, g, hb, i_m, i_p, kt, m_pos,
                             Q, TM, TK, TP, HB, lat, True, diag_form)
    # 3. epilogue per head
    for j in ct.static_iter(range(HB)):
        _store_head(accs[j], x, z, D, out, b, m_tile, hb * HB + j, i_p, TM, TP, D_MODE, HAS_Z)


def _key_log2_step(acc, a_m, x_k, kd, CB, b, c, g, i_m, kt, TM, TK, lat, MASK):
    """acc += P @ x_k with P = CB[m, k] ∘ exp2(a_m - kd_k) (∘ [k <= m] on a diagonal tile, MASK): one key
    step of the key-log2 form (``_key_tile`` with FACTORED = KEY_LOG2, one head) on an x tile and a kd
    vector the caller loaded, so that a row group shares them. Inlined by cuTile."""
    CB_mk = ct.load(CB, (b, c, g, i_m, kt), shape=(1, 1, 1, TM, TK), latency=lat).reshape((TM, TK))
    P = _key_log2_P(CB_mk.astype(ct.float32), a_m, kd)
    if MASK:  # a diagonal tile (TM == TK, i_m == kt): the causal mask is the same in every one
        rows = ct.arange(TM, dtype=ct.int32)
        P = ct.where(rows[:, None] >= rows[None, :], P, 0.0)
    return ct.mma(P.astype(x_k.dtype), x_k, acc)


def _row_group(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D, out, b, c, g, h, i_g, i_p,
               Q, TM, TP, NS, D_MODE, HAS_Z, lat, RG, S_cTs, carries):
    """Row tiles i_g·RG .. i_g·RG + RG - 1 of a full chunk c of head h, key-major inside the group: each x
    tile (and kd vector) is loaded once for the group's RG row tiles instead of once per row tile, which
    keep RG (TM, TP) float32 accumulators live (``SSDConfig.scan_row_group``; the key-log2 form, TM == TK,
    one head per block). Key tiles before the group need no mask (a loop); the group's own RG key tiles
    form a static lower triangle whose diagonal tiles are masked. Inlined by cuTile."""
    accs = ()
    a_ms = ()
    for j in ct.static_iter(range(RG)):
        i_m = i_g * RG + j
        C_m = ct.load(C, (b, c * (Q // TM) + i_m, g, 0), shape=(1, TM, 1, NS), padding_mode=ZERO)
        C_m = C_m.reshape((TM, NS)).astype(x.dtype)
        acc, a_m = inter_chunk_heads(C_m, x, dA_cumsum, chunk_init_states, b, c, h, i_m, i_p, TM, TP, NS, 1,
                                     S_cTs, carries)
        accs = accs + acc
        a_ms = a_ms + a_m
    # key tiles before the group: every row of the group sees all of their keys
    for kt in range(i_g * RG):
        x_k = ct.load(x, (b, c * (Q // TM) + kt, h, i_p), shape=(1, TM, 1, TP), padding_mode=ZERO,
                      latency=lat).reshape((TM, TP))
        kd = ct.load(dt_out, (b, h, c, kt), shape=(1, 1, 1, TM)).reshape((TM,))
        new_accs = ()
        for j in ct.static_iter(range(RG)):
            new_accs = new_accs + (_key_log2_step(accs[j], a_ms[j], x_k, kd, CB, b, c, g, i_g * RG + j, kt,
                                                  TM, TM, lat, False),)
        accs = new_accs
    # the group's own key tiles: row j sees key tiles kk <= j, the diagonal one masked
    for kk in ct.static_iter(range(RG)):
        kt = i_g * RG + kk
        x_k = ct.load(x, (b, c * (Q // TM) + kt, h, i_p), shape=(1, TM, 1, TP), padding_mode=ZERO,
                      latency=lat).reshape((TM, TP))
        kd = ct.load(dt_out, (b, h, c, kt), shape=(1, 1, 1, TM)).reshape((TM,))
        new_accs = ()
        for j in ct.static_iter(range(RG)):
            if j >= kk:
                new_accs = new_accs + (_key_log2_step(accs[j], a_ms[j], x_k, kd, CB, b, c, g, i_g * RG + j,
                                                      kt, TM, TM, lat, j == kk),)
            else:
                new_accs = new_accs + (accs[j],)
        accs = new_accs
    for j in ct.static_iter(range(RG)):
        _store_head(accs[j], x, z, D, out, b, c * (Q // TM) + i_g * RG + j, h, i_p, TM, TP, D_MODE, HAS_Z)


@ct.kernel
def chunk_scan_cb_kernel(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D,   # inputs
                         out,                                                      # output
                         heads_per_group: int,
                         Q: ct.Constant[int], TM: ct.Constant[int], TK: ct.Constant[int],
                         TP: ct.Constant[int], NS: ct.Constant[int], HB: ct.Constant[int],
                         D_MODE: ct.Constant[int], HAS_Z: ct.Constant[bool], LAT: ct.Constant[int],
                         FACTORED: ct.Constant[int]):
    """chunk_scan_kernel's results; CB (b, nchunks, g, Q, Q) float32 from chunk_cb_kernel replaces B.

    Grid (h / HB, (Q / TM) · cdiv(p, TP), b · nchunks): heads first (see the module docstring). The HB heads
    of one group share each CB tile; each has its own 2-D (TM, TP) accumulator (a loop-carried tuple), so
    every mma is 2-D (wgmma on sm_90). LAT > 0: latency hint (1-10) on the key loop's CB and x loads.
    FACTORED: the factored decay on key tiles before the row tile (needs dt_out >= 0, see ``_key_tile``)."""
    hb = ct.bid(0)
    pid_mp = ct.bid(1)
    pid_bc = ct.bid(2)
    nchunks = dA_cumsum.shape[2]
    b = pid_bc // nchunks
    c = pid_bc % nchunks
    p_tiles = ct.cdiv(x.shape[3], TP)
    i_m = (Q // TM - 1) - pid_mp // p_tiles  # last row tile first: it has the most key tiles
    i_p = pid_mp % p_tiles
    g = (hb * HB) // heads_per_group
    seqlen = x.shape[1]
    m_tile = c * (Q // TM) + i_m
    lat = LAT if LAT > 0 else None

    if m_tile * TM < seqlen:
        _row_tile(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D, out, b, c, g, hb, i_m, m_tile, i_p,
                  seqlen, Q, TM, TK, TP, NS, HB, D_MODE, HAS_Z, lat, FACTORED)


def segment_carry_T(x, carry, seg_prefix, b, c, h, i_p, TP, NS, cps):
    """(K_sᵀ (NS, TP) in x's dtype, exp(seg_prefix[c]) (1, 1)) for the segmented state stage
    (:mod:`.segments`): the state entering chunk c's segment and its decay to chunk c, so that
    S_c = L_c + exp(seg_prefix[c]) · K_s. Inlined by cuTile."""
    K_s = entering_state_T(x, carry, b, c // cps, h, i_p, TP, NS)
    decay = ct.exp2(ct.load(seg_prefix, (b, h, c), shape=()) * LOG2E, flush_to_zero=True)
    return K_s, decay


@ct.kernel
def chunk_scan_cb_chunk_kernel(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D,   # inputs
                               carry, seg_prefix,                                        # segmented inputs
                               out,                                                      # output
                               heads_per_group: int, chunks_per_segment: int,
                               Q: ct.Constant[int], TM: ct.Constant[int], TK: ct.Constant[int],
                               TP: ct.Constant[int], NS: ct.Constant[int], HB: ct.Constant[int],
                               D_MODE: ct.Constant[int], HAS_Z: ct.Constant[bool], LAT: ct.Constant[int],
                               FACTORED: ct.Constant[int], HAS_CARRY: ct.Constant[bool],
                               UNROLL: ct.Constant[bool], HL: ct.Constant[int],
                               RG: ct.Constant[int]):
    """chunk_scan_cb_kernel's results, one block per (head block, p tile, batch·chunk) walking ALL the chunk's
    row tiles in a loop (grid (h / HB, cdiv(p, TP), b · nchunks)): Q/TM · (Q/TM + 1) / 2 key-tile steps per
    block instead of 1 to Q/TM, and the entering state S_c loaded once per chunk instead of once per row tile
    (attempt 14 of docs/perf-notes.md).

    HAS_CARRY: the state stage ran by segments (:mod:`.segments`): chunk_init_states holds the states L_c
    entering each chunk from its segment's start, ``carry`` (b, nseg, h, p, n) the state K_s entering each
    segment and ``seg_prefix`` (b, h, nchunks) the log decay d_c from the segment's start; the inter-chunk
    part takes C_m @ L_cᵀ + exp(d_c) · (C_m @ K_sᵀ). Without it, ``carry``, ``seg_prefix`` and
    ``chunks_per_segment`` are unused placeholders.

    UNROLL: a chunk that lies wholly inside the sequence takes its Q/TM row tiles and their key tiles as one
    unrolled body (``ct.static_iter``: no loops); the ragged last chunk keeps the loops. Faster at chunk size
    128, slower at 256 (attempt 19 of docs/perf-notes.md).

    RG > 1 (``SSDConfig.scan_row_group``; the key-log2 form, TM == TK, HB == 1, not with UNROLL): a chunk that
    lies wholly inside the sequence walks its row tiles in groups of RG, key-major inside each group
    (``_row_group``): each x tile is loaded once per group instead of once per row tile (at Q 256, TM 64:
    6 x tile loads per chunk with RG 2, 4 with RG 4, against 10), for RG live accumulators (attempt 25 of
    docs/perf-notes.md). The ragged last chunk keeps the row-tile loop."""
    i_p = ct.bid(1)
    pid_bc = ct.bid(2)
    nchunks = dA_cumsum.shape[2]
    b = pid_bc // nchunks
    c = pid_bc % nchunks
    lat = LAT if LAT > 0 else None
    if RG > 1:
        ct.static_assert(FACTORED == KEY_LOG2 and TM == TK and HB == 1 and HL == 1 and not UNROLL
                         and (Q // TM) % RG == 0,
                         "RG > 1 needs the key-log2 form (FACTORED 3), TM == TK, HB 1, HL 1, no UNROLL and "
                         "RG dividing Q / TM")
    if HL == 1:
        _chunk_heads(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D, carry, seg_prefix, out,
                     heads_per_group, chunks_per_segment, ct.bid(0), i_p, b, c, Q, TM, TK, TP, NS, HB, D_MODE,
                     HAS_Z, lat, FACTORED, HAS_CARRY, UNROLL, RG)
    else:
        for jl in range(HL):
            hb = ct.bid(0) * HL + jl
            _chunk_heads(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D, carry, seg_prefix, out,
                         heads_per_group, chunks_per_segment, hb, i_p, b, c, Q, TM, TK, TP, NS, HB, D_MODE,
                         HAS_Z, lat, FACTORED, HAS_CARRY, UNROLL, RG)


def _chunk_heads(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D, carry, seg_prefix, out,
                 heads_per_group, chunks_per_segment, hb, i_p, b, c, Q, TM, TK, TP, NS, HB, D_MODE, HAS_Z,
                 lat, FACTORED, HAS_CARRY, UNROLL, RG=1):
    """Chunk c of head block hb (heads hb·HB .. hb·HB + HB - 1): all its row tiles. Inlined by cuTile."""
    g = (hb * HB) // heads_per_group
    seqlen = x.shape[1]
    S_cTs = ()
    carries = () if HAS_CARRY else None
    for j in ct.static_iter(range(HB)):
        S_cTs = S_cTs + (entering_state_T(x, chunk_init_states, b, c, hb * HB + j, i_p, TP, NS),)
        if HAS_CARRY:
            carries = carries + (segment_carry_T(x, carry, seg_prefix, b, c, hb * HB + j, i_p, TP, NS,
                                                 chunks_per_segment),)
    if RG > 1 and (c + 1) * Q <= seqlen:
        for i_g in range(Q // (TM * RG)):
            _row_group(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D, out, b, c, g, hb, i_g, i_p,
                       Q, TM, TP, NS, D_MODE, HAS_Z, lat, RG, S_cTs, carries)
    elif UNROLL and (c + 1) * Q <= seqlen:
        for i_m in ct.static_iter(range(Q // TM)):
            m_tile = c * (Q // TM) + i_m
            _row_tile(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D, out, b, c, g, hb, i_m, m_tile,
                      i_p, seqlen, Q, TM, TK, TP, NS, HB, D_MODE, HAS_Z, lat, FACTORED, S_cTs, carries, True)
    else:
        n_rows = min(Q // TM, ct.cdiv(seqlen - c * Q, TM))  # row tiles of this chunk inside the sequence
        for i_m in range(n_rows):
            m_tile = c * (Q // TM) + i_m
            _row_tile(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D, out, b, c, g, hb, i_m, m_tile,
                      i_p, seqlen, Q, TM, TK, TP, NS, HB, D_MODE, HAS_Z, lat, FACTORED, S_cTs, carries)


# ----------------------------------------------------------------------------------------------------
# Host side
# ----------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def chunk_scan_cb_plan(b: int, l: int, h: int, p: int, g: int, n: int, Q: int, dtype: torch.dtype,
                       max_heads_per_block: int | None = None, tiles: tuple | None = None) -> LaunchPlan:
    """Grid and tiles of :data:`chunk_scan_cb_kernel` (heads first); tiles as :func:`chunk_scan_tiles`."""
    TM, TK, TP, NS, HB = chunk_scan_tiles(Q, p, n, h // g, dtype, max_heads_per_block, tiles)
    return LaunchPlan((h // HB, (Q // TM) * cdiv(p, TP), b * cdiv(l, Q)),
                      {"Q": Q, "TM": TM, "TK": TK, "TP": TP, "NS": NS, "HB": HB})


@functools.lru_cache(maxsize=256)
def chunk_cb_plan(b: int, l: int, g: int, n: int, Q: int, TM: int, TK: int) -> LaunchPlan:
    """Grid of :data:`chunk_cb_kernel` for the scan's (TM, TK) tiles: one block per (row tile, b·chunk, g)."""
    return LaunchPlan((Q // TM, b * cdiv(l, Q), g), {"Q": Q, "TM": TM, "TK": TK, "NS": next_power_of_two(n)})


def launch_chunk_cb(C, B, Q, TM, TK, backend, poison=False, hints=(None, None), cb_dtype=torch.float32):
    """Allocate CB (b, nchunks, g, Q, Q) in ``cb_dtype`` and launch :data:`chunk_cb_kernel`; no argument
    checks."""
    b, l, g, n = C.shape
    CB = allocate((b, cdiv(l, Q), g, Q, Q), cb_dtype, C.device, poison)
    plan = chunk_cb_plan(b, l, g, n, Q, TM, TK)
    t = plan.tiles
    launch(chunk_cb_kernel, plan.grid, (C, B, CB, Q, t["TM"], t["TK"], t["NS"]), backend, hints)
    return CB


def launch_chunk_scan_cb(x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z, backend, out=None, poison=False,
                         max_heads_per_block=None, tiles=None, hints=(None, None), latency=0,
                         factored=False, cb_hints=(None, None), whole_chunk=False, cb_dtype=torch.float32,
                         carry=None, unroll=False, head_loop=1, kd_ready=False, CB=None, row_group=1):
    """Both launches: :data:`chunk_cb_kernel`, then :data:`chunk_scan_cb_kernel`; no argument checks.
    Arguments as :func:`~mamba2_tutorial.kernels.chunk_scan.launch_chunk_scan`; ``factored`` only when every
    dt_out is >= 0; ``whole_chunk`` launches :data:`chunk_scan_cb_chunk_kernel` (one block per chunk);
    ``cb_dtype`` is CB's storage dtype (bfloat16: half the bytes, C Bᵀ rounded once more); ``carry`` (a
    :class:`~mamba2_tutorial.kernels.segments.SegmentCarry`, only with ``whole_chunk``): chunk_init_states
    came from the segmented state stage; ``unroll`` (only with ``whole_chunk``): the whole-chunk scan's
    unrolled body for full chunks; ``head_loop`` (only with ``whole_chunk``): head blocks per scan block,
    walked in a loop; ``factored`` 2 (only with ``whole_chunk``): the factored decay in x's dtype;
    :data:`KEY_LOG2` (3, only with ``whole_chunk``):
    ``dt_out`` holds the key-log2 form kd (see ``_key_tile``) when ``kd_ready`` (the fused state stage stored
    it, ``SSDConfig.state_key_log2``), else :data:`key_log2_kernel` computes it from dt_out and dA_cumsum
    first (a third launch). ``CB``: C Bᵀ already computed by :func:`launch_chunk_cb` with this plan's tiles
    (e.g. on a side stream while the state stage runs); :data:`chunk_cb_kernel` is then not launched.
    ``row_group`` (only with ``whole_chunk`` and ``factored`` 3): row tiles per key-major group (the
    kernel's RG)."""
    if (carry is not None or unroll or head_loop != 1 or factored >= 2 or row_group != 1) and not whole_chunk:
        raise ValueError("a segment carry (the segmented state stage), an unrolled scan, a head loop, row "
                         "groups and factored 2 or 3 need the whole-chunk scan "
                         "(SSDConfig(scan_cb=True, scan_chunk=True))")
    b, l, h, p = x.shape
    g, n = C.shape[2], C.shape[3]
    Q = dA_cumsum.shape[3]
    device = x.device
    plan = chunk_scan_cb_plan(b, l, h, p, g, n, Q, x.dtype, max_heads_per_block, tiles)
    t = plan.tiles
    if CB is None:
        CB = launch_chunk_cb(C, B, Q, t["TM"], t["TK"], backend, poison, cb_hints, cb_dtype)
    if factored == KEY_LOG2 and not kd_ready:
        dt_out = launch_key_log2(dt_out, dA_cumsum, backend, poison)
    if out is None:
        out = allocate((b, l, h, p), x.dtype, device, poison)
    d_mode = D_NONE if D is None else (D_PER_HEAD if D.ndim == 1 else D_PER_CHANNEL)
    args = (x, z if z is not None else placeholder(device, x.dtype, 4), dt_out, dA_cumsum, C, CB,
            chunk_init_states, D if D is not None else placeholder(device, torch.float32, 1), out,
            h // g, Q, t["TM"], t["TK"], t["TP"], t["NS"], t["HB"], d_mode, z is not None, latency,
            int(factored))
    if row_group != 1 and (factored != KEY_LOG2 or t["TM"] != t["TK"] or (Q // t["TM"]) % row_group
                           or t["HB"] != 1 or head_loop != 1 or unroll):
        raise ValueError(
            f"scan_row_group = {row_group} needs the key-log2 form (factored 3), equal row and key tiles, "
            f"one head per block, no head loop or unroll, and must divide the row tiles per chunk; got "
            f"factored {factored}, TM {t['TM']}, TK {t['TK']}, HB {t['HB']}, head_loop {head_loop}, "
            f"unroll {unroll}, {Q // t['TM']} row tiles per chunk (chunk size {Q})")
    if whole_chunk:
        if plan.grid[0] % head_loop:
            raise ValueError(f"scan_head_loop = {head_loop} must divide the head blocks h / HB = "
                             f"{plan.grid[0]}")
        grid = (plan.grid[0] // head_loop, cdiv(p, t["TP"]), plan.grid[2])
        launch(chunk_scan_cb_chunk_kernel, grid,
               chunk_kernel_args(args, carry, device, unroll, head_loop, row_group), backend, hints)
    else:
        launch(chunk_scan_cb_kernel, plan.grid, args, backend, hints)
    return out


def chunk_kernel_args(args, carry, device, unroll=False, head_loop=1, row_group=1):
    """chunk_scan_cb_kernel's arguments -> chunk_scan_cb_chunk_kernel's: the segment carry (or placeholders)
    after D, chunks_per_segment after heads_per_group, HAS_CARRY, UNROLL, HL and RG last."""
    if carry is None:
        x = args[0]
        tensors, cps = (placeholder(device, x.dtype, 5), placeholder(device, torch.float32, 3)), 1
    else:
        tensors, cps = (carry.carry, carry.seg_prefix), carry.chunks_per_segment
    return args[:8] + tensors + args[8:10] + (cps,) + args[10:] + (carry is not None, bool(unroll), head_loop,
                                                                   row_group)


def _example_args(Q=256, b=2, l=300, h=8, p=64, g=1, n=128, heads=1, dtype=torch.bfloat16, factored=False,
                  cb_dtype=torch.float32, whole_chunk=False, segments=0, unroll=False, row_group=1):
    def make():
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(b, l, h, p, generator=gen).to(dtype)
        z = torch.randn(b, l, h, p, generator=gen).to(dtype)
        C = torch.randn(b, l, g, n, generator=gen).to(dtype)
        nchunks = cdiv(l, Q)
        dt_out = torch.rand(b, h, nchunks, Q, generator=gen)
        dA_cumsum = -dt_out.cumsum(-1)
        CB = torch.randn(b, nchunks, g, Q, Q, generator=gen).to(cb_dtype)
        S = torch.randn(b, nchunks, h, p, n, generator=gen).to(dtype)
        D = torch.randn(h, p, generator=gen)
        plan = chunk_scan_cb_plan(b, l, h, p, g, n, Q, dtype, heads)
        t = plan.tiles
        args = (x, z, dt_out, dA_cumsum, C, CB, S, D, torch.empty_like(x),
                h // g, *(t[k] for k in ("Q", "TM", "TK", "TP", "NS", "HB")), D_PER_CHANNEL, True, 0,
                factored)
        if whole_chunk:
            carry = None
            if segments:
                cps = cdiv(nchunks, segments)
                carry = SegmentCarry(torch.randn(b, cdiv(nchunks, cps), h, p, n, generator=gen).to(dtype),
                                     -torch.rand(b, h, nchunks, generator=gen), cps)
            grid = (plan.grid[0], cdiv(p, t["TP"]), plan.grid[2])
            return grid, chunk_kernel_args(args, carry, "cpu", unroll, 1, row_group)
        return plan.grid, args

    return make


def _example_cb_args(Q=256, b=2, l=300, g=1, n=128, TM=64, TK=64, dtype=torch.bfloat16,
                     cb_dtype=torch.float32):
    def make():
        gen = torch.Generator().manual_seed(0)
        C = torch.randn(b, l, g, n, generator=gen).to(dtype)
        B = torch.randn(b, l, g, n, generator=gen).to(dtype)
        plan = chunk_cb_plan(b, l, g, n, Q, TM, TK)
        t = plan.tiles
        return plan.grid, (C, B, torch.empty(b, cdiv(l, Q), g, Q, Q, dtype=cb_dtype), Q, t["TM"], t["TK"],
                           t["NS"])

    return make


def _example_key_log2_args(rows=37, Q=256):
    def make():
        gen = torch.Generator().manual_seed(0)
        dt = torch.rand(rows, Q, generator=gen)
        return (cdiv(rows, KEY_LOG2_ROWS),), (dt, -dt.cumsum(-1), torch.empty(rows, Q), KEY_LOG2_ROWS, Q)

    return make


SPECS: list[KernelSpec] = [
    KernelSpec("ssd.chunk_cb_bf16_q256", chunk_cb_kernel, _example_cb_args()),
    # the key-log2 form's kd (what ssd_forward launches before the bf16 chunk scan, attempt 23)
    KernelSpec("ssd.key_log2_q256", key_log2_kernel, _example_key_log2_args()),
    KernelSpec("ssd.chunk_scan_cb_bf16_q256", chunk_scan_cb_kernel, _example_args()),
    KernelSpec("ssd.chunk_scan_cb_bf16_q256_hb2", chunk_scan_cb_kernel, _example_args(heads=2)),
    KernelSpec("ssd.chunk_scan_cb_bf16_q256_factored", chunk_scan_cb_kernel, _example_args(factored=True)),
    KernelSpec("ssd.chunk_scan_cb_chunk_bf16_q256", chunk_scan_cb_chunk_kernel,
               _example_args(whole_chunk=True)),
    KernelSpec("ssd.chunk_scan_cb_chunk_carry_bf16_q256", chunk_scan_cb_chunk_kernel,
               _example_args(l=1100, whole_chunk=True, segments=2, cb_dtype=torch.bfloat16)),
    KernelSpec("ssd.chunk_scan_cb_f32_q64", chunk_scan_cb_kernel,
               _example_args(Q=64, p=48, n=80, g=2, h=4, dtype=torch.float32)),
    # what ssd_forward launches for large bf16 problems (configs.FAST_16BIT_CB: the chunk kernel, bf16 C Bᵀ)
    KernelSpec("ssd.fast_bf16_cb.chunk_scan",
               hinted(chunk_scan_cb_chunk_kernel, *FAST_16BIT_CB.scan_hints),
               _example_args(heads=FAST_16BIT_CB.scan_heads, cb_dtype=torch.bfloat16, whole_chunk=True,
                             factored=FAST_16BIT_CB.scan_factored)),
    KernelSpec("ssd.fast_bf16_cb.chunk_cb", chunk_cb_kernel, _example_cb_args(cb_dtype=torch.bfloat16)),
    # ... at chunk size 128 (configs.FAST_BF16_Q128: the whole-chunk scan unrolled for full chunks)
    KernelSpec("ssd.fast_bf16_q128.chunk_scan",
               hinted(chunk_scan_cb_chunk_kernel, *FAST_BF16_Q128.scan_hints),
               _example_args(Q=128, g=2, heads=FAST_BF16_Q128.scan_heads, cb_dtype=torch.bfloat16,
                             whole_chunk=True, unroll=FAST_BF16_Q128.scan_unroll,
                             factored=FAST_BF16_Q128.scan_factored)),
    # ... key-major in groups of 2 row tiles (attempt 25; not shipped: SSDConfig.scan_row_group)
    KernelSpec("ssd.chunk_scan_cb_chunk_row_group2_bf16_q256", hinted(chunk_scan_cb_chunk_kernel, 2),
               _example_args(heads=1, cb_dtype=torch.bfloat16, whole_chunk=True, factored=KEY_LOG2,
                             row_group=2)),
    # ... for few (batch, head) pairs and long sequences: the chunk scan adding the segment carry, occupancy 3
    KernelSpec("ssd.long_bf16.chunk_scan", hinted(chunk_scan_cb_chunk_kernel, *LONG_BF16.scan_hints),
               _example_args(l=2100, heads=LONG_BF16.scan_heads, cb_dtype=torch.bfloat16, whole_chunk=True,
                             segments=LONG_BF16.segments)),
]
