"""C Bᵀ once per (chunk, group), and the key-log2 form kd: the two small kernels before the chunk scan.

The taught scan computes C Bᵀ inside every block. But C Bᵀ depends on the chunk and the group, not on the
head: with one head per block every head of a group recomputes the same (Q, Q) matrix, and at Mamba-2's
n = 128, p = 64 that is half of the scan's tensor-core work. ``chunk_cb_kernel`` computes it once, as
mamba_ssm does (its ``bmm_chunk_fwd``); the scan then reads a (TM, TK) tile of it per key step instead of
loading a (TK, n) tile of B and multiplying. Stored in bfloat16 (``ChunkScan(cb_dtype=torch.bfloat16)``) it
halves the scan's largest reads: the scan rounds C Bᵀ · decay · dt to x's dtype for its mma anyway.

``key_log2_kernel`` rewrites dt_out as kd = dA_cs · log2(e) − log2(dt) for the scan's ``Decay.KEY_LOG2``
when the state stage did not store it (``store_kd``).
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ..kernels._host import LaunchPlan, allocate, cdiv, next_power_of_two, placeholder
from ..runtime.launch import launch
from .state_fused import key_log2

__all__ = ["KEY_LOG2_ROWS", "chunk_cb_kernel", "chunk_cb_plan", "key_log2_kernel", "launch_chunk_cb",
           "launch_chunk_cb_both", "launch_key_log2"]

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def chunk_cb_kernel(C, B, CB, CBt, Q: ct.Constant[int], TM: ct.Constant[int], TK: ct.Constant[int],
                    NS: ct.Constant[int], TRANSPOSED: ct.Constant[bool]):
    """C, B (b, l, g, n) -> CB (b, nchunks, g, Q, Q): CB[b, c, g, m, k] = C_{cQ+m} · B_{cQ+k}, accumulated in
    float32 and stored in CB's dtype. Writes only the (TM, TK) tiles the scan reads: key tiles up to the one
    holding the row tile's last row (causality), none past the sequence end. Grid (Q/TM, b · nchunks, g).
    With ``TRANSPOSED`` (the fast backward, TM = TK) also CBt, each tile built transposed, keys as rows:
    CBt[k, m] = B_k · C_m (its kernel 3 multiplies by it)."""
    i_m = ct.bid(0)
    pid_bc = ct.bid(1)
    g = ct.bid(2)
    nchunks = CB.shape[1]
    b, c = pid_bc // nchunks, pid_bc % nchunks
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
            if TRANSPOSED:
                CB_km = ct.mma(B_k, ct.transpose(C_m), ct.zeros((TK, TM), dtype=ct.float32))
                ct.store(CBt, (b, c, g, kt, i_m), CB_km.astype(CBt.dtype).reshape((1, 1, 1, TK, TM)))


@ct.kernel
def key_log2_kernel(dt_out, dA_cumsum, kd, TR: ct.Constant[int], Q: ct.Constant[int]):
    """dt_out, dA_cumsum (R, Q) float32 (the (b, h, nchunks, Q) intermediates as rows) -> kd (R, Q) float32:
    kd = dA_cumsum · log2(e) - log2(dt_out) (+inf where dt = 0). One block per TR rows; dt >= 0 only."""
    i = ct.bid(0)
    dt = ct.load(dt_out, (i, 0), shape=(TR, Q), padding_mode=ZERO)
    a = ct.load(dA_cumsum, (i, 0), shape=(TR, Q), padding_mode=ZERO)
    ct.store(kd, (i, 0), key_log2(a, dt))


#: rows of (b, h, nchunks, Q) per key_log2_kernel block
KEY_LOG2_ROWS = 16


@functools.lru_cache(maxsize=256)
def chunk_cb_plan(b: int, l: int, g: int, n: int, Q: int, TM: int, TK: int) -> LaunchPlan:
    """Grid of :data:`chunk_cb_kernel` for the scan's (TM, TK) tiles: one block per (row tile, b·chunk, g)."""
    return LaunchPlan((Q // TM, b * cdiv(l, Q), g), {"Q": Q, "TM": TM, "TK": TK, "NS": next_power_of_two(n)})


def launch_chunk_cb(C, B, Q, TM, TK, backend, poison=False, cb_dtype=torch.float32):
    """Allocate CB (b, nchunks, g, Q, Q) in ``cb_dtype`` and launch :data:`chunk_cb_kernel`."""
    b, l, g, n = C.shape
    CB = allocate((b, cdiv(l, Q), g, Q, Q), cb_dtype, C.device, poison)
    plan = chunk_cb_plan(b, l, g, n, Q, TM, TK)
    t = plan.tiles
    launch(chunk_cb_kernel, plan.grid,
           (C, B, CB, placeholder(C.device, cb_dtype, 5), Q, t["TM"], t["TK"], t["NS"], False), backend)
    return CB


def launch_chunk_cb_both(C, B, CB, CBt, T, backend):
    """:data:`chunk_cb_kernel` at (T, T) tiles into float32 CB and CBt (b, nchunks, g, Q, Q): C Bᵀ and its
    transpose, each tile of the causal triangle computed in both orientations (the fast backward's)."""
    b, l, g, n = C.shape
    Q = CB.shape[-1]
    plan = chunk_cb_plan(b, l, g, n, Q, T, T)
    launch(chunk_cb_kernel, plan.grid, (C, B, CB, CBt, Q, T, T, plan.tiles["NS"], True), backend)


def launch_key_log2(dt_out, dA_cumsum, backend, poison=False):
    """kd (b, h, nchunks, Q) float32 from dt_out and dA_cumsum by :data:`key_log2_kernel` (dt >= 0 only)."""
    Q = dt_out.shape[-1]
    kd = allocate(dt_out.shape, torch.float32, dt_out.device, poison)
    rows = dt_out.numel() // Q
    launch(key_log2_kernel, (cdiv(rows, KEY_LOG2_ROWS),),
           (dt_out.view(rows, Q), dA_cumsum.view(rows, Q), kd.view(rows, Q), KEY_LOG2_ROWS, Q), backend)
    return kd
