"""``ssd_backward_fast``: the taught backward's host steps around the fast path's backward kernels.

    1-2. the state gradient carried backwards: one launch, dS_out kept on chip   (``bwd_states.py``)
    3-4. every gradient inside the chunks: C Bᵀ once per group, heads summed     (``bwd_chunk.py``)
         (C Bᵀ and kernel 4 can run on a second stream beside 1-2: they need no state gradient)

Everything else (the gate, the reverse cumsum for dt and A, dt_bias / softplus / dt_limit) is the taught
``ssd_backward_taught``'s code, called with these two stages. ``ssd_forward`` uses it under autograd.

The fused state stage runs one block per (state tile, batch, head), each walking every chunk in turn: with
fewer such blocks than SMs (one long sequence, few heads) that walk leaves SMs idle, while the taught
kernel 1 is parallel over the chunks. Below :data:`MIN_FUSED_BLOCKS_PER_SM` blocks per SM the taught kernels
1 and 2 run instead (the forward's tuning makes the same call with its segmented stage).
"""

from __future__ import annotations

import functools

import torch

from ..kernels.backward import SSDGrads, ssd_backward_taught
from ..kernels.bwd_states import launch_state_grads
from ..runtime.hardware import H200, sm_count
from .bwd_chunk import ChunkBwdHeads
from .bwd_states import launch_state_grads_fused, state_grads_fused_plan

__all__ = ["MIN_FUSED_BLOCKS_PER_SM", "OVERLAP", "kernel_stages", "ssd_backward_fast", "state_grads_stage",
           "uses_fused_state_grads"]

#: fewest blocks (state tiles × batch × heads) per SM for the fused state stage. On an H200 (bench-train
#: --stages, 2026-12-06) it beat the taught kernels 1 and 2 at every shape timed, down to 1.2 blocks per SM
#: (b1-l32768-h80: 0.545 against 1.071 ms, 128 chunks walked; b4-l2048-h24: 0.046 against 0.068 ms)
MIN_FUSED_BLOCKS_PER_SM = 1


def uses_fused_state_grads(b: int, l: int, h: int, p: int, n: int, Q: int, dtype: torch.dtype,
                           sms: int = H200.sm_count) -> bool:
    """Whether the fast backward runs the fused state stage on a GPU of ``sms`` SMs (else the taught kernels
    1 and 2)."""
    grid = state_grads_fused_plan(b, l, h, p, n, Q, dtype).grid
    return grid[0] * grid[1] * grid[2] >= MIN_FUSED_BLOCKS_PER_SM * sms


def state_grads_stage(dy, C, dA_cumsum, chunk_init_states, dfinal_states, backend, poison=False):
    """The fast backward's kernels 1-2: the fused stage (dstates in dy's dtype), or the taught kernels
    (float32 dstates) where :func:`uses_fused_state_grads` says no. The contract of the taught
    ``launch_state_grads``."""
    b, l, h, p = dy.shape
    n, Q = C.shape[3], dA_cumsum.shape[3]
    if uses_fused_state_grads(b, l, h, p, n, Q, dy.dtype, sm_count(dy.device)):
        return launch_state_grads_fused(dy, C, dA_cumsum, chunk_init_states, dfinal_states, backend, poison)
    return launch_state_grads(dy, C, dA_cumsum, chunk_init_states, dfinal_states, backend, poison)


def kernel_stages(dy, x, dt_out, dA_cumsum, C, B, chunk_init_states, dfinal_states, D, backend, poison=False,
                  overlap: bool | None = None):
    """Backward kernels 1-4: ``(state stage results, chunk stage results)``, the contracts of
    :func:`state_grads_stage` and :func:`~mamba2_tutorial.fast.bwd_chunk.launch_chunk_bwd_heads`.

    Kernel 4 (dC) and the C Bᵀ tiles need no state gradient, so with ``overlap`` on a GPU they run on a
    second stream beside the state stage, whose walk over the chunks leaves SMs idle where it has few blocks;
    kernel 3 (dx, dB) waits for both. Otherwise the state stage, kernel 4 and kernel 3 run in that order on
    one stream. ``overlap``: None for :data:`OVERLAP` (the CPU executor always runs the launches in order,
    as it runs everything)."""
    work = ChunkBwdHeads(x, dy, dt_out, dA_cumsum, C, B, chunk_init_states, D, poison)   # buffers, here
    overlap = OVERLAP if overlap is None else overlap
    if backend == "gpu" and overlap:
        main = torch.cuda.current_stream(x.device)
        side = _side_stream(x.device)
        side.wait_stream(main)                    # the inputs and buffers are ready before kernel 4 starts
        # the state stage first, so that its few long-walking blocks take their SMs before kernel 4's many
        # short ones fill the rest
        states = state_grads_stage(dy, C, dA_cumsum, chunk_init_states, dfinal_states, backend, poison)
        with torch.cuda.stream(side):
            work.launch_dc(backend)
        main.wait_stream(side)                    # kernel 3 reads the C Bᵀ tiles; the results follow it
    else:
        states = state_grads_stage(dy, C, dA_cumsum, chunk_init_states, dfinal_states, backend, poison)
        work.launch_dc(backend)
    work.launch_dx(states[0], backend)
    return states, work.results()


#: whether the fast backward runs kernel 4 beside the state stage on a GPU (:func:`kernel_stages`). On: on an
#: H100 (2026-12-06, bf16, forward + backward) it took b1-l32768-h80 from 4.43-4.46 to 4.34 ms and
#: b2-l8192-h128-g8 from 2.94 to 2.90 ms, with the same bits (a GPU test checks that both orders agree)
OVERLAP = True


@functools.lru_cache(maxsize=8)
def _side_stream(device: torch.device) -> torch.cuda.Stream:
    """One second stream per GPU, made once (streams are the host's hot path too)."""
    return torch.cuda.Stream(device=device)


def ssd_backward_fast(dout, x, dt, A, B, C, dt_out, dA_cumsum, chunk_init_states, **options) -> SSDGrads:
    """The gradients of ``ssd_forward``: the arguments and results of
    :func:`~mamba2_tutorial.kernels.backward.ssd_backward_taught`, computed by the fast backward kernels."""
    return ssd_backward_taught(dout, x, dt, A, B, C, dt_out, dA_cumsum, chunk_init_states,
                               kernel_stages=kernel_stages, **options)
