"""Figures of benchmark results: time and speedup against sequence length, our per-kernel breakdown against
each kernel's floor, the roofline picture (notebook 09); the staged steps from the taught kernels to the
shipped config as a waterfall and on the roofline (notebook 10).

Host-bound shapes (:func:`~mamba2_tutorial.perf.results.host_bound`) are flagged in the breakdown and shown
on the roofline at their device time too.

Every function takes a results object (the schema of :mod:`mamba2_tutorial.perf.results`: a live run or the
shipped H200 JSON), builds a :class:`matplotlib.figure.Figure` directly (no pyplot state), labels its axes,
puts the device in the title and returns the Figure. Pass ``ax=`` to draw into an existing Axes.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

from matplotlib.figure import Figure

from . import roofline
from .results import (
    DTYPE_BYTES,
    IMPL_LABELS,
    IMPLS,
    ceilings_of,
    device_ms,
    host_bound,
    presented_steps,
    speedup,
    stages_of,
    step_costs,
    step_is_fused,
    steps_record,
)

__all__ = [
    "IMPL_COLORS",
    "plot_time_vs_seqlen",
    "plot_speedup_vs_seqlen",
    "plot_kernel_breakdown",
    "plot_packed",
    "plot_roofline",
    "plot_steps_roofline",
    "plot_steps_waterfall",
    "summary_figure",
]

IMPL_COLORS = {"cutile": "tab:green", "taught": "tab:olive", "mamba_ssm": "tab:blue", "fla": "tab:orange",
               "tilegym": "tab:red", "torch": "tab:gray"}
_MARKERS = {"cutile": "o", "taught": "v", "mamba_ssm": "s", "fla": "^", "tilegym": "P", "torch": "D"}
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
        if host_bound(r):
            ax.annotate(f"host-bound:\ndevice {device_ms(r):.3g} ms\nof {e2e:.3g} end to end",
                        (i - w / 2, e2e), textcoords="offset points", xytext=(0, 4), ha="center",
                        va="bottom", fontsize=7, color="tab:red")
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
            hosted = [r for r in recs if r["ms"].get(impl) is not None and host_bound(r)]
            for j, r in enumerate(hosted):  # where the GPU would put a host-bound shape: its device time
                x = r["flops"] / r["bytes"]
                y_dev, y_e2e = (r["flops"] / (t * 1e-3) / 1e12 for t in (device_ms(r), r["ms"][impl]))
                ax.plot([x, x], [y_e2e, y_dev], color=IMPL_COLORS[impl], lw=0.8, ls=":")
                ax.scatter([x], [y_dev], marker=_MARKERS[impl], facecolors="none",
                           edgecolors=IMPL_COLORS[impl], zorder=3,
                           label="cuTile, device time of a host-bound shape" if j == 0 else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _log_ticks(ax)
    ax.set_xlabel("arithmetic intensity (counted tensor-core FLOPs / minimum bytes)")
    ax.set_ylabel("achieved TFLOP/s (counted FLOPs / median time)")
    ax.set_title(f"Roofline of the SSD forward\n{_device(results)}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def _log_ticks(ax) -> None:
    """Log axes labelled at 1, 2 and 5 times each power of ten, in plain numbers."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_locator(NullLocator())


def _step_label(i: int, name: str) -> str:
    return f"{i}. " + "\n".join(textwrap.wrap(name, 14))


def plot_steps_waterfall(results: Mapping, name: str | None = None, *, ax=None,
                         min_gain: float | None = None) -> Figure:
    """The staged steps at one shape (default: the first measured) as a waterfall: each step's time as a
    stack of its stages, each timed alone (the taught kernels' three, then the fused state stage and the
    scan), a black tick at its end-to-end time, a dashed step from the time before with the change it bought
    written above, and the floor of the step's design (short dashes) over the whole forward's floor
    (dotted). With ``min_gain``, a step that bought less than that fraction is merged into the next
    (``results.presented_steps``). ValueError where no step was timed."""
    rec = steps_record(results, name)
    steps = presented_steps(rec, min_gain) if min_gain is not None else rec["steps"]
    if all(st["ms"] is None for st in steps):
        raise ValueError(f"no step at {rec['name']} was timed: nothing to draw")
    ceilings = ceilings_of(results)
    fig, ax = _new_axes(ax, figsize=(max(6.4, 1.15 * len(steps) + 1.5), 4.8))
    w = 0.6
    seen: set[str] = set()
    prev = None
    top = max([st["ms"] for st in steps if st["ms"] is not None] or [1.0])
    for i, st in enumerate(steps):
        ms, km = st["ms"], st.get("kernels_ms") or {}
        if ms is None:
            ax.text(i, 0.02 * top, "not timed", rotation=90, ha="center", va="bottom", fontsize=7)
            continue
        bottom = 0.0
        for k in stages_of(km):
            ax.bar(i, km[k], w, bottom=bottom, color=KERNEL_COLORS[k], label=k if k not in seen else None)
            seen.add(k)
            bottom += km[k]
        if not km:
            ax.bar(i, ms, w, color="lightgray", label=None if "no stages" in seen else "no stage times")
            seen.add("no stages")
        ax.plot([i - w / 2, i + w / 2], [ms, ms], "k-", lw=2, label="end to end" if i == 0 else None)
        floor = sum(c.floor_ms(ceilings) for c in step_costs(rec, st).values())
        ax.plot([i - w / 2, i + w / 2], [floor, floor], color="k", ls=(0, (2, 1)), lw=1,
                label="floor of the step's design" if i == 0 else None)
        if prev is not None:
            ax.plot([i - 1 + w / 2, i - w / 2], [prev, prev], color="k", ls="--", lw=0.8)
            delta = ms - prev
            ax.annotate(f"{delta:+.3f} ms\n({prev / ms:.2f}x)", (i, max(ms, prev)),
                        textcoords="offset points", xytext=(0, 3), ha="center", va="bottom", fontsize=7,
                        color="tab:green" if delta < 0 else "tab:red")
        prev = ms
    nbytes = DTYPE_BYTES.get(rec["dtype"], 2)
    whole = roofline.floor_ms(rec["dims"], ceilings, io_bytes=nbytes, dt_bytes=nbytes)
    ax.axhline(whole, color="k", ls=":", lw=1, label="floor of the whole forward")
    ax.set_xticks(range(len(steps)), [_step_label(i, st["name"]) for i, st in enumerate(steps)], fontsize=7)
    ax.set_ylim(0, 1.22 * top)
    ax.set_xlabel("step (each adds one idea to the one before)")
    ax.set_ylabel("time per forward (ms, median)")
    d = rec["dims"]
    ax.set_title(f"From the taught kernels to the shipped config: {rec['name']} "
                 f"(p{d['p']} n{d['n']} g{d['g']} Q{d['Q']}, {rec['dtype']})\n{_device(results)}",
                 fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def plot_steps_roofline(results: Mapping, name: str | None = None, *, ax=None,
                        min_gain: float | None = None) -> Figure:
    """The staged steps at one shape on the roofline: achieved TFLOP/s (the forward's counted FLOPs over the
    step's end-to-end time) against the arithmetic intensity of the step's design (counted FLOPs over the
    bytes its stages move, ``roofline.kernel_costs``: fusing state passing moves the point right, since the
    chunk states no longer cross memory; the other steps move it up). The dotted line is the intensity of
    the whole forward (inputs read once, output written once), the best any design can reach. ``min_gain``
    merges steps as :func:`plot_steps_waterfall` does."""
    rec = steps_record(results, name)
    steps = presented_steps(rec, min_gain) if min_gain is not None else rec["steps"]
    ceilings = ceilings_of(results)
    peak, bw = ceilings.mma_flops_per_s / 1e12, ceilings.copy_bytes_per_s / 1e12
    nbytes = DTYPE_BYTES.get(rec["dtype"], 2)
    whole = roofline.forward_cost(rec["dims"], io_bytes=nbytes, dt_bytes=nbytes)
    fig, ax = _new_axes(ax)
    pts = []
    for i, st in enumerate(steps):
        if st["ms"] is None:
            continue
        costs = step_costs(rec, st).values()
        flops, nb = sum(c.flops for c in costs), sum(c.bytes for c in costs)
        pts.append((i, flops / nb, flops / (st["ms"] * 1e-3) / 1e12, step_is_fused(st)))
    if not pts:
        raise ValueError(f"no step at {rec['name']} was timed")
    xs_all = [p[1] for p in pts] + [whole.intensity, peak / bw]
    lo, hi = min(xs_all) / 3, max(xs_all) * 3
    xs = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    ax.plot(xs, [min(peak, bw * x) for x in xs], "k-", lw=1.5,
            label=f"roof: {peak:.0f} TFLOP/s, {bw:.2f} TB/s")
    ax.axvline(whole.intensity, color="k", ls=":", lw=1, label="intensity of the whole forward")
    ax.plot([p[1] for p in pts], [p[2] for p in pts], color="0.6", lw=0.8, zorder=2)
    for fused in (False, True):
        sel = [p for p in pts if p[3] == fused]
        if sel:
            ax.scatter([p[1] for p in sel], [p[2] for p in sel], marker="o" if fused else "s", zorder=3,
                       color="tab:green" if fused else "tab:olive",
                       label="fused state stage (one launch)" if fused else "taught state stage (two)")
    for i, x, y, _ in pts:
        ax.annotate(str(i), (x, y), textcoords="offset points", xytext=(5, -3) if i % 2 else (-11, -3),
                    fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _log_ticks(ax)
    ax.set_xlabel("arithmetic intensity of the step's design (FLOP per byte its stages move)")
    ax.set_ylabel("achieved TFLOP/s (counted FLOPs / median time)")
    ax.set_title(f"The steps on the roofline: {rec['name']} ({rec['dtype']})\n{_device(results)}",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
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


#: the runs of a ``bench --packed`` record that :func:`plot_packed` draws, in order, with their colors
PACKED_RUNS = (("cutile unpacked", "ours, unpacked", "tab:olive"),
               ("cutile packed", "ours, packed", "tab:green"),
               ("mamba_ssm packed", "mamba_ssm, packed (seq_idx)", "tab:blue"))


def plot_packed(results: Mapping, *, ax=None) -> Figure:
    """A ``bench --packed`` run (notebook 13): per shape, the forward and the forward plus backward of our
    packed rows, of the same rows unpacked, and of mamba_ssm's packed path, grouped bars of median device
    time. A run without a time (failed, or not run) is left out of its group."""
    records = results.get("packed") or []
    if not records:
        raise ValueError("results have no 'packed' records (run the benchmark with --packed)")
    fig, ax = _new_axes(ax, figsize=(7.2, 4.2))
    groups = [(rec["name"], suffix, rec["ms"]) for rec in records for suffix in ("", " fwd+bwd")]
    width = 0.8 / len(PACKED_RUNS)
    for i, (run, label, color) in enumerate(PACKED_RUNS):
        xs, ys = [], []
        for g, (_, suffix, ms) in enumerate(groups):
            if ms.get(run + suffix) is not None:
                xs.append(g + (i - (len(PACKED_RUNS) - 1) / 2) * width)
                ys.append(ms[run + suffix])
        if xs:
            ax.bar(xs, ys, width, color=color, label=label)
    ax.set_xticks(range(len(groups)), [f"{name}\n{'forward' if not suffix else 'fwd + bwd'}"
                                       for name, suffix, _ in groups], fontsize=8)
    ax.set_ylabel("time (ms, median)")
    ax.set_title(f"Packed rows against the same rows unpacked\n{_device(results)}", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return fig
