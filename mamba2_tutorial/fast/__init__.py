"""The fast path: tuned kernels for the same SSD forward the taught kernels compute.

One algorithm per file; the configuration (:mod:`.config`) picks a state stage and a scan stage, and the
shipped tuning tables (:mod:`.tuning`, JSON in ``mamba2_tutorial/data/configs/``) pick the configuration per
GPU and problem size. ``docs/architecture.md`` shows where this path splits from the taught one and how to
add a variant.

==================  ======================================================================
``config.py``       FastConfig = a state stage (Unfused / Fused / Segmented) + a scan stage
                    (PlainScan / SharedScan / ChunkScan)
``tuning.py``       the shipped tables: problem class -> FastConfig
``state_fused.py``  kernels 1 and 2 in one launch, chunk states kept on chip
``segments.py``     the fused stage by segments of the sequence, for few (batch, head) pairs
``chunk_cb.py``     C Bᵀ once per (chunk, group); the key-log2 form kd
``scan_shared.py``  the scan with 2-D mmas, C Bᵀ computed in the block (small problems)
``scan_chunk.py``   one block per (head, chunk) walking the whole chunk, reading C Bᵀ
``plan.py``         a call's inputs grouped whole (StateCall, ScanCall); the config resolved once (Plan)
``stages.py``       the plan's two stages routed to their launchers (run_state, run_scan, training_stages)
``forward.py``      ``ssd_forward``: validate, pick the config, run the two stages
``resets.py``       packed rows (``seq_idx``): where the state resets, forward and backward
``varlen.py``       each packed sequence's final state (``return_varlen_states``)
==================  ======================================================================
"""

from __future__ import annotations

from .. import kernels  # noqa: F401  (the taught kernels' modules register first; the fast path's follow)
from ..runtime.specs import register_spec_modules
from .config import (
    FUSED_WALKS,
    TAUGHT,
    ChunkScan,
    Decay,
    FastConfig,
    Fused,
    PlainScan,
    Segmented,
    SharedScan,
    StateForm,
    Unfused,
    config_from_json,
    config_to_json,
)
from .tuning import load_table, problem_class, ssd_config

#: modules of this package whose SPECS the compile check covers: the kernels the shipped configs launch
#: (``specs.py``) and the fast backward's
SPEC_MODULES: tuple[str, ...] = ("specs", "bwd_states", "bwd_chunk", "bwd_dc_heads", "bwd_dx_heads")

register_spec_modules(*(f"{__name__}.{module}" for module in SPEC_MODULES))

__all__ = ["FUSED_WALKS", "SPEC_MODULES", "TAUGHT", "ChunkScan", "Decay", "FastConfig", "Fused", "PlainScan",
           "Segmented", "SharedScan", "StateForm", "Unfused", "config_from_json", "config_to_json",
           "load_table", "problem_class", "ssd_config"]
