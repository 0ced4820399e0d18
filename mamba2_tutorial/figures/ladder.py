"""Figures for the reference ladder (notebooks 01-03): decay, state norms, the decay mask, the SSD matrix's
block decomposition, the decay mask cut into chunks (with an interactive version), and cost curves.

Every function builds a :class:`matplotlib.figure.Figure` directly (no pyplot state, safe without a display),
labels its axes, gives it a title (and a colorbar for heatmaps) and returns the Figure; nothing is shown. In
Jupyter, a Figure as the last expression of a cell is displayed. Pass ``ax=`` to draw into an existing
Axes instead (the function then returns that Axes' Figure).

Inputs may be torch tensors or NumPy arrays; they are read as float64 on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.colors import SymLogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from ..lessons import costs

__all__ = [
    "plot_decay",
    "plot_state_norms",
    "plot_decay_mask",
    "plot_segsum_comparison",
    "ssd_matrix",
    "plot_ssd_blocks",
    "plot_decay_blocks",
    "decay_blocks_widget",
    "chunk_decay_matrix",
    "plot_cost_curves",
    "FORM_COLORS",
]

#: One colour per form of the ladder, used in every figure.
FORM_COLORS = {"recurrent": "tab:blue", "quadratic": "tab:red", "chunked": "tab:green"}
_DIAG_COLOR = "tab:orange"
_OFFDIAG_COLOR = "tab:blue"


def _np(a) -> np.ndarray:
    """A float64 NumPy copy of a tensor or array (CPU, detached)."""
    if hasattr(a, "detach"):
        a = a.detach().to("cpu").double().numpy()
    return np.asarray(a, dtype=np.float64)


def _new_axes(ax, *, figsize=(6.0, 4.5)):
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def _chunk_edges(length: int, chunk_size: int | None) -> list[int]:
    if chunk_size is None:
        return []
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    return list(range(chunk_size, length, chunk_size))


def _select_heads(nheads: int, heads: Sequence[int] | None, max_heads: int = 8) -> list[int]:
    if heads is None:
        return list(range(min(nheads, max_heads)))
    heads = list(heads)
    for hh in heads:
        if not 0 <= hh < nheads:
            raise ValueError(f"head index {hh} out of range for {nheads} heads")
    return heads


# -- rung 1: decay and state over time ---------------------------------------------------------------------
def plot_decay(
    dt, A, *, batch: int = 0, heads: Sequence[int] | None = None, title: str | None = None
) -> Figure:
    """Three panels over time t for a few heads of one batch element: the step size ``dt_t``, the per-step
    decay ``exp(dt_t·A)`` (how much of the state survives one step) and the decay accumulated since the
    start ``exp(dt_1·A + ... + dt_t·A)`` (log scale).

    dt (b, l, h) (already processed: bias, softplus, clamp) or (l, h); A (h,).
    """
    dt = _np(dt)
    A = _np(A)
    if dt.ndim == 3:
        dt = dt[batch]
    if dt.ndim != 2 or A.ndim != 1 or A.shape[0] != dt.shape[1]:
        raise ValueError(f"dt must be (b, l, h) or (l, h) and A (h,), got dt {dt.shape} and A {A.shape}")
    l, h = dt.shape
    heads = _select_heads(h, heads)
    t = np.arange(l)
    dA = dt * A  # (l, h): the log-decay per step, <= 0
    fig = Figure(figsize=(7.0, 7.0), layout="constrained")
    ax_dt, ax_step, ax_cum = fig.subplots(3, 1, sharex=True)
    for hh in heads:
        label = f"head {hh} (A = {A[hh]:.3g})"
        ax_dt.plot(t, dt[:, hh], label=label)
        ax_step.plot(t, np.exp(dA[:, hh]), label=label)
        ax_cum.plot(t, np.exp(np.cumsum(dA[:, hh])), label=label)
    ax_dt.set_ylabel("dt_t (step size)")
    ax_dt.set_title("step size dt_t: large dt = take in more input, forget more")
    ax_step.set_ylabel("exp(dt_t·A)")
    ax_step.set_title("per-step decay of the state (1 = keep everything)")
    ax_cum.set_ylabel("exp(Σ_{s≤t} dt_s·A)")
    ax_cum.set_yscale("log")
    ax_cum.set_title("decay accumulated since t = 0 (log scale)")
    ax_cum.set_xlabel("time step t")
    ax_dt.legend(fontsize="small", ncol=2)
    fig.suptitle(title or f"Decay over time (batch {batch})")
    return fig


def plot_state_norms(
    states,
    *,
    batch: int = 0,
    heads: Sequence[int] | None = None,
    chunk_size: int | None = None,
    log: bool = False,
    ax=None,
    title: str | None = None,
) -> Figure:
    """The Frobenius norm ``‖state_t‖`` of each head's (p × n) state after every step t.

    states: (b, l, h, p, n) (the state after each step; pick ``batch``) or (l, h, p, n).
    ``chunk_size`` draws the chunk boundaries (notebook 03).
    """
    s = _np(states)
    if s.ndim == 5:
        s = s[batch]
    if s.ndim != 4:
        raise ValueError(f"states must be (b, l, h, p, n) or (l, h, p, n), got shape {s.shape}")
    l, h = s.shape[:2]
    norms = np.sqrt((s**2).sum(axis=(2, 3)))  # (l, h)
    fig, ax = _new_axes(ax)
    t = np.arange(l)
    for hh in _select_heads(h, heads):
        ax.plot(t, norms[:, hh], marker=".", markersize=3, label=f"head {hh}")
    for edge in _chunk_edges(l, chunk_size):
        ax.axvline(edge - 0.5, color="gray", linestyle=":", linewidth=1)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("time step t")
    ax.set_ylabel("‖state_t‖ (Frobenius norm over p × n)")
    ax.set_title(title or "State norm over time: decay pulls it down, new input pushes it up")
    ax.legend(fontsize="small", ncol=2)
    return fig


# -- rung 2: the decay mask and the segment sums ----------------------------------------------------------
def _decay_matrix(dA_or_L, kind: str) -> np.ndarray:
    """(l, l) decay mask L from a 1-D log-decay dA (l,) or a square matrix that already is L."""
    import torch

    if kind not in ("auto", "dA", "L"):
        raise ValueError(f"kind must be 'auto', 'dA' or 'L', got {kind!r}")
    a = dA_or_L if isinstance(dA_or_L, torch.Tensor) else torch.as_tensor(np.asarray(dA_or_L))
    if kind == "auto":
        kind = "dA" if a.ndim == 1 else "L"
    if kind == "dA":
        if a.ndim != 1:
            raise ValueError(f"dA must be 1-D (l,) for one head, got shape {tuple(a.shape)}")
        from ..reference import segsum

        return _np(torch.exp(segsum(a.double())))
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"L must be a square (l, l) matrix for one head, got shape {tuple(a.shape)}")
    return _np(a)


def _draw_chunks(ax, l: int, chunk_size: int | None, color="white") -> None:
    for edge in _chunk_edges(l, chunk_size):
        ax.axhline(edge - 0.5, color=color, linewidth=1.2)
        ax.axvline(edge - 0.5, color=color, linewidth=1.2)


def plot_decay_mask(
    dA_or_L,
    *,
    kind: str = "auto",
    log: bool = False,
    chunk_size: int | None = None,
    seq_idx=None,
    ax=None,
    title: str | None = None,
) -> Figure:
    """The decay mask ``L[i, j] = exp(dA_{j+1} + ... + dA_i)`` of one head as a heatmap.

    ``dA_or_L``: the per-step log-decay ``dA = dt·A`` of one head, shape (l,) (L is computed with the
    stable :func:`mamba2_tutorial.reference.segsum`), or L itself, shape (l, l). ``kind`` forces the reading
    ("dA" or "L"). ``log=True`` shows log10 L, which makes the slow decay of far-away steps visible. The
    upper triangle (i < j: the future) is masked out. ``chunk_size`` draws chunk boundaries. ``seq_idx``
    (l,): a packed row; L is made block-diagonal (zero where i and j belong to different sequences) and the
    sequence boundaries are drawn as red dashed lines.
    """
    L = _decay_matrix(dA_or_L, kind)
    l = L.shape[0]
    boundaries = []
    if seq_idx is not None:
        ids = _np(seq_idx).reshape(-1)
        if ids.shape != (l,):
            raise ValueError(f"seq_idx must have shape (l,) = ({l},) for one row, got {tuple(ids.shape)}")
        L = np.where(ids[:, None] == ids[None, :], L, 0.0)
        boundaries = [t for t in range(1, l) if ids[t] != ids[t - 1]]
    upper = np.triu(np.ones((l, l), dtype=bool), k=1)
    with np.errstate(divide="ignore"):
        values = np.log10(L) if log else L.copy()
    values = np.ma.masked_where(upper | ~np.isfinite(values), values)
    fig, ax = _new_axes(ax, figsize=(6.0, 5.0))
    cmap = _cmap("viridis")
    vmin, vmax = (None, None) if log else (0.0, 1.0)
    im = ax.imshow(values, cmap=cmap, interpolation="nearest", vmin=vmin, vmax=vmax)
    _draw_chunks(ax, l, chunk_size)
    for edge in boundaries:
        ax.axhline(edge - 0.5, color="red", linestyle="--", linewidth=1.2)
        ax.axvline(edge - 0.5, color="red", linestyle="--", linewidth=1.2)
    label = "log10 L[i, j]" if log else "L[i, j] = exp(dA_{j+1} + … + dA_i)"
    fig.colorbar(im, ax=ax, label=label)
    ax.set_xlabel("j (input position: source)")
    ax.set_ylabel("i (output position: target)")
    ax.set_title(title or "Decay mask L: how much of input j survives at step i")
    return fig


def _cmap(name: str):
    import matplotlib

    return matplotlib.colormaps[name].with_extremes(bad="lightgray")


def plot_segsum_comparison(a, *, title: str | None = None) -> Figure:
    """Side by side: ``exp(segsum_naive(a))`` and ``exp(segsum(a))`` for one head's log-decays ``a`` (l,),
    both computed in ``a``'s dtype, with the entries where the naive one is not finite (NaN or inf) or off
    by more than 1e-3 (absolute) marked in red, and the count in the titles. Above the diagonal is grey.
    """
    import torch

    from ..reference import segsum, segsum_naive

    a = a if isinstance(a, torch.Tensor) else torch.as_tensor(np.asarray(a))
    if a.ndim != 1:
        raise ValueError(f"a must be 1-D (l,) for one head, got shape {tuple(a.shape)}")
    stable = _np(torch.exp(segsum(a)))
    naive = _np(torch.exp(segsum_naive(a)))
    exact = _np(torch.exp(segsum(a.double())))
    l = a.shape[0]
    lower = np.tril(np.ones((l, l), dtype=bool))
    fig = Figure(figsize=(11.0, 4.8), layout="constrained")
    axes = fig.subplots(1, 2)
    dtype = str(a.dtype).replace("torch.", "")
    for ax, values, name in ((axes[0], naive, "segsum_naive"), (axes[1], stable, "segsum")):
        with np.errstate(invalid="ignore"):
            bad = lower & (~np.isfinite(values) | (np.abs(values - exact) > 1e-3))
        shown = np.ma.masked_where(~lower | ~np.isfinite(values), values)
        im = ax.imshow(shown, cmap=_cmap("viridis"), vmin=0.0, vmax=1.0, interpolation="nearest")
        if bad.any():
            overlay = np.ma.masked_where(~bad, np.ones_like(values))
            ax.imshow(overlay, cmap=_single_color("red"), vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(f"exp({name}(a)), {dtype}: {int(bad.sum())} wrong (red)")
        ax.set_xlabel("j (source)")
        ax.set_ylabel("i (target)")
    fig.colorbar(im, ax=list(axes), label="L[i, j]")
    fig.suptitle(title or "Segment sums: the naive difference of cumulative sums loses the decay")
    return fig


def _single_color(color: str):
    from matplotlib.colors import ListedColormap

    return ListedColormap([color])


# -- rung 3: the block decomposition of the SSD matrix ----------------------------------------------------
def ssd_matrix(dt, A, B, C, *, batch: int = 0, head: int = 0, scale_by_dt: bool = False):
    """The (l × l) SSD matrix of one head, ``M = L ∘ C Bᵀ``, ``M[i, j] = L[i, j] · (C_i · B_j)`` (float64
    tensor), so that ``y[:, head] = M @ (dt·x)[:, head]`` (without D, z or an initial state). This is the
    series' one convention (notebooks 02 and 03), the paper's: its input X is our ``dt·x``.

    dt (b, l, h) processed; A (h,); B, C (b, l, g, n); head ``head`` uses group ``head // (h // g)``.
    ``scale_by_dt=True`` folds the ``dt_j`` column scaling into M (then ``y = M @ x``).
    """
    import torch

    from ..reference import segsum

    dt, A, B, C = (torch.as_tensor(v).detach().to("cpu", torch.float64) for v in (dt, A, B, C))
    if dt.ndim != 3 or B.ndim != 4 or C.shape != B.shape or A.shape != (dt.shape[2],):
        raise ValueError(
            "expected dt (b, l, h), A (h,), B and C (b, l, g, n); got "
            f"dt {tuple(dt.shape)}, A {tuple(A.shape)}, B {tuple(B.shape)}, C {tuple(C.shape)}"
        )
    h, g = dt.shape[2], B.shape[2]
    if h % g:
        raise ValueError(f"ngroups={g} must divide nheads={h}")
    grp = head // (h // g)
    a = dt[batch, :, head] * A[head]  # (l,)
    L = torch.exp(segsum(a))  # (l, l)
    CB = C[batch, :, grp] @ B[batch, :, grp].T  # (l, l)
    M = L * CB
    if scale_by_dt:
        M = M * dt[batch, :, head][None, :]
    return M


def plot_ssd_blocks(
    M,
    chunk_size: int,
    *,
    annotate_rank: bool = True,
    rank_rtol: float = 1e-9,
    ax=None,
    title: str | None = None,
) -> Figure:
    """The SSD matrix M (l × l) of one head cut into chunks of ``chunk_size``: diagonal blocks (orange; the
    within-chunk part, computed as a small quadratic form) and the blocks below them (blue; the between-chunk
    part, each of rank ≤ n because it factors through the chunk's state). Each off-diagonal block is labelled
    with its numerical rank (singular values above ``rank_rtol`` × the largest), each diagonal block with its
    size. Values are shown on a symmetric-log colour scale; the upper triangle (zero) is grey.
    """
    M = _np(M)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"M must be a square (l, l) matrix, got shape {M.shape}")
    l = M.shape[0]
    edges = [0, *_chunk_edges(l, chunk_size), l]
    nchunks = len(edges) - 1
    upper = np.triu(np.ones((l, l), dtype=bool), k=1)
    vmax = float(np.abs(M[~upper]).max()) or 1.0
    fig, ax = _new_axes(ax, figsize=(7.0, 6.0))
    norm = SymLogNorm(linthresh=vmax * 1e-3, vmin=-vmax, vmax=vmax)
    im = ax.imshow(np.ma.masked_where(upper, M), cmap=_cmap("RdBu_r"), norm=norm, interpolation="nearest")
    fig.colorbar(im, ax=ax, label="M[i, j] = L[i, j]·(C_i·B_j) (symmetric log scale)")
    for r in range(nchunks):
        r0, r1 = edges[r], edges[r + 1]
        for c in range(r + 1):
            c0, c1 = edges[c], edges[c + 1]
            diag = r == c
            ax.add_patch(
                Rectangle(
                    (c0 - 0.5, r0 - 0.5), c1 - c0, r1 - r0, fill=False,
                    edgecolor=_DIAG_COLOR if diag else _OFFDIAG_COLOR, linewidth=2.5 if diag else 2.0,
                    linestyle="-" if diag else "--",
                )
            )
            if diag:
                text = f"{r1 - r0}×{c1 - c0}"
            elif annotate_rank:
                block = M[r0:r1, c0:c1]
                sv = np.linalg.svd(block, compute_uv=False)
                rank = int((sv > rank_rtol * max(sv[0], np.finfo(float).tiny)).sum())
                text = f"rank {rank}"
            else:
                continue
            ax.text(
                (c0 + c1 - 1) / 2, (r0 + r1 - 1) / 2, text, ha="center", va="center", fontsize=9,
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85, "linewidth": 0},
            )
    ax.legend(
        handles=[
            Patch(facecolor="none", edgecolor=_DIAG_COLOR, linewidth=2.5,
                  label="diagonal blocks: within a chunk"),
            Patch(facecolor="none", edgecolor=_OFFDIAG_COLOR, linewidth=2.0, linestyle="--",
                  label="off-diagonal blocks: low rank (≤ n), via chunk states"),
        ],
        loc="upper right", fontsize="small",
    )
    ax.set_xlabel("j (input position)")
    ax.set_ylabel("i (output position)")
    ax.set_title(title or f"Block decomposition of the SSD matrix: {nchunks} chunks of {chunk_size}")
    return fig


def chunk_decay_matrix(dA, chunk_size: int):
    """The chunk-level decay matrix of one head: ``T[r, c] = exp(dA_total[c+1] + … + dA_total[r])`` for
    chunks ``c ≤ r`` (1 on the diagonal, 0 above it), with ``dA_total[c]`` the sum of ``dA = dt·A`` over
    chunk c: how much of a state leaving chunk c survives to the end of chunk r. It is the decay mask L one
    level up (``exp(segsum)`` of the chunk totals), the matrix form of state passing (notebook 03). float64,
    (nchunks, nchunks).
    """
    import torch

    from ..reference import segsum

    a = dA if isinstance(dA, torch.Tensor) else torch.as_tensor(np.asarray(dA))
    if a.ndim != 1:
        raise ValueError(f"dA must be 1-D (l,) for one head, got shape {tuple(a.shape)}")
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    a = a.detach().to("cpu", torch.float64)
    l = a.shape[0]
    nchunks = -(-l // chunk_size)
    padded = torch.zeros(nchunks * chunk_size, dtype=torch.float64)
    padded[:l] = a
    totals = padded.reshape(nchunks, chunk_size).sum(-1)
    return torch.exp(segsum(totals))


def plot_decay_blocks(dA, chunk_size: int, *, title: str | None = None) -> Figure:
    """Two panels for one head's log-decays ``dA = dt·A`` (l,) and a chunk size Q.

    Left: the decay mask ``L = exp(segsum(dA))`` (log10 colour scale) cut into chunks: the diagonal blocks
    (orange, solid: the small dual forms inside a chunk) and the off-diagonal blocks (blue, dashed: reached
    through the chunk states). Right: the chunk-level decay matrix of :func:`chunk_decay_matrix`, one entry
    per block, with its values written in (the state-passing recurrence as a matrix).
    """
    L = _decay_matrix(dA, "dA")
    l = L.shape[0]
    T = _np(chunk_decay_matrix(dA, chunk_size))
    nchunks = T.shape[0]
    edges = [0, *_chunk_edges(l, chunk_size), l]
    fig = Figure(figsize=(12.0, 5.2), layout="constrained")
    ax_l, ax_t = fig.subplots(1, 2, width_ratios=[1.25, 1.0])
    upper = np.triu(np.ones((l, l), dtype=bool), k=1)
    with np.errstate(divide="ignore"):
        logL = np.log10(L)
    shown = np.ma.masked_where(upper | ~np.isfinite(logL), logL)
    floor = -12.0
    im = ax_l.imshow(np.clip(shown, floor, 0), cmap=_cmap("viridis"), vmin=floor, vmax=0,
                     interpolation="nearest")
    fig.colorbar(im, ax=ax_l, label="log10 L[i, j] (clipped at 1e-12)")
    for r in range(nchunks):
        r0, r1 = edges[r], edges[r + 1]
        for c in range(r + 1):
            c0, c1 = edges[c], edges[c + 1]
            diag = r == c
            ax_l.add_patch(Rectangle(
                (c0 - 0.5, r0 - 0.5), c1 - c0, r1 - r0, fill=False,
                edgecolor=_DIAG_COLOR if diag else _OFFDIAG_COLOR, linewidth=2.0 if diag else 1.4,
                linestyle="-" if diag else "--", gid="diagonal block" if diag else "off-diagonal block",
            ))
    ax_l.set_xlabel("j (input position)")
    ax_l.set_ylabel("i (output position)")
    ax_l.set_title(f"decay mask L: l = {l}, {nchunks} chunks of Q = {chunk_size}")
    ax_l.legend(handles=[
        Patch(facecolor="none", edgecolor=_DIAG_COLOR, linewidth=2.0, label="diagonal: dual form in a chunk"),
        Patch(facecolor="none", edgecolor=_OFFDIAG_COLOR, linewidth=1.4, linestyle="--",
              label="off-diagonal: through the states"),
    ], loc="upper right", fontsize="small")
    with np.errstate(divide="ignore"):
        logT = np.log10(T)
    lower_t = np.tril(np.ones((nchunks, nchunks), dtype=bool))
    im_t = ax_t.imshow(np.ma.masked_where(~lower_t, np.clip(logT, floor, 0)), cmap=_cmap("viridis"),
                       vmin=floor, vmax=0, interpolation="nearest")
    if nchunks <= 16:
        for r in range(nchunks):
            for c in range(r + 1):
                ax_t.text(c, r, f"{T[r, c]:.2g}", ha="center", va="center", fontsize=8 if nchunks <= 8 else 6,
                          color="white" if logT[r, c] < -6 else "black")
    fig.colorbar(im_t, ax=ax_t, label="log10 T[r, c]")
    ax_t.set_xticks(range(nchunks))
    ax_t.set_yticks(range(nchunks))
    ax_t.set_xlabel("c (chunk whose state leaves)")
    ax_t.set_ylabel("r (chunk it reaches, at its end)")
    ax_t.set_title("chunk-level decay T = exp(segsum(chunk totals))")
    fig.suptitle(title or "The decay mask cut into chunks, and the decay between chunks")
    return fig


def decay_blocks_widget(seqlen: int = 64, *, seed: int = 0):
    """An ipywidgets control over :func:`plot_decay_blocks`: sliders for ``dt`` (it scales a fixed random
    pattern of ``seqlen`` step sizes, so the picture keeps some structure), ``A`` and the chunk size ``Q``;
    moving one redraws both panels. Needs a live Jupyter front end to be interactive (in a plain script or
    under nbval, it draws once with the initial values). Returns the ``ipywidgets.interactive`` object.
    """
    import ipywidgets as widgets
    import torch
    from IPython.display import display

    gen = torch.Generator().manual_seed(seed)
    pattern = torch.nn.functional.softplus(torch.randn(seqlen, generator=gen, dtype=torch.float64) * 1.5)

    def draw(dt: float, A: float, Q: int):
        display(plot_decay_blocks(dt * pattern * A, Q,
                                  title=f"dt = {dt:.3g} x (a fixed pattern), A = {A:.3g}, Q = {Q}"))

    return widgets.interactive(
        draw,
        dt=widgets.FloatLogSlider(value=0.1, base=10, min=-2.5, max=0.5, step=0.05, description="dt",
                                  continuous_update=False),
        A=widgets.FloatSlider(value=-1.0, min=-8.0, max=-0.05, step=0.05, description="A",
                              continuous_update=False),
        Q=widgets.Dropdown(options=[4, 8, 16, 32], value=16, description="Q (chunk)"),
    )


# -- costs ----------------------------------------------------------------------------------------------
def plot_cost_curves(
    shape=None,
    *,
    seqlens: Sequence[int] | None = None,
    batch: int | None = None,
    nheads: int | None = None,
    headdim: int | None = None,
    dstate: int | None = None,
    chunk_size: int | None = None,
    ngroups: int | None = None,
    bytes_per_element: int = 4,
    mark: int | None = None,
    title: str | None = None,
) -> Figure:
    """FLOPs (left) and working memory (right) of the recurrent, quadratic and chunked forms against the
    sequence length, log-log, from :mod:`mamba2_tutorial.lessons.costs`.

    Dimensions come from ``shape`` (an :class:`~mamba2_tutorial.lessons.inputs.SSDShape` or anything with the
    same attributes) and/or keywords (keywords win). ``seqlens`` defaults to powers of two from 64 to 65536;
    ``mark`` draws a vertical line at one length (e.g. the shape's own seqlen).
    """
    given = {"batch": batch, "nheads": nheads, "headdim": headdim, "dstate": dstate, "chunk_size": chunk_size,
             "ngroups": ngroups}
    dims = {key: getattr(shape, key, None) if value is None else value for key, value in given.items()}
    if dims["batch"] is None:
        dims["batch"] = 1
    if dims["ngroups"] is None:
        dims["ngroups"] = 1
    missing = [k for k, v in dims.items() if v is None]
    if missing:
        raise ValueError(f"plot_cost_curves needs {', '.join(missing)} (from shape= or keywords)")
    seqlens = list(seqlens) if seqlens is not None else [2**k for k in range(6, 17)]
    if not seqlens or min(seqlens) <= 0:
        raise ValueError(f"seqlens must be positive lengths, got {seqlens}")
    curves = {
        form: [
            costs.form_cost(form, seqlen=int(s), bytes_per_element=bytes_per_element, **dims)
            for s in seqlens
        ]
        for form in costs.FORMS
    }
    fig = Figure(figsize=(11.0, 4.5), layout="constrained")
    ax_f, ax_m = fig.subplots(1, 2)
    for form, values in curves.items():
        style = {"color": FORM_COLORS[form], "marker": "o", "markersize": 3}
        ax_f.plot(seqlens, [v.flops for v in values], label=form, **style)
        ax_m.plot(seqlens, [v.memory_bytes for v in values], label=form, **style)
    panels = ((ax_f, "FLOPs", "compute"), (ax_m, "bytes", "working memory (beyond inputs and outputs)"))
    for ax, ylabel, what in panels:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length l")
        ax.set_ylabel(ylabel)
        ax.set_title(what)
        ax.grid(True, which="major", alpha=0.3)
        if mark is not None:
            ax.axvline(mark, color="gray", linestyle=":", linewidth=1)
        ax.legend()
    d = dims
    fig.suptitle(
        title
        or (
            f"Cost against sequence length (b={d['batch']}, h={d['nheads']}, p={d['headdim']}, "
            f"n={d['dstate']}, g={d['ngroups']}, Q={d['chunk_size']}, {bytes_per_element}-byte elements)"
        )
    )
    return fig

