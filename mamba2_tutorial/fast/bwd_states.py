"""The fast state backward: backward kernels 1 and 2 in one launch, the float32 dS_out never stored.

The taught path (``kernels/bwd_states.py``) stores what every chunk's output asks of its entering state,
dS_out (b, nchunks, h, p, n) in float32 (kernel 1), reads it back while carrying the state gradient backwards
(kernel 2), and stores the result, dstates, in float32 too. At b8-l4096-h80 that is 1 GB of traffic. Here one
block per (state tile, batch, head) walks the chunks from the last to the first and, per chunk:

    stores  dstates_c = dS            (in x's dtype: kernel 3 rounds G to it for its mma anyway)
    adds    its share of d a_last,c = exp(a_last,c) · <dS, S_c>
    builds  dS_out,c = (dy · exp(a))ᵀ C   over the chunk's rows, as kernel 1 does
    carries dS = exp(a_last,c) · dS + dS_out,c          (a float32 loop-carried (TP, TN) tile)

the backward twin of the forward's fused state stage (``state_fused.py``). With packed rows
(``HAS_SEQ_IDX``, ``fast/resets.py``) it mirrors the forward's resets: where the carry reset over chunk c
(the chunk ends in another sequence than the one its entering state belongs to), exp(a_last,c) is 0 in both
the carry and d a_last,c, and dS_out,c takes only the rows of the entering state's sequence.
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ..kernels._host import LaunchPlan, cdiv, tile_size
from ..kernels.backward import GradCall
from ..kernels.bwd_states import (
    add_output_grad,
    example_state_grads_inputs,
    hand_out_chunk,
    passing_grad_buffers,
    state_tile_block,
)
from ..kernels.chunk_state import LOG2E
from ..kernels.state_passing import initial_state_tile
from ..runtime.launch import launch
from ..runtime.specs import KernelSpec
from .config import StateGrads
from .resets import carry_kept, entering_seq, seq_idx_arg, seq_tile
from .tuning import backward_config

__all__ = ["SPECS", "launch_state_grads_fused", "state_grads_fused_kernel", "state_grads_fused_plan"]

ZERO = ct.PaddingMode.ZERO


@ct.function
def hand_out_packed_chunk(dS, dstates, ddA_last, dA_cumsum, chunk_init_states, seq_idx, b, c, h, i_p, i_n,
                          pid_pn, Q, TP, TN):
    """``hand_out_chunk`` on a packed row: stores chunk c's dstates (dS) and this tile's share of
    d a_last = g_c · <dS, S_c>, and returns g_c, with g_c = exp(a_last,c) where the carry crosses the chunk
    and 0 where it reset."""
    ct.store(dstates, (b, c, h, i_p, i_n), dS.astype(dstates.dtype).reshape((1, 1, 1, TP, TN)))
    g_c = ct.exp2(ct.load(dA_cumsum, (b, h, c, Q - 1), shape=()) * LOG2E, flush_to_zero=True)
    g_c = ct.where(carry_kept(seq_idx, b, c, Q), g_c, 0.0)
    S_c = ct.load(chunk_init_states, (b, c, h, i_p, i_n), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    part = g_c * ct.sum(dS * S_c.reshape((TP, TN)).astype(ct.float32))
    ct.store(ddA_last, (b, h, c, pid_pn), part.reshape((1, 1, 1, 1)))
    return g_c


@ct.function
def add_entering_output_grad(dy, C, dA_cumsum, seq_idx, entering, b, c, h, g, i_p, i_n, kt, acc, Q, TK, TP,
                             TN):
    """``add_output_grad`` on a packed row: ``acc`` + (dy · exp(a))ᵀ C over the rows kt·TK.. of chunk c that
    belong to ``entering``, the sequence of the state entering it: the only rows that read that state."""
    k_tile = c * (Q // TK) + kt
    dy_k = ct.load(dy, (b, k_tile, h, i_p), shape=(1, TK, 1, TP), padding_mode=ZERO).reshape((TK, TP))
    C_k = ct.load(C, (b, k_tile, g, i_n), shape=(1, TK, 1, TN), padding_mode=ZERO).reshape((TK, TN))
    a_k = ct.load(dA_cumsum, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,))
    e_k = ct.exp2(a_k * LOG2E, flush_to_zero=True)
    e_k = ct.where(seq_tile(seq_idx, b, k_tile, TK) == entering, e_k, 0.0)
    dye = (dy_k.astype(ct.float32) * e_k[:, None]).astype(dy.dtype)
    return ct.mma(ct.transpose(dye), C_k.astype(dy.dtype), acc)


@ct.kernel
def state_grads_fused_kernel(dy, C, dA_cumsum, chunk_init_states, dfinal_states, seq_idx,   # inputs
                             dstates, ddA_last, dinitial_states,                              # outputs
                             heads_per_group: int,
                             Q: ct.Constant[int], TK: ct.Constant[int], TP: ct.Constant[int],
                             TN: ct.Constant[int], HAS_DFINAL: ct.Constant[bool],
                             HAS_SEQ_IDX: ct.Constant[bool]):
    """dy (b, l, h, p), C (b, l, g, n), dA_cumsum (b, h, nchunks, Q) float32, chunk_init_states
    (b, nchunks, h, p, n), dfinal_states (b, h, p, n), seq_idx (b, l) int32 -> dstates (b, nchunks, h, p, n)
    in its own dtype, ddA_last (b, h, nchunks, state tiles) float32 (one part per block), dinitial_states
    (b, h, p, n) float32. Grid (state tiles, b, h). ``HAS_SEQ_IDX``: packed rows, the state gradient resets
    where the forward's state did (``fast/resets.py``); without it seq_idx is an unused placeholder."""
    pid_pn, i_p, i_n, b, h = state_tile_block(dstates.shape[4], TN)
    g = h // heads_per_group
    nchunks = dstates.shape[1]
    seqlen = dy.shape[1]

    dS = initial_state_tile(dfinal_states, b, h, i_p, i_n, TP, TN, HAS_DFINAL)
    for i in range(nchunks):
        c = nchunks - 1 - i
        if HAS_SEQ_IDX:
            g_c = hand_out_packed_chunk(dS, dstates, ddA_last, dA_cumsum, chunk_init_states, seq_idx, b, c, h,
                                        i_p, i_n, pid_pn, Q, TP, TN)
        else:
            g_c = hand_out_chunk(dS, dstates, ddA_last, dA_cumsum, chunk_init_states, b, c, h, i_p, i_n,
                                 pid_pn, Q, TP, TN)
        # dS = g_c · dS + (dy · exp(a))ᵀ C over the chunk's rows, accumulated into the decayed tile
        dS = g_c * dS
        n_steps = min(Q // TK, ct.cdiv(seqlen - c * Q, TK))
        if HAS_SEQ_IDX:
            entering = entering_seq(seq_idx, b, c, Q)
        for kt in range(n_steps):
            if HAS_SEQ_IDX:
                dS = add_entering_output_grad(dy, C, dA_cumsum, seq_idx, entering, b, c, h, g, i_p, i_n, kt,
                                              dS, Q, TK, TP, TN)
            else:
                dS = add_output_grad(dy, C, dA_cumsum, b, c, h, g, i_p, i_n, kt, dS, Q, TK, TP, TN)
    ct.store(dinitial_states, (b, h, i_p, i_n), dS.reshape((1, 1, TP, TN)))


@functools.lru_cache(maxsize=256)
def state_grads_fused_plan(b: int, l: int, h: int, p: int, n: int, Q: int, dtype: torch.dtype,
                           tiles: tuple) -> LaunchPlan:
    """One block per (state tile, batch, head); ``tiles`` = (TP, TN, TK), clipped to p, n and Q. float32
    mma has no fast tensor-core path and its code grows with the tile: at most 32 × 32 × 64 there."""
    TP, TN, TK = tiles if dtype != torch.float32 else (min(tiles[0], 32), min(tiles[1], 32), tiles[2])
    TP, TN, TK = tile_size(p, TP), tile_size(n, TN), min(TK, Q)
    return LaunchPlan((cdiv(p, TP) * cdiv(n, TN), b, h), {"Q": Q, "TK": TK, "TP": TP, "TN": TN})


def launch_state_grads_fused(call: GradCall, settings: StateGrads | None = None):
    """``(dstates in dy's dtype, ddA_last (b, h, nchunks) float32, dinitial_states float32)`` for ``call``
    (a :class:`~mamba2_tutorial.kernels.backward.GradCall`; it reads dy, C, dA_cumsum, chunk_init_states,
    dfinal_states and seq_idx): the contract of the taught ``launch_state_grads``, and packed rows too.
    ``settings``: the stage's tiles and hint, a :class:`~mamba2_tutorial.fast.config.StateGrads` (default:
    the shipped table's for this problem)."""
    dy, C, dA_cumsum, dfinal_states = call.dy, call.C, call.dA_cumsum, call.dfinal_states
    b, l, h, p = dy.shape
    g, n = C.shape[2], C.shape[3]
    nchunks, Q = dA_cumsum.shape[2], dA_cumsum.shape[3]
    device = dy.device
    if settings is None:
        settings = backward_config(b, l, h, p, n, Q, dy.dtype, device).state
    plan = state_grads_fused_plan(b, l, h, p, n, Q, dy.dtype, settings.tiles)
    t = plan.tiles
    dfinal, dstates, ddA_parts, dinitial_states = passing_grad_buffers(
        dfinal_states, (b, nchunks, h, p, n), dy.dtype, plan.grid[0], device, call.poison)
    seq_idx, has_seq_idx = seq_idx_arg(call)
    launch(state_grads_fused_kernel, plan.grid,
           (dy, C, dA_cumsum, call.chunk_init_states, dfinal, seq_idx, dstates, ddA_parts, dinitial_states,
            h // g, Q, t["TK"], t["TP"], t["TN"], dfinal_states is not None, has_seq_idx), call.backend,
           settings.occupancy)
    return dstates, ddA_parts.sum(-1), dinitial_states


def _example_args(dtype, Q, b=2, l=300, h=4, p=48, g=2, n=80, has_dfinal=True, packed=False):
    def make():
        e = example_state_grads_inputs(dtype, Q, b, l, h, p, g, n)
        tiles = backward_config(b, l, h, p, n, Q, dtype).state.tiles
        plan = state_grads_fused_plan(b, l, h, p, n, Q, dtype, tiles)
        t, nchunks = plan.tiles, cdiv(l, Q)
        seq_idx = (torch.arange(l, dtype=torch.int32) // 70).expand(b, l).contiguous() if packed else (
            torch.zeros(1, 1, dtype=torch.int32))
        return plan.grid, (e["dy"], e["C"], e["dA_cumsum"], e["S"], e["dfinal_states"], seq_idx,
                           torch.empty(b, nchunks, h, p, n, dtype=dtype),
                           torch.empty(b, h, nchunks, plan.grid[0]), torch.empty(b, h, p, n),
                           h // g, Q, t["TK"], t["TP"], t["TN"], has_dfinal, packed)

    return make


SPECS: list[KernelSpec] = [
    KernelSpec("fast.bwd_state_grads_bf16_q256", state_grads_fused_kernel,
               _example_args(torch.bfloat16, 256, p=64, n=128, g=1, has_dfinal=False)),
    KernelSpec("fast.bwd_state_grads_f32_q64", state_grads_fused_kernel, _example_args(torch.float32, 64)),
    KernelSpec("fast.bwd_state_grads_bf16_q256_packed", state_grads_fused_kernel,
               _example_args(torch.bfloat16, 256, p=64, n=128, g=1, packed=True)),
]
