"""Figures for the Mamba-2 model (notebook 11): the training curves and what a block's state remembers.

Like :mod:`mamba2_tutorial.figures.ladder`, each function builds a :class:`matplotlib.figure.Figure` (no
pyplot state), labels its axes, titles it and returns it; nothing is shown.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

__all__ = ["plot_training", "plot_memory", "token_labels"]


def _np(a) -> np.ndarray:
    if hasattr(a, "detach"):
        a = a.detach().to("cpu").double().numpy()
    return np.asarray(a, dtype=np.float64)


def plot_training(result, *, chance: float | None = None, chance_in_context: float | None = None,
                  title: str | None = None) -> Figure:
    """Two panels: the training loss of every step (and its running mean), and the evaluation accuracy, with
    the accuracy of chance (a uniform guess among the values) and of a guess among the context's values."""
    losses = np.asarray(result.losses, dtype=np.float64)
    if losses.size == 0 or not result.accuracies:
        raise ValueError("result has no losses or no accuracies to plot")
    fig = Figure(figsize=(10.0, 3.8), layout="constrained")
    ax_loss, ax_acc = fig.subplots(1, 2)
    steps = np.arange(1, losses.size + 1)
    ax_loss.plot(steps, losses, color="tab:blue", alpha=0.3, lw=0.8, label="loss of the step")
    window = max(1, losses.size // 50)
    smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
    ax_loss.plot(steps[window - 1 :], smooth, color="tab:blue", lw=1.8, label=f"mean of {window} steps")
    ax_loss.set_xlabel("training step")
    ax_loss.set_ylabel("cross-entropy of the answers")
    ax_loss.set_title("loss")
    ax_loss.legend(loc="upper right")

    ax_acc.plot(result.eval_steps, result.accuracies, "o-", color="tab:green", ms=3, label="recall accuracy")
    if chance is not None:
        ax_acc.axhline(chance, color="tab:gray", ls="--", lw=1, label=f"chance ({chance:.0%})")
    if chance_in_context is not None:
        ax_acc.axhline(chance_in_context, color="tab:orange", ls=":", lw=1.2,
                       label=f"guess among the context's values ({chance_in_context:.0%})")
    ax_acc.set_ylim(0, 1.02)
    ax_acc.set_xlabel("training step")
    ax_acc.set_ylabel("accuracy on held-out sequences")
    ax_acc.set_title("accuracy")
    ax_acc.legend(loc="lower right")
    fig.suptitle(title or f"{result.steps} steps in {result.seconds:.0f} s on {result.cpu}")
    return fig


def token_labels(tokens, num_keys: int) -> list[str]:
    """Readable names for the tokens of a recall sequence: ``k3`` for key 3, ``v5`` for value 5."""
    return [f"k{int(t)}" if int(t) < num_keys else f"v{int(t) - num_keys}" for t in tokens]


def plot_memory(memory, labels: Sequence[str], *, batch: int = 0, heads: Sequence[int] | None = None,
                highlight: Sequence[int] = (), title: str | None = None) -> Figure:
    """What one block's state holds at one position: (top) the decay ``exp(dt_{s+1}·A + … + dt_t·A)`` per
    head (how much of token s is left), (bottom) each token's contribution ``‖term_s‖`` to the output at t,
    per head, scaled to each head's largest. ``memory`` is a
    :class:`~mamba2_tutorial.model.memory.MemoryAt`; ``labels`` names the tokens 0 … t; ``highlight`` marks
    positions (e.g. the pair a query asks for)."""
    decay = _np(memory.decay[batch])  # (h, t + 1)
    contrib = _np(memory.contribution[batch])  # (h, t + 1)
    nheads, length = decay.shape
    if len(labels) < length:
        raise ValueError(f"labels must name the {length} tokens 0 … {length - 1}, got {len(labels)}")
    heads = list(range(nheads)) if heads is None else list(heads)
    for hh in heads:
        if not 0 <= hh < nheads:
            raise ValueError(f"head index {hh} out of range for {nheads} heads")
    fig = Figure(figsize=(max(6.0, 0.42 * length + 2.5), 6.0), layout="constrained")
    ax_decay, ax_contrib = fig.subplots(2, 1, sharex=True, height_ratios=[1, 1.2])
    s = np.arange(length)
    for hh in heads:
        ax_decay.plot(s, decay[hh], "o-", ms=3, lw=1, label=f"head {hh}")
    ax_decay.set_yscale("log")
    ax_decay.set_ylabel("decay from s to t\n(log scale)")
    ax_decay.set_title(f"how much of each token the state still holds at t = {memory.position}")
    if len(heads) <= 8:
        ax_decay.legend(loc="lower right", fontsize=7, ncols=2)

    scaled = contrib[heads] / np.maximum(contrib[heads].max(axis=1, keepdims=True), 1e-30)
    image = ax_contrib.imshow(scaled, aspect="auto", cmap="magma", vmin=0, vmax=1, interpolation="nearest")
    ax_contrib.set_yticks(range(len(heads)), [str(hh) for hh in heads])
    ax_contrib.set_ylabel("head")
    ax_contrib.set_xlabel("token s")
    ax_contrib.set_xticks(s, list(labels[:length]), rotation=90, fontsize=8)
    ax_contrib.set_title(f"each token's term in the output at t = {memory.position} (per head, / its max)")
    for pos in highlight:
        for ax in (ax_decay, ax_contrib):
            ax.axvline(pos, color="tab:cyan", lw=1, ls="--")
        ax_contrib.add_patch(Rectangle((pos - 0.5, -0.5), 1, len(heads), fill=False, ec="tab:cyan", lw=2))
    fig.colorbar(image, ax=ax_contrib, label="‖term‖ / head max")
    if title:
        fig.suptitle(title)
    return fig
