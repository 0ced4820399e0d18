"""Backward kernel 3 for the heads of a group: ``chunk_bwd_dx_heads_kernel`` and its launch.

The taught kernel 3 (``kernels/bwd_chunk.py``) runs one head per block and rebuilds C Bᵀ in every block.
Here a block walks ``HPB`` heads of one group, reads the transposed C Bᵀ tiles that ``chunk_cb_kernel``
computed once per (chunk, group), and adds the heads' dB into one float32 tile that it stores once: the
host then sums h / (g · HPB) partial sums per group instead of h / g. Per head the body is kernel 3's:
the same helpers (``key_tile_grads``, ``added_state_grads``, ``skip_terms``) in the same order. It also sums
dy ∘ x per tile for dD, which the taught path leaves to the host. With packed rows (``HAS_SEQ_IDX``,
``fast/resets.py``) it masks every pair (m, k) of two sequences, and only the keys of the chunk's last
sequence, the only ones in the state the chunk passes on, get a gradient through it.

    grid = (Q / T,  b · nchunks,  h / HPB)
"""

from __future__ import annotations

import cuda.tile as ct
import torch

from ..kernels._host import placeholder
from ..kernels.bwd_chunk import (
    added_state_grads,
    chunk_block,
    chunk_bwd_plan,
    decay_tile_transposed,
    example_chunk_inputs,
    key_tile_grads,
    load_positions,
    load_rows,
    skip_terms,
)
from ..kernels.chunk_scan import D_NONE, D_PER_CHANNEL, D_PER_HEAD, d_mode
from ..kernels.chunk_state import LOG2E
from ..runtime.launch import launch
from ..runtime.specs import KernelSpec
from .resets import NO_CARRY, chunk_end_keys, seq_tile

__all__ = ["SPECS", "chunk_bwd_dx_heads_kernel", "heads_block", "launch_dx_heads", "load_cb"]

ZERO = ct.PaddingMode.ZERO


@ct.function
def load_cb(CB, b, c, g, i, j, T):
    """Tile (i, j) of a (b, nchunks, g, Q, Q) C Bᵀ buffer: a (T, T) float32 tile."""
    return ct.load(CB, (b, c, g, i, j), shape=(1, 1, 1, T, T)).reshape((T, T))


@ct.function
def heads_block(x, dA_cumsum, heads_per_group, HPB, Q, T):
    """A heads block's place on the (Q / T, b · nchunks, h / HPB) grid: (tile of the chunk, batch, chunk,
    head split, group, sequence length, the tile's index along l in units of T)."""
    t, b, c, split = chunk_block(dA_cumsum.shape[2])      # heads split·HPB .. split·HPB + HPB - 1
    g = (split * HPB) // heads_per_group
    seqlen = x.shape[1]
    return t, b, c, split, g, seqlen, c * (Q // T) + t


@ct.kernel
def chunk_bwd_dx_heads_kernel(x, dy, dt_out, dA_cumsum, C, B, CBt, dstates, D,   # inputs
                              seq_idx,                                           # packed rows
                              dx, dB, ddt, da, da_last, dD,                      # outputs
                              heads_per_group: int, HPB: int,
                              Q: ct.Constant[int], T: ct.Constant[int], PP: ct.Constant[int],
                              NS: ct.Constant[int], D_MODE: ct.Constant[int], HAS_SEQ_IDX: ct.Constant[bool]):
    """Kernel 3 for HPB heads of one group, one block per T keys: dx (b, l, h, p) in x's dtype; ddt, da,
    da_last (b, h, nchunks, Q) float32 per head; dB (b, l, h / HPB, n) float32, the sum over the block's
    heads; with D, dD (b, l / T, h, p) float32: each tile's sum of dy ∘ x over its T positions.
    HAS_SEQ_IDX: seq_idx (b, l) int32 packs sequences in a row; without it, an unused placeholder."""
    kt, b, c, split, g, seqlen, k_tile = heads_block(x, dA_cumsum, heads_per_group, HPB, Q, T)

    if k_tile * T < seqlen:
        k_pos = kt * T + ct.arange(T, dtype=ct.int32)
        if HAS_SEQ_IDX:  # the keys' sequences; the keys in the state the chunk passes on: its last sequence's
            seq_k = seq_tile(seq_idx, b, k_tile, T)
            passed_on = chunk_end_keys(seq_k, seq_idx, b, c, Q)
        n_m = min(Q // T, ct.cdiv(seqlen - c * Q, T))
        acc_dB = ct.zeros((T, NS), dtype=ct.float32)            # dB of the group, summed over the heads
        for hh in range(HPB):
            h = split * HPB + hh
            x_k = load_rows(x, b, k_tile, h, T, PP).astype(x.dtype)
            a_k = load_positions(dA_cumsum, b, h, c, kt, T) * LOG2E
            dt_k = load_positions(dt_out, b, h, c, kt, T)

            # 1. intra-chunk, rows m >= k: C Bᵀ read, dy xᵀ built, both transposed (keys as rows)
            acc_dx = ct.zeros((T, PP), dtype=ct.float32)
            ddt_k = ct.zeros((T,), dtype=ct.float32)
            for mt in range(kt, n_m):
                m_tile = c * (Q // T) + mt
                dy_m = load_rows(dy, b, m_tile, h, T, PP).astype(x.dtype)
                a_m = load_positions(dA_cumsum, b, h, c, mt, T) * LOG2E
                m_pos = mt * T + ct.arange(T, dtype=ct.int32)
                CBt_km = load_cb(CBt, b, c, g, kt, mt, T)
                dMt = ct.mma(x_k, ct.transpose(dy_m), ct.zeros((T, T), dtype=ct.float32))
                Lt = decay_tile_transposed(a_k, a_m, k_pos, m_pos)
                if HAS_SEQ_IDX:  # the block-diagonal mask of a packed row, keys as rows
                    Lt = ct.where(seq_k[:, None] == seq_tile(seq_idx, b, m_tile, T)[None, :], Lt, 0.0)
                C_m = load_rows(C, b, m_tile, g, T, NS).astype(x.dtype)
                acc_dx, acc_dB, ddt_k = key_tile_grads(CBt_km, dMt, Lt, dt_k, dy_m, C_m, acc_dx, acc_dB,
                                                       ddt_k)
            da_k = -ddt_k * dt_k

            # 2. through the state this chunk adds, with G = dL/ds; on a packed row the keys of sequences
            # that ended inside the chunk are not in it: their log2 decay to the chunk's end is -NO_CARRY
            # (1e30) below a_last, so exp2 flushes their decay, and every term of theirs, to 0
            B_k = load_rows(B, b, k_tile, g, T, NS).astype(x.dtype)
            a_k_end = a_k
            if HAS_SEQ_IDX:
                a_k_end = ct.where(passed_on, a_k, -NO_CARRY)
            acc_dx, acc_dB, ddt_k, da_k, wr_k = added_state_grads(
                dstates, dA_cumsum, b, c, h, a_k_end, dt_k, x_k, B_k, acc_dx, acc_dB, ddt_k, da_k, Q, T, PP,
                NS)

            # 3. the skip connection, and this tile's part of the gradient of D: dD = sum dy ∘ x
            if D_MODE != D_NONE:
                dy_k, D_h = skip_terms(dy, D, b, k_tile, h, T, PP, D_MODE)
                acc_dx = acc_dx + dy_k * D_h
                dD_k = ct.sum(dy_k * x_k.astype(ct.float32), axis=0)
                ct.store(dD, (b, k_tile, h, 0), dD_k.reshape((1, 1, 1, PP)))

            ct.store(dx, (b, k_tile, h, 0), acc_dx.astype(dx.dtype).reshape((1, T, 1, PP)))
            ct.store(ddt, (b, h, c, kt), ddt_k.reshape((1, 1, 1, T)))
            ct.store(da, (b, h, c, kt), da_k.reshape((1, 1, 1, T)))
            ct.store(da_last, (b, h, c, kt), wr_k.reshape((1, 1, 1, T)))
        ct.store(dB, (b, k_tile, split, 0), acc_dB.reshape((1, T, 1, NS)))
    else:
        zeros = ct.zeros((1, 1, 1, T), dtype=ct.float32)
        for hh in range(HPB):
            h = split * HPB + hh
            ct.store(ddt, (b, h, c, kt), zeros)
            ct.store(da, (b, h, c, kt), zeros)
            ct.store(da_last, (b, h, c, kt), zeros)
            if D_MODE != D_NONE:
                ct.store(dD, (b, k_tile, h, 0), ct.zeros((1, 1, 1, PP), dtype=ct.float32))


def launch_dx_heads(work, dstates) -> None:
    """Launch :data:`chunk_bwd_dx_heads_kernel` for ``work`` (a
    :class:`~mamba2_tutorial.fast.bwd_chunk.ChunkBwdHeads`, its C Bᵀ computed) and ``dstates`` (the state
    stage's): on its plan, from its inputs (x, dy, dt_out, dA_cumsum, C, B), transposed C Bᵀ, D (or None)
    and packed rows, into its dx, dB partial sums, ddt, da of the keys, da_last and dD tiles."""
    x, C, D = work.inputs[0], work.inputs[4], work.D
    t = work.plan.tiles
    D_arg = D if D is not None else placeholder(x.device, torch.float32, 1)
    seq_idx, has_seq_idx = work.packed
    launch(chunk_bwd_dx_heads_kernel, work.plan.grid,
           (*work.inputs, work.CBt, dstates, D_arg, seq_idx, work.dx, work.dB, work.ddt, work.da_key,
            work.da_last, work.dD_tiles, x.shape[2] // C.shape[2], t["HPB"], t["Q"], t["T"], t["PP"], t["NS"],
            d_mode(D), has_seq_idx), work.backend, work.occupancy)


def _example_args(dtype, Q, D_MODE=D_PER_HEAD, b=2, l=300, h=4, p=48, g=2, n=80, hpb=2, packed=False):
    def make():
        e = example_chunk_inputs(dtype, Q, D_MODE, b, l, h, p, g, n)
        plan = chunk_bwd_plan(b, l, h, p, n, Q, dtype)            # the taught tiles, h / hpb blocks of heads
        grid = (*plan.grid[:2], h // hpb)
        t, per_pos = plan.tiles, e["per_pos"]
        inputs = tuple(e[k] for k in ("x", "dy", "dt_out", "dA_cumsum", "C", "B"))
        CBt = torch.randn(b, per_pos.shape[2], g, Q, Q)
        seq_idx = (torch.arange(l, dtype=torch.int32) // 70).expand(b, l).contiguous() if packed else (
            torch.zeros(1, 1, dtype=torch.int32))
        return grid, (*inputs, CBt, e["dstates"], e["D"], seq_idx, torch.empty_like(e["x"]),
                      torch.empty(b, l, h // hpb, n), per_pos, per_pos.clone(), per_pos.clone(),
                      torch.empty(b, per_pos.shape[2] * (Q // t["T"]), h, t["PP"]),
                      h // g, hpb, Q, t["T"], t["PP"], t["NS"], D_MODE, packed)

    return make


SPECS: list[KernelSpec] = [
    KernelSpec("fast.bwd_dx_heads_bf16_q256", chunk_bwd_dx_heads_kernel,
               _example_args(torch.bfloat16, 256, D_NONE, p=64, n=128, g=1)),
    KernelSpec("fast.bwd_dx_heads_f32_q64_dchannel", chunk_bwd_dx_heads_kernel,
               _example_args(torch.float32, 64, D_PER_CHANNEL)),
    KernelSpec("fast.bwd_dx_heads_bf16_q256_packed", chunk_bwd_dx_heads_kernel,
               _example_args(torch.bfloat16, 256, D_PER_HEAD, p=64, n=128, g=1, packed=True)),
]
