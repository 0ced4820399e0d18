"""The whole-chunk scan: one block per (head, p tile, chunk) walks every row tile of the chunk, reading C Bᵀ.

The taught scan launches one block per (row tile, chunk, head): a chunk of 256 rows has 4 row tiles, and each
block loads the entering state S_c again and recomputes C Bᵀ. Here C Bᵀ comes from ``chunk_cb_kernel``
(``fast/chunk_cb.py``) and one block takes the whole chunk of one head: S_c is loaded once per chunk, and a
block walks Q/TM · (Q/TM + 1) / 2 key steps. The grid puts the heads first, (h, cdiv(p, TP), b · nchunks), so
the blocks running together are the heads of one chunk and share its C Bᵀ and C tiles through L2.

Per row tile m: the inter-chunk part, then the key tiles entirely before the rows (no causal mask), then the
diagonal tile (masked), then the epilogue. ``KEY_LOG2`` (``Decay.KEY_LOG2``, only when dt >= 0): dt_out holds
kd_k = dA_cs_k·log2(e) − log2(dt_k), and P = C Bᵀ ∘ exp2(a_m − kd_k): one subtraction and one exponential per
element, no dt multiply, no clamp (a masked entry's exponential may overflow; the mask's select discards it).
``UNROLL``: a chunk wholly inside the sequence runs its row and key tiles as one unrolled body (no loops);
the ragged last chunk keeps the loops. ``HAS_CARRY``: the state stage ran by segments (``fast/segments.py``),
and the inter-chunk part adds exp(seg_prefix[c]) · (C_m @ carry[s]ᵀ). ``STORE_STATES`` (training, with
``HAS_CARRY``): the backward needs the true state entering every chunk, so each block forms its tile of it,
S_c = L_c + exp(seg_prefix[c]) · K_s in float32 rounded once, stores it over the segment-local L_c (the block
is that tile's only reader) and multiplies C by it in one mma.
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ..kernels._host import LaunchPlan, allocate, cdiv, placeholder
from ..kernels.chunk_scan import chunk_scan_tiles, d_mode, store_output
from ..kernels.chunk_state import LOG2E
from ..runtime.launch import launch
from ._scan_parts import entering_state_T, inter_chunk_heads, rows_only
from .chunk_cb import launch_chunk_cb, launch_key_log2
from .config import ChunkScan
from .plan import Plan, ScanCall
from .resets import entering_rows, seq_gap, seq_idx_arg, seq_tile

__all__ = ["chunk_scan_chunk_kernel", "launch_scan_chunk", "scan_chunk_plan"]

ZERO = ct.PaddingMode.ZERO


def _key_tile(accs, a_ms, x, dt_out, dA_cumsum, CB, b, c, g, hb, i_m, i_p, kt, m_pos,
              Q, TM, TK, TP, HB, MASK, KEY_LOG2, seq_idx=None, seq_m=None, HAS_SEQ_IDX=False):
    """One key tile kt of the intra-chunk sum for the block's HB heads: acc_j += P_j @ x_kt, with
    P_j = CB[m, k] ∘ exp2(a_m - a_k) ∘ dt_k, or CB[m, k] ∘ exp2(a_m - kd_k) (KEY_LOG2); ∘ [k <= m] when
    MASK. With HAS_SEQ_IDX (seq_m (TM,): the rows' seq_idx) the block-diagonal mask [seq_m = seq_k] rides in
    the exponent (:func:`~mamba2_tutorial.fast.resets.seq_gap`): a ct.where on P spills the kernel."""
    k_tile = c * (Q // TK) + kt
    CB_mk = ct.load(CB, (b, c, g, i_m, kt), shape=(1, 1, 1, TM, TK)).reshape((TM, TK))
    CB_mk = CB_mk.astype(ct.float32)  # a no-op for a float32 CB; a bfloat16 CB is widened
    if MASK:
        k_pos = kt * TK + ct.arange(TK, dtype=ct.int32)
        causal = m_pos[:, None] >= k_pos[None, :]
    if HAS_SEQ_IDX:  # 0 within a sequence, <= -SEQ_GAP across a boundary
        gap = seq_gap(seq_m[:, None], seq_tile(seq_idx, b, k_tile, TK)[None, :])
    new_accs = ()
    for j in ct.static_iter(range(HB)):
        h = hb * HB + j
        x_k = ct.load(x, (b, k_tile, h, i_p), shape=(1, TK, 1, TP), padding_mode=ZERO)
        if KEY_LOG2:  # dt_out holds kd_k = a_k - log2(dt_k): exp2(a_m - kd_k) = decay · dt_k
            kd = ct.load(dt_out, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,))
            v = a_ms[j][:, None] - kd[None, :]
            P = CB_mk * ct.exp2(v + gap if HAS_SEQ_IDX else v, flush_to_zero=True)
        else:
            a_k = ct.load(dA_cumsum, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,)) * LOG2E
            dt_k = ct.load(dt_out, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,))
            v = ct.minimum(a_ms[j][:, None] - a_k[None, :], 0.0)
            decay = ct.exp2(v + gap if HAS_SEQ_IDX else v, flush_to_zero=True)
            P = CB_mk * decay * dt_k[None, :]
        if MASK:
            P = ct.where(causal, P, 0.0)
        new_accs = new_accs + (ct.mma(P.astype(x.dtype), x_k.reshape((TK, TP)), accs[j]),)
    return new_accs


def _row_tile(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D, out, b, c, g, hb, i_m, m_tile, i_p,
              seqlen, Q, TM, TK, TP, NS, HB, D_MODE, HAS_Z, KEY_LOG2, S_cTs, carries, STATIC=False,
              seq_idx=None, HAS_SEQ_IDX=False):
    """Row tile i_m of chunk c for the HB heads of a block: the inter-chunk part, the key tiles up to the
    diagonal (those entirely before the rows without the causal mask), the epilogue and the store.
    STATIC: i_m is a compile-time constant of a chunk wholly inside the sequence; the key loops unroll.
    HAS_SEQ_IDX (packed rows): the entering state reaches only the rows of its sequence, and a row sees only
    the keys of its own."""
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
    seq_m = seq_tile(seq_idx, b, m_tile, TM) if HAS_SEQ_IDX else None
    if HAS_SEQ_IDX:
        accs = rows_only(accs, entering_rows(seq_m, seq_idx, b, c, Q), HB)
    # 2. intra-chunk: key tiles entirely before this row tile (kt < n_full) need no causal mask; the diagonal
    # tile(s) do
    n_full = min((i_m * TM) // TK, n_k)
    if STATIC:
        for kt in ct.static_iter(range(n_full)):
            accs = _key_tile(accs, a_ms, x, dt_out, dA_cumsum, CB, b, c, g, hb, i_m, i_p, kt, m_pos,
                             Q, TM, TK, TP, HB, False, KEY_LOG2, seq_idx, seq_m, HAS_SEQ_IDX)
        for kt in ct.static_iter(range(n_full, n_k)):
            accs = _key_tile(accs, a_ms, x, dt_out, dA_cumsum, CB, b, c, g, hb, i_m, i_p, kt, m_pos,
                             Q, TM, TK, TP, HB, True, KEY_LOG2, seq_idx, seq_m, HAS_SEQ_IDX)
    else:
        for kt in range(n_full):
            accs = _key_tile(accs, a_ms, x, dt_out, dA_cumsum, CB, b, c, g, hb, i_m, i_p, kt, m_pos,
                             Q, TM, TK, TP, HB, False, KEY_LOG2, seq_idx, seq_m, HAS_SEQ_IDX)
        for kt in range(n_full, n_k):
            accs = _key_tile(accs, a_ms, x, dt_out, dA_cumsum, CB, b, c, g, hb, i_m, i_p, kt, m_pos,
                             Q, TM, TK, TP, HB, True, KEY_LOG2, seq_idx, seq_m, HAS_SEQ_IDX)
    # 3. epilogue per head
    for j in ct.static_iter(range(HB)):
        store_output(accs[j], x, z, D, out, b, m_tile, hb * HB + j, i_p, TM, TP, D_MODE, HAS_Z)


def true_entering_state_T(x, chunk_init_states, carry, seg_prefix, b, c, h, i_p, TP, NS, cps):
    """S_cᵀ (NS, TP) in x's dtype, with S_c = L_c + exp(seg_prefix[c]) · K_s computed in float32, rounded
    once to chunk_init_states' dtype and stored over the segment-local L_c (tile i_p of head h, chunk c)."""
    L_c = ct.load(chunk_init_states, (b, c, h, i_p, 0), shape=(1, 1, 1, TP, NS), padding_mode=ZERO)
    K_s = ct.load(carry, (b, c // cps, h, i_p, 0), shape=(1, 1, 1, TP, NS), padding_mode=ZERO)
    decay = ct.exp2(ct.load(seg_prefix, (b, h, c), shape=()) * LOG2E, flush_to_zero=True)
    S_c = (L_c.astype(ct.float32) + decay * K_s.astype(ct.float32)).astype(chunk_init_states.dtype)
    ct.store(chunk_init_states, (b, c, h, i_p, 0), S_c)
    return ct.transpose(S_c.reshape((TP, NS)).astype(x.dtype))


def segment_carry_T(x, carry, seg_prefix, b, c, h, i_p, TP, NS, cps):
    """(K_sᵀ (NS, TP) in x's dtype, exp(seg_prefix[c]) (1, 1)) for the segmented state stage: the state
    entering chunk c's segment and its decay to chunk c, so that S_c = L_c + exp(seg_prefix[c]) · K_s."""
    K_s = entering_state_T(x, carry, b, c // cps, h, i_p, TP, NS)
    decay = ct.exp2(ct.load(seg_prefix, (b, h, c), shape=()) * LOG2E, flush_to_zero=True)
    return K_s, decay


@ct.kernel
def chunk_scan_chunk_kernel(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D,   # inputs
                            carry, seg_prefix,                                        # segmented inputs
                            seq_idx,                                                  # packed rows
                            out,                                                      # output
                            heads_per_group: int, chunks_per_segment: int,
                            Q: ct.Constant[int], TM: ct.Constant[int], TK: ct.Constant[int],
                            TP: ct.Constant[int], NS: ct.Constant[int], HB: ct.Constant[int],
                            D_MODE: ct.Constant[int], HAS_Z: ct.Constant[bool], KEY_LOG2: ct.Constant[bool],
                            HAS_CARRY: ct.Constant[bool], UNROLL: ct.Constant[bool],
                            STORE_STATES: ct.Constant[bool], HAS_SEQ_IDX: ct.Constant[bool]):
    """The taught scan's results, with CB (b, nchunks, g, Q, Q) from chunk_cb_kernel in place of B. Grid
    (h / HB, cdiv(p, TP), b · nchunks). Without HAS_CARRY, ``carry``, ``seg_prefix`` and
    ``chunks_per_segment`` are unused placeholders. STORE_STATES (with HAS_CARRY): chunk_init_states holds
    the segment-local states and leaves with the true ones. HAS_SEQ_IDX: seq_idx (b, l) int32 packs
    sequences in a row (``fast/resets.py``); without it, an unused placeholder."""
    hb = ct.bid(0)
    i_p = ct.bid(1)
    pid_bc = ct.bid(2)
    nchunks = dA_cumsum.shape[2]
    b, c = pid_bc // nchunks, pid_bc % nchunks
    g = (hb * HB) // heads_per_group
    seqlen = x.shape[1]
    S_cTs = ()
    carries = () if HAS_CARRY and not STORE_STATES else None
    for j in ct.static_iter(range(HB)):
        h = hb * HB + j
        if HAS_CARRY and STORE_STATES:
            S_cTs = S_cTs + (true_entering_state_T(x, chunk_init_states, carry, seg_prefix, b, c, h, i_p, TP,
                                                   NS, chunks_per_segment),)
        else:
            S_cTs = S_cTs + (entering_state_T(x, chunk_init_states, b, c, h, i_p, TP, NS),)
        if carries is not None:
            carries = carries + (segment_carry_T(x, carry, seg_prefix, b, c, h, i_p, TP, NS,
                                                 chunks_per_segment),)
    if UNROLL and not HAS_SEQ_IDX and (c + 1) * Q <= seqlen:  # packed rows unrolled double the registers
        for i_m in ct.static_iter(range(Q // TM)):
            _row_tile(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D, out, b, c, g, hb, i_m,
                      c * (Q // TM) + i_m, i_p, seqlen, Q, TM, TK, TP, NS, HB, D_MODE, HAS_Z, KEY_LOG2, S_cTs,
                      carries, True, seq_idx, HAS_SEQ_IDX)
    else:
        n_rows = min(Q // TM, ct.cdiv(seqlen - c * Q, TM))  # row tiles of this chunk inside the sequence
        for i_m in range(n_rows):
            _row_tile(x, z, dt_out, dA_cumsum, C, CB, chunk_init_states, D, out, b, c, g, hb, i_m,
                      c * (Q // TM) + i_m, i_p, seqlen, Q, TM, TK, TP, NS, HB, D_MODE, HAS_Z, KEY_LOG2, S_cTs,
                      carries, False, seq_idx, HAS_SEQ_IDX)


@functools.lru_cache(maxsize=256)
def scan_chunk_plan(b: int, l: int, h: int, p: int, g: int, n: int, Q: int, dtype: torch.dtype) -> LaunchPlan:
    """Grid and tiles of :data:`chunk_scan_chunk_kernel` (heads first, one head per block); the taught
    scan's tiles."""
    TM, TK, TP, NS = chunk_scan_tiles(Q, p, n, dtype)
    return LaunchPlan((h, cdiv(p, TP), b * cdiv(l, Q)),
                      {"Q": Q, "TM": TM, "TK": TK, "TP": TP, "NS": NS, "HB": 1})


def launch_scan_chunk(call: ScanCall, plan: Plan):
    """C Bᵀ (:data:`~mamba2_tutorial.fast.chunk_cb.chunk_cb_kernel`) in the plan's ``cb_dtype``, kd if the
    plan's ``key_log2`` and not its ``store_kd`` (the state stage stored it), then
    :data:`chunk_scan_chunk_kernel` at the plan's ChunkScan ``occupancy`` and ``unroll``; no argument
    checks. ``call.carry``: the :class:`~mamba2_tutorial.fast.segments.SegmentCarry` of a segmented state
    stage; the plan's ``store_states`` (with a carry): chunk_init_states' segment-local states are
    overwritten with the true ones (what training keeps for the backward)."""
    carry = call.carry
    if plan.store_states and carry is None:
        raise ValueError("store_states needs the carry of a segmented state stage")
    if not isinstance(plan.scan, ChunkScan) or plan.cb_dtype is None:
        raise ValueError(f"launch_scan_chunk needs a plan resolved for ChunkScan, got {plan.scan!r} with "
                         f"cb_dtype {plan.cb_dtype!r}")
    x, C, D, z, backend, poison = call.x, call.C, call.D, call.z, call.backend, call.poison
    b, l, h, p = x.shape
    g, n = C.shape[2], C.shape[3]
    Q = call.dA_cumsum.shape[3]
    device = x.device
    tiles = scan_chunk_plan(b, l, h, p, g, n, Q, x.dtype)
    t = tiles.tiles
    CB = launch_chunk_cb(C, call.B, Q, t["TM"], t["TK"], backend, poison, plan.cb_dtype)
    dt_out = call.dt_out
    if plan.key_log2 and not plan.store_kd:
        dt_out = launch_key_log2(dt_out, call.dA_cumsum, backend, poison)
    out = allocate((b, l, h, p), x.dtype, device, poison)
    if carry is None:
        segmented, cps = (placeholder(device, x.dtype, 5), placeholder(device, torch.float32, 3)), 1
    else:
        segmented, cps = (carry.carry, carry.seg_prefix), carry.chunks_per_segment
    seq_idx, has_seq_idx = seq_idx_arg(call)
    args = (x, z if z is not None else placeholder(device, x.dtype, 4), dt_out, call.dA_cumsum, C, CB,
            call.chunk_init_states, D if D is not None else placeholder(device, torch.float32, 1), *segmented,
            seq_idx, out, h // g, cps, Q, t["TM"], t["TK"], t["TP"], t["NS"], t["HB"], d_mode(D),
            z is not None, plan.key_log2, carry is not None, plan.scan.unroll, plan.store_states, has_seq_idx)
    launch(chunk_scan_chunk_kernel, tiles.grid, args, backend, plan.scan.occupancy)
    return out
