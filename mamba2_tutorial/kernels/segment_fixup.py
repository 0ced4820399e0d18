"""The segmented state stage's fix-up: the entering states made true in place, one launch.

``kernels.segments`` cuts each (batch, head)'s chain of chunks into segments that run side by side, every
segment starting from a zero state: chunk c of segment s = c // cps gets the segment-local entering state
L_c. The true entering state adds what came before the segment, decayed to chunk c:

    S_c = L_c + exp(seg_prefix[c]) · K_s          K_s: the true state entering segment s

The segmented stage of ``LONG_BF16`` leaves that sum to the scan (one more mma per row tile, on the carry
K_s). This kernel forms S_c instead, once per chunk, in place, so that the scan reads true states and needs
no carry. It pays most where few chunks need fixing: ``SSDConfig.state_tail_segments`` cuts only the chains
that would run in the fused stage's last, partial wave into two segments, and this kernel then rewrites the
second halves of those chains. ``SSDConfig.segment_fixup`` uses it for every head of the segmented stage
instead, trading a pass over most entering states for the scan's carry mma (attempt 27 of
docs/perf-notes.md).

Each block fixes one state tile of one chunk and carries K itself over the segments before its own (2 to
16 of them), so no state passing over the segments is needed; the blocks of one extra index per (batch,
head) write the final states:

    grid = (state tiles,  b · (nchunks - first_chunk + 1),  h)

``first_chunk`` is cps (segment 0's local states are already true) unless there are initial states, which
enter every chunk of segment 0 too.
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ._host import LaunchPlan, cdiv, launch, placeholder
from .spec import KernelSpec
from .state_passing import state_passing_tiles

__all__ = ["SPECS", "launch_segment_fixup", "segment_fixup_kernel", "segment_fixup_plan"]

ZERO = ct.PaddingMode.ZERO
LOG2E = 1.4426950408889634  # exp(u) = exp2(u · log2(e))


@ct.kernel
def segment_fixup_kernel(seg_prefix, seg_states, seg_decay, initial_states,   # inputs
                         chunk_init_states,                                   # updated in place
                         final_states,                                        # output
                         chunks_per_segment: int, first_chunk: int,
                         TP: ct.Constant[int], TN: ct.Constant[int], HAS_INITIAL_STATES: ct.Constant[bool]):
    """The segmented stage's entering states made true in place: S_c = L_c + exp(seg_prefix[c]) · K_s, with
    K_s the true state entering segment s = c // cps, carried here through segments 0 .. s-1:

        K_0 = initial_states (or 0),   K_s+1 = exp(seg_decay[s]) · K_s + seg_states[s]

    chunk_init_states (b, nchunks, h, p, n) holds L_c (``chunk_state_segments_kernel``) and receives S_c;
    seg_prefix (b, h, nchunks), seg_states (b, nseg, h, p, n), seg_decay (b, h, nseg, 1) float32 as that
    kernel wrote them; final_states (b, h, p, n) float32 receives K_nseg.

    Grid (state tiles, b · m, h) with m = nchunks - first_chunk + 1: block (i, b·m + j, h) fixes chunk
    c = first_chunk + j, or, for j = m - 1, writes the final state. ``first_chunk`` is 0 with initial states,
    else cps: segment 0's local states are then already true. Each block walks its s segments itself (few:
    the segmented stage has 2 to 16), so this one launch replaces state passing over the segments and
    the scan's carry mma."""
    pid_pn = ct.bid(0)
    pid_bj = ct.bid(1)
    h = ct.bid(2)
    nchunks = chunk_init_states.shape[1]
    nseg = seg_states.shape[1]
    m = nchunks - first_chunk + 1
    b = pid_bj // m
    c = first_chunk + pid_bj % m
    n_tiles = ct.cdiv(chunk_init_states.shape[4], TN)
    i_p = pid_pn // n_tiles
    i_n = pid_pn % n_tiles
    if HAS_INITIAL_STATES:
        K = ct.load(initial_states, (b, h, i_p, i_n), shape=(1, 1, TP, TN), padding_mode=ZERO)
        K = K.reshape((TP, TN)).astype(ct.float32)
    else:
        K = ct.zeros((TP, TN), dtype=ct.float32)
    s_end = nseg if c == nchunks else c // chunks_per_segment
    for s in range(s_end):
        decay = ct.load(seg_decay, (b, h, s, 0), shape=())
        local = ct.load(seg_states, (b, s, h, i_p, i_n), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        K = ct.exp2(decay * LOG2E, flush_to_zero=True) * K + local.reshape((TP, TN))
    if c == nchunks:
        ct.store(final_states, (b, h, i_p, i_n), K.reshape((1, 1, TP, TN)))
    else:
        prefix = ct.load(seg_prefix, (b, h, c), shape=())
        L = ct.load(chunk_init_states, (b, c, h, i_p, i_n), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S = L.reshape((TP, TN)).astype(ct.float32) + ct.exp2(prefix * LOG2E, flush_to_zero=True) * K
        ct.store(chunk_init_states, (b, c, h, i_p, i_n),
                 S.astype(chunk_init_states.dtype).reshape((1, 1, 1, TP, TN)))


@functools.lru_cache(maxsize=256)
def segment_fixup_plan(b: int, nchunks: int, h: int, p: int, n: int, cps: int,
                       has_initial_states: bool) -> LaunchPlan:
    """Grid and tiles of :data:`segment_fixup_kernel`: one block per (state tile, batch · chunk to fix or
    final state, head), state_passing's tiles. ``tiles["first_chunk"]``: 0 with initial states, else cps."""
    TP, TN = state_passing_tiles(p, n)
    first = 0 if has_initial_states else min(cps, nchunks)
    return LaunchPlan((cdiv(p, TP) * cdiv(n, TN), b * (nchunks - first + 1), h),
                      {"TP": TP, "TN": TN, "first_chunk": first})


def launch_segment_fixup(seg_prefix, seg_states, seg_decay, initial_states, chunk_init_states, final_states,
                         chunks_per_segment, backend):
    """Launch :data:`segment_fixup_kernel` (no argument checks): chunk_init_states updated in place,
    final_states written."""
    b, nchunks, h, p, n = chunk_init_states.shape
    has_init = initial_states is not None
    plan = segment_fixup_plan(b, nchunks, h, p, n, chunks_per_segment, has_init)
    t = plan.tiles
    init = initial_states if has_init else placeholder(chunk_init_states.device, torch.float32, 4)
    launch(segment_fixup_kernel, plan.grid,
           (seg_prefix, seg_states, seg_decay, init, chunk_init_states, final_states, chunks_per_segment,
            t["first_chunk"], t["TP"], t["TN"], has_init), backend)


def _example_args(dtype, b=2, nchunks=5, h=3, p=48, n=80, cps=2, init=True):
    def make():
        gen = torch.Generator().manual_seed(0)
        nseg = cdiv(nchunks, cps)
        plan = segment_fixup_plan(b, nchunks, h, p, n, cps, init)
        t = plan.tiles
        args = (-torch.rand(b, h, nchunks, generator=gen), torch.randn(b, nseg, h, p, n, generator=gen),
                -torch.rand(b, h, nseg, 1, generator=gen), torch.randn(b, h, p, n, generator=gen),
                torch.randn(b, nchunks, h, p, n, generator=gen).to(dtype), torch.empty(b, h, p, n),
                cps, t["first_chunk"], t["TP"], t["TN"], init)
        return plan.grid, args

    return make


SPECS: list[KernelSpec] = [
    # what SSDConfig.state_tail_segments launches at chunk size 256 (bf16 entering states, two segments)
    KernelSpec("ssd.segment_fixup_bf16", segment_fixup_kernel,
               _example_args(torch.bfloat16, nchunks=16, p=64, n=128, cps=8, init=False)),
    KernelSpec("ssd.segment_fixup_f32_init", segment_fixup_kernel, _example_args(torch.float32)),
]
