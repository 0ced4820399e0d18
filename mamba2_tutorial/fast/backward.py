"""``ssd_backward_fast``: the taught backward's host steps around the fast path's backward kernels.

    1-2. the state gradient carried backwards: one launch, dS_out kept on chip   (``bwd_states.py``)
    3-4. every gradient inside the chunks: C Bᵀ once per group, heads summed     (``bwd_chunk.py``)
         (C Bᵀ and kernel 4 can run on a second stream beside 1-2: they need no state gradient)

Everything else (the gate, the reverse cumsum for dt and A, dt_bias / softplus / dt_limit) is the taught
``ssd_backward_taught``'s code, called with these two stages. ``ssd_forward`` uses it under autograd.

Its settings are the problem's :class:`~mamba2_tutorial.fast.config.BackwardConfig`, from the shipped tuning
table of the GPU (:func:`~mamba2_tutorial.fast.tuning.backward_config`). The fused state stage runs one block
per (state tile, batch, head), each walking every chunk in turn: with fewer such blocks than SMs (one long
sequence, few heads) that walk leaves SMs idle, while the taught kernel 1 is parallel over the chunks. Below
``StateGrads.min_fused_blocks_per_sm`` blocks per SM the taught kernels 1 and 2 run instead (the forward's
tuning makes the same call with its segmented stage).

Packed rows (the forward's ``seq_idx``, in the call) run in these kernels too, with the forward's resets
mirrored (``fast/resets.py``): the fused state stage then always runs, as the taught kernels 1 and 2 take no
packed rows.
"""

from __future__ import annotations

import functools

import torch

from ..kernels.backward import GradCall, SSDGrads, ssd_backward_taught
from ..kernels.bwd_states import launch_state_grads
from ..runtime.hardware import sm_count
from .bwd_chunk import ChunkBwdHeads
from .bwd_states import launch_state_grads_fused, state_grads_fused_plan
from .config import BackwardConfig, StateGrads
from .tuning import backward_config

__all__ = ["kernel_stages", "ssd_backward_fast", "state_grads_stage", "uses_fused_state_grads"]


def uses_fused_state_grads(dims: tuple, dtype: torch.dtype, *, sms: int, settings: StateGrads) -> bool:
    """Whether the fast backward runs the fused state stage for a problem of ``dims`` = (b, l, h, p, n, Q)
    in ``dtype`` on a GPU of ``sms`` SMs (else the taught kernels 1 and 2): its grid has at least
    ``settings.min_fused_blocks_per_sm`` blocks per SM."""
    grid = state_grads_fused_plan(*dims, dtype, settings.tiles).grid
    return grid[0] * grid[1] * grid[2] >= settings.min_fused_blocks_per_sm * sms


def state_grads_stage(call: GradCall, settings: StateGrads):
    """The fast backward's kernels 1-2: the fused stage (dstates in dy's dtype), or the taught kernels
    (float32 dstates) where :func:`uses_fused_state_grads` says no and the rows are not packed (the taught
    kernels take no ``seq_idx``). The contract of the taught ``launch_state_grads``."""
    dy = call.dy
    b, l, h, p = dy.shape
    dims = (b, l, h, p, call.C.shape[3], call.dA_cumsum.shape[3])
    if call.seq_idx is not None or uses_fused_state_grads(dims, dy.dtype, sms=sm_count(dy.device),
                                                          settings=settings):
        return launch_state_grads_fused(call, settings)
    c = call
    return launch_state_grads(c.dy, c.C, c.dA_cumsum, c.chunk_init_states, c.dfinal_states, c.backend,
                              c.poison)


def kernel_stages(call: GradCall, config: BackwardConfig | None = None):
    """Backward kernels 1-4 for ``call`` with ``config`` (default: the shipped table's for this problem,
    :func:`backward_config`): ``(state stage results, chunk stage results)``, the contracts of
    :func:`state_grads_stage` and :func:`~mamba2_tutorial.fast.bwd_chunk.launch_chunk_bwd_heads`.

    Kernel 4 (dC) and the C Bᵀ tiles need no state gradient, so with ``config.overlap`` on a GPU they run on
    a second stream beside the state stage, whose walk over the chunks leaves SMs idle where it has few
    blocks; kernel 3 (dx, dB) waits for both. Otherwise the state stage, kernel 4 and kernel 3 run in that
    order on one stream (the CPU executor always runs the launches in order, as it runs everything)."""
    x = call.x
    if config is None:
        b, l, h, p = x.shape
        config = backward_config(b, l, h, p, call.C.shape[3], call.dA_cumsum.shape[3], x.dtype, x.device)
    work = ChunkBwdHeads(call, config.chunk)
    if call.backend == "gpu" and config.overlap:
        main = torch.cuda.current_stream(x.device)
        side = _side_stream(x.device)
        side.wait_stream(main)                    # the inputs and buffers are ready before kernel 4 starts
        # the state stage first, so that its few long-walking blocks take their SMs before kernel 4's many
        # short ones fill the rest
        states = state_grads_stage(call, config.state)
        with torch.cuda.stream(side):
            work.launch_dc()
        main.wait_stream(side)                    # kernel 3 reads the C Bᵀ tiles; the results follow it
    else:
        states = state_grads_stage(call, config.state)
        work.launch_dc()
    work.launch_dx(states[0])
    return states, work.results()


@functools.lru_cache(maxsize=8)
def _side_stream(device: torch.device) -> torch.cuda.Stream:
    """One second stream per GPU, made once (streams are the host's hot path too)."""
    return torch.cuda.Stream(device=device)


def ssd_backward_fast(*args, config: BackwardConfig | None = None, **options) -> SSDGrads:
    """The gradients of ``ssd_forward``: the arguments (``dout, x, dt, A, B, C, dt_out, dA_cumsum,
    chunk_init_states`` and the keywords, ``seq_idx`` for packed rows among them) and results of
    :func:`~mamba2_tutorial.kernels.backward.ssd_backward_taught`, computed by the fast backward kernels with
    ``config`` (default: the shipped table's for this problem, :func:`backward_config`)."""
    stages = functools.partial(kernel_stages, config=config)
    return ssd_backward_taught(*args, kernel_stages=stages, **options)
