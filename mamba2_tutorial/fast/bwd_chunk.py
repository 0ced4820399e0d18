"""The fast chunk backward: backward kernels 3 and 4 with C Bᵀ computed once and the heads of a group summed
in the block.

The taught kernels 3 and 4 (``kernels/bwd_chunk.py``) run one head per block. Two things they do grow with
the number of heads that share a group (Mamba-2 layers have 24 to 128 heads and one group):

- every head rebuilds the same C Bᵀ tile: it depends on the chunk and the group, not the head. At n = 128,
  p = 64 it is a third of kernel 3's tensor-core work and two fifths of kernel 4's;
- every head writes its own float32 dB and dC (b, l, h, n), which the host then sums over the group's heads:
  at b8-l4096-h80 that is 2.7 GB written and read again, more traffic than the rest of the backward.

So, as the forward's chunk scan does, C Bᵀ is computed once per (chunk, group) by the forward's
``chunk_cb_kernel`` (``chunk_cb.py``), here in both orientations (kernel 3 multiplies by its transpose), and
each block of kernels 3 and 4 walks ``HPB`` heads of one group, adding their dB (dC) into one float32 tile
that it stores once:

    chunk_cb_kernel      CB[m, k] = C_m · B_k and CBt[k, m], the causal (T, T) tiles   (Q/T, b·nchunks, g)
    chunk_bwd_dc_heads   kernel 4 for HPB heads: da per head, dC summed over them     (Q/T, b·nchunks, h/HPB)
    chunk_bwd_dx_heads   kernel 3 for HPB heads: dx, ddt, da, da_last and dD's part per head;
                         dB summed over the HPB heads                                 (Q/T, b·nchunks, h/HPB)

(the grids on the right; the kernels in ``bwd_dc_heads.py`` and ``bwd_dx_heads.py``). This module holds the
stage: the head split (:func:`heads_per_block`, from a :class:`~mamba2_tutorial.fast.config.ChunkGrads`),
the buffers and the launches in two steps (:class:`ChunkBwdHeads`). The host adds the h/(g·HPB) partial sums
of each group (none when HPB is the group's size). The math is the taught kernels' (their helpers);
``tests/test_fast_backward.py`` keeps the two equal. Both kernels also take packed rows (the call's
``seq_idx``, ``fast/resets.py``), which the taught ones do not.
"""

from __future__ import annotations

import functools

import torch

from ..kernels._host import LaunchPlan, allocate, cdiv, next_power_of_two, placeholder
from ..kernels.backward import GradCall
from ..kernels.bwd_chunk import chunk_bwd_plan, example_chunk_inputs
from ..kernels.chunk_scan import D_PER_HEAD
from ..runtime.hardware import sm_count
from ..runtime.specs import KernelSpec
from .bwd_dc_heads import launch_dc_heads
from .bwd_dx_heads import launch_dx_heads
from .chunk_cb import chunk_cb_kernel, chunk_cb_plan, launch_chunk_cb_both
from .config import ChunkGrads
from .resets import seq_idx_arg

__all__ = ["SPECS", "ChunkBwdHeads", "chunk_bwd_heads_plan", "heads_per_block", "launch_chunk_bwd_heads"]


def heads_per_block(h: int, g: int, *, sms: int, settings: ChunkGrads, blocks_per_head: int = 0) -> int:
    """How many heads of one group a block walks: the largest divisor of the group size h / g that is at
    most ``settings.max_heads_per_block`` and, given ``blocks_per_head`` (the grid's other dimensions,
    (Q / T) · b · nchunks), still makes ``settings.min_waves`` waves of blocks (``settings.occupancy`` per
    SM) on ``sms`` SMs; where none does, 1 (the most blocks)."""
    per_group = h // g
    divisors = [d for d in range(1, min(settings.max_heads_per_block, per_group) + 1) if per_group % d == 0]
    wave = sms * (settings.occupancy or 1)
    enough = [d for d in divisors
              if not blocks_per_head or blocks_per_head * (h // d) >= settings.min_waves * wave]
    return max(enough, default=1)


@functools.lru_cache(maxsize=256)
def chunk_bwd_heads_plan(b: int, l: int, h: int, p: int, n: int, Q: int, dtype: torch.dtype,
                         hpb: int) -> LaunchPlan:
    """Grid of both head-walking kernels, (Q / T, b · nchunks, h / HPB), and their tiles: the taught
    kernels' (:func:`~mamba2_tutorial.kernels.bwd_chunk.chunk_bwd_plan`), with HPB."""
    taught = chunk_bwd_plan(b, l, h, p, n, Q, dtype)
    return LaunchPlan((*taught.grid[:2], h // hpb), {**taught.tiles, "HPB": hpb})


class ChunkBwdHeads:
    """The fast kernels 3 and 4 of one backward, launched in two steps: :meth:`launch_dc` (C Bᵀ and kernel 4,
    which need no state gradient) and :meth:`launch_dx` (kernel 3, which reads dstates). The fast backward
    runs the first beside the state stage, on a second stream; every buffer is allocated here, on the
    caller's stream, before either. Arguments as :func:`launch_chunk_bwd_heads`'s (the call's
    ``dfinal_states`` is the state stage's, unused here)."""

    def __init__(self, call: GradCall, settings: ChunkGrads, hpb: int | None = None):
        x, C, D, poison = call.x, call.C, call.D, call.poison
        b, l, h, p = x.shape
        g, n = C.shape[2], C.shape[3]
        nchunks, Q = call.dA_cumsum.shape[2], call.dA_cumsum.shape[3]
        if hpb is None:
            T = chunk_bwd_plan(b, l, h, p, n, Q, x.dtype).tiles["T"]
            hpb = heads_per_block(h, g, sms=sm_count(x.device), settings=settings,
                                  blocks_per_head=(Q // T) * b * nchunks)
        if hpb < 1 or (h // g) % hpb:
            raise ValueError(f"hpb (heads per block) must divide the group size h / g = {h // g}, got {hpb}")
        device = x.device
        self.inputs = (x, call.dy, call.dt_out, call.dA_cumsum, C, call.B)
        self.chunk_init_states, self.D, self.hpb = call.chunk_init_states, D, hpb
        self.backend, self.occupancy = call.backend, settings.occupancy
        self.packed = seq_idx_arg(call)           # (seq_idx or a placeholder, HAS_SEQ_IDX)
        self.plan = chunk_bwd_heads_plan(b, l, h, p, n, Q, x.dtype, hpb)
        self.CB = allocate((b, nchunks, g, Q, Q), torch.float32, device, poison)
        self.CBt = allocate((b, nchunks, g, Q, Q), torch.float32, device, poison)
        splits = h // hpb
        self.dx = allocate((b, l, h, p), x.dtype, device, poison)
        self.dB = allocate((b, l, splits, n), torch.float32, device, poison)
        self.dC = allocate((b, l, splits, n), torch.float32, device, poison)
        self.ddt, self.da_key, self.da_row, self.da_last = (
            allocate((b, h, nchunks, Q), torch.float32, device, poison) for _ in range(4))
        PP = self.plan.tiles["PP"]
        self.dD_tiles = (allocate((b, nchunks * (Q // self.plan.tiles["T"]), h, PP), torch.float32, device,
                                  poison) if D is not None else placeholder(device, torch.float32, 4))

    def launch_dc(self) -> None:
        """C Bᵀ in both orientations, then kernel 4: dC's partial sums and da of the rows."""
        C, B = self.inputs[4], self.inputs[5]
        launch_chunk_cb_both(C, B, self.CB, self.CBt, self.plan.tiles["T"], self.backend)
        launch_dc_heads(self)

    def launch_dx(self, dstates) -> None:
        """Kernel 3 (after :meth:`launch_dc`, whose C Bᵀ it reads): dx, dB's partial sums, ddt, da of the
        keys, da_last and dD's tile sums."""
        launch_dx_heads(self, dstates)

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


def launch_chunk_bwd_heads(call: GradCall, dstates, settings: ChunkGrads | None = None,
                           hpb: int | None = None):
    """The fast kernels 3 and 4 for ``call`` (a :class:`~mamba2_tutorial.kernels.backward.GradCall`; its
    ``dfinal_states`` is the state stage's, unused here) and ``dstates`` (the state stage's), ``(dx in x's
    dtype, dB (b, l, g, n), dC (b, l, g, n), ddt, da, da_last, dD)``, float32 except dx: the contract of the
    taught ``launch_chunk_bwd``, and dD in D's shape (None without D) from kernel 3's per-tile sums.
    ``settings``: the stage's :class:`~mamba2_tutorial.fast.config.ChunkGrads` (default: the shipped table's
    for this problem); ``hpb``: heads per block (a divisor of the group size; default
    :func:`heads_per_block` for this grid and GPU)."""
    if settings is None:
        from .tuning import backward_config

        x = call.x
        b, l, h, p = x.shape
        settings = backward_config(b, l, h, p, call.C.shape[3], call.dA_cumsum.shape[3], x.dtype,
                                   x.device).chunk
    work = ChunkBwdHeads(call, settings, hpb)
    work.launch_dc()
    work.launch_dx(dstates)
    return work.results()


def _cb_example_args(dtype, Q, b=2, l=300, g=2, n=80):
    def make():
        e = example_chunk_inputs(dtype, Q, D_PER_HEAD, b, l, g, 1, g, n)
        T = chunk_bwd_plan(b, l, g, 1, n, Q, dtype).tiles["T"]
        plan = chunk_cb_plan(b, l, g, n, Q, T, T)
        CB = torch.empty(b, cdiv(l, Q), g, Q, Q)
        return plan.grid, (e["C"], e["B"], CB, CB.clone(), Q, T, T, next_power_of_two(n), True)

    return make


#: the C Bᵀ kernel as this stage launches it (both orientations); the forward's launches of it are among
#: ``specs.py``'s
SPECS: list[KernelSpec] = [
    KernelSpec("fast.bwd_cb_bf16_q256", chunk_cb_kernel, _cb_example_args(torch.bfloat16, 256, n=128)),
    KernelSpec("fast.bwd_cb_f32_q64", chunk_cb_kernel, _cb_example_args(torch.float32, 64)),
]
