"""Tile-grid figures: geometry of tiles, padding and highlights."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from mamba2_tutorial.figures.tiles import plot_matmul_tiles, plot_tile_grid, tile_grid_shape  # noqa: E402


def _rects(ax):
    return [p for p in ax.patches if isinstance(p, Rectangle)]


def _texts(ax):
    return [t.get_text() for t in ax.texts]


@pytest.mark.parametrize(
    ("shape", "tile", "grid"),
    [((10, 13), (4, 4), (3, 4)), ((7, 32), (8, 16), (1, 2)), (1000, 256, (4,)), ((33,), (16,), (3,))],
)
def test_tile_grid_shape_is_cdiv(shape, tile, grid):
    assert tile_grid_shape(shape, tile) == grid


def test_2d_grid_labels_every_tile_and_shades_padding():
    fig = plot_tile_grid((10, 13), (4, 4), label_fmt="block {index}")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    labels = _texts(ax)
    assert len(labels) == 12
    assert "block (0, 0)" in labels and "block (2, 3)" in labels
    hatched = [r for r in _rects(ax) if r.get_hatch() == "//"]
    # padding right of column 13 (up to 16) and below row 10 (up to 12)
    extents = sorted((r.get_x(), r.get_y(), r.get_width(), r.get_height()) for r in hatched)
    assert extents == [(0, 10, 13, 2), (13, 0, 3, 12)]
    assert "3 x 4 tiles" in ax.get_title()


def test_exact_fit_has_no_padding_and_1d_strip():
    ax = plot_tile_grid((16, 32), (8, 16)).axes[0]
    assert not [r for r in _rects(ax) if r.get_hatch() == "//"]
    assert ax.get_aspect() == 1.0  # square elements
    assert plot_tile_grid((13, 150), (8, 64)).axes[0].get_aspect() == "auto"  # too flat: stretched
    ax1 = plot_tile_grid(1000, 256, highlight=3, label_fmt="block {index}").axes[0]
    assert _texts(ax1) == ["block 0", "block 1", "block 2", "block 3"]
    hatched = [r for r in _rects(ax1) if r.get_hatch() == "//"]
    assert [(r.get_x(), r.get_width()) for r in hatched] == [(1000, 24)]


def test_highlight_marks_the_tile_in_and_out_of_bounds():
    ax = plot_tile_grid((10, 13), (4, 4), highlight={(2, 3): "red"}, labels=False).axes[0]
    red = [r for r in _rects(ax) if r.get_facecolor()[:3] == (1.0, 0.0, 0.0)]
    sizes = sorted((r.get_x(), r.get_y(), r.get_width(), r.get_height()) for r in red)
    # whole tile (padding part lighter) and the in-bounds 2 x 1 corner
    assert sizes == [(12, 8, 1, 2), (12, 8, 4, 4)]
    assert _texts(ax) == []


def test_callable_labels_and_bad_arguments():
    ax = plot_tile_grid((5, 9), (4, 8), labels=lambda ij: f"b{ij[0]}{ij[1]}").axes[0]
    assert sorted(_texts(ax)) == ["b00", "b01", "b10", "b11"]
    with pytest.raises(ValueError, match="outside"):
        plot_tile_grid((5, 9), (4, 8), highlight=(2, 0))
    with pytest.raises(ValueError, match="tile_shape"):
        plot_tile_grid((5, 9), (4,))
    with pytest.raises(ValueError, match="tile_shape"):
        plot_tile_grid((5, 9), (0, 4))


def test_matmul_tiles_highlights_panels():
    fig = plot_matmul_tiles(100, 72, 50, (64, 64, 32), block=(1, 0), k_step=1)
    ax_a, ax_b, ax_c = fig.axes[:3]
    assert "row panel 1" in ax_a.get_title() and "column panel 0" in ax_b.get_title()
    assert "(1, 0)" in ax_c.get_title()
    assert "2 steps along K" in fig._suptitle.get_text()
    with pytest.raises(ValueError, match="block"):
        plot_matmul_tiles(100, 72, 50, (64, 64, 32), block=(2, 0))
    with pytest.raises(ValueError, match="k_step"):
        plot_matmul_tiles(100, 72, 50, (64, 64, 32), k_step=2)
