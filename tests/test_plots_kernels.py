"""Kernel tile figures: the block decoding matches the launch plans, and each figure marks the right tiles."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from mamba2_tutorial.figures.kernel_tiles import (
    LOAD,
    SKIP,
    STORE,
    block_coords,
    plot_chunk_scan_tiles,
    plot_chunk_state_tiles,
    plot_state_passing_tiles,
)
from mamba2_tutorial.kernels.forward import ssd_plan  # noqa: E402
from mamba2_tutorial.lessons.inputs import SSDShape  # noqa: E402

# every dim distinct, l ragged for both chunk sizes, g = 2
SHAPE = SSDShape(2, 300, 4, 48, 2, 80, 64, "fig")
SHAPE_Q256 = SSDShape(1, 600, 4, 48, 2, 80, 256, "fig256")


def _solid(ax, color):
    """The opaque (in-bounds) rectangles of one highlight colour: (x, y, w, h) in element units."""
    rgb = matplotlib.colors.to_rgb(color)
    return sorted((r.get_x(), r.get_y(), r.get_width(), r.get_height()) for r in ax.patches
                  if isinstance(r, Rectangle) and r.get_facecolor()[:3] == pytest.approx(rgb)
                  and r.get_alpha() == pytest.approx(0.85))


def _plan(shape, dtype):
    s = shape
    return ssd_plan(s.batch, s.seqlen, s.nheads, s.headdim, s.ngroups, s.dstate, s.chunk_size, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_block_coords_cover_every_output_tile_once(dtype):
    """Decoding every block of each grid gives each (batch, chunk, head, tile) exactly once."""
    plans = _plan(SHAPE, dtype)
    nchunks = SHAPE.nchunks
    for kernel, plan in plans.items():
        seen = set()
        gx, gy, gz = plan.grid
        for block in ((i, j, k) for i in range(gx) for j in range(gy) for k in range(gz)):
            k = block_coords(kernel, SHAPE, block, dtype=dtype)
            assert k["grid"] == plan.grid and k["tiles"] == plan.tiles
            assert k["g"] == k["h"] // (SHAPE.nheads // SHAPE.ngroups)
            if kernel == "chunk_state":
                seen.add((k["b"], k["c"], k["h"], k["i_p"], k["i_n"]))
            elif kernel == "state_passing":
                seen.add((k["b"], k["h"], k["i_p"], k["i_n"]))
            else:
                assert k["h"] == block[2], "axis 2 is the head: one head per block"
                seen.add((k["b"], k["c"], k["h"], k["i_m"], k["i_p"]))
        t = plan.tiles
        tp = -(-SHAPE.headdim // t["TP"])
        if kernel == "chunk_scan":
            expected = SHAPE.batch * nchunks * SHAPE.nheads * (t["Q"] // t["TM"]) * tp
            assert len(seen) == expected == gx * gy * gz
            continue
        else:
            tn = -(-SHAPE.dstate // t["TN"])
            per = SHAPE.batch * SHAPE.nheads * tp * tn
            expected = per * nchunks if kernel == "chunk_state" else per
        assert len(seen) == expected == gx * gy * gz


def test_chunk_scan_key_tiles_are_causal_and_stop_at_the_sequence_end():
    # Q = 256, TM = TK = 64 (bf16): row tile i_m of a full chunk visits key tiles 0..i_m
    for i_m in range(4):
        k = block_coords("chunk_scan", SHAPE_Q256, (i_m, 1, 0))
        assert (k["c"], k["i_m"], k["n_key_tiles"], k["active"]) == (1, i_m, i_m + 1, True)
    # the ragged last chunk (l = 600: rows 512..599, 88 of them): row tile 1 holds rows 576..599 -> 2 key
    # tiles; row tiles 2 and 3 lie past the end and do nothing
    assert block_coords("chunk_scan", SHAPE_Q256, (1, 2, 0))["n_key_tiles"] == 2
    assert not block_coords("chunk_scan", SHAPE_Q256, (2, 2, 0))["active"]
    with pytest.raises(ValueError, match="past the sequence end"):
        plot_chunk_scan_tiles(SHAPE_Q256, block=(3, 2, 0))


def test_bad_block_or_kernel_is_a_clear_error():
    with pytest.raises(ValueError, match=r"outside the chunk_state grid \(6, 10, 4\)"):
        block_coords("chunk_state", SHAPE, (6, 0, 0), dtype=torch.float32)
    with pytest.raises(ValueError, match="kernel must be one of"):
        block_coords("chunk_cumsum", SHAPE, (0, 0, 0))


def test_chunk_state_figure_marks_the_blocks_tiles():
    # float32: TP = TN = 32; block (4, 7, 3): state tile (1, 1) (n has 3 tiles), batch 1, chunk 2, head 3
    fig = plot_chunk_state_tiles(SHAPE, dtype=torch.float32, block=(4, 7, 3))
    assert isinstance(fig, Figure) and len(fig.axes) == 3
    x_ax, b_ax, s_ax = fig.axes
    assert _solid(x_ax, LOAD) == [(32, 128, 16, 64)]   # chunk 2 rows 128..191, columns 32..47 (p = 48)
    assert _solid(b_ax, LOAD) == [(32, 128, 32, 64)]
    assert _solid(s_ax, STORE) == [(32, 32, 32, 16)]   # state rows 32..47, columns 32..63
    assert "x[1, :, 3, :]" in x_ax.get_title() and "B[1, :, 1, :]" in b_ax.get_title()
    assert "grid (6, 10, 4)" in fig._suptitle.get_text()


def test_state_passing_figure_walks_one_column_down_all_chunks():
    # float32 plan: TP = 32, TN = 64 -> 2 x 2 = 4 tiles; grid (4, 2, 4)
    # block (3, 1, 2) -> column 3 + 4·(1 + 2·2)
    fig = plot_state_passing_tiles(SHAPE, dtype=torch.float32, block=(3, 1, 2))
    state_ax, sched_ax = fig.axes
    assert _solid(state_ax, STORE) == [(64, 32, 16, 16)]
    col = 3 + 4 * (1 + 2 * 2)
    cells = _solid(sched_ax, LOAD) + _solid(sched_ax, STORE)
    assert sorted(cells) == [(col, c, 1, 1) for c in range(SHAPE.nchunks)]
    assert [t.get_text() for t in sched_ax.texts] == [f"c{c}" for c in range(SHAPE.nchunks)]
    assert "32 blocks in parallel" in sched_ax.get_title() and "× 5 chunks" in sched_ax.get_title()


def test_chunk_scan_figure_marks_causal_key_tiles_and_skips_the_rest():
    fig = plot_chunk_scan_tiles(SHAPE_Q256, block=(2, 1, 1))
    assert len(fig.axes) == 5
    c_ax, cb_ax, x_ax, state_ax, out_ax = fig.axes
    assert _solid(cb_ax, LOAD) == [(0, 128, 64, 64), (64, 128, 64, 64), (128, 128, 64, 64)]
    assert _solid(cb_ax, SKIP) == [(192, 128, 64, 64)]
    assert [t.get_text() for t in cb_ax.texts] == ["kt=0", "kt=1", "kt=2\nmasked", "skip"]
    assert _solid(x_ax, LOAD) == [(0, 0, 48, 64), (0, 64, 48, 64), (0, 128, 48, 64)]
    assert _solid(out_ax, STORE) == [(0, 128, 48, 64)]
    assert _solid(c_ax, LOAD) == [(0, 128, 80, 64)] and _solid(state_ax, LOAD) == [(0, 0, 80, 48)]
    # the ragged last chunk: 88 rows, the C·Bᵀ panel is 88 x 88 and row tile 1 (rows 64..87) has 2 key tiles
    fig = plot_chunk_scan_tiles(SHAPE_Q256, block=(1, 2, 0))
    cb_ax = fig.axes[1]
    assert "(88, 88)" in cb_ax.get_title()
    assert _solid(cb_ax, LOAD) == [(0, 64, 64, 24), (64, 64, 24, 24)]
    assert not _solid(cb_ax, SKIP)


def test_chunk_state_figure_shows_the_loop_steps_of_a_long_chunk():
    # bf16, Q = 256: TK = 64 rows per step; chunk 1 has 4 steps, the ragged chunk 2 (rows 512..599) has 2
    k = block_coords("chunk_state", SHAPE_Q256, (0, 1, 0))
    assert (k["c"], k["n_steps"], k["tiles"]["TK"]) == (1, 4, 64)
    assert block_coords("chunk_state", SHAPE_Q256, (0, 2, 0))["n_steps"] == 2
    fig = plot_chunk_state_tiles(SHAPE_Q256, block=(0, 2, 1))
    x_ax = fig.axes[0]
    assert _solid(x_ax, LOAD) == [(0, 512, 48, 64), (0, 576, 48, 24)]
    assert [t.get_text() for t in x_ax.texts] == ["c2 k0", "c2 k1"]


def test_chunk_scan_figure_names_the_blocks_head_and_group():
    # grid axis 2 is the head; h = 4 heads in g = 2 groups: head 3 reads group 1
    plan = _plan(SHAPE_Q256, torch.bfloat16)["chunk_scan"]
    assert plan.grid[2] == SHAPE_Q256.nheads and "HB" not in plan.tiles
    fig = plot_chunk_scan_tiles(SHAPE_Q256, block=(0, 0, 3))
    x_title, title = fig.axes[2].get_title(), fig._suptitle.get_text()
    assert "x[0, chunk 0, 3, :]" in x_title and "head 3 (group 1):" in title
    assert "C·Bᵀ of chunk 0, group 1" in fig.axes[1].get_title()
