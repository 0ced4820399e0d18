"""A tiny Mamba-2 language model: embedding, a few residual Mamba-2 blocks, RMSNorm, a tied head.

::

    h      = embedding(tokens)                                   (b, l, d_model)
    h      = h + Mamba2Block(RMSNorm(h))      for each layer     pre-norm residual (mamba_ssm's LM)
    logits = RMSNorm(h) @ embeddingᵀ                             (b, l, vocab): the head shares the embedding

:meth:`TinyMamba2LM.forward` runs the whole sequence through any SSD (``ssd="chunked"`` to train,
``"cutile"`` for the kernels), also on packed rows (``seq_idx``); :meth:`TinyMamba2LM.step` advances one
token from the blocks' states.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from ..runtime.validation import validate_packing
from .block import Mamba2Block
from .decode import Mamba2State

__all__ = ["TinyMamba2LM", "ResidualLayer"]


class ResidualLayer(nn.Module):
    """``h + Mamba2Block(RMSNorm(h))``: one layer of the model."""

    def __init__(self, d_model: int, *, norm_eps: float = 1e-5, **block_kwargs):
        super().__init__()
        self.norm = nn.RMSNorm(d_model, eps=norm_eps)
        self.mixer = Mamba2Block(d_model, **block_kwargs)

    def forward(self, h, *, seq_idx=None, ssd=None, backend=None, return_state=False):
        out = self.mixer(self.norm(h), seq_idx=seq_idx, ssd=ssd, backend=backend, return_state=return_state)
        if return_state:
            return h + out[0], out[1]
        return h + out

    def step(self, h_t, state):
        out_t, state = self.mixer.step(self.norm(h_t), state)
        return h_t + out_t, state


class TinyMamba2LM(nn.Module):
    """A small Mamba-2 language model. ``block_kwargs`` go to every :class:`Mamba2Block` (d_state, headdim,
    chunk_size, ssd, ...).

    Initialisation as mamba_ssm's ``MambaLMHeadModel``: embedding N(0, 0.02), zero linear biases, and each
    block's ``out_proj`` scaled by 1/√n_layers so the residual stream does not grow with depth.
    """

    def __init__(self, vocab_size: int, *, d_model: int = 64, n_layers: int = 2, norm_eps: float = 1e-5,
                 **block_kwargs):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("d_model", d_model), ("n_layers", n_layers)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.vocab_size, self.d_model, self.n_layers = vocab_size, d_model, n_layers
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(ResidualLayer(d_model, norm_eps=norm_eps, **block_kwargs)
                                    for _ in range(n_layers))
        self.norm_f = nn.RMSNorm(d_model, eps=norm_eps)
        nn.init.normal_(self.embedding.weight, std=0.02)
        for layer in self.layers:
            for linear in (layer.mixer.in_proj, layer.mixer.out_proj):
                if linear.bias is not None:
                    nn.init.zeros_(linear.bias)
            with torch.no_grad():
                layer.mixer.out_proj.weight /= math.sqrt(n_layers)

    @property
    def blocks(self) -> list[Mamba2Block]:
        return [layer.mixer for layer in self.layers]

    def _check_tokens(self, tokens: torch.Tensor, name: str, ndim: int) -> None:
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tokens).__name__}")
        dims = "(b, l)" if ndim == 2 else "(b,)"
        if tokens.ndim != ndim:
            raise ValueError(f"{name} must have shape {dims}, got {tuple(tokens.shape)}")
        if tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"{name} must hold token ids (int64 or int32), got {tokens.dtype}")
        if tokens.numel() and not 0 <= int(tokens.min()) <= int(tokens.max()) < self.vocab_size:
            raise ValueError(f"{name} must lie in [0, {self.vocab_size}), got values in "
                             f"[{int(tokens.min())}, {int(tokens.max())}]")

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """The final RMSNorm and the tied head: (..., d_model) → logits (..., vocab)."""
        return self.norm_f(h) @ self.embedding.weight.T

    def forward(self, tokens: torch.Tensor, *, seq_idx: torch.Tensor | None = None,
                ssd: str | Callable | None = None, backend: str | None = None, return_states: bool = False):
        """tokens (b, l) → logits (b, l, vocab); with ``return_states`` also each block's
        :class:`Mamba2State` after the last token (the prefill for :meth:`step`).

        ``seq_idx`` (b, l) int32, non-decreasing, packs several sequences into a row (mamba_ssm's convention):
        every block resets its conv and its SSD state where it changes (nothing else in the model depends on
        the position), so each sequence's logits are those it gets alone; the states are then each row's last
        sequence's."""
        self._check_tokens(tokens, "tokens", 2)
        if seq_idx is not None:  # checked once here, before any block runs
            validate_packing(seq_idx, None, False, *tokens.shape, tokens.device)
        h = self.embedding(tokens)  # (b, l, d_model)
        states = []
        for layer in self.layers:
            if return_states:
                h, state = layer(h, seq_idx=seq_idx, ssd=ssd, backend=backend, return_state=True)
                states.append(state)
            else:
                h = layer(h, seq_idx=seq_idx, ssd=ssd, backend=backend)
        logits = self.head(h)
        return (logits, states) if return_states else logits

    def allocate_states(self, batch: int) -> list[Mamba2State]:
        return [block.allocate_state(batch) for block in self.blocks]

    def step(self, token_t: torch.Tensor, states: list[Mamba2State]):
        """One token for the whole batch: token_t (b,), states → ``(logits_t (b, vocab), new states)``."""
        self._check_tokens(token_t, "token_t", 1)
        if len(states) != self.n_layers:
            raise ValueError(f"states must hold one Mamba2State per layer ({self.n_layers}), "
                             f"got {len(states)}")
        h = self.embedding(token_t)  # (b, d_model)
        new_states = []
        for layer, state in zip(self.layers, states):
            h, state = layer.step(h, state)
            new_states.append(state)
        return self.head(h), new_states
