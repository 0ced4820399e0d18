"""Figures of the training benchmark (``python -m mamba2_tutorial bench-train``; notebooks 09 and 12).

- :func:`plot_training`: forward plus backward per shape and implementation, each bar split into the forward
  (solid) and the backward (light), with ours' speedup written above its bar;
- :func:`plot_backward_stages`: where the backward's time goes at one shape, the taught and the fast stage
  side by side (the record ``--stages`` adds).

Like :mod:`mamba2_tutorial.perf.plots`, each function takes a results object (a live run or the shipped JSON),
builds a :class:`matplotlib.figure.Figure` directly (no pyplot state), puts the device in the title and
returns the Figure; ``ax=`` draws into an existing Axes.
"""

from __future__ import annotations

from collections.abc import Mapping

from matplotlib.figure import Figure

from .bench_train import TRAIN_IMPLS, speedups
from .plots import IMPL_COLORS, _device, _new_axes

__all__ = ["plot_backward_stages", "plot_training"]

#: how each implementation is named in a legend
TRAIN_LABELS = {"cutile": "cuTile (ssd_forward)", "taught": "cuTile taught kernels",
                "mamba_ssm": "mamba_ssm (Triton)", "fla": "fla chunk_simple_gla (Triton)",
                "tilegym": "TileGym mamba2 (cuTile)"}


def _title(results: Mapping, what: str) -> str:
    return f"{what}, {results.get('dtype', '?')}\n{_device(results)}, {results.get('date', '')}"


def plot_training(results: Mapping, *, ax=None) -> Figure:
    """Median time of forward plus backward for every shape and implementation. Each bar is the training
    forward (solid) with the backward stacked on it (light: forward plus backward minus forward, the
    backward's share of a training step). An implementation that failed its gradient gate is marked "not
    timed" where its bar would be. Above ours, how many times faster it is than mamba_ssm and fla."""
    recs = results["shapes"]
    if not recs:
        raise ValueError("results have no 'shapes' records")
    names = [n for n in TRAIN_IMPLS if any(n in r["impls"] for r in recs)]
    fig, ax = _new_axes(ax, figsize=(max(6.4, 2.2 * len(recs)), 4.6))
    width = 0.8 / len(names)
    ratios = {over: speedups(results, over) for over in ("mamba_ssm", "fla")}
    top = max((e.get("fwd_bwd_ms", 0.0) for r in recs for e in r["impls"].values()), default=1.0)
    for j, name in enumerate(names):
        color = IMPL_COLORS.get(name, "tab:gray")
        label = TRAIN_LABELS.get(name, name)
        for i, rec in enumerate(recs):
            x = i - 0.4 + width * (j + 0.5)
            entry = rec["impls"].get(name)
            if entry is None:
                continue
            if "fwd_bwd_ms" not in entry:
                ax.text(x, 0.02 * top, "not timed", rotation=90, ha="center", va="bottom", fontsize=7,
                        color=color)
                continue
            fwd, total = entry["fwd_ms"], entry["fwd_bwd_ms"]
            ax.bar(x, fwd, width, color=color, label=label)
            label = None   # one legend entry per implementation
            ax.bar(x, total - fwd, width, bottom=fwd, color=color, alpha=0.4)
            if name == "cutile":
                lines = [f"{r:.2f}x {over}" for over in ("mamba_ssm", "fla")
                         if (r := ratios[over].get(rec["name"]))]
                if lines:
                    ax.annotate("\n".join(lines), (x, total), textcoords="offset points", xytext=(0, 3),
                                ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(recs)), [r["name"] for r in recs], fontsize=8)
    ax.set_xlabel("benchmark shape")
    ax.set_ylabel("forward (solid) + backward (light), median ms")
    ax.set_ylim(0, top * 1.25)
    ax.set_title(_title(results, "Training step of the SSD: forward plus backward"), fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def _stage_pairs(stages: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """``{"state grads, kernels 1-2": {"taught": ms, "fast": ms}, ...}`` from ``"<stage> (taught|fast)"``."""
    pairs: dict[str, dict[str, float]] = {}
    for label, ms in stages.items():
        stage, _, variant = label.rpartition(" (")
        if not stage or variant[:-1] not in ("taught", "fast"):
            raise ValueError(f"stage label {label!r} does not end in ' (taught)' or ' (fast)'")
        pairs.setdefault(stage, {})[variant[:-1]] = ms
    return pairs


def plot_backward_stages(results: Mapping, name: str | None = None, *, ax=None) -> Figure:
    """The backward stage by stage at one shape (default: the first with stages): horizontal bars, taught
    and fast side by side, each stage labelled with how many times faster its fast version is."""
    stages_by_shape = results.get("stages") or {}
    if not stages_by_shape:
        raise ValueError("results have no 'stages' (run bench-train with --stages)")
    name = name or next(iter(stages_by_shape))
    if name not in stages_by_shape:
        raise ValueError(f"no stages for {name!r}; the results have {sorted(stages_by_shape)}")
    pairs = _stage_pairs(stages_by_shape[name])
    fig, ax = _new_axes(ax, figsize=(7.2, 0.7 * len(pairs) + 1.6))
    colors = {"taught": IMPL_COLORS["taught"], "fast": IMPL_COLORS["cutile"]}
    h = 0.38
    labels = {"taught": "taught kernels", "fast": "fast path"}
    for i, times in enumerate(pairs.values()):
        for k, variant in enumerate(("taught", "fast")):
            if variant not in times:
                continue
            y = i + (k - 0.5) * h
            ax.barh(y, times[variant], h, color=colors[variant], label=labels.pop(variant, None))
            ax.annotate(f"{times[variant]:.3f}", (times[variant], y), textcoords="offset points",
                        xytext=(3, 0), va="center", fontsize=7)
    ticks = [stage + (f"\nfast: {t['taught'] / t['fast']:.2f}x" if len(t) == 2 and t["fast"] > 0 else "")
             for stage, t in pairs.items()]
    ax.set_yticks(range(len(pairs)), ticks, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("median ms, each stage timed alone")
    ax.set_title(_title(results, f"The backward stage by stage at {name}"), fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, axis="x", alpha=0.3)
    return fig
