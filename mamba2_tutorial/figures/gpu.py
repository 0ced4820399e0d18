"""The GPU execution model as one figure: the chip, one SM, and where a cuTile kernel's pieces run.

``plot_gpu_model(spec)`` draws three panels from a :class:`~mamba2_tutorial.runtime.hardware.GPUSpec`:

1. **the chip**: one square per SM (132 on an H100 SXM5 or H200), the L2 cache they share and the HBM behind
   it. With ``grid_blocks`` and ``blocks_per_sm`` the squares show how a grid's blocks are placed: the first
   wave fills every SM, the rest wait for a free slot;
2. **one SM**: its four sub-partitions (a warp scheduler, a quarter of the register file, a tensor core and 32
   FP32 lanes each), the L1/shared-memory array and the TMA engine;
3. **a cuTile kernel on it**: which part of the machine each construct of a kernel uses (the grid, a block,
   a tile, ``ct.load``/``ct.store``, ``ct.mma``, elementwise math).

Returns a ``matplotlib.figure.Figure`` (not attached to pyplot). Every number printed comes from ``spec``.
"""

from __future__ import annotations

import math

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle

from ..runtime.hardware import H200, GPUSpec, KiB, MiB

__all__ = ["plot_gpu_model", "SM_GID"]

#: ``gid`` of every SM square in the chip panel (tests and notebooks count them)
SM_GID = "sm"
_SM_IDLE = "#d9e2ec"
_SM_WAVE1 = "#f4a261"
_SM_WAVE1_MORE = "#e76f51"
_L2 = "#9ecae1"
_HBM = "#6baed6"
_SUB = "#e8f1e4"
_TC = "#fdd49e"
_SMEM = "#c6dbef"


def _box(ax, x, y, w, h, text, color, *, fontsize=8, weight="normal", gid=None, edge="#333333"):
    patch = FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.004,rounding_size=0.01", facecolor=color,
                           edgecolor=edge, linewidth=0.8, gid=gid)
    ax.add_patch(patch)
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, weight=weight,
                wrap=True)
    return patch


def _grid_shape(n: int) -> tuple[int, int]:
    """(rows, cols) for n squares: an exact factorization near a 1.1:1 aspect when there is one."""
    best = None
    for cols in range(1, n + 1):
        rows = math.ceil(n / cols)
        waste = rows * cols - n
        score = (waste, abs(cols / rows - 1.1))
        if best is None or score < best[0]:
            best = (score, rows, cols)
    return best[1], best[2]


def plot_gpu_model(spec: GPUSpec = H200, *, grid_blocks: int | None = None, blocks_per_sm: int = 1,
                   title: str | None = None) -> Figure:
    """The execution model of ``spec`` (default: the H200) in three panels; see the module docstring.

    ``grid_blocks`` (optional) colours the SMs by how many blocks of a grid of that many blocks they hold in
    the first wave, with ``blocks_per_sm`` resident blocks per SM (the kernel's occupancy), and names the
    number of waves in the chip panel's title.
    """
    if blocks_per_sm < 1 or blocks_per_sm > spec.max_blocks_per_sm:
        raise ValueError(f"blocks_per_sm must be in 1..{spec.max_blocks_per_sm}, got {blocks_per_sm}")
    if grid_blocks is not None and grid_blocks < 1:
        raise ValueError(f"grid_blocks must be a positive number of blocks, got {grid_blocks}")
    fig = Figure(figsize=(16.0, 7.0))
    ax = fig.add_axes((0.005, 0.0, 0.99, 0.93))
    ax.set_xlim(0, 16)
    ax.set_ylim(0, 7)
    ax.set_axis_off()

    # -- panel 1: the chip (x 0 .. 4.8) --------------------------------------------------------------------
    n = spec.sm_count
    rows, cols = _grid_shape(n)
    x0, y0, w, h = 0.1, 2.35, 4.6, 4.25
    cw, ch = w / cols, h / rows
    slots = spec.sm_count * blocks_per_sm
    first_wave = min(grid_blocks, slots) if grid_blocks is not None else 0
    per_sm = [0] * n
    for blk in range(first_wave):  # round-robin over the SMs: how a wave lands, to first order
        per_sm[blk % n] += 1
    for i in range(n):
        r, c = divmod(i, cols)
        color = _SM_IDLE if per_sm[i] == 0 else (_SM_WAVE1 if per_sm[i] == 1 else _SM_WAVE1_MORE)
        corner = (x0 + c * cw + 0.08 * cw, y0 + h - (r + 1) * ch + 0.08 * ch)
        ax.add_patch(Rectangle(corner, 0.84 * cw, 0.84 * ch, facecolor=color, edgecolor="#52606d",
                               linewidth=0.5, gid=SM_GID))
    chip_title = f"the chip: {n} SMs ({rows} x {cols})"
    if grid_blocks is not None:
        waves = math.ceil(grid_blocks / slots)
        chip_title += (f"\n{grid_blocks} blocks, {blocks_per_sm} per SM: {first_wave} in the first wave, "
                       f"{waves} wave{'s' if waves > 1 else ''}")
    ax.text(x0 + w / 2, 6.85, chip_title, ha="center", va="center", fontsize=10, weight="bold")
    _box(ax, 0.1, 1.35, 4.6, 0.75, f"L2 cache: {spec.l2_bytes // MiB} MiB, shared by all SMs", _L2,
         fontsize=9)
    _box(ax, 0.1, 0.2, 4.6, 0.95,
         f"{spec.memory}: {spec.memory_bytes / 1e9:.0f} GB at {spec.memory_bandwidth / 1e12:.2f} TB/s\n"
         "global memory: every array a kernel reads and writes", _HBM, fontsize=9)

    # -- panel 2: one SM (x 5.3 .. 10.1) ----------------------------------------------------------------
    sx0, sw = 5.3, 4.8
    ax.text(sx0 + sw / 2, 6.85, f"one SM: up to {spec.max_warps_per_sm} warps ({spec.max_threads_per_sm} "
            f"threads) and {spec.max_blocks_per_sm} blocks", ha="center", va="center", fontsize=10,
            weight="bold")
    ax.text(sx0 + sw / 2, 6.45, f"register file: {spec.registers_per_sm:,} x 32 bit = "
            f"{spec.registers_per_sm * 4 // KiB} KiB, at most {spec.max_registers_per_thread} per thread",
            ha="center", va="center", fontsize=8.5)
    sub_w, sub_h, gap = (sw - 0.15) / 2, 1.95, 0.15
    regs = spec.registers_per_sub_partition
    lanes = spec.fp32_lanes_per_sm // spec.sub_partitions_per_sm
    for k in range(spec.sub_partitions_per_sm):
        r, c = divmod(k, 2)
        bx, by = sx0 + c * (sub_w + gap), 4.2 - r * (sub_h + gap)
        _box(ax, bx, by, sub_w, sub_h, "", _SUB)
        ax.text(bx + sub_w / 2, by + sub_h - 0.25, f"sub-partition {k}\nwarp scheduler", ha="center",
                va="center", fontsize=7.5, weight="bold")
        _box(ax, bx + 0.1, by + 0.8, sub_w - 0.2, 0.5, f"{regs:,} registers ({regs * 4 // KiB} KiB)", "white",
             fontsize=7.5)
        half = (sub_w - 0.3) / 2
        _box(ax, bx + 0.1, by + 0.12, half, 0.55, "tensor core", _TC, fontsize=7.5)
        _box(ax, bx + 0.2 + half, by + 0.12, half, 0.55, f"{lanes} FP32 lanes", "white", fontsize=7.5)
    _box(ax, sx0, 1.2, sw, 0.75,
         f"L1 + shared memory: {spec.l1_shared_per_sm // KiB} KiB\n"
         f"(up to {spec.max_shared_per_sm // KiB} KiB shared, "
         f"{spec.max_shared_per_block // KiB} KiB per block)",
         _SMEM, fontsize=8.5)
    _box(ax, sx0, 0.2, sw, 0.8, "TMA engine: copies whole tiles\nglobal memory <-> shared memory", "#fee6ce",
         fontsize=8.5)
    # -- panel 3: a cuTile kernel on the machine (x 10.5 .. 16) -------------------------------------------
    mx0 = 10.5
    ax.text(13.25, 6.85, "a cuTile kernel on this machine", ha="center", va="center", fontsize=10,
            weight="bold")
    tc = ", ".join(d.split()[0] for d in spec.tensor_core_dtypes if d not in ("int8", "fp64"))
    rows_map = [
        ("launch(kernel, grid)", "a grid of blocks; each block is placed on one SM\nand stays there until "
                                 f"it ends; blocks beyond\n{spec.sm_count} x (blocks per SM) wait: waves"),
        ("a block (ct.bid)", f"{spec.warp_size}-thread warps (the compiler picks how\nmany); its registers "
                             "and shared memory\nset how many blocks fit: occupancy"),
        ("a tile", "spread over the block's registers;\nstaged in shared memory for loads and mma"),
        ("ct.load / ct.store", "global memory (through L2) <-> shared memory:\nTMA on Hopper when base and "
                               "strides are\n16-byte aligned, else plain loads"),
        ("ct.mma(a, b, acc)", f"tensor cores (wgmma on Hopper) for\n{tc} operands in tiles\nof 32+ rows, "
                              "float32 accumulator; float32\noperands, small tiles: FMA on FP32 lanes"),
        ("+, *, exp, cumsum", "FP32 lanes (and special-function units),\non registers"),
    ]
    top, row_h = 6.5, 1.05
    for k, (construct, where) in enumerate(rows_map):
        y = top - (k + 1) * row_h
        _box(ax, mx0, y + 0.12, 1.75, row_h - 0.24, construct, "#f0f4f8", fontsize=8, weight="bold")
        ax.text(mx0 + 1.9, y + row_h / 2, where, ha="left", va="center", fontsize=7.8)
    fig.suptitle(title or f"The GPU execution model: {spec.name} ({spec.arch})", fontsize=12, y=0.985)
    return fig
