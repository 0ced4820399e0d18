"""Backward kernels 1 and 2 of 4: the gradient of the states, carried backwards across chunks.

The forward carries a state forwards: S_0 = initial_states, S_c+1 = g_c · S_c + s_c with the chunk's decay
g_c = exp(a_last,c) (a = dA_cumsum) and s_c the state chunk c adds, and chunk c's output reads S_c through
y_m += exp(a_m) · S_c C_m. The backward runs the same recurrence in reverse. Write dS_c = dL/dS_c:

    dS_nchunks = d final_states (or 0)
    dS_c       = g_c · dS_c+1  +  sum_m exp(a_m) · dy_m ⊗ C_m        (p × n, float32)

The second term is what chunk c's own output asks of its entering state: kernel 1 computes it for every
chunk at once (it does not depend on other chunks). Kernel 2 then walks the chunks from the last to the first,
as the forward's kernel 2 walks them from the first to the last. Along the way it hands out

    dstates_c   = dS_c+1                 the gradient of s_c (kernels 3 and 4 turn it into dx, dB, ddt)
    d a_last,c  = g_c · <dS_c+1, S_c>    the gradient of the chunk's total decay, summed over (p, n)
    d initial_states = dS_0

Kernel 1, one block per (state tile, batch·chunk, head), the forward's kernel 1 with dy in the place of x,
C in the place of B, and exp(a_m) in the place of the decay to the chunk end:

    dS_out[TP, TN] = (dy · exp(a))ᵀ[TP, Q] @ C[Q, TN]

Kernel 2, one block per (state tile, batch, head) with the running dS in a float32 loop-carried tile. The
decay gradient is a sum over the whole p × n state; each block writes the part of its own tile, and the host
adds the parts (``backward.py``).
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ..runtime.launch import launch
from ..runtime.specs import KernelSpec
from ._host import LaunchPlan, allocate, cdiv, placeholder
from .chunk_state import LOG2E, chunk_state_plan
from .state_passing import initial_state_tile, state_passing_plan

__all__ = ["SPECS", "add_output_grad", "chunk_dstates_kernel", "example_state_grads_inputs", "hand_out_chunk",
           "launch_state_grads", "passing_grad_buffers", "state_passing_bwd_kernel", "state_tile_block"]

ZERO = ct.PaddingMode.ZERO


@ct.function
def state_tile_block(n, TN):
    """A block's place on the (state tiles, b, h) grid: (state tile, its p and n tiles, batch, head)."""
    pid_pn = ct.bid(0)
    n_tiles = ct.cdiv(n, TN)
    return pid_pn, pid_pn // n_tiles, pid_pn % n_tiles, ct.bid(1), ct.bid(2)


@ct.function
def add_output_grad(dy, C, dA_cumsum, b, c, h, g, i_p, i_n, kt, acc, Q, TK, TP, TN):
    """``acc`` + (dy · exp(a))ᵀ C over rows kt·TK.. of chunk c: what they ask of the state entering it."""
    k_tile = c * (Q // TK) + kt
    dy_k = ct.load(dy, (b, k_tile, h, i_p), shape=(1, TK, 1, TP), padding_mode=ZERO).reshape((TK, TP))
    C_k = ct.load(C, (b, k_tile, g, i_n), shape=(1, TK, 1, TN), padding_mode=ZERO).reshape((TK, TN))
    # exp(a_m) <= 1: how much of the entering state is left at row m
    a_k = ct.load(dA_cumsum, (b, h, c, kt), shape=(1, 1, 1, TK)).reshape((TK,))
    e_k = ct.exp2(a_k * LOG2E, flush_to_zero=True)
    dye = (dy_k.astype(ct.float32) * e_k[:, None]).astype(dy.dtype)     # mma operands in dy's dtype
    return ct.mma(ct.transpose(dye), C_k.astype(dy.dtype), acc)


@ct.function
def hand_out_chunk(dS, dstates, ddA_last, dA_cumsum, chunk_init_states, b, c, h, i_p, i_n, pid_pn,
                   Q, TP, TN):
    """Stores chunk c's dstates (dS) and this tile's share of d a_last = g_c · <dS, S_c>; returns g_c."""
    ct.store(dstates, (b, c, h, i_p, i_n), dS.astype(dstates.dtype).reshape((1, 1, 1, TP, TN)))
    g_c = ct.exp2(ct.load(dA_cumsum, (b, h, c, Q - 1), shape=()) * LOG2E, flush_to_zero=True)
    S_c = ct.load(chunk_init_states, (b, c, h, i_p, i_n), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    part = g_c * ct.sum(dS * S_c.reshape((TP, TN)).astype(ct.float32))    # this tile's share of <dS, S>
    ct.store(ddA_last, (b, h, c, pid_pn), part.reshape((1, 1, 1, 1)))
    return g_c


@ct.kernel
def chunk_dstates_kernel(dy, C, dA_cumsum,          # inputs
                         dS_out,                     # output
                         heads_per_group: int,
                         Q: ct.Constant[int], TK: ct.Constant[int], TP: ct.Constant[int],
                         TN: ct.Constant[int]):
    """Kernel 1: dy (b, l, h, p), C (b, l, g, n), dA_cumsum (b, h, nchunks, Q) fp32
    -> dS_out (b, nchunks, h, p, n) fp32, what each chunk's output asks of the state entering it."""
    pid_pn = ct.bid(0)
    pid_bc = ct.bid(1)
    h = ct.bid(2)
    nchunks = dA_cumsum.shape[2]
    b = pid_bc // nchunks
    c = pid_bc % nchunks
    n_tiles = ct.cdiv(dS_out.shape[4], TN)
    i_p = pid_pn // n_tiles
    i_n = pid_pn % n_tiles
    g = h // heads_per_group
    seqlen = dy.shape[1]

    acc = ct.zeros((TP, TN), dtype=ct.float32)
    n_steps = min(Q // TK, ct.cdiv(seqlen - c * Q, TK))   # no step entirely past the sequence end
    for kt in range(n_steps):
        acc = add_output_grad(dy, C, dA_cumsum, b, c, h, g, i_p, i_n, kt, acc, Q, TK, TP, TN)
    ct.store(dS_out, (b, c, h, i_p, i_n), acc.reshape((1, 1, 1, TP, TN)))


@ct.kernel
def state_passing_bwd_kernel(dS_out, dA_cumsum, chunk_init_states, dfinal_states,   # inputs
                             dstates, ddA_last, dinitial_states,                      # outputs
                             Q: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int],
                             HAS_DFINAL: ct.Constant[bool]):
    """Kernel 2: dS_out (b, nchunks, h, p, n) fp32 (kernel 1), dA_cumsum (b, h, nchunks, Q) fp32,
    chunk_init_states (b, nchunks, h, p, n) (the forward's S_c), dfinal_states (b, h, p, n)
    -> dstates (b, nchunks, h, p, n) fp32, ddA_last (b, h, nchunks, state tiles) fp32 (one part per block),
    dinitial_states (b, h, p, n) fp32."""
    pid_pn, i_p, i_n, b, h = state_tile_block(dS_out.shape[4], TN)
    nchunks = dS_out.shape[1]

    # dS: dL/dS_c+1, the running gradient, float32; it starts from the gradient of the final state
    dS = initial_state_tile(dfinal_states, b, h, i_p, i_n, TP, TN, HAS_DFINAL)
    for i in range(nchunks):
        c = nchunks - 1 - i                                   # backwards: the last chunk first
        g_c = hand_out_chunk(dS, dstates, ddA_last, dA_cumsum, chunk_init_states, b, c, h, i_p, i_n, pid_pn,
                             Q, TP, TN)
        dS_c = ct.load(dS_out, (b, c, h, i_p, i_n), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        dS = g_c * dS + dS_c.reshape((TP, TN))
    ct.store(dinitial_states, (b, h, i_p, i_n), dS.reshape((1, 1, TP, TN)))


# ----------------------------------------------------------------------------------------------------
# Host side: the wrapper (both kernels), example launches.
# ----------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def dstates_plan(b: int, l: int, h: int, p: int, n: int, Q: int, dtype: torch.dtype) -> LaunchPlan:
    """Kernel 1 has the forward kernel 1's grid and tiles (a state tile per block)."""
    return chunk_state_plan(b, l, h, p, n, Q, dtype)


def launch_state_grads(dy, C, dA_cumsum, chunk_init_states, dfinal_states, backend, poison=False):
    """Launch kernels 1 and 2: ``(dstates, ddA_last (b, h, nchunks), dinitial_states)``, all float32."""
    b, l, h, p = dy.shape
    g, n = C.shape[2], C.shape[3]
    nchunks, Q = dA_cumsum.shape[2], dA_cumsum.shape[3]
    device = dy.device
    dS_out = allocate((b, nchunks, h, p, n), torch.float32, device, poison)
    plan1 = dstates_plan(b, l, h, p, n, Q, dy.dtype)
    t1 = plan1.tiles
    launch(chunk_dstates_kernel, plan1.grid,
           (dy, C, dA_cumsum, dS_out, h // g, Q, t1["TK"], t1["TP"], t1["TN"]), backend)

    plan2 = state_passing_plan(b, nchunks, h, p, n, Q)
    t2 = plan2.tiles
    dfinal, dstates, ddA_parts, dinitial_states = passing_grad_buffers(
        dfinal_states, dS_out.shape, torch.float32, plan2.grid[0], device, poison)
    launch(state_passing_bwd_kernel, plan2.grid,
           (dS_out, dA_cumsum, chunk_init_states, dfinal, dstates, ddA_parts, dinitial_states,
            Q, t2["TP"], t2["TN"], dfinal_states is not None), backend)
    return dstates, ddA_parts.sum(-1), dinitial_states


def passing_grad_buffers(dfinal_states, shape, dstates_dtype, parts, device, poison) -> tuple:
    """The state passing backward's d final_states (or a placeholder) and its dstates, ddA parts, dinitial."""
    b, nchunks, h, p, n = shape
    return (dfinal_states if dfinal_states is not None else placeholder(device, torch.float32, 4),
            allocate(shape, dstates_dtype, device, poison),
            allocate((b, h, nchunks, parts), torch.float32, device, poison),
            allocate((b, h, p, n), torch.float32, device, poison))


def example_state_grads_inputs(dtype, Q, b, l, h, p, g, n) -> dict:
    """Random inputs of backward kernels 1 and 2 for a compile spec (and of any kernel of the same contract):
    dy and C in ``dtype``, dA_cumsum, the entering states S (in ``dtype``) and d final_states."""
    gen = torch.Generator().manual_seed(0)
    nchunks = cdiv(l, Q)
    return dict(dy=torch.randn(b, l, h, p, generator=gen).to(dtype),
                C=torch.randn(b, l, g, n, generator=gen).to(dtype),
                dA_cumsum=-torch.rand(b, h, nchunks, Q, generator=gen).cumsum(-1),
                S=torch.randn(b, nchunks, h, p, n, generator=gen).to(dtype),
                dfinal_states=torch.randn(b, h, p, n, generator=gen))


def _dstates_args(dtype, Q, b=2, l=300, h=4, p=48, g=2, n=80):
    def make():
        e = example_state_grads_inputs(dtype, Q, b, l, h, p, g, n)
        plan = dstates_plan(b, l, h, p, n, Q, dtype)
        t = plan.tiles
        dS_out = torch.empty(b, cdiv(l, Q), h, p, n)
        return plan.grid, (e["dy"], e["C"], e["dA_cumsum"], dS_out, h // g, Q, t["TK"], t["TP"], t["TN"])

    return make


def _passing_args(state_dtype, b=2, nchunks=5, h=4, p=48, n=80, Q=64):
    def make():
        e = example_state_grads_inputs(state_dtype, Q, b, nchunks * Q, h, p, 1, n)
        plan = state_passing_plan(b, nchunks, h, p, n, Q)
        dS_out = torch.randn(b, nchunks, h, p, n, generator=torch.Generator().manual_seed(1))
        return plan.grid, (dS_out, e["dA_cumsum"], e["S"], e["dfinal_states"],
                           torch.empty_like(dS_out), torch.empty(b, h, nchunks, plan.grid[0]),
                           torch.empty(b, h, p, n),
                           Q, plan.tiles["TP"], plan.tiles["TN"], True)

    return make


SPECS: list[KernelSpec] = [
    KernelSpec("ssd.bwd_dstates_bf16_q256", chunk_dstates_kernel,
               _dstates_args(torch.bfloat16, 256, p=64, n=128)),
    KernelSpec("ssd.bwd_dstates_f32_q64", chunk_dstates_kernel, _dstates_args(torch.float32, 64)),
    KernelSpec("ssd.bwd_state_passing_bf16", state_passing_bwd_kernel,
               _passing_args(torch.bfloat16, p=64, n=128, Q=256)),
]
