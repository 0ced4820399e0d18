"""Every plot helper returns a labelled Figure, draws what it says, and rejects bad input by name."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from mamba2_tutorial.figures import ladder as plots
from mamba2_tutorial.lessons.checks import assert_close
from mamba2_tutorial.reference import segsum, ssd_recurrent

matplotlib.use("Agg")  # headless, as in CI (the helpers never touch pyplot anyway)

# distinct sizes for every dimension, a ragged length (45 = 2·16 + 13)
b, l, h, p, g, n, Q = 2, 45, 4, 3, 2, 5, 16


def _inputs(seed: int):
    gen = torch.Generator().manual_seed(seed)
    dt = torch.nn.functional.softplus(torch.randn(b, l, h, generator=gen) - 1.0)
    A = -torch.exp(torch.rand(h, generator=gen))
    B = torch.randn(b, l, g, n, generator=gen)
    C = torch.randn(b, l, g, n, generator=gen)
    x = torch.randn(b, l, h, p, generator=gen)
    return x, dt, A, B, C


def _check_labelled(fig: Figure, *, min_axes: int = 1) -> None:
    """Every data axes has x and y labels; the figure or each axes has a title; it renders with Agg."""
    assert isinstance(fig, Figure)
    data_axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(data_axes) >= min_axes
    suptitle = fig._suptitle.get_text() if fig._suptitle is not None else ""
    for ax in data_axes:
        assert ax.get_ylabel(), f"axes {ax} has no y label"
        assert ax.get_title() or suptitle, "no title"
    assert any(ax.get_xlabel() for ax in data_axes)
    FigureCanvasAgg(fig).draw()  # renders headless


def _colorbar_labels(fig: Figure) -> list[str]:
    return [ax.get_ylabel() for ax in fig.axes if ax.get_label() == "<colorbar>"]


@pytest.mark.parametrize("seed", [0, 1])
def test_plot_decay(seed):
    _, dt, A, _, _ = _inputs(seed)
    fig = plots.plot_decay(dt, A, batch=1, heads=[0, 3])
    _check_labelled(fig, min_axes=3)
    ax_dt, ax_step, ax_cum = fig.axes
    assert len(ax_dt.lines) == 2
    np.testing.assert_allclose(ax_dt.lines[1].get_ydata(), dt[1, :, 3].double().numpy())
    np.testing.assert_allclose(ax_step.lines[0].get_ydata(), torch.exp(dt[1, :, 0].double() * A[0]).numpy())
    assert ax_cum.get_yscale() == "log"


def test_plot_decay_rejects_mismatched_A():
    _, dt, A, _, _ = _inputs(0)
    with pytest.raises(ValueError, match="A"):
        plots.plot_decay(dt, A[:-1])


def test_plot_state_norms():
    states = torch.randn(b, l, h, p, n, generator=torch.Generator().manual_seed(3))
    fig = plots.plot_state_norms(states, batch=1, chunk_size=Q)
    _check_labelled(fig)
    ax = fig.axes[0]
    assert len(ax.lines) == h + len(range(Q, l, Q))  # one line per head, one per chunk boundary
    np.testing.assert_allclose(
        ax.lines[2].get_ydata(), torch.linalg.matrix_norm(states[1, :, 2].double()).numpy(), rtol=1e-12
    )
    fig2 = plots.plot_state_norms(states[0], heads=[1], log=True)
    assert fig2.axes[0].get_yscale() == "log" and len(fig2.axes[0].lines) == 1
    with pytest.raises(ValueError, match="states"):
        plots.plot_state_norms(states[0, 0])
    with pytest.raises(ValueError, match="head index"):
        plots.plot_state_norms(states, heads=[h])


@pytest.mark.parametrize("seed", [0, 2])
def test_plot_decay_mask_from_dA_and_from_L(seed):
    _, dt, A, _, _ = _inputs(seed)
    dA = dt[0, :, 1] * A[1]
    fig = plots.plot_decay_mask(dA, chunk_size=Q)
    _check_labelled(fig)
    assert _colorbar_labels(fig) and _colorbar_labels(fig)[0]
    image = fig.axes[0].images[0].get_array()
    L = torch.exp(segsum(dA.double())).numpy()
    lower = np.tril(np.ones((l, l), dtype=bool))
    np.testing.assert_allclose(image.data[lower], L[lower], rtol=1e-12)
    assert image.mask[~lower].all() and not image.mask[lower].any()
    # giving L directly draws the same picture; log=True draws log10 L
    same = plots.plot_decay_mask(torch.from_numpy(L)).axes[0].images[0].get_array()
    np.testing.assert_allclose(same.data[lower], L[lower], rtol=1e-12)
    logged = plots.plot_decay_mask(dA, log=True).axes[0].images[0].get_array()
    np.testing.assert_allclose(logged.data[lower], np.log10(L[lower]), rtol=1e-9, atol=1e-12)


def test_plot_decay_mask_of_a_packed_row_is_block_diagonal_with_its_boundaries_drawn():
    _, dt, A, _, _ = _inputs(1)
    dA = dt[0, :, 0] * A[0]
    cut = [3, l // 2]
    seq_idx = torch.zeros(l, dtype=torch.int32)
    for start in cut:
        seq_idx[start:] += 1
    fig = plots.plot_decay_mask(dA, seq_idx=seq_idx, chunk_size=Q)
    image = fig.axes[0].images[0].get_array()
    L = torch.exp(segsum(dA.double())).numpy()
    same = (seq_idx[:, None] == seq_idx[None, :]).numpy()
    lower = np.tril(np.ones((l, l), dtype=bool))
    np.testing.assert_allclose(image.data[lower], np.where(same, L, 0.0)[lower], rtol=1e-12)
    assert (image.data[lower & ~same] == 0).all() and (image.data[lower & same] > 0).all()
    red = [line for line in fig.axes[0].lines if line.get_color() == "red"]
    assert len(red) == 2 * len(cut)
    with pytest.raises(ValueError, match="seq_idx"):
        plots.plot_decay_mask(dA, seq_idx=seq_idx[:-1])


def test_plot_decay_mask_rejects_bad_shapes():
    with pytest.raises(ValueError, match="square"):
        plots.plot_decay_mask(torch.ones(3, 4))
    with pytest.raises(ValueError, match="dA"):
        plots.plot_decay_mask(torch.ones(3, 3), kind="dA")
    with pytest.raises(ValueError, match="kind"):
        plots.plot_decay_mask(torch.ones(3), kind="mask")
    with pytest.raises(ValueError, match="chunk_size"):
        plots.plot_decay_mask(torch.ones(3), chunk_size=0)


def test_plot_segsum_comparison_counts_wrong_entries():
    gen = torch.Generator().manual_seed(5)
    a = -torch.rand(40, generator=gen)
    clean = plots.plot_segsum_comparison(a)
    _check_labelled(clean, min_axes=2)
    assert all("0 wrong" in ax.get_title() for ax in clean.axes[:2])
    a_bad = a.clone()
    a_bad[3] = -1e6  # one huge decay: the naive cumsum difference loses every later short segment
    bad = plots.plot_segsum_comparison(a_bad)
    naive_title, stable_title = bad.axes[0].get_title(), bad.axes[1].get_title()
    assert "segsum_naive" in naive_title and "0 wrong" not in naive_title
    assert "0 wrong" in stable_title


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ssd_matrix_reproduces_the_recurrence(seed):
    x, dt, A, B, C = _inputs(seed)
    y = ssd_recurrent(x.double(), dt.double(), A.double(), B.double(), C.double())
    for batch, head in [(0, 0), (1, 3), (1, 1)]:
        M = plots.ssd_matrix(dt, A, B, C, batch=batch, head=head)  # L ∘ C Bᵀ: y = M @ (dt·x)
        assert M.shape == (l, l) and M.dtype == torch.float64
        yh = M @ (dt[batch, :, head, None].double() * x[batch, :, head].double())
        assert_close(yh, y[batch, :, head], name=f"M @ (dt·x) (batch {batch}, head {head})")
    M_nodt = plots.ssd_matrix(dt, A, B, C, head=2)
    M_dt = plots.ssd_matrix(dt, A, B, C, head=2, scale_by_dt=True)
    assert_close(M_nodt * dt[0, :, 2].double()[None, :], M_dt, name="dt scaling")
    with pytest.raises(ValueError, match="ngroups"):
        plots.ssd_matrix(dt[:, :, :3], A[:3], B, C)


def test_plot_ssd_blocks_labels_diagonal_and_low_rank_blocks():
    x, dt, A, B, C = _inputs(4)
    M = plots.ssd_matrix(dt, A, B, C, batch=1, head=3)
    fig = plots.plot_ssd_blocks(M, Q)
    _check_labelled(fig)
    assert _colorbar_labels(fig)[0]
    texts = sorted(t.get_text() for t in fig.axes[0].texts)
    # 3 chunks (16, 16, 13): 3 diagonal blocks with their sizes, 3 off-diagonal blocks of rank n = 5 < 16
    assert texts == sorted(["16×16", "16×16", "13×13", f"rank {n}", f"rank {n}", f"rank {n}"])
    assert len(fig.axes[0].patches) == 6
    assert "3 chunks of 16" in fig.axes[0].get_title()
    # a state larger than the chunk gives full-rank blocks, min(rows, cols): the rank is measured, not assumed
    gen = torch.Generator().manual_seed(0)
    Bw, Cw = torch.randn(1, l, 1, 40, generator=gen), torch.randn(1, l, 1, 40, generator=gen)
    slow = torch.full_like(A, -0.01)  # weak decay, so no singular value drops below the rank tolerance
    wide = plots.plot_ssd_blocks(plots.ssd_matrix(dt[:1], slow, Bw, Cw), Q)
    assert sorted(t.get_text() for t in wide.axes[0].texts if t.get_text().startswith("rank")) == [
        "rank 13", "rank 13", "rank 16"  # blocks (2, 0) and (2, 1) have 13 rows, block (1, 0) is 16 × 16
    ]
    no_rank = plots.plot_ssd_blocks(M, Q, annotate_rank=False)
    assert not [t for t in no_rank.axes[0].texts if t.get_text().startswith("rank")]
    with pytest.raises(ValueError, match="square"):
        plots.plot_ssd_blocks(M[:, :-1], Q)


@pytest.mark.parametrize(("length", "chunk"), [(37, 16), (64, 8), (5, 16)])
def test_chunk_decay_matrix_is_the_decay_between_chunk_ends(length, chunk):
    gen = torch.Generator().manual_seed(length)
    dA = -torch.rand(length, generator=gen, dtype=torch.float64)
    T = plots.chunk_decay_matrix(dA, chunk)
    nchunks = -(-length // chunk)
    assert T.shape == (nchunks, nchunks) and T.dtype == torch.float64
    L = torch.exp(segsum(dA))
    ends = [min((c + 1) * chunk, length) - 1 for c in range(nchunks)]
    for r in range(nchunks):
        for c in range(nchunks):
            # from the end of chunk c to the end of chunk r: the token-level L between those two positions
            want = L[ends[r], ends[c]].item() if c <= r else 0.0
            assert T[r, c].item() == pytest.approx(want, rel=1e-12, abs=1e-300)
    with pytest.raises(ValueError, match="1-D"):
        plots.chunk_decay_matrix(torch.ones(3, 3), 2)
    with pytest.raises(ValueError, match="chunk_size"):
        plots.chunk_decay_matrix(dA, 0)


def test_plot_decay_blocks_outlines_every_block_and_shows_T():
    gen = torch.Generator().manual_seed(3)
    dA = -0.2 * torch.rand(50, generator=gen)
    fig = plots.plot_decay_blocks(dA, 16)  # chunks of 16, 16, 16, 2
    ax_l, ax_t = fig.axes[:2]
    gids = [p.get_gid() for p in ax_l.patches]
    assert gids.count("diagonal block") == 4 and gids.count("off-diagonal block") == 6
    shown = ax_t.images[0].get_array()
    T = plots.chunk_decay_matrix(dA, 16).numpy()
    lower = np.tril(np.ones((4, 4), dtype=bool))
    np.testing.assert_allclose(10 ** shown.data[lower], T[lower], rtol=1e-9)
    assert shown.mask[~lower].all()
    assert sorted(t.get_text() for t in ax_t.texts).count("1") == 4  # ones on the diagonal
    assert "4 chunks of Q = 16" in ax_l.get_title()


def test_decay_blocks_widget_redraws_for_each_control():
    pytest.importorskip("ipywidgets")
    w = plots.decay_blocks_widget(seqlen=32)
    names = {c.description for c in w.children if hasattr(c, "description") and c.description}
    assert {"dt", "A", "Q (chunk)"} <= names
    controls = {c.description: c for c in w.children if hasattr(c, "description")}
    assert list(controls["Q (chunk)"].options) == [4, 8, 16, 32]
    assert controls["A"].max < 0  # A is a decay rate: negative
    calls = []
    import mamba2_tutorial.figures.ladder as module

    original = module.plot_decay_blocks
    module.plot_decay_blocks = lambda dA, Q, **kw: calls.append((dA.clone(), Q)) or original(dA, Q, **kw)
    try:
        controls["Q (chunk)"].value = 8
        controls["A"].value = -2.0
    finally:
        module.plot_decay_blocks = original
    assert [q for _, q in calls] == [8, 8]
    assert torch.allclose(calls[1][0], 2.0 * calls[0][0])  # dA = dt·pattern·A: doubling |A| doubles dA


def test_plot_cost_curves():
    class Shape:  # anything with SSDShape's attributes
        batch, nheads, headdim, dstate, ngroups, chunk_size = 2, 6, 5, 7, 3, 16

    seqlens = [32, 64, 128, 256, 512]
    fig = plots.plot_cost_curves(Shape(), seqlens=seqlens, mark=100)
    _check_labelled(fig, min_axes=2)
    ax_f, ax_m = fig.axes
    assert ax_f.get_xscale() == "log" and ax_f.get_yscale() == "log" and ax_m.get_yscale() == "log"
    curves = {line.get_label(): line for line in ax_f.lines if not line.get_label().startswith("_")}
    assert set(curves) == {"recurrent", "quadratic", "chunked"}
    q = curves["quadratic"].get_ydata()
    assert q[-1] / q[-2] == pytest.approx(4.0, rel=0.01)  # l²
    from mamba2_tutorial.lessons import costs

    dims = dict(batch=2, nheads=6, headdim=5, dstate=7, ngroups=3, chunk_size=16)
    expected = [costs.chunked_cost(seqlen=s, **dims).flops for s in seqlens]
    np.testing.assert_array_equal(curves["chunked"].get_ydata(), expected)
    # keywords override the shape
    fig2 = plots.plot_cost_curves(Shape(), seqlens=seqlens, chunk_size=32)
    assert "Q=32" in fig2._suptitle.get_text()
    with pytest.raises(ValueError, match="dstate"):
        plots.plot_cost_curves(batch=1, nheads=2, headdim=3, chunk_size=4)
