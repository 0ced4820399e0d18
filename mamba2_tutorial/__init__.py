"""mamba2_tutorial: the Mamba-2 SSD forward pass, from the recurrence to cuTile kernels.

Everything the notebooks use lives here. Names are imported lazily so that ``import mamba2_tutorial``
stays cheap and works without cuTile: no cuTile import until a kernel is needed, and where cuTile is not
available (macOS has no cuda-tile wheels) a name that needs it raises :class:`CuTileUnavailable`, which says
how to continue (:mod:`mamba2_tutorial.runtime.platforms`).

Shapes follow the math throughout: x (b, l, h, p), dt (b, l, h), A (h,), B and C (b, l, g, n),
chunk size Q, state (b, h, p, n).
"""

from __future__ import annotations

from .runtime.lazy import lazy_names

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
    "make_inputs": "lessons.inputs",
    "SHAPES": "lessons.inputs",
    "SSDShape": "lessons.inputs",
    "assert_close": "lessons.checks",
    "default_tolerance": "lessons.checks",
    "relative_error": "lessons.checks",
    "ssd_gradients": "lessons.checks",
    "validate_ssd_inputs": "runtime.validation",
    # environment and tiers
    "environment_report": "lessons.env",
    "cutile_available": "runtime.platforms",
    "require_cutile": "runtime.platforms",
    "CuTileUnavailable": "runtime.platforms",
    "launch": "runtime.backends",
    "select_backend": "runtime.backends",
    "BackendChoice": "runtime.backends",
    # the compiler's view and tile figures (notebooks 04-07)
    "tile_ir": "runtime.compile",
    "show_tile_ir": "runtime.compile",
    "show_source": "lessons.callouts",
    "plot_tile_grid": "figures.tiles",
    "plot_matmul_tiles": "figures.tiles",
    # the taught kernels and their three-launch forward (notebooks 05-08)
    "chunk_state_fwd": "kernels.chunk_state",
    "state_passing_fwd": "kernels.state_passing",
    "chunk_scan_fwd": "kernels.chunk_scan",
    "ssd_forward_taught": "kernels.forward",
    "ssd_plan": "kernels.forward",
    # the fast path: the drop-in forward and its configs (notebooks 08-10)
    "ssd_forward": "fast.forward",
    "ssd_stages": "fast.forward",
    "FastConfig": "fast.config",
    "ssd_config": "fast.tuning",
    # performance (notebooks 09-10)
    "floor_ms": "perf.roofline",
    "load_shipped_results": "perf.results",
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

__all__ = sorted([*_EXPORTS, "all_kernel_specs"])


def all_kernel_specs():
    """Every kernel spec of the package: the taught kernels' and the fast path's, in that order. Importing
    ``kernels`` and ``fast`` registers their kernel modules with the runtime
    (:mod:`mamba2_tutorial.runtime.specs`), which collects the specs."""
    from . import fast  # noqa: F401  (it and the taught kernels' package register their kernel modules)
    from .runtime.specs import all_kernel_specs as registered_specs

    return registered_specs()


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
