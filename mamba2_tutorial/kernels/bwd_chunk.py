"""Backward kernels 3 and 4 of 4: every gradient inside a chunk, from the chunk's inputs and two states.

The forward gives chunk c, head h, for rows m and keys k of the chunk (a = dA_cumsum, S the state entering
the chunk, s the state the chunk adds, w_k = exp(a_last - a_k) · dt_k):

    y_m = sum_{k <= m} (C_m · B_k) · exp(a_m - a_k) · dt_k · x_k  +  exp(a_m) · S C_m  (+ D · x_m)
    s   = sum_k w_k · x_k ⊗ B_k

Backward kernels 1 and 2 have already turned dy into G = dL/ds, the gradient of the state this chunk adds
(``dstates``). What is left is the chain rule through the two lines above. With the (Q, Q) matrices of the
chunk (row m, column k, causal: zero above the diagonal)

    CB = C Bᵀ      L = exp(a_m - a_k)      M = CB ∘ L ∘ dt_k      (y_intra = M x)
    dM = dy xᵀ     dCB = dM ∘ L ∘ dt_k

the gradients are matrix products, the forward's products transposed:

    dx = Mᵀ dy + w ∘ (B Gᵀ)  (+ D · dy)          dB = dCBᵀ C + w ∘ (x G)
    dC = dCB B + exp(a) ∘ (dy S)
    ddt_k = sum_m (dM ∘ CB ∘ L)_mk + exp(a_last - a_k) · r_k        with r_k = x_k · (G B_k)

and the decay exponents a get, per position, the row sums (+) and column sums (-) of T = dM ∘ M, as every
exp(a_m - a_k) depends on a_m and a_k alone:

    da_m += sum_k T_mk + (exp(a_m) · dy_m S) · C_m          da_k -= sum_m T_mk + w_k r_k

Host code (``backward.py``) finishes dt and A from da: a is the cumsum of dt · A, so its gradient flows back
as a reverse cumsum.

Two kernels, because the gradients fall into two kinds of rows:

    kernel 3, ``chunk_bwd_dx_kernel``: one block per TK keys k: dx, dB and ddt (column sums over m >= k)
    kernel 4, ``chunk_bwd_dc_kernel``: one block per TM rows m:  dC and da_m (row sums over k <= m)

Both rebuild CB, dM and L tile by tile on the tensor cores instead of reading them from memory (a (Q, Q)
matrix per chunk and head would be b·l·h·Q floats). Each block walks one row of (T × T) tiles of the causal
triangle: kernel 3 the tiles below its keys (built transposed, keys as rows, because it multiplies by Mᵀ and
dCBᵀ), kernel 4 the tiles left of its rows. dB and dC come out per head (float32); the host sums the heads
that share a group.

    grid = (Q / T,  b · nchunks,  h)      T = 64 (32 for float32); a block holds all of p and n

Ragged last chunk: positions past the sequence end load as zeros (dt = 0 there), so they add nothing; a
tile entirely past the end writes zeros into the per-position outputs (ddt, da), so the host may sum them.
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ..runtime.launch import launch
from ..runtime.specs import KernelSpec
from ._host import LaunchPlan, allocate, cdiv, next_power_of_two, placeholder
from .chunk_scan import D_NONE, D_PER_CHANNEL, D_PER_HEAD, d_mode
from .chunk_state import LOG2E

__all__ = ["SPECS", "added_state_grads", "chunk_block", "chunk_bwd_dc_kernel", "chunk_bwd_dx_kernel",
           "chunk_bwd_plan", "example_chunk_inputs", "key_tile_grads", "launch_chunk_bwd", "skip_terms"]

ZERO = ct.PaddingMode.ZERO


def load_rows(t, b, tile, head, T, W):
    """Rows ``tile`` (T of them) of one head or group of a (b, l, heads, W) tensor: a (T, W) tile."""
    return ct.load(t, (b, tile, head, 0), shape=(1, T, 1, W), padding_mode=ZERO).reshape((T, W))


def load_positions(t, b, h, c, tile, T):
    """T per-position values of chunk c from a (b, h, nchunks, Q) float32 tensor (dt_out, dA_cumsum)."""
    return ct.load(t, (b, h, c, tile), shape=(1, 1, 1, T)).reshape((T,))


def decay_tile(a_m, a_k, m_pos, k_pos):
    """The causal decay L = exp(a_m - a_k) of a (rows × keys) tile, 0 above the diagonal; ``a_m``, ``a_k``
    in log2 units. A plain function: cuTile inlines it."""
    causal = m_pos[:, None] >= k_pos[None, :]
    return ct.where(causal, ct.exp2(ct.minimum(a_m[:, None] - a_k[None, :], 0.0), flush_to_zero=True), 0.0)


def decay_tile_transposed(a_k, a_m, k_pos, m_pos):
    """The same tile transposed, keys as rows: Lᵀ (keys × rows)."""
    causal = k_pos[:, None] <= m_pos[None, :]
    return ct.where(causal, ct.exp2(ct.minimum(a_m[None, :] - a_k[:, None], 0.0), flush_to_zero=True), 0.0)


def pair_tile(C_m, B_k, dy_m, x_k, a_m, a_k, m_pos, k_pos, T):
    """One (T rows × T keys) tile of the chunk's causal triangle: CB = C Bᵀ, dM = dy xᵀ (both on the tensor
    cores, float32 accumulation) and the causal decay L = exp(a_m - a_k) (0 above the diagonal).
    ``a_m``, ``a_k`` are in log2 units. A plain function: cuTile inlines it into both kernels."""
    CB = ct.mma(C_m, ct.transpose(B_k), ct.zeros((T, T), dtype=ct.float32))
    dM = ct.mma(dy_m, ct.transpose(x_k), ct.zeros((T, T), dtype=ct.float32))
    return CB, dM, decay_tile(a_m, a_k, m_pos, k_pos)


def pair_tile_transposed(B_k, C_m, x_k, dy_m, a_k, a_m, k_pos, m_pos, T):
    """The same tile transposed, keys as rows: CBᵀ = B Cᵀ, dMᵀ = x dyᵀ and Lᵀ, (T keys × T rows). Kernel 3
    needs Mᵀ and dCBᵀ as mma operands: building them transposed costs nothing, while transposing a computed
    float32 tile costs a trip through shared memory."""
    CBt = ct.mma(B_k, ct.transpose(C_m), ct.zeros((T, T), dtype=ct.float32))
    dMt = ct.mma(x_k, ct.transpose(dy_m), ct.zeros((T, T), dtype=ct.float32))
    return CBt, dMt, decay_tile_transposed(a_k, a_m, k_pos, m_pos)


@ct.function
def chunk_block(nchunks):
    """A block's place on the (Q / T, b · nchunks, heads) grid: (tile of the chunk, batch, chunk, head)."""
    pid_bc = ct.bid(1)
    return ct.bid(0), pid_bc // nchunks, pid_bc % nchunks, ct.bid(2)


@ct.function
def key_tile_grads(CBt, dMt, Lt, dt_k, dy_m, C_m, acc_dx, acc_dB, ddt_k):
    """One (keys × rows) tile's share of kernel 3: Mᵀ dy into dx, dCBᵀ C into dB, the column sums into ddt."""
    CBLt = CBt * Lt
    Mt = CBLt * dt_k[:, None]                   # the forward's matrix, transposed: y_intra = M x
    dCBt = dMt * Lt * dt_k[:, None]             # the gradient of C Bᵀ, transposed
    acc_dx = ct.mma(Mt.astype(dy_m.dtype), dy_m, acc_dx)       # Mᵀ dy
    acc_dB = ct.mma(dCBt.astype(dy_m.dtype), C_m, acc_dB)      # dCBᵀ C
    return acc_dx, acc_dB, ddt_k + ct.sum(dMt * CBLt, axis=1)


@ct.function
def added_state_grads(dstates, dA_cumsum, b, c, h, a_k, dt_k, x_k, B_k, acc_dx, acc_dB, ddt_k, da_k,
                      Q, T, PP, NS):
    """Kernel 3 through the state the chunk adds, s = sum_k w_k x_k ⊗ B_k with G = dL/ds from kernel 2:
    ``(dx, dB, ddt, da, w_k r_k)``, the last a_last's share (the host sums it)."""
    G = ct.load(dstates, (b, c, h, 0, 0), shape=(1, 1, 1, PP, NS), padding_mode=ZERO).reshape((PP, NS))
    G = G.astype(x_k.dtype)
    a_last = ct.load(dA_cumsum, (b, h, c, Q - 1), shape=()) * LOG2E
    decay_k = ct.exp2(ct.minimum(a_last - a_k, 0.0), flush_to_zero=True)
    w_k = decay_k * dt_k
    BG = ct.mma(B_k, ct.transpose(G), ct.zeros((T, PP), dtype=ct.float32))    # B_k Gᵀ (T, p)
    xG = ct.mma(x_k, G, ct.zeros((T, NS), dtype=ct.float32))                   # x_k G  (T, n)
    acc_dx = acc_dx + w_k[:, None] * BG
    acc_dB = acc_dB + w_k[:, None] * xG
    r_k = ct.sum(x_k.astype(ct.float32) * BG, axis=1)                           # x_k · (G B_k)
    return acc_dx, acc_dB, ddt_k + decay_k * r_k, da_k - w_k * r_k, w_k * r_k


@ct.function
def skip_terms(dy, D, b, k_tile, h, T, PP, D_MODE):
    """The skip connection y += D x at T key rows: ``(dy_k, D_h)`` in float32, dx gets dy_k · D_h."""
    dy_k = load_rows(dy, b, k_tile, h, T, PP).astype(ct.float32)
    if D_MODE == D_PER_HEAD:
        D_h = ct.load(D, (h,), shape=()).astype(ct.float32)
    else:
        D_h = ct.load(D, (h, 0), shape=(1, PP), padding_mode=ZERO).astype(ct.float32)
    return dy_k, D_h


@ct.kernel
def chunk_bwd_dx_kernel(x, dy, dt_out, dA_cumsum, C, B, dstates, D,     # inputs
                        dx, dB, ddt, da, da_last,                        # outputs
                        heads_per_group: int,
                        Q: ct.Constant[int], T: ct.Constant[int], PP: ct.Constant[int], NS: ct.Constant[int],
                        D_MODE: ct.Constant[int]):
    """Kernel 3, one block per T keys k: dx (b, l, h, p) in x's dtype, dB (b, l, h, n) float32 per head,
    ddt, da and da_last (b, h, nchunks, Q) float32 (the key side: column sums; da_last holds each key's
    share w_k r_k of the gradient of a_last, which the host sums)."""
    kt, b, c, h = chunk_block(dA_cumsum.shape[2])            # kt: which T keys of the chunk
    g = h // heads_per_group
    seqlen = x.shape[1]
    k_tile = c * (Q // T) + kt          # key tile index along l, in units of T

    if k_tile * T < seqlen:
        x_k = load_rows(x, b, k_tile, h, T, PP).astype(x.dtype)
        B_k = load_rows(B, b, k_tile, g, T, NS).astype(x.dtype)
        a_k = load_positions(dA_cumsum, b, h, c, kt, T) * LOG2E
        dt_k = load_positions(dt_out, b, h, c, kt, T)
        k_pos = kt * T + ct.arange(T, dtype=ct.int32)

        # 1. intra-chunk: the rows m >= k (tiles kt .. the last one before the sequence end)
        acc_dx = ct.zeros((T, PP), dtype=ct.float32)
        acc_dB = ct.zeros((T, NS), dtype=ct.float32)
        ddt_k = ct.zeros((T,), dtype=ct.float32)       # sum_m dM ∘ CB ∘ L, the column sums
        n_m = min(Q // T, ct.cdiv(seqlen - c * Q, T))
        for mt in range(kt, n_m):
            m_tile = c * (Q // T) + mt
            C_m = load_rows(C, b, m_tile, g, T, NS).astype(x.dtype)
            dy_m = load_rows(dy, b, m_tile, h, T, PP).astype(x.dtype)
            a_m = load_positions(dA_cumsum, b, h, c, mt, T) * LOG2E
            m_pos = mt * T + ct.arange(T, dtype=ct.int32)
            CBt, dMt, Lt = pair_tile_transposed(B_k, C_m, x_k, dy_m, a_k, a_m, k_pos, m_pos, T)
            acc_dx, acc_dB, ddt_k = key_tile_grads(CBt, dMt, Lt, dt_k, dy_m, C_m, acc_dx, acc_dB, ddt_k)
        da_k = -ddt_k * dt_k                            # column sums of T = dM ∘ CB ∘ L ∘ dt

        # 2. through the state this chunk adds: s = sum_k w_k x_k ⊗ B_k, with G = dL/ds from kernel 2
        #    (da_k gets - w_k r_k, and a_last + w_k r_k through da_last)
        acc_dx, acc_dB, ddt_k, da_k, wr_k = added_state_grads(
            dstates, dA_cumsum, b, c, h, a_k, dt_k, x_k, B_k, acc_dx, acc_dB, ddt_k, da_k, Q, T, PP, NS)

        # 3. the skip connection y += D x
        if D_MODE != D_NONE:
            dy_k, D_h = skip_terms(dy, D, b, k_tile, h, T, PP, D_MODE)
            acc_dx = acc_dx + dy_k * D_h

        ct.store(dx, (b, k_tile, h, 0), acc_dx.astype(dx.dtype).reshape((1, T, 1, PP)))
        ct.store(dB, (b, k_tile, h, 0), acc_dB.reshape((1, T, 1, NS)))
        ct.store(ddt, (b, h, c, kt), ddt_k.reshape((1, 1, 1, T)))
        ct.store(da, (b, h, c, kt), da_k.reshape((1, 1, 1, T)))
        ct.store(da_last, (b, h, c, kt), wr_k.reshape((1, 1, 1, T)))
    else:                                # past the end: zeros, so the host can sum whole chunks
        zeros = ct.zeros((1, 1, 1, T), dtype=ct.float32)
        ct.store(ddt, (b, h, c, kt), zeros)
        ct.store(da, (b, h, c, kt), zeros)
        ct.store(da_last, (b, h, c, kt), zeros)


@ct.kernel
def chunk_bwd_dc_kernel(x, dy, dt_out, dA_cumsum, C, B, chunk_init_states,  # inputs
                        dC, da,                                              # outputs
                        heads_per_group: int,
                        Q: ct.Constant[int], T: ct.Constant[int], PP: ct.Constant[int], NS: ct.Constant[int]):
    """Kernel 4, one block per T rows m: dC (b, l, h, n) float32 per head and da (b, h, nchunks, Q) float32
    (the row side: row sums)."""
    mt, b, c, h = chunk_block(dA_cumsum.shape[2])            # mt: which T rows of the chunk
    g = h // heads_per_group
    seqlen = x.shape[1]
    m_tile = c * (Q // T) + mt

    if m_tile * T < seqlen:
        C_m = load_rows(C, b, m_tile, g, T, NS).astype(x.dtype)
        dy_m = load_rows(dy, b, m_tile, h, T, PP).astype(x.dtype)
        a_m = load_positions(dA_cumsum, b, h, c, mt, T) * LOG2E
        m_pos = mt * T + ct.arange(T, dtype=ct.int32)

        # 1. through the state entering the chunk: y_m += exp(a_m) · S C_m
        S = ct.load(chunk_init_states, (b, c, h, 0, 0), shape=(1, 1, 1, PP, NS), padding_mode=ZERO)
        S = S.reshape((PP, NS)).astype(x.dtype)
        acc_dC = ct.mma(dy_m, S, ct.zeros((T, NS), dtype=ct.float32))           # dy S  (T, n)
        acc_dC = acc_dC * ct.exp2(a_m, flush_to_zero=True)[:, None]
        da_m = ct.sum(acc_dC * C_m.astype(ct.float32), axis=1)

        # 2. intra-chunk: the keys k <= m (tiles 0 .. mt)
        n_k = min(mt + 1, ct.cdiv(seqlen - c * Q, T))
        for kt in range(n_k):
            k_tile = c * (Q // T) + kt
            B_k = load_rows(B, b, k_tile, g, T, NS).astype(x.dtype)
            x_k = load_rows(x, b, k_tile, h, T, PP).astype(x.dtype)
            a_k = load_positions(dA_cumsum, b, h, c, kt, T) * LOG2E
            dt_k = load_positions(dt_out, b, h, c, kt, T)
            k_pos = kt * T + ct.arange(T, dtype=ct.int32)
            CB, dM, L = pair_tile(C_m, B_k, dy_m, x_k, a_m, a_k, m_pos, k_pos, T)
            dCB = dM * L * dt_k[None, :]
            da_m = da_m + ct.sum(dCB * CB, axis=1)                                 # row sums of T
            acc_dC = ct.mma(dCB.astype(x.dtype), B_k, acc_dC)                      # dCB B

        ct.store(dC, (b, m_tile, h, 0), acc_dC.reshape((1, T, 1, NS)))
        ct.store(da, (b, h, c, mt), da_m.reshape((1, 1, 1, T)))
    else:
        ct.store(da, (b, h, c, mt), ct.zeros((1, 1, 1, T), dtype=ct.float32))


# ----------------------------------------------------------------------------------------------------
# Host side: tile sizes, the wrapper, example launches.
# ----------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def chunk_bwd_plan(b: int, l: int, h: int, p: int, n: int, Q: int, dtype: torch.dtype) -> LaunchPlan:
    """Grid and tiles of kernels 3 and 4 (the same for both): T rows or keys per block, the whole head
    dimension (PP) and state (NS), padded to powers of two. float32 mma has no fast tensor-core path and its
    code grows with the tile: T = 32."""
    T = min(Q, 32 if dtype == torch.float32 else 64)
    return LaunchPlan((Q // T, b * cdiv(l, Q), h),
                      {"Q": Q, "T": T, "PP": next_power_of_two(p), "NS": next_power_of_two(n)})


def launch_chunk_bwd(x, dy, dt_out, dA_cumsum, C, B, chunk_init_states, dstates, D, backend, poison=False):
    """Launch kernels 3 and 4: ``(dx in x's dtype, dB (b, l, g, n), dC (b, l, g, n), ddt, da, da_last,
    None)``, float32 except dx. The kernels write dB and dC per head; the group's heads are summed here. (The
    last entry is dD, which the taught path leaves to the host.)"""
    b, l, h, p = x.shape
    g, n = C.shape[2], C.shape[3]
    nchunks, Q = dA_cumsum.shape[2], dA_cumsum.shape[3]
    device = x.device
    plan = chunk_bwd_plan(b, l, h, p, n, Q, x.dtype)
    t = plan.tiles
    dx = allocate((b, l, h, p), x.dtype, device, poison)
    dB = allocate((b, l, h, n), torch.float32, device, poison)
    dC = allocate((b, l, h, n), torch.float32, device, poison)
    ddt = allocate((b, h, nchunks, Q), torch.float32, device, poison)
    da_key = allocate((b, h, nchunks, Q), torch.float32, device, poison)
    da_row = allocate((b, h, nchunks, Q), torch.float32, device, poison)
    da_last = allocate((b, h, nchunks, Q), torch.float32, device, poison)
    D_arg = D if D is not None else placeholder(device, torch.float32, 1)
    launch(chunk_bwd_dx_kernel, plan.grid,
           (x, dy, dt_out, dA_cumsum, C, B, dstates, D_arg, dx, dB, ddt, da_key, da_last,
            h // g, Q, t["T"], t["PP"], t["NS"], d_mode(D)), backend)
    launch(chunk_bwd_dc_kernel, plan.grid,
           (x, dy, dt_out, dA_cumsum, C, B, chunk_init_states, dC, da_row,
            h // g, Q, t["T"], t["PP"], t["NS"]), backend)
    # heads that share a group share B and C: their gradients add up
    dB = dB.view(b, l, g, h // g, n).sum(3)
    dC = dC.view(b, l, g, h // g, n).sum(3)
    return dx, dB, dC, ddt, da_key + da_row, da_last, None


def example_chunk_inputs(dtype, Q, D_MODE, b, l, h, p, g, n) -> dict:
    """Random inputs of kernels 3 and 4 for a compile spec (and of any kernel of the same contract):
    x, dy, C, B in ``dtype``; dt_out, dA_cumsum, dstates and a per-position buffer in float32; D of
    ``D_MODE``'s shape; the entering states S in ``dtype``."""
    gen = torch.Generator().manual_seed(0)
    nchunks = cdiv(l, Q)
    x, dy = (torch.randn(b, l, h, p, generator=gen).to(dtype) for _ in range(2))
    C, B = (torch.randn(b, l, g, n, generator=gen).to(dtype) for _ in range(2))
    dt_out = torch.rand(b, h, nchunks, Q, generator=gen)
    D = torch.randn(h, p, generator=gen) if D_MODE == D_PER_CHANNEL else torch.randn(h, generator=gen)
    dstates = torch.randn(b, nchunks, h, p, n, generator=gen)
    return dict(x=x, dy=dy, dt_out=dt_out, dA_cumsum=-dt_out.cumsum(-1), C=C, B=B, D=D, dstates=dstates,
                S=dstates.to(dtype), per_pos=torch.empty(b, h, nchunks, Q))


def _example_args(kernel_name, dtype, Q, D_MODE=D_PER_HEAD, b=2, l=300, h=4, p=48, g=2, n=80):
    def make():
        e = example_chunk_inputs(dtype, Q, D_MODE, b, l, h, p, g, n)
        plan = chunk_bwd_plan(b, l, h, p, n, Q, dtype)
        t, per_pos = plan.tiles, e["per_pos"]
        inputs = tuple(e[k] for k in ("x", "dy", "dt_out", "dA_cumsum", "C", "B"))
        if kernel_name == "dx":
            return plan.grid, (*inputs, e["dstates"], e["D"], torch.empty_like(e["x"]),
                               torch.empty(b, l, h, n), per_pos, per_pos.clone(), per_pos.clone(),
                               h // g, Q, t["T"], t["PP"], t["NS"], D_MODE)
        return plan.grid, (*inputs, e["S"], torch.empty(b, l, h, n), per_pos,
                           h // g, Q, t["T"], t["PP"], t["NS"])

    return make


SPECS: list[KernelSpec] = [
    KernelSpec("ssd.bwd_chunk_dx_bf16_q256", chunk_bwd_dx_kernel,
               _example_args("dx", torch.bfloat16, 256, p=64, n=128, g=1)),
    KernelSpec("ssd.bwd_chunk_dc_bf16_q256", chunk_bwd_dc_kernel,
               _example_args("dc", torch.bfloat16, 256, p=64, n=128, g=1)),
    KernelSpec("ssd.bwd_chunk_dx_f32_q64_dchannel", chunk_bwd_dx_kernel,
               _example_args("dx", torch.float32, 64, D_PER_CHANNEL)),
    KernelSpec("ssd.bwd_chunk_dc_f32_q64", chunk_bwd_dc_kernel, _example_args("dc", torch.float32, 64)),
]
