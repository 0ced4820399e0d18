"""Figures of the three SSD kernels' tiles laid over the tensors they read and write (notebooks 05-07).

Each function takes a problem size (an :class:`~mamba2_tutorial.lessons.inputs.SSDShape` or a preset name),
the input dtype and one block of the launch grid, given as the ``(ct.bid(0), ct.bid(1), ct.bid(2))`` the
kernel sees. It takes the grid and tile sizes from :func:`mamba2_tutorial.kernels.forward.ssd_plan` (the same
plan the launches of ``ssd_forward_taught`` use),
decodes the block index exactly as the kernel does, and draws, with
:func:`mamba2_tutorial.figures.tiles.plot_tile_grid`, every tile that block loads (orange; darker for the tile
it stores). Hatched grey is padding: outside the tensor, zero-filled on load, skipped on store.

* :func:`plot_chunk_state_tiles`: x (l, p) and B (l, n) of one (batch, head) and the (p, n) state tile.
* :func:`plot_state_passing_tiles`: the state tile a block owns, and the schedule: blocks side by side
  (parallel), chunks one after the other (sequential).
* :func:`plot_chunk_scan_tiles`: one chunk's C, the (Q, Q) matrix C·Bᵀ by key tiles (causal ones only),
  x, the state entering the chunk, and the output tile.

All return a ``matplotlib.figure.Figure`` (not attached to pyplot). ``block_coords`` gives the decoded
coordinates without drawing anything.
"""

from __future__ import annotations

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..lessons.inputs import SSDShape, get_shape
from .tiles import plot_tile_grid

__all__ = ["block_coords", "plot_chunk_scan_tiles", "plot_chunk_state_tiles", "plot_state_passing_tiles"]

LOAD = "#f4a261"  # tiles a block loads
STORE = "#e76f51"  # the tile a block stores
SKIP = "#bbbbbb"  # tiles a block never touches although they lie in its row (causality)
KERNELS = ("chunk_state", "state_passing", "chunk_scan")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _plan(shape: SSDShape, dtype: torch.dtype):
    from ..kernels.forward import ssd_plan

    s = shape
    return ssd_plan(s.batch, s.seqlen, s.nheads, s.headdim, s.ngroups, s.dstate, s.chunk_size, dtype)


def block_coords(kernel: str, shape: SSDShape | str, block: tuple[int, int, int], *,
                 dtype: torch.dtype = torch.bfloat16) -> dict:
    """What block ``(bid0, bid1, bid2)`` of ``kernel``'s grid works on, decoded as the kernel decodes it.

    Returns a dict with the plan (``grid``, ``tiles``) and the coordinates: the block's head ``h`` (grid
    axis 2 in all three kernels) and its group ``g``; for ``"chunk_state"`` the state tile ``i_p, i_n``, batch
    ``b``, chunk ``c`` and ``n_steps``, its loop steps of TK rows; for ``"state_passing"`` ``i_p, i_n, b``;
    for ``"chunk_scan"`` the row tile ``i_m``, the head-dim tile ``i_p``, ``b, c``, ``n_key_tiles``, the
    number of key tiles its intra-chunk loop visits, and ``active``, False for a row tile entirely past the
    sequence end (the kernel skips it). Raises ValueError for a block outside the grid (naming the grid).
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    s = get_shape(shape)
    plan = _plan(s, dtype)[kernel]
    grid, t = plan.grid, plan.tiles
    if len(block) != 3 or any(not 0 <= int(i) < n for i, n in zip(block, grid)):
        raise ValueError(f"block {tuple(block)} is outside the {kernel} grid {grid}")
    pid0, pid1, pid2 = (int(i) for i in block)
    nchunks = _cdiv(s.seqlen, s.chunk_size)
    out = {"kernel": kernel, "grid": grid, "tiles": dict(t), "h": pid2, "g": pid2 // s.heads_per_group}
    if kernel in ("chunk_state", "state_passing"):
        n_tiles = _cdiv(s.dstate, t["TN"])
        out.update(i_p=pid0 // n_tiles, i_n=pid0 % n_tiles)
        if kernel == "chunk_state":
            c = pid1 % nchunks
            TK = t["TK"]  # chunk rows per mma step
            out.update(b=pid1 // nchunks, c=c, n_steps=min(t["Q"] // TK, _cdiv(s.seqlen - c * t["Q"], TK)))
        else:
            out.update(b=pid1)
        return out
    p_tiles = _cdiv(s.headdim, t["TP"])
    i_m, i_p = pid0 // p_tiles, pid0 % p_tiles
    b, c = pid1 // nchunks, pid1 % nchunks
    Q, TM, TK = t["Q"], t["TM"], t["TK"]
    n_k = min(((i_m + 1) * TM) // TK, _cdiv(s.seqlen - c * Q, TK))
    out.update(i_m=i_m, i_p=i_p, b=b, c=c, n_key_tiles=max(n_k, 0),
               active=(c * (Q // TM) + i_m) * TM < s.seqlen)
    return out


def _finish(fig: Figure, title: str, *, skipped: bool = False) -> Figure:
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None:
            legend.remove()
    handles = [Patch(facecolor=LOAD, label="loaded by the block"),
               Patch(facecolor=STORE, label="stored by the block"),
               Patch(facecolor="#eeeeee", hatch="//", edgecolor="#bbbbbb", label="padding (zero on load)")]
    if skipped:
        handles.append(Patch(facecolor=SKIP, label="skipped (causality: keys after the block's last row)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10)
    return fig


def plot_chunk_state_tiles(shape: SSDShape | str, *, dtype: torch.dtype = torch.bfloat16,
                           block: tuple[int, int, int] = (0, 0, 0)) -> Figure:
    """Kernel 1: the tiles block ``block`` reads and writes.

    It reads chunk c of x[b, :, h, :] ((TK, TP) tiles of the (l, p) matrix, one per loop step k) and of
    B[b, :, g, :] ((TK, TN) tiles of (l, n)), plus chunk c of dt (Q values), and stores the (TP, TN) tile of
    states[b, c, h] (p, n). Labels "c2 k1": chunk 2, loop step 1.
    """
    s = get_shape(shape)
    k = block_coords("chunk_state", s, block, dtype=dtype)
    t, c = k["tiles"], k["c"]
    Q, TK, TP, TN = t["Q"], t["TK"], t["TP"], t["TN"]
    steps = {c * (Q // TK) + kt: kt for kt in range(k["n_steps"])}  # row tile along l -> loop step
    fig = Figure(figsize=(12, 4.6), layout="constrained")
    axes = fig.subplots(1, 3, width_ratios=[max(s.headdim, 8), max(s.dstate, 8), max(s.dstate, 8)])

    def step_label(column):
        def label(index):
            i, j = index
            return f"c{c} k{steps[i]}" if i in steps and j == column else ""
        return label

    plot_tile_grid((s.seqlen, s.headdim), (TK, TP), highlight={(i, k["i_p"]): LOAD for i in steps},
                   ax=axes[0],
                   labels=step_label(k["i_p"]), show_elements=False,
                   title=f"x[{k['b']}, :, {k['h']}, :]  (l, p) = ({s.seqlen}, {s.headdim})\n"
                         f"tiles (TK, TP) = ({TK}, {TP}), chunk {c} = rows {c * Q}..")
    plot_tile_grid((s.seqlen, s.dstate), (TK, TN), highlight={(i, k["i_n"]): LOAD for i in steps}, ax=axes[1],
                   labels=step_label(k["i_n"]), show_elements=False,
                   title=f"B[{k['b']}, :, {k['g']}, :]  (l, n) = ({s.seqlen}, {s.dstate})\n"
                         f"tiles (TK, TN) = ({TK}, {TN})")
    plot_tile_grid((s.headdim, s.dstate), (TP, TN), highlight={(k["i_p"], k["i_n"]): STORE}, ax=axes[2],
                   show_elements=False,
                   title=f"states[{k['b']}, {c}, {k['h']}]  (p, n) = ({s.headdim}, {s.dstate})\n"
                         f"tiles (TP, TN) = ({TP}, {TN})")
    return _finish(fig, f"chunk_state, {_dtype_name(dtype)}: grid {k['grid']}; block {tuple(block)} = "
                        f"state tile ({k['i_p']}, {k['i_n']}) of batch {k['b']}, chunk {c}, head {k['h']} "
                        f"(group {k['g']}): states tile = Σ over {k['n_steps']} step(s) of "
                        f"(x·w)ᵀ[{TP}×{TK}] @ B[{TK}×{TN}]")


def plot_state_passing_tiles(shape: SSDShape | str, *, dtype: torch.dtype = torch.bfloat16,
                             block: tuple[int, int, int] = (0, 0, 0), max_blocks: int = 24) -> Figure:
    """Kernel 2: the (TP, TN) state tile block ``block`` owns, and the schedule of the whole grid.

    Right panel: one column per block (the first ``max_blocks`` in launch order: tile fastest, then batch,
    then head), one row per chunk. All columns run at the same time; each column walks down its rows in
    order, carrying its state tile from chunk c to chunk c+1.
    """
    s = get_shape(shape)
    k = block_coords("state_passing", s, block, dtype=dtype)
    grid, t = k["grid"], k["tiles"]
    TP, TN = t["TP"], t["TN"]
    nchunks = _cdiv(s.seqlen, s.chunk_size)
    nblocks = grid[0] * grid[1] * grid[2]
    shown = min(nblocks, max_blocks)
    col = block[0] + grid[0] * (block[1] + grid[1] * block[2])  # launch order: bid(0) fastest
    fig = Figure(figsize=(12, 4.4), layout="constrained")
    axes = fig.subplots(1, 2, width_ratios=[1.0, 1.6])
    plot_tile_grid((s.headdim, s.dstate), (TP, TN), highlight={(k["i_p"], k["i_n"]): STORE}, ax=axes[0],
                   title=f"state of batch {k['b']}, head {k['h']}: (p, n) = ({s.headdim}, {s.dstate})\n"
                         f"tiles (TP, TN) = ({TP}, {TN})")
    first = f", first {shown}" if shown < nblocks else ""
    marks = {(c, col): (STORE if c == nchunks - 1 else LOAD) for c in range(nchunks)} if col < shown else {}

    def label(index):
        c, j = index
        return f"c{c}" if j == col else ""

    plot_tile_grid((nchunks, shown), (1, 1), highlight=marks, labels=label, show_elements=False, ax=axes[1],
                   title=f"schedule: {nblocks} blocks in parallel (columns{first})"
                         f"\n× {nchunks} chunks in sequence (rows, top to bottom)")
    axes[1].set_xlabel("block, in launch order", fontsize=8)
    axes[1].set_ylabel("chunk c (loop iteration)", fontsize=8)
    return _finish(fig, f"state_passing: grid {grid}; block {tuple(block)} owns state tile "
                        f"({k['i_p']}, {k['i_n']}) of batch {k['b']}, head {k['h']} "
                        f"and updates it {nchunks} times: "
                        "S ← exp(dA_chunk)·S + states[c]")


def plot_chunk_scan_tiles(shape: SSDShape | str, *, dtype: torch.dtype = torch.bfloat16,
                          block: tuple[int, int, int] = (0, 0, 0)) -> Figure:
    """Kernel 3: the tiles block ``block`` reads inside its chunk, and the output tile it writes.

    Panels (all for chunk c of batch b, head h, group g): C (rows of the chunk × n, tile (TM, NS)); the (Q, Q)
    matrix C·Bᵀ cut in (TM, TK) tiles: the block computes the ones left of and on the diagonal in its row
    (``n_key_tiles`` loop steps; right of the diagonal is skipped: causality); x (rows × p, tiles (TK, TP));
    the state entering the chunk (p × n, tile (TP, NS)); the output (rows × p, tile (TM, TP)).
    """
    s = get_shape(shape)
    k = block_coords("chunk_scan", s, block, dtype=dtype)
    if not k["active"]:
        raise ValueError(f"block {tuple(block)} covers rows past the sequence end (l = {s.seqlen}): "
                         "it does nothing")
    t = k["tiles"]
    Q, TM, TK, TP, NS = t["Q"], t["TM"], t["TK"], t["TP"], t["NS"]
    c, i_m, i_p, n_k = k["c"], k["i_m"], k["i_p"], k["n_key_tiles"]
    rows = min(Q, s.seqlen - c * Q)  # rows of this chunk inside the sequence (fewer in a ragged last chunk)
    gk = _cdiv(rows, TK)
    cb_marks = {(i_m, kt): LOAD for kt in range(n_k)}
    cb_marks.update({(i_m, kt): SKIP for kt in range(n_k, gk)})

    def cb_label(index):
        i, j = index
        if i != i_m:
            return ""
        if j < n_k:
            return f"kt={j}" + ("\nmasked" if (j + 1) * TK > i_m * TM else "")
        return "skip"

    fig = Figure(figsize=(15, 5.0), layout="constrained")
    axes = fig.subplots(1, 5, width_ratios=[max(s.dstate, 8), 1.6 * rows, max(s.headdim, 8), max(s.dstate, 8),
                                            max(s.headdim, 8)])
    b, h, g = k["b"], k["h"], k["g"]
    plot_tile_grid((rows, s.dstate), (TM, NS), highlight={(i_m, 0): LOAD}, ax=axes[0], labels=False,
                   show_elements=False,
                   title=f"C[{b}, chunk {c}, {g}, :]\n({rows}, n={s.dstate}), tile ({TM}, NS={NS})")
    plot_tile_grid((rows, rows), (TM, TK), highlight=cb_marks, labels=cb_label, ax=axes[1],
                   show_elements=False,
                   title=f"C·Bᵀ of chunk {c}, group {g} (never stored)\n"
                         f"({rows}, {rows}), tiles (TM, TK) = ({TM}, {TK})")
    plot_tile_grid((rows, s.headdim), (TK, TP), highlight={(kt, i_p): LOAD for kt in range(n_k)}, ax=axes[2],
                   labels=False, show_elements=False,
                   title=f"x[{b}, chunk {c}, {h}, :]\n({rows}, p={s.headdim}), tiles ({TK}, {TP})")
    plot_tile_grid((s.headdim, s.dstate), (TP, NS), highlight={(i_p, 0): LOAD}, ax=axes[3], labels=False,
                   show_elements=False,
                   title=f"chunk_init_states[{b}, {c}, {h}]\n"
                         f"(p, n) = ({s.headdim}, {s.dstate}), tile ({TP}, {NS})")
    plot_tile_grid((rows, s.headdim), (TM, TP), highlight={(i_m, i_p): STORE}, ax=axes[4], labels=False,
                   show_elements=False,
                   title=f"out[{b}, chunk {c}, {h}, :]\n({rows}, p={s.headdim}), tile ({TM}, {TP})")
    return _finish(fig, f"chunk_scan, {_dtype_name(dtype)}: grid {k['grid']}; block {tuple(block)} = rows "
                        f"{i_m * TM}..{min((i_m + 1) * TM, rows) - 1} × columns {i_p * TP}.. of chunk {c}, "
                        f"batch {b}, head {h} (group {g}): {n_k} key tile(s) in its loop", skipped=gk > n_k)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")
