"""mamba2_tutorial: the Mamba-2 SSD forward pass, from the recurrence to cuTile kernels.

Everything the notebooks use lives here. Names are imported lazily so that ``import mamba2_tutorial``
stays cheap (no cuTile import until a kernel is needed).

Shapes follow the math throughout: x (b, l, h, p), dt (b, l, h), A (h,), B and C (b, l, g, n),
chunk size Q, state (b, h, p, n).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    # the reference ladder (notebooks 01-03)
    "ssd_recurrent": "reference",
    "ssd_quadratic": "reference",
    "ssd_chunked": "reference",
    "ssd_decode_step": "reference",
    "chunk_cumsum": "reference",
    "chunk_state": "reference",
    "state_passing": "reference",
    "chunk_scan": "reference",
    "segsum": "reference",
    "segsum_naive": "reference",
    # inputs and checks
    "make_inputs": "inputs",
    "SHAPES": "inputs",
    "SSDShape": "inputs",
    "assert_close": "checks",
    "default_tolerance": "checks",
    "relative_error": "checks",
    "validate_ssd_inputs": "validation",
    # environment and tiers
    "environment_report": "env",
    "launch": "backends",
    "select_backend": "backends",
    "BackendChoice": "backends",
    # the compiler's view and tile figures (notebooks 04-07)
    "tile_ir": "compile",
    "show_tile_ir": "compile",
    "show_source": "compile",
    "plot_tile_grid": "plots_tiles",
    "plot_matmul_tiles": "plots_tiles",
    # kernels and the fused forward (notebooks 05-08)
    "ssd_forward": "ssd",
    "ssd_plan": "ssd",
    "chunk_state_fwd": "ssd",
    "state_passing_fwd": "ssd",
    "chunk_scan_fwd": "ssd",
    "ssd_stages": "ssd",
    # performance (notebook 09)
    "SSDConfig": "kernels.configs",
    "ssd_config": "kernels.configs",
    "floor_ms": "roofline",
    "load_shipped_results": "bench_results",
    # from the SSD to a model (notebook 11)
    "Mamba2Block": "model.block",
    "GatedRMSNorm": "model.block",
    "causal_conv1d": "model.block",
    "Mamba2State": "model.decode",
    "decode_step": "model.decode",
    "TinyMamba2LM": "model.lm",
    "AssociativeRecall": "model.tasks",
    "train_lm": "model.train",
    "evaluate_lm": "model.train",
    "generate": "model.inference",
    "answer_queries": "model.inference",
    "memory_at": "model.memory",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mamba2_tutorial' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
