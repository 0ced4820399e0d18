"""Figures of benchmark results (notebook 09): time and speedup against sequence length, our per-kernel
breakdown against each kernel's floor, and the roofline picture.

Every function takes a results object (the schema of :mod:`mamba2_tutorial.perf.results`: a live run or the
shipped H200 JSON), builds a :class:`matplotlib.figure.Figure` directly (no pyplot state), labels its axes,
puts the device in the title and returns the Figure. Pass ``ax=`` to draw into an existing Axes.
"""

from __future__ import annotations

from collections.abc import Mapping

from matplotlib.figure import Figure

from .results import IMPL_LABELS, IMPLS, speedup, stages_of

__all__ = [
    "IMPL_COLORS",
    "plot_time_vs_seqlen",
    "plot_speedup_vs_seqlen",
    "plot_kernel_breakdown",
    "plot_roofline",
    "summary_figure",
]

IMPL_COLORS = {"cutile": "tab:green", "mamba_ssm": "tab:blue", "fla": "tab:orange", "torch": "tab:gray"}
_MARKERS = {"cutile": "o", "mamba_ssm": "s", "fla": "^", "torch": "D"}
KERNEL_COLORS = {"chunk_state": "tab:purple", "state_passing": "tab:brown", "chunk_state_passing": "tab:pink",
                 "chunk_scan": "tab:cyan"}


def _new_axes(ax, *, figsize=(6.4, 4.6)):
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def _device(results: Mapping) -> str:
    return str(results.get("device", "unknown device"))


def _sweep(results: Mapping) -> list[Mapping]:
    recs = sorted(results.get("sweep") or [], key=lambda r: r["dims"]["l"])
    if not recs:
        raise ValueError("results have no 'sweep' records (run the benchmark with --sweep L ...)")
    return recs


def _sweep_label(recs) -> str:
    d = recs[0]["dims"]
    return f"b{d['b']} h{d['h']} p{d['p']} n{d['n']} g{d['g']} Q{d['Q']}, {recs[0]['dtype']}"


def plot_time_vs_seqlen(results: Mapping, *, ax=None) -> Figure:
    """Median time per forward against sequence length, one line per implementation, and the roofline
    floor."""
    recs = _sweep(results)
    fig, ax = _new_axes(ax)
    ls = [r["dims"]["l"] for r in recs]
    for impl in IMPLS:
        pts = [(r["dims"]["l"], r["ms"][impl]) for r in recs if r["ms"].get(impl) is not None]
        if pts:
            ax.plot(*zip(*pts), marker=_MARKERS[impl], color=IMPL_COLORS[impl], label=IMPL_LABELS[impl])
    ax.plot(ls, [r["floor_ms"] for r in recs], "k--", lw=1, label="roofline floor")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _length_ticks(ax, ls)
    ax.set_xlabel("sequence length l")
    ax.set_ylabel("time per forward (ms, median)")
    ax.set_title(f"Time vs sequence length ({_sweep_label(recs)})\n{_device(results)}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def _length_ticks(ax, ls) -> None:
    ax.set_xticks(ls, [str(l) for l in ls])
    ax.minorticks_off()


def plot_speedup_vs_seqlen(results: Mapping, *, ax=None, include_torch: bool = False) -> Figure:
    """How many times faster ours is than each other implementation, against sequence length (the PyTorch
    reference, tens of times slower, only with ``include_torch``)."""
    recs = _sweep(results)
    fig, ax = _new_axes(ax)
    for impl in IMPLS:
        if impl == "cutile" or (impl == "torch" and not include_torch):
            continue
        pts = [(r["dims"]["l"], speedup(r, impl)) for r in recs]
        pts = [(l, s) for l, s in pts if s is not None]
        if pts:
            ax.plot(
                *zip(*pts), marker=_MARKERS[impl], color=IMPL_COLORS[impl], label=f"vs {IMPL_LABELS[impl]}"
            )
    ax.axhline(1.0, color="k", lw=1)
    ax.set_xscale("log", base=2)
    _length_ticks(ax, [r["dims"]["l"] for r in recs])
    ax.set_xlabel("sequence length l")
    ax.set_ylabel("speedup of cuTile (their time / ours)")
    ax.set_title(f"Speedup vs sequence length ({_sweep_label(recs)})\n{_device(results)}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def plot_kernel_breakdown(results: Mapping, *, ax=None) -> Figure:
    """Our kernels' times per shape (stacked bars) next to their roofline floors (hatched bars): the three
    kernels, or the two (``chunk_state_passing``, ``chunk_scan``) where ``ssd_forward`` fuses the first two.

    The end-to-end ``ssd_forward`` time is a black tick: above the stack means time outside the kernels (host
    work, launch gaps); the hatched stack is the design's floor.
    """
    recs = [r for r in results["shapes"] if r.get("cutile_kernels_ms")]
    if not recs:
        raise ValueError("results have no per-kernel times ('cutile_kernels_ms')")
    fig, ax = _new_axes(ax, figsize=(max(6.4, 1.9 * len(recs)), 4.6))
    w = 0.38
    seen: set[str] = set()
    for i, r in enumerate(recs):
        bottom_m = bottom_f = 0.0
        floors = r.get("kernel_floor_ms") or {}
        for k in stages_of(r["cutile_kernels_ms"]):
            m = r["cutile_kernels_ms"][k]
            label = k if k not in seen else None
            ax.bar(i - w / 2, m, w, bottom=bottom_m, color=KERNEL_COLORS[k], label=label)
            seen.add(k)
            bottom_m += m
            if k in floors:
                ax.bar(
                    i + w / 2,
                    floors[k],
                    w,
                    bottom=bottom_f,
                    color=KERNEL_COLORS[k],
                    alpha=0.35,
                    hatch="//",
                    edgecolor="k",
                    lw=0.3,
                )
                bottom_f += floors[k]
        e2e = r["ms"].get("cutile")
        if e2e is not None:
            ax.plot([i - w, i], [e2e, e2e], "k-", lw=2, label="ssd_forward end to end" if i == 0 else None)
    ax.set_xticks(range(len(recs)), [f"{r['name']}\nmeasured | floor" for r in recs], fontsize=8)
    ax.set_xlabel("benchmark shape")
    ax.set_ylabel("time (ms)")
    ax.set_title(
        f"Our kernels, each timed alone (solid) vs their roofline floors (hatched)\n{_device(results)}",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def plot_roofline(results: Mapping, *, ax=None, records: str = "shapes") -> Figure:
    """The roofline: achieved TFLOP/s (counted FLOPs / measured time) against arithmetic intensity (counted
    FLOPs / counted bytes), under the roof min(matrix rate, bandwidth × intensity) from the run's ceilings."""
    recs = [r for r in results[records] if r.get("flops") and r.get("bytes")]
    if not recs:
        raise ValueError(f"results['{records}'] have no counted 'flops' and 'bytes'")
    ceil = results["ceilings"]
    peak, bw = ceil["mma_tflops"], ceil["copy_tbps"]  # TFLOP/s, TB/s: TFLOP/s = TB/s x FLOP/B
    fig, ax = _new_axes(ax)
    intens = [r["flops"] / r["bytes"] for r in recs]
    lo, hi = min(intens + [peak / bw]) / 4, max(intens + [peak / bw]) * 4
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(
        xs, [min(peak, bw * x) for x in xs], "k-", lw=1.5, label=f"roof: {peak:.0f} TFLOP/s, {bw:.2f} TB/s"
    )
    ax.axvline(peak / bw, color="k", ls=":", lw=1)
    for impl in IMPLS:
        pts = [
            (r["flops"] / r["bytes"], r["flops"] / (r["ms"][impl] * 1e-3) / 1e12, r["name"])
            for r in recs
            if r["ms"].get(impl) is not None
        ]
        if not pts:
            continue
        ax.scatter(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker=_MARKERS[impl],
            color=IMPL_COLORS[impl],
            label=IMPL_LABELS[impl],
            zorder=3,
        )
        if impl == "cutile":
            for x, y, name in pts:
                ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, -10), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (counted tensor-core FLOPs / minimum bytes)")
    ax.set_ylabel("achieved TFLOP/s (counted FLOPs / median time)")
    ax.set_title(f"Roofline of the SSD forward\n{_device(results)}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def summary_figure(results: Mapping) -> Figure:
    """The four panels in one figure (``python -m mamba2_tutorial bench --plot FILE.png``)."""
    fig = Figure(figsize=(14, 10), layout="constrained")
    axes = fig.subplots(2, 2)
    panels = [
        (plot_time_vs_seqlen, axes[0, 0]),
        (plot_speedup_vs_seqlen, axes[0, 1]),
        (plot_kernel_breakdown, axes[1, 0]),
        (plot_roofline, axes[1, 1]),
    ]
    for fn, ax in panels:
        try:
            fn(results, ax=ax)
        except ValueError as exc:  # a panel whose data the run did not collect
            ax.text(0.5, 0.5, str(exc), ha="center", va="center", wrap=True, transform=ax.transAxes)
            ax.set_axis_off()
    return fig
