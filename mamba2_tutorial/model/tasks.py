"""A synthetic task that needs selective memory: multi-query associative recall (MQAR).

A sequence lists ``num_pairs`` key-value pairs, then asks for ``num_queries`` of the keys, each query followed
by its answer::

    k₁ v₁ k₂ v₂ … k_N v_N   q₁ a₁ q₂ a₂ … q_M a_M          (a_i is the value paired with key q_i)

At a query the model must emit the value that followed that key, possibly many tokens back: it has to store
which value came with which key (and nothing else) in its fixed-size state. Keys of one sequence are distinct;
values are drawn with replacement. The loss and the accuracy count only the answers.

Tokens: keys are ``0 … num_keys-1``, values ``num_keys … num_keys+num_values-1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["AssociativeRecall", "RecallBatch", "IGNORE"]

#: the target of positions that are not scored (torch's cross_entropy ignore_index)
IGNORE = -100


@dataclass(frozen=True)
class RecallBatch:
    """A batch of recall sequences.

    tokens (b, L) and targets (b, L) int64, with ``targets[:, t]`` the token expected *after* position t at
    a query position and IGNORE elsewhere; query_positions (M,), the positions of q₁ … q_M; pair_of_query
    (b, M), the index of the pair each query asks for (pair j sits at positions 2j and 2j + 1).
    """

    tokens: torch.Tensor
    targets: torch.Tensor
    query_positions: torch.Tensor
    pair_of_query: torch.Tensor

    @property
    def answers(self) -> torch.Tensor:
        """The expected answers (b, M)."""
        return self.targets[:, self.query_positions]

    @property
    def context(self) -> torch.Tensor:
        """The key-value pairs (b, 2N): everything before the first query."""
        return self.tokens[:, : int(self.query_positions[0])]

    @property
    def queries(self) -> torch.Tensor:
        """The query keys (b, M)."""
        return self.tokens[:, self.query_positions]


@dataclass(frozen=True)
class AssociativeRecall:
    """Multi-query associative recall with ``num_pairs`` pairs and ``num_queries`` queries per sequence."""

    num_keys: int = 32
    num_values: int = 32
    num_pairs: int = 8
    num_queries: int = 4

    def __post_init__(self):
        for name in ("num_keys", "num_values", "num_pairs", "num_queries"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.num_pairs > self.num_keys:
            raise ValueError(f"num_pairs {self.num_pairs} needs as many distinct keys; "
                             f"num_keys is {self.num_keys}")
        if self.num_queries > self.num_pairs:
            raise ValueError(f"num_queries {self.num_queries} must be at most num_pairs {self.num_pairs}")

    @property
    def vocab_size(self) -> int:
        return self.num_keys + self.num_values

    @property
    def seq_len(self) -> int:
        return 2 * (self.num_pairs + self.num_queries)

    @property
    def chance(self) -> float:
        """Accuracy of a uniform guess among the value tokens."""
        return 1.0 / self.num_values

    @property
    def chance_in_context(self) -> float:
        """Accuracy of a guess among the values of the context, which needs no memory of which key came
        with which value: at most about 1 / num_pairs (more only when values repeat)."""
        return 1.0 / self.num_pairs

    def is_value(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens >= self.num_keys

    def sample(self, batch: int, *, generator: torch.Generator | None = None, seed: int | None = None,
               device=None) -> RecallBatch:
        """``batch`` random sequences; pass a ``generator`` (or a ``seed``) for reproducible data."""
        if isinstance(batch, bool) or not isinstance(batch, int) or batch <= 0:
            raise ValueError(f"batch must be a positive int, got {batch!r}")
        if generator is None:
            generator = torch.Generator().manual_seed(0 if seed is None else seed)
        N, M = self.num_pairs, self.num_queries
        keys = torch.rand(batch, self.num_keys, generator=generator).argsort(-1)[:, :N]  # N distinct keys
        values = self.num_keys + torch.randint(self.num_values, (batch, N), generator=generator)
        pair_of_query = torch.rand(batch, N, generator=generator).argsort(-1)[:, :M]  # M distinct pairs
        q = keys.gather(1, pair_of_query)
        a = values.gather(1, pair_of_query)
        context = torch.stack([keys, values], -1).reshape(batch, 2 * N)  # k₁ v₁ k₂ v₂ …
        tokens = torch.cat([context, torch.stack([q, a], -1).reshape(batch, 2 * M)], 1)  # … q₁ a₁ q₂ a₂ …
        query_positions = 2 * N + 2 * torch.arange(M)
        targets = torch.full_like(tokens, IGNORE)
        targets[:, query_positions] = a
        dev = dict(device=device)
        return RecallBatch(tokens.to(**dev), targets.to(**dev), query_positions.to(**dev),
                           pair_of_query.to(**dev))
