"""Backward kernel 4 for the heads of a group: ``chunk_bwd_dc_heads_kernel`` and its launch.

The taught kernel 4 (``kernels/bwd_chunk.py``) runs one head per block and rebuilds C Bᵀ in every block.
Here a block walks ``HPB`` heads of one group, reads the C Bᵀ tiles that ``chunk_cb_kernel`` computed once
per (chunk, group), and adds the heads' dC into one float32 tile that it stores once. It needs no state
gradient: the fast backward runs it beside the state stage, on a second stream (``fast/backward.py``).
With packed rows (``HAS_SEQ_IDX``, ``fast/resets.py``) it masks every pair (m, k) of two sequences, and the
entering state reaches only the rows of its own sequence, as in the forward's scan.

    grid = (Q / T,  b · nchunks,  h / HPB)
"""

from __future__ import annotations

import cuda.tile as ct
import torch

from ..kernels.bwd_chunk import (
    chunk_bwd_plan,
    decay_tile,
    example_chunk_inputs,
    load_positions,
    load_rows,
)
from ..kernels.chunk_state import LOG2E
from ..runtime.launch import launch
from ..runtime.specs import KernelSpec
from .bwd_dx_heads import heads_block, load_cb
from .resets import entering_seq, packed_decay_tile, seq_tile

__all__ = ["SPECS", "chunk_bwd_dc_heads_kernel", "launch_dc_heads"]

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def chunk_bwd_dc_heads_kernel(x, dy, dt_out, dA_cumsum, C, B, CB, chunk_init_states,   # inputs
                              seq_idx,                                                 # packed rows
                              dC, da,                                                  # outputs
                              heads_per_group: int, HPB: int,
                              Q: ct.Constant[int], T: ct.Constant[int], PP: ct.Constant[int],
                              NS: ct.Constant[int], HAS_SEQ_IDX: ct.Constant[bool]):
    """Kernel 4 for HPB heads of one group, one block per T rows: da (b, h, nchunks, Q) float32 per head;
    dC (b, l, h / HPB, n) float32, the sum over the block's heads. HAS_SEQ_IDX: seq_idx (b, l) int32 packs
    sequences in a row; without it, an unused placeholder."""
    mt, b, c, split, g, seqlen, m_tile = heads_block(x, dA_cumsum, heads_per_group, HPB, Q, T)

    if m_tile * T < seqlen:
        m_pos = mt * T + ct.arange(T, dtype=ct.int32)
        if HAS_SEQ_IDX:  # the rows' sequences; the rows that read the entering state: those of its sequence
            seq_m = seq_tile(seq_idx, b, m_tile, T)
            entering_m = seq_m == entering_seq(seq_idx, b, c, Q)
        n_k = min(mt + 1, ct.cdiv(seqlen - c * Q, T))
        acc_dC = ct.zeros((T, NS), dtype=ct.float32)            # dC of the group, summed over the heads
        for hh in range(HPB):
            h = split * HPB + hh
            dy_m = load_rows(dy, b, m_tile, h, T, PP).astype(x.dtype)
            a_m = load_positions(dA_cumsum, b, h, c, mt, T) * LOG2E
            da_m = ct.zeros((T,), dtype=ct.float32)

            # 1. intra-chunk, keys k <= m: C Bᵀ read, dy xᵀ built
            for kt in range(n_k):
                k_tile = c * (Q // T) + kt
                x_k = load_rows(x, b, k_tile, h, T, PP).astype(x.dtype)
                a_k = load_positions(dA_cumsum, b, h, c, kt, T) * LOG2E
                dt_k = load_positions(dt_out, b, h, c, kt, T)
                k_pos = kt * T + ct.arange(T, dtype=ct.int32)
                CB_mk = load_cb(CB, b, c, g, mt, kt, T)
                dM = ct.mma(dy_m, ct.transpose(x_k), ct.zeros((T, T), dtype=ct.float32))
                if HAS_SEQ_IDX:  # the block-diagonal mask of a packed row, in the decay's exponent
                    L = packed_decay_tile(a_m, a_k, m_pos, k_pos, seq_m, seq_tile(seq_idx, b, k_tile, T))
                else:
                    L = decay_tile(a_m, a_k, m_pos, k_pos)
                dCB = dM * L * dt_k[None, :]
                da_m = da_m + ct.sum(dCB * CB_mk, axis=1)
                B_k = load_rows(B, b, k_tile, g, T, NS).astype(x.dtype)
                acc_dC = ct.mma(dCB.astype(x.dtype), B_k, acc_dC)

            # 2. through the state entering the chunk (after the loop: one (T, n) float32 tile less in it)
            S = ct.load(chunk_init_states, (b, c, h, 0, 0), shape=(1, 1, 1, PP, NS), padding_mode=ZERO)
            S = S.reshape((PP, NS)).astype(x.dtype)
            dC_S = ct.mma(dy_m, S, ct.zeros((T, NS), dtype=ct.float32))
            e_m = ct.exp2(a_m, flush_to_zero=True)
            if HAS_SEQ_IDX:
                e_m = ct.where(entering_m, e_m, 0.0)
            dC_S = dC_S * e_m[:, None]
            C_m = load_rows(C, b, m_tile, g, T, NS).astype(ct.float32)
            da_m = da_m + ct.sum(dC_S * C_m, axis=1)
            acc_dC = acc_dC + dC_S
            ct.store(da, (b, h, c, mt), da_m.reshape((1, 1, 1, T)))
        ct.store(dC, (b, m_tile, split, 0), acc_dC.reshape((1, T, 1, NS)))
    else:
        for hh in range(HPB):
            ct.store(da, (b, split * HPB + hh, c, mt), ct.zeros((1, 1, 1, T), dtype=ct.float32))


def launch_dc_heads(work) -> None:
    """Launch :data:`chunk_bwd_dc_heads_kernel` for ``work`` (a
    :class:`~mamba2_tutorial.fast.bwd_chunk.ChunkBwdHeads`, its C Bᵀ computed): on its plan, from its inputs
    (x, dy, dt_out, dA_cumsum, C, B), C Bᵀ, entering states and packed rows, into its dC partial sums and
    the da of the rows."""
    x, C = work.inputs[0], work.inputs[4]
    t = work.plan.tiles
    seq_idx, has_seq_idx = work.packed
    launch(chunk_bwd_dc_heads_kernel, work.plan.grid,
           (*work.inputs, work.CB, work.chunk_init_states, seq_idx, work.dC, work.da_row,
            x.shape[2] // C.shape[2], t["HPB"], t["Q"], t["T"], t["PP"], t["NS"], has_seq_idx), work.backend,
           work.occupancy)


def _example_args(dtype, Q, b=2, l=300, h=4, p=48, g=2, n=80, hpb=2, packed=False):
    def make():
        from ..kernels.chunk_scan import D_PER_HEAD
        e = example_chunk_inputs(dtype, Q, D_PER_HEAD, b, l, h, p, g, n)
        plan = chunk_bwd_plan(b, l, h, p, n, Q, dtype)            # the taught tiles, h / hpb blocks of heads
        grid = (*plan.grid[:2], h // hpb)
        t = plan.tiles
        inputs = tuple(e[k] for k in ("x", "dy", "dt_out", "dA_cumsum", "C", "B"))
        CB = torch.randn(b, e["per_pos"].shape[2], g, Q, Q)
        seq_idx = (torch.arange(l, dtype=torch.int32) // 70).expand(b, l).contiguous() if packed else (
            torch.zeros(1, 1, dtype=torch.int32))
        return grid, (*inputs, CB, e["S"], seq_idx, torch.empty(b, l, h // hpb, n), e["per_pos"],
                      h // g, hpb, Q, t["T"], t["PP"], t["NS"], packed)

    return make


SPECS: list[KernelSpec] = [
    KernelSpec("fast.bwd_dc_heads_bf16_q256", chunk_bwd_dc_heads_kernel,
               _example_args(torch.bfloat16, 256, p=64, n=128, g=1)),
    KernelSpec("fast.bwd_dc_heads_f32_q64", chunk_bwd_dc_heads_kernel, _example_args(torch.float32, 64)),
    KernelSpec("fast.bwd_dc_heads_bf16_q256_packed", chunk_bwd_dc_heads_kernel,
               _example_args(torch.bfloat16, 256, p=64, n=128, g=1, packed=True)),
]
