"""``ssd_backward_fast``: the taught backward's host steps around the fast path's backward kernels.

    1-2. the state gradient carried backwards: one launch, dS_out kept on chip   (``bwd_states.py``)
    3-4. every gradient inside the chunks: C Bᵀ once per group, heads summed     (``bwd_chunk.py``)

Everything else (the gate, the reverse cumsum for dt and A, dt_bias / softplus / dt_limit, dD) is the taught
``ssd_backward_taught``'s code, called with these two stages. ``ssd_forward`` uses it under autograd.
"""

from __future__ import annotations

from ..kernels.backward import SSDGrads, ssd_backward_taught
from .bwd_chunk import launch_chunk_bwd_heads
from .bwd_states import launch_state_grads_fused

__all__ = ["ssd_backward_fast"]


def ssd_backward_fast(dout, x, dt, A, B, C, dt_out, dA_cumsum, chunk_init_states, **options) -> SSDGrads:
    """The gradients of ``ssd_forward``: the arguments and results of
    :func:`~mamba2_tutorial.kernels.backward.ssd_backward_taught`, computed by the fast backward kernels."""
    return ssd_backward_taught(dout, x, dt, A, B, C, dt_out, dA_cumsum, chunk_init_states,
                               state_stage=launch_state_grads_fused, chunk_stage=launch_chunk_bwd_heads,
                               **options)
