"""Training a tiny Mamba-2 language model on a CPU: seeded, with a progress bar.

The SSD runs as ``ssd_chunked`` by default, the reference ladder's chunked form: plain PyTorch, so autograd
gives its backward. ``ssd="cutile"`` trains through the cuTile forward and backward kernels instead
(notebook 12 compares the two loss curves). AdamW
with warmup and cosine decay; weight decay skips biases, norms, the embedding, and each block's A_log, D and
dt_bias (mamba_ssm's ``_no_weight_decay``). Loss and accuracy count only the answer positions of the task.
"""

from __future__ import annotations

import math
import platform
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .tasks import IGNORE, AssociativeRecall, RecallBatch

__all__ = ["TrainResult", "train_lm", "evaluate_lm", "recall_accuracy", "cpu_name"]


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux) and the number of threads torch uses."""
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{name}, {torch.get_num_threads()} threads"


def recall_accuracy(logits: torch.Tensor, batch: RecallBatch) -> float:
    """The fraction of answers whose logit is the largest: logits (b, L, vocab)."""
    predicted = logits[:, batch.query_positions].argmax(-1)  # (b, M)
    return (predicted == batch.answers).float().mean().item()


def _loss(logits: torch.Tensor, batch: RecallBatch) -> torch.Tensor:
    flat = logits.reshape(-1, logits.shape[-1])
    return F.cross_entropy(flat, batch.targets.reshape(-1), ignore_index=IGNORE)


def _device_of(model) -> torch.device:
    """Where the model's parameters live: the data is drawn on the CPU (the same sequences anywhere) and
    moved there."""
    return next(model.parameters()).device


@torch.no_grad()
def evaluate_lm(model, task: AssociativeRecall, *, batch_size: int = 256, seed: int = 1234, ssd="chunked",
             backend: str = "auto") -> float:
    """Recall accuracy on ``batch_size`` fresh sequences (seeded, so every call sees the same ones)."""
    batch = task.sample(batch_size, seed=seed, device=_device_of(model))
    was_training = model.training
    model.eval()
    try:
        return recall_accuracy(model(batch.tokens, ssd=ssd, backend=backend), batch)
    finally:
        model.train(was_training)


@dataclass
class TrainResult:
    """What :func:`train_lm` measured: the loss of every step, the accuracy at every evaluation, the time."""

    losses: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    accuracies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    steps: int = 0
    cpu: str = ""
    settings: dict = field(default_factory=dict)

    @property
    def final_accuracy(self) -> float:
        return self.accuracies[-1]

    def __str__(self) -> str:
        return (f"{self.steps} steps in {self.seconds:.1f} s ({self.cpu}): loss {self.losses[0]:.2f} -> "
                f"{self.losses[-1]:.2f}, accuracy {self.final_accuracy:.1%}")


def _param_groups(model, weight_decay: float):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        skip = getattr(p, "_no_weight_decay", False) or p.ndim < 2 or "embedding" in name
        (no_decay if skip else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def train_lm(model, task: AssociativeRecall, *, steps: int, batch_size: int = 64, lr: float = 3e-3,
             weight_decay: float = 0.1, warmup: int | None = None, eval_every: int | None = None,
             eval_batch: int = 256, seed: int = 0, progress: bool = True, ssd="chunked",
             threads: int | None = 1) -> TrainResult:
    """Train ``model`` on ``task`` for ``steps`` steps of ``batch_size`` fresh sequences; returns a
    :class:`TrainResult`. Seeded: the same seed and model initialisation give the same run.

    ``threads``: torch's CPU threads while training (restored after). The tensors of a tiny model are so small
    that one thread is as fast as several, and on a busy machine much faster (no threads waiting on each
    other); None keeps torch's setting."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    warmup = max(1, steps // 10) if warmup is None else warmup
    eval_every = max(1, steps // 20) if eval_every is None else eval_every
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(_param_groups(model, weight_decay), lr=lr, betas=(0.9, 0.95))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (
        1 + math.cos(math.pi * min(1.0, max(0, s - warmup) / max(1, steps - warmup)))))
    result = TrainResult(settings=dict(steps=steps, batch_size=batch_size, lr=lr, seed=seed,
                                       weight_decay=weight_decay, warmup=warmup))
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        _run(model, task, steps, batch_size, generator, optimizer, schedule, eval_every, eval_batch, ssd,
             progress, result)
    finally:
        torch.set_num_threads(previous_threads)
    model.eval()
    return result


def _run(model, task, steps, batch_size, generator, optimizer, schedule, eval_every, eval_batch, ssd,
         progress, result):
    from tqdm.auto import tqdm

    result.cpu = cpu_name()
    model.train()
    start = time.perf_counter()
    bar = tqdm(range(steps), desc="training", disable=not progress)
    for step in bar:
        batch = task.sample(batch_size, generator=generator, device=_device_of(model))
        loss = _loss(model(batch.tokens, ssd=ssd), batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        result.losses.append(loss.item())
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            result.eval_steps.append(step + 1)
            result.accuracies.append(evaluate_lm(model, task, batch_size=eval_batch, ssd=ssd))
            bar.set_postfix(loss=f"{result.losses[-1]:.3f}", accuracy=f"{result.accuracies[-1]:.1%}")
    result.seconds = time.perf_counter() - start
    result.steps = steps
