"""The reference ladder: three exact implementations of the Mamba-2 SSD forward, from slow-and-obvious to
chunked-and-parallel, with mamba_ssm's ``mamba_chunk_scan_combined`` semantics.

* :func:`ssd_recurrent` (notebook 01): the recurrence, one step at a time. ``decode.py``: one token.
* :func:`ssd_quadratic` (notebook 02): the dual form ``y = (L ∘ C Bᵀ)·(dt·x)``, ``L = exp(segsum(dt·A))``.
* :func:`ssd_chunked` (notebook 03): the four steps
  ``chunk_cumsum → chunk_state → state_passing → chunk_scan`` that the cuTile kernels implement.
* Packed sequences (``packed.py``): ``seq_idx`` in the recurrence (a reset) and the dual form (a
  block-diagonal L), and :func:`ssd_each_sequence`, which runs every sequence alone: the oracle.

Shapes: x (b, l, h, p), dt (b, l, h), A (h,), B and C (b, l, g, n), D (h,) or (h, p), z (b, l, h, p),
dt_bias (h,), initial_states and final states (b, h, p, n). float64 inputs are computed in float64 (the ground
truth); anything else in float32, with y returned in x.dtype and states in float32.
"""

from .chunked import chunk_cumsum, chunk_scan, chunk_state, ssd_chunked, state_passing
from .decode import ssd_decode_step
from .packed import seq_idx_from_cu_seqlens, ssd_each_sequence
from .quadratic import ssd_quadratic
from .recurrent import ssd_recurrent
from .segsum import segsum, segsum_naive

__all__ = [
    "ssd_recurrent",
    "ssd_quadratic",
    "ssd_chunked",
    "ssd_decode_step",
    "ssd_each_sequence",
    "seq_idx_from_cu_seqlens",
    "segsum",
    "segsum_naive",
    "chunk_cumsum",
    "chunk_state",
    "state_passing",
    "chunk_scan",
]
