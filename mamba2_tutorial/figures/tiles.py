"""Figures of the tile model: a grid of tiles laid over an array, and the tiles a matmul block reads.

``plot_tile_grid((M, N), (TM, TN))`` draws an M x N array (row 0 at the top, like a matrix), the grid of
TM x TN tiles that covers it, each tile labelled with its tile index (= the block that owns it in a
one-tile-per-block kernel), and the *padding*: the part of the ragged last tiles that lies outside the
array, which a load fills according to its ``padding_mode`` and a store skips. ``highlight`` colours chosen
tiles, e.g. the tiles one block loads.

``plot_matmul_tiles(M, N, K, (TM, TN, TK), block=(bm, bn))`` draws A, B and C side by side: the row panel of A
and the column panel of B that block (bm, bn) walks through (one TK step per loop iteration), and the output
tile it stores.

Both return a ``matplotlib.figure.Figure`` (not attached to pyplot; a notebook displays it when it is the
cell's value).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

__all__ = ["plot_matmul_tiles", "plot_tile_grid", "tile_grid_shape"]

_ARRAY_COLOR = "#dbe9f6"
_PAD_COLOR = "#eeeeee"
_HIGHLIGHT = "#f4a261"
_HIGHLIGHT_2 = "#e76f51"
_ELEMENT_LIMIT = 64 * 64  # draw per-element lines only for small arrays


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _as_2d(array_shape, tile_shape) -> tuple[tuple[int, int], tuple[int, int], bool]:
    if isinstance(array_shape, int):
        array_shape = (array_shape,)
    if isinstance(tile_shape, int):
        tile_shape = (tile_shape,)
    array_shape, tile_shape = tuple(array_shape), tuple(tile_shape)
    if len(array_shape) not in (1, 2):
        raise ValueError(f"array_shape must be 1-D or 2-D, got {array_shape}")
    if len(tile_shape) != len(array_shape):
        raise ValueError(f"tile_shape {tile_shape} must have as many dimensions as array_shape {array_shape}")
    for name, dims, low in (("array_shape", array_shape, 0), ("tile_shape", tile_shape, 1)):
        if any(isinstance(d, bool) or not isinstance(d, int) or d < low for d in dims):
            raise ValueError(f"{name} must hold integers >= {low}, got {dims}")
    if len(array_shape) == 1:
        return (1, array_shape[0]), (1, tile_shape[0]), True
    return array_shape, tile_shape, False  # type: ignore[return-value]


def tile_grid_shape(array_shape, tile_shape) -> tuple[int, ...]:
    """Number of tiles along each dimension: ``cdiv(array_shape[d], tile_shape[d])`` (= ``ct.num_tiles``)."""
    shape, tile, one_d = _as_2d(array_shape, tile_shape)
    grid = (_cdiv(shape[0], tile[0]), _cdiv(shape[1], tile[1]))
    return grid[1:] if one_d else grid


def _normalize_highlight(highlight, one_d: bool) -> dict[tuple[int, int], str]:
    if highlight is None:
        return {}
    if isinstance(highlight, Mapping):
        items = list(highlight.items())
    else:
        if isinstance(highlight, int) or (
            isinstance(highlight, tuple) and highlight and all(isinstance(v, int) for v in highlight)
        ):
            highlight = [highlight]
        items = [(h, _HIGHLIGHT) for h in highlight]
    out = {}
    for index, color in items:
        if isinstance(index, int):
            index = (index,)
        index = tuple(index)
        if one_d:
            if len(index) != 1:
                raise ValueError(f"highlight index {index} must be 1-D for a 1-D array")
            index = (0, index[0])
        elif len(index) != 2:
            raise ValueError(f"highlight index {index} must be a (row, column) tile index")
        out[index] = color
    return out


def _draw_grid(ax, shape, tile, *, one_d: bool, highlight: dict, labels, label_fmt: str,
               show_elements: bool | None) -> None:
    m, n = shape
    tm, tn = tile
    gm, gn = _cdiv(m, tm), _cdiv(n, tn)
    pm, pn = max(gm * tm, 1), max(gn * tn, 1)

    # the array, then the padding of the ragged last row/column of tiles
    ax.add_patch(Rectangle((0, 0), n, m, facecolor=_ARRAY_COLOR, edgecolor="none", zorder=0))
    if pn > n:
        ax.add_patch(Rectangle((n, 0), pn - n, pm, facecolor=_PAD_COLOR, hatch="//", edgecolor="#bbbbbb",
                               linewidth=0, zorder=0))
    if pm > m:
        ax.add_patch(Rectangle((0, m), n, pm - m, facecolor=_PAD_COLOR, hatch="//", edgecolor="#bbbbbb",
                               linewidth=0, zorder=0))

    # highlighted tiles: the in-bounds part solid, the padding part lighter
    for (i, j), color in highlight.items():
        if not (0 <= i < gm and 0 <= j < gn):
            raise ValueError(f"highlight tile ({i}, {j}) is outside the {gm} x {gn} tile grid")
        r0, c0 = i * tm, j * tn
        ax.add_patch(Rectangle((c0, r0), tn, tm, facecolor=color, alpha=0.35, edgecolor="none", zorder=1))
        ax.add_patch(Rectangle((c0, r0), min(tn, n - c0), min(tm, m - r0), facecolor=color, alpha=0.85,
                               edgecolor="none", zorder=1))

    if show_elements is None:
        show_elements = pm * pn <= _ELEMENT_LIMIT and max(pm, pn) <= 128 and (tm > 1 or tn > 1)
    if show_elements:
        for r in range(1, pm):
            ax.plot([0, pn], [r, r], color="white", linewidth=0.5, zorder=2)
        for c in range(1, pn):
            ax.plot([c, c], [0, pm], color="white", linewidth=0.5, zorder=2)

    # tile boundaries, and the array boundary on top
    for i in range(gm + 1):
        ax.plot([0, pn], [i * tm, i * tm], color="#335c81", linewidth=1.2, zorder=3)
    for j in range(gn + 1):
        ax.plot([j * tn, j * tn], [0, pm], color="#335c81", linewidth=1.2, zorder=3)
    ax.add_patch(Rectangle((0, 0), n, m, fill=False, edgecolor="black", linewidth=2.2, zorder=4))

    if labels:
        fontsize = max(6, min(11, int(110 / max(gm, gn, 1))))
        for i in range(gm):
            for j in range(gn):
                if callable(labels):
                    text = labels((j,) if one_d else (i, j))
                elif one_d:
                    text = label_fmt.format(index=j, i=j, j=j)
                else:
                    text = label_fmt.format(index=f"({i}, {j})", i=i, j=j)
                if text:
                    ax.text(j * tn + tn / 2, i * tm + tm / 2, text, ha="center", va="center",
                            fontsize=fontsize, zorder=5,
                            bbox=dict(boxstyle="round,pad=0.15", facecolor="white", alpha=0.7, linewidth=0))

    ax.set_xlim(-0.02 * pn, pn * 1.02)
    if one_d:  # a strip: stretch it to a visible height instead of one element's
        ax.set_ylim(1.15, -0.15)
        ax.set_aspect("auto")
    else:
        ax.set_ylim(pm * 1.02, -0.02 * pm)
        ax.set_aspect("equal")
    ax.set_xticks(sorted({0, n} | {j * tn for j in range(gn)}))
    ax.tick_params(axis="x", labelsize=7, top=True, labeltop=True, bottom=False, labelbottom=False)
    if one_d:
        ax.set_yticks([])
    else:
        ax.set_yticks(sorted({0, m} | {i * tm for i in range(gm)}))
        ax.tick_params(axis="y", labelsize=7)
    for spine in ax.spines.values():
        spine.set_visible(False)


def plot_tile_grid(
    array_shape: int | Sequence[int],
    tile_shape: int | Sequence[int],
    *,
    highlight=None,
    title: str | None = None,
    labels: bool | Callable[[tuple[int, ...]], str] = True,
    label_fmt: str = "{index}",
    show_elements: bool | None = None,
    ax=None,
) -> Figure:
    """Draw the tiles of shape ``tile_shape`` covering an array of shape ``array_shape`` (1-D or 2-D).

    Tile (i, j) covers rows ``i*TM ... i*TM+TM-1`` and columns ``j*TN ... j*TN+TN-1``: the index a kernel
    passes to ``ct.load``/``ct.store``. Hatched grey = padding (outside the array). ``labels``: True writes
    each tile's index (format ``label_fmt`` with ``{index}``, ``{i}``, ``{j}``, e.g. ``"block {index}"``),
    False none, or a function of the tile index returning the text. ``highlight``: a tile index, a list of
    them, or a dict tile index -> colour. ``show_elements`` draws one cell per element (default: small
    arrays).
    Returns the Figure (drawn into ``ax`` when given).
    """
    shape, tile, one_d = _as_2d(array_shape, tile_shape)
    marks = _normalize_highlight(highlight, one_d)
    if ax is None:
        pm, pn = max(_cdiv(shape[0], tile[0]) * tile[0], 1), max(_cdiv(shape[1], tile[1]) * tile[1], 1)
        width = 8.0
        height = 1.6 if one_d else min(8.0, max(2.5, width * pm / pn + 0.8))
        fig = Figure(figsize=(width, height), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    _draw_grid(ax, shape, tile, one_d=one_d, highlight=marks, labels=labels, label_fmt=label_fmt,
               show_elements=show_elements)
    pm, pn = max(_cdiv(shape[0], tile[0]) * tile[0], 1), max(_cdiv(shape[1], tile[1]) * tile[1], 1)
    if not one_d and max(pm / pn, pn / pm) > 5:  # very elongated: stretch rather than draw a sliver
        ax.set_aspect("auto")
    grid = tile_grid_shape(array_shape, tile_shape)
    if title is None:
        shape_txt = f"({shape[1]},)" if one_d else f"{shape}"
        tile_txt = f"({tile[1]},)" if one_d else f"{tile}"
        grid_txt = " x ".join(str(g) for g in grid)
        title = f"array {shape_txt} in tiles of {tile_txt}: {grid_txt} tiles"
    ax.set_title(title, fontsize=10)
    handles = [Patch(facecolor=_ARRAY_COLOR, label="array"),
               Patch(facecolor=_PAD_COLOR, hatch="//", edgecolor="#bbbbbb",
                     label="padding (outside the array)")]
    if marks:
        handles.append(Patch(facecolor=_HIGHLIGHT, label="highlighted tile"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    return fig


def plot_matmul_tiles(
    M: int, N: int, K: int, tile: Sequence[int], *, block: tuple[int, int] = (0, 0), k_step: int | None = 0,
    title: str | None = None,
) -> Figure:
    """The tiles that block ``(bm, bn)`` of a tiled matmul C = A @ B (tile (TM, TN, TK)) touches.

    A's row panel (tiles (bm, k) for every k) and B's column panel (tiles (k, bn)) are highlighted; the tiles
    of loop step ``k_step`` are darker (None: no step singled out). C's tile (bm, bn) is the one the block
    stores. Padding of ragged tiles is hatched.
    """
    if len(tile) != 3:
        raise ValueError(f"tile must be (TM, TN, TK), got {tile!r}")
    tm, tn, tk = tile
    bm, bn = block
    gm, gn, gk = _cdiv(M, tm), _cdiv(N, tn), _cdiv(K, tk)
    if not (0 <= bm < gm and 0 <= bn < gn):
        raise ValueError(f"block {block} is outside the {gm} x {gn} grid of blocks")
    if k_step is not None and not 0 <= k_step < gk:
        raise ValueError(f"k_step {k_step} is outside 0..{gk - 1} (K has {gk} tiles of {tk})")
    fig = Figure(figsize=(12, 4.2), layout="constrained")
    axes = fig.subplots(1, 3, width_ratios=[max(K, 1), max(N, 1), max(N, 1)])
    a_marks = {(bm, k): (_HIGHLIGHT_2 if k == k_step else _HIGHLIGHT) for k in range(gk)}
    b_marks = {(k, bn): (_HIGHLIGHT_2 if k == k_step else _HIGHLIGHT) for k in range(gk)}
    for ax, shape, tshape, marks, name in (
        (axes[0], (M, K), (tm, tk), a_marks, f"A ({M}, {K}): row panel {bm}"),
        (axes[1], (K, N), (tk, tn), b_marks, f"B ({K}, {N}): column panel {bn}"),
        (axes[2], (M, N), (tm, tn), {(bm, bn): _HIGHLIGHT_2}, f"C ({M}, {N}): output tile {block}"),
    ):
        _draw_grid(ax, shape, tshape, one_d=False, highlight=marks, labels=True, label_fmt="{index}",
                   show_elements=False)
        ax.set_title(name, fontsize=10)
    step = "" if k_step is None else f"; darker: loop step k = {k_step}"
    fig.suptitle(title or f"block ({bm}, {bn}) with tiles (TM, TN, TK) = ({tm}, {tn}, {tk}): "
                 f"{gk} steps along K{step}", fontsize=11)
    return fig
