"""Every figure and table a notebook shows, by notebook; each name is imported on first use (matplotlib
only then).

===================  ===================================================================================
``ladder.py``        the reference ladder (notebooks 01-03): decay, state norms, the decay mask, the SSD
                     matrix's blocks, the decay mask cut into chunks, cost curves
``tiles.py``         the tile model (notebook 04): a grid of tiles over an array, a matmul block's tiles
``gpu.py``           the GPU execution model (notebook 04): the chip, one SM, where a kernel's pieces run
``kernel_tiles.py``  the three SSD kernels' tiles over the tensors they read and write (notebooks 05-07)
``model.py``         the Mamba-2 model (notebook 11): training curves, what a block's state remembers
``tables.py``        shape tables: every tensor, its shape in math names and in numbers, checked
===================  ===================================================================================

The benchmark's figures (notebooks 09, 10 and 12) live beside the results they draw, in
:mod:`mamba2_tutorial.perf`.
"""

from __future__ import annotations

from ..runtime.lazy import lazy_names

#: public name -> the module of this package that defines it
_EXPORTS = {
    "plot_decay": "ladder", "plot_state_norms": "ladder", "plot_decay_mask": "ladder",
    "plot_segsum_comparison": "ladder", "ssd_matrix": "ladder", "plot_ssd_blocks": "ladder",
    "plot_decay_blocks": "ladder", "decay_blocks_widget": "ladder", "chunk_decay_matrix": "ladder",
    "plot_cost_curves": "ladder", "FORM_COLORS": "ladder",
    "plot_matmul_tiles": "tiles", "plot_tile_grid": "tiles", "tile_grid_shape": "tiles",
    "plot_gpu_model": "gpu", "SM_GID": "gpu",
    "block_coords": "kernel_tiles", "plot_chunk_scan_tiles": "kernel_tiles",
    "plot_chunk_state_tiles": "kernel_tiles", "plot_state_passing_tiles": "kernel_tiles",
    "plot_training": "model", "plot_memory": "model", "token_labels": "model",
    "ShapeTable": "tables", "shape_table": "tables", "parse_dims": "tables",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
