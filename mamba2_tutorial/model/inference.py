"""Running a trained :class:`~mamba2_tutorial.model.lm.TinyMamba2LM`: greedy generation by prefill + decode.

The prompt goes through the model once (the *prefill*, with any SSD: the cuTile kernels, for instance), which
leaves each block's conv and SSM state; every next token then costs one :meth:`TinyMamba2LM.step`.
"""

from __future__ import annotations

import torch

from .tasks import RecallBatch

__all__ = ["generate", "answer_queries"]


@torch.no_grad()
def generate(model, prompt: torch.Tensor, max_new_tokens: int, *, ssd="cutile", backend: str = "auto"):
    """Greedy continuation: prompt (b, l) → the new tokens (b, max_new_tokens). The prompt is prefilled by the
    SSD ``ssd`` on ``backend``; the new tokens come from decode steps."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be a non-negative int, got {max_new_tokens!r}")
    logits, states = model(prompt, ssd=ssd, backend=backend, return_states=True)
    token = logits[:, -1].argmax(-1)  # (b,)
    new = []
    for i in range(max_new_tokens):
        new.append(token)
        if i + 1 < max_new_tokens:
            logits_t, states = model.step(token, states)
            token = logits_t.argmax(-1)
    return torch.stack(new, 1) if new else prompt.new_zeros(prompt.shape[0], 0)


@torch.no_grad()
def answer_queries(model, batch: RecallBatch, *, ssd="cutile", backend: str = "auto"):
    """Answer a recall batch's queries one after the other, as a user would ask them: prefill the key-value
    context with the SSD ``ssd``, then decode ``q₁ → â₁``, feed â₁ back, ``q₂ → â₂``, and so on.

    Returns ``(answers (b, M), tokens (b, L))``: the model's answers and the sequence it saw, with its own
    answers in place of the true ones.
    """
    _, states = model(batch.context, ssd=ssd, backend=backend, return_states=True)
    answers, seen = [], [batch.context]
    for i in range(batch.queries.shape[1]):
        query = batch.queries[:, i]  # (b,)
        logits_t, states = model.step(query, states)
        answer = logits_t.argmax(-1)  # (b,)
        if i + 1 < batch.queries.shape[1]:
            _, states = model.step(answer, states)  # the answer becomes part of the text
        answers.append(answer)
        seen += [query[:, None], answer[:, None]]
    return torch.stack(answers, 1), torch.cat(seen, 1)
