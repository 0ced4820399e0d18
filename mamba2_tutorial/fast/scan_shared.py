"""The shared scan: the taught chunk scan's results with 2-D mmas only, C Bᵀ shared by a block's heads.

Per key tile, C Bᵀ is ONE (TM, NS) @ (NS, TK) mma; then each of the block's HB heads (unrolled,
``ct.static_iter``) applies its own decay and dt and accumulates P @ x into its own 2-D (TM, TP) float32
accumulator. Every mma is 2-D, which compiles to wgmma on sm_90. The shipped configs run it with one head per
block at occupancy 3 for small problems, where one launch fewer (no separate C Bᵀ kernel) matters more than
the recomputed C Bᵀ.
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ..kernels._host import LaunchPlan, allocate, cdiv, placeholder
from ..kernels.chunk_scan import chunk_scan_tiles, d_mode, store_output
from ..kernels.chunk_state import LOG2E
from ..runtime.launch import launch
from ._scan_parts import inter_chunk_heads, rows_only
from .config import SharedScan
from .plan import ScanCall
from .resets import entering_rows, seq_idx_arg, seq_tile

__all__ = ["chunk_scan_shared_kernel", "launch_scan_shared", "scan_shared_plan"]

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def chunk_scan_shared_kernel(x, z, dt_out, dA_cumsum, C, B, chunk_init_states, D,   # inputs
                             seq_idx,                                                 # packed rows
                             out,                                                     # output
                             heads_per_group: int,
                             Q: ct.Constant[int], TM: ct.Constant[int], TK: ct.Constant[int],
                             TP: ct.Constant[int], NS: ct.Constant[int], HB: ct.Constant[int],
                             D_MODE: ct.Constant[int], HAS_Z: ct.Constant[bool],
                             HAS_SEQ_IDX: ct.Constant[bool]):
    """``chunk_scan_kernel``'s arguments and results; grid (Q/TM · cdiv(p, TP), b · nchunks, h / HB).
    HAS_SEQ_IDX: seq_idx (b, l) int32 packs sequences in a row (``fast/resets.py``): the entering state
    reaches only the rows of its sequence, a row only the keys of its own; without it, a placeholder."""
    pid_mp, pid_bc, hb = ct.bid(0), ct.bid(1), ct.bid(2)
    nchunks = dA_cumsum.shape[2]
    b, c = pid_bc // nchunks, pid_bc % nchunks                  # batch, chunk
    p_tiles = ct.cdiv(x.shape[3], TP)
    i_m, i_p = pid_mp // p_tiles, pid_mp % p_tiles              # row tile, head-dim tile
    g = (hb * HB) // heads_per_group
    seqlen = x.shape[1]
    m_tile = c * (Q // TM) + i_m

    if m_tile * TM < seqlen:
        C_m = ct.load(C, (b, m_tile, g, 0), shape=(1, TM, 1, NS), padding_mode=ZERO).reshape((TM, NS))
        C_m = C_m.astype(x.dtype)
        m_pos = i_m * TM + ct.arange(TM, dtype=ct.int32)
        n_k = min(((i_m + 1) * TM) // TK, ct.cdiv(seqlen - c * Q, TK))
        # 1. inter-chunk, head by head: acc_j = (C_m @ S_cᵀ) · exp(dA_cs_m); a_m = dA_cs_m · log2(e)
        accs, a_ms = inter_chunk_heads(C_m, x, dA_cumsum, chunk_init_states, b, c, hb, i_m, i_p,
                                       TM, TP, NS, HB)
        if HAS_SEQ_IDX:
            seq_m = seq_tile(seq_idx, b, m_tile, TM)
            accs = rows_only(accs, entering_rows(seq_m, seq_idx, b, c, Q), HB)
        # 2. intra-chunk: C Bᵀ once per key tile, then every head's masked, decayed P @ x
        for kt in range(n_k):
            k_tile = c * (Q // TK) + kt
            B_k = ct.load(B, (b, k_tile, g, 0), shape=(1, TK, 1, NS), padding_mode=ZERO).reshape((TK, NS))
            CB = ct.mma(C_m, ct.transpose(B_k.astype(x.dtype)), ct.zeros((TM, TK), dtype=ct.float32))
            k_pos = kt * TK + ct.arange(TK, dtype=ct.int32)
            causal = m_pos[:, None] >= k_pos[None, :]
            if HAS_SEQ_IDX:  # and the block-diagonal mask of a packed row
                causal = causal & (seq_m[:, None] == seq_tile(seq_idx, b, k_tile, TK)[None, :])
            new_accs = ()
            for j in ct.static_iter(range(HB)):
                h = hb * HB + j
                a_k = ct.load(dA_cumsum, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,)) * LOG2E
                dt_k = ct.load(dt_out, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,))
                x_k = ct.load(x, (b, k_tile, h, i_p), shape=(1, TK, 1, TP), padding_mode=ZERO)
                decay = ct.exp2(ct.minimum(a_ms[j][:, None] - a_k[None, :], 0.0), flush_to_zero=True)
                P = ct.where(causal, CB * decay * dt_k[None, :], 0.0)
                new_accs = new_accs + (ct.mma(P.astype(x.dtype), x_k.reshape((TK, TP)), accs[j]),)
            accs = new_accs
        # 3. epilogue per head
        for j in ct.static_iter(range(HB)):
            store_output(accs[j], x, z, D, out, b, m_tile, hb * HB + j, i_p, TM, TP, D_MODE, HAS_Z)


@functools.lru_cache(maxsize=256)
def scan_shared_plan(b: int, l: int, h: int, p: int, g: int, n: int, Q: int,
                     dtype: torch.dtype) -> LaunchPlan:
    """Grid and tiles of :data:`chunk_scan_shared_kernel` as :class:`~mamba2_tutorial.fast.config.SharedScan`
    runs it, one head per block (HB = 1): the taught scan's grid and tiles (the arguments of the taught
    ``chunk_scan_plan``)."""
    TM, TK, TP, NS = chunk_scan_tiles(Q, p, n, dtype)
    return LaunchPlan(((Q // TM) * cdiv(p, TP), b * cdiv(l, Q), h),
                      {"Q": Q, "TM": TM, "TK": TK, "TP": TP, "NS": NS, "HB": 1})


def launch_scan_shared(call: ScanCall, stage: SharedScan):
    """Allocate the output, launch :data:`chunk_scan_shared_kernel` (one head per block) at the ``stage``'s
    occupancy; no argument checks."""
    x, C, D, z = call.x, call.C, call.D, call.z
    b, l, h, p = x.shape
    g, n = C.shape[2], C.shape[3]
    Q = call.dA_cumsum.shape[3]
    device = x.device
    out = allocate((b, l, h, p), x.dtype, device, call.poison)
    plan = scan_shared_plan(b, l, h, p, g, n, Q, x.dtype)
    t = plan.tiles
    seq_idx, has_seq_idx = seq_idx_arg(call)
    args = (x, z if z is not None else placeholder(device, x.dtype, 4), call.dt_out, call.dA_cumsum, C,
            call.B, call.chunk_init_states, D if D is not None else placeholder(device, torch.float32, 1),
            seq_idx, out, h // g, Q, t["TM"], t["TK"], t["TP"], t["NS"], t["HB"], d_mode(D), z is not None,
            has_seq_idx)
    launch(chunk_scan_shared_kernel, plan.grid, args, call.backend, stage.occupancy)
    return out
