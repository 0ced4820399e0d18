"""The fast chunk backward: backward kernels 3 and 4 with C Bᵀ computed once and the heads of a group summed
in the block.

The taught kernels 3 and 4 (``kernels/bwd_chunk.py``) run one head per block. Two things they do grow with
the number of heads that share a group (Mamba-2 layers have 24 to 128 heads and one group):

- every head rebuilds the same C Bᵀ tile: it depends on the chunk and the group, not the head. At n = 128,
  p = 64 it is a third of kernel 3's tensor-core work and two fifths of kernel 4's;
- every head writes its own float32 dB and dC (b, l, h, n), which the host then sums over the group's heads:
  at b8-l4096-h80 that is 2.7 GB written and read again, more traffic than the rest of the backward.

So, as the forward's chunk scan does (``chunk_cb.py``), C Bᵀ is computed once per (chunk, group), here in
both orientations (kernel 3 multiplies by its transpose), and each block of kernels 3 and 4 walks ``HPB``
heads of one group, adding their dB (dC) into one float32 tile that it stores once:

    bwd_cb_kernel        CB[m, k] = C_m · B_k and CBt[k, m], the causal (T, T) tiles   (Q/T, b·nchunks, g)
    chunk_bwd_dx_heads   kernel 3 for HPB heads: dx, ddt, da, da_last and dD's part per head;
                         dB summed over the HPB heads                                 (Q/T, b·nchunks, h/HPB)
    chunk_bwd_dc_heads   kernel 4 for HPB heads: da per head, dC summed over them     (Q/T, b·nchunks, h/HPB)

(the grids on the right).
The host adds the h/(g·HPB) partial sums of each group (none when HPB is the group's size). The math is the
taught kernels' line for line; ``tests/test_fast_backward.py`` keeps the two equal.
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ..kernels._host import LaunchPlan, allocate, cdiv, next_power_of_two, placeholder
from ..kernels.bwd_chunk import decay_tile, decay_tile_transposed, load_positions, load_rows
from ..kernels.chunk_scan import D_NONE, D_PER_CHANNEL, D_PER_HEAD, d_mode
from ..kernels.chunk_state import LOG2E
from ..runtime.hardware import H200, sm_count
from ..runtime.launch import launch
from ..runtime.specs import KernelSpec

__all__ = ["SPECS", "ChunkBwdHeads", "bwd_cb_kernel", "chunk_bwd_dc_heads_kernel",
           "chunk_bwd_dx_heads_kernel", "chunk_bwd_heads_plan", "heads_per_block", "launch_chunk_bwd_heads"]

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def bwd_cb_kernel(C, B, CB, CBt, Q: ct.Constant[int], T: ct.Constant[int], NS: ct.Constant[int]):
    """C, B (b, l, g, n) -> CB and CBt (b, nchunks, g, Q, Q) float32: the tiles (m, k) of C Bᵀ with k <= m
    (by tiles), in CB at (m, k) and transposed in CBt at (k, m). Only tiles before the sequence end."""
    mt = ct.bid(0)
    pid_bc = ct.bid(1)
    g = ct.bid(2)
    nchunks = CB.shape[1]
    b, c = pid_bc // nchunks, pid_bc % nchunks
    seqlen = C.shape[1]
    m_tile = c * (Q // T) + mt
    if m_tile * T < seqlen:
        C_m = load_rows(C, b, m_tile, g, T, NS)
        for kt in range(mt + 1):          # k tiles <= mt are before the sequence end, as mt is
            B_k = load_rows(B, b, c * (Q // T) + kt, g, T, NS)
            CB_mk = ct.mma(C_m, ct.transpose(B_k), ct.zeros((T, T), dtype=ct.float32))
            ct.store(CB, (b, c, g, mt, kt), CB_mk.reshape((1, 1, 1, T, T)))
            CB_km = ct.mma(B_k, ct.transpose(C_m), ct.zeros((T, T), dtype=ct.float32))
            ct.store(CBt, (b, c, g, kt, mt), CB_km.reshape((1, 1, 1, T, T)))


def load_cb(CB, b, c, g, i, j, T):
    """Tile (i, j) of a (b, nchunks, g, Q, Q) C Bᵀ buffer: a (T, T) float32 tile. Inlined by cuTile."""
    return ct.load(CB, (b, c, g, i, j), shape=(1, 1, 1, T, T)).reshape((T, T))


@ct.kernel
def chunk_bwd_dx_heads_kernel(x, dy, dt_out, dA_cumsum, C, B, CBt, dstates, D,   # inputs
                              dx, dB, ddt, da, da_last, dD,                      # outputs
                              heads_per_group: int, HPB: int,
                              Q: ct.Constant[int], T: ct.Constant[int], PP: ct.Constant[int],
                              NS: ct.Constant[int], D_MODE: ct.Constant[int]):
    """Kernel 3 for HPB heads of one group, one block per T keys: dx (b, l, h, p) in x's dtype; ddt, da,
    da_last (b, h, nchunks, Q) float32 per head; dB (b, l, h / HPB, n) float32, the sum over the block's
    heads; with D, dD (b, l / T, h, p) float32: each tile's sum of dy ∘ x over its T positions."""
    kt = ct.bid(0)
    pid_bc = ct.bid(1)
    split = ct.bid(2)                   # heads split·HPB .. split·HPB + HPB - 1
    nchunks = dA_cumsum.shape[2]
    b = pid_bc // nchunks
    c = pid_bc % nchunks
    g = (split * HPB) // heads_per_group
    seqlen = x.shape[1]
    k_tile = c * (Q // T) + kt

    if k_tile * T < seqlen:
        k_pos = kt * T + ct.arange(T, dtype=ct.int32)
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
                CBLt = CBt_km * Lt
                Mt = CBLt * dt_k[:, None]
                dCBt = dMt * Lt * dt_k[:, None]
                acc_dx = ct.mma(Mt.astype(x.dtype), dy_m, acc_dx)
                C_m = load_rows(C, b, m_tile, g, T, NS).astype(x.dtype)
                acc_dB = ct.mma(dCBt.astype(x.dtype), C_m, acc_dB)
                ddt_k = ddt_k + ct.sum(dMt * CBLt, axis=1)
            da_k = -ddt_k * dt_k

            # 2. through the state this chunk adds, with G = dL/ds
            G = ct.load(dstates, (b, c, h, 0, 0), shape=(1, 1, 1, PP, NS), padding_mode=ZERO)
            G = G.reshape((PP, NS)).astype(x.dtype)
            a_last = ct.load(dA_cumsum, (b, h, c, Q - 1), shape=()) * LOG2E
            decay_k = ct.exp2(ct.minimum(a_last - a_k, 0.0), flush_to_zero=True)
            w_k = decay_k * dt_k
            B_k = load_rows(B, b, k_tile, g, T, NS).astype(x.dtype)
            BG = ct.mma(B_k, ct.transpose(G), ct.zeros((T, PP), dtype=ct.float32))
            xG = ct.mma(x_k, G, ct.zeros((T, NS), dtype=ct.float32))
            acc_dx = acc_dx + w_k[:, None] * BG
            acc_dB = acc_dB + w_k[:, None] * xG
            r_k = ct.sum(x_k.astype(ct.float32) * BG, axis=1)
            ddt_k = ddt_k + decay_k * r_k
            da_k = da_k - w_k * r_k

            # 3. the skip connection
            if D_MODE != D_NONE:
                dy_k = load_rows(dy, b, k_tile, h, T, PP).astype(ct.float32)
                if D_MODE == D_PER_HEAD:
                    D_h = ct.load(D, (h,), shape=()).astype(ct.float32)
                else:
                    D_h = ct.load(D, (h, 0), shape=(1, PP), padding_mode=ZERO).astype(ct.float32)
                acc_dx = acc_dx + dy_k * D_h
                # the gradient of D: y += D x gives dD = sum dy ∘ x, this tile's part
                dD_k = ct.sum(dy_k * x_k.astype(ct.float32), axis=0)
                ct.store(dD, (b, k_tile, h, 0), dD_k.reshape((1, 1, 1, PP)))

            ct.store(dx, (b, k_tile, h, 0), acc_dx.astype(dx.dtype).reshape((1, T, 1, PP)))
            ct.store(ddt, (b, h, c, kt), ddt_k.reshape((1, 1, 1, T)))
            ct.store(da, (b, h, c, kt), da_k.reshape((1, 1, 1, T)))
            ct.store(da_last, (b, h, c, kt), (w_k * r_k).reshape((1, 1, 1, T)))
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


@ct.kernel
def chunk_bwd_dc_heads_kernel(x, dy, dt_out, dA_cumsum, C, B, CB, chunk_init_states,   # inputs
                              dC, da,                                                  # outputs
                              heads_per_group: int, HPB: int,
                              Q: ct.Constant[int], T: ct.Constant[int], PP: ct.Constant[int],
                              NS: ct.Constant[int]):
    """Kernel 4 for HPB heads of one group, one block per T rows: da (b, h, nchunks, Q) float32 per head;
    dC (b, l, h / HPB, n) float32, the sum over the block's heads."""
    mt = ct.bid(0)
    pid_bc = ct.bid(1)
    split = ct.bid(2)
    nchunks = dA_cumsum.shape[2]
    b = pid_bc // nchunks
    c = pid_bc % nchunks
    g = (split * HPB) // heads_per_group
    seqlen = x.shape[1]
    m_tile = c * (Q // T) + mt

    if m_tile * T < seqlen:
        m_pos = mt * T + ct.arange(T, dtype=ct.int32)
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
                L = decay_tile(a_m, a_k, m_pos, k_pos)
                dCB = dM * L * dt_k[None, :]
                da_m = da_m + ct.sum(dCB * CB_mk, axis=1)
                B_k = load_rows(B, b, k_tile, g, T, NS).astype(x.dtype)
                acc_dC = ct.mma(dCB.astype(x.dtype), B_k, acc_dC)

            # 2. through the state entering the chunk (after the loop: one (T, n) float32 tile less in it)
            S = ct.load(chunk_init_states, (b, c, h, 0, 0), shape=(1, 1, 1, PP, NS), padding_mode=ZERO)
            S = S.reshape((PP, NS)).astype(x.dtype)
            dC_S = ct.mma(dy_m, S, ct.zeros((T, NS), dtype=ct.float32))
            dC_S = dC_S * ct.exp2(a_m, flush_to_zero=True)[:, None]
            C_m = load_rows(C, b, m_tile, g, T, NS).astype(ct.float32)
            da_m = da_m + ct.sum(dC_S * C_m, axis=1)
            acc_dC = acc_dC + dC_S
            ct.store(da, (b, h, c, mt), da_m.reshape((1, 1, 1, T)))
        ct.store(dC, (b, m_tile, split, 0), acc_dC.reshape((1, T, 1, NS)))
    else:
        for hh in range(HPB):
            ct.store(da, (b, split * HPB + hh, c, mt), ct.zeros((1, 1, 1, T), dtype=ct.float32))


# ----------------------------------------------------------------------------------------------------
# Host side
# ----------------------------------------------------------------------------------------------------
#: most heads one block walks: enough to cut the partial sums of dB and dC by this factor. On an H200 at
#: b8-l4096-h80 (bench-train --sweep, 2026-12-06) 8 and 16 heads per block timed alike, 4 was 6% slower, 1
#: was 1.7x slower; on an H100 (2026-12-06) at b2-l8192-h128-g8 (16 heads a group) 16 heads took the chunk
#: stage from 1.79 to 1.62 ms, and at b1-l32768-h80 and b8-l4096-h80 8, 10 and 16 were within 1%
MAX_HEADS_PER_BLOCK = 16
#: blocks per SM the compiler budgets for (a hint): at 2 both kernels fit their tiles in registers on sm_90
#: (at the compiler's own choice they spill: ``python -m mamba2_tutorial compile`` shows the stack). On an
#: H200 (bench-train --sweep, 2026-12-06) 2 was 3x faster than 3 and 5x faster than the compiler's choice
OCCUPANCY = 2
#: fewest waves of blocks (SMs × OCCUPANCY blocks each) the head-walking grid should make: on a small problem
#: fewer heads per block keep every SM busy, instead of a few SMs walking many heads
MIN_WAVES = 2

def heads_per_block(h: int, g: int, cap: int = MAX_HEADS_PER_BLOCK, *, blocks_per_head: int = 0,
                    sms: int = H200.sm_count, occupancy: int | None = OCCUPANCY) -> int:
    """How many heads of one group a block walks: the largest divisor of the group size h / g that is at
    most ``cap`` and, given ``blocks_per_head`` (the grid's other dimensions, (Q / T) · b · nchunks), still
    makes :data:`MIN_WAVES` waves of blocks (``occupancy`` per SM) on ``sms`` SMs; where none does, 1 (the
    most blocks)."""
    per_group = h // g
    divisors = [d for d in range(1, min(cap, per_group) + 1) if per_group % d == 0]
    wave = sms * (occupancy or 1)
    enough = [d for d in divisors if not blocks_per_head or blocks_per_head * (h // d) >= MIN_WAVES * wave]
    return max(enough, default=1)


@functools.lru_cache(maxsize=256)
def chunk_bwd_heads_plan(b: int, l: int, h: int, p: int, g: int, n: int, Q: int, dtype: torch.dtype,
                         hpb: int) -> LaunchPlan:
    """Grid of both head-walking kernels, (Q / T, b · nchunks, h / HPB), and their tiles (T as the taught
    kernels: 64, 32 for float32)."""
    T = min(Q, 32 if dtype == torch.float32 else 64)
    return LaunchPlan((Q // T, b * cdiv(l, Q), h // hpb),
                      {"Q": Q, "T": T, "PP": next_power_of_two(p), "NS": next_power_of_two(n), "HPB": hpb})


class ChunkBwdHeads:
    """The fast kernels 3 and 4 of one backward, launched in two steps: :meth:`launch_dc` (C Bᵀ and kernel 4,
    which need no state gradient) and :meth:`launch_dx` (kernel 3, which reads dstates). The fast backward
    runs the first beside the state stage, on a second stream; every buffer is allocated here, on the
    caller's stream, before either. Arguments as :func:`launch_chunk_bwd_heads`'s."""

    def __init__(self, x, dy, dt_out, dA_cumsum, C, B, chunk_init_states, D, poison=False,
                 hpb: int | None = None, occupancy: int | None = OCCUPANCY):
        b, l, h, p = x.shape
        g, n = C.shape[2], C.shape[3]
        nchunks, Q = dA_cumsum.shape[2], dA_cumsum.shape[3]
        if hpb is None:
            T = chunk_bwd_heads_plan(b, l, h, p, g, n, Q, x.dtype, 1).tiles["T"]
            hpb = heads_per_block(h, g, blocks_per_head=(Q // T) * b * nchunks, sms=sm_count(x.device),
                                  occupancy=occupancy)
        if hpb < 1 or (h // g) % hpb:
            raise ValueError(f"hpb (heads per block) must divide the group size h / g = {h // g}, got {hpb}")
        device = x.device
        self.inputs = (x, dy, dt_out, dA_cumsum, C, B)
        self.chunk_init_states, self.D, self.hpb, self.occupancy = chunk_init_states, D, hpb, occupancy
        self.plan = chunk_bwd_heads_plan(b, l, h, p, g, n, Q, x.dtype, hpb)
        self.CB = allocate((b, nchunks, g, Q, Q), torch.float32, device, poison)
        self.CBt = allocate((b, nchunks, g, Q, Q), torch.float32, device, poison)
        splits = h // hpb
        self.dx = allocate((b, l, h, p), x.dtype, device, poison)
        self.dB = allocate((b, l, splits, n), torch.float32, device, poison)
        self.dC = allocate((b, l, splits, n), torch.float32, device, poison)
        self.ddt, self.da_key, self.da_row, self.da_last = (
            allocate((b, h, nchunks, Q), torch.float32, device, poison) for _ in range(4))
        self.D_arg = D if D is not None else placeholder(device, torch.float32, 1)
        PP = self.plan.tiles["PP"]
        self.dD_tiles = (allocate((b, nchunks * (Q // self.plan.tiles["T"]), h, PP), torch.float32, device,
                                  poison) if D is not None else placeholder(device, torch.float32, 4))

    def launch_dc(self, backend: str) -> None:
        """C Bᵀ in both orientations, then kernel 4: dC's partial sums and da of the rows."""
        x, dy, dt_out, dA_cumsum, C, B = self.inputs
        h, g, t = x.shape[2], C.shape[2], self.plan.tiles
        Q, T = t["Q"], t["T"]
        launch(bwd_cb_kernel, (Q // T, self.plan.grid[1], g), (C, B, self.CB, self.CBt, Q, T, t["NS"]),
               backend)
        launch(chunk_bwd_dc_heads_kernel, self.plan.grid,
               (x, dy, dt_out, dA_cumsum, C, B, self.CB, self.chunk_init_states, self.dC, self.da_row,
                h // g, self.hpb, Q, T, t["PP"], t["NS"]), backend, self.occupancy)

    def launch_dx(self, dstates, backend: str) -> None:
        """Kernel 3 (after :meth:`launch_dc`, whose C Bᵀ it reads): dx, dB's partial sums, ddt, da of the
        keys, da_last and dD's tile sums."""
        x, dy, dt_out, dA_cumsum, C, B = self.inputs
        h, g, t = x.shape[2], C.shape[2], self.plan.tiles
        launch(chunk_bwd_dx_heads_kernel, self.plan.grid,
               (x, dy, dt_out, dA_cumsum, C, B, self.CBt, dstates, self.D_arg, self.dx, self.dB, self.ddt,
                self.da_key, self.da_last, self.dD_tiles, h // g, self.hpb, t["Q"], t["T"], t["PP"],
                t["NS"], d_mode(self.D)), backend, self.occupancy)

    def results(self):
        """``(dx, dB, dC, ddt, da, da_last, dD)`` once both launches ran: the partial sums of each group's
        heads added, dD in D's shape."""
        x, C, D = self.inputs[0], self.inputs[4], self.D
        b, l, h, p = x.shape
        g, n = C.shape[2], C.shape[3]
        dB, dC = self.dB, self.dC
        splits = h // self.hpb
        if splits != g:                      # partial sums of each group's heads
            dB = dB.view(b, l, g, splits // g, n).sum(3)
            dC = dC.view(b, l, g, splits // g, n).sum(3)
        dD = None
        if D is not None:
            dD = self.dD_tiles[..., :p].sum((0, 1))                 # (h, p)
            dD = dD.sum(-1) if D.ndim == 1 else dD
        return self.dx, dB, dC, self.ddt, self.da_key + self.da_row, self.da_last, dD


def launch_chunk_bwd_heads(x, dy, dt_out, dA_cumsum, C, B, chunk_init_states, dstates, D, backend,
                           poison=False, hpb: int | None = None, occupancy: int | None = OCCUPANCY):
    """The fast kernels 3 and 4: ``(dx in x's dtype, dB (b, l, g, n), dC (b, l, g, n), ddt, da, da_last,
    dD)``, float32 except dx: the contract of the taught ``launch_chunk_bwd``, and dD in D's shape (None
    without D) from kernel 3's per-tile sums. ``hpb``: heads per block (a divisor of the group size;
    default :func:`heads_per_block` for this grid and GPU); ``occupancy``: the compiler hint of both
    head-walking kernels."""
    work = ChunkBwdHeads(x, dy, dt_out, dA_cumsum, C, B, chunk_init_states, D, poison, hpb, occupancy)
    work.launch_dc(backend)
    work.launch_dx(dstates, backend)
    return work.results()


def _example_args(kernel_name, dtype, Q, D_MODE=D_PER_HEAD, b=2, l=300, h=4, p=48, g=2, n=80, hpb=2):
    def make():
        gen = torch.Generator().manual_seed(0)
        nchunks = cdiv(l, Q)
        plan = chunk_bwd_heads_plan(b, l, h, p, g, n, Q, dtype, hpb)
        t = plan.tiles
        x, dy = (torch.randn(b, l, h, p, generator=gen).to(dtype) for _ in range(2))
        C, B = (torch.randn(b, l, g, n, generator=gen).to(dtype) for _ in range(2))
        dt_out = torch.rand(b, h, nchunks, Q, generator=gen)
        dA_cumsum = -dt_out.cumsum(-1)
        CB = torch.randn(b, nchunks, g, Q, Q, generator=gen)
        per_pos = torch.empty(b, h, nchunks, Q)
        partial = torch.empty(b, l, h // hpb, n)
        if kernel_name == "cb":
            return (Q // t["T"], b * nchunks, g), (C, B, CB, CB.clone(), Q, t["T"], t["NS"])
        if kernel_name == "dx":
            D = torch.randn(h, p, generator=gen) if D_MODE == D_PER_CHANNEL else torch.randn(h, generator=gen)
            args = (x, dy, dt_out, dA_cumsum, C, B, CB, torch.randn(b, nchunks, h, p, n, generator=gen), D,
                    torch.empty_like(x), partial, per_pos, per_pos.clone(), per_pos.clone(),
                    torch.empty(b, nchunks * (Q // t["T"]), h, t["PP"]),
                    h // g, hpb, Q, t["T"], t["PP"], t["NS"], D_MODE)
            return plan.grid, args
        args = (x, dy, dt_out, dA_cumsum, C, B, CB, torch.randn(b, nchunks, h, p, n, generator=gen).to(dtype),
                partial, per_pos, h // g, hpb, Q, t["T"], t["PP"], t["NS"])
        return plan.grid, args

    return make


SPECS: list[KernelSpec] = [
    KernelSpec("fast.bwd_cb_bf16_q256", bwd_cb_kernel, _example_args("cb", torch.bfloat16, 256, p=64, n=128)),
    KernelSpec("fast.bwd_dx_heads_bf16_q256", chunk_bwd_dx_heads_kernel,
               _example_args("dx", torch.bfloat16, 256, D_NONE, p=64, n=128, g=1)),
    KernelSpec("fast.bwd_dc_heads_bf16_q256", chunk_bwd_dc_heads_kernel,
               _example_args("dc", torch.bfloat16, 256, p=64, n=128, g=1)),
    KernelSpec("fast.bwd_cb_f32_q64", bwd_cb_kernel, _example_args("cb", torch.float32, 64)),
    KernelSpec("fast.bwd_dx_heads_f32_q64_dchannel", chunk_bwd_dx_heads_kernel,
               _example_args("dx", torch.float32, 64, D_PER_CHANNEL)),
    KernelSpec("fast.bwd_dc_heads_f32_q64", chunk_bwd_dc_heads_kernel,
               _example_args("dc", torch.float32, 64)),
]
