"""How the taught kernels became the shipped ones, as a few staged steps, each a :class:`FastConfig`.

Notebook 10 tells this story with the times ``python -m mamba2_tutorial bench`` measured for every step, side
by side in one run, at its ``--steps`` shapes (b8-l4096-h80 and b1-l32768-h80 unless named;
``data/benchmarks/h200.json``, its ``"steps"``). Each step adds one idea to the one before; the last is what
``ssd_forward`` ships for the problem's class.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .config import ChunkScan, Decay, FastConfig, Fused, PlainScan, Segmented, SharedScan, StateForm

__all__ = ["STEPS", "Step", "steps_for"]


class Step(NamedTuple):
    name: str          #: short label for tables and the waterfall chart
    idea: str          #: one sentence: what changes, and why it should be faster
    config: FastConfig


_FUSED = Fused(state_tile=(64, 128))
_BEST_STATE = Fused(state_tile=(64, 128), mma_rows=128, occupancy=2, form=StateForm.DT_ONCE | StateForm.ACC,
                    store_kd=True)

#: the steps at chunk size 256 for a problem with many (batch, head) pairs (b8-l4096-h80)
STEPS: tuple[Step, ...] = (
    Step("taught", "the three kernels of notebooks 05-07, one launch each", FastConfig()),
    Step("fuse state passing",
         "kernels 1 and 2 in one launch: the float32 chunk states never go to global memory",
         FastConfig(_FUSED, PlainScan())),
    Step("2-D scan, occupancy 3",
         "the scan with 2-D mmas only (wgmma on Hopper) and 3 blocks per SM",
         FastConfig(_FUSED, SharedScan(occupancy=3))),
    Step("C Bᵀ once, whole-chunk scan",
         "C Bᵀ computed once per (chunk, group) instead of once per head; one block walks a whole chunk",
         FastConfig(_FUSED, ChunkScan(torch.float32, Decay.EXACT, occupancy=3))),
    Step("C Bᵀ in bf16", "C Bᵀ stored in bfloat16: half the scan's largest reads",
         FastConfig(_FUSED, ChunkScan(torch.bfloat16, Decay.EXACT, occupancy=3))),
    Step("key-log2 decay", "decay · dt as one exponential of a difference: no multiply, no clamp",
         FastConfig(_FUSED, ChunkScan(torch.bfloat16, Decay.KEY_LOG2, occupancy=3))),
    Step("state stage tuned",
         "the fused stage at 2 blocks per SM, 128 rows per mma step, dt computed once, storing kd itself",
         FastConfig(_BEST_STATE, ChunkScan(torch.bfloat16, Decay.KEY_LOG2, occupancy=3))),
)


def steps_for(segmented: bool = False, segments: int = 8) -> tuple[Step, ...]:
    """:data:`STEPS`, and with ``segmented`` one more: the state stage by ``segments`` segments of the
    sequence (for few (batch, head) pairs and long sequences, b1-l32768-h80)."""
    if not segmented:
        return STEPS
    state = Segmented(state_tile=_BEST_STATE.state_tile, mma_rows=_BEST_STATE.mma_rows, occupancy=2,
                      form=_BEST_STATE.form, store_kd=True, segments=segments)
    return STEPS + (Step("segmented state stage",
                         f"the state stage's sequential loop cut into {segments} segments walked in parallel",
                         FastConfig(state, ChunkScan(torch.bfloat16, Decay.KEY_LOG2, occupancy=3))),)


